// SPDX-License-Identifier: GPL-2.0
/*
 * krdma: per-user limits. Every open file of /dev/krdma is charged to a
 * user: the effective uid of the process that opened it (the file's
 * f_cred, as inotify charges its instances), not whoever uses the file
 * later. The connections and grants a user holds through its handles,
 * and the buffers it registered until their last reference goes (a
 * revoked grant holds its buffer), are counted against
 * max_conns_per_user, max_bufs_per_user and max_grants_per_user (each
 * grant holds MRs of the device); the queue
 * entries of its connections and of those its listeners may queue
 * (krdma_conn_qdepth(): device memory no cgroup is charged for) against
 * max_queue_depth_per_user; the pages of the windows of its buffers
 * (grants and local windows: MRs and page lists of the device, again for
 * every window of the same pages) against max_window_pages_per_user,
 * and its local windows against max_grants_per_user too; the bytes of
 * the buffers are bounded by RLIMIT_MEMLOCK already. CAP_SYS_RESOURCE
 * passes the limits, as it passes rlimits. Kernel consumers are not
 * counted.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/bits.h>
#include <linux/capability.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uidgid.h>
#include <linux/xarray.h>

#include "krdma.h"

#define KRDMA_USER_LIMIT_MAX	1048576
/* Queue entries: up to 8192 for each connection */
#define KRDMA_USER_QDEPTH_MAX	BIT(26)
/* Window pages: 8 TiB of 4 KiB pages */
#define KRDMA_USER_WPAGES_MAX	BIT(31)

static unsigned int max_conns_per_user = 1024;
static unsigned int max_bufs_per_user = 65536;
static unsigned int max_backlog_per_user = 4096;
static unsigned int max_grants_per_user = 65536;
/* 1024 connections of the default depths, twice over */
static unsigned int max_queue_depth_per_user = 524288;
/* 16 GiB of 4 KiB pages */
static unsigned int max_window_pages_per_user = 4194304;

/* Charges refused because of a limit, by resource */
static atomic64_t krdma_user_refused[KRDMA_USER_NR_RES];

static const struct {
	const char *param;
	const char *what;
	unsigned int *limit;
	unsigned int max;
} krdma_user_res_info[KRDMA_USER_NR_RES] = {
	[KRDMA_USER_CONNS] = { "max_conns_per_user", "connections",
			       &max_conns_per_user, KRDMA_USER_LIMIT_MAX },
	[KRDMA_USER_BUFS] = { "max_bufs_per_user", "buffers",
			      &max_bufs_per_user, KRDMA_USER_LIMIT_MAX },
	[KRDMA_USER_BACKLOG] = { "max_backlog_per_user",
				 "listener backlog slots",
				 &max_backlog_per_user, KRDMA_USER_LIMIT_MAX },
	[KRDMA_USER_GRANTS] = { "max_grants_per_user", "grants",
				&max_grants_per_user, KRDMA_USER_LIMIT_MAX },
	[KRDMA_USER_QDEPTH] = { "max_queue_depth_per_user", "queue entries",
				&max_queue_depth_per_user,
				KRDMA_USER_QDEPTH_MAX },
	[KRDMA_USER_WPAGES] = { "max_window_pages_per_user", "window pages",
				&max_window_pages_per_user,
				KRDMA_USER_WPAGES_MAX },
};

/* Every limit: 1 up to the maximum of its resource */
static int krdma_param_set_user_limit(const char *val,
				      const struct kernel_param *kp)
{
	unsigned int max;
	int res;

	for (res = 0; res < KRDMA_USER_NR_RES; res++) {
		if (krdma_user_res_info[res].limit == kp->arg) {
			max = krdma_user_res_info[res].max;
			return param_set_uint_minmax(val, kp, 1, max);
		}
	}
	WARN_ON_ONCE(1);	/* a parameter missing from the table */
	return -EINVAL;
}

static const struct kernel_param_ops krdma_user_limit_ops = {
	.set = krdma_param_set_user_limit,
	.get = param_get_uint,
};

module_param_cb(max_conns_per_user, &krdma_user_limit_ops,
		&max_conns_per_user, 0644);
__MODULE_PARM_TYPE(max_conns_per_user, "uint");
MODULE_PARM_DESC(max_conns_per_user,
		 "Connections one user may hold through /dev/krdma, 1..1048576 (default 1024); CAP_SYS_RESOURCE passes it");

module_param_cb(max_bufs_per_user, &krdma_user_limit_ops,
		&max_bufs_per_user, 0644);
__MODULE_PARM_TYPE(max_bufs_per_user, "uint");
MODULE_PARM_DESC(max_bufs_per_user,
		 "Buffers one user may hold through /dev/krdma, 1..1048576 (default 65536); CAP_SYS_RESOURCE passes it");

module_param_cb(max_backlog_per_user, &krdma_user_limit_ops,
		&max_backlog_per_user, 0644);
