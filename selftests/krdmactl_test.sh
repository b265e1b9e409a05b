#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdmactl selftests: the CLI against the real module, in the guest test
# bed (run as root from anywhere; rxe0 and siw0 up, krdma.ko loaded, see
# selftests/qemu/guest-setup.sh). Prints TAP.
#
# - version works and names the loaded module;
# - dev lists rxe0 and siw0; dev -j is valid JSON naming the same
#   devices as the text output;
# - serve + ping (JSON) and serve + xfer, on rxe and on siw: every round
#   verified, the server exits by itself with status 0 and reports the
#   client's rounds;
# - ping to a port nobody listens on fails quickly, with status 1 and a
#   message that says what to do;
# - on siw, a connect whose source port (rdma_cm's pick) a TCP socket
#   holds takes another port, before it posted its RECVs;
# - stock tools and krdmactl refuse each other at once, on rxe and on siw:
#   `rping -c` and `ib_write_bw -R` (perftest) against serve are rejected
#   and exit non-zero by themselves, well before their timeout, serve
#   tells on stdout that it turned each away (not a krdma peer, from the
#   client's address; within 10 s), and then still serves a ping; `ping`
#   against `rping -s` fails with "not krdma", and rping -s ends by itself
#   too (skipped without rping or ib_write_bw);
# - serve on 127.0.0.1 (lo has no RDMA device) says so and `krdmactl up`:
#   a LISTEN that fails exits 1, one that stands warns;
# - bad usage exits 2; --help works for every subcommand.
# Every command runs under `timeout`.

# shellcheck disable=SC2317,SC2016 # functions and single-quoted code run through check() and eval
set -u
cd "$(dirname "$0")/.." || exit 1

K=$PWD/userspace-tools/krdmactl
PYTHON=${PYTHON:-python3}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
RXE_DEV=${KRDMA_RXE_DEV:-rxe0}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
SIW_DEV=${KRDMA_SIW_DEV:-siw0}
COUNT=5

TMP=$(mktemp -d /tmp/krdmactl_test.XXXXXX) || exit 1
server_pid=
rping_pid=
hold_pid=
saved_range=
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
	[[ -n $rping_pid ]] && kill "$rping_pid" 2>/dev/null
	[[ -n $hold_pid ]] && kill "$hold_pid" 2>/dev/null
	[[ -n $saved_range ]] &&
		sysctl -qw net.ipv4.ip_local_port_range="$saved_range"
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=selftests/lib.sh
. selftests/lib.sh

# run SECONDS ARGS...: krdmactl ARGS into $TMP/out, $TMP/err; status in $rc
run() {
	local secs=$1

	shift
	timeout -k 5 "$secs" "$K" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
}

# json PYTHON-EXPRESSION: true when it holds for d, the parsed $TMP/out
json() {
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
' "$TMP/out" "$1" 2>>"$TMP/err"
}

# The subcommands, from the command list of `krdmactl --help`
subcommands() {
	"$K" --help 2>/dev/null |
		awk '/^Commands:/ { on = 1; next } on && NF == 0 { on = 0 }
		     on { print $1 }'
}

# Bad usages, each "ARGS" split on spaces
bad_usages=(
	""
	"bogus"
	"ping"
	"ping $RXE_ADDR -x"
	"ping $RXE_ADDR -c"
	"ping $RXE_ADDR -c many"
	"ping $RXE_ADDR -s 0"
	"ping $RXE_ADDR -s 2G"
	"ping $RXE_ADDR -p 70000"
	"ping not-an-address"
	"ping no-such-host.invalid"
	"ping $RXE_ADDR extra"
	"xfer"
	"xfer $RXE_ADDR -c 3"
	"serve extra"
	"serve -n 0"
	"serve -c 0"
	"serve -a not-an-address"
	"dev -x"
	"stat -c 2"
	"stat -i 0"
	"monitor -c 0"
	"version extra"
)

