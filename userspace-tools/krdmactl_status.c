// SPDX-License-Identifier: GPL-2.0
/*
 * krdmactl status and set: what krdma holds and did, and its tunables.
 *
 * status reads the module's debugfs files (/sys/kernel/debug/krdma/:
 * connections, buffers, users, stats; one object per line of key=value
 * pairs, see Documentation/ABI/testing/debugfs-krdma), its parameters
 * (/sys/module/krdma/parameters/) and the devices through /dev/krdma,
 * and prints them as text or JSON: the same data either way. set writes
 * the writable parameters, after checking name and value against the
 * ranges the module accepts (the module checks again).
 *
 * Environment, for tests: KRDMA_DEBUGFS (default /sys/kernel/debug/krdma)
 * and KRDMA_SYSFS_MODULE (default /sys/module/krdma).
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "libkrdma.h"
#include "krdmactl.h"

#define DEBUGFS_ROOT "/sys/kernel/debug"
#define DEBUGFS_MAGIC 0x64626720
#define VALUE_MAX 64
#define LOAD_HINT "load it: sudo modprobe krdma (or: sudo krdmactl up)"

/* The parameters krdmactl knows: what the module accepts for each */
static const struct tunable {
	const char *name;
	uint64_t min, max;
	bool writable;
	const char *help;
} tunables[] = {
	{ "ack_timeout", 0, 31, true,
	  "IB/RoCE ACK timeout exponent: 4.096 us * 2^N" },
	{ "max_backlog_per_user", 1, 1048576, true,
	  "connections one user's listeners may queue before accept" },
	{ "max_bufs_per_user", 1, 1048576, true,
	  "buffers one user may hold through /dev/krdma" },
	{ "max_conns_per_user", 1, 1048576, true,
	  "connections one user may hold through /dev/krdma" },
	{ "max_grants_per_user", 1, 1048576, true,
	  "grants one user may hold through /dev/krdma" },
	{ "max_queue_depth_per_user", 1, 67108864, true,
	  "queue entries one user's connections and listeners may hold" },
	{ "max_window_pages_per_user", 1, 2147483648, true,
	  "pages of the windows (grants, local windows) of a user's buffers" },
	{ "ucq_entries", 64, 1048576, false,
	  "completion queue entries of each open /dev/krdma (set at load)" },
};

static const char *const op_classes[] = {
	"write", "read", "send", "recv", "atomic",
};

static const char *const op_counters[] = {
	"posted", "done", "failed", "bytes",
};

static const struct tunable *find_tunable(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(tunables); i++)
		if (!strcmp(tunables[i].name, name))
			return &tunables[i];
	return NULL;
}

static const char *debugfs_dir(void)
{
	const char *s = getenv("KRDMA_DEBUGFS");

	return s && *s ? s : DEBUGFS_ROOT "/krdma";
}

static const char *module_dir(void)
{
	const char *s = getenv("KRDMA_SYSFS_MODULE");

	return s && *s ? s : "/sys/module/krdma";
}

/*
 * The debugfs files: one object per line, "key=value" pairs separated by
 * spaces; a value never has a space (in a name, space, '=', '\' and
 * non-ASCII bytes come as \ooo octal), "-" means none.
 */
struct kv {
	char *key;
	char *val;
};

struct kvline {
	char *buf;	/* the line; keys and values point into it */
	struct kv *kv;
	size_t n;
};

struct kvfile {
	struct kvline *lines;
	size_t n;
};

/* Undo the \ooo escapes of a value, in place */
static void unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
					(s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/* Split @line (taken over by @l) into its pairs */
static int parse_line(char *line, struct kvline *l)
{
	char *save, *tok, *eq;
	struct kv *kv;

	l->buf = line;
	l->kv = NULL;
	l->n = 0;
	for (tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		eq = strchr(tok, '=');
		if (!eq)
			continue;	/* not key=value: a format this tool does not know */
		kv = realloc(l->kv, (l->n + 1) * sizeof(*kv));
		if (!kv)
			return -ENOMEM;
		l->kv = kv;
		*eq = '\0';
		unescape(eq + 1);
		l->kv[l->n].key = tok;
		l->kv[l->n].val = eq + 1;
		l->n++;
	}
	return 0;
}

static void kvfile_free(struct kvfile *f)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		free(f->lines[i].buf);
		free(f->lines[i].kv);
	}
	free(f->lines);
	memset(f, 0, sizeof(*f));
}

/* Read @name of the debugfs directory; 0 or -errno */
static int kvfile_read(const char *name, struct kvfile *f)
{
	char path[4096], *line = NULL, *copy;
	struct kvline *lines;
	size_t cap = 0;
	int ret = 0;
	FILE *fp;

	memset(f, 0, sizeof(*f));
	snprintf(path, sizeof(path), "%s/%s", debugfs_dir(), name);
	fp = fopen(path, "re");
	if (!fp)
		return -errno;
	while (getline(&line, &cap, fp) > 0) {
		copy = strdup(line);
		lines = realloc(f->lines, (f->n + 1) * sizeof(*lines));
		if (!copy || !lines) {
			free(copy);
			if (lines)
				f->lines = lines;
			ret = -ENOMEM;
			break;
		}
		f->lines = lines;
		ret = parse_line(copy, &f->lines[f->n]);
		if (ret || !f->lines[f->n].n) {
			free(f->lines[f->n].kv);
			free(copy);
			if (ret)
				break;
			continue;
		}
		f->n++;
	}
	if (!ret && ferror(fp))
		ret = -EIO;
	free(line);
	fclose(fp);
	if (ret)
		kvfile_free(f);
	return ret;
}

/* The value of @key, NULL when absent or "-" (none) */
static const char *kv_get(const struct kvline *l, const char *key)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->kv[i].key, key))
			return strcmp(l->kv[i].val, "-") ? l->kv[i].val : NULL;
	return NULL;
}

/* A decimal number that fits 64 bits */
static bool is_number(const char *s)
{
	if (!s || !*s || strlen(s) > 19)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* The value of @key as a number; false when absent, none or not one */
static bool kv_num(const struct kvline *l, const char *key, uint64_t *out)
{
	const char *s = kv_get(l, key);

	if (!s)
		return false;
	errno = 0;
	*out = strtoull(s, NULL, 0);
	return !errno;
}

static uint64_t kv_u64(const struct kvline *l, const char *key)
{
	uint64_t v = 0;

	kv_num(l, key, &v);
	return v;
}

static const char *kv_str(const struct kvline *l, const char *key)
{
	const char *s = kv_get(l, key);

	return s ? s : "-";
}

/* A value as JSON: a number when it is one, null for none, else a string */
static void json_kv(struct json *j, const char *key, const char *val)
{
	if (!val)
		json_null(j, key);
	else if (is_number(val))
		json_u64(j, key, strtoull(val, NULL, 10));
	else
		json_str(j, key, val);
}

/*
 * Keys of @l as JSON members: @keys is NULL-terminated pairs of the JSON
 * name and the debugfs key (NULL: the same name)
 */
static void json_copy(struct json *j, const struct kvline *l,
		      const char *const *keys)
{
	for (; *keys; keys += 2)
		json_kv(j, keys[0], kv_get(l, keys[1] ?: keys[0]));
}

/* The value of a hexadecimal key ("0x7") as a JSON number */
static void json_num_kv(struct json *j, const char *key,
			const struct kvline *l, const char *lkey)
{
	uint64_t v;

	if (kv_num(l, lkey, &v))
		json_u64(j, key, v);
	else
		json_null(j, key);
}

static const char *user_name(uint64_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r((uid_t)uid, &pw, tmp, sizeof(tmp), &res) || !res) {
		snprintf(buf, len, "%" PRIu64, uid);
		return NULL;
	}
	snprintf(buf, len, "%s", res->pw_name);
	return buf;
}

