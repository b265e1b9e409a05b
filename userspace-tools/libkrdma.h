/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libkrdma: the userspace side of /dev/krdma.
 *
 * Every ioctl on /dev/krdma goes through this library. It fills ``size``
 * and zeroes every struct before an ioctl, runs the grow-and-retry
 * protocols of the list commands, and turns the ABI's numbers into
 * strings.
 *
 * Conventions:
 *
 * - Functions that talk to the kernel return 0 on success or a negative
 *   errno (-ENODEV, ...). They never rely on the caller reading ``errno``,
 *   but may clobber it.
 * - Arrays a function allocates are the caller's to free(); an empty array
 *   is returned as NULL with a count of 0 (free(NULL) is fine).
 * - The string helpers never fail: an unknown value gives "unknown". They
 *   return static strings, or the caller's buffer; no hidden state, so
 *   everything here is thread-safe as long as threads do not share an
 *   output buffer.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef LIBKRDMA_H
#define LIBKRDMA_H

#include <stddef.h>
#include <stdint.h>

#include <linux/krdma.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KRDMA_DEV_PATH "/dev/krdma"

/* Buffer sizes, NUL included, of the formatting helpers below. */
#define KRDMA_GUID_STR_LEN	20	/* "xxxx:xxxx:xxxx:xxxx" */
#define KRDMA_GID_STR_LEN	40	/* "xxxx:xxxx:...:xxxx", 8 groups */
#define KRDMA_GID_IP_STR_LEN	46	/* INET6_ADDRSTRLEN */

/*
 * Open /dev/krdma (O_RDWR | O_CLOEXEC).
 * Returns the file descriptor (>= 0), or -errno: -ENOENT when there is no
 * /dev/krdma (module not loaded), -EACCES when the caller may not open it.
 * close() it when done.
 */
int krdma_open(void);

/*
 * Raw ioctl: ioctl(fd, cmd, arg), returning 0 or -errno. The caller
 * zeroes *arg and sets its ``size``. For commands the library has no
 * wrapper for yet; prefer the wrappers.
 */
int krdma_ioctl(int fd, unsigned long cmd, void *arg);

/* KRDMA_IOC_QUERY_MODULE: what the loaded module is. */
int krdma_query_module(int fd, struct krdma_query_module *out);

/*
 * Query the module and check that a tool built from this header can talk
 * to it: the same KRDMA_ABI_VERSION, and every bit of @features (a mask of
 * KRDMA_FEATURE_*) present. @out may be NULL; when not, it is filled as
 * by krdma_query_module() even when the check fails.
 * Returns 0, -EPROTO on an ABI mismatch, -EPROTONOSUPPORT when a feature
 * is missing (the module is too old for the command), or another -errno.
 */
int krdma_check_module(int fd, uint64_t features,
		       struct krdma_query_module *out);

/*
 * KRDMA_IOC_DEV_LIST: the indexes of the RDMA devices krdma tracks,
 * ascending. Runs the count / allocate / retry-if-it-grew protocol.
 * On success *indexes is a malloc()ed array of *n entries (NULL when
 * *n == 0). @indexes may be NULL to only count the devices.
 * Returns 0, -EAGAIN if the device list kept growing under us, or -errno.
 */
int krdma_dev_list(int fd, uint32_t **indexes, uint32_t *n);

/*
 * KRDMA_IOC_DEV_QUERY of device @dev_index. out->name is always
 * NUL-terminated. Returns 0, -ENODEV when the device is gone, or -errno.
 */
int krdma_dev_query(int fd, uint32_t dev_index, struct krdma_dev_query *out);

/*
 * Find the device named @name (e.g. "rxe0"). On success stores its index in
 * *dev_index and, when @out is not NULL, its krdma_dev_query in *out.
 * Returns 0, -ENODEV when krdma tracks no device of that name, or -errno.
 */
int krdma_dev_find(int fd, const char *name, uint32_t *dev_index,
		   struct krdma_dev_query *out);

