// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_blk: a block device whose blocks are in another host's memory
 * (krdma_blk_server), moved by RDMA through krdma's kernel API. This
 * file has the module's parameter, init and exit; dev.c the devices and
 * their connections, io.c the requests, sysfs.c /sys/kernel/krdma_blk.
 * See Documentation/blockdev.rst.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/workqueue.h>

#include "krdma_blk.h"

MODULE_IMPORT_NS(KRDMA);

static unsigned int io_timeout_s = 30;

static int kbd_set_io_timeout(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 10, &v);
	if (ret)
		return ret;
	if (!v || v > KBD_MAX_IO_TIMEOUT_S)
		return -EINVAL;
	WRITE_ONCE(io_timeout_s, v);
	return 0;
}

static const struct kernel_param_ops kbd_io_timeout_ops = {
	.set = kbd_set_io_timeout,
	.get = param_get_uint,
};

module_param_cb(io_timeout_s, &kbd_io_timeout_ops, &io_timeout_s, 0644);
__MODULE_PARM_TYPE(io_timeout_s, "uint");
MODULE_PARM_DESC(io_timeout_s,
		 "Seconds before a request times out and its connection is disconnected, 1..3600 (default 30; for devices attached later)");

/* Completions: the I/O path, so it must make progress under memory pressure */
struct workqueue_struct *kbd_wq;

unsigned int kbd_io_timeout_s(void)
{
	return READ_ONCE(io_timeout_s);
}

static int __init kbd_init(void)
{
	int ret;

	kbd_wq = alloc_workqueue("krdma_blk", WQ_MEM_RECLAIM | WQ_HIGHPRI, 0);
	if (!kbd_wq)
		return -ENOMEM;
	ret = kbd_sysfs_init();
	if (ret)
		goto err_destroy_wq;
	return 0;

err_destroy_wq:
	destroy_workqueue(kbd_wq);
	return ret;
}

static void __exit kbd_exit(void)
{
	/* No attach or detach runs once the files are gone */
	kbd_sysfs_uninit();
	kbd_dev_detach_all();
	destroy_workqueue(kbd_wq);
}

module_init(kbd_init);
module_exit(kbd_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("krdma_blk: a block device in a remote host's memory, over RDMA");
