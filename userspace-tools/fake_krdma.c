// SPDX-License-Identifier: GPL-2.0
/*
 * fake_krdma.so: a stand-in for /dev/krdma, for testing libkrdma and
 * krdmactl where krdma.ko cannot be loaded. LD_PRELOAD it: it catches
 * open() of /dev/krdma and the ioctls on that fd, and answers them like the
 * module would (the checks of <linux/krdma.h> included: size, flags,
 * __reserved, the count / fetch protocols). Test only; never installed.
 *
 * FAKE_KRDMA, a comma-separated list, picks a scenario:
 *   abi=N       report KRDMA_ABI_VERSION N
 *   features=N  report these feature bits (default KRDMA_FEATURE_DEV_QUERY)
 *   nodevs      track no device
 *   grow        a third device and more GIDs appear right after the first
 *               count, so that the callers must retry
 *   vanish      the second device is gone by the time it is queried
 *   appear=N    a third device appears at the N-th count of the devices
 *   eacces      open() fails with EACCES
 *   enotty      every ioctl fails with ENOTTY (a module without them)
 *
 * stat() of /dev/krdma sees a character device of owner node_uid=N,
 * group node_gid=N, mode node_mode=N (default root, root, 0600); euid=N,
 * egid=N and group=N (one supplementary group, none by default) are what
 * geteuid(), getegid() and getgroups() say when given.
 *
 * Connections (with features=3): BUF_REG, GRANT and SUBMIT check access
 * as the module does, LISTEN refuses a port below 1024 (EACCES, as for a
 * caller without CAP_NET_BIND_SERVICE), CONNECT always succeeds;
 * KRDMA_LISTEN_KRDMA_PEER and KRDMA_CONNECT_KRDMA_PEER are taken only with
 * the feature bit KRDMA_FEATURE_KRDMA_PEER (features=7), EINVAL otherwise;
 *   grant_err=N   GRANT fails with errno N
 *   submit_err=N  SUBMIT fails with errno N
 *   listen_err=N  LISTEN fails with errno N
 *   connect_err=N CONNECT fails with errno N (a reject reason: EBUSY, ...)
 *   peer_only     LISTEN and CONNECT without the KRDMA_PEER flag fail with
 *                 EDOM, an errno nothing else returns
 *   peer          a `krdmactl ping` client, in a few steps: ACCEPT hands out
 *                 its connection; when a WELCOME is sent, it answers with
 *                 HELLO (a window of 4 KiB); when a TOKEN is sent, it
 *                 disconnects. Enough for serve to grant a window.
 * An ACCEPT with a timeout (not KRDMA_TIMEOUT_INFINITE) waits 10 ms for
 * each group of refuse (below) and fails with ETIMEDOUT; then it hands out
 * the peer, if any; then nobody else comes: it raises SIGINT, as an
 * operator's ^C, and fails with EINTR. Without a timeout it fails with
 * ETIMEDOUT at once when there is nothing to hand out.
 * LISTEN_QUERY (with KRDMA_FEATURE_LISTEN_QUERY, features=71; ENOTTY
 * without) reports the listener LISTEN made and what it refused:
 *   refuse=G+G+...  each G, digits of KRDMA_REFUSED_* reasons, is what the
 *                   listener refuses while one ACCEPT waits: the n-th
 *                   refusal (from 1) comes from 198.18.0.2, port 45677 + n
 *                   (refuse=2+35: one "not krdma" in the first wait, one
 *                   "backlog" and one "no resources" in the second)
 *   listen_query_err=N  LISTEN_QUERY fails with errno N
 *
 * RDMA netlink (NETLINK_RDMA, for up, down and doctor): every such socket
 * is a fake one, so that no test creates or deletes a device of the host.
 * It answers RDMA_NLDEV_CMD_GET (a dump), PORT_GET (port 1: ACTIVE, its
 * netdev), NEWLINK, DELLINK and SYS_GET (netns mode shared) from
 *   nl=NAME:TYPE:NETDEV+...  the RDMA devices there are (TYPE rxe or siw);
 *                            none by default. NEWLINK adds one (EEXIST for
 *                            a name taken), DELLINK removes one.
 *   nl_newlink_err=N         NEWLINK fails with errno N
 * Host names: with hosts=NAME@IP+NAME@IP..., getaddrinfo() knows only
 * those names (EAI_NONAME for any other); resolver_down makes it fail
 * with EAI_AGAIN, as without a name server.
 * Under $KRDMA_DEBUGFS, the k-th fopen() of a file opens FILE.k when
 * there is one (k from 1): samples that change, for stat and monitor.
 * FAKE_PROC_MODULES names a file that fopen() of /proc/modules opens
 * instead, and the modules.builtin of the kernel is empty, so that the
 * modules a test's own modprobe "loads" are what krdmactl sees.
 *
 * krdma_blk (krdmactl blk): under $KRDMA_BLK_SYSFS, a directory the test
 * makes with the files attach, detach and devices, a write() to attach or
 * detach does what the module does with it: attach ("ADDR PORT
 * [queues=N] [depth=D]") adds the line "krdmablkK ADDR PORT SIZE QUEUES
 * DEPTH live" to devices (K the lowest free; queues 4, depth 64 unless
 * given), EINVAL for anything else; detach ("krdmablkK" or "K") removes
 * that line, ENOENT when there is none. The file written keeps the last
 * text, for the test to read.
 *   blk_eacces  open() of attach and detach fails with EACCES (not root)
 *   blk_err=N   a write to attach or detach fails with errno N
 *   blk_size=N  the size of an attached device (default 64 MiB)
 *   blk_cpus=N  at most N queues (one per CPU, as blk-mq makes them)
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <linux/krdma.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>

#include "libkrdma.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int fake_fd = -1;
static int nl_fd = -1;
/* the open attach and detach of $KRDMA_BLK_SYSFS */
static int blk_fd[2] = { -1, -1 };

static bool opt(const char *name)
{
	const char *s = getenv("FAKE_KRDMA");
	size_t len = strlen(name);

	while (s && *s) {
		if (!strncmp(s, name, len) && (s[len] == ',' || !s[len] ||
					       s[len] == '='))
			return true;
		s = strchr(s, ',');
		if (s)
			s++;
	}
	return false;
}

static unsigned long opt_num(const char *name, unsigned long def)
{
	const char *s = getenv("FAKE_KRDMA");
	size_t len = strlen(name);

	while (s && *s) {
		if (!strncmp(s, name, len) && s[len] == '=')
			return strtoul(s + len + 1, NULL, 0);
		s = strchr(s, ',');
		if (s)
			s++;
	}
	return def;
}

