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
# arguments after it, optionally preceded by "timeout=SECS" (its own
# deadline); '#' starts a comment. Each program prints TAP (the kselftest
# harness does). Counted, at top level only (nested or '#' lines are
# ignored): `ok N ...` a pass, `ok N ... # SKIP ...` a skip, `not ok N ...`
# a failure, `1..0 # SKIP ...` one skip. On top of that, one failure for a
# program that is missing, times out, hangs, exits non-zero (other than 4,
# KSFT_SKIP) without a `not ok` line, prints no result at all, or prints
# fewer results than its plan announced. Exit 4 with no result line is one
# skip.
#
# A program runs in a session of its own, its output (stdout and stderr)
# going to its log and shown live. At its deadline its process group gets
# SIGTERM, KILL_AFTER seconds later SIGKILL. When it has ended, what is
# left of its process group and every process that still has its log open
# get SIGKILL (a daemon it started). A process still there HUNG_AFTER
# seconds after SIGKILL is stuck in the kernel (D state): the program
# counts as failed ("hung in D state"), the kernel stacks of every task in
# D state go to its log and to stdout (and, in the guest, sysrq-w to the
# kernel log), and the process is left behind, listed in RESULTS_DIR/
# abandoned; the next program runs.
#
# Writes to RESULTS_DIR (default: a new /tmp/krdma-results.XXXXXX):
#   <program>.tap   the program's output (stdout and stderr)
#   results         one line per program: "<pass> <fail> <skip> <program> [note]"
#   counts          the totals: "<pass> <fail> <skip>"
#   abandoned       "<pid> <program>" per process left behind (only if any)
# Prints everything on stdout as well, ending with
# "# run_tests: totals: N passed, N failed, N skipped".
# Exit status: 0 when nothing failed, 1 otherwise.
#
# Environment:
#   KRDMA_TEST_TIMEOUT=600    seconds per program (unless its timeout=)
#   KRDMA_TEST_KILL_AFTER=10  seconds from SIGTERM to SIGKILL
#   KRDMA_TEST_HUNG_AFTER=5   seconds from SIGKILL to "hung in D state"
#   KRDMA_RUN_END_BY=0        uptime (s) by which all must be done (the
#                             guest's deadline, guest-main.sh): a deadline
#                             is cut short to fit; a program that cannot
#                             start in time fails ("not run")
#   KRDMA_TESTS_LIST=selftests/tests.list
#   KRDMA_RUNNER_SELFTEST=1   run selftests/run_tests_hang.sh first (a
#                             program that hangs in D state)
#   KRDMA_RUNNER_KILL_SIGNAL=KILL  only for run_tests_selftest.sh, which
#                             stands in a catchable signal for SIGKILL
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
results=${1:-$(mktemp -d /tmp/krdma-results.XXXXXX)}
mkdir -p "$results" || exit 1
results=$(cd "$results" && pwd) || exit 1
list=${KRDMA_TESTS_LIST:-selftests/tests.list}
per_test_timeout=${KRDMA_TEST_TIMEOUT:-600}
kill_after=${KRDMA_TEST_KILL_AFTER:-10}
hung_after=${KRDMA_TEST_HUNG_AFTER:-5}
kill_sig=${KRDMA_RUNNER_KILL_SIGNAL:-KILL}
end_by=${KRDMA_RUN_END_BY:-0}

total_pass=0 total_fail=0 total_skip=0
: >"$results/results"
rm -f "$results/abandoned"

record() { # pass fail skip program note
	total_pass=$((total_pass + $1))
	total_fail=$((total_fail + $2))
	total_skip=$((total_skip + $3))
	echo "$1 $2 $3 $4${5:+ $5}" >>"$results/results"
	echo "# run_tests: $4: $1 passed, $2 failed, $3 skipped${5:+ ($5)}"
}

