// SPDX-License-Identifier: GPL-2.0
/*
 * What the workload examples share (common.h): the rendezvous, addresses,
 * options, JSON.
 *
 * The rendezvous: rank 0 listens on the address given (--root, or
 * MASTER_ADDR:MASTER_PORT), every other rank connects to it; rank 0
 * gathers and broadcasts. It is also how a dead rank is named: its
 * socket closes (its process exited) without a word, and rank 0 tells
 * everyone which rank it was.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void say(const struct rv *v, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", ex_prog);
	if (v->n)		/* not a rank: krdma-load */
		fprintf(stderr, "rank %d: ", v->rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int rv_init(struct rv *v, int rank, int n)
{
	v->rank = rank;
	v->n = n;
	v->root_sock = -1;
	v->all = calloc(n, sizeof(*v->all));
	return v->all ? 0 : -ENOMEM;
}

/*
 * Rendezvous
 */

int send_all(int sock, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t w = send(sock, p + done, len - done, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		done += w;
	}
	return 0;
}

int rv_send(int sock, struct rv_msg *m)
{
	m->magic = RV_MAGIC;
	m->version = RV_VERSION;
	return send_all(sock, m, sizeof(*m));
}
int recv_all(int sock, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < len) {
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		uint64_t t = now_ns(), left = t >= deadline ? 0 : deadline - t;
		/* a second at a time: a far deadline (UINT64_MAX) fits an int */
		int ms = left > 1000000000ULL ? 1000 : (int)(left / 1000000) + !!left;
		ssize_t r;

		if (poll(&pfd, 1, ms) == 0) {
			if (now_ns() >= deadline)
				return -ETIMEDOUT;
			continue;
		}
		r = recv(sock, p + done, len - done, MSG_DONTWAIT);
		if (r == 0)
			return -EPIPE;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		done += r;
	}
	return 0;
}

int rv_read(int sock, struct rv_msg *m, uint64_t deadline)
{
	int ret = recv_all(sock, m, sizeof(*m), deadline);

	if (ret)
		return ret;
	if (m->magic != RV_MAGIC || m->version != RV_VERSION)
		return -EPROTO;
	m->text[sizeof(m->text) - 1] = '\0';
	return 0;
}
/* Rank 0: the verdict to everyone still there, then exit */
static void __noreturn root_verdict(struct rv *v, int blame, const char *text)
{
	struct rv_msg m;
	int i;

	memset(&m, 0, sizeof(m));
	m.type = RV_VERDICT;
	m.blame = blame;
	snprintf(m.text, sizeof(m.text), "%s", text);
	for (i = 1; i < v->n; i++)
		if (v->socks[i] >= 0 && !v->gone[i])
			rv_send(v->socks[i], &m);
	say(v, "aborted: %s", text);
	exit(1);
}

static void dead_text(const struct rv *v, int q, char *buf, size_t len)
{
	char role[48] = "";

	if (v->role)
		v->role(q, role, sizeof(role));
	snprintf(buf, len, "rank %d%s is gone: its process exited or was killed (its rendezvous connection closed) during %.70s",
		 q, role, v->phase);
}

/* Rank 0: rank @q's socket closed without a word: it died */
static void __noreturn root_dead(struct rv *v, int q)
{
	char text[sizeof(((struct rv_msg *)0)->text)];

	v->gone[q] = true;
	dead_text(v, q, text, sizeof(text));
	root_verdict(v, q, text);
}

/*
 * Rank 0 decides why the run failed: a rank whose socket closed without
 * a word died; else the first reason given (its own, or a rank's ABORT).
 * It waits up to RV_GRACE_MS for a dying rank's socket to close.
 */
