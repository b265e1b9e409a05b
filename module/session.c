// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: sessions, for kernel consumers. A session is a connection to one
 * destination that krdma keeps up: it connects in the background, checks
 * the peer with a heartbeat (a zero-length RDMA WRITE, which every RC peer
 * answers without involving its CPU), and when the connection fails it
 * connects again, waiting between attempts with exponential back-off,
 * until the consumer destroys the session.
 *
 * Locking: session->lock protects the state, the current connection and
 * the counters. It is never held across a call that may block on a
 * connection (connect, heartbeat, close), nor across the consumer's
 * callback.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/slab.h>
#include <net/net_namespace.h>

#include "krdma.h"

#define KRDMA_SESSION_CONNECT_TIMEOUT	(10 * HZ)

/**
 * struct krdma_session - a connection krdma keeps up
 * @lock: protects everything below but @work
 * @state: KRDMA_SESSION_*
 * @conn: the current connection, when CONNECTED
 * @dead: failed connections, to be closed by @work
 * @net: namespace to connect in (referenced)
 * @dst: destination
 * @src: source, if @has_src
 * @has_src: @src is set
 * @params: the consumer's parameters
 * @backoff_ms: wait before the next attempt
 * @stopping: being destroyed: no new attempt, no new callback
 * @stats: counters
 * @work: connects, reconnects, sends heartbeats and closes @dead
 */
struct krdma_session {
	struct mutex lock; /* all but @work */
	enum krdma_session_state state;
	struct krdma_conn *conn;
	struct krdma_conn *dead[4];
	struct net *net;
	struct sockaddr_storage dst;
	struct sockaddr_storage src;
	bool has_src;
	struct krdma_session_params params;
	unsigned int backoff_ms;
	bool stopping;
	struct krdma_session_stats stats;
	struct delayed_work work;
};

static void krdma_session_notify(struct krdma_session *s,
				 enum krdma_session_state state, int error)
{
	if (s->params.state_change)
		s->params.state_change(s, state, error, s->params.context);
}

/* The current connection failed (its teardown is done): connect again */
static void krdma_session_conn_event(struct krdma_conn *conn, int error,
				     void *context)
{
	struct krdma_session *s = context;
	enum krdma_session_state state;
	unsigned int i;
	bool notify = false;

	mutex_lock(&s->lock);
	if (s->conn == conn) {
		s->conn = NULL;
		for (i = 0; i < ARRAY_SIZE(s->dead); i++) {
			if (!s->dead[i]) {
				s->dead[i] = conn;
				break;
			}
		}
		WARN_ON_ONCE(i == ARRAY_SIZE(s->dead));
		s->stats.failures++;
		state = s->params.reconnect ? KRDMA_SESSION_RECONNECTING :
					      KRDMA_SESSION_FAILED;
		s->state = state;
		notify = !s->stopping;
		s->backoff_ms = s->params.backoff_min_ms;
		if (!s->stopping)
			mod_delayed_work(krdma_wq, &s->work, 0);
	}
	mutex_unlock(&s->lock);
	if (notify)
		krdma_session_notify(s, state, error);
}

static void krdma_session_close_dead(struct krdma_session *s)
{
	struct krdma_conn *dead[ARRAY_SIZE(s->dead)];
	unsigned int i;

	mutex_lock(&s->lock);
	memcpy(dead, s->dead, sizeof(dead));
	memset(s->dead, 0, sizeof(s->dead));
	mutex_unlock(&s->lock);
	for (i = 0; i < ARRAY_SIZE(dead); i++)
		if (dead[i])
			krdma_conn_close(dead[i]);
}

