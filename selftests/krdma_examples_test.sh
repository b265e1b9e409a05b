#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The workload examples (examples/, Documentation/workloads.rst) in the
# guest test bed (run as root; rxe0 and siw0 up, krdma.ko loaded, see
# selftests/qemu/guest-setup.sh). Prints TAP.
#
# krdma-allreduce, 3 ranks in this guest:
# - on rxe and on siw, 64 KiB and 4 MiB, float and int32: every rank
#   exits 0, rank 0's JSON has the 4 rows, each verified by every rank
#   (0 wrong elements) with busbw = algbw * 2(N-1)/N, and every rank
#   notified with WRITE_IMM on rxe, WRITE + SEND on siw;
# - the TCP mode once, the same sizes: verified;
# - a wrong element (--inject-error: rank 1 adds 1 to one of its inputs)
#   is caught by every rank: exit 1, 3 wrong elements, not verified;
# - rank 1 killed (SIGKILL) mid-run, on rxe and on siw: ranks 0 and 2 exit
#   1 within KILL_BOUND seconds, both naming rank 1; the pinned pages come
#   back to (at most) where they were before the first run
#   (nr_foll_pin_acquired - nr_foll_pin_released of /proc/vmstat) and
#   debugfs lists no buffer of krdma-allreduce.
# krdma-shuffle, 3 ranks (2 mappers write into 1 reducer), on rxe and siw:
# - partitions of 64 KiB and 4 MiB: every rank exits 0, every byte
#   verified, the mappers notified with WRITE_IMM on rxe, WRITE + SEND on
#   siw;
# - mapper 0 (rank 1) killed mid-run: ranks 0 and 2 exit 1 within the
#   bound naming "rank 1 (mapper 0)", nothing left pinned;
# - the TCP mode once: verified.
# krdma-load, a server and 2 clients at once (3 processes) on a 32 MiB
# generated dataset in tmpfs, on rxe and siw:
# - samples of 64 KiB and 4 MiB: all exit 0, every sample of both clients
#   verified, the server counts 2 clients and no failure;
# - the server killed while it serves both: the clients exit 1 within the
#   bound naming the server ("the server at ADDR:PORT is gone"), nothing
#   left pinned (the dataset's pages, the clients' buffers);
# - the TCP mode once, 64 KiB: verified.
# Every process runs under `timeout`, except the ones of the kill cases,
# which are waited for with a bound and killed at the end if still there.

# shellcheck disable=SC2317,SC2016 # functions run through check(), eval
set -u
cd "$(dirname "$0")/.." || exit 1

AR=$PWD/examples/krdma-allreduce
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
RXE_DEV=${KRDMA_RXE_DEV:-rxe0}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
SIW_DEV=${KRDMA_SIW_DEV:-siw0}
# (examples/Makefile's test-fake: a directory of its own)
DBG=${KRDMA_DEBUGFS:-/sys/kernel/debug/krdma}
N=3
# 64 KiB and 4 MiB, both types
ARGS=(-b 64K -e 4M -f 64 -d all -n 5 -w 1 -t 60)
# seconds from the kill to the exit of the others (the program gives
# itself 5 s to learn who died; TCG on a busy host is slow)
KILL_BOUND=30
# per transport: allreduce 3 + kill 4, shuffle 3 + kill 4, load 4 + kill
# 4; TCP: allreduce 2, a wrong element 1, shuffle 1, load 1
NTESTS=$((2 * (7 + 7 + 8) + 5))
SH=$PWD/examples/krdma-shuffle
LD=$PWD/examples/krdma-load
# mappers 0 and 1 (ranks 1 and 2) write into reducer 0 (rank 0)
SH_ARGS=(-R 1 -b 64K -e 4M -f 64 -n 5 -w 1 -t 60)
# SH_OK: examples/test_lib.sh
LMODE=()

# shellcheck source=examples/test_lib.sh
. examples/test_lib.sh
ex_test_init krdma_examples_test

# Pages pinned with FOLL_PIN now, exact (as pins() of selftests/lib.sh,
# whose check() this test does not use): the per-CPU deltas folded in
# first, or a baseline read a moment earlier can be a few pages off
pins() {
	echo 1 2>/dev/null >/proc/sys/vm/stat_refresh
	awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	     $1 == "nr_foll_pin_released" { r = $2 }
	     END { print a - r }' /proc/vmstat
}

