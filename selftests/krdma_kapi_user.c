// SPDX-License-Identifier: GPL-2.0
/*
 * krdma selftests: the userspace peer of krdma_sample's user_serve mode.
 * A kernel module grants a window of its kmalloc'd memory and sends the
 * token; this program, through /dev/krdma, READs the first half (and
 * checks it), WRITEs the second half, and sends a token of its own, which
 * the module WRITEs into. Exit 0 when every byte checked out.
 *
 * Usage: krdma_kapi_user ADDR PORT
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libkrdma.h"

#define LEN	65536
#define MSG	64

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 13 + seed + (i >> 12));
}

static long check(const uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i * 13 + seed + (i >> 12)))
			return i;
	return -1;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "krdma_kapi_user: %s: %s\n", what,
		err < 0 ? strerror(-err) : krdma_wc_status_str(err));
	return 1;
}

/* One operation, waited for: 0 or the completion's status, or -errno */
static int op(int fd, uint32_t opcode, uint32_t conn, uint32_t buf,
	      uint64_t off, uint64_t len, const struct krdma_token *tok)
{
	struct krdma_completion wc;
	struct krdma_op o = {
		.opcode = opcode, .conn = conn, .num_sge = 1,
		.sge = { .buf = buf, .offset = off, .length = len },
	};
	int ret;

	if (tok)
		o.remote = *tok;
	ret = krdma_submit_ops(fd, &o, 1, 0, NULL);
	if (ret)
		return ret;
	ret = krdma_poll_wc(fd, &wc, 1, 30000);
	if (ret != 1)
		return ret < 0 ? ret : -ETIMEDOUT;
	return wc.status;
}

int main(int argc, char **argv)
{
	struct krdma_completion wc;
	struct krdma_token tok, mine;
	struct krdma_addr addr;
	uint32_t conn, data, msgs, win;
	uint8_t *mem, *msg;
	struct krdma_op o;
	long bad;
	int fd, ret, n;

	if (argc != 3) {
		fprintf(stderr, "usage: krdma_kapi_user ADDR PORT\n");
		return 2;
	}
	mem = mmap(NULL, LEN + 4 * MSG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return fail("mmap", -errno);
	msg = mem + LEN;
	fd = krdma_open();
	if (fd < 0)
		return fail("open", fd);
	ret = krdma_parse_addr(argv[1], atoi(argv[2]), &addr);
	if (ret)
		return fail("address", ret);
	ret = krdma_buf_register(fd, mem, LEN, KRDMA_ACCESS_LOCAL_WRITE |
				 KRDMA_ACCESS_REMOTE_WRITE, &data);
	if (!ret)
		ret = krdma_buf_register(fd, msg, 4 * MSG,
					 KRDMA_ACCESS_LOCAL_WRITE, &msgs);
	if (ret)
		return fail("register", ret);

	/*
	 * The module SENDs its token once it has accepted: the RECV for it
	 * goes out with the connect request
	 */
	memset(&o, 0, sizeof(o));
	o.opcode = KRDMA_OP_RECV;
	o.num_sge = 1;
	o.sge.buf = msgs;
	o.sge.length = MSG;
	ret = krdma_connect_recvs(fd, &addr, NULL, 0, 10000, &o, 1, &conn);
	if (ret)
		return fail("connect", ret);
	ret = krdma_poll_wc(fd, &wc, 1, 30000);
	if (ret != 1)
		return fail("recv token", ret < 0 ? ret : -ETIMEDOUT);
	if (wc.status)
		return fail("recv token", wc.status);
	memcpy(&tok, msg, sizeof(tok));

	/* READ the first half of the module's kernel memory */
	ret = op(fd, KRDMA_OP_READ, conn, data, 0, LEN / 2, &tok);
	if (ret)
		return fail("read", ret);
	bad = check(mem, LEN / 2, 11);
	if (bad != -1) {
		fprintf(stderr, "krdma_kapi_user: read: byte %ld differs\n",
			bad);
		return 1;
	}

	/* WRITE the second half */
	fill(mem + LEN / 2, LEN / 2, 22);
	tok.addr += LEN / 2;
	tok.length -= LEN / 2;
	ret = op(fd, KRDMA_OP_WRITE, conn, data, LEN / 2, LEN / 2, &tok);
	if (ret)
		return fail("write", ret);

	/* Our token back, for the module to WRITE into; then wait for fin */
	memset(mem, 0, 4096);
	ret = krdma_grant_window(fd, conn, data, 0, 4096,
				 KRDMA_ACCESS_REMOTE_WRITE, &win, &mine);
	if (ret)
		return fail("grant", ret);
	memset(&o, 0, sizeof(o));
	o.opcode = KRDMA_OP_RECV;
	o.conn = conn;
	o.num_sge = 1;
	o.sge = (struct krdma_sge){ .buf = msgs, .offset = 2 * MSG,
				    .length = MSG };
	ret = krdma_submit_ops(fd, &o, 1, 0, NULL);
	if (ret)
		return fail("post recv fin", ret);
	memcpy(msg + MSG, &mine, sizeof(mine));
	o.opcode = KRDMA_OP_SEND;
	o.sge = (struct krdma_sge){ .buf = msgs, .offset = MSG,
				    .length = sizeof(mine) };
	ret = krdma_submit_ops(fd, &o, 1, 0, NULL);
	if (ret)
		return fail("send token", ret);
	/* Two completions, in either order: the SEND and the fin RECV */
	for (n = 0; n < 2; n++) {
		ret = krdma_poll_wc(fd, &wc, 1, 30000);
		if (ret != 1)
			return fail("wait", ret < 0 ? ret : -ETIMEDOUT);
		if (wc.status)
			return fail(krdma_opcode_str(wc.opcode), wc.status);
	}
	if (memcmp(msg + 2 * MSG, "fin", 4))
		return fail("fin", -EPROTO);
	bad = check(mem, 4096, 33);
	if (bad != -1) {
		fprintf(stderr,
			"krdma_kapi_user: the module's write: byte %ld differs\n",
			bad);
		return 1;
	}
	printf("krdma_kapi_user: kernel window read and written, user window written by the kernel: all bytes verified\n");
	return 0;
}
