#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma benchmarks (see Documentation/benchmarks.rst). Two steps:
#
#   scripts/bench.sh [OUTDIR]        in the guest test bed (make bench runs
#                                    it there, once per kernel:
#                                    selftests/qemu/bench-kernels.sh):
#                                    REPEAT times, interleaved row by row
#                                    (on rxe0, then siw0: each row's
#                                    krdmactl bench run, then perftest's
#                                    (ib_write_bw, ib_read_bw, ib_send_bw,
#                                    ib_write_lat, -R) with the same size,
#                                    depth and iterations, one process
#                                    pair per row; in even repeats
#                                    perftest first: ABBA), each run's
#                                    whole-guest CPU time read from
#                                    /proc/stat around it; then once TCP
#                                    (iperf3) on the same veth, and
#                                    connection setup, krdmactl bench -o
#                                    conn against rdma_cm's own (cmtime,
#                                    rdmacm-utils). Raw results into
#                                    OUTDIR (default $KRDMA_RESULTS/bench):
#                                    repN/ per repeat, the rest at the top
#   scripts/bench.sh --report DIR... [DOCDIR]
#                                    on the host, from one or more guest
#                                    runs (one per kernel): per kernel
#                                    the medians over the repeats and the
#                                    ratios krdma/perftest, median
#                                    [min-max] (DOCDIR/benchmarks-
#                                    results.rst, a section per kernel),
#                                    a plot per kernel (DOCDIR/
#                                    benchmarks-<series>.png, gnuplot)
#                                    and all the numbers, keyed by kernel
#                                    (DOCDIR/benchmarks-results.json: the
#                                    kernels it has and the runs do not
#                                    are kept). DOCDIR defaults to
#                                    Documentation; when it is, README.md's
#                                    table between its bench-headline
#                                    markers is rewritten too
#
# Environment (guest step): BENCH_REPEAT (3: repeats of every row),
# BENCH_OPS ("write read send lat"), BENCH_SIZES (default 64-8M: powers
# of 4, and 8M), BENCH_LAT_SIZES (64-64K), BENCH_DEPTH (64), BENCH_BATCH
# (16), BENCH_ITERS (4096, most per size), BENCH_MIN_ITERS (16),
# BENCH_BYTES (32M per size: iterations = bytes / size within the two),
# BENCH_EMPTY (1: per repeat, device, tool and operation of OPS, one run
# of DEPTH (rounded up to the batch) 64 B operations, whose CPU time is
# the fixed cost of a run; 0: none; or the operations to have one for,
# e.g. "write"), BENCH_DEVS
# ("rxe0:198.18.0.1 siw0:198.18.1.1"), BENCH_TCP (1: run iperf3),
# BENCH_CONNS (30: connections timed one after the other, each way; 0:
# none), BENCH_SCALE ("10 100 1000": connection counts kept open together,
# krdmactl bench -o scale against cmtime -c N, with the kernel's Slab and
# VmallocUsed sampled; 0: none), BENCH_RING (1: krdmactl bench -R on both sides, completions
# from the mapped ring instead of POLL; default 0), BENCH_SIGNAL (N:
# one WRITE or SEND in N signaled, krdmactl bench -u N and perftest's -Q
# N (cq_mod); a divisor of the batch, at most the depth; default the
# batch, what perftest does with -l alone; READs are signaled each, by
# both: krdmactl keeps them so, ib_read_bw gets -Q 1). Report step:
# BENCH_PLOT (0: no png). Each also as
# KRDMA_BENCH_*, which the guest gets: make bench KRDMA_BENCH_DEPTH=16
# Nothing here asserts timings; a run that fails is recorded as failed.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