if [[ ! -x $K ]]; then
	echo "1..1"
	not_ok "userspace-tools/krdmactl is built"
	exit 1
fi
mapfile -t cmds < <(subcommands)

# version 2 + dev 5 + per transport 2 (ping, xfer) + refused 1 + per
# transport 7 (stock tools) + no device 1 + usages + help per subcommand
# + taken port 1 + stat 1 + monitor 1 + host name 1 + help listing all of serve ping xfer 1
echo "TAP version 13"
echo "1..$((2 + 5 + 2 * 2 + 1 + 2 * 7 + 1 + 1 + 1 + 1 + 1 + 1 + ${#bad_usages[@]} + ${#cmds[@]} + 1))"

# version
run 20 version
check "version exits 0" test "$rc" -eq 0
check "version names the loaded module and its ABI" \
	grep -Eq '^module: +[0-9]+\.[0-9]+\.[0-9]+ \(krdma ABI [0-9]+\)' "$TMP/out"

# dev show, dev, text and JSON
run 20 dev show
grep -E '^[^[:space:]]' "$TMP/out" | sort >"$TMP/text_devs"
dev_text_ok() {
	((rc == 0)) && grep -qx "$RXE_DEV" "$TMP/text_devs" &&
		grep -qx "$SIW_DEV" "$TMP/text_devs"
}
check "dev show exits 0 and lists $RXE_DEV and $SIW_DEV" dev_text_ok
run 20 dev
dev_brief_ok() {
	((rc == 0)) &&
		cmp -s <(awk '{ print $1 }' "$TMP/out" | sort) "$TMP/text_devs" &&
		grep -Eq "^$RXE_DEV +RoCE +ACTIVE +veth[0-9]+ +[0-9.]+ Gbps .* [0-9]+X\$" "$TMP/out" &&
		grep -Eq "^$SIW_DEV +iWARP +ACTIVE +veth[0-9]+ " "$TMP/out"
}
check "dev: one line a device, $RXE_DEV (RoCE) and $SIW_DEV (iWARP) ACTIVE on their veths" \
	dev_brief_ok
# fw_ver as ibv_devinfo shows it (0.0.0 for rxe, which has no string)
fw_want=0.0.0
if command -v ibv_devinfo >/dev/null; then
	fw_want=$(timeout 20 ibv_devinfo -d "$RXE_DEV" 2>/dev/null |
		awk '$1 == "fw_ver:" { print $2 }')
fi
run 20 dev show "$RXE_DEV"
fw_got=$(awk '$1 == "fw_ver:" { print $2 }' "$TMP/out")
check "dev show $RXE_DEV: fw_ver '$fw_got', as ibv_devinfo ('$fw_want')" \
	eval '((rc == 0)) && [[ -n $fw_want && $fw_got == "$fw_want" ]]'
run 20 dev -j
dev_json_ok() {
	((rc == 0)) && "$PYTHON" -m json.tool "$TMP/out" >/dev/null &&
		json_schema DEV
}
check "dev -j exits 0 and parses as JSON, a DEV of cli.rst" dev_json_ok
"$PYTHON" -c '
import json, sys
for x in json.load(open(sys.argv[1]))["devices"]:
    print(x["ifname"])' "$TMP/out" 2>/dev/null | sort >"$TMP/json_devs"
same_devs() {
	[[ -s $TMP/json_devs ]] && cmp -s "$TMP/text_devs" "$TMP/json_devs"
}
check "dev -j names the same devices as dev ($(tr '\n' ' ' <"$TMP/text_devs"))" \
	same_devs

