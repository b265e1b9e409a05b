// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the pure helpers of libkrdma (formatting, names, hints)
 * and of the layout of the uapi structs. Run by `make test`.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "libkrdma.h"

static int failures, checks;

static void check_str(const char *what, const char *got, const char *want)
{
	checks++;
	if (got && want && !strcmp(got, want))
		return;
	if (!got && !want)
		return;
	failures++;
	fprintf(stderr, "FAIL %s: got \"%s\", want \"%s\"\n", what,
		got ? got : "(null)", want ? want : "(null)");
}

static void check_num(const char *what, unsigned long got, unsigned long want)
{
	checks++;
	if (got == want)
		return;
	failures++;
	fprintf(stderr, "FAIL %s: got %lu, want %lu\n", what, got, want);
}

#define CHECK_OFF(type, field, off) \
	check_num(#type "." #field, offsetof(struct type, field), off)

static void test_layout(void)
{
	/* Hand-computed from <linux/krdma.h>; any padding would show. */
	check_num("sizeof query_module", sizeof(struct krdma_query_module), 32);
	CHECK_OFF(krdma_query_module, features, 16);
	CHECK_OFF(krdma_query_module, num_devices, 24);
	check_num("sizeof dev_list", sizeof(struct krdma_dev_list), 24);
	CHECK_OFF(krdma_dev_list, dev_indexes, 16);
	check_num("sizeof dev_query", sizeof(struct krdma_dev_query), 248);
	CHECK_OFF(krdma_dev_query, name, 16);
	CHECK_OFF(krdma_dev_query, fw_ver, 80);
	CHECK_OFF(krdma_dev_query, node_guid, 144);
	CHECK_OFF(krdma_dev_query, vendor_id, 176);
	CHECK_OFF(krdma_dev_query, max_fast_reg_page_list_len, 240);
	check_num("sizeof gid_entry", sizeof(struct krdma_gid_entry), 32);
	CHECK_OFF(krdma_gid_entry, index, 16);
	check_num("sizeof port_query", sizeof(struct krdma_port_query), 88);
	CHECK_OFF(krdma_port_query, netdev_name, 48);
	CHECK_OFF(krdma_port_query, gids, 64);
	CHECK_OFF(krdma_port_query, __reserved, 80);
}

static void test_guid(void)
{
	char buf[KRDMA_GUID_STR_LEN];

	check_str("guid", krdma_guid_str(0x505400fffe123456ULL, buf),
		  "5054:00ff:fe12:3456");
	check_str("guid 0", krdma_guid_str(0, buf), "0000:0000:0000:0000");
	check_str("guid max", krdma_guid_str(~0ULL, buf),
		  "ffff:ffff:ffff:ffff");
	check_num("guid len", strlen(buf) + 1, KRDMA_GUID_STR_LEN);
}

static void test_gid(void)
{
	static const uint8_t ll[16] = {
		0xfe, 0x80, 0, 0, 0, 0, 0, 0,
		0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56
	};
	static const uint8_t v4[16] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 2
	};
	static const uint8_t zero[16];
	static const uint8_t max[16] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
	};
	/* ::fffe:c0a8:102 is not IPv4-mapped */
	static const uint8_t not_v4[16] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 192, 168, 1, 2
	};
	char buf[KRDMA_GID_IP_STR_LEN];

	check_str("gid ll", krdma_gid_str(ll, buf),
		  "fe80:0000:0000:0000:5054:00ff:fe12:3456");
	check_str("gid max", krdma_gid_str(max, buf),
		  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	check_num("gid len", strlen(buf) + 1, KRDMA_GID_STR_LEN);
	check_str("gid v4", krdma_gid_str(v4, buf),
		  "0000:0000:0000:0000:0000:ffff:c0a8:0102");

	check_str("ip ll", krdma_gid_ip_str(ll, buf), "fe80::5054:ff:fe12:3456");
	check_str("ip v4", krdma_gid_ip_str(v4, buf), "192.168.1.2");
	check_str("ip zero", krdma_gid_ip_str(zero, buf), "::");
	check_str("ip not v4", krdma_gid_ip_str(not_v4, buf),
		  "::fffe:c0a8:102");
	check_str("ip max", krdma_gid_ip_str(max, buf),
		  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
}

static void test_names(void)
{
	check_str("transport roce", krdma_transport_str(KRDMA_TRANSPORT_ROCE),
		  "RoCE");
	check_str("transport iwarp",
		  krdma_transport_str(KRDMA_TRANSPORT_IWARP), "iWARP");
	check_str("transport 0", krdma_transport_str(0), "unknown");
	check_str("transport big", krdma_transport_str(~0U), "unknown");
	check_str("state active", krdma_port_state_str(KRDMA_PORT_ACTIVE),
		  "ACTIVE");
	check_str("state down", krdma_port_state_str(KRDMA_PORT_DOWN), "DOWN");
	check_str("state 6", krdma_port_state_str(6), "unknown");
	check_str("phys 5", krdma_port_phys_state_str(5), "LINK_UP");
	check_str("phys 3", krdma_port_phys_state_str(3), "DISABLED");
	check_str("phys 8", krdma_port_phys_state_str(8), "unknown");
	check_str("ll eth", krdma_link_layer_str(KRDMA_LINK_LAYER_ETHERNET),
		  "Ethernet");
	check_str("gid v2", krdma_gid_type_str(KRDMA_GID_TYPE_ROCE_V2),
		  "RoCE v2");
	check_str("gid ib", krdma_gid_type_str(KRDMA_GID_TYPE_IB), "IB");
	check_str("atomic none", krdma_atomic_cap_str(KRDMA_ATOMIC_NONE),
		  "none");
	check_str("atomic 3", krdma_atomic_cap_str(3), "unknown");
	check_str("width 4x", krdma_port_width_str(2), "4X");
	check_str("speed edr", krdma_port_speed_str(32), "25.0 Gbps (EDR)");
	check_str("speed 3", krdma_port_speed_str(3), "unknown");
	check_str("feature", krdma_feature_str(KRDMA_FEATURE_DEV_QUERY),
		  "dev_query");
	check_str("feature krdma_peer",
		  krdma_feature_str(KRDMA_FEATURE_KRDMA_PEER), "krdma_peer");
	check_str("feature unsignaled",
		  krdma_feature_str(KRDMA_FEATURE_UNSIGNALED), "unsignaled");
	check_str("feature ring", krdma_feature_str(KRDMA_FEATURE_RING),
		  "ring");
	check_str("feature early_recvs",
		  krdma_feature_str(KRDMA_FEATURE_EARLY_RECVS), "early_recvs");
	check_str("feature listen_query",
		  krdma_feature_str(KRDMA_FEATURE_LISTEN_QUERY),
		  "listen_query");
	check_str("feature ?", krdma_feature_str(1ULL << 63), NULL);
	check_str("refused 2", krdma_refused_str(KRDMA_REFUSED_NOT_KRDMA),
		  "not krdma");
	check_str("refused 1", krdma_refused_str(KRDMA_REFUSED_VERSION),
		  "version");
	check_str("refused 3", krdma_refused_str(KRDMA_REFUSED_BACKLOG),
		  "backlog full");
	check_str("refused 5", krdma_refused_str(KRDMA_REFUSED_NO_RESOURCES),
		  "no resources");
	check_str("refused 4 (closing: never counted)", krdma_refused_str(4),
		  "unknown");
	check_str("refused 0", krdma_refused_str(0), "unknown");
	check_str("refused 0xffffffff", krdma_refused_str(~0U), "unknown");
}

static void test_refused_counter(void)
{
	static const uint32_t unknown[] = { 0, 4, 6, 255, ~0U };
	struct krdma_listen_query q;
	uint32_t reason, prev = 0;
	char what[64];
	unsigned int i;
	__u64 *c;

	check_num("refused counter version",
		  krdma_refused_counter(&q, KRDMA_REFUSED_VERSION) ==
		  &q.refused_version, 1);
	check_num("refused counter not krdma",
		  krdma_refused_counter(&q, KRDMA_REFUSED_NOT_KRDMA) ==
		  &q.refused_not_krdma, 1);
	check_num("refused counter backlog",
		  krdma_refused_counter(&q, KRDMA_REFUSED_BACKLOG) ==
		  &q.refused_backlog, 1);
	check_num("refused counter no resources",
		  krdma_refused_counter(&q, KRDMA_REFUSED_NO_RESOURCES) ==
		  &q.refused_no_resources, 1);
	/* Each reason, ascending, counts in a field of its own */
	memset(&q, 0, sizeof(q));
	for (i = 0; (reason = krdma_refused_reason(i)); i++) {
		snprintf(what, sizeof(what), "refused reason %u: ascending", i);
		check_num(what, reason > prev, 1);
		prev = reason;
		c = krdma_refused_counter(&q, reason);
		snprintf(what, sizeof(what), "refused reason %u: a counter", i);
		check_num(what, !!c, 1);
		if (c)
			(*c)++;
	}
	check_num("refused reasons", i, 4);
	check_num("refused reason far past the last",
		  krdma_refused_reason(~0U), 0);
	check_num("refused counters: one count each",
		  q.refused_version == 1 && q.refused_not_krdma == 1 &&
		  q.refused_backlog == 1 && q.refused_no_resources == 1, 1);
	check_num("refused counters: not refused", q.refused, 0);
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		snprintf(what, sizeof(what), "refused counter %u: unknown",
			 unknown[i]);
		check_num(what, !krdma_refused_counter(&q, unknown[i]), 1);
	}
}

