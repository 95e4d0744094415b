// SPDX-License-Identifier: MIT
/*
 * --generation N: open the filesystem as generation N's root tree saw it.
 *
 * The open (btrfs/open.c) takes N's root from the superblock in use or
 * one of its backup roots. Older generations are found as `history` finds
 * them: a scan of the devices for tree blocks (block_scan.c), then the root
 * chosen as genroot.c says. The scan runs here, above
 * the open, reached through fs->gen_scan, so the btrfs core never calls
 * up a layer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/block_scan.h"

#include "base/err.h"

/* "3, 5, 8" (the first few and the last) into @buf. */
static void list_gens(char *buf, size_t len, const uint64_t *g, size_t n)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++) {
		if (n > 12 && i == 10) {
			at += (size_t)snprintf(buf + at, len - at, ", ...");
			i = n - 1;
		}
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%" PRIu64, at ? ", " : "",
					       g[i]);
	}
	if (n == 0)
		snprintf(buf, len, "none");
}

static int scan_for_root(struct btrfsimg_fs *fs, uint64_t gen, struct bi_root *out)
{
	btrfsimg_forensic *f = NULL;
	/* the scan reads devices through the chunk map, which is loaded; the
	 * root tree is not used by it */
	fs->opened = true;
	int rc = btrfsimg_forensic_scan(fs, NULL, NULL, &f);
	fs->opened = false;
	if (rc < 0)
		return rc;
	uint64_t *gens = NULL;
	size_t ngens = 0;
	char how[128] = "";
	rc = bi_fx_generations(f, &gens, &ngens);
	if (rc == 0)
		rc = bi_fx_pick_root(f, gen, out, how, sizeof(how), true);
	if (rc == 0) {
		snprintf(fs->gen_how, sizeof(fs->gen_how), "root tree at logical %" PRIu64 " (%s)",
			 out->bytenr, how);
	} else if (rc == -ENOENT) {
		char list[200];
		list_gens(list, sizeof(list), gens, ngens);
		bi_err(fs, rc, "generation %" PRIu64 ": no root tree found (%s); history lists: %s",
		       gen, how, list);
	} else {
		bi_err(fs, rc, "generation %" PRIu64 ": out of memory", gen);
	}
	free(gens);
	btrfsimg_forensic_free(f);
	return rc;
}

int btrfsimg_set_generation(btrfsimg_fs *fs, uint64_t transid)
{
	if (!fs)
		return -EINVAL;
	if (fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_set_generation: the filesystem is open");
	fs->want_gen = transid;
	fs->gen_scan = transid ? scan_for_root : NULL;
	return 0;
}

const char *btrfsimg_generation_root(const btrfsimg_fs *fs, uint64_t *transid)
{
	if (!fs || !fs->opened || !fs->want_gen)
		return NULL;
	if (transid)
		*transid = fs->want_gen;
	return fs->gen_how;
}
