#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build, once, the krdma debug kernel: Debian's linux-source-6.1, with the
# fixes of selftests/qemu/debug-patches/*.patch and of the siw.ko every
# guest loads, selftests/qemu/siw-patches/*.patch (driver bugs krdma's tests
# hit, which would hide krdma's own), configured as allnoconfig +
# selftests/qemu/debug.config: only what the guest and the tests use,
# built in (rxe, siw, 9p, overlay, veth, netem, namespaces, userfaultfd),
# and KASAN, lockdep, DEBUG_ATOMIC_SLEEP, kmemleak, failslab/
# fail_page_alloc with fail-nth. The tree is cached in
#   $KRDMA_DEBUG_KERNEL_CACHE/linux-<source version>-<hash>/
# (default ~/.cache/krdma/debug-kernel; <hash>: of the fragment and the
# patches) and reused while those stay the same: a second call is instant.
# Not under the repository: kbuild's `make M=<repo> clean` (run.sh,
# lint.sh) deletes every *.o and *.ko below <repo>. Prints the path of the
# tree on stdout (and nothing else there); selftests/qemu/run.sh boots it
# with KRDMA_KERNEL_TREE=<tree>.
#
# The build runs at nice 19 with 2 jobs (about 25 min on 2 cores); its log
# is <cache>/linux-<...>.log. An interrupted build resumes where it
# stopped on the next call. Older trees are removed once a new one is
# complete.
#
# Environment: KRDMA_DEBUG_KERNEL_CACHE, KRDMA_DEBUG_JOBS (default 2),
# LINUX_SRC_PKG (default linux-source-6.1).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${LINUX_SRC_PKG:-linux-source-6.1}
fragment=$repo/selftests/qemu/debug.config
patches=()
for p in "$repo"/selftests/qemu/{debug,siw}-patches/*.patch; do
	[[ -f $p ]] && patches+=("$p")
done
jobs=${KRDMA_DEBUG_JOBS:-2}
cache=${KRDMA_DEBUG_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krdma/debug-kernel}

msg() { echo "build-debug-kernel: $*" >&2; }
die() {
	msg "ERROR: $*"
	exit 1
}

[[ -f $fragment ]] || die "no $fragment"
version=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) || version=
[[ -n $version ]] || die "package $pkg is not installed (apt-get install $pkg)"
tarball=$(dpkg-query -L "$pkg" | grep -E '^/usr/src/linux-source-[^/]*\.tar\.(xz|gz|bz2|zst)$' | head -n1) || true
[[ -n $tarball && -f $tarball ]] || die "no source tarball in package $pkg"

hash=$(cat "$fragment" "${patches[@]}" | sha256sum | cut -c1-12)
name=linux-$version-$hash
tree=$cache/$name
key="$pkg $version $hash"

if [[ -f $tree/.krdma-complete && $(cat "$tree/.krdma-complete") == "$key" ]]; then
	echo "$tree"
	exit 0
fi

# What the kernel build needs beyond install-deps.sh's list
need=()
for p in gcc make bc flex bison libelf-dev libssl-dev xz-utils kmod cpio patch; do
	[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true) == installed ]] || need+=("$p")
done
if ((${#need[@]})); then
	((EUID == 0)) || die "missing packages for the kernel build: ${need[*]} (apt-get install ${need[*]})"
	msg "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi

# One build at a time (a second caller waits, then finds the tree done)
mkdir -p "$cache"
exec 8>"$cache/.lock"
if ! flock -n 8; then
	msg "another build holds $cache/.lock; waiting for it"
	flock 8
fi
if [[ -f $tree/.krdma-complete && $(cat "$tree/.krdma-complete") == "$key" ]]; then
	echo "$tree"
	exit 0
fi

log=$cache/$name.log
start=$SECONDS
if [[ ! -f $tree/.krdma-extracted ]]; then
	rm -rf "$tree"
	mkdir -p "$tree"
	msg "extracting $tarball into $tree"
	tar -xf "$tarball" -C "$tree" --strip-components=1
	for p in "${patches[@]}"; do
		msg "applying ${p#"$repo"/}"
		patch -d "$tree" -p1 --batch --forward -s <"$p" || die "$p does not apply to $pkg $version"
	done
	touch "$tree/.krdma-extracted"
fi

kmake() { nice -n 19 make -C "$tree" -j"$jobs" "$@"; }

if [[ ! -f $tree/.krdma-configured ]]; then
	msg "configuring: allnoconfig + ${fragment#"$repo"/}"
	kmake allnoconfig KCONFIG_ALLCONFIG="$fragment" >"$log" 2>&1 ||
		die "configuring failed; see $log"
	# Every option the fragment asks for must have its value in the end
	# (a missing dependency silently drops one)
	bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*) opt=${line%%=*} want=$line ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }
			opt=${opt%% *}
			want=
			;;
		*) continue ;;
		esac
		got=$(grep -E "^$opt=" "$tree/.config" || true)
		if [[ $got != "$want" ]]; then
			msg "fragment asks for '${want:-# $opt is not set}', .config has '${got:-# $opt is not set}'"
			bad=1
		fi
	done <"$fragment"
	((bad == 0)) || die "the configuration does not match $fragment (dependencies?)"
	touch "$tree/.krdma-configured"
fi

msg "building bzImage and modules (nice 19, -j$jobs, ~30 min); log: $log"
kmake bzImage modules >>"$log" 2>&1 || {
	tail -n 30 "$log" >&2
	die "the kernel build failed; see $log"
}
# modules.builtin/modules.dep (and any =m module) for the guest's
# /lib/modules/<release> (run.sh and guest-setup.sh link it there)
rm -rf "$tree/.krdma-modroot"
kmake INSTALL_MOD_PATH="$tree/.krdma-modroot" modules_install >>"$log" 2>&1 ||
	die "modules_install failed; see $log"

echo "$key" >"$tree/.krdma-complete"
release=$(cat "$tree/include/config/kernel.release")
msg "built $release in $((SECONDS - start)) s: $tree"

# Older trees (another source version or fragment) are no longer used
for old in "$cache"/linux-*/; do
	old=${old%/}
	[[ $old == "$tree" ]] && continue
	msg "removing the old tree $old"
	rm -rf "$old" "$old.log"
done
echo "$tree"
