// SPDX-License-Identifier: GPL-2.0
/*
 * krdma-load: data loading for training. A server exports a dataset
 * file, read-only, and publishes a checksum of each sample; clients
 * fetch random batches of samples by RDMA READ into their own buffers
 * (or over TCP, the server pread()ing and sending them), verify every
 * sample, and print samples/s and bytes/s.
 *
 * The dataset is cut into samples of -s bytes (a trailing part shorter
 * than a sample is not served). The checksum of a sample is its XXH64
 * (seed 0, the xxHash specification's 64-bit hash), computed by the
 * server at start.
 *
 * Over krdma:
 * - the server maps the file PROT_READ, MAP_SHARED and registers the
 *   mapping once with REMOTE_READ only (a read-only buffer: one pin of
 *   the file's page cache pages, however many clients read it); per
 *   client it grants the whole dataset, REMOTE_READ, on that client's
 *   connection, and revokes the grant when the client leaves. The
 *   server's CPU does nothing for a sample: a READ is served by the
 *   RDMA device;
 * - a client registers one buffer of --depth batches of -b samples
 *   (LOCAL_WRITE), posts one READ per sample of a batch (remote offset
 *   index x size), keeps --depth batches in flight, and verifies a batch
 *   once all of its READs completed, then reuses its slot;
 * - the control connection (TCP) carries the dataset's shape, the
 *   checksum table and the token, and tells either side when the other
 *   is gone. A client names its krdma connection by its local address,
 *   which the server finds as the peer of one it accepted: clients may
 *   connect at the same time.
 *
 * Over TCP (-m tcp): the client sends the indices of a batch, the
 * server pread()s each sample from the file and sends them back in
 * order; the client keeps --depth requests outstanding.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define PROG			"krdma-load"
#define LD_DEF_PORT		29600
#define LD_DEF_TIMEOUT_S	30
#define LD_MAX_SAMPLE		(1ULL << 30)
#define LD_MAX_SAMPLES		(16ULL << 20)	/* 128 MiB of checksums */
#define LD_MAX_BATCH		4096
#define LD_MAX_DEPTH		64
#define LD_MAX_CLIENTS		1000
#define LD_POOL			64	/* accepted connections not claimed yet */
#define LD_GRACE_MS		5000	/* to see the server's end, after a failure */
#define LD_TAG			0x4c44	/* "LD" */
#define LD_HASH_XXH64		1

/* Messages of the control connection (struct rv_msg, common.h) */
enum {
	LD_HELLO = 100,	/* client -> server: v[0] mode, v[1] LD_TAG */
	LD_INFO,	/* v[0] samples, v[1] sample size, v[2] hash, addr: krdma
			 * listener; then the checksums, v[0] x 8 bytes */
	LD_CONNECTED,	/* client: addr: its krdma connection's local address */
	LD_TOKEN,	/* server: the dataset's window, token */
	LD_REQ,		/* client (TCP): v[0] indices follow, 8 bytes each */
	LD_DONE,	/* client: v[0] samples, v[1] bytes, v[2] wrong, v[3] ns */
	LD_REFUSE,	/* server: text says why */
};

#define K_READ		1ULL	/* cookie: READ into sample slot I */

const char *const ex_prog = PROG;

struct opts {
	bool tcp, json, inject;
	unsigned int timeout_s;
	/* server */
	const char *serve;		/* the dataset */
	uint64_t sample;		/* -s */
	char listen[300];		/* ADDR:PORT */
	unsigned int clients;		/* exit after so many; 0 never */
	/* client */
	char host[256];
	unsigned int port;
	unsigned int batch, depth;
	uint64_t batches;		/* -n */
	double duration;		/* -d, seconds */
	uint64_t seed;
	bool have_seed;
};

static struct opts o;

static void __printf(1, 2) __noreturn die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/*
 * XXH64 (https://github.com/Cyan4973/xxHash, doc/xxhash_spec.md)
 */

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static uint64_t rotl(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t xround(uint64_t acc, uint64_t in)
{
	return rotl(acc + in * P2, 31) * P1;
}

static uint64_t xmerge(uint64_t acc, uint64_t v)
{
	return (acc ^ xround(0, v)) * P1 + P4;
}

static uint64_t xxh64(const void *buf, uint64_t len)
{
	const uint8_t *p = buf, *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = -P1;

		do {
			v1 = xround(v1, rd64(p));
			v2 = xround(v2, rd64(p + 8));
			v3 = xround(v3, rd64(p + 16));
			v4 = xround(v4, rd64(p + 24));
			p += 32;
		} while (p + 32 <= end);
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
		h = xmerge(h, v1);
		h = xmerge(h, v2);
		h = xmerge(h, v3);
		h = xmerge(h, v4);
	} else {
		h = P5;
	}
	h += len;
	for (; p + 8 <= end; p += 8)
		h = rotl(h ^ xround(0, rd64(p)), 27) * P1 + P4;
	if (p + 4 <= end) {
		h = rotl(h ^ (rd32(p) * P1), 23) * P2 + P3;
		p += 4;
	}
	for (; p < end; p++)
		h = rotl(h ^ (*p * P5), 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	return h ^ (h >> 32);
}

/* splitmix64: the dataset's words and the clients' random indices */
static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* --make-dataset: word w (8 bytes, little-endian) is mix64(w) */
static int make_dataset(const char *path, uint64_t size)
{
	static uint64_t chunk[1 << 17];		/* 1 MiB */
	uint64_t done = 0, w = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		die("cannot create %s: %s", path, strerror(errno));
	while (done < size) {
		uint64_t n = size - done < sizeof(chunk) ? size - done : sizeof(chunk);
		size_t i, off = 0;

		for (i = 0; i < (n + 7) / 8; i++)
			chunk[i] = htole64(mix64(w++));
		while (off < n) {
			ssize_t r = write(fd, (uint8_t *)chunk + off, n - off);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				die("cannot write %s: %s", path, strerror(errno));
			off += r;
		}
		done += n;
	}
	if (fsync(fd) && errno != EINVAL)
		die("cannot write %s: %s", path, strerror(errno));
	close(fd);
	printf("%s: %" PRIu64 " bytes written\n", path, size);
	return 0;
}

/* host:port or [v6]:port */
static int split_hostport(const char *s, char *host, size_t hlen, unsigned int *port)
{
	const char *colon = strrchr(s, ':');
	size_t n;
	long l;

	if (!colon || parse_int(colon + 1, 1, 65535, &l))
		return -1;
	n = colon - s;
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if (!n || n >= hlen)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	*port = l;
	return 0;
}

static bool same_addr(const struct krdma_addr *a, const struct krdma_addr *b)
{
	return a->family == b->family && a->port == b->port &&
	       !memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16);
}

