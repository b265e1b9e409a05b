// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: the data path. An operation (struct krdma_req) is checked and
 * queued on its connection in krdma_post(), then posted in order, as
 * chunks, as the send queue has room: RDMA WRITE and READ go through
 * rdma_rw (which handles SGE limits and the iWARP READ registration),
 * split into chunks of at most KRDMA_CHUNK bytes (one WR's worth on siw:
 * krdma_chunk_max()); SEND, RECV and atomics
 * are one chunk each. Chunks complete in softirq context; the operation
 * completes, exactly once, when its last chunk does.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/moduleparam.h>
#include <linux/refcount.h>
#include <linux/sched/mm.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/krdma.h>

#include "krdma.h"

/* The state of a krdma_post_sync() */
struct krdma_sync {
	struct completion done;
	struct krdma_wc wc;
};

#define KRDMA_CHUNK (256 * 1024)
/* A chunk of at most this many pages needs no scatterlist allocation */
#define KRDMA_INLINE_SG 4
/* Chunks posted with one ib_post_send() at most */
#define KRDMA_CHAIN_MAX 32
/*
 * At most this many bytes of unsignaled chunks go between two CQEs of a
 * chain: a wait that counts the send queue's progress in CQEs (a session's
 * heartbeat, a key table's READ) then sees a slow link move within its
 * timeout, down to about 1 Mbit/s for 10 s, rather than at the CQE of a
 * whole chain (KRDMA_CHAIN_MAX chunks: 8 MiB).
 */
#define KRDMA_PROGRESS_BYTES SZ_1M
/*
 * A post that took longer than this ran the device's send work in the
 * poster's context; after KRDMA_POST_SLOW_COUNT of them on a connection,
 * krdma_post() and krdma_post_list() leave their posting to push_work.
 */
#define KRDMA_POST_SLOW_NS (200 * NSEC_PER_USEC)
#define KRDMA_POST_SLOW_COUNT 4

/*
 * Who posts what krdma_post() and krdma_post_list() accept: the caller
 * (0), push_work once posting runs long in the caller's context (1, the
 * default), or push_work always (2: tests).
 */
static unsigned int push_worker = 1;

static int krdma_param_set_push_worker(const char *val,
				       const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 0, 2);
}

static const struct kernel_param_ops krdma_push_worker_ops = {
	.set = krdma_param_set_push_worker,
	.get = param_get_uint,
};

module_param_cb(push_worker, &krdma_push_worker_ops, &push_worker, 0644);
__MODULE_PARM_TYPE(push_worker, "uint");
MODULE_PARM_DESC(push_worker,
		 "Kernel API posts by a worker: 0 never, 1 when posting runs long in the caller (default), 2 always");

enum krdma_chunk_state {
	KRDMA_CHUNK_FREE,	/* on conn->free_chunks */
	KRDMA_CHUNK_READY,	/* being built or completed */
	KRDMA_CHUNK_POSTED,	/* on conn->chunks, waiting for its CQE */
	KRDMA_CHUNK_REAPED,	/* completed by teardown, on conn->zombies */
};

enum krdma_chunk_kind {
	KRDMA_CHUNK_RW,		/* rdma_rw WRITE or READ */
	KRDMA_CHUNK_WR,		/* one WR of ours: SEND, atomic, WRITE_IMM tail */
	KRDMA_CHUNK_RECV,	/* a RECV */
};

/**
 * struct krdma_chunk - one posted piece of an operation
 * @cqe: completion of its last (signaled) WR
 * @req: the operation
 * @kind: KRDMA_CHUNK_*
 * @nr_wrs: send WRs it holds, given back to the send queue on completion
 * @dir: DMA direction of @sgt
 * @sgt: the local pages
 * @mapped: @sgt is DMA-mapped by us (not by rdma_rw)
 * @rw: the rdma_rw context of a WRITE/READ chunk
 * @wr: the send WR (SEND, atomic, WRITE_IMM tail)
 * @rwr: the receive WR
 * @sges: SGEs of @wr or @rwr
 * @inline_sg: @sgt's entries when they are few (@sgt_inline)
 * @sgt_inline: @sgt uses @inline_sg, not an allocated table
 * @entry: in conn->chunks (conn->recv_chunks) while posted, conn->zombies
 *         once reaped, conn->free_chunks once free
 * @state: KRDMA_CHUNK_* state, under conn->sq_lock
 * @signaled: its last WR is signaled: it gets a CQE when it succeeds.
 *            Unsignaled chunks (of unsignaled operations only) are
 *            completed by the CQE of a later send chunk, which implies
 *            them: every ib_post_send() of krdma ends with a signaled WR
 * @bytes: payload it moves, for KRDMA_PROGRESS_BYTES
 *
 * A chunk's memory lives as long as its connection's CQ: freed chunks go
 * to a per-connection free list. A CQE that names a chunk not in state
 * POSTED (a driver that completes a WR twice: siw may flush a READ that
 * already completed) finds it there and is ignored.
 */
struct krdma_chunk {
	struct ib_cqe cqe;
	struct krdma_req *req;
	enum krdma_chunk_kind kind;
	u32 nr_wrs;
	enum dma_data_direction dir;
	struct sg_table sgt;
	bool mapped;
	struct rdma_rw_ctx rw;
	union {
		struct ib_send_wr send;
		struct ib_rdma_wr rdma;
		struct ib_atomic_wr atomic;
	} wr;
	struct ib_recv_wr rwr;
	struct ib_sge sges[KRDMA_OP_MAX_SGE];
	struct scatterlist inline_sg[KRDMA_INLINE_SG];
	bool sgt_inline;
	struct list_head entry;
	enum krdma_chunk_state state;
	bool signaled;
	u32 bytes;
};

/*
 * Send-queue chunks prepared under post_mutex but not posted yet: posted
 * as one chain of WRs (one ib_post_send, one doorbell) when the batch is
 * pushed or the chain is full.
 */
struct krdma_chain {
	u32 n;
	u32 posted;	/* chunks posted under this hold of post_mutex */
	struct krdma_chunk *chunk[KRDMA_CHAIN_MAX];
};

static bool krdma_op_reads_local(u32 opcode)
{
	return opcode == KRDMA_OP_WRITE || opcode == KRDMA_OP_WRITE_IMM ||
	       opcode == KRDMA_OP_SEND || opcode == KRDMA_OP_SEND_IMM;
}

static enum dma_data_direction krdma_op_dir(u32 opcode)
{
	return krdma_op_reads_local(opcode) ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
}

/* Whether the outcome @status of @req is reported through its done */
static bool krdma_req_reports(const struct krdma_req *req, u32 status)
{
	return status != IB_WC_SUCCESS ||
	       (req->flags & (KRDMA_REQ_UNSIGNALED | KRDMA_REQ_QUIET_DONE)) !=
	       KRDMA_REQ_UNSIGNALED;
}

/*
 * The operation is over: report it (an unsignaled one only if it
 * failed, or to the ioctl layer) and drop what it holds. Called with no
 * krdma lock held: done may post again.
 */
static void krdma_req_complete(struct krdma_req *req)
{
	struct krdma_conn *conn = req->conn;
	struct krdma_buf *bufs[KRDMA_OP_MAX_SGE];
	struct krdma_wc wc = {
		.status = req->status,
		.vendor_err = req->vendor_err,
		.byte_len = req->byte_len,
		.imm_data = req->recv_imm,
		.has_imm = req->has_imm,
		.rdma_imm = req->rdma_imm,
	};
	u32 i, n = req->num_sge;

	if (req->opcode != KRDMA_OP_RECV && wc.status == IB_WC_SUCCESS)
		wc.byte_len = min_t(u64, req->total, U32_MAX);
	struct krdma_window *lwin = req->lwin;
	struct krdma_rkeys *rkeys = req->rkeys;

	for (i = 0; i < n; i++)
		bufs[i] = req->sge[i].buf;

	krdma_stats_done(conn, req->opcode, wc.status, wc.vendor_err,
			 req->opcode == KRDMA_OP_RECV ? req->byte_len :
							req->total);
	/* Not reported: req is the caller's again from here */
	if (krdma_req_reports(req, wc.status))
		req->done(req, &wc);	/* may free req */

	for (i = 0; i < n; i++)
		krdma_buf_put(bufs[i]);
	krdma_grant_put(lwin);
	krdma_rkeys_put(rkeys);
	krdma_conn_put(conn);
}

/* Record the first error; chunks may fail in softirq while posting fails */
static bool krdma_req_fail(struct krdma_req *req, u32 status)
{
	return cmpxchg(&req->status, IB_WC_SUCCESS, status) == IB_WC_SUCCESS;
}

/* One reference of req->inflight is gone; the last completes it */
static void krdma_req_dec(struct krdma_req *req)
{
	if (atomic_dec_and_test(&req->inflight))
		krdma_req_complete(req);
}

/*
 * Track a chunk that is about to be posted. Send chunks are linked in
 * the order they are posted (under post_mutex, as they join a chain).
 */
static void krdma_chunk_link(struct krdma_conn *conn, struct krdma_chunk *chunk)
{
	spin_lock_bh(&conn->sq_lock);
	chunk->state = KRDMA_CHUNK_POSTED;
	list_add_tail(&chunk->entry, chunk->kind == KRDMA_CHUNK_RECV ?
		      &conn->recv_chunks : &conn->chunks);
	spin_unlock_bh(&conn->sq_lock);
}

/* Nothing posted is waiting for its completion; under sq_lock */
static bool krdma_chunks_none(struct krdma_conn *conn)
{
	return list_empty(&conn->chunks) && list_empty(&conn->recv_chunks);
}

/*
 * A CQE names @chunk: stop tracking it and, for a send chunk, the
 * unsignaled send chunks posted before it, which the send queue
 * completed before it (moved to @implied, in order). Signaled chunks
 * before it stay: they get their own CQE (on iWARP a READ completes
 * after later WRITEs). False if @chunk is not posted (any more): reaped
 * by teardown, or a duplicate CQE for a chunk completed already; then
 * nothing is taken.
 */
