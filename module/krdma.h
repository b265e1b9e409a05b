/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: internal definitions shared by the module's files.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_H
#define _KRDMA_H

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/scatterlist.h>
#include <linux/socket.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include <krdma/krdma.h>

#include "compat.h"
#include "version.h"
#include "wire.h"

struct krdma_dev_query;
struct krdma_port_query;
struct krdma_gid_entry;
struct krdma_user;
struct net;
struct user_struct;
struct seq_file;

/**
 * struct krdma_device - krdma's state for one RDMA device
 * @ibdev: the device; valid until krdma_remove_one() returns
 * @index: ibdev->index, the key of this device in krdma_devices
 * @ref: users of this struct; the ib_client holds one until removal
 * @released: completed by the last krdma_device_put(), waited for by
 *            krdma_remove_one() before the device may go
 * @conns_lock: protects @conns and @removing
 * @conns: every connection whose QP lives on this device
 * @removing: set by krdma_remove_one(); no connection may join @conns
 * @max_mr_pages: pages one fast registration maps (probed at add: at
 *                least max_fast_reg_page_list_len)
 * @send_one_mr: a send WR may name one fast-registered MR at most: siw's
 *               transmit path keeps its page-list index from one SGE to
 *               the next (siw_tx_hdt()), so a second such SGE sends from
 *               the wrong page or fails (Documentation/design.rst)
 * @signal_payload: the device sends the payload of an unsignaled WR by
 *                  zero copy, from pages it may read again after the WR
 *                  completed (siw: siw_tx_hdt()'s use_sendpage): every
 *                  WR that sends PAGE_SIZE bytes or more is signaled (a
 *                  WRITE chunk is one WR: krdma_chunk_max())
 * @tx_after_dereg: the device may go on sending a READ response from a
 *                  window's pages after its MR was deregistered (siw
 *                  checks the key once, when the response starts, and
 *                  reads the pages again for each FPDU): the pages are
 *                  released only once a later send WR completed (a fence)
 *                  or the QP is destroyed
 *
 * Created by the ib_client .add callback, published in the krdma_devices
 * xarray once fully built, unpublished first thing in .remove. Lookups take
 * a reference with kref_get_unless_zero() under the xarray lock, so a
 * device that is being removed is never handed out again.
 */
struct krdma_device {
	struct ib_device *ibdev;
	u32 index;
	struct kref ref;
	struct completion released;
	struct mutex conns_lock; /* @conns, @removing */
	struct list_head conns;
	bool removing;
	u32 max_mr_pages;
	bool send_one_mr;
	bool signal_payload;
	bool tx_after_dereg;
};

/**
 * struct krdma_owner - who made an object, for debugfs and krdmactl status
 * @caller: kernel consumers: the return address into the consumer
 * @uid: objects made through /dev/krdma: the uid charged for them
 * @pid: thread group id of the task that made it
 * @user: made through /dev/krdma (@uid is valid), else by the kernel API
 * @set: filled in; a passive connection has no owner until accepted
 * @comm: name of the task that made it
 */
struct krdma_owner {
	unsigned long caller;
	u32 uid;
	pid_t pid;
	bool user;
	bool set;
	char comm[TASK_COMM_LEN];
};

/* Classes of operations, for the counters of a connection */
enum krdma_op_class {
	KRDMA_OPC_WRITE,	/* WRITE, WRITE_IMM */
	KRDMA_OPC_READ,
	KRDMA_OPC_SEND,		/* SEND, SEND_IMM */
	KRDMA_OPC_RECV,
	KRDMA_OPC_ATOMIC,	/* FETCH_ADD, CMP_SWAP */
	KRDMA_OPC_COUNT,
};

/* The counters of one class */
enum krdma_op_counter {
	KRDMA_OPS_POSTED,	/* accepted by krdma_post() */
	KRDMA_OPS_DONE,		/* completed with success */
	KRDMA_OPS_FAILED,	/* completed with an error status */
	KRDMA_OPS_BYTES,	/* moved by those that succeeded */
	KRDMA_OPS_NR,
};

