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
	# make lint's check of the shell scripts
	shellcheck
	# make check's DKMS test (selftests/dkms_host_test.sh; 186 KB)
	dkms
	linux-image-amd64 linux-headers-amd64 linux-source-6.1
	# the debug kernel of make check (scripts/build-debug-kernel.sh)
	libssl-dev patch
	libibverbs-dev librdmacm-dev
	# guest test bed
	qemu-system-x86 busybox-static iproute2 libcap2-bin
	rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest
	# krdma_blk: its guest test (selftests/krdma_blk.sh, fio --verify) and
	# make bench-blk (fio against nvme-rdma); mkfs.ext4 and e2fsck from
	# e2fsprogs, which every Debian has
	fio
	# make bench
	gnuplot-nox iperf3
)

# The second test kernel: the 6.12 LTS from bookworm-backports (image,
# headers, and its source for siw). KRDMA_KERNELS=6.1 skips it.
bpo_series=6.12
want_bpo=1
[[ ${KRDMA_KERNELS:-all} == *6.12* || ${KRDMA_KERNELS:-all} == all ]] || want_bpo=0

if [[ ${1-} == --list ]]; then
	printf '%s\n' "${packages[@]}"
	((want_bpo)) && printf '%s\n' "linux-image-$bpo_series.*-amd64 (bookworm-backports)" \
		"linux-headers-$bpo_series.*-amd64 (bookworm-backports)" \
		"linux-source-$bpo_series (bookworm-backports)"
	exit 0
fi

# bookworm-backports through a private sources list and lists directory
# (the machine's own apt configuration stays as it is), pointing at the
# mirror the machine already uses for bookworm. Only the named packages
# come from backports: the meta-packages and linux-libc-dev stay at 6.1.
install_bpo_kernel() {
	local have
	have=$(compgen -G "/lib/modules/$bpo_series.*-amd64/build/Makefile" || true)
	if [[ -n $have ]] && compgen -G "/boot/vmlinuz-$bpo_series.*-amd64" >/dev/null &&
		dpkg-query -W -f='${db:Status-Status}' "linux-source-$bpo_series" 2>/dev/null | grep -qx installed; then
		return 0
	fi
	if ((EUID != 0)); then
		echo "install-deps: the $bpo_series kernel from bookworm-backports is missing; run this as root" >&2
		return 1
	fi
	local dir=/var/lib/krdma/apt-bpo uri
	uri=$(awk '/^URIs:/ { u = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") print u }' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
	[[ -n $uri ]] || uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2 }' \
		/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1)
	if [[ -z $uri ]]; then
		echo "install-deps: no bookworm entry in /etc/apt/sources.list*; cannot reach bookworm-backports" >&2
		return 1
	fi
	mkdir -p "$dir/lists/partial"
	printf 'deb %s bookworm main\ndeb %s bookworm-backports main\n' "$uri" "$uri" >"$dir/sources.list"
	local -a apt_opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
		-o "Dir::State::Lists=$dir/lists" -o APT::Get::Upgrade-By-Source-Package=false)
	apt-get "${apt_opts[@]}" update -q
	local abi
	abi=$(apt-cache "${apt_opts[@]}" pkgnames "linux-headers-$bpo_series." |
		grep -E "^linux-headers-$bpo_series\.[0-9]+\+deb12-amd64$" | sort -V | tail -n1)
	abi=${abi#linux-headers-}
	if [[ -z $abi ]]; then
		echo "install-deps: bookworm-backports has no linux-headers-$bpo_series.*-amd64" >&2
		return 1
	fi
	echo "install-deps: installing kernel $abi from bookworm-backports" >&2
	apt-get "${apt_opts[@]}" install -y -q --no-install-recommends \
		"linux-image-$abi/bookworm-backports" "linux-headers-$abi/bookworm-backports" \
		"linux-kbuild-${abi%-amd64}/bookworm-backports" \
		"linux-headers-${abi%-amd64}-common/bookworm-backports" \
		"linux-source-$bpo_series/bookworm-backports"
}

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
	((want_bpo)) && { install_bpo_kernel || exit 1; }
	exit 0
fi

echo "install-deps: missing Debian packages: ${missing[*]}" >&2
if ((EUID != 0)); then
	echo "install-deps: not root; run:" >&2
	echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
((want_bpo)) && install_bpo_kernel
exit 0
