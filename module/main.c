// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: an in-kernel RDMA transport. Module init and exit only; see
 * Documentation/design.rst for the objects and their lifetimes.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/module.h>

#include "krdma.h"

struct workqueue_struct *krdma_wq;
struct workqueue_struct *krdma_push_wq;

static int __init krdma_mod_init(void)
{
	int ret;

	krdma_stats_init();

	/*
	 * A block device may write back through krdma (samples/krdma_blk):
	 * the work that posts its deferred operations and tears down its
	 * connections must make progress under memory pressure.
	 */
	krdma_wq = alloc_workqueue("krdma", WQ_MEM_RECLAIM, 0);
	if (!krdma_wq) {
		ret = -ENOMEM;
		goto err_stats_uninit;
	}

	/*
	 * Posting that a kernel caller hands off (krdma_post_list() on a
	 * device that does its send work in the poster's context): unbound,
	 * so that the work may run on another CPU than the caller's, and
	 * high priority, as the caller's own post would have run.
	 */
	krdma_push_wq = alloc_workqueue("krdma_push",
					WQ_UNBOUND | WQ_HIGHPRI | WQ_MEM_RECLAIM,
					0);
	if (!krdma_push_wq) {
		ret = -ENOMEM;
		goto err_destroy_wq;
	}

	ret = krdma_device_init();
	if (ret)
		goto err_destroy_push_wq;

	ret = krdma_chardev_init();
	if (ret)
		goto err_device_uninit;

	pr_info("krdma " KRDMA_VERSION_STR " loaded\n");
	return 0;

err_device_uninit:
	krdma_device_uninit();
err_destroy_push_wq:
	destroy_workqueue(krdma_push_wq);
err_destroy_wq:
	destroy_workqueue(krdma_wq);
err_stats_uninit:
	krdma_stats_uninit();
	return ret;
}

static void __exit krdma_mod_exit(void)
{
	krdma_chardev_uninit();
	krdma_device_uninit();
	/* Removals kicked connecting callers: their kicks hold connections */
	krdma_conn_kicks_wait();
	/* A push_work may drop a connection's last reference, and buffers' */
	destroy_workqueue(krdma_push_wq);
	/*
	 * The buffers' free_work waits for a grace period before it is
	 * queued: let every one be queued, then flush them. The registry is
	 * empty after it.
	 */
	rcu_barrier();
	destroy_workqueue(krdma_wq);
	krdma_stats_uninit();
}

module_init(krdma_mod_init);
module_exit(krdma_mod_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("krdma: in-kernel RDMA transport");
MODULE_AUTHOR("The krdma authors");
MODULE_VERSION(KRDMA_VERSION_STR);
