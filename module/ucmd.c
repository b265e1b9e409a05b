// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: the userspace face of the core: handles for the objects of an
 * open /dev/krdma, the ioctls that make and use them, and the completion
 * queue that operations submitted from userspace complete into.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/jiffies.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/krdma.h>

#include "krdma.h"
#include "ufile.h"

static unsigned int ucq_entries = 4096;
module_param(ucq_entries, uint, 0444);
MODULE_PARM_DESC(ucq_entries,
		 "Completion queue entries of each open /dev/krdma (rounded down to a power of 2, 64..1048576, default 4096)");

#define KRDMA_CONNECT_TIMEOUT_MS 10000

enum krdma_uobj_type {
	KRDMA_UOBJ_LISTENER = 1,
	KRDMA_UOBJ_CONN,
	KRDMA_UOBJ_BUF,
	KRDMA_UOBJ_GRANT,
};

/**
 * struct krdma_uobj - what a handle names
 * @type: KRDMA_UOBJ_*
 * @obj: the object; the handle owns one reference to it
 */
struct krdma_uobj {
	enum krdma_uobj_type type;
	void *obj;
};

/**
 * struct krdma_uop - an operation submitted from userspace
 * @kfile: the file whose completion queue it completes into
 * @gate: for a RECV of CONNECT or ACCEPT (struct krdma_early_recv), the
 *        gate its completion passes; NULL for operations of a SUBMIT
 * @cookie: the caller's cookie
 * @conn_handle: the connection's handle, for the completion
 * @req: the core's operation; last, allocated with room for the
 *       operation's ranges only (krdma_uop_size())
 */
struct krdma_uop {
	struct krdma_file *kfile;
	struct krdma_ugate *gate;
	u64 cookie;
	u32 conn_handle;
	struct krdma_req req;
};

/*
 * RECVs given with CONNECT or ACCEPT ("early RECVs") are posted on the
 * new queue pair before the peer can send: from the CM handler (CONNECT)
 * or the accepting call (ACCEPT), under conn->lock. So whatever touches
 * user memory is done before: the operations are copied and their uops
 * built (buffers looked up, completion entries reserved) first. They may
 * complete before the call has published the handle, or after it failed:
 * their gate holds each completion, in order, until the handle is
 * published, and then lets them into the queue; when the call fails it
 * drops them, so that nothing the caller cannot name completes.
 */
enum krdma_ugate_state {
	KRDMA_UGATE_SHUT,	/* holding completions */
	KRDMA_UGATE_OPEN,	/* the handle is published: let them pass */
	KRDMA_UGATE_DROP,	/* the call failed: give their entries back */
};

/**
 * struct krdma_ugate - where the completions of early RECVs wait
 * @ref: the call, and each early RECV not completed
 * @lock: protects @state and @held; a completion is delivered under it
 *        while the gate opens, so that they stay in order
 * @state: enum krdma_ugate_state
 * @held: struct krdma_early_recv completed while shut
 */
struct krdma_ugate {
	struct kref ref;
	spinlock_t lock; /* @state, @held */
	enum krdma_ugate_state state;
	struct list_head held;
};

/**
 * struct krdma_early_recv - a RECV of CONNECT or ACCEPT
 * @entry: in the gate's @held list, once completed while it was shut
 * @wc: the completion, kept while held
 * @uop: the operation; last, sized for its ranges
 */
struct krdma_early_recv {
	struct list_head entry;
	struct krdma_wc wc;
	struct krdma_uop uop;
};

/**
 * struct krdma_early_recvs - the RECVs of one CONNECT or ACCEPT
 * @gate: their gate; this holds one reference
 * @count: RECVs built
 * @posted: RECVs posted (the first @posted of @recvs): the core's from
 *          then on; the others are this call's to free
 * @recvs: the RECVs
 */
struct krdma_early_recvs {
	struct krdma_ugate *gate;
	u32 count;
	u32 posted;
	struct krdma_early_recv *recvs[];
};

/* Bytes of a uop whose operation has @num_sge ranges (at most 16) */
static size_t krdma_uop_size(u32 num_sge)
{
	return offsetof(struct krdma_uop, req) +
	       krdma_req_size(max_t(u32, num_sge, 1));
}

static void krdma_uobj_get(struct krdma_uobj *uobj)
{
	switch (uobj->type) {
	case KRDMA_UOBJ_LISTENER:
		kref_get(&((struct krdma_listener *)uobj->obj)->ref);
		break;
	case KRDMA_UOBJ_CONN:
		krdma_conn_get(uobj->obj);
		break;
	case KRDMA_UOBJ_BUF:
		krdma_buf_get(uobj->obj);
		break;
	case KRDMA_UOBJ_GRANT:
		kref_get(&((struct krdma_window *)uobj->obj)->ref);
		break;
	}
}

/* The object behind @handle, referenced, if it is of @type; else NULL */
static void *krdma_uobj_lookup(struct krdma_file *kfile, u32 handle,
			       enum krdma_uobj_type type)
{
	struct krdma_uobj *uobj;
	void *obj = NULL;

	xa_lock(&kfile->objects);
	uobj = xa_load(&kfile->objects, handle);
	if (uobj && uobj->type == type) {
		krdma_uobj_get(uobj);
		obj = uobj->obj;
	}
	xa_unlock(&kfile->objects);
	return obj;
}

/*
 * A handle becomes visible only once the caller has been told about it.
 * krdma_uobj_reserve() takes the handle (a reserved slot of the xarray,
 * which lookups and DESTROY do not see); the command writes its struct
 * back with it, and only then krdma_uobj_publish() stores the object in
 * the slot. When the struct cannot be written back (EFAULT),
 * krdma_uobj_abort() frees the slot and the caller undoes the object it
 * made: nothing is left that the caller cannot name.
 */
static struct krdma_uobj *krdma_uobj_reserve(struct krdma_file *kfile,
					     enum krdma_uobj_type type,
					     u32 *handle)
{
	struct krdma_uobj *uobj;
	int ret;

	uobj = kmalloc(sizeof(*uobj), GFP_KERNEL_ACCOUNT);
	if (!uobj)
		return ERR_PTR(-ENOMEM);
	uobj->type = type;
	uobj->obj = NULL;
	ret = xa_alloc(&kfile->objects, handle, XA_ZERO_ENTRY, xa_limit_32b,
		       GFP_KERNEL_ACCOUNT);
	if (ret) {
		kfree(uobj);
		return ERR_PTR(ret);
	}
	return uobj;
}

static void krdma_uobj_publish(struct krdma_file *kfile,
			       struct krdma_uobj *uobj, u32 handle, void *obj)
{
	void *old;

	uobj->obj = obj;
	/* The slot exists: storing into it allocates nothing */
	old = xa_store(&kfile->objects, handle, uobj, GFP_KERNEL);
	WARN_ON_ONCE(old && !xa_is_zero(old));
}

static void krdma_uobj_abort(struct krdma_file *kfile,
			     struct krdma_uobj *uobj, u32 handle)
{
	xa_erase(&kfile->objects, handle);
	kfree(uobj);
}

/* Reserve a handle for @obj, tell the caller, publish it */
static int krdma_uobj_respond(struct krdma_ucmd *ucmd, size_t size,
			      enum krdma_uobj_type type, void *obj,
			      u32 *handle)
{
	struct krdma_uobj *uobj;
	int ret;

	uobj = krdma_uobj_reserve(ucmd->kfile, type, handle);
	if (IS_ERR(uobj))
		return PTR_ERR(uobj);
	ret = krdma_ucmd_respond(ucmd, size);
	if (ret) {
		krdma_uobj_abort(ucmd->kfile, uobj, *handle);
		return ret;
	}
	krdma_uobj_publish(ucmd->kfile, uobj, *handle, obj);
	return 0;
}

/* The queue entries a listener's backlog may hold, charged at LISTEN */
static u32 krdma_listener_qdepth(const struct krdma_listener *l)
{
	return l->backlog * krdma_conn_qdepth(&l->params);
}

/*
 * End an object whose handle is gone; drops the handle's reference, and
 * the charges of the object to the file's user (as made: the backlog and
 * the depths of a listener or a connection never change), but for a
 * buffer's, which its last reference gives back (krdma_buf_release())
 */