static bool krdma_chunk_take(struct krdma_conn *conn,
			     struct krdma_chunk *chunk,
			     struct list_head *implied)
{
	struct krdma_chunk *prev, *tmp;
	bool mine;

	spin_lock_bh(&conn->sq_lock);
	mine = chunk->state == KRDMA_CHUNK_POSTED;
	if (mine && chunk->kind != KRDMA_CHUNK_RECV) {
		list_for_each_entry_safe(prev, tmp, &conn->chunks, entry) {
			if (prev == chunk)
				break;
			if (prev->signaled)
				continue;
			list_move_tail(&prev->entry, implied);
			prev->state = KRDMA_CHUNK_READY;
		}
	}
	if (mine) {
		list_del(&chunk->entry);
		chunk->state = KRDMA_CHUNK_READY;
		conn->finishing++;
	}
	spin_unlock_bh(&conn->sq_lock);
	return mine;
}

/* A CQE handler finished what it took: a teardown waiting may go on */
static void krdma_chunk_taken_done(struct krdma_conn *conn)
{
	bool none;

	spin_lock_bh(&conn->sq_lock);
	none = !--conn->finishing;
	spin_unlock_bh(&conn->sq_lock);
	if (none && wq_has_sleeper(&conn->wait))
		wake_up_all(&conn->wait);
}

/* Release what a chunk holds on the device, not its memory */
static void krdma_chunk_release(struct krdma_conn *conn,
				struct krdma_chunk *chunk)
{
	struct ib_device *ibdev = conn->kdev->ibdev;

	if (chunk->kind == KRDMA_CHUNK_RW)
		rdma_rw_ctx_destroy(&chunk->rw, conn->qp, conn->port_num,
				    chunk->sgt.sgl, chunk->sgt.orig_nents,
				    chunk->dir);
	chunk->kind = KRDMA_CHUNK_WR;
	if (chunk->mapped)
		ib_dma_unmap_sgtable_attrs(ibdev, &chunk->sgt, chunk->dir, 0);
	chunk->mapped = false;
	if (!chunk->sgt_inline)
		sg_free_table(&chunk->sgt);
	chunk->sgt_inline = false;
	memset(&chunk->sgt, 0, sizeof(chunk->sgt));
}

/*
 * @chunk->sgt for bytes [@offset, @offset + @length) of @buf: in the
 * chunk itself when the range spans few pages (the common small
 * operation allocates nothing), else an allocated table.
 */
static int krdma_chunk_sgt(struct krdma_conn *conn, struct krdma_chunk *chunk,
			   struct krdma_buf *buf, u64 offset, u64 length)
{
	unsigned int max_seg = ib_dma_max_seg_size(conn->kdev->ibdev);
	int n;

	n = krdma_buf_sg_fill(buf, offset, length, chunk->inline_sg,
			      KRDMA_INLINE_SG);
	if (n < 0)
		return n;
	if (n) {
		chunk->sgt.sgl = chunk->inline_sg;
		chunk->sgt.orig_nents = n;
		chunk->sgt.nents = n;
		chunk->sgt_inline = true;
		return 0;
	}
	return krdma_buf_sgt(buf, offset, length, max_seg, &chunk->sgt);
}

static void krdma_chunk_free(struct krdma_conn *conn, struct krdma_chunk *chunk)
{
	krdma_chunk_release(conn, chunk);
	spin_lock_bh(&conn->sq_lock);
	chunk->state = KRDMA_CHUNK_FREE;
	list_add(&chunk->entry, &conn->free_chunks);
	spin_unlock_bh(&conn->sq_lock);
}

static void krdma_sq_release(struct krdma_conn *conn, u32 nr_wrs)
{
	bool kick;

	if (!nr_wrs)
		return;
	spin_lock_bh(&conn->sq_lock);
	conn->sq_free += nr_wrs;
	conn->sq_released += nr_wrs;
	kick = !list_empty(&conn->pending);
	spin_unlock_bh(&conn->sq_lock);
	if (kick)
		queue_work(krdma_wq, &conn->post_work);
}

/* The errno a connection fails with after a completion error */
static int krdma_wc_errno(enum ib_wc_status status)
{
	switch (status) {
	case IB_WC_REM_ACCESS_ERR:
	case IB_WC_LOC_ACCESS_ERR:
	case IB_WC_LOC_PROT_ERR:
		return -EACCES;
	case IB_WC_RETRY_EXC_ERR:
	case IB_WC_RNR_RETRY_EXC_ERR:
	case IB_WC_RESP_TIMEOUT_ERR:
		return -ETIMEDOUT;
	default:
		return -EIO;
	}
}

static void krdma_chunk_complete(struct krdma_conn *conn,
				 struct krdma_chunk *chunk,
				 const struct ib_wc *wc);
static void krdma_chunk_finish(struct krdma_conn *conn,
			       struct krdma_chunk *chunk,
			       const struct ib_wc *wc);

/*
 * A flush of a connection still CONNECTED: krdma leaves CONNECTED before
 * it moves a QP to error, so the device did it alone. rxe does when it
 * cannot transmit (and flushes even the WR that failed), with no QP
 * event: the connection must fail, or nothing would tell its owner. On
 * iWARP a QP goes to error with its TCP connection, which the connection
 * manager reports (the peer's close: -ECONNRESET): that is left to it.
 */
static bool krdma_flush_unexpected(struct krdma_conn *conn)
{
	return READ_ONCE(conn->state) == KRDMA_CS_CONNECTED &&
	       !rdma_protocol_iwarp(conn->kdev->ibdev, conn->port_num);
}

static void krdma_chunk_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krdma_chunk *chunk = container_of(wc->wr_cqe, struct krdma_chunk,
						 cqe);
	struct krdma_conn *conn = cq->cq_context;
	struct ib_wc implied_wc = {};
	struct krdma_chunk *prev, *tmp;
	LIST_HEAD(implied);

	/*
	 * Not while the chain with this chunk (or one it implies), or this
	 * RECV, is still being posted: the driver may be reading their WRs,
	 * which releasing the chunks frees (rdma_rw's WR array, a RECV's
	 * chunk)
	 */
	spin_lock_bh(&conn->wr_lock);
	spin_unlock_bh(&conn->wr_lock);
	if (!krdma_chunk_take(conn, chunk, &implied))
		return;
	/*
	 * The chunks before it first, in order: an operation they end is
	 * over before the one this CQE ends is reported. They succeeded if
	 * this one did (an RC send queue completes in order, and the first
	 * failure flushes every WR after it); otherwise krdma cannot tell,
	 * and reports them flushed.
	 */
	implied_wc.status = wc->status == IB_WC_SUCCESS ? IB_WC_SUCCESS :
							  IB_WC_WR_FLUSH_ERR;
	list_for_each_entry_safe(prev, tmp, &implied, entry) {
		list_del(&prev->entry);
		krdma_chunk_finish(conn, prev, &implied_wc);
	}
	krdma_chunk_complete(conn, chunk, wc);
	krdma_chunk_taken_done(conn);
}

/* Complete a chunk whose CQE came, or that teardown gave up waiting for */
static void krdma_chunk_complete(struct krdma_conn *conn,
				 struct krdma_chunk *chunk,
				 const struct ib_wc *wc)
{
	if (wc->status != IB_WC_SUCCESS &&
	    (wc->status != IB_WC_WR_FLUSH_ERR || krdma_flush_unexpected(conn))) {
		pr_debug("conn %p: op %u: %s (vendor error %#x)\n",
			 conn, chunk->req->opcode, ib_wc_status_msg(wc->status),
			 wc->vendor_err);
		krdma_conn_qp_failed(conn, krdma_wc_errno(wc->status));
	}
	krdma_chunk_finish(conn, chunk, wc);
}

/*
 * What a chunk's completion does to its operation and the queues, its
 * own CQE's or one implied by a later CQE: the latter leaves the
 * connection's state to that CQE.
 */
static void krdma_chunk_finish(struct krdma_conn *conn,
			       struct krdma_chunk *chunk,
			       const struct ib_wc *wc)
{
	struct krdma_req *req = chunk->req;
	u32 nr_wrs;

	if (wc->status != IB_WC_SUCCESS) {
		if (krdma_req_fail(req, wc->status))
			req->vendor_err = wc->vendor_err;
	} else if (chunk->kind == KRDMA_CHUNK_RECV) {
		req->byte_len = wc->byte_len;
		if (wc->wc_flags & IB_WC_WITH_IMM) {
			req->recv_imm = be32_to_cpu(wc->ex.imm_data);
			req->has_imm = true;
		}
		req->rdma_imm = wc->opcode == IB_WC_RECV_RDMA_WITH_IMM;
	}
	if (chunk->kind == KRDMA_CHUNK_RECV)
		atomic_inc(&conn->rq_free);

	nr_wrs = chunk->nr_wrs;
	if (chunk->state == KRDMA_CHUNK_REAPED) {
		/* Its CQE may still come: keep the memory until the CQ is gone */
		krdma_chunk_release(conn, chunk);
	} else {
		krdma_chunk_free(conn, chunk);
	}
	/*
	 * After the release: its rdma_rw context's MR is back in the pool
	 * (iWARP READs) before the post work it may kick looks for one
	 */
	krdma_sq_release(conn, nr_wrs);
	krdma_req_dec(req);
}

static struct krdma_chunk *krdma_chunk_alloc(struct krdma_conn *conn,
					     struct krdma_req *req,
					     enum krdma_chunk_kind kind)
{
	struct krdma_chunk *chunk;

	spin_lock_bh(&conn->sq_lock);
	chunk = list_first_entry_or_null(&conn->free_chunks,
					 struct krdma_chunk, entry);
	if (chunk) {
		list_del(&chunk->entry);
		memset(chunk, 0, sizeof(*chunk));
		chunk->state = KRDMA_CHUNK_READY;
	}
	spin_unlock_bh(&conn->sq_lock);
	if (!chunk) {
		chunk = kzalloc(sizeof(*chunk), GFP_KERNEL);
		if (!chunk)
			return NULL;
		chunk->state = KRDMA_CHUNK_READY;
	}
	chunk->req = req;
	chunk->kind = kind;
	chunk->dir = krdma_op_dir(req->opcode);
	chunk->cqe.done = krdma_chunk_done;
	return chunk;
}