struct fake_port {
	struct krdma_port_query pq;
	struct krdma_gid_entry gids[4];
	uint32_t ngids;
};

struct fake_dev {
	struct krdma_dev_query dq;
	struct fake_port ports[2];
};

static struct fake_dev devs[3];
static uint32_t ndevs;
static bool set_up;

static void gid_v4(struct krdma_gid_entry *e, uint32_t index, uint8_t a,
		   uint8_t b, uint8_t c, uint8_t d)
{
	memset(e, 0, sizeof(*e));
	e->gid[10] = 0xff;
	e->gid[11] = 0xff;
	e->gid[12] = a;
	e->gid[13] = b;
	e->gid[14] = c;
	e->gid[15] = d;
	e->index = index;
	e->type = KRDMA_GID_TYPE_ROCE_V2;
	e->netdev_ifindex = 1;
}

static void gid_ll(struct krdma_gid_entry *e, uint32_t index, uint32_t type)
{
	static const uint8_t ll[16] = {
		0xfe, 0x80, 0, 0, 0, 0, 0, 0,
		0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56
	};

	memset(e, 0, sizeof(*e));
	memcpy(e->gid, ll, sizeof(ll));
	e->index = index;
	e->type = type;
	e->netdev_ifindex = 1;
}

static void fill_dev(struct fake_dev *d, uint32_t index, const char *name,
		     uint32_t transport, uint32_t nports)
{
	memset(d, 0, sizeof(*d));
	d->dq.dev_index = index;
	d->dq.transport = transport;
	strcpy((char *)d->dq.name, name);
	d->dq.node_guid = 0x505400fffe123456ULL + index;
	d->dq.sys_image_guid = 0x505400fffe123456ULL + index;
	d->dq.max_mr_size = UINT64_MAX;
	d->dq.page_size_cap = 0xfffff000;
	memcpy(d->dq.fw_ver, "2.3.4", 6);
	d->dq.vendor_id = 0xffffff;
	d->dq.phys_port_cnt = nports;
	d->dq.max_qp = 1048560;
	d->dq.max_qp_wr = 1048576;
	d->dq.max_send_sge = 32;
	d->dq.max_recv_sge = 32;
	d->dq.max_sge_rd = 32;
	d->dq.max_cq = 1048576;
	d->dq.max_cqe = 32767;
	d->dq.max_mr = 524287;
	d->dq.max_pd = 1048576;
	d->dq.max_qp_rd_atom = 128;
	d->dq.max_qp_init_rd_atom = 128;
	d->dq.atomic_cap = transport == KRDMA_TRANSPORT_IWARP ?
			   KRDMA_ATOMIC_NONE : KRDMA_ATOMIC_HCA;
	d->dq.max_fast_reg_page_list_len = 512;
}

static void set_up_devs(void)
{
	struct fake_port *p;

	if (set_up)
		return;
	set_up = true;
	if (opt("nodevs"))
		return;

	fill_dev(&devs[0], 3, "rxe0", KRDMA_TRANSPORT_ROCE, 1);
	p = &devs[0].ports[0];
	p->pq.state = KRDMA_PORT_ACTIVE;
	p->pq.phys_state = 5;
	p->pq.max_mtu = 4096;
	p->pq.active_mtu = 1024;
	p->pq.link_layer = KRDMA_LINK_LAYER_ETHERNET;
	p->pq.gid_tbl_len = 1024;
	p->pq.netdev_ifindex = 1;
	strcpy((char *)p->pq.netdev_name, "lo");
	p->pq.active_speed = 32;
	p->pq.active_width = 2;
	gid_ll(&p->gids[0], 0, KRDMA_GID_TYPE_ROCE_V2);
	gid_ll(&p->gids[1], 1, KRDMA_GID_TYPE_ROCE_V1);
	gid_v4(&p->gids[2], 2, 10, 0, 2, 15);
	p->ngids = 3;

	/* a name that needs escaping in JSON, and invalid UTF-8 */
	fill_dev(&devs[1], 7, "we\"ird\\dev\t\xc3\xa9\xff",
		 KRDMA_TRANSPORT_IWARP, 2);
	/* no firmware version string, as rxe and siw */
	memset(devs[1].dq.fw_ver, 0, sizeof(devs[1].dq.fw_ver));
	p = &devs[1].ports[0];
	p->pq.state = KRDMA_PORT_ACTIVE;
	p->pq.phys_state = 5;
	p->pq.max_mtu = 4096;
	p->pq.active_mtu = 4096;
	p->pq.link_layer = KRDMA_LINK_LAYER_ETHERNET;
	p->pq.gid_tbl_len = 16;
	gid_v4(&p->gids[0], 0, 192, 168, 1, 2);
	p->gids[0].type = KRDMA_GID_TYPE_IB;
	p->gids[0].netdev_ifindex = 0;
	p->ngids = 1;
	p = &devs[1].ports[1];
	p->pq.state = KRDMA_PORT_DOWN;
	p->pq.phys_state = 3;
	p->pq.max_mtu = 4096;
	p->pq.active_mtu = 256;
	p->pq.link_layer = KRDMA_LINK_LAYER_ETHERNET;
	p->pq.gid_tbl_len = 16;
	ndevs = 2;
}

/*
 * After the first count of devices (grow), or the N-th (appear=N): another
 * device
 */
static void grow_devs(void)
{
	static unsigned int counts;
	static bool grown;

	counts++;
	if (opt("appear") && counts >= opt_num("appear", 0) && !grown &&
	    ndevs) {
		grown = true;
		fill_dev(&devs[2], 9, "siw1", KRDMA_TRANSPORT_IWARP, 1);
		devs[2].ports[0].pq.state = KRDMA_PORT_INIT;
		ndevs = 3;
		return;
	}
	if (!opt("grow") || grown || !ndevs)
		return;
	grown = true;
	fill_dev(&devs[2], 9, "siw1", KRDMA_TRANSPORT_IWARP, 1);
	devs[2].ports[0].pq.state = KRDMA_PORT_INIT;
	devs[2].ports[0].pq.phys_state = 2;
	ndevs = 3;
}

/* After the first count of the GIDs of rxe0: one more GID. */
static void grow_gids(struct fake_dev *d)
{
	struct fake_port *p = &d->ports[0];
	static bool grown;

	if (!opt("grow") || grown || d != &devs[0])
		return;
	grown = true;
	gid_v4(&p->gids[p->ngids], p->ngids, 10, 0, 2, 16);
	p->ngids++;
}

