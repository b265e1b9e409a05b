// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: every allocation failure on the ioctl paths of one
 * transfer, one at a time, with the kernel's fault injection (fail-nth),
 * as tools/testing/selftests/iommu/iommufd_fail_nth.c does for iommufd.
 *
 * The sequence: open two files of /dev/krdma, listen on one, connect the
 * other to it over a device that is its own peer (rxe0, siw0), accept,
 * register a source and a destination buffer, grant the destination,
 * submit a WRITE, poll its completion and check every byte that arrived,
 * destroy the grant, the buffers, the connections and the listener, and
 * close the files. For each step in turn, for n = 1, 2, 3 ...: run the
 * steps before it, write n to /proc/self/task/<tid>/fail-nth (the n-th
 * fault point this task reaches fails: a slab allocation with failslab,
 * one of order >= 1 with fail_page_alloc), run the step, and read back
 * whether the fault was injected. The step must succeed, or fail with an
 * errno the ABI documents for what failed (ENOMEM; the connect errors for
 * CONNECT); DESTROY and close must always succeed. A step that failed is
 * retried without a fault (it must then succeed: the failure left nothing
 * half done) and the sequence runs to its end, bytes checked, except
 * after a failed CONNECT or ACCEPT, where the files are closed. After
 * every iteration the files are closed, and the pinned pages, the
 * caller's pinned_vm (charged to RLIMIT_MEMLOCK) and krdma's reference
 * count must come back to where they were. The sweep of a step ends at
 * the first n that the step does not reach.
 *
 * A second test closes the files with every object still alive, sweeping
 * the faults of that close.
 *
 * Needs CONFIG_FAULT_INJECTION, CONFIG_FAILSLAB and debugfs (the debug
 * kernel of scripts/build-debug-kernel.sh, make check-debug): without
 * fail-nth every test is a TAP skip. Writes failslab's and
 * fail_page_alloc's ignore-gfp-wait (N: GFP_KERNEL allocations count),
 * and their verbose (0), and puts them back at exit. The kernel log must
 * show no WARNING, BUG, KASAN or lockdep report during the run.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdma_test_lib.h"
#include "kselftest_harness.h"

/*
 * The WRITE and the grant: 16 pages, or, in the *_pieces variants, more
 * than one registration of siw maps (256 pages): a window in pieces and a
 * key table, which the WRITE reads first. The destination buffer is twice
 * the window: nothing may land past it.
 */
#define LEN		(64 * 1024)
#define LEN_PIECES	(1024 * 1024 + 8192)
#define DST_LEN(len)	(2 * (len))
#define WAIT_MS		60000
#define MAX_NTH		2000		/* fault points of one step, at most */
#define CLEAN_WAIT_MS	30000
#define GUARD		0xee

enum step {
	S_OPEN,
	S_LISTEN,
	S_CONNECT,
	S_ACCEPT,
	S_REG_SRC,
	S_REG_DST,
	S_GRANT,
	S_SUBMIT,
	S_POLL,
	S_DESTROY_GRANT,
	S_DESTROY_BUFS,
	S_DESTROY_CONNS,
	S_DESTROY_LISTENER,
	S_CLOSE,
	NSTEPS
};

static const char *const step_name[NSTEPS] = {
	"open", "listen", "connect", "accept", "buf_reg src", "buf_reg dst",
	"grant", "submit WRITE", "poll", "destroy grant", "destroy buffers",
	"destroy connections", "destroy listener", "close",
};

/* One pass through the sequence */
struct run {
	int sfd, cfd;
	uint32_t listener, sconn, cconn, sbuf, cbuf, grant;
	struct krdma_addr addr;
	struct krdma_token token;
	size_t len;			/* of the WRITE and the grant */
	uint8_t *src, *dst;		/* len, DST_LEN; mapped once per test */
	unsigned int seed;
	uint64_t cookie;		/* of the last WRITE submitted */
	struct krdma_completion wc;	/* the last one polled */
	int nwc;			/* how many that poll returned */
};

/* ------------------------------------------------------------------ */
/* Fault injection set-up: debugfs knobs, restored at exit */

