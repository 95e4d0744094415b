/* SPDX-License-Identifier: MIT */
/*
 * What the caller gives the volume layers before opening: a passphrase,
 * a volume key, a function that asks for a passphrase, the KDF limit, the
 * LV to use; and the life of the state on the handle that keeps them with
 * a scan's results. Apart from the stack's building (scan.c) because it
 * is the API a front end calls first, and the one place secrets are
 * copied in and wiped out.
 *
 * Secrets (passphrase, volume key) live only in bi_vols and OpenSSL's
 * cipher contexts; they are wiped when the handle is freed and never
 * enter a message or a layer row.
 */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "volume/stack.h"
#include "volume/vol.h"

#include "base/err.h"
#include "base/handle.h"

struct bi_vols *bi_vols_get(struct btrfsimg_fs *fs)
{
	if (!fs->vols)
		fs->vols = calloc(1, sizeof(struct bi_vols));
	return fs->vols;
}

void bi_vols_wipe(uint8_t *p, size_t n)
{
	if (p)
		OPENSSL_cleanse(p, n);
	free(p);
}

void bi_vols_reset(struct bi_vols *V)
{
	for (size_t i = 0; i < V->nv; i++) {
		bi_cipher_free(V->v[i]->cipher);
		free(V->v[i]->luks);
		free(V->v[i]->pnote);
		free(V->v[i]);
	}
	if (V->seen)
		OPENSSL_cleanse(V->seen, V->nseen * sizeof(*V->seen));
	free(V->seen);
	V->seen = NULL;
	V->nseen = V->seen_cap = 0;
	for (size_t i = 0; i < V->npv; i++)
		free(V->pv[i].text);
	for (size_t i = 0; i < V->nvg; i++) {
		bi_lvm_vg_free(&V->vg[i].vg);
		free(V->vg[i].pv);
	}
	free(V->v);
	free(V->pv);
	free(V->vg);
	free(V->btrfs);
	free(V->rows);
	V->v = NULL;
	V->pv = NULL;
	V->vg = NULL;
	V->btrfs = NULL;
	V->rows = NULL;
	V->nv = V->npv = V->nvg = V->nbtrfs = V->nrows = V->rows_cap = 0;
	V->v_cap = V->pv_cap = V->vg_cap = V->btrfs_cap = 0;
	V->layered = V->scanned = V->rows_full = false;
	V->mda_read = 0;
	V->mda_skipped = 0;
	V->locked[0] = V->broken[0] = '\0';
}

void bi_vols_free(struct btrfsimg_fs *fs)
{
	struct bi_vols *V = fs->vols;
	if (!V)
		return;
	bi_vols_reset(V);
	for (int i = 0; i < BI_FOUND_MAX; i++)
		free(V->found[i]);
	bi_vols_wipe(V->pass, V->plen);
	bi_vols_wipe(V->vkey, V->vklen);
	free(V->select);
	free(V);
	fs->vols = NULL;
}

static int set_secret(btrfsimg_fs *fs, uint8_t **dst, size_t *dlen, const void *p, size_t len)
{
	if (!fs || (!p && len) || len > PASS_MAX || fs->opened)
		return -EINVAL;
	struct bi_vols *V = bi_vols_get(fs);
	uint8_t *c = malloc(len ? len : 1);
	if (!V || !c) {
		free(c);
		return bi_err(fs, -ENOMEM, "out of memory keeping a key");
	}
	if (len)
		memcpy(c, p, len);
	bi_vols_wipe(*dst, *dlen);
	*dst = c;
	*dlen = len;
	return 0;
}

int btrfsimg_set_passphrase(btrfsimg_fs *fs, const void *pass, size_t len)
{
	if (!fs || (!pass && len) || len > PASS_MAX || fs->opened || !bi_vols_get(fs))
		return -EINVAL;
	int rc = set_secret(fs, &fs->vols->pass, &fs->vols->plen, pass, len);
	if (rc == 0)
		fs->vols->have_pass = true;
	return rc;
}

int btrfsimg_set_volume_key(btrfsimg_fs *fs, const void *key, size_t len)
{
	if (!fs || !key || len == 0 || len > BI_LUKS_KEY_MAX || fs->opened || !bi_vols_get(fs))
		return -EINVAL;
	return set_secret(fs, &fs->vols->vkey, &fs->vols->vklen, key, len);
}

int btrfsimg_set_passphrase_fn(btrfsimg_fs *fs, btrfsimg_passphrase_fn fn, void *ctx)
{
	if (!fs || fs->opened || !bi_vols_get(fs))
		return -EINVAL;
	fs->vols->ask = fn;
	fs->vols->ask_ctx = ctx;
	return 0;
}

int btrfsimg_set_kdf_limit(btrfsimg_fs *fs, uint32_t ms)
{
	if (!fs || fs->opened || ms > BTRFSIMG_KDF_LIMIT_MAX_MS || !bi_vols_get(fs))
		return -EINVAL;
	fs->vols->kdf_ms = ms;
	return 0;
}

int btrfsimg_select_volume(btrfsimg_fs *fs, const char *name)
{
	if (!fs || fs->opened || !bi_vols_get(fs) || (name && !strchr(name, '/')))
		return -EINVAL;
	char *c = name ? strdup(name) : NULL;
	if (name && !c)
		return -ENOMEM;
	free(fs->vols->select);
	fs->vols->select = c;
	return 0;
}
