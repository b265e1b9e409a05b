// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libkrdma: the userspace side of /dev/krdma. See libkrdma.h.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"

/* The layouts the kernel expects: no padding may sneak in. */
_Static_assert(sizeof(struct krdma_query_module) == 32, "abi");
_Static_assert(sizeof(struct krdma_dev_list) == 24, "abi");
_Static_assert(sizeof(struct krdma_dev_query) == 248, "abi");
_Static_assert(sizeof(struct krdma_gid_entry) == 32, "abi");
_Static_assert(sizeof(struct krdma_port_query) == 88, "abi");
_Static_assert(sizeof(struct krdma_listen_query) == 136, "abi");

/*
 * How often the list commands retry when the list grew between the count
 * and the fetch, and the slack added to each allocation.
 */
#define KRDMA_LIST_TRIES	8
#define KRDMA_LIST_SLACK	4

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

int krdma_open(void)
{
	int fd = open(KRDMA_DEV_PATH, O_RDWR | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int krdma_ioctl(int fd, unsigned long cmd, void *arg)
{
	/* No retry on EINTR: a SUBMIT may have accepted part of its batch */
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

int krdma_query_module(int fd, struct krdma_query_module *out)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	return krdma_ioctl(fd, KRDMA_IOC_QUERY_MODULE, out);
}

int krdma_check_module(int fd, uint64_t features,
		       struct krdma_query_module *out)
{
	struct krdma_query_module qm;
	int ret;

	if (!out)
		out = &qm;
	ret = krdma_query_module(fd, out);
	if (ret)
		return ret;
	if (out->abi_version != KRDMA_ABI_VERSION)
		return -EPROTO;
	if ((out->features & features) != features)
		return -EPROTONOSUPPORT;
	return 0;
}

/* One KRDMA_IOC_DEV_LIST with room for @cap entries of @buf. */
static int dev_list_once(int fd, uint32_t *buf, uint32_t cap, uint32_t *total)
{
	struct krdma_dev_list dl;
	int ret;

	memset(&dl, 0, sizeof(dl));
	dl.size = sizeof(dl);
	dl.num_devices = cap;
	dl.dev_indexes = (uintptr_t)buf;
	ret = krdma_ioctl(fd, KRDMA_IOC_DEV_LIST, &dl);
	if (!ret)
		*total = dl.num_devices;
	return ret;
}

int krdma_dev_list(int fd, uint32_t **indexes, uint32_t *n)
{
	uint32_t *buf = NULL, cap = 0, total;
	int ret, tries;

	if (indexes)
		*indexes = NULL;
	*n = 0;

	ret = dev_list_once(fd, NULL, 0, &total);
	if (ret || !indexes || !total) {
		if (!ret)
			*n = total;
		return ret;
	}

	for (tries = 0; tries < KRDMA_LIST_TRIES; tries++) {
		uint32_t *nbuf;

		if (total > UINT32_MAX - KRDMA_LIST_SLACK) {
			free(buf);
			return -EOVERFLOW;
		}
		cap = total + KRDMA_LIST_SLACK;
		nbuf = realloc(buf, (size_t)cap * sizeof(*buf));
		if (!nbuf) {
			free(buf);
			return -ENOMEM;
		}
		buf = nbuf;

		ret = dev_list_once(fd, buf, cap, &total);
		if (ret) {
			free(buf);
			return ret;
		}
		if (total <= cap)
			break;
	}
	if (total > cap) {
		free(buf);
		return -EAGAIN;
	}
	if (!total) {
		/* Every device went away between the two calls. */
		free(buf);
		buf = NULL;
	}
	*indexes = buf;
	*n = total;
	return 0;
}

int krdma_dev_query(int fd, uint32_t dev_index, struct krdma_dev_query *out)
{
	int ret;

	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->dev_index = dev_index;
	ret = krdma_ioctl(fd, KRDMA_IOC_DEV_QUERY, out);
	out->name[sizeof(out->name) - 1] = '\0';
	return ret;
}

int krdma_dev_find(int fd, const char *name, uint32_t *dev_index,
		   struct krdma_dev_query *out)
{
	struct krdma_dev_query dq;
	uint32_t *idx, n, i;
	int ret;

	ret = krdma_dev_list(fd, &idx, &n);
	if (ret)
		return ret;

	ret = -ENODEV;
	for (i = 0; i < n; i++) {
		int err = krdma_dev_query(fd, idx[i], &dq);

		if (err == -ENODEV)	/* removed since the list: skip it */
			continue;
		if (err) {
			ret = err;
			break;
		}
		if (!strcmp((const char *)dq.name, name)) {
			*dev_index = idx[i];
			if (out)
				*out = dq;
			ret = 0;
			break;
		}
	}
	free(idx);
	return ret;
}

/* One KRDMA_IOC_PORT_QUERY with room for @cap entries of @buf. */
static int port_query_once(int fd, uint32_t dev_index, uint32_t port,
			   struct krdma_port_query *out,
			   struct krdma_gid_entry *buf, uint32_t cap)
{
	int ret;

	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->dev_index = dev_index;
	out->port_num = port;
	out->num_gids = cap;
	out->gids = (uintptr_t)buf;
	ret = krdma_ioctl(fd, KRDMA_IOC_PORT_QUERY, out);
	out->netdev_name[sizeof(out->netdev_name) - 1] = '\0';
	return ret;
}

int krdma_port_query(int fd, uint32_t dev_index, uint32_t port,
		     struct krdma_port_query *out,
		     struct krdma_gid_entry **gids, uint32_t *ngids)
{
	struct krdma_gid_entry *buf = NULL;
	uint32_t cap = 0;
	int ret, tries;

	if (gids)
		*gids = NULL;
	if (ngids)
		*ngids = 0;

	ret = port_query_once(fd, dev_index, port, out, NULL, 0);
	if (ret)
		return ret;
	if (!gids || !out->num_gids) {
		if (ngids)
			*ngids = out->num_gids;
		return 0;
	}

	for (tries = 0; tries < KRDMA_LIST_TRIES; tries++) {
		struct krdma_gid_entry *nbuf;
		uint32_t total = out->num_gids;

		if (total > UINT32_MAX - KRDMA_LIST_SLACK) {
			free(buf);
			return -EOVERFLOW;
		}
		cap = total + KRDMA_LIST_SLACK;
		nbuf = realloc(buf, (size_t)cap * sizeof(*buf));
		if (!nbuf) {
			free(buf);
			return -ENOMEM;
		}
		buf = nbuf;
		memset(buf, 0, (size_t)cap * sizeof(*buf));

		ret = port_query_once(fd, dev_index, port, out, buf, cap);
		if (ret) {
			free(buf);
			return ret;
		}
		if (out->num_gids <= cap)
			break;
	}
	if (out->num_gids > cap) {
		free(buf);
		return -EAGAIN;
	}
	if (!out->num_gids) {
		free(buf);
		buf = NULL;
		out->gids = 0;
	}
	*gids = buf;
	if (ngids)
		*ngids = out->num_gids;
	return 0;
}

/* Name of @val in @names, a table indexed by value with NULL holes. */
static const char *lookup(const char *const *names, size_t n, uint32_t val)
{
	if (val < n && names[val])
		return names[val];
	return "unknown";
}

const char *krdma_transport_str(uint32_t transport)
{
	static const char *const names[] = {
		[KRDMA_TRANSPORT_IB] = "InfiniBand",
		[KRDMA_TRANSPORT_ROCE] = "RoCE",
		[KRDMA_TRANSPORT_IWARP] = "iWARP",
		[KRDMA_TRANSPORT_OTHER] = "other",
	};

	return lookup(names, ARRAY_SIZE(names), transport);
}

const char *krdma_port_state_str(uint32_t state)
{
	static const char *const names[] = {
		[KRDMA_PORT_NOP] = "NOP",
		[KRDMA_PORT_DOWN] = "DOWN",
		[KRDMA_PORT_INIT] = "INIT",
		[KRDMA_PORT_ARMED] = "ARMED",
		[KRDMA_PORT_ACTIVE] = "ACTIVE",
		[KRDMA_PORT_ACTIVE_DEFER] = "ACTIVE_DEFER",
	};

	return lookup(names, ARRAY_SIZE(names), state);
}

const char *krdma_port_phys_state_str(uint32_t phys_state)
{
	/* enum ib_port_phys_state; the uapi has no names for these */
	static const char *const names[] = {
		[0] = "NOP",
		[1] = "SLEEP",
		[2] = "POLLING",
		[3] = "DISABLED",
		[4] = "TRAINING",
		[5] = "LINK_UP",
		[6] = "LINK_ERROR_RECOVERY",
		[7] = "PHY_TEST",
	};

	return lookup(names, ARRAY_SIZE(names), phys_state);
}

const char *krdma_link_layer_str(uint32_t link_layer)
{
	static const char *const names[] = {
		[KRDMA_LINK_LAYER_UNSPECIFIED] = "unspecified",
		[KRDMA_LINK_LAYER_INFINIBAND] = "InfiniBand",
		[KRDMA_LINK_LAYER_ETHERNET] = "Ethernet",
	};

	return lookup(names, ARRAY_SIZE(names), link_layer);
}

const char *krdma_gid_type_str(uint32_t type)
{
	static const char *const names[] = {
		[KRDMA_GID_TYPE_IB] = "IB",
		[KRDMA_GID_TYPE_ROCE_V1] = "RoCE v1",
		[KRDMA_GID_TYPE_ROCE_V2] = "RoCE v2",
	};

	return lookup(names, ARRAY_SIZE(names), type);
}

const char *krdma_atomic_cap_str(uint32_t atomic_cap)
{
	static const char *const names[] = {
		[KRDMA_ATOMIC_NONE] = "none",
		[KRDMA_ATOMIC_HCA] = "HCA",
		[KRDMA_ATOMIC_GLOB] = "GLOB",
	};

	return lookup(names, ARRAY_SIZE(names), atomic_cap);
}

const char *krdma_port_width_str(uint32_t active_width)
{
	/* enum ib_port_width */
	switch (active_width) {
	case 1:
		return "1X";
	case 2:
		return "4X";
	case 4:
		return "8X";
	case 8:
		return "12X";
	case 16:
		return "2X";
	}
	return "unknown";
}

const char *krdma_port_speed_str(uint32_t active_speed)
{
	/* enum ib_port_speed, per lane as ibv_devinfo rounds it */
	switch (active_speed) {
	case 1:
		return "2.5 Gbps (SDR)";
	case 2:
		return "5.0 Gbps (DDR)";
	case 4:
		return "10.0 Gbps (QDR)";
	case 8:
		return "10.0 Gbps (FDR10)";
	case 16:
		return "14.0 Gbps (FDR)";
	case 32:
		return "25.0 Gbps (EDR)";
	case 64:
		return "50.0 Gbps (HDR)";
	case 128:
		return "100.0 Gbps (NDR)";
	case 256:
		return "200.0 Gbps (XDR)";
	}
	return "unknown";
}

const char *krdma_feature_str(uint64_t feature_bit)
{
	if (feature_bit == KRDMA_FEATURE_DEV_QUERY)
		return "dev_query";
	if (feature_bit == KRDMA_FEATURE_CONN)
		return "conn";
	if (feature_bit == KRDMA_FEATURE_KRDMA_PEER)
		return "krdma_peer";
	if (feature_bit == KRDMA_FEATURE_UNSIGNALED)
		return "unsignaled";
	if (feature_bit == KRDMA_FEATURE_RING)
		return "ring";
	if (feature_bit == KRDMA_FEATURE_EARLY_RECVS)
		return "early_recvs";
	if (feature_bit == KRDMA_FEATURE_LISTEN_QUERY)
		return "listen_query";
	return NULL;
}

char *krdma_guid_str(uint64_t guid, char buf[KRDMA_GUID_STR_LEN])
{
	snprintf(buf, KRDMA_GUID_STR_LEN, "%04x:%04x:%04x:%04x",
		 (unsigned int)(guid >> 48) & 0xffff,
		 (unsigned int)(guid >> 32) & 0xffff,
		 (unsigned int)(guid >> 16) & 0xffff,
		 (unsigned int)guid & 0xffff);
	return buf;
}

char *krdma_gid_str(const uint8_t gid[16], char buf[KRDMA_GID_STR_LEN])
{
	char *p = buf;
	int i;

	for (i = 0; i < 16; i += 2)
		p += sprintf(p, "%s%02x%02x", i ? ":" : "", gid[i], gid[i + 1]);
	return buf;
}

char *krdma_gid_ip_str(const uint8_t gid[16], char buf[KRDMA_GID_IP_STR_LEN])
{
	static const uint8_t v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	if (!memcmp(gid, v4mapped, sizeof(v4mapped))) {
		if (!inet_ntop(AF_INET, gid + 12, buf, KRDMA_GID_IP_STR_LEN))
			buf[0] = '\0';
	} else {
		if (!inet_ntop(AF_INET6, gid, buf, KRDMA_GID_IP_STR_LEN))
			buf[0] = '\0';
	}
	return buf;
}

const char *krdma_strerror_hint(int err)
{
	if (err < 0)
		err = -err;

	switch (err) {
	case ENOENT:
		return KRDMA_DEV_PATH " not found: is krdma.ko loaded? try: sudo modprobe krdma (or insmod krdma.ko)";
	case ENXIO:
		return KRDMA_DEV_PATH " exists but no driver is behind it: is krdma.ko loaded? try: sudo modprobe krdma (or insmod krdma.ko)";
	case EACCES:
		return "permission denied; the cause depends on the call: opening " KRDMA_DEV_PATH ": not root and not in its group (the udev rule: group rdma, mode 0660; krdmactl doctor says which); LISTEN: a port below 1024 without CAP_NET_BIND_SERVICE; GRANT: more access than the buffer was registered with; SUBMIT: a READ, RECV or atomic into a buffer registered without LOCAL_WRITE; a connection's error: an operation failed with an access error (see its last error: krdmactl status)";
	case EPERM:
		return "not permitted; the cause depends on the call: opening " KRDMA_DEV_PATH ": as for EACCES (krdmactl doctor says why); GRANT or SUBMIT: a buffer registered by another process (after fork(), execve() or a passed file): register the memory in the process that uses it";
	case ENODEV:
		return "the RDMA device is gone (removed with rdma link delete?); list the devices with: krdmactl dev";
	case ENOTTY:
		return "the loaded krdma.ko does not know this command: the module is too old or its ABI does not match this tool; compare both with: krdmactl version";
	case EPROTONOSUPPORT:
		return "the loaded krdma.ko lacks a feature this tool needs (it is older than the tool): upgrade the module; compare both with: krdmactl version";
	case EPROTO:
		return "the loaded krdma.ko speaks another ABI version than this tool was built for: build and install the module and the tools from the same tree";
	case E2BIG:
		return "this tool is newer than the loaded krdma.ko and used a field the module does not know: upgrade the module";
	case EINVAL:
		return "the module rejected an argument (a wrong port number? an ABI mismatch? compare with: krdmactl version)";
	case EOPNOTSUPP:
		return "the RDMA device does not support this";
	case EAGAIN:
		return "the list kept changing while it was read (devices being added?); try again";
	case EFAULT:
		return "the module could not access the buffers passed to it: a bug in the tool or the library";
	case ENOMEM:
		return "out of memory";
	case EMFILE:
		return "this user holds as many krdma connections, buffers, grants, queue entries or window pages as the module allows (max_conns_per_user, max_bufs_per_user, max_grants_per_user, max_queue_depth_per_user: sq_depth + rq_depth of each connection, backlog times that of each listener; max_window_pages_per_user: the pages of every grant and local window): see them with: krdmactl status; close some, or raise the limit: sudo krdmactl set max_conns_per_user=N (or max_bufs_per_user=N, max_grants_per_user=N, max_queue_depth_per_user=N, max_window_pages_per_user=N); opening " KRDMA_DEV_PATH ": the process has too many open files (ulimit -n)";
	}
	return NULL;
}

/*
 * Connections, buffers and transfers
 */

int krdma_parse_addr(const char *host, uint32_t port, struct krdma_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->port = port;
	if (inet_pton(AF_INET, host, out->addr) == 1) {
		out->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, host, out->addr) == 1) {
		out->family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

int krdma_resolve_addr(const char *host, uint32_t port,
		       struct krdma_addr *out)
{
	const struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res, *ai;
	int ret;

	if (!krdma_parse_addr(host, port, out))
		return 0;
	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret)
		return ret;
	ret = EAI_NONAME;
	for (ai = res; ai && ret; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			const struct sockaddr_in *s = (void *)ai->ai_addr;

			memcpy(out->addr, &s->sin_addr, 4);
		} else if (ai->ai_family == AF_INET6) {
			const struct sockaddr_in6 *s = (void *)ai->ai_addr;

			memcpy(out->addr, &s->sin6_addr, 16);
		} else {
			continue;
		}
		out->family = ai->ai_family;
		ret = 0;
	}
	freeaddrinfo(res);
	return ret;
}

char *krdma_addr_str(const struct krdma_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (a->family == AF_INET || a->family == AF_INET6)
		inet_ntop(a->family, a->addr, ip, sizeof(ip));
	snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
		 a->port);
	return buf;
}

