// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_verbs_peer: a plain librdmacm/libibverbs peer of krdma.
 *
 * It uses nothing of krdma: no header, no library. Everything it knows
 * about krdma is the wire format documented in <linux/krdma.h> (struct
 * krdma_token) and module/wire.h (struct krdma_cm_hdr), restated below. It
 * shows that a verbs program can connect to krdma (or be connected to),
 * exchange tokens with it and move data both ways; krdma_interop_test
 * drives the krdma side.
 *
 *   krdma_verbs_peer -c ADDR -p PORT [options]   connect to a krdma listener
 *   krdma_verbs_peer -s ADDR -p PORT [options]   listen (PORT 0: any free
 *                                                port), accept one krdma
 *                                                connection
 * Options:
 *   -n SIZE           bytes moved each way (default 65536)
 *   -o OFFSET         offset of the data in each window (default 3)
 *   -t SECONDS        give up after this long (default 30)
 *   --no-hdr          send no krdma handshake header (plain verbs peer)
 *   --pdata N         instead of the header, send N bytes of private data
 *                     of its own (0x5a, 0x5b, ...: not krdma's magic)
 *   --hdr-version N   send the header with version N (to be refused)
 *   --reject N        (-s) reject the connect request, with a krdma reject
 *                     of reason N in its private data (0: none), and exit
 *   --resp-res N      RDMA READs this peer serves at once (responder
 *                     resources; default: what the device can do)
 *   --send-first      (-c) SEND a FIRST message {type 4, status
 *                     0x46495253} the moment the connection is up, before
 *                     the script: for a krdma listener that posted its
 *                     RECVs before it accepted (KRDMA_LISTEN_DEFER_ACCEPT)
 *   --write-imm IMM   instead of the script, one RDMA WRITE with immediate
 *                     htonl(IMM) into krdma's window (below); -n may be 0
 *
 * stdout, line by line: the server prints "listening ADDR PORT" once it
 * listens, the client "connecting from ADDR PORT" (its own address and
 * port, as the listener sees them) before its connect request, then both
 * modes print what they did; errors go to stderr.
 *
 * Exit status: 0 when every byte checked out on this side, 1 usage or
 * local setup error, 2 connection or transfer failed, 3 protocol error
 * (bad or missing krdma header, unexpected message or token), 4 data
 * mismatch, 5 the connection was rejected, 6 timeout, 7 the device
 * refused to post the RDMA WRITE with immediate of --write-imm (siw: iWARP
 * has none; nothing was sent). A rejected client
 * prints "rejected: krdma reason R version V" when the reject carries
 * krdma's reason (struct krdma_cm_rej: le32 magic, u8 version, u8 reason,
 * le16 0), else "rejected: no krdma reason".
 *
 * The handshake (module/wire.h): struct krdma_cm_hdr, 28 bytes,
 * little-endian, at the start of the rdma_cm private data of the connect
 * request and of the accept: magic 0x4d44524b ("KRDM"), version 1, zeros,
 * features (0), sq_depth, rq_depth (how many RECVs the sender can have
 * posted), 8 zero bytes. krdma takes private data that does not start
 * with the magic (or is shorter than the header) as coming from a plain
 * verbs peer, and refuses a header of another version. This peer always
 * expects krdma's header in what it receives.
 *
 * The token (<linux/krdma.h>): 32 bytes, little-endian: addr (u64, the
 * remote_addr of the window's first byte), length (u64), rkey (u32),
 * access (u32, KRDMA_ACCESS_REMOTE_READ 0x2 | KRDMA_ACCESS_REMOTE_WRITE
 * 0x4), seg_shift (u32), tag (u32). A verbs peer uses remote_addr = addr
 * + offset and, when seg_shift is 0, rkey = rkey. Otherwise the window is
 * registered in pieces: it RDMA READs the key table (tag, count, one rkey
 * per 2^seg_shift bytes of the address range) at address 0 with rkey, and
 * splits its operations there. The first 24 bytes, the rest taken as
 * zero, describe a verbs MR to krdma: (its VA, length, rkey).
 *
 * The script, after the connection is up. S is -n, O is -o. Each side has
 * a window of W = O + 2 * S bytes, anywhere in its memory: bytes [0, O)
 * are a guard (0xee), [O, O + S) the "read region", which the owner fills
 * with its read pattern before it sends its token, [O + S, O + 2S) the
 * "write region" (0xee), which the other side fills. Messages are SENDs;
 * the receiver always has the RECV posted before the sender can send
 * (iWARP has no RNR retry): this peer posts all its RECVs before it
 * connects or accepts, and sends only in answer to krdma.
 *
 *   krdma -> peer   its token (32 bytes; krdma has posted 3 RECVs first)
 *   peer -> krdma   its token (24 bytes)
 *   peer            RDMA WRITEs S bytes of pattern PEER_WRITE to krdma's
 *                   window at O + S, RDMA READs S bytes at O (krdma's
 *                   KRDMA_READ pattern), checks them
 *   peer -> krdma   DONE_A {type 1, status}: status 0 if the READ checked
 *                   out; the WRITE has landed when this arrives
 *   krdma           checks its window; WRITEs pattern KRDMA_WRITE at O + S
 *                   of the peer's window, READs its PEER_READ pattern at O
 *   krdma -> peer   DONE_B {type 2, status}
 *   peer            checks its window
 *   peer -> krdma   VERDICT {type 3, status}: 0 if the window checked out
 *   peer            disconnects
 *
 * Messages are 8 bytes: le32 type, le32 status. Pattern: byte i of a
 * region of seed s is kvp_pattern_byte(i, s) below.
 *
 * The script of --write-imm IMM: the same windows, only krdma's is used.
 *
 *   krdma -> peer   its token (32 bytes, REMOTE_WRITE; one registration);
 *                   krdma has posted the RECV the WRITE is to consume
 *   peer            RDMA WRITE with immediate htonl(IMM): S bytes (0 to
 *                   post no SGE) of pattern PEER_WRITE at O + S of krdma's
 *                   window; prints "write-imm: wrote ..." once it has
 *                   completed, or "write-imm: not posted: ..." when
 *                   ibv_post_send() refused it (then it sends nothing)
 *   krdma           checks its RECV's completion and its window
 *   krdma -> peer   DONE_B {type 2, status}
 *   peer            disconnects
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define KVP_CM_MAGIC		0x4d44524b
#define KVP_CM_VERSION		1
#define KVP_ACCESS_REMOTE_READ	0x2
#define KVP_ACCESS_REMOTE_WRITE	0x4

/* The depths this peer announces: it never has more RECVs posted */
#define KVP_SQ_DEPTH		16
#define KVP_RQ_DEPTH		16

/* Pattern seeds of the four regions */
#define SEED_KRDMA_READ		0x11
#define SEED_PEER_READ		0x22
#define SEED_PEER_WRITE		0x33
#define SEED_KRDMA_WRITE	0x44

#define MSG_DONE_A		1
#define MSG_DONE_B		2
#define MSG_VERDICT		3
#define MSG_FIRST		4
#define MSG_FIRST_STATUS	0x46495253	/* "SRIF" */

#define GUARD			0xee
/* Where the window starts in this peer's memory, and slack after it */
#define WIN_LEAD		13
#define WIN_TAIL		64
/* io buffer: WRITE source at IO_SRC, READ sink at IO_SINK + size */
#define IO_SRC			1
#define IO_SINK			71
#define IO_TAIL			64
/* message slots: RECVs in 0..2, SENDs in 4 */
#define MSG_SLOT		64
#define MSG_NRECV		3
#define MSG_SEND_SLOT		4
#define MSG_SLOTS		5

#define WRID_RECV(n)		(100 + (n))
#define WRID_SEND		200
#define WRID_WRITE		300
#define WRID_READ		301
#define WRID_PIECE		302
#define WRID_KEYS		303
#define WRID_WRITE_IMM		304

enum {
	EXIT_OK = 0,
	EXIT_SETUP = 1,
	EXIT_CONN = 2,
	EXIT_PROTO = 3,
	EXIT_DATA = 4,
	EXIT_REJECTED = 5,
	EXIT_TIMEOUT = 6,
	EXIT_NOT_POSTED = 7,
};

struct kvp_cm_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t reserved0;
	uint16_t reserved1;
	uint32_t features;
	uint32_t sq_depth;
	uint32_t rq_depth;
	uint32_t reserved2[2];
} __attribute__((packed));

