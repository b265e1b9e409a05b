# SPDX-License-Identifier: GPL-2.0
#
# TAP helpers for the shell tests: source it after setting TMP (a
# temporary directory). Each test prints "ok N DESC" or "not ok N DESC";
# $n counts the tests, $failed the failed ones, $skipped the skipped ones.
#
#   check DESC COMMAND...  ok when COMMAND succeeds; else not ok, then
#                          the diagnostics of $CHECK_DIAG, a command (a
#                          script's own; ":" for none), or of check_diag
#   check_diag             the start of $TMP/out and $TMP/err (those not
#                          empty; CHECK_FILES="NAME..." in $TMP for
#                          others): 4000 bytes of each, or CHECK_LINES
#                          lines of at most 300 characters
#   ok DESC, not_ok DESC, skip DESC REASON, diag (stdin as "# " lines)
#   json_schema OBJECT     $TMP/out is one krdmactl JSON document of type
#                          OBJECT of Documentation/cli.rst, "JSON output"
#                          (userspace-tools/check_json.py; from the top
#                          of the tree); what is wrong goes to $TMP/err
#   pins                   prints the pages pinned with FOLL_PIN now,
#                          system-wide (nr_foll_pin_acquired -
#                          nr_foll_pin_released of /proc/vmstat), exact:
#                          the per-CPU counts folded in first
#   wait_output FILE ERE SECONDS [PID]
#                          prints the first line of FILE (the output of a
#                          background process) that matches ERE, once it
#                          is written; fails after SECONDS, or at once
#                          when PID (the writer) ends without writing it
# shellcheck shell=bash

n=0
failed=0
skipped=0

ok() {
	n=$((n + 1))
	echo "ok $n $1"
}

not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n $1"
}

skip() {
	n=$((n + 1))
	skipped=$((skipped + 1))
	echo "ok $n $1 # SKIP $2"
}

diag() {
	sed 's/^/# /'
}

# tail -F follows FILE as it grows (inotify where the file system has
# it; else it looks every 50 ms) and ends when PID does, after one more
# read; it writes into a FIFO that grep reads, and the first match ends
# grep, then the tail is stopped. For files that are rewritten in place
# (sysfs) this is the wrong tool: read them again until they say what is
# waited for.
wait_output() {
	local follow=(tail -s 0.05 -n +1 -F) fifo="$TMP/.wait_output.$BASHPID"
	local pid rc

	[[ -n ${4:-} ]] && follow+=(--pid="$4")
	rm -f "$fifo"
	mkfifo "$fifo" || return 1
	timeout "$3" "${follow[@]}" -- "$1" >"$fifo" 2>/dev/null &
	pid=$!
	grep -E -m1 -- "$2" <"$fifo"
	rc=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -f "$fifo"
	return "$rc"
}

# /proc/vmstat adds each CPU's pending deltas to its counters only every
# vm.stat_interval (1 s): two reads a moment apart can each be off by a
# few pages, and a baseline taken that way made "nothing left pinned"
# fail (pins: 0, were -3). Writing vm.stat_refresh (root) folds them in.
pins() {
	echo 1 2>/dev/null >/proc/sys/vm/stat_refresh
	awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	     $1 == "nr_foll_pin_released" { r = $2 }
	     END { print a - r }' /proc/vmstat
}

json_schema() {
	"${PYTHON:-python3}" userspace-tools/check_json.py \
		Documentation/cli.rst "$1" "$TMP/out" 2>>"$TMP/err"
}

check_diag() {
	local f

	for f in ${CHECK_FILES:-out err}; do
		[[ -s $TMP/$f ]] || continue
		echo "# --- $f:"
		if [[ -n ${CHECK_LINES:-} ]]; then
			head -n "$CHECK_LINES" "$TMP/$f" | cut -c 1-300 | diag
		else
			head -c 4000 "$TMP/$f" | diag
		fi
	done
}

check() {
	local desc=$1

	shift
	if "$@"; then
		ok "$desc"
	else
		not_ok "$desc"
		"${CHECK_DIAG:-check_diag}"
	fi
}
