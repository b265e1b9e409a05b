/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * krdma: an in-kernel RDMA transport, userspace ABI of /dev/krdma.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _UAPI_LINUX_KRDMA_H
#define _UAPI_LINUX_KRDMA_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

/**
 * DOC: General ioctl format
 *
 * Every command is ``_IO(KRDMA_TYPE, nr)`` on a file descriptor of
 * /dev/krdma, with a pointer to the command's struct as the argument.
 * The size of the struct is not encoded in the ioctl number: every struct
 * starts with ``__u32 size``, which the caller sets to sizeof() of the
 * struct as it knows it. The kernel reads the struct with
 * copy_struct_from_user(), so:
 *
 * - an older caller (smaller size) keeps working: the fields it does not
 *   know are taken as zero, and every field added later is defined so that
 *   zero keeps the old meaning;
 * - a newer caller (larger size) works as long as the part the kernel does
 *   not know is all zero.
 *
 * Output is written back into the same struct, at most ``size`` bytes,
 * and ``size`` is set to the number of bytes the kernel wrote: the smaller
 * of the caller's size and the kernel's. A newer caller on an older kernel
 * can tell from it which output fields were filled.
 * Structs use only ``__u32`` and ``__aligned_u64`` integers (byte arrays
 * for names and GIDs), have no implicit padding, and every field named
 * ``__reserved`` or ``flags`` must be zero unless a flag is defined for it.
 * Pointers to userspace memory are passed as ``__aligned_u64``.
 *
 * Errors (the ioctl returns -1 and sets errno):
 *
 * - ENOTTY: unknown ioctl command.
 * - EINVAL: ``size`` smaller than the oldest layout of the struct; a
 *   reserved field or unknown flag is non-zero; a field has an invalid
 *   value.
 * - E2BIG: ``size`` is larger than the struct the kernel knows and the
 *   bytes beyond it are not zero, or ``size`` is larger than 4096 (no
 *   struct of this ABI will ever be larger than a page; as clone3()).
 * - EFAULT: the struct, or memory a field points to, cannot be accessed.
 *   A command that makes an object (LISTEN, ACCEPT, CONNECT, BUF_REG,
 *   GRANT) and cannot write its struct back undoes what it did: no
 *   handle exists, nothing stays pinned or charged, a listener's port is
 *   free again, an accepted connection goes back to the accept queue and
 *   a connection made by CONNECT is closed; RING_SETUP leaves the
 *   queue as it was. SUBMIT and POLL: see there.
 * - ENODEV: the RDMA device named by ``dev_index`` does not exist (or has
 *   been removed, e.g. by ``rdma link delete``).
 * - EOPNOTSUPP: the value is valid but not supported by this device.
 * - EOVERFLOW: a value does not fit (an offset plus length wraps, ...).
 * - ENOMEM: the kernel ran out of memory.
 */

/* Not assigned in Documentation/userspace-api/ioctl/ioctl-number.rst */
#define KRDMA_TYPE 0xDA

/* Version of the ABI described by this header; bumped only on breakage. */
#define KRDMA_ABI_VERSION 1

#define KRDMA_CMD_BASE		0x80
#define KRDMA_CMD_QUERY_MODULE	0x80
#define KRDMA_CMD_DEV_LIST	0x81
#define KRDMA_CMD_DEV_QUERY	0x82
#define KRDMA_CMD_PORT_QUERY	0x83
#define KRDMA_CMD_DESTROY	0x84
#define KRDMA_CMD_LISTEN	0x85
#define KRDMA_CMD_ACCEPT	0x86
#define KRDMA_CMD_CONNECT	0x87
#define KRDMA_CMD_DISCONNECT	0x88
#define KRDMA_CMD_CONN_QUERY	0x89
#define KRDMA_CMD_BUF_REG	0x8a
#define KRDMA_CMD_GRANT		0x8b
#define KRDMA_CMD_SUBMIT	0x8c
#define KRDMA_CMD_POLL		0x8d
#define KRDMA_CMD_RING_SETUP	0x8e
#define KRDMA_CMD_LISTEN_QUERY	0x8f

/*
 * Bits of krdma_query_module.features: what this module can do. A caller
 * checks for a bit before it uses the commands behind it.
 */
#define KRDMA_FEATURE_DEV_QUERY		_BITULL(0)	/* DEV_LIST, DEV_QUERY, PORT_QUERY */
#define KRDMA_FEATURE_CONN		_BITULL(1)	/* LISTEN .. POLL */
#define KRDMA_FEATURE_KRDMA_PEER	_BITULL(2)	/* KRDMA_LISTEN_KRDMA_PEER,
							 * KRDMA_CONNECT_KRDMA_PEER
							 */
#define KRDMA_FEATURE_UNSIGNALED	_BITULL(3)	/* KRDMA_OP_F_UNSIGNALED */
#define KRDMA_FEATURE_RING		_BITULL(4)	/* RING_SETUP, mmap */
#define KRDMA_FEATURE_EARLY_RECVS	_BITULL(5)	/* RECVs of CONNECT and
							 * ACCEPT,
							 * KRDMA_LISTEN_DEFER_ACCEPT
							 */
#define KRDMA_FEATURE_LISTEN_QUERY	_BITULL(6)	/* LISTEN_QUERY */

/* Encoding of krdma_query_module.version */
#define KRDMA_VERSION_CODE(major, minor, patch) \
	(((major) << 16) | ((minor) << 8) | (patch))
#define KRDMA_VERSION_MAJOR(code) (((code) >> 16) & 0xff)
#define KRDMA_VERSION_MINOR(code) (((code) >> 8) & 0xff)
#define KRDMA_VERSION_PATCH(code) ((code) & 0xff)

/**
 * struct krdma_query_module - ioctl(KRDMA_IOC_QUERY_MODULE)
 * @size: sizeof(struct krdma_query_module)
 * @flags: Must be 0
 * @abi_version: Output: KRDMA_ABI_VERSION of the running module
 * @version: Output: module version, see KRDMA_VERSION_CODE()
 * @features: Output: KRDMA_FEATURE_* bits
 * @num_devices: Output: number of RDMA devices krdma currently tracks
 * @__reserved: Must be 0
 *
 * Tell what the loaded module is. A tool built against another ABI version
 * compares @abi_version before anything else.
 */
struct krdma_query_module {
	__u32 size;
	__u32 flags;
	__u32 abi_version;
	__u32 version;
	__aligned_u64 features;
	__u32 num_devices;
	__u32 __reserved;
};

#define KRDMA_IOC_QUERY_MODULE _IO(KRDMA_TYPE, KRDMA_CMD_QUERY_MODULE)

/**
 * struct krdma_dev_list - ioctl(KRDMA_IOC_DEV_LIST)
 * @size: sizeof(struct krdma_dev_list)
 * @flags: Must be 0
 * @num_devices: Input: number of entries @dev_indexes can hold.
 *               Output: number of devices krdma tracks. When larger than the
 *               input, only the first (input) entries were written: call
 *               again with a larger array.
 * @__reserved: Must be 0
 * @dev_indexes: Pointer to a __u32 array that receives the device indexes
 *               (the ``ifindex`` that ``rdma link`` shows), ascending. May
 *               be 0 when @num_devices is 0, to ask for the count. Devices
 *               come and go: callers retry while the count grows.
 */
struct krdma_dev_list {
	__u32 size;
	__u32 flags;
	__u32 num_devices;
	__u32 __reserved;
	__aligned_u64 dev_indexes;
};