static void krdma_uobj_close(struct krdma_file *kfile, struct krdma_uobj *uobj)
{
	switch (uobj->type) {
	case KRDMA_UOBJ_LISTENER: {
		struct krdma_listener *l = uobj->obj;
		u32 qdepth = krdma_listener_qdepth(l);
		u32 backlog = l->backlog;

		krdma_listener_close(l);
		krdma_user_uncharge_n(kfile->user, KRDMA_USER_QDEPTH, qdepth);
		krdma_user_uncharge_n(kfile->user, KRDMA_USER_BACKLOG, backlog);
		break;
	}
	case KRDMA_UOBJ_CONN: {
		struct krdma_conn *conn = uobj->obj;
		u32 qdepth = krdma_conn_qdepth(&conn->params);

		krdma_conn_close(conn);
		krdma_user_uncharge_n(kfile->user, KRDMA_USER_QDEPTH, qdepth);
		krdma_user_uncharge(kfile->user, KRDMA_USER_CONNS);
		break;
	}
	case KRDMA_UOBJ_BUF:
		/* Counted until its pages go: krdma_buf_reg_user() */
		krdma_buf_dereg(uobj->obj);
		break;
	case KRDMA_UOBJ_GRANT:
		krdma_grant_revoke(uobj->obj);
		krdma_grant_put(uobj->obj);
		krdma_user_uncharge(kfile->user, KRDMA_USER_GRANTS);
		break;
	}
	kfree(uobj);
}

/*
 * A mapped ring: take the head userspace wrote, if it is one. It may
 * only move forward, and not past the tail: anything else is ignored,
 * and the ring stays as full as it was. The entries up to it are free
 * again once it is read with acquire semantics (userspace stores it with
 * release semantics after reading them).
 */
static void krdma_ucq_sync_head(struct krdma_ucq *ucq)
{
	u32 head, n;

	lockdep_assert_held(&ucq->lock);
	if (!ucq->map)
		return;
	/* Pairs with userspace's store-release after it read the entries */
	head = smp_load_acquire(&ucq->map->hdr->head);
	n = head - ucq->head;
	if (!n || n > ucq->tail - ucq->head)
		return;
	WRITE_ONCE(ucq->head, head);
	ucq->reserved -= n;
}

static bool krdma_ucq_ready(struct krdma_ucq *ucq)
{
	return READ_ONCE(ucq->tail) != READ_ONCE(ucq->head);
}

/* Wake who waits for a completion or for room, if anyone does */
static void krdma_ucq_wake(struct krdma_ucq *ucq)
{
	if (wq_has_sleeper(&ucq->wait))
		wake_up_interruptible(&ucq->wait);
}

/* The size of a new file's queue, and the most a mapped ring may have */
static u32 krdma_ucq_default_size(void)
{
	return rounddown_pow_of_two(clamp_t(u32, ucq_entries, 64, 1U << 20));
}

static void krdma_ucq_map_free(struct krdma_ucq_map *map)
{
	unsigned int i;

	vunmap(map->hdr);
	for (i = 0; i < map->nr_pages; i++)
		__free_page(map->pages[i]);
	kvfree(map->pages);
	kfree(map);
}

/*
 * The memory of a mapped ring of @entries: order-0 pages, charged to the
 * caller's memory cgroup as the unmapped queue is, not to RLIMIT_MEMLOCK
 * (only the CPU touches it, nothing is pinned for the device).
 */
static struct krdma_ucq_map *krdma_ucq_map_alloc(u32 entries)
{
	struct krdma_ucq_map *map;
	unsigned int i;

	map = kzalloc(sizeof(*map), GFP_KERNEL_ACCOUNT);
	if (!map)
		return NULL;
	map->nr_pages = 1 + DIV_ROUND_UP(entries *
					 sizeof(struct krdma_completion),
					 PAGE_SIZE);
	map->pages = kvcalloc(map->nr_pages, sizeof(*map->pages),
			      GFP_KERNEL_ACCOUNT);
	if (!map->pages)
		goto err_free_map;
	for (i = 0; i < map->nr_pages; i++) {
		map->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!map->pages[i])
			goto err_free_pages;
	}
	map->hdr = vmap(map->pages, map->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!map->hdr)
		goto err_free_pages;
	map->entries = entries;
	map->hdr->ring_mask = entries - 1;
	map->hdr->ring_entries = entries;
	return map;

err_free_pages:
	while (i--)
		__free_page(map->pages[i]);
	kvfree(map->pages);
err_free_map:
	kfree(map);
	return NULL;
}

/**
 * krdma_ufile_init - set up the handle table and completion queue
 * @kfile: the new file's state
 *
 * Return: 0 or -ENOMEM.
 */
int krdma_ufile_init(struct krdma_file *kfile)
{
	struct krdma_ucq *ucq = &kfile->ucq;

	xa_init_flags(&kfile->objects, XA_FLAGS_ALLOC1);
	spin_lock_init(&ucq->lock);
	init_waitqueue_head(&ucq->wait);
	mutex_init(&ucq->poll_mutex);
	ucq->size = krdma_ucq_default_size();
	ucq->ring = kvcalloc(ucq->size, sizeof(*ucq->ring), GFP_KERNEL_ACCOUNT);
	return ucq->ring ? 0 : -ENOMEM;
}

/**
 * krdma_ufile_uninit - end every object of a closing file
 * @kfile: the file's state
 *
 * Listeners go first (no new connection), then connections: their
 * teardown drains them, so that every operation has completed into the
 * queue before it is freed. Then grants, and buffers (unpinned once no
 * operation uses them).
 *
 * Context: process context; sleeps.
 */
void krdma_ufile_uninit(struct krdma_file *kfile)
{
	static const enum krdma_uobj_type order[] = {
		KRDMA_UOBJ_LISTENER, KRDMA_UOBJ_CONN,
		KRDMA_UOBJ_GRANT, KRDMA_UOBJ_BUF,
	};
	struct krdma_uobj *uobj;
	unsigned long handle;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(order); i++) {
		xa_for_each(&kfile->objects, handle, uobj) {
			if (uobj->type != order[i])
				continue;
			xa_erase(&kfile->objects, handle);
			krdma_uobj_close(kfile, uobj);
		}
	}
	WARN_ON(kfile->ucq.reserved != kfile->ucq.tail - kfile->ucq.head);
	xa_destroy(&kfile->objects);
	if (kfile->ucq.map)
		krdma_ucq_map_free(kfile->ucq.map);
	else
		kvfree(kfile->ucq.ring);
}

/**
 * krdma_ufile_poll_mask - readiness of a file for poll()
 * @kfile: the file's state
 *
 * Return: EPOLLIN | EPOLLRDNORM while a completion waits, else 0.
 */
__poll_t krdma_ufile_poll_mask(struct krdma_file *kfile)
{
	struct krdma_ucq *ucq = &kfile->ucq;

	unsigned long flags;

	if (READ_ONCE(ucq->map)) {
		spin_lock_irqsave(&ucq->lock, flags);
		krdma_ucq_sync_head(ucq);
		spin_unlock_irqrestore(&ucq->lock, flags);
	}
	return krdma_ucq_ready(ucq) ? EPOLLIN | EPOLLRDNORM : 0;
}

int krdma_cmd_destroy(struct krdma_ucmd *ucmd)
{
	struct krdma_destroy *cmd = ucmd->cmd;
	struct krdma_uobj *uobj;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;
	/*
	 * Index 0 of an XA_FLAGS_ALLOC1 array holds the entry that keeps it
	 * from being allocated: erasing it would give the next object the
	 * handle 0, which names no object in the ABI.
	 */
	if (!cmd->handle)
		return -ENOENT;
	/* A reserved slot (an object being made) is not an object yet */
	xa_lock(&ucmd->kfile->objects);
	uobj = xa_load(&ucmd->kfile->objects, cmd->handle);
	if (uobj)
		__xa_erase(&ucmd->kfile->objects, cmd->handle);
	xa_unlock(&ucmd->kfile->objects);
	if (!uobj)
		return -ENOENT;
	krdma_uobj_close(ucmd->kfile, uobj);
	return 0;
}