/*
 * Owner of a connection or buffer: owner=user|kernel|none, uid, pid,
 * comm, module, caller
 */
static void text_owner(const struct kvline *l)
{
	const char *kind = kv_str(l, "owner");
	char name[64];

	if (!strcmp(kind, "user"))
		printf("user %s, uid %s, pid %s (%s)",
		       user_name(kv_u64(l, "uid"), name, sizeof(name)) ?: "?",
		       kv_str(l, "uid"), kv_str(l, "pid"), kv_str(l, "comm"));
	else if (!strcmp(kind, "kernel"))
		printf("kernel, module %s (%s), pid %s (%s)",
		       kv_str(l, "module"), kv_str(l, "caller"),
		       kv_str(l, "pid"), kv_str(l, "comm"));
	else
		printf("none (waiting to be accepted)");
}

static void json_owner(struct json *j, const struct kvline *l)
{
	char name[64];

	json_begin_object(j, "owner");
	json_kv(j, "kind", kv_get(l, "owner"));
	json_kv(j, "uid", kv_get(l, "uid"));
	if (kv_get(l, "uid") &&
	    user_name(kv_u64(l, "uid"), name, sizeof(name)))
		json_str(j, "user", name);
	else
		json_null(j, "user");
	json_kv(j, "pid", kv_get(l, "pid"));
	if (kv_get(l, "comm"))
		json_str(j, "comm", kv_get(l, "comm"));
	else
		json_null(j, "comm");
	json_kv(j, "module", kv_get(l, "module"));
	json_kv(j, "caller", kv_get(l, "caller"));
	json_end_object(j);
}

static void text_ops(const struct kvline *l)
{
	char key[32];
	size_t i, k;

	printf("      %-8s %12s %12s %12s %16s\n", "ops", "posted", "done",
	       "failed", "bytes");
	for (i = 0; i < ARRAY_SIZE(op_classes); i++) {
		printf("      %-8s", op_classes[i]);
		for (k = 0; k < ARRAY_SIZE(op_counters); k++) {
			snprintf(key, sizeof(key), "%s_%s", op_classes[i],
				 op_counters[k]);
			printf(" %*s", k == 3 ? 16 : 12, kv_str(l, key));
		}
		putchar('\n');
	}
}

static void json_ops(struct json *j, const struct kvline *l)
{
	char key[32];
	size_t i, k;

	json_begin_object(j, "ops");
	for (i = 0; i < ARRAY_SIZE(op_classes); i++) {
		json_begin_object(j, op_classes[i]);
		for (k = 0; k < ARRAY_SIZE(op_counters); k++) {
			snprintf(key, sizeof(key), "%s_%s", op_classes[i],
				 op_counters[k]);
			json_kv(j, op_counters[k], kv_get(l, key));
		}
		json_end_object(j);
	}
	json_end_object(j);
}

/* krdma_conn_query.error and the debugfs error are positive errnos */
static const char *errno_name(uint64_t err)
{
	const char *s = err ? strerrorname_np((int)err) : NULL;

	return s ? s : "-";
}

static void text_conn(const struct kvline *l)
{
	uint64_t err = kv_u64(l, "error"), status;

	printf("  conn %s: %s", kv_str(l, "id"), kv_str(l, "state"));
	if (err)
		printf(" (%s: %s)", errno_name(err), strerror((int)err));
	printf(", %s port %s, %s -> %s, qp %s -> %s%s\n", kv_str(l, "dev"),
	       kv_str(l, "port"), kv_str(l, "local"), kv_str(l, "peer"),
	       kv_str(l, "qp"), kv_str(l, "peer_qp"),
	       kv_u64(l, "passive") ? ", passive" : "");
	printf("    owner:  ");
	text_owner(l);
	printf("\n    grants: %s, queues: sq %s, rq %s\n", kv_str(l, "grants"),
	       kv_str(l, "sq_depth"), kv_str(l, "rq_depth"));
	text_ops(l);
	if (kv_num(l, "last_status", &status))
		printf("    last error: %s (%s) on %s, vendor error %s\n",
		       krdma_wc_status_str((uint32_t)status),
		       kv_str(l, "last_status"),
		       krdma_opcode_str((uint32_t)kv_u64(l, "last_op")),
		       kv_str(l, "last_vendor_err"));
}

static void json_conn(struct json *j, const struct kvline *l)
{
	uint64_t err = kv_u64(l, "error"), status;

	json_begin_object(j, NULL);
	json_kv(j, "id", kv_get(l, "id"));
	json_kv(j, "state", kv_get(l, "state"));
	if (err)
		json_error(j, "error", (int)err, strerror((int)err),
			   krdma_strerror_hint(-(int)err));
	else
		json_null(j, "error");
	/* rdma's names: rdma -j link, rdma -j resource show qp */
	json_copy(j, l, (const char *const[]){ "ifname", "dev",
		  "ifindex", "dev_index", "port", NULL, "local", NULL,
		  "peer", NULL, "lqpn", "qp", "rqpn", "peer_qp",
		  "sq_depth", NULL, "rq_depth", NULL, NULL });
	json_bool(j, "passive", kv_u64(l, "passive"));
	json_kv(j, "grants", kv_get(l, "grants"));
	json_owner(j, l);
	json_ops(j, l);
	if (kv_num(l, "last_status", &status)) {
		json_begin_object(j, "last_error");
		json_str(j, "status", krdma_wc_status_str((uint32_t)status));
		json_u64(j, "status_code", status);
		json_str(j, "op",
			 krdma_opcode_str((uint32_t)kv_u64(l, "last_op")));
		json_num_kv(j, "vendor_err", l, "last_vendor_err");
		json_end_object(j);
	} else {
		json_null(j, "last_error");
	}
	json_end_object(j);
}

/* KRDMA_ACCESS_* bits, from bit 0 */
static const char *const access_names[] = {
	"LOCAL_WRITE", "REMOTE_READ", "REMOTE_WRITE", "REMOTE_ATOMIC",
};

/* KRDMA_ACCESS_* bits as "LOCAL_WRITE|REMOTE_READ", or "none" */
static const char *access_str(uint64_t access, char *buf, size_t len)
{
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(access_names); i++)
		if (access & (1ULL << i))
			off += snprintf(buf + off, len - off, "%s%s",
					off ? "|" : "", access_names[i]);
	if (!off)
		snprintf(buf, len, "none");
	return buf;
}

static void text_buf(const struct kvline *l)
{
	char acc[80];
	uint64_t grants = kv_u64(l, "grants");

	printf("  buf %s: %s bytes (%s page%s), %s, access %s, %" PRIu64
	       " grant%s%s\n", kv_str(l, "id"), kv_str(l, "size"),
	       kv_str(l, "pages"), kv_u64(l, "pages") == 1 ? "" : "s",
	       kv_str(l, "kind"),
	       access_str(kv_u64(l, "access"), acc, sizeof(acc)), grants,
	       grants == 1 ? "" : "s",
	       kv_u64(l, "dead") ? ", deregistered" : "");
	printf("    owner:  ");
	text_owner(l);
	putchar('\n');
}

