# SPDX-License-Identifier: GPL-2.0
#
# Top-level build of krdma: the module (through Kbuild), the userspace
# tools and the selftests, plus the guest test bed.
#
#   make                 module + tools + examples, for KDIR (default: running
#                        kernel)
#   make check           every test, in a QEMU guest per kernel, then two
#                        guests (see README.md)
#   make check-two       only the two guests joined by a QEMU socket link:
#                        transfers both ways on rxe and siw, one guest killed
#                        mid-transfer
#   make check-debug     every test on a KASAN/lockdep/kmemleak/fail-nth kernel
#                        (built once from linux-source-6.1, ~30 min; slow)
#   make demo            the main job, in a QEMU guest
#   make guest-run CMD=  run CMD in the guest with soft devices and krdma up
#   make soak            the fuzzer with random seeds and every family of
#                        actions (device removal too) for SOAK_MINUTES
#                        (default 10) per kernel; not part of make check
#   make bench           krdmactl bench vs perftest vs TCP, in a QEMU guest;
#                        writes Documentation/benchmarks-results.* and .png
#   make lint            W=1, sparse and checkpatch --strict on the module
#   make install         module, krdmactl, krdma-allreduce, man page,
#                        completion, udev rule
#   make uninstall       remove what make install installed

KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
BUILD ?= $(CURDIR)/build

# The running kernel may have no headers (a CI box, a container): then
# build for the newest kernel whose headers are installed, and say so.
ifeq ($(wildcard $(KDIR)/Makefile),)
FALLBACK_KDIR := $(lastword $(sort $(wildcard /lib/modules/*/build/Makefile)))
ifneq ($(FALLBACK_KDIR),)
override KDIR := $(patsubst %/Makefile,%,$(FALLBACK_KDIR))
$(info krdma: no headers for the running kernel $(KVER); building for $(notdir $(patsubst %/build,%,$(KDIR))) (KDIR=$(KDIR)))
endif
endif

.PHONY: all modules tools examples selftests check check-debug check-two demo guest-run soak bench lint clean help \
	install uninstall install-modules install-tools

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

guest-run:
	selftests/qemu/run.sh run "$(CMD)"

# One guest boot per kernel (as make check), krdma_fuzz --remove with random
# seeds for SOAK_MINUTES each; prints each seed and report line, then
# "N passed, N failed" (selftests/qemu/soak-kernels.sh, krdma_soak.sh)
soak:
	SOAK_MINUTES=$(or $(SOAK_MINUTES),10) selftests/qemu/soak-kernels.sh

# The guest step takes ~10 min under TCG; the report step runs on the host,
# on the newest run with bench results (build/qemu/last may be another's)
bench:
	KRDMA_QEMU_TIMEOUT=$${KRDMA_QEMU_TIMEOUT:-1800} selftests/qemu/run.sh run scripts/bench.sh; \
	st=$$?; \
	scripts/bench.sh --report "$$(ls -td $(BUILD)/qemu/runs/*/bench | head -n1)" Documentation && \
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
# $(PREFIX)/sbin, its man page and bash completion, and a udev rule giving
# /dev/krdma mode 0660, group rdma. DESTDIR and PREFIX are honoured;
# depmod and udevadm run only without DESTDIR. DEPMOD=true skips depmod
# (the headers package has no System.map, so kbuild's own depmod is skipped).
DEPMOD ?= depmod
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
UDEVDIR ?= /etc/udev/rules.d
INSTALL ?= install
# the release KDIR builds for (KVER, unless KDIR was a fallback)
MOD_KVER = $(or $(shell sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h 2>/dev/null),$(KVER))

install: install-modules install-tools

# Installs the krdma.ko that `make` built (no rebuild as root here)
install-modules:
	@test -f krdma.ko || { echo "krdma: no krdma.ko: run make first"; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_DIR=updates \
		$(if $(DESTDIR),INSTALL_MOD_PATH=$(DESTDIR)) modules_install
	$(if $(DESTDIR),,$(DEPMOD) -a $(MOD_KVER))

install-tools: tools examples
	$(INSTALL) -D -m 0755 userspace-tools/krdmactl $(DESTDIR)$(SBINDIR)/krdmactl
	$(INSTALL) -D -m 0755 examples/krdma-allreduce $(DESTDIR)$(SBINDIR)/krdma-allreduce
	$(INSTALL) -D -m 0644 userspace-tools/krdmactl.8 $(DESTDIR)$(MANDIR)/man8/krdmactl.8
	$(INSTALL) -D -m 0644 userspace-tools/krdmactl.bash-completion $(DESTDIR)$(COMPDIR)/krdmactl
	$(INSTALL) -D -m 0644 userspace-tools/60-krdma.rules $(DESTDIR)$(UDEVDIR)/60-krdma.rules
	$(if $(DESTDIR),,-udevadm control --reload 2>/dev/null)

uninstall:
	rm -f $(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko \
		$(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko.xz \
		$(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko.zst \
		$(DESTDIR)/lib/modules/$(MOD_KVER)/updates/krdma.ko.gz
	-rmdir $(DESTDIR)/lib/modules/$(MOD_KVER)/updates 2>/dev/null
	$(if $(DESTDIR),,$(DEPMOD) -a $(MOD_KVER))
	rm -f $(DESTDIR)$(SBINDIR)/krdmactl $(DESTDIR)$(SBINDIR)/krdma-allreduce \
		$(DESTDIR)$(MANDIR)/man8/krdmactl.8 \
		$(DESTDIR)$(COMPDIR)/krdmactl $(DESTDIR)$(UDEVDIR)/60-krdma.rules
	-rmdir $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(COMPDIR) \
		$(DESTDIR)$(PREFIX)/share/bash-completion 2>/dev/null
	$(if $(DESTDIR),,-udevadm control --reload 2>/dev/null)

help:
	@sed -n '3,/^$$/{/^$$/!p}' Makefile
