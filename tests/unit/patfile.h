/* SPDX-License-Identifier: MIT */
/* Unit tests of the readers of image files (test_ring, test_aio): a file
 * of known bytes and a plain-file device over it (cmocka asserts; include
 * after cmocka.h). */
#ifndef BTRFSIMG_TESTS_PATFILE_H
#define BTRFSIMG_TESTS_PATFILE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "image/dev.h"

/* The byte at offset @i of every pattern file: it differs from its
 * neighbours and from the bytes 256 and 65536 away. */
static uint8_t pat(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull;
	return (uint8_t)(x >> 56) ^ (uint8_t)i;
}

/* A file of @size pattern bytes in @dir; its path (free it). */
static char *pattern_file(const char *dir, uint64_t size)
{
	char *path = malloc(4096);
	snprintf(path, 4096, "%s/btrfsimg-pat.XXXXXX", dir);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	uint8_t *b = malloc(1 << 16);
	for (uint64_t o = 0; o < size; o += 1 << 16) {
		size_t n = size - o < (1 << 16) ? (size_t)(size - o) : (1 << 16);
		for (size_t i = 0; i < n; i++)
			b[i] = pat(o + i);
		assert_int_equal(pwrite(fd, b, n, (off_t)o), (ssize_t)n);
	}
	free(b);
	close(fd);
	return path;
}

/* A plain-file device over @path whose filesystem starts at @base. */
static struct bi_dev file_dev(const char *path, uint64_t base)
{
	struct bi_dev d = { .name = (char *)path };
	d.fd = open(path, O_RDONLY);
	assert_true(d.fd >= 0);
	d.raw_size = (uint64_t)lseek(d.fd, 0, SEEK_END);
	d.base = base;
	d.size = d.raw_size - base;
	return d;
}

#endif
