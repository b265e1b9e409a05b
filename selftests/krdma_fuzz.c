// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: a random ioctl fuzzer for /dev/krdma.
 *
 * Several threads share a few files of /dev/krdma (and open and close more
 * on the fly) and throw random, mostly plausible, sometimes invalid calls at
 * them: listen/connect/accept between the files on the rxe and siw test
 * addresses, registration of small mappings (unmapped while registered),
 * grants, submissions of valid and invalid operations, polls, destroys of
 * valid, stale and foreign handles, bad pointers, sizes and flags, signals
 * that interrupt blocking calls, and files replaced (dup2) or closed while
 * other threads use them.
 *
 * Families of scripted actions, chosen at random among the calls (each on
 * by default, --no-<family> turns it off; --remove is off by default):
 *
 *   mem      memory of other kinds behind BUF_REG (and so GRANT and SUBMIT):
 *            PROT_NONE, read-only, MAP_SHARED memfd pages (read-write and
 *            read-only), userfaultfd-registered memory whose faults a
 *            helper thread resolves after a random delay (at most 200 ms),
 *            mprotect() of mappings while registered; POLL, DEV_LIST and
 *            PORT_QUERY writing their arrays into userfaultfd memory (slow
 *            copy-out) and into read-only memory (EFAULT)
 *   copyout  BUF_REG, LISTEN and GRANT on a file of their own whose struct
 *            is in a read-only page: EFAULT, and no handle left behind
 *            (DESTROY of the handles 1..16 gives ENOENT, the next object
 *            gets the lowest handle, the port can be listened on again)
 *   fork     a child inherits the files: GRANT and SUBMIT naming a buffer
 *            of the parent must fail (EPERM; ENOENT, EINVAL or EACCES when
 *            the handle was destroyed or reused meanwhile), buffers of its
 *            own work; then it exits, execs /bin/true, or execs this
 *            program (--exec-child) with the file kept open, which tries
 *            the parent's buffer again
 *   ns       a child as uid/gid 65534 (after setgroups), and/or in a new
 *            user and network namespace, runs DEV_LIST, PORT_QUERY, LISTEN
 *            (also below port 1024), CONNECT to the test addresses and
 *            BUF_REG on a file it opens (EACCES when /dev/krdma is not for
 *            nobody: counted) and on an inherited one
 *   remove   (--remove) a thread deletes the test devices (rdma link
 *            delete) and adds them again (rdma link add, same name, type
 *            and netdev: KRDMA_RXE_DEV/_NETDEV, KRDMA_SIW_DEV/_NETDEV, else
 *            rxe0/veth0, siw0/veth2) while the calls run; at the end both
 *            must exist and be ACTIVE
 *
 * Every blocking call is bounded (timeouts), and a watchdog fails the run
 * if a call does not return for --hang-seconds. At the end every file is
 * closed and the pinned page counters of /proc/vmstat and the module's
 * reference count must come back; the kernel log (/dev/kmsg) written during
 * the run must show no WARNING, BUG, lockdep report or hung task.
 *
 *   krdma_fuzz [--seed N] [--calls N] [--threads N] [--max-seconds N]
 *              [--hang-seconds N] [--devices rxe|siw|both] [--no-mem]
 *              [--no-copyout] [--no-fork] [--no-ns] [--remove] [-v]
 *
 * With KRDMA_DEBUG_KERNEL=1 (make check-debug) --calls defaults to 20000
 * and --max-seconds to 600.
 *
 * Output: TAP (6 tests: no failure, pins, module references, errnos, the
 * scripted checks of the families, the devices back), then one line
 *   fuzz: CALLS calls, SECONDS s, errnos: NAME=COUNT ...
 * The seed fixes each thread's sequence of choices; which handles exist
 * when a choice is made still depends on the threads' interleaving.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdma_test_lib.h"

#define NSLOTS		3	/* shared files */
#define MAX_THREADS	16
#define MAXOBJ		64	/* remembered handles per file */
#define NREGIONS	24
#define NTOKENS		64
#define NLISTENERS	16
#define MAX_ERRNO	600
#define NOPNAMES	64	/* kinds of call counted per thread */

/* ------------------------------------------------------------------ */
/* Random numbers: xorshift64*, one state per thread */

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint32_t rn(uint64_t *s, uint32_t n)	/* 0 .. n-1 */
{
	return n ? (uint32_t)(rnd(s) % n) : 0;
}

static bool chance(uint64_t *s, uint32_t percent)
{
	return rn(s, 100) < percent;
}

/* ------------------------------------------------------------------ */
/* Shared state */

enum kind { K_NONE, K_LISTENER, K_CONN, K_BUF, K_GRANT };

struct obj {
	uint32_t h;
	enum kind kind;
	uint8_t lip, pip;	/* last byte of the third octet: 0 rxe, 1 siw */
	uint16_t lport, pport;	/* conn: local and peer port; listener: port */
	uint64_t len;		/* buf: length */
	uint32_t access;	/* buf */
};

struct slot {
	pthread_mutex_t mu;
	int fd;			/* stays a valid number: replaced by dup2 */
	unsigned int gen;
	int nobj;
	struct obj objs[MAXOBJ];
};

struct region {
	void *p;
	size_t len;
	bool mapped;
};

struct tokent {
	struct krdma_token tok;
	uint8_t lip;
	uint16_t lport, pport;
	bool used;
};

struct listener {
	uint8_t ip;
	uint16_t port;
	bool used;
};

static struct slot slots[NSLOTS];
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct region regions[NREGIONS];
static struct tokent tokens[NTOKENS];
static struct listener listeners[NLISTENERS];
/* A file another thread may close at any time (-1: none) */
static atomic_int shared_ephemeral = -1;

static const char *const ips[2] = { "198.18.0.1", "198.18.1.1" };
static struct krdma_addr ipaddr[2];
static int ip_first, ip_count = 2;	/* --devices rxe|siw|both */

static int rand_ip(uint64_t *rs)
{
	return ip_first + (int)rn(rs, ip_count);
}

static long pagesz;
static uint8_t *edge_page;	/* followed by an unmapped page */
static uint8_t *ro_const;	/* a read-only page */
static pthread_barrier_t start_barrier;
static int nthreads = 4;
static uint64_t target_calls = 100000;
static unsigned int max_seconds = 240;
static unsigned int hang_seconds = 45;
static bool verbose;
static atomic_ullong total_calls;
static atomic_bool stop;

struct thr {
	pthread_t tid;
	pid_t ktid;
	int idx;
	uint64_t rs;
	uint64_t calls;
	uint64_t errs[MAX_ERRNO + 1];	/* [0]: success; [MAX_ERRNO]: other */
	int eph;			/* this thread's own file, or -1 */
	/* Calls and successes per kind of call */
	const char *opname[NOPNAMES];
	uint64_t opcalls[NOPNAMES], opok[NOPNAMES];
	/* What it is doing, for the watchdog */
	_Atomic uint64_t in_call_since_ms;	/* 0: not in a call */
	const char *_Atomic what;
	/* Pages of its own: struct copies made read-only, userfaultfd */
	uint8_t *ro_page, *slow_page, *own;
};

static struct thr thrs[MAX_THREADS];
static uint64_t start_ms;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ */
/* Families of scripted actions, and what they found */

static bool fam_mem = true, fam_copyout = true, fam_fork = true;
static bool fam_ns = true, fam_remove;

/*
 * Counters and messages of the scripted checks, shared with the children
 * (fork, other uids and namespaces) and, through a memfd, with children
 * that exec'd this program again (--exec-child)
 */
#define NMSG 10
struct shared {
	_Atomic uint64_t errs[MAX_ERRNO + 1];	/* children's calls */
	_Atomic uint64_t calls;
	_Atomic uint64_t children, execs, nobody, userns, netns;
	_Atomic uint64_t unshare_failed, open_eacces, eperm, copyout;
	_Atomic uint64_t removals, uffd_faults, failures;
	_Atomic int nmsg;
	char msg[NMSG][240];
};
static struct shared *sh;
static int sh_fd = -1;
static char exe_path[4096];
static int uffd = -1;		/* resolved by uffd_main */

static void sh_msg(bool failure, const char *fmt, ...)
{
	va_list ap;
	int i;

	if (failure)
		atomic_fetch_add(&sh->failures, 1);
	i = atomic_fetch_add(&sh->nmsg, 1);
	if (i >= NMSG)
		return;
	va_start(ap, fmt);
	vsnprintf(sh->msg[i], sizeof(sh->msg[i]), fmt, ap);
	va_end(ap);
}

#define check_fail(...) sh_msg(true, __VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Calls, counted, timed for the watchdog, errno recorded */

static void count_errno(struct thr *t, int err)
{
	if (err < 0 || err >= MAX_ERRNO)
		err = MAX_ERRNO;
	t->errs[err]++;
	t->calls++;
	atomic_fetch_add(&total_calls, 1);
}

static bool errno_documented(int e);
static atomic_int undocumented_shown;

static void count_op(struct thr *t, const char *what, int err)
{
	int i;

	for (i = 0; i < NOPNAMES && t->opname[i]; i++)
		if (!strcmp(t->opname[i], what))
			break;
	if (i == NOPNAMES)
		return;
	t->opname[i] = what;
	t->opcalls[i]++;
	if (!err)
		t->opok[i]++;
}

static int do_ioctl(struct thr *t, int fd, unsigned long cmd, void *arg,
		    const char *what)
{
	int ret, err;

	t->what = what;
	t->in_call_since_ms = now_ms();
	ret = ioctl(fd, cmd, arg);
	err = ret < 0 ? errno : 0;
	t->in_call_since_ms = 0;
	count_errno(t, err);
	count_op(t, what, err);
	if (!errno_documented(err) && atomic_fetch_add(&undocumented_shown, 1) < 5)
		printf("# %s gave %s, which the ABI does not document\n", what,
		       strerrorname_np(err) ?: "?");
	if (verbose)
		fprintf(stderr, "# t%d fd %d %s -> %d %s\n", t->idx, fd, what,
			ret, err ? strerror(err) : "");
	return err ? -err : ret;
}

static int do_open(struct thr *t)
{
	int fd;

	t->what = "open";
	t->in_call_since_ms = now_ms();
	fd = open(KRDMA_DEV_PATH, O_RDWR | O_CLOEXEC);
	t->in_call_since_ms = 0;
	count_errno(t, fd < 0 ? errno : 0);
	return fd;
}

static void do_close(struct thr *t, int fd, const char *what)
{
	int ret;

	t->what = what;
	t->in_call_since_ms = now_ms();
	ret = close(fd);
	t->in_call_since_ms = 0;
	count_errno(t, ret < 0 ? errno : 0);
}

/* ------------------------------------------------------------------ */
/* Handle bookkeeping */

static void slot_add(int s, unsigned int gen, const struct obj *o,
		     struct thr *t);

static bool slot_pick(uint64_t *rs, int s, enum kind kind, struct obj *out)
{
	struct slot *sl = &slots[s];
	int i, n = 0, pick;
	bool found = false;

	pthread_mutex_lock(&sl->mu);
	for (i = 0; i < sl->nobj; i++)
		if (kind == K_NONE || sl->objs[i].kind == kind)
			n++;
	if (n) {
		pick = rn(rs, n);
		for (i = 0; i < sl->nobj; i++) {
			if (kind != K_NONE && sl->objs[i].kind != kind)
				continue;
			if (!pick--) {
				*out = sl->objs[i];
				found = true;
				break;
			}
		}
	}
	pthread_mutex_unlock(&sl->mu);
	return found;
}

static int slot_count(int s, enum kind kind)
{
	int i, n = 0;

	pthread_mutex_lock(&slots[s].mu);
	for (i = 0; i < slots[s].nobj; i++)
		if (slots[s].objs[i].kind == kind)
			n++;
	pthread_mutex_unlock(&slots[s].mu);
	return n;
}

static void slot_forget(int s, uint32_t h)
{
	struct slot *sl = &slots[s];
	int i;

	pthread_mutex_lock(&sl->mu);
	for (i = 0; i < sl->nobj; i++) {
		if (sl->objs[i].h == h) {
			sl->objs[i] = sl->objs[--sl->nobj];
			break;
		}
	}
	pthread_mutex_unlock(&sl->mu);
}

