// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: the traffic and stress helper of krdma_faults.sh.
 *
 *   krdma_stress serve ADDR [FILE] [-p PORT] [-s SIZE] [-S] [-t SECS]
 *	Listen on ADDR (PORT, default a free one), accept one connection,
 *	register SIZE bytes (default 1M + 64K), grant them with READ and WRITE
 *	access and write "port=P token=ADDR,LEN,RKEY,ACCESS,SEG_SHIFT,TAG"
 *	to FILE (the port alone once listening); with -S, also SEND the token to the
 *	client (as struct krdma_token, in a 64-byte message: a "load -r"
 *	client on another machine). Then wait until the connection fails,
 *	SECS pass (default 60; also the limit of the accept) or SIGTERM,
 *	and report its state and error; with -S, a connection that ended
 *	before its client wrote a byte into the window is followed by the
 *	next one (at most 3: the client connects again when siw fails its
 *	connect, see cmd_load());
 *	destroy everything and wait for VmPin to come back to where it
 *	started.
 *
 *   krdma_stress load ADDR (-f FILE | -p PORT -r) [-d DEPTH] [-c CHUNK]
 *		       [-t SECS] [-w]
 *	Connect to ADDR (the port from FILE, or PORT), take the token from
 *	FILE (-f) or from the peer's first SEND (-r: krdma_sample's
 *	user_serve, or a "serve -S"; a connect that siw resets is made again,
 *	at most 3 times); with -w, print "connected" and wait for SIGUSR1 (at
 *	most SECS) before the first operation. Keep DEPTH slots busy until
 *	an operation fails or SECS pass (default 60): each slot WRITEs a
 *	fresh pattern into its part of the window, READs it back and
 *	checks every byte. Prints "flowing" once a slot verified a round;
 *	after the first error it submits nothing more and waits for every
 *	operation in flight to complete; then reports counts, the first
 *	error status, the connection's state and error, and the times (ms
 *	since the epoch) of the last success, the first error and the last
 *	completion.
 *
 *   krdma_stress hold ADDR -s SIZE [-d DEPTH]
 *	Register SIZE bytes in one buffer, connect to itself on ADDR, grant
 *	the second half and WRITE the first half (but 64 KiB) into it with
 *	DEPTH operations; print "holding" with VmPin and wait to be killed
 *	(at most 300 s).
 *
 *   krdma_stress cycle ADDR...
 *	On each ADDR: connect to itself, WRITE 64 KiB and READ it back into
 *	another buffer, both checked, and close.
 *
 *   krdma_stress threads ADDR [-n THREADS] [-t SECS] [-m one|many]
 *	THREADS threads (default 32) in pairs for SECS (default 5): in each
 *	cycle the two threads of a pair connect, grant each other a window
 *	and WRITE patterns into it (DEPTH in flight, every byte checked at
 *	the destination); after a few rounds one of them ends its side with
 *	operations in flight while the other is still submitting and
 *	polling. -m one: every thread uses one file (the end is a DESTROY of
 *	the connection; completions are polled by whichever thread polls,
 *	and handed to their owner by cookie), and the file is closed under
 *	the running threads at the end. -m many: each thread opens its own
 *	file per cycle and the end is close(). Checks that every operation
 *	completes exactly once (until the file is closed under it), that
 *	no completed WRITE left a wrong byte, that the only submit error is
 *	ENOTCONN after the peer went away, that every thread made progress,
 *	and that nothing hangs.
 *
 * Numbers are decimal; a SIZE or CHUNK may end in K, M or G (binary
 * multiples). "krdma_stress MODE -h" prints the usage of MODE; a usage
 * error (an unknown option, a bad value, arguments too few or too many)
 * is said on stderr, before anything is opened.
 *
 * Results go to stdout as "krdma_stress: MODE: key=value ..." lines, for
 * the script to check. Exit status: 0 when the helper's own checks held
 * (every operation completed, every byte checked, VmPin back), 1
 * otherwise, 2 on bad usage.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "krdma_test_lib.h"

#define KiB		1024ULL
#define MiB		(1024 * KiB)
#define WAIT_MS		30000	/* longest wait for anything */
#define VMPIN_WAIT_MS	10000	/* buffers are unpinned from a work item */
#define MAX_DEPTH	64
/*
 * 6.1's rxe reads past its page map (KASAN: slab-out-of-bounds in
 * rxe_mr_copy) when an access ends at the end of an MR of a multiple of
 * 256 pages: the windows here are not, or are not used up to their end.
 */
#define RXE_MAP_SLACK	(64 * KiB)
#define MAX_THREADS	64
#define MAX_SECS	86400	/* -t: a day */
#define MAX_SIZE	(64ULL << 30)	/* -s, -c: more than a guest has */
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define RW_ACCESS	(KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ | \
			 KRDMA_ACCESS_REMOTE_WRITE)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void __attribute__((format(printf, 2, 3)))
die(int err, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "krdma_stress: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	fputc('\n', stderr);
	exit(1);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Wall clock, for the script to compare with the time of its fault */
static int64_t epoch_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static const char *errname(int err)
{
	const char *n;

	if (!err)
		return "0";
	n = strerrorname_np(err < 0 ? -err : err);
	return n ? n : "unknown";
}

static const char *state_str(uint32_t state)
{
	switch (state) {
	case KRDMA_CONN_CONNECTING:
		return "CONNECTING";
	case KRDMA_CONN_CONNECTED:
		return "CONNECTED";
	case KRDMA_CONN_ERROR:
		return "ERROR";
	case KRDMA_CONN_CLOSED:
		return "CLOSED";
	}
	return "unknown";
}

/* VmPin once it is back to @base, or as it is after VMPIN_WAIT_MS */
static long vmpin_settle(long base)
{
	int64_t deadline = mono_ms() + VMPIN_WAIT_MS;
	long kb;

	while ((kb = kt_vmpin_kb()) > base && mono_ms() < deadline)
		sleep_ms(10);
	return kb;
}

/* siw charges its registrations to RLIMIT_MEMLOCK even for root */
static void unlimit_memlock(void)
{
	struct rlimit r = { RLIM_INFINITY, RLIM_INFINITY };

	if (setrlimit(RLIMIT_MEMLOCK, &r))
		die(-errno, "setrlimit(RLIMIT_MEMLOCK)");
}

/* A file of /dev/krdma, and the memlock limit lifted for its registrations */
static int open_krdma(void)
{
	int fd = krdma_open();

	if (fd < 0)
		die(fd, "cannot open %s", KRDMA_DEV_PATH);
	unlimit_memlock();
	return fd;
}

static uint8_t *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die(-errno, "mmap %zu bytes", len);
	return p;
}

static uint32_t reg(int fd, void *p, size_t len, uint32_t access)
{
	uint32_t h;
	int ret = krdma_buf_register(fd, p, len, access, &h);

	if (ret)
		die(ret, "register %zu bytes", len);
	return h;
}

static void parse_addr(const char *host, uint32_t port, struct krdma_addr *a)
{
	int ret = krdma_parse_addr(host, port, a);

	if (ret)
		die(ret, "bad address %s", host);
}

/* --- arguments ------------------------------------------------------------ */

struct mode {
	const char *name;
	const char *opts;	/* getopt's, but for -h, which every mode has */
	const char *usage;	/* the synopsis line, then what it does */
	int (*cmd)(int argc, char **argv);
};

static const struct mode *mode;	/* the one running */

static void __attribute__((noreturn)) mode_usage(FILE *f, int status)
{
	fprintf(f, "usage: krdma_stress %s", mode->usage);
	exit(status);
}