__MODULE_PARM_TYPE(max_backlog_per_user, "uint");
MODULE_PARM_DESC(max_backlog_per_user,
		 "Connections the listeners of one user may hold before they are accepted (the sum of their backlogs), 1..1048576 (default 4096); CAP_SYS_RESOURCE passes it");

module_param_cb(max_grants_per_user, &krdma_user_limit_ops,
		&max_grants_per_user, 0644);
__MODULE_PARM_TYPE(max_grants_per_user, "uint");
MODULE_PARM_DESC(max_grants_per_user,
		 "Grants one user may hold through /dev/krdma, 1..1048576 (default 65536); CAP_SYS_RESOURCE passes it");

module_param_cb(max_queue_depth_per_user, &krdma_user_limit_ops,
		&max_queue_depth_per_user, 0644);
__MODULE_PARM_TYPE(max_queue_depth_per_user, "uint");
MODULE_PARM_DESC(max_queue_depth_per_user,
		 "Queue entries (sq_depth + rq_depth) of the connections one user holds through /dev/krdma and of those its listeners may queue (backlog times their depths), 1..67108864 (default 524288); CAP_SYS_RESOURCE passes it");

module_param_cb(max_window_pages_per_user, &krdma_user_limit_ops,
		&max_window_pages_per_user, 0644);
__MODULE_PARM_TYPE(max_window_pages_per_user, "uint");
MODULE_PARM_DESC(max_window_pages_per_user,
		 "Pages of the windows (grants, and the local windows of large SENDs and RECVs) of the buffers one user registered through /dev/krdma, each window counting its pages again, 1..2147483648 (default 4194304: 16 GiB of 4 KiB pages); CAP_SYS_RESOURCE passes it");

/**
 * struct krdma_user - what one user holds through /dev/krdma
 * @ref: every open file of the user, and every buffer it registered
 *       (krdma_user_hold())
 * @files: its open files
 * @uid: the user, in the initial user namespace
 * @held: connections, buffers, backlog slots, grants, queue entries and
 *        window pages held (enum krdma_user_res); long, since
 *        CAP_SYS_RESOURCE passes the limits
 */
struct krdma_user {
	struct kref ref;
	atomic_t files;
	u32 uid;
	atomic_long_t held[KRDMA_USER_NR_RES];
};

/* Users with an open file, keyed by uid; membership under the mutex */
static DEFINE_XARRAY(krdma_users);
static DEFINE_MUTEX(krdma_users_mutex);

/**
 * krdma_user_get - the accounting of a user, for one of its open files
 * @uid: the user
 *
 * Context: process context; sleeps.
 * Return: the user (release with krdma_user_put()), or NULL when out of
 * memory.
 */
struct krdma_user *krdma_user_get(kuid_t uid)
{
	u32 id = from_kuid(&init_user_ns, uid);
	struct krdma_user *user, *new;
	int ret;

	/*
	 * Nothing is allocated under krdma_users_mutex: a buffer's free
	 * work drops its user under it, from krdma_wq, which must make
	 * progress under memory pressure (WQ_MEM_RECLAIM). The slot is
	 * reserved first, so that the store does not allocate; unless a
	 * user stored there meanwhile came and went: then again.
	 */
	new = kzalloc(sizeof(*new), GFP_KERNEL);
	if (!new)
		return NULL;
	kref_init(&new->ref);
	atomic_set(&new->files, 1);
	new->uid = id;
	for (;;) {
		if (xa_reserve(&krdma_users, id, GFP_KERNEL)) {
			user = NULL;
			break;
		}
		mutex_lock(&krdma_users_mutex);
		user = xa_load(&krdma_users, id);
		if (user) {
			kref_get(&user->ref);
			atomic_inc(&user->files);
			mutex_unlock(&krdma_users_mutex);
			break;
		}
		ret = xa_err(xa_store(&krdma_users, id, new,
				      GFP_NOWAIT | __GFP_NOWARN));
		mutex_unlock(&krdma_users_mutex);
		if (!ret)
			return new;
	}
	kfree(new);
	return user;
}

/**
 * krdma_user_hold - a reference to a user for an object it made
 * @user: the user, referenced by the caller
 *
 * Return: @user; release with krdma_user_drop().
 */
struct krdma_user *krdma_user_hold(struct krdma_user *user)
{
	kref_get(&user->ref);
	return user;
}

static void krdma_user_release(struct kref *ref)
{
	struct krdma_user *user = container_of(ref, struct krdma_user, ref);
	int res;

	lockdep_assert_held(&krdma_users_mutex);

	xa_erase(&krdma_users, user->uid);
	for (res = 0; res < KRDMA_USER_NR_RES; res++)
		WARN_ON(atomic_long_read(&user->held[res]));
	kfree(user);
}

