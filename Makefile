# SPDX-License-Identifier: GPL-2.0
#
# Top-level build of krdma: the module (through Kbuild), the userspace
# tools and the selftests, plus the guest test bed.
#
#   make                 module + tools + examples, for KDIR (default: running
#                        kernel)
#   make check           every test, in a QEMU guest per kernel, then two
#                        guests (see README.md)
#   make check-dkms      make check's DKMS test alone: dkms build on the host
#                        for every kernel with headers (~35 s each)
#   make check-two       only the two guests joined by a QEMU socket link:
#                        transfers both ways on rxe and siw, the AllReduce
#                        example with ranks on both, one guest killed
#                        mid-transfer
#   make check-debug     every test on a KASAN/lockdep/kmemleak/fail-nth kernel
#                        (built once from linux-source-6.1, ~30 min; slow)
#   make demo            the main job, in a QEMU guest
#   make demo-workloads  krdma-allreduce, krdma-shuffle and krdma-load on
#                        rxe0, siw0 and TCP, verified, in a QEMU guest: a
#                        table of MB/s and ratios to TCP (~1 min of runs)
#   make guest-run CMD=  run CMD in the guest with soft devices and krdma up
#   make soak            the fuzzer with random seeds and every family of
#                        actions (device removal too) for SOAK_MINUTES
#                        (default 10) per kernel; not part of make check
#   make bench           krdmactl bench vs perftest vs TCP, 3 repeats, in a
#                        QEMU guest per kernel (as make check), then (unless
#                        KRDMA_BENCH_BLK=0) make bench-blk's fio table in
#                        the newest kernel's guest; writes Documentation/
#                        benchmarks-results.* (a section per kernel),
#                        benchmarks-<kernel>.png, blockdev-results.* and
#                        blockdev.png, and README.md's table
#   make bench-blk       fio on krdma_blk vs nvme-rdma, on rxe and siw, in a
#                        QEMU guest; writes Documentation/blockdev-results.*
#                        and blockdev.png
#   make lint            W=1, sparse and checkpatch --strict on the module
#   make install         module, krdmactl, krdma-allreduce, krdma-load,
#                        krdma-shuffle, man page, completion, udev rule
#   make uninstall       remove what make install installed
#   make dkms-install    the module's source to /usr/src/krdma-VERSION, built
#                        and installed by DKMS for every kernel with headers
#   make dkms-uninstall  remove it from DKMS and /usr/src
#   make version         print krdma's version (module/version.h)

KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
BUILD ?= $(CURDIR)/build

# krdma's version: set in module/version.h only (make version prints it)
version_part = $(shell sed -n 's/^.define KRDMA_$(1)[[:space:]]*\([0-9]*\)$$/\1/p' $(CURDIR)/module/version.h)
VERSION := $(call version_part,MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)

