#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest setup (run as root inside the test guest by guest-main.sh; also
# usable by hand in any throwaway VM with the same kernel):
#   - hung task detector at 30 s (no panic), oops do not panic;
#   - modules ib_core rdma_cm ib_uverbs rdma_ucm rdma_rxe veth, and siw.ko
#     built by build-siw.sh (KRDMA_SIW_KO, default build/siw-$(uname -r)/siw.ko);
#   - veth0 198.18.0.1/24 <-> veth1 198.18.0.2/24 and
#     veth2 198.18.1.1/24 <-> veth3 198.18.1.2/24 (RFC 2544 benchmark range),
#     MTU 9000, up;
#   - rdma devices rxe0 (on veth0) and siw0 (on veth2), waited for until
#     PORT_ACTIVE: each is its own peer (loopback on one device);
#   - two more veth pairs whose ends are different RDMA devices, so that
#     traffic between them crosses the pair (see "Across a veth pair"):
#
#        rxe1 veth4 198.18.2.1 <====> veth5 198.18.2.2 rxe2
#        siw1 veth6 198.18.3.1 <====> veth7 198.18.3.2 siw2
#
#   - <repo>/krdma.ko inserted if it exists (unless KRDMA_LOAD=0; module
#     parameters from KRDMA_MODULE_PARAMS).
# Writes the names and addresses to /run/krdma-guest.env (sourced by
# guest-main.sh and usable by tests): KRDMA_RXE_DEV, KRDMA_RXE_NETDEV,
# KRDMA_RXE_ADDR, KRDMA_RXE_PEER_ADDR, KRDMA_SIW_DEV, KRDMA_SIW_NETDEV,
# KRDMA_SIW_ADDR, KRDMA_SIW_PEER_ADDR, KRDMA_LOADED (1 if krdma.ko is in).
# Exit status: 0 when all of it worked, 1 otherwise (it goes on after a
# failed step, to set up as much as it can).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
siw_ko=${KRDMA_SIW_KO:-$repo/build/siw-$(uname -r)/siw.ko}
krdma_ko=$repo/krdma.ko
env_file=/run/krdma-guest.env
errors=0
read -r start _ </proc/uptime

err() { echo "krdma-setup: ERROR: $*"; errors=$((errors + 1)); }
run() { "$@" || err "failed: $*"; }

# Hung task reports after 30 s, no panic (the test that waits says
# which). An oops or a soft lockup ends the guest at once (run.sh boots
# oops=panic softlockup_panic=1; said again here, so that nothing the
# boot ran has turned them off): a guest that goes on after one only
# hangs in whatever the dead task held, and the log has it either way.
echo 30 >/proc/sys/kernel/hung_task_timeout_secs
echo 0 >/proc/sys/kernel/hung_task_panic
echo 1 >/proc/sys/kernel/panic_on_oops
echo 1 >/proc/sys/kernel/softlockup_panic

run ip link set lo up
# A kernel built in a tree (run.sh KRDMA_KERNEL_TREE) has no modules
# directory in the host's root: copy its modules_install'ed one (a copy,
# not a link: tests that install into it walk it with find)
kmods=/lib/modules/$(uname -r)
if [[ ! -e $kmods && -n ${KRDMA_GUEST_MODDIR:-} ]]; then
	run cp -a "$KRDMA_GUEST_MODDIR" "$kmods"
fi
# Built-in drivers (the debug kernel's) are in modules.builtin: modprobe
# takes them as loaded
run modprobe -a ib_core rdma_cm ib_uverbs rdma_ucm rdma_rxe veth libcrc32c
if [[ -d /sys/module/siw ]] || grep -qs '/siw\.ko$' "$kmods/modules.builtin"; then
	: # loaded, or built in
elif [[ -f $siw_ko ]]; then
	grep -q '^siw ' /proc/modules || run insmod "$siw_ko"
else
	err "no $siw_ko (run selftests/qemu/build-siw.sh)"
fi

# name addr peer peer_addr
setup_veth() {
	ip link add "$1" type veth peer name "$3" || { err "ip link add $1"; return; }
	run ip link set "$1" mtu 9000
	run ip link set "$3" mtu 9000
	run ip addr add "$2/24" dev "$1"
	run ip addr add "$4/24" dev "$3"
	run ip link set "$1" up
	run ip link set "$3" up
}
setup_veth veth0 198.18.0.1 veth1 198.18.0.2
setup_veth veth2 198.18.1.1 veth3 198.18.1.2
# IPv6 (RFC 5180 benchmarking prefix) on the loopback devices, no DAD wait
run ip addr add 2001:2::1/64 dev veth0 nodad
run ip addr add 2001:2:0:1::1/64 dev veth2 nodad

