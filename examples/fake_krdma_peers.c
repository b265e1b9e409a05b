// SPDX-License-Identifier: GPL-2.0
/*
 * fake_krdma_peers.so: a stand-in for /dev/krdma shared by several
 * processes on one host, to run the examples' krdma modes where krdma.ko
 * cannot be loaded (make -C examples test-fake). Test only; never
 * installed. LD_PRELOAD it: it catches open() of /dev/krdma and the
 * ioctls on that fd.
 *
 * It is not RDMA and not krdma: it checks the programs' use of the API
 * (handles, access bits, RECVs posted before the messages they take,
 * one completion per operation, tokens, the order of a WRITE and the
 * SEND after it) and moves their bytes, nothing about the kernel:
 * - the fd is an AF_UNIX datagram socket (abstract name per process):
 *   poll() on it works; every completion is a datagram to itself;
 * - LISTEN binds another socket, named by the port, and writes the
 *   process's pid and data socket to $TMPDIR/fake_krdma_peers.<port>;
 *   CONNECT sends it a request and returns connected (as krdma's
 *   listeners accept in the kernel); ACCEPT takes the next request;
 * - a token's addr is the granted bytes' address in the granting
 *   process; WRITE and READ are process_vm_writev() and readv() there
 *   (root, or ptrace rights); WRITE_IMM, SEND and a disconnect are
 *   datagrams to the peer; a RECV takes the oldest message, or waits
 *   for one (an iWARP connection fails instead: it has no RNR retry);
 * - a peer that is gone (kill(pid, 0)) fails its connections, flushing
 *   their RECVs, as the module does when a connection drops.
 * KRDMA_FAKE_TRANSPORT=siw (or iwarp) makes the process's device iWARP
 * ("fakesiw0": no WRITE_IMM), anything else RoCE ("fakerxe0").
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/krdma.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define MAX_CONNS	512
#define MAX_BUFS	256
#define MAX_LISTENERS	8
#define MAX_RECVS	128	/* rq_depth */
#define MAX_MSG		256	/* bytes of a SEND */

enum { M_CONNREQ = 1, M_IMM, M_SEND, M_DISC, M_WC };

/* A datagram: to a listener, a peer, or the process itself */
struct fmsg {
	int type;
	int pid;
	uint64_t cid;		/* a connection: its connector's pid << 32 | handle */
	uint32_t imm, len;
	struct krdma_addr addr;
	char sock[64];
	struct krdma_completion wc;
	uint8_t data[MAX_MSG];
};

struct fconn {
	bool used, down;
	uint32_t handle;
	uint64_t cid;
	int peer_pid, error;
	char peer_sock[64];
	struct krdma_addr local, peer;
	struct krdma_op recvs[MAX_RECVS];
	int nrecv;
	struct fmsg pend[MAX_RECVS];	/* messages that wait for a RECV */
	int npend;
};

struct fbuf {
	bool used;
	uint32_t handle;
	uint8_t *addr;
	uint64_t len;
	uint32_t access;
};

struct flistener {
	bool used;
	uint32_t handle;
	int sock, port;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int kfd = -1;
static char myname[64];
static bool iwarp;
static uint32_t next_handle = 1;
static struct fconn conns[MAX_CONNS];
static struct fbuf bufs[MAX_BUFS];
static struct flistener listeners[MAX_LISTENERS];

static struct fconn *find_conn(uint32_t h)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (conns[i].used && conns[i].handle == h)
			return &conns[i];
	return NULL;
}

static struct fconn *find_cid(uint64_t cid)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (conns[i].used && conns[i].cid == cid)
			return &conns[i];
	return NULL;
}

static struct fbuf *find_buf(uint32_t h)
{
	for (int i = 0; i < MAX_BUFS; i++)
		if (bufs[i].used && bufs[i].handle == h)
			return &bufs[i];
	return NULL;
}