/* Remember a new handle of file @s; when full, destroy the oldest one */
static void slot_add(int s, unsigned int gen, const struct obj *o,
		     struct thr *t)
{
	struct slot *sl = &slots[s];
	struct krdma_destroy d = { .size = sizeof(d) };
	int fd = -1;

	pthread_mutex_lock(&sl->mu);
	if (sl->gen != gen) {
		/* The file was replaced meanwhile: the handle died with it */
		pthread_mutex_unlock(&sl->mu);
		return;
	}
	if (sl->nobj == MAXOBJ) {
		d.handle = sl->objs[0].h;
		sl->objs[0] = sl->objs[--sl->nobj];
		fd = sl->fd;
	}
	sl->objs[sl->nobj++] = *o;
	pthread_mutex_unlock(&sl->mu);
	if (fd >= 0)
		do_ioctl(t, fd, KRDMA_IOC_DESTROY, &d, "destroy(evict)");
}

static int slot_fd(int s, unsigned int *gen)
{
	int fd;

	pthread_mutex_lock(&slots[s].mu);
	fd = slots[s].fd;
	*gen = slots[s].gen;
	pthread_mutex_unlock(&slots[s].mu);
	return fd;
}

static void listener_add(uint8_t ip, uint16_t port)
{
	int i;

	pthread_mutex_lock(&pool_mu);
	for (i = 0; i < NLISTENERS; i++)
		if (!listeners[i].used)
			break;
	if (i == NLISTENERS)
		i = port % NLISTENERS;
	listeners[i] = (struct listener){ ip, port, true };
	pthread_mutex_unlock(&pool_mu);
}

static bool listener_pick(uint64_t *rs, struct listener *out)
{
	int i = rn(rs, NLISTENERS);

	pthread_mutex_lock(&pool_mu);
	*out = listeners[i];
	pthread_mutex_unlock(&pool_mu);
	return out->used;
}

static void token_add(const struct krdma_token *tok, const struct obj *conn)
{
	static unsigned int next;

	pthread_mutex_lock(&pool_mu);
	tokens[next % NTOKENS] = (struct tokent){
		*tok, conn->lip, conn->lport, conn->pport, true };
	next++;
	pthread_mutex_unlock(&pool_mu);
}

/* A token granted on the peer of @conn if there is one, else any */
static bool token_pick(uint64_t *rs, const struct obj *conn,
		       struct krdma_token *out)
{
	int i, start = rn(rs, NTOKENS);
	bool found = false;

	pthread_mutex_lock(&pool_mu);
	if (conn && conn->kind == K_CONN && chance(rs, 85)) {
		for (i = 0; i < NTOKENS; i++) {
			struct tokent *te = &tokens[(start + i) % NTOKENS];

			if (te->used && te->lip == conn->pip &&
			    te->lport == conn->pport &&
			    te->pport == conn->lport) {
				*out = te->tok;
				found = true;
				break;
			}
		}
	}
	if (!found && tokens[start].used) {
		*out = tokens[start].tok;
		found = true;
	}
	pthread_mutex_unlock(&pool_mu);
	return found;
}

/* ------------------------------------------------------------------ */
/* Random values */

static uint64_t bad_ptr(uint64_t *rs)
{
	switch (rn(rs, 5)) {
	case 0:
		return 0;
	case 1:
		return 8;
	case 2:
		return 0xffff888000000000ULL;	/* kernel direct map */
	case 3:
		return 0x00007ffffffff000ULL;	/* top of user space */
	default:
		return ~0ULL - rn(rs, 64);
	}
}

static uint32_t rand_access(uint64_t *rs)
{
	uint32_t a = rn(rs, 16);

	if (chance(rs, 3))
		a |= 1U << (4 + rn(rs, 28));
	return a;
}

static uint32_t rand_u32(uint64_t *rs)
{
	switch (rn(rs, 4)) {
	case 0:
		return 0;
	case 1:
		return rn(rs, 256);
	case 2:
		return ~0U - rn(rs, 4);
	default:
		return (uint32_t)rnd(rs);
	}
}

/* The size to claim for a struct of @real bytes */
static uint32_t rand_size(uint64_t *rs, uint32_t real)
{
	if (!chance(rs, 4))
		return real;
	switch (rn(rs, 4)) {
	case 0:
		return rn(rs, real);
	case 1:
		return real + 8 * (1 + rn(rs, 4));
	case 2:
		return 4096 + rn(rs, 1 << 20);
	default:
		return ~0U;
	}
}

/* A handle of file @s: usually one it has, sometimes stale or foreign */
static uint32_t rand_handle(uint64_t *rs, int s, enum kind kind,
			    struct obj *o)
{
	struct obj tmp;

	if (!o)
		o = &tmp;
	memset(o, 0, sizeof(*o));
	switch (rn(rs, 10)) {
	case 0:
		/* Any kind */
		if (slot_pick(rs, s, K_NONE, o))
			return o->h;
		return rn(rs, 200);
	case 1:
		/* Foreign: a handle of another file */
		if (slot_pick(rs, rn(rs, NSLOTS), kind, o))
			return o->h;
		return 1;
	case 2:
		return rand_u32(rs);
	default:
		if (slot_pick(rs, s, kind, o))
			return o->h;
		return rn(rs, 64);
	}
}

/* ------------------------------------------------------------------ */
/* The operations */

struct ctx {
	struct thr *t;
	uint64_t *rs;
	int s;			/* slot, or -1 for the thread's own file */
	int fd;
	unsigned int gen;
};

/* Bookkeeping goes to a slot only for slot files */
static void remember(struct ctx *c, const struct obj *o)
{
	if (c->s >= 0)
		slot_add(c->s, c->gen, o, c->t);
}

static int pick_slot_for(struct ctx *c)
{
	return c->s >= 0 ? c->s : (int)rn(c->rs, NSLOTS);
}

static void conn_ports(struct ctx *c, struct obj *o)
{
	struct krdma_conn_query q = { .size = sizeof(q), .handle = o->h };

	if (do_ioctl(c->t, c->fd, KRDMA_IOC_CONN_QUERY, &q, "conn_query"))
		return;
	o->lport = q.local.port;
	o->pport = q.peer.port;
	o->lip = q.local.addr[2] & 1;
	o->pip = q.peer.addr[2] & 1;
}

static void op_listen(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_listen l = { .size = sizeof(l) };
	struct obj o = { .kind = K_LISTENER };
	int ip = rand_ip(rs);

	if (c->s >= 0 && slot_count(c->s, K_LISTENER) >= 2 && chance(rs, 80))
		return;
	l.addr = ipaddr[ip];
	l.backlog = rn(rs, 8);
	if (chance(rs, 15))
		l.flags = KRDMA_LISTEN_DEFER_ACCEPT;
	if (chance(rs, 10)) {
		switch (rn(rs, 6)) {
		case 0:
			l.flags = 1 + rn(rs, 4);
			break;
		case 1:
			l.addr.family = rn(rs, 50);
			break;
		case 2:
			l.addr.port = 65536 + rn(rs, 100);
			break;
		case 3:
			l.addr.__reserved = 1;
			break;
		case 4:
			l.addr.addr[10] = 1;
			break;
		default: {
			/* A port some listener already has */
			struct listener old;

			if (listener_pick(rs, &old)) {
				l.addr = ipaddr[old.ip];
				l.addr.port = old.port;
			}
		}
		}
	}
	l.size = rand_size(rs, sizeof(l));
	if (do_ioctl(c->t, c->fd, KRDMA_IOC_LISTEN, &l, "listen"))
		return;
	o.h = l.handle;
	o.lip = ip;
	o.lport = l.addr.port;
	listener_add(ip, l.addr.port);
	remember(c, &o);
}

static void fill_op(struct ctx *c, int s, struct krdma_op *op,
		    struct krdma_sge *sgebuf);

/*
 * RECVs for CONNECT or ACCEPT to post before the connection is up: mostly
 * RECVs with connection 0, now and then anything fill_op() makes, a bad
 * pointer or too many
 */
static void fill_early_recvs(struct ctx *c, __u32 *count, __u64 *ptr)
{
	static __thread struct krdma_op ops[4];
	static __thread struct krdma_sge sges[4][KRDMA_MAX_SGE];
	uint64_t *rs = c->rs;
	int s = pick_slot_for(c);
	uint32_t i;

	*count = 1 + rn(rs, 4);
	for (i = 0; i < *count; i++) {
		fill_op(c, s, &ops[i], sges[i]);
		if (chance(rs, 80)) {
			ops[i].opcode = KRDMA_OP_RECV;
			ops[i].conn = 0;
			ops[i].flags = 0;
			ops[i].__reserved = 0;
		}
	}
	*ptr = (uintptr_t)ops;
	if (chance(rs, 5))
		*ptr = bad_ptr(rs);
	if (chance(rs, 3))
		*count = KRDMA_EARLY_RECVS_MAX + 1 + rn(rs, 10);
}

static void op_connect(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_connect k = { .size = sizeof(k) };
	struct obj o = { .kind = K_CONN };
	struct listener l;

	if (c->s >= 0 && slot_count(c->s, K_CONN) >= 12 && chance(rs, 90))
		return;
	if (listener_pick(rs, &l)) {
		k.dst = ipaddr[l.ip];
		k.dst.port = l.port;
	} else {
		k.dst = ipaddr[rand_ip(rs)];
		k.dst.port = 1 + rn(rs, 65535);
	}
	k.timeout_ms = 300 + rn(rs, 2000);
	if (chance(rs, 20))
		k.sq_depth = rand_u32(rs) % 4096;
	if (chance(rs, 20))
		k.rq_depth = rand_u32(rs) % 4096;
	if (chance(rs, 8)) {
		switch (rn(rs, 6)) {
		case 0:
			k.flags = 1;
			break;
		case 1:
			/* Nobody there: no route or no answer */
			k.dst.addr[3] = 77;
			k.timeout_ms = 100 + rn(rs, 400);
			break;
		case 2:
			k.src = ipaddr[rand_ip(rs)];
			break;
		case 3:
			k.src.port = 5;		/* family 0 with a port */
			break;
		case 4:
			k.dst.family = AF_INET6;	/* :: mapped junk */
			k.timeout_ms = 100 + rn(rs, 400);
			break;
		default:
			k.timeout_ms = 1 + rn(rs, 5);
		}
	}
	if (chance(rs, 25))
		fill_early_recvs(c, &k.recv_count, &k.recvs);
	k.size = rand_size(rs, sizeof(k));
	if (do_ioctl(c->t, c->fd, KRDMA_IOC_CONNECT, &k, "connect"))
		return;
	o.h = k.handle;
	conn_ports(c, &o);
	remember(c, &o);
}

static void op_accept(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_accept a = { .size = sizeof(a) };
	struct obj o = { .kind = K_CONN };

	a.listener = rand_handle(rs, c->s >= 0 ? c->s : 0, K_LISTENER, NULL);
	if (c->s < 0)
		a.listener = rn(rs, 8);
	switch (rn(rs, 4)) {
	case 0:
		a.flags = KRDMA_ACCEPT_NONBLOCK;
		a.timeout_ms = rn(rs, 2) ? 0 : KRDMA_TIMEOUT_INFINITE;
		break;
	case 1:
		a.timeout_ms = 0;
		break;
	default:
		a.timeout_ms = 1 + rn(rs, 100);
	}
	if (chance(rs, 5))
		a.flags |= 2 << rn(rs, 30);
	/* Taken only by a listener that defers the accept (LISTEN flag 2) */
	if (chance(rs, 25))
		fill_early_recvs(c, &a.recv_count, &a.recvs);
	a.size = rand_size(rs, sizeof(a));
	if (do_ioctl(c->t, c->fd, KRDMA_IOC_ACCEPT, &a, "accept"))
		return;
	o.h = a.handle;
	conn_ports(c, &o);
	remember(c, &o);
}

