// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: a file of /dev/krdma across fork(), dup(), execve() and
 * SCM_RIGHTS. The rules (Documentation/userspace-api.rst, "Processes and
 * file descriptors"):
 *
 * - Objects belong to the open file: every process that holds the file
 *   may query, connect, listen, submit, poll, destroy, whatever process
 *   made them. The completion queue is the file's: each completion is
 *   taken by exactly one POLL, of whichever process calls it.
 * - Memory belongs to the mm that registered it: a buffer is the pages
 *   that were mapped in the registering process. Only that process (its
 *   threads) may name the buffer in a SUBMIT or GRANT (EPERM for every
 *   other one: a child after fork(), the image after execve(), a process
 *   the file was passed to). Any process may register its own memory.
 * - The pages stay with the registering process across fork() (the child
 *   gets copies), stay pinned after it unmaps them or exits, until the
 *   buffer is destroyed or the file closed.
 *
 * Each test forks; a child reports a failed check on stderr and in its
 * exit status.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "krdma_test_lib.h"
#include "kselftest_harness.h"

#define PG 4096UL
#define WIN_LEN (256 * 1024)	/* the server's granted window */
#define MSG_LEN (1024 * 1024)	/* more pages than a WR has SGEs */
#define EXEC_ENV "KRDMA_FORK_TEST_EXEC"

/* In a child: report a failed check and exit with its line number */
#define CHILD_CHECK(cond, fmt, ...)					\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "# child %d: %s:%d: %s: " fmt "\n", \
				getpid(), __func__, __LINE__, #cond,	\
				##__VA_ARGS__);				\
			_exit(__LINE__ & 0x7f ?: 1);			\
		}							\
	} while (0)

FIXTURE(fork) {
	int sfd, cfd;
	uint32_t listener, sconn, cconn;
	struct krdma_addr addr;
	struct kt_mem win;		/* the server's window */
	struct krdma_token tok;		/* of win, READ and WRITE, on sconn */
};

FIXTURE_VARIANT(fork) {
	const char *ip;
	const char *dev;
};

FIXTURE_VARIANT_ADD(fork, rxe) {
	.ip = "198.18.0.1",
	.dev = "rxe0",
};

FIXTURE_VARIANT_ADD(fork, siw) {
	.ip = "198.18.1.1",
	.dev = "siw0",
};

FIXTURE_SETUP(fork)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct krdma_addr any;

	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &unlimited));
	self->sfd = krdma_open();
	self->cfd = krdma_open();
	ASSERT_LE(0, self->sfd);
	ASSERT_LE(0, self->cfd);
	ASSERT_EQ(0, krdma_parse_addr(variant->ip, 0, &any));
	ASSERT_EQ(0, krdma_listen_on(self->sfd, &any, 16, &self->listener,
				     &self->addr));
	ASSERT_EQ(0, kt_connect_pair(self->sfd, self->listener, &self->addr,
				     self->cfd, &self->sconn, &self->cconn));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &self->win, WIN_LEN,
				KRDMA_ACCESS_LOCAL_WRITE |
				KRDMA_ACCESS_REMOTE_READ |
				KRDMA_ACCESS_REMOTE_WRITE));
	ASSERT_EQ(0, krdma_grant_window(self->sfd, self->sconn, self->win.h, 0,
					WIN_LEN, KRDMA_ACCESS_REMOTE_READ |
					KRDMA_ACCESS_REMOTE_WRITE, NULL,
					&self->tok));
}

FIXTURE_TEARDOWN(fork)
{
	if (self->cfd >= 0)
		close(self->cfd);
	close(self->sfd);
	kt_mem_put(-1, &self->win);
}

/* WRITE @len bytes of @buf (offset 0) to the server's window at @roff */
static int write_to(int fd, uint32_t conn, uint32_t buf, size_t len,
		    const struct krdma_token *tok, size_t roff,
		    uint64_t cookie)
{
	struct krdma_completion wc;
	struct krdma_op op;
	int ret;

	kt_op(&op, KRDMA_OP_WRITE, conn, buf, 0, len, tok, roff, cookie);
	ret = kt_run_op(fd, &op, &wc);
	if (ret)
		return ret;
	if (wc.cookie != cookie)
		return -ESRCH;
	return wc.status == KRDMA_WC_SUCCESS ? 0 : -EIO;
}

