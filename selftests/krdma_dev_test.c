// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: the /dev/krdma ABI and the device queries.
 *
 * Runs against every soft device the guest test bed sets up (a fixture
 * variant each): what krdma reports must be what ibv_devinfo, `rdma link`
 * and sysfs report for the same device, every ioctl must honour the size
 * and errno contract of uapi/linux/krdma.h, and a device removed with
 * `rdma link delete` while /dev/krdma is open must vanish cleanly.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/krdma.h>

#include "kselftest_harness.h"

#define MAX_DEVS 64
#define MAX_GIDS 1024

static int krdma_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static int query_dev(int fd, uint32_t index, struct krdma_dev_query *q)
{
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	q->dev_index = index;
	return krdma_ioctl(fd, KRDMA_IOC_DEV_QUERY, q);
}

static int list_devs(int fd, uint32_t *idx, uint32_t cap)
{
	struct krdma_dev_list l = {
		.size = sizeof(l),
		.num_devices = cap,
		.dev_indexes = (uintptr_t)idx,
	};
	int ret = krdma_ioctl(fd, KRDMA_IOC_DEV_LIST, &l);

	return ret ? ret : (int)l.num_devices;
}

/* Index of the device called @name, or -ENODEV */
static int find_dev(int fd, const char *name)
{
	struct krdma_dev_query q;
	uint32_t idx[MAX_DEVS];
	int n, i;

	n = list_devs(fd, idx, MAX_DEVS);
	for (i = 0; i < n && i < MAX_DEVS; i++)
		if (!query_dev(fd, idx[i], &q) && !strcmp((char *)q.name, name))
			return idx[i];
	return -ENODEV;
}

static int query_port(int fd, uint32_t dev, uint32_t port,
		      struct krdma_port_query *p, struct krdma_gid_entry *gids,
		      uint32_t ngids)
{
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->dev_index = dev;
	p->port_num = port;
	p->num_gids = ngids;
	p->gids = (uintptr_t)gids;
	return krdma_ioctl(fd, KRDMA_IOC_PORT_QUERY, p);
}