/* copy_struct_from_user() and the must-be-zero rules */
static int check_in(const void *arg, uint32_t want, uint32_t flags,
		    uint64_t reserved)
{
	uint32_t size;

	memcpy(&size, arg, sizeof(size));
	if (size != want)	/* only one layout so far */
		return -EINVAL;
	if (flags || reserved)
		return -EINVAL;
	return 0;
}

static struct fake_dev *find_dev(uint32_t index)
{
	uint32_t i;

	if (opt("vanish") && index == 7)
		return NULL;
	for (i = 0; i < ndevs; i++)
		if (devs[i].dq.dev_index == index)
			return &devs[i];
	return NULL;
}

/*
 * Connections: one connection, a few buffers, a completion queue, and the
 * RECVs posted on the connection.
 */
#define FAKE_MAX_BUFS 8
#define FAKE_MAX_RECVS 16
#define FAKE_MAX_WC 64
#define FAKE_HANDLE_BASE 100

/* of krdmactl_ping.c: its protocol's messages */
#define KP_MAGIC 0x474e504bU
#define KP_WELCOME 1
#define KP_HELLO 2
#define KP_TOKEN 3

struct fake_buf {
	uint32_t handle;
	uint8_t *addr;
	uint64_t length;
	uint32_t access;
};

static struct fake_buf bufs[FAKE_MAX_BUFS];
static uint32_t next_handle = FAKE_HANDLE_BASE;
static uint32_t conn_handle;
static bool conn_down, accepted;
/* The listener, and what it refused (refuse=) */
static struct krdma_listen listener;
static struct krdma_listen_query refused;
static unsigned int refuse_groups;
static struct krdma_op recvs[FAKE_MAX_RECVS];
static unsigned int nrecvs;
static struct krdma_completion cq[FAKE_MAX_WC];
static unsigned int ncq;

static struct fake_buf *find_buf(uint32_t handle)
{
	unsigned int i;

	for (i = 0; i < FAKE_MAX_BUFS; i++)
		if (bufs[i].handle && bufs[i].handle == handle)
			return &bufs[i];
	return NULL;
}

static void complete(const struct krdma_op *op, uint32_t status,
		     uint32_t byte_len)
{
	struct krdma_completion *wc;

	if (ncq == FAKE_MAX_WC)
		abort();	/* a test that never polls */
	wc = &cq[ncq++];
	memset(wc, 0, sizeof(*wc));
	wc->cookie = op->cookie;
	wc->status = status;
	wc->opcode = op->opcode;
	wc->byte_len = status ? 0 : byte_len;
	wc->conn = op->conn;
}

/* The peer sends @type into the oldest RECV */
static void peer_send(uint8_t type, uint64_t length)
{
	struct krdma_op *op = &recvs[0];
	uint32_t magic = htole32(KP_MAGIC);
	struct fake_buf *b;
	uint8_t *p;

	if (!nrecvs)
		abort();	/* a SEND without a RECV: a bug of the caller */
	b = find_buf(op->sge.buf);
	p = b->addr + op->sge.offset;
	memset(p, 0, 64);
	length = htole64(length);	/* every field little-endian */
	memcpy(p, &magic, 4);
	p[4] = 1;			/* version */
	p[5] = type;
	memcpy(p + 16, &length, 8);
	complete(op, KRDMA_WC_SUCCESS, 64);
	memmove(recvs, recvs + 1, --nrecvs * sizeof(*recvs));
}

/* The peer goes: the RECVs are flushed, the connection is down */
static void peer_disconnect(void)
{
	unsigned int i;

	for (i = 0; i < nrecvs; i++)
		complete(&recvs[i], KRDMA_WC_WR_FLUSH_ERR, 0);
	nrecvs = 0;
	conn_down = true;
}

static int fake_buf_reg(struct krdma_buf_reg *r)
{
	unsigned int i;

	if (check_in(r, sizeof(*r), r->flags, 0))
		return -EINVAL;
	if (!r->length || r->access & ~(uint32_t)(KRDMA_ACCESS_LOCAL_WRITE |
						  KRDMA_ACCESS_REMOTE_READ |
						  KRDMA_ACCESS_REMOTE_WRITE |
						  KRDMA_ACCESS_REMOTE_ATOMIC))
		return -EINVAL;
	for (i = 0; i < FAKE_MAX_BUFS; i++) {
		if (bufs[i].handle)
			continue;
		bufs[i].handle = next_handle++;
		bufs[i].addr = (uint8_t *)(uintptr_t)r->addr;
		bufs[i].length = r->length;
		bufs[i].access = r->access;
		r->handle = bufs[i].handle;
		return 0;
	}
	return -EMFILE;
}

static int fake_grant(struct krdma_grant *g)
{
	struct fake_buf *b;

	if (check_in(g, sizeof(*g), g->flags, 0))
		return -EINVAL;
	if (opt("grant_err"))
		return -(int)opt_num("grant_err", EIO);
	b = find_buf(g->buf);
	if (!b || g->conn != conn_handle || !g->length ||
	    g->offset + g->length > b->length)
		return -EINVAL;
	if (conn_down)
		return -ENOTCONN;
	if (g->access & ~b->access)
		return -EACCES;
	g->handle = next_handle++;
	memset(&g->token, 0, sizeof(g->token));
	g->token.addr = g->offset;
	g->token.length = g->length;
	g->token.rkey = 0x1234;
	g->token.access = g->access;
	return 0;
}

static int fake_submit(struct krdma_submit *sub)
{
	struct krdma_op *ops = (struct krdma_op *)(uintptr_t)sub->ops;
	uint32_t i;

	if (check_in(sub, sizeof(*sub), sub->flags & ~KRDMA_SUBMIT_WAIT, 0))
		return -EINVAL;
	sub->submitted = 0;
	if (opt("submit_err"))
		return -(int)opt_num("submit_err", EIO);
	for (i = 0; i < sub->count; i++) {
		struct krdma_op *op = &ops[i];
		struct fake_buf *b = find_buf(op->sge.buf);
		uint8_t type;

		if (op->conn != conn_handle || op->num_sge != 1 || !b)
			return -EINVAL;
		if ((op->opcode == KRDMA_OP_READ || op->opcode == KRDMA_OP_RECV ||
		     op->opcode == KRDMA_OP_FETCH_ADD ||
		     op->opcode == KRDMA_OP_CMP_SWAP) &&
		    !(b->access & KRDMA_ACCESS_LOCAL_WRITE))
			return -EACCES;
		if (conn_down)
			return -ENOTCONN;
		switch (op->opcode) {
		case KRDMA_OP_RECV:
			if (nrecvs == FAKE_MAX_RECVS)
				return -ENOBUFS;
			recvs[nrecvs++] = *op;
			break;
		case KRDMA_OP_SEND:
			type = b->addr[op->sge.offset + 5];
			complete(op, KRDMA_WC_SUCCESS, op->sge.length);
			if (opt("peer") && type == KP_WELCOME)
				peer_send(KP_HELLO, 4096);
			else if (opt("peer") && type == KP_TOKEN)
				peer_disconnect();
			break;
		default:
			complete(op, KRDMA_WC_SUCCESS, op->sge.length);
		}
		sub->submitted++;
	}
	return 0;
}