_Static_assert(sizeof(struct kvp_cm_hdr) == 28, "krdma_cm_hdr is 28 bytes");

struct kvp_token {
	uint64_t addr;
	uint64_t length;
	uint32_t rkey;
	uint32_t access;
	uint32_t seg_shift;
	uint32_t tag;
} __attribute__((packed));

_Static_assert(sizeof(struct kvp_token) == 32, "a token is 32 bytes");

/* What a token of one registration needs on the wire (this peer's own) */
#define KVP_TOKEN_MIN		24
/* Keys a key table holds at most (64 KiB with its two words) */
#define KVP_MAX_KEYS		16382

struct kvp_msg {
	uint32_t type;
	uint32_t status;
} __attribute__((packed));

struct peer {
	/* options */
	const char *addr;
	unsigned int port;
	bool server;
	bool no_hdr;
	bool send_first;
	bool write_imm;
	uint32_t imm;
	int pdata_len;		/* -1: none of its own */
	int reject;		/* -1: accept */
	bool rejected;
	unsigned int hdr_version;
	int resp_res;
	size_t size, off, wlen;
	struct timespec deadline;

	struct rdma_event_channel *ec;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_device_attr dattr;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	bool cq_armed;
	bool connected;
	uint8_t *win_mem, *io_mem, *msg_mem;
	size_t win_mem_len, io_mem_len;
	struct ibv_mr *win_mr, *io_mr, *msg_mr;

	/* completions that arrived before they were waited for */
	struct ibv_wc stash[16];
	int nstash;

	struct kvp_token remote;
	/* krdma's key table, when its token has one (seg_shift not 0) */
	uint32_t *keys;
	struct ibv_mr *keys_mr;
};

static const char *prog = "krdma_verbs_peer";

#define err(fmt, ...) fprintf(stderr, "%s: " fmt "\n", prog, ##__VA_ARGS__)

/* Byte @i of a region of seed @seed: not periodic, position dependent */
static uint8_t kvp_pattern_byte(size_t i, unsigned int seed)
{
	uint32_t h = (uint32_t)i * 2654435761u + seed * 0x9e3779b9u;

	return (uint8_t)((h >> 24) ^ (i >> 8) ^ seed);
}

static void pattern(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = kvp_pattern_byte(i, seed);
}

/* Index of the first byte that is not the pattern, or -1 */
static long check_pattern(const uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != kvp_pattern_byte(i, seed))
			return i;
	return -1;
}

static long check_fill(const uint8_t *p, size_t len, uint8_t v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return i;
	return -1;
}