/**
 * struct krdma_conn_stats - what a connection's operations did
 * @ops: counters by class; atomic, as operations complete in any context
 * @last_error: the last failed operation: its status | opcode << 8 |
 *              vendor error << 32; 0 if none failed
 */
struct krdma_conn_stats {
	atomic64_t ops[KRDMA_OPC_COUNT][KRDMA_OPS_NR];
	atomic64_t last_error;
};

/* main.c: deferred work of every object (releases, posting) */
extern struct workqueue_struct *krdma_wq;
/* main.c: posting for kernel callers, away from their CPU (unbound) */
extern struct workqueue_struct *krdma_push_wq;

/* device.c */
int krdma_device_init(void);
void krdma_device_uninit(void);
struct krdma_device *krdma_device_get(u32 index, const struct net *net);
struct krdma_device *krdma_device_get_next(unsigned long *index,
					   const struct net *net);
struct krdma_device *krdma_device_get_by_ibdev(struct ib_device *ibdev);
u32 krdma_transport(struct ib_device *ibdev, u32 port);
void krdma_device_put(struct krdma_device *kdev);
u32 krdma_device_count(const struct net *net);
void krdma_device_fill_query(struct krdma_device *kdev,
			     struct krdma_dev_query *out);
int krdma_device_fill_port(struct krdma_device *kdev, u32 port,
			   struct net *net, struct krdma_port_query *out);
int krdma_device_read_gid(struct krdma_device *kdev, u32 port, u32 index,
			  struct net *net, struct krdma_gid_entry *out);

/*
 * Buffers: memory krdma may move data from and to. Not tied to a device:
 * each operation maps the pages it touches for the connection's device.
 */

/**
 * struct krdma_buf - a registered buffer
 * @ref: the owner's handle and every operation and grant using it
 * @pages: the pinned pages, @npages of them
 * @npages: number of pages
 * @first_offset: offset of the buffer's first byte in @pages[0]
 * @length: length in bytes
 * @uaddr: user address of the first byte (user buffers), else 0
 * @access: KRDMA_ACCESS_* the buffer allows
 * @mm: the mm whose pages these are, for VmPin (user buffers), else NULL
 * @user: the user charged for the pinned pages (user buffers)
 * @charged: @npages are charged to @user->locked_vm (not with
 *           CAP_IPC_LOCK); released with the pins
 * @lock: protects @grants and @dead
 * @grants: the grants of windows of this buffer
 * @dead: deregistered: no new grant
 * @free_work: releases the pages in process context, after an RCU grace
 *             period (the device's last write, krdma_buf_release())
 * @id: its number in the registry (debugfs), from 1
 * @owner: who registered it
 * @kuser: the krdma user who registered it (user buffers, referenced),
 *         which counts it as one of its buffers until its last put, and
 *         whose limits count its windows (krdma_window_create()); else
 *         NULL
 */
struct krdma_buf {
	struct kref ref;
	struct page **pages;
	unsigned long npages;
	unsigned int first_offset;
	u64 length;
	u64 uaddr;
	u32 access;
	struct mm_struct *mm;
	struct user_struct *user;
	bool charged;
	struct mutex lock; /* @grants, @dead */
	struct list_head grants;
	bool dead;
	struct rcu_work free_work;
	u32 id;
	struct krdma_owner owner;
	struct krdma_user *kuser;
};

/* buffer.c */
struct krdma_buf *krdma_buf_reg_user(u64 uaddr, u64 length, u32 access,
				     struct krdma_user *user);
void krdma_buf_put(struct krdma_buf *buf);
static inline void krdma_buf_get(struct krdma_buf *buf)
{
	kref_get(&buf->ref);
}

int krdma_buf_sgt(struct krdma_buf *buf, u64 offset, u64 length,
		  unsigned int max_segment, struct sg_table *sgt);
int krdma_buf_sg_fill(struct krdma_buf *buf, u64 offset, u64 length,
		      struct scatterlist *sgl, unsigned int max);

