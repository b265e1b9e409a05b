// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: connections and listeners, made with rdma_cm.
 *
 * Every rdma_cm call for a connection's cm_id, and every change of its
 * state, happens under conn->lock. The cm_id is never destroyed from its
 * own event handler: a handler that finds its connection must go queues
 * conn->close_work, or (while the connection is still being accepted)
 * returns non-zero so that rdma_cm destroys the new id itself.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/irq_poll.h>
#include <linux/net.h>
#include <linux/nsproxy.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/wait_bit.h>
#include <net/sock.h>
#include <rdma/ib_cm.h>
#include <linux/krdma.h>

#include "krdma.h"
#include "wire.h"

#define KRDMA_DEFAULT_DEPTH	128
#define KRDMA_MIN_DEPTH		16
/* READ contexts of an iWARP QP: krdma_rw_ctxs() */
#define KRDMA_IWARP_RW_CTXS	16
/* Source ports krdma_connect() tries on iWARP (see there) */
#define KRDMA_CONNECT_PORT_TRIES	4
#define KRDMA_MAX_DEPTH		4096
#define KRDMA_DEFAULT_BACKLOG	16
#define KRDMA_RESOLVE_MS	5000
/* Ports a listen on port 0 tries when the driver finds one taken */
#define KRDMA_LISTEN_ANY_PORT_TRIES	8

static int krdma_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);

/*
 * IB/RoCE: how long a request waits for its ACK before it is sent again,
 * as 4.096 us * 2^ack_timeout. 18 is about 1 s: a slow peer (a soft device
 * on a loaded or emulated machine) is then not flooded with retries.
 */
static unsigned int ack_timeout = 18;

static int krdma_param_set_ack_timeout(const char *val,
				       const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 0, 31);
}

static const struct kernel_param_ops krdma_ack_timeout_ops = {
	.set = krdma_param_set_ack_timeout,
	.get = param_get_uint,
};

module_param_cb(ack_timeout, &krdma_ack_timeout_ops, &ack_timeout, 0644);
__MODULE_PARM_TYPE(ack_timeout, "uint");
MODULE_PARM_DESC(ack_timeout,
		 "IB/RoCE ACK timeout exponent, 0..31: 4.096us * 2^N (default 18, ~1 s)");

/**
 * krdma_conn_depth - the queue depth a connection asked for @want gets
 * @want: sq_depth or rq_depth as given (0: default)
 *
 * Return: the depth krdma uses (the device may allow fewer).
 */
u32 krdma_conn_depth(u32 want)
{
	if (!want)
		return KRDMA_DEFAULT_DEPTH;
	return clamp_t(u32, want, KRDMA_MIN_DEPTH, KRDMA_MAX_DEPTH);
}

/**
 * krdma_conn_qdepth - the queue entries a connection made with @params holds
 * @params: its parameters, as asked for
 *
 * What the per-user limit max_queue_depth_per_user counts: the depths of
 * its send and receive queues, each entry of which costs the device a
 * send or receive queue entry and a completion queue entry (more for
 * READ and WRITE on iWARP), in memory that no cgroup is charged for.
 *
 * Return: sq_depth + rq_depth as krdma_conn_depth() makes them.
 */
u32 krdma_conn_qdepth(const struct krdma_conn_params *params)
{
	return krdma_conn_depth(params->sq_depth) +
	       krdma_conn_depth(params->rq_depth);
}

static void krdma_conn_close_work(struct work_struct *work);
static void krdma_conn_request_expired(struct work_struct *work);
static bool krdma_conn_close_unclaimed(struct krdma_conn *conn);
static void krdma_listener_unqueue(struct krdma_listener *l);
static void krdma_conn_error_work(struct work_struct *work);
static void krdma_conn_set_state(struct krdma_conn *conn,
				 enum krdma_conn_state state, int error);

static struct krdma_conn *krdma_conn_alloc(const struct krdma_conn_params *p)
{
	struct krdma_conn *conn;

	conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	if (!conn)
		return NULL;
	conn->kind = KRDMA_CM_CONN;
	kref_init(&conn->ref);
	mutex_init(&conn->lock);
	mutex_init(&conn->post_mutex);
	conn->state = KRDMA_CS_CONNECTING;
	conn->claim = KRDMA_CLAIM_TAKEN;
	init_waitqueue_head(&conn->wait);
	init_completion(&conn->torn_down_done);
	INIT_LIST_HEAD(&conn->dev_entry);
	INIT_LIST_HEAD(&conn->listen_entry);
	INIT_LIST_HEAD(&conn->grants);
	init_rwsem(&conn->reg_sem);
	INIT_LIST_HEAD(&conn->reg_zombies);
	INIT_LIST_HEAD(&conn->pending);
	INIT_LIST_HEAD(&conn->chunks);
	INIT_LIST_HEAD(&conn->recv_chunks);
	INIT_LIST_HEAD(&conn->local_wrs);
	INIT_LIST_HEAD(&conn->zombies);
	INIT_LIST_HEAD(&conn->free_chunks);
	INIT_LIST_HEAD(&conn->deferred);
	xa_init(&conn->rkeys);
	spin_lock_init(&conn->wr_lock);
	spin_lock_init(&conn->sq_lock);
	INIT_WORK(&conn->post_work, krdma_post_work);
	INIT_WORK(&conn->push_work, krdma_push_work);
	INIT_WORK(&conn->close_work, krdma_conn_close_work);
	INIT_DELAYED_WORK(&conn->request_work, krdma_conn_request_expired);
	INIT_WORK(&conn->error_work, krdma_conn_error_work);
	if (p)
		conn->params = *p;
	conn->params.sq_depth = krdma_conn_depth(p ? p->sq_depth : 0);
	conn->params.rq_depth = krdma_conn_depth(p ? p->rq_depth : 0);
	if (krdma_registry_add_conn(conn)) {
		kfree(conn);
		return NULL;
	}
	return conn;
}

static void krdma_conn_release(struct kref *ref)
{
	struct krdma_conn *conn = container_of(ref, struct krdma_conn, ref);

	WARN_ON(conn->state != KRDMA_CS_CLOSED);
	krdma_conn_drop_rkeys(conn);
	krdma_registry_del_conn(conn);
	krdma_listener_put(conn->listener);
	kfree(conn);
}

/**
 * krdma_conn_put - drop a reference to a connection
 * @conn: the connection, or NULL
 *
 * Context: any. The last reference only frees memory: the connection's
 * resources are gone since its teardown.
 */
void krdma_conn_put(struct krdma_conn *conn)
{
	if (conn)
		kref_put(&conn->ref, krdma_conn_release);
}
EXPORT_SYMBOL_NS_GPL(krdma_conn_put, KRDMA);

static void krdma_fill_hdr(struct krdma_conn *conn, struct krdma_cm_hdr *hdr)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = cpu_to_le32(KRDMA_CM_MAGIC);
	hdr->version = KRDMA_CM_VERSION;
	hdr->features = cpu_to_le32(KRDMA_CM_FEATURES);
	hdr->sq_depth = cpu_to_le32(conn->params.sq_depth);
	hdr->rq_depth = cpu_to_le32(conn->params.rq_depth);
}

/*
 * Read the peer's header. Private data that is not a krdma header (none,
 * shorter than one, or another first word) comes from a plain verbs peer:
 * fine, unless the connection is for krdma peers only. On InfiniBand and
 * RoCE the CM pads a request's private data to 56 bytes, so the length
 * alone says nothing.
 *
 * Return: 0, or why the peer is refused (enum krdma_rej_reason).
 */
static int krdma_parse_hdr(struct krdma_conn *conn, const void *data, u8 len)
{
	const struct krdma_cm_hdr *hdr = data;

	if (!data || len < sizeof(*hdr) ||
	    le32_to_cpu(hdr->magic) != KRDMA_CM_MAGIC)
		return conn->params.flags & KRDMA_CONN_KRDMA_PEER ?
		       KRDMA_REJ_NOT_KRDMA : 0;
	if (hdr->version != KRDMA_CM_VERSION)
		return KRDMA_REJ_VERSION;
	conn->peer_features = le32_to_cpu(hdr->features);
	conn->peer_rq_depth = le32_to_cpu(hdr->rq_depth);
	return 0;
}

/* What a connecting side makes of a reject reason: an errno of its own */
static int krdma_rej_errno(int reason)
{
	switch (reason) {
	case KRDMA_REJ_VERSION:
		return -EPROTONOSUPPORT;
	case KRDMA_REJ_NOT_KRDMA:
		return -EPROTO;
	case KRDMA_REJ_BACKLOG:
		return -EBUSY;
	case KRDMA_REJ_NO_RESOURCES:
		return -ENOBUFS;
	case KRDMA_REJ_CLOSING:
	default:
		return -ECONNREFUSED;
	}
}

/* A reject's reason if a krdma listener sent it, else 0 */
static int krdma_rej_reason(const struct rdma_cm_event *ev)
{
	const struct krdma_cm_rej *rej = ev->param.conn.private_data;

	if (!rej || ev->param.conn.private_data_len < sizeof(*rej) ||
	    le32_to_cpu(rej->magic) != KRDMA_CM_MAGIC)
		return 0;
	return rej->reason;
}

static void krdma_qp_event(struct ib_event *event, void *context)
{
	struct krdma_conn *conn = context;

	pr_debug("conn %p: QP event %s\n", conn,
		 ib_event_msg(event->event));
	switch (event->event) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
		krdma_conn_qp_failed(conn, -EIO);
		break;
	case IB_EVENT_QP_ACCESS_ERR:
		/* The peer's RDMA access was refused here (siw says so) */
		krdma_conn_qp_failed(conn, -EACCES);
		break;
	default:
		break;
	}
}

/*
 * A connection that failed (QP error, peer gone) is torn down at once:
 * the drain completes every operation in flight with an error, and the
 * device resources go. The owner keeps the connection, in state ERROR,
 * until it closes it.
 */
