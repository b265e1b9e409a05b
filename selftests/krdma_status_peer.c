// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_status_peer: a helper of krdma_status_test.sh. It makes
 * connections and buffers with known traffic, or tries to pass the
 * per-user limits, then holds everything while the test looks at
 * `krdmactl status`, debugfs and the trace, until its stdin says so.
 *
 *   krdma_status_peer traffic ADDR SIZE COUNT
 *	One connection over ADDR (a server file listens, a client file
 *	connects). COUNT times: RDMA WRITE SIZE bytes into a granted
 *	window, READ them back, SEND 64 bytes to a posted RECV, and a
 *	FETCH_ADD where the device has atomics; every byte checked.
 *	Prints what krdma must have counted, then "ready". On a stdin
 *	line "fail": makes a second connection, posts a RECV on the first
 *	client connection and then a WRITE on it with a token of the
 *	second connection, which the peer refuses; prints both
 *	completions' statuses, then "ready". Exits at the end of stdin.
 *
 *   krdma_status_peer conns ADDR N
 *	Listens on ADDR and connects N times, then accepts one; then
 *	destroys the first connection and accepts again. Prints each
 *	result ("connect 3 ok", "accept EMFILE"), then "ready"; exits at
 *	the end of stdin.
 *
 *   krdma_status_peer bufs N
 *	Registers N buffers of one page. Prints each result, then "ready";
 *	exits at the end of stdin.
 *
 *   krdma_status_peer grants ADDR N
 *	One connection over ADDR and a buffer of one page, granted N
 *	times to it; then destroys the first grant and grants again.
 *	Prints each result ("grant 3 ok", "grant 4 EMFILE"), then "ready";
 *	exits at the end of stdin.
 *
 *   krdma_status_peer granted_bufs ADDR
 *	Against max_bufs_per_user set to 3 by the test, one file connected
 *	to itself over ADDR: buffers A, B and C, a grant of A, A destroyed
 *	(its grant still holds its pages), then a buffer (EMFILE); the
 *	grant destroyed, a buffer again (ok); B destroyed, another (ok).
 *	Prints each result ("buf_while_granted EMFILE"), then "ready";
 *	exits at the end of stdin.
 *
 *   krdma_status_peer qdepth ADDR
 *	Against max_queue_depth_per_user set to 1100 by the test, with
 *	queue entries of sq_depth + rq_depth per connection (the default
 *	depths 128 + 128) and backlog x that per listener: a listener of
 *	backlog 2 (512), one of backlog 4 (1024 more: EMFILE), a CONNECT
 *	of depths 16 + 16, one of 4096 + 4096 (EMFILE), the ACCEPT of the
 *	first (256), a CONNECT of the default depths (256), its ACCEPT
 *	(EMFILE, it stays queued), then once the first accepted
 *	connection is destroyed, that ACCEPT again: 1056 held. Prints each
 *	result ("connect_huge EMFILE"), then "ready"; exits at the end of
 *	stdin.
 *
 *   krdma_status_peer windows ADDR
 *	Against max_window_pages_per_user set to 40 and max_grants_per_user
 *	to 3 by the test, one file connected to itself over ADDR (siw: a
 *	16-page SEND or RECV needs a local window there), buffers A and R
 *	of 16 pages: grants of A (16 pages each) until the third passes 40
 *	pages (EMFILE); one grant destroyed, a RECV into R (its local
 *	window: 16 pages and a grant), a SEND of A (16 more pages: EMFILE);
 *	the first grant destroyed, the SEND again (ok, its bytes checked in
 *	R); a grant of one page (the third window: ok, 33 pages), another
 *	(the fourth: EMFILE by max_grants_per_user). Prints each result
 *	("send_big EMFILE"), then "ready"; exits at the end of stdin.
 *
 * Exit status: 0, or 1 when something other than what is printed as a
 * result failed (a transfer, a byte that is wrong), 2 bad usage.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdma_test_lib.h"

#define MSG_LEN		64
#define WAIT_MS		30000
#define GUARD		0xee

static void die(const char *what, int err)
{
	fprintf(stderr, "krdma_status_peer: %s: %s\n", what,
		strerror(err < 0 ? -err : err));
	exit(1);
}

static void check(int ret, const char *what)
{
	if (ret < 0)
		die(what, ret);
}

static const char *result(int ret)
{
	const char *name;

	if (!ret)
		return "ok";
	name = strerrorname_np(ret < 0 ? -ret : ret);
	return name ? name : "unknown";
}

