// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: bad input. Every ioctl of /dev/krdma meets every class
 * of malformed input, from one table (rows[] below): sizes too short, too
 * long with a non-zero tail, or reaching past the mapping; unknown flags
 * and non-zero reserved fields; unknown opcodes; zero and huge lengths,
 * offsets past the end and offset + length wrapping; handles that are 0,
 * stale (destroyed), of another kind or of another file; pointers that
 * are NULL, kernel addresses, unmapped, or straddle the end of a mapping;
 * misaligned atomics; batch counts of 0 and over the limit; and tokens the
 * peer must refuse (another connection's, past the window, without the
 * right), which fail as completions.
 *
 * Each row gives the errno that uapi/linux/krdma.h documents (or the
 * completion status), per transport where they differ. After every row
 * the test checks that nothing changed: both ends still connected, a WRITE
 * still moves the right bytes, the file's grant still serves the peer's
 * READ, the other objects are still there and the stale ones still gone,
 * no completion appeared, no object was left behind (the next handle is
 * the one it was) and no page stayed pinned (VmPin).
 *
 * The second test fills every struct the kernel writes with 0xa5 and
 * checks that each reserved field and string tail comes back zero and
 * every output field was written: nothing of the kernel's stack, and
 * nothing stale, reaches userspace.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "krdma_test_lib.h"
#include "kselftest_harness.h"

#define PG 4096UL
#define CMEM_LEN (64 * 1024)	/* the client's buffer */
#define SMEM_LEN (64 * 1024)	/* the server's buffer */
#define WIN_LEN (16 * 1024)	/* the main token: smem[0, WIN_LEN) */
#define READ_OFF (20 * 1024)	/* the server's check READ lands here */
#define SPARE_OFF (32 * 1024)	/* the spare pair's windows, 3 pages */
#define CHECK_LEN 4096		/* bytes of the check WRITE */
#define FOREIGN_BUFS 64		/* buffers of the other file */

#define COOKIE_ROW 0xbad0ULL
#define COOKIE_PENDING 0x9e9dULL
#define COOKIE_CHECK 0xc4ec0000ULL

#define KERNEL_ADDR 0xffff888000000000ULL
/* A page nothing maps (checked), below where mmap() places anything */
#define HOLE_ADDR 0x200000000UL

#define NO_WC (-1)
/*
 * SUCCESS, and the connection stays up: the peer's device served what it
 * should have refused. siw does: it sends READ responses from any MR of
 * the PD without checking IB_ACCESS_REMOTE_READ (siw_qp_sq_process()
 * calls siw_check_sgl_tx() with no permission).
 */
#define WC_SERVED (-2)
/*
 * iWARP, a WRITE the peer refuses: the initiator completes it once sent
 * (SUCCESS), or, when the peer's TERMINATE comes first, fails it
 * (LOC_QP_OP_ERR; seen on the debug kernel). Either way the connection
 * fails and nothing of the window changes.
 */
#define WC_SENT (-3)
#define NONE ((size_t)-1)

/* What a row starts from */
enum state {
	ST_MAIN,	/* the main connected pair, nothing pending */
	ST_PENDING,	/* the same, one completion waiting in the queue */
	ST_SPARE,	/* also a fresh pair the row may break */
};

/* Handles a row can put in a field */
enum href {
	H_ZERO = 1,
	H_HUGE,
	H_CCONN,
	H_CBUF,
	H_ROBUF,
	H_CGRANT,
	H_CLISTENER,
	H_DEAD,
	H_STALE_BUF,
	H_STALE_GRANT,
	H_STALE_CONN,
	H_STALE_LISTENER,
	H_FOREIGN_BUF,
	H_FOREIGN_CONN,
	H_FOREIGN_LISTENER,
};

/* Pointers a row can put in a field */
enum pref {
	P_NULL = 1,
	P_KERNEL,
	P_HOLE,		/* an unmapped page */
	P_EDGE,		/* aux bytes before the unmapped page */
	P_RO,		/* a read-only private mapping */
};

/* Tokens the peer must refuse, on the spare pair */
enum spare_kind {
	SP_OTHER_CONN,	/* the main connection's token */
	SP_PAST_WINDOW,	/* length forged past the granted window */
	SP_READ_ONLY,	/* WRITE through a REMOTE_READ token */
	SP_WRITE_ONLY,	/* READ through a REMOTE_WRITE token */
	SP_RKEY,	/* a forged rkey */
	SP_NO_ATOMIC,	/* FETCH_ADD through a token without atomics */
};

struct ctx {
	int cfd, sfd, ofd;
	bool iwarp;
	uint32_t dev;
	struct krdma_addr addr;		/* the main listener */
	uint32_t noport;		/* a port nobody listens on */
	uint32_t slistener, sconn, cconn;
	uint32_t clistener, dead, sdead;
	uint8_t *cmem;			/* CMEM_LEN */
	uint32_t cbuf, robuf, victim, cgrant;
	struct krdma_token ctok;	/* cgrant: cmem[0, PG), REMOTE_READ */
	uint8_t *smem;			/* SMEM_LEN */
	uint32_t sbuf, sgrant;
	struct krdma_token tok;		/* smem[0, WIN_LEN), READ and WRITE */
	uint32_t stale_buf, stale_grant, stale_conn, stale_listener;
	uint32_t foreign_buf, foreign_conn, foreign_listener, sforeign;
	uint32_t spare_c, spare_s, spare_grant[3];
	struct krdma_token spare_tok[3];	/* rw, read-only, write-only */
	uint8_t *hole;			/* an unmapped page; the one before is */
	uint8_t *ro;			/* a read-only private page */
	uint32_t probe;			/* the handle a new object of cfd gets */
	long vmpin;			/* VmPin with no row running */
	/* Argument memory of the commands */
	uint8_t arg[1024] __attribute__((aligned(8)));
	struct krdma_op op;
	struct krdma_sge sges[2];
	uint32_t idx[16];
	struct krdma_gid_entry gids[16];
	struct krdma_completion wc[4];
	/* The row running */
	unsigned int nr;
	const char *rname;
	bool failed;
};

/* A command, and how to build a valid call of it */
struct ioc {
	const char *name;
	unsigned long nr;
	size_t size;
	size_t flags_off;
	size_t handle_off;		/* what a successful call creates */
	void (*build)(struct ctx *c, void *arg);
};

struct row {
	const char *name;
	enum state state;
	unsigned int ioc;		/* index in iocs[] */
	void *(*mutate)(struct ctx *c, const struct row *r, void *arg);
	size_t off;
	uint64_t val, aux;
	int err, err_iwarp;		/* errno, 0 for success */
	int wc, wc_iwarp;		/* completion status, or NO_WC */
};

/* A mismatch in the row running: reported, and the row fails */
#define ROW_CHECK(c, cond, fmt, ...)					\
	do {								\
		if (!(cond)) {						\
			ksft_print_msg("row %u (%s): " fmt "\n", (c)->nr,	\
				       (c)->rname, ##__VA_ARGS__);	\
			(c)->failed = true;				\
		}							\
	} while (0)

static uint32_t handle_of(const struct ctx *c, uint64_t h)
{
	switch (h) {
	case H_ZERO: return 0;
	case H_HUGE: return 0xfffffff0;
	case H_CCONN: return c->cconn;
	case H_CBUF: return c->cbuf;
	case H_ROBUF: return c->robuf;
	case H_CGRANT: return c->cgrant;
	case H_CLISTENER: return c->clistener;
	case H_DEAD: return c->dead;
	case H_STALE_BUF: return c->stale_buf;
	case H_STALE_GRANT: return c->stale_grant;
	case H_STALE_CONN: return c->stale_conn;
	case H_STALE_LISTENER: return c->stale_listener;
	case H_FOREIGN_BUF: return c->foreign_buf;
	case H_FOREIGN_CONN: return c->foreign_conn;
	case H_FOREIGN_LISTENER: return c->foreign_listener;
	}
	return 0x7777;
}

static void *pointer_of(const struct ctx *c, uint64_t p, uint64_t aux)
{
	switch (p) {
	case P_NULL: return NULL;
	case P_KERNEL: return (void *)KERNEL_ADDR;
	case P_HOLE: return c->hole;
	case P_EDGE: return c->hole - aux;
	case P_RO: return c->ro;
	}
	return NULL;
}

/* Valid calls: harmless, and with a known outcome */

static void b_none(struct ctx *c, void *arg)
{
}

static void b_dev_list(struct ctx *c, void *arg)
{
	struct krdma_dev_list *a = arg;

	a->num_devices = 16;
	a->dev_indexes = (uintptr_t)c->idx;
}

static void b_dev_query(struct ctx *c, void *arg)
{
	((struct krdma_dev_query *)arg)->dev_index = c->dev;
}

static void b_port_query(struct ctx *c, void *arg)
{
	struct krdma_port_query *a = arg;

	a->dev_index = c->dev;
	a->port_num = 1;
	a->num_gids = 16;
	a->gids = (uintptr_t)c->gids;
}

/* Ends the victim buffer: a row that gets through is seen */
static void b_destroy(struct ctx *c, void *arg)
{
	((struct krdma_destroy *)arg)->handle = c->victim;
}

/* A new listener on a free port */
static void b_listen(struct ctx *c, void *arg)
{
	struct krdma_listen *a = arg;

	a->addr = c->addr;
	a->addr.port = 0;
}

/* Nothing to accept: EAGAIN */
static void b_accept(struct ctx *c, void *arg)
{
	struct krdma_accept *a = arg;

	a->listener = c->clistener;
	a->flags = KRDMA_ACCEPT_NONBLOCK;
}

/* Nobody listens there: refused */
static void b_connect(struct ctx *c, void *arg)
{
	struct krdma_connect *a = arg;

	a->dst = c->addr;
	a->dst.port = c->noport;
	a->timeout_ms = 5000;
}

/* Disconnecting the disconnected connection again does nothing */
static void b_disconnect(struct ctx *c, void *arg)
{
	((struct krdma_disconnect *)arg)->handle = c->dead;
}

static void b_conn_query(struct ctx *c, void *arg)
{
	((struct krdma_conn_query *)arg)->handle = c->cconn;
}

/* A read-only buffer of one page */
static void b_buf_reg(struct ctx *c, void *arg)
{
	struct krdma_buf_reg *a = arg;

	a->addr = (uintptr_t)c->cmem;
	a->length = PG;
}

static void b_grant(struct ctx *c, void *arg)
{
	struct krdma_grant *a = arg;

	a->conn = c->cconn;
	a->buf = c->cbuf;
	a->length = PG;
	a->access = KRDMA_ACCESS_REMOTE_READ;
}

/* A WRITE of 64 bytes through the main token */
static void b_submit(struct ctx *c, void *arg)
{
	struct krdma_submit *a = arg;

	kt_op(&c->op, KRDMA_OP_WRITE, c->cconn, c->cbuf, 0, 64, &c->tok, 0,
	      COOKIE_ROW);
	a->count = 1;
	a->ops = (uintptr_t)&c->op;
}

/* The client's listener: nothing refused, nothing queued */
static void b_listen_query(struct ctx *c, void *arg)
{
	((struct krdma_listen_query *)arg)->handle = c->clistener;
}

/* Nothing waits: count 0 */
static void b_poll(struct ctx *c, void *arg)
{
	struct krdma_poll *a = arg;

	a->max = 4;
	a->completions = (uintptr_t)c->wc;
}

enum {
	I_QUERY_MODULE, I_DEV_LIST, I_DEV_QUERY, I_PORT_QUERY, I_DESTROY,
	I_LISTEN, I_ACCEPT, I_CONNECT, I_DISCONNECT, I_CONN_QUERY, I_BUF_REG,
	I_GRANT, I_SUBMIT, I_POLL, I_LISTEN_QUERY,
};

#define IOC(_i, _nr, _struct, _handle, _build)				\
	[_i] = { .name = #_nr, .nr = _nr, .size = sizeof(_struct),	\
		 .flags_off = offsetof(_struct, flags),			\
		 .handle_off = _handle, .build = _build }
#define HOFF(_struct) offsetof(_struct, handle)

static const struct ioc iocs[] = {
	IOC(I_QUERY_MODULE, KRDMA_IOC_QUERY_MODULE, struct krdma_query_module,
	    NONE, b_none),
	IOC(I_DEV_LIST, KRDMA_IOC_DEV_LIST, struct krdma_dev_list, NONE,
	    b_dev_list),
	IOC(I_DEV_QUERY, KRDMA_IOC_DEV_QUERY, struct krdma_dev_query, NONE,
	    b_dev_query),
	IOC(I_PORT_QUERY, KRDMA_IOC_PORT_QUERY, struct krdma_port_query, NONE,
	    b_port_query),
	IOC(I_DESTROY, KRDMA_IOC_DESTROY, struct krdma_destroy, NONE,
	    b_destroy),
	IOC(I_LISTEN, KRDMA_IOC_LISTEN, struct krdma_listen,
	    HOFF(struct krdma_listen), b_listen),
	IOC(I_ACCEPT, KRDMA_IOC_ACCEPT, struct krdma_accept,
	    HOFF(struct krdma_accept), b_accept),
	IOC(I_CONNECT, KRDMA_IOC_CONNECT, struct krdma_connect,
	    HOFF(struct krdma_connect), b_connect),
	IOC(I_DISCONNECT, KRDMA_IOC_DISCONNECT, struct krdma_disconnect, NONE,
	    b_disconnect),
	IOC(I_CONN_QUERY, KRDMA_IOC_CONN_QUERY, struct krdma_conn_query, NONE,
	    b_conn_query),
	IOC(I_BUF_REG, KRDMA_IOC_BUF_REG, struct krdma_buf_reg,
	    HOFF(struct krdma_buf_reg), b_buf_reg),
	IOC(I_GRANT, KRDMA_IOC_GRANT, struct krdma_grant,
	    HOFF(struct krdma_grant), b_grant),
	IOC(I_SUBMIT, KRDMA_IOC_SUBMIT, struct krdma_submit, NONE, b_submit),
	IOC(I_POLL, KRDMA_IOC_POLL, struct krdma_poll, NONE, b_poll),
	IOC(I_LISTEN_QUERY, KRDMA_IOC_LISTEN_QUERY, struct krdma_listen_query,
	    NONE, b_listen_query),
};

/* Mutations: damage the valid call one way; return the ioctl argument */

static void *m_none(struct ctx *c, const struct row *r, void *arg)
{
	return arg;
}

static void *m_size(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)arg = r->val;
	return arg;
}

