// SPDX-License-Identifier: GPL-2.0
/*
 * krdma-allreduce: the ring AllReduce of NCCL and Horovod (reduce-scatter,
 * then all-gather) among N processes, over /dev/krdma through libkrdma,
 * or over TCP with the same ring and the same chunking; every element
 * verified, timed and printed as nccl-tests prints it.
 *
 * The ring: rank r sends to rank r + 1 (its right neighbour) and receives
 * from rank r - 1 (its left), mod N. The data (count elements) is cut
 * into N chunks; step s of the 2(N - 1) steps sends chunk (r - s) mod N
 * and receives chunk (r - s - 1) mod N, which it adds into its own data
 * (the N - 1 reduce-scatter steps) or copies there (the N - 1 all-gather
 * steps). What step s sends is what step s - 1 received: a chunk is
 * forwarded piece by piece, as soon as each piece is in.
 *
 * Over krdma, per rank:
 * - objects: a listener, a connection to the right neighbour (CONNECT)
 *   and one from the left (ACCEPT), three buffers: the data (the source of
 *   the WRITEs), the slots (S slots of slot_size bytes the left neighbour
 *   writes into, granted to it with REMOTE_WRITE) and small control slots
 *   (RECVs and SENDs of notifications and credits);
 * - the token of the slots window goes to the left neighbour over the TCP
 *   rendezvous, which also carries the listen addresses;
 * - a piece is one RDMA WRITE into slot (i mod S) of the right
 *   neighbour's window, and a notification: the WRITE carries it as its
 *   immediate data (WRITE_IMM) on InfiniBand and RoCE; on iWARP, which
 *   has no immediate data, a SEND of the piece's number follows the
 *   WRITE (a SEND after a WRITE on one connection arrives after its
 *   data). The transport comes from the connection's device;
 * - flow control by credits: a sender may have S pieces its neighbour has
 *   not consumed; the receiver SENDs a credit back for each piece once it
 *   has added or copied it out of its slot. Each notification and each
 *   credit consumes a RECV, so each side keeps S RECVs posted on each
 *   connection (posted before the tokens are exchanged, which is before
 *   anyone sends: iWARP has no RNR retry), re-posted as they complete.
 *
 * The rendezvous: rank 0 listens on the address given (--root, or
 * MASTER_ADDR:MASTER_PORT), every other rank connects to it; rank 0
 * gathers and broadcasts. It is also how a dead rank is named: its
 * socket closes (its process exited) without a word, and rank 0 tells
 * everyone which rank it was.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define PROG			"krdma-allreduce"
#define AR_MAX_RANKS		256	/* float sums stay exact below 2^24 */
#define AR_MAX_STEPS		(2 * AR_MAX_RANKS)
#define AR_DEF_PORT		29500	/* torchrun's MASTER_PORT */
#define AR_DEF_SLOTS		4
#define AR_MAX_SLOTS		64
#define AR_DEF_SLOT_SIZE	(256U << 10)
#define AR_MAX_SLOT_SIZE	(64U << 20)
#define AR_CTRL			64	/* bytes of a control slot */
#define AR_DEF_TIMEOUT_S	30

_Static_assert(AR_MAX_RANKS <= RV_MAX_RANKS, "the rendezvous takes them");

/* struct note kinds */
#define NOTE_DATA	1
#define NOTE_CREDIT	2

/* Completion cookies (COOKIE()): the kinds */
#define K_NRECV		1ULL	/* RECV for a notification (left) */
#define K_CRECV		2ULL	/* RECV for a credit (right) */
#define K_WRITE		3ULL	/* WRITE(_IMM) of piece J (right) */
#define K_NSEND		4ULL	/* SEND notification of piece J (right) */
#define K_CSEND		5ULL	/* SEND credit for piece I (left) */

enum dtype { T_FLOAT, T_INT32 };
static const char *const type_names[] = { "float", "int32" };

struct opts {
	struct ex_opts e;		/* the options of common.h */
	int types;			/* bit per enum dtype */
	unsigned int slots;
	uint64_t slot_size;
};

struct plan {
	uint32_t nsteps;
	uint64_t count;			/* elements */
	uint64_t pe;			/* elements per piece */
	enum dtype type;
	uint32_t csend[AR_MAX_STEPS], crecv[AR_MAX_STEPS];
	uint32_t sbase[AR_MAX_STEPS + 1], rbase[AR_MAX_STEPS + 1];
};

/* Progress of one AllReduce */
struct run {
	uint32_t nsend, nrecv;
	uint32_t next_send;		/* pieces posted (krdma) or written (TCP) */
	uint32_t sent_ok;		/* pieces whose ops all completed */
	uint32_t credits;		/* credits received */
	uint32_t notes;			/* notifications received */
	uint32_t processed;		/* pieces received and reduced/copied */
	uint32_t csend_ok;		/* credits sent and completed */
	uint8_t *sdone;			/* per sent piece: ops completed */
	uint8_t *cdone;			/* per received piece: credit completed */
	uint64_t soff, roff;		/* TCP: bytes of the current pieces */
	uint64_t last_progress;
};

