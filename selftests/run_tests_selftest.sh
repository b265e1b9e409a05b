#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A test of selftests/run_tests.sh itself, on the host (no guest, no kernel
# bug needed; selftests/qemu/run.sh check runs it first and counts it as one
# result). Fake test programs in a temporary directory:
#
#   daemon    starts a daemon (setsid) that keeps its stdout open, passes:
#             the runner goes on at once and kills the daemon
#   ignterm   ignores SIGTERM: SIGKILL at its deadline, one failure
#   survive   prints one ok, then ignores SIGTERM and SIGUSR1, which stands
#             in for SIGKILL here (KRDMA_RUNNER_KILL_SIGNAL=USR1): a process
#             that SIGKILL does not end (D state); left behind, one
#             failure, its stack in its log, the next programs run
#   zleader   the same, with its main thread gone (a zombie leader) and
#             another thread left: still there, left behind
#   mixed     ok, ok # SKIP, not ok, ok and exit 1; skip: 1..0 # SKIP
#   (missing) not there; late: passes, after the hang
#
# then a second run whose deadline (KRDMA_RUN_END_BY) cuts the first
# program short and leaves no time for the second, and a third whose
# programs leave a user buffer in a stand-in for krdma's debugfs, one
# released half a second after it ended, one never. About 21 s.
# Prints TAP; the last line is "run_tests self-test: N passed, N failed".
# shellcheck disable=SC2016,SC2034 # the checks are strings for eval
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
runner=$here/run_tests.sh
tmp=$(mktemp -d /tmp/krdma-runner-selftest.XXXXXX) || exit 1
cleanup() {
	local p _
	# what the runner left behind on purpose
	if [[ -f $tmp/res/abandoned ]]; then
		while read -r p _; do kill -KILL "$p" 2>/dev/null; done <"$tmp/res/abandoned"
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. "$here/lib.sh"
# no diagnostics after a failed check (and no $TMP): each run's output is
# shown whole before its checks
CHECK_DIAG=:
gone() { # pidfile: that process is not there (or a zombie)
	local p s=
	read -r p <"$1" || return 1
	read -r s 2>/dev/null <"/proc/$p/stat"
	s=${s##*) }
	[[ -z $s || $s == Z* ]]
}
has() { grep -qE -- "$2" "$1"; }

prog() { # name body
	printf '#!/bin/bash\n%s\n' "$2" >"$tmp/$1"
	chmod +x "$tmp/$1"
}
prog daemon 'setsid sleep 300 &
echo $! >'"$tmp"'/daemon.pid
echo "1..1"
echo "ok 1 started a daemon that keeps stdout open"'
prog ignterm 'trap "" TERM
echo $$ >'"$tmp"'/ignterm.pid
echo "1..1"
exec sleep 300'
prog survive 'trap "" TERM USR1
echo "1..2"
echo "ok 1 before the hang"
exec sleep 300'
printf '%s\n' '#!/usr/bin/python3' 'import ctypes, signal, threading, time' \
	'signal.signal(signal.SIGTERM, signal.SIG_IGN)' \
	'signal.signal(signal.SIGUSR1, signal.SIG_IGN)' \
	'threading.Thread(target=time.sleep, args=(300,)).start()' \
	'print("1..1", flush=True)' \
	'ctypes.CDLL(None).pthread_exit(None)' >"$tmp/zleader"
chmod +x "$tmp/zleader"
prog mixed 'echo "1..4"
echo "ok 1 a"
echo "ok 2 b # SKIP not here"
echo "not ok 3 c"
echo "  not ok 1 nested: not counted"
echo "ok 4 d"
exit 1'
prog skip 'echo "1..0 # SKIP nothing to do"; exit 4'
prog late 'echo "1..1"; echo "ok 1 ran after the hang"'
prog slow 'echo $$ >'"$tmp"'/slow.pid
echo "1..1"
sleep 60
echo "ok 1 too late"'

cat >"$tmp/list" <<EOF
# the runner's self-test
$tmp/daemon
timeout=2 $tmp/ignterm
timeout=1 $tmp/survive
timeout=1 $tmp/zleader
$tmp/mixed
$tmp/skip
$tmp/missing
$tmp/late
EOF

echo "TAP version 13"
echo "1..17"
unset KRDMA_GUEST KRDMA_RUN_END_BY KRDMA_RUNNER_SELFTEST
export KRDMA_TEST_TIMEOUT=20 KRDMA_TEST_KILL_AFTER=1 KRDMA_TEST_HUNG_AFTER=1
export KRDMA_RUNNER_KILL_SIGNAL=USR1 KRDMA_TESTS_LIST=$tmp/list
start=$SECONDS
timeout -k 5 60 "$runner" "$tmp/res" >"$tmp/out" 2>&1
rc=$?
secs=$((SECONDS - start))
sed 's/^/# /' "$tmp/out"
r=$tmp/res/results

check "the runner ends in less than 40 s ($secs s) and exits 1 ($rc)" \
	eval '((secs < 40 && rc == 1))'
check "totals: 5 passed, 5 failed, 2 skipped, in counts and on stdout" \
	eval '[[ $(cat "$tmp/res/counts") == "5 5 2" ]] &&
	      has "$tmp/out" "^# run_tests: totals: 5 passed, 5 failed, 2 skipped$"'
check "output is shown live and kept in the log" \
	eval 'has "$tmp/out" "^ok 1 started a daemon" &&
	      has "$tmp/res/_tmp_${tmp##*/}_daemon.tap" "^ok 1 started a daemon"'
check "a daemon keeping stdout open: the program passes, the daemon is killed" \
	eval 'has "$r" "^1 0 0 $tmp/daemon .*killed 1 process" && gone "$tmp/daemon.pid"'
check "a program ignoring SIGTERM: killed at its deadline, one failure" \
	eval 'has "$r" "^0 1 0 $tmp/ignterm TIMED OUT after 2s" && gone "$tmp/ignterm.pid"'
check "a program that SIGKILL does not end: its ok counted plus one failure, left behind" \
	eval 'has "$r" "^1 1 0 $tmp/survive still alive after SIGUSR1 after its 1s timeout; left behind: pid [0-9]+:S$"'
check "... listed in abandoned, still there" \
	eval 'has "$tmp/res/abandoned" "^[0-9]+ $tmp/survive$" &&
	      grep " $tmp/survive$" "$tmp/res/abandoned" | cut -d" " -f1 >"$tmp/survive.pid" &&
	      ! gone "$tmp/survive.pid"'
check "... its kernel stack in its log and on stdout" \
	eval 'has "$tmp/res/_tmp_${tmp##*/}_survive.tap" "^# task [0-9]+ of [0-9]+ \(sleep\), state S:" &&
	      has "$tmp/out" "^# task [0-9]+ of [0-9]+ \(sleep\), state S:"'
check "a program whose main thread ended, another still there: left behind too" \
	eval 'has "$r" "^0 1 0 $tmp/zleader still alive after SIGUSR1 after its 1s timeout; left behind: pid [0-9]+:S$" &&
	      has "$tmp/res/abandoned" "^[0-9]+ $tmp/zleader$"'
check "TAP counting: 2 passed, 1 failed, 1 skipped; nested lines ignored" \
	eval 'has "$r" "^2 1 1 $tmp/mixed "'
check "a skip plan with exit 4 is one skip; a missing program one failure" \
	eval 'has "$r" "^0 0 1 $tmp/skip skipped" && has "$r" "^0 1 0 $tmp/missing missing"'
check "the program after the hang ran and counts" \
	eval 'has "$r" "^1 0 0 $tmp/late " && [[ $(tail -n1 "$r") == "1 0 0 $tmp/late "* ]]'

# The guest's deadline: cut the first program short, leave none for the
# second (a deadline is waited for in full: no time is left after it)
printf '%s\n' "$tmp/slow" "$tmp/late" >"$tmp/list2"
read -r up _ </proc/uptime
KRDMA_TESTS_LIST=$tmp/list2 KRDMA_RUN_END_BY=$((${up%.*} + 6)) \
	timeout -k 5 60 "$runner" "$tmp/res2" >"$tmp/out2" 2>&1
rc=$?
sed 's/^/# /' "$tmp/out2"
r=$tmp/res2/results
check "KRDMA_RUN_END_BY: the deadline is cut short to fit" \
	eval 'has "$r" "^0 1 0 $tmp/slow TIMED OUT after [12]s \(cut short"'
check "KRDMA_RUN_END_BY: a program with no time left is not run, and fails" \
	eval 'has "$r" "^0 1 0 $tmp/late not run" && ((rc == 1))'
check "... and its process is gone" gone "$tmp/slow.pid"

# krdma's user buffers (a stand-in for its debugfs file): one released
# half a second after its program ended passes; one never released fails
# its program once KRDMA_RELEASE_S is over. The release is krdma's work,
# not the program's: it comes from here, as the runner kills whatever a
# program leaves running.
mkdir -p "$tmp/dbg"
: >"$tmp/dbg/buffers"
bufline='id=1 kind=user size=4096 pages=1 access=0x1 grants=0 dead=0'
prog frees 'echo "'"$bufline"'" >>'"$tmp"'/dbg/buffers
echo "1..1"; echo "ok 1 its buffer goes after it"
: >'"$tmp"'/frees.done'
prog keeps 'echo "'"$bufline"'" >>'"$tmp"'/dbg/buffers
echo "1..1"; echo "ok 1 its buffer stays"'
printf '%s\n' "$tmp/frees" "$tmp/keeps" >"$tmp/list3"
(
	for ((i = 0; i < 600; i++)); do
		[[ -e $tmp/frees.done ]] && break
		sleep 0.1
	done
	sleep 0.5
	: >"$tmp/dbg/buffers"
) &
releaser=$!
KRDMA_TESTS_LIST=$tmp/list3 KRDMA_DEBUGFS=$tmp/dbg KRDMA_RELEASE_S=5 \
	timeout -k 5 60 "$runner" "$tmp/res3" >"$tmp/out3" 2>&1
rc=$?
wait "$releaser"
sed 's/^/# /' "$tmp/out3"
r=$tmp/res3/results
check "a user buffer released after its program ended: it passes" \
	eval 'has "$r" "^1 0 0 $tmp/frees"'
check "a user buffer still there 5 s after: one failure, the buffer shown" \
	eval 'has "$r" "^1 1 0 $tmp/keeps .*1 user buffer\(s\) still pinned by krdma 5s after it ended" &&
	      has "$tmp/out3" "^# run_tests: left: id=1 kind=user" && ((rc == 1))'
echo "run_tests self-test: $((n - failed)) passed, $failed failed"
((failed == 0))