#define KRDMA_IOC_DEV_LIST _IO(KRDMA_TYPE, KRDMA_CMD_DEV_LIST)

/* krdma_dev_query.transport */
#define KRDMA_TRANSPORT_IB	1	/* InfiniBand */
#define KRDMA_TRANSPORT_ROCE	2	/* RoCE (v1 and/or v2) */
#define KRDMA_TRANSPORT_IWARP	3	/* iWARP */
#define KRDMA_TRANSPORT_OTHER	4	/* anything else (usNIC, ...) */

/* krdma_dev_query.atomic_cap, same meaning as enum ib_atomic_cap */
#define KRDMA_ATOMIC_NONE	0	/* no RDMA atomics */
#define KRDMA_ATOMIC_HCA	1	/* atomic within one device */
#define KRDMA_ATOMIC_GLOB	2	/* atomic also against the CPU */

#define KRDMA_NAME_MAX	64

/**
 * struct krdma_dev_query - ioctl(KRDMA_IOC_DEV_QUERY)
 * @size: sizeof(struct krdma_dev_query)
 * @flags: Must be 0
 * @dev_index: Input: index of the device (from KRDMA_IOC_DEV_LIST)
 * @transport: Output: KRDMA_TRANSPORT_*
 * @name: Output: device name, NUL-terminated (e.g. "rxe0")
 * @node_guid: Output: node GUID as a number, be64_to_cpu() of the GUID's
 *             bytes: ``ibv_devinfo`` prints its 16-bit groups high first
 * @sys_image_guid: Output: system image GUID, as @node_guid
 * @max_mr_size: Output: largest memory registration, in bytes
 * @page_size_cap: Output: page sizes the device supports (bit n: 2^n)
 * @fw_ver: Output: firmware version string, NUL-terminated, as
 *          ``ibv_devinfo`` shows it (empty if the driver has none)
 * @vendor_id: Output: IEEE vendor id
 * @vendor_part_id: Output: vendor part id
 * @hw_ver: Output: hardware version
 * @phys_port_cnt: Output: number of ports, numbered from 1
 * @max_qp: Output: maximum number of queue pairs
 * @max_qp_wr: Output: maximum work requests on one queue
 * @max_send_sge: Output: maximum scatter/gather entries of a send WR
 * @max_recv_sge: Output: maximum scatter/gather entries of a receive WR
 * @max_sge_rd: Output: maximum scatter/gather entries of an RDMA READ
 * @max_cq: Output: maximum number of completion queues
 * @max_cqe: Output: maximum entries of one completion queue
 * @max_mr: Output: maximum number of memory registrations
 * @max_pd: Output: maximum number of protection domains
 * @max_qp_rd_atom: Output: RDMA READ/atomic operations a QP can serve
 * @max_qp_init_rd_atom: Output: RDMA READ/atomic operations a QP can issue
 * @atomic_cap: Output: KRDMA_ATOMIC_*; KRDMA_ATOMIC_NONE means atomic
 *              operations will fail with EOPNOTSUPP (e.g. siw)
 * @max_fast_reg_page_list_len: Output: pages one fast registration can map
 * @__reserved: Must be 0
 *
 * Errors: ENODEV when no device has @dev_index.
 */
struct krdma_dev_query {
	__u32 size;
	__u32 flags;
	__u32 dev_index;
	__u32 transport;
	__u8 name[KRDMA_NAME_MAX];
	__u8 fw_ver[KRDMA_NAME_MAX];
	__aligned_u64 node_guid;
	__aligned_u64 sys_image_guid;
	__aligned_u64 max_mr_size;
	__aligned_u64 page_size_cap;
	__u32 vendor_id;
	__u32 vendor_part_id;
	__u32 hw_ver;
	__u32 phys_port_cnt;
	__u32 max_qp;
	__u32 max_qp_wr;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 max_sge_rd;
	__u32 max_cq;
	__u32 max_cqe;
	__u32 max_mr;
	__u32 max_pd;
	__u32 max_qp_rd_atom;
	__u32 max_qp_init_rd_atom;
	__u32 atomic_cap;
	__u32 max_fast_reg_page_list_len;
	__u32 __reserved;
};

#define KRDMA_IOC_DEV_QUERY _IO(KRDMA_TYPE, KRDMA_CMD_DEV_QUERY)

/* krdma_port_query.state, same values as enum ib_port_state */
#define KRDMA_PORT_NOP		0
#define KRDMA_PORT_DOWN		1
#define KRDMA_PORT_INIT		2
#define KRDMA_PORT_ARMED	3
#define KRDMA_PORT_ACTIVE	4
#define KRDMA_PORT_ACTIVE_DEFER	5

/* krdma_port_query.link_layer */
#define KRDMA_LINK_LAYER_UNSPECIFIED	0
#define KRDMA_LINK_LAYER_INFINIBAND	1
#define KRDMA_LINK_LAYER_ETHERNET	2

/* krdma_gid_entry.type */
#define KRDMA_GID_TYPE_IB	0	/* InfiniBand or iWARP GID */
#define KRDMA_GID_TYPE_ROCE_V1	1	/* RoCE v1 (Ethernet, no IP) */
#define KRDMA_GID_TYPE_ROCE_V2	2	/* RoCE v2 (UDP/IP): the GID is the IP */

#define KRDMA_IFNAME_MAX 16

/**
 * struct krdma_gid_entry - one valid entry of a port's GID table
 * @gid: the GID, network byte order. For RoCE v2 this is the IPv6 address,
 *       or the IPv4-mapped IPv6 address (::ffff:a.b.c.d) of an IPv4
 *       address.
 * @index: index of the entry in the port's GID table
 * @type: KRDMA_GID_TYPE_*
 * @netdev_ifindex: ifindex of the network device the GID belongs to, 0 if
 *                  none
 * @__reserved: Written as 0
 */
struct krdma_gid_entry {
	__u8 gid[16];
	__u32 index;
	__u32 type;
	__u32 netdev_ifindex;
	__u32 __reserved;
};

/**
 * struct krdma_port_query - ioctl(KRDMA_IOC_PORT_QUERY)
 * @size: sizeof(struct krdma_port_query)
 * @flags: Must be 0
 * @dev_index: Input: index of the device
 * @port_num: Input: port number, 1 to phys_port_cnt
 * @state: Output: KRDMA_PORT_* (logical state)
 * @phys_state: Output: physical state, as enum ib_port_phys_state
 *              (5 is LinkUp, 3 is Disabled)
 * @max_mtu: Output: largest RDMA MTU of the port, in bytes
 * @active_mtu: Output: RDMA MTU in use, in bytes
 * @link_layer: Output: KRDMA_LINK_LAYER_*
 * @gid_tbl_len: Output: size of the port's GID table
 * @netdev_ifindex: Output: ifindex of the port's network device, 0 if none
 *                  or in another network namespace than the file's
 * @num_gids: Input: entries @gids can hold. Output: number of valid GID
 *            entries of the port; when larger than the input, only the
 *            first (input) entries were written. An entry of a network
 *            device in another namespace than the file's is not counted
 *            nor written (on RoCE its GID is that device's address).
 * @netdev_name: Output: name of the port's network device, NUL-terminated,
 *               empty if none or in another network namespace
 * @gids: Pointer to an array of struct krdma_gid_entry, or 0 when
 *        @num_gids is 0
 * @active_speed: Output: link speed, as ib_port_attr.active_speed
 * @active_width: Output: link width, as ib_port_attr.active_width
 * @__reserved: Must be 0
 *
 * Errors: ENODEV when no device has @dev_index; EINVAL when @port_num is
 * not a port of the device.
 */
