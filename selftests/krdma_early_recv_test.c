// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: RECVs that CONNECT and ACCEPT post before the
 * connection is up, and listeners that leave each accept to ACCEPT
 * (KRDMA_FEATURE_EARLY_RECVS, KRDMA_LISTEN_DEFER_ACCEPT).
 *
 * On iWARP a SEND that finds no RECV kills the connection, and the
 * accepting side is established before the connecting side's CONNECT has
 * returned: a server that SENDs right after ACCEPT, or a client that SENDs
 * right after CONNECT, raced the peer's first SUBMIT of RECVs. With early
 * RECVs neither races. The tests, on rxe and siw, each a device that is
 * its own peer and a pair of devices across a veth pair:
 *
 *   connect_recvs_catch_the_first_send
 *        a server SENDs 4 messages as soon as ACCEPT returns (on iWARP,
 *        as soon as the client's CONNECT returned: MPA wants the
 *        connecting side first); the client's CONNECT posted 4 RECVs:
 *        each arrives, in order, every byte checked; 10 rounds. A thread
 *        already waiting in POLL when the CONNECT starts takes the
 *        completions and at once queries the connection each names: the
 *        handle is there (stored before the held completions are queued,
 *        under the lock lookups take)
 *   connect_recvs_survive_a_taken_source_port
 *        the same, with rdma_cm made to pick a source port that a TCP
 *        socket holds: on iWARP the CONNECT takes another port before it
 *        posts its RECVs, and none of them is flushed; 3 rounds
 *   deferred_accept_recvs_catch_the_first_send
 *        the same the other way round: a client SENDs as soon as CONNECT
 *        returns (on iWARP: and the ACCEPT did), into the RECVs of the
 *        server's deferred ACCEPT
 *   deferred_accept_request_gone
 *        a request whose peer gave up: ACCEPT neither hangs nor hands out
 *        a live connection; the listener still works
 *   early_recvs_bad_input
 *        every errno of the contract; each bad RECV fails as SUBMIT fails
 *        it; the limits themselves are allowed; nothing leaks
 *   failed_calls_complete_nothing
 *        a refused CONNECT, and one whose struct cannot be written back
 *        although its peer SENDs to it: none of their RECVs completes
 *   accept_efault_takes_no_request
 *        an ACCEPT whose struct cannot be written back fails before it
 *        takes a request: nothing completes, and the next ACCEPT takes
 *        the waiting client's request
 *   listener_closed_with_requests_waiting
 *        DESTROY of a deferred listener refuses the requests still
 *        waiting at once; the connection accepted before goes on
 *
 * Nothing sleeps for a fixed time: each step waits for the completion or
 * the return it needs, with a bound; a check that nothing came waits
 * QUIET_MS for it. A thread plays the peer whose call blocks; it records
 * what happened and the main thread checks it, after joining it.
 *
 * Environment: KRDMA_TEST_ONLY=substring of "early.variant.test" runs
 * only the tests whose name has it; KRDMA_DEBUG_KERNEL=1 (the debug
 * kernel) gives a slow connect more time where a test needs it to be
 * slow.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
/* Messages of one round: each in a slot of its own, RECVs of RLEN bytes */
#define NMSG 4
#define SLOT 8192UL
#define RLEN 4096UL
/*
 * Rounds of the race tests: 10; 3 on the debug kernel, where they run for
 * lockdep and KASAN, not for the race, at a fifth of the speed
 */
#define ROUNDS (getenv("KRDMA_DEBUG_KERNEL") ? 3 : 10)
/* How long a check that no completion comes waits for one */
#define QUIET_MS 200
/* A handle no file has */
#define NO_HANDLE 0x7777

static const uint32_t msg_len[NMSG] = { 64, 1000, 2049, 4096 };

/* Where RECV @i of a round receives: unaligned, across two pages */
static uint64_t rslot(int i)
{
	return i * SLOT + i;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ioc(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

/* A copy of @n bytes of @src in a page of its own, made read-only */
static void *ro_copy(const void *src, size_t n)
{
	void *p = mmap(NULL, PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, src, n);
	if (mprotect(p, PG, PROT_READ)) {
		munmap(p, PG);
		return NULL;
	}
	return p;
}

/* A CONNECT struct: to @dst from @src (NULL: any), with @n RECVs */
static void connect_cmd(struct krdma_connect *c, const struct krdma_addr *dst,
			const struct krdma_addr *src, uint32_t timeout_ms,
			const struct krdma_op *recvs, uint32_t n)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->dst = *dst;
	if (src)
		c->src = *src;
	c->timeout_ms = timeout_ms;
	c->recv_count = n;
	c->recvs = (uintptr_t)recvs;
}

/* CONNECT with a receive queue of @rq_depth and @n RECVs: 0 or -errno */
static int connect_rq(int fd, const struct krdma_addr *dst,
		      const struct krdma_addr *src, uint32_t rq_depth,
		      const struct krdma_op *recvs, uint32_t n, uint32_t *conn)
{
	struct krdma_connect c;
	int ret;

	connect_cmd(&c, dst, src, 10000, recvs, n);
	c.rq_depth = rq_depth;
	ret = ioc(fd, KRDMA_IOC_CONNECT, &c);
	if (!ret)
		*conn = c.handle;
	return ret;
}

/*
 * @n RECVs (connection 0, as CONNECT and ACCEPT take them), RECV i into
 * rslot(i) of @m, cookies @cookie + i; @m is filled with guard bytes
 */
static void recv_ops(struct krdma_op *ops, int n, struct kt_mem *m,
		     uint64_t cookie)
{
	int i;

	memset(m->p, KT_GUARD, m->len);
	for (i = 0; i < n; i++)
		kt_op(&ops[i], KRDMA_OP_RECV, 0, m->h, rslot(i), RLEN, NULL, 0,
		      cookie + i);
}

/* @n SENDs on @conn, SEND i of msg_len[i] bytes of pattern @seed + i */
static void send_ops(struct krdma_op *ops, int n, struct kt_mem *m,
		     uint32_t conn, unsigned int seed, uint64_t cookie)
{
	int i;

	for (i = 0; i < n; i++) {
		kt_pattern(m->p + i * SLOT, msg_len[i], seed + i);
		kt_op(&ops[i], KRDMA_OP_SEND, conn, m->h, i * SLOT, msg_len[i],
		      NULL, 0, cookie + i);
	}
}

/* The completions of @opcode among @n, in their order: how many */
static int pick(const struct krdma_completion *wc, int n, uint32_t opcode,
		struct krdma_completion *out)
{
	int i, k = 0;

	for (i = 0; i < n; i++)
		if (wc[i].opcode == opcode)
			out[k++] = wc[i];
	return k;
}

/*
 * The @got completions of the @n RECVs of recv_ops(@cookie) into @m, on
 * connection @conn, took the SENDs of send_ops(@seed): each succeeded, in
 * posting order, with its message's length and bytes in its slot, and
 * nothing else of the slot changed
 */
static void check_recvs(struct __test_metadata *_metadata,
			const struct krdma_completion *wc, int got, int n,
			uint32_t conn, const struct kt_mem *m,
			unsigned int seed, uint64_t cookie)
{
	long bad;
	int i;

	ASSERT_EQ(n, got) TH_LOG("%d of %d RECVs completed", got, n);
	for (i = 0; i < n; i++) {
		const uint8_t *slot = m->p + i * SLOT;

		EXPECT_EQ(KRDMA_WC_SUCCESS, wc[i].status)
			TH_LOG("RECV %d: %s", i,
			       krdma_wc_status_str(wc[i].status));
		EXPECT_EQ(KRDMA_OP_RECV, wc[i].opcode);
		EXPECT_EQ(conn, wc[i].conn);
		EXPECT_EQ(cookie + i, wc[i].cookie)
			TH_LOG("completion %d is of RECV %lld", i,
			       (long long)(wc[i].cookie - cookie));
		EXPECT_EQ(msg_len[i], wc[i].byte_len);
		EXPECT_EQ(0, wc[i].flags);
		bad = kt_check_pattern(slot + i, msg_len[i], seed + i);
		EXPECT_EQ(-1, bad)
			TH_LOG("RECV %d: byte %ld of %u differs", i, bad,
			       msg_len[i]);
		EXPECT_EQ(-1, kt_check_fill(slot, i, KT_GUARD));
		EXPECT_EQ(-1, kt_check_fill(slot + i + msg_len[i],
					    SLOT - i - msg_len[i], KT_GUARD))
			TH_LOG("RECV %d wrote past its message", i);
	}
}

/* The @got completions of the @n SENDs of send_ops(@cookie) on @conn */
static void check_sends(struct __test_metadata *_metadata,
			const struct krdma_completion *wc, int got, int n,
			uint32_t conn, uint64_t cookie)
{
	int i;

	ASSERT_EQ(n, got) TH_LOG("%d of %d SENDs completed", got, n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(KRDMA_WC_SUCCESS, wc[i].status)
			TH_LOG("SEND %d: %s", i,
			       krdma_wc_status_str(wc[i].status));
		EXPECT_EQ(KRDMA_OP_SEND, wc[i].opcode);
		EXPECT_EQ(conn, wc[i].conn);
		EXPECT_EQ(cookie + i, wc[i].cookie);
	}
}

/*
 * The first handle from 1 to 64 of @fd that exists but is not one of
 * @made (DESTROY of it does not fail with ENOENT), or 0
 */
static uint32_t stray_handle(int fd, const uint32_t *made, int nmade)
{
	uint32_t h;
	int i;

	for (h = 1; h <= 64; h++) {
		for (i = 0; i < nmade && made[i] != h; i++)
			;
		if (i == nmade && krdma_destroy_handle(fd, h) != -ENOENT)
			return h;
	}
	return 0;
}

/*
 * One end of a connection, in a thread of its own: CONNECT (or ACCEPT),
 * with RECVs; then at once the SENDs, and it takes @nwait completions.
 * It records what happened; the main thread checks it after joining.
 */
struct side {
	/* In */
	int fd;
	uint32_t listener;		/* ACCEPT on it; 0: CONNECT to @dst */
	struct krdma_addr dst;
	const struct krdma_addr *src;	/* NULL: any */
	uint32_t timeout_ms;
	const struct krdma_op *recvs;
	uint32_t nrecvs;
	struct krdma_op *sends;		/* their conn is set to the new one */
	uint32_t nsends;
	/* If set: the SENDs wait for *@go (flag_set()), up to timeout_ms */
	atomic_int *go;
	int nwait;			/* at most 2 * NMSG */
	/* Out */
	int ret;			/* of CONNECT or ACCEPT */
	uint32_t conn;
	long ms;			/* how long that call took */
	atomic_int done;		/* that call returned */
	int send_ret;			/* of SUBMIT */
	int nwc;
	struct krdma_completion wc[2 * NMSG];
	pthread_t thread;
};

/*
 * Flags between the threads of a test: set and waited for under one lock,
 * so that a waiter sleeps until the event, not for a time
 */
static pthread_mutex_t flag_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flag_cond = PTHREAD_COND_INITIALIZER;

static void flag_set(atomic_int *flag)
{
	pthread_mutex_lock(&flag_lock);
	atomic_store(flag, 1);
	pthread_cond_broadcast(&flag_cond);
	pthread_mutex_unlock(&flag_lock);
}

/* Wait up to @ms for @flag: whether it is set */
static bool flag_wait(atomic_int *flag, long ms)
{
	struct timespec until;
	bool set;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&flag_lock);
	while (!atomic_load(flag) &&
	       !pthread_cond_timedwait(&flag_cond, &flag_lock, &until))
		;
	set = atomic_load(flag);
	pthread_mutex_unlock(&flag_lock);
	return set;
}

