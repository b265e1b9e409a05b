#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run krdmactl against fake_krdma.so (see fake_krdma.c): exit statuses,
# error messages, the retry protocols of libkrdma, and that -j prints valid
# JSON of the right shape: every command's, against the schema of
# Documentation/cli.rst (check_json.py). Run from userspace-tools/ by
# `make test`.

set -u

PYTHON=${PYTHON:-python3}
SHIM=$(pwd)/fake_krdma.so
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
n=0

# run SCENARIO ARGS...: krdmactl with the shim, into $TMP/out, $TMP/err, $rc
# (at most 60 s: a command that waits for what the fake never sends fails)
run() {
	scenario=$1
	shift
	FAKE_KRDMA=$scenario LD_PRELOAD=$SHIM timeout -k 5 60 ./krdmactl "$@" \
		>"$TMP/out" 2>"$TMP/err" </dev/null
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

# expect_not_in FILE PATTERN DESCRIPTION
expect_not_in() {
	n=$((n + 1))
	! grep -q -e "$2" "$TMP/$1" || fail "$3: '$2' in $1"
}

# only_cause FILE DESCRIPTION CAUSE...: the advice names none of the other
# causes of EACCES and EPERM (open, listen, grant, submit) but CAUSE...
only_cause() {
	file=$1
	what=$2
	shift 2
	for other in open listen grant submit; do
		case " $* " in *" $other "*) continue ;; esac
		case $other in
		open) pat='/dev/krdma\|group\|udev\|60-krdma' ;;
		listen) pat='1024\|CAP_NET_BIND_SERVICE' ;;
		grant) pat='grant' ;;
		submit) pat='LOCAL_WRITE\|RECV or READ\|READ, RECV' ;;
		esac
		expect_not_in "$file" "$pat" "$what: only its cause"
	done
}

# schema_check OBJECT DESCRIPTION: stdout is one JSON document of type
# OBJECT of Documentation/cli.rst, "JSON output": every key of its table
# and no other, each of its type (check_json.py)
SCHEMA=$(pwd)/../Documentation/cli.rst
CHECK_JSON_SEEN=$TMP/seen
export CHECK_JSON_SEEN
schema_check() {
	n=$((n + 1))
	"$PYTHON" ./check_json.py "$SCHEMA" "$1" "$TMP/out" 2>"$TMP/schema" ||
		fail "$2: not a $1 of cli.rst: $(head -n 5 "$TMP/schema")"
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

# JSON with the module missing: one error object on stdout, the message
# on stderr too; -j and -p before the command, bundled or not
if [ ! -e /dev/krdma ]; then
	for opts in "-j dev" "dev -j" "--json dev" "-jp dev" "-pj dev" \
		"-j -p dev" "--pretty --json dev"; do
		# shellcheck disable=SC2086 # the words of $opts
		./krdmactl $opts >"$TMP/out" 2>"$TMP/err"
		rc=$?
		expect_rc 1 "krdmactl $opts without /dev/krdma"
		json_check 'list(d) == ["error"] and d["error"] == {
			"errno": 2, "name": "ENOENT",
			"message": "cannot open /dev/krdma: No such file or directory",
			"hint": d["error"]["hint"]} and
			"modprobe krdma" in d["error"]["hint"]' \
			"krdmactl $opts without /dev/krdma: the error object"
		expect_in err 'cannot open /dev/krdma' \
			"krdmactl $opts without /dev/krdma: stderr"
	done
	./krdmactl -jp version >"$TMP/out" 2>"$TMP/err"
	rc=$?
	expect_rc 1 "-jp version without /dev/krdma"
	json_check 'd["module"] is None and d["error"]["name"] == "ENOENT" and
		d["krdmactl"]["version"]' "-jp version without /dev/krdma"
	expect_in out '^    "error": {$' "-jp version: indented by 4"
fi

run "" -jp dev
expect_rc 0 "-jp dev"
expect_in out '^{$' "-jp dev: pretty"
expect_in out '^    "devices": \[$' "-jp dev: pretty"
expect_in out '^                    "gids": \[\]' "-jp dev: pretty, empty array"
json_check 'len(d["devices"]) == 2' "-jp dev"
run "" -j dev
expect_in out '^{"devices":\[{' "-j dev: compact"
expect_rc 0 "-j dev"
run "" -p dev
expect_in out '^rxe0 ' "-p dev: -p alone does not choose JSON"

# Bad usage with -j: exit 2 and the error object, errno EINVAL
for args in "-j" "-j nosuchcmd" "-j dev -x" "-j serve" "-j help" \
	"bench -l -j" "-j set ack_timeout=1" "-j up"; do
	# shellcheck disable=SC2086 # the words of $args
	run "" $args
	expect_rc 2 "krdmactl $args"
	json_check 'list(d) == ["error"] and d["error"]["errno"] == 22 and
		d["error"]["name"] == "EINVAL" and d["error"]["message"] and
		d["error"]["hint"] is None' "krdmactl $args: the error object"
done
run "" dev -j -x
expect_rc 2 "dev -j -x"
json_check 'd["error"]["message"] == "dev: unknown option \x27-x\x27"' \
	"dev -j -x: the error object"

run "" -j dev nosuchdev
expect_rc 1 "-j dev nosuchdev"
json_check 'list(d) == ["error"] and d["error"]["errno"] == 0 and
	d["error"]["name"] is None and
	d["error"]["message"] == "no RDMA device named \x27nosuchdev\x27"' \
	"-j dev nosuchdev: the error object, no errno"
run "abi=2" dev -j
expect_rc 1 "dev -j, ABI mismatch"
json_check 'list(d) == ["error"] and d["error"]["name"] == "EPROTO" and
	"ABI 2" in d["error"]["message"]' "dev -j, ABI mismatch"
run "eacces,euid=1000" -j dev
expect_rc 1 "-j dev, EACCES"
json_check 'd["error"]["name"] == "EACCES" and
	"only root may open it" in d["error"]["hint"]' "-j dev, EACCES"
run "" explain -j NOSUCH
expect_rc 1 "explain -j NOSUCH"
json_check 'd["explanations"] == [] and d["error"]["errno"] == 0 and
	"NOSUCH" in d["error"]["message"]' "explain -j NOSUCH"

run "" version
expect_rc 0 "version"
expect_in out '^module: *0\.1\.0 (krdma ABI 1)' "version"
expect_in out '^features: *dev_query (0x1)' "version"

run "" version -j
expect_rc 0 "version -j"
json_check 'd["module"]["abi_version"] == 1 and d["abi_match"] and
	d["module"]["feature_names"] == ["dev_query"] and
	d["krdmactl"]["version"] == "0.3.0"' "version -j"

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

# EACCES of opening /dev/krdma: the node's owner, group and mode (made up
# by the shim), and which of them keeps this user out
run "eacces,euid=1000" dev
expect_rc 1 "dev, EACCES"
expect_in err '^krdmactl: cannot open /dev/krdma: Permission denied' \
	"dev, EACCES"
expect_in err 'owner root, group root, mode 0600; only root may open it' \
	"dev, EACCES"
expect_in err 'run as root' "dev, EACCES"
expect_in err '60-krdma.rules' "dev, EACCES"
only_cause err "dev, EACCES" open

run "eacces,euid=1000,node_gid=54321,node_mode=0660" dev
expect_rc 1 "dev, EACCES, not in the group"
expect_in err 'group 54321, mode 0660; uid 1000\( ([a-z0-9_-]*)\)\{0,1\} is not in group 54321' \
	"dev, EACCES, not in the group"
expect_in err 'usermod -aG 54321 ' "dev, EACCES, not in the group"
expect_not_in err 'only root' "dev, EACCES, not in the group"
only_cause err "dev, EACCES, not in the group" open

run "eacces,euid=1000,node_gid=54321,node_mode=0660,group=54321" version
expect_rc 1 "version, EACCES, in the group"
expect_in err 'group 54321, mode 0660; its mode lets uid 1000.* open it (in the group)' \
	"version, EACCES, in the group"
expect_in err 'security module' "version, EACCES, in the group"
expect_not_in err 'usermod' "version, EACCES, in the group"
only_cause err "version, EACCES, in the group" open

run "eacces,euid=0" dev
expect_rc 1 "dev, EACCES as root"
expect_in err 'mode 0600; even root was refused' "dev, EACCES as root"
expect_in err 'CAP_DAC_OVERRIDE' "dev, EACCES as root"
only_cause err "dev, EACCES as root" open

run "eacces,euid=1000,node_gid=54321,node_mode=0660" doctor -j
expect_rc 1 "doctor -j, EACCES"
json_check '[c for c in d["checks"] if c["name"] == "module" and
	c["status"] == "fail" and c["verdict"].startswith("no permission to " +
	"open /dev/krdma: owner root, group 54321, mode 0660; uid 1000") and
	c["verdict"].endswith(" is not in group 54321") and
	c["fix"].startswith("join the group: sudo usermod -aG 54321 ")]' \
	"doctor -j, EACCES: the module check"

# dev: one line a device; dev show [DEV], and dev DEV, in full
run "" dev
expect_rc 0 "dev"
expect_in out '^rxe0            RoCE       ACTIVE  lo              25\.0 Gbps (EDR) 4X$' \
	"dev: one line for rxe0"
expect_in out ' iWARP      port 1: ACTIVE  -               unknown (0) unknown (0) | port 2: DOWN    -  ' \
	"dev: one line for a device of two ports"
n=$((n + 1))
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "dev: one line a device"
expect_not_in out 'node_guid' "dev: brief"
run "grow" dev
expect_in out '^siw1            iWARP      INIT    -  ' "dev, grow: a third line"
run "" dev show
expect_rc 0 "dev show"
expect_in out '^rxe0$' "dev show"
expect_in out '^	phys_port_cnt: *2$' "dev show: every device"
cp "$TMP/out" "$TMP/show_all"
for args in "dev show rxe0" "dev rxe0" "dev rxe0 show"; do
	# shellcheck disable=SC2086 # the words
	run "" $args
	[ "$args" = "dev rxe0 show" ] && continue
	expect_rc 0 "$args"
	expect_in out '^rxe0$' "$args"
	expect_in out '^	dev_index: *3$' "$args"
	expect_not_in out 'phys_port_cnt: *2' "$args: only rxe0"
	cp "$TMP/out" "$TMP/show_$(echo "$args" | tr ' ' _)"
done
expect_rc 2 "dev rxe0 show: show comes first"
n=$((n + 1))
cmp -s "$TMP/show_dev_show_rxe0" "$TMP/show_dev_rxe0" ||
	fail "dev rxe0 is not dev show rxe0"
run "" dev show nosuch
expect_rc 1 "dev show nosuch"
expect_in err "no RDMA device named 'nosuch'" "dev show nosuch"
run "" dev show -j
cp "$TMP/out" "$TMP/show.json"
run "" dev -j
n=$((n + 1))
cmp -s "$TMP/out" "$TMP/show.json" || fail "dev show -j is not dev -j"
run "" dev show
expect_in out 'node_guid: *5054:00ff:fe12:3459' "dev show"
expect_in out 'GID\[  2\]: *10\.0\.2\.15, RoCE v2' "dev show"
expect_in out 'GID\[  0\]: *fe80::5054:ff:fe12:3456, RoCE v2' "dev show"
expect_in out 'atomic_cap: *none' "dev show"
expect_in out 'max_mr_size: *0xffffffffffffffff' "dev show"
expect_in out 'fw_ver: *2\.3\.4' "dev show"
expect_in out '^	fw_ver: *0\.0\.0$' "dev show: no firmware string, as ibv_devinfo"
expect_not_in out '^	fw_ver: *$' "dev show: no empty fw_ver"

run "" dev -j
expect_rc 0 "dev -j"
json_check '[x["ifname"] for x in d["devices"]] ==
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
	d["devices"][1]["ports"][1]["physical_state"] == "DISABLED" and
	d["devices"][1]["ports"][1]["gids"] == []' "dev -j values"

json_check 'd["devices"][0]["ports"][0]["active_speed"] == "25.0 Gbps (EDR)" and
	d["devices"][0]["ports"][0]["active_width"] == "4X" and
	d["devices"][1]["ports"][0]["active_speed"] == "unknown (0)" and
	d["devices"][1]["ports"][0]["active_width"] == "unknown (0)" and
	d["devices"][0]["ports"][0]["port"] == 1 and
	d["devices"][1]["ports"][1]["port"] == 2 and
	d["devices"][0]["fw"] == "2.3.4" and d["devices"][1]["fw"] == "0.0.0" and
	d["devices"][1]["ports"][0]["netdev"] is None and
	d["devices"][1]["ports"][0]["netdev_index"] is None and
	d["devices"][1]["ports"][0]["gids"][0]["netdev_index"] is None' \
	"dev -j: names of rdma -j, enums as the text shows them"
# Every enum and name of the text, the same in JSON
cp "$TMP/out" "$TMP/dev.json"
run "" dev show
expect_rc 0 "dev show (for the JSON)"
n=$((n + 1))
"$PYTHON" - "$TMP/out" "$TMP/dev.json" <<'EOP' || fail "dev show and dev -j disagree"
import json, re, sys
text = open(sys.argv[1], errors="replace").read()
devs = json.load(open(sys.argv[2]))["devices"]
blocks = re.split(r"\n(?=\S)", text.strip())
assert len(blocks) == len(devs), (len(blocks), len(devs))
for b, d in zip(blocks, devs):
    def val(key, part):
        return re.search(r"^\t*%s: +(.*)$" % re.escape(key), part, re.M).group(1)
    assert val("transport", b).split(" (")[0] == d["transport"]
    assert val("fw_ver", b) == d["fw"]
    ports = b.split("\tport ")[1:]
    assert len(ports) == len(d["ports"])
    for t, p in zip(ports, d["ports"]):
        assert int(t.split(":")[0]) == p["port"]
        for k in ("active_width", "active_speed", "link_layer"):
            assert val(k, t) == p[k], (k, val(k, t), p[k])
        assert val("state", t).split(" (")[0] == p["state"]
        assert val("phys_state", t).split(" (")[0] == p["physical_state"]
        nd = val("netdev", t)
        assert nd == "none" if p["netdev"] is None else \
            nd == "%s (ifindex %d)" % (p["netdev"], p["netdev_index"]), nd