/* Every operation that names @buf, from this process: all EPERM */
static void child_cannot_use(int fd, uint32_t conn, uint32_t buf,
			     const struct krdma_token *tok, size_t len,
			     uint32_t own)
{
	static const uint32_t opcodes[] = {
		KRDMA_OP_WRITE, KRDMA_OP_READ, KRDMA_OP_SEND, KRDMA_OP_RECV,
		KRDMA_OP_FETCH_ADD, KRDMA_OP_CMP_SWAP,
	};
	struct krdma_sge sges[2];
	struct krdma_op op;
	unsigned int i;
	uint32_t n = 99;
	int ret;

	for (i = 0; i < ARRAY_SIZE(opcodes); i++) {
		bool atomic = opcodes[i] >= KRDMA_OP_FETCH_ADD;

		kt_op(&op, opcodes[i], conn, buf, 0, atomic ? 8 : 64, tok, 0,
		      i);
		ret = krdma_submit_ops(fd, &op, 1, 0, &n);
		CHILD_CHECK(ret == -EPERM && n == 0, "%s: %d, %u submitted",
			    krdma_opcode_str(opcodes[i]), ret, n);
	}
	/* A message through the buffer's local window */
	kt_op(&op, KRDMA_OP_SEND, conn, buf, 0, len, NULL, 0, 10);
	ret = krdma_submit_ops(fd, &op, 1, 0, NULL);
	CHILD_CHECK(ret == -EPERM, "SEND of %zu bytes: %d", len, ret);
	/* Named second, after a range of its own */
	memset(sges, 0, sizeof(sges));
	sges[0].buf = own;
	sges[0].length = 16;
	sges[1].buf = buf;
	sges[1].length = 16;
	kt_op(&op, KRDMA_OP_WRITE, conn, 0, 0, 0, tok, 0, 11);
	op.num_sge = 2;
	op.sges = (uintptr_t)sges;
	ret = krdma_submit_ops(fd, &op, 1, 0, NULL);
	CHILD_CHECK(ret == -EPERM, "second range: %d", ret);
	ret = krdma_grant_window(fd, conn, buf, 0, PG,
				 KRDMA_ACCESS_REMOTE_READ, NULL, NULL);
	CHILD_CHECK(ret == -EPERM, "GRANT: %d", ret);
}

/* Wait for a child; its exit status */
static int reap(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void say(int fd, uint32_t v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(3);
}

static uint32_t hear(int fd)
{
	uint32_t v = 0;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0xdeadbeef;
	return v;
}

/*
 * A child uses the file it inherited: queries, a new connection, its own
 * memory. What it registered stays in the file after it exits, but no
 * other process may move those pages.
 */
TEST_F(fork, child_works_with_its_own_memory)
{
	struct krdma_completion wc;
	struct krdma_conn_query q;
	struct kt_mem own = {};
	uint32_t cbuf, cconn2, sconn2;
	int p[2];
	pid_t pid;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &own, PG, 0));
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct krdma_query_module m;
		struct kt_mem mine = {};

		CHILD_CHECK(!krdma_query_module(self->cfd, &m), "query");
		CHILD_CHECK(!krdma_conn_info(self->cfd, self->cconn, &q) &&
			    q.state == KRDMA_CONN_CONNECTED, "conn query");
		CHILD_CHECK(!kt_mem_get(self->cfd, &mine, 2 * PG,
					KRDMA_ACCESS_REMOTE_READ), "register");
		kt_pattern(mine.p, 2 * PG, 1);
		CHILD_CHECK(!write_to(self->cfd, self->cconn, mine.h, 2 * PG,
				      &self->tok, 0, 1), "WRITE");
		CHILD_CHECK(!krdma_connect_to(self->cfd, &self->addr, 10000,
					      &cconn2), "connect");
		say(p[1], mine.h);
		say(p[1], cconn2);
		_exit(0);
	}
	close(p[1]);
	cbuf = hear(p[0]);
	cconn2 = hear(p[0]);
	close(p[0]);
	ASSERT_EQ(0, reap(pid));

	/*
	 * Its WRITE moved its bytes (iWARP: placed a moment after the
	 * completion), and it took its completion
	 */
	kt_wait_pattern(self->win.p, 2 * PG, 1, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, 2 * PG, 1));
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, &wc, 1, 0));
	/* Its objects are the file's: the connection works for the parent */
	ASSERT_EQ(0, krdma_accept_conn(self->sfd, self->listener, 0, 10000,
				       &sconn2));
	ASSERT_EQ(0, krdma_conn_info(self->cfd, cconn2, &q));
	EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
	kt_pattern(own.p, PG, 2);
	EXPECT_EQ(0, write_to(self->cfd, self->cconn, own.h, PG, &self->tok,
			      PG, 2));
	/* iWARP: placed a moment after the completion */
	kt_wait_bytes(self->win.p + PG, own.p, PG, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p + PG, PG, 2));
	/* But its memory is not the parent's to move, nor to grant */
	EXPECT_EQ(-EPERM, write_to(self->cfd, self->cconn, cbuf, PG,
				   &self->tok, 0, 3));
	EXPECT_EQ(-EPERM, krdma_grant_window(self->cfd, self->cconn, cbuf, 0,
					     PG, KRDMA_ACCESS_REMOTE_READ,
					     NULL, NULL));
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cbuf));
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cconn2));
	EXPECT_EQ(0, krdma_conn_info(self->cfd, self->cconn, &q));
	EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
	kt_mem_put(self->cfd, &own);
}