/*
 * The server
 */

struct server {
	int fd;				/* the dataset file */
	const uint8_t *map;
	uint64_t nsamples, size;
	uint64_t *sums;			/* little-endian, as sent */
	int kfd;
	uint32_t listener, buf_h;
	struct krdma_addr kaddr;	/* where the krdma listener is */
	char info[128];			/* "rxe0 RoCE" once known */
	pthread_mutex_t lock;		/* the pool, the counters, stdout */
	struct {
		uint32_t conn;
		struct krdma_addr peer;
	} pool[LD_POOL];
	int npool;
	unsigned int started, finished, failed;
};

static struct server S;

struct client_ctx {
	int sock;
	unsigned int id;
	char peer[64];
};

static void __printf(2, 3) slog(const struct client_ctx *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&S.lock);
	if (o.json) {
		pthread_mutex_unlock(&S.lock);
		return;
	}
	printf("client %u (%s): ", c->id, c->peer);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&S.lock);
}

static void refuse_client(const struct client_ctx *c, const char *text)
{
	struct rv_msg m;

	memset(&m, 0, sizeof(m));
	m.type = LD_REFUSE;
	snprintf(m.text, sizeof(m.text), "%s", text);
	rv_send(c->sock, &m);
	slog(c, "refused: %s", text);
}

/* The connection whose peer is @want: from the pool, or accepted */
static int take_conn(const struct krdma_addr *want, uint32_t *conn)
{
	uint64_t deadline = now_ns() + o.timeout_s * 1000000000ULL;
	struct krdma_conn_query q;
	int i, ret;

	pthread_mutex_lock(&S.lock);
	for (;;) {
		for (i = 0; i < S.npool; i++) {
			if (!same_addr(&S.pool[i].peer, want))
				continue;
			*conn = S.pool[i].conn;
			S.pool[i] = S.pool[--S.npool];
			pthread_mutex_unlock(&S.lock);
			return 0;
		}
		if (now_ns() >= deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		ret = krdma_accept_conn(S.kfd, S.listener, 0, 200, conn);
		if (ret == -ETIMEDOUT || ret == -EINTR)
			continue;
		if (ret)
			break;
		if (krdma_conn_info(S.kfd, *conn, &q)) {
			krdma_destroy_handle(S.kfd, *conn);
			continue;
		}
		if (S.npool == LD_POOL) {	/* the oldest was nobody's */
			krdma_destroy_handle(S.kfd, S.pool[0].conn);
			S.pool[0] = S.pool[--S.npool];
		}
		S.pool[S.npool].conn = *conn;
		S.pool[S.npool++].peer = q.peer;
	}
	pthread_mutex_unlock(&S.lock);
	return ret;
}

/* TCP: serve the client's batches until it says DONE or goes */
static int serve_tcp(struct client_ctx *c, struct rv_msg *done)
{
	uint64_t *idx = NULL, samples = 0;
	uint8_t *out = NULL;
	uint64_t cap = 0;
	struct rv_msg m;
	int ret;

	memset(&m, 0, sizeof(m));
	for (;;) {
		uint64_t k, i;

		ret = rv_read(c->sock, &m, UINT64_MAX);
		if (ret || m.type != LD_REQ)
			break;
		k = m.v[0];
		if (!k || k > LD_MAX_BATCH) {
			refuse_client(c, "a batch of 1 to 4096 samples");
			ret = -EPROTO;
			break;
		}
		if (k > cap) {
			free(idx);
			free(out);
			idx = malloc(k * 8);
			out = malloc(k * S.size);
			if (!idx || !out) {
				refuse_client(c, "the server is out of memory");
				ret = -ENOMEM;
				break;
			}
			cap = k;
		}
		ret = recv_all(c->sock, idx, k * 8, now_ns() + o.timeout_s * 1000000000ULL);
		if (ret)
			break;
		for (i = 0; i < k; i++) {
			uint64_t off = 0, s = le64toh(idx[i]);

			if (s >= S.nsamples) {
				refuse_client(c, "a sample index past the dataset");
				ret = -EPROTO;
				goto out;
			}
			while (off < S.size) {
				ssize_t r = pread(S.fd, out + i * S.size + off,
						  S.size - off, s * S.size + off);

				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					refuse_client(c, "the server cannot read the dataset");
					ret = r < 0 ? -errno : -EIO;
					goto out;
				}
				off += r;
			}
		}
		ret = send_all(c->sock, out, k * S.size);
		if (ret)
			break;
		samples += k;
	}
out:
	free(idx);
	free(out);
	*done = m;
	if (!ret && m.type == LD_DONE)
		return 0;
	slog(c, "gone after %" PRIu64 " samples served%s%s", samples,
	     ret ? ": " : "", ret ? strerror(-ret) : "");
	return -1;
}

