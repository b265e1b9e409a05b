// SPDX-License-Identifier: GPL-2.0
/*
 * krdmactl up, down, doctor, explain: set up a host for krdma and find
 * out what is wrong with it.
 *
 * up and down talk to the kernel's RDMA netlink interface (NETLINK_RDMA,
 * <rdma/rdma_netlink.h>) directly, as `rdma link add/delete` does, with
 * no library. up records what it did in $KRDMA_STATE_DIR/up.state
 * (default /run/krdma), one line per action:
 *
 *   module NAME            a module up loaded (down unloads it)
 *   device NAME NETDEV     a device up created (down deletes it)
 *
 * and down undoes exactly those lines, newest first, then removes the file.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>

#include "libkrdma.h"
#include "krdmactl.h"

#define RDMA_DEV_NAME_MAX 64
#define MAX_NLDEVS 64

/*
 * Small helpers
 */

static bool module_loaded(const char *name)
{
	char line[512];
	size_t len = strlen(name);
	bool found = false;
	FILE *f = fopen("/proc/modules", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, len) && line[len] == ' ') {
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/*
 * Built into the running kernel (its modules.builtin): there is nothing to
 * load, and /proc/modules does not list it
 */
static bool module_builtin(const char *name)
{
	char path[PATH_MAX], line[512];
	size_t len = strlen(name), n;
	bool found = false;
	struct utsname u;
	char *base, *p;
	FILE *f;

	if (uname(&u))
		return false;
	snprintf(path, sizeof(path), "/lib/modules/%s/modules.builtin",
		 u.release);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		base = strrchr(line, '/');
		base = base ? base + 1 : line;
		n = strcspn(base, ".");
		for (p = base; p < base + n; p++)
			if (*p == '-')
				*p = '_';
		found = n == len && !strncmp(base, name, len);
	}
	fclose(f);
	return found;
}

/* Run argv (a program from PATH) with stdout on stderr; its exit status */
static int run_prog(char *const argv[], bool quiet)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (fd >= 0) {
			dup2(quiet ? fd : 2, 1);
			if (quiet)
				dup2(fd, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Output of a shell-free command (argv), up to @len bytes; -1 if not run */
static ssize_t capture_prog(char *const argv[], char *buf, size_t len)
{
	int pfd[2], st;
	size_t got = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (!pid) {
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

		dup2(pfd[1], 1);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 0);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t n = got + 1 < len ? read(pfd[0], buf + got,
						  len - 1 - got) : 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(pfd[0]);
	buf[got] = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return got;
}

static bool have_prog(const char *name)
{
	const char *path = getenv("PATH");
	char dir[PATH_MAX], file[PATH_MAX + 64];

	if (!path || !*path)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n && n < sizeof(dir)) {
			memcpy(dir, path, n);
			dir[n] = 0;
			snprintf(file, sizeof(file), "%s/%s", dir, name);
			if (!access(file, X_OK))
				return true;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

static int read_sysfs(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static int netdev_mtu(const char *netdev)
{
	char path[128], buf[32];

	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", netdev);
	if (read_sysfs(path, buf, sizeof(buf)))
		return -1;
	return atoi(buf);
}

/* The directory krdmactl runs from, for ../krdma.ko */
void tool_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0) {
		snprintf(buf, len, ".");
		return;
	}
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (slash)
		*slash = 0;
}

/* The netdev of the default route (IPv4, else IPv6), or "" */
static void default_route_netdev(char *out, size_t len)
{
	char line[512], ifn[IF_NAMESIZE];
	unsigned long dst, flags;
	FILE *f;

	out[0] = 0;
	f = fopen("/proc/net/route", "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "%15s %lx %*x %lx", ifn, &dst, &flags) == 3 &&
			    dst == 0 && (flags & 1)) {
				snprintf(out, len, "%s", ifn);
				break;
			}
		}
		fclose(f);
		if (out[0])
			return;
	}
	f = fopen("/proc/net/ipv6_route", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char d[40];
		unsigned int plen;

		if (sscanf(line, "%39s %x %*s %*s %*s %*s %*s %*s %*s %15s",
			   d, &plen, ifn) == 3 && plen == 0 &&
		    !strcmp(d, "00000000000000000000000000000000") &&
		    strcmp(ifn, "lo")) {
			snprintf(out, len, "%s", ifn);
			break;
		}
	}
	fclose(f);
}

/*
 * RDMA netlink
 */

struct nl {
	int fd;
	uint32_t seq;
};

struct nlreq {
	struct nlmsghdr h;
	char attrs[1024];
};

static int nl_open(struct nl *nl)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (nl->fd < 0)
		return -errno;
	if (bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(nl->fd);
		nl->fd = -1;
		return err;
	}
	nl->seq = (uint32_t)time(NULL);
	return 0;
}

static void nl_close(struct nl *nl)
{
	if (nl->fd >= 0)
		close(nl->fd);
	nl->fd = -1;
}

static void nl_init(struct nl *nl, struct nlreq *r, int cmd, int flags)
{
	memset(r, 0, sizeof(*r));
	r->h.nlmsg_len = NLMSG_LENGTH(0);
	r->h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
	r->h.nlmsg_flags = NLM_F_REQUEST | flags;
	r->h.nlmsg_seq = ++nl->seq;
}

static void nl_put(struct nlreq *r, uint16_t type, const void *data,
		   size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r +
					     NLMSG_ALIGN(r->h.nlmsg_len));
	size_t alen = NLA_HDRLEN + len;

	if (NLMSG_ALIGN(r->h.nlmsg_len) + NLA_ALIGN(alen) > sizeof(*r))
		abort();
	a->nla_type = type;
	a->nla_len = alen;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + NLA_ALIGN(alen);
}

static void nl_put_str(struct nlreq *r, uint16_t type, const char *s)
{
	nl_put(r, type, s, strlen(s) + 1);
}

static void nl_put_u32(struct nlreq *r, uint16_t type, uint32_t v)
{
	nl_put(r, type, &v, sizeof(v));
}

typedef void (*nl_cb)(struct nlattr **tb, void *arg);

static void nl_parse(struct nlmsghdr *h, struct nlattr **tb)
{
	struct nlattr *a = (struct nlattr *)NLMSG_DATA(h);
	int rem = h->nlmsg_len - NLMSG_HDRLEN;

	memset(tb, 0, sizeof(*tb) * RDMA_NLDEV_ATTR_MAX);
	while (rem >= (int)NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	       a->nla_len <= rem) {
		int type = a->nla_type & NLA_TYPE_MASK;

		if (type < RDMA_NLDEV_ATTR_MAX)
			tb[type] = a;
		rem -= NLA_ALIGN(a->nla_len);
		a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len));
	}
}

static const char *nla_str(struct nlattr *a)
{
	return a ? (const char *)a + NLA_HDRLEN : "";
}

static uint32_t nla_u32(struct nlattr *a)
{
	uint32_t v = 0;

	if (a)
		memcpy(&v, (char *)a + NLA_HDRLEN, sizeof(v));
	return v;
}

static uint8_t nla_u8(struct nlattr *a)
{
	return a ? *((uint8_t *)a + NLA_HDRLEN) : 0;
}

/* Send @r, hand every answer to @cb; 0 or -errno of the kernel */
static int nl_talk(struct nl *nl, struct nlreq *r, nl_cb cb, void *arg)
{
	static char buf[32768] __attribute__((aligned(8)));
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (sendto(nl->fd, r, r->h.nlmsg_len, 0, (struct sockaddr *)&sa,
		   sizeof(sa)) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(nl->fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != r->h.nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error;
			}
			if (cb) {
				nl_parse(h, tb);
				cb(tb, arg);
			}
			if (!(h->nlmsg_flags & NLM_F_MULTI) &&
			    !(r->h.nlmsg_flags & NLM_F_ACK))
				return 0;
		}
	}
}

struct nldev {
	uint32_t index;
	char name[RDMA_DEV_NAME_MAX];
	char protocol[16];		/* "roce", "iw", "ib", "" */
	char netdev[IF_NAMESIZE];	/* of port 1 */
	uint8_t port_state;		/* of port 1 */
	bool soft;			/* rxe, siw: no parent device */
};

struct nldevs {
	struct nldev d[MAX_NLDEVS];
	int n;
};

static void dev_cb(struct nlattr **tb, void *arg)
{
	struct nldevs *l = arg;
	struct nldev *d;

	if (l->n >= MAX_NLDEVS || !tb[RDMA_NLDEV_ATTR_DEV_INDEX])
		return;
	d = &l->d[l->n++];
	memset(d, 0, sizeof(*d));
	d->index = nla_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	snprintf(d->name, sizeof(d->name), "%s",
		 nla_str(tb[RDMA_NLDEV_ATTR_DEV_NAME]));
	snprintf(d->protocol, sizeof(d->protocol), "%s",
		 nla_str(tb[RDMA_NLDEV_ATTR_DEV_PROTOCOL]));
}