# The running kernel may have no headers (a CI box, a container): then
# build for the newest kernel whose headers are installed, and say so.
ifeq ($(wildcard $(KDIR)/Makefile),)
FALLBACK_KDIR := $(lastword $(sort $(wildcard /lib/modules/*/build/Makefile)))
ifneq ($(FALLBACK_KDIR),)
override KDIR := $(patsubst %/Makefile,%,$(FALLBACK_KDIR))
# (not for the goals that print or copy files: make -s version)
ifneq ($(filter-out version help dkms.conf dkms-source,$(or $(MAKECMDGOALS),all)),)
$(info krdma: no headers for the running kernel $(KVER); building for $(notdir $(patsubst %/build,%,$(KDIR))) (KDIR=$(KDIR)))
endif
endif
endif

.PHONY: all modules tools examples selftests check check-dkms check-debug check-two demo demo-workloads guest-run soak bench bench-blk lint clean help \
	install uninstall install-modules install-tools version \
	dkms-source dkms-install dkms-uninstall

all: modules tools examples

modules:
	@test -f $(KDIR)/Makefile || { \
		echo "krdma: no kernel headers at KDIR=$(KDIR)."; \
		echo "       install them: sudo apt-get install linux-headers-$(KVER)"; \
		echo "       or point KDIR at a kernel build tree: make KDIR=/path/to/linux"; \
		exit 1; }
	@echo "krdma: building krdma.ko for kernel $$(sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h 2>/dev/null) (KDIR=$(KDIR))"
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

tools:
	$(MAKE) -C userspace-tools

# Workloads over libkrdma (Documentation/workloads.rst)
examples: tools
	$(MAKE) -C examples

selftests: modules tools
	$(MAKE) -C selftests KDIR=$(KDIR)

# every installed Debian kernel (6.1 and 6.12), one guest boot each;
# KRDMA_KERNELS=6.1 (or 6.12) for one, GUEST_KVER=<release> for any
check:
	selftests/qemu/check-kernels.sh

# make check's DKMS test alone: dkms build for every kernel with headers,
# on private trees (the system's DKMS state is left alone)
check-dkms:
	selftests/dkms_host_test.sh

# The debug kernel of scripts/build-debug-kernel.sh (cached in
# ~/.cache/krdma/debug-kernel);
# rxe is ~20x slower there: long timeouts, and KRDMA_DEBUG_KERNEL=1 lets a
# test pick smaller sizes. Results: Documentation/testing.rst
check-debug:
	tree=$$(scripts/build-debug-kernel.sh) && \
	KRDMA_KERNEL_TREE=$$tree KRDMA_DEBUG_KERNEL=1 KRDMA_NO_LINT=1 \
	KRDMA_TEST_TIMEOUT=$${KRDMA_TEST_TIMEOUT:-3600} \
	KRDMA_QEMU_TIMEOUT=$${KRDMA_QEMU_TIMEOUT:-21600} \
	selftests/qemu/run.sh check

# Two guests (selftests/qemu/two-guests.sh, Documentation/testing.rst)
check-two:
	selftests/qemu/two-guests.sh

demo:
	selftests/qemu/run.sh demo

# The workload examples on rxe, siw and TCP (selftests/qemu/demo-workloads.sh)
demo-workloads:
	selftests/qemu/run.sh demo-workloads

guest-run:
	selftests/qemu/run.sh run "$(CMD)"

# One guest boot per kernel (as make check), krdma_fuzz --remove with random
# seeds for SOAK_MINUTES each; prints each seed and report line, then
# "N passed, N failed" (selftests/qemu/soak-kernels.sh, krdma_soak.sh)
soak:
	SOAK_MINUTES=$(or $(SOAK_MINUTES),10) selftests/qemu/soak-kernels.sh

# One guest boot per kernel (selftests/qemu/bench-kernels.sh; KRDMA_KERNELS,
# GUEST_KVER as make check): scripts/bench.sh, KRDMA_BENCH_REPEAT (3)
# interleaved repeats (~7 min each under TCG), then in the newest kernel's
# guest, unless KRDMA_BENCH_BLK=0, scripts/bench-blk.sh (~8 min, as make
# bench-blk); the report steps run on the host, over every kernel's run.
# About 55 min in all; one kernel, one repeat: make bench KRDMA_KERNELS=6.12
# KRDMA_BENCH_REPEAT=1 KRDMA_BENCH_BLK=0 (~10 min)
bench:
	selftests/qemu/bench-kernels.sh

# krdma_blk against nvme-rdma (fio, same jobs, same soft device, one guest:
# scripts/bench-blk.sh); the guest step takes ~8 min under TCG; the report
# step as make bench's
bench-blk:
	KRDMA_QEMU_TIMEOUT=$${KRDMA_QEMU_TIMEOUT:-1800} selftests/qemu/run.sh run scripts/bench-blk.sh; \
	st=$$?; \
	scripts/bench-blk.sh --report "$$(ls -td $(BUILD)/qemu/runs/*/bench-blk | head -n1)" Documentation && \
	exit $$st

lint:
	scripts/lint.sh $(KDIR)

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	$(MAKE) -C userspace-tools clean
	$(MAKE) -C examples clean
	$(MAKE) -C selftests clean

# make install (after make): the module to /lib/modules/$(KVER)/updates (the kernel's
# modules_install with INSTALL_MOD_DIR=updates, then depmod), krdmactl to
# $(PREFIX)/sbin, its man page, bash completion and the ABI files its man
# page refers to (debugfs-krdma and cli.rst, in $(DOCDIR)), and a udev rule giving
# /dev/krdma mode 0660, group rdma. DESTDIR and PREFIX are honoured;
# depmod, mandb and udevadm run only without DESTDIR. DEPMOD=true skips
# depmod. INSTALL_MOD_STRIP= (empty) keeps the module's debug info.
DEPMOD ?= depmod
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/krdma
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
UDEVDIR ?= /etc/udev/rules.d
INSTALL ?= install
INSTALL_MOD_STRIP ?= 1
# the release KDIR builds for (KVER, unless KDIR was a fallback)
MOD_KVER = $(or $(shell sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h 2>/dev/null),$(KVER))

# Signing: kbuild signs at install (CONFIG_MODULE_SIG_ALL=y) with the key
# CONFIG_MODULE_SIG_KEY names, relative to KDIR, and KDIR's
# certs/signing_key.x509. A distribution's headers have neither: sign-file
# then prints SSL errors and the module is installed unsigned anyway. So
# krdma asks kbuild to sign only where both exist (or the key is a PKCS#11
# URI), and otherwise says in one line that the module is not signed.
kconfig = $(shell sed -n 's/^$(1)="\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(KDIR)/include/config/auto.conf 2>/dev/null)
SIG_KEY = $(call kconfig,CONFIG_MODULE_SIG_KEY)
SIG_KEY_PATH = $(if $(filter /%,$(SIG_KEY)),$(SIG_KEY),$(KDIR)/$(SIG_KEY))
CAN_SIGN = $(or $(filter pkcs11:%,$(SIG_KEY)),$(and $(SIG_KEY),$(wildcard $(SIG_KEY_PATH)),$(wildcard $(KDIR)/certs/signing_key.x509)))
NO_SIGN = $(if $(filter y,$(call kconfig,CONFIG_MODULE_SIG_ALL)),$(if $(CAN_SIGN),,y))

install: install-modules install-tools

# Installs the krdma.ko that `make` built (no rebuild as root here),
# stripped of its debug info (INSTALL_MOD_STRIP=1: 6 MB -> 0.3 MB, as DKMS
# installs it), signed where the kernel's key is here (above). kbuild's own
# depmod runs only with the kernel's System.map, which a headers package
# does not have ("Skipping depmod"): it is turned off (cmd_depmod), and
# depmod runs here instead, for KDIR's release.
install-modules:
	@test -f krdma.ko || { echo "krdma: no krdma.ko: run make first"; exit 1; }
	$(if $(NO_SIGN),@echo "krdma: krdma.ko is installed unsigned (no $(SIG_KEY_PATH)); under Secure Boot use DKMS")
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_DIR=updates \
		INSTALL_MOD_STRIP=$(INSTALL_MOD_STRIP) $(if $(NO_SIGN),CONFIG_MODULE_SIG_ALL=) \
		cmd_depmod=: quiet_cmd_depmod= \
		$(if $(DESTDIR),INSTALL_MOD_PATH=$(DESTDIR)) modules_install
	$(if $(DESTDIR),,$(DEPMOD) -a $(MOD_KVER))

# mandb indexes the man page for whatis and apropos (man krdmactl finds
# it without); quiet, only where man-db is installed, and only the
# hierarchies this installs into: MANDIR and, on Debian, /usr/local/man,
# a link to share/man under which man-db looks the page up. A bare mandb
# would check every manpath: 10 minutes in a test guest over 9p under
# load, where the two small ones take a tenth of a second.
MANDB = command -v mandb >/dev/null && \
	for d in $(MANDIR) $(PREFIX)/man; do \
		if [ -d "$$d" ]; then mandb -q "$$d"; fi; \
	done || true

install-tools: tools examples
	$(INSTALL) -D -m 0755 userspace-tools/krdmactl $(DESTDIR)$(SBINDIR)/krdmactl
	$(INSTALL) -D -m 0755 examples/krdma-allreduce $(DESTDIR)$(SBINDIR)/krdma-allreduce
	$(INSTALL) -D -m 0755 examples/krdma-load $(DESTDIR)$(SBINDIR)/krdma-load
	$(INSTALL) -D -m 0755 examples/krdma-shuffle $(DESTDIR)$(SBINDIR)/krdma-shuffle
	$(INSTALL) -d $(DESTDIR)$(MANDIR)/man8
	sed 's|/usr/local/share/doc/krdma|$(DOCDIR)|' userspace-tools/krdmactl.8 \
		>$(DESTDIR)$(MANDIR)/man8/krdmactl.8
	chmod 0644 $(DESTDIR)$(MANDIR)/man8/krdmactl.8
	$(INSTALL) -D -m 0644 -t $(DESTDIR)$(DOCDIR) Documentation/ABI/testing/debugfs-krdma \
		Documentation/ABI/testing/sysfs-module-krdma Documentation/cli.rst
	$(INSTALL) -D -m 0644 userspace-tools/krdmactl.bash-completion $(DESTDIR)$(COMPDIR)/krdmactl
	$(INSTALL) -D -m 0644 userspace-tools/60-krdma.rules $(DESTDIR)$(UDEVDIR)/60-krdma.rules
	$(if $(DESTDIR),,udevadm control --reload 2>/dev/null || true)
	$(if $(DESTDIR),,$(MANDB))

uninstall:
	rm -f $(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko \
		$(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko.xz \
		$(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko.zst \
		$(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko.gz
	-rmdir $(DESTDIR)/lib/modules/$(MOD_KVER)/updates 2>/dev/null
	$(if $(DESTDIR),,$(DEPMOD) -a $(MOD_KVER))
	rm -f $(DESTDIR)$(SBINDIR)/krdmactl $(DESTDIR)$(SBINDIR)/krdma-allreduce \
		$(DESTDIR)$(SBINDIR)/krdma-load $(DESTDIR)$(SBINDIR)/krdma-shuffle \
		$(DESTDIR)$(MANDIR)/man8/krdmactl.8 \
		$(DESTDIR)$(DOCDIR)/debugfs-krdma $(DESTDIR)$(DOCDIR)/sysfs-module-krdma \
		$(DESTDIR)$(DOCDIR)/cli.rst $(DESTDIR)$(COMPDIR)/krdmactl $(DESTDIR)$(UDEVDIR)/60-krdma.rules
	-rmdir $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR) $(DESTDIR)$(PREFIX)/share/doc \
		$(DESTDIR)$(COMPDIR) $(DESTDIR)$(PREFIX)/share/bash-completion 2>/dev/null
	$(if $(DESTDIR),,udevadm control --reload 2>/dev/null || true)
	$(if $(DESTDIR),,$(MANDB))

# DKMS (Documentation/getting-started.rst): make dkms-install copies what
# building krdma.ko needs (not .git, build/, the tools or the tests) and a
# dkms.conf of krdma's version (from dkms.conf.in) to
# /usr/src/krdma-$(VERSION), adds it to DKMS (replacing an earlier copy of
# this version), and has dkms build and install krdma.ko for every kernel
# whose headers are installed (DKMS_KERNELS=<releases> for others); DKMS
# then rebuilds it for each kernel installed later (AUTOINSTALL). A kernel
# outside dkms.conf's BUILD_EXCLUSIVE_KERNEL (the kernels krdma supports)
# is skipped: dkms exits 77 for it. make dkms-source [DESTDIR=...] only
# copies; make dkms-uninstall undoes make dkms-install; make dkms.conf
# writes dkms.conf in the tree.
DKMS_SRC = $(DESTDIR)/usr/src/krdma-$(VERSION)
DKMS_FILES = Makefile Kbuild $(wildcard module/*.[ch] uapi/linux/*.h include/krdma/*.h)
DKMS_KERNELS ?= $(notdir $(patsubst %/build/Makefile,%,$(wildcard /lib/modules/*/build/Makefile)))
DKMS_CONF = sed 's/@VERSION@/$(VERSION)/' dkms.conf.in
DKMS_REMOVE = if [ -n "$$(dkms status krdma/$(VERSION))" ]; then dkms remove krdma/$(VERSION) --all; fi

dkms.conf: dkms.conf.in module/version.h
	$(DKMS_CONF) >$@

dkms-source:
	rm -rf $(DKMS_SRC)
	$(INSTALL) -d $(DKMS_SRC)
	tar -c $(DKMS_FILES) | tar -x --no-same-owner -C $(DKMS_SRC)
	$(DKMS_CONF) >$(DKMS_SRC)/dkms.conf

dkms-install:
	@test -z "$(DESTDIR)" || { echo "krdma: dkms-install is for this system (make dkms-source DESTDIR=$(DESTDIR) copies only)"; exit 1; }
	@command -v dkms >/dev/null || { echo "krdma: dkms is not installed (Debian: apt-get install dkms)"; exit 1; }
	@test -n "$(DKMS_KERNELS)" || { echo "krdma: no kernel headers in /lib/modules/*/build (or DKMS_KERNELS=<releases>)"; exit 1; }
	$(DKMS_REMOVE)
	$(MAKE) dkms-source
	dkms add krdma/$(VERSION)
	for k in $(DKMS_KERNELS); do \
		dkms install krdma/$(VERSION) -k $$k; st=$$?; \
		if [ $$st = 77 ]; then echo "krdma: $$k is not a kernel krdma supports (dkms.conf): skipped"; \
		elif [ $$st != 0 ]; then exit $$st; fi; \
	done

dkms-uninstall:
	$(DKMS_REMOVE)
	rm -rf /usr/src/krdma-$(VERSION)

help:
	@sed -n '3,/^$$/{/^$$/!p}' Makefile

version:
	@echo $(VERSION)