/* A userfaultfd for missing pages of [@p, @p + @len) (uffd), or -1 */
static int uffd_register(void *p, size_t len)
{
	struct uffdio_register reg = {
		.range = { (uintptr_t)p, len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	return uffd >= 0 ? ioctl(uffd, UFFDIO_REGISTER, &reg) : -1;
}

/*
 * mem: memory of another kind: PROT_NONE (never touched, or written and
 * then protected), read-only, MAP_SHARED memfd pages, userfaultfd
 */
static void *map_other_kind(uint64_t *rs, size_t len)
{
	void *p = MAP_FAILED;
	int fd;

	switch (rn(rs, 5)) {
	case 0:
		if (chance(rs, 50))
			return mmap(NULL, len, PROT_NONE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED) {
			memset(p, 0x6b, len);
			mprotect(p, len, PROT_NONE);
		}
		return p;
	case 1:
		/* Read-only, faulted in (zero page) or not */
		p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (p != MAP_FAILED && chance(rs, 50))
			(void)*(volatile uint8_t *)p;
		return p;
	case 2:
	case 3:
		fd = memfd_create("krdma_fuzz", MFD_CLOEXEC);
		if (fd < 0)
			return MAP_FAILED;
		if (!ftruncate(fd, len))
			p = mmap(NULL, len, chance(rs, 25) ? PROT_READ :
				 PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (p != MAP_FAILED && chance(rs, 50))
			(void)*(volatile uint8_t *)p;
		return p;
	default:
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED && uffd_register(p, len))
			memset(p, 0x3c, len);	/* no userfaultfd: plain */
		return p;
	}
}

static void op_map(struct ctx *c)
{
	uint64_t *rs = c->rs;
	int i = rn(rs, NREGIONS);
	size_t len = pagesz * (1 + rn(rs, 4));
	int prot = chance(rs, 15) ? PROT_READ : PROT_READ | PROT_WRITE;
	int flags = chance(rs, 20) ? MAP_SHARED | MAP_ANONYMOUS :
		    MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	pthread_mutex_lock(&pool_mu);
	if (regions[i].mapped) {
		pthread_mutex_unlock(&pool_mu);
		return;
	}
	if (fam_mem && chance(rs, 30)) {
		p = map_other_kind(rs, len);
		if (p != MAP_FAILED)
			regions[i] = (struct region){ p, len, true };
		pthread_mutex_unlock(&pool_mu);
		return;
	}
	p = mmap(NULL, len, prot, flags, -1, 0);
	if (p != MAP_FAILED) {
		if (prot & PROT_WRITE && chance(rs, 70))
			memset(p, 0x5a, len);	/* else: not faulted in */
		regions[i] = (struct region){ p, len, true };
	}
	pthread_mutex_unlock(&pool_mu);
}

/* mem: mprotect() a region, registered or not */
static void op_mprotect(struct ctx *c)
{
	static const int prots[] = { PROT_NONE, PROT_READ,
				     PROT_READ | PROT_WRITE };
	int i = rn(c->rs, NREGIONS);

	if (!fam_mem)
		return;
	pthread_mutex_lock(&pool_mu);
	if (regions[i].mapped)
		mprotect(regions[i].p, regions[i].len, prots[rn(c->rs, 3)]);
	pthread_mutex_unlock(&pool_mu);
}

/* munmap a region, registered or not */
static void op_unmap(struct ctx *c)
{
	int i = rn(c->rs, NREGIONS);

	pthread_mutex_lock(&pool_mu);
	if (regions[i].mapped) {
		munmap(regions[i].p, regions[i].len);
		regions[i].mapped = false;	/* p stays: a stale address */
	}
	pthread_mutex_unlock(&pool_mu);
}

static void op_buf_reg(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_buf_reg b = { .size = sizeof(b) };
	struct obj o = { .kind = K_BUF };
	struct region r;
	uint64_t off;

	pthread_mutex_lock(&pool_mu);
	r = regions[rn(rs, NREGIONS)];
	pthread_mutex_unlock(&pool_mu);
	if (!r.p) {
		r.p = (void *)(uintptr_t)bad_ptr(rs);
		r.len = pagesz;
	}
	off = rn(rs, 3) ? 0 : rn(rs, r.len);
	b.addr = (uintptr_t)r.p + off;
	b.length = 1 + rn(rs, r.len - off);
	b.access = chance(rs, 60) ? KRDMA_ACCESS_LOCAL_WRITE |
		   KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE |
		   (chance(rs, 50) ? KRDMA_ACCESS_REMOTE_ATOMIC : 0) :
		   rand_access(rs);
	if (chance(rs, 6)) {
		switch (rn(rs, 5)) {
		case 0:
			b.length = 0;
			break;
		case 1:
			b.length = ~0ULL - rn(rs, 4096);
			break;
		case 2:
			b.addr = bad_ptr(rs);
			break;
		case 3:
			b.length = (uint64_t)pagesz * (64 + rn(rs, 1024));
			break;
		default:
			b.flags = 1;
		}
	}
	b.size = rand_size(rs, sizeof(b));
	if (do_ioctl(c->t, c->fd, KRDMA_IOC_BUF_REG, &b, "buf_reg"))
		return;
	o.h = b.handle;
	o.len = b.length;
	o.access = b.access;
	remember(c, &o);
}

static void op_grant(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_grant g = { .size = sizeof(g) };
	struct obj conn, buf, o = { .kind = K_GRANT };
	int s = pick_slot_for(c);

	g.conn = rand_handle(rs, s, K_CONN, &conn);
	g.buf = rand_handle(rs, s, K_BUF, &buf);
	if (buf.kind == K_BUF && buf.len) {
		g.offset = rn(rs, 4) ? 0 : rn(rs, buf.len);
		g.length = 1 + rn(rs, buf.len - g.offset);
		g.access = (buf.access & 0xe) ?: KRDMA_ACCESS_REMOTE_WRITE;
	} else {
		g.offset = rn(rs, 8192);
		g.length = 1 + rn(rs, 8192);
		g.access = rand_access(rs);
	}
	if (chance(rs, 10)) {
		switch (rn(rs, 5)) {
		case 0:
			g.offset = ~0ULL - rn(rs, 8);
			break;
		case 1:
			g.length = 0;
			break;
		case 2:
			g.length += 4096;
			break;
		case 3:
			g.access = rand_access(rs);
			break;
		default:
			g.flags = 1;
		}
	}
	g.size = rand_size(rs, sizeof(g));
	if (do_ioctl(c->t, c->fd, KRDMA_IOC_GRANT, &g, "grant"))
		return;
	o.h = g.handle;
	remember(c, &o);
	if (conn.kind == K_CONN)
		token_add(&g.token, &conn);
}

static void fill_op(struct ctx *c, int s, struct krdma_op *op,
		    struct krdma_sge *sgebuf)
{
	uint64_t *rs = c->rs;
	struct obj conn, buf;
	uint32_t i;

	memset(op, 0, sizeof(*op));
	op->opcode = chance(rs, 5) ? rand_u32(rs) : 1 + rn(rs, 8);
	op->cookie = rnd(rs);
	op->conn = rand_handle(rs, s, K_CONN, &conn);
	op->num_sge = chance(rs, 85) ? 1 : rn(rs, 4);
	if (chance(rs, 3))
		op->num_sge = KRDMA_MAX_SGE + rn(rs, 3);
	if (op->opcode == KRDMA_OP_FETCH_ADD || op->opcode == KRDMA_OP_CMP_SWAP)
		op->num_sge = 1;
	for (i = 0; i < op->num_sge && i < KRDMA_MAX_SGE; i++) {
		struct krdma_sge *sge = op->num_sge == 1 ? &op->sge : &sgebuf[i];

		sge->buf = rand_handle(rs, s, K_BUF, &buf);
		if (buf.kind == K_BUF && buf.len) {
			sge->offset = rn(rs, buf.len);
			sge->length = 1 + rn(rs, buf.len - sge->offset);
		} else {
			sge->offset = rn(rs, 4096);
			sge->length = rn(rs, 4096);
		}
		if (op->opcode == KRDMA_OP_FETCH_ADD ||
		    op->opcode == KRDMA_OP_CMP_SWAP) {
			sge->offset &= ~7ULL;
			sge->length = 8;
		}
		if (chance(rs, 3))
			sge->length = ~0ULL - rn(rs, 16);
		if (chance(rs, 2))
			sge->__reserved = 1;
	}
	if (op->num_sge > 1)
		op->sges = chance(rs, 5) ? bad_ptr(rs) : (uintptr_t)sgebuf;
	if (op->opcode != KRDMA_OP_SEND && op->opcode != KRDMA_OP_RECV &&
	    op->opcode != KRDMA_OP_SEND_IMM) {
		if (token_pick(rs, &conn, &op->remote)) {
			uint64_t len = op->num_sge == 1 ? op->sge.length : 8;

			if (op->remote.length > len)
				op->remote_offset = rn(rs, op->remote.length -
							   len);
			if (op->opcode == KRDMA_OP_FETCH_ADD ||
			    op->opcode == KRDMA_OP_CMP_SWAP)
				op->remote_offset &= ~7ULL;
		} else {
			op->remote.rkey = rnd(rs);
			op->remote.length = rn(rs, 8192);
		}
		if (chance(rs, 3))
			op->remote_offset = ~0ULL - rn(rs, 16);
		if (chance(rs, 2))
			op->remote.tag = 1;
		if (chance(rs, 2))
			op->remote.seg_shift = rn(rs, 70);
	}
	op->imm_data = rnd(rs);
	op->compare_add = rn(rs, 4);
	op->swap = rnd(rs);
	/* KRDMA_OP_F_UNSIGNALED often, an unknown bit now and then */
	if (chance(rs, 4))
		op->flags = KRDMA_OP_F_UNSIGNALED;
	if (chance(rs, 2))
		op->flags |= 2u << rn(rs, 31);
	if (chance(rs, 2))
		op->__reserved = 1;
}

static void op_submit(struct ctx *c)
{
	uint64_t *rs = c->rs;
	static __thread struct krdma_op ops[8];
	static __thread struct krdma_sge sges[8][KRDMA_MAX_SGE];
	struct krdma_submit sub = { .size = sizeof(sub) };
	uint32_t i, n = 1 + rn(rs, chance(rs, 30) ? 8 : 2);
	int s = pick_slot_for(c);

	for (i = 0; i < n; i++)
		fill_op(c, s, &ops[i], sges[i]);
	sub.count = n;
	sub.ops = (uintptr_t)ops;
	if (chance(rs, 6)) {
		switch (rn(rs, 4)) {
		case 0:
			sub.ops = bad_ptr(rs);
			break;
		case 1:
			sub.count = chance(rs, 50) ? 0 : KRDMA_SUBMIT_MAX +
							     1 + rn(rs, 10);
			break;
		case 2: {
			/* The ops run off a page into an unmapped one */
			struct krdma_op *edge = (struct krdma_op *)
				(edge_page + pagesz) - 1 - rn(rs, 2);

			memcpy(edge, ops, ((struct krdma_op *)(edge_page +
				pagesz) - edge) * sizeof(*edge));
			sub.count = 2 + rn(rs, 6);
			sub.ops = (uintptr_t)edge;
			break;
		}
		default:
			sub.flags = 2 << rn(rs, 30);
		}
	}
	sub.size = rand_size(rs, sizeof(sub));
	do_ioctl(c->t, c->fd, KRDMA_IOC_SUBMIT, &sub, "submit");
}

/*
 * mem: where a call writes an output array: this thread's userfaultfd
 * page, missing again (slow copy-out), or a read-only page (EFAULT);
 * @fallback otherwise
 */
static uint64_t out_array(struct ctx *c, void *fallback)
{
	if (!fam_mem || !chance(c->rs, 5))
		return (uintptr_t)fallback;
	if (c->t->slow_page && chance(c->rs, 60)) {
		madvise(c->t->slow_page, pagesz, MADV_DONTNEED);
		return (uintptr_t)c->t->slow_page;
	}
	return (uintptr_t)ro_const;
}

static void op_poll(struct ctx *c)
{
	uint64_t *rs = c->rs;
	static __thread struct krdma_completion wc[32];
	struct krdma_poll p = { .size = sizeof(p) };

	p.max = 1 + rn(rs, 32);
	p.completions = out_array(c, wc);
	p.timeout_ms = chance(rs, 60) ? 0 : 1 + rn(rs, 20);
	if (chance(rs, 8)) {
		switch (rn(rs, 5)) {
		case 0:
			p.completions = bad_ptr(rs);
			break;
		case 1:
			p.max = 0;
			break;
		case 2:
			p.flags = 1;
			break;
		case 3:
			p.__reserved = 1;
			break;
		default:
			/* The last entry's room ends at an unmapped page */
			p.completions = (uintptr_t)(edge_page + pagesz) -
					sizeof(wc[0]) * (1 + rn(rs, 2));
			p.max = 2 + rn(rs, 4);
		}
	}
	p.size = rand_size(rs, sizeof(p));
	do_ioctl(c->t, c->fd, KRDMA_IOC_POLL, &p, "poll");
}

static void op_destroy(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_destroy d = { .size = sizeof(d) };
	int s = pick_slot_for(c);
	struct obj o;

	d.handle = rand_handle(rs, s, rn(rs, 5), &o);
	if (chance(rs, 3))
		d.flags = 1;
	d.size = rand_size(rs, sizeof(d));
	if (!do_ioctl(c->t, c->fd, KRDMA_IOC_DESTROY, &d, "destroy") &&
	    c->s >= 0)
		slot_forget(c->s, d.handle);
}

static void op_disconnect(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_disconnect d = { .size = sizeof(d) };

	d.handle = rand_handle(rs, pick_slot_for(c), K_CONN, NULL);
	if (chance(rs, 3))
		d.__reserved = 1;
	d.size = rand_size(rs, sizeof(d));
	do_ioctl(c->t, c->fd, KRDMA_IOC_DISCONNECT, &d, "disconnect");
}

static void op_conn_query(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_conn_query q = { .size = sizeof(q) };

	q.handle = rand_handle(rs, pick_slot_for(c), K_CONN, NULL);
	if (chance(rs, 3))
		q.flags = 1;
	q.size = rand_size(rs, sizeof(q));
	do_ioctl(c->t, c->fd, KRDMA_IOC_CONN_QUERY, &q, "conn_query");
}

static void op_listen_query(struct ctx *c)
{
	uint64_t *rs = c->rs;
	struct krdma_listen_query q = { .size = sizeof(q) };

	q.handle = rand_handle(rs, pick_slot_for(c), K_LISTENER, NULL);
	if (chance(rs, 3))
		q.flags = 1;
	if (chance(rs, 3))
		q.__reserved = 1;
	q.size = rand_size(rs, sizeof(q));
	do_ioctl(c->t, c->fd, KRDMA_IOC_LISTEN_QUERY, &q, "listen_query");
}

static void op_query(struct ctx *c)
{
	uint64_t *rs = c->rs;
	union {
		struct krdma_query_module m;
		struct krdma_dev_list l;
		struct krdma_dev_query d;
		struct krdma_port_query p;
		uint8_t raw[512];
	} u;
	uint32_t idx[4];
	struct krdma_gid_entry gids[4];

	memset(&u, 0, sizeof(u));
	switch (rn(rs, 4)) {
	case 0:
		u.m.size = rand_size(rs, sizeof(u.m));
		if (u.m.size > sizeof(u))
			u.m.size = sizeof(u.m);
		do_ioctl(c->t, c->fd, KRDMA_IOC_QUERY_MODULE, &u, "query_module");
		break;
	case 1:
		u.l.size = sizeof(u.l);
		u.l.num_devices = rn(rs, 6);
		u.l.dev_indexes = chance(rs, 80) ? out_array(c, idx) :
				  bad_ptr(rs);
		if (u.l.num_devices > 4 && u.l.dev_indexes == (uintptr_t)idx)
			u.l.num_devices = 4;
		do_ioctl(c->t, c->fd, KRDMA_IOC_DEV_LIST, &u, "dev_list");
		break;
	case 2:
		u.d.size = sizeof(u.d);
		u.d.dev_index = rn(rs, 12);
		do_ioctl(c->t, c->fd, KRDMA_IOC_DEV_QUERY, &u, "dev_query");
		break;
	default:
		u.p.size = sizeof(u.p);
		u.p.dev_index = rn(rs, 12);
		u.p.port_num = rn(rs, 3);
		u.p.num_gids = rn(rs, 5);
		u.p.gids = chance(rs, 80) ? out_array(c, gids) : bad_ptr(rs);
		do_ioctl(c->t, c->fd, KRDMA_IOC_PORT_QUERY, &u, "port_query");
	}
}

/* Unknown commands, bad argument pointers, sizes with junk beyond */
static void op_raw(struct ctx *c)
{
	uint64_t *rs = c->rs;
	uint8_t buf[512];
	unsigned long cmd;
	void *arg = buf;

	memset(buf, 0, sizeof(buf));
	switch (rn(rs, 4)) {
	case 0:
		cmd = _IO(KRDMA_TYPE, rn(rs, 256));
		break;
	case 1:
		cmd = _IOWR(KRDMA_TYPE, KRDMA_CMD_BASE + rn(rs, 16), uint64_t);
		break;
	case 2:
		cmd = rnd(rs) & 0xffffffff;
		break;
	default:
		cmd = _IO(KRDMA_TYPE, KRDMA_CMD_BASE + rn(rs, 14));
	}
	switch (rn(rs, 4)) {
	case 0:
		arg = (void *)(uintptr_t)bad_ptr(rs);
		break;
	case 1: {
		/* A size larger than the struct, junk after it: E2BIG */
		uint32_t sz = 8 + rn(rs, sizeof(buf) - 8);

		*(uint32_t *)buf = sz;
		buf[sz - 1 - rn(rs, 8)] = 1 + rn(rs, 255);
		break;
	}
	case 2: {
		/* Random bytes, plausible size */
		size_t i;

		for (i = 0; i < sizeof(buf); i++)
			buf[i] = rnd(rs);
		*(uint32_t *)buf = rn(rs, 2) ? 16 + rn(rs, 120) : rnd(rs);
		break;
	}
	default:
		*(uint32_t *)buf = rn(rs, 200);
	}
	do_ioctl(c->t, c->fd, cmd, arg, "raw");
}

/*
 * The mapped completion ring: set up (a valid size mostly), mapped in any
 * way, its head written with anything, unmapped. A file in ring mode
 * makes POLL EBUSY for the other threads, and its completions pile up
 * until the ring is full (EAGAIN): both documented.
 */
static void op_ring(struct ctx *c)
{
	static const uint32_t entries[] = { 0, 64, 128, 4096, 63, 1U << 21 };
	static const int prots[] = {
		PROT_READ | PROT_WRITE, PROT_READ, PROT_READ | PROT_EXEC,
		PROT_NONE,
	};
	struct krdma_ring_setup r = { .size = sizeof(r) };
	uint64_t *rs = c->rs;
	uint8_t *p;
	size_t len;
	long off;

	r.entries = entries[rn(rs, 6)];
	if (chance(rs, 5))
		r.flags = 1 + rn(rs, 3);
	if (chance(rs, 5))
		r.__reserved = 1;
	r.size = rand_size(rs, sizeof(r));
	if (do_ioctl(c->t, c->fd, KRDMA_IOC_RING_SETUP, &r, "ring_setup") ||
	    !r.mmap_size || r.mmap_size > (64ULL << 20))
		return;
	len = r.mmap_size;
	off = 0;
	if (chance(rs, 20))
		len += pagesz * (1 + rn(rs, 2));
	if (chance(rs, 10))
		off = pagesz * (1 + rn(rs, 4));
	c->t->what = "mmap(ring)";
	p = mmap(NULL, len, prots[rn(rs, 4)],
		 chance(rs, 85) ? MAP_SHARED : MAP_PRIVATE, c->fd, off);
	if (p == MAP_FAILED)
		return;
	if (mprotect(p, pagesz, PROT_READ | PROT_WRITE) == 0) {
		/* The head: forward, past the tail, anything */
		if (chance(rs, 50))
			__atomic_store_n((uint32_t *)(p + r.off_head),
					 __atomic_load_n((uint32_t *)(p + r.off_tail),
							 __ATOMIC_ACQUIRE),
					 __ATOMIC_RELEASE);
		else
			*(uint32_t *)(p + r.off_head) = rnd(rs);
		if (chance(rs, 20)) {
			*(uint32_t *)(p + r.off_ring_mask) = rnd(rs);
			*(uint32_t *)(p + r.off_ring_entries) = rnd(rs);
			*(uint32_t *)(p + r.off_flags) = rnd(rs);
		}
	}
	munmap(p, len);
}

/* Replace a shared file with a new one, under the other threads' feet */
static void op_replace(struct ctx *c)
{
	int s = rn(c->rs, NSLOTS), nfd;
	struct slot *sl = &slots[s];

	nfd = do_open(c->t);
	if (nfd < 0)
		return;
	pthread_mutex_lock(&sl->mu);
	c->t->what = "dup2(replace)";
	c->t->in_call_since_ms = now_ms();
	/* Atomically: the old file is released by its last user */
	dup2(nfd, sl->fd);
	c->t->in_call_since_ms = 0;
	count_errno(c->t, 0);
	sl->gen++;
	sl->nobj = 0;
	pthread_mutex_unlock(&sl->mu);
	do_close(c->t, nfd, "close(dup)");
}

/* A file of this thread's own, shared for a while, closed under others */
static void op_ephemeral(struct ctx *c)
{
	struct thr *t = c->t;
	int expected;

	if (t->eph < 0) {
		t->eph = do_open(t);
		if (t->eph >= 0 && chance(c->rs, 50)) {
			expected = -1;
			atomic_compare_exchange_strong(&shared_ephemeral,
						       &expected, t->eph);
		}
		return;
	}
	expected = t->eph;
	atomic_compare_exchange_strong(&shared_ephemeral, &expected, -1);
	do_close(t, t->eph, "close(ephemeral)");
	t->eph = -1;
}

static void op_signal(struct ctx *c)
{
	int i = rn(c->rs, nthreads);

	if (i != c->t->idx)
		pthread_kill(thrs[i].tid, SIGUSR1);
}

/* ------------------------------------------------------------------ */
/* copyout: a command whose struct cannot be written back leaves nothing */

static const char *errname(int e);

/* The call with its struct (@len bytes) at the end of a read-only page */
static int ioctl_ro(struct thr *t, int fd, unsigned long cmd, void *arg,
		    size_t len, const char *what)
{
	uint8_t *p = t->ro_page + pagesz - ((len + 7) & ~7UL);
	int ret;

	if (mprotect(t->ro_page, pagesz, PROT_READ | PROT_WRITE))
		return -ENOMEM;
	memcpy(p, arg, len);
	mprotect(t->ro_page, pagesz, PROT_READ);
	ret = do_ioctl(t, fd, cmd, p, what);
	memcpy(arg, p, len);
	return ret;
}

/* After an EFAULT'd @what: no handle of 1..16 but @made exists */
static void no_stray_handle(struct thr *t, int fd, const uint32_t *made,
			    int nmade, const char *what)
{
	struct krdma_destroy d = { .size = sizeof(d) };
	uint32_t h;
	int i, err;

	for (h = 1; h <= 16; h++) {
		for (i = 0; i < nmade && made[i] != h; i++)
			;
		if (i < nmade)
			continue;
		d.handle = h;
		err = do_ioctl(t, fd, KRDMA_IOC_DESTROY, &d, "destroy(stray)");
		if (err != -ENOENT)
			check_fail("after an EFAULT'd %s on a file of its own, DESTROY of handle %u gave %s, not ENOENT",
				   what, h, errname(-err));
	}
}

/* The handle a new object of @fd gets: the lowest free one */
static uint32_t lowest_free(const uint32_t *made, int nmade)
{
	uint32_t h;
	int i;

	for (h = 1;; h++) {
		for (i = 0; i < nmade && made[i] != h; i++)
			;
		if (i == nmade)
			return h;
	}
}

/*
 * A connected pair on @fd (LISTEN, CONNECT, ACCEPT): the handles go to
 * @made; returns the connecting side's handle, or 0
 */
static uint32_t own_conn(struct ctx *c, int fd, int ip, uint32_t *made,
			 int *nmade)
{
	struct krdma_listen l = { .size = sizeof(l) };
	struct krdma_connect k = { .size = sizeof(k) };
	struct krdma_accept a = { .size = sizeof(a) };

	l.addr = ipaddr[ip];
	l.backlog = 1;
	if (do_ioctl(c->t, fd, KRDMA_IOC_LISTEN, &l, "listen(own)"))
		return 0;
	made[(*nmade)++] = l.handle;
	k.dst = l.addr;
	k.timeout_ms = 3000;
	if (do_ioctl(c->t, fd, KRDMA_IOC_CONNECT, &k, "connect(own)"))
		return 0;
	made[(*nmade)++] = k.handle;
	a.listener = l.handle;
	a.timeout_ms = 3000;
	if (do_ioctl(c->t, fd, KRDMA_IOC_ACCEPT, &a, "accept(own)"))
		return 0;
	made[(*nmade)++] = a.handle;
	return k.handle;
}

static void op_copyout(struct ctx *c)
{
	struct thr *t = c->t;
	uint64_t *rs = c->rs;
	uint32_t made[8];
	int fd, nmade = 0, err, ip = rand_ip(rs), v = rn(rs, 8);

	if (!fam_copyout || !t->ro_page)
		return;
	fd = do_open(t);
	if (fd < 0)
		return;
	atomic_fetch_add(&sh->copyout, 1);
	if (v < 4) {
		struct krdma_buf_reg b = { .size = sizeof(b) };

		/* Valid but for the copy-out: EFAULT can only come from it */
		b.addr = (uintptr_t)t->own;
		b.length = 1 + rn(rs, pagesz);
		b.access = KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ |
			   KRDMA_ACCESS_REMOTE_WRITE;
		err = ioctl_ro(t, fd, KRDMA_IOC_BUF_REG, &b, sizeof(b),
			       "buf_reg(read-only struct)");
		if (err != -EFAULT) {
			if (err != -ENOMEM)
				check_fail("BUF_REG with its struct in a read-only page gave %s, not EFAULT",
					   errname(-err));
			goto out;
		}
		no_stray_handle(t, fd, made, nmade, "BUF_REG");
		err = do_ioctl(t, fd, KRDMA_IOC_BUF_REG, &b, "buf_reg(after)");
		if (err)
			check_fail("BUF_REG after an EFAULT'd one: %s",
				   errname(-err));
		else if (b.handle != 1)
			check_fail("BUF_REG after an EFAULT'd one got handle %u, not 1",
				   b.handle);
	} else if (v < 7) {
		struct krdma_listen l = { .size = sizeof(l) };

		l.addr = ipaddr[ip];
		/* Below the ephemeral ports the other listeners get */
		l.addr.port = 20000 + rn(rs, 10000);
		err = ioctl_ro(t, fd, KRDMA_IOC_LISTEN, &l, sizeof(l),
			       "listen(read-only struct)");
		if (err != -EFAULT) {
			/* With --remove the address may be gone for a while */
			if (!(fam_remove && (err == -EADDRNOTAVAIL ||
					     err == -ENODEV)) && err != -EADDRINUSE)
				check_fail("LISTEN with its struct in a read-only page gave %s, not EFAULT",
					   errname(-err));
			goto out;
		}
		no_stray_handle(t, fd, made, nmade, "LISTEN");
		err = do_ioctl(t, fd, KRDMA_IOC_LISTEN, &l, "listen(after)");
		if (err == -EADDRINUSE)
			check_fail("LISTEN on port %u after an EFAULT'd LISTEN there: EADDRINUSE",
				   l.addr.port);
		else if (!err && l.handle != 1)
			check_fail("LISTEN after an EFAULT'd one got handle %u, not 1",
				   l.handle);
	} else {
		struct krdma_buf_reg b = { .size = sizeof(b) };
		struct krdma_grant g = { .size = sizeof(g) };
		uint32_t expect;

		g.conn = own_conn(c, fd, ip, made, &nmade);
		if (!g.conn)
			goto out;
		b.addr = (uintptr_t)t->own;
		b.length = pagesz;
		b.access = KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ |
			   KRDMA_ACCESS_REMOTE_WRITE;
		if (do_ioctl(t, fd, KRDMA_IOC_BUF_REG, &b, "buf_reg(own)"))
			goto out;
		made[nmade++] = b.handle;
		g.buf = b.handle;
		g.length = pagesz;
		g.access = KRDMA_ACCESS_REMOTE_WRITE;
		err = ioctl_ro(t, fd, KRDMA_IOC_GRANT, &g, sizeof(g),
			       "grant(read-only struct)");
		if (err != -EFAULT) {
			/* The connection may have failed meanwhile */
			if (err != -ENOTCONN && err != -EAGAIN &&
			    err != -ETIMEDOUT)
				check_fail("GRANT with its struct in a read-only page gave %s, not EFAULT",
					   errname(-err));
			goto out;
		}
		no_stray_handle(t, fd, made, nmade, "GRANT");
		expect = lowest_free(made, nmade);
		err = do_ioctl(t, fd, KRDMA_IOC_GRANT, &g, "grant(after)");
		if (!err && g.handle != expect)
			check_fail("GRANT after an EFAULT'd one got handle %u, not %u",
				   g.handle, expect);
	}
out:
	do_close(t, fd, "close(copy-out file)");
}

/* ------------------------------------------------------------------ */
/* Children: fork, exec, other uids, other namespaces */

/* A child's call: counted in the shared page */
static int cdo(int fd, unsigned long cmd, void *arg, const char *what)
{
	int ret = ioctl(fd, cmd, arg), err = ret < 0 ? errno : 0;

	atomic_fetch_add(&sh->errs[err >= 0 && err < MAX_ERRNO ? err :
				   MAX_ERRNO], 1);
	atomic_fetch_add(&sh->calls, 1);
	if (!errno_documented(err))
		sh_msg(false, "%s in a child (pid %d) gave %s, which the ABI does not document",
		       what, getpid(), errname(err));
	return err ? -err : ret;
}

static void cdestroy(int fd, uint32_t h)
{
	struct krdma_destroy d = { .size = sizeof(d), .handle = h };

	cdo(fd, KRDMA_IOC_DESTROY, &d, "destroy(child)");
}

/*
 * GRANT and SUBMIT naming @pbuf, a buffer of another process, on @fd: never
 * accepted. EPERM, or ENOENT when that process destroyed it meanwhile (and
 * for SUBMIT what the connection says first: ENOTCONN, EAGAIN, ...)
 */
static void try_foreign_buf(int fd, uint32_t conn, uint32_t pbuf,
			    const char *who)
{
	struct krdma_grant g = { .size = sizeof(g) };
	struct krdma_submit sub = { .size = sizeof(sub) };
	struct krdma_op op = { 0 };
	int err;

	g.conn = conn;
	g.buf = pbuf;
	g.length = pagesz;
	g.access = KRDMA_ACCESS_REMOTE_READ;
	err = cdo(fd, KRDMA_IOC_GRANT, &g, "grant(parent's buffer)");
	/*
	 * The parent's threads may have destroyed the buffer or the
	 * connection meanwhile, and the handle may name something else now
	 * (ENOENT; EINVAL or EACCES for a smaller or read-only buffer)
	 */
	if (err == -EPERM)
		atomic_fetch_add(&sh->eperm, 1);
	else if (!err || (conn && err != -ENOENT && err != -EINVAL &&
			  err != -EACCES))
		check_fail("%s: GRANT of the parent's buffer %u on connection %u gave %s, not EPERM",
			   who, pbuf, conn, err ? errname(-err) : "success");
	if (!err)
		cdestroy(fd, g.handle);

	op.opcode = KRDMA_OP_SEND;
	op.conn = conn;
	op.num_sge = 1;
	op.sge.buf = pbuf;
	op.sge.length = 8;
	sub.count = 1;
	sub.ops = (uintptr_t)&op;
	err = cdo(fd, KRDMA_IOC_SUBMIT, &sub, "submit(parent's buffer)");
	if (err == -EPERM)
		atomic_fetch_add(&sh->eperm, 1);
	else if (!err)
		check_fail("%s: SUBMIT of a SEND from the parent's buffer %u on connection %u was accepted",
			   who, pbuf, conn);
}

/* A buffer of the child's own on @fd, granted on @conn, destroyed */
static void own_buffer(int fd, uint32_t conn, size_t len, const char *who)
{
	struct krdma_buf_reg b = { .size = sizeof(b) };
	struct krdma_grant g = { .size = sizeof(g) };
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err;

	if (p == MAP_FAILED)
		return;
	memset(p, 0x11, len);
	b.addr = (uintptr_t)p;
	b.length = len;
	b.access = KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ;
	err = cdo(fd, KRDMA_IOC_BUF_REG, &b, "buf_reg(child)");
	if (!err && conn) {
		g.conn = conn;
		g.buf = b.handle;
		g.length = len;
		g.access = KRDMA_ACCESS_REMOTE_READ;
		err = cdo(fd, KRDMA_IOC_GRANT, &g, "grant(child's own)");
		if (err == -EPERM)
			check_fail("%s: GRANT of its own buffer gave EPERM", who);
		if (!err)
			cdestroy(fd, g.handle);
	}
	if (b.handle)
		cdestroy(fd, b.handle);
	munmap(p, len);
}

/* --exec-child FD,CONN,PBUF,SHFD: this program again, after execve() */
static int exec_child(const char *arg)
{
	unsigned int fd, conn, pbuf, shfd;
	void *p;

	if (sscanf(arg, "%u,%u,%u,%u", &fd, &conn, &pbuf, &shfd) != 4)
		return 2;
	pagesz = sysconf(_SC_PAGESIZE);
	p = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED,
		 shfd, 0);
	if (p == MAP_FAILED)
		return 3;
	sh = p;
	atomic_fetch_add(&sh->execs, 1);
	if (pbuf)
		try_foreign_buf(fd, conn, pbuf, "after execve()");
	own_buffer(fd, conn, pagesz, "after execve()");
	return 0;
}

/* Wait for a child, bounded (20 s, under --hang-seconds): 0 if it exited 0 */
static int wait_child(struct thr *t, pid_t pid, const char *what)
{
	uint64_t t0 = now_ms();
	int st = 0;
	pid_t r;

	t->what = what;
	t->in_call_since_ms = t0;
	for (;;) {
		r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			st = -1;
			break;
		}
		if (now_ms() - t0 > 20000) {
			char path[64], line[160] = "";
			FILE *f;

			snprintf(path, sizeof(path), "/proc/%d/stack", pid);
			f = fopen(path, "re");
			if (f) {
				if (!fgets(line, sizeof(line), f))
					line[0] = 0;
				fclose(f);
			}
			check_fail("%s (pid %d) did not end within 20 s; stack: %s",
				   what, pid, line);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			st = 0;
			break;
		}
		sleep_ms(2);
	}
	t->in_call_since_ms = 0;
	if (st && !(WIFEXITED(st) && !WEXITSTATUS(st))) {
		check_fail("%s (pid %d) ended with %s %d", what, pid,
			   WIFSIGNALED(st) ? "signal" : "status",
			   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		return -1;
	}
	return 0;
}

/*
 * fork: a child with the files: the parent's buffer is not its own, its
 * own buffers work; then exit, exec /bin/true, or exec this program with
 * the file kept open (no O_CLOEXEC on the dup)
 */
static void op_fork(struct ctx *c)
{
	struct thr *t = c->t;
	uint64_t *rs = c->rs;
	struct krdma_buf_reg b = { .size = sizeof(b) };
	struct slot *sl = &slots[rn(rs, NSLOTS)];
	int fd, how = rn(rs, 3), i, n = 0;
	uint32_t conn = 0;
	pid_t pid;

	if (!fam_fork || !t->ro_page)
		return;
	/* The file and a connection of it, as they are now */
	pthread_mutex_lock(&sl->mu);
	fd = dup(sl->fd);
	for (i = 0; i < sl->nobj; i++)
		if (sl->objs[i].kind == K_CONN && !rn(rs, ++n))
			conn = sl->objs[i].h;
	pthread_mutex_unlock(&sl->mu);
	if (fd < 0)
		return;
	/* A buffer of ours on it, for the child to try */
	b.addr = (uintptr_t)t->own;
	b.length = pagesz;
	b.access = KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ |
		   KRDMA_ACCESS_REMOTE_WRITE;
	if (do_ioctl(t, fd, KRDMA_IOC_BUF_REG, &b, "buf_reg(for child)"))
		b.handle = 0;
	t->what = "fork";
	t->in_call_since_ms = now_ms();
	pid = fork();
	t->in_call_since_ms = 0;
	if (!pid) {
		char arg[64];

		alarm(30);
		atomic_fetch_add(&sh->children, 1);
		if (b.handle)
			try_foreign_buf(fd, conn, b.handle, "child after fork()");
		own_buffer(fd, conn, pagesz * (1 + rn(rs, 3)),
			   "child after fork()");
		if (how == 1) {
			execl("/bin/true", "true", (char *)NULL);
		} else if (how == 2) {
			snprintf(arg, sizeof(arg), "%d,%u,%u,%d", fd, conn,
				 b.handle, dup(sh_fd));
			execl(exe_path, exe_path, "--exec-child", arg,
			      (char *)NULL);
		}
		_exit(how ? 4 : 0);	/* the exec failed */
	}
	if (pid > 0)
		wait_child(t, pid, how == 2 ? "child (exec'd krdma_fuzz)" :
			   how ? "child (exec'd /bin/true)" : "child");
	if (b.handle) {
		struct krdma_destroy d = { .size = sizeof(d), .handle = b.handle };

		do_ioctl(t, fd, KRDMA_IOC_DESTROY, &d, "destroy(for child)");
	}
	do_close(t, fd, "close(dup for child)");
}

static int write_str(const char *path, const char *str)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, str, strlen(str));
	close(fd);
	return n == (ssize_t)strlen(str) ? 0 : -1;
}

