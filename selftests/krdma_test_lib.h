/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma selftests: helpers of the C test programs that connect two files
 * of /dev/krdma, register memory and wait for completions, and read the
 * numbers of their command lines.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef KRDMA_TEST_LIB_H
#define KRDMA_TEST_LIB_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "libkrdma.h"

#define KT_GUARD 0xee
#define KT_WAIT_MS 20000
/* How long kt_wait_bytes() waits: 10 s, 30 s on a debug (KASAN) kernel */
#define KT_PLACE_MS (getenv("KRDMA_DEBUG_KERNEL") ? 30000 : 10000)

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

/* 8 bytes at @p, read once, at any alignment */
static inline uint64_t kt_load64(const volatile uint8_t *p)
{
	uint64_t v;

	memcpy(&v, (const uint8_t *)p, sizeof(v));
	return v;
}

/**
 * kt_wait_bytes() - wait until the destination of a WRITE holds its bytes
 * @dst: the destination, written by the device
 * @expect: the @len bytes it must hold
 * @len: bytes to compare
 * @timeout_ms: how long to wait at most (KT_PLACE_MS)
 *
 * On iWARP (siw) an RDMA WRITE completes at its initiator once its data
 * was handed to TCP, not once the responder placed it: siw's receive
 * side places it a moment later, from softirq. On RoCE (rxe) the WRITE
 * completes only after the responder's ACK, placed. A check of the
 * destination right after the initiator's completion is therefore racy
 * on siw: call this first, then make the check, which still fails if the
 * bytes are wrong. It scans again every 1 ms from the first byte that was
 * not there yet, moving only over bytes it read equal, 8 at a time.
 *
 * Not memcmp(): glibc's, having found a differing vector, reads the first
 * differing pair of bytes again for its result, and returns 0 if the
 * device wrote that byte in between, though the rest of the range was
 * never compared. A scan that skipped a page on that 0 returned with the
 * page's last WRITEs not yet placed (xfer.siw.unsignaled_ring_entries_
 * come_back, about 1 run in 400 on siw; on the host, 2 checks in 100,000
 * with a thread writing the destination in 64-byte pieces).
 *
 * Return: true once all @len bytes match, false when @timeout_ms passed.
 */
static inline bool kt_wait_bytes(const void *dst, const void *expect,
				 size_t len, int timeout_ms)
{
	const volatile uint8_t *d = dst;
	const uint8_t *e = expect;
	struct timespec ts = { 0, 1000 * 1000 }, t0, t;
	size_t i = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		while (len - i >= 8 && kt_load64(d + i) == kt_load64(e + i))
			i += 8;
		while (i < len && d[i] == e[i])
			i++;
		if (i == len)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout_ms)
			return false;
		nanosleep(&ts, NULL);
	}
}

/* kt_wait_bytes() for @len bytes of kt_pattern(@seed) */
static inline bool kt_wait_pattern(const void *dst, size_t len,
				   unsigned int seed, int timeout_ms)
{
	uint8_t *expect = malloc(len);
	bool ok;

	if (!expect)
		return false;
	kt_pattern(expect, len, seed);
	ok = kt_wait_bytes(dst, expect, len, timeout_ms);
	free(expect);
	return ok;
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

/*
 * The pages pinned with FOLL_PIN system-wide, as /proc/vmstat counts them
 * (-1 where it has no such counters). Each CPU's pending deltas are folded
 * in first (vm.stat_refresh, root only): otherwise each counter can lag by
 * a few pages for up to vm.stat_interval, and two reads a moment apart
 * disagree although nothing changed.
 */
static inline void kt_pin_counters(long *acq, long *rel)
{
	char name[64];
	long v;
	FILE *f = fopen("/proc/sys/vm/stat_refresh", "w");

	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	*acq = *rel = -1;
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return;
	while (fscanf(f, "%63s %ld", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			*acq = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			*rel = v;
	}
	fclose(f);
}

#define KT_PORT_RANGE "/proc/sys/net/ipv4/ip_local_port_range"

/*
 * ip_local_port_range, the ports that TCP and rdma_cm hand out to an
 * unbound socket or id: into @lo and @hi. 0 or -errno.
 */
static inline int kt_port_range_get(uint32_t *lo, uint32_t *hi)
{
	FILE *f = fopen(KT_PORT_RANGE, "re");
	int ret;

	if (!f)
		return -errno;
	ret = fscanf(f, "%u %u", lo, hi) == 2 ? 0 : -EINVAL;
	fclose(f);
	return ret;
}

/* Set ip_local_port_range (root) to [@lo, @hi]. 0 or -errno. */
static inline int kt_port_range_set(uint32_t lo, uint32_t hi)
{
	FILE *f = fopen(KT_PORT_RANGE, "we");
	int ret;

	if (!f)
		return -errno;
	ret = fprintf(f, "%u %u\n", lo, hi) > 0 ? 0 : -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
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

/**
 * kt_parse_u64() - a number of a command line, checked
 * @s: the string
 * @size: whether K, M or G (or k, m, g) may follow: binary multiples
 * @min: the smallest value allowed
 * @max: the largest value allowed
 * @out: the value, set on success only
 *
 * The style of krdmactl's parse_u64(): decimal digits only (no sign, no
 * space, no 0x), nothing after them but the suffix.
 *
 * Return: 0; -EINVAL when @s is no such number, -ERANGE when it is one
 * outside [@min, @max] (or beyond 64 bits).
 */
static inline int kt_parse_u64(const char *s, bool size, uint64_t min,
			       uint64_t max, uint64_t *out)
{
	static const char suffixes[] = "KkMmGg";
	unsigned int shift = 0;
	unsigned long long v;
	const char *sfx;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	sfx = size && *end ? strchr(suffixes, *end) : NULL;
	if (sfx) {
		shift = 10 * ((sfx - suffixes) / 2 + 1);
		end++;
	}
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v > max >> shift || v << shift < min)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

#endif /* KRDMA_TEST_LIB_H */
