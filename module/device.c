// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: tracking of RDMA devices through an ib_client.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/netdevice.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/xarray.h>
#include <net/net_namespace.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>
#include <linux/krdma.h>

#include "krdma.h"

/* Every RDMA device krdma knows, keyed by ib_device.index. */
static DEFINE_XARRAY(krdma_devices);

static struct ib_client krdma_ib_client;

static void krdma_device_release(struct kref *ref)
{
	struct krdma_device *kdev = container_of(ref, struct krdma_device, ref);

	complete(&kdev->released);
}

/**
 * krdma_device_put - drop a reference taken by a lookup
 * @kdev: the device, or NULL
 */
void krdma_device_put(struct krdma_device *kdev)
{
	if (kdev)
		kref_put(&kdev->ref, krdma_device_release);
}

static bool krdma_device_visible(struct krdma_device *kdev,
				 const struct net *net)
{
	return !net || rdma_dev_access_netns(kdev->ibdev, net);
}

/**
 * krdma_device_get - look up a device by its index and take a reference
 * @index: ib_device.index
 * @net: namespace the caller lives in (NULL: any)
 *
 * Return: the device, or NULL if none has @index, it is being removed or
 * it is not visible from @net. Release with krdma_device_put().
 */
struct krdma_device *krdma_device_get(u32 index, const struct net *net)
{
	struct krdma_device *kdev;

	xa_lock(&krdma_devices);
	kdev = xa_load(&krdma_devices, index);
	if (kdev && (!krdma_device_visible(kdev, net) ||
		     !kref_get_unless_zero(&kdev->ref)))
		kdev = NULL;
	xa_unlock(&krdma_devices);
	return kdev;
}

/**
 * krdma_device_get_by_ibdev - krdma's state of an ib_device, referenced
 * @ibdev: the device
 *
 * Return: the device, or NULL if krdma does not track it (any more).
 */
struct krdma_device *krdma_device_get_by_ibdev(struct ib_device *ibdev)
{
	return krdma_device_get(ibdev->index, NULL);
}

/**
 * krdma_device_get_next - iterate over the devices visible from @net
 * @index: in: the first index to consider; out: the index of the result
 * @net: namespace the caller lives in (NULL: any)
 *
 * Return: the first device with an index >= @index, referenced, or NULL
 * at the end. The caller moves on with (*index)++ after the put.
 */
struct krdma_device *krdma_device_get_next(unsigned long *index,
					   const struct net *net)
{
	struct krdma_device *kdev;

	xa_lock(&krdma_devices);
	xa_for_each_start(&krdma_devices, *index, kdev, *index) {
		if (krdma_device_visible(kdev, net) &&
		    kref_get_unless_zero(&kdev->ref))
			break;
	}
	xa_unlock(&krdma_devices);
	return kdev;
}

/**
 * krdma_device_count - number of devices visible from @net
 * @net: namespace the caller lives in (NULL: any)
 *
 * Return: how many registered devices @net sees.
 */
u32 krdma_device_count(const struct net *net)
{
	struct krdma_device *kdev;
	unsigned long index;
	u32 count = 0;

	xa_lock(&krdma_devices);
	xa_for_each(&krdma_devices, index, kdev)
		count += krdma_device_visible(kdev, net);
	xa_unlock(&krdma_devices);
	return count;
}

/**
 * krdma_transport - what a port of a device speaks
 * @ibdev: the device
 * @port: one of its ports
 *
 * Return: KRDMA_TRANSPORT_* of <linux/krdma.h>.
 */
u32 krdma_transport(struct ib_device *ibdev, u32 port)
{
	if (rdma_protocol_iwarp(ibdev, port))
		return KRDMA_TRANSPORT_IWARP;
	if (rdma_protocol_roce(ibdev, port))
		return KRDMA_TRANSPORT_ROCE;
	if (rdma_protocol_ib(ibdev, port))
		return KRDMA_TRANSPORT_IB;
	return KRDMA_TRANSPORT_OTHER;
}

/**
 * krdma_device_fill_query - describe a device for KRDMA_IOC_DEV_QUERY
 * @kdev: the device, referenced by the caller
 * @out: filled in, except for the size, flags and dev_index fields
 */
void krdma_device_fill_query(struct krdma_device *kdev,
			     struct krdma_dev_query *out)
{
	struct ib_device *ibdev = kdev->ibdev;
	const struct ib_device_attr *attrs = &ibdev->attrs;