static void *side_main(void *arg)
{
	struct side *s = arg;
	long t0 = now_ms();
	uint32_t i;

	if (s->listener)
		s->ret = krdma_accept_recvs(s->fd, s->listener, 0,
					    s->timeout_ms, s->recvs,
					    s->nrecvs, &s->conn);
	else
		s->ret = krdma_connect_recvs(s->fd, &s->dst, s->src, 0,
					     s->timeout_ms, s->recvs,
					     s->nrecvs, &s->conn);
	s->ms = now_ms() - t0;
	flag_set(&s->done);
	if (s->ret)
		return NULL;
	if (s->nsends && s->go)
		flag_wait(s->go, s->timeout_ms);
	if (s->nsends) {
		for (i = 0; i < s->nsends; i++)
			s->sends[i].conn = s->conn;
		s->send_ret = krdma_submit_ops(s->fd, s->sends, s->nsends, 0,
					       NULL);
		if (s->send_ret)
			return NULL;
	}
	if (s->nwait)
		s->nwc = kt_wait_wc(s->fd, s->wc, s->nwait);
	return NULL;
}

/*
 * The server of one exchange, started in a thread: ACCEPT on @listener,
 * then at once the NMSG SENDs of @sends, and their completions. On iWARP
 * (@go set) the SENDs wait for *@go: the client's CONNECT returned (MPA:
 * protocol.rst, "Ordering rules"); no RECV is posted after the CONNECT.
 */
static int start_sending_server(struct side *srv, int fd, uint32_t listener,
				struct krdma_op *sends, atomic_int *go)
{
	srv->fd = fd;
	srv->listener = listener;
	srv->timeout_ms = 10000;
	srv->sends = sends;
	srv->nsends = NMSG;
	srv->nwait = NMSG;
	srv->go = go;
	return pthread_create(&srv->thread, NULL, side_main, srv);
}

FIXTURE(early) {
	int sfd, cfd;
	bool supported;
	bool iwarp;			/* the connecting side SENDs first */
	struct krdma_addr ip;		/* the server's address, port 0 */
	struct krdma_addr src;
	const struct krdma_addr *srcp;	/* NULL: any */
};

/*
 * Where the two ends are (selftests/qemu/guest-setup.sh), as in
 * krdma_xfer_test: one device that is its own peer, or two devices on
 * the two ends of a veth pair.
 */
FIXTURE_VARIANT(early) {
	const char *name;
	const char *ip;		/* the server listens here */
	const char *src;	/* the client connects from here (NULL: any) */
	const char *dev;	/* the server's device */
	bool iwarp;
};

FIXTURE_VARIANT_ADD(early, rxe) {
	.name = "rxe",
	.ip = "198.18.0.1",
	.dev = "rxe0",
};

FIXTURE_VARIANT_ADD(early, siw) {
	.name = "siw",
	.ip = "198.18.1.1",
	.dev = "siw0",
	.iwarp = true,
};

FIXTURE_VARIANT_ADD(early, rxe_veth_pair) {
	.name = "rxe_veth_pair",
	.ip = "198.18.2.2",
	.src = "198.18.2.1",
	.dev = "rxe2",
};

FIXTURE_VARIANT_ADD(early, siw_veth_pair) {
	.name = "siw_veth_pair",
	.ip = "198.18.3.2",
	.src = "198.18.3.1",
	.dev = "siw2",
	.iwarp = true,
};

FIXTURE_SETUP(early)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	const char *only = getenv("KRDMA_TEST_ONLY");
	struct krdma_query_module qm;
	char name[256];
	uint32_t dev;

	self->sfd = self->cfd = -1;
	self->iwarp = variant->iwarp;
	snprintf(name, sizeof(name), "early.%s.%s", variant->name,
		 _metadata->name);
	if (only && !strstr(name, only)) {
		snprintf(_metadata->results->reason,
			 sizeof(_metadata->results->reason),
			 "not selected by KRDMA_TEST_ONLY");
		_exit(255);
	}
	self->sfd = krdma_open();
	ASSERT_LE(0, self->sfd);
	ASSERT_EQ(0, krdma_query_module(self->sfd, &qm));
	/* Each test skips (NEED_EARLY_RECVS): a SKIP here would not */
	self->supported = qm.features & KRDMA_FEATURE_EARLY_RECVS;
	if (!self->supported)
		return;
	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &unlimited));
	self->cfd = krdma_open();
	ASSERT_LE(0, self->cfd);
	ASSERT_EQ(0, krdma_dev_find(self->sfd, variant->dev, &dev, NULL));
	ASSERT_EQ(0, krdma_parse_addr(variant->ip, 0, &self->ip));
	if (variant->src) {
		ASSERT_EQ(0, krdma_parse_addr(variant->src, 0, &self->src));
		self->srcp = &self->src;
	}
}

FIXTURE_TEARDOWN(early)
{
	if (self->cfd >= 0)
		close(self->cfd);
	if (self->sfd >= 0)
		close(self->sfd);
}

#define NEED_EARLY_RECVS()						\
	do {								\
		if (!self->supported)					\
			SKIP(return,					\
			     "the module has no KRDMA_FEATURE_EARLY_RECVS"); \
	} while (0)