static int fake_poll(struct krdma_poll *p)
{
	struct krdma_completion *out =
		(struct krdma_completion *)(uintptr_t)p->completions;
	struct timespec ts = { 0, 10 * 1000000L };

	if (check_in(p, sizeof(*p), p->flags, p->__reserved))
		return -EINVAL;
	p->count = 0;
	if (!ncq) {
		/* nothing will come: no busy loop until the caller's timeout */
		if (p->timeout_ms)
			nanosleep(&ts, NULL);
		return 0;
	}
	while (p->count < p->max && p->count < ncq) {
		out[p->count] = cq[p->count];
		p->count++;
	}
	memmove(cq, cq + p->count, (ncq - p->count) * sizeof(*cq));
	ncq -= p->count;
	return 0;
}

/* Group @k (from 0) of refuse=G+G+...: its digits; NULL past the last */
static const char *refuse_group(unsigned int k, size_t *len)
{
	const char *s = getenv("FAKE_KRDMA");

	while (s && *s && strncmp(s, "refuse=", 7)) {
		s = strchr(s, ',');
		if (s)
			s++;
	}
	if (!s || !*s)
		return NULL;
	s += 7;
	while (k--) {
		s += strcspn(s, "+,");
		if (*s != '+')
			return NULL;
		s++;
	}
	*len = strcspn(s, "+,");
	return s;
}

/* The listener refuses the next group of requests; false when none is left */
static bool refuse_next(void)
{
	const char *g;
	__u64 *count;
	size_t len, i;

	g = refuse_group(refuse_groups, &len);
	if (!g)
		return false;
	refuse_groups++;
	for (i = 0; i < len; i++) {
		/* NULL: a reason of a newer module */
		count = krdma_refused_counter(&refused, g[i] - '0');
		if (count)
			(*count)++;
		refused.refused++;
		refused.last_refused_reason = g[i] - '0';
		refused.last_refused_peer.family = AF_INET;
		memcpy(refused.last_refused_peer.addr, "\xc6\x12\x00\x02", 4);
		refused.last_refused_peer.port = 45677 + refused.refused;
	}
	return true;
}

static int fake_listen_query(struct krdma_listen_query *q)
{
	static const uint8_t zero[sizeof(*q)];
	const size_t out = offsetof(struct krdma_listen_query, state);

	if (!(opt_num("features", KRDMA_FEATURE_DEV_QUERY) &
	      KRDMA_FEATURE_LISTEN_QUERY))
		return -ENOTTY;
	if (check_in(q, sizeof(*q), q->flags, q->__reserved))
		return -EINVAL;
	if (opt("listen_query_err"))
		return -(int)opt_num("listen_query_err", EIO);
	if (memcmp((uint8_t *)q + out, zero, sizeof(*q) - out))
		return -EINVAL;	/* outputs: zeroed by the caller */
	if (!q->handle || q->handle != listener.handle)
		return -ENOENT;
	*q = refused;
	q->size = sizeof(*q);
	q->handle = listener.handle;
	q->state = KRDMA_LISTENER_LISTENING;
	q->addr = listener.addr;
	q->backlog = listener.backlog ? listener.backlog : 16;
	return 0;
}

/* The KRDMA_PEER flag of LISTEN and CONNECT (bit 0 of both), if known */
static uint32_t peer_flag(void)
{
	_Static_assert(KRDMA_LISTEN_KRDMA_PEER == KRDMA_CONNECT_KRDMA_PEER,
		       "one bit");
	return opt_num("features", KRDMA_FEATURE_DEV_QUERY) &
	       KRDMA_FEATURE_KRDMA_PEER ? KRDMA_LISTEN_KRDMA_PEER : 0;
}

static int fake_conn_ioctl(unsigned long cmd, void *arg)
{
	switch (cmd) {
	case KRDMA_IOC_LISTEN: {
		struct krdma_listen *l = arg;

		if (check_in(l, sizeof(*l), l->flags & ~peer_flag(), 0))
			return -EINVAL;
		if (opt("peer_only") && !(l->flags & KRDMA_LISTEN_KRDMA_PEER))
			return -EDOM;
		if (opt("listen_err"))
			return -(int)opt_num("listen_err", EIO);
		if (l->addr.port && l->addr.port < 1024)
			return -EACCES;
		if (!l->addr.port)
			l->addr.port = 40000;
		l->handle = next_handle++;
		listener = *l;
		return 0;
	}
	case KRDMA_IOC_ACCEPT: {
		struct krdma_accept *a = arg;
		struct timespec ts = { 0, 10 * 1000000L };
		bool waits = a->timeout_ms != KRDMA_TIMEOUT_INFINITE;

		if (check_in(a, sizeof(*a), a->flags, a->recv_count))
			return -EINVAL;
		if (waits && refuse_next()) {
			nanosleep(&ts, NULL);
			return -ETIMEDOUT;
		}
		if (opt("peer") && !accepted) {
			accepted = true;
			conn_handle = a->handle = next_handle++;
			return 0;
		}
		/* Nobody else comes: without a limit, no wait at all */
		if (!waits)
			return -ETIMEDOUT;
		raise(SIGINT);
		return -EINTR;
	}
	case KRDMA_IOC_LISTEN_QUERY:
		return fake_listen_query(arg);
	case KRDMA_IOC_CONNECT: {
		struct krdma_connect *c = arg;

		if (check_in(c, sizeof(*c), c->flags & ~peer_flag(), 0))
			return -EINVAL;
		if (opt("peer_only") && !(c->flags & KRDMA_CONNECT_KRDMA_PEER))
			return -EDOM;
		if (opt("connect_err"))
			return -(int)opt_num("connect_err", EIO);
		conn_handle = c->handle = next_handle++;
		return 0;
	}
	case KRDMA_IOC_CONN_QUERY: {
		struct krdma_conn_query *q = arg;

		if (check_in(q, sizeof(*q), q->flags, q->__reserved))
			return -EINVAL;
		if (q->handle != conn_handle)
			return -EINVAL;
		q->state = conn_down ? KRDMA_CONN_ERROR : KRDMA_CONN_CONNECTED;
		q->dev_index = 3;
		q->port_num = 1;
		q->peer.family = AF_INET;
		q->peer.port = 41234;
		memcpy(q->peer.addr, "\xc6\x12\x00\x02", 4);
		return 0;
	}
	case KRDMA_IOC_BUF_REG:
		return fake_buf_reg(arg);
	case KRDMA_IOC_GRANT:
		return fake_grant(arg);
	case KRDMA_IOC_SUBMIT:
		return fake_submit(arg);
	case KRDMA_IOC_POLL:
		return fake_poll(arg);
	case KRDMA_IOC_DISCONNECT:
	case KRDMA_IOC_DESTROY: {
		struct krdma_destroy *d = arg;	/* the same layout */
		unsigned int i;

		if (check_in(d, sizeof(*d), d->flags, d->__reserved))
			return -EINVAL;
		for (i = 0; i < FAKE_MAX_BUFS; i++)
			if (bufs[i].handle == d->handle)
				bufs[i].handle = 0;
		if (cmd == KRDMA_IOC_DESTROY && d->handle == listener.handle)
			listener.handle = 0;
		return 0;
	}
	}
	return -ENOTTY;
}