/* Reserve send WRs; false when the queue has not enough room now */
static bool krdma_sq_reserve(struct krdma_conn *conn, u32 nr_wrs)
{
	bool ok;

	spin_lock_bh(&conn->sq_lock);
	ok = conn->sq_free >= nr_wrs;
	if (ok)
		conn->sq_free -= nr_wrs;
	spin_unlock_bh(&conn->sq_lock);
	return ok;
}

/*
 * The pages of every sge of @req (more than one), in one table. Each
 * sge's own table has its contiguous pages merged already.
 */
static int krdma_req_sgt(struct krdma_conn *conn, struct krdma_req *req,
			 struct sg_table *out)
{
	unsigned int max_seg = ib_dma_max_seg_size(conn->kdev->ibdev);
	struct sg_table parts[KRDMA_OP_MAX_SGE];
	struct scatterlist *sg, *s;
	unsigned int total = 0;
	u32 i, j;
	int ret;

	for (i = 0; i < req->num_sge; i++) {
		ret = krdma_buf_sgt(req->sge[i].buf, req->sge[i].offset,
				    req->sge[i].length, max_seg, &parts[i]);
		if (ret)
			goto err_free_parts;
		total += parts[i].orig_nents;
	}
	/* As the parts: a user buffer's, charged to the caller's memcg */
	ret = sg_alloc_table(out, total, req->sge[0].buf->mm ?
				     GFP_KERNEL_ACCOUNT : GFP_KERNEL);
	if (ret)
		goto err_free_parts;
	sg = out->sgl;
	for (j = 0; j < req->num_sge; j++) {
		for_each_sgtable_sg(&parts[j], s, i) {
			sg_set_page(sg, sg_page(s), s->length, s->offset);
			sg = sg_next(sg);
		}
	}
	i = req->num_sge;
	ret = 0;
err_free_parts:
	while (i--)
		sg_free_table(&parts[i]);
	return ret;
}

/*
 * A SEND's or RECV's range through its buffer's local window: one SGE per
 * registration of the window it touches. The keys were recorded when the
 * window was made: one revoked meanwhile fails the WR, harmlessly.
 */
static int krdma_chunk_map_lwin(struct krdma_req *req, struct krdma_chunk *chunk,
				u32 max_sge)
{
	const struct krdma_window *win = req->lwin;
	u64 addr = win->token.addr + req->sge[0].offset - win->offset;
	u64 left = req->sge[0].length, len;
	u32 n = 0;

	if (!READ_ONCE(win->mr))
		return -ENOENT;	/* the buffer was deregistered */
	if (win->nsegs == 1) {
		chunk->sges[0].addr = addr;
		chunk->sges[0].length = left;
		chunk->sges[0].lkey = win->segs[0].lkey;
		return 1;
	}
	while (left) {
		if (n == max_sge)
			return -EMSGSIZE;
		len = min(left, krdma_piece_left(addr, win->token.seg_shift));
		chunk->sges[n].addr = addr;
		chunk->sges[n].length = len;
		chunk->sges[n].lkey = win->segs[addr >> win->token.seg_shift].lkey;
		addr += len;
		left -= len;
		n++;
	}
	return n;
}

/*
 * Describe a SEND's or RECV's pages: through the operation's local window,
 * or DMA-mapped, one SGE per segment.
 */
static int krdma_chunk_map(struct krdma_conn *conn, struct krdma_chunk *chunk,
			   u32 max_sge)
{
	struct ib_device *ibdev = conn->kdev->ibdev;
	struct krdma_req *req = chunk->req;
	struct scatterlist *sg;
	int i, ret;

	if (req->lwin)
		return krdma_chunk_map_lwin(req, chunk, max_sge);

	if (req->num_sge == 1)
		ret = krdma_chunk_sgt(conn, chunk, req->sge[0].buf,
				      req->sge[0].offset, req->sge[0].length);
	else
		ret = krdma_req_sgt(conn, req, &chunk->sgt);
	if (ret)
		return ret;
	ret = ib_dma_map_sgtable_attrs(ibdev, &chunk->sgt, chunk->dir, 0);
	if (ret)
		return ret;
	chunk->mapped = true;
	if (chunk->sgt.nents > max_sge)
		return -EMSGSIZE;
	for_each_sgtable_dma_sg(&chunk->sgt, sg, i) {
		chunk->sges[i].addr = sg_dma_address(sg);
		chunk->sges[i].length = sg_dma_len(sg);
		chunk->sges[i].lkey = conn->pd->local_dma_lkey;
	}
	return chunk->sgt.nents;
}

/*
 * The driver refused a post. It may have flushed part of it already, and
 * a CQE may still come for the chunk, which stays tracked: it completes by
 * that CQE or by the teardown's reaping. The connection is not usable any
 * more: fail it.
 */
static int krdma_post_failed(struct krdma_conn *conn, int ret)
{
	lockdep_assert_held(&conn->post_mutex);

	pr_debug("conn %p: post failed: %d\n", conn, ret);
	conn->post_refused = true;
	krdma_conn_qp_failed(conn, ret);
	return -EIO;
}

/**
 * krdma_conn_post_was_refused - whether the driver refused a post on @conn
 * @conn: the connection
 *
 * After a refused chain the device may still hold its first work
 * requests (a driver may take part of a chain before it fails), and
 * whatever they name must be kept until the QP is destroyed.
 *
 * Context: process context; takes post_mutex.
 * Return: true once a post was refused; the connection is failing.
 */
bool krdma_conn_post_was_refused(struct krdma_conn *conn)
{
	bool refused;

	mutex_lock(&conn->post_mutex);
	refused = conn->post_refused;
	mutex_unlock(&conn->post_mutex);
	return refused;
}

/*
 * Nothing more may be posted on @conn's QP: it is being torn down, or
 * the driver refused a post (the teardown is queued, and the state is
 * still CONNECTED until it runs)
 */
static bool krdma_conn_post_dead(const struct krdma_conn *conn)
{
	lockdep_assert_held(&conn->post_mutex);

	return krdma_conn_stopped(conn) || conn->post_refused;
}

/*
 * The driver refused the post of @chain's first @n chunks: some of their
 * WRs may have been posted, the rest not, and whatever was refused must
 * not be completed by a later CQE. Every one of them waits, as a
 * signaled chunk does, for a CQE of its own (a flush) or the teardown's
 * reaping; one that was posted unsignaled and succeeded is then reported
 * flushed. The connection fails: this is its last post.
 */
static void krdma_chain_refused(struct krdma_conn *conn,
				struct krdma_chain *chain, u32 n)
{
	u32 i;

	lockdep_assert_held(&conn->post_mutex);

	spin_lock_bh(&conn->sq_lock);
	for (i = 0; i < n; i++)
		chain->chunk[i]->signaled = true;
	spin_unlock_bh(&conn->sq_lock);
}

/*
 * Post the chunks of @chain as one list of WRs, in order. Each chunk's
 * last WR carries its own CQE (rdma_rw_ctx_wrs() without a chain_wr does
 * that; with one it would leave the CQE to the chained WR), and is linked
 * to the next chunk's first. It is signaled if the chunk asked for it or
 * ends the chain: every post ends with a signaled WR, whose CQE completes
 * the unsignaled chunks before it. An unsignaled WR keeps its wr_cqe, for
 * the CQE of an error or a flush, which devices always make. A chunk is
 * signaled too where the unsignaled ones before it reach
 * KRDMA_PROGRESS_BYTES. Each chunk is tracked already: if the post fails,
 * the connection fails and its teardown completes every one of them.
 */
static int krdma_chain_post(struct krdma_conn *conn, struct krdma_chain *chain)
{
	struct ib_send_wr *head = NULL, **tail = &head, *wr;
	struct krdma_chunk *chunk;
	u32 i, n = chain->n;
	u64 unsignaled = 0;
	u64 start;
	int ret;

	lockdep_assert_held(&conn->post_mutex);

	for (i = 0; i < n; i++) {
		chunk = chain->chunk[i];
		/* Before the post: a CQE may take the chunks before this one */
		unsignaled += chunk->bytes;
		chunk->signaled |= i == n - 1 ||
				   unsignaled >= KRDMA_PROGRESS_BYTES;
		if (chunk->signaled)
			unsignaled = 0;
		if (chunk->kind == KRDMA_CHUNK_RW)
			wr = rdma_rw_ctx_wrs(&chunk->rw, conn->qp,
					     conn->port_num, &chunk->cqe, NULL);
		else
			wr = &chunk->wr.send;
		*tail = wr;
		while (wr->next)
			wr = wr->next;
		if (chunk->signaled)
			wr->send_flags |= IB_SEND_SIGNALED;
		else
			wr->send_flags &= ~IB_SEND_SIGNALED;
		tail = &wr->next;
	}
	chain->posted += chain->n;
	chain->n = 0;
	if (!head)
		return 0;
	/*
	 * With bottom halves off, work a software device defers to a
	 * tasklet (rxe's requester) runs at local_bh_enable(), here, rather
	 * than after a wakeup of ksoftirqd: the latency of a small operation
	 * drops by half. post_send may be called in atomic context anyway.
	 */
	/* Timed until the connection is known to post slowly */
	start = conn->slow_posts < KRDMA_POST_SLOW_COUNT ? ktime_get_ns() : 0;
	local_bh_disable();
	spin_lock(&conn->wr_lock);
	ret = krdma_post_refused() ? -ENOTCONN :
				     ib_post_send(conn->qp, head, NULL);
	spin_unlock(&conn->wr_lock);
	local_bh_enable();
	if (start && ktime_get_ns() - start > KRDMA_POST_SLOW_NS)
		WRITE_ONCE(conn->slow_posts, conn->slow_posts + 1);
	if (ret) {
		krdma_chain_refused(conn, chain, n);
		return krdma_post_failed(conn, ret);
	}
	return 0;
}