/*
 * A connection through the deferred listener @l: the client's CONNECT
 * and the server's ACCEPT each post NMSG RECVs, and each side SENDs NMSG
 * messages as soon as its call returned (on iWARP the client once the
 * ACCEPT returned too: siw's accepting side leaves an FPDU unread that
 * arrives before it handed the socket to the QP, as in
 * deferred_accept_recvs_catch_the_first_send). Every byte checked; each
 * side sees that the other posted its RECVs first.
 */
static void deferred_exchange(struct __test_metadata *_metadata,
			      FIXTURE_DATA(early) *self, uint32_t l,
			      const struct krdma_addr *addr, unsigned int seed)
{
	struct krdma_op crecvs[NMSG], csends[NMSG], srecvs[NMSG], ssends[NMSG];
	struct krdma_completion wc[2 * NMSG], rwc[2 * NMSG], swc[2 * NMSG];
	struct kt_mem crbuf = {}, csbuf = {}, srbuf = {}, ssbuf = {};
	struct krdma_conn_query q;
	atomic_int accepted = 0;
	struct side cli = {};
	uint32_t sconn;
	int got, n, ret;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &crbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &csbuf, NMSG * SLOT, 0));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &srbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &ssbuf, NMSG * SLOT, 0));
	recv_ops(crecvs, NMSG, &crbuf, 0x100);
	send_ops(csends, NMSG, &csbuf, 0, seed, 0x200);
	recv_ops(srecvs, NMSG, &srbuf, 0x300);

	cli.fd = self->cfd;
	cli.dst = *addr;
	cli.src = self->srcp;
	cli.timeout_ms = 10000;
	cli.recvs = crecvs;
	cli.nrecvs = NMSG;
	cli.sends = csends;
	cli.nsends = NMSG;
	cli.nwait = 2 * NMSG;	/* its SENDs, and the server's */
	cli.go = self->iwarp ? &accepted : NULL;
	ASSERT_EQ(0, pthread_create(&cli.thread, NULL, side_main, &cli));
	ret = krdma_accept_recvs(self->sfd, l, 0, 10000, srecvs, NMSG, &sconn);
	flag_set(&accepted);
	ASSERT_EQ(0, ret) TH_LOG("ACCEPT: %s", strerror(-ret));
	/*
	 * On iWARP the accepting side sends only once the connecting side
	 * is connected (MPA: a SEND right behind the reply fails its
	 * connect; protocol.rst, "Ordering rules")
	 */
	if (self->iwarp)
		ASSERT_TRUE(flag_wait(&cli.done, 10000));
	send_ops(ssends, NMSG, &ssbuf, sconn, seed + 100, 0x400);
	ASSERT_EQ(0, krdma_submit_ops(self->sfd, ssends, NMSG, 0, NULL));
	got = kt_wait_wc(self->sfd, wc, 2 * NMSG);
	pthread_join(cli.thread, NULL);

	ASSERT_EQ(0, cli.ret) TH_LOG("CONNECT: %s", strerror(-cli.ret));
	EXPECT_EQ(0, cli.send_ret) TH_LOG("SUBMIT: %s", strerror(-cli.send_ret));
	n = pick(wc, got, KRDMA_OP_RECV, rwc);
	check_recvs(_metadata, rwc, n, NMSG, sconn, &srbuf, seed, 0x300);
	n = pick(wc, got, KRDMA_OP_SEND, swc);
	check_sends(_metadata, swc, n, NMSG, sconn, 0x400);
	n = pick(cli.wc, cli.nwc, KRDMA_OP_RECV, rwc);
	check_recvs(_metadata, rwc, n, NMSG, cli.conn, &crbuf, seed + 100,
		    0x100);
	n = pick(cli.wc, cli.nwc, KRDMA_OP_SEND, swc);
	check_sends(_metadata, swc, n, NMSG, cli.conn, 0x200);
	EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, 1, 0));
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, 1, 0));

	ASSERT_EQ(0, krdma_conn_info(self->sfd, sconn, &q));
	EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
	ASSERT_EQ(0, krdma_conn_info(self->cfd, cli.conn, &q));
	EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cli.conn));
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sconn));
	kt_mem_put(self->cfd, &crbuf);
	kt_mem_put(self->cfd, &csbuf);
	kt_mem_put(self->sfd, &srbuf);
	kt_mem_put(self->sfd, &ssbuf);
}

/*
 * A thread that waits for @want completions on @fd and, as it takes each,
 * at once queries the connection it names, as a program would that
 * re-posts a RECV from its completion loop
 */
struct handle_watch {
	int fd;
	int want;
	int got;
	int lost;			/* completions whose handle was not found */
	int err;			/* of the first failed query */
	struct krdma_completion wc[NMSG];
	atomic_int waiting;		/* set before its first POLL */
	pthread_t thread;
};

static void *handle_watch_main(void *arg)
{
	struct handle_watch *w = arg;
	long until = now_ms() + 20000;
	struct krdma_conn_query q;
	int n, i, ret;

	flag_set(&w->waiting);
	while (w->got < w->want && now_ms() < until) {
		n = krdma_poll_wc(w->fd, w->wc + w->got, w->want - w->got,
				  1000);
		if (n < 0) {
			w->err = n;
			break;
		}
		for (i = 0; i < n; i++) {
			ret = krdma_conn_info(w->fd, w->wc[w->got + i].conn,
					      &q);
			if (ret && !w->lost++)
				w->err = ret;
		}
		w->got += n;
	}
	return NULL;
}

/*
 * The server (a thread) SENDs as soon as ACCEPT returns, without waiting
 * for anything from the client: on siw its SENDs can reach the client
 * before the client's CONNECT has returned. The RECVs of the CONNECT take
 * them, and complete only once CONNECT returned the handle they name: a
 * thread already waiting in POLL when the CONNECT starts takes them, and
 * at once finds that handle.
 */
TEST_F_TIMEOUT(early, connect_recvs_catch_the_first_send, 180)
{
	struct krdma_op recvs[NMSG], sends[NMSG];
	struct krdma_completion wc[NMSG];
	struct kt_mem rbuf = {}, sbuf = {};
	struct krdma_conn_query q;
	struct krdma_addr addr;
	uint32_t l, cconn;
	int round, ret;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 16, 0, &l,
					&addr));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &rbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &sbuf, NMSG * SLOT, 0));

	for (round = 0; round < ROUNDS && _metadata->passed; round++) {
		unsigned int seed = 1 + 8 * round;
		uint64_t rcookie = 0x1000 + 16 * round;
		uint64_t scookie = 0x8000 + 16 * round;
		struct handle_watch w = { .fd = self->cfd, .want = NMSG };
		struct side srv = {};
		atomic_int connected = 0;

		recv_ops(recvs, NMSG, &rbuf, rcookie);
		send_ops(sends, NMSG, &sbuf, 0, seed, scookie);
		ASSERT_EQ(0, pthread_create(&w.thread, NULL,
					    handle_watch_main, &w));
		ASSERT_TRUE(flag_wait(&w.waiting, 10000));
		ASSERT_EQ(0, start_sending_server(&srv, self->sfd, l, sends,
						  self->iwarp ? &connected :
						  NULL));
		ret = krdma_connect_recvs(self->cfd, &addr, self->srcp, 0,
					  10000, recvs, NMSG, &cconn);
		flag_set(&connected);
		pthread_join(srv.thread, NULL);
		pthread_join(w.thread, NULL);

		ASSERT_EQ(0, ret) TH_LOG("round %d: CONNECT: %s", round,
					 strerror(-ret));
		ASSERT_EQ(0, srv.ret) TH_LOG("round %d: ACCEPT: %s", round,
					     strerror(-srv.ret));
		EXPECT_EQ(0, srv.send_ret)
			TH_LOG("round %d: SUBMIT: %s", round,
			       strerror(-srv.send_ret));
		EXPECT_EQ(0, w.lost)
			TH_LOG("round %d: %d of %d completions named a handle not yet there: %s",
			       round, w.lost, w.got, strerror(-w.err));
		check_sends(_metadata, srv.wc, srv.nwc, NMSG, srv.conn,
			    scookie);
		check_recvs(_metadata, w.wc, w.got, NMSG, cconn, &rbuf, seed,
			    rcookie);
		/* Exactly those: nothing more on either side */
		EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, 1, 0));
		EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, 1, 0));

		ASSERT_EQ(0, krdma_conn_info(self->sfd, srv.conn, &q));
		EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
		ASSERT_EQ(0, krdma_conn_info(self->cfd, cconn, &q));
		EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
		EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cconn));
		EXPECT_EQ(0, krdma_destroy_handle(self->sfd, srv.conn));
	}

	kt_mem_put(self->cfd, &rbuf);
	kt_mem_put(self->sfd, &sbuf);
}

