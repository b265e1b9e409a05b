#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run every test program listed in selftests/tests.list and count their
# top-level TAP/KTAP results. Meant to run in the guest (selftests/qemu/run.sh
# check), with the soft RDMA devices and krdma.ko already set up; cwd does
# not matter (it changes to the repo root).
#
#   selftests/run_tests.sh [RESULTS_DIR]
#
# tests.list: one program per line, relative to the repo root, with optional
# arguments after it; '#' starts a comment. Each program prints TAP (the
# kselftest harness does). Counted, at top level only (nested or '#' lines
# are ignored): `ok N ...` a pass, `ok N ... # SKIP ...` a skip,
# `not ok N ...` a failure, `1..0 # SKIP ...` one skip. On top of that, one
# failure for a program that is missing, times out, exits non-zero (other
# than 4, KSFT_SKIP) without a `not ok` line, prints no result at all, or
# prints fewer results than its plan announced. Exit 4 with no result line
# is one skip.
#
# Writes to RESULTS_DIR (default: a new /tmp/krdma-results.XXXXXX):
#   <program>.tap   the program's output (stdout and stderr)
#   results         one line per program: "<pass> <fail> <skip> <program> [note]"
#   counts          the totals: "<pass> <fail> <skip>"
# Prints everything on stdout as well, ending with
# "# run_tests: totals: N passed, N failed, N skipped".
# Exit status: 0 when nothing failed, 1 otherwise.
#
# Environment: KRDMA_TEST_TIMEOUT (seconds per program, default 600).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
results=${1:-$(mktemp -d /tmp/krdma-results.XXXXXX)}
mkdir -p "$results" || exit 1
list=selftests/tests.list
per_test_timeout=${KRDMA_TEST_TIMEOUT:-600}

total_pass=0 total_fail=0 total_skip=0
: >"$results/results"

record() { # pass fail skip program note
	total_pass=$((total_pass + $1))
	total_fail=$((total_fail + $2))
	total_skip=$((total_skip + $3))
	echo "$1 $2 $3 $4${5:+ $5}" >>"$results/results"
	echo "# run_tests: $4: $1 passed, $2 failed, $3 skipped${5:+ ($5)}"
}

programs=()
if [[ -f $list ]]; then
	while IFS= read -r line || [[ -n $line ]]; do
		line=${line%%#*}
		line=${line#"${line%%[![:space:]]*}"} # trim
		line=${line%"${line##*[![:space:]]}"}
		[[ -n $line ]] && programs+=("$line")
	done <"$list"
else
	echo "# run_tests: no $list"
fi
echo "# run_tests: ${#programs[@]} program(s) from $list, results in $results"

for entry in "${programs[@]}"; do
	read -r -a argv <<<"$entry"
	prog=${argv[0]}
	log=$results/$(echo "$prog" | tr '/' '_').tap
	if [[ ! -f $prog || ! -x $prog ]]; then
		echo "# run_tests: $prog: missing or not executable"
		record 0 1 0 "$prog" "missing or not executable"
		continue
	fi
	echo "# run_tests: running $entry (timeout ${per_test_timeout}s)"
	start=$SECONDS
	run=$prog
	[[ $run == /* ]] || run=./$prog
	timeout -k 10 "$per_test_timeout" "$run" "${argv[@]:1}" </dev/null 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	secs=$((SECONDS - start))

	# pass fail skip plan planskip
	counts=$(awk '
		/^not ok [0-9]+/ { f++; next }
		/^ok [0-9]+/ { if (toupper($0) ~ /#[ \t]*SKIP/) s++; else p++; next }
		/^1\.\.[0-9]+/ {
			plan = substr($1, 4) + 0
			if (plan == 0 && toupper($0) ~ /#[ \t]*SKIP/) planskip = 1
		}
		END { printf "%d %d %d %d %d\n", p, f, s, plan, planskip }' "$log")
	read -r p f s plan planskip <<<"$counts"
	note="exit $rc, ${secs}s"
	if ((rc == 124 || rc == 137)); then
		f=$((f + 1)) note="TIMED OUT after ${per_test_timeout}s"
	elif ((p + f + s == 0)); then
		if ((planskip || rc == 4)); then
			s=1 note="skipped (exit $rc)"
		else
			f=1 note="no test result printed (exit $rc)"
		fi
	elif ((rc != 0 && rc != 4 && f == 0)); then
		f=$((f + 1)) note="exited $rc without a 'not ok' line"
	elif ((plan > p + f + s)); then
		f=$((f + 1)) note="only $((p + f + s)) of $plan planned results (exit $rc)"
	fi
	record "$p" "$f" "$s" "$prog" "$note"
done

echo "$total_pass $total_fail $total_skip" >"$results/counts"
echo "# run_tests: totals: $total_pass passed, $total_fail failed, $total_skip skipped"
((total_fail == 0))