/* Pages that bytes [@first, @first + @length) touch; @length not 0 */
static inline u64 krdma_pages_spanned(u64 first, u64 length)
{
	return (PAGE_ALIGN(first + length) - (first & PAGE_MASK)) >> PAGE_SHIFT;
}

/* Pages that a range of a buffer touches */
static inline u64 krdma_buf_pages(const struct krdma_buf *buf, u64 offset,
				  u64 length)
{
	return krdma_pages_spanned(buf->first_offset + offset, length);
}

enum krdma_cm_kind {
	KRDMA_CM_LISTENER = 1,
	KRDMA_CM_CONN,
	KRDMA_CM_PARKED,	/* a listen's id on a taken port: no events */
};

/**
 * struct krdma_listener - a listening rdma_cm id and its accept queue
 * @kind: KRDMA_CM_LISTENER, the first field of every cm_id context
 * @ref: the owner, and every connection that has not been accepted yet
 * @cm_id: the listening id; NULL once destroyed
 * @net: namespace it listens in
 * @params: parameters of the connections it accepts
 * @lock: protects @cm_id, @pending, @queue, @queued, @closed, @refused,
 *	@last_refused_reason, @last_refused_peer
 * @pending: connections with a QP, not claimed yet, not (or never to
 *	be) established: being established, failed or refused (DOOMED)
 * @queue: established connections not accepted yet
 * @queued: connections from their connect request until they are handed
 *	out, or torn down by close_work or the listener's close
 * @backlog: the most that may be queued
 * @closed: closed by the owner or by device removal: refuse everything
 * @defer: requests wait unaccepted for krdma_accept_take()
 * @wait: woken when @queue grows, @queued falls or the listener closes
 * @refused: connect requests rejected, by enum krdma_rej_reason, for the
 *	owner (LISTEN_QUERY); not those of a closing listener
 * @last_refused_reason: the reason of the last of them, 0 if none
 * @last_refused_peer: the address that one came from
 */
struct krdma_listener {
	enum krdma_cm_kind kind;
	struct kref ref;
	struct rdma_cm_id *cm_id;
	struct net *net;
	struct krdma_conn_params params;
	spinlock_t lock; /* @cm_id, lists, counts, @closed, ->claim */
	struct list_head pending;
	struct list_head queue;
	u32 queued;
	u32 backlog;
	bool closed;
	bool defer;
	wait_queue_head_t wait;
	u64 refused[KRDMA_REJ_NR];
	int last_refused_reason;
	struct sockaddr_storage last_refused_peer;
};

/**
 * struct krdma_drain - a marker work request that drains one queue
 * @cqe: its completion handler
 * @done: completed when the marker's completion arrives
 */
struct krdma_drain {
	struct ib_cqe cqe;
	struct completion done;
};

/*
 * The life of a connection (krdma_conn.state). Only the transitions of
 * design.rst are legal; krdma_conn_set_state() refuses any other with a
 * WARN. The order matters: from KRDMA_CS_CLOSING on, nothing is posted.
 */
enum krdma_conn_state {
	KRDMA_CS_CONNECTING,	/* resolving, connecting, being accepted */
	KRDMA_CS_CONNECTED,	/* established */
	KRDMA_CS_FAILED,	/* failed before it was established */
	KRDMA_CS_BROKEN,	/* failed once established */
	KRDMA_CS_CLOSING,	/* torn down: nothing is posted any more */
	KRDMA_CS_CLOSED,	/* QP, CQ, PD and cm_id are gone */
};

/*
 * Who may end a connection (krdma_conn.claim). A passive connection
 * belongs to its listener until someone claims it under the listener's
 * lock: krdma_accept(), the listener's close, or close_work.
 */
enum krdma_conn_claim {
	KRDMA_CLAIM_LISTENER,	/* passive, unclaimed: established or not */
	KRDMA_CLAIM_DOOMED,	/* passive, unclaimed, close_work queued */
	KRDMA_CLAIM_TAKEN,	/* claimed, not handed out (yet) */
	KRDMA_CLAIM_OWNER,	/* returned by krdma_connect()/krdma_accept() */
};