/*
 * A TCP socket bound to @a at @port, without SO_REUSEADDR, as a client
 * socket's is: its fd, or -errno
 */
static int tcp_hold(const struct krdma_addr *a, uint32_t port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	memcpy(&sin.sin_addr, a->addr, 4);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * iWARP shares its ports with TCP, and rdma_cm picks a connecting id's
 * source port without asking TCP. Here it picks one that a TCP socket
 * without SO_REUSEADDR holds, every time: rdma_cm never hands out the
 * port it handed out last, so with ip_local_port_range cut to [b, b+1]
 * after a listener drew b+1, a connect draws b first. On iWARP krdma must
 * find b taken before it posts the CONNECT's RECVs and connect from b+1;
 * those RECVs then take the server's first SENDs, none flushed (the old
 * code failed the CONNECT with EADDRINUSE; a retry after the post
 * delivered their flushes). On RoCE the TCP socket is no obstacle: the
 * connect goes from b. 3 rounds, each with b of its own.
 */
TEST_F_TIMEOUT(early, connect_recvs_survive_a_taken_source_port, 180)
{
	const struct krdma_addr *from = self->srcp ?: &self->ip;
	struct krdma_op recvs[NMSG], sends[NMSG];
	struct krdma_completion wc[NMSG];
	struct kt_mem rbuf = {}, sbuf = {};
	struct krdma_addr addr, drawn;
	struct krdma_conn_query q;
	uint32_t l, l2, cconn, b, lo, hi;
	int round, got, ret, hold;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, kt_port_range_get(&lo, &hi));
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 16, 0, &l,
					&addr));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &rbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &sbuf, NMSG * SLOT, 0));

	for (round = 0; round < 3 && _metadata->passed; round++) {
		unsigned int seed = 7 + 8 * round;
		uint64_t rcookie = 0x2000 + 16 * round;
		uint64_t scookie = 0x9000 + 16 * round;
		struct side srv = {};
		atomic_int connected = 0;

		b = 47100 + 2 * round;
		/* rdma_cm hands out b+1: the port it must not hand out next */
		ASSERT_EQ(0, kt_port_range_set(b + 1, b + 1));
		ret = krdma_listen_flags(self->sfd, &self->ip, 1, 0, &l2,
					 &drawn);
		EXPECT_EQ(0, kt_port_range_set(lo, hi));
		ASSERT_EQ(0, ret) TH_LOG("a listener on port %u: %s", b + 1,
					 strerror(-ret));
		EXPECT_EQ(b + 1, drawn.port);
		EXPECT_EQ(0, krdma_destroy_handle(self->sfd, l2));
		hold = tcp_hold(from, b);
		ASSERT_LE(0, hold) TH_LOG("a TCP socket on port %u: %s", b,
					  strerror(-hold));

		recv_ops(recvs, NMSG, &rbuf, rcookie);
		send_ops(sends, NMSG, &sbuf, 0, seed, scookie);
		ASSERT_EQ(0, start_sending_server(&srv, self->sfd, l, sends,
						  self->iwarp ? &connected :
						  NULL));
		ret = kt_port_range_set(b, b + 1);
		if (!ret)
			ret = krdma_connect_recvs(self->cfd, &addr, self->srcp,
						  0, 10000, recvs, NMSG,
						  &cconn);
		EXPECT_EQ(0, kt_port_range_set(lo, hi));
		close(hold);
		flag_set(&connected);
		if (ret) {
			/* The server's ACCEPT gives up after its timeout */
			pthread_join(srv.thread, NULL);
			ASSERT_EQ(0, ret) TH_LOG("round %d: CONNECT from %u or %u: %s",
						 round, b, b + 1,
						 strerror(-ret));
		}
		got = kt_wait_wc(self->cfd, wc, NMSG);
		pthread_join(srv.thread, NULL);

		ASSERT_EQ(0, srv.ret) TH_LOG("round %d: ACCEPT: %s", round,
					     strerror(-srv.ret));
		EXPECT_EQ(0, srv.send_ret);
		check_sends(_metadata, srv.wc, srv.nwc, NMSG, srv.conn,
			    scookie);
		check_recvs(_metadata, wc, got, NMSG, cconn, &rbuf, seed,
			    rcookie);
		EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, 1, 0));
		ASSERT_EQ(0, krdma_conn_info(self->cfd, cconn, &q));
		EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
		/* iWARP took the other port; RoCE had no reason to */
		EXPECT_EQ(self->iwarp ? b + 1 : b, q.local.port);
		EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cconn));
		EXPECT_EQ(0, krdma_destroy_handle(self->sfd, srv.conn));
	}

	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, l));
	kt_mem_put(self->cfd, &rbuf);
	kt_mem_put(self->sfd, &sbuf);
}

/*
 * The client (a thread) SENDs as soon as its CONNECT returns, which the
 * deferred listener lets happen only once ACCEPT posted its RECVs and
 * accepted: on rxe the client is established before the server is. On
 * siw it waits for the ACCEPT to return as well: siw's accepting side
 * leaves an FPDU unread that arrives between its MPA reply and the
 * moment it hands the socket to the QP (protocol.rst, "Ordering
 * rules"; seen once, 6.12 with one core busy), and nothing but more
 * data would make it read it. ACCEPT returns once established, which
 * siw reports after the handover.
 */
TEST_F_TIMEOUT(early, deferred_accept_recvs_catch_the_first_send, 180)
{
	struct krdma_op recvs[NMSG], sends[NMSG];
	struct krdma_completion wc[NMSG];
	struct kt_mem rbuf = {}, sbuf = {};
	struct krdma_conn_query q;
	struct krdma_addr addr;
	uint32_t l, sconn;
	int round, got, ret;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 16,
					KRDMA_LISTEN_DEFER_ACCEPT, &l, &addr));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &rbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &sbuf, NMSG * SLOT, 0));

	for (round = 0; round < ROUNDS && _metadata->passed; round++) {
		unsigned int seed = 3 + 8 * round;
		uint64_t rcookie = 0x1000 + 16 * round;
		uint64_t scookie = 0x8000 + 16 * round;
		atomic_int accepted = 0;
		struct side cli = {};

		recv_ops(recvs, NMSG, &rbuf, rcookie);
		send_ops(sends, NMSG, &sbuf, 0, seed, scookie);
		cli.fd = self->cfd;
		cli.dst = addr;
		cli.src = self->srcp;
		cli.timeout_ms = 10000;
		cli.sends = sends;
		cli.nsends = NMSG;
		cli.nwait = NMSG;
		cli.go = self->iwarp ? &accepted : NULL;
		ASSERT_EQ(0, pthread_create(&cli.thread, NULL, side_main,
					    &cli));
		ret = krdma_accept_recvs(self->sfd, l, 0, 10000, recvs, NMSG,
					 &sconn);
		flag_set(&accepted);
		ASSERT_EQ(0, ret) TH_LOG("round %d: ACCEPT: %s", round,
					 strerror(-ret));
		got = kt_wait_wc(self->sfd, wc, NMSG);
		pthread_join(cli.thread, NULL);

		ASSERT_EQ(0, cli.ret) TH_LOG("round %d: CONNECT: %s", round,
					     strerror(-cli.ret));
		EXPECT_EQ(0, cli.send_ret)
			TH_LOG("round %d: SUBMIT: %s", round,
			       strerror(-cli.send_ret));
		check_sends(_metadata, cli.wc, cli.nwc, NMSG, cli.conn,
			    scookie);
		check_recvs(_metadata, wc, got, NMSG, sconn, &rbuf, seed,
			    rcookie);
		EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, 1, 0));
		EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, 1, 0));

		ASSERT_EQ(0, krdma_conn_info(self->cfd, cli.conn, &q));
		EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
		ASSERT_EQ(0, krdma_conn_info(self->sfd, sconn, &q));
		EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
		EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cli.conn));
		EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sconn));
	}
	kt_mem_put(self->sfd, &rbuf);
	kt_mem_put(self->cfd, &sbuf);
}

/*
 * A request whose peer gave up before anybody accepted it: ACCEPT must
 * not hang, nor hand out a connection that stays up. Then the listener
 * serves the next request as any other.
 */