EOP

run "" dev -j rxe0
expect_rc 0 "dev -j rxe0"
json_check 'len(d["devices"]) == 1 and d["devices"][0]["ifindex"] == 3' \
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
json_check '[x["ifname"] for x in d["devices"]][::2] == ["rxe0", "siw1"] and
	len(d["devices"][0]["ports"][0]["gids"]) == 4' "dev -j grow"

run "vanish" dev -j
expect_rc 0 "dev -j, a device vanishing"
json_check '[x["ifname"] for x in d["devices"]] == ["rxe0"]' "dev -j vanish"

run "nodevs" dev
expect_rc 0 "dev, no devices"
expect_in out 'No RDMA devices' "dev, no devices"

run "nodevs" dev -j
expect_rc 0 "dev -j, no devices"
json_check 'd == {"devices": []}' "dev -j, no devices"

run "nodevs" dev rxe0
expect_rc 1 "dev rxe0, no devices"
expect_in err 'rdma link add' "dev rxe0, no devices"

# Commands by a prefix of their name, as iproute2 takes them: the first
# of the table that starts with it; set, up and down by the whole name
run "" dev
cp "$TMP/out" "$TMP/dev_full_name"
for w in d de dev; do
	run "" $w
	expect_rc 0 "krdmactl $w"
	n=$((n + 1))
	cmp -s "$TMP/out" "$TMP/dev_full_name" || fail "krdmactl $w is not dev"
done
run "" status
cp "$TMP/out" "$TMP/status_full_name"
for w in s st sta; do
	run "" $w
	expect_rc 0 "krdmactl $w"
	n=$((n + 1))
	cmp -s "$TMP/out" "$TMP/status_full_name" ||
		fail "krdmactl $w is not status"
done
run "" de -x
expect_rc 2 "krdmactl de -x"
expect_in err "^krdmactl: dev: unknown option '-x'" "krdmactl de -x: its whole name"
expect_in err '^Usage: krdmactl dev ' "krdmactl de -x: its usage"
for w in u dow; do
	case $w in
	u) c=up ;;
	dow) c=down ;;
	esac
	run "" $w
	expect_rc 2 "krdmactl $w"
	n=$((n + 1))
	[ ! -s "$TMP/out" ] || fail "krdmactl $w ran something"
	expect_in err "^krdmactl: '$w' would be $c, which changes the system: it is taken by its whole name only$" \
		"krdmactl $w"
	expect_in err '^krdmactl: type the command.s whole name$' "krdmactl $w"
done
run "" -j dow
expect_rc 2 "krdmactl -j dow"
json_check 'd["error"]["name"] == "EINVAL" and d["error"]["message"] ==
	"\x27dow\x27 would be down, which changes the system: it is taken by its whole name only"' \
	"krdmactl -j dow"
run "" -j d
expect_rc 0 "krdmactl -j d"
json_check '"devices" in d' "krdmactl -j d"
run "" -j ve
expect_rc 0 "krdmactl -j ve"
json_check 'd["krdmactl"]["version"] == "0.3.0"' "krdmactl -j ve"
run "" expl -j 110
expect_rc 0 "krdmactl expl -j 110"
json_check 'd["explanations"][0]["name"] == "ETIMEDOUT"' "krdmactl expl -j 110"
run "" help de
expect_rc 0 "help de"
expect_in out '^Usage: krdmactl dev ' "help de"
run "" help d
expect_rc 0 "help d"
expect_in out '^Usage: krdmactl dev ' "help d"
run "" help "do"
expect_rc 0 "help do"
expect_in out '^Usage: krdmactl doctor ' "help do"
run "" help se
expect_rc 0 "help se: serve, set being taken whole only"
expect_in out '^Usage: krdmactl serve ' "help se"
run "" help u
expect_rc 2 "help u"
expect_in err "'u' would be up" "help u"
run "" help nosuch
expect_rc 2 "help nosuch"
expect_in err "^krdmactl: unknown command 'nosuch'" "help nosuch"

run "" bogus
expect_rc 2 "unknown command"
expect_in err "unknown command 'bogus'" "unknown command"

run "" dev -x
expect_rc 2 "unknown option"

for cmd in version dev status stat monitor set explain doctor serve ping bench blk help; do
	run "" $cmd --help
	expect_rc 0 "$cmd --help"
	expect_in out "^Usage: krdmactl $cmd" "$cmd --help"
done

# explain: every form of a status or errno that a log shows
# explain_one WORD PATTERN: explain WORD gives one meaning, the line PATTERN
explain_one() {
	run "" explain "$1"
	expect_rc 0 "explain '$1'"
	expect_in out "$2" "explain '$1'"
	n=$((n + 1))
	[ "$(wc -l <"$TMP/out")" -eq 1 ] || fail "explain '$1': one meaning"
}
# also after "error" or "errno" (an errno only)
for w in 110 -110 ETIMEDOUT etimedout -ETIMEDOUT 'Connection timed out' \
	'(-110),' 'error 110' 'errno 110' 'ERRNO 110' 'error -110' 'err=-110' \
	'errno: 110' '(error 110)' 'errno=-110,'; do
	explain_one "$w" \
		'^ETIMEDOUT (errno 110, Connection timed out): no answer in time'
done
for w in RETRY_EXC_ERR retry_exc_err WC_RETRY_EXC_ERR KRDMA_WC_RETRY_EXC_ERR \
	IBV_WC_RETRY_EXC_ERR ibv_wc_retry_exc_err IB_WC_RETRY_EXC_ERR WC_12 \
	IBV_WC_12; do
	run "" explain "$w"
	expect_rc 0 "explain $w"
	expect_in out '^RETRY_EXC_ERR (completion status 12): the peer stopped answering' \
		"explain $w"
	expect_not_in out 'ENOMEM' "explain $w: a status only"
done
# 12 is a completion status and an errno: both
run "" explain 12
expect_rc 0 "explain 12"
expect_in out '^RETRY_EXC_ERR (completion status 12): ' "explain 12"
expect_in out '^ENOMEM (errno 12, Cannot allocate memory): out of memory' \
	"explain 12"
run "" explain 5
expect_in out '^WR_FLUSH_ERR (completion status 5): ' "explain 5"
expect_in out '^EIO (errno 5, Input/output error): the RDMA device failed' \
	"explain 5"
# -12 is a -errno only
run "" explain -12
expect_rc 0 "explain -12"
expect_in out '^ENOMEM (errno 12' "explain -12"
expect_not_in out 'RETRY_EXC_ERR' "explain -12: an errno only"
run "" explain 12 -j
expect_rc 0 "explain 12 -j"
json_check '[(e["kind"], e["name"], e["value"]) for e in d["explanations"]]
	== [("status", "RETRY_EXC_ERR", 12), ("errno", "ENOMEM", 12)] and
	d["explanations"][1]["in_connections"].startswith("cannot pin")' \
	"explain 12 -j"
run "" explain -j -- -110 110
json_check '[(e["kind"], e["name"]) for e in d["explanations"]] ==
	[("errno", "ETIMEDOUT")] * 2' "explain -j -- -110 110"
run "" explain -j
expect_rc 0 "explain -j"
json_check 'len([e for e in d["explanations"] if e["kind"] == "status" and
	e["explanation"]]) == 22 and "EACCES" in
	[e["name"] for e in d["explanations"] if e["kind"] == "errno"]' \
	"explain -j, every one"
for w in 4096 -4096 22x WC_ETIMEDOUT IBV_WC_22 bogus; do
	run "" explain "$w"
	expect_rc 1 "explain $w"
	expect_in err "unknown status or errno '$w'" "explain $w"
done
run "" explain -x
expect_rc 2 "explain -x"
expect_in err "unknown option '-x'" "explain -x"
# libibverbs' texts (ibv_wc_status_str()), whole, any case, one
# argument or several words
while IFS='|' read -r name num text; do
	explain_one "$text" "^$name (completion status $num): "
done <<'EOL'
SUCCESS|0|success
LOC_LEN_ERR|1|local length error
LOC_QP_OP_ERR|2|local QP operation error
LOC_EEC_OP_ERR|3|local EE context operation error
LOC_PROT_ERR|4|local protection error
WR_FLUSH_ERR|5|Work Request Flushed Error
MW_BIND_ERR|6|memory management operation error
BAD_RESP_ERR|7|bad response error
LOC_ACCESS_ERR|8|local access error
REM_INV_REQ_ERR|9|remote invalid request error
REM_ACCESS_ERR|10|remote access error
REM_OP_ERR|11|remote operation error
RETRY_EXC_ERR|12|transport retry counter exceeded
RNR_RETRY_EXC_ERR|13|RNR retry counter exceeded
LOC_RDD_VIOL_ERR|14|local RDD violation error
REM_INV_RD_REQ_ERR|15|remote invalid RD request
REM_ABORT_ERR|16|aborted error
INV_EECN_ERR|17|invalid EE context number
INV_EEC_STATE_ERR|18|invalid EE context state
FATAL_ERR|19|fatal error
RESP_TIMEOUT_ERR|20|response timeout error
GENERAL_ERR|21|general error
RETRY_EXC_ERR|12|TRANSPORT RETRY COUNTER EXCEEDED
WR_FLUSH_ERR|5|work request flushed error.
RNR_RETRY_EXC_ERR|13|(rnr retry counter exceeded)
EOL
run "" explain transport retry counter exceeded
expect_rc 0 "explain transport retry counter exceeded (words)"
expect_in out '^RETRY_EXC_ERR (completion status 12): ' \
	"explain transport retry counter exceeded (words)"
n=$((n + 1))
[ "$(wc -l <"$TMP/out")" -eq 1 ] ||
	fail "explain transport retry counter exceeded (words): one meaning"
run "" explain Connection timed out 12
expect_rc 0 "explain Connection timed out 12 (words)"
expect_in out '^ETIMEDOUT (errno 110' "explain Connection timed out 12 (words)"
expect_in out '^RETRY_EXC_ERR (completion status 12)' \
	"explain Connection timed out 12 (words)"
expect_in out '^ENOMEM (errno 12' "explain Connection timed out 12 (words)"
# as words too; "error 12" has every meaning, "errno 12" an errno's only
run "" explain errno 110
expect_rc 0 "explain errno 110 (words)"
expect_in out '^ETIMEDOUT (errno 110, ' "explain errno 110 (words)"
for w in 'error 12' 'err 12'; do
	run "" explain "$w"
	expect_in out '^RETRY_EXC_ERR (completion status 12): ' "explain '$w'"
	expect_in out '^ENOMEM (errno 12, ' "explain '$w': both"
done
run "" explain error 12
expect_rc 0 "explain error 12 (words)"
expect_in out '^RETRY_EXC_ERR (completion status 12): ' "explain error 12 (words)"
expect_in out '^ENOMEM (errno 12, ' "explain error 12 (words): both"
for w in 'errno 12' 'ERRNO=12'; do
	run "" explain "$w"
	expect_in out '^ENOMEM (errno 12, ' "explain '$w'"
	expect_not_in out 'RETRY_EXC_ERR' "explain '$w': an errno only"
done
run "" explain errno 5
expect_rc 0 "explain errno 5 (words)"
expect_in out '^EIO (errno 5, ' "explain errno 5 (words)"
expect_not_in out 'WR_FLUSH_ERR' "explain errno 5 (words): an errno only"
run "" explain -j "transport retry counter exceeded" errno 12 "error 5"
expect_rc 0 "explain -j, texts and labels"
json_check '[(e["kind"], e["name"]) for e in d["explanations"]] == [
	("status", "RETRY_EXC_ERR"), ("errno", "ENOMEM"),
	("status", "WR_FLUSH_ERR"), ("errno", "EIO")]' \
	"explain -j, texts and labels"
for w in error 'errno x' 'errno 4096' 'error ETIMEDOUT' \
	'retry counter exceeded' 'transport retry counter'; do
	run "" explain "$w"
	expect_rc 1 "explain '$w'"
	expect_in err "unknown status or errno '$w'" "explain '$w'"
done
run "" explain retry counter exceeded
expect_rc 1 "explain retry counter exceeded (words)"
expect_in err "unknown status or errno 'retry'" \
	"explain retry counter exceeded (words)"

# Connections (features=3): EACCES and EPERM of LISTEN, GRANT and SUBMIT,
# each with the advice for its one cause
run "features=3" serve -p 80
expect_rc 1 "serve -p 80"
expect_in err '^krdmactl: serve: cannot listen on 0\.0\.0\.0:80: Permission denied' \
	"serve -p 80"
expect_in err 'port below 1024 needs CAP_NET_BIND_SERVICE' "serve -p 80"
only_cause err "serve -p 80" listen

run "features=3" bench -l -p 80
expect_rc 1 "bench -l -p 80"
expect_in err '^krdmactl: bench: cannot listen on 0\.0\.0\.0:80: Permission denied' \
	"bench -l -p 80"
expect_in err 'port below 1024 needs CAP_NET_BIND_SERVICE' "bench -l -p 80"
only_cause err "bench -l -p 80" listen

run "features=3,peer,grant_err=13" serve -1 -p 0
expect_rc 1 "serve, GRANT EACCES"
expect_in out '^krdmactl serve: listening on 0\.0\.0\.0:40000$' \
	"serve, GRANT EACCES"
expect_in out 'via rxe0: FAILED after 0 rounds: cannot give a window of 4 KiB: Permission denied' \
	"serve, GRANT EACCES"
expect_in err 'the grant asks for more access than the buffer was registered with' \
	"serve, GRANT EACCES"
only_cause err "serve, GRANT EACCES" grant

