# SPDX-License-Identifier: GPL-2.0
#
# What the workload examples' tests share (examples/test_examples_tcp.sh
# on the host, selftests/krdma_examples_test.sh in the guest); source it,
# then call ex_test_init NAME:
#
#   TMP                    a temporary directory, removed at exit, with
#                          every pid in pids[] killed
#   check DESC COMMAND...  ok N DESC when COMMAND succeeds; else not ok,
#                          with the ends of $TMP/last.* as diagnostics
#   json FILE EXPRESSION   the Python expression holds for d, FILE parsed
#                          (rows: its "results")
#   all_zero               every status in rcs[] is 0
#   diag                   stdin as "# " lines
#   AR_ROWS_OK             for json: rank 0's JSON of krdma-allreduce, 3
#                          ranks, -b 64K -e 4M -f 64 -d all -j: 4 rows,
#                          every one verified by every rank (0 wrong),
#                          busbw = algbw * 4/3 (also the two-guest test's,
#                          selftests/qemu/two-guests.sh)
#   SH_OK                  for json: rank 0's JSON of krdma-shuffle, 3
#                          ranks, -R 1 -b 64K -e 4M -f 64: mappers 0 and 1
#                          (ranks 1 and 2) into reducer 0, both sizes,
#                          every byte verified (also two-guests.sh's)
#   LD_OK                  for json: a krdma-load client's JSON, every
#                          sample verified (0 wrong); also two-guests.sh's
#
# PYTHON (python3) runs the JSON checks.
# shellcheck shell=bash

PYTHON=${PYTHON:-python3}
# shellcheck disable=SC2034 # for the tests that source this
AR_ROWS_OK='d["verified"] is True and d["ranks"] == 3 and len(rows) == 4 and
	sorted((r["size"], r["count"], r["type"]) for r in rows) ==
	[(65536, 16384, "float"), (65536, 16384, "int32"),
	 (4194304, 1048576, "float"), (4194304, 1048576, "int32")] and
	all(r["verified"] is True and r["wrong"] == 0 and r["time_us"] > 0 and
	    abs(r["busbw_gbs"] - r["algbw_gbs"] * 4 / 3) <= 2e-6 + 1e-4 * r["busbw_gbs"]
	    for r in rows)'
# shellcheck disable=SC2034
SH_OK='d["verified"] is True and d["ranks"] == 3 and d["mappers"] == 2 and
	[r["part_bytes"] for r in rows] == [65536, 4194304] and
	all(r["verified"] is True and r["wrong"] == 0 and r["time_us"] > 0 and
	    r["bytes"] == 2 * r["part_bytes"] for r in rows) and
	[p["role"] for p in d["peers"]] == ["reducer 0", "mapper 0", "mapper 1"]'
# shellcheck disable=SC2034
LD_OK='d["verified"] is True and d["wrong"] == 0 and d["samples"] == d["batches"] * d["batch"] > 0 and
	d["bytes"] == d["samples"] * d["sample_bytes"] and d["samples_per_s"] > 0 and d["checksum"] == "xxh64"'
n=0
failed=0
pids=()

ex_cleanup() {
	local p

	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}

ex_test_init() {
	TMP=$(mktemp -d "/tmp/$1.XXXXXX") || exit 1
	trap ex_cleanup EXIT
}

check() {
	local desc=$1 f

	shift
	n=$((n + 1))
	"$@" && { echo "ok $n $desc"; return; }
	failed=$((failed + 1))
	echo "not ok $n $desc"
	for f in "$TMP"/last.*; do
		[[ -s $f ]] && tail -n 12 "$f" | sed "s|^|# ${f##*/}: |"
	done
}

json() {
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = d.get("results")
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
' "$1" "$2" 2>>"$TMP/last.json.err"
}

# shellcheck disable=SC2154 # rcs[]: the caller's
all_zero() {
	local rc

	for rc in "${rcs[@]}"; do
		((rc == 0)) || return 1
	done
}

diag() {
	sed 's/^/# /'
}
