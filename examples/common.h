/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the workload examples share: the rendezvous of N ranks (rank 0
 * listens at an address given on the command line, the others connect to
 * it; it gathers and broadcasts small messages, and names a rank that
 * died), address conversions, option parsing and JSON helpers.
 *
 * Each program defines ex_prog, its name, for the messages.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef KRDMA_EXAMPLES_COMMON_H
#define KRDMA_EXAMPLES_COMMON_H

#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "libkrdma.h"

#define __printf(a, b) __attribute__((format(printf, a, b)))
#define __noreturn __attribute__((noreturn))
#define ARRAY_SIZE(x) (sizeof(x) / sizeof((x)[0]))

#define RV_MAX_RANKS		256
#define RV_GRACE_MS		5000	/* to learn who died, after a failure */
#define RV_MAGIC		0x52414b52U	/* "RKAR" */
#define RV_VERSION		1

/* The program's name, for messages: defined by each program */
extern const char *const ex_prog;

enum rv_type {
	RV_HELLO = 1,	/* rank, the options it runs with */
	RV_ADDR,	/* where it listens */
	RV_TOKEN,	/* the token of its window, its device */
	RV_BARRIER,
	RV_RESULT,	/* time and errors */
	RV_DONE,
	RV_ABORT,	/* rank -> root: I fail, for this reason */
	RV_VERDICT,	/* root -> ranks: the run failed, for this reason */
};

/* One rendezvous message, host byte order (as krdmactl's protocols) */
struct rv_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t rank;
	uint32_t nranks;
	uint32_t xseq;		/* number of the exchange */
	int32_t blame;		/* ABORT, VERDICT: the rank at fault, or -1 */
	uint64_t v[6];
	struct krdma_addr addr;
	struct krdma_token token;
	char text[192];
};

_Static_assert(sizeof(struct rv_msg) == 328, "328 bytes on the wire");

/* The rendezvous of one rank */
struct rv {
	int rank, n;
	unsigned int timeout_s;		/* to wait for an exchange */
	char root_host[256];
	unsigned int root_port;
	char phase[128];		/* what runs now, for messages */
	/* " (mapper 1)": a rank's role, appended to "rank 4"; may be NULL */
	void (*role)(int rank, char *buf, size_t len);
	/* what must match among the ranks, for a refusal */
	const char *options_text;
	int root_sock;			/* rank > 0 */
	int *socks;			/* rank 0: per rank (-1 for itself) */
	bool *gone;			/* rank 0: rank's socket closed */
	struct rv_msg *early;		/* rank 0: a rank's next message */
	bool *has_early;
	uint32_t xseq;
	struct krdma_addr local;	/* local address, port 0 */
	struct rv_msg *all;		/* allgather of N messages */
};

uint64_t now_ns(void);
void say(const struct rv *v, const char *fmt, ...) __printf(2, 3);

/* Set up @v for @rank of @n; 0 or -ENOMEM */
int rv_init(struct rv *v, int rank, int n);
/* All of @len bytes: 0 or -errno */
int send_all(int sock, const void *buf, size_t len);
/* All of @len bytes by @deadline (ns): 0, -EPIPE (EOF), -ETIMEDOUT, -errno */
int recv_all(int sock, void *buf, size_t len, uint64_t deadline);
/*
 * Connect to @host:@port, retrying for @timeout_s while nothing listens
 * there: 0, -EADDRNOTAVAIL (@host does not resolve), -ETIMEDOUT, -errno
 */
int tcp_connect(const char *host, unsigned int port, unsigned int timeout_s,
		int *sock);
int rv_send(int sock, struct rv_msg *m);
/* One message from @sock by @deadline (ns): 0, -EPIPE (EOF), -ETIMEDOUT, -EPROTO */
int rv_read(int sock, struct rv_msg *m, uint64_t deadline);
/*
 * Fail the run: say so to rank 0 (or, on rank 0, find out who is at
 * fault and tell everyone), print the verdict, exit 1. Closing the
 * files at exit ends the connections and unpins the buffers.
 */
void __noreturn rv_abort(struct rv *v, int blame, const char *fmt, ...)
	__printf(3, 4);
/* A rendezvous socket is readable outside an exchange (rank @q's, or rank 0's) */
void rv_event(struct rv *v, int q);
/*
 * The one collective of the rendezvous: every rank gives @mine; rank 0
 * collects them and sends back all N (into v->all) when @gather, else
 * only its own (a barrier). The same exchange on every rank, in order.
 */
void rv_exchange(struct rv *v, struct rv_msg *mine, bool gather);
/* Rank 0: take the N - 1 ranks' connections, refuse those whose HELLO's v[] differ */
void rv_root(struct rv *v, const struct rv_msg *hello);
/* Other ranks: connect to rank 0 (retrying until it listens) and HELLO */
void rv_join(struct rv *v, struct rv_msg *hello);
/* Add the rendezvous sockets to @pfd from @np (idx[] the rank); new np */
int rv_poll_add(const struct rv *v, struct pollfd *pfd, int *idx, int np);
/* After poll(): handle the rendezvous sockets that are readable */
void rv_poll_check(struct rv *v, const struct pollfd *pfd, const int *idx, int np);

int resolve(const char *host, unsigned int port, struct sockaddr_storage *ss,
	    socklen_t *len);
void sa_to_addr(const struct sockaddr_storage *ss, struct krdma_addr *out);
socklen_t addr_to_sa(const struct krdma_addr *a, struct sockaddr_storage *ss);
/* A TCP listener on @local (any port); its address into @bound; -1 on error */
int tcp_listen_any(const struct krdma_addr *local, struct krdma_addr *bound);

/* Options */

