// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: grants, the remote side of a buffer. A grant registers a window
 * of a buffer's pinned pages in one connection's protection domain, with a
 * fast-registration MR (IB_WR_REG_MR), and a subset of the remote access
 * rights: its rkey works on that connection's QP and no other, and stops
 * working when the registration is dropped (revoke, buffer deregistered,
 * connection torn down). Registration never pins: the buffer did, once.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/log2.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <linux/krdma.h>

#include "krdma.h"

/* How long a registration may take on the device before we give up */
#define KRDMA_REG_TIMEOUT (10 * HZ)

#define KRDMA_ACCESS_REMOTE (KRDMA_ACCESS_REMOTE_READ | \
			     KRDMA_ACCESS_REMOTE_WRITE | \
			     KRDMA_ACCESS_REMOTE_ATOMIC)

/*
 * The verbs access of a window: what was granted, and local write only
 * when the buffer's pages were pinned writable. A read-only buffer makes
 * an MR the device may only read.
 */
static int krdma_ib_access(const struct krdma_buf *buf, u32 access)
{
	int ib_access = 0;

	if (buf->access & KRDMA_ACCESS_LOCAL_WRITE ||
	    access & (KRDMA_ACCESS_REMOTE_WRITE | KRDMA_ACCESS_REMOTE_ATOMIC))
		ib_access |= IB_ACCESS_LOCAL_WRITE;
	if (access & KRDMA_ACCESS_REMOTE_READ)
		ib_access |= IB_ACCESS_REMOTE_READ;
	if (access & KRDMA_ACCESS_REMOTE_WRITE)
		ib_access |= IB_ACCESS_REMOTE_WRITE;
	if (access & KRDMA_ACCESS_REMOTE_ATOMIC)
		ib_access |= IB_ACCESS_REMOTE_ATOMIC;
	return ib_access;
}

/* Deregister one registration's MR, if it has one left */
static void krdma_seg_dereg(struct krdma_seg *seg)
{
	if (seg->mr)
		ib_dereg_mr(seg->mr);
	seg->mr = NULL;
}

/* Release one registration: its MR, DMA mapping and scatterlist */
static void krdma_seg_release(struct ib_device *ibdev, struct krdma_seg *seg,
			      enum dma_data_direction dir)
{
	krdma_seg_dereg(seg);
	if (seg->mapped)
		ib_dma_unmap_sgtable_attrs(ibdev, &seg->sgt, dir, 0);
	seg->mapped = false;
	sg_free_table(&seg->sgt);
}

/*
 * Deregister a window's MRs, its key table's included: no access that
 * starts after this finds them. Its pages, their DMA mapping and the key
 * table stay, for krdma_window_unmap(). Same rules as that.
 */
static void krdma_window_dereg(struct krdma_window *win)
{
	u32 i;

	krdma_seg_dereg(&win->table);
	for (i = 0; i < win->nsegs; i++)
		krdma_seg_dereg(&win->segs[i]);
}

/*
 * Count a window against the limits of the user who registered its
 * buffer, before anything of it is made: its pages (each window maps
 * them again: MRs, page lists and scatterlists), and a local window as
 * a grant too, since nothing else counts it. A kernel buffer counts
 * nothing. A window the connection could never map is -E2BIG first, so
 * that no limit is blamed for it. On failure nothing stays counted.
 */
static int krdma_window_charge(struct krdma_conn *conn,
			       struct krdma_window *win)
{
	struct krdma_user *user = win->buf->kuser;
	u64 npages = krdma_buf_pages(win->buf, win->offset, win->length);
	int ret;

	if (npages > conn->max_grant_pages)
		return -E2BIG;
	if (!user)
		return 0;
	ret = krdma_user_charge_n(user, KRDMA_USER_WPAGES, npages);
	if (ret)
		return ret;
	if (win->local) {
		ret = krdma_user_charge(user, KRDMA_USER_GRANTS);
		if (ret) {
			krdma_user_uncharge_n(user, KRDMA_USER_WPAGES, npages);
			return ret;
		}
	}
	win->charged_pages = npages;
	return 0;
}

/*
 * What krdma_window_charge() counted, given back once: a window is
 * charged at all only with its pages (never 0), a local one a grant too
 */
static void krdma_window_uncharge(struct krdma_window *win)
{
	struct krdma_user *user = win->buf->kuser;

	if (!win->charged_pages)
		return;
	krdma_user_uncharge_n(user, KRDMA_USER_WPAGES, win->charged_pages);
	if (win->local)
		krdma_user_uncharge(user, KRDMA_USER_GRANTS);
	win->charged_pages = 0;
}

/*
 * Release what a window holds on the device: its registrations, its key
 * table; then its charge, which lasts as long as they do. Never with
 * conn->lock held (these are device calls); the caller holds
 * conn->reg_sem, so that the PD and the device are there, and took
 * win->mr (the window is no longer live), so this runs once.
 */
