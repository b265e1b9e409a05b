#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma benchmarks (see Documentation/benchmarks.rst). Two steps:
#
#   scripts/bench.sh [OUTDIR]        in the guest test bed (make bench runs
#                                    it there): krdmactl bench, then perftest
#                                    (ib_write_bw, ib_read_bw, ib_send_bw,
#                                    ib_write_lat, -R) with the same sizes,
#                                    depth and iterations, one after the
#                                    other, on rxe0 and on siw0; then TCP
#                                    (iperf3) on the same veth; and
#                                    connection setup, krdmactl bench -o
#                                    conn against rdma_cm's own (cmtime,
#                                    rdmacm-utils). Raw results
#                                    into OUTDIR (default
#                                    $KRDMA_RESULTS/bench).
#   scripts/bench.sh --report DIR [DOCDIR]
#                                    on the host: the table of ratios
#                                    krdma/perftest (DOCDIR/benchmarks-
#                                    results.rst), the plot (DOCDIR/
#                                    benchmarks.png, gnuplot) and all the
#                                    numbers (DOCDIR/benchmarks-results.json)
#
# Environment (guest step): BENCH_SIZES (default 64-8M: powers of 4, and
# 8M), BENCH_LAT_SIZES (64-64K), BENCH_DEPTH (64), BENCH_BATCH (16),
# BENCH_ITERS (10000, most per size), BENCH_MIN_ITERS (20), BENCH_BYTES
# (128M per size: iterations = bytes / size within the two), BENCH_DEVS
# ("rxe0:198.18.0.1 siw0:198.18.1.1"), BENCH_TCP (1: run iperf3),
# BENCH_CONNS (30: connections timed one after the other, each way),
# BENCH_RING (1: krdmactl bench -R on both sides, completions from the
# mapped ring instead of POLL; default 0), BENCH_SIGNAL (N: krdmactl
# bench -u N, one WRITE or SEND in N signaled, as perftest's cq_mod;
# default 1). Each
# also as KRDMA_BENCH_*, which the guest gets: make bench KRDMA_BENCH_DEPTH=16
# Nothing here asserts timings; a run that fails is recorded as failed.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

report() {
	local dir=$1 doc=${2:-$repo/Documentation}

	[[ -f $dir/meta.json ]] || {
		echo "bench: no results in $dir (run make bench)" >&2
		exit 1
	}
	python3 - "$dir" "$doc" <<'EOF' || exit 1
import json, os, re, sys, glob

d, doc = sys.argv[1], sys.argv[2]
meta = json.load(open(os.path.join(d, "meta.json")))
try:
    host = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")]
    meta["host_cpu"] = "%s x %d" % (host[0], len(host)) if host else "?"
except OSError:
    meta["host_cpu"] = "?"
probe = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(d)))), "kvm-probe")
try:
    meta["accel"] = open(probe).read().split()[-1]
except OSError:
    meta["accel"] = meta.get("accel", "?")

def fnum(x):
    return None if x is None else float(x)

