#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma selftests: the kernel-API benchmark (selftests/krdma_kbench, and
# scripts/bench-kapi.sh, make bench's kernel-API rows), in the guest test
# bed (rxe0 and siw0 up, krdma.ko loaded). Prints TAP.
#
# That it works and says so well: tiny runs (40 operations, depth 8,
# batches of 4) of WRITE at 64 B and 4 KiB, READ and SEND at 4 KiB, on
# rxe and on siw, and a WRITE by krdma_post() alone; each row's JSON
# checked (every field there, numbers consistent: bytes = size x iters,
# the calls of the posting thread, median <= p99 <= max) and the final
# operation's bytes verified by the module; and bench-kapi.sh at two
# sizes on rxe0, its kapi-rxe0.json well-formed. And what must not go
# wrong: bad commands (a bad op, an unknown key, size=0, iters=0, ...)
# are EINVAL; commands that would allocate too much (op=send size=64M
# depth=64, op=send size=1M depth=4096, op=send size=64K depth=4096) are
# refused before anything is allocated, with no WARNING in the kernel
# log; a run killed by SIGKILL mid-way ends within a bound and the next
# run works; rmmod during a run fails ("in use") and works after it; a
# run with timeout=1 ends with ETIMEDOUT in bounded time and the next run
# works; the result file reads at once during a run, empty then (no stale
# row). Each row read must be its own command's (the file is emptied
# before, and a failing command's row carries a label of its own).
# With krdma's push_worker=2 (every krdma_post_list() left to krdma's
# push work) the WRITE, READ and SEND rows again on rxe and siw, bytes
# verified, and a run killed mid-way (the work may still be queued when
# the connection is torn down).
# Timings are never asserted. Every command runs under `timeout -k`, but
# the background runs, which the module bounds (timeout=) and the test
# waits for with a bound.

# shellcheck disable=SC2317 # functions run through check()
set -u
cd "$(dirname "$0")/.." || exit 1

KO=$PWD/selftests/krdma_kbench/krdma_kbench.ko
DBG=${KRDMA_KBENCH_DEBUGFS:-/sys/kernel/debug/krdma_kbench} # (another: tests of the tests)
PYTHON=${PYTHON:-python3}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
COMMON="iters=40 depth=8 batch=4 timeout=60"
# A run far longer than any test waits for (16 GiB), bounded by timeout=
LONG="op=write size=4K iters=4194304 depth=8 batch=4"

PW=/sys/module/krdma/parameters/push_worker
PW_WAS=$(cat "$PW" 2>/dev/null)

