// SPDX-License-Identifier: MIT
/*
 * INODE_ITEM parser. Input: byte 0 picks the generation bound (0: none,
 * else b * 4), the rest is the item. On success the item must be exactly
 * 160 bytes, every decoded field must equal the bytes at its offset, and
 * the rules the parser promises (file type, directory nlink, known flags,
 * generation bound) must hold. On failure the reason must be set.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	uint64_t max_gen = (uint64_t)data[0] * 4;
	const uint8_t *item = data + 1;
	uint32_t n = (uint32_t)(size - 1);
	struct btrfsimg_inode o;
	char why[256] = "";
	int rc = bi_inode_parse(item, n, 5, 300, max_gen, &o, why, sizeof(why));
	if (rc < 0) {
		CHECK(rc == -EUCLEAN && why[0]);
		return 0;
	}
	CHECK(rc == 0 && n == INODE_ITEM_SIZE);
	CHECK(o.subvol == 5 && o.objectid == 300);
	CHECK(o.generation == bi_le64(item + INODE_GENERATION));
	CHECK(o.size == bi_le64(item + INODE_SIZE_OFF));
	CHECK(o.mode == bi_le32(item + INODE_MODE) && o.nlink == bi_le32(item + INODE_NLINK));
	CHECK(o.otime.sec == (int64_t)bi_le64(item + INODE_OTIME));
	CHECK(o.otime.nsec == bi_le32(item + INODE_OTIME + 8));
	CHECK(!max_gen || (o.generation <= max_gen && o.transid <= max_gen));
	CHECK((o.mode & ~(uint32_t)(S_IFMT | 07777)) == 0);
	CHECK(S_ISREG(o.mode) || S_ISDIR(o.mode) || S_ISLNK(o.mode) || S_ISCHR(o.mode) ||
	      S_ISBLK(o.mode) || S_ISFIFO(o.mode) || S_ISSOCK(o.mode));
	CHECK(!S_ISDIR(o.mode) || o.nlink <= 1);
	CHECK(((o.flags & 0xffffffffull) & ~BI_INODE_FLAG_MASK) == 0);
	return 0;
}