/* Output of a shell command, NUL-terminated, malloc'd; NULL on failure */
static char *run_cmd(const char *fmt, ...)
{
	char cmd[512], *buf = NULL;
	size_t len = 0, cap = 0;
	va_list ap;
	FILE *f;
	int c;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	if (!f)
		return NULL;
	while ((c = fgetc(f)) != EOF) {
		if (len + 2 > cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				break;
		}
		buf[len++] = c;
	}
	if (pclose(f) != 0 || !buf) {
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/* A sysfs GID file as 16 bytes; 0 on success */
static int read_sysfs_gid(const char *dev, unsigned int index, uint8_t *gid)
{
	char path[256], line[128];
	FILE *f;
	int ret = -1;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/gids/%u", dev, index);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		ret = inet_pton(AF_INET6, line, gid) == 1 ? 0 : -1;
	}
	fclose(f);
	return ret;
}

/* Value of "key:" in ibv_devinfo output (first occurrence at or after @from) */
static const char *kv(const char *text, const char *key, char *val, size_t n)
{
	char pat[64];
	const char *p;
	size_t i = 0;

	snprintf(pat, sizeof(pat), "\t%s:", key);
	p = strstr(text, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == '\t' || *p == ' ')
		p++;
	while (*p && *p != '\n' && i + 1 < n)
		val[i++] = *p++;
	val[i] = '\0';
	return val;
}

static unsigned long long kv_num(struct __test_metadata *_metadata,
				 const char *text, const char *key)
{
	char val[128];

	if (!kv(text, key, val, sizeof(val))) {
		TH_LOG("ibv_devinfo has no '%s'", key);
		return ~0ULL;
	}
	return strtoull(val, NULL, 0);
}

static uint64_t parse_guid(const char *s)
{
	unsigned int a, b, c, d;

	if (sscanf(s, "%x:%x:%x:%x", &a, &b, &c, &d) != 4)
		return 0;
	return (uint64_t)a << 48 | (uint64_t)b << 32 | (uint64_t)c << 16 | d;
}

static const char *dev_netdev(const char *dev)
{
	/* As selftests/qemu/guest-setup.sh creates them */
	if (!strncmp(dev, "rxe", 3))
		return "veth0";
	return "veth2";
}

FIXTURE(krdma) {
	int fd;
	int dev;
};

FIXTURE_VARIANT(krdma) {
	const char *dev;
	const char *type;
	uint32_t transport;
};

FIXTURE_VARIANT_ADD(krdma, rxe) {
	.dev = "rxe0",
	.type = "rxe",
	.transport = KRDMA_TRANSPORT_ROCE,
};

FIXTURE_VARIANT_ADD(krdma, siw) {
	.dev = "siw0",
	.type = "siw",
	.transport = KRDMA_TRANSPORT_IWARP,
};

FIXTURE_SETUP(krdma)
{
	self->fd = open("/dev/krdma", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open /dev/krdma: %s", strerror(errno));
	self->dev = find_dev(self->fd, variant->dev);
	ASSERT_LE(0, self->dev) TH_LOG("krdma does not list %s", variant->dev);
}

FIXTURE_TEARDOWN(krdma)
{
	close(self->fd);
}

TEST_F(krdma, query_module)
{
	struct krdma_query_module m = { .size = sizeof(m) };
	uint32_t idx[MAX_DEVS];

	ASSERT_EQ(0, krdma_ioctl(self->fd, KRDMA_IOC_QUERY_MODULE, &m));
	EXPECT_EQ(KRDMA_ABI_VERSION, m.abi_version);
	EXPECT_NE(0, m.version);
	EXPECT_TRUE(m.features & KRDMA_FEATURE_DEV_QUERY);
	/* The module of this tree has every command of its header */
	EXPECT_TRUE(m.features & KRDMA_FEATURE_LISTEN_QUERY);
	EXPECT_EQ(list_devs(self->fd, idx, MAX_DEVS), (int)m.num_devices);
	EXPECT_LE(2, m.num_devices);
}

TEST_F(krdma, dev_list_grow_protocol)
{
	uint32_t idx[MAX_DEVS], one[2] = { 0, 0xdeadbeef };
	int n, i, found = 0;

	n = list_devs(self->fd, NULL, 0);
	ASSERT_LE(2, n);
	ASSERT_EQ(n, list_devs(self->fd, idx, MAX_DEVS));
	for (i = 1; i < n; i++) {
		EXPECT_LT(idx[i - 1], idx[i]);
	}
	for (i = 0; i < n; i++)
		found += idx[i] == (uint32_t)self->dev;
	EXPECT_EQ(1, found);

	/* Too small an array: the count is still the whole count */
	ASSERT_EQ(n, list_devs(self->fd, one, 1));
	EXPECT_EQ(idx[0], one[0]);
	EXPECT_EQ(0xdeadbeef, one[1]);

	/* An array the kernel cannot write to */
	EXPECT_EQ(-EFAULT, list_devs(self->fd, NULL, 1));
}

TEST_F(krdma, dev_query_matches_ibv_devinfo)
{
	struct krdma_dev_query q;
	char *info, val[128];

	ASSERT_EQ(0, query_dev(self->fd, self->dev, &q));
	EXPECT_STREQ(variant->dev, (char *)q.name);
	EXPECT_EQ(variant->transport, q.transport);

	info = run_cmd("ibv_devinfo -v -d %s", variant->dev);
	ASSERT_NE(NULL, info);

	ASSERT_NE(NULL, kv(info, "transport", val, sizeof(val)));
	EXPECT_STREQ(q.transport == KRDMA_TRANSPORT_IWARP ? "iWARP (1)" :
		     "InfiniBand (0)", val);
	ASSERT_NE(NULL, kv(info, "fw_ver", val, sizeof(val)));
	if (q.fw_ver[0]) {
		EXPECT_STREQ(val, (char *)q.fw_ver);
	}
	ASSERT_NE(NULL, kv(info, "node_guid", val, sizeof(val)));
	EXPECT_EQ(parse_guid(val), q.node_guid);
	ASSERT_NE(NULL, kv(info, "sys_image_guid", val, sizeof(val)));
	EXPECT_EQ(parse_guid(val), q.sys_image_guid);
	EXPECT_EQ(kv_num(_metadata, info, "max_mr_size"), q.max_mr_size);
	EXPECT_EQ(kv_num(_metadata, info, "page_size_cap"), q.page_size_cap);
	EXPECT_EQ(kv_num(_metadata, info, "vendor_id"), q.vendor_id);
	EXPECT_EQ(kv_num(_metadata, info, "vendor_part_id"), q.vendor_part_id);
	EXPECT_EQ(kv_num(_metadata, info, "hw_ver"), q.hw_ver);
	EXPECT_EQ(kv_num(_metadata, info, "phys_port_cnt"), q.phys_port_cnt);
	EXPECT_EQ(kv_num(_metadata, info, "max_qp"), q.max_qp);
	EXPECT_EQ(kv_num(_metadata, info, "max_qp_wr"), q.max_qp_wr);
	/* uverbs reports the smaller of the send and receive limits */
	EXPECT_EQ(kv_num(_metadata, info, "max_sge"),
		  q.max_send_sge < q.max_recv_sge ? q.max_send_sge :
		  q.max_recv_sge);
	EXPECT_EQ(kv_num(_metadata, info, "max_sge_rd"), q.max_sge_rd);
	EXPECT_EQ(kv_num(_metadata, info, "max_cq"), q.max_cq);
	EXPECT_EQ(kv_num(_metadata, info, "max_cqe"), q.max_cqe);
	EXPECT_EQ(kv_num(_metadata, info, "max_mr"), q.max_mr);
	EXPECT_EQ(kv_num(_metadata, info, "max_pd"), q.max_pd);
	EXPECT_EQ(kv_num(_metadata, info, "max_qp_rd_atom"), q.max_qp_rd_atom);
	EXPECT_EQ(kv_num(_metadata, info, "max_qp_init_rd_atom"),
		  q.max_qp_init_rd_atom);
	ASSERT_NE(NULL, kv(info, "atomic_cap", val, sizeof(val)));
	EXPECT_EQ(strtoul(strchr(val, '(') + 1, NULL, 10), q.atomic_cap);
	if (variant->transport == KRDMA_TRANSPORT_IWARP) {
		EXPECT_EQ(KRDMA_ATOMIC_NONE, q.atomic_cap);
	}
	free(info);
}

TEST_F(krdma, port_query_matches_rdma_link_and_sysfs)
{
	static struct krdma_gid_entry gids[MAX_GIDS];
	struct krdma_port_query p;
	char *info, *link, val[128], want[64];
	unsigned int i, sysfs_valid = 0;
	uint8_t zero[16] = {}, sgid[16];

	ASSERT_EQ(0, query_port(self->fd, self->dev, 1, &p, gids, MAX_GIDS));

	info = run_cmd("ibv_devinfo -v -d %s", variant->dev);
	ASSERT_NE(NULL, info);
	ASSERT_NE(NULL, kv(info, "state", val, sizeof(val)));
	EXPECT_EQ(strtoul(strchr(val, '(') + 1, NULL, 10), p.state);
	EXPECT_EQ(KRDMA_PORT_ACTIVE, p.state);
	ASSERT_NE(NULL, kv(info, "max_mtu", val, sizeof(val)));
	EXPECT_EQ(strtoul(val, NULL, 10), p.max_mtu);
	ASSERT_NE(NULL, kv(info, "active_mtu", val, sizeof(val)));
	EXPECT_EQ(strtoul(val, NULL, 10), p.active_mtu);
	/* Not every rdma-core prints it for every transport */
	if (kv(info, "phys_state", val, sizeof(val)) && strchr(val, '(')) {
		EXPECT_EQ(strtoul(strchr(val, '(') + 1, NULL, 10),
			  p.phys_state);
	}
	ASSERT_NE(NULL, kv(info, "link_layer", val, sizeof(val)));
	EXPECT_STREQ(p.link_layer == KRDMA_LINK_LAYER_ETHERNET ? "Ethernet" :
		     "InfiniBand", val);
	free(info);

	/* `rdma link` names the same netdev and state */
	link = run_cmd("rdma link show %s/1", variant->dev);
	ASSERT_NE(NULL, link);
	snprintf(want, sizeof(want), " netdev %s", (char *)p.netdev_name);
	EXPECT_NE(NULL, strstr(link, want)) TH_LOG("rdma link: %s", link);
	EXPECT_NE(NULL, strstr(link, "state ACTIVE"));
	free(link);
	EXPECT_STREQ(dev_netdev(variant->dev), (char *)p.netdev_name);
	EXPECT_NE(0, p.netdev_ifindex);

	/* Every GID krdma reports is the one sysfs has at that index ... */
	ASSERT_LT(0, p.num_gids);
	ASSERT_LE(p.num_gids, MAX_GIDS);
	for (i = 0; i < p.num_gids; i++) {
		ASSERT_EQ(0, read_sysfs_gid(variant->dev, gids[i].index, sgid));
		EXPECT_EQ(0, memcmp(sgid, gids[i].gid, 16))
			TH_LOG("gid %u differs from sysfs", gids[i].index);
		EXPECT_EQ(0, gids[i].__reserved);
		if (variant->transport == KRDMA_TRANSPORT_ROCE) {
			EXPECT_EQ(p.netdev_ifindex, gids[i].netdev_ifindex);
		}
	}
	/* ... and there is one for every non-zero GID of sysfs */
	for (i = 0; i < p.gid_tbl_len && i < MAX_GIDS; i++)
		if (!read_sysfs_gid(variant->dev, i, sgid) &&
		    memcmp(sgid, zero, 16))
			sysfs_valid++;
	EXPECT_EQ(sysfs_valid, p.num_gids);

	/* A RoCE port has the IPv4-mapped GID of the netdev's address */
	if (variant->transport == KRDMA_TRANSPORT_ROCE) {
		int v4 = 0;

		for (i = 0; i < p.num_gids; i++)
			v4 += gids[i].type == KRDMA_GID_TYPE_ROCE_V2 &&
			      !memcmp(gids[i].gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
		EXPECT_LE(1, v4);
	}
}

TEST_F(krdma, port_query_gid_array_too_small)
{
	struct krdma_gid_entry gids[MAX_GIDS], one[2];
	struct krdma_port_query p;

	ASSERT_EQ(0, query_port(self->fd, self->dev, 1, &p, gids, MAX_GIDS));
	ASSERT_LE(1, p.num_gids);
	memset(one, 0x5a, sizeof(one));
	ASSERT_EQ(0, query_port(self->fd, self->dev, 1, &p, one, 1));
	EXPECT_EQ(0, memcmp(&gids[0], &one[0], sizeof(one[0])));
	EXPECT_EQ(0x5a, ((uint8_t *)&one[1])[0]);
	ASSERT_EQ(0, query_port(self->fd, self->dev, 1, &p, NULL, 0));
	EXPECT_LE(1, p.num_gids);
	EXPECT_EQ(-EFAULT, query_port(self->fd, self->dev, 1, &p, NULL, 1));
}

TEST_F(krdma, bad_device_and_port)
{
	struct krdma_dev_query q;
	struct krdma_port_query p;

	EXPECT_EQ(-ENODEV, query_dev(self->fd, 0xfffffff0, &q));
	EXPECT_EQ(-ENODEV, query_port(self->fd, 0xfffffff0, 1, &p, NULL, 0));
	EXPECT_EQ(-EINVAL, query_port(self->fd, self->dev, 0, &p, NULL, 0));
	EXPECT_EQ(-EINVAL, query_port(self->fd, self->dev, 2, &p, NULL, 0));
	EXPECT_EQ(-EINVAL, query_port(self->fd, self->dev, ~0u, &p, NULL, 0));
}

/*
 * The size/errno contract, for every command. Each entry builds a valid
 * struct; the test then damages it one way at a time.
 */
struct abi_case {
	const char *name;
	unsigned long cmd;
	size_t size;
	size_t flags_off;
	size_t reserved_off;
	size_t reserved_len;
	void (*fill)(void *buf, int dev);
};

static void fill_query_module(void *buf, int dev)
{
}

static void fill_dev_list(void *buf, int dev)
{
	static uint32_t idx[MAX_DEVS];
	struct krdma_dev_list *l = buf;

	l->num_devices = MAX_DEVS;
	l->dev_indexes = (uintptr_t)idx;
}

static void fill_dev_query(void *buf, int dev)
{
	((struct krdma_dev_query *)buf)->dev_index = dev;
}

static void fill_port_query(void *buf, int dev)
{
	static struct krdma_gid_entry gids[MAX_GIDS];
	struct krdma_port_query *p = buf;

	p->dev_index = dev;
	p->port_num = 1;
	p->num_gids = MAX_GIDS;
	p->gids = (uintptr_t)gids;
}

#define ABI_CASE(_cmd, _struct, _fill) {				\
	.name = #_cmd, .cmd = _cmd, .size = sizeof(_struct),		\
	.flags_off = offsetof(_struct, flags),				\
	.reserved_off = offsetof(_struct, __reserved),			\
	.reserved_len = sizeof(((_struct *)0)->__reserved),		\
	.fill = _fill }

static const struct abi_case abi_cases[] = {
	ABI_CASE(KRDMA_IOC_QUERY_MODULE, struct krdma_query_module,
		 fill_query_module),
	ABI_CASE(KRDMA_IOC_DEV_LIST, struct krdma_dev_list, fill_dev_list),
	ABI_CASE(KRDMA_IOC_DEV_QUERY, struct krdma_dev_query, fill_dev_query),
	ABI_CASE(KRDMA_IOC_PORT_QUERY, struct krdma_port_query,
		 fill_port_query),
};

/* A struct of @size bytes at the very end of a page, the next unmapped */
static void *edge_buf(size_t size, void **map)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	munmap(p + pg, pg);
	*map = p;
	return p + pg - size;
}

TEST_F(krdma, abi_size_and_errno_contract)
{
	unsigned int i;

	for (i = 0; i < sizeof(abi_cases) / sizeof(abi_cases[0]); i++) {
		const struct abi_case *c = &abi_cases[i];
		unsigned char ref[512], buf[512 + 64];
		void *map, *edge;
		size_t sz;

		TH_LOG("%s", c->name);
		ASSERT_LE(c->size + 64, sizeof(buf));

		/* The valid call, as reference */
		memset(ref, 0, sizeof(ref));
		*(uint32_t *)ref = c->size;
		c->fill(ref, self->dev);
		ASSERT_EQ(0, krdma_ioctl(self->fd, c->cmd, ref));
		EXPECT_EQ(c->size, *(uint32_t *)ref);

		/* Short: every size below the struct is EINVAL */
		for (sz = 0; sz < c->size; sz += 4) {
			memset(buf, 0, sizeof(buf));
			c->fill(buf, self->dev);
			*(uint32_t *)buf = sz;
			EXPECT_EQ(-EINVAL, krdma_ioctl(self->fd, c->cmd, buf))
				TH_LOG("%s size %zu", c->name, sz);
		}

		/* Longer with a zero tail: works, same answer, tail untouched */
		memset(buf, 0, sizeof(buf));
		c->fill(buf, self->dev);
		*(uint32_t *)buf = c->size + 64;
		EXPECT_EQ(0, krdma_ioctl(self->fd, c->cmd, buf));
		EXPECT_EQ(0, memcmp(buf + 4, ref + 4, c->size - 4));
		for (sz = c->size; sz < c->size + 64; sz++) {
			EXPECT_EQ(0, buf[sz]);
		}

		/* Longer with a non-zero tail: E2BIG, wherever the byte is */
		for (sz = c->size; sz < c->size + 64; sz += 13) {
			memset(buf, 0, sizeof(buf));
			c->fill(buf, self->dev);
			*(uint32_t *)buf = c->size + 64;
			buf[sz] = 1;
			EXPECT_EQ(-E2BIG, krdma_ioctl(self->fd, c->cmd, buf));
		}

		/* Reserved and flags must be zero */
		for (sz = 0; sz < c->reserved_len; sz++) {
			memset(buf, 0, sizeof(buf));
			c->fill(buf, self->dev);
			*(uint32_t *)buf = c->size;
			buf[c->reserved_off + sz] = 0x80;
			EXPECT_EQ(-EINVAL, krdma_ioctl(self->fd, c->cmd, buf));
		}
		memset(buf, 0, sizeof(buf));
		c->fill(buf, self->dev);
		*(uint32_t *)buf = c->size;
		*(uint32_t *)(buf + c->flags_off) = 1u << 31;
		EXPECT_EQ(-EINVAL, krdma_ioctl(self->fd, c->cmd, buf));

		/* Bad pointers: NULL, unmapped, kernel, straddling a hole */
		EXPECT_EQ(-EFAULT, krdma_ioctl(self->fd, c->cmd, NULL));
		EXPECT_EQ(-EFAULT, krdma_ioctl(self->fd, c->cmd, (void *)8));
		EXPECT_EQ(-EFAULT, krdma_ioctl(self->fd, c->cmd,
					       (void *)0xffff888000000000ULL));
		edge = edge_buf(c->size - 8, &map);
		ASSERT_NE(NULL, edge);
		memset(edge, 0, c->size - 8);
		*(uint32_t *)edge = c->size;
		EXPECT_EQ(-EFAULT, krdma_ioctl(self->fd, c->cmd, edge));
		munmap(map, sysconf(_SC_PAGESIZE));

		/* The valid call still gives the same answer afterwards */
		memset(buf, 0, sizeof(buf));
		*(uint32_t *)buf = c->size;
		c->fill(buf, self->dev);
		ASSERT_EQ(0, krdma_ioctl(self->fd, c->cmd, buf));
		EXPECT_EQ(0, memcmp(buf, ref, c->size));
	}
}

TEST_F(krdma, unknown_commands_are_enotty)
{
	struct krdma_query_module m = { .size = sizeof(m) };
	static const unsigned long bad[] = {
		_IO(KRDMA_TYPE, KRDMA_CMD_BASE - 1),
		/* The first number after the last command */
		_IO(KRDMA_TYPE, KRDMA_CMD_LISTEN_QUERY + 1),
		_IO(KRDMA_TYPE, KRDMA_CMD_BASE + 0x40),
		_IO(KRDMA_TYPE, 0),
		_IO(KRDMA_TYPE, 0xff),
		_IO(KRDMA_TYPE + 1, KRDMA_CMD_QUERY_MODULE),
		_IOWR(KRDMA_TYPE, KRDMA_CMD_QUERY_MODULE,
		      struct krdma_query_module),
		_IOR(KRDMA_TYPE, KRDMA_CMD_DEV_LIST, __u32),
		FIONREAD,
	};
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-ENOTTY, krdma_ioctl(self->fd, bad[i], &m))
			TH_LOG("cmd %#lx", bad[i]);
	}
}