static void *client_thread(void *arg)
{
	struct client_ctx *c = arg;
	uint32_t conn = 0, grant = 0;
	bool have_conn = false, have_grant = false;
	struct rv_msg m, done;
	int ret, ok = -1;

	memset(&done, 0, sizeof(done));
	ret = rv_read(c->sock, &m, now_ns() + o.timeout_s * 1000000000ULL);
	if (ret || m.type != LD_HELLO || m.v[1] != LD_TAG) {
		slog(c, "not a client of " PROG);
		goto out;
	}
	if (m.v[0] != o.tcp) {
		refuse_client(c, o.tcp ? "this server serves over TCP (-m tcp)" :
			      "this server serves over krdma (not -m tcp)");
		goto out;
	}
	memset(&m, 0, sizeof(m));
	m.type = LD_INFO;
	m.v[0] = S.nsamples;
	m.v[1] = S.size;
	m.v[2] = LD_HASH_XXH64;
	m.addr = S.kaddr;
	snprintf(m.text, sizeof(m.text), "%s", S.info);
	if (rv_send(c->sock, &m) || send_all(c->sock, S.sums, S.nsamples * 8))
		goto gone;

	if (o.tcp) {
		slog(c, "serving by pread() and send()");
		ok = serve_tcp(c, &done);
		goto out;
	}
	ret = rv_read(c->sock, &m, now_ns() + o.timeout_s * 1000000000ULL);
	if (ret || m.type != LD_CONNECTED)
		goto gone;
	ret = take_conn(&m.addr, &conn);
	if (ret) {
		refuse_client(c, "the server saw no krdma connection from this client");
		goto out;
	}
	have_conn = true;
	memset(&m, 0, sizeof(m));
	m.type = LD_TOKEN;
	ret = krdma_grant_window(S.kfd, conn, S.buf_h, 0, S.nsamples * S.size,
				 KRDMA_ACCESS_REMOTE_READ, &grant, &m.token);
	if (ret) {
		char why[160];

		snprintf(why, sizeof(why), "the server cannot grant the dataset: %s; %s",
			 strerror(-ret), krdma_cmd_strerror_hint(KRDMA_IOC_GRANT, ret) ?: "");
		refuse_client(c, why);
		goto out;
	}
	have_grant = true;
	if (rv_send(c->sock, &m))
		goto gone;
	slog(c, "serving by RDMA READ: the dataset granted, REMOTE_READ");
	/* the client READs alone; it says DONE, or its socket closes */
	ret = rv_read(c->sock, &done, UINT64_MAX);
	if (!ret && done.type == LD_DONE) {
		ok = 0;
		goto out;
	}
gone:
	slog(c, "gone (its connection closed)");
out:
	if (!ok)
		slog(c, "done: %" PRIu64 " samples, %" PRIu64 " bytes in %.3f s, %" PRIu64 " wrong",
		     (uint64_t)done.v[0], (uint64_t)done.v[1], done.v[3] / 1e9,
		     (uint64_t)done.v[2]);
	if (have_grant)
		krdma_destroy_handle(S.kfd, grant);	/* revoke */
	if (have_conn) {
		krdma_disconnect_conn(S.kfd, conn);
		krdma_destroy_handle(S.kfd, conn);
	}
	close(c->sock);
	pthread_mutex_lock(&S.lock);
	S.finished++;
	if (ok || done.v[2])
		S.failed++;
	pthread_mutex_unlock(&S.lock);
	free(c);
	return NULL;
}