/* struct krdma_addr -> sockaddr; @any_ok: family 0 means "none" */
static int krdma_addr_in(const struct krdma_addr *a,
			 struct sockaddr_storage *ss, bool any_ok)
{
	memset(ss, 0, sizeof(*ss));
	if (a->__reserved || a->port > U16_MAX)
		return -EINVAL;

	switch (a->family) {
	case 0:
		return any_ok && !a->port && !a->scope_id &&
		       !memchr_inv(a->addr, 0, sizeof(a->addr)) ? 0 : -EINVAL;
	case AF_INET: {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		if (memchr_inv(a->addr + 4, 0, sizeof(a->addr) - 4) ||
		    a->scope_id)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(a->port);
		memcpy(&sin->sin_addr, a->addr, 4);
		return 0;
	}
	case AF_INET6: {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(a->port);
		memcpy(&sin6->sin6_addr, a->addr, 16);
		sin6->sin6_scope_id = a->scope_id;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

static void krdma_addr_out(const struct sockaddr_storage *ss,
			   struct krdma_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;

		a->family = AF_INET;
		a->port = ntohs(sin->sin_port);
		memcpy(a->addr, &sin->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)ss;

		a->family = AF_INET6;
		a->port = ntohs(sin6->sin6_port);
		memcpy(a->addr, &sin6->sin6_addr, 16);
		a->scope_id = sin6->sin6_scope_id;
	}
}

static long krdma_timeout(u32 ms)
{
	return ms == KRDMA_TIMEOUT_INFINITE ? MAX_SCHEDULE_TIMEOUT :
	       (long)msecs_to_jiffies(ms);
}

int krdma_cmd_listen(struct krdma_ucmd *ucmd)
{
	struct krdma_listen *cmd = ucmd->cmd;
	struct krdma_conn_params params = {
		.sq_depth = cmd->sq_depth,
		.rq_depth = cmd->rq_depth,
		.flags = cmd->flags & KRDMA_LISTEN_KRDMA_PEER ?
			 KRDMA_CONN_KRDMA_PEER : 0,
	};
	struct krdma_listener *l;
	struct sockaddr_storage ss;
	u32 backlog, qdepth;
	int ret;

	if (cmd->flags & ~(KRDMA_LISTEN_KRDMA_PEER | KRDMA_LISTEN_DEFER_ACCEPT))
		return -EINVAL;
	ret = krdma_addr_in(&cmd->addr, &ss, false);
	if (ret)
		return ret;

	/*
	 * A listener makes a QP for every connection of its backlog before
	 * anyone accepts them: the backlogs of a user's listeners are
	 * bounded, apart from the connections it holds.
	 */
	backlog = krdma_listen_backlog(cmd->backlog);
	ret = krdma_user_charge_n(ucmd->kfile->user, KRDMA_USER_BACKLOG,
				  backlog);
	if (ret)
		return ret;
	/* At most 4096 x 8192: no overflow */
	qdepth = backlog * krdma_conn_qdepth(&params);
	ret = krdma_user_charge_n(ucmd->kfile->user, KRDMA_USER_QDEPTH, qdepth);
	if (ret)
		goto err_uncharge_backlog;
	l = krdma_listen_defer(ucmd->kfile->net, (struct sockaddr *)&ss,
			       backlog, &params,
			       cmd->flags & KRDMA_LISTEN_DEFER_ACCEPT);
	if (IS_ERR(l)) {
		ret = PTR_ERR(l);
		goto err_uncharge_qdepth;
	}
	WARN_ON_ONCE(krdma_listener_qdepth(l) != qdepth);
	ret = krdma_listener_addr(l, &ss);
	if (ret)
		goto err_close;
	krdma_addr_out(&ss, &cmd->addr);
	ret = krdma_uobj_respond(ucmd, sizeof(*cmd), KRDMA_UOBJ_LISTENER, l,
				 &cmd->handle);
	if (ret)
		goto err_close;
	return 0;

err_close:
	krdma_listener_close(l);
err_uncharge_qdepth:
	krdma_user_uncharge_n(ucmd->kfile->user, KRDMA_USER_QDEPTH, qdepth);
err_uncharge_backlog:
	krdma_user_uncharge_n(ucmd->kfile->user, KRDMA_USER_BACKLOG, backlog);
	return ret;
}

/* The reasons of a reject are the ABI's reasons of a refusal */
static_assert(KRDMA_REFUSED_VERSION == KRDMA_REJ_VERSION);
static_assert(KRDMA_REFUSED_NOT_KRDMA == KRDMA_REJ_NOT_KRDMA);
static_assert(KRDMA_REFUSED_BACKLOG == KRDMA_REJ_BACKLOG);
static_assert(KRDMA_REFUSED_NO_RESOURCES == KRDMA_REJ_NO_RESOURCES);

int krdma_cmd_listen_query(struct krdma_ucmd *ucmd)
{
	struct krdma_listen_query *cmd = ucmd->cmd;
	struct krdma_listener *l;
	unsigned int i;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;
	l = krdma_uobj_lookup(ucmd->kfile, cmd->handle, KRDMA_UOBJ_LISTENER);
	if (!l)
		return -ENOENT;

	/* One snapshot: the CM handler counts under the same lock */
	memset_after(cmd, 0, handle);
	spin_lock(&l->lock);
	cmd->state = l->closed ? KRDMA_LISTENER_CLOSED :
				 KRDMA_LISTENER_LISTENING;
	if (l->cm_id)
		krdma_addr_out(&l->cm_id->route.addr.src_addr, &cmd->addr);
	cmd->backlog = l->backlog;
	cmd->queued = l->queued;
	for (i = 0; i < KRDMA_REJ_NR; i++)
		cmd->refused += l->refused[i];
	cmd->refused_version = l->refused[KRDMA_REJ_VERSION];
	cmd->refused_not_krdma = l->refused[KRDMA_REJ_NOT_KRDMA];
	cmd->refused_backlog = l->refused[KRDMA_REJ_BACKLOG];
	cmd->refused_no_resources = l->refused[KRDMA_REJ_NO_RESOURCES];
	cmd->last_refused_reason = l->last_refused_reason;
	if (l->last_refused_reason)
		krdma_addr_out(&l->last_refused_peer, &cmd->last_refused_peer);
	spin_unlock(&l->lock);
	krdma_listener_put(l);
	return krdma_ucmd_respond(ucmd, sizeof(*cmd));
}

int krdma_cmd_disconnect(struct krdma_ucmd *ucmd)
{
	struct krdma_disconnect *cmd = ucmd->cmd;
	struct krdma_conn *conn;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;
	conn = krdma_uobj_lookup(ucmd->kfile, cmd->handle, KRDMA_UOBJ_CONN);
	if (!conn)
		return -ENOENT;
	krdma_disconnect(conn);
	krdma_conn_put(conn);
	return 0;
}

int krdma_cmd_conn_query(struct krdma_ucmd *ucmd)
{
	struct krdma_conn_query *cmd = ucmd->cmd;
	struct krdma_conn *conn;

	if (cmd->flags || cmd->__reserved || cmd->__reserved2)
		return -EINVAL;
	conn = krdma_uobj_lookup(ucmd->kfile, cmd->handle, KRDMA_UOBJ_CONN);
	if (!conn)
		return -ENOENT;

	memset_after(cmd, 0, handle);
	mutex_lock(&conn->lock);
	cmd->state = krdma_conn_public_state(conn);
	cmd->error = cmd->state == KRDMA_CONN_ERROR ? -conn->error : 0;
	krdma_addr_out(&conn->local, &cmd->local);
	krdma_addr_out(&conn->peer, &cmd->peer);
	cmd->dev_index = conn->dev_index;
	cmd->port_num = conn->port_num;
	cmd->qp_num = conn->qp_num;
	cmd->peer_qp_num = conn->peer_qp_num;
	cmd->sq_depth = conn->params.sq_depth;
	cmd->rq_depth = conn->params.rq_depth;
	cmd->peer_rq_depth = conn->peer_rq_depth;
	cmd->peer_features = conn->peer_features;
	cmd->initiator_depth = conn->initiator_depth;
	cmd->responder_resources = conn->responder_resources;
	cmd->max_grant_pages = conn->max_grant_pages;
	cmd->max_send_sge = conn->max_send_sge;
	cmd->max_recv_sge = conn->max_recv_sge;
	mutex_unlock(&conn->lock);
	krdma_conn_put(conn);
	return krdma_ucmd_respond(ucmd, sizeof(*cmd));
}

int krdma_cmd_buf_reg(struct krdma_ucmd *ucmd)
{
	struct krdma_buf_reg *cmd = ucmd->cmd;
	struct krdma_buf *buf;
	int ret;

	if (cmd->flags)
		return -EINVAL;
	buf = krdma_buf_reg_user(cmd->addr, cmd->length, cmd->access,
				 ucmd->kfile->user);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = krdma_uobj_respond(ucmd, sizeof(*cmd), KRDMA_UOBJ_BUF, buf,
				 &cmd->handle);
	if (ret)
		krdma_buf_dereg(buf);
	return ret;
}

int krdma_cmd_grant(struct krdma_ucmd *ucmd)
{
	struct krdma_grant *cmd = ucmd->cmd;
	struct krdma_window *win;
	struct krdma_conn *conn;
	struct krdma_buf *buf;
	int ret;

	if (cmd->flags)
		return -EINVAL;
	if (cmd->offset + cmd->length < cmd->offset)
		return -EOVERFLOW;
	conn = krdma_uobj_lookup(ucmd->kfile, cmd->conn, KRDMA_UOBJ_CONN);
	if (!conn)
		return -ENOENT;
	buf = krdma_uobj_lookup(ucmd->kfile, cmd->buf, KRDMA_UOBJ_BUF);
	if (!buf) {
		ret = -ENOENT;
		goto out_put_conn;
	}
	/* Each grant holds MRs of the device: counted before it is made */
	ret = krdma_user_charge(ucmd->kfile->user, KRDMA_USER_GRANTS);
	if (ret)
		goto out_put_buf;

	win = krdma_grant_create(conn, buf, cmd->offset, cmd->length,
				 cmd->access);
	if (IS_ERR(win)) {
		ret = PTR_ERR(win);
		goto err_uncharge;
	}
	/* The token was fixed when the grant was made: no look at win->mr */
	cmd->token = win->token;
	ret = krdma_uobj_respond(ucmd, sizeof(*cmd), KRDMA_UOBJ_GRANT, win,
				 &cmd->handle);
	if (!ret)
		goto out_put_buf;
	krdma_grant_revoke(win);
	krdma_grant_put(win);
err_uncharge:
	krdma_user_uncharge(ucmd->kfile->user, KRDMA_USER_GRANTS);
out_put_buf:
	krdma_buf_put(buf);
out_put_conn:
	krdma_conn_put(conn);
	return ret;
}

/*
 * The completion queue
 */

/* Any context: give back the entry of an operation that fills none */
static void krdma_ucq_give_back(struct krdma_ucq *ucq)
{
	unsigned long flags;
	bool full;

	spin_lock_irqsave(&ucq->lock, flags);
	full = ucq->reserved == ucq->size;
	ucq->reserved--;
	spin_unlock_irqrestore(&ucq->lock, flags);
	/* Only a SUBMIT waiting for room cares, and only if it was full */
	if (full)
		krdma_ucq_wake(ucq);
}

static void krdma_ugate_release(struct kref *ref)
{
	kfree(container_of(ref, struct krdma_ugate, ref));
}

static void krdma_ugate_put(struct krdma_ugate *gate)
{
	kref_put(&gate->ref, krdma_ugate_release);
}

static void krdma_uop_free(struct krdma_uop *uop)
{
	struct krdma_ugate *gate = uop->gate;

	if (!gate) {
		kfree(uop);
		return;
	}
	kfree(container_of(uop, struct krdma_early_recv, uop));
	krdma_ugate_put(gate);
}

/* Any context: fill the entry @uop reserved (the caller frees @uop) */
static void krdma_uop_fill_entry(struct krdma_uop *uop,
				 const struct krdma_wc *wc)
{
	struct krdma_ucq *ucq = &uop->kfile->ucq;
	struct krdma_completion *e;
	unsigned long flags;

	spin_lock_irqsave(&ucq->lock, flags);
	e = &ucq->ring[ucq->tail & (ucq->size - 1)];
	memset(e, 0, sizeof(*e));
	e->cookie = uop->cookie;
	e->status = wc->status;
	e->opcode = uop->req.opcode;
	e->byte_len = wc->byte_len;
	e->imm_data = wc->imm_data;
	e->flags = (wc->has_imm ? KRDMA_WC_F_IMM : 0) |
		   (wc->rdma_imm ? KRDMA_WC_F_RDMA_IMM : 0);
	e->conn = uop->conn_handle;
	e->vendor_err = wc->vendor_err;
	WRITE_ONCE(ucq->tail, ucq->tail + 1);
	if (ucq->map)
		/* The entry before the tail: pairs with userspace's acquire */
		smp_store_release(&ucq->map->hdr->tail, ucq->tail);
	spin_unlock_irqrestore(&ucq->lock, flags);
	krdma_ucq_wake(ucq);
}

/*
 * Any context: an early RECV completed. Delivered at once if its gate is
 * open (under the gate's lock, as krdma_ugate_open() delivers the held
 * ones: in order), held while it is shut, dropped if the call failed.
 */
static void krdma_early_recv_done(struct krdma_uop *uop,
				  const struct krdma_wc *wc)
{
	struct krdma_early_recv *er = container_of(uop, struct krdma_early_recv,
						   uop);
	struct krdma_ugate *gate = uop->gate;
	enum krdma_ugate_state state;
	unsigned long flags;

	spin_lock_irqsave(&gate->lock, flags);
	state = gate->state;
	if (state == KRDMA_UGATE_SHUT) {
		er->wc = *wc;
		list_add_tail(&er->entry, &gate->held);
	} else if (state == KRDMA_UGATE_OPEN) {
		krdma_uop_fill_entry(uop, wc);
	}
	spin_unlock_irqrestore(&gate->lock, flags);
	if (state == KRDMA_UGATE_DROP)
		krdma_ucq_give_back(&uop->kfile->ucq);
	/* Not under the gate's lock: this may put its last reference */
	if (state != KRDMA_UGATE_SHUT)
		krdma_uop_free(uop);
}

/*
 * Any context. Every operation of the ioctl layer comes here once
 * (KRDMA_REQ_QUIET_DONE): an unsignaled one that succeeded gives its
 * entry back unfilled.
 */
static void krdma_uop_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct krdma_uop *uop = container_of(req, struct krdma_uop, req);

	if (uop->gate) {
		krdma_early_recv_done(uop, wc);
		return;
	}
	if (wc->status == IB_WC_SUCCESS && (req->flags & KRDMA_REQ_UNSIGNALED))
		krdma_ucq_give_back(&uop->kfile->ucq);
	else
		krdma_uop_fill_entry(uop, wc);
	krdma_uop_free(uop);
}

static bool krdma_ucq_try_reserve(struct krdma_ucq *ucq)
{
	bool ok;

	spin_lock_irq(&ucq->lock);
	if (ucq->reserved == ucq->size)
		krdma_ucq_sync_head(ucq);
	ok = ucq->reserved < ucq->size;
	if (ok)
		ucq->reserved++;
	spin_unlock_irq(&ucq->lock);
	return ok;
}

/*
 * How often a SUBMIT waiting for room reads a mapped ring's head again:
 * userspace moves it without telling the kernel
 */
#define KRDMA_UCQ_HEAD_POLL (HZ / 100)

static int krdma_ucq_reserve(struct krdma_ucq *ucq, bool wait)
{
	long left;

	if (krdma_ucq_try_reserve(ucq))
		return 0;
	if (!wait)
		return -EAGAIN;
	/*
	 * Woken by each completion and POLL; a mapped ring's head, which
	 * userspace moves without a call, is read again every 10 ms (the
	 * ring cannot be set up while this waits: the queue is not empty)
	 */
	do {
		left = wait_event_interruptible_timeout(ucq->wait,
							krdma_ucq_try_reserve(ucq),
							READ_ONCE(ucq->map) ?
							KRDMA_UCQ_HEAD_POLL :
							MAX_SCHEDULE_TIMEOUT);
	} while (!left);
	return left < 0 ? -EINTR : 0;
}

static void krdma_ucq_unreserve(struct krdma_ucq *ucq)
{
	spin_lock_irq(&ucq->lock);
	ucq->reserved--;
	spin_unlock_irq(&ucq->lock);
	krdma_ucq_wake(ucq);
}

static bool krdma_op_is_remote(u32 opcode)
{
	return opcode == KRDMA_OP_WRITE || opcode == KRDMA_OP_WRITE_IMM ||
	       opcode == KRDMA_OP_READ || opcode == KRDMA_OP_FETCH_ADD ||
	       opcode == KRDMA_OP_CMP_SWAP;
}

/*
 * The keys of the token of @op: its own rkey, or, for a window in pieces,
 * its key table (read from the peer the first time: this may sleep)
 */
static int krdma_uop_remote(struct krdma_conn *conn, const struct krdma_op *op,
			    struct krdma_req *req)
{
	struct krdma_rkeys *rkeys;

