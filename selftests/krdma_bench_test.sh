#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdmactl bench selftests, in the guest test bed (rxe0 and siw0 up,
# krdma.ko loaded; see selftests/qemu/guest-setup.sh). Prints TAP.
#
# Only that the bench runs and its output is well-formed: a tiny run
# (2 sizes, few iterations, every operation) on rxe and on siw, JSON
# checked with python3 (every row present, numbers finite and consistent:
# p99 >= median, bandwidth = size x message rate), and the text output.
# Also the connection-setup mode (-o conn): N connections, each counted
# by the server, JSON well-formed; the connection-scale mode (-o scale):
# N connections kept open together, JSON well-formed and consistent,
# none left in the module after. And scripts/bench.sh itself (make
# bench's guest step) at tiny sizes, REPEAT=2, on rxe0 alone (siw0's rows
# are the same code): its raw results complete, and its --report's json
# and rst well-formed, every median within its min-max (~20 s under
# TCG). Timings are never asserted. Every command runs under `timeout`.

# shellcheck disable=SC2317 # functions run through check()
set -u
cd "$(dirname "$0")/.." || exit 1

K=$PWD/userspace-tools/krdmactl
PYTHON=${PYTHON:-python3}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
PORT=18517
# shellcheck disable=SC2054 # a list of sizes, not of elements
ARGS=(-s 64,4K -n 40 -m 8 -B 64K -d 8 -b 4 -t 10000)

TMP=$(mktemp -d /tmp/krdma_bench_test.XXXXXX) || exit 1
server_pid=
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. selftests/lib.sh
# A failed check's diagnostics: the end of the client's and the server's
# output, each line named by its file
bench_diag() {
	local f

	for f in "$TMP"/out "$TMP"/err "$TMP"/srv; do
		[[ -s $f ]] && tail -n 15 "$f" | sed "s|^|# ${f##*/}: |"
	done
}
CHECK_DIAG=bench_diag

# bench_run ADDR ARGS...: server for one client (CLIENTS), then the client
bench_run() {
	local addr=$1 rc

	shift
	timeout 60 "$K" bench -l -c "${CLIENTS:-1}" -p $PORT -S 64K >"$TMP/srv" 2>&1 &
	server_pid=$!
	wait_output "$TMP/srv" 'listening on' 30 "$server_pid" >/dev/null ||
		return 1
	timeout 60 "$K" bench "$addr" -p $PORT "$@" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	wait "$server_pid"
	local src=$?
	server_pid=
	((rc == 0 && src == 0))
}

json_ok() { # DEVICE
	"$PYTHON" - "$TMP/out" "$1" <<'EOF' || return 1
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is True and d["error"] is None, d.get("error")
assert d["ifname"] == sys.argv[2], d["ifname"]
for k in ("date", "kernel", "machine", "transport", "target"):
    assert isinstance(d[k], str) and d[k], k
rows = d["results"]
want = [(op, s) for op in ("write", "read", "send", "lat") for s in (64, 4096)]
assert [(r["op"], r["size"]) for r in rows] == want, [(r["op"], r["size"]) for r in rows]
for r in rows:
    assert r["skipped"] is False
    assert r["iters"] >= 8
    nums = [r["seconds"], r["mb_per_s"], r["mmsg_per_s"], r["cpu"]["user_s"],
            r["cpu"]["sys_s"], r["cpu"]["s_per_gb"]] + list(r["lat_us"].values())
    assert all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in nums), r
    assert r["seconds"] > 0 and r["mb_per_s"] > 0, r
    l = r["lat_us"]
    assert 0 < l["median"] <= l["p99"] <= l["p99_9"], r
    # MB/s = size x messages/s (both rounded)
    assert abs(r["mb_per_s"] - r["size"] * r["mmsg_per_s"]) <= 0.01 * r["mb_per_s"] + 0.01, r
EOF
	json_schema BENCH
}

text_ok() {
	grep -q '^KRDMA BENCH ' "$TMP/out" &&
		grep -q '^op .*MB/s.*cpu_s/GB' "$TMP/out" &&
		[[ $(grep -cE '^(write|read|send|lat) +[0-9]+ +[0-9]+ ' "$TMP/out") == 8 ]]
}