# ranks PROG NAME ADDR PORT ARGS...: N ranks of PROG with rank 0 at
# ADDR:PORT, all waited for; outputs in $TMP/NAME.<rank>.{out,err} (and
# $TMP/last.*); exit statuses in rcs[]
ranks() {
	local prog=$1 name=$2 addr=$3 port=$4 r
	local -a ps=()

	shift 4
	rm -f "$TMP"/last.*
	for ((r = 0; r < N; r++)); do
		timeout -k 5 180 "$prog" --root "$addr:$port" --rank $r --size $N "$@" \
			>"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" </dev/null &
		ps+=($!)
	done
	rcs=()
	for ((r = 0; r < N; r++)); do
		wait "${ps[r]}"
		rcs+=($?)
		ln -sf "$TMP/$name.$r.out" "$TMP/last.$r.out"
		ln -sf "$TMP/$name.$r.err" "$TMP/last.$r.err"
	done
}

allreduce() {
	ranks "$AR" "$@"
}

# algbw NAME: the algbw of the 4 MiB float row, as a diagnostic; rank
# 0's rows as "#" lines into $TMP/NAME.rows
algbw() {
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("# %s: %8d bytes %-5s %10.1f us, algbw %.4f GB/s, busbw %.4f GB/s, %d wrong"
          % (sys.argv[2], r["size"], r["type"], r["time_us"], r["algbw_gbs"],
             r["busbw_gbs"], r["wrong"]), file=sys.stderr)
print(["%.4f" % r["algbw_gbs"] for r in d["results"]
       if r["size"] == 4194304 and r["type"] == "float"][0])
' "$TMP/$1.0.out" "$1" 2>"$TMP/$1.rows" || echo "?"
}

# kill_run PROG NAME ADDR PORT ARGS...: N ranks of PROG (ARGS: sizes
# from 4 KiB), rank 1 killed once rank 0 printed its first row; sets
# killed (1 when it was still running then), dt (seconds from the kill
# to the others' exit, or a large number), rcs[]
kill_run() {
	local prog=$1 name=$2 addr=$3 port=$4 r i t0 left
	local -a ps=()

	shift 4
	rm -f "$TMP"/last.*
	pids=()
	for ((r = 0; r < N; r++)); do
		"$prog" --root "$addr:$port" --rank $r --size $N "$@" \
			>"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" </dev/null &
		ps+=($!)
		pids+=($!)
		ln -sf "$TMP/$name.$r.out" "$TMP/last.$r.out"
		ln -sf "$TMP/$name.$r.err" "$TMP/last.$r.err"
	done
	# rank 0's first row (4 KiB): the ring is running
	for ((i = 0; i < 1200; i++)); do
		grep -q '^ *4096 ' "$TMP/$name.0.out" && break
		kill -0 "${ps[0]}" 2>/dev/null || break
		sleep 0.05
	done
	killed=0
	# (its last line: "# krdma-...: every ... verified")
	kill -0 "${ps[1]}" 2>/dev/null && grep -q '^ *4096 ' "$TMP/$name.0.out" &&
		! grep -q '^# krdma-[a-z]*: every ' "$TMP/$name.0.out" && killed=1
	kill -9 "${ps[1]}" 2>/dev/null
	t0=$(date +%s%N)
	survivors_exit "$t0" "${ps[0]}" "${ps[2]}"
	rcs=()
	for ((r = 0; r < N; r++)); do
		{ wait "${ps[r]}"; } 2>/dev/null
		rcs+=($?)
	done
	pids=()
}

# survivors_exit T0 PID...: wait for the PIDs to exit, up to KILL_BOUND
# seconds; dt: seconds from T0 (date +%s%N) to the last exit, or 999;
# those still there are killed
survivors_exit() {
	local t0=$1 i p left

	shift
	for ((i = 0; i < KILL_BOUND * 20; i++)); do
		left=0
		for p in "$@"; do
			kill -0 "$p" 2>/dev/null && left=1
		done
		((left)) || break
		sleep 0.05
	done
	dt=$((($(date +%s%N) - t0) / 1000000000))
	((left)) && dt=999
	for p in "$@"; do
		kill -9 "$p" 2>/dev/null
	done
}

# nothing_pinned COMM: the pins back to $pins0 or below, as before the
# first run (pages are unpinned from a work item: wait up to 10 s;
# something else of the guest may have released a few meanwhile, one
# rank's buffers are hundreds of pages), and no buffer of COMM in debugfs
nothing_pinned() {
	local comm=$1 end=$((SECONDS + 10)) p

	while p=$(pins) && ((p > pins0)) && ((SECONDS < end)); do
		sleep 0.1
	done
	if ((p > pins0)); then
		echo "pins: $p, were $pins0" >"$TMP/last.pins"
		return 1
	fi
	if grep -q "comm=$comm" "$DBG/buffers" 2>/dev/null; then
		grep "comm=$comm" "$DBG/buffers" >"$TMP/last.pins"
		return 1
	fi
	[[ -r $DBG/buffers ]]
}

