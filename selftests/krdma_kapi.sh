#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma selftests: the kernel API, through the sample consumer module
# (selftests/krdma_sample). Loading it runs its cases on rxe0 and siw0 and
# leaves KTAP results in debugfs; this script passes them on, and adds the
# cases about the module's life: the exports and their namespace, krdma
# held while a consumer is loaded, and a consumer unloaded with operations
# in flight. Prints TAP; runs as root in the guest, krdma.ko loaded.

set -u
cd "$(dirname "$0")/.." || exit 1

KO=$PWD/selftests/krdma_sample/krdma_sample.ko
RESULTS=/sys/kernel/debug/krdma_sample/results
TMP=$(mktemp -d /tmp/krdma_kapi.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=selftests/lib.sh
. selftests/lib.sh

# The exports, each in the KRDMA namespace
exports_ok() {
	local sym missing=0
	for sym in krdma_listen krdma_listener_addr krdma_accept \
		krdma_listener_close krdma_connect krdma_disconnect \
		krdma_conn_close krdma_conn_info krdma_buf_reg_kernel \
		krdma_buf_reg_pages krdma_buf_dereg krdma_grant_create \
		krdma_grant_token krdma_grant_destroy krdma_post \
		krdma_post_sync krdma_post_list krdma_buf_reg_sgt krdma_conn_put \
		krdma_session_create krdma_session_conn krdma_session_info \
		krdma_session_destroy; do
		if ! awk -v s="$sym" '$2 == s && $5 == "KRDMA" && $4 == "EXPORT_SYMBOL_GPL" { f = 1 } END { exit !f }' Module.symvers; then
			echo "# $sym is not exported GPL in namespace KRDMA"
			missing=1
		fi
	done
	((missing == 0))
}

# The sample's own results, passed on as ours
pass_results() {
	local line desc
	while read -r line; do
		case $line in
		"ok "* | "not ok "*)
			desc=${line#ok }
			desc=${desc#not ok }
			desc=${desc#* }
			if [[ $line == ok* ]]; then ok "$desc"; else not_ok "$desc"; fi
			;;
		"#"*) echo "$line" ;;
		esac
	done <"$RESULTS"
}

# slow_session WHAT NETDEV RATE SPEC: the sample's session heartbeats
# behind WHAT, SPEC's link shaped on NETDEV to RATE (tbf; its burst must
# pass veth's 9014-byte frames)
slow_session() {
	local desc="slow link: a session's heartbeats behind $1 keep the connection"

	if ! modprobe -q sch_tbf; then
		skip "$desc" "this kernel has no sch_tbf to shape the link"
	elif tc qdisc replace dev "$2" root tbf rate "$3" burst 256kb latency 400ms; then
		if insmod "$KO" slow_session="$4" &&
		   grep -q "session heartbeats behind a slow link" "$RESULTS"; then
			pass_results
			rmmod krdma_sample || not_ok "sample consumer unloads after the slow session ($4)"
		else
			rmmod krdma_sample 2>/dev/null
			not_ok "$desc"
		fi
		tc qdisc del dev "$2" root || not_ok "$2's shaping is removed"
	else
		not_ok "$desc"
	fi
}

# Every case; its results are kept until their number, the plan that
# comes first, is known
cases() {
	check "all API functions exported GPL in namespace KRDMA" exports_ok
	check "the sample imports the KRDMA namespace" \
		bash -c "modinfo -F import_ns '$KO' | grep -qx KRDMA"

	# 1: the sample's own cases
	if out=$(insmod "$KO" 2>&1); then
		ok "sample consumer loads and runs"
		pass_results
		# krdma is held by its consumer
		if out2=$(rmmod krdma 2>&1); then
			not_ok "krdma cannot be unloaded while a consumer is loaded"
			insmod "$PWD/krdma.ko"
		else
			case $out2 in
			*"in use"*) ok "krdma cannot be unloaded while a consumer is loaded" ;;
			*) echo "# $out2" && not_ok "krdma cannot be unloaded while a consumer is loaded" ;;
			esac
		fi
		check "sample consumer unloads" rmmod krdma_sample
	else
		echo "# $out"
		not_ok "sample consumer loads and runs"
	fi

	# 2: unload with operations in flight, on each device
	for ip in 198.18.0.1 198.18.1.1; do
		before=$(dmesg | grep -c "krdma_sample: .* of 16 operations completed")
		if insmod "$KO" addrs="$ip" leave_in_flight=1 &&
		   grep -q "^ok .*left in flight" "$RESULTS" && rmmod krdma_sample; then
			after=$(dmesg | grep -c "krdma_sample: .* of 16 operations completed")
			check "$ip: consumer unloaded with 16 writes in flight, all completed" \
				test "$before" -eq "$after"
		else
			rmmod krdma_sample 2>/dev/null
			not_ok "$ip: consumer unloaded with 16 writes in flight, all completed"
		fi
	done

	# 3: kernel <-> userspace: the module grants kernel memory to a /dev/krdma
	#    peer, which grants its own memory back
	user_ok=0
	if insmod "$KO" addrs=198.18.0.1 user_serve=1; then
		read -r port state </sys/kernel/debug/krdma_sample/user
		if timeout 60 selftests/krdma_kapi_user 198.18.0.1 "$port" >/tmp/kapi_user.log 2>&1; then
			user_ok=1
		fi
		while IFS= read -r l; do echo "# $l"; done </tmp/kapi_user.log
		for _ in $(seq 300); do
			read -r port state </sys/kernel/debug/krdma_sample/user
			[[ $state != running ]] && break
			sleep 0.1
		done
		echo "# kernel side: $state"
		[[ $state == ok ]] || user_ok=0
		rmmod krdma_sample || user_ok=0
	fi
	if ((user_ok)); then
		ok "a kernel token works for a /dev/krdma peer and a user token for the kernel"
	else
		not_ok "a kernel token works for a /dev/krdma peer and a user token for the kernel"
	fi

	# 4: the device goes away under a consumer's connections with operations in
	#    flight: it is told (event, -ENODEV), everything completes and closes
	for type in rxe siw; do
		netdev=veth1 ip=198.18.0.2
		[[ $type == siw ]] && netdev=veth3 ip=198.18.1.2
		desc="$type: device removed under a consumer's connections: told, completed, closed"
		if rdma link add krdmak0 type "$type" netdev "$netdev" &&
		   insmod "$KO" addrs="$ip" hold=1 &&
		   grep -q "^ok .*held (0)" "$RESULTS"; then
			rdma link delete krdmak0
			for _ in $(seq 100); do
				read -r st </sys/kernel/debug/krdma_sample/hold
				[[ $st == done=10\ * && $st == *events=2* ]] && break
				sleep 0.1
			done
			echo "# $st"
			# all 10 done (the 2 RECVs flushed), both ends told, one of
			# them with ENODEV (the other may hear of its peer first)
			if [[ $st == "done=10 failed="[2-9]*" events=2 "* &&
			      $st == *-19* && $st == *"state=3" ]] &&
			   rmmod krdma_sample; then
				ok "$desc"
			else
				rmmod krdma_sample 2>/dev/null
				not_ok "$desc"
			fi
		else
			rmmod krdma_sample 2>/dev/null
			rdma link delete krdmak0 2>/dev/null
			not_ok "$desc"
		fi
	done

	# 5: a session's heartbeat behind more than a slow link moves in its
	#    10 s (siw1 -> siw2 over veth6, shaped to 20 Mbit/s): answered by
	#    the WRITEs ahead of it, the connection kept
	slow_session "48 MiB of WRITEs" veth6 20mbit 198.18.3.1,198.18.3.2
	# 6: the same behind one chain of unsignaled WRITEs (8 MiB, one
	#    krdma_post_list()) on rxe1 -> rxe2 over veth4 shaped to 5 Mbit/s
	#    (about 13 s): the chain's CQEs come often enough to answer
	slow_session "an 8 MiB chain of unsignaled WRITEs" veth4 5mbit \
		198.18.2.1,198.18.2.2,unsignaled
}

cases >"$TMP/tap"
echo "TAP version 13"
echo "1..$n"
cat "$TMP/tap"
((failed == 0))
