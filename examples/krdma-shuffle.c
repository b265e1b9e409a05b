// SPDX-License-Identifier: GPL-2.0
/*
 * krdma-shuffle: the shuffle of MapReduce and Spark, many-to-one: M
 * mappers each write a partition into each of R reducers, over
 * /dev/krdma through libkrdma (RDMA WRITE into the reducer's granted
 * window, and a notification) or over TCP; every byte verified by the
 * reducers, the aggregate bandwidth printed.
 *
 * Roles by rank: ranks 0 to R - 1 are the reducers (--reducers R),
 * ranks R to N - 1 the mappers (mapper m is rank R + m). Rank 0, a
 * reducer, is also the rendezvous (common.c).
 *
 * Over krdma:
 * - objects: each reducer listens; each mapper connects to every reducer
 *   (one connection per mapper and reducer). The mappers connect one
 *   after the other (a barrier of the rendezvous between two), so the
 *   connection a reducer accepts is the one of the mapper whose turn it
 *   is: nothing else is needed to tell them apart;
 * - a reducer registers one buffer of M regions (one per mapper, of the
 *   largest partition size each) and grants region m to mapper m only,
 *   REMOTE_WRITE, on mapper m's connection: a mapper can write nowhere
 *   else. The tokens go to the mappers over the rendezvous (one exchange
 *   per mapper);
 * - a mapper registers one source buffer (R partitions) and, per
 *   iteration, posts to each reducer one WRITE of the partition and a
 *   notification: WRITE_IMM on InfiniBand and RoCE, a SEND after the
 *   WRITE on iWARP (no immediate data there), chosen from the
 *   connection's device as krdma-allreduce does;
 * - flow control: a reducer posts one RECV per mapper for an iteration
 *   before the barrier that starts it; the mappers write only after the
 *   barrier, and the next barrier comes only after every reducer has
 *   verified what it received. A region is therefore never written
 *   while its reducer reads it, and every notification finds its RECV
 *   (iWARP has no RNR retry).
 *
 * The time of an iteration is a reducer's, from the barrier to the last
 * notification in; the aggregate bandwidth is M x R x the partition
 * size over the slowest reducer's mean time.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define PROG			"krdma-shuffle"
#define SH_DEF_PORT		29500
#define SH_DEF_TIMEOUT_S	30
#define SH_MAX_SIZE		(1ULL << 30)	/* of a partition */
#define SH_CTRL			64		/* bytes of a control slot */
#define SH_TAG			0x5348		/* "SH": HELLO v[5], not allreduce's */

/* Completion cookies (COOKIE()): the kinds, the peer's index below */
#define K_RECV		1ULL	/* reducer: RECV of mapper I's notification */
#define K_WRITE		2ULL	/* mapper: WRITE(_IMM) to reducer I */
#define K_NSEND		3ULL	/* mapper: SEND notification to reducer I */

#define NOTE_DATA	1

const char *const ex_prog = PROG;

struct opts {
	struct ex_opts e;		/* the options of common.h */
	int reducers;
};

struct sh {
	struct opts o;
	struct rv rv;
	int rank, n, R, M;
	bool reducer;
	int id;				/* reducer or mapper number */
	int npeers;			/* M for a reducer, R for a mapper */
	/* krdma */
	int kfd;
	uint32_t listener;
	uint32_t *conn;			/* per peer */
	bool *imm;			/* mapper: WRITE_IMM to reducer r */
	struct krdma_token *tok;	/* mapper: reducer r's window for it */
	struct krdma_addr *raddr;	/* mapper: where reducer r listens */
	uint8_t *buf, *ctrl;
	uint32_t buf_h, ctrl_h;
	/* TCP */
	int *socks;			/* per peer */
	uint64_t *off;			/* per peer: bytes moved this iteration */
	/* an iteration */
	uint32_t seq;			/* its number, the same on every rank */
	int *pend;			/* per peer: what is still to come */
	int left;			/* the sum of pend[] */
	uint64_t last_progress;
	char info[128];
	char infos[RV_MAX_RANKS][128];
	char first_wrong[256];
};

static int g_reducers;

static void role(int rank, char *buf, size_t len)
{
	if (rank < g_reducers)
		snprintf(buf, len, " (reducer %d)", rank);
	else
		snprintf(buf, len, " (mapper %d)", rank - g_reducers);
}

