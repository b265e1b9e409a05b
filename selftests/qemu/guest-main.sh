#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs inside the test guest (started by the initramfs /init, chrooted into
# the overlay of the host's root; stdout is the guest's second serial port,
# which run.sh shows live). Reads the job that run.sh wrote into the
# results share, /krdma-out/job (KRDMA_MODE, KRDMA_CMD, KRDMA_SIW_KO and
# every KRDMA_* variable of the host's environment), sets up the soft RDMA
# devices (guest-setup.sh), runs the mode, and leaves in /krdma-out:
#   started        guest uptime (s) when this script started
#   setup-status   exit status of guest-setup.sh
#   selftests/     run_tests.sh's results (check)
#   rmmod          check: "ok|fail|skip <note>" for removing krdma at the end
#                  (skip when a test left a task stuck in the kernel)
#   kmemleak*      check, kernels with kmemleak: see kmemleak.sh
#   dmesg          the kernel log at the end
#   status         exit status of the mode (written last: the guest finished)
# Every step is bounded: the mode ends KRDMA_GUEST_TIMEOUT/6 (60-900 s)
# before run.sh would kill the guest (run_tests.sh cuts its deadlines to
# fit, KRDMA_RUN_END_BY), and each step after it has a timeout of its own;
# a step stuck in the kernel is left behind, so that the guest still
# writes its results and powers off.
set -uo pipefail

out=/krdma-out
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 1
set -a
# shellcheck source=/dev/null
. "$out/job"
set +a
export KRDMA_GUEST=1 KRDMA_RESULTS=$out

read -r up _ </proc/uptime
echo "$up" >"$out/started"
echo "krdma-guest: kernel $(uname -r), $(nproc) CPUs, script started at ${up} s uptime, mode ${KRDMA_MODE}"

# Shortly before run.sh's timeout kills the guest, dump the blocked tasks
# and every CPU's backtrace into the kernel log (console.log on the host).
if [[ ${KRDMA_GUEST_TIMEOUT:-0} -gt 0 ]]; then
	t=$KRDMA_GUEST_TIMEOUT
	if ((t > 60)); then t=$((t - 20)); else t=$((t * 2 / 3)); fi
	(
		sleep "$t"
		echo "krdma-guest: about to time out; dumping blocked tasks and CPU backtraces to the kernel log"
		echo 1 >/proc/sys/kernel/sysrq
		echo w >/proc/sysrq-trigger
		echo l >/proc/sysrq-trigger
	) &
	watchdog=$!
fi