/*
 * A child cannot make the device touch the parent's buffer: no operation
 * of any kind (not through the local window the parent's large SEND left
 * on the connection either), no grant. Nothing was sent, nothing
 * completed, nothing changed.
 */
TEST_F(fork, child_cannot_move_parent_memory)
{
	struct krdma_completion wc[2];
	struct kt_mem pbuf = {}, rbuf = {};
	struct krdma_op ops[2];
	pid_t pid;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &pbuf, MSG_LEN,
				KRDMA_ACCESS_LOCAL_WRITE |
				KRDMA_ACCESS_REMOTE_READ));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &rbuf, MSG_LEN,
				KRDMA_ACCESS_LOCAL_WRITE));
	kt_pattern(pbuf.p, MSG_LEN, 3);

	/* The parent's large SEND: a local window of pbuf on cconn */
	kt_op(&ops[0], KRDMA_OP_RECV, self->sconn, rbuf.h, 0, MSG_LEN, NULL,
	      0, 1);
	ASSERT_EQ(0, krdma_submit_ops(self->sfd, ops, 1, 0, NULL));
	kt_op(&ops[1], KRDMA_OP_SEND, self->cconn, pbuf.h, 0, MSG_LEN, NULL,
	      0, 2);
	ASSERT_EQ(0, kt_run_op(self->cfd, &ops[1], wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc[0].status);
	ASSERT_EQ(1, kt_wait_wc(self->sfd, wc, 1));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc[0].status);
	EXPECT_EQ(MSG_LEN, wc[0].byte_len);
	EXPECT_EQ(-1, kt_check_pattern(rbuf.p, MSG_LEN, 3));

	/* A RECV that a leaked SEND of the child would fill */
	memset(rbuf.p, KT_GUARD, MSG_LEN);
	ASSERT_EQ(0, krdma_submit_ops(self->sfd, ops, 1, 0, NULL));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct kt_mem mine = {};

		CHILD_CHECK(!kt_mem_get(self->cfd, &mine, PG,
					KRDMA_ACCESS_LOCAL_WRITE), "register");
		child_cannot_use(self->cfd, self->cconn, pbuf.h, &self->tok,
				 MSG_LEN, mine.h);
		_exit(0);
	}
	ASSERT_EQ(0, reap(pid));

	/* Nothing was accepted: no completion, no byte moved */
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, wc, 2, 0));
	EXPECT_EQ(0, krdma_poll_wc(self->sfd, wc, 2, 0));
	EXPECT_EQ(-1, kt_check_fill(self->win.p, WIN_LEN, KT_GUARD));
	EXPECT_EQ(-1, kt_check_pattern(pbuf.p, MSG_LEN, 3));
	/* The parent still can: its SEND takes the waiting RECV */
	ASSERT_EQ(0, kt_run_op(self->cfd, &ops[1], wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc[0].status);
	ASSERT_EQ(1, kt_wait_wc(self->sfd, wc, 1));
	EXPECT_EQ(1, wc[0].cookie);
	EXPECT_EQ(-1, kt_check_pattern(rbuf.p, MSG_LEN, 3));
	kt_mem_put(self->cfd, &pbuf);
	kt_mem_put(self->sfd, &rbuf);
}

