#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma_blk (samples/krdma_blk, Documentation/blockdev.rst): the remote
# block device on krdma's kernel API, its server (krdma_blk_server.ko) and
# its client (krdma_blk.ko) in this guest, over rxe and over siw, each
# device a section of its own (a device that is absent or not ACTIVE skips
# its section, saying why). Runs as root in the guest test bed
# (selftests/qemu/guest-setup.sh: rxe0 on veth0 198.18.0.1, siw0 on veth2
# 198.18.1.1, krdma.ko loaded). Prints TAP.
#
# Per device (the server at the device's own address, size_mb=64, port
# 7740 by default):
#   attach         both modules load; the sysfs files are root only (attach
#                  and detach 0200, devices 0444); "ADDR PORT" attaches
#                  krdmablk0 (the lowest free index) within 30 s;
#                  /dev/krdmablk0 appears, 64 MiB (blockdev --getsize64),
#                  4 KiB logical blocks; devices says "krdmablk0 ADDR PORT
#                  67108864 Q 64 live" with Q = min(online CPUs, 4); the
#                  server's debugfs counts Q connections
#   dd             8 MiB from /dev/urandom at 13 MiB + 64 KiB, written with
#                  O_DIRECT (64 KiB requests); read back with O_DIRECT in
#                  4 KiB requests: the same bytes; the whole device read
#                  with O_DIRECT (1 MiB, split by max_hw_sectors): the
#                  pattern where it was written, zeros everywhere else (a
#                  fresh server's disk is vzalloc'd)
#   ext4           mkfs.ext4, mount, files of 1 B .. 3 MiB (1 MiB among
#                  them) and 32 small ones, sync, umount, drop_caches,
#                  mount: every sha256 the same; e2fsck -fn clean
#   fio x3         --verify=crc32c --verify_fatal=1 --do_verify=1, libaio,
#                  direct=1, 16 MiB each: randwrite 4k at iodepth 1 and
#                  16, sequential write 128k at iodepth 8: fio exits 0,
#                  error 0, all 16 MiB written and all 16 MiB read back
#                  by the verify pass (time-bounded: 240 s each)
#   hostile input  attach with garbage, a bad address, no port, a port out
#                  of range, depth=0/257/100000, queues=0/-1, unknown
#                  keys, 4000 bytes, binary bytes: EINVAL for each, within
#                  10 s, nothing attached, no connection on the server;
#                  attach to a port where nothing listens: ECONNREFUSED
#                  or ETIMEDOUT within 30 s; to an address nobody has
#                  (.77 of the device's /24): ETIMEDOUT, EHOSTUNREACH or
#                  ENETUNREACH within 40 s (address resolution gives up
#                  after 5 s); each failed connect leaves a new kernel log
#                  line naming krdma_blk or the address; detach of
#                  krdmablk99 or 99: ENOENT; queues=1 depth=256 attaches
#                  the lowest free index, listed with 1 and 256; a
#                  detached index is reused; detach by number works
#   server gone    fio randrw (verify off) running, rmmod
#                  krdma_blk_server: fio ends with an I/O error within
#                  60 s (the server's close disconnects every
#                  connection at once; at worst a request times out after
#                  io_timeout_s, 30 s, and its connection is
#                  disconnected); devices says failed; a new read fails
#                  within 5 s (a failed device ends new requests at once);
#                  detach works; the server loads again
#   rmmod busy     rmmod krdma_blk while fio has the device open: refused
#                  ("in use": an open block device holds its driver's
#                  module, blkdev_get/bdev_open take a reference on
#                  fops->owner); fio goes on and ends without an error
#   detach busy    detach while fio runs (hot unplug): the write returns
#                  within 30 s, the device is gone at once, fio ends with
#                  an I/O error within 60 s, the server's connections of
#                  that device are gone within 10 s
#   rmmod          rmmod krdma_blk with two devices attached (nothing open
#                  on them): succeeds within 60 s and detaches both:
#                  nothing left (lsmod, /dev/krdmablk*, /sys/block,
#                  /sys/kernel/krdma_blk, the server's connections); what
#                  was written before is still on the server (client
#                  loaded again, attached, read back)
#   device removal a soft device of our own (krdmab0, same type) on the
#                  netdev of the device's peer address (veth1
#                  198.18.0.2, veth3 198.18.1.2: krdma_kapi.sh's way), the
#                  server there (port 7741); fio running, `rdma link
#                  delete krdmab0`: returns within 60 s, fio ends with an
#                  I/O error within 60 s, devices says failed, detach
#                  works, the server's connections go; the RDMA links are
#                  as before (rxe0/siw0 untouched: nothing to create
#                  again)
# After each case: pages pinned system-wide (selftests/lib.sh pins) back
# to where they were at the start or below (waited for, 10 s; other
# pinners, the 9p share, come and go), and no new bad line in the kernel
# log (run.sh's pattern: WARNING, BUG, Oops, SLUB reports, lockdep, hung
# task, ...). After both devices: no krdma_blk module, device, sysfs or
# debugfs entry left, krdma's reference count as at the start, pins back,
# kernel log clean since the start.
#
# The fio cases skip when fio is not installed (Debian's fio:
# scripts/install-deps.sh). Every limit is 5 times as long on the debug
# kernel (KRDMA_DEBUG_KERNEL=1), where fio moves 4 MiB per job.
# Environment: KRDMA_BLK_ONLY (a substring: run only the cases whose name
# has it), KRDMA_BLK_FIO_SIZE (default 16M).
# About 4 minutes under TCG for both devices (tests.list gives it 600 s).

# shellcheck disable=SC2317 # functions run through run_case()
set -u
cd "$(dirname "$0")/.." || exit 1

