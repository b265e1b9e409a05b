// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_kbench: a benchmark of krdma's kernel API, by a consumer module
 * that runs both ends in one machine, as perftest does.
 *
 * A run listens on one address of an RDMA device, connects to itself
 * there and accepts. The server end registers a kernel buffer and grants
 * a window of it (krdma_grant_create(), krdma_grant_token()); the client
 * end registers its regions and keeps up to @depth operations in flight
 * to that window: @batch of them per krdma_post_list(), all but the last
 * of each batch unsignaled, or one per krdma_post() with batch=1. The
 * operation is an RDMA WRITE, an RDMA READ, or a SEND into RECVs that the
 * server end keeps posted. The posting thread, the task that wrote the
 * command, times every krdma_post() or krdma_post_list() call with
 * ktime_get_ns().
 *
 * After the timed phase the bytes of the final operation, and only
 * those, are checked. That operation alone uses a region of its own, with
 * a pattern that no other region of the run has (every byte differs),
 * and its destination was poisoned (another such pattern) before the
 * timed phase: for WRITE the server's window must hold the final WRITE's
 * source region; for SEND the RECV that took the last message (every
 * RECV region poisoned) must hold the final SEND's source region; for
 * READ the final READ's local region, poisoned and read into by no other
 * READ, must hold the window. So stale bytes (an earlier operation's, or
 * none) never pass. The operations before the final one are not checked
 * (their patterns repeat every 16 regions, and every READ gets the same
 * window): their completing with IB_WC_SUCCESS is all that says they
 * worked. A completion that failed stops the run.
 *
 * Interface, in debugfs (/sys/kernel/debug/krdma_kbench/):
 *
 *   run     write one command, keys separated by blanks:
 *             addr=198.18.0.1 label=rxe0 op=write size=64K iters=2048
 *             depth=64 batch=16
 *           The whole run happens inside that write(), which returns the
 *           count written when the run succeeded (the final operation's
 *           bytes verified) and a negative errno when it failed (-EINVAL:
 *           a bad command; -EMSGSIZE, -EOPNOTSUPP, -E2BIG: beyond the
 *           limits; -ETIMEDOUT: timeout= passed). Every wait is killable
 *           and bounded (timeout=, and 10 s for connecting and for the
 *           bytes to land), so `timeout -k 10 60 sh -c 'echo ... >run'`
 *           always ends it; a writer killed by SIGKILL returns once both
 *           ends are torn down. One run at a time: a second writer waits
 *           (killable) for the first. While a write is inside, the module
 *           is in use (rmmod fails).
 *   result  the last run's outcome: one JSON object on one line; empty
 *           while a run is in progress (and before the first). Reading it
 *           never waits for a run.
 *
 * Keys: addr= (alias dev=) an IPv4 or IPv6 address of the RDMA device,
 * required; label= a name for the JSON (the device, "rxe0"); op=write,
 * read or send (default write); size= bytes of each operation, with K, M
 * or G (1 to 64M; default 64K; op=send: a SEND or RECV of kernel memory
 * may span max_send_sge pages at most, 16 on any device, so 64K with
 * 4 KiB pages, else -EMSGSIZE); iters= operations (1 to 4194304; default
 * 1000); depth= operations in flight (1 to 4096; default 64; rounded down
 * to a multiple of batch); batch= operations per call (1 to depth;
 * default 16; 1: krdma_post()); unsignaled=0 or 1 (default 1: all but the
 * last of a batch; READ on iWARP is always signaled, as krdma requires);
 * sq= the client's send queue depth (0, the default: depth times the
 * 256 KiB pieces of one operation, 16 to 1024; krdma clamps any to 16 to
 * 4096); timeout= seconds for the timed phase and its drain (1 to 3600,
 * default 120). The client's regions (up to 17, at most about 32 MiB
 * unless two regions are more) and the server's memory (one region; for
 * op=send, depth regions) are at most 256 MiB together: more is -E2BIG,
 * refused before anything is allocated.
 *
 * The JSON object: "op", "device" (the label, or null), "addr",
 * "transport" ("roce", "iwarp", "ib", "other"; null before a connection),
 * "size", "iters", "depth" (as used: rounded down to a multiple of
 * batch), "depth_asked" (as the command gave it), "batch", "unsignaled"
 * (as used), "sq_depth" (the send queue depth as krdma uses it),
 * "src_mem" ("kmalloc" or "vmalloc": what kvzalloc() gave the client's
 * regions; null before they were allocated), "bytes" (size x iters);
 * "seconds" (the timed phase, from the first call to the last
 * completion), "mb_per_s" (10^6 bytes a second), "mmsg_per_s" (10^6
 * operations a second), null when the timed phase did not end; "post_ns"
 * {"calls", "samples", "median", "p99", "max", "avg", "total"}:
 * nanoseconds inside each krdma_post() or krdma_post_list() call, null
 * before the first: "max", "avg" and "total" over every call, "median"
 * and "p99" (nearest rank) over "samples" of them, every call when there
 * are at most 65536, else every k-th call (k = calls / 65536 rounded up)
 * so that at most 65536 are kept and sorted; "accepted" (null, or when a
 * call refused an operation, the operations of that call it accepted
 * before it, krdma_post_list()'s *accepted); "wait_ns" (the posting
 * thread asleep, waiting for room or for RECVs); "verified" (the final
 * operation's bytes were checked and right; false when the run failed
 * before), "verified_scope" ("last_op": what "verified" covers, only the
 * final operation), "bad_offset" (the first wrong byte of it, or -1);
 * "ok", "error" (0 or a negative errno), "stage" (null, or where it
 * failed: parse, limits, address, listen, connect, accept, memory,
 * register, grant, rkeys, recv, post, wait, verify); "wc_status" and
 * "vendor_err" of the first failed completion (0: none); "byte_len" (a
 * RECV that took a message of the wrong length: its length, else 0).
 *
 * Unlike perftest, one thread does all of it: for SEND it also posts the
 * server's RECVs again as they complete, and a SEND is posted only once
 * its RECV is (on iWARP a SEND that finds no RECV ends the connection).
 * As ib_write_bw's, every WRITE goes to the same remote window. A batch
 * is posted again only after its signaled operation completed with
 * IB_WC_SUCCESS (then, as Documentation/kernel-api.rst has it, every
 * request of it is the caller's again); one that failed is never reused:
 * the run stops and the teardown gives every request back.
 *
 * Why a debugfs file: a bench script runs many rows (operations, sizes,
 * devices) against one loaded module, and a write() that returns when the
 * row is done, with the row in a file next to it, is the whole protocol
 * for a shell: echo and cat, no ioctl, no polling, and the write's exit
 * status says whether the row worked. Module parameters would need one
 * insmod per row; a char device, an ioctl ABI. scripts/bench-kapi.sh and
 * selftests/krdma_kbench_test.sh drive it.
 *
 * Copyright (c) 2026 The krdma authors
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/llist.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/wait.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <krdma/krdma.h>

MODULE_IMPORT_NS(KRDMA);

#define KB_CMD_MAX		256
#define KB_RESULT_MAX		2048
#define KB_MAX_SIZE		SZ_64M
#define KB_MAX_ITERS		BIT(22)
#define KB_MAX_DEPTH		4096
#define KB_AUTO_SQ_MAX		1024
/* krdma's clamp of a send queue depth */
#define KB_SQ_MIN		16
#define KB_SQ_MAX		4096
#define KB_PIECE		SZ_256K
/* kb_run.last_recv until every message was received */
#define KB_NO_RECV		U32_MAX
/*
 * Source regions of every operation but the final one: at most this many,
 * in at most this many bytes, >= 2. The final operation has one more.
 */
#define KB_MAX_REGIONS		16
#define KB_SRC_BYTES		SZ_32M
/* The client's and the server's memory together, at most */
#define KB_MAX_MEM		SZ_256M
/* Seeds beyond the regions': the final operation's, and the poison */
#define KB_SEED_FINAL		KB_MAX_REGIONS
#define KB_SEED_POISON		(KB_MAX_REGIONS + 1)
/* Call times kept for the median and the 99th percentile, at most */
#define KB_MAX_SAMPLES		65536
#define KB_CONN_TIMEOUT		(10 * HZ)
#define KB_VERIFY_TIMEOUT	(10 * HZ)

enum kb_op { KB_WRITE, KB_READ, KB_SEND };

static const char *const kb_op_names[] = {
	[KB_WRITE] = "write", [KB_READ] = "read", [KB_SEND] = "send",
};

static const u32 kb_opcodes[] = {
	[KB_WRITE] = KRDMA_OP_WRITE, [KB_READ] = KRDMA_OP_READ,
	[KB_SEND] = KRDMA_OP_SEND,
};

/**
 * struct kb_params - one run, as the command gave it
 * @addr: the device's address (checked: see kb_name_ok())
 * @label: a name for the JSON, or empty
 * @op: what the client does
 * @size: bytes of each operation
 * @iters: operations
 * @depth: operations in flight, at most: @depth_asked rounded down to a
 *         multiple of @batch
 * @depth_asked: as the command gave it
 * @batch: operations per krdma_post_list() (1: krdma_post())
 * @sq_depth: the client's send queue depth (0: computed, kb_sq_depth())
 * @unsignaled: all but the last of a batch without a completion
 * @timeout_s: seconds for the timed phase and the drain
 */
struct kb_params {
	char addr[INET6_ADDRSTRLEN + 1];
	char label[32];
	enum kb_op op;
	u64 size;
	u32 iters;
	u32 depth;
	u32 depth_asked;
	u32 batch;
	u32 sq_depth;
	bool unsignaled;
	u32 timeout_s;
};

struct kb_run;

/**
 * struct kb_slot - @batch requests posted together, and free again together
 * @run: the run
 * @index: its number: its requests are reqs[@index * batch ...]
 * @pending: signaled requests of the batch whose successful done has not
 *           come
 */
struct kb_slot {
	struct kb_run *run;
	u32 index;
	atomic_t pending;
};

/**
 * struct kb_recv - one RECV of the server end (op=send)
 * @run: the run
 * @index: its region of the server's buffer
 * @node: in kb_run.recv_done once it completed, to be posted again
 * @req: the operation
 */
struct kb_recv {
	struct kb_run *run;
	u32 index;
	struct llist_node node;
	struct krdma_req *req;
};

/**
 * struct kb_run - the state of one run
 * @p: what to do
 * @stage: where it is (or where it failed), for the JSON
 * @cmd: the command, as written
 * @row: the JSON row, before it is published
 * @l: the listener
 * @client: the end that posts
 * @server: the end that grants (and receives)
 * @info: the client's krdma_conn_info()
 * @sq_depth: the client's send queue depth, as krdma uses it
 * @unsignaled: @p.unsignaled as it could be used
 * @stride: bytes from one region to the next (>= size; no region of up to
 *          a page straddles a page)
 * @nregions: regions of every operation but the final one (op=read: local
 *            destination regions); the final operation's is region
 *            @nregions, after them
 * @src: the client's memory
 * @src_len: its length
 * @src_mem: "kmalloc" or "vmalloc": what @src is, or NULL before
 * @src_buf: its registration
 * @dst: the server's memory: the window, or the RECVs' regions
 * @dst_len: its length
 * @dst_buf: its registration
 * @grant: the window (write, read)
 * @tok: its token
 * @rkeys: its key table, when the token has one (siw beyond 1 MiB)
 * @reqs: the client's requests, @nslots * batch
 * @slots: the batches
 * @nslots: how many
 * @lock: protects @free, @nfree, @error, @wc_status, @vendor_err and
 *        @byte_len; taken in process and softirq context (a done never
 *        runs in hardirq)
 * @free: free slots, a stack
 * @nfree: its height
 * @wq: the posting thread waits here
 * @failed: an operation failed: stop
 * @closing: the ends are being disconnected: flushes are no failure
 * @error: the first failure (a negative errno)
 * @wc_status: the first failed completion's status
 * @vendor_err: its vendor error
 * @byte_len: a RECV's length that was not @p.size, or 0
 * @recvs: the server's RECVs (send)
 * @nrecvs: how many
 * @recv_done: RECVs that completed, for the posting thread to post again
 * @recvs_posted: RECVs posted so far: the SENDs that may be posted
 * @received: messages received
 * @last_recv: the region that received the last message, KB_NO_RECV
 *             until every message was received (released once set; the
 *             drain reads it with acquire)
 * @deadline: jiffies by which the timed phase and drain must be over
 * @call_ns: the sampled call times (every @sample_every-th call)
 * @sample_every: one call in this many is sampled
 * @nsamples: calls sampled
 * @ncalls: calls made
 * @accepted: the operations that the refusing call accepted, or -1
 * @elapsed_ns: the timed phase, from the first call to the last completion
 * @wait_ns: time the posting thread slept, waiting for room or credit
 * @post_median: median of the samples
 * @post_p99: their 99th percentile
 * @post_max: the longest call
 * @post_total: the sum over every call
 * @bad_offset: the first byte that was wrong, or -1
 * @verified: the final operation's bytes were checked and right
 */
struct kb_run {
	struct kb_params p;
	const char *stage;
	char cmd[KB_CMD_MAX];
	char row[KB_RESULT_MAX];

	struct krdma_listener *l;
	struct krdma_conn *client;
	struct krdma_conn *server;
	struct krdma_conn_info info;
	u32 sq_depth;
	bool unsignaled;

	size_t stride;
	u32 nregions;
	void *src;
	size_t src_len;
	const char *src_mem;
	struct krdma_buf *src_buf;
	void *dst;
	size_t dst_len;
	struct krdma_buf *dst_buf;
	struct krdma_window *grant;
	struct krdma_token tok;
	struct krdma_rkeys *rkeys;

	struct krdma_req **reqs;
	struct kb_slot *slots;
	u32 nslots;
	spinlock_t lock;	/* free, nfree, error, wc_status, vendor_err, byte_len */
	u32 *free;
	u32 nfree;
	wait_queue_head_t wq;
	atomic_t failed;
	bool closing;
	int error;
	u32 wc_status;
	u32 vendor_err;
	u32 byte_len;

	struct kb_recv *recvs;
	u32 nrecvs;
	struct llist_head recv_done;
	u32 recvs_posted;
	atomic_t received;
	u32 last_recv;

	unsigned long deadline;
	u64 *call_ns;
	u32 sample_every;
	u32 nsamples;
	u32 ncalls;
	int accepted;
	u64 elapsed_ns;
	u64 wait_ns;
	u64 post_median;
	u64 post_p99;
	u64 post_max;
	u64 post_total;
	long bad_offset;
	bool verified;
};

static struct dentry *kb_dir;
/* One run at a time */
static DEFINE_MUTEX(kb_lock);
/* The last run's row; held only to copy it, never across a run */
static DEFINE_MUTEX(kb_result_lock);
static char kb_result[KB_RESULT_MAX];

/*
 * Commands
 */

/* What may go into the JSON without escaping, and into an address */
static bool kb_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum(*s) && !strchr(".:-_%", *s))
			return false;
	return true;
}