static void port_cb(struct nlattr **tb, void *arg)
{
	struct nldev *d = arg;

	snprintf(d->netdev, sizeof(d->netdev), "%s",
		 nla_str(tb[RDMA_NLDEV_ATTR_NDEV_NAME]));
	d->port_state = nla_u8(tb[RDMA_NLDEV_ATTR_PORT_STATE]);
}

/* Every RDMA device of this network namespace, with port 1's netdev */
static int nl_list(struct nl *nl, struct nldevs *l)
{
	struct nlreq r;
	char path[256];
	int i, ret;

	l->n = 0;
	nl_init(nl, &r, RDMA_NLDEV_CMD_GET, NLM_F_DUMP);
	ret = nl_talk(nl, &r, dev_cb, l);
	if (ret)
		return ret;
	for (i = 0; i < l->n; i++) {
		struct nldev *d = &l->d[i];

		nl_init(nl, &r, RDMA_NLDEV_CMD_PORT_GET, 0);
		nl_put_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, d->index);
		nl_put_u32(&r, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
		nl_talk(nl, &r, port_cb, d);
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device",
			 d->name);
		d->soft = access(path, F_OK) != 0;
	}
	return 0;
}

static struct nldev *nl_find(struct nldevs *l, const char *name,
			     const char *netdev)
{
	int i;

	for (i = 0; i < l->n; i++) {
		if (name && !strcmp(l->d[i].name, name))
			return &l->d[i];
		if (netdev && !strcmp(l->d[i].netdev, netdev))
			return &l->d[i];
	}
	return NULL;
}

static const char *port_state_name(uint8_t s)
{
	return krdma_port_state_str(s);
}

/*
 * The state file
 */

static void state_path(char *buf, size_t len, bool dir_only)
{
	const char *dir = getenv("KRDMA_STATE_DIR");

	if (!dir || !*dir)
		dir = "/run/krdma";
	snprintf(buf, len, dir_only ? "%s" : "%s/up.state", dir);
}

static int state_add(const char *fmt, ...) __printf(1, 2);
static int state_add(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	FILE *f;

	state_path(path, sizeof(path), true);
	mkdir(path, 0755);
	state_path(path, sizeof(path), false);
	f = fopen(path, "ae");
	if (!f) {
		errmsg("cannot record in %s: %s (krdmactl down will not undo this)",
		       path, strerror(errno));
		return -1;
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	return fclose(f) ? -1 : 0;
}

/*
 * krdmactl up
 */

/*
 * modprobe NAME, else insmod @fallback (if any); records what it loaded.
 * @missing: what to do when neither works (NULL: nothing to add).
 */
static int load_module(const char *name, const char *fallback,
		       const char *missing, bool *loaded)
{
	char *mp[] = { "modprobe", "-q", (char *)name, NULL };
	char *im[] = { "insmod", (char *)fallback, NULL };

	*loaded = false;
	if (module_loaded(name) || module_builtin(name))
		return 0;
	if (!run_prog(mp, true) && module_loaded(name)) {
		printf("loaded module %s (modprobe)\n", name);
	} else if (fallback && !access(fallback, R_OK)) {
		if (run_prog(im, false) || !module_loaded(name)) {
			errmsg("cannot load %s: modprobe %s and insmod %s failed",
			       name, name, fallback);
			return -1;
		}
		printf("loaded module %s (insmod %s)\n", name, fallback);
	} else {
		errmsg_advice(0, missing,
			      "cannot load %s: modprobe %s failed%s%s", name,
			      name, fallback ? " and there is no " : "",
			      fallback ? fallback : "");
		return -1;
	}
	*loaded = true;
	state_add("module %s", name);
	return 0;
}

/*
 * up and down change the kernel: as any other user, say so once, before
 * anything is tried, with the command to run instead
 */
static bool have_root(int argc, char *argv[])
{
	char cmd[512] = "sudo krdmactl", hint[600];
	size_t n;
	int i;

	if (!geteuid())
		return true;
	for (i = 0; i < argc; i++) {
		n = strlen(cmd);
		snprintf(cmd + n, sizeof(cmd) - n, " %s", argv[i]);
	}
	snprintf(hint, sizeof(hint), "run it as root: %s", cmd);
	errmsg_advice(0, hint,
		      "%s needs root: it loads kernel modules and %s RDMA devices (this is uid %u)",
		      argv[0], strcmp(argv[0], "down") ? "creates" : "deletes",
		      (unsigned int)geteuid());
	return false;
}

static void report_dev(const struct nldev *d, const char *what)
{
	printf("%s %s on %s (%s%s, port 1 %s)\n", d->name, what,
	       d->netdev[0] ? d->netdev : "no netdev",
	       d->soft ? "soft " : "", d->protocol[0] ? d->protocol : "?",
	       port_state_name(d->port_state));
}

/* The link type of @d ("rxe", "siw"), or NULL: not a soft device */
static const char *soft_type(const struct nldev *d)
{
	if (d->soft && !strcmp(d->protocol, "roce"))
		return "rxe";
	if (d->soft && !strcmp(d->protocol, "iw"))
		return "siw";
	return NULL;
}

/* A soft device of @type on @netdev, or NULL */
static struct nldev *find_soft(struct nldevs *l, const char *netdev,
			       const char *type)
{
	const char *t;
	int i;

	for (i = 0; i < l->n; i++) {
		t = soft_type(&l->d[i]);
		if (t && !strcmp(t, type) && !strcmp(l->d[i].netdev, netdev))
			return &l->d[i];
	}
	return NULL;
}

static int wait_active(struct nl *nl, struct nldevs *l, const char *name,
		       struct nldev *out)
{
	int i;

	for (i = 0; i < 50; i++) {
		struct nldev *d;

		if (!nl_list(nl, l)) {
			d = nl_find(l, name, NULL);
			if (d) {
				*out = *d;
				if (d->port_state == KRDMA_PORT_ACTIVE)
					return 0;
			}
		}
		usleep(100000);
	}
	return -ETIMEDOUT;
}

int up_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "rxe", no_argument, NULL, 'r' },
		{ "siw", no_argument, NULL, 's' },
		{ "module", required_argument, NULL, 'm' },
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char netdev[IF_NAMESIZE] = "", dir[PATH_MAX], kopath[PATH_MAX + 32];
	char sopath[PATH_MAX + 160], name[RDMA_DEV_NAME_MAX] = "";
	char missing[1024];
	const char *type = NULL, *module = NULL, *siw_ko;
	struct nldevs *l;
	struct nldev *d, got;
	struct utsname uts;
	struct nlreq r;
	struct nl nl;
	bool loaded, rxe = false, siw = false;
	int c, i, ret, status = 1;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":m:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			rxe = true;
			type = "rxe";
			break;
		case 's':
			siw = true;
			type = "siw";
			break;
		case 'm':
			module = optarg;
			break;
		case 'n':
			if (strlen(optarg) >= RDMA_DEV_NAME_MAX) {
				errmsg("up: name '%s' too long", optarg);
				return EXIT_USAGE;
			}
			snprintf(name, sizeof(name), "%s", optarg);
			break;
		case 'h':
			print_usage_of(argv[0], stdout);
			return finish_stdout(0);
		default:
			bad_option(argv[0], c, argv);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		if (strlen(argv[optind]) >= IF_NAMESIZE) {
			errmsg("up: no network device '%s'", argv[optind]);
			return 1;
		}
		snprintf(netdev, sizeof(netdev), "%s", argv[optind++]);
	}
	if (optind < argc) {
		errmsg("up: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	if (rxe && siw) {
		errmsg_advice(0, "run up once for each: rxe and siw on one netdev are fine",
			      "up: give one of --rxe and --siw");
		return EXIT_USAGE;
	}
	if (!have_root(argc, argv))
		return 1;

	/* krdma itself: modprobe, else insmod --module or ../krdma.ko */
	tool_dir(dir, sizeof(dir));
	snprintf(kopath, sizeof(kopath), "%s/../krdma.ko", dir);
	if (!module_loaded("krdma")) {
		char *deps[] = { "modprobe", "-q", "-a", "ib_core", "rdma_cm",
				 NULL };

		run_prog(deps, true);
	}
	if (load_module("krdma", module ? module : kopath,
			"install it (make install, or make dkms-install, in krdma's source tree), or name a krdma.ko with --module PATH",
			&loaded))
		return 1;

	ret = nl_open(&nl);
	if (ret) {
		errmsg_err(ret, "cannot open the RDMA netlink socket (is ib_core loaded?)");
		return 1;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		nl_close(&nl);
		return 1;
	}
	ret = nl_list(&nl, l);
	if (ret) {
		errmsg_err(ret, "cannot list the RDMA devices over netlink");
		goto fail;
	}

	/* Hardware: only check and report */
	if (!type && !netdev[0]) {
		int hw = 0;

		for (i = 0; i < l->n; i++) {
			if (l->d[i].soft)
				continue;
			report_dev(&l->d[i], "(hardware) is");
			hw++;
		}
		if (hw) {
			printf("RDMA hardware present: nothing to create; check it with: krdmactl doctor\n");
			goto done;
		}
	}
	if (!type)
		type = "rxe";

	if (!netdev[0]) {
		default_route_netdev(netdev, sizeof(netdev));
		if (!netdev[0]) {
			errmsg_advice(0, "name the network device to put the RDMA device on: krdmactl up [--rxe|--siw] NETDEV (list them with: ip -br link)",
				      "up: no default route, so no network device to choose");
			goto fail;
		}
		printf("using %s, the network device of the default route\n",
		       netdev);
	}
	if (!if_nametoindex(netdev)) {
		errmsg_advice(0, "list the network devices with: ip -br link",
			      "up: no network device '%s'", netdev);
		goto fail;
	}

	/*
	 * Only a device of the type (and name) asked for is "already
	 * there"; -n NAME without a type takes NAME's soft type
	 */
	d = name[0] ? nl_find(l, name, NULL) : find_soft(l, netdev, type);
	if (d && !rxe && !siw && soft_type(d))
		type = soft_type(d);
	if (d && (!soft_type(d) || strcmp(soft_type(d), type) ||
		  strcmp(d->netdev, netdev))) {
		errmsg_advice(0, "choose another --name, or leave --name out for the first free one",
			      "up: the name %s is taken by a %s%s device on %s, not a %s device on %s",
			      name, d->soft ? "soft " : "",
			      d->protocol[0] ? d->protocol : "?",
			      d->netdev[0] ? d->netdev : "no netdev", type,
			      netdev);
		status = EXIT_USAGE;
		goto fail;
	}
	if (d) {
		report_dev(d, "already exists");
		goto done;
	}

	/* The soft driver */
	uname(&uts);
	if (!strcmp(type, "rxe")) {
		snprintf(missing, sizeof(missing),
			 "kernel %s has no rdma_rxe module: install its extra modules (linux-modules-extra-%s on Ubuntu), or use soft-iWARP: krdmactl up --siw",
			 uts.release, uts.release);
		if (load_module("rdma_rxe", NULL, missing, &loaded))
			goto fail;
	} else {
		siw_ko = getenv("KRDMA_SIW_KO");
		if (!siw_ko || !*siw_ko) {
			snprintf(sopath, sizeof(sopath), "%s/../build/siw-%s/siw.ko",
				 dir, uts.release);
			siw_ko = access(sopath, R_OK) ? NULL : sopath;
		}
		snprintf(missing, sizeof(missing),
			 "kernel %s has no siw module (Debian's kernels do not ship it): build it from the linux-source package with selftests/qemu/build-siw.sh /lib/modules/%s/build in krdma's source tree (up then finds build/siw-%s/siw.ko) or set KRDMA_SIW_KO=/path/to/siw.ko; or use soft-RoCE: krdmactl up --rxe",
			 uts.release, uts.release, uts.release);
		if (load_module("siw", siw_ko, missing, &loaded))
			goto fail;
	}

	if (!name[0]) {
		for (i = 0; i < 1000; i++) {
			snprintf(name, sizeof(name), "%s%d", type, i);
			if (!nl_find(l, name, NULL))
				break;
		}
	}
	/* no NLM_F_CREATE/EXCL: EXCL is NLM_F_MATCH, which reads as a dump */
	nl_init(&nl, &r, RDMA_NLDEV_CMD_NEWLINK, NLM_F_ACK);
	nl_put_str(&r, RDMA_NLDEV_ATTR_DEV_NAME, name);
	nl_put_str(&r, RDMA_NLDEV_ATTR_LINK_TYPE, type);
	nl_put_str(&r, RDMA_NLDEV_ATTR_NDEV_NAME, netdev);
	ret = nl_talk(&nl, &r, NULL, NULL);
	if (ret) {
		const char *hint = NULL;

		if (ret == -EPERM || ret == -EACCES)
			hint = "run as root: sudo krdmactl up";
		else if (ret == -EEXIST)
			hint = "that name is taken: choose another with --name";
		else if (ret == -EINVAL || ret == -EOPNOTSUPP || ret == -ENODEV)
			hint = "is the driver module loaded, and is the network device an Ethernet one?";
		errmsg_advice(ret, hint, "cannot create %s (%s) on %s", name,
			      type, netdev);
		goto fail;
	}
	state_add("device %s %s", name, netdev);
	memset(&got, 0, sizeof(got));
	snprintf(got.name, sizeof(got.name), "%s", name);
	ret = wait_active(&nl, l, name, &got);
	report_dev(&got, "created");
	if (ret)
		errmsg_advice(0, "is the network device up? try: krdmactl doctor",
			      "%s is not ACTIVE after 5 s", name);
	printf("undo with: krdmactl down\n");
done:
	free(l);
	nl_close(&nl);
	return finish_stdout(0);
fail:
	free(l);
	nl_close(&nl);
	finish_stdout(1);
	return status;
}