	req->remote_addr = op->remote.addr + op->remote_offset;
	req->rkey = op->remote.rkey;
	if (!op->remote.seg_shift)
		return op->remote.tag ? -EINVAL : 0;
	rkeys = krdma_rkeys_get(conn, &op->remote);
	if (IS_ERR(rkeys))
		return PTR_ERR(rkeys);
	req->rkeys = rkeys;
	return 0;
}

/* Resolve the handles and the token of @op into @req */
static int krdma_uop_fill(struct krdma_file *kfile, struct krdma_conn *conn,
			  const struct krdma_op *op, struct krdma_req *req)
{
	struct krdma_sge sges[KRDMA_MAX_SGE];
	const struct krdma_sge *usge = sges;
	u64 total = 0;
	u32 i;

	if (op->flags & ~KRDMA_OP_F_UNSIGNALED || op->__reserved)
		return -EINVAL;
	if (op->num_sge > KRDMA_MAX_SGE)
		return -EINVAL;
	/* The core calls done for the success of an unsignaled one too */
	if (op->flags & KRDMA_OP_F_UNSIGNALED)
		req->flags = KRDMA_REQ_UNSIGNALED | KRDMA_REQ_QUIET_DONE;
	if (op->num_sge == 1)
		usge = &op->sge;
	else if (op->num_sge > 1 &&
		 copy_from_user(sges, u64_to_user_ptr(op->sges),
				op->num_sge * sizeof(sges[0])))
		return -EFAULT;

	req->opcode = op->opcode;
	req->num_sge = op->num_sge;
	for (i = 0; i < op->num_sge; i++) {
		if (usge[i].__reserved)
			return -EINVAL;
		req->sge[i].buf = krdma_uobj_lookup(kfile, usge[i].buf,
						    KRDMA_UOBJ_BUF);
		if (!req->sge[i].buf) {
			req->num_sge = i;
			return -ENOENT;
		}
		/*
		 * The pages are those of the process that registered the
		 * buffer: only that mm may have the device move them (a
		 * child after fork(), or a process the file was passed to,
		 * uses buffers of its own).
		 */
		if (req->sge[i].buf->mm != current->mm)
			return -EPERM;
		req->sge[i].offset = usge[i].offset;
		req->sge[i].length = usge[i].length;
		if (total + usge[i].length < total)
			return -EOVERFLOW;
		total += usge[i].length;
	}

	req->imm_data = op->imm_data;
	req->compare_add = op->compare_add;
	req->swap = op->swap;
	req->done = krdma_uop_done;
	if (!krdma_op_is_remote(op->opcode))
		return 0;
	if (op->remote.addr + op->remote_offset < op->remote.addr ||
	    op->remote_offset + total < op->remote_offset)
		return -EOVERFLOW;
	if (op->remote_offset + total > op->remote.length)
		return -EINVAL;
	return krdma_uop_remote(conn, op, req);
}

static void krdma_uop_put_bufs(struct krdma_req *req)
{
	u32 i;

	for (i = 0; i < req->num_sge; i++)
		krdma_buf_put(req->sge[i].buf);
	krdma_rkeys_put(req->rkeys);
}

/*
 * Early RECVs: the RECVs of CONNECT and ACCEPT (see struct krdma_ugate)
 */

/*
 * Open @gate: its held completions go to the queue, in order, and later
 * ones straight after them. The held RECVs move to @held, for the caller
 * to free with krdma_ugate_free_held() once out of its locks.
 */
static void krdma_ugate_open(struct krdma_ugate *gate, struct list_head *held)
{
	struct krdma_early_recv *er;

	spin_lock_irq(&gate->lock);
	gate->state = KRDMA_UGATE_OPEN;
	/* Under the lock: a completion that comes now waits for these */
	list_for_each_entry(er, &gate->held, entry)
		krdma_uop_fill_entry(&er->uop, &er->wc);
	list_splice_init(&gate->held, held);
	spin_unlock_irq(&gate->lock);
}

static void krdma_ugate_free_held(struct list_head *held)
{
	struct krdma_early_recv *er, *tmp;

	list_for_each_entry_safe(er, tmp, held, entry)
		krdma_uop_free(&er->uop);
}

static void krdma_ugate_drop(struct krdma_ugate *gate)
{
	struct krdma_early_recv *er, *tmp;
	LIST_HEAD(held);

	spin_lock_irq(&gate->lock);
	gate->state = KRDMA_UGATE_DROP;
	list_splice_init(&gate->held, &held);
	spin_unlock_irq(&gate->lock);
	list_for_each_entry_safe(er, tmp, &held, entry) {
		krdma_ucq_give_back(&er->uop.kfile->ucq);
		krdma_uop_free(&er->uop);
	}
}

/* Free an early RECV that was never posted: it is still this call's */
static void krdma_early_recv_discard(struct krdma_early_recv *er)
{
	krdma_uop_put_bufs(&er->uop.req);
	krdma_ucq_give_back(&er->uop.kfile->ucq);
	krdma_uop_free(&er->uop);
}

/**
 * krdma_early_recvs_end - the call that made the RECVs is over
 * @ers: the RECVs, or NULL
 * @published: the call succeeded and krdma_uobj_publish_conn() opened
 *             their gate: their completions go to the queue; else the
 *             gate is still shut, and they are dropped
 *
 * The RECVs never posted are freed; those posted are the core's, and end
 * through krdma_early_recv_done().
 */
static void krdma_early_recvs_end(struct krdma_early_recvs *ers,
				  bool published)
{
	u32 i;

	if (!ers)
		return;
	if (!published)
		krdma_ugate_drop(ers->gate);
	for (i = ers->posted; i < ers->count; i++)
		krdma_early_recv_discard(ers->recvs[i]);
	krdma_ugate_put(ers->gate);
	kfree(ers);
}

/* Build one early RECV from @op; it holds a completion queue entry */
static int krdma_early_recv_build(struct krdma_file *kfile,
				  struct krdma_early_recvs *ers,
				  const struct krdma_op *op, u32 handle)
{
	struct krdma_early_recv *er;
	int ret;

	if (op->opcode != KRDMA_OP_RECV || op->flags || op->conn ||
	    op->num_sge > KRDMA_MAX_SGE)
		return -EINVAL;
	er = kzalloc(offsetof(struct krdma_early_recv, uop) +
		     krdma_uop_size(op->num_sge), GFP_KERNEL_ACCOUNT);
	if (!er)
		return -ENOMEM;
	er->uop.kfile = kfile;
	er->uop.cookie = op->cookie;
	er->uop.conn_handle = handle;
	ret = krdma_uop_fill(kfile, NULL, op, &er->uop.req);
	if (ret)
		goto err_free;
	/* Refused now, not once a peer waits for the connection */
	ret = krdma_xfer_check_ranges(&er->uop.req);
	if (ret)
		goto err_free;
	/* Not EAGAIN, which a non-blocking ACCEPT gives for "none waiting" */
	ret = krdma_ucq_reserve(&kfile->ucq, false);
	if (ret == -EAGAIN)
		ret = -ENOSPC;
	if (ret)
		goto err_free;
	kref_get(&ers->gate->ref);
	er->uop.gate = ers->gate;
	ers->recvs[ers->count++] = er;
	return 0;

err_free:
	krdma_uop_put_bufs(&er->uop.req);
	kfree(er);
	return ret;
}

/**
 * krdma_early_recvs_create - build the RECVs of a CONNECT or ACCEPT
 * @kfile: the file
 * @uptr: the caller's array of struct krdma_op
 * @count: its length, 1 to KRDMA_EARLY_RECVS_MAX
 * @handle: the handle reserved for the connection, for their completions
 *
 * Everything that may fault on user memory or sleep for the completion
 * queue happens here, before any lock is taken.
 *
 * Return: the RECVs, or ERR_PTR(): -EFAULT, -EINVAL (not a RECV, a flag,
 * @conn set, a range), -ENOENT (a buffer), -EPERM, -EOVERFLOW, -EACCES,
 * -ENOSPC (no room in the completion queue), -ENOMEM.
 */
static struct krdma_early_recvs *
krdma_early_recvs_create(struct krdma_file *kfile, u64 uptr, u32 count,
			 u32 handle)
{
	struct krdma_early_recvs *ers;
	struct krdma_op *ops;
	u32 i;
	int ret;

	ops = kvmalloc_array(count, sizeof(*ops), GFP_KERNEL_ACCOUNT);
	if (!ops)
		return ERR_PTR(-ENOMEM);
	ret = -EFAULT;
	if (copy_from_user(ops, u64_to_user_ptr(uptr), count * sizeof(*ops)))
		goto out_free_ops;
	ret = -ENOMEM;
	ers = kzalloc(struct_size(ers, recvs, count), GFP_KERNEL_ACCOUNT);
	if (!ers)
		goto out_free_ops;
	ers->gate = kzalloc(sizeof(*ers->gate), GFP_KERNEL_ACCOUNT);
	if (!ers->gate) {
		kfree(ers);
		goto out_free_ops;
	}
	kref_init(&ers->gate->ref);
	spin_lock_init(&ers->gate->lock);
	INIT_LIST_HEAD(&ers->gate->held);
	ers->gate->state = KRDMA_UGATE_SHUT;

	for (i = 0; i < count; i++) {
		ret = krdma_early_recv_build(kfile, ers, &ops[i], handle);
		if (ret) {
			krdma_early_recvs_end(ers, false);
			goto out_free_ops;
		}
	}
	kvfree(ops);
	return ers;

out_free_ops:
	kvfree(ops);
	return ERR_PTR(ret);
}

/*
 * krdma_conn_params.prepare of a connection with early RECVs: post them,
 * under conn->lock (CM handler or accepting call). Nothing here touches
 * user memory. A RECV that needs a local window gets -EMSGSIZE: no
 * registration before the connection is up.
 */
static int krdma_early_recvs_post(struct krdma_conn *conn, void *ctx)
{
	struct krdma_local_sge bufs[KRDMA_OP_MAX_SGE];
	struct krdma_early_recvs *ers = ctx;
	struct krdma_early_recv *er;
	u32 nbufs;
	int ret;

	while (ers->posted < ers->count) {
		er = ers->recvs[ers->posted];
		/* Once posted it is the core's: keep the lookups' buffers */
		nbufs = er->uop.req.num_sge;
		memcpy(bufs, er->uop.req.sge, nbufs * sizeof(bufs[0]));
		ret = krdma_post_queue(conn, &er->uop.req);
		if (ret)
			return ret;
		ers->posted++;
		while (nbufs--)
			krdma_buf_put(bufs[nbufs].buf);
	}
	return 0;
}

/*
 * Publish a new connection's handle and open the gate of its early RECVs
 * (@ers, or NULL) in one section of the objects' lock: whoever takes one
 * of their completions and at once posts on its handle finds the handle
 * (lookups take that lock), and nothing a SUBMIT posts on the handle can
 * reach the queue before the held completions.
 */
static void krdma_uobj_publish_conn(struct krdma_file *kfile,
				    struct krdma_uobj *uobj, u32 handle,
				    struct krdma_conn *conn,
				    struct krdma_early_recvs *ers)
{
	LIST_HEAD(held);
	void *old;