static void krdma_conn_error_work(struct work_struct *work)
{
	struct krdma_conn *conn = container_of(work, struct krdma_conn,
					       error_work);

	krdma_conn_teardown(conn, atomic_read(&conn->qp_error));
	krdma_conn_put(conn);
}

/**
 * krdma_conn_qp_failed - the connection failed: tear it down soon
 * @conn: the connection
 * @error: why, a negative errno
 *
 * Context: any (completion handlers, QP events, CM events).
 */
void krdma_conn_qp_failed(struct krdma_conn *conn, int error)
{
	/*
	 * A driver that refuses a post with -ENOTCONN (siw, once its QP
	 * left RTS) says that the connection went away under krdma: the
	 * peer or the link reset it. "Not connected" is the state that
	 * follows, not a reason.
	 */
	if (error == -ENOTCONN)
		error = -ECONNRESET;
	if (atomic_cmpxchg(&conn->qp_error, 0, error))
		return;
	krdma_conn_get(conn);
	queue_work(krdma_wq, &conn->error_work);
}

/*
 * The rdma_rw contexts a QP of @sq send-queue slots asks for. Where
 * rdma_rw registers memory for a transfer (iWARP, for every READ), each
 * context is an MR of its pool, made when the QP is, with a page list of
 * 256 entries: one per slot would be about 1 MiB per QP at the default
 * depth. Fewer, there: a READ that finds the pool empty waits for room
 * (rdma_rw_ctx_init() says -EAGAIN) as when the send queue is full.
 */
static u32 krdma_rw_ctxs(struct ib_device *ibdev, u32 port_num, u32 sq)
{
	if (rdma_protocol_iwarp(ibdev, port_num))
		return min_t(u32, sq, KRDMA_IWARP_RW_CTXS);
	return sq;
}

/*
 * Create the PD, CQ, QP and MR pool of a connection whose cm_id knows its
 * device. Called from the CM handler (route resolved, connect request).
 */
static int krdma_conn_create_qp(struct krdma_conn *conn)
{
	struct rdma_cm_id *id = conn->cm_id;
	struct ib_device *ibdev = id->device;
	struct ib_qp_init_attr attr = {};
	struct krdma_device *kdev;
	u32 sq = conn->params.sq_depth, rq = conn->params.rq_depth;
	u32 max_send_wr, rw_ctxs;
	int cqe, ret;

	lockdep_assert_held(&conn->lock);

	kdev = krdma_device_get_by_ibdev(ibdev);
	if (!kdev)
		return -ENODEV;
	mutex_lock(&kdev->conns_lock);
	if (kdev->removing) {
		mutex_unlock(&kdev->conns_lock);
		krdma_device_put(kdev);
		return -ENODEV;
	}
	list_add_tail(&conn->dev_entry, &kdev->conns);
	mutex_unlock(&kdev->conns_lock);
	conn->kdev = kdev;
	conn->dev_index = kdev->index;
	conn->port_num = id->port_num;
	conn->transport = krdma_transport(ibdev, conn->port_num);

	conn->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(conn->pd)) {
		ret = PTR_ERR(conn->pd);
		goto err_clear_pd;
	}

	/*
	 * Room in the CQ for every WR to flush with an error (unsignaled ones
	 * too), plus the drains. The driver may give the QP more WRs than
	 * asked for (siw rounds up): krdma never uses more than this.
	 */
	max_send_wr = sq + 1 + rdma_rw_max_send_wr(ibdev, conn->port_num, sq, 0);
	rw_ctxs = krdma_rw_ctxs(ibdev, conn->port_num, sq);
	cqe = max_send_wr + rq + 1;
	conn->cq = ib_alloc_cq(ibdev, conn, cqe, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(conn->cq)) {
		ret = PTR_ERR(conn->cq);
		/* The teardown frees what is set */
		conn->cq = NULL;
		goto err_dealloc_pd;
	}

	attr.event_handler = krdma_qp_event;
	attr.qp_context = conn;
	attr.send_cq = conn->cq;
	attr.recv_cq = conn->cq;
	/* rdma_create_qp() adds rdma_rw's WRs for rw_ctxs: as many as for sq */
	attr.cap.max_send_wr = max_send_wr -
			       rdma_rw_max_send_wr(ibdev, conn->port_num,
						   rw_ctxs, 0);
	attr.cap.max_recv_wr = rq + 1;
	attr.cap.max_send_sge = min_t(u32, ibdev->attrs.max_send_sge,
				      KRDMA_OP_MAX_SGE);
	attr.cap.max_recv_sge = min_t(u32, ibdev->attrs.max_recv_sge,
				      KRDMA_OP_MAX_SGE);
	attr.cap.max_rdma_ctxs = rw_ctxs;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	attr.port_num = conn->port_num;
	ret = rdma_create_qp(id, conn->pd, &attr);
	if (ret)
		goto err_free_cq;
	conn->qp = id->qp;
	conn->sq_total = min(attr.cap.max_send_wr, max_send_wr) - 1;
	conn->sq_free = conn->sq_total;
	conn->rq_total = min(attr.cap.max_recv_wr, rq + 1) - 1;
	atomic_set(&conn->rq_free, conn->rq_total);
	conn->max_send_sge = attr.cap.max_send_sge;
	conn->max_recv_sge = attr.cap.max_recv_sge;
	krdma_conn_set_grant_limits(conn, kdev->max_mr_pages);
	conn->send_one_mr = kdev->send_one_mr;
	conn->signal_payload = kdev->signal_payload;
	conn->tx_after_dereg = kdev->tx_after_dereg;
	return 0;

err_free_cq:
	ib_free_cq(conn->cq);
	conn->cq = NULL;
err_dealloc_pd:
	ib_dealloc_pd(conn->pd);
err_clear_pd:
	conn->pd = NULL;
	mutex_lock(&kdev->conns_lock);
	list_del_init(&conn->dev_entry);
	mutex_unlock(&kdev->conns_lock);
	conn->kdev = NULL;
	krdma_device_put(kdev);
	return ret;
}

/* Remember the addresses: CONN_QUERY answers them after the id is gone */
static void krdma_conn_save_addrs(struct krdma_conn *conn)
{
	struct rdma_cm_id *id = conn->cm_id;

	memcpy(&conn->local, &id->route.addr.src_addr, sizeof(conn->local));
	memcpy(&conn->peer, &id->route.addr.dst_addr, sizeof(conn->peer));
	conn->qp_num = conn->qp ? conn->qp->qp_num : 0;
}

/* The legal transitions of krdma_conn.state (design.rst) */
static const u8 krdma_conn_next[] = {
	[KRDMA_CS_CONNECTING] = BIT(KRDMA_CS_CONNECTED) | BIT(KRDMA_CS_FAILED) |
				BIT(KRDMA_CS_CLOSING),
	[KRDMA_CS_CONNECTED] = BIT(KRDMA_CS_BROKEN) | BIT(KRDMA_CS_CLOSING),
	[KRDMA_CS_FAILED] = BIT(KRDMA_CS_CLOSING),
	[KRDMA_CS_BROKEN] = BIT(KRDMA_CS_CLOSING),
	[KRDMA_CS_CLOSING] = BIT(KRDMA_CS_CLOSED),
	[KRDMA_CS_CLOSED] = 0,
};

/**
 * krdma_conn_public_state - the state userspace and consumers see
 * @conn: the connection
 *
 * Context: any; exact under @conn->lock.
 * Return: KRDMA_CONN_*: FAILED and BROKEN are ERROR; a connection torn
 * down is ERROR if it failed (or its teardown had an error), else CLOSED.
 */
u32 krdma_conn_public_state(const struct krdma_conn *conn)
{
	switch (READ_ONCE(conn->state)) {
	case KRDMA_CS_CONNECTING:
		return KRDMA_CONN_CONNECTING;
	case KRDMA_CS_CONNECTED:
		return KRDMA_CONN_CONNECTED;
	case KRDMA_CS_FAILED:
	case KRDMA_CS_BROKEN:
		return KRDMA_CONN_ERROR;
	default:
		return READ_ONCE(conn->error) ? KRDMA_CONN_ERROR :
						KRDMA_CONN_CLOSED;
	}
}

/*
 * Move to @next, recording @error (a negative errno, or 0) if it is the
 * first; an illegal transition is a bug in krdma: refused with a WARN.
 */
static void krdma_conn_set_state(struct krdma_conn *conn,
				 enum krdma_conn_state next, int error)
{
	enum krdma_conn_state old = conn->state;
	u32 old_public = krdma_conn_public_state(conn);

	lockdep_assert_held(&conn->lock);
	if (next == KRDMA_CS_CLOSING)
		lockdep_assert_held(&conn->sq_lock);

	if (WARN_ONCE(!(krdma_conn_next[old] & BIT(next)),
		      "krdma: conn %u: illegal state change %d -> %d\n",
		      conn->id, old, next))
		return;
	if (old == KRDMA_CS_CONNECTING)
		conn->connect_error = next == KRDMA_CS_CONNECTED ? 0 :
				      error ?: -ECONNABORTED;
	if (error && !conn->error)
		WRITE_ONCE(conn->error, error);
	WRITE_ONCE(conn->state, next);
	if (krdma_conn_public_state(conn) != old_public)
		krdma_conn_trace_state(conn, old_public, error);
	wake_up_all(&conn->wait);
}

/*
 * The connection failed (@error: why, a negative errno): FAILED while
 * connecting, BROKEN once established. A connection that already failed,
 * or is being torn down, keeps its state and first error.
 */
static void krdma_conn_fail(struct krdma_conn *conn, int error)
{
	lockdep_assert_held(&conn->lock);

	if (conn->state == KRDMA_CS_CONNECTING)
		krdma_conn_set_state(conn, KRDMA_CS_FAILED, error);
	else if (conn->state == KRDMA_CS_CONNECTED)
		krdma_conn_set_state(conn, KRDMA_CS_BROKEN, error);
}