/**
 * krdma_user_drop - drop a reference taken by krdma_user_hold()
 * @user: the user, or NULL
 *
 * Context: process context; sleeps.
 */
void krdma_user_drop(struct krdma_user *user)
{
	if (user && kref_put_mutex(&user->ref, krdma_user_release,
				   &krdma_users_mutex))
		mutex_unlock(&krdma_users_mutex);
}

/**
 * krdma_user_put - drop a file's reference, taken by krdma_user_get()
 * @user: the user, or NULL
 *
 * Context: process context; sleeps.
 */
void krdma_user_put(struct krdma_user *user)
{
	if (!user)
		return;
	atomic_dec(&user->files);
	krdma_user_drop(user);
}

/**
 * krdma_user_uid - the uid a user is known by (initial user namespace)
 * @user: the user
 *
 * Return: the uid, as seen from the initial user namespace.
 */
u32 krdma_user_uid(const struct krdma_user *user)
{
	return user->uid;
}

/**
 * krdma_user_charge_n - count objects against a user's limit
 * @user: the user
 * @res: what kind of object
 * @n: how many
 *
 * Context: process context of the caller the objects are made for: its
 * CAP_SYS_RESOURCE passes the limit.
 * Return: 0, or -EMFILE when the user would hold more than the limit
 * allows.
 */
int krdma_user_charge_n(struct krdma_user *user, enum krdma_user_res res,
			u32 n)
{
	long limit = READ_ONCE(*krdma_user_res_info[res].limit);
	long held = atomic_long_add_return(n, &user->held[res]);

	if (held <= limit || capable(CAP_SYS_RESOURCE))
		return 0;
	atomic_long_sub(n, &user->held[res]);
	atomic64_inc(&krdma_user_refused[res]);
	pr_info_ratelimited("uid %u holds %ld %s through /dev/krdma and asks for %u more, past %s; raise it: krdmactl set %s=N\n",
			    user->uid, held - n, krdma_user_res_info[res].what,
			    n, krdma_user_res_info[res].param,
			    krdma_user_res_info[res].param);
	return -EMFILE;
}

/**
 * krdma_user_uncharge_n - objects counted by krdma_user_charge_n() are gone
 * @user: the user
 * @res: what kind of object
 * @n: how many
 */
void krdma_user_uncharge_n(struct krdma_user *user, enum krdma_user_res res,
			   u32 n)
{
	WARN_ON_ONCE(atomic_long_sub_return(n, &user->held[res]) < 0);
}

/**
 * krdma_users_show - the users file of debugfs: one line per user
 * @m: the file
 */
void krdma_users_show(struct seq_file *m)
{
	struct krdma_user *user;
	unsigned long id;

	mutex_lock(&krdma_users_mutex);
	xa_for_each(&krdma_users, id, user)
		seq_printf(m, "uid=%u files=%u conns=%ld bufs=%ld max_conns=%u max_bufs=%u grants=%ld max_grants=%u qdepth=%ld max_qdepth=%u wpages=%ld max_wpages=%u\n",
			   user->uid, atomic_read(&user->files),
			   atomic_long_read(&user->held[KRDMA_USER_CONNS]),
			   atomic_long_read(&user->held[KRDMA_USER_BUFS]),
			   READ_ONCE(max_conns_per_user),
			   READ_ONCE(max_bufs_per_user),
			   atomic_long_read(&user->held[KRDMA_USER_GRANTS]),
			   READ_ONCE(max_grants_per_user),
			   atomic_long_read(&user->held[KRDMA_USER_QDEPTH]),
			   READ_ONCE(max_queue_depth_per_user),
			   atomic_long_read(&user->held[KRDMA_USER_WPAGES]),
			   READ_ONCE(max_window_pages_per_user));
	mutex_unlock(&krdma_users_mutex);
}

/**
 * krdma_users_show_stats - the users' part of the stats line of debugfs
 * @m: the file
 */
void krdma_users_show_stats(struct seq_file *m)
{
	struct krdma_user *user;
	unsigned long id;
	u32 n = 0;

	mutex_lock(&krdma_users_mutex);
	xa_for_each(&krdma_users, id, user)
		n += atomic_read(&user->files) > 0;
	mutex_unlock(&krdma_users_mutex);
	seq_printf(m, " users=%u conn_limit_refused=%lld buf_limit_refused=%lld grant_limit_refused=%lld qdepth_limit_refused=%lld wpages_limit_refused=%lld",
		   n, atomic64_read(&krdma_user_refused[KRDMA_USER_CONNS]),
		   atomic64_read(&krdma_user_refused[KRDMA_USER_BUFS]),
		   atomic64_read(&krdma_user_refused[KRDMA_USER_GRANTS]),
		   atomic64_read(&krdma_user_refused[KRDMA_USER_QDEPTH]),
		   atomic64_read(&krdma_user_refused[KRDMA_USER_WPAGES]));
}
