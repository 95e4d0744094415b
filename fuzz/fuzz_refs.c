// SPDX-License-Identifier: MIT
/*
 * INODE_REF and INODE_EXTREF walkers. Input: bytes 0-7 the INODE_REF key
 * offset (parent dir), the rest is the item, walked both as an INODE_REF
 * and as an INODE_EXTREF item to its end or first error. Every entry's
 * name must lie inside the item, be 1..255 bytes, and entries must tile
 * the item from 0 in order; the walk must end (position strictly grows).
 */
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const uint8_t *item, uint32_t n, uint64_t key_off, bool ext)
{
	struct bi_ref_entry e;
	uint32_t pos = 0, prev = 0;
	char why[256] = "";
	int rc;
	size_t hdr = ext ? EXTREF_SIZE : IREF_SIZE, count = 0;
	while ((rc = ext ? bi_extref_next(item, n, &pos, &e, why, sizeof(why))
			 : bi_iref_next(item, n, key_off, &pos, &e, why, sizeof(why))) > 0) {
		CHECK(pos > prev && pos <= n);
		CHECK(e.name_len >= 1 && e.name_len <= BI_NAME_MAX);
		CHECK(e.name == item + prev + hdr);
		CHECK(e.name + e.name_len == item + pos);
		CHECK(ext || e.parent == key_off);
		if (ext)
			CHECK(e.parent == bi_le64(item + prev + EXTREF_PARENT));
		prev = pos;
		count++;
	}
	CHECK(count <= n / (hdr + 1));
	if (rc < 0) {
		CHECK(rc == -EUCLEAN && why[0] && pos == prev);
		return;
	}
	CHECK(pos == n || (n == 0 && pos == 0));
	CHECK(ext || count >= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8 || size > 65536)
		return 0;
	uint64_t key_off = bi_le64(data);
	walk(data + 8, (uint32_t)(size - 8), key_off, false);
	walk(data + 8, (uint32_t)(size - 8), key_off, true);
	return 0;
}
