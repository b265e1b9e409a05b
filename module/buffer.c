// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: registered buffers. A user buffer is pinned long-term, once, at
 * registration: every operation and every grant uses these pages and never
 * pins again. The pinned pages are charged to the user who registered them
 * (user_struct->locked_vm against RLIMIT_MEMLOCK, as io_uring does), not
 * to a process: the charge lives exactly as long as the pins, whatever
 * happens to the process (exec, exit, a file passed on). The pages are not
 * mapped for any device here: each operation maps the pages it moves for
 * the device of its connection, so one buffer serves every connection.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/krdma.h>

#include "krdma.h"

#define KRDMA_ACCESS_ALL (KRDMA_ACCESS_LOCAL_WRITE | KRDMA_ACCESS_REMOTE_READ | \
			  KRDMA_ACCESS_REMOTE_WRITE | KRDMA_ACCESS_REMOTE_ATOMIC)
#define KRDMA_ACCESS_WRITABLE (KRDMA_ACCESS_LOCAL_WRITE | \
			       KRDMA_ACCESS_REMOTE_WRITE | \
			       KRDMA_ACCESS_REMOTE_ATOMIC)

/* Pin in batches, so that a large buffer lets others run */
#define KRDMA_PIN_BATCH 512

/*
 * Charge @npages pinned pages to @user against the caller's
 * RLIMIT_MEMLOCK; CAP_IPC_LOCK passes it (and is then not charged).
 * Return: true when charged, false when not needed, -ENOMEM past the limit.
 */
static int krdma_user_pin_charge(struct user_struct *user,
				 unsigned long npages)
{
	unsigned long limit, cur, next;

	if (capable(CAP_IPC_LOCK))
		return false;
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	cur = atomic_long_read(&user->locked_vm);
	do {
		if (check_add_overflow(cur, npages, &next) || next > limit)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, next));
	return true;
}

static void krdma_user_pin_uncharge(struct user_struct *user,
				    unsigned long npages)
{
	atomic_long_sub(npages, &user->locked_vm);
}

/* Release the pins, then their charge: never one without the other */
static void krdma_buf_unpin(struct krdma_buf *buf)
{
	if (buf->access & KRDMA_ACCESS_WRITABLE)
		unpin_user_pages_dirty_lock(buf->pages, buf->npages, true);
	else
		unpin_user_pages(buf->pages, buf->npages);
	if (buf->charged)
		krdma_user_pin_uncharge(buf->user, buf->npages);
	free_uid(buf->user);
	atomic64_sub(buf->npages, &buf->mm->pinned_vm);
	mmdrop(buf->mm);
}

static void krdma_buf_free_work(struct work_struct *work)
{
	struct krdma_buf *buf = container_of(to_rcu_work(work),
					     struct krdma_buf, free_work);

	krdma_registry_del_buf(buf);
	if (buf->mm)
		krdma_buf_unpin(buf);
	krdma_user_drop(buf->kuser);
	kvfree(buf->pages);
	kfree(buf);
}

static void krdma_buf_release(struct kref *ref)
{
	struct krdma_buf *buf = container_of(ref, struct krdma_buf, ref);

	WARN_ON(!list_empty(&buf->grants));
	/*
	 * A user buffer counts until nothing holds its pages, whatever
	 * became of its handle; given back here, not in the work, so that
	 * a DESTROY that drops the last reference makes room at once
	 */
	if (buf->kuser)
		krdma_user_uncharge(buf->kuser, KRDMA_USER_BUFS);
	/*
	 * The last user may be a completion in softirq context: the pages go
	 * from a work item, after an RCU grace period. siw's ib_dereg_mr()
	 * does not wait for a receive that checked the MR's key before it:
	 * that receive goes on copying into the pages, from the socket's
	 * data_ready callback under a read_lock(), so with preemption off.
	 * The grace period waits for every such section, and so for the
	 * last write of the device into these pages.
	 */
	queue_rcu_work(krdma_wq, &buf->free_work);
}

/**
 * krdma_buf_put - drop a reference to a buffer
 * @buf: the buffer, or NULL
 *
 * Context: any. The pages are released from a work item.
 */