static int kb_copy_name(char *dst, size_t len, const char *val)
{
	if (!kb_name_ok(val) || strlen(val) >= len)
		return -EINVAL;
	strscpy(dst, val, len);
	return 0;
}

/* A number with an optional K, M or G; one that does not fit is -EINVAL */
static int kb_parse_size(const char *val, u64 *out)
{
	char num[24];
	size_t len = strlen(val);
	unsigned int shift = 0;
	u64 v;

	if (!len || len >= sizeof(num))
		return -EINVAL;
	memcpy(num, val, len + 1);
	switch (num[len - 1]) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	}
	if (shift)
		num[len - 1] = '\0';
	if (kstrtou64(num, 0, &v) || check_shl_overflow(v, shift, out))
		return -EINVAL;
	return 0;
}

static int kb_parse_op(const char *val, enum kb_op *op)
{
	int i = match_string(kb_op_names, ARRAY_SIZE(kb_op_names), val);

	if (i < 0)
		return -EINVAL;
	*op = i;
	return 0;
}

static int kb_parse_one(struct kb_params *p, const char *key, const char *val)
{
	if (!strcmp(key, "addr") || !strcmp(key, "dev"))
		return kb_copy_name(p->addr, sizeof(p->addr), val);
	if (!strcmp(key, "label"))
		return kb_copy_name(p->label, sizeof(p->label), val);
	if (!strcmp(key, "op"))
		return kb_parse_op(val, &p->op);
	if (!strcmp(key, "size"))
		return kb_parse_size(val, &p->size);
	if (!strcmp(key, "iters"))
		return kstrtou32(val, 0, &p->iters);
	if (!strcmp(key, "depth"))
		return kstrtou32(val, 0, &p->depth_asked);
	if (!strcmp(key, "batch"))
		return kstrtou32(val, 0, &p->batch);
	if (!strcmp(key, "sq"))
		return kstrtou32(val, 0, &p->sq_depth);
	if (!strcmp(key, "unsignaled"))
		return kstrtobool(val, &p->unsignaled);
	if (!strcmp(key, "timeout"))
		return kstrtou32(val, 0, &p->timeout_s);
	return -EINVAL;
}