/* The rank of peer @i: a reducer's peers are mappers and conversely */
static int peer_rank(const struct sh *s, int i)
{
	return s->reducer ? s->R + i : i;
}

static const char *peer_kind(const struct sh *s)
{
	return s->reducer ? "mapper" : "reducer";
}

#define sh_abort(s, blame, ...) rv_abort(&(s)->rv, blame, __VA_ARGS__)

/*
 * Data: word w of mapper m's partition for reducer r in iteration seq
 */

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t part_seed(int m, int r, uint32_t seq)
{
	return mix64((uint64_t)m << 42 ^ (uint64_t)r << 21 ^ seq);
}

static void fill_part(uint64_t *p, uint64_t size, int m, int r, uint32_t seq)
{
	uint64_t seed = part_seed(m, r, seq), w;

	for (w = 0; w < size / 8; w++)
		p[w] = mix64(seed + w);
}

/* Wrong bytes of mapper m's partition at @p */
static uint64_t check_part(struct sh *s, const uint64_t *p, uint64_t size,
			   int m, uint32_t seq, unsigned int it)
{
	uint64_t seed = part_seed(m, s->id, seq), w, wrong = 0;

	for (w = 0; w < size / 8; w++) {
		uint64_t want = mix64(seed + w), x = p[w] ^ want;
		int b;

		if (!x)
			continue;
		for (b = 0; b < 8; b++)
			if (x >> (8 * b) & 0xff)
				wrong++;
		if (!s->first_wrong[0])
			snprintf(s->first_wrong, sizeof(s->first_wrong),
				 "partition of %" PRIu64 " bytes from mapper %d (rank %d), iteration %u: word at byte %" PRIu64 " is %016" PRIx64 ", not %016" PRIx64,
				 size, m, s->R + m, it, w * 8, p[w], want);
	}
	return wrong;
}

/*
 * krdma
 */

static void submit(struct sh *s, struct krdma_op *ops, uint32_t n, int peer)
{
	char buf[96];
	int ret, q = peer_rank(s, peer);

	ret = submit_wait(s->kfd, &ops, &n);
	if (!ret)
		return;
	/* a connection that went down is the peer's doing; else ours */
	sh_abort(s, ret == -ENOTCONN || ret == -ECONNRESET ? q : -1,
		 "%s to rank %d (%s %d) refused: %s%s",
		 krdma_opcode_str(ops->opcode), q, peer_kind(s), peer,
		 strerror(-ret), conn_why(s->kfd, ops->conn, buf, sizeof(buf)));
}

/*
 * Reducer: mapper @mp's connection, from the krdma listener (@tl < 0)
 * or the TCP one; watching the rendezvous meanwhile, where a mapper
 * that failed to connect says so
 */
static void accept_mapper(struct sh *s, int tl, int mp)
{
	uint64_t deadline = now_ns() + s->o.e.timeout_s * 1000000000ULL;
	struct pollfd pfd[RV_MAX_RANKS + 1];
	int idx[RV_MAX_RANKS + 1], np, ret = -ETIMEDOUT;

	while (now_ns() < deadline) {
		np = 0;
		if (tl >= 0) {
			pfd[0].fd = tl;
			pfd[0].events = POLLIN;
			idx[np++] = -1;
		}
		np = rv_poll_add(&s->rv, pfd, idx, np);
		if (poll(pfd, np, tl >= 0 ? 200 : 0) > 0)
			rv_poll_check(&s->rv, pfd, idx, np);
		if (tl >= 0) {
			s->socks[mp] = accept4(tl, NULL, NULL, SOCK_CLOEXEC);
			if (s->socks[mp] >= 0)
				return;
			ret = -errno;
			if (ret == -EAGAIN || ret == -EINTR)
				continue;
			break;
		}
		ret = krdma_accept_conn(s->kfd, s->listener, 0, 200, &s->conn[mp]);
		if (!ret)
			return;
		if (ret != -ETIMEDOUT && ret != -EINTR)
			break;
	}
	sh_abort(s, s->R + mp, "no connection from rank %d (mapper %d): %s",
		 s->R + mp, mp, strerror(-ret));
}

