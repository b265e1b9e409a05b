#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run krdmactl against fake_krdma.so (see fake_krdma.c): exit statuses,
# error messages, the retry protocols of libkrdma, and that -j prints valid
# JSON of the right shape. Run from userspace-tools/ by `make test`.

set -u

PYTHON=${PYTHON:-python3}
SHIM=$(pwd)/fake_krdma.so
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
n=0

# run SCENARIO ARGS...: krdmactl with the shim, into $TMP/out, $TMP/err, $rc
run() {
	scenario=$1
	shift
	FAKE_KRDMA=$scenario LD_PRELOAD=$SHIM ./krdmactl "$@" \
		>"$TMP/out" 2>"$TMP/err"
	rc=$?
}

fail() {
	echo "FAIL: $*" >&2
	echo "--- stdout" >&2
	cat "$TMP/out" >&2
	echo "--- stderr" >&2
	cat "$TMP/err" >&2
	fails=$((fails + 1))
}

# expect RC DESCRIPTION
expect_rc() {
	n=$((n + 1))
	[ "$rc" -eq "$1" ] || fail "$2: exit status $rc, want $1"
}

# expect_in FILE PATTERN DESCRIPTION
expect_in() {
	n=$((n + 1))
	grep -q -e "$2" "$TMP/$1" || fail "$3: '$2' not in $1"
}

# json_check PYTHON-EXPRESSION DESCRIPTION: d is the parsed stdout
json_check() {
	n=$((n + 1))
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
' "$TMP/out" "$1" || fail "$2: JSON check failed: $1"
}

# Without the shim, on a host without krdma.ko.
if [ ! -e /dev/krdma ]; then
	./krdmactl dev >"$TMP/out" 2>"$TMP/err"
	rc=$?
	expect_rc 1 "dev without /dev/krdma"
	expect_in err '^krdmactl: cannot open /dev/krdma: No such file' \
		"dev without /dev/krdma"
	expect_in err 'modprobe krdma' "dev without /dev/krdma"
fi

run "" version
expect_rc 0 "version"
expect_in out '^module: *0\.1\.0 (krdma ABI 1)' "version"
expect_in out '^features: *dev_query (0x1)' "version"

run "" version -j
expect_rc 0 "version -j"
json_check 'd["module"]["abi_version"] == 1 and d["abi_match"] and
	d["module"]["feature_names"] == ["dev_query"] and
	d["krdmactl"]["version"] == "0.1.0"' "version -j"

run "abi=2" version
expect_rc 0 "version, ABI mismatch"
expect_in err 'WARNING: ABI MISMATCH' "version, ABI mismatch"

run "abi=2" dev
expect_rc 1 "dev, ABI mismatch"
expect_in err 'built for krdma ABI 1, but the loaded krdma.ko speaks ABI 2' \
	"dev, ABI mismatch"

run "features=0" dev
expect_rc 1 "dev, no feature"
expect_in err 'lacks the dev_query feature' "dev, no feature"

run "enotty" dev
expect_rc 1 "dev, ENOTTY"
expect_in err 'cannot query the krdma module: Inappropriate ioctl' \
	"dev, ENOTTY"
expect_in err 'too old' "dev, ENOTTY"

run "eacces" dev
expect_rc 1 "dev, EACCES"
expect_in err 'Permission denied' "dev, EACCES"
expect_in err 'run as root' "dev, EACCES"

run "" dev
expect_rc 0 "dev"
expect_in out '^rxe0$' "dev"
expect_in out 'node_guid: *5054:00ff:fe12:3459' "dev"
expect_in out 'GID\[  2\]: *10\.0\.2\.15, RoCE v2' "dev"
expect_in out 'GID\[  0\]: *fe80::5054:ff:fe12:3456, RoCE v2' "dev"
expect_in out 'atomic_cap: *none' "dev"
expect_in out 'max_mr_size: *0xffffffffffffffff' "dev"
expect_in out 'fw_ver: *2\.3\.4' "dev"