/**
 * kb_parse - read a command into @p
 * @cmd: the command, NUL-terminated; taken apart
 * @p: the run's parameters, defaults first
 *
 * Only the syntax and each value's range: kb_plan() checks what they
 * need together.
 *
 * Return: 0, or -EINVAL (an unknown key, a bad value, no address).
 */
static int kb_parse(char *cmd, struct kb_params *p)
{
	char *tok, *val;

	*p = (struct kb_params){
		.op = KB_WRITE, .size = SZ_64K, .iters = 1000,
		.depth_asked = 64, .batch = 16, .unsignaled = true,
		.timeout_s = 120,
	};
	while ((tok = strsep(&cmd, " \t\n"))) {
		if (!*tok)
			continue;
		val = strchr(tok, '=');
		if (!val)
			return -EINVAL;
		*val++ = '\0';
		if (kb_parse_one(p, tok, val))
			return -EINVAL;
	}
	if (!p->addr[0] || !p->size || p->size > KB_MAX_SIZE ||
	    !p->iters || p->iters > KB_MAX_ITERS ||
	    !p->depth_asked || p->depth_asked > KB_MAX_DEPTH ||
	    !p->batch || p->batch > p->depth_asked ||
	    p->sq_depth > KB_MAX_DEPTH ||
	    !p->timeout_s || p->timeout_s > 3600)
		return -EINVAL;
	p->depth = rounddown(p->depth_asked, p->batch);
	return 0;
}

/* No region of up to a page straddles a page; larger ones start on one */
static size_t kb_stride(u64 size)
{
	if (size <= PAGE_SIZE)
		return roundup_pow_of_two(size);
	return round_up(size, PAGE_SIZE);
}

/* The client's send queue depth, as krdma will use it */
static u32 kb_sq_depth(const struct kb_params *p)
{
	u64 wrs;

	if (p->sq_depth) {
		wrs = p->sq_depth;
	} else {
		wrs = (u64)p->depth * DIV_ROUND_UP_ULL(p->size, KB_PIECE);
		wrs = clamp_t(u64, wrs, KB_SQ_MIN, KB_AUTO_SQ_MAX);
	}
	return clamp_t(u64, wrs, KB_SQ_MIN, KB_SQ_MAX);
}

/**
 * kb_plan - the run's sizes, checked before anything is allocated
 * @r: the run, its parameters parsed
 *
 * Every size is computed with saturating arithmetic (size_mul(),
 * size_add()): one that would not fit fails the cap.
 *
 * Return: 0; -EMSGSIZE (op=send larger than any device's SGE limit,
 * KRDMA_OP_MAX_SGE pages); -E2BIG (more memory than KB_MAX_MEM).
 */