struct mem {
	uint8_t *p;
	size_t len;
	uint32_t h;
};

static int mem_get(int fd, struct mem *m, size_t len, uint32_t access)
{
	m->len = len;
	m->h = 0;
	m->p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m->p == MAP_FAILED)
		return -errno;
	memset(m->p, GUARD, len);
	return krdma_buf_register(fd, m->p, len, access, &m->h);
}

static uint8_t byte_of(size_t i, unsigned int seed)
{
	return (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = byte_of(i, seed);
}

static void verify(const uint8_t *p, size_t len, unsigned int seed,
		   const char *what)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != byte_of(i, seed)) {
			fprintf(stderr, "krdma_status_peer: %s: byte %zu is %#x, want %#x\n",
				what, i, p[i], byte_of(i, seed));
			exit(1);
		}
	}
}

static void op_init(struct krdma_op *op, uint32_t opcode, uint32_t conn,
		    const struct mem *m, uint64_t len,
		    const struct krdma_token *tok)
{
	memset(op, 0, sizeof(*op));
	op->opcode = opcode;
	op->conn = conn;
	op->cookie = opcode;
	op->num_sge = len ? 1 : 0;
	op->sge.buf = m->h;
	op->sge.length = len;
	if (tok)
		op->remote = *tok;
}

/* Submit one operation on @fd; its completion status */
static uint32_t run_op(int fd, struct krdma_op *op)
{
	struct krdma_completion wc;
	int ret;

	check(krdma_submit_ops(fd, op, 1, 0, NULL), "submit");
	ret = krdma_poll_wc(fd, &wc, 1, WAIT_MS);
	if (ret != 1)
		die("waiting for a completion", ret < 0 ? ret : -ETIMEDOUT);
	return wc.status;
}

static void expect_ok(uint32_t status, const char *what)
{
	if (status != KRDMA_WC_SUCCESS) {
		fprintf(stderr, "krdma_status_peer: %s: %s\n", what,
			krdma_wc_status_str(status));
		exit(1);
	}
}

struct pair {
	int sfd, cfd;
	uint32_t listener, sconn, cconn;
};

static void connect_pair(struct pair *p, const char *ip)
{
	struct krdma_addr any, addr;

	p->sfd = krdma_open();
	check(p->sfd, "open");
	p->cfd = krdma_open();
	check(p->cfd, "open");
	check(krdma_parse_addr(ip, 0, &any), "address");
	check(krdma_listen_on(p->sfd, &any, 4, &p->listener, &addr), "listen");
	check(krdma_connect_to(p->cfd, &addr, 10000, &p->cconn), "connect");
	check(krdma_accept_conn(p->sfd, p->listener, 0, 10000, &p->sconn),
	      "accept");
}

static void print_conn(const char *side, int fd, uint32_t conn)
{
	struct krdma_conn_query q;
	char l[64], r[64];

	check(krdma_conn_info(fd, conn, &q), "conn query");
	printf("conn %s local=%s peer=%s\n", side,
	       krdma_addr_str(&q.local, l, sizeof(l)),
	       krdma_addr_str(&q.peer, r, sizeof(r)));
}

static long since_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	       (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* The state of @conn once it left CONNECTED, or after @ms */
static uint32_t wait_conn_down(int fd, uint32_t conn, long ms)
{
	struct timespec t0, ts = { 0, 5 * 1000 * 1000 };
	struct krdma_conn_query q;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		check(krdma_conn_info(fd, conn, &q), "conn query");
		if (q.state != KRDMA_CONN_CONNECTED || since_ms(&t0) >= ms)
			return q.state;
		nanosleep(&ts, NULL);
	}
}

/* Wait for a stdin line; false at the end of stdin */
static bool next_command(char *line, size_t len)
{
	fflush(stdout);
	if (!fgets(line, len, stdin))
		return false;
	line[strcspn(line, "\n")] = '\0';
	return true;
}

/*
 * A WRITE on the client connection of @p with a token of another
 * connection, behind a RECV: prints the status of both
 */
#define REFUSED_LEN (64 * 1024)

static void refused_write(struct pair *p, const char *ip, struct mem *src,
			  struct mem *back)
{
	struct krdma_completion wc;
	struct krdma_token tok;
	struct timespec t0;
	struct krdma_op op;
	struct mem qdst;
	struct pair q;
	int i;