static struct flistener *find_listener(uint32_t h)
{
	for (int i = 0; i < MAX_LISTENERS; i++)
		if (listeners[i].used && listeners[i].handle == h)
			return &listeners[i];
	return NULL;
}

static socklen_t abstract(struct sockaddr_un *sa, const char *name)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s", name);
	return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
}

static int send_to(int sock, const char *name, const struct fmsg *m)
{
	struct sockaddr_un sa;
	socklen_t len = abstract(&sa, name);

	return sendto(sock, m, sizeof(*m), 0, (struct sockaddr *)&sa, len) < 0 ? -errno : 0;
}

static void complete(const struct krdma_op *op, uint32_t status, uint32_t len)
{
	struct fmsg m = { .type = M_WC };

	m.wc.cookie = op->cookie;
	m.wc.status = status;
	m.wc.opcode = op->opcode;
	m.wc.byte_len = len;
	m.wc.conn = op->conn;
	send_to(kfd, myname, &m);
}

/* The connection drops: its RECVs are flushed */
static void conn_fail(struct fconn *c, int err)
{
	if (c->down)
		return;
	c->down = true;
	c->error = err;
	for (int i = 0; i < c->nrecv; i++)
		complete(&c->recvs[i], KRDMA_WC_WR_FLUSH_ERR, 0);
	c->nrecv = 0;
}

/* Messages into RECVs, oldest first */
static void match(struct fconn *c)
{
	while (c->nrecv && c->npend) {
		struct krdma_op *r = &c->recvs[0];
		struct fmsg *m = &c->pend[0], w = { .type = M_WC };
		struct fbuf *b = find_buf(r->sge.buf);

		w.wc.cookie = r->cookie;
		w.wc.opcode = KRDMA_OP_RECV;
		w.wc.conn = c->handle;
		if (m->type == M_IMM) {
			w.wc.flags = KRDMA_WC_F_IMM;
			w.wc.imm_data = m->imm;
		} else if (m->len > r->sge.length) {
			w.wc.status = KRDMA_WC_LOC_LEN_ERR;
		} else {
			memcpy(b->addr + r->sge.offset, m->data, m->len);
			w.wc.byte_len = m->len;
		}
		send_to(kfd, myname, &w);
		memmove(c->recvs, c->recvs + 1, --c->nrecv * sizeof(*r));
		memmove(c->pend, c->pend + 1, --c->npend * sizeof(*m));
	}
}

static void check_peers(void)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (conns[i].used && !conns[i].down &&
		    kill(conns[i].peer_pid, 0) && errno == ESRCH)
			conn_fail(&conns[i], ECONNRESET);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

/* One datagram of the fd: a completion into @out, or 0 */
static int take(struct fmsg *m, struct krdma_completion *out)
{
	struct fconn *c;

	switch (m->type) {
	case M_WC:
		*out = m->wc;
		return 1;
	case M_IMM:
	case M_SEND:
		c = find_cid(m->cid);
		if (!c || c->down)
			return 0;
		if (c->npend == MAX_RECVS) {
			conn_fail(c, ENOBUFS);
			return 0;
		}
		if (iwarp && !c->nrecv) {
			fprintf(stderr, "fake_krdma_peers: an iWARP message found no RECV: the connection fails\n");
			conn_fail(c, EIO);
			return 0;
		}
		c->pend[c->npend++] = *m;
		match(c);
		return 0;
	case M_DISC:
		c = find_cid(m->cid);
		if (c)
			conn_fail(c, ECONNRESET);
		return 0;
	}
	return 0;
}

