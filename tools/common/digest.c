// SPDX-License-Identifier: MIT
#include "common/digest.h"

#include <errno.h>
#include <openssl/evp.h>

void digest_hex(const char *alg, const void *data, size_t len, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_Digest(data, len, md, &n, EVP_get_digestbyname(alg), NULL);
	btrfsimg_hex(md, n, out, 2 * (size_t)n + 1);
}

int digest_file(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t size, const char *alg,
		char *out)
{
	return btrfsimg_file_digest(fs, subvol, objectid, size, alg, out, 2 * EVP_MAX_MD_SIZE + 1);
}