static void test_hints(void)
{
	const char *h = krdma_strerror_hint(-ENOENT);

	checks++;
	if (!h || !strstr(h, "modprobe krdma")) {
		failures++;
		fprintf(stderr, "FAIL hint ENOENT: %s\n", h ? h : "(null)");
	}
	check_str("hint sign", krdma_strerror_hint(ENOENT), h);
	checks++;
	if (!krdma_strerror_hint(-ENODEV) || !krdma_strerror_hint(-EACCES) ||
	    !krdma_strerror_hint(-ENOTTY) || !krdma_strerror_hint(-EPROTO) ||
	    !krdma_strerror_hint(-EPROTONOSUPPORT)) {
		failures++;
		fprintf(stderr, "FAIL hint: missing advice\n");
	}
	check_str("hint none", krdma_strerror_hint(-ESPIPE), NULL);
	check_str("hint 0", krdma_strerror_hint(0), NULL);
}

/* @hint has @want and none of @unwanted (NULL-terminated) */
static void check_hint(const char *what, const char *hint, const char *want,
		       const char *const *unwanted)
{
	checks++;
	if (!hint || !strstr(hint, want))
		goto fail;
	for (; *unwanted; unwanted++)
		if (strstr(hint, *unwanted))
			goto fail;
	return;
fail:
	failures++;
	fprintf(stderr, "FAIL %s: %s\n", what, hint ? hint : "(null)");
}