rows = []
for dev in meta["devices"]:
    kr = {}
    for p in glob.glob(os.path.join(d, "krdma-%s-*.json" % dev)):
        try:
            j = json.load(open(p))
        except (OSError, ValueError):
            continue
        for r in j.get("results", []):
            if r["op"] != "conn":  # below
                kr[(r["op"], r["size"])] = r
    pt = {}
    p = os.path.join(d, "perftest-%s.txt" % dev)
    if os.path.exists(p):
        for l in open(p):
            f = l.split()
            if len(f) >= 3 and f[0] in ("write", "read", "send", "lat"):
                pt[(f[0], int(f[1]))] = [None if x == "-" else float(x) for x in f[2:]]
    for key in sorted(set(kr) | set(pt), key=lambda k: (["write", "read", "send", "lat"].index(k[0]), k[1])):
        op, size = key
        k = kr.get(key)
        p = pt.get(key)
        row = {"device": dev, "op": op, "size": size}
        if k and not k.get("skipped"):
            row["iters"] = k["iters"]
            row["krdma_mb_per_s"] = k["mb_per_s"]
            row["krdma_mmsg_per_s"] = k["mmsg_per_s"]
            row["krdma_lat_median_us"] = k["lat_us"]["median"]
            row["krdma_lat_p99_us"] = k["lat_us"]["p99"]
            row["krdma_lat_p99_9_us"] = k["lat_us"]["p99_9"]
            row["krdma_cpu_s_per_gb"] = k["cpu"]["s_per_gb"]
        if p:
            # bw: iters mb_per_s mmsg_per_s cpu_s_per_gb; lat: iters median p99 p99.9 cpu
            if op == "lat":
                row["perftest_lat_median_us"] = p[1]
                row["perftest_lat_p99_us"] = p[2]
                row["perftest_lat_p99_9_us"] = p[3]
                row["perftest_cpu_s_per_gb"] = p[4]
            else:
                row["perftest_mb_per_s"] = p[1]
                row["perftest_mmsg_per_s"] = p[2]
                row["perftest_cpu_s_per_gb"] = p[3]
        if op == "lat":
            a, b = row.get("krdma_lat_median_us"), row.get("perftest_lat_median_us")
        else:
            a, b = row.get("krdma_mb_per_s"), row.get("perftest_mb_per_s")
        row["ratio"] = a / b if a and b else None
        rows.append(row)

# Connection setup: krdmactl bench -o conn, and cmtime (one connection a run)
def med(v, q=0.5):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None

conns = []
for dev in meta["devices"]:
    c = {"device": dev}
    try:
        j = json.load(open(os.path.join(d, "krdma-%s-conn-0.json" % dev)))
        r = [x for x in j.get("results", []) if x["op"] == "conn"]
        if r:
            c["krdma_conns"] = r[0]["iters"]
            c["krdma_connect_median_us"] = r[0]["lat_us"]["median"]
            c["krdma_connect_p99_us"] = r[0]["lat_us"]["p99"]
            c["krdma_close_median_us"] = r[0]["close_us"]["median"]
    except (OSError, ValueError, KeyError):
        pass
    setup, down = [], []
    p = os.path.join(d, "cmtime-%s.txt" % dev)
    if os.path.exists(p):
        for l in open(p):
            f = l.split()
            if len(f) == 2:
                setup.append(float(f[0]))
                down.append(float(f[1]))
    if setup:
        c["cmtime_conns"] = len(setup)
        c["cmtime_connect_median_us"] = med(setup)
        c["cmtime_connect_p99_us"] = med(setup, 0.99)
        c["cmtime_close_median_us"] = med(down)
    a, b = c.get("krdma_connect_median_us"), c.get("cmtime_connect_median_us")
    c["ratio"] = a / b if a and b else None
    conns.append(c)

tcp = []
p = os.path.join(d, "iperf3.txt")
if os.path.exists(p):
    for l in open(p):
        f = l.split()
        if len(f) == 3 and f[1] != "-":
            tcp.append({"size": int(f[0]), "mb_per_s": float(f[1]),
                        "cpu_s_per_gb": float(f[2]) if f[2] != "-" else None})

out = {"meta": meta, "rows": rows, "tcp": tcp, "connect": conns}
json.dump(out, open(os.path.join(doc, "benchmarks-results.json"), "w"), indent=1)

