// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: the /dev/krdma character device and its ioctl dispatch.
 *
 * Every command's struct starts with its size; the dispatcher reads it with
 * copy_struct_from_user() so that the ABI can grow by appending fields, and
 * the handlers see a whole, kernel-sized struct. See the errno contract in
 * uapi/linux/krdma.h.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/nsproxy.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <net/net_namespace.h>
#include <linux/krdma.h>

#include "krdma.h"
#include "ufile.h"

/**
 * krdma_ucmd_respond - copy the command's struct back to the caller
 * @ucmd: the call
 * @size: the kernel's size of the struct
 *
 * Writes as much as the caller has room for and sets the size field to
 * that.
 *
 * Return: 0, or -EFAULT when the caller's struct cannot be written.
 */
int krdma_ucmd_respond(struct krdma_ucmd *ucmd, size_t size)
{
	u32 len = min_t(size_t, ucmd->user_size, size);

	*(u32 *)ucmd->cmd = len;
	if (copy_to_user(ucmd->ubuffer, ucmd->cmd, len))
		return -EFAULT;
	return 0;
}

static int krdma_cmd_query_module(struct krdma_ucmd *ucmd)
{
	struct krdma_query_module *cmd = ucmd->cmd;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;

	cmd->abi_version = KRDMA_ABI_VERSION;
	cmd->version = KRDMA_VERSION_CODE(KRDMA_MAJOR, KRDMA_MINOR,
					  KRDMA_PATCH);
	cmd->features = KRDMA_FEATURE_DEV_QUERY | KRDMA_FEATURE_CONN |
			KRDMA_FEATURE_KRDMA_PEER | KRDMA_FEATURE_UNSIGNALED |
			KRDMA_FEATURE_RING | KRDMA_FEATURE_EARLY_RECVS |
			KRDMA_FEATURE_LISTEN_QUERY;
	cmd->num_devices = krdma_device_count(ucmd->kfile->net);
	return krdma_ucmd_respond(ucmd, sizeof(*cmd));
}

static int krdma_cmd_dev_list(struct krdma_ucmd *ucmd)
{
	struct krdma_dev_list *cmd = ucmd->cmd;
	u32 __user *uindexes = u64_to_user_ptr(cmd->dev_indexes);
	struct krdma_device *kdev;
	unsigned long index = 0;
	u32 count = 0;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;

	/*
	 * No device reference is held across user memory, which may fault
	 * for ever (FUSE, userfaultfd): the device's removal waits for the
	 * last one
	 */
	while ((kdev = krdma_device_get_next(&index, ucmd->kfile->net))) {
		u32 dev_index = kdev->index;

		krdma_device_put(kdev);
		if (count < cmd->num_devices &&
		    put_user(dev_index, &uindexes[count]))
			return -EFAULT;
		count++;
		index++;
	}

	cmd->num_devices = count;
	return krdma_ucmd_respond(ucmd, sizeof(*cmd));
}

static int krdma_cmd_dev_query(struct krdma_ucmd *ucmd)
{
	struct krdma_dev_query *cmd = ucmd->cmd;
	struct krdma_device *kdev;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;

	kdev = krdma_device_get(cmd->dev_index, ucmd->kfile->net);
	if (!kdev)
		return -ENODEV;

	memset_after(cmd, 0, dev_index);
	krdma_device_fill_query(kdev, cmd);
	krdma_device_put(kdev);
	return krdma_ucmd_respond(ucmd, sizeof(*cmd));
}

