// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_blk_server: the disk of krdma_blk, in the server's RAM.
 *
 * One vmalloc'd area, registered once, is granted whole (read and write)
 * to every connection a listener accepts; the grant's token goes to the
 * client in the hello message (krdma_blk_wire.h). From then on the
 * client reads and writes the disk by RDMA alone: this module does
 * nothing per I/O. See Documentation/blockdev.rst.
 *
 * Objects: the disk and its registration live from init to exit; the
 * listener too, and the accept thread is the only caller of
 * krdma_accept(). Each accepted connection has a struct blk_srv_conn (its
 * grant and its hello), on srv.conns under srv.lock once it is set up.
 * A connection that fails is reaped by srv.reap_work: its event callback
 * only queues the work, which may not close the connection itself.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/debugfs.h>
#include <linux/in.h>
#include <linux/inet.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <krdma/krdma.h>

#include "krdma_blk_wire.h"

MODULE_IMPORT_NS(KRDMA);

static char *addr = "0.0.0.0";
module_param(addr, charp, 0444);
MODULE_PARM_DESC(addr, "IPv4 address to listen on (default 0.0.0.0: any)");

static ushort port = KRDMA_BLK_PORT;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "Port to listen on, 1..65535 (default 7740)");

static uint size_mb = 64;
module_param(size_mb, uint, 0444);
MODULE_PARM_DESC(size_mb, "Size of the disk in MiB, 1..4096 (default 64)");

#define SRV_MAX_SIZE_MB		4096
#define SRV_BACKLOG		64
/*
 * How long one krdma_accept() waits. The accept thread stops only between
 * two calls: krdma_listener_close() must not run while it waits
 * (Documentation/kernel-api.rst, "Objects and lifetimes"), and nothing
 * else ends the wait. So this bounds how long rmmod waits for it.
 */
#define SRV_ACCEPT_WAIT		HZ

/* One accepted connection */
struct blk_srv_conn {
	struct list_head entry;		/* in srv.conns */
	struct krdma_conn *conn;
	struct krdma_window *grant;	/* the whole disk, to this peer */
	struct krdma_blk_hello *hello;	/* kmalloc'd: the device reads it */
	struct krdma_buf *hello_buf;
	struct krdma_req *send;		/* the hello's SEND */
};

static struct {
	void *disk;
	u64 size;
	struct krdma_buf *buf;
	struct krdma_listener *listener;
	struct task_struct *accept_task;
	/* protects conns; held across krdma_conn_info() only, which waits
	 * for nothing but the connection's own mutex
	 */
	struct mutex lock;
	struct list_head conns;
	struct work_struct reap_work;
	struct dentry *debugfs;
} srv;

/* The peer does not need to hear that its hello left: it waits for it */
static void srv_send_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	if (wc->status != IB_WC_SUCCESS)
		pr_debug("hello SEND failed: status %u\n", wc->status);
}

static void srv_conn_free(struct blk_srv_conn *c)
{
	kfree(c->send);
	kfree(c->hello);
	kfree(c);
}

/* Ends what srv_conn_setup() made; the connection first, as it must */
static void srv_conn_destroy(struct blk_srv_conn *c)
{
	/* Every operation has completed (the SEND's done returned) */
	krdma_conn_close(c->conn);
	krdma_grant_destroy(c->grant);
	krdma_buf_dereg(c->hello_buf);
	srv_conn_free(c);
}

/* Grant the disk to a new connection and SEND it the hello */
static struct blk_srv_conn *srv_conn_setup(struct krdma_conn *conn)
{
	struct blk_srv_conn *c;
	struct krdma_token tok;
	int ret;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return ERR_PTR(-ENOMEM);
	c->conn = conn;
	c->hello = kzalloc(sizeof(*c->hello), GFP_KERNEL);
	c->send = krdma_req_alloc(1, GFP_KERNEL);
	if (!c->hello || !c->send) {
		ret = -ENOMEM;
		goto err_free;
	}

