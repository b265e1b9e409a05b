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
#include <linux/slab.h>
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

/*
 * Release what a window holds on the device: the MR, the DMA mapping and
 * the scatterlist. Never with conn->lock held (these are device calls);
 * the caller holds conn->reg_sem, so that the PD and the device are there.
 */
static void krdma_window_unmap(struct krdma_conn *conn,
			       struct krdma_window *win, struct ib_mr *mr)
{
	if (mr)
		ib_dereg_mr(mr);
	if (win->mapped)
		ib_dma_unmap_sgtable_attrs(conn->kdev->ibdev, &win->sgt,
					   win->dir, 0);
	win->mapped = false;
	sg_free_table(&win->sgt);
}

/*
 * The one exception to "one pin per buffer": siw maps at most 256 pages
 * (SIW_MAX_SGE_PBL) in a fast registration, so a larger window of a user
 * buffer on siw is registered as before, with ib_reg_user_mr(), which
 * pins the range again (siw charges it to RLIMIT_MEMLOCK) and maps what
 * is mapped at the buffer's address now. siw needs no udata. Until a
 * token can span several registrations (Documentation/design.rst), this
 * keeps siw's large windows working; krdma_window_still_mapped() makes
 * sure it maps the buffer's own pages and faults nothing in.
 */
static bool krdma_window_needs_user_mr(struct krdma_conn *conn,
				       struct krdma_window *win, u64 npages)
{
	return npages > krdma_conn_max_grant_pages(conn) && win->buf->mm &&
	       conn->kdev->ibdev->ops.driver_id == RDMA_DRIVER_SIW;
}

/* Pages compared at a time by krdma_window_still_mapped() */
#define KRDMA_MAPPED_BATCH 64

/*
 * Whether the window's range of the process still maps the pages the
 * buffer pinned, with the access it needs, without faulting anything in
 * (GUP-fast only: no mmap_lock, no page fault, so memory that never
 * answers cannot block us). A range that was unmapped, remapped, made
 * PROT_NONE or not present is refused rather than registered. A thread
 * of the same process that remaps the range right after this check can
 * still make the driver's own pin fault: that blocks this caller's
 * registration (and so its connection's teardown) only.
 */
static bool krdma_window_still_mapped(struct krdma_window *win, bool write)
{
	struct krdma_buf *buf = win->buf;
	u64 first = (buf->first_offset + win->offset) >> PAGE_SHIFT;
	u64 npages = krdma_buf_pages(buf, win->offset, win->length);
	unsigned long start = (buf->uaddr & PAGE_MASK) + first * PAGE_SIZE;
	struct page *pages[KRDMA_MAPPED_BATCH];
	u64 done = 0;
	bool same = true;

	while (same && done < npages) {
		int want = min_t(u64, npages - done, KRDMA_MAPPED_BATCH);
		int got, i;

		got = get_user_pages_fast_only(start + done * PAGE_SIZE, want,
					       write ? FOLL_WRITE : 0, pages);
		same = got == want;
		for (i = 0; i < max(got, 0); i++) {
			same &= pages[i] == buf->pages[first + done + i];
			put_page(pages[i]);
		}
		done += want;
	}
	return same;
}

/*
 * Map a window of the buffer's own pinned pages for the connection's
 * device, in one fast-registration MR: nothing is pinned again and no
 * user memory is touched, so this cannot block on userspace. *@reg is set
 * when the MR still needs its IB_WR_REG_MR.
 */
static int krdma_window_map(struct krdma_conn *conn, struct krdma_window *win,
			    int ib_access, struct ib_mr **out, bool *reg)
{
	struct ib_device *ibdev = conn->kdev->ibdev;
	struct krdma_buf *buf = win->buf;
	struct ib_mr *mr;
	u64 npages;
	int n, ret;

	npages = krdma_buf_pages(buf, win->offset, win->length);
	if (krdma_window_needs_user_mr(conn, win, npages)) {
		if (!krdma_window_still_mapped(win, ib_access &
					       IB_ACCESS_LOCAL_WRITE))
			return -EFAULT;
		mr = ib_reg_user_mr(conn->pd, buf->uaddr + win->offset,
				    win->length, buf->uaddr + win->offset,
				    ib_access);
		if (IS_ERR(mr))
			return PTR_ERR(mr);
		*out = mr;
		*reg = false;
		return 0;
	}
	if (npages > krdma_conn_max_grant_pages(conn))
		return -E2BIG;
	ret = krdma_buf_sgt(buf, win->offset, win->length,
			    ib_dma_max_seg_size(ibdev), &win->sgt);
	if (ret)
		return ret;
	ret = ib_dma_map_sgtable_attrs(ibdev, &win->sgt, win->dir, 0);
	if (ret)
		goto err_free_sgt;
	win->mapped = true;

	mr = ib_alloc_mr(conn->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		goto err_unmap;
	}
	n = ib_map_mr_sg(mr, win->sgt.sgl, win->sgt.nents, NULL, PAGE_SIZE);
	if (n != win->sgt.nents) {
		ret = n < 0 ? n : -E2BIG;
		goto err_dereg_mr;
	}
	/*
	 * The window's address is its offset from the start of the buffer's
	 * first page (same offset in the page as the DMA address: only the
	 * base moves), never a kernel or user address.
	 */
	mr->iova = buf->first_offset + win->offset;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	*out = mr;
	*reg = true;
	return 0;

err_dereg_mr:
	ib_dereg_mr(mr);
err_unmap:
	ib_dma_unmap_sgtable_attrs(ibdev, &win->sgt, win->dir, 0);
	win->mapped = false;
err_free_sgt:
	sg_free_table(&win->sgt);
	return ret;
}

