// SPDX-License-Identifier: GPL-2.0
/*
 * krdmactl: inspect and control krdma, the in-kernel RDMA transport.
 *
 * Every subcommand lives in the table at the bottom: { name, fn, help,
 * usage }. A subcommand gets argv with its own name in argv[0] and returns
 * the exit status: 0 done, 1 failed (the message is already on stderr),
 * 2 bad usage.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdmactl.h"

#define KRDMACTL_VERSION "0.3.0"

static const char *prog = "krdmactl";

bool json_output;
bool json_pretty;

/* Was a JSON document begun on stdout? */
static bool json_doc_begun;

/*
 * The error that stderr says, for JSON: the first one with an errno, else
 * the first one at all.
 */
static struct {
	bool set;
	int err;		/* positive errno; 0: none */
	bool has_hint;
	char msg[512];
	char hint[1100];
} last_err;

static void record_error(int err, bool with_strerror, const char *hint,
			 const char *fmt, va_list ap)
{
	size_t n;

	if (!json_output || (last_err.set && (last_err.err || !err)))
		return;
	err = err < 0 ? -err : err;
	last_err.set = true;
	last_err.err = err;
	vsnprintf(last_err.msg, sizeof(last_err.msg), fmt, ap);
	n = strlen(last_err.msg);
	if (with_strerror && err && n < sizeof(last_err.msg))
		snprintf(last_err.msg + n, sizeof(last_err.msg) - n, ": %s",
			 strerror(err));
	last_err.has_hint = hint;
	snprintf(last_err.hint, sizeof(last_err.hint), "%s", hint ?: "");
}

void errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record_error(0, false, NULL, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "krdmactl: <what>[: <strerror(err)>]", then @hint on a second line */
static void verrmsg(int err, bool with_strerror, const char *hint,
		    const char *fmt, va_list ap)
{
	va_list aq;

	va_copy(aq, ap);
	record_error(err, with_strerror, hint, fmt, aq);
	va_end(aq);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	if (with_strerror && err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	fputc('\n', stderr);
	if (hint)
		fprintf(stderr, "%s: %s\n", prog, hint);
}

/* For an error (-errno) that the kernel or libc returned. */
void errmsg_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verrmsg(err, true, krdma_strerror_hint(err), fmt, ap);
	va_end(ap);
}

void errmsg_advice(int err, const char *hint, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verrmsg(err, true, hint, fmt, ap);
	va_end(ap);
}

/*
 * For an error that a check of ours found (an ABI mismatch, ...): the
 * advice without strerror(), which would only confuse.
 */
void errmsg_hint(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verrmsg(err, false, krdma_strerror_hint(err), fmt, ap);
	va_end(ap);
}

/* Flush stdout and report a failed write (a full disk, a closed pipe). */
int finish_stdout(int status)
{
	if (fflush(stdout) == EOF || ferror(stdout)) {
		errmsg("cannot write the output: %s", strerror(errno));
		return 1;
	}
	return status;
}

/* Is @gid the effective or a supplementary group of this process? */
static bool in_group(gid_t gid)
{
	gid_t *groups;
	bool found = false;
	int n, i;

	if (gid == getegid())
		return true;
	n = getgroups(0, NULL);
	if (n <= 0)
		return false;
	groups = calloc(n, sizeof(*groups));
	if (!groups)
		return false;
	n = getgroups(n, groups);
	for (i = 0; i < n && !found; i++)
		found = groups[i] == gid;
	free(groups);
	return found;
}

/* Does /etc/group list @user in group @gid (joined since this login)? */
static bool group_lists(gid_t gid, const char *user)
{
	struct group *gr = getgrgid(gid);
	char **m;

	for (m = gr ? gr->gr_mem : NULL; m && *m; m++)
		if (!strcmp(*m, user))
			return true;
	return false;
}

#define RULES_FIX "install userspace-tools/60-krdma.rules (make install does: group rdma, mode 0660) and join group rdma"

void node_access_advice(char *why, size_t wlen, char *fix, size_t flen)
{
	char owner[64], group[64], user[64], me[80];
	const char *allowed = NULL;
	uid_t euid = geteuid();
	struct passwd *pw;
	struct group *gr;
	struct stat st;
	mode_t mode;
	size_t n;

	if (stat(KRDMA_DEV_PATH, &st)) {
		snprintf(why, wlen, "cannot look at %s either: %s",
			 KRDMA_DEV_PATH, strerror(errno));
		snprintf(fix, flen, "run as root, or " RULES_FIX);
		return;
	}
	mode = st.st_mode & 07777;
	pw = getpwuid(st.st_uid);
	if (pw)
		snprintf(owner, sizeof(owner), "%s", pw->pw_name);
	else
		snprintf(owner, sizeof(owner), "%u", (unsigned int)st.st_uid);
	gr = getgrgid(st.st_gid);
	if (gr)
		snprintf(group, sizeof(group), "%s", gr->gr_name);
	else
		snprintf(group, sizeof(group), "%u", (unsigned int)st.st_gid);
	pw = getpwuid(euid);
	snprintf(user, sizeof(user), "%s", pw ? pw->pw_name : "");
	if (user[0])
		snprintf(me, sizeof(me), "uid %u (%s)", (unsigned int)euid,
			 user);
	else
		snprintf(me, sizeof(me), "uid %u", (unsigned int)euid);

	snprintf(why, wlen, "owner %s, group %s, mode %04o", owner, group,
		 (unsigned int)mode);
	n = strlen(why);
	if (n + 1 >= wlen)
		return;
	why += n;
	wlen -= n;
	if (st.st_uid == euid && (mode & 0600) == 0600)
		allowed = "the owner";
	else if (in_group(st.st_gid) && (mode & 0060) == 0060)
		allowed = "in the group";
	else if ((mode & 0006) == 0006)
		allowed = "anyone";
	if (!euid) {
		snprintf(why, wlen, "; even root was refused");
		snprintf(fix, flen, "the process lacks CAP_DAC_OVERRIDE (in a container?), or a security module (SELinux, AppArmor) or a device cgroup denies it: see the audit messages (dmesg, journalctl)");
	} else if (allowed) {
		snprintf(why, wlen, "; its mode lets %s open it (%s)", me,
			 allowed);
		snprintf(fix, flen, "a security module (SELinux, AppArmor) or a device cgroup (in a container?) denies it: see the audit messages (dmesg, journalctl)");
	} else if ((mode & 0060) == 0060 && user[0] &&
		   group_lists(st.st_gid, user)) {
		snprintf(why, wlen, "; %s joined group %s after this login",
			 me, group);
		snprintf(fix, flen, "log in again, or start a shell in the group: newgrp %s",
			 group);
	} else if ((mode & 0060) == 0060) {
		snprintf(why, wlen, "; %s is not in group %s", me, group);
		snprintf(fix, flen, "join the group: sudo usermod -aG %s %s, then log in again; or run as root",
			 group, user[0] ? user : "USER");
	} else {
		if ((mode & 0600) != 0600 || !strcmp(owner, "root"))
			snprintf(why, wlen, "; only root may open it");
		else
			snprintf(why, wlen, "; only %s and root may open it",
				 owner);
		snprintf(fix, flen, "run as root, or " RULES_FIX);
	}
}

const char *open_hint(int err, char *buf, size_t len)
{
	char why[512], fix[512];

	if (err != -EACCES && err != -EPERM)
		return krdma_strerror_hint(err);
	node_access_advice(why, sizeof(why), fix, sizeof(fix));
	snprintf(buf, len, "%s: %s; %s", KRDMA_DEV_PATH, why, fix);
	return buf;
}

/* Open /dev/krdma, or say why not. Returns the fd or -1. */
int open_krdma(void)
{
	int fd = krdma_open();
	char hint[1100];

	if (fd < 0) {
		errmsg_advice(fd, open_hint(fd, hint, sizeof(hint)),
			      "cannot open %s", KRDMA_DEV_PATH);
		return -1;
	}
	return fd;
}

/*
 * A tiny JSON writer. Every value goes through json_key(), which writes
 * the comma before all but the first member of a container and the
 * "key": of object members; a stack of the open containers checks that
 * objects get keys and arrays do not, and that every container is closed.
 */
/* @s as a JSON string: escapes ", \ and controls; invalid UTF-8 -> U+FFFD */
static void json_write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		unsigned char c = *s;
		uint32_t cp;
		size_t n, i;

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
			s++;
			continue;
		}
		if (c < 0x20) {
			fprintf(f, "\\u%04x", c);
			s++;
			continue;
		}
		if (c < 0x80) {
			fputc(c, f);
			s++;
			continue;
		}
		/* Pass a valid UTF-8 sequence through as it is. */
		if (c >= 0xc2 && c <= 0xdf) {
			n = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 4;
			cp = c & 0x07;
		} else {
			n = 0;
			cp = 0;
		}
		/* a NUL fails the continuation test: no read past the end */
		for (i = 1; i < n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				break;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if (!n || i < n || (n == 3 && cp < 0x800) ||
		    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff)) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		fwrite(s, 1, n, f);
		s += n;
	}
	fputc('"', f);
}

/* -p: a new line and four spaces a level, as iproute2's -p */
static void json_newline(struct json *j)
{
	if (json_pretty)
		fprintf(j->f, "\n%*s", 4 * j->depth, "");
}

static void json_key(struct json *j, const char *key)
{
	if (j->depth > 0) {
		int top = j->depth - 1;

		if ((j->kind[top] == '{') != !!key)
			abort();	/* object member without key, or vice versa */
		if (!j->first[top])
			fputc(',', j->f);
		j->first[top] = false;
		json_newline(j);
	}
	if (key) {
		json_write_string(j->f, key);
		fputs(json_pretty ? ": " : ":", j->f);
	}
}

static void json_open(struct json *j, const char *key, char kind)
{
	json_key(j, key);
	if (j->depth >= JSON_MAX_DEPTH)
		abort();
	if (!j->depth && j->f == stdout)
		json_doc_begun = true;
	fputc(kind, j->f);
	j->kind[j->depth] = kind;
	j->first[j->depth] = true;
	j->depth++;
}

static void json_close(struct json *j, char kind)
{
	if (j->depth <= 0 || j->kind[j->depth - 1] != kind)
		abort();
	j->depth--;
	if (!j->first[j->depth])
		json_newline(j);
	fputc(kind == '{' ? '}' : ']', j->f);
	if (!j->depth)
		fputc('\n', j->f);
}

void json_begin_object(struct json *j, const char *key)
{
	json_open(j, key, '{');
}

void json_end_object(struct json *j)
{
	json_close(j, '{');
}

void json_begin_array(struct json *j, const char *key)
{
	json_open(j, key, '[');
}