void krdma_buf_put(struct krdma_buf *buf)
{
	if (buf)
		kref_put(&buf->ref, krdma_buf_release);
}

/* @gfp: GFP_KERNEL_ACCOUNT for what userspace asks for */
static struct krdma_buf *krdma_buf_alloc(unsigned long npages, gfp_t gfp)
{
	struct krdma_buf *buf;

	buf = kzalloc(sizeof(*buf), gfp);
	if (!buf)
		return NULL;
	buf->pages = kvmalloc_array(npages, sizeof(*buf->pages),
				    gfp | __GFP_NOWARN);
	if (!buf->pages) {
		kfree(buf);
		return NULL;
	}
	kref_init(&buf->ref);
	mutex_init(&buf->lock);
	INIT_LIST_HEAD(&buf->grants);
	INIT_RCU_WORK(&buf->free_work, krdma_buf_free_work);
	buf->npages = npages;
	return buf;
}

/*
 * List a fully built buffer in the registry, or release it: the last put
 * undoes what registration did (free_work).
 */
static struct krdma_buf *krdma_buf_publish(struct krdma_buf *buf,
					   unsigned long caller,
					   const struct krdma_user *user)
{
	int ret;

	ret = krdma_registry_add_buf(buf, caller, user);
	if (ret) {
		krdma_buf_put(buf);
		return ERR_PTR(ret);
	}
	return buf;
}

/**
 * krdma_buf_reg_user - pin and charge a range of the caller's memory
 * @uaddr: start, any alignment
 * @length: length in bytes, not 0
 * @access: KRDMA_ACCESS_* the buffer will allow
 * @user: the user the buffer is counted against (max_bufs_per_user) until
 *        its last reference goes (its handle's, its grants', its
 *        operations'); its windows count against its limits, and the
 *        buffer holds it
 *
 * Every limit is checked before anything is allocated. The pages must be
 * readable, and writable if @access lets anything write them: PROT_NONE
 * memory, or read-only memory for a writable buffer, is -EFAULT (no
 * FOLL_FORCE). No lock of krdma is held while the pages are faulted in,
 * so memory that never answers (FUSE, userfaultfd) blocks this caller
 * alone, until a fatal signal.
 *
 * Context: process context of the owning process; sleeps.
 * Return: the buffer, or ERR_PTR(): -EINVAL for a zero length or unknown
 * access bit, -EOVERFLOW when the range wraps, -EFAULT when it is not the
 * caller's memory or lacks the access, -EMFILE when @user holds
 * max_bufs_per_user buffers, -ENOMEM when it would pass RLIMIT_MEMLOCK
 * (without CAP_IPC_LOCK) or memory ran out, -EINTR on a fatal signal.
 */
struct krdma_buf *krdma_buf_reg_user(u64 uaddr, u64 length, u32 access,
				     struct krdma_user *user)
{
	unsigned int gup_flags = FOLL_LONGTERM;
	struct mm_struct *mm = current->mm;
	unsigned long npages, pinned = 0, start;
	struct user_struct *owner;
	struct krdma_buf *buf;
	int charged, ret;

	if (!length || access & ~KRDMA_ACCESS_ALL)
		return ERR_PTR(-EINVAL);
	if (uaddr + length < uaddr)
		return ERR_PTR(-EOVERFLOW);
	if (!mm || uaddr + length > TASK_SIZE ||
	    !access_ok(u64_to_user_ptr(uaddr), length))
		return ERR_PTR(-EFAULT);

	start = uaddr & PAGE_MASK;
	npages = krdma_pages_spanned(uaddr, length);
	ret = krdma_user_charge(user, KRDMA_USER_BUFS);
	if (ret)
		return ERR_PTR(ret);
	owner = get_uid(current_user());
	charged = krdma_user_pin_charge(owner, npages);
	if (charged < 0) {
		ret = charged;
		goto err_put_owner;
	}

	buf = krdma_buf_alloc(npages, GFP_KERNEL_ACCOUNT);
	if (!buf) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	buf->first_offset = offset_in_page(uaddr);
	buf->length = length;
	buf->uaddr = uaddr;
	buf->access = access;

