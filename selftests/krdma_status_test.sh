#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Accounting and visibility, in the guest test bed (root; rxe0 and siw0,
# krdma loaded, debugfs mounted). Prints TAP.
#
# - debugfs has connections, buffers, users and stats;
# - krdmactl set refuses unknown names and bad values (nothing written),
#   the module refuses bad values too, and a good value shows in sysfs,
#   status and status -j;
# - on rxe and on siw, with selftests/krdma_status_peer holding one
#   connection whose traffic is known (verified WRITEs, READs,
#   SEND/RECVs, atomics on rxe): debugfs counts exactly that traffic on
#   both ends; status -j says the same as debugfs, and the text as the
#   JSON; the peer's buffers are listed with their sizes and grants; the
#   tracepoints saw the connections come up; a WRITE with a token of
#   another connection fails, the trace has the failed operation and the
#   connection going to ERROR, debugfs its failure counters; once the
#   peer exits, the trace saw every connection end, and nothing of it is
#   left in the registry or in the users file;
# - per-user limits: as uid 65534, the connection, the buffer and the
#   grant past max_conns_per_user / max_bufs_per_user /
#   max_grants_per_user fail with EMFILE (accept too), and so do the
#   listener and the connections whose queue entries would pass
#   max_queue_depth_per_user, and on siw the grants and the local windows
#   of large SENDs past max_window_pages_per_user (and a local window
#   past max_grants_per_user); a destroyed buffer counts while a grant
#   holds its pages; the kernel log names the parameter, users
#   shows the count, which is gone after exit; root passes the limit
#   (CAP_SYS_RESOURCE), root without CAP_SYS_RESOURCE does not.
# Everything changed (parameters, /dev/krdma's mode, the trace instance)
# is restored.

# shellcheck disable=SC2317,SC2016,SC2034 # functions and eval strings run through check()
set -u
cd "$(dirname "$0")/.." || exit 1

K=$PWD/userspace-tools/krdmactl
PEER=$PWD/selftests/krdma_status_peer
PYTHON=${PYTHON:-python3}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
DBG=/sys/kernel/debug/krdma
PARAMS=/sys/module/krdma/parameters
TRACEFS=/sys/kernel/tracing
INST=$TRACEFS/instances/krdma_status_test
NOBODY=65534
SIZE=65536
COUNT=3
NTESTS=50