/*
 * krdmactl down
 */

/* Unloads @name unless a soft device of its kind is still there */
static void unload_module(struct nl *nl, struct nldevs *l, const char *name,
			  int *failed)
{
	char *rm[] = { "rmmod", (char *)name, NULL };
	const char *proto = !strcmp(name, "rdma_rxe") ? "roce" :
			    !strcmp(name, "siw") ? "iw" : NULL;
	int i;

	if (!module_loaded(name)) {
		printf("module %s: already unloaded\n", name);
		return;
	}
	if (proto && !nl_list(nl, l)) {
		for (i = 0; i < l->n; i++) {
			if (l->d[i].soft && !strcmp(l->d[i].protocol, proto)) {
				printf("module %s: kept, %s still uses it\n",
				       name, l->d[i].name);
				return;
			}
		}
	}
	if (run_prog(rm, false) || module_loaded(name)) {
		errmsg("cannot unload %s (in use?)", name);
		(*failed)++;
		return;
	}
	printf("unloaded module %s\n", name);
}

int down_main(int argc, char *argv[])
{
	char path[PATH_MAX], (*lines)[160] = NULL, line[160];
	struct nldevs *l = NULL;
	int nlines = 0, i, failed = 0, ret;
	struct nl nl = { .fd = -1 };
	FILE *f;

	opterr = 0;
	optind = 1;
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		print_usage_of(argv[0], stdout);
		return finish_stdout(0);
	}
	if (argc > 1) {
		errmsg("down: unexpected argument '%s'", argv[1]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	state_path(path, sizeof(path), false);
	f = fopen(path, "re");
	if (!f) {
		printf("nothing to undo: no %s (krdmactl down undoes only what krdmactl up created)\n",
		       path);
		return finish_stdout(0);
	}
	if (!have_root(argc, argv)) {
		fclose(f);
		return 1;
	}
	lines = calloc(256, sizeof(*lines));
	l = calloc(1, sizeof(*l));
	if (!lines || !l) {
		fclose(f);
		free(lines);
		free(l);
		return 1;
	}
	while (nlines < 256 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0])
			snprintf(lines[nlines++], sizeof(line), "%s", line);
	}
	fclose(f);

	ret = nl_open(&nl);
	if (ret)
		errmsg_err(ret, "cannot open the RDMA netlink socket");
	/* devices first, newest first; then modules, newest first */
	for (i = nlines - 1; i >= 0 && !ret; i--) {
		char dname[RDMA_DEV_NAME_MAX], ndev[IF_NAMESIZE];
		struct nldev *d;
		struct nlreq r;
		int err;

		if (sscanf(lines[i], "device %63s %15s", dname, ndev) != 2)
			continue;
		err = nl_list(&nl, l);
		d = err ? NULL : nl_find(l, dname, NULL);
		if (!d) {
			printf("%s: already gone\n", dname);
			continue;
		}
		if (strcmp(d->netdev, ndev)) {
			errmsg("%s is now on %s, not on %s as krdmactl up created it: left alone",
			       dname, d->netdev, ndev);
			failed++;
			continue;
		}
		nl_init(&nl, &r, RDMA_NLDEV_CMD_DELLINK, NLM_F_ACK);
		nl_put_u32(&r, RDMA_NLDEV_ATTR_DEV_INDEX, d->index);
		err = nl_talk(&nl, &r, NULL, NULL);
		if (err) {
			errmsg_advice(err, err == -EPERM ? "run as root: sudo krdmactl down" : NULL,
				      "cannot delete %s", dname);
			failed++;
			continue;
		}
		printf("deleted %s (was on %s)\n", dname, ndev);
	}
	for (i = nlines - 1; i >= 0 && !ret; i--) {
		char mname[64];

		if (sscanf(lines[i], "module %63s", mname) != 1)
			continue;
		unload_module(&nl, l, mname, &failed);
	}
	nl_close(&nl);
	free(lines);
	free(l);
	if (ret || failed) {
		errmsg("%s kept: %d thing(s) not undone", path, ret ? nlines : failed);
		finish_stdout(1);
		return 1;
	}
	if (unlink(path))
		errmsg("cannot remove %s: %s", path, strerror(errno));
	state_path(path, sizeof(path), true);
	rmdir(path);
	return finish_stdout(0);
}