/* Mapper: connect to reducer @i (krdma, or TCP when @tcp) */
static void connect_reducer(struct sh *s, int i)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char as[64];
	int ret;

	if (!s->o.e.tcp) {
		ret = krdma_connect_to(s->kfd, &s->raddr[i], 0, &s->conn[i]);
		if (ret)
			sh_abort(s, i, "cannot connect to rank %d (reducer %d) at %s: %s; %s",
				 i, i, krdma_addr_str(&s->raddr[i], as, sizeof(as)),
				 strerror(-ret), krdma_conn_strerror_hint(ret) ?: "");
		return;
	}
	len = addr_to_sa(&s->raddr[i], &ss);
	s->socks[i] = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->socks[i] < 0 || connect(s->socks[i], (struct sockaddr *)&ss, len))
		sh_abort(s, i, "cannot connect to rank %d (reducer %d) at %s: %s",
			 i, i, krdma_addr_str(&s->raddr[i], as, sizeof(as)),
			 strerror(errno));
}

/*
 * Every rank gives @m (a reducer its address) and takes the reducers'
 * addresses and the ranks' infos; then the mappers connect to every
 * reducer one after the other, a barrier between two: the connection a
 * reducer accepts (from its TCP listener @tl, or its krdma one) is the
 * one of the mapper whose turn it is
 */
static void connect_in_turn(struct sh *s, struct rv_msg *m, int tl)
{
	int i, mp;

	m->type = RV_ADDR;
	rv_exchange(&s->rv, m, true);
	for (i = 0; i < s->n; i++)
		snprintf(s->infos[i], sizeof(s->infos[i]), "%.100s", s->rv.all[i].text);
	for (i = 0; i < s->R && !s->reducer; i++)
		s->raddr[i] = s->rv.all[i].addr;

	for (mp = 0; mp < s->M; mp++) {
		snprintf(s->rv.phase, sizeof(s->rv.phase),
			 "the connections of mapper %d (rank %d)", mp, s->R + mp);
		if (!s->reducer && s->id == mp) {
			for (i = 0; i < s->R; i++)
				connect_reducer(s, i);
		} else if (s->reducer) {
			accept_mapper(s, tl, mp);
		}
		memset(m, 0, sizeof(*m));
		m->type = RV_BARRIER;
		rv_exchange(&s->rv, m, false);
	}
}

static void krdma_setup(struct sh *s)
{
	uint64_t max = s->o.e.max_bytes;
	struct krdma_dev_query dq;
	struct krdma_addr bound;
	struct rv_msg m;
	char as[64];
	int i, mp, ret;

	snprintf(s->rv.phase, sizeof(s->rv.phase), "the krdma setup");
	s->kfd = krdma_start(&s->rv);
	memset(&m, 0, sizeof(m));
	if (s->reducer) {
		ret = krdma_listen_on(s->kfd, &s->rv.local, s->M, &s->listener,
				      &bound);
		if (ret)
			sh_abort(s, -1, "cannot listen on %s with krdma: %s; %s",
				 krdma_addr_str(&s->rv.local, as, sizeof(as)),
				 strerror(-ret),
				 krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN, ret) ?: "");
		m.addr = bound;
	}
	connect_in_turn(s, &m, -1);
	if (s->reducer)
		krdma_destroy_handle(s->kfd, s->listener);

	ret = conn_device(s->kfd, s->conn[0], &dq);
	if (ret)
		sh_abort(s, -1, "cannot query the connection's device: %s",
			 strerror(-ret));
	if (s->reducer) {
		snprintf(s->info, sizeof(s->info), "%s %s", (const char *)dq.name,
			 krdma_transport_str(dq.transport));
		s->buf = map_buf(&s->rv, s->kfd, s->M * max,
				 KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_WRITE,
				 &s->buf_h);
	} else {
		/* WRITE_IMM unless the reducer's connection is iWARP */
		for (i = 0; i < s->R; i++) {
			ret = conn_device(s->kfd, s->conn[i], &dq);
			if (ret)
				sh_abort(s, -1, "cannot query the connection's device: %s",
					 strerror(-ret));
			s->imm[i] = s->o.e.notify == 1 ||
				    (s->o.e.notify == 0 &&
				     dq.transport != KRDMA_TRANSPORT_IWARP);
		}
		snprintf(s->info, sizeof(s->info), "%s %s %s", (const char *)dq.name,
			 krdma_transport_str(dq.transport),
			 s->imm[0] ? "WRITE_IMM" : "WRITE+SEND");
		s->buf = map_buf(&s->rv, s->kfd, s->R * max, 0, &s->buf_h);
	}
	s->ctrl = map_buf(&s->rv, s->kfd, (uint64_t)s->npeers * SH_CTRL,
			  KRDMA_ACCESS_LOCAL_WRITE, &s->ctrl_h);

	/* each mapper's token from every reducer, one exchange per mapper */
	for (mp = 0; mp < s->M; mp++) {
		uint32_t gh;

		snprintf(s->rv.phase, sizeof(s->rv.phase),
			 "the tokens of mapper %d (rank %d)", mp, s->R + mp);
		memset(&m, 0, sizeof(m));
		m.type = RV_TOKEN;
		snprintf(m.text, sizeof(m.text), "%s", s->info);
		if (s->reducer) {
			ret = krdma_grant_window(s->kfd, s->conn[mp], s->buf_h,
						 mp * max, max,
						 KRDMA_ACCESS_REMOTE_WRITE, &gh,
						 &m.token);
			if (ret)
				sh_abort(s, -1, "cannot grant a window to rank %d (mapper %d): %s; %s",
					 s->R + mp, mp, strerror(-ret),
					 krdma_cmd_strerror_hint(KRDMA_IOC_GRANT, ret) ?: "");
		}
		rv_exchange(&s->rv, &m, true);
		if (!s->reducer && s->id == mp)
			for (i = 0; i < s->R; i++)
				s->tok[i] = s->rv.all[i].token;
	}
	for (i = 0; i < s->n; i++)
		snprintf(s->infos[i], sizeof(s->infos[i]), "%.100s", s->rv.all[i].text);
}