/* "krdma_stress MODE: ..." on stderr, with @usage the usage too; exit 2 */
static void __attribute__((noreturn, format(printf, 2, 3)))
usage_error(bool usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "krdma_stress %s: ", mode->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (usage)
		mode_usage(stderr, 2);
	exit(2);
}

/* The next option (getopt's): -h, unknown options, missing values handled */
static int next_opt(int argc, char **argv)
{
	static const struct option help[] = {
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	char opts[32];
	int opt;

	snprintf(opts, sizeof(opts), ":h%s", mode->opts);
	opterr = 0;
	opt = getopt_long(argc, argv, opts, help, NULL);
	if (opt == 'h')
		mode_usage(stdout, 0);
	if (opt == ':')
		usage_error(true, "-%c needs a value", optopt);
	if (opt == '?' && optopt)
		usage_error(true, "unknown option -%c", optopt);
	if (opt == '?')
		usage_error(true, "unknown option %s", argv[optind - 1]);
	return opt;
}

/* @v as options take it: a @size with the largest suffix that divides it */
static const char *num_str(char *buf, size_t len, uint64_t v, bool size)
{
	static const char *const suffix[] = { "", "K", "M", "G" };
	int i = 0;

	while (size && v && !(v % 1024) && i < 3) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, "%" PRIu64 "%s", v, suffix[i]);
	return buf;
}

/* The value of option -@opt (optarg): a number, a @size, in [@min, @max] */
static uint64_t opt_num(int opt, bool size, uint64_t min, uint64_t max)
{
	char lo[32], hi[32];
	uint64_t v;
	int ret = kt_parse_u64(optarg, size, min, max, &v);

	if (ret == -ERANGE)
		usage_error(false, "bad -%c '%s': must be %s to %s", opt, optarg,
			    num_str(lo, sizeof(lo), min, size),
			    num_str(hi, sizeof(hi), max, size));
	if (ret)
		usage_error(false, "bad -%c '%s': must be %s", opt, optarg,
			    size ? "a size: decimal bytes, K, M or G after them" :
			    "a decimal number");
	return v;
}

/* After the options: ADDR, and up to @max arguments in all, or a usage error */
static void positional(int argc, char **argv, int max)
{
	if (optind == argc)
		usage_error(true, "missing ADDR");
	if (argc - optind > max)
		usage_error(true, "unexpected argument '%s'", argv[optind + max]);
}

/* The pattern: 64-bit words of a splitmix64 of seed and index */
static uint64_t pat_word(uint64_t seed, size_t i)
{
	uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	return z ^ (z >> 31);
}

static void fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = pat_word(seed, i);
}

/* Offset of the first word that differs, or -1 */
static long check(const void *p, size_t len, uint64_t seed)
{
	const volatile uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != pat_word(seed, i))
			return i * 8;
	return -1;
}

static int submit1(int fd, struct krdma_op *op)
{
	return krdma_submit_ops(fd, op, 1, KRDMA_SUBMIT_WAIT, NULL);
}

/* One operation on a file with nothing else in flight: its status */
static int run1(int fd, struct krdma_op *op)
{
	struct krdma_completion wc;
	int ret = submit1(fd, op);

	if (ret)
		return ret;
	ret = krdma_poll_wc(fd, &wc, 1, WAIT_MS);
	if (ret != 1)
		return ret < 0 ? ret : -ETIMEDOUT;
	return wc.status;
}

/* A listener on @host (free port) with a connection to it, both in @fd */
static void self_pair(int fd, const char *host, uint32_t *l, uint32_t *c,
		      uint32_t *s)
{
	struct krdma_addr a, bound;
	int ret;

	parse_addr(host, 0, &a);
	ret = krdma_listen_on(fd, &a, 4, l, &bound);
	if (ret)
		die(ret, "listen on %s", host);
	ret = krdma_connect_to(fd, &bound, WAIT_MS, c);
	if (ret)
		die(ret, "connect to %s:%u", host, bound.port);
	ret = krdma_accept_conn(fd, *l, 0, WAIT_MS, s);
	if (ret)
		die(ret, "accept on %s", host);
}

static void conn_state(int fd, uint32_t conn, uint32_t *state, int *err)
{
	struct krdma_conn_query q;

	if (krdma_conn_info(fd, conn, &q)) {
		*state = 0;
		*err = 0;
		return;
	}
	*state = q.state;
	*err = q.state == KRDMA_CONN_ERROR ? (int)q.error : 0;
}

/* --- serve ---------------------------------------------------------------- */

static void write_file(const char *path, const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		die(-errno, "cannot write %s", tmp);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	if (fclose(f) || rename(tmp, path))
		die(-errno, "cannot write %s", path);
}

/*
 * SEND the token to a "load -r" client. Return: 0, a negative errno, or
 * the failed completion's status
 */
static int send_token(int fd, uint32_t conn, const struct krdma_token *tok)
{
	struct krdma_op op;
	uint32_t h;
	uint8_t *msg = map(4096);
	int ret;

	memcpy(msg, tok, sizeof(*tok));
	h = reg(fd, msg, 64, 0);
	/* The client's RECV went out with its connect request */
	kt_op(&op, KRDMA_OP_SEND, conn, h, 0, 64, NULL, 0, 0);
	ret = run1(fd, &op);
	if (ret)
		say("krdma_stress: serve: SEND of the token: %s",
		    ret < 0 ? strerror(-ret) : krdma_wc_status_str(ret));
	krdma_destroy_handle(fd, h);
	munmap(msg, 4096);
	return ret;
}

/*
 * Connects a "load -r" makes while siw resets them, and connections a
 * "serve -S" accepts while their clients never wrote
 */
#define TOKEN_TRIES	3

static bool all_zero(const uint8_t *p, uint64_t len)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static const char serve_usage[] =
	"serve ADDR [FILE] [-p PORT] [-s SIZE] [-S] [-t SECS]\n"
	"Listen on ADDR, accept one connection, grant SIZE bytes to it (READ and\n"
	"WRITE) and wait until it fails, SECS pass or SIGTERM; say how it ended.\n"
	"  FILE     where to write \"port=P\" once listening, then the token\n"
	"  -p PORT  the port to listen on, 0 to 65535 (default 0: a free one)\n"
	"  -s SIZE  the bytes to register and grant (default 1M + 64K)\n"
	"  -S       also SEND the token to the client (a \"load -r\" client)\n"
	"  -t SECS  the limit of the accept, then of the wait (default 60)\n";

