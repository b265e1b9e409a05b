// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_sample: a kernel module that uses krdma's kernel API, and the
 * selftest of that API.
 *
 * Loading it runs its test cases on every address given in the "addrs"
 * parameter (one soft device each): it listens, connects to itself,
 * registers kernel memory of each kind (kmalloc, vmalloc, a page array),
 * grants windows of it and moves data with RDMA WRITE, READ and SEND/RECV,
 * checking every byte. The results, in KTAP, are in debugfs:
 * /sys/kernel/debug/krdma_sample/results. With "leave_in_flight=1" it also
 * leaves operations in flight for its exit to clean up.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/in.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/preempt.h>
#include <linux/seq_buf.h>
#include <linux/slab.h>
#include <linux/sizes.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>
#include <krdma/krdma.h>

MODULE_IMPORT_NS(KRDMA);

static char *addrs = "198.18.0.1,198.18.1.1";
module_param(addrs, charp, 0444);
MODULE_PARM_DESC(addrs, "IPv4 addresses to test on, comma separated");

static bool user_serve;
module_param(user_serve, bool, 0444);
MODULE_PARM_DESC(user_serve,
		 "Serve one userspace peer on the first address (see krdma_kapi_user.c)");

static bool hold;
module_param(hold, bool, 0444);
MODULE_PARM_DESC(hold,
		 "Hold a connection with operations in flight on the first address, for a device removal (see debugfs hold)");

static bool leave_in_flight;
module_param(leave_in_flight, bool, 0444);
MODULE_PARM_DESC(leave_in_flight,
		 "Leave a connection with operations in flight for module exit");

static char *slow_session;
module_param(slow_session, charp, 0444);
MODULE_PARM_DESC(slow_session,
		 "SRC,DST[,unsignaled]: only a session's heartbeats behind 48 MiB of WRITEs (or 8 MiB of unsignaled ones) from SRC to DST (a shaped link, see krdma_kapi.sh)");

#define RESULTS_SIZE	(64 * 1024)
#define TIMEOUT		(30 * HZ)

static struct dentry *dir;
static char *results;
static struct seq_buf out;
static unsigned int ntests;

/* What leave_in_flight leaves for exit */
static struct krdma_conn *left_conn[2];
static struct krdma_buf *left_buf[2];
static void *left_mem[2];
static struct krdma_window *left_grant;
static struct krdma_listener *left_listener;
static struct krdma_req *left_reqs;
static atomic_t left_done;

static __printf(2, 3) void result(bool ok, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	ntests++;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	seq_buf_printf(&out, "%s %u %s\n", ok ? "ok" : "not ok", ntests, line);
}

#define diag(fmt, ...) seq_buf_printf(&out, "# " fmt "\n", ##__VA_ARGS__)

static void fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(i * 13 + seed + (i >> 12));
}

static long check(const u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (u8)(i * 13 + seed + (i >> 12)))
			return i;
	return -1;
}

/*
 * Wait, 10 s at most, until @len bytes at @dst are those at @expect; true
 * once they are. On iWARP (siw) an RDMA WRITE completes at its initiator
 * once its data went to TCP, not once the responder placed it: siw's
 * receive side places it a moment later, from softirq. On RoCE (rxe) the
 * WRITE completes after the responder's ACK, placed. A check of the bytes
 * follows, which fails as before if they are wrong.
 */
static bool wait_bytes(const void *dst, const void *expect, size_t len)
{
	unsigned long end = jiffies + 10 * HZ;
	const u8 *d = dst, *e = expect;
	size_t i = 0;

	for (;;) {
		while (i < len && READ_ONCE(d[i]) == e[i])
			i++;
		if (i == len)
			return true;
		if (time_after(jiffies, end))
			return false;
		usleep_range(1000, 2000);
	}
}

/* A listener, a connection to it and the accepted end */
struct pair {
	struct krdma_listener *l;
	struct krdma_conn *client;
	struct krdma_conn *server;
};

static int pair_open(struct pair *p, const char *ip,
		     const struct krdma_conn_params *client_params)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_storage bound;
	int ret;

	memset(p, 0, sizeof(*p));
	if (!in4_pton(ip, -1, (u8 *)&sin.sin_addr, -1, NULL))
		return -EINVAL;
	p->l = krdma_listen(&init_net, (struct sockaddr *)&sin, 4, NULL);
	if (IS_ERR(p->l))
		return PTR_ERR(p->l);
	ret = krdma_listener_addr(p->l, &bound);
	if (ret)
		goto err_close_listener;
	p->client = krdma_connect(&init_net, (struct sockaddr *)&bound, NULL,
				  TIMEOUT, client_params);
	if (IS_ERR(p->client)) {
		ret = PTR_ERR(p->client);
		goto err_close_listener;
	}
	ret = krdma_accept(p->l, false, TIMEOUT, &p->server);
	if (ret)
		goto err_close_client;
	return 0;

err_close_client:
	krdma_conn_close(p->client);
err_close_listener:
	krdma_listener_close(p->l);
	return ret;
}

static void pair_close(struct pair *p)
{
	krdma_conn_close(p->client);
	krdma_conn_close(p->server);
	krdma_listener_close(p->l);
}

/* Where the last completion ran */
static bool done_in_softirq;

static void note_context(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct completion *c = req->context;

	done_in_softirq = in_softirq() || in_interrupt();
	complete(c);
}

/* Run one operation, wait for it; the completion's status, or -errno */
static int run_op(struct krdma_conn *conn, struct krdma_req *req)
{
	struct krdma_wc wc;
	int ret;

	ret = krdma_post_sync(conn, req, TIMEOUT, &wc);
	return ret ? ret : wc.status;
}

enum mem_kind { MEM_KMALLOC, MEM_VMALLOC, MEM_PAGES, MEM_SGT };
static const char *const mem_names[] = {
	"kmalloc", "vmalloc", "pages", "sg_table"
};

/* Kernel memory of a kind, registered; *mem is what to free */
struct kmem {
	void *p;
	struct page **pages;
	unsigned int npages;
	struct sg_table sgt;
	struct krdma_buf *buf;
};

static int kmem_get(struct kmem *m, enum mem_kind kind, size_t len,
		    u32 access)
{
	unsigned int i;

	memset(m, 0, sizeof(*m));
	switch (kind) {
	case MEM_KMALLOC:
		m->p = kmalloc(len, GFP_KERNEL);
		if (!m->p)
			return -ENOMEM;
		m->buf = krdma_buf_reg_kernel(m->p, len, access);
		break;
	case MEM_VMALLOC:
		m->p = vmalloc(len);
		if (!m->p)
			return -ENOMEM;
		m->buf = krdma_buf_reg_kernel(m->p, len, access);
		break;
	case MEM_PAGES:
	case MEM_SGT:
		m->npages = DIV_ROUND_UP(len, PAGE_SIZE);
		m->pages = kcalloc(m->npages, sizeof(*m->pages), GFP_KERNEL);
		if (!m->pages)
			return -ENOMEM;
		for (i = 0; i < m->npages; i++) {
			m->pages[i] = alloc_page(GFP_KERNEL);
			if (!m->pages[i])
				return -ENOMEM;
		}
		m->p = vmap(m->pages, m->npages, VM_MAP, PAGE_KERNEL);
		if (!m->p)
			return -ENOMEM;
		if (kind == MEM_PAGES) {
			m->buf = krdma_buf_reg_pages(m->pages, m->npages, 0,
						     len, access);
			break;
		}
		if (sg_alloc_table_from_pages(&m->sgt, m->pages, m->npages, 0,
					      len, GFP_KERNEL))
			return -ENOMEM;
		m->buf = krdma_buf_reg_sgt(&m->sgt, access);
		break;
	}
	if (IS_ERR(m->buf)) {
		int ret = PTR_ERR(m->buf);

		m->buf = NULL;
		return ret;
	}
	return 0;
}

static void kmem_put(struct kmem *m, enum mem_kind kind)
{
	unsigned int i;

	if (m->buf)
		krdma_buf_dereg(m->buf);
	switch (kind) {
	case MEM_KMALLOC:
		kfree(m->p);
		break;
	case MEM_VMALLOC:
		vfree(m->p);
		break;
	case MEM_PAGES:
	case MEM_SGT:
		sg_free_table(&m->sgt);
		if (m->p)
			vunmap(m->p);
		for (i = 0; m->pages && i < m->npages; i++)
			if (m->pages[i])
				__free_page(m->pages[i]);
		kfree(m->pages);
		break;
	}
}

/*
 * The client WRITEs into the server's window and READs it back, both in
 * memory of @kind, at unaligned offsets.
 */
static void test_write_read(const char *ip, struct pair *p,
			    enum mem_kind kind, size_t len)
{
	const size_t loff = 3, woff = 5, slack = 64;
	struct kmem local = {}, remote = {};
	struct krdma_window *grant = NULL;
	struct krdma_token tok;
	struct krdma_req *req;
	long bad = 0;
	int ret, st;

	req = kzalloc(sizeof(*req), GFP_KERNEL);
	ret = req ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&local, kind, len + slack,
			       KRDMA_ACCESS_LOCAL_WRITE);
	if (!ret)
		ret = kmem_get(&remote, kind, len + slack,
			       KRDMA_ACCESS_REMOTE_READ |
			       KRDMA_ACCESS_REMOTE_WRITE);
	if (ret) {
		result(false, "%s %s write+read %zu: setup: %d", ip,
		       mem_names[kind], len, ret);
		goto out;
	}
	memset(remote.p, 0xee, len + slack);
	fill(local.p + loff, len, len & 0xff);

	grant = krdma_grant_create(p->server, remote.buf, woff, len,
				   KRDMA_ACCESS_REMOTE_READ |
				   KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(grant)) {
		result(false, "%s %s write+read %zu: grant: %ld", ip,
		       mem_names[kind], len, PTR_ERR(grant));
		grant = NULL;
		goto out;
	}
	krdma_grant_token(grant, &tok);

	req->opcode = KRDMA_OP_WRITE;
	req->num_sge = 1;
	req->sge[0].buf = local.buf;
	req->sge[0].offset = loff;
	req->sge[0].length = len;
	req->remote_addr = tok.addr;
	req->rkey = tok.rkey;
	/* A window larger than one registration: its key table */
	if (tok.seg_shift) {
		req->rkeys = krdma_rkeys_get(p->client, &tok);
		if (IS_ERR(req->rkeys)) {
			result(false, "%s %s write+read %zu: key table: %ld",
			       ip, mem_names[kind], len, PTR_ERR(req->rkeys));
			req->rkeys = NULL;
			goto out;
		}
		diag("%s %s %zu bytes: a token of %llu registrations", ip,
		     mem_names[kind], len,
		     ((tok.addr + len - 1) >> tok.seg_shift) + 1);
	}
	st = run_op(p->client, req);
	if (!st) {
		wait_bytes(remote.p + woff, local.p + loff, len);
		bad = check(remote.p + woff, len, len & 0xff);
	}
	result(!st && bad == -1 && ((u8 *)remote.p)[woff - 1] == 0xee &&
	       ((u8 *)remote.p)[woff + len] == 0xee,
	       "%s %s write %zu bytes verified", ip, mem_names[kind], len);
	if (st || bad != -1)
		diag("status %d, first bad byte %ld", st, bad);

	/* Read it back into a cleared local buffer */
	memset(local.p, 0, len + slack);
	req->opcode = KRDMA_OP_READ;
	st = run_op(p->client, req);
	bad = st ? 0 : check(local.p + loff, len, len & 0xff);
	result(!st && bad == -1, "%s %s read %zu bytes verified", ip,
	       mem_names[kind], len);
	if (st || bad != -1)
		diag("status %d, first bad byte %ld", st, bad);