/*
 * Move to CLOSING: from here the CM handler leaves the connection alone
 * and no new operation is taken. A poster that saw the connection live
 * under post_mutex may still be posting: krdma_conn_quiesce() waits for
 * it. post_mutex is not taken here: a poster may hold it for as long as
 * the device takes to accept a batch, and conn->lock must not wait for
 * that (the CM handler takes it on a work queue shared by every
 * connection of the machine).
 */
static void krdma_conn_stop(struct krdma_conn *conn, int error)
{
	lockdep_assert_held(&conn->lock);

	spin_lock_bh(&conn->sq_lock);
	krdma_conn_set_state(conn, KRDMA_CS_CLOSING, error);
	spin_unlock_bh(&conn->sq_lock);
}

/* Kicks queued and not run yet: the module waits for them to go */
static atomic_t krdma_kicks = ATOMIC_INIT(0);

static void krdma_conn_kick_done(struct callback_head *cb)
{
	krdma_conn_put(container_of(cb, struct krdma_conn, cm_kick));
	if (atomic_dec_and_test(&krdma_kicks))
		wake_up_var(&krdma_kicks);
}

/**
 * krdma_conn_kicks_wait - wait until every kick queued has run
 *
 * A kick (krdma_conn_kick_caller()) runs when its task returns to user
 * mode, right after the call it kicked; it runs krdma's code and holds a
 * connection. Module exit waits for them, after the devices are gone.
 *
 * Context: process context; sleeps.
 */
void krdma_conn_kicks_wait(void)
{
	wait_var_event(&krdma_kicks, !atomic_read(&krdma_kicks));
}

/*
 * End the driver's connect of a call in krdma_conn_connect_in_call() as a
 * signal would: a task work queued with TWA_SIGNAL makes signal_pending()
 * true for the caller, and siw's blocking TCP connect returns (its
 * SYN retries are the caller's network namespace's, which an unprivileged
 * user namespace may raise to hours). The work itself only drops the
 * reference it holds, when the caller returns to user mode. Return: true
 * when the caller was not kicked after all (it is exiting: its fatal
 * signal does it), and the reference taken must be dropped.
 */
static bool krdma_conn_kick_caller(struct krdma_conn *conn)
{
	struct task_struct *task;

	lockdep_assert_held(&conn->lock);

	task = conn->cm_caller;
	if (!task)
		return false;
	/* Once: @cm_kick is queued at most once */
	conn->cm_caller = NULL;
	krdma_conn_get(conn);
	atomic_inc(&krdma_kicks);
	init_task_work(&conn->cm_kick, krdma_conn_kick_done);
	if (!task_work_add(task, &conn->cm_kick, TWA_SIGNAL))
		return false;
	atomic_dec(&krdma_kicks);
	return true;
}

/*
 * After krdma_conn_stop(), without conn->lock: wait for the poster that
 * saw the connection live, if any; after this nothing is posted.
 */
static void krdma_conn_quiesce(struct krdma_conn *conn)
{
	bool put;

	lockdep_assert_not_held(&conn->lock);

	mutex_lock(&conn->post_mutex);
	mutex_unlock(&conn->post_mutex);
	/*
	 * And for krdma_accept_finish() or an iWARP krdma_connect(), if it
	 * is between its sections under conn->lock: it uses the cm_id,
	 * which the teardown destroys. Only a device removal can be here
	 * meanwhile (the caller tears its connection down after the call),
	 * and it kicks the caller out of the driver: then it waits for
	 * nothing but the id's handler mutex and one rdma_accept() or
	 * rdma_connect() that a signal ends. A kernel thread's connect (a
	 * session's) is not kicked: siw's connect ends at init_net's last
	 * SYN retry (tcp_syn_retries: about 2 min).
	 */
	mutex_lock(&conn->lock);
	put = krdma_conn_kick_caller(conn);
	mutex_unlock(&conn->lock);
	if (put)
		krdma_conn_put(conn);
	wait_event(conn->wait, !READ_ONCE(conn->cm_in_call));
}

/*
 * Free the CQ of a connection whose QP is destroyed. ib_free_cq() frees
 * an IB_POLL_SOFTIRQ CQ once irq_poll_disable() finds the poll handler
 * idle, but ib_poll_handler() marks itself idle (irq_poll_complete())
 * before it rearms the CQ through cq->device: on a vCPU preempted right
 * there, the CQ is freed under it (seen as a general protection fault in
 * ib_poll_handler() on 6.12's rxe, make check under load). So keep the
 * handler off first, let the run that went idle finish (softirqs are RCU
 * readers), and only then hand the CQ to ib_free_cq(). The QP is gone:
 * nothing schedules the handler again in between. Expedited: a normal
 * grace period made each teardown 20 times slower (25 ms, TCG guest).
 */
static void krdma_free_cq(struct ib_cq *cq)
{
	if (cq->poll_ctx == IB_POLL_SOFTIRQ) {
		irq_poll_disable(&cq->iop);
		synchronize_rcu_expedited();
		irq_poll_enable(&cq->iop);
	}
	ib_free_cq(cq);
}

/**
 * krdma_conn_teardown - release everything a connection holds on the device
 * @conn: the connection
 * @error: 0 for a close by the owner, else why (-ENODEV on device removal)
 *
 * Disconnects, stops posting, drains the QP so that every posted operation
 * has completed, completes the operations never posted with a flush
 * status, revokes the grants, and destroys the QP, CQ, PD and cm_id. The
 * connection stays valid (in state ERROR or CLOSED) until its last put.
 * Idempotent. Every wait in it is bounded: the drain (5 s per queue), the
 * reaper (0.5 s), registrations in flight (10 s); operations the device
 * did not complete are completed, and their pages released, only after
 * the QP is destroyed.
 *
 * Context: process context, not from the connection's own CM handler.
 */
void krdma_conn_teardown(struct krdma_conn *conn, int error)
{
	struct krdma_device *kdev;
	struct rdma_cm_id *id;
	bool owned;

	mutex_lock(&conn->lock);
	if (krdma_conn_stopped(conn)) {
		mutex_unlock(&conn->lock);
		/* Whoever tears it down may still be at it, or telling the owner */
		wait_for_completion(&conn->torn_down_done);
		return;
	}
	/* No new operation after this; the posts before it are drained below */
	krdma_conn_stop(conn, error);
	/* A request's timer: its reference, unless it runs (it finds CLOSING) */
	if (cancel_delayed_work(&conn->request_work))
		krdma_conn_put(conn);
	/*
	 * From here the CM handler leaves the connection alone, and
	 * conn->lock is not held across rdma_cm and verbs calls: on iWARP,
	 * rdma_disconnect() and the QP's destruction wait for iw_cm's work
	 * queue, whose handler may be waiting for conn->lock.
	 */
	mutex_unlock(&conn->lock);
	krdma_conn_quiesce(conn);

	/* Bounded: a QP that cannot drain is taken over by the reaper */
	if (conn->qp) {
		rdma_disconnect(conn->cm_id);
		krdma_conn_drain(conn);
	}
	cancel_work_sync(&conn->post_work);
	krdma_xfer_flush_pending(conn);
	/*
	 * After the flush: a poster queues push_work after its operation is
	 * on pending, without post_mutex, so it may do so at any time up to
	 * here. An instance that took an operation before the flush has
	 * finished (its done returned) once this returns, and one queued
	 * after it finds pending empty: nothing is accepted any more.
	 */
	krdma_push_cancel(conn);

	/*
	 * Registrations in flight end here: the drain flushed their REG_MR,
	 * or they give up within their timeout. Then nothing uses the PD.
	 */
	down_write(&conn->reg_sem);
	if (conn->qp)
		krdma_xfer_reap(conn);
	if (conn->qp) {
		rdma_destroy_qp(conn->cm_id);
		conn->qp = NULL;
	}
	if (conn->cq) {
		krdma_free_cq(conn->cq);
		conn->cq = NULL;
	}
	krdma_xfer_flush_local_wrs(conn);
	/* The device is done with the QP: what it may have held can go */
	krdma_conn_revoke_grants(conn);
	krdma_conn_bury_windows(conn);
	if (conn->pd) {
		ib_dealloc_pd(conn->pd);
		conn->pd = NULL;
	}
	up_write(&conn->reg_sem);
	krdma_xfer_free_zombies(conn);
	kdev = conn->kdev;
	if (kdev) {
		mutex_lock(&kdev->conns_lock);
		list_del_init(&conn->dev_entry);
		mutex_unlock(&kdev->conns_lock);
	}
	mutex_lock(&conn->lock);
	id = conn->cm_id;
	conn->cm_id = NULL;
	krdma_conn_set_state(conn, KRDMA_CS_CLOSED, 0);
	/* Torn down before anyone claimed it: nobody else will close it */
	krdma_conn_close_unclaimed(conn);
	mutex_unlock(&conn->lock);

	/* Outside conn->lock: a running handler may be waiting for it */
	if (id)
		rdma_destroy_id(id);

	/*
	 * A failure, not a close, of a connection someone owns (it was
	 * established to be handed out): tell its owner (kernel consumers).
	 */
	owned = READ_ONCE(conn->claim) == KRDMA_CLAIM_OWNER;
	if (error && owned && conn->params.event)
		conn->params.event(conn, error, conn->params.context);
	complete_all(&conn->torn_down_done);
	/*
	 * Last: a device removal waits for this reference (kdev->released),
	 * so for every teardown of its connections, the owner told, also
	 * one a work item does after the removal stopped looking at the
	 * device's list
	 */
	krdma_device_put(kdev);
}

/**
 * krdma_conn_close - the owner is done with a connection
 * @conn: the connection; the owner's reference is dropped
 *
 * Context: process context; sleeps until the QP is drained.
 */
void krdma_conn_close(struct krdma_conn *conn)
{
	krdma_conn_teardown(conn, 0);
	krdma_conn_put(conn);
}
EXPORT_SYMBOL_NS_GPL(krdma_conn_close, KRDMA);