struct krdma_port_query {
	__u32 size;
	__u32 flags;
	__u32 dev_index;
	__u32 port_num;
	__u32 state;
	__u32 phys_state;
	__u32 max_mtu;
	__u32 active_mtu;
	__u32 link_layer;
	__u32 gid_tbl_len;
	__u32 netdev_ifindex;
	__u32 num_gids;
	__u8 netdev_name[KRDMA_IFNAME_MAX];
	__aligned_u64 gids;
	__u32 active_speed;
	__u32 active_width;
	__aligned_u64 __reserved;
};

#define KRDMA_IOC_PORT_QUERY _IO(KRDMA_TYPE, KRDMA_CMD_PORT_QUERY)

/**
 * DOC: Objects and handles
 *
 * Listeners, connections, buffers and grants are objects of the file
 * descriptor that created them, named by a handle (a non-zero __u32, unique
 * in that file). KRDMA_IOC_DESTROY ends any of them; closing the file ends
 * all of them (connections are disconnected and drained first). A handle
 * means nothing in another file, even one of the same process: every
 * command that takes a handle gives ENOENT for one that is not an object
 * of this file or not of the expected kind.
 *
 * Further errors of these commands:
 *
 * - ENOENT: no such handle in this file.
 * - ENOTCONN: the connection is not (or no longer) connected.
 * - ETIMEDOUT: a connect, accept or wait timed out.
 * - EAGAIN: non-blocking accept with nothing to accept; submit (or
 *   CONNECT, ACCEPT with RECVs) with no room left in the completion
 *   queue, or (a large SEND or RECV that needs a local window) no room in
 *   the send queue to register it.
 * - ECONNABORTED: ACCEPT on a KRDMA_LISTEN_DEFER_ACCEPT listener: the
 *   request it took failed while it was accepted; the next may not.
 * - ENOSPC: CONNECT or ACCEPT with RECVs and no room for them in the
 *   completion queue.
 * - ECONNREFUSED: nobody listens there, the listener is closing, or a
 *   peer that is not krdma rejected us.
 * - EBUSY: CONNECT to a krdma listener whose backlog of connections not
 *   yet accepted is full (it said so in its reject): try again later.
 * - ENOBUFS: also CONNECT when the krdma listener had no resources (memory,
 *   a QP) for the connection.
 * - EPROTONOSUPPORT: CONNECT to a krdma peer that speaks another version
 *   of the handshake (Documentation/protocol.rst).
 * - EHOSTUNREACH, ENETUNREACH: no RDMA route to the address.
 * - EADDRINUSE: the address and port are taken.
 * - EACCES: LISTEN on a port below 1024 without CAP_NET_BIND_SERVICE
 *   (rdma_cm's rule, as for sockets).
 * - ENOMEM: also when pinning a buffer would pass RLIMIT_MEMLOCK (see
 *   ``ulimit -l``) without CAP_IPC_LOCK.
 * - EMSGSIZE: a SEND or RECV larger than the connection can carry in one
 *   message: it may span at most as many pages as the queue has SGEs
 *   (CONN_QUERY's max_send_sge, max_recv_sge), or, as a single range of
 *   a buffer, go through a local window of the whole buffer, which must
 *   fit in one registration (max_grant_pages; larger on siw).
 * - ENOBUFS: a RECV with the receive queue full.
 * - EPERM: an operation or grant that names a buffer registered by
 *   another process (its memory is that process's: a child after fork(),
 *   a program after execve() or a process the file was passed to
 *   registers its own).
 * - EPROTO: CONNECT with KRDMA_CONNECT_KRDMA_PEER to a peer that is not
 *   krdma; a token's key table read from the peer is not the token's.
 * - EADDRNOTAVAIL: LISTEN or CONNECT from an address no RDMA device of
 *   this namespace has (or a port taken on another address).
 * - ENFILE: LISTEN or CONNECT on an iWARP device when a TCP socket (the
 *   driver's, or the one that holds a connect's source port) could not
 *   be created (the system's file limit, or no memory for it).
 * - ECONNRESET: the peer disconnected (CONN_QUERY's error); CONNECT also
 *   when the connection failed right after it was established.
 * - EOPNOTSUPP: also READ or atomics on a connection whose peer takes
 *   no RDMA READ (initiator_depth 0 in CONN_QUERY).
 * - EINTR: a blocking call was interrupted by a signal.
 * - EXDEV: CONNECT on an iWARP device, or LISTEN on an iWARP device's
 *   address or a wildcard one, from a thread in another network
 *   namespace than the file's: the driver's TCP socket would be made in
 *   the thread's namespace, not where the address was resolved.
 * - EMFILE: CONNECT, ACCEPT, BUF_REG or GRANT when the file's user holds
 *   as many connections (buffers, grants) through /dev/krdma as the
 *   module parameter max_conns_per_user (max_bufs_per_user,
 *   max_grants_per_user) allows; GRANT, and a SUBMIT of a
 *   SEND or RECV that needs a new local window (see EMSGSIZE), when the
 *   pages of the windows of the user's buffers would pass
 *   max_window_pages_per_user (each window counts its pages, however
 *   many windows map the same ones), and such a SUBMIT also when the
 *   user holds max_grants_per_user grants (a local window counts as a
 *   grant); LISTEN when the backlogs of the user's
 *   listeners would pass max_backlog_per_user; CONNECT, ACCEPT and
 *   LISTEN also when the user's queue entries would pass
 *   max_queue_depth_per_user: a connection counts sq_depth + rq_depth
 *   as krdma uses them (0 is 128; each clamped to 16..4096), a listener
 *   its backlog times that of the connections it accepts. The user is
 *   the effective uid of the process that opened the file; every file
 *   of that user counts. CAP_SYS_RESOURCE passes the limits. An ACCEPT
 *   refused so leaves the connection waiting to be accepted.
 */

/**
 * struct krdma_addr - an IP address and port
 * @family: AF_INET or AF_INET6; 0 for "none/any" where allowed (then
 *          every other field is 0)
 * @port: port number, host byte order
 * @addr: the address, network byte order: 4 bytes for AF_INET, 16 for
 *        AF_INET6; the rest zero
 * @scope_id: IPv6 scope (interface index) for link-local addresses, or 0;
 *            0 for AF_INET
 * @__reserved: Must be 0
 */
struct krdma_addr {
	__u32 family;
	__u32 port;
	__u8 addr[16];
	__u32 scope_id;
	__u32 __reserved;
};

/**
 * struct krdma_destroy - ioctl(KRDMA_IOC_DESTROY)
 * @size: sizeof(struct krdma_destroy)
 * @flags: Must be 0
 * @handle: the object to end
 * @__reserved: Must be 0
 *
 * Ends a listener (pending connections are refused), a connection
 * (disconnects; operations still in flight end with
 * KRDMA_WC_WR_FLUSH_ERR), a buffer (its grants are revoked first; pages
 * stay pinned, and the buffer counts against max_bufs_per_user, until
 * the handles of its grants are destroyed too and the last operation
 * using them completes) or a grant
 * (its token stops working at once). On iWARP (siw) the revocation of a
 * window the peer may READ waits, up to 10 s, until the device has sent
 * the READ responses it started from it; the pages stay pinned (and
 * charged, to RLIMIT_MEMLOCK and max_bufs_per_user) until then, or, when
 * that does not come, until the connection is destroyed.
 */