# load NAME ADDR PORT SAMPLE CLIENT_ARGS...: a krdma-load server at
# ADDR:PORT (--clients 2, -j) of $DS in samples of SAMPLE, and 2 clients
# at once (N = 3 processes); outputs in $TMP/NAME.{srv,c1,c2}.{out,err};
# statuses in rcs[] (server, client 1, client 2)
load() {
	local name=$1 addr=$2 port=$3 sample=$4 c
	local -a ps=()

	shift 4
	rm -f "$TMP"/last.*
	timeout -k 5 180 "$LD" --serve "$DS" -s "$sample" --listen "$addr:$port" \
		--clients 2 -t 60 -j "${LMODE[@]}" >"$TMP/$name.srv.out" 2>"$TMP/$name.srv.err" </dev/null &
	ps+=($!)
	for c in 1 2; do
		timeout -k 5 180 "$LD" --server "$addr:$port" -t 60 --seed $c -j "${LMODE[@]}" "$@" \
			>"$TMP/$name.c$c.out" 2>"$TMP/$name.c$c.err" </dev/null &
		ps+=($!)
	done
	rcs=()
	for c in 0 1 2; do
		wait "${ps[c]}"
		rcs+=($?)
	done
	for c in srv c1 c2; do
		ln -sf "$TMP/$name.$c.out" "$TMP/last.$c.out"
		ln -sf "$TMP/$name.$c.err" "$TMP/last.$c.err"
	done
}

# kill_load NAME ADDR PORT: a server (64 KiB samples) and 2 clients, the
# server killed once it serves both; killed, dt, rcs[] (as kill_run)
kill_load() {
	local name=$1 addr=$2 port=$3 c i t0
	local -a ps=()

	rm -f "$TMP"/last.*
	pids=()
	"$LD" --serve "$DS" -s 64K --listen "$addr:$port" -t 60 \
		>"$TMP/$name.srv.out" 2>"$TMP/$name.srv.err" </dev/null &
	ps+=($!)
	for c in 1 2; do
		"$LD" --server "$addr:$port" -t 60 -b 16 -d 300 \
			>"$TMP/$name.c$c.out" 2>"$TMP/$name.c$c.err" </dev/null &
		ps+=($!)
	done
	pids=("${ps[@]}")
	for c in srv c1 c2; do
		ln -sf "$TMP/$name.$c.out" "$TMP/last.$c.out"
		ln -sf "$TMP/$name.$c.err" "$TMP/last.$c.err"
	done
	# both clients are being served ("client N (...): serving by RDMA READ")
	for ((i = 0; i < 1200; i++)); do
		(($(grep -c ': serving by' "$TMP/$name.srv.out") == 2)) && break
		kill -0 "${ps[0]}" 2>/dev/null || break
		sleep 0.05
	done
	sleep 1		# the READs are running
	killed=0
	kill -0 "${ps[0]}" 2>/dev/null && kill -0 "${ps[1]}" 2>/dev/null &&
		kill -0 "${ps[2]}" 2>/dev/null &&
		(($(grep -c ': serving by' "$TMP/$name.srv.out") == 2)) && killed=1
	kill -9 "${ps[0]}" 2>/dev/null
	t0=$(date +%s%N)
	survivors_exit "$t0" "${ps[1]}" "${ps[2]}"
	rcs=()
	for c in 0 1 2; do
		{ wait "${ps[c]}"; } 2>/dev/null
		rcs+=($?)
	done
	pids=()
}

