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
# Every rank runs under `timeout`, except the ones of the kill cases,
# which are waited for with a bound and killed at the end if still there.

# shellcheck disable=SC2317,SC2016 # functions run through check(), eval
set -u
cd "$(dirname "$0")/.." || exit 1

AR=$PWD/examples/krdma-allreduce
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
RXE_DEV=${KRDMA_RXE_DEV:-rxe0}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
SIW_DEV=${KRDMA_SIW_DEV:-siw0}
DBG=/sys/kernel/debug/krdma
N=3
# 64 KiB and 4 MiB, both types
ARGS=(-b 64K -e 4M -f 64 -d all -n 5 -w 1 -t 60)
# seconds from the kill to the exit of the others (the program gives
# itself 5 s to learn who died; TCG on a busy host is slow)
KILL_BOUND=30
# per transport: run 3 + kill 4; TCP 2, a wrong element 1
NTESTS=$((2 * (3 + 4) + 3))

# shellcheck source=examples/test_lib.sh
. examples/test_lib.sh
ex_test_init krdma_examples_test

# Pages pinned with FOLL_PIN and not released yet
pins() {
	awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	     $1 == "nr_foll_pin_released" { r = $2 }
	     END { print a - r }' /proc/vmstat
}

# allreduce NAME ADDR PORT ARGS...: N ranks with rank 0 at ADDR:PORT, all
# waited for; outputs in $TMP/NAME.<rank>.{out,err} (and $TMP/last.*);
# exit statuses in rcs[]
allreduce() {
	local name=$1 addr=$2 port=$3 r
	local -a ps=()

	shift 3
	rm -f "$TMP"/last.*
	for ((r = 0; r < N; r++)); do
		timeout -k 5 180 "$AR" --root "$addr:$port" --rank $r --size $N "$@" \
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

ROWS_OK='d["verified"] is True and d["ranks"] == 3 and len(rows) == 4 and
	sorted((r["size"], r["count"], r["type"]) for r in rows) ==
	[(65536, 16384, "float"), (65536, 16384, "int32"),
	 (4194304, 1048576, "float"), (4194304, 1048576, "int32")] and
	all(r["verified"] is True and r["wrong"] == 0 and r["time_us"] > 0 and
	    abs(r["busbw_gbs"] - r["algbw_gbs"] * 4 / 3) <= 2e-6 + 1e-4 * r["busbw_gbs"]
	    for r in rows)'

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

# kill_run NAME ADDR PORT: N ranks, rank 1 killed once rank 0 printed its
# first row; sets killed (1 when it was still running then), dt (seconds
# from the kill to the others' exit, or a large number), rcs[]
kill_run() {
	local name=$1 addr=$2 port=$3 r i t0 left
	local -a ps=()

	rm -f "$TMP"/last.*
	pids=()
	for ((r = 0; r < N; r++)); do
		"$AR" --root "$addr:$port" --rank $r --size $N -b 4K -e 4M -f 4 \
			-n 200 -w 0 -t 60 >"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" </dev/null &
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
	kill -0 "${ps[1]}" 2>/dev/null && grep -q '^ *4096 ' "$TMP/$name.0.out" &&
		! grep -q 'every element' "$TMP/$name.0.out" && killed=1
	kill -9 "${ps[1]}" 2>/dev/null
	t0=$(date +%s%N)
	# the others: exited within the bound?
	for ((i = 0; i < KILL_BOUND * 20; i++)); do
		left=0
		for r in 0 2; do
			kill -0 "${ps[r]}" 2>/dev/null && left=1
		done
		((left)) || break
		sleep 0.05
	done
	dt=$((($(date +%s%N) - t0) / 1000000000))
	((left)) && dt=999
	for r in 0 2; do
		kill -9 "${ps[r]}" 2>/dev/null
	done
	rcs=()
	for ((r = 0; r < N; r++)); do
		{ wait "${ps[r]}"; } 2>/dev/null
		rcs+=($?)
	done
	pids=()
}

# the pins back to $pins0 or below, as before the first run (pages are
# unpinned from a work item: wait up to 10 s; something else of the
# guest may have released a few meanwhile, one rank's buffers are
# hundreds of pages), and no buffer of krdma-allreduce in debugfs
nothing_pinned() {
	local end=$((SECONDS + 10)) p

	while p=$(pins) && ((p > pins0)) && ((SECONDS < end)); do
		sleep 0.1
	done
	if ((p > pins0)); then
		echo "pins: $p, were $pins0" >"$TMP/last.pins"
		return 1
	fi
	if grep -q 'comm=krdma-allreduce' "$DBG/buffers" 2>/dev/null; then
		grep 'comm=krdma-allreduce' "$DBG/buffers" >"$TMP/last.pins"
		return 1
	fi
	[[ -r $DBG/buffers ]]
}

echo "TAP version 13"
echo "1..$NTESTS"

if [[ ! -x $AR ]]; then
	for ((i = 0; i < NTESTS; i++)); do
		n=$((n + 1))
		echo "not ok $n examples/krdma-allreduce is built"
	done
	exit 1
fi
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# before any rank ran: every run ends with all of its pages unpinned
pins0=$(pins)

port=29500
declare -A bw
for t in rxe siw; do
	if [[ $t == rxe ]]; then
		addr=$RXE_ADDR dev=$RXE_DEV notify=WRITE_IMM
	else
		addr=$SIW_ADDR dev=$SIW_DEV notify=WRITE+SEND
	fi

	port=$((port + 1))
	allreduce "$t" "$addr" $port "${ARGS[@]}" -j
	check "$t: 3 ranks, 64 KiB and 4 MiB, float and int32: every rank exits 0" all_zero
	check "$t: every row verified by every rank, busbw = algbw * 4/3" \
		json "$TMP/$t.0.out" "$ROWS_OK"
	check "$t: every rank on $dev notified with $notify" \
		json "$TMP/$t.0.out" "[p[\"info\"].split() for p in d[\"peers\"]] == [[\"$dev\", p[\"info\"].split()[1], \"$notify\"] for p in d[\"peers\"]]"
	bw[$t]=$(algbw "$t")
	cat "$TMP/$t.rows"

	port=$((port + 1))
	# (2>/dev/null: bash's own "Killed" notice)
	kill_run "$t-kill" "$addr" $port 2>/dev/null
	check "$t: rank 1 killed mid-run (after rank 0's first row, before its end)" \
		test "$killed" -eq 1 -a "${rcs[1]}" -eq 137
	check "$t: ranks 0 and 2 exit 1 within $KILL_BOUND s of the kill (took ${dt} s)" \
		eval '((dt <= KILL_BOUND && rcs[0] == 1 && rcs[2] == 1))'
	check "$t: ranks 0 and 2 name rank 1 as gone" \
		eval 'grep -q "aborted: rank 1 is gone" "$TMP/$t-kill.0.err" &&
		      grep -q "aborted: rank 1 is gone" "$TMP/$t-kill.2.err"'
	check "$t: nothing left pinned: pins back, no krdma-allreduce buffer in debugfs" \
		nothing_pinned
	cat "$TMP/$t-kill.0.err" "$TMP/$t-kill.2.err" | diag
done

port=$((port + 1))
allreduce tcp "$RXE_ADDR" $port "${ARGS[@]}" -m tcp -j
check "tcp: 3 ranks, 64 KiB and 4 MiB, float and int32: every rank exits 0" all_zero
check "tcp: every row verified by every rank, busbw = algbw * 4/3" \
	json "$TMP/tcp.0.out" "$ROWS_OK"
bw[tcp]=$(algbw tcp)
cat "$TMP/tcp.rows"
port=$((port + 1))
allreduce inject "$RXE_ADDR" $port -b 64K -n 1 -w 0 -m tcp -j --inject-error
check "a wrong element is caught: every rank exits 1, 3 wrong (one per rank), not verified" \
	eval '((rcs[0] == 1 && rcs[1] == 1 && rcs[2] == 1)) &&
	      json "$TMP/inject.0.out" "d[\"verified\"] is False and [r[\"wrong\"] for r in rows] == [3]"'
echo "# algbw at 4 MiB float, GB/s: rxe ${bw[rxe]:-?}, siw ${bw[siw]:-?}, tcp ${bw[tcp]:-?}"

((failed == 0))