out:
	if (req)
		krdma_rkeys_put(req->rkeys);
	if (grant)
		krdma_grant_destroy(grant);
	kmem_put(&local, kind);
	kmem_put(&remote, kind);
	kfree(req);
}

/* SEND from the client into a RECV of the server; completion context */
static void test_send_recv(const char *ip, struct pair *p, enum mem_kind kind)
{
	const size_t len = 3000;
	struct krdma_req *recv, *send;
	DECLARE_COMPLETION_ONSTACK(recv_done);
	struct kmem src = {}, dst = {};
	long bad = -2;
	int ret, st;

	recv = kzalloc(sizeof(*recv), GFP_KERNEL);
	send = kzalloc(sizeof(*send), GFP_KERNEL);
	ret = recv && send ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&src, kind, len, 0);
	if (!ret)
		ret = kmem_get(&dst, kind, len, KRDMA_ACCESS_LOCAL_WRITE);
	if (ret) {
		result(false, "%s %s send/recv: setup: %d", ip,
		       mem_names[kind], ret);
		goto out;
	}
	fill(src.p, len, 77);

	recv->opcode = KRDMA_OP_RECV;
	recv->num_sge = 1;
	recv->sge[0].buf = dst.buf;
	recv->sge[0].length = len;
	recv->done = note_context;
	recv->context = &recv_done;
	done_in_softirq = false;
	ret = krdma_post(p->server, recv);
	if (ret) {
		result(false, "%s %s send/recv: post recv: %d", ip,
		       mem_names[kind], ret);
		goto out;
	}

	send->opcode = KRDMA_OP_SEND;
	send->num_sge = 1;
	send->sge[0].buf = src.buf;
	send->sge[0].length = len;
	st = run_op(p->client, send);
	if (!wait_for_completion_timeout(&recv_done, TIMEOUT)) {
		/* Fail the connection: the RECV then completes, flushed */
		krdma_disconnect(p->server);
		wait_for_completion(&recv_done);
		st = -ETIMEDOUT;
	}
	if (!st)
		bad = check(dst.p, len, 77);
	result(!st && bad == -1, "%s %s send/recv %zu bytes verified", ip,
	       mem_names[kind], len);
	if (kind == MEM_KMALLOC)
		result(done_in_softirq,
		       "%s completion callbacks run in softirq context", ip);
out:
	kmem_put(&src, kind);
	kmem_put(&dst, kind);
	kfree(recv);
	kfree(send);
}

struct gone {
	struct completion done;
	int error;
};

static void gone_event(struct krdma_conn *conn, int error, void *context)
{
	struct gone *g = context;

	g->error = error;
	complete(&g->done);
}

/* A grant works only through its own connection's peer */
static void test_grant_scope(const char *ip, struct pair *p1)
{
	struct krdma_window *grant;
	struct krdma_token tok;
	struct krdma_conn_params params = { .event = gone_event };
	struct krdma_conn_info info;
	struct krdma_req *req;
	struct kmem src = {}, dst = {};
	struct pair p2;
	int ret, st;
	/* static: an event that comes late must find it */
	static struct gone g;

	init_completion(&g.done);
	g.error = 0;
	params.context = &g;
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	if (!req || kmem_get(&src, MEM_KMALLOC, 4096, 0) ||
	    kmem_get(&dst, MEM_KMALLOC, 4096, KRDMA_ACCESS_REMOTE_WRITE)) {
		result(false, "%s grant scope: setup", ip);
		goto out;
	}
	memset(dst.p, 0xee, 4096);
	ret = pair_open(&p2, ip, &params);
	if (ret) {
		result(false, "%s grant scope: second connection: %d", ip, ret);
		goto out;
	}
	grant = krdma_grant_create(p1->server, dst.buf, 0, 4096,
				   KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(grant)) {
		result(false, "%s grant scope: grant: %ld", ip, PTR_ERR(grant));
		goto out_close;
	}
	krdma_grant_token(grant, &tok);
	req->opcode = KRDMA_OP_WRITE;
	req->num_sge = 1;
	req->sge[0].buf = src.buf;
	req->sge[0].length = 4096;
	req->remote_addr = tok.addr;
	req->rkey = tok.rkey;
	/*
	 * Through the other connection: refused, one way or another (on
	 * iWARP the WRITE may complete, then the peer's TERMINATE ends the
	 * connection: its event says when, after the state is ERROR)
	 */
	st = run_op(p2.client, req);
	if (!st)
		wait_for_completion_timeout(&g.done, TIMEOUT);
	krdma_conn_info(p2.client, &info);
	result(((u8 *)dst.p)[0] == 0xee && ((u8 *)dst.p)[4095] == 0xee &&
	       (st || info.state == KRDMA_CONN_ERROR),
	       "%s a token granted on one connection does not work on another",
	       ip);
	krdma_grant_destroy(grant);
out_close:
	pair_close(&p2);
out:
	kmem_put(&src, MEM_KMALLOC);
	kmem_put(&dst, MEM_KMALLOC);
	kfree(req);
}

struct chain {
	struct krdma_conn *conn;
	struct krdma_req write, read;
	struct completion done;
	int post_ret;
	int status;
	bool posted_in_softirq;
};

static void chain_read_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct chain *c = req->context;

	c->status = wc->status;
	complete(&c->done);
}

/* The WRITE's completion posts the READ: from softirq context */
static void chain_write_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct chain *c = req->context;

	c->posted_in_softirq = in_softirq();
	c->status = wc->status;
	if (wc->status) {
		complete(&c->done);
		return;
	}
	c->post_ret = krdma_post(c->conn, &c->read);
	if (c->post_ret)
		complete(&c->done);
}

/* A completion callback posts the next operation */
static void test_chain(const char *ip, struct pair *p)
{
	struct kmem local = {}, remote = {};
	struct krdma_window *grant;
	struct krdma_token tok;
	struct chain *c;
	long bad = -2;
	int ret;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	ret = c ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&local, MEM_KMALLOC, 2 * 16384,
			       KRDMA_ACCESS_LOCAL_WRITE);
	if (!ret)
		ret = kmem_get(&remote, MEM_KMALLOC, 16384,
			       KRDMA_ACCESS_REMOTE_READ |
			       KRDMA_ACCESS_REMOTE_WRITE);
	grant = ret ? ERR_PTR(ret) :
		krdma_grant_create(p->server, remote.buf, 0, 16384,
				   KRDMA_ACCESS_REMOTE_READ |
				   KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(grant)) {
		result(false, "%s chain: setup %ld", ip, PTR_ERR(grant));
		goto out;
	}
	krdma_grant_token(grant, &tok);
	fill(local.p, 16384, 44);
	init_completion(&c->done);
	c->conn = p->client;
	c->write.opcode = KRDMA_OP_WRITE;
	c->write.num_sge = 1;
	c->write.sge[0].buf = local.buf;
	c->write.sge[0].length = 16384;
	c->write.remote_addr = tok.addr;
	c->write.rkey = tok.rkey;
	c->write.done = chain_write_done;
	c->write.context = c;
	c->read = c->write;
	c->read.opcode = KRDMA_OP_READ;
	c->read.sge[0].offset = 16384;
	c->read.done = chain_read_done;
	ret = krdma_post(p->client, &c->write);
	if (!ret && !wait_for_completion_timeout(&c->done, TIMEOUT)) {
		krdma_disconnect(p->client);
		wait_for_completion(&c->done);
		ret = -ETIMEDOUT;
	}
	if (!ret && !c->post_ret && !c->status)
		bad = check(local.p + 16384, 16384, 44);
	result(!ret && !c->post_ret && !c->status && bad == -1 &&
	       c->posted_in_softirq,
	       "%s a completion callback (softirq) posts the next operation", ip);
	if (ret || c->post_ret || c->status || bad != -1)
		diag("ret %d post %d status %d bad %ld", ret, c->post_ret,
		     c->status, bad);
	krdma_grant_destroy(grant);
out:
	kmem_put(&local, MEM_KMALLOC);
	kmem_put(&remote, MEM_KMALLOC);
	kfree(c);
}

/*
 * Unsignaled operations, krdma_post_list() and short requests
 */

/* WRITE_IMM with no range: -EOPNOTSUPP on iWARP, -EINVAL elsewhere */
static bool conn_is_iwarp(struct krdma_conn *conn)
{
	struct krdma_req *req = krdma_req_alloc(0, GFP_KERNEL);
	bool iwarp;

	if (!req)
		return false;
	req->opcode = KRDMA_OP_WRITE_IMM;
	req->done = note_context;	/* never called: refused */
	iwarp = krdma_post(conn, req) == -EOPNOTSUPP;
	kfree(req);
	return iwarp;
}

/* What the dones of one batch saw */
struct quiet {
	atomic_t dones;			/* every done call */
	atomic_t quiet_dones;		/* those of unsignaled requests */
	u32 quiet_status;		/* the last of those */
	u32 status;			/* the signaled request's */
	struct completion last;		/* the signaled request's done */
	struct completion failed;	/* an unsignaled request's done */
	struct krdma_conn *conn;	/* repost from done (flush case) */
	struct krdma_req *repost;
	int repost_ret;
	bool repost_in_task;
};

static void quiet_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct quiet *q = req->context;

	atomic_inc(&q->dones);
	if (req->flags & KRDMA_REQ_UNSIGNALED) {
		atomic_inc(&q->quiet_dones);
		q->quiet_status = wc->status;
		/*
		 * A done may post, in any context: on a connection being
		 * torn down that is -ENOTCONN, never a deadlock
		 */
		if (q->repost) {
			q->repost_in_task = in_task();
			q->repost_ret = krdma_post(q->conn, q->repost);
		}
		complete(&q->failed);
		return;
	}
	q->status = wc->status;
	complete(&q->last);
}

static void quiet_init(struct quiet *q)
{
	memset(q, 0, sizeof(*q));
	init_completion(&q->last);
	init_completion(&q->failed);
	q->repost_ret = 1;
}

/* Wait for the batch's last done; fail the connection if it never comes */
static int quiet_wait(struct quiet *q, struct krdma_conn *conn)
{
	if (wait_for_completion_timeout(&q->last, TIMEOUT))
		return 0;
	krdma_disconnect(conn);
	wait_for_completion(&q->last);
	return -ETIMEDOUT;
}