static void json_buf(struct json *j, const struct kvline *l)
{
	uint64_t access = kv_u64(l, "access");
	size_t i;

	json_begin_object(j, NULL);
	json_copy(j, l, (const char *const[]){ "id", NULL, "kind", NULL,
		  "size", NULL, "pages", NULL, NULL });
	json_num_kv(j, "access", l, "access");
	json_begin_array(j, "access_names");
	for (i = 0; i < ARRAY_SIZE(access_names); i++)
		if (access & (1ULL << i))
			json_str(j, NULL, access_names[i]);
	json_end_array(j);
	json_kv(j, "grants", kv_get(l, "grants"));
	json_bool(j, "dead", kv_u64(l, "dead"));
	json_owner(j, l);
	json_end_object(j);
}

static void text_user(const struct kvline *l)
{
	char name[64];

	printf("  uid %s (%s): %s file%s, connections %s of %s, buffers %s of %s, grants %s of %s, queue entries %s of %s, window pages %s of %s\n",
	       kv_str(l, "uid"),
	       user_name(kv_u64(l, "uid"), name, sizeof(name)) ?: "?",
	       kv_str(l, "files"), kv_u64(l, "files") == 1 ? "" : "s",
	       kv_str(l, "conns"), kv_str(l, "max_conns"),
	       kv_str(l, "bufs"), kv_str(l, "max_bufs"),
	       kv_str(l, "grants"), kv_str(l, "max_grants"),
	       kv_str(l, "qdepth"), kv_str(l, "max_qdepth"),
	       kv_str(l, "wpages"), kv_str(l, "max_wpages"));
}

static void json_user(struct json *j, const struct kvline *l)
{
	char name[64];

	json_begin_object(j, NULL);
	json_kv(j, "uid", kv_get(l, "uid"));
	if (user_name(kv_u64(l, "uid"), name, sizeof(name)))
		json_str(j, "user", name);
	else
		json_null(j, "user");
	json_copy(j, l, (const char *const[]){ "files", NULL,
		  "connections", "conns", "buffers", "bufs",
		  "max_connections", "max_conns", "max_buffers", "max_bufs",
		  "grants", NULL, "max_grants", NULL,
		  "queue_entries", "qdepth", "max_queue_entries", "max_qdepth",
		  "window_pages", "wpages", "max_window_pages", "max_wpages",
		  NULL });
	json_end_object(j);
}

static void text_totals(const struct kvline *l)
{
	printf("  now: %s connections, %s buffers, %s users with an open file\n",
	       kv_str(l, "conns"), kv_str(l, "bufs"), kv_str(l, "users"));
	printf("  since load: %s connections and %s buffers made; refused by the limits: %s connections, %s buffers, %s grants, %s for queue entries, %s for window pages\n",
	       kv_str(l, "conns_created"), kv_str(l, "bufs_created"),
	       kv_str(l, "conn_limit_refused"), kv_str(l, "buf_limit_refused"),
	       kv_str(l, "grant_limit_refused"),
	       kv_str(l, "qdepth_limit_refused"),
	       kv_str(l, "wpages_limit_refused"));
	text_ops(l);
}

static void json_totals(struct json *j, const struct kvline *l)
{
	json_begin_object(j, "totals");
	json_copy(j, l, (const char *const[]){ "connections", "conns",
		  "buffers", "bufs", "users", NULL,
		  "connections_created", "conns_created",
		  "buffers_created", "bufs_created",
		  "connection_limit_refused", "conn_limit_refused",
		  "buffer_limit_refused", "buf_limit_refused",
		  "grant_limit_refused", NULL,
		  "queue_entry_limit_refused", "qdepth_limit_refused",
		  "window_page_limit_refused", "wpages_limit_refused", NULL });
	json_ops(j, l);
	json_end_object(j);
}

/* The module's parameters, by name */
struct param {
	char name[256];
	char value[VALUE_MAX];
	bool writable;
};