# --report: the medians, ratios, tables, plots and json of one or more
# guest runs (see the top); arguments: results dirs, then maybe DOCDIR
report() {
	local doc=$repo/Documentation
	local -a dirs=()

	while (($#)); do
		if [[ -f $1/meta.json ]]; then
			dirs+=("$1")
		elif (($# == 1 && ${#dirs[@]} > 0)); then
			doc=$1
		else
			echo "bench: no results in $1 (run make bench)" >&2
			exit 1
		fi
		shift
	done
	((${#dirs[@]} > 0)) || {
		echo "usage: scripts/bench.sh --report DIR... [DOCDIR]" >&2
		exit 2
	}
	[[ -d $doc ]] || {
		echo "bench: $doc: no such directory" >&2
		exit 1
	}
	python3 - "$doc" "$repo" "${dirs[@]}" <<'EOF' || exit 1
import glob, json, os, re, statistics, sys, tempfile

doc, repo, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
OPS = ["write", "read", "send", "lat"]
TOOLS = ("krdma", "perftest")
plot = os.environ.get("BENCH_PLOT", os.environ.get("KRDMA_BENCH_PLOT", "1")) != "0"


def host_cpu():
    try:
        m = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
             if l.startswith("model name")]
        return "%s x %d" % (m[0], len(m)) if m else "?"
    except OSError:
        return "?"


def stats(runs):
    """The median, min and max of the runs that have a value, and the runs
    (one per repeat, None where it failed); None if none has one"""
    v = [x for x in runs if x is not None]
    if not v:
        return None
    g6 = lambda x: None if x is None else float("%.6g" % x)
    return {"median": g6(statistics.median(v)), "min": g6(min(v)),
            "max": g6(max(v)), "runs": [g6(x) for x in runs]}


def div(a, b):
    return a / b if a is not None and b else None


def empty_op(name):
    """The operation of an empty run's name (empty: WRITE, empty-OP), or None"""
    if name == "empty":
        return "write"
    return name[6:] if name.startswith("empty-") else None


def load_rep(rd, dev, clk):
    """One repeat on DEV: {(op, size): {tool: {metric: value}}}, and the
    whole-guest CPU seconds of each tool's empty run of each operation,
    {op: {tool: seconds}}"""
    cpu, empty, ptime = {}, {}, {}
    p = os.path.join(rd, "cpu-%s.txt" % dev)
    if os.path.exists(p):
        # tool op size iters busy_ticks wall_us
        for l in open(p):
            f = l.split()
            if len(f) != 6:
                continue
            if empty_op(f[1]):
                empty.setdefault(empty_op(f[1]), {})[f[0]] = int(f[4]) / clk
            else:
                cpu[(f[0], f[1], int(f[2]))] = (int(f[4]) / clk, int(f[5]) / 1e6)
    p = os.path.join(rd, "time-%s.txt" % dev)
    if os.path.exists(p):
        # tool op size iters user_s sys_s: the client process, the shell's time
        for l in open(p):
            f = l.split()
            if len(f) == 6 and not empty_op(f[1]):
                ptime[(f[0], f[1], int(f[2]))] = float(f[4]) + float(f[5])
    vals = {}
    for p in glob.glob(os.path.join(rd, "krdma-%s-*.json" % dev)):
        m = re.match(r"krdma-%s-([a-z]+)-\d+\.json$" % re.escape(dev),
                     os.path.basename(p))
        if not m or m.group(1) not in OPS:
            continue
        try:
            j = json.load(open(p))
        except (OSError, ValueError):
            continue
        for r in j.get("results", []):
            if r.get("skipped") or r["op"] not in OPS:
                continue
            # cpu_rusage_s_per_gb: the client process's user + system
            # time per GB, from the shell's time as perftest's (below);
            # krdmactl's own getrusage() around its timed loop is
            # cpu_loop_s_per_gb (and stands in for runs without time-DEV.txt)
            vals.setdefault((r["op"], r["size"]), {})["krdma"] = {
                "iters": r["iters"], "mb_per_s": r["mb_per_s"],
                "mmsg_per_s": r["mmsg_per_s"],
                "lat_median_us": r["lat_us"]["median"],
                "lat_p99_us": r["lat_us"]["p99"],
                "lat_p99_9_us": r["lat_us"]["p99_9"],
                "cpu_rusage_s_per_gb": r["cpu"]["s_per_gb"],
                "cpu_loop_s_per_gb": r["cpu"]["s_per_gb"]}
    p = os.path.join(rd, "perftest-%s.txt" % dev)
    if os.path.exists(p):
        # bw: op size iters mb_per_s mmsg_per_s cpu; lat: lat size iters
        # median p99 p99.9 cpu; a failed row has "-" for the numbers
        for l in open(p):
            f = l.split()
            if len(f) < 6 or f[0] not in OPS or "-" in f[3:]:
                continue
            x = [float(v) for v in f[3:]]
            if f[0] == "lat":
                v = {"lat_median_us": x[0], "lat_p99_us": x[1],
                     "lat_p99_9_us": x[2], "cpu_rusage_s_per_gb": x[3]}
            else:
                v = {"mb_per_s": x[0], "mmsg_per_s": x[1],
                     "cpu_rusage_s_per_gb": x[2]}
            v["iters"] = int(f[2])
            vals.setdefault((f[0], int(f[1])), {})["perftest"] = v
    # CPU of the whole guest per GB moved: all of it, and net of the
    # tool's empty run of the same operation (its fixed cost: start,
    # connection, registration); none where that empty run is missing
    for (op, size), t in vals.items():
        for tool, v in t.items():
            gb = size * v["iters"] / 1e9
            if (tool, op, size) in ptime:
                v["cpu_rusage_s_per_gb"] = ptime[(tool, op, size)] / gb
            c = cpu.get((tool, op, size))
            if not c:
                continue
            v["cpu_s"], v["wall_s"] = c
            v["cpu_s_per_gb"] = c[0] / gb
            if tool in empty.get(op, {}):
                v["cpu_net_s_per_gb"] = (c[0] - empty[op][tool]) / gb
    return vals, empty


def load_connect(d, devices):
    """krdmactl bench -o conn and cmtime, per device (run once)"""
    def q(v, x=0.5):
        v = sorted(v)
        return v[min(len(v) - 1, int(x * len(v)))] if v else None
    conns = []
    for dev in devices:
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
            c["cmtime_connect_median_us"] = q(setup)
            c["cmtime_connect_p99_us"] = q(setup, 0.99)
            c["cmtime_close_median_us"] = q(down)
        c["ratio"] = div(c.get("krdma_connect_median_us"),
                         c.get("cmtime_connect_median_us"))
        if len(c) > 2:
            conns.append(c)
    return conns


def load_scale(d, devices):
    """krdmactl bench -o scale and cmtime -c N, per device and count"""
    out = []
    for dev in devices:
        p = os.path.join(d, "scale-%s.txt" % dev)
        by = {}
        for l in open(p) if os.path.exists(p) else []:
            f = l.split()
            if len(f) != 6 or f[0] not in ("krdma", "cmtime"):
                continue
            n = int(f[1])
            v = {"setup_s": float(f[2]), "teardown_s": float(f[3])}
            if f[4] != "-":
                v["slab_kb"], v["vmalloc_kb"] = int(f[4]), int(f[5])
            by.setdefault(n, {"device": dev, "conns": n})[f[0]] = v
        for n in sorted(by):
            c = by[n]
            for t in ("krdma", "cmtime"):
                v = c.get(t)
                if v:
                    v["setup_us_per_conn"] = v["setup_s"] * 1e6 / n
                    v["teardown_us_per_conn"] = v["teardown_s"] * 1e6 / n
                    if "slab_kb" in v:
                        v["kb_per_conn"] = (v["slab_kb"] + v["vmalloc_kb"]) / n
            if "krdma" in c and "cmtime" in c:
                c["setup_ratio"] = div(c["krdma"]["setup_s"], c["cmtime"]["setup_s"])
            out.append(c)
    return out


def load_tcp(d):
    tcp = []
    p = os.path.join(d, "iperf3.txt")
    if os.path.exists(p):
        for l in open(p):
            f = l.split()
            if len(f) == 3 and f[1] != "-":
                tcp.append({"size": int(f[0]), "mb_per_s": float(f[1]),
                            "cpu_s_per_gb": float(f[2]) if f[2] != "-" else None})
    return tcp


def load_run(d):
    """One guest run (one kernel): its rows, each metric's median, min and
    max over the repeats, and the ratios krdma/perftest of each repeat"""
    meta = json.load(open(os.path.join(d, "meta.json")))
    meta["host_cpu"] = host_cpu()
    probe = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.realpath(d)))), "kvm-probe")
    try:
        meta["accel"] = open(probe).read().split()[-1]
    except (OSError, IndexError):
        meta.setdefault("accel", "?")
    try:
        meta.update(json.load(open(os.path.join(d, "done.json"))))
    except (OSError, ValueError):
        pass
    reps = sorted((int(m.group(1)), os.path.join(d, m.group(0)))
                  for m in (re.match(r"rep(\d+)$", x) for x in os.listdir(d)) if m)
    if not reps:
        sys.exit("bench: no repeats (rep1/...) in %s: results of an older "
                 "scripts/bench.sh?" % d)
    clk = meta.get("clk_tck", 100)
    rows, empty, empty_by_op = [], {}, {}
    for dev in meta["devices"]:
        per_rep = [load_rep(p, dev, clk) for _, p in reps]
        keys = set()
        for v, _ in per_rep:
            keys |= set(v)
        for key in sorted(keys, key=lambda k: (OPS.index(k[0]), k[1])):
            op, size = key
            per = [v.get(key, {}) for v, _ in per_rep]
            row = {"device": dev, "op": op, "size": size}
            for who in TOOLS:
                runs = [t.get(who) for t in per]
                names = []
                for r in runs:
                    names += [n for n in (r or {}) if n != "iters" and n not in names]
                row[who] = {n: stats([r.get(n) if r else None for r in runs])
                            for n in names}
                row[who]["iters"] = next((r["iters"] for r in runs if r), None)
            row["iters"] = row["krdma"]["iters"] or row["perftest"]["iters"]
            m = "lat_median_us" if op == "lat" else "mb_per_s"
            row["ratio"] = stats([div(t.get("krdma", {}).get(m),
                                      t.get("perftest", {}).get(m)) for t in per])
            row["cpu_ratio"] = stats([div(t.get("krdma", {}).get("cpu_s_per_gb"),
                                          t.get("perftest", {}).get("cpu_s_per_gb"))
                                      for t in per])
            # of the net CPU: only where both are above 0 (below, the
            # row is within the noise of the fixed cost)
            row["cpu_net_ratio"] = stats([
                div(t.get("krdma", {}).get("cpu_net_s_per_gb"),
                    t.get("perftest", {}).get("cpu_net_s_per_gb"))
                if min(t.get(w, {}).get("cpu_net_s_per_gb") or 0 for w in TOOLS) > 0
                else None for t in per])
            rows.append(row)
        ops = sorted({op for _, e in per_rep for op in e}, key=OPS.index)
        # WRITE's (as before), and each operation's
        empty[dev] = {who: stats([e.get("write", {}).get(who) for _, e in per_rep])
                      for who in TOOLS}
        empty_by_op[dev] = {op: {who: stats([e.get(op, {}).get(who) for _, e in per_rep])
                                 for who in TOOLS} for op in ops}
    failed, kfailed = [], []
    for i, p in reps:
        for name, into in (("perftest-failed.txt", failed), ("krdma-failed.txt", kfailed)):
            q = os.path.join(p, name)
            for l in open(q) if os.path.exists(q) else []:
                f = l.split()
                if len(f) == 3:
                    into.append({"repeat": i, "device": f[0], "op": f[1], "size": int(f[2])})
    meta["repeats_found"] = len(reps)
    return {"meta": meta, "rows": rows, "empty_run_cpu_s": empty,
            "empty_run_cpu_s_by_op": empty_by_op,
            "perftest_failed": failed, "krdma_failed": kfailed, "tcp": load_tcp(d),
            "connect": load_connect(d, meta["devices"]),
            "scale": load_scale(d, meta["devices"])}


def vkey(k):
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[.-]", k)]


# The kernels of these runs replace theirs in the json; the others stay
jpath = os.path.join(doc, "benchmarks-results.json")
kernels = {}
try:
    old = json.load(open(jpath))
    if old.get("format") == 2:
        kernels = old["kernels"]
    else:
        print("bench: %s is of an older format: its results are not kept" % jpath,
              file=sys.stderr)
except (OSError, ValueError, AttributeError):
    pass
new = {}
for d in dirs:
    e = load_run(d)
    k = e["meta"]["kernel"]
    if k in new:
        print("bench: two runs of %s: the one in %s is kept" % (k, d), file=sys.stderr)
    new[k] = e
kernels.update(new)
order = sorted(kernels, key=vkey)
# indented, but each innermost list or object (a metric's median, min, max
# and runs) on one line
js = json.dumps({"format": 2, "kernels": {k: kernels[k] for k in order}}, indent=1)
js = re.sub(r"\[[^][{}]*\]", lambda m: " ".join(m.group(0).split()), js)
js = re.sub(r"\{[^{}]*\"median\"[^{}]*\}", lambda m: " ".join(m.group(0).split()), js)
open(jpath, "w").write(js + "\n")

# A kernel's name in titles and file names: its series (6.1), or its
# release when two have the same series
series = {k: (re.match(r"\d+\.\d+", k) or re.match(r".*", k)).group(0) for k in order}
label = {k: series[k] if list(series.values()).count(series[k]) == 1 else k
         for k in order}


def sz(n):
    for u, m in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m and n % m == 0:
            return "%d %s" % (n // m, u)
    return "%d B" % n


def f(x, dec=1):
    return "n/a" if x is None else "%.*f" % (dec, x)


def fc(x):
    """CPU s/GB: three digits or so"""
    if x is None:
        return "n/a"
    return "%.*f" % (0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2, x)


def fn(x):
    """net CPU s/GB: below 0 is noise (the fixed cost varies more)"""
    return "<0 (noise)" if x is not None and x < 0 else fc(x)


def med(st):
    return st["median"] if st else None


def fr(st, dec=2):
    """a ratio's median [min-max], and (n=k of N) when only k of the N
    repeats have one"""
    if not st:
        return "n/a"
    k, n = len([x for x in st["runs"] if x is not None]), len(st["runs"])
    few = " (n=%d of %d)" % (k, n) if k < n else ""
    if st["min"] == st["max"] or k < 2:
        return "%.*f%s" % (dec, st["median"], few)
    return "%.*f [%.*f-%.*f]%s" % (dec, st["median"], dec, st["min"], dec, st["max"], few)


def pair(a, b, fmt=f, *args):
    return "%s / %s" % (fmt(a, *args), fmt(b, *args))


def rng(e, dev, op, lo, hi, key="ratio"):
    """The range of the median ratios of DEV's OP rows from LO to HI bytes;
    for one row its median [min-max]"""
    st = [r[key] for r in e["rows"] if r["device"] == dev and r["op"] == op
          and lo <= r["size"] <= hi and r.get(key)]
    if not st:
        return "n/a"
    if len(st) == 1:
        s = fr(st[0]).split(" ", 1)
        return s[0] + "x" + (" " + s[1] if len(s) > 1 else "")
    a, b = min(s["median"] for s in st), max(s["median"] for s in st)
    # a size whose ratio some repeats lack
    k = min(len([x for x in s["runs"] if x is not None]) for s in st)
    n = max(len(s["runs"]) for s in st)
    few = " (n>=%d of %d)" % (k, n) if k < n else ""
    return (("%.2f-%.2fx" % (a, b)) if "%.2f" % a != "%.2f" % b else "%.2fx" % a) + few


def headline():
    """The summary: rows of ratios, a column per device and kernel"""
    devs = []
    for k in order:
        devs += [d for d in kernels[k]["meta"]["devices"] if d not in devs]
    cols = [(d, k) for d in devs for k in order if d in kernels[k]["meta"]["devices"]]
    batch = kernels[order[-1]]["meta"]["batch"]
    signal = kernels[order[-1]]["meta"].get("signal_every", "1")
    hi, lo = "(higher: krdma faster)", "(lower: krdma faster)"
    what = [
        ("WRITE bandwidth, 64 KiB-8 MiB " + hi, lambda e, d: rng(e, d, "write", 65536, 8 << 20)),
        ("READ bandwidth, 64 KiB-8 MiB " + hi, lambda e, d: rng(e, d, "read", 65536, 8 << 20)),
        ("SEND bandwidth, 64 KiB-1 MiB " + hi, lambda e, d: rng(e, d, "send", 65536, 1 << 20)),
        ("64 B WRITE message rate, batch %s, one in %s signaled %s" % (batch, signal, hi),
         lambda e, d: rng(e, d, "write", 64, 64)),
        ("64 B WRITE latency (median) " + lo, lambda e, d: rng(e, d, "lat", 64, 64)),
        ("CPU per GB (whole guest, net of the empty run), WRITE 64 KiB-8 MiB "
         "(lower: krdma uses less)",
         lambda e, d: rng(e, d, "write", 65536, 8 << 20, "cpu_net_ratio")),
        ("CPU per GB (whole guest, with the fixed cost), WRITE 64 KiB-8 MiB "
         "(lower: krdma uses less)",
         lambda e, d: rng(e, d, "write", 65536, 8 << 20, "cpu_ratio")),
        ("connection setup (median) " + lo, lambda e, d: next(
            ("%.2fx" % c["ratio"] for c in e["connect"]
             if c["device"] == d and c.get("ratio")), "n/a")),
        ("connections kept open together, the most: setup " + lo, lambda e, d: next(
            ("%.2fx (%d)" % (c["setup_ratio"], c["conns"])
             for c in sorted(e.get("scale", []), key=lambda c: -c["conns"])
             if c["device"] == d and c.get("setup_ratio")), "n/a")),
    ]
    hdr = ["%s, %s" % (d, label[k]) for d, k in cols]
    return hdr, [[w] + [fn(kernels[k], d) for d, k in cols] for w, fn in what]


def commit(meta):
    c = meta["commit"]
    return c[:-6][:12] + "-dirty" if c.endswith("-dirty") else c[:12]


def runs_said():
    return "; ".join("%s on %s (commit %s, %s, %s vCPUs, %s repeats)" % (
        k, kernels[k]["meta"]["date"][:10], commit(kernels[k]["meta"]),
        kernels[k]["meta"].get("accel", "?").upper(), kernels[k]["meta"]["cpus"],
        kernels[k]["meta"].get("repeat", 1)) for k in order)


def list_table(L, hdr, rows):
    L += [".. list-table::", "   :header-rows: 1", ""]
    for r in [hdr] + rows:
        L.append("   * - " + "\n     - ".join(r))
    L.append("")


L = [".. This file is generated by scripts/bench.sh --report (make bench); do not edit.", ""]
L.append("Runs: %s. Every ratio is krdma / perftest, taken in each repeat (the "
         "runs interleave row by row: a row's krdma run, then its perftest "
         "run, the other way round in even repeats), then their median, with "
         "their min-max in brackets, and (n=k of N) where only k of the N "
         "repeats have both. Of MB/s for write, read and send (below 1: "
         "krdma is slower), of the median one-way latency for lat (above 1: "
         "krdma is slower), of CPU per GB for CPU (above 1: krdma uses more). "
         "In the summary a range is that of the sizes' medians." % runs_said())
L.append("")
t = "Summary"
L += [t, "-" * len(t), ""]
hdr, hrows = headline()
list_table(L, ["krdma / perftest"] + hdr, hrows)
for k in order:
    e, meta = kernels[k], kernels[k]["meta"]
    t = "Linux %s (%s)" % (label[k], k)
    L += [t, "-" * len(t), ""]
    took = ""
    if meta.get("seconds"):
        took = " The guest step took %d s" % meta["seconds"]
        if meta.get("repeat_seconds"):
            took += " (the repeats %s s, the rest after them)" % ", ".join(
                str(s) for s in meta["repeat_seconds"])
        took += "."
    L.append("Measured %s on commit ``%s``; guest kernel %s (%s), %s vCPUs, "
             "QEMU accel %s; host CPU %s. %s repeats of every row.%s" % (
                 meta["date"], meta["commit"], k, meta["machine"], meta["cpus"],
                 meta.get("accel", "?"), meta.get("host_cpu", "?"),
                 meta.get("repeat", 1), took))
    L.append("Depth %s, batch %s, iterations per size: %s bytes / size within "
             "[%s, %s] (a multiple of the batch but for lat). One WRITE or SEND "
             "in %s asks for a completion, for both (krdmactl bench -u, "
             "perftest -Q: cq_mod); every READ does (krdmactl keeps READs "
             "signaled; ib_read_bw -Q 1)." % (
                 meta["depth"], meta["batch"], meta["bytes"], meta["min_iters"],
                 meta["iters"], meta.get("signal_every", "1")))
    L.append("")
    st = meta.get("status")
    if st is None:
        L.append("**The guest step did not finish** (no done.json): these are "
                 "the rows it wrote.")
        L.append("")
    elif st != 0:
        L.append("**The guest step failed** (status %s): a run of krdma, a "
                 "connection row or TCP failed; see below and its logs." % st)
        L.append("")
    for key, who in (("krdma_failed", "krdma"), ("perftest_failed", "perftest")):
        fails = {}
        for x in e.get(key, []):
            fails.setdefault((x["device"], x["op"], x["size"]), []).append(str(x["repeat"]))
        if fails:
            L.append("%s failed on: %s; a row's ratio is of the repeats where both "
                     "ran (n/a if none)." % (who, ", ".join("%s %s %s (repeat %s)" % (
                         d, o, sz(s), ", ".join(r)) for (d, o, s), r in sorted(fails.items()))))
            L.append("")
    em = e.get("empty_run_cpu_s_by_op") or {
        d: {"write": v} for d, v in e.get("empty_run_cpu_s", {}).items()}
    if any(v.get(w) for x in em.values() for v in x.values() for w in TOOLS):
        def er(st):
            if not st:
                return "n/a"
            return "%s s [%s-%s]" % (f(st["median"], 2), f(st["min"], 2), f(st["max"], 2))
        L.append("The fixed cost of a run: the whole guest's CPU time for a "
                 "run of %s operations of 64 B (from before its server starts to "
                 "after it exits, both sides; median [min-max] of the repeats): "
                 "%s. The *net* CPU per GB is a row's CPU time less that of the "
                 "same tool's empty run of the same operation in the same repeat, "
                 "per GB (n/a for an operation without an empty run); where a "
                 "row moves little, it is within the noise (<0)." % (
                     meta.get("empty_iters", "?"), "; ".join(
                         "%s %s: krdma %s, perftest %s" % (
                             d, op, er(v.get("krdma")), er(v.get("perftest")))
                         for d, x in em.items() for op, v in x.items())))
        L.append("")
    L += [".. image:: benchmarks-%s.png" % label[k],
          "   :alt: bandwidth of krdma, perftest and TCP against message size, %s" % k, ""]
    for dev in meta["devices"]:
        t = "%s (%s), %s" % (dev, "RoCE" if dev.startswith("rxe") else "iWARP", label[k])
        L += [t, "~" * len(t), ""]
        hdr = ["op", "size", "iters", "MB/s krdma / perftest", "ratio",
               "Mmsg/s krdma / perftest", "krdma lat med / p99 us",
               "perftest lat med / p99 us",
               "CPU s/GB, whole guest, krdma / perftest", "CPU ratio",
               "CPU s/GB net of the empty run, krdma / perftest", "net CPU ratio",
               "CPU s/GB, client process (user + sys), krdma / perftest"]
        rows = []
        for r in e["rows"]:
            if r["device"] != dev:
                continue
            K, P = r["krdma"], r["perftest"]
            g = lambda who, n: med(who.get(n))
            ld = 1 if r["op"] == "lat" else 0
            rows.append([
                r["op"], sz(r["size"]), str(r.get("iters") or "n/a"),
                pair(g(K, "mb_per_s"), g(P, "mb_per_s")), fr(r["ratio"]),
                pair(g(K, "mmsg_per_s"), g(P, "mmsg_per_s"), f, 4),
                pair(g(K, "lat_median_us"), g(K, "lat_p99_us"), f, ld),
                pair(g(P, "lat_median_us"), g(P, "lat_p99_us"), f, ld),
                pair(g(K, "cpu_s_per_gb"), g(P, "cpu_s_per_gb"), fc),
                fr(r["cpu_ratio"]),
                pair(g(K, "cpu_net_s_per_gb"), g(P, "cpu_net_s_per_gb"), fn),
                fr(r.get("cpu_net_ratio")),
                pair(g(K, "cpu_rusage_s_per_gb"), g(P, "cpu_rusage_s_per_gb"), fc)])
        list_table(L, hdr, rows)
    if e["tcp"]:
        t = "TCP (iperf3, one stream, same veth), %s" % label[k]
        L += [t, "~" * len(t), ""]
        list_table(L, ["write size", "MB/s", "CPU s/GB (the sending iperf3 process only)"],
                   [[sz(x["size"]), f(x["mb_per_s"]), f(x["cpu_s_per_gb"], 2)]
                    for x in e["tcp"]])
    if e["connect"]:
        t = "Connection setup (one connection at a time), %s" % label[k]
        L += [t, "~" * len(t), ""]
        L.append("krdma: ``KRDMA_IOC_CONNECT`` from the call to its return (address and "
                 "route resolution, QP, the CM exchange with krdma's header), and the "
                 "close of the connection's handle. rdma_cm: ``cmtime -c 1`` (rdmacm-utils), "
                 "the sum of its create id, resolve addr, resolve route, create qp and "
                 "connect steps, and of disconnect and destroy; one run per connection. "
                 "*ratio* is krdma / rdma_cm of the median setup time (above 1: krdma is "
                 "slower). Run once, after the repeats.")
        L.append("")
        list_table(L, ["device", "connections (krdma / cmtime)",
                       "krdma setup med / p99 us", "rdma_cm setup med / p99 us", "ratio",
                       "krdma close med us", "rdma_cm teardown med us"],
                   [[c["device"], "%s / %s" % (c.get("krdma_conns", 0), c.get("cmtime_conns", 0)),
                     pair(c.get("krdma_connect_median_us"), c.get("krdma_connect_p99_us"), f, 0),
                     pair(c.get("cmtime_connect_median_us"), c.get("cmtime_connect_p99_us"), f, 0),
                     f(c.get("ratio"), 2), f(c.get("krdma_close_median_us"), 0),
                     f(c.get("cmtime_close_median_us"), 0)] for c in e["connect"]])
    if e.get("scale"):
        t = "Connection scale (connections kept open together), %s" % label[k]
        L += [t, "~" * len(t), ""]
        L.append("krdma: ``krdmactl bench ADDR -o scale -n N``: N connections to a listener "
                 "of the same process, each ``KRDMA_IOC_CONNECT`` then ``KRDMA_IOC_ACCEPT``, "
                 "one after the other, the smallest queues; all kept open, then every handle "
                 "of both ends destroyed. rdma_cm: ``cmtime -c N`` (its server and client), "
                 "the sum of its client's create id, resolve addr, resolve route, create qp "
                 "and connect steps (each done for all N at once), and of disconnect and "
                 "destroy. Memory: the kernel's Slab plus VmallocUsed (``/proc/meminfo``) "
                 "at their highest during the run, sampled every 5 ms, less before it, per "
                 "connection (both of its ends, both in this guest). *ratio* is krdma / "
                 "rdma_cm of the setup time (above 1: krdma is slower). Run once, after the "
                 "repeats.")
        L.append("")

        def sc(c, t, key, nd=0):
            return f(c.get(t, {}).get(key), nd)
        list_table(L, ["device", "connections", "krdma setup s (us/conn)",
                       "rdma_cm setup s (us/conn)", "ratio", "krdma KiB/conn",
                       "rdma_cm KiB/conn", "krdma teardown s (us/conn)",
                       "rdma_cm teardown s (us/conn)"],
                   [[c["device"], str(c["conns"]),
                     "%s (%s)" % (sc(c, "krdma", "setup_s", 3), sc(c, "krdma", "setup_us_per_conn")),
                     "%s (%s)" % (sc(c, "cmtime", "setup_s", 3), sc(c, "cmtime", "setup_us_per_conn")),
                     f(c.get("setup_ratio"), 2),
                     sc(c, "krdma", "kb_per_conn", 1), sc(c, "cmtime", "kb_per_conn", 1),
                     "%s (%s)" % (sc(c, "krdma", "teardown_s", 3), sc(c, "krdma", "teardown_us_per_conn")),
                     "%s (%s)" % (sc(c, "cmtime", "teardown_s", 3), sc(c, "cmtime", "teardown_us_per_conn"))]
                    for c in e["scale"]])
open(os.path.join(doc, "benchmarks-results.rst"), "w").write("\n".join(L))
wrote = ["benchmarks-results.rst", "benchmarks-results.json"]

# README.md's summary, when the docs are the tree's own
if os.path.realpath(doc) == os.path.realpath(os.path.join(repo, "Documentation")):
    rp = os.path.join(repo, "README.md")
    a, b = "<!-- bench-headline -->", "<!-- /bench-headline -->"
    try:
        t = open(rp).read()
    except OSError:
        t = ""
    i, j = t.find(a), t.find(b)
    if 0 <= i < j:
        hdr, hrows = headline()
        md = ["Latest runs: %s. Ratios krdma / perftest, the median of the "
              "repeats (one row) or the range of the sizes' medians; soft "
              "devices, so these measure CPU paths:" % runs_said(), "",
              "| | " + " | ".join(hdr) + " |", "|---" * (len(hdr) + 1) + "|"]
        md += ["| " + " | ".join(r) + " |" for r in hrows]
        open(rp, "w").write(t[:i + len(a)] + "\n" + "\n".join(md) + "\n" + t[j:])
        wrote.append("../README.md")
    else:
        print("bench: no %s ... %s in %s: its table is not updated" % (a, b, rp),
              file=sys.stderr)

# A plot per kernel: bandwidth (median, min-max bars) against size
if plot:
    term = ("set terminal pngcairo size 1200,650 noenhanced"
            if os.system("gnuplot -e 'set terminal pngcairo' 2>/dev/null") == 0
            else "set terminal png size 1200,650")
    tmp = tempfile.mkdtemp(prefix="krdma-bench-")
    for k in order:
        e, meta = kernels[k], kernels[k]["meta"]
        dat = os.path.join(tmp, "plot-%s.dat" % label[k])
        series = []
        with open(dat, "w") as g:
            for dev in meta["devices"]:
                for op in ("write", "read", "send"):
                    for who in TOOLS:
                        pts = [(r["size"], r[who]["mb_per_s"]) for r in e["rows"]
                               if r["device"] == dev and r["op"] == op
                               and r[who].get("mb_per_s")]
                        if not pts:
                            continue
                        g.write("# %s %s %s\n" % (dev, op, who))
                        for s, v in pts:
                            g.write("%d %f %f %f\n" % (s, v["median"], v["min"], v["max"]))
                        g.write("\n\n")
                        series.append("%s %s %s" % (who, dev, op))
            if e["tcp"]:
                g.write("# tcp\n")
                for x in e["tcp"]:
                    g.write("%d %f %f %f\n" % (x["size"], x["mb_per_s"], x["mb_per_s"],
                                               x["mb_per_s"]))
                g.write("\n\n")
                series.append("TCP iperf3")
        if not series:
            continue
        png = os.path.join(doc, "benchmarks-%s.png" % label[k])
        gp = [term, "set output '%s'" % png,
              "set title 'krdma (/dev/krdma) vs perftest, MB/s: median of %s (bars: "
              "min-max); Linux %s, %s, %s'" % (
                  meta.get("repeat", 1), k, meta["date"][:10], commit(meta)),
              "set logscale x 2", "set logscale y 10", "set format x '%.0b %BB'",
              "set key outside right", "set xlabel 'message size (bytes)'",
              "set ylabel 'MB/s (10^6 B/s)'", "set grid",
              "plot " + ", ".join(
                  "'%s' index %d with yerrorlines %s title '%s'" % (
                      dat, i, "dt 2" if s.startswith("perftest") else "dt 1", s)
                  for i, s in enumerate(series))]
        open(os.path.join(tmp, "plot-%s.gp" % label[k]), "w").write("\n".join(gp) + "\n")
        if os.system("gnuplot '%s'" % os.path.join(tmp, "plot-%s.gp" % label[k])) != 0:
            print("bench: gnuplot failed (%s kept)" % tmp, file=sys.stderr)
            continue
        wrote.append(os.path.basename(png))
    if all(os.path.exists(os.path.join(doc, "benchmarks-%s.png" % label[k])) for k in order):
        for p in glob.glob(os.path.join(tmp, "*")):
            os.unlink(p)
        os.rmdir(tmp)

print("bench: wrote %s in %s" % (", ".join(wrote), doc))
for k in new:
    print("== %s" % k)
    for r in kernels[k]["rows"]:
        print("%-5s %-5s %9d  ratio %-20s CPU ratio %-20s net %s" % (
            r["device"], r["op"], r["size"], fr(r["ratio"]), fr(r["cpu_ratio"]),
            fr(r.get("cpu_net_ratio"))))
    st = kernels[k]["meta"].get("status")
    if st != 0:
        print("bench: %s: the guest step %s" % (
            k, "did not finish" if st is None else "failed (status %s)" % st))
    for c in kernels[k]["connect"]:
        print("%-5s conn  setup median krdma %s us, rdma_cm %s us  ratio %s" % (
            c["device"], f(c.get("krdma_connect_median_us"), 0),
            f(c.get("cmtime_connect_median_us"), 0), f(c.get("ratio"), 2)))
    for c in kernels[k].get("scale", []):
        print("%-5s scale %5d together: setup us/conn krdma %s, rdma_cm %s  ratio %s; "
              "KiB/conn krdma %s, rdma_cm %s; teardown us/conn krdma %s, rdma_cm %s" % (
                  c["device"], c["conns"],
                  f(c.get("krdma", {}).get("setup_us_per_conn"), 0),
                  f(c.get("cmtime", {}).get("setup_us_per_conn"), 0),
                  f(c.get("setup_ratio"), 2),
                  f(c.get("krdma", {}).get("kb_per_conn"), 1),
                  f(c.get("cmtime", {}).get("kb_per_conn"), 1),
                  f(c.get("krdma", {}).get("teardown_us_per_conn"), 0),
                  f(c.get("cmtime", {}).get("teardown_us_per_conn"), 0)))
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
REPEAT=${BENCH_REPEAT:-${KRDMA_BENCH_REPEAT:-3}}
OPS=${BENCH_OPS:-${KRDMA_BENCH_OPS:-write read send lat}}
SIZES=${BENCH_SIZES:-${KRDMA_BENCH_SIZES:-64-8M}}
LAT_SIZES=${BENCH_LAT_SIZES:-${KRDMA_BENCH_LAT_SIZES:-64-64K}}
DEPTH=${BENCH_DEPTH:-${KRDMA_BENCH_DEPTH:-64}}
BATCH=${BENCH_BATCH:-${KRDMA_BENCH_BATCH:-16}}
ITERS=${BENCH_ITERS:-${KRDMA_BENCH_ITERS:-4096}}
MIN_ITERS=${BENCH_MIN_ITERS:-${KRDMA_BENCH_MIN_ITERS:-16}}
BYTES=${BENCH_BYTES:-${KRDMA_BENCH_BYTES:-32M}}
EMPTY=${BENCH_EMPTY:-${KRDMA_BENCH_EMPTY:-1}}
DEVS=${BENCH_DEVS:-${KRDMA_BENCH_DEVS:-rxe0:198.18.0.1 siw0:198.18.1.1}}
CONNS=${BENCH_CONNS:-${KRDMA_BENCH_CONNS:-30}}
SCALE=${BENCH_SCALE:-${KRDMA_BENCH_SCALE:-10 100 1000}}
[[ $SCALE == 0 ]] && SCALE=
TCP=${BENCH_TCP:-${KRDMA_BENCH_TCP:-1}}
RING=${BENCH_RING:-${KRDMA_BENCH_RING:-0}}
ringopt=()
[[ $RING == 1 ]] && ringopt=(-R)
SIGNAL=${BENCH_SIGNAL:-${KRDMA_BENCH_SIGNAL:-$BATCH}}
KPORT=18516
PPORT=18600

log() { echo "bench: $*" >&2; }

[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || {
	log "BENCH_REPEAT=$REPEAT: give a count, at least 1"
	exit 2
}
for n in $SCALE; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || {
		log "BENCH_SCALE: $n is not a count of connections"
		exit 2
	}
done
for op in $OPS; do
	[[ $op == @(write|read|send|lat) ]] || {
		log "BENCH_OPS: $op is none of write, read, send, lat"
		exit 2
	}
done
# perftest refuses a post list (-l BATCH) that is not a multiple of its
# cq_mod (-Q); krdmactl a signaled one in more than the depth
if ! [[ $SIGNAL =~ ^[1-9][0-9]*$ ]] || ((BATCH % SIGNAL != 0 || SIGNAL > DEPTH)); then
	log "BENCH_SIGNAL=$SIGNAL: give a divisor of the batch ($BATCH), at most the depth ($DEPTH)"
	exit 2
fi
# The operations with an empty run
case $EMPTY in
0) EMPTY_OPS= ;;
1) EMPTY_OPS=$OPS ;;
*) EMPTY_OPS=$EMPTY ;;
esac
read -ra empty_ops <<<"$EMPTY_OPS"
for op in $EMPTY_OPS; do
	[[ $op == @(write|read|send|lat) ]] || {
		log "BENCH_EMPTY: $op is none of 0, 1, write, read, send, lat"
		exit 2
	}
done

# shellcheck source=scripts/bench-lib.sh
. "$here/bench-lib.sh"
maxsize=0
for s in $(sizes_of "$SIZES") $(sizes_of "$LAT_SIZES"); do
	((s > maxsize)) && maxsize=$s
done
# The empty run: DEPTH 64 B operations (a multiple of the batch)
EMPTY_N=$(((DEPTH + BATCH - 1) / BATCH * BATCH))

cpus=$(nproc)
cat >"$out/meta.json" <<EOM
{"date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "commit": "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo -dirty)",
 "kernel": "$(uname -r)", "machine": "$(uname -m)", "cpus": $cpus,
 "guest_cpu": "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)",
 "devices": [$(for dv in $DEVS; do printf '"%s",' "${dv%%:*}"; done | sed 's/,$//')],
 "repeat": $REPEAT, "ops": "$OPS", "depth": $DEPTH, "batch": $BATCH,
 "iters": $ITERS, "min_iters": $MIN_ITERS, "bytes": $(bytes_of "$BYTES"),
 "sizes": "$SIZES", "lat_sizes": "$LAT_SIZES",
 "empty_iters": $([[ -n $EMPTY_OPS ]] && echo "$EMPTY_N" || echo null),
 "empty_ops": "${empty_ops[*]}", "order": "abba",
 "clk_tck": $(getconf CLK_TCK), "ring": "$RING", "signal_every": "$SIGNAL"}
