#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two machines: two QEMU guests (run.sh's machinery, one run.sh each),
# each booting its own kernel with krdma, joined by two QEMU socket
# netdevs on 127.0.0.1 (a link for rxe and one for siw: rdma_cm binds an
# address to the first RDMA device on its netdev, so each soft device has
# a netdev of its own):
#
#      guest A                                         guest B
#      rxel0 on eth 198.18.20.1  <== socket link 0 ==>  198.18.20.2 rxel0
#      siwl0 on eth 198.18.21.1  <== socket link 1 ==>  198.18.21.2 siwl0
#
# B listens on both sockets (QEMU's listening end takes a new connection
# after its peer went away), A connects. Then:
#
#   1. A and B each run `krdmactl serve`; A moves 4 MiB to B and back on
#      each link (krdmactl xfer: WRITE, then READ, both verified), B does
#      the same to A, and pings it;
#   2. B starts two krdma_stress loads against A (WRITE a pattern, READ it
#      back, check it: 8 in flight on each link); once both flow, the host
#      kills A's QEMU;
#   3. on B, every operation completes with an error, both connections end
#      in ERROR, within the documented time: rxe after its retries
#      (krdma's ack_timeout ~1 s, 6 retries: ~7 s; within 20 s); siw when TCP
#      gives up (net.ipv4.tcp_retries2, set to 5 on B: ~13 s; within 40 s);
#      VmPin back, pinned pages back to where they started;
#   4. the host boots A again; B connects to it on both links: a new
#      connection works (xfer verified; another try, with a new
#      connection, within 120 s, since the new A may stall as it boots);
#   5. B ends cleanly: no WARNING/BUG/hung task in its kernel log, its pin
#      counters back, krdma unloads.
#
# Every wait is bounded. Prints TAP (the guests' results, then the host's)
# and a last line "N passed, N failed". Exit status 0 when nothing failed.
#
#   selftests/qemu/two-guests.sh          (make check-two) on the host
#   selftests/qemu/two-guests.sh guest a|b ROUND   inside a guest (run.sh run)
#
# Environment: GUEST_KVER as for run.sh (both guests boot the same
# kernel); KRDMA_TWO_TIMEOUT (seconds for the whole, default 1500).
# The two guests share the host's cores: expect everything to be slower
# than in one guest.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

# The link: per guest and link, the address and the NIC's MAC
A_RXE=198.18.20.1 B_RXE=198.18.20.2
A_SIW=198.18.21.1 B_SIW=198.18.21.2
mac() { # guest link
	printf '52:54:00:4b:%02x:%s\n' "$2" "$([[ $1 == a ]] && echo 0a || echo 0b)"
}
SERVE_PORT=18515	# krdmactl serve
LOAD_PORT=18600		# krdma_stress serve, one per link, on A
B_TCP_RETRIES2=5
BAD='Kernel panic|WARNING:|BUG:|Oops|general protection|possible circular locking|inconsistent lock state|sleeping function called from invalid context|lockdep|KASAN|UBSAN|hung_task|blocked for more than'

# ============================== in a guest ===================================

# Results for the host: "two-guests: ok DESC" / "two-guests: not ok DESC"
g_ok() { echo "two-guests: ok $*"; }
g_not_ok() { echo "two-guests: not ok $*"; }
g_check() { # DESC COMMAND...
	local desc=$1

	shift
	if "$@"; then g_ok "$desc"; else g_not_ok "$desc"; fi
}
g_mark() { echo "two-guests: mark $*"; }

# The NIC of link $2 of guest $1, addressed, with its soft device
g_link() { # guest link type addr
	local want dev d i

	want=$(mac "$1" "$2")
	modprobe virtio_net || return 1
	for ((i = 0; i < 100; i++)); do
		for d in /sys/class/net/*; do
			[[ $(cat "$d/address" 2>/dev/null) == "$want" ]] && dev=${d##*/}
		done
		[[ -n ${dev:-} ]] && break
		sleep 0.1
	done
	[[ -n ${dev:-} ]] || { echo "# no NIC with MAC $want"; return 1; }
	ip addr add "$4/24" dev "$dev" && ip link set "$dev" up &&
		rdma link add "${3}l0" type "$3" netdev "$dev" || return 1
	for ((i = 0; i < 200; i++)); do
		grep -q ACTIVE "/sys/class/infiniband/${3}l0/ports/1/state" && return 0
		sleep 0.1
	done
	echo "# ${3}l0 is not ACTIVE"
	return 1
}

