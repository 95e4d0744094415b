// SPDX-License-Identifier: MIT
#include "common/digest.h"

#include <errno.h>
#include <openssl/evp.h>

void hex_of(const unsigned char *d, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = '\0';
}

void digest_hex(const char *alg, const void *data, size_t len, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_Digest(data, len, md, &n, EVP_get_digestbyname(alg), NULL);
	hex_of(md, n, out);
}

int digest_file(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t size, const char *alg,
		char *out)
{
	return btrfsimg_file_digest(fs, subvol, objectid, size, alg, out, 2 * EVP_MAX_MD_SIZE + 1);
}