EOM

# A run's window, the same for both tools: win_start before its server
# starts, win_stop after its server exits; $win is then "TICKS USEC" of
# the whole guest between
win_start() {
	cpu_now
	w_ticks=$ticks w_usec=$usec
}
win_stop() {
	cpu_now
	win="$((ticks - w_ticks)) $((usec - w_usec))"
}

# Wait up to 10 s for the server PID writing LOG to print a line that
# matches PATTERN (a glob); 1 if it does not (or exits first)
wait_line() { # log pid pattern
	local i l
	for ((i = 0; i < 200; i++)); do
		# (the server's shell may not have opened it yet)
		[[ -e $1 ]] && while read -r l; do
			# shellcheck disable=SC2053 # a glob on purpose
			[[ $l == $3 ]] && return 0
		done <"$1"
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# the krdmactl bench server (PID) writing LOG says that it listens
wait_listening() { # log pid
	wait_line "$1" "$2" '*listening on*'
}
# An rdma_cm listener on PORT, up to 3 s while PID lives: cmtime's server
# prints nothing when it listens, rdma(8) shows its cm_id. Without the
# rdma tool, or once it never showed one, 0.3 s instead (as before)
cm_probe=1
wait_cm_listen() { # port pid
	local i
	if ((cm_probe)) && command -v rdma >/dev/null; then
		for ((i = 0; i < 60; i++)); do
			rdma res show cm_id 2>/dev/null | grep -Eq "LISTEN.*:$1([^0-9]|\$)" && return 0
			kill -0 "$2" 2>/dev/null || return 1
			sleep 0.05
		done
		log "rdma res show cm_id shows no listener on port $1: a 0.3 s wait instead"
		cm_probe=0
	fi
	sleep 0.3
	kill -0 "$2" 2>/dev/null
}
# A hang: timeout's status (124; 137 when it had to kill)
hung() { (($1 == 124 || $1 == 137)); }

# The name of an empty run of OP in cpu-DEV.txt and time-DEV.txt: "empty"
# for WRITE (as before), empty-OP for the others
empty_name() { # op
	[[ $1 == write ]] && echo empty || echo "empty-$1"
}

# krdmactl bench against its own server, one operation and size (one
# process each, as perftest), or with N exactly N operations (an empty
# run): its JSON into FILE, "krdma OP SIZE ITERS $win" into cpu-DEV.txt
# and "krdma OP SIZE ITERS USER SYS" (the client process, the shell's
# time, as perftest's) into time-DEV.txt; rc
krdma_run() { # dev addr op size file [N]
	local dev=$1 addr=$2 op=$3 size=$4 file=$5 n=${6-} srv=$out/krdma-srv.tmp
	local rc src spid u s name=$3 iters it=(-n "$ITERS" -m "$MIN_ITERS")
	local TIMEFORMAT='%U %S'
	iters=$(iters_of "$size" "$op")
	if [[ -n $n ]]; then
		it=(-n "$n" -m "$n")
		name=$(empty_name "$op") iters=$n
	fi
	: >"$srv"
	win_start
	timeout -k 5 120 "$K" bench -l -c 1 -p $KPORT -S "$maxsize" "${ringopt[@]}" \
		>"$srv" 2>&1 &
	spid=$!
	if ! wait_listening "$srv" $spid; then
		log "$dev: the krdmactl bench server did not say it listens: no $name $size"
		kill $spid 2>/dev/null
		wait $spid 2>/dev/null
		{
			echo "### $name $size: the server did not say it listens"
			cat "$srv"
		} >>"$rdir/krdma-$dev-server.log"
		return 1
	fi
	{ time timeout -k 5 120 "$K" bench "$addr" -p $KPORT -j -o "$op" -s "$size" \
		-d "$DEPTH" -b "$BATCH" "${it[@]}" -B "$BYTES" -u "$SIGNAL" "${ringopt[@]}" \
		>"$file" 2>>"$rdir/errors.log"; } 2>"$out/k-time"
	rc=$?
	# a client that failed leaves its server waiting: end it
	((rc == 0)) || kill $spid 2>/dev/null
	wait $spid
	src=$?
	win_stop
	{
		echo "### $name $size client rc $rc server rc $src"
		cat "$srv"
	} >>"$rdir/krdma-$dev-server.log"
	((rc == 0 && src == 0)) || return 1
	read -r u s <"$out/k-time"
	echo "krdma $name $size $iters $win" >>"$rdir/cpu-$dev.txt"
	echo "krdma $name $size $iters $u $s" >>"$rdir/time-$dev.txt"
}

# perftest: server then client; the client's output in pt-client.log, its
# user and system time in pt-time, the window from before the server's
# start to its exit in $win; rc (non-zero too when the server failed)
pt_once() { # tool dev addr args...
	local tool=$1 dev=$2 addr=$3 rc src spid try
	local TIMEFORMAT='%U %S'
	shift 3
	: >"$out/pt-client.log"
	win_start
	# line-buffered, so that its "Waiting for client to connect" is seen
	stdbuf -oL timeout -k 5 40 "$tool" -R -d "$dev" -p $PPORT -F "$@" \
		>"$out/pt-server.log" 2>&1 &
	spid=$!
	if ! wait_line "$out/pt-server.log" $spid '*Waiting for client*'; then
		kill $spid 2>/dev/null
		wait $spid 2>/dev/null
		win_stop
		echo "(its server did not say that it waits for a client: no client run)" \
			>"$out/pt-client.log"
		pt_server_log "$dev" "$tool" "no client" "-"
		return 125
	fi
	for try in 1 2; do
		{ time timeout -k 5 30 "$tool" -R -d "$dev" -p $PPORT -F "$@" "$addr" \
			>"$out/pt-client.log" 2>&1; } 2>"$out/pt-time"
		rc=$?
		# perftest says it waits just before it listens: a client refused
		# (failed before any numbers, not hung, its server still waiting)
		# runs once more
		if ((rc == 0 || try == 2)) || hung $rc || ! kill -0 $spid 2>/dev/null ||
			grep -q '#bytes' "$out/pt-client.log"; then
			break
		fi
		{
			echo "### $tool $dev: client refused? (rc $rc) once more"
			cat "$out/pt-client.log"
		} >>"$rdir/perftest-$dev.log"
		sleep 0.2
	done
	# a client that failed leaves its server waiting: end it
	((rc == 0)) || kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	src=$?
	win_stop
	pt_server_log "$dev" "$tool" "$rc" "$src"
	if ((rc == 0 && src != 0)); then
		echo "(its server failed: exit $src)" >>"$out/pt-client.log"
		rc=126
	fi
	return $rc
}
# each perftest server's output, per repeat
pt_server_log() { # dev tool client_rc server_rc
	{
		echo "### $2 $1 client rc $3 server rc $4"
		cat "$out/pt-server.log"
	} >>"$rdir/perftest-$1-server.log"
}

# one perftest row: "op size iters a b c cpu" into perftest-DEV.txt and
# "perftest OP SIZE ITERS $win" into cpu-DEV.txt; op empty-OP (or empty:
# WRITE): the empty run of OP (64 B, N operations)
pt_row() { # op dev addr size iters
	local op=$1 dev=$2 addr=$3 size=$4 n=$5 tool try line cpu u s base name=$1
	local -a args
	base=${op#empty-}
	[[ $op == empty ]] && base="write"
	[[ $op == empty* ]] && name=$(empty_name "$base")
	# the same signaling as krdmactl's: one WRITE or SEND in SIGNAL, every
	# READ (-l alone would make cq_mod the batch, for READs too)
	case $base in
	write) tool=ib_write_bw args=(-t "$DEPTH" -l "$BATCH" -Q "$SIGNAL") ;;
	read) tool=ib_read_bw args=(-t "$DEPTH" -l "$BATCH" -Q 1) ;;
	send) tool=ib_send_bw args=(-t "$DEPTH" -r "$DEPTH" -l "$BATCH" -Q "$SIGNAL") ;;
	lat) tool=ib_write_lat args=() ;;
	esac
	for try in 1 2; do
		pt_once $tool "$dev" "$addr" -s "$size" -n "$n" "${args[@]}"
		local rc=$?
		{
			echo "### $tool $dev $size $n try $try rc $rc"
			cat "$out/pt-client.log"
		} >>"$rdir/perftest-$dev.log"
		# bogus numbers follow this warning: run once more
		if ((rc == 0)) && ! grep -q 'Correlation coefficient' "$out/pt-client.log"; then
			break
		fi
		# a hang (timeout) is not retried: it would hang again
		((try == 2)) || hung $rc && {
			echo "$name $size $n - - - -" >>"$rdir/perftest-$dev.txt"
			return 1
		}
	done
	read -r u s <"$out/pt-time"
	# the numbers line starts with the size
	line=$(awk -v s="$size" '$1 == s && NF >= 5 { print; exit }' "$out/pt-client.log")
	[[ -n $line ]] || {
		echo "$name $size $n - - - -" >>"$rdir/perftest-$dev.txt"
		return 1
	}
	echo "perftest $name $size $n $win" >>"$rdir/cpu-$dev.txt"
	echo "perftest $name $size $n $u $s" >>"$rdir/time-$dev.txt"
	cpu=$(awk -v u="$u" -v s="$s" -v b="$size" -v n="$n" 'BEGIN { printf "%.6f", (u + s) / (b * n / 1e9) }')
	if [[ $base == lat ]]; then
		# bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
		# shellcheck disable=SC2086 # split on purpose
		set -- $line
		echo "$name $size $n $5 $8 $9 $cpu" >>"$rdir/perftest-$dev.txt"
	else
		# bytes iters bw_peak bw_avg(MiB/s, 2 decimals) msg_rate(Mpps, 6
		# decimals): MB/s (10^6 B/s) from whichever of the two is rounded
		# less (the message rate for small sizes, MiB/s x 1.048576 for
		# large), the message rate from that MB/s
		# shellcheck disable=SC2086 # split on purpose
		set -- $line
		awk -v op="$name" -v s="$size" -v n="$n" -v bw="$4" -v r="$5" -v c="$cpu" \
			'BEGIN {
				mb = r * s
				if (bw > 0 && (r <= 0 || 0.005 / bw < 0.0000005 / r))
					mb = bw * 1.048576
				printf "%s %d %d %.3f %.6f %s\n", op, s, n, mb, mb / s, c
			}' >>"$rdir/perftest-$dev.txt"
	fi
}