/* Wait for the krdma file or sockets (@ev per peer, 0: none) and the rendezvous */
static void wait_events(struct sh *s, int fd, const short *ev)
{
	struct pollfd pfd[2 * RV_MAX_RANKS + 1];
	int idx[2 * RV_MAX_RANKS + 1], np = 0, i;
	uint64_t t = now_ns();

	if (t - s->last_progress > s->o.e.timeout_s * 1000000000ULL) {
		/* the first peer that has not answered */
		for (i = 0; i < s->npeers - 1; i++)
			if (s->pend[i])
				break;
		sh_abort(s, peer_rank(s, i), "no progress for %u s during %s: rank %d (%s %d) does not answer",
			 s->o.e.timeout_s, s->rv.phase, peer_rank(s, i), peer_kind(s), i);
	}
	if (fd >= 0) {
		pfd[np].fd = fd;
		pfd[np].events = POLLIN;
		idx[np++] = -1;
	}
	for (i = 0; ev && i < s->npeers; i++) {
		if (!ev[i])
			continue;
		pfd[np].fd = s->socks[i];
		pfd[np].events = ev[i];
		idx[np++] = -1;
	}
	np = rv_poll_add(&s->rv, pfd, idx, np);
	if (poll(pfd, np, 1000) <= 0)
		return;
	rv_poll_check(&s->rv, pfd, idx, np);
}

static void __noreturn wc_failed(struct sh *s, const struct krdma_completion *wc)
{
	int peer = CINDEX(wc->cookie), q = peer_rank(s, peer);
	char buf[96];

	sh_abort(s, q, "%s with rank %d (%s %d) failed: %s%s",
		 krdma_opcode_str(wc->opcode), q, peer_kind(s), peer,
		 krdma_wc_status_str(wc->status),
		 conn_why(s->kfd, wc->conn, buf, sizeof(buf)));
}

static void handle_wc(struct sh *s, const struct krdma_completion *wc)
{
	int peer = CINDEX(wc->cookie);
	const struct note *nt;
	uint32_t seq;

	if (wc->status != KRDMA_WC_SUCCESS)
		wc_failed(s, wc);
	if (CKIND(wc->cookie) != K_RECV) {
		s->pend[peer]--;	/* a mapper's WRITE or SEND */
		s->left--;
		return;
	}
	nt = (const struct note *)(s->ctrl + (uint64_t)peer * SH_CTRL);
	if (wc->flags & KRDMA_WC_F_IMM)
		seq = wc->imm_data;
	else if (wc->byte_len == sizeof(*nt) && nt->magic == NOTE_MAGIC &&
		 nt->kind == NOTE_DATA)
		seq = nt->seq;
	else
		sh_abort(s, s->R + peer, "rank %d (mapper %d) sent a message that is not a notification (%u bytes)",
			 s->R + peer, peer, wc->byte_len);
	if (seq != s->seq || !s->pend[peer])
		sh_abort(s, s->R + peer, "rank %d (mapper %d) notified iteration %u, expected %u",
			 s->R + peer, peer, seq, s->seq);
	s->pend[peer] = 0;
	s->left--;
}