/*
 * The oldest layout of a command's struct, which the kernel still takes:
 * a struct grows by appending fields (CONN_QUERY's limits came later)
 */
static size_t ioc_min_size(unsigned int ioc)
{
	if (iocs[ioc].nr == KRDMA_IOC_CONN_QUERY)
		return offsetof(struct krdma_conn_query, max_grant_pages);
	/* Their RECVs came later (KRDMA_FEATURE_EARLY_RECVS) */
	if (iocs[ioc].nr == KRDMA_IOC_CONNECT)
		return offsetof(struct krdma_connect, recv_count);
	if (iocs[ioc].nr == KRDMA_IOC_ACCEPT)
		return offsetof(struct krdma_accept, recvs);
	return iocs[ioc].size;
}

/* val bytes shorter than the oldest layout of the struct */
static void *m_size_short(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)arg = ioc_min_size(r->ioc) - r->val;
	return arg;
}

/* val more bytes than the kernel's struct; the byte at aux past it is 0x5a */
static void *m_tail(struct ctx *c, const struct row *r, void *arg)
{
	size_t size = iocs[r->ioc].size;

	*(uint32_t *)arg = size + r->val;
	((uint8_t *)arg)[size + r->aux] = 0x5a;
	return arg;
}

/* The first @n bytes of the struct, copied to end where the hole starts */
static void *at_edge(struct ctx *c, const void *arg, size_t n)
{
	void *p = c->hole - n;

	memcpy(p, arg, n);
	return p;
}

/* size 0xffffffff: the kernel must find the end of the mapping */
static void *m_size_huge(struct ctx *c, const struct row *r, void *arg)
{
	size_t size = iocs[r->ioc].size;

	*(uint32_t *)arg = 0xffffffff;
	return at_edge(c, arg, size);
}

static void *m_flags(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)((uint8_t *)arg + iocs[r->ioc].flags_off) |= r->val;
	return arg;
}

/* The argument itself: NULL, kernel, unmapped, or cut by the hole */
static void *m_arg(struct ctx *c, const struct row *r, void *arg)
{
	size_t size = iocs[r->ioc].size;

	if (r->val == P_EDGE)
		return at_edge(c, arg, size - 8);
	return pointer_of(c, r->val, r->aux);
}

static void *m_u32(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)((uint8_t *)arg + r->off) = r->val;
	return arg;
}

static void *m_u64(struct ctx *c, const struct row *r, void *arg)
{
	*(uint64_t *)((uint8_t *)arg + r->off) = r->val;
	return arg;
}

static void *m_handle(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)((uint8_t *)arg + r->off) = handle_of(c, r->val);
	return arg;
}

static void *m_uptr(struct ctx *c, const struct row *r, void *arg)
{
	*(uint64_t *)((uint8_t *)arg + r->off) =
		(uintptr_t)pointer_of(c, r->val, r->aux);
	return arg;
}

/* A capacity of 0 and no array: only the count is asked for */
static void *m_count_only(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)((uint8_t *)arg + r->off) = 0;
	*(uint64_t *)((uint8_t *)arg + r->aux) = 0;
	return arg;
}

/* A huge capacity, and an array with one entry's room before the hole */
static void *m_huge_capacity(struct ctx *c, const struct row *r, void *arg)
{
	*(uint32_t *)((uint8_t *)arg + r->off) = 0xffffffff;
	*(uint64_t *)((uint8_t *)arg + r->aux) = (uintptr_t)(c->hole - r->val);
	return arg;
}

/* The same on the operation of a SUBMIT */
static void *m_op_u32(struct ctx *c, const struct row *r, void *arg)
{
	m_u32(c, r, &c->op);
	return arg;
}

static void *m_op_u64(struct ctx *c, const struct row *r, void *arg)
{
	m_u64(c, r, &c->op);
	return arg;
}

static void *m_op_handle(struct ctx *c, const struct row *r, void *arg)
{
	m_handle(c, r, &c->op);
	return arg;
}

/* An operation of @opcode, 8 bytes at cbuf offset aux; val: remote offset */
static void *m_atomic(struct ctx *c, const struct row *r, void *arg)
{
	kt_op(&c->op, r->off, c->cconn, c->cbuf, r->aux, 8, &c->tok, r->val,
	      COOKIE_ROW);
	return arg;
}

/* @opcode (off) into the read-only buffer */
static void *m_into_ro(struct ctx *c, const struct row *r, void *arg)
{
	kt_op(&c->op, r->off, c->cconn, c->robuf, 0, r->val ?: 64,
	      r->off == KRDMA_OP_RECV ? NULL : &c->tok, 0, COOKIE_ROW);
	return arg;
}

/* Two ranges from the array at sges; val/aux damage it */
enum sges_kind { SG_PTR, SG_RESERVED, SG_WRAP, SG_STALE };

static void *m_sges(struct ctx *c, const struct row *r, void *arg)
{
	uint64_t p = r->val;

	c->op.num_sge = 2;
	memset(c->sges, 0, sizeof(c->sges));
	c->sges[0].buf = c->cbuf;
	c->sges[0].length = 32;
	c->sges[1] = c->sges[0];
	c->sges[1].offset = 32;
	c->op.sges = (uintptr_t)c->sges;
	switch (r->off) {
	case SG_PTR:
		if (p == P_EDGE)
			c->op.sges = (uintptr_t)at_edge(c, c->sges, r->aux);
		else
			c->op.sges = (uintptr_t)pointer_of(c, p, 0);
		break;
	case SG_RESERVED:
		c->sges[1].__reserved = 1;
		break;
	case SG_WRAP:
		/* Each inside nothing, together past 2^64 */
		c->sges[0].length = 1ULL << 63;
		c->sges[1].length = 1ULL << 63;
		c->op.remote.length = ~0ULL;
		break;
	case SG_STALE:
		c->sges[1].buf = handle_of(c, p);
		break;
	}
	return arg;
}

/* The remote side of the WRITE: token fields and offset */
enum remote_kind { RM_OFF_PAST, RM_OFF_WRAP, RM_ADDR_WRAP, RM_LAST_BYTE };

static void *m_remote(struct ctx *c, const struct row *r, void *arg)
{
	switch (r->off) {
	case RM_OFF_PAST:
		c->op.remote_offset = c->tok.length - 63;
		break;
	case RM_OFF_WRAP:
		c->op.remote_offset = ~0ULL - 10;
		break;
	case RM_ADDR_WRAP:
		c->op.remote.addr = ~0ULL - 10;
		c->op.remote_offset = 20;
		break;
	case RM_LAST_BYTE:
		c->op.sge.length = 1;
		c->op.remote_offset = c->tok.length - 1;
		break;
	}
	return arg;
}