TMP=$(mktemp -d /tmp/krdma_status_test.XXXXXX) || exit 1
saved_params=()
dev_mode=
peer_pid=
record_cmd=
cleanup() {
	local p

	[[ -n $peer_pid ]] && kill "$peer_pid" 2>/dev/null
	for p in "${saved_params[@]}"; do
		echo "${p#*=}" >"$PARAMS/${p%%=*}" 2>/dev/null
	done
	[[ -n $dev_mode ]] && chmod "$dev_mode" /dev/krdma
	[[ -d $INST ]] && rmdir "$INST" 2>/dev/null
	[[ -n $record_cmd ]] && echo "$record_cmd" >$TRACEFS/options/record-cmd
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. selftests/lib.sh
# check's diagnostics: the peer's output too, 25 lines of each
CHECK_FILES="py.err peer.out peer.err err out"
CHECK_LINES=25

# run SECONDS ARGS...: krdmactl ARGS into $TMP/out, $TMP/err; status in $rc
run() {
	local secs=$1

	shift
	timeout -k 5 "$secs" "$K" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
}

# py EXPRESSION [ARGS...]: true when the Python expression holds. Defined:
# dbg(name): the lines of a debugfs file as dicts; js(): $TMP/out as JSON;
# peer(): what the peer printed ({"client": {...}, "server": ..., ...});
# conn_of(lines, side): the line of the peer's connection of that side
py() {
	"$PYTHON" - "$DBG" "$TMP" "$@" >"$TMP/py.out" 2>"$TMP/py.err" <<'EOF'
import json, re, sys
DBG, TMP, EXPR = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]

def kv(line):
    return dict(t.split("=", 1) for t in line.split() if "=" in t)

def dbg(name):
    with open(DBG + "/" + name) as f:
        return [kv(l) for l in f if l.strip()]

def js():
    with open(TMP + "/out") as f:
        return json.load(f)

# status -j's names of the debugfs keys it renames (Documentation/cli.rst)
JSON_KEY = {"conns": "connections", "bufs": "buffers",
            "max_conns": "max_connections", "max_bufs": "max_buffers",
            "qdepth": "queue_entries", "max_qdepth": "max_queue_entries",
            "wpages": "window_pages", "max_wpages": "max_window_pages",
            "dev": "ifname", "dev_index": "ifindex", "qp": "lqpn",
            "peer_qp": "rqpn"}

def peer():
    d = {"statuses": []}
    with open(TMP + "/peer.out") as f:
        for l in f:
            w = l.split()
            if not w:
                continue
            if w[0] == "conn":
                d[w[1]] = kv(l)
            elif w[0] == "expect":
                d["expect_" + w[1]] = {k: int(v) for k, v in kv(l).items()}
            elif w[0] == "buffers":
                b = kv(l)
                d["pid"] = b["pid"]
                d["sizes"] = sorted(int(x) for x in b["sizes"].split(","))
                d["grants"] = {int(x.split(":")[0]): int(x.split(":")[1])
                               for x in b["grants"].split(",")}
            elif re.match(r"^[A-Z_]+ status=\d+$", l.strip()):
                d["statuses"].append((w[0], int(w[1].split("=")[1])))
    return d

def conn_of(lines, side):
    p = peer()[side]
    m = [c for c in lines if c.get("local") == p["local"] and
         c.get("peer") == p["peer"]]
    return m[0] if len(m) == 1 else None

def counters_match(c, expect):
    # every counter named in expect, and posted == done, failed == 0 for
    # every class of the connection
    for k, v in expect.items():
        if int(c[k]) != v:
            print("%s=%s, want %d" % (k, c[k], v), file=sys.stderr)
            return False
    for cls in ("write", "read", "send", "recv", "atomic"):
        if c[cls + "_posted"] != c[cls + "_done"] or c[cls + "_failed"] != "0":
            print("%s: posted %s done %s failed %s" % (cls, c[cls + "_posted"],
                  c[cls + "_done"], c[cls + "_failed"]), file=sys.stderr)
            return False
    return True

def trace():
    with open(TMP + "/trace") as f:
        return f.read()

res = eval("(" + EXPR + ")")
if not res:
    print("false: " + EXPR, file=sys.stderr)
sys.exit(0 if res else 1)
EOF
}

param() {
	cat "$PARAMS/$1"
}

save_param() {
	saved_params+=("$1=$(param "$1")")
}

# start_peer ARGS...: ARGS in the background, talking through two FIFOs,
# its output copied to $TMP/peer.out; waits for its "ready" (false if it
# never says it)
start_peer() {
	: >"$TMP/peer.out"
	rm -f "$TMP/to_peer" "$TMP/from_peer"
	mkfifo "$TMP/to_peer" "$TMP/from_peer"
	timeout -k 5 300 "$@" <"$TMP/to_peer" >"$TMP/from_peer" 2>"$TMP/peer.err" &
	peer_pid=$!
	# the same order as the peer's opens: neither blocks the other
	exec {peer_in}>"$TMP/to_peer" {peer_outfd}<"$TMP/from_peer"
	wait_ready
}

# wait_ready: the peer's lines into $TMP/peer.out until "ready"
wait_ready() {
	local line

	while IFS= read -r -t 120 -u "$peer_outfd" line; do
		echo "$line" >>"$TMP/peer.out"
		[[ $line == ready ]] && return 0
	done
	return 1
}

# stop_peer: end its stdin, wait for it; its status in $peer_rc
stop_peer() {
	local line

	exec {peer_in}>&-
	while IFS= read -r -t 120 -u "$peer_outfd" line; do
		echo "$line" >>"$TMP/peer.out"
	done
	exec {peer_outfd}<&-
	wait "$peer_pid"
	peer_rc=$?
	peer_pid=
}

# As uid 65534, without capabilities
AS_NOBODY=(setpriv "--reuid=$NOBODY" "--regid=$NOBODY" --clear-groups)

# ended_all ID...: the peer exited 0, the trace has the end of each of the
# 4 connections, exactly once (ERROR and CLOSED are final), and one at
# least closed by its owner (CLOSED, error 0)
ended_all() {
	((peer_rc == 0)) &&
		py 'len(ARGS) == 4 and re.search(r"new=CLOSED error=0 ", trace()) and
		    all(len(re.findall(r"krdma_conn_state: conn=%s old=\w+ new=(?:CLOSED|ERROR) " % i,
		                       trace())) == 1
		        for i in ARGS)' "$@"
}