/* Reducer: a RECV per mapper for the next iteration, before its barrier */
static void krdma_arm(struct sh *s)
{
	struct krdma_op op;
	int i;

	for (i = 0; i < s->M; i++) {
		fill_recv(&op, s->conn[i], COOKIE(K_RECV, i), s->ctrl_h,
			  (uint64_t)i * SH_CTRL, SH_CTRL);
		submit(s, &op, 1, i);
	}
}

static void krdma_iteration(struct sh *s, uint64_t size)
{
	struct krdma_completion wc[64];
	int i, n;

	s->left = s->npeers;
	for (i = 0; i < s->npeers; i++)
		s->pend[i] = 1;
	if (!s->reducer) {
		for (i = 0; i < s->R; i++) {
			struct krdma_op ops[2];
			uint32_t nops = 1;

			memset(ops, 0, sizeof(ops));
			ops[0].opcode = s->imm[i] ? KRDMA_OP_WRITE_IMM : KRDMA_OP_WRITE;
			ops[0].cookie = COOKIE(K_WRITE, i);
			ops[0].conn = s->conn[i];
			ops[0].num_sge = 1;
			ops[0].sge.buf = s->buf_h;
			ops[0].sge.offset = i * size;
			ops[0].sge.length = size;
			ops[0].remote = s->tok[i];
			ops[0].remote_offset = 0;
			ops[0].imm_data = s->seq;
			if (!s->imm[i]) {
				fill_note_send(&ops[1], s->conn[i], COOKIE(K_NSEND, i),
					       s->ctrl_h, s->ctrl,
					       (uint64_t)i * SH_CTRL, NOTE_DATA,
					       s->seq);
				nops = 2;
			}
			submit(s, ops, nops, i);
			s->pend[i] = nops;
			s->left += nops - 1;
		}
	}
	while (s->left > 0) {
		n = krdma_poll_wc(s->kfd, wc, ARRAY_SIZE(wc), 0);
		if (n < 0 && n != -EINTR)
			sh_abort(s, -1, "cannot poll the completions: %s",
				 strerror(-n));
		for (i = 0; i < n; i++)
			handle_wc(s, &wc[i]);
		if (n > 0)
			s->last_progress = now_ns();
		else
			wait_events(s, s->kfd, NULL);
	}
}

/*
 * TCP: the same partitions over one socket per mapper and reducer
 */