/* ns: a short burst of calls on @fd, in whatever the child became */
static void ns_burst(int fd, uint64_t *rs)
{
	struct krdma_dev_list l = { .size = sizeof(l) };
	struct krdma_port_query p = { .size = sizeof(p) };
	struct krdma_listen li = { .size = sizeof(li) };
	struct krdma_connect k = { .size = sizeof(k) };
	struct krdma_gid_entry gids[4];
	struct listener tl;
	uint32_t idx[8];
	int ip = rand_ip(rs);

	l.num_devices = 8;
	l.dev_indexes = (uintptr_t)idx;
	if (!cdo(fd, KRDMA_IOC_DEV_LIST, &l, "dev_list(ns)") && l.num_devices) {
		p.dev_index = idx[rn(rs, l.num_devices < 8 ? l.num_devices : 8)];
		p.port_num = 1;
		p.num_gids = 4;
		p.gids = (uintptr_t)gids;
		cdo(fd, KRDMA_IOC_PORT_QUERY, &p, "port_query(ns)");
	}
	li.addr = ipaddr[ip];
	if (chance(rs, 40))
		li.addr.port = 1 + rn(rs, 1023);	/* EACCES for nobody */
	if (!cdo(fd, KRDMA_IOC_LISTEN, &li, "listen(ns)"))
		cdestroy(fd, li.handle);
	/* listeners[] without its lock: this process has one thread */
	tl = listeners[rn(rs, NLISTENERS)];
	k.dst = ipaddr[tl.used ? tl.ip : ip];
	k.dst.port = tl.used ? tl.port : 1 + rn(rs, 65535);
	k.timeout_ms = 200 + rn(rs, 300);
	if (!cdo(fd, KRDMA_IOC_CONNECT, &k, "connect(ns)"))
		cdestroy(fd, k.handle);
	/* Past the 128 KiB memlock of nobody sometimes */
	own_buffer(fd, 0, pagesz * (chance(rs, 20) ? 64 : 1 + rn(rs, 4)),
		   "child in a namespace");
}