static void __noreturn root_abort(struct rv *v, int who, int blame,
				  const char *why)
{
	uint64_t deadline = now_ns() + RV_GRACE_MS * 1000000ULL;
	struct pollfd pfd[RV_MAX_RANKS];
	bool aborted[RV_MAX_RANKS] = { false };
	char text[sizeof(((struct rv_msg *)0)->text)];
	int i, np, waiting;

	if (who > 0)
		aborted[who] = true;

	for (i = 1; i < v->n; i++)
		if (v->gone[i])
			root_dead(v, i);
	snprintf(text, sizeof(text), "rank %d: %.160s", who, why);
	for (;;) {
		uint64_t t = now_ns();
		int idx[RV_MAX_RANKS];

		np = 0;
		waiting = 0;
		for (i = 1; i < v->n; i++) {
			if (v->gone[i])
				continue;
			if (!aborted[i])
				waiting++;
			pfd[np].fd = v->socks[i];
			pfd[np].events = POLLIN;
			idx[np++] = i;
		}
		if (!waiting || t >= deadline)
			break;
		if (poll(pfd, np, (int)((deadline - t) / 1000000) + 1) <= 0)
			continue;
		for (i = 0; i < np; i++) {
			struct rv_msg m;
			int q = idx[i], ret;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ret = rv_read(v->socks[q], &m, now_ns() + 1000000000ULL);
			/* gone after its ABORT: it gave up waiting, not died */
			if (ret == -EPIPE && (aborted[q] || q == who)) {
				v->gone[q] = true;
				continue;
			}
			if (ret == -EPIPE || ret == -ECONNRESET)
				root_dead(v, q);
			if (ret) {
				v->gone[q] = true;
				continue;
			}
			if (m.type == RV_ABORT) {
				aborted[q] = true;
				/* the first reason, unless ours names nobody */
				if (blame < 0 && m.blame >= 0) {
					blame = m.blame;
					snprintf(text, sizeof(text),
						 "rank %u: %.100s", q, m.text);
				}
			}
		}
	}
	root_verdict(v, blame, text);
}

static void __noreturn root_gone(const struct rv *v)
{
	char role[48] = "";

	if (v->role)
		v->role(0, role, sizeof(role));
	say(v, "aborted: rank 0%s is gone: its process exited or was killed (its rendezvous connection closed) during %s",
	    role, v->phase);
	exit(1);
}

void rv_abort(struct rv *v, int blame, const char *fmt, ...)
{
	/* longer than rank 0 may take to decide (RV_GRACE_MS) */
	uint64_t deadline = now_ns() + 2 * RV_GRACE_MS * 1000000ULL;
	char why[sizeof(((struct rv_msg *)0)->text)];
	struct rv_msg m;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (v->rank == 0 && v->socks)
		root_abort(v, 0, blame, why);
	if (v->rank == 0 || v->root_sock < 0) {
		say(v, "%s", why);
		exit(1);
	}
	say(v, "%s", why);
	memset(&m, 0, sizeof(m));
	m.type = RV_ABORT;
	m.rank = v->rank;
	m.blame = blame;
	snprintf(m.text, sizeof(m.text), "%s", why);
	rv_send(v->root_sock, &m);
	for (;;) {
		ret = rv_read(v->root_sock, &m, deadline);
		if (ret == -ETIMEDOUT)
			break;
		if (ret)
			root_gone(v);
		if (m.type == RV_VERDICT) {
			say(v, "aborted: %s", m.text);
			exit(1);
		}
	}
	say(v, "aborted: no word from rank 0 within %d ms", 2 * RV_GRACE_MS);
	exit(1);
}

/*
 * A rendezvous socket is readable outside an exchange: on rank 0 a
 * rank's ABORT, or its socket closed (it died); on the others rank 0's
 * VERDICT, or its death.
 */
void rv_event(struct rv *v, int q)
{
	struct rv_msg m;
	int sock = v->rank ? v->root_sock : v->socks[q];
	int ret = rv_read(sock, &m, now_ns() + 1000000000ULL);

	if (v->rank == 0) {
		if (ret == -EPIPE)
			root_dead(v, q);
		if (ret)
			rv_abort(v, q, "rendezvous with rank %d: %s", q,
				 strerror(-ret));
		if (m.type == RV_ABORT)
			root_abort(v, q, m.blame, m.text);
		/* a rank done before us is in the next exchange already */
		if (v->has_early[q])
			rv_abort(v, q, "rendezvous: rank %d is two exchanges ahead",
				 q);
		v->early[q] = m;
		v->has_early[q] = true;
		return;
	}
	if (ret == -EPIPE)
		root_gone(v);
	if (ret)
		rv_abort(v, 0, "rendezvous with rank 0: %s", strerror(-ret));
	if (m.type == RV_VERDICT) {
		say(v, "aborted: %s", m.text);
		exit(1);
	}
	rv_abort(v, 0, "rendezvous: unexpected message %u from rank 0", m.type);
}