/*
 * After fork() the registered pages stay the parent's: what the parent
 * sends is the parent's data, what the device writes (a local READ, a
 * peer's WRITE through a grant) lands in the parent's memory, and the
 * child's copy is the child's alone.
 */
TEST_F(fork, pages_stay_with_the_registering_process)
{
	static uint8_t before[4 * PG];
	struct krdma_completion wc;
	struct krdma_token ptok;
	struct krdma_op op;
	struct kt_mem pbuf = {};
	int go[2], ready[2];
	pid_t pid;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &pbuf, 4 * PG,
				KRDMA_ACCESS_LOCAL_WRITE |
				KRDMA_ACCESS_REMOTE_READ |
				KRDMA_ACCESS_REMOTE_WRITE));
	kt_pattern(pbuf.p, 4 * PG, 10);
	memcpy(before, pbuf.p, sizeof(before));
	ASSERT_EQ(0, krdma_grant_window(self->cfd, self->cconn, pbuf.h, 0,
					4 * PG, KRDMA_ACCESS_REMOTE_READ |
					KRDMA_ACCESS_REMOTE_WRITE, NULL,
					&ptok));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* The child writes its copy, then checks nothing else did */
		kt_pattern(pbuf.p, 4 * PG, 11);
		say(ready[1], 1);
		CHILD_CHECK(hear(go[0]) == 1, "parent went away");
		CHILD_CHECK(kt_check_pattern(pbuf.p, 4 * PG, 11) == -1,
			    "the device wrote into the child's copy");
		_exit(0);
	}
	ASSERT_EQ(1, hear(ready[0]));

	/* Page 0 goes out from the parent's memory: WRITE and peer READ */
	EXPECT_EQ(0, write_to(self->cfd, self->cconn, pbuf.h, PG, &self->tok,
			      0, 1));
	/* iWARP: placed a moment after the completion */
	kt_wait_bytes(self->win.p, before, PG, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, PG, 10));
	kt_op(&op, KRDMA_OP_READ, self->sconn, self->win.h, PG, PG, &ptok, 0,
	      2);
	ASSERT_EQ(0, kt_run_op(self->sfd, &op, &wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p + PG, PG, 10));
	/* Page 1 comes in by a peer's WRITE, page 2 by the parent's READ */
	kt_pattern(self->win.p + 2 * PG, 2 * PG, 12);
	kt_op(&op, KRDMA_OP_WRITE, self->sconn, self->win.h, 2 * PG, PG, &ptok,
	      PG, 3);
	ASSERT_EQ(0, kt_run_op(self->sfd, &op, &wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	kt_op(&op, KRDMA_OP_READ, self->cconn, pbuf.h, 2 * PG, PG, &self->tok,
	      3 * PG, 4);
	ASSERT_EQ(0, kt_run_op(self->cfd, &op, &wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	EXPECT_EQ(-1, kt_check_pattern(pbuf.p + PG, PG, 12));
	EXPECT_EQ(0, memcmp(pbuf.p + 2 * PG, self->win.p + 3 * PG, PG));
	EXPECT_EQ(0, memcmp(pbuf.p + 3 * PG, before + 3 * PG, PG));

	say(go[1], 1);
	EXPECT_EQ(0, reap(pid));
	kt_mem_put(self->cfd, &pbuf);
}

/*
 * The file's completion queue is shared: each completion goes to
 * exactly one POLL, whichever process calls it; none is lost when a
 * process that shares the file exits.
 */
TEST_F(fork, completions_are_taken_exactly_once)
{
	enum { N = 64, CHILD_TAKES = 16 };
	struct krdma_completion wc;
	uint8_t want[8 * N];
	struct krdma_op ops[N];
	struct kt_mem pbuf = {};
	uint64_t seen = 0;
	int p[2], i, got;
	pid_t pid;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &pbuf, PG, 0));
	kt_pattern(pbuf.p, PG, 20);
	for (i = 0; i < N; i++)
		kt_op(&ops[i], KRDMA_OP_WRITE, self->cconn, pbuf.h, i, 8,
		      &self->tok, i * 8, i);

	/* A child that only queries and exits takes nothing away */
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, ops, 8, 0, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct krdma_conn_query q;

		CHILD_CHECK(!krdma_conn_info(self->cfd, self->cconn, &q),
			    "query");
		close(self->cfd);
		_exit(0);
	}
	ASSERT_EQ(0, reap(pid));
	for (i = 0; i < 8; i++) {
		ASSERT_EQ(1, kt_wait_wc(self->cfd, &wc, 1));
		EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
		seen |= 1ULL << wc.cookie;
	}
	EXPECT_EQ(0xffULL, seen);

	/* Two pollers: the child takes 16, the parent the other 48 */
	seen = 0;
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, ops, N, 0, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		for (i = 0; i < CHILD_TAKES; i++) {
			CHILD_CHECK(krdma_poll_wc(self->cfd, &wc, 1,
						  KT_WAIT_MS) == 1, "poll");
			CHILD_CHECK(wc.status == KRDMA_WC_SUCCESS, "status");
			say(p[1], wc.cookie);
		}
		_exit(0);
	}
	close(p[1]);
	for (got = 0; got < N - CHILD_TAKES; got++) {
		ASSERT_EQ(1, krdma_poll_wc(self->cfd, &wc, 1, KT_WAIT_MS));
		EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
		EXPECT_EQ(0, seen & 1ULL << wc.cookie)
			TH_LOG("twice: %llu", (unsigned long long)wc.cookie);
		seen |= 1ULL << wc.cookie;
	}
	for (i = 0; i < CHILD_TAKES; i++) {
		uint32_t cookie = hear(p[0]);

		ASSERT_GT(N, cookie);
		EXPECT_EQ(0, seen & 1ULL << cookie) TH_LOG("twice: %u", cookie);
		seen |= 1ULL << cookie;
	}
	close(p[0]);
	EXPECT_EQ(0, reap(pid));
	EXPECT_EQ(~0ULL, seen);
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, &wc, 1, 0));
	/* Operation i wrote pbuf[i, i + 8) to win[8 * i, 8 * i + 8) */
	for (i = 0; i < N; i++)
		memcpy(want + 8 * i, pbuf.p + i, 8);
	/* iWARP: placed a moment after the completion */
	kt_wait_bytes(self->win.p, want, sizeof(want), KT_PLACE_MS);
	for (i = 0; i < N; i++)
		EXPECT_EQ(0, memcmp(self->win.p + 8 * i, pbuf.p + i, 8));
	kt_mem_put(self->cfd, &pbuf);
}