	/*
	 * One registration (siw maps 256 pages): a token with a key table
	 * would fail already in SUBMIT, whose READ of the table is refused
	 */
	size_t len = src->len < REFUSED_LEN ? src->len : REFUSED_LEN;

	connect_pair(&q, ip);
	check(mem_get(q.sfd, &qdst, len, KRDMA_ACCESS_LOCAL_WRITE |
		      KRDMA_ACCESS_REMOTE_WRITE), "register");
	check(krdma_grant_window(q.sfd, q.sconn, qdst.h, 0, len,
				 KRDMA_ACCESS_REMOTE_WRITE, NULL, &tok),
	      "grant");
	/* Flushed when the connection fails: on iWARP the WRITE may not fail */
	op_init(&op, KRDMA_OP_RECV, p->cconn, back, back->len, NULL);
	check(krdma_submit_ops(p->cfd, &op, 1, 0, NULL), "submit RECV");
	fill(src->p, len, 99);
	op_init(&op, KRDMA_OP_WRITE, p->cconn, src, len, &tok);
	check(krdma_submit_ops(p->cfd, &op, 1, 0, NULL), "submit WRITE");
	for (i = 0; i < 2; i++) {
		if (krdma_poll_wc(p->cfd, &wc, 1, WAIT_MS) != 1)
			die("waiting for the failure", -ETIMEDOUT);
		printf("%s status=%u\n", krdma_opcode_str((uint32_t)wc.cookie),
		       wc.status);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < (int)qdst.len; i++)
		if (qdst.p[i] != GUARD)
			die("the refused WRITE wrote", -EILSEQ);
	/*
	 * The test then looks for the connection in ERROR: it goes there from
	 * krdma's workqueue, maybe after the completions; wait, at most 10 s
	 */
	printf("state %u, %ld ms after the completions\n",
	       wait_conn_down(p->cfd, p->cconn, 10000), since_ms(&t0));
}

