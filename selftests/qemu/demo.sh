#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo, run in the test guest by `make demo` (selftests/qemu/run.sh
# demo) after guest-setup.sh: rxe0 and siw0 are up (see
# /run/krdma-guest.env for names and addresses) and krdma.ko is loaded if
# it was built. cwd is the repo root. Placeholder: shows the devices.
set -euo pipefail

if [[ -x userspace-tools/krdmactl ]]; then
	userspace-tools/krdmactl dev
else
	echo "demo: userspace-tools/krdmactl not built; showing ibv_devinfo"
	ibv_devinfo
fi