/* A token the peer must refuse, on the spare connection */
static void *m_spare(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_op *op = &c->op;

	kt_op(op, KRDMA_OP_WRITE, c->spare_c, c->cbuf, 0, 64, &c->spare_tok[0],
	      0, COOKIE_ROW);
	switch (r->val) {
	case SP_OTHER_CONN:
		op->remote = c->tok;
		break;
	case SP_PAST_WINDOW:
		op->remote.length += PG;
		op->remote_offset = PG;
		break;
	case SP_READ_ONLY:
		op->remote = c->spare_tok[1];
		break;
	case SP_WRITE_ONLY:
		op->opcode = KRDMA_OP_READ;
		op->remote = c->spare_tok[2];
		break;
	case SP_RKEY:
		op->remote.rkey ^= 0x100;
		break;
	case SP_NO_ATOMIC:
		op->opcode = KRDMA_OP_FETCH_ADD;
		op->sge.length = 8;
		op->remote = c->spare_tok[1];
		op->compare_add = 1;
		break;
	}
	return arg;
}

/* GRANT: offset (off) and length (val) */
static void *m_window(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_grant *g = arg;

	g->offset = r->off;
	g->length = r->val;
	return arg;
}

/* BUF_REG: address (pointer val, aux), length (off), access LOCAL_WRITE */
static void *m_buf_at(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_buf_reg *b = arg;

	b->addr = (uintptr_t)pointer_of(c, r->val, r->aux);
	b->length = r->off;
	return arg;
}

static void *m_buf_range(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_buf_reg *b = arg;

	b->addr = r->val ?: (uintptr_t)c->cmem;
	b->length = r->aux;
	return arg;
}

static void *m_buf_ro_writable(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_buf_reg *b = arg;

	b->addr = (uintptr_t)c->ro;
	b->access = KRDMA_ACCESS_LOCAL_WRITE;
	return arg;
}

/* ACCEPT with timeout 0 and no NONBLOCK flag: does not wait either */
static void *m_accept_timeout0(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_accept *a = arg;

	a->flags = 0;
	a->timeout_ms = 0;
	return arg;
}

/* LISTEN or CONNECT address: val: which field */
enum addr_kind { AD_FAMILY, AD_PORT, AD_TAIL, AD_SCOPE, AD_RESERVED,
		 AD_NOT_LOCAL, AD_IN_USE, AD_SRC_PORT, AD_SRC_ADDR,
		 AD_SRC_FAMILY, AD_SRC_RESERVED, AD_SRC_SCOPE,
		 AD_SRC_NOT_LOCAL };

static void *m_addr(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_addr *a = (struct krdma_addr *)((uint8_t *)arg + r->off);
	struct krdma_connect *cn = arg;

	switch (r->val) {
	case AD_FAMILY:
		a->family = r->aux;
		break;
	case AD_PORT:
		a->port = 65536;
		break;
	case AD_TAIL:
		a->addr[4 + r->aux] = 1;
		break;
	case AD_SCOPE:
		a->scope_id = 1;
		break;
	case AD_RESERVED:
		a->__reserved = 1;
		break;
	case AD_NOT_LOCAL:
		krdma_parse_addr("192.0.2.1", 0, a);
		break;
	case AD_IN_USE:
		*a = c->addr;
		break;
	case AD_SRC_PORT:
		cn->src.port = 7;
		break;
	case AD_SRC_ADDR:
		cn->src.addr[0] = 1;
		break;
	case AD_SRC_FAMILY:
		cn->src.family = 99;
		break;
	case AD_SRC_RESERVED:
		cn->src.__reserved = 1;
		break;
	case AD_SRC_SCOPE:
		cn->src.scope_id = 1;
		break;
	case AD_SRC_NOT_LOCAL:
		krdma_parse_addr("192.0.2.1", 0, &cn->src);
		break;
	}
	return arg;
}

/* LISTEN: huge backlog and depths are clamped */
static void *m_listen_huge(struct ctx *c, const struct row *r, void *arg)
{
	struct krdma_listen *l = arg;

	l->backlog = ~0U;
	l->sq_depth = ~0U;
	l->rq_depth = ~0U;
	return arg;
}

/* Row constructors */
#define ROW(_n, _st, _i, _fn, _off, _val, _aux, _e, _ei, _wc, _wci)	\
	{ .name = _n, .state = _st, .ioc = _i, .mutate = _fn,		\
	  .off = _off, .val = _val, .aux = _aux, .err = _e,		\
	  .err_iwarp = _ei, .wc = _wc, .wc_iwarp = _wci }
/* Fails with @e everywhere, before anything happens */
#define R(_n, _i, _fn, _off, _val, _e)					\
	ROW(_n, ST_MAIN, _i, _fn, _off, _val, 0, _e, _e, NO_WC, NO_WC)
#define RA(_n, _i, _fn, _off, _val, _aux, _e)				\
	ROW(_n, ST_MAIN, _i, _fn, _off, _val, _aux, _e, _e, NO_WC, NO_WC)
/* Differs between RoCE (rxe, with atomics) and iWARP (siw, without) */
#define RT(_n, _i, _fn, _off, _val, _aux, _e, _ei)			\
	ROW(_n, ST_MAIN, _i, _fn, _off, _val, _aux, _e, _ei, NO_WC, NO_WC)
/* The same with one completion queued */
#define RP(_n, _i, _fn, _off, _val, _aux, _e)				\
	ROW(_n, ST_PENDING, _i, _fn, _off, _val, _aux, _e, _e, NO_WC, NO_WC)

/* Every command: size, tail, flags, the argument pointer */
#define GENERIC(_i)							\
	R("size 0", _i, m_size, 0, 0, EINVAL),				\
	R("size 4 short", _i, m_size_short, 0, 4, EINVAL),		\
	RA("size +64, byte 17 past the struct not 0", _i, m_tail, 0,	\
	   64, 17, E2BIG),						\
	RA("size +64, last byte not 0", _i, m_tail, 0, 64, 63, E2BIG),	\
	R("size 0xffffffff: past a page, refused unread", _i,	\
	  m_size_huge, 0, 0, E2BIG),					\
	R("unknown flag bit 31", _i, m_flags, 0, 1u << 31, EINVAL),	\
	R("argument NULL", _i, m_arg, 0, P_NULL, EFAULT),		\
	R("argument a kernel address", _i, m_arg, 0, P_KERNEL, EFAULT),	\
	R("argument unmapped", _i, m_arg, 0, P_HOLE, EFAULT),		\
	R("argument straddles the end of a mapping", _i, m_arg, 0,	\
	  P_EDGE, EFAULT)

#define OFF(_s, _f) offsetof(struct krdma_##_s, _f)
#define OPOFF(_f) offsetof(struct krdma_op, _f)