/*
 * Claim a passive connection for whoever calls this: true if nobody had.
 * Its claimant closes it or hands it out, and then takes it off the
 * listener's count (krdma_listener_unqueue()).
 */
static bool krdma_conn_claim(struct krdma_conn *conn)
{
	lockdep_assert_held(&conn->listener->lock);

	if (conn->claim != KRDMA_CLAIM_LISTENER &&
	    conn->claim != KRDMA_CLAIM_DOOMED)
		return false;
	WRITE_ONCE(conn->claim, KRDMA_CLAIM_TAKEN);
	return true;
}

/*
 * Close a passive connection that failed, or that its listener no longer
 * wants, before anyone claimed it. Whoever moves conn->claim from
 * LISTENER or DOOMED to TAKEN under the listener's lock owns the
 * connection: krdma_accept(), the listener's close, or this work.
 */
static void krdma_conn_close_work(struct work_struct *work)
{
	struct krdma_conn *conn = container_of(work, struct krdma_conn,
					       close_work);
	struct krdma_listener *l = conn->listener;
	bool mine;

	spin_lock(&l->lock);
	mine = krdma_conn_claim(conn);
	if (mine)
		list_del_init(&conn->listen_entry);
	spin_unlock(&l->lock);

	if (mine) {
		krdma_conn_teardown(conn, -ECONNABORTED);
		/* Before the puts: the connection's reference keeps @l */
		krdma_listener_unqueue(l);
		krdma_conn_put(conn);
	}
	krdma_conn_put(conn);	/* the work's reference */
}

/*
 * A passive connection nobody claimed: have close_work claim and close it.
 * Return: true if it is left to close_work (now or before), false if it
 * has an owner (or is active) who will close it.
 */
static bool krdma_conn_close_unclaimed(struct krdma_conn *conn)
{
	struct krdma_listener *l = conn->listener;
	enum krdma_conn_claim claim;

	lockdep_assert_held(&conn->lock);

	if (!l)
		return false;
	spin_lock(&l->lock);
	claim = conn->claim;
	if (claim == KRDMA_CLAIM_LISTENER)
		WRITE_ONCE(conn->claim, KRDMA_CLAIM_DOOMED);
	spin_unlock(&l->lock);
	if (claim == KRDMA_CLAIM_LISTENER) {
		krdma_conn_get(conn);
		queue_work(krdma_wq, &conn->close_work);
	}
	return claim == KRDMA_CLAIM_LISTENER || claim == KRDMA_CLAIM_DOOMED;
}

/* How long a request of a listener that defers the accept may wait */
#define KRDMA_REQUEST_TIMEOUT_MS	30000

/*
 * A request nobody took in time: refuse it. Its peer has most likely
 * given up (a krdma CONNECT after 10 s by default, siw after 10 s) and
 * may have said nothing (siw does not report a peer that closes a request
 * not accepted yet; an IB peer that crashed after the MRA sends no REJ):
 * without this it would hold a QP and a backlog slot until an ACCEPT
 * found it dead.
 */
static void krdma_conn_request_expired(struct work_struct *work)
{
	struct krdma_conn *conn = container_of(to_delayed_work(work),
					       struct krdma_conn, request_work);
	struct krdma_listener *l = conn->listener;
	bool unclaimed;

	mutex_lock(&conn->lock);
	spin_lock(&l->lock);
	unclaimed = conn->claim == KRDMA_CLAIM_LISTENER;
	spin_unlock(&l->lock);
	if (unclaimed && conn->state == KRDMA_CS_CONNECTING) {
		pr_debug("conn %p: request not accepted in %u ms: refused\n",
			 conn, KRDMA_REQUEST_TIMEOUT_MS);
		krdma_conn_fail(conn, -ETIMEDOUT);
		/* Claimed since? Then its taker finds it failed */
		krdma_conn_close_unclaimed(conn);
	}
	mutex_unlock(&conn->lock);
	krdma_conn_put(conn);
}

/**
 * krdma_conn_info - describe a connection
 * @conn: the connection
 * @info: filled in
 *
 * Context: process context; sleeps (takes the connection's mutex).
 */
void krdma_conn_info(struct krdma_conn *conn, struct krdma_conn_info *info)
{
	mutex_lock(&conn->lock);
	info->state = krdma_conn_public_state(conn);
	info->error = info->state == KRDMA_CONN_ERROR ? conn->error : 0;
	info->local = conn->local;
	info->peer = conn->peer;
	info->dev_index = conn->dev_index;
	info->port_num = conn->port_num;
	info->transport = conn->transport;
	info->initiator_depth = conn->initiator_depth;
	info->max_grant_pages = conn->max_grant_pages;
	info->max_send_sge = conn->max_send_sge;
	info->max_recv_sge = conn->max_recv_sge;
	mutex_unlock(&conn->lock);
}
EXPORT_SYMBOL_NS_GPL(krdma_conn_info, KRDMA);

/**
 * krdma_disconnect - disconnect, keep the connection for queries
 * @conn: the connection
 *
 * Operations in flight complete with an error status.
 *
 * Context: process context; sleeps.
 */
void krdma_disconnect(struct krdma_conn *conn)
{
	krdma_conn_teardown(conn, 0);
}
EXPORT_SYMBOL_NS_GPL(krdma_disconnect, KRDMA);

static int krdma_cm_status_errno(struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		/* A krdma listener says why; anyone else: refused */
		return krdma_rej_errno(krdma_rej_reason(ev));
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_ADDR_ERROR:
		return ev->status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return -ENETUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return ev->status == -ECONNREFUSED ? -ECONNREFUSED :
		       -ECONNRESET;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -ECONNRESET;
	}
}

/*
 * Let the owner post the RECVs for the peer's first messages on the new
 * QP, before the connection can carry any (krdma_conn_params.prepare).
 * Called in the CM handler, under conn->lock: the RECVs take post_mutex,
 * the one place it is taken under conn->lock. Nobody else can hold it
 * yet: the connection has not been returned to anyone, and a teardown
 * takes it only after conn->lock.
 */
static int krdma_conn_prepare_with(struct krdma_conn *conn,
				   int (*prepare)(struct krdma_conn *conn,
						  void *context),
				   void *context)
{
	int ret;

	lockdep_assert_held(&conn->lock);

	if (!prepare)
		return 0;
	WRITE_ONCE(conn->preparing, true);
	ret = prepare(conn, context);
	WRITE_ONCE(conn->preparing, false);
	if (ret > 0)
		ret = -EINVAL;	/* not an errno: refuse all the same */
	if (ret)
		pr_debug("conn %p: refused by its prepare callback: %d\n",
			 conn, ret);
	return ret;
}

static int krdma_conn_prepare(struct krdma_conn *conn)
{
	return krdma_conn_prepare_with(conn, conn->params.prepare,
				       conn->params.context);
}

/*
 * iWARP shares its port space with TCP, which rdma_cm does not consult:
 * the source port it gave the id may be one that a TCP socket of the
 * machine holds (a listener, a socket without SO_REUSEADDR, or the
 * TIME_WAIT of one), and then the driver's own TCP socket (siw's) cannot
 * bind it: rdma_connect_locked() fails with -EADDRINUSE, after the RECVs
 * of krdma_conn_params.prepare went on the QP, to be flushed. So bind a
 * TCP socket to the port first, with SO_REUSEADDR as siw's own, as iwpmd
 * does for hardware iWARP: if that fails, this attempt fails before
 * anything is posted (krdma_connect() takes another port); if it
 * succeeds, it keeps sockets without SO_REUSEADDR off the port until the
 * driver has bound its own, within rdma_connect_locked().
 */
static int krdma_conn_hold_port(struct krdma_conn *conn,
				struct socket **hold)
{
	struct rdma_addr *addr = &conn->cm_id->route.addr;
	struct sockaddr *src = (struct sockaddr *)&addr->src_addr;
	struct socket *sock;
	int ret;

	lockdep_assert_held(&conn->lock);

	*hold = NULL;
	if (!rdma_protocol_iwarp(conn->cm_id->device, conn->cm_id->port_num) ||
	    (src->sa_family != AF_INET && src->sa_family != AF_INET6))
		return 0;
	ret = sock_create_kern(addr->dev_addr.net, src->sa_family, SOCK_STREAM,
			       IPPROTO_TCP, &sock);
	if (ret)
		return ret;
	sock_set_reuseaddr(sock->sk);
	ret = kernel_bind(sock, src, src->sa_family == AF_INET ?
			  sizeof(struct sockaddr_in) :
			  sizeof(struct sockaddr_in6));
	if (ret) {
		pr_debug("conn %p: source port %pISp is taken: %d\n", conn, src,
			 ret);
		sock_release(sock);
		return ret;
	}
	*hold = sock;
	return 0;
}

/*
 * What goes before rdma_connect(): the source port held (iWARP), the QP,
 * the caller's prepare, the connect's parameters into @param (with @hdr
 * as its private data). On failure nothing is held; on success the
 * caller releases *@port_hold, if set, once rdma_connect() returned.
 */
static int krdma_conn_connect_prepare(struct krdma_conn *conn,
				      struct rdma_conn_param *param,
				      struct krdma_cm_hdr *hdr,
				      struct socket **port_hold)
{
	struct ib_device_attr *attrs = &conn->cm_id->device->attrs;
	int ret;

	lockdep_assert_held(&conn->lock);