static int cmd_serve(int argc, char **argv)
{
	uint64_t size = MiB + RXE_MAP_SLACK;
	unsigned int secs = 60, port = 0;
	struct krdma_addr a, bound;
	struct krdma_token tok;
	uint32_t l, c, b, g, state;
	const char *file = NULL;
	bool send = false;
	long base, peak, end;
	int64_t deadline, t0;
	int fd, opt, ret, err;
	uint8_t *mem = NULL;
	unsigned int tries;

	while ((opt = next_opt(argc, argv)) != -1) {
		switch (opt) {
		case 'p':
			port = opt_num(opt, false, 0, 65535);
			break;
		case 's':
			size = opt_num(opt, true, 1, MAX_SIZE);
			break;
		case 'S':
			send = true;
			break;
		case 't':
			secs = opt_num(opt, false, 1, MAX_SECS);
			break;
		}
	}
	positional(argc, argv, 2);
	file = argv[optind + 1];
	fd = open_krdma();
	base = kt_vmpin_kb();
	parse_addr(argv[optind], port, &a);
	ret = krdma_listen_on(fd, &a, 1, &l, &bound);
	if (ret)
		die(ret, "listen on %s", argv[optind]);
	if (file)
		write_file(file, "port=%u\n", bound.port);
	say("krdma_stress: serve: listening port=%u", bound.port);
	for (tries = 1;; tries++) {
		ret = krdma_accept_conn(fd, l, 0, secs * 1000, &c);
		if (ret)
			die(ret, "accept");
		if (!mem) {
			mem = map(size);
			b = reg(fd, mem, size, RW_ACCESS);
		}
		ret = krdma_grant_window(fd, c, b, 0, size,
					 KRDMA_ACCESS_REMOTE_READ |
					 KRDMA_ACCESS_REMOTE_WRITE, &g, &tok);
		if (ret)
			die(ret, "grant");
		if (file)
			write_file(file, "port=%u token=%" PRIu64 ",%" PRIu64 ",%u,%u,%u,%u\n",
				   bound.port, (uint64_t)tok.addr,
				   (uint64_t)tok.length, tok.rkey, tok.access,
				   tok.seg_shift, tok.tag);
		/* A SEND that failed with the connection: the wait sees it */
		if (send && send_token(fd, c, &tok)) {
			conn_state(fd, c, &state, &err);
			if (state == KRDMA_CONN_CONNECTED)
				die(0, "SEND of the token failed on a live connection");
		}
		peak = kt_vmpin_kb();
		say("krdma_stress: serve: granted bytes=%" PRIu64 " vmpin_kb=%ld",
		    size, peak);

		t0 = mono_ms();
		deadline = t0 + secs * 1000LL;
		do {
			conn_state(fd, c, &state, &err);
			if (state != KRDMA_CONN_CONNECTED)
				break;
			sleep_ms(10);
		} while (!stop && mono_ms() < deadline);
		say("krdma_stress: serve: state=%s error=%s at=%" PRId64 " after_ms=%" PRId64,
		    state_str(state), errname(err), epoch_ms(), mono_ms() - t0);
		krdma_destroy_handle(fd, g);
		krdma_destroy_handle(fd, c);
		/*
		 * On iWARP the token's SEND can reach a "load -r" client behind
		 * the MPA reply, before siw there has read the reply: its
		 * connect fails (protocol.rst, "Ordering rules"), and it
		 * connects again. A connection that ended before the client
		 * wrote a byte is that one: serve the next.
		 */
		if (!send || stop || tries == TOKEN_TRIES ||
		    mono_ms() >= deadline || !all_zero(mem, size))
			break;
		say("krdma_stress: serve: the client never wrote; accepting again");
	}
	krdma_destroy_handle(fd, b);
	krdma_destroy_handle(fd, l);
	end = vmpin_settle(base);
	close(fd);
	munmap(mem, size);
	say("krdma_stress: serve: vmpin_start_kb=%ld vmpin_peak_kb=%ld vmpin_end_kb=%ld",
	    base, peak, end);
	return end <= base ? 0 : 1;
}

/* --- load ----------------------------------------------------------------- */

/* The token line of a serve's FILE, waited for; the port too */
static void read_file(const char *path, uint32_t *port, struct krdma_token *tok,
		      bool want_token)
{
	int64_t deadline = mono_ms() + WAIT_MS;
	uint64_t addr, len;
	unsigned int rkey, access, seg_shift, tag, p;
	char line[512];
	FILE *f;
	int n;

	for (;;) {
		n = 0;
		f = fopen(path, "r");
		if (f) {
			if (fgets(line, sizeof(line), f))
				n = sscanf(line, "port=%u token=%" SCNu64 ",%" SCNu64 ",%u,%u,%u,%u",
					   &p, &addr, &len, &rkey, &access,
					   &seg_shift, &tag);
			fclose(f);
		}
		if (n == 7 || (n >= 1 && !want_token))
			break;
		if (mono_ms() > deadline)
			die(0, "nothing usable in %s after %d ms", path, WAIT_MS);
		sleep_ms(10);
	}
	*port = p;
	if (want_token) {
		memset(tok, 0, sizeof(*tok));
		tok->addr = addr;
		tok->length = len;
		tok->rkey = rkey;
		tok->access = access;
		tok->seg_shift = seg_shift;
		tok->tag = tag;
	}
}

enum slot_phase { SLOT_WRITE, SLOT_READ, SLOT_IDLE };

struct load {
	int fd;
	uint32_t conn, src_h, dst_h;
	uint8_t *src, *dst;
	uint64_t chunk;
	struct krdma_token tok;
	unsigned int depth, outstanding;
	enum slot_phase phase[MAX_DEPTH];
	uint64_t seed[MAX_DEPTH];
	uint64_t next_seed;
	bool failing;		/* an error was seen: submit nothing more */
	bool probing;		/* a load_probe() WRITE is outstanding */
	uint64_t verified, mismatches, errors, submit_errors, flushed;
	uint32_t first_status;
	int first_submit_err;
	int64_t first_error_at, last_done_at, last_ok_at;
};

static void load_error(struct load *ld)
{
	if (!ld->failing)
		ld->first_error_at = epoch_ms();
	ld->failing = true;
}

/* Start the next step of slot @i: WRITE a fresh pattern, or READ it back */
static void load_step(struct load *ld, unsigned int i, enum slot_phase phase)
{
	struct krdma_op op;
	int ret;

	if (ld->failing || stop) {
		ld->phase[i] = SLOT_IDLE;
		return;
	}
	if (phase == SLOT_WRITE) {
		ld->seed[i] = ld->next_seed++;
		fill(ld->src + i * ld->chunk, ld->chunk, ld->seed[i]);
		kt_op(&op, KRDMA_OP_WRITE, ld->conn, ld->src_h, i * ld->chunk,
		      ld->chunk, &ld->tok, i * ld->chunk, i);
	} else {
		memset(ld->dst + i * ld->chunk, 0, ld->chunk);
		kt_op(&op, KRDMA_OP_READ, ld->conn, ld->dst_h, i * ld->chunk,
		      ld->chunk, &ld->tok, i * ld->chunk, i);
	}
	ret = submit1(ld->fd, &op);
	if (ret == -EINTR && stop) {
		ld->phase[i] = SLOT_IDLE;	/* told to stop */
		return;
	}
	if (ret) {
		ld->submit_errors++;
		if (!ld->first_submit_err)
			ld->first_submit_err = ret;
		ld->phase[i] = SLOT_IDLE;
		load_error(ld);
		return;
	}
	ld->phase[i] = phase;
	ld->outstanding++;
}

/*
 * Nothing completed for a second: WRITE 8 bytes of slot 0's own pattern
 * over themselves (the READ back sees the same bytes either way). On
 * iWARP a peer that vanished is noticed only by TCP retransmitting data
 * that goes unacknowledged: with every slot waiting for a READ response
 * there is none, and the connection would wait forever.
 */
#define LOAD_PROBE	(1ULL << 32)
#define LOAD_PROBE_MS	1000

static void load_probe(struct load *ld)
{
	struct krdma_op op;

	kt_op(&op, KRDMA_OP_WRITE, ld->conn, ld->src_h, 0, 8, &ld->tok, 0,
	      LOAD_PROBE);
	if (!submit1(ld->fd, &op)) {
		ld->outstanding++;
		ld->probing = true;
	}
}