static const char *const knobs[] = {
	"failslab/ignore-gfp-wait", "failslab/verbose",
	"fail_page_alloc/ignore-gfp-wait", "fail_page_alloc/verbose",
};

static const char *const knob_value[] = { "N", "0", "N", "0" };
static char knob_saved[ARRAY_SIZE(knobs)][32];

static int knob_rw(const char *name, char *old, size_t oldlen,
		   const char *val)
{
	char path[128];
	ssize_t n;
	int fd;

	/* Opened once per access: the ulong ones are not seekable */
	snprintf(path, sizeof(path), "/sys/kernel/debug/%s", name);
	if (old) {
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return -errno;
		n = read(fd, old, oldlen - 1);
		old[n > 0 ? n : 0] = 0;
		close(fd);
	}
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -EIO;
}

static void restore_knobs(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(knobs); i++)
		if (knob_saved[i][0])
			knob_rw(knobs[i], NULL, 0, knob_saved[i]);
}

/* NULL when fault injection is ready, else why not */
static const char *setup_fault_injection(void)
{
	char path[64];
	size_t i;

	snprintf(path, sizeof(path), "/proc/self/task/%d/fail-nth", gettid());
	if (access(path, R_OK | W_OK))
		return "no /proc/self/task/<tid>/fail-nth (kernel without CONFIG_FAULT_INJECTION)";
	for (i = 0; i < ARRAY_SIZE(knobs); i++) {
		if (knob_rw(knobs[i], knob_saved[i], sizeof(knob_saved[i]),
			    knob_value[i]))
			return "no /sys/kernel/debug/failslab or fail_page_alloc (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC, debugfs)";
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* What must come back after each iteration */

struct counters {
	long pin_acq, pin_rel;	/* /proc/vmstat nr_foll_pin_* */
	long vm_pin;		/* VmPin of /proc/self/status, kB */
	long modref;		/* krdma's reference count */
};

static long read_field(const char *file, const char *key, int col)
{
	char line[256], name[64];
	long v, found = -1;
	size_t klen = strlen(key);
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) || (line[klen] != ' ' &&
						 line[klen] != ':' &&
						 line[klen] != '\t'))
			continue;
		if (col == 1 && sscanf(line, "%63s %ld", name, &v) == 2)
			found = v;
		if (col == 2 && sscanf(line, "%63s %*s %ld", name, &v) == 2)
			found = v;
	}
	fclose(f);
	return found;
}

static void get_counters(struct counters *c)
{
	kt_pin_counters(&c->pin_acq, &c->pin_rel);
	c->vm_pin = read_field("/proc/self/status", "VmPin", 1);
	c->modref = read_field("/proc/modules", "krdma", 2);
}

static bool counters_back(const struct counters *c0, const struct counters *c)
{
	return c->pin_acq - c0->pin_acq == c->pin_rel - c0->pin_rel &&
	       c->vm_pin == c0->vm_pin && c->modref == c0->modref;
}