# Across a veth pair: in one network namespace the kernel delivers traffic
# between two local addresses through lo, never through the pair. To make
# it cross the pair: accept packets with a local source (accept_local, no
# rp_filter), look up the local table after our rules (pref 1000), route
# each end's address out of the other end (pref 20, tables 102..105) with
# permanent neighbour entries, and deliver what arrives on a veth locally
# (pref 10, iif). Only the addresses of these two pairs are affected.
# rxe sends a burst of a whole READ response into the peer veth's
# backlog (1000 packets by default): room for 16 MiB of 4 KiB packets
# keeps the pair lossless, as a real fabric is, so that rxe never has to
# retry a READ (a retried 16 MiB READ across the pair once failed with an
# rkey error on 6.1's rxe; not reproduced since).
run sysctl -qw net.core.netdev_max_backlog=65536
run sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.all.rp_filter=0 \
	net.ipv4.conf.default.rp_filter=0
run ip rule add pref 1000 lookup local
run ip rule del pref 0 lookup local

# a b addr_a addr_b table_a table_b
setup_pair() {
	setup_veth "$1" "$3" "$2" "$4"
	local d
	for d in "$1" "$2"; do
		run sysctl -qw "net.ipv4.conf.$d.accept_local=1" \
			"net.ipv4.conf.$d.rp_filter=0"
		run ip rule add pref 10 iif "$d" lookup local
	done
	run ip route add "$4" dev "$1" table "$5"
	run ip route add "$3" dev "$2" table "$6"
	run ip rule add pref 20 to "$4" lookup "$5"
	run ip rule add pref 20 to "$3" lookup "$6"
	run ip neigh replace "$4" lladdr "$(cat "/sys/class/net/$2/address")" \
		dev "$1" nud permanent
	run ip neigh replace "$3" lladdr "$(cat "/sys/class/net/$1/address")" \
		dev "$2" nud permanent
}
setup_pair veth4 veth5 198.18.2.1 198.18.2.2 102 103
setup_pair veth6 veth7 198.18.3.1 198.18.3.2 104 105

run rdma link add rxe0 type rxe netdev veth0
run rdma link add siw0 type siw netdev veth2
run rdma link add rxe1 type rxe netdev veth4
run rdma link add rxe2 type rxe netdev veth5
run rdma link add siw1 type siw netdev veth6
run rdma link add siw2 type siw netdev veth7

# Poll (at most ~20 s) until both ports are ACTIVE.
state() { cat "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }
for dev in rxe0 siw0 rxe1 rxe2 siw1 siw2; do
	for ((i = 0; i < 200; i++)); do
		[[ $(state "$dev") == *ACTIVE* ]] && break
		sleep 0.1
	done
	[[ $(state "$dev") == *ACTIVE* ]] || err "$dev is not ACTIVE: $(state "$dev")"
done

loaded=0
krdma_note="krdma.ko not built"
if [[ ${KRDMA_LOAD:-1} == 0 ]]; then
	krdma_note="krdma.ko not loaded (KRDMA_LOAD=0)"
elif [[ -f $krdma_ko ]]; then
	# shellcheck disable=SC2086 # the parameters are meant to be split
	if insmod "$krdma_ko" ${KRDMA_MODULE_PARAMS:-}; then
		loaded=1 krdma_note="krdma.ko loaded"
	else
		err "insmod $krdma_ko failed"
		krdma_note="insmod krdma.ko FAILED"
	fi
fi

cat >"$env_file" <<EOF
KRDMA_RXE_DEV=rxe0
KRDMA_RXE_NETDEV=veth0
KRDMA_RXE_ADDR=198.18.0.1
KRDMA_RXE_PEER_ADDR=198.18.0.2
KRDMA_SIW_DEV=siw0
KRDMA_SIW_NETDEV=veth2
KRDMA_SIW_ADDR=198.18.1.1
KRDMA_SIW_PEER_ADDR=198.18.1.2
KRDMA_LOADED=$loaded
EOF

read -r now _ </proc/uptime
summary="rxe0 on veth0 198.18.0.1 [$(state rxe0)], siw0 on veth2 198.18.1.1 [$(state siw0)], $krdma_note"
echo "krdma-setup: $summary ($(awk "BEGIN { printf \"%.1f\", $now - $start }") s)"
((errors == 0)) || echo "krdma-setup: $errors error(s), see above"
((errors == 0))