int krdma_listen_on(int fd, const struct krdma_addr *addr, uint32_t backlog,
		    uint32_t *handle, struct krdma_addr *bound)
{
	return krdma_listen_flags(fd, addr, backlog, 0, handle, bound);
}

int krdma_listen_flags(int fd, const struct krdma_addr *addr,
		       uint32_t backlog, uint32_t flags, uint32_t *handle,
		       struct krdma_addr *bound)
{
	struct krdma_listen l;
	int ret;

	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.flags = flags;
	l.addr = *addr;
	l.backlog = backlog;
	ret = krdma_ioctl(fd, KRDMA_IOC_LISTEN, &l);
	if (ret)
		return ret;
	*handle = l.handle;
	if (bound)
		*bound = l.addr;
	return 0;
}

int krdma_accept_conn(int fd, uint32_t listener, uint32_t flags,
		      uint32_t timeout_ms, uint32_t *conn)
{
	return krdma_accept_recvs(fd, listener, flags, timeout_ms, NULL, 0,
				  conn);
}

int krdma_listener_info(int fd, uint32_t listener,
			struct krdma_listen_query *out)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->handle = listener;
	return krdma_ioctl(fd, KRDMA_IOC_LISTEN_QUERY, out);
}

int krdma_accept_recvs(int fd, uint32_t listener, uint32_t flags,
		       uint32_t timeout_ms, const struct krdma_op *recvs,
		       uint32_t nrecvs, uint32_t *conn)
{
	struct krdma_accept a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.flags = flags;
	a.listener = listener;
	a.timeout_ms = timeout_ms;
	a.recv_count = nrecvs;
	a.recvs = (uintptr_t)recvs;
	ret = krdma_ioctl(fd, KRDMA_IOC_ACCEPT, &a);
	if (!ret)
		*conn = a.handle;
	return ret;
}

