// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: what is there and what it did. A registry of every connection
 * and buffer (both faces: /dev/krdma and the kernel API) with its owner,
 * the counters of each connection's operations, the tracepoints, and the
 * debugfs files that show them: /sys/kernel/debug/krdma/{connections,
 * buffers,users,stats}, one object per line of key=value pairs, read by
 * `krdmactl status`. Documentation/ABI/testing/debugfs-krdma is the
 * format's contract.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/debugfs.h>
#include <linux/kallsyms.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/xarray.h>
#include <linux/krdma.h>

#include "krdma.h"

#define CREATE_TRACE_POINTS
#include "trace.h"

/*
 * Every connection, by id. Its last put, which may run in softirq context
 * (or wherever a kernel consumer drops it), erases it: irq-safe lock.
 */
static DEFINE_XARRAY_FLAGS(krdma_conn_ids, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
static u32 krdma_conn_next_id;

/* Every buffer, by id; erased by its free_work, in process context */
static DEFINE_XARRAY_ALLOC1(krdma_buf_ids);
static u32 krdma_buf_next_id;

static atomic64_t krdma_conns_created;
static atomic64_t krdma_bufs_created;

/*
 * Counters of the connections that are gone, for the totals; changed
 * under the lock of krdma_conn_ids
 */
static atomic64_t krdma_closed_ops[KRDMA_OPC_COUNT][KRDMA_OPS_NR];

static struct dentry *krdma_debugfs;

/*
 * debugfs refuse_posts: the next N posts of krdma's send queue work (its
 * REG_MRs, heartbeats and operations) are refused as if the driver had
 * refused them with -ENOTCONN, which siw does while another context
 * holds its QP's state lock: the connection fails, and its teardown
 * completes what was refused. For the tests of that path.
 */
static atomic_t krdma_refuse_posts = ATOMIC_INIT(0);

/**
 * krdma_post_refused - whether this post is to be refused (debugfs)
 *
 * Context: any.
 * Return: true, once for each count written to refuse_posts.
 */
bool krdma_post_refused(void)
{
	return unlikely(atomic_read(&krdma_refuse_posts)) &&
	       atomic_dec_if_positive(&krdma_refuse_posts) >= 0;
}

static const char * const krdma_op_class_names[KRDMA_OPC_COUNT] = {
	[KRDMA_OPC_WRITE] = "write",
	[KRDMA_OPC_READ] = "read",
	[KRDMA_OPC_SEND] = "send",
	[KRDMA_OPC_RECV] = "recv",
	[KRDMA_OPC_ATOMIC] = "atomic",
};

static const char * const krdma_op_counter_names[KRDMA_OPS_NR] = {
	[KRDMA_OPS_POSTED] = "posted",
	[KRDMA_OPS_DONE] = "done",
	[KRDMA_OPS_FAILED] = "failed",
	[KRDMA_OPS_BYTES] = "bytes",
};

/* KRDMA_OPC_COUNT for an opcode krdma does not know */
static enum krdma_op_class krdma_op_class(u32 opcode)
{
	switch (opcode) {
	case KRDMA_OP_WRITE:
	case KRDMA_OP_WRITE_IMM:
		return KRDMA_OPC_WRITE;
	case KRDMA_OP_READ:
		return KRDMA_OPC_READ;
	case KRDMA_OP_SEND:
	case KRDMA_OP_SEND_IMM:
		return KRDMA_OPC_SEND;
	case KRDMA_OP_RECV:
		return KRDMA_OPC_RECV;
	case KRDMA_OP_FETCH_ADD:
	case KRDMA_OP_CMP_SWAP:
		return KRDMA_OPC_ATOMIC;
	default:
		return KRDMA_OPC_COUNT;
	}
}

/**
 * krdma_stats_posted - count an operation krdma_post() accepted
 * @conn: its connection
 * @opcode: KRDMA_OP_*
 *
 * Context: any.
 */
void krdma_stats_posted(struct krdma_conn *conn, u32 opcode)
{
	enum krdma_op_class class = krdma_op_class(opcode);

	if (class < KRDMA_OPC_COUNT)
		atomic64_inc(&conn->stats.ops[class][KRDMA_OPS_POSTED]);
}

/**
 * krdma_stats_done - count a completed operation
 * @conn: its connection
 * @opcode: KRDMA_OP_*
 * @status: its completion status (enum ib_wc_status)
 * @vendor_err: the device's error code
 * @bytes: bytes moved (received, for a RECV) when it succeeded
 *
 * A failure is also the connection's last error, and the krdma_op_failed
 * tracepoint.
 *
 * Context: any.
 */
void krdma_stats_done(struct krdma_conn *conn, u32 opcode, u32 status,
		      u32 vendor_err, u64 bytes)
{
	enum krdma_op_class class = krdma_op_class(opcode);
	atomic64_t *c;

	if (class == KRDMA_OPC_COUNT)
		return;
	c = conn->stats.ops[class];
	if (status == IB_WC_SUCCESS) {
		atomic64_inc(&c[KRDMA_OPS_DONE]);
		atomic64_add(bytes, &c[KRDMA_OPS_BYTES]);
		return;
	}
	atomic64_inc(&c[KRDMA_OPS_FAILED]);
	atomic64_set(&conn->stats.last_error,
		     (u64)vendor_err << 32 | (opcode & 0xff) << 8 |
		     (status & 0xff));
	trace_krdma_op_failed(conn->id, opcode, status, vendor_err);
}

/*
 * The peer's address of a connection, for the tracepoint: saved once
 * connected, else the one being connected to, else 0.0.0.0:0
 */
static void krdma_conn_peer_addr(struct krdma_conn *conn,
				 struct sockaddr_in6 *out)
{
	const struct sockaddr_storage *ss = &conn->peer;

	if (!ss->ss_family && conn->cm_id)
		ss = &conn->cm_id->route.addr.dst_addr;
	memset(out, 0, sizeof(*out));
	if (ss->ss_family == AF_INET6)
		memcpy(out, ss, sizeof(struct sockaddr_in6));
	else if (ss->ss_family == AF_INET)
		memcpy(out, ss, sizeof(struct sockaddr_in));
	else
		out->sin6_family = AF_INET;
}

/**
 * krdma_conn_trace_state - the krdma_conn_state tracepoint
 * @conn: the connection, whose public state just changed
 * @old_state: the public state before (KRDMA_CONN_*)
 * @error: why (a negative errno), or 0
 */
void krdma_conn_trace_state(struct krdma_conn *conn, u32 old_state,
			    int error)
{
	struct sockaddr_in6 peer;

	lockdep_assert_held(&conn->lock);

	if (!trace_krdma_conn_state_enabled())
		return;
	krdma_conn_peer_addr(conn, &peer);
	trace_krdma_conn_state(conn->id, old_state,
			       krdma_conn_public_state(conn), error, &peer);
}

/**
 * krdma_owner_init - record who made an object
 * @owner: filled in
 * @caller: kernel consumers: the return address into the consumer
 * @user: objects made through /dev/krdma: the user charged for it, else
 *        NULL
 *
 * Context: process context of the task that made the object.
 */
void krdma_owner_init(struct krdma_owner *owner, unsigned long caller,
		      const struct krdma_user *user)
{
	owner->user = !!user;
	owner->uid = user ? krdma_user_uid(user) : 0;
	owner->caller = user ? 0 : caller;
	owner->pid = task_tgid_nr(current);
	get_task_comm(owner->comm, current);
	owner->set = true;
}

/**
 * krdma_conn_set_owner - record who holds a connection handed out
 * @conn: the connection
 * @caller: as krdma_owner_init()
 * @user: as krdma_owner_init()
 *
 * Context: process context; sleeps (conn->lock).
 */
void krdma_conn_set_owner(struct krdma_conn *conn, unsigned long caller,
			  const struct krdma_user *user)
{
	mutex_lock(&conn->lock);
	krdma_owner_init(&conn->owner, caller, user);
	mutex_unlock(&conn->lock);
}

/**
 * krdma_registry_add_conn - give a new connection its id and list it
 * @conn: the connection, not visible to anyone else yet
 *
 * Return: 0 or -ENOMEM.
 */
int krdma_registry_add_conn(struct krdma_conn *conn)
{
	int ret;

	ret = xa_alloc_cyclic_irq(&krdma_conn_ids, &conn->id, conn,
				  xa_limit_32b, &krdma_conn_next_id,
				  GFP_KERNEL);
	if (ret < 0)
		return -ENOMEM;
	atomic64_inc(&krdma_conns_created);
	return 0;
}

/**
 * krdma_registry_del_conn - unlist a connection about to be freed
 * @conn: the connection; its counters go to the totals
 *
 * Context: any.
 */
void krdma_registry_del_conn(struct krdma_conn *conn)
{
	unsigned long flags;
	int i, j;

	if (!conn->id)
		return;
	/* Under the lock: a reader counts the connection once, listed or not */
	xa_lock_irqsave(&krdma_conn_ids, flags);
	__xa_erase(&krdma_conn_ids, conn->id);
	for (i = 0; i < KRDMA_OPC_COUNT; i++)
		for (j = 0; j < KRDMA_OPS_NR; j++)
			atomic64_add(atomic64_read(&conn->stats.ops[i][j]),
				     &krdma_closed_ops[i][j]);
	xa_unlock_irqrestore(&krdma_conn_ids, flags);
}

/**
 * krdma_registry_add_buf - give a fully built buffer its id and list it
 * @buf: the buffer
 * @caller: as krdma_owner_init()
 * @user: as krdma_owner_init()
 *
 * Context: process context of the task that registers it.
 * Return: 0 or -ENOMEM.
 */
int krdma_registry_add_buf(struct krdma_buf *buf, unsigned long caller,
			   const struct krdma_user *user)
{
	int ret;

	krdma_owner_init(&buf->owner, caller, user);
	ret = xa_alloc_cyclic(&krdma_buf_ids, &buf->id, buf, xa_limit_32b,
			      &krdma_buf_next_id, GFP_KERNEL);
	if (ret < 0)
		return -ENOMEM;
	atomic64_inc(&krdma_bufs_created);
	return 0;
}

/**
 * krdma_registry_del_buf - unlist a buffer about to be freed
 * @buf: the buffer
 *
 * Context: process context (the buffer's free_work).
 */
void krdma_registry_del_buf(struct krdma_buf *buf)
{
	if (buf->id)
		xa_erase(&krdma_buf_ids, buf->id);
}

/*
 * debugfs. Every value is a number, a name without spaces, or "-" for
 * none; a task's name is escaped (see krdma_show_comm()).
 */

/* A name as a value: space, '=', '\\' and non-ASCII as \ooo octal */
static void krdma_show_comm(struct seq_file *m, const char *s)
{
	for (; *s; s++) {
		unsigned char c = *s;

		if (c <= ' ' || c == '=' || c == '\\' || c >= 0x7f)
			seq_printf(m, "\\%03o", c);
		else
			seq_putc(m, c);
	}
}

static void krdma_owner_show(struct seq_file *m,
			     const struct krdma_owner *owner)
{
	char sym[KSYM_SYMBOL_LEN], *mod, *end;

	if (!owner->set) {
		seq_puts(m, " owner=none uid=- pid=- comm=- module=- caller=-");
		return;
	}
	if (owner->user) {
		seq_printf(m, " owner=user uid=%u pid=%d comm=", owner->uid,
			   owner->pid);
		krdma_show_comm(m, owner->comm);
		seq_puts(m, " module=- caller=-");
		return;
	}
	seq_printf(m, " owner=kernel uid=- pid=%d comm=", owner->pid);
	krdma_show_comm(m, owner->comm);
	/* "function [module]", or "function" for the kernel itself */
	snprintf(sym, sizeof(sym), "%ps", (void *)owner->caller);
	mod = strstr(sym, " [");
	if (mod) {
		*mod = '\0';
		mod += 2;
		end = strchr(mod, ']');
		if (end)
			*end = '\0';
	}
	seq_printf(m, " module=%s caller=%s", mod ?: "vmlinux", sym);
}

static void krdma_addr_show(struct seq_file *m, const char *key,
			    const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET || ss->ss_family == AF_INET6)
		seq_printf(m, " %s=%pISpc", key, ss);
	else
		seq_printf(m, " %s=-", key);
}

