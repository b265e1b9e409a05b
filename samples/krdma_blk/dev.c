// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_blk: devices. Attach connects one krdma connection per hardware
 * queue, takes the server's hello on each and creates the gendisk;
 * detach removes the gendisk (which drains every request), then closes
 * the connections. A connection that fails makes the device "failed":
 * every connection is disconnected, so that everything in flight ends at
 * once with an error, and every new request fails.
 *
 * Locks: kbd_devices_lock (a mutex) protects the list of attached
 * devices, and is never held across a krdma call. dev->lock (a spinlock)
 * orders the failure of a device against its teardown: fail_work
 * disconnects connections, which must not run while they are closed.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/completion.h>
#include <linux/idr.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/wait_bit.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>

#include "krdma_blk.h"
#include "krdma_blk_compat.h"

#define KBD_CONNECT_TIMEOUT	(15 * HZ)
#define KBD_HELLO_TIMEOUT	(10 * HZ)
/* Room for the hello: a longer one is refused as such, not as a RECV error */
#define KBD_HELLO_ROOM		256

static DEFINE_MUTEX(kbd_devices_lock);	/* protects kbd_devices */
static LIST_HEAD(kbd_devices);
static DEFINE_IDA(kbd_ida);

/*
 * Hello RECVs posted and not completed. One whose krdma_connect() failed
 * completes in krdma's time (krdma_conn_params.prepare): module exit
 * waits for them, as their done callback is this module's code.
 */
static atomic_t kbd_hellos_posted = ATOMIC_INIT(0);

/**
 * struct kbd_hello - the RECV for the server's hello
 * @ref: the queue's reference, and its RECV's while it is posted: the
 *       memory goes when both are dropped, as a connect that failed may
 *       complete the RECV after it returned
 * @done: the RECV completed
 * @status: its status
 * @byte_len: bytes received
 * @msg: the message (kmalloc'd, KBD_HELLO_ROOM bytes: DMA-safe)
 * @buf: @msg, registered; the queue deregisters it
 * @recv: the RECV
 */
struct kbd_hello {
	refcount_t ref;
	struct completion done;
	u32 status;
	u32 byte_len;
	struct krdma_blk_hello *msg;
	struct krdma_buf *buf;
	struct krdma_req *recv;
};

static const struct block_device_operations kbd_fops = {
	.owner = THIS_MODULE,
};

static void kbd_hello_free(struct kbd_hello *h)
{
	kfree(h->recv);
	kfree(h->msg);
	kfree(h);
}

/* Any context: the RECV's done callback drops its reference here */
static void kbd_hello_put(struct kbd_hello *h)
{
	if (refcount_dec_and_test(&h->ref))
		kbd_hello_free(h);
}

static struct kbd_hello *kbd_hello_alloc(void)
{
	struct kbd_hello *h;

	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h)
		return NULL;
	refcount_set(&h->ref, 1);
	init_completion(&h->done);
	h->msg = kzalloc(KBD_HELLO_ROOM, GFP_KERNEL);
	h->recv = krdma_req_alloc(1, GFP_KERNEL);
	if (!h->msg || !h->recv)
		goto err_free;
	h->buf = krdma_buf_reg_kernel(h->msg, KBD_HELLO_ROOM,
				      KRDMA_ACCESS_LOCAL_WRITE);
	if (IS_ERR(h->buf))
		goto err_free;
	return h;

err_free:
	kbd_hello_free(h);
	return NULL;
}

/* The queue is done with it; a RECV still posted keeps the memory */
static void kbd_hello_release(struct kbd_hello *h)
{
	krdma_buf_dereg(h->buf);
	kbd_hello_put(h);
}

static void kbd_hellos_posted_dec(void)
{
	if (atomic_dec_and_test(&kbd_hellos_posted))
		wake_up_var(&kbd_hellos_posted);
}