int krdma_connect_to(int fd, const struct krdma_addr *dst,
		     uint32_t timeout_ms, uint32_t *conn)
{
	return krdma_connect_from(fd, dst, NULL, timeout_ms, conn);
}

int krdma_connect_from(int fd, const struct krdma_addr *dst,
		       const struct krdma_addr *src, uint32_t timeout_ms,
		       uint32_t *conn)
{
	return krdma_connect_flags(fd, dst, src, 0, timeout_ms, conn);
}

int krdma_connect_flags(int fd, const struct krdma_addr *dst,
			const struct krdma_addr *src, uint32_t flags,
			uint32_t timeout_ms, uint32_t *conn)
{
	return krdma_connect_recvs(fd, dst, src, flags, timeout_ms, NULL, 0,
				   conn);
}

int krdma_connect_recvs(int fd, const struct krdma_addr *dst,
			const struct krdma_addr *src, uint32_t flags,
			uint32_t timeout_ms, const struct krdma_op *recvs,
			uint32_t nrecvs, uint32_t *conn)
{
	struct krdma_connect c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.size = sizeof(c);
	c.flags = flags;
	c.dst = *dst;
	if (src)
		c.src = *src;
	c.timeout_ms = timeout_ms;
	c.recv_count = nrecvs;
	c.recvs = (uintptr_t)recvs;
	ret = krdma_ioctl(fd, KRDMA_IOC_CONNECT, &c);
	if (!ret)
		*conn = c.handle;
	return ret;
}

