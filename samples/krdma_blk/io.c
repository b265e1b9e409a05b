// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_blk: requests. Direct placement: a request's pages are
 * registered as a krdma buffer and moved by RDMA between them and the
 * server's disk, with no message to the server.
 *
 *   READ   one RDMA READ of the range into the pages;
 *   WRITE  one RDMA WRITE of the pages to the range. On iWARP it ends
 *          only once a fence has completed too: an 8-byte RDMA READ
 *          posted after it on the same connection, whose response comes
 *          only after every WRITE before it was placed (a WRITE's own
 *          completion says that on InfiniBand and RoCE, not on iWARP,
 *          see kbd_queue_open()). One fence covers every WRITE accepted
 *          before it; at most one is in flight per queue, and the WRITEs
 *          that come meanwhile wait for the next (group commit);
 *   FLUSH  completes at once: there is no cache, a completed WRITE is
 *          placed.
 *
 * The operations' done callbacks run in any context (softirq mostly);
 * the last one of a request queues it on its queue's done_list, and
 * done_work, in process context, deregisters the buffer (which sleeps)
 * and ends the request.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/blk-mq.h>
#include <linux/llist.h>
#include <linux/sched/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "krdma_blk.h"

/* Process context: deregister the request's pages and end it */
static void kbd_cmd_end(struct kbd_cmd *cmd)
{
	struct request *rq = blk_mq_rq_from_pdu(cmd);

	krdma_buf_dereg(cmd->buf);
	cmd->buf = NULL;
	blk_mq_end_request(rq, READ_ONCE(cmd->failed) ? BLK_STS_IOERR :
							BLK_STS_OK);
}

void kbd_queue_done_work(struct work_struct *work)
{
	struct kbd_queue *q = container_of(work, struct kbd_queue, done_work);
	struct llist_node *list = llist_del_all(&q->done_list);
	struct kbd_cmd *cmd, *next;
	unsigned int noio;

	/* The I/O path: an allocation must not recurse into it */
	noio = memalloc_noio_save();
	list = llist_reverse_order(list);
	llist_for_each_entry_safe(cmd, next, list, done_node)
		kbd_cmd_end(cmd);
	memalloc_noio_restore(noio);
}

/* One of the request's operations is over: the last one ends it */
static void kbd_cmd_put(struct kbd_queue *q, struct kbd_cmd *cmd)
{
	/* The atomic orders @failed before it */
	if (atomic_dec_and_test(&cmd->pending) &&
	    llist_add(&cmd->done_node, &q->done_list))
		queue_work(kbd_wq, &q->done_work);
}

static void kbd_fence_post(struct kbd_queue *q);

/*
 * The fence in flight is over (@ok: it completed with success): the
 * WRITEs it covers are placed; if others came meanwhile, the next fence
 * goes out for them. A failed fence fails every WRITE waiting: the
 * connection is broken, and their own completions fail too.
 */
static void kbd_fence_end(struct kbd_queue *q, bool ok)
{
	struct kbd_cmd *cmd, *tmp;
	LIST_HEAD(covered);
	bool again;

	spin_lock_bh(&q->fence_lock);
	list_for_each_entry_safe(cmd, tmp, &q->fence_waiters, fence_entry) {
		if (ok && cmd->wseq > q->fence_covers)
			break;
		list_move_tail(&cmd->fence_entry, &covered);
	}
	again = !list_empty(&q->fence_waiters);
	q->fence_inflight = again;
	q->fence_covers = q->wseq;
	spin_unlock_bh(&q->fence_lock);

	list_for_each_entry_safe(cmd, tmp, &covered, fence_entry) {
		list_del_init(&cmd->fence_entry);
		if (!ok)
			WRITE_ONCE(cmd->failed, true);
		kbd_cmd_put(q, cmd);
	}
	if (again)
		kbd_fence_post(q);
}

/* Any context: from a done callback, krdma only queues it */
static void kbd_fence_post(struct kbd_queue *q)
{
	struct krdma_req *r = q->fence;

	r->opcode = KRDMA_OP_READ;
	r->flags = 0;
	r->num_sge = 1;
	r->sge[0].buf = q->scratch_buf;
	r->sge[0].offset = 0;
	r->sge[0].length = sizeof(*q->scratch);
	/* Any address: a READ follows every WRITE before it, wherever */
	r->remote_addr = q->remote_base;
	r->rkey = q->rkey;
	r->rkeys = q->rkeys;
	r->done = kbd_fence_done;
	r->context = q;
	if (krdma_post(q->conn, r))
		kbd_fence_end(q, false);
}