static void tcp_setup(struct sh *s)
{
	struct krdma_addr bound;
	struct rv_msg m;
	int i, one = 1, tl = -1;
	char as[64];

	snprintf(s->rv.phase, sizeof(s->rv.phase), "the TCP setup");
	memset(&m, 0, sizeof(m));
	if (s->reducer) {
		tl = tcp_listen_any(&s->rv.local, &bound);
		if (tl >= 0 && fcntl(tl, F_SETFL, O_NONBLOCK))
			tl = -1;
		if (tl < 0)
			sh_abort(s, -1, "cannot listen for TCP: %s", strerror(errno));
		m.addr = bound;
		snprintf(s->info, sizeof(s->info), "TCP %s",
			 krdma_addr_str(&bound, as, sizeof(as)));
	} else {
		snprintf(s->info, sizeof(s->info), "TCP");
	}
	snprintf(m.text, sizeof(m.text), "%s", s->info);
	connect_in_turn(s, &m, tl);
	if (tl >= 0)
		close(tl);
	for (i = 0; i < s->npeers; i++)
		setsockopt(s->socks[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->buf = mmap(NULL, s->npeers * s->o.e.max_bytes, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (s->buf == MAP_FAILED)
		sh_abort(s, -1, "cannot allocate %" PRIu64 " bytes",
			 s->npeers * s->o.e.max_bytes);
}

static void tcp_iteration(struct sh *s, uint64_t size)
{
	short ev[RV_MAX_RANKS];
	int i;

	for (i = 0; i < s->npeers; i++) {
		s->off[i] = 0;
		s->pend[i] = 1;
	}
	s->left = s->npeers;
	while (s->left > 0) {
		bool progress = false;

		for (i = 0; i < s->npeers; i++) {
			uint8_t *p = s->buf + (s->reducer ? i * s->o.e.max_bytes : i * size);
			ssize_t w;

			ev[i] = 0;
			if (s->off[i] == size)
				continue;
			if (s->reducer)
				w = recv(s->socks[i], p + s->off[i], size - s->off[i],
					 MSG_DONTWAIT);
			else
				w = send(s->socks[i], p + s->off[i], size - s->off[i],
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				ev[i] = s->reducer ? POLLIN : POLLOUT;
				continue;
			}
			if (w == 0 && s->reducer)
				sh_abort(s, s->R + i, "rank %d (mapper %d) closed the connection",
					 s->R + i, i);
			if (w < 0)
				sh_abort(s, peer_rank(s, i), "%s rank %d (%s %d): %s",
					 s->reducer ? "receiving from" : "sending to",
					 peer_rank(s, i), peer_kind(s), i, strerror(errno));
			s->off[i] += w;
			progress = true;
			if (s->off[i] == size) {
				s->pend[i] = 0;
				s->left--;
			}
		}
		if (progress)
			s->last_progress = now_ns();
		else if (s->left)
			wait_events(s, -1, ev);
	}
}

/*
 * Output
 */

struct row {
	uint64_t size, bytes;
	double time_us, aggbw;
	uint64_t wrong;
};

static void print_header(struct sh *s)
{
	char r[48];
	int i;

	if (s->o.e.json)
		return;
	printf("# %s: %d mappers write a partition into each of %d reducers over %s\n",
	       PROG, s->M, s->R, s->o.e.tcp ? "TCP" : "krdma");
	for (i = 0; i < s->n; i++) {
		role(i, r, sizeof(r));
		printf("#   rank %3d%-14s: %s\n", i, r, s->infos[i]);
	}
	printf("# iterations %u, warmup %u; time: the slowest reducer's mean, from the start to its last partition in;\n",
	       s->o.e.iters, s->o.e.warmup);
	printf("# aggregate bandwidth = mappers x reducers x partition size / time\n#\n");
	printf("# %12s %12s %12s %11s %10s %8s\n", "partition", "total", "time",
	       "aggbw", "#wrong", "verified");
	printf("# %12s %12s %12s %11s %10s %8s\n", "(B)", "(B)", "(us)", "(GB/s)",
	       "(B)", "");
	fflush(stdout);
}

static void print_json(struct sh *s, const struct row *rows, int nrows, bool ok)
{
	char r[48];
	int i;

	printf("{");
	json_str("program", PROG, true);
	json_str("mode", s->o.e.tcp ? "tcp" : "krdma", true);
	printf("\"ranks\": %d, \"mappers\": %d, \"reducers\": %d, \"iters\": %u, \"warmup\": %u, ",
	       s->n, s->M, s->R, s->o.e.iters, s->o.e.warmup);
	printf("\"peers\": [");
	for (i = 0; i < s->n; i++) {
		role(i, r, sizeof(r));
		r[strlen(r) - 1] = '\0';	/* " (mapper 1)" -> "mapper 1" */
		printf("%s{\"rank\": %d, ", i ? ", " : "", i);
		json_str("role", r + 2, true);
		json_str("info", s->infos[i], false);
		printf("}");
	}
	printf("], \"results\": [");
	for (i = 0; i < nrows; i++) {
		const struct row *w = &rows[i];

		printf("%s{\"part_bytes\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"time_us\": %.3f, \"aggbw_gbs\": %.6f, \"wrong\": %" PRIu64 ", \"verified\": %s}",
		       i ? ", " : "", w->size, w->bytes, w->time_us, w->aggbw,
		       w->wrong, w->wrong ? "false" : "true");
	}
	printf("], \"verified\": %s}\n", ok ? "true" : "false");
}

/* One partition size: warmup + iters, each verified; the row on rank 0 */
static bool one_size(struct sh *s, uint64_t size, struct row *row)
{
	uint64_t sum = 0, wrong = 0, maxsum = 0;
	unsigned int it;
	struct rv_msg m;
	int i;

	for (it = 0; it < s->o.e.warmup + s->o.e.iters; it++) {
		uint64_t t0, t1;

		s->seq++;
		snprintf(s->rv.phase, sizeof(s->rv.phase),
			 "the shuffle of %" PRIu64 "-byte partitions, iteration %u",
			 size, it + 1);
		if (s->reducer) {
			if (!s->o.e.tcp)
				krdma_arm(s);
		} else {
			for (i = 0; i < s->R; i++)
				fill_part((uint64_t *)(s->buf + i * size), size,
					  s->id, i, s->seq);
			/* one byte wrong: reducer 0 must see it */
			if (s->o.e.inject && s->id == 0 && it == 0)
				s->buf[size / 2] ^= 0x5a;
		}
		memset(&m, 0, sizeof(m));
		m.type = RV_BARRIER;
		rv_exchange(&s->rv, &m, false);
		t0 = now_ns();
		s->last_progress = t0;
		if (s->o.e.tcp)
			tcp_iteration(s, size);
		else
			krdma_iteration(s, size);
		t1 = now_ns();
		if (s->reducer)
			for (i = 0; i < s->M; i++)
				wrong += check_part(s, (const uint64_t *)(s->buf + i * s->o.e.max_bytes),
						    size, i, s->seq, it);
		if (it >= s->o.e.warmup)
			sum += t1 - t0;
	}
	memset(&m, 0, sizeof(m));
	m.type = RV_RESULT;
	m.v[0] = s->reducer ? sum : 0;
	m.v[1] = wrong;
	if (wrong)
		snprintf(m.text, sizeof(m.text), "%.180s", s->first_wrong);
	rv_exchange(&s->rv, &m, true);
	if (s->rank) {
		/* the reducers' verdict is every rank's */
		for (i = 0; i < s->n; i++)
			wrong += s->rv.all[i].v[1];
		return !wrong;
	}

	ex_results(&s->rv, "bytes", &maxsum, &wrong);
	row->size = size;
	row->bytes = (uint64_t)s->M * s->R * size;
	row->time_us = maxsum / 1e3 / s->o.e.iters;
	row->aggbw = row->bytes / (row->time_us * 1e3);
	row->wrong = wrong;
	if (!s->o.e.json) {
		printf("  %12" PRIu64 " %12" PRIu64 " %12.1f %11.4f %10" PRIu64 " %8s\n",
		       row->size, row->bytes, row->time_us, row->aggbw, wrong,
		       wrong ? "NO" : "yes");
		fflush(stdout);
	}
	return !wrong;
}

/*
 * Options
 */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--root ADDR:PORT] [--rank R] [--size N] [--reducers R] [OPTIONS]\n"
		"Shuffle: M = N - R mappers each write a partition into each of R reducers\n"
		"over krdma (RDMA WRITE into the reducer's granted window, WRITE_IMM or SEND\n"
		"notifications) or TCP; reducers verify every byte. Ranks 0 to R-1 are the\n"
		"reducers, R to N-1 the mappers. Rank 0 prints the results.\n\n"
		"  --root ADDR:PORT     rank 0's rendezvous address (it listens there);\n"
		"                       default MASTER_ADDR:MASTER_PORT (port %d)\n"
		"  --rank R             this rank (default RANK, OMPI_COMM_WORLD_RANK,\n"
		"                       PMI_RANK or SLURM_PROCID)\n"
		"  --size N             number of ranks, 2 to %d (default WORLD_SIZE,\n"
		"                       OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS)\n"
		"  -R, --reducers R     reducers, 1 to N-1 (default 1)\n"
		"  -a, --addr IP        local address to listen on (default: the one\n"
		"                       that reaches rank 0; its RDMA device is used)\n"
		"  -m, --mode MODE      krdma (default) or tcp (--tcp: -m tcp)\n"
		"  -b, --minbytes SIZE  smallest partition (default 64K; K, M, G; a\n"
		"                       multiple of 8)\n"
		"  -e, --maxbytes SIZE  largest partition (default: the smallest)\n"
		"  -f, --stepfactor F   multiply the size by F between rows (default 2)\n"
		"  -n, --iters N        timed iterations per size (default 20)\n"
		"  -w, --warmup_iters N untimed ones first (default 5)\n"
		"  --notify HOW         auto (default: WRITE_IMM, SEND on iWARP), imm, send\n"
		"  -t, --timeout SECS   give up after SECS without progress (default %d)\n"
		"  -j, --json           print JSON\n"
		"  --inject-error       for tests: mapper 0 changes one byte of its partition\n"
		"                       for reducer 0 in the first iteration\n"
		"  -h, --help\n\n"
		"Exit status: 0 all verified, 1 a wrong byte or a failure, 2 bad usage.\n",
		SH_DEF_PORT, RV_MAX_RANKS, SH_DEF_TIMEOUT_S);
}