/**
 * struct krdma_conn - one reliable connection (an RC QP made by rdma_cm)
 * @kind: KRDMA_CM_CONN, the first field of every cm_id context
 * @ref: the owner, every operation and grant, and each queued work item
 * @lock: serialises rdma_cm calls for @cm_id, state changes and teardown
 * @post_mutex: serialises posting to the send queue, one batch at a
 *              time; the teardown takes it once after the move to
 *              KRDMA_CS_CLOSING, to wait for a batch in progress. Taken
 *              under @lock only by the RECVs of @params.prepare, when
 *              nobody else can hold it (krdma_conn_prepare()); never the
 *              other way round
 * @state: KRDMA_CS_*, changed only by krdma_conn_set_state(): under @lock,
 *         and the move to KRDMA_CS_CLOSING also under @sq_lock; read
 *         anywhere with READ_ONCE()
 * @error: why the connection failed (negative errno), set once with the
 *         move to FAILED, BROKEN or CLOSING; 0 for a close by its owner
 * @connect_error: how CONNECTING ended: 0 when established, else why;
 *                 what krdma_connect() returns
 * @claim: KRDMA_CLAIM_*: under the listener's lock while the connection
 *         is unclaimed (and to give it back), then written by its claimant
 *         only (WRITE_ONCE()); read anywhere with READ_ONCE()
 * @torn_down_done: completed when the teardown, owner event included, is
 *                  over
 * @close_work: claims and closes a passive connection nobody claimed
 * @qp_error: the QP failed (negative errno), set once from any context
 * @error_work: tears the connection down after @qp_error was set
 * @cm_id: the rdma_cm id
 * @kdev: the device the QP lives on, once the route is known
 * @dev_index: its index, kept after teardown for queries
 * @transport: KRDMA_TRANSPORT_* of the port, kept after teardown
 * @dev_entry: in @kdev->conns
 * @pd: the connection's own protection domain: a grant's rkey is valid on
 *      this QP only
 * @cq: send and receive completions (softirq context)
 * @qp: the queue pair
 * @port_num: the device port
 * @params: queue depths as created
 * @max_send_sge: SGEs one send WR may carry
 * @max_recv_sge: SGEs one receive WR may carry
 * @mr_pages: pages one registration maps (the device's max_mr_pages)
 * @seg_shift: a window of more than @mr_pages pages is registered in
 *             pieces of 2^@seg_shift bytes of its address range
 * @max_grant_pages: pages one window may map: @mr_pages times the keys
 *                   one key table holds
 * @send_one_mr: the device's send_one_mr, kept with the QP
 * @signal_payload: the device's signal_payload, kept with the QP
 * @tx_after_dereg: the device's tx_after_dereg, kept with the QP
 * @rkeys: the peer's key tables this side has read, by their rkey
 *         (struct krdma_rkeys, referenced); at most KRDMA_RKEYS_CACHED
 * @wait: woken on every state change
 * @listener: passive connections: the listener (referenced); NULL for
 *            active ones
 * @listen_entry: in @listener->pending while being established, then in
 *	@listener->queue while waiting to be accepted
 * @local: local address, saved when connected
 * @peer: peer address, saved when connected
 * @qp_num: local QP number, saved when connected
 * @peer_qp_num: the peer's QP number
 * @peer_rq_depth: from the peer's handshake header
 * @peer_features: from the peer's handshake header
 * @initiator_depth: READs/atomics we may have in flight, as agreed
 * @responder_resources: READs/atomics of the peer we serve, as agreed
 * @grants: grants made on this connection, under @lock
 * @reg_sem: held for read while a window is registered or revoked (the
 *           PD, QP and device stay), for write by the teardown while it
 *           releases them; never held across user memory
 * @reg_zombies: windows whose registration did not complete (timeout,
 *               fatal signal), released once the QP is destroyed; under
 *               @lock
 * @sdrain: completion of the teardown's send-queue drain marker
 * @rdrain: completion of the teardown's receive-queue drain marker
 * @wr_lock: held across the ib_post_send() of a chain of chunks and the
 *           ib_post_recv() of a RECV; a CQE handler takes it before it
 *           releases a chunk, whose work requests the driver may still be
 *           reading (siw, posted to a QP in the error state, completes
 *           each WR with a flush and then reads its next pointer, while
 *           the CQ is polled on another CPU)
 * @sq_lock: protects @sq_free, @pending, @chunks, @recv_chunks,
 *           @local_wrs, @finishing, @free_chunks and @deferred
 * @chunks: posted send chunks not completed yet, in post order: a CQE
 *          for one completes the unsignaled ones before it
 * @recv_chunks: posted RECV chunks not completed yet
 * @local_wrs: krdma's own WRs (REG_MR, heartbeats) posted and not
 *             completed yet; what the device never completes is completed
 *             by the teardown once the CQ is gone
 * @finishing: CQE handlers between taking their chunks off the lists and
 *             finishing them (they still use the QP); the lists are idle
 *             only when none is
 * @zombies: chunks completed by teardown whose CQE may still come
 * @free_chunks: chunks to reuse; freed with the connection's CQ
 * @deferred: operations posted from softirq context, for @post_work
 * @sq_total: send WRs the QP takes (less one for the drain)
 * @sq_free: send WRs that may still be posted
 * @sq_released: send WRs completed (or flushed) so far: moves while the
 *               peer acknowledges anything of this connection
 * @rq_total: receive WRs the QP takes (less one for the drain)
 * @rq_free: receive WRs that may still be posted
 * @pending: operations accepted but not fully posted yet
 * @request_work: a request of a listener that defers the accept, not
 *                taken within KRDMA_REQUEST_TIMEOUT_MS: refused (its peer
 *                has likely given up); holds a reference while queued
 * @accept_in_call: a request of a listener that defers the accept:
 *                  accepted by krdma_accept_finish(), not by the CM
 *                  handler (set before the request is queued)
 * @cm_in_call: krdma_accept_finish(), or an iWARP krdma_connect(), uses
 *              @cm_id without @lock (it takes the id's handler mutex
 *              first): the teardown waits for it to end before it
 *              destroys the id (under @lock, waited for on @wait)
 * @cm_caller: the task of that call while it is in the driver's connect,
 *             unless a kernel thread (under @lock): a teardown kicks it
 *             out with @cm_kick, once (it clears @cm_caller)
 * @cm_kick: task work queued on @cm_caller with TWA_SIGNAL; it holds a
 *           reference of the connection until it runs
 * @route_resolved: an iWARP krdma_connect(): rdma_cm resolved the route,
 *                  the call connects (under @lock, read on @wait)
 * @preparing: @params.prepare runs: RECVs may be posted while the
 *             connection is still CONNECTING (written under @lock, read
 *             under @post_mutex)
 * @post_refused: the driver refused a post: nothing more is posted on the
 *                QP (a later success would be reported before what the
 *                refusal left to the teardown); under @post_mutex
 * @push_fence: an operation taken off @pending completes, without
 *              @post_mutex, before anything after it is posted (a later
 *              success says it is over); under @post_mutex
 * @post_work: posts @pending when WRs complete
 * @push_work: posts @pending for krdma_post() and krdma_post_list() when
 *             posting runs long in the caller's context (on
 *             krdma_push_wq); holds a reference while queued
 * @slow_posts: posts whose ib_post_send() ran longer than
 *              KRDMA_POST_SLOW_NS, up to KRDMA_POST_SLOW_COUNT: the
 *              device does its send work in the poster's context (rxe's
 *              requester tasklet on 6.1); under @post_mutex, read without
 *              it
 * @id: its number in the registry (debugfs, tracepoints), from 1
 * @owner: who holds it (under @lock)
 * @stats: counters of its operations
 */
