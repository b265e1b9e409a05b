#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# /init of the krdma guest's initramfs (busybox sh; built by run.sh).
# Loads the 9p/virtio/overlay modules listed in /modules.load, mounts the
# host's root (9p tag "hostroot", read-only) under an overlay with a tmpfs
# upper layer at /newroot, mounts the results share (9p tag "krdmaout",
# writable) at /newroot/krdma-out, then runs, chrooted,
#   <repo>/selftests/qemu/guest-main.sh     (repo read from krdma-out/repo)
# with its output on /dev/ttyS1 (the kernel console is ttyS0), and powers
# the machine off with `reboot -f` (QEMU runs with -no-reboot).
export PATH=/bin:/sbin

log() { echo "krdma-init: $*" >/dev/console; }

die() {
	log "FATAL: $*"
	echo "krdma-init: FATAL: $*" >/dev/ttyS1
	reboot -f
	sleep 10
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

while read -r m; do
	insmod "/lib/modules/$m" || die "insmod $m failed"
done </modules.load

mkdir -p /lower /rw /newroot
# The virtio device may be probed a moment after its driver is loaded.
n=0
until mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro,cache=loose hostroot /lower 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 100 ] || die "cannot mount the 9p share hostroot"
	usleep 50000
done
mount -t tmpfs -o mode=0755 tmpfs /rw || die "tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	die "cannot mount the overlay"

R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
# What udev would add: bash's <(...) needs /dev/fd.
ln -s /proc/self/fd $R/dev/fd
ln -s /proc/self/fd/0 $R/dev/stdin
ln -s /proc/self/fd/1 $R/dev/stdout
ln -s /proc/self/fd/2 $R/dev/stderr
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mkdir -p $R/krdma-out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 krdmaout $R/krdma-out ||
	die "cannot mount the 9p share krdmaout"
read -r repo <$R/krdma-out/repo || die "no krdma-out/repo"
# Fresh /tmp and /run, unless that would hide the repo (the overlay is
# writable anyway).
case $repo/ in /tmp/*) ;; *) mount -t tmpfs -o mode=1777 tmpfs $R/tmp ;; esac
case $repo/ in /run/*) ;; *) mount -t tmpfs -o mode=0755 tmpfs $R/run ;; esac

# Modules the kernel asks for (request_module) come from the chroot.
echo /sbin/krdma-modprobe >/proc/sys/kernel/modprobe
echo krdma-guest >/proc/sys/kernel/hostname

[ -f "$R$repo/selftests/qemu/guest-main.sh" ] || die "no $repo/selftests/qemu/guest-main.sh"
stty -F /dev/ttyS1 raw -echo 2>/dev/null

log "running $repo/selftests/qemu/guest-main.sh"
chroot $R /usr/bin/env -i \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root TERM=dumb LANG=C \
	/bin/bash "$repo/selftests/qemu/guest-main.sh" </dev/null >/dev/ttyS1 2>&1
log "guest-main.sh exited with $?"
# sync, for 10 s at most: a task stuck in the kernel must not keep the
# machine up (the results share is written through: nothing waits there)
sync &
p=$!
n=0
while [ $n -lt 100 ]; do
	st=
	read -r _ _ st _ 2>/dev/null </proc/$p/stat
	[ -z "$st" ] || [ "$st" = Z ] && break
	usleep 100000
	n=$((n + 1))
done
[ $n -lt 100 ] || log "sync did not return in 10 s; powering off anyway"
reboot -f
sleep 10
