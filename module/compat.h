/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: every difference between the kernels krdma builds for lives here,
 * and nowhere else. The .c files are written against the newest API; this
 * header maps it onto older kernels.
 *
 * Supported: 6.1 to 6.12; tested on 6.1 (Debian bookworm) and 6.12
 * (bookworm-backports). dkms.conf.in's BUILD_EXCLUSIVE_KERNEL says the
 * same to DKMS: change both together.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_COMPAT_H
#define _KRDMA_COMPAT_H

#include <linux/mm.h>

/*
 * Kbuild looks into the headers for what a kernel has (a backport
 * counts): KRDMA_HAVE_* below. Nothing compares version numbers.
 */

#ifndef KRDMA_HAVE_VM_FLAGS_MOD
/* 6.3 made vma->vm_flags read-only, changed through vm_flags_*() */
static inline void vm_flags_mod(struct vm_area_struct *vma,
				vm_flags_t set, vm_flags_t clear)
{
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
}
#endif

#endif /* _KRDMA_COMPAT_H */
