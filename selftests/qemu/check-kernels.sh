#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make check: the host tests of the userspace tools (make -C
# userspace-tools test), of the examples over TCP (make -C examples test)
# and of DKMS (selftests/dkms_host_test.sh), then
# the whole test list once per guest kernel
# (one boot each), then two guests joined by a link (two-guests.sh), then
# one total. Each kernel's run is selftests/qemu/run.sh check; its
# summary is kept, the counts are added up, and the last line is
# "N passed, N failed, N skipped" over all kernels. Exits non-zero if any
# kernel's run failed.
#
# Environment:
#   KRDMA_KERNELS=all      every Debian kernel with an image and headers
#                          installed (6.1 from bookworm and 6.12 from
#                          bookworm-backports, see scripts/install-deps.sh)
#   KRDMA_KERNELS="6.1 6.12"  series (or full releases) to run, in order
#   GUEST_KVER=<release>   only that kernel (as run.sh alone)
#   KRDMA_TWO_GUESTS=1     then the two-guest test (two-guests.sh) on the
#                          newest of them; 0: not
#   KRDMA_DEBUG_STAGE=1    last, the tests of selftests/tests-debug.list on
#                          the debug kernel (scripts/build-debug-kernel.sh:
#                          built the first time, then cached); 0: not. Not
#                          with GUEST_KVER.
#   KRDMA_NO_HOST_TESTS=1  without the host tests: those of the userspace
#                          tools (make -C userspace-tools test) and of DKMS
#                          (selftests/dkms_host_test.sh), which otherwise
#                          run first, once, and count as one result each
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

msg() { echo "krdma-check: $*" >&2; }

"$repo/scripts/install-deps.sh" || exit 1

