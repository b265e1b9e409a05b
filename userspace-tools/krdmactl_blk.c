// SPDX-License-Identifier: GPL-2.0
/*
 * krdmactl blk: attach, detach and list the remote block devices of
 * krdma_blk, the block device client built on krdma's kernel API.
 *
 * Everything goes through the client module's sysfs directory,
 * /sys/kernel/krdma_blk/ (root only, but devices: 0444):
 *   attach   write "ADDR PORT [queues=N] [depth=D]": connects, creates
 *            /dev/krdmablkK; the write fails with -errno (ECONNREFUSED,
 *            ETIMEDOUT, ENETUNREACH, ENODEV, EPROTO, ENOMEM, EINVAL) and
 *            the module's pr_err() says what happened
 *   detach   write "krdmablkK" (or "K"); ENOENT: no such device
 *   devices  one line per device: "krdmablkK ADDR PORT SIZE_BYTES QUEUES
 *            DEPTH STATE", STATE "live" or "failed"
 * The write tells nothing of the device it made: attach reads devices
 * before and after, and reports the new one of that ADDR and PORT.
 *
 * Environment, for tests: KRDMA_BLK_SYSFS (default /sys/kernel/krdma_blk),
 * as KRDMA_SYSFS_MODULE of status and set.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdmactl.h"

#define BLK_SYSFS "/sys/kernel/krdma_blk"
#define BLK_PREFIX "krdmablk"
/* krdma_blk_server's default port (its module parameter port=) */
#define BLK_PORT 7740
/* the depths the module takes */
#define BLK_DEPTH_MAX 256

static const char *blk_dir(void)
{
	const char *s = getenv("KRDMA_BLK_SYSFS");

	return s && *s ? s : BLK_SYSFS;
}

/* A line of devices */
struct blk_dev {
	char name[32];		/* krdmablkK */
	char addr[64];		/* as the module prints it */
	uint32_t port;
	uint64_t size;		/* bytes */
	uint32_t queues;
	uint32_t depth;
	char state[32];		/* live, failed (or a later one) */
};

struct blk_devs {
	struct blk_dev *d;
	size_t n;
};

/* "198.18.0.1:7740", "[2001:db8::1]:7740" (a module that prints IPv6) */
static const char *blk_peer(const struct blk_dev *b, char *buf, size_t len)
{
	snprintf(buf, len, strchr(b->addr, ':') ? "[%s]:%u" : "%s:%u",
		 b->addr, b->port);
	return buf;
}