def sz(n):
    for u, m in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m and n % m == 0:
            return "%d %s" % (n // m, u)
    return "%d B" % n

def f(x, dec=1):
    return "n/a" if x is None else "%.*f" % (dec, x)

L = []
L.append(".. This file is generated by scripts/bench.sh --report (make bench); do not edit.")
L.append("")
L.append("Measured %s on commit ``%s``; guest kernel %s (%s), %s vCPUs, "
         "QEMU accel %s; host CPU %s." % (meta["date"], meta["commit"], meta["kernel"],
         meta["machine"], meta["cpus"], meta["accel"], meta["host_cpu"]))
L.append("Depth %s, batch %s, iterations per size: %s bytes / size within [%s, %s] "
         "(a multiple of the batch). *ratio* is krdma / perftest: of MB/s for "
         "write, read and send (below 1: krdma is slower), of the median "
         "one-way latency for lat (above 1: krdma is slower)." % (
    meta["depth"], meta["batch"], meta["bytes"], meta["min_iters"], meta["iters"]))
p = os.path.join(d, "perftest-failed.txt")
failed = [l.split() for l in open(p)] if os.path.exists(p) else []
if failed:
    L.append("perftest failed on: %s; those rows have no ratio (n/a)." % ", ".join(
        "%s %s %s" % (f[0], f[1], sz(int(f[2]))) for f in failed if len(f) == 3))
    L.append("")
L.append("")
for dev in meta["devices"]:
    title = "%s (%s)" % (dev, "RoCE" if dev.startswith("rxe") else "iWARP")
    L.append(title)
    L.append("~" * len(title))
    L.append("")
    L.append(".. list-table::")
    L.append("   :header-rows: 1")
    L.append("")
    hdr = ["op", "size", "iters", "krdma MB/s", "perftest MB/s", "ratio",
           "krdma Mmsg/s", "krdma lat med/p99/p99.9 us", "perftest lat med us",
           "krdma CPU s/GB"]
    L.append("   * - " + "\n     - ".join(hdr))
    for r in rows:
        if r["device"] != dev:
            continue
        if r["op"] == "lat":
            lat = "%s / %s / %s" % (f(r.get("krdma_lat_median_us")), f(r.get("krdma_lat_p99_us")), f(r.get("krdma_lat_p99_9_us")))
        else:
            lat = "%s / %s / %s" % (f(r.get("krdma_lat_median_us"), 0), f(r.get("krdma_lat_p99_us"), 0), f(r.get("krdma_lat_p99_9_us"), 0))
        cells = [r["op"], sz(r["size"]), str(r.get("iters", "n/a")),
                 f(r.get("krdma_mb_per_s")), f(r.get("perftest_mb_per_s")),
                 f(r["ratio"], 2), f(r.get("krdma_mmsg_per_s"), 4), lat,
                 f(r.get("perftest_lat_median_us")),
                 f(r.get("krdma_cpu_s_per_gb"), 2)]
        L.append("   * - " + "\n     - ".join(cells))
    L.append("")
if tcp:
    L.append("TCP (iperf3, one stream, same veth)")
    L.append("~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~")
    L.append("")
    L.append(".. list-table::")
    L.append("   :header-rows: 1")
    L.append("")
    L.append("   * - write size\n     - MB/s\n     - CPU s/GB (sender)")
    for t in tcp:
        L.append("   * - %s\n     - %s\n     - %s" % (sz(t["size"]), f(t["mb_per_s"]), f(t["cpu_s_per_gb"], 2)))
    L.append("")
if any(c.get("ratio") or c.get("krdma_conns") for c in conns):
    t = "Connection setup (one connection at a time)"
    L.append(t)
    L.append("~" * len(t))
    L.append("")
    L.append("krdma: ``KRDMA_IOC_CONNECT`` from the call to its return (address and "
             "route resolution, QP, the CM exchange with krdma's header), and the "
             "close of the connection's handle. rdma_cm: ``cmtime -c 1`` (rdmacm-utils), "
             "the sum of its create id, resolve addr, resolve route, create qp and "
             "connect steps, and of disconnect and destroy; one run per connection. "
             "*ratio* is krdma / rdma_cm of the median setup time (above 1: krdma is "
             "slower).")
    L.append("")
    L.append(".. list-table::")
    L.append("   :header-rows: 1")
    L.append("")
    L.append("   * - " + "\n     - ".join(["device", "connections (krdma / cmtime)",
             "krdma setup med / p99 us", "rdma_cm setup med / p99 us", "ratio",
             "krdma close med us", "rdma_cm teardown med us"]))
    for c in conns:
        L.append("   * - " + "\n     - ".join([c["device"],
                 "%s / %s" % (c.get("krdma_conns", 0), c.get("cmtime_conns", 0)),
                 "%s / %s" % (f(c.get("krdma_connect_median_us"), 0), f(c.get("krdma_connect_p99_us"), 0)),
                 "%s / %s" % (f(c.get("cmtime_connect_median_us"), 0), f(c.get("cmtime_connect_p99_us"), 0)),
                 f(c.get("ratio"), 2), f(c.get("krdma_close_median_us"), 0),
                 f(c.get("cmtime_close_median_us"), 0)]))
    L.append("")
open(os.path.join(doc, "benchmarks-results.rst"), "w").write("\n".join(L))

# gnuplot data: one block per (device, op) series
dat = os.path.join(d, "plot.dat")
series = []
with open(dat, "w") as g:
    for dev in meta["devices"]:
        for op in ("write", "read", "send"):
            for who in ("krdma", "perftest"):
                pts = [(r["size"], r.get(who + "_mb_per_s")) for r in rows
                       if r["device"] == dev and r["op"] == op and r.get(who + "_mb_per_s")]
                if not pts:
                    continue
                g.write("# %s %s %s\n" % (dev, op, who))
                for s, v in pts:
                    g.write("%d %f\n" % (s, v))
                g.write("\n\n")
                series.append("%s %s %s" % (who, dev, op))
    if tcp:
        g.write("# tcp\n")
        for t in tcp:
            g.write("%d %f\n" % (t["size"], t["mb_per_s"]))
        g.write("\n\n")
        series.append("TCP iperf3")
gp = ["set terminal pngcairo size 1100,650 noenhanced" if os.system("gnuplot -e 'set terminal pngcairo' 2>/dev/null") == 0
      else "set terminal png size 1100,650",
      "set output '%s'" % os.path.join(doc, "benchmarks.png"),
      "set title 'krdma (userspace, /dev/krdma) vs perftest: bandwidth, %s, %s'" % (meta["date"][:10], meta["commit"][:12]),
      "set logscale x 2", "set logscale y 10", "set format x '%.0b %BB'", "set key outside right",
      "set xlabel 'message size (bytes)'", "set ylabel 'MB/s (10^6 B/s)'", "set grid"]
plots = []
for i, s in enumerate(series):
    dash = "dt 2" if s.startswith("perftest") else "dt 1"
    plots.append("'%s' index %d with linespoints %s title '%s'" % (dat, i, dash, s))
if plots:
    gp.append("plot " + ", ".join(plots))
    open(os.path.join(d, "plot.gp"), "w").write("\n".join(gp) + "\n")
    if os.system("gnuplot '%s'" % os.path.join(d, "plot.gp")) != 0:
        print("bench: gnuplot failed", file=sys.stderr)
print("bench: wrote %s/benchmarks-results.rst, benchmarks-results.json, benchmarks.png" % doc)
for r in rows:
    print("%-5s %-5s %9d  ratio %s" % (r["device"], r["op"], r["size"], f(r["ratio"], 2)))
for c in conns:
    print("%-5s conn  setup median krdma %s us, rdma_cm %s us  ratio %s" % (
        c["device"], f(c.get("krdma_connect_median_us"), 0),
        f(c.get("cmtime_connect_median_us"), 0), f(c.get("ratio"), 2)))
EOF
	exit 0
}