static int traffic(const char *ip, size_t size, unsigned int count)
{
	struct mem src, back, dst, smsg, rmsg, lword = {}, rword = {};
	struct krdma_completion wc;
	struct krdma_token tok, atok;
	struct krdma_conn_query cq;
	struct krdma_dev_query dq;
	struct krdma_op op;
	struct pair p;
	bool atomics;
	char line[64];
	unsigned int i;
	uint64_t word;

	connect_pair(&p, ip);
	check(krdma_conn_info(p.cfd, p.cconn, &cq), "conn query");
	check(krdma_dev_query(p.cfd, cq.dev_index, &dq), "dev query");
	atomics = dq.atomic_cap != KRDMA_ATOMIC_NONE;

	check(mem_get(p.cfd, &src, size, 0), "register");
	check(mem_get(p.cfd, &back, size, KRDMA_ACCESS_LOCAL_WRITE),
	      "register");
	check(mem_get(p.cfd, &smsg, MSG_LEN, 0), "register");
	check(mem_get(p.sfd, &dst, size, KRDMA_ACCESS_LOCAL_WRITE |
		      KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE),
	      "register");
	check(mem_get(p.sfd, &rmsg, MSG_LEN, KRDMA_ACCESS_LOCAL_WRITE),
	      "register");
	check(krdma_grant_window(p.sfd, p.sconn, dst.h, 0, size,
				 KRDMA_ACCESS_REMOTE_READ |
				 KRDMA_ACCESS_REMOTE_WRITE, NULL, &tok),
	      "grant");
	if (atomics) {
		check(mem_get(p.cfd, &lword, 8, KRDMA_ACCESS_LOCAL_WRITE),
		      "register");
		check(mem_get(p.sfd, &rword, 8, KRDMA_ACCESS_LOCAL_WRITE |
			      KRDMA_ACCESS_REMOTE_ATOMIC), "register");
		memset(rword.p, 0, 8);
		check(krdma_grant_window(p.sfd, p.sconn, rword.h, 0, 8,
					 KRDMA_ACCESS_REMOTE_ATOMIC, NULL,
					 &atok), "grant");
	}

	for (i = 0; i < count; i++) {
		fill(src.p, size, 2 * i);
		op_init(&op, KRDMA_OP_WRITE, p.cconn, &src, size, &tok);
		expect_ok(run_op(p.cfd, &op), "WRITE");
		/*
		 * iWARP: placed a moment after the completion. Waited for,
		 * also so that no late byte lands on the fill() below
		 */
		kt_wait_bytes(dst.p, src.p, size, KT_PLACE_MS);
		verify(dst.p, size, 2 * i, "WRITE");

		fill(dst.p, size, 2 * i + 1);
		op_init(&op, KRDMA_OP_READ, p.cconn, &back, size, &tok);
		expect_ok(run_op(p.cfd, &op), "READ");
		verify(back.p, size, 2 * i + 1, "READ");

		/* The RECV first: iWARP has no receiver-not-ready retry */
		memset(rmsg.p, GUARD, MSG_LEN);
		op_init(&op, KRDMA_OP_RECV, p.sconn, &rmsg, MSG_LEN, NULL);
		check(krdma_submit_ops(p.sfd, &op, 1, 0, NULL), "submit RECV");
		fill(smsg.p, MSG_LEN, 3 * i);
		op_init(&op, KRDMA_OP_SEND, p.cconn, &smsg, MSG_LEN, NULL);
		expect_ok(run_op(p.cfd, &op), "SEND");
		if (krdma_poll_wc(p.sfd, &wc, 1, WAIT_MS) != 1)
			die("waiting for the RECV", -ETIMEDOUT);
		expect_ok(wc.status, "RECV");
		if (wc.byte_len != MSG_LEN)
			die("RECV length", -EMSGSIZE);
		verify(rmsg.p, MSG_LEN, 3 * i, "SEND");

		if (atomics) {
			op_init(&op, KRDMA_OP_FETCH_ADD, p.cconn, &lword, 8,
				&atok);
			op.compare_add = 5;
			expect_ok(run_op(p.cfd, &op), "FETCH_ADD");
			memcpy(&word, lword.p, 8);
			if (word != 5ULL * i)
				die("FETCH_ADD old value", -EILSEQ);
		}
	}
	if (atomics) {
		memcpy(&word, rword.p, 8);
		if (word != 5ULL * count)
			die("FETCH_ADD result", -EILSEQ);
	}

	print_conn("client", p.cfd, p.cconn);
	print_conn("server", p.sfd, p.sconn);
	printf("expect client write_done=%u write_bytes=%zu read_done=%u read_bytes=%zu send_done=%u send_bytes=%u atomic_done=%u atomic_bytes=%u\n",
	       count, count * size, count, count * size, count,
	       count * MSG_LEN, atomics ? count : 0, atomics ? count * 8 : 0);
	printf("expect server recv_done=%u recv_bytes=%u\n", count,
	       count * MSG_LEN);
	printf("buffers pid=%d sizes=%zu,%zu,%u,%zu,%u%s grants=%zu:1%s\n",
	       (int)getpid(), size, size, MSG_LEN, size, MSG_LEN,
	       atomics ? ",8,8" : "", size, atomics ? ",8:1" : "");
	printf("ready\n");

	while (next_command(line, sizeof(line))) {
		if (strcmp(line, "fail")) {
			fprintf(stderr, "krdma_status_peer: unknown command '%s'\n",
				line);
			return 2;
		}
		refused_write(&p, ip, &src, &back);
		printf("ready\n");
	}
	return 0;
}

/* A file connected to itself over @ip: its two ends */
static int self_pair(const char *ip, uint32_t *cconn, uint32_t *sconn)
{
	struct krdma_addr any, addr;
	uint32_t listener;
	int fd;

	fd = krdma_open();
	check(fd, "open");
	check(krdma_parse_addr(ip, 0, &any), "address");
	check(krdma_listen_on(fd, &any, 4, &listener, &addr), "listen");
	check(krdma_connect_to(fd, &addr, 10000, cconn), "connect");
	check(krdma_accept_conn(fd, listener, 0, 10000, sconn), "accept");
	return fd;
}

/* Say "ready", then hold everything until the end of stdin */
static int hold(void)
{
	printf("ready\n");
	while (next_command((char[8]){}, 8))
		;
	return 0;
}

static int conns(const char *ip, unsigned int n)
{
	struct krdma_addr any, addr;
	uint32_t listener, first = 0, c;
	unsigned int i;
	int fd, ret;

	fd = krdma_open();
	check(fd, "open");
	check(krdma_parse_addr(ip, 0, &any), "address");
	check(krdma_listen_on(fd, &any, n + 4, &listener, &addr), "listen");
	for (i = 1; i <= n; i++) {
		ret = krdma_connect_to(fd, &addr, 10000, &c);
		printf("connect %u %s\n", i, result(ret));
		if (!ret && !first)
			first = c;
	}
	ret = krdma_accept_conn(fd, listener, 0, 10000, &c);
	printf("accept %s\n", result(ret));
	if (first)
		check(krdma_destroy_handle(fd, first), "destroy");
	ret = krdma_accept_conn(fd, listener, 0, 10000, &c);
	printf("accept_after_destroy %s\n", result(ret));
	return hold();
}