# start_server ADDR: `serve -1` in the background on a free port; waits
# (bounded) for its "listening on ADDR:PORT" line and sets $port
start_server() {
	local line

	timeout -k 5 120 "$K" serve -1 -a "$1" -p 0 >"$TMP/server" 2>&1 </dev/null &
	server_pid=$!
	line=$(wait_output "$TMP/server" '^krdmactl serve: listening on ' 10 \
		"$server_pid")
	port=${line##*:}
	[[ -n $line && $port =~ ^[0-9]+$ && $port -gt 0 ]]
}

# reap PID SECONDS: wait (bounded) for the background job PID to exit,
# kill it if it does not; its exit status in $reaped_rc
reap() {
	local i

	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	kill "$1" 2>/dev/null
	wait "$1"
	reaped_rc=$?
}

# stop_server: the server must exit by itself after its one client, with
# status 0 (bounded: 10 s); sets $server_rc, appends its output to err
stop_server() {
	reap "$server_pid" 10
	server_rc=$reaped_rc
	server_pid=
	{
		echo "--- server (exit status $server_rc):"
		cat "$TMP/server"
	} >>"$TMP/err"
}

ping_ok() {
	((rc == 0 && server_rc == 0)) &&
		json "d['ok'] and d['rounds_done'] == $COUNT and
		      d['verified'] == $COUNT and d['failed'] == 0 and
		      len(d['rounds']) == $COUNT and
		      all(r['verified'] and r['write_us'] > 0 and
			  r['read_us'] > 0 and r['send_rtt_us'] > 0
			  for r in d['rounds']) and
		      d['ifname'] == '$dev' and d['error'] is None" &&
		json_schema PING &&
		grep -q "via $dev: $COUNT rounds of 64 B, every WRITE verified, bye" \
			"$TMP/server"
}

xfer_ok() {
	((rc == 0 && server_rc == 0)) &&
		json "d['ok'] and d['bytes'] == 8 << 20 and
		      d['ifname'] == '$dev' and
		      d['write']['verified'] and d['read']['verified'] and
		      d['write']['seconds'] > 0 and d['read']['mb_per_s'] > 0" &&
		json_schema XFER &&
		grep -q "via $dev: 1 round of 8 MiB, every WRITE verified, bye" \
			"$TMP/server"
}

# transport_tests LABEL ADDR DEV
transport_tests() {
	local label=$1 addr=$2 dev=$3

	if start_server "$addr"; then
		run 60 ping "$addr" -p "$port" -c $COUNT -i 20 -j
		stop_server
		check "$label: serve -1 + ping -c $COUNT -j: exit 0, JSON (a PING of cli.rst) reports $COUNT verified rounds via $dev, the server exits 0" \
			ping_ok
	else
		cp "$TMP/server" "$TMP/err"
		: >"$TMP/out"
		check "$label: serve -1 + ping: the server starts listening" false
	fi

	if start_server "$addr"; then
		run 120 xfer "$addr" -p "$port" -s 8M -j
		stop_server
		check "$label: serve -1 + xfer -s 8M -j: both ways verified via $dev (an XFER of cli.rst), the server exits 0" \
			xfer_ok
	else
		cp "$TMP/server" "$TMP/err"
		: >"$TMP/out"
		check "$label: serve -1 + xfer: the server starts listening" false
	fi
}

transport_tests "rxe" "$RXE_ADDR" "$RXE_DEV"
transport_tests "siw" "$SIW_ADDR" "$SIW_DEV"

# stat: two samples after the connections above, the second with rates
run 20 stat -j -i 0.2 -c 2
cp "$TMP/out" "$TMP/stat_lines"
stat_ok() {
	((rc == 0)) && [[ $(wc -l <"$TMP/stat_lines") -eq 2 ]] &&
		sed -n 1p "$TMP/stat_lines" >"$TMP/out" && json_schema STAT &&
		json "d['interval'] is None and d['totals']['rates'] is None and
		      d['totals']['ops']['write']['done'] > 0" &&
		sed -n 2p "$TMP/stat_lines" >"$TMP/out" && json_schema STAT &&
		json "d['interval'] >= 0.2 and d['totals']['rates'] is not None"
}
check "stat -j -i 0.2 -c 2: two STAT samples, counts then rates" stat_ok

# monitor: a ping's connections come and go (both ends are here); it
# runs until the connections are gone (bounded), then is stopped
timeout -k 5 120 "$K" monitor -j -t 100 >"$TMP/monitor" \
	2>"$TMP/monitor_err" </dev/null &
mon_pid=$!
wait_output "$TMP/monitor_err" '^krdmactl monitor: watching ' 10 "$mon_pid" \
	>/dev/null
if start_server "$RXE_ADDR"; then
	run 60 ping "$RXE_ADDR" -p "$port" -c 3 -i 300
	stop_server
fi
wait_output "$TMP/monitor" '"event":"conn_down"' 10 "$mon_pid" >/dev/null
sleep 0.5	# the other end's conn_down, in the same or the next reading
kill "$mon_pid" 2>/dev/null
wait "$mon_pid" 2>/dev/null
cp "$TMP/monitor" "$TMP/out"
cat "$TMP/monitor_err" >>"$TMP/err"
monitor_ok() {
	"$PYTHON" - "$TMP/monitor" "$RXE_DEV" <<'EOP'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [(e["event"], e["ifname"]) for e in ev]
assert ("conn_up", sys.argv[2]) in kinds and ("conn_down", sys.argv[2]) in kinds, kinds
EOP
}
check "monitor -j: ping's connections up and down on $RXE_DEV" monitor_ok

# A host name for ADDR: /etc/hosts, bind-mounted in a mount namespace of
# its own, names the rxe address krdma-peer
printf '%s krdma-peer\n' "$RXE_ADDR" >"$TMP/hosts"
if command -v unshare >/dev/null && start_server "$RXE_ADDR"; then
	timeout -k 5 60 unshare -m sh -c 'mount --bind "$1" /etc/hosts &&
		exec "$2" ping krdma-peer -p "$3" -c 1 -j' _ "$TMP/hosts" "$K" \
		"$port" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
	stop_server
	check "ping krdma-peer (a name of $RXE_ADDR in /etc/hosts): verified, the server exits 0" \
		eval '((rc == 0 && server_rc == 0)) && json "d[\"ok\"] and d[\"verified\"] == 1"'
else
	cp "$TMP/server" "$TMP/err" 2>/dev/null
	check "ping by host name: unshare and a server listening" false
fi

# Nobody listens on port 9
start=$SECONDS
run 30 ping "$RXE_ADDR" -p 9 -c 1 -t 5000
refused_ok() {
	((rc == 1 && SECONDS - start <= 10)) &&
		grep -q 'cannot connect to .*:9: Connection refused' "$TMP/err" &&
		grep -q 'krdmactl serve' "$TMP/err"
}
check "ping to a port nobody listens on: exit 1 within 10 s, says refused and what to do" \
	refused_ok

# iWARP: rdma_cm gives a connecting id a source port from
# ip_local_port_range that no RDMA id has, and siw binds a TCP socket to
# it, which fails where a TCP socket of the machine holds that port
# without SO_REUSEADDR (as the examples' rendezvous sockets do): make
# check saw "cannot connect: Address already in use". rdma_cm never hands
# out the port it handed out last, so with the range cut to [b, b+1]
# after a listener drew b+1, a connect draws b first, every time. First
# without a holder: the server must see the client come from b (the
# setup works); then 4 times with b bound by a socket without
# SO_REUSEADDR: each ping verified, from b+1, at its first connect (the
# old module failed each with EADDRINUSE; a retry after posting the
# RECVs flushed the WELCOME's and connected again).
tcp_hold() { # PORT: a TCP socket bound to it, until killed; pid in $hold_pid
	"$PYTHON" -c 'import socket, sys, time
s = socket.socket()
s.bind((sys.argv[2], int(sys.argv[1])))
print("holding", flush=True)
time.sleep(120)' "$1" "$SIW_ADDR" >"$TMP/hold" 2>&1 &
	hold_pid=$!
	wait_output "$TMP/hold" '^holding' 10 "$hold_pid" >/dev/null
}
# draw_port PORT: rdma_cm hands out PORT (a listener on siw), then frees it
draw_port() {
	local pid ok=1

	sysctl -qw net.ipv4.ip_local_port_range="$1 $1" || return 1
	timeout -k 5 30 "$K" serve -1 -a "$SIW_ADDR" -p 0 >"$TMP/draw" 2>&1 </dev/null &
	pid=$!
	wait_output "$TMP/draw" "^krdmactl serve: listening on .*:$1\$" 10 \
		"$pid" >/dev/null && ok=0
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	sysctl -qw net.ipv4.ip_local_port_range="$saved_range"
	((ok == 0)) || cat "$TMP/draw" >>"$TMP/err"
	return "$ok"
}
# held_ping BASE HOLD: ping a new server on siw with the range [BASE,
# BASE+1] after BASE+1 was drawn, BASE held by TCP if HOLD is 1; the
# port the server saw the client come from in $from
held_ping() {
	local b=$1

	from=
	start_server "$SIW_ADDR" || return 1
	if ! draw_port $((b + 1)); then
		stop_server
		return 1
	fi
	if (($2)) && ! tcp_hold "$b"; then
		stop_server
		return 1
	fi
	sysctl -qw net.ipv4.ip_local_port_range="$b $((b + 1))"
	run 30 ping "$SIW_ADDR" -p "$port" -c 1 -j
	sysctl -qw net.ipv4.ip_local_port_range="$saved_range"
	if [[ -n $hold_pid ]]; then
		kill "$hold_pid" 2>/dev/null
		wait "$hold_pid" 2>/dev/null
		hold_pid=
	fi
	stop_server
	from=$(sed -n "s/^$SIW_ADDR:\([0-9]*\) via siw0: .*verified.*/\1/p" \
		"$TMP/server")
	echo "held_ping $b hold=$2: ping status $rc, server saw port '$from'" \
		>>"$TMP/err"
	((rc == 0 && server_rc == 0)) && json "d['ok'] and d['verified'] == 1 and d['connect_retries'] == 0"
}
source_port_held_ok() {
	local i b

	saved_range=$(sysctl -n net.ipv4.ip_local_port_range) || return 1
	if ! held_ping 47000 0 || [[ $from != 47000 ]]; then
		return 1
	fi
	for ((i = 1; i <= 4; i++)); do
		b=$((47000 + 2 * i))
		if ! held_ping "$b" 1 || [[ $from != $((b + 1)) ]]; then
			return 1
		fi
	done
	saved_range=
}
check "siw: a connect whose source port TCP holds takes another, before posting (1 + 4 pings)" \
	source_port_held_ok

# Stock verbs tools (rdmacm-utils, perftest) and krdmactl: each refuses
# the other at once. Times are bounded loosely (a slow TCG guest): what
# tells a refusal from the old hang is the bound against the tool's own
# wait, and the message.
now_ms() {
	local t=${EPOCHREALTIME/[.,]/}

	echo $((t / 1000))
}

# stock_run SECONDS CMD...: CMD (bounded) into $TMP/out and $TMP/err;
# status in $rc, how long it took in $ms
stock_run() {
	local secs=$1 t0

	shift
	t0=$(now_ms)
	timeout -k 5 "$secs" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
	ms=$(($(now_ms) - t0))
	echo "(exit status $rc after $ms ms)" >>"$TMP/err"
}

# ended_by_itself LIMIT_MS: failed, by itself (not timeout's kill), in time
ended_by_itself() {
	((rc != 0 && rc != 124 && rc != 137 && ms <= $1))
}

rping_rejected() {
	ended_by_itself 10000 && grep -q 'RDMA_CM_EVENT_REJECTED' "$TMP/err"
}

# serve still serves: ping -c 1, and the server's one client is counted
serve_still_serves() {
	((rc == 0 && server_rc == 0)) && json "d['ok'] and d['verified'] == 1" &&
		grep -q "via $dev: 1 round of 64 B, every WRITE verified, bye" \
			"$TMP/server"
}

# The lines in which serve told whom the kernel turned away
told_count() {
	grep -c '^krdmactl serve: turned away ' "$TMP/server"
}

# wait_told N: wait (bounded: 10 s; serve asks the listener every second
# while it waits for a client) until serve has told more than N; its
# lines after the N-th into $TMP/told
wait_told() {
	local i

	for ((i = 0; i < 200; i++)); do
		(($(told_count) > $1)) && break
		sleep 0.05
	done
	grep '^krdmactl serve: turned away ' "$TMP/server" |
		tail -n +$(($1 + 1)) >"$TMP/told"
	{
		echo "--- serve's output:"
		cat "$TMP/server"
	} >>"$TMP/err"
}

# told_not_krdma ADDR: serve told of a refusal, and every line it told
# (in $TMP/told) is a plain verbs peer from ADDR (rping and ib_write_bw
# connect from the address they connect to: it is this host's)
told_not_krdma() {
	[[ -s $TMP/told ]] &&
		! grep -Evq "^krdmactl serve: turned away (a connect request|[0-9]+ connect requests, the last) from ${1//./\\.}:[0-9]+: not a krdma peer \(a plain verbs program such as ib_write_bw or rping\?\); serve answers krdmactl ping and xfer\$" \
			"$TMP/told"
}

# ping against rping -s: EPROTO at once (not the WELCOME wait of -t)
ping_not_krdma() {
	((rc == 1 && ms <= 15000)) &&
		grep -q "cannot connect to $addr:$rport: Protocol error" "$TMP/err" &&
		grep -q 'the peer is not krdma' "$TMP/err" &&
		! grep -q 'did not complete' "$TMP/err"
}

# stock_tests LABEL ADDR DEV
stock_tests() {
	local label=$1 addr=$2 dev=$3 rport i t0 rping_rc told

	if ! command -v rping >/dev/null || ! command -v ib_write_bw >/dev/null; then
		for i in 1 2 3 4 5 6 7; do
			ok "$label: stock tools # SKIP rping (rdmacm-utils) or ib_write_bw (perftest) not installed"
		done
		return
	fi
	if ! start_server "$addr"; then
		cp "$TMP/server" "$TMP/err"
		: >"$TMP/out"
		for i in 1 2 3 4 5; do
			check "$label: serve for rping and ib_write_bw: the server starts listening" false
		done
	else
		stock_run 20 rping -c -a "$addr" -p "$port" -C 1 -v
		check "$label: rping -c against serve: rejected, exits non-zero by itself within 10 s ($ms ms)" \
			rping_rejected
		told=0
		wait_told "$told"
		check "$label: serve tells it turned rping away: not a krdma peer, from $addr" \
			told_not_krdma "$addr"
		told=$(told_count)
		stock_run 20 ib_write_bw -R -p "$port" "$addr"
		check "$label: ib_write_bw -R against serve: exits non-zero by itself within 10 s of its 20 s ($ms ms)" \
			ended_by_itself 10000
		wait_told "$told"
		check "$label: serve tells it turned ib_write_bw away: not a krdma peer, from $addr" \
			told_not_krdma "$addr"
		run 60 ping "$addr" -p "$port" -c 1 -j
		stop_server
		check "$label: serve still serves after them: ping -c 1 verified, the server exits 0" \
			serve_still_serves
	fi

	# ping against rping -s: a port of its own, waiting for its listen
	rport=$((port + 1000))
	((rport > 65535 || rport < 1024)) && rport=18999
	timeout -k 5 60 stdbuf -oL rping -s -d -a "$addr" -p "$rport" -C 1 -v \
		>"$TMP/rping" 2>&1 </dev/null &
	rping_pid=$!
	wait_output "$TMP/rping" '^rdma_listen' 10 "$rping_pid" >/dev/null
	run_t0=$(now_ms)
	timeout -k 5 40 "$K" ping "$addr" -p "$rport" -c 1 -t 20000 \
		>"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
	ms=$(($(now_ms) - run_t0))
	echo "(exit status $rc after $ms ms)" >>"$TMP/err"
	check "$label: ping against rping -s: exit 1 within 15 s (not its 20 s WELCOME wait; $ms ms), says the peer is not krdma" \
		ping_not_krdma
	# and rping -s ends by itself (bounded: 15 s)
	t0=$(now_ms)
	reap "$rping_pid" 15
	rping_rc=$reaped_rc
	rping_pid=
	ms=$(($(now_ms) - t0))
	{
		echo "--- rping -s (exit status $rping_rc, $ms ms after ping ended):"
		cat "$TMP/rping"
	} >"$TMP/err"
	: >"$TMP/out"
	check "$label: rping -s ends by itself after ping's refusal ($ms ms)" \
		eval '((rping_rc != 124 && rping_rc != 137 && rping_rc != 143))'
}

stock_tests "rxe" "$RXE_ADDR" "$RXE_DEV"
stock_tests "siw" "$SIW_ADDR" "$SIW_DEV"

# No RDMA device on lo: LISTEN on 127.0.0.1 fails (ENODEV, exit 1), or
# stands with a warning (serve then waits: timeout's 124); either way
# it names lo and what to do
run 10 serve -1 -a 127.0.0.1 -p 0
no_device_ok() {
	grep -q 'no RDMA device is on lo, which has 127\.0\.0\.1' "$TMP/err" &&
		grep -q 'krdmactl up' "$TMP/err" &&
		{ { ((rc == 1)) &&
			grep -q '^krdmactl: serve: cannot listen on 127\.0\.0\.1:0: ' "$TMP/err"; } ||
		  { ((rc == 124)) &&
			grep -q '^krdmactl: serve: warning: ' "$TMP/err"; }; }
}
check "serve -a 127.0.0.1 (no RDMA device on lo): says so and what to do (exit status $rc)" \
	no_device_ok

# A taken port on the wildcard address: in use (EADDRINUSE), not rdma_cm's
# "Cannot assign requested address"
if start_server 0.0.0.0; then
	run 20 serve -1 -p "$port"
	check "serve -p $port (taken by another serve): exit 1, the port is in use" \
		eval '((rc == 1)) && grep -q "^krdmactl: serve: cannot listen on 0\.0\.0\.0:$port: Address already in use\$" "$TMP/err" &&
		      grep -q "the port is taken" "$TMP/err" && ! grep -q "Cannot assign" "$TMP/err"'
	kill "$server_pid" 2>/dev/null
	wait "$server_pid" 2>/dev/null
else
	CHECK_FILES=server check "serve on a taken port: the first server starts listening" false
fi

# Bad usage
usage_error() {
	((rc == 2)) && [[ -s $TMP/err && ! -s $TMP/out ]]
}
for args in "${bad_usages[@]}"; do
	# shellcheck disable=SC2086 # split on purpose
	run 20 $args
	check "bad usage 'krdmactl $args' exits 2 with a message on stderr" \
		usage_error
done

# --help of every subcommand
help_ok() {
	((rc == 0)) && grep -q "^Usage: krdmactl $cmd" "$TMP/out"
}
for cmd in "${cmds[@]}"; do
	run 20 "$cmd" --help
	check "$cmd --help exits 0 and shows its usage" help_ok
done
has_cmds() {
	local c

	for c in serve ping xfer; do
		printf '%s\n' "${cmds[@]}" | grep -qx "$c" || return 1
	done
}
: >"$TMP/out"
: >"$TMP/err"
check "the command list has serve, ping and xfer (${cmds[*]})" has_cmds

exit $((failed ? 1 : 0))