if [[ ${1-} == --report ]]; then
	shift
	report "$@"
fi

out=${1:-${KRDMA_RESULTS:-$repo/build}/bench}
mkdir -p "$out" || exit 1
cd "$repo" || exit 1
K=$repo/userspace-tools/krdmactl
SIZES=${BENCH_SIZES:-${KRDMA_BENCH_SIZES:-64-8M}}
LAT_SIZES=${BENCH_LAT_SIZES:-${KRDMA_BENCH_LAT_SIZES:-64-64K}}
DEPTH=${BENCH_DEPTH:-${KRDMA_BENCH_DEPTH:-64}}
BATCH=${BENCH_BATCH:-${KRDMA_BENCH_BATCH:-16}}
ITERS=${BENCH_ITERS:-${KRDMA_BENCH_ITERS:-10000}}
MIN_ITERS=${BENCH_MIN_ITERS:-${KRDMA_BENCH_MIN_ITERS:-20}}
BYTES=${BENCH_BYTES:-${KRDMA_BENCH_BYTES:-128M}}
DEVS=${BENCH_DEVS:-${KRDMA_BENCH_DEVS:-rxe0:198.18.0.1 siw0:198.18.1.1}}
CONNS=${BENCH_CONNS:-${KRDMA_BENCH_CONNS:-30}}
RING=${BENCH_RING:-${KRDMA_BENCH_RING:-0}}
ringopt=()
[[ $RING == 1 ]] && ringopt=(-R)
SIGNAL=${BENCH_SIGNAL:-${KRDMA_BENCH_SIGNAL:-1}}
KPORT=18516
PPORT=18600

