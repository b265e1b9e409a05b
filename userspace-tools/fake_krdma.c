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
 *   eacces      open() fails with EACCES
 *   enotty      every ioctl fails with ENOTTY (a module without them)
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/krdma.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int fake_fd = -1;

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

/* After the first count of devices: another device. */
static void grow_devs(void)
{
	static bool grown;

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
	return -ENOTTY;
}

static int do_open(const char *path, int flags, mode_t mode,
		   const char *sym)
{
	int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, sym);

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