void json_end_array(struct json *j)
{
	json_close(j, '[');
}

void json_str(struct json *j, const char *key, const char *val)
{
	json_key(j, key);
	json_write_string(j->f, val);
}

void json_u64(struct json *j, const char *key, uint64_t val)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, val);
}

void json_double(struct json *j, const char *key, double val, int decimals)
{
	json_key(j, key);
	fprintf(j->f, "%.*f", decimals, val);
}

void json_bool(struct json *j, const char *key, bool val)
{
	json_key(j, key);
	fputs(val ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	json_key(j, key);
	fputs("null", j->f);
}

void json_conn_dev(struct json *j, const char *dev, const char *transport)
{
	if (!dev[0] || !strcmp(dev, "?")) {
		json_null(j, "ifname");
		json_null(j, "transport");
		return;
	}
	json_str(j, "ifname", dev);
	json_str(j, "transport", transport);
}

void json_error(struct json *j, const char *key, int err, const char *msg,
		const char *hint)
{
	const char *name;

	err = err < 0 ? -err : err;
	name = err ? strerrorname_np(err) : NULL;
	json_begin_object(j, key);
	json_u64(j, "errno", err);
	if (name)
		json_str(j, "name", name);
	else
		json_null(j, "name");
	json_str(j, "message", msg);
	if (hint)
		json_str(j, "hint", hint);
	else
		json_null(j, "hint");
	json_end_object(j);
}

void json_last_error(struct json *j, const char *key, int status)
{
	int err = last_err.err;

	if (!err && status == EXIT_USAGE)
		err = EINVAL;
	json_error(j, key, err, last_err.set ? last_err.msg : "failed",
		   last_err.has_hint ? last_err.hint : NULL);
}

/*
 * A command run with JSON output failed before it began its document:
 * {"error": ERROR} on stdout, so that there is always one object to parse.
 */
static int json_error_doc(int status)
{
	struct json j = { .f = stdout };

	if (!json_output || !status || json_doc_begun)
		return status;
	json_begin_object(&j, NULL);
	json_last_error(&j, "error", status);
	json_end_object(&j);
	fflush(stdout);
	return status;
}

void bad_option(const char *cmd, int c, char *argv[])
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	bool is_long = !strncmp(arg, "--", 2);

	if (c == ':' && is_long)
		errmsg("%s: option '%s' needs a value", cmd, arg);
	else if (c == ':')
		errmsg("%s: option '-%c' needs a value", cmd, optopt);
	else if (optopt && !is_long)
		errmsg("%s: unknown option '-%c'", cmd, optopt);
	else
		errmsg("%s: unknown option '%s'", cmd, arg);
	print_usage_of(cmd, stderr);
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int ret = parse_u64(s, min, max, &v);

	if (!ret)
		*out = v;
	return ret;
}