#define ar_abort(a, blame, ...) rv_abort(&(a)->rv, blame, __VA_ARGS__)

const char *const ex_prog = PROG;

struct ar {
	struct opts o;
	int rank, n, left, right;
	struct rv rv;			/* the rendezvous (common.h) */
	/* krdma */
	int kfd;
	uint32_t listener, lconn, rconn;
	bool imm;			/* WRITE_IMM to the right */
	char info[128];			/* "rxe0 RoCE WRITE_IMM" */
	uint8_t *data, *slots, *ctrl;
	uint64_t data_len, slots_len, ctrl_len;
	uint32_t data_h, slots_h, ctrl_h, grant_h;
	struct krdma_token rtok;	/* the right neighbour's slots */
	uint32_t tx_seq, rx_seq, ctx_seq, crx_seq;	/* notes, credits */
	/* TCP */
	int lsock, rsock, tlisten;
	/* results */
	char infos[AR_MAX_RANKS][128];
	char first_wrong[120];
};

/* The options every rank must share, in a HELLO */
static void hello_fill(const struct ar *a, struct rv_msg *m)
{
	ex_hello(&a->o.e, a->o.types, a->o.slots | a->o.slot_size << 16, m);
}

/*
 * Data: inputs whose float sums are exact (small integers), their sum
 * in closed form, the reduction
 */

static int32_t input_base(uint64_t i, unsigned int it)
{
	return (int32_t)((i + 7ULL * it) % 251) - 125;
}

static void fill_input(struct ar *a, const struct plan *p, unsigned int it)
{
	uint64_t i;

	for (i = 0; i < p->count; i++) {
		int32_t v = input_base(i, it) * (a->rank + 1) + a->rank;

		if (p->type == T_FLOAT)
			((float *)a->data)[i] = (float)v;
		else
			((int32_t *)a->data)[i] = v;
	}
	/* one element off by 1: every rank must see it wrong */
	if (a->o.e.inject && a->rank == 1 && it == 0 && p->count) {
		if (p->type == T_FLOAT)
			((float *)a->data)[p->count / 2] += 1;
		else
			((int32_t *)a->data)[p->count / 2] += 1;
	}
}

/* Elements that differ from sum over r of base * (r + 1) + r */
static uint64_t verify(struct ar *a, const struct plan *p, unsigned int it)
{
	int64_t n = a->n, tri = n * (n + 1) / 2, off = n * (n - 1) / 2;
	uint64_t i, wrong = 0;

	for (i = 0; i < p->count; i++) {
		int64_t want = input_base(i, it) * tri + off;
		bool ok;
		double got;

		if (p->type == T_FLOAT) {
			got = ((float *)a->data)[i];
			ok = ((float *)a->data)[i] == (float)want;
		} else {
			got = ((int32_t *)a->data)[i];
			ok = ((int32_t *)a->data)[i] == (int32_t)want;
		}
		if (!ok && !wrong++ && !a->first_wrong[0])
			snprintf(a->first_wrong, sizeof(a->first_wrong),
				 "%s, %" PRIu64 " elements, iteration %u: element %" PRIu64 " is %.1f, not %" PRId64,
				 type_names[p->type], p->count, it, i, got, want);
	}
	return wrong;
}

static void reduce(enum dtype t, void *dst, const void *src, uint64_t n,
		   bool add)
{
	uint64_t i;

	if (!add) {
		memcpy(dst, src, n * 4);
	} else if (t == T_FLOAT) {
		float *d = dst;
		const float *s = src;

		for (i = 0; i < n; i++)
			d[i] += s[i];
	} else {
		uint32_t *d = dst;	/* wraps as int32 sums do, without UB */
		const uint32_t *s = src;

		for (i = 0; i < n; i++)
			d[i] += s[i];
	}
}

/*
 * The plan of one AllReduce: chunk c is elements [count c / N,
 * count (c + 1) / N); each is cut into pieces of pe elements (a slot).
 */
static void plan_make(const struct ar *a, struct plan *p, uint64_t count,
		      enum dtype type)
{
	uint32_t s;

	p->count = count;
	p->type = type;
	p->pe = a->o.slot_size / 4;
	p->nsteps = 2 * (a->n - 1);
	p->sbase[0] = p->rbase[0] = 0;
	for (s = 0; s < p->nsteps; s++) {
		uint32_t cs = ((a->rank - (int)s) % a->n + a->n) % a->n;
		uint32_t cr = (cs + a->n - 1) % a->n;
		uint64_t ls = count * (cs + 1) / a->n - count * cs / a->n;
		uint64_t lr = count * (cr + 1) / a->n - count * cr / a->n;

		p->csend[s] = cs;
		p->crecv[s] = cr;
		p->sbase[s + 1] = p->sbase[s] + (ls + p->pe - 1) / p->pe;
		p->rbase[s + 1] = p->rbase[s] + (lr + p->pe - 1) / p->pe;
	}
}