/* This hold of post_mutex has posted, or holds, a batch's worth */
static bool krdma_chain_spent(const struct krdma_chain *chain)
{
	return chain->posted + chain->n >= KRDMA_CHAIN_MAX;
}

/*
 * Add @chunk, linked already, to @chain; a full chain is posted first.
 * Return: 0, or -EIO when posting failed: the connection is failing, and
 * @chunk stays tracked, unposted, for its teardown to complete.
 */
static int krdma_chain_add(struct krdma_conn *conn, struct krdma_chain *chain,
			   struct krdma_chunk *chunk)
{
	int ret = 0;

	lockdep_assert_held(&conn->post_mutex);

	if (chain->n == KRDMA_CHAIN_MAX)
		ret = krdma_chain_post(conn, chain);
	if (!ret) {
		chain->chunk[chain->n++] = chunk;
		return 0;
	}
	/* Never posted: no later CQE implies it */
	spin_lock_bh(&conn->sq_lock);
	chunk->signaled = true;
	spin_unlock_bh(&conn->sq_lock);
	return ret;
}

/*
 * The peer's key for its address @addr, and in @len (when not NULL) no
 * more bytes than that key covers from there: a token with a key table
 * has one key per 2^shift bytes of its range.
 */
static u32 krdma_req_rkey(const struct krdma_req *req, u64 addr, u64 *len)
{
	const struct krdma_rkeys *rk = req->rkeys;

	if (!rk)
		return req->rkey;
	if (len)
		*len = min(*len, krdma_piece_left(addr, rk->shift));
	return rk->keys[addr >> rk->shift];
}

/*
 * Whether a chunk of @req that moves @bytes from or to local memory must
 * be signaled whatever ends its chain: those of an operation that is not
 * unsignaled; a READ's or an atomic's, whose data lands in local memory
 * (on iWARP a READ completes after WRITEs posted later: no CQE implies
 * it); and, on a device that sends unsignaled payload by zero copy, one
 * that sends a page or more.
 */
static bool krdma_chunk_must_signal(const struct krdma_conn *conn,
				    const struct krdma_req *req, u64 bytes)
{
	if (!(req->flags & KRDMA_REQ_UNSIGNALED))
		return true;
	if (!krdma_op_reads_local(req->opcode))
		return true;
	return conn->signal_payload && bytes >= PAGE_SIZE;
}

/*
 * The most bytes of @req's current SGE that its next chunk takes. On a
 * device that sends unsignaled payload by zero copy, a chunk that sends
 * local memory is one WR: rdma_rw signals only the last WR of a context,
 * and krdma_chunk_must_signal()'s signal makes the device copy only that
 * one. One WR takes max_send_sge pages (sg entries are pages or more).
 */
static u64 krdma_chunk_max(const struct krdma_conn *conn,
			   const struct krdma_req *req,
			   const struct krdma_local_sge *sge)
{
	u64 first_byte = sge->buf->first_offset + sge->offset + req->sge_off;

	if (!conn->signal_payload || !krdma_op_reads_local(req->opcode))
		return KRDMA_CHUNK;
	return (u64)conn->max_send_sge * PAGE_SIZE -
	       offset_in_page(first_byte);
}

/* The next WRITE/READ chunk; -EAGAIN: no room now; 1: nothing left */
static int krdma_post_rw_chunk(struct krdma_conn *conn, struct krdma_req *req,
			       struct krdma_chain *chain)
{
	struct krdma_local_sge *sge = &req->sge[req->sge_idx];
	u64 raddr = req->remote_addr + req->rdone;
	struct krdma_chunk *chunk;
	u32 rkey;
	u64 len;
	int nr, ret;

	if (req->sge_idx == req->num_sge)
		return 1;

	len = min_t(u64, sge->length - req->sge_off,
		    krdma_chunk_max(conn, req, sge));
	rkey = krdma_req_rkey(req, raddr, &len);
	chunk = krdma_chunk_alloc(conn, req, KRDMA_CHUNK_RW);
	if (!chunk)
		return -ENOMEM;
	/* Not an RW chunk until its context is made: nothing to destroy */
	chunk->kind = KRDMA_CHUNK_WR;
	ret = krdma_chunk_sgt(conn, chunk, sge->buf, sge->offset + req->sge_off,
			      len);
	if (ret) {
		krdma_chunk_free(conn, chunk);
		return ret;
	}
	nr = rdma_rw_ctx_init(&chunk->rw, conn->qp, conn->port_num,
			      chunk->sgt.sgl, chunk->sgt.orig_nents, 0,
			      raddr, rkey, chunk->dir);
	if (nr < 0) {
		krdma_chunk_free(conn, chunk);
		return nr;
	}
	chunk->kind = KRDMA_CHUNK_RW;
	chunk->nr_wrs = nr;
	chunk->bytes = len;
	chunk->signaled = krdma_chunk_must_signal(conn, req, len);
	if (nr > conn->sq_total) {
		krdma_chunk_free(conn, chunk);
		return -EMSGSIZE;
	}
	if (!krdma_sq_reserve(conn, nr)) {
		krdma_chunk_free(conn, chunk);
		return -EAGAIN;
	}

	atomic_inc(&req->inflight);
	krdma_chunk_link(conn, chunk);
	ret = krdma_chain_add(conn, chain, chunk);
	if (ret)
		return ret;

	req->rdone += len;
	req->sge_off += len;
	if (req->sge_off == sge->length) {
		req->sge_idx++;
		req->sge_off = 0;
	}
	return 0;
}

/* SEND, SEND_IMM, atomics and the zero-length WRITE_IMM tail */
static int krdma_post_wr_chunk(struct krdma_conn *conn, struct krdma_req *req,
			       struct krdma_chain *chain)
{
	/* The zero-length tail of a WRITE_IMM sends no payload */
	u64 bytes = req->opcode == KRDMA_OP_WRITE_IMM ? 0 : req->total;
	struct krdma_chunk *chunk;
	int nsge = 0, ret;

	chunk = krdma_chunk_alloc(conn, req, KRDMA_CHUNK_WR);
	if (!chunk)
		return -ENOMEM;

	if (req->num_sge && req->opcode != KRDMA_OP_WRITE_IMM) {
		nsge = krdma_chunk_map(conn, chunk, conn->max_send_sge);
		if (nsge < 0) {
			ret = nsge;
			goto err_abort;
		}
	}

	chunk->wr.send.wr_cqe = &chunk->cqe;
	/* IB_SEND_SIGNALED, or not, when its chain is posted */
	chunk->bytes = min_t(u64, bytes, U32_MAX);
	chunk->signaled = krdma_chunk_must_signal(conn, req, bytes);
	chunk->wr.send.sg_list = nsge ? chunk->sges : NULL;
	chunk->wr.send.num_sge = nsge;
	switch (req->opcode) {
	case KRDMA_OP_SEND:
		chunk->wr.send.opcode = IB_WR_SEND;
		break;
	case KRDMA_OP_SEND_IMM:
		chunk->wr.send.opcode = IB_WR_SEND_WITH_IMM;
		chunk->wr.send.ex.imm_data = cpu_to_be32(req->imm_data);
		break;
	case KRDMA_OP_WRITE_IMM:
		chunk->wr.rdma.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
		chunk->wr.rdma.wr.ex.imm_data = cpu_to_be32(req->imm_data);
		chunk->wr.rdma.remote_addr = req->remote_addr + req->total;
		/* Zero bytes, at the end: the key of the last byte */
		chunk->wr.rdma.rkey = krdma_req_rkey(req, req->remote_addr +
						     req->total - 1, NULL);
		break;
	case KRDMA_OP_FETCH_ADD:
	case KRDMA_OP_CMP_SWAP:
		chunk->wr.atomic.wr.opcode = req->opcode == KRDMA_OP_FETCH_ADD ?
			IB_WR_ATOMIC_FETCH_AND_ADD : IB_WR_ATOMIC_CMP_AND_SWP;
		chunk->wr.atomic.remote_addr = req->remote_addr;
		chunk->wr.atomic.rkey = krdma_req_rkey(req, req->remote_addr,
						       NULL);
		chunk->wr.atomic.compare_add = req->compare_add;
		chunk->wr.atomic.swap = req->swap;
		break;
	}
	chunk->nr_wrs = 1;

	if (!krdma_sq_reserve(conn, chunk->nr_wrs)) {
		ret = -EAGAIN;
		goto err_abort;
	}
	atomic_inc(&req->inflight);
	krdma_chunk_link(conn, chunk);
	return krdma_chain_add(conn, chain, chunk);

err_abort:
	krdma_chunk_free(conn, chunk);
	return ret;
}

/*
 * Post a RECV, now: RECVs are used in the order they were submitted, so
 * they do not wait behind SENDs.
 */
static int krdma_post_recv(struct krdma_conn *conn, struct krdma_req *req)
{
	struct krdma_chunk *chunk;
	int nsge = 0, ret;

	lockdep_assert_held(&conn->post_mutex);

	chunk = krdma_chunk_alloc(conn, req, KRDMA_CHUNK_RECV);
	if (!chunk)
		return -ENOMEM;
	if (req->num_sge) {
		nsge = krdma_chunk_map(conn, chunk, conn->max_recv_sge);
		if (nsge < 0) {
			ret = nsge;
			goto err_abort;
		}
	}
	chunk->rwr.wr_cqe = &chunk->cqe;
	chunk->signaled = true;	/* a RECV always completes */
	chunk->rwr.sg_list = nsge ? chunk->sges : NULL;
	chunk->rwr.num_sge = nsge;

	if (atomic_dec_if_positive(&conn->rq_free) < 0) {
		ret = -ENOBUFS;
		goto err_abort;
	}

	atomic_inc(&req->inflight);
	krdma_chunk_link(conn, chunk);
	/*
	 * Under wr_lock, as a chain of sends: siw flushes a RECV posted to a
	 * QP in the error state and then reads its next pointer, while the
	 * CQE handler may be releasing this chunk on another CPU
	 */
	spin_lock_bh(&conn->wr_lock);
	ret = ib_post_recv(conn->qp, &chunk->rwr, NULL);
	spin_unlock_bh(&conn->wr_lock);
	if (ret) {
		/* Posted or not, it completes: the RECV is accepted */
		krdma_req_fail(req, IB_WC_LOC_QP_OP_ERR);
		krdma_post_failed(conn, ret);
	}
	return 0;

err_abort:
	krdma_chunk_free(conn, chunk);
	return ret;
}