/*
 * KRDMA_IOC_PORT_QUERY of port @port (1 to phys_port_cnt) of @dev_index,
 * with the port's valid GID entries. On success *gids is a malloc()ed
 * array of *ngids entries (NULL when there are none); out->num_gids is
 * *ngids, and out->gids points to *gids. @gids may be NULL to skip the GID
 * table (*ngids, when @ngids is not NULL, still gets the count).
 * out->netdev_name is always NUL-terminated.
 * Returns 0, -ENODEV when the device is gone, -EINVAL when @port is not a
 * port of the device, -EAGAIN if the GID table kept growing, or -errno.
 */
int krdma_port_query(int fd, uint32_t dev_index, uint32_t port,
		     struct krdma_port_query *out,
		     struct krdma_gid_entry **gids, uint32_t *ngids);

/* Names of ABI values. Unknown values give "unknown". */

/* KRDMA_TRANSPORT_*: "InfiniBand", "RoCE", "iWARP", "other" */
const char *krdma_transport_str(uint32_t transport);
/* KRDMA_PORT_*: "NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER" */
const char *krdma_port_state_str(uint32_t state);
/*
 * krdma_port_query.phys_state (enum ib_port_phys_state): "SLEEP",
 * "POLLING", "DISABLED", "TRAINING", "LINK_UP", "LINK_ERROR_RECOVERY",
 * "PHY_TEST" (0 gives "NOP")
 */
const char *krdma_port_phys_state_str(uint32_t phys_state);
/* KRDMA_LINK_LAYER_*: "unspecified", "InfiniBand", "Ethernet" */
const char *krdma_link_layer_str(uint32_t link_layer);
/* KRDMA_GID_TYPE_*: "IB", "RoCE v1", "RoCE v2" */
const char *krdma_gid_type_str(uint32_t type);
/* KRDMA_ATOMIC_*: "none", "HCA", "GLOB" */
const char *krdma_atomic_cap_str(uint32_t atomic_cap);
/* krdma_port_query.active_width: "1X", "2X", "4X", "8X", "12X" */
const char *krdma_port_width_str(uint32_t active_width);
/*
 * krdma_port_query.active_speed, per lane: "2.5 Gbps (SDR)",
 * "5.0 Gbps (DDR)", ..., "200.0 Gbps (XDR)"
 */
const char *krdma_port_speed_str(uint32_t active_speed);
/*
 * One bit of krdma_query_module.features (a single KRDMA_FEATURE_* bit):
 * "dev_query", ...; NULL for a bit this library does not know.
 */
const char *krdma_feature_str(uint64_t feature_bit);

/* Formatting helpers; each returns @buf. */

/* A GUID as ibv_devinfo prints it: "xxxx:xxxx:xxxx:xxxx". */
char *krdma_guid_str(uint64_t guid, char buf[KRDMA_GUID_STR_LEN]);
/* A GID in full, as ibv_devinfo -v prints it: 8 groups of 4 hex digits. */
char *krdma_gid_str(const uint8_t gid[16], char buf[KRDMA_GID_STR_LEN]);
/*
 * A GID as an IP address: an IPv4-mapped GID (::ffff:a.b.c.d) as
 * "a.b.c.d", anything else as IPv6 ("fe80::1").
 */
char *krdma_gid_ip_str(const uint8_t gid[16], char buf[KRDMA_GID_IP_STR_LEN]);

/*
 * Advice for an error a libkrdma function returned (-errno or errno):
 * what probably went wrong and what to do, e.g. for -ENOENT from
 * krdma_open() "/dev/krdma not found: is krdma.ko loaded? ...".
 * NULL when there is no advice beyond strerror().
 */
const char *krdma_strerror_hint(int err);

/*
 * Connections, buffers and transfers. Each returns 0 (or a count) or
 * -errno, as the ioctl it wraps; see <linux/krdma.h> for the meanings.
 */