/* Piece @idx of @base/@chunk: its step, piece number, elements */
static void piece(const struct ar *a, const struct plan *p, const uint32_t *base,
		  const uint32_t *chunk, uint32_t idx, uint32_t *step,
		  uint32_t *k, uint64_t *first, uint64_t *n)
{
	uint32_t s = 0;
	uint64_t lo, hi;

	while (base[s + 1] <= idx)
		s++;
	*step = s;
	*k = idx - base[s];
	lo = p->count * chunk[s] / a->n;
	hi = p->count * (chunk[s] + 1) / a->n;
	*first = lo + (uint64_t)*k * p->pe;
	*n = hi - *first < p->pe ? hi - *first : p->pe;
}

/*
 * krdma
 */

static int neighbour_of(const struct ar *a, uint32_t conn)
{
	return conn == a->rconn ? a->right : a->left;
}

static const char *side_of(const struct ar *a, uint32_t conn)
{
	return conn == a->rconn ? "right" : "left";
}

static void submit(struct ar *a, struct krdma_op *ops, uint32_t n)
{
	char buf[96];
	int ret, q;

	ret = submit_wait(a->kfd, &ops, &n);
	if (!ret)
		return;
	q = neighbour_of(a, ops->conn);
	/* a connection that went down is the neighbour's doing; else ours */
	ar_abort(a, ret == -ENOTCONN || ret == -ECONNRESET ? q : -1,
		 "%s to rank %d (%s neighbour) refused: %s%s",
		 krdma_opcode_str(ops->opcode), q, side_of(a, ops->conn),
		 strerror(-ret), conn_why(a->kfd, ops->conn, buf, sizeof(buf)));
}

static void post_recv(struct ar *a, uint32_t conn, uint64_t kind, uint32_t slot)
{
	struct krdma_op op;

	fill_recv(&op, conn, COOKIE(kind, slot), a->ctrl_h,
		  (uint64_t)slot * AR_CTRL, AR_CTRL);
	submit(a, &op, 1);
}

/* A SEND of a note from control slot @slot */
static void note_send(struct ar *a, struct krdma_op *op, uint32_t conn,
		      uint64_t cookie, uint32_t slot, uint32_t kind, uint32_t seq)
{
	fill_note_send(op, conn, cookie, a->ctrl_h, a->ctrl,
		       (uint64_t)slot * AR_CTRL, kind, seq);
}

static void krdma_setup(struct ar *a)
{
	uint32_t ns = a->o.slots, i;
	struct krdma_addr bound, dst;
	struct krdma_dev_query dq;
	struct rv_msg m;
	char as[64];
	int ret;

	snprintf(a->rv.phase, sizeof(a->rv.phase), "the krdma setup");
	a->kfd = krdma_start(&a->rv);

	ret = krdma_listen_on(a->kfd, &a->rv.local, 4, &a->listener, &bound);
	if (ret)
		ar_abort(a, -1, "cannot listen on %s with krdma: %s; %s",
			 krdma_addr_str(&a->rv.local, as, sizeof(as)), strerror(-ret),
			 krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN, ret) ?: "");
	memset(&m, 0, sizeof(m));
	m.type = RV_ADDR;
	m.addr = bound;
	rv_exchange(&a->rv, &m, true);

	/* connect right first: the listeners accept in the kernel meanwhile */
	dst = a->rv.all[a->right].addr;
	ret = krdma_connect_to(a->kfd, &dst, 0, &a->rconn);
	if (ret)
		ar_abort(a, a->right, "cannot connect to rank %d at %s: %s; %s",
			 a->right, krdma_addr_str(&dst, as, sizeof(as)),
			 strerror(-ret), krdma_conn_strerror_hint(ret) ?: "");
	ret = krdma_accept_conn(a->kfd, a->listener, 0, a->o.e.timeout_s * 1000,
				&a->lconn);
	if (ret)
		ar_abort(a, a->left, "no connection from rank %d: %s", a->left,
			 strerror(-ret));
	krdma_destroy_handle(a->kfd, a->listener);

	/* WRITE_IMM unless the right connection's device is iWARP */
	snprintf(a->info, sizeof(a->info), "?");
	ret = conn_device(a->kfd, a->rconn, &dq);
	if (ret)
		ar_abort(a, -1, "cannot query the connection's device: %s",
			 strerror(-ret));
	a->imm = a->o.e.notify == 1 ||
		 (a->o.e.notify == 0 && dq.transport != KRDMA_TRANSPORT_IWARP);
	snprintf(a->info, sizeof(a->info), "%s %s %s", (const char *)dq.name,
		 krdma_transport_str(dq.transport), a->imm ? "WRITE_IMM" : "WRITE+SEND");

	a->data = map_buf(&a->rv, a->kfd, a->data_len, 0, &a->data_h);
	a->slots_len = (uint64_t)ns * a->o.slot_size;
	a->slots = map_buf(&a->rv, a->kfd, a->slots_len,
			   KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_WRITE,
			   &a->slots_h);
	a->ctrl_len = 4ULL * ns * AR_CTRL;
	a->ctrl = map_buf(&a->rv, a->kfd, a->ctrl_len, KRDMA_ACCESS_LOCAL_WRITE,
			  &a->ctrl_h);

	/* RECVs before anyone can send: before the tokens go out */
	for (i = 0; i < ns; i++) {
		post_recv(a, a->lconn, K_NRECV, i);
		post_recv(a, a->rconn, K_CRECV, ns + i);
	}
	memset(&m, 0, sizeof(m));
	m.type = RV_TOKEN;
	ret = krdma_grant_window(a->kfd, a->lconn, a->slots_h, 0, a->slots_len,
				 KRDMA_ACCESS_REMOTE_WRITE, &a->grant_h, &m.token);
	if (ret)
		ar_abort(a, -1, "cannot grant the slots to rank %d: %s; %s",
			 a->left, strerror(-ret),
			 krdma_cmd_strerror_hint(KRDMA_IOC_GRANT, ret) ?: "");
	snprintf(m.text, sizeof(m.text), "%s", a->info);
	rv_exchange(&a->rv, &m, true);
	a->rtok = a->rv.all[a->right].token;
	for (i = 0; i < (uint32_t)a->n; i++)
		snprintf(a->infos[i], sizeof(a->infos[i]), "%.100s", a->rv.all[i].text);
}