/*
 * @n WRITEs (or READs) of @len bytes in short requests, all unsignaled
 * but the last, by one krdma_post_list(): one done, the last's, and every
 * byte in place when it comes; twice, with the same requests, which are
 * the caller's again after the last one's success.
 */
static void test_unsignaled_batch(const char *ip, struct pair *p, u32 opcode,
				  unsigned int n, size_t len)
{
	const char *name = opcode == KRDMA_OP_WRITE ? "WRITE" : "READ";
	struct kmem local = {}, remote = {};
	struct krdma_window *grant = NULL;
	struct krdma_req **reqs;
	struct krdma_token tok;
	unsigned int i, round, accepted;
	struct quiet *q;
	long bad = -1;
	int ret;

	reqs = kcalloc(n, sizeof(*reqs), GFP_KERNEL);
	q = kmalloc(sizeof(*q), GFP_KERNEL);
	ret = reqs && q ? 0 : -ENOMEM;
	for (i = 0; !ret && i < n; i++) {
		reqs[i] = krdma_req_alloc(1, GFP_KERNEL);
		if (!reqs[i])
			ret = -ENOMEM;
	}
	if (!ret)
		ret = kmem_get(&local, MEM_VMALLOC, n * len,
			       KRDMA_ACCESS_LOCAL_WRITE);
	if (!ret)
		ret = kmem_get(&remote, MEM_VMALLOC, n * len,
			       KRDMA_ACCESS_REMOTE_READ |
			       KRDMA_ACCESS_REMOTE_WRITE);
	if (!ret) {
		grant = krdma_grant_create(p->server, remote.buf, 0, n * len,
					   KRDMA_ACCESS_REMOTE_READ |
					   KRDMA_ACCESS_REMOTE_WRITE);
		if (IS_ERR(grant)) {
			ret = PTR_ERR(grant);
			grant = NULL;
		}
	}
	if (ret) {
		result(false, "%s %u unsignaled %ss of %zu: setup: %d", ip, n,
		       name, len, ret);
		goto out;
	}
	krdma_grant_token(grant, &tok);

	for (round = 0; round < 2; round++) {
		quiet_init(q);
		for (i = 0; i < n; i++) {
			struct krdma_req *req = reqs[i];
			u8 *src = opcode == KRDMA_OP_WRITE ? local.p : remote.p;

			fill(src + i * len, len, round * 64 + i);
			req->opcode = opcode;
			req->flags = i < n - 1 ? KRDMA_REQ_UNSIGNALED : 0;
			req->num_sge = 1;
			req->sge[0].buf = local.buf;
			req->sge[0].offset = i * len;
			req->sge[0].length = len;
			req->remote_addr = tok.addr + i * len;
			req->rkey = tok.rkey;
			req->rkeys = NULL;
			req->done = quiet_done;
			req->context = q;
		}
		ret = krdma_post_list(p->client, reqs, n, &accepted);
		if (ret || accepted != n) {
			result(false, "%s %u unsignaled %ss: post_list %d, %u accepted",
			       ip, n, name, ret, accepted);
			/* Those accepted still complete: wait for nothing */
			krdma_disconnect(p->client);
			goto out;
		}
		ret = quiet_wait(q, p->client);
		for (i = 0; !ret && !q->status && i < n; i++) {
			u8 *dst = (opcode == KRDMA_OP_WRITE ? remote.p :
				   local.p) + i * len;

			if (opcode == KRDMA_OP_WRITE)
				wait_bytes(dst, (u8 *)local.p + i * len, len);
			bad = check(dst, len, round * 64 + i);
			if (bad != -1)
				break;
		}
		result(!ret && !q->status && bad == -1 &&
		       atomic_read(&q->dones) == 1,
		       "%s %u %ss of %zu bytes, %u unsignaled, one krdma_post_list(): one done%s, every byte verified",
		       ip, n, name, len, n - 1,
		       round ? " (requests reused)" : "");
		if (ret || q->status || bad != -1 || atomic_read(&q->dones) != 1)
			diag("ret %d status %u dones %d op %u byte %ld", ret,
			     q->status, atomic_read(&q->dones), i, bad);
		if (ret || q->status)
			break;
	}
out:
	if (grant)
		krdma_grant_destroy(grant);
	kmem_put(&local, MEM_VMALLOC);
	kmem_put(&remote, MEM_VMALLOC);
	for (i = 0; reqs && i < n; i++)
		kfree(reqs[i]);
	kfree(reqs);
	kfree(q);
}

/*
 * An unsignaled WRITE queued behind a 64 MiB one is flushed by a
 * disconnect: its done reports WR_FLUSH_ERR, once; and that done posts
 * again (on the connection being torn down: -ENOTCONN), which used to
 * deadlock when done ran under the connection's post mutex.
 */
static void test_unsignaled_flush(const char *ip)
{
	struct kmem big = {}, small = {}, remote = {};
	struct krdma_req *reqs[2] = {}, *repost = NULL;
	struct krdma_window *grant = NULL;
	struct krdma_rkeys *rkeys = NULL;
	struct krdma_token tok;
	unsigned int i, accepted = 0;
	struct quiet *q;
	struct pair p;
	int ret;

	ret = pair_open(&p, ip, NULL);
	if (ret) {
		result(false, "%s unsignaled flush: pair_open %d", ip, ret);
		return;
	}
	q = kmalloc(sizeof(*q), GFP_KERNEL);
	reqs[0] = krdma_req_alloc(1, GFP_KERNEL);
	reqs[1] = krdma_req_alloc(1, GFP_KERNEL);
	repost = krdma_req_alloc(1, GFP_KERNEL);
	ret = q && reqs[0] && reqs[1] && repost ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&big, MEM_VMALLOC, SZ_64M, 0);
	if (!ret)
		ret = kmem_get(&small, MEM_KMALLOC, 4096, 0);
	if (!ret)
		ret = kmem_get(&remote, MEM_VMALLOC, SZ_64M + 4096,
			       KRDMA_ACCESS_REMOTE_WRITE);
	if (!ret) {
		grant = krdma_grant_create(p.server, remote.buf, 0,
					   SZ_64M + 4096,
					   KRDMA_ACCESS_REMOTE_WRITE);
		if (IS_ERR(grant)) {
			ret = PTR_ERR(grant);
			grant = NULL;
		}
	}
	if (!ret) {
		krdma_grant_token(grant, &tok);
		/* More than one registration on siw: the key table */
		if (tok.seg_shift) {
			rkeys = krdma_rkeys_get(p.client, &tok);
			if (IS_ERR(rkeys)) {
				ret = PTR_ERR(rkeys);
				rkeys = NULL;
			}
		}
	}
	if (ret) {
		result(false, "%s unsignaled flush: setup %d", ip, ret);
		goto out;
	}
	quiet_init(q);
	q->conn = p.client;
	q->repost = repost;
	repost->opcode = KRDMA_OP_WRITE;
	repost->num_sge = 1;
	repost->sge[0].buf = small.buf;
	repost->sge[0].length = 1;
	repost->remote_addr = tok.addr;
	repost->rkey = tok.rkey;
	repost->rkeys = rkeys;
	repost->done = quiet_done;	/* never called: refused */
	repost->context = q;

	for (i = 0; i < 2; i++) {
		reqs[i]->opcode = KRDMA_OP_WRITE;
		reqs[i]->num_sge = 1;
		reqs[i]->sge[0].buf = i ? small.buf : big.buf;
		reqs[i]->sge[0].length = i ? 4096 : SZ_64M;
		reqs[i]->remote_addr = tok.addr + i * SZ_64M;
		reqs[i]->rkey = tok.rkey;
		reqs[i]->rkeys = rkeys;
		reqs[i]->done = quiet_done;
		reqs[i]->context = q;
	}
	reqs[1]->flags = KRDMA_REQ_UNSIGNALED;
	ret = krdma_post_list(p.client, reqs, 2, &accepted);
	if (ret || accepted != 2) {
		result(false, "%s unsignaled flush: post_list %d, %u accepted",
		       ip, ret, accepted);
		if (accepted)
			krdma_disconnect(p.client);
		goto out;
	}
	/* The small WRITE waits behind 256 pieces of 256 KiB: flush it */
	krdma_disconnect(p.client);
	/* Both dones have run once krdma_disconnect() returned */
	ret = completion_done(&q->last) && completion_done(&q->failed) ?
	      0 : -ETIMEDOUT;
	result(!ret && atomic_read(&q->quiet_dones) == 1 &&
	       q->quiet_status == KRDMA_WC_WR_FLUSH_ERR,
	       "%s an unsignaled WRITE flushed by a disconnect reports WR_FLUSH_ERR, once",
	       ip);
	result(q->repost_ret == -ENOTCONN,
	       "%s a done callback (%s context) posts on a closing connection: -ENOTCONN",
	       ip, q->repost_in_task ? "process" : "softirq");
	if (ret || atomic_read(&q->quiet_dones) != 1 ||
	    q->quiet_status != KRDMA_WC_WR_FLUSH_ERR || q->repost_ret != -ENOTCONN)
		diag("ret %d quiet dones %d status %u repost %d (big: %u)",
		     ret, atomic_read(&q->quiet_dones), q->quiet_status,
		     q->repost_ret, q->status);
out:
	pair_close(&p);
	krdma_rkeys_put(rkeys);
	if (grant)
		krdma_grant_destroy(grant);
	kmem_put(&big, MEM_VMALLOC);
	kmem_put(&small, MEM_KMALLOC);
	kmem_put(&remote, MEM_VMALLOC);
	kfree(reqs[0]);
	kfree(reqs[1]);
	kfree(repost);
	kfree(q);
}