/*
 * Post what can be posted of @req: 0 when all of it is posted (or it
 * failed, with req->status set), -EAGAIN when the send queue is full.
 */
static int krdma_push_req(struct krdma_conn *conn, struct krdma_req *req,
			  struct krdma_chain *chain)
{
	int ret;

	switch (req->opcode) {
	case KRDMA_OP_WRITE:
	case KRDMA_OP_WRITE_IMM:
	case KRDMA_OP_READ:
		/*
		 * "Nothing left" before "the batch is spent": an operation
		 * whose last chunk joined the chain leaves the pending list
		 * now, so its posting reference is dropped before that chunk
		 * is posted, and is never the last one of a success.
		 */
		while (!(ret = krdma_post_rw_chunk(conn, req, chain))) {
			if (req->sge_idx == req->num_sge) {
				ret = 1;
				break;
			}
			if (krdma_chain_spent(chain))
				return -EAGAIN;
		}
		if (ret == 1 && req->opcode == KRDMA_OP_WRITE_IMM &&
		    !req->tail_posted) {
			ret = krdma_post_wr_chunk(conn, req, chain);
			if (!ret)
				req->tail_posted = true;
		} else if (ret == 1) {
			ret = 0;
		}
		break;
	default:
		ret = krdma_post_wr_chunk(conn, req, chain);
		break;
	}

	if (ret == -EAGAIN)
		return -EAGAIN;
	if (ret) {
		pr_debug("conn %p: op %u failed to post: %d\n", conn,
			 req->opcode, ret);
		if (!req->post_error)
			req->post_error = ret;
		krdma_req_fail(req, ret == -EMSGSIZE ? IB_WC_LOC_LEN_ERR :
				    IB_WC_LOC_QP_OP_ERR);
	}
	return 0;
}

/*
 * Post one batch of the pending operations, in order, while the send
 * queue has room: at most KRDMA_CHAIN_MAX chunks, one ib_post_send().
 * An operation whose posting reference is its last (it failed to be
 * posted, or was flushed, with nothing in flight) ends the batch: it is
 * returned in @over, to complete once post_mutex is dropped (its done
 * may post) and before anything after it is posted (a later success
 * implies it is over).
 * Return: true when more may be pending.
 */
static bool krdma_push_batch(struct krdma_conn *conn, struct krdma_req **over)
{
	struct krdma_chain chain;
	struct krdma_req *req;
	bool more = false;

	lockdep_assert_held(&conn->post_mutex);

	*over = NULL;
	/* Its owner posts what follows once the fenced operation is over */
	if (conn->push_fence && !krdma_conn_post_dead(conn))
		return false;
	chain.n = 0;
	chain.posted = 0;
	for (;;) {
		spin_lock_bh(&conn->sq_lock);
		req = list_first_entry_or_null(&conn->pending, struct krdma_req,
					       entry);
		spin_unlock_bh(&conn->sq_lock);
		if (!req)
			break;
		if (krdma_conn_post_dead(conn)) {
			krdma_req_fail(req, IB_WC_WR_FLUSH_ERR);
		} else if (krdma_chain_spent(&chain)) {
			more = true;
			break;
		} else if (krdma_push_req(conn, req, &chain) == -EAGAIN) {
			/* The send queue is full, or the batch is spent */
			more = krdma_chain_spent(&chain);
			break;
		}

		spin_lock_bh(&conn->sq_lock);
		list_del(&req->entry);
		spin_unlock_bh(&conn->sq_lock);
		/* The posting reference */
		if (atomic_dec_and_test(&req->inflight)) {
			*over = req;
			/* A success after it would say it is over: hold it */
			conn->push_fence = !krdma_conn_post_dead(conn);
			more = true;
			break;
		}
	}
	krdma_chain_post(conn, &chain);
	return more;
}

/*
 * Post the pending operations, in order, while the send queue has room,
 * one batch per hold of post_mutex: whoever waits for it (another
 * poster, the post work, the teardown) waits for one batch at most,
 * however much is pending. An operation a batch ends is completed
 * between two batches, without post_mutex. A caller with a fatal signal
 * pending leaves the rest to the post work, and returns.
 */
static void krdma_push(struct krdma_conn *conn)
{
	struct krdma_req *over = NULL;
	bool more;

	lockdep_assert_not_held(&conn->lock);
	do {
		mutex_lock(&conn->post_mutex);
		/* The operation this call completed is over: lift its fence */
		if (over)
			conn->push_fence = false;
		more = krdma_push_batch(conn, &over);
		/*
		 * Queued while post_mutex holds the teardown off its cancel.
		 * Not with an operation to complete: this call lifts its
		 * fence after, and only then may leave the rest.
		 */
		if (more && !over && fatal_signal_pending(current) &&
		    !krdma_conn_stopped(conn)) {
			queue_work(krdma_wq, &conn->post_work);
			more = false;
		}
		mutex_unlock(&conn->post_mutex);
		if (over)
			krdma_req_complete(over);
		if (more)
			cond_resched();
	} while (more);
}

static int krdma_post_task(struct krdma_conn *conn, struct krdma_req *req,
			   bool can_register, bool push);

/*
 * Operations posted from softirq context wait on conn->deferred for the
 * post work: post them now, in process context. Whatever krdma_post()
 * would have refused completes with an error status instead.
 */
static void krdma_post_deferred_run(struct krdma_conn *conn, bool flush)
{
	struct krdma_wc wc = {};
	struct krdma_req *req;
	int ret;

	for (;;) {
		spin_lock_bh(&conn->sq_lock);
		req = list_first_entry_or_null(&conn->deferred,
					       struct krdma_req, entry);
		if (req)
			list_del(&req->entry);
		spin_unlock_bh(&conn->sq_lock);
		if (!req)
			return;

		/*
		 * No local window from here: making one takes conn->lock,
		 * which the teardown holds while it waits for this work. The
		 * teardown itself (flush) only completes them.
		 */
		ret = flush ? -ENOTCONN : krdma_post_task(conn, req, false,
							  true);
		if (ret) {
			wc.status = ret == -ENOTCONN ? IB_WC_WR_FLUSH_ERR :
						       IB_WC_LOC_QP_OP_ERR;
			krdma_stats_done(conn, req->opcode, wc.status, 0, 0);
			req->done(req, &wc);
		}
		krdma_conn_put(conn);	/* the deferral's */
	}
}

/*
 * New operations are taken only while this holds: exact under sq_lock,
 * which the move to CLOSING takes; under post_mutex, the teardown waits
 * for the poster that saw it hold.
 */
static bool krdma_conn_postable(struct krdma_conn *conn)
{
	return READ_ONCE(conn->state) == KRDMA_CS_CONNECTED;
}

/*
 * A RECV of krdma_conn_params.prepare: the QP exists and the connection
 * is not up yet (nor torn down: the teardown waits for conn->lock, which
 * the prepare callback runs under)
 */
static bool krdma_conn_preparing(struct krdma_conn *conn,
				 struct krdma_req *req)
{
	lockdep_assert_held(&conn->post_mutex);

	return req->opcode == KRDMA_OP_RECV && READ_ONCE(conn->preparing) &&
	       READ_ONCE(conn->state) == KRDMA_CS_CONNECTING;
}

/* krdma_post() from softirq context: queue it for the post work */
static int krdma_post_atomic(struct krdma_conn *conn, struct krdma_req *req)
{
	int ret = 0;

	if (!req->done || req->flags & ~KRDMA_REQ_UNSIGNALED)
		return -EINVAL;
	spin_lock_bh(&conn->sq_lock);
	if (!krdma_conn_postable(conn)) {
		ret = -ENOTCONN;
	} else {
		krdma_conn_get(conn);
		list_add_tail(&req->entry, &conn->deferred);
	}
	spin_unlock_bh(&conn->sq_lock);
	if (!ret)
		queue_work(krdma_wq, &conn->post_work);
	return ret;
}

/**
 * krdma_post_work - post pending operations after completions made room
 * @work: the connection's post_work
 */
void krdma_post_work(struct work_struct *work)
{
	struct krdma_conn *conn = container_of(work, struct krdma_conn,
					       post_work);
	unsigned int noio;

	/*
	 * It may post a block device's writeback: what it allocates (the
	 * chunks, their scatterlists) must not wait for I/O itself.
	 */
	noio = memalloc_noio_save();
	krdma_post_deferred_run(conn, false);
	krdma_push(conn);
	memalloc_noio_restore(noio);
}

/**
 * krdma_push_work - post pending operations for a kernel caller
 * @work: the connection's push_work
 *
 * Queued by krdma_kapi_push() with a reference to the connection, which
 * it drops.
 */
void krdma_push_work(struct work_struct *work)
{
	struct krdma_conn *conn = container_of(work, struct krdma_conn,
					       push_work);
	unsigned int noio;

	/* As krdma_post_work(): it may post a block device's writeback */
	noio = memalloc_noio_save();
	krdma_push(conn);
	memalloc_noio_restore(noio);
	krdma_conn_put(conn);
}

/**
 * krdma_push_cancel - cancel a queued push_work, or wait for it to run
 * @conn: the connection
 *
 * Called by the teardown after krdma_xfer_flush_pending(): a push_work
 * queued after this finds nothing pending (nothing is accepted any more)
 * and only drops its reference; one that took an operation earlier has
 * returned from its done.
 *
 * Return: whether a queued push_work was cancelled.
 */
bool krdma_push_cancel(struct krdma_conn *conn)
{
	if (!cancel_work_sync(&conn->push_work))
		return false;
	krdma_conn_put(conn);	/* the one it was queued with */
	return true;
}