# the clients' JSON: every sample of SIZE bytes verified
load_ok() {
	local f

	for f in "$TMP/$1".c1.out "$TMP/$1".c2.out; do
		json "$f" "d[\"verified\"] is True and d[\"wrong\"] == 0 and
			d[\"sample_bytes\"] == $2 and d[\"samples\"] == d[\"batches\"] * d[\"batch\"] > 0 and
			d[\"bytes\"] == d[\"samples\"] * $2 and d[\"samples_per_s\"] > 0 and
			d[\"info\"].split()[0] == \"$3\"" || return 1
	done
	json "$TMP/$1.srv.out" "d[\"clients\"] == 2 and d[\"failed\"] == 0"
}

# sh_rate NAME: the shuffle's aggregate bandwidth per size, as "#" lines
sh_rate() {
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("%s: shuffle, %8d-byte partitions: %.4f GB/s aggregate, %d wrong"
          % (sys.argv[2], r["part_bytes"], r["aggbw_gbs"], r["wrong"]))
' "$TMP/$1.0.out" "$1" 2>/dev/null
}

# rate NAME: client 1's samples/s and MB/s, as a diagnostic
rate() {
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%.0f samples/s %.1f MB/s" % (d["samples_per_s"], d["bytes_per_s"] / 1e6))
' "$TMP/$1.c1.out" 2>/dev/null || echo "?"
}

# kill_checks WHAT WHO NAMED V S1 S2 COMM ERR1 ERR2: the checks of a kill
# case: WHO (rcs[V]) was killed mid-run; the survivors (rcs[S1], rcs[S2])
# exit 1 within the bound, both saying "aborted: NAMED" (in ERR1, ERR2);
# nothing of COMM left pinned
# shellcheck disable=SC2034 # named, err1, err2: in check()'s eval
kill_checks() {
	local what=$1 who=$2 named=$3 v=$4 s1=$5 s2=$6 comm=$7 err1=$8 err2=$9

	check "$what: $who killed mid-run" test "$killed" -eq 1 -a "${rcs[v]}" -eq 137
	check "$what: the others exit 1 within $KILL_BOUND s of the kill (took ${dt} s)" \
		eval "((dt <= KILL_BOUND && rcs[$s1] == 1 && rcs[$s2] == 1))"
	check "$what: the others name $who as gone" \
		eval 'grep -q "aborted: $named" "$err1" && grep -q "aborted: $named" "$err2"'
	check "$what: nothing left pinned: pins back, no $comm buffer in debugfs" \
		nothing_pinned "$comm"
	cat "$err1" "$err2" | diag
}

echo "TAP version 13"
echo "1..$NTESTS"

if [[ ! -x $AR || ! -x $SH || ! -x $LD ]]; then
	for ((i = 0; i < NTESTS; i++)); do
		n=$((n + 1))
		echo "not ok $n examples/krdma-allreduce, krdma-shuffle and krdma-load are built"
	done
	exit 1
fi
[[ -n ${KRDMA_DEBUGFS:-} ]] || mountpoint -q /sys/kernel/debug ||
	mount -t debugfs none /sys/kernel/debug
# krdma-load's dataset: 32 MiB in tmpfs, served from its page cache
DS=$TMP/dataset
"$LD" --make-dataset "$DS" 32M >/dev/null
# before any rank ran: every run ends with all of its pages unpinned
pins0=$(pins)

port=29500
declare -A bw
for t in rxe siw; do
	# (for examples/fake_krdma_peers.so: its processes' transport)
	export KRDMA_FAKE_TRANSPORT=$t
	if [[ $t == rxe ]]; then
		addr=$RXE_ADDR dev=$RXE_DEV notify=WRITE_IMM
	else
		addr=$SIW_ADDR dev=$SIW_DEV notify=WRITE+SEND
	fi

	port=$((port + 1))
	allreduce "$t" "$addr" $port "${ARGS[@]}" -j
	check "$t: 3 ranks, 64 KiB and 4 MiB, float and int32: every rank exits 0" all_zero
	check "$t: every row verified by every rank, busbw = algbw * 4/3" \
		json "$TMP/$t.0.out" "$AR_ROWS_OK"
	check "$t: every rank on $dev notified with $notify" \
		json "$TMP/$t.0.out" "[p[\"info\"].split() for p in d[\"peers\"]] == [[\"$dev\", p[\"info\"].split()[1], \"$notify\"] for p in d[\"peers\"]]"
	bw[$t]=$(algbw "$t")
	cat "$TMP/$t.rows"

	port=$((port + 1))
	# (2>/dev/null: bash's own "Killed" notice)
	kill_run "$AR" "$t-kill" "$addr" $port -b 4K -e 4M -f 4 -n 200 -w 0 -t 60 2>/dev/null
	# (rank 1 killed after rank 0's first row, before its end)
	kill_checks "$t" "rank 1" "rank 1 is gone" 1 0 2 krdma-allreduce \
		"$TMP/$t-kill.0.err" "$TMP/$t-kill.2.err"

	# krdma-shuffle: mappers 0 and 1 (ranks 1 and 2) into reducer 0
	port=$((port + 1))
	ranks "$SH" "sh-$t" "$addr" $port "${SH_ARGS[@]}" -j
	check "$t: shuffle, 2 mappers into 1 reducer, 64 KiB and 4 MiB: every rank exits 0" all_zero
	check "$t: shuffle: every byte of both sizes verified" json "$TMP/sh-$t.0.out" "$SH_OK"
	check "$t: shuffle: the mappers on $dev notified with $notify" \
		json "$TMP/sh-$t.0.out" "[p[\"info\"].split() for p in d[\"peers\"]] == [[\"$dev\", d[\"peers\"][0][\"info\"].split()[1]]] + 2 * [[\"$dev\", d[\"peers\"][0][\"info\"].split()[1], \"$notify\"]]"
	sh_rate "sh-$t" | diag

	port=$((port + 1))
	kill_run "$SH" "sh-$t-kill" "$addr" $port -R 1 -b 4K -e 4M -f 4 -n 300 -w 0 -t 60 2>/dev/null
	kill_checks "$t: shuffle" "mapper 0 (rank 1)" "rank 1 (mapper 0) is gone" 1 0 2 \
		krdma-shuffle "$TMP/sh-$t-kill.0.err" "$TMP/sh-$t-kill.2.err"

	# krdma-load: a server and 2 clients
	port=$((port + 1))
	load "ld-$t-64k" "$addr" $port 64K -b 16 -n 40
	check "$t: load, 64 KiB samples, a server and 2 clients at once: all exit 0" all_zero
	check "$t: load, 64 KiB samples: every sample verified, both clients on $dev" \
		load_ok "ld-$t-64k" 65536 "$dev"
	echo "# $t: load, 64 KiB samples, client 1: $(rate "ld-$t-64k")"
	port=$((port + 1))
	load "ld-$t-4m" "$addr" $port 4M -b 2 -n 8
	check "$t: load, 4 MiB samples, a server and 2 clients at once: all exit 0" all_zero
	check "$t: load, 4 MiB samples: every sample verified, both clients on $dev" \
		load_ok "ld-$t-4m" 4194304 "$dev"
	echo "# $t: load, 4 MiB samples, client 1: $(rate "ld-$t-4m")"

	port=$((port + 1))
	kill_load "ld-$t-kill" "$addr" $port 2>/dev/null
	# (the server killed while it served both clients)
	kill_checks "$t: load" "the server" "the server at $addr:$port is gone" 0 1 2 \
		krdma-load "$TMP/ld-$t-kill.c1.err" "$TMP/ld-$t-kill.c2.err"
done

unset KRDMA_FAKE_TRANSPORT
port=$((port + 1))
allreduce tcp "$RXE_ADDR" $port "${ARGS[@]}" -m tcp -j
check "tcp: 3 ranks, 64 KiB and 4 MiB, float and int32: every rank exits 0" all_zero
check "tcp: every row verified by every rank, busbw = algbw * 4/3" \
	json "$TMP/tcp.0.out" "$AR_ROWS_OK"
bw[tcp]=$(algbw tcp)
cat "$TMP/tcp.rows"
port=$((port + 1))
allreduce inject "$RXE_ADDR" $port -b 64K -n 1 -w 0 -m tcp -j --inject-error
check "a wrong element is caught: every rank exits 1, 3 wrong (one per rank), not verified" \
	eval '((rcs[0] == 1 && rcs[1] == 1 && rcs[2] == 1)) &&
	      json "$TMP/inject.0.out" "d[\"verified\"] is False and [r[\"wrong\"] for r in rows] == [3]"'
echo "# algbw at 4 MiB float, GB/s: rxe ${bw[rxe]:-?}, siw ${bw[siw]:-?}, tcp ${bw[tcp]:-?}"

port=$((port + 1))
ranks "$SH" sh-tcp "$RXE_ADDR" $port "${SH_ARGS[@]}" -m tcp -j
check "tcp: shuffle, 2 mappers into 1 reducer, 64 KiB and 4 MiB: every rank exits 0, every byte verified" \
	eval 'all_zero && json "$TMP/sh-tcp.0.out" "$SH_OK"'
sh_rate sh-tcp | diag
port=$((port + 1))
LMODE=(-m tcp)
load ld-tcp "$RXE_ADDR" $port 64K -b 16 -n 40
LMODE=()
check "tcp: load, 64 KiB samples, a server and 2 clients: all exit 0, every sample verified" \
	eval 'all_zero && load_ok ld-tcp 65536 pread'
echo "# tcp: load, 64 KiB samples, client 1: $(rate ld-tcp)"

((failed == 0))