/* "64 MiB", "1 GiB", "1.5 GiB", "4 KiB", "512 B" */
static const char *blk_size_str(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = n;
	size_t u = 0;

	while (v >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	if (v == (double)(uint64_t)v)
		snprintf(buf, len, "%" PRIu64 " %s", (uint64_t)v, units[u]);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* One line of devices into @b; false when it is not one */
static bool parse_dev_line(char *line, struct blk_dev *b)
{
	char *f[7], *save = NULL, *tok;
	uint64_t v;
	size_t n = 0;

	for (tok = strtok_r(line, " \t\n", &save); tok && n < ARRAY_SIZE(f);
	     tok = strtok_r(NULL, " \t\n", &save))
		f[n++] = tok;
	/* later fields, if a later module adds some, are not ours */
	if (n < ARRAY_SIZE(f) || strncmp(f[0], BLK_PREFIX, strlen(BLK_PREFIX)))
		return false;
	memset(b, 0, sizeof(*b));
	if (strlen(f[0]) >= sizeof(b->name) || strlen(f[1]) >= sizeof(b->addr) ||
	    strlen(f[6]) >= sizeof(b->state))
		return false;
	strcpy(b->name, f[0]);
	strcpy(b->addr, f[1]);
	strcpy(b->state, f[6]);
	if (parse_u32(f[2], 0, 65535, &b->port) ||
	    parse_u64(f[3], 0, UINT64_MAX, &v) ||
	    parse_u32(f[4], 0, UINT32_MAX, &b->queues) ||
	    parse_u32(f[5], 0, UINT32_MAX, &b->depth))
		return false;
	b->size = v;
	return true;
}

/*
 * The devices file into @out; a line it cannot parse is left out, with a
 * warning of command @cmd (NULL: none). Returns 0 or -errno (not said:
 * the caller knows what for).
 */
static int read_devices(const char *cmd, struct blk_devs *out)
{
	char path[4096], *line = NULL;
	size_t cap = 0, lineno = 0;
	struct blk_dev *tmp;
	ssize_t len;
	FILE *f;
	int ret = 0;

	out->d = NULL;
	out->n = 0;
	snprintf(path, sizeof(path), "%s/devices", blk_dir());
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while ((len = getline(&line, &cap, f)) >= 0) {
		char copy[512];

		lineno++;
		if (strspn(line, " \t\n") == (size_t)len)
			continue;
		snprintf(copy, sizeof(copy), "%.*s", (int)strcspn(line, "\n"),
			 line);
		tmp = realloc(out->d, (out->n + 1) * sizeof(*out->d));
		if (!tmp) {
			ret = -ENOMEM;
			break;
		}
		out->d = tmp;
		if (parse_dev_line(line, &out->d[out->n]))
			out->n++;
		else if (cmd)
			errmsg("%s: warning: line %zu of %s is not \"krdmablkK ADDR PORT SIZE QUEUES DEPTH STATE\": '%s'",
			       cmd, lineno, path, copy);
	}
	if (!ret && ferror(f))
		ret = -EIO;
	free(line);
	fclose(f);
	if (ret) {
		free(out->d);
		out->d = NULL;
		out->n = 0;
	}
	return ret;
}

/*
 * "load it: ...": modprobe, and the insmod of the module built next to
 * this krdmactl when there is one (krdmactl run from the source tree)
 */
static const char *load_hint(char *buf, size_t len)
{
	char dir[4096], ko[4200];

	tool_dir(dir, sizeof(dir));
	snprintf(ko, sizeof(ko), "%s/../samples/krdma_blk/krdma_blk.ko", dir);
	if (!access(ko, R_OK))
		snprintf(buf, len, "load it: sudo modprobe krdma_blk, or from this tree: sudo insmod %s (krdma.ko first: sudo krdmactl up)",
			 ko);
	else
		snprintf(buf, len, "load it: sudo modprobe krdma_blk (from a source tree: sudo insmod samples/krdma_blk/krdma_blk.ko, after krdma.ko: sudo krdmactl up)");
	return buf;
}

/* Is krdma_blk loaded? If not, say so and what to do (exit status 1) */
static bool module_loaded(const char *cmd)
{
	char hint[4400];
	int err;

	if (!access(blk_dir(), F_OK))
		return true;
	err = -errno;
	if (err == -ENOENT)
		errmsg_advice(err, load_hint(hint, sizeof(hint)),
			      "%s: krdma_blk is not loaded (%s)", cmd,
			      blk_dir());
	else
		errmsg_err(err, "%s: cannot look at %s", cmd, blk_dir());
	return false;
}

/*
 * "sudo krdmactl blk ARGS...", for the hint of EACCES: the words as they
 * were given (getopt_long() reorders argv)
 */
static char sudo_cmd[1024];

static void save_sudo_cmd(int argc, char *argv[])
{
	size_t n;
	int i;

	snprintf(sudo_cmd, sizeof(sudo_cmd), "sudo krdmactl");
	for (i = 0; i < argc; i++) {
		n = strlen(sudo_cmd);
		snprintf(sudo_cmd + n, sizeof(sudo_cmd) - n, " %s", argv[i]);
	}
}

/* Write @text into the sysfs file @file. Returns 0 or -errno. */
static int blk_write(const char *file, const char *text)
{
	char path[4096];
	ssize_t n;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", blk_dir(), file);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != strlen(text))
		ret = -EIO;
	close(fd);
	return ret;
}

static void json_blk_dev(struct json *j, const struct blk_dev *b)
{
	char buf[128];

	json_begin_object(j, NULL);
	json_str(j, "name", b->name);
	snprintf(buf, sizeof(buf), "/dev/%s", b->name);
	json_str(j, "path", buf);
	json_str(j, "peer", blk_peer(b, buf, sizeof(buf)));
	json_u64(j, "size", b->size);
	json_u64(j, "queues", b->queues);
	json_u64(j, "depth", b->depth);
	json_str(j, "state", b->state);
	json_end_object(j);
}

static void json_blk_devs(const struct blk_dev *d, size_t n)
{
	struct json j = { .f = stdout };
	size_t i;

	json_begin_object(&j, NULL);
	json_begin_array(&j, "blockdevices");
	for (i = 0; i < n; i++)
		json_blk_dev(&j, &d[i]);
	json_end_array(&j);
	json_end_object(&j);
}

/* "krdmablk0  live    64 MiB  198.18.0.1:7740  queues 4 depth 64" */
static void print_blk_dev(const struct blk_dev *b)
{
	char size[32], peer[96];

	printf("%-12s %-7s %9s  %-22s queues %u depth %u\n", b->name,
	       b->state, blk_size_str(b->size, size, sizeof(size)),
	       blk_peer(b, peer, sizeof(peer)), b->queues, b->depth);
}

static int blk_list(bool json)
{
	struct blk_devs devs;
	size_t i;
	int ret;

	if (!module_loaded("blk list"))
		return 1;
	ret = read_devices("blk list", &devs);
	if (ret) {
		errmsg_advice(ret, NULL, "blk list: cannot read %s/devices",
			      blk_dir());
		return 1;
	}
	if (json)
		json_blk_devs(devs.d, devs.n);
	else if (!devs.n)
		printf("No krdma_blk devices. Attach one: sudo krdmactl blk attach ADDR [PORT]\n");
	for (i = 0; !json && i < devs.n; i++)
		print_blk_dev(&devs.d[i]);
	free(devs.d);
	return finish_stdout(0);
}

/*
 * ADDR as krdma_blk takes it: an IPv4 address (its server listens on one),
 * from a name its first IPv4 address. Into @ip; 0 or EXIT_USAGE (said why).
 */
static int blk_addr(const char *host, char *ip, size_t len)
{
	const struct addrinfo hints = {
		.ai_family = AF_INET,
		.ai_socktype = SOCK_STREAM,
	};
	struct krdma_addr a;
	struct addrinfo *res;
	int ret;

	/* the messages of every command that takes an address */
	ret = tool_addr("blk attach", host, BLK_PORT, &a);
	if (ret)
		return ret;
	if (a.family == AF_INET) {
		inet_ntop(AF_INET, a.addr, ip, len);
		return 0;
	}
	/* a name with an IPv6 address first may have an IPv4 one too */
	if (inet_pton(AF_INET6, host, a.addr) != 1 &&
	    !getaddrinfo(host, NULL, &hints, &res)) {
		inet_ntop(AF_INET,
			  &((const struct sockaddr_in *)res->ai_addr)->sin_addr,
			  ip, len);
		freeaddrinfo(res);
		return 0;
	}
	errmsg_advice(0, "give the IPv4 address that krdma_blk_server listens on (its addr=; by default any of the server's)",
		      "blk attach: '%s' is not an IPv4 address%s: krdma_blk connects over IPv4 only",
		      host, inet_pton(AF_INET6, host, a.addr) == 1 ? "" :
		      ", and that name has none");
	return EXIT_USAGE;
}

/* The advice for the errno of a write to attach */
static const char *attach_hint(int err, const char *ip, uint32_t port,
			       const char *text, char *buf, size_t len)
{
	switch (err < 0 ? -err : err) {
	case EACCES:
	case EPERM:
		snprintf(buf, len, "attaching a device needs root (%s/attach is root's only): run it as root: %s",
			 blk_dir(), sudo_cmd);
		break;
	case ECONNREFUSED:
		if (port == BLK_PORT)
			snprintf(buf, len, "nothing listens at %s port %u: is krdma_blk_server loaded there? on that host: sudo modprobe krdma_blk_server (port %u is its default; another one: its port=N, and give it here as PORT)",
				 ip, port, BLK_PORT);
		else
			snprintf(buf, len, "nothing listens at %s port %u: is krdma_blk_server loaded there? on that host: sudo modprobe krdma_blk_server port=%u",
				 ip, port, port);
		break;
	case ETIMEDOUT:
		snprintf(buf, len, "no answer in time from %s: is the host up, krdma_blk_server loaded there, and %s on a network that an RDMA device of this host is attached to (see: krdmactl dev)? a firewall dropping UDP 4791 (RoCE v2) or TCP port %u (iWARP) looks the same; try: krdmactl doctor -p %u %s",
			 ip, ip, port, port, ip);
		break;
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EADDRNOTAVAIL:
	case ENODEV:
		snprintf(buf, len, "no RDMA device of this host reaches %s: it must be on a network that an RDMA device (rxe, siw, ...) is attached to; see: krdmactl dev, or create one: sudo krdmactl up [--siw] [NETDEV]",
			 ip);
		break;
	case EPROTO:
		snprintf(buf, len, "what listens at %s port %u is not a krdma_blk_server of this version (no krdma handshake, or a wrong hello): load the krdma_blk_server of the same tree there; the kernel log says more (dmesg)",
			 ip, port);
		break;
	case ENOMEM:
		snprintf(buf, len, "the kernel was out of memory for the device: try fewer queues or a smaller depth; the kernel log says more (dmesg)");
		break;
	case EINVAL:
		snprintf(buf, len, "krdma_blk refused \"%.*s\"%s; the kernel log says why (dmesg)",
			 (int)strcspn(text, "\n"), text,
			 strstr(text, "queues=") ?
			 ": more queues than it takes?" :
			 " (a module of another version?)");
		break;
	case ENOENT:
		snprintf(buf, len, "the loaded krdma_blk has no %s/attach: a module of another version?", blk_dir());
		break;
	default:
		snprintf(buf, len, "the kernel log says what happened (dmesg)");
		break;
	}
	return buf;
}

static int blk_attach(const char *host, uint32_t port, uint32_t queues,
		      uint32_t depth, bool json)
{
	char ip[INET_ADDRSTRLEN], text[160], target[96], hint[1400];
	struct blk_devs before, after;
	const struct blk_dev *found = NULL;
	bool have_before;
	size_t i, k;
	int ret;

	ret = blk_addr(host, ip, sizeof(ip));
	if (ret)
		return ret;
	if (!module_loaded("blk attach"))
		return 1;
	/* (its lines are said after) */
	have_before = !read_devices(NULL, &before);

	snprintf(text, sizeof(text), "%s %u", ip, port);
	if (queues)
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
			 " queues=%u", queues);
	if (depth)
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
			 " depth=%u", depth);
	/* as echo writes it */
	strcat(text, "\n");
	snprintf(target, sizeof(target), "%s:%u", ip, port);
	ret = blk_write("attach", text);
	if (ret) {
		errmsg_advice(ret, attach_hint(ret, ip, port, text, hint,
					       sizeof(hint)),
			      "blk attach: cannot attach %s", target);
		if (have_before)
			free(before.d);
		return 1;
	}

	/* the new device of this ADDR and PORT */
	ret = read_devices("blk attach", &after);
	for (i = 0; !ret && i < after.n && !found; i++) {
		const struct blk_dev *b = &after.d[i];

		if (strcmp(b->addr, ip) || b->port != port)
			continue;
		for (k = 0; have_before && k < before.n; k++)
			if (!strcmp(before.d[k].name, b->name))
				break;
		if (!have_before || k == before.n)
			found = b;
	}
	if (!found)
		errmsg("blk attach: warning: attached %s, but %s/devices does not show the new device (detached already?): see: krdmactl blk list",
		       target, blk_dir());
	if (found && queues && found->queues != queues)
		errmsg("blk attach: note: %s has %u queues, not the %u asked for (at most one per CPU; see dmesg)",
		       found->name, found->queues, queues);
	if (found && depth && found->depth != depth)
		errmsg("blk attach: note: %s has depth %u, not the %u asked for",
		       found->name, found->depth, depth);
	if (json) {
		json_blk_devs(found, found ? 1 : 0);
	} else if (found) {
		char size[32];

		printf("attached %s (/dev/%s): %s at %s, %u queue%s of depth %u, %s\n",
		       found->name, found->name,
		       blk_size_str(found->size, size, sizeof(size)), target,
		       found->queues, found->queues == 1 ? "" : "s",
		       found->depth, found->state);
	} else {
		printf("attached %s\n", target);
	}
	if (have_before)
		free(before.d);
	if (!ret)
		free(after.d);
	return finish_stdout(0);
}