struct krdma_conn {
	enum krdma_cm_kind kind;
	struct kref ref;
	struct mutex lock; /* cm calls, state, teardown, @grants */
	struct mutex post_mutex; /* one batch of posts at a time */
	enum krdma_conn_state state;
	int error;
	int connect_error;
	enum krdma_conn_claim claim;
	struct completion torn_down_done;
	struct work_struct close_work;
	struct delayed_work request_work;
	atomic_t qp_error;
	struct work_struct error_work;
	struct rdma_cm_id *cm_id;
	struct krdma_device *kdev;
	u32 dev_index;
	u32 transport;
	struct list_head dev_entry;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	u32 port_num;
	struct krdma_conn_params params;
	u32 max_send_sge;
	u32 max_recv_sge;
	u32 mr_pages;
	u32 seg_shift;
	u32 max_grant_pages;
	bool send_one_mr;
	bool signal_payload;
	bool tx_after_dereg;
	struct xarray rkeys;
	wait_queue_head_t wait;
	struct krdma_listener *listener;
	struct list_head listen_entry;
	struct sockaddr_storage local;
	struct sockaddr_storage peer;
	u32 qp_num;
	u32 peer_qp_num;
	u32 peer_rq_depth;
	u32 peer_features;
	u32 initiator_depth;
	u32 responder_resources;
	struct list_head grants;
	struct rw_semaphore reg_sem;
	struct list_head reg_zombies;
	struct krdma_drain sdrain;
	struct krdma_drain rdrain;
	spinlock_t wr_lock; /* posted WRs while the driver reads them */
	spinlock_t sq_lock; /* @sq_free, @pending, the chunk lists, @deferred */
	u32 sq_total;
	u32 sq_free;
	u64 sq_released;
	u32 rq_total;
	atomic_t rq_free;
	struct list_head pending;
	struct list_head chunks;
	struct list_head recv_chunks;
	struct list_head local_wrs;
	u32 finishing;
	struct list_head zombies;
	struct list_head free_chunks;
	struct list_head deferred;
	bool accept_in_call;
	bool cm_in_call;
	struct task_struct *cm_caller;
	struct callback_head cm_kick;
	bool route_resolved;
	bool preparing;
	bool post_refused;
	bool push_fence;
	struct work_struct post_work;
	struct work_struct push_work;
	u32 slow_posts;
	u32 id;
	struct krdma_owner owner;
	struct krdma_conn_stats stats;
};