/*
 * Post what krdma_post() or krdma_post_list() queued on @conn: here, or
 * by push_work on krdma_push_wq when the device does its send work in the
 * poster's context (push_worker). The caller then returns at once, and
 * that work runs where the scheduler puts the worker: a consumer's thread
 * is not held for milliseconds by rxe's requester on 6.1.
 */
static void krdma_kapi_push(struct krdma_conn *conn)
{
	unsigned int mode = READ_ONCE(push_worker);

	if (!mode || (mode == 1 && READ_ONCE(conn->slow_posts) <
		      KRDMA_POST_SLOW_COUNT)) {
		krdma_push(conn);
		return;
	}
	krdma_conn_get(conn);
	if (!queue_work(krdma_push_wq, &conn->push_work))
		krdma_conn_put(conn);	/* queued already, with its own */
}

static bool krdma_chunks_finished(struct krdma_conn *conn)
{
	bool done;

	spin_lock_bh(&conn->sq_lock);
	done = !conn->finishing;
	spin_unlock_bh(&conn->sq_lock);
	return done;
}

static bool krdma_chunks_idle(struct krdma_conn *conn)
{
	bool idle;

	spin_lock_bh(&conn->sq_lock);
	idle = krdma_chunks_none(conn) && !conn->finishing;
	spin_unlock_bh(&conn->sq_lock);
	return idle;
}

/* How long a drained QP may take to deliver its last completions */
#define KRDMA_REAP_TIMEOUT (HZ / 2)

/**
 * krdma_xfer_reap - take over every posted chunk that has not completed
 * @conn: a connection whose QP was just drained, conn->reg_sem held for
 *        write
 *
 * After the drain every WR should have completed. A driver that lost some
 * (siw can, when the peer went away with large transfers in flight), or
 * a drain that timed out, would leave operations hanging: wait a little
 * for them, then take them over. Their RDMA contexts are destroyed now,
 * while the QP exists, but their operations keep their buffers (the
 * pages stay pinned) until krdma_xfer_free_zombies(), after the QP is
 * destroyed: the device may still be moving those pages.
 *
 * Context: process context; sleeps.
 */
void krdma_xfer_reap(struct krdma_conn *conn)
{
	struct krdma_chunk *chunk;
	unsigned int n = 0;

	lockdep_assert_held_write(&conn->reg_sem);

	wait_event_timeout(conn->wait, krdma_chunks_idle(conn),
			   KRDMA_REAP_TIMEOUT);

	spin_lock_bh(&conn->sq_lock);
	list_splice_tail_init(&conn->chunks, &conn->zombies);
	list_splice_tail_init(&conn->recv_chunks, &conn->zombies);
	list_for_each_entry(chunk, &conn->zombies, entry) {
		chunk->state = KRDMA_CHUNK_REAPED;
		n++;
	}
	spin_unlock_bh(&conn->sq_lock);
	/*
	 * No CQE handler can take a chunk from here (none is POSTED); one
	 * that took its chunks before still finishes them with the QP
	 * (softirq work of this CQ, short): the QP stays until it is done
	 */
	WARN_ON_ONCE(!wait_event_timeout(conn->wait,
					 krdma_chunks_finished(conn),
					 KRDMA_REAP_TIMEOUT));
	if (!n)
		return;

	dev_info_ratelimited(&conn->kdev->ibdev->dev,
			     "krdma: %u work requests not flushed by the device after a drain; completing them once the QP is destroyed\n",
			     n);
	list_for_each_entry(chunk, &conn->zombies, entry) {
		if (chunk->kind != KRDMA_CHUNK_RW)
			continue;
		rdma_rw_ctx_destroy(&chunk->rw, conn->qp, conn->port_num,
				    chunk->sgt.sgl, chunk->sgt.orig_nents,
				    chunk->dir);
		chunk->kind = KRDMA_CHUNK_WR;
	}
}

/**
 * krdma_xfer_free_zombies - complete the chunks teardown took over, free
 *                           every chunk of a connection
 * @conn: a connection whose QP and CQ are destroyed: no CQE can name the
 *        chunks and the device no longer touches their pages
 */
void krdma_xfer_free_zombies(struct krdma_conn *conn)
{
	struct ib_wc wc = { .status = IB_WC_WR_FLUSH_ERR };
	struct krdma_chunk *chunk, *tmp;

	list_for_each_entry_safe(chunk, tmp, &conn->zombies, entry) {
		/* Completes its operation: the pages may go now */
		krdma_chunk_complete(conn, chunk, &wc);
		kfree(chunk);
	}
	INIT_LIST_HEAD(&conn->zombies);
	list_for_each_entry_safe(chunk, tmp, &conn->free_chunks, entry)
		kfree(chunk);
	INIT_LIST_HEAD(&conn->free_chunks);
}

/* How long the teardown waits for a drain marker's completion */
#define KRDMA_DRAIN_TIMEOUT (5 * HZ)

static void krdma_drain_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krdma_drain *drain = container_of(wc->wr_cqe,
						 struct krdma_drain, cqe);

	complete(&drain->done);
}

/**
 * krdma_conn_drain - flush a connection's QP, waiting a bounded time
 * @conn: the connection, being torn down (nothing is posted any more)
 *
 * As ib_drain_qp(): the QP goes to the error state and one marker WR on
 * each queue (the slot the QP was created with for it) completes after
 * every WR posted before it. Unlike ib_drain_qp(), the wait is bounded: a
 * QP that cannot produce the marker's completion (one refused, or a
 * device that lost it) delays the teardown by at most
 * KRDMA_DRAIN_TIMEOUT per queue. What did not complete is taken over by
 * krdma_xfer_reap(), and nothing the device may touch is released before
 * the QP is destroyed. The markers live in @conn, which outlives its CQ.
 *
 * Context: process context; sleeps.
 */
void krdma_conn_drain(struct krdma_conn *conn)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct ib_rdma_wr swr = {
		.wr = {
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.wr_cqe = &conn->sdrain.cqe,
		},
	};
	struct ib_recv_wr rwr = { .wr_cqe = &conn->rdrain.cqe };
	bool sq, rq;
	int ret;

	conn->sdrain.cqe.done = krdma_drain_done;
	conn->rdrain.cqe.done = krdma_drain_done;
	init_completion(&conn->sdrain.done);
	init_completion(&conn->rdrain.done);

	ret = ib_modify_qp(conn->qp, &attr, IB_QP_STATE);
	if (ret) {
		dev_info_ratelimited(&conn->kdev->ibdev->dev,
				     "krdma: QP %u cannot go to the error state (%d); not draining it\n",
				     conn->qp->qp_num, ret);
		return;
	}
	sq = !ib_post_send(conn->qp, &swr.wr, NULL);
	rq = !ib_post_recv(conn->qp, &rwr, NULL);
	if ((sq && !wait_for_completion_timeout(&conn->sdrain.done,
						KRDMA_DRAIN_TIMEOUT)) ||
	    (rq && !wait_for_completion_timeout(&conn->rdrain.done,
						KRDMA_DRAIN_TIMEOUT)))
		dev_info_ratelimited(&conn->kdev->ibdev->dev,
				     "krdma: QP %u not drained within %u ms; its work requests are completed once it is destroyed\n",
				     conn->qp->qp_num,
				     jiffies_to_msecs(KRDMA_DRAIN_TIMEOUT));
}

/**
 * krdma_xfer_flush_pending - complete every operation never posted
 * @conn: a connection whose QP is dead and drained
 *
 * Context: process context.
 */
void krdma_xfer_flush_pending(struct krdma_conn *conn)
{
	krdma_post_deferred_run(conn, true);
	krdma_push(conn);
}

static int krdma_check_sges(struct krdma_req *req, u64 *total)
{
	bool writes = !krdma_op_reads_local(req->opcode);
	u32 i;

	*total = 0;
	for (i = 0; i < req->num_sge; i++) {
		struct krdma_local_sge *sge = &req->sge[i];

		if (!sge->buf || !sge->length)
			return -EINVAL;
		if (sge->offset + sge->length < sge->offset)
			return -EOVERFLOW;
		if (sge->offset + sge->length > sge->buf->length)
			return -EINVAL;
		if (writes && !(sge->buf->access & KRDMA_ACCESS_LOCAL_WRITE))
			return -EACCES;
		if (*total + sge->length < *total)
			return -EOVERFLOW;
		*total += sge->length;
	}
	return 0;
}

/**
 * krdma_xfer_check_ranges - check an operation's local ranges alone
 * @req: the operation, its buffers referenced
 *
 * What krdma_post() checks of the ranges without a connection: each is
 * in its buffer, none is empty, and a buffer written into allows it. For
 * a caller that must refuse a bad operation before it has a connection
 * to post it on (the RECVs of CONNECT and ACCEPT).
 *
 * Return: 0, -EINVAL, -EOVERFLOW or -EACCES, as krdma_post() would.
 */
int krdma_xfer_check_ranges(struct krdma_req *req)
{
	u64 total;

	if (req->num_sge > KRDMA_OP_MAX_SGE)
		return -EINVAL;
	return krdma_check_sges(req, &total);
}

/*
 * A SEND or RECV is one message: its pages must fit the SGEs of one WR,
 * or be one range of one buffer, which then goes through a local window
 * (return 1).
 */
static int krdma_check_msg_pages(struct krdma_conn *conn,
				 struct krdma_req *req)
{
	u32 max_sge = req->opcode == KRDMA_OP_RECV ? conn->max_recv_sge :
						     conn->max_send_sge;
	u64 pages = 0;
	u32 i;

	for (i = 0; i < req->num_sge; i++) {
		struct krdma_local_sge *sge = &req->sge[i];

		pages += krdma_buf_pages(sge->buf, sge->offset, sge->length);
	}
	if (pages <= max_sge)
		return 0;
	if (req->num_sge > 1 || !req->sge[0].buf->mm)
		return -EMSGSIZE;
	return 1;
}

/* A key table covers every byte of the remote range */
static int krdma_check_rkeys(const struct krdma_req *req, u64 total)
{
	const struct krdma_rkeys *rk = req->rkeys;

	if (!rk)
		return 0;
	if (!total || req->remote_addr + total < req->remote_addr)
		return -EINVAL;
	if ((req->remote_addr + total - 1) >> rk->shift >= rk->nkeys)
		return -EINVAL;
	return 0;
}