/* Milliseconds left before the deadline, at least 0 */
static int ms_left(const struct peer *p)
{
	struct timespec now;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (p->deadline.tv_sec - now.tv_sec) * 1000 +
	     (p->deadline.tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Wait for @fd to be readable before the deadline: 0, or EXIT_TIMEOUT */
static int wait_fd(struct peer *p, int fd, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int ret;

	for (;;) {
		ret = poll(&pfd, 1, ms_left(p));
		if (ret > 0)
			return 0;
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0) {
			err("poll: %s", strerror(errno));
			return EXIT_SETUP;
		}
		err("timed out waiting for %s", what);
		return EXIT_TIMEOUT;
	}
}

/* What a krdma listener says in its reject, if it says anything */
static void print_reject(const struct rdma_cm_event *ev)
{
	const uint8_t *d = ev->param.conn.private_data;
	uint32_t magic;

	if (!d || ev->param.conn.private_data_len < 8) {
		printf("rejected: no krdma reason\n");
		return;
	}
	memcpy(&magic, d, 4);
	if (le32toh(magic) != KVP_CM_MAGIC || d[6] || d[7]) {
		printf("rejected: no krdma reason\n");
		return;
	}
	printf("rejected: krdma reason %u version %u\n", d[5], d[4]);
}

/*
 * The next CM event, which must be @want. On success *evp is the event,
 * for the caller to rdma_ack_cm_event().
 */
static int get_cm_event(struct peer *p, enum rdma_cm_event_type want,
			struct rdma_cm_event **evp)
{
	struct rdma_cm_event *ev;
	int ret;

	for (;;) {
		if (!rdma_get_cm_event(p->ec, &ev))
			break;
		if (errno != EAGAIN && errno != EINTR) {
			err("rdma_get_cm_event: %s", strerror(errno));
			return EXIT_SETUP;
		}
		ret = wait_fd(p, p->ec->fd, rdma_event_str(want));
		if (ret)
			return ret;
	}
	if (ev->event == want) {
		*evp = ev;
		return 0;
	}
	err("expected %s, got %s (status %d)", rdma_event_str(want),
	    rdma_event_str(ev->event), ev->status);
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		print_reject(ev);
	if (ev->event == RDMA_CM_EVENT_REJECTED ||
	    (ev->event == RDMA_CM_EVENT_CONNECT_ERROR &&
	     ev->status == -ECONNREFUSED))
		ret = EXIT_REJECTED;
	else
		ret = EXIT_CONN;
	rdma_ack_cm_event(ev);
	return ret;
}

static void fill_hdr(const struct peer *p, struct kvp_cm_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = htole32(KVP_CM_MAGIC);
	h->version = p->hdr_version;
	h->features = htole32(0);
	h->sq_depth = htole32(KVP_SQ_DEPTH);
	h->rq_depth = htole32(KVP_RQ_DEPTH);
}

/* krdma's header, which it sends in its connect request and accept */
static int check_hdr(const void *data, uint8_t len)
{
	struct kvp_cm_hdr h;

	if (!data || len < sizeof(h)) {
		err("no krdma header in the private data (%u bytes)", len);
		return EXIT_PROTO;
	}
	memcpy(&h, data, sizeof(h));
	if (le32toh(h.magic) != KVP_CM_MAGIC || h.version != KVP_CM_VERSION ||
	    h.reserved0 || h.reserved1 || h.reserved2[0] || h.reserved2[1] ||
	    !h.rq_depth || !h.sq_depth) {
		err("bad krdma header: magic 0x%08x version %u sq %u rq %u",
		    le32toh(h.magic), h.version, le32toh(h.sq_depth),
		    le32toh(h.rq_depth));
		return EXIT_PROTO;
	}
	printf("krdma header: version %u features 0x%x sq_depth %u rq_depth %u\n",
	       h.version, le32toh(h.features), le32toh(h.sq_depth),
	       le32toh(h.rq_depth));
	return 0;
}

static int post_recv(struct peer *p, unsigned int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->msg_mem + slot * MSG_SLOT),
		.length = MSG_SLOT,
		.lkey = p->msg_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = WRID_RECV(slot),
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;
	int ret;

	ret = ibv_post_recv(p->id->qp, &wr, &bad);
	if (ret) {
		err("ibv_post_recv: %s", strerror(ret));
		return EXIT_SETUP;
	}
	return 0;
}

/*
 * Protection domain, CQ, QP on p->id, the memory, and every RECV posted:
 * before rdma_connect()/rdma_accept(), so nothing krdma sends finds none.
 */