static void kbd_hello_done(struct krdma_req *req, const struct krdma_wc *wc)
{
	struct kbd_hello *h = req->context;

	h->status = wc->status;
	h->byte_len = wc->byte_len;
	complete(&h->done);
	kbd_hello_put(h);
	kbd_hellos_posted_dec();
}

/*
 * krdma_conn_params.prepare: the queue pair exists, the connection is not
 * up yet. Post the RECV for the hello now, or the server's SEND could
 * arrive first (on iWARP, that ends the connection).
 */
static int kbd_conn_prepare(struct krdma_conn *conn, void *context)
{
	struct kbd_queue *q = context;
	struct kbd_hello *h = q->hello;
	struct krdma_req *r = h->recv;
	int ret;

	r->opcode = KRDMA_OP_RECV;
	r->flags = 0;
	r->num_sge = 1;
	r->sge[0].buf = h->buf;
	r->sge[0].offset = 0;
	r->sge[0].length = KBD_HELLO_ROOM;
	r->done = kbd_hello_done;
	r->context = h;
	refcount_inc(&h->ref);
	atomic_inc(&kbd_hellos_posted);
	ret = krdma_post(conn, r);
	if (ret) {
		kbd_hellos_posted_dec();
		kbd_hello_put(h);	/* the queue's reference remains */
	}
	return ret;
}

/* A connection failed after it was up: the device fails with it */
static void kbd_conn_event(struct krdma_conn *conn, int error, void *context)
{
	struct kbd_queue *q = context;

	pr_err("%s%u: queue %u: the connection to %pISpc failed: %d\n",
	       KBD_DISK_NAME, q->dev->index, q->qid, &q->dev->addr, error);
	kbd_dev_fail(q->dev);
}

/* Wait for the hello and check it: its size and the token */
static int kbd_hello_wait(struct kbd_queue *q, u64 *size,
			  struct krdma_token *tok)
{
	struct kbd_dev *dev = q->dev;
	struct kbd_hello *h = q->hello;
	const struct krdma_blk_hello *msg = h->msg;
	u32 want = KRDMA_ACCESS_REMOTE_READ | KRDMA_ACCESS_REMOTE_WRITE;
	u64 end;
	long left;

	left = wait_for_completion_killable_timeout(&h->done,
						    KBD_HELLO_TIMEOUT);
	if (left < 0)
		return -EINTR;
	if (!left) {
		pr_err("%pISpc: no hello from the server within %u s\n",
		       &dev->addr, jiffies_to_msecs(KBD_HELLO_TIMEOUT) / 1000);
		return -ETIMEDOUT;
	}
	if (h->status != IB_WC_SUCCESS) {
		pr_err("%pISpc: the connection failed before the hello (status %u)\n",
		       &dev->addr, h->status);
		return -ECONNRESET;
	}
	if (h->byte_len < sizeof(*msg) ||
	    le32_to_cpu(msg->magic) != KRDMA_BLK_MAGIC ||
	    le32_to_cpu(msg->version) != KRDMA_BLK_VERSION) {
		pr_err("%pISpc: not a krdma_blk version %u hello (%u bytes, magic 0x%x, version %u)\n",
		       &dev->addr, KRDMA_BLK_VERSION, h->byte_len,
		       le32_to_cpu(msg->magic), le32_to_cpu(msg->version));
		return -EPROTO;
	}
	krdma_blk_hello_unpack(msg, size, tok);
	if (!*size || !IS_ALIGNED(*size, KRDMA_BLK_BLOCK_SIZE) ||
	    tok->length < *size || check_add_overflow(tok->addr, *size, &end) ||
	    (tok->access & want) != want) {
		pr_err("%pISpc: bad hello: size %llu, window of %llu bytes at 0x%llx, access 0x%x\n",
		       &dev->addr, *size, tok->length, tok->addr, tok->access);
		return -EPROTO;
	}
	return 0;
}