	ret = krdma_conn_hold_port(conn, port_hold);
	if (ret)
		return ret;
	ret = krdma_conn_create_qp(conn);
	if (ret)
		goto err_release_port;
	/* On failure the teardown flushes what it posted, with the QP */
	ret = krdma_conn_prepare(conn);
	/* Called once: what it uses may be gone once krdma_connect() returns */
	conn->params.prepare = NULL;
	if (ret)
		goto err_release_port;
	krdma_fill_hdr(conn, hdr);
	memset(param, 0, sizeof(*param));
	param->private_data = hdr;
	param->private_data_len = sizeof(*hdr);
	param->responder_resources = min_t(u32, attrs->max_qp_rd_atom, 255);
	param->initiator_depth = min_t(u32, attrs->max_qp_init_rd_atom, 255);
	/* Until the accept says otherwise (iWARP does not say) */
	conn->initiator_depth = param->initiator_depth;
	conn->responder_resources = param->responder_resources;
	param->flow_control = 1;
	/* Not 7: rxe takes 7 as "without limit" (only RNR retries are) */
	param->retry_count = 6;
	param->rnr_retry_count = 7;
	return 0;

err_release_port:
	if (*port_hold)
		sock_release(*port_hold);
	*port_hold = NULL;
	return ret;
}

/* RoCE and IB: the connect, from the CM handler (it sends a REQ) */
static int krdma_conn_connect_locked(struct krdma_conn *conn)
{
	struct rdma_conn_param param;
	struct socket *port_hold;
	struct krdma_cm_hdr hdr;
	int ret;

	ret = krdma_conn_connect_prepare(conn, &param, &hdr, &port_hold);
	if (ret)
		return ret;
	ret = rdma_connect_locked(conn->cm_id, &param);
	if (port_hold)
		sock_release(port_hold);
	return ret;
}

/*
 * A call outside the CM handler that uses the cm_id of a connection still
 * CONNECTING: an iWARP connect, a deferred accept. rdma_cm wants the id's
 * handler mutex held; the handler holds it when it takes conn->lock, so
 * that mutex comes first, and conn->cm_in_call keeps the teardown off the
 * id (krdma_conn_quiesce()) while conn->lock is not held.
 *
 * krdma_conn_cm_call_begin() returns the id, with its handler mutex and
 * conn->lock held, if the connection is CONNECTING; else NULL, holding
 * nothing. The state may have changed while conn->lock was not held: the
 * caller looks again. It drops both locks, then krdma_conn_cm_call_end().
 * @kickable: the call goes into a driver call that may block (siw's
 * connect): a teardown may kick the calling task out of it
 * (krdma_conn_kick_caller()), unless it is a kernel thread. A deferred
 * accept is not: siw's accept does not block, and a kick would only
 * interrupt the caller's later waits.
 */
static struct rdma_cm_id *krdma_conn_cm_call_begin(struct krdma_conn *conn,
						   bool kickable)
{
	struct rdma_cm_id *id;

	mutex_lock(&conn->lock);
	if (conn->state != KRDMA_CS_CONNECTING) {
		mutex_unlock(&conn->lock);
		return NULL;
	}
	id = conn->cm_id;
	WRITE_ONCE(conn->cm_in_call, true);
	conn->cm_caller = kickable && !(current->flags & PF_KTHREAD) ?
			  current : NULL;
	mutex_unlock(&conn->lock);

	rdma_lock_handler(id);
	mutex_lock(&conn->lock);
	return id;
}

static void krdma_conn_cm_call_end(struct krdma_conn *conn)
{
	mutex_lock(&conn->lock);
	WRITE_ONCE(conn->cm_in_call, false);
	conn->cm_caller = NULL;
	wake_up_all(&conn->wait);
	mutex_unlock(&conn->lock);
}

/*
 * Whether current makes its sockets in @net: an iWARP driver makes its
 * TCP sockets (siw: connect and listen) in current's namespace, whatever
 * rdma_cm resolved in. A task past exit_task_namespaces() is in none.
 */
static bool krdma_net_is_current(struct net *net)
{
	struct nsproxy *nsp = current->nsproxy;

	return nsp && net_eq(nsp->net_ns, net);
}

/*
 * iWARP: the connect of krdma_connect(), in the caller's context once the
 * route is resolved. siw's connect is a blocking TCP connect(), until the
 * peer answers or the last SYN retry (about 2 min): from the CM handler it
 * held up rdma_cm's one ordered work queue, and with it every rdma_cm
 * user of the machine (any caller could point a CONNECT at a port that
 * drops SYNs). Here it holds up only its caller, whose signal ends it, as
 * for a librdmacm program's rdma_connect(). siw makes its socket in the
 * caller's network namespace, while rdma_cm resolved the address and the
 * route in @net: a caller in another namespace would have the stream
 * routed, bound and held up (its SYN retries are that namespace's sysctl)
 * where nothing of the connection lives, so it is refused (-EXDEV). The
 * id's handler mutex is held across it, as rdma_connect() does: no event
 * of the id comes before it returns. conn->lock is not: @cm_in_call keeps
 * a teardown (a device removal) off the id until it returns.
 */
static void krdma_conn_connect_in_call(struct krdma_conn *conn,
				       struct net *net)
{
	struct socket *port_hold = NULL;
	struct rdma_conn_param param;
	struct krdma_cm_hdr hdr;
	struct rdma_cm_id *id;
	bool connecting;
	int ret = 0;

	id = krdma_conn_cm_call_begin(conn, true);
	if (!id)
		return;
	connecting = conn->state == KRDMA_CS_CONNECTING;
	if (connecting && !krdma_net_is_current(net))
		ret = -EXDEV;
	else if (connecting)
		ret = krdma_conn_connect_prepare(conn, &param, &hdr,
						 &port_hold);
	mutex_unlock(&conn->lock);
	if (connecting && !ret)
		ret = rdma_connect_locked(id, &param);
	if (port_hold)
		sock_release(port_hold);
	rdma_unlock_handler(id);

	mutex_lock(&conn->lock);
	/* Out of the driver: a removal from here on has nothing to end */
	conn->cm_caller = NULL;
	if (ret) {
		/* A signal ended siw's connect: not a restart, it fails */
		if (ret == -ERESTARTSYS)
			ret = -EINTR;
		krdma_conn_fail(conn, ret);
	}
	mutex_unlock(&conn->lock);
	krdma_conn_cm_call_end(conn);
}

/* Events of a connection (both sides) */
static int krdma_conn_event(struct krdma_conn *conn, struct rdma_cm_id *id,
			    struct rdma_cm_event *ev)
{
	bool passive = krdma_conn_passive(conn);
	bool close_it = false;
	int ret;

	mutex_lock(&conn->lock);
	if (krdma_conn_stopped(conn)) {
		mutex_unlock(&conn->lock);
		return 0;
	}

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, KRDMA_RESOLVE_MS);
		if (ret)
			krdma_conn_fail(conn, ret);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		/* iWARP: the caller connects (krdma_conn_connect_in_call()) */
		if (rdma_protocol_iwarp(id->device, id->port_num)) {
			WRITE_ONCE(conn->route_resolved, true);
			wake_up_all(&conn->wait);
			break;
		}
		ret = krdma_conn_connect_locked(conn);
		if (ret)
			krdma_conn_fail(conn, ret);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* Only a connection still connecting can be established */
		if (conn->state != KRDMA_CS_CONNECTING)
			break;
		ret = passive ? 0 :
		      krdma_parse_hdr(conn, ev->param.conn.private_data,
				      ev->param.conn.private_data_len);
		if (ret) {
			krdma_conn_fail(conn, krdma_rej_errno(ret));
			rdma_disconnect(id);
			break;
		}
		/* What the accept granted (rdma_cm gives it our way round) */
		if (!passive && !rdma_protocol_iwarp(id->device,
						     id->port_num)) {
			conn->peer_qp_num = ev->param.conn.qp_num;
			conn->initiator_depth = ev->param.conn.initiator_depth;
			conn->responder_resources =
				ev->param.conn.responder_resources;
		}
		krdma_conn_save_addrs(conn);
		krdma_conn_set_state(conn, KRDMA_CS_CONNECTED, 0);
		/* Accepted in a call: that call has it, and hands it out */
		close_it = passive && !conn->accept_in_call &&
			   !krdma_listener_enqueue(conn->listener, conn);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		/*
		 * Failed first, then the QP to error: whoever sees a flushed
		 * operation finds the connection failed, with its reason
		 */
		krdma_conn_fail(conn, krdma_cm_status_errno(ev));
		rdma_disconnect(id);
		/* Nobody claimed it: close_work closes it, else its owner */
		if (!krdma_conn_close_unclaimed(conn))
			krdma_conn_qp_failed(conn, krdma_cm_status_errno(ev));
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		pr_debug("conn %p: %s (status %d)\n", conn,
			 rdma_event_msg(ev->event), ev->status);
		krdma_conn_fail(conn, krdma_cm_status_errno(ev));
		close_it = true;
		break;
	default:
		break;
	}
	/* A connection being accepted that failed: nobody else will close it */
	if (close_it)
		krdma_conn_close_unclaimed(conn);
	mutex_unlock(&conn->lock);
	return 0;
}

/*
 * Drop a connection that never got a cm_id of its own (or whose cm_id
 * rdma_cm destroys): there is nothing to tear down.
 */
static void krdma_conn_discard(struct krdma_conn *conn)
{
	mutex_lock(&conn->lock);
	if (!krdma_conn_stopped(conn))
		krdma_conn_stop(conn, -ECONNABORTED);
	/* A device removal may have torn it down since its QP failed */
	if (conn->state != KRDMA_CS_CLOSED)
		krdma_conn_set_state(conn, KRDMA_CS_CLOSED, 0);
	mutex_unlock(&conn->lock);
	/* ... or be about to, and wait for this: nothing is left to do */
	complete_all(&conn->torn_down_done);
	krdma_conn_put(conn);
}

static bool krdma_conn_settled(struct krdma_conn *conn)
{
	return READ_ONCE(conn->state) != KRDMA_CS_CONNECTING;
}

/* The port of an AF_INET or AF_INET6 address, network order */
static __be16 krdma_sockaddr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return ((const struct sockaddr_in *)sa)->sin_port;
}