/*
 * krdmactl doctor
 */

enum { CK_OK, CK_FAIL, CK_SKIP };

struct check {
	const char *name;
	int status;
	char verdict[1024];
	char fix[1024];
};

#define MAX_CHECKS 16

struct doctor {
	struct check c[MAX_CHECKS];
	int n;
};

static struct check *ck_new(struct doctor *dr, const char *name)
{
	struct check *c = &dr->c[dr->n++];

	c->name = name;
	c->status = CK_OK;
	return c;
}

static void __printf(2, 3) appendf(char *buf, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 1 >= 1024)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, 1024 - n, fmt, ap);
	va_end(ap);
}

/* A problem: adds "; " between problems, and the fix unless already there */
static void __printf(3, 4) ck_fail(struct check *c, const char *fix,
				   const char *fmt, ...)
{
	size_t n;
	va_list ap;

	if (c->status != CK_FAIL)
		c->verdict[0] = 0;
	c->status = CK_FAIL;
	n = strlen(c->verdict);
	if (n)
		appendf(c->verdict, "; ");
	n = strlen(c->verdict);
	va_start(ap, fmt);
	if (n + 1 < sizeof(c->verdict))
		vsnprintf(c->verdict + n, sizeof(c->verdict) - n, fmt, ap);
	va_end(ap);
	if (fix && !strstr(c->fix, fix))
		appendf(c->fix, "%s%s", c->fix[0] ? "; " : "", fix);
}

static void __printf(3, 4) ck_set(struct check *c, int status,
				  const char *fmt, ...)
{
	va_list ap;

	c->status = status;
	va_start(ap, fmt);
	vsnprintf(c->verdict, sizeof(c->verdict), fmt, ap);
	va_end(ap);
}

static bool gid_is_link_local(const uint8_t g[16])
{
	return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

static bool has_cap_ipc_lock(void)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff & (1ULL << 14);	/* CAP_IPC_LOCK */
}

static const char *human_kib(unsigned long long b, char *buf, size_t len)
{
	if (b >= (1ULL << 30) && !(b % (1ULL << 30)))
		snprintf(buf, len, "%llu GiB", b >> 30);
	else if (b >= (1ULL << 20) && !(b % (1ULL << 20)))
		snprintf(buf, len, "%llu MiB", b >> 20);
	else
		snprintf(buf, len, "%llu KiB", b >> 10);
	return buf;
}

static void doctor_module(struct check *c, int *fdp)
{
	struct krdma_query_module qm;
	int fd = krdma_open(), ret;

	*fdp = -1;
	if (fd < 0) {
		if (fd == -EACCES || fd == -EPERM) {
			char why[512], fix[512];

			node_access_advice(why, sizeof(why), fix, sizeof(fix));
			ck_fail(c, fix, "no permission to open " KRDMA_DEV_PATH ": %s",
				why);
		} else
			ck_fail(c, "sudo krdmactl up (or: sudo modprobe krdma, or insmod krdma.ko)",
				"krdma is not loaded: cannot open " KRDMA_DEV_PATH " (%s)",
				strerror(-fd));
		return;
	}
	ret = krdma_check_module(fd, KRDMA_FEATURE_DEV_QUERY, &qm);
	if (ret == -EPROTO) {
		ck_fail(c, "build and install krdma.ko and krdmactl from the same tree",
			"ABI mismatch: the loaded krdma.ko speaks ABI %u, krdmactl was built for ABI %u",
			qm.abi_version, KRDMA_ABI_VERSION);
	} else if (ret) {
		ck_fail(c, krdma_strerror_hint(ret),
			"cannot query the krdma module: %s", strerror(-ret));
	} else {
		ck_set(c, CK_OK, "krdma %u.%u.%u loaded, ABI %u matches krdmactl",
		       KRDMA_VERSION_MAJOR(qm.version),
		       KRDMA_VERSION_MINOR(qm.version),
		       KRDMA_VERSION_PATCH(qm.version), qm.abi_version);
		*fdp = fd;
		return;
	}
	close(fd);
}

struct ipaddr {
	int family;
	uint8_t gid[16];	/* as a GID: IPv4-mapped for IPv4 */
	char str[INET6_ADDRSTRLEN];
};

/* The non-link-local addresses of @netdev */
static int netdev_addrs(struct ifaddrs *ifa, const char *netdev,
			struct ipaddr *out, int max)
{
	int n = 0;

	for (; ifa && n < max; ifa = ifa->ifa_next) {
		struct ipaddr *a = &out[n];

		if (!ifa->ifa_addr || strcmp(ifa->ifa_name, netdev))
			continue;
		memset(a, 0, sizeof(*a));
		if (ifa->ifa_addr->sa_family == AF_INET) {
			struct sockaddr_in *s = (void *)ifa->ifa_addr;

			a->gid[10] = a->gid[11] = 0xff;
			memcpy(&a->gid[12], &s->sin_addr, 4);
			inet_ntop(AF_INET, &s->sin_addr, a->str, sizeof(a->str));
		} else if (ifa->ifa_addr->sa_family == AF_INET6) {
			struct sockaddr_in6 *s = (void *)ifa->ifa_addr;

			memcpy(a->gid, &s->sin6_addr, 16);
			if (gid_is_link_local(a->gid))
				continue;
			inet_ntop(AF_INET6, &s->sin6_addr, a->str,
				  sizeof(a->str));
		} else {
			continue;
		}
		a->family = ifa->ifa_addr->sa_family;
		n++;
	}
	return n;
}