int krdma_disconnect_conn(int fd, uint32_t conn)
{
	struct krdma_disconnect d;

	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	d.handle = conn;
	return krdma_ioctl(fd, KRDMA_IOC_DISCONNECT, &d);
}

int krdma_conn_info(int fd, uint32_t conn, struct krdma_conn_query *out)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->handle = conn;
	return krdma_ioctl(fd, KRDMA_IOC_CONN_QUERY, out);
}

int krdma_destroy_handle(int fd, uint32_t handle)
{
	struct krdma_destroy d;

	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	d.handle = handle;
	return krdma_ioctl(fd, KRDMA_IOC_DESTROY, &d);
}

int krdma_buf_register(int fd, void *addr, uint64_t length, uint32_t access,
		       uint32_t *handle)
{
	struct krdma_buf_reg r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.addr = (uintptr_t)addr;
	r.length = length;
	r.access = access;
	ret = krdma_ioctl(fd, KRDMA_IOC_BUF_REG, &r);
	if (!ret)
		*handle = r.handle;
	return ret;
}

int krdma_grant_window(int fd, uint32_t conn, uint32_t buf, uint64_t offset,
		       uint64_t length, uint32_t access, uint32_t *handle,
		       struct krdma_token *token)
{
	struct krdma_grant g;
	int ret;

