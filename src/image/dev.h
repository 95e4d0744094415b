/* SPDX-License-Identifier: MIT */
/*
 * Device images: one read interface over files, memory and callbacks.
 */
#ifndef BI_DEV_H
#define BI_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "base/ondisk.h"

struct btrfsimg_fs;
struct bi_ctr;
struct bi_vol;

struct bi_dev {
	char *name;
	int fd;				/* -1 unless a file */
	const uint8_t *mem;		/* borrowed buffer, or NULL */
	btrfsimg_read_fn rfn;		/* callback, or NULL */
	void *rctx;
	uint64_t raw_size;		/* whole image */
	uint64_t base;			/* where the filesystem starts in the image */
	uint64_t size;			/* bytes from base to the end */
	int partition;			/* 1-based partition base is in; 0: none */
	/* set when the superblocks are read (super.c) */
	bool has_super;
	uint64_t devid;
	uint8_t dev_uuid[16];
	uint8_t fsid[16];
	uint64_t generation;
	uint64_t total_bytes;		/* dev_item.total_bytes */
	struct btrfsimg_super_mirror mirrors[SB_MIRROR_MAX];
	bool member;			/* matched to the filesystem in use */
	struct bi_ctr *ctr;		/* the container read through (container.h),
					 * or NULL: raw_size is then the file's */
	/* set by the volume layer (volume/vol.c) when btrfs lies under LUKS
	 * or LVM: bi_dev_read goes through vread(vol) instead of the window */
	struct bi_vol *vol;
	int (*vread)(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		     size_t len);
	bool absorbed;			/* only a PV of an LV that another device reads */
	bool unplaced;			/* no table and no superblock said where btrfs
					 * starts: the salvage places it (volume/part.c) */
};

/* Read @len bytes at @off (relative to the device's base). A read past the
 * end is -EIO with a message naming the device and the range. */
int bi_dev_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		size_t len);
/* Read from the raw image (ignoring base). Same contract. */
int bi_dev_read_raw(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		    size_t len);
/* Tell the kernel [off, off+len) will be read soon (a file device only; a
 * hint, so out-of-range or failing requests are ignored). */
void bi_dev_prefetch(const struct bi_dev *d, uint64_t off, uint64_t len);
/* Whether [off, off+len) of a plain image file is all a hole (reads as
 * zeros without being stored: lseek SEEK_DATA). *data caches where the
 * next data starts (relative to base; start it at 0): ranges before it
 * are answered without a system call, so one caller asking in order asks
 * the kernel once per hole. Anything else (a container, a volume layer,
 * a file system that cannot say) is never a hole. */
bool bi_dev_hole(const struct bi_dev *d, uint64_t off, uint64_t len, uint64_t *data);
/* The member device with this devid, or NULL if it is missing. */
struct bi_dev *bi_dev_by_id(struct btrfsimg_fs *fs, uint64_t devid);
void bi_devs_close(struct btrfsimg_fs *fs);

/* At most this many devices per handle (more is -EINVAL). */
#define BI_MAX_DEVS 64

#endif
