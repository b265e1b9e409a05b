#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# DKMS on the host (make check runs it with the host tests, before the
# guests; make check-dkms alone). Prints TAP.
#
# - make dkms-source copies the module's source only (no .git, build/,
#   tools, tests or objects) with a dkms.conf whose PACKAGE_VERSION is the
#   module's version (make version, module/version.h);
# - dkms refuses (exit 77, BUILD_EXCLUSIVE_KERNEL) kernels outside the
#   supported range: 6.0, 6.13, 7.0;
# - dkms build succeeds for every kernel whose headers are installed
#   (/lib/modules/*/build), and the krdma.ko it makes has that kernel's
#   vermagic and the module's version, stripped (< 1 MB).
#
# dkms runs on private trees (--dkmstree, --sourcetree in a temporary
# directory): the system's DKMS state (/var/lib/dkms/<module>, /usr/src) is
# neither read nor changed, but for DKMS's own signing key
# (/var/lib/dkms/mok.key), which dkms creates the first time.
# Each build takes ~35 s on 2 cores (6.1 and 6.12, 2026-12-04).
# Exits 0 when all passed, 1 when one failed, 77 when dkms is not
# installed (every test skipped).

# shellcheck disable=SC2317 # functions run through check()
set -u
cd "$(dirname "$0")/.." || exit 1

TMP=$(mktemp -d /tmp/dkms_host_test.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

# shellcheck source=selftests/lib.sh
. selftests/lib.sh

kernels=()
for mk in /lib/modules/*/build/Makefile; do
	[[ -e $mk ]] || continue
	k=${mk#/lib/modules/}
	kernels+=("${k%/build/Makefile}")
done
unsupported=(6.0.0-1-amd64 6.13.0-1-amd64 7.0.0-1-amd64)

echo "TAP version 13"
echo "1..$((2 + ${#kernels[@]}))"

# 1: the source DKMS gets
version=$(make -s version 2>"$TMP/err")
src=$TMP/src/usr/src/krdma-$version
make -s dkms-source DESTDIR="$TMP/src" >"$TMP/err" 2>&1
rc=$?
source_ok() {
	local extra

	((rc == 0)) && [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1
	grep -qx "PACKAGE_VERSION=\"$version\"" "$src/dkms.conf" || {
		grep PACKAGE_VERSION "$src/dkms.conf" >"$TMP/err"
		return 1
	}
	extra=$(cd "$src" && find . -mindepth 1 \( -name .git -o -name build \
		-o -name userspace-tools -o -name selftests -o -name '*.o' \
		-o -name '*.ko' -o -name '.*.cmd' \) -print)
	[[ -z $extra ]] || {
		echo "copied: $extra" >"$TMP/err"
		return 1
	}
	[[ -f $src/Kbuild && -f $src/module/version.h && -f $src/uapi/linux/krdma.h ]]
}
check "make dkms-source: the module's source only, dkms.conf of version $version" source_ok

if ! command -v dkms >/dev/null; then
	why="dkms is not installed (apt-get install dkms; scripts/install-deps.sh installs it)"
elif ((EUID != 0)); then
	why="not root: dkms signs with /var/lib/dkms/mok.key"
else
	why=
fi

# dkms_build KVER: dkms build on the private trees; exit status in $rc,
# output in $TMP/err, seconds in $secs
mkdir -p "$TMP/dkms"
dkms_build() {
	local t0=$SECONDS

	timeout -k 10 900 dkms build "krdma/$version" -k "$1" \
		--dkmstree "$TMP/dkms" --sourcetree "$TMP/src/usr/src" \
		</dev/null >"$TMP/err" 2>&1
	rc=$?
	secs=$((SECONDS - t0))
}

# 2: BUILD_EXCLUSIVE_KERNEL keeps dkms from kernels krdma does not support
refused_all() {
	local k

	for k in "${unsupported[@]}"; do
		dkms_build "$k"
		if ((rc != 77)) || ! grep -q BUILD_EXCLUSIVE "$TMP/err"; then
			sed -i "1i dkms build -k $k: exit $rc, not 77 (BUILD_EXCLUSIVE)" "$TMP/err"
			return 1
		fi
	done
}
if [[ -n $why ]]; then
	skip "dkms refuses kernels outside 6.1-6.12 (${unsupported[*]})" "$why"
else
	check "dkms refuses kernels outside 6.1-6.12 (${unsupported[*]})" refused_all
fi

# 3..: dkms build for each kernel with headers (that dkms.conf allows)
supported=$(sed -n 's/^BUILD_EXCLUSIVE_KERNEL="\(.*\)"$/\1/p' "$src/dkms.conf" 2>/dev/null)
built_ok() {
	local ko

	((rc == 0)) || return 1
	ko=$(compgen -G "$TMP/dkms/krdma/$version/$1/*/module/krdma.ko*" | head -n1)
	[[ -n $ko ]] || {
		echo "no krdma.ko* in $TMP/dkms/krdma/$version/$1" >>"$TMP/err"
		return 1
	}
	size=$(case $ko in
		*.xz) xz -dc "$ko" ;;
		*.zst) zstd -dc "$ko" ;;
		*.gz) gzip -dc "$ko" ;;
		*) cat "$ko" ;;
		esac | wc -c)
	if ! modinfo -F vermagic "$ko" 2>>"$TMP/err" | grep -q "^$1 " ||
		[[ $(modinfo -F version "$ko" 2>>"$TMP/err") != "$version" ]] ||
		((size == 0 || size >= 1000000)); then
		echo "$ko: $size bytes, vermagic $(modinfo -F vermagic "$ko"), version $(modinfo -F version "$ko")" >>"$TMP/err"
		return 1
	fi
}
for k in "${kernels[@]}"; do
	desc="dkms build -k $k: krdma.ko of version $version for $k, stripped"
	if [[ -n $why ]]; then
		skip "$desc" "$why"
		continue
	fi
	if [[ ! $k =~ $supported ]]; then
		skip "$desc" "not a kernel krdma supports (6.1 to 6.12)"
		continue
	fi
	dkms_build "$k"
	size=0
	check "$desc" built_ok "$k"
	echo "# $k: dkms build took $secs s; krdma.ko $size bytes"
done

echo "# dkms: $((n - failed - skipped)) passed, $failed failed, $skipped skipped${why:+ ($why)}"
((failed == 0)) || exit 1
[[ -z $why ]] || exit 77
exit 0
