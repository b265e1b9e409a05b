#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The static checks a linux-rdma reviewer runs first, on the module and
# on the modules of samples/krdma_blk and selftests/krdma_kbench (built
# against its Module.symvers):
#   - a W=1 build with no warning, and sparse on every file with none
#     (one build from clean, C=1),
#   - checkpatch.pl --strict on every source file (taken from Debian's
#     linux-source package, see scripts/fetch-linux-src.sh);
# and on every shell script of the tree: shellcheck -x, with no finding.
# Usage: scripts/lint.sh KDIR
set -euo pipefail

cd "$(dirname "$0")/.."
KDIR=${1:?usage: scripts/lint.sh KDIR}
fail=0

log=$(mktemp)
trap 'rm -f "$log"' EXIT
blk=$PWD/samples/krdma_blk
kbench=$PWD/selftests/krdma_kbench
symvers=KBUILD_EXTRA_SYMBOLS=$PWD/Module.symvers

# One build from clean does both (C=1 checks every file it compiles),
# on every core; run.sh then builds with W=1 too, on these objects
echo "lint: W=1 build and sparse against $KDIR"
jobs=-j$(nproc)
check=(C=1 CHECK="sparse -Wno-decl")
make -s -C "$KDIR" M="$PWD" clean >/dev/null
make -s -C "$KDIR" M="$blk" clean >/dev/null
make -s -C "$KDIR" M="$kbench" clean >/dev/null
if ! make "$jobs" -C "$KDIR" M="$PWD" W=1 "${check[@]}" modules >"$log" 2>&1 ||
   ! make "$jobs" -C "$KDIR" M="$blk" "$symvers" W=1 "${check[@]}" modules \
	>>"$log" 2>&1 ||
   ! make "$jobs" -C "$KDIR" M="$kbench" "$symvers" W=1 "${check[@]}" \
	modules >>"$log" 2>&1 ||
   grep -E 'warning:|error:' "$log"; then
	cat "$log"
	echo "lint: W=1 build or sparse FAILED"
	fail=1
fi

src=$(scripts/fetch-linux-src.sh)
echo "lint: checkpatch --strict (from $src)"
# shellcheck disable=SC2046
if ! "$src/scripts/checkpatch.pl" --strict --no-tree --terse --show-types \
	-f $(git ls-files --cached --others --exclude-standard \
		'module/*.[ch]' 'uapi/*.h' 'include/*.h' \
		'selftests/krdma_sample/*.c' 'selftests/krdma_kbench/*.c' \
		'samples/krdma_blk/*.[ch]' |
		sort -u); then
	echo "lint: checkpatch FAILED"
	fail=1
fi

echo "lint: shellcheck -x"
# shellcheck disable=SC2046
if ! shellcheck -x $(git ls-files --cached --others --exclude-standard '*.sh' |
		     sort -u) .ci/run; then
	echo "lint: shellcheck FAILED"
	fail=1
fi

if [ "$fail" -ne 0 ]; then
	echo "lint: FAILED"
	exit 1
fi
echo "lint: clean"