static int setup_qp(struct peer *p)
{
	struct ibv_qp_init_attr qa = {};
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE;
	unsigned int i;
	int ret;

	if (ibv_query_device(p->id->verbs, &p->dattr)) {
		err("ibv_query_device: %s", strerror(errno));
		return EXIT_SETUP;
	}
	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cc = ibv_create_comp_channel(p->id->verbs);
	if (!p->pd || !p->cc) {
		err("ibv_alloc_pd/ibv_create_comp_channel: %s", strerror(errno));
		return EXIT_SETUP;
	}
	if (fcntl(p->cc->fd, F_SETFL, fcntl(p->cc->fd, F_GETFL) | O_NONBLOCK)) {
		err("fcntl: %s", strerror(errno));
		return EXIT_SETUP;
	}
	p->cq = ibv_create_cq(p->id->verbs, 2 * (KVP_SQ_DEPTH + KVP_RQ_DEPTH),
			      NULL, p->cc, 0);
	if (!p->cq) {
		err("ibv_create_cq: %s", strerror(errno));
		return EXIT_SETUP;
	}
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = KVP_SQ_DEPTH;
	qa.cap.max_recv_wr = KVP_RQ_DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(p->id, p->pd, &qa)) {
		err("rdma_create_qp: %s", strerror(errno));
		return EXIT_SETUP;
	}

	/* The window, in a mapping with room around it for guards */
	p->win_mem_len = WIN_LEAD + p->wlen + WIN_TAIL;
	p->io_mem_len = IO_SINK + 2 * p->size + IO_TAIL;
	p->win_mem = mmap(NULL, p->win_mem_len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p->io_mem = mmap(NULL, p->io_mem_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p->msg_mem = mmap(NULL, MSG_SLOTS * MSG_SLOT, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->win_mem == MAP_FAILED || p->io_mem == MAP_FAILED ||
	    p->msg_mem == MAP_FAILED) {
		err("mmap: %s", strerror(errno));
		return EXIT_SETUP;
	}
	memset(p->win_mem, GUARD, p->win_mem_len);
	pattern(p->win_mem + WIN_LEAD + p->off, p->size, SEED_PEER_READ);
	memset(p->io_mem, GUARD, p->io_mem_len);
	pattern(p->io_mem + IO_SRC, p->size, SEED_PEER_WRITE);

	/* iWARP: the sink of an RDMA READ needs REMOTE_WRITE */
	p->win_mr = ibv_reg_mr(p->pd, p->win_mem, p->win_mem_len, access);
	p->io_mr = ibv_reg_mr(p->pd, p->io_mem, p->io_mem_len, access);
	p->msg_mr = ibv_reg_mr(p->pd, p->msg_mem, MSG_SLOTS * MSG_SLOT,
			       IBV_ACCESS_LOCAL_WRITE);
	if (!p->win_mr || !p->io_mr || !p->msg_mr) {
		err("ibv_reg_mr: %s", strerror(errno));
		return EXIT_SETUP;
	}

	for (i = 0; i < MSG_NRECV; i++) {
		ret = post_recv(p, i);
		if (ret)
			return ret;
	}
	return 0;
}

static void fill_conn_param(const struct peer *p, struct rdma_conn_param *cp,
			    struct kvp_cm_hdr *hdr)
{
	static uint8_t own[256];
	int i;

	memset(cp, 0, sizeof(*cp));
	if (p->pdata_len >= 0) {
		for (i = 0; i < p->pdata_len; i++)
			own[i] = 0x5a + i;
		cp->private_data = p->pdata_len ? own : NULL;
		cp->private_data_len = p->pdata_len;
	} else if (!p->no_hdr) {
		fill_hdr(p, hdr);
		cp->private_data = hdr;
		cp->private_data_len = sizeof(*hdr);
	}
	cp->flow_control = 1;
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
}

static int connect_client(struct peer *p)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	const struct sockaddr_in *src;
	char ip[INET_ADDRSTRLEN] = "?";
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct kvp_cm_hdr hdr;
	int ret;

	dst.sin_port = htons(p->port);
	if (inet_pton(AF_INET, p->addr, &dst.sin_addr) != 1) {
		err("bad address %s", p->addr);
		return EXIT_SETUP;
	}
	if (rdma_create_id(p->ec, &p->id, p, RDMA_PS_TCP)) {
		err("rdma_create_id: %s", strerror(errno));
		return EXIT_SETUP;
	}
	if (rdma_resolve_addr(p->id, NULL, (struct sockaddr *)&dst, 5000)) {
		err("rdma_resolve_addr: %s", strerror(errno));
		return EXIT_CONN;
	}
	ret = get_cm_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, &ev);
	if (ret)
		return ret;
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(p->id, 5000)) {
		err("rdma_resolve_route: %s", strerror(errno));
		return EXIT_CONN;
	}
	ret = get_cm_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev);
	if (ret)
		return ret;
	rdma_ack_cm_event(ev);

	ret = setup_qp(p);
	if (ret)
		return ret;
	fill_conn_param(p, &cp, &hdr);
	/* Who we are to the listener (krdma_interop_test checks its count) */
	src = (const struct sockaddr_in *)rdma_get_local_addr(p->id);
	inet_ntop(AF_INET, &src->sin_addr, ip, sizeof(ip));
	printf("connecting from %s %u\n", ip, ntohs(rdma_get_src_port(p->id)));
	/* RDMA READs both ways: iWARP (and rxe) need these set */
	cp.responder_resources = p->dattr.max_qp_rd_atom > 255 ? 255 :
				 p->dattr.max_qp_rd_atom;
	if (p->resp_res >= 0 && p->resp_res < cp.responder_resources)
		cp.responder_resources = p->resp_res;
	cp.initiator_depth = p->dattr.max_qp_init_rd_atom > 255 ? 255 :
			     p->dattr.max_qp_init_rd_atom;
	if (rdma_connect(p->id, &cp)) {
		err("rdma_connect: %s", strerror(errno));
		return EXIT_CONN;
	}
	ret = get_cm_event(p, RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (ret)
		return ret;
	p->connected = true;
	ret = check_hdr(ev->param.conn.private_data,
			ev->param.conn.private_data_len);
	printf("connected to %s:%u (responder_resources %u initiator_depth %u)\n",
	       p->addr, p->port, cp.responder_resources, cp.initiator_depth);
	rdma_ack_cm_event(ev);
	return ret;
}