/* conn.c */
u32 krdma_listen_backlog(u32 backlog);
u32 krdma_conn_depth(u32 want);
u32 krdma_conn_qdepth(const struct krdma_conn_params *params);
struct krdma_listener *krdma_listen_defer(struct net *net,
					  struct sockaddr *addr, u32 backlog,
					  const struct krdma_conn_params *params,
					  bool defer);
int krdma_accept_take(struct krdma_listener *l, bool nonblock, long timeout,
		      struct krdma_conn **out);
int krdma_accept_finish(struct krdma_listener *l, struct krdma_conn *conn,
			int (*prepare)(struct krdma_conn *conn, void *ctx),
			void *ctx);
void krdma_listener_put(struct krdma_listener *l);
bool krdma_listener_enqueue(struct krdma_listener *l, struct krdma_conn *conn);
void krdma_conn_teardown(struct krdma_conn *conn, int error);
void krdma_conn_kicks_wait(void);
void krdma_conn_qp_failed(struct krdma_conn *conn, int error);
u32 krdma_conn_public_state(const struct krdma_conn *conn);
static inline void krdma_conn_get(struct krdma_conn *conn)
{
	kref_get(&conn->ref);
}

/*
 * A window in pieces covers its address range in pieces of 2^@shift bytes
 * (struct krdma_token.seg_shift), each its own registration and key.
 */

/* Bytes from @addr to the end of its piece */
static inline u64 krdma_piece_left(u64 addr, u32 shift)
{
	return (1ULL << shift) - (addr & ((1ULL << shift) - 1));
}

/* The pieces that @len bytes (at least 1) at @addr touch */
static inline u64 krdma_pieces(u64 addr, u64 len, u32 shift)
{
	return ((addr + len - 1) >> shift) - (addr >> shift) + 1;
}

/* Made by a listener */
static inline bool krdma_conn_passive(const struct krdma_conn *conn)
{
	return conn->listener;
}

/*
 * Torn down, or being torn down: no new operation is taken. Exact under
 * @sq_lock, which the move to KRDMA_CS_CLOSING takes; a poster that saw
 * it false under @post_mutex may finish its batch.
 */
