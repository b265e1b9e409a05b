#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The workload examples' TCP modes on the host, on 127.0.0.1 (no module,
# no RDMA device): make -C examples test. Prints TAP. The krdma modes run
# in the guest (selftests/krdma_examples_test.sh).
#
# - krdma-allreduce -m tcp, 3 ranks, 64 KiB and 4 MiB, float and int32:
#   every rank exits 0, every row verified;
# - krdma-shuffle -m tcp, 2 mappers into 1 reducer and 3 mappers into 2
#   reducers, 64 KiB and 4 MiB partitions: verified; one wrong byte
#   (--inject-error) is reported; mapper 0 (rank 1) killed mid-run: the
#   others exit 1 naming it;
# - krdma-load -m tcp: a generated dataset, a server and 2 clients at
#   once, samples of 64 KiB and of 4 MiB: every sample verified, the
#   server's count of clients; one wrong sample (--inject-error) is
#   reported; the server killed mid-run: both clients exit 1 naming it.
#
# PYTHON (python3) checks the JSON; PORT_BASE picks the ports (default:
# at random below the kernel's ephemeral range, which the clients' own
# sockets use: a listener on one of those ports may find it taken).

# shellcheck disable=SC2317,SC2016,SC2034 # run through check() and eval
set -u
cd "$(dirname "$0")" || exit 1

AR=$PWD/krdma-allreduce
SH=$PWD/krdma-shuffle
LD=$PWD/krdma-load
read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=32768
((eph_lo > 12000)) || eph_lo=32768
port=${PORT_BASE:-$((10000 + RANDOM % (eph_lo - 10100)))}
NTESTS=12

# shellcheck source=examples/test_lib.sh
. ./test_lib.sh
ex_test_init krdma_examples_tcp

# ranks PROG NAME N ARGS...: N ranks on 127.0.0.1, all waited for (60 s
# at most each); outputs in $TMP/NAME.<rank>.{out,err}; statuses in rcs[]
ranks() {
	local prog=$1 name=$2 nr=$3 r
	local -a ps=()

	shift 3
	port=$((port + 1))
	rm -f "$TMP"/last.*
	for ((r = 0; r < nr; r++)); do
		timeout -k 5 60 "$prog" --root "127.0.0.1:$port" --rank $r --size "$nr" \
			-m tcp -t 20 "$@" >"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" </dev/null &
		ps+=($!)
		ln -sf "$TMP/$name.$r.err" "$TMP/last.$r.err"
	done
	rcs=()
	for ((r = 0; r < nr; r++)); do
		wait "${ps[r]}"
		rcs+=($?)
	done
}

# kill_rank PROG NAME N VICTIM ARGS...: N ranks, VICTIM killed once rank
# 0 printed its first row; killed=1 when it still ran then; rcs[]
kill_rank() {
	local prog=$1 name=$2 nr=$3 victim=$4 r i
	local -a ps=()

	shift 4
	port=$((port + 1))
	rm -f "$TMP"/last.*
	pids=()
	for ((r = 0; r < nr; r++)); do
		"$prog" --root "127.0.0.1:$port" --rank $r --size "$nr" -m tcp -t 20 "$@" \
			>"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" </dev/null &
		ps+=($!)
		pids+=($!)
		ln -sf "$TMP/$name.$r.err" "$TMP/last.$r.err"
	done
	for ((i = 0; i < 400; i++)); do
		grep -q '^ *4096 ' "$TMP/$name.0.out" && break
		sleep 0.05
	done
	killed=0
	kill -0 "${ps[victim]}" 2>/dev/null && grep -q '^ *4096 ' "$TMP/$name.0.out" && killed=1
	kill -9 "${ps[victim]}" 2>/dev/null
	rcs=()
	for ((r = 0; r < nr; r++)); do
		# the others give up within the program's own bounds (20 s)
		{ timeout 40 tail --pid="${ps[r]}" -f /dev/null; } 2>/dev/null
		kill -9 "${ps[r]}" 2>/dev/null
		{ wait "${ps[r]}"; } 2>/dev/null
		rcs+=($?)
	done
	pids=()
}

echo "TAP version 13"
echo "1..$NTESTS"

# krdma-allreduce
ranks "$AR" ar 3 -b 64K -e 4M -f 64 -d all -n 3 -w 1 -j
check "allreduce tcp: 3 ranks, 64 KiB and 4 MiB, float and int32: exit 0, every row verified" \
	eval 'all_zero && json "$TMP/ar.0.out" "d[\"verified\"] is True and len(d[\"results\"]) == 4 and all(r[\"wrong\"] == 0 for r in d[\"results\"])"'