/* Poll (bounded) until @name is listed (want = 1) or not (want = 0) */
static int wait_dev(int fd, const char *name, int want)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int i, idx;

	for (i = 0; i < 500; i++) {
		idx = find_dev(fd, name);
		if ((idx >= 0) == want)
			return idx;
		nanosleep(&ts, NULL);
	}
	return want ? -ETIMEDOUT : idx;
}

/* Last: it deletes the soft device and creates it again */
TEST_F(krdma, rdma_link_delete_while_open)
{
	struct krdma_port_query p;
	struct krdma_dev_query q;
	uint32_t idx[MAX_DEVS];
	struct krdma_query_module m = { .size = sizeof(m) };
	char netdev[KRDMA_IFNAME_MAX], cmd[128];
	int n, i, newdev;

	ASSERT_EQ(0, query_port(self->fd, self->dev, 1, &p, NULL, 0));
	memcpy(netdev, p.netdev_name, sizeof(netdev));
	ASSERT_NE(0, netdev[0]);

	snprintf(cmd, sizeof(cmd), "rdma link delete %s", variant->dev);
	ASSERT_EQ(0, system(cmd));

	/* Gone from the list, and its index answers ENODEV */
	n = list_devs(self->fd, idx, MAX_DEVS);
	ASSERT_LE(0, n);
	for (i = 0; i < n; i++) {
		EXPECT_NE((uint32_t)self->dev, idx[i]);
	}
	EXPECT_EQ(-ENODEV, find_dev(self->fd, variant->dev));
	EXPECT_EQ(-ENODEV, query_dev(self->fd, self->dev, &q));
	EXPECT_EQ(-ENODEV, query_port(self->fd, self->dev, 1, &p, NULL, 0));

	/* The fd still works for everything else */
	EXPECT_EQ(0, krdma_ioctl(self->fd, KRDMA_IOC_QUERY_MODULE, &m));
	EXPECT_EQ((uint32_t)n, m.num_devices);

	/* Put it back for whoever runs next, and see krdma pick it up */
	snprintf(cmd, sizeof(cmd), "rdma link add %s type %s netdev %s",
		 variant->dev, variant->type, netdev);
	ASSERT_EQ(0, system(cmd));
	newdev = wait_dev(self->fd, variant->dev, 1);
	ASSERT_LE(0, newdev);
	EXPECT_NE(self->dev, newdev);
	ASSERT_EQ(0, query_dev(self->fd, newdev, &q));
	EXPECT_STREQ(variant->dev, (char *)q.name);
	for (i = 0; i < 500; i++) {
		ASSERT_EQ(0, query_port(self->fd, newdev, 1, &p, NULL, 0));
		if (p.state == KRDMA_PORT_ACTIVE)
			break;
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
	EXPECT_EQ(KRDMA_PORT_ACTIVE, p.state);
	EXPECT_STREQ(netdev, (char *)p.netdev_name);
}

TEST_HARNESS_MAIN