static void krdma_session_connect(struct krdma_session *s)
{
	struct krdma_conn_params cp = s->params.conn;
	struct krdma_conn *conn;
	unsigned int delay;
	bool stopping;

	cp.event = krdma_session_conn_event;
	cp.context = s;
	conn = krdma_connect(s->net, (struct sockaddr *)&s->dst,
			     s->has_src ? (struct sockaddr *)&s->src : NULL,
			     KRDMA_SESSION_CONNECT_TIMEOUT, &cp);

	mutex_lock(&s->lock);
	stopping = s->stopping;
	if (IS_ERR(conn)) {
		s->stats.connect_failures++;
		if (!stopping && (s->params.reconnect ||
				  s->state == KRDMA_SESSION_CONNECTING)) {
			delay = s->backoff_ms;
			s->backoff_ms = min(s->backoff_ms * 2,
					    s->params.backoff_max_ms);
			queue_delayed_work(krdma_wq, &s->work,
					   msecs_to_jiffies(delay));
		}
		mutex_unlock(&s->lock);
		return;
	}
	if (stopping) {
		mutex_unlock(&s->lock);
		krdma_conn_close(conn);
		return;
	}
	if (s->state == KRDMA_SESSION_RECONNECTING)
		s->stats.reconnects++;
	s->conn = conn;
	/*
	 * A failure between krdma_connect() and here was not ours to hear
	 * (s->conn was another): its event came too early, or not at all.
	 * From here on the event finds s->conn: look once, under the lock.
	 */
	if (READ_ONCE(conn->state) != KRDMA_CS_CONNECTED) {
		mutex_unlock(&s->lock);
		krdma_session_conn_event(conn, READ_ONCE(conn->error) ?:
					 -ECONNRESET, s);
		return;
	}
	s->state = KRDMA_SESSION_CONNECTED;
	s->backoff_ms = s->params.backoff_min_ms;
	if (s->params.heartbeat_ms)
		queue_delayed_work(krdma_wq, &s->work,
				   msecs_to_jiffies(s->params.heartbeat_ms));
	mutex_unlock(&s->lock);
	krdma_session_notify(s, KRDMA_SESSION_CONNECTED, 0);
}

static void krdma_session_heartbeat(struct krdma_session *s)
{
	struct krdma_conn *conn;
	u64 progress;
	int ret;

	mutex_lock(&s->lock);
	conn = s->conn;
	if (conn)
		krdma_conn_get(conn);
	mutex_unlock(&s->lock);
	if (!conn)
		return;

	progress = krdma_conn_sq_progress(conn);
	ret = krdma_post_heartbeat(conn);
	/*
	 * A busy connection is not a dead one. A full send queue (-EAGAIN)
	 * answers for itself: each of its WRs completes, or fails the
	 * connection when the peer is gone. A heartbeat queued behind more
	 * than the link moves in the timeout (-ETIMEDOUT) was answered if
	 * anything ahead of it completed meanwhile.
	 */
	if (ret == -EAGAIN ||
	    (ret == -ETIMEDOUT && krdma_conn_sq_progress(conn) != progress))
		ret = 0;
	mutex_lock(&s->lock);
	if (ret) {
		s->stats.heartbeat_failures++;
	} else {
		s->stats.heartbeats++;
		if (s->conn == conn && !s->stopping)
			queue_delayed_work(krdma_wq, &s->work,
					   msecs_to_jiffies(s->params.heartbeat_ms));
	}
	mutex_unlock(&s->lock);
	/* No answer: the connection is dead; its failure event reconnects */
	if (ret)
		krdma_conn_qp_failed(conn, ret == -EIO ? -ECONNRESET : ret);
	krdma_conn_put(conn);
}

static void krdma_session_work(struct work_struct *work)
{
	struct krdma_session *s = container_of(to_delayed_work(work),
					       struct krdma_session, work);
	enum krdma_session_state state;

	krdma_session_close_dead(s);

	mutex_lock(&s->lock);
	state = s->state;
	if (s->stopping) {
		mutex_unlock(&s->lock);
		return;
	}
	mutex_unlock(&s->lock);

	switch (state) {
	case KRDMA_SESSION_CONNECTING:
	case KRDMA_SESSION_RECONNECTING:
		krdma_session_connect(s);
		break;
	case KRDMA_SESSION_CONNECTED:
		krdma_session_heartbeat(s);
		break;
	default:
		break;
	}
}

