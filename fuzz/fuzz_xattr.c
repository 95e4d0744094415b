// SPDX-License-Identifier: MIT
/*
 * XATTR_ITEM walker and whole-item check. Input: the item. It is checked
 * with key offset = the name hash of its first entry and with 0. Every
 * entry returned must have an all-zero location, type FT_XATTR, a name of
 * 1..255 bytes and a value that lie inside the item, entries tiling it in
 * order; when the check passes every name hashes to the key offset and
 * the count matches the walk.
 */
#include <stdlib.h>
#include <string.h>

#include "base/csum.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	uint32_t n = (uint32_t)size, pos = 0, prev = 0;
	struct bi_dir_entry e;
	char why[256] = "";
	int rc, count = 0;
	uint64_t h = 0;
	while ((rc = bi_dir_item_next(data, n, KT_XATTR_ITEM, &pos, &e, why, sizeof(why))) > 0) {
		CHECK(e.offset == prev && pos > prev && pos <= n);
		CHECK(e.location.objectid == 0 && e.location.type == 0 && e.location.offset == 0);
		CHECK(e.type == FT_XATTR && e.name_len >= 1 && e.name_len <= 255);
		CHECK(e.name == data + prev + DI_SIZE && e.data == e.name + e.name_len);
		CHECK(e.data + e.data_len == data + pos);
		if (count++ == 0)
			h = bi_name_hash(e.name, e.name_len);
		prev = pos;
	}
	CHECK(rc <= 0);
	if (rc < 0)
		CHECK(rc == -EUCLEAN && why[0] && pos == prev);
	bi_key k = { 257, KT_XATTR_ITEM, h };
	for (int pass = 0; pass < 2; pass++, k.offset = 0) {
		int c = bi_dir_item_check(data, n, &k, why, sizeof(why));
		if (c < 0) {
			CHECK(c == -EUCLEAN && why[0]);
			continue;
		}
		CHECK(rc == 0 && c == count);
		uint32_t p = 0;
		while (bi_dir_item_next(data, n, KT_XATTR_ITEM, &p, &e, NULL, 0) > 0)
			CHECK(bi_name_hash(e.name, e.name_len) == k.offset);
	}
	return 0;
}