static int do_poll(void *arg)
{
	struct krdma_poll *p = arg;
	struct krdma_completion *out = (void *)(uintptr_t)p->completions;
	uint64_t end = now_ms() + p->timeout_ms;

	p->count = 0;
	for (;;) {
		struct pollfd pfd = { .fd = kfd, .events = POLLIN };
		uint64_t t;

		check_peers();
		while (p->count < p->max) {
			struct fmsg m;

			if (recv(kfd, &m, sizeof(m), MSG_DONTWAIT) <= 0)
				break;
			p->count += take(&m, &out[p->count]);
		}
		t = now_ms();
		if (p->count || t >= end)
			return 0;
		pthread_mutex_unlock(&lock);
		poll(&pfd, 1, end - t > 100 ? 100 : end - t);
		pthread_mutex_lock(&lock);
	}
}

/* WRITE, WRITE_IMM, READ: 0, or the connection failed */
static void rdma(struct fconn *c, struct fbuf *b, const struct krdma_op *op)
{
	bool write = op->opcode != KRDMA_OP_READ;
	uint32_t need = write ? KRDMA_ACCESS_REMOTE_WRITE : KRDMA_ACCESS_REMOTE_READ;
	struct iovec l = { b->addr + op->sge.offset, op->sge.length };
	struct iovec r = { (void *)(uintptr_t)(op->remote.addr + op->remote_offset),
			   op->sge.length };
	struct fmsg m = { .type = M_IMM, .cid = c->cid, .imm = op->imm_data };
	ssize_t n;

	if (!(op->remote.access & need)) {
		complete(op, KRDMA_WC_REM_ACCESS_ERR, 0);
		conn_fail(c, EACCES);
		return;
	}
	n = write ? process_vm_writev(c->peer_pid, &l, 1, &r, 1, 0) :
		    process_vm_readv(c->peer_pid, &l, 1, &r, 1, 0);
	if (n != (ssize_t)op->sge.length ||
	    (op->opcode == KRDMA_OP_WRITE_IMM && send_to(kfd, c->peer_sock, &m))) {
		complete(op, KRDMA_WC_WR_FLUSH_ERR, 0);
		conn_fail(c, ECONNRESET);
		return;
	}
	complete(op, KRDMA_WC_SUCCESS, op->sge.length);
}

static int do_submit(void *arg)
{
	struct krdma_submit *s = arg;
	struct krdma_op *ops = (void *)(uintptr_t)s->ops;

	s->submitted = 0;
	for (uint32_t i = 0; i < s->count; i++) {
		struct krdma_op *op = &ops[i];
		struct fconn *c = find_conn(op->conn);
		struct fbuf *b = find_buf(op->sge.buf);
		struct fmsg m = { .type = M_SEND };

		if (!c || op->num_sge != 1 || !b ||
		    op->sge.offset + op->sge.length > b->len)
			return -EINVAL;
		if ((op->opcode == KRDMA_OP_READ || op->opcode == KRDMA_OP_RECV) &&
		    !(b->access & KRDMA_ACCESS_LOCAL_WRITE))
			return -EACCES;
		if (iwarp && (op->opcode == KRDMA_OP_WRITE_IMM ||
			      op->opcode == KRDMA_OP_SEND_IMM))
			return -EOPNOTSUPP;
		if (c->down)
			return -ENOTCONN;
		switch (op->opcode) {
		case KRDMA_OP_RECV:
			if (c->nrecv == MAX_RECVS)
				return -ENOBUFS;
			c->recvs[c->nrecv++] = *op;
			match(c);
			break;
		case KRDMA_OP_WRITE:
		case KRDMA_OP_WRITE_IMM:
		case KRDMA_OP_READ:
			if (op->remote_offset + op->sge.length > op->remote.length)
				return -EINVAL;
			rdma(c, b, op);
			break;
		case KRDMA_OP_SEND:
			if (op->sge.length > MAX_MSG)
				return -EMSGSIZE;
			m.cid = c->cid;
			m.len = op->sge.length;
			memcpy(m.data, b->addr + op->sge.offset, m.len);
			if (send_to(kfd, c->peer_sock, &m)) {
				complete(op, KRDMA_WC_WR_FLUSH_ERR, 0);
				conn_fail(c, ECONNRESET);
			} else {
				complete(op, KRDMA_WC_SUCCESS, m.len);
			}
			break;
		default:
			return -EINVAL;
		}
		s->submitted++;
	}
	return 0;
}