/**
 * krdma_session_create - a connection krdma keeps up
 * @net: network namespace to connect in
 * @dst: the listener's address and port
 * @src: local address, or NULL
 * @params: what to keep it up with; copied
 *
 * Returns at once: the session connects in the background and reports
 * every state change through @params->state_change. Its connects run in
 * a kernel thread, which is in &init_net: on iWARP, whose driver makes
 * its TCP socket in the connecting task's namespace, a session of another
 * @net fails each attempt with -EXDEV (see krdma_connect()).
 *
 * Context: process context; may sleep.
 * Return: the session (end it with krdma_session_destroy()), or
 * ERR_PTR(-EINVAL) for a bad address family or back-off, or a
 * @params->conn.prepare (not for sessions: their connections come and go
 * under krdma), or ERR_PTR(-ENOMEM).
 */
struct krdma_session *
krdma_session_create(struct net *net, struct sockaddr *dst,
		     struct sockaddr *src,
		     const struct krdma_session_params *params)
{
	struct krdma_session *s;

	if ((dst->sa_family != AF_INET && dst->sa_family != AF_INET6) ||
	    (src && src->sa_family != dst->sa_family) || params->conn.prepare)
		return ERR_PTR(-EINVAL);

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return ERR_PTR(-ENOMEM);
	mutex_init(&s->lock);
	INIT_DELAYED_WORK(&s->work, krdma_session_work);
	s->params = *params;
	if (!s->params.backoff_min_ms)
		s->params.backoff_min_ms = 100;
	if (s->params.backoff_max_ms < s->params.backoff_min_ms)
		s->params.backoff_max_ms = max(30000U, s->params.backoff_min_ms);
	s->backoff_ms = s->params.backoff_min_ms;
	memcpy(&s->dst, dst, dst->sa_family == AF_INET ?
	       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	if (src) {
		memcpy(&s->src, src, src->sa_family == AF_INET ?
		       sizeof(struct sockaddr_in) :
		       sizeof(struct sockaddr_in6));
		s->has_src = true;
	}
	s->net = get_net(net);
	s->state = KRDMA_SESSION_CONNECTING;
	queue_delayed_work(krdma_wq, &s->work, 0);
	return s;
}
EXPORT_SYMBOL_NS_GPL(krdma_session_create, KRDMA);

/**
 * krdma_session_conn - the session's connection, if it is connected
 * @s: the session
 *
 * Context: process context; sleeps.
 * Return: the connection, referenced (drop it with krdma_conn_put(); do
 * not close it), or NULL when the session is not connected right now.
 */
struct krdma_conn *krdma_session_conn(struct krdma_session *s)
{
	struct krdma_conn *conn;

	mutex_lock(&s->lock);
	conn = s->conn;
	if (conn)
		krdma_conn_get(conn);
	mutex_unlock(&s->lock);
	return conn;
}
EXPORT_SYMBOL_NS_GPL(krdma_session_conn, KRDMA);

/**
 * krdma_session_info - state and counters of a session
 * @s: the session
 * @stats: filled in
 *
 * Context: process context; sleeps.
 * Return: the state, KRDMA_SESSION_*.
 */
enum krdma_session_state krdma_session_info(struct krdma_session *s,
					    struct krdma_session_stats *stats)
{
	enum krdma_session_state state;

	mutex_lock(&s->lock);
	state = s->state;
	if (stats)
		*stats = s->stats;
	mutex_unlock(&s->lock);
	return state;
}
EXPORT_SYMBOL_NS_GPL(krdma_session_info, KRDMA);

/**
 * krdma_session_destroy - stop keeping a connection up, and close it
 * @s: the session
 *
 * No state_change callback runs once this returns.
 *
 * Context: process context; sleeps until the connection is drained.
 */
void krdma_session_destroy(struct krdma_session *s)
{
	struct krdma_conn *conn;

	mutex_lock(&s->lock);
	s->stopping = true;
	mutex_unlock(&s->lock);
	cancel_delayed_work_sync(&s->work);

	mutex_lock(&s->lock);
	conn = s->conn;
	s->conn = NULL;
	s->state = KRDMA_SESSION_CLOSED;
	mutex_unlock(&s->lock);
	if (conn)
		krdma_conn_close(conn);
	krdma_session_close_dead(s);
	put_net(s->net);
	kfree(s);
}
EXPORT_SYMBOL_NS_GPL(krdma_session_destroy, KRDMA);