static inline bool krdma_conn_stopped(const struct krdma_conn *conn)
{
	return READ_ONCE(conn->state) >= KRDMA_CS_CLOSING;
}

/**
 * struct krdma_seg - one fast registration of (part of) a window
 * @mr: the MR in the connection's PD; NULL once released
 * @lkey: its lkey, for the SGEs of operations through a local window
 * @sgt: the pages it maps, DMA-mapped for it
 * @mapped: @sgt is DMA-mapped
 */
struct krdma_seg {
	struct ib_mr *mr;
	u32 lkey;
	struct sg_table sgt;
	bool mapped;
};

/**
 * struct krdma_window - a grant: a window of a buffer opened to one
 *                       connection (named so as not to clash with the
 *                       uapi's struct krdma_grant, the ioctl argument)
 * @ref: the owner's handle
 * @conn: the connection (referenced)
 * @buf: the buffer (referenced)
 * @mr: the MR the token names: the window's own, or its key table's when
 *      it spans several registrations (a local window: its first); NULL
 *      once revoked (under @conn->lock)
 * @conn_entry: in @conn->grants
 * @buf_entry: in @buf->grants
 * @offset: start of the window in @buf
 * @length: length of the window
 * @access: KRDMA_ACCESS_REMOTE_* granted; 0 for a local window
 * @nsegs: registrations of the window's pages (the buffer's pinned ones):
 *         one, or one per 2^@token.seg_shift bytes of its address range
 * @segs: those registrations
 * @table: the key table's registration, when @nsegs > 1
 * @keys: the key table (tag, count, the rkey of each of @segs, all
 *        little-endian u32), when @nsegs > 1
 * @keys_bytes: its size, whole pages
 * @dir: the direction @segs are mapped in: to the device only for a
 *       buffer nothing may write
 * @token: what the peer is given; fixed when the registration completed
 * @local: a local window: the whole buffer, local access only, made by
 *         krdma for SENDs and RECVs too large for the SGEs; cached on the
 *         buffer, which owns it; no key table
 * @charged_pages: its pages, counted against @buf->kuser's
 *                 max_window_pages_per_user (0 for a kernel buffer) from
 *                 before anything is allocated until its registrations
 *                 are released (krdma_window_unmap()); a local window so
 *                 charged counts one against max_grants_per_user too
 */
struct krdma_window {
	struct kref ref;
	struct krdma_conn *conn;
	struct krdma_buf *buf;
	struct ib_mr *mr;
	struct list_head conn_entry;
	struct list_head buf_entry;
	u64 offset;
	u64 length;
	u32 access;
	u32 nsegs;
	struct krdma_seg *segs;
	struct krdma_seg table;
	__le32 *keys;
	size_t keys_bytes;
	enum dma_data_direction dir;
	struct krdma_token token;
	bool local;
	u32 charged_pages;
};

/**
 * struct krdma_rkeys - a peer's key table, for its tokens that span
 *                      several registrations
 * @ref: the connection's cache and each operation using it
 * @rkey: the token's rkey: the table's own key
 * @tag: the token's tag, also the table's first word
 * @shift: log2 of the bytes each key covers
 * @nkeys: entries of @keys
 * @keys: the rkey of the range [i << @shift, (i + 1) << @shift)
 */
struct krdma_rkeys {
	struct kref ref;
	u32 rkey;
	u32 tag;
	u32 shift;
	u32 nkeys;
	u32 keys[];
};

/* grant.c */
void krdma_grant_revoke(struct krdma_window *grant);
bool krdma_window_unlist(struct krdma_window *win);
void krdma_grant_put(struct krdma_window *grant);
void krdma_conn_revoke_grants(struct krdma_conn *conn);
void krdma_conn_bury_windows(struct krdma_conn *conn);
void krdma_conn_drop_rkeys(struct krdma_conn *conn);
void krdma_conn_set_grant_limits(struct krdma_conn *conn, u32 mr_pages);
struct krdma_window *krdma_local_window_get(struct krdma_conn *conn,
					    struct krdma_buf *buf);