	c->grant = krdma_grant_create(conn, srv.buf, 0, srv.size,
				      KRDMA_ACCESS_REMOTE_READ |
				      KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(c->grant)) {
		ret = PTR_ERR(c->grant);
		goto err_free;
	}
	krdma_grant_token(c->grant, &tok);
	krdma_blk_hello_pack(c->hello, srv.size, &tok);

	c->hello_buf = krdma_buf_reg_kernel(c->hello, sizeof(*c->hello), 0);
	if (IS_ERR(c->hello_buf)) {
		ret = PTR_ERR(c->hello_buf);
		goto err_destroy_grant;
	}

	c->send->opcode = KRDMA_OP_SEND;
	c->send->num_sge = 1;
	c->send->sge[0].buf = c->hello_buf;
	c->send->sge[0].offset = 0;
	c->send->sge[0].length = sizeof(*c->hello);
	c->send->done = srv_send_done;
	c->send->context = c;
	ret = krdma_post(conn, c->send);
	if (ret)
		goto err_dereg_hello;
	return c;

err_dereg_hello:
	krdma_buf_dereg(c->hello_buf);
err_destroy_grant:
	krdma_grant_destroy(c->grant);
err_free:
	srv_conn_free(c);
	return ERR_PTR(ret);
}

static bool srv_conn_alive(struct blk_srv_conn *c)
{
	struct krdma_conn_info info;

	lockdep_assert_held(&srv.lock);
	krdma_conn_info(c->conn, &info);
	return info.state == KRDMA_CONN_CONNECTED;
}

/* Close every connection that is no longer connected */
static void srv_reap_work(struct work_struct *work)
{
	struct blk_srv_conn *c, *tmp;
	LIST_HEAD(dead);

	mutex_lock(&srv.lock);
	list_for_each_entry_safe(c, tmp, &srv.conns, entry)
		if (!srv_conn_alive(c))
			list_move_tail(&c->entry, &dead);
	mutex_unlock(&srv.lock);

	list_for_each_entry_safe(c, tmp, &dead, entry) {
		list_del(&c->entry);
		srv_conn_destroy(c);
	}
}

/*
 * A connection failed (its peer went away, its device was removed). Not
 * allowed to close it from here: the reap work does.
 */
static void srv_conn_event(struct krdma_conn *conn, int error, void *context)
{
	pr_debug("connection %p failed: %d\n", conn, error);
	queue_work(system_wq, &srv.reap_work);
}

static void srv_conn_add(struct blk_srv_conn *c)
{
	bool alive;

	/*
	 * A failure before it was on the list found nothing to reap. The
	 * state says so (the event comes after it is set): look once more.
	 */
	mutex_lock(&srv.lock);
	list_add_tail(&c->entry, &srv.conns);
	alive = srv_conn_alive(c);
	mutex_unlock(&srv.lock);
	if (!alive)
		queue_work(system_wq, &srv.reap_work);
}

static int srv_accept_thread(void *unused)
{
	struct blk_srv_conn *c;
	struct krdma_conn *conn;
	int ret;

	while (!kthread_should_stop()) {
		ret = krdma_accept(srv.listener, false, SRV_ACCEPT_WAIT, &conn);
		if (ret == -ETIMEDOUT || ret == -EINTR)
			continue;
		if (ret) {
			/* -ENOTCONN: device removal closed the listener */
			pr_err("accept failed (%d); no more connections are accepted\n",
			       ret);
			break;
		}
		c = srv_conn_setup(conn);
		if (IS_ERR(c)) {
			pr_warn("a new connection could not be served: %ld\n",
				PTR_ERR(c));
			krdma_conn_close(conn);
			continue;
		}
		srv_conn_add(c);
	}
	/* kthread_stop() is called in any case: wait for it */
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}

static const char *srv_state_name(u32 state)
{
	switch (state) {
	case KRDMA_CONN_CONNECTING:
		return "connecting";
	case KRDMA_CONN_CONNECTED:
		return "connected";
	case KRDMA_CONN_ERROR:
		return "error";
	case KRDMA_CONN_CLOSED:
		return "closed";
	default:
		return "unknown";
	}
}