static void krdma_window_unmap(struct krdma_conn *conn,
			       struct krdma_window *win)
{
	struct ib_device *ibdev = conn->kdev->ibdev;
	u32 i;

	krdma_seg_release(ibdev, &win->table, DMA_TO_DEVICE);
	if (win->keys)
		free_pages_exact(win->keys, win->keys_bytes);
	win->keys = NULL;
	for (i = 0; i < win->nsegs; i++)
		krdma_seg_release(ibdev, &win->segs[i], win->dir);
	krdma_window_uncharge(win);
}

/*
 * Map @seg->sgt (filled in by the caller) for the device and make a
 * fast-registration MR of it, of at most @max_pages pages, whose first
 * byte is @iova. The MR still needs its IB_WR_REG_MR. On failure the
 * caller releases @seg.
 */
static int krdma_seg_map(struct krdma_conn *conn, struct krdma_seg *seg,
			 enum dma_data_direction dir, u32 max_pages, u64 iova)
{
	struct ib_device *ibdev = conn->kdev->ibdev;
	struct ib_mr *mr;
	int n, ret;

	ret = ib_dma_map_sgtable_attrs(ibdev, &seg->sgt, dir, 0);
	if (ret)
		return ret;
	seg->mapped = true;

	mr = ib_alloc_mr(conn->pd, IB_MR_TYPE_MEM_REG, max_pages);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	seg->mr = mr;
	n = ib_map_mr_sg(mr, seg->sgt.sgl, seg->sgt.nents, NULL, PAGE_SIZE);
	if (n != seg->sgt.nents)
		return n < 0 ? n : -E2BIG;
	/* Same offset in the page as the DMA address: only the base moves */
	mr->iova = iova;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	seg->lkey = mr->lkey;
	return 0;
}

/* One registration of the window's bytes [@start, @end) of its range */
static int krdma_window_map_seg(struct krdma_conn *conn,
				struct krdma_window *win, struct krdma_seg *seg,
				u64 range_off, u64 start, u64 end, u64 iova)
{
	struct krdma_buf *buf = win->buf;
	int ret;

	ret = krdma_buf_sgt(buf, win->offset + start - range_off, end - start,
			    ib_dma_max_seg_size(conn->kdev->ibdev), &seg->sgt);
	if (ret)
		return ret;
	return krdma_seg_map(conn, seg, win->dir,
			     krdma_buf_pages(buf, win->offset + start -
					     range_off, end - start), iova);
}

/* Most keys one key table holds: it is registered as one MR, of 64 KiB */
#define KRDMA_KEYS_BYTES	SZ_64K
#define KRDMA_KEYS_HDR		2	/* tag, count */
#define KRDMA_MAX_KEYS		(KRDMA_KEYS_BYTES / 4 - KRDMA_KEYS_HDR)

/**
 * krdma_conn_set_grant_limits - how a connection's windows are registered
 * @conn: the connection, its device known
 * @mr_pages: pages one fast registration of the device maps
 */
void krdma_conn_set_grant_limits(struct krdma_conn *conn, u32 mr_pages)
{
	u32 seg_pages = rounddown_pow_of_two(max(mr_pages, 1U));

	conn->mr_pages = mr_pages;
	conn->seg_shift = PAGE_SHIFT + ilog2(seg_pages);
	conn->max_grant_pages = min_t(u64, U32_MAX,
				      (u64)seg_pages * KRDMA_MAX_KEYS);
}

/*
 * A window of more pages than one registration maps: one registration per
 * 2^seg_shift bytes of its address range, which runs from the window's
 * offset in its first page (so that no page is split between two), and a
 * key table, read-only for the peer at address 0, naming them.
 */
static int krdma_window_map_segs(struct krdma_conn *conn,
				 struct krdma_window *win)
{
	u64 first = offset_in_page(win->buf->first_offset + win->offset);
	u64 seg_bytes = 1ULL << conn->seg_shift;
	u64 nsegs = DIV_ROUND_UP(first + win->length, seg_bytes);
	size_t table_bytes = (KRDMA_KEYS_HDR + nsegs) * sizeof(__le32);
	u32 i;
	int ret;

	if (nsegs > KRDMA_MAX_KEYS ||
	    DIV_ROUND_UP(table_bytes, PAGE_SIZE) > conn->mr_pages)
		return -E2BIG;
	win->segs = kcalloc(nsegs, sizeof(*win->segs), GFP_KERNEL_ACCOUNT);
	if (!win->segs)
		return -ENOMEM;
	win->nsegs = nsegs;
	for (i = 0; i < nsegs; i++) {
		u64 start = max(i * seg_bytes, first);
		u64 end = min((i + 1) * seg_bytes, first + win->length);

		ret = krdma_window_map_seg(conn, win, &win->segs[i], first,
					   start, end, start);
		if (ret)
			return ret;
		/*
		 * Up to 16382 MRs, under reg_sem: a teardown (device removal)
		 * waits for this, and a killed caller need not finish it
		 */
		if (fatal_signal_pending(current))
			return -EINTR;
		if (READ_ONCE(conn->state) != KRDMA_CS_CONNECTED)
			return -ENOTCONN;
		cond_resched();
	}
	win->token.addr = first;
	win->token.seg_shift = conn->seg_shift;
	/* A local window has no peer: no key table */
	if (win->local) {
		win->mr = win->segs[0].mr;
		return 0;
	}

