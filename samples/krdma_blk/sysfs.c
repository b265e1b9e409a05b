// SPDX-License-Identifier: GPL-2.0
/*
 * krdma_blk: /sys/kernel/krdma_blk, root only.
 *
 *   attach   (write) "ADDR PORT [queues=N] [depth=D]"
 *   detach   (write) "krdmablkK" or "K"
 *   devices  (read)  "krdmablkK ADDR PORT SIZE_BYTES QUEUES DEPTH STATE"
 *
 * Documentation/ABI/testing/sysfs-kernel-krdma_blk. Input is parsed from
 * a bounded copy; anything unexpected is -EINVAL, and says why.
 *
 * Copyright (c) 2026 The krdma authors
 */
#include <linux/cpumask.h>
#include <linux/inet.h>
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/minmax.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "krdma_blk.h"

/* Longest line accepted: "255.255.255.255 65535 queues=64 depth=256" fits */
#define KBD_LINE_MAX	128

static struct kobject *kbd_kobj;

/*
 * What was written, as a NUL-terminated string in @line (KBD_LINE_MAX
 * bytes) without white space around it; NULL if it is too long or has a
 * NUL byte
 */
static char *kbd_copy_line(char *line, const char *buf, size_t count)
{
	if (count >= KBD_LINE_MAX || strnlen(buf, count) != count)
		return NULL;
	memcpy(line, buf, count);
	line[count] = '\0';
	return strim(line);
}

/* "name=VALUE", VALUE in min..max; -EINVAL if it is there twice */
static int kbd_parse_opt(const char *tok, const char *name, unsigned int min,
			 unsigned int max, unsigned int *val, bool *seen)
{
	unsigned int v;

	if (*seen || kstrtouint(tok + strlen(name), 10, &v) || v < min ||
	    v > max) {
		pr_err("attach: %s must be given once, %u..%u\n", name, min, max);
		return -EINVAL;
	}
	*seen = true;
	*val = v;
	return 0;
}

static int kbd_parse_attach(char *p, struct kbd_attach_args *args)
{
	bool have_queues = false, have_depth = false;
	unsigned int npos = 0;
	const char *end;
	char *tok;
	u16 port;
	int ret;

	memset(args, 0, sizeof(*args));
	args->addr.sin_family = AF_INET;
	args->queues = min_t(unsigned int, num_online_cpus(),
			     KBD_DEFAULT_QUEUES);
	args->depth = KBD_DEFAULT_DEPTH;

	while ((tok = strsep(&p, " \t")) != NULL) {
		if (!*tok)
			continue;
		if (str_has_prefix(tok, "queues=")) {
			ret = kbd_parse_opt(tok, "queues=", 1, KBD_MAX_QUEUES,
					    &args->queues, &have_queues);
		} else if (str_has_prefix(tok, "depth=")) {
			ret = kbd_parse_opt(tok, "depth=", 1, KBD_MAX_DEPTH,
					    &args->depth, &have_depth);
		} else if (npos == 0) {
			ret = in4_pton(tok, -1, (u8 *)&args->addr.sin_addr.s_addr,
				       -1, &end) && !*end ? 0 : -EINVAL;
			if (ret)
				pr_err("attach: \"%*pE\" is not an IPv4 address\n",
				       (int)strlen(tok), tok);
			npos++;
		} else if (npos == 1) {
			ret = kstrtou16(tok, 10, &port) || !port ? -EINVAL : 0;
			if (ret)
				pr_err("attach: the port must be 1..65535\n");
			else
				args->addr.sin_port = htons(port);
			npos++;
		} else {
			pr_err("attach: unexpected \"%*pE\"\n",
			       (int)strlen(tok), tok);
			ret = -EINVAL;
		}
		if (ret)
			return ret;
	}
	if (npos != 2) {
		pr_err("attach: expected \"ADDR PORT [queues=N] [depth=D]\"\n");
		return -EINVAL;
	}
	/* blk-mq makes no more hardware queues than there are CPUs */
	if (args->queues > nr_cpu_ids) {
		pr_info("attach: %u queues: as many as CPUs, %u\n",
			args->queues, nr_cpu_ids);
		args->queues = nr_cpu_ids;
	}
	return 0;
}

static ssize_t attach_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	struct kbd_attach_args args;
	char line[KBD_LINE_MAX], *p;
	int ret;

	p = kbd_copy_line(line, buf, count);
	if (!p) {
		pr_err("attach: longer than %u bytes, or a NUL byte\n",
		       KBD_LINE_MAX - 1);
		return -EINVAL;
	}
	ret = kbd_parse_attach(p, &args);
	if (ret)
		return ret;
	ret = kbd_dev_attach(&args);
	return ret ? ret : count;
}

static ssize_t detach_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	char line[KBD_LINE_MAX], *p;
	unsigned int index;
	int ret;

	p = kbd_copy_line(line, buf, count);
	if (p && str_has_prefix(p, KBD_DISK_NAME))
		p += strlen(KBD_DISK_NAME);
	if (!p || kstrtouint(p, 10, &index)) {
		pr_err("detach: expected \"%sK\" or \"K\"\n", KBD_DISK_NAME);
		return -EINVAL;
	}
	ret = kbd_dev_detach(index);
	return ret ? ret : count;
}

static ssize_t devices_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return kbd_dev_list(buf);
}

static struct kobj_attribute kbd_attach_attr = __ATTR_WO(attach);
static struct kobj_attribute kbd_detach_attr = __ATTR_WO(detach);
static struct kobj_attribute kbd_devices_attr = __ATTR_RO(devices);

static struct attribute *kbd_attrs[] = {
	&kbd_attach_attr.attr,
	&kbd_detach_attr.attr,
	&kbd_devices_attr.attr,
	NULL,
};

static const struct attribute_group kbd_attr_group = {
	.attrs = kbd_attrs,
};

int kbd_sysfs_init(void)
{
	int ret;

	kbd_kobj = kobject_create_and_add("krdma_blk", kernel_kobj);
	if (!kbd_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(kbd_kobj, &kbd_attr_group);
	if (ret)
		goto err_put_kobj;
	return 0;

err_put_kobj:
	kobject_put(kbd_kobj);
	return ret;
}

/* Waits for the attach and detach in progress: none runs once it returns */
void kbd_sysfs_uninit(void)
{
	sysfs_remove_group(kbd_kobj, &kbd_attr_group);
	kobject_put(kbd_kobj);
}