/*
 * Connect queue @q, take the hello, and prepare what its requests need.
 * The connection is published in @q->conn (for fail_work) only once the
 * queue is open: until then only this function uses it.
 */
static int kbd_queue_connect(struct kbd_dev *dev, struct kbd_queue *q)
{
	struct krdma_conn_params params = {
		/* A WRITE and its READ per request, each maybe with a REG_MR */
		.sq_depth = 4 * dev->depth,
		.rq_depth = 1,
		.flags = KRDMA_CONN_KRDMA_PEER,
		.event = kbd_conn_event,
		.prepare = kbd_conn_prepare,
		.context = q,
	};
	struct krdma_conn_info info;
	struct krdma_conn *conn;
	struct krdma_token tok;
	u64 size;
	int ret;

	q->hello = kbd_hello_alloc();
	if (!q->hello)
		return -ENOMEM;
	conn = krdma_connect(&init_net, (struct sockaddr *)&dev->addr, NULL,
			     KBD_CONNECT_TIMEOUT, &params);
	if (IS_ERR(conn)) {
		ret = PTR_ERR(conn);
		pr_err("%pISpc: connect failed: %d\n", &dev->addr, ret);
		goto err_release_hello;
	}
	ret = kbd_hello_wait(q, &size, &tok);
	if (ret)
		goto err_close_conn;

	if (q->qid && size != dev->size) {
		pr_err("%pISpc: the server's size changed: %llu bytes, then %llu\n",
		       &dev->addr, dev->size, size);
		ret = -EPROTO;
		goto err_close_conn;
	}
	dev->size = size;
	krdma_conn_info(conn, &info);
	if (!info.initiator_depth) {
		pr_err("%pISpc: the connection allows no RDMA READ\n",
		       &dev->addr);
		ret = -EOPNOTSUPP;
		goto err_close_conn;
	}
	/*
	 * On InfiniBand and RoCE a WRITE completes with the responder's ACK,
	 * which comes once the responder executed it: the data is in the
	 * server's memory, and any later READ (on any connection, through
	 * the same adapter) sees it. On iWARP the completion says only that
	 * TCP has the data: a READ behind it proves the placement.
	 */
	q->fence_writes = info.transport != KRDMA_TRANSPORT_IB &&
			  info.transport != KRDMA_TRANSPORT_ROCE;
	q->remote_base = tok.addr;
	q->rkey = tok.rkey;
	if (tok.seg_shift) {
		q->rkeys = krdma_rkeys_get(conn, &tok);
		if (IS_ERR(q->rkeys)) {
			ret = PTR_ERR(q->rkeys);
			pr_err("%pISpc: cannot read the server's key table: %d\n",
			       &dev->addr, ret);
			q->rkeys = NULL;
			goto err_close_conn;
		}
	}

	q->fence = krdma_req_alloc(1, GFP_KERNEL);
	if (!q->fence) {
		ret = -ENOMEM;
		goto err_put_rkeys;
	}
	q->scratch = kzalloc(sizeof(*q->scratch), GFP_KERNEL);
	if (!q->scratch) {
		ret = -ENOMEM;
		goto err_free_fence;
	}
	q->scratch_buf = krdma_buf_reg_kernel(q->scratch, sizeof(*q->scratch),
					      KRDMA_ACCESS_LOCAL_WRITE);
	if (IS_ERR(q->scratch_buf)) {
		ret = PTR_ERR(q->scratch_buf);
		goto err_free_scratch;
	}
	kbd_hello_release(q->hello);
	q->hello = NULL;
	WRITE_ONCE(q->conn, conn);
	return 0;

err_free_scratch:
	kfree(q->scratch);
	q->scratch = NULL;
err_free_fence:
	kfree(q->fence);
	q->fence = NULL;
err_put_rkeys:
	if (q->rkeys)
		krdma_rkeys_put(q->rkeys);
	q->rkeys = NULL;
err_close_conn:
	/* Flushes the hello's RECV if it is still posted; waits for the event */
	krdma_conn_close(conn);
err_release_hello:
	kbd_hello_release(q->hello);
	q->hello = NULL;
	return ret;
}