static int fake_ioctl(unsigned long cmd, void *arg)
{
	int err;

	if (opt("enotty"))
		return -ENOTTY;
	set_up_devs();

	switch (cmd) {
	case KRDMA_IOC_QUERY_MODULE: {
		struct krdma_query_module *q = arg;

		err = check_in(q, sizeof(*q), q->flags, q->__reserved);
		if (err)
			return err;
		if (q->abi_version || q->version || q->features ||
		    q->num_devices)
			return -EINVAL;	/* outputs: zeroed by the caller */
		q->abi_version = opt_num("abi", KRDMA_ABI_VERSION);
		q->version = KRDMA_VERSION_CODE(0, 1, 0);
		q->features = opt_num("features", KRDMA_FEATURE_DEV_QUERY);
		q->num_devices = ndevs;
		return 0;
	}
	case KRDMA_IOC_DEV_LIST: {
		struct krdma_dev_list *l = arg;
		uint32_t *out = (uint32_t *)(uintptr_t)l->dev_indexes;
		uint32_t i;

		err = check_in(l, sizeof(*l), l->flags, l->__reserved);
		if (err)
			return err;
		if (l->num_devices && !out)
			return -EFAULT;
		for (i = 0; i < ndevs && i < l->num_devices; i++)
			out[i] = devs[i].dq.dev_index;
		l->num_devices = ndevs;
		if (!out)
			grow_devs();
		return 0;
	}
	case KRDMA_IOC_DEV_QUERY: {
		struct krdma_dev_query *q = arg;
		struct fake_dev *d;

		err = check_in(q, sizeof(*q), q->flags, q->__reserved);
		if (err)
			return err;
		d = find_dev(q->dev_index);
		if (!d)
			return -ENODEV;
		*q = d->dq;
		q->size = sizeof(*q);
		return 0;
	}
	case KRDMA_IOC_PORT_QUERY: {
		struct krdma_port_query *q = arg;
		struct krdma_gid_entry *out = (void *)(uintptr_t)q->gids;
		struct fake_dev *d;
		struct fake_port *p;
		uint32_t i, cap = q->num_gids;

		err = check_in(q, sizeof(*q), q->flags, q->__reserved);
		if (err)
			return err;
		d = find_dev(q->dev_index);
		if (!d)
			return -ENODEV;
		if (q->port_num < 1 || q->port_num > d->dq.phys_port_cnt)
			return -EINVAL;
		if (cap && !out)
			return -EFAULT;
		p = &d->ports[q->port_num - 1];
		for (i = 0; i < p->ngids && i < cap; i++)
			out[i] = p->gids[i];
		q->state = p->pq.state;
		q->phys_state = p->pq.phys_state;
		q->max_mtu = p->pq.max_mtu;
		q->active_mtu = p->pq.active_mtu;
		q->link_layer = p->pq.link_layer;
		q->gid_tbl_len = p->pq.gid_tbl_len;
		q->netdev_ifindex = p->pq.netdev_ifindex;
		q->num_gids = p->ngids;
		memcpy(q->netdev_name, p->pq.netdev_name,
		       sizeof(q->netdev_name));
		q->active_speed = p->pq.active_speed;
		q->active_width = p->pq.active_width;
		if (!out)
			grow_gids(d);
		return 0;
	}
	}
	if (opt_num("features", KRDMA_FEATURE_DEV_QUERY) & KRDMA_FEATURE_CONN)
		return fake_conn_ioctl(cmd, arg);
	return -ENOTTY;
}

/*
 * krdma_blk's sysfs files
 */
static const char *const blk_files[2] = { "attach", "detach" };

/* 0: $KRDMA_BLK_SYSFS/attach, 1: its detach, -1: another file */
static int blk_file(const char *path)
{
	const char *dir = getenv("KRDMA_BLK_SYSFS");
	size_t n = dir ? strlen(dir) : 0;
	int i;

	if (!n || strncmp(path, dir, n) || path[n] != '/')
		return -1;
	for (i = 0; i < 2; i++)
		if (!strcmp(path + n + 1, blk_files[i]))
			return i;
	return -1;
}

/* devices into @buf (NUL-terminated); false if it cannot be read */
static bool blk_read_devices(char *buf, size_t len)
{
	char path[4096];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/devices", getenv("KRDMA_BLK_SYSFS"));
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return true;
}

static int blk_write_devices(const char *buf)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/devices", getenv("KRDMA_BLK_SYSFS"));
	f = fopen(path, "w");
	if (!f)
		return -EIO;
	fputs(buf, f);
	return fclose(f) ? -EIO : 0;
}

/* A whole decimal number in [min, max] (kstrtouint, a newline allowed) */
static bool blk_num(const char *s, unsigned long min, unsigned long max,
		    unsigned long *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoul(s, &end, 10);
	return !errno && !*end && *v >= min && *v <= max;
}

/* The start of the line of device @k in @devs, or NULL */
static char *blk_line(char *devs, unsigned long k)
{
	char name[32], *l;
	size_t n;

	n = snprintf(name, sizeof(name), "krdmablk%lu ", k);
	for (l = devs; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, name, n))
			return l;
	return NULL;
}