conn_ok() { # DEVICE CONNS
	"$PYTHON" - "$TMP/out" "$1" "$2" <<'EOF' || return 1
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is True and d["error"] is None, d.get("error")
assert d["ifname"] == sys.argv[2], d["ifname"]
rows = d["results"]
assert [(r["op"], r["size"], r["iters"]) for r in rows] == [("conn", 0, int(sys.argv[3]))], rows
l, c = rows[0]["lat_us"], rows[0]["close_us"]
nums = list(l.values()) + list(c.values()) + [rows[0]["seconds"]]
assert all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in nums), rows
assert l["median"] <= l["p99"] <= l["p99_9"] and c["median"] <= c["p99"], rows
# 5 connections: p99.9 is the slowest, so no mean can be above it (one
# unit for all of them: microseconds)
assert l["avg"] <= l["p99_9"] * 1.001 + 0.001, rows
EOF
	json_schema BENCH_CONN || return 1
	# the server saw each of them come and say bye
	[[ $(grep -c '^client [0-9]*: done$' "$TMP/srv") == "$2" ]]
}

# scale_run ADDR N: bench -o scale, N connections to its own listener
scale_run() {
	timeout 120 "$K" bench "$1" -p $PORT -j -o scale -n "$2" -t 30s \
		>"$TMP/out" 2>"$TMP/err"
}

# scale_ok DEVICE N: its JSON well-formed, every one of the N made and
# accepted, the numbers consistent; and afterwards no connection of this
# user left in the module (debugfs users: conns=0, or no entry)
scale_ok() {
	"$PYTHON" - "$TMP/out" "$1" "$2" <<'EOF' || return 1
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is True and d["error"] is None, d.get("error")
assert d["ifname"] == sys.argv[2], d["ifname"]
rows = d["results"]
n = int(sys.argv[3])
assert [(r["op"], r["size"], r["iters"]) for r in rows] == [("scale", 0, n)], rows
r = rows[0]
c = r["connect_us"]
nums = [r["setup_s"], r["conns_per_s"], r["teardown_s"], r["teardown_us_per_conn"],
        r["accept_us"]["median"]] + list(c.values())
assert all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in nums), r
assert c["median"] <= c["p99"] <= c["max"], r
# every CONNECT is within the setup time, and the rate is n / that time
assert c["max"] <= r["setup_s"] * 1e6 * 1.001, r
assert abs(r["conns_per_s"] - n / r["setup_s"]) <= 0.001 * r["conns_per_s"] + 0.1, r
assert abs(r["teardown_us_per_conn"] - r["teardown_s"] * 1e6 / n) <= 0.01 * r["teardown_us_per_conn"] + 0.01, r
for k in ("kb_per_conn", "kb_left"):
    assert set(r[k]) == {"slab", "vmalloc"}, r
    assert all(isinstance(x, (int, float)) and math.isfinite(x) for x in r[k].values()), r
EOF
	json_schema BENCH_SCALE || return 1
	# (a closed connection is uncharged when it is released: bounded)
	local i
	for ((i = 0; i < 200; i++)); do
		grep -Eq "^uid=$(id -u) .* conns=[1-9]" /sys/kernel/debug/krdma/users ||
			return 0
		sleep 0.05
	done
	echo "connections left: $(grep "^uid=$(id -u) " /sys/kernel/debug/krdma/users)" >>"$TMP/err"
	return 1
}

scale_alone() {
	timeout 10 "$K" bench "$RXE_ADDR" -o write,scale >/dev/null 2>"$TMP/err"
	[[ $? == 2 ]] && grep -q 'scale is measured alone' "$TMP/err"
}

conn_alone() {
	timeout 10 "$K" bench "$RXE_ADDR" -o conn,write >/dev/null 2>"$TMP/err"
	[[ $? == 2 ]] && grep -q 'measured alone' "$TMP/err"
}

# bench_script: scripts/bench.sh, tiny: WRITE of 4 KiB and the 64 B
# ping-pong (and WRITE's empty run alone: one per operation would cost
# two runs more a repeat), row by row, krdma first in repeat 1, perftest
# first in repeat 2, on rxe0 (siw0's rows are the same code; about 20 s
# under TCG where both devices and two sizes took 50); one WRITE in 4
# signaled, as the batch (make bench's default: -u 4 and -Q 4); no TCP,
# no one-at-a-time connection rows, the scale rows with 3 connections
# together; then its report into $TMP/doc (no plot). Every
# BENCH_* it reads is set here, so that a KRDMA_BENCH_* of make bench's
# in the environment changes nothing
bench_script() {
	BENCH_REPEAT=2 BENCH_OPS="write lat" BENCH_SIZES=4K \
		BENCH_LAT_SIZES=64 BENCH_DEPTH=8 BENCH_BATCH=4 BENCH_ITERS=64 \
		BENCH_MIN_ITERS=16 BENCH_BYTES=64K BENCH_EMPTY=write BENCH_TCP=0 \
		BENCH_CONNS=0 BENCH_SCALE=3 BENCH_RING=0 BENCH_SIGNAL=4 \
		BENCH_DEVS="rxe0:$RXE_ADDR" \
		timeout 300 scripts/bench.sh "$TMP/bench" >"$TMP/out" 2>"$TMP/err" ||
		return 1
	mkdir -p "$TMP/doc" &&
		BENCH_PLOT=0 timeout 120 scripts/bench.sh --report "$TMP/bench" \
			"$TMP/doc" >>"$TMP/out" 2>>"$TMP/err"
}

