#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Extract, once, the few files of the kernel source that the project needs
# from Debian's linux-source-6.1 package into build/linux-src-<version>/:
#   scripts/checkpatch.pl, scripts/spelling.txt, scripts/const_structs.checkpatch
#   tools/testing/selftests/kselftest*.h (kselftest.h, kselftest_harness.h, ...)
#   drivers/infiniband/sw/siw/*            (Debian's kernel has no siw)
# Prints the path of that directory on stdout (and nothing else there).
#
# Environment: BUILD (default <repo>/build), LINUX_SRC_PKG (default
# linux-source-6.1).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$repo/build}
pkg=${LINUX_SRC_PKG:-linux-source-6.1}

version=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) || version=
if [[ -z $version ]]; then
	echo "fetch-linux-src: package $pkg is not installed (run scripts/install-deps.sh)" >&2
	exit 1
fi
tarball=$(dpkg-query -L "$pkg" | grep -E '^/usr/src/linux-source-[^/]*\.tar\.(xz|gz|bz2|zst)$' | head -n1) || true
if [[ -z $tarball || ! -f $tarball ]]; then
	echo "fetch-linux-src: no source tarball found in package $pkg" >&2
	exit 1
fi

dest=$build/linux-src-$version
if [[ -f $dest/.complete ]]; then
	echo "$dest"
	exit 0
fi

mkdir -p "$build"
# A leftover without the .complete stamp (interrupted by hand?): redo it.
[[ -e $dest ]] && rm -rf "$dest"
tmp=$(mktemp -d "$build/.linux-src-$version.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "fetch-linux-src: extracting from $tarball (takes ~10 s)" >&2
# One pass over the archive; the top directory (linux-source-6.1/) is dropped.
tar -xf "$tarball" -C "$tmp" --strip-components=1 --wildcards \
	'*/scripts/checkpatch.pl' \
	'*/scripts/spelling.txt' \
	'*/scripts/const_structs.checkpatch' \
	'*/tools/testing/selftests/kselftest*.h' \
	'*/drivers/infiniband/sw/siw/*'

for f in scripts/checkpatch.pl scripts/spelling.txt scripts/const_structs.checkpatch \
	tools/testing/selftests/kselftest.h tools/testing/selftests/kselftest_harness.h \
	drivers/infiniband/sw/siw/Makefile; do
	if [[ ! -f $tmp/$f ]]; then
		echo "fetch-linux-src: $f missing from $tarball" >&2
		exit 1
	fi
done
echo "$pkg $version $tarball" >"$tmp/.complete"
chmod 755 "$tmp"

# Atomic: a concurrent run that won the race leaves its copy in place.
if ! mv -T "$tmp" "$dest" 2>/dev/null; then
	[[ -f $dest/.complete ]] || { echo "fetch-linux-src: cannot create $dest" >&2; exit 1; }
fi
trap - EXIT
rm -rf "$tmp"
echo "$dest"
