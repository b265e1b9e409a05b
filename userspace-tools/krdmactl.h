/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdmactl: what the subcommands in krdmactl_*.c share with krdmactl.c
 * (messages, the JSON writer, usage). Internal to krdmactl.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef KRDMACTL_H
#define KRDMACTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/krdma.h>

#define EXIT_USAGE 2

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define __printf(a, b) __attribute__((format(printf, a, b)))

/* "krdmactl: <fmt>" on stderr */
void __printf(1, 2) errmsg(const char *fmt, ...);
/*
 * "krdmactl: <fmt>: <strerror(err)>" on stderr, then the advice of
 * krdma_strerror_hint(err), when it has some, on a second line.
 */
void __printf(2, 3) errmsg_err(int err, const char *fmt, ...);
/* The same, without strerror() */
void __printf(2, 3) errmsg_hint(int err, const char *fmt, ...);
/*
 * "krdmactl: <fmt>[: <strerror(err)>]" (err 0: none), then @hint on a
 * second line (NULL: none). For errors whose advice depends on the call.
 */
void __printf(3, 4) errmsg_advice(int err, const char *hint,
				  const char *fmt, ...);

/* Flush stdout; 1 (and a message) if that fails, else @status */
int finish_stdout(int status);
/* Open /dev/krdma, or say why not. Returns the fd or -1. */
int open_krdma(void);
/*
 * Why this process may not open /dev/krdma, after EACCES or EPERM: from
 * the node's owner, group and mode and this process's ids, the facts into
 * @why ("owner root, group rdma, mode 0660; uid 1000 (alice) is not in
 * group rdma") and what to do into @fix. For every command and doctor.
 */
void node_access_advice(char *why, size_t wlen, char *fix, size_t flen);
/*
 * The advice for the error @err (-errno) of opening /dev/krdma: for
 * EACCES and EPERM "/dev/krdma: <why>; <fix>" in @buf, as
 * node_access_advice() says; otherwise krdma_strerror_hint(err).
 */
const char *open_hint(int err, char *buf, size_t len);
/*
 * Check that the module speaks our ABI and has every bit of @features
 * (KRDMA_FEATURE_*); say what is wrong if not. Returns 0 or -errno.
 */
int check_module_for(int fd, uint64_t features, const char *feature_name);

/* open_krdma() and check_module_for(): the file, or -1 (and said why) */
int open_krdma_for(uint64_t features, const char *feature_name);

/* Has the module every bit of @features? (false when it cannot say) */
bool module_has(int fd, uint64_t features);
/*
 * The flags of a krdmactl client's CONNECT: KRDMA_CONNECT_KRDMA_PEER where
 * the module has it (a plain verbs peer is refused at once), else 0.
 */
uint32_t tool_connect_flags(int fd);

/*
 * LISTEN for serve and bench -l (@cmd), with @l filled in: for krdma
 * peers only where the module has KRDMA_FEATURE_KRDMA_PEER. When no RDMA
 * device can take connections at the address, a warning that says so and
 * what to do, or that advice for a LISTEN that failed. Returns 0 or
 * -errno (and said why).
 */
struct krdma_listen;
int tool_listen(int fd, const char *cmd, struct krdma_listen *l);

/*
 * The connect requests the kernel turned away on the listener of serve or
 * bench -l, told to the operator: with a module of feature listen_query
 * each tool_accept() waits at most TOOL_ACCEPT_SLICE_MS, then asks the
 * listener (LISTEN_QUERY) and prints a line on stdout per reason that
 * counted more, "krdmactl CMD: turned away a connect request from
 * ADDR:PORT: WHY". Without it, ACCEPT waits without limit, as before.
 */
#define TOOL_ACCEPT_SLICE_MS 1000

struct tool_refusals {
	const char *cmd;	/* "serve", "bench" */
	const char *answers;	/* "serve answers krdmactl ping and xfer" */
	uint32_t listener;
	bool on;		/* the module counts them */
	struct krdma_listen_query said;	/* the counts told so far */
};

/* After LISTEN: whom @listener turns away is told from now on */
void tool_refusals_init(struct tool_refusals *r, int fd, const char *cmd,
			const char *answers, uint32_t listener);
/*
 * Tell what was turned away since the last call, if anything (nothing
 * when off). A failed query says so once and turns the telling off.
 */
void tool_refusals_tell(struct tool_refusals *r, int fd);
/*
 * ACCEPT a connection on r->listener into @conn, then tell what was
 * turned away. Returns 0; -EAGAIN when TOOL_ACCEPT_SLICE_MS passed with
 * no connection (check for a stop, call again); -EINTR; or the error of
 * ACCEPT.
 */
int tool_accept(struct tool_refusals *r, int fd, uint32_t *conn);

/*
 * @host (an IPv4 or IPv6 address, or a host name) and @port into @out, for
 * command @cmd; when it does not resolve, says so naming @host. Returns 0
 * or EXIT_USAGE (as ping(8), also when the name service failed).
 */
struct krdma_addr;
int tool_addr(const char *cmd, const char *host, uint32_t port,
	      struct krdma_addr *out);

/*
 * The prologue of serve, ping, xfer and bench (both modes): @host and
 * @port resolved into @addr (tool_addr()), its "ip:port" into @target
 * (unless NULL), /dev/krdma opened for connections, and the locked-memory
 * limit raised as far as this process may. Returns the file, or the
 * negated exit status when it cannot (and said why).
 */
int tool_session(const char *cmd, const char *host, uint32_t port,
		 struct krdma_addr *addr, char *target, size_t tlen);

/* "Usage: krdmactl NAME ..." of subcommand @name */
void print_usage_of(const char *name, FILE *f);
/*
 * Report an unknown option (@c '?') or a missing option value (@c ':', for
 * an optstring starting with ':') of subcommand @cmd, as getopt_long() left
 * it with opterr = 0; then the usage on stderr.
 */