/*
 * A registration whose REG_MR did not complete (timeout, fatal signal):
 * the device may still use the MR and the pages, so nothing is released
 * now. The window waits on conn->reg_zombies, holding its buffer, until
 * the teardown has destroyed the QP.
 */
static void krdma_window_bury(struct krdma_conn *conn, struct krdma_window *win,
			      struct ib_mr *mr)
{
	win->mr = mr;
	win->conn = conn;
	krdma_conn_get(conn);
	krdma_buf_get(win->buf);
	mutex_lock(&conn->lock);
	list_add_tail(&win->conn_entry, &conn->reg_zombies);
	mutex_unlock(&conn->lock);
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
		struct ib_mr *mr;

		mutex_lock(&conn->lock);
		mr = win->mr;
		WRITE_ONCE(win->mr, NULL);
		list_del_init(&win->conn_entry);
		mutex_unlock(&conn->lock);
		krdma_window_unmap(conn, win, mr);
		if (put)
			krdma_grant_put(win);
	}
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
	struct ib_reg_wr reg = {};
	struct ib_mr *mr;
	bool needs_reg;
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
	if (conn->tearing || conn->state != KRDMA_CS_CONNECTED)
		ret = -ENOTCONN;
	else if (access & KRDMA_ACCESS_REMOTE_ATOMIC &&
		 conn->kdev->ibdev->attrs.atomic_cap == IB_ATOMIC_NONE)
		ret = -EOPNOTSUPP;
	else
		ret = 0;
	mutex_unlock(&conn->lock);
	if (ret)
		goto err_up;

	ret = krdma_window_map(conn, win, krdma_ib_access(buf, access), &mr,
			       &needs_reg);
	if (ret)
		goto err_up;
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = krdma_ib_access(buf, access);
	ret = needs_reg ? krdma_post_local_wr(conn, &reg.wr,
					      KRDMA_REG_TIMEOUT) : 0;
	if (ret == -ETIMEDOUT || ret == -EINTR) {
		/*
		 * Still queued on the device: keep it all until the QP goes,
		 * and fail the connection, so that the MR never becomes valid
		 * for the peer behind its owner's back
		 */
		krdma_window_bury(conn, win, mr);
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

	win->token.addr = mr->iova;
	win->token.length = length;
	win->token.rkey = mr->rkey;
	win->token.access = access;

	mutex_lock(&buf->lock);
	if (buf->dead) {
		mutex_unlock(&buf->lock);
		ret = -ENOENT;
		goto err_unmap;
	}
	mutex_lock(&conn->lock);
	win->mr = mr;
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
	krdma_window_unmap(conn, win, mr);
err_up:
	up_read(&conn->reg_sem);
err_free_win:
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
 * pins nothing and charges nothing again, and what it exposes does not
 * change if the process unmaps or remaps that memory later. Rights follow
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
 * Context: process context; sleeps.
 */
void krdma_grant_revoke(struct krdma_window *grant)
{
	struct krdma_conn *conn = grant->conn;
	struct ib_mr *mr;

	/* Teardown frees the PD under reg_sem (write): not while we dereg */
	down_read(&conn->reg_sem);
	mutex_lock(&conn->lock);
	mr = grant->mr;
	WRITE_ONCE(grant->mr, NULL);
	list_del_init(&grant->conn_entry);
	mutex_unlock(&conn->lock);
	if (mr)
		krdma_window_unmap(conn, grant, mr);
	up_read(&conn->reg_sem);

	mutex_lock(&grant->buf->lock);
	list_del_init(&grant->buf_entry);
	mutex_unlock(&grant->buf->lock);
}

/**
 * krdma_conn_revoke_grants - drop every registration of a connection
 * @conn: the connection, conn->reg_sem held for write
 *
 * Called on teardown, after the QP is drained and before the protection
 * domain goes. The grants stay on their buffers' lists until revoked or
 * put by their owners.
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
 * Context: process context; sleeps.
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
 * Return: the window, referenced, or ERR_PTR() as krdma_grant_create().
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

	/* A race with another poster only makes a second window: harmless */
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