	/*
	 * Page aligned, as the table's address (0) is: devices take an
	 * access's offset in the page from its address. Contiguous: one SGE.
	 */
	win->keys_bytes = PAGE_ALIGN(table_bytes);
	win->keys = alloc_pages_exact(win->keys_bytes,
				      GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!win->keys)
		return -ENOMEM;
	win->token.tag = get_random_u32();
	win->keys[0] = cpu_to_le32(win->token.tag);
	win->keys[1] = cpu_to_le32(nsegs);
	for (i = 0; i < nsegs; i++)
		win->keys[KRDMA_KEYS_HDR + i] = cpu_to_le32(win->segs[i].mr->rkey);
	ret = sg_alloc_table(&win->table.sgt, 1, GFP_KERNEL_ACCOUNT);
	if (ret)
		return ret;
	sg_set_buf(win->table.sgt.sgl, win->keys, table_bytes);
	ret = krdma_seg_map(conn, &win->table, DMA_TO_DEVICE,
			    win->keys_bytes >> PAGE_SHIFT, 0);
	if (ret)
		return ret;
	win->mr = win->table.mr;
	return 0;
}

/*
 * Map a window of the buffer's own pinned pages for the connection's
 * device, with fast registration: nothing is pinned again and no user
 * memory is touched, so this cannot block on userspace. The MRs still
 * need their IB_WR_REG_MR. On failure the caller unmaps what was made.
 */
static int krdma_window_map(struct krdma_conn *conn, struct krdma_window *win)
{
	struct krdma_buf *buf = win->buf;
	int ret;

	/* At most max_grant_pages: krdma_window_charge() checked */
	if (krdma_buf_pages(buf, win->offset, win->length) > conn->mr_pages)
		return krdma_window_map_segs(conn, win);

	win->segs = kcalloc(1, sizeof(*win->segs), GFP_KERNEL_ACCOUNT);
	if (!win->segs)
		return -ENOMEM;
	win->nsegs = 1;
	/*
	 * The window's address is its offset from the start of the buffer's
	 * first page, never a kernel or user address.
	 */
	ret = krdma_window_map_seg(conn, win, &win->segs[0], 0, 0, win->length,
				   buf->first_offset + win->offset);
	if (ret)
		return ret;
	win->mr = win->segs[0].mr;
	win->token.addr = win->mr->iova;
	return 0;
}

/* Registrations posted at a time, each batch waited for */
#define KRDMA_REG_BATCH 16

/*
 * Post the REG_MRs of @win's registrations, the key table last, a batch
 * at a time. Return: 0 or as krdma_post_local_wrs(); on -ETIMEDOUT and
 * -EINTR some may still be queued, and after a post the driver refused
 * (krdma_conn_post_was_refused()) some may be.
 */
static int krdma_window_register(struct krdma_conn *conn,
				 struct krdma_window *win, int ib_access)
{
	struct ib_reg_wr reg[KRDMA_REG_BATCH];
	u32 batch = clamp_t(u32, conn->sq_total / 2, 1, KRDMA_REG_BATCH);
	u32 total = win->nsegs + (win->table.mr ? 1 : 0);
	u32 i, n;
	int ret;