snapshot_trace() {
	cat "$INST/trace" >"$TMP/trace"
}

# wait_gone PYTHON-EXPRESSION: up to 5 s for it to hold (objects of an
# exited process are freed by work items: no event tells when)
wait_gone() {
	local i

	for ((i = 0; i < 50; i++)); do
		py "$1" && return 0
		sleep 0.1
	done
	return 1
}

# schema_and_py OBJECT EXPRESSION: $TMP/out is an OBJECT of cli.rst, and
# the expression holds (py)
schema_and_py() {
	json_schema "$1" && py "$2"
}

echo "TAP version 13"
echo "1..$NTESTS"

if [[ ! -x $K || ! -x $PEER ]]; then
	for ((i = 0; i < NTESTS; i++)); do not_ok "krdmactl and krdma_status_peer are built"; done
	exit 1
fi
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
mountpoint -q $TRACEFS || mount -t tracefs nodev $TRACEFS
for p in ack_timeout max_conns_per_user max_bufs_per_user max_grants_per_user \
	max_queue_depth_per_user max_window_pages_per_user; do
	save_param "$p"
done

# 1: the files
check "debugfs has connections, buffers, users and stats" \
	eval '[[ -r $DBG/connections && -r $DBG/buffers && -r $DBG/users && -r $DBG/stats ]] &&
	      py "len(dbg(\"stats\")) == 1 and \"conns_created\" in dbg(\"stats\")[0]"'

# 2-6: set
before=$(param max_conns_per_user)
run 10 set nosuch_param=1
check "set refuses an unknown parameter: exit 2, names it and the writable ones" \
	eval '((rc == 2)) && grep -q "unknown parameter .nosuch_param." "$TMP/err" &&
	      grep -q "max_conns_per_user" "$TMP/err"'
bad=0
for v in max_conns_per_user=0 max_conns_per_user=1048577 max_conns_per_user=abc \
	max_conns_per_user=-1 max_conns_per_user= ack_timeout=32 \
	"max_bufs_per_user=5 max_conns_per_user=0" ucq_entries=128; do
	# shellcheck disable=SC2086 # two arguments in one case
	run 10 set $v
	if ((rc != 2)); then
		echo "# set $v: exit $rc"
		bad=1
	fi
done
check "set refuses bad values (range, not a number, read-only) with exit 2, writes nothing" \
	eval '((bad == 0)) && [[ $(param max_conns_per_user) == "$before" ]] &&
	      [[ $(param max_bufs_per_user) != 5 ]]'
mod_bad=0
for v in "max_conns_per_user 0" "max_bufs_per_user 1048577" "ack_timeout 32" \
	"max_conns_per_user x"; do
	read -r name val <<<"$v"
	old=$(param "$name")
	if (echo "$val" >"$PARAMS/$name") 2>/dev/null || [[ $(param "$name") != "$old" ]]; then
		echo "# the module took $name=$val"
		mod_bad=1
	fi
done
check "the module refuses out-of-range values itself" eval '((mod_bad == 0))'
run 10 set max_conns_per_user=77 max_bufs_per_user=99 ack_timeout=17
check "set writes good values: exit 0, OLD -> NEW, in sysfs" \
	eval '((rc == 0)) && grep -q "^max_conns_per_user: .* -> 77$" "$TMP/out" &&
	      [[ $(param max_conns_per_user) == 77 && $(param max_bufs_per_user) == 99 &&
	         $(param ack_timeout) == 17 ]]'
run 30 status -j
check "status -j shows the values set" \
	py 'js()["parameters"]["max_conns_per_user"]["value"] == 77 and
	    js()["parameters"]["max_bufs_per_user"]["value"] == 99 and
	    js()["parameters"]["ack_timeout"] == {"value": 17, "writable": True, "min": 0, "max": 31} and
	    js()["parameters"]["ucq_entries"]["writable"] is False'
run 30 status
check "status shows the values set" \
	eval '((rc == 0)) && grep -Eq "^  max_conns_per_user +77 +writable, 1..1048576" "$TMP/out" &&
	      grep -Eq "^  max_bufs_per_user +99 " "$TMP/out"'
for p in "${saved_params[@]}"; do
	echo "${p#*=}" >"$PARAMS/${p%%=*}"
