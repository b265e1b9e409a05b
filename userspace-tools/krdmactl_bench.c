// SPDX-License-Identifier: GPL-2.0
/*
 * krdmactl bench: throughput, message rate, latency and CPU cost of RDMA
 * WRITE, READ and SEND through /dev/krdma, over a sweep of message sizes.
 *
 * The protocol (the 72-byte control messages, in host byte order, and
 * the SEND credits and WRITE ping-pong) is described in
 * Documentation/protocol.rst, "The krdmactl protocols": change the two
 * together.
 *
 * What is measured, per operation and size, on the client: the time from
 * the first submit to the last completion (bandwidth, message rate), the
 * time of each operation from its submit to its completion (latency
 * percentiles; for "lat", half of each ping-pong round, as ib_write_lat),
 * and the user + system CPU time of the client process (getrusage) per
 * GB moved. Completions are busy-polled (timeout 0), as perftest does.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdmactl.h"

#define KB_PORT			18516
#define KB_MAGIC		0x434e424bU	/* "KBNC" */
#define KB_VERSION		2	/* 2: the token's seg_shift and tag */
#define KB_MAX_SIZE		(64ULL << 20)
#define KB_SEND_MAX		(1ULL << 20)	/* 256 pages: krdma's SEND limit */
#define KB_MAX_DEPTH		128
#define KB_MAX_BATCH		64
#define KB_MAX_ITERS		1000000
/* -o scale without -n: connections (both ends in this process) */
#define KB_SCALE_CONNS		1000
#define KB_MAX_SIZES		32
#define KB_SLOTS		16		/* RECV slots, then SEND slots */
#define KB_SLOT			128
#define KB_CLIENT_RECVS		8
#define KB_MBOX			32
#define KB_IWARP_GRACE_MS	50		/* as krdmactl_ping.c's */
#define KB_SERVER_RQ		(KB_MAX_DEPTH + 32)

/* Cookie: kind in the top byte, an index below */
#define KB_K_CRECV	1ULL
#define KB_K_CSEND	2ULL
#define KB_K_DATA	3ULL
#define KB_K_DRECV	4ULL
#define KB_COOKIE(k, i)	(((k) << 56) | (uint64_t)(i))
#define KB_KIND(c)	((c) >> 56)
#define KB_INDEX(c)	((c) & ((1ULL << 56) - 1))

enum kb_type {
	KB_WELCOME = 1,
	KB_SETUP,
	KB_TOKEN,
	KB_SEND_START,
	KB_READY,
	KB_CREDIT,
	KB_FIN,
	KB_LAT_START,
	KB_BYE,
};

struct kb_msg {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint32_t seq;
	uint32_t status;
	uint64_t a, b, c;
	uint64_t tok_addr;
	uint64_t tok_length;
	uint32_t tok_rkey;
	uint32_t tok_access;
	uint32_t tok_seg_shift;
	uint32_t tok_tag;
};

_Static_assert(sizeof(struct kb_msg) == 72, "72 bytes on the wire");

enum kb_op {
	KB_OP_WRITE, KB_OP_READ, KB_OP_SEND, KB_OP_LAT, KB_OP_CONN, KB_OP_SCALE,
	KB_NOPS
};
static const char *const kb_op_names[KB_NOPS] = {
	"write", "read", "send", "lat", "conn", "scale",
};

struct kb_sess {
	int fd;
	uint32_t conn;
	bool server;
	uint8_t *ctrl;			/* KB_SLOTS RECV + KB_SLOTS SEND slots */
	uint64_t ctrl_len;
	uint32_t ctrl_h;
	uint32_t send_slot;
	uint32_t recv_slot;		/* server: next RECV slot */
	uint8_t *data;			/* 2 x max size */
	uint64_t data_len, data_map;
	uint32_t data_h;
	uint32_t grant;
	struct krdma_token tok;		/* client: the server's window */
	struct kb_msg mbox[KB_MBOX];	/* control messages received */
	unsigned int mb_head, mb_tail;
	uint64_t data_done;		/* data completions */
	uint64_t drecv_done;		/* server: data RECVs completed */
	uint64_t *t_submit;		/* client: per op */
	uint32_t *lat_ns;
	uint32_t timeout_ms;
	bool defer_send_err;		/* server: see server_one() */
	struct krdma_completion send_wc;	/* the first SEND/WRITE failed */
	char err[256];
	int errnum;			/* its errno (either sign), 0: none */
	const char *hint;		/* advice for err, or NULL */
	uint32_t connect_flags;		/* KRDMA_CONNECT_* */
	struct krdma_ring ring;		/* --ring: the mapped queue */
	bool yield;			/* --yield: sched_yield() when idle */
};

/*
 * Whether data operation @idx of @iters asks for a completion: one in
 * @every (as perftest's cq_mod), and the last. A completion says that
 * every operation before it is over too (one connection: in order).
 */
static bool kb_signaled(uint64_t idx, uint64_t iters, uint32_t every)
{
	return (idx + 1) % every == 0 || idx + 1 == iters;
}

static volatile sig_atomic_t kb_stop;

static void kb_on_signal(int sig)
{
	(void)sig;
	kb_stop = 1;
}