static void doctor_ports(struct doctor *dr, struct dev_info *devs,
			 uint32_t ndevs)
{
	struct check *cp = ck_new(dr, "ports");
	struct check *cg = ck_new(dr, "gids");
	struct check *cm = ck_new(dr, "mtu");
	struct ifaddrs *ifa = NULL;
	int nports = 0, ngidports = 0, nmtu = 0;
	char fix[256];
	uint32_t i, p, g;

	getifaddrs(&ifa);
	for (i = 0; i < ndevs; i++) {
		const struct krdma_dev_query *dq = &devs[i].dq;

		for (p = 0; p < dq->phys_port_cnt; p++) {
			const struct port_info *pi = &devs[i].ports[p];
			const struct krdma_port_query *pq = &pi->pq;
			const char *nd = (const char *)pq->netdev_name;
			const char *dn = (const char *)dq->name;
			struct ipaddr addrs[32];
			int naddrs, a, mtu;
			bool any_ip_gid = false;

			nports++;
			if (pq->state != KRDMA_PORT_ACTIVE &&
			    pq->state != KRDMA_PORT_ACTIVE_DEFER) {
				char ops[64] = "";
				char path[128];

				snprintf(path, sizeof(path),
					 "/sys/class/net/%s/operstate", nd);
				if (nd[0])
					read_sysfs(path, ops, sizeof(ops));
				if (nd[0])
					snprintf(fix, sizeof(fix),
						 "bring %s (and its link partner) up: ip link set %s up",
						 nd, nd);
				else
					snprintf(fix, sizeof(fix),
						 "check the cable/switch and the subnet manager (IB)");
				ck_fail(cp, fix, "%s/%u is %s%s%s%s%s", dn,
					pq->port_num,
					krdma_port_state_str(pq->state),
					nd[0] ? " (netdev " : "", nd,
					ops[0] ? " is " : "", ops[0] ? ops : "");
				if (nd[0])
					appendf(cp->verdict, ")");
			}
			if (!nd[0])
				continue;

			/* GIDs for the addresses of the netdev */
			if (dq->transport == KRDMA_TRANSPORT_ROCE ||
			    dq->transport == KRDMA_TRANSPORT_IWARP) {
				ngidports++;
				naddrs = netdev_addrs(ifa, nd, addrs,
						      ARRAY_SIZE(addrs));
				snprintf(fix, sizeof(fix),
					 "give %s an IP address: ip addr add ADDR/PREFIX dev %s",
					 nd, nd);
				if (!naddrs) {
					ck_fail(cg, fix,
						"%s/%u: %s has no IP address (krdma connects by IP)%s",
						dn, pq->port_num, nd,
						dq->transport == KRDMA_TRANSPORT_ROCE ?
						", only link-local GIDs" : "");
				}
				for (g = 0; g < pi->ngids; g++)
					if (!gid_is_link_local(pi->gids[g].gid))
						any_ip_gid = true;
				if (dq->transport == KRDMA_TRANSPORT_ROCE &&
				    naddrs && !any_ip_gid)
					ck_fail(cg, "wait a moment, or re-create the device: krdmactl down; krdmactl up",
						"%s/%u has only link-local GIDs, though %s has %s",
						dn, pq->port_num, nd, addrs[0].str);
				for (a = 0; dq->transport == KRDMA_TRANSPORT_ROCE &&
				     any_ip_gid && a < naddrs; a++) {
					bool found = false;

					for (g = 0; g < pi->ngids; g++)
						if (!memcmp(pi->gids[g].gid,
							    addrs[a].gid, 16))
							found = true;
					if (!found)
						ck_fail(cg, "re-add the address, or re-create the device (krdmactl down; krdmactl up)",
							"%s/%u has no GID for %s of %s",
							dn, pq->port_num,
							addrs[a].str, nd);
				}
			}

			/* MTU */
			mtu = netdev_mtu(nd);
			if (mtu <= 0 || !pq->active_mtu)
				continue;
			nmtu++;
			snprintf(fix, sizeof(fix),
				 "set the MTU of %s (and of the peer's netdev) to at least 1500: ip link set %s mtu 1500",
				 nd, nd);
			if ((int)pq->active_mtu > mtu)
				ck_fail(cm, fix,
					"%s/%u: RDMA MTU %u is larger than the MTU %d of %s: full packets get dropped",
					dn, pq->port_num, pq->active_mtu, mtu,
					nd);
			else if (pq->active_mtu < 1024)
				ck_fail(cm, fix,
					"%s/%u: the MTU %d of %s leaves an RDMA MTU of only %u",
					dn, pq->port_num, mtu, nd,
					pq->active_mtu);
			else if (dq->transport == KRDMA_TRANSPORT_ROCE &&
				 (int)pq->active_mtu + 60 > mtu)
				ck_fail(cm, fix,
					"%s/%u: RDMA MTU %u plus RoCE v2 headers exceeds the MTU %d of %s",
					dn, pq->port_num, pq->active_mtu, mtu,
					nd);
		}
	}
	freeifaddrs(ifa);
	if (cp->status == CK_OK)
		ck_set(cp, CK_OK, "%d port%s, all ACTIVE", nports,
		       nports == 1 ? "" : "s");
	if (cg->status == CK_OK)
		ck_set(cg, ngidports ? CK_OK : CK_SKIP,
		       ngidports ? "every address of the RDMA netdevs has a GID" :
		       "no RoCE or iWARP port to check");
	if (cm->status == CK_OK)
		ck_set(cm, nmtu ? CK_OK : CK_SKIP,
		       nmtu ? "RDMA MTUs fit the netdev MTUs" :
		       "no port with a netdev to check");
}

static void doctor_memlock(struct check *c)
{
	struct rlimit rl;
	char b[32];
	bool cap = has_cap_ipc_lock();

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		ck_set(c, CK_SKIP, "cannot read RLIMIT_MEMLOCK");
		return;
	}
	if (cap) {
		ck_set(c, CK_OK, "CAP_IPC_LOCK: no limit on pinned memory (ulimit -l %s)",
		       rl.rlim_cur == RLIM_INFINITY ? "unlimited" :
		       human_kib(rl.rlim_cur, b, sizeof(b)));
	} else if (rl.rlim_cur == RLIM_INFINITY) {
		ck_set(c, CK_OK, "ulimit -l unlimited");
	} else if (rl.rlim_cur < (64ULL << 20)) {
		ck_fail(c, "raise it: ulimit -l unlimited (as root), or a memlock line in /etc/security/limits.conf (LimitMEMLOCK= for a systemd service), or run with CAP_IPC_LOCK",
			"ulimit -l is %s and no CAP_IPC_LOCK: buffers larger than that fail with ENOMEM",
			human_kib(rl.rlim_cur, b, sizeof(b)));
	} else {
		ck_set(c, CK_OK, "ulimit -l %s",
		       human_kib(rl.rlim_cur, b, sizeof(b)));
	}
}

static void sys_cb(struct nlattr **tb, void *arg)
{
	int *mode = arg;

	if (tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE])
		*mode = nla_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]);
}

static void doctor_netns(struct check *c, uint32_t ndevs)
{
	struct stat self, init;
	int mode = -1;
	struct nlreq r;
	struct nl nl;
	bool in_init = true, known = false;
	const char *ms;

	if (!stat("/proc/self/ns/net", &self) && !stat("/proc/1/ns/net", &init)) {
		known = true;
		in_init = self.st_ino == init.st_ino && self.st_dev == init.st_dev;
	}
	if (!nl_open(&nl)) {
		nl_init(&nl, &r, RDMA_NLDEV_CMD_SYS_GET, 0);
		nl_talk(&nl, &r, sys_cb, &mode);
		nl_close(&nl);
	}
	ms = mode == 1 ? "shared" : mode == 0 ? "exclusive" : "unknown";
	if (!in_init && !ndevs) {
		ck_fail(c, mode == 0 ?
			"move a device here (rdma dev set DEV netns NS) or create one on a netdev of this namespace (krdmactl up NETDEV)" :
			"create a device on a netdev of this namespace: krdmactl up NETDEV",
			"not in the initial network namespace, and no RDMA device here (rdma system netns mode %s)",
			ms);
		return;
	}
	ck_set(c, CK_OK, "%s network namespace (krdma connections use the caller's namespace: its addresses and routes); rdma system netns mode %s",
	       !known ? "unknown" : in_init ? "the initial" : "a non-initial", ms);
}

static bool firewall_blocks(const char *out)
{
	const char *p = out;

	while ((p = strstr(p, "4791"))) {
		const char *bol = p, *eol = strchr(p, '\n');
		char line[1024];
		size_t n;

		while (bol > out && bol[-1] != '\n')
			bol--;
		n = eol ? (size_t)(eol - bol) : strlen(bol);
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, bol, n);
		line[n] = 0;
		if (strstr(line, "drop") || strstr(line, "reject") ||
		    strstr(line, "DROP") || strstr(line, "REJECT"))
			return true;
		p += 4;
	}
	return false;
}

static void doctor_firewall(struct check *c, bool roce)
{
	static char out[65536];
	char *nft[] = { "nft", "list", "ruleset", NULL };
	char *ipt[] = { "iptables", "-S", NULL };
	char *ip6t[] = { "ip6tables", "-S", NULL };
	int tools = 0, read = 0;

	if (!roce) {
		ck_set(c, CK_SKIP, "no RoCE device: UDP 4791 does not matter");
		return;
	}
	if (have_prog("nft")) {
		tools++;
		if (capture_prog(nft, out, sizeof(out)) >= 0) {
			read++;
			if (firewall_blocks(out))
				ck_fail(c, "allow it: nft insert rule inet filter input udp dport 4791 accept (or remove the rule: nft -a list ruleset)",
					"an nftables rule drops or rejects UDP port 4791 (RoCE v2)");
		}
	}
	if (have_prog("iptables")) {
		tools++;
		if (capture_prog(ipt, out, sizeof(out)) >= 0) {
			read++;
			if (firewall_blocks(out))
				ck_fail(c, "allow it: iptables -I INPUT -p udp --dport 4791 -j ACCEPT",
					"an iptables rule drops or rejects UDP port 4791 (RoCE v2)");
		}
		if (capture_prog(ip6t, out, sizeof(out)) >= 0 && firewall_blocks(out))
			ck_fail(c, "allow it: ip6tables -I INPUT -p udp --dport 4791 -j ACCEPT",
				"an ip6tables rule drops or rejects UDP port 4791 (RoCE v2)");
	}
	if (c->status == CK_FAIL)
		return;
	if (!tools)
		ck_set(c, CK_SKIP, "neither nft nor iptables here: no firewall rules to check");
	else if (!read)
		ck_set(c, CK_SKIP, "cannot read the firewall rules (run as root to check them)");
	else
		ck_set(c, CK_OK, "no firewall rule blocks UDP 4791 (RoCE v2)");
}

