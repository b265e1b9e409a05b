/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: what goes over the wire. Documentation/protocol.rst describes it
 * for peers that are not krdma.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_WIRE_H
#define _KRDMA_WIRE_H

#include <linux/build_bug.h>
#include <linux/types.h>

#define KRDMA_CM_MAGIC		0x4d44524b	/* "KRDM" as little-endian bytes */
#define KRDMA_CM_VERSION	1

/* krdma_cm_hdr.features: none defined yet */
#define KRDMA_CM_FEATURES	0

/**
 * struct krdma_cm_hdr - the handshake, in the CM private data of the
 *                       connect request and of the accept
 * @magic: KRDMA_CM_MAGIC; a request whose first 4 bytes are 0 comes from
 *         a peer that sends no header (plain verbs): accepted as such
 * @version: KRDMA_CM_VERSION; requests of another version are rejected
 * @reserved0: 0
 * @reserved1: 0
 * @features: feature bits of the sender
 * @sq_depth: the sender's send queue depth
 * @rq_depth: the sender's receive queue depth: how many RECVs it can have
 *            posted, the peer's SEND credits
 * @reserved2: 0
 *
 * 28 bytes, little-endian, within the 56 bytes rdma_cm leaves to the
 * consumer on InfiniBand/RoCE (iWARP allows more).
 */
struct krdma_cm_hdr {
	__le32 magic;
	u8 version;
	u8 reserved0;
	__le16 reserved1;
	__le32 features;
	__le32 sq_depth;
	__le32 rq_depth;
	__le32 reserved2[2];
} __packed;

static_assert(sizeof(struct krdma_cm_hdr) == 28);

#endif /* _KRDMA_WIRE_H */
