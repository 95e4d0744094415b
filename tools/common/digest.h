/* SPDX-License-Identifier: MIT */
/* Digests the CLI prints (sha256, md5) over file contents and xattrs. */
#ifndef BTRFSIMG_TOOLS_DIGEST_H
#define BTRFSIMG_TOOLS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"

/* Hex digest of a buffer: out holds 2 * digest size + 1 bytes. */
void digest_hex(const char *alg, const void *data, size_t len, char *out);
/* Hex digest of a regular file's first @size bytes: btrfsimg_file_digest. */
int digest_file(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t size,
		const char *alg, char *out);

#endif