/* Has an RDMA device of @devs a port on @netdev? */
static bool netdev_has_rdma(const struct dev_info *devs, uint32_t ndevs,
			    const char *netdev)
{
	uint32_t i, p;

	for (i = 0; i < ndevs; i++)
		for (p = 0; p < devs[i].dq.phys_port_cnt; p++)
			if (!strcmp((const char *)devs[i].ports[p].pq.netdev_name,
				    netdev))
				return true;
	return false;
}

/* The word after " @key " in @out into @buf; false: none */
static bool word_after(const char *out, const char *key, char *buf,
		       size_t len)
{
	const char *p = out;
	size_t klen = strlen(key), n;

	while ((p = strstr(p, key))) {
		if ((p == out || p[-1] == ' ' || p[-1] == '\n') &&
		    p[klen] == ' ') {
			p += klen + 1;
			n = strcspn(p, " \n");
			if (!n || n >= len)
				return false;
			memcpy(buf, p, n);
			buf[n] = 0;
			return true;
		}
		p += klen;
	}
	return false;
}

/*
 * Why a connect to @ip failed with @err, from the route to it and its
 * neighbour entry (ip route get, ip neigh): no host answers on the link,
 * it is routed through a gateway, or its netdev has no RDMA device.
 * False when that cannot be told (no ip, no route).
 */
static bool reach_diagnose(struct check *c, const char *as, const char *ip,
			   int err, const struct dev_info *devs,
			   uint32_t ndevs)
{
	char *route[] = { "ip", "route", "get", (char *)ip, NULL };
	char out[4096], dev[IF_NAMESIZE + 1], gw[INET6_ADDRSTRLEN + 1];
	char state[32] = "", fix[512];
	bool via;

	if (capture_prog(route, out, sizeof(out)) < 0 ||
	    !word_after(out, "dev", dev, sizeof(dev)))
		return false;
	via = word_after(out, "via", gw, sizeof(gw));
	if (!netdev_has_rdma(devs, ndevs, dev)) {
		snprintf(fix, sizeof(fix),
			 "create an RDMA device on %s: sudo krdmactl up %s; or reach %s over a netdev that has one (see: krdmactl dev)",
			 dev, dev, ip);
		ck_fail(c, fix, "%s: %s; the route to it goes out of %s%s%s%s, and %s has no RDMA device",
			as, strerror(-err), dev, via ? " (through the gateway " : "",
			via ? gw : "", via ? ")" : "", dev);
	} else if (via) {
		snprintf(fix, sizeof(fix),
			 "check that %s forwards to %s and that %s has a route back (ping %s; ip route get %s); the peer must run krdma with an RDMA device, and no firewall on the path may drop UDP 4791 (RoCE v2) or TCP (iWARP)",
			 gw, ip, ip, ip, ip);
		ck_fail(c, fix, "%s: %s; it is not on the link of %s but routed through the gateway %s",
			as, strerror(-err), dev, gw);
	} else {
		char *neigh[] = { "ip", "neigh", "show", "to", (char *)ip,
				  "dev", dev, NULL };
		static const char *const states[] = {
			"REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT",
			"NOARP", "FAILED", "INCOMPLETE",
		};
		size_t i;

		if (capture_prog(neigh, out, sizeof(out)) >= 0)
			for (i = 0; i < ARRAY_SIZE(states) && !state[0]; i++)
				if (strstr(out, states[i]))
					snprintf(state, sizeof(state), "%s",
						 states[i]);
		if (!state[0] || !strcmp(state, "FAILED") ||
		    !strcmp(state, "INCOMPLETE")) {
			snprintf(fix, sizeof(fix),
				 "is the peer up, and is %s its address? (ping %s; on the peer: ip addr); is %s on the right link and subnet (ip addr show %s)?",
				 ip, ip, dev, dev);
			ck_fail(c, fix, "%s: %s; no host answers at %s on the link of %s (neighbour %s)",
				as, strerror(-err), ip, dev,
				state[0] ? state : "entry missing");
		} else {
			snprintf(fix, sizeof(fix),
				 "on the peer: krdma loaded with an RDMA device on the netdev of %s (krdmactl doctor there); no firewall on either side may drop UDP 4791 (RoCE v2) or TCP (iWARP)",
				 ip);
			ck_fail(c, fix, "%s: %s; a host answers at %s on the link of %s (neighbour %s), but not over RDMA",
				as, strerror(-err), ip, dev, state);
		}
	}
	return true;
}

static void doctor_reach(struct check *c, int fd, struct krdma_addr dst,
			 uint32_t timeout_ms, const struct dev_info *devs,
			 uint32_t ndevs)
{
	char as[80], ip[INET6_ADDRSTRLEN] = "?";
	uint32_t port = dst.port;
	uint32_t conn;
	int ret;

	krdma_addr_str(&dst, as, sizeof(as));
	inet_ntop(dst.family, dst.addr, ip, sizeof(ip));
	if (fd < 0) {
		ck_fail(c, "fix the module check first", "%s: cannot try without krdma", as);
		return;
	}
	ret = krdma_connect_to(fd, &dst, timeout_ms, &conn);
	if (!ret) {
		krdma_disconnect_conn(fd, conn);
		krdma_destroy_handle(fd, conn);
		ck_set(c, CK_OK, "%s: connected over RDMA, a krdma listener answered",
		       as);
	} else if (ret == -ECONNREFUSED) {
		ck_set(c, CK_OK, "%s: reachable over RDMA, but nobody listens on port %u (run `krdmactl serve` there to test transfers)",
		       as, port);
	} else if ((ret == -ETIMEDOUT || ret == -EHOSTUNREACH ||
		    ret == -ENETUNREACH || ret == -EADDRNOTAVAIL ||
		    ret == -ENODEV) &&
		   reach_diagnose(c, as, ip, ret, devs, ndevs)) {
		return;
	} else if (ret == -ETIMEDOUT) {
		/* not the conn hint: it says to run doctor ADDR, this */
		ck_fail(c, "is the peer running, and is its address on a network that an RDMA device of this host is attached to (see: krdmactl dev)? a firewall dropping UDP 4791 (RoCE v2) or TCP (iWARP) looks the same; ip route get and ip neigh tell more",
			"%s: %s", as, strerror(-ret));
	} else {
		ck_fail(c, krdma_conn_strerror_hint(ret), "%s: %s", as,
			strerror(-ret));
	}
}