/* The flag's errno contract, and krdma_post_list() stopping at a refusal */
static void test_unsignaled_errnos(const char *ip, struct pair *p,
				   bool iwarp)
{
	struct krdma_req *reqs[2] = {};
	struct kmem mem = {};
	struct krdma_wc wc;
	unsigned int accepted = 99;
	struct quiet *q;
	int ret, r[6];

	q = kmalloc(sizeof(*q), GFP_KERNEL);
	reqs[0] = krdma_req_alloc(1, GFP_KERNEL);
	reqs[1] = krdma_req_alloc(1, GFP_KERNEL);
	ret = q && reqs[0] && reqs[1] ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&mem, MEM_KMALLOC, 4096,
			       KRDMA_ACCESS_LOCAL_WRITE);
	if (ret) {
		result(false, "%s unsignaled errnos: setup %d", ip, ret);
		goto out;
	}
	quiet_init(q);
	reqs[0]->num_sge = 1;
	reqs[0]->sge[0].buf = mem.buf;
	reqs[0]->sge[0].length = 64;
	reqs[0]->done = quiet_done;
	reqs[0]->context = q;

	reqs[0]->opcode = KRDMA_OP_RECV;
	reqs[0]->flags = KRDMA_REQ_UNSIGNALED;
	r[0] = krdma_post(p->client, reqs[0]);		/* -EINVAL */
	reqs[0]->opcode = KRDMA_OP_SEND;
	reqs[0]->flags = 1U << 5;
	r[1] = krdma_post(p->client, reqs[0]);		/* -EINVAL */
	reqs[0]->flags = 1U << 31;			/* krdma's own */
	r[2] = krdma_post(p->client, reqs[0]);		/* -EINVAL */
	reqs[0]->flags = KRDMA_REQ_UNSIGNALED;
	r[3] = krdma_post_sync(p->client, reqs[0], TIMEOUT, &wc); /* -EINVAL */
	reqs[0]->done = quiet_done;
	reqs[0]->context = q;
	reqs[0]->opcode = KRDMA_OP_READ;
	reqs[0]->remote_addr = 0;
	reqs[0]->rkey = 0;
	r[4] = iwarp ? krdma_post(p->client, reqs[0]) : -EOPNOTSUPP;
	r[5] = krdma_req_alloc(KRDMA_OP_MAX_SGE + 1, GFP_KERNEL) ? 0 : -ENOMEM;
	result(r[0] == -EINVAL && r[1] == -EINVAL && r[2] == -EINVAL &&
	       r[3] == -EINVAL && r[4] == -EOPNOTSUPP && r[5] == -ENOMEM &&
	       !atomic_read(&q->dones),
	       "%s unsignaled: refused on RECV, with unknown flags, by krdma_post_sync()%s",
	       ip, iwarp ? ", on an iWARP READ" : "");
	if (r[0] != -EINVAL || r[1] != -EINVAL || r[2] != -EINVAL ||
	    r[3] != -EINVAL || r[4] != -EOPNOTSUPP || r[5] != -ENOMEM)
		diag("%d %d %d %d %d %d", r[0], r[1], r[2], r[3], r[4], r[5]);

	/* The second is refused: the first, a RECV, was accepted */
	reqs[0]->opcode = KRDMA_OP_RECV;
	reqs[0]->flags = 0;
	reqs[1]->opcode = KRDMA_OP_RECV;
	reqs[1]->flags = KRDMA_REQ_UNSIGNALED;
	reqs[1]->done = quiet_done;
	reqs[1]->context = q;
	ret = krdma_post_list(p->client, reqs, 2, &accepted);
	result(ret == -EINVAL && accepted == 1,
	       "%s krdma_post_list() stops at the first refusal and says how many went",
	       ip);
	if (ret != -EINVAL || accepted != 1)
		diag("ret %d accepted %u", ret, accepted);
	if (!accepted)
		goto out;
	/* An empty SEND fills that RECV: then q and mem may go */
	reqs[1]->opcode = KRDMA_OP_SEND;
	reqs[1]->flags = 0;
	reqs[1]->num_sge = 0;
	ret = krdma_post_sync(p->server, reqs[1], TIMEOUT, &wc);
	if (ret || quiet_wait(q, p->client))
		diag("the RECV's SEND: %d, status %u", ret, wc.status);
out:
	kmem_put(&mem, MEM_KMALLOC);
	kfree(reqs[0]);
	kfree(reqs[1]);
	kfree(q);
}

/* The peer goes away: the consumer is told through its event callback */
static void test_peer_gone(const char *ip)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct krdma_conn_params params = { .event = gone_event };
	struct krdma_conn *client, *server;
	struct sockaddr_storage bound;
	struct krdma_conn_info info;
	struct krdma_listener *l;
	/* static: an event that comes late must find it */
	static struct gone g;

	init_completion(&g.done);
	g.error = 0;
	params.context = &g;
	if (!in4_pton(ip, -1, (u8 *)&sin.sin_addr, -1, NULL))
		return;
	l = krdma_listen(&init_net, (struct sockaddr *)&sin, 1, NULL);
	if (IS_ERR(l) || krdma_listener_addr(l, &bound)) {
		result(false, "%s peer gone: listen", ip);
		goto out_listener;
	}
	client = krdma_connect(&init_net, (struct sockaddr *)&bound, NULL,
			       TIMEOUT, &params);
	if (IS_ERR(client)) {
		result(false, "%s peer gone: connect %ld", ip, PTR_ERR(client));
		goto out_listener;
	}
	if (krdma_accept(l, false, TIMEOUT, &server)) {
		result(false, "%s peer gone: accept", ip);
		krdma_conn_close(client);
		goto out_listener;
	}
	krdma_conn_close(server);
	if (!wait_for_completion_timeout(&g.done, TIMEOUT)) {
		result(false, "%s peer gone: no event", ip);
		krdma_conn_close(client);
		goto out_listener;
	}
	krdma_conn_info(client, &info);
	result(g.error < 0 && info.state == KRDMA_CONN_ERROR,
	       "%s the consumer's event callback reports the peer gone (%d)",
	       ip, g.error);
	krdma_conn_close(client);
out_listener:
	if (!IS_ERR(l))
		krdma_listener_close(l);
}

struct sess_track {
	struct completion connected;
	atomic_t changes;
};

static void sess_change(struct krdma_session *s,
			enum krdma_session_state state, int error,
			void *context)
{
	struct sess_track *t = context;

	atomic_inc(&t->changes);
	if (state == KRDMA_SESSION_CONNECTED)
		complete(&t->connected);
}

static struct krdma_listener *listen_on(struct sockaddr_storage *addr)
{
	struct krdma_listener *l;

	l = krdma_listen(&init_net, (struct sockaddr *)addr, 4, NULL);
	if (!IS_ERR(l) && krdma_listener_addr(l, addr)) {
		krdma_listener_close(l);
		return ERR_PTR(-ENOTCONN);
	}
	return l;
}

/*
 * A session keeps its connection up: heartbeats while the peer is there,
 * reconnects with back-off after the peer restarts (its listener and
 * connection close, then it listens again on the same port).
 */
static void test_session(const char *ip)
{
	struct krdma_session_params params = {
		.heartbeat_ms = 200,
		.reconnect = true,
		.backoff_min_ms = 50,
		.backoff_max_ms = 400,
		.state_change = sess_change,
	};
	struct sockaddr_in *sin;
	struct sockaddr_storage addr = {};
	struct krdma_session_stats st;
	struct krdma_listener *l;
	struct krdma_conn *server, *conn;
	struct krdma_session *s;
	enum krdma_session_state state;
	static struct sess_track t;
	struct kmem src = {}, dst = {};
	struct krdma_window *grant;
	struct krdma_token tok;
	struct krdma_req *req;
	unsigned long end;
	int ret;

	sin = (struct sockaddr_in *)&addr;
	sin->sin_family = AF_INET;
	if (!in4_pton(ip, -1, (u8 *)&sin->sin_addr, -1, NULL))
		return;
	init_completion(&t.connected);
	atomic_set(&t.changes, 0);
	params.context = &t;

	l = listen_on(&addr);
	if (IS_ERR(l)) {
		result(false, "%s session: listen: %ld", ip, PTR_ERR(l));
		return;
	}
	s = krdma_session_create(&init_net, (struct sockaddr *)&addr, NULL,
				 &params);
	if (IS_ERR(s)) {
		result(false, "%s session: create: %ld", ip, PTR_ERR(s));
		krdma_listener_close(l);
		return;
	}
	ret = wait_for_completion_timeout(&t.connected, TIMEOUT) ?
	      krdma_accept(l, false, TIMEOUT, &server) : -ETIMEDOUT;
	result(!ret, "%s session connects in the background", ip);
	if (ret) {
		krdma_listener_close(l);
		goto out_destroy;
	}

	/* Heartbeats every 200 ms: two answered, waited for 10 s at most */
	end = jiffies + 10 * HZ;
	do {
		msleep(50);
		state = krdma_session_info(s, &st);
	} while (st.heartbeats < 2 && time_before(jiffies, end));
	result(state == KRDMA_SESSION_CONNECTED && st.heartbeats >= 2 &&
	       !st.heartbeat_failures,
	       "%s session heartbeats are answered (%llu)", ip, st.heartbeats);

	/*
	 * The peer restarts: its listener goes first, so that the session
	 * cannot reconnect to it before its connection goes too
	 */
	reinit_completion(&t.connected);
	krdma_listener_close(l);
	krdma_conn_close(server);
	/* Noticed, and an attempt failed: waited for 10 s at most */
	end = jiffies + 10 * HZ;
	do {
		msleep(50);
		state = krdma_session_info(s, &st);
	} while ((state != KRDMA_SESSION_RECONNECTING ||
		  !st.connect_failures) && time_before(jiffies, end));
	result(state == KRDMA_SESSION_RECONNECTING && st.failures == 1 &&
	       st.connect_failures >= 1,
	       "%s session notices the peer gone and retries with back-off (%llu attempts)",
	       ip, st.connect_failures);
	l = listen_on(&addr);
	if (IS_ERR(l)) {
		result(false, "%s session: listen again: %ld", ip, PTR_ERR(l));
		goto out_destroy;
	}
	ret = wait_for_completion_timeout(&t.connected, TIMEOUT) ?
	      krdma_accept(l, false, TIMEOUT, &server) : -ETIMEDOUT;
	state = krdma_session_info(s, &st);
	result(!ret && state == KRDMA_SESSION_CONNECTED && st.reconnects == 1,
	       "%s session reconnects after the peer restarts", ip);
	if (ret) {
		krdma_listener_close(l);
		goto out_destroy;
	}

	/* And moves data again */
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	conn = krdma_session_conn(s);
	ret = req && conn ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&src, MEM_KMALLOC, 8192, 0);
	if (!ret)
		ret = kmem_get(&dst, MEM_KMALLOC, 8192,
			       KRDMA_ACCESS_REMOTE_WRITE);
	grant = ret ? ERR_PTR(ret) :
		krdma_grant_create(server, dst.buf, 0, 8192,
				   KRDMA_ACCESS_REMOTE_WRITE);
	if (!IS_ERR(grant)) {
		krdma_grant_token(grant, &tok);
		fill(src.p, 8192, 99);
		req->opcode = KRDMA_OP_WRITE;
		req->num_sge = 1;
		req->sge[0].buf = src.buf;
		req->sge[0].length = 8192;
		req->remote_addr = tok.addr;
		req->rkey = tok.rkey;
		ret = run_op(conn, req);
		if (!ret)
			wait_bytes(dst.p, src.p, 8192);
		ret = ret ?: (check(dst.p, 8192, 99) == -1 ? 0 : -EILSEQ);
		krdma_grant_destroy(grant);
	} else {
		ret = PTR_ERR(grant);
	}
	result(!ret, "%s a reconnected session moves data (%d)", ip, ret);
	if (conn)
		krdma_conn_put(conn);
	kmem_put(&src, MEM_KMALLOC);
	kmem_put(&dst, MEM_KMALLOC);
	kfree(req);
	krdma_conn_close(server);
	krdma_listener_close(l);
out_destroy:
	krdma_session_destroy(s);
}