/* A failed completion: which neighbour, what */
static void __noreturn wc_failed(struct ar *a,
						const struct krdma_completion *wc)
{
	char buf[96];
	int q = neighbour_of(a, wc->conn);

	ar_abort(a, q, "%s with rank %d (%s neighbour) failed: %s%s", krdma_opcode_str(wc->opcode),
		 q, side_of(a, wc->conn), krdma_wc_status_str(wc->status),
		 conn_why(a->kfd, wc->conn, buf, sizeof(buf)));
}

static void handle_wc(struct ar *a, struct run *r, const struct krdma_completion *wc)
{
	uint64_t kind = CKIND(wc->cookie), idx = CINDEX(wc->cookie);
	uint32_t need = a->imm ? 1 : 2, seq;
	const struct note *nt;

	if (wc->status != KRDMA_WC_SUCCESS)
		wc_failed(a, wc);
	switch (kind) {
	case K_NRECV:
		nt = (const struct note *)(a->ctrl + idx * AR_CTRL);
		if (wc->flags & KRDMA_WC_F_IMM)
			seq = wc->imm_data;
		else if (wc->byte_len == sizeof(*nt) && nt->magic == NOTE_MAGIC &&
			 nt->kind == NOTE_DATA)
			seq = nt->seq;
		else
			ar_abort(a, a->left, "rank %d sent a message that is not a notification (%u bytes)",
				 a->left, wc->byte_len);
		if (seq != a->rx_seq || r->notes >= r->nrecv)
			ar_abort(a, a->left, "rank %d notified piece %u, expected %u",
				 a->left, seq, a->rx_seq);
		a->rx_seq++;
		r->notes++;
		post_recv(a, a->lconn, K_NRECV, idx);
		break;
	case K_CRECV:
		nt = (const struct note *)(a->ctrl + idx * AR_CTRL);
		if (wc->byte_len != sizeof(*nt) || nt->magic != NOTE_MAGIC ||
		    nt->kind != NOTE_CREDIT || nt->seq != a->crx_seq ||
		    r->credits >= r->nsend)
			ar_abort(a, a->right, "rank %d sent a bad credit (%u bytes, piece %u, expected %u)",
				 a->right, wc->byte_len, nt->seq, a->crx_seq);
		a->crx_seq++;
		r->credits++;
		post_recv(a, a->rconn, K_CRECV, idx);
		break;
	case K_WRITE:
	case K_NSEND:
		if (++r->sdone[idx] == need)
			r->sent_ok++;
		break;
	case K_CSEND:
		r->cdone[idx] = 1;
		r->csend_ok++;
		break;
	}
}

/* Wait for something on the krdma file or the rendezvous */
static void wait_events(struct ar *a, int fd1, short ev1, int fd2, short ev2,
			const struct run *r)
{
	struct pollfd pfd[AR_MAX_RANKS + 2];
	int idx[AR_MAX_RANKS + 2], np = 0;
	uint64_t t = now_ns(), limit = a->o.e.timeout_s * 1000000000ULL;

	if (t - r->last_progress > limit) {
		/* waiting for data: the left; for credits or room: the right */
		int q = r->processed < r->nrecv && r->notes == r->processed ?
			a->left : a->right;

		ar_abort(a, q, "no progress for %u s during %s: rank %d (%s neighbour) does not answer",
			 a->o.e.timeout_s, a->rv.phase, q, q == a->left ? "left" : "right");
	}
	if (fd1 >= 0) {
		pfd[np].fd = fd1;
		pfd[np].events = ev1;
		idx[np++] = -1;
	}
	if (fd2 >= 0) {
		pfd[np].fd = fd2;
		pfd[np].events = ev2;
		idx[np++] = -1;
	}
	np = rv_poll_add(&a->rv, pfd, idx, np);
	if (poll(pfd, np, 1000) <= 0)
		return;
	rv_poll_check(&a->rv, pfd, idx, np);
}