static int krdma_cmd_port_query(struct krdma_ucmd *ucmd)
{
	struct krdma_port_query *cmd = ucmd->cmd;
	struct krdma_gid_entry __user *ugids = u64_to_user_ptr(cmd->gids);
	struct krdma_gid_entry *entries = NULL, entry;
	u32 capacity = cmd->num_gids;
	u64 gids = cmd->gids;
	struct krdma_device *kdev;
	u32 i, n, count = 0;
	int ret;

	if (cmd->flags || cmd->__reserved)
		return -EINVAL;

	kdev = krdma_device_get(cmd->dev_index, ucmd->kfile->net);
	if (!kdev)
		return -ENODEV;

	memset_after(cmd, 0, port_num);
	ret = krdma_device_fill_port(kdev, cmd->port_num, ucmd->kfile->net, cmd);
	if (ret)
		goto out_put_device;

	/*
	 * The entries are gathered first and copied out once the device is
	 * put: its removal waits for the last reference, and user memory may
	 * fault for ever (FUSE, userfaultfd)
	 */
	n = min(capacity, cmd->gid_tbl_len);
	if (n) {
		entries = kvcalloc(n, sizeof(*entries), GFP_KERNEL_ACCOUNT);
		if (!entries) {
			ret = -ENOMEM;
			goto out_put_device;
		}
	}
	for (i = 0; i < cmd->gid_tbl_len; i++) {
		if (krdma_device_read_gid(kdev, cmd->port_num, i,
					  ucmd->kfile->net,
					  count < n ? &entries[count] : &entry))
			continue;
		count++;
	}
	krdma_device_put(kdev);

	if (copy_to_user(ugids, entries, min(count, n) * sizeof(*entries))) {
		ret = -EFAULT;
		goto out_free_entries;
	}
	cmd->num_gids = count;
	cmd->gids = gids;
	ret = krdma_ucmd_respond(ucmd, sizeof(*cmd));
out_free_entries:
	kvfree(entries);
	return ret;

out_put_device:
	krdma_device_put(kdev);
	return ret;
}

/* Large enough for the struct of every command */
union krdma_ucmd_buffer {
	struct krdma_query_module query_module;
	struct krdma_dev_list dev_list;
	struct krdma_dev_query dev_query;
	struct krdma_port_query port_query;
	struct krdma_destroy destroy;
	struct krdma_listen listen;
	struct krdma_accept accept;
	struct krdma_connect connect;
	struct krdma_disconnect disconnect;
	struct krdma_conn_query conn_query;
	struct krdma_buf_reg buf_reg;
	struct krdma_grant grant;
	struct krdma_submit submit;
	struct krdma_poll poll;
	struct krdma_ring_setup ring_setup;
	struct krdma_listen_query listen_query;
};

/**
 * struct krdma_ioctl_op - one entry of the dispatch table
 * @size: size of the command's struct as this kernel knows it
 * @min_size: size of the oldest layout of the struct (offsetofend of its
 *            last field then); anything shorter is -EINVAL
 * @ioctl_num: the full ioctl number
 * @execute: the handler
 */
struct krdma_ioctl_op {
	unsigned int size;
	unsigned int min_size;
	unsigned int ioctl_num;
	int (*execute)(struct krdma_ucmd *ucmd);
};

#define KRDMA_IOCTL_OP(_ioctl, _fn, _struct, _last)                           \
	{                                                                     \
		.size = sizeof(_struct) +                                     \
			BUILD_BUG_ON_ZERO(sizeof(union krdma_ucmd_buffer) <   \
					  sizeof(_struct)),                   \
		.min_size = offsetofend(_struct, _last),                      \
		.ioctl_num = _ioctl,                                          \
		.execute = _fn,                                               \
	}

static const struct krdma_ioctl_op krdma_ioctl_ops[] = {
	KRDMA_IOCTL_OP(KRDMA_IOC_QUERY_MODULE, krdma_cmd_query_module,
		       struct krdma_query_module, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_DEV_LIST, krdma_cmd_dev_list,
		       struct krdma_dev_list, dev_indexes),
	KRDMA_IOCTL_OP(KRDMA_IOC_DEV_QUERY, krdma_cmd_dev_query,
		       struct krdma_dev_query, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_PORT_QUERY, krdma_cmd_port_query,
		       struct krdma_port_query, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_DESTROY, krdma_cmd_destroy,
		       struct krdma_destroy, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_LISTEN, krdma_cmd_listen,
		       struct krdma_listen, rq_depth),
	KRDMA_IOCTL_OP(KRDMA_IOC_ACCEPT, krdma_cmd_accept,
		       struct krdma_accept, recv_count),
	KRDMA_IOCTL_OP(KRDMA_IOC_CONNECT, krdma_cmd_connect,
		       struct krdma_connect, handle),
	KRDMA_IOCTL_OP(KRDMA_IOC_DISCONNECT, krdma_cmd_disconnect,
		       struct krdma_disconnect, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_CONN_QUERY, krdma_cmd_conn_query,
		       struct krdma_conn_query, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_BUF_REG, krdma_cmd_buf_reg,
		       struct krdma_buf_reg, handle),
	KRDMA_IOCTL_OP(KRDMA_IOC_GRANT, krdma_cmd_grant,
		       struct krdma_grant, token),
	KRDMA_IOCTL_OP(KRDMA_IOC_SUBMIT, krdma_cmd_submit,
		       struct krdma_submit, ops),
	KRDMA_IOCTL_OP(KRDMA_IOC_POLL, krdma_cmd_poll,
		       struct krdma_poll, __reserved),
	KRDMA_IOCTL_OP(KRDMA_IOC_RING_SETUP, krdma_cmd_ring_setup,
		       struct krdma_ring_setup, mmap_size),
	KRDMA_IOCTL_OP(KRDMA_IOC_LISTEN_QUERY, krdma_cmd_listen_query,
		       struct krdma_listen_query, __reserved),
};

