/* SPDX-License-Identifier: MIT */
/*
 * Options structs that grow without breaking the ABI: each starts with a
 * size_t `size` the caller sets to the size its header knows (an INIT
 * macro does), and the library reads them through bi_take_sized. A newer
 * library takes the fields past a smaller size as zero (their defaults);
 * an older one takes a larger size only when the bytes it does not know
 * are zero: a caller asking for what the library cannot do is refused,
 * never silently ignored (docs/open.md).
 */
#ifndef BI_SIZED_H
#define BI_SIZED_H

#include <stddef.h>

/* Copy the caller's struct @in (its first member a size_t, @in's size)
 * into @mine of @mine_size bytes, the rest zero. @in NULL: all zero.
 * -EINVAL when the size cannot even hold itself, or when a byte past
 * @mine_size is set; *@bad then says where (the byte's offset, or the
 * size for a size too small). */
int bi_take_sized(const void *in, void *mine, size_t mine_size, size_t *bad);

#endif
