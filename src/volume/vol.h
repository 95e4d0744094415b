/* SPDX-License-Identifier: MIT */
/*
 * Volume layers between the images and btrfs: partitions, LUKS, LVM.
 * bi_vol_assemble() replaces "locate the filesystem in each image" when a
 * LUKS header or an LVM physical volume is found: it builds the stack
 * (image -> partition -> LUKS -> LVM -> ...), picks the volume holding
 * btrfs for each device and points the device's reads at it.
 */
#ifndef BI_VOL_H
#define BI_VOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct btrfsimg_fs;
struct bi_dev;

/* For every device added: find the layers, pick the btrfs volume, set the
 * device's window or its volume view (bi_dev.vol). A device that is only a
 * PV of an LV given to another device is marked absorbed. Without any
 * LUKS or LVM layer this is bi_dev_locate() on each device. */
int bi_vol_assemble(struct btrfsimg_fs *fs);

/* Where byte @off of device @d (counted from its base) lies: *img the
 * image device holding it and *disk its offset in the disk that image
 * holds (past partitions and LVM segments; the first leg of a mirror).
 * 0; 1 when no linear place exists, *why (static) saying why: encrypted
 * (LUKS), or on a PV not supplied. Reads nothing. */
int bi_vol_locate(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off,
		  const struct bi_dev **img, uint64_t *disk, const char **why);

/* A btrfs row under image @d's row for the window the salvage placed it
 * at (no table, no superblock: btrfs/salvage_place.c), in use, its detail
 * "found by scanning: @how". Nothing without a listing (none scanned). */
void bi_vols_placed_row(struct btrfsimg_fs *fs, const struct bi_dev *d, const uint8_t fsid[16],
			const char *how);

/* Release everything the volume layer keeps on the handle (wiping keys).
 * Accepts a handle without any. */
void bi_vols_free(struct btrfsimg_fs *fs);

#endif