static int accept_server(struct peer *p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct rdma_conn_param cp, req;
	struct rdma_cm_event *ev;
	struct kvp_cm_hdr hdr;
	int ret;

	sa.sin_port = htons(p->port);
	if (inet_pton(AF_INET, p->addr, &sa.sin_addr) != 1) {
		err("bad address %s", p->addr);
		return EXIT_SETUP;
	}
	if (rdma_create_id(p->ec, &p->listen_id, p, RDMA_PS_TCP)) {
		err("rdma_create_id: %s", strerror(errno));
		return EXIT_SETUP;
	}
	if (rdma_bind_addr(p->listen_id, (struct sockaddr *)&sa) ||
	    rdma_listen(p->listen_id, 1)) {
		err("rdma_bind_addr/rdma_listen %s:%u: %s", p->addr, p->port,
		    strerror(errno));
		return EXIT_SETUP;
	}
	printf("listening %s %u\n", p->addr,
	       ntohs(rdma_get_src_port(p->listen_id)));
	fflush(stdout);

	ret = get_cm_event(p, RDMA_CM_EVENT_CONNECT_REQUEST, &ev);
	if (ret)
		return ret;
	p->id = ev->id;
	req = ev->param.conn;
	ret = check_hdr(ev->param.conn.private_data,
			ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	if (ret) {
		rdma_reject(p->id, NULL, 0);
		return ret;
	}
	if (p->reject >= 0) {
		/* struct krdma_cm_rej: magic, version, reason, 0 */
		uint8_t rej[8] = { 0, 0, 0, 0, KVP_CM_VERSION, p->reject };
		uint32_t magic = htole32(KVP_CM_MAGIC);

		memcpy(rej, &magic, 4);
		if (rdma_reject(p->id, p->reject ? rej : NULL,
				p->reject ? sizeof(rej) : 0)) {
			err("rdma_reject: %s", strerror(errno));
			return EXIT_CONN;
		}
		printf("rejected the request (reason %d)\n", p->reject);
		p->rejected = true;
		return 0;
	}

	ret = setup_qp(p);
	if (ret)
		return ret;
	fill_conn_param(p, &cp, &hdr);
	/* What the request offers, within what this device can do */
	cp.responder_resources = req.responder_resources;
	if (cp.responder_resources > p->dattr.max_qp_rd_atom)
		cp.responder_resources = p->dattr.max_qp_rd_atom;
	if (p->resp_res >= 0 && p->resp_res < cp.responder_resources)
		cp.responder_resources = p->resp_res;
	cp.initiator_depth = req.initiator_depth;
	if (cp.initiator_depth > p->dattr.max_qp_init_rd_atom)
		cp.initiator_depth = p->dattr.max_qp_init_rd_atom;
	if (rdma_accept(p->id, &cp)) {
		err("rdma_accept: %s", strerror(errno));
		return EXIT_CONN;
	}
	ret = get_cm_event(p, RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (ret)
		return ret;
	rdma_ack_cm_event(ev);
	p->connected = true;
	printf("accepted (responder_resources %u initiator_depth %u)\n",
	       cp.responder_resources, cp.initiator_depth);
	return 0;
}

/*
 * Wait for the completion channel; a DISCONNECTED event meanwhile ends
 * the wait (on InfiniBand and RoCE the peer's disconnect does not flush
 * this side's queues): 0, or an EXIT_*
 */
static int wait_completion_fd(struct peer *p)
{
	struct pollfd pfd[2] = {
		{ .fd = p->cc->fd, .events = POLLIN },
		{ .fd = p->ec->fd, .events = POLLIN },
	};
	struct rdma_cm_event *ev;
	int ret;

	for (;;) {
		ret = poll(pfd, 2, ms_left(p));
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0) {
			err("poll: %s", strerror(errno));
			return EXIT_SETUP;
		}
		if (!ret) {
			err("timed out waiting for a completion");
			return EXIT_TIMEOUT;
		}
		if (pfd[0].revents)
			return 0;
		if (rdma_get_cm_event(p->ec, &ev))
			continue;
		err("waiting for a completion, got %s (status %d)",
		    rdma_event_str(ev->event), ev->status);
		ret = ev->event == RDMA_CM_EVENT_DISCONNECTED;
		rdma_ack_cm_event(ev);
		if (ret) {
			p->connected = false;
			return EXIT_CONN;
		}
	}
}

/* The completion of @wr_id: 0, or an EXIT_* */
static int wait_wc(struct peer *p, uint64_t wr_id, struct ibv_wc *out)
{
	struct ibv_wc wc;
	struct ibv_cq *cq;
	void *ctx;
	int i, n, ret;

	for (;;) {
		for (i = 0; i < p->nstash; i++) {
			if (p->stash[i].wr_id != wr_id)
				continue;
			*out = p->stash[i];
			p->stash[i] = p->stash[--p->nstash];
			goto found;
		}
		n = ibv_poll_cq(p->cq, 1, &wc);
		if (n < 0) {
			err("ibv_poll_cq failed");
			return EXIT_CONN;
		}
		if (n == 1) {
			if (wc.wr_id == wr_id) {
				*out = wc;
				goto found;
			}
			if (wc.status != IBV_WC_SUCCESS) {
				*out = wc;
				goto found;
			}
			if (p->nstash == (int)(sizeof(p->stash) /
					       sizeof(p->stash[0]))) {
				err("unexpected completion %" PRIu64,
				    (uint64_t)wc.wr_id);
				return EXIT_PROTO;
			}
			p->stash[p->nstash++] = wc;
			continue;
		}
		if (!p->cq_armed) {
			if (ibv_req_notify_cq(p->cq, 0)) {
				err("ibv_req_notify_cq failed");
				return EXIT_CONN;
			}
			p->cq_armed = true;
			continue;	/* poll once more: no event is lost */
		}
		ret = wait_completion_fd(p);
		if (ret)
			return ret;
		if (!ibv_get_cq_event(p->cc, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			p->cq_armed = false;
		}
	}
found:
	if (out->status != IBV_WC_SUCCESS) {
		err("work request %" PRIu64 " (waiting for %" PRIu64 "): %s (vendor_err 0x%x)",
		    (uint64_t)out->wr_id, wr_id, ibv_wc_status_str(out->status),
		    out->vendor_err);
		return EXIT_CONN;
	}
	if (out->wr_id != wr_id) {
		err("unexpected completion %" PRIu64, (uint64_t)out->wr_id);
		return EXIT_PROTO;
	}
	return 0;
}

static int post_send(struct peer *p, const void *data, size_t len)
{
	uint8_t *slot = p->msg_mem + MSG_SEND_SLOT * MSG_SLOT;
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot,
		.length = len,
		.lkey = p->msg_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = WRID_SEND,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int ret;

	memcpy(slot, data, len);
	ret = ibv_post_send(p->id->qp, &wr, &bad);
	if (ret) {
		err("ibv_post_send(SEND): %s", strerror(ret));
		return EXIT_CONN;
	}
	return wait_wc(p, WRID_SEND, &wc);
}

static int send_msg(struct peer *p, uint32_t type, uint32_t status)
{
	struct kvp_msg m = { htole32(type), htole32(status) };

	return post_send(p, &m, sizeof(m));
}

static int recv_msg(struct peer *p, unsigned int slot, uint32_t type,
		    uint32_t *status)
{
	struct kvp_msg m;
	struct ibv_wc wc;
	int ret;

	ret = wait_wc(p, WRID_RECV(slot), &wc);
	if (ret)
		return ret;
	if (wc.byte_len != sizeof(m)) {
		err("message %u: %u bytes, expected %zu", slot, wc.byte_len,
		    sizeof(m));
		return EXIT_PROTO;
	}
	memcpy(&m, p->msg_mem + slot * MSG_SLOT, sizeof(m));
	if (le32toh(m.type) != type) {
		err("message %u: type %u, expected %u", slot, le32toh(m.type),
		    type);
		return EXIT_PROTO;
	}
	*status = le32toh(m.status);
	return 0;
}

static int post_one(struct peer *p, enum ibv_wr_opcode opcode, uint64_t wr_id,
		    uint64_t laddr, uint32_t len, uint32_t lkey,
		    uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = laddr,
		.length = len,
		.lkey = lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int ret;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ret = ibv_post_send(p->id->qp, &wr, &bad);
	if (ret) {
		err("ibv_post_send(%s): %s",
		    opcode == IBV_WR_RDMA_WRITE ? "WRITE" : "READ",
		    strerror(ret));
		return EXIT_CONN;
	}
	return 0;
}

/*
 * krdma's key table (<linux/krdma.h>, struct krdma_token): RDMA READ of
 * 8 + 4 n bytes at remote address 0 with the token's rkey: le32 tag, le32
 * n, then the rkey of each 2^seg_shift bytes of the window's range.
 */
static int read_keys(struct peer *p)
{
	const struct kvp_token *t = &p->remote;
	uint64_t n = ((t->addr + t->length - 1) >> t->seg_shift) + 1;
	size_t bytes = (2 + n) * 4;
	struct ibv_wc wc;
	uint64_t i;
	int ret;

	if (t->seg_shift < 12 || t->seg_shift > 63 || n > KVP_MAX_KEYS) {
		err("token: seg_shift %u, %" PRIu64 " keys", t->seg_shift, n);
		return EXIT_PROTO;
	}
	p->keys = calloc(2 + n, 4);
	if (!p->keys)
		return EXIT_SETUP;
	/* iWARP: the sink of a READ is written by the peer */
	p->keys_mr = ibv_reg_mr(p->pd, p->keys, bytes, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE);
	if (!p->keys_mr) {
		err("ibv_reg_mr(key table): %s", strerror(errno));
		return EXIT_SETUP;
	}
	ret = post_one(p, IBV_WR_RDMA_READ, WRID_KEYS, (uintptr_t)p->keys,
		       bytes, p->keys_mr->lkey, 0, t->rkey);
	if (!ret)
		ret = wait_wc(p, WRID_KEYS, &wc);
	if (ret)
		return ret;
	for (i = 0; i < 2 + n; i++)
		p->keys[i] = le32toh(p->keys[i]);
	if (p->keys[0] != t->tag || p->keys[1] != n) {
		err("key table: tag 0x%x count %u, expected 0x%x %" PRIu64,
		    p->keys[0], p->keys[1], t->tag, n);
		return EXIT_PROTO;
	}
	printf("krdma key table: %" PRIu64 " keys of %" PRIu64 " bytes each\n",
	       n, (uint64_t)1 << t->seg_shift);
	return 0;
}

/*
 * RDMA WRITE or READ of p->size bytes at offset @roff of krdma's window:
 * remote_addr = addr + offset, with the token's rkey, or, when the token
 * has a key table, one work request per 2^seg_shift bytes of the range,
 * each with its key. All but the last are waited for here; the caller
 * waits for @wr_id.
 */
static int post_rdma(struct peer *p, enum ibv_wr_opcode opcode,
		     uint64_t wr_id, uint8_t *local, uint64_t roff)
{
	const struct kvp_token *t = &p->remote;
	uint64_t raddr = t->addr + roff, done = 0, n, mask;
	struct ibv_wc wc;
	int ret;

	if (!t->seg_shift)
		return post_one(p, opcode, wr_id, (uintptr_t)local, p->size,
				p->io_mr->lkey, raddr, t->rkey);
	mask = ((uint64_t)1 << t->seg_shift) - 1;
	while (done < p->size) {
		uint64_t a = raddr + done;

		n = mask - (a & mask) + 1;
		if (n > p->size - done)
			n = p->size - done;
		ret = post_one(p, opcode, done + n == p->size ? wr_id :
			       WRID_PIECE, (uintptr_t)(local + done), n,
			       p->io_mr->lkey, a,
			       p->keys[2 + (a >> t->seg_shift)]);
		if (!ret && done + n < p->size)
			ret = wait_wc(p, WRID_PIECE, &wc);
		if (ret)
			return ret;
		done += n;
	}
	return 0;
}

/* Check this peer's window after krdma wrote into it: a bitmask */
static uint32_t check_window(struct peer *p)
{
	const uint8_t *w = p->win_mem + WIN_LEAD;
	uint32_t bad = 0;
	long at;

	at = check_pattern(w + p->off + p->size, p->size, SEED_KRDMA_WRITE);
	if (at >= 0) {
		err("window: byte %ld of what krdma wrote is 0x%02x, expected 0x%02x",
		    at, w[p->off + p->size + at],
		    kvp_pattern_byte(at, SEED_KRDMA_WRITE));
		bad |= 1;
	}
	if (check_pattern(w + p->off, p->size, SEED_PEER_READ) >= 0) {
		err("window: the read region changed");
		bad |= 2;
	}
	if (check_fill(p->win_mem, WIN_LEAD + p->off, GUARD) >= 0 ||
	    check_fill(w + p->wlen, WIN_TAIL, GUARD) >= 0) {
		err("window: bytes outside the regions changed");
		bad |= 4;
	}
	return bad;
}

/*
 * krdma's token, in RECV slot 0: for a window of p->wlen bytes with (at
 * least) the rights @access
 */
static int recv_token(struct peer *p, uint32_t access)
{
	struct ibv_wc wc;
	int ret;

	ret = wait_wc(p, WRID_RECV(0), &wc);
	if (ret)
		return ret;
	if (wc.byte_len < KVP_TOKEN_MIN || wc.byte_len > sizeof(p->remote)) {
		err("token: %u bytes, expected 24 to 32", wc.byte_len);
		return EXIT_PROTO;
	}
	/* A sender may leave out the last 8 bytes: zeros */
	memset(&p->remote, 0, sizeof(p->remote));
	memcpy(&p->remote, p->msg_mem, wc.byte_len);
	p->remote.addr = le64toh(p->remote.addr);
	p->remote.length = le64toh(p->remote.length);
	p->remote.rkey = le32toh(p->remote.rkey);
	p->remote.access = le32toh(p->remote.access);
	p->remote.seg_shift = le32toh(p->remote.seg_shift);
	p->remote.tag = le32toh(p->remote.tag);
	printf("krdma token (%u bytes): addr 0x%" PRIx64 " length %" PRIu64
	       " rkey 0x%x access 0x%x seg_shift %u\n", wc.byte_len,
	       p->remote.addr, p->remote.length, p->remote.rkey,
	       p->remote.access, p->remote.seg_shift);
	if (p->remote.length != p->wlen ||
	    (p->remote.access & access) != access) {
		err("token: expected length %zu with access 0x%x", p->wlen,
		    access);
		return EXIT_PROTO;
	}
	return 0;
}

static int run_script(struct peer *p)
{
	uint8_t *sink = p->io_mem + IO_SINK + p->size;
	struct kvp_token mine;
	struct ibv_wc wc;
	uint32_t status, verdict;
	long at;
	int ret;

	if (p->send_first) {
		ret = send_msg(p, MSG_FIRST, MSG_FIRST_STATUS);
		if (ret)
			return ret;
		printf("sent FIRST\n");
	}

	ret = recv_token(p, KVP_ACCESS_REMOTE_READ | KVP_ACCESS_REMOTE_WRITE);
	if (ret)
		return ret;
	if (p->remote.seg_shift) {
		ret = read_keys(p);
		if (ret)
			return ret;
	}

	/* Ours: the MR's VA of the window, its length and rkey */
	memset(&mine, 0, sizeof(mine));
	mine.addr = htole64((uintptr_t)(p->win_mem + WIN_LEAD));
	mine.length = htole64(p->wlen);
	mine.rkey = htole32(p->win_mr->rkey);
	mine.access = htole32(KVP_ACCESS_REMOTE_READ | KVP_ACCESS_REMOTE_WRITE);
	/* One registration: the first 24 bytes are the whole token */
	ret = post_send(p, &mine, KVP_TOKEN_MIN);
	if (ret)
		return ret;

	/* Phase A: into krdma's window, and out of it */
	memset(sink - IO_TAIL, GUARD, p->size + 2 * IO_TAIL);
	ret = post_rdma(p, IBV_WR_RDMA_WRITE, WRID_WRITE, p->io_mem + IO_SRC,
			p->off + p->size);
	if (!ret)
		ret = post_rdma(p, IBV_WR_RDMA_READ, WRID_READ, sink, p->off);
	if (!ret)
		ret = wait_wc(p, WRID_WRITE, &wc);
	if (!ret)
		ret = wait_wc(p, WRID_READ, &wc);
	if (ret)
		return ret;
	status = 0;
	at = check_pattern(sink, p->size, SEED_KRDMA_READ);
	if (at >= 0) {
		err("READ: byte %ld is 0x%02x, expected 0x%02x", at, sink[at],
		    kvp_pattern_byte(at, SEED_KRDMA_READ));
		status |= 1;
	}
	if (check_fill(sink - IO_TAIL, IO_TAIL, GUARD) >= 0 ||
	    check_fill(sink + p->size, IO_TAIL, GUARD) >= 0) {
		err("READ: bytes around the sink changed");
		status |= 2;
	}
	printf("phase A: wrote %zu bytes at window offset %zu, read %zu bytes at %zu: %s\n",
	       p->size, p->off + p->size, p->size, p->off,
	       status ? "MISMATCH" : "ok");
	ret = send_msg(p, MSG_DONE_A, status);
	if (ret)
		return ret;

	/* Phase B: krdma writes and reads this window */
	ret = recv_msg(p, 1, MSG_DONE_B, &verdict);
	if (ret)
		return ret;
	verdict = check_window(p);
	printf("phase B: krdma's WRITE and READ of this window: %s\n",
	       verdict ? "MISMATCH" : "ok");
	ret = send_msg(p, MSG_VERDICT, verdict);
	if (ret)
		return ret;
	return status || verdict ? EXIT_DATA : EXIT_OK;
}

/*
 * --write-imm: one RDMA WRITE with immediate of p->size bytes (no SGE for
 * 0) at O + S of krdma's window. It consumes a RECV of krdma and places
 * nothing in it (protocol.rst, "SENDs and RECVs"); krdma checks both.
 */
static int run_write_imm(struct peer *p)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->io_mem + IO_SRC),
		.length = p->size,
		.lkey = p->io_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = WRID_WRITE_IMM,
		.sg_list = p->size ? &sge : NULL,
		.num_sge = p->size ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(p->imm),
	}, *bad;
	struct ibv_wc wc;
	uint32_t status;
	int ret, posted;

	ret = recv_token(p, KVP_ACCESS_REMOTE_WRITE);
	if (ret)
		return ret;
	/* The immediate goes with one work request: no key table */
	if (p->remote.seg_shift) {
		err("token: a key table (seg_shift %u); --write-imm needs one registration",
		    p->remote.seg_shift);
		return EXIT_PROTO;
	}
	wr.wr.rdma.remote_addr = p->remote.addr + p->off + p->size;
	wr.wr.rdma.rkey = p->remote.rkey;
	/* A provider may return a negative errno (libsiw: -EINVAL) */
	posted = ibv_post_send(p->id->qp, &wr, &bad);
	if (posted) {
		posted = posted < 0 ? -posted : posted;
		printf("write-imm: not posted: errno %d (%s)\n", posted,
		       strerror(posted));
	} else {
		ret = wait_wc(p, WRID_WRITE_IMM, &wc);
		if (ret)
			return ret;
		printf("write-imm: wrote %zu bytes with immediate 0x%08x at window offset %zu\n",
		       p->size, p->imm, p->off + p->size);
	}

	/* krdma has checked, or has seen that nothing came */
	ret = recv_msg(p, 1, MSG_DONE_B, &status);
	if (ret)
		return ret;
	return posted ? EXIT_NOT_POSTED : EXIT_OK;
}