int parse_duration(const char *s, uint64_t bare_us, uint64_t *us)
{
	static const struct {
		const char *name;
		uint64_t us;
	} units[] = {
		{ "ms", USEC_PER_MS }, { "msec", USEC_PER_MS },
		{ "msecs", USEC_PER_MS }, { "s", USEC_PER_S },
		{ "sec", USEC_PER_S }, { "secs", USEC_PER_S },
	};
	uint64_t whole = 0, frac = 0, scale = 1, unit = bare_us;
	bool digits = false;
	const char *p;
	size_t i;

	for (p = s; isdigit((unsigned char)*p); p++, digits = true) {
		if (whole > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.') {
		/* digits past a nanosecond of a second change nothing */
		for (p++; isdigit((unsigned char)*p); p++, digits = true) {
			if (scale < 1000000000ULL) {
				frac = frac * 10 + (*p - '0');
				scale *= 10;
			}
		}
	}
	if (!digits)
		return -EINVAL;
	if (*p) {
		for (i = 0; i < ARRAY_SIZE(units); i++)
			if (!strcasecmp(p, units[i].name))
				break;
		if (i == ARRAY_SIZE(units))
			return -EINVAL;
		unit = units[i].us;
	}
	if (whole > (UINT64_MAX - unit) / unit)
		return -EINVAL;
	*us = whole * unit + frac * unit / scale;
	return 0;
}

/* @us as the shortest of "0", "3600s", "10ms", "1500us" */
static const char *duration_str(uint64_t us, char *buf, size_t len)
{
	if (!us)
		snprintf(buf, len, "0");
	else if (!(us % USEC_PER_S))
		snprintf(buf, len, "%" PRIu64 "s", us / USEC_PER_S);
	else if (!(us % USEC_PER_MS))
		snprintf(buf, len, "%" PRIu64 "ms", us / USEC_PER_MS);
	else
		snprintf(buf, len, "%" PRIu64 "us", us);
	return buf;
}

int duration_opt(const char *cmd, const char *name, const char *s,
		 uint64_t bare_us, uint64_t min_us, uint64_t max_us,
		 uint64_t *us)
{
	bool ms = bare_us == USEC_PER_MS;
	char lo[32], hi[32];
	uint64_t v;

	if (!parse_duration(s, bare_us, &v) && v >= min_us && v <= max_us &&
	    (!ms || !(v % USEC_PER_MS))) {
		*us = v;
		return 0;
	}
	errmsg("%s: bad %s '%s' (%s, or a number with a unit: %s; %sfrom %s to %s)",
	       cmd, name, s, ms ? "milliseconds" : "seconds, fractions too",
	       ms ? "1500ms, 1.5s" : "500ms, 1.5s",
	       ms ? "a whole number of milliseconds " : "",
	       duration_str(min_us, lo, sizeof(lo)),
	       duration_str(max_us, hi, sizeof(hi)));
	return EXIT_USAGE;
}

int help_or_bad_option(int c, char *argv[])
{
	if (c == 'h') {
		print_usage_of(argv[0], stdout);
		return finish_stdout(0);
	}
	bad_option(argv[0], c, argv);
	return EXIT_USAGE;
}

bool unexpected_arg(int argc, char *argv[])
{
	if (optind >= argc)
		return false;
	errmsg("%s: unexpected argument '%s'", argv[0], argv[optind]);
	print_usage_of(argv[0], stderr);
	return true;
}

int check_module_for(int fd, uint64_t features, const char *feature_name)
{
	struct krdma_query_module qm;
	int ret;

	ret = krdma_check_module(fd, features, &qm);
	if (ret == -EPROTO)
		errmsg_hint(ret, "krdmactl was built for krdma ABI %u, but the loaded krdma.ko speaks ABI %u",
			    KRDMA_ABI_VERSION, qm.abi_version);
	else if (ret == -EPROTONOSUPPORT)
		errmsg_hint(ret, "the loaded krdma.ko lacks the %s feature (features 0x%llx)",
			    feature_name, (unsigned long long)qm.features);
	else if (ret)
		errmsg_err(ret, "cannot query the krdma module");
	return ret;
}

int open_krdma_for(uint64_t features, const char *feature_name)
{
	int fd = open_krdma();

	if (fd >= 0 && check_module_for(fd, features, feature_name)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

bool module_has(int fd, uint64_t features)
{
	struct krdma_query_module qm;

	return !krdma_query_module(fd, &qm) &&
	       (qm.features & features) == features;
}

uint32_t tool_connect_flags(int fd)
{
	return module_has(fd, KRDMA_FEATURE_KRDMA_PEER) ?
	       KRDMA_CONNECT_KRDMA_PEER : 0;
}

/* The address of @a as a GID (IPv4-mapped for IPv4) */
static void addr_gid(const struct krdma_addr *a, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (a->family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, a->addr, 4);
	} else {
		memcpy(gid, a->addr, 16);
	}
}

/* The netdev that has the address @a into @name; false: no netdev has it */
static bool addr_netdev(const struct krdma_addr *a, char *name, size_t len)
{
	struct ifaddrs *ifa = NULL, *i;
	bool found = false;

	if (getifaddrs(&ifa))
		return false;
	for (i = ifa; i && !found; i = i->ifa_next) {
		const void *ip;

		if (!i->ifa_addr || i->ifa_addr->sa_family != a->family)
			continue;
		if (a->family == AF_INET)
			ip = &((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		else
			ip = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		if (!memcmp(ip, a->addr, a->family == AF_INET ? 4 : 16)) {
			snprintf(name, len, "%s", i->ifa_name);
			found = true;
		}
	}
	freeifaddrs(ifa);
	return found;
}

/*
 * Can an RDMA device take connections at @a? For the wildcard: is there
 * any RDMA device; for an address: is an RDMA device on its netdev, or has
 * a GID of it. True when it can (or when the module cannot say); else the
 * facts into @why and what to do into @fix.
 */
static bool listen_device_ok(int fd, const struct krdma_addr *a, char *why,
			     size_t wlen, char *fix, size_t flen)
{
	static const uint8_t zero[16];
	struct krdma_query_module qm;
	struct dev_info *devs;
	uint32_t ndevs, i, p, g;
	char ip[INET6_ADDRSTRLEN] = "?", netdev[IF_NAMESIZE] = "";
	uint8_t gid[16];
	bool local, ok = false;

	if (krdma_query_module(fd, &qm))
		return true;
	if (!memcmp(a->addr, zero, a->family == AF_INET ? 4 : 16)) {
		if (qm.num_devices)
			return true;
		snprintf(why, wlen, "no RDMA device in this network namespace: no client can connect until there is one");
		snprintf(fix, flen, "create one: sudo krdmactl up [--siw] [NETDEV] (see: krdmactl dev)");
		return false;
	}
	if (!(qm.features & KRDMA_FEATURE_DEV_QUERY))
		return true;
	inet_ntop(a->family, a->addr, ip, sizeof(ip));
	local = addr_netdev(a, netdev, sizeof(netdev));
	addr_gid(a, gid);
	if (qm.num_devices && collect_devs(fd, NULL, &devs, &ndevs))
		return true;	/* (collect_devs() said why) */
	for (i = 0; qm.num_devices && i < ndevs && !ok; i++) {
		for (p = 0; p < devs[i].dq.phys_port_cnt && !ok; p++) {
			const struct port_info *pi = &devs[i].ports[p];

			ok = local && !strcmp((const char *)pi->pq.netdev_name,
					      netdev);
			for (g = 0; g < pi->ngids && !ok; g++)
				ok = !memcmp(pi->gids[g].gid, gid, 16);
		}
	}
	if (qm.num_devices)
		free_devs(devs, ndevs);
	if (ok)
		return true;
	if (!local) {
		snprintf(why, wlen, "%s is not an address of this host", ip);
		snprintf(fix, flen, "give -a an address of a netdev with an RDMA device (see: krdmactl dev), or leave -a out to listen on every address");
	} else if (!qm.num_devices) {
		snprintf(why, wlen, "no RDMA device in this network namespace, so none on %s, which has %s",
			 netdev, ip);
		snprintf(fix, flen, "create one: sudo krdmactl up [--siw] %s (see: krdmactl dev)",
			 netdev);
	} else {
		snprintf(why, wlen, "no RDMA device is on %s, which has %s",
			 netdev, ip);
		snprintf(fix, flen, "create one: sudo krdmactl up [--siw] %s, or give -a an address of a netdev with one (see: krdmactl dev)",
			 netdev);
	}
	return false;
}

int tool_listen(int fd, const char *cmd, struct krdma_listen *l)
{
	char why[256], fix[256], buf[80];
	bool dev_ok;
	int ret;

	dev_ok = listen_device_ok(fd, &l->addr, why, sizeof(why), fix,
				  sizeof(fix));
	krdma_addr_str(&l->addr, buf, sizeof(buf));
	if (module_has(fd, KRDMA_FEATURE_KRDMA_PEER))
		l->flags |= KRDMA_LISTEN_KRDMA_PEER;
	ret = krdma_ioctl(fd, KRDMA_IOC_LISTEN, l);
	if (!ret) {
		if (!dev_ok)
			errmsg_advice(0, fix, "%s: warning: %s", cmd, why);
		return 0;
	}
	if (!dev_ok) {
		/*
		 * Whatever rdma_cm says (ENODEV, EADDRNOTAVAIL; EADDRINUSE
		 * for 127.0.0.1 even with port 0), this is the cause
		 */
		char hint[600];

		snprintf(hint, sizeof(hint), "%s: %s", why, fix);
		errmsg_advice(ret, hint, "%s: cannot listen on %s", cmd, buf);
	} else if (ret == -EADDRINUSE || ret == -EADDRNOTAVAIL) {
		/*
		 * rdma_cm says EADDRNOTAVAIL for a port that is taken, which
		 * strerror() makes "Cannot assign requested address": with a
		 * device at the address, it is EADDRINUSE. On port 0 the
		 * module tried up to 8 ports that rdma_cm picked from the
		 * ephemeral range, and every one was taken.
		 */
		const char *nae = ret == -EADDRNOTAVAIL ?
				  " (rdma_cm says EADDRNOTAVAIL for that)" : "";
		char hint[600];

		if (l->addr.port)
			snprintf(hint, sizeof(hint),
				 "the port is taken: another RDMA listener (krdmactl serve, bench -l, any krdma or verbs program) has port %u%s; choose another -p PORT",
				 l->addr.port, nae);
		else
			snprintf(hint, sizeof(hint),
				 "no free port%s: the ports rdma_cm picked from net.ipv4.ip_local_port_range were all taken, typically by TCP sockets (an iWARP device such as siw binds a TCP socket to its RDMA port), e.g. connections in TIME_WAIT (see: ss -tan state time-wait); wait for TIME_WAIT to end (up to 60 s), widen the range (sysctl net.ipv4.ip_local_port_range), or choose a port with -p PORT",
				 nae);
		ret = -EADDRINUSE;
		errmsg_advice(ret, hint, "%s: cannot listen on %s", cmd, buf);
	} else {
		errmsg_advice(ret, krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN,
							   ret),
			      "%s: cannot listen on %s", cmd, buf);
	}
	return ret;
}

void tool_refusals_init(struct tool_refusals *r, int fd, const char *cmd,
			const char *answers, uint32_t listener)
{
	memset(r, 0, sizeof(*r));
	r->cmd = cmd;
	r->answers = answers;
	r->listener = listener;
	/* From zero: a request refused before this call is told too */
	r->on = module_has(fd, KRDMA_FEATURE_LISTEN_QUERY);
}

/* @n requests refused for @reason; the last one's address if it is theirs */
static void tell_refused(const struct tool_refusals *r,
			 const struct krdma_listen_query *q, uint32_t reason,
			 uint64_t n)
{
	char who[128] = "", addr[80], why[512], many[48] = "a connect request";

	switch (reason) {
	case KRDMA_REFUSED_VERSION:
		snprintf(why, sizeof(why), "a krdma peer of another handshake version: run the same krdma version on both hosts (upgrade the older one; compare: krdmactl version)");
		break;
	case KRDMA_REFUSED_NOT_KRDMA:
		snprintf(why, sizeof(why), "not a krdma peer (a plain verbs program such as ib_write_bw or rping?); %s",
			 r->answers);
		break;
	case KRDMA_REFUSED_BACKLOG:
		snprintf(why, sizeof(why), "the backlog was full (%u connections waiting to be served, one at a time): the client may try again later",
			 q->backlog);
		break;
	case KRDMA_REFUSED_NO_RESOURCES:
		snprintf(why, sizeof(why), "no resources for the connection (memory, a QP or a CQ): check the free memory, the device's max_qp and max_cq (krdmactl dev show) and the kernel log (dmesg)");
		break;
	default:
		/* 0: reasons of a newer module, none of them the last one's */
		if (reason)
			snprintf(why, sizeof(why), "reason %u, which this krdmactl does not know (the module is newer: compare krdmactl version)",
				 reason);
		else
			snprintf(why, sizeof(why), "reasons this krdmactl does not know (the module is newer: compare krdmactl version)");
	}
	if (n > 1)
		snprintf(many, sizeof(many), "%" PRIu64 " connect requests", n);
	if (q->last_refused_reason == reason)
		snprintf(who, sizeof(who), "%s %s", n > 1 ? ", the last from" :
			 " from", krdma_addr_str(&q->last_refused_peer, addr,
						 sizeof(addr)));
	printf("krdmactl %s: turned away %s%s: %s\n", r->cmd, many, who, why);
}

void tool_refusals_tell(struct tool_refusals *r, int fd)
{
	struct krdma_listen_query q;
	uint64_t n, known = 0;
	uint32_t reason;
	unsigned int i;
	int ret;

	if (!r->on)
		return;
	ret = krdma_listener_info(fd, r->listener, &q);
	if (ret) {
		errmsg_err(ret, "%s: cannot ask the listener which connect requests it turned away",
			   r->cmd);
		r->on = false;
		return;
	}
	if (q.refused == r->said.refused)
		return;
	for (i = 0; (reason = krdma_refused_reason(i)); i++) {
		n = *krdma_refused_counter(&q, reason) -
		    *krdma_refused_counter(&r->said, reason);
		if (n)
			tell_refused(r, &q, reason, n);
		known += n;
	}
	/* Reasons of a newer module: the last one's, if it is theirs */
	n = q.refused - r->said.refused - known;
	if (n)
		tell_refused(r, &q,
			     krdma_refused_counter(&q, q.last_refused_reason) ?
			     0 : q.last_refused_reason, n);
	fflush(stdout);
	r->said = q;
}

int tool_accept(struct tool_refusals *r, int fd, uint32_t *conn)
{
	bool sliced = r->on;
	int ret;

	ret = krdma_accept_conn(fd, r->listener, 0,
				sliced ? TOOL_ACCEPT_SLICE_MS :
					 KRDMA_TIMEOUT_INFINITE, conn);
	tool_refusals_tell(r, fd);
	if (ret == -ETIMEDOUT && sliced)
		return -EAGAIN;
	return ret;
}

int tool_addr(const char *cmd, const char *host, uint32_t port,
	      struct krdma_addr *out)
{
	int ret = krdma_resolve_addr(host, port, out);
	char hint[256];

	/* exit status 2 for every failure, as ping(8) */
	switch (ret) {
	case 0:
		return 0;
	case EAI_SYSTEM:
		errmsg_err(-errno, "%s: cannot resolve the host name '%s'", cmd,
			   host);
		return EXIT_USAGE;
	case EAI_AGAIN:
	case EAI_FAIL:
	case EAI_MEMORY:
		errmsg_advice(0, "the name service failed: check /etc/resolv.conf and the network, or give an IP address",
			      "%s: cannot resolve the host name '%s': %s", cmd,
			      host, gai_strerror(ret));
		return EXIT_USAGE;
	}
	snprintf(hint, sizeof(hint),
		 "give an IPv4 or IPv6 address, or a host name that resolves (see: getent ahosts %s)",
		 host);
	errmsg_advice(0, hint, "%s: '%s' is not an IP address, and no host has that name: %s",
		      cmd, host, gai_strerror(ret));
	return EXIT_USAGE;
}

/* Buffers are pinned: as much of RLIMIT_MEMLOCK as this process may */
static void raise_memlock(void)
{
	struct rlimit rl, inf = { RLIM_INFINITY, RLIM_INFINITY };

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return;
	if (!setrlimit(RLIMIT_MEMLOCK, &inf))
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_MEMLOCK, &rl);
}

int tool_session(const char *cmd, const char *host, uint32_t port,
		 struct krdma_addr *addr, char *target, size_t tlen)
{
	int ret, fd;

	ret = tool_addr(cmd, host, port, addr);
	if (ret)
		return -ret;
	if (target)
		krdma_addr_str(addr, target, tlen);
	fd = open_krdma_for(KRDMA_FEATURE_CONN, "connection");
	if (fd < 0)
		return -1;
	raise_memlock();
	return fd;
}

enum opt_result parse_json_opts(int argc, char *argv[], bool *json)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	*json = json_output;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			*json = true;
			json_output = true;
			break;
		case 'h':
			print_usage_of(argv[0], stdout);
			return OPT_HELP;
		default:
			bad_option(argv[0], c, argv);
			return OPT_BAD;
		}
	}
	return OPT_OK;
}

/* krdmactl version */

static void print_features(uint64_t features)
{
	bool any = false;
	int bit;

	for (bit = 0; bit < 64; bit++) {
		uint64_t b = 1ULL << bit;
		const char *name;

		if (!(features & b))
			continue;
		name = krdma_feature_str(b);
		if (name)
			printf("%s%s", any ? " " : "", name);
		else
			printf("%sbit%d", any ? " " : "", bit);
		any = true;
	}
	printf("%s (0x%" PRIx64 ")\n", any ? "" : "none", features);
}

static void json_features(struct json *j, uint64_t features)
{
	int bit;

	json_begin_array(j, "feature_names");
	for (bit = 0; bit < 64; bit++) {
		uint64_t b = 1ULL << bit;
		char unknown[16];
		const char *name;

		if (!(features & b))
			continue;
		name = krdma_feature_str(b);
		if (!name) {
			snprintf(unknown, sizeof(unknown), "bit%d", bit);
			name = unknown;
		}
		json_str(j, NULL, name);
	}
	json_end_array(j);
}

