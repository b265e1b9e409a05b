# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Sourced by check-kernels.sh (make check) and soak-kernels.sh (make soak):
# pick_kernels fills the array `kernels` with the guest kernels to run, in
# order, from the environment:
#   KRDMA_KERNELS=all      every Debian kernel with an image and headers
#                          installed (6.1 from bookworm and 6.12 from
#                          bookworm-backports, see scripts/install-deps.sh)
#   KRDMA_KERNELS="6.1 6.12"  series (or full releases) to run, in order
#   GUEST_KVER=<release>   only that kernel (as run.sh alone)
# run_for_line REGEX CMD... runs CMD, its output shown, and sets `st` (its
# exit status) and `line` (its last output line matching REGEX, or empty).

installed_kernels() {
	local v
	for v in /boot/vmlinuz-*-amd64; do
		v=${v#/boot/vmlinuz-}
		[[ -f /lib/modules/$v/build/Makefile && -f /lib/modules/$v/modules.dep ]] && echo "$v"
	done | sort -V
}

pick_kernels() {
	local -a all
	local w v
	kernels=()
	if [[ -n ${GUEST_KVER:-} ]]; then
		kernels=("$GUEST_KVER")
		return
	fi
	mapfile -t all < <(installed_kernels)
	for w in ${KRDMA_KERNELS:-all}; do
		for v in "${all[@]}"; do
			if [[ $w == all || $v == "$w" || $v == "$w".* || $v == "$w"-* ]]; then
				[[ " ${kernels[*]} " == *" $v "* ]] || kernels+=("$v")
			fi
		done
	done
}

# shellcheck disable=SC2034 # st and line are the caller's
run_for_line() {
	local re=$1 log
	shift
	log=$(mktemp)
	"$@" 2>&1 | tee "$log"
	st=${PIPESTATUS[0]}
	line=$(grep -E "$re" "$log" | tail -n1)
	rm -f "$log"
}