static void disconnect(struct peer *p)
{
	struct rdma_cm_event *ev;

	if (rdma_disconnect(p->id))
		return;
	/* Bounded: the deadline still holds */
	if (!get_cm_event(p, RDMA_CM_EVENT_DISCONNECTED, &ev)) {
		rdma_ack_cm_event(ev);
		printf("disconnected\n");
	}
}

static void cleanup(struct peer *p)
{
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->keys_mr)
		ibv_dereg_mr(p->keys_mr);
	free(p->keys);
	if (p->win_mr)
		ibv_dereg_mr(p->win_mr);
	if (p->io_mr)
		ibv_dereg_mr(p->io_mr);
	if (p->msg_mr)
		ibv_dereg_mr(p->msg_mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->cc)
		ibv_destroy_comp_channel(p->cc);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->listen_id)
		rdma_destroy_id(p->listen_id);
	if (p->ec)
		rdma_destroy_event_channel(p->ec);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s -c ADDR -p PORT | -s ADDR -p PORT [-n SIZE] [-o OFFSET]\n"
		"       [-t SECONDS] [--no-hdr] [--pdata N] [--hdr-version N]\n"
		"       [--resp-res N] [--reject N] [--send-first] [--write-imm IMM]\n",
		prog);
	exit(EXIT_SETUP);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "no-hdr", no_argument, NULL, 'H' },
		{ "hdr-version", required_argument, NULL, 'V' },
		{ "resp-res", required_argument, NULL, 'R' },
		{ "pdata", required_argument, NULL, 'P' },
		{ "reject", required_argument, NULL, 'J' },
		{ "send-first", no_argument, NULL, 'F' },
		{ "write-imm", required_argument, NULL, 'I' },
		{ NULL, 0, NULL, 0 },
	};
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct peer p = {
		.size = 65536,
		.off = 3,
		.hdr_version = KVP_CM_VERSION,
		.resp_res = -1,
		.pdata_len = -1,
		.reject = -1,
	};
	unsigned long timeout = 30;
	bool have_port = false;
	int c, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "c:s:p:n:o:t:", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 's':
			p.addr = optarg;
			p.server = c == 's';
			break;
		case 'p':
			p.port = strtoul(optarg, NULL, 0);
			have_port = true;
			break;
		case 'n':
			p.size = strtoull(optarg, NULL, 0);
			break;
		case 'o':
			p.off = strtoull(optarg, NULL, 0);
			break;
		case 't':
			timeout = strtoul(optarg, NULL, 0);
			break;
		case 'H':
			p.no_hdr = true;
			break;
		case 'V':
			p.hdr_version = strtoul(optarg, NULL, 0);
			break;
		case 'R':
			p.resp_res = atoi(optarg);
			break;
		case 'P':
			p.pdata_len = atoi(optarg);
			if (p.pdata_len < 0 || p.pdata_len > 196)
				usage();
			break;
		case 'F':
			p.send_first = true;
			break;
		case 'I':
			p.write_imm = true;
			p.imm = strtoul(optarg, NULL, 0);
			break;
		case 'J':
			p.reject = atoi(optarg);
			if (p.reject < 0 || p.reject > 255)
				usage();
			break;
		default:
			usage();
		}
	}
	if (!p.addr || !have_port || optind != argc ||
	    (!p.size && !p.write_imm) ||
	    p.size > (1UL << 30) || p.off > 65536 || !timeout ||
	    (!p.server && !p.port) || p.port > 65535 ||
	    (p.server && p.send_first) || (p.write_imm && p.send_first))
		usage();
	p.wlen = p.off + 2 * p.size;
	clock_gettime(CLOCK_MONOTONIC, &p.deadline);
	p.deadline.tv_sec += timeout;
	/* A backstop: every wait is bounded by the deadline already */
	alarm(timeout + 10);

	/* siw charges registrations to RLIMIT_MEMLOCK, even for root */
	if (setrlimit(RLIMIT_MEMLOCK, &unlimited))
		err("setrlimit(RLIMIT_MEMLOCK): %s (continuing)",
		    strerror(errno));

	p.ec = rdma_create_event_channel();
	if (!p.ec) {
		err("rdma_create_event_channel: %s", strerror(errno));
		return EXIT_SETUP;
	}
	if (fcntl(p.ec->fd, F_SETFL, fcntl(p.ec->fd, F_GETFL) | O_NONBLOCK)) {
		err("fcntl: %s", strerror(errno));
		return EXIT_SETUP;
	}

	ret = p.server ? accept_server(&p) : connect_client(&p);
	if (!ret && !p.rejected)
		ret = p.write_imm ? run_write_imm(&p) : run_script(&p);
	if (p.connected && ret != EXIT_TIMEOUT)
		disconnect(&p);
	cleanup(&p);
	printf("exit %d\n", ret);
	return ret;
}