/* DEV: krdmablkK, K or /dev/krdmablkK, into @name ("krdmablkK") */
static bool parse_dev_name(const char *dev, char *name, size_t len)
{
	const char *num = dev;

	if (!strncmp(num, "/dev/", 5))
		num += 5;
	if (!strncmp(num, BLK_PREFIX, strlen(BLK_PREFIX)))
		num += strlen(BLK_PREFIX);
	else if (num != dev)
		return false;	/* /dev/sda */
	if (!*num || strspn(num, "0123456789") != strlen(num) ||
	    strlen(num) > 9 || (num[0] == '0' && num[1]))
		return false;
	snprintf(name, len, BLK_PREFIX "%s", num);
	return true;
}

static int blk_detach(const char *dev)
{
	char name[32], text[40], hint[1200];
	int ret;

	if (!parse_dev_name(dev, name, sizeof(name))) {
		errmsg_advice(0, "name it as blk list shows it: krdmablkN, N or /dev/krdmablkN",
			      "blk detach: '%s' is not a krdma_blk device", dev);
		return EXIT_USAGE;
	}
	if (!module_loaded("blk detach"))
		return 1;
	snprintf(text, sizeof(text), "%s\n", name);
	ret = blk_write("detach", text);
	if (!ret) {
		printf("detached %s\n", name);
		return finish_stdout(0);
	}
	switch (-ret) {
	case ENOENT:
		snprintf(hint, sizeof(hint), "krdma_blk has no device %s: see the attached ones with: krdmactl blk list",
			 name);
		break;
	case EACCES:
	case EPERM:
		snprintf(hint, sizeof(hint), "detaching a device needs root (%s/detach is root's only): run it as root: %s",
			 blk_dir(), sudo_cmd);
		break;
	default:
		snprintf(hint, sizeof(hint), "the kernel log says what happened (dmesg)");
		break;
	}
	errmsg_advice(ret, hint, "blk detach: cannot detach %s", name);
	return 1;
}

