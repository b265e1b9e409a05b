#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build siw.ko (soft iWARP; Debian's kernel does not ship it) out of tree
# from the linux-source package, against KDIR, into build/siw-<kver>/siw.ko.
# Rebuilt only when missing or when the source version changed.
#
#   selftests/qemu/build-siw.sh KDIR     prints the path of siw.ko on stdout
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$repo/build}
kdir=${1:?usage: build-siw.sh KDIR}
# Not include/config/kernel.release: Debian's headers put the upstream
# version there (6.1.x), not the ABI name that vermagic and uname show.
kver=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$kdir/include/generated/utsrelease.h")
[[ -n $kver ]] || { echo "build-siw: no UTS_RELEASE in $kdir" >&2; exit 1; }
out=$build/siw-$kver

# siw's source must come from the same kernel series (linux-source-6.1 for
# 6.1.x, linux-source-6.12 for 6.12.x)
series=$(echo "$kver" | cut -d. -f1,2)
src=$(LINUX_SRC_PKG=linux-source-$series "$repo/scripts/fetch-linux-src.sh")
# Fixes of siw bugs krdma's tests ran into, applied to every siw.ko the
# guests load (Documentation/testing.rst, "Driver bugs the tests hit")
patches=("$repo"/selftests/qemu/siw-patches/*.patch)
[[ -e ${patches[0]} ]] || patches=()
digest=
((${#patches[@]})) && digest=$(cat "${patches[@]}" | sha1sum | cut -c1-12)
stamp="$(basename "$src") $kver $digest"

if [[ -f $out/siw.ko && -f $out/.stamp && $(cat "$out/.stamp") == "$stamp" ]]; then
	echo "$out/siw.ko"
	exit 0
fi

echo "build-siw: building siw.ko for $kver from $(basename "$src")" >&2
rm -rf "$out"
mkdir -p "$out"
cp "$src"/drivers/infiniband/sw/siw/*.[ch] "$src/drivers/infiniband/sw/siw/Makefile" "$out/"
for p in "${patches[@]}"; do
	# the patches name drivers/infiniband/sw/siw/FILE: strip to FILE
	patch -s -p5 -d "$out" <"$p" >&2 || { echo "build-siw: $p does not apply to $(basename "$src")" >&2; exit 1; }
done
# Kbuild's output goes to stderr so that stdout carries only the path.
make -C "$kdir" M="$out" CONFIG_RDMA_SIW=m modules >&2
test -f "$out/siw.ko"
echo "$stamp" >"$out/.stamp"
echo "$out/siw.ko"