/*
 * The server SENDs its hello the moment it accepted. On siw that SEND can
 * reach us right behind the MPA reply, before siw here has read the
 * reply, and siw then fails the connect ("peer sent extra data";
 * protocol.rst, "Ordering rules"), or the connection right after it: a
 * queue whose connection was reset before its hello is connected again,
 * a few times.
 */
#define KBD_CONNECT_TRIES	3

static int kbd_queue_open(struct kbd_dev *dev, struct kbd_queue *q)
{
	int i, ret;

	for (i = 0; i < KBD_CONNECT_TRIES; i++) {
		ret = kbd_queue_connect(dev, q);
		if (ret != -ECONNRESET)
			break;
		pr_info("%pISpc: connection reset before the hello, try %d of %d\n",
			&dev->addr, i + 1, KBD_CONNECT_TRIES);
	}
	return ret;
}

/* Undoes kbd_queue_open(); nothing is in flight on the queue any more */
static void kbd_queue_close(struct kbd_queue *q)
{
	/* Every done callback has returned when it returns */
	krdma_conn_close(q->conn);
	q->conn = NULL;
	flush_work(&q->done_work);
	krdma_buf_dereg(q->scratch_buf);
	kfree(q->scratch);
	/* The last fence completed with the connection's close */
	kfree(q->fence);
	if (q->rkeys)
		krdma_rkeys_put(q->rkeys);
}

static void kbd_dev_fail_work(struct work_struct *work)
{
	struct kbd_dev *dev = container_of(work, struct kbd_dev, fail_work);
	struct krdma_conn *conn;
	unsigned int i;

	for (i = 0; i < dev->nr_queues; i++) {
		conn = READ_ONCE(dev->queues[i].conn);
		if (conn)
			krdma_disconnect(conn);
	}
}

/**
 * kbd_dev_fail - a connection of @dev failed or timed out
 * @dev: the device
 *
 * From now on every new request fails at once; every connection is
 * disconnected, so that what is in flight completes with an error now.
 * There is no reconnect: the device stays failed until it is detached.
 *
 * Context: process.
 */
void kbd_dev_fail(struct kbd_dev *dev)
{
	if (test_and_set_bit(KBD_DEV_FAILED, &dev->flags))
		return;
	pr_err("%s%u: failed: every request fails from now on; detach it\n",
	       KBD_DISK_NAME, dev->index);
	spin_lock(&dev->lock);
	if (!dev->closing)
		queue_work(kbd_wq, &dev->fail_work);
	spin_unlock(&dev->lock);
}

/* The connections are about to be closed: fail_work must be over */
static void kbd_dev_stop_failing(struct kbd_dev *dev)
{
	spin_lock(&dev->lock);
	dev->closing = true;
	spin_unlock(&dev->lock);
	cancel_work_sync(&dev->fail_work);
}