static int run_server(void)
{
	struct sockaddr_storage ss;
	struct krdma_addr local, bound;
	struct stat st;
	socklen_t len;
	uint64_t i, t0;
	int ls, one = 1, ret;
	char host[256], as[64];
	unsigned int port;

	if (split_hostport(o.listen, host, sizeof(host), &port))
		return bad("--listen: ADDR:PORT, not '%s'", o.listen);
	S.fd = open(o.serve, O_RDONLY | O_CLOEXEC);
	if (S.fd < 0)
		die("cannot open the dataset %s: %s", o.serve, strerror(errno));
	if (fstat(S.fd, &st))
		die("cannot stat %s: %s", o.serve, strerror(errno));
	S.size = o.sample;
	S.nsamples = (uint64_t)st.st_size / S.size;
	if (!S.nsamples)
		die("%s: %" PRIu64 " bytes, less than one sample of %" PRIu64,
		    o.serve, (uint64_t)st.st_size, S.size);
	if (S.nsamples > LD_MAX_SAMPLES)
		die("%s: %" PRIu64 " samples, more than %llu: use larger samples",
		    o.serve, S.nsamples, LD_MAX_SAMPLES);
	/* read-only and shared: the file's own pages, never copied */
	S.map = mmap(NULL, S.nsamples * S.size, PROT_READ, MAP_SHARED, S.fd, 0);
	if (S.map == MAP_FAILED)
		die("cannot map %s: %s", o.serve, strerror(errno));
	S.sums = malloc(S.nsamples * 8);
	if (!S.sums)
		die("out of memory");
	t0 = now_ns();
	for (i = 0; i < S.nsamples; i++)
		S.sums[i] = htole64(xxh64(S.map + i * S.size, S.size));
	if (!o.json)
		printf("# %s: %s: %" PRIu64 " samples of %" PRIu64 " bytes, XXH64 of each in %.3f s\n",
		       PROG, o.serve, S.nsamples, S.size, (now_ns() - t0) / 1e9);

	if (resolve(host, port, &ss, &len))
		die("cannot resolve %s", host);
	ls = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ls < 0)
		die("socket: %s", strerror(errno));
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&ss, len) || listen(ls, 128))
		die("cannot listen on %s: %s", o.listen, strerror(errno));
	sa_to_addr(&ss, &local);

	if (!o.tcp) {
		struct rv dummy = { .rank = 0, .root_sock = -1 };

		/* errors of these exit (no rendezvous: rank 0 alone) */
		S.kfd = krdma_start(&dummy);
		local.port = 0;
		ret = krdma_listen_on(S.kfd, &local, 128, &S.listener, &bound);
		if (ret)
			die("cannot listen on %s with krdma: %s; %s",
			    krdma_addr_str(&local, as, sizeof(as)), strerror(-ret),
			    krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN, ret) ?: "");
		S.kaddr = bound;
		/* REMOTE_READ only: a read-only buffer, in a read-only mapping */
		ret = krdma_buf_register(S.kfd, (void *)S.map, S.nsamples * S.size,
					 KRDMA_ACCESS_REMOTE_READ, &S.buf_h);
		if (ret)
			die("cannot register the dataset (%" PRIu64 " bytes): %s%s%s",
			    S.nsamples * S.size, strerror(-ret),
			    krdma_conn_strerror_hint(ret) ? "; " : "",
			    krdma_conn_strerror_hint(ret) ?: "");
	}
	if (!o.json) {
		printf("# serving %s on %s", o.tcp ? "over TCP" : "by RDMA READ",
		       o.listen);
		if (!o.tcp)
			printf(" (krdma listener %s)", krdma_addr_str(&S.kaddr, as, sizeof(as)));
		if (o.clients)
			printf(", until %u clients are done", o.clients);
		printf("\n");
		fflush(stdout);
	}

	for (;;) {
		struct pollfd pfd = { .fd = ls, .events = POLLIN };
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct client_ctx *c;
		struct krdma_addr pa;
		pthread_t th;
		int s;

		pthread_mutex_lock(&S.lock);
		if (o.clients && S.finished >= o.clients) {
			pthread_mutex_unlock(&S.lock);
			break;
		}
		pthread_mutex_unlock(&S.lock);
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		s = accept4(ls, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
		if (s < 0)
			continue;
		pthread_mutex_lock(&S.lock);
		if (o.clients && S.started >= o.clients) {
			pthread_mutex_unlock(&S.lock);
			close(s);
			continue;
		}
		S.started++;
		pthread_mutex_unlock(&S.lock);
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c)
			die("out of memory");
		c->sock = s;
		c->id = S.started;
		sa_to_addr(&peer, &pa);
		krdma_addr_str(&pa, c->peer, sizeof(c->peer));
		if (pthread_create(&th, NULL, client_thread, c))
			die("cannot start a thread: %s", strerror(errno));
		pthread_detach(th);
	}
	if (o.json)
		printf("{\"program\": \"%s\", \"role\": \"server\", \"mode\": \"%s\", \"samples\": %" PRIu64 ", \"sample_bytes\": %" PRIu64 ", \"clients\": %u, \"failed\": %u}\n",
		       PROG, o.tcp ? "tcp" : "krdma", S.nsamples, S.size, S.finished,
		       S.failed);
	else
		printf("# %s: %u clients served, %u failed\n", PROG, S.finished, S.failed);
	fflush(stdout);
	/* close() revokes what is left, unpins the dataset */
	return S.failed ? 1 : 0;
}

/*
 * The client
 */

struct client {
	int sock, kfd;
	uint32_t conn, buf_h;
	struct krdma_token tok;
	uint64_t nsamples, size;
	uint64_t *sums;
	uint8_t *buf;			/* depth slots of batch samples */
	uint64_t *idx;			/* per sample slot: its index */
	unsigned int *left;		/* per batch slot: READs to complete */
	bool *busy;			/* per batch slot: in flight */
	uint64_t rng;
	char server[300];		/* "198.18.0.1:29600" */
	char info[128];
	char phase[96];
	/* counts */
	uint64_t issued, verified, wrong;
	char first_wrong[200];
};

static struct client C;

/* The server's control connection: did it close (the server died)? */
static bool server_closed(unsigned int wait_ms)
{
	struct pollfd pfd = { .fd = C.sock, .events = POLLIN };
	char b[sizeof(struct rv_msg)];
	ssize_t r;

	if (poll(&pfd, 1, wait_ms) <= 0)
		return false;
	r = recv(C.sock, b, sizeof(b), MSG_DONTWAIT | MSG_PEEK);
	return r == 0 || (r < 0 && errno == ECONNRESET);
}

static void __noreturn server_gone(void)
{
	die("aborted: the server at %s is gone: its process exited or was killed (its connection closed) during %s",
	    C.server, C.phase);
}