run "features=3,peer,grant_err=1" serve -1 -p 0
expect_rc 1 "serve, GRANT EPERM"
expect_in out 'cannot give a window of 4 KiB: Operation not permitted' \
	"serve, GRANT EPERM"
expect_in err 'registered by another process' "serve, GRANT EPERM"
only_cause err "serve, GRANT EPERM" grant

run "features=3,submit_err=13" ping 198.18.0.2 -c 1
expect_rc 1 "ping, SUBMIT EACCES"
expect_in err '^krdmactl: ping: cannot start a RECV: Permission denied' \
	"ping, SUBMIT EACCES"
expect_in err 'writes into a buffer registered without LOCAL_WRITE' \
	"ping, SUBMIT EACCES"
only_cause err "ping, SUBMIT EACCES" submit

run "features=3,submit_err=1" ping 198.18.0.2 -c 1
expect_rc 1 "ping, SUBMIT EPERM"
expect_in err '^krdmactl: ping: cannot start a RECV: Operation not permitted' \
	"ping, SUBMIT EPERM"
expect_in err 'registered by another process' "ping, SUBMIT EPERM"
only_cause err "ping, SUBMIT EPERM" submit

# krdma peers only, where the module has it: with peer_only the fake
# fails a LISTEN or CONNECT without the flag (EDOM); an older module
# (features=3) refuses the flag (EINVAL)
for scenario in features=7,peer_only features=3; do
	run "$scenario" serve -p 0
	expect_in out '^krdmactl serve: listening on 0\.0\.0\.0:40000$' \
		"serve ($scenario): the LISTEN flags"
	run "$scenario" bench -l -p 0
	expect_in out '^krdmactl bench: listening on 0\.0\.0\.0:40000$' \
		"bench -l ($scenario): the LISTEN flags"
	run "$scenario" ping 198.18.0.2 -c 1 -t 100
	expect_rc 1 "ping ($scenario): the CONNECT flags"
	expect_in err "WELCOME did not complete in 100 ms" \
		"ping ($scenario): the CONNECT flags"
done
run "features=3,peer_only" serve -p 0
expect_in err 'cannot listen on 0\.0\.0\.0:0: Numerical argument out of domain' \
	"serve, an older module: no LISTEN flag"

# Connect requests the kernel turned away (features=71: listen_query):
# serve waits in ACCEPT a second at a time and tells each refusal on
# stdout, once, with the peer's address and what to do for its reason.
# The fake refuses a group of refuse= in each wait, then hands out its
# peer (if any), then raises SIGINT, as an operator's ^C (exit 0).
L='^krdmactl serve: turned away'
NOT_KRDMA='not a krdma peer (a plain verbs program such as ib_write_bw or rping?); serve answers krdmactl ping and xfer$'
run "features=71,refuse=2+22" serve -p 0
expect_rc 0 "serve, refused plain verbs peers"
expect_in out '^krdmactl serve: listening on 0\.0\.0\.0:40000$' \
	"serve, refused plain verbs peers"
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45678: $NOT_KRDMA" \
	"serve, one plain verbs peer refused: its address and reason"
expect_in out "$L 2 connect requests, the last from 198\\.18\\.0\\.2:45680: $NOT_KRDMA" \
	"serve, two refused in one wait: the count and the last address"
n=$((n + 1))
[ "$(grep -c 'turned away' "$TMP/out")" -eq 2 ] ||
	fail "serve, refused plain verbs peers: each told once"
n=$((n + 1))
[ ! -s "$TMP/err" ] || fail "serve, refused plain verbs peers: nothing on stderr"

run "features=71,refuse=1+3+5" serve -p 0
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45678: a krdma peer of another handshake version: run the same krdma version on both hosts (upgrade the older one; compare: krdmactl version)\$" \
	"serve, refused: version"
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45679: the backlog was full (16 connections waiting to be served, one at a time): the client may try again later\$" \
	"serve, refused: backlog"
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45680: no resources for the connection (memory, a QP or a CQ): check the free memory, the device's max_qp and max_cq (krdmactl dev show) and the kernel log (dmesg)\$" \
	"serve, refused: no resources"
expect_not_in out 'plain verbs' "serve, refused krdma peers: only their causes"

# Two reasons in one wait: the address goes with the last one only
run "features=71,refuse=35" serve -p 0
expect_in out "$L a connect request: the backlog was full" \
	"serve, two reasons in one wait: the first without an address"
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45679: no resources" \
	"serve, two reasons in one wait: the last with its address"
run "features=71,refuse=9" serve -p 0
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45678: reason 9, which this krdmactl does not know" \
	"serve, a reason of a newer module"

# Refusals are told before the client that came after them
run "features=71,peer,refuse=2" serve -1 -p 0
expect_in out "$L a connect request from 198\\.18\\.0\\.2:45678: " \
	"serve -1, a refusal, then a client"
n=$((n + 1))
[ "$(awk '/turned away/ { printf "refusal " } / via rxe0: / { printf "client " }' \
	"$TMP/out")" = "refusal client " ] ||
	fail "serve -1, a refusal, then a client: in that order"

# A module without listen_query: ACCEPT without limit (the fake's ^C
# would end one with a limit, exit 0), no LISTEN_QUERY (the fake fails it
# with ENOTTY), as before: nothing is told
run "features=7" serve -p 0
expect_rc 1 "serve, an older module: no LISTEN_QUERY"
expect_not_in out 'turned away' "serve, an older module: no LISTEN_QUERY"
expect_not_in err 'cannot ask the listener' \
	"serve, an older module: no LISTEN_QUERY"
expect_in err '^krdmactl: cannot accept a connection: Connection timed out' \
	"serve, an older module: ACCEPT without limit"

# LISTEN_QUERY fails: said once, then serve waits as an older one would
run "features=71,refuse=2,listen_query_err=5" serve -p 0
n=$((n + 1))
[ "$(grep -c '^krdmactl: serve: cannot ask the listener which connect requests it turned away: Input/output error$' "$TMP/err")" -eq 1 ] ||
	fail "serve, LISTEN_QUERY EIO: said once"
expect_not_in out 'turned away' "serve, LISTEN_QUERY EIO"

run "features=71,refuse=2+3" bench -l -p 0
expect_rc 0 "bench -l, refused requests"
expect_in out "^krdmactl bench: turned away a connect request from 198\\.18\\.0\\.2:45678: not a krdma peer (a plain verbs program such as ib_write_bw or rping?); bench -l answers krdmactl bench\$" \
	"bench -l, a plain verbs peer refused"
expect_in out "^krdmactl bench: turned away a connect request from 198\\.18\\.0\\.2:45679: the backlog was full (4 connections waiting" \
	"bench -l, backlog full (its backlog is 4)"

# A failed CONNECT names its one cause, from the listener's reject reason
# (ping, xfer, bench, bench -o conn), and the flag went with it
for cmd in ping xfer bench conn; do
	case $cmd in
	conn) args="bench -o conn 198.18.0.2" port=18516 ;;
	bench) args="bench 198.18.0.2" port=18516 ;;
	*) args="$cmd 198.18.0.2" port=18515 ;;
	esac
	what=${args%% 198*}
	for e in EPROTO:71 EBUSY:16 ENOBUFS:105 EPROTONOSUPPORT:93 \
		ECONNREFUSED:111; do
		# shellcheck disable=SC2086 # the command's words
		run "features=7,peer_only,connect_err=${e#*:}" $args
		expect_rc 1 "$what, CONNECT ${e%:*}"
		expect_in err "^krdmactl: ${what%% *}: cannot connect to 198\.18\.0\.2:$port: " \
			"$what, CONNECT ${e%:*}"
		case ${e%:*} in
		EPROTO) pat='the peer is not krdma (no krdma handshake in its answer): is a krdmactl serve listening there, not rping or perftest?'
			other='ABI' ;;
		EBUSY) pat="the server's backlog of connections not yet accepted is full: retry"
			other='no resources' ;;
		ENOBUFS) pat='the server had no resources'
			other='rq_depth' ;;
		EPROTONOSUPPORT) pat="the server's krdma speaks another handshake version"
			other='lacks a feature' ;;
		ECONNREFUSED) pat='the peer is reachable but nobody listens at that address and port (or the program there refused)'
			other='not krdma' ;;
		esac
		expect_in err "^krdmactl: $pat" "$what, CONNECT ${e%:*}"
		expect_not_in err "$other" "$what, CONNECT ${e%:*}: only its cause"
		expect_not_in err "did not complete" \
			"$what, CONNECT ${e%:*}: no wait for a WELCOME"
	done
done
run "features=7,connect_err=71" ping 198.18.0.2 -c 1 -j
expect_rc 1 "ping -j, CONNECT EPROTO"
json_check 'd["ok"] is False and d["error"]["message"] ==
	"ping: cannot connect to 198.18.0.2:18515: Protocol error" and
	d["error"]["errno"] == 71 and d["error"]["name"] == "EPROTO" and
	"not krdma" in d["error"]["hint"]' \
	"ping -j, CONNECT EPROTO"
expect_in err 'the peer is not krdma' "ping -j, CONNECT EPROTO"

# No RDMA device to listen with: a warning and what to do, or the advice
# for the failed LISTEN
for cmd in serve "bench -l"; do
	# shellcheck disable=SC2086 # the command's words
	run "features=7,nodevs" $cmd -p 0
	expect_in out 'listening on 0\.0\.0\.0:40000$' "$cmd, no device"
	expect_in err "^krdmactl: ${cmd%% *}: warning: no RDMA device in this network namespace" \
		"$cmd, no device"
	expect_in err '^krdmactl: create one: sudo krdmactl up' \
		"$cmd, no device"
	# shellcheck disable=SC2086
	run "features=7" $cmd -p 0
	expect_not_in err 'warning' "$cmd, a device: no warning"
	# shellcheck disable=SC2086
	run "features=7,nodevs,listen_err=19" $cmd -a 127.0.0.1 -p 0
	expect_rc 1 "$cmd -a 127.0.0.1, no device"
	expect_in err "^krdmactl: ${cmd%% *}: cannot listen on 127\.0\.0\.1:0: No such device" \
		"$cmd -a 127.0.0.1, no device"
	expect_in err '^krdmactl: no RDMA device in this network namespace, so none on lo, which has 127\.0\.0\.1: create one: sudo krdmactl up .*lo' \
		"$cmd -a 127.0.0.1, no device"
	# rdma_cm says EADDRINUSE for 127.0.0.1, even with port 0
	# shellcheck disable=SC2086
	run "features=7,nodevs,listen_err=98" $cmd -a 127.0.0.1 -p 0
	expect_in err '^krdmactl: no RDMA device in this network namespace, so none on lo' \
		"$cmd -a 127.0.0.1, no device, EADDRINUSE"
	expect_not_in err 'the port is taken' \
		"$cmd -a 127.0.0.1, no device, EADDRINUSE"
	# shellcheck disable=SC2086
	run "features=7,listen_err=99" $cmd -a 203.0.113.77 -p 0
	expect_rc 1 "$cmd -a 203.0.113.77"
	expect_in err '^krdmactl: 203\.0\.113\.77 is not an address of this host: give -a an address' \
		"$cmd -a 203.0.113.77"
	# shellcheck disable=SC2086
	run "features=7,listen_err=99" $cmd -a 10.0.2.15 -p 0
	expect_rc 1 "$cmd -a (a GID of rxe0), EADDRNOTAVAIL"
	expect_in err "^krdmactl: ${cmd%% *}: cannot listen on 10\.0\.2\.15:0: Address already in use\$" \
		"$cmd -a (a GID of rxe0), EADDRNOTAVAIL"
	expect_in err '^krdmactl: no free port (rdma_cm says EADDRNOTAVAIL for that): the ports rdma_cm picked' \
		"$cmd -a (a GID of rxe0), EADDRNOTAVAIL"
	expect_not_in err 'not an address of this host' \
		"$cmd -a (a GID of rxe0), EADDRNOTAVAIL"
	# a taken port on the wildcard: in use, not "Cannot assign ..."
	for e in 98 99; do
		# shellcheck disable=SC2086
		run "features=7,listen_err=$e" $cmd -p 18999
		expect_rc 1 "$cmd -p 18999, errno $e"
		expect_in err "^krdmactl: ${cmd%% *}: cannot listen on 0\.0\.0\.0:18999: Address already in use\$" \
			"$cmd -p 18999, errno $e"
		expect_in err '^krdmactl: the port is taken: another RDMA listener (.*) has port 18999' \
			"$cmd -p 18999, errno $e"
		expect_not_in err 'Cannot assign' "$cmd -p 18999, errno $e"
		expect_not_in err 'no free port' "$cmd -p 18999, errno $e"
	done
	# port 0: every port rdma_cm picked was taken (TCP's, in TIME_WAIT?)
	for e in 98 99; do
		# shellcheck disable=SC2086
		run "features=7,listen_err=$e" $cmd -p 0
		expect_rc 1 "$cmd -p 0, errno $e"
		expect_in err "^krdmactl: ${cmd%% *}: cannot listen on 0\.0\.0\.0:0: Address already in use\$" \
			"$cmd -p 0, errno $e"
		expect_in err '^krdmactl: no free port.*: the ports rdma_cm picked from net\.ipv4\.ip_local_port_range were all taken, typically by TCP sockets' \
			"$cmd -p 0, errno $e"
		expect_in err 'TIME_WAIT (see: ss -tan state time-wait); wait for TIME_WAIT to end' \
			"$cmd -p 0, errno $e"
		expect_in err 'widen the range (sysctl net\.ipv4\.ip_local_port_range), or choose a port with -p PORT$' \
			"$cmd -p 0, errno $e"
		expect_not_in err 'another RDMA listener' "$cmd -p 0, errno $e"
		expect_not_in err 'has port 0' "$cmd -p 0, errno $e"
		expect_not_in err 'Cannot assign' "$cmd -p 0, errno $e"
	done