static int kbd_dev_add_disk(struct kbd_dev *dev)
{
	struct blk_mq_tag_set *set = &dev->tag_set;
	struct queue_limits lim = {
		.logical_block_size = KRDMA_BLK_BLOCK_SIZE,
		.physical_block_size = KRDMA_BLK_BLOCK_SIZE,
		.max_hw_sectors = KBD_MAX_IO_BYTES >> SECTOR_SHIFT,
		.max_segments = KBD_MAX_SEGMENTS,
		/* One run of bytes without holes, as krdma_buf_reg_sgt() wants */
		.virt_boundary_mask = PAGE_SIZE - 1,
	};
	struct gendisk *disk;
	int ret;

	set->ops = &kbd_mq_ops;
	set->nr_hw_queues = dev->nr_queues;
	set->queue_depth = dev->depth;
	set->numa_node = NUMA_NO_NODE;
	set->cmd_size = sizeof(struct kbd_cmd);
	/* queue_rq sleeps: krdma_buf_reg_sgt() and krdma_post() may */
	set->flags = BLK_MQ_F_SHOULD_MERGE | BLK_MQ_F_BLOCKING;
	set->timeout = kbd_io_timeout_s() * HZ;
	set->driver_data = dev;
	ret = blk_mq_alloc_tag_set(set);
	if (ret)
		return ret;

	disk = kbd_compat_alloc_disk(set, &lim, dev);
	if (IS_ERR(disk)) {
		ret = PTR_ERR(disk);
		goto err_free_tag_set;
	}
	disk->fops = &kbd_fops;
	disk->private_data = dev;
	snprintf(disk->disk_name, DISK_NAME_LEN, KBD_DISK_NAME "%u",
		 dev->index);
	set_capacity(disk, dev->size >> SECTOR_SHIFT);
	dev->disk = disk;
	ret = add_disk(disk);
	if (ret)
		goto err_put_disk;
	return 0;

err_put_disk:
	put_disk(disk);
	dev->disk = NULL;
err_free_tag_set:
	blk_mq_free_tag_set(set);
	return ret;
}

/*
 * Undoes kbd_dev_add_disk(). del_gendisk() writes back what is dirty,
 * then waits until every request has ended (a request of a failed or
 * timed-out connection ends with an error), and leaves the queue frozen:
 * nothing reaches queue_rq or the timeout handler after it.
 */
static void kbd_dev_remove_disk(struct kbd_dev *dev)
{
	del_gendisk(dev->disk);
	put_disk(dev->disk);
	dev->disk = NULL;
	blk_mq_free_tag_set(&dev->tag_set);
}

static void kbd_dev_close_queues(struct kbd_dev *dev, unsigned int n)
{
	kbd_dev_stop_failing(dev);
	while (n--)
		kbd_queue_close(&dev->queues[n]);
}

/**
 * kbd_dev_attach - attach the server at @args->addr as a new device
 * @args: the server, the number of queues and their depth
 *
 * Context: process (a sysfs write); sleeps, for at most about
 * (KBD_CONNECT_TIMEOUT + KBD_HELLO_TIMEOUT) per queue; a fatal signal
 * ends it.
 * Return: 0, or a negative errno: what krdma_connect() returned,
 * -EPROTO (a bad hello), -ETIMEDOUT (no hello), -ENOSPC (no free device
 * number), -ENOMEM, -ECONNRESET (a connection failed meanwhile).
 */