int doctor_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "dev", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static const char *const st[] = { "ok", "FAIL", "skip" };
	static const char *const jst[] = { "ok", "fail", "skip" };
	struct json j = { .f = stdout };
	const char *devname = NULL, *addr = NULL;
	uint32_t port = 18515, timeout_ms = 3000, ndevs = 0, i;
	struct dev_info *devs = NULL;
	struct krdma_addr dst;
	struct doctor *dr;
	struct check *c;
	bool json = json_output, roce = false;
	int ch, fd, failed = 0, ret;
	uint64_t us;
	char *end;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":jd:p:t:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			json = true;
			json_output = true;
			break;
		case 'd':
			devname = optarg;
			break;
		case 'p':
			errno = 0;
			{
				unsigned long v = strtoul(optarg, &end, 10);

				if (errno || *end || !*optarg || v > 65535) {
					errmsg("doctor: bad port '%s'", optarg);
					return EXIT_USAGE;
				}
				port = v;
			}
			break;
		case 't':
			/* 0: krdma's own limit of a connect, 10 s */
			if (duration_opt("doctor", "timeout", optarg,
					 USEC_PER_MS, 0, 3600 * USEC_PER_S, &us))
				return EXIT_USAGE;
			timeout_ms = us / USEC_PER_MS;
			break;
		case 'h':
			print_usage_of(argv[0], stdout);
			return finish_stdout(0);
		default:
			bad_option(argv[0], ch, argv);
			return EXIT_USAGE;
		}
	}
	if (optind < argc)
		addr = argv[optind++];
	if (optind < argc) {
		errmsg("doctor: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}
	if (addr) {
		ret = tool_addr("doctor", addr, port, &dst);
		if (ret)
			return ret;
	}
	dr = calloc(1, sizeof(*dr));
	if (!dr)
		return 1;

	c = ck_new(dr, "module");
	doctor_module(c, &fd);

	c = ck_new(dr, "devices");
	if (fd < 0) {
		ck_fail(c, "fix the module check first", "cannot list the RDMA devices without krdma");
	} else {
		ret = collect_devs(fd, devname, &devs, &ndevs);
		if (ret == -ENODEV && devname)
			ck_fail(c, "list the devices with: krdmactl dev; or create one: sudo krdmactl up [NETDEV]",
				"no RDMA device named '%s'", devname);
		else if (ret)
			ck_fail(c, krdma_strerror_hint(ret),
				"cannot list the RDMA devices: %s", strerror(-ret));
		else if (!ndevs)
			ck_fail(c, "create a soft-RoCE device: sudo krdmactl up [NETDEV]",
				"no RDMA device: krdma has nothing to connect over");
		else {
			ck_set(c, CK_OK, "%u device%s:", ndevs,
			       ndevs == 1 ? "" : "s");
			for (i = 0; i < ndevs; i++) {
				const struct krdma_dev_query *dq = &devs[i].dq;

				appendf(c->verdict, " %s (%s)",
					(const char *)dq->name,
					krdma_transport_str(dq->transport));
				if (dq->transport == KRDMA_TRANSPORT_ROCE)
					roce = true;
			}
		}
	}
	if (ndevs) {
		doctor_ports(dr, devs, ndevs);
	} else {
		ck_set(ck_new(dr, "ports"), CK_SKIP, "no device");
		ck_set(ck_new(dr, "gids"), CK_SKIP, "no device");
		ck_set(ck_new(dr, "mtu"), CK_SKIP, "no device");
	}
	doctor_memlock(ck_new(dr, "memlock"));
	doctor_netns(ck_new(dr, "netns"), ndevs);
	doctor_firewall(ck_new(dr, "firewall"), roce);
	if (addr)
		doctor_reach(ck_new(dr, "reach"), fd, dst, timeout_ms, devs,
			     ndevs);
	if (fd >= 0)
		close(fd);

	for (i = 0; i < (uint32_t)dr->n; i++)
		if (dr->c[i].status == CK_FAIL)
			failed++;
	if (json) {
		json_begin_object(&j, NULL);
		json_begin_array(&j, "checks");
		for (i = 0; i < (uint32_t)dr->n; i++) {
			c = &dr->c[i];
			json_begin_object(&j, NULL);
			json_str(&j, "name", c->name);
			json_str(&j, "status", jst[c->status]);
			json_str(&j, "verdict", c->verdict);
			if (c->status == CK_FAIL && c->fix[0])
				json_str(&j, "fix", c->fix);
			else
				json_null(&j, "fix");
			json_end_object(&j);
		}
		json_end_array(&j);
		json_u64(&j, "failed", failed);
		json_bool(&j, "ok", !failed);
		if (failed) {
			char msg[64];

			snprintf(msg, sizeof(msg), "doctor: %d check%s failed",
				 failed, failed == 1 ? "" : "s");
			json_error(&j, "error", 0, msg, NULL);
		}
		json_end_object(&j);
	} else {
		for (i = 0; i < (uint32_t)dr->n; i++) {
			c = &dr->c[i];
			printf("%-4s  %-8s  %s\n", st[c->status], c->name,
			       c->verdict);
			if (c->status == CK_FAIL && c->fix[0])
				printf("%-4s  %-8s  fix: %s\n", "", "", c->fix);
		}
		if (failed)
			printf("doctor: %d of %d checks failed\n", failed, dr->n);
		else
			printf("doctor: every check passed\n");
	}
	free_devs(devs, ndevs);
	free(dr);
	ret = finish_stdout(failed ? 1 : 0);
	return ret;
}

/*
 * krdmactl explain
 */

/* The errnos that krdma's documentation names, explained in this order */
static const struct {
	int err;
	const char *name;
} errnos[] = {
	{ ENOENT, "ENOENT" }, { ENXIO, "ENXIO" }, { EACCES, "EACCES" },
	{ EPERM, "EPERM" }, { ENODEV, "ENODEV" }, { ENOTTY, "ENOTTY" },
	{ EPROTONOSUPPORT, "EPROTONOSUPPORT" }, { EPROTO, "EPROTO" },
	{ E2BIG, "E2BIG" }, { EINVAL, "EINVAL" }, { EOPNOTSUPP, "EOPNOTSUPP" },
	{ EAGAIN, "EAGAIN" }, { EFAULT, "EFAULT" }, { ENOMEM, "ENOMEM" },
	{ ECONNREFUSED, "ECONNREFUSED" }, { ETIMEDOUT, "ETIMEDOUT" },
	{ EHOSTUNREACH, "EHOSTUNREACH" }, { ENETUNREACH, "ENETUNREACH" },
	{ EADDRNOTAVAIL, "EADDRNOTAVAIL" }, { ECONNRESET, "ECONNRESET" },
	{ ECONNABORTED, "ECONNABORTED" }, { ENOTCONN, "ENOTCONN" },
	{ EADDRINUSE, "EADDRINUSE" }, { EMSGSIZE, "EMSGSIZE" },
	{ EMFILE, "EMFILE" }, { EIO, "EIO" }, { ENOBUFS, "ENOBUFS" },
	{ EBUSY, "EBUSY" }, { EXDEV, "EXDEV" },
};

/* Second names of some errnos */
static const struct {
	int err;
	const char *name;
} errno_aliases[] = {
	{ EWOULDBLOCK, "EWOULDBLOCK" }, { ENOTSUP, "ENOTSUP" },
	{ EDEADLOCK, "EDEADLOCK" },
};

#define NUM_WC_STATUS (KRDMA_WC_GENERAL_ERR + 1)
#define MAX_ERRNO 4095

/* The statuses as libibverbs' ibv_wc_status_str() prints them in logs */
static const char *const wc_status_verbs_str[NUM_WC_STATUS] = {
	[KRDMA_WC_SUCCESS] = "success",
	[KRDMA_WC_LOC_LEN_ERR] = "local length error",
	[KRDMA_WC_LOC_QP_OP_ERR] = "local QP operation error",
	[KRDMA_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
	[KRDMA_WC_LOC_PROT_ERR] = "local protection error",
	[KRDMA_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
	[KRDMA_WC_MW_BIND_ERR] = "memory management operation error",
	[KRDMA_WC_BAD_RESP_ERR] = "bad response error",
	[KRDMA_WC_LOC_ACCESS_ERR] = "local access error",
	[KRDMA_WC_REM_INV_REQ_ERR] = "remote invalid request error",
	[KRDMA_WC_REM_ACCESS_ERR] = "remote access error",
	[KRDMA_WC_REM_OP_ERR] = "remote operation error",
	[KRDMA_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
	[KRDMA_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	[KRDMA_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
	[KRDMA_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
	[KRDMA_WC_REM_ABORT_ERR] = "aborted error",
	[KRDMA_WC_INV_EECN_ERR] = "invalid EE context number",
	[KRDMA_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
	[KRDMA_WC_FATAL_ERR] = "fatal error",
	[KRDMA_WC_RESP_TIMEOUT_ERR] = "response timeout error",
	[KRDMA_WC_GENERAL_ERR] = "general error",
};

static bool errno_in_table(int err)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(errnos); i++)
		if (errnos[i].err == err)
			return true;
	return false;
}

/* "ETIMEDOUT" for @err; NULL when it is no errno (or the libc cannot say) */
static const char *errno_name(int err)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(errnos); i++)
		if (errnos[i].err == err)
			return errnos[i].name;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || \
			   (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
	if (err > 0 && err <= MAX_ERRNO)
		return strerrorname_np(err);
#endif
	return NULL;
}

/* The errno named @w (any case), or whose strerror() text it is; 0: none */
static int errno_by_name(const char *w)
{
	const char *name;
	size_t i;
	int err;

	for (i = 0; i < ARRAY_SIZE(errno_aliases); i++)
		if (!strcasecmp(w, errno_aliases[i].name))
			return errno_aliases[i].err;
	for (err = 1; err <= MAX_ERRNO; err++) {
		name = errno_name(err);
		if (name && (!strcasecmp(w, name) ||
			     !strcasecmp(w, strerror(err))))
			return err;
	}
	return 0;
}

static void explain_status(struct json *j, uint32_t s)
{
	if (j) {
		json_begin_object(j, NULL);
		json_str(j, "kind", "status");
		json_str(j, "name", krdma_wc_status_str(s));
		json_u64(j, "value", s);
		/* the keys of an errno's, as one shape for every entry */
		json_null(j, "strerror");
		json_str(j, "explanation", krdma_wc_status_explain(s));
		json_null(j, "in_connections");
		json_null(j, "on_connect");
		json_end_object(j);
		return;
	}
	printf("%s (completion status %u): %s\n", krdma_wc_status_str(s), s,
	       krdma_wc_status_explain(s));
}

static void explain_errno(struct json *j, int err)
{
	const char *name = errno_name(err);
	const char *gen = krdma_strerror_hint(err);
	const char *conn = krdma_conn_strerror_hint(err);
	const char *cn = krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, err);
	const char *none = errno_in_table(err) ?
		"no advice beyond the message: usually a bug or a bad argument" :
		"krdma's documentation does not name it (another program's error?): no advice beyond the message";

	if (j) {
		json_begin_object(j, NULL);
		json_str(j, "kind", "errno");
		json_str(j, "name", name);
		json_u64(j, "value", err);
		json_str(j, "strerror", strerror(err));
		if (gen)
			json_str(j, "explanation", gen);
		else
			json_null(j, "explanation");
		if (conn && conn != gen)
			json_str(j, "in_connections", conn);
		else
			json_null(j, "in_connections");
		if (cn != conn)
			json_str(j, "on_connect", cn);
		else
			json_null(j, "on_connect");
		json_end_object(j);
		return;
	}
	printf("%s (errno %d, %s)", name, err, strerror(err));
	if (gen)
		printf(": %s", gen);
	if (conn && conn != gen)
		printf("%s%s", gen ? "; from a connection or transfer: " : ": ",
		       conn);
	/* A krdma listener's reject reason, or no krdma handshake */
	if (cn != conn)
		printf("%s%s", gen || conn ? "; from CONNECT: " : ": from CONNECT: ",
		       cn);
	if (!gen && !conn && cn == conn)
		printf(": %s", none);
	putchar('\n');
}

/* The longest word explain takes, with its '\0' */
#define EXPLAIN_WORD_MAX 128

/* A whole decimal number, with an optional sign */
static bool parse_number(const char *w, long *v)
{
	char *end;

	if (!(isdigit((unsigned char)w[0]) ||
	      ((w[0] == '-' || w[0] == '+') && isdigit((unsigned char)w[1]))))
		return false;
	errno = 0;
	*v = strtol(w, &end, 10);
	return !errno && !*end;
}

/*
 * Explain @arg, as copied from a log: every meaning it has. A completion
 * status by name (RETRY_EXC_ERR, with or without IBV_WC_, IB_WC_,
 * KRDMA_WC_ or WC_, in any case), by the whole text of libibverbs'
 * ibv_wc_status_str() ("transport retry counter exceeded", any case) or,
 * after such a prefix, by number; an errno by name (ETIMEDOUT or
 * -ETIMEDOUT, any case) or strerror() text; a number is a completion
 * status (0..21) and an errno (a positive errno as status and debugfs
 * print it, or -errno as a return value), whichever it can be, also after
 * "error" or "err" ("error 110", "err=-110"); after "errno" an errno only.
 * Around it, blanks, parentheses and a trailing ',', ':', ';' or '.' are
 * ignored. False when it has no meaning. Says it (JSON into @j, if not
 * NULL) when @say.
 */
static bool explain_word(struct json *j, const char *arg, bool say)
{
	static const char *const prefixes[] = {
		"IBV_WC_", "IB_WC_", "KRDMA_WC_", "WC_",
	};
	/* before a number; the first means an errno */
	static const char *const labels[] = { "errno", "error", "err" };
	bool status_only = false, errno_only = false, found = false;
	bool labelled = false;
	char buf[EXPLAIN_WORD_MAX], *w = buf;
	size_t i, n;
	uint32_t s;
	long v;
	int err;

	snprintf(buf, sizeof(buf), "%s", arg);
	w += strspn(w, " \t");
	if (*w == '(')
		w++;
	n = strlen(w);
	while (n && strchr("),:;. \t", w[n - 1]))
		w[--n] = '\0';
	for (s = 0; s < NUM_WC_STATUS; s++) {
		if (!strcasecmp(w, wc_status_verbs_str[s])) {
			if (say)
				explain_status(j, s);
			return true;
		}
	}
	for (i = 0; i < ARRAY_SIZE(labels); i++) {
		n = strlen(labels[i]);
		if (!strncasecmp(w, labels[i], n) && w[n] &&
		    strchr(" \t:=", w[n])) {
			w += n + strspn(w + n, " \t:=");
			errno_only = i == 0;
			labelled = true;
			break;
		}
	}
	for (i = 0; i < ARRAY_SIZE(prefixes) && !labelled; i++) {
		n = strlen(prefixes[i]);
		if (!strncasecmp(w, prefixes[i], n)) {
			w += n;
			status_only = true;
			break;
		}
	}
	if (w[0] == '-' && isalpha((unsigned char)w[1])) {
		w++;		/* -ETIMEDOUT, as the kernel's %pe prints it */
		errno_only = true;
	}
	if (parse_number(w, &v)) {
		if (v >= 0 && v < NUM_WC_STATUS && !errno_only &&
		    (!status_only || isdigit((unsigned char)w[0]))) {
			if (say)
				explain_status(j, v);
			found = true;
		}
		err = v < 0 ? -v : v;
		if (!status_only && v >= -MAX_ERRNO && v <= MAX_ERRNO &&
		    errno_name(err)) {
			if (say)
				explain_errno(j, err);
			found = true;
		}
		return found;
	}
	if (labelled)
		return false;
	for (s = 0; s < NUM_WC_STATUS && !errno_only; s++) {
		if (!strcasecmp(w, krdma_wc_status_str(s))) {
			if (say)
				explain_status(j, s);
			return true;
		}
	}
	if (status_only)
		return false;
	err = errno_by_name(w);
	if (err && say)
		explain_errno(j, err);
	return err;
}

/* @n words joined by a space into @buf; false when they do not fit */
static bool join_words(char *const *w, int n, char *buf, size_t len)
{
	size_t at = 0;
	int i, k;

	for (i = 0; i < n; i++) {
		k = snprintf(buf + at, len - at, "%s%s", i ? " " : "", w[i]);
		if (k < 0 || (size_t)k >= len - at)
			return false;
		at += k;
	}
	return true;
}

/*
 * How many of the @n words at @w to explain together: a log's words given
 * without quotes ("explain errno 110", "explain transport retry counter
 * exceeded"), when the first alone has no meaning but they have one
 * together (the most of them that do, at most 8: the texts are shorter);
 * else 1.
 */
static int phrase_len(char *const *w, int n)
{
	char buf[EXPLAIN_WORD_MAX];
	int k;

	if (explain_word(NULL, w[0], false))
		return 1;
	for (k = n < 8 ? n : 8; k > 1; k--)
		if (join_words(w, k, buf, sizeof(buf)) &&
		    explain_word(NULL, buf, false))
			return k;
	return 1;
}

int explain_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct json jj = { .f = stdout }, *j = NULL;
	char **opts, **words;
	int c, a, used, nopts = 1, nwords = 0, bad = 0, ret = 0;
	bool json = json_output, dashdash = false;
	char phrase[EXPLAIN_WORD_MAX];
	uint32_t s;
	size_t i;

	/*
	 * Options go to getopt, the words to explain aside: "-110" and
	 * "-ETIMEDOUT" (a -errno) are words, not the options -1, -1, -0.
	 */
	opts = calloc(argc + 1, sizeof(*opts));
	words = calloc(argc + 1, sizeof(*words));
	if (!opts || !words) {
		errmsg_err(-ENOMEM, "explain");
		ret = 1;
		goto out;
	}
	opts[0] = argv[0];
	for (a = 1; a < argc; a++) {
		const char *w = argv[a];

		if (dashdash || w[0] != '-' || !w[1] ||
		    isdigit((unsigned char)w[1]) || toupper((unsigned char)w[1]) == 'E')
			words[nwords++] = argv[a];
		else if (!strcmp(w, "--"))
			dashdash = true;
		else
			opts[nopts++] = argv[a];
	}

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(nopts, opts, ":jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			json_output = true;
			break;
		case 'h':
			print_usage_of(argv[0], stdout);
			ret = finish_stdout(0);
			goto out;
		default:
			bad_option(argv[0], c, opts);
			ret = EXIT_USAGE;
			goto out;
		}
	}
	if (json) {
		j = &jj;
		json_begin_object(j, NULL);
		json_begin_array(j, "explanations");
	}
	if (!nwords) {
		for (s = 0; s < NUM_WC_STATUS; s++)
			explain_status(j, s);
		for (i = 0; i < ARRAY_SIZE(errnos); i++)
			explain_errno(j, errnos[i].err);
	}
	for (a = 0; a < nwords; a += used) {
		used = phrase_len(words + a, nwords - a);
		if (used > 1) {
			join_words(words + a, used, phrase, sizeof(phrase));
			explain_word(j, phrase, true);
		} else if (!explain_word(j, words[a], true)) {
			errmsg("explain: unknown status or errno '%s'",
			       words[a]);
			bad++;
		}
	}
	if (json) {
		json_end_array(j);
		if (bad)
			json_last_error(j, "error", 1);
		json_end_object(j);
	}
	ret = finish_stdout(0);
	if (bad)
		ret = 1;
out:
	free(opts);
	free(words);
	return ret;
}
