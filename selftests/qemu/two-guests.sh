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
#   2. the ring AllReduce (examples/krdma-allreduce) with ranks on both
#      guests: 3 ranks, 0 and 2 on A, 1 on B; 64 KiB and 4 MiB, float32
#      and int32; on rxe, on siw, and over TCP for the side-by-side
#      number: every rank exits 0, rank 0's JSON has every row verified by
#      every rank (the algbw of each transport as diagnostics). Then rank
#      1 killed mid-run: B kills it (SIGKILL) at A's word, once rank 0 has
#      printed its first row; ranks 0 and 2 must exit 1 within their -t
#      (30 s), naming rank 1, and leave no buffer in A's debugfs. Then
#      the shuffle (examples/krdma-shuffle, -R 1): reducer 0 and mapper 1
#      on A, mapper 0 on B, 64 KiB and 4 MiB partitions, on rxe and siw:
#      every rank exits 0, rank 0's JSON has every byte verified (the
#      aggregate GB/s as diagnostics); and the data loader
#      (examples/krdma-load): its server on A (64 KiB samples, --clients
#      1), a client on B (8 batches of 8), on rxe and siw: both exit 0,
#      every sample verified (samples/s and MB/s as diagnostics);
#   3. B starts two krdma_stress loads against A (WRITE a pattern, READ it
#      back, check it: 8 in flight on each link); once both flow and A
#      is done with 2, the host kills A's QEMU;
#   4. on B, every operation completes with an error, both connections end
#      in ERROR, within the documented time: rxe after its retries
#      (krdma's ack_timeout ~1 s, 6 retries: ~7 s; within 20 s); siw when TCP
#      gives up (net.ipv4.tcp_retries2, set to 5 on B: ~13 s; within 40 s);
#      VmPin back, pinned pages back to where they started;
#   5. the host boots A again; B connects to it on both links: a new
#      connection works (xfer verified; another try, with a new
#      connection, within 120 s, since the new A may stall as it boots);
#   6. B ends cleanly: no WARNING/BUG/hung task in its kernel log, its pin
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
# g_cm_debug +p|-p: krdma's and siw's connection messages (dynamic debug)
g_cm_debug() {
	echo "module krdma file conn.c $1" >/sys/kernel/debug/dynamic_debug/control
	echo "module siw file siw_cm.c $1" >/sys/kernel/debug/dynamic_debug/control
} 2>/dev/null

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

# ------------- the ring AllReduce, with ranks on both guests -----------------
#
# examples/krdma-allreduce (Documentation/workloads.rst), 3 ranks: 0 and 2
# on A, 1 on B. The ring 0 -> 1 -> 2 -> 0 crosses the link twice (0 -> 1,
# 1 -> 2); 2 -> 0 stays in A. Rank 0 listens for the rendezvous on A's
# address of a link, and each rank takes the device of the address it
# reaches rank 0 from: rxel0 (or siwl0) on both guests. A runs
# `g_allreduce a`, B `g_allreduce b`: the same runs in the same order,
# each on a port of its own, each guest as soon as it gets there (after
# the transfers of 1). The programs' rendezvous is where they meet: a rank
# tries to reach rank 0, and rank 0 waits for the others, for -t seconds.
AR=examples/krdma-allreduce
# 64 KiB and 4 MiB, float and int32, as selftests/krdma_examples_test.sh,
# but 2 iterations after 1 warmup: the QEMU link moves a 4 MiB AllReduce
# in about 1.8 s
AR_ARGS=(-b 64K -e 4M -f 64 -d all -n 2 -w 1 -t 60)
AR_PORT=29500		# + 1 to 4: rank 0's rendezvous, a port per run
AR_WORD_PORT=29510	# on B: A's word to kill rank 1
AR_KILL_T=30		# the kill run's -t, which bounds the survivors' exit
AR_DBG=/sys/kernel/debug/krdma
# AR_ROWS_OK: what rank 0's JSON of a run of AR_ARGS must hold (shared
# with krdma_examples_test.sh)
# shellcheck source=examples/test_lib.sh
. "$repo/examples/test_lib.sh"
declare -A ar_bw	# per run: the algbw at 4 MiB, float (GB/s)