done

# 7-32: traffic on each device (13 each)
# An instance copies record-cmd from the top level when it is created.
# With record-cmd set, enabling the krdma events also hooks sched_switch,
# which live-patches __schedule() on every CPU; under TCG a CPU has been
# seen to trap on the int3 of that patch after it was finished (an
# "Oops: int3" in __schedule on 6.12).  The comm of each event is not
# needed here, so the scheduler is left alone.
record_cmd=$(<$TRACEFS/options/record-cmd)
echo 0 >$TRACEFS/options/record-cmd
[[ -d $INST ]] && rmdir "$INST"
mkdir "$INST"
for dev in rxe siw; do
	addr=$RXE_ADDR
	[[ $dev == siw ]] && addr=$SIW_ADDR
	echo 0 >"$INST/tracing_on" 2>/dev/null
	echo >"$INST/trace" 2>/dev/null
	echo 1 >"$INST/events/krdma/enable" 2>/dev/null
	echo 1 >"$INST/tracing_on" 2>/dev/null

	start_peer "$PEER" traffic "$addr" $SIZE $COUNT
	check "$dev: the peer moved and verified $COUNT x ($SIZE B WRITE, READ, 64 B SEND/RECV, atomics)" \
		py 'peer()["client"] and peer()["server"]'
	check "$dev: debugfs counts the client's operations exactly" \
		py 'counters_match(conn_of(dbg("connections"), "client"), peer()["expect_client"])'
	check "$dev: debugfs counts the server's RECVs exactly" \
		py 'counters_match(conn_of(dbg("connections"), "server"), peer()["expect_server"])'
	cp "$DBG/connections" "$TMP/connections"
	run 30 status -j
	check "$dev: status -j (a STATUS of cli.rst) says what debugfs says about both connections" \
		schema_and_py STATUS 'all(
		      any(str(j["id"]) == c["id"] and j["state"] == c["state"] and
		          j["local"] == c["local"] and j["peer"] == c["peer"] and
		          str(j["owner"]["pid"]) == c["pid"] and j["owner"]["kind"] == "user" and
		          all(str(j["ops"][k][m]) == c[k + "_" + m]
		              for k in ("write", "read", "send", "recv", "atomic")
		              for m in ("posted", "done", "failed", "bytes"))
		          for j in js()["connections"])
		      for c in (conn_of(dbg("connections"), "client"), conn_of(dbg("connections"), "server")))'
	check "$dev: status -j lists the peer's buffers with their sizes and grants" \
		py 'sorted(b["size"] for b in js()["buffers"] if str(b["owner"]["pid"]) == peer()["pid"]) == peer()["sizes"] and
		    all(any(b["size"] == s and b["grants"] == g for b in js()["buffers"]
		            if str(b["owner"]["pid"]) == peer()["pid"])
		        for s, g in peer()["grants"].items()) and
		    sum(b["grants"] for b in js()["buffers"] if str(b["owner"]["pid"]) == peer()["pid"]) ==
		        sum(peer()["grants"].values())'
	check "$dev: status -j users: root holds the peer's 2 connections and buffers, 2 files" \
		py '[ (u["connections"], u["buffers"], u["files"]) for u in js()["users"] if u["uid"] == 0] ==
		    [(2, len(peer()["sizes"]), 2)] and
		    js()["users"] == [{JSON_KEY.get(k, k): (int(v) if v.isdigit() else v) for k, v in u.items()} | {"user": "root"}
		                      for u in dbg("users")]'
	cp "$TMP/out" "$TMP/status.json"
	run 30 status
	check "$dev: status text shows the same connections and counters as -j" \
		py 'all(
		      re.search(r"conn %d: %s, %s port %d, %s -> %s" % (c["id"], c["state"], c["ifname"], c["port"],
		                re.escape(c["local"]), re.escape(c["peer"])), open(TMP + "/out").read()) and
		      all(re.search(r"\n      %-8s +%d +%d +%d +%d\n" % (k, c["ops"][k]["posted"], c["ops"][k]["done"],
		                    c["ops"][k]["failed"], c["ops"][k]["bytes"]),
		                    open(TMP + "/out").read().split("conn %d:" % c["id"])[1].split("\n  conn ")[0] + "\n")
		          for k in ("write", "read", "send", "recv", "atomic"))
		      for c in json.load(open(TMP + "/status.json"))["connections"])'

	snapshot_trace
	check "$dev: the trace saw both connections come up" \
		py 'all(re.search(r"krdma_conn_state: conn=%s old=CONNECTING new=CONNECTED error=0 peer=%s" %
		                  (conn_of(dbg("connections"), s)["id"], re.escape(peer()[s]["peer"])), trace())
		        for s in ("client", "server"))'

	echo fail >&"$peer_in"
	wait_ready
	cid=$(py 'print(conn_of([kv(l) for l in open(TMP + "/connections")], "client")["id"]) or True' &&
		cat "$TMP/py.out")
	check "$dev: a WRITE with another connection's token fails (statuses: $(grep status= "$TMP/peer.out" | tr '\n' ' '))" \
		py 'len(peer()["statuses"]) == 2 and any(s for op, s in peer()["statuses"])'
	snapshot_trace
	check "$dev: the trace has each failed operation and the connection going to ERROR" \
		py 'all(re.search(r"krdma_op_failed: conn=%s op=%s status=\w+ \(%d\)" % (ARGS[0], op, s), trace())
		        for op, s in peer()["statuses"] if s) and
		    re.search(r"krdma_conn_state: conn=%s old=CONNECTED new=ERROR error=-\d+" % ARGS[0], trace())' \
		"$cid"
	check "$dev: debugfs counts the failures and keeps the last error" \
		py '[c for c in dbg("connections") if c["id"] == ARGS[0]] and
		    (lambda c: c["state"] == "ERROR" and
		      int(c["write_failed"]) == sum(1 for op, s in peer()["statuses"] if op == "WRITE" and s) and
		      int(c["recv_failed"]) == sum(1 for op, s in peer()["statuses"] if op == "RECV" and s) and
		      int(c["last_status"]) in [s for op, s in peer()["statuses"] if s])(
		      [c for c in dbg("connections") if c["id"] == ARGS[0]][0])' "$cid"
	read -r -a ids < <(sed 's/^id=\([0-9]*\) .*/\1/' "$DBG/connections" | tr '\n' ' ')
	stop_peer
	snapshot_trace
	check "$dev: the peer exits 0; the trace saw its 4 connections end" ended_all "${ids[@]}"
	check "$dev: nothing of the peer is left: no connection, buffer or user" \
		wait_gone 'not dbg("connections") and
		           not [b for b in dbg("buffers") if b["pid"] == peer()["pid"]] and
		           not [u for u in dbg("users") if u["uid"] == "0"]'