static void load_done(struct load *ld, const struct krdma_completion *wc,
		      bool *flowing)
{
	unsigned int i = wc->cookie;

	ld->outstanding--;
	ld->last_done_at = epoch_ms();
	if (wc->cookie == LOAD_PROBE) {
		ld->probing = false;
		if (wc->status) {
			if (!ld->errors)
				ld->first_status = wc->status;
			ld->errors++;
			if (wc->status == KRDMA_WC_WR_FLUSH_ERR)
				ld->flushed++;
			load_error(ld);
		}
		return;
	}
	if (wc->status) {
		if (!ld->errors)
			ld->first_status = wc->status;
		ld->errors++;
		if (wc->status == KRDMA_WC_WR_FLUSH_ERR)
			ld->flushed++;
		ld->phase[i] = SLOT_IDLE;
		load_error(ld);
		return;
	}
	ld->last_ok_at = ld->last_done_at;
	if (ld->phase[i] == SLOT_WRITE) {
		load_step(ld, i, SLOT_READ);
		return;
	}
	if (check(ld->dst + i * ld->chunk, ld->chunk, ld->seed[i]) != -1)
		ld->mismatches++;
	else
		ld->verified++;
	if (!*flowing) {
		*flowing = true;
		say("krdma_stress: load: flowing chunk=%" PRIu64 " depth=%u vmpin_kb=%ld",
		    ld->chunk, ld->depth, kt_vmpin_kb());
	}
	load_step(ld, i, SLOT_WRITE);
}

/* Say "connected", then wait for SIGUSR1 (blocked since main()) */
static void wait_sigusr1(unsigned int secs)
{
	struct timespec ts = { .tv_sec = secs };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	say("krdma_stress: load: connected");
	while (sigtimedwait(&set, NULL, &ts) < 0)
		if (errno != EINTR)
			die(errno, "waiting for SIGUSR1");
}

static const char load_usage[] =
	"load ADDR (-f FILE | -p PORT -r) [-d DEPTH] [-c CHUNK] [-t SECS] [-w]\n"
	"Connect to ADDR and keep DEPTH slots busy, each WRITEs a fresh pattern\n"
	"into its part of the peer's window and READs it back, every byte\n"
	"checked, until an operation fails or SECS pass; then drain and report.\n"
	"  -f FILE   take the port and the token from the FILE of a serve\n"
	"  -p PORT   the port to connect to, 1 to 65535 (with -r)\n"
	"  -r        take the token from the peer's first SEND\n"
	"  -d DEPTH  slots, 1 to 64 (default 8)\n"
	"  -c CHUNK  the bytes of a slot, at least 8 (default 256K; less when\n"
	"            DEPTH of them do not fit the window)\n"
	"  -t SECS   how long (default 60)\n"
	"  -w        print \"connected\" and wait for SIGUSR1 (at most SECS) first\n";

static int cmd_load(int argc, char **argv)
{
	struct load ld = { .depth = 8, .chunk = 256 * KiB, .next_seed = 1 };
	const char *file = NULL;
	unsigned int secs = 60, i;
	uint32_t port = 0, state, msg_h;
	bool recv_token = false, flowing = false, wait_go = false;
	struct krdma_completion wc[64];
	struct krdma_addr a;
	int64_t deadline, drain_deadline = 0, state_wait, quiet_since;
	long base, peak, end;
	int opt, ret, n, err;
	uint8_t *msg;

	while ((opt = next_opt(argc, argv)) != -1) {
		switch (opt) {
		case 'f':
			file = optarg;
			break;
		case 'w':
			wait_go = true;
			break;
		case 'p':
			port = opt_num(opt, false, 1, 65535);
			break;
		case 'r':
			recv_token = true;
			break;
		case 'd':
			ld.depth = opt_num(opt, false, 1, MAX_DEPTH);
			break;
		case 'c':
			ld.chunk = opt_num(opt, true, 8, MAX_SIZE);
			break;
		case 't':
			secs = opt_num(opt, false, 1, MAX_SECS);
			break;
		}
	}
	positional(argc, argv, 1);
	if (file && recv_token)
		usage_error(true, "-f and -r exclude each other");
	if (!file && !recv_token)
		usage_error(true, "missing -f FILE or -r: where the token comes from");
	if (recv_token && !port)
		usage_error(true, "-r needs -p PORT");
	if (file && port)
		usage_error(true, "-p is for -r: with -f, FILE has the port");
	ld.fd = open_krdma();
	base = kt_vmpin_kb();
	/* Everything registered before connecting: the RECV goes out first */
	ld.src = map(ld.depth * ld.chunk);
	ld.dst = map(ld.depth * ld.chunk);
	msg = map(4096);
	ld.src_h = reg(ld.fd, ld.src, ld.depth * ld.chunk, 0);
	ld.dst_h = reg(ld.fd, ld.dst, ld.depth * ld.chunk,
		       KRDMA_ACCESS_LOCAL_WRITE);
	msg_h = reg(ld.fd, msg, 64, KRDMA_ACCESS_LOCAL_WRITE);
	if (file)
		read_file(file, &port, NULL, false);
	parse_addr(argv[optind], port, &a);
	if (recv_token) {
		struct krdma_completion twc;
		struct krdma_op op;

		/*
		 * The server SENDs the token as soon as it has accepted: the
		 * RECV goes out with the connect request (on iWARP a SEND
		 * that finds no RECV ends the connection)
		 */
		for (i = 1;; i++) {
			kt_op(&op, KRDMA_OP_RECV, 0, msg_h, 0, 64, NULL, 0, 0);
			ret = krdma_connect_recvs(ld.fd, &a, NULL, 0, WAIT_MS,
						  &op, 1, &ld.conn);
			/*
			 * On iWARP the token can come right behind the MPA
			 * reply, before siw here has read the reply, which
			 * fails the connect (protocol.rst, "Ordering rules"):
			 * again, as krdmactl's clients do; "serve -S" accepts
			 * again a connection that never wrote
			 */
			if (ret != -ECONNRESET || i == TOKEN_TRIES)
				break;
			say("krdma_stress: load: connect reset (try %u of %u): again",
			    i, TOKEN_TRIES);
		}
		if (ret)
			die(ret, "connect to %s:%u", argv[optind], port);
		ret = krdma_poll_wc(ld.fd, &twc, 1, WAIT_MS);
		if (ret != 1)
			die(ret < 0 ? ret : -ETIMEDOUT, "RECV of the token");
		if (twc.status)
			die(0, "RECV of the token: %s",
			    krdma_wc_status_str(twc.status));
		memcpy(&ld.tok, msg, sizeof(ld.tok));
	} else {
		ret = krdma_connect_to(ld.fd, &a, WAIT_MS, &ld.conn);
		if (ret)
			die(ret, "connect to %s:%u", argv[optind], port);
		read_file(file, &port, &ld.tok, true);
	}
	/* Whole 8-byte words, DEPTH slots in the window */
	if (ld.chunk > ld.tok.length / ld.depth)
		ld.chunk = ld.tok.length / ld.depth;
	ld.chunk &= ~7ULL;
	if (!ld.chunk)
		die(0, "a window of %" PRIu64 " bytes is too small", (uint64_t)ld.tok.length);
	if (wait_go)
		wait_sigusr1(secs);

	deadline = mono_ms() + secs * 1000LL;
	quiet_since = mono_ms();
	for (i = 0; i < ld.depth; i++)
		load_step(&ld, i, SLOT_WRITE);
	while (ld.outstanding) {
		int64_t now = mono_ms();

		if (!ld.failing && (now >= deadline || stop)) {
			ld.failing = true;	/* time is up: drain */
			stop = 1;
		}
		if (ld.failing && !drain_deadline)
			drain_deadline = now + WAIT_MS;
		if (drain_deadline && now >= drain_deadline)
			break;	/* operations that never complete */
		n = krdma_poll_wc(ld.fd, wc, 64, 200);
		if (n == -EINTR)
			continue;
		if (n < 0)
			die(n, "poll");
		for (i = 0; i < (unsigned int)n; i++)
			load_done(&ld, &wc[i], &flowing);
		if (n > 0)
			quiet_since = mono_ms();
		else if (!ld.failing && !ld.probing &&
			 mono_ms() - quiet_since >= LOAD_PROBE_MS)
			load_probe(&ld);
	}
	/*
	 * The state has no event to wait for: a failed connection is torn
	 * down from krdma's workqueue, the completions may come first
	 */
	state_wait = mono_ms();
	for (;;) {
		conn_state(ld.fd, ld.conn, &state, &err);
		if (state != KRDMA_CONN_CONNECTED ||
		    (!ld.errors && !ld.submit_errors) ||
		    mono_ms() - state_wait > WAIT_MS)
			break;
		sleep_ms(5);
	}
	state_wait = mono_ms() - state_wait;
	say("krdma_stress: load: verified=%" PRIu64 " mismatches=%" PRIu64
	    " errors=%" PRIu64 " flushed=%" PRIu64 " submit_errors=%" PRIu64
	    " first_submit_error=%s outstanding=%u first_status=%s last_ok_at=%" PRId64
	    " first_error_at=%" PRId64 " last_done_at=%" PRId64
	    " state=%s error=%s state_wait_ms=%" PRId64,
	    ld.verified, ld.mismatches, ld.errors, ld.flushed,
	    ld.submit_errors, errname(ld.first_submit_err), ld.outstanding,
	    ld.errors ? krdma_wc_status_str(ld.first_status) : "none",
	    ld.last_ok_at, ld.first_error_at, ld.last_done_at,
	    state_str(state), errname(err), state_wait);
	peak = kt_vmpin_kb();
	krdma_destroy_handle(ld.fd, ld.conn);
	krdma_destroy_handle(ld.fd, ld.src_h);
	krdma_destroy_handle(ld.fd, ld.dst_h);
	krdma_destroy_handle(ld.fd, msg_h);
	end = vmpin_settle(base);
	close(ld.fd);
	say("krdma_stress: load: vmpin_start_kb=%ld vmpin_peak_kb=%ld vmpin_end_kb=%ld",
	    base, peak, end);
	return ld.mismatches || ld.outstanding || end > base || !ld.verified;
}

