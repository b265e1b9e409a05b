// SPDX-License-Identifier: GPL-2.0
/*
 * krdmactl serve, ping and xfer: RDMA WRITE, READ and SEND/RECV between a
 * client and a server through krdma, every byte verified.
 *
 * The protocol (the 64-byte messages, their order, what each side
 * checks, the data pattern, and why the server speaks first and waits
 * KP_IWARP_GRACE_MS on iWARP) is described in Documentation/protocol.rst,
 * "The krdmactl protocols": change the two together.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdmactl.h"

#define KP_PORT			18515
#define KP_MAGIC		0x474e504bU	/* "KPNG" as little-endian bytes */
#define KP_VERSION		1
#define KP_MAX_WINDOW		(1ULL << 30)
#define KP_REPLY_XOR		0xa5a5a5a5a5a5a5a5ULL
#define KP_IDLE_MS		60000
#define KP_LINGER_MS		5000
#define KP_CONNECT_TRIES	3
#define KP_IWARP_GRACE_MS	50
#define KP_SLOT			256	/* bytes of a message slot */
#define KP_STASH		16

#define MiB ((uint64_t)1024 * 1024)

enum kp_type {
	KP_WELCOME = 1,
	KP_HELLO,
	KP_TOKEN,
	KP_CHECK,
	KP_RESULT,
	KP_BYE,
};

/* A message as it is on the wire, every field little-endian */
struct kp_msg {
	uint32_t magic;		/* KP_MAGIC */
	uint8_t version;	/* KP_VERSION */
	uint8_t type;		/* enum kp_type */
	uint16_t flags;		/* 0 */
	uint32_t seq;		/* CHECK: round; TOKEN, RESULT: as answered */
	uint32_t status;	/* TOKEN, RESULT: 0 or an errno */
	uint64_t length;	/* WELCOME, HELLO, CHECK: bytes */
	uint64_t arg;		/* CHECK, RESULT: seed or offset */
	uint64_t tok_addr;	/* TOKEN: struct krdma_token */
	uint64_t tok_length;
	uint32_t tok_rkey;
	uint32_t tok_access;
	uint32_t tok_seg_shift;	/* 0, or the token's key table */
	uint32_t tok_tag;
};

_Static_assert(sizeof(struct kp_msg) == 64, "64 bytes on the wire");

static const char *const kp_type_names[] = {
	[KP_WELCOME] = "WELCOME", [KP_HELLO] = "HELLO", [KP_TOKEN] = "TOKEN",
	[KP_CHECK] = "CHECK", [KP_RESULT] = "RESULT", [KP_BYE] = "BYE",
};

static const char *kp_type_str(unsigned int type)
{
	if (type < ARRAY_SIZE(kp_type_names) && kp_type_names[type])
		return kp_type_names[type];
	return "unknown";
}

static volatile sig_atomic_t kp_stop;

static void kp_on_signal(int sig)
{
	(void)sig;
	kp_stop = 1;
}

/* SIGINT and SIGTERM interrupt blocking calls (EINTR) and set kp_stop */
static void kp_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kp_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * Pinned memory counts against RLIMIT_MEMLOCK without CAP_IPC_LOCK (and
 * siw charges it even with): raise the soft limit as far as allowed.
 */
/* The data pattern, see the top of the file */
static uint64_t kp_word(uint64_t seed, uint64_t k)
{
	uint64_t x = seed + k + 0x9e3779b97f4a7c15ULL;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void kp_fill(uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t k, w, i;

	for (k = 0; k < len / 8; k++) {
		w = htole64(kp_word(seed, k));
		memcpy(p + 8 * k, &w, 8);
	}
	for (i = len & ~7ULL; i < len; i++)
		p[i] = kp_word(seed, i / 8) >> (8 * (i % 8));
}

/* Offset of the first byte that differs from pattern(seed), or -1 */
static int64_t kp_check(const uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t k, w, i;

	for (k = 0; k < len / 8; k++) {
		w = htole64(kp_word(seed, k));
		if (memcmp(p + 8 * k, &w, 8))
			break;
	}
	for (i = 8 * k; i < len; i++)
		if (p[i] != (uint8_t)(kp_word(seed, i / 8) >> (8 * (i % 8))))
			return i;
	return -1;
}

/*
 * Describe the bytes of @p that differ from pattern(seed), the first at
 * @first: how many, the last one, and whether they are all zero.
 */
static void kp_describe_diff(const uint8_t *p, uint64_t len, uint64_t seed,
			     uint64_t first, char *buf, size_t buflen)
{
	uint64_t i, last = first, n = 0;
	bool zeros = true;

	for (i = first; i < len; i++) {
		if (p[i] == (uint8_t)(kp_word(seed, i / 8) >> (8 * (i % 8))))
			continue;
		n++;
		last = i;
		zeros &= !p[i];
	}
	snprintf(buf, buflen, "%" PRIu64 " byte%s differ, from offset %" PRIu64 " to %" PRIu64 "%s",
		 n, n == 1 ? "" : "s", first, last,
		 zeros ? ", all zero (never written?)" : "");
}

/* "64 B", "4 KiB", "4097 B", "64 MiB", "1.5 MiB" */
static const char *size_str(uint64_t n, char *buf, size_t len)
{
	if (n >= MiB && !(n % MiB))
		snprintf(buf, len, "%" PRIu64 " MiB", n / MiB);
	else if (n >= 1024 && !(n % 1024))
		snprintf(buf, len, "%" PRIu64 " KiB", n / 1024);
	else if (n < MiB)
		snprintf(buf, len, "%" PRIu64 " B", n);
	else
		snprintf(buf, len, "%.1f MiB", n / (double)MiB);
	return buf;
}

/* The advice tables live in libkrdma, shared with doctor and the docs */
#define kp_hint krdma_conn_strerror_hint
#define kp_wc_explain krdma_wc_status_explain

/*
 * One connection and what it uses. Everything goes through one file of
 * /dev/krdma, whose completion queue may still hold completions of an
 * earlier connection (flushed RECVs): cookies grow over the file's life,
 * and those below @first_cookie are dropped.
 */
struct kp_sess {
	int fd;
	uint32_t conn;
	uint32_t wait_ms;	/* longest wait for one completion */
	uint8_t *slots;		/* one page: RECV slot at 0, SEND slot at KP_SLOT */
	uint32_t slots_h;
	uint64_t next_cookie;
	uint64_t first_cookie;
	struct krdma_completion stash[KP_STASH];	/* not waited for yet */
	unsigned int nstash;
	uint8_t *data;		/* the window's memory (server) or the client's */
	uint64_t len;
	uint64_t map_len;
	uint32_t data_h;
	uint32_t grant;
	struct krdma_token tok;	/* client: the server's token */
	struct krdma_addr dst;	/* client: the server's address */
	char err[512];		/* the first error */
	int errnum;		/* its errno (either sign), 0: none */
	const char *hint;	/* and advice for it, or NULL */
	bool lost;		/* the connection is down */
	bool server;		/* krdmactl serve */
};

static void __printf(4, 5)
kp_fail(struct kp_sess *s, int err, const char *hint, const char *fmt, ...)
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
	s->hint = hint;
	s->errnum = err;
	if (err == -ENOTCONN || err == ENOTCONN)
		s->lost = true;
}

