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
 * @magic: KRDMA_CM_MAGIC; private data that is shorter than this header
 *         or does not start with it is not krdma's: it comes from a plain
 *         verbs peer
 * @version: KRDMA_CM_VERSION; a krdma peer of another version is refused
 *           (KRDMA_REJ_VERSION)
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

/* krdma_cm_rej.reason: why a listener refused a connect request */
enum krdma_rej_reason {
	KRDMA_REJ_VERSION = 1,		/* a krdma header of another version */
	KRDMA_REJ_NOT_KRDMA = 2,	/* no krdma header, and the listener
					 * takes krdma peers only
					 */
	KRDMA_REJ_BACKLOG = 3,		/* the backlog is full */
	KRDMA_REJ_CLOSING = 4,		/* the listener is being closed */
	KRDMA_REJ_NO_RESOURCES = 5,	/* no memory, QP or CQ for it */
	KRDMA_REJ_NR,			/* one past the last; not sent */
};

/**
 * struct krdma_cm_rej - why a connect request was rejected, in the CM
 *                       private data of the reject
 * @magic: KRDMA_CM_MAGIC
 * @version: the rejecting side's KRDMA_CM_VERSION
 * @reason: enum krdma_rej_reason
 * @reserved: 0
 *
 * 8 bytes, little-endian. The connecting side sees it with
 * RDMA_CM_EVENT_REJECTED; a reject without it comes from no krdma
 * listener (nobody listens there, or a program that is not krdma).
 */
struct krdma_cm_rej {
	__le32 magic;
	u8 version;
	u8 reason;
	__le16 reserved;
} __packed;

static_assert(sizeof(struct krdma_cm_rej) == 8);

#endif /* _KRDMA_WIRE_H */