/* What krdma_blk does with a write of @len bytes to attach or detach */
static int blk_store(int which, const char *data, size_t len)
{
	char text[256], devs[8192], *tok, *save = NULL, *l, *end;
	char addr[INET_ADDRSTRLEN] = "";
	unsigned long port = 0, queues = 4, depth = 64, k, v;
	struct in_addr ip;
	size_t n;
	int i;

	if (len >= sizeof(text))
		return -EINVAL;
	memcpy(text, data, len);
	text[len] = 0;
	if (len && text[len - 1] == '\n')
		text[len - 1] = 0;
	if (!blk_read_devices(devs, sizeof(devs)))
		return -EIO;
	if (which == 1) {
		tok = text;
		if (!strncmp(tok, "krdmablk", 8))
			tok += 8;
		if (!blk_num(tok, 0, 1000000, &k))
			return -EINVAL;
		l = blk_line(devs, k);
		if (!l)
			return -ENOENT;
		end = strchr(l, '\n');
		memmove(l, end ? end + 1 : l + strlen(l),
			strlen(end ? end + 1 : l + strlen(l)) + 1);
		return blk_write_devices(devs);
	}
	for (i = 0, tok = strtok_r(text, " ", &save); tok;
	     i++, tok = strtok_r(NULL, " ", &save)) {
		if (i == 0 && inet_pton(AF_INET, tok, &ip) == 1)
			snprintf(addr, sizeof(addr), "%s", tok);
		else if (i == 0)
			return -EINVAL;
		else if (i == 1 && !blk_num(tok, 1, 65535, &port))
			return -EINVAL;
		else if (i > 1 && !strncmp(tok, "queues=", 7) &&
			 blk_num(tok + 7, 1, 64, &v))
			queues = v;
		else if (i > 1 && !strncmp(tok, "depth=", 6) &&
			 blk_num(tok + 6, 1, 256, &v))
			depth = v;
		else if (i > 1)
			return -EINVAL;
	}
	if (i < 2)
		return -EINVAL;
	if (queues > opt_num("blk_cpus", 64))
		queues = opt_num("blk_cpus", 64);
	for (k = 0; blk_line(devs, k); k++)
		;
	n = strlen(devs);
	snprintf(devs + n, sizeof(devs) - n, "krdmablk%lu %s %lu %lu %lu %lu live\n",
		 k, addr, port, opt_num("blk_size", 64UL << 20), queues,
		 depth);
	return blk_write_devices(devs);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	ssize_t (*real)(int, const void *, size_t) = dlsym(RTLD_NEXT, "write");
	int which = fd < 0 ? -1 : fd == blk_fd[0] ? 0 : fd == blk_fd[1] ? 1 : -1;
	int err;

	if (which < 0)
		return real(fd, buf, len);
	err = opt("blk_err") ? -(int)opt_num("blk_err", EIO) :
	      blk_store(which, buf, len);
	if (err) {
		errno = -err;
		return -1;
	}
	/* the record of what was written */
	if (real(fd, buf, len) < 0)
		return -1;
	return len;
}

static int do_open(const char *path, int flags, mode_t mode,
		   const char *sym)
{
	int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, sym);
	int blk = blk_file(path);

	if (blk >= 0) {
		int fd;

		if (opt("blk_eacces")) {
			errno = EACCES;
			return -1;
		}
		fd = real(path, flags, mode);
		if (fd >= 0)
			blk_fd[blk] = fd;
		return fd;
	}

	if (!strcmp(path, "/dev/krdma")) {
		if (opt("eacces")) {
			errno = EACCES;
			return -1;
		}
		fake_fd = real("/dev/null", flags & (O_RDWR | O_CLOEXEC));
		return fake_fd;
	}
	return real(path, flags, mode);
}

#define OPEN_MODE(flags, mode) do {					\
	if ((flags) & (O_CREAT | O_TMPFILE)) {				\
		va_list ap;						\
		va_start(ap, flags);					\
		mode = va_arg(ap, mode_t);				\
		va_end(ap);						\
	}								\
} while (0)

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	OPEN_MODE(flags, mode);
	return do_open(path, flags, mode, "open");
}

int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;

	OPEN_MODE(flags, mode);
	return do_open(path, flags, mode, "open64");
}

int __open_2(const char *path, int flags)
{
	return do_open(path, flags, 0, "open");
}

int __open64_2(const char *path, int flags)
{
	return do_open(path, flags, 0, "open64");
}

int close(int fd)
{
	int (*real)(int) = dlsym(RTLD_NEXT, "close");

	if (fd >= 0 && fd == fake_fd)
		fake_fd = -1;
	if (fd >= 0 && fd == nl_fd)
		nl_fd = -1;
	if (fd >= 0 && fd == blk_fd[0])
		blk_fd[0] = -1;
	if (fd >= 0 && fd == blk_fd[1])
		blk_fd[1] = -1;
	return real(fd);
}

int ioctl(int fd, unsigned long cmd, ...)
{
	int (*real)(int, unsigned long, ...) = dlsym(RTLD_NEXT, "ioctl");
	va_list ap;
	void *arg;
	int err;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);

	if (fd < 0 || fd != fake_fd)
		return real(fd, cmd, arg);
	err = fake_ioctl(cmd, arg);
	if (err) {
		errno = -err;
		return -1;
	}
	return 0;
}

/* /dev/krdma as the node_* options make it */
static bool fake_node(const char *path, struct stat *st)
{
	if (strcmp(path, "/dev/krdma"))
		return false;
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFCHR | (opt_num("node_mode", 0600) & 07777);
	st->st_uid = opt_num("node_uid", 0);
	st->st_gid = opt_num("node_gid", 0);
	st->st_nlink = 1;
	st->st_rdev = makedev(10, 123);
	return true;
}

#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33)
int stat(const char *path, struct stat *st)
{
	int (*real)(const char *, struct stat *) = dlsym(RTLD_NEXT, "stat");

	if (fake_node(path, st))
		return 0;
	return real(path, st);
}
#else
/* stat() calls this in glibc before 2.33 */
int __xstat(int ver, const char *path, struct stat *st)
{
	int (*real)(int, const char *, struct stat *) =
		dlsym(RTLD_NEXT, "__xstat");

	if (fake_node(path, st))
		return 0;
	return real(ver, path, st);
}
#endif

uid_t geteuid(void)
{
	uid_t (*real)(void) = dlsym(RTLD_NEXT, "geteuid");

	return opt("euid") ? (uid_t)opt_num("euid", 0) : real();
}

