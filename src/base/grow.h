/* SPDX-License-Identifier: MIT */
/*
 * Growing arrays: the one place where a capacity doubles, so every count
 * from an image that makes an array grow meets the same overflow check.
 * A hand-rolled "cap * 2" per file is how one of them ends up
 * multiplying past SIZE_MAX into a short allocation.
 */
#ifndef BI_GROW_H
#define BI_GROW_H

#include <stddef.h>

/* The capacity an empty array starts at (elements). */
#define BI_GROW_FIRST 16

/*
 * Make room for @need elements of @elem bytes in the heap array *@arr of
 * capacity *@cap (elements): nothing when *@cap >= @need; else the
 * capacity doubles (from BI_GROW_FIRST when 0) until it holds @need, is
 * clipped to @most, and *@arr is reallocated. On failure *@arr and *@cap
 * are left as they were (the array is still the caller's to free).
 * 0; -EOVERFLOW when @need exceeds @most or @need * @elem exceeds
 * SIZE_MAX; -ENOMEM when the allocation fails.
 */
int bi_grow_most(void **arr, size_t *cap, size_t need, size_t elem, size_t most);

/* bi_grow_most without a limit of its own. */
int bi_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