/*
 * One attempt of krdma_connect() on @conn: resolve, connect, wait until
 * it settles. Return: 0 when connected, else the errno; the caller tears
 * @conn down either way on failure.
 */
static int krdma_connect_attempt(struct krdma_conn *conn, struct net *net,
				 struct sockaddr *dst, struct sockaddr *src,
				 long timeout)
{
	unsigned long deadline;
	struct rdma_cm_id *id;
	long left;
	int ret;

	id = rdma_create_id(net, krdma_cm_handler, conn, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);

	mutex_lock(&conn->lock);
	conn->cm_id = id;
	rdma_set_ack_timeout(id, min_t(unsigned int, ack_timeout, 31));
	ret = rdma_resolve_addr(id, src, dst, KRDMA_RESOLVE_MS);
	mutex_unlock(&conn->lock);
	if (ret)
		return ret;

	deadline = jiffies + timeout;
	left = wait_event_interruptible_timeout(conn->wait,
						krdma_conn_settled(conn) ||
						READ_ONCE(conn->route_resolved),
						timeout);
	if (left > 0 && !krdma_conn_settled(conn)) {
		/* iWARP: the route is resolved, and this call connects */
		krdma_conn_connect_in_call(conn, net);
		left = time_before(jiffies, deadline) ?
		       wait_event_interruptible_timeout(conn->wait,
							krdma_conn_settled(conn),
							deadline - jiffies) :
		       0;
	}
	mutex_lock(&conn->lock);
	if (conn->state == KRDMA_CS_CONNECTING)
		ret = left < 0 ? -EINTR : -ETIMEDOUT;
	else if (conn->state == KRDMA_CS_CONNECTED)
		ret = 0;
	else
		/* Failed after ESTABLISHED: whatever the QP said, a reset */
		ret = conn->connect_error ?: -ECONNRESET;
	mutex_unlock(&conn->lock);
	return ret;
}

static void krdma_connect_discard(struct krdma_conn *conn, int error)
{
	if (conn->cm_id) {
		krdma_conn_teardown(conn, error);
		krdma_conn_put(conn);
	} else {
		krdma_conn_discard(conn);
	}
}

/**
 * krdma_connect - connect to a listener
 * @net: network namespace to resolve and connect in
 * @dst: the listener's address and port
 * @src: local address, or NULL
 * @timeout: jiffies for the whole connect
 * @params: queue depths, or NULL for the defaults
 *
 * Context: process context; sleeps until connected, failed, timed out or
 * interrupted by a signal. On iWARP the driver's TCP connect runs in this
 * context, in current's network namespace, which must be @net (else
 * -EXDEV), and @timeout does not cut it short (siw: until the peer
 * answers or the last SYN retry); a signal does (-EINTR), and so does
 * the device's removal (-ENODEV), which ends it as a signal would: unless
 * the caller is a kernel thread, signal_pending() then stays true for it
 * until it returns to user mode.
 * Return: the connected connection (the caller owns a reference; end it
 * with krdma_conn_close()), or ERR_PTR(): -ECONNREFUSED (nobody listens,
 * the listener is closing, or a peer that is not krdma refused),
 * -EHOSTUNREACH, -ENETUNREACH, -ETIMEDOUT, -EINTR, -ENODEV, -ENOMEM, ...;
 * from a krdma listener's reject: -EBUSY (its backlog is full), -ENOBUFS
 * (it had no resources for the connection), -EPROTONOSUPPORT (it speaks
 * another handshake version); -EPROTO (KRDMA_CONN_KRDMA_PEER, and the
 * peer is not krdma); -ECONNRESET also when the connection was established
 * but failed before it could be returned (the peer closed it at once, or
 * its QP failed); -EADDRINUSE on iWARP when @src names a port that a
 * socket of the machine holds, or when every one of
 * KRDMA_CONNECT_PORT_TRIES source ports rdma_cm picked was (each attempt
 * takes another); -EXDEV on iWARP when current is not in @net (a kernel
 * thread is in &init_net).
 */
struct krdma_conn *krdma_connect(struct net *net, struct sockaddr *dst,
				 struct sockaddr *src, long timeout,
				 const struct krdma_conn_params *params)
{
	struct krdma_conn *taken[KRDMA_CONNECT_PORT_TRIES - 1];
	unsigned long deadline = jiffies + timeout;
	unsigned int ntaken = 0, i;
	struct krdma_conn *conn;
	int ret;

	for (;;) {
		conn = krdma_conn_alloc(params);
		if (!conn) {
			ret = -ENOMEM;
			break;
		}
		ret = krdma_connect_attempt(conn, net, dst, src,
					    max_t(long, deadline - jiffies, 1));
		/*
		 * iWARP: rdma_cm gave the id a source port free among its own
		 * ids, and TCP could not have it (krdma_conn_hold_port()).
		 * Another id, another port, as krdma_listen() does; this one
		 * keeps its port until the end, so that rdma_cm does not pick
		 * it again. Not for a port the caller chose, nor past the
		 * deadline, nor once the attempt ran the caller's prepare
		 * (it clears conn->params.prepare): then the driver's bind
		 * lost a race after the hold, and the RECVs prepare posted
		 * go with this QP; the call fails rather than return a
		 * connection without them.
		 */
		if (ret != -EADDRINUSE || (src && krdma_sockaddr_port(src)) ||
		    (params && params->prepare && !conn->params.prepare) ||
		    ntaken == ARRAY_SIZE(taken) ||
		    time_after_eq(jiffies, deadline))
			break;
		taken[ntaken++] = conn;
	}
	for (i = 0; i < ntaken; i++)
		krdma_connect_discard(taken[i], -EADDRINUSE);
	if (ret) {
		if (conn)
			krdma_connect_discard(conn, ret);
		return ERR_PTR(ret);
	}
	krdma_conn_set_owner(conn, _RET_IP_, NULL);
	WRITE_ONCE(conn->claim, KRDMA_CLAIM_OWNER);
	return conn;
}
EXPORT_SYMBOL_NS_GPL(krdma_connect, KRDMA);

/*
 * Listeners
 */

static void krdma_listener_release(struct kref *ref)
{
	struct krdma_listener *l = container_of(ref, struct krdma_listener, ref);

	WARN_ON(l->cm_id);
	put_net(l->net);
	kfree(l);
}

/**
 * krdma_listener_put - drop a reference to a listener
 * @l: the listener, or NULL
 */
void krdma_listener_put(struct krdma_listener *l)
{
	if (l)
		kref_put(&l->ref, krdma_listener_release);
}

/*
 * An established connection moves from the pending list to the accept
 * queue; false if the listener refuses it (closed): it stays pending, for
 * close_work or the listener's close.
 */
bool krdma_listener_enqueue(struct krdma_listener *l, struct krdma_conn *conn)
{
	bool ok;

	spin_lock(&l->lock);
	ok = !l->closed;
	if (ok) {
		list_move_tail(&conn->listen_entry, &l->queue);
		wake_up_all(&l->wait);
	}
	spin_unlock(&l->lock);
	return ok;
}

/*
 * A connection of @l that was claimed is handed out or torn down: it no
 * longer counts against the backlog, and the listener's close no longer
 * waits for it.
 */
static void krdma_listener_unqueue(struct krdma_listener *l)
{
	spin_lock(&l->lock);
	l->queued--;
	wake_up_all(&l->wait);
	spin_unlock(&l->lock);
}

/*
 * Refuse a connect request of @l, and tell a krdma peer why. The owner
 * learns of it through the listener's counters (LISTEN_QUERY), unless the
 * listener is closing: its handle is gone by then. From the CM handler or
 * an accepting call, with conn->lock held or none; takes l->lock.
 */
static void krdma_listener_reject(struct krdma_listener *l,
				  struct rdma_cm_id *id, int reason)
{
	struct krdma_cm_rej rej = {
		.magic = cpu_to_le32(KRDMA_CM_MAGIC),
		.version = KRDMA_CM_VERSION,
		.reason = reason,
	};

	lockdep_assert_not_held(&l->lock);
	pr_debug("rejecting a connect request: reason %d\n", reason);
	if (reason != KRDMA_REJ_CLOSING && reason > 0 &&
	    reason < KRDMA_REJ_NR) {
		spin_lock(&l->lock);
		l->refused[reason]++;
		l->last_refused_reason = reason;
		memcpy(&l->last_refused_peer, &id->route.addr.dst_addr,
		       sizeof(l->last_refused_peer));
		spin_unlock(&l->lock);
	}
	rdma_reject(id, &rej, sizeof(rej), IB_CM_REJ_CONSUMER_DEFINED);
}

/* A connect request on a listener: accept it in the kernel at once */
static int krdma_listener_request(struct krdma_listener *l,
				  struct rdma_cm_id *id,
				  struct rdma_cm_event *ev)
{
	struct ib_device_attr *attrs = &id->device->attrs;
	struct rdma_conn_param param = {};
	struct krdma_cm_hdr hdr;
	struct krdma_conn *conn;
	int reason = KRDMA_REJ_NO_RESOURCES;
	int ret;

	spin_lock(&l->lock);
	if (l->closed || l->queued >= l->backlog) {
		reason = l->closed ? KRDMA_REJ_CLOSING : KRDMA_REJ_BACKLOG;
		spin_unlock(&l->lock);
		ret = -ECONNREFUSED;
		goto err_reject;
	}
	l->queued++;
	kref_get(&l->ref);
	spin_unlock(&l->lock);