static uint64_t kb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void __printf(3, 4)
kb_fail(struct kb_sess *s, int err, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (s->err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	n = strlen(s->err);
	if (err && n < sizeof(s->err))
		snprintf(s->err + n, sizeof(s->err) - n, ": %s",
			 strerror(err < 0 ? -err : err));
	s->errnum = err;
}

/* "error" of bench -j: null, or the first error as json_error() */
static void kb_json_error(struct json *j, const struct kb_sess *s, bool ok)
{
	char msg[sizeof(s->err) + 16];

	if (ok && !s->err[0]) {
		json_null(j, "error");
		return;
	}
	snprintf(msg, sizeof(msg), "bench: %s",
		 s->err[0] ? s->err : "not every run completed");
	json_error(j, "error", s->err[0] ? s->errnum : 0, msg,
		   s->err[0] ? s->hint : NULL);
}

/* A failed completion: say which, -EIO */
static int kb_fail_wc(struct kb_sess *s, const struct krdma_completion *wc)
{
	kb_fail(s, 0, "%s failed: %s (status %u, vendor error 0x%x)",
		krdma_opcode_str(wc->opcode), krdma_wc_status_str(wc->status),
		wc->status, wc->vendor_err);
	return -EIO;
}

static int kb_map(struct kb_sess *s, uint64_t len, uint32_t access,
		  uint8_t **p, uint64_t *map_len, uint32_t *h)
{
	long page = sysconf(_SC_PAGESIZE);
	int ret;

	*map_len = (len + page - 1) & ~(uint64_t)(page - 1);
	*p = mmap(NULL, *map_len, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (*p == MAP_FAILED) {
		*p = NULL;
		kb_fail(s, -errno, "cannot allocate %" PRIu64 " bytes", len);
		return -ENOMEM;
	}
	memset(*p, 0, *map_len);
	ret = krdma_buf_register(s->fd, *p, len, access, h);
	if (ret) {
		kb_fail(s, ret, "cannot register %" PRIu64 " bytes", len);
		munmap(*p, *map_len);
		*p = NULL;
	}
	return ret;
}

static int kb_submit(struct kb_sess *s, struct krdma_op *ops, uint32_t n,
		     const char *what)
{
	uint32_t done = 0, sub;
	int ret;

	while (done < n) {
		sub = 0;
		ret = krdma_submit_ops(s->fd, ops + done, n - done,
				       KRDMA_SUBMIT_WAIT, &sub);
		done += sub;
		if (ret == -EINTR && !kb_stop)
			continue;
		if (ret) {
			kb_fail(s, ret, "cannot submit %s", what);
			return ret;
		}
	}
	return 0;
}

/* The control RECV of @slot, on the session's connection (0: none yet) */
static void kb_ctrl_recv_op(const struct kb_sess *s, uint32_t slot,
			    struct krdma_op *op)
{
	memset(op, 0, sizeof(*op));
	op->opcode = KRDMA_OP_RECV;
	op->cookie = KB_COOKIE(KB_K_CRECV, slot);
	op->conn = s->conn;
	op->num_sge = 1;
	op->sge.buf = s->ctrl_h;
	op->sge.offset = (uint64_t)slot * KB_SLOT;
	op->sge.length = KB_SLOT;
}

static int kb_post_ctrl_recv(struct kb_sess *s, uint32_t slot)
{
	struct krdma_op op;

	kb_ctrl_recv_op(s, slot, &op);
	return kb_submit(s, &op, 1, "a control RECV");
}

/* Server: post the one control RECV */
static int kb_server_recv(struct kb_sess *s)
{
	uint32_t slot = s->recv_slot++ % KB_SLOTS;

	return kb_post_ctrl_recv(s, slot);
}

static int kb_send(struct kb_sess *s, struct kb_msg *m)
{
	uint32_t slot = KB_SLOTS + s->send_slot++ % KB_SLOTS;
	struct krdma_op op;

	m->magic = KB_MAGIC;
	m->version = KB_VERSION;
	memcpy(s->ctrl + (uint64_t)slot * KB_SLOT, m, sizeof(*m));
	memset(&op, 0, sizeof(op));
	op.opcode = KRDMA_OP_SEND;
	op.cookie = KB_COOKIE(KB_K_CSEND, slot);
	op.conn = s->conn;
	op.num_sge = 1;
	op.sge.buf = s->ctrl_h;
	op.sge.offset = (uint64_t)slot * KB_SLOT;
	op.sge.length = sizeof(*m);
	return kb_submit(s, &op, 1, "a control SEND");
}

/*
 * Up to @max completions, waiting up to @timeout_ms for the first: from
 * the mapped ring (--ring: no system call unless it waits), else POLL
 */
static int kb_take(struct kb_sess *s, struct krdma_completion *wc,
		   uint32_t max, uint32_t timeout_ms)
{
	if (s->ring.map)
		return krdma_ring_wait(s->fd, &s->ring, wc, max, timeout_ms);
	return krdma_poll_wc(s->fd, wc, max, timeout_ms);
}

/*
 * --ring: the file's completion queue as a mapped ring, set up before
 * anything is in flight. 0, or 1 with the reason printed.
 */
static int kb_ring_setup(struct kb_sess *s, bool ring)
{
	int ret;

	if (!ring)
		return 0;
	ret = krdma_ring_setup(s->fd, 0, &s->ring);
	if (!ret)
		return 0;
	if (ret == -ENOTTY)
		errmsg_advice(ret, "load a krdma of feature \"ring\" (krdmactl version), or drop --ring",
			      "bench: this krdma has no mapped completion ring");
	else
		errmsg("bench: cannot map the completion ring: %s",
		       strerror(-ret));
	return 1;
}

/*
 * Take completions, waiting up to @timeout_ms for the first. Control
 * RECVs go to the mailbox (the client reposts its slot), data
 * completions are counted and timed. 0 or -errno.
 */
static int kb_poll(struct kb_sess *s, uint32_t timeout_ms)
{
	struct krdma_completion wc[64];
	uint64_t now = 0;
	int n, i;

	n = kb_take(s, wc, ARRAY_SIZE(wc), timeout_ms);
	/*
	 * --yield: a busy poll that found nothing gives the CPU to whatever
	 * else may run there, such as the kernel thread that does a soft
	 * device's work for krdma's kernel QP (siw's transmit thread, rxe's
	 * work item on 6.12): polled at full speed, it would wait for a
	 * scheduler tick.
	 */
	if (!n && !timeout_ms && s->yield)
		sched_yield();
	if (n == -EINTR)
		return kb_stop ? -EINTR : 0;
	if (n < 0) {
		kb_fail(s, n, "cannot poll");
		return n;
	}
	for (i = 0; i < n; i++) {
		uint64_t k = KB_KIND(wc[i].cookie), idx = KB_INDEX(wc[i].cookie);

		if (wc[i].status != KRDMA_WC_SUCCESS) {
			const struct krdma_completion *bad = &wc[i];

			/* decided by the next message (server_one()) */
			if (s->defer_send_err && k == KB_K_CSEND) {
				if (!s->send_wc.status)
					s->send_wc = wc[i];
				continue;
			}
			/* the first failure says why (a flushed RECV does not) */
			if (s->defer_send_err && s->send_wc.status)
				bad = &s->send_wc;
			return kb_fail_wc(s, bad);
		}
		switch (k) {
		case KB_K_CRECV: {
			struct kb_msg *m = &s->mbox[s->mb_tail % KB_MBOX];

			if (s->mb_tail - s->mb_head == KB_MBOX) {
				kb_fail(s, 0, "too many control messages");
				return -EOVERFLOW;
			}
			memcpy(m, s->ctrl + idx * KB_SLOT, sizeof(*m));
			if (wc[i].byte_len != sizeof(*m) ||
			    m->magic != KB_MAGIC || m->version != KB_VERSION) {
				kb_fail(s, 0, "not a krdmactl bench message (%u bytes); is a krdmactl bench at the other end?",
					wc[i].byte_len);
				return -EPROTO;
			}
			s->mb_tail++;
			if (!s->server) {
				int ret = kb_post_ctrl_recv(s, idx);

				if (ret)
					return ret;
			}
			break;
		}
		case KB_K_CSEND:
			break;
		case KB_K_DATA:
			/*
			 * Done: @idx, and the unsignaled operations before it
			 * (timed to this completion, which tells of them)
			 */
			if (idx < s->data_done)
				break;
			if (s->t_submit) {
				uint64_t j;

				if (!now)
					now = kb_now();
				for (j = s->data_done; j <= idx; j++)
					s->lat_ns[j] = now - s->t_submit[j] > UINT32_MAX ?
						       UINT32_MAX : now - s->t_submit[j];
			}
			s->data_done = idx + 1;
			break;
		case KB_K_DRECV:
			s->drecv_done++;
			break;
		}
	}
	return 0;
}

/* Wait for a control message of type @type (0: any) */
static int kb_recv(struct kb_sess *s, unsigned int type, struct kb_msg *m,
		   const char *what)
{
	uint64_t deadline = kb_now() + s->timeout_ms * 1000000ULL;
	int ret;

	while (s->mb_head == s->mb_tail) {
		if (kb_stop) {
			kb_fail(s, 0, "interrupted");
			return -EINTR;
		}
		if (kb_now() > deadline) {
			kb_fail(s, 0, "no %s within %u ms", what, s->timeout_ms);
			return -ETIMEDOUT;
		}
		ret = kb_poll(s, 100);
		if (ret)
			return ret;
	}
	*m = s->mbox[s->mb_head++ % KB_MBOX];
	if (type && m->type != type) {
		kb_fail(s, 0, "expected %s, got message type %u", what, m->type);
		return -EPROTO;
	}
	return 0;
}

/*
 * Connect with the control RECVs @recvs already posted (when the module
 * can: KRDMA_FEATURE_EARLY_RECVS), so that the WELCOME finds them
 */
static int kb_connect_raw(int fd, const struct krdma_addr *dst,
			  uint32_t flags, uint32_t timeout_ms, uint32_t sq,
			  uint32_t rq, const struct krdma_op *recvs,
			  uint32_t nrecvs, uint32_t *conn)
{
	struct krdma_connect c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.size = sizeof(c);
	c.flags = flags;
	c.dst = *dst;
	c.timeout_ms = timeout_ms;
	c.sq_depth = sq;
	c.rq_depth = rq;
	c.recv_count = nrecvs;
	c.recvs = (uintptr_t)recvs;
	ret = krdma_ioctl(fd, KRDMA_IOC_CONNECT, &c);
	if (!ret)
		*conn = c.handle;
	return ret;
}

static const char *kb_conn_device(struct kb_sess *s, char *dev, size_t len,
				  uint32_t *transport)
{
	struct krdma_conn_query q;
	struct krdma_dev_query dq;

	snprintf(dev, len, "?");
	*transport = 0;
	if (krdma_conn_info(s->fd, s->conn, &q) ||
	    krdma_dev_query(s->fd, q.dev_index, &dq))
		return "unknown";
	snprintf(dev, len, "%s", (const char *)dq.name);
	*transport = dq.transport;
	return krdma_transport_str(dq.transport);
}

/*
 * The server
 */

/* A SEND run: RECVs of @size until @count arrived, credits back */
static int server_send_run(struct kb_sess *s, const struct kb_msg *start)
{
	uint64_t size = start->a, count = start->b, credits = start->c;
	uint64_t posted = 0, pending = 0, batch, base = s->drecv_done;
	uint64_t deadline;
	bool ctrl_posted = false;
	struct kb_msg m;
	int ret;

	if (!size || size > s->data_len / 2 || size > KB_SEND_MAX ||
	    !count || !credits || credits > KB_MAX_DEPTH) {
		memset(&m, 0, sizeof(m));
		m.type = KB_READY;
		m.status = EINVAL;
		ret = kb_server_recv(s);
		return ret ? ret : kb_send(s, &m);
	}
	batch = credits / 2 ? credits / 2 : 1;

	/* The RECV sequence: count data RECVs, then one control RECV */
	while (posted < credits && posted <= count) {
		struct krdma_op op;

		if (posted == count) {
			ret = kb_server_recv(s);
			ctrl_posted = true;
		} else {
			memset(&op, 0, sizeof(op));
			op.opcode = KRDMA_OP_RECV;
			op.cookie = KB_COOKIE(KB_K_DRECV, 0);
			op.conn = s->conn;
			op.num_sge = 1;
			op.sge.buf = s->data_h;
			op.sge.length = size;
			ret = kb_submit(s, &op, 1, "a data RECV");
		}
		if (ret)
			return ret;
		posted++;
	}
	memset(&m, 0, sizeof(m));
	m.type = KB_READY;
	ret = kb_send(s, &m);
	if (ret)
		return ret;

	deadline = kb_now() + s->timeout_ms * 1000000ULL;
	while (s->drecv_done - base < count) {
		uint64_t got = s->drecv_done - base, before = got;

		ret = kb_poll(s, 0);
		if (ret)
			return ret;
		got = s->drecv_done - base;
		if (got != before)
			deadline = kb_now() + s->timeout_ms * 1000000ULL;
		else if (kb_now() > deadline || kb_stop) {
			kb_fail(s, 0, "SEND run: %" PRIu64 " of %" PRIu64 " messages arrived",
				got, count);
			return -ETIMEDOUT;
		}
		/* Repost one RECV for each that completed */
		while (posted < got + credits && posted <= count) {
			struct krdma_op op;

			if (posted == count) {
				ret = kb_server_recv(s);
				ctrl_posted = true;
			} else {
				memset(&op, 0, sizeof(op));
				op.opcode = KRDMA_OP_RECV;
				op.cookie = KB_COOKIE(KB_K_DRECV, 0);
				op.conn = s->conn;
				op.num_sge = 1;
				op.sge.buf = s->data_h;
				op.sge.length = size;
				ret = kb_submit(s, &op, 1, "a data RECV");
			}
			if (ret)
				return ret;
			posted++;
		}
		pending += got - before;
		if (pending >= batch && got < count) {
			memset(&m, 0, sizeof(m));
			m.type = KB_CREDIT;
			m.a = pending;
			pending = 0;
			ret = kb_send(s, &m);
			if (ret)
				return ret;
		}
	}
	if (!ctrl_posted) {
		ret = kb_server_recv(s);
		if (ret)
			return ret;
	}
	memset(&m, 0, sizeof(m));
	m.type = KB_FIN;
	m.a = pending;
	return kb_send(s, &m);
}

static inline uint8_t kb_tag(uint64_t i)
{
	return i % 255 + 1;
}

/* Wait until byte @p is @v: 0, or -ETIMEDOUT */
static int kb_spin(struct kb_sess *s, volatile uint8_t *p, uint8_t v)
{
	uint64_t deadline = 0;
	unsigned int n = 0;

	while (*p != v) {
		if (s->yield)
			sched_yield();	/* see kb_poll() */
		if (++n % 4096)
			continue;
		if (!deadline)
			deadline = kb_now() + s->timeout_ms * 1000000ULL;
		/* drain our WRITE completions meanwhile */
		if (kb_poll(s, 0))
			return -EIO;
		if (kb_now() > deadline || kb_stop) {
			kb_fail(s, 0, "ping-pong: the peer's WRITE did not arrive");
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/* One side of the WRITE ping-pong; the client starts */
static int kb_pingpong(struct kb_sess *s, const struct krdma_token *peer,
		       uint64_t size, uint64_t count, bool client)
{
	uint8_t *in = client ? s->data + s->data_len / 2 : s->data;
	uint8_t *out = client ? s->data : s->data + s->data_len / 2;
	struct krdma_op op;
	uint64_t i, t0 = 0;
	int ret;

	/* @in was zeroed before the peer could write to it */
	memset(&op, 0, sizeof(op));
	op.opcode = KRDMA_OP_WRITE;
	op.conn = s->conn;
	op.num_sge = 1;
	op.sge.buf = s->data_h;
	op.sge.offset = out - s->data;
	op.sge.length = size;
	op.remote = *peer;
	for (i = 0; i < count; i++) {
		if (client) {
			t0 = kb_now();
		} else {
			ret = kb_spin(s, &in[size - 1], kb_tag(i));
			if (ret)
				return ret;
		}
		out[size - 1] = kb_tag(i);
		op.cookie = KB_COOKIE(KB_K_CSEND, 0);
		ret = kb_submit(s, &op, 1, "a ping-pong WRITE");
		if (ret)
			return ret;
		if (client) {
			ret = kb_spin(s, &in[size - 1], kb_tag(i));
			if (ret)
				return ret;
			if (s->lat_ns)
				s->lat_ns[i] = (kb_now() - t0) / 2;
		}
	}
	/* Our last WRITE's completion */
	return kb_poll(s, 100);
}

/* Server: a SEND or WRITE that failed before a message other than BYE */
static int kb_send_failed(struct kb_sess *s)
{
	return s->send_wc.status ? kb_fail_wc(s, &s->send_wc) : 0;
}

static int server_one(struct kb_sess *s, uint64_t max_size)
{
	uint32_t transport;
	char dev[KRDMA_NAME_MAX];
	struct kb_msg m;
	int ret;

	kb_conn_device(s, dev, sizeof(dev), &transport);
	ret = kb_server_recv(s);
	if (ret)
		return ret;
	if (transport == KRDMA_TRANSPORT_IWARP) {
		/* the client's first RECVs (see krdmactl_ping.c) */
		struct timespec ts = { 0, KB_IWARP_GRACE_MS * 1000000L };

		nanosleep(&ts, NULL);
	}
	memset(&m, 0, sizeof(m));
	m.type = KB_WELCOME;
	m.a = max_size;
	/*
	 * The client closes as soon as its BYE is sent. On siw our last
	 * SEND or WRITE before it (the WELCOME of "bench -o conn", the
	 * last ping-pong WRITE) was then seen to complete here with
	 * LOC_QP_OP_ERR although the client had it: siw's transmit thread
	 * checks for the peer's FIN before it completes a piece TCP has
	 * already taken. So a failed SEND or WRITE is kept, and the next
	 * message decides: after a BYE it is moot; before any other (or
	 * with our RECV flushed, the connection lost) it ends the session.
	 */
	memset(&s->send_wc, 0, sizeof(s->send_wc));
	s->defer_send_err = true;
	ret = kb_send(s, &m);
	if (!ret)
		ret = kb_recv(s, 0, &m, "SETUP");
	if (ret)
		return ret;
	/* "bench -o conn": a client that only connects, and says BYE */
	if (m.type == KB_BYE)
		return 0;
	ret = kb_send_failed(s);
	if (ret)
		return ret;
	if (m.type != KB_SETUP) {
		kb_fail(s, 0, "expected SETUP, got message type %u", m.type);
		return -EPROTO;
	}
	if (!m.a || m.a > max_size) {
		memset(&m, 0, sizeof(m));
		m.type = KB_TOKEN;
		m.status = EMSGSIZE;
		kb_fail(s, 0, "the client asked for sizes beyond -S");
		ret = kb_server_recv(s);
		return ret ? ret : kb_send(s, &m);
	}
	memset(&m, 0, sizeof(m));
	m.type = KB_TOKEN;
	ret = kb_map(s, 2 * max_size,
		     KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ |
		     KRDMA_ACCESS_REMOTE_WRITE, &s->data, &s->data_map,
		     &s->data_h);
	if (!ret) {
		s->data_len = 2 * max_size;
		ret = krdma_grant_window(s->fd, s->conn, s->data_h, 0, max_size,
					 KRDMA_ACCESS_REMOTE_READ |
					 KRDMA_ACCESS_REMOTE_WRITE, &s->grant,
					 &s->tok);
		if (ret)
			kb_fail(s, ret, "cannot grant the window");
	}
	m.status = ret < 0 ? -ret : 0;
	m.tok_addr = s->tok.addr;
	m.tok_length = s->tok.length;
	m.tok_rkey = s->tok.rkey;
	m.tok_access = s->tok.access;
	m.tok_seg_shift = s->tok.seg_shift;
	m.tok_tag = s->tok.tag;
	ret = kb_server_recv(s);
	if (!ret)
		ret = kb_send(s, &m);
	if (ret || m.status)
		return ret ? ret : -(int)m.status;

	for (;;) {
		ret = kb_recv(s, 0, &m, "the client's next message");
		if (ret)
			return ret;
		if (m.type != KB_BYE) {
			ret = kb_send_failed(s);
			if (ret)
				return ret;
		}
		switch (m.type) {
		case KB_BYE: {
			uint64_t end = kb_now() + 2000000000ULL;

			/*
			 * The client closes: wait (2 s at most) for our next
			 * RECV's flush, so as not to close under the client's
			 * last completions
			 */
			if (!kb_server_recv(s))
				while (kb_now() < end && !kb_poll(s, 100))
					;
			s->err[0] = '\0';
			return 0;
		}
		case KB_SEND_START:
			ret = server_send_run(s, &m);
			break;
		case KB_LAT_START: {
			struct krdma_token peer;
			struct kb_msg r;
			bool bad = !m.a || m.a > max_size || !m.b;

			memset(&peer, 0, sizeof(peer));
			peer.addr = m.tok_addr;
			peer.length = m.tok_length;
			peer.rkey = m.tok_rkey;
			peer.access = m.tok_access;
			peer.seg_shift = m.tok_seg_shift;
			peer.tag = m.tok_tag;
			memset(&r, 0, sizeof(r));
			r.type = KB_READY;
			r.status = bad ? EINVAL : 0;
			if (!bad)
				memset(s->data, 0, m.a);
			ret = kb_server_recv(s);
			if (!ret)
				ret = kb_send(s, &r);
			if (!ret && !bad)
				ret = kb_pingpong(s, &peer, m.a, m.b, false);
			break;
		}
		default:
			kb_fail(s, 0, "unexpected message type %u", m.type);
			return -EPROTO;
		}
		if (ret)
			return ret;
	}
}

struct bench_opts {
	const char *host;
	const char *addr;	/* server: listen address */
	uint32_t port;
	bool server;
	uint32_t count;		/* server: clients */
	bool json;
	uint32_t depth;
	uint32_t batch;
	uint64_t iters;		/* most iterations per size */
	bool iters_set;		/* -n given (scale: else KB_SCALE_CONNS) */
	uint64_t min_iters;
	uint64_t bytes;		/* bytes per size: iters = bytes / size */
	uint64_t sizes[KB_MAX_SIZES];
	unsigned int nsizes;
	bool ops[KB_NOPS];
	uint32_t timeout_ms;
	uint64_t max_size;	/* server */
	bool ring;		/* completions from the mapped ring */
	bool yield;		/* sched_yield() between empty polls */
	uint32_t signal_every;	/* one data operation in N signaled */
};

static int server_run(const struct bench_opts *o)
{
	struct tool_refusals refusals;
	struct krdma_addr addr, bound;
	struct krdma_listen l;
	struct krdma_completion drain[16];
	struct kb_sess s;
	uint32_t served = 0, failed = 0;
	char buf[80];
	int ret;

	memset(&s, 0, sizeof(s));
	s.server = true;
	s.timeout_ms = o->timeout_ms;
	s.fd = tool_session("bench", o->addr, o->port, &addr, NULL, 0);
	if (s.fd < 0)
		return -s.fd;
	s.yield = o->yield;
	if (kb_ring_setup(&s, o->ring)) {
		close(s.fd);
		return 1;
	}
	ret = kb_map(&s, 2 * KB_SLOTS * KB_SLOT, KRDMA_ACCESS_LOCAL_WRITE,
		     &s.ctrl, &s.ctrl_len, &s.ctrl_h);
	if (ret) {
		errmsg("bench: %s", s.err);
		goto out;
	}
	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.addr = addr;
	l.backlog = 4;
	l.sq_depth = 64;
	l.rq_depth = KB_SERVER_RQ;
	ret = tool_listen(s.fd, "bench", &l);
	if (ret)
		goto out;
	bound = l.addr;
	tool_refusals_init(&refusals, s.fd, "bench",
			   "bench -l answers krdmactl bench", l.handle);
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = kb_on_signal;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	printf("krdmactl bench: listening on %s\n",
	       krdma_addr_str(&bound, buf, sizeof(buf)));
	fflush(stdout);
	while (!kb_stop && (!o->count || served < o->count)) {
		/* And says whom the kernel turned away (krdma peers only) */
		ret = tool_accept(&refusals, s.fd, &s.conn);
		if (ret == -EINTR || ret == -EAGAIN) {
			ret = 0;
			continue;
		}
		if (ret) {
			errmsg_err(ret, "bench: cannot accept");
			break;
		}
		s.err[0] = '\0';
		s.mb_head = s.mb_tail = 0;
		ret = server_one(&s, o->max_size);
		served++;
		if (ret || s.err[0]) {
			failed++;
			printf("client %u: FAILED: %s\n", served,
			       s.err[0] ? s.err : strerror(-ret));
		} else {
			printf("client %u: done\n", served);
		}
		fflush(stdout);
		krdma_destroy_handle(s.fd, s.conn);
		s.conn = 0;
		if (s.grant)
			krdma_destroy_handle(s.fd, s.grant);
		s.grant = 0;
		if (s.data_h)
			krdma_destroy_handle(s.fd, s.data_h);
		s.data_h = 0;
		/* drain flushed completions of this client */
		while (kb_take(&s, drain, ARRAY_SIZE(drain), 200) > 0)
			;
		if (s.data)
			munmap(s.data, s.data_map);
		s.data = NULL;
		ret = 0;
	}
	/* Those turned away while the last client was served */
	if (!ret)
		tool_refusals_tell(&refusals, s.fd);
out:
	krdma_ring_unmap(&s.ring);
	close(s.fd);
	if (s.ctrl)
		munmap(s.ctrl, s.ctrl_len);
	if (ret)
		return finish_stdout(1);
	return finish_stdout(failed ? 1 : 0);
}

/*
 * The client
 */

struct kb_row {
	enum kb_op op;
	uint64_t size, iters;
	bool skipped;
	const char *why;
	double seconds, mb_per_s, mmsg_per_s;
	double lat_med, lat_p99, lat_p999, lat_avg;	/* us */
	double cpu_user, cpu_sys, cpu_s_per_gb;
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double kb_pct(const uint32_t *v, uint64_t n, double p)
{
	uint64_t i = (uint64_t)(p * (n - 1) + 0.5);

	return n ? v[i < n ? i : n - 1] / 1e3 : 0;
}

static double tv_s(const struct timeval *tv)
{
	return tv->tv_sec + tv->tv_usec / 1e6;
}

/* WRITE, READ or SEND of @size, @iters times; fills @r */
static int client_run(struct kb_sess *s, const struct bench_opts *o,
		      enum kb_op kop, uint64_t size, uint64_t iters,
		      struct kb_row *r)
{
	struct krdma_op ops[KB_MAX_BATCH];
	uint64_t posted = 0, t0, t1, credits = UINT64_MAX, last, done_before = 0;
	uint32_t depth = o->depth, batch = o->batch;
	/* READs stay signaled: iWARP refuses unsignaled ones */
	uint32_t every = kop == KB_OP_READ ? 1 : o->signal_every;
	struct rusage ru0, ru1;
	struct kb_msg m;
	bool fin = false;
	unsigned int i;
	int ret = 0;

	s->data_done = 0;
	memset(s->lat_ns, 0, iters * sizeof(*s->lat_ns));
	if (kop == KB_OP_SEND) {
		memset(&m, 0, sizeof(m));
		m.type = KB_SEND_START;
		m.a = size;
		m.b = iters;
		m.c = depth;
		ret = kb_send(s, &m);
		if (!ret)
			ret = kb_recv(s, KB_READY, &m, "READY");
		if (ret)
			return ret;
		if (m.status) {
			kb_fail(s, 0, "the server cannot take SENDs of %" PRIu64 " bytes: %s",
				size, strerror(m.status));
			return -EPROTO;
		}
		credits = depth;
	} else if (kop == KB_OP_LAT) {
		memset(&m, 0, sizeof(m));
		m.type = KB_LAT_START;
		m.a = size;
		m.b = iters;
		{
			struct krdma_token mine;
			uint32_t g;

			ret = krdma_grant_window(s->fd, s->conn, s->data_h,
						 s->data_len / 2, size,
						 KRDMA_ACCESS_REMOTE_WRITE, &g,
						 &mine);
			if (ret) {
				kb_fail(s, ret, "cannot grant the ping-pong window");
				return ret;
			}
			memset(s->data + s->data_len / 2, 0, size);
			m.tok_addr = mine.addr;
			m.tok_length = mine.length;
			m.tok_rkey = mine.rkey;
			m.tok_access = mine.access;
			m.tok_seg_shift = mine.seg_shift;
			m.tok_tag = mine.tag;
			ret = kb_send(s, &m);
			if (!ret)
				ret = kb_recv(s, KB_READY, &m, "READY");
			if (!ret && m.status) {
				kb_fail(s, 0, "the server cannot ping-pong %" PRIu64 " bytes: %s",
					size, strerror(m.status));
				ret = -EPROTO;
			}
			getrusage(RUSAGE_SELF, &ru0);
			t0 = kb_now();
			if (!ret)
				ret = kb_pingpong(s, &s->tok, size, iters, true);
			t1 = kb_now();
			getrusage(RUSAGE_SELF, &ru1);
			krdma_destroy_handle(s->fd, g);
			if (ret)
				return ret;
		}
		goto stats;
	}

	getrusage(RUSAGE_SELF, &ru0);
	t0 = kb_now();
	last = t0;
	while (s->data_done < iters) {
		uint64_t room = depth - (posted - s->data_done);
		uint64_t n = iters - posted;

		if (n > batch)
			n = batch;
		if (kop == KB_OP_SEND && credits < room)
			room = credits;
		/* Submit a full batch (or what is left) once there is room */
		if (n && room >= n) {
			uint64_t now = kb_now();

			for (i = 0; i < n; i++) {
				memset(&ops[i], 0, sizeof(ops[i]));
				ops[i].opcode = kop == KB_OP_WRITE ? KRDMA_OP_WRITE :
						kop == KB_OP_READ ? KRDMA_OP_READ :
						KRDMA_OP_SEND;
				ops[i].cookie = KB_COOKIE(KB_K_DATA, posted + i);
				if (!kb_signaled(posted + i, iters, every))
					ops[i].flags = KRDMA_OP_F_UNSIGNALED;
				ops[i].conn = s->conn;
				ops[i].num_sge = 1;
				ops[i].sge.buf = s->data_h;
				ops[i].sge.length = size;
				if (kop != KB_OP_SEND)
					ops[i].remote = s->tok;
				s->t_submit[posted + i] = now;
			}
			ret = kb_submit(s, ops, n, kb_op_names[kop]);
			if (ret)
				return ret;
			posted += n;
			if (kop == KB_OP_SEND)
				credits -= n;
			continue;
		}
		ret = kb_poll(s, 0);
		if (ret)
			return ret;
		while (kop == KB_OP_SEND && s->mb_head != s->mb_tail) {
			m = s->mbox[s->mb_head++ % KB_MBOX];
			if (m.type != KB_CREDIT && m.type != KB_FIN) {
				kb_fail(s, 0, "unexpected message type %u in a SEND run",
					m.type);
				return -EPROTO;
			}
			credits += m.a;
			fin |= m.type == KB_FIN;
		}
		if (s->data_done != done_before) {
			done_before = s->data_done;
			last = kb_now();
		} else if (kb_now() - last > s->timeout_ms * 1000000ULL) {
			kb_fail(s, 0, "%s of %" PRIu64 " bytes: %" PRIu64 " of %" PRIu64 " done, then nothing for %u ms",
				kb_op_names[kop], size, s->data_done, iters,
				s->timeout_ms);
			return -ETIMEDOUT;
		}
		if (kb_stop) {
			kb_fail(s, 0, "interrupted");
			return -EINTR;
		}
	}
	t1 = kb_now();
	getrusage(RUSAGE_SELF, &ru1);
	if (kop == KB_OP_SEND) {
		/* the server's FIN: every message arrived */
		while (!fin) {
			ret = kb_recv(s, 0, &m, "FIN");
			if (ret)
				return ret;
			fin = m.type == KB_FIN;
			if (!fin && m.type != KB_CREDIT) {
				kb_fail(s, 0, "expected FIN, got type %u", m.type);
				return -EPROTO;
			}
		}
	}

stats:
	r->seconds = (t1 - t0) / 1e9;
	r->mb_per_s = r->seconds > 0 ? size * iters / r->seconds / 1e6 : 0;
	r->mmsg_per_s = r->seconds > 0 ? iters / r->seconds / 1e6 : 0;
	{
		double sum = 0;
		uint64_t k;

		for (k = 0; k < iters; k++)
			sum += s->lat_ns[k];
		r->lat_avg = sum / iters / 1e3;
	}
	qsort(s->lat_ns, iters, sizeof(*s->lat_ns), cmp_u32);
	r->lat_med = kb_pct(s->lat_ns, iters, 0.5);
	r->lat_p99 = kb_pct(s->lat_ns, iters, 0.99);
	r->lat_p999 = kb_pct(s->lat_ns, iters, 0.999);
	r->cpu_user = tv_s(&ru1.ru_utime) - tv_s(&ru0.ru_utime);
	r->cpu_sys = tv_s(&ru1.ru_stime) - tv_s(&ru0.ru_stime);
	r->cpu_s_per_gb = (r->cpu_user + r->cpu_sys) / (size * iters / 1e9);
	return 0;
}

/*
 * Iterations for @size: bytes / size, within [min_iters, iters]; for the
 * batched operations rounded up to a multiple of the batch (as perftest's
 * post lists want)
 */
static uint64_t kb_iters(const struct bench_opts *o, uint64_t size,
			 enum kb_op op)
{
	uint64_t n = o->bytes / size;

	if (n > o->iters)
		n = o->iters;
	if (n < o->min_iters)
		n = o->min_iters;
	if (op != KB_OP_LAT)
		n = (n + o->batch - 1) / o->batch * o->batch;
	return n;
}

static void print_row_text(const struct kb_row *r, uint32_t depth,
			   uint32_t batch)
{
	if (r->skipped) {
		printf("%-5s %9" PRIu64 " %8s  skipped: %s\n",
		       kb_op_names[r->op], r->size, "-", r->why);
		return;
	}
	printf("%-5s %9" PRIu64 " %8" PRIu64 " %5u %5u %10.1f %8.4f %9.1f %9.1f %9.1f %8.3f\n",
	       kb_op_names[r->op], r->size, r->iters,
	       r->op == KB_OP_LAT ? 1 : depth, r->op == KB_OP_LAT ? 1 : batch,
	       r->mb_per_s, r->mmsg_per_s, r->lat_med, r->lat_p99, r->lat_p999,
	       r->cpu_s_per_gb);
	fflush(stdout);
}

/* The JSON object's first members: what was measured, where, when */
static void kb_json_head(struct json *j, const char *target, const char *dev,
			 const char *transport)
{
	time_t now = time(NULL);
	struct utsname un;
	char date[64];

	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	uname(&un);
	json_begin_object(j, NULL);
	json_str(j, "command", "bench");
	json_str(j, "target", target);
	json_conn_dev(j, dev, transport);
	json_str(j, "date", date);
	json_str(j, "kernel", un.release);
	json_str(j, "machine", un.machine);
}

/* A result of -o conn or -o scale: opens its object, for the rest */
static void kb_json_row_head(struct json *j, const char *op, uint64_t iters)
{
	json_begin_object(j, NULL);
	json_str(j, "op", op);
	json_u64(j, "size", 0);
	json_u64(j, "iters", iters);
	json_bool(j, "skipped", false);
}

/*
 * "bench -o conn": connection setup, one connection at a time
 */

/* Wait for the completion of @cookie; others (flushes of earlier ones) are dropped */
static int kb_conn_wait(struct kb_sess *s, uint64_t cookie, const char *what)
{
	uint64_t deadline = kb_now() + s->timeout_ms * 1000000ULL;
	struct krdma_completion wc[8];
	int n, i;

	while (!kb_stop && kb_now() < deadline) {
		n = kb_take(s, wc, ARRAY_SIZE(wc), 100);
		if (n == -EINTR)
			continue;
		if (n < 0) {
			kb_fail(s, n, "cannot poll");
			return n;
		}
		for (i = 0; i < n; i++) {
			if (wc[i].cookie != cookie)
				continue;
			if (wc[i].status == KRDMA_WC_SUCCESS)
				return 0;
			kb_fail(s, 0, "%s failed: %s", what,
				krdma_wc_status_str(wc[i].status));
			return -EIO;
		}
	}
	kb_fail(s, 0, "no %s within %u ms", what, s->timeout_ms);
	return -ETIMEDOUT;
}

/*
 * One connection: connect (timed: resolution, QP, the CM exchange), wait
 * for the server's WELCOME so that it took this connection, say BYE, and
 * close (timed).
 */
static int kb_conn_once(struct kb_sess *s, const struct krdma_addr *dst,
			uint32_t *connect_ns, uint32_t *close_ns,
			char *dev, size_t dev_len, const char **transport)
{
	uint64_t t0, t1;
	uint32_t slot, tr;
	struct kb_msg m;
	int ret;

	struct krdma_op recv;
	bool early = module_has(s->fd, KRDMA_FEATURE_EARLY_RECVS);

	s->conn = 0;
	kb_ctrl_recv_op(s, 0, &recv);
	t0 = kb_now();
	ret = kb_connect_raw(s->fd, dst, s->connect_flags, s->timeout_ms, 16,
			     8, early ? &recv : NULL, early, &s->conn);
	t1 = kb_now();
	if (ret) {
		char target[80];

		kb_fail(s, ret, "cannot connect to %s",
			krdma_addr_str(dst, target, sizeof(target)));
		s->hint = krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, ret);
		return ret;
	}
	*connect_ns = t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0;
	/* Else the RECV first: on iWARP the WELCOME may follow in 50 ms */
	ret = early ? 0 : kb_post_ctrl_recv(s, 0);
	if (!ret && dev[0] == '?')
		*transport = kb_conn_device(s, dev, dev_len, &tr);
	if (!ret)
		ret = kb_conn_wait(s, KB_COOKIE(KB_K_CRECV, 0), "WELCOME");
	if (!ret) {
		memcpy(&m, s->ctrl, sizeof(m));
		if (m.magic != KB_MAGIC || m.type != KB_WELCOME) {
			kb_fail(s, 0, "not a krdmactl bench server");
			ret = -EPROTO;
		}
	}
	if (!ret) {
		slot = KB_SLOTS + s->send_slot % KB_SLOTS;
		memset(&m, 0, sizeof(m));
		m.type = KB_BYE;
		ret = kb_send(s, &m);
		/*
		 * The server closes as soon as it has the BYE: on iWARP the
		 * SEND may then complete here with an error. Wait for it
		 * (its buffer is ours again), but the connection did its work.
		 */
		if (!ret && kb_conn_wait(s, KB_COOKIE(KB_K_CSEND, slot),
					 "the BYE"))
			s->err[0] = '\0';
	}
	t0 = kb_now();
	krdma_destroy_handle(s->fd, s->conn);
	t1 = kb_now();
	s->conn = 0;
	*close_ns = t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0;
	return ret;
}

static int bench_conn(const struct bench_opts *o)
{
	const char *transport = "unknown";
	char dev[KRDMA_NAME_MAX] = "?", target[80];
	uint32_t *conn_ns = NULL, *close_ns = NULL;
	uint64_t n = o->iters, done = 0, i, t0, sum = 0;
	double secs = 0;
	struct krdma_addr dst;
	struct kb_sess s;
	bool ok;
	int ret;

	memset(&s, 0, sizeof(s));
	s.timeout_ms = o->timeout_ms;
	s.fd = tool_session("bench", o->host, o->port, &dst, target,
			    sizeof(target));
	if (s.fd < 0)
		return -s.fd;
	s.yield = o->yield;
	if (kb_ring_setup(&s, o->ring)) {
		close(s.fd);
		return 1;
	}
	s.connect_flags = tool_connect_flags(s.fd);
	conn_ns = calloc(n, sizeof(*conn_ns));
	close_ns = calloc(n, sizeof(*close_ns));
	if (!conn_ns || !close_ns) {
		kb_fail(&s, -ENOMEM, "out of memory");
		ret = -ENOMEM;
		goto report;
	}
	ret = kb_map(&s, 2 * KB_SLOTS * KB_SLOT, KRDMA_ACCESS_LOCAL_WRITE,
		     &s.ctrl, &s.ctrl_len, &s.ctrl_h);
	t0 = kb_now();
	for (i = 0; !ret && !kb_stop && i < n; i++) {
		ret = kb_conn_once(&s, &dst, &conn_ns[i], &close_ns[i], dev,
				   sizeof(dev), &transport);
		if (ret)
			break;
		sum += conn_ns[i];
		done++;
	}
	secs = (kb_now() - t0) / 1e9;
	if (ret) {
		size_t len = strlen(s.err);

		snprintf(s.err + len, sizeof(s.err) - len,
			 " (connection %" PRIu64 " of %" PRIu64 ")", done + 1, n);
	}
	qsort(conn_ns, done, sizeof(*conn_ns), cmp_u32);
	qsort(close_ns, done, sizeof(*close_ns), cmp_u32);

report:
	ok = !ret && !s.err[0] && done == n;
	if (o->json) {
		struct json j = { .f = stdout };

		kb_json_head(&j, target, dev, transport);
		json_begin_array(&j, "results");
		if (done) {
			kb_json_row_head(&j, "conn", done);
			json_double(&j, "seconds", secs, 6);
			json_begin_object(&j, "lat_us");
			json_double(&j, "avg", sum / 1e3 / done, 3);
			json_double(&j, "median", kb_pct(conn_ns, done, 0.5), 3);
			json_double(&j, "p99", kb_pct(conn_ns, done, 0.99), 3);
			json_double(&j, "p99_9", kb_pct(conn_ns, done, 0.999), 3);
			json_end_object(&j);
			json_begin_object(&j, "close_us");
			json_double(&j, "median", kb_pct(close_ns, done, 0.5), 3);
			json_double(&j, "p99", kb_pct(close_ns, done, 0.99), 3);
			json_end_object(&j);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_bool(&j, "ok", ok);
		kb_json_error(&j, &s, ok);
		json_end_object(&j);
	} else if (done) {
		printf("KRDMA BENCH %s via %s (%s): %" PRIu64 " connections, one at a time\n",
		       target, dev, transport, done);
		printf("%-5s %8s %12s %12s %12s %12s %12s\n", "op", "conns",
		       "connect_med", "connect_p99", "connect_max", "close_med",
		       "close_p99");
		printf("%-5s %8" PRIu64 " %10.1fus %10.1fus %10.1fus %10.1fus %10.1fus\n",
		       "conn", done, kb_pct(conn_ns, done, 0.5),
		       kb_pct(conn_ns, done, 0.99), conn_ns[done - 1] / 1e3,
		       kb_pct(close_ns, done, 0.5),
		       kb_pct(close_ns, done, 0.99));
	}
	fflush(stdout);
	if (s.err[0])
		errmsg_advice(0, s.hint, "bench: %s", s.err);
	krdma_ring_unmap(&s.ring);
	close(s.fd);
	if (s.ctrl)
		munmap(s.ctrl, s.ctrl_len);
	free(conn_ns);
	free(close_ns);
	return finish_stdout(ok ? 0 : 1);
}

/*
 * "bench -o scale": ITERS connections to a listener of this process, all
 * kept open together, as rdma_cm's cmtime keeps its -c connections
 */

/* Slab and VmallocUsed of /proc/meminfo, in KiB; false if unreadable */
static bool kb_meminfo(uint64_t *slab_kb, uint64_t *vmalloc_kb)
{
	char line[128];
	unsigned int found = 0;
	uint64_t v;
	FILE *f;

	f = fopen("/proc/meminfo", "re");
	if (!f)
		return false;
	while (found != 3 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Slab: %" SCNu64, &v) == 1) {
			*slab_kb = v;
			found |= 1;
		} else if (sscanf(line, "VmallocUsed: %" SCNu64, &v) == 1) {
			*vmalloc_kb = v;
			found |= 2;
		}
	}
	fclose(f);
	return found == 3;
}

/* KiB per connection from @before to @after (either way) */
static double kb_per_conn(uint64_t before, uint64_t after, uint64_t n)
{
	return n ? ((double)after - (double)before) / n : 0;
}

struct kb_scale {
	uint32_t *conns, *accepted;	/* handles, 0: none */
	uint32_t *connect_ns, *accept_ns;
	uint64_t done;			/* connected and accepted */
	double setup_s, teardown_s;
	uint64_t slab0, vm0, slab_up, vm_up, slab_end, vm_end;
	bool mem;			/* /proc/meminfo was read each time */
};

/* Connect to @dst, where this process listens as @listener, and accept */
static int kb_scale_one(struct kb_sess *s, struct kb_scale *sc,
			const struct krdma_addr *dst, uint32_t listener)
{
	uint64_t i = sc->done, t0, t1;
	int ret;

	t0 = kb_now();
	ret = kb_connect_raw(s->fd, dst, s->connect_flags, s->timeout_ms, 1,
			     1, NULL, 0, &sc->conns[i]);
	t1 = kb_now();
	if (ret) {
		kb_fail(s, ret, "connect %" PRIu64, i + 1);
		s->hint = krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, ret);
		return ret;
	}
	sc->connect_ns[i] = t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0;
	ret = krdma_accept_conn(s->fd, listener, 0, s->timeout_ms,
				&sc->accepted[i]);
	t0 = kb_now();
	if (ret) {
		kb_fail(s, ret, "accept %" PRIu64, i + 1);
		s->hint = krdma_cmd_strerror_hint(KRDMA_IOC_ACCEPT, ret);
		return ret;
	}
	sc->accept_ns[i] = t0 - t1 > UINT32_MAX ? UINT32_MAX : t0 - t1;
	sc->done++;
	return 0;
}

static void kb_scale_json(const struct kb_scale *sc, const char *target,
			  const char *dev, const char *transport,
			  const struct kb_sess *s, bool ok)
{
	struct json j = { .f = stdout };
	uint64_t n = sc->done;

	kb_json_head(&j, target, dev, transport);
	json_begin_array(&j, "results");
	if (n) {
		kb_json_row_head(&j, "scale", n);
		json_double(&j, "setup_s", sc->setup_s, 6);
		json_double(&j, "conns_per_s", n / sc->setup_s, 1);
		json_begin_object(&j, "connect_us");
		json_double(&j, "median", kb_pct(sc->connect_ns, n, 0.5), 3);
		json_double(&j, "p99", kb_pct(sc->connect_ns, n, 0.99), 3);
		json_double(&j, "max", sc->connect_ns[n - 1] / 1e3, 3);
		json_end_object(&j);
		json_begin_object(&j, "accept_us");
		json_double(&j, "median", kb_pct(sc->accept_ns, n, 0.5), 3);
		json_double(&j, "p99", kb_pct(sc->accept_ns, n, 0.99), 3);
		json_end_object(&j);
		json_double(&j, "teardown_s", sc->teardown_s, 6);
		json_double(&j, "teardown_us_per_conn",
			    sc->teardown_s * 1e6 / n, 3);
		if (sc->mem) {
			json_begin_object(&j, "kb_per_conn");
			json_double(&j, "slab", kb_per_conn(sc->slab0,
							    sc->slab_up, n), 3);
			json_double(&j, "vmalloc", kb_per_conn(sc->vm0,
							       sc->vm_up, n), 3);
			json_end_object(&j);
			json_begin_object(&j, "kb_left");
			json_double(&j, "slab", (double)sc->slab_end - sc->slab0,
				    0);
			json_double(&j, "vmalloc", (double)sc->vm_end - sc->vm0,
				    0);
			json_end_object(&j);
		} else {
			json_null(&j, "kb_per_conn");
			json_null(&j, "kb_left");
		}
		json_end_object(&j);
	}
	json_end_array(&j);
	json_bool(&j, "ok", ok);
	kb_json_error(&j, s, ok);
	json_end_object(&j);
}

static int bench_scale(const struct bench_opts *o)
{
	const char *transport = "unknown";
	char dev[KRDMA_NAME_MAX] = "?", target[80];
	uint64_t n = o->iters_set ? o->iters : KB_SCALE_CONNS, i, t0;
	struct krdma_listen l;
	struct krdma_addr dst;
	struct kb_scale sc;
	struct kb_sess s;
	uint32_t tr;
	bool ok;
	int ret;

	memset(&s, 0, sizeof(s));
	memset(&sc, 0, sizeof(sc));
	s.timeout_ms = o->timeout_ms;
	s.fd = tool_session("bench", o->host, o->port, &dst, target,
			    sizeof(target));
	if (s.fd < 0)
		return -s.fd;
	s.connect_flags = tool_connect_flags(s.fd);
	sc.conns = calloc(n, sizeof(*sc.conns));
	sc.accepted = calloc(n, sizeof(*sc.accepted));
	sc.connect_ns = calloc(n, sizeof(*sc.connect_ns));
	sc.accept_ns = calloc(n, sizeof(*sc.accept_ns));
	if (!sc.conns || !sc.accepted || !sc.connect_ns || !sc.accept_ns) {
		kb_fail(&s, -ENOMEM, "out of memory");
		ret = -ENOMEM;
		goto report;
	}
	/* The smallest queues, as cmtime's QPs (one WR each way) */
	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.addr = dst;
	l.backlog = 16;
	l.sq_depth = 1;
	l.rq_depth = 1;
	ret = krdma_ioctl(s.fd, KRDMA_IOC_LISTEN, &l);
	if (ret) {
		kb_fail(&s, ret, "cannot listen on %s", target);
		s.hint = krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN, ret);
		goto report;
	}
	sc.mem = kb_meminfo(&sc.slab0, &sc.vm0);
	t0 = kb_now();
	for (i = 0; !ret && !kb_stop && i < n; i++)
		ret = kb_scale_one(&s, &sc, &dst, l.handle);
	sc.setup_s = (kb_now() - t0) / 1e9;
	if (!ret && kb_stop) {
		kb_fail(&s, 0, "interrupted");
		ret = -EINTR;
	}
	sc.mem = sc.mem && kb_meminfo(&sc.slab_up, &sc.vm_up);
	if (sc.done) {
		s.conn = sc.conns[0];
		transport = kb_conn_device(&s, dev, sizeof(dev), &tr);
		s.conn = 0;
	}
	/* Both ends of each, in the order they came up */
	t0 = kb_now();
	for (i = 0; i < n; i++) {
		if (sc.conns[i])
			krdma_destroy_handle(s.fd, sc.conns[i]);
		if (sc.accepted[i])
			krdma_destroy_handle(s.fd, sc.accepted[i]);
	}
	sc.teardown_s = (kb_now() - t0) / 1e9;
	krdma_destroy_handle(s.fd, l.handle);
	sc.mem = sc.mem && kb_meminfo(&sc.slab_end, &sc.vm_end);
	qsort(sc.connect_ns, sc.done, sizeof(*sc.connect_ns), cmp_u32);
	qsort(sc.accept_ns, sc.done, sizeof(*sc.accept_ns), cmp_u32);

report:
	ok = !ret && !s.err[0] && sc.done == n;
	if (o->json) {
		kb_scale_json(&sc, target, dev, transport, &s, ok);
	} else if (sc.done) {
		printf("KRDMA BENCH %s via %s (%s): %" PRIu64 " connections to a listener of this process, kept open together\n",
		       target, dev, transport, sc.done);
		printf("%-5s %6s %9s %8s %11s %10s %9s %10s %11s %12s\n",
		       "op", "conns", "setup_s", "conn/s", "connect_med",
		       "accept_med", "slab_kB", "vmalloc_kB", "teardown_s",
		       "teardown_us");
		printf("%-5s %6" PRIu64 " %9.3f %8.1f %9.1fus %8.1fus %9.1f %10.1f %11.3f %12.1f\n",
		       "scale", sc.done, sc.setup_s, sc.done / sc.setup_s,
		       kb_pct(sc.connect_ns, sc.done, 0.5),
		       kb_pct(sc.accept_ns, sc.done, 0.5),
		       sc.mem ? kb_per_conn(sc.slab0, sc.slab_up, sc.done) : 0,
		       sc.mem ? kb_per_conn(sc.vm0, sc.vm_up, sc.done) : 0,
		       sc.teardown_s, sc.teardown_s * 1e6 / sc.done);
		printf("(slab_kB, vmalloc_kB: /proc/meminfo's Slab and VmallocUsed with all\n"
		       " of them up, less before, per connection with both of its ends)\n");
	}
	fflush(stdout);
	if (s.err[0])
		errmsg_advice(0, s.hint, "bench: %s", s.err);
	close(s.fd);
	free(sc.conns);
	free(sc.accepted);
	free(sc.connect_ns);
	free(sc.accept_ns);
	return finish_stdout(ok ? 0 : 1);
}

static int bench_client(const struct bench_opts *o)
{
	struct krdma_addr dst;
	struct kb_sess s;
	struct kb_row *rows = NULL;
	unsigned int nrows = 0, i, op;
	uint64_t max_size = 0, max_iters = 0;
	const char *transport = "unknown";
	char dev[KRDMA_NAME_MAX] = "?", target[80];
	struct krdma_op recvs[KB_CLIENT_RECVS];
	uint32_t tr;
	struct kb_msg m;
	bool ok, early;
	int ret;

	memset(&s, 0, sizeof(s));
	s.timeout_ms = o->timeout_ms;
	for (i = 0; i < o->nsizes; i++) {
		if (o->sizes[i] > max_size)
			max_size = o->sizes[i];
		if (kb_iters(o, o->sizes[i], KB_OP_WRITE) > max_iters)
			max_iters = kb_iters(o, o->sizes[i], KB_OP_WRITE);
	}
	s.fd = tool_session("bench", o->host, o->port, &dst, target,
			    sizeof(target));
	if (s.fd < 0)
		return -s.fd;
	if (o->signal_every > 1 && !module_has(s.fd, KRDMA_FEATURE_UNSIGNALED)) {
		errmsg_advice(-EOPNOTSUPP, "load a krdma of feature \"unsignaled\" (krdmactl version), or drop -u",
			      "bench: this krdma has no unsignaled operations");
		close(s.fd);
		return 1;
	}
	s.yield = o->yield;
	if (kb_ring_setup(&s, o->ring)) {
		close(s.fd);
		return 1;
	}
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = kb_on_signal;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	rows = calloc(KB_NOPS * o->nsizes, sizeof(*rows));
	s.t_submit = calloc(max_iters, sizeof(*s.t_submit));
	s.lat_ns = calloc(max_iters, sizeof(*s.lat_ns));
	if (!rows || !s.t_submit || !s.lat_ns) {
		kb_fail(&s, -ENOMEM, "out of memory");
		ret = -ENOMEM;
		goto report;
	}
	ret = kb_map(&s, 2 * KB_SLOTS * KB_SLOT, KRDMA_ACCESS_LOCAL_WRITE,
		     &s.ctrl, &s.ctrl_len, &s.ctrl_h);
	if (!ret)
		ret = kb_map(&s, 2 * max_size,
			     KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_WRITE,
			     &s.data, &s.data_map, &s.data_h);
	s.data_len = 2 * max_size;
	early = module_has(s.fd, KRDMA_FEATURE_EARLY_RECVS);
	for (i = 0; i < KB_CLIENT_RECVS; i++)
		kb_ctrl_recv_op(&s, i, &recvs[i]);
	if (!ret) {
		ret = kb_connect_raw(s.fd, &dst, tool_connect_flags(s.fd),
				     o->timeout_ms, o->depth + 32,
				     KB_CLIENT_RECVS + 16, early ? recvs : NULL,
				     early ? KB_CLIENT_RECVS : 0, &s.conn);
		if (ret) {
			kb_fail(&s, ret, "cannot connect to %s", target);
			s.hint = krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT,
							 ret);
		}
	}
	for (i = 0; !ret && !early && i < KB_CLIENT_RECVS; i++)
		ret = kb_post_ctrl_recv(&s, i);
	if (!ret)
		ret = kb_recv(&s, KB_WELCOME, &m, "WELCOME");
	if (!ret && m.a < max_size) {
		kb_fail(&s, 0, "the server takes sizes up to %" PRIu64 " bytes; use its -S",
			(uint64_t)m.a);
		ret = -EMSGSIZE;
	}
	if (!ret) {
		transport = kb_conn_device(&s, dev, sizeof(dev), &tr);
		memset(&m, 0, sizeof(m));
		m.type = KB_SETUP;
		m.a = max_size;
		ret = kb_send(&s, &m);
	}
	if (!ret)
		ret = kb_recv(&s, KB_TOKEN, &m, "TOKEN");
	if (!ret && m.status) {
		kb_fail(&s, 0, "the server cannot give a window: %s",
			strerror(m.status));
		ret = -EREMOTEIO;
	}
	if (!ret) {
		s.tok.addr = m.tok_addr;
		s.tok.length = m.tok_length;
		s.tok.rkey = m.tok_rkey;
		s.tok.access = m.tok_access;
		s.tok.seg_shift = m.tok_seg_shift;
		s.tok.tag = m.tok_tag;
	}
	if (!ret && !o->json) {
		printf("KRDMA BENCH %s via %s (%s): depth %u, batch %u, busy-polled completions (%s, one in %u)\n",
		       target, dev, transport, o->depth, o->batch,
		       o->ring ? "mapped ring" : "POLL", o->signal_every);
		printf("%-5s %9s %8s %5s %5s %10s %8s %9s %9s %9s %8s\n",
		       "op", "bytes", "iters", "depth", "batch", "MB/s",
		       "Mmsg/s", "med_us", "p99_us", "p99.9_us", "cpu_s/GB");
		fflush(stdout);
	}

	for (op = 0; !ret && op < KB_NOPS; op++) {
		if (!o->ops[op])
			continue;
		for (i = 0; !ret && i < o->nsizes; i++) {
			struct kb_row *r = &rows[nrows++];

			r->op = op;
			r->size = o->sizes[i];
			r->iters = kb_iters(o, r->size, op);
			if (op == KB_OP_SEND && r->size > KB_SEND_MAX) {
				r->skipped = true;
				r->why = "krdma SENDs are at most 1 MiB (256 pages)";
			} else {
				ret = client_run(&s, o, op, r->size, r->iters, r);
			}
			if (!ret && !o->json)
				print_row_text(r, o->depth, o->batch);
			if (ret)
				nrows--;
		}
	}
	if (!ret) {
		memset(&m, 0, sizeof(m));
		m.type = KB_BYE;
		ret = kb_send(&s, &m);
		/*
		 * Every result is in: the server may close at once, so
		 * the BYE's own outcome is moot (see server_one())
		 */
		if (!ret) {
			kb_poll(&s, 100);
			s.err[0] = '\0';
		}
	}

report:
	ok = !ret && !s.err[0];
	if (o->json) {
		struct json j = { .f = stdout };

		kb_json_head(&j, target, dev, transport);
		json_u64(&j, "depth", o->depth);
		json_u64(&j, "batch", o->batch);
		json_u64(&j, "signal_every", o->signal_every);
		json_str(&j, "completions", o->ring ? "ring" : "poll");
		json_begin_array(&j, "results");
		for (i = 0; i < nrows; i++) {
			const struct kb_row *r = &rows[i];

			json_begin_object(&j, NULL);
			json_str(&j, "op", kb_op_names[r->op]);
			json_u64(&j, "size", r->size);
			json_u64(&j, "iters", r->iters);
			json_u64(&j, "depth", r->op == KB_OP_LAT ? 1 : o->depth);
			json_u64(&j, "batch", r->op == KB_OP_LAT ? 1 : o->batch);
			json_bool(&j, "skipped", r->skipped);
			if (r->skipped) {
				/* the same keys, with nothing measured */
				json_str(&j, "why", r->why);
				json_null(&j, "seconds");
				json_null(&j, "mb_per_s");
				json_null(&j, "mmsg_per_s");
				json_null(&j, "lat_us");
				json_null(&j, "cpu");
				json_end_object(&j);
				continue;
			}
			json_null(&j, "why");
			json_double(&j, "seconds", r->seconds, 6);
			json_double(&j, "mb_per_s", r->mb_per_s, 3);
			json_double(&j, "mmsg_per_s", r->mmsg_per_s, 6);
			json_begin_object(&j, "lat_us");
			json_double(&j, "avg", r->lat_avg, 3);
			json_double(&j, "median", r->lat_med, 3);
			json_double(&j, "p99", r->lat_p99, 3);
			json_double(&j, "p99_9", r->lat_p999, 3);
			json_end_object(&j);
			json_begin_object(&j, "cpu");
			json_double(&j, "user_s", r->cpu_user, 6);
			json_double(&j, "sys_s", r->cpu_sys, 6);
			json_double(&j, "s_per_gb", r->cpu_s_per_gb, 6);
			json_end_object(&j);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_bool(&j, "ok", ok);
		kb_json_error(&j, &s, ok);
		json_end_object(&j);
		fflush(stdout);
	}
	if (s.err[0])
		errmsg_advice(0, s.hint, "bench: %s", s.err);
	krdma_ring_unmap(&s.ring);
	close(s.fd);
	if (s.data)
		munmap(s.data, s.data_map);
	if (s.ctrl)
		munmap(s.ctrl, s.ctrl_len);
	free(rows);
	free(s.t_submit);
	free(s.lat_ns);
	return finish_stdout(ok ? 0 : 1);
}

static int kb_parse_u64(const char *s, uint64_t min, uint64_t max,
			uint64_t *out)
{
	unsigned long long v, mult = 1;
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		mult = 1024;
		end++;
		break;
	case 'm':
	case 'M':
		mult = 1024 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mult = 1024 * 1024 * 1024;
		end++;
		break;
	}
	if (*end || v > max / mult || v * mult < min)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

/* "64,4K,1M" or "64-8M" (powers of 4 from MIN, and MAX) */
static int kb_parse_sizes(const char *arg, struct bench_opts *o)
{
	char buf[256], *p, *save = NULL, *dash;
	uint64_t lo, hi, v;

	snprintf(buf, sizeof(buf), "%s", arg);
	o->nsizes = 0;
	dash = strchr(buf, '-');
	if (dash && !strchr(buf, ',')) {
		*dash = '\0';
		if (kb_parse_u64(buf, 1, KB_MAX_SIZE, &lo) ||
		    kb_parse_u64(dash + 1, lo, KB_MAX_SIZE, &hi))
			return -EINVAL;
		for (v = lo; v <= hi && o->nsizes < KB_MAX_SIZES; v *= 4)
			o->sizes[o->nsizes++] = v;
		if (o->sizes[o->nsizes - 1] != hi && o->nsizes < KB_MAX_SIZES)
			o->sizes[o->nsizes++] = hi;
		return 0;
	}
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == KB_MAX_SIZES ||
		    kb_parse_u64(p, 1, KB_MAX_SIZE, &o->sizes[o->nsizes]))
			return -EINVAL;
		o->nsizes++;
	}
	return o->nsizes ? 0 : -EINVAL;
}

static int kb_parse_ops(const char *arg, struct bench_opts *o)
{
	char buf[128], *p, *save = NULL;
	unsigned int i;
	bool any = false;

	snprintf(buf, sizeof(buf), "%s", arg);
	memset(o->ops, 0, sizeof(o->ops));
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < KB_NOPS; i++)
			if (!strcmp(p, kb_op_names[i]))
				break;
		if (i == KB_NOPS)
			return -EINVAL;
		o->ops[i] = any = true;
	}
	return any ? 0 : -EINVAL;
}