TEST_F_TIMEOUT(early, deferred_accept_request_gone, 120)
{
	/* Long enough for the request to reach the listener */
	uint32_t give_up = getenv("KRDMA_DEBUG_KERNEL") ? 2000 : 500;
	struct krdma_completion wc[NMSG];
	struct krdma_op recvs[NMSG];
	struct kt_mem rbuf = {};
	struct krdma_addr addr;
	uint32_t l, c, s, state;
	long t0, ms;
	int ret, got, i;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 4,
					KRDMA_LISTEN_DEFER_ACCEPT, &l, &addr));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &rbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));

	/* Nobody accepts: the CONNECT times out */
	t0 = now_ms();
	ret = krdma_connect_from(self->cfd, &addr, self->srcp, give_up, &c);
	ms = now_ms() - t0;
	ASSERT_EQ(-ETIMEDOUT, ret)
		TH_LOG("CONNECT to a deferred listener nobody accepts on: %s after %ld ms",
		       ret ? strerror(-ret) : "connected", ms);

	/* ACCEPT of what is left of the request */
	recv_ops(recvs, NMSG, &rbuf, 0x100);
	t0 = now_ms();
	ret = krdma_accept_recvs(self->sfd, l, 0, 3000, recvs, NMSG, &s);
	ms = now_ms() - t0;
	TH_LOG("ACCEPT of the request whose peer gave up: %s after %ld ms",
	       ret ? strerror(-ret) : "a connection", ms);
	/* 3 s for a request, up to 10 s for it to be established */
	EXPECT_GT(3000 + 10000 + 5000, ms);
	if (!ret) {
		state = kt_wait_conn_down(self->sfd, s);
		EXPECT_EQ(KRDMA_CONN_ERROR, state)
			TH_LOG("the connection of a dead request is %s 10 s later",
			       state == KRDMA_CONN_CONNECTED ?
			       "still connected" : "not in error");
		/* Its RECVs were posted: they end, flushed, with its handle */
		EXPECT_EQ(0, krdma_destroy_handle(self->sfd, s));
		got = kt_wait_wc(self->sfd, wc, NMSG);
		EXPECT_EQ(NMSG, got);
		for (i = 0; i < got; i++) {
			EXPECT_EQ(s, wc[i].conn);
			EXPECT_NE(KRDMA_WC_SUCCESS, wc[i].status);
		}
	} else {
		EXPECT_TRUE(ret == -EAGAIN || ret == -ETIMEDOUT ||
			    ret == -ECONNABORTED);
	}
	EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, NMSG, QUIET_MS));
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, NMSG, 0));
	kt_mem_put(self->sfd, &rbuf);

	/* The next request is accepted, and its connection works */
	deferred_exchange(_metadata, self, l, &addr, 5);
}

/* The kinds of bad RECV that SUBMIT refuses too */
enum bad_recv {
	BAD_NO_HANDLE,
	BAD_CONN_AS_BUFFER,
	BAD_PAST_THE_END,
	BAD_WRAPS,
	BAD_EMPTY_RANGE,
	BAD_NO_LOCAL_WRITE,
	BAD_SGE_RESERVED,
	BAD_OP_RESERVED,
	BAD_TOO_MANY_SGES,
	BAD_SGES_UNREADABLE,
	BAD_NR
};

static const char *const bad_recv_name[BAD_NR] = {
	[BAD_NO_HANDLE] = "a buffer that is no handle",
	[BAD_CONN_AS_BUFFER] = "a connection as its buffer",
	[BAD_PAST_THE_END] = "a range past the buffer's end",
	[BAD_WRAPS] = "a range that wraps around",
	[BAD_EMPTY_RANGE] = "an empty range",
	[BAD_NO_LOCAL_WRITE] = "a buffer without LOCAL_WRITE",
	[BAD_SGE_RESERVED] = "a range's reserved field set",
	[BAD_OP_RESERVED] = "the op's reserved field set",
	[BAD_TOO_MANY_SGES] = "17 ranges",
	[BAD_SGES_UNREADABLE] = "ranges at an unreadable address",
};

struct bad_ctx {
	uint32_t rw, ro;		/* buffers of 2 pages */
	uint32_t conn;			/* a connection of the same file */
	struct krdma_sge sges[KRDMA_MAX_SGE + 1];
	void *hole;			/* PROT_NONE */
};

/* A RECV on @conn into @c->rw, made bad as @kind says */
static void bad_recv(struct krdma_op *op, enum bad_recv kind, uint32_t conn,
		     struct bad_ctx *c)
{
	kt_op(op, KRDMA_OP_RECV, conn, c->rw, 0, PG, NULL, 0, 77);
	switch (kind) {
	case BAD_NO_HANDLE:
		op->sge.buf = NO_HANDLE;
		break;
	case BAD_CONN_AS_BUFFER:
		op->sge.buf = c->conn;
		break;
	case BAD_PAST_THE_END:
		op->sge.offset = 2 * PG - 192;
		op->sge.length = 193;
		break;
	case BAD_WRAPS:
		op->sge.offset = ~0ULL - 2;
		op->sge.length = 10;
		break;
	case BAD_EMPTY_RANGE:
		op->sge.length = 0;
		break;
	case BAD_NO_LOCAL_WRITE:
		op->sge.buf = c->ro;
		break;
	case BAD_SGE_RESERVED:
		op->sge.__reserved = 1;
		break;
	case BAD_OP_RESERVED:
		op->__reserved = 1;
		break;
	case BAD_TOO_MANY_SGES:
		op->num_sge = KRDMA_MAX_SGE + 1;
		op->sges = (uintptr_t)c->sges;
		break;
	case BAD_SGES_UNREADABLE:
		op->num_sge = 2;
		op->sges = (uintptr_t)c->hole;
		break;
	default:
		break;
	}
}

/*
 * Every way to get the RECVs of CONNECT (and ACCEPT) wrong, each with its
 * errno; the limits themselves work. None of the failed calls leaves a
 * completion, a request at the listener or a hold on a buffer. Then a
 * good CONNECT with RECVs moves bytes.
 */