# krdma-shuffle
SH_OK='d["verified"] is True and [r["part_bytes"] for r in d["results"]] == [65536, 4194304] and
	all(r["wrong"] == 0 and r["bytes"] == d["mappers"] * d["reducers"] * r["part_bytes"] and r["aggbw_gbs"] > 0
	    for r in d["results"])'
ranks "$SH" sh3 3 -R 1 -b 64K -e 4M -f 64 -n 5 -w 1 -j
check "shuffle tcp: 2 mappers into 1 reducer, 64 KiB and 4 MiB: exit 0, every byte verified" \
	eval 'all_zero && json "$TMP/sh3.0.out" "$SH_OK and d[\"mappers\"] == 2 and [p[\"role\"] for p in d[\"peers\"]] == [\"reducer 0\", \"mapper 0\", \"mapper 1\"]"'
ranks "$SH" sh5 5 -R 2 -b 64K -e 4M -f 64 -n 3 -w 1 -j
check "shuffle tcp: 3 mappers into 2 reducers: exit 0, every byte verified" \
	eval 'all_zero && json "$TMP/sh5.0.out" "$SH_OK and d[\"mappers\"] == 3 and d[\"reducers\"] == 2"'
ranks "$SH" shx 3 -R 1 -b 64K -n 1 -w 0 -j --inject-error
check "shuffle tcp: a wrong byte is caught: every rank exits 1, 1 wrong byte" \
	eval '((rcs[0] == 1 && rcs[1] == 1 && rcs[2] == 1)) &&
	      json "$TMP/shx.0.out" "d[\"verified\"] is False and [r[\"wrong\"] for r in d[\"results\"]] == [1]"'
kill_rank "$SH" shk 3 1 -R 1 -b 4K -e 4M -f 4 -n 2000 -w 0 2>/dev/null
check "shuffle tcp: mapper 0 (rank 1) killed mid-run; ranks 0 and 2 exit 1 naming it" \
	eval '((killed == 1 && rcs[0] == 1 && rcs[2] == 1)) &&
	      grep -q "aborted: rank 1 (mapper 0) is gone" "$TMP/shk.0.err" &&
	      grep -q "aborted: rank 1 (mapper 0) is gone" "$TMP/shk.2.err"'
grep -h "aborted" "$TMP"/shk.[02].err | diag

# krdma-load
"$LD" --make-dataset "$TMP/ds" 32M >/dev/null
check "load: --make-dataset writes 32 MiB" test "$(stat -c %s "$TMP/ds")" -eq $((32 << 20))

# load NAME SAMPLE CLIENT_ARGS...: a server (--clients 2) and 2 clients at
# once; outputs in $TMP/NAME.{srv,c1,c2}.{out,err}; statuses srv_rc, c_rc[]
load() {
	local name=$1 sample=$2 c
	local -a ps=()

	shift 2
	port=$((port + 1))
	rm -f "$TMP"/last.*
	timeout -k 5 90 "$LD" --serve "$TMP/ds" -s "$sample" --listen "127.0.0.1:$port" \
		--tcp --clients 2 -j >"$TMP/$name.srv.out" 2>"$TMP/$name.srv.err" </dev/null &
	local sp=$!
	for c in 1 2; do
		timeout -k 5 60 "$LD" --server "127.0.0.1:$port" -m tcp -t 20 --seed $c -j "$@" \
			>"$TMP/$name.c$c.out" 2>"$TMP/$name.c$c.err" </dev/null &
		ps+=($!)
		ln -sf "$TMP/$name.c$c.err" "$TMP/last.c$c.err"
	done
	ln -sf "$TMP/$name.srv.err" "$TMP/last.srv.err"
	c_rc=()
	for c in 0 1; do
		wait "${ps[c]}"
		c_rc+=($?)
	done
	wait $sp
	srv_rc=$?
}