static const struct row rows[] = {
	GENERIC(I_QUERY_MODULE),
	R("reserved not 0", I_QUERY_MODULE, m_u32, OFF(query_module, __reserved),
	  1, EINVAL),

	GENERIC(I_DEV_LIST),
	R("reserved not 0", I_DEV_LIST, m_u32, OFF(dev_list, __reserved), 1,
	  EINVAL),
	R("array NULL", I_DEV_LIST, m_uptr, OFF(dev_list, dev_indexes), P_NULL,
	  EFAULT),
	R("array a kernel address", I_DEV_LIST, m_uptr,
	  OFF(dev_list, dev_indexes), P_KERNEL, EFAULT),
	R("array unmapped", I_DEV_LIST, m_uptr, OFF(dev_list, dev_indexes),
	  P_HOLE, EFAULT),
	RA("array of 16 with room for 1 before the end of the mapping",
	   I_DEV_LIST, m_uptr, OFF(dev_list, dev_indexes), P_EDGE, 4, EFAULT),
	RA("capacity 0 and no array: the count", I_DEV_LIST, m_count_only,
	   OFF(dev_list, num_devices), 0, OFF(dev_list, dev_indexes), 0),
	RA("capacity 0xffffffff, room for 1", I_DEV_LIST, m_huge_capacity,
	   OFF(dev_list, num_devices), 4, OFF(dev_list, dev_indexes), EFAULT),

	GENERIC(I_DEV_QUERY),
	R("reserved not 0", I_DEV_QUERY, m_u32, OFF(dev_query, __reserved), 1,
	  EINVAL),
	R("no such device 0xffffffff", I_DEV_QUERY, m_u32,
	  OFF(dev_query, dev_index), 0xffffffff, ENODEV),
	R("no such device 0x7fffffff", I_DEV_QUERY, m_u32,
	  OFF(dev_query, dev_index), 0x7fffffff, ENODEV),

	GENERIC(I_PORT_QUERY),
	R("reserved not 0", I_PORT_QUERY, m_u64, OFF(port_query, __reserved),
	  1ULL << 63, EINVAL),
	R("no such device", I_PORT_QUERY, m_u32, OFF(port_query, dev_index),
	  0xffffffff, ENODEV),
	R("port 0", I_PORT_QUERY, m_u32, OFF(port_query, port_num), 0, EINVAL),
	R("port 2 of a one-port device", I_PORT_QUERY, m_u32,
	  OFF(port_query, port_num), 2, EINVAL),
	R("port 0xffffffff", I_PORT_QUERY, m_u32, OFF(port_query, port_num),
	  0xffffffff, EINVAL),
	R("GID array NULL", I_PORT_QUERY, m_uptr, OFF(port_query, gids), P_NULL,
	  EFAULT),
	R("GID array a kernel address", I_PORT_QUERY, m_uptr,
	  OFF(port_query, gids), P_KERNEL, EFAULT),
	RA("GID array cut by the end of the mapping", I_PORT_QUERY, m_uptr,
	   OFF(port_query, gids), P_EDGE, 16, EFAULT),
	RA("capacity 0 and no array: the count", I_PORT_QUERY, m_count_only,
	   OFF(port_query, num_gids), 0, OFF(port_query, gids), 0),
	RA("capacity 0xffffffff, room for half an entry", I_PORT_QUERY,
	   m_huge_capacity, OFF(port_query, num_gids), 16,
	   OFF(port_query, gids), EFAULT),

	GENERIC(I_DESTROY),
	R("reserved not 0", I_DESTROY, m_u32, OFF(destroy, __reserved), 1,
	  EINVAL),
	R("handle 0", I_DESTROY, m_handle, OFF(destroy, handle), H_ZERO,
	  ENOENT),
	R("handle 0xfffffff0", I_DESTROY, m_handle, OFF(destroy, handle),
	  H_HUGE, ENOENT),
	R("stale buffer", I_DESTROY, m_handle, OFF(destroy, handle),
	  H_STALE_BUF, ENOENT),
	R("stale grant", I_DESTROY, m_handle, OFF(destroy, handle),
	  H_STALE_GRANT, ENOENT),
	R("stale connection", I_DESTROY, m_handle, OFF(destroy, handle),
	  H_STALE_CONN, ENOENT),
	R("stale listener", I_DESTROY, m_handle, OFF(destroy, handle),
	  H_STALE_LISTENER, ENOENT),
	R("buffer of another file", I_DESTROY, m_handle, OFF(destroy, handle),
	  H_FOREIGN_BUF, ENOENT),
	R("connection of another file", I_DESTROY, m_handle,
	  OFF(destroy, handle), H_FOREIGN_CONN, ENOENT),

	GENERIC(I_LISTEN),
	R("unknown flag bit 2", I_LISTEN, m_flags, 0, 4, EINVAL),
	RA("family 0", I_LISTEN, m_addr, OFF(listen, addr), AD_FAMILY, 0,
	   EINVAL),
	RA("family 12345", I_LISTEN, m_addr, OFF(listen, addr), AD_FAMILY,
	   12345, EINVAL),
	R("port 65536", I_LISTEN, m_addr, OFF(listen, addr), AD_PORT, EINVAL),
	RA("IPv4 with a byte past the address", I_LISTEN, m_addr,
	   OFF(listen, addr), AD_TAIL, 11, EINVAL),
	R("IPv4 with a scope id", I_LISTEN, m_addr, OFF(listen, addr),
	  AD_SCOPE, EINVAL),
	R("address reserved not 0", I_LISTEN, m_addr, OFF(listen, addr),
	  AD_RESERVED, EINVAL),
	R("address no device has", I_LISTEN, m_addr, OFF(listen, addr),
	  AD_NOT_LOCAL, EADDRNOTAVAIL),
	R("address and port in use", I_LISTEN, m_addr, OFF(listen, addr),
	  AD_IN_USE, EADDRINUSE),
	R("backlog and depths 0xffffffff: clamped", I_LISTEN, m_listen_huge, 0,
	  0, 0),

	GENERIC(I_ACCEPT),
	R("RECVs on a listener that does not defer the accept", I_ACCEPT,
	  m_u32, OFF(accept, recv_count), 1, EINVAL),
	R("more RECVs than KRDMA_EARLY_RECVS_MAX", I_ACCEPT, m_u32,
	  OFF(accept, recv_count), KRDMA_EARLY_RECVS_MAX + 1, EINVAL),
	R("unknown flag bit 1", I_ACCEPT, m_flags, 0, 2, EINVAL),
	R("timeout 0 without NONBLOCK does not wait", I_ACCEPT,
	  m_accept_timeout0, 0, 0, EAGAIN),
	R("listener 0", I_ACCEPT, m_handle, OFF(accept, listener), H_ZERO,
	  ENOENT),
	R("a connection as listener", I_ACCEPT, m_handle, OFF(accept, listener),
	  H_CCONN, ENOENT),
	R("a buffer as listener", I_ACCEPT, m_handle, OFF(accept, listener),
	  H_CBUF, ENOENT),
	R("a grant as listener", I_ACCEPT, m_handle, OFF(accept, listener),
	  H_CGRANT, ENOENT),
	R("stale listener", I_ACCEPT, m_handle, OFF(accept, listener),
	  H_STALE_LISTENER, ENOENT),
	R("listener of another file", I_ACCEPT, m_handle,
	  OFF(accept, listener), H_FOREIGN_LISTENER, ENOENT),

	GENERIC(I_CONNECT),
	R("unknown flag bit 1", I_CONNECT, m_flags, 0, 2, EINVAL),
	R("reserved not 0", I_CONNECT, m_u32, OFF(connect, __reserved), 1,
	  EINVAL),
	R("more RECVs than KRDMA_EARLY_RECVS_MAX", I_CONNECT, m_u32,
	  OFF(connect, recv_count), KRDMA_EARLY_RECVS_MAX + 1, EINVAL),
	RA("destination family 0", I_CONNECT, m_addr, OFF(connect, dst),
	   AD_FAMILY, 0, EINVAL),
	R("destination port 65536", I_CONNECT, m_addr, OFF(connect, dst),
	  AD_PORT, EINVAL),
	RA("destination IPv4 with a byte past it", I_CONNECT, m_addr,
	   OFF(connect, dst), AD_TAIL, 0, EINVAL),
	R("destination reserved not 0", I_CONNECT, m_addr, OFF(connect, dst),
	  AD_RESERVED, EINVAL),
	R("source family 0 with a port", I_CONNECT, m_addr, 0, AD_SRC_PORT,
	  EINVAL),
	R("source family 0 with an address", I_CONNECT, m_addr, 0, AD_SRC_ADDR,
	  EINVAL),
	R("source family 99", I_CONNECT, m_addr, 0, AD_SRC_FAMILY, EINVAL),
	R("source reserved not 0", I_CONNECT, m_addr, 0, AD_SRC_RESERVED,
	  EINVAL),
	R("source family 0 with a scope", I_CONNECT, m_addr, 0, AD_SRC_SCOPE,
	  EINVAL),
	R("source address no device has", I_CONNECT, m_addr, 0,
	  AD_SRC_NOT_LOCAL, EADDRNOTAVAIL),

	GENERIC(I_DISCONNECT),
	R("reserved not 0", I_DISCONNECT, m_u32, OFF(disconnect, __reserved),
	  1, EINVAL),
	R("disconnected already: nothing happens", I_DISCONNECT, m_none, 0, 0,
	  0),
	R("handle 0", I_DISCONNECT, m_handle, OFF(disconnect, handle), H_ZERO,
	  ENOENT),
	R("a buffer", I_DISCONNECT, m_handle, OFF(disconnect, handle), H_CBUF,
	  ENOENT),
	R("a grant", I_DISCONNECT, m_handle, OFF(disconnect, handle), H_CGRANT,
	  ENOENT),
	R("a listener", I_DISCONNECT, m_handle, OFF(disconnect, handle),
	  H_CLISTENER, ENOENT),
	R("stale connection", I_DISCONNECT, m_handle, OFF(disconnect, handle),
	  H_STALE_CONN, ENOENT),
	R("connection of another file", I_DISCONNECT, m_handle,
	  OFF(disconnect, handle), H_FOREIGN_CONN, ENOENT),

	GENERIC(I_CONN_QUERY),
	R("reserved not 0", I_CONN_QUERY, m_u32, OFF(conn_query, __reserved),
	  1, EINVAL),
	R("handle 0", I_CONN_QUERY, m_handle, OFF(conn_query, handle), H_ZERO,
	  ENOENT),
	R("a buffer", I_CONN_QUERY, m_handle, OFF(conn_query, handle), H_CBUF,
	  ENOENT),
	R("a grant", I_CONN_QUERY, m_handle, OFF(conn_query, handle), H_CGRANT,
	  ENOENT),
	R("a listener", I_CONN_QUERY, m_handle, OFF(conn_query, handle),
	  H_CLISTENER, ENOENT),
	R("stale connection", I_CONN_QUERY, m_handle, OFF(conn_query, handle),
	  H_STALE_CONN, ENOENT),
	R("connection of another file", I_CONN_QUERY, m_handle,
	  OFF(conn_query, handle), H_FOREIGN_CONN, ENOENT),

	GENERIC(I_BUF_REG),
	R("length 0", I_BUF_REG, m_u64, OFF(buf_reg, length), 0, EINVAL),
	R("length 2^62", I_BUF_REG, m_u64, OFF(buf_reg, length), 1ULL << 62,
	  EFAULT),
	RA("address + length wraps", I_BUF_REG, m_buf_range, 0, 0, ~0ULL - 100,
	   EOVERFLOW),
	RA("last page of the address space + 2 pages wraps", I_BUF_REG,
	   m_buf_range, 0, ~0ULL - PG + 1, 2 * PG, EOVERFLOW),
	R("unknown access bit 4", I_BUF_REG, m_u32, OFF(buf_reg, access),
	  1 << 4, EINVAL),
	R("access 0xffffffff", I_BUF_REG, m_u32, OFF(buf_reg, access), ~0U,
	  EINVAL),
	R("address NULL", I_BUF_REG, m_buf_at, PG, P_NULL, EFAULT),
	R("a kernel address", I_BUF_REG, m_buf_at, PG, P_KERNEL, EFAULT),
	R("unmapped", I_BUF_REG, m_buf_at, PG, P_HOLE, EFAULT),
	RA("straddles the end of a mapping", I_BUF_REG, m_buf_at, PG, P_EDGE,
	   100, EFAULT),
	R("read-only mapping, read-only buffer", I_BUF_REG, m_buf_at, PG, P_RO,
	  0),
	R("read-only mapping, LOCAL_WRITE", I_BUF_REG, m_buf_ro_writable, 0, 0,
	  EFAULT),

	GENERIC(I_GRANT),
	R("connection 0", I_GRANT, m_handle, OFF(grant, conn), H_ZERO, ENOENT),
	R("a buffer as connection", I_GRANT, m_handle, OFF(grant, conn), H_CBUF,
	  ENOENT),
	R("a grant as connection", I_GRANT, m_handle, OFF(grant, conn),
	  H_CGRANT, ENOENT),
	R("a listener as connection", I_GRANT, m_handle, OFF(grant, conn),
	  H_CLISTENER, ENOENT),
	R("stale connection", I_GRANT, m_handle, OFF(grant, conn),
	  H_STALE_CONN, ENOENT),
	R("connection of another file", I_GRANT, m_handle, OFF(grant, conn),
	  H_FOREIGN_CONN, ENOENT),
	R("disconnected connection", I_GRANT, m_handle, OFF(grant, conn),
	  H_DEAD, ENOTCONN),
	R("buffer 0", I_GRANT, m_handle, OFF(grant, buf), H_ZERO, ENOENT),
	R("a connection as buffer", I_GRANT, m_handle, OFF(grant, buf), H_CCONN,
	  ENOENT),
	R("a grant as buffer", I_GRANT, m_handle, OFF(grant, buf), H_CGRANT,
	  ENOENT),
	R("stale buffer", I_GRANT, m_handle, OFF(grant, buf), H_STALE_BUF,
	  ENOENT),
	R("buffer of another file", I_GRANT, m_handle, OFF(grant, buf),
	  H_FOREIGN_BUF, ENOENT),
	R("length 0", I_GRANT, m_window, 0, 0, EINVAL),
	R("length 2^62", I_GRANT, m_window, 0, 1ULL << 62, EINVAL),
	R("offset at the end", I_GRANT, m_window, CMEM_LEN, 1, EINVAL),
	R("offset past the end", I_GRANT, m_window, CMEM_LEN + PG, PG, EINVAL),
	R("window one byte past the end", I_GRANT, m_window, PG,
	  CMEM_LEN - PG + 1, EINVAL),
	R("offset + length wraps", I_GRANT, m_window, PG, ~0ULL - 100,
	  EOVERFLOW),
	R("the last byte", I_GRANT, m_window, CMEM_LEN - 1, 1, 0),
	R("access 0", I_GRANT, m_u32, OFF(grant, access), 0, EINVAL),
	R("access LOCAL_WRITE", I_GRANT, m_u32, OFF(grant, access),
	  KRDMA_ACCESS_LOCAL_WRITE, EINVAL),
	R("unknown access bit 4", I_GRANT, m_u32, OFF(grant, access), 1 << 4,
	  EINVAL),
	RT("REMOTE_ATOMIC (none on iWARP)", I_GRANT, m_u32, OFF(grant, access),
	   KRDMA_ACCESS_REMOTE_ATOMIC, 0, 0, EOPNOTSUPP),
	R("REMOTE_WRITE, which the buffer does not allow", I_GRANT, m_u32,
	  OFF(grant, access), KRDMA_ACCESS_REMOTE_WRITE, EACCES),

	GENERIC(I_SUBMIT),
	R("unknown flag bit 1", I_SUBMIT, m_flags, 0, 2, EINVAL),
	R("count 0", I_SUBMIT, m_u32, OFF(submit, count), 0, EINVAL),
	R("count 257", I_SUBMIT, m_u32, OFF(submit, count),
	  KRDMA_SUBMIT_MAX + 1, EINVAL),
	R("count 0xffffffff", I_SUBMIT, m_u32, OFF(submit, count), ~0U,
	  EINVAL),
	R("operations NULL", I_SUBMIT, m_uptr, OFF(submit, ops), P_NULL,
	  EFAULT),
	R("operations at a kernel address", I_SUBMIT, m_uptr, OFF(submit, ops),
	  P_KERNEL, EFAULT),
	R("operations unmapped", I_SUBMIT, m_uptr, OFF(submit, ops), P_HOLE,
	  EFAULT),
	RA("operation straddles the end of a mapping", I_SUBMIT, m_uptr,
	   OFF(submit, ops), P_EDGE, sizeof(struct krdma_op) - 8, EFAULT),
	R("opcode 0", I_SUBMIT, m_op_u32, OPOFF(opcode), 0, EINVAL),
	R("opcode 9", I_SUBMIT, m_op_u32, OPOFF(opcode), 9, EINVAL),
	R("opcode 0xffffffff", I_SUBMIT, m_op_u32, OPOFF(opcode), ~0U, EINVAL),
	/* Bit 0 is KRDMA_OP_F_UNSIGNALED, valid on this WRITE */
	R("unknown operation flag bit 1", I_SUBMIT, m_op_u32, OPOFF(flags), 2,
	  EINVAL),
	R("unknown operation flag bit 31", I_SUBMIT, m_op_u32, OPOFF(flags),
	  1u << 31, EINVAL),
	R("operation reserved not 0", I_SUBMIT, m_op_u32, OPOFF(__reserved), 1,
	  EINVAL),
	R("token seg_shift 1", I_SUBMIT, m_op_u32, OPOFF(remote.seg_shift), 1,
	  EINVAL),
	R("token seg_shift 11", I_SUBMIT, m_op_u32, OPOFF(remote.seg_shift), 11,
	  EINVAL),
	R("token seg_shift 64", I_SUBMIT, m_op_u32, OPOFF(remote.seg_shift), 64,
	  EINVAL),
	R("token tag without seg_shift", I_SUBMIT, m_op_u32, OPOFF(remote.tag),
	  1, EINVAL),
	R("range reserved not 0", I_SUBMIT, m_op_u32, OPOFF(sge.__reserved), 1,
	  EINVAL),
	R("17 ranges", I_SUBMIT, m_op_u32, OPOFF(num_sge), KRDMA_MAX_SGE + 1,
	  EINVAL),
	R("0xffffffff ranges", I_SUBMIT, m_op_u32, OPOFF(num_sge), ~0U, EINVAL),
	R("WRITE of no range", I_SUBMIT, m_op_u32, OPOFF(num_sge), 0, EINVAL),
	R("range array NULL", I_SUBMIT, m_sges, SG_PTR, P_NULL, EFAULT),
	R("range array at a kernel address", I_SUBMIT, m_sges, SG_PTR,
	  P_KERNEL, EFAULT),
	R("range array unmapped", I_SUBMIT, m_sges, SG_PTR, P_HOLE, EFAULT),
	RA("range array cut by the end of a mapping", I_SUBMIT, m_sges, SG_PTR,
	   P_EDGE, sizeof(struct krdma_sge) + 8, EFAULT),
	R("second range reserved not 0", I_SUBMIT, m_sges, SG_RESERVED, 0,
	  EINVAL),
	R("two ranges whose lengths wrap", I_SUBMIT, m_sges, SG_WRAP, 0,
	  EOVERFLOW),
	R("second range a stale buffer", I_SUBMIT, m_sges, SG_STALE,
	  H_STALE_BUF, ENOENT),
	R("connection 0", I_SUBMIT, m_op_handle, OPOFF(conn), H_ZERO, ENOENT),
	R("a buffer as connection", I_SUBMIT, m_op_handle, OPOFF(conn), H_CBUF,
	  ENOENT),
	R("a grant as connection", I_SUBMIT, m_op_handle, OPOFF(conn),
	  H_CGRANT, ENOENT),
	R("a listener as connection", I_SUBMIT, m_op_handle, OPOFF(conn),
	  H_CLISTENER, ENOENT),
	R("stale connection", I_SUBMIT, m_op_handle, OPOFF(conn), H_STALE_CONN,
	  ENOENT),
	R("connection of another file", I_SUBMIT, m_op_handle, OPOFF(conn),
	  H_FOREIGN_CONN, ENOENT),
	R("disconnected connection", I_SUBMIT, m_op_handle, OPOFF(conn),
	  H_DEAD, ENOTCONN),
	R("buffer 0", I_SUBMIT, m_op_handle, OPOFF(sge.buf), H_ZERO, ENOENT),
	R("a connection as buffer", I_SUBMIT, m_op_handle, OPOFF(sge.buf),
	  H_CCONN, ENOENT),
	R("a grant as buffer", I_SUBMIT, m_op_handle, OPOFF(sge.buf), H_CGRANT,
	  ENOENT),
	R("stale buffer", I_SUBMIT, m_op_handle, OPOFF(sge.buf), H_STALE_BUF,
	  ENOENT),
	R("buffer of another file", I_SUBMIT, m_op_handle, OPOFF(sge.buf),
	  H_FOREIGN_BUF, ENOENT),
	R("range length 0", I_SUBMIT, m_op_u64, OPOFF(sge.length), 0, EINVAL),
	R("range length 2^62", I_SUBMIT, m_op_u64, OPOFF(sge.length),
	  1ULL << 62, EINVAL),
	R("range offset past the buffer", I_SUBMIT, m_op_u64, OPOFF(sge.offset),
	  CMEM_LEN, EINVAL),
	R("range offset + length wraps", I_SUBMIT, m_op_u64, OPOFF(sge.offset),
	  ~0ULL - 10, EOVERFLOW),
	R("remote offset past the window", I_SUBMIT, m_remote, RM_OFF_PAST, 0,
	  EINVAL),
	R("remote offset + length wraps", I_SUBMIT, m_remote, RM_OFF_WRAP, 0,
	  EOVERFLOW),
	R("token address + offset wraps", I_SUBMIT, m_remote, RM_ADDR_WRAP, 0,
	  EOVERFLOW),
	ROW("the window's last byte", ST_MAIN, I_SUBMIT, m_remote, RM_LAST_BYTE,
	    0, 0, 0, 0, KRDMA_WC_SUCCESS, KRDMA_WC_SUCCESS),
	R("READ into a buffer without LOCAL_WRITE", I_SUBMIT, m_into_ro,
	  KRDMA_OP_READ, 0, EACCES),
	R("RECV into a buffer without LOCAL_WRITE", I_SUBMIT, m_into_ro,
	  KRDMA_OP_RECV, 0, EACCES),
	R("FETCH_ADD into a buffer without LOCAL_WRITE", I_SUBMIT, m_into_ro,
	  KRDMA_OP_FETCH_ADD, 8, EACCES),
	RT("FETCH_ADD, local address 4 mod 8", I_SUBMIT, m_atomic,
	   KRDMA_OP_FETCH_ADD, 0, 4, EINVAL, EOPNOTSUPP),
	RT("CMP_SWAP, local address 4 mod 8", I_SUBMIT, m_atomic,
	   KRDMA_OP_CMP_SWAP, 0, 12, EINVAL, EOPNOTSUPP),
	RT("FETCH_ADD, remote address 4 mod 8", I_SUBMIT, m_atomic,
	   KRDMA_OP_FETCH_ADD, 4, 0, EINVAL, EOPNOTSUPP),
	RT("CMP_SWAP, remote address 1 mod 8", I_SUBMIT, m_atomic,
	   KRDMA_OP_CMP_SWAP, 1, 0, EINVAL, EOPNOTSUPP),
	ROW("WRITE with another connection's token", ST_SPARE, I_SUBMIT,
	    m_spare, 0, SP_OTHER_CONN, 0, 0, 0, KRDMA_WC_REM_ACCESS_ERR,
	    WC_SENT),
	ROW("WRITE past the granted window (forged length)", ST_SPARE,
	    I_SUBMIT, m_spare, 0, SP_PAST_WINDOW, 0, 0, 0,
	    KRDMA_WC_REM_ACCESS_ERR, WC_SENT),
	ROW("WRITE through a read-only token", ST_SPARE, I_SUBMIT, m_spare, 0,
	    SP_READ_ONLY, 0, 0, 0, KRDMA_WC_REM_ACCESS_ERR, WC_SENT),
	ROW("READ through a write-only token", ST_SPARE, I_SUBMIT, m_spare, 0,
	    SP_WRITE_ONLY, 0, 0, 0, KRDMA_WC_REM_ACCESS_ERR, WC_SERVED),
	ROW("WRITE with a forged rkey", ST_SPARE, I_SUBMIT, m_spare, 0,
	    SP_RKEY, 0, 0, 0, KRDMA_WC_REM_ACCESS_ERR, WC_SENT),
	ROW("FETCH_ADD through a token without REMOTE_ATOMIC", ST_SPARE,
	    I_SUBMIT, m_spare, 0, SP_NO_ATOMIC, 0, 0, EOPNOTSUPP,
	    KRDMA_WC_REM_ACCESS_ERR, NO_WC),

	GENERIC(I_POLL),
	R("reserved not 0", I_POLL, m_u32, OFF(poll, __reserved), 1, EINVAL),
	R("max 0", I_POLL, m_u32, OFF(poll, max), 0, EINVAL),
	RP("array NULL, one waiting: nothing taken", I_POLL, m_uptr,
	   OFF(poll, completions), P_NULL, 0, EFAULT),
	RP("array at a kernel address, one waiting", I_POLL, m_uptr,
	   OFF(poll, completions), P_KERNEL, 0, EFAULT),
	RP("array unmapped, one waiting", I_POLL, m_uptr,
	   OFF(poll, completions), P_HOLE, 0, EFAULT),
	RP("array cut by the end of a mapping, one waiting", I_POLL, m_uptr,
	   OFF(poll, completions), P_EDGE, 16, EFAULT),

	GENERIC(I_LISTEN_QUERY),
	R("unknown flag bit 0", I_LISTEN_QUERY, m_flags, 0, 1, EINVAL),
	R("reserved not 0", I_LISTEN_QUERY, m_u32,
	  OFF(listen_query, __reserved), 1, EINVAL),
	R("the listener", I_LISTEN_QUERY, m_none, 0, 0, 0),
	R("handle 0", I_LISTEN_QUERY, m_handle, OFF(listen_query, handle),
	  H_ZERO, ENOENT),
	R("handle 0xfffffff0", I_LISTEN_QUERY, m_handle,
	  OFF(listen_query, handle), H_HUGE, ENOENT),
	R("a connection", I_LISTEN_QUERY, m_handle, OFF(listen_query, handle),
	  H_CCONN, ENOENT),
	R("a buffer", I_LISTEN_QUERY, m_handle, OFF(listen_query, handle),
	  H_CBUF, ENOENT),
	R("a grant", I_LISTEN_QUERY, m_handle, OFF(listen_query, handle),
	  H_CGRANT, ENOENT),
	R("stale listener", I_LISTEN_QUERY, m_handle,
	  OFF(listen_query, handle), H_STALE_LISTENER, ENOENT),
	R("listener of another file", I_LISTEN_QUERY, m_handle,
	  OFF(listen_query, handle), H_FOREIGN_LISTENER, ENOENT),
};