static int parse_opts(int argc, char *argv[], struct opts *o, struct rv *rv)
{
	static const struct option lo[] = {
		EX_LONG_OPTIONS,
		{ "reducers", required_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 }
	};
	long reducers = 1;
	int c, ret;

	memset(o, 0, sizeof(*o));
	ex_opts_init(&o->e, SH_DEF_TIMEOUT_S);
	o->e.size_lo = 8;
	o->e.size_hi = SH_MAX_SIZE;
	o->e.size_align = 8;
	o->e.size_text = "a multiple of 8 from 8 to 1G";
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":R:" EX_SHORT_OPTIONS, lo, NULL)) != -1) {
		ret = ex_opt(c, argv, &o->e);
		if (ret == 0)
			continue;
		if (ret == 2)
			return 2;
		switch (c) {
		case 'R':
			if (parse_int(optarg, 1, RV_MAX_RANKS - 1, &reducers))
				return bad("--reducers: 1 to %d, not '%s'",
					   RV_MAX_RANKS - 1, optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		}
	}
	ret = ex_opts_end(argc, argv, &o->e, RV_MAX_RANKS, SH_DEF_PORT, rv);
	if (ret)
		return ret;
	if (reducers >= rv->n)
		return bad("--reducers: %ld of %d ranks leaves no mapper", reducers,
			   rv->n);
	o->reducers = reducers;
	return 0;
}