int rv_poll_add(const struct rv *v, struct pollfd *pfd, int *idx, int np)
{
	int i;

	if (v->rank) {
		pfd[np].fd = v->root_sock;
		pfd[np].events = POLLIN;
		idx[np++] = 0;
		return np;
	}
	for (i = 1; i < v->n; i++) {
		pfd[np].fd = v->socks[i];
		pfd[np].events = POLLIN;
		idx[np++] = i;
	}
	return np;
}

void rv_poll_check(struct rv *v, const struct pollfd *pfd, const int *idx, int np)
{
	int i;

	for (i = 0; i < np; i++)
		if (idx[i] >= 0 && pfd[i].revents)
			rv_event(v, idx[i]);
}

/* Rank 0's side of an exchange: every rank's message of @xseq into v->all */
static void root_gather(struct rv *v, const struct rv_msg *mine,
			uint32_t xseq, uint64_t deadline)
{
	bool have[RV_MAX_RANKS] = { true };
	int missing = v->n - 1, i, ret;

	v->all[0] = *mine;
	while (missing) {
		struct pollfd pfd[RV_MAX_RANKS];
		int idx[RV_MAX_RANKS], np = 0;
		uint64_t t = now_ns();

		for (i = 1; i < v->n; i++) {
			if (!have[i] && v->has_early[i]) {
				v->has_early[i] = false;
				if (v->early[i].xseq != xseq ||
				    v->early[i].type != mine->type)
					rv_abort(v, i, "rendezvous out of step: message %u (exchange %u) from rank %d, expected %u (%u)",
						 v->early[i].type, v->early[i].xseq,
						 i, mine->type, xseq);
				v->all[i] = v->early[i];
				have[i] = true;
				missing--;
			}
			if (have[i])
				continue;
			pfd[np].fd = v->socks[i];
			pfd[np].events = POLLIN;
			idx[np++] = i;
		}
		if (!np)
			break;
		if (t >= deadline) {
			rv_abort(v, idx[0], "rank %d did not reach %s within %u s",
				 idx[0], v->phase, v->timeout_s);
		}
		if (poll(pfd, np, (int)((deadline - t) / 1000000) + 1) <= 0)
			continue;
		for (i = 0; i < np; i++) {
			struct rv_msg m;
			int q = idx[i];

			if (!pfd[i].revents)
				continue;
			ret = rv_read(v->socks[q], &m, deadline);
			if (ret == -EPIPE)
				root_dead(v, q);
			if (ret)
				rv_abort(v, q, "rendezvous with rank %d: %s",
					 q, strerror(-ret));
			if (m.type == RV_ABORT)
				root_abort(v, q, m.blame, m.text);
			if (m.xseq != xseq || m.type != mine->type ||
			    m.rank != (uint32_t)q)
				rv_abort(v, q, "rendezvous out of step: message %u (exchange %u) from rank %d, expected %u (%u)",
					 m.type, m.xseq, q, mine->type, xseq);
			v->all[q] = m;
			have[q] = true;
			missing--;
		}
	}
}

