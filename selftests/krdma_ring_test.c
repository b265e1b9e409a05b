// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: the completion queue as a ring mapped into the
 * process (KRDMA_IOC_RING_SETUP, mmap), on rxe and siw.
 *
 * Each transfer test WRITEs from a "client" file into a window of a
 * "server" file, takes its completions from the client's mapped ring and
 * checks every byte that arrived. The hostile cases write garbage where
 * the process may write (head, and the values the kernel only reports)
 * and check that only the writer is affected.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdma_test_lib.h"
#include "kselftest_harness.h"

#define RING 64
#define PIECE 1024
#define PG 4096UL

static int ring_setup_raw(int fd, struct krdma_ring_setup *rs, uint32_t entries)
{
	memset(rs, 0, sizeof(*rs));
	rs->size = sizeof(*rs);
	rs->entries = entries;
	return krdma_ioctl(fd, KRDMA_IOC_RING_SETUP, rs);
}

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t tail_of(const struct krdma_ring *r)
{
	return __atomic_load_n(r->tail, __ATOMIC_ACQUIRE);
}

static void set_head(struct krdma_ring *r, uint32_t head)
{
	__atomic_store_n(r->head, head, __ATOMIC_RELEASE);
}

/*
 * Until the ring's tail is @want: an edge-triggered epoll wakes at each
 * completion the kernel writes. False after KT_WAIT_MS without one.
 */
static bool wait_tail(int fd, const struct krdma_ring *r, uint32_t want)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(0);
	bool ok = false;

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		goto out;
	for (;;) {
		if (tail_of(r) == want) {
			ok = true;
			break;
		}
		if (epoll_wait(ep, &ev, 1, KT_WAIT_MS) <= 0)
			break;
	}
out:
	if (ep >= 0)
		close(ep);
	return ok;
}

FIXTURE(ring) {
	int sfd, cfd;
	uint32_t listener, sconn, cconn;
	struct krdma_addr addr;
	struct kt_mem src, dst;
	uint32_t grant;
	struct krdma_token tok;
	struct krdma_ring r;
};

FIXTURE_VARIANT(ring) {
	const char *ip;
	bool iwarp;
};

FIXTURE_VARIANT_ADD(ring, rxe) {
	.ip = "198.18.0.1",
	.iwarp = false,
};

FIXTURE_VARIANT_ADD(ring, siw) {
	.ip = "198.18.1.1",
	.iwarp = true,
};

#define BUF_LEN (256 * PIECE)

FIXTURE_SETUP(ring)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct krdma_query_module qm;
	struct krdma_addr any;

	memset(&self->r, 0, sizeof(self->r));
	self->cfd = -1;
	self->sfd = krdma_open();
	ASSERT_LE(0, self->sfd);
	ASSERT_EQ(0, krdma_query_module(self->sfd, &qm));
	if (!(qm.features & KRDMA_FEATURE_RING))
		SKIP(return, "the module has no KRDMA_FEATURE_RING");
	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &unlimited));
	self->cfd = krdma_open();
	ASSERT_LE(0, self->cfd);
	ASSERT_EQ(0, krdma_parse_addr(variant->ip, 0, &any));
	ASSERT_EQ(0, krdma_listen_on(self->sfd, &any, 4, &self->listener,
				     &self->addr));
	ASSERT_EQ(0, kt_connect_pair(self->sfd, self->listener, &self->addr,
				     self->cfd, &self->sconn, &self->cconn));
	ASSERT_EQ(0, kt_mem_get(self->cfd, &self->src, BUF_LEN,
				KRDMA_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, kt_mem_get(self->sfd, &self->dst, BUF_LEN,
				KRDMA_ACCESS_LOCAL_WRITE |
				KRDMA_ACCESS_REMOTE_WRITE));
	ASSERT_EQ(0, krdma_grant_window(self->sfd, self->sconn, self->dst.h, 0,
					BUF_LEN, KRDMA_ACCESS_REMOTE_WRITE,
					&self->grant, &self->tok));
}

FIXTURE_TEARDOWN(ring)
{
	krdma_ring_unmap(&self->r);
	if (self->cfd >= 0)
		close(self->cfd);
	close(self->sfd);
}