static void kp_reset_error(struct kp_sess *s)
{
	s->err[0] = '\0';
	s->errnum = 0;
	s->hint = NULL;
	s->lost = false;
}

/* mmap()ed, page aligned, registered: 0 or -errno (s->err set) */
static int kp_map(struct kp_sess *s, uint64_t len, uint32_t access,
		  uint8_t **p, uint64_t *map_len, uint32_t *h, const char *what)
{
	long page = sysconf(_SC_PAGESIZE);
	char sz[32];
	int ret;

	*map_len = (len + page - 1) & ~(uint64_t)(page - 1);
	*p = mmap(NULL, *map_len, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*p == MAP_FAILED) {
		*p = NULL;
		ret = -errno;
		kp_fail(s, ret, NULL, "cannot allocate %s of %s", what,
			size_str(len, sz, sizeof(sz)));
		return ret;
	}
	ret = krdma_buf_register(s->fd, *p, len, access, h);
	if (ret) {
		kp_fail(s, ret, kp_hint(ret), "cannot register %s of %s", what,
			size_str(len, sz, sizeof(sz)));
		munmap(*p, *map_len);
		*p = NULL;
	}
	return ret;
}

static void kp_unmap(struct kp_sess *s, uint8_t **p, uint64_t map_len,
		     uint32_t *h)
{
	if (*h)
		krdma_destroy_handle(s->fd, *h);
	*h = 0;
	if (*p)
		munmap(*p, map_len);
	*p = NULL;
}

static int kp_submit(struct kp_sess *s, struct krdma_op *op, const char *what)
{
	int ret;

	op->conn = s->conn;
	op->cookie = s->next_cookie++;
	ret = krdma_submit_ops(s->fd, op, 1, KRDMA_SUBMIT_WAIT, NULL);
	if (ret)
		kp_fail(s, ret, krdma_cmd_strerror_hint(KRDMA_IOC_SUBMIT, ret),
			"cannot start %s", what);
	return ret;
}

static int kp_check_wc(struct kp_sess *s, const struct krdma_completion *wc,
		       const char *what)
{
	if (wc->status == KRDMA_WC_SUCCESS)
		return 0;
	/* An error completion puts an RC connection in the error state */
	kp_fail(s, 0, kp_wc_explain(wc->status),
		"%s failed: %s (status %u, vendor error 0x%x)", what,
		krdma_wc_status_str(wc->status), wc->status, wc->vendor_err);
	s->lost = true;
	return -EIO;
}

/* Wait for the completion of the operation @cookie */
static int kp_wait(struct kp_sess *s, uint64_t cookie,
		   struct krdma_completion *wc, const char *what)
{
	uint64_t deadline = now_ns() + s->wait_ms * 1000000ULL;
	struct krdma_completion got[8];
	unsigned int i;
	uint64_t now;
	int n;

	for (;;) {
		for (i = 0; i < s->nstash; i++) {
			if (s->stash[i].cookie != cookie)
				continue;
			*wc = s->stash[i];
			s->stash[i] = s->stash[--s->nstash];
			return kp_check_wc(s, wc, what);
		}
		now = now_ns();
		if (kp_stop) {
			kp_fail(s, -EINTR, NULL, "interrupted while waiting for %s",
				what);
			return -EINTR;
		}
		if (now >= deadline) {
			kp_fail(s, 0, s->server ?
				"is the client still there? it may have stopped, or lost its link" :
				"is the peer still there? a krdmactl serve answers one client at a time: is it busy with another?",
				"%s did not complete in %u ms", what,
				s->wait_ms);
			return -ETIMEDOUT;
		}
		n = krdma_poll_wc(s->fd, got, ARRAY_SIZE(got),
				  (deadline - now + 999999) / 1000000);
		if (n == -EINTR)
			continue;
		if (n < 0) {
			kp_fail(s, n, kp_hint(n), "cannot poll for %s", what);
			return n;
		}
		for (i = 0; i < (unsigned int)n; i++) {
			if (got[i].cookie < s->first_cookie)
				continue;	/* of an earlier connection */
			if (s->nstash == KP_STASH) {
				kp_fail(s, 0, NULL, "too many unexpected completions (a bug in krdmactl or krdma)");
				return -EOVERFLOW;
			}
			s->stash[s->nstash++] = got[i];
		}
	}
}

/* Post the RECV of the next message into the RECV slot */
/* The RECV of a message, into the RECV slot */
static void kp_recv_op(struct krdma_op *op)
{
	memset(op, 0, sizeof(*op));
	op->opcode = KRDMA_OP_RECV;
	op->num_sge = 1;
	op->sge.offset = 0;
	op->sge.length = KP_SLOT;
}

static int kp_post_recv(struct kp_sess *s, uint64_t *cookie)
{
	struct krdma_op op;

	kp_recv_op(&op);
	op.sge.buf = s->slots_h;
	*cookie = s->next_cookie;
	return kp_submit(s, &op, "a RECV");
}