/* Pages are unpinned by a work item: wait for it, bounded */
static bool wait_clean(const struct counters *c0, struct counters *c)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i;

	for (i = 0; i < CLEAN_WAIT_MS / 10; i++) {
		get_counters(c);
		if (counters_back(c0, c))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

/*
 * Before the first snapshot: the pages of an earlier test's process (a
 * failed test's, say) may still be on their way to the unpin work item.
 * Wait, bounded, until every page pinned in the system is released;
 * false if some stay pinned (a process the runner abandoned).
 */
static bool wait_pins_settled(struct counters *c)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i;

	for (i = 0; i < CLEAN_WAIT_MS / 10; i++) {
		get_counters(c);
		if (c->pin_acq == c->pin_rel)
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* Kernel log: new records that tell of a problem */

static int kmsg_fd = -1;

static int kmsg_problems(void)
{
	static const char *const bad[] = {
		"WARNING:", "BUG:", "Oops", "general protection", "KASAN",
		"lockdep", "possible circular locking", "inconsistent lock state",
		"UBSAN", "refcount_t", "hung_task", "blocked for more than",
	};
	char rec[8192], *nl, *msg;
	int n = 0;
	ssize_t len;
	size_t i;

	if (kmsg_fd < 0)
		return 0;
	for (;;) {
		len = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (len < 0 && errno == EPIPE)
			continue;	/* overwritten: go on */
		if (len <= 0)
			break;
		rec[len] = 0;
		nl = strchr(rec, '\n');
		if (nl)
			*nl = 0;
		/*
		 * A frame of a stack trace (" ? lockdep_...+0x273/0x3e0",
		 * indented) names functions: not a problem by itself; the
		 * record that heads a report is (and an injected failure's
		 * allocation warning heads none)
		 */
		msg = strchr(rec, ';');
		if (msg && msg[1] == ' ')
			continue;
		for (i = 0; i < ARRAY_SIZE(bad); i++)
			if (strstr(rec, bad[i])) {
				printf("# kernel: %s\n", rec);
				n++;
				break;
			}
	}
	return n;
}

/* ------------------------------------------------------------------ */
/* fail-nth of this thread */

struct nth {
	int fd;
	unsigned int n;		/* the fault point to fail, 1 .. */
};

static void nth_arm(struct __test_metadata *_metadata, struct nth *nth)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", nth->n);

	ASSERT_EQ(len, pwrite(nth->fd, buf, len, 0));
}

/*
 * Disarms fail-nth; true when the n-th fault point was reached (the
 * counter went down to 0). As in iommufd_fail_nth.c: a read that fails
 * with EFAULT had its own copy-out fail, so the counter was 0 before it.
 */
static bool nth_disarm(struct __test_metadata *_metadata, struct nth *nth)
{
	char buf[16] = "";
	ssize_t res, res2;

	res = pread(nth->fd, buf, sizeof(buf) - 1, 0);
	if (res == -1 && errno == EFAULT) {
		strcpy(buf, "0\n");
		res = 2;
	}
	res2 = pwrite(nth->fd, "0", 1, 0);
	if (res2 == -1 && errno == EFAULT)
		res2 = pwrite(nth->fd, "0", 1, 0);
	EXPECT_EQ(1, res2);
	EXPECT_LT(1, res);
	return res == 2 && buf[0] == '0' && buf[1] == '\n';
}

/* ------------------------------------------------------------------ */
/* The steps */

static void pattern(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 13 + seed + (i >> 12));
}

static void run_init(struct run *r)
{
	r->sfd = -1;
	r->cfd = -1;
	r->listener = 0;
	r->sconn = 0;
	r->cconn = 0;
	r->sbuf = 0;
	r->cbuf = 0;
	r->grant = 0;
	memset(&r->token, 0, sizeof(r->token));
	pattern(r->src, r->len, r->seed);
	memset(r->dst, GUARD, DST_LEN(r->len));
}

static int destroy(int fd, uint32_t *h)
{
	int ret = 0;

	if (*h)
		ret = krdma_destroy_handle(fd, *h);
	*h = 0;
	return ret;
}

/*
 * One step: 0 or the first failing call's -errno. Nothing here may
 * allocate in userspace (malloc, stdio): the fault is armed.
 */