done
echo 0 >"$INST/events/krdma/enable" 2>/dev/null

# the per-user limits; the kernel log is read from a mark on
dev_mode=$(stat -c %a /dev/krdma)
chmod 0666 /dev/krdma
ulimit -l unlimited
echo 3 >"$PARAMS/max_conns_per_user"
echo 3 >"$PARAMS/max_bufs_per_user"
echo 3 >"$PARAMS/max_grants_per_user"
echo 524288 >"$PARAMS/max_queue_depth_per_user"
echo 4194304 >"$PARAMS/max_window_pages_per_user"
py 'print(*(dbg("stats")[0][k] for k in ("conn_limit_refused", "buf_limit_refused",
	"grant_limit_refused", "qdepth_limit_refused", "wpages_limit_refused"))) or True'
read -r -a refused_before <"$TMP/py.out"
mark="krdma_status_test: limits $$ $SECONDS"
echo "$mark" >/dev/kmsg
# the kernel log since the mark
klog() {
	dmesg | sed -n "/$mark/,\$p"
}

start_peer "${AS_NOBODY[@]}" "$PEER" conns "$RXE_ADDR" 4
check "uid $NOBODY: 3 connections, the 4th fails with EMFILE, so does accept until one is destroyed" \
	eval 'grep -qx "connect 1 ok" "$TMP/peer.out" && grep -qx "connect 3 ok" "$TMP/peer.out" &&
	      grep -qx "connect 4 EMFILE" "$TMP/peer.out" && grep -qx "accept EMFILE" "$TMP/peer.out" &&
	      grep -qx "accept_after_destroy ok" "$TMP/peer.out"'
