#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma_blk against NVMe over Fabrics on RDMA (Documentation/blockdev.rst,
# issue 15). Two steps, as scripts/bench.sh:
#
#   scripts/bench-blk.sh [OUTDIR]    in the guest test bed (make bench-blk
#                                    runs it there), on rxe0 and then on
#                                    siw0; on each, both block devices
#                                    at once over the same device in the
#                                    same guest run:
#                                    (a) krdma_blk: krdma_blk_server
#                                    (size_mb 256) and krdma_blk in this
#                                    guest, attached over the device's
#                                    address; (b) nvme-rdma: nvmet and
#                                    nvmet-rdma export a brd RAM disk of
#                                    the same size (rd_nr=1 rd_size=262144
#                                    KiB) through configfs on the same
#                                    address, nvme-rdma connects to it
#                                    through /dev/nvme-fabrics (no
#                                    nvme-cli). On each block device: a
#                                    sequential 1 MiB write over all of it
#                                    (not measured: brd allocates its pages
#                                    on the first write, so that neither
#                                    reads unwritten memory), then the
#                                    same fio jobs: 4k randread and
#                                    randwrite at QD 1 and 32, 128k read
#                                    and write at QD 8; libaio, direct=1,
#                                    one job, time_based, 10 s in two
#                                    halves of 5 s, each after a 2 s ramp,
#                                    JSON output. The halves alternate
#                                    (krdma_blk, nvme-rdma, nvme-rdma,
#                                    krdma_blk: ABBA), so that a change
#                                    of the host's load during a job
#                                    weighs on both alike; the report
#                                    merges them (IOPS and MB/s the mean,
#                                    latency the mean over all I/Os, p99
#                                    the worse half). Everything is torn
#                                    down after each device (the controller
#                                    deleted, configfs undone in reverse,
#                                    the modules removed). Raw results
#                                    into OUTDIR (default
#                                    $KRDMA_RESULTS/bench-blk).
#   scripts/bench-blk.sh --report DIR [DOCDIR]
#                                    on the host: the table (job,
#                                    krdma_blk IOPS and MB/s, nvme-rdma
#                                    IOPS and MB/s, ratio krdma_blk /
#                                    nvme-rdma, QD 1 mean completion
#                                    latency and its ratio) per device on
#                                    stdout and in DOCDIR/blockdev-
#                                    results.rst, all the numbers in
#                                    DOCDIR/blockdev-results.json, the
#                                    plot in DOCDIR/blockdev.png (gnuplot)
#
# Environment (guest step): BENCH_BLK_DEVS ("rxe0:198.18.0.1
# siw0:198.18.1.1"), BENCH_BLK_RUNTIME (10: seconds per job and disk),
# BENCH_BLK_RAMP (2), BENCH_BLK_SIZE_MB (256: both disks), BENCH_BLK_JOBS
# (all: names of the jobs below to run, e.g. "randread-4k-qd1
# randread-4k-qd32"). Each also as KRDMA_BENCH_BLK_*, which the guest
# gets: make bench-blk KRDMA_BENCH_BLK_RUNTIME=5. Nothing here asserts a
# number; a run that fails is recorded (OUTDIR/failed.txt) and the exit
# status is 1.
# shellcheck disable=SC2317 # functions run through wait_until
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# (not a version manager's shim on PATH: a second per call)
PYTHON=${PYTHON:-$([[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)}

report() {
	local dir=$1 doc=${2:-$repo/Documentation}

	[[ -f $dir/meta.json ]] || {
		echo "bench-blk: no results in $dir (run make bench-blk)" >&2
		exit 1
	}
	"$PYTHON" - "$dir" "$doc" <<'EOF' || exit 1
import json, os, sys

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

KINDS = (("krdma_blk", "krdma_blk"), ("nvme-rdma", "nvme_rdma"))

def load_one(p, job):
    """fio's numbers in file p, {"error": N} if it failed, None if absent"""
    try:
        t = open(p).read()
        j = json.JSONDecoder().raw_decode(t[t.index("{"):])[0]["jobs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    if j.get("error"):
        return {"error": j["error"]}
    s = j["read" if job["rw"] in ("read", "randread") else "write"]
    clat = s.get("clat_ns", {})
    p99 = clat.get("percentile", {}).get("99.000000")
    return {"iops": s["iops"], "mb_per_s": s["bw_bytes"] / 1e6,
            "clat_mean_us": clat.get("mean", 0) / 1e3,
            "clat_p99_us": p99 / 1e3 if p99 else None,
            "lat_mean_us": s.get("lat_ns", {}).get("mean", 0) / 1e3,
            "ios": s.get("total_ios", 0)}

def load(kind, dev, job):
    """One job's numbers: its two halves (a, b) merged, or one whole run"""
    base = os.path.join(d, "%s-%s-%s" % (kind, dev, job["name"]))
    parts = [load_one("%s.%s.json" % (base, h), job) for h in "ab"]
    parts = [x for x in parts if x is not None] or \
            [x for x in [load_one(base + ".json", job)] if x is not None]
    if not parts:
        return None
    for x in parts:
        if "error" in x:
            return x
    n = len(parts)
    ios = sum(x["ios"] for x in parts)
    def wmean(k):
        if ios:
            return sum(x[k] * x["ios"] for x in parts) / ios
        return sum(x[k] for x in parts) / n
    p99 = [x["clat_p99_us"] for x in parts if x["clat_p99_us"] is not None]
    return {"iops": sum(x["iops"] for x in parts) / n,
            "mb_per_s": sum(x["mb_per_s"] for x in parts) / n,
            "clat_mean_us": wmean("clat_mean_us"),
            "clat_p99_us": max(p99) if p99 else None,
            "lat_mean_us": wmean("lat_mean_us"),
            "halves_iops": [x["iops"] for x in parts]}

rows = []
for dev in meta["devices"]:
    for job in meta["jobs"]:
        row = {"device": dev, "job": job["name"], "rw": job["rw"],
               "bs": job["bs"], "iodepth": job["iodepth"]}
        for kind, key in KINDS:
            r = load(kind, dev, job)
            if r is None:
                continue
            for k, v in r.items():
                row["%s_%s" % (key, k)] = v
        a, b = row.get("krdma_blk_iops"), row.get("nvme_rdma_iops")
        row["iops_ratio"] = a / b if a and b else None
        if job["iodepth"] == 1:
            a, b = row.get("krdma_blk_clat_mean_us"), row.get("nvme_rdma_clat_mean_us")
            row["qd1_lat_ratio"] = a / b if a and b else None
        rows.append(row)

# The goals of issue 15: >= 1.0x nvme-rdma's IOPS at QD 32, <= 1.1x its
# QD 1 latency
def goal(r):
    if r["iodepth"] == 32 and r["iops_ratio"] is not None:
        return "IOPS >= 1.0x: %s" % ("yes" if r["iops_ratio"] >= 1.0 else "no")
    if r["iodepth"] == 1 and r.get("qd1_lat_ratio") is not None:
        return "latency <= 1.1x: %s" % ("yes" if r["qd1_lat_ratio"] <= 1.1 else "no")
    return ""
for r in rows:
    r["goal"] = goal(r) or None

setup = []
p = os.path.join(d, "setup.txt")
if os.path.exists(p):
    setup = [l.strip() for l in open(p) if l.strip()]
failed = []
p = os.path.join(d, "failed.txt")
if os.path.exists(p):
    failed = [l.strip() for l in open(p) if l.strip()]

json.dump({"meta": meta, "setup": setup, "failed": failed, "rows": rows},
          open(os.path.join(doc, "blockdev-results.json"), "w"), indent=1)

def f(x, dec=1):
    return "n/a" if x is None else "%.*f" % (dec, x)

def cell(r, key, what, dec=1):
    e = r.get("%s_error" % key)
    return "error %d" % e if e else f(r.get("%s_%s" % (key, what)), dec)

def lat(r):
    if r["iodepth"] != 1:
        return "", ""
    return ("%s / %s" % (cell(r, "krdma_blk", "clat_mean_us"), cell(r, "nvme_rdma", "clat_mean_us")),
            f(r.get("qd1_lat_ratio"), 2))

L = []
L.append(".. This file is generated by scripts/bench-blk.sh --report (make bench-blk); do not edit.")
L.append("")
L.append("Measured %s on commit ``%s``; guest kernel %s (%s), %s vCPUs, "
         "QEMU accel %s; host CPU %s." % (meta["date"], meta["commit"], meta["kernel"],
         meta["machine"], meta["cpus"], meta["accel"], meta["host_cpu"]))
L.append("fio %s: libaio, direct=1, one job, time_based, %s s per job and disk "
         "in two halves, each after a %s s ramp, the halves alternating between "
         "the disks (krdma_blk, nvme-rdma, nvme-rdma, krdma_blk), "
         "on the whole %d MiB device, written once sequentially before the jobs. "
         "Both disks are RAM: krdma_blk_server's vmalloc'd disk and a brd "
         "RAM disk exported by nvmet-rdma, over the same soft device and "
         "address, server and client in the same guest. *ratio* is "
         "krdma_blk / nvme-rdma of IOPS (above 1: krdma_blk is faster); "
         "*lat ratio* of the mean completion latency (clat) at QD 1 "
         "(above 1: krdma_blk is slower). The goals of the design: at "
         "least 1.0x nvme-rdma's IOPS at QD 32, at most 1.1x its QD 1 "
         "latency." % (meta.get("fio", "?"), meta["runtime"], meta["ramp"], meta["size_mb"]))
L.append("")
if setup:
    L.append("Setup, per device: ``%s``." % "``; ``".join(setup))
    L.append("")
if failed:
    L.append("Failed: %s; those cells are n/a." % "; ".join(failed))
    L.append("")
L.append("")
for dev in meta["devices"]:
    title = "%s (%s)" % (dev, "RoCE" if dev.startswith("rxe") else "iWARP")
    L.append(title)
    L.append("-" * len(title))
    L.append("")
    L.append(".. list-table::")
    L.append("   :header-rows: 1")
    L.append("")
    hdr = ["job", "krdma_blk IOPS", "krdma_blk MB/s", "nvme-rdma IOPS",
           "nvme-rdma MB/s", "ratio", "QD 1 mean clat us (krdma_blk / nvme-rdma)",
           "lat ratio", "goal"]
    L.append("   * - " + "\n     - ".join(hdr))
    for r in rows:
        if r["device"] != dev:
            continue
        lc, lr = lat(r)
        cells = [r["job"], cell(r, "krdma_blk", "iops", 0), cell(r, "krdma_blk", "mb_per_s"),
                 cell(r, "nvme_rdma", "iops", 0), cell(r, "nvme_rdma", "mb_per_s"),
                 f(r["iops_ratio"], 2), lc, lr, r["goal"] or ""]
        L.append("   * - " + "\n     - ".join(cells))
    L.append("")
open(os.path.join(doc, "blockdev-results.rst"), "w").write("\n".join(L))

# gnuplot: IOPS of both per job and device (log scale), and the ratios
iops_dat = os.path.join(d, "blockdev-iops.dat")
ratio_dat = os.path.join(d, "blockdev-ratio.dat")
devs = meta["devices"]
with open(iops_dat, "w") as g:
    g.write("# job " + " ".join("krdma_blk-%s nvme-rdma-%s" % (v, v) for v in devs) + "\n")
    for job in meta["jobs"]:
        vals = []
        for dev in devs:
            r = [x for x in rows if x["device"] == dev and x["job"] == job["name"]][0]
            for _, key in KINDS:
                v = r.get("%s_iops" % key)
                vals.append("%.1f" % v if v else "?")
        g.write("%s %s\n" % (job["name"], " ".join(vals)))
with open(ratio_dat, "w") as g:
    g.write("# job " + " ".join("ratio-%s" % v for v in devs) + "\n")
    for job in meta["jobs"]:
        vals = []
        for dev in devs:
            r = [x for x in rows if x["device"] == dev and x["job"] == job["name"]][0]
            vals.append("%.4f" % r["iops_ratio"] if r["iops_ratio"] else "?")
        g.write("%s %s\n" % (job["name"], " ".join(vals)))
n = len(meta["jobs"])
gp = ["set terminal pngcairo size 1100,850 noenhanced" if os.system("gnuplot -e 'set terminal pngcairo' 2>/dev/null") == 0
      else "set terminal png size 1100,850",
      "set output '%s'" % os.path.join(doc, "blockdev.png"),
      "set datafile missing '?'",
      "set multiplot layout 2,1 title 'krdma_blk vs nvme-rdma (fio, libaio, direct), %s, %s'" % (meta["date"][:10], meta["commit"][:12]),
      "set style data histograms", "set style histogram clustered gap 1",
      "set style fill solid 0.8 border -1", "set key outside right", "set grid ytics",
      "set xrange [-0.5:%f]" % (n - 0.5), "set xtics rotate by -20",
      "set logscale y 10", "set ylabel 'IOPS'"]
cols = []
i = 2
for dev in devs:
    for kind, _ in KINDS:
        cols.append("'%s' using %d%s title '%s %s'" % (iops_dat, i, ":xtic(1)" if i == 2 else "", kind, dev))
        i += 1
gp.append("plot " + ", ".join(cols))
gp += ["unset logscale y", "set yrange [0:*]", "set ylabel 'IOPS ratio krdma_blk / nvme-rdma'"]
cols = ["'%s' using %d%s title '%s'" % (ratio_dat, k + 2, ":xtic(1)" if k == 0 else "", dev)
        for k, dev in enumerate(devs)]
cols.append("1 with lines dt 2 lc rgb 'black' title 'parity'")
gp.append("plot " + ", ".join(cols))
gp.append("unset multiplot")
gpf = os.path.join(d, "blockdev.gp")
open(gpf, "w").write("\n".join(gp) + "\n")
if os.system("gnuplot '%s'" % gpf) != 0:
    print("bench-blk: gnuplot failed", file=sys.stderr)
print("bench-blk: wrote %s/blockdev-results.rst, blockdev-results.json, blockdev.png" % doc)

for dev in devs:
    print()
    print("%s: krdma_blk against nvme-rdma" % dev)
    print("%-18s %11s %9s %11s %9s %6s %21s %6s" % ("job", "krdma IOPS", "MB/s",
          "nvme IOPS", "MB/s", "ratio", "QD1 clat us k / n", "ratio"))
    for r in rows:
        if r["device"] != dev:
            continue
        lc, lr = lat(r)
        print("%-18s %11s %9s %11s %9s %6s %21s %6s" % (r["job"],
              cell(r, "krdma_blk", "iops", 0), cell(r, "krdma_blk", "mb_per_s"),
              cell(r, "nvme_rdma", "iops", 0), cell(r, "nvme_rdma", "mb_per_s"),
              f(r["iops_ratio"], 2), lc, lr))
for l in failed:
    print("failed: %s" % l)
EOF
	exit 0
}

if [[ ${1-} == --report ]]; then
	shift
	report "$@"
fi

out=${1:-${KRDMA_RESULTS:-$repo/build}/bench-blk}
mkdir -p "$out" || exit 1
cd "$repo" || exit 1
SRV_KO=$repo/samples/krdma_blk/krdma_blk_server.ko
CLI_KO=$repo/samples/krdma_blk/krdma_blk.ko
SYS=/sys/kernel/krdma_blk
CFS=/sys/kernel/config/nvmet
DEVS=${BENCH_BLK_DEVS:-${KRDMA_BENCH_BLK_DEVS:-rxe0:198.18.0.1 siw0:198.18.1.1}}
RUNTIME=${BENCH_BLK_RUNTIME:-${KRDMA_BENCH_BLK_RUNTIME:-10}}
HALF=$(((RUNTIME + 1) / 2))
RAMP=${BENCH_BLK_RAMP:-${KRDMA_BENCH_BLK_RAMP:-2}}
SIZE_MB=${BENCH_BLK_SIZE_MB:-${KRDMA_BENCH_BLK_SIZE_MB:-256}}
WANT_JOBS=${BENCH_BLK_JOBS:-${KRDMA_BENCH_BLK_JOBS:-}}
BPORT=7740
NVME_PORT=4420
NQN=nqn.2026-12.org.krdma:bench-blk
# name rw bs iodepth
ALL_JOBS=(
	"randread-4k-qd1 randread 4k 1"
	"randread-4k-qd32 randread 4k 32"
	"randwrite-4k-qd1 randwrite 4k 1"
	"randwrite-4k-qd32 randwrite 4k 32"
	"read-128k-qd8 read 128k 8"
	"write-128k-qd8 write 128k 8"
)
JOBS=()
for j in "${ALL_JOBS[@]}"; do
	[[ -z $WANT_JOBS || " $WANT_JOBS " == *" ${j%% *} "* ]] && JOBS+=("$j")
done

log() { echo "bench-blk: $*" >&2; }

loaded() {
	grep -q "^$1 " /proc/modules
}

# wait_until SECS CMD...: until CMD succeeds, tried every 0.1 s
wait_until() {
	local end=$((SECONDS + $1))

	shift
	until "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.1
	done
}

# sysfs_write FILE STRING: STRING and a newline to FILE, within 60 s
sysfs_write() {
	# shellcheck disable=SC2016 # expanded by that bash
	timeout 60 bash -c 'printf "%s\n" "$2" >"$1"' _ "$1" "$2"
}

# failed WHAT: recorded; the run's status becomes 1
status=0
failed() {
	log "FAILED: $*"
	echo "$*" >>"$out/failed.txt"
	status=1
}

for f in "$SRV_KO" "$CLI_KO"; do
	[[ -f $f ]] || { log "$f is not built"; exit 1; }
done
command -v fio >/dev/null || { log "fio is not installed (scripts/install-deps.sh)"; exit 1; }
((${#JOBS[@]})) || { log "BENCH_BLK_JOBS=$WANT_JOBS: no such job"; exit 1; }

cpus=$(nproc)
jobs_json=$(for j in "${JOBS[@]}"; do
	read -r name rw bs qd <<<"$j"
	printf '{"name": "%s", "rw": "%s", "bs": "%s", "iodepth": %d},' "$name" "$rw" "$bs" "$qd"
done | sed 's/,$//')
cat >"$out/meta.json" <<EOF
{"date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "commit": "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo -dirty)",
 "kernel": "$(uname -r)", "machine": "$(uname -m)", "cpus": $cpus,
 "guest_cpu": "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)",
 "fio": "$(fio --version)",
 "devices": [$(for dv in $DEVS; do printf '"%s",' "${dv%%:*}"; done | sed 's/,$//')],
 "runtime": $RUNTIME, "ramp": $RAMP, "size_mb": $SIZE_MB,
 "jobs": [$jobs_json]}
EOF
: >"$out/failed.txt"
: >"$out/setup.txt"

# prefill KIND DEV BDEV: all of BDEV written once (brd allocates on the
# first write), not measured
prefill() {
	local kind=$1 dev=$2 bdev=$3

	log "$dev: $kind on $bdev: writing all of it once"
	timeout 600 fio --name=prefill --filename="$bdev" --ioengine=libaio --direct=1 \
		--rw=write --bs=1M --iodepth=8 --size="${SIZE_MB}M" --output-format=json \
		--output="$out/$kind-$dev-prefill.json" >>"$out/fio-$kind-$dev.log" 2>&1 ||
		{ failed "$kind $dev prefill"; return 1; }
}

# run_half KIND DEV BDEV JOB HALF: one half (HALF s) of JOB on BDEV
run_half() {
	local kind=$1 dev=$2 bdev=$3 half=$5 name rw bs qd

	read -r name rw bs qd <<<"$4"
	log "$dev: $kind: $name ($half)"
	timeout $((HALF + RAMP + 120)) fio --name="$name" --filename="$bdev" \
		--ioengine=libaio --direct=1 --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--size="${SIZE_MB}M" --time_based --runtime="$HALF" --ramp_time="$RAMP" \
		--norandommap --randrepeat=0 --output-format=json \
		--output="$out/$kind-$dev-$name.$half.json" >>"$out/fio-$kind-$dev.log" 2>&1 ||
		failed "$kind $dev $name $half (fio exit $?)"
}

# run_jobs DEV KBDEV NBDEV: every job on both disks (either may be empty:
# not up), in halves, ABBA
run_jobs() {
	local dev=$1 kb=$2 nb=$3 j

	for j in "${JOBS[@]}"; do
		[[ -n $kb ]] && run_half krdma_blk "$dev" "$kb" "$j" a
		[[ -n $nb ]] && run_half nvme-rdma "$dev" "$nb" "$j" a
		[[ -n $nb ]] && run_half nvme-rdma "$dev" "$nb" "$j" b
		[[ -n $kb ]] && run_half krdma_blk "$dev" "$kb" "$j" b
	done
}

# --- krdma_blk ------------------------------------------------------------------

krdma_up() { # dev addr: sets bdev
	local dev=$1 addr=$2 name msg

	msg=$(insmod "$SRV_KO" addr="$addr" size_mb="$SIZE_MB" 2>&1) ||
		{ failed "krdma_blk $dev: insmod krdma_blk_server: $msg"; return 1; }
	msg=$(insmod "$CLI_KO" 2>&1) || { failed "krdma_blk $dev: insmod krdma_blk: $msg"; return 1; }
	sysfs_write "$SYS/attach" "$addr $BPORT" 2>>"$out/errors.log" ||
		{ failed "krdma_blk $dev: attach $addr $BPORT"; return 1; }
	name=$(awk -v a="$addr" '$2 == a { print $1; exit }' "$SYS/devices")
	if [[ -z $name ]] || ! wait_until 10 test -b "/dev/$name"; then
		failed "krdma_blk $dev: no block device after the attach ($(cat "$SYS/devices"))"
		return 1
	fi
	bdev=/dev/$name
	# krdmablkK ADDR PORT SIZE_BYTES QUEUES DEPTH STATE
	echo "krdma_blk $dev: $(awk -v d="$name" '$1 == d { printf "queues=%s depth=%s", $5, $6 }' "$SYS/devices")" >>"$out/setup.txt"
}

krdma_down() {
	local d st=0

	if [[ -r $SYS/devices ]]; then
		while read -r d _; do
			sysfs_write "$SYS/detach" "$d" || st=1
		done < <(cat "$SYS/devices")
	fi
	if loaded krdma_blk; then timeout 60 rmmod krdma_blk || st=1; fi
	if loaded krdma_blk_server; then timeout 60 rmmod krdma_blk_server || st=1; fi
	return $st
}

# --- nvme-rdma ------------------------------------------------------------------

# The namespaces' block devices (nvme0n1; not the hidden per-path
# nvme0c0n1 of native multipath)
nvme_disks() {
	local d

	for d in /sys/block/nvme*; do
		d=${d##*/}
		[[ $d =~ ^nvme[0-9]+n[0-9]+$ && -b /dev/$d ]] && echo "$d"
	done
}
new_nvme_disk() { # the disks before
	nvme_disk=$(nvme_disks | grep -vxF -e "$1" -e '' | head -n1)
	[[ -n $nvme_disk ]]
}

nvme_up() { # dev addr: sets bdev, nvme_ctrl
	local dev=$1 addr=$2 s=$CFS/subsystems/$NQN p=$CFS/ports/1 before reply opts

	if ! modprobe -a nvmet nvmet-rdma nvme-rdma 2>>"$out/errors.log"; then
		failed "nvme-rdma $dev: modprobe nvmet nvmet-rdma nvme-rdma"
		return 1
	fi
	# a fresh RAM disk (brd's parameters count at load only)
	if loaded brd && ! rmmod brd; then
		failed "nvme-rdma $dev: brd is loaded and cannot be removed"
		return 1
	fi
	if ! modprobe brd rd_nr=1 rd_size=$((SIZE_MB * 1024)) 2>>"$out/errors.log" ||
		! wait_until 10 test -b /dev/ram0; then
		failed "nvme-rdma $dev: modprobe brd rd_nr=1 rd_size=$((SIZE_MB * 1024))"
		return 1
	fi
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	if ! { mkdir "$s" &&
		echo 1 >"$s/attr_allow_any_host" &&
		mkdir "$s/namespaces/1" &&
		printf '%s' /dev/ram0 >"$s/namespaces/1/device_path" &&
		echo 1 >"$s/namespaces/1/enable" &&
		mkdir "$p" &&
		echo rdma >"$p/addr_trtype" &&
		echo ipv4 >"$p/addr_adrfam" &&
		echo "$addr" >"$p/addr_traddr" &&
		echo "$NVME_PORT" >"$p/addr_trsvcid" &&
		ln -s "$s" "$p/subsystems/$NQN"; } 2>>"$out/errors.log"; then
		failed "nvme-rdma $dev: the nvmet target in configfs (see errors.log)"
		return 1
	fi
	before=$(nvme_disks)
	# What nvme-cli's connect does: the options written to
	# /dev/nvme-fabrics, "instance=N,cntlid=M" read back from it
	opts="transport=rdma,traddr=$addr,trsvcid=$NVME_PORT,nqn=$NQN"
	reply=$(timeout 60 "$PYTHON" -I -S -c '
import os, sys
fd = os.open("/dev/nvme-fabrics", os.O_RDWR)
os.write(fd, sys.argv[1].encode())
print(os.read(fd, 4096).decode().strip())
' "$opts" 2>>"$out/errors.log")
	if [[ ! $reply =~ ^instance=([0-9]+), ]]; then
		failed "nvme-rdma $dev: connect $opts: '$reply' (see errors.log)"
		return 1
	fi
	nvme_ctrl=nvme${BASH_REMATCH[1]}
	if ! wait_until 30 new_nvme_disk "$before"; then
		failed "nvme-rdma $dev: $nvme_ctrl connected, no namespace block device in 30 s"
		return 1
	fi
	bdev=/dev/$nvme_disk
	echo "nvme-rdma $dev: $nvme_ctrl $nvme_disk queue_count=$(cat "/sys/class/nvme/$nvme_ctrl/queue_count" 2>/dev/null) sqsize=$(cat "/sys/class/nvme/$nvme_ctrl/sqsize" 2>/dev/null) multipath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)" >>"$out/setup.txt"
}

# The host's controller deleted, then configfs undone in the reverse
# order, then the modules
nvme_down() {
	local s=$CFS/subsystems/$NQN p=$CFS/ports/1 st=0 c=${nvme_ctrl:-} m

	if [[ -n $c && -e /sys/class/nvme/$c/delete_controller ]]; then
		echo 1 >"/sys/class/nvme/$c/delete_controller" || st=1
		wait_until 30 test ! -e "/sys/class/nvme/$c" || st=1
	fi
	nvme_ctrl=
	if [[ -L $p/subsystems/$NQN ]]; then rm "$p/subsystems/$NQN" || st=1; fi
	if [[ -d $p ]]; then rmdir "$p" || st=1; fi
	if [[ -d $s/namespaces/1 ]]; then
		echo 0 >"$s/namespaces/1/enable" || st=1
		rmdir "$s/namespaces/1" || st=1
	fi
	if [[ -d $s ]]; then rmdir "$s" || st=1; fi
	for m in nvme_rdma nvmet_rdma nvmet brd; do
		if loaded $m; then timeout 60 modprobe -r $m || st=1; fi
	done
	return $st
}

trap 'krdma_down 2>/dev/null; nvme_down 2>/dev/null' EXIT

t_start=$(date +%s)
for dv in $DEVS; do
	dev=${dv%%:*}
	addr=${dv#*:}
	if [[ ! -d /sys/class/infiniband/$dev ]]; then
		failed "$dev: no such RDMA device"
		continue
	fi
	kb=
	nb=
	bdev=
	krdma_up "$dev" "$addr" && prefill krdma_blk "$dev" "$bdev" && kb=$bdev
	bdev=
	nvme_up "$dev" "$addr" && prefill nvme-rdma "$dev" "$bdev" && nb=$bdev
	run_jobs "$dev" "$kb" "$nb"
	krdma_down 2>>"$out/errors.log" || failed "krdma_blk $dev: teardown"
	nvme_down 2>>"$out/errors.log" || failed "nvme-rdma $dev: teardown"
done
log "done in $(($(date +%s) - t_start)) s; results in $out (status $status)"
exit $status