/*
 * A busy session connection is not a dead one: WRITEs through a session
 * while its heartbeats go, either keeping the send queue full (the
 * heartbeat finds no room) or on a slow link (the heartbeat waits behind
 * more than the link moves in its 10 s). The connection must be kept,
 * every WRITE succeed and every byte arrive.
 */
struct busy_run {
	const char *name;
	struct sockaddr_storage dst;	/* the listener's address */
	struct sockaddr_storage src;	/* AF_UNSPEC: any */
	unsigned int heartbeat_ms;
	u32 sq_depth;			/* the connection's; 0: krdma's */
	unsigned int batch;		/* WRITEs posted at once */
	size_t len;			/* bytes each */
	unsigned long run;		/* jiffies: batches until this long */
	bool unsignaled;		/* one krdma_post_list(), one done */
};

struct busy_ops {
	atomic_t left;
	atomic_t failed;
	u32 status;			/* the last failure's */
	struct completion done;
};

static void busy_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct busy_ops *b = req->context;

	if (wc->status != KRDMA_WC_SUCCESS) {
		b->status = wc->status;
		atomic_inc(&b->failed);
	}
	/* An unsignaled one is done only when it fails: not counted */
	if (!(req->flags & KRDMA_REQ_UNSIGNALED) &&
	    atomic_dec_and_test(&b->left))
		complete(&b->done);
}

/* The batch, all but the last unsignaled, in one krdma_post_list() */
static int busy_post_list(struct krdma_conn *conn, struct krdma_req *reqs,
			  struct busy_ops *b, const struct busy_run *r)
{
	struct krdma_req **list;
	unsigned int i, accepted = 0;
	int ret = -ENOMEM;

	list = kcalloc(r->batch, sizeof(*list), GFP_KERNEL);
	if (list) {
		for (i = 0; i < r->batch; i++)
			list[i] = &reqs[i];
		ret = krdma_post_list(conn, list, r->batch, &accepted);
		kfree(list);
	}
	/* The last, the one counted, was not taken: it never completes */
	if (accepted < r->batch)
		atomic_dec(&b->left);
	return ret ?: (accepted < r->batch ? -EIO : 0);
}

static int busy_batch(struct krdma_conn *conn, struct krdma_req *reqs,
		      struct busy_ops *b, const struct busy_run *r,
		      struct kmem *src, const struct krdma_token *tok,
		      struct krdma_rkeys *rkeys)
{
	unsigned int i;
	int ret = 0;

	atomic_set(&b->left, (r->unsignaled ? 1 : r->batch) + 1);
	reinit_completion(&b->done);
	for (i = 0; i < r->batch; i++) {
		struct krdma_req *req = &reqs[i];

		memset(req, 0, sizeof(*req));
		req->opcode = KRDMA_OP_WRITE;
		req->num_sge = 1;
		req->sge[0].buf = src->buf;
		req->sge[0].offset = i * r->len;
		req->sge[0].length = r->len;
		req->remote_addr = tok->addr + i * r->len;
		req->rkey = tok->rkey;
		req->rkeys = rkeys;
		req->done = busy_done;
		req->context = b;
		if (r->unsignaled) {
			/* All but the last: posted by busy_post_list() */
			if (i < r->batch - 1)
				req->flags = KRDMA_REQ_UNSIGNALED;
			continue;
		}
		ret = krdma_post(conn, req);
		if (ret) {
			/* What was not posted never completes: count it off */
			atomic_sub(r->batch - i, &b->left);
			break;
		}
	}
	if (r->unsignaled)
		ret = busy_post_list(conn, reqs, b, r);
	if (atomic_dec_and_test(&b->left))
		complete(&b->done);
	if (!wait_for_completion_timeout(&b->done, 120 * HZ)) {
		/* Never: the close completes them, before the memory goes */
		krdma_disconnect(conn);
		wait_for_completion(&b->done);
		return -ETIMEDOUT;
	}
	return ret ?: (atomic_read(&b->failed) ? -EIO : 0);
}

static void test_session_busy(const struct busy_run *r)
{
	struct krdma_session_params params = {
		.heartbeat_ms = r->heartbeat_ms,
		.state_change = sess_change,
	};
	struct sockaddr_storage addr = r->dst;
	struct kmem src = {}, dst = {};
	struct krdma_session_stats st;
	enum krdma_session_state state;
	struct krdma_conn *server, *conn = NULL;
	struct krdma_window *grant = NULL;
	struct krdma_rkeys *rkeys = NULL;
	struct krdma_req *reqs = NULL;
	struct krdma_listener *l;
	struct krdma_session *s;
	static struct busy_ops b;
	static struct sess_track t;
	struct krdma_token tok;
	size_t size = r->batch * r->len;
	unsigned int batches = 0;
	unsigned long end;
	long bad = -1;
	int ret;

	init_completion(&t.connected);
	atomic_set(&t.changes, 0);
	params.context = &t;
	params.conn.sq_depth = r->sq_depth;
	init_completion(&b.done);
	atomic_set(&b.failed, 0);
	b.status = KRDMA_WC_SUCCESS;

	l = listen_on(&addr);
	if (IS_ERR(l)) {
		result(false, "%s: listen: %ld", r->name, PTR_ERR(l));
		return;
	}
	s = krdma_session_create(&init_net, (struct sockaddr *)&addr,
				 r->src.ss_family ?
				 (struct sockaddr *)&r->src : NULL, &params);
	if (IS_ERR(s)) {
		result(false, "%s: session: %ld", r->name, PTR_ERR(s));
		krdma_listener_close(l);
		return;
	}
	ret = wait_for_completion_timeout(&t.connected, TIMEOUT) ?
	      krdma_accept(l, false, TIMEOUT, &server) : -ETIMEDOUT;
	krdma_listener_close(l);
	if (ret) {
		result(false, "%s: connect: %d", r->name, ret);
		goto out_destroy;
	}
	conn = krdma_session_conn(s);
	reqs = kcalloc(r->batch, sizeof(*reqs), GFP_KERNEL);
	ret = conn && reqs ? 0 : -ENOMEM;
	if (!ret)
		ret = kmem_get(&src, MEM_VMALLOC, size, 0);
	if (!ret)
		ret = kmem_get(&dst, MEM_VMALLOC, size,
			       KRDMA_ACCESS_REMOTE_WRITE);
	grant = ret ? ERR_PTR(ret) :
		krdma_grant_create(server, dst.buf, 0, size,
				   KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(grant)) {
		ret = PTR_ERR(grant);
		grant = NULL;
		goto out_close;
	}
	krdma_grant_token(grant, &tok);
	/* siw registers 1 MiB at a time: a larger window has a key table */
	if (tok.seg_shift) {
		rkeys = krdma_rkeys_get(conn, &tok);
		if (IS_ERR(rkeys)) {
			ret = PTR_ERR(rkeys);
			rkeys = NULL;
			goto out_close;
		}
	}
	fill(src.p, size, 41);
	memset(dst.p, 0, size);

	end = jiffies + r->run;
	do {
		ret = busy_batch(conn, reqs, &b, r, &src, &tok, rkeys);
		batches++;
	} while (!ret && time_before(jiffies, end));
	if (!ret && !wait_bytes(dst.p, src.p, size))
		ret = -EILSEQ;
	if (ret == -EILSEQ)
		bad = check(dst.p, size, 41);
out_close:
	state = krdma_session_info(s, &st);
	result(!ret && state == KRDMA_SESSION_CONNECTED && !st.failures &&
	       !st.heartbeat_failures && st.heartbeats,
	       "%s: %u x %u WRITEs of %zu bytes verified, connection kept (%d, status %u, state %u, failures %llu, heartbeats %llu answered, %llu not, first bad byte %ld)",
	       r->name, batches, r->batch, r->len, ret, b.status, state,
	       st.failures, st.heartbeats, st.heartbeat_failures, bad);
	krdma_rkeys_put(rkeys);
	if (grant)
		krdma_grant_destroy(grant);
	if (conn)
		krdma_conn_put(conn);
	/* The session's connection goes first: nothing may still WRITE */
	krdma_session_destroy(s);
	s = NULL;
	krdma_conn_close(server);
	kmem_put(&src, MEM_VMALLOC);
	kmem_put(&dst, MEM_VMALLOC);
	kfree(reqs);
out_destroy:
	if (s)
		krdma_session_destroy(s);
}

/*
 * Heartbeats every 10 ms while 256 WRITEs at a time keep the send queue
 * (16 deep, the least krdma takes) full
 */
static void test_session_full_queue(const char *ip)
{
	struct busy_run r = {
		.heartbeat_ms = 10,
		.sq_depth = 16,
		.batch = 256,
		.len = SZ_64K,
		.run = 2 * HZ,
	};
	struct sockaddr_in *sin = (struct sockaddr_in *)&r.dst;
	char name[64];

	snprintf(name, sizeof(name),
		 "%s session heartbeats while the send queue is full", ip);
	r.name = name;
	sin->sin_family = AF_INET;
	if (in4_pton(ip, -1, (u8 *)&sin->sin_addr, -1, NULL))
		test_session_busy(&r);
}

/*
 * slow_session=SRC,DST: heartbeats every 500 ms behind 48 WRITEs of 1 MiB
 * from SRC to DST, on a link krdma_kapi.sh shapes to 20 Mbit/s (about 20
 * s for the batch, twice the heartbeat's timeout).
 * slow_session=SRC,DST,unsignaled: behind 32 WRITEs of 256 KiB, all but
 * the last unsignaled, in one krdma_post_list(): one chain of 8 MiB, on a
 * link shaped to 5 Mbit/s (about 13 s)
 */
static void test_session_slow(char *spec)
{
	struct busy_run r = {
		.heartbeat_ms = 500,
		.batch = 48,
		.len = SZ_1M,
		.run = 0,
	};
	struct sockaddr_in *dst = (struct sockaddr_in *)&r.dst;
	struct sockaddr_in *src = (struct sockaddr_in *)&r.src;
	char *sip = strsep(&spec, ","), *dip = strsep(&spec, ",");
	char name[96];

	if (!dip || !in4_pton(sip, -1, (u8 *)&src->sin_addr, -1, NULL) ||
	    !in4_pton(dip, -1, (u8 *)&dst->sin_addr, -1, NULL) ||
	    (spec && strcmp(spec, "unsignaled"))) {
		result(false, "slow_session: give SRC,DST[,unsignaled] (two IPv4 addresses)");
		return;
	}
	if (spec) {
		r.unsignaled = true;
		r.batch = 32;
		r.len = SZ_256K;
	}
	src->sin_family = AF_INET;
	dst->sin_family = AF_INET;
	snprintf(name, sizeof(name),
		 "%s -> %s session heartbeats behind a slow link%s", sip, dip,
		 spec ? ", unsignaled" : "");
	r.name = name;
	test_session_busy(&r);
}

/*
 * krdma_conn_params.prepare: RECVs posted before the connection is up.
 * Each side's prepare posts the RECV for the other's first SEND, and both
 * SEND the moment krdma_connect() and krdma_accept() return: without the
 * RECV in place, iWARP would end the connection (a SEND finds no RECV).
 */