static int do_step(struct run *r, const char *ip, enum step s)
{
	struct krdma_completion wc;
	struct krdma_addr any;
	struct krdma_op op;
	int ret, a, b;

	switch (s) {
	case S_OPEN:
		if (r->sfd < 0) {
			r->sfd = krdma_open();
			if (r->sfd < 0)
				return r->sfd;
		}
		r->cfd = krdma_open();
		return r->cfd < 0 ? r->cfd : 0;
	case S_LISTEN:
		ret = krdma_parse_addr(ip, 0, &any);
		return ret ?: krdma_listen_on(r->sfd, &any, 16, &r->listener,
					      &r->addr);
	case S_CONNECT:
		return krdma_connect_to(r->cfd, &r->addr, WAIT_MS, &r->cconn);
	case S_ACCEPT:
		return krdma_accept_conn(r->sfd, r->listener, 0, WAIT_MS,
					 &r->sconn);
	case S_REG_SRC:
		return krdma_buf_register(r->cfd, r->src, r->len, 0, &r->cbuf);
	case S_REG_DST:
		return krdma_buf_register(r->sfd, r->dst, DST_LEN(r->len),
					  KRDMA_ACCESS_LOCAL_WRITE |
					  KRDMA_ACCESS_REMOTE_WRITE, &r->sbuf);
	case S_GRANT:
		return krdma_grant_window(r->sfd, r->sconn, r->sbuf, 0, r->len,
					  KRDMA_ACCESS_REMOTE_WRITE, &r->grant,
					  &r->token);
	case S_SUBMIT:
		memset(&op, 0, sizeof(op));
		op.opcode = KRDMA_OP_WRITE;
		op.cookie = ++r->cookie;
		op.conn = r->cconn;
		op.num_sge = 1;
		op.sge.buf = r->cbuf;
		op.sge.length = r->len;
		op.remote = r->token;
		return krdma_submit_ops(r->cfd, &op, 1, 0, NULL);
	case S_POLL:
		memset(&r->wc, 0, sizeof(r->wc));
		r->nwc = krdma_poll_wc(r->cfd, &r->wc, 1, WAIT_MS);
		if (r->nwc < 0)
			return r->nwc;
		if (r->nwc != 1 || r->wc.cookie != r->cookie ||
		    r->wc.status != KRDMA_WC_SUCCESS || r->wc.byte_len != r->len)
			return -EBADMSG;	/* not an errno of krdma's */
		/* and no other completion: a failed submit has none */
		ret = krdma_poll_wc(r->cfd, &wc, 1, 0);
		if (ret) {
			r->wc = wc;
			return ret < 0 ? ret : -EEXIST;
		}
		return 0;
	case S_DESTROY_GRANT:
		return destroy(r->sfd, &r->grant);
	case S_DESTROY_BUFS:
		a = destroy(r->sfd, &r->sbuf);
		b = destroy(r->cfd, &r->cbuf);
		return a ?: b;
	case S_DESTROY_CONNS:
		a = destroy(r->cfd, &r->cconn);
		b = destroy(r->sfd, &r->sconn);
		return a ?: b;
	case S_DESTROY_LISTENER:
		return destroy(r->sfd, &r->listener);
	case S_CLOSE:
		a = r->cfd >= 0 ? close(r->cfd) : 0;
		b = r->sfd >= 0 ? close(r->sfd) : 0;
		r->cfd = -1;
		r->sfd = -1;
		return a || b ? -errno : 0;
	case NSTEPS:
		break;
	}
	return -EINVAL;
}

/*
 * What a step may fail with when an allocation fails under it: ENOMEM;
 * for LISTEN and CONNECT also what the network stack under rdma_cm
 * gives (ENOBUFS of a route, EADDRINUSE of a port bucket, ENFILE of a
 * TCP socket on iWARP: siw's, or the one holding a connect's source
 * port) and the connect errors rdma_cm's failure events come back as.
 */
static bool errno_allowed(enum step s, int err)
{
	switch (s) {
	case S_OPEN: case S_ACCEPT: case S_REG_SRC: case S_REG_DST:
	case S_GRANT: case S_SUBMIT: case S_POLL:
		return err == ENOMEM;
	case S_LISTEN:
		return err == ENOMEM || err == ENOBUFS || err == EADDRINUSE ||
		       err == ENFILE;
	case S_CONNECT:
		return err == ENOMEM || err == ENOBUFS || err == ETIMEDOUT ||
		       err == ECONNREFUSED || err == ECONNRESET ||
		       err == EHOSTUNREACH || err == ENETUNREACH ||
		       err == EADDRNOTAVAIL || err == EPROTO ||
		       err == ENFILE;
	default:
		return false;	/* destroy and close do not fail */
	}
}

static const char *err_name(int err)
{
	const char *n = err ? strerrorname_np(err) : "success";

	return n ?: "unknown errno";
}

/* ------------------------------------------------------------------ */
/* The sweep */