/* A failure: the server's death if its connection closes soon, else @why */
static void __printf(1, 2) __noreturn client_fail(const char *fmt, ...)
{
	char why[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (server_closed(LD_GRACE_MS))
		server_gone();
	die("aborted: the server at %s: %s, during %s", C.server, why, C.phase);
}

/* A message from the server, or the reason it sent none */
static void server_msg(struct rv_msg *m, int type)
{
	int ret = rv_read(C.sock, m, now_ns() + o.timeout_s * 1000000000ULL);

	if (ret == -EPIPE)
		server_gone();
	if (ret == -ETIMEDOUT)
		die("aborted: no answer from the server at %s within %u s during %s",
		    C.server, o.timeout_s, C.phase);
	if (ret)
		die("aborted: the server at %s: %s", C.server, strerror(-ret));
	if (m->type == LD_REFUSE)
		die("aborted: the server at %s refused: %s", C.server, m->text);
	if (m->type != type)
		die("aborted: the server at %s sent message %u, not %u", C.server,
		    m->type, type);
}

static uint64_t next_index(void)
{
	return mix64(C.rng++) % C.nsamples;
}

/* Verify the samples of batch slot @b (its indices in C.idx) */
static void verify_batch(unsigned int b, uint64_t batch_no)
{
	unsigned int j;

	/* one byte wrong: the check must catch it */
	if (o.inject && batch_no == 0)
		C.buf[(uint64_t)b * o.batch * C.size] ^= 0x5a;
	for (j = 0; j < o.batch; j++) {
		uint64_t k = (uint64_t)b * o.batch + j, s = C.idx[k];
		uint64_t h = xxh64(C.buf + k * C.size, C.size);

		C.verified++;
		if (h == le64toh(C.sums[s]))
			continue;
		if (!C.wrong++)
			snprintf(C.first_wrong, sizeof(C.first_wrong),
				 "sample %" PRIu64 " (batch %" PRIu64 "): XXH64 %016" PRIx64 ", the server's %016" PRIx64,
				 s, batch_no, h, (uint64_t)le64toh(C.sums[s]));
	}
}

static bool more_batches(uint64_t issued, uint64_t t0)
{
	if (o.duration > 0)
		return now_ns() - t0 < (uint64_t)(o.duration * 1e9);
	return issued < o.batches;
}

static void krdma_issue(unsigned int b)
{
	struct krdma_op ops[256];
	unsigned int j, n = 0;

	C.left[b] = o.batch;
	C.busy[b] = true;
	for (j = 0; j < o.batch; j++) {
		uint64_t k = (uint64_t)b * o.batch + j;
		struct krdma_op *op = &ops[n++];

		C.idx[k] = next_index();
		memset(op, 0, sizeof(*op));
		op->opcode = KRDMA_OP_READ;
		op->cookie = COOKIE(K_READ, k);
		op->conn = C.conn;
		op->num_sge = 1;
		op->sge.buf = C.buf_h;
		op->sge.offset = k * C.size;
		op->sge.length = C.size;
		op->remote = C.tok;
		op->remote_offset = C.idx[k] * C.size;
		if (n == ARRAY_SIZE(ops) || j + 1 == o.batch) {
			struct krdma_op *p = ops;
			char buf[96];
			int ret = submit_wait(C.kfd, &p, &n);

			if (ret)
				client_fail("READ refused: %s%s", strerror(-ret),
					    conn_why(C.kfd, C.conn, buf, sizeof(buf)));
			n = 0;
		}
	}
}

static void run_krdma(uint64_t *elapsed)
{
	struct krdma_completion wc[64];
	uint64_t t0, last = now_ns(), done_batches = 0;
	unsigned int b, inflight = 0;
	int n, i;

	t0 = now_ns();
	for (b = 0; b < o.depth && more_batches(C.issued, t0); b++) {
		krdma_issue(b);
		C.issued++;
		inflight++;
	}
	while (inflight) {
		snprintf(C.phase, sizeof(C.phase), "batch %" PRIu64, done_batches + 1);
		n = krdma_poll_wc(C.kfd, wc, ARRAY_SIZE(wc), 0);
		if (n < 0 && n != -EINTR)
			die("cannot poll the completions: %s", strerror(-n));
		for (i = 0; i < n; i++) {
			uint64_t k = CINDEX(wc[i].cookie);
			char buf[96];

			if (wc[i].status != KRDMA_WC_SUCCESS)
				client_fail("READ of sample %" PRIu64 " failed: %s%s",
					    C.idx[k], krdma_wc_status_str(wc[i].status),
					    conn_why(C.kfd, C.conn, buf, sizeof(buf)));
			b = k / o.batch;
			if (--C.left[b])
				continue;
			verify_batch(b, done_batches++);
			inflight--;
			C.busy[b] = false;
			if (more_batches(C.issued, t0)) {
				krdma_issue(b);
				C.issued++;
				inflight++;
			}
		}
		if (n > 0) {
			last = now_ns();
			continue;
		}
		if (now_ns() - last > o.timeout_s * 1000000000ULL)
			client_fail("no READ completed for %u s", o.timeout_s);
		{
			struct pollfd pfd[2] = {
				{ .fd = C.kfd, .events = POLLIN },
				{ .fd = C.sock, .events = POLLIN },
			};

			if (poll(pfd, 2, 1000) > 0 && pfd[1].revents && server_closed(0))
				server_gone();
		}
	}
	*elapsed = now_ns() - t0;
}

static void tcp_request(unsigned int b)
{
	uint64_t req[LD_MAX_BATCH];
	struct rv_msg m;
	unsigned int j;
	int ret;

	for (j = 0; j < o.batch; j++) {
		C.idx[(uint64_t)b * o.batch + j] = next_index();
		req[j] = htole64(C.idx[(uint64_t)b * o.batch + j]);
	}
	memset(&m, 0, sizeof(m));
	m.type = LD_REQ;
	m.v[0] = o.batch;
	ret = rv_send(C.sock, &m);
	if (!ret)
		ret = send_all(C.sock, req, o.batch * 8ULL);
	/* a reset or closed connection: the server went (its answers may
	 * still wait unread, so the socket does not read as closed) */
	if (ret == -EPIPE || ret == -ECONNRESET)
		server_gone();
	if (ret)
		die("aborted: cannot send to the server at %s: %s", C.server,
		    strerror(-ret));
}

static void run_tcp(uint64_t *elapsed)
{
	uint64_t t0 = now_ns(), done_batches = 0;
	unsigned int b = 0, inflight = 0, next = 0;

	while (inflight < o.depth && more_batches(C.issued, t0)) {
		tcp_request(next);
		next = (next + 1) % o.depth;
		C.issued++;
		inflight++;
	}
	/* the answers come in the order of the requests */
	while (inflight) {
		int ret;

		snprintf(C.phase, sizeof(C.phase), "batch %" PRIu64, done_batches + 1);
		ret = recv_all(C.sock, C.buf + (uint64_t)b * o.batch * C.size,
			       o.batch * C.size, now_ns() + o.timeout_s * 1000000000ULL);
		if (ret == -EPIPE)
			server_gone();
		if (ret == -ETIMEDOUT)
			die("aborted: the server at %s sent nothing for %u s during %s",
			    C.server, o.timeout_s, C.phase);
		if (ret)
			die("aborted: receiving from the server at %s: %s", C.server,
			    strerror(-ret));
		verify_batch(b, done_batches++);
		inflight--;
		b = (b + 1) % o.depth;
		if (more_batches(C.issued, t0)) {
			tcp_request(next);
			next = (next + 1) % o.depth;
			C.issued++;
			inflight++;
		}
	}
	*elapsed = now_ns() - t0;
}

/* The entries of a file's completion queue: the module's ucq_entries */
static unsigned int ring_entries(void)
{
	FILE *f = fopen("/sys/module/krdma/parameters/ucq_entries", "re");
	unsigned int n = 4096, p = 64;

	if (f) {
		if (fscanf(f, "%u", &n) != 1)
			n = 4096;
		fclose(f);
	}
	/* rounded down to a power of two, from 64 (userspace-api.rst) */
	while (p * 2 <= n && p < (1U << 20))
		p *= 2;
	return p;
}

static void krdma_client_setup(const struct rv_msg *info)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct krdma_addr dst;
	struct krdma_conn_query q;
	struct krdma_dev_query dq;
	struct rv dummy = { .rank = 0, .root_sock = -1 };
	struct rv_msg m;
	uint64_t len = (uint64_t)o.depth * o.batch * C.size;
	char as[64];
	int ret;

	snprintf(C.phase, sizeof(C.phase), "the krdma setup");
	/*
	 * Every READ in flight holds an entry of the file's completion
	 * ring until it is polled: more than the ring holds, and a SUBMIT
	 * that waits for room would wait for this very thread's POLL
	 */
	if ((uint64_t)o.depth * o.batch > ring_entries())
		die("--depth x -b: %u READs in flight, more than the %u entries of a file's completion queue (krdma's ucq_entries)",
		    o.depth * o.batch, ring_entries());
	/* the krdma listener: the server's address, the port it gave */
	if (getpeername(C.sock, (struct sockaddr *)&ss, &sl))
		die("getpeername: %s", strerror(errno));
	sa_to_addr(&ss, &dst);
	dst.port = info->addr.port;
	C.kfd = krdma_start(&dummy);
	ret = krdma_connect_to(C.kfd, &dst, 0, &C.conn);
	if (ret)
		die("aborted: cannot connect to the server's krdma listener at %s: %s; %s",
		    krdma_addr_str(&dst, as, sizeof(as)), strerror(-ret),
		    krdma_conn_strerror_hint(ret) ?: "");
	ret = krdma_conn_info(C.kfd, C.conn, &q);
	if (!ret)
		ret = krdma_dev_query(C.kfd, q.dev_index, &dq);
	if (ret)
		die("cannot query the connection: %s", strerror(-ret));
	if (!q.initiator_depth)
		die("aborted: the server at %s serves no RDMA READ on this connection (initiator depth 0)",
		    C.server);
	snprintf(C.info, sizeof(C.info), "%s %s", (const char *)dq.name,
		 krdma_transport_str(dq.transport));
	C.buf = map_buf(&dummy, C.kfd, len, KRDMA_ACCESS_LOCAL_WRITE, &C.buf_h);

	memset(&m, 0, sizeof(m));
	m.type = LD_CONNECTED;
	m.addr = q.local;
	if (rv_send(C.sock, &m))
		server_gone();
	server_msg(&m, LD_TOKEN);
	C.tok = m.token;
}