# bench_script_ok: its raw results are complete (each repeat: a JSON per
# krdma row, a numbers line per perftest row, a whole-guest CPU line and
# a client time line for each, no krdma failure listed, or the perftest
# row said to have failed, in one repeat at most), and its report's json
# and rst well-formed: one kernel, this one, every row, every median
# within its min-max, two runs each, a ratio to perftest for every row
bench_script_ok() {
	"$PYTHON" - "$TMP/bench" "$TMP/doc" "$(uname -r)" <<'EOF' >>"$TMP/err" 2>&1
import json, math, os, sys
raw, doc, kernel = sys.argv[1:]
devs = ["rxe0"]
want = [("write", 4096), ("lat", 64)]
fails = {}  # (dev, op, size): repeats whose perftest row failed
for rep in (1, 2):
    rd = os.path.join(raw, "rep%d" % rep)
    failed = {tuple(l.split()) for l in open(os.path.join(rd, "perftest-failed.txt"))}
    kfailed = open(os.path.join(rd, "krdma-failed.txt")).read()
    assert not kfailed, (rep, "krdma failed", kfailed)
    for dev in devs:
        for op, s in want:
            j = json.load(open(os.path.join(rd, "krdma-%s-%s-%d.json" % (dev, op, s))))
            assert j["ok"] is True, (rep, dev, op, s, j["error"])
            assert [(r["op"], r["size"]) for r in j["results"]] == [(op, s)], (rep, dev, op, s)
        pt = {}
        for l in open(os.path.join(rd, "perftest-%s.txt" % dev)):
            f = l.split()
            pt[(f[0], int(f[1]))] = f
        cpu = {}
        for l in open(os.path.join(rd, "cpu-%s.txt" % dev)):
            f = l.split()
            assert len(f) == 6 and all(x.isdigit() for x in f[2:]), (rep, dev, l)
            assert int(f[3]) > 0 and int(f[5]) > 0, (rep, dev, l)
            cpu[(f[0], f[1], int(f[2]))] = f
        tm = {}
        for l in open(os.path.join(rd, "time-%s.txt" % dev)):
            f = l.split()
            assert len(f) == 6 and float(f[4]) >= 0 and float(f[5]) >= 0, (rep, dev, l)
            tm[(f[0], f[1], int(f[2]))] = f
        for op, s in want + [("empty", 64)]:
            assert ("krdma", op, s) in cpu, ("no CPU line", rep, dev, "krdma", op, s)
            assert ("krdma", op, s) in tm, ("no time line", rep, dev, "krdma", op, s)
            # the empty run of WRITE is "empty" everywhere; failed is by
            # the name tool_run had: empty-write
            if (dev, op, str(s)) in failed or (dev, "empty-write", str(s)) in failed and op == "empty":
                fails[(dev, op, s)] = fails.get((dev, op, s), 0) + 1
                continue
            assert (op, s) in pt and "-" not in pt[(op, s)], ("perftest", rep, dev, op, s)
            assert ("perftest", op, s) in cpu, ("no CPU line", rep, dev, "perftest", op, s)
            assert ("perftest", op, s) in tm, ("no time line", rep, dev, "perftest", op, s)
# a perftest row may fail once (its reason is listed), not in both
# repeats: each row needs a ratio measured against perftest
assert all(n < 2 for n in fails.values()), ("perftest failed twice", fails)
assert json.load(open(os.path.join(raw, "done.json")))["status"] == 0
# connection scale, 3 together: a line of each tool, in the report too
sc = [l.split() for l in open(os.path.join(raw, "scale-rxe0.txt"))]
assert sorted(x[:2] for x in sc) == [["cmtime", "3"], ["krdma", "3"]], sc
assert all(float(x[2]) > 0 and float(x[3]) > 0 for x in sc), sc
res = json.load(open(os.path.join(doc, "benchmarks-results.json")))
assert res["format"] == 2 and list(res["kernels"]) == [kernel], list(res["kernels"])
k = res["kernels"][kernel]
assert k["meta"]["repeat"] == 2 and k["meta"]["devices"] == devs, k["meta"]
rows = {(r["device"], r["op"], r["size"]): r for r in k["rows"]}
assert sorted(rows) == sorted((d, op, s) for d in devs for op, s in want), sorted(rows)


def stat_ok(st, where):
    assert len(st["runs"]) == 2, where
    v = [x for x in st["runs"] if x is not None]
    assert v and all(isinstance(x, (int, float)) and math.isfinite(x) for x in v), where
    assert st["min"] <= st["median"] <= st["max"], where
    assert st["min"] == min(v) and st["max"] == max(v), where


for key, r in rows.items():
    m = "lat_median_us" if key[1] == "lat" else "mb_per_s"
    for who in ("krdma", "perftest"):
        for name, st in r[who].items():
            if name != "iters" and st is not None:
                stat_ok(st, (key, who, name))
    for name in (m, "cpu_s_per_gb", "cpu_rusage_s_per_gb"):
        assert None not in r["krdma"][name]["runs"], (key, name)
        if key not in fails:
            assert None not in r["perftest"][name]["runs"], (key, name)
    stat_ok(r["ratio"], (key, "ratio"))
    stat_ok(r["cpu_ratio"], (key, "cpu_ratio"))
for dev in devs:
    assert None not in k["empty_run_cpu_s"][dev]["krdma"]["runs"], dev
assert [(c["device"], c["conns"]) for c in k["scale"]] == [("rxe0", 3)], k["scale"]
assert k["scale"][0]["setup_ratio"] > 0 and "kb_per_conn" in k["scale"][0]["krdma"], k["scale"]
rst = open(os.path.join(doc, "benchmarks-results.rst")).read()
for t in ["Summary", "Linux ", "rxe0 (RoCE)", "Connection scale"]:
    assert t in rst, t
# per device a table row per row: one WRITE size and one lat
for dev in ("rxe0 (RoCE)",):
    body = rst.split(dev)[1].split("~~\n\n", 1)[1].split("\n\n", 2)[1]
    assert body.count("   * - write\n") == 1 and body.count("   * - lat\n") == 1, body[:400]
EOF
}