static const char *krdma_conn_state_str(u32 state)
{
	switch (state) {
	case KRDMA_CONN_CONNECTING:
		return "CONNECTING";
	case KRDMA_CONN_CONNECTED:
		return "CONNECTED";
	case KRDMA_CONN_ERROR:
		return "ERROR";
	case KRDMA_CONN_CLOSED:
		return "CLOSED";
	}
	return "-";
}

/* " write_posted=N write_done=N ... atomic_bytes=N" */
static void krdma_counters_show(struct seq_file *m,
				const s64 ops[KRDMA_OPC_COUNT][KRDMA_OPS_NR])
{
	int i, j;

	for (i = 0; i < KRDMA_OPC_COUNT; i++)
		for (j = 0; j < KRDMA_OPS_NR; j++)
			seq_printf(m, " %s_%s=%lld", krdma_op_class_names[i],
				   krdma_op_counter_names[j], ops[i][j]);
}

/* Add the counters of @conn to @sum */
static void krdma_counters_add(s64 sum[KRDMA_OPC_COUNT][KRDMA_OPS_NR],
			       atomic64_t ops[KRDMA_OPC_COUNT][KRDMA_OPS_NR])
{
	int i, j;

	for (i = 0; i < KRDMA_OPC_COUNT; i++)
		for (j = 0; j < KRDMA_OPS_NR; j++)
			sum[i][j] += atomic64_read(&ops[i][j]);
}