struct sweep {
	const char *ip;
	size_t len;		/* of the WRITE and the grant */
	enum step last;		/* the sequence ends with this step */
	enum step first_swept;	/* faults from this step on */
	bool close_early;	/* close with every object alive */
	/* per step, over the iterations that injected a fault */
	unsigned int failed[NSTEPS];	/* with an allowed errno */
	unsigned int bad_errno[NSTEPS];	/* with another one */
	unsigned int survived[NSTEPS];	/* succeeded anyway */
	unsigned int failed_later;	/* accepted WRITE, LOC_QP_OP_ERR */
	unsigned int failed_later_conn_ok;	/* ... connection still up */
};

static enum step next_step(const struct sweep *sw, enum step s)
{
	if (sw->close_early && s == S_POLL)
		return S_CLOSE;
	return s + 1;
}

/*
 * The step with the fault armed: runs it, records the outcome, and
 * retries it without a fault if it failed. Returns the step's final
 * result, or 1 to end the iteration (a failed CONNECT or ACCEPT).
 */
static int armed_step(struct __test_metadata *_metadata, struct sweep *sw,
		      struct run *r, struct nth *nth, enum step s, bool *hit)
{
	int ret;

	nth_arm(_metadata, nth);
	ret = do_step(r, sw->ip, s);
	*hit = nth_disarm(_metadata, nth);
	if (!*hit) {
		if (ret)
			TH_LOG("%s failed (%s) with no fault injected",
			       step_name[s], err_name(-ret));
		return ret;
	}
	if (!ret) {
		sw->survived[s]++;
		return 0;
	}
	if (errno_allowed(s, -ret)) {
		sw->failed[s]++;
		if (-ret != ENOMEM)
			printf("# %s, fault point %u: %s\n", step_name[s],
			       nth->n, err_name(-ret));
	} else {
		sw->bad_errno[s]++;
		TH_LOG("%s, fault point %u: %s (%d), not an errno the ABI documents for this failure",
		       step_name[s], nth->n, err_name(-ret), -ret);
	}
	EXPECT_TRUE(errno_allowed(s, -ret));
	if (s == S_CONNECT || s == S_ACCEPT)
		return 1;
	/* again without a fault: nothing may be half done */
	return do_step(r, sw->ip, s);
}

/*
 * A WRITE accepted by a SUBMIT that had an allocation fail under it may
 * complete with LOC_QP_OP_ERR: krdma could not post it (userspace-api.rst,
 * "Completions"). The connection then either failed (ERROR: the iteration
 * ends; 1) or works on: the WRITE is submitted again, without a fault,
 * and must arrive (0, or that SUBMIT's or POLL's error). -EBADMSG when
 * the completion was something else.
 */
static int write_failed(struct __test_metadata *_metadata, struct sweep *sw,
			struct run *r)
{
	struct krdma_conn_query q;
	int ret;

	if (r->nwc != 1 || r->wc.cookie != r->cookie ||
	    r->wc.status != KRDMA_WC_LOC_QP_OP_ERR)
		return -EBADMSG;
	sw->failed_later++;
	ret = krdma_conn_info(r->cfd, r->cconn, &q);
	if (ret)
		return ret;
	if (q.state == KRDMA_CONN_ERROR)
		return 1;
	sw->failed_later_conn_ok++;
	ret = do_step(r, sw->ip, S_SUBMIT);
	return ret ?: do_step(r, sw->ip, S_POLL);
}

/*
 * On iWARP the WRITE's completion means its data was handed to TCP, not
 * that the peer placed it (siw's receive side runs later, in softirq):
 * wait for the bytes, bounded, before calling them wrong. Once they are
 * all there, nothing past the window may have been written.
 */
