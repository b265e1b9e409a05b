/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: the kernel API, for other kernel modules.
 *
 * The same core as /dev/krdma, with kernel memory: connect or listen,
 * register memory, grant windows of it to a connection's peer as tokens,
 * and move data with RDMA WRITE, READ, SEND/RECV and atomics. Every
 * function is exported with EXPORT_SYMBOL_NS_GPL(..., KRDMA): a consumer
 * says MODULE_IMPORT_NS(KRDMA) and builds against krdma's Module.symvers
 * (KBUILD_EXTRA_SYMBOLS). See Documentation/kernel-api.rst.
 *
 * Objects are opaque and reference counted; every one a consumer creates
 * it ends with the matching close/dereg/destroy call, after which it must
 * not be used. krdma cannot be unloaded while a consumer is loaded.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_KRDMA_H
#define _KRDMA_KRDMA_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/list.h>
#include <linux/slab.h>
#include <linux/socket.h>
#include <linux/stddef.h>
#include <linux/types.h>
#include <linux/krdma.h>

struct krdma_conn;
struct krdma_listener;
struct krdma_buf;
struct krdma_window;
struct net;
struct page;
struct sg_table;

/* krdma_conn_params.flags: refuse a peer that sends no krdma handshake */
#define KRDMA_CONN_KRDMA_PEER	BIT(0)

/**
 * struct krdma_conn_params - what a connection is created with
 * @sq_depth: operations in flight on the send queue (0: default)
 * @rq_depth: RECVs that can be posted at once (0: default)
 * @flags: KRDMA_CONN_KRDMA_PEER: the peer must be krdma. A listener
 *         rejects a plain verbs peer, krdma_connect() fails with -EPROTO
 *         if the peer accepts without krdma's handshake.
 * @event: optional: called once when the connection fails (peer gone,
 *         QP error, device removed), after every operation in flight has
 *         completed; @error is why (-ECONNRESET, -ENODEV, ...). Process
 *         context, no krdma lock held: it may call krdma functions, but
 *         not krdma_conn_close() of this connection.
 * @prepare: optional: called once for every connection, after its queue
 *           pair exists and before it is connected (krdma_connect()) or
 *           accepted (a listener's), so that the RECVs for the peer's
 *           first SENDs are posted before the peer can send. krdma_post()
 *           and krdma_post_list() of KRDMA_OP_RECV operations are the only
 *           calls allowed on @conn from it. Process context, may sleep. A
 *           negative errno refuses the connection: krdma_connect() fails
 *           with it, a listener rejects the request. RECVs posted here
 *           complete with WR_FLUSH_ERR if the connection never comes up,
 *           so a listener's @done may see a connection that
 *           krdma_accept() never returned.
 * @context: passed to @event and @prepare
 */
struct krdma_conn_params {
	u32 sq_depth;
	u32 rq_depth;
	u32 flags;
	void (*event)(struct krdma_conn *conn, int error, void *context);
	int (*prepare)(struct krdma_conn *conn, void *context);
	void *context;
};

/**
 * struct krdma_wc - the outcome of one operation
 * @status: enum ib_wc_status
 * @vendor_err: the device's own error code
 * @byte_len: bytes moved (RECV: received)
 * @imm_data: immediate data of a RECV, host order
 * @has_imm: @imm_data is valid
 * @rdma_imm: a RECV consumed by the peer's RDMA WRITE with immediate, not
 *            by a SEND: nothing was placed in its buffer, and @byte_len is
 *            the WRITE's length
 */
struct krdma_wc {
	u32 status;
	u32 vendor_err;
	u32 byte_len;
	u32 imm_data;
	bool has_imm;
	bool rdma_imm;
};

/**
 * struct krdma_local_sge - a range of a buffer, for an operation
 * @buf: the buffer (the operation holds a reference once posted)
 * @offset: start in @buf
 * @length: length in bytes
 */
struct krdma_local_sge {
	struct krdma_buf *buf;
	u64 offset;
	u64 length;
};

#define KRDMA_OP_MAX_SGE 16

/*
 * krdma_req.flags. KRDMA_REQ_UNSIGNALED: no completion unless it fails:
 * @done is called only with an error status (Documentation/kernel-api.rst,
 * "Unsignaled operations").
 */
#define KRDMA_REQ_UNSIGNALED	BIT(0)

struct krdma_req;
struct krdma_rkeys;
typedef void (*krdma_done_fn)(struct krdma_req *req,
			      const struct krdma_wc *wc);

