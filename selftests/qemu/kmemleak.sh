#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# kmemleak at the end of a guest check (run by guest-main.sh when the
# kernel has kmemleak, i.e. the debug kernel of build-debug-kernel.sh):
#
#   kmemleak.sh scan OUTDIR     two scans (a leak must stay unreferenced
#                               over two scans to be reported); run once
#                               before rmmod krdma (stacks name krdma's
#                               functions) and once after (what its exit
#                               left behind)
#   kmemleak.sh report OUTDIR   writes OUTDIR/kmemleak (every suspected leak)
#                               and OUTDIR/kmemleak-status, one line:
#                               "ok|fail <note>"; prints the leaks
#
# A leak is krdma's when its stack (not the task name) mentions krdma
# (krdma.ko, krdma_sample, a krdma_* function) or has a frame that no
# longer resolves to a symbol:
# code of a module unloaded since, and the only modules the tests unload
# are krdma and krdma_sample. Other leaks (the kernel's own, at boot) are
# printed but do not fail.
set -uo pipefail

km=/sys/kernel/debug/kmemleak
mode=${1:-}
out=${2:-}
[[ ($mode == scan || $mode == report) && -n $out ]] || {
	echo "usage: $0 scan|report OUTDIR" >&2
	exit 2
}
[[ -w $km ]] || exit 0

if [[ $mode == scan ]]; then
	start=$SECONDS
	echo scan >"$km" && echo scan >"$km" ||
		echo "krdma-kmemleak: scan failed (kmemleak disabled? see dmesg)"
	echo "krdma-kmemleak: scanned in $((SECONDS - start)) s"
	exit 0
fi

cat "$km" >"$out/kmemleak" 2>&1
# One record per leak: "unreferenced object ..." up to the next one
awk -v out="$out" '
function flush() {
	if (rec == "")
		return
	total++
	if (bad) {
		krdma++
		print rec > (out "/kmemleak-krdma")
	} else {
		print rec > (out "/kmemleak-other")
	}
	rec = ""
	bad = 0
}
/^unreferenced object/ { flush() }
{
	rec = rec $0 "\n"
	# frames only: the comm of the test programs names krdma too
	# ("[<(____ptrval____)>]" until the kernel has entropy for %p)
	if ($0 ~ /^ +\[<[^>]*>\] / &&
	    ($0 ~ /krdma/ || $0 ~ /\] 0x[0-9a-f]+$/))
		bad = 1
}
END {
	flush()
	printf "%d %d\n", total, krdma > (out "/kmemleak-counts")
}' "$out/kmemleak"
read -r total krdma <"$out/kmemleak-counts"
rm -f "$out/kmemleak-counts"

if ((total > krdma)); then
	echo "krdma-kmemleak: $((total - krdma)) suspected leak(s) not from krdma (do not fail the run):"
	head -n 80 "$out/kmemleak-other" | sed 's/^/  | /'
fi
if ((krdma)); then
	echo "krdma-kmemleak: $krdma suspected leak(s) from krdma:"
	sed 's/^/  | /' "$out/kmemleak-krdma"
	echo "fail $krdma of $total suspected leaks are krdma's (see kmemleak-krdma)" >"$out/kmemleak-status"
else
	echo "krdma-kmemleak: no suspected leak from krdma ($total other)"
	echo "ok none of $total suspected leaks is krdma's" >"$out/kmemleak-status"
fi
