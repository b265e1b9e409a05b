#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A test program that hangs in D state, for the runner's self-test in the
# guest: run_tests.sh runs it first (with timeout=30) when
# KRDMA_RUNNER_SELFTEST=1, never otherwise. It freezes a small ext4
# (fsfreeze) and creates a file on it: the open() waits uninterruptibly in
# mnt_want_write(), and SIGKILL does not end it. A helper outside its
# session thaws the filesystem KRDMA_RUNNER_HANG_SECS (default 60) later,
# then the killed program goes. Meanwhile the hung task detector is off
# (its report would fail the kernel log check; put back at the thaw).
# Needs root, loop and ext4.
set -uo pipefail

secs=${KRDMA_RUNNER_HANG_SECS:-60}
ht=/proc/sys/kernel/hung_task_timeout_secs
dir=$(mktemp -d /tmp/krdma-hang.XXXXXX) || exit 1
echo "1..1"
modprobe -q loop 2>/dev/null
modprobe -q ext4 2>/dev/null
if ! { truncate -s 16M "$dir/img" && mkfs.ext4 -q "$dir/img" &&
	mkdir "$dir/mnt" && mount -o loop "$dir/img" "$dir/mnt"; }; then
	echo "ok 1 # SKIP cannot mount an ext4 image (loop, ext4)"
	exit 4
fi
old_ht=$(cat "$ht" 2>/dev/null)
[[ -n $old_ht ]] && echo 0 >"$ht"
if ! fsfreeze -f "$dir/mnt"; then
	umount "$dir/mnt"
	[[ -n $old_ht ]] && echo "$old_ht" >"$ht"
	echo "ok 1 # SKIP fsfreeze failed"
	exit 4
fi
# The thaw, in a session of its own, not holding our output
# shellcheck disable=SC2016 # expanded by that bash
setsid bash -c 'sleep "$1"; fsfreeze -u "$2/mnt"
	[[ -n $3 ]] && echo "$3" >"$4"
	sleep 1; umount -l "$2/mnt"; rm -rf "$2"' thaw "$secs" "$dir" "$old_ht" "$ht" \
	</dev/null >/dev/null 2>&1 &
echo "# $dir/mnt is frozen for ${secs}s; creating a file on it (D state)"
: >"$dir/mnt/file"
echo "not ok 1 the file was created: the filesystem was thawed before the runner gave up"
exit 1
