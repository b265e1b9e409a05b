// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: grants, the remote side of a buffer. A grant registers a window
 * of a buffer in one connection's protection domain with a subset of the
 * remote access rights: its rkey works on that connection's QP and no
 * other, and stops working when the registration is dropped (revoke,
 * buffer deregistered, connection torn down).
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/slab.h>
#include <linux/krdma.h>

#include "krdma.h"

static struct krdma_window *krdma_window_create(struct krdma_conn *conn,
						struct krdma_buf *buf,
						u64 offset, u64 length,
						u32 access, bool local);

/*
 * Register a window of a kernel buffer with a fast-registration MR: map
 * its pages, and post the registration on the connection's QP. The
 * window's address is its offset from the start of the buffer's first
 * page, never a kernel address. At most max_fast_reg_page_list_len pages.
 */
static int krdma_window_reg_kernel(struct krdma_conn *conn,
				   struct krdma_window *win, int ib_access,
				   struct ib_mr **out)
{
	struct ib_device *ibdev = conn->kdev->ibdev;
	struct krdma_buf *buf = win->buf;
	u64 first = buf->first_offset + win->offset;
	struct ib_reg_wr reg = {};
	struct ib_mr *mr;
	u32 npages;
	int n, ret;

	lockdep_assert_held(&conn->lock);

	npages = krdma_buf_pages(buf, win->offset, win->length);
	if (npages > ibdev->attrs.max_fast_reg_page_list_len)
		return -E2BIG;
	ret = krdma_buf_sgt(buf, win->offset, win->length,
			    ib_dma_max_seg_size(ibdev), &win->sgt);
	if (ret)
		return ret;
	ret = ib_dma_map_sgtable_attrs(ibdev, &win->sgt, DMA_BIDIRECTIONAL, 0);
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
		ret = n < 0 ? n : -EINVAL;
		goto err_dereg_mr;
	}
	/* Same offset in the page as the DMA address: only the base moves */
	mr->iova = first;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = ib_access;
	ret = krdma_post_local_wr(conn, &reg.wr);
	if (ret)
		goto err_dereg_mr;
	*out = mr;
	return 0;

err_dereg_mr:
	ib_dereg_mr(mr);
err_unmap:
	ib_dma_unmap_sgtable_attrs(ibdev, &win->sgt, DMA_BIDIRECTIONAL, 0);
	win->mapped = false;
err_free_sgt:
	sg_free_table(&win->sgt);
	return ret;
}

#define KRDMA_ACCESS_REMOTE (KRDMA_ACCESS_REMOTE_READ | \
			     KRDMA_ACCESS_REMOTE_WRITE | \
			     KRDMA_ACCESS_REMOTE_ATOMIC)

static int krdma_ib_access(u32 access)
{
	int ib_access = 0;

	if (access & KRDMA_ACCESS_REMOTE_READ)
		ib_access |= IB_ACCESS_REMOTE_READ;
	if (access & KRDMA_ACCESS_REMOTE_WRITE)
		ib_access |= IB_ACCESS_REMOTE_WRITE | IB_ACCESS_LOCAL_WRITE;
	if (access & KRDMA_ACCESS_REMOTE_ATOMIC)
		ib_access |= IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_LOCAL_WRITE;
	return ib_access;
}