/**
 * struct krdma_req - one operation: filled by the caller, then owned by
 *                    krdma until @done is called (or, unsignaled, until
 *                    a later operation's success implies it)
 * @opcode: KRDMA_OP_*
 * @flags: KRDMA_REQ_UNSIGNALED or 0; other bits are refused
 * @num_sge: entries of @sge in use
 * @remote_addr: WRITE, READ, atomics: the peer's address
 * @rkey: the peer's key, when its token's seg_shift is 0
 * @rkeys: NULL, or, for a token whose seg_shift is not 0, its key table
 *         from krdma_rkeys_get(): krdma then takes the key of each piece
 *         from it, and holds its own reference while the operation runs
 * @imm_data: WRITE_IMM, SEND_IMM: immediate data, host order
 * @compare_add: atomics
 * @swap: compare-and-swap
 * @done: called exactly once, in any context (softirq included), with no
 *        krdma lock held; for an unsignaled operation only if it fails
 * @context: the caller's, untouched by krdma
 * @conn: set by krdma_post(): the connection (referenced until @done)
 * @entry: in @conn->pending
 * @sge_idx: WRITE/READ: the sge the next chunk starts in
 * @sge_off: WRITE/READ: offset in that sge where the next chunk starts
 * @rdone: bytes of the remote range covered by posted chunks
 * @total: bytes of the whole operation
 * @inflight: chunks posted and not completed, plus one while posting
 * @status: first error seen, or IB_WC_SUCCESS
 * @vendor_err: its vendor error
 * @byte_len: RECV: bytes received
 * @recv_imm: RECV: immediate data received
 * @has_imm: RECV: @recv_imm is valid
 * @rdma_imm: RECV: consumed by an RDMA WRITE with immediate
 * @tail_posted: WRITE_IMM: the immediate-carrying tail WR is posted
 * @lwin: SEND/RECV too large for the SGEs: the local window of its
 *        buffer on this connection (referenced until @done)
 * @post_error: why krdma could not post a piece of it (a negative errno;
 *              it then completes with LOC_QP_OP_ERR or LOC_LEN_ERR), or 0
 * @sge: the local ranges; last, so that a request for fewer ranges may be
 *       allocated short (krdma_req_size()): krdma reads @sge[0] to
 *       @sge[@num_sge - 1] only
 */
struct krdma_req {
	u32 opcode;
	u32 flags;
	u32 num_sge;
	u64 remote_addr;
	u32 rkey;
	struct krdma_rkeys *rkeys;
	u32 imm_data;
	u64 compare_add;
	u64 swap;
	krdma_done_fn done;
	void *context;

	/* private to krdma */
	struct krdma_conn *conn;
	struct list_head entry;
	u32 sge_idx;
	u64 sge_off;
	u64 rdone;
	u64 total;
	atomic_t inflight;
	u32 status;
	u32 vendor_err;
	u32 byte_len;
	u32 recv_imm;
	bool has_imm;
	bool rdma_imm;
	bool tail_posted;
	struct krdma_window *lwin;
	int post_error;

	struct krdma_local_sge sge[KRDMA_OP_MAX_SGE];
};

/**
 * krdma_req_size - bytes of a request with room for @n local ranges
 * @n: the most ranges it will carry (num_sge), 0 to KRDMA_OP_MAX_SGE
 *
 * A request allocated with this size is valid for krdma_post() as long
 * as its num_sge never exceeds @n. It must not be copied by assignment
 * (that copies a whole struct krdma_req) nor declared on the stack.
 *
 * Return: the size in bytes.
 */
static inline size_t krdma_req_size(unsigned int n)
{
	return offsetof(struct krdma_req, sge) +
	       (size_t)n * sizeof(struct krdma_local_sge);
}

/**
 * krdma_req_alloc - a zeroed request with room for @n local ranges
 * @n: the most ranges it will carry, at most KRDMA_OP_MAX_SGE
 * @gfp: allocation flags
 *
 * See krdma_req_size(). Free it with kfree() once it is the caller's
 * again.
 *
 * Return: the request, or NULL (no memory, or @n too large).
 */
static inline struct krdma_req *krdma_req_alloc(unsigned int n, gfp_t gfp)
{
	if (n > KRDMA_OP_MAX_SGE)
		return NULL;
	return kzalloc(krdma_req_size(n), gfp);
}

/**
 * struct krdma_conn_info - what krdma_conn_info() tells about a connection
 * @state: KRDMA_CONN_* of <linux/krdma.h>
 * @error: when @state is KRDMA_CONN_ERROR, why (a negative errno)
 * @local: local address and port
 * @peer: peer address and port
 * @dev_index: the RDMA device (ib_device.index)
 * @port_num: its port
 * @transport: KRDMA_TRANSPORT_* of <linux/krdma.h>: what that port speaks
 *             (0 while the route is not resolved). On iWARP an RDMA
 *             WRITE completes at its initiator once the data went to TCP,
 *             not once the peer placed it
 * @initiator_depth: RDMA READs and atomics this side may have in flight
 * @max_grant_pages: the most pages one grant (one token) may span on this
 *                   connection's device; a larger window is -E2BIG.
 *                   Bytes: this times PAGE_SIZE, less the window's offset
 *                   in its first page
 * @max_send_sge: SGEs one SEND, WRITE or READ may carry without a local
 *                window
 * @max_recv_sge: SGEs one RECV may carry without a local window
 */