void rv_exchange(struct rv *v, struct rv_msg *mine, bool gather)
{
	uint64_t deadline = now_ns() + v->timeout_s * 1000000000ULL;
	uint32_t xseq = ++v->xseq;
	int i, ret;

	mine->rank = v->rank;
	mine->nranks = v->n;
	mine->xseq = xseq;
	if (v->rank) {
		int want = gather ? v->n : 1;

		ret = rv_send(v->root_sock, mine);
		for (i = 0; !ret && i < want; i++) {
			struct rv_msg *m = &v->all[gather ? i : 0];

			ret = rv_read(v->root_sock, m, deadline);
			if (ret == -EPIPE)
				rv_event(v, 0);		/* rank 0's death */
			if (ret == -ETIMEDOUT)
				rv_abort(v, 0, "no answer from rank 0 within %u s during %s",
					 v->timeout_s, v->phase);
			if (!ret && m->type == RV_VERDICT) {
				say(v, "aborted: %s", m->text);
				exit(1);
			}
			if (!ret && (m->xseq != xseq || m->type != mine->type))
				rv_abort(v, 0, "rendezvous out of step: message %u (exchange %u) from rank 0, expected %u (%u)",
					 m->type, m->xseq, mine->type, xseq);
		}
		if (ret)
			rv_abort(v, 0, "rendezvous with rank 0: %s",
				 strerror(-ret));
		return;
	}

	root_gather(v, mine, xseq, deadline);
	for (i = 1; i < v->n; i++) {
		int j;

		ret = 0;
		if (gather) {
			for (j = 0; !ret && j < v->n; j++)
				ret = rv_send(v->socks[i], &v->all[j]);
		} else {
			ret = rv_send(v->socks[i], mine);
		}
		if (ret)
			rv_abort(v, i, "rendezvous with rank %d: %s", i,
				 strerror(-ret));
	}
}

int resolve(const char *host, unsigned int port, struct sockaddr_storage *ss,
	    socklen_t *len)
{
	struct addrinfo hints, *res;
	char ps[16];
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(ps, sizeof(ps), "%u", port);
	ret = getaddrinfo(host, ps, &hints, &res);
	if (ret)
		return -EHOSTUNREACH;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* sockaddr <-> krdma_addr (the rendezvous carries addresses so) */
void sa_to_addr(const struct sockaddr_storage *ss, struct krdma_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->family = ss->ss_family;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)ss;

		out->port = ntohs(s4->sin_port);
		memcpy(out->addr, &s4->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		out->port = ntohs(s6->sin6_port);
		memcpy(out->addr, &s6->sin6_addr, 16);
		out->scope_id = s6->sin6_scope_id;
	}
}

socklen_t addr_to_sa(const struct krdma_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = a->family;
	if (a->family == AF_INET) {
		struct sockaddr_in *s4 = (void *)ss;

		s4->sin_port = htons(a->port);
		memcpy(&s4->sin_addr, a->addr, 4);
		return sizeof(*s4);
	}
	{
		struct sockaddr_in6 *s6 = (void *)ss;

		s6->sin6_port = htons(a->port);
		memcpy(&s6->sin6_addr, a->addr, 16);
		s6->sin6_scope_id = a->scope_id;
		return sizeof(*s6);
	}
}

int tcp_listen_any(const struct krdma_addr *local, struct krdma_addr *bound)
{
	struct sockaddr_storage ss;
	socklen_t len = addr_to_sa(local, &ss);
	int s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	if (bind(s, (struct sockaddr *)&ss, len) || listen(s, RV_MAX_RANKS)) {
		close(s);
		return -1;
	}
	len = sizeof(ss);
	getsockname(s, (struct sockaddr *)&ss, &len);
	sa_to_addr(&ss, bound);
	return s;
}

/* Rank 0: say why to a rank it turns away (its VERDICT), and close */
static void __printf(3, 4) refuse(struct rv *v, int sock, const char *fmt, ...)
{
	struct rv_msg m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.type = RV_VERDICT;
	m.blame = -1;
	va_start(ap, fmt);
	vsnprintf(m.text, sizeof(m.text), fmt, ap);
	va_end(ap);
	say(v, "%s", m.text);
	rv_send(sock, &m);
	close(sock);
}