/* WRITE piece @i of the source (pattern @i) to piece @i of the window */
static void write_op(FIXTURE_DATA(ring) *self, struct krdma_op *op,
		     uint32_t i, uint64_t cookie)
{
	kt_op(op, KRDMA_OP_WRITE, self->cconn, self->src.h,
	      (uint64_t)i * PIECE, PIECE, &self->tok, (uint64_t)i * PIECE,
	      cookie);
}

/* Every piece in [@from, @to) arrived with its own pattern */
static bool pieces_arrived(FIXTURE_DATA(ring) *self, uint32_t from,
			   uint32_t to)
{
	uint32_t i;

	for (i = from; i < to; i++)
		if (!kt_wait_pattern(self->dst.p + (size_t)i * PIECE, PIECE,
				     i + 1, KT_PLACE_MS))
			return false;
	return true;
}

TEST(setup_and_mmap_refusals)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct krdma_query_module qm;
	struct krdma_ring_setup rs, again;
	struct krdma_completion wc;
	void *p;
	int fd = krdma_open();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, krdma_query_module(fd, &qm));
	if (!(qm.features & KRDMA_FEATURE_RING))
		SKIP(return, "the module has no KRDMA_FEATURE_RING");

	/* Nothing to map before RING_SETUP */
	p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);

	/* Bad sizes and fields */
	ASSERT_EQ(-EINVAL, ring_setup_raw(fd, &rs, 63));
	ASSERT_EQ(-EINVAL, ring_setup_raw(fd, &rs, 96));
	ASSERT_EQ(-EINVAL, ring_setup_raw(fd, &rs, 32));
	ASSERT_EQ(-EINVAL, ring_setup_raw(fd, &rs, 1U << 21));
	memset(&rs, 0, sizeof(rs));
	rs.size = sizeof(rs);
	rs.flags = 1;
	ASSERT_EQ(-EINVAL, krdma_ioctl(fd, KRDMA_IOC_RING_SETUP, &rs));
	memset(&rs, 0, sizeof(rs));
	rs.size = sizeof(rs);
	rs.__reserved = 1;
	ASSERT_EQ(-EINVAL, krdma_ioctl(fd, KRDMA_IOC_RING_SETUP, &rs));
	memset(&rs, 0, sizeof(rs));
	rs.size = offsetof(struct krdma_ring_setup, mmap_size);
	ASSERT_EQ(-EINVAL, krdma_ioctl(fd, KRDMA_IOC_RING_SETUP, &rs));

	/* Set up: what it reports */
	ASSERT_EQ(0, ring_setup_raw(fd, &rs, 128));
	ASSERT_EQ(sizeof(rs), rs.size);
	ASSERT_EQ(128, rs.entries);
	ASSERT_EQ(0, rs.off_cqes % pg);
	ASSERT_LE(rs.off_cqes + 128 * sizeof(struct krdma_completion),
		  rs.mmap_size);
	ASSERT_NE(rs.off_head / 64, rs.off_tail / 64);
	ASSERT_GT(rs.off_cqes, rs.off_flags);

	/* Again, with 0 or the same size: the same answer; another: EBUSY */
	ASSERT_EQ(0, ring_setup_raw(fd, &again, 0));
	ASSERT_EQ(0, memcmp(&rs, &again, sizeof(rs)));
	ASSERT_EQ(0, ring_setup_raw(fd, &again, 128));
	ASSERT_EQ(0, memcmp(&rs, &again, sizeof(rs)));
	ASSERT_EQ(-EBUSY, ring_setup_raw(fd, &again, 256));

	/* POLL would race the process for head */
	ASSERT_EQ(-EBUSY, krdma_poll_wc(fd, &wc, 1, 0));

	/* Mappings the ring refuses */
	p = mmap(NULL, rs.mmap_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);
	p = mmap(NULL, rs.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, pg);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);
	p = mmap(NULL, rs.mmap_size + pg, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);
	p = mmap(NULL, rs.mmap_size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EPERM, errno);

	/* A good one: the header as reported; it never becomes executable */
	p = mmap(NULL, rs.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(127, *(uint32_t *)((char *)p + rs.off_ring_mask));
	ASSERT_EQ(128, *(uint32_t *)((char *)p + rs.off_ring_entries));
	ASSERT_EQ(0, *(uint32_t *)((char *)p + rs.off_flags));
	ASSERT_EQ(0, *(uint32_t *)((char *)p + rs.off_head));
	ASSERT_EQ(0, *(uint32_t *)((char *)p + rs.off_tail));
	ASSERT_EQ(-1, mprotect(p, pg, PROT_READ | PROT_EXEC));
	ASSERT_EQ(EACCES, errno);
	/* It cannot grow, in place or moved (VM_DONTEXPAND) */
	ASSERT_EQ(MAP_FAILED, mremap(p, rs.mmap_size, rs.mmap_size + pg, 0));
	ASSERT_EQ(EFAULT, errno);
	ASSERT_EQ(MAP_FAILED, mremap(p, rs.mmap_size, rs.mmap_size + pg,
				     MREMAP_MAYMOVE));
	ASSERT_EQ(EFAULT, errno);
	/* A part of it maps too */
	ASSERT_EQ(0, munmap(p, rs.mmap_size));
	p = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(128, *(uint32_t *)((char *)p + rs.off_ring_entries));
	ASSERT_EQ(0, munmap(p, pg));
	close(fd);
}

