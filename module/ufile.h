/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: the userspace face: state of an open /dev/krdma and the ioctl
 * handlers, shared by chardev.c (file operations, dispatch, queries) and
 * ucmd.c (objects and the data path).
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_UFILE_H
#define _KRDMA_UFILE_H

#include <linux/cache.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

struct krdma_completion;
struct krdma_user;
struct net;
struct page;
struct vm_area_struct;

/**
 * struct krdma_ring_hdr - page 0 of a mapped completion ring
 * @head: the consumer's index, written by userspace only
 * @tail: the producer's index, written by the kernel only
 * @ring_mask: entries - 1, for userspace; the kernel keeps its own
 * @ring_entries: entries, for userspace
 * @flags: 0, for userspace
 *
 * The entries follow at PAGE_SIZE. head and tail have cache lines of
 * their own: the consumer's stores do not slow the producer's.
 */
struct krdma_ring_hdr {
	u32 head ____cacheline_aligned_in_smp;
	u32 tail ____cacheline_aligned_in_smp;
	u32 ring_mask ____cacheline_aligned_in_smp;
	u32 ring_entries;
	u32 flags;
};

/**
 * struct krdma_ucq_map - the memory of a mapped completion ring
 * @pages: @nr_pages order-0 pages, mapped into userspace at mmap()
 * @nr_pages: one header page and the entries' pages
 * @entries: the ring's entries (the header's copy is userspace's to
 *           overwrite; the kernel reads only head from it)
 * @hdr: the kernel's mapping of all of @pages (vmap)
 *
 * Made by RING_SETUP and unchanged until the file is released, which
 * comes after the last user mapping is gone (a VMA holds the file).
 */
struct krdma_ucq_map {
	struct page **pages;
	unsigned int nr_pages;
	u32 entries;
	struct krdma_ring_hdr *hdr;
};

/**
 * struct krdma_ucq - the completion queue of one open file
 * @lock: protects @head, @tail, @reserved; taken from softirq context
 * @ring: @size entries, @size a power of two
 * @size: number of entries
 * @head: next entry to hand to userspace (free-running)
 * @tail: next entry to fill (free-running)
 * @reserved: entries promised to accepted operations plus entries filled
 *            and not taken yet; never more than @size, so a completion
 *            always has room
 * @wait: pollers (queue not empty) and submitters (room freed)
 * @poll_mutex: one KRDMA_IOC_POLL at a time copies out of @ring; one
 *              RING_SETUP at a time
 * @map: the mapped ring, once RING_SETUP made it (@ring then points into
 *       it, and @head is the last head accepted from userspace); set
 *       once, under @poll_mutex and @lock, read by mmap() without either
 */
struct krdma_ucq {
	spinlock_t lock; /* @head, @tail, @reserved */
	struct krdma_completion *ring;
	u32 size;
	u32 head;
	u32 tail;
	u32 reserved;
	wait_queue_head_t wait;
	struct mutex poll_mutex; /* one copier out of @ring, one setup */
	struct krdma_ucq_map *map;
};

/**
 * struct krdma_file - state of one open file description of /dev/krdma
 * @net: network namespace of the opener; devices, listeners and
 *       connections are those of this namespace
 * @objects: the file's objects by handle (struct krdma_uobj)
 * @ucq: the completion queue
 * @user: the user its connections and buffers are charged to: the
 *        opener's effective uid (referenced)
 */
struct krdma_file {
	struct net *net;
	struct krdma_user *user;
	struct xarray objects;
	struct krdma_ucq ucq;
};

/**
 * struct krdma_ucmd - one ioctl call being executed
 * @kfile: the file it was called on
 * @ubuffer: the caller's struct
 * @user_size: the caller's idea of the struct's size
 * @cmd: the struct, copied in and sized as the kernel knows it
 */
struct krdma_ucmd {
	struct krdma_file *kfile;
	void __user *ubuffer;
	u32 user_size;
	void *cmd;
};

int krdma_ucmd_respond(struct krdma_ucmd *ucmd, size_t size);

/* ucmd.c */
int krdma_ufile_init(struct krdma_file *kfile);
void krdma_ufile_uninit(struct krdma_file *kfile);
__poll_t krdma_ufile_poll_mask(struct krdma_file *kfile);
int krdma_cmd_destroy(struct krdma_ucmd *ucmd);
int krdma_cmd_listen(struct krdma_ucmd *ucmd);
int krdma_cmd_listen_query(struct krdma_ucmd *ucmd);
int krdma_cmd_accept(struct krdma_ucmd *ucmd);
int krdma_cmd_connect(struct krdma_ucmd *ucmd);
int krdma_cmd_disconnect(struct krdma_ucmd *ucmd);
int krdma_cmd_conn_query(struct krdma_ucmd *ucmd);
int krdma_cmd_buf_reg(struct krdma_ucmd *ucmd);
int krdma_cmd_grant(struct krdma_ucmd *ucmd);
int krdma_cmd_submit(struct krdma_ucmd *ucmd);
int krdma_cmd_poll(struct krdma_ucmd *ucmd);
int krdma_cmd_ring_setup(struct krdma_ucmd *ucmd);
int krdma_ufile_mmap(struct krdma_file *kfile, struct vm_area_struct *vma);

#endif /* _KRDMA_UFILE_H */