log() { echo "bench: $*" >&2; }

bytes_of() {
	local v=${1%[kKmMgG]} u=${1: -1}
	case $u in
	k | K) echo $((v << 10)) ;;
	m | M) echo $((v << 20)) ;;
	g | G) echo $((v << 30)) ;;
	*) echo "$1" ;;
	esac
}
# The sizes krdmactl bench uses for "MIN-MAX": powers of 4 from MIN, and MAX
sizes_of() {
	local lo hi v
	if [[ $1 == *-* ]]; then
		lo=$(bytes_of "${1%-*}")
		hi=$(bytes_of "${1#*-}")
		for ((v = lo; v <= hi; v *= 4)); do echo $v; done
		(((v / 4) != hi)) && echo "$hi"
	else
		for v in ${1//,/ }; do bytes_of "$v"; done
	fi
}
# The iterations krdmactl bench uses for a size (and op)
iters_of() {
	local n=$(($(bytes_of "$BYTES") / $1))
	((n > ITERS)) && n=$ITERS
	((n < MIN_ITERS)) && n=$MIN_ITERS
	[[ ${2-} == lat ]] || n=$(((n + BATCH - 1) / BATCH * BATCH))
	((n < 5)) && n=5 # perftest's minimum
	echo "$n"
}
maxsize=0
for s in $(sizes_of "$SIZES") $(sizes_of "$LAT_SIZES"); do
	((s > maxsize)) && maxsize=$s
done

cpus=$(nproc)
cat >"$out/meta.json" <<EOF
{"date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "commit": "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo -dirty)",
 "kernel": "$(uname -r)", "machine": "$(uname -m)", "cpus": $cpus,
 "guest_cpu": "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)",
 "devices": [$(for dv in $DEVS; do printf '"%s",' "${dv%%:*}"; done | sed 's/,$//')],
 "depth": $DEPTH, "batch": $BATCH, "iters": $ITERS, "min_iters": $MIN_ITERS,
 "bytes": $(bytes_of "$BYTES"), "sizes": "$SIZES", "lat_sizes": "$LAT_SIZES"}
EOF

# krdmactl bench against its own server: one JSON per device and kind
krdma_run() { # dev addr ops sizes file
	local srv=$out/krdma-$1-server.log rc
	timeout 120 "$K" bench -l -c 1 -p $KPORT -S "$maxsize" "${ringopt[@]}" \
		>>"$srv" 2>&1 &
	local spid=$!
	sleep 0.5
	timeout 120 "$K" bench "$2" -p $KPORT -j -o "$3" -s "$4" -d "$DEPTH" \
		-b "$BATCH" -n "$ITERS" -m "$MIN_ITERS" -B "$BYTES" \
		-u "$SIGNAL" "${ringopt[@]}" >"$5" 2>>"$out/errors.log"
	rc=$?
	wait $spid
	return $rc
}