	/*
	 * Pin for writing wherever the mapping allows it, even for a buffer
	 * nothing but the process writes: a read-only pin of memory the
	 * process has not written yet would pin the shared zero page (or a
	 * page its next write copies away from), and the device would never
	 * see what the process writes later. Only memory the process cannot
	 * write is pinned read-only, and only for a buffer that nothing may
	 * write through krdma.
	 */
	while (pinned < npages) {
		unsigned long addr = start + pinned * PAGE_SIZE;
		int nr = min_t(unsigned long, npages - pinned, KRDMA_PIN_BATCH);

		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto err_unpin;
		}
		ret = pin_user_pages_fast(addr, nr, gup_flags | FOLL_WRITE,
					  buf->pages + pinned);
		if (ret == -EFAULT && !(access & KRDMA_ACCESS_WRITABLE))
			ret = pin_user_pages_fast(addr, nr, gup_flags,
						  buf->pages + pinned);
		if (ret <= 0) {
			ret = ret ?: -EFAULT;
			goto err_unpin;
		}
		pinned += ret;
		cond_resched();
	}

	/* VmPin of the process, for ps and /proc; the limit is the user's */
	atomic64_add(npages, &mm->pinned_vm);
	mmgrab(mm);
	buf->mm = mm;
	buf->user = owner;
	buf->charged = charged;
	buf->kuser = krdma_user_hold(user);
	return krdma_buf_publish(buf, _RET_IP_, user);

err_unpin:
	unpin_user_pages(buf->pages, pinned);
	kvfree(buf->pages);
	kfree(buf);
err_uncharge:
	if (charged)
		krdma_user_pin_uncharge(owner, npages);
err_put_owner:
	free_uid(owner);
	krdma_user_uncharge(user, KRDMA_USER_BUFS);
	return ERR_PTR(ret);
}

/**
 * krdma_buf_reg_pages - register kernel pages
 * @pages: the pages; they must stay allocated until the buffer is
 *         deregistered and its last operation has completed
 * @npages: number of entries in @pages
 * @offset: offset of the first byte in @pages[0]
 * @length: length in bytes, not 0, within the pages
 * @access: KRDMA_ACCESS_* the buffer will allow
 *
 * No pinning or memlock accounting: kernel memory is not swapped out, and
 * the caller owns it. The page array is copied.
 *
 * Context: process context; sleeps.
 * Return: the buffer, or ERR_PTR(-EINVAL) for a bad range or access bit,
 * or ERR_PTR(-ENOMEM).
 */