/*
 * unshare(CLONE_NEWUSER) refuses a chrooted caller, and the guest test bed
 * runs chrooted (as krdma_hostile_test does): as root, leave the chroot for
 * the mount namespace's root (chroot into a directory below, walk up from
 * outside it); a descriptor of the old root for ns_enter_chroot(), or -1
 */
static int ns_leave_chroot(void)
{
	char dir[] = "/tmp/krdma_fuzz.XXXXXX";
	int rootfd, i, ret = 0;

	rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 || !mkdtemp(dir))
		return -1;
	ret |= chroot(dir) | fchdir(rootfd);
	for (i = 0; i < 64; i++)
		ret |= chdir("..");
	ret |= chroot(".");
	unlinkat(rootfd, dir + 1, AT_REMOVEDIR);
	if (ret) {
		close(rootfd);
		return -1;
	}
	return rootfd;
}

/* In the new user namespace: back into the chroot, @uid and @gid mapped */
static int ns_enter_chroot(int rootfd, unsigned int uid, unsigned int gid)
{
	char map[32];
	int ret = 0;

	if (rootfd >= 0) {
		ret |= fchdir(rootfd) | chroot(".") | chdir("/");
		close(rootfd);
	}
	ret |= write_str("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1", uid);
	ret |= write_str("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "0 %u 1", gid);
	ret |= write_str("/proc/self/gid_map", map);
	return ret;
}

/* ns: a child as nobody and/or in new user and network namespaces */
static void op_ns(struct ctx *c)
{
	struct thr *t = c->t;
	uint64_t *rs = c->rs;
	int mode = 1 + rn(rs, 4), fd, s = rn(rs, NSLOTS);
	unsigned int gen;
	pid_t pid;

	if (!fam_ns)
		return;
	/* bit 0: uid/gid 65534; bit 1: new user and network namespaces */
	fd = slot_fd(s, &gen);
	t->what = "fork(ns)";
	t->in_call_since_ms = now_ms();
	pid = fork();
	t->in_call_since_ms = 0;
	if (!pid) {
		struct rlimit rl = { 128 << 10, 128 << 10 };
		int own, e, rootfd = -1;
		uid_t id = 65534;

		alarm(30);
		atomic_fetch_add(&sh->children, 1);
		if (mode & 2)
			rootfd = ns_leave_chroot();
		if (mode & 1) {
			if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
			    setresgid(id, id, id) || setresuid(id, id, id)) {
				check_fail("cannot become uid 65534: %s",
					   strerror(errno));
				_exit(1);
			}
			/* Our /proc/self files stay ours (uid_map) */
			prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
			atomic_fetch_add(&sh->nobody, 1);
		}
		if (mode & 2) {
			uid_t uid = getuid();
			gid_t gid = getgid();

			if (unshare(CLONE_NEWUSER | CLONE_NEWNET)) {
				atomic_fetch_add(&sh->unshare_failed, 1);
				if (rootfd >= 0 && (fchdir(rootfd) ||
						    chroot(".") || chdir("/")))
					_exit(0);	/* outside the chroot */
			} else if (ns_enter_chroot(rootfd, uid, gid)) {
				check_fail("back into the chroot, uid and gid maps in a new user namespace: %s",
					   strerror(errno));
				_exit(1);
			} else {
				atomic_fetch_add(&sh->userns, 1);
				atomic_fetch_add(&sh->netns, 1);
			}
		} else if (mode == 4 || (!(mode & 1) && chance(rs, 50))) {
			if (!unshare(CLONE_NEWNET))
				atomic_fetch_add(&sh->netns, 1);
		}
		own = open(KRDMA_DEV_PATH, O_RDWR | O_CLOEXEC);
		e = own < 0 ? errno : 0;
		atomic_fetch_add(&sh->calls, 1);
		atomic_fetch_add(&sh->errs[e < MAX_ERRNO ? e : MAX_ERRNO], 1);
		if (e == EACCES)
			atomic_fetch_add(&sh->open_eacces, 1);
		else if (e)
			check_fail("open(%s) as uid %d: %s", KRDMA_DEV_PATH,
				   (int)getuid(), strerror(e));
		if (own >= 0) {
			ns_burst(own, rs);
			close(own);
		}
		ns_burst(fd, rs);	/* the inherited file */
		_exit(0);
	}
	if (pid > 0)
		wait_child(t, pid, mode == 1 ? "child as nobody" :
			   mode == 4 ? "child in a new netns" :
			   "child in new user and network namespaces");
}