done
run "features=7" serve -a 203.0.113.77 -p 0
expect_in out '^krdmactl serve: listening on 203\.0\.113\.77:40000$' \
	"serve -a 203.0.113.77, LISTEN succeeds"
expect_in err '^krdmactl: serve: warning: 203\.0\.113\.77 is not an address of this host' \
	"serve -a 203.0.113.77, LISTEN succeeds"

# explain: what CONNECT makes of an errno
run "" explain EBUSY
expect_rc 0 "explain EBUSY"
expect_in out "^EBUSY (errno 16, Device or resource busy): from CONNECT: the server's backlog" \
	"explain EBUSY"
for e in EPROTO ENOBUFS EPROTONOSUPPORT; do
	run "" explain $e
	expect_in out '; from CONNECT: ' "explain $e"
done
run "" explain -j EPROTO ETIMEDOUT
json_check 'd["explanations"][0]["on_connect"].startswith(
	"the peer is not krdma") and d["explanations"][1]["on_connect"] is None' \
	"explain -j EPROTO ETIMEDOUT"

# serve -c COUNT, as ping and bench -l; -n still works
for o in -c --count -n; do
	run "features=7" serve $o 0
	expect_rc 2 "serve $o 0"
	expect_in err "^krdmactl: serve: bad count '0' (1 or more)" "serve $o 0"
done

# bash completion: comp WORDS...: what it offers for the last word (into
# $TMP/out, one a line), bash run on krdmactl.bash-completion
if command -v bash >/dev/null 2>&1; then
	mkdir -p "$TMP/comp/sub"
	: >"$TMP/comp/a.ko"
	: >"$TMP/comp/notes.txt"
	comp() {
		(cd "$TMP/comp" && bash -c '
. "$0"
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
_krdmactl
printf "%s\n" "${COMPREPLY[@]}"' "$OLDPWD/krdmactl.bash-completion" "$@") \
			>"$TMP/out" 2>"$TMP/err"
	}
	# numbers, names, addresses: no file names
	for words in "bench -m" "bench --min-iters" "bench -d" "bench -n" \
		"up -n" "serve -c" "serve -n" "ping -c" "bench -S"; do
		# shellcheck disable=SC2086 # the words
		comp krdmactl $words ""
		expect_not_in out 'a\.ko\|notes\.txt\|sub' \
			"completion of '$words': no file names"
	done
	comp krdmactl up -m ""
	expect_in out '^a\.ko$' "completion of 'up -m': .ko files"
	expect_in out '^sub$' "completion of 'up -m': directories"
	expect_not_in out 'notes\.txt' "completion of 'up -m': only .ko files"
	comp krdmactl bench -o ""
	expect_in out '^lat$' "completion of 'bench -o': operations"
	comp krdmactl serve -
	expect_in out '^--count$' "completion of serve's options"
	expect_in out '^-c$' "completion of serve's options"
	comp krdmactl up --siw -
	expect_not_in out '^--rxe$' "completion of 'up --siw': not --rxe too"
	comp krdmactl up -
	expect_in out '^--rxe$' "completion of 'up': --rxe"
	comp krdmactl dev ""
	expect_in out '^show$' "completion of 'dev': show"
	comp krdmactl b
	expect_in out '^blk$' "completion of 'b': blk"
	comp krdmactl set max_
	expect_in out '^max_grants_per_user=$' "completion of 'set': the limits"
	expect_in out '^max_queue_depth_per_user=$' \
		"completion of 'set': the limits"
	expect_in out '^max_window_pages_per_user=$' \
		"completion of 'set': the limits"
	comp krdmactl blk ""
	expect_in out '^attach$' "completion of 'blk': its verbs"
	expect_in out '^detach$' "completion of 'blk': its verbs"
	expect_in out '^list$' "completion of 'blk': its verbs"
	comp krdmactl blk attach 198.18.0.1 ""
	expect_in out '^queues$' "completion of 'blk attach ADDR'"
	expect_in out '^--depth$' "completion of 'blk attach ADDR'"
	for words in "blk attach" "blk attach 198.18.0.1 queues" \
		"blk attach 198.18.0.1 depth" "blk attach 198.18.0.1 -q" \
		"blk attach 198.18.0.1 --depth" "blk attach 198.18.0.1 -p"; do
		# shellcheck disable=SC2086 # the words
		comp krdmactl $words ""
		n=$((n + 1))
		[ ! -s "$TMP/out" ] || [ "$(cat "$TMP/out")" = "" ] ||
			fail "completion of '$words': an address or a number, not $(tr '\n' ' ' <"$TMP/out")"
	done
	mkdir -p "$TMP/compblk"
	printf 'krdmablk0 198.18.0.1 7740 4096 1 1 live\nkrdmablk3 198.18.0.1 7741 4096 1 1 failed\n' \
		>"$TMP/compblk/devices"
	export KRDMA_BLK_SYSFS="$TMP/compblk"
	comp krdmactl blk detach ""
	unset KRDMA_BLK_SYSFS
	expect_in out '^krdmablk3$' "completion of 'blk detach': the devices"
fi

# Host names (the shim's getaddrinfo knows hosts=NAME@IP only): resolved
# for every command that takes an address; an unknown one named
H=hosts=peer@198.18.0.9+peer6@2001:db8::9
for cmd in ping xfer bench conn doctor; do
	case $cmd in
	conn) args="bench -o conn" port=18516 ;;
	bench) args=bench port=18516 ;;
	*) args=$cmd port=18515 ;;
	esac
	for h in peer:198.18.0.9 'peer6:[2001:db8::9]'; do
		# shellcheck disable=SC2086 # the command's words
		run "features=7,connect_err=111,$H" $args "${h%%:*}" -t 100
		ip=$(printf '%s' "${h#*:}" | sed 's/[].[]/\\&/g')
		if [ "$cmd" = doctor ]; then
			expect_in out "^ok    reach     $ip:$port: reachable over RDMA" \
				"$args ${h%%:*}: resolved"
			continue
		fi
		expect_rc 1 "$args ${h%%:*}"
		expect_in err "^krdmactl: ${args%% *}: cannot connect to $ip:$port: Connection refused" \
			"$args ${h%%:*}: resolved"
	done
	# shellcheck disable=SC2086
	run "features=7,$H" $args nosuch.example -t 100
	expect_rc 2 "$args nosuch.example"
	expect_in err "^krdmactl: ${args%% *}: 'nosuch\\.example' is not an IP address, and no host has that name: " \
		"$args nosuch.example"
	expect_in err '^krdmactl: give an IPv4 or IPv6 address, or a host name that resolves (see: getent ahosts nosuch\.example)$' \
		"$args nosuch.example"
	# shellcheck disable=SC2086
	run "features=7,resolver_down" $args peer -t 100
	expect_rc 2 "$args peer, no name service"
	expect_in err "^krdmactl: ${args%% *}: cannot resolve the host name 'peer': " \
		"$args peer, no name service"
done
for cmd in serve "bench -l"; do
	# shellcheck disable=SC2086
	run "features=7,$H" $cmd -a peer -p 0 -c 1
	expect_in out ' listening on 198\.18\.0\.9:40000$' "$cmd -a peer"
	# shellcheck disable=SC2086
	run "features=7,$H" $cmd -a nosuch -p 0
	expect_rc 2 "$cmd -a nosuch"
	expect_in err "'nosuch' is not an IP address, and no host has that name" \
		"$cmd -a nosuch"
done
run "features=7,$H" -j ping nosuch
expect_rc 2 "-j ping nosuch"
json_check 'list(d) == ["error"] and d["error"]["message"].startswith(
	"ping: \x27nosuch\x27 is not an IP address") and
	"getent ahosts nosuch" in d["error"]["hint"]' "-j ping nosuch"
schema_check FAILURE "-j ping nosuch"

# doctor ADDR, unreachable: the route and the neighbour (a made-up ip
# that prints $FAKE_IP_ROUTE and $FAKE_IP_NEIGH) tell why, and the fix
# is not the command just run
mkdir -p "$TMP/ipbin"
cat >"$TMP/ipbin/ip" <<'EOP'
#!/bin/sh
case "$1 $2" in
"route get") [ -n "$FAKE_IP_ROUTE" ] || exit 2
	printf '%s\n    cache\n' "$FAKE_IP_ROUTE" ;;
"neigh show") [ -z "$FAKE_IP_NEIGH" ] || printf '%s\n' "$FAKE_IP_NEIGH" ;;
*) exit 1 ;;
esac
EOP
chmod +x "$TMP/ipbin/ip"
# doctor_reach ROUTE NEIGH ERRNO: doctor -j ADDR, its reach check in
# $TMP/reach as "verdict|fix"
doctor_reach() {
	PATH=$TMP/ipbin:$PATH FAKE_IP_ROUTE=$1 FAKE_IP_NEIGH=$2 \
		FAKE_KRDMA=features=7,connect_err=$3 LD_PRELOAD=$SHIM \
		./krdmactl doctor -j -t 100 198.18.0.2 >"$TMP/out" 2>"$TMP/err" \
		</dev/null
	rc=$?
	"$PYTHON" -c '
import json, sys
c = [c for c in json.load(open(sys.argv[1]))["checks"] if c["name"] == "reach"][0]
print("%s|%s|%s" % (c["status"], c["verdict"], c["fix"]))
' "$TMP/out" >"$TMP/reach" 2>&1
}
doctor_reach "198.18.0.2 dev lo src 10.0.2.15 uid 0" \
	"198.18.0.2 dev lo FAILED" 110
expect_rc 1 "doctor ADDR, on the link, neighbour FAILED"
expect_in reach '^fail|198\.18\.0\.2:18515: Connection timed out; no host answers at 198\.18\.0\.2 on the link of lo (neighbour FAILED)|is the peer up, and is 198\.18\.0\.2 its address? (ping 198\.18\.0\.2' \
	"doctor ADDR, on the link, neighbour FAILED"
doctor_reach "198.18.0.2 dev lo src 10.0.2.15 uid 0" "" 113
expect_in reach '^fail|198\.18\.0\.2:18515: No route to host; no host answers at 198\.18\.0\.2 on the link of lo (neighbour entry missing)|' \
	"doctor ADDR, on the link, no neighbour entry"
doctor_reach "198.18.0.2 dev lo src 10.0.2.15 uid 0" \
	"198.18.0.2 dev lo lladdr 52:54:00:12:34:56 REACHABLE" 110
expect_in reach '; a host answers at 198\.18\.0\.2 on the link of lo (neighbour REACHABLE), but not over RDMA|on the peer: krdma loaded' \
	"doctor ADDR, on the link, a host answers"
doctor_reach "198.18.0.2 via 10.0.2.2 dev lo src 10.0.2.15 uid 0" "" 110
expect_in reach '; it is not on the link of lo but routed through the gateway 10\.0\.2\.2|check that 10\.0\.2\.2 forwards to 198\.18\.0\.2' \
	"doctor ADDR, through a gateway"
expect_not_in reach 'no host answers' "doctor ADDR, through a gateway"
doctor_reach "198.18.0.2 via 10.0.2.2 dev eth7 src 10.0.2.15 uid 0" "" 110
expect_in reach '; the route to it goes out of eth7 (through the gateway 10\.0\.2\.2), and eth7 has no RDMA device|create an RDMA device on eth7: sudo krdmactl up eth7' \
	"doctor ADDR, out of a netdev without an RDMA device"
doctor_reach "" "" 110
expect_in reach '^fail|198\.18\.0\.2:18515: Connection timed out|is the peer running' \
	"doctor ADDR, no route known"
for f in reach out; do
	expect_not_in $f 'krdmactl doctor 198\|doctor ADDR' \
		"doctor ADDR: the fix is not doctor ADDR again"
done
schema_check DOCTOR "doctor -j ADDR, unreachable"

# up and down against the shim's RDMA netlink (nl=NAME:TYPE:NETDEV+...)
# and made-up modprobe, insmod and rmmod that only edit $TMP/modules (the
# shim's /proc/modules) and log their calls in $TMP/progs: nothing here
# touches the host's devices or modules
mkdir -p "$TMP/bin"
cat >"$TMP/bin/modprobe" <<'EOP'
#!/bin/sh
echo "modprobe $*" >>"$FAKE_PROGS_LOG"
for m in "$@"; do
	case $m in
	-*) continue ;;
	ib_core|rdma_cm) ;;
	*)	case " $FAKE_MODPROBE " in *" $m "*) ;; *) exit 1 ;; esac
		echo "$m 16384 0 - Live 0x0" >>"$FAKE_PROC_MODULES" ;;
	esac
done
EOP
cat >"$TMP/bin/insmod" <<'EOP'
#!/bin/sh
echo "insmod $*" >>"$FAKE_PROGS_LOG"
exit 1
EOP
cat >"$TMP/bin/rmmod" <<'EOP'
#!/bin/sh
echo "rmmod $*" >>"$FAKE_PROGS_LOG"
grep -v "^$1 " "$FAKE_PROC_MODULES" >"$FAKE_PROC_MODULES.new"
mv "$FAKE_PROC_MODULES.new" "$FAKE_PROC_MODULES"
EOP
chmod +x "$TMP/bin/modprobe" "$TMP/bin/insmod" "$TMP/bin/rmmod"
OLDPATH=$PATH
PATH=$TMP/bin:$PATH
FAKE_PROC_MODULES=$TMP/modules
FAKE_PROGS_LOG=$TMP/progs
KRDMA_STATE_DIR=$TMP/state
KRDMA_SIW_KO=$TMP/no/siw.ko
FAKE_MODPROBE=siw
export PATH FAKE_PROC_MODULES FAKE_PROGS_LOG KRDMA_STATE_DIR KRDMA_SIW_KO \
	FAKE_MODPROBE
