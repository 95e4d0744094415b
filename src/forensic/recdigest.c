// SPDX-License-Identifier: MIT
/* btrfsimg_forensic_digest: a recovered version's bytes through an OpenSSL
 * digest as they stream (never the whole version at once), for deleted
 * --hash, bodyfile and DFXML in the CLI and Filesystem.deleted() alike. */
#include <errno.h>
#include <openssl/evp.h>

#include "btrfsimg_forensic.h"
#include "base/err.h"
#include "forensic/version.h"

static int digest_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	(void)off;
	return EVP_DigestUpdate(ctx, data, len) ? 0 : -ENOMEM;
}

int btrfsimg_forensic_digest(btrfsimg_forensic *f, const char *id, const char *alg, char *hex,
			     size_t hexlen)
{
	if (!f || !id)
		return -EINVAL;
	const EVP_MD *md = alg ? EVP_get_digestbyname(alg) : NULL;
	if (!md || !hex || hexlen < 2 * (size_t)EVP_MD_size(md) + 1)
		return bi_err(f->fs, -EINVAL, "recovered version digest: %s '%s'",
			      md ? "no room for the hex of" : "unknown digest", alg ? alg : "");
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, md, NULL)) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	int rc = btrfsimg_forensic_read(f, id, digest_piece, ctx);
	unsigned char out[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	if (rc >= 0 && !EVP_DigestFinal_ex(ctx, out, &n))
		rc = -ENOMEM;
	if (rc >= 0)
		btrfsimg_hex(out, n, hex, hexlen);
	EVP_MD_CTX_free(ctx);
	return rc;
}
