/* SPDX-License-Identifier: MIT */
/*
 * Keys: (objectid, type, offset), ordered field by field.
 */
#ifndef BI_KEY_H
#define BI_KEY_H

#include <stdint.h>

#include "btrfsimg.h"
#include "base/cursor.h"

typedef struct btrfsimg_key bi_key;

static inline int bi_key_cmp(const bi_key *a, const bi_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

/* A disk key: 17 bytes at @p, already bounds-checked by the caller. */
static inline void bi_key_read(const uint8_t *p, bi_key *k)
{
	k->objectid = bi_le64(p);
	k->type = p[8];
	k->offset = bi_le64(p + 9);
}

#endif