# (exact: each CPU's pending vmstat deltas folded in first)
g_pins() {
	echo 1 2>/dev/null >/proc/sys/vm/stat_refresh
	awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	     $1 == "nr_foll_pin_released" { r = $2 }
	     END { print a - r }' /proc/vmstat
}

# until SECS CMD...: CMD until it succeeds, at most SECS seconds
g_until() {
	local end=$((SECONDS + $1))

	shift
	until "$@" >/dev/null 2>&1; do
		((SECONDS < end)) || return 1
		sleep 1
	done
}

# xfer LABEL ADDR: 4 MiB WRITE and READ, verified, via krdmactl
g_xfer() {
	local out

	out=$(timeout 120 userspace-tools/krdmactl xfer "$2" -p $SERVE_PORT \
		-s 4M -t 30000 2>&1)
	local rc=$?
	printf '# %s\n' "${out//$'\n'/$'\n'# }"
	g_check "$1: krdmactl xfer -s 4M to $2: WRITE and READ verified" \
		test $rc -eq 0
}

# xfer_until LABEL ADDR SECS: as g_xfer, each failed try shown, until a
# try succeeds or SECS have passed
g_xfer_until() {
	local out rc end=$((SECONDS + $3)) try=0

	while :; do
		try=$((try + 1))
		out=$(timeout 120 userspace-tools/krdmactl xfer "$2" \
			-p $SERVE_PORT -s 4M -t 30000 2>&1)
		rc=$?
		printf '# try %d: %s\n' $try "${out//$'\n'/$'\n'# }"
		((rc == 0 || SECONDS >= end)) && break
		sleep 2
	done
	g_check "$1: krdmactl xfer -s 4M to $2: WRITE and READ verified (try $try)" \
		test $rc -eq 0
}

# field FILE KEY: KEY's value in the last krdma_stress line with it
g_field() {
	grep -E "^krdma_stress: [a-z]+: .*\b$2=" "$1" | tail -n1 |
		sed -E "s/.*\b$2=([^ ]*).*/\1/"
}

guest_a() {
	local round=$1 s

	g_link a 0 rxe $A_RXE && g_link a 1 siw $A_SIW
	g_check "A$round: links up, rxel0 and siwl0 ACTIVE" test $? -eq 0
	userspace-tools/krdmactl serve -p $SERVE_PORT >/tmp/serve.log 2>&1 &
	for s in "$A_RXE" "$A_SIW"; do
		selftests/krdma_stress serve "$s" -p $LOAD_PORT -S -s 16M \
			-t 1200 >"/tmp/load-serve-$s.log" 2>&1 &
	done
	g_mark "a ready"
	if ((round == 1)); then
		# B's serve answers once B is up
		g_check "A: B's krdmactl serve answers over the rxe link" \
			g_until 300 userspace-tools/krdmactl ping $B_RXE \
			-p $SERVE_PORT -c 1 -i 0 -t 5000
		g_xfer "A -> B rxe" $B_RXE
		g_xfer "A -> B siw" $B_SIW
		g_mark "a done"
	fi
	# Until the host kills this guest (bounded by run.sh's timeout)
	sleep 3000
}

# g_load_lost TYPE FILE MAX_MS ERRNOS: B's load against the killed A
# ended as documented
g_load_lost() {
	local f=$2 ok=1 v detect s e

	for v in outstanding:0 mismatches:0 state:ERROR; do
		[[ $(g_field "$f" "${v%%:*}") == "${v#*:}" ]] ||
			{ echo "# $1: ${v%%:*}=$(g_field "$f" "${v%%:*}"), expected ${v#*:}"; ok=0; }
	done
	[[ $(g_field "$f" error) =~ ^($4)$ ]] ||
		{ echo "# $1: error=$(g_field "$f" error), expected $4"; ok=0; }
	[[ $(g_field "$f" errors) =~ ^[1-9] ]] ||
		{ echo "# $1: no operation completed with an error"; ok=0; }
	s=$(g_field "$f" first_error_at)
	e=$(g_field "$f" last_ok_at)
	detect=$((${s:-0} - ${e:-0}))
	echo "# $1: first error $((detect / 1000)).$((detect % 1000 / 100)) s after the last success; $(g_field "$f" verified) rounds verified before"
	((detect <= $3)) || { echo "# $1: more than $(($3 / 1000)) s"; ok=0; }
	s=$(g_field "$f" vmpin_start_kb)
	e=$(g_field "$f" vmpin_end_kb)
	[[ -n $e && $e -le ${s:-0} ]] || { echo "# $1: VmPin ${e:-?} kB, was ${s:-?} kB"; ok=0; }
	((ok))
}