/* The next connection from *@id on, referenced, or NULL */
static struct krdma_conn *krdma_registry_next_conn(unsigned long *id)
{
	struct krdma_conn *conn;

	xa_lock_irq(&krdma_conn_ids);
	xa_for_each_start(&krdma_conn_ids, *id, conn, *id)
		if (kref_get_unless_zero(&conn->ref))
			break;
	xa_unlock_irq(&krdma_conn_ids);
	return conn;
}

static void krdma_conn_show(struct seq_file *m, struct krdma_conn *conn)
{
	s64 ops[KRDMA_OPC_COUNT][KRDMA_OPS_NR] = {};
	struct krdma_window *grant;
	struct krdma_device *kdev;
	u32 grants = 0, port_num, state;
	u64 last;

	mutex_lock(&conn->lock);
	state = krdma_conn_public_state(conn);
	list_for_each_entry(grant, &conn->grants, conn_entry)
		grants += !grant->local;
	port_num = conn->port_num;
	seq_printf(m, "id=%u state=%s error=%d", conn->id,
		   krdma_conn_state_str(state),
		   state == KRDMA_CONN_ERROR ? -conn->error : 0);
	/* The device may be gone: its name only while krdma still has it */
	kdev = port_num ? krdma_device_get(conn->dev_index, NULL) : NULL;
	if (kdev)
		seq_printf(m, " dev=%s", dev_name(&kdev->ibdev->dev));
	else
		seq_puts(m, " dev=-");
	krdma_device_put(kdev);
	if (port_num)
		seq_printf(m, " dev_index=%u port=%u", conn->dev_index,
			   port_num);
	else
		seq_puts(m, " dev_index=- port=-");
	krdma_addr_show(m, "local", &conn->local);
	krdma_addr_show(m, "peer", &conn->peer);
	seq_printf(m, " qp=%u peer_qp=%u sq_depth=%u rq_depth=%u passive=%d grants=%u",
		   conn->qp_num, conn->peer_qp_num, conn->params.sq_depth,
		   conn->params.rq_depth, krdma_conn_passive(conn), grants);
	krdma_owner_show(m, &conn->owner);
	mutex_unlock(&conn->lock);

	krdma_counters_add(ops, conn->stats.ops);
	krdma_counters_show(m, ops);
	last = atomic64_read(&conn->stats.last_error);
	if (last)
		seq_printf(m, " last_status=%llu last_op=%llu last_vendor_err=%#llx\n",
			   last & 0xff, (last >> 8) & 0xff, last >> 32);
	else
		seq_puts(m, " last_status=- last_op=- last_vendor_err=-\n");
}