void rv_root(struct rv *v, const struct rv_msg *hello)
{
	uint64_t deadline = now_ns() + v->timeout_s * 1000000000ULL;
	struct sockaddr_storage ss;
	struct rv_msg m;
	socklen_t len;
	int ls, one = 1, joined = 0;

	v->socks = calloc(v->n, sizeof(*v->socks));
	v->gone = calloc(v->n, sizeof(*v->gone));
	v->early = calloc(v->n, sizeof(*v->early));
	v->has_early = calloc(v->n, sizeof(*v->has_early));
	if (!v->socks || !v->gone || !v->early || !v->has_early)
		rv_abort(v, -1, "out of memory");
	for (joined = 0; joined < v->n; joined++)
		v->socks[joined] = -1;
	joined = 0;
	if (resolve(v->root_host, v->root_port, &ss, &len))
		rv_abort(v, -1, "cannot resolve %s", v->root_host);
	ls = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0)
		rv_abort(v, -1, "socket: %s", strerror(errno));
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&ss, len) || listen(ls, RV_MAX_RANKS))
		rv_abort(v, -1, "cannot listen on %s:%u for the rendezvous: %s",
			 v->root_host, v->root_port, strerror(errno));
	sa_to_addr(&ss, &v->local);
	v->local.port = 0;
	while (joined < v->n - 1) {
		struct pollfd pfd = { .fd = ls, .events = POLLIN };
		uint64_t t = now_ns();
		int s, q;

		if (t >= deadline)
			rv_abort(v, -1, "only %d of %d ranks joined within %u s",
				 joined + 1, v->n, v->timeout_s);
		if (poll(&pfd, 1, (int)((deadline - t) / 1000000) + 1) <= 0)
			continue;
		s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (s < 0)
			continue;
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (rv_read(s, &m, deadline) || m.type != RV_HELLO) {
			close(s);
			continue;
		}
		q = m.rank;
		if (q <= 0 || q >= v->n || v->socks[q] >= 0 ||
		    m.nranks != (uint32_t)v->n) {
			refuse(v, s, "rank %d of %u refused: the world size is %d%s",
			       q, m.nranks, v->n,
			       q > 0 && q < v->n && v->socks[q] >= 0 ?
			       ", and that rank has joined" : "");
			continue;
		}
		if (memcmp(m.v, hello->v, sizeof(m.v))) {
			refuse(v, s, "rank %d refused: it runs with other options than rank 0 (%s)",
			       q, v->options_text);
			continue;
		}
		v->socks[q] = s;
		joined++;
	}
	close(ls);
}

int tcp_connect(const char *host, unsigned int port, unsigned int timeout_s,
		int *sock)
{
	uint64_t deadline = now_ns() + timeout_s * 1000000000ULL;
	struct sockaddr_storage ss;
	socklen_t len;
	int s, one = 1;

	if (resolve(host, port, &ss, &len))
		return -EADDRNOTAVAIL;
	for (;;) {
		struct timespec ts = { 0, 100 * 1000000L };

		s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return -errno;
		if (!connect(s, (struct sockaddr *)&ss, len))
			break;
		close(s);
		if (errno != ECONNREFUSED && errno != ETIMEDOUT &&
		    errno != EHOSTUNREACH && errno != ENETUNREACH)
			return -errno;
		if (now_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&ts, NULL);	/* not up yet: as torchrun */
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*sock = s;
	return 0;
}

void rv_join(struct rv *v, struct rv_msg *hello)
{
	struct sockaddr_storage me;
	socklen_t mlen = sizeof(me);
	int ret;

	ret = tcp_connect(v->root_host, v->root_port, v->timeout_s, &v->root_sock);
	if (ret == -EADDRNOTAVAIL)
		rv_abort(v, -1, "cannot resolve %s", v->root_host);
	if (ret == -ETIMEDOUT)
		rv_abort(v, 0, "rank 0 does not listen at %s:%u (waited %u s)",
			 v->root_host, v->root_port, v->timeout_s);
	if (ret)
		rv_abort(v, 0, "cannot reach rank 0 at %s:%u: %s",
			 v->root_host, v->root_port, strerror(-ret));
	if (getsockname(v->root_sock, (struct sockaddr *)&me, &mlen))
		rv_abort(v, 0, "getsockname: %s", strerror(errno));
	sa_to_addr(&me, &v->local);
	v->local.port = 0;
	hello->type = RV_HELLO;
	hello->rank = v->rank;
	hello->nranks = v->n;
	if (rv_send(v->root_sock, hello))
		rv_abort(v, 0, "cannot send to rank 0: %s", strerror(errno));
}
/*
 * Options
 */

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (*s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'G': case 'g':
		v <<= 10;
		/* fall through */
	case 'M': case 'm':
		v <<= 10;
		/* fall through */
	case 'K': case 'k':
		v <<= 10;
		end++;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

int parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

const char *first_env(const char *const *names)
{
	for (; *names; names++)
		if (getenv(*names) && *getenv(*names))
			return getenv(*names);
	return NULL;
}

int bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", ex_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", ex_prog);
	return 2;
}

