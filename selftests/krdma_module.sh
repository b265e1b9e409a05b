#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# krdma selftests: module unload and reload, with and without /dev/krdma
# open. An open fd must pin the module (rmmod fails with EBUSY, nothing
# crashes); without one the module must unload and come back with every
# soft device tracked again. Prints TAP. Runs as root in the guest, with
# krdma.ko loaded from the top of the repository.

set -u
cd "$(dirname "$0")/.." || exit 1

KO=$PWD/krdma.ko
KRDMACTL=$PWD/userspace-tools/krdmactl
ROUNDS=${ROUNDS:-20}
# shellcheck source=selftests/lib.sh
. selftests/lib.sh

loaded() {
	[ -d /sys/module/krdma ]
}

# Devices krdma lists, sorted, one name a line
krdma_devs() {
	"$KRDMACTL" dev -j | python3 -c '
import json, sys
print("\n".join(sorted(d["ifname"] for d in json.load(sys.stdin)["devices"])))'
}

# The RDMA devices the kernel has, as `rdma link` sees them
rdma_devs() {
	rdma -j dev show | python3 -c '
import json, sys
print("\n".join(sorted(d["ifname"] for d in json.load(sys.stdin))))'
}

echo "TAP version 13"
echo "1..5"

loaded || insmod "$KO"
expect=$(rdma_devs)

# 1: reload without an open fd, ROUNDS times; every device is back each time
why=""
for i in $(seq "$ROUNDS"); do
	if ! out=$(rmmod krdma 2>&1); then
		why="round $i: rmmod failed: $out"
		break
	fi
	if loaded || [ -e /dev/krdma ]; then
		why="round $i: krdma still present after rmmod"
		break
	fi
	if ! out=$(insmod "$KO" 2>&1); then
		why="round $i: insmod failed: $out"
		break
	fi
	if [ ! -c /dev/krdma ]; then
		why="round $i: no /dev/krdma after insmod"
		break
	fi
	got=$(krdma_devs 2>&1)
	if [ "$got" != "$expect" ]; then
		why="round $i: krdma lists '$got', rdma link has '$expect'"
		break
	fi
done
if [ -z "$why" ]; then
	ok "unload and reload $ROUNDS times without an open fd"
else
	echo "$why" | diag
	not_ok "unload and reload $ROUNDS times without an open fd"
fi

# 2: an open fd holds the module: rmmod says EBUSY, the fd keeps working
why=""
for i in $(seq "$ROUNDS"); do
	exec 3<>/dev/krdma
	if out=$(rmmod krdma 2>&1); then
		why="round $i: rmmod succeeded with /dev/krdma open"
		exec 3>&-
		insmod "$KO"
		break
	fi
	case "$out" in
	*"in use"*) ;;
	*) why="round $i: rmmod failed, but not with EBUSY: $out" ;;
	esac
	if ! loaded || ! "$KRDMACTL" version >/dev/null 2>&1; then
		why="round $i: krdma unusable after a refused rmmod"
	fi
	exec 3>&-
	[ -n "$why" ] && break
	if ! out=$(rmmod krdma 2>&1); then
		why="round $i: rmmod failed after the fd was closed: $out"
		break
	fi
	if ! out=$(insmod "$KO" 2>&1); then
		why="round $i: insmod failed: $out"
		break
	fi
done
if [ -z "$why" ]; then
	ok "rmmod with an open fd fails with EBUSY, then succeeds, $ROUNDS times"
else
	echo "$why" | diag
	not_ok "rmmod with an open fd fails with EBUSY, then succeeds, $ROUNDS times"
fi

# 3: the module's reference count is back to zero when nothing is open
refcnt=$(cat /sys/module/krdma/refcnt 2>/dev/null)
if [ "$refcnt" = "0" ]; then
	ok "module refcount is 0 with no fd open"
else
	echo "refcnt=$refcnt" | diag
	not_ok "module refcount is 0 with no fd open"
fi

# 4: without the module, the CLI says what to do
rmmod krdma
out=$("$KRDMACTL" dev 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && echo "$out" | grep -q "modprobe krdma"; then
	ok "krdmactl without the module fails and suggests loading it"
else
	echo "exit $rc: $out" | diag
	not_ok "krdmactl without the module fails and suggests loading it"
fi
insmod "$KO"

# 5: a soft device added while krdma is loaded is picked up, and forgotten
#    when deleted again
if rdma link add krdmat0 type rxe netdev veth1 &&
   krdma_devs | grep -qx krdmat0 &&
   rdma link delete krdmat0 && ! krdma_devs | grep -qx krdmat0; then
	ok "soft device added and deleted while loaded is tracked"
else
	krdma_devs 2>&1 | diag
	not_ok "soft device added and deleted while loaded is tracked"
	rdma link delete krdmat0 2>/dev/null
fi

[ "$failed" -eq 0 ]