run 30 status -j
check "uid $NOBODY holds 3 connections of 3: users file and status -j" \
	py '[u for u in dbg("users") if u["uid"] == "65534"] ==
	    [{"uid": "65534", "files": "1", "conns": "3", "bufs": "0", "max_conns": "3", "max_bufs": "3",
	      "grants": "0", "max_grants": "3", "qdepth": str(8 * 256 + 3 * 256), "max_qdepth": "524288",
	      "wpages": "0", "max_wpages": "4194304"}] and
	    [(u["connections"], u["max_connections"], u["user"]) for u in js()["users"] if u["uid"] == 65534] ==
	    [(3, 3, "nobody")]'
check "the kernel log says which parameter to raise" \
	eval 'klog | grep -q "uid $NOBODY holds 3 connections .*raise it: krdmactl set max_conns_per_user=N"'
stop_peer
check "after the process exits, uid $NOBODY holds nothing" \
	eval '((peer_rc == 0)) && wait_gone "not [u for u in dbg(\"users\") if u[\"uid\"] == \"65534\"]"'

start_peer "${AS_NOBODY[@]}" "$PEER" bufs 4
check "uid $NOBODY: 3 buffers, the 4th fails with EMFILE" \
	eval 'grep -qx "buf 3 ok" "$TMP/peer.out" && grep -qx "buf 4 EMFILE" "$TMP/peer.out" &&
	      py "[u[\"bufs\"] for u in dbg(\"users\") if u[\"uid\"] == \"65534\"] == [\"3\"]" &&
	      klog | grep -q "raise it: krdmactl set max_bufs_per_user=N"'
stop_peer

start_peer "${AS_NOBODY[@]}" "$PEER" grants "$RXE_ADDR" 4
check "uid $NOBODY: 3 grants, the 4th fails with EMFILE until one is destroyed" \
	eval 'grep -qx "grant 3 ok" "$TMP/peer.out" && grep -qx "grant 4 EMFILE" "$TMP/peer.out" &&
	      grep -qx "grant_after_destroy ok" "$TMP/peer.out" &&
	      py "[u[\"grants\"] for u in dbg(\"users\") if u[\"uid\"] == \"65534\"] == [\"3\"]" &&
	      klog | grep -q "raise it: krdmactl set max_grants_per_user=N"'
stop_peer
check "after the process exits, uid $NOBODY holds no grant" \
	eval '((peer_rc == 0)) && wait_gone "not [u for u in dbg(\"users\") if u[\"uid\"] == \"65534\"]"'

# A buffer counts until its pages go: its grants keep them after its DESTROY
start_peer "${AS_NOBODY[@]}" "$PEER" granted_bufs "$RXE_ADDR"
check "uid $NOBODY: a destroyed buffer whose grant holds its pages still counts: EMFILE until the grant goes" \
	eval 'grep -qx "buf_while_granted EMFILE" "$TMP/peer.out" && grep -qx "buf_after_grant ok" "$TMP/peer.out" &&
	      grep -qx "buf_after_destroy ok" "$TMP/peer.out" &&
	      py "[(u[\"bufs\"], u[\"grants\"]) for u in dbg(\"users\") if u[\"uid\"] == \"65534\"] == [(\"3\", \"0\")]"'
stop_peer
check "after the process exits, uid $NOBODY holds no buffer" \
	eval '((peer_rc == 0)) && wait_gone "not [u for u in dbg(\"users\") if u[\"uid\"] == \"65534\"]"'