	memset(&g, 0, sizeof(g));
	g.size = sizeof(g);
	g.conn = conn;
	g.buf = buf;
	g.offset = offset;
	g.length = length;
	g.access = access;
	ret = krdma_ioctl(fd, KRDMA_IOC_GRANT, &g);
	if (ret)
		return ret;
	if (handle)
		*handle = g.handle;
	if (token)
		*token = g.token;
	return 0;
}

int krdma_submit_ops(int fd, struct krdma_op *ops, uint32_t count,
		     uint32_t flags, uint32_t *submitted)
{
	struct krdma_submit s;
	int ret;

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	s.flags = flags;
	s.count = count;
	s.ops = (uintptr_t)ops;
	ret = krdma_ioctl(fd, KRDMA_IOC_SUBMIT, &s);
	if (submitted)
		*submitted = s.submitted;
	return ret;
}

int krdma_poll_wc(int fd, struct krdma_completion *wc, uint32_t max,
		  uint32_t timeout_ms)
{
	struct krdma_poll p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.max = max;
	p.completions = (uintptr_t)wc;
	p.timeout_ms = timeout_ms;
	ret = krdma_ioctl(fd, KRDMA_IOC_POLL, &p);
	return ret ? ret : (int)p.count;
}

int krdma_ring_setup(int fd, uint32_t entries, struct krdma_ring *ring)
{
	struct krdma_ring_setup rs;
	uint8_t *map;
	int ret;

	memset(ring, 0, sizeof(*ring));
	memset(&rs, 0, sizeof(rs));
	rs.size = sizeof(rs);
	rs.entries = entries;
	ret = krdma_ioctl(fd, KRDMA_IOC_RING_SETUP, &rs);
	if (ret)
		return ret;
	map = mmap(NULL, rs.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   KRDMA_RING_OFF_CQ);
	if (map == MAP_FAILED)
		return -errno;
	ring->map = map;
	ring->map_size = rs.mmap_size;
	ring->head = (uint32_t *)(map + rs.off_head);
	ring->tail = (const uint32_t *)(map + rs.off_tail);
	/* The kernel's answer, not the mapping's copy, which anyone may write */
	ring->entries = rs.entries;
	ring->mask = rs.entries - 1;
	ring->cqes = (const struct krdma_completion *)(map + rs.off_cqes);
	return 0;
}