void bad_option(const char *cmd, int c, char *argv[]);

/*
 * The end of a getopt_long() switch: for 'h' the usage of @argv[0] on
 * stdout (exit status 0, or 1 when it cannot be written); for anything
 * else the bad option reported (EXIT_USAGE)
 */
int help_or_bad_option(int c, char *argv[]);
/* An argument left after the options: reported, with the usage; true */
bool unexpected_arg(int argc, char *argv[]);

/*
 * A decimal number within [@min, @max], nothing before or after it (no
 * sign, no suffix), into @out. Returns 0 or -EINVAL (@out untouched).
 */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/* Microseconds in a unit of parse_duration() */
#define USEC_PER_MS ((uint64_t)1000)
#define USEC_PER_S ((uint64_t)1000000)

/*
 * A duration, as tc(8) takes a time: a decimal number (a fraction too)
 * with a unit, "ms" ("msec", "msecs") or "s" ("sec", "secs"), in any
 * case; a number without a unit counts @bare_us microseconds a unit
 * (USEC_PER_MS or USEC_PER_S: what the option took before it took units).
 * Into @us, cut to a whole microsecond. Returns 0 or -EINVAL.
 */
int parse_duration(const char *s, uint64_t bare_us, uint64_t *us);
/*
 * The duration of option @name ("timeout", "interval") of @cmd: as
 * parse_duration(), within [@min_us, @max_us], and where a bare number is
 * milliseconds a whole number of them. Returns 0, or EXIT_USAGE when it
 * said what the option takes.
 */
int duration_opt(const char *cmd, const char *name, const char *s,
		 uint64_t bare_us, uint64_t min_us, uint64_t max_us,
		 uint64_t *us);

/*
 * Parse the options of a subcommand that takes only -j/--json, -h/--help:
 * OPT_HELP when the help was printed, OPT_BAD when bad usage was reported.
 */
enum opt_result { OPT_OK, OPT_HELP, OPT_BAD };

enum opt_result parse_json_opts(int argc, char *argv[], bool *json);

/*
 * -j and -p before the command (krdmactl -jp status), or a command's own
 * -j: print JSON, indented. A command that takes -j starts from
 * json_output and sets it with its -j.
 */
extern bool json_output;
extern bool json_pretty;

/* The JSON writer of krdmactl.c */
#define JSON_MAX_DEPTH 16

struct json {
	FILE *f;
	int depth;
	char kind[JSON_MAX_DEPTH];	/* '{' or '[' */
	bool first[JSON_MAX_DEPTH];
};

void json_begin_object(struct json *j, const char *key);
void json_end_object(struct json *j);
void json_begin_array(struct json *j, const char *key);
void json_end_array(struct json *j);
void json_str(struct json *j, const char *key, const char *val);
void json_u64(struct json *j, const char *key, uint64_t val);
/* A finite number, with @decimals digits after the point */
void json_double(struct json *j, const char *key, double val, int decimals);
void json_bool(struct json *j, const char *key, bool val);
void json_null(struct json *j, const char *key);
/*
 * "ifname" and "transport" of the connection's device @dev, or null and
 * null before there is one (@dev "?", as ping and bench name it then)
 */
void json_conn_dev(struct json *j, const char *dev, const char *transport);
/*
 * The error object, the same wherever a failure is said in JSON:
 * {"errno": N (0: no system error), "name": "ENOENT" or null,
 *  "message": what stderr says, "hint": the advice or null}
 */
void json_error(struct json *j, const char *key, int err, const char *msg,
		const char *hint);
/*
 * The first error said on stderr since JSON output was chosen, as
 * json_error(); EINVAL for bad usage (@status EXIT_USAGE) without an errno
 */
void json_last_error(struct json *j, const char *key, int status);

/* What `krdmactl dev` collects about the devices (krdmactl.c) */
#include "libkrdma.h"

struct port_info {
	struct krdma_port_query pq;
	struct krdma_gid_entry *gids;
	uint32_t ngids;
};

struct dev_info {
	struct krdma_dev_query dq;
	struct port_info *ports;	/* phys_port_cnt entries, port 1 first */
};

/*
 * Every device krdma tracks (@name NULL) or only @name, with its ports
 * and GIDs; says on stderr what went wrong. Returns 0 or -errno.
 */
int collect_devs(int fd, const char *name, struct dev_info **devs,
		 uint32_t *ndevs);
void free_devs(struct dev_info *devs, uint32_t ndevs);
/* One device of collect_devs() as a JSON object, as `krdmactl dev -j` */
void json_dev(struct json *j, const struct dev_info *d);

/* The directory krdmactl runs from (for ../krdma.ko), "." if unknown */
void tool_dir(char *buf, size_t len);

/* Subcommands of krdmactl_setup.c */
int up_main(int argc, char *argv[]);
int down_main(int argc, char *argv[]);
int doctor_main(int argc, char *argv[]);
int explain_main(int argc, char *argv[]);

/* Subcommands of krdmactl_ping.c */
int serve_main(int argc, char *argv[]);
int ping_main(int argc, char *argv[]);
int xfer_main(int argc, char *argv[]);

/* Subcommand of krdmactl_bench.c */
int bench_main(int argc, char *argv[]);

/* Subcommand of krdmactl_blk.c */
int blk_main(int argc, char *argv[]);

/* Subcommands of krdmactl_status.c */
int status_main(int argc, char *argv[]);
int stat_main(int argc, char *argv[]);
int monitor_main(int argc, char *argv[]);
int set_main(int argc, char *argv[]);

#endif /* KRDMACTL_H */