struct krdma_conn_info {
	u32 state;
	int error;
	struct sockaddr_storage local;
	struct sockaddr_storage peer;
	u32 dev_index;
	u32 port_num;
	u32 transport;
	u32 initiator_depth;
	u32 max_grant_pages;
	u32 max_send_sge;
	u32 max_recv_sge;
};

struct krdma_session;

/* krdma_session states */
enum krdma_session_state {
	KRDMA_SESSION_CONNECTING = 1,	/* first connect, not there yet */
	KRDMA_SESSION_CONNECTED,	/* krdma_session_conn() gives it */
	KRDMA_SESSION_RECONNECTING,	/* lost it, trying again */
	KRDMA_SESSION_FAILED,		/* lost it, reconnect not asked for */
	KRDMA_SESSION_CLOSED,		/* destroyed */
};

/**
 * struct krdma_session_params - how krdma keeps a session up
 * @conn: parameters of each connection (event and context are krdma's;
 *        prepare must be NULL)
 * @heartbeat_ms: check the peer this often (a zero-length RDMA WRITE);
 *                0: no heartbeat. Not answered in 10 s, while nothing
 *                else of the connection completed: the connection fails
 * @reconnect: connect again when the connection fails
 * @backoff_min_ms: first wait between attempts (0: 100 ms); doubles up
 *                  to @backoff_max_ms (0: 30 s)
 * @backoff_max_ms: longest wait between attempts
 * @state_change: optional: called on every change of state, in process
 *                context, without krdma locks held; @error is why the
 *                connection was lost (RECONNECTING, FAILED), else 0
 * @context: passed to @state_change
 */
struct krdma_session_params {
	struct krdma_conn_params conn;
	unsigned int heartbeat_ms;
	bool reconnect;
	unsigned int backoff_min_ms;
	unsigned int backoff_max_ms;
	void (*state_change)(struct krdma_session *s,
			     enum krdma_session_state state, int error,
			     void *context);
	void *context;
};

/**
 * struct krdma_session_stats - what happened to a session
 * @failures: connections lost
 * @reconnects: connections made again after a loss
 * @connect_failures: attempts that failed
 * @heartbeats: heartbeats answered
 * @heartbeat_failures: heartbeats not answered
 */
struct krdma_session_stats {
	u64 failures;
	u64 reconnects;
	u64 connect_failures;
	u64 heartbeats;
	u64 heartbeat_failures;
};

/* Connections: module/conn.c */
struct krdma_listener *krdma_listen(struct net *net, struct sockaddr *addr,
				    u32 backlog,
				    const struct krdma_conn_params *params);
int krdma_listener_addr(struct krdma_listener *l, struct sockaddr_storage *ss);
int krdma_accept(struct krdma_listener *l, bool nonblock, long timeout,
		 struct krdma_conn **out);
void krdma_listener_close(struct krdma_listener *l);
struct krdma_conn *krdma_connect(struct net *net, struct sockaddr *dst,
				 struct sockaddr *src, long timeout,
				 const struct krdma_conn_params *params);
void krdma_disconnect(struct krdma_conn *conn);
void krdma_conn_close(struct krdma_conn *conn);
void krdma_conn_info(struct krdma_conn *conn, struct krdma_conn_info *info);
void krdma_conn_put(struct krdma_conn *conn);

/* Sessions: module/session.c */
struct krdma_session *
krdma_session_create(struct net *net, struct sockaddr *dst,
		     struct sockaddr *src,
		     const struct krdma_session_params *params);
struct krdma_conn *krdma_session_conn(struct krdma_session *s);
enum krdma_session_state krdma_session_info(struct krdma_session *s,
					    struct krdma_session_stats *stats);
void krdma_session_destroy(struct krdma_session *s);

/* Memory: module/buffer.c, module/grant.c */
struct krdma_buf *krdma_buf_reg_kernel(void *addr, size_t length, u32 access);
struct krdma_buf *krdma_buf_reg_pages(struct page **pages,
				      unsigned int npages, unsigned int offset,
				      size_t length, u32 access);
struct krdma_buf *krdma_buf_reg_sgt(struct sg_table *sgt, u32 access);
void krdma_buf_dereg(struct krdma_buf *buf);
struct krdma_window *krdma_grant_create(struct krdma_conn *conn,
					struct krdma_buf *buf, u64 offset,
					u64 length, u32 access);
void krdma_grant_token(struct krdma_window *grant, struct krdma_token *token);
struct krdma_rkeys *krdma_rkeys_get(struct krdma_conn *conn,
				    const struct krdma_token *token);
void krdma_rkeys_put(struct krdma_rkeys *rkeys);
void krdma_grant_destroy(struct krdma_window *grant);

/* Transfers: module/xfer.c */
int krdma_post(struct krdma_conn *conn, struct krdma_req *req);
int krdma_post_list(struct krdma_conn *conn, struct krdma_req *const *reqs,
		    unsigned int n, unsigned int *accepted);
int krdma_post_sync(struct krdma_conn *conn, struct krdma_req *req,
		    long timeout, struct krdma_wc *wc);

#endif /* _KRDMA_KRDMA_H */