guest_b() {
	local pins0 klog0 p end lr ls i serve

	pins0=$(g_pins)
	klog0=$(dmesg | wc -l)
	sysctl -qw net.ipv4.tcp_retries2=$B_TCP_RETRIES2
	g_link b 0 rxe $B_RXE && g_link b 1 siw $B_SIW
	g_check "B: links up, rxel0 and siwl0 ACTIVE" test $? -eq 0
	userspace-tools/krdmactl serve -p $SERVE_PORT >/tmp/serve.log 2>&1 &
	serve=$!

	# 1: verified data both ways, on each link, started from each side
	g_check "B: A's krdmactl serve answers over the rxe link" \
		g_until 400 userspace-tools/krdmactl ping $A_RXE -p $SERVE_PORT \
		-c 1 -i 0 -t 5000
	g_xfer "B -> A rxe" $A_RXE
	g_xfer "B -> A siw" $A_SIW
	g_check "B -> A: krdmactl ping -c 3 on both links, verified" \
		bash -c "userspace-tools/krdmactl ping $A_RXE -p $SERVE_PORT -c 3 -i 0 &&
			 userspace-tools/krdmactl ping $A_SIW -p $SERVE_PORT -c 3 -i 0"
	# A's two transfers to B, as B's serve saw them
	end=$((SECONDS + 300))
	while (($(grep -c 'round of 4 MiB, every WRITE verified, bye' /tmp/serve.log) < 2)) &&
		((SECONDS < end)); do
		sleep 1
	done
	sed 's/^/# B serve: /' /tmp/serve.log
	g_check "B: A's transfers to B on rxel0 and siwl0 arrived, every WRITE verified" \
		bash -c "grep -q 'via rxel0: 1 round of 4 MiB, every WRITE verified, bye' /tmp/serve.log &&
			 grep -q 'via siwl0: 1 round of 4 MiB, every WRITE verified, bye' /tmp/serve.log"

	# 2: loads on both links; the host kills A once they flow
	selftests/krdma_stress load $A_RXE -p $LOAD_PORT -r -d 8 -c 256K -t 1200 \
		>/tmp/load-rxe.log 2>&1 &
	lr=$!
	selftests/krdma_stress load $A_SIW -p $LOAD_PORT -r -d 8 -c 256K -t 1200 \
		>/tmp/load-siw.log 2>&1 &
	ls=$!
	end=$((SECONDS + 120))
	until grep -q 'load: flowing' /tmp/load-rxe.log &&
		grep -q 'load: flowing' /tmp/load-siw.log; do
		((SECONDS < end)) || break
		sleep 0.2
	done
	g_check "B: loads flowing to A on both links" \
		bash -c "grep -q 'load: flowing' /tmp/load-rxe.log && grep -q 'load: flowing' /tmp/load-siw.log"
	g_mark "flowing"

	# 3: A is gone: every operation completes, with errors, in time
	end=$((SECONDS + 180))
	while kill -0 $lr 2>/dev/null || kill -0 $ls 2>/dev/null; do
		((SECONDS < end)) || break
		sleep 0.2
	done
	for p in $lr $ls; do
		kill -0 "$p" 2>/dev/null && { kill -9 "$p"; echo "# load $p hung: killed"; }
	done
	wait $lr $ls 2>/dev/null
	sed 's/^/# rxe load: /' /tmp/load-rxe.log
	sed 's/^/# siw load: /' /tmp/load-siw.log
	g_check "B: peer killed, rxe: every operation completed with an error, ERROR ETIMEDOUT within 20 s (6 retries of ~1 s), pages unpinned" \
		g_load_lost rxe /tmp/load-rxe.log 20000 ETIMEDOUT
	g_check "B: peer killed, siw: every operation completed with an error, ERROR within 40 s (TCP, tcp_retries2=$B_TCP_RETRIES2), pages unpinned" \
		g_load_lost siw /tmp/load-siw.log 40000 'ECONNRESET|ETIMEDOUT|EIO'
	g_mark "peer lost"

	# 4: A comes back: new connections work. A has just booted, on
	# cores B and the host share: its first seconds may stall it longer
	# than a transport's retries last, which a new connection then
	# reports (RETRY_EXC, no ARP answer). What is tested is that B
	# reaches the new A at all, on both links: each xfer may take
	# another try, with a new connection, within 120 s.
	g_check "B: A is back: its krdmactl serve answers over both links" \
		g_until 300 bash -c "userspace-tools/krdmactl ping $A_RXE -p $SERVE_PORT -c 1 -i 0 -t 5000 &&
			userspace-tools/krdmactl ping $A_SIW -p $SERVE_PORT -c 1 -i 0 -t 5000"
	g_xfer_until "B -> A again, rxe" $A_RXE 120
	g_xfer_until "B -> A again, siw" $A_SIW 120

	# 5: clean
	kill $serve
	wait
	end=$((SECONDS + 10))
	while p=$(g_pins) && ((p != pins0)) && ((SECONDS < end)); do
		sleep 0.1
	done
	g_check "B: pinned pages back (nr_foll_pin_acquired - released $p, was $pins0)" \
		test "$p" -eq "$pins0"
	local bad
	bad=$(dmesg | tail -n +$((klog0 + 1)) | grep -E "$BAD")
	[[ -z $bad ]] || echo "$bad" | head -n 20 | sed 's/^/# /'
	g_check "B: no WARNING, BUG, lockdep or hung task in the kernel log" test -z "$bad"
	for ((i = 0; i < 50; i++)); do
		[[ $(cat /sys/module/krdma/refcnt) == 0 ]] && break
		sleep 0.1
	done
	g_check "B: krdma unloads and loads again" \
		bash -c "timeout 60 rmmod krdma && insmod krdma.ko"
	sysctl -qw net.ipv4.tcp_retries2=15
	g_mark "b done"
}