/* "198.18.0.1" or "2001:2::1" and a port -> struct krdma_addr */
int krdma_parse_addr(const char *host, uint32_t port, struct krdma_addr *out);
/*
 * The same for an address or a host name (getaddrinfo(): its first IPv4
 * or IPv6 address, in the order of /etc/gai.conf). Returns 0, or the
 * EAI_* error of getaddrinfo() for gai_strerror() (EAI_SYSTEM: errno
 * says why; EAI_NONAME also when the name has no IP address).
 */
int krdma_resolve_addr(const char *host, uint32_t port,
		       struct krdma_addr *out);
/* "ip:port" or "[ip6]:port" */
char *krdma_addr_str(const struct krdma_addr *a, char *buf, size_t len);
int krdma_listen_on(int fd, const struct krdma_addr *addr, uint32_t backlog,
		    uint32_t *handle, struct krdma_addr *bound);
/* The same with KRDMA_LISTEN_* flags */
int krdma_listen_flags(int fd, const struct krdma_addr *addr,
		       uint32_t backlog, uint32_t flags, uint32_t *handle,
		       struct krdma_addr *bound);
int krdma_accept_conn(int fd, uint32_t listener, uint32_t flags,
		      uint32_t timeout_ms, uint32_t *conn);
/*
 * The same, posting @nrecvs RECVs (KRDMA_OP_RECV, conn 0) on the
 * connection before it is accepted: for a listener made with
 * KRDMA_LISTEN_DEFER_ACCEPT (KRDMA_FEATURE_EARLY_RECVS)
 */
int krdma_accept_recvs(int fd, uint32_t listener, uint32_t flags,
		       uint32_t timeout_ms, const struct krdma_op *recvs,
		       uint32_t nrecvs, uint32_t *conn);
/*
 * KRDMA_IOC_LISTEN_QUERY (KRDMA_FEATURE_LISTEN_QUERY): the listener's
 * address and backlog, and the connect requests it refused (-ENOENT: not
 * a listener of this file; -ENOTTY: a module without the command)
 */
int krdma_listener_info(int fd, uint32_t listener,
			struct krdma_listen_query *out);
int krdma_connect_to(int fd, const struct krdma_addr *dst,
		     uint32_t timeout_ms, uint32_t *conn);
/* The same from a given local address (src: NULL or family 0 for any) */
int krdma_connect_from(int fd, const struct krdma_addr *dst,
		       const struct krdma_addr *src, uint32_t timeout_ms,
		       uint32_t *conn);
/* The same with KRDMA_CONNECT_* flags */
int krdma_connect_flags(int fd, const struct krdma_addr *dst,
			const struct krdma_addr *src, uint32_t flags,
			uint32_t timeout_ms, uint32_t *conn);
/*
 * The same, posting @nrecvs RECVs (KRDMA_OP_RECV, conn 0) before the
 * connect request is sent (KRDMA_FEATURE_EARLY_RECVS): the peer may SEND
 * at once. They complete with the new handle; none does if this fails.
 */
int krdma_connect_recvs(int fd, const struct krdma_addr *dst,
			const struct krdma_addr *src, uint32_t flags,
			uint32_t timeout_ms, const struct krdma_op *recvs,
			uint32_t nrecvs, uint32_t *conn);
int krdma_disconnect_conn(int fd, uint32_t conn);
int krdma_conn_info(int fd, uint32_t conn, struct krdma_conn_query *out);
int krdma_destroy_handle(int fd, uint32_t handle);
int krdma_buf_register(int fd, void *addr, uint64_t length, uint32_t access,
		       uint32_t *handle);
int krdma_grant_window(int fd, uint32_t conn, uint32_t buf, uint64_t offset,
		       uint64_t length, uint32_t access, uint32_t *handle,
		       struct krdma_token *token);
/* *submitted is set even on failure: the ops before the failing one went */
int krdma_submit_ops(int fd, struct krdma_op *ops, uint32_t count,
		     uint32_t flags, uint32_t *submitted);
/* Up to max completions, waiting up to timeout_ms for the first: count */
int krdma_poll_wc(int fd, struct krdma_completion *wc, uint32_t max,
		  uint32_t timeout_ms);