run "" dev -j
expect_rc 0 "dev -j"
json_check '[x["name"] for x in d["devices"]] ==
	["rxe0", "we\"ird\\dev\t\u00e9\ufffd"]' "dev -j names"
json_check 'd["devices"][0]["ports"][0]["gids"][2]["ip"] == "10.0.2.15" and
	d["devices"][0]["ports"][0]["gids"][0]["gid"] ==
	"fe80:0000:0000:0000:5054:00ff:fe12:3456" and
	d["devices"][0]["ports"][0]["num_gids"] == 3' "dev -j gids"
json_check 'd["devices"][0]["max_mr_size"] == 2**64 - 1 and
	d["devices"][0]["node_guid"] == "5054:00ff:fe12:3459" and
	d["devices"][0]["atomic_cap"] == "HCA" and
	d["devices"][1]["atomic_cap"] == "none" and
	d["devices"][0]["ports"][0]["state"] == "ACTIVE" and
	d["devices"][1]["ports"][1]["state"] == "DOWN" and
	d["devices"][1]["ports"][1]["phys_state"] == "DISABLED" and
	d["devices"][1]["ports"][1]["gids"] == []' "dev -j values"

run "" dev -j rxe0
expect_rc 0 "dev -j rxe0"
json_check 'len(d["devices"]) == 1 and d["devices"][0]["dev_index"] == 3' \
	"dev -j rxe0"

run "" dev rxe0 --json
expect_rc 0 "dev rxe0 --json (options after the name)"
json_check 'len(d["devices"]) == 1' "dev rxe0 --json"

run "" dev nosuch
expect_rc 1 "dev nosuch"
expect_in err "no RDMA device named 'nosuch'" "dev nosuch"
expect_in err 'krdma tracks: rxe0' "dev nosuch"

run "grow" dev -j
expect_rc 0 "dev -j, devices and GIDs growing"
json_check '[x["name"] for x in d["devices"]][::2] == ["rxe0", "siw1"] and
	len(d["devices"][0]["ports"][0]["gids"]) == 4' "dev -j grow"

run "vanish" dev -j
expect_rc 0 "dev -j, a device vanishing"
json_check '[x["name"] for x in d["devices"]] == ["rxe0"]' "dev -j vanish"

run "nodevs" dev
expect_rc 0 "dev, no devices"
expect_in out 'No RDMA devices' "dev, no devices"

run "nodevs" dev -j
expect_rc 0 "dev -j, no devices"
json_check 'd == {"devices": []}' "dev -j, no devices"

run "nodevs" dev rxe0
expect_rc 1 "dev rxe0, no devices"
expect_in err 'rdma link add' "dev rxe0, no devices"

run "" bogus
expect_rc 2 "unknown command"
expect_in err "unknown command 'bogus'" "unknown command"

run "" dev -x
expect_rc 2 "unknown option"

for cmd in version dev help; do
	run "" $cmd --help
	expect_rc 0 "$cmd --help"
	expect_in out "^Usage: krdmactl $cmd" "$cmd --help"
done

if command -v valgrind >/dev/null 2>&1; then
	for scenario in "" grow vanish; do
		FAKE_KRDMA=$scenario LD_PRELOAD=$SHIM valgrind -q \
			--leak-check=full --errors-for-leak-kinds=all \
			--error-exitcode=3 ./krdmactl dev >"$TMP/out" \
			2>"$TMP/err"
		rc=$?
		if grep -q "I can't recover" "$TMP/err"; then
			# e.g. a valgrind too old for clang's DWARF 5
			echo "SKIP: valgrind cannot read krdmactl" >&2
			break
		fi
		expect_rc 0 "valgrind dev ($scenario)"
	done
fi

echo "test_krdmactl: $n checks, $fails failed"
[ "$fails" -eq 0 ]