static int version_main(int argc, char *argv[])
{
	struct krdma_query_module qm;
	struct json j = { .f = stdout };
	bool json = false;
	char ver[32], hint[1100];
	int fd, ret;

	switch (parse_json_opts(argc, argv, &json)) {
	case OPT_HELP:
		return finish_stdout(0);
	case OPT_BAD:
		return EXIT_USAGE;
	case OPT_OK:
		break;
	}
	if (optind < argc) {
		errmsg("version: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}

	if (json) {
		json_begin_object(&j, NULL);
		json_begin_object(&j, "krdmactl");
		json_str(&j, "version", KRDMACTL_VERSION);
		json_u64(&j, "abi_version", KRDMA_ABI_VERSION);
		json_end_object(&j);
	} else {
		printf("krdmactl:     %s (built for krdma ABI %u)\n",
		       KRDMACTL_VERSION, KRDMA_ABI_VERSION);
	}

	fd = krdma_open();
	ret = fd < 0 ? fd : krdma_query_module(fd, &qm);
	if (fd >= 0)
		close(fd);
	if (ret) {
		/* the text known so far first, also when both go to one file */
		if (!json)
			fflush(stdout);
		if (fd < 0)
			errmsg_advice(ret, open_hint(ret, hint, sizeof(hint)),
				      "cannot open %s", KRDMA_DEV_PATH);
		else
			errmsg_err(ret, "cannot query the krdma module");
		if (json) {
			json_null(&j, "module");
			json_null(&j, "abi_match");
			json_last_error(&j, "error", 1);
			json_end_object(&j);
		}
		return finish_stdout(1);
	}

	snprintf(ver, sizeof(ver), "%u.%u.%u",
		 KRDMA_VERSION_MAJOR(qm.version),
		 KRDMA_VERSION_MINOR(qm.version),
		 KRDMA_VERSION_PATCH(qm.version));
	if (json) {
		json_begin_object(&j, "module");
		json_str(&j, "version", ver);
		json_u64(&j, "abi_version", qm.abi_version);
		json_u64(&j, "features", qm.features);
		json_features(&j, qm.features);
		json_u64(&j, "num_devices", qm.num_devices);
		json_end_object(&j);
		json_bool(&j, "abi_match", qm.abi_version == KRDMA_ABI_VERSION);
		json_end_object(&j);
	} else {
		printf("module:       %s (krdma ABI %u)\n", ver,
		       qm.abi_version);
		printf("features:     ");
		print_features(qm.features);
		printf("num_devices:  %u\n", qm.num_devices);
	}
	ret = finish_stdout(0);

	if (qm.abi_version != KRDMA_ABI_VERSION) {
		errmsg("WARNING: ABI MISMATCH: krdmactl was built for krdma ABI %u, but the loaded krdma.ko speaks ABI %u!",
		       KRDMA_ABI_VERSION, qm.abi_version);
		errmsg("WARNING: the other commands will refuse to run; build and install krdma.ko and krdmactl from the same tree");
	}
	return ret;
}

/* krdmactl dev */

static void free_dev(struct dev_info *d)
{
	uint32_t p;

	if (d->ports) {
		for (p = 0; p < d->dq.phys_port_cnt; p++)
			free(d->ports[p].gids);
		free(d->ports);
	}
	memset(d, 0, sizeof(*d));
}

void free_devs(struct dev_info *devs, uint32_t ndevs)
{
	uint32_t i;

	for (i = 0; i < ndevs; i++)
		free_dev(&devs[i]);
	free(devs);
}

/*
 * Query the ports of @d (whose dq is filled). Returns 0 or -errno; the
 * error is reported here, except -ENODEV (the device went away) which is
 * up to the caller.
 */
static int collect_ports(int fd, struct dev_info *d)
{
	uint32_t p;
	int ret;

	d->ports = calloc(d->dq.phys_port_cnt ? d->dq.phys_port_cnt : 1,
			  sizeof(*d->ports));
	if (!d->ports) {
		errmsg_err(-ENOMEM, "cannot query %s", (char *)d->dq.name);
		return -ENOMEM;
	}
	for (p = 0; p < d->dq.phys_port_cnt; p++) {
		struct port_info *pi = &d->ports[p];

		ret = krdma_port_query(fd, d->dq.dev_index, p + 1, &pi->pq,
				       &pi->gids, &pi->ngids);
		if (ret && ret != -ENODEV)
			errmsg_err(ret, "cannot query port %u of %s", p + 1,
				   (char *)d->dq.name);
		if (ret)
			return ret;
	}
	return 0;
}

/* Tell which devices there are, after DEVNAME was not found. */
static void list_known_devices(int fd)
{
	struct krdma_dev_query dq;
	uint32_t *idx, n, i;
	bool any = false;

	if (krdma_dev_list(fd, &idx, &n))
		return;
	for (i = 0; i < n; i++) {
		if (krdma_dev_query(fd, idx[i], &dq))
			continue;
		fprintf(stderr, "%s%s", any ? ", " : "krdmactl: krdma tracks: ",
			(char *)dq.name);
		any = true;
	}
	if (any)
		fputc('\n', stderr);
	else
		errmsg("krdma tracks no RDMA device; create a soft one: sudo krdmactl up [NETDEV] (or: sudo rdma link add rxe0 type rxe netdev eth0)");
	free(idx);
}

/*
 * Fill *devs with every device (or only @name), ports and GIDs included.
 * Devices removed while we look are left out. Returns 0 or -errno, already
 * reported.
 */
int collect_devs(int fd, const char *name, struct dev_info **devs,
			uint32_t *ndevs)
{
	struct dev_info *d;
	uint32_t *idx, n, i, nd = 0;
	int ret;

	*devs = NULL;
	*ndevs = 0;

	if (name) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			errmsg_err(-ENOMEM, "cannot query %s", name);
			return -ENOMEM;
		}
		ret = krdma_dev_find(fd, name, &i, &d->dq);
		if (ret == -ENODEV) {
			errmsg("no RDMA device named '%s'", name);
			list_known_devices(fd);
		} else if (ret) {
			errmsg_err(ret, "cannot look for RDMA device '%s'",
				   name);
		} else {
			ret = collect_ports(fd, d);
			if (ret == -ENODEV)
				errmsg_err(ret, "cannot query %s", name);
		}
		if (ret) {
			free_devs(d, 1);
			return ret;
		}
		*devs = d;
		*ndevs = 1;
		return 0;
	}

	ret = krdma_dev_list(fd, &idx, &n);
	if (ret) {
		errmsg_err(ret, "cannot list the RDMA devices");
		return ret;
	}
	d = calloc(n ? n : 1, sizeof(*d));
	if (!d) {
		free(idx);
		errmsg_err(-ENOMEM, "cannot list the RDMA devices");
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct dev_info *cur = &d[nd];

		ret = krdma_dev_query(fd, idx[i], &cur->dq);
		if (!ret)
			ret = collect_ports(fd, cur);
		else if (ret != -ENODEV)
			errmsg_err(ret, "cannot query RDMA device %u", idx[i]);
		if (ret == -ENODEV) {
			/* removed since the list: as if it never was */
			free_dev(cur);
			ret = 0;
			continue;
		}
		nd++;
		if (ret)
			break;
	}
	free(idx);
	if (ret) {
		free_devs(d, nd);
		return ret;
	}
	*devs = d;
	*ndevs = nd;
	return 0;
}

/* The name of the network device @ifindex, or "ifindex N". */
static const char *ifname(uint32_t ifindex, char buf[IF_NAMESIZE + 16])
{
	if (!if_indextoname(ifindex, buf))
		snprintf(buf, IF_NAMESIZE + 16, "ifindex %u", ifindex);
	return buf;
}

