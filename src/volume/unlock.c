/* SPDX-License-Identifier: MIT */
/*
 * The volume key of a LUKS header: from the volume key given, else from
 * the passphrase (given, or asked for once through the callback) through
 * the keyslots, within the scan's KDF budget. A header met again at the
 * same place of an image (128 GPT entries pointing at one LUKS partition)
 * costs one derivation: its outcome is remembered for the scan, the key
 * wiped with it (bi_vols_reset).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/stack.h"

#include "base/err.h"
#include "base/grow.h"
#include "base/handle.h"

/* The passphrase: given, or asked for once through the callback. */
static bool have_pass(struct btrfsimg_fs *fs, const char *what)
{
	struct bi_vols *V = fs->vols;
	if (V->have_pass || !V->ask)
		return V->have_pass;
	uint8_t *buf = malloc(PASS_MAX);
	if (!buf)
		return false;
	int n = V->ask(V->ask_ctx, what, buf, PASS_MAX);
	if (n >= 0 && (size_t)n <= PASS_MAX) {
		V->pass = buf;
		V->plen = (size_t)n;
		V->have_pass = true;
		return true;
	}
	bi_vols_wipe(buf, PASS_MAX);
	V->ask = NULL; /* asked once; the user declined */
	return false;
}

/* The header at the start of @v, if an image window already probed: the
 * same bytes, so the same outcome. */
static struct luks_seen *seen_find(struct bi_vols *V, const struct bi_vol *v)
{
	for (size_t i = 0; v->kind == V_IMAGE && i < V->nseen; i++)
		if (V->seen[i].img == v->img && V->seen[i].base == v->base)
			return &V->seen[i];
	return NULL;
}

static void seen_add(struct bi_vols *V, const struct bi_vol *v, int rc, int slot, const uint8_t *vk,
		     size_t vklen, const char *err)
{
	if (v->kind != V_IMAGE || V->nseen >= ROWS_MAX ||
	    bi_grow((void **)&V->seen, &V->seen_cap, V->nseen + 1, sizeof(*V->seen)))
		return; /* not remembered: probed again, within the KDF budget */
	struct luks_seen *a = &V->seen[V->nseen++];
	*a = (struct luks_seen){
		.img = v->img, .base = v->base, .partition = v->partition, .rc = rc, .slot = slot
	};
	if (rc > 0)
		memcpy(a->vk, vk, vklen);
	snprintf(a->err, sizeof(a->err), "%s", err);
}

/* A LUKS header seen before at the same place (another partition entry
 * pointing there): its outcome, without deriving a key again. */
static int luks_key_seen(struct btrfsimg_fs *fs, const struct luks_seen *h, const char *what, int r,
			 uint8_t *vk)
{
	struct bi_vols *V = fs->vols;
	char same[80] = "";
	if (h->partition)
		snprintf(same, sizeof(same), " (the header of partition %d: not derived again)",
			 h->partition);
	char note[560];
	if (h->rc > 0 && h->slot >= 0)
		snprintf(note, sizeof(note), "; opened with keyslot %d%s", h->slot, same);
	else if (h->rc > 0)
		snprintf(note, sizeof(note), "; opened with the volume key%s", same);
	else
		snprintf(note, sizeof(note), "; locked%s: %s", same, h->err);
	bi_vols_row_note(V, r, "%s", note);
	if (h->rc > 0) {
		memcpy(vk, h->vk, sizeof(h->vk));
		return 1;
	}
	if (!V->locked[0])
		snprintf(V->locked, sizeof(V->locked), "%.120s (%.170s)", what, h->err);
	return 0;
}

int bi_vols_luks_key(struct btrfsimg_fs *fs, struct bi_vol *v, const struct bi_luks *l, int r,
		     uint8_t *vk)
{
	struct bi_vols *V = fs->vols;
	char err[400] = "", what[260];
	struct bi_vol_reader c = { fs, v };
	int rc;
	snprintf(what, sizeof(what), "%s (LUKS%d %s)", v->name, l->version, l->uuid);
	struct luks_seen *h = (V->vkey || V->have_pass) ? seen_find(V, v) : NULL;
	if (h)
		return luks_key_seen(fs, h, what, r, vk);
	if (V->vkey) {
		rc = bi_luks_check_key(l, V->vkey, V->vklen, &V->kdf, err, sizeof(err));
		if (rc == 0)
			memcpy(vk, V->vkey, V->vklen);
	} else if (have_pass(fs, what)) {
		rc = bi_luks_unlock(l, bi_vol_read_at, &c, V->pass, V->plen, &V->kdf, vk, err,
				    sizeof(err));
		if (rc >= 0) {
			char n[16];
			snprintf(n, sizeof(n), "%d", rc);
			bi_vols_row_note(V, r, "; opened with keyslot %s", n);
			bi_info(fs, "%s: opened with keyslot %d", what, rc);
		}
	} else {
		if (!V->locked[0])
			snprintf(V->locked, sizeof(V->locked), "%s", what);
		bi_vols_row_note(V, r, "%s", "; locked (no passphrase or volume key given)");
		return 0;
	}
	if (rc < 0 && !err[0]) /* a read failed: its message is on the handle */
		snprintf(err, sizeof(err), "%.390s", fs->err);
	if (!V->strict || rc >= 0)
		seen_add(V, v, rc >= 0, V->vkey ? -1 : rc, vk, l->key_bytes, err);
	if (rc >= 0)
		return 1;
	if (V->strict)
		return bi_err(fs, rc == -E2BIG ? -EOPNOTSUPP : rc, "%s: %s", what, err);
	bi_vols_row_note(V, r, "; locked: %s", err);
	if (!V->locked[0])
		snprintf(V->locked, sizeof(V->locked), "%s (%s)", what, err);
	return 0;
}