# up_run MODULES SCENARIO ARGS...: run with only MODULES loaded, no record
up_run() {
	# shellcheck disable=SC2086 # a line per module
	printf '%s 16384 0 - Live 0x0\n' $1 >"$FAKE_PROC_MODULES"
	rm -rf "$TMP/state" "$FAKE_PROGS_LOG"
	: >"$FAKE_PROGS_LOG"
	shift
	run "$@"
	cp "$FAKE_PROGS_LOG" "$TMP/log"
	cat "$TMP/state/up.state" >"$TMP/state_file" 2>/dev/null ||
		: >"$TMP/state_file"
}

# siw where rxe is: created, not "rxe0 already exists"
for args in "--siw lo" "--siw -n siw0 lo" "-n siw0 --siw lo"; do
	# shellcheck disable=SC2086 # the command's words
	up_run "krdma rdma_rxe" "nl=rxe0:rxe:lo" up $args
	expect_rc 0 "up $args, rxe0 on lo"
	expect_in out '^loaded module siw (modprobe)$' "up $args, rxe0 on lo"
	expect_in out '^siw0 created on lo (soft iw, port 1 ACTIVE)$' \
		"up $args, rxe0 on lo"
	expect_not_in out 'already exists' "up $args, rxe0 on lo"
	expect_in state_file '^device siw0 lo$' "up $args, rxe0 on lo: recorded"
	expect_in state_file '^module siw$' "up $args, rxe0 on lo: recorded"
done
FAKE_MODPROBE=rdma_rxe up_run "krdma siw" "nl=siw0:siw:lo" up lo
expect_rc 0 "up lo (rxe), siw0 on lo"
expect_in out '^rxe0 created on lo (soft roce, port 1 ACTIVE)$' \
	"up lo (rxe), siw0 on lo"
expect_in log '^modprobe -q rdma_rxe$' "up lo (rxe), siw0 on lo"
export FAKE_MODPROBE=siw
FAKE_MODPROBE='' up_run "krdma siw" "nl=siw0:siw:lo" up --rxe lo
expect_rc 1 "up --rxe lo, no rdma_rxe module"
expect_in err "^krdmactl: kernel $(uname -r) has no rdma_rxe module: .*krdmactl up --siw$" \
	"up --rxe lo, no rdma_rxe module"
export FAKE_MODPROBE=siw
up_run "krdma siw" "nl=siw0:siw:lo" up --siw -n mysiw lo
expect_rc 0 "up --siw -n mysiw lo, siw0 on lo"
expect_in out '^mysiw created on lo (soft iw' "up --siw -n mysiw lo, siw0 on lo"

# already there: only a device of the type (and the name) asked for
for c in "--siw lo" "--siw -n siw0 lo" "lo" "--rxe lo" "-n rxe0 lo"; do
	# shellcheck disable=SC2086
	up_run "krdma rdma_rxe siw" "nl=rxe0:rxe:lo+siw0:siw:lo" up $c
	expect_rc 0 "up $c, rxe0 and siw0 on lo"
	expect_in out 'already exists on lo' "up $c, rxe0 and siw0 on lo"
	expect_not_in out 'created' "up $c, rxe0 and siw0 on lo"
	n=$((n + 1))
	[ ! -s "$TMP/state_file" ] || fail "up $c: recorded nothing"
done
expect_in out '^rxe0 already exists on lo (soft roce' "up -n rxe0 lo"
# -n NAME without a type: NAME's type
up_run "krdma siw" "nl=siw0:siw:lo" up -n siw0 lo
expect_rc 0 "up -n siw0 lo, siw0 on lo"
expect_in out '^siw0 already exists on lo (soft iw' "up -n siw0 lo, siw0 on lo"
up_run "krdma siw" "nl=siw0:siw:veth9" up -n siw0 lo
expect_rc 2 "up -n siw0 lo, siw0 on veth9"
expect_in err 'taken by a soft iw device on veth9, not a siw device on lo' \
	"up -n siw0 lo, siw0 on veth9"

# a name taken by another type or netdev: refused, exit 2
up_run "krdma rdma_rxe" "nl=rxe0:rxe:lo" up --siw -n rxe0 lo
expect_rc 2 "up --siw -n rxe0 lo, rxe0 on lo"
expect_in err '^krdmactl: up: the name rxe0 is taken by a soft roce device on lo, not a siw device on lo$' \
	"up --siw -n rxe0 lo"
expect_in err 'choose another --name' "up --siw -n rxe0 lo"
expect_not_in log 'siw' "up --siw -n rxe0 lo: no siw loaded"
up_run "krdma rdma_rxe" "nl=rxe0:rxe:veth9" up -n rxe0 lo
expect_rc 2 "up -n rxe0 lo, rxe0 on veth9"
expect_in err 'taken by a soft roce device on veth9, not a rxe device on lo' \
	"up -n rxe0 lo, rxe0 on veth9"

# both types: refused before anything is done
up_run "krdma" "nl=" up --rxe --siw lo
expect_rc 2 "up --rxe --siw"
expect_in err '^krdmactl: up: give one of --rxe and --siw$' "up --rxe --siw"
expect_in err 'run up once for each' "up --rxe --siw"
n=$((n + 1))
[ ! -s "$TMP/log" ] || fail "up --rxe --siw ran $(cat "$TMP/log")"

# not root: said once, up front; nothing run
up_run "" "euid=1000" up --siw -n s1 lo
expect_rc 1 "up as uid 1000"
expect_in err '^krdmactl: up needs root: it loads kernel modules and creates RDMA devices (this is uid 1000)$' \
	"up as uid 1000"
expect_in err '^krdmactl: run it as root: sudo krdmactl up --siw -n s1 lo$' \
	"up as uid 1000"
n=$((n + 1))
[ ! -s "$TMP/log" ] || fail "up as uid 1000 ran $(cat "$TMP/log")"

# no siw module: how to get one
FAKE_MODPROBE='' up_run "krdma rdma_rxe" "nl=rxe0:rxe:lo" up --siw lo
expect_rc 1 "up --siw, no siw module"
expect_in err "^krdmactl: cannot load siw: modprobe siw failed and there is no $TMP/no/siw.ko$" \
	"up --siw, no siw module"
expect_in err "^krdmactl: kernel $(uname -r) has no siw module (Debian's kernels do not ship it): build it .*build-siw\.sh .*KRDMA_SIW_KO=.*krdmactl up --rxe$" \
	"up --siw, no siw module: how to get it"
export FAKE_MODPROBE=siw

# down: what up recorded, as root only
up_run "krdma rdma_rxe" "nl=rxe0:rxe:lo" up --siw lo
printf 'siw 16384 0 - Live 0x0\n' >>"$FAKE_PROC_MODULES"
FAKE_KRDMA=nl=rxe0:rxe:lo+siw0:siw:lo LD_PRELOAD=$SHIM ./krdmactl down \
	>"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
expect_rc 0 "down"
expect_in out '^deleted siw0 (was on lo)$' "down"
expect_in out '^unloaded module siw$' "down"
expect_not_in out 'rxe0' "down: leaves rxe0 alone"
n=$((n + 1))
[ ! -e "$TMP/state/up.state" ] || fail "down kept the record"
mkdir -p "$TMP/state"
echo "device siw0 lo" >"$TMP/state/up.state"
FAKE_KRDMA=euid=1000 LD_PRELOAD=$SHIM ./krdmactl down >"$TMP/out" \
	2>"$TMP/err" </dev/null
rc=$?
expect_rc 1 "down as uid 1000"
expect_in err '^krdmactl: down needs root: it loads kernel modules and deletes RDMA devices (this is uid 1000)$' \
	"down as uid 1000"
expect_in err '^krdmactl: run it as root: sudo krdmactl down$' \
	"down as uid 1000"
expect_in "state/up.state" '^device siw0 lo$' "down as uid 1000: the record kept"
rm -f "$TMP/state/up.state"
run euid=1000 down
expect_rc 0 "down as uid 1000, no record"
expect_in out '^nothing to undo' "down as uid 1000, no record"

PATH=$OLDPATH
unset FAKE_PROC_MODULES FAKE_PROGS_LOG KRDMA_STATE_DIR KRDMA_SIW_KO \
	FAKE_MODPROBE

# status and set, against made-up debugfs files and module parameters
# (KRDMA_DEBUGFS, KRDMA_SYSFS_MODULE) and the fake /dev/krdma
mkdir -p "$TMP/dbg" "$TMP/mod/parameters"
echo 18 >"$TMP/mod/parameters/ack_timeout"
echo 1024 >"$TMP/mod/parameters/max_conns_per_user"
echo 65536 >"$TMP/mod/parameters/max_bufs_per_user"
echo 65536 >"$TMP/mod/parameters/max_grants_per_user"
echo 524288 >"$TMP/mod/parameters/max_queue_depth_per_user"
echo 4194304 >"$TMP/mod/parameters/max_window_pages_per_user"
echo 4096 >"$TMP/mod/parameters/ucq_entries"
chmod 0444 "$TMP/mod/parameters/ucq_entries"
ops() { # CLASS_COUNTERS for all five classes, from "P D F B" each
	set -- "$@"
	for c in write read send recv atomic; do
		printf ' %s_posted=%s %s_done=%s %s_failed=%s %s_bytes=%s' \
			"$c" "$1" "$c" "$2" "$c" "$3" "$c" "$4"
		shift 4
	done
}
{
	printf 'id=3 state=CONNECTED error=0 dev=rxe0 dev_index=1 port=1 local=198.18.0.1:41234 peer=198.18.0.1:40000 qp=17 peer_qp=18 sq_depth=128 rq_depth=128 passive=0 grants=1 owner=user uid=0 pid=123 comm=my\\040prog\\075x module=- caller=-'
	ops 3 3 0 196608 3 3 0 196608 3 2 1 128 0 0 0 0 3 3 0 24
	printf ' last_status=10 last_op=4 last_vendor_err=0x244 new_key=1\n'
	printf 'id=9 state=ERROR error=104 dev=- dev_index=- port=- local=- peer=- qp=0 peer_qp=0 sq_depth=16 rq_depth=16 passive=1 grants=0 owner=none uid=- pid=- comm=- module=- caller=-'
	ops 0 0 0 0 0 0 0 0 0 0 0 0 5 4 1 256 0 0 0 0
	printf ' last_status=- last_op=- last_vendor_err=-\n'
} >"$TMP/dbg/connections"
cat >"$TMP/dbg/buffers" <<'EOB'
id=1 kind=user size=65536 pages=16 access=0x7 grants=1 dead=0 owner=user uid=0 pid=123 comm=prog module=- caller=-
id=2 kind=kernel size=4096 pages=1 access=0x1 grants=0 dead=1 owner=kernel uid=- pid=55 comm=insmod module=krdma_sample caller=krdma_sample_init
EOB
echo 'uid=0 files=2 conns=1 bufs=1 max_conns=1024 max_bufs=65536 grants=2 max_grants=65536 qdepth=288 max_qdepth=524288 wpages=16 max_wpages=4194304' >"$TMP/dbg/users"
{
	printf 'conns=2 bufs=2 conns_created=5 bufs_created=7 users=1 conn_limit_refused=2 buf_limit_refused=1 grant_limit_refused=3 qdepth_limit_refused=4 wpages_limit_refused=5'
	ops 3 3 0 196608 3 3 0 196608 3 2 1 128 5 4 1 256 3 3 0 24
	echo
} >"$TMP/dbg/stats"
export KRDMA_DEBUGFS="$TMP/dbg" KRDMA_SYSFS_MODULE="$TMP/mod"

run "" status
expect_rc 0 "status"
expect_in out '^  max_conns_per_user        1024       writable, 1\.\.1048576' "status"
expect_in out '^  max_queue_depth_per_user  524288     writable, 1\.\.67108864: queue entries' \
	"status: max_queue_depth_per_user"
expect_in out '^  max_window_pages_per_user 4194304    writable, 1\.\.2147483648: pages of the windows' \
	"status: max_window_pages_per_user"
expect_in out '^  ucq_entries               4096       read-only' "status"
expect_in out '^  conn 3: CONNECTED, rxe0 port 1, 198\.18\.0\.1:41234 -> 198\.18\.0\.1:40000' \
	"status conn"
expect_in out 'pid 123 (my prog=x)' "status owner, unescaped"
expect_in out '^      send *3 *2 *1 *128$' "status ops"
expect_in out 'last error: REM_ACCESS_ERR (10) on SEND, vendor error 0x244' \
	"status last error"
expect_in out '^  conn 9: ERROR (ECONNRESET: Connection reset by peer)' \
	"status conn error"
expect_in out 'none (waiting to be accepted)' "status passive, no owner"
expect_in out 'kernel, module krdma_sample (krdma_sample_init), pid 55 (insmod)' \
	"status kernel owner"
expect_in out '^  uid 0 (root): 2 files, connections 1 of 1024, buffers 1 of 65536, grants 2 of 65536, queue entries 288 of 524288, window pages 16 of 4194304$' \
	"status users"
expect_in out 'refused by the limits: 2 connections, 1 buffers, 3 grants, 4 for queue entries, 5 for window pages$' \
	"status totals"

run "" status -j
expect_rc 0 "status -j"
json_check 'd["parameters"]["ack_timeout"] == {"value": 18, "writable": True,
	"min": 0, "max": 31} and not d["parameters"]["ucq_entries"]["writable"]' \
	"status -j parameters"
json_check '[c["id"] for c in d["connections"]] == [3, 9] and
	d["connections"][0]["ops"]["send"] == {"posted": 3, "done": 2,
	"failed": 1, "bytes": 128} and
	d["connections"][0]["owner"] == {"kind": "user", "uid": 0,
	"user": "root", "pid": 123, "comm": "my prog=x", "module": None,
	"caller": None} and
	d["connections"][0]["last_error"] == {"status": "REM_ACCESS_ERR",
	"status_code": 10, "op": "SEND", "vendor_err": 0x244} and
	d["connections"][1]["error"]["name"] == "ECONNRESET" and
	d["connections"][1]["error"]["errno"] == 104 and
	d["connections"][0]["error"] is None and
	d["connections"][1]["peer"] is None and
	d["connections"][1]["last_error"] is None and
	d["connections"][1]["passive"] is True and
	[(c["ifname"], c["ifindex"], c["port"], c["lqpn"], c["rqpn"])
	 for c in d["connections"]] == [("rxe0", 1, 1, 17, 18),
	 (None, None, None, 0, 0)]' "status -j connections"