static void print_client(uint64_t elapsed)
{
	double secs = elapsed / 1e9;
	uint64_t bytes = C.verified * C.size;
	double sps = secs > 0 ? C.verified / secs : 0;
	double bps = secs > 0 ? bytes / secs : 0;

	if (o.json) {
		printf("{");
		json_str("program", PROG, true);
		json_str("role", "client", true);
		json_str("mode", o.tcp ? "tcp" : "krdma", true);
		json_str("server", C.server, true);
		json_str("info", C.info, true);
		json_str("checksum", "xxh64", true);
		printf("\"dataset_samples\": %" PRIu64 ", \"sample_bytes\": %" PRIu64 ", \"batch\": %u, \"depth\": %u, \"seed\": %" PRIu64 ", ",
		       C.nsamples, C.size, o.batch, o.depth, o.seed);
		printf("\"batches\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"time_s\": %.6f, \"samples_per_s\": %.3f, \"bytes_per_s\": %.1f, \"wrong\": %" PRIu64 ", \"verified\": %s}\n",
		       C.issued, C.verified, bytes, secs, sps, bps, C.wrong,
		       C.wrong ? "false" : "true");
	} else {
		printf("# %s: client of %s over %s (%s)\n", PROG, C.server,
		       o.tcp ? "TCP" : "krdma, RDMA READ", C.info);
		printf("# dataset: %" PRIu64 " samples of %" PRIu64 " bytes, XXH64 checksums from the server; batches of %u, %u in flight, seed %" PRIu64 "\n",
		       C.nsamples, C.size, o.batch, o.depth, o.seed);
		printf("# %10s %12s %14s %10s %12s %10s %8s %8s\n", "batches", "samples",
		       "bytes", "time(s)", "samples/s", "MB/s", "#wrong", "verified");
		printf("  %10" PRIu64 " %12" PRIu64 " %14" PRIu64 " %10.3f %12.1f %10.1f %8" PRIu64 " %8s\n",
		       C.issued, C.verified, bytes, secs, sps, bps / 1e6, C.wrong,
		       C.wrong ? "NO" : "yes");
		printf("# %s: %s\n", PROG, C.wrong ? "WRONG SAMPLES (see above)" :
		       "every sample verified");
	}
	fflush(stdout);
}