# perftest: server then client; prints the client's output; rc
pt_once() { # tool dev addr args...
	local tool=$1 dev=$2 addr=$3 rc spid
	shift 3
	timeout 40 "$tool" -R -d "$dev" -p $PPORT -F "$@" >"$out/pt-server.log" 2>&1 &
	spid=$!
	sleep 0.7
	local TIMEFORMAT='%U %S'
	{ time timeout 30 "$tool" -R -d "$dev" -p $PPORT -F "$@" "$addr" >"$out/pt-client.log" 2>&1; } 2>"$out/pt-time"
	rc=$?
	wait $spid 2>/dev/null
	return $rc
}
# one perftest row: "op size iters a b c cpu" into perftest-DEV.txt
pt_row() { # op dev addr size iters
	local op=$1 dev=$2 addr=$3 size=$4 n=$5 tool try line cpu u s
	case $op in
	write) tool=ib_write_bw ;;
	read) tool=ib_read_bw ;;
	send) tool=ib_send_bw ;;
	lat) tool=ib_write_lat ;;
	esac
	for try in 1 2; do
		if [[ $op == lat ]]; then
			pt_once $tool "$dev" "$addr" -s "$size" -n "$n"
		elif [[ $op == send ]]; then
			pt_once $tool "$dev" "$addr" -s "$size" -n "$n" -t "$DEPTH" -r "$DEPTH" -l "$BATCH"
		else
			pt_once $tool "$dev" "$addr" -s "$size" -n "$n" -t "$DEPTH" -l "$BATCH"
		fi
		local rc=$?
		{
			echo "### $tool $dev $size $n try $try rc $rc"
			cat "$out/pt-client.log"
		} >>"$out/perftest-$dev.log"
		# bogus numbers follow this warning: run once more
		if ((rc == 0)) && ! grep -q 'Correlation coefficient' "$out/pt-client.log"; then
			break
		fi
		# a hang (timeout) is not retried: it would hang again
		((try == 2 || rc == 124)) && {
			echo "$op $size $n - - - -" >>"$out/perftest-$dev.txt"
			return 1
		}
	done
	read -r u s <"$out/pt-time"
	# the numbers line starts with the size
	line=$(awk -v s="$size" '$1 == s && NF >= 5 { print; exit }' "$out/pt-client.log")
	[[ -n $line ]] || {
		echo "$op $size $n - - - -" >>"$out/perftest-$dev.txt"
		return 1
	}
	cpu=$(awk -v u="$u" -v s="$s" -v b="$size" -v n="$n" 'BEGIN { printf "%.6f", (u + s) / (b * n / 1e9) }')
	if [[ $op == lat ]]; then
		# bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
		# shellcheck disable=SC2086 # split on purpose
		set -- $line
		echo "lat $size $n $5 $8 $9 $cpu" >>"$out/perftest-$dev.txt"
	else
		# bytes iters bw_peak bw_avg(MiB/s) msg_rate(Mpps)
		# shellcheck disable=SC2086 # split on purpose
		set -- $line
		awk -v op="$op" -v s="$size" -v n="$n" -v r="$5" -v c="$cpu" \
			'BEGIN { printf "%s %d %d %.3f %.6f %s\n", op, s, n, r * s, r, c }' \
			>>"$out/perftest-$dev.txt"
	fi
}

# Connection setup, one connection at a time: krdma, then rdma_cm's own
# (cmtime -c 1 per run: "step: total_ms max_ms min_us us_per_conn" lines)
conn_run() { # dev addr
	local dev=$1 addr=$2 i rc spid
	timeout 300 "$K" bench -l -c "$CONNS" -p $KPORT >>"$out/krdma-$dev-server.log" 2>&1 &
	spid=$!
	sleep 0.5
	timeout 300 "$K" bench "$addr" -p $KPORT -j -o conn -n "$CONNS" \
		>"$out/krdma-$dev-conn-0.json" 2>>"$out/errors.log"
	rc=$?
	wait $spid
	((rc == 0)) || return 1
	command -v cmtime >/dev/null || return 1
	: >"$out/cmtime-$dev.txt"
	for ((i = 0; i < CONNS; i++)); do
		timeout 30 cmtime -b "$addr" -p $PPORT -c 1 >"$out/cm-server.log" 2>&1 &
		spid=$!
		sleep 0.3
		timeout 30 cmtime -s "$addr" -p $PPORT -c 1 >"$out/cm-client.log" 2>&1
		rc=$?
		kill $spid 2>/dev/null
		wait $spid 2>/dev/null
		{
			echo "### cmtime $dev run $i rc $rc"
			cat "$out/cm-client.log"
		} >>"$out/cmtime-$dev.log"
		((rc == 0)) || continue
		# setup and teardown in us, from the steps' total ms
		awk -F: '
			{ step = $1; gsub(/^ +| +$/, "", step); split($2, v, " ") }
			step ~ /^(create id|resolve addr|resolve route|create qp|connect)$/ { up += v[1]; n++ }
			step ~ /^(disconnect|destroy)$/ { down += v[1] }
			END { if (n == 5) printf "%.1f %.1f\n", up * 1000, down * 1000 }' \
			"$out/cm-client.log" >>"$out/cmtime-$dev.txt"
	done
	[[ -s $out/cmtime-$dev.txt ]]
}