/* The number of connections, then "PEER_ADDR:PORT STATE" for each */
static int srv_connections_show(struct seq_file *m, void *unused)
{
	struct krdma_conn_info info;
	struct blk_srv_conn *c;

	mutex_lock(&srv.lock);
	seq_printf(m, "%zu\n", list_count_nodes(&srv.conns));
	list_for_each_entry(c, &srv.conns, entry) {
		krdma_conn_info(c->conn, &info);
		seq_printf(m, "%pISpc %s\n", &info.peer,
			   srv_state_name(info.state));
	}
	mutex_unlock(&srv.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(srv_connections);

static int srv_listen(void)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
	};
	struct krdma_conn_params params = {
		.event = srv_conn_event,
	};

	if (!port || !in4_pton(addr, -1, (u8 *)&sin.sin_addr.s_addr, -1,
			       NULL)) {
		pr_err("addr=%s port=%u: not an IPv4 address and a port\n",
		       addr, port);
		return -EINVAL;
	}
	srv.listener = krdma_listen(&init_net, (struct sockaddr *)&sin,
				    SRV_BACKLOG, &params);
	if (IS_ERR(srv.listener)) {
		pr_err("cannot listen on %pISpc: %ld\n", &sin,
		       PTR_ERR(srv.listener));
		return PTR_ERR(srv.listener);
	}
	return 0;
}

/* Close every connection, those the reap work has not taken yet */
static void srv_close_conns(void)
{
	struct blk_srv_conn *c, *tmp;
	LIST_HEAD(conns);

	mutex_lock(&srv.lock);
	list_splice_init(&srv.conns, &conns);
	mutex_unlock(&srv.lock);
	list_for_each_entry_safe(c, tmp, &conns, entry) {
		list_del(&c->entry);
		srv_conn_destroy(c);
	}
	/* No event can come any more: the closes waited for them */
	cancel_work_sync(&srv.reap_work);
}

static int __init srv_init(void)
{
	int ret;

	if (!size_mb || size_mb > SRV_MAX_SIZE_MB) {
		pr_err("size_mb=%u: must be 1..%u\n", size_mb, SRV_MAX_SIZE_MB);
		return -EINVAL;
	}
	mutex_init(&srv.lock);
	INIT_LIST_HEAD(&srv.conns);
	INIT_WORK(&srv.reap_work, srv_reap_work);

	srv.size = (u64)size_mb * SZ_1M;
	srv.disk = vzalloc(srv.size);
	if (!srv.disk)
		return -ENOMEM;
	srv.buf = krdma_buf_reg_kernel(srv.disk, srv.size,
				       KRDMA_ACCESS_REMOTE_READ |
				       KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(srv.buf)) {
		ret = PTR_ERR(srv.buf);
		goto err_free_disk;
	}
	ret = srv_listen();
	if (ret)
		goto err_dereg_disk;

	srv.accept_task = kthread_run(srv_accept_thread, NULL,
				      "krdma_blk_accept");
	if (IS_ERR(srv.accept_task)) {
		ret = PTR_ERR(srv.accept_task);
		goto err_close_listener;
	}
	srv.debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("connections", 0400, srv.debugfs, NULL,
			    &srv_connections_fops);

	pr_info("serving %u MiB on %s port %u\n", size_mb, addr, port);
	return 0;

err_close_listener:
	krdma_listener_close(srv.listener);
err_dereg_disk:
	krdma_buf_dereg(srv.buf);
err_free_disk:
	vfree(srv.disk);
	mutex_destroy(&srv.lock);
	return ret;
}

static void __exit srv_exit(void)
{
	debugfs_remove(srv.debugfs);
	/* The accept thread is the listener's only other user: stop it first */
	kthread_stop(srv.accept_task);
	krdma_listener_close(srv.listener);
	/* Their peers see the disconnect; their I/O fails */
	srv_close_conns();
	/* The grants are gone: no peer can reach the disk any more */
	krdma_buf_dereg(srv.buf);
	vfree(srv.disk);
	mutex_destroy(&srv.lock);
}

module_init(srv_init);
module_exit(srv_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("krdma_blk server: a RAM disk for krdma_blk clients, over RDMA");