/**
 * kbd_fence_done - a queue's fence completed
 * @req: the queue's fence
 * @wc: how
 *
 * Context: any (softirq mostly), no krdma lock held.
 */
void kbd_fence_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	kbd_fence_end(req->context, wc->status == IB_WC_SUCCESS);
}

/* A fenced WRITE was accepted: it waits for a fence posted after it */
static void kbd_fence_add(struct kbd_queue *q, struct kbd_cmd *cmd)
{
	bool post;

	spin_lock_bh(&q->fence_lock);
	cmd->wseq = ++q->wseq;
	list_add_tail(&cmd->fence_entry, &q->fence_waiters);
	post = !q->fence_inflight;
	if (post) {
		q->fence_inflight = true;
		q->fence_covers = cmd->wseq;
	}
	spin_unlock_bh(&q->fence_lock);
	if (post)
		kbd_fence_post(q);
}

/* Any context, no krdma lock held */
static void kbd_op_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct kbd_cmd *cmd = req->context;
	struct kbd_queue *q = cmd->queue;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			pr_err_ratelimited("%s%u: queue %u: %s failed: status %u, vendor error 0x%x\n",
					   KBD_DISK_NAME, q->dev->index, q->qid,
					   req->opcode == KRDMA_OP_WRITE ?
					   "WRITE" : "READ",
					   wc->status, wc->vendor_err);
		WRITE_ONCE(cmd->failed, true);
	}
	kbd_cmd_put(q, cmd);
}

/*
 * The request's pages as one krdma buffer. The scatterlist is needed only
 * for the registration (krdma copies the page list): the request's own
 * for a few segments, else one allocated for the call. Not the chained
 * sg pools of SCSI and NVMe: CONFIG_SG_POOL is not in every kernel.
 */
static int kbd_cmd_map(struct kbd_cmd *cmd, struct request *rq, u32 access)
{
	unsigned short nseg = blk_rq_nr_phys_segments(rq);
	struct scatterlist *sgl = cmd->sgl;
	struct sg_table one_run;
	int nents;

	if (nseg > KBD_INLINE_SG) {
		sgl = kmalloc_array(nseg, sizeof(*sgl), GFP_NOIO);
		if (!sgl)
			return -ENOMEM;
	}
	sg_init_table(sgl, nseg);
	nents = blk_rq_map_sg(rq->q, rq, sgl);
	one_run = (struct sg_table) {
		.sgl = sgl,
		.nents = nents,
		.orig_nents = nents,
	};
	cmd->buf = krdma_buf_reg_sgt(&one_run, access);
	if (sgl != cmd->sgl)
		kfree(sgl);
	if (IS_ERR(cmd->buf)) {
		int ret = PTR_ERR(cmd->buf);

		cmd->buf = NULL;
		return ret;
	}
	return 0;
}

static void kbd_req_fill(struct kbd_queue *q, struct krdma_req *r, u32 opcode,
			 struct krdma_buf *buf, u64 length, u64 pos,
			 struct kbd_cmd *cmd)
{
	r->opcode = opcode;
	r->flags = 0;
	r->num_sge = 1;
	r->sge[0].buf = buf;
	r->sge[0].offset = 0;
	r->sge[0].length = length;
	r->remote_addr = q->remote_base + pos;
	r->rkey = q->rkey;
	r->rkeys = q->rkeys;
	r->done = kbd_op_done;
	r->context = cmd;
}

static blk_status_t kbd_queue_rw(struct kbd_queue *q, struct request *rq,
				 struct kbd_cmd *cmd)
{
	bool write = req_op(rq) == REQ_OP_WRITE;
	u64 pos = (u64)blk_rq_pos(rq) << SECTOR_SHIFT;
	u32 len = blk_rq_bytes(rq);
	unsigned int noio;
	bool fenced;
	int ret;

	if (unlikely(!len || pos + len > q->dev->size))
		return BLK_STS_IOERR;
	blk_mq_start_request(rq);