alive() { # pid: a thread of it is there and not a zombie
	local t s
	for t in /proc/"$1"/task/*; do
		s=
		read -r s 2>/dev/null <"$t/stat"
		s=${s##*) }
		[[ -n $s && $s != [ZX]* ]] && return 0
	done
	return 1
}

# bounded SECS CMD...: CMD with at most SECS seconds, then SIGTERM and
# SIGKILL; a CMD that SIGKILL does not end (D state) is left behind. Its
# output must go to a file or the console, not to a pipe that is waited
# on. Exit status: CMD's, or 124 when it was stopped or left behind. A
# helper shell waits for CMD and writes its exit status, read with a
# timeout: nothing polls while CMD runs (a benchmark is not disturbed).
exec {console}>&1
bounded() {
	local secs=$1 pid ofd fd rc=
	shift
	exec {ofd}>&1
	exec {fd}< <("$@" >&"$ofd" & echo "$!"; wait "$!"; echo "$?")
	exec {ofd}>&-
	read -r pid <&"$fd"
	if ! read -r -t "$secs" rc <&"$fd"; then
		echo "krdma-guest: $*: still running after ${secs} s; SIGTERM, SIGKILL" >&"$console"
		kill -TERM "$pid" 2>/dev/null
		if ! read -r -t 2 rc <&"$fd"; then
			kill -KILL "$pid" 2>/dev/null
			if ! read -r -t 3 rc <&"$fd"; then
				echo "krdma-guest: $*: stuck in the kernel (D state); left behind" >&"$console"
			fi
		fi
		rc=124
	fi
	exec {fd}<&-
	return "${rc:-124}"
}

# Seconds until the mode must be done
end_by=0
if [[ ${KRDMA_GUEST_TIMEOUT:-0} -gt 0 ]]; then
	reserve=$((KRDMA_GUEST_TIMEOUT / 6))
	((reserve >= 60)) || reserve=60
	((reserve <= 900)) || reserve=900
	end_by=$((KRDMA_GUEST_TIMEOUT - reserve))
fi
time_left() {
	local u
	read -r u _ </proc/uptime
	u=$((end_by - ${u%.*}))
	((u > 10)) || u=10
	echo "$u"
}

bash selftests/qemu/guest-setup.sh
setup_rc=$?
echo "$setup_rc" >"$out/setup-status"
if [[ -f /run/krdma-guest.env ]]; then
	set -a
	# shellcheck source=/dev/null
	. /run/krdma-guest.env
	set +a
fi

rc=0
case $KRDMA_MODE in
run)
	echo "krdma-guest: \$ $KRDMA_CMD"
	if ((end_by)); then
		bounded "$(time_left)" bash -c "$KRDMA_CMD"
	else
		bash -c "$KRDMA_CMD"
	fi
	rc=$?
	;;
demo | demo-workloads)
	if ((end_by)); then
		bounded "$(time_left)" bash "selftests/qemu/$KRDMA_MODE.sh"
	else
		bash "selftests/qemu/$KRDMA_MODE.sh"
	fi
	rc=$?
	;;
check)
	KRDMA_RUN_END_BY=$end_by selftests/run_tests.sh "$out/selftests"
	rc=$?
	# Tasks the tests left stuck in the kernel (run_tests.sh gave up on
	# them): rmmod would wait for them, for ever
	stuck=()
	if [[ -s $out/selftests/abandoned ]]; then
		while read -r p _; do
			alive "$p" && stuck+=("$p")
		done <"$out/selftests/abandoned"
	fi
	((${#stuck[@]} == 0)) ||
		echo "krdma-guest: still stuck in the kernel, left by the tests: ${stuck[*]}"
	# kmemleak (debug kernel only): scanned with krdma loaded and again
	# after rmmod (a scan takes ~45 s there)
	bounded 600 bash selftests/qemu/kmemleak.sh scan "$out"
	err=$(mktemp)
	if ((${#stuck[@]})); then
		echo "skip not tried: task(s) ${stuck[*]} of the tests stuck in the kernel (D state)" >"$out/rmmod"
	elif grep -q '^krdma ' /proc/modules; then
		bounded 120 rmmod krdma >"$err" 2>&1
		r=$?
		if ((r == 0)); then
			echo "ok removed" >"$out/rmmod"
		elif ((r == 124)); then
			echo "fail rmmod krdma did not return in 120 s" >"$out/rmmod"
			echo 1 >/proc/sys/kernel/sysrq
			echo w >/proc/sysrq-trigger
		else
			echo "fail rmmod krdma: $(tr '\n' ' ' <"$err")" >"$out/rmmod"
		fi
	elif [[ ! -f krdma.ko ]]; then
		echo "skip krdma.ko not built" >"$out/rmmod"
	elif [[ ${KRDMA_LOAD:-1} == 0 ]]; then
		echo "skip krdma not loaded (KRDMA_LOAD=0)" >"$out/rmmod"
	elif [[ ${KRDMA_LOADED:-0} != 1 ]]; then
		echo "fail krdma was never loaded (insmod failed at setup)" >"$out/rmmod"
	else
		echo "skip krdma no longer loaded at the end (a test removed it)" >"$out/rmmod"
	fi
	rm -f "$err"
	echo "krdma-guest: rmmod krdma: $(cat "$out/rmmod")"
	bounded 600 bash selftests/qemu/kmemleak.sh scan "$out"
	bounded 300 bash selftests/qemu/kmemleak.sh report "$out"
	;;
*)
	echo "krdma-guest: unknown mode '$KRDMA_MODE'"
	rc=2
	;;
esac

[[ -n ${watchdog:-} ]] && kill "$watchdog" 2>/dev/null
bounded 60 dmesg >"$out/dmesg" 2>&1
echo "$rc" >"$out/status"
echo "krdma-guest: done (exit $rc) at $(cut -d' ' -f1 /proc/uptime) s uptime"
