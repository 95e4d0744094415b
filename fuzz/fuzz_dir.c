// SPDX-License-Identifier: MIT
/*
 * DIR_ITEM / DIR_INDEX walker and whole-item check. Input: byte 0 even =
 * DIR_ITEM, odd = DIR_INDEX; the rest is the item. The item is checked
 * twice: with key offset = the name hash of its first entry (so colliding
 * chains can pass) and with 0. Every entry returned must lie inside the
 * item with its name (1..255 bytes) and no data, a valid type and a
 * location the kernel accepts; entries tile the item in order; when the
 * check passes it counts what the walk saw and every DIR_ITEM name hashes
 * to the key offset.
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

static int walk(const uint8_t *item, uint32_t n, uint8_t type, uint64_t *first_hash)
{
	struct bi_dir_entry e;
	uint32_t pos = 0, prev = 0;
	char why[256] = "";
	int rc, count = 0;
	while ((rc = bi_dir_item_next(item, n, type, &pos, &e, why, sizeof(why))) > 0) {
		CHECK(e.offset == prev && pos > prev && pos <= n);
		CHECK(e.name == item + prev + DI_SIZE && e.name_len >= 1 && e.name_len <= 255);
		CHECK(e.data_len == 0 && e.data == e.name + e.name_len && e.data == item + pos);
		CHECK(e.type >= FT_REG_FILE && e.type <= FT_SYMLINK);
		CHECK(e.location.type == KT_INODE_ITEM || e.location.type == KT_ROOT_ITEM ||
		      e.location.type == 0);
		if (count == 0)
			*first_hash = bi_name_hash(e.name, e.name_len);
		prev = pos;
		count++;
	}
	if (rc < 0) {
		CHECK(rc == -EUCLEAN && why[0] && pos == prev);
		return -1;
	}
	CHECK(pos == n);
	return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	uint8_t type = data[0] & 1 ? KT_DIR_INDEX : KT_DIR_ITEM;
	const uint8_t *item = data + 1;
	uint32_t n = (uint32_t)(size - 1);
	uint64_t h = 0;
	int count = walk(item, n, type, &h);
	char why[256] = "";
	bi_key k = { 256, type, h };
	for (int pass = 0; pass < 2; pass++, k.offset = 0) {
		int rc = bi_dir_item_check(item, n, &k, why, sizeof(why));
		if (rc < 0) {
			CHECK(rc == -EUCLEAN && why[0]);
			continue;
		}
		CHECK(rc == count && count >= 1);
		struct bi_dir_entry e;
		uint32_t pos = 0;
		while (type == KT_DIR_ITEM && bi_dir_item_next(item, n, type, &pos, &e, NULL, 0) > 0)
			CHECK(bi_name_hash(e.name, e.name_len) == k.offset);
	}
	return 0;
}