static int run_client(void)
{
	uint64_t elapsed = 0, len;
	struct rv_msg m;
	int ret;

	snprintf(C.server, sizeof(C.server), "%s:%u", o.host, o.port);
	snprintf(C.phase, sizeof(C.phase), "the connection to the server");
	C.sock = C.kfd = -1;
	ret = tcp_connect(o.host, o.port, o.timeout_s, &C.sock);
	if (ret == -EADDRNOTAVAIL)
		die("cannot resolve %s", o.host);
	if (ret == -ETIMEDOUT)
		die("aborted: no server listens at %s (waited %u s)", C.server,
		    o.timeout_s);
	if (ret)
		die("aborted: cannot reach the server at %s: %s", C.server,
		    strerror(-ret));
	memset(&m, 0, sizeof(m));
	m.type = LD_HELLO;
	m.v[0] = o.tcp;
	m.v[1] = LD_TAG;
	if (rv_send(C.sock, &m))
		server_gone();
	server_msg(&m, LD_INFO);
	C.nsamples = m.v[0];
	C.size = m.v[1];
	if (m.v[2] != LD_HASH_XXH64 || !C.nsamples || C.nsamples > LD_MAX_SAMPLES ||
	    !C.size || C.size > LD_MAX_SAMPLE)
		die("aborted: the server at %s describes its dataset so: %" PRIu64 " samples of %" PRIu64 " bytes, hash %" PRIu64,
		    C.server, C.nsamples, C.size, (uint64_t)m.v[2]);
	if (o.sample && o.sample != C.size)
		die("aborted: the server at %s serves samples of %" PRIu64 " bytes, not %" PRIu64 " (-s)",
		    C.server, C.size, o.sample);
	C.sums = malloc(C.nsamples * 8);
	C.idx = calloc((uint64_t)o.depth * o.batch, sizeof(*C.idx));
	C.left = calloc(o.depth, sizeof(*C.left));
	C.busy = calloc(o.depth, sizeof(*C.busy));
	if (!C.sums || !C.idx || !C.left || !C.busy)
		die("out of memory");
	snprintf(C.phase, sizeof(C.phase), "the checksums");
	ret = recv_all(C.sock, C.sums, C.nsamples * 8,
		       now_ns() + o.timeout_s * 1000000000ULL);
	if (ret == -EPIPE)
		server_gone();
	if (ret)
		die("aborted: the checksums from the server at %s: %s", C.server,
		    strerror(-ret));
	C.rng = o.seed;
	len = (uint64_t)o.depth * o.batch * C.size;
	if (o.tcp) {
		snprintf(C.info, sizeof(C.info), "pread + send");
		C.buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (C.buf == MAP_FAILED)
			die("cannot allocate %" PRIu64 " bytes", len);
		run_tcp(&elapsed);
	} else {
		krdma_client_setup(&m);
		run_krdma(&elapsed);
	}
	/* tell the server; it revokes the grant and disconnects */
	memset(&m, 0, sizeof(m));
	m.type = LD_DONE;
	m.v[0] = C.verified;
	m.v[1] = C.verified * C.size;
	m.v[2] = C.wrong;
	m.v[3] = elapsed;
	rv_send(C.sock, &m);
	if (C.wrong)
		fprintf(stderr, PROG ": %" PRIu64 " wrong samples; the first: %s\n",
			C.wrong, C.first_wrong);
	print_client(elapsed);
	/* close() ends the connection and unpins the buffer */
	if (C.kfd >= 0)
		close(C.kfd);
	close(C.sock);
	return C.wrong ? 1 : 0;
}

/*
 * Options
 */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " --make-dataset PATH SIZE\n"
		"       " PROG " --serve PATH -s SIZE [--listen ADDR:PORT] [OPTIONS]\n"
		"       " PROG " --server ADDR:PORT [-b N] [-n N | -d SECS] [OPTIONS]\n"
		"Data loading: a server exports a dataset file read-only and publishes the\n"
		"XXH64 of each sample; clients fetch random batches of samples by RDMA READ\n"
		"(krdma) or over TCP (-m tcp: the server pread()s and sends), verify every\n"
		"sample, and print samples/s and bytes/s.\n\n"
		"  --make-dataset PATH SIZE  write a deterministic dataset of SIZE bytes\n"
		"Server:\n"
		"  --serve PATH         the dataset file\n"
		"  -s, --sample SIZE    bytes of a sample (K, M, G); the file holds\n"
		"                       size / SIZE samples\n"
		"  --listen ADDR:PORT   control address (default 0.0.0.0:%d); the krdma\n"
		"                       listener takes the same address (ADDR must be on\n"
		"                       the RDMA device for krdma)\n"
		"  --clients N          exit once N clients are done (default: never);\n"
		"                       exit status 1 if one failed or saw a wrong sample\n"
		"Client:\n"
		"  --server ADDR:PORT   the server's control address\n"
		"  -b, --batch N        samples per batch, 1 to %d (default 32)\n"
		"  -n, --batches N      batches to fetch (default 100)\n"
		"  -d, --duration SECS  fetch for SECS seconds instead\n"
		"  --depth D            batches in flight, 1 to %d (default 2); over\n"
		"                       krdma, D x N READs must fit the completion queue\n"
		"                       (ucq_entries, 4096 by default)\n"
		"  --seed S             of the random indices (default: time and pid)\n"
		"  -s, --sample SIZE    check that the server's samples are SIZE bytes\n"
		"  --inject-error       for tests: change one byte of the first sample\n"
		"                       received; it must be reported wrong\n"
		"Both:\n"
		"  -m, --mode MODE      krdma (default) or tcp (--tcp: -m tcp)\n"
		"  -t, --timeout SECS   give up after SECS without progress (default %d)\n"
		"  -j, --json           print JSON\n"
		"  -h, --help\n\n"
		"Exit status: 0 every sample verified, 1 a wrong sample or a failure,\n"
		"2 bad usage.\n",
		LD_DEF_PORT, LD_MAX_BATCH, LD_MAX_DEPTH, LD_DEF_TIMEOUT_S);
}