static void check_bytes(struct __test_metadata *_metadata, struct run *r,
			const struct nth *nth, enum step armed)
{
	const volatile uint8_t *dst = r->dst;
	struct timespec ts = { 0, 1000 * 1000 };
	size_t i = 0;
	int ms;

	pattern(r->src, r->len, r->seed);	/* the expected bytes */
	for (ms = 0; ms < CLEAN_WAIT_MS; ms++) {
		for (; i < r->len && dst[i] == r->src[i]; i++)
			;
		if (i == r->len)
			break;
		nanosleep(&ts, NULL);
	}
	if (ms && i == r->len)
		printf("# the WRITE's last bytes were placed about %d ms after its completion (fault point %u of %s)\n",
		       ms, nth->n, step_name[armed]);
	if (i < r->len)
		TH_LOG("byte %zu of the WRITE: 0x%02x, expected 0x%02x (fault point %u of %s)",
		       i, r->dst[i], r->src[i], nth->n, step_name[armed]);
	ASSERT_EQ(r->len, i);
	for (i = r->len; i < DST_LEN(r->len) && r->dst[i] == GUARD; i++)
		;
	if (i < DST_LEN(r->len))
		TH_LOG("byte %zu, past the window, was written (fault point %u of %s)",
		       i, nth->n, step_name[armed]);
	ASSERT_EQ(DST_LEN(r->len), i);
}

/*
 * One iteration: the whole sequence, with fault point n of step @armed
 * made to fail. Returns true when that fault point was reached.
 */
static bool iteration(struct __test_metadata *_metadata, struct sweep *sw,
		      struct run *r, struct nth *nth, enum step armed,
		      const struct counters *c0)
{
	struct counters c;
	bool hit = false;
	enum step s;
	int ret;

	run_init(r);
	for (s = S_OPEN; s <= sw->last; s = next_step(sw, s)) {
		if (s == armed)
			ret = armed_step(_metadata, sw, r, nth, s, &hit);
		else
			ret = do_step(r, sw->ip, s);
		if (ret == -EBADMSG && s == S_POLL && armed == S_SUBMIT && hit)
			ret = write_failed(_metadata, sw, r);
		if (ret == 1)
			break;
		if (ret)
			TH_LOG("%s failed with no fault injected: %s (after fault point %u of %s)",
			       step_name[s], err_name(-ret), nth->n,
			       step_name[armed]);
		if (ret == -EBADMSG || ret == -EEXIST)
			TH_LOG("%s completion: cookie %llu (the WRITE's: %llu), status %s, byte_len %u, vendor_err 0x%x",
			       ret == -EEXIST ? "an extra" : "the WRITE's",
			       (unsigned long long)r->wc.cookie,
			       (unsigned long long)r->cookie,
			       r->nwc == 1 || ret == -EEXIST ?
			       krdma_wc_status_str(r->wc.status) : "(none: timed out)",
			       r->wc.byte_len, r->wc.vendor_err);
		ASSERT_EQ(0, ret);
		if (s == S_POLL)
			check_bytes(_metadata, r, nth, armed);
	}
	/* Close what is left, and check for leftovers */
	do_step(r, sw->ip, S_CLOSE);
	if (!wait_clean(c0, &c))
		TH_LOG("after fault point %u of %s: %ld pages pinned and %ld released since the start, VmPin %ld kB (was %ld), krdma refcount %ld (was %ld)",
		       nth->n, step_name[armed], c.pin_acq - c0->pin_acq,
		       c.pin_rel - c0->pin_rel, c.vm_pin, c0->vm_pin,
		       c.modref, c0->modref);
	ASSERT_TRUE(counters_back(c0, &c));
	r->seed++;
	return hit;
}