static int krdma_check_req(struct krdma_conn *conn, struct krdma_req *req,
			   u64 *total)
{
	struct ib_device *ibdev = conn->kdev->ibdev;
	bool iwarp = rdma_protocol_iwarp(ibdev, conn->port_num);
	int ret;

	if (req->num_sge > KRDMA_OP_MAX_SGE || !req->done)
		return -EINVAL;
	if (req->flags & ~(KRDMA_REQ_UNSIGNALED | KRDMA_REQ_QUIET_DONE))
		return -EINVAL;
	if (req->flags & KRDMA_REQ_UNSIGNALED) {
		/* A RECV's completion is how its message arrives */
		if (req->opcode == KRDMA_OP_RECV)
			return -EINVAL;
		/* iWARP completes a READ after WRITEs posted later */
		if (iwarp && (req->opcode == KRDMA_OP_READ ||
			      req->opcode == KRDMA_OP_FETCH_ADD ||
			      req->opcode == KRDMA_OP_CMP_SWAP))
			return -EOPNOTSUPP;
	}
	ret = krdma_check_sges(req, total);
	if (ret)
		return ret;
	if (req->rkeys && (req->opcode == KRDMA_OP_SEND ||
			   req->opcode == KRDMA_OP_SEND_IMM ||
			   req->opcode == KRDMA_OP_RECV))
		return -EINVAL;

	switch (req->opcode) {
	case KRDMA_OP_READ:
		if (!conn->initiator_depth)
			return -EOPNOTSUPP;
		fallthrough;
	case KRDMA_OP_WRITE_IMM:
		if (req->opcode == KRDMA_OP_WRITE_IMM && iwarp)
			return -EOPNOTSUPP;
		fallthrough;
	case KRDMA_OP_WRITE:
		if (!req->num_sge)
			return -EINVAL;
		if (req->remote_addr + *total < req->remote_addr)
			return -EOVERFLOW;
		return krdma_check_rkeys(req, *total);
	case KRDMA_OP_SEND_IMM:
		if (iwarp)
			return -EOPNOTSUPP;
		fallthrough;
	case KRDMA_OP_SEND:
	case KRDMA_OP_RECV:
		if (*total > ibdev->attrs.max_mr_size || *total > S32_MAX)
			return -EMSGSIZE;
		/* 1: it needs a local window */
		return krdma_check_msg_pages(conn, req);
	case KRDMA_OP_FETCH_ADD:
	case KRDMA_OP_CMP_SWAP:
		if (ibdev->attrs.atomic_cap == IB_ATOMIC_NONE ||
		    !conn->initiator_depth)
			return -EOPNOTSUPP;
		if (req->num_sge != 1 || *total != 8 ||
		    !IS_ALIGNED(req->remote_addr, 8) ||
		    !IS_ALIGNED(req->sge[0].buf->first_offset +
				req->sge[0].offset, 8))
			return -EINVAL;
		return krdma_check_rkeys(req, *total);
	default:
		return -EINVAL;
	}
}

/*
 * A SEND or RECV whose pages do not fit the SGEs goes through a local
 * window of its buffer (krdma_check_req() said so). The registration
 * posts a REG_MR and waits for it: called without post_mutex.
 */
static int krdma_post_get_lwin(struct krdma_conn *conn, struct krdma_req *req)
{
	u32 max_sge = req->opcode == KRDMA_OP_RECV ? conn->max_recv_sge :
			conn->send_one_mr ? 1 : conn->max_send_sge;
	struct krdma_window *win;
	u64 first;

	win = krdma_local_window_get(conn, req->sge[0].buf);
	if (IS_ERR(win))
		/* A buffer larger than a window may be: too big a message */
		return PTR_ERR(win) == -E2BIG ? -EMSGSIZE : PTR_ERR(win);
	if (win->nsegs > 1) {
		/* One SGE per registration of the window the message touches */
		first = win->token.addr + req->sge[0].offset - win->offset;
		if (krdma_pieces(first, req->sge[0].length,
				 win->token.seg_shift) > max_sge) {
			krdma_grant_put(win);
			return -EMSGSIZE;
		}
	}
	req->lwin = win;
	return 0;
}

/**
 * struct krdma_local_wr - work requests of krdma's own (MR registrations)
 * @cqe: the completion of the last one, the only one signaled
 * @done: completed by the CQE
 * @status: the CQE's status
 * @nr_wrs: send queue slots they hold, given back by the CQE
 * @ref: the poster and the CQE (or the teardown, for a CQE never to come)
 * @entry: in conn->local_wrs from its post until its CQE
 */
struct krdma_local_wr {
	struct ib_cqe cqe;
	struct completion done;
	enum ib_wc_status status;
	u32 nr_wrs;
	refcount_t ref;
	struct list_head entry;
};

static void krdma_local_wr_put(struct krdma_local_wr *lw)
{
	if (refcount_dec_and_test(&lw->ref))
		kfree(lw);
}

static void krdma_local_wr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krdma_local_wr *lw = container_of(wc->wr_cqe,
						 struct krdma_local_wr, cqe);
	struct krdma_conn *conn = cq->cq_context;

	spin_lock_bh(&conn->sq_lock);
	list_del_init(&lw->entry);
	spin_unlock_bh(&conn->sq_lock);
	lw->status = wc->status;
	krdma_sq_release(conn, lw->nr_wrs);
	complete(&lw->done);
	krdma_local_wr_put(lw);
}

/**
 * krdma_xfer_flush_local_wrs - complete the local WRs the device never did
 * @conn: the connection, its QP destroyed and its CQ freed
 *
 * A drain that timed out leaves WRs without a CQE, and none can come once
 * the CQ is freed: their waiters are woken with a flush status, and their
 * memory goes with the last reference.
 *
 * Context: process context, from the teardown.
 */
void krdma_xfer_flush_local_wrs(struct krdma_conn *conn)
{
	struct krdma_local_wr *lw, *tmp;
	LIST_HEAD(left);

	WARN_ON_ONCE(conn->cq);
	spin_lock_bh(&conn->sq_lock);
	list_splice_init(&conn->local_wrs, &left);
	spin_unlock_bh(&conn->sq_lock);
	list_for_each_entry_safe(lw, tmp, &left, entry) {
		list_del_init(&lw->entry);
		lw->status = IB_WC_WR_FLUSH_ERR;
		complete(&lw->done);
		krdma_local_wr_put(lw);
	}
}

/**
 * krdma_post_local_wrs - post local work requests and wait for them
 * @conn: the connection
 * @wr: the first of @nr chained work requests (REG_MRs); their wr_cqe and
 *      flags are krdma's: only the last is signaled
 * @nr: how many, at most the send queue's depth
 * @timeout: jiffies to wait for the last one's completion
 *
 * On -ETIMEDOUT and -EINTR the work requests may still be queued on the
 * device: whatever they name (MRs, pages) must be kept until the QP is
 * destroyed. The completion finds only krdma's own record, which it frees.
 * One that fails moves the QP to the error state, which flushes the last.
 *
 * Context: process context; sleeps, killably. Hold no lock that a CM
 * handler or the teardown takes.
 * Return: 0, -ENOTCONN, -EAGAIN (send queue full), -ETIMEDOUT, -EINTR (a
 * fatal signal), -EIO (a work request failed) or the driver's error.
 */
int krdma_post_local_wrs(struct krdma_conn *conn, struct ib_send_wr *wr,
			 u32 nr, long timeout)
{
	struct ib_send_wr *first = wr;
	struct krdma_local_wr *lw;
	bool tracked = false;
	long left;
	int ret;

	lw = kzalloc(sizeof(*lw), GFP_KERNEL);
	if (!lw)
		return -ENOMEM;
	lw->cqe.done = krdma_local_wr_done;
	init_completion(&lw->done);
	lw->nr_wrs = nr;
	refcount_set(&lw->ref, 2);
	INIT_LIST_HEAD(&lw->entry);
	while (--nr) {
		/* An unsignaled WR's error CQE names no cqe: ib_core skips it */
		wr->wr_cqe = NULL;
		wr->send_flags = 0;
		wr = wr->next;
	}
	wr->wr_cqe = &lw->cqe;
	wr->send_flags = IB_SEND_SIGNALED;
	wr->next = NULL;

	mutex_lock(&conn->post_mutex);
	if (krdma_conn_post_dead(conn)) {
		ret = -ENOTCONN;
	} else if (!krdma_sq_reserve(conn, lw->nr_wrs)) {
		ret = -EAGAIN;
	} else {
		/* Tracked first: its CQE may come before ib_post_send() returns */
		spin_lock_bh(&conn->sq_lock);
		list_add_tail(&lw->entry, &conn->local_wrs);
		spin_unlock_bh(&conn->sq_lock);
		tracked = true;
		ret = krdma_post_refused() ? -ENOTCONN :
					     ib_post_send(conn->qp, first, NULL);
		/*
		 * Refused: a CQE may still come (a partial flush), else the
		 * teardown, which this starts, completes it
		 */
		if (ret) {
			conn->post_refused = true;
			krdma_conn_qp_failed(conn, ret);
		}
	}
	mutex_unlock(&conn->post_mutex);
	if (ret) {
		/*
		 * Once on conn->local_wrs, the CQE or the teardown owns a
		 * reference, whatever ib_post_send() returned (siw says
		 * -ENOTCONN while another context holds its QP's state lock)
		 */
		if (tracked)
			krdma_local_wr_put(lw);
		else
			kfree(lw);
		return ret;
	}

	left = wait_for_completion_killable_timeout(&lw->done, timeout);
	if (left < 0)
		ret = -EINTR;
	else if (!left)
		ret = -ETIMEDOUT;
	else if (lw->status != IB_WC_SUCCESS)
		ret = -EIO;
	krdma_local_wr_put(lw);
	return ret;
}

/**
 * krdma_conn_sq_progress - how far the send queue got
 * @conn: the connection
 *
 * Two reads that differ tell that send WRs completed in between: the peer
 * (or the device, on a flush) answered something of @conn.
 *
 * Context: any context.
 * Return: the number of send WRs completed so far.
 */
