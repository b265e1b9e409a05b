#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: scripts/bench.sh in one guest boot per installed Debian
# kernel, as make check picks them (KRDMA_KERNELS, GUEST_KVER; see
# check-kernels.sh), then, unless KRDMA_BENCH_BLK=0, scripts/bench-blk.sh
# in the last (newest) kernel's guest, after its bench.sh; then on the
# host scripts/bench.sh --report over every kernel's results (the tables
# of Documentation/benchmarks-results.rst, a section per kernel, the
# json keyed by kernel, benchmarks-<series>.png each, README.md's table)
# and bench-blk.sh --report. Prints each kernel's guest run and its
# directory; exits non-zero if a guest run or a report failed (a kernel
# whose run failed still gets its report, from what it wrote).
#
# Environment: KRDMA_KERNELS, GUEST_KVER (which kernels), KRDMA_BENCH_BLK
# (0: no bench-blk.sh), KRDMA_QEMU_TIMEOUT (seconds per guest; default
# 1800 + 900 per repeat), KRDMA_BENCH_* (scripts/bench.sh's, passed to
# the guest by run.sh: KRDMA_BENCH_REPEAT=1 for one repeat), DOCDIR
# (default Documentation).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
doc=${DOCDIR:-$repo/Documentation}

msg() { echo "krdma-bench: $*" >&2; }

"$repo/scripts/install-deps.sh" || exit 1

# shellcheck source=selftests/qemu/kernels.sh
. "$here/kernels.sh"
pick_kernels
if ((${#kernels[@]} == 0)); then
	msg "no installed kernel matches KRDMA_KERNELS=${KRDMA_KERNELS:-all} (scripts/install-deps.sh installs 6.1 and 6.12)"
	exit 1
fi
repeat=${KRDMA_BENCH_REPEAT:-3}
[[ $repeat =~ ^[1-9][0-9]*$ ]] || {
	msg "KRDMA_BENCH_REPEAT=$repeat: give a count, at least 1"
	exit 1
}
msg "kernels: ${kernels[*]}; $repeat repeats each"

rc=0
dirs=()
summary=()
blk_dir=
start=$SECONDS
for k in "${kernels[@]}"; do
	t0=$SECONDS
	cmd='scripts/bench.sh'
	if [[ ${KRDMA_BENCH_BLK:-1} != 0 && $k == "${kernels[-1]}" ]]; then
		# shellcheck disable=SC2016 # expanded in the guest
		cmd='scripts/bench.sh; st=$?; scripts/bench-blk.sh || st=1; exit $st'
	fi
	# run.sh says "booting (...), results in DIR": this run's own
	# directory (build/qemu/last may be another's by the time it ends)
	run_for_line '^krdma-qemu: booting .*, results in ' env GUEST_KVER="$k" \
		KRDMA_QEMU_TIMEOUT="${KRDMA_QEMU_TIMEOUT:-$((1800 + 900 * repeat))}" \
		"$here/run.sh" run "$cmd"
	run=${line##*results in }
	if [[ -z $line || ! -f $run/bench/meta.json ]]; then
		summary+=("$k: no results (run.sh exit $st)")
		rc=1
		continue
	fi
	((st == 0)) || rc=1
	dirs+=("$run/bench")
	[[ -d $run/bench-blk ]] && blk_dir=$run/bench-blk
	summary+=("$k: exit $st, $((SECONDS - t0)) s, $run/bench")
done

if ((${#dirs[@]} > 0)); then
	"$repo/scripts/bench.sh" --report "${dirs[@]}" "$doc" || rc=1
fi
if [[ -n $blk_dir ]]; then
	"$repo/scripts/bench-blk.sh" --report "$blk_dir" "$doc" || rc=1
fi
echo
echo "== krdma bench, every kernel ($((SECONDS - start)) s) =="
printf '%s\n' "${summary[@]}"
exit $rc