/* One byte of data and room for one descriptor, for sendmsg/recvmsg */
struct fd_msg {
	char data;
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg;
};

static struct cmsghdr *fd_msg_init(struct fd_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->data = 'k';
	m->iov.iov_base = &m->data;
	m->iov.iov_len = 1;
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
	m->msg.msg_control = m->u.buf;
	m->msg.msg_controllen = sizeof(m->u.buf);
	return CMSG_FIRSTHDR(&m->msg);
}

static int send_fd(int sock, int fd)
{
	struct fd_msg m;
	struct cmsghdr *cm = fd_msg_init(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &m.msg, 0) == 1 ? 0 : -errno;
}

static int recv_fd(int sock)
{
	struct fd_msg m;
	struct cmsghdr *cm;
	int fd;

	fd_msg_init(&m);
	if (recvmsg(sock, &m.msg, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&m.msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * A process that never had the file gets it over a unix socket: it uses
 * the objects, not the sender's memory; once the sender closed its copy,
 * the file (and the connection) lives on in the receiver until it closes
 * it too.
 */
TEST_F(fork, file_passed_over_a_unix_socket)
{
	struct kt_mem pbuf = {};
	int sv[2];
	pid_t pid;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &pbuf, MSG_LEN,
				KRDMA_ACCESS_LOCAL_WRITE |
				KRDMA_ACCESS_REMOTE_READ));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct krdma_conn_query q;
		struct kt_mem mine = {};
		int fd;

		/* It had the files by fork(): it gives them up first */
		close(self->cfd);
		close(self->sfd);
		close(sv[0]);
		fd = recv_fd(sv[1]);
		CHILD_CHECK(fd >= 0, "no file received");
		CHILD_CHECK(!krdma_conn_info(fd, self->cconn, &q) &&
			    q.state == KRDMA_CONN_CONNECTED, "conn query");
		CHILD_CHECK(!kt_mem_get(fd, &mine, PG, KRDMA_ACCESS_LOCAL_WRITE),
			    "register");
		child_cannot_use(fd, self->cconn, pbuf.h, &self->tok, MSG_LEN,
				 mine.h);
		kt_pattern(mine.p, PG, 30);
		CHILD_CHECK(!write_to(fd, self->cconn, mine.h, PG, &self->tok,
				      0, 30), "WRITE");
		say(sv[1], 1);
		/* The sender closed its copy: the file is still ours */
		CHILD_CHECK(hear(sv[1]) == 2, "sender went away");
		CHILD_CHECK(!krdma_conn_info(fd, self->cconn, &q) &&
			    q.state == KRDMA_CONN_CONNECTED, "conn query 2");
		kt_pattern(mine.p, PG, 31);
		CHILD_CHECK(!write_to(fd, self->cconn, mine.h, PG, &self->tok,
				      PG, 31), "WRITE after the sender closed");
		/* The sender's objects are the file's: ours to end */
		CHILD_CHECK(!krdma_destroy_handle(fd, pbuf.h), "destroy");
		close(fd);
		_exit(0);
	}
	close(sv[1]);
	ASSERT_EQ(0, send_fd(sv[0], self->cfd));
	ASSERT_EQ(1, hear(sv[0]));
	/* iWARP: placed a moment after the completion */
	kt_wait_pattern(self->win.p, PG, 30, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, PG, 30));
	close(self->cfd);
	self->cfd = -1;
	say(sv[0], 2);
	EXPECT_EQ(0, reap(pid));
	close(sv[0]);
	/* iWARP: placed a moment after the completion */
	kt_wait_pattern(self->win.p + PG, PG, 31, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p + PG, PG, 31));
	/* The last close ended the connection */
	EXPECT_EQ(KRDMA_CONN_ERROR, kt_wait_conn_down(self->sfd, self->sconn));
	munmap(pbuf.p, pbuf.len);
}

