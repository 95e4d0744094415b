/* SPDX-License-Identifier: MIT */
/* Where a device of the filesystem was read from: the layers between its
 * image and btrfs (partition, LUKS, LVM), for super and unallocated. */
#ifndef BTRFSIMG_TOOLS_WHERE_H
#define BTRFSIMG_TOOLS_WHERE_H

#include <stdbool.h>

#include "btrfsimg.h"

struct dev_where {
	/* "partition 2 > luks2 <uuid> > lvm-lv vg/lv"; "" when btrfs lies in
	 * the image itself (or at an explicit offset) */
	char chain[512];
	/* a LUKS or LVM layer is on the way: device offsets are not image
	 * offsets (decrypted, or mapped through an LV's segments) */
	bool volume;
};

/* Fill @out for @d (not missing). Without layer rows (none probed, out
 * of memory) the chain says the partition alone, as the device does. */
void dev_where(btrfsimg_fs *fs, const struct btrfsimg_device *d, struct dev_where *out);

#endif