json_check '[(b["size"], b["grants"], b["owner"]["kind"], b["dead"])
	for b in d["buffers"]] == [(65536, 1, "user", False),
	(4096, 0, "kernel", True)] and d["buffers"][0]["access"] == 7 and
	d["buffers"][1]["owner"]["module"] == "krdma_sample"' \
	"status -j buffers"
json_check '[b["access_names"] for b in d["buffers"]] == [["LOCAL_WRITE",
	"REMOTE_READ", "REMOTE_WRITE"], ["LOCAL_WRITE"]]' \
	"status -j buffers: access_names, an array"
json_check 'd["users"] == [{"uid": 0, "user": "root", "files": 2,
	"connections": 1, "buffers": 1, "max_connections": 1024,
	"max_buffers": 65536, "grants": 2, "max_grants": 65536,
	"queue_entries": 288, "max_queue_entries": 524288,
	"window_pages": 16, "max_window_pages": 4194304}] and
	d["totals"]["connection_limit_refused"] == 2 and
	d["totals"]["grant_limit_refused"] == 3 and
	d["totals"]["queue_entry_limit_refused"] == 4 and
	d["totals"]["window_page_limit_refused"] == 5 and
	d["parameters"]["max_queue_depth_per_user"] == {"value": 524288,
	"writable": True, "min": 1, "max": 67108864} and
	d["parameters"]["max_window_pages_per_user"] == {"value": 4194304,
	"writable": True, "min": 1, "max": 2147483648} and
	d["totals"]["ops"]["recv"]["bytes"] == 256 and
	[x["ifname"] for x in d["devices"]][0] == "rxe0" and
	d["debugfs"]["available"]' "status -j users, totals, devices"

KRDMA_DEBUGFS=$TMP/nodebugfs run "" status -j
expect_rc 0 "status -j without debugfs"
json_check 'd["connections"] is None and not d["debugfs"]["available"] and
	d["debugfs"]["error"]["name"] == "ENOENT" and
	d["parameters"]["max_bufs_per_user"]["value"] == 65536' \
	"status -j without debugfs"
expect_in err 'cannot read the connections and buffers' \
	"status without debugfs"
# (a variable set for a function call may stay set: sh leaves it open)
export KRDMA_DEBUGFS="$TMP/dbg" KRDMA_SYSFS_MODULE="$TMP/mod"

# stat: the counters of debugfs, in counts; with -i, rates between
# samples that change (the shim opens connections.1 and stats.1 at the
# second read: no sleep needed to make them change)
run "" stat
expect_rc 0 "stat"
expect_in out '^total  *write 3 196608 B read 3 196608 B send 2 128 B recv 4 256 B atomic 3 24 B failed 2$' \
	"stat: the module's totals"
expect_in out '^dev rxe0 (1 conn)  *write 3 196608 B read 3 196608 B send 2 128 B recv 0 0 B atomic 3 24 B failed 1$' \
	"stat: rxe0, of its connection"
expect_in out '^conn 3 rxe0 CONNECTED  *write 3 196608 B .* failed 1$' \
	"stat: conn 3"
expect_in out '^conn 9 - ERROR  *write 0 0 B read 0 0 B send 0 0 B recv 4 256 B atomic 0 0 B failed 1$' \
	"stat: conn 9, no device"
run "" stat -j
expect_rc 0 "stat -j"
schema_check STAT "stat -j"
json_check 'd["interval"] is None and d["totals"]["rates"] is None and
	d["totals"]["ops"]["send"] == {"posted": 3, "done": 2, "failed": 1,
	"bytes": 128} and
	[(x["ifname"], x["connections"], x["ops"]["write"]["bytes"])
	 for x in d["devices"]] == [("rxe0", 1, 196608)] and
	[(c["id"], c["ifname"], c["state"], c["ops"]["recv"]["done"])
	 for c in d["connections"]] == [(3, "rxe0", "CONNECTED", 0),
	 (9, None, "ERROR", 4)]' "stat -j: counts"
# the second sample: conn 3 wrote 1000000 bytes more, conn 9 is gone,
# conn 11 is new
sed 's/write_posted=3 write_done=3 write_failed=0 write_bytes=196608/write_posted=5 write_done=5 write_failed=0 write_bytes=1196608/' \
	"$TMP/dbg/connections" | grep '^id=3 ' >"$TMP/dbg/connections.1"
sed 's/^id=3 /id=11 /' "$TMP/dbg/connections" | grep '^id=11 ' \
	>>"$TMP/dbg/connections.1"
sed 's/write_posted=3 write_done=3 write_failed=0 write_bytes=196608/write_posted=5 write_done=5 write_failed=0 write_bytes=1196608/' \
	"$TMP/dbg/stats" >"$TMP/dbg/stats.1"
run "" stat -j -i 0.05 -c 2
expect_rc 0 "stat -j -i 0.05 -c 2"
n=$((n + 1))
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "stat -j -i 0.05 -c 2: two lines"
cp "$TMP/out" "$TMP/stat_lines"
sed -n 2p "$TMP/stat_lines" >"$TMP/out"
schema_check STAT "stat -j -i: the second sample"
json_check 'd["interval"] >= 0.04 and
	abs(d["totals"]["rates"]["write"]["bytes"] * d["interval"] - 1e6) < 1e6 * 0.01 and
	abs(d["totals"]["rates"]["write"]["done"] * d["interval"] - 2) < 0.05 and
	d["totals"]["rates"]["read"]["bytes"] == 0 and
	[(c["id"], c["rates"] is None) for c in d["connections"]] ==
	[(3, False), (11, True)] and
	abs(d["connections"][0]["rates"]["write"]["bytes"] * d["interval"] - 1e6) < 1e4 and
	d["devices"][0]["connections"] == 2 and
	abs(d["devices"][0]["rates"]["write"]["bytes"] * d["interval"] - 1e6) < 1e4' \
	"stat -j -i: rates of what changed, none for a new connection"
run "" stat -i 0.05 -c 2
expect_rc 0 "stat -i 0.05 -c 2"
expect_in out '^per second, over 0\.[0-9][0-9] s:$' "stat -i: the rates"
expect_in out '^total  *write [0-9.]*/s [0-9.]* MB/s read 0\.0/s 0\.00 MB/s ' \
	"stat -i: the totals' rates"
expect_in out '^conn 11 rxe0 CONNECTED (new)  *write 3 196608 B ' \
	"stat -i: a new connection in counts"
rm -f "$TMP/dbg/connections.1" "$TMP/dbg/stats.1"
for bad in "-c 2" "-i 0" "-i x" "-i 5000" "-i 1 -c x" "extra"; do
	# shellcheck disable=SC2086 # the words
	run "" stat $bad
	expect_rc 2 "stat $bad"
done
expect_in err "unexpected argument 'extra'" "stat extra"
KRDMA_DEBUGFS=$TMP/nodebugfs run "" stat
expect_rc 1 "stat without debugfs"
expect_in err '^krdmactl: stat: cannot read the counters from .*nodebugfs: No such file' \
	"stat without debugfs"
KRDMA_DEBUGFS=$TMP/nodebugfs run "" -j stat
expect_rc 1 "-j stat without debugfs"
schema_check FAILURE "-j stat without debugfs"
# (a variable set for a function call may stay set: sh leaves it open)
export KRDMA_DEBUGFS="$TMP/dbg" KRDMA_SYSFS_MODULE="$TMP/mod"

# monitor: the events between readings that change (connections.1, .2 by
# the shim, siw1 at the third count of the devices), bounded by -c or -t
grep '^id=9 ' "$TMP/dbg/connections" >"$TMP/dbg/connections.2"
sed 's/^id=3 state=CONNECTED error=0 /id=3 state=ERROR error=104 /' \
	"$TMP/dbg/connections" >"$TMP/dbg/connections.1"
grep '^id=3 ' "$TMP/dbg/connections" | sed 's/^id=3 /id=12 /' \
	>>"$TMP/dbg/connections.2"
run "appear=3" monitor -j -c 4
expect_rc 0 "monitor -j -c 4"
n=$((n + 1))
[ "$(wc -l <"$TMP/out")" -eq 4 ] || fail "monitor -j -c 4: four lines"
cp "$TMP/out" "$TMP/mon_lines"
"$PYTHON" -c '
import json, sys
for i, line in enumerate(open(sys.argv[1])):
    open("%s.%d" % (sys.argv[1], i), "w").write(line)
' "$TMP/mon_lines"
for i in 0 1 2 3; do
	cp "$TMP/mon_lines.$i" "$TMP/out"
	schema_check MONITOR_EVENT "monitor -j: event $i"
done
n=$((n + 1))
"$PYTHON" - "$TMP/mon_lines" <<'EOP' || fail "monitor -j -c 4: the events"
import json, re, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
got = [(e["event"], e["ifname"], e["id"], e["state"], e["old_state"],
        e["error"] and e["error"]["name"]) for e in ev]
want = [("conn_state", "rxe0", 3, "ERROR", "CONNECTED", "ECONNRESET"),
        ("dev_add", "siw1", None, None, None, None),
        ("conn_up", "rxe0", 12, "CONNECTED", None, None),
        ("conn_down", "rxe0", 3, None, "ERROR", "ECONNRESET")]
assert got == want, got
assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$",
                    e["time"]) for e in ev), ev
assert ev[0]["peer"] == "198.18.0.1:40000", ev[0]
EOP
run "appear=3" monitor -c 4
expect_rc 0 "monitor -c 4"
expect_in out '^[0-9-]*T[0-9:.]*[+-][0-9]\{4\} conn_state rxe0 conn 3 peer 198\.18\.0\.1:40000 CONNECTED -> ERROR (ECONNRESET: Connection reset by peer)$' \
	"monitor: a connection's state"
expect_in out ' dev_add siw1 (iWARP)$' "monitor: a device added"
expect_in out ' conn_up rxe0 conn 12 peer 198\.18\.0\.1:40000 CONNECTED$' \
	"monitor: a connection up"
expect_in out ' conn_down rxe0 conn 3 peer 198\.18\.0\.1:40000 (was ERROR) (ECONNRESET' \
	"monitor: a connection gone"
rm -f "$TMP/dbg/connections.1" "$TMP/dbg/connections.2"
# nothing changes: -t ends it, with nothing printed
run "" monitor -t 0.3
expect_rc 0 "monitor -t 0.3, no change"
n=$((n + 1))
[ ! -s "$TMP/out" ] || fail "monitor -t 0.3, no change: printed something"
KRDMA_DEBUGFS=$TMP/nodebugfs run "appear=2" monitor -t 0.5
expect_rc 0 "monitor without debugfs"
expect_in err '^krdmactl: monitor: warning: cannot read the connections from .*: watching the devices only' \
	"monitor without debugfs"
expect_in out ' dev_add siw1 (iWARP)$' "monitor without debugfs: devices"
KRDMA_DEBUGFS=$TMP/nodebugfs run "eacces,euid=1000" monitor -t 0.3
expect_rc 1 "monitor, nothing readable"
expect_in err 'monitor: nor the devices through /dev/krdma: nothing to watch' \
	"monitor, nothing readable"
# (a variable set for a function call may stay set: sh leaves it open)
export KRDMA_DEBUGFS="$TMP/dbg" KRDMA_SYSFS_MODULE="$TMP/mod"
for bad in "-c 0" "-c x" "-t 0" "-t x" "extra"; do
	# shellcheck disable=SC2086 # the words
	run "" monitor $bad
	expect_rc 2 "monitor $bad"
done

# Times: a bare number in the option's own unit (milliseconds for ping,
# xfer, bench and doctor, seconds for stat -i and monitor -t), or with a
# unit, ms or s, everywhere; a bad one says which forms it takes
for t in 100 100ms 100MS 0.1s 0.1sec .1secs 100msec; do
	run "features=3" ping 198.18.0.2 -c 1 -t $t
	expect_in err "WELCOME did not complete in 100 ms" "ping -t $t"
	run "features=3" xfer 198.18.0.2 -t $t
	expect_in err "WELCOME did not complete in 100 ms" "xfer -t $t"
	run "features=3" bench 198.18.0.2 -o write -s 64 -t $t
	expect_in err "no WELCOME within 100 ms" "bench -t $t"
done
for i in 1500 1500ms 1.5s; do
	run "features=7,connect_err=71" ping 198.18.0.2 -c 1 -j -i $i
	json_check 'd["interval_ms"] == 1500' "ping -i $i: 1500 ms"
done
run "features=7,connect_err=71" ping 198.18.0.2 -c 1 -j -i 0s
json_check 'd["interval_ms"] == 0' "ping -i 0s"
for t in 100 100ms 0.1s; do
	run "features=7,connect_err=111" doctor -t $t 198.18.0.2
	expect_in out '^ok    reach     198\.18\.0\.2:18515: reachable' \
		"doctor -t $t"
done
for i in 0.05 50ms 0.05s; do
	run "" stat -i $i -c 2
	expect_rc 0 "stat -i $i -c 2"
	expect_in out '^per second, over 0\.0[5-9] s:$' "stat -i $i: 0.05 s"
done
for t in 0.3 300ms 0.3s; do
	start=$(date +%s)
	run "" monitor -t $t
	expect_rc 0 "monitor -t $t"
	n=$((n + 1))
	[ $(($(date +%s) - start)) -lt 10 ] || fail "monitor -t $t: not 0.3 s"