static int kb_plan(struct kb_run *r)
{
	const struct kb_params *p = &r->p;
	size_t total;

	r->stage = "limits";
	r->sq_depth = kb_sq_depth(p);
	r->stride = kb_stride(p->size);
	r->nregions = clamp_t(size_t, KB_SRC_BYTES / r->stride, 2,
			      KB_MAX_REGIONS);
	/* The regions, and the final operation's own */
	r->src_len = size_mul(r->nregions + 1, r->stride);
	r->dst_len = r->stride;
	if (p->op == KB_SEND) {
		/* Regions of more than a page start on one: this many pages */
		if (DIV_ROUND_UP_ULL(p->size, PAGE_SIZE) > KRDMA_OP_MAX_SGE)
			return -EMSGSIZE;
		r->dst_len = size_mul(p->depth, r->stride);
	}
	total = size_add(r->src_len, r->dst_len);
	if (total > KB_MAX_MEM)
		return -E2BIG;
	return 0;
}

/*
 * Patterns: byte i of a region with seed @seed(@size, @region). Seeds
 * 0 to KB_SEED_POISON differ from each other (29 is odd), so two regions
 * of different seeds differ in every byte; they also differ from other
 * sizes'.
 */
static u8 kb_seed(u64 size, u32 region)
{
	return (u8)(size ^ (size >> 8) ^ (size >> 16) ^ (size >> 24)) +
	       (u8)(region * 29 + 1);
}

static void kb_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++) {
		p[i] = (u8)(i * 13 + (i >> 12)) + seed;
		if (!((i + 1) % SZ_1M))
			cond_resched();
	}
}

/* Pages that @len bytes at @p span */
static unsigned long kb_pages(const void *p, size_t len)
{
	return DIV_ROUND_UP(offset_in_page(p) + len, PAGE_SIZE);
}

/* Client region @i; region @nregions is the final operation's */
static u8 *kb_region(struct kb_run *r, u32 i)
{
	return (u8 *)r->src + (size_t)i * r->stride;
}

/*
 * Completions
 */

/* The first failure stops the run; those of a teardown are none */
static void kb_fail(struct kb_run *r, int error, u32 status, u32 vendor_err,
		    u32 byte_len)
{
	if (READ_ONCE(r->closing))
		return;
	spin_lock_bh(&r->lock);
	if (!atomic_read(&r->failed)) {
		r->error = error;
		r->wc_status = status;
		r->vendor_err = vendor_err;
		r->byte_len = byte_len;
		atomic_set(&r->failed, 1);
	}
	spin_unlock_bh(&r->lock);
	wake_up(&r->wq);
}

static int kb_error(struct kb_run *r)
{
	int error;

	spin_lock_bh(&r->lock);
	error = r->error;
	spin_unlock_bh(&r->lock);
	return error ?: -EIO;
}

/*
 * A client operation's done: softirq or process context, no krdma lock
 * held. The signaled ones that succeed end their part of the batch, and
 * the last of them makes it free again: then every request of the batch
 * is ours again (kernel-api.rst, "Unsignaled operations"). A failure
 * (an unsignaled operation's, or a signaled one's) stops the run and
 * never frees the batch: some of its requests may be krdma's still, until
 * the teardown makes every request the caller's again.
 */
static void kb_op_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct kb_slot *s = req->context;
	struct kb_run *r = s->run;

	if (wc->status != IB_WC_SUCCESS) {
		kb_fail(r, -EIO, wc->status, wc->vendor_err, 0);
		return;
	}
	if (req->flags & KRDMA_REQ_UNSIGNALED)
		return;
	if (!atomic_dec_and_test(&s->pending))
		return;
	spin_lock_bh(&r->lock);
	r->free[r->nfree] = s->index;
	WRITE_ONCE(r->nfree, r->nfree + 1);
	spin_unlock_bh(&r->lock);
	wake_up(&r->wq);
}

/* A server RECV's done: hand it back to the posting thread */
static void kb_recv_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct kb_recv *rv = req->context;
	struct kb_run *r = rv->run;

	if (wc->status != IB_WC_SUCCESS) {
		kb_fail(r, -EIO, wc->status, wc->vendor_err, 0);
		return;
	}
	if (wc->byte_len != r->p.size) {
		kb_fail(r, -EBADMSG, 0, 0, wc->byte_len);
		return;
	}
	/*
	 * The last message: where it went tells the drain that it may
	 * verify (kb_ready(), acquire). One value, released once: a count
	 * and a region apart once let the drain, on a preempted vCPU, read
	 * the region of an earlier message.
	 */
	if (atomic_inc_return(&r->received) == r->p.iters) {
		/* Pairs with the acquire in kb_ready() */
		smp_store_release(&r->last_recv, rv->index);
	}
	llist_add(&rv->node, &r->recv_done);
	wake_up(&r->wq);
}

/*
 * Setup and teardown
 */