/* The options of the ranks' programs (krdma-allreduce, krdma-shuffle) */
struct ex_opts {
	char addr[INET6_ADDRSTRLEN];	/* local address to listen on */
	bool tcp;
	int notify;			/* 0 auto, 1 imm, 2 send */
	uint64_t min_bytes, max_bytes, factor;
	unsigned int iters, warmup;
	unsigned int timeout_s;
	bool json;
	bool inject;			/* a wrong input, for the tests */
	/* while parsing */
	const char *rank_s, *size_s, *root_s;
	bool have_max;
	uint64_t size_lo, size_hi, size_align;	/* of -b and -e */
	const char *size_text;		/* "a size from 4 to 4G" */
};

/* getopt_long's entries of those options (--root is 'O') */
#define EX_LONG_OPTIONS \
	{ "root", required_argument, NULL, 'O' }, \
	{ "rank", required_argument, NULL, 'r' }, \
	{ "size", required_argument, NULL, 'N' }, \
	{ "addr", required_argument, NULL, 'a' }, \
	{ "mode", required_argument, NULL, 'm' }, \
	{ "tcp", no_argument, NULL, 'T' }, \
	{ "minbytes", required_argument, NULL, 'b' }, \
	{ "maxbytes", required_argument, NULL, 'e' }, \
	{ "stepfactor", required_argument, NULL, 'f' }, \
	{ "iters", required_argument, NULL, 'n' }, \
	{ "warmup_iters", required_argument, NULL, 'w' }, \
	{ "notify", required_argument, NULL, 'I' }, \
	{ "timeout", required_argument, NULL, 't' }, \
	{ "json", no_argument, NULL, 'j' }, \
	{ "inject-error", no_argument, NULL, 'X' }, \
	{ "help", no_argument, NULL, 'h' }
#define EX_SHORT_OPTIONS	"a:m:b:e:f:n:w:t:jh"

/* Defaults: 64K, factor 2, 20 iterations after 5, @timeout_s */
void ex_opts_init(struct ex_opts *o, unsigned int timeout_s);
/* getopt_long's @c: 0 taken, 1 not one of them, 2 bad usage (said) */
int ex_opt(int c, char *argv[], struct ex_opts *o);
/* After getopt_long: the sizes and the world (parse_world()); 0 or 2 */
int ex_opts_end(int argc, char *argv[], struct ex_opts *o, int max_size,
		unsigned int def_port, struct rv *rv);

int parse_size(const char *s, uint64_t *out);
int parse_int(const char *s, long min, long max, long *out);
const char *first_env(const char *const *names);
/* Print "prog: ...\nTry 'prog --help'." and return 2 */
int bad(const char *fmt, ...) __printf(1, 2);
/*
 * The world: --rank, --size, --root, else the launchers' environment
 * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, Open MPI, MPICH, Slurm).
 * 0, or bad()'s 2.
 */
int parse_world(const char *rank_s, const char *size_s, const char *root_s,
		int min_size, int max_size, unsigned int def_port,
		struct rv *v);
void raise_memlock(void);

/*
 * After the options: set @v up, raise the memlock limit, join the
 * rendezvous with @hello (rank 0 opens it), take --addr. Aborts on
 * failure. 0, or 1 out of memory.
 */
int ex_start(struct rv *v, const struct ex_opts *o, const char *options_text,
	     struct rv_msg *hello);
/* The options every rank must share into @m, a HELLO: @w0 and @w5 the program's */
void ex_hello(const struct ex_opts *o, uint64_t w0, uint64_t w5,
	      struct rv_msg *m);
/*
 * Rank 0, after an RV_RESULT exchange of (time, wrong, first wrong):
 * the largest time, the sum of the wrongs; says each rank's first
 * wrong @what
 */
void ex_results(struct rv *v, const char *what, uint64_t *maxtime,
		uint64_t *wrong);
/* The last exchange */
void ex_end(struct rv *v);

/*
 * krdma
 */

#define NOTE_MAGIC		0x4e414b52U	/* "RKAN" */

/* A notification (iWARP) or a credit, in a control slot */
struct note {
	uint32_t magic;
	uint32_t kind;
	uint32_t seq;
	uint32_t pad;
};

/* Completion cookies: kind in the top byte, an index below */
#define COOKIE(k, i)	(((k) << 56) | (uint64_t)(i))
#define CKIND(c)	((c) >> 56)
#define CINDEX(c)	((c) & ((1ULL << 56) - 1))

/* Open /dev/krdma and check the module serves connections; aborts */
int krdma_start(struct rv *v);
/* "; the connection is down: <why>" when @conn failed, else "" */
const char *conn_why(int kfd, uint32_t conn, char *buf, size_t len);
/* Anonymous memory of @len bytes, registered with @access; aborts */
uint8_t *map_buf(struct rv *v, int kfd, uint64_t len, uint32_t access,
		 uint32_t *h);
/* The device of @conn: 0 or -errno */
int conn_device(int kfd, uint32_t conn, struct krdma_dev_query *dq);
/* A SEND of a note written at @base + @off (buffer @buf) */
void fill_note_send(struct krdma_op *op, uint32_t conn, uint64_t cookie,
		    uint32_t buf, uint8_t *base, uint64_t off, uint32_t kind,
		    uint32_t seq);
void fill_recv(struct krdma_op *op, uint32_t conn, uint64_t cookie,
	       uint32_t buf, uint64_t off, uint64_t len);
/*
 * Submit *n ops, waiting for room (KRDMA_SUBMIT_WAIT); 0, or the error
 * with *ops at the op refused and *n the ops left
 */
int submit_wait(int kfd, struct krdma_op **ops, uint32_t *n);

/* "key": "escaped string", */
void json_str(const char *key, const char *s, bool comma);

#endif /* KRDMA_EXAMPLES_COMMON_H */