done
ms_forms='(milliseconds, or a number with a unit: 1500ms, 1\.5s; a whole number of milliseconds from'
s_forms='(seconds, fractions too, or a number with a unit: 500ms, 1\.5s; from 10ms to 3600s)'
while read -r forms what args; do
	# shellcheck disable=SC2086 # the words
	run "" $args
	expect_rc 2 "$args"
	case $forms in
	ms) expect_in err "^krdmactl: [a-z]*: bad $what '[^']*' $ms_forms" "$args" ;;
	s) expect_in err "^krdmactl: [a-z]*: bad $what '[^']*' $s_forms" "$args" ;;
	esac
done <<'EOL'
ms interval ping 198.18.0.2 -i 1.5
ms interval ping 198.18.0.2 -i 0.5ms
ms timeout ping 198.18.0.2 -t 0
ms timeout ping 198.18.0.2 -t 2m
ms timeout xfer 198.18.0.2 -t 3601s
ms timeout bench 198.18.0.2 -t 10K
ms timeout bench 198.18.0.2 --timeout=1h
ms timeout doctor -t 2x
ms timeout doctor -t -1
s interval stat -i 5ms
s interval stat -i 1e1
s interval stat -i 0
s timeout monitor -t 4000
s timeout monitor -t s
s timeout monitor --timeout=+1
EOL

run "eacces,euid=1000,node_gid=54321,node_mode=0660" status
expect_rc 0 "status, EACCES"
expect_in err '^krdmactl: cannot list the RDMA devices through /dev/krdma: Permission denied' \
	"status, EACCES"
expect_in err 'is not in group 54321' "status, EACCES"
only_cause err "status, EACCES" open

KRDMA_SYSFS_MODULE=$TMP/nomodule run "eacces" status
expect_rc 1 "status, module not loaded"
expect_in err 'krdma is not loaded' "status, module not loaded"
KRDMA_SYSFS_MODULE=$TMP/nomodule run "eacces" -j status
expect_rc 1 "-j status, module not loaded"
json_check 'list(d) == ["error"] and d["error"]["name"] == "ENOENT" and
	d["error"]["message"].startswith("krdma is not loaded") and
	"modprobe krdma" in d["error"]["hint"]' "-j status, module not loaded"
# (a variable set for a function call may stay set: sh leaves it open)
export KRDMA_DEBUGFS="$TMP/dbg" KRDMA_SYSFS_MODULE="$TMP/mod"

for bad in nosuch=1 max_conns_per_user=0 max_conns_per_user=1048577 \
	max_conns_per_user=x max_conns_per_user=+1 max_conns_per_user= \
	ack_timeout=32 ucq_entries=128 max_conns_per_user =1 \
	max_queue_depth_per_user=0 max_queue_depth_per_user=67108865 \
	max_window_pages_per_user=0 max_window_pages_per_user=2147483649 \
	max_window_pages_per_user=18446744073709551617 \
	"max_bufs_per_user=7 max_conns_per_user=0"; do
	# shellcheck disable=SC2086 # a case with two arguments
	run "" set $bad
	expect_rc 2 "set $bad"
done
n=$((n + 1))
[ "$(cat "$TMP/mod/parameters/max_bufs_per_user")" = 65536 ] ||
	fail "a refused set wrote max_bufs_per_user"
run "" set nosuch=1
expect_in err "unknown parameter 'nosuch'" "set nosuch"
expect_in err 'writable parameters: ack_timeout (0..31)' "set nosuch"
run "" set ucq_entries=128
expect_in err 'modprobe krdma ucq_entries=N' "set read-only"

run "" set max_conns_per_user=7 max_bufs_per_user=9 ack_timeout=0 \
	max_queue_depth_per_user=67108864 max_window_pages_per_user=2147483648
expect_rc 0 "set"
expect_in out '^max_conns_per_user: 1024 -> 7$' "set"
expect_in out '^ack_timeout: 18 -> 0$' "set"
expect_in out '^max_queue_depth_per_user: 524288 -> 67108864$' "set"
expect_in out '^max_window_pages_per_user: 4194304 -> 2147483648$' \
	"set: max_window_pages_per_user's maximum, past 32 bits signed"
n=$((n + 1))
[ "$(cat "$TMP/mod/parameters/max_bufs_per_user")" = 9 ] ||
	fail "set did not write max_bufs_per_user"
KRDMA_SYSFS_MODULE=$TMP/nomodule run "" set ack_timeout=1
expect_rc 1 "set, module not loaded"
expect_in err 'krdma is not loaded' "set, module not loaded"
# blk: krdma_blk's sysfs files in a made-up directory ($KRDMA_BLK_SYSFS),
# whose attach and detach the shim makes act as the module does
# (blk_err=N: the write fails with errno N; blk_eacces: not root)
BLK=$TMP/blk
mkdir -p "$BLK"
: >"$BLK/attach"
: >"$BLK/detach"
: >"$BLK/devices"
export KRDMA_BLK_SYSFS="$BLK"
# blk_written FILE TEXT DESCRIPTION: what krdmactl wrote into FILE
blk_written() {
	n=$((n + 1))
	[ "$(cat "$BLK/$1")" = "$2" ] ||
		fail "$3: wrote '$(cat "$BLK/$1")' into $1, want '$2'"
}
# blk_devices COUNT DESCRIPTION: devices has COUNT lines
blk_devices() {
	n=$((n + 1))
	[ "$(grep -c . "$BLK/devices")" -eq "$1" ] ||
		fail "$2: $(grep -c . "$BLK/devices") devices, want $1"
}

# krdma_blk not loaded: what to load, for every verb; exit status 1
for args in blk "blk list" "-j blk" "blk attach 198.18.0.1" "blk detach 0"; do
	# shellcheck disable=SC2086 # the command's words
	KRDMA_BLK_SYSFS=$TMP/noblk run "" $args
	expect_rc 1 "$args, krdma_blk not loaded"
	expect_in err "^krdmactl: blk [a-z]*: krdma_blk is not loaded ($TMP/noblk): No such file or directory$" \
		"$args, krdma_blk not loaded"
	expect_in err '^krdmactl: load it: sudo modprobe krdma_blk.*insmod .*krdma_blk\.ko' \
		"$args, krdma_blk not loaded: modprobe, insmod"
done
KRDMA_BLK_SYSFS=$TMP/noblk run "" -j blk list
json_check 'list(d) == ["error"] and d["error"]["name"] == "ENOENT" and
	d["error"]["message"].startswith("blk list: krdma_blk is not loaded") and
	"modprobe krdma_blk" in d["error"]["hint"]' "-j blk list, not loaded"
schema_check FAILURE "-j blk list, not loaded"
# (a variable set for a function call may stay set: sh leaves it open)
export KRDMA_BLK_SYSFS="$BLK"

run "" blk
expect_rc 0 "blk, no devices"
expect_in out '^No krdma_blk devices\. Attach one: sudo krdmactl blk attach ADDR \[PORT\]$' \
	"blk, no devices"
run "" blk list -j
expect_rc 0 "blk list -j, no devices"
json_check 'd == {"blockdevices": []}' "blk list -j, no devices"
schema_check BLK_LIST "blk list -j, no devices"

# attach: ADDR [PORT] [queues N] [depth D], or -p, -q, -d; as echo
# writes it, queues= and depth= only when given
run "" blk attach 198.18.0.1
expect_rc 0 "blk attach ADDR"
blk_written attach "198.18.0.1 7740" "blk attach ADDR"
expect_in out '^attached krdmablk0 (/dev/krdmablk0): 64 MiB at 198\.18\.0\.1:7740, 4 queues of depth 64, live$' \
	"blk attach ADDR"
n=$((n + 1))
[ "$(od -An -c "$BLK/attach" | tr -d ' ')" = '198.18.0.17740\n' ] ||
	fail "blk attach: not one line, as echo writes it"
run "blk_size=1073741824" blk attach 198.18.0.2 7741 queues 2 depth 32 -j
expect_rc 0 "blk attach ADDR PORT queues N depth D -j"
blk_written attach "198.18.0.2 7741 queues=2 depth=32" \
	"blk attach ADDR PORT queues N depth D"
json_check 'd == {"blockdevices": [{"name": "krdmablk1",
	"path": "/dev/krdmablk1", "peer": "198.18.0.2:7741",
	"size": 1073741824, "queues": 2, "depth": 32, "state": "live"}]}' \
	"blk attach -j: the device it made"
schema_check BLK_LIST "blk attach -j"
for args in "-p 7742 -q 1 -d 8 198.18.0.3" "198.18.0.3 --port 7742 --queues=1 --depth 8" \
	"198.18.0.3 7742 queues=1 depth=8" "198.18.0.3 depth 8 queues 1 -p 7742"; do
	# shellcheck disable=SC2086 # the command's words
	run "" blk attach $args
	expect_rc 0 "blk attach $args"
	blk_written attach "198.18.0.3 7742 queues=1 depth=8" "blk attach $args"
	expect_in out '^attached krdmablk2 (/dev/krdmablk2): 64 MiB at 198\.18\.0\.3:7742, 1 queue of depth 8, live$' \
		"blk attach $args"
	# shellcheck disable=SC2086
	run "" blk detach 2
done
run "blk_cpus=2" blk attach 198.18.0.3 queues 8
expect_rc 0 "blk attach, fewer queues made than asked"
expect_in err '^krdmactl: blk attach: note: krdmablk2 has 2 queues, not the 8 asked for (at most one per CPU; see dmesg)$' \
	"blk attach, fewer queues made than asked: said"
run "" blk detach 2
run "hosts=peer@198.18.0.9" blk attach peer
expect_rc 0 "blk attach HOSTNAME"
blk_written attach "198.18.0.9 7740" "blk attach HOSTNAME: its IPv4 address"
run "" blk detach krdmablk2
blk_devices 2 "blk attach, detach"

# ADDR: IPv4 only (krdma_blk_server listens on an IPv4 address)
for a in 2001:db8::1 peer6; do
	run "hosts=peer6@2001:db8::9" blk attach $a
	expect_rc 2 "blk attach $a"
	expect_in err "^krdmactl: blk attach: '$a' is not an IPv4 address.*: krdma_blk connects over IPv4 only$" \
		"blk attach $a"
done
run "hosts=peer@198.18.0.9" blk attach nosuch.example
expect_rc 2 "blk attach nosuch.example"
expect_in err "^krdmactl: blk attach: 'nosuch\\.example' is not an IP address, and no host has that name" \
	"blk attach nosuch.example"

# list: text, JSON, a failed device, a line it does not know
echo 'krdmablk7 198.18.0.4 7740 3221225472 4 128 failed' >>"$BLK/devices"
run "" blk list
expect_rc 0 "blk list"
expect_in out '^krdmablk0 *live *64 MiB  198\.18\.0\.1:7740 *queues 4 depth 64$' "blk list"
expect_in out '^krdmablk1 *live *1 GiB  198\.18\.0\.2:7741 *queues 2 depth 32$' "blk list"
expect_in out '^krdmablk7 *failed *3 GiB  198\.18\.0\.4:7740 *queues 4 depth 128$' \
	"blk list: a failed device"
cp "$TMP/out" "$TMP/blk_list"
for w in bl "blk l" "blk li" "blk list" "-p blk"; do
	# shellcheck disable=SC2086 # the words
	run "" $w
	expect_rc 0 "krdmactl $w"
	n=$((n + 1))
	cmp -s "$TMP/out" "$TMP/blk_list" || fail "krdmactl $w is not blk list"
done
for args in "-j blk" "blk -j" "blk list -j" "-j blk list" "--json bl l"; do
	# shellcheck disable=SC2086 # the command's words
	run "" $args
	expect_rc 0 "krdmactl $args"
	json_check '[b["name"] for b in d["blockdevices"]] == ["krdmablk0",
		"krdmablk1", "krdmablk7"] and d["blockdevices"][2] == {
		"name": "krdmablk7", "path": "/dev/krdmablk7",
		"peer": "198.18.0.4:7740", "size": 3221225472, "queues": 4,
		"depth": 128, "state": "failed"}' "krdmactl $args"
	schema_check BLK_LIST "krdmactl $args"
done
run "" -jp blk
expect_in out '^    "blockdevices": \[$' "-jp blk: indented"
echo 'krdmablk9 198.18.0.4 7740 lots 4 128 live' >>"$BLK/devices"
run "" blk -j
expect_rc 0 "blk -j, a line it does not know"
expect_in err "^krdmactl: blk list: warning: line 4 of $BLK/devices is not \"krdmablkK ADDR PORT SIZE QUEUES DEPTH STATE\": 'krdmablk9 198\\.18\\.0\\.4 7740 lots 4 128 live'$" \
	"blk -j, a line it does not know: said"
json_check 'len(d["blockdevices"]) == 3' "blk -j, a line it does not know: left out"
sed -i '/krdmablk9/d' "$BLK/devices"

# attach's errors: the errno, and what to do
cp "$BLK/devices" "$TMP/blk_before"
while IFS='|' read -r errno text hint; do
	run "blk_err=$errno" blk attach 198.18.0.5 queues 2
	expect_rc 1 "blk attach, errno $errno"
	expect_in err "^krdmactl: blk attach: cannot attach 198\\.18\\.0\\.5:7740: $text$" \
		"blk attach, errno $errno"
	expect_in err "^krdmactl: .*$hint" "blk attach, errno $errno: the advice"
	n=$((n + 1))
	cmp -s "$BLK/devices" "$TMP/blk_before" ||
		fail "blk attach, errno $errno: a device was made"