TEST_F_TIMEOUT(early, early_recvs_bad_input, 120)
{
	static struct krdma_op many[KRDMA_EARLY_RECVS_MAX + 1];
	static struct krdma_completion fwc[KRDMA_EARLY_RECVS_MAX];
	struct krdma_op ops[2], recvs[NMSG], sends[NMSG];
	struct kt_mem rw = {}, ro = {}, big = {}, small = {}, srw = {};
	struct kt_mem rbuf = {}, sbuf = {};
	struct krdma_completion wc[NMSG];
	struct krdma_conn_query q;
	struct krdma_connect c;
	struct krdma_addr addr;
	struct bad_ctx ctx = {};
	uint32_t l, dl, p, sp, h, sh, rq, max_sge;
	uint8_t seen[KRDMA_EARLY_RECVS_MAX] = {};
	int i, k, want, ret, got;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 16, 0, &l,
					&addr));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &rw, 2 * PG,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &ro, 2 * PG, 0));
	ctx.rw = rw.h;
	ctx.ro = ro.h;
	for (i = 0; i <= KRDMA_MAX_SGE; i++)
		ctx.sges[i] = (struct krdma_sge){ .buf = rw.h, .length = 64 };
	ctx.hole = mmap(NULL, 2 * PG, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ctx.hole);

	/*
	 * A live connection of the same file and device, with a receive
	 * queue of 16 asked for: what the module gives, and what SUBMIT
	 * says of each bad RECV
	 */
	ASSERT_EQ(0, connect_rq(self->cfd, &addr, self->srcp, 16, NULL, 0, &p));
	ASSERT_EQ(0, krdma_accept_conn(self->sfd, l, 0, 10000, &sp));
	ASSERT_EQ(0, krdma_conn_info(self->cfd, p, &q));
	rq = q.rq_depth;
	max_sge = q.max_recv_sge;
	ctx.conn = p;
	ASSERT_LT(0, rq);
	ASSERT_GT(KRDMA_EARLY_RECVS_MAX, rq) TH_LOG("rq_depth 16 gave %u", rq);
	ASSERT_LT(0, max_sge);
	ASSERT_GT(1024, max_sge);

	/* Each bad RECV second of two: SUBMIT's errno, for the whole call */
	for (k = 0; k < BAD_NR; k++) {
		bad_recv(&ops[0], k, p, &ctx);
		want = krdma_submit_ops(self->cfd, ops, 1, 0, NULL);
		ASSERT_GT(0, want) TH_LOG("SUBMIT of a RECV with %s: accepted",
					  bad_recv_name[k]);
		kt_op(&ops[0], KRDMA_OP_RECV, 0, rw.h, 0, 64, NULL, 0, 76);
		bad_recv(&ops[1], k, 0, &ctx);
		ret = krdma_connect_recvs(self->cfd, &addr, self->srcp, 0,
					  10000, ops, 2, &h);
		EXPECT_EQ(want, ret)
			TH_LOG("a RECV with %s: CONNECT %s, SUBMIT %s",
			       bad_recv_name[k],
			       ret ? strerror(-ret) : "succeeded",
			       strerror(-want));
		if (k == BAD_NO_HANDLE || k == BAD_CONN_AS_BUFFER) {
			EXPECT_EQ(-ENOENT, ret);
		}
		if (!ret)
			krdma_destroy_handle(self->cfd, h);
	}

	/* Not a RECV; a connection named; a flag */
	kt_op(&ops[0], KRDMA_OP_SEND, 0, rw.h, 0, 64, NULL, 0, 1);
	EXPECT_EQ(-EINVAL, krdma_connect_recvs(self->cfd, &addr, self->srcp,
					       0, 10000, ops, 1, &h));
	kt_op(&ops[0], KRDMA_OP_RECV, p, rw.h, 0, 64, NULL, 0, 1);
	EXPECT_EQ(-EINVAL, krdma_connect_recvs(self->cfd, &addr, self->srcp,
					       0, 10000, ops, 1, &h));
	kt_op(&ops[0], KRDMA_OP_RECV, 0, rw.h, 0, 64, NULL, 0, 1);
	ops[0].flags = KRDMA_OP_F_UNSIGNALED;
	EXPECT_EQ(-EINVAL, krdma_connect_recvs(self->cfd, &addr, self->srcp,
					       0, 10000, ops, 1, &h));
	/* One more than KRDMA_EARLY_RECVS_MAX, all of them good RECVs */
	for (i = 0; i <= KRDMA_EARLY_RECVS_MAX; i++)
		kt_op(&many[i], KRDMA_OP_RECV, 0, rw.h, (i % 256) * 16, 16,
		      NULL, 0, i);
	EXPECT_EQ(-EINVAL, connect_rq(self->cfd, &addr, self->srcp,
				      KRDMA_EARLY_RECVS_MAX + 16, many,
				      KRDMA_EARLY_RECVS_MAX + 1, &h));
	/* The reserved field of CONNECT */
	connect_cmd(&c, &addr, self->srcp, 10000, many, 1);
	c.__reserved = 1;
	EXPECT_EQ(-EINVAL, ioc(self->cfd, KRDMA_IOC_CONNECT, &c));
	/* RECVs at an address nothing can be read at */
	EXPECT_EQ(-EFAULT, krdma_connect_recvs(self->cfd, &addr, self->srcp,
					       0, 10000, ctx.hole, 1, &h));
	/* More RECVs than the receive queue holds */
	EXPECT_EQ(-ENOBUFS, connect_rq(self->cfd, &addr, self->srcp, 16, many,
				       rq + 1, &h))
		TH_LOG("%u RECVs, rq_depth %u", rq + 1, rq);
	/* A RECV of more pages than one work request takes */
	ASSERT_EQ(0, kt_mem_get(self->cfd, &big, (max_sge + 2) * PG,
				KRDMA_ACCESS_LOCAL_WRITE));
	kt_op(&ops[0], KRDMA_OP_RECV, 0, big.h, 0, (max_sge + 1) * PG, NULL, 0,
	      1);
	EXPECT_EQ(-EMSGSIZE, krdma_connect_recvs(self->cfd, &addr, self->srcp,
						 0, 10000, ops, 1, &h))
		TH_LOG("a RECV of %u pages, max_recv_sge %u", max_sge + 1,
		       max_sge);

	/*
	 * ACCEPT: RECVs only on a deferred listener, at most 256; good ones
	 * there, with nothing to accept, give what ACCEPT gives without
	 */
	ASSERT_EQ(0, kt_mem_get(self->sfd, &srw, PG, KRDMA_ACCESS_LOCAL_WRITE));
	kt_op(&ops[0], KRDMA_OP_RECV, 0, srw.h, 0, 64, NULL, 0, 1);
	EXPECT_EQ(-EINVAL, krdma_accept_recvs(self->sfd, l,
					      KRDMA_ACCEPT_NONBLOCK, 0, ops, 1,
					      &h));
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 4,
					KRDMA_LISTEN_DEFER_ACCEPT, &dl, NULL));
	for (i = 0; i <= KRDMA_EARLY_RECVS_MAX; i++)
		kt_op(&many[i], KRDMA_OP_RECV, 0, srw.h, (i % 256) * 16, 16,
		      NULL, 0, i);
	EXPECT_EQ(-EINVAL, krdma_accept_recvs(self->sfd, dl,
					      KRDMA_ACCEPT_NONBLOCK, 0, many,
					      KRDMA_EARLY_RECVS_MAX + 1, &h));
	/* More than the listener's receive queue (rq_depth 0: 128) */
	EXPECT_EQ(-ENOBUFS, krdma_accept_recvs(self->sfd, dl,
					       KRDMA_ACCEPT_NONBLOCK, 0, many,
					       129, &h));
	EXPECT_EQ(-EAGAIN, krdma_accept_recvs(self->sfd, dl,
					      KRDMA_ACCEPT_NONBLOCK, 0, ops, 1,
					      &h));
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, dl));

	/* None of it reached the listener, or a completion queue */
	EXPECT_EQ(-EAGAIN, krdma_accept_conn(self->sfd, l,
					     KRDMA_ACCEPT_NONBLOCK, 0, &h));
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, fwc, 1, QUIET_MS));
	EXPECT_EQ(0, krdma_poll_wc(self->sfd, fwc, 1, 0));
	/* Nor holds the buffer they named */
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, rw.h));
	rw.h = 0;
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, ro.h));
	ro.h = 0;
	kt_mem_put(self->sfd, &srw);
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, p));
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sp));

	/*
	 * The limits are allowed: KRDMA_EARLY_RECVS_MAX RECVs, as many as
	 * the receive queue holds, one of max_recv_sge pages. Nothing
	 * arrives: they all end when the connection does, flushed, once
	 * each, with its handle.
	 */
	ASSERT_EQ(0, kt_mem_get(self->cfd, &small, PG,
				KRDMA_ACCESS_LOCAL_WRITE));
	kt_op(&many[0], KRDMA_OP_RECV, 0, big.h, 0, max_sge * PG, NULL, 0,
	      1000);
	for (i = 1; i < KRDMA_EARLY_RECVS_MAX; i++)
		kt_op(&many[i], KRDMA_OP_RECV, 0, small.h, i * 16, 16, NULL, 0,
		      1000 + i);
	ret = connect_rq(self->cfd, &addr, self->srcp, KRDMA_EARLY_RECVS_MAX,
			 many, KRDMA_EARLY_RECVS_MAX, &h);
	ASSERT_EQ(0, ret) TH_LOG("%d RECVs, rq_depth %d: %s",
				 KRDMA_EARLY_RECVS_MAX, KRDMA_EARLY_RECVS_MAX,
				 strerror(-ret));
	ASSERT_EQ(0, krdma_conn_info(self->cfd, h, &q));
	EXPECT_LE(KRDMA_EARLY_RECVS_MAX, q.rq_depth);
	ASSERT_EQ(0, krdma_accept_conn(self->sfd, l, 0, 10000, &sh));
	ASSERT_EQ(0, krdma_conn_info(self->sfd, sh, &q));
	EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, fwc, 1, 0));
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, h));
	got = kt_wait_wc(self->cfd, fwc, KRDMA_EARLY_RECVS_MAX);
	EXPECT_EQ(KRDMA_EARLY_RECVS_MAX, got);
	for (i = 0; i < got; i++) {
		uint64_t n = fwc[i].cookie - 1000;

		EXPECT_EQ(KRDMA_WC_WR_FLUSH_ERR, fwc[i].status)
			TH_LOG("RECV %llu: %s", (unsigned long long)n,
			       krdma_wc_status_str(fwc[i].status));
		EXPECT_EQ(KRDMA_OP_RECV, fwc[i].opcode);
		EXPECT_EQ(h, fwc[i].conn);
		ASSERT_GT(KRDMA_EARLY_RECVS_MAX, n);
		EXPECT_EQ(0, seen[n]) TH_LOG("RECV %llu completed twice",
					     (unsigned long long)n);
		seen[n] = 1;
	}
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sh));
	kt_mem_put(self->cfd, &big);
	kt_mem_put(self->cfd, &small);

	/* A good CONNECT with RECVs: the server SENDs at once */
	ASSERT_EQ(0, kt_mem_get(self->cfd, &rbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &sbuf, NMSG * SLOT, 0));
	recv_ops(recvs, NMSG, &rbuf, 0x100);
	ASSERT_EQ(0, krdma_connect_recvs(self->cfd, &addr, self->srcp, 0,
					 10000, recvs, NMSG, &h));
	ASSERT_EQ(0, krdma_accept_conn(self->sfd, l, 0, 10000, &sh));
	send_ops(sends, NMSG, &sbuf, sh, 7, 0x200);
	ASSERT_EQ(0, krdma_submit_ops(self->sfd, sends, NMSG, 0, NULL));
	got = kt_wait_wc(self->sfd, wc, NMSG);
	check_sends(_metadata, wc, got, NMSG, sh, 0x200);
	got = kt_wait_wc(self->cfd, wc, NMSG);
	check_recvs(_metadata, wc, got, NMSG, h, &rbuf, 7, 0x100);
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, h));
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sh));
	kt_mem_put(self->cfd, &rbuf);
	kt_mem_put(self->sfd, &sbuf);
	kt_mem_put(self->cfd, &rw);
	kt_mem_put(self->cfd, &ro);
	munmap(ctx.hole, 2 * PG);
}