	for (i = 0; i < total; i += n) {
		u32 j;

		n = min(batch, total - i);
		memset(reg, 0, n * sizeof(reg[0]));
		for (j = 0; j < n; j++) {
			bool table = i + j == win->nsegs;

			reg[j].wr.opcode = IB_WR_REG_MR;
			reg[j].mr = table ? win->table.mr : win->segs[i + j].mr;
			reg[j].key = reg[j].mr->rkey;
			reg[j].access = table ? IB_ACCESS_REMOTE_READ :
						ib_access;
			if (j)
				reg[j - 1].wr.next = &reg[j].wr;
		}
		ret = krdma_post_local_wrs(conn, &reg[0].wr, n,
					   KRDMA_REG_TIMEOUT);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * A registration whose REG_MR did not complete (timeout, fatal signal):
 * the device may still use the MR and the pages, so nothing is released
 * now. The window waits on conn->reg_zombies, holding its buffer, until
 * the teardown has destroyed the QP.
 */
static void krdma_window_bury(struct krdma_conn *conn, struct krdma_window *win)
{
	win->conn = conn;
	krdma_conn_get(conn);
	krdma_buf_get(win->buf);
	mutex_lock(&conn->lock);
	list_add_tail(&win->conn_entry, &conn->reg_zombies);
	mutex_unlock(&conn->lock);
}

/*
 * A revoked window whose pages the device may still read (its fence did
 * not complete): parked with its registrations' remains on
 * conn->reg_zombies, holding a reference and through it the buffer and
 * its pinned pages, until the teardown has destroyed the QP.
 */
static void krdma_window_park(struct krdma_conn *conn, struct krdma_window *win)
{
	kref_get(&win->ref);
	mutex_lock(&conn->lock);
	list_add_tail(&win->conn_entry, &conn->reg_zombies);
	mutex_unlock(&conn->lock);
}

/*
 * Whether a revoked window's pages must wait for a fence: on a device
 * that sends a READ response from pages after their MR is gone
 * (tx_after_dereg), a window the peer may READ: its own bytes, or its
 * key table.
 */
static bool krdma_window_needs_fence(const struct krdma_conn *conn,
				     const struct krdma_window *win)
{
	return conn->tx_after_dereg &&
	       (win->keys || win->access & KRDMA_ACCESS_REMOTE_READ);
}

/*
 * Take every window off @list (conn->grants or conn->reg_zombies) and
 * release what it holds on the device; @put: drop the list's reference
 * too (zombies). conn->lock is held only to take each one off.
 */
static void krdma_conn_release_windows(struct krdma_conn *conn,
				       struct list_head *list, bool put)
{
	struct krdma_window *win, *tmp;
	LIST_HEAD(taken);

	lockdep_assert_held_write(&conn->reg_sem);

	mutex_lock(&conn->lock);
	list_splice_init(list, &taken);
	mutex_unlock(&conn->lock);
	list_for_each_entry_safe(win, tmp, &taken, conn_entry) {
		mutex_lock(&conn->lock);
		WRITE_ONCE(win->mr, NULL);
		list_del_init(&win->conn_entry);
		mutex_unlock(&conn->lock);
		krdma_window_unmap(conn, win);
		/*
		 * A local window belongs to its buffer's list, and holds this
		 * connection: off the list with it, or each connection that
		 * used the buffer would stay until the buffer goes
		 */
		if (win->local && krdma_window_unlist(win))
			krdma_grant_put(win);
		if (put)
			krdma_grant_put(win);
	}
}

/**
 * krdma_window_unlist - take a window off its buffer's list
 * @win: the window
 *
 * For a local window that list holds a reference, which whoever takes
 * the window off drops: the buffer's deregistration or the teardown of
 * the window's connection, whichever comes first.
 *
 * Context: process context; takes the buffer's lock.
 * Return: whether @win was on the list.
 */
bool krdma_window_unlist(struct krdma_window *win)
{
	bool listed;

	mutex_lock(&win->buf->lock);
	listed = !list_empty(&win->buf_entry);
	list_del_init(&win->buf_entry);
	mutex_unlock(&win->buf->lock);
	return listed;
}

/**
 * krdma_conn_bury_windows - release the windows whose registration hung
 * @conn: a connection whose QP is destroyed, conn->reg_sem held for write
 */
void krdma_conn_bury_windows(struct krdma_conn *conn)
{
	krdma_conn_release_windows(conn, &conn->reg_zombies, true);
}

/* Register a window of @buf in @conn's PD; lists it on both */
static struct krdma_window *krdma_window_create(struct krdma_conn *conn,
						struct krdma_buf *buf,
						u64 offset, u64 length,
						u32 access, bool local)
{
	struct krdma_window *win;
	int ret;

	if (offset > buf->length || length > buf->length - offset)
		return ERR_PTR(-EINVAL);
	if (access & ~buf->access)
		return ERR_PTR(-EACCES);
	if (buf->mm && buf->mm != current->mm)
		return ERR_PTR(-EPERM);

	win = kzalloc(sizeof(*win), GFP_KERNEL_ACCOUNT);
	if (!win)
		return ERR_PTR(-ENOMEM);
	kref_init(&win->ref);
	INIT_LIST_HEAD(&win->conn_entry);
	INIT_LIST_HEAD(&win->buf_entry);
	win->buf = buf;
	win->offset = offset;
	win->length = length;
	win->access = access;
	win->local = local;
	win->dir = buf->access & (KRDMA_ACCESS_LOCAL_WRITE |
				  KRDMA_ACCESS_REMOTE_WRITE |
				  KRDMA_ACCESS_REMOTE_ATOMIC) ?
		   DMA_BIDIRECTIONAL : DMA_TO_DEVICE;

	/*
	 * reg_sem (read) keeps the PD, the QP and the device while this
	 * registers; conn->lock is taken only for short checks and list
	 * changes, never across the device or the wait below, so the CM
	 * handler and other users of the connection never wait for us.
	 */
	if (down_read_killable(&conn->reg_sem)) {
		ret = -EINTR;
		goto err_free_win;
	}
	mutex_lock(&conn->lock);
	if (conn->state != KRDMA_CS_CONNECTED)
		ret = -ENOTCONN;
	else if (access & KRDMA_ACCESS_REMOTE_ATOMIC &&
		 conn->kdev->ibdev->attrs.atomic_cap == IB_ATOMIC_NONE)
		ret = -EOPNOTSUPP;
	else
		ret = 0;
	mutex_unlock(&conn->lock);
	if (ret)
		goto err_up;
	ret = krdma_window_charge(conn, win);
	if (ret)
		goto err_up;

	ret = krdma_window_map(conn, win);
	if (ret)
		goto err_unmap;
	ret = krdma_window_register(conn, win, krdma_ib_access(buf, access));
	if (ret == -ETIMEDOUT || ret == -EINTR ||
	    (ret && ret != -EIO && krdma_conn_post_was_refused(conn))) {
		/*
		 * Still queued on the device, or perhaps (a driver may take
		 * the first WRs of a chain it refuses): keep it all until the
		 * QP goes, and fail the connection, so that the MRs never
		 * become valid for the peer behind their owner's back
		 */
		krdma_window_bury(conn, win);
		krdma_conn_qp_failed(conn, ret == -ETIMEDOUT ? -ETIMEDOUT :
					   -ECONNABORTED);
		up_read(&conn->reg_sem);
		return ERR_PTR(ret);
	}
	/* Flushed: the connection failed under us */
	if (ret == -EIO)
		ret = -ENOTCONN;
	if (ret)
		goto err_unmap;

	win->token.length = length;
	win->token.rkey = win->mr->rkey;
	win->token.access = access;

	mutex_lock(&buf->lock);
	if (buf->dead) {
		mutex_unlock(&buf->lock);
		ret = -ENOENT;
		goto err_unmap;
	}
	mutex_lock(&conn->lock);
	win->conn = conn;
	krdma_conn_get(conn);
	krdma_buf_get(buf);
	list_add_tail(&win->conn_entry, &conn->grants);
	list_add_tail(&win->buf_entry, &buf->grants);
	mutex_unlock(&conn->lock);
	mutex_unlock(&buf->lock);
	up_read(&conn->reg_sem);
	return win;

err_unmap:
	win->mr = NULL;
	/* And its charge */
	krdma_window_unmap(conn, win);
err_up:
	up_read(&conn->reg_sem);
err_free_win:
	kfree(win->segs);
	kfree(win);
	return ERR_PTR(ret);
}

/**
 * krdma_grant_create - open a window of a buffer to a connection's peer
 * @conn: the connection
 * @buf: the buffer, of the calling process
 * @offset: start of the window in @buf
 * @length: length of the window, not 0
 * @access: KRDMA_ACCESS_REMOTE_* rights, at least one
 *
 * The window maps the pages the buffer pinned when it was registered: it
 * pins nothing again, and what it exposes does not change if the process
 * unmaps or remaps that memory later. (A user buffer's windows count
 * their pages against max_window_pages_per_user of its user; kernel
 * buffers count nothing.) Rights follow
 * the buffer: a read-only buffer can be granted KRDMA_ACCESS_REMOTE_READ
 * only. The token for the peer is krdma_grant_token(); its address is the
 * window's offset from the start of the buffer's first page.
 *
 * Context: process context of the buffer's owner (user buffers); sleeps,
 * for at most 10 s, until the device has registered the window; a fatal
 * signal ends the wait.
 * Return: the grant, or ERR_PTR(): -EINVAL (bad window or rights),
 * -EACCES (more rights than the buffer allows), -EOPNOTSUPP (atomics
 * without device support), -EPERM (another process's buffer), -ENOENT
 * (buffer deregistered), -ENOTCONN, -E2BIG (more pages than one
 * registration of the device maps: krdma_conn_info() says how many),
 * -ETIMEDOUT (the device did not register it; the connection fails),
 * -EINTR, -ENOMEM, or the driver's error.
 */
struct krdma_window *krdma_grant_create(struct krdma_conn *conn,
					struct krdma_buf *buf, u64 offset,
					u64 length, u32 access)
{
	if (!length || !access || access & ~KRDMA_ACCESS_REMOTE)
		return ERR_PTR(-EINVAL);
	return krdma_window_create(conn, buf, offset, length, access, false);
}
EXPORT_SYMBOL_NS_GPL(krdma_grant_create, KRDMA);

/**
 * krdma_grant_revoke - make a grant's token stop working
 * @grant: the grant; may be revoked already
 *
 * On siw, a window the peer may READ is first deregistered, then fenced:
 * a zero-length RDMA WRITE completes only once siw has sent every READ
 * response it started before, from the window's pages too (siw checks a
 * response's key once, when it starts). Its pages are released after
 * that; should the fence not complete within 10 s (or a fatal signal end
 * the wait), they are kept until the connection's QP is destroyed.
 *
 * Context: process context; sleeps (on siw, up to 10 s).
 */
void krdma_grant_revoke(struct krdma_window *grant)
{
	struct krdma_conn *conn = grant->conn;
	bool live;

	/*
	 * Teardown frees the PD under reg_sem (write): not while we dereg.
	 * It drains the QP before it takes reg_sem, and the drain flushes a
	 * fence: the wait below never holds it up for long.
	 */
	down_read(&conn->reg_sem);
	mutex_lock(&conn->lock);
	live = grant->mr;
	WRITE_ONCE(grant->mr, NULL);
	list_del_init(&grant->conn_entry);
	mutex_unlock(&conn->lock);
	if (live && krdma_window_needs_fence(conn, grant)) {
		krdma_window_dereg(grant);
		if (krdma_post_heartbeat(conn)) {
			krdma_window_park(conn, grant);
			live = false;
		}
	}
	if (live)
		krdma_window_unmap(conn, grant);
	up_read(&conn->reg_sem);

	krdma_window_unlist(grant);
}

/**
 * krdma_conn_revoke_grants - drop every registration of a connection
 * @conn: the connection, conn->reg_sem held for write
 *
 * Called on teardown, after the QP is destroyed (so that no READ response
 * is sent from a window's pages any more) and before the protection
 * domain goes. The grants stay on their buffers' lists until revoked or
 * put by their owners; local windows, which belong to the lists, leave
 * them here.
 */
void krdma_conn_revoke_grants(struct krdma_conn *conn)
{
	krdma_conn_release_windows(conn, &conn->grants, false);
}

/**
 * krdma_grant_token - the token of a grant, for its peer
 * @grant: the grant
 * @token: filled in; all zero once the grant is revoked
 */
void krdma_grant_token(struct krdma_window *grant, struct krdma_token *token)
{
	if (READ_ONCE(grant->mr))
		*token = grant->token;
	else
		memset(token, 0, sizeof(*token));
}
EXPORT_SYMBOL_NS_GPL(krdma_grant_token, KRDMA);

/**
 * krdma_grant_destroy - revoke a grant and drop the owner's reference
 * @grant: the grant, from krdma_grant_create()
 *
 * Context: process context; sleeps (on siw up to 10 s: see
 * krdma_grant_revoke()).
 */
void krdma_grant_destroy(struct krdma_window *grant)
{
	krdma_grant_revoke(grant);
	krdma_grant_put(grant);
}
EXPORT_SYMBOL_NS_GPL(krdma_grant_destroy, KRDMA);

static void krdma_grant_release(struct kref *ref)
{
	struct krdma_window *grant = container_of(ref, struct krdma_window, ref);

	WARN_ON(grant->mr);
	krdma_conn_put(grant->conn);
	krdma_buf_put(grant->buf);
	kfree(grant->segs);
	kfree(grant);
}

/**
 * krdma_local_window_get - the local window of a buffer on a connection
 * @conn: the connection
 * @buf: a user buffer of the calling process
 *
 * A SEND or RECV whose pages do not fit the SGEs of one work request goes
 * through one registration of the whole buffer in the connection's PD,
 * with local access only. It is made on first use, kept on the buffer,
 * and dropped with the connection's teardown or the buffer's
 * deregistration.
 *
 * Context: process context of the buffer's owner; sleeps.
 * Return: the window, referenced, or ERR_PTR() as krdma_grant_create(),
 * or -EMFILE: the buffer's user would hold more window pages or grants
 * than its limits allow (a local window counts as a grant).
 */
struct krdma_window *krdma_local_window_get(struct krdma_conn *conn,
					    struct krdma_buf *buf)
{
	struct krdma_window *win;

	mutex_lock(&buf->lock);
	list_for_each_entry(win, &buf->grants, buf_entry) {
		if (win->local && win->conn == conn && READ_ONCE(win->mr)) {
			kref_get(&win->ref);
			mutex_unlock(&buf->lock);
			return win;
		}
	}
	mutex_unlock(&buf->lock);

	/*
	 * A race with another poster only makes a second window, counted
	 * as the first is (it may take the user past a limit: -EMFILE)
	 */
	win = krdma_window_create(conn, buf, 0, buf->length, 0, true);
	if (!IS_ERR(win))
		kref_get(&win->ref);	/* the caller's; the buffer has one */
	return win;
}

/**
 * krdma_grant_put - drop a reference to a grant
 * @grant: the grant, or NULL; revoked before the last put
 */
void krdma_grant_put(struct krdma_window *grant)
{
	if (grant)
		kref_put(&grant->ref, krdma_grant_release);
}

/* Key tables of the peer a connection keeps, at most */
#define KRDMA_RKEYS_CACHED 64
/* How long reading a key table may take */
#define KRDMA_RKEYS_TIMEOUT (10 * HZ)

static void krdma_rkeys_release(struct kref *ref)
{
	kfree(container_of(ref, struct krdma_rkeys, ref));
}

/**
 * krdma_rkeys_put - drop a reference to a peer's key table
 * @rkeys: the table, or NULL
 *
 * Context: any.
 */
void krdma_rkeys_put(struct krdma_rkeys *rkeys)
{
	if (rkeys)
		kref_put(&rkeys->ref, krdma_rkeys_release);
}
EXPORT_SYMBOL_NS_GPL(krdma_rkeys_put, KRDMA);

/* A cached table that is the one @token names, referenced, or NULL */
static struct krdma_rkeys *krdma_rkeys_lookup(struct krdma_conn *conn,
					      const struct krdma_token *token,
					      u32 nkeys)
{
	struct krdma_rkeys *rk;

	xa_lock(&conn->rkeys);
	rk = xa_load(&conn->rkeys, token->rkey);
	if (rk && (rk->tag != token->tag || rk->shift != token->seg_shift ||
		   rk->nkeys != nkeys))
		rk = NULL;
	if (rk)
		kref_get(&rk->ref);
	xa_unlock(&conn->rkeys);
	return rk;
}

/* Cache @rk (the caller's reference stays the caller's) */
static void krdma_rkeys_cache(struct krdma_conn *conn, struct krdma_rkeys *rk)
{
	struct krdma_rkeys *old = NULL, *evicted = NULL;
	unsigned long index = 0;
	u32 n = 0;
	void *entry;

	kref_get(&rk->ref);
	xa_lock(&conn->rkeys);
	xa_for_each(&conn->rkeys, index, entry)
		n++;
	if (n >= KRDMA_RKEYS_CACHED) {
		index = 0;
		evicted = xa_find(&conn->rkeys, &index, ULONG_MAX, XA_PRESENT);
		if (evicted)
			__xa_erase(&conn->rkeys, index);
	}
	old = __xa_store(&conn->rkeys, rk->rkey, rk, GFP_ATOMIC);
	if (xa_is_err(old)) {
		old = NULL;
		krdma_rkeys_put(rk);	/* not cached: only the caller's */
	}
	xa_unlock(&conn->rkeys);
	krdma_rkeys_put(old);
	krdma_rkeys_put(evicted);
}

/*
 * The READ of a peer's key table. Its waiter may leave early (killed, or
 * timed out): the last of the waiter and the completion frees it, so the
 * device never writes into freed memory.
 */
struct krdma_rkeys_fetch {
	struct krdma_req req;
	struct completion done;
	struct krdma_wc wc;
	refcount_t ref;
	__le32 keys[];
};

static void krdma_rkeys_fetch_put(struct krdma_rkeys_fetch *f)
{
	if (refcount_dec_and_test(&f->ref))
		kfree(f);
}

static void krdma_rkeys_fetch_done(struct krdma_req *req,
				   const struct krdma_wc *wc)
{
	struct krdma_rkeys_fetch *f = container_of(req,
						   struct krdma_rkeys_fetch,
						   req);

	f->wc = *wc;
	complete(&f->done);
	krdma_rkeys_fetch_put(f);	/* the operation's */
}

/*
 * RDMA READ the peer's key table that @token names into @rk, whose nkeys
 * is set. Waits up to KRDMA_RKEYS_TIMEOUT; a fatal signal ends the wait at
 * once. A READ not done by then fails the connection (which flushes it)
 * if no send WR of the connection completed meanwhile: the peer is silent.
 * One that waits behind a queue that moves, slower than the timeout on a
 * slow link, fails only the call; it completes later, unseen.
 */
static int krdma_rkeys_read(struct krdma_conn *conn,
			    const struct krdma_token *token,
			    struct krdma_rkeys *rk)
{
	size_t bytes = (KRDMA_KEYS_HDR + rk->nkeys) * sizeof(__le32);
	struct krdma_rkeys_fetch *f;
	struct krdma_buf *buf;
	u64 progress;
	long left;
	u32 i;
	int ret;

	/*
	 * Charged to the caller's memory cgroup, as the table it becomes:
	 * a connection keeps up to KRDMA_RKEYS_CACHED of up to 64 KiB each
	 */
	f = kzalloc(struct_size(f, keys, KRDMA_KEYS_HDR + rk->nkeys),
		    GFP_KERNEL_ACCOUNT);
	if (!f)
		return -ENOMEM;
	init_completion(&f->done);
	refcount_set(&f->ref, 1);
	buf = krdma_buf_reg_kernel(f->keys, bytes, KRDMA_ACCESS_LOCAL_WRITE);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_put;
	}
	f->req.opcode = KRDMA_OP_READ;
	f->req.num_sge = 1;
	f->req.sge[0].buf = buf;
	f->req.sge[0].length = bytes;
	f->req.remote_addr = 0;
	f->req.rkey = token->rkey;
	f->req.done = krdma_rkeys_fetch_done;
	refcount_inc(&f->ref);
	progress = krdma_conn_sq_progress(conn);
	ret = krdma_post(conn, &f->req);
	if (ret) {
		refcount_dec(&f->ref);	/* not taken: no completion */
		goto out_dereg;
	}

	left = wait_for_completion_killable_timeout(&f->done,
						    KRDMA_RKEYS_TIMEOUT);
	if (left < 0) {
		ret = -EINTR;
	} else if (!left) {
		/* A silent peer fails the connection: the READ is flushed */
		if (krdma_conn_sq_progress(conn) == progress)
			krdma_conn_qp_failed(conn, -ETIMEDOUT);
		ret = -ETIMEDOUT;
	} else if (f->wc.status != IB_WC_SUCCESS) {
		/* Not posted (out of memory), flushed, or refused by the peer */
		ret = f->req.post_error ?: f->wc.status == IB_WC_WR_FLUSH_ERR ?
		      -ENOTCONN : -EIO;
	} else if (le32_to_cpu(f->keys[0]) != token->tag ||
		   le32_to_cpu(f->keys[1]) != rk->nkeys) {
		ret = -EPROTO;	/* not the table the token names */
	} else {
		for (i = 0; i < rk->nkeys; i++)
			rk->keys[i] = le32_to_cpu(f->keys[KRDMA_KEYS_HDR + i]);
	}
out_dereg:
	/* The READ, if still in flight, keeps the buffer until it ends */
	krdma_buf_dereg(buf);
out_put:
	krdma_rkeys_fetch_put(f);
	return ret;
}

/**
 * krdma_rkeys_get - the peer's key table a token names
 * @conn: the connection the token was granted on, by the peer
 * @token: a token whose seg_shift is not 0
 *
 * A window larger than one registration comes as a token naming a key
 * table (struct krdma_token in <linux/krdma.h>). The first call for it
 * reads the table from the peer by RDMA READ and waits for it; the
 * connection keeps up to 64 tables it read, so later calls usually do
 * not. Put the result in krdma_req.rkeys of each operation through the
 * token.
 *
 * Context: process context; sleeps, up to 10 s, or until a fatal signal.
 * After 10 s the connection fails if none of its send work requests
 * completed meanwhile (a silent peer); else only the call does, and the
 * READ completes later, behind the queue ahead of it.
 * Return: the table, referenced (krdma_rkeys_put()), or ERR_PTR():
 * -EINVAL (seg_shift not within 12..63, an empty or wrapping window, or
 * more keys than a table holds), -EOPNOTSUPP (the peer serves no RDMA
 * READ), -EPROTO (what was read is not the token's table), -ENOTCONN,
 * -ETIMEDOUT, -EIO (the READ failed: the token was revoked), -ENOMEM,
 * -EINTR (a fatal signal).
 */
struct krdma_rkeys *krdma_rkeys_get(struct krdma_conn *conn,
				    const struct krdma_token *token)
{
	struct krdma_rkeys *rk;
	u64 last;
	u32 nkeys;
	int ret;

	if (token->seg_shift < 12 || token->seg_shift > 63 || !token->length ||
	    token->addr + token->length < token->addr)
		return ERR_PTR(-EINVAL);
	last = (token->addr + token->length - 1) >> token->seg_shift;
	if (last >= KRDMA_MAX_KEYS)
		return ERR_PTR(-EINVAL);
	nkeys = last + 1;

	rk = krdma_rkeys_lookup(conn, token, nkeys);
	if (rk)
		return rk;
	if (!READ_ONCE(conn->initiator_depth))
		return ERR_PTR(-EOPNOTSUPP);

	rk = kzalloc(struct_size(rk, keys, nkeys), GFP_KERNEL_ACCOUNT);
	if (!rk)
		return ERR_PTR(-ENOMEM);
	rk->nkeys = nkeys;
	ret = krdma_rkeys_read(conn, token, rk);
	if (ret) {
		kfree(rk);
		return ERR_PTR(ret);
	}
	kref_init(&rk->ref);
	rk->rkey = token->rkey;
	rk->tag = token->tag;
	rk->shift = token->seg_shift;
	krdma_rkeys_cache(conn, rk);
	return rk;
}
EXPORT_SYMBOL_NS_GPL(krdma_rkeys_get, KRDMA);

/**
 * krdma_conn_drop_rkeys - forget the peer's key tables
 * @conn: the connection, at its release
 */
void krdma_conn_drop_rkeys(struct krdma_conn *conn)
{
	struct krdma_rkeys *rk;
	unsigned long index;

	xa_for_each(&conn->rkeys, index, rk)
		krdma_rkeys_put(rk);
	xa_destroy(&conn->rkeys);
}