if [[ ${1:-} == guest ]]; then
	cd "$repo" || exit 1
	case ${2:-} in
	a) guest_a "${3:-1}" ;;
	b) guest_b ;;
	*) echo "usage: $0 guest a|b [ROUND]" >&2 && exit 2 ;;
	esac
	exit 0
fi

# ================================ the host ===================================

build=${BUILD:-$repo/build}
log=$build/two-guests/$(date +%Y%m%d-%H%M%S)
mkdir -p "$log"
deadline=$((SECONDS + ${KRDMA_TWO_TIMEOUT:-1500}))
msg() { echo "two-guests: $*" >&2; }

# One set of guests at a time, and no other guest run meanwhile: the
# run.sh calls below know that we hold the lock (KRDMA_QEMU_LOCK_HELD)
exec 9>"$build/qemu.lock"
if ! flock -n 9; then
	msg "another guest run holds $build/qemu.lock; waiting for it"
	flock 9
fi

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port0=$(free_port)
port1=$(free_port)
while [[ $port1 == "$port0" ]]; do port1=$(free_port); done

# The NICs of a guest: B listens, A connects
nics() { # guest
	local role=listen

	[[ $1 == a ]] && role=connect
	echo "-netdev socket,id=kl0,$role=127.0.0.1:$port0" \
		"-device virtio-net-pci,netdev=kl0,mac=$(mac "$1" 0)" \
		"-netdev socket,id=kl1,$role=127.0.0.1:$port1" \
		"-device virtio-net-pci,netdev=kl1,mac=$(mac "$1" 1)"
}

runpids=()
qemupids=()
cleanup() {
	local p

	for p in "${qemupids[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${runpids[@]}"; do
		wait "$p" 2>/dev/null
	done
}
trap cleanup EXIT INT TERM