/* "\t<key>:<padding><value>\n", with @indent tabs */
static void __printf(3, 4)
kv(int indent, const char *key, const char *fmt, ...)
{
	va_list ap;
	/* values line up across indent levels, for 8-column tabs */
	int pad = 28 - (int)strlen(key) - 8 * (indent - 1);

	printf("%.*s%s:%*s", indent, "\t\t\t\t", key, pad > 1 ? pad : 1, "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/*
 * A port's width or speed (@s, the name of @v) as text and JSON show it:
 * "4X", or "unknown (9)"
 */
static const char *enum_text(const char *s, uint32_t v, char buf[24])
{
	if (strcmp(s, "unknown"))
		return s;
	snprintf(buf, 24, "unknown (%u)", v);
	return buf;
}

static const char *width_text(uint32_t width, char buf[24])
{
	return enum_text(krdma_port_width_str(width), width, buf);
}

static const char *speed_text(uint32_t speed, char buf[24])
{
	return enum_text(krdma_port_speed_str(speed), speed, buf);
}

static void print_port_text(const struct port_info *pi)
{
	const struct krdma_port_query *pq = &pi->pq;
	char buf[KRDMA_GID_IP_STR_LEN], ifbuf[IF_NAMESIZE + 16];
	char wbuf[24], sbuf[24];
	uint32_t g;

	printf("\tport %u:\n", pq->port_num);
	kv(2, "state", "%s (%u)", krdma_port_state_str(pq->state), pq->state);
	kv(2, "phys_state", "%s (%u)",
	   krdma_port_phys_state_str(pq->phys_state), pq->phys_state);
	kv(2, "active_mtu", "%u", pq->active_mtu);
	kv(2, "max_mtu", "%u", pq->max_mtu);
	kv(2, "link_layer", "%s", krdma_link_layer_str(pq->link_layer));
	if (pq->netdev_name[0])
		kv(2, "netdev", "%s (ifindex %u)", (const char *)pq->netdev_name,
		   pq->netdev_ifindex);
	else if (pq->netdev_ifindex)
		kv(2, "netdev", "%s", ifname(pq->netdev_ifindex, ifbuf));
	else
		kv(2, "netdev", "none");
	kv(2, "active_width", "%s", width_text(pq->active_width, wbuf));
	kv(2, "active_speed", "%s", speed_text(pq->active_speed, sbuf));
	kv(2, "gid_tbl_len", "%u", pq->gid_tbl_len);
	if (!pi->ngids)
		kv(2, "gids", "none");
	for (g = 0; g < pi->ngids; g++) {
		const struct krdma_gid_entry *ge = &pi->gids[g];
		char key[32];

		snprintf(key, sizeof(key), "GID[%3u]", ge->index);
		if (ge->netdev_ifindex)
			kv(2, key, "%s, %s, %s",
			   krdma_gid_ip_str(ge->gid, buf),
			   krdma_gid_type_str(ge->type),
			   ifname(ge->netdev_ifindex, ifbuf));
		else
			kv(2, key, "%s, %s", krdma_gid_ip_str(ge->gid, buf),
			   krdma_gid_type_str(ge->type));
	}
}

/*
 * The firmware version as ibv_devinfo shows it: the driver's string, or
 * for a driver without one (rxe, siw) its 64-bit fw_ver, which they leave
 * 0, as major.minor.subminor: "0.0.0"
 */
static const char *fw_text(const struct krdma_dev_query *dq)
{
	return dq->fw_ver[0] ? (const char *)dq->fw_ver : "0.0.0";
}

static void print_dev_text(const struct dev_info *d)
{
	const struct krdma_dev_query *dq = &d->dq;
	char buf[KRDMA_GUID_STR_LEN];
	uint32_t p;


	printf("%s\n", (const char *)dq->name);
	kv(1, "dev_index", "%u", dq->dev_index);
	kv(1, "transport", "%s (%u)", krdma_transport_str(dq->transport),
	   dq->transport);
	kv(1, "node_guid", "%s", krdma_guid_str(dq->node_guid, buf));
	kv(1, "sys_image_guid", "%s", krdma_guid_str(dq->sys_image_guid, buf));
	kv(1, "fw_ver", "%s", fw_text(dq));
	kv(1, "vendor_id", "0x%04x", dq->vendor_id);
	kv(1, "vendor_part_id", "%u", dq->vendor_part_id);
	kv(1, "hw_ver", "0x%x", dq->hw_ver);
	kv(1, "phys_port_cnt", "%u", dq->phys_port_cnt);
	kv(1, "max_mr_size", "0x%" PRIx64, (uint64_t)dq->max_mr_size);
	kv(1, "page_size_cap", "0x%" PRIx64, (uint64_t)dq->page_size_cap);
	kv(1, "max_qp", "%u", dq->max_qp);
	kv(1, "max_qp_wr", "%u", dq->max_qp_wr);
	kv(1, "max_send_sge", "%u", dq->max_send_sge);
	kv(1, "max_recv_sge", "%u", dq->max_recv_sge);
	kv(1, "max_sge_rd", "%u", dq->max_sge_rd);
	kv(1, "max_cq", "%u", dq->max_cq);
	kv(1, "max_cqe", "%u", dq->max_cqe);
	kv(1, "max_mr", "%u", dq->max_mr);
	kv(1, "max_pd", "%u", dq->max_pd);
	kv(1, "max_qp_rd_atom", "%u", dq->max_qp_rd_atom);
	kv(1, "max_qp_init_rd_atom", "%u", dq->max_qp_init_rd_atom);
	if (dq->atomic_cap == KRDMA_ATOMIC_NONE)
		kv(1, "atomic_cap", "none (RDMA atomics not supported)");
	else
		kv(1, "atomic_cap", "%s (%u)",
		   krdma_atomic_cap_str(dq->atomic_cap), dq->atomic_cap);
	kv(1, "max_fast_reg_page_list_len", "%u",
	   dq->max_fast_reg_page_list_len);
	for (p = 0; p < dq->phys_port_cnt; p++)
		print_port_text(&d->ports[p]);
}

/*
 * One line for the device, as `ip -br link`: name, transport, and per port
 * its state, netdev, speed and width (with its number when there are more)
 */
static void print_dev_brief(const struct dev_info *d)
{
	const struct krdma_dev_query *dq = &d->dq;
	char ifbuf[IF_NAMESIZE + 16], wbuf[24], sbuf[24];
	uint32_t p;

	printf("%-15s %-10s", (const char *)dq->name,
	       krdma_transport_str(dq->transport));
	for (p = 0; p < dq->phys_port_cnt; p++) {
		const struct krdma_port_query *pq = &d->ports[p].pq;
		const char *nd = (const char *)pq->netdev_name;

		if (!nd[0] && pq->netdev_ifindex)
			nd = ifname(pq->netdev_ifindex, ifbuf);
		if (dq->phys_port_cnt > 1)
			printf("%s port %u:", p ? " |" : "", pq->port_num);
		printf(" %-7s %-15s %s %s",
		       krdma_port_state_str(pq->state), nd[0] ? nd : "-",
		       speed_text(pq->active_speed, sbuf),
		       width_text(pq->active_width, wbuf));
	}
	if (!dq->phys_port_cnt)
		printf(" no ports");
	putchar('\n');
}

/*
 * "netdev" and "netdev_index", as rdma -j link: the network device @name
 * (NULL or "": by @ifindex), null and null when there is none
 */
static void json_netdev(struct json *j, const char *name, uint32_t ifindex)
{
	char ifbuf[IF_NAMESIZE];

	if ((!name || !name[0]) && ifindex)
		name = if_indextoname(ifindex, ifbuf);
	if (name && name[0])
		json_str(j, "netdev", name);
	else
		json_null(j, "netdev");
	if (ifindex)
		json_u64(j, "netdev_index", ifindex);
	else
		json_null(j, "netdev_index");
}

static void json_port(struct json *j, const struct port_info *pi)
{
	const struct krdma_port_query *pq = &pi->pq;
	char buf[KRDMA_GID_IP_STR_LEN], wbuf[24], sbuf[24];
	uint32_t g;

	_Static_assert(KRDMA_GID_IP_STR_LEN >= KRDMA_GID_STR_LEN, "buf");

	json_begin_object(j, NULL);
	json_u64(j, "port", pq->port_num);
	json_str(j, "state", krdma_port_state_str(pq->state));
	json_str(j, "physical_state",
		 krdma_port_phys_state_str(pq->phys_state));
	json_u64(j, "max_mtu", pq->max_mtu);
	json_u64(j, "active_mtu", pq->active_mtu);
	json_str(j, "link_layer", krdma_link_layer_str(pq->link_layer));
	json_u64(j, "gid_tbl_len", pq->gid_tbl_len);
	json_netdev(j, (const char *)pq->netdev_name, pq->netdev_ifindex);
	json_str(j, "active_speed", speed_text(pq->active_speed, sbuf));
	json_str(j, "active_width", width_text(pq->active_width, wbuf));
	json_u64(j, "num_gids", pi->ngids);
	json_begin_array(j, "gids");
	for (g = 0; g < pi->ngids; g++) {
		const struct krdma_gid_entry *ge = &pi->gids[g];

		json_begin_object(j, NULL);
		json_u64(j, "index", ge->index);
		json_str(j, "type", krdma_gid_type_str(ge->type));
		json_str(j, "gid", krdma_gid_str(ge->gid, buf));
		json_str(j, "ip", krdma_gid_ip_str(ge->gid, buf));
		json_netdev(j, NULL, ge->netdev_ifindex);
		json_end_object(j);
	}
	json_end_array(j);
	json_end_object(j);
}

void json_dev(struct json *j, const struct dev_info *d)
{
	const struct krdma_dev_query *dq = &d->dq;
	char buf[KRDMA_GUID_STR_LEN];
	uint32_t p;

	json_begin_object(j, NULL);
	json_u64(j, "ifindex", dq->dev_index);
	json_str(j, "ifname", (const char *)dq->name);
	json_str(j, "transport", krdma_transport_str(dq->transport));
	json_str(j, "node_guid", krdma_guid_str(dq->node_guid, buf));
	json_str(j, "sys_image_guid", krdma_guid_str(dq->sys_image_guid, buf));
	json_str(j, "fw", fw_text(dq));
	json_u64(j, "vendor_id", dq->vendor_id);
	json_u64(j, "vendor_part_id", dq->vendor_part_id);
	json_u64(j, "hw_ver", dq->hw_ver);
	json_u64(j, "phys_port_cnt", dq->phys_port_cnt);
	json_u64(j, "max_mr_size", dq->max_mr_size);
	json_u64(j, "page_size_cap", dq->page_size_cap);
	json_u64(j, "max_qp", dq->max_qp);
	json_u64(j, "max_qp_wr", dq->max_qp_wr);
	json_u64(j, "max_send_sge", dq->max_send_sge);
	json_u64(j, "max_recv_sge", dq->max_recv_sge);
	json_u64(j, "max_sge_rd", dq->max_sge_rd);
	json_u64(j, "max_cq", dq->max_cq);
	json_u64(j, "max_cqe", dq->max_cqe);
	json_u64(j, "max_mr", dq->max_mr);
	json_u64(j, "max_pd", dq->max_pd);
	json_u64(j, "max_qp_rd_atom", dq->max_qp_rd_atom);
	json_u64(j, "max_qp_init_rd_atom", dq->max_qp_init_rd_atom);
	json_str(j, "atomic_cap", krdma_atomic_cap_str(dq->atomic_cap));
	json_u64(j, "max_fast_reg_page_list_len",
		 dq->max_fast_reg_page_list_len);
	json_begin_array(j, "ports");
	for (p = 0; p < dq->phys_port_cnt; p++)
		json_port(j, &d->ports[p]);
	json_end_array(j);
	json_end_object(j);
}

static int dev_main(int argc, char *argv[])
{
	struct json j = { .f = stdout };
	const char *name = NULL;
	struct dev_info *devs;
	bool json = false, show = false;
	uint32_t ndevs, i;
	int fd, ret;

	switch (parse_json_opts(argc, argv, &json)) {
	case OPT_HELP:
		return finish_stdout(0);
	case OPT_BAD:
		return EXIT_USAGE;
	case OPT_OK:
		break;
	}
	/* dev, dev show [DEVNAME], and dev DEVNAME: dev show DEVNAME */
	if (optind < argc && !strcmp(argv[optind], "show")) {
		show = true;
		optind++;
	}
	if (optind < argc) {
		name = argv[optind++];
		show = true;
	}
	if (optind < argc) {
		errmsg("dev: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}

	fd = open_krdma();
	if (fd < 0)
		return 1;

	ret = check_module_for(fd, KRDMA_FEATURE_DEV_QUERY, "dev_query");
	if (!ret)
		ret = collect_devs(fd, name, &devs, &ndevs);
	close(fd);
	if (ret)
		return 1;

	if (json) {
		json_begin_object(&j, NULL);
		json_begin_array(&j, "devices");
		for (i = 0; i < ndevs; i++)
			json_dev(&j, &devs[i]);
		json_end_array(&j);
		json_end_object(&j);
	} else if (!ndevs) {
		printf("No RDMA devices. Create a soft one: sudo krdmactl up [NETDEV] (or: sudo rdma link add rxe0 type rxe netdev eth0)\n");
	} else if (!show) {
		for (i = 0; i < ndevs; i++)
			print_dev_brief(&devs[i]);
	} else {
		for (i = 0; i < ndevs; i++) {
			if (i)
				putchar('\n');
			print_dev_text(&devs[i]);
		}
	}
	free_devs(devs, ndevs);
	return finish_stdout(0);
}

/* krdmactl help */

static int help_main(int argc, char *argv[]);

/*
 * In the order a prefix resolves to (as iproute2: the first command that
 * starts with it); the commands that change the system (set, up, down)
 * are taken by their whole name only
 */
static const struct {
	const char *name;
	int (*fn)(int argc, char *argv[]);
	const char *help;
	const char *usage;
} subcommands[] = {
	{ "version", version_main,
	  "show the versions of krdmactl and of the loaded krdma module",
	  "[-j]\n"
	  "Print the version of krdmactl and the krdma ABI it was built for,\n"
	  "then the version, ABI and features of the loaded krdma.ko. Warns\n"
	  "when the two ABIs differ.\n"
	  "\n"
	  "  -j, --json  print JSON\n"
	  "  -h, --help  show this help\n" },
	{ "dev", dev_main,
	  "show the RDMA devices krdma tracks: ports, GIDs, limits",
	  "[-j]\n"
	  "       krdmactl dev show [-j] [DEVNAME]\n"
	  "List every RDMA device krdma tracks, one line each: its name,\n"
	  "transport, and per port the state, netdev, speed and width (\"-\":\n"
	  "no netdev). `dev show` shows every device, or only DEVNAME (e.g.\n"
	  "rxe0), in full: its identity, limits, ports and their valid GIDs;\n"
	  "`dev DEVNAME` is `dev show DEVNAME`. The JSON is always the full one.\n"
	  "\n"
	  "  -j, --json  print JSON: {\"devices\":[{\"ifindex\",\"ifname\",...,\n"
	  "              \"ports\":[{\"port\",\"state\",\"physical_state\",...,\n"
	  "              \"netdev\",\"netdev_index\",\"gids\":[...]}]}]}: names as\n"
	  "              rdma -j uses them, the others as in <linux/krdma.h>;\n"
	  "              GUIDs, GIDs, fw and enum values (active_speed...) as\n"
	  "              strings, the same as in the text output\n"
	  "  -h, --help  show this help\n" },
	{ "status", status_main,
	  "show what krdma holds: connections, buffers, users, parameters",
	  "[-j]\n"
	  "Show the loaded krdma: its parameters (the writable ones with the\n"
	  "range they take), the RDMA devices with their ports and IP\n"
	  "addresses, every connection (peer, state, owner, grants, operations\n"
	  "posted, done and failed and bytes moved by class, last error), every\n"
	  "registered buffer (owner, size, grants), what each user holds\n"
	  "against max_conns_per_user, max_bufs_per_user, max_grants_per_user,\n"
	  "max_queue_depth_per_user and max_window_pages_per_user, and totals\n"
	  "since the module was loaded. Connections, buffers and users come\n"
	  "from krdma's debugfs files (/sys/kernel/debug/krdma): they need root\n"
	  "and a mounted debugfs.\n"
	  "\n"
	  "  -j, --json  print JSON: {\"module\",\"parameters\":{NAME:{\"value\",\n"
	  "              \"writable\",\"min\",\"max\"}},\"devices\":[as dev -j],\n"
	  "              \"debugfs\",\"connections\":[{\"id\",\"state\",\"peer\",\n"
	  "              \"owner\":{...},\"ops\":{\"write\":{\"posted\",\"done\",\n"
	  "              \"failed\",\"bytes\"},...},\"last_error\",...}],\n"
	  "              \"buffers\":[...],\"users\":[...],\"totals\":{...}}\n"
	  "  -h, --help  show this help\n"
	  "\n"
	  "Exit status: 0, or 1 when krdma is not loaded. What cannot be read\n"
	  "(debugfs without root) is said on stderr, and null in JSON.\n" },
	{ "stat", stat_main,
	  "operation counters of krdma, its devices and connections; rates",
	  "[-i SECONDS [-c COUNT]] [-j]\n"
	  "Show the operation counters of krdma's debugfs files: per class\n"
	  "(write, read, send, recv, atomic) the operations done and the bytes\n"
	  "moved, and the failed ones, for the module (since it was loaded),\n"
	  "for each RDMA device (the sum of its connections now) and for each\n"
	  "connection. With -i, a sample every SECONDS: the first in counts,\n"
	  "then each in rates per second since the one before (a connection\n"
	  "new since then: its counts, marked new). Needs root (debugfs).\n"
	  "\n"
	  "  -i, --interval SECONDS  a sample every SECONDS (0.01 to 3600;\n"
	  "                          fractions too; or with a unit: 500ms,\n"
	  "                          2s), until interrupted\n"
	  "  -c, --count COUNT       with -i: stop after COUNT samples\n"
	  "  -j, --json              one JSON object a sample, one a line:\n"
	  "                          {\"time\",\"interval\",\"totals\":{\"ops\",\n"
	  "                          \"rates\"},\"devices\":[{\"ifname\",\n"
	  "                          \"connections\",\"ops\",\"rates\"}],\n"
	  "                          \"connections\":[{\"id\",\"ifname\",\"state\",\n"
	  "                          \"ops\",\"rates\"}]}; rates null in counts\n"
	  "  -h, --help              show this help\n"
	  "\n"
	  "Exit status: 0, 1 when the counters cannot be read, 2 bad usage.\n" },
	{ "monitor", monitor_main,
	  "print events as they happen: devices, ports, connections",
	  "[-c COUNT] [-t SECONDS] [-j]\n"
	  "Watch krdma and print a line for each event, with the local time:\n"
	  "  dev_add, dev_remove   an RDMA device came or went\n"
	  "  port_state            a port's state changed (OLD -> NEW)\n"
	  "  conn_up               a connection appeared\n"
	  "  conn_state            a connection's state or error changed\n"
	  "  conn_down             a connection is gone (was STATE)\n"
	  "It reads the devices (/dev/krdma) and the connections (debugfs:\n"
	  "root) every 200 ms and compares: a change that comes and goes\n"
	  "within that time is not seen. With only one of them readable, it\n"
	  "watches that one and warns.\n"
	  "\n"
	  "  -c, --count COUNT    exit after COUNT events\n"
	  "  -t, --timeout SECS   exit after SECS seconds (fractions too; or\n"
	  "                       with a unit: 500ms, 2s)\n"
	  "  -j, --json           one JSON object an event, one a line:\n"
	  "                       {\"time\",\"event\",\"ifname\",\"port\",\"id\",\n"
	  "                       \"peer\",\"state\",\"old_state\",\"error\"}\n"
	  "  -h, --help           show this help\n"
	  "\n"
	  "Runs until interrupted, COUNT events or SECS seconds. Exit status:\n"
	  "0, 1 when neither devices nor connections can be read, 2 bad usage.\n" },
	{ "set", set_main,
	  "set krdma's writable parameters (limits, timeouts)",
	  "NAME=VALUE...\n"
	  "Set parameters of the loaded krdma (/sys/module/krdma/parameters):\n"
	  "  ack_timeout=N         IB/RoCE ACK timeout exponent, 0..31\n"
	  "                        (4.096 us * 2^N, for new connections)\n"
	  "  max_conns_per_user=N  connections one user may hold through\n"
	  "                        /dev/krdma, 1..1048576\n"
	  "  max_bufs_per_user=N   buffers one user may hold, 1..1048576\n"
	  "  max_grants_per_user=N grants one user may hold, 1..1048576\n"
	  "  max_backlog_per_user=N  connections one user's listeners may\n"
	  "                        queue before they are accepted (the sum of\n"
	  "                        their backlogs), 1..1048576\n"
	  "  max_queue_depth_per_user=N  queue entries one user's connections\n"
	  "                        and listeners may hold: sq_depth + rq_depth\n"
	  "                        of each connection, backlog times that of\n"
	  "                        each listener, 1..67108864\n"
	  "  max_window_pages_per_user=N  pages of the windows of one user's\n"
	  "                        buffers: each grant's, and the local window\n"
	  "                        of a SEND or RECV too large for the SGEs\n"
	  "                        (also a grant), 1..2147483648\n"
	  "Every NAME=VALUE is checked (a known, writable parameter; a whole\n"
	  "number in its range) before any is written; prints OLD -> NEW for each.\n"
	  "A user over a limit gets EMFILE until it holds fewer objects; root\n"
	  "(CAP_SYS_RESOURCE) is not limited. Values last until krdma is\n"
	  "unloaded: for a lasting one, an options line in /etc/modprobe.d/.\n"
	  "\n"
	  "  -h, --help  show this help\n"
	  "\n"
	  "Exit status: 0 when every value was written, 1 otherwise, 2 bad usage\n"
	  "(nothing written). Needs root.\n" },
	{ "serve", serve_main,
	  "answer ping and xfer clients: a verified RDMA window for each",
	  "[-a ADDR] [-p PORT] [-c COUNT] [-1]\n"
	  "Listen for `krdmactl ping` and `krdmactl xfer` clients and answer\n"
	  "them, one client at a time: register a buffer as large as the client\n"
	  "asks for (up to 1 GiB), grant it RDMA READ and WRITE access, and check\n"
	  "every pattern the client writes into it. Prints the address it listens\n"
	  "on, then one line per client. The protocol is described at the top of\n"
	  "userspace-tools/krdmactl_ping.c.\n"
	  "\n"
	  "  -a, --addr ADDR    listen on ADDR only (default 0.0.0.0: every\n"
	  "                     IPv4 address; :: for IPv6)\n"
	  "  -p, --port PORT    port (default 18515; 0 picks a free one)\n"
	  "  -c, --count COUNT  exit after COUNT clients (a connection lost\n"
	  "                     before the client's first message does not count);\n"
	  "                     -n COUNT, its older spelling, is the same\n"
	  "  -1, --once         exit after one client (-c 1)\n"
	  "  -h, --help         show this help\n"
	  "\n"
	  "Runs until interrupted (SIGINT, SIGTERM) or COUNT clients are served.\n"
	  "Exit status: 0 when every client ended cleanly with every WRITE\n"
	  "verified, 1 otherwise, 2 bad usage.\n" },
	{ "ping", ping_main,
	  "rping-like: latency of RDMA WRITE, SEND/RECV, READ, verified",
	  "ADDR [-p PORT] [-c COUNT] [-s SIZE] [-i INTERVAL_MS] [-t TIMEOUT_MS] [-j]\n"
	  "Connect to `krdmactl serve` at ADDR and, like rping, each round: RDMA\n"
	  "WRITE SIZE bytes of a fresh pattern into the server's window; SEND a\n"
	  "request and RECV the answer once the server has checked the bytes and\n"
	  "written a new pattern; RDMA READ that back and check it. Prints the\n"
	  "latency of the WRITE, of the SEND/RECV round trip (it includes the\n"
	  "server's check) and of the READ in microseconds, then min/avg/max.\n"
	  "\n"
	  "  -p, --port PORT          the server's port (default 18515)\n"
	  "  -c, --count COUNT        rounds (default 5; 0: until interrupted)\n"
	  "  -s, --size SIZE          bytes per round (default 64; K, M, G:\n"
	  "                           binary multiples; at most 1G)\n"
	  "  -i, --interval MS        pause between rounds (default 1000)\n"
	  "  -t, --timeout MS         limit of the connect, and of each wait for\n"
	  "                           a completion (default 10000)\n"
	  "  -j, --json               print JSON: {\"rounds\":[{\"round\",\n"
	  "                           \"write_us\",\"send_rtt_us\",\"read_us\",\n"
	  "                           \"verified\"}],\"verified\",\"write_us\":\n"
	  "                           {\"min\",\"avg\",\"max\"},...,\"ok\",\"error\"}\n"
	  "  -h, --help               show this help\n"
	  "\n"
	  "MS is milliseconds, or a number with a unit: 500ms, 2s.\n"
	  "Exit status: 0 when every round ran and was verified both ways, 1\n"
	  "otherwise, 2 bad usage.\n" },
	{ "xfer", xfer_main,
	  "throughput of one large RDMA WRITE and READ, verified",
	  "ADDR [-p PORT] [-s SIZE] [-t TIMEOUT_MS] [-j]\n"
	  "Connect to `krdmactl serve` at ADDR, move SIZE bytes of a pattern into\n"
	  "the server's window with one RDMA WRITE (the server checks them and\n"
	  "writes a new pattern) and back with one RDMA READ (checked here), and\n"
	  "print the bytes, time and throughput (MB/s, 10^6 bytes a second) of\n"
	  "each. krdma splits each operation as the device needs.\n"
	  "\n"
	  "  -p, --port PORT          the server's port (default 18515)\n"
	  "  -s, --size SIZE          bytes (default 16M; K, M, G: binary\n"
	  "                           multiples; at most 1G)\n"
	  "  -t, --timeout MS         limit of the connect, and of each wait for\n"
	  "                           a completion (default 60000; milliseconds,\n"
	  "                           or with a unit: 500ms, 2s)\n"
	  "  -j, --json               print JSON: {\"bytes\",\"write\":{\"seconds\",\n"
	  "                           \"mb_per_s\",\"verified\"},\"read\":{...},\n"
	  "                           \"ok\",\"error\"}\n"
	  "  -h, --help               show this help\n"
	  "\n"
	  "Exit status: 0 when both ways were verified, 1 otherwise, 2 bad usage.\n" },
	{ "bench", bench_main,
	  "benchmark RDMA WRITE, READ, SEND and WRITE latency over sizes",
	  "-l [-a ADDR] [-p PORT] [-c COUNT] [-S MAXSIZE] [-R] [-Y]\n"
	  "       krdmactl bench ADDR [-p PORT] [-o OPS] [-s SIZES] [-d DEPTH]\n"
	  "                [-b BATCH] [-n ITERS] [-m MIN_ITERS] [-B BYTES] [-t MS]\n"
	  "                [-R] [-Y] [-u N] [-j]\n"
	  "With -l, serve bench clients (one at a time). Otherwise connect to\n"
	  "`krdmactl bench -l` at ADDR and, for each operation and size, keep\n"
	  "DEPTH operations in flight, submitted BATCH per call, completions\n"
	  "busy-polled; print bandwidth, message rate, the latency of each\n"
	  "operation (median, p99, p99.9: submit to completion; \"lat\": half a\n"
	  "WRITE ping-pong round, as ib_write_lat) and the client's CPU time\n"
	  "(user + system) per GB. The protocol is described at the top of\n"
	  "userspace-tools/krdmactl_bench.c.\n"
	  "\n"
	  "  -l, --listen         be the server\n"
	  "  -a, --addr ADDR      server: listen on ADDR (default 0.0.0.0)\n"
	  "  -c, --count COUNT    server: exit after COUNT clients\n"
	  "  -S, --max-size SIZE  server: largest size it takes (default 8M)\n"
	  "  -p, --port PORT      port (default 18516)\n"
	  "  -o, --ops OPS        comma-separated: write,read,send,lat (default\n"
	  "                       all of them); or conn alone: ITERS connections\n"
	  "                       one after the other, each timed from the\n"
	  "                       connect call to its return (resolution, QP,\n"
	  "                       CM exchange) and its close (the server must\n"
	  "                       be started with -c ITERS); or scale alone:\n"
	  "                       ITERS connections to a listener of its own\n"
	  "                       on ADDR:PORT (no server), kept open together:\n"
	  "                       the time to set them all up, the kernel's\n"
	  "                       Slab and VmallocUsed growth per connection\n"
	  "                       (both ends) and the time to close them all\n"
	  "                       (ITERS: default 1000)\n"
	  "  -s, --sizes SIZES    \"64,4K,1M\", or \"MIN-MAX\": powers of 4 from\n"
	  "                       MIN, and MAX (default 64-8M)\n"
	  "  -d, --depth DEPTH    operations in flight (default 64, at most 128)\n"
	  "  -b, --batch BATCH    operations per submit (default 16, at most 64)\n"
	  "  -n, --iters ITERS    most iterations per size (default 10000)\n"
	  "  -m, --min-iters N    fewest iterations per size (default 100)\n"
	  "  -B, --bytes BYTES    bytes per size: iterations = BYTES / size,\n"
	  "                       within [N, ITERS], rounded up to a multiple\n"
	  "                       of BATCH but for lat (default 256M)\n"
	  "  -t, --timeout MS     longest wait without progress (default 10000;\n"
	  "                       milliseconds, or with a unit: 500ms, 2s)\n"
	  "  -R, --ring           take completions from the completion queue\n"
	  "                       mapped into the process, with no system call\n"
	  "                       (module feature \"ring\"), not by POLL; either\n"
	  "                       side, each for itself\n"
	  "  -Y, --yield          sched_yield() between polls that found\n"
	  "                       nothing, and while waiting for a ping-pong\n"
	  "                       byte: a soft device's kernel thread on this\n"
	  "                       CPU (siw; rxe on 6.12) gets to run; either\n"
	  "                       side, each for itself\n"
	  "  -u, --signal-every N one WRITE or SEND in N asks for a completion,\n"
	  "                       the others are unsignaled (as perftest's\n"
	  "                       cq_mod; module feature \"unsignaled\"); READs\n"
	  "                       stay signaled (default 1, at most DEPTH)\n"
	  "  -j, --json           print JSON: {\"ifname\",\"transport\",\"date\",\n"
	  "                       \"kernel\",\"machine\",\"results\":[{\"op\",\"size\",\n"
	  "                       \"iters\",\"mb_per_s\",\"mmsg_per_s\",\"lat_us\":\n"
	  "                       {\"median\",\"p99\",\"p99_9\"},\"cpu\":{\"s_per_gb\"}}],\n"
	  "                       \"ok\",\"error\"}; for scale the result has\n"
	  "                       \"setup_s\",\"conns_per_s\",\"connect_us\",\n"
	  "                       \"accept_us\",\"teardown_s\",\n"
	  "                       \"teardown_us_per_conn\",\"kb_per_conn\":\n"
	  "                       {\"slab\",\"vmalloc\"},\"kb_left\" (after)\n"
	  "  -h, --help           show this help\n"
	  "\n"
	  "SENDs larger than 1 MiB are skipped (krdma's limit). MB is 10^6 bytes.\n"
	  "Exit status: 0 when every run completed, 1 otherwise, 2 bad usage.\n" },
	{ "blk", blk_main,
	  "remote block devices of krdma_blk: attach, detach, list",
	  "[list] [-j]\n"
	  "       krdmactl blk attach ADDR [PORT] [queues N] [depth D] [-j]\n"
	  "       krdmactl blk detach DEV\n"
	  "Attach the disk of krdma_blk_server at ADDR (an IPv4 address, or a\n"
	  "host name with one) as /dev/krdmablkN, detach DEV (krdmablkN, N or\n"
	  "/dev/krdmablkN), or list the attached devices (the default): name,\n"
	  "state, size, server, queues and depth. Through the sysfs files of\n"
	  "the krdma_blk module, /sys/kernel/krdma_blk. attach makes N\n"
	  "connections, one per hardware queue (default: one per CPU, at most\n"
	  "4), each with D requests in flight (default 64), and prints the\n"
	  "device it made. A device is \"live\", or \"failed\" once a connection\n"
	  "failed: its requests then fail at once (detach it, attach again).\n"
	  "detach works also on a device in use: open handles get I/O errors.\n"
	  "attach and detach are taken by their whole name only.\n"
	  "\n"
	  "  -p, --port PORT   attach: the server's port (default 7740), as PORT\n"
	  "  -q, --queues N    attach: connections, one per hardware queue, as\n"
	  "                    queues N\n"
	  "  -d, --depth D     attach: requests in flight per queue, 1 to 256, as\n"
	  "                    depth D\n"
	  "  -j, --json        list, attach: print JSON: {\"blockdevices\":[{\"name\",\n"
	  "                    \"path\",\"peer\",\"size\",\"queues\",\"depth\",\n"
	  "                    \"state\"}]}, for attach the device it made\n"
	  "  -h, --help        show this help\n"
	  "\n"
	  "Exit status: 0 done, 1 failed (krdma_blk not loaded, the server not\n"
	  "there, no such device), 2 bad usage. attach and detach need root.\n" },
	{ "up", up_main,
	  "load krdma and create a soft RDMA device (rxe or siw) on a netdev",
	  "[--rxe|--siw] [--name NAME] [--module PATH] [NETDEV]\n"
	  "Make this host ready for krdma: load krdma (modprobe krdma, else\n"
	  "insmod of --module PATH or of ../krdma.ko next to krdmactl), load\n"
	  "the soft driver (rdma_rxe or siw) and create a soft RDMA device on\n"
	  "NETDEV (default: the network device of the default route) over the\n"
	  "kernel's RDMA netlink interface, as `rdma link add` does. Idempotent:\n"
	  "when a device of that type (and NAME) is already on NETDEV it only\n"
	  "reports it; a device of the other type does not count (rxe and siw\n"
	  "on one netdev are fine). With RDMA hardware present and neither\n"
	  "NETDEV nor --rxe/--siw given, it only checks and reports. What it\n"
	  "creates and loads is recorded in /run/krdma/up.state\n"
	  "($KRDMA_STATE_DIR) for `krdmactl down`.\n"
	  "\n"
	  "  --rxe              soft-RoCE (rdma_rxe; the default)\n"
	  "  --siw              soft-iWARP (siw; insmod of $KRDMA_SIW_KO or of\n"
	  "                     ../build/siw-$(uname -r)/siw.ko if modprobe fails)\n"
	  "                     (one of --rxe and --siw: run up twice for both)\n"
	  "  -n, --name NAME    device name (default: the first free rxeN/siwN);\n"
	  "                     a NAME taken by another type or netdev is refused;\n"
	  "                     without --rxe/--siw, an existing NAME's type\n"
	  "  -m, --module PATH  krdma.ko to insmod when modprobe krdma fails\n"
	  "  -h, --help         show this help\n"
	  "\n"
	  "Exit status: 0 when the device is there (created or found), 1 if not,\n"
	  "2 bad usage (--rxe with --siw, a NAME taken). Needs root: as another\n"
	  "user it says so before it tries anything.\n" },
	{ "down", down_main,
	  "undo `krdmactl up`: delete the devices it created, unload its modules",
	  "\n"
	  "Delete exactly the RDMA devices `krdmactl up` created and unload the\n"
	  "modules it loaded, newest first, as recorded in /run/krdma/up.state;\n"
	  "nothing else. A driver module still used by another soft device is\n"
	  "kept. Without a record it does nothing. Needs root when there is a\n"
	  "record.\n"
	  "\n"
	  "  -h, --help  show this help\n"
	  "\n"
	  "Exit status: 0 when everything recorded was undone, 1 otherwise.\n" },
	{ "doctor", doctor_main,
	  "check this host for krdma: module, devices, ports, GIDs, MTU, limits",
	  "[-j] [-d DEVNAME] [-p PORT] [-t TIMEOUT_MS] [ADDR]\n"
	  "Check what krdma needs, one line each, with the fix for a failure:\n"
	  "  module    krdma loaded, its ABI matches krdmactl\n"
	  "  devices   RDMA devices present (only DEVNAME with -d)\n"
	  "  ports     every port ACTIVE\n"
	  "  gids      a GID for every IP address of the RDMA netdevs; no\n"
	  "            link-local-only ports\n"
	  "  mtu       the RDMA MTU fits the netdev MTU and is at least 1024\n"
	  "  memlock   ulimit -l large enough, or CAP_IPC_LOCK\n"
	  "  netns     the network namespace and rdma system netns mode\n"
	  "  firewall  no nftables/iptables rule drops UDP 4791 (RoCE v2)\n"
	  "  reach     with ADDR: connect to ADDR:PORT over krdma (refused\n"
	  "            means reachable, but nobody listens); when it fails,\n"
	  "            ip route get and ip neigh tell whether no host answers\n"
	  "            on the link or a gateway is in the way\n"
	  "\n"
	  "  -j, --json            print JSON: {\"checks\":[{\"name\",\"status\":\n"
	  "                        \"ok\"|\"fail\"|\"skip\",\"verdict\",\"fix\"}],\n"
	  "                        \"failed\",\"ok\"}\n"
	  "  -d, --dev DEVNAME     check only that RDMA device\n"
	  "  -p, --port PORT       port for ADDR (default 18515)\n"
	  "  -t, --timeout MS      limit of the connect to ADDR (default 3000;\n"
	  "                        milliseconds, or with a unit: 500ms, 2s)\n"
	  "  -h, --help            show this help\n"
	  "\n"
	  "Exit status: 0 when every check passed (or was skipped), 1 otherwise,\n"
	  "2 bad usage.\n" },
	{ "explain", explain_main,
	  "explain completion statuses and errnos: meaning and likely cause",
	  "[-j] [STATUS|ERRNO|NUMBER...]\n"
	  "Explain completion statuses and errnos in plain words, with their\n"
	  "likely cause; without arguments, every one. Takes what a log shows:\n"
	  "  a status name     RETRY_EXC_ERR, also with IBV_WC_, IB_WC_, WC_ or\n"
	  "                    KRDMA_WC_ before it (WC_12: a status number), or\n"
	  "                    libibverbs' text (\"transport retry counter\n"
	  "                    exceeded\", as ibv_wc_status_str() gives it)\n"
	  "  an errno name     ETIMEDOUT or -ETIMEDOUT, or its text (\"Connection\n"
	  "                    timed out\")\n"
	  "  a number          110 (an errno, as status and debugfs print it),\n"
	  "                    -110 (a -errno return value), 12 (a status); also\n"
	  "                    after error or err (\"error -110\"), and after\n"
	  "                    errno as an errno only (\"errno 12\")\n"
	  "Names and texts in any case, quoted or not. A number that is both a\n"
	  "completion status and an errno (12: RETRY_EXC_ERR and ENOMEM) gets\n"
	  "both explanations. The same table ping, xfer and doctor use.\n"
	  "\n"
	  "  -j, --json  print JSON: {\"explanations\":[{\"kind\":\"status\"|\n"
	  "              \"errno\",\"name\",\"value\",...}]}\n"
	  "  -h, --help  show this help\n"
	  "\n"
	  "Exit status: 0, or 1 when an argument is unknown.\n" },
	{ "help", help_main,
	  "show this help, or the help of a command",
	  "[COMMAND]\n"
	  "Show the list of commands, or the help of COMMAND.\n" },
};

static void print_usage(FILE *f)
{
	size_t i;

	fprintf(f, "Usage: %s [-j] [-p] COMMAND [ARGS...]\n", prog);
	fprintf(f, "       %s COMMAND --help\n", prog);
	fprintf(f, "COMMAND may be a prefix of its name, the first below (d: dev);\n");
	fprintf(f, "set, up and down (and blk attach, blk detach) are taken by their\n");
	fprintf(f, "whole name only.\n");
	fprintf(f, "ADDR, where a command takes one, is an IP address or a host name.\n");
	fprintf(f, "Inspect and control krdma, the in-kernel RDMA transport (%s).\n\n",
		KRDMA_DEV_PATH);
	fprintf(f, "Commands:\n");
	for (i = 0; i < ARRAY_SIZE(subcommands); i++)
		fprintf(f, "  %-9s %s\n", subcommands[i].name,
			subcommands[i].help);
	fprintf(f, "\nOptions before COMMAND:\n");
	fprintf(f, "  -j, --json     print JSON, as the command's -j does; on failure,\n");
	fprintf(f, "                 {\"error\":{\"errno\",\"name\",\"message\",\"hint\"}}\n");
	fprintf(f, "  -p, --pretty   indent the JSON (-jp: both)\n");
	fprintf(f, "  -V, --version  show krdmactl's version\n");
	fprintf(f, "  -h, --help     show this help\n");
	fprintf(f, "\nExit status: 0 done, 1 failed, 2 bad usage.\n");
}

void print_usage_of(const char *name, FILE *f)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(subcommands); i++) {
		if (strcmp(name, subcommands[i].name))
			continue;
		fprintf(f, "Usage: %s %s %s", prog, subcommands[i].name,
			subcommands[i].usage);
		return;
	}
	print_usage(f);
}

/* set, up and down change the system: never run by an abbreviation */
static bool whole_name_only(const char *name)
{
	return !strcmp(name, "set") || !strcmp(name, "up") ||
	       !strcmp(name, "down");
}

/*
 * The subcommand @word names, as iproute2 takes them: its whole name, or
 * a prefix of it, the first command of the table that starts with it
 * (krdmactl d: dev). Says why not on stderr: unknown, or a prefix of
 * commands taken by their whole name only. Returns its index, or -1.
 */
static int find_command(const char *word)
{
	size_t i, len = strlen(word);
	const char *whole = NULL;

	for (i = 0; i < ARRAY_SIZE(subcommands); i++)
		if (!strcmp(word, subcommands[i].name))
			return i;
	for (i = 0; len && i < ARRAY_SIZE(subcommands); i++) {
		if (strncmp(word, subcommands[i].name, len))
			continue;
		if (!whole_name_only(subcommands[i].name))
			return i;
		whole = whole ?: subcommands[i].name;
	}
	if (whole)
		errmsg_advice(0, "type the command's whole name",
			      "'%s' would be %s, which changes the system: it is taken by its whole name only",
			      word, whole);
	else
		errmsg("unknown command '%s'", word);
	return -1;
}

static int help_main(int argc, char *argv[])
{
	int c;

	if (argc > 2) {
		errmsg("help: unexpected argument '%s'", argv[2]);
		print_usage_of("help", stderr);
		return EXIT_USAGE;
	}
	if (argc == 2 && strcmp(argv[1], "-h") && strcmp(argv[1], "--help")) {
		c = find_command(argv[1]);
		if (c < 0) {
			print_usage(stderr);
			return EXIT_USAGE;
		}
		print_usage_of(subcommands[c].name, stdout);
		return finish_stdout(0);
	}
	if (argc == 2)
		print_usage_of("help", stdout);
	else
		print_usage(stdout);
	return finish_stdout(0);
}

/*
 * The options before the command: -j/--json, -p/--pretty (JSON, indented),
 * bundled as -jp. Returns how many there are; the first word that is not
 * one of them is taken for the command.
 */
static int parse_global_opts(int argc, char *argv[])
{
	int a;

	for (a = 1; a < argc && argv[a][0] == '-' && argv[a][1]; a++) {
		const char *o = argv[a];

		if (!strcmp(o, "--json")) {
			json_output = true;
		} else if (!strcmp(o, "--pretty")) {
			json_pretty = true;
		} else if (o[1] != '-' && strspn(o + 1, "jp") == strlen(o + 1)) {
			json_output |= !!strchr(o, 'j');
			json_pretty |= !!strchr(o, 'p');
		} else {
			break;
		}
	}
	return a - 1;
}

/* Does command @name print JSON with -j? */
static bool has_json(const char *name)
{
	static const char *const cmds[] = {
		"version", "dev", "status", "stat", "monitor", "ping", "xfer",
		"bench", "blk", "doctor", "explain",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cmds); i++)
		if (!strcmp(name, cmds[i]))
			return true;
	return false;
}

int main(int argc, char *argv[])
{
	int nopts, c;

	nopts = parse_global_opts(argc, argv);
	argc -= nopts;
	argv += nopts;
	if (argc < 2) {
		if (json_output)
			errmsg("no command given");
		print_usage(stderr);
		return json_error_doc(EXIT_USAGE);
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		print_usage(stdout);
		return finish_stdout(0);
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("krdmactl %s (krdma ABI %u)\n", KRDMACTL_VERSION,
		       KRDMA_ABI_VERSION);
		return finish_stdout(0);
	}
	c = find_command(argv[1]);
	if (c < 0) {
		print_usage(stderr);
		return json_error_doc(EXIT_USAGE);
	}
	/* the command sees its whole name: in its messages and usage */
	argv[1] = (char *)subcommands[c].name;
	if (json_output && !has_json(argv[1])) {
		errmsg("%s has no JSON output (-j)", argv[1]);
		return json_error_doc(EXIT_USAGE);
	}
	return json_error_doc(subcommands[c].fn(argc - 1, argv + 1));
}