static int bufs(unsigned int n)
{
	struct mem m;
	unsigned int i;
	int fd, ret;

	fd = krdma_open();
	check(fd, "open");
	for (i = 1; i <= n; i++) {
		ret = mem_get(fd, &m, 4096, 0);
		printf("buf %u %s\n", i, result(ret));
	}
	return hold();
}

static int grants(const char *ip, unsigned int n)
{
	uint32_t sconn, cconn, g, first = 0;
	struct krdma_token tok;
	struct mem m;
	unsigned int i;
	int fd, ret;

	fd = self_pair(ip, &cconn, &sconn);
	check(mem_get(fd, &m, 4096, KRDMA_ACCESS_REMOTE_READ), "buffer");
	for (i = 1; i <= n; i++) {
		ret = krdma_grant_window(fd, sconn, m.h, 0, 4096,
					 KRDMA_ACCESS_REMOTE_READ, &g, &tok);
		printf("grant %u %s\n", i, result(ret));
		if (!ret && !first)
			first = g;
	}
	if (first)
		check(krdma_destroy_handle(fd, first), "destroy");
	ret = krdma_grant_window(fd, sconn, m.h, 0, 4096,
				 KRDMA_ACCESS_REMOTE_READ, &g, &tok);
	printf("grant_after_destroy %s\n", result(ret));
	return hold();
}

static int granted_bufs(const char *ip)
{
	uint32_t sconn, cconn, g;
	struct mem a, b, c, d, e;
	struct krdma_token tok;
	int fd, ret;

	fd = self_pair(ip, &cconn, &sconn);
	check(mem_get(fd, &a, 4096, KRDMA_ACCESS_REMOTE_READ), "buffer A");
	check(mem_get(fd, &b, 4096, 0), "buffer B");
	check(mem_get(fd, &c, 4096, 0), "buffer C");
	check(krdma_grant_window(fd, sconn, a.h, 0, 4096,
				 KRDMA_ACCESS_REMOTE_READ, &g, &tok), "grant");
	check(krdma_destroy_handle(fd, a.h), "destroy A");
	ret = mem_get(fd, &d, 4096, 0);
	printf("buf_while_granted %s\n", result(ret));
	check(krdma_destroy_handle(fd, g), "destroy the grant");
	if (ret)
		ret = mem_get(fd, &d, 4096, 0);
	printf("buf_after_grant %s\n", result(ret));
	check(krdma_destroy_handle(fd, b.h), "destroy B");
	ret = mem_get(fd, &e, 4096, 0);
	printf("buf_after_destroy %s\n", result(ret));
	return hold();
}

/* CONNECT to @addr with queue depths @sq and @rq: 0 or -errno */
static int connect_depth(int fd, const struct krdma_addr *addr, uint32_t sq,
			 uint32_t rq, uint32_t *handle)
{
	struct krdma_connect c = {
		.size = sizeof(c),
		.dst = *addr,
		.sq_depth = sq,
		.rq_depth = rq,
		.timeout_ms = 10000,
	};

	if (ioctl(fd, KRDMA_IOC_CONNECT, &c))
		return -errno;
	*handle = c.handle;
	return 0;
}

static int qdepth(const char *ip)
{
	uint32_t listener, big, c1, c2, huge, s1, s2;
	struct krdma_addr any, addr, addr2;
	int fd, ret;

	fd = krdma_open();
	check(fd, "open");
	check(krdma_parse_addr(ip, 0, &any), "address");
	ret = krdma_listen_on(fd, &any, 2, &listener, &addr);
	printf("listen %s\n", result(ret));
	check(ret, "listen");
	ret = krdma_listen_on(fd, &any, 4, &big, &addr2);
	printf("listen_big %s\n", result(ret));
	ret = connect_depth(fd, &addr, 16, 16, &c1);
	printf("connect_small %s\n", result(ret));
	check(ret, "connect");
	ret = connect_depth(fd, &addr, 4096, 4096, &huge);
	printf("connect_huge %s\n", result(ret));
	ret = krdma_accept_conn(fd, listener, 0, 10000, &s1);
	printf("accept_small %s\n", result(ret));
	check(ret, "accept");
	ret = connect_depth(fd, &addr, 0, 0, &c2);
	printf("connect_default %s\n", result(ret));
	check(ret, "connect");
	ret = krdma_accept_conn(fd, listener, 0, 10000, &s2);
	printf("accept_default %s\n", result(ret));
	check(krdma_destroy_handle(fd, s1), "destroy");
	ret = krdma_accept_conn(fd, listener, 0, 10000, &s2);
	printf("accept_after_destroy %s\n", result(ret));
	return hold();
}