# Window pages: every grant and local window counts its pages, a local
# window a grant too (krdma_status_peer.c says which call holds how many)
echo 40 >"$PARAMS/max_window_pages_per_user"
start_peer "${AS_NOBODY[@]}" "$PEER" windows "$SIW_ADDR"
check "uid $NOBODY: windows past 40 pages fail with EMFILE (grants, a SEND's local window), pass once one is destroyed" \
	eval 'grep -qx "grant_pages EMFILE" "$TMP/peer.out" && grep -qx "recv_big ok" "$TMP/peer.out" &&
	      grep -qx "send_big EMFILE" "$TMP/peer.out" &&
	      grep -qx "send_big_after_destroy ok" "$TMP/peer.out" && grep -qx "bytes ok" "$TMP/peer.out" &&
	      grep -qx "grant_page ok" "$TMP/peer.out" &&
	      py "[(u[\"grants\"], u[\"wpages\"], u[\"max_wpages\"]) for u in dbg(\"users\") if u[\"uid\"] == \"65534\"] ==
	          [(\"3\", \"33\", \"40\")]" &&
	      klog | grep -q "uid $NOBODY holds 32 window pages .* asks for 16 more, past max_window_pages_per_user; raise it: krdmactl set max_window_pages_per_user=N"'
check "uid $NOBODY: local windows count as grants: a 4th window fails with EMFILE" \
	eval 'grep -qx "grant_page_past_grants EMFILE" "$TMP/peer.out"'
stop_peer
check "after the process exits, uid $NOBODY holds no window page" \
	eval '((peer_rc == 0)) && wait_gone "not [u for u in dbg(\"users\") if u[\"uid\"] == \"65534\"]"'
echo 4194304 >"$PARAMS/max_window_pages_per_user"

# Queue entries: sq_depth + rq_depth per connection, backlog times that per
# listener (krdma_status_peer.c says which call asks for how many)
echo 10 >"$PARAMS/max_conns_per_user"
echo 1100 >"$PARAMS/max_queue_depth_per_user"
start_peer "${AS_NOBODY[@]}" "$PEER" qdepth "$RXE_ADDR"
check "uid $NOBODY: listeners and connections past 1100 queue entries fail with EMFILE, accept until one is destroyed" \
	eval 'grep -qx "listen ok" "$TMP/peer.out" && grep -qx "listen_big EMFILE" "$TMP/peer.out" &&
	      grep -qx "connect_small ok" "$TMP/peer.out" && grep -qx "connect_huge EMFILE" "$TMP/peer.out" &&
	      grep -qx "accept_small ok" "$TMP/peer.out" && grep -qx "connect_default ok" "$TMP/peer.out" &&
	      grep -qx "accept_default EMFILE" "$TMP/peer.out" &&
	      grep -qx "accept_after_destroy ok" "$TMP/peer.out" &&
	      py "[(u[\"conns\"], u[\"qdepth\"], u[\"max_qdepth\"]) for u in dbg(\"users\") if u[\"uid\"] == \"65534\"] ==
	          [(\"3\", \"1056\", \"1100\")]" &&
	      klog | grep -q "uid $NOBODY holds 512 queue entries .* asks for 1024 more, past max_queue_depth_per_user; raise it: krdmactl set max_queue_depth_per_user=N"'
stop_peer
check "after the process exits, uid $NOBODY holds no queue entry" \
	eval '((peer_rc == 0)) && wait_gone "not [u for u in dbg(\"users\") if u[\"uid\"] == \"65534\"]"'
echo 3 >"$PARAMS/max_conns_per_user"

start_peer "$PEER" bufs 4
check "root (CAP_SYS_RESOURCE) passes the limit: 4 buffers of 3" \
	eval '! grep -q EMFILE "$TMP/peer.out" && grep -qx "buf 4 ok" "$TMP/peer.out" &&
	      py "[u[\"bufs\"] for u in dbg(\"users\") if u[\"uid\"] == \"0\"] == [\"4\"]"'
stop_peer

capsh_refusals=0
if command -v capsh >/dev/null; then
	capsh_refusals=1
	start_peer capsh --drop=cap_sys_resource -- -c "exec $PEER bufs 4"
	check "root without CAP_SYS_RESOURCE is limited: the 4th buffer fails with EMFILE" \
		eval 'grep -qx "buf 3 ok" "$TMP/peer.out" && grep -qx "buf 4 EMFILE" "$TMP/peer.out"'
	stop_peer
else
	skip "root without CAP_SYS_RESOURCE is limited" "no capsh"
fi
check "stats counts the refusals" \
	py '(lambda s, b: int(s["conn_limit_refused"]) == int(b[0]) + 2 and
	                  int(s["buf_limit_refused"]) == int(b[1]) + 2 + int(b[5]) and
	                  int(s["grant_limit_refused"]) == int(b[2]) + 2 and
	                  int(s["qdepth_limit_refused"]) == int(b[3]) + 3 and
	                  int(s["wpages_limit_refused"]) == int(b[4]) + 2)(dbg("stats")[0], ARGS)' \
	"${refused_before[@]}" "$capsh_refusals"
for p in "${saved_params[@]}"; do
	echo "${p#*=}" >"$PARAMS/${p%%=*}"
done
chmod "$dev_mode" /dev/krdma
dev_mode=

((n == NTESTS)) || echo "# ran $n tests, planned $NTESTS"
((failed == 0))