int bench_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "listen", no_argument, NULL, 'l' },
		{ "addr", required_argument, NULL, 'a' },
		{ "count", required_argument, NULL, 'c' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "port", required_argument, NULL, 'p' },
		{ "ops", required_argument, NULL, 'o' },
		{ "sizes", required_argument, NULL, 's' },
		{ "depth", required_argument, NULL, 'd' },
		{ "batch", required_argument, NULL, 'b' },
		{ "iters", required_argument, NULL, 'n' },
		{ "min-iters", required_argument, NULL, 'm' },
		{ "bytes", required_argument, NULL, 'B' },
		{ "timeout", required_argument, NULL, 't' },
		{ "ring", no_argument, NULL, 'R' },
		{ "yield", no_argument, NULL, 'Y' },
		{ "signal-every", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct bench_opts o = {
		.addr = "0.0.0.0",
		.port = KB_PORT,
		.depth = 64,
		.batch = 16,
		.iters = 10000,
		.min_iters = 100,
		.bytes = 256ULL << 20,
		.timeout_ms = 10000,
		.max_size = 8ULL << 20,
		.signal_every = 1,
		.ops = { true, true, true, true },	/* not conn */
		.json = json_output,
	};
	uint64_t v;
	int c;

	kb_parse_sizes("64-8M", &o);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":la:c:S:p:o:s:d:b:n:m:B:t:RYu:jh",
				longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.server = true;
			break;
		case 'a':
			o.addr = optarg;
			break;
		case 'c':
			if (kb_parse_u64(optarg, 1, UINT32_MAX, &v))
				goto bad;
			o.count = v;
			break;
		case 'S':
			if (kb_parse_u64(optarg, 64, KB_MAX_SIZE, &o.max_size))
				goto bad;
			break;
		case 'p':
			if (kb_parse_u64(optarg, 0, 65535, &v))
				goto bad;
			o.port = v;
			break;
		case 'o':
			if (kb_parse_ops(optarg, &o))
				goto bad;
			break;
		case 's':
			if (kb_parse_sizes(optarg, &o))
				goto bad;
			break;
		case 'd':
			if (kb_parse_u64(optarg, 1, KB_MAX_DEPTH, &v))
				goto bad;
			o.depth = v;
			break;
		case 'b':
			if (kb_parse_u64(optarg, 1, KB_MAX_BATCH, &v))
				goto bad;
			o.batch = v;
			break;
		case 'n':
			if (kb_parse_u64(optarg, 1, KB_MAX_ITERS, &o.iters))
				goto bad;
			o.iters_set = true;
			break;
		case 'm':
			if (kb_parse_u64(optarg, 1, KB_MAX_ITERS, &o.min_iters))
				goto bad;
			break;
		case 'B':
			if (kb_parse_u64(optarg, 1, 1ULL << 40, &o.bytes))
				goto bad;
			break;
		case 't':
			if (duration_opt("bench", "timeout", optarg, USEC_PER_MS,
					 USEC_PER_MS, 3600 * USEC_PER_S, &v)) {
				print_usage_of(argv[0], stderr);
				return EXIT_USAGE;
			}
			o.timeout_ms = v / USEC_PER_MS;
			break;
		case 'R':
			o.ring = true;
			break;
		case 'Y':
			o.yield = true;
			break;
		case 'u':
			if (kb_parse_u64(optarg, 1, KB_MAX_DEPTH, &v))
				goto bad;
			o.signal_every = v;
			break;
		case 'j':
			o.json = true;
			json_output = true;
			break;
		case 'h':
			print_usage_of(argv[0], stdout);
			return finish_stdout(0);
		default:
			bad_option(argv[0], c, argv);
			return EXIT_USAGE;
		}
	}
	if (o.min_iters > o.iters)
		o.min_iters = o.iters;
	if (o.batch > o.depth)
		o.batch = o.depth;
	/* A signaled one must fit in what is in flight, or none would come */
	if (o.signal_every > o.depth) {
		errmsg("bench: -u %u is more than the depth (-d %u): no operation in flight would ask for a completion",
		       o.signal_every, o.depth);
		return EXIT_USAGE;
	}
	if (o.server) {
		if (o.json) {
			errmsg("bench: -l has no JSON output (-j)");
			return EXIT_USAGE;
		}
		if (optind < argc) {
			errmsg("bench: unexpected argument '%s'", argv[optind]);
			print_usage_of(argv[0], stderr);
			return EXIT_USAGE;
		}
		return server_run(&o);
	}
	if (optind >= argc) {
		errmsg("bench: no address given (or -l to be the server)");
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	o.host = argv[optind++];
	if (optind < argc) {
		errmsg("bench: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	if (o.ops[KB_OP_CONN] || o.ops[KB_OP_SCALE]) {
		int alone = o.ops[KB_OP_CONN] ? KB_OP_CONN : KB_OP_SCALE;

		for (c = 0; c < KB_NOPS; c++) {
			if (o.ops[c] && c != alone) {
				errmsg("bench: -o %s is measured alone",
				       kb_op_names[alone]);
				return EXIT_USAGE;
			}
		}
		return alone == KB_OP_CONN ? bench_conn(&o) : bench_scale(&o);
	}
	return bench_client(&o);
bad:
	errmsg("bench: bad value '%s' for -%c", optarg, c);
	print_usage_of(argv[0], stderr);
	return EXIT_USAGE;
}