/*
 * dup() gives the same file: handles and the queue are shared, closing
 * one descriptor ends nothing, closing the last ends everything.
 */
TEST_F(fork, dup_is_the_same_file)
{
	struct krdma_completion wc;
	struct krdma_conn_query q;
	struct kt_mem pbuf = {};
	struct krdma_op op;
	int d;

	d = fcntl(self->cfd, F_DUPFD_CLOEXEC, 0);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, kt_mem_get(d, &pbuf, PG, 0));
	kt_pattern(pbuf.p, PG, 40);
	kt_op(&op, KRDMA_OP_WRITE, self->cconn, pbuf.h, 0, PG, &self->tok, 0,
	      40);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	ASSERT_EQ(1, kt_wait_wc(d, &wc, 1));
	EXPECT_EQ(40, wc.cookie);
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	/* iWARP: placed a moment after the completion */
	kt_wait_bytes(self->win.p, pbuf.p, PG, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, PG, 40));

	close(self->cfd);
	self->cfd = -1;
	ASSERT_EQ(0, krdma_conn_info(d, self->cconn, &q));
	EXPECT_EQ(KRDMA_CONN_CONNECTED, q.state);
	kt_pattern(pbuf.p, PG, 41);
	EXPECT_EQ(0, write_to(d, self->cconn, pbuf.h, PG, &self->tok, 0, 41));
	/* iWARP: placed a moment after the completion */
	kt_wait_bytes(self->win.p, pbuf.p, PG, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, PG, 41));
	close(d);
	EXPECT_EQ(KRDMA_CONN_ERROR, kt_wait_conn_down(self->sfd, self->sconn));
	munmap(pbuf.p, pbuf.len);
}

