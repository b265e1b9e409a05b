/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma_blk: every difference between the kernels it builds for (6.1 to
 * 6.12) lives here. The .c files describe the queue in a struct
 * queue_limits, as 6.12 does; this applies it on older kernels.
 *
 * Kbuild looks into the headers for what a kernel has (a backport
 * counts): KBD_HAVE_* below. Nothing compares version numbers.
 *
 * Copyright (c) 2026 The krdma authors
 */
#ifndef _KRDMA_BLK_COMPAT_H
#define _KRDMA_BLK_COMPAT_H

#include <linux/blk-mq.h>
#include <linux/blkdev.h>

/*
 * A gendisk and its queue, with the limits of @lim that krdma_blk sets
 * (logical and physical block size, max_hw_sectors, max_segments,
 * virt_boundary_mask), not rotational. 6.9 takes the limits at
 * allocation (KBD_HAVE_ALLOC_DISK_LIMITS); 6.11 made "not rotational"
 * the default (queue features, KBD_HAVE_BLK_FEATURES).
 */
static inline struct gendisk *
kbd_compat_alloc_disk(struct blk_mq_tag_set *set, struct queue_limits *lim,
		      void *queuedata)
{
	struct gendisk *disk;

#ifdef KBD_HAVE_ALLOC_DISK_LIMITS
	disk = blk_mq_alloc_disk(set, lim, queuedata);
	if (IS_ERR(disk))
		return disk;
#else
	struct request_queue *q;

	disk = blk_mq_alloc_disk(set, queuedata);
	if (IS_ERR(disk))
		return disk;
	q = disk->queue;
	blk_queue_logical_block_size(q, lim->logical_block_size);
	blk_queue_physical_block_size(q, lim->physical_block_size);
	blk_queue_max_hw_sectors(q, lim->max_hw_sectors);
	blk_queue_max_segments(q, lim->max_segments);
	blk_queue_virt_boundary(q, lim->virt_boundary_mask);
#endif
#ifndef KBD_HAVE_BLK_FEATURES
	blk_queue_flag_set(QUEUE_FLAG_NONROT, disk->queue);
#endif
	return disk;
}

#endif /* _KRDMA_BLK_COMPAT_H */