/* The options every rank must share, in a HELLO */
static void hello_fill(const struct sh *s, struct rv_msg *m)
{
	ex_hello(&s->o.e, s->o.reducers, SH_TAG, m);
}

int main(int argc, char *argv[])
{
	struct sh *s = calloc(1, sizeof(*s));
	struct row rows[64];
	struct rv_msg m;
	uint64_t size;
	int nrows = 0, ret, i;
	bool ok = true;

	if (!s)
		return 1;
	ret = parse_opts(argc, argv, &s->o, &s->rv);
	if (ret)
		return ret;
	s->rv.role = role;
	s->rank = s->rv.rank;
	s->n = s->rv.n;
	s->R = g_reducers = s->o.reducers;
	s->M = s->n - s->R;
	s->reducer = s->rank < s->R;
	s->id = s->reducer ? s->rank : s->rank - s->R;
	s->npeers = s->reducer ? s->M : s->R;
	s->kfd = -1;
	s->conn = calloc(s->npeers, sizeof(*s->conn));
	s->imm = calloc(s->npeers, sizeof(*s->imm));
	s->tok = calloc(s->npeers, sizeof(*s->tok));
	s->raddr = calloc(s->npeers, sizeof(*s->raddr));
	s->socks = calloc(s->npeers, sizeof(*s->socks));
	s->off = calloc(s->npeers, sizeof(*s->off));
	s->pend = calloc(s->npeers, sizeof(*s->pend));
	if (!s->conn || !s->imm || !s->tok || !s->socks || !s->off || !s->pend || !s->raddr)
		return 1;
	for (i = 0; i < s->npeers; i++)
		s->socks[i] = -1;
	hello_fill(s, &m);
	if (ex_start(&s->rv, &s->o.e, "mode, reducers, sizes or iterations", &m))
		return 1;

	if (s->o.e.tcp)
		tcp_setup(s);
	else
		krdma_setup(s);
	if (s->rank == 0)
		print_header(s);

	for (size = s->o.e.min_bytes; size <= s->o.e.max_bytes; size *= s->o.e.factor) {
		if (nrows == (int)ARRAY_SIZE(rows))
			break;
		ok &= one_size(s, size, &rows[nrows]);
		nrows++;
	}
	ex_end(&s->rv);
	if (s->rank == 0) {
		for (i = 0; i < nrows; i++)
			ok &= !rows[i].wrong;
		if (s->o.e.json)
			print_json(s, rows, nrows, ok);
		else
			printf("# %s: %s\n", PROG, ok ? "every byte of every partition verified" :
			       "WRONG RESULTS (see above)");
	}
	fflush(stdout);
	/* close() ends the connections, revokes the grants, unpins */
	if (s->kfd >= 0)
		close(s->kfd);
	return ok ? 0 : 1;
}
