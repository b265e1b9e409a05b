# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# What scripts/bench.sh and scripts/bench-kapi.sh share, sourced by both:
# sizes, iteration counts and the whole guest's busy CPU time. They use
# the caller's BYTES, ITERS, MIN_ITERS and BATCH.

# 64, 4K, 1M, 1G -> bytes
bytes_of() {
	local v=${1%[kKmMgG]} u=${1: -1}
	case $u in
	k | K) echo $((v << 10)) ;;
	m | M) echo $((v << 20)) ;;
	g | G) echo $((v << 30)) ;;
	*) echo "$1" ;;
	esac
}
# The sizes krdmactl bench uses for "MIN-MAX": powers of 4 from MIN, and
# MAX; or a comma-separated list
sizes_of() {
	local lo hi v
	if [[ $1 == *-* ]]; then
		lo=$(bytes_of "${1%-*}")
		hi=$(bytes_of "${1#*-}")
		for ((v = lo; v <= hi; v *= 4)); do echo $v; done
		(((v / 4) != hi)) && echo "$hi"
	else
		for v in ${1//,/ }; do bytes_of "$v"; done
	fi
}
# The iterations krdmactl bench uses for a size (and op): BYTES / size
# within [MIN_ITERS, ITERS], a multiple of BATCH but for lat, at least 5
# (perftest's minimum)
iters_of() {
	local n=$(($(bytes_of "$BYTES") / $1))
	((n > ITERS)) && n=$ITERS
	((n < MIN_ITERS)) && n=$MIN_ITERS
	[[ ${2-} == lat ]] || n=$(((n + BATCH - 1) / BATCH * BATCH))
	((n < 5)) && n=5
	echo "$n"
}
# The whole guest's busy CPU time so far, all CPUs, in USER_HZ ticks, into
# $ticks (user, nice, system, irq and softirq of /proc/stat's "cpu" line:
# not idle, not iowait, not steal, which is time the host gave to others),
# and the time in microseconds into $usec; without a fork
# shellcheck disable=SC2034 # ticks and usec are its outputs
cpu_now() {
	local u n s irq si
	read -r _ u n s _ _ irq si _ </proc/stat
	ticks=$((u + n + s + irq + si))
	usec=${EPOCHREALTIME//[!0-9]/}
}