static void sweep(struct __test_metadata *_metadata, struct sweep *sw)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct counters c0, c;
	struct run r = { .seed = 1, .len = sw->len };
	struct nth nth;
	char path[64];
	enum step s;
	int problems;

	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &unlimited));
	snprintf(path, sizeof(path), "/proc/self/task/%d/fail-nth", gettid());
	nth.fd = open(path, O_RDWR);
	ASSERT_LE(0, nth.fd);
	/* Mapped and touched now: no page faults while a fault is armed */
	r.src = mmap(NULL, r.len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	r.dst = mmap(NULL, DST_LEN(r.len), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, r.src);
	ASSERT_NE(MAP_FAILED, r.dst);
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
	if (!wait_pins_settled(&c0))
		printf("# %ld pages stay pinned from before this test\n",
		       c0.pin_acq - c0.pin_rel);
	ASSERT_LE(0, c0.modref) TH_LOG("krdma is not loaded");

	for (s = sw->first_swept; s <= sw->last; s = next_step(sw, s)) {
		for (nth.n = 1; nth.n <= MAX_NTH; nth.n++)
			if (!iteration(_metadata, sw, &r, &nth, s, &c0))
				break;
		ASSERT_GE(MAX_NTH, nth.n)
			TH_LOG("%s has more than %u fault points", step_name[s],
			       MAX_NTH);
		printf("# %-19s %3u fault points: the step failed as documented %u times, with another errno %u, succeeded anyway %u\n",
		       step_name[s], nth.n - 1, sw->failed[s],
		       sw->bad_errno[s], sw->survived[s]);
	}
	if (sw->failed_later)
		printf("# an accepted WRITE completed with LOC_QP_OP_ERR %u times: its connection failed %u times, worked on (WRITE again, verified) %u times\n",
		       sw->failed_later,
		       sw->failed_later - sw->failed_later_conn_ok,
		       sw->failed_later_conn_ok);
	get_counters(&c);
	printf("# pages pinned %ld, released %ld; VmPin %ld kB (%ld at the start); krdma refcount %ld (%ld)\n",
	       c.pin_acq - c0.pin_acq, c.pin_rel - c0.pin_rel, c.vm_pin,
	       c0.vm_pin, c.modref, c0.modref);
	problems = kmsg_problems();
	EXPECT_EQ(0, problems) TH_LOG("the kernel log shows %d problem(s)", problems);
	close(kmsg_fd);
	close(nth.fd);
	munmap(r.src, r.len);
	munmap(r.dst, DST_LEN(r.len));
}

FIXTURE(fail_nth) {
	const char *skip;	/* why fault injection cannot be used */
};

FIXTURE_VARIANT(fail_nth) {
	const char *dev;
	const char *ip;		/* the device is its own peer there */
	size_t len;
};

FIXTURE_VARIANT_ADD(fail_nth, rxe) {
	.dev = "rxe",
	.ip = "198.18.0.1",
};

FIXTURE_VARIANT_ADD(fail_nth, siw) {
	.dev = "siw",
	.ip = "198.18.1.1",
};

/* A window of two pieces on siw, and its key table */
FIXTURE_VARIANT_ADD(fail_nth, siw_pieces) {
	.dev = "siw",
	.ip = "198.18.1.1",
	.len = LEN_PIECES,
};

/* Each test runs in its own child: the knobs are set, and put back, there */
FIXTURE_SETUP(fail_nth)
{
	const char *only = getenv("KRDMA_TEST_ONLY");
	char name[128];

	/* For debugging: KRDMA_TEST_ONLY=substring of "<dev>.<test>" */
	snprintf(name, sizeof(name), "%s.%s", variant->dev, _metadata->name);
	if (only && !strstr(name, only))
		_exit(0);
	self->skip = setup_fault_injection();
}

FIXTURE_TEARDOWN(fail_nth)
{
	restore_knobs();
}

/* Every step of the sequence, destroying each object, then closing */
TEST_F_TIMEOUT(fail_nth, every_step, 7200)
{
	struct sweep sw = {
		.ip = variant->ip,
		.len = variant->len ?: LEN,
		.last = S_CLOSE,
		.first_swept = S_OPEN,
	};

	if (self->skip)
		SKIP(return, "%s", self->skip);
	sweep(_metadata, &sw);
}

/* close() with a connection, buffers, a grant and a listener alive */
TEST_F_TIMEOUT(fail_nth, close_with_objects_alive, 3600)
{
	struct sweep sw = {
		.ip = variant->ip,
		.len = variant->len ?: LEN,
		.last = S_CLOSE,
		.first_swept = S_CLOSE,
		.close_early = true,
	};

	if (self->skip)
		SKIP(return, "%s", self->skip);
	sweep(_metadata, &sw);
}

TEST_HARNESS_MAIN