# now: milliseconds of uptime (monotonic, no fork)
clock() {
	local u
	read -r u _ </proc/uptime
	u=${u/./}
	now=$((10#$u * 10))
}

# st: the state letter of /proc/$1 (R, S, D, Z, ...), empty if gone
task_state() {
	local s=
	read -r s 2>/dev/null <"/proc/$1/stat"
	s=${s##*) }
	st=${s%% *}
}

# alive PID: a thread of it is there and not a zombie (a leader that
# exited is a zombie until its last thread, maybe stuck, goes); st: the
# state of that thread
alive() {
	local t
	task_state "$1"
	[[ -n $st ]] || return 1
	[[ $st != [ZX] ]] && return 0
	for t in /proc/"$1"/task/*; do
		task_state "${t#/proc/}"
		[[ -n $st && $st != [ZX] ]] && return 0
	done
	return 1
}

# wait_dead MS PID...: until none is alive, at most MS; 1 if one still is
wait_dead() {
	local end p
	clock
	end=$((now + $1))
	shift
	for p; do
		while alive "$p"; do
			clock
			((now < end)) || return 1
			sleep 0.1
		done
	done
	return 0
}

# exit_status SECS: the program's exit status from its helper (rc), within
# SECS seconds; 1 if it did not come (the program is still there). The end
# of the pipe without a status (the helper gone) counts as an end; what is
# still alive is found afterwards.
exit_status() {
	local r
	read -r -t "$1" rc <&"$status"
	r=$?
	((r <= 128))
}

# leftovers PGID LOG EXCEPT...: live processes of process group PGID or
# with LOG open, but not the EXCEPT ones nor this shell
leftovers() {
	local pg=$1 log=$2 d p s g pat
	local -A skip=() found=()
	shift 2
	for p in "$@" $$ $BASHPID; do skip[$p]=1; done
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		s=
		read -r s 2>/dev/null <"$d/stat"
		s=${s##*) } # state ppid pgrp ...
		read -r _ _ g _ <<<"$s"
		[[ $g == "$pg" && -z ${skip[$p]:-} ]] && alive "$p" && found[$p]=1
	done
	pat=${log//\\/\\\\}
	pat=${pat//\*/\\*}
	pat=${pat//\?/\\?}
	pat=${pat//\[/\\[}
	while IFS= read -r d; do
		p=${d#/proc/}
		p=${p%%/*}
		[[ -z ${skip[$p]:-} ]] && alive "$p" && found[$p]=1
	done < <(find /proc/[0-9]*/fd -maxdepth 1 -lname "$pat" 2>/dev/null)
	((${#found[@]} == 0)) || printf '%s\n' "${!found[@]}"
}

# pinned: pages pinned by FOLL_PIN now, system-wide (acquired - released).
# Logged around each program when it changes: a test that leaves pages
# pinned shows here even if its own check missed it (other pinners, the
# 9p share for one, pin for a while too, so this only reports).
pinned() {
	local k v a='' r=''

	# the per-CPU deltas folded in first (selftests/lib.sh, pins())
	echo 1 2>/dev/null >/proc/sys/vm/stat_refresh
	while read -r k v; do
		case $k in
		nr_foll_pin_acquired) a=$v ;;
		nr_foll_pin_released) r=$v ;;
		esac
	done </proc/vmstat
	pins=
	[[ -n $a && -n $r ]] && pins=$((a - r))
}

# ubufs: the user buffers (pinned user memory) krdma holds now, from its
# debugfs; empty when krdma is not loaded or debugfs not mounted
KRDMA_BUFFERS=${KRDMA_DEBUGFS:-/sys/kernel/debug/krdma}/buffers
ubufs_now() {
	local line n=0

	ubufs=
	[[ -r $KRDMA_BUFFERS ]] || return 0
	while IFS= read -r line; do
		[[ $line == *" kind=user "* ]] && n=$((n + 1))
	done 2>/dev/null <"$KRDMA_BUFFERS" || return 0
	ubufs=$n
}

# After a program that started with no user buffer in krdma: wait, up to
# KRDMA_RELEASE_S (60 s; krdma's teardown is bounded by its 5 s drains),
# for every one of its buffers to be released. A closed file's objects
# go from a work item, after the process is gone: polled, as nothing
# signals it. Sets $ubufs_left to what is still there after the bound.
ubufs_released() {
	local end

	ubufs_left=
	[[ $ubufs_before == 0 ]] || return 0
	clock
	end=$((now + ${KRDMA_RELEASE_S:-60} * 1000))
	for (( ; ; )); do
		ubufs_now
		[[ -z $ubufs || $ubufs == 0 ]] && return 0
		clock
		((now < end)) || break
		sleep 0.1
	done
	ubufs_left=$ubufs
}

# The kernel stacks of every task in D state and of the PIDs given
dump_stacks() {
	local t tid comm line
	local -A want=()

	for t; do want[$t]=1; done
	echo "# run_tests: kernel stacks of the tasks in D state${1:+ and of $*}:"
	for t in /proc/[0-9]*/task/[0-9]*; do
		tid=${t#/proc/}
		task_state "$tid"
		[[ $st == D || -n ${want[${tid%%/*}]:-} ]] || continue
		comm='?'
		read -r comm 2>/dev/null <"$t/comm"
		echo "# task ${tid##*/} of ${tid%%/*} ($comm), state $st:"
		if [[ -r $t/stack ]]; then
			while IFS= read -r line; do
				echo "#   $line"
			done 2>/dev/null <"$t/stack"
		fi
	done
	if [[ ${KRDMA_GUEST:-0} == 1 && -w /proc/sysrq-trigger ]]; then
		echo 1 >/proc/sys/kernel/sysrq
		echo w >/proc/sysrq-trigger
		echo "# run_tests: and sysrq-w: the blocked tasks into the kernel log"
	fi
}

programs=()
[[ ${KRDMA_RUNNER_SELFTEST:-0} == 1 ]] && programs+=("timeout=30 selftests/run_tests_hang.sh")
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
	timeout=$per_test_timeout
	if [[ ${argv[0]} == timeout=* ]]; then
		timeout=${argv[0]#timeout=}
		argv=("${argv[@]:1}")
	fi
	prog=${argv[0]:-"(nothing after timeout=)"}
	log=$results/$(echo "$prog" | tr '/' '_').tap
	if [[ ! -f $prog || ! -x $prog ]]; then
		echo "# run_tests: $prog: missing or not executable"
		record 0 1 0 "$prog" "missing or not executable"
		continue
	fi
	# The guest's own deadline comes first
	short=
	if ((end_by > 0)); then
		clock
		left=$((end_by - now / 1000 - kill_after - 2 * hung_after - 1))
		if ((left <= 0)); then
			echo "# run_tests: $prog: not run, the guest's time ran out"
			record 0 1 0 "$prog" "not run: the guest's time ran out"
			continue
		fi
		if ((left < timeout)); then
			timeout=$left
			short=" (cut short: the guest's time runs out)"
		fi
	fi
	clock
	echo "# run_tests: running $entry (timeout ${timeout}s$short) at $((now / 1000)) s uptime"
	: >"$log"
	pinned
	pins_before=$pins
	ubufs_now
	ubufs_before=$ubufs
	clock
	start=$now
	run=$prog
	[[ $run == /* ]] || run=./$prog
	# A helper shell starts the program, writes its pid, waits for it and
	# writes its exit status: read with a timeout, the wait for the end
	# or the deadline polls nothing. A program that SIGKILL does not end
	# (a thread in D state) never gets its status written: the helper is
	# left waiting, as the program is.
	exec {status}< <(
		setsid "$run" "${argv[@]:1}" </dev/null >>"$log" 2>&1 &
		echo "$!"
		wait "$!"
		echo "$?"
	) 2>/dev/null
	helper=$!
	read -r pid <&"$status"
	# The live view: ends once the helper has (all of the log shown)
	tail -s 0.2 --pid="$helper" -n +1 -F "$log" 2>/dev/null &
	tpid=$!

	timed_out=0 rc=
	if ! exit_status "$timeout"; then
		timed_out=1
		kill -TERM -- "-$pid" "$pid" 2>/dev/null
		if ! exit_status "$kill_after"; then
			kill "-$kill_sig" -- "-$pid" "$pid" 2>/dev/null
			exit_status "$hung_after"
		fi
	fi
	exec {status}<&-
	clock
	secs=$(((now - start) / 1000))

	# What is left: its process group, whatever holds its log open (the
	# program itself if SIGKILL did not end it: waited for above)
	mapfile -t rest < <(leftovers "$pid" "$log" "$tpid" "$pid")
	if ((${#rest[@]})); then
		kill "-$kill_sig" "${rest[@]}" 2>/dev/null
		wait_dead $((hung_after * 1000)) "${rest[@]}"
	fi
	hung=() killed=0
	for p in "$pid" "${rest[@]}"; do
		if alive "$p"; then
			hung+=("$p")
			echo "$p $prog" >>"$results/abandoned"
		elif [[ $p != "$pid" ]]; then
			killed=$((killed + 1))
		fi
	done
	# The live view: all of the log, then stop (tail ends on its own
	# within 0.2 s unless the helper waits for a program left behind)
	wait_dead 1000 "$tpid" || true
	kill "$tpid" 2>/dev/null
	wait "$tpid" 2>/dev/null

	if ((${#hung[@]})); then
		hung_states=
		for p in "${hung[@]}"; do
			alive "$p"
			hung_states+=" $p:$st"
		done
		echo "# run_tests: $prog: still there ${hung_after}s after SIG$kill_sig:$hung_states; left behind"
		dump_stacks "${hung[@]}" 2>&1 | tee -a "$log"
	fi

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
	if ((${#hung[@]})); then
		f=$((f + 1))
		if [[ $hung_states == *:D* ]]; then
			note="hung in D state"
		else
			note="still alive after SIG$kill_sig"
		fi
		((timed_out)) && note+=" after its ${timeout}s timeout"
		note+="; left behind: pid${hung_states}"
	elif ((timed_out)); then
		f=$((f + 1)) note="TIMED OUT after ${timeout}s$short"
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
	((killed == 0)) || note+="; killed $killed process(es) it left"
	clock
	t_rel=$now
	ubufs_released
	clock
	# krdma's teardown is bounded by 5 s drains: a longer wait is news
	((now - t_rel < 2000)) ||
		note+="; its buffers were released $(((now - t_rel) / 1000)) s after it ended"
	if [[ -n $ubufs_left ]]; then
		f=$((f + 1))
		note+="; $ubufs_left user buffer(s) still pinned by krdma ${KRDMA_RELEASE_S:-60}s after it ended"
		grep ' kind=user ' "$KRDMA_BUFFERS" 2>/dev/null | head -n 20 |
			sed 's/^/# run_tests: left: /'
	fi
	pinned
	[[ $pins_before == "$pins" ]] ||
		echo "# run_tests: $prog: pages pinned system-wide: $pins_before before, $pins after"
	record "$p" "$f" "$s" "$prog" "$note"
done

echo "$total_pass $total_fail $total_skip" >"$results/counts"
if [[ -s $results/abandoned ]]; then
	echo "# run_tests: left behind, stuck in the kernel: $(cut -d' ' -f1 "$results/abandoned" | paste -sd' ')"
fi
echo "# run_tests: totals: $total_pass passed, $total_fail failed, $total_skip skipped"
((total_fail == 0))