u64 krdma_conn_sq_progress(struct krdma_conn *conn)
{
	u64 n;

	spin_lock_bh(&conn->sq_lock);
	n = conn->sq_released;
	spin_unlock_bh(&conn->sq_lock);
	return n;
}

/* How long a peer may take to answer a heartbeat */
#define KRDMA_HEARTBEAT_TIMEOUT (10 * HZ)

/**
 * krdma_post_heartbeat - check that the peer is there
 * @conn: the connection
 *
 * A zero-length RDMA WRITE: it needs no key, touches no memory, and is
 * answered by the peer's device alone. On siw, which sends one work
 * request at a time, its completion also fences what was sent before it
 * (krdma_grant_revoke()).
 *
 * Context: process context; sleeps.
 * Return: 0 when the peer answered, else as krdma_post_local_wrs().
 */
int krdma_post_heartbeat(struct krdma_conn *conn)
{
	struct ib_rdma_wr wr = {
		.wr.opcode = IB_WR_RDMA_WRITE,
	};

	return krdma_post_local_wrs(conn, &wr.wr, 1, KRDMA_HEARTBEAT_TIMEOUT);
}

/*
 * krdma_post() and krdma_post_list() of one operation: queued, and
 * posted too when @push. From softirq context it is only queued, for the
 * post work, whatever @push says.
 */
static int krdma_post_one(struct krdma_conn *conn, struct krdma_req *req,
			  bool push)
{
	u32 opcode = req->opcode;	/* req may be gone once accepted */
	int ret;

	/* The ioctl layer's alone: a consumer's req is its own */
	if (req->flags & KRDMA_REQ_QUIET_DONE)
		return -EINVAL;
	if (!in_task())
		ret = krdma_post_atomic(conn, req);
	else
		ret = krdma_post_task(conn, req, true, false);
	if (ret)
		return ret;
	krdma_stats_posted(conn, opcode);
	if (push && in_task() && opcode != KRDMA_OP_RECV)
		krdma_kapi_push(conn);
	return 0;
}

/**
 * krdma_post - start an operation on a connection
 * @conn: the connection
 * @req: the operation, filled in by the caller; owned by krdma until
 *       @req->done is called (unsignaled: until it is implied over)
 *
 * Checks the operation and queues it; operations on one connection are
 * posted in the order they were accepted. On success @req->done is
 * called exactly once, from any context (softirq included, possibly
 * before this returns), with no krdma lock held; on failure never. With
 * KRDMA_REQ_UNSIGNALED in @req->flags, @req->done is called only if the
 * operation fails; it is over once an operation accepted after it on
 * @conn, not unsignaled and not a RECV, completed with success, or once
 * krdma_disconnect() or krdma_conn_close() returned.
 *
 * From softirq context (a completion callback chaining the next
 * operation, say) the operation is only queued, for a work item to check
 * and post it: the errors below then come as a completion status instead
 * (WR_FLUSH_ERR for -ENOTCONN, LOC_QP_OP_ERR for the others), and only
 * -ENOTCONN and -EINVAL (no @done, an unknown flag) are returned.
 *
 * Context: process context (may sleep) or softirq context; not hardirq,
 * not under a spinlock. May be called from a done callback.
 * Return: 0; -EINVAL, -EOVERFLOW, -EACCES, -EOPNOTSUPP, -EMSGSIZE for an
 * operation that cannot be done; -ENOTCONN when not connected; -ENOBUFS
 * when the receive queue is full (RECV).
 */
int krdma_post(struct krdma_conn *conn, struct krdma_req *req)
{
	return krdma_post_one(conn, req, true);
}
EXPORT_SYMBOL_NS_GPL(krdma_post, KRDMA);

/**
 * krdma_post_list - start several operations on a connection, together
 * @conn: the connection
 * @reqs: the operations, as for krdma_post()
 * @n: how many
 * @accepted: if not NULL, set to the number of operations accepted
 *
 * krdma_post() of @reqs[0] to @reqs[@n - 1], in order, stopping at the
 * first one refused. The operations accepted are queued first and
 * posted together, once: as chains of work requests, one ib_post_send()
 * each. Those accepted belong to krdma as after krdma_post(); the one
 * refused and those after it are untouched. With all but the last
 * unsignaled (KRDMA_REQ_UNSIGNALED), the batch is reported by the last
 * one's done.
 *
 * Context: as krdma_post(); from softirq context each operation is
 * queued for the post work.
 * Return: 0 when all @n were accepted, else the error of krdma_post()
 * for @reqs[*@accepted].
 */
int krdma_post_list(struct krdma_conn *conn, struct krdma_req *const *reqs,
		    unsigned int n, unsigned int *accepted)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < n; i++) {
		ret = krdma_post_one(conn, reqs[i], false);
		if (ret)
			break;
	}
	if (accepted)
		*accepted = i;
	/*
	 * What was accepted goes out even if a later one was refused. From a
	 * prepare callback only RECVs were taken, and they are posted: there
	 * is nothing to push, and conn->lock is held.
	 */
	if (i && in_task() && !READ_ONCE(conn->preparing))
		krdma_kapi_push(conn);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(krdma_post_list, KRDMA);

/*
 * krdma_post() of one operation of a batch, in process context: queued in
 * order, but posted only by krdma_xfer_push() (or whoever pushes the
 * connection next), so that the batch goes out as chains of WRs. RECVs
 * are posted at once, as always.
 */
int krdma_post_queue(struct krdma_conn *conn, struct krdma_req *req)
{
	u32 opcode = req->opcode;
	int ret;

	might_sleep();
	ret = krdma_post_task(conn, req, true, false);
	if (!ret)
		krdma_stats_posted(conn, opcode);
	return ret;
}

/* Post what krdma_post_queue() left on @conn */
void krdma_xfer_push(struct krdma_conn *conn)
{
	krdma_push(conn);
}

static int krdma_post_task(struct krdma_conn *conn, struct krdma_req *req,
			   bool can_register, bool push)
{
	bool early;
	u64 total;
	u32 i;
	int ret;

	req->lwin = NULL;
	/* Under post_mutex the QP, and conn->kdev, cannot go away */
	mutex_lock(&conn->post_mutex);
	early = krdma_conn_preparing(conn, req);
	if ((!krdma_conn_postable(conn) && !early) || conn->post_refused) {
		ret = -ENOTCONN;
		goto out_unlock;
	}
	ret = krdma_check_req(conn, req, &total);
	if (ret == 1) {
		/* Checked already; only the connection may change meanwhile */
		mutex_unlock(&conn->post_mutex);
		/* No registration from here, nor before the QP can send */
		if (!can_register || early)
			return -EMSGSIZE;
		ret = krdma_post_get_lwin(conn, req);
		if (ret)
			return ret;
		mutex_lock(&conn->post_mutex);
		if (!krdma_conn_postable(conn) || conn->post_refused)
			ret = -ENOTCONN;
	}
	if (ret)
		goto out_unlock;

	req->conn = conn;
	req->sge_idx = 0;
	req->sge_off = 0;
	req->rdone = 0;
	req->total = total;
	req->status = IB_WC_SUCCESS;
	req->vendor_err = 0;
	req->byte_len = 0;
	req->has_imm = false;
	req->rdma_imm = false;
	req->tail_posted = false;
	req->post_error = 0;
	atomic_set(&req->inflight, 1);
	krdma_conn_get(conn);
	for (i = 0; i < req->num_sge; i++)
		krdma_buf_get(req->sge[i].buf);
	if (req->rkeys)
		kref_get(&req->rkeys->ref);

	if (req->opcode == KRDMA_OP_RECV) {
		/* Receives do not wait behind sends: posted now, in order */
		ret = krdma_post_recv(conn, req);
		if (ret)
			goto err_put;
		mutex_unlock(&conn->post_mutex);
		krdma_req_dec(req);
		return 0;
	}

	spin_lock_bh(&conn->sq_lock);
	list_add_tail(&req->entry, &conn->pending);
	spin_unlock_bh(&conn->sq_lock);
	mutex_unlock(&conn->post_mutex);
	if (push)
		krdma_push(conn);
	return 0;

err_put:
	for (i = 0; i < req->num_sge; i++)
		krdma_buf_put(req->sge[i].buf);
	if (req->rkeys)
		krdma_rkeys_put(req->rkeys);
	krdma_conn_put(conn);
out_unlock:
	mutex_unlock(&conn->post_mutex);
	krdma_grant_put(req->lwin);
	req->lwin = NULL;
	return ret;
}

static void krdma_sync_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct krdma_sync *sync = req->context;

	sync->wc = *wc;
	complete(&sync->done);
}

/**
 * krdma_post_sync - run one operation and wait for it
 * @conn: the connection
 * @req: the operation; krdma_post_sync() sets its done and context
 * @timeout: jiffies to wait
 * @wc: the outcome
 *
 * When the operation has not completed after @timeout, the connection is
 * failed, which completes it with a flush status; this waits for that, so
 * that @req is free again when this returns, whatever happened.
 *
 * Context: process context; sleeps.
 * Return: 0 when the operation completed (its status is in @wc: check it),
 * -ETIMEDOUT, or an error of krdma_post(); -EINVAL for an unsignaled
 * operation, whose success would never be reported.
 */
int krdma_post_sync(struct krdma_conn *conn, struct krdma_req *req,
		    long timeout, struct krdma_wc *wc)
{
	struct krdma_sync sync;
	int ret;

	if (req->flags & KRDMA_REQ_UNSIGNALED)
		return -EINVAL;
	init_completion(&sync.done);
	req->done = krdma_sync_done;
	req->context = &sync;
	ret = krdma_post(conn, req);
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&sync.done, timeout)) {
		krdma_conn_qp_failed(conn, -ETIMEDOUT);
		wait_for_completion(&sync.done);
		ret = -ETIMEDOUT;
	}
	*wc = sync.wc;
	return ret;
}
EXPORT_SYMBOL_NS_GPL(krdma_post_sync, KRDMA);
