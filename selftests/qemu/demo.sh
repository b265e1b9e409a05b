#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo, run in the test guest by `make demo` (selftests/qemu/run.sh
# demo) after guest-setup.sh: rxe0 and siw0 are up (see
# /run/krdma-guest.env for names and addresses) and krdma.ko is loaded.
# cwd is the repo root. Also runs on any host with krdma.ko loaded and
# the two soft devices set up the same way (as root).
#
# Shows what krdma sees (krdmactl dev), then on soft-RoCE and on
# soft-iWARP: a `krdmactl serve -1` in the background, a verified 64 MiB
# RDMA WRITE and READ (krdmactl xfer: bytes, time, throughput), and a
# short `krdmactl ping` (latency of WRITE, SEND/RECV and READ, every byte
# checked both ways). Exit status: 0 when every step worked, 1 otherwise.
# Every step has a time limit.
set -uo pipefail

KRDMACTL=${KRDMACTL:-userspace-tools/krdmactl}
XFER_SIZE=${KRDMA_DEMO_XFER_SIZE:-64M}
PING_COUNT=${KRDMA_DEMO_PING_COUNT:-5}
RXE_ADDR=${KRDMA_RXE_ADDR:-198.18.0.1}
RXE_DEV=${KRDMA_RXE_DEV:-rxe0}
SIW_ADDR=${KRDMA_SIW_ADDR:-198.18.1.1}
SIW_DEV=${KRDMA_SIW_DEV:-siw0}

failed=0
steps=0
tmp=$(mktemp -d /tmp/krdma-demo.XXXXXX) || exit 1
server_pid=
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

say() { printf '\n== %s ==\n' "$*"; }
show() { echo "\$ $*"; }
step_failed() {
	echo "demo: FAILED: $*"
	failed=$((failed + 1))
}

if [[ ! -x $KRDMACTL ]]; then
	echo "demo: $KRDMACTL is not built (run: make)"
	exit 1
fi

# start_server ADDR: `krdmactl serve -1` in the background, on a free
# port; waits (bounded) until it listens and sets $port. 0 or 1.
start_server() {
	local addr=$1 i line

	show "$KRDMACTL serve -1 -a $addr -p 0 &"
	: >"$tmp/server.log"
	timeout 120 "$KRDMACTL" serve -1 -a "$addr" -p 0 >"$tmp/server.log" 2>&1 &
	server_pid=$!
	# Poll for its "listening on ADDR:PORT" line (at most 10 s)
	for ((i = 0; i < 200; i++)); do
		line=$(grep -m1 '^krdmactl serve: listening on ' "$tmp/server.log")
		[[ -n $line ]] && break
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.05
	done
	if [[ -z $line ]]; then
		sed 's/^/server: /' "$tmp/server.log"
		step_failed "the server did not start listening on $addr"
		kill "$server_pid" 2>/dev/null
		wait "$server_pid" 2>/dev/null
		server_pid=
		return 1
	fi
	echo "server: $line"
	port=${line##*:}
	return 0
}

# stop_server: wait (bounded) for the `serve -1` to exit by itself after its
# client; show its line; 0 when it exited 0.
stop_server() {
	local rc i

	for ((i = 0; i < 200; i++)); do
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null
		step_failed "the server did not exit after its client"
	fi
	wait "$server_pid"
	rc=$?
	server_pid=
	grep -v '^krdmactl serve: listening on ' "$tmp/server.log" |
		sed 's/^/server: /'
	if ((rc != 0)); then
		step_failed "the server exited with status $rc"
		return 1
	fi
	return 0
}

# client NAME ARGS...: run krdmactl ARGS (bounded), count a failure
client() {
	local what=$1 rc

	shift
	show "$KRDMACTL $*"
	timeout 180 "$KRDMACTL" "$@"
	rc=$?
	if ((rc != 0)); then
		step_failed "$what (exit status $rc)"
		return 1
	fi
	return 0
}

# demo_transport LABEL ADDR
demo_transport() {
	local label=$1 addr=$2

	steps=$((steps + 1))
	say "$label ($addr): one RDMA WRITE and one RDMA READ of $XFER_SIZE, verified"
	if start_server "$addr"; then
		client "$label: xfer" xfer "$addr" -p "$port" -s "$XFER_SIZE"
		stop_server
	fi

	steps=$((steps + 1))
	say "$label ($addr): krdmactl ping, $PING_COUNT rounds of WRITE + SEND/RECV + READ"
	if start_server "$addr"; then
		client "$label: ping" ping "$addr" -p "$port" -c "$PING_COUNT" -i 200
		stop_server
	fi
}

steps=$((steps + 1))
say "the RDMA devices krdma sees"
show "$KRDMACTL dev"
timeout 30 "$KRDMACTL" dev || step_failed "krdmactl dev"

demo_transport "soft-RoCE $RXE_DEV" "$RXE_ADDR"
demo_transport "soft-iWARP $SIW_DEV" "$SIW_ADDR"

echo
if ((failed)); then
	echo "demo: $failed failure(s) in $steps steps"
	exit 1
fi
echo "demo: all $steps steps worked"