/*
 * CONNECTs that fail after their RECVs were posted: refused, and one
 * whose struct cannot be written back (a read-only page) after it was
 * established and its peer SENDs to it at once. Not one of their RECVs
 * completes, even those that took a message.
 */
TEST_F_TIMEOUT(early, failed_calls_complete_nothing, 120)
{
	struct krdma_op recvs[NMSG], sends[NMSG];
	struct krdma_completion wc[NMSG];
	struct kt_mem rbuf = {}, sbuf = {};
	struct krdma_addr addr;
	struct krdma_connect c;
	struct side srv = {};
	uint32_t l, h, state, stray;
	long t0, ms;
	void *rp;
	int ret;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, kt_mem_get(self->cfd, &rbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &sbuf, NMSG * SLOT, 0));

	/* A port nobody listens on: a free one, listened on and let go */
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 1, 0, &l,
					&addr));
	ASSERT_EQ(0, krdma_destroy_handle(self->sfd, l));
	recv_ops(recvs, NMSG, &rbuf, 0x100);
	t0 = now_ms();
	ret = krdma_connect_recvs(self->cfd, &addr, self->srcp, 0, 10000,
				  recvs, NMSG, &h);
	ms = now_ms() - t0;
	/* As krdma_xfer_test's connect_to_nobody_is_refused */
	EXPECT_TRUE(ret == -ECONNREFUSED || ret == -ECONNRESET)
		TH_LOG("CONNECT to nobody: %s after %ld ms",
		       ret ? strerror(-ret) : "connected", ms);
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, NMSG, QUIET_MS));

	/*
	 * A plain listener, whose server SENDs as soon as it has the
	 * connection (not on iWARP, where that could fail the client's
	 * connect before it came to the write-back: protocol.rst, "Ordering
	 * rules"); the client's CONNECT cannot write its struct back
	 */
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 4, 0, &l,
					&addr));
	send_ops(sends, NMSG, &sbuf, 0, 11, 0x200);
	srv.fd = self->sfd;
	srv.listener = l;
	srv.timeout_ms = 5000;
	srv.sends = sends;
	srv.nsends = self->iwarp ? 0 : NMSG;
	srv.nwait = srv.nsends;
	ASSERT_EQ(0, pthread_create(&srv.thread, NULL, side_main, &srv));
	recv_ops(recvs, NMSG, &rbuf, 0x100);
	connect_cmd(&c, &addr, self->srcp, 10000, recvs, NMSG);
	rp = ro_copy(&c, sizeof(c));
	ASSERT_NE(NULL, rp);
	ret = ioc(self->cfd, KRDMA_IOC_CONNECT, rp);
	EXPECT_EQ(-EFAULT, ret) TH_LOG("CONNECT with a read-only struct: %s",
				       ret ? strerror(-ret) : "succeeded");
	pthread_join(srv.thread, NULL);
	if (!srv.ret) {
		/* Each of its SENDs ends once, whatever the status */
		if (srv.send_ret) {
			EXPECT_EQ(-ENOTCONN, srv.send_ret);
		} else {
			EXPECT_EQ(srv.nsends, srv.nwc);
		}
		state = kt_wait_conn_down(self->sfd, srv.conn);
		EXPECT_EQ(KRDMA_CONN_ERROR, state)
			TH_LOG("the server's end is %s after the failed CONNECT",
			       state == KRDMA_CONN_CONNECTED ?
			       "still connected" : "not in error");
		EXPECT_EQ(0, krdma_destroy_handle(self->sfd, srv.conn));
	} else {
		/* It may drop a connection closed before it was taken */
		TH_LOG("ACCEPT: %s: the server sent nothing",
		       strerror(-srv.ret));
		EXPECT_TRUE(srv.ret == -ETIMEDOUT || srv.ret == -EAGAIN);
	}
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, NMSG, QUIET_MS))
		TH_LOG("a RECV of the failed CONNECT completed: cookie %#llx, %s",
		       (unsigned long long)wc[0].cookie,
		       krdma_wc_status_str(wc[0].status));
	stray = stray_handle(self->cfd, &rbuf.h, 1);
	EXPECT_EQ(0, stray) TH_LOG("handle %u exists: the failed CONNECT left it",
				   stray);
	munmap(rp, PG);
	kt_mem_put(self->cfd, &rbuf);
	kt_mem_put(self->sfd, &sbuf);
}

/*
 * An ACCEPT on a deferred listener whose struct cannot be written back
 * fails with EFAULT before it takes a request: the waiting client's
 * request stays queued, and the next ACCEPT takes it. Nothing of the
 * failed call completes; the client's early RECVs take the server's first
 * SENDs, every byte checked.
 */
TEST_F_TIMEOUT(early, accept_efault_takes_no_request, 120)
{
	struct krdma_op crecvs[NMSG], srecvs[NMSG], ssends[2];
	struct krdma_completion wc[NMSG], rwc[NMSG], swc[NMSG];
	struct kt_mem crbuf = {}, srbuf = {}, ssbuf = {};
	struct krdma_accept a;
	struct krdma_addr addr;
	struct side cli = {};
	uint32_t l, sconn;
	int ret, got, n;
	void *rp;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 4,
					KRDMA_LISTEN_DEFER_ACCEPT, &l, &addr));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &crbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &srbuf, NMSG * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &ssbuf, NMSG * SLOT, 0));

	recv_ops(crecvs, 2, &crbuf, 0x100);
	cli.fd = self->cfd;
	cli.dst = addr;
	cli.src = self->srcp;
	cli.timeout_ms = 10000;
	cli.recvs = crecvs;
	cli.nrecvs = 2;
	cli.nwait = 2;		/* the server's two SENDs */
	ASSERT_EQ(0, pthread_create(&cli.thread, NULL, side_main, &cli));

	recv_ops(srecvs, NMSG, &srbuf, 0x300);
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.listener = l;
	a.timeout_ms = 10000;
	a.recv_count = NMSG;
	a.recvs = (uintptr_t)srecvs;
	rp = ro_copy(&a, sizeof(a));
	ASSERT_NE(NULL, rp);
	ret = ioc(self->sfd, KRDMA_IOC_ACCEPT, rp);
	EXPECT_EQ(-EFAULT, ret) TH_LOG("ACCEPT with a read-only struct: %s",
				       ret ? strerror(-ret) : "succeeded");
	munmap(rp, PG);
	/* Nothing of it completes, and the client still waits in CONNECT */
	EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, NMSG, QUIET_MS));
	EXPECT_EQ(0, atomic_load(&cli.done))
		TH_LOG("the failed ACCEPT ended the client's CONNECT: %s",
		       strerror(-cli.ret));

	/* The next ACCEPT takes the same request */
	ASSERT_EQ(0, krdma_accept_recvs(self->sfd, l, 0, 10000, srecvs, NMSG,
					&sconn));
	/* iWARP: the connecting side first (protocol.rst, "Ordering rules") */
	if (self->iwarp)
		ASSERT_TRUE(flag_wait(&cli.done, 10000));
	send_ops(ssends, 2, &ssbuf, sconn, 21, 0x400);
	ASSERT_EQ(0, krdma_submit_ops(self->sfd, ssends, 2, 0, NULL));
	got = kt_wait_wc(self->sfd, wc, 2);
	pthread_join(cli.thread, NULL);
	ASSERT_EQ(0, cli.ret) TH_LOG("CONNECT: %s after %ld ms",
				     strerror(-cli.ret), cli.ms);
	n = pick(wc, got, KRDMA_OP_SEND, swc);
	check_sends(_metadata, swc, n, 2, sconn, 0x400);
	n = pick(cli.wc, cli.nwc, KRDMA_OP_RECV, rwc);
	check_recvs(_metadata, rwc, n, 2, cli.conn, &crbuf, 21, 0x100);
	/* The server's RECVs are still posted: nothing else came */
	EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, NMSG, 0));
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cli.conn));
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sconn));
	/* Now they flush, once each, with the handle ACCEPT returned */
	got = kt_wait_wc(self->sfd, wc, NMSG);
	EXPECT_EQ(NMSG, got);
	for (n = 0; n < got; n++) {
		EXPECT_EQ(KRDMA_WC_WR_FLUSH_ERR, wc[n].status);
		EXPECT_EQ(sconn, wc[n].conn);
	}
	kt_mem_put(self->cfd, &crbuf);
	kt_mem_put(self->sfd, &srbuf);
	kt_mem_put(self->sfd, &ssbuf);

	deferred_exchange(_metadata, self, l, &addr, 9);
}

