#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install the Debian packages that building krdma and running its guest
# test bed need (selftests/qemu/run.sh). Quiet when all are present.
# Uses apt only; never downloads anything else.
#
#   scripts/install-deps.sh          install what is missing (root), or print
#                                    the command to run and exit 1 (not root)
#   scripts/install-deps.sh --list   print the package list and exit
set -euo pipefail

packages=(
	# build
	gcc make bc flex bison libelf-dev kmod sparse python3 xz-utils cpio
	linux-image-amd64 linux-headers-amd64 linux-source-6.1
	libibverbs-dev librdmacm-dev
	# guest test bed
	qemu-system-x86 busybox-static iproute2 libcap2-bin
	rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest
	# make bench
	gnuplot-nox iperf3
)

if [[ ${1-} == --list ]]; then
	printf '%s\n' "${packages[@]}"
	exit 0
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "install-deps: missing Debian packages: ${missing[*]}" >&2
if ((EUID != 0)); then
	echo "install-deps: not root; run:" >&2
	echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