# perftest failing (it crashes in librdmacm on siw with 4 and 8 MiB) is
# not krdma failing: the row is n/a, and said so; status stays 0
pt_failed() { # op dev size
	log "$2: perftest $1 $3 failed: its row is n/a (see perftest-$2.log)"
	echo "$2 $1 $3" >>"$out/perftest-failed.txt"
}

t_start=$(date +%s)
status=0
: >"$out/perftest-failed.txt"
for dv in $DEVS; do
	dev=${dv%%:*}
	addr=${dv#*:}
	# one connection per operation and size: a failure costs one row
	for op in write read send lat; do
		log "$dev: krdmactl bench $op"
		sz=$SIZES
		[[ $op == lat ]] && sz=$LAT_SIZES
		for s in $(sizes_of "$sz"); do
			[[ $op == send ]] && ((s > 1048576)) && continue
			krdma_run "$dev" "$addr" $op "$s" "$out/krdma-$dev-$op-$s.json" || status=1
		done
	done
	: >"$out/perftest-$dev.txt"
	for op in write read send; do
		log "$dev: perftest $op"
		for s in $(sizes_of "$SIZES"); do
			# krdma's SENDs are at most 1 MiB: nothing to compare with
			[[ $op == send ]] && ((s > 1048576)) && continue
			pt_row $op "$dev" "$addr" "$s" "$(iters_of "$s")" ||
				pt_failed "$op" "$dev" "$s"
		done
	done
	log "$dev: perftest lat"
	for s in $(sizes_of "$LAT_SIZES"); do
		pt_row lat "$dev" "$addr" "$s" "$(iters_of "$s" lat)" ||
			pt_failed lat "$dev" "$s"
	done
	if ((CONNS > 0)); then
		log "$dev: connection setup, krdma and cmtime, $CONNS each"
		conn_run "$dev" "$addr" || status=1
	fi
done

# TCP on the same veth: iperf3, one stream, 3 s per write size
if [[ ${BENCH_TCP:-1} == 1 ]] && command -v iperf3 >/dev/null; then
	taddr=${DEVS%% *}
	taddr=${taddr#*:}
	: >"$out/iperf3.txt"
	for s in 64 4096 65536 1048576; do # iperf3: -l 1M at most
		timeout 30 iperf3 -s -1 -B "$taddr" -p 5201 >/dev/null 2>&1 &
		spid=$!
		sleep 0.5
		timeout 30 iperf3 -c "$taddr" -B "$taddr" -p 5201 -t 3 -l "$s" -J >"$out/iperf3-$s.json" 2>>"$out/errors.log"
		wait $spid
		python3 - "$out/iperf3-$s.json" "$s" >>"$out/iperf3.txt" <<'EOF' || echo "$s - -" >>"$out/iperf3.txt"
import json, sys
j = json.load(open(sys.argv[1]))
e = j["end"]["sum_sent"]
cpu = j["end"]["cpu_utilization_percent"]["host_total"] / 100 * e["seconds"]
print(sys.argv[2], "%.3f" % (e["bytes"] / e["seconds"] / 1e6), "%.6f" % (cpu / (e["bytes"] / 1e9)))
EOF
	done
fi
rm -f "$out/pt-client.log" "$out/pt-server.log" "$out/pt-time" \
	"$out/cm-client.log" "$out/cm-server.log"
log "done in $(($(date +%s) - t_start)) s; results in $out (status $status)"
exit $status