# cmtime's setup and teardown in FILE (its "step: total_ms max_ms min_us
# us_per_conn" lines), each the sum of its steps' total_ms times UNIT:
# setup is create id, resolve addr, resolve route, create qp and connect,
# teardown is disconnect and destroy. "setup teardown", or nothing when a
# setup step is missing
cmtime_totals() { # file unit
	awk -F: -v unit="$2" '
		{ step = $1; gsub(/^ +| +$/, "", step); split($2, v, " ") }
		step ~ /^(create id|resolve addr|resolve route|create qp|connect)$/ { up += v[1]; k++ }
		step ~ /^(disconnect|destroy)$/ { down += v[1] }
		END { if (k == 5) printf "%.6f %.6f\n", up * unit, down * unit }' "$1"
}

# Connection setup, one connection at a time: krdma, then rdma_cm's own
# (cmtime -c 1 per run)
conn_run() { # dev addr
	local dev=$1 addr=$2 i rc src spid st=0 srv=$out/krdma-srv.tmp
	: >"$srv"
	timeout -k 5 300 "$K" bench -l -c "$CONNS" -p $KPORT >"$srv" 2>&1 &
	spid=$!
	if wait_listening "$srv" $spid; then
		timeout -k 5 300 "$K" bench "$addr" -p $KPORT -j -o conn -n "$CONNS" \
			>"$out/krdma-$dev-conn-0.json" 2>>"$out/errors.log"
		rc=$?
	else
		log "$dev: the krdmactl bench server did not say it listens: no conn rows"
		rc=1
	fi
	((rc == 0)) || kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	src=$?
	{
		echo "### conn $CONNS client rc $rc server rc $src"
		cat "$srv"
	} >>"$out/krdma-$dev-server.log"
	((rc == 0 && src == 0)) || {
		log "$dev: krdmactl bench -o conn failed (client $rc, server $src)"
		rm -f "$out/krdma-$dev-conn-0.json"
		st=1
	}
	command -v cmtime >/dev/null || return 1
	: >"$out/cmtime-$dev.txt"
	for ((i = 0; i < CONNS; i++)); do
		timeout -k 5 30 cmtime -b "$addr" -p $PPORT -c 1 >"$out/cm-server.log" 2>&1 &
		spid=$!
		if wait_cm_listen $PPORT $spid; then
			timeout -k 5 30 cmtime -s "$addr" -p $PPORT -c 1 >"$out/cm-client.log" 2>&1
			rc=$?
		else
			echo "(its server is gone: no client run)" >"$out/cm-client.log"
			rc=125
		fi
		# cmtime -b serves until it is killed (it does not exit after
		# its -c connections): its status says nothing
		kill $spid 2>/dev/null
		wait $spid 2>/dev/null
		src=$?
		{
			echo "### cmtime $dev run $i rc $rc server rc $src"
			cat "$out/cm-client.log"
		} >>"$out/cmtime-$dev.log"
		((rc == 0)) || continue
		# setup and teardown in us
		cmtime_totals "$out/cm-client.log" 1000 >>"$out/cmtime-$dev.txt"
	done
	[[ -s $out/cmtime-$dev.txt ]] || st=1
	return $st
}