	uobj->obj = conn;
	xa_lock(&kfile->objects);
	/* The slot exists: storing into it allocates nothing */
	old = __xa_store(&kfile->objects, handle, uobj, GFP_NOWAIT);
	WARN_ON_ONCE(old && !xa_is_zero(old));
	if (ers)
		krdma_ugate_open(ers->gate, &held);
	xa_unlock(&kfile->objects);
	krdma_ugate_free_held(&held);
	krdma_early_recvs_end(ers, true);
}

int krdma_cmd_accept(struct krdma_ucmd *ucmd)
{
	struct krdma_accept *cmd = ucmd->cmd;
	struct krdma_file *kfile = ucmd->kfile;
	struct krdma_early_recvs *ers = NULL;
	struct krdma_listener *l;
	struct krdma_uobj *uobj;
	struct krdma_conn *conn;
	u32 handle, qdepth;
	int ret;

	if (cmd->flags & ~KRDMA_ACCEPT_NONBLOCK ||
	    cmd->recv_count > KRDMA_EARLY_RECVS_MAX ||
	    (!cmd->recv_count && cmd->recvs))
		return -EINVAL;
	l = krdma_uobj_lookup(kfile, cmd->listener, KRDMA_UOBJ_LISTENER);
	if (!l)
		return -ENOENT;
	/* RECVs before the accept need an accept that waits for them */
	ret = -EINVAL;
	if (cmd->recv_count && !l->defer)
		goto out_put_listener;
	/* Refused before a request is taken, not by refusing its peer */
	ret = -ENOBUFS;
	if (cmd->recv_count > l->params.rq_depth)
		goto out_put_listener;
	/* Over a limit, the connection stays queued */
	ret = krdma_user_charge(kfile->user, KRDMA_USER_CONNS);
	if (ret)
		goto out_put_listener;
	/* Accepted, it leaves the backlog the listener's charge covers */
	qdepth = krdma_conn_qdepth(&l->params);
	ret = krdma_user_charge_n(kfile->user, KRDMA_USER_QDEPTH, qdepth);
	if (ret)
		goto err_uncharge_conn;
	uobj = krdma_uobj_reserve(kfile, KRDMA_UOBJ_CONN, &handle);
	if (IS_ERR(uobj)) {
		ret = PTR_ERR(uobj);
		goto err_uncharge_qdepth;
	}
	if (cmd->recv_count) {
		ers = krdma_early_recvs_create(kfile, cmd->recvs,
					       cmd->recv_count, handle);
		if (IS_ERR(ers)) {
			ret = PTR_ERR(ers);
			ers = NULL;
			goto err_abort_handle;
		}
	}
	/*
	 * Told first, before a connection or request is taken: nothing
	 * waits on user memory while one is claimed (the listener's close
	 * waits for claimed ones), none is taken for a caller that cannot
	 * learn of it, and none leaves the backlog and comes back: its slot
	 * may be refilled meanwhile, past the backlog the user is charged
	 * for. The handle is valid only when the call returns 0.
	 */
	cmd->handle = handle;
	ret = krdma_ucmd_respond(ucmd, sizeof(*cmd));
	if (ret)
		goto err_end_recvs;
	ret = krdma_accept_take(l, cmd->flags & KRDMA_ACCEPT_NONBLOCK ||
				!cmd->timeout_ms,
				krdma_timeout(cmd->timeout_ms), &conn);
	if (ret)
		goto err_end_recvs;
	/* Accepts a request (posting the RECVs first); closes it on failure */
	ret = krdma_accept_finish(l, conn, ers ? krdma_early_recvs_post : NULL,
				  ers);
	if (ret)
		goto err_end_recvs;
	krdma_conn_set_owner(conn, 0, kfile->user);
	krdma_uobj_publish_conn(kfile, uobj, handle, conn, ers);
	krdma_listener_put(l);
	return 0;

err_end_recvs:
	krdma_early_recvs_end(ers, false);
err_abort_handle:
	krdma_uobj_abort(kfile, uobj, handle);
err_uncharge_qdepth:
	krdma_user_uncharge_n(kfile->user, KRDMA_USER_QDEPTH, qdepth);
err_uncharge_conn:
	krdma_user_uncharge(kfile->user, KRDMA_USER_CONNS);
out_put_listener:
	krdma_listener_put(l);
	return ret;
}

int krdma_cmd_connect(struct krdma_ucmd *ucmd)
{
	struct krdma_connect *cmd = ucmd->cmd;
	struct krdma_file *kfile = ucmd->kfile;
	struct krdma_conn_params params = {
		.sq_depth = cmd->sq_depth,
		.rq_depth = cmd->rq_depth,
		.flags = cmd->flags & KRDMA_CONNECT_KRDMA_PEER ?
			 KRDMA_CONN_KRDMA_PEER : 0,
	};
	struct krdma_early_recvs *ers = NULL;
	struct sockaddr_storage dst, src;
	struct krdma_uobj *uobj;
	struct krdma_conn *conn;
	u32 handle, qdepth;
	int ret;

	if (cmd->flags & ~KRDMA_CONNECT_KRDMA_PEER || cmd->__reserved ||
	    cmd->recv_count > KRDMA_EARLY_RECVS_MAX ||
	    (!cmd->recv_count && cmd->recvs))
		return -EINVAL;
	ret = krdma_addr_in(&cmd->dst, &dst, false);
	if (ret)
		return ret;
	ret = krdma_addr_in(&cmd->src, &src, true);
	if (ret)
		return ret;
	if (cmd->recv_count > krdma_conn_depth(cmd->rq_depth))
		return -ENOBUFS;

	ret = krdma_user_charge(kfile->user, KRDMA_USER_CONNS);
	if (ret)
		return ret;
	qdepth = krdma_conn_qdepth(&params);
	ret = krdma_user_charge_n(kfile->user, KRDMA_USER_QDEPTH, qdepth);
	if (ret)
		goto err_uncharge_conn;
	uobj = krdma_uobj_reserve(kfile, KRDMA_UOBJ_CONN, &handle);
	if (IS_ERR(uobj)) {
		ret = PTR_ERR(uobj);
		goto err_uncharge_qdepth;
	}
	if (cmd->recv_count) {
		ers = krdma_early_recvs_create(kfile, cmd->recvs,
					       cmd->recv_count, handle);
		if (IS_ERR(ers)) {
			ret = PTR_ERR(ers);
			ers = NULL;
			goto err_abort_handle;
		}
		/*
		 * Called once, in the CM handler, before the connect request;
		 * @context serves nothing else (no @event): @ers may go once
		 * krdma_connect() returned
		 */
		params.prepare = krdma_early_recvs_post;
		params.context = ers;
	}
	conn = krdma_connect(kfile->net, (struct sockaddr *)&dst,
			     src.ss_family ? (struct sockaddr *)&src : NULL,
			     krdma_timeout(cmd->timeout_ms ?:
					   KRDMA_CONNECT_TIMEOUT_MS),
			     &params);
	if (IS_ERR(conn)) {
		ret = PTR_ERR(conn);
		goto err_end_recvs;
	}
	krdma_conn_set_owner(conn, 0, kfile->user);
	cmd->handle = handle;
	ret = krdma_ucmd_respond(ucmd, sizeof(*cmd));
	if (ret)
		goto err_close;
	krdma_uobj_publish_conn(kfile, uobj, handle, conn, ers);
	return 0;

err_close:
	krdma_conn_close(conn);
err_end_recvs:
	krdma_early_recvs_end(ers, false);
err_abort_handle:
	krdma_uobj_abort(kfile, uobj, handle);
err_uncharge_qdepth:
	krdma_user_uncharge_n(kfile->user, KRDMA_USER_QDEPTH, qdepth);
err_uncharge_conn:
	krdma_user_uncharge(kfile->user, KRDMA_USER_CONNS);
	return ret;
}

/*
 * The connection a SUBMIT queued operations on without posting them yet:
 * they go out together (chains of WRs) when the SUBMIT moves on to
 * another connection, is about to wait, or ends.
 */
struct krdma_submit_plug {
	struct krdma_conn *conn;
};

static void krdma_submit_unplug(struct krdma_submit_plug *plug)
{
	if (!plug->conn)
		return;
	krdma_xfer_push(plug->conn);
	krdma_conn_put(plug->conn);
	plug->conn = NULL;
}

static int krdma_submit_one(struct krdma_file *kfile, const struct krdma_op *op,
			    bool wait, struct krdma_submit_plug *plug)
{
	struct krdma_local_sge bufs[KRDMA_OP_MAX_SGE];
	struct krdma_rkeys *rkeys;
	struct krdma_conn *conn;
	struct krdma_uop *uop;
	u32 nbufs;
	int ret;

	conn = krdma_uobj_lookup(kfile, op->conn, KRDMA_UOBJ_CONN);
	if (!conn)
		return -ENOENT;
	if (plug->conn != conn)
		krdma_submit_unplug(plug);
	if (op->num_sge > KRDMA_MAX_SGE) {
		ret = -EINVAL;
		goto out_put_conn;
	}
	/* Room for the ranges it names (krdma_uop_fill() fills no more) */
	uop = kzalloc(krdma_uop_size(op->num_sge), GFP_KERNEL_ACCOUNT);
	if (!uop) {
		ret = -ENOMEM;
		goto out_put_conn;
	}
	uop->kfile = kfile;
	uop->cookie = op->cookie;
	uop->conn_handle = op->conn;

	ret = krdma_uop_fill(kfile, conn, op, &uop->req);
	if (ret)
		goto err_free_uop;
	ret = krdma_ucq_reserve(&kfile->ucq, false);
	if (ret == -EAGAIN && wait) {
		/* What is queued must be posted before we wait for room */
		krdma_submit_unplug(plug);
		ret = krdma_ucq_reserve(&kfile->ucq, true);
	}
	if (ret)
		goto err_free_uop;
	/* Once posted, the completion may come at any time, and frees uop */
	nbufs = uop->req.num_sge;
	memcpy(bufs, uop->req.sge, nbufs * sizeof(bufs[0]));
	rkeys = uop->req.rkeys;
	ret = krdma_post_queue(conn, &uop->req);
	if (ret) {
		krdma_ucq_unreserve(&kfile->ucq);
		kfree(uop);
	} else if (!plug->conn) {
		krdma_conn_get(conn);
		plug->conn = conn;
	}
	while (nbufs--)
		krdma_buf_put(bufs[nbufs].buf);
	krdma_rkeys_put(rkeys);
	goto out_put_conn;

err_free_uop:
	krdma_uop_put_bufs(&uop->req);
	kfree(uop);
out_put_conn:
	krdma_conn_put(conn);
	return ret;
}

int krdma_cmd_submit(struct krdma_ucmd *ucmd)
{
	struct krdma_submit *cmd = ucmd->cmd;
	struct krdma_op __user *uops = u64_to_user_ptr(cmd->ops);
	struct krdma_submit_plug plug = {};
	struct krdma_op op;
	int ret = 0, ret2;
	u32 i;

	if (cmd->flags & ~KRDMA_SUBMIT_WAIT)
		return -EINVAL;
	if (!cmd->count || cmd->count > KRDMA_SUBMIT_MAX)
		return -EINVAL;
	/*
	 * Tell the caller nothing was submitted before submitting anything:
	 * a struct that cannot be written back fails here, with no
	 * operation started (see the errno contract of KRDMA_IOC_SUBMIT).
	 */
	cmd->submitted = 0;
	ret = krdma_ucmd_respond(ucmd, sizeof(*cmd));
	if (ret)
		return ret;

	for (i = 0; i < cmd->count; i++) {
		if (copy_from_user(&op, &uops[i], sizeof(op))) {
			ret = -EFAULT;
			break;
		}
		ret = krdma_submit_one(ucmd->kfile, &op,
				       cmd->flags & KRDMA_SUBMIT_WAIT, &plug);
		if (ret)
			break;
	}
	krdma_submit_unplug(&plug);
	cmd->submitted = i;
	ret2 = krdma_ucmd_respond(ucmd, sizeof(*cmd));
	return ret ?: ret2;
}

/*
 * Copy up to cmd->max completions to the caller and write back the
 * command's struct; only when both succeeded are they taken from the
 * queue. poll_mutex is held across the copy, which may wait on user
 * memory for ever (FUSE, userfaultfd): only other pollers of this file
 * wait for it, and they wait interruptibly.
 * Return: how many were taken, -EFAULT with none taken, or -EINTR.
 */
static int krdma_ucq_take(struct krdma_ucmd *ucmd, struct krdma_ucq *ucq)
{
	struct krdma_poll *cmd = ucmd->cmd;
	struct krdma_completion __user *out = u64_to_user_ptr(cmd->completions);
	u32 head, avail, n, first;
	int ret;

	if (mutex_lock_interruptible(&ucq->poll_mutex))
		return -EINTR;
	/* Userspace consumes a mapped ring: two consumers of head would race */
	if (ucq->map) {
		ret = -EBUSY;
		goto out_unlock;
	}
	spin_lock_irq(&ucq->lock);
	head = ucq->head;
	avail = ucq->tail - head;
	spin_unlock_irq(&ucq->lock);

	/* Entries between head and tail are not written again until taken */
	n = min(cmd->max, avail);
	first = min(n, ucq->size - (head & (ucq->size - 1)));
	if (copy_to_user(out, &ucq->ring[head & (ucq->size - 1)],
			 first * sizeof(*out)) ||
	    copy_to_user(out + first, ucq->ring, (n - first) * sizeof(*out))) {
		ret = -EFAULT;
		goto out_unlock;
	}
	cmd->count = n;
	ret = krdma_ucmd_respond(ucmd, sizeof(*cmd));
	if (ret)
		goto out_unlock;

	spin_lock_irq(&ucq->lock);
	WRITE_ONCE(ucq->head, head + n);
	ucq->reserved -= n;
	spin_unlock_irq(&ucq->lock);
	ret = n;
out_unlock:
	mutex_unlock(&ucq->poll_mutex);
	if (ret > 0)
		krdma_ucq_wake(ucq);
	return ret;
}

int krdma_cmd_poll(struct krdma_ucmd *ucmd)
{
	struct krdma_poll *cmd = ucmd->cmd;
	struct krdma_ucq *ucq = &ucmd->kfile->ucq;
	long left;
	int n;

	if (cmd->flags || cmd->__reserved || !cmd->max)
		return -EINVAL;

	/*
	 * Another poller of the file (a thread, or a process it is shared
	 * with) may take the completion that woke us: wait again, so that
	 * count 0 means the timeout passed. On EFAULT nothing is taken.
	 */
	left = cmd->timeout_ms ? krdma_timeout(cmd->timeout_ms) : 0;
	for (;;) {
		n = krdma_ucq_take(ucmd, ucq);
		if (n || !left)
			break;
		left = wait_event_interruptible_timeout(ucq->wait,
							krdma_ucq_ready(ucq),
							left);
		if (left < 0)
			return -EINTR;
	}
	return n < 0 ? n : 0;
}

/*
 * The mapped completion ring
 */

static void krdma_ring_setup_fill(struct krdma_ring_setup *cmd,
				  struct krdma_ucq_map *map)
{
	cmd->entries = map->entries;
	cmd->off_head = offsetof(struct krdma_ring_hdr, head);
	cmd->off_tail = offsetof(struct krdma_ring_hdr, tail);
	cmd->off_ring_mask = offsetof(struct krdma_ring_hdr, ring_mask);
	cmd->off_ring_entries = offsetof(struct krdma_ring_hdr, ring_entries);
	cmd->off_flags = offsetof(struct krdma_ring_hdr, flags);
	cmd->off_cqes = PAGE_SIZE;
	cmd->mmap_size = (u64)map->nr_pages << PAGE_SHIFT;
}

/* A call after the first: report the ring, which never changes */
static int krdma_ring_setup_report(struct krdma_ucmd *ucmd,
				   struct krdma_ucq_map *map, u32 entries)
{
	struct krdma_ring_setup *cmd = ucmd->cmd;