	out->transport = krdma_transport(ibdev, rdma_start_port(ibdev));
	strscpy((char *)out->name, dev_name(&ibdev->dev), sizeof(out->name));
	out->node_guid = be64_to_cpu(ibdev->node_guid);
	out->sys_image_guid = be64_to_cpu(attrs->sys_image_guid);
	out->max_mr_size = attrs->max_mr_size;
	out->page_size_cap = attrs->page_size_cap;
	ib_get_device_fw_str(ibdev, (char *)out->fw_ver);
	out->vendor_id = attrs->vendor_id;
	out->vendor_part_id = attrs->vendor_part_id;
	out->hw_ver = attrs->hw_ver;
	out->phys_port_cnt = rdma_end_port(ibdev);
	out->max_qp = attrs->max_qp;
	out->max_qp_wr = attrs->max_qp_wr;
	out->max_send_sge = attrs->max_send_sge;
	out->max_recv_sge = attrs->max_recv_sge;
	out->max_sge_rd = attrs->max_sge_rd;
	out->max_cq = attrs->max_cq;
	out->max_cqe = attrs->max_cqe;
	out->max_mr = attrs->max_mr;
	out->max_pd = attrs->max_pd;
	out->max_qp_rd_atom = attrs->max_qp_rd_atom;
	out->max_qp_init_rd_atom = attrs->max_qp_init_rd_atom;
	out->atomic_cap = attrs->atomic_cap;
	out->max_fast_reg_page_list_len = attrs->max_fast_reg_page_list_len;
}

/*
 * The network device under a port, if it lives in @net: a port's netdev
 * in another namespace is not the caller's to name (its name and index
 * mean nothing there). RoCE ports name it in their GID table. Other
 * drivers (iWARP) bind it with ib_device_set_netdev(), whose getter is not
 * exported on every kernel; ask the reverse map instead, which can only
 * tell the device, so this is limited to single-port devices.
 *
 * Return: the netdev, referenced (dev_put() it), or NULL.
 */
static struct net_device *krdma_port_netdev(struct ib_device *ibdev, u32 port,
					    struct net *net)
{
	const struct ib_gid_attr *gid_attr;
	struct net_device *ndev, *found = NULL;
	struct ib_device *owner;

	gid_attr = rdma_get_gid_attr(ibdev, port, 0);
	if (!IS_ERR(gid_attr)) {
		rcu_read_lock();
		ndev = rdma_read_gid_attr_ndev_rcu(gid_attr);
		if (!IS_ERR_OR_NULL(ndev) && net_eq(dev_net(ndev), net)) {
			dev_hold(ndev);
			found = ndev;
		}
		rcu_read_unlock();
		rdma_put_gid_attr(gid_attr);
		if (found || !IS_ERR_OR_NULL(ndev))
			return found;
	}

	if (rdma_end_port(ibdev) != 1)
		return NULL;

	/* The cursor of for_each_netdev_rcu() is no netdev after the loop */
	rcu_read_lock();
	for_each_netdev_rcu(net, ndev) {
		owner = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
		if (!owner)
			continue;
		ib_device_put(owner);
		if (owner == ibdev) {
			dev_hold(ndev);
			found = ndev;
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

/**
 * krdma_device_fill_port - describe a port for KRDMA_IOC_PORT_QUERY
 * @kdev: the device, referenced by the caller
 * @port: the port number
 * @net: namespace the caller lives in, to find the port's netdev
 * @out: filled in, except for size, flags, dev_index, port_num, num_gids
 *       and gids
 *
 * Return: 0, -EINVAL for a port the device does not have, or the error of
 * ib_query_port().
 */
int krdma_device_fill_port(struct krdma_device *kdev, u32 port,
			   struct net *net, struct krdma_port_query *out)
{
	struct ib_device *ibdev = kdev->ibdev;
	struct ib_port_attr attr;
	struct net_device *ndev;
	int ret;

	if (!rdma_is_port_valid(ibdev, port))
		return -EINVAL;

	ret = ib_query_port(ibdev, port, &attr);
	if (ret)
		return ret;

	out->state = attr.state;
	out->phys_state = attr.phys_state;
	out->max_mtu = ib_mtu_enum_to_int(attr.max_mtu);
	out->active_mtu = ib_mtu_enum_to_int(attr.active_mtu);
	out->link_layer = rdma_port_get_link_layer(ibdev, port);
	out->gid_tbl_len = attr.gid_tbl_len;
	out->active_speed = attr.active_speed;
	out->active_width = attr.active_width;

	ndev = krdma_port_netdev(ibdev, port, net);
	if (ndev) {
		out->netdev_ifindex = ndev->ifindex;
		strscpy((char *)out->netdev_name, ndev->name, sizeof(out->netdev_name));
		dev_put(ndev);
	}
	return 0;
}

/**
 * krdma_device_read_gid - read one entry of a port's GID table
 * @kdev: the device, referenced by the caller
 * @port: a valid port number
 * @index: index in the GID table
 * @net: namespace of the caller: an entry whose netdev lives in another
 *       one is not reported
 * @out: the entry
 *
 * Return: 0 for a valid entry, a negative errno for an empty or invalid
 * one, or one of another namespace (-ENOENT).
 */
int krdma_device_read_gid(struct krdma_device *kdev, u32 port, u32 index,
			  struct net *net, struct krdma_gid_entry *out)
{
	const struct ib_gid_attr *attr;
	struct net_device *ndev;
	bool hidden = false;

	attr = rdma_get_gid_attr(kdev->ibdev, port, index);
	if (IS_ERR(attr))
		return PTR_ERR(attr);

	memset(out, 0, sizeof(*out));
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	/*
	 * The entry of a netdev of another namespace is not reported: its
	 * GID is that netdev's address (RoCE v2), and rdma_cm in @net
	 * could not use it anyway
	 */
	if (!IS_ERR_OR_NULL(ndev)) {
		hidden = !net_eq(dev_net(ndev), net);
		if (!hidden)
			out->netdev_ifindex = ndev->ifindex;
	}
	rcu_read_unlock();
	if (!hidden) {
		memcpy(out->gid, attr->gid.raw, sizeof(out->gid));
		out->index = index;
		out->type = attr->gid_type;
	}
	rdma_put_gid_attr(attr);
	return hidden ? -ENOENT : 0;
}

/* The largest window krdma tries to map in one registration: 1 GiB */
#define KRDMA_MR_PROBE_PAGES (SZ_1G >> PAGE_SHIFT)

/*
 * How many pages one fast registration of @ibdev maps. The attribute is a
 * floor: software devices (rxe) take any count they are asked for, and a
 * grant should be as large as the device allows. Ask the device once.
 */
static u32 krdma_probe_mr_pages(struct ib_device *ibdev)
{
	u32 floor = ibdev->attrs.max_fast_reg_page_list_len;
	struct ib_pd *pd;
	struct ib_mr *mr;

	if (floor >= KRDMA_MR_PROBE_PAGES)
		return floor;
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd))
		return floor;
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, KRDMA_MR_PROBE_PAGES);
	if (!IS_ERR(mr)) {
		ib_dereg_mr(mr);
		floor = KRDMA_MR_PROBE_PAGES;
	}
	ib_dealloc_pd(pd);
	return floor;
}