int parse_world(const char *rank_s, const char *size_s, const char *root_s,
		int min_size, int max_size, unsigned int def_port,
		struct rv *v)
{
	static const char *const rank_env[] = { "RANK", "OMPI_COMM_WORLD_RANK",
						"PMI_RANK", "SLURM_PROCID", NULL };
	static const char *const size_env[] = { "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
						"PMI_SIZE", "SLURM_NTASKS", NULL };
	const char *e;
	long l;

	if (!rank_s)
		rank_s = first_env(rank_env);
	if (!size_s)
		size_s = first_env(size_env);
	if (!rank_s || !size_s)
		return bad("which rank of how many? give --rank and --size (or RANK and WORLD_SIZE)");
	if (parse_int(size_s, min_size, max_size, &l))
		return bad("the size (number of ranks) is %d to %d, not '%s'",
			   min_size, max_size, size_s);
	v->n = l;
	if (parse_int(rank_s, 0, v->n - 1, &l))
		return bad("the rank is 0 to %d, not '%s'", v->n - 1, rank_s);
	v->rank = l;

	v->root_port = def_port;
	if (root_s) {
		const char *colon = strrchr(root_s, ':');
		const char *h = root_s;
		size_t hl;

		if (!colon || parse_int(colon + 1, 1, 65535, &l))
			return bad("--root: ADDR:PORT, not '%s'", root_s);
		v->root_port = l;
		hl = colon - root_s;
		if (*h == '[' && hl >= 2 && h[hl - 1] == ']') {
			h++;
			hl -= 2;
		}
		if (!hl || hl >= sizeof(v->root_host))
			return bad("--root: ADDR:PORT, not '%s'", root_s);
		memcpy(v->root_host, h, hl);
		v->root_host[hl] = '\0';
	} else {
		e = getenv("MASTER_ADDR");
		if (!e || !*e)
			return bad("where is rank 0? give --root ADDR:PORT (or MASTER_ADDR and MASTER_PORT)");
		snprintf(v->root_host, sizeof(v->root_host), "%s", e);
		e = getenv("MASTER_PORT");
		if (e && parse_int(e, 1, 65535, &l))
			return bad("MASTER_PORT is not a port: '%s'", e);
		if (e)
			v->root_port = l;
	}
	return 0;
}

void ex_opts_init(struct ex_opts *o, unsigned int timeout_s)
{
	memset(o, 0, sizeof(*o));
	o->min_bytes = 64 << 10;
	o->factor = 2;
	o->iters = 20;
	o->warmup = 5;
	o->timeout_s = timeout_s;
}

/* -b, -e: a size within the program's bounds */
static int ex_size(const char *name, const char *arg, const struct ex_opts *o,
		   uint64_t *out)
{
	if (parse_size(arg, out) || *out < o->size_lo || *out > o->size_hi ||
	    *out % o->size_align)
		return bad("%s: %s, not '%s'", name, o->size_text, arg);
	return 0;
}