struct krdma_destroy {
	__u32 size;
	__u32 flags;
	__u32 handle;
	__u32 __reserved;
};

#define KRDMA_IOC_DESTROY _IO(KRDMA_TYPE, KRDMA_CMD_DESTROY)

/* krdma_listen.flags */
#define KRDMA_LISTEN_KRDMA_PEER	_BITUL(0)	/* reject peers that are not
						 * krdma
						 */
#define KRDMA_LISTEN_DEFER_ACCEPT _BITUL(1)	/* accept each request in
						 * its KRDMA_IOC_ACCEPT
						 */

/**
 * struct krdma_listen - ioctl(KRDMA_IOC_LISTEN)
 * @size: sizeof(struct krdma_listen)
 * @flags: KRDMA_LISTEN_*: KRDMA_LISTEN_KRDMA_PEER rejects a connect request
 *         that carries no krdma handshake (a plain verbs peer), with the
 *         reason "not krdma" (Documentation/protocol.rst);
 *         KRDMA_LISTEN_DEFER_ACCEPT leaves each request unaccepted until
 *         a KRDMA_IOC_ACCEPT takes it (see struct krdma_accept)
 * @addr: Input: address to listen on (all-zero address: every address of
 *        the family); port 0 picks a free port. Output: the bound address
 *        and port.
 * @backlog: Input: connections that may wait to be accepted (0: 16, at
 *           most 4096). The backlogs of a user's listeners count against
 *           the module parameter max_backlog_per_user, and the backlog
 *           times the queue depths against max_queue_depth_per_user
 *           (EMFILE past either)
 * @handle: Output: the listener
 * @sq_depth: Input: send queue depth of accepted connections (0: default)
 * @rq_depth: Input: receive queue depth of accepted connections (0:
 *            default)
 *
 * Listens in the network namespace of the process that opened the file;
 * on an iWARP device's address, or a wildcard one, the calling thread
 * must be in that namespace too (else EXDEV: the driver's listening TCP
 * socket would be made in the thread's). Connections are accepted by
 * the kernel as they arrive (up to @backlog waiting) and handed out by
 * KRDMA_IOC_ACCEPT. With
 * KRDMA_LISTEN_DEFER_ACCEPT, requests wait unaccepted instead (up to
 * @backlog), and each is accepted by the KRDMA_IOC_ACCEPT that takes it:
 * the peer's connect completes only then, so its first SEND finds the
 * RECVs that ACCEPT posted. A peer gives up on a request not accepted
 * in time (a krdma CONNECT after its timeout, 10 s by default; siw after
 * 10 s whatever the timeout).
 */
struct krdma_listen {
	__u32 size;
	__u32 flags;
	struct krdma_addr addr;
	__u32 backlog;
	__u32 handle;
	__u32 sq_depth;
	__u32 rq_depth;
};

#define KRDMA_IOC_LISTEN _IO(KRDMA_TYPE, KRDMA_CMD_LISTEN)

/* krdma_accept.flags */
#define KRDMA_ACCEPT_NONBLOCK	_BITUL(0)	/* EAGAIN instead of waiting */

/* Timeouts in milliseconds; this one means "no limit" */
#define KRDMA_TIMEOUT_INFINITE	0xffffffffU

/* Most RECVs one CONNECT or ACCEPT may post (and at most rq_depth) */
#define KRDMA_EARLY_RECVS_MAX	256

/**
 * struct krdma_accept - ioctl(KRDMA_IOC_ACCEPT)
 * @size: sizeof(struct krdma_accept)
 * @flags: KRDMA_ACCEPT_*
 * @listener: Input: the listener
 * @timeout_ms: Input: how long to wait for a connection (or request);
 *              0: do not wait (as KRDMA_ACCEPT_NONBLOCK);
 *              KRDMA_TIMEOUT_INFINITE: no limit
 * @handle: Output: the new, connected connection; valid only when the
 *          call returns 0
 * @recv_count: Input: number of RECVs at @recvs, 0 to
 *              KRDMA_EARLY_RECVS_MAX; not 0 only on a listener made with
 *              KRDMA_LISTEN_DEFER_ACCEPT (else EINVAL)
 * @recvs: Input: pointer to an array of @recv_count struct krdma_op, each
 *         a KRDMA_OP_RECV with @conn 0 (the connection is the new one);
 *         0 when @recv_count is 0
 *
 * On a listener made with KRDMA_LISTEN_DEFER_ACCEPT, ACCEPT takes the
 * oldest request, posts the @recvs on its queue pair, and only then
 * accepts it, waiting (up to 10 s more) until it is established. The
 * peer's first messages therefore find those RECVs, on every transport.
 * They complete as RECVs of a SUBMIT would, with the new handle, and
 * never before the call returns it. When the call fails, none of them
 * completes, none is posted any more, and the request is refused or
 * torn down: the peer's connect fails. ECONNABORTED: the request failed
 * while it was accepted (the peer gave up, or its connection failed at
 * once, or was not established within 10 s); call ACCEPT again for the
 * next one. The errors of the @recvs, checked before a request is taken,
 * are those of KRDMA_IOC_SUBMIT for a RECV, ENOBUFS for more than the
 * listener's rq_depth, and ENOSPC when the completion queue has no room
 * for them (this call does not wait for room); EMSGSIZE, for a RECV that
 * needs the buffer's local window (more pages than max_recv_sge), comes
 * only once the request's queue pair exists, and refuses the request.
 * With KRDMA_ACCEPT_NONBLOCK (or @timeout_ms 0) the call does not wait
 * for a request, but does wait for the one it took to be established.
 * A request that no ACCEPT took within 30 s is refused.
 */
struct krdma_accept {
	__u32 size;
	__u32 flags;
	__u32 listener;
	__u32 timeout_ms;
	__u32 handle;
	__u32 recv_count;
	__aligned_u64 recvs;
};

#define KRDMA_IOC_ACCEPT _IO(KRDMA_TYPE, KRDMA_CMD_ACCEPT)

/* krdma_connect.flags */
#define KRDMA_CONNECT_KRDMA_PEER _BITUL(0)	/* fail (EPROTO) if the peer
						 * is not krdma
						 */

/**
 * struct krdma_connect - ioctl(KRDMA_IOC_CONNECT)
 * @size: sizeof(struct krdma_connect)
 * @flags: KRDMA_CONNECT_*: KRDMA_CONNECT_KRDMA_PEER fails the connect with
 *         EPROTO if the peer accepts without a krdma handshake
 * @dst: Input: address and port of the listener
 * @src: Input: local address to connect from; family 0: any
 * @timeout_ms: Input: limit for the whole connect (0: 10 seconds); on
 *              iWARP not while the driver's TCP connect runs (siw: until
 *              the peer answers or the last SYN retry; a signal ends it,
 *              and so does the device's removal: ENODEV); that connect
 *              is made in the calling thread, which must be in the
 *              file's network namespace (else EXDEV)
 * @sq_depth: Input: send queue depth (0: default)
 * @rq_depth: Input: receive queue depth (0: default)
 * @handle: Output: the connection
 * @recv_count: Input: number of RECVs at @recvs, 0 to KRDMA_EARLY_RECVS_MAX
 * @__reserved: Must be 0
 * @recvs: Input: pointer to an array of @recv_count struct krdma_op, each
 *         a KRDMA_OP_RECV with @conn 0 (the connection is the new one);
 *         0 when @recv_count is 0
 *
 * Resolves the address, the route, creates the queue pair and connects,
 * blocking until it is connected or failed. The @recvs are posted on the
 * queue pair before the connect request is sent, so the peer's first
 * messages find them even when they arrive before this call returns (on
 * iWARP they can). They complete as RECVs of a SUBMIT would, with the
 * new handle, and never before the call returns it. When the call fails,
 * none of them completes. Their errors are those of KRDMA_IOC_SUBMIT for
 * a RECV, ENOBUFS for more than @rq_depth, ENOSPC when the completion
 * queue has no room for them (not waited out), and EMSGSIZE for a RECV
 * that needs the buffer's local window (more pages than max_recv_sge).
 */