	conn = krdma_conn_alloc(&l->params);
	if (!conn) {
		ret = -ENOMEM;
		goto err_unqueue;
	}
	mutex_lock(&conn->lock);
	conn->cm_id = id;
	conn->listener = l;
	/* TAKEN (as allocated) until it is on a list: this handler's own */
	conn->peer_qp_num = ev->param.conn.qp_num;
	ret = krdma_parse_hdr(conn, ev->param.conn.private_data,
			      ev->param.conn.private_data_len);
	if (ret) {
		reason = ret;
		ret = krdma_rej_errno(reason);
		goto err_free_conn;
	}
	ret = krdma_conn_create_qp(conn);
	if (ret)
		goto err_free_conn;
	/*
	 * From here it is the listener's, torn down by close_work or the
	 * listener's close. Before, a device removal that tears it down
	 * (it is on the device's list since its QP) must not doom it: this
	 * handler discards it on failure.
	 */
	conn->accept_in_call = l->defer;
	spin_lock(&l->lock);
	WRITE_ONCE(conn->claim, KRDMA_CLAIM_LISTENER);
	list_add_tail(&conn->listen_entry, &l->pending);
	spin_unlock(&l->lock);

	/* What the accept grants, now or in krdma_accept_finish() */
	conn->responder_resources = min_t(u32,
					  ev->param.conn.responder_resources,
					  attrs->max_qp_rd_atom);
	conn->initiator_depth = min_t(u32, ev->param.conn.initiator_depth,
				      attrs->max_qp_init_rd_atom);
	/* The listener's own setting does not pass to the new id */
	rdma_set_ack_timeout(id, min_t(unsigned int, ack_timeout, 31));
	id->context = conn;
	if (conn->accept_in_call) {
		/*
		 * Waits, not accepted, for a krdma_accept_take(); from here
		 * its events come to krdma_conn_event(). A listener closed
		 * meanwhile leaves it pending, for its close.
		 */
		krdma_listener_enqueue(l, conn);
		krdma_conn_get(conn);
		queue_delayed_work(krdma_wq, &conn->request_work,
				   msecs_to_jiffies(KRDMA_REQUEST_TIMEOUT_MS));
		mutex_unlock(&conn->lock);
		return 0;
	}

	ret = krdma_conn_prepare(conn);
	if (ret)
		goto err_fail;
	krdma_fill_hdr(conn, &hdr);
	param.private_data = &hdr;
	param.private_data_len = sizeof(hdr);
	param.responder_resources = conn->responder_resources;
	param.initiator_depth = conn->initiator_depth;
	param.flow_control = 1;
	param.rnr_retry_count = 7;
	ret = rdma_accept(id, &param);
	if (ret)
		goto err_fail;
	mutex_unlock(&conn->lock);
	return 0;

err_fail:
	/*
	 * The QP exists, and may hold RECVs of the prepare callback, which
	 * complete only through it: the connection fails as one that was
	 * being accepted, and close_work tears it down, the id included
	 * (rdma_cm must not destroy it: return 0).
	 */
	krdma_listener_reject(l, id, reason);
	krdma_conn_fail(conn, ret);
	krdma_conn_close_unclaimed(conn);
	mutex_unlock(&conn->lock);
	return 0;
err_free_conn:
	conn->cm_id = NULL;
	mutex_unlock(&conn->lock);
	krdma_conn_discard(conn);	/* and with it, the listener reference */
	spin_lock(&l->lock);
	l->queued--;
	spin_unlock(&l->lock);
	goto err_reject;
err_unqueue:
	spin_lock(&l->lock);
	l->queued--;
	spin_unlock(&l->lock);
	krdma_listener_put(l);
err_reject:
	krdma_listener_reject(l, id, reason);
	return ret;
}

static int krdma_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	enum krdma_cm_kind *kind = id->context;
	struct krdma_listener *l;

	if (*kind == KRDMA_CM_CONN)
		return krdma_conn_event(id->context, id, ev);
	/* Destroyed by the listen that parked it, a removal's included */
	if (*kind == KRDMA_CM_PARKED)
		return 0;

	l = id->context;
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return krdma_listener_request(l, id, ev);
	case RDMA_CM_EVENT_DEVICE_REMOVAL: {
		bool mine;

		/*
		 * Let rdma_cm destroy the id, unless krdma_listener_close()
		 * took it first: it is in rdma_destroy_id(), which waits for
		 * this handler, and destroys it itself.
		 */
		spin_lock(&l->lock);
		l->closed = true;
		mine = l->cm_id == id;
		if (mine)
			l->cm_id = NULL;
		wake_up_all(&l->wait);
		spin_unlock(&l->lock);
		return mine;
	}
	default:
		return 0;
	}
}

/**
 * krdma_listen_backlog - the backlog a listener asked for @backlog gets
 * @backlog: as passed to krdma_listen(); 0 for the default
 *
 * Return: the number of connections that may wait to be accepted.
 */
u32 krdma_listen_backlog(u32 backlog)
{
	return backlog ? min_t(u32, backlog, KRDMA_MAX_DEPTH) :
			 KRDMA_DEFAULT_BACKLOG;
}

/**
 * krdma_listen - listen for connections
 * @net: network namespace to listen in
 * @addr: address and port (port 0: any free port)
 * @backlog: connections that may wait to be accepted (0: default)
 * @params: queue depths of accepted connections, or NULL
 *
 * On iWARP the driver makes its listening TCP socket in current's network
 * namespace: a listen on an iWARP device's address, or on a wildcard
 * address, needs current in @net (else -EXDEV; a kernel thread is in
 * &init_net).
 *
 * Context: process context; sleeps.
 * Return: the listener (end it with krdma_listener_close()), or ERR_PTR():
 * -EADDRINUSE, -EADDRNOTAVAIL, -EXDEV, -ENOMEM, ...
 */
struct krdma_listener *krdma_listen(struct net *net, struct sockaddr *addr,
				    u32 backlog,
				    const struct krdma_conn_params *params)
{
	return krdma_listen_defer(net, addr, backlog, params, false);
}
EXPORT_SYMBOL_NS_GPL(krdma_listen, KRDMA);

/*
 * A listen on port 0 keeps an id whose port was taken bound to it, so that
 * rdma_cm does not pick that port again; its events are not the
 * listener's (a device removal must not close the listener)
 */
static enum krdma_cm_kind krdma_cm_parked = KRDMA_CM_PARKED;

static void krdma_park_id(struct rdma_cm_id *id)
{
	rdma_lock_handler(id);
	id->context = &krdma_cm_parked;
	rdma_unlock_handler(id);
}

/* The ids krdma_park_id() parked */
static void krdma_destroy_ids(struct rdma_cm_id **ids, unsigned int n)
{
	while (n)
		rdma_destroy_id(ids[--n]);
}

/**
 * krdma_listen_defer - krdma_listen(), with the accept deferred or not
 * @net: as krdma_listen()
 * @addr: as krdma_listen()
 * @backlog: as krdma_listen(); with @defer, the requests that may wait
 * @params: as krdma_listen()
 * @defer: leave each request unaccepted, on the accept queue, until
 *         krdma_accept_take() and krdma_accept_finish() accept it (the
 *         ioctl layer's KRDMA_LISTEN_DEFER_ACCEPT); @params->prepare is
 *         then not called
 *
 * Context: process context; sleeps.
 * Return: as krdma_listen().
 */
struct krdma_listener *krdma_listen_defer(struct net *net,
					  struct sockaddr *addr, u32 backlog,
					  const struct krdma_conn_params *params,
					  bool defer)
{
	struct krdma_listener *l;
	struct rdma_cm_id *taken[KRDMA_LISTEN_ANY_PORT_TRIES - 1];
	unsigned int ntaken = 0;
	struct rdma_cm_id *id;
	int ret;

	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return ERR_PTR(-ENOMEM);
	l->kind = KRDMA_CM_LISTENER;
	kref_init(&l->ref);
	spin_lock_init(&l->lock);
	INIT_LIST_HEAD(&l->pending);
	INIT_LIST_HEAD(&l->queue);
	init_waitqueue_head(&l->wait);
	l->net = get_net(net);
	l->backlog = krdma_listen_backlog(backlog);
	l->defer = defer;
	if (params)
		l->params = *params;
	l->params.sq_depth = krdma_conn_depth(params ? params->sq_depth : 0);
	l->params.rq_depth = krdma_conn_depth(params ? params->rq_depth : 0);

	for (;;) {
		id = rdma_create_id(net, krdma_cm_handler, l, RDMA_PS_TCP,
				    IB_QPT_RC);
		if (IS_ERR(id)) {
			ret = PTR_ERR(id);
			goto err_destroy_taken;
		}
		if (addr->sa_family == AF_INET6)
			rdma_set_afonly(id, 1);
		ret = rdma_bind_addr(id, addr);
		if (ret == -EADDRNOTAVAIL && ntaken)
			ret = -EADDRINUSE;	/* no port left but taken ones */
		if (!ret && !krdma_net_is_current(net) &&
		    (!id->device || rdma_protocol_iwarp(id->device,
							  id->port_num)))
			/* iWARP: its listening socket would be current's */
			ret = -EXDEV;
		if (ret)
			goto err_destroy_id;
		ret = rdma_listen(id, l->backlog);
		if (!ret)
			break;
		/*
		 * Port 0: rdma_cm picks a port free among its own ids, but an
		 * iWARP driver then binds a TCP socket to it, which other
		 * sockets of the machine may hold (siw: TIME_WAIT ones of
		 * clients without SO_REUSEADDR). Another port, then; the id
		 * stays bound to this one until the end, so that rdma_cm
		 * does not pick it again.
		 */
		if (ret != -EADDRINUSE || krdma_sockaddr_port(addr) ||
		    ntaken == ARRAY_SIZE(taken))
			goto err_destroy_id;
		krdma_park_id(id);
		taken[ntaken++] = id;
	}
	l->cm_id = id;
	krdma_destroy_ids(taken, ntaken);
	return l;

err_destroy_id:
	rdma_destroy_id(id);
err_destroy_taken:
	krdma_destroy_ids(taken, ntaken);
	krdma_listener_put(l);
	return ERR_PTR(ret);
}

/**
 * krdma_listener_addr - the address a listener is bound to
 * @l: the listener
 * @ss: filled with the address and port
 *
 * Return: 0, or -ENOTCONN if the listener is closed.
 */