/* Start SENDing @m (host order) from the SEND slot */
static int kp_post_send(struct kp_sess *s, const struct kp_msg *m,
			uint64_t *cookie)
{
	struct kp_msg *w = (struct kp_msg *)(s->slots + KP_SLOT);
	struct krdma_op op;
	char what[32];

	memset(w, 0, sizeof(*w));
	w->magic = htole32(KP_MAGIC);
	w->version = KP_VERSION;
	w->type = m->type;
	w->seq = htole32(m->seq);
	w->status = htole32(m->status);
	w->length = htole64(m->length);
	w->arg = htole64(m->arg);
	w->tok_addr = htole64(m->tok_addr);
	w->tok_length = htole64(m->tok_length);
	w->tok_rkey = htole32(m->tok_rkey);
	w->tok_access = htole32(m->tok_access);
	w->tok_seg_shift = htole32(m->tok_seg_shift);
	w->tok_tag = htole32(m->tok_tag);

	memset(&op, 0, sizeof(op));
	op.opcode = KRDMA_OP_SEND;
	op.num_sge = 1;
	op.sge.buf = s->slots_h;
	op.sge.offset = KP_SLOT;
	op.sge.length = sizeof(*w);
	*cookie = s->next_cookie;
	snprintf(what, sizeof(what), "the SEND of %s", kp_type_str(m->type));
	return kp_submit(s, &op, what);
}

static int kp_send(struct kp_sess *s, const struct kp_msg *m)
{
	struct krdma_completion wc;
	uint64_t cookie;
	char what[32];
	int ret;

	ret = kp_post_send(s, m, &cookie);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "the SEND of %s", kp_type_str(m->type));
	return kp_wait(s, cookie, &wc, what);
}

/*
 * Wait for the RECV @cookie and decode it into @m (host order). @type is
 * the type expected, or 0 for any (the caller checks). @what names the
 * message for errors.
 */
static int kp_recv(struct kp_sess *s, uint64_t cookie, unsigned int type,
		   struct kp_msg *m, const char *what)
{
	const struct kp_msg *r = (const struct kp_msg *)s->slots;
	struct krdma_completion wc;
	int ret;

	ret = kp_wait(s, cookie, &wc, what);
	if (ret)
		return ret;
	if (wc.byte_len != sizeof(*r) || le32toh(r->magic) != KP_MAGIC) {
		kp_fail(s, 0, "is a krdmactl serve or ping at the other end?",
			"%s: not a krdmactl ping message (%u bytes, magic 0x%08x)",
			what, wc.byte_len,
			wc.byte_len >= 4 ? le32toh(r->magic) : 0);
		return -EPROTO;
	}
	if (r->version != KP_VERSION) {
		kp_fail(s, 0, "use the same krdmactl at both ends",
			"%s: protocol version %u, this krdmactl speaks %u",
			what, r->version, KP_VERSION);
		return -EPROTO;
	}
	memset(m, 0, sizeof(*m));
	m->type = r->type;
	m->seq = le32toh(r->seq);
	m->status = le32toh(r->status);
	m->length = le64toh(r->length);
	m->arg = le64toh(r->arg);
	m->tok_addr = le64toh(r->tok_addr);
	m->tok_length = le64toh(r->tok_length);
	m->tok_rkey = le32toh(r->tok_rkey);
	m->tok_access = le32toh(r->tok_access);
	m->tok_seg_shift = le32toh(r->tok_seg_shift);
	m->tok_tag = le32toh(r->tok_tag);
	if (type && m->type != type) {
		kp_fail(s, 0, NULL, "%s: got a %s message instead", what,
			kp_type_str(m->type));
		return -EPROTO;
	}
	return 0;
}

/*
 * The device of the connection ("rxe0") into @dev, the name of its
 * transport ("RoCE") into *@transport; returns KRDMA_TRANSPORT_*, 0 if
 * unknown.
 */
static uint32_t kp_conn_device(struct kp_sess *s, char *dev, size_t len,
			       const char **transport, struct krdma_addr *peer)
{
	struct krdma_conn_query q;
	struct krdma_dev_query dq;

	snprintf(dev, len, "?");
	*transport = "unknown";
	if (krdma_conn_info(s->fd, s->conn, &q))
		return 0;
	if (peer)
		*peer = q.peer;
	if (krdma_dev_query(s->fd, q.dev_index, &dq))
		return 0;
	snprintf(dev, len, "%s", (const char *)dq.name);
	*transport = krdma_transport_str(dq.transport);
	return dq.transport;
}

/* "4096", "64K", "16M", "1G" (also "16MiB"): binary multiples */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t mult = 1;
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
		break;
	case 'm':
	case 'M':
		mult = MiB;
		break;
	case 'g':
	case 'G':
		mult = 1024 * MiB;
		break;
	case '\0':
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	}
	if (*end || !v || v > KP_MAX_WINDOW / mult)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

/*
 * The server
 */

struct serve_opts {
	const char *addr;
	uint32_t port;
	uint32_t count;		/* 0: until interrupted */
};

enum serve_outcome { SERVED_OK, SERVED_FAILED, SERVED_UNCOUNTED };

/* Answer CHECK @m: verify the window, refill it; fill the RESULT @r */
static void serve_check(struct kp_sess *s, const struct kp_msg *m,
			struct kp_msg *r, uint32_t *mismatches)
{
	int64_t bad;

	memset(r, 0, sizeof(*r));
	r->type = KP_RESULT;
	r->seq = m->seq;
	if (!m->length || m->length > s->len) {
		r->status = EINVAL;
		return;
	}
	bad = kp_check(s->data, m->length, m->arg);
	if (bad >= 0) {
		r->status = EILSEQ;
		r->arg = bad;
		(*mismatches)++;
		return;
	}
	kp_fill(s->data, m->length, m->arg ^ KP_REPLY_XOR);
	r->arg = m->arg ^ KP_REPLY_XOR;
}

/*
 * After BYE: the client closes once its SEND of BYE completed. Wait for
 * that (our next RECV is flushed), at most KP_LINGER_MS, so that our
 * teardown never races the completion of the client's last SEND.
 */
static void serve_linger(struct kp_sess *s)
{
	struct krdma_completion wc;
	uint32_t wait_ms = s->wait_ms;
	uint64_t rc;

	s->wait_ms = KP_LINGER_MS;
	if (!kp_post_recv(s, &rc))
		kp_wait(s, rc, &wc, "the client's disconnect");
	s->wait_ms = wait_ms;
	kp_reset_error(s);
}

/* One client, from accept to BYE; prints its line */
static enum serve_outcome serve_one(struct kp_sess *s)
{
	uint32_t rounds = 0, mismatches = 0;
	uint64_t bytes = 0, t0 = now_ns();
	enum serve_outcome out;
	struct krdma_addr peer;
	const char *transport;
	char dev[KRDMA_NAME_MAX], who[80], sz[32];
	struct kp_msg m, r;
	uint64_t rc;
	bool bye = false, hello = false, iwarp;
	int ret;