struct krdma_connect {
	__u32 size;
	__u32 flags;
	struct krdma_addr dst;
	struct krdma_addr src;
	__u32 timeout_ms;
	__u32 sq_depth;
	__u32 rq_depth;
	__u32 handle;
	__u32 recv_count;
	__u32 __reserved;
	__aligned_u64 recvs;
};

#define KRDMA_IOC_CONNECT _IO(KRDMA_TYPE, KRDMA_CMD_CONNECT)

/**
 * struct krdma_disconnect - ioctl(KRDMA_IOC_DISCONNECT)
 * @size: sizeof(struct krdma_disconnect)
 * @flags: Must be 0
 * @handle: the connection
 * @__reserved: Must be 0
 *
 * Disconnects: operations in flight complete with an error status. The
 * handle stays valid (for CONN_QUERY) until destroyed.
 */
struct krdma_disconnect {
	__u32 size;
	__u32 flags;
	__u32 handle;
	__u32 __reserved;
};

#define KRDMA_IOC_DISCONNECT _IO(KRDMA_TYPE, KRDMA_CMD_DISCONNECT)

/* krdma_conn_query.state */
#define KRDMA_CONN_CONNECTING	1
#define KRDMA_CONN_CONNECTED	2
#define KRDMA_CONN_ERROR	3	/* peer gone, device removed, ... */
#define KRDMA_CONN_CLOSED	4	/* disconnected by us */

/**
 * struct krdma_conn_query - ioctl(KRDMA_IOC_CONN_QUERY)
 * @size: sizeof(struct krdma_conn_query)
 * @flags: Must be 0
 * @handle: Input: the connection
 * @state: Output: KRDMA_CONN_*
 * @local: Output: local address and port
 * @peer: Output: peer address and port
 * @dev_index: Output: the RDMA device
 * @port_num: Output: its port
 * @qp_num: Output: local queue pair number
 * @peer_qp_num: Output: the peer's queue pair number (0 on iWARP, whose
 *               handshake does not carry it)
 * @sq_depth: Output: send queue depth
 * @rq_depth: Output: receive queue depth
 * @peer_rq_depth: Output: the peer's receive queue depth, from the
 *                 handshake (the RECVs it can have posted at once)
 * @peer_features: Output: feature bits the peer announced
 * @error: Output: when @state is KRDMA_CONN_ERROR, why: a positive errno
 * @initiator_depth: Output: RDMA READs and atomics this side may have in
 *                   flight at once, as agreed in the handshake; 0 means
 *                   the peer takes none: READ and atomics fail with
 *                   EOPNOTSUPP
 * @responder_resources: Output: RDMA READs and atomics of the peer this
 *                       side serves at once
 * @__reserved: Must be 0
 * @max_grant_pages: Output: the most pages one GRANT (one token) may span
 *                   on this connection's device (E2BIG past it); the
 *                   window's bytes plus its offset in its first page
 *                   must fit in this many pages. 0 from a module older
 *                   than this field (``size`` tells). Windows larger
 *                   than one registration of the device come as tokens
 *                   with a key table (struct krdma_token).
 * @max_send_sge: Output: pages one SEND may span without a local window
 * @max_recv_sge: Output: pages one RECV may span without a local window
 * @__reserved2: Must be 0
 */
struct krdma_conn_query {
	__u32 size;
	__u32 flags;
	__u32 handle;
	__u32 state;
	struct krdma_addr local;
	struct krdma_addr peer;
	__u32 dev_index;
	__u32 port_num;
	__u32 qp_num;
	__u32 peer_qp_num;
	__u32 sq_depth;
	__u32 rq_depth;
	__u32 peer_rq_depth;
	__u32 peer_features;
	__u32 error;
	__u32 initiator_depth;
	__u32 responder_resources;
	__u32 __reserved;
	__u32 max_grant_pages;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 __reserved2;
};

#define KRDMA_IOC_CONN_QUERY _IO(KRDMA_TYPE, KRDMA_CMD_CONN_QUERY)

/* Access rights of buffers and grants */
/* LOCAL_WRITE: krdma may write into it (READ, RECV, atomic results) */
#define KRDMA_ACCESS_LOCAL_WRITE	_BITUL(0)
#define KRDMA_ACCESS_REMOTE_READ	_BITUL(1)
#define KRDMA_ACCESS_REMOTE_WRITE	_BITUL(2)
#define KRDMA_ACCESS_REMOTE_ATOMIC	_BITUL(3)

/**
 * struct krdma_buf_reg - ioctl(KRDMA_IOC_BUF_REG)
 * @size: sizeof(struct krdma_buf_reg)
 * @flags: Must be 0
 * @addr: Input: start of the buffer (any alignment)
 * @length: Input: its length in bytes, not 0
 * @access: Input: KRDMA_ACCESS_*: LOCAL_WRITE if krdma is to write into
 *          it, and the remote rights that grants of it may give
 * @handle: Output: the buffer
 *
 * Pins the pages, once (they stay in memory at the same physical address
 * until the buffer is destroyed and no operation or grant uses them), and
 * charges them to the calling user's RLIMIT_MEMLOCK, unless it has
 * CAP_IPC_LOCK. The charge belongs to the user (uid), not the process: it
 * is released when the pages are, whatever the process does meanwhile
 * (exec, exit, passing the file on), and all processes of one user share
 * one limit, as with io_uring. A buffer is not tied to a device or
 * connection. Grants and operations use these pages: unmapping or
 * remapping the memory later does not change what they see.
 *
 * Errors: EINVAL (@length 0, unknown access bit), EOVERFLOW (@addr +
 * @length wraps), EFAULT (not the caller's memory, PROT_NONE memory, or
 * memory that is not writable when @access lets anything write it:
 * LOCAL_WRITE, REMOTE_WRITE or REMOTE_ATOMIC), ENOMEM (past
 * RLIMIT_MEMLOCK, checked before anything is allocated, or out of memory),
 * EMFILE (the user holds max_bufs_per_user buffers: a buffer counts until
 * it is destroyed and no grant handle, operation or window waiting for
 * the device holds it), EINTR (a fatal signal while the pages were
 * faulted in).
 */
struct krdma_buf_reg {
	__u32 size;
	__u32 flags;
	__aligned_u64 addr;
	__aligned_u64 length;
	__u32 access;
	__u32 handle;
};

#define KRDMA_IOC_BUF_REG _IO(KRDMA_TYPE, KRDMA_CMD_BUF_REG)