static int parse_opts(int argc, char *argv[])
{
	static const struct option lo[] = {
		{ "make-dataset", required_argument, NULL, 'M' },
		{ "serve", required_argument, NULL, 'S' },
		{ "sample", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'L' },
		{ "clients", required_argument, NULL, 'C' },
		{ "server", required_argument, NULL, 'c' },
		{ "batch", required_argument, NULL, 'b' },
		{ "batches", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "depth", required_argument, NULL, 'D' },
		{ "seed", required_argument, NULL, 'E' },
		{ "inject-error", no_argument, NULL, 'X' },
		{ "mode", required_argument, NULL, 'm' },
		{ "tcp", no_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *make = NULL, *server = NULL;
	uint64_t size;
	char *end;
	long l;
	int c;

	o.batch = 32;
	o.batches = 100;
	o.depth = 2;
	o.timeout_s = LD_DEF_TIMEOUT_S;
	snprintf(o.listen, sizeof(o.listen), "0.0.0.0:%d", LD_DEF_PORT);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:b:n:d:m:t:jh", lo, NULL)) != -1) {
		switch (c) {
		case 'M':
			make = optarg;
			break;
		case 'S':
			o.serve = optarg;
			break;
		case 's':
			if (parse_size(optarg, &o.sample) || !o.sample ||
			    o.sample > LD_MAX_SAMPLE)
				return bad("-s: a size from 1 to 1G, not '%s'", optarg);
			break;
		case 'L':
			snprintf(o.listen, sizeof(o.listen), "%s", optarg);
			break;
		case 'C':
			if (parse_int(optarg, 1, LD_MAX_CLIENTS, &l))
				return bad("--clients: 1 to %d, not '%s'", LD_MAX_CLIENTS, optarg);
			o.clients = l;
			break;
		case 'c':
			server = optarg;
			break;
		case 'b':
			if (parse_int(optarg, 1, LD_MAX_BATCH, &l))
				return bad("-b: 1 to %d samples, not '%s'", LD_MAX_BATCH, optarg);
			o.batch = l;
			break;
		case 'n':
			if (parse_size(optarg, &o.batches) || !o.batches)
				return bad("-n: a number of batches, not '%s'", optarg);
			break;
		case 'd':
			errno = 0;
			o.duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o.duration > 0) ||
			    o.duration > 86400)
				return bad("-d: seconds, more than 0 and at most 86400, not '%s'",
					   optarg);
			break;
		case 'D':
			if (parse_int(optarg, 1, LD_MAX_DEPTH, &l))
				return bad("--depth: 1 to %d, not '%s'", LD_MAX_DEPTH, optarg);
			o.depth = l;
			break;
		case 'E':
			if (parse_size(optarg, &o.seed))
				return bad("--seed: a number, not '%s'", optarg);
			o.have_seed = true;
			break;
		case 'X':
			o.inject = true;
			break;
		case 'm':
			if (!strcmp(optarg, "tcp"))
				o.tcp = true;
			else if (strcmp(optarg, "krdma"))
				return bad("--mode: krdma or tcp, not '%s'", optarg);
			break;
		case 'T':
			o.tcp = true;
			break;
		case 't':
			if (parse_int(optarg, 1, 86400, &l))
				return bad("-t: 1 to 86400 seconds, not '%s'", optarg);
			o.timeout_s = l;
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			return bad("option '%s' needs a value", argv[optind - 1]);
		default:
			return bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!!make + !!o.serve + !!server != 1)
		return bad("one of --make-dataset, --serve and --server");
	if (make) {
		if (optind + 1 != argc || parse_size(argv[optind], &size) || !size)
			return bad("--make-dataset PATH SIZE: a size in bytes (K, M, G)");
		exit(make_dataset(make, size));
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (o.serve && !o.sample)
		return bad("--serve: the sample size, -s SIZE, is needed");
	if (server && split_hostport(server, o.host, sizeof(o.host), &o.port))
		return bad("--server: ADDR:PORT, not '%s'", server);
	if (!o.have_seed)
		o.seed = (uint64_t)now_ns() ^ (uint64_t)getpid() << 32;
	return 0;
}

int main(int argc, char *argv[])
{
	int ret = parse_opts(argc, argv);

	if (ret)
		return ret;
	signal(SIGPIPE, SIG_IGN);
	raise_memlock();
	if (o.serve) {
		pthread_mutex_init(&S.lock, NULL);
		S.kfd = -1;
		return run_server();
	}
	return run_client();
}