/*
 * execve() keeps the file (without O_CLOEXEC), not the memory: the new
 * image cannot use what the old one registered, only its own buffers.
 * This program runs itself with EXEC_ENV="fd conn buf rkey addr len".
 */
static int exec_image(const char *args)
{
	struct krdma_token tok = {};
	unsigned long long addr, len;
	struct krdma_conn_query q;
	unsigned int fd, conn, buf, rkey;
	struct kt_mem mine = {};
	int ret;

	if (sscanf(args, "%u %u %u %u %llu %llu", &fd, &conn, &buf, &rkey,
		   &addr, &len) != 6)
		return 2;
	tok.addr = addr;
	tok.length = len;
	tok.rkey = rkey;
	tok.access = KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE;
	CHILD_CHECK(!krdma_conn_info(fd, conn, &q) &&
		    q.state == KRDMA_CONN_CONNECTED, "conn query");
	ret = write_to(fd, conn, buf, PG, &tok, 0, 50);
	CHILD_CHECK(ret == -EPERM, "old image's buffer: %d", ret);
	ret = krdma_grant_window(fd, conn, buf, 0, PG,
				 KRDMA_ACCESS_REMOTE_READ, NULL, NULL);
	CHILD_CHECK(ret == -EPERM, "GRANT of the old image's buffer: %d", ret);
	CHILD_CHECK(!kt_mem_get(fd, &mine, PG, 0), "register");
	kt_pattern(mine.p, PG, 51);
	CHILD_CHECK(!write_to(fd, conn, mine.h, PG, &tok, PG, 51), "WRITE");
	return 0;
}

static void __attribute__((constructor)) exec_image_main(void)
{
	const char *args = getenv(EXEC_ENV);

	if (args)
		_exit(exec_image(args));
}

TEST_F(fork, exec_keeps_the_file_not_the_memory)
{
	struct krdma_completion wc;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct kt_mem old = {};
		char args[128];

		CHILD_CHECK(!kt_mem_get(self->cfd, &old, PG,
					KRDMA_ACCESS_REMOTE_READ), "register");
		kt_pattern(old.p, PG, 50);
		/* libkrdma opens with O_CLOEXEC: keep this one */
		CHILD_CHECK(!fcntl(self->cfd, F_SETFD, 0), "fcntl");
		snprintf(args, sizeof(args), "%d %u %u %u %llu %llu",
			 self->cfd, self->cconn, old.h, self->tok.rkey,
			 (unsigned long long)self->tok.addr,
			 (unsigned long long)self->tok.length);
		setenv(EXEC_ENV, args, 1);
		execl("/proc/self/exe", "krdma_fork_test", (char *)NULL);
		_exit(127);
	}
	ASSERT_EQ(0, reap(pid));
	/* Nothing of the old image went out, the new image's page did */
	/* iWARP: placed a moment after the completion */
	kt_wait_pattern(self->win.p + PG, PG, 51, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_fill(self->win.p, PG, KT_GUARD));
	EXPECT_EQ(-1, kt_check_pattern(self->win.p + PG, PG, 51));
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, &wc, 1, 0));
}

/*
 * The registering process exits: its buffer stays in the file, pinned,
 * and its grant still serves the peer (the pages are kept, not reused),
 * but no process may name it in a SUBMIT or GRANT; DESTROY ends it.
 */
