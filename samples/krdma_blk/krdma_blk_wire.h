/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma_blk: what the server and the client say to each other.
 *
 * One message, the hello, on every connection: the server SENDs it right
 * after it accepted the connection, the client RECVs it into a buffer it
 * posted before it connected (krdma_conn_params.prepare). Everything else
 * is one-sided: the client moves the blocks with RDMA READ and WRITE in
 * the window the hello grants, and the server's CPU takes no part.
 *
 * Little endian, 48 bytes, no padding:
 *
 *   magic      KRDMA_BLK_MAGIC ('kblk')
 *   version    KRDMA_BLK_VERSION; a client refuses any other (-EPROTO)
 *   size       the disk's size in bytes: a multiple of 4096, not 0
 *   addr ...   the struct krdma_token of the server's grant of the whole
 *   tag        disk on this connection (uapi/linux/krdma.h): block B of
 *              the disk is at remote address addr + B * 4096
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_BLK_WIRE_H
#define _KRDMA_BLK_WIRE_H

#include <linux/build_bug.h>
#include <linux/krdma.h>
#include <linux/types.h>

#define KRDMA_BLK_MAGIC		0x6b626c6b	/* 'kblk' */
#define KRDMA_BLK_VERSION	1
#define KRDMA_BLK_PORT		7740
#define KRDMA_BLK_BLOCK_SIZE	4096

/**
 * struct krdma_blk_hello - the server's first and only message
 * @magic: KRDMA_BLK_MAGIC
 * @version: KRDMA_BLK_VERSION
 * @size: bytes of the disk
 * @addr: token: remote address of the disk's first byte
 * @length: token: bytes of the window, at least @size
 * @rkey: token: the key, when @seg_shift is 0
 * @access: token: KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE
 * @seg_shift: token: 0, or the log2 of the window's pieces (key table)
 * @tag: token: the grant's tag
 */
struct krdma_blk_hello {
	__le32 magic;
	__le32 version;
	__le64 size;
	__le64 addr;
	__le64 length;
	__le32 rkey;
	__le32 access;
	__le32 seg_shift;
	__le32 tag;
};

static_assert(sizeof(struct krdma_blk_hello) == 48);

static inline void krdma_blk_hello_pack(struct krdma_blk_hello *h, u64 size,
					const struct krdma_token *tok)
{
	h->magic = cpu_to_le32(KRDMA_BLK_MAGIC);
	h->version = cpu_to_le32(KRDMA_BLK_VERSION);
	h->size = cpu_to_le64(size);
	h->addr = cpu_to_le64(tok->addr);
	h->length = cpu_to_le64(tok->length);
	h->rkey = cpu_to_le32(tok->rkey);
	h->access = cpu_to_le32(tok->access);
	h->seg_shift = cpu_to_le32(tok->seg_shift);
	h->tag = cpu_to_le32(tok->tag);
}

static inline void krdma_blk_hello_unpack(const struct krdma_blk_hello *h,
					  u64 *size, struct krdma_token *tok)
{
	*size = le64_to_cpu(h->size);
	tok->addr = le64_to_cpu(h->addr);
	tok->length = le64_to_cpu(h->length);
	tok->rkey = le32_to_cpu(h->rkey);
	tok->access = le32_to_cpu(h->access);
	tok->seg_shift = le32_to_cpu(h->seg_shift);
	tok->tag = le32_to_cpu(h->tag);
}

#endif /* _KRDMA_BLK_WIRE_H */