#define NROWS ARRAY_SIZE(rows)

FIXTURE(badin) {
	struct ctx c;
};

FIXTURE_VARIANT(badin) {
	const char *ip;
	const char *dev;
	bool iwarp;
};

FIXTURE_VARIANT_ADD(badin, rxe) {
	.ip = "198.18.0.1",
	.dev = "rxe0",
	.iwarp = false,
};

FIXTURE_VARIANT_ADD(badin, siw) {
	.ip = "198.18.1.1",
	.dev = "siw0",
	.iwarp = true,
};

/* A page before HOLE_ADDR, read-write, and nothing at HOLE_ADDR */
static uint8_t *map_hole(void)
{
	uint8_t *p = mmap((void *)(HOLE_ADDR - PG), PG, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			  -1, 0);

	if (p != (void *)(HOLE_ADDR - PG))
		return NULL;
	/* msync() of an unmapped range fails with ENOMEM */
	if (msync((void *)HOLE_ADDR, PG, MS_ASYNC) == 0 || errno != ENOMEM)
		return NULL;
	return p + PG;
}

/*
 * VmPin once it is @want, or after 2 s; @want < 0: once it held still for
 * 100 ms. Pages are unpinned by a work item shortly after DESTROY: there
 * is no event to wait for.
 */
static long vmpin_settle(long want)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	long kb = kt_vmpin_kb(), last = kb;
	int i, still = 0;

	for (i = 0; i < 400 && kb != want && still < 20; i++) {
		nanosleep(&ts, NULL);
		kb = kt_vmpin_kb();
		still = kb == last ? still + 1 : 0;
		last = kb;
		if (want >= 0)
			still = 0;
	}
	return kb;
}

