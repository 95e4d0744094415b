// SPDX-License-Identifier: MIT
#include "digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>

#define CHUNK (1u << 20)

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

int digest_file(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t size,
		const char *alg, char *out)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = malloc(CHUNK);
	int rc = (ctx && buf) ? 0 : -ENOMEM;
	if (rc == 0 && !EVP_DigestInit_ex(ctx, EVP_get_digestbyname(alg), NULL))
		rc = -EINVAL;
	for (uint64_t off = 0; rc == 0 && off < size;) {
		size_t got = 0;
		rc = btrfsimg_file_read(fs, subvol, objectid, off, buf, CHUNK, &got);
		if (rc == 0 && got == 0)
			break;
		if (rc == 0)
			EVP_DigestUpdate(ctx, buf, got);
		off += got;
	}
	if (rc == 0) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned n = 0;
		EVP_DigestFinal_ex(ctx, md, &n);
		hex_of(md, n, out);
	}
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}
