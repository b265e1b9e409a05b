#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma selftests: the kernel-API benchmark (selftests/krdma_kbench, and
# scripts/bench-kapi.sh, make bench's kernel-API rows), in the guest test
# bed (rxe0 and siw0 up, krdma.ko loaded). Prints TAP.
#
# Only that it works and says so well: tiny runs (40 operations, depth 8,
# batches of 4) of WRITE at 64 B and 4 KiB, READ and SEND at 4 KiB, on
# rxe and on siw, and a WRITE by krdma_post() alone; each row's JSON
# checked (every field there, numbers consistent: bytes = size x iters,
# the calls of the posting thread, median <= p99 <= max) and its bytes
# verified by the module; a bad command refused; and bench-kapi.sh at two
# sizes on rxe0, its kapi-rxe0.json well-formed. Timings are never
# asserted. Every command runs under `timeout`.

# shellcheck disable=SC2317 # functions run through check()
set -u
cd "$(dirname "$0")/.." || exit 1

KO=$PWD/selftests/krdma_kbench/krdma_kbench.ko
DBG=${KRDMA_KBENCH_DEBUGFS:-/sys/kernel/debug/krdma_kbench} # (another: tests of the tests)
PYTHON=${PYTHON:-python3}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
COMMON="iters=40 depth=8 batch=4 timeout=60"

TMP=$(mktemp -d /tmp/krdma_kbench_test.XXXXXX) || exit 1
cleanup() {
	rmmod krdma_kbench 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. selftests/lib.sh

# run CMD: one run, its row in $TMP/out, the write's error in $TMP/err
run() {
	# shellcheck disable=SC2016 # bash -c's positional parameters
	timeout 120 bash -c 'echo "$1" >"$2"' bash "$1" "$DBG/run" 2>"$TMP/err"
	local rc=$?
	cat "$DBG/result" >"$TMP/out" 2>>"$TMP/err"
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
want = {"op": op, "size": size, "iters": 40, "depth": 8, "batch": batch,
        "transport": transport, "device": label, "ok": True,
        "verified": True, "error": 0, "stage": None, "wc_status": 0,
        "bad_offset": -1, "unsignaled": unsig == "true"}
for k, v in want.items():
    assert r[k] == v, (k, r[k], v)
assert r["bytes"] == size * 40, r
assert r["src_mem"] in ("kmalloc", "vmalloc"), r
assert r["sq_depth"] >= 8, r
for k in ("seconds", "mb_per_s", "mmsg_per_s"):
    assert isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0, (k, r)
# MB/s = bytes / seconds, messages/s = iters / seconds (both rounded)
assert abs(r["mb_per_s"] - size * 40 / r["seconds"] / 1e6) <= 0.01 * r["mb_per_s"] + 0.01, r
assert abs(r["mmsg_per_s"] - r["mb_per_s"] / size) <= 0.01 * r["mmsg_per_s"] + 2e-6, r
p = r["post_ns"]
assert p["calls"] == -(-40 // batch), p
assert 0 < p["median"] <= p["p99"] <= p["max"], p
assert p["total"] >= p["max"] and abs(p["avg"] * p["calls"] - p["total"]) < p["calls"], p
assert isinstance(r["wait_ns"], int) and r["wait_ns"] >= 0, r
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
	! run "addr=$RXE_ADDR op=nope" &&
		grep -q 'Invalid argument' "$TMP/err" &&
		"$PYTHON" -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is False and r["error"] == -22 and r["stage"] == "parse", r
' "$TMP/out" 2>>"$TMP/err"
}

send_too_big() {
	! run "addr=$SIW_ADDR op=send size=64K $COMMON" &&
		grep -q 'Message too long' "$TMP/err" &&
		grep -q '"stage":"limits"' "$TMP/out"
}

script_ok() {
	BENCH_DEVS="rxe0:$RXE_ADDR" BENCH_SIZES=64,4K BENCH_ITERS=40 \
		BENCH_MIN_ITERS=8 BENCH_BYTES=64K BENCH_DEPTH=8 BENCH_BATCH=4 \
		BENCH_KAPI_OPS=write BENCH_KAPI_TIMEOUT=60 \
		timeout 180 scripts/bench-kapi.sh "$TMP/bench" >"$TMP/out" 2>"$TMP/err" &&
		"$PYTHON" - "$TMP/bench/kapi-rxe0.json" <<'EOF' 2>>"$TMP/err"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "rxe0" and d["depth"] == 8 and d["batch"] == 4, d
rows = d["rows"]
assert [(r["op"], r["size"], r["iters"]) for r in rows] == [("write", 64, 40), ("write", 4096, 16)], rows
for r in rows:
    k = r["kapi"]
    assert k["ok"] is True and k["verified"] is True and k["device"] == "rxe0", k
    assert r["skipped"] is None and r["kapi_cpu_s_per_gb"] >= 0, r
    # perftest's numbers, when it ran, and the ratio with them
    p = r["perftest"]
    assert p is None or (p["mb_per_s"] > 0 and p["mmsg_per_s"] > 0), p
    assert (r["ratio"] is None) == (p is None), r
EOF
}

echo "TAP version 13"
echo "1..14"
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
check "bench-kapi.sh on rxe0 at 64 B and 4 KiB: kapi-rxe0.json well-formed" \
	script_ok
check "kbench module unloads" rmmod krdma_kbench
echo "# $n tests, $failed failed"
((failed == 0))