#define PREP_LEN	1000

struct prep {
	struct kmem mem;
	struct krdma_req *recv;
	struct completion done;
	struct krdma_wc wc;
	struct krdma_conn *conn;	/* what prepare was called with */
	int calls;
	int fail_with;			/* prepare returns this */
	int other_op;			/* a SEND from prepare: refused with */
	int big_recv;			/* a RECV too large for the SGEs */
	struct kmem big;
};

static void prep_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct prep *pp = req->context;

	pp->wc = *wc;
	complete(&pp->done);
}

static int prep_cb(struct krdma_conn *conn, void *context)
{
	struct prep *pp = context;
	struct krdma_req *other;
	int ret;

	pp->calls++;
	pp->conn = conn;
	other = krdma_req_alloc(1, GFP_KERNEL);
	if (other) {
		/* Only RECVs before the connection is up */
		other->opcode = KRDMA_OP_SEND;
		other->num_sge = 1;
		other->sge[0].buf = pp->mem.buf;
		other->sge[0].length = 8;
		other->done = prep_done;
		other->context = pp;
		pp->other_op = krdma_post(conn, other);
		if (pp->big.buf) {
			/* Pages past the SGEs need a registration: not yet */
			other->opcode = KRDMA_OP_RECV;
			other->sge[0].buf = pp->big.buf;
			other->sge[0].length = SZ_1M;
			pp->big_recv = krdma_post(conn, other);
		}
		kfree(other);
	}
	pp->recv->opcode = KRDMA_OP_RECV;
	pp->recv->num_sge = 1;
	pp->recv->sge[0].buf = pp->mem.buf;
	pp->recv->sge[0].length = PREP_LEN;
	pp->recv->done = prep_done;
	pp->recv->context = pp;
	ret = krdma_post(conn, pp->recv);
	if (ret)
		return ret;
	return pp->fail_with;
}

static int prep_init(struct prep *pp, bool big)
{
	int ret;

	memset(pp, 0, sizeof(*pp));
	init_completion(&pp->done);
	pp->recv = krdma_req_alloc(1, GFP_KERNEL);
	if (!pp->recv)
		return -ENOMEM;
	ret = kmem_get(&pp->mem, MEM_KMALLOC, PREP_LEN,
		       KRDMA_ACCESS_LOCAL_WRITE);
	if (!ret && big)
		ret = kmem_get(&pp->big, MEM_VMALLOC, SZ_1M,
			       KRDMA_ACCESS_LOCAL_WRITE);
	return ret;
}

/* Wait for the RECV of @pp: true once it completed (with any status) */
static bool prep_wait(struct prep *pp)
{
	return wait_for_completion_timeout(&pp->done, TIMEOUT);
}

static void prep_fini(struct prep *pp)
{
	kmem_put(&pp->big, MEM_VMALLOC);
	kmem_put(&pp->mem, MEM_KMALLOC);
	kfree(pp->recv);
}

/* SEND @len bytes of @seed from a new kernel buffer, and wait for it */
static int prep_send(struct krdma_conn *conn, u8 seed)
{
	struct krdma_req *send = krdma_req_alloc(1, GFP_KERNEL);
	struct kmem m;
	int ret;

	if (!send)
		return -ENOMEM;
	ret = kmem_get(&m, MEM_KMALLOC, PREP_LEN, 0);
	if (!ret) {
		fill(m.p, PREP_LEN, seed);
		send->opcode = KRDMA_OP_SEND;
		send->num_sge = 1;
		send->sge[0].buf = m.buf;
		send->sge[0].length = PREP_LEN;
		ret = run_op(conn, send);
	}
	kmem_put(&m, MEM_KMALLOC);
	kfree(send);
	return ret;
}

static void test_prepare_pair(const char *ip, unsigned int round,
			      struct sockaddr_storage *bound,
			      struct krdma_listener *l, struct prep *srv)
{
	struct krdma_conn_params cp = { .prepare = prep_cb };
	struct krdma_conn *client, *server;
	struct prep cli;
	int ret, st_c, st_s;
	bool ok;

	ret = prep_init(&cli, round == 0);
	if (ret) {
		result(false, "%s prepare: setup: %d", ip, ret);
		goto out;
	}
	cp.context = &cli;
	client = krdma_connect(&init_net, (struct sockaddr *)bound, NULL,
			       TIMEOUT, &cp);
	if (IS_ERR(client)) {
		result(false, "%s prepare round %u: connect: %ld", ip, round,
		       PTR_ERR(client));
		goto out;
	}
	ret = krdma_accept(l, false, TIMEOUT, &server);
	if (ret) {
		result(false, "%s prepare round %u: accept: %d", ip, round,
		       ret);
		krdma_conn_close(client);
		goto out;
	}
	/* Both at once: each finds the RECV its prepare posted */
	st_c = prep_send(client, 40 + round);
	st_s = prep_send(server, 80 + round);
	ok = prep_wait(&cli) && prep_wait(srv);
	ok = ok && !st_c && !st_s && cli.wc.status == KRDMA_WC_SUCCESS &&
	     srv->wc.status == KRDMA_WC_SUCCESS &&
	     cli.wc.byte_len == PREP_LEN && srv->wc.byte_len == PREP_LEN &&
	     check(cli.mem.p, PREP_LEN, 80 + round) == -1 &&
	     check(srv->mem.p, PREP_LEN, 40 + round) == -1;
	if (round == 0 || !ok)
		result(ok, "%s prepare round %u: %s", ip, round,
		       "RECVs posted before connect and accept take the first SENDs, bytes verified");
	if (!ok)
		diag("send %d/%d, recv status %u/%u, %u/%u bytes", st_c, st_s,
		     cli.wc.status, srv->wc.status, cli.wc.byte_len,
		     srv->wc.byte_len);
	if (round == 0) {
		result(cli.calls == 1 && cli.conn == client && srv->calls == 1 &&
		       srv->conn == server,
		       "%s prepare is called once, with the connection connect and accept return",
		       ip);
		result(cli.other_op == -ENOTCONN && cli.big_recv == -EMSGSIZE,
		       "%s from prepare a SEND is ENOTCONN, a RECV needing a registration EMSGSIZE (%d, %d)",
		       ip, cli.other_op, cli.big_recv);
	}
	krdma_conn_close(client);
	krdma_conn_close(server);
	/* Flushed or not, the RECVs completed: the memory may go */
out:
	prep_fini(&cli);
}

static void test_prepare(const char *ip)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct krdma_conn_params lp = { .prepare = prep_cb };
	struct sockaddr_storage bound;
	struct krdma_listener *l;
	struct krdma_conn *conn;
	struct prep srv, cli;
	unsigned int round;
	bool flushed;
	long err;
	int ret;

	if (!in4_pton(ip, -1, (u8 *)&sin.sin_addr, -1, NULL))
		return;
	ret = prep_init(&srv, false);
	if (ret) {
		result(false, "%s prepare: setup: %d", ip, ret);
		prep_fini(&srv);
		return;
	}
	lp.context = &srv;
	l = krdma_listen(&init_net, (struct sockaddr *)&sin, 4, &lp);
	if (IS_ERR(l) || krdma_listener_addr(l, &bound)) {
		result(false, "%s prepare: listen", ip);
		goto out_listener;
	}
	for (round = 0; round < 8; round++) {
		reinit_completion(&srv.done);
		srv.calls = 0;
		test_prepare_pair(ip, round, &bound, l, &srv);
	}

	/* The listener's prepare refuses: the client is told, the RECV flushed */
	reinit_completion(&srv.done);
	srv.fail_with = -ENOMEM;
	conn = krdma_connect(&init_net, (struct sockaddr *)&bound, NULL,
			     TIMEOUT, NULL);
	err = IS_ERR(conn) ? PTR_ERR(conn) : 0;
	if (!IS_ERR(conn))
		krdma_conn_close(conn);
	flushed = prep_wait(&srv);
	result(err == -ENOBUFS && flushed &&
	       srv.wc.status == KRDMA_WC_WR_FLUSH_ERR,
	       "%s a listener's prepare that fails rejects the request (%ld), its RECV flushed (status %u)",
	       ip, err, srv.wc.status);
	srv.fail_with = 0;

	/* The client's prepare refuses: connect fails with its errno */
	ret = prep_init(&cli, false);
	if (!ret) {
		struct krdma_conn_params cp = {
			.prepare = prep_cb, .context = &cli,
		};

		cli.fail_with = -EPERM;
		conn = krdma_connect(&init_net, (struct sockaddr *)&bound,
				     NULL, TIMEOUT, &cp);
		err = IS_ERR(conn) ? PTR_ERR(conn) : 0;
		if (!IS_ERR(conn))
			krdma_conn_close(conn);
		flushed = prep_wait(&cli);
		result(err == -EPERM && flushed &&
		       cli.wc.status == KRDMA_WC_WR_FLUSH_ERR,
		       "%s a connect whose prepare fails returns its errno (%ld), its RECV flushed (status %u)",
		       ip, err, cli.wc.status);
	} else {
		result(false, "%s prepare: setup: %d", ip, ret);
	}
	prep_fini(&cli);
	/* Nothing of the refused requests is left to accept */
	result(krdma_accept(l, true, 0, &conn) == -EAGAIN,
	       "%s nothing refused by prepare is left to accept", ip);
out_listener:
	if (!IS_ERR(l))
		krdma_listener_close(l);
	/* Every RECV of the listener's prepare has completed by now */
	prep_fini(&srv);
}

/*
 * A listener closed while connections are still being established: each
 * request's prepare posts a RECV, and krdma_listener_close() returns only
 * once every one of them has completed (flushed), whichever stage its
 * connection was in (being established, established and queued, failed).
 */
#define LC_CONNS	4

struct lc {
	struct kmem mem;
	struct krdma_req *reqs[LC_CONNS];
	atomic_t slots, posted, completed;
	struct completion prepared;
	wait_queue_head_t wait;
	struct sockaddr_storage bound;
	struct lc_connector {
		struct work_struct work;
		struct lc *lc;
		long err;
	} conns[LC_CONNS];
};

static void lc_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct lc *lc = req->context;

	atomic_inc(&lc->completed);
	wake_up_all(&lc->wait);
}

static int lc_prepare(struct krdma_conn *conn, void *context)
{
	struct lc *lc = context;
	int i = atomic_inc_return(&lc->slots) - 1;
	struct krdma_req *req;
	int ret;

	if (i >= LC_CONNS)
		return -ENOBUFS;
	req = lc->reqs[i];
	req->opcode = KRDMA_OP_RECV;
	req->num_sge = 1;
	req->sge[0].buf = lc->mem.buf;
	req->sge[0].length = 64;
	req->done = lc_done;
	req->context = lc;
	ret = krdma_post(conn, req);
	if (ret)
		return ret;
	atomic_inc(&lc->posted);
	complete(&lc->prepared);
	return 0;
}

