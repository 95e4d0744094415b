// SPDX-License-Identifier: MIT
/* btrfsimg_hex: bytes as lowercase hex, the one form in which digests,
 * file handles and checksums are printed (library, CLI and binding alike). */
#include <errno.h>

#include "btrfsimg.h"

int btrfsimg_hex(const void *data, size_t len, char *hex, size_t hexlen)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *d = data;
	if (!hex || (len && !data) || hexlen == 0 || len > (hexlen - 1) / 2)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[2 * len] = '\0';
	return 0;
}