static int krdma_connections_show(struct seq_file *m, void *unused)
{
	struct krdma_conn *conn;
	unsigned long id = 0;

	while ((conn = krdma_registry_next_conn(&id))) {
		krdma_conn_show(m, conn);
		krdma_conn_put(conn);
		id++;
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(krdma_connections);

/* The next buffer from *@id on, referenced, or NULL */
static struct krdma_buf *krdma_registry_next_buf(unsigned long *id)
{
	struct krdma_buf *buf;

	xa_lock(&krdma_buf_ids);
	xa_for_each_start(&krdma_buf_ids, *id, buf, *id)
		if (kref_get_unless_zero(&buf->ref))
			break;
	xa_unlock(&krdma_buf_ids);
	return buf;
}

static void krdma_buf_show(struct seq_file *m, struct krdma_buf *buf)
{
	struct krdma_window *grant;
	u32 grants = 0;
	bool dead;

	mutex_lock(&buf->lock);
	list_for_each_entry(grant, &buf->grants, buf_entry)
		grants += !grant->local;
	dead = buf->dead;
	mutex_unlock(&buf->lock);

	seq_printf(m, "id=%u kind=%s size=%llu pages=%lu access=%#x grants=%u dead=%d",
		   buf->id, buf->mm ? "user" : "kernel", buf->length,
		   buf->npages, buf->access, grants, dead);
	krdma_owner_show(m, &buf->owner);
	seq_putc(m, '\n');
}

static int krdma_buffers_show(struct seq_file *m, void *unused)
{
	struct krdma_buf *buf;
	unsigned long id = 0;

	while ((buf = krdma_registry_next_buf(&id))) {
		krdma_buf_show(m, buf);
		krdma_buf_put(buf);
		id++;
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(krdma_buffers);

static int krdma_users_file_show(struct seq_file *m, void *unused)
{
	krdma_users_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(krdma_users_file);

/*
 * One line: what is there now, what was made since the module was loaded,
 * and the operations of every connection, gone or not.
 */
static int krdma_stats_show(struct seq_file *m, void *unused)
{
	s64 total[KRDMA_OPC_COUNT][KRDMA_OPS_NR] = {};
	struct krdma_conn *conn;
	struct krdma_buf *buf;
	u32 nconns = 0, nbufs = 0;
	unsigned long id;

	/* A listed connection is not freed while the lock is held */
	xa_lock_irq(&krdma_conn_ids);
	krdma_counters_add(total, krdma_closed_ops);
	xa_for_each(&krdma_conn_ids, id, conn) {
		nconns++;
		krdma_counters_add(total, conn->stats.ops);
	}
	xa_unlock_irq(&krdma_conn_ids);
	xa_lock(&krdma_buf_ids);
	xa_for_each(&krdma_buf_ids, id, buf)
		nbufs++;
	xa_unlock(&krdma_buf_ids);

	seq_printf(m, "conns=%u bufs=%u conns_created=%lld bufs_created=%lld",
		   nconns, nbufs, atomic64_read(&krdma_conns_created),
		   atomic64_read(&krdma_bufs_created));
	krdma_users_show_stats(m);
	krdma_counters_show(m, total);
	seq_putc(m, '\n');
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(krdma_stats);

/**
 * krdma_stats_init - create /sys/kernel/debug/krdma
 *
 * debugfs failures are not errors: the module works without it.
 */
void krdma_stats_init(void)
{
	krdma_debugfs = debugfs_create_dir("krdma", NULL);
	debugfs_create_file("connections", 0400, krdma_debugfs, NULL,
			    &krdma_connections_fops);
	debugfs_create_file("buffers", 0400, krdma_debugfs, NULL,
			    &krdma_buffers_fops);
	debugfs_create_file("users", 0400, krdma_debugfs, NULL,
			    &krdma_users_file_fops);
	debugfs_create_file("stats", 0400, krdma_debugfs, NULL,
			    &krdma_stats_fops);
	debugfs_create_atomic_t("refuse_posts", 0600, krdma_debugfs,
				&krdma_refuse_posts);
}

/**
 * krdma_stats_uninit - remove /sys/kernel/debug/krdma
 *
 * Every connection and buffer is gone by now.
 */
void krdma_stats_uninit(void)
{
	debugfs_remove(krdma_debugfs);
	WARN_ON(!xa_empty(&krdma_conn_ids));
	WARN_ON(!xa_empty(&krdma_buf_ids));
}