FIXTURE_SETUP(badin)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct ctx *c = &self->c;
	struct krdma_conn_query q;
	struct krdma_dev_query dq;
	struct krdma_addr any;
	uint32_t h, max_handle, s;
	int i;

	memset(c, 0, sizeof(*c));
	c->iwarp = variant->iwarp;
	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &unlimited));
	ASSERT_EQ(PG, sysconf(_SC_PAGESIZE));

	c->cfd = krdma_open();
	c->sfd = krdma_open();
	c->ofd = krdma_open();
	ASSERT_LE(0, c->cfd);
	ASSERT_LE(0, c->sfd);
	ASSERT_LE(0, c->ofd);
	ASSERT_EQ(0, krdma_dev_find(c->cfd, variant->dev, &c->dev, &dq));
	/* The rows expect atomics on rxe and none on siw */
	ASSERT_EQ(!variant->iwarp, dq.atomic_cap != KRDMA_ATOMIC_NONE);

	ASSERT_EQ(0, krdma_parse_addr(variant->ip, 0, &any));
	ASSERT_EQ(0, krdma_listen_on(c->sfd, &any, 16, &c->slistener,
				     &c->addr));
	ASSERT_EQ(0, kt_connect_pair(c->sfd, c->slistener, &c->addr, c->cfd,
				     &c->sconn, &c->cconn));

	/* The client's objects */
	c->cmem = mmap(NULL, CMEM_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, c->cmem);
	ASSERT_EQ(0, krdma_buf_register(c->cfd, c->cmem, CMEM_LEN,
					KRDMA_ACCESS_LOCAL_WRITE |
					KRDMA_ACCESS_REMOTE_READ |
					KRDMA_ACCESS_REMOTE_ATOMIC, &c->cbuf));
	ASSERT_EQ(0, krdma_buf_register(c->cfd, c->cmem + 8 * PG, 4 * PG, 0,
					&c->robuf));
	ASSERT_EQ(0, krdma_buf_register(c->cfd, c->cmem, PG,
					KRDMA_ACCESS_REMOTE_READ, &c->victim));
	ASSERT_EQ(0, krdma_grant_window(c->cfd, c->cconn, c->cbuf, 0, PG,
					KRDMA_ACCESS_REMOTE_READ, &c->cgrant,
					&c->ctok));
	ASSERT_EQ(0, krdma_listen_on(c->cfd, &any, 4, &c->clistener, NULL));
	ASSERT_EQ(0, kt_connect_pair(c->sfd, c->slistener, &c->addr, c->cfd,
				     &c->sdead, &c->dead));
	ASSERT_EQ(0, krdma_disconnect_conn(c->cfd, c->dead));

	/* The server's window */
	c->smem = mmap(NULL, SMEM_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, c->smem);
	memset(c->smem, KT_GUARD, SMEM_LEN);
	ASSERT_EQ(0, krdma_buf_register(c->sfd, c->smem, SMEM_LEN,
					KRDMA_ACCESS_LOCAL_WRITE |
					KRDMA_ACCESS_REMOTE_READ |
					KRDMA_ACCESS_REMOTE_WRITE, &c->sbuf));
	ASSERT_EQ(0, krdma_grant_window(c->sfd, c->sconn, c->sbuf, 0, WIN_LEN,
					KRDMA_ACCESS_REMOTE_READ |
					KRDMA_ACCESS_REMOTE_WRITE, &c->sgrant,
					&c->tok));

	/* Another file, with handles above every handle of cfd */
	for (i = 0; i < FOREIGN_BUFS; i++)
		ASSERT_EQ(0, krdma_buf_register(c->ofd, c->cmem, PG, 0,
						&c->foreign_buf));
	ASSERT_EQ(0, krdma_listen_on(c->ofd, &any, 4, &c->foreign_listener,
				     NULL));
	ASSERT_EQ(0, kt_connect_pair(c->sfd, c->slistener, &c->addr, c->ofd,
				     &c->sforeign, &c->foreign_conn));
	/* They are real handles there */
	ASSERT_EQ(0, krdma_conn_info(c->ofd, c->foreign_conn, &q));

	/* A port nobody listens on */
	ASSERT_EQ(0, krdma_listen_on(c->sfd, &any, 1, &h, &any));
	c->noport = any.port;
	ASSERT_EQ(0, krdma_destroy_handle(c->sfd, h));

	/* Stale handles: made last, so that nothing took their numbers */
	ASSERT_EQ(0, krdma_buf_register(c->cfd, c->cmem, PG, 0, &c->stale_buf));
	ASSERT_EQ(0, krdma_grant_window(c->cfd, c->cconn, c->cbuf, 0, PG,
					KRDMA_ACCESS_REMOTE_READ,
					&c->stale_grant, NULL));
	ASSERT_EQ(0, kt_connect_pair(c->sfd, c->slistener, &c->addr, c->cfd,
				     &s, &c->stale_conn));
	ASSERT_EQ(0, krdma_listen_on(c->cfd, &any, 1, &c->stale_listener,
				     NULL));
	max_handle = c->stale_listener;
	ASSERT_LT(max_handle, c->foreign_buf);
	ASSERT_EQ(0, krdma_destroy_handle(c->cfd, c->stale_buf));
	ASSERT_EQ(0, krdma_destroy_handle(c->cfd, c->stale_grant));
	ASSERT_EQ(0, krdma_destroy_handle(c->cfd, c->stale_conn));
	ASSERT_EQ(0, krdma_destroy_handle(c->sfd, s));
	ASSERT_EQ(0, krdma_destroy_handle(c->cfd, c->stale_listener));

	/* Pointers */
	c->hole = map_hole();
	ASSERT_NE(NULL, c->hole);
	c->ro = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, c->ro);

	/* The handle the next object of cfd gets */
	ASSERT_EQ(0, krdma_buf_register(c->cfd, c->cmem, PG, 0, &c->probe));
	ASSERT_EQ(0, krdma_destroy_handle(c->cfd, c->probe));
	c->vmpin = vmpin_settle(-1);
}

FIXTURE_TEARDOWN(badin)
{
	close(self->c.ofd);
	close(self->c.cfd);
	close(self->c.sfd);
}

