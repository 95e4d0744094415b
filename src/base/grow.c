// SPDX-License-Identifier: MIT
/*
 * Growing arrays (grow.h): doubling with every multiplication checked.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/grow.h"

int bi_grow_most(void **arr, size_t *cap, size_t need, size_t elem, size_t most)
{
	if (need <= *cap)
		return 0;
	size_t limit = elem ? SIZE_MAX / elem : SIZE_MAX;
	if (most < limit)
		limit = most;
	if (need > limit)
		return -EOVERFLOW;
	size_t c = *cap ? *cap : BI_GROW_FIRST;
	while (c < need)
		c = c > limit / 2 ? limit : c * 2;
	if (c > limit)
		c = limit;	 /* a first capacity above @most */
	size_t bytes = c * elem; /* c <= limit: no overflow */
	void *p = realloc(*arr, bytes ? bytes : 1);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

int bi_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	return bi_grow_most(arr, cap, need, elem, SIZE_MAX);
}