/* --- hold ----------------------------------------------------------------- */

static const char hold_usage[] =
	"hold ADDR -s SIZE [-d DEPTH]\n"
	"Register SIZE bytes in one buffer, connect to itself on ADDR, grant the\n"
	"second half and WRITE the first half (but 64K) into it with DEPTH\n"
	"operations; print \"holding\" and wait to be killed (at most 300 s).\n"
	"  -s SIZE   the bytes to register, at least 2 x (64K + DEPTH x 4K)\n"
	"  -d DEPTH  WRITEs in flight, 1 to 64 (default 16)\n";

static int cmd_hold(int argc, char **argv)
{
	struct krdma_op ops[MAX_DEPTH];
	unsigned int depth = 16, i;
	uint64_t size = 0, half, piece;
	const char *size_arg = NULL;
	struct krdma_token tok;
	uint32_t l, c, s, b;
	int fd, opt, ret;
	uint8_t *mem;
	char min[32];

	while ((opt = next_opt(argc, argv)) != -1) {
		switch (opt) {
		case 's':
			size = opt_num(opt, true, 1, MAX_SIZE);
			size_arg = optarg;
			break;
		case 'd':
			depth = opt_num(opt, false, 1, MAX_DEPTH);
			break;
		}
	}
	positional(argc, argv, 1);
	if (!size)
		usage_error(true, "missing -s SIZE");
	/* DEPTH WRITEs of whole pages, RXE_MAP_SLACK short of the end */
	if (size / 2 < RXE_MAP_SLACK + depth * 4096ULL)
		usage_error(false, "bad -s '%s': must be %s or more with -d %u",
			    size_arg, num_str(min, sizeof(min),
					      2 * (RXE_MAP_SLACK + depth * 4096ULL),
					      true), depth);
	half = size / 2;
	piece = (half - RXE_MAP_SLACK) / depth & ~4095ULL;
	alarm(300);	/* never outlive a script that died */
	fd = open_krdma();
	mem = map(size);
	b = reg(fd, mem, size, RW_ACCESS);
	self_pair(fd, argv[optind], &l, &c, &s);
	ret = krdma_grant_window(fd, s, b, half, half, KRDMA_ACCESS_REMOTE_WRITE,
				 NULL, &tok);
	if (ret)
		die(ret, "grant of %" PRIu64 " bytes", half);
	for (i = 0; i < depth; i++)
		kt_op(&ops[i], KRDMA_OP_WRITE, c, b, i * piece, piece, &tok,
		      i * piece, i);
	ret = krdma_submit_ops(fd, ops, depth, 0, NULL);
	if (ret)
		die(ret, "submit");
	say("krdma_stress: hold: holding registered=%" PRIu64 " granted=%" PRIu64
	    " in_flight=%u vmpin_kb=%ld", size, half, depth, kt_vmpin_kb());
	while (!stop)
		pause();
	return 0;
}

/* --- cycle ---------------------------------------------------------------- */

static int cycle_one(const char *host)
{
	const uint64_t len = 64 * KiB;
	uint32_t l, c, s, src_h, dst_h, back_h;
	uint8_t *src, *dst, *back;
	struct krdma_token tok;
	struct krdma_op op;
	int fd, ret, bad = 0;

	fd = open_krdma();
	src = map(len);
	dst = map(len);
	back = map(len);
	src_h = reg(fd, src, len, 0);
	dst_h = reg(fd, dst, len, RW_ACCESS);
	back_h = reg(fd, back, len, KRDMA_ACCESS_LOCAL_WRITE);
	self_pair(fd, host, &l, &c, &s);
	ret = krdma_grant_window(fd, s, dst_h, 0, len, KRDMA_ACCESS_REMOTE_READ |
				 KRDMA_ACCESS_REMOTE_WRITE, NULL, &tok);
	if (ret)
		die(ret, "%s: grant", host);
	/* A READ after the WRITE: on iWARP it also makes sure it was placed */
	fill(src, len, 7);
	kt_op(&op, KRDMA_OP_WRITE, c, src_h, 0, len, &tok, 0, 1);
	ret = run1(fd, &op);
	if (!ret) {
		kt_op(&op, KRDMA_OP_READ, c, back_h, 0, len, &tok, 0, 2);
		ret = run1(fd, &op);
	}
	if (ret || check(dst, len, 7) != -1 || check(back, len, 7) != -1) {
		fprintf(stderr, "krdma_stress: cycle: %s: %s\n", host,
			ret < 0 ? strerror(-ret) : ret ? krdma_wc_status_str(ret) :
			"the bytes differ");
		bad = 1;
	}
	close(fd);
	munmap(src, len);
	munmap(dst, len);
	munmap(back, len);
	return bad;
}

static const char cycle_usage[] =
	"cycle ADDR...\n"
	"On each ADDR: connect to itself, WRITE 64K and READ it back into another\n"
	"buffer, both checked, and close.\n";

static int cmd_cycle(int argc, char **argv)
{
	int i, bad = 0;

	while (next_opt(argc, argv) != -1)
		;
	positional(argc, argv, INT_MAX);
	for (i = optind; i < argc; i++)
		bad |= cycle_one(argv[i]);
	return bad;
}

/* --- threads -------------------------------------------------------------- */

#define T_DEPTH		4
#define T_FENCE		T_DEPTH		/* the slot of the READ after WRITEs */
#define T_CHUNK		(16 * KiB)
#define T_LEN		(T_DEPTH * T_CHUNK)
#define T_ACCEPT_MS	1000		/* one ACCEPT, retried */

enum { T_FREE, T_POSTED, T_DONE };

struct t_slot {
	_Atomic int state;
	_Atomic uint64_t cookie;
	uint32_t status;
	uint64_t seed;
};