	if (entries && entries != map->entries)
		return -EBUSY;
	krdma_ring_setup_fill(cmd, map);
	return krdma_ucmd_respond(ucmd, sizeof(*cmd));
}

/*
 * The first call swaps the queue's memory for the ring's, under the
 * queue's lock and only while nothing is reserved: no operation is in
 * flight, so no completion can be written into the old memory after it.
 * The swap cannot be undone (a sharer of the file may map the ring at
 * once), so the result is written back before it: a call that cannot
 * write it changes nothing. Nothing is copied to userspace under a lock.
 */
int krdma_cmd_ring_setup(struct krdma_ucmd *ucmd)
{
	struct krdma_ring_setup *cmd = ucmd->cmd;
	struct krdma_ucq *ucq = &ucmd->kfile->ucq;
	struct krdma_completion *old = NULL;
	struct krdma_ucq_map *map, *new;
	u32 entries = cmd->entries;
	u32 size, busy;
	int ret;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;
	/* At most what the administrator lets every file have (ucq_entries) */
	if (entries && (!is_power_of_2(entries) || entries < 64 ||
			entries > krdma_ucq_default_size()))
		return -EINVAL;

	if (mutex_lock_interruptible(&ucq->poll_mutex))
		return -EINTR;
	/* Set once, freed with the file */
	map = ucq->map;
	size = ucq->size;
	spin_lock_irq(&ucq->lock);
	busy = ucq->reserved;
	spin_unlock_irq(&ucq->lock);
	mutex_unlock(&ucq->poll_mutex);
	if (map)
		return krdma_ring_setup_report(ucmd, map, entries);
	/* Checked again at the swap; here, before anything is allocated */
	if (busy)
		return -EBUSY;

	new = krdma_ucq_map_alloc(entries ?: size);
	if (!new)
		return -ENOMEM;
	krdma_ring_setup_fill(cmd, new);
	ret = krdma_ucmd_respond(ucmd, sizeof(*cmd));
	if (ret)
		goto out_free_new;

	if (mutex_lock_interruptible(&ucq->poll_mutex)) {
		ret = -EINTR;
		goto out_free_new;
	}
	map = ucq->map;
	if (!map) {
		spin_lock_irq(&ucq->lock);
		if (ucq->reserved) {
			ret = -EBUSY;
		} else {
			old = ucq->ring;
			ucq->ring = (void *)new->hdr + PAGE_SIZE;
			ucq->size = new->entries;
			WRITE_ONCE(ucq->head, 0);
			WRITE_ONCE(ucq->tail, 0);
			/* mmap() takes no lock of the queue: publish it whole */
			smp_store_release(&ucq->map, new);
			new = NULL;
		}
		spin_unlock_irq(&ucq->lock);
	}
	mutex_unlock(&ucq->poll_mutex);
	kvfree(old);
	/* Another call set the ring up meanwhile: report that one */
	if (map)
		ret = krdma_ring_setup_report(ucmd, map, entries);
out_free_new:
	if (new)
		krdma_ucq_map_free(new);
	return ret;
}

/**
 * krdma_ufile_mmap - map the completion ring into userspace
 * @kfile: the file's state
 * @vma: the new mapping: shared, at KRDMA_RING_OFF_CQ, at most the ring
 *
 * Context: mmap_lock held for writing (no lock of the queue is taken: the
 * ring's pages never change once RING_SETUP made them).
 * Return: 0, -EINVAL (no ring yet, a private mapping, another offset, too
 * long) or -EPERM (executable).
 */
int krdma_ufile_mmap(struct krdma_file *kfile, struct vm_area_struct *vma)
{
	/* Pairs with the store-release of RING_SETUP: the map is whole */
	struct krdma_ucq_map *map = smp_load_acquire(&kfile->ucq.map);
	unsigned long nr = vma_pages(vma);

	if (!map || vma->vm_pgoff != (KRDMA_RING_OFF_CQ >> PAGE_SHIFT) ||
	    !(vma->vm_flags & VM_SHARED) || nr > map->nr_pages)
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYEXEC);
	return vm_insert_pages(vma, vma->vm_start, map->pages, &nr);
}
