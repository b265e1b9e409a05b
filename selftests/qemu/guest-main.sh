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
#   kmemleak*      check, kernels with kmemleak: see kmemleak.sh
#   dmesg          the kernel log at the end
#   status         exit status of the mode (written last: the guest finished)
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
	bash -c "$KRDMA_CMD"
	rc=$?
	;;
demo)
	bash selftests/qemu/demo.sh
	rc=$?
	;;
check)
	selftests/run_tests.sh "$out/selftests"
	rc=$?
	# kmemleak (debug kernel only): scanned with krdma loaded and again
	# after rmmod
	bash selftests/qemu/kmemleak.sh scan "$out"
	if grep -q '^krdma ' /proc/modules; then
		if err=$(timeout 120 rmmod krdma 2>&1); then
			echo "ok removed" >"$out/rmmod"
		else
			echo "fail rmmod krdma: ${err//$'\n'/ }" >"$out/rmmod"
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
	echo "krdma-guest: rmmod krdma: $(cat "$out/rmmod")"
	bash selftests/qemu/kmemleak.sh scan "$out"
	bash selftests/qemu/kmemleak.sh report "$out"
	;;
*)
	echo "krdma-guest: unknown mode '$KRDMA_MODE'"
	rc=2
	;;
esac

[[ -n ${watchdog:-} ]] && kill "$watchdog" 2>/dev/null
dmesg >"$out/dmesg" 2>&1
echo "$rc" >"$out/status"
echo "krdma-guest: done (exit $rc) at $(cut -d' ' -f1 /proc/uptime) s uptime"