static struct fconn *new_conn(void)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		if (conns[i].used)
			continue;
		memset(&conns[i], 0, sizeof(conns[i]));
		conns[i].used = true;
		conns[i].handle = next_handle++;
		return &conns[i];
	}
	return NULL;
}

static void loopback(struct krdma_addr *a, int port)
{
	memset(a, 0, sizeof(*a));
	a->family = AF_INET;
	a->port = port;
	memcpy(a->addr, "\x7f\0\0\x01", 4);
}

static void registry(char *path, size_t len, int port)
{
	snprintf(path, len, "%s/fake_krdma_peers.%d",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", port);
}

static int do_listen(void *arg)
{
	struct krdma_listen *l = arg;
	struct flistener *x = NULL;
	struct sockaddr_un sa;
	char name[64], path[256];
	socklen_t len;
	FILE *f;

	for (int i = 0; i < MAX_LISTENERS && !x; i++)
		if (!listeners[i].used)
			x = &listeners[i];
	if (!x)
		return -EMFILE;
	x->port = l->addr.port ? l->addr.port :
		  20000 + (getpid() * 13 + next_handle * 7) % 40000;
	snprintf(name, sizeof(name), "fake_krdma_peers.l.%d", x->port);
	len = abstract(&sa, name);
	x->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (x->sock < 0 || bind(x->sock, (struct sockaddr *)&sa, len)) {
		if (x->sock >= 0)
			close(x->sock);
		return -EADDRINUSE;
	}
	registry(path, sizeof(path), x->port);
	f = fopen(path, "w");
	if (!f) {
		close(x->sock);
		return -EIO;
	}
	fprintf(f, "%d %s\n", getpid(), myname);
	fclose(f);
	x->used = true;
	x->handle = next_handle++;
	l->handle = x->handle;
	l->addr.port = x->port;
	return 0;
}

static int do_connect(void *arg)
{
	struct krdma_connect *k = arg;
	struct fconn *c = new_conn();
	struct fmsg m = { .type = M_CONNREQ };
	char name[64], path[256];
	FILE *f = NULL;

	if (!c)
		return -EMFILE;
	registry(path, sizeof(path), k->dst.port);
	for (int t = 0; t < 50 && !(f = fopen(path, "r")); t++)
		usleep(20000);
	if (!f || fscanf(f, "%d %63s", &c->peer_pid, c->peer_sock) != 2) {
		if (f)
			fclose(f);
		c->used = false;
		return -ECONNREFUSED;
	}
	fclose(f);
	c->cid = (uint64_t)getpid() << 32 | c->handle;
	loopback(&c->local, 10000 + (getpid() * 31 + c->handle) % 50000);
	c->peer = k->dst;
	m.pid = getpid();
	m.cid = c->cid;
	m.addr = c->local;
	snprintf(m.sock, sizeof(m.sock), "%s", myname);
	snprintf(name, sizeof(name), "fake_krdma_peers.l.%d", k->dst.port);
	if (send_to(kfd, name, &m)) {
		c->used = false;
		return -ECONNREFUSED;
	}
	k->handle = c->handle;
	return 0;
}

static int do_accept(void *arg)
{
	struct krdma_accept *a = arg;
	struct flistener *x = find_listener(a->listener);
	struct pollfd pfd;
	struct fconn *c;
	struct fmsg m;
	int r;

	if (!x)
		return -ENOENT;
	pfd.fd = x->sock;
	pfd.events = POLLIN;
	pthread_mutex_unlock(&lock);
	r = poll(&pfd, 1, a->timeout_ms == KRDMA_TIMEOUT_INFINITE ? -1 : (int)a->timeout_ms);
	pthread_mutex_lock(&lock);
	if (r <= 0 || recv(x->sock, &m, sizeof(m), MSG_DONTWAIT) <= 0)
		return a->timeout_ms ? -ETIMEDOUT : -EAGAIN;
	c = new_conn();
	if (!c)
		return -EMFILE;
	c->cid = m.cid;
	c->peer_pid = m.pid;
	snprintf(c->peer_sock, sizeof(c->peer_sock), "%s", m.sock);
	c->peer = m.addr;
	loopback(&c->local, x->port);
	a->handle = c->handle;
	return 0;
}

static int do_query_module(void *arg)
{
	struct krdma_query_module *q = arg;

	q->abi_version = KRDMA_ABI_VERSION;
	q->version = KRDMA_VERSION_CODE(0, 1, 0);
	q->features = KRDMA_FEATURE_DEV_QUERY | KRDMA_FEATURE_CONN |
		      KRDMA_FEATURE_KRDMA_PEER;
	q->num_devices = 1;
	return 0;
}

static int do_dev_query(void *arg)
{
	struct krdma_dev_query *d = arg;

	d->transport = iwarp ? KRDMA_TRANSPORT_IWARP : KRDMA_TRANSPORT_ROCE;
	snprintf((char *)d->name, sizeof(d->name), "%s",
		 iwarp ? "fakesiw0" : "fakerxe0");
	return 0;
}

static int do_conn_query(void *arg)
{
	struct krdma_conn_query *q = arg;
	struct fconn *c = find_conn(q->handle);

	if (!c)
		return -ENOENT;
	check_peers();
	q->state = c->down ? KRDMA_CONN_ERROR : KRDMA_CONN_CONNECTED;
	q->error = c->down ? c->error : 0;
	q->local = c->local;
	q->peer = c->peer;
	q->port_num = 1;
	q->initiator_depth = q->responder_resources = 16;
	q->sq_depth = q->rq_depth = MAX_RECVS;
	return 0;
}

static int do_buf_reg(void *arg)
{
	struct krdma_buf_reg *r = arg;
	volatile uint8_t *p = (void *)(uintptr_t)r->addr;

	for (uint64_t o = 0; o < r->length; o += 4096)
		(void)p[o];	/* readable, as BUF_REG requires */
	for (int i = 0; i < MAX_BUFS; i++) {
		if (bufs[i].used)
			continue;
		bufs[i] = (struct fbuf){ true, next_handle++, (uint8_t *)p,
					 r->length, r->access };
		r->handle = bufs[i].handle;
		return 0;
	}
	return -EMFILE;
}

static int do_grant(void *arg)
{
	struct krdma_grant *g = arg;
	struct fbuf *b = find_buf(g->buf);
	struct fconn *c = find_conn(g->conn);

	if (!b || !c)
		return -ENOENT;
	if (g->offset + g->length > b->len)
		return -EINVAL;
	if (g->access & ~b->access)
		return -EACCES;
	if (c->down)
		return -ENOTCONN;
	g->handle = next_handle++;
	memset(&g->token, 0, sizeof(g->token));
	g->token.addr = (uintptr_t)b->addr + g->offset;
	g->token.length = g->length;
	g->token.rkey = g->handle;
	g->token.access = g->access;
	return 0;
}

/* DISCONNECT, and DESTROY (@destroy) of a connection, buffer, listener */
static int end_handle(void *arg, bool destroy)
{
	struct krdma_destroy *d = arg;	/* DISCONNECT's has the same layout */
	struct fconn *c = find_conn(d->handle);
	struct fbuf *b = find_buf(d->handle);
	struct flistener *x = find_listener(d->handle);

	if (c) {
		struct fmsg m = { .type = M_DISC, .cid = c->cid };

		send_to(kfd, c->peer_sock, &m);
		conn_fail(c, ECONNRESET);
		c->used = !destroy;
	}
	if (b && destroy)
		b->used = false;
	if (x) {
		close(x->sock);
		x->used = false;
	}
	return 0;
}

static int do_disconnect(void *arg)
{
	return end_handle(arg, false);
}

static int do_destroy(void *arg)
{
	return end_handle(arg, true);
}

#define H(cmd, fn) [KRDMA_CMD_##cmd - KRDMA_CMD_BASE] = fn
static int (*const handlers[])(void *) = {
	H(QUERY_MODULE, do_query_module), H(DEV_QUERY, do_dev_query),
	H(DESTROY, do_destroy), H(LISTEN, do_listen),
	H(ACCEPT, do_accept),
	H(CONNECT, do_connect), H(DISCONNECT, do_disconnect),
	H(CONN_QUERY, do_conn_query), H(BUF_REG, do_buf_reg),
	H(GRANT, do_grant), H(SUBMIT, do_submit),
	H(POLL, do_poll),
};

static int do_ioctl(unsigned long cmd, void *arg)
{
	unsigned int nr = _IOC_NR(cmd) - KRDMA_CMD_BASE;

	if (_IOC_TYPE(cmd) != KRDMA_TYPE || nr >= ARRAY_SIZE(handlers) ||
	    !handlers[nr])
		return -ENOTTY;
	return handlers[nr](arg);
}

static int fake_open(void)
{
	const char *t = getenv("KRDMA_FAKE_TRANSPORT");
	struct sockaddr_un sa;
	int sz = 8 << 20;
	socklen_t len;

	pthread_mutex_lock(&lock);
	if (kfd < 0) {
		iwarp = t && (!strcmp(t, "siw") || !strcmp(t, "iwarp"));
		kfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		setsockopt(kfd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
		setsockopt(kfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		snprintf(myname, sizeof(myname), "fake_krdma_peers.d.%d", getpid());
		len = abstract(&sa, myname);
		if (bind(kfd, (struct sockaddr *)&sa, len)) {
			close(kfd);
			kfd = -1;
		}
	}
	pthread_mutex_unlock(&lock);
	if (kfd < 0)
		errno = EIO;
	return kfd;
}

int open(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	mode_t mode = 0;
	va_list ap;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, int);
		va_end(ap);
	}
	if (!strcmp(path, "/dev/krdma"))
		return fake_open();
	if (!real)
		real = dlsym(RTLD_NEXT, "open");
	return real(path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int __open_2(const char *path, int flags)
{
	return open(path, flags, 0);
}

int __open64_2(const char *path, int flags)
{
	return open(path, flags, 0);
}

static int fake_ioctl(unsigned long cmd, void *arg)
{
	int err;

	pthread_mutex_lock(&lock);
	err = do_ioctl(cmd, arg);
	pthread_mutex_unlock(&lock);
	errno = -err;
	return err ? -1 : 0;
}

static int real_ioctl(int fd, unsigned long cmd, void *arg)
{
	static int (*real)(int, unsigned long, ...);

	if (!real)
		real = dlsym(RTLD_NEXT, "ioctl");
	return real(fd, cmd, arg);
}

int ioctl(int fd, unsigned long cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fd >= 0 && fd == kfd ? fake_ioctl(cmd, arg) : real_ioctl(fd, cmd, arg);
}

/* Closing the file disconnects everything, as the module's release does */
int close(int fd)
{
	static int (*real)(int);

	if (fd >= 0 && fd == kfd) {
		pthread_mutex_lock(&lock);
		for (int i = 0; i < MAX_CONNS; i++) {
			struct fmsg m = { .type = M_DISC, .cid = conns[i].cid };

			if (conns[i].used && !conns[i].down)
				send_to(kfd, conns[i].peer_sock, &m);
		}
		kfd = -1;
		pthread_mutex_unlock(&lock);
	}
	if (!real)
		real = dlsym(RTLD_NEXT, "close");
	return real(fd);
}