SRV_KO=$PWD/samples/krdma_blk/krdma_blk_server.ko
CLI_KO=$PWD/samples/krdma_blk/krdma_blk.ko
KO=$PWD/krdma.ko
SYS=/sys/kernel/krdma_blk
SDBG=/sys/kernel/debug/krdma_blk_server
# (not a version manager's shim on PATH: a second per call)
PYTHON=${PYTHON:-$([[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)}
SLOW=1
[[ ${KRDMA_DEBUG_KERNEL:-0} == 1 ]] && SLOW=5
SIZE_MB=64
SIZE=$((SIZE_MB << 20))
# the server's default port (not passed at load: the default is part of
# the interface) and the port of the device removal case's server
PORT=7740
RPORT=7741
# nobody listens there
NOPORT=7749
# the device removal case's own soft device
RDEV=krdmab0
FIO_SIZE=${KRDMA_BLK_FIO_SIZE:-$((SLOW > 1 ? 4 : 16))M}
ONLY=${KRDMA_BLK_ONLY:-}
CPUS=$(getconf _NPROCESSORS_ONLN)
QUEUES=$((CPUS < 4 ? CPUS : 4))
# type, RDMA device, its address, the peer address of its veth pair
DEVS=(
	"rxe ${KRDMA_RXE_DEV:-rxe0} ${KRDMA_RXE_ADDR:-198.18.0.1} ${KRDMA_RXE_PEER_ADDR:-198.18.0.2}"
	"siw ${KRDMA_SIW_DEV:-siw0} ${KRDMA_SIW_ADDR:-198.18.1.1} ${KRDMA_SIW_PEER_ADDR:-198.18.1.2}"
)
CASES_PER_DEV=14

# The kernel log check of selftests/qemu/run.sh: its bad and benign
# patterns, and rxe's known QP-teardown warning reported as a note
BAD='Kernel panic|WARNING:|BUG:|BUG [^ ]+ \(|Poison overwritten|Redzone overwritten|Freepointer corrupt|memory corruption|KFENCE|Oops|general protection|possible circular locking|inconsistent lock state|sleeping function called from invalid context|lockdep|KASAN|UBSAN|kmemleak|hung_task|blocked for more than'
BENIGN='kmemleak: (Kernel memory leak detector initialized|Automatic memory scanning thread)|RCU lockdep checking is enabled|traps: [^ ]+\[[0-9]+\] general protection fault ip:[0-9a-f]+ sp:[0-9a-f]+ error:[0-9a-f]+ in '
DRIVER='WARNING: CPU: [0-9]+ PID: [0-9]+ at drivers/infiniband/sw/rxe/rxe_task\.c:[0-9]+ rxe_sched_task\+'

TMP=$(mktemp -d /tmp/krdma_blk.XXXXXX) || exit 1
pids=()
cleanup() {
	local p

	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	mountpoint -q "$TMP/mnt" && timeout 60 umount "$TMP/mnt"
	detach_all
	loaded krdma_blk && timeout 60 rmmod krdma_blk
	loaded krdma_blk_server && timeout 60 rmmod krdma_blk_server
	[[ -e /sys/class/infiniband/$RDEV ]] && timeout 60 rdma link delete "$RDEV"
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. selftests/lib.sh
why=()
notes=()
# fail REASON: the current case fails, for REASON
fail() {
	why+=("$*")
}
# note TEXT: a diagnostic line after the case's result
note() {
	notes+=("$*")
}
now_ms() {
	date +%s%3N
}
klog_lines() {
	dmesg | wc -l
}

# --- waiting -----------------------------------------------------------------

# wait_until SECS CMD...: until CMD succeeds, tried every 0.1 s for at
# most SECS seconds (times SLOW, as every limit here)
wait_until() {
	local end=$((SECONDS + $1 * SLOW))

	shift
	until "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.1
	done
}

# bg NAME CMD...: CMD in the background, output in $TMP/NAME.out; sets $pid
bg() {
	local name=$1

	shift
	"$@" >"$TMP/$name.out" 2>&1 </dev/null &
	pid=$!
	pids+=("$pid")
}

# reap PID SECS: wait (bounded) for PID to end; its exit status in $rc
# (124 when it did not end in time: it is killed), when it ended in
# $reaped_ms
reap() {
	local end=$((SECONDS + $2 * SLOW))

	while kill -0 "$1" 2>/dev/null && ((SECONDS < end)); do
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1" 2>/dev/null
		wait "$1" 2>/dev/null
		rc=124
		reaped_ms=$(now_ms)
		return 1
	fi
	wait "$1"
	rc=$?
	reaped_ms=$(now_ms)
	return 0
}

# --- sysfs and debugfs ---------------------------------------------------------

# sysw_many FILE SECS STRING...: each STRING written to FILE with one
# write(2) of its own (a fresh open each), all within SECS (times SLOW);
# one line per STRING in $TMP/sysw: its result and the milliseconds it
# took. The result: OK (every byte taken: the write returned its count),
# SHORT n, or the errno's name (EINVAL, ECONNREFUSED, ...). Lines missing
# at the end: the writes did not return in time (TIMEOUT).
sysw_many() {
	local file=$1 secs=$2

	shift 2
	timeout -k 5 $((secs * SLOW)) "$PYTHON" -I -S -c '
import errno, os, sys, time
for s in sys.argv[2:]:
    b = os.fsencode(s)
    t = time.monotonic()
    try:
        fd = os.open(sys.argv[1], os.O_WRONLY)
        try:
            n = os.write(fd, b)
        finally:
            os.close(fd)
        r = "OK" if n == len(b) else "SHORT %d" % n
    except OSError as e:
        r = errno.errorcode.get(e.errno, "errno%d" % e.errno)
    print(r, int((time.monotonic() - t) * 1000), flush=True)
' "$file" "$@" >"$TMP/sysw" 2>&1
}

wr='' wr_ms=0 reaped_ms=0
# sysw FILE STRING SECS: one write; its result in $wr (TIMEOUT when it did
# not return within SECS), its milliseconds in $wr_ms
sysw() {
	sysw_many "$1" "$3" "$2"
	read -r wr wr_ms <"$TMP/sysw"
	[[ -n ${wr:-} ]] || wr=TIMEOUT wr_ms=$(($3 * SLOW * 1000))
}

loaded() {
	grep -q "^$1 " /proc/modules
}

# the lines of devices: "krdmablkK ADDR PORT SIZE_BYTES QUEUES DEPTH STATE"
devices() {
	cat "$SYS/devices" 2>/dev/null
}
dev_line() {
	devices | awk -v d="$1" '$1 == d'
}
# dev_field NAME N: field N (1: the name ... 7: the state) of NAME's line
dev_field() {
	dev_line "$1" | awk -v n="$2" '{ print $n }'
}
state_is() { # NAME STATE
	[[ $(dev_field "$1" 7) == "$2" ]]
}
node_gone() { # NAME: no block device, no sysfs entry
	[[ ! -e /dev/$1 && ! -e /sys/block/$1 ]]
}
no_nodes() {
	! compgen -G '/dev/krdmablk*' >/dev/null && ! compgen -G '/sys/block/krdmablk*' >/dev/null
}
# the lowest index no device has
lowest_free() {
	local k=0

	while [[ -n $(dev_line "krdmablk$k") ]]; do
		k=$((k + 1))
	done
	echo "$k"
}

# The server's connections, from the first number of its debugfs file's
# first line ("count + one line per connection")
server_conns() {
	local l=

	read -r l 2>/dev/null <"$SDBG/connections"
	[[ $l =~ ([0-9]+) ]] || return 1
	echo "${BASH_REMATCH[1]}"
}
conns_are() {
	[[ $(server_conns) == "$1" ]]
}
conns_diag() {
	echo "the server's connections: $(head -c 400 "$SDBG/connections" 2>&1 | tr '\n' '|')"
}

# attach STRING: written to attach (30 s); on success $newdev is the
# device it added (the name devices did not list before)
attach() {
	local before

	before=$(devices | awk '{ print $1 }')
	newdev=
	sysw "$SYS/attach" "$1" 30
	[[ $wr == OK ]] || return 1
	newdev=$(devices | awk '{ print $1 }' | grep -vxF -e "$before" -e '' | head -n1)
	[[ -n $newdev ]]
}

# detach NAME: written to detach (30 s); the device gone within 10 s
detach() {
	sysw "$SYS/detach" "$1"$'\n' 30
	[[ $wr == OK ]] && wait_until 10 node_gone "$1"
}

detach_all() {
	local d st=0

	for d in $(devices | awk '{ print $1 }'); do
		detach "$d" || st=1
	done
	return $st
}

# --- the modules -----------------------------------------------------------------

SRV_ADDR='' SRV_PORT='' SRV_FRESH=0
# server_load ADDR PORT: krdma_blk_server at ADDR:PORT (again, if it was
# loaded), a fresh disk, no connection
server_load() {
	local out args=(addr="$1" "size_mb=$SIZE_MB")

	[[ $2 == "$PORT" ]] || args+=(port="$2")
	server_unload || return 1
	if ! out=$(insmod "$SRV_KO" "${args[@]}" 2>&1); then
		fail "insmod krdma_blk_server ${args[*]}: $out"
		return 1
	fi
	SRV_ADDR=$1 SRV_PORT=$2 SRV_FRESH=1
	if ! wait_until 10 conns_are 0; then
		fail "just loaded, $(conns_diag), not 0"
		return 1
	fi
}

server_unload() {
	local out

	SRV_ADDR='' SRV_PORT='' SRV_FRESH=0
	loaded krdma_blk_server || return 0
	if ! out=$(timeout $((60 * SLOW)) rmmod krdma_blk_server 2>&1); then
		fail "rmmod krdma_blk_server: ${out:-no return in 60 s}"
		return 1
	fi
}

client_load() {
	local out

	loaded krdma_blk && return 0
	if ! out=$(insmod "$CLI_KO" 2>&1); then
		fail "insmod krdma_blk: $out"
		return 1
	fi
	[[ -d $SYS ]] || { fail "krdma_blk loaded, but no $SYS"; return 1; }
}

# need_dev ADDR PORT [fresh]: the server at ADDR:PORT (a fresh one with
# "fresh": its disk all zeros), the client, and a live device attached to
# it; sets DEV, BDEV
need_dev() {
	local addr=$1 port=$2

	if ! loaded krdma_blk_server || [[ $SRV_ADDR != "$addr" || $SRV_PORT != "$port" ]] ||
		[[ ${3-} == fresh && $SRV_FRESH != 1 ]]; then
		detach_all || { fail "cannot detach what is attached: $wr"; return 1; }
		server_load "$addr" "$port" || return 1
	fi
	client_load || return 1
	DEV=$(devices | awk -v a="$addr" -v p="$port" '$2 == a && $3 == p && $7 == "live" { print $1; exit }')
	if [[ -z $DEV ]]; then
		if ! attach "$addr $port"$'\n'; then
			fail "attach '$addr $port': $wr after $wr_ms ms"
			return 1
		fi
		DEV=$newdev
	fi
	BDEV=/dev/$DEV
	wait_until 10 test -b "$BDEV" || { fail "no block device $BDEV"; return 1; }
}

# --- fio -----------------------------------------------------------------------

HAVE_FIO=0
command -v fio >/dev/null && HAVE_FIO=1
HAVE_EXT4=0
modprobe -q ext4 2>/dev/null
grep -qw ext4 /proc/filesystems && HAVE_EXT4=1

# fio_sum FILE: "error=N read=BYTES write=BYTES riops=N wiops=N" of the
# first job of fio's JSON output in FILE (what fio prints before the
# JSON, notes and warnings, is skipped)
fio_sum() {
	"$PYTHON" -I -S -c '
import json, sys
t = open(sys.argv[1]).read()
j = json.JSONDecoder().raw_decode(t[t.index("{"):])[0]["jobs"][0]
print("error=%d read=%d write=%d riops=%.0f wiops=%.0f" % (j["error"],
      j["read"]["io_bytes"], j["write"]["io_bytes"], j["read"]["iops"],
      j["write"]["iops"]))
' "$1" 2>/dev/null
}
# kv STRING KEY: the value of KEY= in STRING
kv() {
	sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"
}

# I/O requests completed on the block device NAME (reads + writes)
ios() {
	awk '{ print $1 + $5 }' "/sys/block/$1/stat" 2>/dev/null
}
ios_past() { # NAME N
	local n

	n=$(ios "$1")
	[[ -n $n ]] && ((n >= $2))
}

# fio_load NAME SECS: fio randrw 4k at iodepth 16 on $BDEV, verify off,
# for SECS (times SLOW) at most, in the background ($lpid; JSON in
# $TMP/NAME.json, the rest in $TMP/NAME.out); returns once 64 requests
# have completed (30 s at most)
fio_load() {
	local n0

	n0=$(ios "$DEV")
	bg "$1" fio --name="$1" --filename="$BDEV" --ioengine=libaio --direct=1 \
		--rw=randrw --bs=4k --iodepth=16 --size="${SIZE_MB}M" --time_based \
		--runtime=$(($2 * SLOW)) --output-format=json --output="$TMP/$1.json"
	lpid=$pid
	if ! wait_until 30 ios_past "$DEV" $((${n0:-0} + 64)); then
		fail "fio on $BDEV did not get going in 30 s ($(ios "$DEV") requests; $(tail -n 3 "$TMP/$1.out" | tr '\n' ' '))"
		kill -9 "$lpid" 2>/dev/null
		return 1
	fi
}

# fio_errored NAME T: the load NAME (reaped: $rc) ended with an I/O
# error; how long after T (ms) it ended
fio_errored() {
	local s e

	note "fio ended $((reaped_ms - $2)) ms after the fault, exit $rc"
	((rc != 0 && rc != 124)) || fail "fio exited $rc: no error"
	s=$(fio_sum "$TMP/$1.json")
	e=$(kv "$s" error)
	if [[ -n $e && $e != 0 ]]; then
		note "fio: $s; $(grep -m1 -E 'error' "$TMP/$1.out")"
	elif grep -qiE 'io_u error|error=' "$TMP/$1.out"; then
		note "fio: $(grep -m1 -iE 'io_u error|error=' "$TMP/$1.out")"
	else
		fail "fio reported no I/O error (${s:-no JSON})"
	fi
}

# --- the checks after each case ----------------------------------------------------

# Pins back to $pins0 or below (10 s: the block layer releases a direct
# I/O's pages when it completes, and other pinners come and go) and no
# bad line in the kernel log since $klog0: fail() for each problem
after_case() {
	local end=$((SECONDS + 10 * SLOW)) p bad drv

	while p=$(pins) && ((p > pins0)) && ((SECONDS < end)); do
		sleep 0.1
	done
	if ((p > pins0)); then
		fail "pins: nr_foll_pin_acquired - nr_foll_pin_released is $p, was $pins0"
		pins0=$p # the next cases are not blamed for it
	fi
	bad=$(dmesg | tail -n +$((klog0 + 1)) | grep -E "$BAD" | grep -Ev "$BENIGN")
	drv=$(grep -E "$DRIVER" <<<"$bad")
	bad=$(grep -Ev "$DRIVER" <<<"$bad")
	[[ -z $drv ]] ||
		note "rxe's known QP-teardown warning (not krdma's, see run.sh): $(head -n1 <<<"$drv")"
	[[ -z $bad ]] || fail "kernel log: $(head -n 5 <<<"$bad")"
}

SKIP_WHY=
# run_case NAME FUNCTION ARGS...: one TAP result; FUNCTION calls fail()
# for what went wrong
run_case() {
	local name=$1 start f

	shift
	if [[ -n $SKIP_WHY ]]; then
		skip "$name" "$SKIP_WHY"
		return
	fi
	if [[ -n $ONLY && $name != *"$ONLY"* ]]; then
		skip "$name" "KRDMA_BLK_ONLY=$ONLY"
		return
	fi
	why=() notes=()
	rm -f "$TMP"/*.out "$TMP"/*.json
	klog0=$(klog_lines)
	start=$SECONDS
	"$@"
	after_case
	name="$name ($((SECONDS - start)) s)"
	if ((${#why[@]} == 0)); then
		ok "$name"
	else
		not_ok "$name"
		printf '%s\n' "${why[@]}" | diag
		for f in "$TMP"/*.out; do
			[[ -s $f ]] || continue
			echo "--- ${f##*/}:"
			tail -n 15 "$f"
		done | diag
		dmesg | tail -n +$((klog0 + 1)) | tail -n 30 | diag
	fi
	((${#notes[@]} == 0)) || printf '%s\n' "${notes[@]}" | diag
}

# run_fio_case NAME FUNCTION ARGS...: run_case, or a skip without fio
run_fio_case() {
	if ((!HAVE_FIO)); then
		skip "$1" "fio is not installed (Debian's fio: scripts/install-deps.sh)"
	else
		run_case "$@"
	fi
}

# The filesystem case needs ext4 in the kernel (the debug kernel of
# scripts/build-debug-kernel.sh has none)
run_fs_case() {
	if ((!HAVE_EXT4)); then
		skip "$1" "this kernel has no ext4 (not in /proc/filesystems after modprobe ext4)"
	else
		run_case "$@"
	fi
}

# --- the cases -------------------------------------------------------------------

# Both modules load, the first attach over ADDR
case_attach() { # addr
	local addr=$1 f m line size lbs
	local -a fields

	detach_all || fail "cannot detach what an earlier case left"
	if loaded krdma_blk && ! m=$(timeout $((60 * SLOW)) rmmod krdma_blk 2>&1); then
		fail "rmmod krdma_blk before loading it: $m"
		return
	fi
	server_load "$addr" "$PORT" || return
	[[ -r $SDBG/connections ]] || fail "no $SDBG/connections"
	client_load || return
	for f in attach:200 detach:200 devices:444; do
		m=$(stat -c %a "$SYS/${f%%:*}" 2>&1)
		[[ $m == "${f#*:}" ]] || fail "$SYS/${f%%:*}: mode $m, expected ${f#*:}"
	done
	[[ -z $(devices) ]] || fail "devices lists something before any attach: $(devices)"
	if ! attach "$addr $PORT"$'\n'; then
		fail "attach '$addr $PORT': $wr after $wr_ms ms"
		return
	fi
	note "attach took $wr_ms ms"
	[[ $newdev == krdmablk0 ]] || fail "the first device is '$newdev', not krdmablk0"
	DEV=$newdev BDEV=/dev/$newdev
	if ! wait_until 10 test -b "$BDEV"; then
		fail "no block device $BDEV 10 s after the attach"
		return
	fi
	size=$(blockdev --getsize64 "$BDEV" 2>&1)
	[[ $size == "$SIZE" ]] || fail "blockdev --getsize64 $BDEV: $size, expected $SIZE"
	lbs=$(cat "/sys/block/$DEV/queue/logical_block_size" 2>&1)
	[[ $lbs == 4096 ]] || fail "logical block size $lbs, expected 4096"
	line=$(dev_line "$DEV")
	read -r -a fields <<<"$line"
	[[ ${fields[*]} == "$DEV $addr $PORT $SIZE $QUEUES 64 live" ]] ||
		fail "devices: '$line', expected '$DEV $addr $PORT $SIZE $QUEUES 64 live'"
	[[ $(devices | wc -l) == 1 ]] || fail "devices lists more than $DEV: $(devices)"
	wait_until 10 conns_are "$QUEUES" || fail "$(conns_diag), expected $QUEUES"
}

# 8 MiB at an offset with O_DIRECT, read back
case_dd() { # addr
	local off=$((13 * 1048576 + 65536)) len=$((8 << 20)) t0 t1

	need_dev "$1" "$PORT" fresh || return
	SRV_FRESH=0
	head -c "$len" /dev/urandom >"$TMP/pat"
	t0=$(now_ms)
	if ! timeout $((120 * SLOW)) dd if="$TMP/pat" of="$BDEV" bs=64k \
		seek=$((off / 65536)) oflag=direct status=none 2>"$TMP/dd.out"; then
		fail "dd of the pattern to $BDEV failed"
		return
	fi
	t1=$(now_ms)
	note "8 MiB written in $((t1 - t0)) ms"
	timeout $((120 * SLOW)) dd if="$BDEV" bs=4k skip=$((off / 4096)) count=$((len / 4096)) \
		iflag=direct status=none 2>>"$TMP/dd.out" | cmp - "$TMP/pat" >"$TMP/cmp.out" 2>&1 ||
		fail "read back in 4 KiB requests: $(head -c 300 "$TMP/cmp.out")"
	timeout $((120 * SLOW)) dd if="$BDEV" bs=1M iflag=direct status=none 2>>"$TMP/dd.out" |
		cmp - <(head -c "$off" /dev/zero
			cat "$TMP/pat"
			head -c $((SIZE - off - len)) /dev/zero) >"$TMP/cmp.out" 2>&1 ||
		fail "the whole device against zeros + pattern at $off: $(head -c 300 "$TMP/cmp.out")"
	note "the whole device read in $(($(now_ms) - t1)) ms (with the 4 KiB pass)"
}

# ext4: files written, read back after a remount and drop_caches
case_fs() { # addr
	local mnt=$TMP/mnt sz i nfiles

	need_dev "$1" "$PORT" || return
	SRV_FRESH=0
	rm -rf "$TMP/src"
	mkdir -p "$TMP/src/small" "$mnt"
	for sz in 1 4095 4096 65537 1048576 3146931; do
		head -c "$sz" /dev/urandom >"$TMP/src/f$sz"
	done
	for ((i = 0; i < 32; i++)); do
		head -c $((i * 1237 % 8192 + 1)) /dev/urandom >"$TMP/src/small/s$i"
	done
	(cd "$TMP/src" && find . -type f | sort | xargs sha256sum) >"$TMP/sums"
	nfiles=$(wc -l <"$TMP/sums")
	if ! timeout $((120 * SLOW)) mkfs.ext4 -q -F \
		-E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$BDEV" >"$TMP/mkfs.out" 2>&1; then
		fail "mkfs.ext4 $BDEV failed"
		return
	fi
	if ! mount -t ext4 "$BDEV" "$mnt" 2>"$TMP/mount.out"; then
		fail "mount $BDEV failed"
		return
	fi
	cp -a "$TMP/src/." "$mnt/" 2>"$TMP/cp.out" || fail "cp to the file system failed"
	timeout $((60 * SLOW)) sync || fail "sync took more than 60 s"
	timeout $((60 * SLOW)) umount "$mnt" 2>"$TMP/umount.out" || { fail "umount failed"; return; }
	sync
	echo 3 >/proc/sys/vm/drop_caches
	if ! mount -t ext4 "$BDEV" "$mnt" 2>"$TMP/mount.out"; then
		fail "mount $BDEV again failed"
		return
	fi
	(cd "$mnt" && sha256sum --quiet --strict -c "$TMP/sums") >"$TMP/sha.out" 2>&1 ||
		fail "sha256 after the remount: $(head -c 300 "$TMP/sha.out")"
	i=$(find "$mnt" -path "$mnt/lost+found" -prune -o -type f -print | wc -l)
	((i == nfiles)) || fail "$i files on the file system, $nfiles written"
	timeout $((60 * SLOW)) umount "$mnt" 2>"$TMP/umount.out" || { fail "umount failed"; return; }
	timeout $((120 * SLOW)) e2fsck -fn "$BDEV" >"$TMP/fsck.out" 2>&1 ||
		fail "e2fsck -fn $BDEV: exit $?"
	note "$nfiles files, $(du -sk "$TMP/src" | cut -f1) KiB"
}

# fio with verify: everything written is read back and checked
case_fio() { # addr name rw bs iodepth
	local name=$2 s bytes

	need_dev "$1" "$PORT" || return
	SRV_FRESH=0
	timeout -k 10 $((240 * SLOW)) fio --name="$name" --filename="$BDEV" \
		--ioengine=libaio --direct=1 --rw="$3" --bs="$4" --iodepth="$5" \
		--size="$FIO_SIZE" --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--verify_state_save=0 --output-format=json --output="$TMP/$name.json" \
		>"$TMP/$name.out" 2>&1
	rc=$?
	((rc == 0)) || fail "fio exited $rc$( ((rc == 124)) && echo ": it took more than 240 s")"
	s=$(fio_sum "$TMP/$name.json")
	bytes=$(numfmt --from=iec "$FIO_SIZE")
	[[ $(kv "$s" error) == 0 ]] || fail "fio: ${s:-no JSON result}"
	[[ $(kv "$s" write) == "$bytes" ]] || fail "fio wrote $(kv "$s" write) bytes, not $bytes"
	[[ $(kv "$s" read) == "$bytes" ]] || fail "fio's verify read $(kv "$s" read) bytes, not $bytes"
	note "fio $name: $s"
}

# Hostile attach input: EINVAL, nothing attached
case_hostile() { # addr
	local addr=$1 before c0 i r ms
	local -a bad

	need_dev "$addr" "$PORT" || return
	before=$(devices)
	c0=$(server_conns)
	bad=($'\n' 'garbage' "$addr" "$addr"$'\n' "$addr notaport" "$addr 65536"
		"$addr 99999" "$addr 99999999999999999999" "$addr -1"
		"$addr $PORT depth=0" "$addr $PORT depth=257" "$addr $PORT depth=100000"
		"$addr $PORT depth=64x" "$addr $PORT depth=" "$addr $PORT queues=0"
		"$addr $PORT queues=-1" "$addr $PORT bogus=1" "300.1.1.1 $PORT"
		"localhost $PORT" "$(printf 'A%.0s' {1..4000})" $'\x01\xff\xfe\x80 7740')
	sysw_many "$SYS/attach" $((10 * ${#bad[@]})) "${bad[@]}"
	for ((i = 0; i < ${#bad[@]}; i++)); do
		r='' ms=''
		read -r r ms < <(sed -n "$((i + 1))p" "$TMP/sysw")
		if [[ $r != EINVAL ]]; then
			fail "attach $(printf '%q' "${bad[i]:0:48}"): ${r:-TIMEOUT}, expected EINVAL"
		elif ((ms > 10000 * SLOW)); then
			fail "attach $(printf '%q' "${bad[i]:0:48}"): EINVAL after $ms ms"
		fi
	done
	[[ $(devices) == "$before" ]] || fail "devices changed: '$(devices)', was '$before'"
	no_new_nodes "$before"
	conns_are "$c0" || fail "$(conns_diag), was $c0"
}

# no /dev/krdmablk* that devices (BEFORE) does not list
no_new_nodes() {
	local d

	for d in /dev/krdmablk*; do
		[[ -e $d ]] || continue
		grep -q "^${d#/dev/} " <<<"$1" || fail "$d appeared"
	done
}

# Connects that fail: nobody listens; nobody has the address
case_refused() { # addr
	local addr=$1 before c0 k0 unreach=${1%.*}.77

	need_dev "$addr" "$PORT" || return
	before=$(devices)
	c0=$(server_conns)
	k0=$(klog_lines)
	sysw "$SYS/attach" "$addr $NOPORT"$'\n' 30
	[[ $wr =~ ^(ECONNREFUSED|ETIMEDOUT)$ ]] ||
		fail "attach '$addr $NOPORT' (nobody listens): $wr after $wr_ms ms, expected ECONNREFUSED or ETIMEDOUT within 30 s"
	note "nobody listens on $addr:$NOPORT: $wr in $wr_ms ms"
	says_why "$k0" "$addr"
	k0=$(klog_lines)
	sysw "$SYS/attach" "$unreach $PORT"$'\n' 40
	[[ $wr =~ ^(ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$ ]] ||
		fail "attach '$unreach $PORT' (nobody has it): $wr after $wr_ms ms, expected ETIMEDOUT, EHOSTUNREACH or ENETUNREACH within 40 s"
	note "nobody at $unreach: $wr in $wr_ms ms"
	says_why "$k0" "$unreach"
	[[ $(devices) == "$before" ]] || fail "devices changed: '$(devices)', was '$before'"
	no_new_nodes "$before"
	wait_until 10 conns_are "$c0" || fail "$(conns_diag), was $c0"
}

# says_why KLOG0 ADDR: a kernel log line since line KLOG0 names the
# client ("krdma_blk:", not the server) or ADDR: its pr_err() of what
# happened
says_why() {
	local l

	l=$(dmesg | tail -n +$(($1 + 1)) | grep -E -m1 "krdma_blk[: ]|${2//./\\.}")
	if [[ -n $l ]]; then
		note "kernel log: $l"
	else
		fail "the kernel log says nothing about the failed attach to $2"
	fi
}

# Detach of what is not there; indexes; queues= and depth=
case_indexes() { # addr
	local addr=$1 k d1 d2 r ms i exp
	local -a bad=("krdmablk99"$'\n' "99" "nonsense"$'\n' $'\n' "krdmablk")
	local -a want=(ENOENT ENOENT 'ENOENT|EINVAL' 'ENOENT|EINVAL' 'ENOENT|EINVAL')
	local -a fields

	need_dev "$addr" "$PORT" || return
	d1=$DEV
	sysw_many "$SYS/detach" $((10 * ${#bad[@]})) "${bad[@]}"
	for ((i = 0; i < ${#bad[@]}; i++)); do
		r=''
		read -r r ms < <(sed -n "$((i + 1))p" "$TMP/sysw")
		[[ $r =~ ^(${want[i]})$ ]] ||
			fail "detach $(printf '%q' "${bad[i]}"): ${r:-TIMEOUT}, expected ${want[i]}"
	done
	state_is "$d1" live || fail "$d1 is no longer live after those: $(dev_line "$d1")"

	k=$(lowest_free)
	if ! attach "$addr $PORT queues=1 depth=256"$'\n'; then
		fail "attach '$addr $PORT queues=1 depth=256': $wr"
		return
	fi
	d2=$newdev
	[[ $d2 == "krdmablk$k" ]] || fail "attached $d2, not the lowest free index krdmablk$k"
	read -r -a fields <<<"$(dev_line "$d2")"
	exp="$d2 $addr $PORT $SIZE 1 256 live"
	[[ ${fields[*]} == "$exp" ]] || fail "devices: '${fields[*]}', expected '$exp'"
	wait_until 10 test -b "/dev/$d2" || fail "no /dev/$d2"
	wait_until 10 conns_are $((QUEUES + 1)) || fail "$(conns_diag), expected $((QUEUES + 1))"

	detach "$d1" || fail "detach $d1: $wr, or still there 10 s later"
	k=$(lowest_free)
	[[ $k == "${d1#krdmablk}" ]] || fail "after the detach of $d1 the lowest free index is $k"
	# (no newline this time)
	if attach "$addr $PORT"; then
		[[ $newdev == "krdmablk$k" ]] || fail "attached $newdev, not krdmablk$k again"
		d1=$newdev
	else
		fail "attach '$addr $PORT' (no newline): $wr"
	fi
	sysw "$SYS/detach" "${d2#krdmablk}" 30
	[[ $wr == OK ]] || fail "detach '${d2#krdmablk}' (the number): $wr"
	wait_until 10 node_gone "$d2" || fail "$d2 still there 10 s after its detach"
	[[ $(devices | awk '{ print $1 }') == "$d1" ]] || fail "devices: '$(devices)', expected only $d1"
	wait_until 10 conns_are "$QUEUES" || fail "$(conns_diag), expected $QUEUES"
}

# The server goes under fio
case_server_gone() { # addr
	local t out t1

	need_dev "$1" "$PORT" || return
	SRV_FRESH=0
	fio_load sg 120 || return
	t=$(now_ms)
	out=$(timeout $((60 * SLOW)) rmmod krdma_blk_server 2>&1) ||
		fail "rmmod krdma_blk_server under I/O: ${out:-no return in 60 s}"
	SRV_ADDR='' SRV_PORT=''
	note "rmmod krdma_blk_server took $(($(now_ms) - t)) ms"
	reap "$lpid" 60 || fail "fio did not end within 60 s of the server's rmmod"
	fio_errored sg "$t"
	wait_until 10 state_is "$DEV" failed ||
		fail "devices: '$(dev_line "$DEV")', expected $DEV failed"
	t1=$(now_ms)
	timeout $((30 * SLOW)) dd if="$BDEV" of=/dev/null bs=4k count=1 iflag=direct \
		status=none 2>"$TMP/dd.out" && fail "a read of the failed $DEV succeeded"
	t1=$(($(now_ms) - t1))
	((t1 <= 5000 * SLOW)) || fail "a read of the failed $DEV took $t1 ms, not at once"
	detach "$DEV" || fail "detach of the failed $DEV: $wr, or still there 10 s later"
	server_load "$1" "$PORT" || fail "the server did not load again"
}

# rmmod krdma_blk while fio has the device open: refused, fio unharmed
case_rmmod_busy() { # addr
	local out s

	need_dev "$1" "$PORT" || return
	SRV_FRESH=0
	fio_load rb 10 || return
	if out=$(timeout $((30 * SLOW)) rmmod krdma_blk 2>&1); then
		fail "rmmod krdma_blk succeeded while fio had $BDEV open"
	else
		[[ $out == *"in use"* ]] || fail "rmmod krdma_blk refused, but not 'in use': ${out:-no return in 30 s}"
	fi
	note "rmmod: $out"
	reap "$lpid" 60 || fail "fio (10 s) did not end in 60 s"
	((rc == 0)) || fail "fio exited $rc"
	s=$(fio_sum "$TMP/rb.json")
	[[ $(kv "$s" error) == 0 && $(kv "$s" read) -gt 0 && $(kv "$s" write) -gt 0 ]] ||
		fail "fio: ${s:-no JSON result}"
	note "fio: $s"
	state_is "$DEV" live || fail "devices: '$(dev_line "$DEV")', expected live"
}

# Detach under fio: hot unplug
case_detach_busy() { # addr
	local t q c0

	need_dev "$1" "$PORT" || return
	SRV_FRESH=0
	q=$(dev_field "$DEV" 5)
	c0=$(server_conns)
	fio_load db 120 || return
	t=$(now_ms)
	sysw "$SYS/detach" "$DEV"$'\n' 30
	[[ $wr == OK ]] || fail "detach of $DEV under fio: $wr after $wr_ms ms"
	note "detach under fio took $wr_ms ms"
	wait_until 10 node_gone "$DEV" || fail "$DEV still there 10 s after its detach"
	[[ -z $(dev_line "$DEV") ]] || fail "devices still lists $DEV"
	reap "$lpid" 60 || fail "fio did not end within 60 s of the detach"
	fio_errored db "$t"
	wait_until 10 conns_are $((c0 - q)) || fail "$(conns_diag), expected $((c0 - q))"
}

# rmmod krdma_blk with two devices attached, nothing open on them
case_rmmod() { # addr
	local addr=$1 t out c0 off=$((1 << 20)) len=$((4 << 20))

	need_dev "$addr" "$PORT" || return
	SRV_FRESH=0
	head -c "$len" /dev/urandom >"$TMP/pat"
	timeout $((60 * SLOW)) dd if="$TMP/pat" of="$BDEV" bs=64k seek=$((off / 65536)) \
		oflag=direct status=none 2>"$TMP/dd.out" || { fail "dd to $BDEV failed"; return; }
	c0=$(server_conns)
	attach "$addr $PORT"$'\n' || { fail "a second attach: $wr"; return; }
	wait_until 10 conns_are $((c0 + QUEUES)) || fail "$(conns_diag), expected $((c0 + QUEUES))"
	t=$(now_ms)
	if ! out=$(timeout $((60 * SLOW)) rmmod krdma_blk 2>&1); then
		fail "rmmod krdma_blk with $DEV and $newdev attached: ${out:-no return in 60 s}"
		return
	fi
	note "rmmod krdma_blk with 2 devices took $(($(now_ms) - t)) ms"
	! loaded krdma_blk || fail "krdma_blk is still in /proc/modules"
	[[ ! -e $SYS ]] || fail "$SYS is still there"
	wait_until 10 no_nodes || fail "left: $(compgen -G '/dev/krdmablk*') $(compgen -G '/sys/block/krdmablk*')"
	wait_until 10 conns_are 0 || fail "$(conns_diag), expected 0"
	# what was written is on the server still
	client_load || return
	if ! attach "$addr $PORT"$'\n' || ! wait_until 10 test -b "/dev/$newdev"; then
		fail "attach after the client's reload: $wr"
		return
	fi
	timeout $((60 * SLOW)) dd if="/dev/$newdev" bs=64k skip=$((off / 65536)) count=$((len / 65536)) \
		iflag=direct status=none 2>>"$TMP/dd.out" | cmp - "$TMP/pat" >"$TMP/cmp.out" 2>&1 ||
		fail "what was written before the rmmod, read back: $(head -c 300 "$TMP/cmp.out")"
	detach "$newdev" || fail "detach $newdev: $wr"
}

port_active() {
	grep -qs ACTIVE "/sys/class/infiniband/$1/ports/1/state"
}
links() {
	timeout 10 rdma link show 2>/dev/null | awk '{ print $2, $NF }' | sort
}
netdev_of() { # ADDR: the netdev that has ADDR
	ip -o -4 addr show | awk -v a="$1" '{ split($4, x, "/"); if (x[1] == a) { print $2; exit } }'
}

# The RDMA device goes away under fio
case_removal() { # type ibdev addr peer
	local type=$1 ibdev=$2 peer=$4 pnd links0 t out

	pnd=$(netdev_of "$peer")
	[[ -n $pnd ]] || { fail "no netdev has $peer"; return; }
	links0=$(links)
	if grep -q " $pnd\$" <<<"$links0"; then
		fail "$pnd already has an RDMA device: $(grep " $pnd\$" <<<"$links0")"
		return
	fi
	if ! out=$(rdma link add "$RDEV" type "$type" netdev "$pnd" 2>&1); then
		fail "rdma link add $RDEV type $type netdev $pnd: $out"
		return
	fi
	wait_until 20 port_active "$RDEV" || { fail "$RDEV is not ACTIVE in 20 s"; return; }
	need_dev "$peer" "$RPORT" || return
	SRV_FRESH=0
	fio_load rm 120 || return
	t=$(now_ms)
	out=$(timeout $((60 * SLOW)) rdma link delete "$RDEV" 2>&1) ||
		fail "rdma link delete $RDEV under I/O: ${out:-no return in 60 s}"
	note "rdma link delete $RDEV took $(($(now_ms) - t)) ms"
	reap "$lpid" 60 || fail "fio did not end within 60 s of the device's removal"
	fio_errored rm "$t"
	wait_until 10 state_is "$DEV" failed ||
		fail "devices: '$(dev_line "$DEV")', expected $DEV failed"
	detach "$DEV" || fail "detach of $DEV: $wr, or still there 10 s later"
	wait_until 10 conns_are 0 || fail "$(conns_diag), expected 0"
	server_unload
	[[ ! -e /sys/class/infiniband/$RDEV ]] || fail "$RDEV is still there"
	[[ $(links) == "$links0" ]] || fail "rdma links: '$(links | tr '\n' ' ')', were '$(tr '\n' ' ' <<<"$links0")'"
	port_active "$ibdev" || fail "$ibdev is not ACTIVE any more"
}

# After both devices: nothing left, all of the kernel log clean
leftovers=()
case_final() {
	local end=$((SECONDS + 10 * SLOW)) ref m

	# after_case: the whole run's log, the pins of the start
	klog0=$klog_start
	pins0=$pins_start
	((${#leftovers[@]} == 0)) || fail "${leftovers[*]}"
	for m in krdma_blk krdma_blk_server; do
		! loaded "$m" || fail "$m is still loaded"
	done
	no_nodes || fail "left: $(compgen -G '/dev/krdmablk*') $(compgen -G '/sys/block/krdmablk*')"
	[[ ! -e $SYS ]] || fail "$SYS is still there"
	[[ ! -e $SDBG ]] || fail "$SDBG is still there"
	[[ ! -e /sys/class/infiniband/$RDEV ]] || fail "$RDEV is still there"
	if [[ -d /sys/module/krdma ]]; then
		while ref=$(cat /sys/module/krdma/refcnt) && ((ref != ref0)) &&
			((SECONDS < end)); do
			sleep 0.1
		done
		((ref == ref0)) || fail "krdma's refcount is $ref, was $ref0 at the start"
	else
		fail "krdma is no longer loaded"
	fi
}

# detach all, unload both modules; what fails is the final case's
section_end() {
	local out

	mountpoint -q "$TMP/mnt" && timeout 60 umount "$TMP/mnt"
	detach_all || leftovers+=("$1: detach at the end: $wr")
	if loaded krdma_blk && ! out=$(timeout $((60 * SLOW)) rmmod krdma_blk 2>&1); then
		leftovers+=("$1: rmmod krdma_blk at the end: $out")
	fi
	why=()
	server_unload || leftovers+=("$1: ${why[*]}")
	if [[ -e /sys/class/infiniband/$RDEV ]] &&
		! out=$(timeout $((60 * SLOW)) rdma link delete "$RDEV" 2>&1); then
		leftovers+=("$1: rdma link delete $RDEV at the end: $out")
	fi
}

# --- main -------------------------------------------------------------------------

echo "TAP version 13"
for f in "$SRV_KO" "$CLI_KO"; do
	if [[ ! -f $f ]]; then
		echo "1..1"
		not_ok "samples/krdma_blk is built ($f is missing)"
		exit 1
	fi
done
echo "1..$((${#DEVS[@]} * CASES_PER_DEV + 1))"
[[ -d /sys/module/krdma ]] || insmod "$KO"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# what an earlier run may have left
detach_all
loaded krdma_blk && rmmod krdma_blk
loaded krdma_blk_server && rmmod krdma_blk_server
klog_start=$(klog_lines)
pins0=$(pins)
pins_start=$pins0
ref0=$(cat /sys/module/krdma/refcnt 2>/dev/null || echo 0)
echo "# pins at the start: $pins0; krdma's refcount $ref0; $CPUS CPUs: $QUEUES queues by default; fio: $( ((HAVE_FIO)) && fio --version || echo none), $FIO_SIZE per job; time limits x$SLOW"

for d in "${DEVS[@]}"; do
	read -r type ibdev addr peer <<<"$d"
	SKIP_WHY=
	if [[ ! -d /sys/class/infiniband/$ibdev ]]; then
		SKIP_WHY="no RDMA device $ibdev in this guest"
	elif ! port_active "$ibdev"; then
		SKIP_WHY="$ibdev's port is not ACTIVE: $(cat "/sys/class/infiniband/$ibdev/ports/1/state" 2>&1)"
	fi
	run_case "$type: both modules load, attach over $addr: /dev/krdmablk0, 64 MiB, 4 KiB blocks, live, $QUEUES connections" \
		case_attach "$addr"
	run_case "$type: 8 MiB random at 13 MiB + 64 KiB with O_DIRECT, read back in 4 KiB requests and the whole device" \
		case_dd "$addr"
	run_fs_case "$type: ext4: files of 1 B to 3 MiB written, remounted after drop_caches, sha256 equal, e2fsck clean" \
		case_fs "$addr"
	run_fio_case "$type: fio randwrite 4k iodepth 1, $FIO_SIZE, verify=crc32c" \
		case_fio "$addr" "$type-randwrite-4k-qd1" randwrite 4k 1
	run_fio_case "$type: fio randwrite 4k iodepth 16, $FIO_SIZE, verify=crc32c" \
		case_fio "$addr" "$type-randwrite-4k-qd16" randwrite 4k 16
	run_fio_case "$type: fio sequential write 128k iodepth 8, $FIO_SIZE, verify=crc32c" \
		case_fio "$addr" "$type-write-128k-qd8" write 128k 8
	run_case "$type: hostile attach input (garbage, port out of range, depth=0/100000, queues=0, ...): EINVAL, nothing attached" \
		case_hostile "$addr"
	run_case "$type: attach where nobody listens: ECONNREFUSED/ETIMEDOUT in 30 s; nobody at the address: ETIMEDOUT/EHOSTUNREACH in 40 s" \
		case_refused "$addr"
	run_case "$type: detach of a missing device: ENOENT; queues=1 depth=256; the lowest free index, reused; detach by number" \
		case_indexes "$addr"
	run_fio_case "$type: server unloaded under fio: I/O errors within 60 s, device failed, new I/O fails at once, detach clean" \
		case_server_gone "$addr"
	run_fio_case "$type: rmmod krdma_blk while fio has the device open: refused (in use), fio unharmed" \
		case_rmmod_busy "$addr"
	run_fio_case "$type: detach under fio (hot unplug): the device goes, fio ends with I/O errors, its connections close" \
		case_detach_busy "$addr"
	run_case "$type: rmmod krdma_blk with two devices attached: both detached, nothing left; the data stays on the server" \
		case_rmmod "$addr"
	run_fio_case "$type: rdma link delete under fio (a device of our own on the peer netdev): I/O errors, detach clean" \
		case_removal "$type" "$ibdev" "$addr" "$peer"
	[[ -n $SKIP_WHY ]] || section_end "$type"
done
SKIP_WHY=
ONLY=
run_case "after both devices: nothing left, krdma's refcount back, pins back, kernel log clean since the start" \
	case_final

exit $((failed ? 1 : 0))
