# SPDX-License-Identifier: GPL-2.0
#
# Top-level build of krdma: the module (through Kbuild), the userspace
# tools and the selftests, plus the guest test bed.
#
#   make                 module + tools, for KDIR (default: running kernel)
#   make check           every test, in a QEMU guest (see README.md)
#   make demo            the main job, in a QEMU guest
#   make guest-run CMD=  run CMD in the guest with soft devices and krdma up
#   make lint            W=1, sparse and checkpatch --strict on the module

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

.PHONY: all modules tools selftests check demo guest-run lint clean help

all: modules tools

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

selftests: modules tools
	$(MAKE) -C selftests KDIR=$(KDIR)

check:
	selftests/qemu/run.sh check

demo:
	selftests/qemu/run.sh demo

guest-run:
	selftests/qemu/run.sh run "$(CMD)"

lint:
	scripts/lint.sh $(KDIR)

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	$(MAKE) -C userspace-tools clean
	$(MAKE) -C selftests clean

help:
	@sed -n '3,11p' Makefile