	memset(&peer, 0, sizeof(peer));
	iwarp = kp_conn_device(s, dev, sizeof(dev), &transport, &peer) ==
		KRDMA_TRANSPORT_IWARP;
	krdma_addr_str(&peer, who, sizeof(who));

	ret = kp_post_recv(s, &rc);
	if (!ret && iwarp) {
		/* Give the client time to post its first RECV (see top) */
		struct timespec ts = { 0, KP_IWARP_GRACE_MS * 1000000L };

		nanosleep(&ts, NULL);
	}
	if (!ret) {
		memset(&m, 0, sizeof(m));
		m.type = KP_WELCOME;
		m.length = KP_MAX_WINDOW;
		ret = kp_send(s, &m);
	}
	if (!ret)
		ret = kp_recv(s, rc, KP_HELLO, &m, "the client's HELLO");
	if (ret)
		goto out;
	hello = true;

	/* The window */
	memset(&r, 0, sizeof(r));
	r.type = KP_TOKEN;
	r.seq = m.seq;
	if (!m.length || m.length > KP_MAX_WINDOW) {
		r.status = EMSGSIZE;
	} else {
		ret = kp_map(s, m.length,
			     KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE,
			     &s->data, &s->map_len, &s->data_h, "a window");
		if (!ret)
			ret = krdma_grant_window(s->fd, s->conn, s->data_h, 0,
						 m.length,
						 KRDMA_ACCESS_REMOTE_READ |
						 KRDMA_ACCESS_REMOTE_WRITE,
						 &s->grant, &s->tok);
		if (ret) {
			/* (a failed kp_map() has already said why) */
			kp_fail(s, ret,
				krdma_cmd_strerror_hint(KRDMA_IOC_GRANT, ret),
				"cannot give a window of %s",
				size_str(m.length, sz, sizeof(sz)));
			r.status = -ret;
		} else {
			s->len = m.length;
			r.tok_addr = s->tok.addr;
			r.tok_length = s->tok.length;
			r.tok_rkey = s->tok.rkey;
			r.tok_access = s->tok.access;
			r.tok_seg_shift = s->tok.seg_shift;
			r.tok_tag = s->tok.tag;
		}
	}
	if (r.status) {
		kp_fail(s, 0, NULL, "the client asked for a window of %" PRIu64 " bytes: %s",
			m.length, strerror(r.status));
		if (!kp_send(s, &r)) {
			const char *hint = s->hint;
			char err[sizeof(s->err)];

			/* keep the error across the linger */
			memcpy(err, s->err, sizeof(err));
			serve_linger(s);
			memcpy(s->err, err, sizeof(err));
			s->hint = hint;
		}
		goto out;
	}
	ret = kp_post_recv(s, &rc);
	if (!ret)
		ret = kp_send(s, &r);

	/* The rounds, until BYE */
	while (!ret) {
		ret = kp_recv(s, rc, 0, &m, "the client's next message");
		if (ret && s->lost && !kp_stop) {
			kp_reset_error(s);
			kp_fail(s, 0, NULL, "the client disconnected without BYE");
		}
		if (ret)
			break;
		if (m.type == KP_BYE) {
			bye = true;
			serve_linger(s);
			break;
		}
		if (m.type != KP_CHECK) {
			kp_fail(s, 0, NULL, "unexpected %s message from the client",
				kp_type_str(m.type));
			break;
		}
		serve_check(s, &m, &r, &mismatches);
		rounds++;
		bytes = m.length;
		ret = kp_post_recv(s, &rc);
		if (!ret)
			ret = kp_send(s, &r);
	}

out:
	if (!hello) {
		out = SERVED_UNCOUNTED;
		printf("%s via %s: connection lost before the client's HELLO (not counted): %s\n",
		       who, dev, s->err);
	} else if (bye && !mismatches && !s->err[0]) {
		out = SERVED_OK;
		printf("%s via %s: %u round%s of %s, every WRITE verified, bye (%.2f s)\n",
		       who, dev, rounds, rounds == 1 ? "" : "s",
		       size_str(bytes ? bytes : s->len, sz, sizeof(sz)),
		       (now_ns() - t0) / 1e9);
	} else {
		out = SERVED_FAILED;
		if (!s->err[0] && !bye)
			kp_fail(s, 0, NULL, "the client left without BYE");
		if (mismatches)
			printf("%s via %s: FAILED: %u of %u rounds of %s had different bytes in the window after the client's WRITE%s%s\n",
			       who, dev, mismatches, rounds,
			       size_str(bytes, sz, sizeof(sz)),
			       s->err[0] ? "; then: " : "", s->err);
		else
			printf("%s via %s: FAILED after %u round%s: %s\n", who,
			       dev, rounds, rounds == 1 ? "" : "s", s->err);
		/* and what to do, when known, for people */
		fflush(stdout);
		if (s->err[0] && s->hint)
			errmsg("%s", s->hint);
	}
	fflush(stdout);
	return out;
}

static int serve_run(const struct serve_opts *o)
{
	struct tool_refusals refusals;
	struct krdma_addr addr, bound;
	struct krdma_listen l;
	struct kp_sess s;
	uint32_t listener, served = 0, failed = 0;
	uint64_t slots_len;
	char buf[80];
	int ret;

	memset(&s, 0, sizeof(s));
	s.server = true;
	s.wait_ms = KP_IDLE_MS;
	s.next_cookie = 1;
	s.fd = tool_session("serve", o->addr, o->port, &addr, NULL, 0);
	if (s.fd < 0)
		return -s.fd;
	ret = kp_map(&s, 2 * KP_SLOT, KRDMA_ACCESS_LOCAL_WRITE, &s.slots,
		     &slots_len, &s.slots_h, "the message buffer");
	if (ret) {
		errmsg_advice(0, s.hint, "%s", s.err);
		goto out;
	}
	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.addr = addr;
	l.backlog = 16;
	ret = tool_listen(s.fd, "serve", &l);
	if (ret)
		goto out;
	listener = l.handle;
	bound = l.addr;
	tool_refusals_init(&refusals, s.fd, "serve",
			   "serve answers krdmactl ping and xfer", listener);
	kp_catch_signals();
	printf("krdmactl serve: listening on %s\n",
	       krdma_addr_str(&bound, buf, sizeof(buf)));
	fflush(stdout);

	while (!kp_stop && (!o->count || served < o->count)) {
		/* And says whom the kernel turned away (krdma peers only) */
		ret = tool_accept(&refusals, s.fd, &s.conn);
		if (ret == -EINTR || ret == -EAGAIN) {
			ret = 0;
			continue;
		}
		if (ret) {
			errmsg_advice(ret, kp_hint(ret), "cannot accept a connection");
			break;
		}
		s.first_cookie = s.next_cookie;
		s.nstash = 0;
		kp_reset_error(&s);
		switch (serve_one(&s)) {
		case SERVED_OK:
			served++;
			break;
		case SERVED_FAILED:
			served++;
			failed++;
			break;
		case SERVED_UNCOUNTED:
			break;
		}
		/* The connection first: no remote access after this */
		krdma_destroy_handle(s.fd, s.conn);
		s.conn = 0;
		if (s.grant)
			krdma_destroy_handle(s.fd, s.grant);
		s.grant = 0;
		kp_unmap(&s, &s.data, s.map_len, &s.data_h);
		s.len = 0;
	}
	/* Those turned away while the last client was served */
	if (!ret)
		tool_refusals_tell(&refusals, s.fd);
out:
	close(s.fd);
	if (s.slots)
		munmap(s.slots, slots_len);
	if (ret)
		return finish_stdout(1);
	return finish_stdout(failed ? 1 : 0);
}