/* The verbs of blk; attach and detach change the system: whole names only */
static const char *const verbs[] = { "list", "attach", "detach" };

static const char *find_verb(const char *word)
{
	size_t i, len = strlen(word);

	for (i = 0; i < ARRAY_SIZE(verbs); i++)
		if (!strcmp(word, verbs[i]))
			return verbs[i];
	if (len && !strncmp(word, "list", len))
		return "list";
	for (i = 1; len && i < ARRAY_SIZE(verbs); i++) {
		if (strncmp(word, verbs[i], len))
			continue;
		errmsg_advice(0, "type the command's whole name",
			      "blk: '%s' would be %s, which changes the system: it is taken by its whole name only",
			      word, verbs[i]);
		return NULL;
	}
	errmsg("blk: unknown command '%s' (list, attach or detach)", word);
	return NULL;
}

/* A value given twice (PORT and -p, queues N and -q) */
static bool twice(bool *seen, const char *what)
{
	if (*seen) {
		errmsg("blk attach: %s given twice", what);
		print_usage_of("blk", stderr);
		return true;
	}
	*seen = true;
	return false;
}

/* A value of attach: PORT, queues, depth; false (and said why) if bad */
static bool attach_value(char opt, const char *s, uint32_t *port,
			 uint32_t *queues, uint32_t *depth)
{
	switch (opt) {
	case 'p':
		if (!parse_u32(s, 1, 65535, port))
			return true;
		errmsg("blk attach: bad port '%s' (1 to 65535)", s);
		return false;
	case 'q':
		if (!parse_u32(s, 1, UINT32_MAX, queues))
			return true;
		errmsg("blk attach: bad queues '%s' (1 or more: connections, one per hardware queue)",
		       s);
		return false;
	default:
		if (!parse_u32(s, 1, BLK_DEPTH_MAX, depth))
			return true;
		errmsg("blk attach: bad depth '%s' (1 to %u: requests in flight per queue)",
		       s, BLK_DEPTH_MAX);
		return false;
	}
}