void krdma_ring_unmap(struct krdma_ring *ring)
{
	if (ring->map)
		munmap(ring->map, ring->map_size);
	memset(ring, 0, sizeof(*ring));
}

uint32_t krdma_ring_take(struct krdma_ring *ring,
			 struct krdma_completion *wc, uint32_t max)
{
	uint32_t head = *ring->head;
	/* The entries up to the tail are written before it moved */
	uint32_t tail = __atomic_load_n(ring->tail, __ATOMIC_ACQUIRE);
	uint32_t n = tail - head, i;

	/* More than the ring holds: head was written by someone else */
	if (n > ring->entries)
		return 0;
	if (n > max)
		n = max;
	for (i = 0; i < n; i++)
		wc[i] = ring->cqes[(head + i) & ring->mask];
	/* Read before the kernel may fill them again */
	if (n)
		__atomic_store_n(ring->head, head + n, __ATOMIC_RELEASE);
	return n;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int krdma_ring_wait(int fd, struct krdma_ring *ring,
		    struct krdma_completion *wc, uint32_t max, int timeout_ms)
{
	int64_t end = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint32_t n;
	int left;

	for (;;) {
		n = krdma_ring_take(ring, wc, max);
		if (n)
			return (int)n;
		left = timeout_ms < 0 ? -1 : (int)(end - now_ms());
		if (timeout_ms >= 0 && left <= 0)
			return 0;
		if (poll(&pfd, 1, left) < 0) {
			if (errno != EINTR)
				return -errno;
		} else if (pfd.revents & (POLLNVAL | POLLERR)) {
			return pfd.revents & POLLNVAL ? -EBADF : -EIO;
		}
	}
}

const char *krdma_wc_status_str(uint32_t status)
{
	static const char *const names[] = {
		[KRDMA_WC_SUCCESS] = "SUCCESS",
		[KRDMA_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
		[KRDMA_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
		[KRDMA_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
		[KRDMA_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
		[KRDMA_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
		[KRDMA_WC_MW_BIND_ERR] = "MW_BIND_ERR",
		[KRDMA_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
		[KRDMA_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR",
		[KRDMA_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
		[KRDMA_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
		[KRDMA_WC_REM_OP_ERR] = "REM_OP_ERR",
		[KRDMA_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
		[KRDMA_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
		[KRDMA_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR",
		[KRDMA_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR",
		[KRDMA_WC_REM_ABORT_ERR] = "REM_ABORT_ERR",
		[KRDMA_WC_INV_EECN_ERR] = "INV_EECN_ERR",
		[KRDMA_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR",
		[KRDMA_WC_FATAL_ERR] = "FATAL_ERR",
		[KRDMA_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR",
		[KRDMA_WC_GENERAL_ERR] = "GENERAL_ERR",
	};

	if (status < sizeof(names) / sizeof(names[0]) && names[status])
		return names[status];
	return "unknown";
}

const char *krdma_opcode_str(uint32_t opcode)
{
	static const char *const names[] = {
		[KRDMA_OP_WRITE] = "WRITE",
		[KRDMA_OP_WRITE_IMM] = "WRITE_IMM",
		[KRDMA_OP_READ] = "READ",
		[KRDMA_OP_SEND] = "SEND",
		[KRDMA_OP_SEND_IMM] = "SEND_IMM",
		[KRDMA_OP_RECV] = "RECV",
		[KRDMA_OP_FETCH_ADD] = "FETCH_ADD",
		[KRDMA_OP_CMP_SWAP] = "CMP_SWAP",
	};

	if (opcode < sizeof(names) / sizeof(names[0]) && names[opcode])
		return names[opcode];
	return "unknown";
}

const char *krdma_refused_str(uint32_t reason)
{
	static const char *const names[] = {
		[KRDMA_REFUSED_VERSION] = "version",
		[KRDMA_REFUSED_NOT_KRDMA] = "not krdma",
		[KRDMA_REFUSED_BACKLOG] = "backlog full",
		[KRDMA_REFUSED_NO_RESOURCES] = "no resources",
	};

	if (reason < sizeof(names) / sizeof(names[0]) && names[reason])
		return names[reason];
	return "unknown";
}

/* The KRDMA_REFUSED_* reasons, ascending, and where each is counted */
static const struct {
	uint32_t reason;
	size_t off;
} refused_counters[] = {
	{ KRDMA_REFUSED_VERSION,
	  offsetof(struct krdma_listen_query, refused_version) },
	{ KRDMA_REFUSED_NOT_KRDMA,
	  offsetof(struct krdma_listen_query, refused_not_krdma) },
	{ KRDMA_REFUSED_BACKLOG,
	  offsetof(struct krdma_listen_query, refused_backlog) },
	{ KRDMA_REFUSED_NO_RESOURCES,
	  offsetof(struct krdma_listen_query, refused_no_resources) },
};

uint32_t krdma_refused_reason(unsigned int i)
{
	return i < ARRAY_SIZE(refused_counters) ?
	       refused_counters[i].reason : 0;
}

__u64 *krdma_refused_counter(struct krdma_listen_query *q, uint32_t reason)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(refused_counters); i++)
		if (refused_counters[i].reason == reason)
			return (__u64 *)((char *)q + refused_counters[i].off);
	return NULL;
}

/*
 * Plain explanations: what a completion status or an errno of a
 * connection or transfer means, and its likely cause. One table, shared
 * by krdmactl ping/xfer/doctor/explain and the documentation
 * (Documentation/userspace-api.rst is made from `krdmactl explain`).
 */
const char *krdma_wc_status_explain(uint32_t status)
{
	static const char *const text[] = {
		[KRDMA_WC_SUCCESS] = "the operation completed",
		[KRDMA_WC_LOC_LEN_ERR] = "a message did not fit the receive buffer (the peer sent more than was posted), or a local length was too large for the device",
		[KRDMA_WC_LOC_QP_OP_ERR] = "the local queue pair could not carry out the operation: a request the connection does not allow, or more scatter entries than the device takes",
		[KRDMA_WC_LOC_EEC_OP_ERR] = "local end-to-end context error (reliable datagram only; krdma does not use it): a device or driver bug",
		[KRDMA_WC_LOC_PROT_ERR] = "a local buffer does not allow this access: the buffer was unregistered, or registered without this access",
		[KRDMA_WC_WR_FLUSH_ERR] = "the connection was closed or failed before the operation ran: the peer went away, or an earlier operation failed (look for the first error)",
		[KRDMA_WC_MW_BIND_ERR] = "binding a memory window failed: a device or driver problem",
		[KRDMA_WC_BAD_RESP_ERR] = "the peer sent an unexpected response: a protocol bug, or a peer that is not krdma",
		[KRDMA_WC_LOC_ACCESS_ERR] = "a local buffer does not allow this access (e.g. a READ into memory registered without write access)",
		[KRDMA_WC_REM_INV_REQ_ERR] = "the peer found the request invalid: a message larger than its receive buffer, or an operation it does not support (atomics on siw)",
		[KRDMA_WC_REM_ACCESS_ERR] = "the peer refused access to its memory: the token is wrong, revoked, for another connection, out of the window's range, or does not allow this operation",
		[KRDMA_WC_REM_OP_ERR] = "the peer could not carry out the operation (its side of the connection failed)",
		[KRDMA_WC_RETRY_EXC_ERR] = "the peer stopped answering (transport retries exhausted): is it still running, is the link up, do the MTUs match, does a firewall drop UDP 4791 (RoCE v2)?",
		[KRDMA_WC_RNR_RETRY_EXC_ERR] = "the peer had no receive posted for too long (receiver not ready): it does not post RECVs fast enough for the SENDs",
		[KRDMA_WC_LOC_RDD_VIOL_ERR] = "reliable datagram domain violation (not used by krdma): a device or driver bug",
		[KRDMA_WC_REM_INV_RD_REQ_ERR] = "the peer rejected an RDMA READ: the token does not allow READ, or the peer allows fewer outstanding READs",
		[KRDMA_WC_REM_ABORT_ERR] = "the peer aborted the operation",
		[KRDMA_WC_INV_EECN_ERR] = "invalid end-to-end context number (not used by krdma): a device or driver bug",
		[KRDMA_WC_INV_EEC_STATE_ERR] = "invalid end-to-end context state (not used by krdma): a device or driver bug",
		[KRDMA_WC_FATAL_ERR] = "the RDMA device reported a fatal error; see the kernel log (dmesg)",
		[KRDMA_WC_RESP_TIMEOUT_ERR] = "the peer's response did not arrive in time: the peer or the link is down or overloaded",
		[KRDMA_WC_GENERAL_ERR] = "the RDMA device reported a failure it does not classify; see the kernel log (dmesg)",
	};

	if (status < sizeof(text) / sizeof(text[0]) && text[status])
		return text[status];
	return NULL;
}

const char *krdma_conn_strerror_hint(int err)
{
	switch (err < 0 ? -err : err) {
	case ECONNREFUSED:
		return "the peer is reachable but nobody listens at that address and port (or the program there refused): start `krdmactl serve` there, or give its -p PORT";
	case ETIMEDOUT:
		return "no answer in time: is the peer running, and is its address on a network that an RDMA device of this host is attached to (see: krdmactl dev)? a firewall dropping UDP 4791 (RoCE v2) or TCP (iWARP) looks the same; try: krdmactl doctor ADDR";
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EADDRNOTAVAIL:
	case ENODEV:
		return "no RDMA device reaches that address: it must be on a network that an RDMA device (rxe, siw, ...) is attached to; see: krdmactl dev, or create one: krdmactl up";
	case ECONNRESET:
	case ECONNABORTED:
		return "the peer rejected or dropped the connection";
	case ENOTCONN:
		return "the connection is down: the peer went away, or the link failed";
	case EADDRINUSE:
		return "that address and port are taken (another krdmactl serve?): choose another -p PORT";
	case ENOMEM:
		return "cannot pin that much memory: raise the locked-memory limit (ulimit -l), run as root, or use a smaller size";
	case EMSGSIZE:
		return "the message is larger than the connection can carry";
	case EIO:
		return "the RDMA device failed it: a registration completed with an error (GRANT), the READ of a token's key table failed (the grant was revoked?), or the connection's queue pair failed; see the connection's last error (krdmactl status) and the kernel log (dmesg)";
	case ENOBUFS:
		return "a RECV found rq_depth RECVs already posted on the connection: poll their completions before posting more, or connect with a larger rq_depth";
	case EXDEV:
		return "an iWARP connect or listen runs in the calling thread's network namespace, and this thread is not in the one the /dev/krdma file was opened in: call from a thread of that namespace, or open the file in this one";
	case EINTR:
	case EAGAIN:
	case EINVAL:
		return NULL;
	}
	return krdma_strerror_hint(err);
}

const char *krdma_cmd_strerror_hint(unsigned long cmd, int err)
{
	if (err < 0)
		err = -err;

	switch (cmd) {
	case KRDMA_IOC_LISTEN:
		if (err == EACCES)
			return "listening on a port below 1024 needs CAP_NET_BIND_SERVICE (root has it): choose a port of 1024 or more, or run as root";
		break;
	case KRDMA_IOC_GRANT:
		if (err == EACCES)
			return "the grant asks for more access than the buffer was registered with: register the buffer with every REMOTE_* access to be granted, or grant less";
		if (err == EPERM)
			return "the buffer was registered by another process (this file came through fork(), execve() or SCM_RIGHTS): register the memory in the process that grants it";
		break;
	case KRDMA_IOC_SUBMIT:
		if (err == EACCES)
			return "a READ, RECV or atomic operation writes into a buffer registered without LOCAL_WRITE: register that buffer with KRDMA_ACCESS_LOCAL_WRITE";
		if (err == EPERM)
			return "a buffer of the operation was registered by another process (this file came through fork(), execve() or SCM_RIGHTS): register the memory in the process that submits";
		break;
	case KRDMA_IOC_CONNECT:
		/* A krdma listener's reject reason, or no krdma handshake */
		switch (err) {
		case EPROTO:
			return "the peer is not krdma (no krdma handshake in its answer): is a krdmactl serve listening there, not rping or perftest?";
		case EBUSY:
			return "the server's backlog of connections not yet accepted is full: retry in a moment";
		case ENOBUFS:
			return "the server had no resources (memory, a QP or a CQ) for the connection: retry later, or see the server's kernel log (dmesg)";
		case EPROTONOSUPPORT:
			return "the server's krdma speaks another handshake version: run the same krdma version at both ends (see: krdmactl version)";
		}
		break;
	}
	switch (cmd) {
	case KRDMA_IOC_LISTEN:
	case KRDMA_IOC_ACCEPT:
	case KRDMA_IOC_CONNECT:
	case KRDMA_IOC_DISCONNECT:
	case KRDMA_IOC_BUF_REG:
	case KRDMA_IOC_GRANT:
	case KRDMA_IOC_SUBMIT:
	case KRDMA_IOC_POLL:
		return krdma_conn_strerror_hint(err);
	}
	return krdma_strerror_hint(err);
}