static int kb_addr(const char *s, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	if (in4_pton(s, -1, (u8 *)&sin->sin_addr, -1, NULL)) {
		sin->sin_family = AF_INET;
		return 0;
	}
	if (in6_pton(s, -1, (u8 *)&sin6->sin6_addr, -1, NULL)) {
		sin6->sin6_family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

/* Listen on the address, connect to it, accept: the two ends */
static int kb_pair_open(struct kb_run *r)
{
	struct krdma_conn_params cp = {}, sp = {};
	struct sockaddr_storage ss, bound;
	int ret;

	r->stage = "address";
	ret = kb_addr(r->p.addr, &ss);
	if (ret)
		return ret;
	sp.rq_depth = r->p.op == KB_SEND ? r->p.depth : 0;
	r->stage = "listen";
	r->l = krdma_listen(&init_net, (struct sockaddr *)&ss, 1, &sp);
	if (IS_ERR(r->l)) {
		ret = PTR_ERR(r->l);
		r->l = NULL;
		return ret;
	}
	ret = krdma_listener_addr(r->l, &bound);
	if (ret)
		goto err_listener;
	cp.sq_depth = r->sq_depth;
	r->stage = "connect";
	r->client = krdma_connect(&init_net, (struct sockaddr *)&bound, NULL,
				  KB_CONN_TIMEOUT, &cp);
	if (IS_ERR(r->client)) {
		ret = PTR_ERR(r->client);
		r->client = NULL;
		goto err_listener;
	}
	r->stage = "accept";
	ret = krdma_accept(r->l, false, KB_CONN_TIMEOUT, &r->server);
	if (ret)
		goto err_client;
	krdma_conn_info(r->client, &r->info);
	return 0;

err_client:
	krdma_conn_close(r->client);
	r->client = NULL;
err_listener:
	krdma_listener_close(r->l);
	r->l = NULL;
	return ret;
}

static void kb_pair_close(struct kb_run *r)
{
	krdma_conn_close(r->client);
	krdma_conn_close(r->server);
	krdma_listener_close(r->l);
}

/*
 * What the connection allows, before any memory: READ needs an
 * initiator_depth (-EOPNOTSUPP); a SEND and its RECV may span the SGE
 * limits' pages at most (-EMSGSIZE; kb_check_limits() checks the regions
 * as allocated).
 */
static int kb_check_conn(struct kb_run *r)
{
	struct krdma_conn_info sinfo;

	r->stage = "limits";
	if (r->p.op == KB_READ && !r->info.initiator_depth)
		return -EOPNOTSUPP;
	if (r->p.op != KB_SEND)
		return 0;
	krdma_conn_info(r->server, &sinfo);
	if (DIV_ROUND_UP_ULL(r->p.size, PAGE_SIZE) >
	    min(r->info.max_send_sge, sinfo.max_recv_sge))
		return -EMSGSIZE;
	return 0;
}

/*
 * Both ends disconnected: every operation, in flight or queued, has
 * completed and its done has returned, every request is the caller's
 * again and no memory is named by any. Idempotent.
 */
static void kb_quiesce(struct kb_run *r)
{
	WRITE_ONCE(r->closing, true);
	krdma_disconnect(r->client);
	krdma_disconnect(r->server);
}

/* The patterns, and the poison where the final operation's bytes go */
static void kb_patterns(struct kb_run *r)
{
	u64 size = r->p.size;
	u32 i;

	for (i = 0; i < r->nregions; i++)
		kb_fill(kb_region(r, i), size, kb_seed(size, i));
	if (r->p.op == KB_READ) {
		kb_fill(r->dst, size, kb_seed(size, KB_SEED_FINAL));
		kb_fill(kb_region(r, r->nregions), size,
			kb_seed(size, KB_SEED_POISON));
		return;
	}
	kb_fill(kb_region(r, r->nregions), size, kb_seed(size, KB_SEED_FINAL));
	for (i = 0; i < r->dst_len / r->stride; i++)
		kb_fill((u8 *)r->dst + (size_t)i * r->stride, size,
			kb_seed(size, KB_SEED_POISON));
}

/*
 * The client's regions (sources; op=read: destinations) and the server's
 * memory (the window; op=send: one region per RECV), registered. Their
 * sizes were checked by kb_plan().
 */
static int kb_mem_get(struct kb_run *r)
{
	u32 src_access = 0, dst_access = KRDMA_ACCESS_REMOTE_WRITE;
	int ret;

	if (r->p.op == KB_READ) {
		src_access = KRDMA_ACCESS_LOCAL_WRITE;
		dst_access = KRDMA_ACCESS_REMOTE_READ;
	} else if (r->p.op == KB_SEND) {
		dst_access = KRDMA_ACCESS_LOCAL_WRITE;
	}

	r->stage = "memory";
	r->src = kvzalloc(r->src_len, GFP_KERNEL | __GFP_NOWARN);
	if (!r->src)
		return -ENOMEM;
	r->src_mem = is_vmalloc_addr(r->src) ? "vmalloc" : "kmalloc";
	r->dst = kvzalloc(r->dst_len, GFP_KERNEL | __GFP_NOWARN);
	if (!r->dst) {
		ret = -ENOMEM;
		goto err_free_src;
	}
	kb_patterns(r);

	r->stage = "register";
	r->src_buf = krdma_buf_reg_kernel(r->src, r->src_len, src_access);
	if (IS_ERR(r->src_buf)) {
		ret = PTR_ERR(r->src_buf);
		goto err_free_dst;
	}
	r->dst_buf = krdma_buf_reg_kernel(r->dst, r->dst_len, dst_access);
	if (IS_ERR(r->dst_buf)) {
		ret = PTR_ERR(r->dst_buf);
		goto err_dereg_src;
	}
	return 0;

err_dereg_src:
	krdma_buf_dereg(r->src_buf);
err_free_dst:
	kvfree(r->dst);
err_free_src:
	kvfree(r->src);
	r->src_buf = NULL;
	r->dst_buf = NULL;
	r->src = NULL;
	r->dst = NULL;
	return ret;
}

static void kb_mem_put(struct kb_run *r)
{
	/* Nothing in flight may name the memory any more */
	kb_quiesce(r);
	krdma_buf_dereg(r->dst_buf);
	krdma_buf_dereg(r->src_buf);
	kvfree(r->dst);
	kvfree(r->src);
}

/* The server's window (write, read), its token, and its key table */
static int kb_grant_get(struct kb_run *r)
{
	u32 access = r->p.op == KB_READ ? KRDMA_ACCESS_REMOTE_READ :
					  KRDMA_ACCESS_REMOTE_WRITE;
	int ret;

	if (r->p.op == KB_SEND)
		return 0;
	r->stage = "grant";
	r->grant = krdma_grant_create(r->server, r->dst_buf, 0, r->p.size,
				      access);
	if (IS_ERR(r->grant)) {
		ret = PTR_ERR(r->grant);
		r->grant = NULL;
		return ret;
	}
	krdma_grant_token(r->grant, &r->tok);
	if (!r->tok.seg_shift)
		return 0;
	r->stage = "rkeys";
	r->rkeys = krdma_rkeys_get(r->client, &r->tok);
	if (IS_ERR(r->rkeys)) {
		ret = PTR_ERR(r->rkeys);
		r->rkeys = NULL;
		goto err_destroy;
	}
	return 0;

err_destroy:
	krdma_grant_destroy(r->grant);
	r->grant = NULL;
	return ret;
}

static void kb_grant_put(struct kb_run *r)
{
	if (r->rkeys)
		krdma_rkeys_put(r->rkeys);
	if (r->grant)
		krdma_grant_destroy(r->grant);
}

/* What a SEND and its RECV span: each region within the SGE limits */
static int kb_check_limits(struct kb_run *r)
{
	struct krdma_conn_info sinfo;
	unsigned long pages = 0;
	u32 i;

	if (r->p.op != KB_SEND)
		return 0;
	krdma_conn_info(r->server, &sinfo);
	for (i = 0; i <= r->nregions; i++)
		pages = max(pages, kb_pages(kb_region(r, i), r->p.size));
	for (i = 0; i < r->p.depth; i++)
		pages = max(pages, kb_pages((u8 *)r->dst + (size_t)i * r->stride,
					    r->p.size));
	if (pages > r->info.max_send_sge || pages > sinfo.max_recv_sge)
		return -EMSGSIZE;
	return 0;
}

static void kb_ops_put(struct kb_run *r)
{
	u32 i;

	/* Every request must be the caller's again */
	kb_quiesce(r);
	for (i = 0; r->recvs && i < r->nrecvs; i++)
		kfree(r->recvs[i].req);
	kfree(r->recvs);
	kvfree(r->call_ns);
	kfree(r->free);
	kfree(r->slots);
	for (i = 0; r->reqs && i < r->nslots * r->p.batch; i++)
		kfree(r->reqs[i]);
	kfree(r->reqs);
}

/* The requests (short ones: one range), the batches, the call times */
static int kb_ops_get(struct kb_run *r)
{
	u32 i, nreqs, calls;
	int ret;

	r->stage = "limits";
	ret = kb_check_limits(r);
	if (ret)
		return ret;
	r->stage = "memory";
	/* depth is a multiple of batch (kb_parse()) */
	r->nslots = r->p.depth / r->p.batch;
	nreqs = r->nslots * r->p.batch;
	calls = DIV_ROUND_UP(r->p.iters, r->p.batch);
	r->sample_every = DIV_ROUND_UP(calls, KB_MAX_SAMPLES);
	r->reqs = kcalloc(nreqs, sizeof(*r->reqs), GFP_KERNEL);
	r->slots = kcalloc(r->nslots, sizeof(*r->slots), GFP_KERNEL);
	r->free = kcalloc(r->nslots, sizeof(*r->free), GFP_KERNEL);
	r->call_ns = kvmalloc_array(DIV_ROUND_UP(calls, r->sample_every),
				    sizeof(*r->call_ns), GFP_KERNEL);
	if (!r->reqs || !r->slots || !r->free || !r->call_ns)
		goto err;
	for (i = 0; i < nreqs; i++) {
		r->reqs[i] = krdma_req_alloc(1, GFP_KERNEL);
		if (!r->reqs[i])
			goto err;
	}
	for (i = 0; i < r->nslots; i++) {
		r->slots[i].run = r;
		r->slots[i].index = i;
		r->free[i] = r->nslots - 1 - i;
	}
	r->nfree = r->nslots;
	if (r->p.op != KB_SEND)
		return 0;

	r->nrecvs = r->p.depth;
	r->recvs = kcalloc(r->nrecvs, sizeof(*r->recvs), GFP_KERNEL);
	if (!r->recvs)
		goto err;
	for (i = 0; i < r->nrecvs; i++) {
		r->recvs[i].run = r;
		r->recvs[i].index = i;
		r->recvs[i].req = krdma_req_alloc(1, GFP_KERNEL);
		if (!r->recvs[i].req)
			goto err;
	}
	return 0;

err:
	kb_ops_put(r);
	r->recvs = NULL;
	r->call_ns = NULL;
	r->free = NULL;
	r->slots = NULL;
	r->reqs = NULL;
	return -ENOMEM;
}

/*
 * The timed phase
 */

/* A RECV into its region, posted at once (process context) */
static int kb_post_recv(struct kb_run *r, struct kb_recv *rv)
{
	struct krdma_req *req = rv->req;
	int ret;

	req->opcode = KRDMA_OP_RECV;
	req->flags = 0;
	req->num_sge = 1;
	req->sge[0].buf = r->dst_buf;
	req->sge[0].offset = (u64)rv->index * r->stride;
	req->sge[0].length = r->p.size;
	req->rkeys = NULL;
	req->done = kb_recv_done;
	req->context = rv;
	ret = krdma_post(r->server, req);
	if (!ret)
		r->recvs_posted++;
	return ret;
}

/* Post again the RECVs that completed, as long as SENDs are to come */
static int kb_repost(struct kb_run *r)
{
	struct llist_node *list = llist_del_all(&r->recv_done);
	struct kb_recv *rv, *tmp;
	int ret;

	llist_for_each_entry_safe(rv, tmp, list, node) {
		if (r->recvs_posted >= r->p.iters)
			continue;
		ret = kb_post_recv(r, rv);
		if (ret) {
			kb_fail(r, ret, 0, 0, 0);
			return ret;
		}
	}
	return 0;
}

/* Room for a batch (and, op=send, a RECV for each of its SENDs), or all done */
static bool kb_ready(struct kb_run *r, bool drain, u32 need)
{
	if (drain) {
		bool received = true;

		if (r->p.op == KB_SEND) {
			/* Pairs with kb_recv_done()'s release */
			received = smp_load_acquire(&r->last_recv) != KB_NO_RECV;
		}
		return READ_ONCE(r->nfree) == r->nslots && received;
	}
	return READ_ONCE(r->nfree) &&
	       (r->p.op != KB_SEND || r->recvs_posted >= need);
}

static bool kb_wake(struct kb_run *r, bool drain, u32 need)
{
	return atomic_read(&r->failed) || !llist_empty(&r->recv_done) ||
	       kb_ready(r, drain, need);
}

/**
 * kb_wait - wait for room for the next batch, or (@drain) for the end
 * @r: the run
 * @drain: wait for every operation (op=send: every message received)
 * @need: op=send: the RECVs that must have been posted
 *
 * Posts the RECVs that came back meanwhile (op=send). Killable, and
 * bounded by the run's deadline, both checked even when there is room
 * (completions may keep room free for ever).
 *
 * Return: 0, the run's failure, -ETIMEDOUT or -EINTR.
 */
static int kb_wait(struct kb_run *r, bool drain, u32 need)
{
	long left;
	u64 t;
	int ret;

	for (;;) {
		if (atomic_read(&r->failed))
			return kb_error(r);
		if (fatal_signal_pending(current))
			return -EINTR;
		left = (long)(r->deadline - jiffies);
		if (left <= 0)
			return -ETIMEDOUT;
		if (r->p.op == KB_SEND) {
			ret = kb_repost(r);
			if (ret)
				return ret;
		}
		if (kb_ready(r, drain, need))
			return 0;
		t = ktime_get_ns();
		left = wait_event_killable_timeout(r->wq,
						   kb_wake(r, drain, need),
						   left);
		r->wait_ns += ktime_get_ns() - t;
		if (left < 0)
			return -EINTR;
	}
}

/*
 * A free batch, unless the run failed meanwhile: a batch is free only
 * once its signaled operations succeeded (kb_op_done()), but a failure
 * stops the run all the same
 */
static int kb_pop(struct kb_run *r, u32 *slot)
{
	int ret = 0;

	spin_lock_bh(&r->lock);
	if (atomic_read(&r->failed)) {
		ret = r->error ?: -EIO;
	} else if (!r->nfree) {
		ret = -EIO;	/* never: kb_wait() saw room, nothing takes it */
	} else {
		*slot = r->free[r->nfree - 1];
		WRITE_ONCE(r->nfree, r->nfree - 1);
	}
	spin_unlock_bh(&r->lock);
	return ret;
}

/*
 * Fill the @n requests of batch @slot, for operations @first on; the
 * run's final operation uses region @nregions, which no other does
 */
static u32 kb_fill_batch(struct kb_run *r, struct krdma_req **reqs, u32 n,
			 u32 first, struct kb_slot *slot)
{
	u32 i, signaled = 0;

	for (i = 0; i < n; i++) {
		struct krdma_req *req = reqs[i];
		u32 op = first + i;
		u32 region = op == r->p.iters - 1 ? r->nregions :
						    op % r->nregions;

		req->opcode = kb_opcodes[r->p.op];
		req->flags = r->unsignaled && i < n - 1 ?
			     KRDMA_REQ_UNSIGNALED : 0;
		if (!req->flags)
			signaled++;
		req->num_sge = 1;
		req->sge[0].buf = r->src_buf;
		req->sge[0].offset = (u64)region * r->stride;
		req->sge[0].length = r->p.size;
		req->remote_addr = r->tok.addr;
		req->rkey = r->tok.rkey;
		req->rkeys = r->rkeys;
		req->done = kb_op_done;
		req->context = slot;
	}
	return signaled;
}

/* One call's time: every one in the sums, one in @sample_every kept */
static void kb_sample(struct kb_run *r, u64 ns)
{
	if (!(r->ncalls++ % r->sample_every))
		r->call_ns[r->nsamples++] = ns;
	r->post_total += ns;
	r->post_max = max(r->post_max, ns);
}

static int kb_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The index of the @pct-th percentile of @n sorted values: nearest rank */
static u32 kb_rank(u32 n, u32 pct)
{
	u64 k = DIV_ROUND_UP_ULL((u64)n * pct, 100);

	return clamp_t(u64, k, 1, n) - 1;
}

/* Median and 99th percentile of the sampled calls (at most 65536) */
static void kb_stats(struct kb_run *r)
{
	u32 n = r->nsamples;

	if (!n)
		return;
	sort(r->call_ns, n, sizeof(*r->call_ns), kb_cmp_u64, NULL);
	r->post_median = r->call_ns[kb_rank(n, 50)];
	r->post_p99 = r->call_ns[kb_rank(n, 99)];
}

/**
 * kb_bench - the timed phase: post every operation, wait for all of them
 * @r: the run, set up
 *
 * From before the first call to after the last completion (op=send: the
 * last message received). Each krdma_post() or krdma_post_list() call is
 * timed on its own.
 *
 * Return: 0, or why it stopped; the caller disconnects.
 */
static int kb_bench(struct kb_run *r)
{
	struct krdma_req **reqs;
	u32 posted = 0, n, slot;
	unsigned int accepted;
	u64 t0, t;
	int ret;
	u32 i;

	r->unsignaled = r->p.unsignaled && r->p.batch > 1 &&
			!(r->p.op == KB_READ &&
			  r->info.transport == KRDMA_TRANSPORT_IWARP);
	r->deadline = jiffies + r->p.timeout_s * HZ;
	if (r->p.op == KB_SEND) {
		r->stage = "recv";
		for (i = 0; i < r->nrecvs && i < r->p.iters; i++) {
			ret = kb_post_recv(r, &r->recvs[i]);
			if (ret)
				return ret;
		}
	}

	r->stage = "post";
	t0 = ktime_get_ns();
	while (posted < r->p.iters) {
		n = min(r->p.batch, r->p.iters - posted);
		ret = kb_wait(r, false, posted + n);
		if (ret)
			return ret;
		ret = kb_pop(r, &slot);
		if (ret)
			return ret;
		reqs = &r->reqs[slot * r->p.batch];
		atomic_set(&r->slots[slot].pending,
			   kb_fill_batch(r, reqs, n, posted, &r->slots[slot]));

		t = ktime_get_ns();
		if (r->p.batch == 1) {
			ret = krdma_post(r->client, reqs[0]);
			accepted = !ret;
		} else {
			ret = krdma_post_list(r->client, reqs, n, &accepted);
		}
		kb_sample(r, ktime_get_ns() - t);
		if (ret) {
			/* The slot stays taken: what it accepted is krdma's */
			r->accepted = accepted;
			return ret;
		}
		posted += n;
		/* Completions may keep room free: let others run meanwhile */
		cond_resched();
	}
	r->stage = "wait";
	ret = kb_wait(r, true, 0);
	if (ret)
		return ret;
	r->elapsed_ns = ktime_get_ns() - t0 ?: 1;
	return 0;
}

/*
 * Wait, bounded and killable, until @len bytes at @dst are those at
 * @expect. On iWARP (siw) a WRITE or SEND completes at its initiator once
 * its data went to TCP; the receiving side places it a moment later.
 */
static int kb_wait_bytes(struct kb_run *r, const u8 *dst, const u8 *expect,
			 size_t len)
{
	unsigned long end = jiffies + KB_VERIFY_TIMEOUT;
	size_t i;

	while (memcmp(dst, expect, len)) {
		if (fatal_signal_pending(current))
			return -EINTR;
		if (time_after(jiffies, end)) {
			for (i = 0; i < len && dst[i] == expect[i]; i++)
				;
			r->bad_offset = i;
			return -EIO;
		}
		usleep_range(1000, 2000);
	}
	return 0;
}

/*
 * The bytes of the final operation, where it put them: its region is its
 * own and its destination was poisoned (kb_patterns()), so only that
 * operation can have put them there
 */
static int kb_verify(struct kb_run *r)
{
	u8 *final = kb_region(r, r->nregions), *dst = r->dst;
	int ret = 0;

	r->stage = "verify";
	switch (r->p.op) {
	case KB_WRITE:
		ret = kb_wait_bytes(r, dst, final, r->p.size);
		break;
	case KB_READ:
		ret = kb_wait_bytes(r, final, dst, r->p.size);
		break;
	case KB_SEND:
		dst += (size_t)READ_ONCE(r->last_recv) * r->stride;
		ret = kb_wait_bytes(r, dst, final, r->p.size);
		break;
	}
	r->verified = !ret;
	return ret;
}

/**
 * kb_run_one - one run, from the listener to the teardown
 * @r: the run, its parameters set and planned (kb_plan())
 *
 * Return: 0 when every operation succeeded and the final one's bytes were
 * right, or the first error; @r->stage says where.
 */
static int kb_run_one(struct kb_run *r)
{
	int ret;

	ret = kb_pair_open(r);
	if (ret)
		goto out;
	ret = kb_check_conn(r);
	if (ret)
		goto out_close;
	ret = kb_mem_get(r);
	if (ret)
		goto out_close;
	ret = kb_grant_get(r);
	if (ret)
		goto out_mem;
	ret = kb_ops_get(r);
	if (ret)
		goto out_grant;

	ret = kb_bench(r);
	if (!ret)
		ret = kb_verify(r);
	kb_stats(r);
	if (!ret)
		r->stage = NULL;

	kb_ops_put(r);
out_grant:
	kb_grant_put(r);
out_mem:
	kb_mem_put(r);
out_close:
	kb_pair_close(r);
out:
	return ret;
}

/*
 * The JSON row
 */

static const char *kb_transport(u32 t)
{
	switch (t) {
	case KRDMA_TRANSPORT_IB:
		return "ib";
	case KRDMA_TRANSPORT_ROCE:
		return "roce";
	case KRDMA_TRANSPORT_IWARP:
		return "iwarp";
	case KRDMA_TRANSPORT_OTHER:
		return "other";
	}
	return NULL;
}

/* @num / @den with @dec decimals, as a JSON number */
static int kb_decimal(char *buf, size_t len, u64 num, u64 den,
		      unsigned int dec)
{
	static const u32 scale[] = {
		1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
		1000000000,
	};
	u64 v = mul_u64_u64_div_u64(num, scale[dec], den);
	u32 frac;

	v = div_u64_rem(v, scale[dec], &frac);
	return scnprintf(buf, len, "%llu.%0*u", v, (int)dec, frac);
}

/* "@key":"@s", or "@key":null, (@s needs no escaping: kb_name_ok()) */
static int kb_json_str(char *buf, size_t len, const char *key, const char *s)
{
	if (!s)
		return scnprintf(buf, len, "\"%s\":null,", key);
	return scnprintf(buf, len, "\"%s\":\"%s\",", key, s);
}

static void kb_format(struct kb_run *r, int ret)
{
	const struct kb_params *p = &r->p;
	u64 bytes = p->size * p->iters;
	char *b = r->row;
	size_t len = sizeof(r->row), o = 0;

	o += scnprintf(b + o, len - o, "{\"op\":\"%s\",",
		       kb_op_names[p->op]);
	o += kb_json_str(b + o, len - o, "device",
			 p->label[0] ? p->label : NULL);
	o += kb_json_str(b + o, len - o, "addr", p->addr);
	o += kb_json_str(b + o, len - o, "transport",
			 kb_transport(r->info.transport));
	o += scnprintf(b + o, len - o,
		       "\"size\":%llu,\"iters\":%u,\"depth\":%u,\"depth_asked\":%u,\"batch\":%u,\"unsignaled\":%s,\"sq_depth\":%u,",
		       p->size, p->iters, p->depth, p->depth_asked, p->batch,
		       r->unsignaled ? "true" : "false", r->sq_depth);
	o += kb_json_str(b + o, len - o, "src_mem", r->src_mem);
	o += scnprintf(b + o, len - o, "\"bytes\":%llu,", bytes);
	if (r->elapsed_ns) {
		o += scnprintf(b + o, len - o, "\"seconds\":");
		o += kb_decimal(b + o, len - o, r->elapsed_ns, NSEC_PER_SEC, 9);
		o += scnprintf(b + o, len - o, ",\"mb_per_s\":");
		o += kb_decimal(b + o, len - o, bytes * 1000, r->elapsed_ns, 3);
		o += scnprintf(b + o, len - o, ",\"mmsg_per_s\":");
		o += kb_decimal(b + o, len - o, (u64)p->iters * 1000,
				r->elapsed_ns, 6);
		o += scnprintf(b + o, len - o, ",");
	} else {
		o += scnprintf(b + o, len - o,
			       "\"seconds\":null,\"mb_per_s\":null,\"mmsg_per_s\":null,");
	}
	if (r->ncalls)
		o += scnprintf(b + o, len - o,
			       "\"post_ns\":{\"calls\":%u,\"samples\":%u,\"median\":%llu,\"p99\":%llu,\"max\":%llu,\"avg\":%llu,\"total\":%llu},",
			       r->ncalls, r->nsamples, r->post_median,
			       r->post_p99, r->post_max,
			       div_u64(r->post_total, r->ncalls), r->post_total);
	else
		o += scnprintf(b + o, len - o, "\"post_ns\":null,");
	if (r->accepted >= 0)
		o += scnprintf(b + o, len - o, "\"accepted\":%d,", r->accepted);
	else
		o += scnprintf(b + o, len - o, "\"accepted\":null,");
	o += scnprintf(b + o, len - o,
		       "\"wait_ns\":%llu,\"verified\":%s,\"verified_scope\":\"last_op\",\"bad_offset\":%ld,\"ok\":%s,\"error\":%d,",
		       r->wait_ns, r->verified ? "true" : "false",
		       r->bad_offset, ret ? "false" : "true", ret);
	o += kb_json_str(b + o, len - o, "stage", r->stage);
	scnprintf(b + o, len - o,
		  "\"wc_status\":%u,\"vendor_err\":%u,\"byte_len\":%u}\n",
		  r->wc_status, r->vendor_err, r->byte_len);
}

/* Make @row the result that readers see */
static void kb_publish(const char *row)
{
	mutex_lock(&kb_result_lock);
	strscpy(kb_result, row, sizeof(kb_result));
	mutex_unlock(&kb_result_lock);
}

/*
 * debugfs
 */

static ssize_t kb_run_write(struct file *file, const char __user *ubuf,
			    size_t count, loff_t *ppos)
{
	struct kb_run *r;
	int ret;

	if (!count)
		return -EINVAL;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	spin_lock_init(&r->lock);
	init_waitqueue_head(&r->wq);
	init_llist_head(&r->recv_done);
	atomic_set(&r->failed, 0);
	atomic_set(&r->received, 0);
	r->last_recv = KB_NO_RECV;
	r->bad_offset = -1;
	r->accepted = -1;

	ret = mutex_lock_killable(&kb_lock);
	if (ret)
		goto out_free;
	/* No reader may take the last run's row for this one's */
	kb_publish("");
	r->stage = "parse";
	if (count >= sizeof(r->cmd))
		ret = -EINVAL;
	else if (copy_from_user(r->cmd, ubuf, count))
		ret = -EFAULT;
	else
		ret = kb_parse(r->cmd, &r->p);
	if (!ret)
		ret = kb_plan(r);
	if (!ret)
		ret = kb_run_one(r);
	kb_format(r, ret);
	kb_publish(r->row);
	mutex_unlock(&kb_lock);
	if (ret)
		pr_info("%s %s %llu: %d at %s (accepted %d)\n",
			kb_op_names[r->p.op], r->p.addr, r->p.size, ret,
			r->stage, r->accepted);
out_free:
	kfree(r);
	return ret ?: (ssize_t)count;
}

static const struct file_operations kb_run_fops = {
	.owner = THIS_MODULE,
	.write = kb_run_write,
	.llseek = noop_llseek,
};

static int kb_result_show(struct seq_file *m, void *v)
{
	mutex_lock(&kb_result_lock);
	seq_puts(m, kb_result);
	mutex_unlock(&kb_result_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kb_result);

static int __init krdma_kbench_init(void)
{
	kb_dir = debugfs_create_dir("krdma_kbench", NULL);
	debugfs_create_file("run", 0200, kb_dir, NULL, &kb_run_fops);
	debugfs_create_file("result", 0400, kb_dir, NULL, &kb_result_fops);
	return 0;
}

static void __exit krdma_kbench_exit(void)
{
	debugfs_remove_recursive(kb_dir);
}

module_init(krdma_kbench_init);
module_exit(krdma_kbench_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("krdma kernel API benchmark: RDMA WRITE, READ, SEND to itself, timed and verified");
MODULE_AUTHOR("The krdma authors");