# The soft device of a link's type, on either guest
g_dev() { echo "${1}l0"; }

# g_json FILE EXPR: the Python expression EXPR holds for d, FILE's JSON
# (rows: its "results"); Python's complaints as diagnostics.
# g_json FILE EXPR print: EXPR's value printed as it is (a "# " line)
g_json() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = d.get("results")
v = eval("(" + sys.argv[2] + ")")
if len(sys.argv) > 3:
    print(v)
sys.exit(0 if v else 1)
' "$@" 2>&1 | sed '/^# /!s/^/# json: /'
	return "${PIPESTATUS[0]}"
}

# g_bg NAME WHO SECS CMD...: CMD in the background ($! is its pid), under
# `timeout SECS` unless SECS is 0; its output in /tmp/ar-NAME.WHO.{out,err}
g_bg() {
	local name=$1 who=$2 secs=$3
	local -a pre=()

	shift 3
	((secs)) && pre=(timeout -k 5 "$secs")
	"${pre[@]}" "$@" >"/tmp/ar-$name.$who.out" 2>"/tmp/ar-$name.$who.err" </dev/null &
}

# g_ar_spawn NAME RANK ROOT:PORT SECS ARGS...: one rank of $G_PROG
# (default: the AllReduce) with g_bg NAME RANK SECS
g_ar_spawn() {
	g_bg "$1" "$2" "$4" "${G_PROG:-$AR}" --root "$3" --rank "$2" --size 3 "${@:5}"
}

# g_reap SECS PID...: until the PIDs (children of this shell) have exited,
# at most SECS seconds; g_end: then (date +%s%N); g_left: 1 when some were
# still there, which are then killed (SIGKILL); g_rcs: their statuses
g_reap() {
	local end=$((SECONDS + $1)) p

	shift
	while :; do
		g_left=0
		for p in "$@"; do
			kill -0 "$p" 2>/dev/null && g_left=1
		done
		((g_left && SECONDS < end)) || break
		sleep 0.05
	done
	g_end=$(date +%s%N)
	g_rcs=()
	for p in "$@"; do
		kill -9 "$p" 2>/dev/null
		{ wait "$p"; } 2>/dev/null
		g_rcs+=($?)
	done
}

# g_ar_run NAME ROOT:PORT "RANKS" ARGS...: this guest's RANKS of a run, each
# under `timeout 120`, all waited for; g_rcs: their statuses
g_ar_run() {
	local name=$1 root=$2 ranks=$3 r
	local -a ps=()

	shift 3
	for r in $ranks; do
		g_ar_spawn "$name" "$r" "$root" 120 "$@"
		ps+=($!)
	done
	g_reap 130 "${ps[@]}"
}

# g_ar_check DESC NAME "RANKS" COMMAND...: as g_check; when COMMAND fails,
# the ends of the RANKS' outputs of run NAME as diagnostics
g_ar_check() {
	local desc=$1 name=$2 ranks=$3 r f

	shift 3
	if "$@"; then
		g_ok "$desc"
		return 0
	fi
	g_not_ok "$desc"
	for r in $ranks; do
		for f in "/tmp/ar-$name.$r.out" "/tmp/ar-$name.$r.err"; do
			[[ -s $f ]] && tail -n 6 "$f" | cut -c 1-300 | sed "s|^|# ${f#/tmp/}: |"
		done
	done
	return 1
}

# g_ar_rows NAME: rank 0's rows of run NAME as diagnostics; ar_bw[NAME]
g_ar_rows() {
	local l

	while IFS= read -r l; do
		case $l in
		"# "*) echo "$l" ;;
		?*) ar_bw[$1]=$l ;;
		esac
	done < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("# A: AllReduce on %s: %8d bytes %-5s %10.1f us, algbw %.4f GB/s, busbw %.4f GB/s, %d wrong"
          % (sys.argv[2], r["size"], r["type"], r["time_us"], r["algbw_gbs"],
             r["busbw_gbs"], r["wrong"]))
    if r["size"] == 4194304 and r["type"] == "float":
        print("%.4f" % r["algbw_gbs"])
' "/tmp/ar-$1.0.out" "$1" 2>/dev/null)
}