/* Submit one operation: 0 or -errno, nothing polled */
static int submit_one(int fd, struct krdma_op *op)
{
	return krdma_submit_ops(fd, op, 1, 0, NULL);
}

static int windows(const char *ip)
{
	const size_t len = 16 * 4096;
	uint32_t sconn, cconn, g1, g2, g;
	struct krdma_completion wc[2];
	struct krdma_token tok;
	struct krdma_op send, recv;
	struct mem a, r;
	int fd, ret, i;

	fd = self_pair(ip, &cconn, &sconn);
	check(mem_get(fd, &a, len, KRDMA_ACCESS_REMOTE_READ), "buffer A");
	check(mem_get(fd, &r, len, KRDMA_ACCESS_LOCAL_WRITE), "buffer R");
	fill(a.p, len, 5);

	check(krdma_grant_window(fd, sconn, a.h, 0, len,
				 KRDMA_ACCESS_REMOTE_READ, &g1, &tok),
	      "grant 1");
	check(krdma_grant_window(fd, sconn, a.h, 0, len,
				 KRDMA_ACCESS_REMOTE_READ, &g2, &tok),
	      "grant 2");
	ret = krdma_grant_window(fd, sconn, a.h, 0, len,
				 KRDMA_ACCESS_REMOTE_READ, &g, &tok);
	printf("grant_pages %s\n", result(ret));
	check(krdma_destroy_handle(fd, g2), "destroy grant 2");

	op_init(&recv, KRDMA_OP_RECV, sconn, &r, len, NULL);
	ret = submit_one(fd, &recv);
	printf("recv_big %s\n", result(ret));
	check(ret, "recv");
	op_init(&send, KRDMA_OP_SEND, cconn, &a, len, NULL);
	ret = submit_one(fd, &send);
	printf("send_big %s\n", result(ret));
	check(krdma_destroy_handle(fd, g1), "destroy grant 1");
	ret = submit_one(fd, &send);
	printf("send_big_after_destroy %s\n", result(ret));
	check(ret, "send");
	for (i = 0; i < 2; i += ret) {
		ret = krdma_poll_wc(fd, wc + i, 2 - i, WAIT_MS);
		if (ret <= 0)
			die("waiting for the SEND and the RECV",
			    ret < 0 ? ret : -ETIMEDOUT);
	}
	for (i = 0; i < 2; i++)
		expect_ok(wc[i].status, wc[i].opcode == KRDMA_OP_SEND ?
			  "SEND" : "RECV");
	verify(r.p, len, 5, "the RECV's buffer");
	printf("bytes ok\n");

	ret = krdma_grant_window(fd, sconn, a.h, 0, 4096,
				 KRDMA_ACCESS_REMOTE_READ, &g, &tok);
	printf("grant_page %s\n", result(ret));
	ret = krdma_grant_window(fd, sconn, a.h, 4096, 4096,
				 KRDMA_ACCESS_REMOTE_READ, &g, &tok);
	printf("grant_page_past_grants %s\n", result(ret));
	return hold();
}

int main(int argc, char *argv[])
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };

	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	setrlimit(RLIMIT_MEMLOCK, &unlimited);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (argc == 5 && !strcmp(argv[1], "traffic"))
		return traffic(argv[2], strtoul(argv[3], NULL, 0),
			       strtoul(argv[4], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "conns"))
		return conns(argv[2], strtoul(argv[3], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "bufs"))
		return bufs(strtoul(argv[2], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "grants"))
		return grants(argv[2], strtoul(argv[3], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "granted_bufs"))
		return granted_bufs(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "qdepth"))
		return qdepth(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "windows"))
		return windows(argv[2]);
	fprintf(stderr, "usage: %s traffic ADDR SIZE COUNT | conns ADDR N | bufs N | grants ADDR N | granted_bufs ADDR | qdepth ADDR | windows ADDR\n",
		argv[0]);
	return 2;
}