static int krdma_add_one(struct ib_device *ibdev)
{
	struct krdma_device *kdev;
	int ret;

	kdev = kzalloc(sizeof(*kdev), GFP_KERNEL);
	if (!kdev)
		return -ENOMEM;

	kdev->ibdev = ibdev;
	kdev->index = ibdev->index;
	kref_init(&kdev->ref);
	init_completion(&kdev->released);
	mutex_init(&kdev->conns_lock);
	INIT_LIST_HEAD(&kdev->conns);
	kdev->max_mr_pages = krdma_probe_mr_pages(ibdev);
	kdev->send_one_mr = ibdev->ops.driver_id == RDMA_DRIVER_SIW;
	kdev->signal_payload = ibdev->ops.driver_id == RDMA_DRIVER_SIW;
	kdev->tx_after_dereg = ibdev->ops.driver_id == RDMA_DRIVER_SIW;

	ret = xa_insert(&krdma_devices, kdev->index, kdev, GFP_KERNEL);
	if (ret)
		goto err_free_kdev;

	ib_set_client_data(ibdev, &krdma_ib_client, kdev);
	dev_dbg(&ibdev->dev, "krdma: tracking device %u\n", kdev->index);
	return 0;

err_free_kdev:
	kfree(kdev);
	return ret;
}

/*
 * The device goes (rdma link delete, driver or krdma unload). Every
 * connection on it is torn down here, before ib_core frees anything:
 * their owners find them in the error state (-ENODEV), their operations
 * completed with a flush status.
 */
static void krdma_remove_one(struct ib_device *ibdev, void *client_data)
{
	struct krdma_device *kdev = client_data;
	struct krdma_conn *conn;

	xa_erase(&krdma_devices, kdev->index);

	mutex_lock(&kdev->conns_lock);
	kdev->removing = true;
	/*
	 * Fail them all first: each is torn down by its error_work, all at
	 * once, so a device that completes nothing any more costs the
	 * removal one teardown's bound (about 10.5 s), not one per
	 * connection. The loop below then waits for each, or tears down
	 * itself one whose work has not started yet.
	 */
	list_for_each_entry(conn, &kdev->conns, dev_entry)
		krdma_conn_qp_failed(conn, -ENODEV);
	while ((conn = list_first_entry_or_null(&kdev->conns,
						struct krdma_conn,
						dev_entry))) {
		krdma_conn_get(conn);
		mutex_unlock(&kdev->conns_lock);
		krdma_conn_teardown(conn, -ENODEV);
		krdma_conn_put(conn);
		mutex_lock(&kdev->conns_lock);
	}
	mutex_unlock(&kdev->conns_lock);

	krdma_device_put(kdev);
	wait_for_completion(&kdev->released);
	dev_dbg(&ibdev->dev, "krdma: forgot device %u\n", kdev->index);
	kfree(kdev);
}

static struct ib_client krdma_ib_client = {
	.name = "krdma",
	.add = krdma_add_one,
	.remove = krdma_remove_one,
};

int krdma_device_init(void)
{
	return ib_register_client(&krdma_ib_client);
}

void krdma_device_uninit(void)
{
	ib_unregister_client(&krdma_ib_client);
	WARN_ON(!xa_empty(&krdma_devices));
}