echo "TAP version 13"
echo "1..19"
check "bench on rxe (JSON) runs" bench_run "$RXE_ADDR" -j "${ARGS[@]}"
check "bench on rxe: JSON well-formed, a BENCH of cli.rst" json_ok rxe0
check "bench on siw (JSON) runs" bench_run "$SIW_ADDR" -j "${ARGS[@]}"
check "bench on siw: JSON well-formed, a BENCH of cli.rst" json_ok siw0
check "bench on rxe (text) runs" bench_run "$RXE_ADDR" "${ARGS[@]}"
check "bench text output well-formed" text_ok
usage() {
	timeout 10 "$K" bench "$RXE_ADDR" -d 0 >/dev/null 2>&1
	[[ $? == 2 ]] && timeout 10 "$K" bench --help | grep -q 'Usage: krdmactl bench'
}
check "bench bad usage exits 2, --help works" usage
CLIENTS=5 check "bench -o conn on rxe: 5 connections, one at a time" \
	bench_run "$RXE_ADDR" -j -o conn -n 5
check "bench -o conn on rxe: JSON well-formed, the server served all 5" \
	conn_ok rxe0 5
CLIENTS=5 check "bench -o conn on siw: 5 connections, one at a time" \
	bench_run "$SIW_ADDR" -j -o conn -n 5
check "bench -o conn on siw: JSON well-formed, the server served all 5" \
	conn_ok siw0 5
check "bench -o conn with another op: exit 2, 'measured alone'" conn_alone
check "bench -o scale on rxe: 20 connections kept open together" \
	scale_run "$RXE_ADDR" 20
check "bench -o scale on rxe: JSON well-formed, all 20 made, none left" \
	scale_ok rxe0 20
check "bench -o scale on siw: 20 connections kept open together" \
	scale_run "$SIW_ADDR" 20
check "bench -o scale on siw: JSON well-formed, all 20 made, none left" \
	scale_ok siw0 20
check "bench -o scale with another op: exit 2, 'measured alone'" scale_alone
if command -v ib_write_bw >/dev/null; then
	check "scripts/bench.sh, tiny, 2 repeats on rxe0, and its --report" \
		bench_script
	check "scripts/bench.sh: raw results complete; report json/rst well-formed, medians within min-max" \
		bench_script_ok
else
	skip "scripts/bench.sh, tiny, 2 repeats on rxe0, and its --report" "no perftest"
	skip "scripts/bench.sh: raw results complete; report json/rst well-formed, medians within min-max" "no perftest"
fi
echo "# $n tests, $failed failed"
((failed == 0))