/*
 * Requests that krdma holds unaccepted (passive connections still
 * CONNECTING, in /sys/kernel/debug/krdma/connections): polled, as nothing
 * tells userspace, every 10 ms for up to @ms. Return: how many at the end.
 */
static int requests_held(int want, long ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	long t0 = now_ms();
	char line[512];
	int n;

	do {
		FILE *f = fopen("/sys/kernel/debug/krdma/connections", "r");

		if (!f)
			return -1;
		n = 0;
		while (fgets(line, sizeof(line), f))
			n += strstr(line, " state=CONNECTING ") &&
			     strstr(line, " passive=1 ");
		fclose(f);
		if (n >= want)
			break;
		nanosleep(&ts, NULL);
	} while (now_ms() - t0 < ms);
	return n;
}

/*
 * Three requests at a deferred listener; ACCEPT takes one, whose client
 * SENDs into the ACCEPT's RECV. DESTROY of the listener refuses the other
 * two at once; the accepted connection carries on.
 */
TEST_F_TIMEOUT(early, listener_closed_with_requests_waiting, 120)
{
	struct kt_mem csbuf[3] = {}, srbuf = {};
	struct krdma_op csend[3], srecv, op;
	struct krdma_completion wc;
	struct side cli[3] = {};
	struct krdma_addr addr;
	uint32_t l, sconn, len;
	int cfd[3], i, k, got;
	long t0;

	NEED_EARLY_RECVS();
	ASSERT_EQ(0, krdma_listen_flags(self->sfd, &self->ip, 8,
					KRDMA_LISTEN_DEFER_ACCEPT, &l, &addr));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &srbuf, 2 * SLOT,
				KRDMA_ACCESS_LOCAL_WRITE));
	cfd[0] = self->cfd;
	cfd[1] = krdma_open();
	cfd[2] = krdma_open();
	ASSERT_LE(0, cfd[1]);
	ASSERT_LE(0, cfd[2]);
	/* Client i SENDs 100 + 100 * i bytes of pattern 50 + i */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, kt_mem_get(cfd[i], &csbuf[i], 2 * SLOT, 0));
		kt_pattern(csbuf[i].p, 100 + 100 * i, 50 + i);
		kt_op(&csend[i], KRDMA_OP_SEND, 0, csbuf[i].h, 0, 100 + 100 * i,
		      NULL, 0, 0x200 + i);
		cli[i].fd = cfd[i];
		cli[i].dst = addr;
		cli[i].src = self->srcp;
		cli[i].timeout_ms = 15000;
		cli[i].sends = &csend[i];
		cli[i].nsends = 1;
		cli[i].nwait = 1;
	}
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, pthread_create(&cli[i].thread, NULL, side_main,
					    &cli[i]));
	}

	kt_op(&srecv, KRDMA_OP_RECV, 0, srbuf.h, 0, RLEN, NULL, 0, 0x300);
	ASSERT_EQ(0, krdma_accept_recvs(self->sfd, l, 0, 10000, &srecv, 1,
					&sconn));
	ASSERT_EQ(1, kt_wait_wc(self->sfd, &wc, 1));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status)
		TH_LOG("RECV: %s", krdma_wc_status_str(wc.status));
	EXPECT_EQ(sconn, wc.conn);
	EXPECT_EQ(0x300, wc.cookie);
	/* Whose it is: the length tells */
	for (k = 0; k < 3 && wc.byte_len != 100 + 100 * (uint32_t)k; k++)
		;
	ASSERT_GT(3, k) TH_LOG("a RECV of %u bytes", wc.byte_len);
	len = 100 + 100 * k;
	EXPECT_EQ(-1, kt_check_pattern(srbuf.p, len, 50 + k));
	EXPECT_EQ(-1, kt_check_fill(srbuf.p + len, SLOT - len, KT_GUARD));
	/* The other two still wait for an ACCEPT */
	for (i = 0; i < 3; i++) {
		if (i == k)
			continue;
		EXPECT_EQ(0, atomic_load(&cli[i].done))
			TH_LOG("client %d: %s after %ld ms, before the listener was closed",
			       i, strerror(-cli[i].ret), cli[i].ms);
	}

	/*
	 * Both have reached krdma: a request still in the driver when the
	 * listener goes is not krdma's to refuse (siw leaves it to its MPA
	 * timeout, 10 s)
	 */
	ASSERT_EQ(2, requests_held(2, 10000))
		TH_LOG("requests held by krdma (-1: no debugfs)");
	t0 = now_ms();
	ASSERT_EQ(0, krdma_destroy_handle(self->sfd, l));
	for (i = 0; i < 3; i++)
		pthread_join(cli[i].thread, NULL);
	TH_LOG("the two waiting clients returned within %ld ms of the close",
	       now_ms() - t0);
	ASSERT_EQ(0, cli[k].ret) TH_LOG("CONNECT: %s", strerror(-cli[k].ret));
	EXPECT_EQ(0, cli[k].send_ret);
	ASSERT_EQ(1, cli[k].nwc);
	EXPECT_EQ(KRDMA_WC_SUCCESS, cli[k].wc[0].status);
	EXPECT_EQ(0x200 + k, cli[k].wc[0].cookie);
	for (i = 0; i < 3; i++) {
		if (i == k)
			continue;
		EXPECT_NE(0, cli[i].ret) TH_LOG("client %d connected", i);
		EXPECT_NE(-ETIMEDOUT, cli[i].ret)
			TH_LOG("client %d: refused by nobody, gave up after %ld ms",
			       i, cli[i].ms);
		if (!cli[i].ret)
			krdma_destroy_handle(cfd[i], cli[i].conn);
		EXPECT_EQ(0, krdma_poll_wc(cfd[i], &wc, 1, 0));
	}

	/* The accepted connection goes on without its listener */
	kt_op(&op, KRDMA_OP_RECV, sconn, srbuf.h, SLOT, RLEN, NULL, 0, 0x301);
	ASSERT_EQ(0, krdma_submit_ops(self->sfd, &op, 1, 0, NULL));
	kt_pattern(csbuf[k].p + SLOT, 3000, 60 + k);
	kt_op(&op, KRDMA_OP_SEND, cli[k].conn, csbuf[k].h, SLOT, 3000, NULL, 0,
	      0x201);
	ASSERT_EQ(0, krdma_submit_ops(cfd[k], &op, 1, 0, NULL));
	ASSERT_EQ(1, kt_wait_wc(cfd[k], &wc, 1));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status)
		TH_LOG("SEND: %s", krdma_wc_status_str(wc.status));
	got = kt_wait_wc(self->sfd, &wc, 1);
	ASSERT_EQ(1, got);
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status)
		TH_LOG("RECV: %s", krdma_wc_status_str(wc.status));
	EXPECT_EQ(0x301, wc.cookie);
	EXPECT_EQ(sconn, wc.conn);
	EXPECT_EQ(3000, wc.byte_len);
	EXPECT_EQ(-1, kt_check_pattern(srbuf.p + SLOT, 3000, 60 + k));
	EXPECT_EQ(-1, kt_check_fill(srbuf.p + SLOT + 3000, SLOT - 3000,
				    KT_GUARD));

	EXPECT_EQ(0, krdma_destroy_handle(cfd[k], cli[k].conn));
	EXPECT_EQ(0, krdma_destroy_handle(self->sfd, sconn));
	for (i = 0; i < 3; i++)
		kt_mem_put(cfd[i], &csbuf[i]);
	kt_mem_put(self->sfd, &srbuf);
	close(cfd[1]);
	close(cfd[2]);
}

TEST_HARNESS_MAIN