# The peak growth of the kernel's Slab and VmallocUsed (/proc/meminfo, KiB)
# over its value when this starts, sampled every 5 ms until STOP exists:
# "slab_kb vmalloc_kb" (at the sample where their sum was highest) into
# OUT; OUT.ready once the baseline is taken
mem_sampler() { # out stop
	local i
	rm -f "$1" "$1.ready" "$2"
	python3 - "$1" "$2" <<'EOP' &
import os, sys, time
def rd():
    v = {}
    for l in open("/proc/meminfo"):
        k, x = l.split(":", 1)
        if k in ("Slab", "VmallocUsed"):
            v[k] = int(x.split()[0])
    return v["Slab"], v["VmallocUsed"]
s0, v0 = rd()
ps = pv = 0
open(sys.argv[1] + ".ready", "w").close()
while not os.path.exists(sys.argv[2]):
    s, v = rd()
    if s - s0 + v - v0 > ps + pv:
        ps, pv = s - s0, v - v0
    time.sleep(0.005)
open(sys.argv[1], "w").write("%d %d\n" % (ps, pv))
EOP
	msampler=$!
	for ((i = 0; i < 200; i++)); do
		[[ -e $1.ready ]] && return 0
		kill -0 $msampler 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# (not in a subshell: it waits for the sampler) mres="slab_kb vmalloc_kb"
# or "- -"
mem_sampler_stop() { # out stop
	: >"$2"
	wait $msampler 2>/dev/null
	mres="- -"
	[[ -s $1 ]] && read -r mres <"$1"
	rm -f "$1" "$1.ready" "$2"
}

# Connections kept open together, for each count of SCALE: krdmactl bench
# -o scale (its own listener: both ends in this guest) and cmtime -c N
# (its server and client, both here), each with the memory sampler.
# scale-DEV.txt: "krdma N setup_s teardown_s slab_kb vmalloc_kb" and
# "cmtime N setup_s teardown_s slab_kb vmalloc_kb" lines (cmtime: the sum
# of its client's step totals: create id, resolve addr, resolve route,
# create qp, connect; and disconnect, destroy)
scale_run() { # dev addr
	local dev=$1 addr=$2 n rc spid st=0 mem=$out/mem.tmp stop=$out/mem.stop m t
	: >"$out/scale-$dev.txt"
	for n in $SCALE; do
		if mem_sampler "$mem" "$stop"; then
			timeout -k 5 600 "$K" bench "$addr" -p $KPORT -o scale -n "$n" -t 30s -j \
				>"$out/krdma-$dev-scale-$n.json" 2>>"$out/errors.log"
			rc=$?
			mem_sampler_stop "$mem" "$stop"
			m=$mres
		else
			log "$dev: the memory sampler did not start: no scale rows"
			return 1
		fi
		if ((rc == 0)); then
			python3 - "$out/krdma-$dev-scale-$n.json" "$n" "$m" >>"$out/scale-$dev.txt" <<'EOP' || st=1
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["op"] == "scale"][0]
print("krdma", sys.argv[2], "%.6f %.6f" % (r["setup_s"], r["teardown_s"]), sys.argv[3])
EOP
		else
			log "$dev: krdmactl bench -o scale -n $n failed (rc $rc; see errors.log)"
			st=1
		fi
		command -v cmtime >/dev/null || { st=1; continue; }
		timeout -k 5 600 cmtime -b "$addr" -p $PPORT -c "$n" >"$out/cm-server.log" 2>&1 &
		spid=$!
		if wait_cm_listen $PPORT $spid && mem_sampler "$mem" "$stop"; then
			timeout -k 5 600 cmtime -s "$addr" -p $PPORT -c "$n" >"$out/cm-client.log" 2>&1
			rc=$?
			mem_sampler_stop "$mem" "$stop"
			m=$mres
		else
			echo "(its server or the sampler is gone: no client run)" >"$out/cm-client.log"
			rc=125
		fi
		kill $spid 2>/dev/null	# it serves until killed
		wait $spid 2>/dev/null
		# it says "failure ..." for a connection that failed, and goes
		# on (its totals then count fewer), exit status 0
		((rc == 0)) && grep -q '^failure' "$out/cm-client.log" && rc=1
		{
			echo "### cmtime $dev -c $n rc $rc"
			cat "$out/cm-client.log"
		} >>"$out/cmtime-scale-$dev.log"
		# setup and teardown in s
		t=
		((rc == 0)) && t=$(cmtime_totals "$out/cm-client.log" 0.001)
		if ((rc == 0)) && [[ -n $t ]]; then
			echo "cmtime $n $t $m" >>"$out/scale-$dev.txt"
		else
			log "$dev: cmtime -c $n failed (rc $rc; see cmtime-scale-$dev.log)"
			st=1
		fi
	done
	return $st
}