/*
 * The file's completion queue as a ring mapped into the process
 * (KRDMA_FEATURE_RING): completions are taken with no system call. Once
 * set up, krdma_poll_wc() on the file fails with -EBUSY.
 */
struct krdma_ring {
	void *map;
	size_t map_size;
	uint32_t *head;			/* the consumer's: written here */
	const uint32_t *tail;		/* the kernel's */
	uint32_t mask;
	uint32_t entries;
	const struct krdma_completion *cqes;
};

/*
 * RING_SETUP (@entries 0: the queue's size; else a power of two, 64 to
 * the module's ucq_entries) and the mapping: 0 or -errno (-EBUSY:
 * operations in flight or completions waiting, or another size already
 * set up). If only the mapping fails, the file stays in ring mode: call
 * again to map it. One consumer per ring: whoever takes completions from
 * it (a thread, or one process after fork()) is the only one.
 */
int krdma_ring_setup(int fd, uint32_t entries, struct krdma_ring *ring);
void krdma_ring_unmap(struct krdma_ring *ring);
/*
 * Up to @max completions that are there now, oldest first: how many (0
 * also when head was made garbage: more than the ring holds appears)
 */
uint32_t krdma_ring_take(struct krdma_ring *ring,
			 struct krdma_completion *wc, uint32_t max);
/*
 * As krdma_poll_wc(), from the ring: waits in poll() up to @timeout_ms
 * (-1: no limit) for the first. Count, or -errno (-EBADF: @fd is not
 * open).
 */
int krdma_ring_wait(int fd, struct krdma_ring *ring,
		    struct krdma_completion *wc, uint32_t max, int timeout_ms);

/*
 * KRDMA_REFUSED_*, why a listener refused a connect request: "version",
 * "not krdma", "backlog full", "no resources"
 */
const char *krdma_refused_str(uint32_t reason);
/*
 * The counter of @q for KRDMA_REFUSED_* @reason (&q->refused_version for
 * KRDMA_REFUSED_VERSION, ...); NULL for a reason this library does not
 * know (a newer module's: only q->refused counts it)
 */
__u64 *krdma_refused_counter(struct krdma_listen_query *q, uint32_t reason);
/*
 * The @i-th (from 0) KRDMA_REFUSED_* reason that krdma_refused_counter()
 * knows, in ascending order; 0 past the last
 */
uint32_t krdma_refused_reason(unsigned int i);
/* "REM_ACCESS_ERR", as ibv_wc_status_str() names them, without IBV_WC_ */
const char *krdma_wc_status_str(uint32_t status);
const char *krdma_opcode_str(uint32_t opcode);
/*
 * What completion status @status (KRDMA_WC_*) means and its likely cause,
 * in plain words; NULL for a status this library does not know.
 */
const char *krdma_wc_status_explain(uint32_t status);
/*
 * Advice for an errno (-errno or errno) of a connection, registration or
 * transfer (ECONNREFUSED, ETIMEDOUT, ENOMEM, ...); falls back to
 * krdma_strerror_hint(). NULL when there is none.
 */
const char *krdma_conn_strerror_hint(int err);
/*
 * Advice for an errno that the ioctl @cmd (KRDMA_IOC_*) returned: for
 * EACCES and EPERM the one cause that the errno contract gives for @cmd
 * (LISTEN: a port below 1024; GRANT: more access than the buffer has, or
 * another process's buffer; SUBMIT: a buffer without LOCAL_WRITE written
 * into, or another process's buffer), otherwise as
 * krdma_conn_strerror_hint() (connections, buffers and transfers) or
 * krdma_strerror_hint() (the rest). NULL when there is none. Opening
 * /dev/krdma is not an ioctl: its EACCES depends on the device node.
 */
const char *krdma_cmd_strerror_hint(unsigned long cmd, int err);

#ifdef __cplusplus
}
#endif

#endif /* LIBKRDMA_H */