/**
 * krdma_grant_create - open a window of a buffer to a connection's peer
 * @conn: the connection
 * @buf: the buffer, of the calling process
 * @offset: start of the window in @buf
 * @length: length of the window, not 0
 * @access: KRDMA_ACCESS_REMOTE_* rights, at least one
 *
 * The token for the peer is (grant->mr->iova, @length, grant->mr->rkey).
 * The window's address is its user virtual address, as with verbs: some
 * drivers (siw) ignore any other I/O virtual address given to them.
 *
 * Context: process context of the buffer's owner (user buffers); sleeps.
 * Return: the grant, or ERR_PTR(): -EINVAL (bad window or rights),
 * -EACCES (more rights than the buffer allows), -EOPNOTSUPP (atomics
 * without device support), -EPERM (another process's buffer), -ENOENT
 * (buffer deregistered), -ENOTCONN, -E2BIG (a kernel buffer's window
 * larger than one fast registration maps), or the driver's error.
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

/* Register a window of @buf in @conn's PD; lists it on both */
static struct krdma_window *krdma_window_create(struct krdma_conn *conn,
						struct krdma_buf *buf,
						u64 offset, u64 length,
						u32 access, bool local)
{
	struct krdma_window *grant;
	struct ib_mr *mr;
	int ret;

	if (offset > buf->length || length > buf->length - offset)
		return ERR_PTR(-EINVAL);
	if (access & ~buf->access)
		return ERR_PTR(-EACCES);
	if (buf->mm && buf->mm != current->mm)
		return ERR_PTR(-EPERM);

	grant = kzalloc(sizeof(*grant), GFP_KERNEL);
	if (!grant)
		return ERR_PTR(-ENOMEM);
	kref_init(&grant->ref);
	INIT_LIST_HEAD(&grant->conn_entry);
	INIT_LIST_HEAD(&grant->buf_entry);
	grant->offset = offset;
	grant->length = length;
	grant->access = access;
	grant->local = local;

	mutex_lock(&buf->lock);
	if (buf->dead) {
		ret = -ENOENT;
		goto err_unlock_buf;
	}
	mutex_lock(&conn->lock);
	if (conn->tearing || conn->state != KRDMA_CS_CONNECTED) {
		ret = -ENOTCONN;
		goto err_unlock_conn;
	}
	if (access & KRDMA_ACCESS_REMOTE_ATOMIC &&
	    conn->kdev->ibdev->attrs.atomic_cap == IB_ATOMIC_NONE) {
		ret = -EOPNOTSUPP;
		goto err_unlock_conn;
	}

	if (buf->mm) {
		mr = ib_reg_user_mr(conn->pd, buf->uaddr + offset, length,
				    buf->uaddr + offset,
				    krdma_ib_access(access) |
				    IB_ACCESS_LOCAL_WRITE);
		ret = PTR_ERR_OR_ZERO(mr);
	} else {
		grant->buf = buf;
		ret = krdma_window_reg_kernel(conn, grant,
					      krdma_ib_access(access) |
					      IB_ACCESS_LOCAL_WRITE, &mr);
	}
	if (ret)
		goto err_unlock_conn;
	grant->mr = mr;
	grant->conn = conn;
	krdma_conn_get(conn);
	grant->buf = buf;
	krdma_buf_get(buf);
	list_add_tail(&grant->conn_entry, &conn->grants);
	list_add_tail(&grant->buf_entry, &buf->grants);
	mutex_unlock(&conn->lock);
	mutex_unlock(&buf->lock);
	return grant;

err_unlock_conn:
	mutex_unlock(&conn->lock);
err_unlock_buf:
	mutex_unlock(&buf->lock);
	kfree(grant);
	return ERR_PTR(ret);
}

/* Drop the registration; caller holds conn->lock */
static void krdma_grant_drop_mr(struct krdma_window *grant)
{
	struct krdma_conn *conn = grant->conn;

	lockdep_assert_held(&conn->lock);

	if (grant->mr) {
		ib_dereg_mr(grant->mr);
		WRITE_ONCE(grant->mr, NULL);
	}
	if (grant->mapped) {
		ib_dma_unmap_sgtable_attrs(conn->kdev->ibdev, &grant->sgt,
					   DMA_BIDIRECTIONAL, 0);
		grant->mapped = false;
	}
	sg_free_table(&grant->sgt);
	list_del_init(&grant->conn_entry);
}

/**
 * krdma_grant_revoke - make a grant's token stop working
 * @grant: the grant; may be revoked already
 *
 * Context: process context; sleeps.
 */
void krdma_grant_revoke(struct krdma_window *grant)
{
	mutex_lock(&grant->conn->lock);
	krdma_grant_drop_mr(grant);
	mutex_unlock(&grant->conn->lock);

	mutex_lock(&grant->buf->lock);
	list_del_init(&grant->buf_entry);
	mutex_unlock(&grant->buf->lock);
}

/**
 * krdma_conn_revoke_grants - drop every registration of a connection
 * @conn: the connection, its lock held
 *
 * Called on teardown, before the protection domain goes. The grants stay
 * on their buffers' lists until revoked or put by their owners.
 */
void krdma_conn_revoke_grants(struct krdma_conn *conn)
{
	struct krdma_window *grant, *tmp;

	lockdep_assert_held(&conn->lock);

	list_for_each_entry_safe(grant, tmp, &conn->grants, conn_entry)
		krdma_grant_drop_mr(grant);
}

/**
 * krdma_grant_token - the token of a grant, for its peer
 * @grant: the grant
 * @token: filled in; all zero once the grant is revoked
 */
void krdma_grant_token(struct krdma_window *grant, struct krdma_token *token)
{
	struct ib_mr *mr = READ_ONCE(grant->mr);

	memset(token, 0, sizeof(*token));
	if (!mr)
		return;
	token->addr = mr->iova;
	token->length = grant->length;
	token->rkey = mr->rkey;
	token->access = grant->access;
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