# g_grep_all PATTERN FILE...: PATTERN in every FILE
g_grep_all() {
	local p=$1 f

	shift
	for f in "$@"; do
		grep -q -- "$p" "$f" || return 1
	done
}

# g_nothing_left COMM: no buffer of COMM in krdma's debugfs, within 10 s
# (pages are unpinned from a work item)
g_nothing_left() {
	local end=$((SECONDS + 10))

	[[ -r $AR_DBG/buffers ]] || { echo "# no $AR_DBG/buffers"; return 1; }
	while grep -q "comm=$1" "$AR_DBG/buffers"; do
		if ((SECONDS >= end)); then
			grep "comm=$1" "$AR_DBG/buffers" | head -n 5 | sed 's/^/# left: /'
			return 1
		fi
		sleep 0.1
	done
}

# g_word ADDR PORT WORD SECS: WORD to the listener at ADDR:PORT (on the
# other guest), tried until it listens, for at most SECS seconds
g_word() {
	local end=$((SECONDS + $4))

	# shellcheck disable=SC2016 # the inner bash's $1 $2 $3
	until timeout 5 bash -c 'printf "%s\n" "$3" >"/dev/tcp/$1/$2"' _ "$@" 2>/dev/null; do
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}

# B's end of the word (python3 -c "$G_KILL_PY" ADDR PORT SECS PID):
# listens on ADDR:PORT for SECS seconds; at the word "kill", kills PID
# (SIGKILL) at once. Exit 0: killed; 2: another word; 3: PID had exited;
# 4: no word
G_KILL_PY='
import os, signal, socket, sys
addr, port, secs, pid = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(1)
s.settimeout(secs)
try:
    c, _ = s.accept()
    c.settimeout(10)
    word = c.recv(64).decode(errors="replace").strip()
except OSError as e:
    print("no word from A: %s" % e)
    sys.exit(4)
if word != "kill":
    print("A said %r: nothing to kill" % word)
    sys.exit(2)
try:
    os.kill(pid, signal.SIGKILL)
except ProcessLookupError:
    print("A said kill, but rank 1 had exited")
    sys.exit(3)
print("A said kill: rank 1 (pid %d) killed" % pid)
'

# The kill run on A: ranks 0 and 2; once rank 0 printed its first row
# (4 KiB: the ring runs) and before its last, the word "kill" to B (else
# "none", so that B does not wait for it); then ranks 0 and 2 must exit 1
# within AR_KILL_T seconds of the word (counted from before it was
# sent), naming rank 1, and leave no buffer behind
g_ar_kill_a() {
	local root=$1 p0 p2 t0 dt end word=none killed=0 ok=0

	shift
	g_ar_spawn kill 0 "$root" 0 "$@"
	p0=$!
	g_ar_spawn kill 2 "$root" 0 "$@"
	p2=$!
	end=$((SECONDS + 90))
	until grep -q '^ *4096 ' /tmp/ar-kill.0.out 2>/dev/null; do
		kill -0 $p0 2>/dev/null || break
		((SECONDS < end)) || break
		sleep 0.05
	done
	# (its last line: "# krdma-allreduce: every element ...")
	kill -0 $p0 2>/dev/null && grep -q '^ *4096 ' /tmp/ar-kill.0.out &&
		! grep -q '^# krdma-allreduce: every' /tmp/ar-kill.0.out && word="kill"
	[[ $word == kill ]] || echo "# A: AllReduce kill run: rank 0 printed no row, or ended, before the kill"
	t0=$(date +%s%N)
	if g_word "$B_RXE" $AR_WORD_PORT $word 20; then
		[[ $word == kill ]] && killed=1
	else
		echo "# A: AllReduce kill run: B took no word at $B_RXE:$AR_WORD_PORT within 20 s"
	fi
	g_reap $((AR_KILL_T + 5)) $p0 $p2
	dt=$(((g_end - t0) / 1000000))
	((killed && !g_left && dt <= AR_KILL_T * 1000)) && [[ ${g_rcs[*]} == "1 1" ]] && ok=1
	g_ar_check "A: AllReduce on rxe, rank 1 (on B) killed mid-run: ranks 0 and 2 exit 1 within $AR_KILL_T s (their -t) of the word to kill it (took $((dt / 1000)).$((dt % 1000 / 100)) s)" \
		kill "0 2" test $ok -eq 1
	g_ar_check "A: AllReduce on rxe, rank 1 killed: ranks 0 and 2 name rank 1 as gone" kill "0 2" \
		g_grep_all "aborted: rank 1 is gone" /tmp/ar-kill.0.err /tmp/ar-kill.2.err
	g_check "A: AllReduce on rxe, rank 1 killed: no buffer of ranks 0 and 2 left (debugfs)" \
		g_nothing_left krdma-allreduce
	grep -h 'aborted' /tmp/ar-kill.0.err /tmp/ar-kill.2.err | head -n 4 | cut -c 1-300 | sed 's/^/# A: /'
}