# LD_OK: test_lib.sh
declare -A rate
for sample in 64K 4M; do
	if [[ $sample == 64K ]]; then args=(-b 32 -n 200); bytes=65536; else args=(-b 4 -n 20); bytes=4194304; fi
	load "ld$sample" $sample "${args[@]}"
	check "load tcp: samples of $sample, 2 clients at once: all exit 0, every sample verified" \
		eval '((srv_rc == 0 && c_rc[0] == 0 && c_rc[1] == 0)) &&
		      json "$TMP/ld$sample.c1.out" "$LD_OK and d[\"sample_bytes\"] == $bytes" &&
		      json "$TMP/ld$sample.c2.out" "$LD_OK and d[\"sample_bytes\"] == $bytes" &&
		      json "$TMP/ld$sample.srv.out" "d[\"clients\"] == 2 and d[\"failed\"] == 0"'
	rate[$sample]=$("$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%.0f samples/s, %.1f MB/s" % (d["samples_per_s"], d["bytes_per_s"] / 1e6))
' "$TMP/ld$sample.c1.out" 2>/dev/null)
done

load ldx 64K -b 8 -n 3 --inject-error
check "load tcp: a wrong sample is caught: the clients exit 1, 1 wrong sample each" \
	eval '((c_rc[0] == 1 && c_rc[1] == 1 && srv_rc == 1)) &&
	      json "$TMP/ldx.c1.out" "d[\"verified\"] is False and d[\"wrong\"] == 1" &&
	      grep -q "wrong samples; the first: sample" "$TMP/ldx.c1.err"'

# the server killed while 2 clients fetch: killed (1 when it served both
# then), c_rc[]
kill_server() {
	local i c p sp cp1 cp2

	port=$((port + 1))
	rm -f "$TMP"/last.*
	"$LD" --serve "$TMP/ds" -s 64K --listen "127.0.0.1:$port" -m tcp >"$TMP/ldk.srv.out" 2>&1 </dev/null &
	sp=$!
	pids=("$sp")
	ln -sf "$TMP/ldk.srv.out" "$TMP/last.srv.err"
	for c in 1 2; do
		"$LD" --server "127.0.0.1:$port" -m tcp -t 20 -b 16 -d 60 >"$TMP/ldk.c$c.out" 2>"$TMP/ldk.c$c.err" </dev/null &
		eval "cp$c=\$!"
		pids+=($!)
		ln -sf "$TMP/ldk.c$c.err" "$TMP/last.c$c.err"
	done
	for ((i = 0; i < 200; i++)); do
		(($(grep -c 'serving by' "$TMP/ldk.srv.out") == 2)) && break
		sleep 0.05
	done
	sleep 0.5
	killed=0
	kill -0 $sp 2>/dev/null && (($(grep -c 'serving by' "$TMP/ldk.srv.out") == 2)) && killed=1
	kill -9 $sp 2>/dev/null
	{ wait $sp; } 2>/dev/null
	c_rc=()
	for c in 1 2; do
		eval "p=\$cp$c"
		{ timeout 40 tail --pid="$p" -f /dev/null; } 2>/dev/null
		kill -9 "$p" 2>/dev/null
		{ wait "$p"; } 2>/dev/null
		c_rc+=($?)
	done
	pids=()
}

kill_server 2>/dev/null
check "load tcp: the server killed mid-run: both clients exit 1 naming it" \
	eval '((killed == 1 && c_rc[0] == 1 && c_rc[1] == 1)) &&
	      grep -q "aborted: the server at 127.0.0.1:$port is gone" "$TMP/ldk.c1.err" &&
	      grep -q "aborted: the server at 127.0.0.1:$port is gone" "$TMP/ldk.c2.err"'
diag <"$TMP/ldk.c1.err"

# usage errors: exit 2
check "bad usage exits 2" \
	eval '"$LD" --serve x 2>/dev/null; a=$?; "$SH" --rank 0 --size 2 -R 2 --root 127.0.0.1:1 2>/dev/null; b=$?;
	      "$LD" --server nohostport 2>/dev/null; c=$?; ((a == 2 && b == 2 && c == 2))'
check "--help exits 0" eval '"$LD" -h >/dev/null && "$SH" -h >/dev/null && "$AR" -h >/dev/null'

echo "# host TCP, one client of two at once: 64 KiB samples ${rate[64K]:-?}; 4 MiB samples ${rate[4M]:-?}"
"$PYTHON" -c '
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    for r in d["results"]:
        print("# host TCP shuffle %d mappers -> %d reducers, %8d-byte partitions: %.3f GB/s aggregate"
              % (d["mappers"], d["reducers"], r["part_bytes"], r["aggbw_gbs"]))
' "$TMP/sh3.0.out" "$TMP/sh5.0.out" 2>/dev/null
((failed == 0))