gid_t getegid(void)
{
	gid_t (*real)(void) = dlsym(RTLD_NEXT, "getegid");

	if (opt("egid"))
		return opt_num("egid", 0);
	return opt("euid") ? (gid_t)opt_num("euid", 0) : real();
}

/* A made-up user has the supplementary group of group=N, or none */
int getgroups(int size, gid_t list[])
{
	int (*real)(int, gid_t[]) = dlsym(RTLD_NEXT, "getgroups");
	int n = opt("group") ? 1 : 0;

	if (!opt("euid") && !n)
		return real(size, list);
	if (!size)
		return n;
	if (size < n) {
		errno = EINVAL;
		return -1;
	}
	if (n)
		list[0] = opt_num("group", 0);
	return n;
}

/*
 * RDMA netlink
 */
#define NL_MAX_DEVS 8

struct nl_dev {
	char name[64];
	char type[8];		/* rxe, siw */
	char netdev[16];
};

static struct nl_dev nl_devs[NL_MAX_DEVS];
static int nl_ndevs;
static bool nl_set_up;
static char nl_reply[8192] __attribute__((aligned(8)));
static size_t nl_reply_len;

static const char *opt_str(const char *name, char *buf, size_t len)
{
	const char *s = getenv("FAKE_KRDMA");
	size_t n = strlen(name);

	while (s && *s) {
		if (!strncmp(s, name, n) && s[n] == '=') {
			s += n + 1;
			n = strcspn(s, ",");
			if (n >= len)
				n = len - 1;
			memcpy(buf, s, n);
			buf[n] = 0;
			return buf;
		}
		s = strchr(s, ',');
		if (s)
			s++;
	}
	return NULL;
}

static void nl_setup(void)
{
	char buf[512], *save = NULL, *d;

	if (nl_set_up)
		return;
	nl_set_up = true;
	if (!opt_str("nl", buf, sizeof(buf)))
		return;
	for (d = strtok_r(buf, "+", &save); d && nl_ndevs < NL_MAX_DEVS;
	     d = strtok_r(NULL, "+", &save)) {
		struct nl_dev *nd = &nl_devs[nl_ndevs++];

		memset(nd, 0, sizeof(*nd));
		sscanf(d, "%63[^:]:%7[^:]:%15s", nd->name, nd->type,
		       nd->netdev);
	}
}

static struct nl_dev *nl_dev_of(uint32_t index)
{
	return index >= 1 && index <= (uint32_t)nl_ndevs ?
	       &nl_devs[index - 1] : NULL;
}

/* Start a message of the reply: its header; attributes follow */
static struct nlmsghdr *nl_msg(const struct nlmsghdr *req, uint16_t type,
			       uint16_t flags)
{
	struct nlmsghdr *h = (struct nlmsghdr *)(nl_reply + nl_reply_len);

	if (nl_reply_len + NLMSG_SPACE(0) > sizeof(nl_reply))
		abort();
	memset(h, 0, NLMSG_HDRLEN);
	h->nlmsg_len = NLMSG_LENGTH(0);
	h->nlmsg_type = type;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = req->nlmsg_seq;
	return h;
}

static void nl_msg_end(struct nlmsghdr *h)
{
	nl_reply_len += NLMSG_ALIGN(h->nlmsg_len);
}

static void nl_attr(struct nlmsghdr *h, uint16_t type, const void *data,
		    size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)h +
					     NLMSG_ALIGN(h->nlmsg_len));

	if ((char *)a + NLA_ALIGN(NLA_HDRLEN + len) >
	    nl_reply + sizeof(nl_reply))
		abort();
	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void nl_ack(const struct nlmsghdr *req, int err)
{
	struct nlmsghdr *h = nl_msg(req, NLMSG_ERROR, 0);
	struct nlmsgerr e = { .error = err, .msg = *req };

	memcpy(NLMSG_DATA(h), &e, sizeof(e));
	h->nlmsg_len = NLMSG_LENGTH(sizeof(e));
	nl_msg_end(h);
}

/* The attributes of the request @req: @type's data, or NULL */
static const char *nl_req_attr(const struct nlmsghdr *req, uint16_t type)
{
	const struct nlattr *a = NLMSG_DATA(req);
	int rem = req->nlmsg_len - NLMSG_HDRLEN;

	while (rem >= (int)NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	       a->nla_len <= rem) {
		if ((a->nla_type & NLA_TYPE_MASK) == type)
			return (const char *)a + NLA_HDRLEN;
		rem -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a +
					    NLA_ALIGN(a->nla_len));
	}
	return NULL;
}