/* ------------------------------------------------------------------ */
/* mem: the userfaultfd's faults, resolved after a random delay */

static atomic_bool uffd_stop;

static void *uffd_main(void *arg)
{
	uint64_t rs = (uintptr_t)arg | 1;
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	static uint8_t fill[1 << 16] __attribute__((aligned(4096)));
	struct uffd_msg msg;

	memset(fill, 0xa5, sizeof(fill));
	while (!atomic_load(&uffd_stop)) {
		uint64_t page;
		unsigned int ms;
		int ret;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) ||
		    msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		atomic_fetch_add(&sh->uffd_faults, 1);
		/* Mostly quick, sometimes slow, never more than 200 ms */
		ms = chance(&rs, 70) ? rn(&rs, 3) :
		     chance(&rs, 80) ? rn(&rs, 40) : rn(&rs, 201);
		if (ms)
			sleep_ms(ms);
		page = msg.arg.pagefault.address & ~((uint64_t)pagesz - 1);
		if (chance(&rs, 50)) {
			struct uffdio_zeropage z = { .range = { page, pagesz } };

			ret = ioctl(uffd, UFFDIO_ZEROPAGE, &z);
		} else {
			struct uffdio_copy cp = {
				.dst = page, .src = (uintptr_t)fill,
				.len = pagesz,
			};

			ret = ioctl(uffd, UFFDIO_COPY, &cp);
		}
		if (ret) {
			/* Resolved already, or unmapped meanwhile: wake it */
			struct uffdio_range r = { page, pagesz };

			ioctl(uffd, UFFDIO_WAKE, &r);
		}
	}
	return NULL;
}

static int uffd_open(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ------------------------------------------------------------------ */
/* remove: rdma link delete and add of the test devices, under the calls */

struct rmdev {
	const char *dev, *type, *netdev;
};

static struct rmdev rmdevs[2];
static _Atomic uint64_t rm_since_ms;
static const char *_Atomic rm_what;
static uint64_t run_seed;
static atomic_bool rm_stop;

static bool dev_active(const char *dev)
{
	char path[128], st[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state",
		 dev);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(st, sizeof(st), f))
		st[0] = 0;
	fclose(f);
	return strstr(st, "ACTIVE");
}

static bool dev_exists(const char *dev)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s", dev);
	return !access(path, F_OK);
}

/* A command, timed for the watchdog; its exit status */
static int rm_cmd(const char *fmt, ...)
{
	static char cmd[256];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rm_what = cmd;
	rm_since_ms = now_ms();
	st = system(cmd);
	rm_since_ms = 0;
	return st;
}

/* Add @d again (if missing) and wait, bounded, until it is ACTIVE */
static bool dev_restore(const struct rmdev *d)
{
	int i;

	for (i = 0; i < 50 && !dev_exists(d->dev); i++) {
		if (!rm_cmd("rdma link add %s type %s netdev %s 2>/dev/null",
			    d->dev, d->type, d->netdev))
			break;
		sleep_ms(100);
	}
	for (i = 0; i < 200 && !dev_active(d->dev); i++)
		sleep_ms(50);
	return dev_active(d->dev);
}