static void lc_connect(struct work_struct *work)
{
	struct lc_connector *c = container_of(work, struct lc_connector,
					      work);
	struct krdma_conn *conn;

	conn = krdma_connect(&init_net, (struct sockaddr *)&c->lc->bound, NULL,
			     10 * HZ, NULL);
	c->err = IS_ERR(conn) ? PTR_ERR(conn) : 0;
	if (!IS_ERR(conn))
		krdma_conn_close(conn);
}

static void test_listener_close_pending(const char *ip)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct krdma_conn_params lp = { .prepare = lc_prepare };
	struct krdma_listener *l;
	int i, posted, completed;
	bool prepared, settled;
	struct lc *lc;

	if (!in4_pton(ip, -1, (u8 *)&sin.sin_addr, -1, NULL))
		return;
	lc = kzalloc(sizeof(*lc), GFP_KERNEL);
	if (!lc) {
		result(false, "%s listener close: setup", ip);
		return;
	}
	if (kmem_get(&lc->mem, MEM_KMALLOC, 64, KRDMA_ACCESS_LOCAL_WRITE)) {
		result(false, "%s listener close: setup", ip);
		goto out_mem;
	}
	init_completion(&lc->prepared);
	init_waitqueue_head(&lc->wait);
	for (i = 0; i < LC_CONNS; i++) {
		lc->reqs[i] = krdma_req_alloc(1, GFP_KERNEL);
		if (!lc->reqs[i]) {
			result(false, "%s listener close: setup", ip);
			goto out_mem;
		}
	}
	lp.context = lc;
	l = krdma_listen(&init_net, (struct sockaddr *)&sin, 8, &lp);
	if (IS_ERR(l) || krdma_listener_addr(l, &lc->bound)) {
		result(false, "%s listener close: listen", ip);
		if (!IS_ERR(l))
			krdma_listener_close(l);
		goto out_mem;
	}
	for (i = 0; i < LC_CONNS; i++) {
		lc->conns[i].lc = lc;
		INIT_WORK(&lc->conns[i].work, lc_connect);
		schedule_work(&lc->conns[i].work);
	}
	/* Close the moment the first request has its RECV */
	prepared = wait_for_completion_timeout(&lc->prepared, TIMEOUT);
	krdma_listener_close(l);
	posted = atomic_read(&lc->posted);
	completed = atomic_read(&lc->completed);
	result(prepared && posted >= 1 && completed == posted,
	       "%s krdma_listener_close() returns once every RECV its prepare posted completed (%d of %d)",
	       ip, completed, posted);
	for (i = 0; i < LC_CONNS; i++)
		flush_work(&lc->conns[i].work);
	for (i = 0; i < LC_CONNS; i++)
		diag("%s connect %d during the close: %ld", ip, i,
		     lc->conns[i].err);
	/* Should it fail above: the memory goes only once they completed */
	settled = wait_event_timeout(lc->wait,
				     atomic_read(&lc->completed) ==
				     atomic_read(&lc->posted), TIMEOUT);
	if (!settled) {
		diag("%s RECVs still posted: their memory is leaked", ip);
		return;
	}
out_mem:
	for (i = 0; i < LC_CONNS; i++)
		kfree(lc->reqs[i]);
	kmem_put(&lc->mem, MEM_KMALLOC);
	kfree(lc);
}

static void test_ip(const char *ip)
{
	struct krdma_conn_info info, sinfo;
	struct pair p;
	bool iwarp;
	int ret;

	ret = pair_open(&p, ip, NULL);
	result(!ret, "%s kernel listen, connect, accept", ip);
	if (ret) {
		diag("pair_open: %d", ret);
		return;
	}
	krdma_conn_info(p.client, &info);
	krdma_conn_info(p.server, &sinfo);
	result(info.state == KRDMA_CONN_CONNECTED &&
	       sinfo.state == KRDMA_CONN_CONNECTED &&
	       info.dev_index == sinfo.dev_index,
	       "%s both ends connected on one device", ip);

	test_write_read(ip, &p, MEM_KMALLOC, 1);
	test_write_read(ip, &p, MEM_KMALLOC, 65536);
	test_write_read(ip, &p, MEM_VMALLOC, 512 * 1024);
	test_write_read(ip, &p, MEM_PAGES, 300 * 1024);
	test_write_read(ip, &p, MEM_SGT, 200 * 1024 + 17);
	/* More than one registration maps on siw: one token all the same */
	test_write_read(ip, &p, MEM_VMALLOC, SZ_64M);
	test_send_recv(ip, &p, MEM_KMALLOC);
	test_send_recv(ip, &p, MEM_VMALLOC);
	test_send_recv(ip, &p, MEM_PAGES);
	test_grant_scope(ip, &p);
	test_chain(ip, &p);
	iwarp = conn_is_iwarp(p.client);
	result(info.transport == (iwarp ? KRDMA_TRANSPORT_IWARP :
					  KRDMA_TRANSPORT_ROCE) &&
	       sinfo.transport == info.transport,
	       "%s krdma_conn_info() tells the transport of both ends (%u)",
	       ip, info.transport);
	test_unsignaled_errnos(ip, &p, iwarp);
	test_unsignaled_batch(ip, &p, KRDMA_OP_WRITE, 32, 3000);
	test_unsignaled_batch(ip, &p, KRDMA_OP_WRITE, 16, SZ_64K);
	if (!iwarp)
		test_unsignaled_batch(ip, &p, KRDMA_OP_READ, 32, 3000);
	pair_close(&p);
	test_peer_gone(ip);
	test_prepare(ip);
	test_listener_close_pending(ip);
	test_unsignaled_flush(ip);
	test_session(ip);
	test_session_full_queue(ip);
}

static void left_done_fn(struct krdma_req *req, const struct krdma_wc *wc)
{
	atomic_inc(&left_done);
}

/* Start 16 WRITEs of 1 MiB and leave them to module exit */
static void leave_ops_in_flight(const char *ip)
{
	struct krdma_token tok;
	struct pair p;
	int i, ret;

	ret = pair_open(&p, ip, NULL);
	if (ret)
		goto fail;
	left_listener = p.l;
	left_conn[0] = p.client;
	left_conn[1] = p.server;
	for (i = 0; i < 2; i++) {
		left_mem[i] = vzalloc(SZ_1M);
		if (!left_mem[i])
			goto fail;
		left_buf[i] = krdma_buf_reg_kernel(left_mem[i], SZ_1M,
						   KRDMA_ACCESS_REMOTE_WRITE);
		if (IS_ERR(left_buf[i])) {
			left_buf[i] = NULL;
			goto fail;
		}
	}
	left_grant = krdma_grant_create(p.server, left_buf[1], 0, SZ_1M,
					KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(left_grant)) {
		left_grant = NULL;
		goto fail;
	}
	krdma_grant_token(left_grant, &tok);
	left_reqs = kcalloc(16, sizeof(*left_reqs), GFP_KERNEL);
	if (!left_reqs)
		goto fail;
	for (i = 0; i < 16; i++) {
		struct krdma_req *req = &left_reqs[i];

		req->opcode = KRDMA_OP_WRITE;
		req->num_sge = 1;
		req->sge[0].buf = left_buf[0];
		req->sge[0].length = SZ_1M;
		req->remote_addr = tok.addr;
		req->rkey = tok.rkey;
		req->done = left_done_fn;
		if (krdma_post(p.client, req))
			goto fail;
	}
	result(true, "%s 16 writes of 1 MiB left in flight for module exit",
	       ip);
	return;
fail:
	result(false, "%s leave operations in flight", ip);
}

/*
 * Kernel <-> userspace: the module grants a window of kmalloc'd memory and
 * SENDs the token; the userspace peer (selftests/krdma_kapi_user.c) READs
 * the first half, WRITEs the second, and SENDs its own token back; the
 * module checks the second half and WRITEs into the peer's window, then
 * SENDs "fin". Both sides check every byte.
 */
#define USER_LEN	65536
#define USER_MSG	64

static struct krdma_listener *user_l;
static struct task_struct *user_task;
static char user_result[128] = "running";
static u16 user_port;

static int user_op(struct krdma_conn *conn, u32 opcode, struct krdma_buf *buf,
		   u64 off, u64 len, const struct krdma_token *tok)
{
	struct krdma_req *req = kzalloc(sizeof(*req), GFP_KERNEL);
	int st;

	if (!req)
		return -ENOMEM;
	req->opcode = opcode;
	req->num_sge = 1;
	req->sge[0].buf = buf;
	req->sge[0].offset = off;
	req->sge[0].length = len;
	if (tok) {
		req->remote_addr = tok->addr;
		req->rkey = tok->rkey;
	}
	st = run_op(conn, req);
	kfree(req);
	return st;
}

/* The peer's answer: false after TIMEOUT, or when module exit stops us */
static bool user_wait(struct completion *done)
{
	unsigned long end = jiffies + TIMEOUT;

	while (!wait_for_completion_timeout(done, HZ / 10))
		if (kthread_should_stop() || time_after(jiffies, end))
			return false;
	return true;
}