/**
 * struct krdma_token - what a peer needs to access a granted window
 * @addr: address of the first byte of the window, as the peer must name it
 *        in RDMA operations (remote_addr of a verbs work request)
 * @length: length of the window
 * @rkey: the remote key (rkey of a verbs work request) of the window when
 *        @seg_shift is 0; else the key of the window's key table
 * @access: KRDMA_ACCESS_REMOTE_* rights granted
 * @seg_shift: 0 when one registration maps the whole window; else the
 *             window's address range is split into pieces of
 *             2^@seg_shift bytes, each with its own rkey, listed in the
 *             key table
 * @tag: 0 when @seg_shift is 0; else the key table's first word (it tells
 *       a table from a stale one)
 *
 * The owner sends the token to its peer (over SEND, or any channel). On
 * the wire it is this struct, 32 bytes, little-endian, in this order. A
 * peer may send only the first 24 (the receiver then zeroes the rest,
 * which SUBMIT requires): that is a token of one registration. A plain
 * verbs peer uses remote_addr = @addr + offset and rkey = @rkey when
 * @seg_shift is 0. Otherwise the rkey of remote address A (any byte of
 * the window) is entry A >> @seg_shift of the key table, which the peer
 * reads once by RDMA READ with rkey @rkey at remote address 0: 8 + 4 * n
 * bytes, n = ((@addr + @length - 1) >> @seg_shift) + 1, little-endian
 * u32s: @tag, n, then the n keys. An operation may not cross a multiple
 * of 2^@seg_shift (krdma splits its own operations there).
 * Documentation/protocol.rst describes it. The token works only on the
 * connection it was granted on.
 */
struct krdma_token {
	__aligned_u64 addr;
	__aligned_u64 length;
	__u32 rkey;
	__u32 access;
	__u32 seg_shift;
	__u32 tag;
};

/**
 * struct krdma_grant - ioctl(KRDMA_IOC_GRANT)
 * @size: sizeof(struct krdma_grant)
 * @flags: Must be 0
 * @conn: Input: the connection the token will work on
 * @buf: Input: the buffer
 * @offset: Input: start of the window in the buffer
 * @length: Input: length of the window, not 0
 * @access: Input: KRDMA_ACCESS_REMOTE_* rights, a subset of the buffer's
 * @handle: Output: the grant, for KRDMA_IOC_DESTROY (revoke)
 * @token: Output: the token to send to the peer
 *
 * The window maps the buffer's pinned pages with the device's fast
 * registration: nothing is pinned or charged again, and what it exposes
 * does not change if the process unmaps or remaps the memory. A read-only
 * buffer (registered with REMOTE_READ only) can be granted REMOTE_READ.
 * A window larger than one registration of the device maps (256 pages
 * on siw, 262144 on rxe) is registered in pieces, and its token names a
 * key table (struct krdma_token): still one token, of any size up to
 * CONN_QUERY's max_grant_pages.
 *
 * Errors: EOVERFLOW when @offset + @length wraps; ENOENT for an unknown
 * handle, or a buffer destroyed meanwhile; EMFILE when the file's user
 * holds max_grants_per_user grants, or when the window's pages would
 * take the user past max_window_pages_per_user; EINVAL when the window is
 * past the end of the buffer or @access is 0 or not REMOTE_* bits; then
 * EACCES when @access asks for more than the buffer allows (so
 * REMOTE_WRITE on a read-only buffer is EACCES, whatever the device:
 * EACCES wins over EOPNOTSUPP), EPERM for a buffer another process
 * registered; then ENOTCONN when the connection is not (or no longer)
 * connected, EOPNOTSUPP for remote atomics on a device without atomics,
 * E2BIG when the window spans more than CONN_QUERY's max_grant_pages
 * pages, EAGAIN when the send queue has no room for the registration
 * (a window in pieces posts up to 16 registrations at a time), ETIMEDOUT
 * when the device did not register a batch within 10 s, EINTR on a fatal
 * signal (after ETIMEDOUT and EINTR the connection fails: the
 * registration may still be queued), ENOMEM.
 */
struct krdma_grant {
	__u32 size;
	__u32 flags;
	__u32 conn;
	__u32 buf;
	__aligned_u64 offset;
	__aligned_u64 length;
	__u32 access;
	__u32 handle;
	struct krdma_token token;
};

#define KRDMA_IOC_GRANT _IO(KRDMA_TYPE, KRDMA_CMD_GRANT)

/* krdma_op.opcode */
#define KRDMA_OP_WRITE		1	/* local sges -> remote */
#define KRDMA_OP_WRITE_IMM	2	/* same, then imm_data to a peer RECV */
#define KRDMA_OP_READ		3	/* remote -> local sges */
#define KRDMA_OP_SEND		4	/* local sges -> a peer RECV */
#define KRDMA_OP_SEND_IMM	5	/* same, with imm_data */
#define KRDMA_OP_RECV		6	/* post local sges for one peer SEND */
#define KRDMA_OP_FETCH_ADD	7	/* 8 bytes at remote += compare_add */
#define KRDMA_OP_CMP_SWAP	8	/* if == compare_add, = swap */

/**
 * struct krdma_sge - a range of a registered buffer
 * @buf: the buffer's handle
 * @__reserved: Must be 0
 * @offset: start in the buffer
 * @length: length in bytes
 */
struct krdma_sge {
	__u32 buf;
	__u32 __reserved;
	__aligned_u64 offset;
	__aligned_u64 length;
};

#define KRDMA_MAX_SGE 16

/*
 * krdma_op.flags. KRDMA_OP_F_UNSIGNALED: no completion unless it fails
 * (see struct krdma_op).
 */
#define KRDMA_OP_F_UNSIGNALED	_BITUL(0)

/**
 * struct krdma_op - one operation of KRDMA_IOC_SUBMIT
 * @opcode: KRDMA_OP_*
 * @flags: KRDMA_OP_F_UNSIGNALED or 0 (other bits: EINVAL)
 * @cookie: returned as is in the operation's completion
 * @conn: the connection
 * @num_sge: local ranges: 1 uses @sge; 2 to KRDMA_MAX_SGE use the array
 *           at @sges; 0 only for SEND/RECV without data
 * @sges: pointer to an array of @num_sge struct krdma_sge, when > 1
 * @sge: the local range, when @num_sge is 1
 * @remote: WRITE, READ and atomics: the peer's token
 * @remote_offset: WRITE, READ and atomics: offset in the token's window
 * @imm_data: WRITE_IMM and SEND_IMM: 32 bits handed to the peer
 * @__reserved: Must be 0
 * @compare_add: FETCH_ADD: the addend; CMP_SWAP: the value to compare
 * @swap: CMP_SWAP: the value to store
 *
 * A field that the opcode does not use (@imm_data of a WRITE, @remote of
 * a SEND, @sges with one range...) is ignored, and a later version will
 * not give it a meaning for that opcode: new behaviour comes only with a
 * new opcode or a new bit of @flags, which are checked (EINVAL). So a
 * program may fill in one template and change only the opcode.
 *
 * Atomics work on 8 naturally aligned bytes: the local sge (8 bytes,
 * LOCAL_WRITE) receives the old value. Transfers of any length are split
 * by krdma as the device needs; the operation completes once, when all
 * of it is done. Up to the token's length is checked locally: EINVAL past
 * its end, EOVERFLOW on wrap-around.
 *
 * A token with a key table (@remote.seg_shift not 0): the first operation
 * that uses it reads the table from the peer with an RDMA READ, in the
 * SUBMIT call, which sleeps for it, up to 10 s. After that the SUBMIT
 * fails with ETIMEDOUT, and the connection too if none of its operations
 * completed in those 10 s (a silent peer; else the READ waits behind a
 * queue the link moves slowly, and a later SUBMIT tries again); later
 * ones find it cached on the connection. Errors of
 * that step: EINVAL (@remote.seg_shift below 12 or above 63, or
 * @remote.tag set with @remote.seg_shift 0), EOPNOTSUPP (the peer serves
 * no RDMA READ), EPROTO (the table read is not the token's: tag or count
 * differ), ENOTCONN, ETIMEDOUT, EIO (the READ failed: revoked token),
 * EINTR, ENOMEM.
 *
 * KRDMA_OP_F_UNSIGNALED (when QUERY_MODULE's features has
 * KRDMA_FEATURE_UNSIGNALED): no completion unless the operation fails.
 * A failure (a flush included: the connection failed, or was
 * disconnected or destroyed, with it in flight) completes as for any
 * operation, exactly once. The operation still holds a completion queue
 * entry while in flight, given back with no completion when it succeeds.
 * Once an operation that is neither unsignaled nor a RECV completes with
 * KRDMA_WC_SUCCESS, every operation submitted before it on the same
 * connection, RECVs aside (and, on iWARP, READs, which complete when
 * their response arrives), has succeeded or has its failure in the
 * queue before it; a failed completion implies nothing. Errors: EINVAL
 * on a RECV; EOPNOTSUPP on a READ or an atomic of an iWARP connection.
 */