/*
 * krdma_req.flags, internal: call @done on the success of an unsignaled
 * operation too. The ioctl layer's operations ask for it (their memory is
 * krdma's and their ring entry reserved); krdma_post() and
 * krdma_post_list() refuse it.
 */
#define KRDMA_REQ_QUIET_DONE	BIT(31)

/* xfer.c */
void krdma_xfer_flush_pending(struct krdma_conn *conn);
void krdma_xfer_reap(struct krdma_conn *conn);
void krdma_xfer_free_zombies(struct krdma_conn *conn);
void krdma_xfer_flush_local_wrs(struct krdma_conn *conn);
void krdma_post_work(struct work_struct *work);
void krdma_push_work(struct work_struct *work);
bool krdma_push_cancel(struct krdma_conn *conn);
int krdma_post_local_wrs(struct krdma_conn *conn, struct ib_send_wr *wr,
			 u32 nr, long timeout);
bool krdma_conn_post_was_refused(struct krdma_conn *conn);
void krdma_conn_drain(struct krdma_conn *conn);
int krdma_post_heartbeat(struct krdma_conn *conn);
u64 krdma_conn_sq_progress(struct krdma_conn *conn);
int krdma_post_queue(struct krdma_conn *conn, struct krdma_req *req);
int krdma_xfer_check_ranges(struct krdma_req *req);
void krdma_xfer_push(struct krdma_conn *conn);

/* chardev.c */
int krdma_chardev_init(void);
void krdma_chardev_uninit(void);

/* users.c: what each user holds through /dev/krdma, against its limits */
enum krdma_user_res {
	KRDMA_USER_CONNS,
	KRDMA_USER_BUFS,
	KRDMA_USER_BACKLOG,	/* connections listeners may queue */
	KRDMA_USER_GRANTS,
	KRDMA_USER_QDEPTH,	/* queue entries: sq_depth + rq_depth */
	KRDMA_USER_WPAGES,	/* pages of windows: grants and local ones */
	KRDMA_USER_NR_RES,
};

struct krdma_user *krdma_user_get(kuid_t uid);
struct krdma_user *krdma_user_hold(struct krdma_user *user);
void krdma_user_drop(struct krdma_user *user);
void krdma_user_put(struct krdma_user *user);
u32 krdma_user_uid(const struct krdma_user *user);
int krdma_user_charge_n(struct krdma_user *user, enum krdma_user_res res,
			u32 n);
void krdma_user_uncharge_n(struct krdma_user *user, enum krdma_user_res res,
			   u32 n);
static inline int krdma_user_charge(struct krdma_user *user,
				    enum krdma_user_res res)
{
	return krdma_user_charge_n(user, res, 1);
}

static inline void krdma_user_uncharge(struct krdma_user *user,
				       enum krdma_user_res res)
{
	krdma_user_uncharge_n(user, res, 1);
}

void krdma_users_show(struct seq_file *m);
void krdma_users_show_stats(struct seq_file *m);

/* stats.c: the registry, counters, tracepoints and debugfs */
void krdma_stats_init(void);
void krdma_stats_uninit(void);
int krdma_registry_add_conn(struct krdma_conn *conn);
void krdma_registry_del_conn(struct krdma_conn *conn);
int krdma_registry_add_buf(struct krdma_buf *buf, unsigned long caller,
			   const struct krdma_user *user);
void krdma_registry_del_buf(struct krdma_buf *buf);
void krdma_owner_init(struct krdma_owner *owner, unsigned long caller,
		      const struct krdma_user *user);
void krdma_conn_set_owner(struct krdma_conn *conn, unsigned long caller,
			  const struct krdma_user *user);
void krdma_stats_posted(struct krdma_conn *conn, u32 opcode);
void krdma_stats_done(struct krdma_conn *conn, u32 opcode, u32 status,
		      u32 vendor_err, u64 bytes);
void krdma_conn_trace_state(struct krdma_conn *conn, u32 old_state,
			    int error);
bool krdma_post_refused(void);

#endif /* _KRDMA_H */