int ex_opt(int c, char *argv[], struct ex_opts *o)
{
	long l;

	switch (c) {
	case 'O':
		o->root_s = optarg;
		break;
	case 'r':
		o->rank_s = optarg;
		break;
	case 'N':
		o->size_s = optarg;
		break;
	case 'a':
		snprintf(o->addr, sizeof(o->addr), "%s", optarg);
		break;
	case 'm':
		if (!strcmp(optarg, "tcp"))
			o->tcp = true;
		else if (strcmp(optarg, "krdma"))
			return bad("--mode: krdma or tcp, not '%s'", optarg);
		break;
	case 'T':
		o->tcp = true;
		break;
	case 'b':
		return ex_size("-b", optarg, o, &o->min_bytes);
	case 'e':
		o->have_max = true;
		return ex_size("-e", optarg, o, &o->max_bytes);
	case 'f':
		if (parse_int(optarg, 2, 1024, &l))
			return bad("-f: a factor from 2 to 1024, not '%s'", optarg);
		o->factor = l;
		break;
	case 'n':
		if (parse_int(optarg, 1, 1000000, &l))
			return bad("-n: 1 to 1000000 iterations, not '%s'", optarg);
		o->iters = l;
		break;
	case 'w':
		if (parse_int(optarg, 0, 1000000, &l))
			return bad("-w: 0 to 1000000 iterations, not '%s'", optarg);
		o->warmup = l;
		break;
	case 'I':
		if (!strcmp(optarg, "auto"))
			o->notify = 0;
		else if (!strcmp(optarg, "imm"))
			o->notify = 1;
		else if (!strcmp(optarg, "send"))
			o->notify = 2;
		else
			return bad("--notify: auto, imm or send, not '%s'", optarg);
		break;
	case 't':
		if (parse_int(optarg, 1, 86400, &l))
			return bad("-t: 1 to 86400 seconds, not '%s'", optarg);
		o->timeout_s = l;
		break;
	case 'j':
		o->json = true;
		break;
	case 'X':
		o->inject = true;
		break;
	case ':':
		return bad("option '%s' needs a value", argv[optind - 1]);
	case '?':
		return bad("unknown option '%s'", argv[optind - 1]);
	default:
		return 1;
	}
	return 0;
}

int ex_opts_end(int argc, char *argv[], struct ex_opts *o, int max_size,
		unsigned int def_port, struct rv *rv)
{
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (!o->have_max)
		o->max_bytes = o->min_bytes;
	if (o->max_bytes < o->min_bytes)
		return bad("-e is smaller than -b");
	return parse_world(o->rank_s, o->size_s, o->root_s, 2, max_size,
			   def_port, rv);
}

void raise_memlock(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_MEMLOCK, &rl);
}

int ex_start(struct rv *v, const struct ex_opts *o, const char *options_text,
	     struct rv_msg *hello)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (rv_init(v, v->rank, v->n))
		return 1;
	v->timeout_s = o->timeout_s;
	v->options_text = options_text;
	snprintf(v->phase, sizeof(v->phase), "the rendezvous");
	raise_memlock();

	if (v->rank == 0)
		rv_root(v, hello);
	else
		rv_join(v, hello);
	if (o->addr[0] && krdma_parse_addr(o->addr, 0, &v->local))
		rv_abort(v, -1, "--addr: not an IP address: %s", o->addr);
	return 0;
}

void ex_hello(const struct ex_opts *o, uint64_t w0, uint64_t w5,
	      struct rv_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = RV_HELLO;
	m->v[0] = o->tcp | w0 << 8;
	m->v[1] = o->min_bytes;
	m->v[2] = o->max_bytes;
	m->v[3] = o->factor;
	m->v[4] = o->iters | (uint64_t)o->warmup << 32;
	m->v[5] = w5;
}

void ex_results(struct rv *v, const char *what, uint64_t *maxtime,
		uint64_t *wrong)
{
	int i;

	*maxtime = *wrong = 0;
	for (i = 0; i < v->n; i++) {
		if (v->all[i].v[0] > *maxtime)
			*maxtime = v->all[i].v[0];
		*wrong += v->all[i].v[1];
		if (v->all[i].v[1])
			say(v, "rank %d: %" PRIu64 " wrong %s; the first: %s", i,
			    (uint64_t)v->all[i].v[1], what, v->all[i].text);
	}
}