	/* Registration and posting allocate: not by writing back to us */
	noio = memalloc_noio_save();
	/* READ writes into the pages; WRITE only reads them */
	ret = kbd_cmd_map(cmd, rq, write ? 0 : KRDMA_ACCESS_LOCAL_WRITE);
	if (unlikely(ret)) {
		memalloc_noio_restore(noio);
		if (ret == -ENOMEM)
			return BLK_STS_RESOURCE;
		pr_err_ratelimited("%s%u: cannot register a request's pages: %d\n",
				   KBD_DISK_NAME, q->dev->index, ret);
		return BLK_STS_IOERR;
	}

	kbd_req_fill(q, cmd->rw, write ? KRDMA_OP_WRITE : KRDMA_OP_READ,
		     cmd->buf, len, pos, cmd);
	fenced = write && q->fence_writes;
	WRITE_ONCE(cmd->failed, false);
	/* The operation, and for a fenced WRITE the fence that covers it */
	atomic_set(&cmd->pending, fenced ? 2 : 1);
	ret = krdma_post(q->conn, cmd->rw);
	if (unlikely(ret)) {
		/* -ENOTCONN: the connection failed; its event fails the device */
		WRITE_ONCE(cmd->failed, true);
		kbd_cmd_end(cmd);
	} else if (fenced) {
		/* Accepted: every fence posted from now on covers it */
		kbd_fence_add(q, cmd);
	}
	memalloc_noio_restore(noio);
	return BLK_STS_OK;
}

static blk_status_t kbd_queue_rq(struct blk_mq_hw_ctx *hctx,
				 const struct blk_mq_queue_data *bd)
{
	struct kbd_queue *q = hctx->driver_data;
	struct request *rq = bd->rq;

	if (unlikely(test_bit(KBD_DEV_FAILED, &q->dev->flags)))
		return BLK_STS_IOERR;
	switch (req_op(rq)) {
	case REQ_OP_READ:
	case REQ_OP_WRITE:
		return kbd_queue_rw(q, rq, blk_mq_rq_to_pdu(rq));
	case REQ_OP_FLUSH:
		blk_mq_start_request(rq);
		blk_mq_end_request(rq, BLK_STS_OK);
		return BLK_STS_OK;
	default:
		return BLK_STS_NOTSUPP;
	}
}

/*
 * The request is late: the server or the link is gone, or too slow. Its
 * connection is disconnected, which completes everything in flight on it
 * with an error; the request then ends through done_work, as any other.
 * The device fails: no reconnect.
 */
static enum blk_eh_timer_return kbd_timeout(struct request *rq)
{
	struct kbd_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct kbd_queue *q = cmd->queue;

	/*
	 * Its operations completed while the timer fired (it waits for
	 * done_work, which ends it): nothing timed out.
	 */
	if (!atomic_read(&cmd->pending))
		return BLK_EH_DONE;
	pr_err_ratelimited("%s%u: queue %u: a request timed out: disconnecting\n",
			   KBD_DISK_NAME, q->dev->index, q->qid);
	kbd_dev_fail(q->dev);
	krdma_disconnect(q->conn);
	return BLK_EH_DONE;
}

static int kbd_init_hctx(struct blk_mq_hw_ctx *hctx, void *data,
			 unsigned int hctx_idx)
{
	struct kbd_dev *dev = data;

	hctx->driver_data = &dev->queues[hctx_idx];
	return 0;
}

static int kbd_init_request(struct blk_mq_tag_set *set, struct request *rq,
			    unsigned int hctx_idx, unsigned int numa_node)
{
	struct kbd_dev *dev = set->driver_data;
	struct kbd_cmd *cmd = blk_mq_rq_to_pdu(rq);

	cmd->queue = &dev->queues[hctx_idx];
	INIT_LIST_HEAD(&cmd->fence_entry);
	cmd->rw = krdma_req_alloc(1, GFP_KERNEL);
	return cmd->rw ? 0 : -ENOMEM;
}

static void kbd_exit_request(struct blk_mq_tag_set *set, struct request *rq,
			     unsigned int hctx_idx)
{
	struct kbd_cmd *cmd = blk_mq_rq_to_pdu(rq);

	kfree(cmd->rw);
}

const struct blk_mq_ops kbd_mq_ops = {
	.queue_rq = kbd_queue_rq,
	.timeout = kbd_timeout,
	.init_hctx = kbd_init_hctx,
	.init_request = kbd_init_request,
	.exit_request = kbd_exit_request,
};