# The kill run on B: rank 1, killed at A's word
g_ar_kill_b() {
	local root=$1 p1 w wrc

	shift
	g_ar_spawn kill 1 "$root" 0 "$@"
	p1=$!
	timeout -k 2 $((AR_KILL_T * 5 + 10)) python3 -c "$G_KILL_PY" \
		"$B_RXE" $AR_WORD_PORT $((AR_KILL_T * 5)) $p1 >/tmp/ar-kill.word 2>&1 &
	w=$!
	g_reap $((AR_KILL_T * 5 + 15)) $w
	wrc=${g_rcs[0]}
	sed 's/^/# B: AllReduce kill run: /' /tmp/ar-kill.word
	# killed; or, when A said "none", it ends by itself (its -t)
	g_reap $((AR_KILL_T * 2)) $p1
	g_ar_check "B: AllReduce on rxe, rank 1 killed (SIGKILL) mid-run at A's word" kill 1 \
		test "$wrc:${g_rcs[0]}" = 0:137
}

# g_allreduce a|b: this guest's ranks of every run, and its checks
g_allreduce() {
	local me=$1 t addr notify port=$AR_PORT
	local -a args

	for t in rxe siw tcp; do
		port=$((port + 1))
		args=("${AR_ARGS[@]}" -j)
		case $t in
		rxe) addr=$A_RXE notify=WRITE_IMM ;;
		siw) addr=$A_SIW notify=WRITE+SEND ;;
		tcp) addr=$A_RXE && args+=(-m tcp) ;;
		esac
		if [[ $me == b ]]; then
			g_ar_run "$t" "$addr:$port" 1 "${args[@]}"
			g_ar_check "B: AllReduce on $t, rank 1 of 3 (0 and 2 on A), 64 KiB and 4 MiB, float and int32: exits 0 (every element it got verified)" \
				"$t" 1 test "${g_rcs[0]}" -eq 0
			continue
		fi
		g_ar_run "$t" "$addr:$port" "0 2" "${args[@]}"
		g_ar_check "A: AllReduce on $t, 3 ranks on two guests (0 and 2 here, 1 on B), 64 KiB and 4 MiB, float and int32: ranks 0 and 2 exit 0" \
			"$t" "0 2" test "${g_rcs[*]}" = "0 0"
		if [[ $t == tcp ]]; then
			g_ar_check "A: AllReduce on tcp: every row verified by every rank (0 wrong), busbw = algbw * 4/3; ranks 0 and 2 at $A_RXE, 1 at $B_RXE" \
				tcp 0 g_json /tmp/ar-tcp.0.out "$AR_ROWS_OK and
				[p[\"info\"].split()[1].rsplit(\":\", 1)[0] for p in d[\"peers\"]] == [\"$A_RXE\", \"$B_RXE\", \"$A_RXE\"]"
		else
			g_ar_check "A: AllReduce on $t: every row verified by every rank (0 wrong), busbw = algbw * 4/3; every rank on $(g_dev $t), notified with $notify" \
				"$t" 0 g_json "/tmp/ar-$t.0.out" "$AR_ROWS_OK and
				all(p[\"info\"].split()[0::2] == [\"$(g_dev $t)\", \"$notify\"] for p in d[\"peers\"])"
		fi
		g_ar_rows "$t"
	done
	[[ $me == a ]] &&
		echo "# A: AllReduce, 3 ranks on two guests, algbw at 4 MiB float, GB/s: rxe ${ar_bw[rxe]:-?}, siw ${ar_bw[siw]:-?}, tcp ${ar_bw[tcp]:-?}"

	# rank 1 killed mid-run, on rxe; sizes from 4 KiB, many iterations:
	# the run lasts far longer than it takes to kill
	port=$((port + 1))
	args=(-b 4K -e 4M -f 4 -n 200 -w 0 -t "$AR_KILL_T")
	if [[ $me == a ]]; then
		g_ar_kill_a "$A_RXE:$port" "${args[@]}"
	else
		# (2>/dev/null: bash's own "Killed" notice)
		g_ar_kill_b "$A_RXE:$port" "${args[@]}" 2>/dev/null
	fi
}

# ----------- the shuffle and the data loader, on both guests -----------------
#
# As the AllReduce (after it, each run on a port of its own), on rxe and
# on siw. examples/krdma-shuffle, 3 ranks, -R 1: reducer 0 (rank 0) and
# mapper 1 (rank 2) on A, mapper 0 (rank 1) on B: B's partitions cross
# the link. 2 iterations after 1 warmup: the link moves the 4 MiB
# partitions of 2 mappers in about 3 s an iteration.
SH=examples/krdma-shuffle
SH_ARGS=(-R 1 -b 64K -e 4M -f 64 -n 2 -w 1 -t 60 -j)
SH_PORT=29520		# + 1, 2: rank 0's rendezvous
# examples/krdma-load: its server on A (--clients 1), a client on B:
# 8 batches of 8 samples of 64 KiB (4 MiB)
LD=examples/krdma-load
LD_DS=/tmp/ld.ds
LD_PORT=29600		# + 1, 2: the server on A
# SH_OK, LD_OK: examples/test_lib.sh

# g_shuffle a|b: this guest's ranks of the shuffle's runs, and its checks
g_shuffle() {
	local me=$1 t addr port=$SH_PORT

	for t in rxe siw; do
		port=$((port + 1))
		addr=$A_RXE
		[[ $t == siw ]] && addr=$A_SIW
		if [[ $me == b ]]; then
			G_PROG=$SH g_ar_run "sh-$t" "$addr:$port" 1 "${SH_ARGS[@]}"
			g_ar_check "B: shuffle on $t, mapper 0 (rank 1) of 3 (reducer 0 and mapper 1 on A), 64 KiB and 4 MiB partitions: exits 0" \
				"sh-$t" 1 test "${g_rcs[0]}" -eq 0
			continue
		fi
		G_PROG=$SH g_ar_run "sh-$t" "$addr:$port" "0 2" "${SH_ARGS[@]}"
		g_ar_check "A: shuffle on $t, 2 mappers into 1 reducer on two guests (reducer 0 and mapper 1 here, mapper 0 on B), 64 KiB and 4 MiB partitions: ranks 0 and 2 exit 0" \
			"sh-$t" "0 2" test "${g_rcs[*]}" = "0 0"
		g_ar_check "A: shuffle on $t: every byte of both sizes verified (0 wrong); every rank on $(g_dev $t)" \
			"sh-$t" 0 g_json "/tmp/ar-sh-$t.0.out" "$SH_OK and
			all(p[\"info\"].split()[0] == \"$(g_dev $t)\" for p in d[\"peers\"])"
		g_json "/tmp/ar-sh-$t.0.out" "\"# A: shuffle on $t, aggregate: \" + \", \".join(
			\"%.4f GB/s at %d KiB\" % (r[\"aggbw_gbs\"], r[\"part_bytes\"] >> 10) for r in rows)" print
	done
}

# g_load a|b: A's server, or B's client, of each load run, and its checks
g_load() {
	local me=$1 t addr port=$LD_PORT f

	[[ $me == a ]] && "$LD" --make-dataset $LD_DS 8M >/dev/null
	for t in rxe siw; do
		port=$((port + 1))
		addr=$A_RXE
		[[ $t == siw ]] && addr=$A_SIW
		if [[ $me == a ]]; then
			g_bg "ld-$t" srv 120 "$LD" --serve $LD_DS -s 64K \
				--listen "$addr:$port" --clients 1 -t 60 -j
			g_reap 130 $!
			g_ar_check "A: load on $t, the server of 64 KiB samples (its client on B): exits 0, its client served, none failed" \
				"ld-$t" srv g_json "/tmp/ar-ld-$t.srv.out" \
				"${g_rcs[0]} == 0 and d[\"clients\"] == 1 and d[\"failed\"] == 0"
			continue
		fi
		g_bg "ld-$t" c1 120 "$LD" --server "$addr:$port" -b 8 -n 8 -t 60 -j
		g_reap 130 $!
		f=/tmp/ar-ld-$t.c1.out
		g_ar_check "B: load on $t, a client of A's server, 8 batches of 8 samples of 64 KiB: exits 0, every sample verified (0 wrong), on $(g_dev $t)" \
			"ld-$t" c1 g_json "$f" "${g_rcs[0]} == 0 and $LD_OK and
			d[\"sample_bytes\"] == 65536 and d[\"info\"].split()[0] == \"$(g_dev $t)\""
		g_json "$f" "\"# B: load on $t: %.0f samples/s, %.1f MB/s\" %
			(d[\"samples_per_s\"], d[\"bytes_per_s\"] / 1e6)" print
	done
}

guest_a() {
	local round=$1 s

	g_link a 0 rxe $A_RXE && g_link a 1 siw $A_SIW
	g_check "A$round: links up, rxel0 and siwl0 ACTIVE" test $? -eq 0
	userspace-tools/krdmactl serve -p $SERVE_PORT >/tmp/serve.log 2>&1 &
	# Their words reach the host as they come: A does not live to
	# report them (the host kills it under B's loads)
	dmesg -W | grep --line-buffered -E 'krdma|siw|conn |WARNING|BUG' |
		sed -u 's/^/# A kernel: /' &
	for s in "$A_RXE" "$A_SIW"; do
		selftests/krdma_stress serve "$s" -p $LOAD_PORT -S -s 16M \
			-t 1200 2>&1 | sed -u "s/^/# A load-serve $s: /" &
	done
	g_mark "a ready"
	if ((round == 1)); then
		# B's serve answers once B is up
		g_check "A: B's krdmactl serve answers over the rxe link" \
			g_until 300 userspace-tools/krdmactl ping $B_RXE \
			-p $SERVE_PORT -c 1 -i 0 -t 5000
		g_xfer "A -> B rxe" $B_RXE
		g_xfer "A -> B siw" $B_SIW
		# with B (rank 1 there); the host kills A only after this
		g_allreduce a
		g_shuffle a
		g_load a
		# B's loads connect now: how, if they fail
		g_cm_debug +p
		g_mark "a done"
	fi
	# Until the host kills this guest (bounded by run.sh's timeout)
	sleep 3000
}

# B's two loads to A print that they flow
g_flowing() {
	grep -q 'load: flowing' /tmp/load-rxe.log &&
		grep -q 'load: flowing' /tmp/load-siw.log
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
	local pins0 klog0 klog p end lr ls i serve

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
	# 2: the AllReduce: ranks 0 and 2 on A, rank 1 here
	g_allreduce b
	g_shuffle b
	g_load b

	# 3: loads on both links; the host kills A once they flow (and A is
	# done with 2)
	klog=$(dmesg | wc -l)
	g_cm_debug +p
	selftests/krdma_stress load $A_RXE -p $LOAD_PORT -r -d 8 -c 256K -t 1200 \
		>/tmp/load-rxe.log 2>&1 &
	lr=$!
	selftests/krdma_stress load $A_SIW -p $LOAD_PORT -r -d 8 -c 256K -t 1200 \
		>/tmp/load-siw.log 2>&1 &
	ls=$!
	end=$((SECONDS + 120))
	until g_flowing; do
		((SECONDS < end)) || break
		sleep 0.2
	done
	g_check "B: loads flowing to A on both links" g_flowing
	g_flowing ||
		dmesg | tail -n +$((klog + 1)) | grep -E 'krdma|siw|conn ' |
		tail -n 80 | sed 's/^/# B kernel: /'
	g_cm_debug -p
	g_mark "flowing"

	# 4: A is gone: every operation completes, with errors, in time
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

	# 5: A comes back: new connections work. A has just booted, on
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

	# 6: clean
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
# A's last load run ends as B's loads start: its results first
h_check "A got to its end (the AllReduce, shuffle and load with B)" wait_mark "$a1_dir" "a done" 90
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