done <<'EOE'
111|Connection refused|nothing listens at 198\.18\.0\.5 port 7740: is krdma_blk_server loaded there? on that host: sudo modprobe krdma_blk_server
110|Connection timed out|no answer in time from 198\.18\.0\.5: .*try: krdmactl doctor -p 7740 198\.18\.0\.5$
101|Network is unreachable|no RDMA device of this host reaches 198\.18\.0\.5: .*krdmactl up
19|No such device|no RDMA device of this host reaches 198\.18\.0\.5
71|Protocol error|what listens at 198\.18\.0\.5 port 7740 is not a krdma_blk_server of this version
12|Cannot allocate memory|try fewer queues or a smaller depth
22|Invalid argument|krdma_blk refused "198\.18\.0\.5 7740 queues=2": more queues than it takes?; the kernel log says why (dmesg)$
5|Input/output error|the kernel log says what happened (dmesg)$
EOE
run "blk_err=111" -j blk attach 198.18.0.5 7750
expect_rc 1 "-j blk attach, ECONNREFUSED"
json_check 'list(d) == ["error"] and d["error"]["errno"] == 111 and
	d["error"]["name"] == "ECONNREFUSED" and d["error"]["message"] ==
	"blk attach: cannot attach 198.18.0.5:7750: Connection refused" and
	"is krdma_blk_server loaded there?" in d["error"]["hint"] and
	d["error"]["hint"].endswith("sudo modprobe krdma_blk_server port=7750")' \
	"-j blk attach, ECONNREFUSED: the server's port"
schema_check FAILURE "-j blk attach, ECONNREFUSED"
run "blk_eacces" blk attach 198.18.0.5 queues 2 -d 16
expect_rc 1 "blk attach, not root"
expect_in err "^krdmactl: blk attach: cannot attach 198\\.18\\.0\\.5:7740: Permission denied$" \
	"blk attach, not root"
expect_in err '^krdmactl: attaching a device needs root (.*/attach is root.s only): run it as root: sudo krdmactl blk attach 198\.18\.0\.5 queues 2 -d 16$' \
	"blk attach, not root: the command to run"
run "blk_eacces" -j blk detach 0
expect_rc 2 "-j blk detach: no JSON"
json_check 'd["error"]["name"] == "EINVAL" and
	d["error"]["message"] == "blk detach has no JSON output (-j)"' \
	"-j blk detach: no JSON"
run "blk_eacces" blk detach 0
expect_rc 1 "blk detach, not root"
expect_in err '^krdmactl: blk detach: cannot detach krdmablk0: Permission denied$' \
	"blk detach, not root"
expect_in err '^krdmactl: detaching a device needs root (.*/detach is root.s only): run it as root: sudo krdmactl blk detach 0$' \
	"blk detach, not root"

# detach DEV: krdmablkN, N, /dev/krdmablkN
for dev in krdmablk1 0 /dev/krdmablk7; do
	run "" blk detach $dev
	expect_rc 0 "blk detach $dev"
	name=krdmablk${dev##*[!0-9]}
	blk_written detach "$name" "blk detach $dev"
	expect_in out "^detached $name$" "blk detach $dev"
	n=$((n + 1))
	! grep -q "^$name " "$BLK/devices" || fail "blk detach $dev: not gone"
done
blk_devices 0 "blk detach: all gone"
run "" blk detach 3
expect_rc 1 "blk detach, no such device"
expect_in err '^krdmactl: blk detach: cannot detach krdmablk3: No such file or directory$' \
	"blk detach, no such device"
expect_in err '^krdmactl: krdma_blk has no device krdmablk3: see the attached ones with: krdmactl blk list$' \
	"blk detach, no such device"

# bad usage: exit status 2, nothing written
: >"$BLK/attach"
: >"$BLK/detach"
while read -r args; do
	# shellcheck disable=SC2086 # the command's words
	run "" $args
	expect_rc 2 "krdmactl $args"
	expect_in err '^krdmactl: ' "krdmactl $args: why"
	n=$((n + 1))
	if [ -s "$BLK/attach" ] || [ -s "$BLK/detach" ]; then
		fail "krdmactl $args wrote something"
	fi
done <<'EOA'
blk attach
blk attach 198.18.0.1 0
blk attach 198.18.0.1 65536
blk attach 198.18.0.1 x
blk attach 198.18.0.1 queues 0
blk attach 198.18.0.1 queues x
blk attach 198.18.0.1 queues
blk attach 198.18.0.1 depth 0
blk attach 198.18.0.1 depth 257
blk attach 198.18.0.1 depth=-1
blk attach 198.18.0.1 -d 300
blk attach 198.18.0.1 7740 7741
blk attach 198.18.0.1 7741 -p 7740
blk attach 198.18.0.1 queues 2 -q 3
blk attach 198.18.0.1 bogus 1
blk a 198.18.0.1
blk att 198.18.0.1
blk d 0
blk det 0
blk detach
blk detach 0 1
blk detach sda
blk detach /dev/sda
blk detach krdmablk
blk detach krdmablkx
blk detach 01
blk detach -1
blk list extra
blk list -q 2
blk detach 0 -p 7740
blk nosuch
blk -x
EOA
run "" blk attach 198.18.0.1 depth 257
expect_in err "^krdmactl: blk attach: bad depth '257' (1 to 256: requests in flight per queue)$" \
	"blk attach depth 257"
run "" blk a 198.18.0.1
expect_in err "^krdmactl: blk: 'a' would be attach, which changes the system: it is taken by its whole name only$" \
	"blk a: attach by its whole name only"
expect_in err '^krdmactl: type the command.s whole name$' "blk a"
run "" blk detach sda
expect_in err "^krdmactl: blk detach: 'sda' is not a krdma_blk device$" "blk detach sda"
run "" blk list -q 2
expect_in err '^krdmactl: blk list: -q (--queues) is an option of blk attach$' \
	"blk list -q 2"
run "" -j blk attach 198.18.0.1 queues 0
json_check 'list(d) == ["error"] and d["error"]["name"] == "EINVAL" and
	d["error"]["message"].startswith("blk attach: bad queues \x270\x27")' \
	"-j blk attach, bad usage"
for args in "blk --help" "help blk" "help bl" "blk attach -h" "blk detach --help"; do
	# shellcheck disable=SC2086 # the command's words
	run "" $args
	expect_rc 0 "krdmactl $args"
	expect_in out '^Usage: krdmactl blk \[list\] \[-j\]$' "krdmactl $args"
	expect_in out '^       krdmactl blk attach ADDR \[PORT\] \[queues N\] \[depth D\] \[-j\]$' \
		"krdmactl $args"
done
run "" b --help
expect_in out '^Usage: krdmactl bench ' "krdmactl b: still bench"

# Every command's JSON against the schema of Documentation/cli.rst, in
# each shape it has here: done, failed in its document, failed before it
# (FAILURE). SCENARIO "-": the shim as it is; nodev: no shim, where there
# is no /dev/krdma; nomodule: no /sys/module/krdma, no /dev/krdma;
# nodebugfs: no debugfs
nodev=
[ -e /dev/krdma ] || nodev=1
while read -r object scenario args; do
	[ "$scenario" = - ] && scenario=
	if [ "$scenario" = nodev ]; then
		[ -n "$nodev" ] || continue
		# shellcheck disable=SC2086 # the command's words
		./krdmactl $args >"$TMP/out" 2>"$TMP/err" </dev/null
		rc=$?
	elif [ "$scenario" = nomodule ]; then
		# shellcheck disable=SC2086
		KRDMA_SYSFS_MODULE=$TMP/nomodule run eacces $args
	elif [ "$scenario" = nodebugfs ]; then
		# shellcheck disable=SC2086
		KRDMA_DEBUGFS=$TMP/nodebugfs run "" $args
	else
		# shellcheck disable=SC2086
		run "$scenario" $args
	fi
	schema_check "$object" "krdmactl $args ($scenario)"
done <<'EOL'
VERSION - version -j
VERSION abi=2 -jp version
VERSION nodev -j version
FAILURE nodev -j dev
STATUS nodev status -j
DEV - dev -j
DEV - -jp dev
DEV nodevs dev -j
DEV grow dev -j
DEV vanish dev -j
DEV - dev -j rxe0
FAILURE - dev -j nosuchdev
FAILURE abi=2 dev -j
FAILURE eacces,euid=1000 -j dev
FAILURE - -j dev -x
FAILURE - -j serve
FAILURE - -j
STATUS - status -j
STATUS nodebugfs -jp status
FAILURE nomodule status -j
PING features=7,connect_err=71 ping 198.18.0.2 -c 1 -j
PING features=7,connect_err=111 -j ping 198.18.0.2
XFER features=7,connect_err=71 xfer 198.18.0.2 -j
BENCH features=7,connect_err=16 bench 198.18.0.2 -j
BENCH_CONN features=7,connect_err=16 bench -o conn 198.18.0.2 -j
BENCH_SCALE features=7 bench -o scale 198.18.0.2 -p 80 -j
DOCTOR - doctor -j
DOCTOR eacces,euid=1000,node_gid=54321,node_mode=0660 doctor -j
EXPLAIN - explain -j
EXPLAIN - explain -j 12 EPROTO RETRY_EXC_ERR
EXPLAIN - -j explain NOSUCH
EOL
# and what they showed: ping, xfer and bench done are the guest's
n=$((n + 1))
"$PYTHON" - "$SCHEMA" "$CHECK_JSON_SEEN" <<'EOP' || fail "the fake shows every object of cli.rst but those only a real connection has"
import re, sys
objs = set(re.findall(r"^\.\. json-object: (\w+)$", open(sys.argv[1]).read(), re.M))
seen = set(open(sys.argv[2]).read().split())
guest = {"ROUND", "STATS", "XFER_WAY", "BENCH_RESULT", "LATENCY", "CPU",
         "CONN_RESULT", "CLOSE_LATENCY", "SCALE_RESULT", "SCALE_LATENCY",
         "SCALE_MEM"}
missing = objs - seen - guest
if missing:
    print("never seen: %s" % " ".join(sorted(missing)), file=sys.stderr)
sys.exit(1 if missing or not objs else 0)
EOP

# The commands with JSON, as krdmactl has them (those whose -j before the
# command is not refused), and as cli.rst and the man page list them:
# "Conventions", the "JSON output" section, its table of documents, the
# commands it says refuse -j, and the man page's -j
./krdmactl help | sed -n 's/^  \([a-z]*\)  .*/\1/p' >"$TMP/cmds"
: >"$TMP/json_cmds"
while read -r cmd; do
	./krdmactl -j "$cmd" --help >/dev/null 2>&1 && echo "$cmd" >>"$TMP/json_cmds"
done <"$TMP/cmds"
: >"$TMP/out"
n=$((n + 1))
"$PYTHON" - "$SCHEMA" ./krdmactl.8 "$TMP/cmds" "$TMP/json_cmds" 2>"$TMP/err" <<'EOP' || fail "cli.rst and the man page list the commands with JSON as krdmactl has them"
import re, sys
# (one line, one blank between words: the phrases below may wrap)
rst = re.sub(r"\s+", " ", open(sys.argv[1]).read())
man = re.sub(r"\s+", " ", open(sys.argv[2]).read())
cmds = open(sys.argv[3]).read().split()
code = set(open(sys.argv[4]).read().split())
assert code and set(cmds) > code, (cmds, code)

def between(text, start, end):
    i = text.index(start) + len(start)
    return text[i:text.index(end, i)]

def names(text):
    # ``cmd`` and ``cmd sub``, but not what is in parentheses
    text = re.sub(r"\([^)]*\)", "", text)
    return {w.split()[0] for w in re.findall(r"``([a-z][a-z -]*)``", text)}

lists = {
    "Conventions": names(between(rst, "prints one JSON object instead of text, for",
                                 "also before the command")),
    "JSON output": names(between(rst, "prints one JSON object on stdout in place of the text, for",
                                 "before the command indents it")),
    "the table of documents": {
        m.split()[0] for m in re.findall(r"``([a-z]+[a-z ]* -j[^`]*)``",
                                         between(rst, "The document of each command:",
                                                 " ERROR ~~~~~"))},
    "the man page": {w.split()[0] for w in
                     re.split(r",\s*", between(man, "does (", ";"))},
}
bad = False
for where, got in lists.items():
    if got != code:
        print("%s: %s, not %s" % (where, sorted(got), sorted(code)),
              file=sys.stderr)
        bad = True
# the commands it says refuse -j: every other one
refuse = {w for w in re.findall(r"``([a-z]+)``",
          between(rst, "The commands without JSON (", ") refuse"))}
if refuse != set(cmds) - code:
    print("commands without JSON: %s, not %s" % (sorted(refuse),
          sorted(set(cmds) - code)), file=sys.stderr)
    bad = True
sys.exit(1 if bad else 0)
EOP
unset KRDMA_DEBUGFS KRDMA_SYSFS_MODULE KRDMA_BLK_SYSFS

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
	for args in "dev show" "stat -i 0.05 -c 2" "monitor -t 0.3"; do
		# shellcheck disable=SC2086 # the command's words
		KRDMA_DEBUGFS=$TMP/dbg FAKE_KRDMA=appear=2 LD_PRELOAD=$SHIM \
			valgrind -q --leak-check=full --errors-for-leak-kinds=all \
			--error-exitcode=3 ./krdmactl $args >"$TMP/out" \
			2>"$TMP/err"
		rc=$?
		grep -q "I can't recover" "$TMP/err" && break
		expect_rc 0 "valgrind $args"
	done
	printf 'krdmablk4 198.18.0.1 7740 4096 1 1 failed\nnot a device\n' \
		>"$BLK/devices"
	# (the exit status each should have, then the command)
	for args in "0 blk list" "0 -j blk" "0 blk attach 198.18.0.1 queues 2" \
		"0 blk detach 4" "1 blk detach 4"; do
		# shellcheck disable=SC2086 # the command's words
		KRDMA_BLK_SYSFS=$BLK LD_PRELOAD=$SHIM valgrind -q \
			--leak-check=full --errors-for-leak-kinds=all \
			--error-exitcode=3 ./krdmactl ${args#? } >"$TMP/out" \
			2>"$TMP/err"
		rc=$?
		grep -q "I can't recover" "$TMP/err" && break
		expect_rc "${args%% *}" "valgrind ${args#? }"
	done
fi

echo "test_krdmactl: $n checks, $fails failed"
[ "$fails" -eq 0 ]
