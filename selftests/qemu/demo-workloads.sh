#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The workloads demo, run in the test guest by `make demo-workloads`
# (selftests/qemu/run.sh demo-workloads) after guest-setup.sh: rxe0 and
# siw0 are up (see /run/krdma-guest.env for names and addresses) and
# krdma.ko is loaded. cwd does not matter (it goes to the repo root).
# Also runs on any host with krdma.ko loaded and the two soft devices set
# up the same way (as root), and on a host without them against
# examples/fake_krdma_peers.so (make -C examples demo-fake: the numbers
# then mean nothing).
#
# Runs each of the three workload examples (Documentation/workloads.rst)
# with krdma on soft-RoCE, with krdma on soft-iWARP and in its TCP mode,
# small enough for an emulated guest (QEMU TCG, 2 vCPUs; about a minute,
# estimated):
#   krdma-allreduce  3 ranks, float32, 1 MiB and 4 MiB, 5 iterations
#   krdma-shuffle    2 mappers -> 1 reducer, 1 MiB partitions, 10
#                    iterations
#   krdma-load       a server and 2 clients at once, 64 KiB samples of a
#                    16 MiB dataset, for 3 seconds
# then prints a table: per workload and size, the throughput of each
# (MB/s), the ratios to TCP, and whether every run verified it. Exit
# status: 0 when every process of every run exited 0 and every result was
# verified (on the device it was meant for), 1 otherwise.
#
# Environment: KRDMA_RXE_ADDR (198.18.0.1), KRDMA_RXE_DEV (rxe0),
# KRDMA_SIW_ADDR (198.18.1.1), KRDMA_SIW_DEV (siw0); the TCP mode runs on
# KRDMA_RXE_ADDR. KRDMA_DEMO_PORT (29700): rank 0's rendezvous port (and
# krdma-load's) of the first run, the next ones after it. PYTHON (python3)
# judges the JSON. Every process runs under `timeout` (60 s; the programs
# give up after 20 s without progress themselves).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

PYTHON=${PYTHON:-python3}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
RXE_DEV=${KRDMA_RXE_DEV:-rxe0}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
SIW_DEV=${KRDMA_SIW_DEV:-siw0}
port=${KRDMA_DEMO_PORT:-29700}

AR=examples/krdma-allreduce
SH=examples/krdma-shuffle
LD=examples/krdma-load
# Each process: at most LIMIT seconds; the programs' own -t STALL
LIMIT=60
STALL=20
AR_ARGS=(--size 3 -b 1M -e 4M -f 4 -d float -n 5 -w 1 -t "$STALL" -j)
AR_SIZES=1048576,4194304
SH_ARGS=(--size 3 -R 1 -b 1M -e 1M -n 10 -w 2 -t "$STALL" -j)
SH_SIZES=1048576
LD_SAMPLE=64K
LD_SIZES=65536
LD_SECS=3
DS_SIZE=16M

tmp=$(mktemp -d "${TMPDIR:-/tmp}/krdma-demo-workloads.XXXXXX") || exit 1
pids=() names=()

# reap PID SECS: the exit status of PID (a child), waiting for it SECS
# seconds at most: 124 if it is still there then (stuck in the kernel,
# where even SIGKILL does not end it: left behind)
reap() {
	timeout "$2" tail -s 0.1 --pid="$1" -f /dev/null 2>/dev/null
	kill -0 "$1" 2>/dev/null && return 124
	wait "$1"
}

