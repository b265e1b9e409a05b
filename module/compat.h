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

/* Nothing yet: 6.1 and 6.12 offer everything krdma uses alike. */

#endif /* _KRDMA_COMPAT_H */
