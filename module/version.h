/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: the module's version, set here and nowhere else. The module
 * reports it (modinfo, "krdma X.Y.Z loaded", KRDMA_IOC_QUERY_MODULE); the
 * Makefile reads these three lines for make version and for the
 * PACKAGE_VERSION of dkms.conf (make dkms.conf, make dkms-install).
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_VERSION_H
#define _KRDMA_VERSION_H

#include <linux/stringify.h>

#define KRDMA_MAJOR	0
#define KRDMA_MINOR	3
#define KRDMA_PATCH	0

#define KRDMA_VERSION_STR __stringify(KRDMA_MAJOR) "." \
	__stringify(KRDMA_MINOR) "." __stringify(KRDMA_PATCH)

#endif /* _KRDMA_VERSION_H */