int krdma_listener_addr(struct krdma_listener *l, struct sockaddr_storage *ss)
{
	int ret = -ENOTCONN;

	spin_lock(&l->lock);
	if (l->cm_id) {
		memcpy(ss, &l->cm_id->route.addr.src_addr, sizeof(*ss));
		ret = 0;
	}
	spin_unlock(&l->lock);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(krdma_listener_addr, KRDMA);

static bool krdma_listener_ready(struct krdma_listener *l)
{
	return !list_empty_careful(&l->queue) || READ_ONCE(l->closed);
}

/**
 * krdma_accept_take - claim the oldest connection waiting on a listener
 * @l: the listener
 * @nonblock: fail with -EAGAIN instead of waiting
 * @timeout: jiffies to wait, or MAX_SCHEDULE_TIMEOUT
 * @out: the connection, claimed (KRDMA_CLAIM_TAKEN): established, or a
 *       request not accepted yet when the listener defers the accept. The
 *       caller owns a reference and ends the claim with
 *       krdma_accept_finish().
 *
 * Connections that failed while they waited are closed and skipped.
 *
 * Context: process context; may sleep.
 * Return: 0, -EAGAIN, -ETIMEDOUT, -EINTR, or -ENOTCONN when the listener
 * was closed (device removed).
 */
int krdma_accept_take(struct krdma_listener *l, bool nonblock, long timeout,
		      struct krdma_conn **out)
{
	struct krdma_conn *conn;
	bool claimed;
	long left;
	int ret;

	kref_get(&l->ref);
	for (;;) {
		spin_lock(&l->lock);
		conn = list_first_entry_or_null(&l->queue, struct krdma_conn,
						listen_entry);
		if (conn) {
			list_del_init(&conn->listen_entry);
			claimed = krdma_conn_claim(conn);
		}
		spin_unlock(&l->lock);

		if (conn) {
			/* A queued connection is the listener's to give */
			WARN_ON_ONCE(!claimed);
			/* Its timer finds it claimed: stop it if it can be */
			if (conn->accept_in_call &&
			    cancel_delayed_work(&conn->request_work))
				krdma_conn_put(conn);
			if (READ_ONCE(conn->state) ==
			    (conn->accept_in_call ? KRDMA_CS_CONNECTING :
						    KRDMA_CS_CONNECTED)) {
				*out = conn;
				ret = 0;
				break;
			}
			/* Gone while it waited: not worth handing out */
			krdma_conn_close(conn);
			krdma_listener_unqueue(l);
			continue;
		}
		ret = -ENOTCONN;
		if (READ_ONCE(l->closed))
			break;
		ret = -EAGAIN;
		if (nonblock)
			break;
		left = wait_event_interruptible_timeout(l->wait,
							krdma_listener_ready(l),
							timeout);
		ret = left < 0 ? -EINTR : -ETIMEDOUT;
		if (left <= 0)
			break;
		timeout = left;
	}
	krdma_listener_put(l);
	return ret;
}

/* How long an accept in a call waits for the request to be established */
#define KRDMA_ACCEPT_ESTABLISH_MS	10000

/*
 * Accept a request of a listener that defers the accept, in the caller's
 * context (krdma_conn_cm_call_begin()): @prepare posts its RECVs first.
 */
static int krdma_conn_accept_request(struct krdma_conn *conn,
				     int (*prepare)(struct krdma_conn *conn,
						    void *ctx),
				     void *ctx)
{
	struct rdma_conn_param param = {};
	struct krdma_cm_hdr hdr;
	struct rdma_cm_id *id;
	long left;
	int ret;

	id = krdma_conn_cm_call_begin(conn, false);
	if (!id)
		return -ECONNABORTED;
	ret = -ECONNABORTED;
	if (conn->state != KRDMA_CS_CONNECTING)
		goto out_unlock;
	ret = krdma_conn_prepare_with(conn, prepare, ctx);
	if (ret) {
		krdma_listener_reject(conn->listener, id,
				      KRDMA_REJ_NO_RESOURCES);
		goto out_unlock;
	}
	krdma_fill_hdr(conn, &hdr);
	param.private_data = &hdr;
	param.private_data_len = sizeof(hdr);
	param.responder_resources = conn->responder_resources;
	param.initiator_depth = conn->initiator_depth;
	param.flow_control = 1;
	param.rnr_retry_count = 7;
	ret = rdma_accept(id, &param);
	if (ret) {
		pr_debug("conn %p: rdma_accept: %d\n", conn, ret);
		ret = -ECONNABORTED;
	}
out_unlock:
	mutex_unlock(&conn->lock);
	rdma_unlock_handler(id);
	krdma_conn_cm_call_end(conn);
	if (ret)
		return ret;

	left = wait_event_interruptible_timeout(conn->wait,
						krdma_conn_settled(conn),
					msecs_to_jiffies(KRDMA_ACCEPT_ESTABLISH_MS));
	switch (READ_ONCE(conn->state)) {
	case KRDMA_CS_CONNECTED:
		return 0;
	case KRDMA_CS_CONNECTING:
		return left < 0 ? -EINTR : -ECONNABORTED;
	default:
		return -ECONNABORTED;
	}
}

/**
 * krdma_accept_finish - hand out a connection krdma_accept_take() claimed
 * @l: the listener
 * @conn: the connection
 * @prepare: for a request of a listener that defers the accept: called
 *           under the connection's lock before the accept, to post the
 *           RECVs for the peer's first messages (as
 *           krdma_conn_params.prepare), or NULL; unused otherwise
 * @ctx: passed to @prepare
 *
 * A request is accepted here, and the call waits until it is established
 * (up to KRDMA_ACCEPT_ESTABLISH_MS, interruptible). On failure the
 * connection is torn down (the peer is refused, or disconnected) and the
 * reference of @conn is dropped.
 *
 * Context: process context; sleeps.
 * Return: 0 (the caller owns @conn, and records itself as its owner:
 * krdma_conn_set_owner()), -ECONNABORTED (the request failed or
 * was not established in time), -EINTR, or the error of @prepare.
 */
int krdma_accept_finish(struct krdma_listener *l, struct krdma_conn *conn,
			int (*prepare)(struct krdma_conn *conn, void *ctx),
			void *ctx)
{
	int ret = 0;

	if (conn->accept_in_call)
		ret = krdma_conn_accept_request(conn, prepare, ctx);
	if (ret) {
		krdma_conn_close(conn);
		krdma_listener_unqueue(l);
		return ret;
	}
	WRITE_ONCE(conn->claim, KRDMA_CLAIM_OWNER);
	krdma_listener_unqueue(l);
	return 0;
}

/**
 * krdma_accept - take an established connection from a listener
 * @l: the listener
 * @nonblock: fail with -EAGAIN instead of waiting
 * @timeout: jiffies to wait, or MAX_SCHEDULE_TIMEOUT
 * @out: the connection; the caller owns a reference
 *
 * Context: process context; may sleep.
 * Return: 0, -EAGAIN, -ETIMEDOUT, -EINTR, or -ENOTCONN when the listener
 * was closed (device removed).
 */
int krdma_accept(struct krdma_listener *l, bool nonblock, long timeout,
		 struct krdma_conn **out)
{
	struct krdma_conn *conn;
	int ret;

	ret = krdma_accept_take(l, nonblock, timeout, &conn);
	if (ret)
		return ret;
	ret = krdma_accept_finish(l, conn, NULL, NULL);
	if (ret)
		return ret;
	krdma_conn_set_owner(conn, _RET_IP_, NULL);
	*out = conn;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(krdma_accept, KRDMA);

static bool krdma_listener_drained(struct krdma_listener *l)
{
	return !READ_ONCE(l->queued);
}

/* Claim the next unclaimed connection of a closed listener, or NULL */
static struct krdma_conn *krdma_listener_claim_next(struct krdma_listener *l)
{
	struct krdma_conn *conn;
	bool claimed;

	spin_lock(&l->lock);
	conn = list_first_entry_or_null(&l->queue, struct krdma_conn,
					listen_entry);
	if (!conn)
		conn = list_first_entry_or_null(&l->pending, struct krdma_conn,
						listen_entry);
	if (conn) {
		list_del_init(&conn->listen_entry);
		claimed = krdma_conn_claim(conn);
		/* On a list means unclaimed: claiming takes it off */
		WARN_ON_ONCE(!claimed);
	}
	spin_unlock(&l->lock);
	return conn;
}

/**
 * krdma_listener_close - stop listening and drop the owner's reference
 * @l: the listener
 *
 * Every connection of the listener that krdma_accept() has not returned is
 * torn down before this returns: those waiting to be accepted, those still
 * being established, and those that failed on the way. Their operations
 * (the RECVs of krdma_conn_params.prepare) have completed by then, so
 * that the caller may free what its callbacks use. Accepted connections
 * are not affected.
 *
 * Context: process context; sleeps, for as long as the teardown of a
 * connection may take (bounded, see krdma_conn_teardown()).
 */
void krdma_listener_close(struct krdma_listener *l)
{
	struct krdma_conn *conn;
	struct rdma_cm_id *id;

	spin_lock(&l->lock);
	l->closed = true;
	id = l->cm_id;
	l->cm_id = NULL;
	wake_up_all(&l->wait);
	spin_unlock(&l->lock);

	/*
	 * No new request after this returns: rdma_cm runs a request's
	 * handler under the listening id's handler mutex, which its
	 * destruction takes. Every connection made is on a list by now, or
	 * already claimed by close_work or krdma_accept().
	 */
	if (id)
		rdma_destroy_id(id);

	while ((conn = krdma_listener_claim_next(l))) {
		krdma_conn_close(conn);
		krdma_listener_unqueue(l);
	}
	/* Those close_work or krdma_accept() claimed first: bounded too */
	wait_event(l->wait, krdma_listener_drained(l));
	krdma_listener_put(l);
}
EXPORT_SYMBOL_NS_GPL(krdma_listener_close, KRDMA);