void ex_end(struct rv *v)
{
	struct rv_msg m;

	snprintf(v->phase, sizeof(v->phase), "the end");
	memset(&m, 0, sizeof(m));
	m.type = RV_DONE;
	rv_exchange(v, &m, false);
}

void json_str(const char *key, const char *s, bool comma)
{
	printf("\"%s\": \"", key);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	printf("\"%s", comma ? ", " : "");
}

/*
 * krdma
 */

int krdma_start(struct rv *v)
{
	int kfd = krdma_open(), ret;

	if (kfd < 0)
		rv_abort(v, -1, "cannot open " KRDMA_DEV_PATH ": %s; %s",
			 strerror(-kfd), krdma_strerror_hint(kfd) ?: "");
	ret = krdma_check_module(kfd, KRDMA_FEATURE_CONN, NULL);
	if (ret)
		rv_abort(v, -1, "krdma.ko cannot serve this program: %s; %s",
			 strerror(-ret), krdma_strerror_hint(ret) ?: "");
	return kfd;
}

const char *conn_why(int kfd, uint32_t conn, char *buf, size_t len)
{
	struct krdma_conn_query q;

	if (krdma_conn_info(kfd, conn, &q) || q.state != KRDMA_CONN_ERROR ||
	    !q.error)
		return "";
	snprintf(buf, len, "; the connection is down: %s", strerror(q.error));
	return buf;
}

uint8_t *map_buf(struct rv *v, int kfd, uint64_t len, uint32_t access,
		 uint32_t *h)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t mlen = (len + page - 1) & ~(uint64_t)(page - 1);
	uint8_t *p;
	int ret;

	p = mmap(NULL, mlen, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		rv_abort(v, -1, "cannot allocate %" PRIu64 " bytes", len);
	ret = krdma_buf_register(kfd, p, len, access, h);
	if (ret)
		rv_abort(v, -1, "cannot register %" PRIu64 " bytes: %s%s%s", len,
			 strerror(-ret), krdma_conn_strerror_hint(ret) ? ": " : "",
			 krdma_conn_strerror_hint(ret) ?: "");
	return p;
}

int conn_device(int kfd, uint32_t conn, struct krdma_dev_query *dq)
{
	struct krdma_conn_query q;
	int ret = krdma_conn_info(kfd, conn, &q);

	return ret ? ret : krdma_dev_query(kfd, q.dev_index, dq);
}

void fill_note_send(struct krdma_op *op, uint32_t conn, uint64_t cookie,
		    uint32_t buf, uint8_t *base, uint64_t off, uint32_t kind,
		    uint32_t seq)
{
	struct note *nt = (struct note *)(base + off);

	nt->magic = NOTE_MAGIC;
	nt->kind = kind;
	nt->seq = seq;
	nt->pad = 0;
	memset(op, 0, sizeof(*op));
	op->opcode = KRDMA_OP_SEND;
	op->cookie = cookie;
	op->conn = conn;
	op->num_sge = 1;
	op->sge.buf = buf;
	op->sge.offset = off;
	op->sge.length = sizeof(*nt);
}

void fill_recv(struct krdma_op *op, uint32_t conn, uint64_t cookie,
	       uint32_t buf, uint64_t off, uint64_t len)
{
	memset(op, 0, sizeof(*op));
	op->opcode = KRDMA_OP_RECV;
	op->cookie = cookie;
	op->conn = conn;
	op->num_sge = 1;
	op->sge.buf = buf;
	op->sge.offset = off;
	op->sge.length = len;
}

int submit_wait(int kfd, struct krdma_op **ops, uint32_t *n)
{
	uint32_t sub;
	int ret;

	/* KRDMA_SUBMIT_WAIT: only a signal or an error stops it early */
	do {
		sub = 0;
		ret = krdma_submit_ops(kfd, *ops, *n, KRDMA_SUBMIT_WAIT, &sub);
		*ops += sub;
		*n -= sub;
	} while (*n && (!ret || ret == -EINTR));
	return *n ? ret : 0;
}