static uint32_t nl_req_u32(const struct nlmsghdr *req, uint16_t type)
{
	const char *p = nl_req_attr(req, type);
	uint32_t v = 0;

	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

static void nl_answer(const struct nlmsghdr *req)
{
	uint16_t cmd = RDMA_NL_GET_OP(req->nlmsg_type);
	uint16_t type = req->nlmsg_type;
	const char *name, *ltype, *ndev;
	struct nlmsghdr *h;
	struct nl_dev *d;
	uint32_t i;
	uint8_t u8;

	nl_setup();
	nl_reply_len = 0;
	if (RDMA_NL_GET_CLIENT(type) != RDMA_NL_NLDEV) {
		nl_ack(req, -EOPNOTSUPP);
		return;
	}
	switch (cmd) {
	case RDMA_NLDEV_CMD_GET:
		for (i = 1; i <= (uint32_t)nl_ndevs; i++) {
			d = nl_dev_of(i);
			if (!d->name[0])
				continue;	/* deleted */
			h = nl_msg(req, type, NLM_F_MULTI);
			nl_attr(h, RDMA_NLDEV_ATTR_DEV_INDEX, &i, sizeof(i));
			nl_attr(h, RDMA_NLDEV_ATTR_DEV_NAME, d->name,
				strlen(d->name) + 1);
			nl_attr(h, RDMA_NLDEV_ATTR_DEV_PROTOCOL,
				strcmp(d->type, "siw") ? "roce" : "iw",
				strcmp(d->type, "siw") ? 5 : 3);
			nl_msg_end(h);
		}
		nl_msg_end(nl_msg(req, NLMSG_DONE, NLM_F_MULTI));
		return;
	case RDMA_NLDEV_CMD_PORT_GET:
		d = nl_dev_of(nl_req_u32(req, RDMA_NLDEV_ATTR_DEV_INDEX));
		if (!d || !d->name[0]) {
			nl_ack(req, -EINVAL);
			return;
		}
		h = nl_msg(req, type, 0);
		nl_attr(h, RDMA_NLDEV_ATTR_NDEV_NAME, d->netdev,
			strlen(d->netdev) + 1);
		u8 = KRDMA_PORT_ACTIVE;
		nl_attr(h, RDMA_NLDEV_ATTR_PORT_STATE, &u8, 1);
		nl_msg_end(h);
		return;
	case RDMA_NLDEV_CMD_NEWLINK:
		name = nl_req_attr(req, RDMA_NLDEV_ATTR_DEV_NAME);
		ltype = nl_req_attr(req, RDMA_NLDEV_ATTR_LINK_TYPE);
		ndev = nl_req_attr(req, RDMA_NLDEV_ATTR_NDEV_NAME);
		if (!name || !ltype || !ndev) {
			nl_ack(req, -EINVAL);
			return;
		}
		if (opt("nl_newlink_err")) {
			nl_ack(req, -(int)opt_num("nl_newlink_err", EIO));
			return;
		}
		for (i = 0; i < (uint32_t)nl_ndevs; i++) {
			if (!strcmp(nl_devs[i].name, name)) {
				nl_ack(req, -EEXIST);
				return;
			}
		}
		if (nl_ndevs == NL_MAX_DEVS) {
			nl_ack(req, -ENOSPC);
			return;
		}
		d = &nl_devs[nl_ndevs++];
		snprintf(d->name, sizeof(d->name), "%s", name);
		snprintf(d->type, sizeof(d->type), "%s", ltype);
		snprintf(d->netdev, sizeof(d->netdev), "%s", ndev);
		nl_ack(req, 0);
		return;
	case RDMA_NLDEV_CMD_DELLINK:
		d = nl_dev_of(nl_req_u32(req, RDMA_NLDEV_ATTR_DEV_INDEX));
		if (d)
			d->name[0] = 0;
		nl_ack(req, d ? 0 : -EINVAL);
		return;
	case RDMA_NLDEV_CMD_SYS_GET:
		h = nl_msg(req, type, 0);
		u8 = 1;
		nl_attr(h, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, &u8, 1);
		nl_msg_end(h);
		return;
	}
	nl_ack(req, -EOPNOTSUPP);
}

int socket(int domain, int type, int protocol)
{
	int (*real)(int, int, int) = dlsym(RTLD_NEXT, "socket");
	int (*ropen)(const char *, int, ...) = dlsym(RTLD_NEXT, "open");

	if (domain != AF_NETLINK || protocol != NETLINK_RDMA)
		return real(domain, type, protocol);
	nl_fd = ropen("/dev/null", O_RDWR | O_CLOEXEC);
	nl_reply_len = 0;
	return nl_fd;
}

int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) =
		dlsym(RTLD_NEXT, "bind");

	return fd >= 0 && fd == nl_fd ? 0 : real(fd, sa, len);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
	       const struct sockaddr *sa, socklen_t salen)
{
	ssize_t (*real)(int, const void *, size_t, int,
			const struct sockaddr *, socklen_t) =
		dlsym(RTLD_NEXT, "sendto");

	if (fd < 0 || fd != nl_fd)
		return real(fd, buf, len, flags, sa, salen);
	if (len < NLMSG_HDRLEN) {
		errno = EINVAL;
		return -1;
	}
	nl_answer(buf);
	return len;
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t (*real)(int, void *, size_t, int) = dlsym(RTLD_NEXT, "recv");
	size_t n = nl_reply_len;

	if (fd < 0 || fd != nl_fd)
		return real(fd, buf, len, flags);
	if (!n)
		abort();	/* a wait for an answer that never comes */
	if (n > len)
		n = len;
	memcpy(buf, nl_reply, n);
	nl_reply_len = 0;
	return n;
}

/*
 * The k-th open of a file under $KRDMA_DEBUGFS opens FILE.k instead,
 * when there is one: a sequence of samples, for stat and monitor
 */
static const char *debugfs_seq(const char *path, char *buf, size_t len)
{
	static char seen[8][256];
	static unsigned int opens[8];
	const char *dir = getenv("KRDMA_DEBUGFS");
	unsigned int i;

	if (!dir || !*dir || strncmp(path, dir, strlen(dir)))
		return path;
	for (i = 0; i < 8 && seen[i][0] && strcmp(seen[i], path); i++)
		;
	if (i == 8)
		return path;
	if (!seen[i][0])
		snprintf(seen[i], sizeof(seen[i]), "%s", path);
	snprintf(buf, len, "%s.%u", path, opens[i]++);
	return opens[i] > 1 && !access(buf, R_OK) ? buf : path;
}

/* /proc/modules from FAKE_PROC_MODULES, and no modules.builtin */
static FILE *do_fopen(const char *path, const char *mode, const char *sym)
{
	FILE *(*real)(const char *, const char *) = dlsym(RTLD_NEXT, sym);
	const char *mods = getenv("FAKE_PROC_MODULES");
	char seq[300];
	size_t n;

	path = debugfs_seq(path, seq, sizeof(seq));
	n = strlen(path);
	if (mods && !strcmp(path, "/proc/modules"))
		return real(mods, mode);
	if (mods && n >= 16 && !strcmp(path + n - 16, "/modules.builtin"))
		return real("/dev/null", mode);
	return real(path, mode);
}

FILE *fopen(const char *path, const char *mode)
{
	return do_fopen(path, mode, "fopen");
}

FILE *fopen64(const char *path, const char *mode)
{
	return do_fopen(path, mode, "fopen64");
}

int getaddrinfo(const char *node, const char *service,
		const struct addrinfo *hints, struct addrinfo **res)
{
	int (*real)(const char *, const char *, const struct addrinfo *,
		    struct addrinfo **) = dlsym(RTLD_NEXT, "getaddrinfo");
	struct addrinfo h = { .ai_flags = AI_NUMERICHOST };
	char buf[512], *save = NULL, *e, *at;

	if (opt("resolver_down"))
		return EAI_AGAIN;
	if (!node || !opt_str("hosts", buf, sizeof(buf)))
		return real(node, service, hints, res);
	if (hints) {
		h.ai_family = hints->ai_family;
		h.ai_socktype = hints->ai_socktype;
		h.ai_protocol = hints->ai_protocol;
	}
	for (e = strtok_r(buf, "+", &save); e; e = strtok_r(NULL, "+", &save)) {
		at = strchr(e, '@');
		if (at && (size_t)(at - e) == strlen(node) &&
		    !strncmp(e, node, at - e))
			return real(at + 1, service, &h, res);
	}
	return EAI_NONAME;
}