struct krdma_buf *krdma_buf_reg_pages(struct page **pages,
				      unsigned int npages, unsigned int offset,
				      size_t length, u32 access)
{
	struct krdma_buf *buf;

	unsigned int i;

	if (!pages || !npages || !length || offset >= PAGE_SIZE ||
	    access & ~KRDMA_ACCESS_ALL ||
	    length > (size_t)npages * PAGE_SIZE - offset)
		return ERR_PTR(-EINVAL);
	for (i = 0; i < npages; i++)
		if (!pages[i])
			return ERR_PTR(-EINVAL);

	buf = krdma_buf_alloc(npages, GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	memcpy(buf->pages, pages, npages * sizeof(*pages));
	buf->first_offset = offset;
	buf->length = length;
	buf->access = access;
	return krdma_buf_publish(buf, _RET_IP_, NULL);
}
EXPORT_SYMBOL_NS_GPL(krdma_buf_reg_pages, KRDMA);

/**
 * krdma_buf_reg_sgt - register the pages of a scatter/gather table
 * @sgt: the table (its CPU side: sg_page(), offset, length); the pages
 *       must stay allocated until the buffer is deregistered and its last
 *       operation has completed
 * @access: KRDMA_ACCESS_* the buffer will allow
 *
 * The entries must make one contiguous range of bytes: every entry but
 * the first starts at offset 0 of its page, and every entry but the last
 * ends at the end of a page.
 *
 * Context: process context; sleeps.
 * Return: the buffer, or ERR_PTR(-EINVAL) for a table that is empty or
 * has holes, or ERR_PTR(-ENOMEM).
 */
struct krdma_buf *krdma_buf_reg_sgt(struct sg_table *sgt, u32 access)
{
	struct scatterlist *sg;
	unsigned long npages = 0;
	struct krdma_buf *buf;
	size_t length = 0;
	unsigned int i, j, k = 0;

	if (!sgt || !sgt->orig_nents || access & ~KRDMA_ACCESS_ALL)
		return ERR_PTR(-EINVAL);
	for_each_sgtable_sg(sgt, sg, i) {
		bool first = i == 0, last = i == sgt->orig_nents - 1;

		if (!sg->length || (!first && sg->offset) ||
		    (!last && !PAGE_ALIGNED(sg->offset + sg->length)))
			return ERR_PTR(-EINVAL);
		npages += krdma_pages_spanned(sg->offset, sg->length);
		length += sg->length;
	}

	buf = krdma_buf_alloc(npages, GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	for_each_sgtable_sg(sgt, sg, i) {
		struct page *page = sg_page(sg) + (sg->offset >> PAGE_SHIFT);
		unsigned long n = krdma_pages_spanned(sg->offset, sg->length);

		for (j = 0; j < n; j++)
			buf->pages[k++] = nth_page(page, j);
	}
	buf->first_offset = offset_in_page(sgt->sgl->offset);
	buf->length = length;
	buf->access = access;
	return krdma_buf_publish(buf, _RET_IP_, NULL);
}
EXPORT_SYMBOL_NS_GPL(krdma_buf_reg_sgt, KRDMA);

/**
 * krdma_buf_reg_kernel - register kernel memory from kmalloc() or vmalloc()
 * @addr: start of the memory, any alignment
 * @length: length in bytes, not 0
 * @access: KRDMA_ACCESS_* the buffer will allow
 *
 * The memory must stay allocated until the buffer is deregistered and its
 * last operation has completed.
 *
 * Context: process context; sleeps.
 * Return: the buffer, or ERR_PTR(): -EINVAL (NULL, zero length, memory
 * that is neither in the linear map nor vmalloc'd), -ENOMEM.
 */
struct krdma_buf *krdma_buf_reg_kernel(void *addr, size_t length, u32 access)
{
	unsigned long start = (unsigned long)addr & PAGE_MASK;
	struct krdma_buf *buf;
	unsigned long i, npages;
	bool vmalloced;

	if (!addr || !length || access & ~KRDMA_ACCESS_ALL ||
	    (unsigned long)addr + length < (unsigned long)addr)
		return ERR_PTR(-EINVAL);
	vmalloced = is_vmalloc_addr(addr);
	if (!vmalloced && (!virt_addr_valid(addr) ||
			   !virt_addr_valid(addr + length - 1)))
		return ERR_PTR(-EINVAL);

	npages = krdma_pages_spanned((unsigned long)addr, length);
	buf = krdma_buf_alloc(npages, GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	for (i = 0; i < npages; i++) {
		void *p = (void *)(start + i * PAGE_SIZE);

		buf->pages[i] = vmalloced ? vmalloc_to_page(p) : virt_to_page(p);
		if (!buf->pages[i]) {
			kvfree(buf->pages);
			kfree(buf);
			return ERR_PTR(-EINVAL);
		}
	}
	buf->first_offset = offset_in_page(addr);
	buf->length = length;
	buf->access = access;
	return krdma_buf_publish(buf, _RET_IP_, NULL);
}
EXPORT_SYMBOL_NS_GPL(krdma_buf_reg_kernel, KRDMA);

/**
 * krdma_buf_dereg - the owner is done with a buffer
 * @buf: the buffer
 *
 * Revokes every grant of the buffer, so that no token works on it any
 * more, and drops the owner's reference. Operations still using the pages
 * keep them pinned until they complete. The pages of a kernel buffer are
 * the caller's again once this returned and its operations completed:
 * the device's last write into them is over (for a buffer a peer may
 * write, an RCU grace period, see krdma_buf_release(); this is what
 * makes the call slow, so that a buffer registered for one operation,
 * with KRDMA_ACCESS_LOCAL_WRITE at most, is cheap to deregister).
 *
 * Context: process context; sleeps (on siw up to 10 s for each grant the
 * peer may READ: see krdma_grant_revoke()).
 */
void krdma_buf_dereg(struct krdma_buf *buf)
{
	struct krdma_window *grant;

	mutex_lock(&buf->lock);
	buf->dead = true;
	while ((grant = list_first_entry_or_null(&buf->grants,
						 struct krdma_window,
						 buf_entry))) {
		/*
		 * Taken off here, under the lock: a local window's reference,
		 * which the list holds, is ours to drop (not the teardown's of
		 * its connection, see krdma_window_unlist())
		 */
		list_del_init(&grant->buf_entry);
		kref_get(&grant->ref);
		mutex_unlock(&buf->lock);
		krdma_grant_revoke(grant);
		if (grant->local)
			krdma_grant_put(grant);
		krdma_grant_put(grant);
		mutex_lock(&buf->lock);
	}
	mutex_unlock(&buf->lock);
	/*
	 * Only a peer's RDMA WRITE or atomic through a window may go on
	 * after the window is gone (siw, see krdma_buf_release()); whatever
	 * else writes the pages (a RECV, a READ's or an atomic's response)
	 * is an operation that holds the buffer until it completed.
	 */
	if (!buf->mm && (buf->access & (KRDMA_ACCESS_REMOTE_WRITE |
					KRDMA_ACCESS_REMOTE_ATOMIC)))
		synchronize_rcu();
	krdma_buf_put(buf);
}
EXPORT_SYMBOL_NS_GPL(krdma_buf_dereg, KRDMA);

/*
 * Fill @sgl with the pages of bytes [@offset, @offset + @length) of @buf,
 * one entry per page, if they are at most @max. Return: the number of
 * entries, 0 when more are needed (use krdma_buf_sgt()), -EINVAL for a
 * range outside the buffer.
 */
int krdma_buf_sg_fill(struct krdma_buf *buf, u64 offset, u64 length,
		      struct scatterlist *sgl, unsigned int max)
{
	u64 first_byte = buf->first_offset + offset;
	unsigned long first = first_byte >> PAGE_SHIFT;
	unsigned int i, n, off = offset_in_page(first_byte);
	u64 left = length;

	if (!length || offset > buf->length || length > buf->length - offset)
		return -EINVAL;
	n = krdma_buf_pages(buf, offset, length);
	if (n > max)
		return 0;

	sg_init_table(sgl, n);
	for (i = 0; i < n; i++) {
		unsigned int len = min_t(u64, left, PAGE_SIZE - off);

		sg_set_page(&sgl[i], buf->pages[first + i], len, off);
		left -= len;
		off = 0;
	}
	return n;
}

/**
 * krdma_buf_sgt - a scatter/gather table for a range of a buffer
 * @buf: the buffer
 * @offset: start of the range in the buffer
 * @length: its length, not 0
 * @max_segment: the device's largest DMA segment
 * @sgt: the table, not DMA-mapped; free with sg_free_table()
 *
 * Context: process context; allocates with GFP_KERNEL, with
 * __GFP_ACCOUNT for a user buffer (one entry per page at worst): charged
 * to the memory cgroup of the caller (a window's, made by its owner's
 * command), or to none from a work item (a transfer's chunk).
 * Return: 0, -EINVAL if the range is not inside the buffer, -ENOMEM.
 */
int krdma_buf_sgt(struct krdma_buf *buf, u64 offset, u64 length,
		  unsigned int max_segment, struct sg_table *sgt)
{
	u64 first_byte = buf->first_offset + offset;

	if (!length || offset > buf->length || length > buf->length - offset)
		return -EINVAL;

	return sg_alloc_table_from_pages_segment(sgt,
						 buf->pages +
						 (first_byte >> PAGE_SHIFT),
						 krdma_buf_pages(buf, offset,
								 length),
						 offset_in_page(first_byte),
						 length, max_segment,
						 buf->mm ? GFP_KERNEL_ACCOUNT :
							   GFP_KERNEL);
}