int serve_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'c' },
		{ "once", no_argument, NULL, '1' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct serve_opts o = { .addr = "0.0.0.0", .port = KP_PORT };
	int c;

	opterr = 0;
	optind = 1;
	/* -c COUNT as ping and bench -l; -n, its first name, still works */
	while ((c = getopt_long(argc, argv, ":a:p:c:n:1h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o.addr = optarg;
			break;
		case 'p':
			if (parse_u32(optarg, 0, 65535, &o.port)) {
				errmsg("serve: bad port '%s' (0 to 65535)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'c':
		case 'n':
			if (parse_u32(optarg, 1, UINT32_MAX, &o.count)) {
				errmsg("serve: bad count '%s' (1 or more)", optarg);
				return EXIT_USAGE;
			}
			break;
		case '1':
			o.count = 1;
			break;
		case 'h':
			print_usage_of(argv[0], stdout);
			return finish_stdout(0);
		default:
			bad_option(argv[0], c, argv);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		errmsg("serve: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	return serve_run(&o);
}

/*
 * The client: ping and xfer
 */

struct ping_opts {
	const char *cmd;	/* "ping" or "xfer" */
	const char *host;
	uint32_t port;
	uint64_t size;
	uint32_t count;		/* rounds; 0: until interrupted */
	uint32_t interval_ms;
	uint32_t timeout_ms;
	bool json;
	bool bulk;		/* xfer: throughput, not latency */
};

struct round_res {
	uint32_t seq;
	uint64_t write_ns, rtt_ns, read_ns;
	bool verified;
	char err[256];		/* why not verified */
};

struct stat3 {
	uint64_t min, max, sum;
	uint32_t n;
};

struct ping_res {
	char target[80];
	char dev[KRDMA_NAME_MAX];
	const char *transport;
	uint32_t retries;
	struct round_res *rounds;	/* the last nrounds_kept rounds */
	uint32_t nrounds_kept, cap;
	uint32_t nrounds, verified;
	struct stat3 write, rtt, read;
	uint64_t t_start, t_end;
};

static void stat_add(struct stat3 *st, uint64_t v)
{
	if (!st->n || v < st->min)
		st->min = v;
	if (!st->n || v > st->max)
		st->max = v;
	st->sum += v;
	st->n++;
}

/*
 * One round: WRITE pattern(seed), CHECK/RESULT, READ, compare. 0 when the
 * round ran (rr->verified tells the outcome), -errno when the connection
 * or the protocol failed (s->err says why).
 */
static int ping_round(struct kp_sess *s, const struct ping_opts *o,
		      uint32_t seq, uint64_t seed, struct round_res *rr)
{
	struct krdma_completion wc;
	uint64_t t0, rc, sc;
	struct krdma_op op;
	struct kp_msg m;
	int64_t bad;
	int ret;

	memset(rr, 0, sizeof(*rr));
	rr->seq = seq;
	kp_fill(s->data, o->size, seed);

	memset(&op, 0, sizeof(op));
	op.opcode = KRDMA_OP_WRITE;
	op.num_sge = 1;
	op.sge.buf = s->data_h;
	op.sge.length = o->size;
	op.remote = s->tok;
	t0 = now_ns();
	ret = kp_submit(s, &op, "the RDMA WRITE");
	if (!ret)
		ret = kp_wait(s, op.cookie, &wc, "the RDMA WRITE");
	if (ret)
		return ret;
	rr->write_ns = now_ns() - t0;

	ret = kp_post_recv(s, &rc);
	if (ret)
		return ret;
	memset(&m, 0, sizeof(m));
	m.type = KP_CHECK;
	m.seq = seq;
	m.length = o->size;
	m.arg = seed;
	t0 = now_ns();
	ret = kp_post_send(s, &m, &sc);
	if (!ret)
		ret = kp_recv(s, rc, KP_RESULT, &m, "the server's RESULT");
	if (ret)
		return ret;
	rr->rtt_ns = now_ns() - t0;
	ret = kp_wait(s, sc, &wc, "the SEND of CHECK");
	if (ret)
		return ret;
	if (m.seq != seq) {
		kp_fail(s, 0, NULL, "the server answered round %u in round %u",
			m.seq, seq);
		return -EPROTO;
	}
	if (m.status == EILSEQ) {
		snprintf(rr->err, sizeof(rr->err),
			 "the server found byte %" PRIu64 " of its window different from what the RDMA WRITE carried",
			 m.arg);
		return 0;
	}
	if (m.status) {
		kp_fail(s, 0, NULL, "the server could not check round %u: %s",
			seq, strerror(m.status));
		return -EPROTO;
	}
	if (m.arg == seed) {
		kp_fail(s, 0, NULL, "the server did not write a new pattern");
		return -EPROTO;
	}

	/* Read back what the server wrote; nothing of ours is left */
	memset(s->data, 0, o->size);
	memset(&op, 0, sizeof(op));
	op.opcode = KRDMA_OP_READ;
	op.num_sge = 1;
	op.sge.buf = s->data_h;
	op.sge.length = o->size;
	op.remote = s->tok;
	t0 = now_ns();
	ret = kp_submit(s, &op, "the RDMA READ");
	if (!ret)
		ret = kp_wait(s, op.cookie, &wc, "the RDMA READ");
	if (ret)
		return ret;
	rr->read_ns = now_ns() - t0;
	bad = kp_check(s->data, o->size, m.arg);
	if (bad >= 0) {
		char diff[128];

		kp_describe_diff(s->data, o->size, m.arg, bad, diff,
				 sizeof(diff));
		snprintf(rr->err, sizeof(rr->err),
			 "the RDMA READ brought other bytes than the server wrote into its window: %s",
			 diff);
		return 0;
	}
	rr->verified = true;
	return 0;
}

/* Connect and get the server's WELCOME, connecting again if it was lost */
static int ping_connect(struct kp_sess *s, const struct ping_opts *o,
			struct ping_res *res, struct kp_msg *welcome)
{
	struct krdma_op op;
	unsigned int tries;
	uint32_t flags;
	bool early;
	uint64_t rc;
	int ret;

	flags = tool_connect_flags(s->fd);
	early = module_has(s->fd, KRDMA_FEATURE_EARLY_RECVS);
	for (tries = 1;; tries++) {
		s->first_cookie = s->next_cookie;
		s->nstash = 0;
		/* The RECV for the WELCOME, posted before the connect request */
		kp_recv_op(&op);
		op.sge.buf = s->slots_h;
		op.cookie = rc = s->next_cookie;
		if (early)
			s->next_cookie++;
		ret = krdma_connect_recvs(s->fd, &s->dst, NULL, flags,
					  o->timeout_ms, early ? &op : NULL,
					  early, &s->conn);
		/*
		 * Without early RECVs (an older module), on iWARP the
		 * WELCOME can overtake our first RECV even before the
		 * connect returned: the connection is reset under it. A
		 * refusal (nobody listens) is ECONNREFUSED, not this.
		 */
		if (ret == -ECONNRESET && tries < KP_CONNECT_TRIES && !kp_stop) {
			if (!o->json)
				fprintf(stderr, "krdmactl: %s: connection reset while connecting; connecting again\n",
					o->cmd);
			res->retries++;
			continue;
		}
		if (ret) {
			kp_fail(s, ret,
				krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, ret),
				"cannot connect to %s", res->target);
			return ret;
		}
		ret = early ? 0 : kp_post_recv(s, &rc);
		if (!ret)
			ret = kp_recv(s, rc, KP_WELCOME, welcome,
				      "the server's WELCOME");
		if (!ret)
			return 0;
		if (!s->lost || tries == KP_CONNECT_TRIES || kp_stop)
			return ret;
		if (!o->json)
			fprintf(stderr, "krdmactl: %s: connection lost before the server's WELCOME (%s); connecting again\n",
				o->cmd, s->err);
		res->retries++;
		krdma_destroy_handle(s->fd, s->conn);
		s->conn = 0;
		kp_reset_error(s);
	}
}

/* Connect, WELCOME, HELLO, TOKEN: 0 or -errno (s->err set) */
static int ping_setup(struct kp_sess *s, const struct ping_opts *o,
		      struct ping_res *res)
{
	struct kp_msg m;
	uint64_t rc;
	char sz[32];
	int ret;

	ret = ping_connect(s, o, res, &m);
	if (ret)
		return ret;
	kp_conn_device(s, res->dev, sizeof(res->dev), &res->transport, NULL);
	if (m.length < o->size) {
		kp_fail(s, 0, "use a smaller -s SIZE",
			"the server gives windows of at most %s",
			size_str(m.length, sz, sizeof(sz)));
		return -EMSGSIZE;
	}
	ret = kp_post_recv(s, &rc);
	if (ret)
		return ret;
	memset(&m, 0, sizeof(m));
	m.type = KP_HELLO;
	m.length = o->size;
	ret = kp_send(s, &m);
	if (!ret)
		ret = kp_recv(s, rc, KP_TOKEN, &m, "the server's TOKEN");
	if (ret)
		return ret;
	if (m.status) {
		kp_fail(s, 0, m.status == ENOMEM ?
			"the server cannot pin that much memory (its ulimit -l, or its RAM): use a smaller -s SIZE" :
			NULL,
			"the server cannot give a window of %s: %s",
			size_str(o->size, sz, sizeof(sz)), strerror(m.status));
		return -EREMOTEIO;
	}
	if (m.tok_length < o->size ||
	    (m.tok_access & (KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE)) !=
	    (KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE)) {
		kp_fail(s, 0, NULL, "the server's token is of %" PRIu64 " bytes with access 0x%x; asked for %" PRIu64 " bytes, read and write",
			(uint64_t)m.tok_length, m.tok_access, o->size);
		return -EPROTO;
	}
	memset(&s->tok, 0, sizeof(s->tok));
	s->tok.addr = m.tok_addr;
	s->tok.length = m.tok_length;
	s->tok.rkey = m.tok_rkey;
	s->tok.access = m.tok_access;
	s->tok.seg_shift = m.tok_seg_shift;
	s->tok.tag = m.tok_tag;
	return 0;
}

static void print_round(const struct ping_opts *o, const struct ping_res *res,
			const struct round_res *rr)
{
	printf("%" PRIu64 " bytes with %s (%s): round=%u write=%.1f us send/recv=%.1f us",
	       o->size, res->target, res->dev, rr->seq, rr->write_ns / 1e3,
	       rr->rtt_ns / 1e3);
	if (rr->read_ns)
		printf(" read=%.1f us", rr->read_ns / 1e3);
	if (rr->verified)
		printf(" verified\n");
	else
		printf(" MISMATCH: %s\n", rr->err);
	fflush(stdout);
}

static void print_stat_text(const char *name, const struct stat3 *st)
{
	if (!st->n)
		return;
	printf("%s min/avg/max = %.1f/%.1f/%.1f us\n", name, st->min / 1e3,
	       st->sum / 1e3 / st->n, st->max / 1e3);
}

static void json_stat(struct json *j, const char *key, const struct stat3 *st)
{
	if (!st->n) {
		json_null(j, key);
		return;
	}
	json_begin_object(j, key);
	json_double(j, "min", st->min / 1e3, 3);
	json_double(j, "avg", st->sum / 1e3 / st->n, 3);
	json_double(j, "max", st->max / 1e3, 3);
	json_end_object(j);
}

static double mb_per_s(uint64_t bytes, uint64_t ns)
{
	return ns ? bytes * 1e3 / ns : 0;
}

static void ping_report_text(const struct ping_opts *o,
			     const struct ping_res *res, const struct kp_sess *s,
			     bool ok)
{
	const struct round_res *rr = res->nrounds ? &res->rounds[0] : NULL;
	char sz[32];

	if (o->bulk && rr) {
		printf("WRITE: %" PRIu64 " bytes in %.3f s = %.1f MB/s, %s\n",
		       o->size, rr->write_ns / 1e9,
		       mb_per_s(o->size, rr->write_ns),
		       rr->verified || rr->read_ns ?
		       "verified by the server" : "NOT verified");
		printf("check: the server verified and rewrote its window in %.3f s (SEND/RECV round trip)\n",
		       rr->rtt_ns / 1e9);
		if (rr->read_ns)
			printf("READ:  %" PRIu64 " bytes in %.3f s = %.1f MB/s, %s\n",
			       o->size, rr->read_ns / 1e9,
			       mb_per_s(o->size, rr->read_ns),
			       rr->verified ? "verified" : "NOT verified");
		if (!rr->verified)
			printf("MISMATCH: %s\n", rr->err);
	} else if (!o->bulk && res->nrounds) {
		printf("--- %s krdma ping statistics ---\n", res->target);
		printf("%u round%s of %s, %u verified, %u failed, time %.0f ms\n",
		       res->nrounds, res->nrounds == 1 ? "" : "s",
		       size_str(o->size, sz, sizeof(sz)), res->verified,
		       res->nrounds - res->verified,
		       (res->t_end - res->t_start) / 1e6);
		print_stat_text("write   ", &res->write);
		print_stat_text("send/recv", &res->rtt);
		print_stat_text("read    ", &res->read);
	}
	if (res->retries)
		printf("(connected %u times: the connection was lost before the server's WELCOME)\n",
		       res->retries + 1);
	/* The error last, also when both go to one file */
	fflush(stdout);
	if (s->err[0])
		errmsg_advice(0, s->hint, "%s: %s", o->cmd, s->err);
	else if (!ok && !o->bulk && res->nrounds < o->count)
		errmsg("%s: only %u of %u rounds done", o->cmd, res->nrounds,
		       o->count);
}

static void ping_report_json(const struct ping_opts *o,
			     const struct ping_res *res,
			     const struct kp_sess *s, bool ok)
{
	struct json j = { .f = stdout };
	uint32_t i;

	json_begin_object(&j, NULL);
	json_str(&j, "command", o->cmd);
	json_str(&j, "target", res->target);
	json_conn_dev(&j, res->dev, res->transport);
	json_u64(&j, "size", o->size);
	json_u64(&j, "connect_retries", res->retries);
	if (o->bulk) {
		const struct round_res *rr = res->nrounds ? &res->rounds[0] :
					     NULL;

		json_u64(&j, "bytes", o->size);
		if (rr) {
			json_begin_object(&j, "write");
			json_double(&j, "seconds", rr->write_ns / 1e9, 6);
			json_double(&j, "mb_per_s", mb_per_s(o->size, rr->write_ns), 3);
			json_bool(&j, "verified", rr->verified || rr->read_ns);
			json_end_object(&j);
			json_double(&j, "check_seconds", rr->rtt_ns / 1e9, 6);
		} else {
			json_null(&j, "write");
			json_null(&j, "check_seconds");
		}
		if (rr && rr->read_ns) {
			json_begin_object(&j, "read");
			json_double(&j, "seconds", rr->read_ns / 1e9, 6);
			json_double(&j, "mb_per_s", mb_per_s(o->size, rr->read_ns), 3);
			json_bool(&j, "verified", rr->verified);
			json_end_object(&j);
		} else {
			json_null(&j, "read");
		}
		if (rr && !rr->verified)
			json_str(&j, "mismatch", rr->err);
		else
			json_null(&j, "mismatch");
	} else {
		json_u64(&j, "count", o->count);
		json_u64(&j, "interval_ms", o->interval_ms);
		json_begin_array(&j, "rounds");
		for (i = 0; i < res->nrounds_kept; i++) {
			const struct round_res *rr = &res->rounds[i];

			json_begin_object(&j, NULL);
			json_u64(&j, "round", rr->seq);
			json_double(&j, "write_us", rr->write_ns / 1e3, 3);
			json_double(&j, "send_rtt_us", rr->rtt_ns / 1e3, 3);
			if (rr->read_ns)
				json_double(&j, "read_us", rr->read_ns / 1e3, 3);
			else
				json_null(&j, "read_us");
			json_bool(&j, "verified", rr->verified);
			/* as xfer's: "error" is the error object */
			if (rr->verified)
				json_null(&j, "mismatch");
			else
				json_str(&j, "mismatch", rr->err);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_u64(&j, "rounds_done", res->nrounds);
		json_u64(&j, "verified", res->verified);
		json_u64(&j, "failed", res->nrounds - res->verified);
		json_stat(&j, "write_us", &res->write);
		json_stat(&j, "send_rtt_us", &res->rtt);
		json_stat(&j, "read_us", &res->read);
	}
	json_bool(&j, "ok", ok);
	if (s->err[0]) {
		char msg[sizeof(s->err) + 16];

		snprintf(msg, sizeof(msg), "%s: %s", o->cmd, s->err);
		json_error(&j, "error", s->errnum, msg, s->hint);
	} else if (!ok) {
		char msg[128];

		/* as the text says it */
		if (!o->bulk && res->nrounds < o->count)
			snprintf(msg, sizeof(msg), "%s: only %u of %u rounds done",
				 o->cmd, res->nrounds, o->count);
		else
			snprintf(msg, sizeof(msg), "%s: %u of %u rounds verified",
				 o->cmd, res->verified, res->nrounds);
		json_error(&j, "error", 0, msg, NULL);
	} else {
		json_null(&j, "error");
	}
	json_end_object(&j);
}

static int ping_run(const struct ping_opts *o)
{
	struct ping_res res;
	struct kp_sess s;
	uint64_t slots_len = 0, seed;
	uint32_t seq;
	char sz[32];
	bool ok;
	int ret;

	memset(&res, 0, sizeof(res));
	memset(&s, 0, sizeof(s));
	res.transport = "unknown";
	snprintf(res.dev, sizeof(res.dev), "?");
	s.wait_ms = o->timeout_ms;
	s.next_cookie = 1;
	s.fd = tool_session(o->cmd, o->host, o->port, &s.dst, res.target,
			    sizeof(res.target));
	if (s.fd < 0)
		return -s.fd;
	kp_catch_signals();
	seed = kp_word(now_ns(), getpid());

	/* Buffers first: the connection's first moments count (see top) */
	ret = kp_map(&s, 2 * KP_SLOT, KRDMA_ACCESS_LOCAL_WRITE, &s.slots,
		     &slots_len, &s.slots_h, "the message buffer");
	if (!ret)
		ret = kp_map(&s, o->size, KRDMA_ACCESS_LOCAL_WRITE, &s.data,
			     &s.map_len, &s.data_h, "the data buffer");
	s.len = o->size;
	if (!ret)
		ret = ping_setup(&s, o, &res);
	if (!ret && !o->json) {
		if (o->bulk)
			printf("KRDMA XFER %s via %s (%s): %" PRIu64 " bytes (%s), one RDMA WRITE and one RDMA READ\n",
			       res.target, res.dev, res.transport, o->size,
			       size_str(o->size, sz, sizeof(sz)));
		else
			printf("KRDMA PING %s via %s (%s): %s per round: RDMA WRITE, SEND/RECV check, RDMA READ\n",
			       res.target, res.dev, res.transport,
			       size_str(o->size, sz, sizeof(sz)));
		fflush(stdout);
	}

	res.t_start = now_ns();
	for (seq = 1; !ret && !kp_stop && (!o->count || seq <= o->count);
	     seq++) {
		struct round_res *rr;

		/* Text: one round at a time; JSON and xfer report them all */
		if (!o->json && !o->bulk && res.cap)
			res.nrounds_kept = 0;
		if (res.nrounds_kept == res.cap) {
			uint32_t cap = res.cap ? 2 * res.cap : 16;
			void *p = realloc(res.rounds, cap * sizeof(*rr));

			if (!p) {
				kp_fail(&s, -ENOMEM, NULL, "out of memory");
				break;
			}
			res.rounds = p;
			res.cap = cap;
		}
		rr = &res.rounds[res.nrounds_kept];
		ret = ping_round(&s, o, seq, kp_word(seed, seq), rr);
		if (ret)
			break;
		res.nrounds++;
		res.nrounds_kept++;
		res.verified += rr->verified;
		stat_add(&res.write, rr->write_ns);
		stat_add(&res.rtt, rr->rtt_ns);
		if (rr->read_ns)
			stat_add(&res.read, rr->read_ns);
		if (!o->json && !o->bulk)
			print_round(o, &res, rr);
		if (o->interval_ms && seq != o->count) {
			struct timespec ts = {
				.tv_sec = o->interval_ms / 1000,
				.tv_nsec = (o->interval_ms % 1000) * 1000000L,
			};

			nanosleep(&ts, NULL);
		}
	}
	res.t_end = now_ns();

	/* Say goodbye when the connection is still fine */
	if (!ret && s.conn && !s.err[0]) {
		struct kp_msg m;

		memset(&m, 0, sizeof(m));
		m.type = KP_BYE;
		ret = kp_send(&s, &m);
	}

	ok = !ret && !s.err[0] && res.nrounds &&
	     res.verified == res.nrounds &&
	     (!o->count || res.nrounds == o->count);
	/* Interrupted with no count: fine, as ping(8) */
	if (ret == -EINTR && !o->count && res.nrounds &&
	    res.verified == res.nrounds) {
		kp_reset_error(&s);
		ok = true;
	}
	if (o->json) {
		ping_report_json(o, &res, &s, ok);
		/* and the error for people too */
		fflush(stdout);
		if (s.err[0])
			errmsg_advice(0, s.hint, "%s: %s", o->cmd, s.err);
	} else {
		ping_report_text(o, &res, &s, ok);
	}

	/* close() disconnects and drains before the memory goes */
	close(s.fd);
	if (s.data)
		munmap(s.data, s.map_len);
	if (s.slots)
		munmap(s.slots, slots_len);
	free(res.rounds);
	return finish_stdout(ok ? 0 : 1);
}

static int client_main(int argc, char *argv[], bool bulk)
{
	static const struct option ping_longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 's' },
		{ "interval", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static const struct option xfer_longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const struct option *longopts = bulk ? xfer_longopts : ping_longopts;
	struct ping_opts o = {
		.cmd = argv[0],
		.port = KP_PORT,
		.size = bulk ? 16 * MiB : 64,
		.count = bulk ? 1 : 5,
		.interval_ms = bulk ? 0 : 1000,
		.timeout_ms = bulk ? 60000 : 10000,
		.bulk = bulk,
		.json = json_output,
	};
	const char *opts = bulk ? ":p:s:t:jh" : ":p:c:s:i:t:jh";
	uint64_t us;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, opts, longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_u32(optarg, 1, 65535, &o.port)) {
				errmsg("%s: bad port '%s' (1 to 65535)", o.cmd,
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'c':
			if (parse_u32(optarg, 0, 1000000000, &o.count)) {
				errmsg("%s: bad count '%s' (0 for no limit)",
				       o.cmd, optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			if (parse_size(optarg, &o.size)) {
				errmsg("%s: bad size '%s' (1 to 1G bytes; K, M, G: binary multiples)",
				       o.cmd, optarg);
				return EXIT_USAGE;
			}
			break;
		case 'i':
			if (duration_opt(o.cmd, "interval", optarg, USEC_PER_MS,
					 0, 3600 * USEC_PER_S, &us))
				return EXIT_USAGE;
			o.interval_ms = us / USEC_PER_MS;
			break;
		case 't':
			if (duration_opt(o.cmd, "timeout", optarg, USEC_PER_MS,
					 USEC_PER_MS, 3600 * USEC_PER_S, &us))
				return EXIT_USAGE;
			o.timeout_ms = us / USEC_PER_MS;
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
	if (optind >= argc) {
		errmsg("%s: no address given", o.cmd);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	o.host = argv[optind++];
	if (optind < argc) {
		errmsg("%s: unexpected argument '%s'", o.cmd, argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	return ping_run(&o);
}

int ping_main(int argc, char *argv[])
{
	return client_main(argc, argv, false);
}

int xfer_main(int argc, char *argv[])
{
	return client_main(argc, argv, true);
}
