#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The fuzzer's soak (make soak; not in make check): in the guest, runs
# selftests/krdma_fuzz again and again with random seeds and every family
# of actions including --remove, for SOAK_MINUTES (a run is started while
# time is left), and prints for each run its seed and report line:
#
#   soak: run N seed S: PASS|FAIL (exit E, T s): fuzz: CALLS calls, ...
#
# then a last line "N passed, N failed". A failed run's whole output is
# shown (its TAP, the scripted checks' messages) and kept in
# $KRDMA_RESULTS/soak/ when the guest has a results share. Replay a run
# with the seed it printed: make guest-run CMD='selftests/krdma_fuzz
# --seed S --calls C --remove'.
#
# Environment: SOAK_MINUTES (default 10), SOAK_CALLS (calls per run,
# default 30000), SOAK_ARGS (more krdma_fuzz arguments), SOAK_SEED (the
# first seed; default random: the next ones follow from it).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
minutes=${SOAK_MINUTES:-10}
calls=${SOAK_CALLS:-30000}
[[ $minutes =~ ^[0-9]+$ && $calls =~ ^[0-9]+$ ]] || {
	echo "krdma-soak: SOAK_MINUTES and SOAK_CALLS are numbers"
	echo "0 passed, 1 failed"
	exit 1
}
seed=${SOAK_SEED:-$(((RANDOM << 30 | RANDOM << 15 | RANDOM) ^ $$))}
keep=${KRDMA_RESULTS:+$KRDMA_RESULTS/soak}
[[ -n $keep ]] && mkdir -p "$keep"
log=$(mktemp /tmp/krdma-soak.XXXXXX)

echo "krdma-soak: kernel $(uname -r), ${minutes} min, ${calls} calls a run, first seed $seed"
pass=0 fail=0 n=0
end=$((SECONDS + minutes * 60))
while ((SECONDS < end)); do
	n=$((n + 1))
	t0=$SECONDS
	# shellcheck disable=SC2086 # SOAK_ARGS are arguments
	timeout -k 10 900 selftests/krdma_fuzz --seed "$seed" --calls "$calls" \
		--remove ${SOAK_ARGS:-} >"$log" 2>&1
	rc=$?
	report=$(grep -E '^fuzz: ' "$log" | tail -n1)
	if ((rc == 0)) && [[ -n $report ]]; then
		pass=$((pass + 1))
		echo "soak: run $n seed $seed: PASS (exit 0, $((SECONDS - t0)) s): $report"
	else
		fail=$((fail + 1))
		echo "soak: run $n seed $seed: FAIL (exit $rc, $((SECONDS - t0)) s): ${report:-no report line}"
		sed 's/^/  | /' "$log"
		[[ -n $keep ]] && cp "$log" "$keep/seed-$seed.tap"
	fi
	# The next seed: a step of a 64-bit LCG, kept positive
	seed=$(((seed * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff))
done
rm -f "$log"
echo "$pass passed, $fail failed"
((fail == 0))