static void *remover_main(void *arg)
{
	uint64_t rs = run_seed * 0xD1B54A32D192ED03ULL + 7;
	unsigned int wait, i;

	while (!atomic_load(&rm_stop)) {
		const struct rmdev *d = &rmdevs[rand_ip(&rs)];

		wait = 300 + rn(&rs, 1700);
		for (i = 0; i < wait / 50 && !atomic_load(&rm_stop); i++)
			sleep_ms(50);
		if (atomic_load(&rm_stop))
			break;
		if (rm_cmd("rdma link delete %s", d->dev))
			check_fail("rdma link delete %s failed", d->dev);
		sleep_ms(rn(&rs, 300));
		if (!dev_restore(d))
			check_fail("%s (%s on %s) not ACTIVE again within 10 s",
				   d->dev, d->type, d->netdev);
		atomic_fetch_add(&sh->removals, 1);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */

struct opdesc {
	void (*fn)(struct ctx *c);
	unsigned int weight;
};

static const struct opdesc opsw[] = {
	{ op_listen, 2 },
	{ op_connect, 3 },
	{ op_accept, 6 },
	{ op_map, 4 },
	{ op_unmap, 2 },
	{ op_buf_reg, 10 },
	{ op_grant, 10 },
	{ op_submit, 22 },
	{ op_poll, 18 },
	{ op_destroy, 8 },
	{ op_disconnect, 2 },
	{ op_conn_query, 4 },
	{ op_listen_query, 2 },
	{ op_query, 3 },
	{ op_raw, 4 },
	{ op_ring, 1 },
	{ op_ephemeral, 1 },
	{ op_signal, 1 },
	{ op_mprotect, 2 },
};

/* per mille: file replacement is rarer than everything above */
#define REPLACE_PERMILLE 3
/* per mille, each: the scripted actions of the families */
#define COPYOUT_PERMILLE 3
#define FORK_PERMILLE 1
#define NS_PERMILLE 1

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	unsigned int total = 0, i, w;
	struct ctx c = { .t = t, .rs = &t->rs };

	t->ktid = syscall(SYS_gettid);
	/* Its pages: a struct copy, userfaultfd memory, a buffer */
	t->ro_page = mmap(NULL, 3 * pagesz, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->ro_page == MAP_FAILED) {
		t->ro_page = NULL;
	} else {
		t->slow_page = t->ro_page + pagesz;
		t->own = t->ro_page + 2 * pagesz;
		memset(t->own, 0x77, pagesz);
		if (uffd_register(t->slow_page, pagesz))
			t->slow_page = NULL;
	}
	pthread_barrier_wait(&start_barrier);
	for (i = 0; i < sizeof(opsw) / sizeof(opsw[0]); i++)
		total += opsw[i].weight;

	while (!atomic_load(&stop) &&
	       atomic_load(&total_calls) < target_calls) {
		int shared;

		w = rn(c.rs, 1000);
		if (w < REPLACE_PERMILLE) {
			op_replace(&c);
			continue;
		}
		w -= REPLACE_PERMILLE;
		if (w < COPYOUT_PERMILLE) {
			op_copyout(&c);
			continue;
		}
		w -= COPYOUT_PERMILLE;
		if (w < FORK_PERMILLE) {
			op_fork(&c);
			continue;
		}
		w -= FORK_PERMILLE;
		if (w < NS_PERMILLE) {
			op_ns(&c);
			continue;
		}
		/* Which file: a shared one mostly */
		shared = atomic_load(&shared_ephemeral);
		if (t->eph >= 0 && chance(c.rs, 8)) {
			c.s = -1;
			c.fd = t->eph;
		} else if (shared >= 0 && chance(c.rs, 4)) {
			c.s = -1;
			c.fd = shared;	/* may be closed by now: EBADF */
		} else {
			c.s = rn(c.rs, NSLOTS);
			c.fd = slot_fd(c.s, &c.gen);
		}
		w = rn(c.rs, total);
		for (i = 0; w >= opsw[i].weight; i++)
			w -= opsw[i].weight;
		opsw[i].fn(&c);
	}
	if (t->eph >= 0) {
		int expected = t->eph;

		atomic_compare_exchange_strong(&shared_ephemeral, &expected,
					       -1);
		close(t->eph);
		t->eph = -1;
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Watchdog: a call that does not return is a hang */

static void dump_hang(struct thr *t, uint64_t ms)
{
	char path[64], line[256];
	FILE *f;
	int fd;

	printf("# HANG: thread %d (tid %d) in %s for %llu ms\n", t->idx,
	       t->ktid, t->what, (unsigned long long)ms);
	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", t->ktid);
	f = fopen(path, "r");
	if (f) {
		while (fgets(line, sizeof(line), f))
			printf("#   %s", line);
		fclose(f);
	}
	fd = open("/proc/sysrq-trigger", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "w", 1) < 0)
			printf("# sysrq-trigger: %s\n", strerror(errno));
		close(fd);
	}
}

static void *watchdog_main(void *arg)
{
	int *failed = arg;
	uint64_t last_progress = now_ms() / 10000;
	int i;

	while (!atomic_load(&stop)) {
		uint64_t now = now_ms();

		sleep(1);
		for (i = 0; i < nthreads; i++) {
			uint64_t since = thrs[i].in_call_since_ms;

			if (since && now > since &&
			    now - since > hang_seconds * 1000ULL) {
				dump_hang(&thrs[i], now - since);
				*failed = 1;
				printf("not ok 1 fuzz: a call hung (seed and state above)\n");
				fflush(stdout);
				_exit(1);
			}
		}
		if (rm_since_ms && now > rm_since_ms &&
		    now - rm_since_ms > hang_seconds * 1000ULL) {
			printf("# HANG: '%s' for %llu ms\n", rm_what,
			       (unsigned long long)(now - rm_since_ms));
			*failed = 1;
			printf("not ok 1 fuzz: device removal hung (seed above)\n");
			fflush(stdout);
			_exit(1);
		}
		if (now / 10000 != last_progress) {
			last_progress = now / 10000;
			printf("# %.0f s: %llu calls\n", (now - start_ms) / 1000.0,
			       (unsigned long long)atomic_load(&total_calls));
		}
		if (now - start_ms > max_seconds * 1000ULL) {
			printf("# run passed --max-seconds %u, stopping\n",
			       max_seconds);
			atomic_store(&stop, true);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* End of run checks */

static long module_refcnt(void)
{
	char name[64], size[32];
	long ref = -1, r;
	FILE *f = fopen("/proc/modules", "r");

	if (!f)
		return -1;
	while (fscanf(f, "%63s %31s %ld%*[^\n]", name, size, &r) == 3)
		if (!strcmp(name, "krdma"))
			ref = r;
	fclose(f);
	return ref;
}

/* New kernel log records that tell of a problem; -1 if unreadable */
static int kmsg_fd = -1;

static int kmsg_problems(void)
{
	static const char *const bad[] = {
		"WARNING:", "BUG:", "Oops", "general protection",
		"possible circular locking", "lockdep", "KASAN", "UBSAN",
		"kmemleak", "hung_task", "blocked for more than",
		"Kernel panic", "refcount_t",
	};
	char rec[8192];
	int n = 0;
	ssize_t len;
	size_t i;

	if (kmsg_fd < 0)
		return -1;
	for (;;) {
		len = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (len < 0) {
			if (errno == EPIPE)	/* overwritten: go on */
				continue;
			break;			/* EAGAIN: the end */
		}
		rec[len] = 0;
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (strstr(rec, bad[i])) {
				char *nl = strchr(rec, '\n');

				if (nl)
					*nl = 0;
				printf("# kernel: %s\n", rec);
				n++;
				break;
			}
		}
	}
	return n;
}

static int cmp_desc(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? 1 : x[0] > y[0] ? -1 : 0;
}

static const char *errname(int e)
{
	static char buf[16];
	const char *n;

	if (e == 0)
		return "OK";
	if (e == MAX_ERRNO)
		return "OTHER";
	n = strerrorname_np(e);
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

/* The errnos uapi/linux/krdma.h documents, and EBADF of a closed file */
static bool errno_documented(int e)
{
	static const int ok[] = {
		0, ENOTTY, EINVAL, E2BIG, EFAULT, ENODEV, EOPNOTSUPP,
		EOVERFLOW, ENOMEM, ENOENT, ENOTCONN, ETIMEDOUT, EAGAIN,
		ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EADDRINUSE, EADDRNOTAVAIL,
		EMSGSIZE, ENOBUFS, EPERM, EPROTO, ECONNRESET, EOPNOTSUPP,
		EINTR, EACCES, EBADF, EMFILE, ENFILE, EIO, EBUSY,
		EPROTONOSUPPORT, ECONNABORTED, EXDEV,
	};
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (ok[i] == e)
			return true;
	return false;
}

static void on_signal(int sig)
{
	(void)sig;
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--seed N] [--calls N] [--threads N] [--max-seconds N] [--hang-seconds N] [--devices rxe|siw|both]\n"
		"          [--no-mem] [--no-copyout] [--no-fork] [--no-ns] [--remove] [-v]\n",
		prog);
	exit(2);
}

/* After a pin leak: who holds pins (VmPin), and what krdma still has */
static void pin_holders(void)
{
	static const char *const dbg[] = {
		"/sys/kernel/debug/krdma/buffers",
		"/sys/kernel/debug/krdma/connections",
	};
	char path[300], line[512], comm[64];
	struct dirent *de;
	unsigned int i, n;
	DIR *d;
	FILE *f;

	d = opendir("/proc");
	while (d && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		comm[0] = '\0';
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Name:", 5))
				sscanf(line + 5, "%63s", comm);
			else if (!strncmp(line, "VmPin:", 6) &&
				 strtoul(line + 6, NULL, 10))
				printf("# pid %s (%s) %s", de->d_name, comm, line);
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	for (i = 0; i < sizeof(dbg) / sizeof(dbg[0]); i++) {
		f = fopen(dbg[i], "re");
		if (!f)
			continue;
		printf("# %s:\n", dbg[i]);
		for (n = 0; n < 40 && fgets(line, sizeof(line), f); n++)
			printf("#   %s", line);
		fclose(f);
	}
}

/*
 * The rxe of kernels after 6.1 (seen on 6.12.95) livelocks its responder
 * when the QP goes to the error state while it processes a packet: a QP
 * in error makes do_complete() go back to check_resource(), which no
 * longer handles that state, and the packet is processed again, forever
 * (a kworker at 100% in rxe_receiver(), and the QP's destroy waits for it
 * in D state). Any teardown under traffic can hit it, and the fuzzer's
 * thousands do (2 runs of about 20 here). krdma cannot keep a QP out of the
 * error state: rdma_disconnect() and ib_drain_qp() put it there.
 */
static bool rxe_responder_livelocks(void)
{
	unsigned int major, minor;
	struct utsname u;

	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor > 1);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "calls", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 't' },
		{ "max-seconds", required_argument, NULL, 'm' },
		{ "hang-seconds", required_argument, NULL, 'H' },
		{ "devices", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "no-mem", no_argument, NULL, 'M' },
		{ "no-copyout", no_argument, NULL, 'C' },
		{ "no-fork", no_argument, NULL, 'F' },
		{ "no-ns", no_argument, NULL, 'N' },
		{ "remove", no_argument, NULL, 'R' },
		{ "no-remove", no_argument, NULL, 'r' },
		{ "exec-child", required_argument, NULL, 'X' },
		{}
	};
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t seed = 0, errs[MAX_ERRNO + 1] = { 0 };
	uint64_t hist[MAX_ERRNO + 1][2];
	long acq0, rel0, acq = -1, rel = -1, ref0, ref = -1;
	int opt, i, e, nhist = 0, failed = 0, bad_errnos = 0, kproblems;
	pthread_t wd, uffd_tid, rm_tid;
	bool uffd_started = false, rm_started = false, devs_back = true;
	uint64_t child_calls;
	double secs;
	char line[4096];
	size_t pos;
	bool seeded = false, calls_given = false, seconds_given = false;
	bool devices_given = false;

	while ((opt = getopt_long(argc, argv, "s:n:t:m:H:d:v", lopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			seed = strtoull(optarg, NULL, 0);
			seeded = true;
			break;
		case 'n':
			target_calls = strtoull(optarg, NULL, 0);
			calls_given = true;
			break;
		case 't':
			nthreads = atoi(optarg);
			if (nthreads < 2 || nthreads > MAX_THREADS)
				usage(argv[0]);
			break;
		case 'm':
			max_seconds = atoi(optarg);
			seconds_given = true;
			break;
		case 'H':
			hang_seconds = atoi(optarg);
			break;
		case 'd':
			devices_given = true;
			if (!strcmp(optarg, "rxe")) {
				ip_first = 0;
				ip_count = 1;
			} else if (!strcmp(optarg, "siw")) {
				ip_first = 1;
				ip_count = 1;
			} else if (strcmp(optarg, "both")) {
				usage(argv[0]);
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'M':
			fam_mem = false;
			break;
		case 'C':
			fam_copyout = false;
			break;
		case 'F':
			fam_fork = false;
			break;
		case 'N':
			fam_ns = false;
			break;
		case 'R':
			fam_remove = true;
			break;
		case 'r':
			fam_remove = false;
			break;
		case 'X':
			return exec_child(optarg);
		default:
			usage(argv[0]);
		}
	}
	if (!seeded)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	/*
	 * make check-debug: under KASAN and lockdep, with the families, about
	 * 85 calls a second (20885 in 240 s on 2026-12-03): 20000 calls, and
	 * the time they need more than twice over
	 */
	if (getenv("KRDMA_DEBUG_KERNEL")) {
		if (!calls_given)
			target_calls = 20000;
		if (!seconds_given)
			max_seconds = 600;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	run_seed = seed;
	printf("TAP version 13\n1..6\n");
	if (!devices_given && rxe_responder_livelocks()) {
		printf("# rxe left out (--devices both takes it): the rxe of kernels after 6.1 livelocks its responder when a QP goes to the error state while it processes a packet (Documentation/design.rst, \"Driver quirks\")\n");
		ip_first = 1;
		ip_count = 1;
	}
	printf("# seed %llu (--seed %llu reproduces each thread's choices), %llu calls, %d threads, %d shared files\n",
	       (unsigned long long)seed, (unsigned long long)seed,
	       (unsigned long long)target_calls, nthreads, NSLOTS);
	printf("# families:%s%s%s%s%s\n", fam_mem ? " mem" : "",
	       fam_copyout ? " copyout" : "", fam_fork ? " fork" : "",
	       fam_ns ? " ns" : "", fam_remove ? " remove" : "");

	pagesz = sysconf(_SC_PAGESIZE);
	edge_page = mmap(NULL, 2 * pagesz, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (edge_page == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", strerror(errno));
		return 1;
	}
	munmap(edge_page + pagesz, pagesz);
	ro_const = mmap(NULL, pagesz, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	/* The children's counters: a memfd, which an exec'd child maps too */
	sh_fd = memfd_create("krdma_fuzz_shared", MFD_CLOEXEC);
	if (sh_fd < 0 || ftruncate(sh_fd, sizeof(*sh)) ||
	    (sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED,
		       sh_fd, 0)) == MAP_FAILED || ro_const == MAP_FAILED) {
		printf("Bail out! memfd/mmap: %s\n", strerror(errno));
		return 1;
	}
	if (readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1) < 0)
		snprintf(exe_path, sizeof(exe_path), "%s", argv[0]);
	if (fam_mem) {
		uffd = uffd_open();
		if (uffd < 0)
			printf("# userfaultfd: %s: no userfaultfd memory\n",
			       strerror(errno));
		else if (!pthread_create(&uffd_tid, NULL, uffd_main,
					 (void *)(uintptr_t)seed))
			uffd_started = true;
	}
	if (fam_remove) {
		const char *e;

		rmdevs[0] = (struct rmdev){ "rxe0", "rxe", "veth0" };
		rmdevs[1] = (struct rmdev){ "siw0", "siw", "veth2" };
		if ((e = getenv("KRDMA_RXE_DEV")))
			rmdevs[0].dev = e;
		if ((e = getenv("KRDMA_RXE_NETDEV")))
			rmdevs[0].netdev = e;
		if ((e = getenv("KRDMA_SIW_DEV")))
			rmdevs[1].dev = e;
		if ((e = getenv("KRDMA_SIW_NETDEV")))
			rmdevs[1].netdev = e;
		for (i = ip_first; i < ip_first + ip_count; i++)
			printf("# --remove: deletes and adds %s (%s on %s)\n",
			       rmdevs[i].dev, rmdevs[i].type, rmdevs[i].netdev);
	}
	/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
	if (setrlimit(RLIMIT_MEMLOCK, &unlimited))
		printf("# setrlimit(RLIMIT_MEMLOCK): %s\n", strerror(errno));
	sigaction(SIGUSR1, &sa, NULL);	/* no SA_RESTART: EINTR */
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < 2; i++)
		if (krdma_parse_addr(ips[i], 0, &ipaddr[i])) {
			printf("Bail out! cannot parse %s\n", ips[i]);
			return 1;
		}

	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
	kt_pin_counters(&acq0, &rel0);
	ref0 = module_refcnt();

	for (i = 0; i < NSLOTS; i++) {
		pthread_mutex_init(&slots[i].mu, NULL);
		slots[i].fd = krdma_open();
		if (slots[i].fd < 0) {
			printf("Bail out! open %s: %s\n", KRDMA_DEV_PATH,
			       strerror(-slots[i].fd));
			return 1;
		}
	}

	start_ms = now_ms();
	for (i = 0; i < nthreads; i++) {
		thrs[i].idx = i;
		thrs[i].eph = -1;
		thrs[i].rs = seed * 0x9E3779B97F4A7C15ULL + (i + 1) * 0xBF58476D1CE4E5B9ULL;
		if (!thrs[i].rs)
			thrs[i].rs = 1;
	}
	/* Every tid is known before any thread may signal another */
	pthread_barrier_init(&start_barrier, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&thrs[i].tid, NULL, thread_main, &thrs[i])) {
			printf("Bail out! pthread_create\n");
			return 1;
		}
	pthread_barrier_wait(&start_barrier);
	pthread_create(&wd, NULL, watchdog_main, &failed);
	if (fam_remove && !pthread_create(&rm_tid, NULL, remover_main, NULL))
		rm_started = true;
	for (i = 0; i < nthreads; i++)
		pthread_join(thrs[i].tid, NULL);
	if (rm_started) {
		atomic_store(&rm_stop, true);	/* it ends its round */
		pthread_join(rm_tid, NULL);
		for (i = ip_first; i < ip_first + ip_count; i++)
			if (!dev_restore(&rmdevs[i])) {
				printf("# %s is not back and ACTIVE\n",
				       rmdevs[i].dev);
				devs_back = false;
			}
	}

	/* Close everything; the watchdog still watches for a hang */
	for (i = 0; i < NSLOTS; i++) {
		thrs[0].what = "final close";
		thrs[0].in_call_since_ms = now_ms();
		close(slots[i].fd);
		thrs[0].in_call_since_ms = 0;
	}
	secs = (now_ms() - start_ms) / 1000.0;
	atomic_store(&stop, true);
	pthread_join(wd, NULL);
	if (uffd_started) {
		atomic_store(&uffd_stop, true);
		pthread_join(uffd_tid, NULL);
	}
	if (uffd >= 0)
		close(uffd);	/* wakes whatever still waits */
	/* mmap'd regions still registered are gone with the files */
	for (i = 0; i < NREGIONS; i++)
		if (regions[i].mapped)
			munmap(regions[i].p, regions[i].len);

	for (i = 0; i < nthreads; i++)
		for (e = 0; e <= MAX_ERRNO; e++)
			errs[e] += thrs[i].errs[e];
	/* The children's calls count too */
	for (e = 0; e <= MAX_ERRNO; e++)
		errs[e] += sh->errs[e];
	child_calls = sh->calls;
	for (e = 0; e <= MAX_ERRNO; e++) {
		if (!errs[e])
			continue;
		hist[nhist][0] = errs[e];
		hist[nhist][1] = e;
		nhist++;
		if (!errno_documented(e)) {
			printf("# errno %s (%d) is not in the ABI's contract: %llu times\n",
			       errname(e), e, (unsigned long long)errs[e]);
			bad_errnos++;
		}
	}
	qsort(hist, nhist, sizeof(hist[0]), cmp_desc);
	/* Per kind of ioctl: how many went through */
	for (i = 1; i < nthreads; i++)
		for (e = 0; e < NOPNAMES && thrs[i].opname[e]; e++) {
			int k;

			for (k = 0; k < NOPNAMES && thrs[0].opname[k]; k++)
				if (!strcmp(thrs[0].opname[k], thrs[i].opname[e]))
					break;
			if (k == NOPNAMES)
				continue;
			thrs[0].opname[k] = thrs[i].opname[e];
			thrs[0].opcalls[k] += thrs[i].opcalls[e];
			thrs[0].opok[k] += thrs[i].opok[e];
		}
	for (e = 0; e < NOPNAMES && thrs[0].opname[e]; e++)
		printf("# %-18s %7llu calls, %7llu succeeded\n", thrs[0].opname[e],
		       (unsigned long long)thrs[0].opcalls[e],
		       (unsigned long long)thrs[0].opok[e]);

	/*
	 * Pages are unpinned by a work item, after the connections that use
	 * them are torn down (an iWARP teardown can wait for TCP): wait for
	 * it, bounded (30 s), and say when it took long
	 */
	for (i = 0; i < 1500; i++) {
		kt_pin_counters(&acq, &rel);
		ref = module_refcnt();
		if (acq - acq0 == rel - rel0 && ref == ref0)
			break;
		nanosleep(&ts, NULL);
	}
	if (i >= 50)
		printf("# pins and module references came back %d ms after the calls ended\n",
		       i * 20);

	kproblems = kmsg_problems();
	if (atomic_load(&total_calls) < target_calls || failed || kproblems > 0)
		printf("not ok 1 fuzz ran %llu of %llu calls without a kernel-visible failure%s\n",
		       (unsigned long long)atomic_load(&total_calls),
		       (unsigned long long)target_calls,
		       kproblems > 0 ? " (kernel log shows problems)" :
		       " (stopped early)");
	else
		printf("ok 1 fuzz ran %llu calls without a kernel-visible failure%s\n",
		       (unsigned long long)atomic_load(&total_calls),
		       kproblems < 0 ? " (# /dev/kmsg not readable)" : "");
	if (acq0 < 0 || acq < 0)
		printf("ok 2 # SKIP no nr_foll_pin_* in /proc/vmstat\n");
	else if (acq - acq0 == rel - rel0)
		printf("ok 2 no pinned pages leaked (%ld pinned, %ld released during the run)\n",
		       acq - acq0, rel - rel0);
	else {
		printf("not ok 2 no pinned pages leaked: %ld pinned, %ld released during the run\n",
		       acq - acq0, rel - rel0);
		pin_holders();
	}
	if (ref0 < 0)
		printf("ok 3 # SKIP krdma not in /proc/modules\n");
	else if (ref == ref0)
		printf("ok 3 module reference count back to %ld\n", ref0);
	else
		printf("not ok 3 module reference count %ld, was %ld before\n",
		       ref, ref0);
	if (bad_errnos)
		printf("not ok 4 every errno is one the ABI documents (%d are not)\n",
		       bad_errnos);
	else
		printf("ok 4 every errno is one the ABI documents\n");
	printf("# families: %llu children (%llu exec'd krdma_fuzz, %llu as nobody, %llu in a new user+net namespace, %llu in a new netns, %llu unshare refused, %llu open EACCES), %llu EPERM for a parent's buffer, %llu copy-out checks, %llu userfaultfd faults, %llu device removals, %llu calls in children\n",
	       (unsigned long long)sh->children, (unsigned long long)sh->execs,
	       (unsigned long long)sh->nobody, (unsigned long long)sh->userns,
	       (unsigned long long)(sh->netns - sh->userns),
	       (unsigned long long)sh->unshare_failed,
	       (unsigned long long)sh->open_eacces,
	       (unsigned long long)sh->eperm, (unsigned long long)sh->copyout,
	       (unsigned long long)sh->uffd_faults,
	       (unsigned long long)sh->removals,
	       (unsigned long long)child_calls);
	for (i = 0; i < sh->nmsg && i < NMSG; i++)
		printf("# %s\n", sh->msg[i]);
	if (sh->nmsg > NMSG)
		printf("# ... and %d more\n", sh->nmsg - NMSG);
	if (sh->failures)
		printf("not ok 5 the families' scripted checks hold (%llu failed)\n",
		       (unsigned long long)sh->failures);
	else
		printf("ok 5 the families' scripted checks hold\n");
	if (!fam_remove)
		printf("ok 6 # SKIP no --remove\n");
	else if (devs_back)
		printf("ok 6 the test devices are back and ACTIVE after %llu removals\n",
		       (unsigned long long)sh->removals);
	else
		printf("not ok 6 the test devices are back and ACTIVE\n");

	pos = snprintf(line, sizeof(line), "fuzz: %llu calls, %.1f s, errnos:",
		       (unsigned long long)(atomic_load(&total_calls) +
					    child_calls), secs);
	for (i = 0; i < nhist && pos < sizeof(line) - 32; i++)
		pos += snprintf(line + pos, sizeof(line) - pos, " %s=%llu",
				errname(hist[i][1]),
				(unsigned long long)hist[i][0]);
	printf("%s\n", line);

	return (atomic_load(&total_calls) < target_calls || failed ||
		kproblems > 0 || bad_errnos || sh->failures || !devs_back ||
		(acq >= 0 && acq - acq0 != rel - rel0) || ref != ref0) ? 1 : 0;
}