# perftest failing (it crashes in librdmacm on siw with 4 and 8 MiB) is
# not krdma failing: the row is n/a, and said so; status stays 0
pt_failed() { # op dev size
	log "$2: perftest $1 $3 failed: its row is n/a (see ${rdir#"$out"/}/perftest-$2.log)"
	echo "$2 $1 $3" >>"$rdir/perftest-failed.txt"
}
# krdma failing is: status 1, and the row listed in the report
krdma_failed() { # op dev size
	log "$2: krdmactl bench $1 $3 failed (see ${rdir#"$out"/}/errors.log, krdma-$2-server.log)"
	echo "$2 $1 $3" >>"$rdir/krdma-failed.txt"
	status=1
}

# The sizes of OP: lat's own; no SEND above 1 MiB (krdma's limit: nothing
# to compare with)
op_sizes() { # op
	local s
	for s in $(sizes_of "$([[ $1 == lat ]] && echo "$LAT_SIZES" || echo "$SIZES")"); do
		[[ $1 == send ]] && ((s > 1048576)) && continue
		echo "$s"
	done
}

# One run of TOOL: OP of SIZE, or with OP empty-X the empty run of X
tool_run() { # tool dev addr op size
	local dev=$2 addr=$3 op=$4 s=$5 base=${4#empty-}
	if [[ $1 == krdma ]]; then
		if [[ $op == empty-* ]]; then
			krdma_run "$dev" "$addr" "$base" 64 \
				"$rdir/krdma-$dev-$(empty_name "$base").json" "$EMPTY_N"
		else
			krdma_run "$dev" "$addr" "$op" "$s" "$rdir/krdma-$dev-$op-$s.json"
		fi || krdma_failed "$op" "$dev" "$s"
	elif [[ $op == empty-* ]]; then
		pt_row "$op" "$dev" "$addr" 64 "$EMPTY_N" || pt_failed "$op" "$dev" 64
	else
		pt_row "$op" "$dev" "$addr" "$s" "$(iters_of "$s" "$op")" ||
			pt_failed "$op" "$dev" "$s"
	fi
}

# One repeat on one device, row by row (the empty runs first), each row
# krdma then perftest in odd repeats, perftest then krdma in even ones
# (ABBA: a drift of the machine's speed weighs on both alike), into $rdir
rep_dev() { # dev addr
	local dev=$1 addr=$2 op s t
	local -a order=(krdma perftest)
	((rep % 2)) || order=(perftest krdma)
	: >"$rdir/perftest-$dev.txt"
	: >"$rdir/cpu-$dev.txt"
	: >"$rdir/time-$dev.txt"
	log "rep $rep/$REPEAT, $dev: ${order[0]} then ${order[1]}, row by row ($OPS)"
	for op in $EMPTY_OPS; do
		for t in "${order[@]}"; do
			tool_run "$t" "$dev" "$addr" "empty-$op" 64
		done
	done
	# one process pair per operation and size: a failure costs one row
	for op in $OPS; do
		for s in $(op_sizes "$op"); do
			for t in "${order[@]}"; do
				tool_run "$t" "$dev" "$addr" "$op" "$s"
			done
		done
	done
}

t_start=$(date +%s)
status=0
rep_secs=()
# What an earlier run into the same OUTDIR left (more repeats, connection
# or TCP rows, logs) is not this run's
rm -rf "$out"/rep[0-9]* "$out"/cmtime-* "$out"/krdma-*-conn-0.json \
	"$out"/krdma-*-scale-*.json "$out"/scale-*.txt \
	"$out"/krdma-*-server.log "$out/errors.log" "$out"/iperf3* "$out/done.json"
for ((rep = 1; rep <= REPEAT; rep++)); do
	t_rep=$(date +%s)
	rdir=$out/rep$rep
	rm -rf "$rdir"
	mkdir -p "$rdir" || exit 1
	: >"$rdir/perftest-failed.txt"
	: >"$rdir/krdma-failed.txt"
	for dv in $DEVS; do
		rep_dev "${dv%%:*}" "${dv#*:}"
	done
	rep_secs+=($(($(date +%s) - t_rep)))
done

# Once: connection setup on each device
if ((CONNS > 0)); then
	for dv in $DEVS; do
		log "${dv%%:*}: connection setup, krdma and cmtime, $CONNS each"
		conn_run "${dv%%:*}" "${dv#*:}" || status=1
	done
fi

# Once: connections kept open together, on each device
if [[ -n $SCALE ]]; then
	for dv in $DEVS; do
		log "${dv%%:*}: connection scale, krdma and cmtime, $SCALE together"
		scale_run "${dv%%:*}" "${dv#*:}" || status=1
	done
fi

# TCP on the same veth: iperf3, one stream, 3 s per write size
if [[ $TCP == 1 ]]; then
	command -v iperf3 >/dev/null || {
		log "no iperf3: no TCP rows"
		status=1
	}
fi
if [[ $TCP == 1 ]] && command -v iperf3 >/dev/null; then
	taddr=${DEVS%% *}
	taddr=${taddr#*:}
	: >"$out/iperf3.txt"
	for s in 64 4096 65536 1048576; do # iperf3: -l 1M at most
		stdbuf -oL timeout -k 5 30 iperf3 -s -1 -B "$taddr" -p 5201 >"$out/iperf3-server.log" 2>&1 &
		spid=$!
		if wait_line "$out/iperf3-server.log" $spid '*Server listening*'; then
			timeout -k 5 30 iperf3 -c "$taddr" -B "$taddr" -p 5201 -t 3 -l "$s" -J \
				>"$out/iperf3-$s.json" 2>>"$out/errors.log"
			rc=$?
		else
			log "iperf3 -s did not say it listens: no $s B row"
			rc=1
		fi
		((rc == 0)) || kill $spid 2>/dev/null
		wait $spid 2>/dev/null
		((rc == 0)) && python3 - "$out/iperf3-$s.json" "$s" >>"$out/iperf3.txt" <<'EOP' || echo "$s - -" >>"$out/iperf3.txt"
import json, sys
j = json.load(open(sys.argv[1]))
e = j["end"]["sum_sent"]
cpu = j["end"]["cpu_utilization_percent"]["host_total"] / 100 * e["seconds"]
print(sys.argv[2], "%.3f" % (e["bytes"] / e["seconds"] / 1e6), "%.6f" % (cpu / (e["bytes"] / 1e9)))
EOP
	done
fi
rm -f "$out/pt-client.log" "$out/pt-server.log" "$out/pt-time" "$out/k-time" \
	"$out/cm-client.log" "$out/cm-server.log" "$out/krdma-srv.tmp"
secs=$(($(date +%s) - t_start))
echo "{\"status\": $status, \"seconds\": $secs, \"repeat_seconds\": [$(
	IFS=,
	echo "${rep_secs[*]}"
)]}" >"$out/done.json"
log "done in $secs s (repeats: ${rep_secs[*]} s); results in $out (status $status)"
exit $status
