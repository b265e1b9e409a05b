/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma_blk: a block device whose blocks are in another host's memory,
 * moved by RDMA through krdma's kernel API. The client's objects; the
 * design is in Documentation/blockdev.rst.
 *
 * A device (struct kbd_dev) has one krdma connection per blk-mq hardware
 * queue (struct kbd_queue), each with its own grant of the server's disk.
 * A request (struct kbd_cmd, blk-mq's per-request data) registers its
 * pages as a krdma buffer and moves them with one RDMA READ, or one RDMA
 * WRITE and an 8-byte READ behind it; the last completion hands it to its
 * queue's done_work, which deregisters the buffer and ends the request.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_BLK_H
#define _KRDMA_BLK_H

#include <linux/atomic.h>
#include <linux/blk-mq.h>
#include <linux/in.h>
#include <linux/llist.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <krdma/krdma.h>

#include "krdma_blk_wire.h"

#define KBD_DISK_NAME		"krdmablk"
#define KBD_MAX_DEVICES		64	/* so that "devices" fits in a page */
#define KBD_MAX_QUEUES		64
#define KBD_DEFAULT_QUEUES	4	/* or fewer: one per online CPU */
#define KBD_MAX_DEPTH		256
#define KBD_DEFAULT_DEPTH	64
#define KBD_MAX_IO_BYTES	SZ_256K
#define KBD_MAX_SEGMENTS	256
#define KBD_INLINE_SG		8	/* sg entries in the request; more: kmalloc */
#define KBD_MAX_IO_TIMEOUT_S	3600

struct kbd_attach_args {
	struct sockaddr_in addr;
	unsigned int queues;
	unsigned int depth;
};

struct kbd_hello;

/**
 * struct kbd_queue - one hardware queue and its connection
 * @dev: the device
 * @qid: its index in @dev->queues
 * @conn: the connection; set once the queue is open, then constant until
 *        the device is freed
 * @remote_base: the token's addr: the remote address of the disk's byte 0
 * @rkey: the token's key, when it has no key table
 * @rkeys: the key table, when the token has one (seg_shift != 0)
 * @fence_writes: WRITEs are fenced by 8-byte READs (iWARP): a WRITE's
 *                completion alone does not say the data was placed
 * @fence_lock: protects @fence_waiters, @wseq, @fence_covers and
 *              @fence_inflight; taken in softirq (the fence's done)
 * @fence_waiters: WRITE requests accepted and not yet covered by a fence
 *                 that completed, in the order krdma accepted them
 * @wseq: the sequence number of the last WRITE accepted on the queue
 * @fence_covers: the fence in flight was posted after the WRITE of this
 *                number: it proves every WRITE up to it placed
 * @fence_inflight: a fence is posted and has not completed
 * @fence: the queue's one fence, an 8-byte READ (at most one in flight)
 * @scratch: where the fence's 8 bytes land; never read
 * @scratch_buf: @scratch, registered
 * @hello: while the queue connects: the hello's RECV
 * @done_list: requests whose operations have all completed
 * @done_work: ends the requests of @done_list
 */
struct kbd_queue {
	struct kbd_dev *dev;
	unsigned int qid;
	struct krdma_conn *conn;
	u64 remote_base;
	u32 rkey;
	struct krdma_rkeys *rkeys;
	bool fence_writes;
	spinlock_t fence_lock;	/* protects the fence_* fields and wseq */
	struct list_head fence_waiters;
	u64 wseq;
	u64 fence_covers;
	bool fence_inflight;
	struct krdma_req *fence;
	u64 *scratch;
	struct krdma_buf *scratch_buf;
	struct kbd_hello *hello;
	struct llist_head done_list;
	struct work_struct done_work;
};

/* kbd_dev.flags */
enum {
	KBD_DEV_FAILED,		/* a connection failed: all I/O fails */
};

/**
 * struct kbd_dev - one attached device, /dev/krdmablk<index>
 * @entry: in kbd_devices, under kbd_devices_lock
 * @index: its number, from kbd_ida
 * @addr: the server
 * @size: bytes, from the hello
 * @nr_queues: entries of @queues
 * @depth: requests in flight per queue
 * @flags: KBD_DEV_*
 * @lock: protects @closing, and the queueing of @fail_work
 * @closing: the connections are being closed: @fail_work may not run
 * @fail_work: disconnects every connection once the device failed
 * @tag_set: blk-mq's
 * @disk: the gendisk, once allocated
 * @queues: one per hardware queue
 */
struct kbd_dev {
	struct list_head entry;
	unsigned int index;
	struct sockaddr_in addr;
	u64 size;
	unsigned int nr_queues;
	unsigned int depth;
	unsigned long flags;
	spinlock_t lock;		/* protects closing */
	bool closing;
	struct work_struct fail_work;
	struct blk_mq_tag_set tag_set;
	struct gendisk *disk;
	struct kbd_queue queues[];
};

/**
 * struct kbd_cmd - a request's own data (blk-mq's pdu)
 * @queue: the queue of its hardware context, set once
 * @rw: the READ or the WRITE, allocated once
 * @buf: the request's pages, registered while it runs
 * @pending: operations posted and not completed
 * @failed: one of them failed: the request ends with an I/O error
 * @done_node: in @queue->done_list
 * @fence_entry: a fenced WRITE waiting for its fence, in
 *               @queue->fence_waiters
 * @wseq: that WRITE's number on its queue
 * @sgl: the pages of a request of up to KBD_INLINE_SG segments, for
 *       krdma_buf_reg_sgt() only (a longer one allocates its list)
 */
struct kbd_cmd {
	struct kbd_queue *queue;
	struct krdma_req *rw;
	struct krdma_buf *buf;
	atomic_t pending;
	bool failed;
	struct llist_node done_node;
	struct list_head fence_entry;
	u64 wseq;
	struct scatterlist sgl[KBD_INLINE_SG];
};

/* main.c */
extern struct workqueue_struct *kbd_wq;
unsigned int kbd_io_timeout_s(void);

/* dev.c */
int kbd_dev_attach(const struct kbd_attach_args *args);
int kbd_dev_detach(unsigned int index);
ssize_t kbd_dev_list(char *buf);
void kbd_dev_fail(struct kbd_dev *dev);
void kbd_dev_detach_all(void);

/* io.c */
extern const struct blk_mq_ops kbd_mq_ops;
void kbd_queue_done_work(struct work_struct *work);
void kbd_fence_done(struct krdma_req *req, const struct krdma_wc *wc);

/* sysfs.c */
int kbd_sysfs_init(void);
void kbd_sysfs_uninit(void);

#endif /* _KRDMA_BLK_H */