# shellcheck source=selftests/qemu/kernels.sh
. "$here/kernels.sh"
pick_kernels
if ((${#kernels[@]} == 0)); then
	msg "no installed kernel matches KRDMA_KERNELS=${KRDMA_KERNELS:-all} (scripts/install-deps.sh installs 6.1 and 6.12)"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
msg "kernels: ${kernels[*]}"

pass=0 fail=0 skip=0 rc=0
summary=()
start=$SECONDS

# count NAME: add the result line of run.sh check (run_for_line's $line
# and $st) to the totals and the summary; no line is one failure
count() {
	local p f s

	if [[ -z $line ]]; then
		summary+=("$1: no result line (run.sh exit $st)")
		fail=$((fail + 1))
		rc=1
		return
	fi
	read -r p _ f _ s _ <<<"${line//,/}"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	((st == 0 && f == 0)) || rc=1
	summary+=("$1: $line ($((SECONDS - t0)) s)")
}

# host_test NAME SECONDS CMD...: one host test, one result: passed when
# CMD exits 0, skipped when it exits 77 (what it needs is missing; its
# last output line says what), failed otherwise or when it takes longer
host_test() {
	local name=$1 secs=$2 t0=$SECONDS st

	shift 2
	if [[ ${KRDMA_NO_HOST_TESTS:-0} == 1 ]]; then
		skip=$((skip + 1))
		summary+=("$name: skipped, KRDMA_NO_HOST_TESTS=1")
		return
	fi
	timeout -k 10 "$secs" "$@"
	st=$?
	if ((st == 0)); then
		pass=$((pass + 1))
		summary+=("$name: ok ($((SECONDS - t0)) s)")
	elif ((st == 77)); then
		skip=$((skip + 1))
		summary+=("$name: skipped, see its output above")
	else
		msg "FAIL: $name (exit $st; output above)"
		fail=$((fail + 1))
		rc=1
		summary+=("$name: FAILED, see its output above ($((SECONDS - t0)) s)")
	fi
}

# The host tests, before the first guest boots:
# - the userspace tools: test_helpers and krdmactl against a fake
#   /dev/krdma (test_krdmactl.sh), with the system's python3 (a version
#   manager's shim on PATH can cost a second per call);
# - DKMS (selftests/dkms_host_test.sh, make check-dkms): the source
#   make dkms-install copies, and dkms build for every kernel with headers
#   (~35 s each); skipped without dkms
py=
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
host_test "host tests (make -C userspace-tools test)" 600 \
	make -C "$repo/userspace-tools" test ${py:+PYTHON="$py"}
host_test "examples over TCP (make -C examples test)" 300 \
	make -C "$repo/examples" test ${py:+PYTHON="$py"}
host_test "DKMS (selftests/dkms_host_test.sh)" 1200 "$repo/selftests/dkms_host_test.sh"

# The debug kernel builds (at nice 19, the first time only) while the
# other kernels' guests run: it fills their idle time, and costs the
# stage only what is left when they are done
debug_stage=0
[[ ${KRDMA_DEBUG_STAGE:-1} == 1 && -z ${GUEST_KVER:-} ]] && debug_stage=1
if ((debug_stage)); then
	debug_dir=$(mktemp -d)
	trap 'rm -rf "$debug_dir"' EXIT
	msg "building the debug kernel in the background (scripts/build-debug-kernel.sh; log: $debug_dir/build.log)"
	"$repo/scripts/build-debug-kernel.sh" >"$debug_dir/tree" 2>"$debug_dir/build.log" &
	debug_pid=$!
fi
# The debug kernel is a 6.1 kernel: with the debug stage, the stock 6.1
# guest leaves the programs of tests-debug.list to it (they run there
# with KASAN, lockdep and kmemleak watching), and runs the rest without
# SLUB debugging, which the 6.12 guest runs every program with (it costs
# the 6.1 guest about 3 of its 10 minutes)
for k in "${kernels[@]}"; do
	t0=$SECONDS
	list=()
	if ((debug_stage)) && [[ $k == 6.1.* ]]; then
		mkdir -p "$repo/build"
		grep -v '^#' "$repo/selftests/tests-debug.list" |
			grep -vxF -f - "$repo/selftests/tests.list" \
			>"$repo/build/tests-$k.list"
		list=(KRDMA_TESTS_LIST="$repo/build/tests-$k.list" KRDMA_SLUB_DEBUG=0)
		msg "$k: the programs of selftests/tests-debug.list run in the debug stage instead"
	fi
	run_for_line '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
		env GUEST_KVER="$k" "${list[@]}" "$here/run.sh" check
	count "$k${list:+ (without tests-debug.list)}"
done

# Two machines (two-guests.sh): once, on the newest kernel of the list
if [[ ${KRDMA_TWO_GUESTS:-1} == 1 ]]; then
	t0=$SECONDS
	run_for_line '^[0-9]+ passed, [0-9]+ failed$' \
		env GUEST_KVER="${kernels[-1]}" "$here/two-guests.sh"
	if [[ -z $line ]]; then
		summary+=("two guests (${kernels[-1]}): no result line (exit $st)")
		fail=$((fail + 1))
		rc=1
	else
		read -r p _ f _ <<<"${line//,/}"
		pass=$((pass + p)) fail=$((fail + f))
		((st == 0 && f == 0)) || rc=1
		summary+=("two guests (${kernels[-1]}): $line ($((SECONDS - t0)) s)")
	fi
fi
# The debug kernel: KASAN, lockdep, kmemleak, fault injection
# (Documentation/testing.rst, "Debug kernel"); every report fails the run
if ((debug_stage)); then
	t0=$SECONDS
	wait "$debug_pid"
	st=$?
	tree=$(cat "$debug_dir/tree")
	if ((st != 0)) || [[ -z $tree ]]; then
		tail -n 30 "$debug_dir/build.log"
		summary+=("debug kernel: the build failed (exit $st, scripts/build-debug-kernel.sh)")
		fail=$((fail + 1))
		rc=1
	else
		cat "$debug_dir/build.log" >&2
		summary+=("debug kernel: ready, $((SECONDS - t0)) s after the other guests")
		t0=$SECONDS
		run_for_line '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
			env KRDMA_KERNEL_TREE="$tree" KRDMA_DEBUG_KERNEL=1 \
			KRDMA_NO_LINT=1 KRDMA_TESTS_LIST=selftests/tests-debug.list \
			KRDMA_TEST_TIMEOUT="${KRDMA_DEBUG_TEST_TIMEOUT:-900}" \
			KRDMA_QEMU_TIMEOUT="${KRDMA_DEBUG_QEMU_TIMEOUT:-4200}" \
			"$here/run.sh" check
		count "debug kernel"
	fi
fi

echo
echo "== krdma check, every kernel ($((SECONDS - start)) s) =="
printf '%s\n' "${summary[@]}"
echo "$pass passed, $fail failed, $skip skipped"
exit $rc
