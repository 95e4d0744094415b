/* SPDX-License-Identifier: MIT */
/*
 * Binary search over sorted arrays of 64-bit values: generic, so it sits
 * at the bottom of the stack for every layer (the collision engine and
 * its input checks use it today).
 */
#ifndef BI_SEARCH_H
#define BI_SEARCH_H

#include <stddef.h>
#include <stdint.h>

/* Index of the first element of the ascending @v[0..n) that is >= @x (n
 * if none). O(log n); @v may be NULL when @n is 0. */
static inline size_t bi_lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The same over an array of structs: @n elements of @size bytes at
 * @base, ascending in the uint64_t at byte @off of each (offsetof). */
static inline size_t bi_lower_bound_field(const void *base, size_t n, size_t size, size_t off,
					  uint64_t x)
{
	const unsigned char *p = base;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (*(const uint64_t *)(const void *)(p + mid * size + off) < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#endif