static int read_value(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int param_cmp(const void *a, const void *b)
{
	return strcmp(((const struct param *)a)->name,
		      ((const struct param *)b)->name);
}

/* Every parameter of the loaded module; -ENOENT when it is not loaded */
static int read_params(struct param **out, size_t *n)
{
	char dir[4096], path[4608];
	struct param *p = NULL, *tmp;
	struct dirent *de;
	struct stat st;
	DIR *d;

	*out = NULL;
	*n = 0;
	snprintf(dir, sizeof(dir), "%s/parameters", module_dir());
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		tmp = realloc(p, (*n + 1) * sizeof(*p));
		if (!tmp)
			break;
		p = tmp;
		memset(&p[*n], 0, sizeof(p[*n]));
		snprintf(p[*n].name, sizeof(p[*n].name), "%s", de->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (read_value(path, p[*n].value, sizeof(p[*n].value)))
			snprintf(p[*n].value, sizeof(p[*n].value), "?");
		p[*n].writable = !stat(path, &st) && (st.st_mode & S_IWUSR);
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(p, *n, sizeof(*p), param_cmp);
	*out = p;
	return 0;
}

static void text_params(const struct param *p, size_t n)
{
	const struct tunable *t;
	int width = 20;
	size_t i;

	/* The names in one column, as wide as the longest */
	for (i = 0; i < n; i++)
		if (strlen(p[i].name) > (size_t)width)
			width = (int)strlen(p[i].name);
	printf("Parameters (%s/parameters):\n", module_dir());
	for (i = 0; i < n; i++) {
		t = find_tunable(p[i].name);
		printf("  %-*s %-10s", width, p[i].name, p[i].value);
		if (t && p[i].writable)
			printf(" writable, %" PRIu64 "..%" PRIu64 ": %s\n",
			       t->min, t->max, t->help);
		else if (t)
			printf(" read-only: %s\n", t->help);
		else
			printf(" %s\n", p[i].writable ? "writable" : "read-only");
	}
}

static void json_params(struct json *j, const struct param *p, size_t n)
{
	const struct tunable *t;
	size_t i;

	json_begin_object(j, "parameters");
	for (i = 0; i < n; i++) {
		t = find_tunable(p[i].name);
		json_begin_object(j, p[i].name);
		json_kv(j, "value", p[i].value);
		json_bool(j, "writable", p[i].writable);
		if (t) {
			json_u64(j, "min", t->min);
			json_u64(j, "max", t->max);
		} else {
			json_null(j, "min");
			json_null(j, "max");
		}
		json_end_object(j);
	}
	json_end_object(j);
}

/*
 * One line per device, one per port: transport, state, MTU, netdev and the
 * GIDs as IP addresses (RoCE: the netdev's addresses)
 */
static void text_devices(const struct dev_info *devs, uint32_t ndevs)
{
	char ip[KRDMA_GID_IP_STR_LEN], prev[KRDMA_GID_IP_STR_LEN];
	uint32_t i, p, g;

	printf("Devices (%u):\n", ndevs);
	for (i = 0; i < ndevs; i++) {
		const struct krdma_dev_query *dq = &devs[i].dq;

		printf("  %s: %s, index %u\n", (const char *)dq->name,
		       krdma_transport_str(dq->transport), dq->dev_index);
		for (p = 0; p < dq->phys_port_cnt; p++) {
			const struct port_info *pi = &devs[i].ports[p];

			printf("    port %u: %s, mtu %u, netdev %s, GIDs:",
			       pi->pq.port_num,
			       krdma_port_state_str(pi->pq.state),
			       pi->pq.active_mtu,
			       pi->pq.netdev_name[0] ?
			       (const char *)pi->pq.netdev_name : "none");
			prev[0] = '\0';
			for (g = 0; g < pi->ngids; g++) {
				krdma_gid_ip_str(pi->gids[g].gid, ip);
				/* RoCE v1 and v2 GIDs repeat an address */
				if (!strcmp(ip, prev))
					continue;
				printf(" %s", ip);
				strcpy(prev, ip);
			}
			printf("%s\n", pi->ngids ? "" : " none");
		}
	}
}

/* Why debugfs cannot be read, and what to do */
static const char *debugfs_advice(int err)
{
	struct statfs sfs;

	if (err == -EACCES || err == -EPERM)
		return "reading it needs root: run krdmactl status as root (sudo)";
	if (err != -ENOENT)
		return NULL;
	if (statfs(DEBUGFS_ROOT, &sfs) || sfs.f_type != DEBUGFS_MAGIC)
		return "debugfs is not mounted: mount -t debugfs none " DEBUGFS_ROOT;
	return "the loaded krdma.ko has no debugfs files: it is older than krdmactl; compare with: krdmactl version";
}

struct status {
	bool have_module;
	struct krdma_query_module qm;
	int dev_err;
	bool open_failed;	/* dev_err is of opening /dev/krdma */
	struct dev_info *devs;
	uint32_t ndevs;
	struct param *params;
	size_t nparams;
	int dbg_err;
	struct kvfile conns, bufs, users, stats;
};

static void collect_status(struct status *s)
{
	int fd;

	s->dev_err = -ENODEV;
	fd = krdma_open();
	if (fd < 0) {
		s->dev_err = fd;
		s->open_failed = true;
	} else {
		s->dev_err = krdma_query_module(fd, &s->qm);
		s->have_module = !s->dev_err;
		if (!s->dev_err)
			s->dev_err = collect_devs(fd, NULL, &s->devs,
						  &s->ndevs);
		close(fd);
	}
	read_params(&s->params, &s->nparams);
	s->dbg_err = kvfile_read("connections", &s->conns);
	if (!s->dbg_err)
		s->dbg_err = kvfile_read("buffers", &s->bufs);
	if (!s->dbg_err)
		s->dbg_err = kvfile_read("users", &s->users);
	if (!s->dbg_err)
		s->dbg_err = kvfile_read("stats", &s->stats);
}

static void free_status(struct status *s)
{
	free_devs(s->devs, s->ndevs);
	free(s->params);
	kvfile_free(&s->conns);
	kvfile_free(&s->bufs);
	kvfile_free(&s->users);
	kvfile_free(&s->stats);
}

static void print_status_text(const struct status *s)
{
	size_t i;

	if (s->have_module)
		printf("krdma %u.%u.%u (ABI %u), %u RDMA device%s\n\n",
		       KRDMA_VERSION_MAJOR(s->qm.version),
		       KRDMA_VERSION_MINOR(s->qm.version),
		       KRDMA_VERSION_PATCH(s->qm.version), s->qm.abi_version,
		       s->qm.num_devices, s->qm.num_devices == 1 ? "" : "s");
	text_params(s->params, s->nparams);
	putchar('\n');
	if (!s->dev_err)
		text_devices(s->devs, s->ndevs);
	else
		printf("Devices: unknown (%s: %s)\n", KRDMA_DEV_PATH,
		       strerror(-s->dev_err));
	if (s->dbg_err) {
		printf("\nConnections, buffers, users: unknown (%s: %s)\n",
		       debugfs_dir(), strerror(-s->dbg_err));
		return;
	}
	printf("\nConnections (%zu):\n", s->conns.n);
	for (i = 0; i < s->conns.n; i++)
		text_conn(&s->conns.lines[i]);
	printf("\nBuffers (%zu):\n", s->bufs.n);
	for (i = 0; i < s->bufs.n; i++)
		text_buf(&s->bufs.lines[i]);
	printf("\nUsers (%zu):\n", s->users.n);
	for (i = 0; i < s->users.n; i++)
		text_user(&s->users.lines[i]);
	if (s->stats.n) {
		printf("\nTotals:\n");
		text_totals(&s->stats.lines[0]);
	}
}

static void print_status_json(const struct status *s)
{
	struct json j = { .f = stdout };
	char ver[32];
	size_t i;

	json_begin_object(&j, NULL);
	json_begin_object(&j, "module");
	json_bool(&j, "loaded", s->have_module || s->nparams);
	if (s->have_module) {
		snprintf(ver, sizeof(ver), "%u.%u.%u",
			 KRDMA_VERSION_MAJOR(s->qm.version),
			 KRDMA_VERSION_MINOR(s->qm.version),
			 KRDMA_VERSION_PATCH(s->qm.version));
		json_str(&j, "version", ver);
		json_u64(&j, "abi_version", s->qm.abi_version);
	} else {
		json_null(&j, "version");
		json_null(&j, "abi_version");
	}
	json_end_object(&j);
	json_params(&j, s->params, s->nparams);
	if (!s->dev_err) {
		json_begin_array(&j, "devices");
		for (i = 0; i < s->ndevs; i++)
			json_dev(&j, &s->devs[i]);
		json_end_array(&j);
	} else {
		json_null(&j, "devices");
	}
	json_begin_object(&j, "debugfs");
	json_str(&j, "path", debugfs_dir());
	json_bool(&j, "available", !s->dbg_err);
	if (s->dbg_err) {
		char msg[4200];

		snprintf(msg, sizeof(msg),
			 "cannot read the connections and buffers from %s: %s",
			 debugfs_dir(), strerror(-s->dbg_err));
		json_error(&j, "error", s->dbg_err, msg,
			   debugfs_advice(s->dbg_err));
	} else {
		json_null(&j, "error");
	}
	json_end_object(&j);
	if (s->dbg_err) {
		json_null(&j, "connections");
		json_null(&j, "buffers");
		json_null(&j, "users");
		json_null(&j, "totals");
		json_end_object(&j);
		return;
	}
	json_begin_array(&j, "connections");
	for (i = 0; i < s->conns.n; i++)
		json_conn(&j, &s->conns.lines[i]);
	json_end_array(&j);
	json_begin_array(&j, "buffers");
	for (i = 0; i < s->bufs.n; i++)
		json_buf(&j, &s->bufs.lines[i]);
	json_end_array(&j);
	json_begin_array(&j, "users");
	for (i = 0; i < s->users.n; i++)
		json_user(&j, &s->users.lines[i]);
	json_end_array(&j);
	if (s->stats.n)
		json_totals(&j, &s->stats.lines[0]);
	else
		json_null(&j, "totals");
	json_end_object(&j);
}

int status_main(int argc, char *argv[])
{
	struct status s = {};
	bool json = false;
	char hint[1100];
	int ret;

	switch (parse_json_opts(argc, argv, &json)) {
	case OPT_HELP:
		return finish_stdout(0);
	case OPT_BAD:
		return EXIT_USAGE;
	case OPT_OK:
		break;
	}
	if (optind < argc) {
		errmsg("status: unexpected argument '%s'", argv[optind]);
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}

	collect_status(&s);
	if (!s.have_module && !s.nparams) {
		free_status(&s);
		errmsg_advice(-ENOENT, LOAD_HINT, "krdma is not loaded (%s)",
			      module_dir());
		return 1;
	}
	if (json)
		print_status_json(&s);
	else
		print_status_text(&s);
	ret = finish_stdout(0);
	if (s.dev_err && s.dev_err != -ENODEV)
		errmsg_advice(s.dev_err, s.open_failed ?
			      open_hint(s.dev_err, hint, sizeof(hint)) :
			      krdma_strerror_hint(s.dev_err),
			      "cannot list the RDMA devices through %s",
			      KRDMA_DEV_PATH);
	if (s.dbg_err)
		errmsg_advice(s.dbg_err, debugfs_advice(s.dbg_err),
			      "cannot read the connections and buffers from %s",
			      debugfs_dir());
	free_status(&s);
	return ret;
}

/*
 * krdmactl stat [-i SECONDS] [-c COUNT] [-j]
 *
 * The operation counters of debugfs (connections, stats): the module's
 * totals, each device's (the sum of its connections now) and each
 * connection's; with -i, every SECONDS their rates since the last sample.
 */
#define NCLASS ARRAY_SIZE(op_classes)
#define NCTR ARRAY_SIZE(op_counters)

struct ctr {
	uint64_t v[NCLASS][NCTR];
};

struct stat_conn {
	uint64_t id;
	char dev[KRDMA_NAME_MAX];	/* "" : none */
	char state[32];
	struct ctr c;
};

struct stat_sample {
	double t;			/* CLOCK_MONOTONIC, seconds */
	double wall;			/* the epoch, seconds */
	bool have_totals;
	struct ctr totals;
	struct stat_conn *conns;
	size_t nconns;
};

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ctr_read(const struct kvline *l, struct ctr *c)
{
	char key[32];
	size_t i, k;

	for (i = 0; i < NCLASS; i++) {
		for (k = 0; k < NCTR; k++) {
			snprintf(key, sizeof(key), "%s_%s", op_classes[i],
				 op_counters[k]);
			c->v[i][k] = kv_u64(l, key);
		}
	}
}

static void ctr_add(struct ctr *sum, const struct ctr *c)
{
	size_t i, k;

	for (i = 0; i < NCLASS; i++)
		for (k = 0; k < NCTR; k++)
			sum->v[i][k] += c->v[i][k];
}

/* (@now - @then) per second of @dt; a counter that went back counts 0 */
static void ctr_rate(const struct ctr *now, const struct ctr *then,
		     double dt, double r[NCLASS][NCTR])
{
	size_t i, k;

	for (i = 0; i < NCLASS; i++)
		for (k = 0; k < NCTR; k++)
			r[i][k] = now->v[i][k] >= then->v[i][k] && dt > 0 ?
				  (now->v[i][k] - then->v[i][k]) / dt : 0;
}

static void stat_free(struct stat_sample *s)
{
	free(s->conns);
	memset(s, 0, sizeof(*s));
}

/* Read a sample from debugfs; 0 or -errno */
static int stat_read(struct stat_sample *s)
{
	struct kvfile conns, stats;
	size_t i;
	int ret;

	memset(s, 0, sizeof(*s));
	s->t = clock_s(CLOCK_MONOTONIC);
	s->wall = clock_s(CLOCK_REALTIME);
	ret = kvfile_read("connections", &conns);
	if (ret)
		return ret;
	ret = kvfile_read("stats", &stats);
	if (ret) {
		kvfile_free(&conns);
		return ret;
	}
	if (stats.n) {
		s->have_totals = true;
		ctr_read(&stats.lines[0], &s->totals);
	}
	s->conns = calloc(conns.n ? conns.n : 1, sizeof(*s->conns));
	if (!s->conns)
		ret = -ENOMEM;
	for (i = 0; !ret && i < conns.n; i++) {
		const struct kvline *l = &conns.lines[i];
		struct stat_conn *c = &s->conns[s->nconns++];
		const char *dev = kv_get(l, "dev");

		c->id = kv_u64(l, "id");
		snprintf(c->dev, sizeof(c->dev), "%s", dev ? dev : "");
		snprintf(c->state, sizeof(c->state), "%s",
			 kv_str(l, "state"));
		ctr_read(l, &c->c);
	}
	kvfile_free(&conns);
	kvfile_free(&stats);
	if (ret)
		stat_free(s);
	return ret;
}

static const struct stat_conn *stat_find(const struct stat_sample *s,
					 uint64_t id)
{
	size_t i;

	for (i = 0; s && i < s->nconns; i++)
		if (s->conns[i].id == id)
			return &s->conns[i];
	return NULL;
}

/*
 * The counters of device @dev (its connections now) into @c, and, with
 * @prev, into @d the part of them since then: of the connections that
 * were there then too. Returns how many connections it has.
 */
static unsigned int stat_dev(const struct stat_sample *s,
			     const struct stat_sample *prev, const char *dev,
			     struct ctr *c, struct ctr *now, struct ctr *then)
{
	const struct stat_conn *p;
	unsigned int n = 0;
	size_t i;

	memset(c, 0, sizeof(*c));
	memset(now, 0, sizeof(*now));
	memset(then, 0, sizeof(*then));
	for (i = 0; i < s->nconns; i++) {
		if (strcmp(s->conns[i].dev, dev))
			continue;
		n++;
		ctr_add(c, &s->conns[i].c);
		p = stat_find(prev, s->conns[i].id);
		if (p) {
			ctr_add(now, &s->conns[i].c);
			ctr_add(then, &p->c);
		}
	}
	return n;
}

/* The devices of the connections, each once, in their order */
static size_t stat_devs(const struct stat_sample *s, const char **out)
{
	size_t i, k, n = 0;

	for (i = 0; i < s->nconns; i++) {
		if (!s->conns[i].dev[0])
			continue;
		for (k = 0; k < n && strcmp(out[k], s->conns[i].dev); k++)
			;
		if (k == n)
			out[n++] = s->conns[i].dev;
	}
	return n;
}

static void text_ctr(const char *label, const struct ctr *c,
		     const double r[NCLASS][NCTR])
{
	uint64_t failed = 0;
	double rfailed = 0;
	size_t i;

	printf("%-28s", label);
	for (i = 0; i < NCLASS; i++) {
		if (r) {
			printf(" %s %.1f/s %.2f MB/s", op_classes[i], r[i][1],
			       r[i][3] / 1e6);
			rfailed += r[i][2];
		} else {
			printf(" %s %" PRIu64 " %" PRIu64 " B", op_classes[i],
			       c->v[i][1], c->v[i][3]);
			failed += c->v[i][2];
		}
	}
	if (r)
		printf(" failed %.1f/s\n", rfailed);
	else
		printf(" failed %" PRIu64 "\n", failed);
}

static void json_ctr(struct json *j, const struct ctr *c,
		     const double r[NCLASS][NCTR])
{
	size_t i, k;

	json_begin_object(j, "ops");
	for (i = 0; i < NCLASS; i++) {
		json_begin_object(j, op_classes[i]);
		for (k = 0; k < NCTR; k++)
			json_u64(j, op_counters[k], c->v[i][k]);
		json_end_object(j);
	}
	json_end_object(j);
	if (!r) {
		json_null(j, "rates");
		return;
	}
	json_begin_object(j, "rates");
	for (i = 0; i < NCLASS; i++) {
		json_begin_object(j, op_classes[i]);
		for (k = 0; k < NCTR; k++)
			json_double(j, op_counters[k], r[i][k], 3);
		json_end_object(j);
	}
	json_end_object(j);
}

/* One sample, as text or as one line of JSON; rates since @prev */
static void stat_print(const struct stat_sample *s,
		       const struct stat_sample *prev, bool json)
{
	struct json j = { .f = stdout };
	double r[NCLASS][NCTR], dt = prev ? s->t - prev->t : 0;
	const char **devs = calloc(s->nconns + 1, sizeof(*devs));
	struct ctr c, now, then;
	const struct stat_conn *p;
	char label[96];
	size_t i, ndevs;
	unsigned int n;

	if (!devs) {
		errmsg_err(-ENOMEM, "stat");
		return;
	}
	ndevs = stat_devs(s, devs);
	if (json) {
		json_begin_object(&j, NULL);
		json_double(&j, "time", s->wall, 3);
		if (prev)
			json_double(&j, "interval", dt, 3);
		else
			json_null(&j, "interval");
		if (s->have_totals) {
			json_begin_object(&j, "totals");
			if (prev && prev->have_totals)
				ctr_rate(&s->totals, &prev->totals, dt, r);
			json_ctr(&j, &s->totals,
				 prev && prev->have_totals ? r : NULL);
			json_end_object(&j);
		} else {
			json_null(&j, "totals");
		}
		json_begin_array(&j, "devices");
		for (i = 0; i < ndevs; i++) {
			n = stat_dev(s, prev, devs[i], &c, &now, &then);
			ctr_rate(&now, &then, dt, r);
			json_begin_object(&j, NULL);
			json_str(&j, "ifname", devs[i]);
			json_u64(&j, "connections", n);
			json_ctr(&j, &c, prev ? r : NULL);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_begin_array(&j, "connections");
		for (i = 0; i < s->nconns; i++) {
			p = stat_find(prev, s->conns[i].id);
			if (p)
				ctr_rate(&s->conns[i].c, &p->c, dt, r);
			json_begin_object(&j, NULL);
			json_u64(&j, "id", s->conns[i].id);
			if (s->conns[i].dev[0])
				json_str(&j, "ifname", s->conns[i].dev);
			else
				json_null(&j, "ifname");
			json_str(&j, "state", s->conns[i].state);
			json_ctr(&j, &s->conns[i].c, p ? r : NULL);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		free(devs);
		return;
	}

	if (prev)
		printf("per second, over %.2f s:\n", dt);
	else
		printf("counts (ops done, bytes) since krdma was loaded; a device's: of its connections now\n");
	if (s->have_totals) {
		if (prev && prev->have_totals)
			ctr_rate(&s->totals, &prev->totals, dt, r);
		text_ctr("total", &s->totals,
			 prev && prev->have_totals ? r : NULL);
	}
	for (i = 0; i < ndevs; i++) {
		n = stat_dev(s, prev, devs[i], &c, &now, &then);
		ctr_rate(&now, &then, dt, r);
		snprintf(label, sizeof(label), "dev %s (%u conn%s)", devs[i],
			 n, n == 1 ? "" : "s");
		text_ctr(label, &c, prev ? r : NULL);
	}
	for (i = 0; i < s->nconns; i++) {
		/* a connection new since then: its counts, not a rate */
		p = stat_find(prev, s->conns[i].id);
		if (p)
			ctr_rate(&s->conns[i].c, &p->c, dt, r);
		snprintf(label, sizeof(label), "conn %" PRIu64 " %s %s%s",
			 s->conns[i].id, s->conns[i].dev[0] ? s->conns[i].dev : "-",
			 s->conns[i].state, prev && !p ? " (new)" : "");
		text_ctr(label, &s->conns[i].c, p ? r : NULL);
	}
	free(devs);
}

/* The options of stat and monitor: a time, -c COUNT, -j */
struct watch_opts {
	double secs;		/* of -i (stat) or -t (monitor); 0: none */
	unsigned long count;	/* 0: none */
	bool json;
};

/*
 * Parse them for @argv[0], whose time option is --@secs_name (its first
 * letter the short one): -1 when parsed, else the exit status to return
 */
static int parse_watch_opts(int argc, char *argv[], const char *secs_name,
			    struct watch_opts *w)
{
	const char so = secs_name[0];
	const struct option longopts[] = {
		{ secs_name, required_argument, NULL, so },
		{ "count", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char optstring[] = { ':', so, ':', 'c', ':', 'j', 'h', 0 };
	uint64_t us;
	char *end;
	int c;

	memset(w, 0, sizeof(*w));
	w->json = json_output;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		if (c == so) {
			/* seconds, 0.01 to 3600, as before units were taken */
			if (duration_opt(argv[0], secs_name, optarg, USEC_PER_S,
					 10 * USEC_PER_MS, 3600 * USEC_PER_S,
					 &us))
				return EXIT_USAGE;
			w->secs = (double)us / USEC_PER_S;
		} else if (c == 'c') {
			errno = 0;
			w->count = strtoul(optarg, &end, 10);
			if (errno || *end || !isdigit((unsigned char)*optarg) ||
			    !w->count) {
				errmsg("%s: bad count '%s' (1 or more)", argv[0],
				       optarg);
				return EXIT_USAGE;
			}
		} else if (c == 'j') {
			w->json = true;
			json_output = true;
		} else {
			return help_or_bad_option(c, argv);
		}
	}
	return unexpected_arg(argc, argv) ? EXIT_USAGE : -1;
}

int stat_main(int argc, char *argv[])
{
	struct stat_sample cur, prev;
	struct watch_opts w;
	bool have_prev = false;
	unsigned long count, k;
	int ret;

	ret = parse_watch_opts(argc, argv, "interval", &w);
	if (ret >= 0)
		return ret;
	ret = 0;
	if (!w.secs && w.count) {
		errmsg("stat: -c COUNT needs -i SECONDS");
		return EXIT_USAGE;
	}
	/* without -c: once, or with -i until interrupted */
	count = w.count ? w.count : w.secs ? 0 : 1;
	for (k = 0; !count || k < count; k++) {
		if (k) {
			struct timespec ts = {
				.tv_sec = (time_t)w.secs,
				.tv_nsec = (long)((w.secs - (time_t)w.secs) * 1e9),
			};

			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
		ret = stat_read(&cur);
		if (ret) {
			errmsg_advice(ret, debugfs_advice(ret),
				      "stat: cannot read the counters from %s",
				      debugfs_dir());
			ret = 1;
			break;
		}
		if (!w.json && k)
			putchar('\n');
		stat_print(&cur, have_prev ? &prev : NULL, w.json);
		if (have_prev)
			stat_free(&prev);
		prev = cur;
		have_prev = true;
		if (fflush(stdout) == EOF) {
			ret = finish_stdout(1);
			break;
		}
	}
	if (have_prev)
		stat_free(&prev);
	return ret ? ret : finish_stdout(0);
}

/*
 * krdmactl monitor [-c COUNT] [-t SECONDS] [-j]
 *
 * Events as they happen, found by reading the devices (/dev/krdma) and the
 * connections (debugfs) every MON_POLL_MS and comparing with the reading
 * before: devices added and removed, port states, connections up, their
 * state changes (with the error) and connections gone.
 */
#define MON_POLL_MS 200

struct mon_port {
	char dev[KRDMA_NAME_MAX];
	uint32_t port;
	uint32_t state;
};

struct mon_conn {
	uint64_t id;
	char state[32];
	uint64_t error;
	char dev[KRDMA_NAME_MAX];
	char peer[80];
};

struct mon_snap {
	bool have_devs, have_conns;
	char (*devs)[KRDMA_NAME_MAX];
	const char **transports;
	size_t ndevs;
	struct mon_port *ports;
	size_t nports;
	struct mon_conn *conns;
	size_t nconns;
};

static void mon_free(struct mon_snap *s)
{
	free(s->devs);
	free(s->transports);
	free(s->ports);
	free(s->conns);
	memset(s, 0, sizeof(*s));
}

/*
 * Read what there is now, the devices through @fd (-errno: cannot), the
 * connections from debugfs; why either cannot be read into @dev_err and
 * @dbg_err. Returns 0 or -ENOMEM.
 */
static int mon_read(int fd, struct mon_snap *s, int *dev_err, int *dbg_err)
{
	struct dev_info *devs = NULL;
	struct kvfile conns;
	uint32_t ndevs = 0, i, p;
	size_t k;

	memset(s, 0, sizeof(*s));
	*dev_err = fd < 0 ? fd : collect_devs(fd, NULL, &devs, &ndevs);
	if (!*dev_err) {
		for (i = 0; i < ndevs; i++)
			s->nports += devs[i].dq.phys_port_cnt;
		s->devs = calloc(ndevs + 1, sizeof(*s->devs));
		s->transports = calloc(ndevs + 1, sizeof(*s->transports));
		s->ports = calloc(s->nports + 1, sizeof(*s->ports));
		if (!s->devs || !s->transports || !s->ports) {
			free_devs(devs, ndevs);
			mon_free(s);
			return -ENOMEM;
		}
		s->nports = 0;
		for (i = 0; i < ndevs; i++) {
			const struct krdma_dev_query *dq = &devs[i].dq;

			snprintf(s->devs[i], sizeof(s->devs[i]), "%s",
				 (const char *)dq->name);
			s->transports[i] = krdma_transport_str(dq->transport);
			for (p = 0; p < dq->phys_port_cnt; p++) {
				struct mon_port *mp = &s->ports[s->nports++];

				snprintf(mp->dev, sizeof(mp->dev), "%s",
					 (const char *)dq->name);
				mp->port = devs[i].ports[p].pq.port_num;
				mp->state = devs[i].ports[p].pq.state;
			}
		}
		s->ndevs = ndevs;
		s->have_devs = true;
		free_devs(devs, ndevs);
	}
	*dbg_err = kvfile_read("connections", &conns);
	if (*dbg_err)
		return 0;
	s->conns = calloc(conns.n + 1, sizeof(*s->conns));
	if (!s->conns) {
		kvfile_free(&conns);
		mon_free(s);
		return -ENOMEM;
	}
	for (k = 0; k < conns.n; k++) {
		const struct kvline *l = &conns.lines[k];
		struct mon_conn *c = &s->conns[k];

		c->id = kv_u64(l, "id");
		c->error = kv_u64(l, "error");
		snprintf(c->state, sizeof(c->state), "%s", kv_str(l, "state"));
		snprintf(c->dev, sizeof(c->dev), "%s", kv_get(l, "dev") ?: "");
		snprintf(c->peer, sizeof(c->peer), "%s",
			 kv_get(l, "peer") ?: "");
	}
	s->nconns = conns.n;
	s->have_conns = true;
	kvfile_free(&conns);
	return 0;
}

struct mon_event {
	const char *event;
	const char *dev;	/* NULL: none */
	const char *transport;
	uint32_t port;		/* 0: none */
	const struct mon_conn *conn;
	const char *state, *old_state;
};

/* @v as a JSON string, null when NULL or "" */
static void json_str_or_null(struct json *j, const char *key, const char *v)
{
	if (v && *v)
		json_str(j, key, v);
	else
		json_null(j, key);
}

/* "2026-12-04T20:58:01.123+0000": now, local time */
static void mon_time(char *buf, size_t len)
{
	struct timespec ts;
	char tz[8];
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(tz, sizeof(tz), "%z", &tm);
	snprintf(buf + n, len - n, ".%03ld%s", ts.tv_nsec / 1000000, tz);
}

static void mon_print(const struct mon_event *e, bool json)
{
	struct json j = { .f = stdout };
	const struct mon_conn *c = e->conn;
	char t[64];

	mon_time(t, sizeof(t));
	if (json) {
		json_begin_object(&j, NULL);
		json_str(&j, "time", t);
		json_str(&j, "event", e->event);
		json_str_or_null(&j, "ifname", e->dev);
		if (e->port)
			json_u64(&j, "port", e->port);
		else
			json_null(&j, "port");
		if (c)
			json_u64(&j, "id", c->id);
		else
			json_null(&j, "id");
		json_str_or_null(&j, "peer", c ? c->peer : NULL);
		json_str_or_null(&j, "state", e->state);
		json_str_or_null(&j, "old_state", e->old_state);
		if (c && c->error)
			json_error(&j, "error", (int)c->error,
				   strerror((int)c->error), NULL);
		else
			json_null(&j, "error");
		json_end_object(&j);
	} else {
		printf("%s %s", t, e->event);
		if (e->dev && e->dev[0])
			printf(" %s", e->dev);
		if (e->port)
			printf("/%u", e->port);
		if (e->transport)
			printf(" (%s)", e->transport);
		if (c)
			printf(" conn %" PRIu64, c->id);
		if (c && c->peer[0])
			printf(" peer %s", c->peer);
		if (e->old_state && e->state)
			printf(" %s -> %s", e->old_state, e->state);
		else if (e->old_state)
			printf(" (was %s)", e->old_state);
		else if (e->state)
			printf(" %s", e->state);
		if (c && c->error)
			printf(" (%s: %s)", errno_name(c->error),
			       strerror((int)c->error));
		putchar('\n');
	}
	fflush(stdout);
}

static const struct mon_conn *mon_conn_find(const struct mon_snap *s,
					    uint64_t id)
{
	size_t i;

	for (i = 0; i < s->nconns; i++)
		if (s->conns[i].id == id)
			return &s->conns[i];
	return NULL;
}

static bool mon_has_dev(const struct mon_snap *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->ndevs; i++)
		if (!strcmp(s->devs[i], name))
			return true;
	return false;
}

/* The events from @old to @now, printed; how many */
static unsigned long mon_diff(const struct mon_snap *old,
			      const struct mon_snap *now, bool json)
{
	unsigned long n = 0;
	size_t i, k;

	if (old->have_devs && now->have_devs) {
		for (i = 0; i < now->ndevs; i++) {
			if (mon_has_dev(old, now->devs[i]))
				continue;
			mon_print(&(struct mon_event){ .event = "dev_add",
				  .dev = now->devs[i],
				  .transport = now->transports[i] }, json);
			n++;
		}
		for (i = 0; i < old->ndevs; i++) {
			if (mon_has_dev(now, old->devs[i]))
				continue;
			mon_print(&(struct mon_event){ .event = "dev_remove",
				  .dev = old->devs[i] }, json);
			n++;
		}
		for (i = 0; i < now->nports; i++) {
			const struct mon_port *p = &now->ports[i];

			for (k = 0; k < old->nports; k++) {
				const struct mon_port *o = &old->ports[k];

				if (strcmp(o->dev, p->dev) || o->port != p->port ||
				    o->state == p->state)
					continue;
				mon_print(&(struct mon_event){
					  .event = "port_state", .dev = p->dev,
					  .port = p->port,
					  .state = krdma_port_state_str(p->state),
					  .old_state = krdma_port_state_str(o->state) },
					  json);
				n++;
			}
		}
	}
	if (!old->have_conns || !now->have_conns)
		return n;
	for (i = 0; i < now->nconns; i++) {
		const struct mon_conn *c = &now->conns[i];
		const struct mon_conn *o = mon_conn_find(old, c->id);

		if (!o) {
			mon_print(&(struct mon_event){ .event = "conn_up",
				  .dev = c->dev, .conn = c, .state = c->state },
				  json);
			n++;
		} else if (strcmp(o->state, c->state) || o->error != c->error) {
			mon_print(&(struct mon_event){ .event = "conn_state",
				  .dev = c->dev, .conn = c, .state = c->state,
				  .old_state = o->state }, json);
			n++;
		}
	}
	for (i = 0; i < old->nconns; i++) {
		const struct mon_conn *o = &old->conns[i];

		if (mon_conn_find(now, o->id))
			continue;
		mon_print(&(struct mon_event){ .event = "conn_down",
			  .dev = o->dev, .conn = o, .state = NULL,
			  .old_state = o->state }, json);
		n++;
	}
	return n;
}

int monitor_main(int argc, char *argv[])
{
	const struct timespec poll = { 0, MON_POLL_MS * 1000000L };
	unsigned long events = 0;
	struct mon_snap old, now;
	struct watch_opts w;
	int fd, dev_err, dbg_err, ret;
	double end = 0;

	ret = parse_watch_opts(argc, argv, "timeout", &w);
	if (ret >= 0)
		return ret;

	fd = krdma_open();
	if (fd >= 0) {
		ret = check_module_for(fd, KRDMA_FEATURE_DEV_QUERY,
				       "dev_query");
		if (ret) {
			close(fd);
			fd = ret;
		}
	}
	ret = mon_read(fd, &old, &dev_err, &dbg_err);
	if (ret) {
		errmsg_err(ret, "monitor");
		goto out;
	}
	if (dev_err && dbg_err) {
		char hint[1100];

		errmsg_advice(dbg_err, debugfs_advice(dbg_err),
			      "monitor: cannot read the connections from %s",
			      debugfs_dir());
		errmsg_advice(dev_err, open_hint(dev_err, hint, sizeof(hint)),
			      "monitor: nor the devices through %s: nothing to watch",
			      KRDMA_DEV_PATH);
		ret = 1;
		goto out_free;
	}
	if (dbg_err)
		errmsg_advice(dbg_err, debugfs_advice(dbg_err),
			      "monitor: warning: cannot read the connections from %s: watching the devices only",
			      debugfs_dir());
	if (dev_err)
		errmsg("monitor: warning: cannot list the devices through %s (%s): watching the connections only",
		       KRDMA_DEV_PATH, strerror(-dev_err));
	/* on stderr: stdout has the events only */
	fprintf(stderr, "krdmactl monitor: watching %zu device%s and %zu connection%s, every %d ms\n",
		old.ndevs, old.ndevs == 1 ? "" : "s", old.nconns,
		old.nconns == 1 ? "" : "s", MON_POLL_MS);
	if (w.secs)
		end = clock_s(CLOCK_MONOTONIC) + w.secs;
	while (!w.count || events < w.count) {
		if (w.secs && clock_s(CLOCK_MONOTONIC) >= end)
			break;
		nanosleep(&poll, NULL);
		ret = mon_read(fd, &now, &dev_err, &dbg_err);
		if (ret) {
			errmsg_err(ret, "monitor");
			goto out_free;
		}
		events += mon_diff(&old, &now, w.json);
		mon_free(&old);
		old = now;
	}
	ret = finish_stdout(0);
out_free:
	mon_free(&old);
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

/*
 * krdmactl set NAME=VALUE...
 */

/* A whole decimal number in [min, max] */
static bool parse_value(const char *s, const struct tunable *t, uint64_t *v)
{
	char *end;

	if (!*s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && !*end && *v >= t->min && *v <= t->max;
}

static void list_writable(FILE *f)
{
	size_t i;
	bool first = true;

	fprintf(f, "krdmactl: the writable parameters:");
	for (i = 0; i < ARRAY_SIZE(tunables); i++) {
		if (!tunables[i].writable)
			continue;
		fprintf(f, "%s %s (%" PRIu64 "..%" PRIu64 ")",
			first ? "" : ",", tunables[i].name, tunables[i].min,
			tunables[i].max);
		first = false;
	}
	fputc('\n', f);
}

int set_main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char path[4096], old[VALUE_MAX], now[VALUE_MAX], name[256];
	const struct tunable *t;
	int c, i, fd, ret, failed = 0;
	const char *eq;
	uint64_t v;
	ssize_t n;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			print_usage_of(argv[0], stdout);
			return finish_stdout(0);
		default:
			bad_option(argv[0], c, argv);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		errmsg("set: no NAME=VALUE given");
		print_usage_of(argv[0], stderr);
		return EXIT_USAGE;
	}

	/* Every argument is checked before anything is written */
	for (i = optind; i < argc; i++) {
		eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i]) {
			errmsg("set: '%s' is not NAME=VALUE", argv[i]);
			return EXIT_USAGE;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(eq - argv[i]),
			 argv[i]);
		t = find_tunable(name);
		if (!t) {
			errmsg("set: unknown parameter '%s'", name);
			list_writable(stderr);
			return EXIT_USAGE;
		}
		if (!t->writable) {
			errmsg("set: %s is read-only while krdma is loaded; give it when loading: modprobe krdma %s=N",
			       name, name);
			return EXIT_USAGE;
		}
		if (!parse_value(eq + 1, t, &v)) {
			errmsg("set: %s: '%s' is not a whole number from %" PRIu64
			       " to %" PRIu64, name, eq + 1, t->min, t->max);
			return EXIT_USAGE;
		}
		snprintf(path, sizeof(path), "%s/parameters/%s", module_dir(),
			 name);
		if (access(path, F_OK)) {
			ret = -errno;
			if (access(module_dir(), F_OK))
				errmsg_advice(0, LOAD_HINT,
					      "set: krdma is not loaded (no %s)",
					      module_dir());
			else
				errmsg_advice(ret, "the loaded krdma.ko is older than krdmactl; compare with: krdmactl version",
					      "set: the loaded krdma.ko has no parameter %s",
					      name);
			return 1;
		}
	}

	for (i = optind; i < argc; i++) {
		eq = strchr(argv[i], '=');
		snprintf(name, sizeof(name), "%.*s", (int)(eq - argv[i]),
			 argv[i]);
		snprintf(path, sizeof(path), "%s/parameters/%s", module_dir(),
			 name);
		if (read_value(path, old, sizeof(old)))
			snprintf(old, sizeof(old), "?");
		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		ret = fd < 0 ? -errno : 0;
		if (!ret) {
			n = write(fd, eq + 1, strlen(eq + 1));
			if (n < 0)
				ret = -errno;
			else if ((size_t)n != strlen(eq + 1))
				ret = -EIO;
			close(fd);
		}
		if (ret) {
			errmsg_advice(ret, ret == -EACCES || ret == -EPERM ?
				      "setting krdma's parameters needs root: run it as root (sudo)" :
				      NULL, "set: cannot write %s", path);
			failed++;
			continue;
		}
		if (read_value(path, now, sizeof(now)))
			snprintf(now, sizeof(now), "?");
		printf("%s: %s -> %s\n", name, old, now);
	}
	ret = finish_stdout(0);
	return failed ? 1 : ret;
}