TEST_F_TIMEOUT(ring, writes_complete_into_the_ring, 300)
{
	struct krdma_op ops[32];
	struct krdma_completion wc[RING];
	uint8_t seen[256] = { 0 };
	struct pollfd pfd = { .fd = self->cfd, .events = POLLIN };
	uint32_t i, j, next = 0, got = 0;
	int n;

	for (i = 0; i < 256; i++)
		kt_pattern(self->src.p + (size_t)i * PIECE, PIECE, i + 1);
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	ASSERT_EQ(RING, self->r.entries);
	/* Empty: not readable */
	ASSERT_EQ(0, poll(&pfd, 1, 0));

	/* 256 WRITEs in batches of 32, never more in flight than the ring */
	while (got < 256) {
		if (next < 256 && next - got + 32 <= RING) {
			for (j = 0; j < 32; j++)
				write_op(self, &ops[j], next + j, 1000 + next + j);
			ASSERT_EQ(0, krdma_submit_ops(self->cfd, ops, 32, 0,
						      NULL));
			next += 32;
			continue;
		}
		n = krdma_ring_wait(self->cfd, &self->r, wc, RING, KT_WAIT_MS);
		ASSERT_LT(0, n) TH_LOG("%u of 256 completions came", got);
		for (j = 0; j < (uint32_t)n; j++) {
			ASSERT_EQ(KRDMA_WC_SUCCESS, wc[j].status);
			ASSERT_EQ(KRDMA_OP_WRITE, wc[j].opcode);
			ASSERT_EQ(PIECE, wc[j].byte_len);
			ASSERT_EQ(self->cconn, wc[j].conn);
			ASSERT_LE(1000, wc[j].cookie);
			ASSERT_GT(1256, wc[j].cookie);
			ASSERT_EQ(0, seen[wc[j].cookie - 1000]++)
				TH_LOG("cookie %llu twice",
				       (unsigned long long)wc[j].cookie);
		}
		got += n;
	}
	ASSERT_TRUE(pieces_arrived(self, 0, 256));
	/* Nothing more, and all taken: not readable */
	ASSERT_EQ(256, tail_of(&self->r));
	ASSERT_EQ(256, *self->r.head);
	ASSERT_EQ(0, poll(&pfd, 1, 0));
}