TMP=$(mktemp -d /tmp/krdma_kbench_test.XXXXXX) || exit 1
BG=
cleanup() {
	if [[ -n $BG ]]; then
		kill -9 "$BG" 2>/dev/null
		wait "$BG" 2>/dev/null
	fi
	rmmod krdma_kbench 2>/dev/null
	[[ -n $PW_WAS ]] && echo "$PW_WAS" >"$PW"
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. selftests/lib.sh

# run CMD: one run, its row in $TMP/out, the write's error in $TMP/err
# (both emptied first: nothing of an earlier run is read as this one's)
run() {
	local rc

	: >"$TMP/out"
	: >"$TMP/err"
	# shellcheck disable=SC2016 # bash -c's positional parameters
	timeout -k 10 120 bash -c 'echo "$1" >"$2"' bash "$1" "$DBG/run" 2>"$TMP/err"
	rc=$?
	timeout -k 5 10 cat "$DBG/result" >"$TMP/out" 2>>"$TMP/err"
	return $rc
}

# row_ok OP SIZE BATCH TRANSPORT LABEL UNSIGNALED: $TMP/out is that row,
# ok, verified, consistent
row_ok() {
	"$PYTHON" - "$TMP/out" "$@" <<'EOF' 2>>"$TMP/err"
import json, math, sys
f, op, size, batch, transport, label, unsig = sys.argv[1:8]
lines = open(f).read().splitlines()
assert len(lines) == 1, lines
r = json.loads(lines[0])
size, batch = int(size), int(batch)
want = {"op": op, "size": size, "iters": 40, "depth": 8, "depth_asked": 8,
        "batch": batch, "transport": transport, "device": label, "ok": True,
        "verified": True, "verified_scope": "last_op", "error": 0,
        "stage": None, "wc_status": 0, "byte_len": 0, "accepted": None,
        "bad_offset": -1, "unsignaled": unsig == "true"}
for k, v in want.items():
    assert r[k] == v, (k, r[k], v)
assert r["bytes"] == size * 40, r
assert r["src_mem"] in ("kmalloc", "vmalloc"), r
assert 16 <= r["sq_depth"] <= 4096, r
for k in ("seconds", "mb_per_s", "mmsg_per_s"):
    assert isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0, (k, r)
# MB/s = bytes / seconds, messages/s = iters / seconds (both rounded)
assert abs(r["mb_per_s"] - size * 40 / r["seconds"] / 1e6) <= 0.01 * r["mb_per_s"] + 0.01, r
assert abs(r["mmsg_per_s"] - r["mb_per_s"] / size) <= 0.01 * r["mmsg_per_s"] + 2e-6, r
p = r["post_ns"]
assert p["calls"] == -(-40 // batch) and p["samples"] == p["calls"], p
assert 0 < p["median"] <= p["p99"] <= p["max"], p
assert p["total"] >= p["max"] and abs(p["avg"] * p["calls"] - p["total"]) < p["calls"], p
assert isinstance(r["wait_ns"], int) and r["wait_ns"] >= 0, r
EOF
}

# row_is LABEL ERRNO STAGE...: $TMP/out is one row, of the command
# labelled LABEL, that failed with -ERRNO at one of the STAGEs
row_is() {
	"$PYTHON" - "$TMP/out" "$@" <<'EOF' 2>>"$TMP/err"
import json, sys
f, label, err = sys.argv[1:4]
stages = sys.argv[4:]
lines = open(f).read().splitlines()
assert len(lines) == 1, lines
r = json.loads(lines[0])
assert r["device"] == label, ("not this command's row", label, r)
assert r["ok"] is False and r["verified"] is False, r
assert r["error"] == -int(err) and r["stage"] in stages, (err, stages, r)
EOF
}

# row OP SIZE ADDR LABEL TRANSPORT [BATCH [UNSIGNALED]]
row() {
	local op=$1 size=$2 addr=$3 label=$4 transport=$5 batch=${6:-4}
	local unsig=${7:-true}

	((batch == 1)) && unsig=false
	run "addr=$addr label=$label op=$op size=$size $COMMON batch=$batch" &&
		row_ok "$op" "$size" "$batch" "$transport" "$label" "$unsig"
}

bad_refused() {
	! run "addr=$RXE_ADDR label=badop op=nope" &&
		grep -q 'Invalid argument' "$TMP/err" &&
		row_is badop 22 parse
}

# Each EINVAL at parse, with a row of its own (the label comes first: a
# bad key stops the parsing)
bad_commands() {
	local c label

	for c in "bad1 nosuchkey=1" "bad2 size=0" "bad3 iters=0" "bad4 batch=9" \
		"bad5 size=1Q" "bad6 size=99999999999999999999G"; do
		read -r label c <<<"$c"
		if run "addr=$RXE_ADDR label=$label $COMMON $c" ||
			! grep -q 'Invalid argument' "$TMP/err" ||
			! row_is "$label" 22 parse; then
			echo "command: $c" >>"$TMP/err"
			return 1
		fi
	done
}

send_too_big() {
	! run "addr=$SIW_ADDR label=siwbig op=send size=64K $COMMON" &&
		grep -q 'Message too long' "$TMP/err" &&
		row_is siwbig 90 limits
}

# Commands that would allocate too much (more than INT_MAX bytes, where
# kvzalloc() WARNs, or more than the module's 256 MiB) are refused at
# "limits" before anything is connected or allocated, and the kernel log
# has no WARNING (nor a call trace) after a mark of ours
too_big_refused() {
	local mark="krdma_kbench_test: too_big_refused $$.$RANDOM" label errno c

	echo "$mark" >/dev/kmsg || return 1
	for c in "big1 90 op=send size=64M depth=64" \
		"big2 90 op=send size=1M depth=4096" \
		"big3 7 op=send size=64K depth=4096"; do
		read -r label errno c <<<"$c"
		if run "addr=$RXE_ADDR label=$label iters=40 $c" ||
			! row_is "$label" "$errno" limits ||
			! "$PYTHON" -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["src_mem"] is None and r["transport"] is None, r
' "$TMP/out" 2>>"$TMP/err"; then
			echo "command: $c" >>"$TMP/err"
			return 1
		fi
	done
	dmesg | sed -n "\\|$mark|,\$p" >"$TMP/dmesg"
	if ! grep -q "$mark" "$TMP/dmesg"; then
		echo "our mark is not in the kernel log" >>"$TMP/err"
		return 1
	fi
	if grep -E 'WARNING|Call Trace' "$TMP/dmesg" >>"$TMP/err"; then
		echo "a WARNING in the kernel log (above)" >>"$TMP/err"
		return 1
	fi
}

# bg_start CMD: one run in the background, the writer's pid in $BG
bg_start() {
	: >"$TMP/out"
	: >"$TMP/err"
	# shellcheck disable=SC2016 # bash -c's positional parameters
	bash -c 'echo "$1" >"$2"' bash "$1" "$DBG/run" 2>>"$TMP/err" &
	BG=$!
}

# gone PID: the process has exited (a zombie counts: it is our child)
gone() {
	local st

	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 0
	[[ -z $st || $st == Z ]]
}

# bg_wait SECONDS: the background writer exits within SECONDS; its exit
# status in $bg_rc, the result in $TMP/out
bg_wait() {
	local i

	for ((i = 0; i < $1 * 10; i++)); do
		gone "$BG" && break
		sleep 0.1
	done
	if ! gone "$BG"; then
		echo "the writer ($BG) is still there after $1 s" >>"$TMP/err"
		return 1
	fi
	wait "$BG"
	bg_rc=$?
	BG=
	timeout -k 5 10 cat "$DBG/result" >"$TMP/out" 2>>"$TMP/err"
}

# bg_stop: after a failure, the background writer killed and reaped
bg_stop() {
	[[ -n $BG ]] || return 0
	kill -9 "$BG" 2>/dev/null
	bg_wait 60
}

# running: within 20 s the background writer is inside its run: the
# result file reads at once (in under 3 s) and is empty, as during a run
running() {
	local i

	for ((i = 0; i < 200; i++)); do
		if gone "$BG"; then
			echo "the run ended before it was seen running" >>"$TMP/err"
			return 1
		fi
		if ! timeout -k 2 3 cat "$DBG/result" >"$TMP/mid" 2>>"$TMP/err"; then
			echo "reading result during a run did not return at once" >>"$TMP/err"
			return 1
		fi
		[[ -s $TMP/mid ]] || return 0
		sleep 0.1
	done
	echo "the result was never empty: no run seen in progress" >>"$TMP/err"
	return 1
}

# A long run killed by SIGKILL mid-way: the writer exits within 15 s (its
# waits are killable, then the teardown), and its row says -EINTR
killed_run() {
	bg_start "addr=$RXE_ADDR label=killed $LONG timeout=60"
	running || {
		bg_stop
		return 1
	}
	sleep 1
	kill -9 "$BG"
	bg_wait 15 || return 1
	if ((bg_rc != 137)); then
		echo "writer status $bg_rc, not 137 (SIGKILL)" >>"$TMP/err"
		return 1
	fi
	row_is killed 4 connect accept memory register grant rkeys post
}

# rmmod while a run is in progress fails ("in use"); once the run is over
# (timeout=2: -ETIMEDOUT) it unloads, and loads again
busy_rmmod() {
	bg_start "addr=$RXE_ADDR label=busy $LONG timeout=2"
	running || {
		bg_stop
		return 1
	}
	if rmmod krdma_kbench 2>>"$TMP/err"; then
		echo "rmmod succeeded during a run" >>"$TMP/err"
		bg_wait 30
		insmod "$KO"
		return 1
	fi
	grep -q 'in use' "$TMP/err" || {
		bg_wait 30
		return 1
	}
	bg_wait 30 || return 1
	row_is busy 110 post || return 1
	rmmod krdma_kbench 2>>"$TMP/err" && insmod "$KO" 2>>"$TMP/err" &&
		test -f "$DBG/run"
}

# timeout=1 on a run that needs far longer (4 TiB): ETIMEDOUT within 30 s
# (the deadline holds even while completions keep room to post)
timed_out() {
	local t0 t

	t0=$(date +%s)
	! run "addr=$RXE_ADDR label=tmo op=write size=1M iters=4194304 depth=8 batch=4 timeout=1" ||
		return 1
	t=$(($(date +%s) - t0))
	if ((t > 30)); then
		echo "took $t s" >>"$TMP/err"
		return 1
	fi
	grep -q 'Connection timed out' "$TMP/err" && row_is tmo 110 post wait
}

# pw2 CMD...: CMD with krdma's push_worker=2, then the value it had
pw2() {
	local rc

	echo 2 >"$PW" 2>>"$TMP/err" || return 1
	"$@"
	rc=$?
	echo "$PW_WAS" >"$PW"
	return $rc
}

script_ok() {
	BENCH_DEVS="rxe0:$RXE_ADDR" BENCH_SIZES=64,4K BENCH_ITERS=40 \
		BENCH_MIN_ITERS=8 BENCH_BYTES=64K BENCH_DEPTH=8 BENCH_BATCH=4 \
		BENCH_KAPI_OPS=write BENCH_KAPI_TIMEOUT=60 \
		timeout -k 10 180 scripts/bench-kapi.sh "$TMP/bench" >"$TMP/out" 2>"$TMP/err" &&
		"$PYTHON" - "$TMP/bench/kapi-rxe0.json" "$RXE_ADDR" <<'EOF' 2>>"$TMP/err"
import json, sys
d = json.load(open(sys.argv[1]))
addr = sys.argv[2]
assert d["device"] == "rxe0" and d["addr"] == addr, d
assert d["depth"] == 8 and d["batch"] == 4, d
rows = d["rows"]
assert [(r["op"], r["size"], r["iters"]) for r in rows] == [("write", 64, 40), ("write", 4096, 16)], rows
for r in rows:
    k = r["kapi"]
    assert k["ok"] is True and k["verified"] is True, k
    assert k["device"] == "rxe0" and k["addr"] == addr, k
    assert (k["op"], k["size"], k["iters"]) == (r["op"], r["size"], r["iters"]), r
    assert r["skipped"] is None and r["kapi_cpu_s_per_gb"] >= 0, r
    # perftest's numbers, when it ran, and the ratio with them
    p = r["perftest"]
    assert p is None or (p["mb_per_s"] > 0 and p["mmsg_per_s"] > 0), p
    assert (r["ratio"] is None) == (p is None), r
EOF
}

echo "TAP version 13"
echo "1..28"
rmmod krdma_kbench 2>/dev/null
check "kbench module loads, its debugfs files there" \
	bash -c "insmod '$KO' && test -f $DBG/run && test -f $DBG/result"
for dv in "rxe0 $RXE_ADDR roce" "siw0 $SIW_ADDR iwarp"; do
	read -r label addr transport <<<"$dv"
	check "$label: WRITE 64 B, batches of 4 by krdma_post_list(): JSON row, bytes verified" \
		row write 64 "$addr" "$label" "$transport"
	check "$label: WRITE 4 KiB, batches of 4: JSON row, bytes verified" \
		row write 4096 "$addr" "$label" "$transport"
	# READ cannot be unsignaled on iWARP: the module signals each
	unsig=true
	[[ $transport == iwarp ]] && unsig=false
	check "$label: READ 4 KiB, batches of 4 (unsignaled: $unsig): JSON row, bytes verified" \
		row read 4096 "$addr" "$label" "$transport" 4 "$unsig"
	check "$label: SEND 4 KiB into RECVs, batches of 4: JSON row, bytes verified" \
		row send 4096 "$addr" "$label" "$transport"
done
check "rxe0: WRITE 4 KiB by krdma_post() alone (batch=1): JSON row, bytes verified" \
	row write 4096 "$RXE_ADDR" rxe0 roce 1
check "siw0: SEND of 64 KiB of kernel memory refused (16 pages, 6 SGEs): EMSGSIZE" \
	send_too_big
check "a bad command is refused (EINVAL), the result says so" bad_refused
check "bad commands (unknown key, size=0, iters=0, batch > depth, bad sizes): EINVAL, each its own row" \
	bad_commands
check "op=send size=64M depth=64, size=1M depth=4096 (EMSGSIZE), size=64K depth=4096 (E2BIG): refused before allocating, no WARNING" \
	too_big_refused
check "a run killed by SIGKILL mid-way: result reads at once meanwhile, the writer exits within 15 s, its row says EINTR" \
	killed_run
check "after the killed run, a WRITE of 4 KiB works, bytes verified" \
	row write 4096 "$RXE_ADDR" rxe0 roce
check "rmmod during a run fails (in use); the run ends (ETIMEDOUT), then the module unloads and loads again" \
	busy_rmmod
check "timeout=1 on a long run: ETIMEDOUT within 30 s" timed_out
check "after the timed-out run, a READ of 4 KiB works, bytes verified" \
	row read 4096 "$RXE_ADDR" rxe0 roce
for dv in "rxe0 $RXE_ADDR roce" "siw0 $SIW_ADDR iwarp"; do
	read -r label addr transport <<<"$dv"
	unsig=true
	[[ $transport == iwarp ]] && unsig=false
	check "$label, push_worker=2: WRITE 4 KiB, batches of 4 posted by the work: bytes verified" \
		pw2 row write 4096 "$addr" "$label" "$transport"
	check "$label, push_worker=2: READ 4 KiB, batches of 4 (unsignaled: $unsig): bytes verified" \
		pw2 row read 4096 "$addr" "$label" "$transport" 4 "$unsig"
	check "$label, push_worker=2: SEND 4 KiB into RECVs, batches of 4: bytes verified" \
		pw2 row send 4096 "$addr" "$label" "$transport"
done
check "push_worker=2: a run killed by SIGKILL mid-way ends within 15 s, its row says EINTR" \
	pw2 killed_run
check "bench-kapi.sh on rxe0 at 64 B and 4 KiB: kapi-rxe0.json well-formed" \
	script_ok
check "kbench module unloads" rmmod krdma_kbench
echo "# $n tests, $failed failed"
((failed == 0))