struct t_stats {
	uint64_t cycles, verified, bytes, err_wc, flushed, enotconn;
	uint64_t mismatches, missing, stray, unexpected, closes;
};

struct t_pair;

struct t_thread {
	pthread_t tid;
	unsigned int idx;
	unsigned int rand;
	struct t_pair *pair;
	int me, peer;		/* 0: A (listens), 1: B (connects) */
	int fd;			/* this cycle's file */
	uint8_t *src, *dst;	/* dst is written by the peer only */
	uint8_t *fence;		/* where the fence READ lands */
	uint32_t src_h, dst_h, fence_h, conn, listener, grant;
	struct krdma_token peer_tok;
	uint64_t seq;		/* of the operations submitted */
	struct t_slot slot[T_DEPTH + 1];
	struct t_stats st;
	char why[256];		/* the first unexpected thing */
};

/* What the two threads of a pair tell each other, under lock */
struct t_pair {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t cycle;		/* the cycle the values below are for */
	uint32_t port;
	struct krdma_token tok[2];
	bool tok_valid[2];
	bool done[2];		/* the side finished the cycle */
	bool last;		/* the cycle was the last one */
	unsigned int rounds;	/* verified rounds before the closer closes */
	int closer;		/* 0: A, 1: B */
	uint8_t *dst[2];
};

static struct {
	const char *host;
	bool one_fd;
	int fd;			/* -m one */
	_Atomic int closed;	/* -m one: the file is closed */
	_Atomic int stopping;	/* -m many: end after this cycle */
	unsigned int nthreads;
	struct t_thread th[MAX_THREADS];
	struct t_pair pairs[MAX_THREADS / 2];
} T;