TEST_F_TIMEOUT(ring, garbage_head_only_stops_its_writer, 300)
{
	struct krdma_ring_setup rs;
	struct krdma_op op;
	struct krdma_completion wc[RING];
	uint32_t i;

	for (i = 0; i < 256; i++)
		kt_pattern(self->src.p + (size_t)i * PIECE, PIECE, i + 1);
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	/* The values the kernel only reports: it must not use them */
	ASSERT_EQ(0, ring_setup_raw(self->cfd, &rs, 0));
	*(uint32_t *)((char *)self->r.map + rs.off_ring_mask) = 0xffffffffu;
	*(uint32_t *)((char *)self->r.map + rs.off_ring_entries) = 1;
	*(uint32_t *)((char *)self->r.map + rs.off_flags) = 0xffffffffu;

	/* Fill the ring: RING completions, none taken */
	for (i = 0; i < RING; i++) {
		write_op(self, &op, i, i);
		ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	}
	ASSERT_TRUE(wait_tail(self->cfd, &self->r, RING));
	write_op(self, &op, RING, RING);
	ASSERT_EQ(-EAGAIN, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));

	/* Past the tail, far past it, backwards: ignored, still full */
	set_head(&self->r, RING + 1);
	ASSERT_EQ(-EAGAIN, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	set_head(&self->r, 0x80000000u);
	ASSERT_EQ(-EAGAIN, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	set_head(&self->r, (uint32_t)-1);
	ASSERT_EQ(-EAGAIN, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));

	/* The entries are intact; take 10 of them for real */
	set_head(&self->r, 0);
	ASSERT_EQ(10, krdma_ring_take(&self->r, wc, 10));
	for (i = 0; i < 10; i++) {
		ASSERT_EQ(i, wc[i].cookie);
		ASSERT_EQ(KRDMA_WC_SUCCESS, wc[i].status);
	}
	/* Exactly 10 entries free again */
	for (i = 0; i < 10; i++) {
		write_op(self, &op, RING + i, RING + i);
		ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL))
			TH_LOG("submit %u of the 10 freed entries", i);
	}
	write_op(self, &op, RING + 10, RING + 10);
	ASSERT_EQ(-EAGAIN, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	/* A head moved back is ignored too */
	set_head(&self->r, 5);
	ASSERT_EQ(-EAGAIN, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	set_head(&self->r, 10);

	/* The rest, in order, each once, the ring wrapped around */
	ASSERT_TRUE(wait_tail(self->cfd, &self->r, RING + 10));
	ASSERT_EQ(RING, krdma_ring_take(&self->r, wc, RING));
	for (i = 0; i < RING; i++)
		ASSERT_EQ(10 + i, wc[i].cookie);
	ASSERT_EQ(0, krdma_ring_take(&self->r, wc, RING));
	ASSERT_TRUE(pieces_arrived(self, 0, RING + 10));
}

struct waiter {
	int fd;
	struct krdma_op op;
	pid_t tid;
	int ret;
};

static void *submit_wait(void *arg)
{
	struct waiter *w = arg;

	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	w->ret = krdma_submit_ops(w->fd, &w->op, 1, KRDMA_SUBMIT_WAIT, NULL);
	return NULL;
}

/* The thread sleeps (state S) in the kernel; polled, there is no event */
static bool thread_sleeps(pid_t tid)
{
	char path[64], buf[256], *p;
	int64_t end = ms_now() + KT_WAIT_MS;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	while (ms_now() < end) {
		f = fopen(path, "r");
		if (!f)
			return false;
		p = fgets(buf, sizeof(buf), f);
		fclose(f);
		p = p ? strrchr(buf, ')') : NULL;
		if (p && p[1] == ' ' && p[2] == 'S')
			return true;
		usleep(1000);
	}
	return false;
}

TEST_F_TIMEOUT(ring, submit_wait_sees_head_move, 300)
{
	struct waiter w = { .fd = self->cfd, .tid = 0, .ret = 1 };
	struct krdma_completion wc[RING];
	struct krdma_op op;
	struct timespec until;
	pthread_t t;
	uint32_t i;

	for (i = 0; i <= RING; i++)
		kt_pattern(self->src.p + (size_t)i * PIECE, PIECE, i + 1);
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	for (i = 0; i < RING; i++) {
		write_op(self, &op, i, i);
		ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	}
	ASSERT_TRUE(wait_tail(self->cfd, &self->r, RING));

	/* Full: a SUBMIT_WAIT sleeps until the process moves head */
	write_op(self, &w.op, RING, RING);
	ASSERT_EQ(0, pthread_create(&t, NULL, submit_wait, &w));
	while (!__atomic_load_n(&w.tid, __ATOMIC_ACQUIRE))
		sched_yield();
	ASSERT_TRUE(thread_sleeps(w.tid));
	ASSERT_EQ(1, w.ret);
	/* Moved with no system call: the kernel finds it by itself */
	ASSERT_EQ(1, krdma_ring_take(&self->r, wc, 1));
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += KT_WAIT_MS / 1000;
	ASSERT_EQ(0, pthread_timedjoin_np(t, NULL, &until));
	ASSERT_EQ(0, w.ret);
	ASSERT_TRUE(wait_tail(self->cfd, &self->r, RING + 1));
	ASSERT_EQ(RING, krdma_ring_take(&self->r, wc, RING));
	ASSERT_EQ(RING, wc[RING - 1].cookie);
	ASSERT_TRUE(pieces_arrived(self, 0, RING + 1));
}

TEST_F_TIMEOUT(ring, unsignaled_stream_one_entry, 300)
{
	struct krdma_op ops[256];
	struct krdma_completion wc[2];
	struct krdma_query_module qm;
	uint32_t i, j, done = 0, sub;

	ASSERT_EQ(0, krdma_query_module(self->cfd, &qm));
	if (!(qm.features & KRDMA_FEATURE_UNSIGNALED))
		SKIP(return, "the module has no KRDMA_FEATURE_UNSIGNALED");
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	/*
	 * 1024 WRITEs in 4 rounds, all unsignaled but the last: their
	 * entries come back, or SUBMIT_WAIT would wait for ever. Each round
	 * writes 64 pieces of its own (each 4 times), so that the bytes show
	 * that every round landed.
	 */
	for (i = 0; i < 4; i++) {
		for (j = 0; j < 64; j++)
			kt_pattern(self->src.p + (size_t)(i * 64 + j) * PIECE,
				   PIECE, i * 64 + j + 1);
		for (j = 0; j < 256; j++) {
			write_op(self, &ops[j], i * 64 + j % 64, i * 256 + j);
			ops[j].flags = KRDMA_OP_F_UNSIGNALED;
		}
		if (i == 3)
			ops[255].flags = 0;
		for (done = 0; done < 256; done += sub) {
			sub = 0;
			ASSERT_EQ(0, krdma_submit_ops(self->cfd, ops + done,
						      256 - done,
						      KRDMA_SUBMIT_WAIT, &sub));
		}
	}
	ASSERT_EQ(1, krdma_ring_wait(self->cfd, &self->r, wc, 2, KT_WAIT_MS));
	ASSERT_EQ(1023, wc[0].cookie);
	ASSERT_EQ(KRDMA_WC_SUCCESS, wc[0].status);
	ASSERT_TRUE(pieces_arrived(self, 0, 256));
	/* None of the unsignaled ones came after it */
	ASSERT_EQ(0, krdma_ring_wait(self->cfd, &self->r, wc, 2, 200));
}

TEST_F(ring, setup_refused_while_busy)
{
	struct krdma_ring_setup rs;
	struct krdma_completion wc;
	struct pollfd pfd = { .fd = self->cfd, .events = POLLIN };
	struct krdma_op op;

	kt_pattern(self->src.p, PIECE, 1);
	write_op(self, &op, 0, 5);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	/* In flight or waiting in the queue: no switch */
	ASSERT_EQ(-EBUSY, ring_setup_raw(self->cfd, &rs, RING));
	ASSERT_EQ(1, poll(&pfd, 1, KT_WAIT_MS));
	ASSERT_EQ(-EBUSY, ring_setup_raw(self->cfd, &rs, RING));
	ASSERT_EQ(1, krdma_poll_wc(self->cfd, &wc, 1, 0));
	ASSERT_EQ(5, wc.cookie);
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	ASSERT_TRUE(pieces_arrived(self, 0, 1));
	/* And the ring works after the switch */
	kt_pattern(self->src.p + PIECE, PIECE, 2);
	write_op(self, &op, 1, 6);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	ASSERT_EQ(1, krdma_ring_wait(self->cfd, &self->r, &wc, 1, KT_WAIT_MS));
	ASSERT_EQ(6, wc.cookie);
	ASSERT_TRUE(pieces_arrived(self, 1, 2));
}

/*
 * A RING_SETUP that cannot write its struct back (a read-only page: the
 * kernel reads it, and cannot answer) fails with EFAULT and leaves the
 * queue as it was: no ring to map, POLL takes the next completion (not
 * EBUSY), and a RING_SETUP that can answer then switches the queue, to
 * another size too. (The old module swapped first: POLL was EBUSY for
 * ever after.)
 */
TEST_F(ring, setup_copy_out_failure_changes_nothing)
{
	struct krdma_ring_setup rs, *ro;
	struct krdma_completion wc;
	struct krdma_op op;
	void *m;

	memset(&rs, 0, sizeof(rs));
	rs.size = sizeof(rs);
	rs.entries = RING;
	ro = mmap(NULL, PG, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	memcpy(ro, &rs, sizeof(rs));
	ASSERT_EQ(0, mprotect(ro, PG, PROT_READ));
	EXPECT_EQ(-EFAULT, krdma_ioctl(self->cfd, KRDMA_IOC_RING_SETUP, ro));
	munmap(ro, PG);

	m = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, self->cfd,
		 KRDMA_RING_OFF_CQ);
	EXPECT_EQ(MAP_FAILED, m) TH_LOG("a ring was set up");
	if (m != MAP_FAILED)
		munmap(m, PG);
	else
		EXPECT_EQ(EINVAL, errno);

	kt_pattern(self->src.p, PIECE, 1);
	write_op(self, &op, 0, 7);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	ASSERT_EQ(1, krdma_poll_wc(self->cfd, &wc, 1, KT_WAIT_MS))
		TH_LOG("POLL after the failed RING_SETUP");
	EXPECT_EQ(7, wc.cookie);
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	ASSERT_TRUE(pieces_arrived(self, 0, 1));

	ASSERT_EQ(0, krdma_ring_setup(self->cfd, 2 * RING, &self->r));
	EXPECT_EQ(2 * RING, self->r.entries);
	kt_pattern(self->src.p + PIECE, PIECE, 2);
	write_op(self, &op, 1, 8);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	ASSERT_EQ(1, krdma_ring_wait(self->cfd, &self->r, &wc, 1, KT_WAIT_MS));
	EXPECT_EQ(8, wc.cookie);
	EXPECT_EQ(KRDMA_WC_SUCCESS, wc.status);
	ASSERT_TRUE(pieces_arrived(self, 1, 2));
}

TEST_F(ring, fork_shares_the_ring)
{
	struct krdma_completion wc;
	struct krdma_op op;
	int status;
	pid_t pid;

	kt_pattern(self->src.p + 3 * PIECE, PIECE, 4);
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	write_op(self, &op, 3, 777);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/*
		 * The parent's buffer is not the child's to name (EPERM,
		 * nothing posted); the child's copy of the mapping is the
		 * same ring, and it takes the parent's completion
		 */
		op.cookie = 778;
		if (krdma_submit_ops(self->cfd, &op, 1, 0, NULL) != -EPERM)
			_exit(2);
		_exit(krdma_ring_wait(self->cfd, &self->r, &wc, 1,
				      KT_WAIT_MS) == 1 && wc.cookie == 777 ?
		      0 : 3);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	/* The child took it: the parent sees the head and tail it moved */
	ASSERT_EQ(1, tail_of(&self->r));
	ASSERT_EQ(1, *self->r.head);
	ASSERT_EQ(777, self->r.cqes[0].cookie);
	ASSERT_TRUE(pieces_arrived(self, 3, 4));
	/* And the refused one left nothing behind */
	ASSERT_EQ(0, krdma_ring_wait(self->cfd, &self->r, &wc, 1, 200));
}

TEST_F(ring, mapping_outlives_the_file)
{
	struct krdma_completion wc;
	struct krdma_op op;

	kt_pattern(self->src.p, PIECE, 1);
	ASSERT_EQ(0, krdma_ring_setup(self->cfd, RING, &self->r));
	write_op(self, &op, 0, 42);
	ASSERT_EQ(0, krdma_submit_ops(self->cfd, &op, 1, 0, NULL));
	ASSERT_TRUE(wait_tail(self->cfd, &self->r, 1));
	/* The mapping holds the file: its memory stays until munmap */
	ASSERT_EQ(0, close(self->cfd));
	self->cfd = -1;
	ASSERT_EQ(1, krdma_ring_take(&self->r, &wc, 1));
	ASSERT_EQ(42, wc.cookie);
	ASSERT_TRUE(pieces_arrived(self, 0, 1));
	krdma_ring_unmap(&self->r);
}

TEST_HARNESS_MAIN