static void test_cmd_hints(void)
{
	static const char *const not_listen[] = {
		"/dev/krdma", "grant", "LOCAL_WRITE", NULL
	};
	static const char *const not_grant[] = {
		"/dev/krdma", "1024", "LOCAL_WRITE", NULL
	};
	static const char *const not_submit[] = {
		"/dev/krdma", "1024", "grant", NULL
	};
	static const char *const not_connect[] = {
		"ABI", "rq_depth", "lacks a feature", NULL
	};

	check_hint("LISTEN EACCES",
		   krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN, -EACCES),
		   "below 1024 needs CAP_NET_BIND_SERVICE", not_listen);
	check_hint("GRANT EACCES",
		   krdma_cmd_strerror_hint(KRDMA_IOC_GRANT, -EACCES),
		   "more access than the buffer", not_grant);
	check_hint("GRANT EPERM",
		   krdma_cmd_strerror_hint(KRDMA_IOC_GRANT, EPERM),
		   "another process", not_grant);
	check_hint("SUBMIT EACCES",
		   krdma_cmd_strerror_hint(KRDMA_IOC_SUBMIT, -EACCES),
		   "without LOCAL_WRITE", not_submit);
	check_hint("SUBMIT EPERM",
		   krdma_cmd_strerror_hint(KRDMA_IOC_SUBMIT, -EPERM),
		   "another process", not_submit);
	/* other errnos: as the connection or the general advice */
	check_str("LISTEN EADDRINUSE",
		  krdma_cmd_strerror_hint(KRDMA_IOC_LISTEN, -EADDRINUSE),
		  krdma_conn_strerror_hint(-EADDRINUSE));
	check_str("SUBMIT ENOTCONN",
		  krdma_cmd_strerror_hint(KRDMA_IOC_SUBMIT, -ENOTCONN),
		  krdma_conn_strerror_hint(-ENOTCONN));
	/* CONNECT: a krdma listener's reject reason, not the ABI's */
	check_hint("CONNECT EPROTO",
		   krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, -EPROTO),
		   "the peer is not krdma", not_connect);
	check_hint("CONNECT EBUSY",
		   krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, EBUSY),
		   "backlog", not_connect);
	check_hint("CONNECT ENOBUFS",
		   krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, -ENOBUFS),
		   "no resources", not_connect);
	check_hint("CONNECT EPROTONOSUPPORT",
		   krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT,
					   -EPROTONOSUPPORT),
		   "another handshake version", not_connect);
	check_str("CONNECT ETIMEDOUT",
		  krdma_cmd_strerror_hint(KRDMA_IOC_CONNECT, -ETIMEDOUT),
		  krdma_conn_strerror_hint(-ETIMEDOUT));
	check_str("DEV_QUERY ENODEV",
		  krdma_cmd_strerror_hint(KRDMA_IOC_DEV_QUERY, -ENODEV),
		  krdma_strerror_hint(-ENODEV));
	check_str("DEV_QUERY EACCES",
		  krdma_cmd_strerror_hint(KRDMA_IOC_DEV_QUERY, -EACCES),
		  krdma_strerror_hint(-EACCES));
}

/* Literals need no resolver: the same as krdma_parse_addr() */
static void test_resolve(void)
{
	struct krdma_addr a;
	char buf[80];

	check_num("resolve 198.18.0.1",
		  krdma_resolve_addr("198.18.0.1", 7, &a), 0);
	check_str("resolve 198.18.0.1", krdma_addr_str(&a, buf, sizeof(buf)),
		  "198.18.0.1:7");
	check_num("resolve 2001:db8::1",
		  krdma_resolve_addr("2001:db8::1", 8, &a), 0);
	check_str("resolve 2001:db8::1", krdma_addr_str(&a, buf, sizeof(buf)),
		  "[2001:db8::1]:8");
	/* no name to look up: an error of getaddrinfo(), not 0 */
	checks++;
	if (!krdma_resolve_addr("", 9, &a)) {
		failures++;
		fprintf(stderr, "FAIL resolve \"\": 0\n");
	}
}

int main(void)
{
	test_layout();
	test_guid();
	test_gid();
	test_names();
	test_refused_counter();
	test_hints();
	test_cmd_hints();
	test_resolve();

	printf("test_helpers: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