TEST_F(fork, buffer_outlives_the_registering_process)
{
	struct krdma_completion wc;
	struct krdma_token ctok;
	struct krdma_op op;
	uint32_t cbuf;
	int p[2];
	pid_t pid;

	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct krdma_token tok;
		struct kt_mem mine = {};

		CHILD_CHECK(!kt_mem_get(self->cfd, &mine, PG,
					KRDMA_ACCESS_REMOTE_READ), "register");
		kt_pattern(mine.p, PG, 60);
		CHILD_CHECK(!krdma_grant_window(self->cfd, self->cconn, mine.h,
						0, PG, KRDMA_ACCESS_REMOTE_READ,
						NULL, &tok), "grant");
		if (write(p[1], &tok, sizeof(tok)) != sizeof(tok))
			_exit(3);
		say(p[1], mine.h);
		_exit(0);
	}
	close(p[1]);
	ASSERT_EQ(sizeof(ctok), read(p[0], &ctok, sizeof(ctok)));
	cbuf = hear(p[0]);
	close(p[0]);
	ASSERT_EQ(0, reap(pid));

	/* The dead process's pages are still there for its grant */
	kt_op(&op, KRDMA_OP_READ, self->sconn, self->win.h, 0, PG, &ctok, 0,
	      60);
	ASSERT_EQ(0, kt_run_op(self->sfd, &op, &wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, PG, 60));
	/* Nobody else may move them */
	EXPECT_EQ(-EPERM, write_to(self->cfd, self->cconn, cbuf, PG,
				   &self->tok, 0, 61));
	EXPECT_EQ(-EPERM, krdma_grant_window(self->cfd, self->cconn, cbuf, 0,
					     PG, KRDMA_ACCESS_REMOTE_READ,
					     NULL, NULL));
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, cbuf));
	EXPECT_EQ(-ENOENT, krdma_destroy_handle(self->cfd, cbuf));
	EXPECT_EQ(0, krdma_poll_wc(self->cfd, &wc, 1, 0));
}

/*
 * A buffer is the pages that were mapped when it was registered: after
 * munmap() (and a new mapping at the same address) operations still move
 * those pages, which the process no longer sees; a GRANT maps them too.
 */
TEST_F(fork, unmapped_buffer_keeps_its_pages)
{
	struct krdma_completion wc;
	uint32_t grant;
	struct kt_mem pbuf = {};
	struct krdma_op op;
	uint8_t *again;

	ASSERT_EQ(0, kt_mem_get(self->cfd, &pbuf, PG,
				KRDMA_ACCESS_LOCAL_WRITE |
				KRDMA_ACCESS_REMOTE_READ));
	kt_pattern(pbuf.p, PG, 70);
	ASSERT_EQ(0, munmap(pbuf.p, PG));

	/* The pinned pages still hold what was written before */
	EXPECT_EQ(0, write_to(self->cfd, self->cconn, pbuf.h, PG, &self->tok,
			      0, 70));
	/* iWARP: placed a moment after the completion; pbuf.p is unmapped */
	kt_wait_pattern(self->win.p, PG, 70, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p, PG, 70));
	/* A grant maps the pinned pages too: it never pins the range again */
	ASSERT_EQ(0, krdma_grant_window(self->cfd, self->cconn, pbuf.h, 0, PG,
					KRDMA_ACCESS_REMOTE_READ, &grant, NULL));
	EXPECT_EQ(0, krdma_destroy_handle(self->cfd, grant));

	/* A new mapping there is other memory: a READ does not reach it */
	again = mmap(pbuf.p, PG, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ASSERT_EQ(pbuf.p, again);
	memset(again, 0x5a, PG);
	kt_pattern(self->win.p + PG, PG, 71);
	kt_op(&op, KRDMA_OP_READ, self->cconn, pbuf.h, 0, PG, &self->tok, PG,
	      71);
	ASSERT_EQ(0, kt_run_op(self->cfd, &op, &wc));
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	EXPECT_EQ(-1, kt_check_fill(again, PG, 0x5a));
	/* It went into the buffer's pages: a WRITE sends it back out */
	EXPECT_EQ(0, write_to(self->cfd, self->cconn, pbuf.h, PG, &self->tok,
			      2 * PG, 72));
	/* iWARP: placed a moment after the completion */
	kt_wait_pattern(self->win.p + 2 * PG, PG, 71, KT_PLACE_MS);
	EXPECT_EQ(-1, kt_check_pattern(self->win.p + 2 * PG, PG, 71));
	kt_mem_put(self->cfd, &pbuf);
}

TEST_HARNESS_MAIN