cleanup() {
	local p

	# (timeout passes the TERM on to its program)
	((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null
	for p in "${pids[@]}"; do
		reap "$p" 10 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "demo-workloads: interrupted"; exit 1' INT TERM

say() { printf '\n== %s ==\n' "$*"; }
show() { echo "\$ $*"; }

for p in "$AR" "$SH" "$LD"; do
	if [[ ! -x $p ]]; then
		echo "demo-workloads: $p is not built (run: make)"
		exit 1
	fi
done
if ! command -v "$PYTHON" >/dev/null; then
	echo "demo-workloads: $PYTHON not found (it reads the programs' JSON)"
	exit 1
fi

# spawn NAME CMD...: CMD in the background, bounded, stdout and stderr in
# $tmp/NAME.{out,err}
spawn() {
	local name=$1

	shift
	timeout -k 5 "$LIMIT" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null &
	pids+=($!)
	names+=("$name")
}

# finish WORKLOAD MODE SIZES JSON...: wait for what spawn() started (its
# timeout ends it, SIGKILL 5 s later), show the exit statuses (and the
# errors of the processes that failed), and add the run to $tmp/runs for
# judge()
finish() {
	local workload=$1 mode=$2 sizes=$3 i rc
	local -a rcs=()

	shift 3
	for i in "${!pids[@]}"; do
		reap "${pids[i]}" $((LIMIT + 15))
		rc=$?
		rcs+=("$rc")
		if ((rc != 0)); then
			echo "${names[i]}: exit status $rc$( ((rc == 124)) && echo " (timed out: $LIMIT s)")"
			tail -n 8 "$tmp/${names[i]}.err" | sed "s|^|${names[i]}: |"
		fi
	done
	pids=() names=()
	echo "exit statuses: ${rcs[*]} ($((SECONDS - t0)) s)"
	local IFS=,
	printf '%s %s %s %s %s\n' "$workload" "$mode" "$sizes" "${rcs[*]}" "$*" >>"$tmp/runs"
}

# ranks WORKLOAD PROG SIZES MODE ADDR ARGS...: 3 ranks of PROG, rank 0
# at ADDR
ranks() {
	local workload=$1 prog=$2 sizes=$3 mode=$4 addr=$5 r

	shift 5
	port=$((port + 1)) t0=$SECONDS
	show "for r in 0 1 2; do $prog --root $addr:$port --rank \$r $* & done; wait"
	for r in 0 1 2; do
		spawn "$workload-$mode.$r" "$prog" --root "$addr:$port" --rank $r "$@"
	done
	finish "$workload" "$mode" "$sizes" "$tmp/$workload-$mode.0.out"
}

# load MODE ADDR MODE_ARGS...: a server at ADDR that exits after 2
# clients, and the 2 clients at once (they wait for it to listen)
load() {
	local mode=$1 addr=$2 c
	local -a srv=(--serve "$tmp/dataset" -s "$LD_SAMPLE" --clients 2 -t "$STALL" -j)
	local -a cli=(-b 16 -d "$LD_SECS" -s "$LD_SAMPLE" -t "$STALL" -j)

	shift 2
	port=$((port + 1)) t0=$SECONDS
	show "$LD --listen $addr:$port ${srv[*]}${*:+ $*} &"
	show "for c in 1 2; do $LD --server $addr:$port ${cli[*]} --seed \$c${*:+ $*} & done; wait"
	spawn "load-$mode.server" "$LD" --listen "$addr:$port" "${srv[@]}" "$@"
	for c in 1 2; do
		spawn "load-$mode.client$c" "$LD" --server "$addr:$port" "${cli[@]}" --seed $c "$@"
	done
	finish load "$mode" "$LD_SIZES" "$tmp/load-$mode.client1.out" \
		"$tmp/load-$mode.client2.out" "$tmp/load-$mode.server.out"
}

# judge RUNS: read every run's JSON, print the table and what failed;
# exit status 1 if anything did
judge() {
	"$PYTHON" - "$@" <<'EOF'
import json, sys

runs, devs = sys.argv[1], {"rxe": sys.argv[2], "siw": sys.argv[3]}
MODES = ("rxe", "siw", "tcp")
LABEL = {"allreduce": "allreduce 3 ranks", "shuffle": "shuffle 2 -> 1",
         "load": "load 2 clients"}
cells, order, failures = {}, [], []


def size_text(b):
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= unit and b % unit == 0:
            return "%d %s" % (b // unit, name)
    return "%d B" % b


def judge_ring(mode, d, sizes, key, bw):
    """allreduce (key size, algbw) or shuffle (part_bytes, aggbw): rank 0's
    JSON; MB/s and problems per size, problems of the run"""
    values, bad, rows = {}, {s: [] for s in sizes}, {}
    run_bad = []
    if d["verified"] is not True:
        run_bad.append("not verified")
    if mode != "tcp":
        on = sorted({p["info"].split()[0] for p in d["peers"]})
        if on != [devs[mode]]:
            run_bad.append("ran on %s, not %s" % (" ".join(on), devs[mode]))
    for r in d["results"]:
        rows[r[key]] = r
    for s in sizes:
        r = rows.get(s)
        if r is None:
            bad[s].append("no result")
            continue
        values[s] = r[bw] * 1000
        if r["verified"] is not True or r["wrong"] != 0:
            bad[s].append("%d wrong, not verified" % r["wrong"])
    return values, bad, run_bad


def judge_load(mode, docs, sizes):
    """the clients' JSON, then the server's: both clients' MB/s together"""
    *clients, server = docs
    run_bad, total = [], 0
    for i, c in enumerate(clients, 1):
        if not (c["verified"] is True and c["wrong"] == 0 and c["samples"] > 0
                and c["sample_bytes"] == sizes[0]):
            run_bad.append("client %d: %d wrong of %d samples of %d bytes"
                           % (i, c["wrong"], c["samples"], c["sample_bytes"]))
        if mode != "tcp" and c["info"].split()[0] != devs[mode]:
            run_bad.append("client %d ran on %s, not %s"
                           % (i, c["info"].split()[0], devs[mode]))
        total += c["bytes_per_s"]
    if server["clients"] != len(clients) or server["failed"] != 0:
        run_bad.append("the server: %d clients, %d failed"
                       % (server["clients"], server["failed"]))
    return {sizes[0]: total / 1e6}, {sizes[0]: []}, run_bad


for line in open(runs):
    workload, mode, sizes, rcs, files = line.split()
    sizes = [int(s) for s in sizes.split(",")]
    rcs = [int(r) for r in rcs.split(",")]
    values, bad, run_bad = {}, {s: [] for s in sizes}, []
    if any(rcs):
        run_bad.append("exit statuses " + " ".join(map(str, rcs)))
    try:
        docs = []
        for f in files.split(","):
            with open(f) as fp:
                docs.append(json.load(fp))
        want = "tcp" if mode == "tcp" else "krdma"
        if [d["mode"] for d in docs] != [want] * len(docs):
            run_bad.append("mode %s, not %s" % (docs[0]["mode"], want))
        if workload == "load":
            values, bad, more = judge_load(mode, docs, sizes)
        elif workload == "allreduce":
            values, bad, more = judge_ring(mode, docs[0], sizes, "size", "algbw_gbs")
        else:
            values, bad, more = judge_ring(mode, docs[0], sizes, "part_bytes", "aggbw_gbs")
        run_bad += more
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        run_bad.append("no JSON result (%s: %s)" % (type(e).__name__, e))
    for s in sizes:
        if (workload, s) not in cells:
            cells[workload, s] = {}
            order.append((workload, s))
        problems = run_bad + bad[s]
        cells[workload, s][mode] = (values.get(s), problems)
        for p in problems:
            failures.append("%s %s, %s: %s" % (workload, size_text(s), mode, p))

fmt = "%-18s %7s %10s %10s %10s %8s %8s  %s"
print(fmt % ("workload", "size", "krdma-rxe", "krdma-siw", "TCP",
             "rxe/TCP", "siw/TCP", "verified"))
print((fmt % ("", "", "(MB/s)", "(MB/s)", "(MB/s)", "", "", "")).rstrip())
for w, s in order:
    c = cells[w, s]
    got = {m: c[m][0] if m in c and not c[m][1] else None for m in MODES}
    col = ["%.1f" % got[m] if got[m] is not None else "FAILED" for m in MODES]
    ratio = ["%.2f" % (got[m] / got["tcp"]) if got[m] is not None and got["tcp"]
             else "-" for m in ("rxe", "siw")]
    bad = [m for m in MODES if m not in c or c[m][1]]
    print(fmt % (LABEL[w], size_text(s), *col, *ratio,
                 "NO (%s)" % ", ".join(bad) if bad else "yes"))
print("(allreduce: algorithm bandwidth, size / time of the slowest rank; "
      "shuffle: 2 partitions into\n the reducer / time; load: bytes/s that "
      "both clients read together)")
if failures:
    print("\nnot verified:")
    for f in failures:
        print("  " + f)
    sys.exit(1)
EOF
}

say "the three workload examples, each on soft-RoCE ($RXE_DEV, $RXE_ADDR), soft-iWARP ($SIW_DEV, $SIW_ADDR) and TCP ($RXE_ADDR)"
start=$SECONDS
: >"$tmp/runs"
show "$LD --make-dataset $tmp/dataset $DS_SIZE"
if ! timeout 60 "$LD" --make-dataset "$tmp/dataset" "$DS_SIZE"; then
	echo "demo-workloads: FAILED: krdma-load --make-dataset"
	exit 1
fi
for t in rxe siw tcp; do
	case $t in
	rxe) addr=$RXE_ADDR how="krdma on soft-RoCE $RXE_DEV" margs=() ;;
	siw) addr=$SIW_ADDR how="krdma on soft-iWARP $SIW_DEV" margs=() ;;
	tcp) addr=$RXE_ADDR how="TCP" margs=(-m tcp) ;;
	esac
	# (for examples/fake_krdma_peers.so: the transport of its device)
	export KRDMA_FAKE_TRANSPORT=$t
	say "$how ($addr): krdma-allreduce, 3 ranks, 1 MiB and 4 MiB"
	ranks allreduce "$AR" "$AR_SIZES" $t "$addr" "${AR_ARGS[@]}" "${margs[@]}"
	say "$how ($addr): krdma-shuffle, 2 mappers into 1 reducer, 1 MiB partitions"
	ranks shuffle "$SH" "$SH_SIZES" $t "$addr" "${SH_ARGS[@]}" "${margs[@]}"
	say "$how ($addr): krdma-load, a server and 2 clients, 64 KiB samples for $LD_SECS s"
	load $t "$addr" "${margs[@]}"
done
unset KRDMA_FAKE_TRANSPORT

say "results"
judge "$tmp/runs" "$RXE_DEV" "$SIW_DEV"
rc=$?
echo
if ((rc != 0)); then
	echo "demo-workloads: FAILED: not every run exited 0 with every result verified (above) ($((SECONDS - start)) s)"
	exit 1
fi
echo "demo-workloads: every run of the 3 workloads verified on $RXE_DEV, $SIW_DEV and TCP ($((SECONDS - start)) s)"
