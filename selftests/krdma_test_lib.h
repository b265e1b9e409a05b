/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma selftests: helpers of the C test programs that connect two files
 * of /dev/krdma, register memory and wait for completions.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef KRDMA_TEST_LIB_H
#define KRDMA_TEST_LIB_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "libkrdma.h"

#define KT_GUARD 0xee
#define KT_WAIT_MS 20000

/* An anonymous mapping (page aligned), registered with a file */
struct kt_mem {
	uint8_t *p;
	size_t len;
	uint32_t h;
};

/* Map @len bytes filled with KT_GUARD and register them with @fd */
static inline int kt_mem_get(int fd, struct kt_mem *m, size_t len,
			     uint32_t access)
{
	m->h = 0;
	m->len = len;
	m->p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m->p == MAP_FAILED) {
		m->p = NULL;
		return -errno;
	}
	memset(m->p, KT_GUARD, len);
	return krdma_buf_register(fd, m->p, len, access, &m->h);
}

static inline void kt_mem_put(int fd, struct kt_mem *m)
{
	if (m->h)
		krdma_destroy_handle(fd, m->h);
	if (m->p)
		munmap(m->p, m->len);
	memset(m, 0, sizeof(*m));
}

static inline uint8_t kt_byte(size_t i, unsigned int seed)
{
	return (uint8_t)(i * 13 + seed * 101 + (i >> 9));
}

static inline void kt_pattern(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = kt_byte(i, seed);
}

/* Index of the first byte that is not the pattern, or -1 */
static inline long kt_check_pattern(const uint8_t *p, size_t len,
				    unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != kt_byte(i, seed))
			return i;
	return -1;
}

/* Index of the first byte that is not @v, or -1 */
static inline long kt_check_fill(const uint8_t *p, size_t len, uint8_t v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return i;
	return -1;
}

/* An operation with one local range (none when @len is 0) */
static inline void kt_op(struct krdma_op *op, uint32_t opcode, uint32_t conn,
			 uint32_t buf, uint64_t off, uint64_t len,
			 const struct krdma_token *tok, uint64_t roff,
			 uint64_t cookie)
{
	memset(op, 0, sizeof(*op));
	op->opcode = opcode;
	op->conn = conn;
	op->cookie = cookie;
	op->num_sge = len ? 1 : 0;
	op->sge.buf = buf;
	op->sge.offset = off;
	op->sge.length = len;
	if (tok)
		op->remote = *tok;
	op->remote_offset = roff;
}

/* Exactly @n completions, or fewer when KT_WAIT_MS pass without one */
static inline int kt_wait_wc(int fd, struct krdma_completion *wc, int n)
{
	int got = 0, ret;

	while (got < n) {
		ret = krdma_poll_wc(fd, wc + got, n - got, KT_WAIT_MS);
		if (ret <= 0)
			break;
		got += ret;
	}
	return got;
}

/*
 * Submit one operation and take its completion, on a file whose queue
 * holds nothing else: 0 with *wc filled, -ETIMEDOUT, or the submit errno.
 */
static inline int kt_run_op(int fd, struct krdma_op *op,
			    struct krdma_completion *wc)
{
	int ret = krdma_submit_ops(fd, op, 1, 0, NULL);

	if (ret)
		return ret;
	return kt_wait_wc(fd, wc, 1) == 1 ? 0 : -ETIMEDOUT;
}

/*
 * The state of a connection once it is not CONNECTED any more, or
 * CONNECTED if it still is after 10 s; 0 if the handle is gone. The
 * state has no event to wait for: this polls it.
 */
static inline uint32_t kt_wait_conn_down(int fd, uint32_t conn)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	struct krdma_conn_query q;
	int i;

	for (i = 0; i < 1000; i++) {
		if (krdma_conn_info(fd, conn, &q))
			return 0;
		if (q.state != KRDMA_CONN_CONNECTED)
			return q.state;
		nanosleep(&ts, NULL);
	}
	return KRDMA_CONN_CONNECTED;
}

/* Connect @cfd to the listener of @sfd at @addr and accept: a pair */
static inline int kt_connect_pair(int sfd, uint32_t listener,
				  const struct krdma_addr *addr, int cfd,
				  uint32_t *sconn, uint32_t *cconn)
{
	int ret = krdma_connect_to(cfd, addr, 10000, cconn);

	if (ret)
		return ret;
	return krdma_accept_conn(sfd, listener, 0, 10000, sconn);
}

/* VmPin of this process (pages pinned and charged to its mm), in KiB */
static inline long kt_vmpin_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

#endif /* KRDMA_TEST_LIB_H */
