// SPDX-License-Identifier: MIT
/* Caller-sized options structs (sized.h). */
#include <errno.h>
#include <string.h>

#include "base/sized.h"

int bi_take_sized(const void *in, void *mine, size_t mine_size, size_t *bad)
{
	memset(mine, 0, mine_size);
	if (!in)
		return 0;
	size_t size;
	memcpy(&size, in, sizeof(size));
	if (size < sizeof(size)) {
		*bad = size;
		return -EINVAL;
	}
	size_t known = size < mine_size ? size : mine_size;
	const unsigned char *newer = in;
	for (size_t i = known; i < size; i++)
		if (newer[i]) {
			*bad = i; /* a field this library does not know, set */
			return -EINVAL;
		}
	memcpy(mine, in, known);
	return 0;
}