struct krdma_op {
	__u32 opcode;
	__u32 flags;
	__aligned_u64 cookie;
	__u32 conn;
	__u32 num_sge;
	__aligned_u64 sges;
	struct krdma_sge sge;
	struct krdma_token remote;
	__aligned_u64 remote_offset;
	__u32 imm_data;
	__u32 __reserved;
	__aligned_u64 compare_add;
	__aligned_u64 swap;
};

/* krdma_submit.flags */
#define KRDMA_SUBMIT_WAIT	_BITUL(0)	/* wait for completion queue room */

#define KRDMA_SUBMIT_MAX	256

/**
 * struct krdma_submit - ioctl(KRDMA_IOC_SUBMIT)
 * @size: sizeof(struct krdma_submit)
 * @flags: KRDMA_SUBMIT_*
 * @count: Input: number of operations at @ops, 1 to KRDMA_SUBMIT_MAX
 * @submitted: Output: how many were accepted, in order
 * @ops: pointer to an array of struct krdma_op
 *
 * Each accepted operation completes exactly once, in the file's
 * completion queue (KRDMA_IOC_POLL). Operations are checked and accepted
 * in order; at the first one that cannot be, the call stops and fails
 * with its errno, @submitted telling how many went before it. A full
 * completion queue makes the call fail with EAGAIN (or wait with
 * KRDMA_SUBMIT_WAIT): krdma never loses a completion.
 *
 * The struct is written back (@submitted = 0) before any operation is
 * looked at: when it cannot be written, the call fails with EFAULT and
 * nothing was submitted. Only a caller that unmaps or write-protects the
 * struct from another thread during the call can see EFAULT after
 * operations were accepted; they complete as usual.
 */
struct krdma_submit {
	__u32 size;
	__u32 flags;
	__u32 count;
	__u32 submitted;
	__aligned_u64 ops;
};

#define KRDMA_IOC_SUBMIT _IO(KRDMA_TYPE, KRDMA_CMD_SUBMIT)

/*
 * krdma_completion.status: the values of the kernel's enum ib_wc_status,
 * named in ``ibv_wc_status_str()`` and krdmactl.
 */
#define KRDMA_WC_SUCCESS		0
#define KRDMA_WC_LOC_LEN_ERR		1
#define KRDMA_WC_LOC_QP_OP_ERR		2
#define KRDMA_WC_LOC_EEC_OP_ERR		3
#define KRDMA_WC_LOC_PROT_ERR		4
#define KRDMA_WC_WR_FLUSH_ERR		5
#define KRDMA_WC_MW_BIND_ERR		6
#define KRDMA_WC_BAD_RESP_ERR		7
#define KRDMA_WC_LOC_ACCESS_ERR		8
#define KRDMA_WC_REM_INV_REQ_ERR	9
#define KRDMA_WC_REM_ACCESS_ERR		10
#define KRDMA_WC_REM_OP_ERR		11
#define KRDMA_WC_RETRY_EXC_ERR		12
#define KRDMA_WC_RNR_RETRY_EXC_ERR	13
#define KRDMA_WC_LOC_RDD_VIOL_ERR	14
#define KRDMA_WC_REM_INV_RD_REQ_ERR	15
#define KRDMA_WC_REM_ABORT_ERR		16
#define KRDMA_WC_INV_EECN_ERR		17
#define KRDMA_WC_INV_EEC_STATE_ERR	18
#define KRDMA_WC_FATAL_ERR		19
#define KRDMA_WC_RESP_TIMEOUT_ERR	20
#define KRDMA_WC_GENERAL_ERR		21

/* krdma_completion.flags */
#define KRDMA_WC_F_IMM		_BITUL(0)	/* imm_data is valid */
/*
 * The RECV was consumed by the peer's RDMA WRITE with immediate (not by a
 * SEND): nothing was placed in its buffer; byte_len is the WRITE's length
 */
#define KRDMA_WC_F_RDMA_IMM	_BITUL(1)

/**
 * struct krdma_completion - the outcome of one operation
 * @cookie: the operation's cookie
 * @status: KRDMA_WC_*
 * @opcode: the operation's KRDMA_OP_*
 * @byte_len: RECV: bytes received (with KRDMA_WC_F_RDMA_IMM: the length
 *            of the peer's RDMA WRITE, placed in a window, not in the
 *            RECV's buffer); others: bytes transferred
 * @imm_data: RECV: the peer's immediate data, if KRDMA_WC_F_IMM
 * @conn: the connection's handle
 * @flags: KRDMA_WC_F_*
 * @vendor_err: the device's own error code, for error statuses
 * @__reserved: Written as 0
 */
struct krdma_completion {
	__aligned_u64 cookie;
	__u32 status;
	__u32 opcode;
	__u32 byte_len;
	__u32 imm_data;
	__u32 conn;
	__u32 flags;
	__u32 vendor_err;
	__u32 __reserved;
};

/**
 * struct krdma_poll - ioctl(KRDMA_IOC_POLL)
 * @size: sizeof(struct krdma_poll)
 * @flags: Must be 0
 * @max: Input: completions @completions can hold, 1 or more
 * @count: Output: completions written
 * @completions: pointer to an array of struct krdma_completion
 * @timeout_ms: Input: when the queue is empty, how long to wait for one:
 *              0 does not wait, KRDMA_TIMEOUT_INFINITE waits without limit
 * @__reserved: Must be 0
 *
 * Takes up to @max completions from the file's completion queue, oldest
 * first. Returns with @count 0 on timeout. The file is readable for
 * poll()/epoll when the queue is not empty. Completions are taken only
 * once both @completions and this struct were written: on EFAULT (either
 * not writable) nothing is taken, and the next POLL returns them. One
 * POLL of a file copies out at a time; the others wait for it, and EINTR
 * ends that wait as it ends the wait for a completion. EBUSY: the queue
 * is a mapped ring (KRDMA_IOC_RING_SETUP), which userspace consumes
 * itself.
 */
struct krdma_poll {
	__u32 size;
	__u32 flags;
	__u32 max;
	__u32 count;
	__aligned_u64 completions;
	__u32 timeout_ms;
	__u32 __reserved;
};

#define KRDMA_IOC_POLL _IO(KRDMA_TYPE, KRDMA_CMD_POLL)