static long krdma_fops_ioctl(struct file *filp, unsigned int cmd,
			     unsigned long arg)
{
	const struct krdma_ioctl_op *op;
	union krdma_ucmd_buffer buf;
	struct krdma_ucmd ucmd = {
		.kfile = filp->private_data,
		.ubuffer = (void __user *)arg,
		.cmd = &buf,
	};
	int ret;

	for (op = krdma_ioctl_ops; op < krdma_ioctl_ops + ARRAY_SIZE(krdma_ioctl_ops); op++)
		if (op->ioctl_num == cmd)
			break;
	if (op == krdma_ioctl_ops + ARRAY_SIZE(krdma_ioctl_ops))
		return -ENOTTY;

	ret = get_user(ucmd.user_size, (u32 __user *)ucmd.ubuffer);
	if (ret)
		return ret;
	if (ucmd.user_size < op->min_size)
		return -EINVAL;
	/* As clone3() and openat2(): no struct grows past a page */
	if (ucmd.user_size > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(ucmd.cmd, op->size, ucmd.ubuffer,
				    ucmd.user_size);
	if (ret)
		return ret;

	return op->execute(&ucmd);
}

static int krdma_fops_open(struct inode *inode, struct file *filp)
{
	struct krdma_file *kfile;
	int ret;

	kfile = kzalloc(sizeof(*kfile), GFP_KERNEL);
	if (!kfile)
		return -ENOMEM;

	ret = krdma_ufile_init(kfile);
	if (ret)
		goto err_free_kfile;
	kfile->user = krdma_user_get(filp->f_cred->euid);
	if (!kfile->user) {
		ret = -ENOMEM;
		goto err_ufile_uninit;
	}
	kfile->net = get_net(current->nsproxy->net_ns);
	filp->private_data = kfile;
	return 0;

err_ufile_uninit:
	krdma_ufile_uninit(kfile);
err_free_kfile:
	kfree(kfile);
	return ret;
}

static int krdma_fops_release(struct inode *inode, struct file *filp)
{
	struct krdma_file *kfile = filp->private_data;

	krdma_ufile_uninit(kfile);
	krdma_user_put(kfile->user);
	put_net(kfile->net);
	kfree(kfile);
	return 0;
}

static __poll_t krdma_fops_poll(struct file *filp, poll_table *wait)
{
	struct krdma_file *kfile = filp->private_data;

	poll_wait(filp, &kfile->ucq.wait, wait);
	/*
	 * The queue is read after this file is on the wait queue: pairs with
	 * wq_has_sleeper() of the producer (poll_wait() has this barrier
	 * only since 6.14 and its backports)
	 */
	smp_mb();
	return krdma_ufile_poll_mask(kfile);
}

static int krdma_fops_mmap(struct file *filp, struct vm_area_struct *vma)
{
	return krdma_ufile_mmap(filp->private_data, vma);
}

static const struct file_operations krdma_fops = {
	.owner = THIS_MODULE,
	.open = krdma_fops_open,
	.release = krdma_fops_release,
	.poll = krdma_fops_poll,
	.mmap = krdma_fops_mmap,
	.unlocked_ioctl = krdma_fops_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice krdma_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "krdma",
	.fops = &krdma_fops,
	.mode = 0600,
};

int krdma_chardev_init(void)
{
	return misc_register(&krdma_miscdev);
}

void krdma_chardev_uninit(void)
{
	misc_deregister(&krdma_miscdev);
}