static void run_krdma(struct ar *a, const struct plan *p, struct run *r)
{
	uint32_t ns = a->o.slots, need = a->imm ? 1 : 2;
	struct krdma_completion wc[64];

	while (r->processed < r->nrecv || r->sent_ok < r->nsend ||
	       r->credits < r->nsend || r->csend_ok < r->nrecv) {
		bool progress = false;
		int n, i;

		/* post pieces: a credit, their source in, the slot's SEND done */
		while (r->next_send < r->nsend &&
		       r->next_send < r->credits + ns) {
			uint32_t j = r->next_send, s, k, nops = 1;
			uint64_t first, cnt;
			struct krdma_op ops[2];

			piece(a, p, p->sbase, p->csend, j, &s, &k, &first, &cnt);
			if (s > 0 && r->processed <= p->rbase[s - 1] + k)
				break;
			if (j >= ns && r->sdone[j - ns] != need)
				break;
			memset(ops, 0, sizeof(ops));
			ops[0].opcode = a->imm ? KRDMA_OP_WRITE_IMM : KRDMA_OP_WRITE;
			ops[0].cookie = COOKIE(K_WRITE, j);
			ops[0].conn = a->rconn;
			ops[0].num_sge = 1;
			ops[0].sge.buf = a->data_h;
			ops[0].sge.offset = first * 4;
			ops[0].sge.length = cnt * 4;
			ops[0].remote = a->rtok;
			ops[0].remote_offset = (uint64_t)(j % ns) * a->o.slot_size;
			ops[0].imm_data = a->tx_seq;
			if (!a->imm) {
				note_send(a, &ops[1], a->rconn, COOKIE(K_NSEND, j),
					  2 * ns + j % ns, NOTE_DATA, a->tx_seq);
				nops = 2;
			}
			submit(a, ops, nops);
			a->tx_seq++;
			r->next_send++;
			progress = true;
		}

		/* consume arrived pieces, hand their slots back */
		while (r->processed < r->notes) {
			uint32_t i2 = r->processed, s, k;
			uint64_t first, cnt;
			struct krdma_op op;

			piece(a, p, p->rbase, p->crecv, i2, &s, &k, &first, &cnt);
			/* the piece we overwrite was sent, and its SEND is done */
			if (s + 1 >= (uint32_t)a->n &&
			    r->sdone[p->sbase[s + 1 - a->n] + k] != need)
				break;
			if (i2 >= ns && !r->cdone[i2 - ns])
				break;
			reduce(p->type, a->data + first * 4,
			       a->slots + (uint64_t)(i2 % ns) * a->o.slot_size,
			       cnt, s + 1 < (uint32_t)a->n);
			note_send(a, &op, a->lconn, COOKIE(K_CSEND, i2),
				  3 * ns + i2 % ns, NOTE_CREDIT, a->ctx_seq);
			submit(a, &op, 1);
			a->ctx_seq++;
			r->processed++;
			progress = true;
		}

		n = krdma_poll_wc(a->kfd, wc, 64, 0);
		if (n < 0 && n != -EINTR)
			ar_abort(a, -1, "cannot poll the completions: %s",
				 strerror(-n));
		for (i = 0; i < n; i++)
			handle_wc(a, r, &wc[i]);
		if (n > 0 || progress)
			r->last_progress = now_ns();
		else
			wait_events(a, a->kfd, POLLIN, -1, 0, r);
	}
}

/*
 * TCP: the same ring and pieces over a socket to each neighbour; the
 * socket's own flow control stands in for the credits
 */