static void __attribute__((format(printf, 2, 3)))
t_unexpected(struct t_thread *t, const char *fmt, ...)
{
	va_list ap;

	t->st.unexpected++;
	if (t->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
}

/* -m one, after the file was closed under the threads: stop quietly */
static bool t_gone(void)
{
	return T.one_fd && atomic_load(&T.closed);
}

/* Thread, operation number (a second completion shows), slot */
static uint64_t t_cookie(struct t_thread *t, unsigned int i)
{
	return (uint64_t)t->idx << 48 | (++t->seq & 0xffffffffffULL) << 8 | i;
}

/* Hand a completion to the slot it belongs to, whoever polled it */
static void t_dispatch(struct t_thread *self, const struct krdma_completion *wc)
{
	unsigned int idx = wc->cookie >> 48, i = wc->cookie & 0xff;
	struct t_slot *sl;

	if (idx >= T.nthreads || i > T_FENCE) {
		self->st.stray++;
		t_unexpected(self, "a completion with a cookie of nobody: %#" PRIx64,
			     (uint64_t)wc->cookie);
		return;
	}
	sl = &T.th[idx].slot[i];
	if (atomic_load(&sl->state) != T_POSTED ||
	    atomic_load(&sl->cookie) != wc->cookie) {
		self->st.stray++;
		t_unexpected(self, "a completion of no operation in flight (a second one?): %#" PRIx64,
			     (uint64_t)wc->cookie);
		return;
	}
	sl->status = wc->status;
	atomic_store(&sl->state, T_DONE);
}

/* Poll the file once (up to @ms) and dispatch: 0 or -errno */
static int t_poll(struct t_thread *t, unsigned int ms)
{
	struct krdma_completion wc[32];
	int n, i;

	n = krdma_poll_wc(t->fd, wc, 32, ms);
	if (n < 0) {
		if (!t_gone())
			t_unexpected(t, "POLL: %s", errname(n));
		return n;
	}
	for (i = 0; i < n; i++)
		t_dispatch(t, &wc[i]);
	return 0;
}

static unsigned int t_outstanding(struct t_thread *t)
{
	unsigned int i, n = 0;

	for (i = 0; i <= T_FENCE; i++)
		n += atomic_load(&t->slot[i].state) == T_POSTED;
	return n;
}

/*
 * Slot @i: a WRITE of a fresh pattern into the peer's window, or (the
 * fence) a READ of its first bytes. 0, -ENOTCONN (the peer went away),
 * or another -errno (unexpected, unless the file was closed under us).
 */
static int t_submit(struct t_thread *t, unsigned int i)
{
	struct t_slot *sl = &t->slot[i];
	uint64_t cookie = t_cookie(t, i);
	struct krdma_op op;
	int ret;

	if (i == T_FENCE) {
		kt_op(&op, KRDMA_OP_READ, t->conn, t->fence_h, 0, 8,
		      &t->peer_tok, 0, cookie);
	} else {
		sl->seed = (uint64_t)rand_r(&t->rand) << 32 | rand_r(&t->rand);
		fill(t->src + i * T_CHUNK, T_CHUNK, sl->seed);
		kt_op(&op, KRDMA_OP_WRITE, t->conn, t->src_h, i * T_CHUNK,
		      T_CHUNK, &t->peer_tok, i * T_CHUNK, cookie);
	}
	atomic_store(&sl->cookie, cookie);
	atomic_store(&sl->state, T_POSTED);
	ret = submit1(t->fd, &op);
	if (ret) {
		atomic_store(&sl->state, T_FREE);
		if (ret == -ENOTCONN)
			t->st.enotconn++;
		else if (!t_gone())
			t_unexpected(t, "SUBMIT: %s", errname(ret));
	}
	return ret;
}

/*
 * Until every operation in flight has completed, polling the file (any
 * thread's completions, with one fd): 0; -ETIMEDOUT when some did not
 * in WAIT_MS (they are counted missing); -EBADF when the file was closed
 * under us.
 */
static int t_drain(struct t_thread *t)
{
	int64_t deadline = mono_ms() + WAIT_MS;
	unsigned int i, left;

	while ((left = t_outstanding(t))) {
		if (t_poll(t, 20) && t_gone())
			return -EBADF;
		if (mono_ms() > deadline) {
			t->st.missing += left;
			t_unexpected(t, "%u operations did not complete in %d ms",
				     left, WAIT_MS);
			for (i = 0; i <= T_FENCE; i++)
				atomic_store(&t->slot[i].state, T_FREE);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Whether every completed operation of the round succeeded */
static bool t_all_ok(struct t_thread *t)
{
	unsigned int i;

	for (i = 0; i <= T_FENCE; i++)
		if (atomic_load(&t->slot[i].state) == T_DONE &&
		    t->slot[i].status)
			return false;
	return true;
}

/*
 * Take the completions of the round: true when all succeeded; with
 * @verify, the WRITEs' bytes are checked in the peer's memory (after the
 * fence READ: on iWARP a WRITE's completion does not mean it was placed).
 */
static bool t_collect(struct t_thread *t, bool verify)
{
	uint8_t *peer_dst = t->pair->dst[t->peer];
	bool all_ok = true;
	unsigned int i;

	for (i = 0; i <= T_FENCE; i++) {
		struct t_slot *sl = &t->slot[i];

		if (atomic_load(&sl->state) != T_DONE)
			continue;
		atomic_store(&sl->state, T_FREE);
		if (sl->status) {
			t->st.err_wc++;
			if (sl->status == KRDMA_WC_WR_FLUSH_ERR)
				t->st.flushed++;
			all_ok = false;
			continue;
		}
		if (!verify || i == T_FENCE)
			continue;
		if (check(peer_dst + i * T_CHUNK, T_CHUNK, sl->seed) != -1) {
			t->st.mismatches++;
			t_unexpected(t, "a WRITE completed, but its bytes differ at the peer (slot %u)",
				     i);
			continue;
		}
		t->st.verified++;
		t->st.bytes += T_CHUNK;
	}
	return all_ok;
}

/* Wait for @cond under the pair's lock: 0, -ETIMEDOUT, or -EBADF */
static int t_wait(struct t_pair *p, bool (*cond)(struct t_pair *p, void *arg),
		  void *arg)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&p->lock);
	while (!cond(p, arg) && !ret && !t_gone())
		ret = pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	pthread_mutex_unlock(&p->lock);
	if (t_gone())
		return -EBADF;
	return ret ? -ETIMEDOUT : 0;
}

static void t_publish(struct t_pair *p, void (*set)(struct t_pair *p, void *arg),
		      void *arg)
{
	pthread_mutex_lock(&p->lock);
	if (set)
		set(p, arg);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static bool t_have_port(struct t_pair *p, void *arg)
{
	return p->port;
}

static bool t_have_tok(struct t_pair *p, void *arg)
{
	return p->tok_valid[((struct t_thread *)arg)->peer];
}

static bool t_peer_done(struct t_pair *p, void *arg)
{
	struct t_thread *t = arg;

	return p->cycle != t->st.cycles || p->done[t->peer];
}

static bool t_next_cycle(struct t_pair *p, void *arg)
{
	return p->cycle == ((struct t_thread *)arg)->st.cycles;
}

static void t_set_port(struct t_pair *p, void *arg)
{
	p->port = *(uint32_t *)arg;
}

static void t_set_tok(struct t_pair *p, void *arg)
{
	p->tok_valid[((struct t_thread *)arg)->me] = true;
}

static void t_set_done(struct t_pair *p, void *arg)
{
	p->done[((struct t_thread *)arg)->me] = true;
}

/* A starts the next cycle: who closes, after how many rounds */
static void t_set_next(struct t_pair *p, void *arg)
{
	struct t_thread *t = arg;

	p->cycle++;
	p->port = 0;
	p->tok_valid[0] = p->tok_valid[1] = false;
	p->done[0] = p->done[1] = false;
	p->rounds = rand_r(&t->rand) % 6;
	p->closer = !p->closer;
	p->last = atomic_load(&T.stopping);
}

/* Set up this cycle's connection and windows: 0 or -errno */
static int t_connect(struct t_thread *t)
{
	struct t_pair *p = t->pair;
	struct krdma_addr a, bound;
	int64_t deadline;
	int ret;

	if (!T.one_fd) {
		t->fd = krdma_open();
		if (t->fd < 0) {
			t_unexpected(t, "open: %s", errname(t->fd));
			return t->fd;
		}
		t->src_h = reg(t->fd, t->src, T_LEN, 0);
		t->dst_h = reg(t->fd, t->dst, T_LEN, RW_ACCESS);
		t->fence_h = reg(t->fd, t->fence, 8, KRDMA_ACCESS_LOCAL_WRITE);
	}
	if (!t->me) {
		parse_addr(T.host, 0, &a);
		ret = krdma_listen_on(t->fd, &a, 1, &t->listener, &bound);
		if (ret)
			goto fail;
		t_publish(p, t_set_port, &bound.port);
		/* In steps, so that a file closed under us is noticed */
		deadline = mono_ms() + WAIT_MS;
		do {
			ret = krdma_accept_conn(t->fd, t->listener, 0,
						T_ACCEPT_MS, &t->conn);
		} while (ret == -ETIMEDOUT && mono_ms() < deadline);
		if (ret)
			goto fail;
	} else {
		ret = t_wait(p, t_have_port, t);
		if (ret)
			goto fail;
		parse_addr(T.host, p->port, &a);
		ret = krdma_connect_to(t->fd, &a, WAIT_MS, &t->conn);
		if (ret)
			goto fail;
	}
	ret = krdma_grant_window(t->fd, t->conn, t->dst_h, 0, T_LEN,
				 KRDMA_ACCESS_REMOTE_READ |
				 KRDMA_ACCESS_REMOTE_WRITE, &t->grant,
				 &p->tok[t->me]);
	if (ret)
		goto fail;
	t_publish(p, t_set_tok, t);
	ret = t_wait(p, t_have_tok, t);
	if (ret)
		goto fail;
	t->peer_tok = p->tok[t->peer];
	return 0;
fail:
	if (!t_gone())
		t_unexpected(t, "cycle %" PRIu64 ": setting up the %s side: %s",
			     t->st.cycles, t->me ? "connecting" : "listening",
			     errname(ret));
	return ret;
}

/* End this cycle's objects (one fd) or the file (many fds) */
static void t_teardown(struct t_thread *t)
{
	if (!T.one_fd) {
		if (t->fd >= 0)
			close(t->fd);
		t->fd = -1;
		return;
	}
	if (t->grant)
		krdma_destroy_handle(t->fd, t->grant);
	if (t->conn)
		krdma_destroy_handle(t->fd, t->conn);
	if (t->listener)
		krdma_destroy_handle(t->fd, t->listener);
}

/* The closer ends its side under the WRITEs it just submitted */
static void t_close_side(struct t_thread *t)
{
	unsigned int i;
	int ret;

	t->st.closes++;
	if (!T.one_fd) {
		close(t->fd);	/* completions go with the file */
		t->fd = -1;
		for (i = 0; i <= T_FENCE; i++)
			atomic_store(&t->slot[i].state, T_FREE);
		return;
	}
	ret = krdma_destroy_handle(t->fd, t->conn);
	t->conn = 0;
	if (ret && !t_gone())
		t_unexpected(t, "DESTROY of a connection: %s", errname(ret));
}

/*
 * One cycle: connect, verified WRITE rounds, then the closer ends its
 * side with operations in flight while the other is still submitting and
 * polling, and sees its connection fail. false: stop the thread.
 */
static bool t_cycle(struct t_thread *t)
{
	struct t_pair *p = t->pair;
	bool closer = t->me == p->closer;
	unsigned int i, rounds = 0;
	int64_t deadline;
	uint32_t state = 0;
	int err, ret = 0;

	t->conn = t->listener = t->grant = 0;
	if (t_connect(t))
		goto out;
	for (;;) {
		for (i = 0; i < T_DEPTH && !ret; i++)
			ret = t_submit(t, i);
		if (closer && rounds >= p->rounds) {
			t_close_side(t);
			break;
		}
		if (ret || t_drain(t) || !t_all_ok(t))
			break;	/* an error: the peer went away */
		/* The WRITEs are placed once a READ behind them is back */
		ret = t_submit(t, T_FENCE);
		if (ret || t_drain(t) || !t_all_ok(t))
			break;
		t_collect(t, true);
		rounds++;
	}
	if (t_gone())
		return false;
	if (t->fd < 0)
		goto out;	/* many fds: the closer closed its file */
	/* Whatever is in flight completes, and the connection is down */
	if (t_drain(t) == -EBADF)
		return false;
	t_collect(t, false);
	if (!closer) {
		deadline = mono_ms() + WAIT_MS;
		do {
			conn_state(t->fd, t->conn, &state, &err);
			if (state != KRDMA_CONN_CONNECTED)
				break;
			sleep_ms(5);
		} while (mono_ms() < deadline);
		if (state != KRDMA_CONN_ERROR && !t_gone())
			t_unexpected(t, "cycle %" PRIu64 ": the peer ended its side, and our connection is %s",
				     t->st.cycles, state_str(state));
	}
out:
	if (t_gone())
		return false;
	t_teardown(t);
	/* Both sides done before the next cycle's values replace these */
	t_publish(p, t_set_done, t);
	if (t_wait(p, t_peer_done, t)) {
		if (!t_gone())
			t_unexpected(t, "cycle %" PRIu64 ": the peer thread did not finish in %d ms",
				     t->st.cycles, WAIT_MS);
		return false;
	}
	if (!t->me)
		t_publish(p, t_set_next, t);
	t->st.cycles++;
	return true;
}

static void *t_main(void *arg)
{
	struct t_thread *t = arg;

	for (;;) {
		if (T.one_fd)
			t->fd = T.fd;
		if (!t_cycle(t))
			break;
		if (t_wait(t->pair, t_next_cycle, t)) {
			if (!t_gone())
				t_unexpected(t, "cycle %" PRIu64 " did not start",
					     t->st.cycles);
			break;
		}
		if (t->pair->last)
			break;
	}
	return NULL;
}

static void t_sum(struct t_stats *sum, const struct t_stats *s)
{
	sum->cycles += s->cycles;
	sum->verified += s->verified;
	sum->bytes += s->bytes;
	sum->err_wc += s->err_wc;
	sum->flushed += s->flushed;
	sum->enotconn += s->enotconn;
	sum->mismatches += s->mismatches;
	sum->missing += s->missing;
	sum->stray += s->stray;
	sum->unexpected += s->unexpected;
	sum->closes += s->closes;
}

static const char threads_usage[] =
	"threads ADDR [-n THREADS] [-t SECS] [-m one|many]\n"
	"THREADS threads in pairs for SECS: in each cycle a pair connects, grants\n"
	"windows and WRITEs patterns, every byte checked; then one side ends\n"
	"under the other's operations. Every operation must complete once.\n"
	"  -n THREADS  an even number, 2 to 64 (default 32)\n"
	"  -t SECS     how long (default 5)\n"
	"  -m one      one file for every thread (the end is a DESTROY of the\n"
	"              connection), closed under the threads at the end\n"
	"  -m many     a file for each thread and cycle, the end is close()\n"
	"              (the default)\n";

static int cmd_threads(int argc, char **argv)
{
	unsigned int secs = 5, i, idle = 0;
	struct t_stats sum = {};
	int64_t t0, deadline;
	bool hung = false;
	long base, end;
	int opt;

	T.nthreads = 32;
	while ((opt = next_opt(argc, argv)) != -1) {
		switch (opt) {
		case 'n':
			T.nthreads = opt_num(opt, false, 2, MAX_THREADS);
			if (T.nthreads % 2)
				usage_error(false, "bad -n '%s': must be even (pairs)",
					    optarg);
			break;
		case 't':
			secs = opt_num(opt, false, 1, MAX_SECS);
			break;
		case 'm':
			T.one_fd = !strcmp(optarg, "one");
			if (!T.one_fd && strcmp(optarg, "many"))
				usage_error(false, "bad -m '%s': must be one or many",
					    optarg);
			break;
		}
	}
	positional(argc, argv, 1);
	T.host = argv[optind];
	base = kt_vmpin_kb();
	if (T.one_fd)
		T.fd = open_krdma();
	else
		unlimit_memlock();	/* the threads open their files */
	for (i = 0; i < T.nthreads; i++) {
		struct t_thread *t = &T.th[i];
		struct t_pair *p = &T.pairs[i / 2];

		t->idx = i;
		t->rand = i + 1;
		t->pair = p;
		t->me = i % 2;
		t->peer = !t->me;
		t->fd = -1;
		t->src = map(T_LEN);
		t->dst = map(T_LEN);
		t->fence = map(4096);
		p->dst[t->me] = t->dst;
		if (!t->me) {
			pthread_mutex_init(&p->lock, NULL);
			pthread_cond_init(&p->cond, NULL);
			p->rounds = i / 2 % 6;
			p->closer = i / 2 % 2;
		}
		if (T.one_fd) {
			t->src_h = reg(T.fd, t->src, T_LEN, 0);
			t->dst_h = reg(T.fd, t->dst, T_LEN, RW_ACCESS);
			t->fence_h = reg(T.fd, t->fence, 8,
					 KRDMA_ACCESS_LOCAL_WRITE);
		}
	}
	t0 = mono_ms();
	for (i = 0; i < T.nthreads; i++)
		if (pthread_create(&T.th[i].tid, NULL, t_main, &T.th[i]))
			die(-errno, "pthread_create");
	sleep(secs);
	if (T.one_fd) {
		/* Close the shared file under the running threads */
		atomic_store(&T.closed, 1);
		close(T.fd);
		for (i = 0; i < T.nthreads / 2; i++)
			t_publish(&T.pairs[i], NULL, NULL);
	} else {
		atomic_store(&T.stopping, 1);
	}
	deadline = epoch_ms() + 2 * WAIT_MS;
	for (i = 0; i < T.nthreads; i++) {
		struct timespec ts = { deadline / 1000,
				       deadline % 1000 * 1000000 };

		if (pthread_timedjoin_np(T.th[i].tid, NULL, &ts)) {
			say("krdma_stress: threads: thread %u did not stop in %d ms",
			    i, 2 * WAIT_MS);
			hung = true;
		}
	}
	for (i = 0; i < T.nthreads; i++) {
		t_sum(&sum, &T.th[i].st);
		if (!T.th[i].st.verified)
			idle++;
		if (T.th[i].why[0])
			say("krdma_stress: threads: thread %u: %s", i,
			    T.th[i].why);
	}
	end = hung ? kt_vmpin_kb() : vmpin_settle(base);
	say("krdma_stress: threads: mode=%s host=%s threads=%u ms=%" PRId64
	    " cycles=%" PRIu64 " closes=%" PRIu64 " verified=%" PRIu64
	    " bytes=%" PRIu64 " err_wc=%" PRIu64 " flushed=%" PRIu64
	    " enotconn=%" PRIu64 " mismatches=%" PRIu64 " missing=%" PRIu64
	    " stray=%" PRIu64 " unexpected=%" PRIu64
	    " idle_threads=%u hung=%d vmpin_start_kb=%ld vmpin_end_kb=%ld",
	    T.one_fd ? "one-fd" : "many-fds", T.host, T.nthreads,
	    mono_ms() - t0, sum.cycles, sum.closes, sum.verified, sum.bytes,
	    sum.err_wc, sum.flushed, sum.enotconn, sum.mismatches,
	    sum.missing, sum.stray, sum.unexpected, idle, hung, base, end);
	if (hung)
		_exit(1);	/* threads stuck in the kernel: do not join */
	return sum.mismatches || sum.missing || sum.stray || sum.unexpected ||
	       idle || !sum.closes || end > base;
}

static const struct mode modes[] = {
	{ "serve", "p:s:St:", serve_usage, cmd_serve },
	{ "load", "f:p:rd:c:t:w", load_usage, cmd_load },
	{ "hold", "s:d:", hold_usage, cmd_hold },
	{ "cycle", "", cycle_usage, cmd_cycle },
	{ "threads", "n:t:m:", threads_usage, cmd_threads },
};

/* The synopsis of every mode (their first lines) */
static void __attribute__((noreturn)) usage(FILE *f, int status)
{
	const char *u;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(modes); i++) {
		u = modes[i].usage;
		fprintf(f, "%s krdma_stress %.*s\n", i ? "      " : "usage:",
			(int)strcspn(u, "\n"), u);
	}
	fprintf(f, "(krdma_stress MODE -h: what MODE does, its options)\n");
	exit(status);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t usr1;
	size_t i;

	if (argc < 2)
		usage(stderr, 2);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		usage(stdout, 0);
	for (i = 0; i < ARRAY_SIZE(modes); i++)
		if (!strcmp(argv[1], modes[i].name))
			mode = &modes[i];
	if (!mode) {
		fprintf(stderr, "krdma_stress: unknown mode '%s'\n", argv[1]);
		usage(stderr, 2);
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* Taken by sigtimedwait() only (load -w) */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	/* The mode's arguments start at argv[1], as getopt() wants */
	return mode->cmd(argc - 1, argv + 1);
}