int kbd_dev_attach(const struct kbd_attach_args *args)
{
	struct kbd_dev *dev;
	unsigned int i;
	int ret;

	dev = kzalloc(struct_size(dev, queues, args->queues), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	dev->addr = args->addr;
	dev->nr_queues = args->queues;
	dev->depth = args->depth;
	spin_lock_init(&dev->lock);
	INIT_WORK(&dev->fail_work, kbd_dev_fail_work);
	for (i = 0; i < dev->nr_queues; i++) {
		dev->queues[i].dev = dev;
		dev->queues[i].qid = i;
		init_llist_head(&dev->queues[i].done_list);
		spin_lock_init(&dev->queues[i].fence_lock);
		INIT_LIST_HEAD(&dev->queues[i].fence_waiters);
		INIT_WORK(&dev->queues[i].done_work, kbd_queue_done_work);
	}
	ret = ida_alloc_max(&kbd_ida, KBD_MAX_DEVICES - 1, GFP_KERNEL);
	if (ret < 0) {
		pr_err("attach: no free device number (at most %u devices)\n",
		       KBD_MAX_DEVICES);
		goto err_free_dev;
	}
	dev->index = ret;

	for (i = 0; i < dev->nr_queues; i++) {
		ret = kbd_queue_open(dev, &dev->queues[i]);
		if (ret)
			goto err_close_queues;
	}
	if (test_bit(KBD_DEV_FAILED, &dev->flags)) {
		ret = -ECONNRESET;
		goto err_close_queues;
	}
	ret = kbd_dev_add_disk(dev);
	if (ret)
		goto err_close_queues;

	mutex_lock(&kbd_devices_lock);
	list_add_tail(&dev->entry, &kbd_devices);
	mutex_unlock(&kbd_devices_lock);
	pr_info("%s: %pISpc, %llu bytes, %u queues of depth %u\n",
		dev->disk->disk_name, &dev->addr, dev->size, dev->nr_queues,
		dev->depth);
	return 0;

err_close_queues:
	kbd_dev_close_queues(dev, i);
	ida_free(&kbd_ida, dev->index);
err_free_dev:
	kfree(dev);
	return ret;
}

/* Undoes kbd_dev_attach(): the device is off the list */
static void kbd_dev_destroy(struct kbd_dev *dev)
{
	pr_info("%s%u: detaching\n", KBD_DISK_NAME, dev->index);
	/* Every request has ended once the disk is gone */
	kbd_dev_remove_disk(dev);
	/* Their peers see the disconnect */
	kbd_dev_close_queues(dev, dev->nr_queues);
	ida_free(&kbd_ida, dev->index);
	kfree(dev);
}

/**
 * kbd_dev_detach - detach device @index
 * @index: the K of krdmablkK
 *
 * Works on a device in use too: its gendisk goes away, as on hot-unplug,
 * and whoever holds it open gets I/O errors.
 *
 * Context: process; sleeps until every request of the device has ended
 * (at most io_timeout_s, when the server vanished).
 * Return: 0, or -ENOENT: no such device.
 */
int kbd_dev_detach(unsigned int index)
{
	struct kbd_dev *dev, *found = NULL;

	mutex_lock(&kbd_devices_lock);
	list_for_each_entry(dev, &kbd_devices, entry) {
		if (dev->index == index) {
			found = dev;
			list_del(&dev->entry);
			break;
		}
	}
	mutex_unlock(&kbd_devices_lock);
	if (!found)
		return -ENOENT;
	kbd_dev_destroy(found);
	return 0;
}

/**
 * kbd_dev_list - the "devices" file
 * @buf: sysfs's page
 *
 * One line per device: "krdmablkK ADDR PORT SIZE_BYTES QUEUES DEPTH
 * STATE", STATE "live" or "failed". KBD_MAX_DEVICES lines fit.
 *
 * Return: the bytes written.
 */
ssize_t kbd_dev_list(char *buf)
{
	struct kbd_dev *dev;
	int len = 0;

	mutex_lock(&kbd_devices_lock);
	list_for_each_entry(dev, &kbd_devices, entry)
		len += sysfs_emit_at(buf, len, "%s %pI4 %u %llu %u %u %s\n",
				     dev->disk->disk_name,
				     &dev->addr.sin_addr,
				     ntohs(dev->addr.sin_port), dev->size,
				     dev->nr_queues, dev->depth,
				     test_bit(KBD_DEV_FAILED, &dev->flags) ?
				     "failed" : "live");
	mutex_unlock(&kbd_devices_lock);
	return len;
}

/* Module exit: detaches every device; nothing of the module runs after it */
void kbd_dev_detach_all(void)
{
	struct kbd_dev *dev, *tmp;
	LIST_HEAD(devices);

	mutex_lock(&kbd_devices_lock);
	list_splice_init(&kbd_devices, &devices);
	mutex_unlock(&kbd_devices_lock);
	list_for_each_entry_safe(dev, tmp, &devices, entry) {
		list_del(&dev->entry);
		kbd_dev_destroy(dev);
	}
	/* A RECV of a connect that failed completes in krdma's time */
	wait_var_event(&kbd_hellos_posted, !atomic_read(&kbd_hellos_posted));
	ida_destroy(&kbd_ida);
}