static int user_serve_fn(void *arg)
{
	DECLARE_COMPLETION_ONSTACK(recv_done);
	struct krdma_buf *buf = NULL, *msg = NULL;
	struct krdma_window *grant = NULL;
	struct krdma_conn *conn = NULL;
	struct krdma_token tok, peer;
	struct krdma_req *recv = NULL;
	u8 *mem = NULL, *msgmem = NULL;
	long bad;
	int ret;

	/* Accept, a little at a time, so that module exit can stop it */
	do {
		ret = krdma_accept(user_l, false, HZ / 2, &conn);
	} while (ret == -ETIMEDOUT && !kthread_should_stop());
	if (ret) {
		snprintf(user_result, sizeof(user_result), "accept: %d", ret);
		goto out;
	}
	mem = kzalloc(USER_LEN, GFP_KERNEL);
	msgmem = kzalloc(2 * USER_MSG, GFP_KERNEL);
	recv = kzalloc(sizeof(*recv), GFP_KERNEL);
	if (!mem || !msgmem || !recv) {
		snprintf(user_result, sizeof(user_result), "no memory");
		goto out;
	}
	fill(mem, USER_LEN / 2, 11);
	buf = krdma_buf_reg_kernel(mem, USER_LEN, KRDMA_ACCESS_LOCAL_WRITE |
				   KRDMA_ACCESS_REMOTE_READ |
				   KRDMA_ACCESS_REMOTE_WRITE);
	msg = krdma_buf_reg_kernel(msgmem, 2 * USER_MSG,
				   KRDMA_ACCESS_LOCAL_WRITE);
	if (IS_ERR(buf) || IS_ERR(msg)) {
		snprintf(user_result, sizeof(user_result), "buf_reg failed");
		buf = IS_ERR(buf) ? NULL : buf;
		msg = IS_ERR(msg) ? NULL : msg;
		goto out;
	}
	grant = krdma_grant_create(conn, buf, 0, USER_LEN,
				   KRDMA_ACCESS_REMOTE_READ |
				   KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(grant)) {
		snprintf(user_result, sizeof(user_result), "grant: %ld",
			 PTR_ERR(grant));
		grant = NULL;
		goto out;
	}
	krdma_grant_token(grant, &tok);

	/* The peer's answer lands in the second half of msgmem */
	recv->opcode = KRDMA_OP_RECV;
	recv->num_sge = 1;
	recv->sge[0].buf = msg;
	recv->sge[0].offset = USER_MSG;
	recv->sge[0].length = USER_MSG;
	recv->done = note_context;
	recv->context = &recv_done;
	ret = krdma_post(conn, recv);
	if (ret) {
		snprintf(user_result, sizeof(user_result), "post recv: %d", ret);
		goto out;
	}
	/*
	 * iWARP has no RNR retry: a SEND that finds no RECV ends the
	 * connection (protocol.rst). The peers (krdma_stress load -r,
	 * krdma_kapi_user) post theirs with the connect request.
	 */
	memcpy(msgmem, &tok, sizeof(tok));
	ret = user_op(conn, KRDMA_OP_SEND, msg, 0, sizeof(tok), NULL);
	if (ret)
		snprintf(user_result, sizeof(user_result), "send token: %d", ret);
	if (ret || !user_wait(&recv_done)) {
		if (!ret)
			snprintf(user_result, sizeof(user_result), "%s",
				 kthread_should_stop() ?
				 "stopped before the peer answered" :
				 "no answer from the peer");
		krdma_disconnect(conn);
		wait_for_completion(&recv_done);
		goto out;
	}

	bad = check(mem + USER_LEN / 2, USER_LEN / 2, 22);
	if (bad != -1) {
		snprintf(user_result, sizeof(user_result),
			 "the peer's WRITE differs at byte %ld", bad);
		goto out;
	}
	memcpy(&peer, msgmem + USER_MSG, sizeof(peer));
	fill(mem, 4096, 33);
	ret = user_op(conn, KRDMA_OP_WRITE, buf, 0, 4096, &peer);
	if (!ret) {
		memcpy(msgmem, "fin", 4);
		ret = user_op(conn, KRDMA_OP_SEND, msg, 0, 4, NULL);
	}
	if (ret)
		snprintf(user_result, sizeof(user_result),
			 "write to the peer's token: %d", ret);
	else
		snprintf(user_result, sizeof(user_result), "ok");
out:
	if (conn) {
		/* Let the peer take "fin" before the connection goes */
		msleep(200);
		krdma_conn_close(conn);
	}
	if (grant)
		krdma_grant_destroy(grant);
	if (buf)
		krdma_buf_dereg(buf);
	if (msg)
		krdma_buf_dereg(msg);
	kfree(mem);
	kfree(msgmem);
	kfree(recv);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ / 10);
	return 0;
}

static int user_start(const char *ip)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_storage bound;
	int ret;

	if (!in4_pton(ip, -1, (u8 *)&sin.sin_addr, -1, NULL))
		return -EINVAL;
	user_l = krdma_listen(&init_net, (struct sockaddr *)&sin, 1, NULL);
	if (IS_ERR(user_l)) {
		ret = PTR_ERR(user_l);
		user_l = NULL;
		return ret;
	}
	ret = krdma_listener_addr(user_l, &bound);
	if (ret)
		return ret;
	user_port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	user_task = kthread_run(user_serve_fn, NULL, "krdma_sample");
	if (IS_ERR(user_task)) {
		ret = PTR_ERR(user_task);
		user_task = NULL;
		return ret;
	}
	return 0;
}

static int user_show(struct seq_file *m, void *v)
{
	seq_printf(m, "%u %s\n", user_port, user_result);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(user);

/*
 * hold=1: a connection pair with 8 writes of 1 MiB in flight, for the
 * test script to remove the device under it (rdma link delete). The
 * consumer must be told (event callbacks, -ENODEV), every operation must
 * complete, and everything must close cleanly afterwards.
 */
static struct pair hold_pair;
static struct kmem hold_src, hold_dst;
static struct krdma_window *hold_grant;
static struct krdma_req *hold_reqs;
static atomic_t hold_done, hold_failed, hold_events;
static int hold_error[2];	/* client, server */

static void hold_event(struct krdma_conn *conn, int error, void *context)
{
	*(int *)context = error;
	atomic_inc(&hold_events);
}

static void hold_op_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	if (wc->status)
		atomic_inc(&hold_failed);
	atomic_inc(&hold_done);
}

static int hold_start(const char *ip)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct krdma_conn_params cparams = {
		.event = hold_event, .context = &hold_error[0],
	};
	struct krdma_conn_params sparams = {
		.event = hold_event, .context = &hold_error[1],
	};
	struct sockaddr_storage bound;
	struct krdma_token tok;
	int i, ret;

	if (!in4_pton(ip, -1, (u8 *)&sin.sin_addr, -1, NULL))
		return -EINVAL;
	hold_pair.l = krdma_listen(&init_net, (struct sockaddr *)&sin, 1,
				   &sparams);
	if (IS_ERR(hold_pair.l)) {
		ret = PTR_ERR(hold_pair.l);
		hold_pair.l = NULL;
		return ret;
	}
	ret = krdma_listener_addr(hold_pair.l, &bound);
	if (ret)
		return ret;
	hold_pair.client = krdma_connect(&init_net, (struct sockaddr *)&bound,
					 NULL, TIMEOUT, &cparams);
	if (IS_ERR(hold_pair.client)) {
		ret = PTR_ERR(hold_pair.client);
		hold_pair.client = NULL;
		return ret;
	}
	ret = krdma_accept(hold_pair.l, false, TIMEOUT, &hold_pair.server);
	if (ret)
		return ret;
	ret = kmem_get(&hold_src, MEM_VMALLOC, SZ_1M, 0);
	if (!ret)
		ret = kmem_get(&hold_dst, MEM_VMALLOC, SZ_1M,
			       KRDMA_ACCESS_REMOTE_WRITE |
			       KRDMA_ACCESS_LOCAL_WRITE);
	if (ret)
		return ret;
	hold_grant = krdma_grant_create(hold_pair.server, hold_dst.buf, 0,
					SZ_1M, KRDMA_ACCESS_REMOTE_WRITE);
	if (IS_ERR(hold_grant)) {
		ret = PTR_ERR(hold_grant);
		hold_grant = NULL;
		return ret;
	}
	krdma_grant_token(hold_grant, &tok);
	hold_reqs = kcalloc(10, sizeof(*hold_reqs), GFP_KERNEL);
	if (!hold_reqs)
		return -ENOMEM;
	/* Two RECVs no SEND will match: in flight until the end */
	for (i = 8; i < 10; i++) {
		struct krdma_req *req = &hold_reqs[i];

		req->opcode = KRDMA_OP_RECV;
		req->num_sge = 1;
		req->sge[0].buf = hold_dst.buf;
		req->sge[0].length = 4096;
		req->done = hold_op_done;
		ret = krdma_post(hold_pair.server, req);
		if (ret)
			return ret;
	}
	for (i = 0; i < 8; i++) {
		struct krdma_req *req = &hold_reqs[i];

		req->opcode = KRDMA_OP_WRITE;
		req->num_sge = 1;
		req->sge[0].buf = hold_src.buf;
		req->sge[0].length = SZ_1M;
		req->remote_addr = tok.addr;
		req->rkey = tok.rkey;
		req->done = hold_op_done;
		ret = krdma_post(hold_pair.client, req);
		if (ret)
			return ret;
	}
	return 0;
}

static void hold_stop(void)
{
	if (hold_pair.client)
		krdma_conn_close(hold_pair.client);
	if (hold_pair.server)
		krdma_conn_close(hold_pair.server);
	if (hold_grant)
		krdma_grant_destroy(hold_grant);
	kmem_put(&hold_src, MEM_VMALLOC);
	kmem_put(&hold_dst, MEM_VMALLOC);
	if (hold_pair.l)
		krdma_listener_close(hold_pair.l);
	kfree(hold_reqs);
}

static int hold_show(struct seq_file *m, void *v)
{
	struct krdma_conn_info info = {};

	if (hold_pair.client)
		krdma_conn_info(hold_pair.client, &info);
	seq_printf(m, "done=%d failed=%d events=%d errors=%d,%d state=%u\n",
		   atomic_read(&hold_done), atomic_read(&hold_failed),
		   atomic_read(&hold_events), hold_error[0], hold_error[1],
		   info.state);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hold);

static int results_show(struct seq_file *m, void *v)
{
	seq_printf(m, "TAP version 13\n1..%u\n", ntests);
	seq_write(m, results, seq_buf_used(&out));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(results);

static int __init krdma_sample_init(void)
{
	char *list, *cur, *ip;

	results = kvzalloc(RESULTS_SIZE, GFP_KERNEL);
	if (!results)
		return -ENOMEM;
	seq_buf_init(&out, results, RESULTS_SIZE);

	list = kstrdup(addrs, GFP_KERNEL);
	if (!list) {
		kvfree(results);
		return -ENOMEM;
	}
	cur = list;
	if (slow_session) {
		char *spec = kstrdup(slow_session, GFP_KERNEL);

		if (spec)
			test_session_slow(spec);
		kfree(spec);
	}
	while (!hold && !slow_session && (ip = strsep(&cur, ",")))
		if (*ip)
			test_ip(ip);
	if (leave_in_flight)
		leave_ops_in_flight(list);	/* the first address */
	if (user_serve && user_start(list))
		snprintf(user_result, sizeof(user_result), "cannot listen");
	if (hold) {
		int ret = hold_start(list);

		result(!ret, "%s a pair with 8 writes in flight, held (%d)",
		       list, ret);
	}

	dir = debugfs_create_dir("krdma_sample", NULL);
	debugfs_create_file("results", 0400, dir, NULL, &results_fops);
	debugfs_create_file("user", 0400, dir, NULL, &user_fops);
	debugfs_create_file("hold", 0400, dir, NULL, &hold_fops);
	kfree(list);
	return 0;
}

static void __exit krdma_sample_exit(void)
{
	int i;

	debugfs_remove_recursive(dir);
	if (user_task)
		kthread_stop(user_task);
	if (user_l)
		krdma_listener_close(user_l);
	if (hold)
		hold_stop();
	/* Closing the connections completes whatever is still in flight */
	for (i = 0; i < 2; i++)
		if (left_conn[i])
			krdma_conn_close(left_conn[i]);
	if (left_reqs && atomic_read(&left_done) != 16)
		pr_err("krdma_sample: %d of 16 operations completed\n",
		       atomic_read(&left_done));
	if (left_grant)
		krdma_grant_destroy(left_grant);
	for (i = 0; i < 2; i++) {
		if (left_buf[i])
			krdma_buf_dereg(left_buf[i]);
		vfree(left_mem[i]);
	}
	if (left_listener)
		krdma_listener_close(left_listener);
	kfree(left_reqs);
	kvfree(results);
}

module_init(krdma_sample_init);
module_exit(krdma_sample_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("krdma kernel API sample consumer and selftest");
MODULE_AUTHOR("The krdma authors");