/* A fresh pair, and grants of the server's spare pages: rw, ro, wo */
static int spare_up(struct ctx *c)
{
	static const uint32_t access[3] = {
		KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE,
		KRDMA_ACCESS_REMOTE_READ,
		KRDMA_ACCESS_REMOTE_WRITE,
	};
	int i, ret;

	ret = kt_connect_pair(c->sfd, c->slistener, &c->addr, c->cfd,
			      &c->spare_s, &c->spare_c);
	if (ret)
		return ret;
	memset(c->smem + SPARE_OFF, KT_GUARD, 3 * PG);
	for (i = 0; i < 3; i++) {
		ret = krdma_grant_window(c->sfd, c->spare_s, c->sbuf,
					 SPARE_OFF + i * PG, PG, access[i],
					 &c->spare_grant[i], &c->spare_tok[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static void spare_down(struct ctx *c)
{
	int i;

	for (i = 0; i < 3; i++)
		krdma_destroy_handle(c->sfd, c->spare_grant[i]);
	krdma_destroy_handle(c->sfd, c->spare_s);
	krdma_destroy_handle(c->cfd, c->spare_c);
}

/* A completion waits in the client's queue, untaken */
static int pending_up(struct ctx *c)
{
	struct pollfd pfd = { .fd = c->cfd, .events = POLLIN };
	struct krdma_op op;
	int ret;

	kt_op(&op, KRDMA_OP_WRITE, c->cconn, c->cbuf, 0, 64, &c->tok,
	      WIN_LEN - 64, COOKIE_PENDING);
	ret = krdma_submit_ops(c->cfd, &op, 1, 0, NULL);
	if (ret)
		return ret;
	return poll(&pfd, 1, KT_WAIT_MS) == 1 ? 0 : -ETIMEDOUT;
}

/* Take the completion of @cookie from @fd; any other one is reported */
static void take_wc(struct ctx *c, int fd, uint64_t cookie, int status)
{
	struct krdma_completion wc;
	int n;

	for (;;) {
		n = krdma_poll_wc(fd, &wc, 1, KT_WAIT_MS);
		ROW_CHECK(c, n == 1, "no completion for cookie %#llx",
			  (unsigned long long)cookie);
		if (n != 1)
			return;
		if (wc.cookie == cookie)
			break;
		ROW_CHECK(c, 0, "unexpected completion: cookie %#llx %s",
			  (unsigned long long)wc.cookie,
			  krdma_wc_status_str(wc.status));
	}
	if (status == WC_SENT) {
		ROW_CHECK(c, wc.status == KRDMA_WC_SUCCESS ||
			  wc.status == KRDMA_WC_LOC_QP_OP_ERR,
			  "cookie %#llx: %s, not SUCCESS or LOC_QP_OP_ERR",
			  (unsigned long long)cookie,
			  krdma_wc_status_str(wc.status));
		return;
	}
	ROW_CHECK(c, (int)wc.status == status, "cookie %#llx: %s, not %s",
		  (unsigned long long)cookie, krdma_wc_status_str(wc.status),
		  krdma_wc_status_str(status));
}

/*
 * Nothing changed: the pair is connected, the client's WRITE moves the
 * right bytes, its grant serves the server's READ, the victim buffer is
 * there, stale and foreign handles mean nothing, no completion appeared,
 * no object was left behind, nothing stayed pinned.
 */
static void check_state(struct ctx *c, const struct row *r)
{
	static const uint32_t gone[] = {
		H_STALE_BUF, H_STALE_GRANT, H_STALE_CONN, H_STALE_LISTENER,
		H_FOREIGN_BUF, H_FOREIGN_CONN, H_FOREIGN_LISTENER,
	};
	size_t roff = (c->nr % (WIN_LEN / CHECK_LEN)) * CHECK_LEN;
	struct krdma_completion wc[4];
	struct krdma_conn_query q;
	struct krdma_op op;
	uint32_t h;
	long bad, kb;
	unsigned int i;
	int n;

	n = krdma_poll_wc(c->cfd, wc, 4, 0);
	if (r->state == ST_PENDING) {
		ROW_CHECK(c, n == 1 && wc[0].cookie == COOKIE_PENDING &&
			  wc[0].status == KRDMA_WC_SUCCESS,
			  "the waiting completion is gone (%d)", n);
	} else {
		ROW_CHECK(c, n == 0, "%d unexpected completions, first %#llx",
			  n, (unsigned long long)wc[0].cookie);
	}
	n = krdma_poll_wc(c->sfd, wc, 4, 0);
	ROW_CHECK(c, n == 0, "%d unexpected completions on the server", n);

	ROW_CHECK(c, !krdma_conn_info(c->cfd, c->cconn, &q) &&
		  q.state == KRDMA_CONN_CONNECTED, "client not connected");
	ROW_CHECK(c, !krdma_conn_info(c->sfd, c->sconn, &q) &&
		  q.state == KRDMA_CONN_CONNECTED, "server not connected");

	/* The client WRITEs CHECK_LEN bytes, the server READs 64 back */
	kt_pattern(c->cmem, CHECK_LEN, c->nr);
	kt_op(&op, KRDMA_OP_WRITE, c->cconn, c->cbuf, 0, CHECK_LEN, &c->tok,
	      roff, COOKIE_CHECK + c->nr);
	ROW_CHECK(c, !krdma_submit_ops(c->cfd, &op, 1, 0, NULL),
		  "check WRITE refused");
	take_wc(c, c->cfd, COOKIE_CHECK + c->nr, KRDMA_WC_SUCCESS);
	memset(c->smem + READ_OFF, 0, 64);
	kt_op(&op, KRDMA_OP_READ, c->sconn, c->sbuf, READ_OFF, 64, &c->ctok, 0,
	      COOKIE_CHECK);
	ROW_CHECK(c, !krdma_submit_ops(c->sfd, &op, 1, 0, NULL),
		  "check READ refused");
	take_wc(c, c->sfd, COOKIE_CHECK, KRDMA_WC_SUCCESS);
	ROW_CHECK(c, !memcmp(c->smem + READ_OFF, c->cmem, 64),
		  "check READ: wrong bytes");
	/*
	 * The WRITE's bytes only now: on iWARP its completion means they went
	 * to TCP, and siw places them a moment later. The READ's response came
	 * behind them on the same stream: once it completed, they are placed.
	 */
	bad = kt_check_pattern(c->smem + roff, CHECK_LEN, c->nr);
	ROW_CHECK(c, bad == -1, "check WRITE: byte %ld differs", bad);

	/* The victim is there; stale and foreign handles are not */
	ROW_CHECK(c, !krdma_grant_window(c->cfd, c->cconn, c->victim, 0, PG,
					 KRDMA_ACCESS_REMOTE_READ, &h, NULL) &&
		  !krdma_destroy_handle(c->cfd, h), "victim buffer gone");
	for (i = 0; i < ARRAY_SIZE(gone); i++) {
		n = krdma_destroy_handle(c->cfd, handle_of(c, gone[i]));
		ROW_CHECK(c, n == -ENOENT, "handle %u exists (%d)",
			  handle_of(c, gone[i]), n);
	}

	/* The next object gets the same handle as before: none was left */
	ROW_CHECK(c, !krdma_buf_register(c->cfd, c->cmem, PG, 0, &h) &&
		  h == c->probe, "next handle %u, not %u: an object stayed",
		  h, c->probe);
	krdma_destroy_handle(c->cfd, h);
	kb = vmpin_settle(c->vmpin);
	ROW_CHECK(c, kb == c->vmpin, "VmPin %ld kB, was %ld kB", kb, c->vmpin);
}

/* Run one row; false when it failed */
static bool run_row(struct ctx *c, unsigned int nr)
{
	const struct row *r = &rows[nr];
	const struct ioc *d = &iocs[r->ioc];
	int want = c->iwarp ? r->err_iwarp : r->err;
	int want_wc = c->iwarp ? r->wc_iwarp : r->wc;
	struct krdma_conn_query q;
	uint32_t state;
	void *arg;
	int ret;

	c->nr = nr;
	c->rname = r->name;
	c->failed = false;
	if (r->state == ST_SPARE) {
		ret = spare_up(c);
		ROW_CHECK(c, !ret, "spare pair: %s", strerror(-ret));
	} else if (r->state == ST_PENDING) {
		ret = pending_up(c);
		ROW_CHECK(c, !ret, "pending completion: %s", strerror(-ret));
	}

	memset(c->arg, 0, sizeof(c->arg));
	d->build(c, c->arg);
	*(uint32_t *)c->arg = d->size;
	arg = r->mutate(c, r, c->arg);
	ret = ioctl(c->cfd, d->nr, arg) ? -errno : 0;
	ROW_CHECK(c, ret == -want, "%s returned %s, expected %s", d->name,
		  ret ? strerror(-ret) : "success",
		  want ? strerror(want) : "success");
	if (!ret && d->handle_off != NONE)
		krdma_destroy_handle(c->cfd,
				     *(uint32_t *)((uint8_t *)arg +
						   d->handle_off));
	if (!ret && want_wc != NO_WC)
		take_wc(c, c->cfd, COOKIE_ROW,
			want_wc == WC_SERVED ? KRDMA_WC_SUCCESS : want_wc);

	if (r->state == ST_SPARE) {
		/* The peer refused: that connection failed, not the main one */
		if (!ret && want_wc != WC_SERVED) {
			state = kt_wait_conn_down(c->cfd, c->spare_c);
			ROW_CHECK(c, state == KRDMA_CONN_ERROR,
				  "spare connection state %u", state);
		} else {
			q.state = 0;
			krdma_conn_info(c->cfd, c->spare_c, &q);
			ROW_CHECK(c, q.state == KRDMA_CONN_CONNECTED,
				  "spare connection state %u", q.state);
		}
		ROW_CHECK(c, kt_check_fill(c->smem + SPARE_OFF, 3 * PG,
					   KT_GUARD) == -1,
			  "refused operation changed the window");
		spare_down(c);
	}
	check_state(c, r);

	ksft_print_msg("%s row %3u %-22s %s\n", c->failed ? "FAIL" : "ok  ",
		       nr, d->name + strlen("KRDMA_IOC_"), r->name);
	fflush(stdout);
	return !c->failed;
}

TEST_F_TIMEOUT(badin, every_ioctl_every_bad_input, 120)
{
	struct ctx *c = &self->c;
	unsigned int i, failed = 0;
	struct krdma_conn_query q;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < NROWS; i++) {
		if (!run_row(c, i))
			failed++;
		/* A broken main pair makes every later row meaningless */
		ASSERT_EQ(0, krdma_conn_info(c->cfd, c->cconn, &q));
		ASSERT_EQ(KRDMA_CONN_CONNECTED, q.state)
			TH_LOG("after row %u (%s)", i, rows[i].name);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_print_msg("%zu rows, %u failed, %ld ms\n", NROWS, failed,
		       (t1.tv_sec - t0.tv_sec) * 1000 +
		       (t1.tv_nsec - t0.tv_nsec) / 1000000);
	EXPECT_EQ(0, failed);
}

/*
 * Outputs: every struct the kernel writes is filled with 0xa5 first, its
 * inputs set, and the size given 32 bytes larger (with a zero tail). The
 * kernel must write every output field (no u32 of the struct is still
 * 0xa5a5a5a5), zero every reserved field and string tail, leave the tail
 * and array entries past the count alone, and say its own size.
 */
#define FILL 0xa5
#define TAIL 32

/* Offset of the first u32 of [from, to) the kernel did not write, or -1 */
static long unwritten(const void *p, size_t from, size_t to)
{
	const uint8_t *b = p;
	uint32_t v;
	size_t i;

	for (i = from; i + 4 <= to; i += 4) {
		memcpy(&v, b + i, 4);
		if (v == 0xa5a5a5a5)
			return i;
	}
	return -1;
}

/* The bytes after the string's NUL are zero (and there is a NUL) */
static bool str_clean(const uint8_t *s, size_t n)
{
	size_t len = strnlen((const char *)s, n);

	return len < n && kt_check_fill(s + len, n - len, 0) == -1;
}

static bool addr_clean(const struct krdma_addr *a)
{
	return a->family == AF_INET && !a->scope_id && !a->__reserved &&
	       kt_check_fill(a->addr + 4, 12, 0) == -1;
}

/* A struct of @size filled with 0xa5, the size field set, a zero tail */
static void *filled(uint8_t *b, size_t size)
{
	memset(b, FILL, size);
	memset(b + size, 0, TAIL);
	*(uint32_t *)b = size + TAIL;
	return b;
}

/* The call worked, and said its size, and left the tail alone */
static void call_out(struct __test_metadata *_metadata, int fd,
		     unsigned long nr, uint8_t *b, size_t size,
		     const char *what)
{
	ASSERT_EQ(0, ioctl(fd, nr, b)) TH_LOG("%s: %s", what, strerror(errno));
	EXPECT_EQ(size, *(uint32_t *)b) TH_LOG("%s: size", what);
	EXPECT_EQ(-1, kt_check_fill(b + size, TAIL, 0))
		TH_LOG("%s: wrote past the kernel's struct", what);
	EXPECT_EQ(-1, unwritten(b, 0, size))
		TH_LOG("%s: field at %ld not written", what,
		       unwritten(b, 0, size));
}

TEST_F(badin, outputs_carry_no_stale_bytes)
{
	struct ctx *c = &self->c;
	uint8_t b[1024] __attribute__((aligned(8)));
	struct krdma_completion wcs[4];
	struct krdma_query_module *qm = (void *)b;
	struct krdma_dev_list *dl = (void *)b;
	struct krdma_dev_query *dq = (void *)b;
	struct krdma_port_query *pq = (void *)b;
	struct krdma_conn_query *cq = (void *)b;
	struct krdma_listen *li = (void *)b;
	struct krdma_connect *cn = (void *)b;
	struct krdma_accept *ac = (void *)b;
	struct krdma_buf_reg *br = (void *)b;
	struct krdma_grant *gr = (void *)b;
	struct krdma_submit *su = (void *)b;
	struct krdma_poll *po = (void *)b;
	struct krdma_listen_query *lq = (void *)b;
	uint32_t conns[2] = { c->cconn, c->sconn }, handle, n, i;
	int fds[2] = { c->cfd, c->sfd };
	struct krdma_op op;

	filled(b, sizeof(*qm));
	qm->flags = 0;
	qm->__reserved = 0;
	call_out(_metadata, c->cfd, KRDMA_IOC_QUERY_MODULE, b, sizeof(*qm),
		 "QUERY_MODULE");

	memset(c->idx, FILL, sizeof(c->idx));
	filled(b, sizeof(*dl));
	dl->flags = 0;
	dl->__reserved = 0;
	dl->num_devices = 16;
	dl->dev_indexes = (uintptr_t)c->idx;
	call_out(_metadata, c->cfd, KRDMA_IOC_DEV_LIST, b, sizeof(*dl),
		 "DEV_LIST");
	n = dl->num_devices;
	ASSERT_GE(16, n);
	EXPECT_EQ(-1, unwritten(c->idx, 0, 4 * n));
	EXPECT_EQ(-1, kt_check_fill((uint8_t *)(c->idx + n), 4 * (16 - n),
				    FILL)) TH_LOG("DEV_LIST wrote past the count");

	filled(b, sizeof(*dq));
	dq->flags = 0;
	dq->__reserved = 0;
	dq->dev_index = c->dev;
	call_out(_metadata, c->cfd, KRDMA_IOC_DEV_QUERY, b, sizeof(*dq),
		 "DEV_QUERY");
	EXPECT_TRUE(str_clean(dq->name, sizeof(dq->name)));
	EXPECT_TRUE(str_clean(dq->fw_ver, sizeof(dq->fw_ver)));

	memset(c->gids, FILL, sizeof(c->gids));
	filled(b, sizeof(*pq));
	pq->flags = 0;
	pq->__reserved = 0;
	pq->dev_index = c->dev;
	pq->port_num = 1;
	pq->num_gids = 16;
	pq->gids = (uintptr_t)c->gids;
	call_out(_metadata, c->cfd, KRDMA_IOC_PORT_QUERY, b, sizeof(*pq),
		 "PORT_QUERY");
	EXPECT_TRUE(str_clean(pq->netdev_name, sizeof(pq->netdev_name)));
	n = pq->num_gids;
	ASSERT_LT(0, n);
	ASSERT_GE(16, n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(0, c->gids[i].__reserved) TH_LOG("GID entry %u", i);
		EXPECT_EQ(-1, unwritten(&c->gids[i], 16, sizeof(c->gids[i])))
			TH_LOG("GID entry %u", i);
	}
	EXPECT_EQ(-1, kt_check_fill((uint8_t *)(c->gids + n),
				    sizeof(c->gids[0]) * (16 - n), FILL))
		TH_LOG("PORT_QUERY wrote past the count");

	for (i = 0; i < 2; i++) {
		filled(b, sizeof(*cq));
		cq->flags = 0;
		cq->__reserved = 0;
		cq->__reserved2 = 0;
		cq->handle = conns[i];
		call_out(_metadata, fds[i], KRDMA_IOC_CONN_QUERY, b,
			 sizeof(*cq), i ? "CONN_QUERY server" :
					  "CONN_QUERY client");
		EXPECT_TRUE(addr_clean(&cq->local));
		EXPECT_TRUE(addr_clean(&cq->peer));
		EXPECT_EQ(0, cq->error);
	}

	filled(b, sizeof(*li));
	li->flags = 0;
	li->addr = c->addr;
	li->addr.port = 0;
	li->backlog = 1;
	li->sq_depth = 0;
	li->rq_depth = 0;
	call_out(_metadata, c->cfd, KRDMA_IOC_LISTEN, b, sizeof(*li), "LISTEN");
	EXPECT_TRUE(addr_clean(&li->addr));
	EXPECT_NE(0, li->addr.port);
	EXPECT_EQ(0, krdma_destroy_handle(c->cfd, li->handle));

	filled(b, sizeof(*cn));
	cn->flags = 0;
	memset(&cn->src, 0, sizeof(cn->src));
	cn->dst = c->addr;
	cn->timeout_ms = 10000;
	cn->sq_depth = 0;
	cn->rq_depth = 0;
	cn->recv_count = 0;
	cn->__reserved = 0;
	cn->recvs = 0;
	call_out(_metadata, c->cfd, KRDMA_IOC_CONNECT, b, sizeof(*cn),
		 "CONNECT");
	handle = cn->handle;
	filled(b, sizeof(*ac));
	ac->flags = 0;
	ac->recv_count = 0;
	ac->recvs = 0;
	ac->listener = c->slistener;
	ac->timeout_ms = 10000;
	call_out(_metadata, c->sfd, KRDMA_IOC_ACCEPT, b, sizeof(*ac), "ACCEPT");
	EXPECT_EQ(0, krdma_destroy_handle(c->sfd, ac->handle));
	EXPECT_EQ(0, krdma_destroy_handle(c->cfd, handle));

	filled(b, sizeof(*br));
	br->flags = 0;
	br->addr = (uintptr_t)c->cmem;
	br->length = PG;
	br->access = 0;
	call_out(_metadata, c->cfd, KRDMA_IOC_BUF_REG, b, sizeof(*br),
		 "BUF_REG");
	EXPECT_EQ(0, krdma_destroy_handle(c->cfd, br->handle));

	filled(b, sizeof(*gr));
	gr->flags = 0;
	gr->conn = c->cconn;
	gr->buf = c->cbuf;
	gr->offset = 8;
	gr->length = 100;
	gr->access = KRDMA_ACCESS_REMOTE_READ;
	call_out(_metadata, c->cfd, KRDMA_IOC_GRANT, b, sizeof(*gr), "GRANT");
	EXPECT_EQ(0, gr->token.seg_shift);
	EXPECT_EQ(0, gr->token.tag);
	EXPECT_EQ(100, gr->token.length);
	EXPECT_EQ(KRDMA_ACCESS_REMOTE_READ, gr->token.access);
	EXPECT_EQ(0, krdma_destroy_handle(c->cfd, gr->handle));

	kt_op(&op, KRDMA_OP_WRITE, c->cconn, c->cbuf, 0, 64, &c->tok, 0, 7);
	filled(b, sizeof(*su));
	su->flags = 0;
	su->count = 1;
	su->ops = (uintptr_t)&op;
	call_out(_metadata, c->cfd, KRDMA_IOC_SUBMIT, b, sizeof(*su),
		 "SUBMIT");
	EXPECT_EQ(1, su->submitted);

	memset(wcs, FILL, sizeof(wcs));
	filled(b, sizeof(*po));
	po->flags = 0;
	po->__reserved = 0;
	po->max = 4;
	po->completions = (uintptr_t)wcs;
	po->timeout_ms = KT_WAIT_MS;
	call_out(_metadata, c->cfd, KRDMA_IOC_POLL, b, sizeof(*po), "POLL");
	ASSERT_EQ(1, po->count);
	EXPECT_EQ(7, wcs[0].cookie);
	EXPECT_EQ(KRDMA_WC_SUCCESS, wcs[0].status);
	EXPECT_EQ(64, wcs[0].byte_len);
	EXPECT_EQ(0, wcs[0].imm_data);
	EXPECT_EQ(0, wcs[0].flags);
	EXPECT_EQ(0, wcs[0].vendor_err);
	EXPECT_EQ(0, wcs[0].__reserved);
	EXPECT_EQ(-1, kt_check_fill((uint8_t *)(wcs + 1), 3 * sizeof(wcs[0]),
				    FILL)) TH_LOG("POLL wrote past the count");

	/* Nothing refused yet: the last peer is all zero, not stale */
	filled(b, sizeof(*lq));
	lq->flags = 0;
	lq->__reserved = 0;
	lq->handle = c->slistener;
	call_out(_metadata, c->sfd, KRDMA_IOC_LISTEN_QUERY, b, sizeof(*lq),
		 "LISTEN_QUERY");
	EXPECT_EQ(KRDMA_LISTENER_LISTENING, lq->state);
	EXPECT_TRUE(addr_clean(&lq->addr));
	EXPECT_EQ(0, memcmp(&lq->addr, &c->addr, sizeof(lq->addr)));
	EXPECT_EQ(16, lq->backlog);
	EXPECT_EQ(0, lq->queued);
	EXPECT_EQ(0, lq->refused);
	EXPECT_EQ(0, lq->last_refused_reason);
	EXPECT_EQ(-1, kt_check_fill((uint8_t *)&lq->last_refused_peer,
				    sizeof(lq->last_refused_peer), 0));
	EXPECT_EQ(0, lq->__reserved);
}

TEST_HARNESS_MAIN
