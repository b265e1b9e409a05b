#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make soak: the fuzzer's soak (selftests/krdma_soak.sh) for SOAK_MINUTES
# (default 10) on every installed Debian kernel, one guest boot each, as
# make check picks them (KRDMA_KERNELS, GUEST_KVER). Prints each run's
# seed and report line, each kernel's "N passed, N failed" and last a
# total "N passed, N failed"; exits non-zero on any failed run.
#
# Environment: SOAK_MINUTES, SOAK_CALLS, SOAK_ARGS, SOAK_SEED (see
# krdma_soak.sh), KRDMA_KERNELS, GUEST_KVER (see check-kernels.sh).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

msg() { echo "krdma-soak: $*" >&2; }

"$repo/scripts/install-deps.sh" || exit 1

minutes=${SOAK_MINUTES:-10}
[[ $minutes =~ ^[0-9]+$ ]] || {
	msg "SOAK_MINUTES=$minutes: give minutes"
	echo "0 passed, 1 failed"
	exit 1
}
# shellcheck source=selftests/qemu/kernels.sh
. "$here/kernels.sh"
pick_kernels
if ((${#kernels[@]} == 0)); then
	msg "no installed kernel matches KRDMA_KERNELS=${KRDMA_KERNELS:-all}"
	echo "0 passed, 1 failed"
	exit 1
fi
msg "kernels: ${kernels[*]}, ${minutes} min each"

# What the guest script reads: SOAK_* are not KRDMA_* (run.sh passes only
# those), so they go on its command line
cmd="SOAK_MINUTES=$minutes"
for v in SOAK_CALLS SOAK_ARGS SOAK_SEED; do
	[[ -n ${!v:-} ]] && cmd+=" $v=$(printf '%q' "${!v}")"
done
cmd+=" selftests/krdma_soak.sh"

pass=0 fail=0 rc=0
summary=()
for k in "${kernels[@]}"; do
	# The last run starts before the time is up and takes at most 15 min
	run_for_line '^[0-9]+ passed, [0-9]+ failed$' env GUEST_KVER="$k" \
		KRDMA_QEMU_TIMEOUT="${KRDMA_QEMU_TIMEOUT:-$((minutes * 60 + 1200))}" \
		"$here/run.sh" run "$cmd"
	if [[ -z $line ]]; then
		summary+=("$k: no result line (run.sh exit $st)")
		fail=$((fail + 1))
		rc=1
		continue
	fi
	read -r p _ f _ <<<"${line//,/}"
	# A guest that failed with no failed run (a crash after the last
	# run, a timeout) is one failure more
	((st == 0 || f > 0)) || f=$((f + 1)) line+=" (guest run exit $st)"
	pass=$((pass + p)) fail=$((fail + f))
	((f == 0)) || rc=1
	summary+=("$k: $line")
done
echo
echo "== krdma soak, every kernel =="
printf '%s\n' "${summary[@]}"
echo "$pass passed, $fail failed"
exit $rc