static void tcp_setup(struct ar *a)
{
	struct sockaddr_storage ss;
	struct krdma_addr bound;
	struct rv_msg m;
	socklen_t len;
	int one = 1;
	char as[64];

	snprintf(a->rv.phase, sizeof(a->rv.phase), "the TCP setup");
	a->tlisten = tcp_listen_any(&a->rv.local, &bound);
	if (a->tlisten < 0)
		ar_abort(a, -1, "cannot listen for TCP: %s", strerror(errno));
	memset(&m, 0, sizeof(m));
	m.type = RV_ADDR;
	m.addr = bound;
	rv_exchange(&a->rv, &m, true);
	len = addr_to_sa(&a->rv.all[a->right].addr, &ss);
	a->rsock = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a->rsock < 0 || connect(a->rsock, (struct sockaddr *)&ss, len))
		ar_abort(a, a->right, "cannot connect to rank %d at %s: %s",
			 a->right, krdma_addr_str(&a->rv.all[a->right].addr, as, sizeof(as)),
			 strerror(errno));
	{
		struct pollfd pfd = { .fd = a->tlisten, .events = POLLIN };

		if (poll(&pfd, 1, a->o.e.timeout_s * 1000) <= 0)
			ar_abort(a, a->left, "no connection from rank %d", a->left);
	}
	a->lsock = accept4(a->tlisten, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (a->lsock < 0)
		ar_abort(a, a->left, "accept: %s", strerror(errno));
	close(a->tlisten);
	setsockopt(a->rsock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(a->lsock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	a->data = mmap(NULL, a->data_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	a->slots = mmap(NULL, a->o.slot_size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (a->data == MAP_FAILED || a->slots == MAP_FAILED)
		ar_abort(a, -1, "out of memory");
	snprintf(a->info, sizeof(a->info), "TCP %s",
		 krdma_addr_str(&bound, as, sizeof(as)));
	memset(&m, 0, sizeof(m));
	m.type = RV_TOKEN;
	snprintf(m.text, sizeof(m.text), "%s", a->info);
	rv_exchange(&a->rv, &m, true);
	for (int i = 0; i < a->n; i++)
		snprintf(a->infos[i], sizeof(a->infos[i]), "%.100s", a->rv.all[i].text);
}

static void run_tcp(struct ar *a, const struct plan *p, struct run *r)
{
	while (r->processed < r->nrecv || r->next_send < r->nsend) {
		bool progress = false, want_out = false;
		uint32_t s, k;
		uint64_t first, cnt;
		ssize_t w;

		while (r->next_send < r->nsend) {
			uint32_t j = r->next_send;

			piece(a, p, p->sbase, p->csend, j, &s, &k, &first, &cnt);
			if (s > 0 && r->processed <= p->rbase[s - 1] + k)
				break;
			w = send(a->rsock, a->data + first * 4 + r->soff,
				 cnt * 4 - r->soff, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				want_out = true;
				break;
			}
			if (w < 0)
				ar_abort(a, a->right, "sending to rank %d (right neighbour): %s",
					 a->right, strerror(errno));
			r->soff += w;
			progress = true;
			if (r->soff == cnt * 4) {
				r->sdone[j] = 1;
				r->soff = 0;
				r->next_send++;
			}
		}
		while (r->processed < r->nrecv) {
			uint32_t i = r->processed;

			piece(a, p, p->rbase, p->crecv, i, &s, &k, &first, &cnt);
			if (r->roff < cnt * 4) {
				w = recv(a->lsock, a->slots + r->roff,
					 cnt * 4 - r->roff, MSG_DONTWAIT);
				if (w < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (w == 0)
					ar_abort(a, a->left, "rank %d (left neighbour) closed the connection",
						 a->left);
				if (w < 0)
					ar_abort(a, a->left, "receiving from rank %d (left neighbour): %s",
						 a->left, strerror(errno));
				r->roff += w;
				progress = true;
				continue;
			}
			if (s + 1 >= (uint32_t)a->n &&
			    !r->sdone[p->sbase[s + 1 - a->n] + k])
				break;
			reduce(p->type, a->data + first * 4, a->slots, cnt,
			       s + 1 < (uint32_t)a->n);
			r->roff = 0;
			r->processed++;
			progress = true;
		}
		if (progress) {
			r->last_progress = now_ns();
			continue;
		}
		wait_events(a, r->processed < r->nrecv ? a->lsock : -1, POLLIN,
			    want_out ? a->rsock : -1, POLLOUT, r);
	}
}

/*
 * Output
 */

static void print_header(struct ar *a)
{
	int i;

	if (a->o.e.json)
		return;
	printf("# %s: ring AllReduce (reduce-scatter + all-gather) of %d ranks over %s\n",
	       PROG, a->n, a->o.e.tcp ? "TCP" : "krdma");
	for (i = 0; i < a->n; i++)
		printf("#   rank %3d: %s\n", i, a->infos[i]);
	if (a->o.e.tcp)
		printf("# pieces of %" PRIu64 " bytes; the sockets' flow control\n",
		       a->o.slot_size);
	else
		printf("# pieces of %" PRIu64 " bytes into %u slots per receiver, one credit per slot\n",
		       a->o.slot_size, a->o.slots);
	printf("# iterations %u, warmup %u; time: the slowest rank's mean; busbw = algbw * 2(N-1)/N\n#\n",
	       a->o.e.iters, a->o.e.warmup);
	printf("# %12s %12s %6s %6s %12s %11s %11s %8s %8s\n", "size", "count",
	       "type", "redop", "time", "algbw", "busbw", "#wrong", "verified");
	printf("# %12s %12s %6s %6s %12s %11s %11s %8s %8s\n", "(B)", "(elements)",
	       "", "", "(us)", "(GB/s)", "(GB/s)", "", "");
	fflush(stdout);
}

struct row {
	uint64_t size, count;
	enum dtype type;
	double time_us, algbw, busbw;
	uint64_t wrong;
};

static void print_json(struct ar *a, const struct row *rows, int nrows, bool ok)
{
	int i;

	printf("{");
	json_str("program", PROG, true);
	json_str("mode", a->o.e.tcp ? "tcp" : "krdma", true);
	printf("\"ranks\": %d, \"iters\": %u, \"warmup\": %u, ", a->n, a->o.e.iters,
	       a->o.e.warmup);
	printf("\"piece_bytes\": %" PRIu64 ", ", a->o.slot_size);
	if (!a->o.e.tcp)
		printf("\"slots\": %u, \"flow_control\": \"credits\", ", a->o.slots);
	printf("\"peers\": [");
	for (i = 0; i < a->n; i++) {
		printf("%s{\"rank\": %d, ", i ? ", " : "", i);
		json_str("info", a->infos[i], false);
		printf("}");
	}
	printf("], \"results\": [");
	for (i = 0; i < nrows; i++) {
		const struct row *w = &rows[i];

		printf("%s{\"size\": %" PRIu64 ", \"count\": %" PRIu64 ", ", i ? ", " : "",
		       w->size, w->count);
		json_str("type", type_names[w->type], true);
		json_str("redop", "sum", true);
		printf("\"time_us\": %.3f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, \"wrong\": %" PRIu64 ", \"verified\": %s}",
		       w->time_us, w->algbw, w->busbw, w->wrong,
		       w->wrong ? "false" : "true");
	}
	printf("], \"verified\": %s}\n", ok ? "true" : "false");
}

/*
 * Options
 */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--root ADDR:PORT] [--rank R] [--size N] [OPTIONS]\n"
		"Ring AllReduce (sum) among N processes over krdma (RDMA WRITE into the\n"
		"neighbour's granted slots, WRITE_IMM or SEND notifications, credits) or TCP;\n"
		"every element verified. Rank 0 prints the results.\n\n"
		"  --root ADDR:PORT     rank 0's rendezvous address (it listens there);\n"
		"                       default MASTER_ADDR:MASTER_PORT (port 29500)\n"
		"  --rank R             this rank (default RANK, OMPI_COMM_WORLD_RANK,\n"
		"                       PMI_RANK or SLURM_PROCID)\n"
		"  --size N             number of ranks, 2 to %d (default WORLD_SIZE,\n"
		"                       OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS)\n"
		"  -a, --addr IP        local address to listen on (default: the one\n"
		"                       that reaches rank 0; its RDMA device is used)\n"
		"  -m, --mode MODE      krdma (default) or tcp (--tcp: -m tcp)\n"
		"  -b, --minbytes SIZE  smallest size (default 64K; K, M, G suffixes)\n"
		"  -e, --maxbytes SIZE  largest size (default: the smallest)\n"
		"  -f, --stepfactor F   multiply the size by F between rows (default 2)\n"
		"  -d, --datatype T     float, int32 or all (default float)\n"
		"  -n, --iters N        timed iterations per size (default 20)\n"
		"  -w, --warmup_iters N untimed ones first (default 5)\n"
		"  --slots S            slots (and credits) per receiver (default %d)\n"
		"  --slot-size SIZE     bytes of a piece and a slot (default 256K)\n"
		"  --notify HOW         auto (default: WRITE_IMM, SEND on iWARP), imm, send\n"
		"  -t, --timeout SECS   give up after SECS without progress (default %d)\n"
		"  -j, --json           print JSON\n"
		"  --inject-error       for tests: rank 1 adds 1 to one of its inputs in\n"
		"                       the first iteration; every rank must report it\n"
		"  -h, --help\n\n"
		"Exit status: 0 all verified, 1 a wrong element or a failure, 2 bad usage.\n",
		AR_MAX_RANKS, AR_DEF_SLOTS, AR_DEF_TIMEOUT_S);
}

static int parse_opts(int argc, char *argv[], struct opts *o, struct rv *rv)
{
	static const struct option lo[] = {
		EX_LONG_OPTIONS,
		{ "datatype", required_argument, NULL, 'd' },
		{ "slots", required_argument, NULL, 'S' },
		{ "slot-size", required_argument, NULL, 'Z' },
		{ NULL, 0, NULL, 0 }
	};
	long l;
	int c, ret;

	memset(o, 0, sizeof(*o));
	ex_opts_init(&o->e, AR_DEF_TIMEOUT_S);
	o->e.size_lo = 4;
	o->e.size_hi = 4ULL << 30;
	o->e.size_align = 1;
	o->e.size_text = "a size from 4 to 4G";
	o->types = 1 << T_FLOAT;
	o->slots = AR_DEF_SLOTS;
	o->slot_size = AR_DEF_SLOT_SIZE;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:" EX_SHORT_OPTIONS, lo, NULL)) != -1) {
		ret = ex_opt(c, argv, &o->e);
		if (ret == 0)
			continue;
		if (ret == 2)
			return 2;
		switch (c) {
		case 'd':
			if (!strcmp(optarg, "float"))
				o->types = 1 << T_FLOAT;
			else if (!strcmp(optarg, "int32"))
				o->types = 1 << T_INT32;
			else if (!strcmp(optarg, "all"))
				o->types = 1 << T_FLOAT | 1 << T_INT32;
			else
				return bad("-d: float, int32 or all, not '%s'", optarg);
			break;
		case 'S':
			if (parse_int(optarg, 1, AR_MAX_SLOTS, &l))
				return bad("--slots: 1 to %d, not '%s'", AR_MAX_SLOTS, optarg);
			o->slots = l;
			break;
		case 'Z':
			if (parse_size(optarg, &o->slot_size) || o->slot_size < 4 ||
			    o->slot_size > AR_MAX_SLOT_SIZE || o->slot_size % 4)
				return bad("--slot-size: a multiple of 4 from 4 to 64M, not '%s'",
					   optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		}
	}
	return ex_opts_end(argc, argv, &o->e, AR_MAX_RANKS, AR_DEF_PORT, rv);
}

/* One size and type: warmup + iters, each verified; the row on rank 0 */
static bool one_size(struct ar *a, uint64_t size, enum dtype type, struct row *row)
{
	struct plan *p = calloc(1, sizeof(*p));
	struct run r;
	uint64_t sum = 0, wrong = 0, maxsum = 0;
	unsigned int it;
	struct rv_msg m;

	if (!p)
		ar_abort(a, -1, "out of memory");
	plan_make(a, p, size / 4, type);
	memset(&r, 0, sizeof(r));
	r.nsend = p->sbase[p->nsteps];
	r.nrecv = p->rbase[p->nsteps];
	r.sdone = calloc(r.nsend + 1, 1);
	r.cdone = calloc(r.nrecv + 1, 1);
	if (!r.sdone || !r.cdone)
		ar_abort(a, -1, "out of memory");
	for (it = 0; it < a->o.e.warmup + a->o.e.iters; it++) {
		uint64_t t0, t1;
		uint64_t w;

		snprintf(a->rv.phase, sizeof(a->rv.phase),
			 "the AllReduce of %" PRIu64 " bytes (%s), iteration %u",
			 size, type_names[type], it + 1);
		fill_input(a, p, it);
		memset(&m, 0, sizeof(m));
		m.type = RV_BARRIER;
		rv_exchange(&a->rv, &m, false);
		r.next_send = r.sent_ok = r.credits = r.notes = 0;
		r.processed = r.csend_ok = 0;
		r.soff = r.roff = 0;
		memset(r.sdone, 0, r.nsend + 1);
		memset(r.cdone, 0, r.nrecv + 1);
		t0 = now_ns();
		r.last_progress = t0;
		if (a->o.e.tcp)
			run_tcp(a, p, &r);
		else
			run_krdma(a, p, &r);
		t1 = now_ns();
		w = verify(a, p, it);
		wrong += w;
		if (it >= a->o.e.warmup)
			sum += t1 - t0;
	}
	memset(&m, 0, sizeof(m));
	m.type = RV_RESULT;
	m.v[0] = sum;
	m.v[1] = wrong;
	if (wrong)
		snprintf(m.text, sizeof(m.text), "%s", a->first_wrong);
	rv_exchange(&a->rv, &m, true);
	free(r.sdone);
	free(r.cdone);
	free(p);
	if (a->rank)
		return !wrong;

	ex_results(&a->rv, "elements", &maxsum, &wrong);
	row->size = size / 4 * 4;
	row->count = size / 4;
	row->type = type;
	row->time_us = maxsum / 1e3 / a->o.e.iters;
	row->algbw = row->size / (row->time_us * 1e3);
	row->busbw = row->algbw * 2 * (a->n - 1) / a->n;
	row->wrong = wrong;
	if (!a->o.e.json) {
		printf("  %12" PRIu64 " %12" PRIu64 " %6s %6s %12.1f %11.4f %11.4f %8" PRIu64 " %8s\n",
		       row->size, row->count, type_names[type], "sum", row->time_us,
		       row->algbw, row->busbw, wrong, wrong ? "NO" : "yes");
		fflush(stdout);
	}
	return !wrong;
}

int main(int argc, char *argv[])
{
	struct ar *a = calloc(1, sizeof(*a));
	struct row rows[128];
	struct rv_msg m;
	uint64_t size;
	int nrows = 0, t, ret;
	bool ok = true;

	if (!a)
		return 1;
	ret = parse_opts(argc, argv, &a->o, &a->rv);
	if (ret)
		return ret;
	a->rank = a->rv.rank;
	a->n = a->rv.n;
	a->left = (a->rank + a->n - 1) % a->n;
	a->right = (a->rank + 1) % a->n;
	a->lsock = a->rsock = a->tlisten = a->kfd = -1;
	a->data_len = a->o.e.max_bytes < 4096 ? 4096 : a->o.e.max_bytes;
	hello_fill(a, &m);
	if (ex_start(&a->rv, &a->o.e, "mode, sizes, types, iterations or slots", &m))
		return 1;

	if (a->o.e.tcp)
		tcp_setup(a);
	else
		krdma_setup(a);
	if (a->rank == 0)
		print_header(a);

	for (size = a->o.e.min_bytes; size <= a->o.e.max_bytes; size *= a->o.e.factor) {
		for (t = 0; t <= T_INT32; t++) {
			if (!(a->o.types & 1 << t))
				continue;
			if (nrows == (int)ARRAY_SIZE(rows))
				break;
			ok &= one_size(a, size, t, &rows[nrows]);
			nrows++;
		}
	}
	ex_end(&a->rv);
	if (a->rank == 0) {
		int i;

		for (i = 0; i < nrows; i++)
			ok &= !rows[i].wrong;
		if (a->o.e.json)
			print_json(a, rows, nrows, ok);
		else
			printf("# %s: %s\n", PROG, ok ? "every element of every rank verified" :
			       "WRONG RESULTS (see above)");
	}
	fflush(stdout);
	/* close() ends the connections, revokes the grant, unpins */
	if (a->kfd >= 0)
		close(a->kfd);
	return ok ? 0 : 1;
}