# boot NAME GUEST ROUND [ENV...]: run.sh for a guest, in the background;
# sets $rundir (its results) and $qpid (its QEMU), once QEMU runs
boot() {
	local name=$1 g=$2 round=$3 i

	shift 3
	env "$@" KRDMA_QEMU_LOCK_HELD=1 KRDMA_QEMU_TIMEOUT=1200 \
		KRDMA_QEMU_ARGS="$(nics "$g")" \
		"$here/run.sh" run "selftests/qemu/two-guests.sh guest $g $round" \
		>"$log/$name.log" 2>&1 &
	runpids+=($!)
	rundir=
	qpid=
	# the build (first guest only) can take minutes
	while ((SECONDS < deadline)); do
		rundir=$(sed -n 's/.*booting .*results in \(.*\)$/\1/p' "$log/$name.log" 2>/dev/null)
		[[ -n $rundir && -s $rundir/qemu.pid ]] && break
		kill -0 "${runpids[-1]}" 2>/dev/null || break
		sleep 0.2
	done
	qpid=$(cat "$rundir/qemu.pid" 2>/dev/null)
	[[ -n $qpid ]] || { msg "$name did not start; see $log/$name.log"; return 1; }
	qemupids+=("$qpid")
	msg "$name: QEMU $qpid, results in $rundir"
}

# wait_mark RUNDIR MARK SECS
wait_mark() {
	local end=$((SECONDS + $3))

	while ((SECONDS < end && SECONDS < deadline)); do
		grep -q "^two-guests: mark $2\$" "$1/output.log" 2>/dev/null && return 0
		sleep 0.5
	done
	return 1
}

host=()
h_check() { # DESC COMMAND...
	local desc=$1

	shift
	if "$@"; then host+=("ok $desc"); else host+=("not ok $desc"); fi
}

# A TCP port listening on 127.0.0.1 (B's QEMU, before A connects)
listening() {
	awk -v p=":$(printf '%04X' "$1")" \
		'$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		 END { exit !f }' /proc/net/tcp
}

start=$SECONDS
boot b b 1 || exit 1
b_dir=$rundir b_run=${runpids[-1]}
end=$((SECONDS + 60))
until listening "$port0" && listening "$port1"; do
	((SECONDS < end)) || { msg "B's QEMU does not listen on $port0 and $port1"; exit 1; }
	sleep 0.2
done
boot a1 a 1 KRDMA_NO_BUILD=1 || exit 1
a1_dir=$rundir a1_qemu=$qpid

h_check "B's loads flow to A (both links)" wait_mark "$b_dir" flowing 900
kill -9 "$a1_qemu" 2>/dev/null
killed_at=$SECONDS
# gone once its parent (run.sh's timeout) reaped it
gone() {
	local i

	for ((i = 0; i < 50; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
h_check "A's QEMU killed mid-transfer" gone "$a1_qemu"
msg "A killed at $((killed_at - start)) s"
h_check "B noticed: its operations ended" wait_mark "$b_dir" "peer lost" 240
boot a2 a 2 KRDMA_NO_BUILD=1 || exit 1
a2_dir=$rundir a2_qemu=$qpid

# B ends by itself; then A goes
end=$((SECONDS + 900))
while kill -0 "$b_run" 2>/dev/null && ((SECONDS < end && SECONDS < deadline)); do
	sleep 1
done
h_check "B finished within the time limit" bash -c "! kill -0 $b_run 2>/dev/null"
wait "$b_run"
b_rc=$?
h_check "B's guest run ended with status 0 (run.sh exit $b_rc)" test "$b_rc" -eq 0
h_check "B got to its end" wait_mark "$b_dir" "b done" 1
kill "$a2_qemu" 2>/dev/null

# TAP: the guests' results in order, then the host's
mapfile -t lines < <(
	for d in "$a1_dir" "$b_dir" "$a2_dir"; do
		tr -d '\r' <"$d/output.log" |
			sed -n -e 's/^two-guests: \(ok .*\)$/\1/p' \
				-e 's/^two-guests: \(not ok .*\)$/\1/p' \
				-e 's/^\(# .*\)$/\1/p'
	done
	printf '%s\n' "${host[@]}"
)
echo "TAP version 13"
pass=0 fail=0 i=0
for l in "${lines[@]}"; do
	case $l in
	"ok "*) i=$((i + 1)) pass=$((pass + 1)) && echo "ok $i ${l#ok }" ;;
	"not ok "*) i=$((i + 1)) fail=$((fail + 1)) && echo "not ok $i ${l#not ok }" ;;
	*) echo "$l" ;;
	esac
done
echo "1..$i"
msg "logs: $log, guests: A $a1_dir, B $b_dir, A again $a2_dir ($((SECONDS - start)) s)"
echo "$pass passed, $fail failed"
((fail == 0 && i > 0))