/* The mmap() offset of the completion ring */
#define KRDMA_RING_OFF_CQ	0ULL

/**
 * struct krdma_ring_setup - ioctl(KRDMA_IOC_RING_SETUP)
 * @size: sizeof(struct krdma_ring_setup)
 * @flags: Must be 0
 * @entries: Input: entries of the ring, a power of two from 64 to the
 *           module's ucq_entries (the administrator's bound, at most
 *           2^20), or 0 for that size. Output: the ring's entries
 * @off_head: Output: offset in the mapping of the __u32 head, the index
 *            of the next entry to consume; written by userspace only
 * @off_tail: Output: offset of the __u32 tail, the index of the next
 *            entry the kernel fills; written by the kernel only
 * @off_ring_mask: Output: offset of the __u32 entries - 1
 * @off_ring_entries: Output: offset of the __u32 entries
 * @off_flags: Output: offset of the __u32 flags of the ring (0)
 * @off_cqes: Output: offset of the first of @entries struct
 *            krdma_completion; entry i is at index i & ring_mask
 * @__reserved: Must be 0
 * @mmap_size: Output: the length to mmap()
 *
 * Turns the file's completion queue into a ring mapped into the caller,
 * which takes completions with no system call: read the tail with acquire
 * semantics, consume the entries from head up to it, store the new head
 * with release semantics. head and tail are free-running __u32 indexes.
 * Then ``mmap(NULL, mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
 * KRDMA_RING_OFF_CQ)``; poll() and epoll report EPOLLIN while head and
 * tail differ; KRDMA_IOC_POLL fails with EBUSY on a mapped ring.
 *
 * The first call switches the queue: only when no operation is in flight
 * and no completion waits in the queue (EBUSY otherwise). Later calls,
 * with @entries 0 or equal to the ring's, only report the offsets again,
 * as a program that received the file, or one after execve(), needs to
 * map the ring. The kernel never reads what userspace writes but head;
 * it accepts a head that moves forward and not past the tail, and ignores
 * any other value (the ring then stays as full as it was). Operations
 * are accepted only with an entry reserved, so the ring never overflows:
 * SUBMIT fails with EAGAIN while the ring is full (KRDMA_SUBMIT_WAIT
 * waits, reading head again at each completion and every 10 ms).
 *
 * Errors: EINVAL (flags, @entries, reserved field); EBUSY (operations
 * in flight or completions waiting at the first call; another @entries
 * than the ring's later); ENOMEM; EFAULT (this struct cannot be written
 * back: the queue stays as it was); EINTR (a signal while another call
 * of the file held the queue). On an error the output fields are
 * undefined. mmap() fails with EINVAL before
 * RING_SETUP, for a private mapping, another offset or more than
 * @mmap_size bytes, and with EPERM for an executable mapping.
 */
struct krdma_ring_setup {
	__u32 size;
	__u32 flags;
	__u32 entries;
	__u32 off_head;
	__u32 off_tail;
	__u32 off_ring_mask;
	__u32 off_ring_entries;
	__u32 off_flags;
	__u32 off_cqes;
	__u32 __reserved;
	__aligned_u64 mmap_size;
};

#define KRDMA_IOC_RING_SETUP _IO(KRDMA_TYPE, KRDMA_CMD_RING_SETUP)

/* krdma_listen_query.state */
#define KRDMA_LISTENER_LISTENING	1
#define KRDMA_LISTENER_CLOSED		2	/* its device was removed (or
						 * another thread destroys it)
						 */

/*
 * krdma_listen_query.last_refused_reason: why a listener refused a connect
 * request, the reason its reject told the peer (Documentation/protocol.rst;
 * a krdma CONNECT fails with EPROTONOSUPPORT, EPROTO, EBUSY, ENOBUFS).
 * 4, "the listener is closing", is never counted: its handle is gone then.
 */
#define KRDMA_REFUSED_VERSION		1	/* krdma, another handshake
						 * version
						 */
#define KRDMA_REFUSED_NOT_KRDMA		2	/* no krdma handshake (a plain
						 * verbs peer), on a
						 * KRDMA_LISTEN_KRDMA_PEER
						 * listener
						 */
#define KRDMA_REFUSED_BACKLOG		3	/* the backlog was full */
#define KRDMA_REFUSED_NO_RESOURCES	5	/* no memory, QP or CQ for it,
						 * or its ACCEPT could not
						 * post its RECVs
						 */

/**
 * struct krdma_listen_query - ioctl(KRDMA_IOC_LISTEN_QUERY)
 * @size: sizeof(struct krdma_listen_query)
 * @flags: Must be 0
 * @handle: Input: the listener
 * @state: Output: KRDMA_LISTENER_*
 * @addr: Output: the bound address and port, as LISTEN returned them; all
 *        zero once @state is KRDMA_LISTENER_CLOSED
 * @backlog: Output: the backlog the listener got (LISTEN's: 0 made 16,
 *           at most 4096)
 * @queued: Output: connections that count against @backlog now: being
 *          established or waiting for ACCEPT (requests waiting for it,
 *          with KRDMA_LISTEN_DEFER_ACCEPT)
 * @refused: Output: connect requests the listener refused since it was
 *           made, every reason (also one this header does not name yet)
 * @refused_version: Output: those refused with KRDMA_REFUSED_VERSION
 * @refused_not_krdma: Output: those refused with KRDMA_REFUSED_NOT_KRDMA
 * @refused_backlog: Output: those refused with KRDMA_REFUSED_BACKLOG
 * @refused_no_resources: Output: those refused with
 *                        KRDMA_REFUSED_NO_RESOURCES
 * @last_refused_peer: Output: the address and port the last refused
 *                     request came from; all zero while @refused is 0
 * @last_refused_reason: Output: its KRDMA_REFUSED_*; 0 while @refused is 0
 * @__reserved: Must be 0
 *
 * What a listener is doing, and whom it turned away. The kernel refuses a
 * connect request by itself, at once, and tells only the peer: a
 * listener's owner learns of it here. A caller that logs refusals keeps
 * the counters of its last call and compares (the counters never go back;
 * only the last peer's address is kept). All outputs are one snapshot.
 * Counted: every reject the listener sent with a reason, from its
 * connect request handler or from an ACCEPT that could not post its
 * RECVs. Not counted: requests refused because the listener is closing,
 * and requests of a KRDMA_LISTEN_DEFER_ACCEPT listener torn down without
 * a reason (not taken within 30 s, or failed while an ACCEPT accepted
 * them: that ACCEPT says so). A listener whose device was removed keeps
 * its counters.
 *
 * Errors: ENOENT when @handle is not a listener of this file (0, a
 * connection, buffer or grant, a destroyed listener, another file's);
 * EINVAL for non-zero @flags or @__reserved.
 */
struct krdma_listen_query {
	__u32 size;
	__u32 flags;
	__u32 handle;
	__u32 state;
	struct krdma_addr addr;
	__u32 backlog;
	__u32 queued;
	__aligned_u64 refused;
	__aligned_u64 refused_version;
	__aligned_u64 refused_not_krdma;
	__aligned_u64 refused_backlog;
	__aligned_u64 refused_no_resources;
	struct krdma_addr last_refused_peer;
	__u32 last_refused_reason;
	__u32 __reserved;
};

#define KRDMA_IOC_LISTEN_QUERY _IO(KRDMA_TYPE, KRDMA_CMD_LISTEN_QUERY)

#endif /* _UAPI_LINUX_KRDMA_H */