int blk_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "queues", required_argument, NULL, 'q' },
		{ "depth", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	bool json = json_output, seen_p = false, seen_q = false;
	bool seen_d = false;
	uint32_t port = BLK_PORT, queues = 0, depth = 0;
	const char *verb = "list", *attach_opt = NULL;
	int c, a;

	save_sudo_cmd(argc, argv);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":p:q:d:jh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'p':
		case 'q':
		case 'd':
			if (twice(c == 'p' ? &seen_p : c == 'q' ? &seen_q :
				  &seen_d, c == 'p' ? "the port" :
				  c == 'q' ? "queues" : "depth"))
				return EXIT_USAGE;
			if (!attach_value(c, optarg, &port, &queues, &depth))
				return EXIT_USAGE;
			attach_opt = attach_opt ?: c == 'p' ? "-p (--port)" :
				     c == 'q' ? "-q (--queues)" :
				     "-d (--depth)";
			break;
		case 'j':
			json = true;
			json_output = true;
			break;
		default:
			return help_or_bad_option(c, argv);
		}
	}
	if (optind < argc) {
		verb = find_verb(argv[optind++]);
		if (!verb) {
			print_usage_of("blk", stderr);
			return EXIT_USAGE;
		}
	}
	if (attach_opt && strcmp(verb, "attach")) {
		errmsg("blk %s: %s is an option of blk attach", verb,
		       attach_opt);
		print_usage_of("blk", stderr);
		return EXIT_USAGE;
	}

	if (!strcmp(verb, "list")) {
		if (optind < argc) {
			errmsg("blk list: unexpected argument '%s'",
			       argv[optind]);
			print_usage_of("blk", stderr);
			return EXIT_USAGE;
		}
		return blk_list(json);
	}

	if (!strcmp(verb, "detach")) {
		if (json) {
			errmsg("blk detach has no JSON output (-j)");
			return EXIT_USAGE;
		}
		if (optind >= argc) {
			errmsg("blk detach: no device given (krdmablkN, or N)");
			print_usage_of("blk", stderr);
			return EXIT_USAGE;
		}
		if (optind + 1 < argc) {
			errmsg("blk detach: unexpected argument '%s'",
			       argv[optind + 1]);
			print_usage_of("blk", stderr);
			return EXIT_USAGE;
		}
		return blk_detach(argv[optind]);
	}

	/* attach ADDR [PORT] [queues N] [depth D] */
	if (optind >= argc) {
		errmsg("blk attach: no address given");
		print_usage_of("blk", stderr);
		return EXIT_USAGE;
	}
	for (a = optind + 1; a < argc; a++) {
		const char *w = argv[a], *val = NULL, *eq = strchr(w, '=');
		char key[16];
		char opt;

		snprintf(key, sizeof(key), "%.*s",
			 (int)(eq ? (size_t)(eq - w) : strlen(w)), w);
		if (!strcmp(key, "queues"))
			opt = 'q';
		else if (!strcmp(key, "depth"))
			opt = 'd';
		else if (a == optind + 1 && !eq)
			opt = 'p';	/* PORT */
		else
			opt = 0;
		if (!opt) {
			errmsg("blk attach: unexpected argument '%s'", w);
			print_usage_of("blk", stderr);
			return EXIT_USAGE;
		}
		if (opt == 'p') {
			val = w;
		} else if (eq) {
			val = eq + 1;
		} else if (a + 1 < argc) {
			val = argv[++a];
		} else {
			errmsg("blk attach: '%s' needs a value", w);
			print_usage_of("blk", stderr);
			return EXIT_USAGE;
		}
		if (twice(opt == 'p' ? &seen_p : opt == 'q' ? &seen_q :
			  &seen_d, opt == 'p' ? "the port" :
			  opt == 'q' ? "queues" : "depth") ||
		    !attach_value(opt, val, &port, &queues, &depth))
			return EXIT_USAGE;
	}
	return blk_attach(argv[optind], port, queues, depth, json);
}
