// SPDX-License-Identifier: MIT
/*
 * Salvage of what tree blocks cannot tell (bi_salvage_stripes, see
 * salvage.h): the order of a striped data chunk's stripes rebuilt from
 * device extents (a DEV_EXTENT names its chunk and its place on its device,
 * not its stripe index), and which of two superblock-less devices is which
 * when mirrored stripes put their tree blocks alike (raid10's pairs). Data
 * chunks hold no tree block; their evidence is the data checksums of the
 * csum tree, read once the trees read: an order or an assignment is taken
 * when more sampled sectors verify through it than through any other.
 * Past six stripes (7! orders and more) a chunk is not searched but placed
 * one stripe at a time by votes (bi_salvage_order_by_votes): each sample
 * that verifies on a device votes for the index its address gives.
 *
 * Apart from salvage_chunks.c because it runs later, above a working map
 * and root tree, and reads data, not tree blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage.h"

#include "base/csum.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "image/dev.h"

/* checksummed sectors sampled per chunk, each from another 64 KiB stripe */
#define SAMPLES 48
/* stripe orders tried in full up to this many stripes (6! = 720) */
#define MAX_ORDERED 6

struct sample {
	uint64_t logical;
	uint8_t csum[CSUM_SIZE_MAX];
};

struct chunk_samples {
	struct bi_chunk *c; /* the map's own, reordered in place */
	struct sample v[SAMPLES];
	size_t n;
	bool unsure;
};

int bi_salvage_note_unsure(struct btrfsimg_fs *fs, uint64_t logical)
{
	uint64_t *v = realloc(fs->salvage_unsure, (fs->nsalvage_unsure + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	v[fs->nsalvage_unsure++] = logical;
	fs->salvage_unsure = v;
	return 0;
}

static bool striped_data(const struct bi_chunk *c)
{
	return (c->type & BG_DATA) &&
	       (bi_chunk_profile(c) & (BG_RAID0 | BG_RAID10 | BG_RAID5 | BG_RAID6));
}

/* Up to SAMPLES sectors of @cs->c with their checksums, from the csum
 * items that start inside the chunk, one per 64 KiB stripe. */
static int take_samples(struct btrfsimg_fs *fs, const struct bi_root *csum_root,
			struct chunk_samples *cs)
{
	const struct bi_chunk *c = cs->c;
	bi_key min = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, c->logical };
	bi_key max = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, c->logical + c->length - 1 };
	struct bi_iter it;
	struct bi_item item;
	uint64_t last_stripe = UINT64_MAX;
	int rc = bi_iter_start(fs, &it, csum_root, &min, &max);
	while (rc == 0 && cs->n < SAMPLES && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		for (uint32_t k = 0; (k + 1) * fs->csum_size <= item.size && cs->n < SAMPLES; k++) {
			uint64_t logical = item.key.offset + (uint64_t)k * fs->sectorsize;
			if (logical - c->logical >= c->length)
				break;
			uint64_t stripe = (logical - c->logical) / c->stripe_len;
			if (stripe == last_stripe)
				continue;
			last_stripe = stripe;
			cs->v[cs->n].logical = logical;
			memset(cs->v[cs->n].csum, 0, CSUM_SIZE_MAX);
			memcpy(cs->v[cs->n].csum, item.data + (size_t)k * fs->csum_size, fs->csum_size);
			cs->n++;
		}
	}
	bi_iter_end(&it);
	return rc;
}

/* Whether the sector at @physical of the device stripe @st names holds
 * the bytes of sample @x (its checksum verifies). */
static bool sector_verifies(struct btrfsimg_fs *fs, const struct bi_stripe *st,
			    uint64_t physical, const struct sample *x, uint8_t *buf)
{
	uint8_t sum[CSUM_SIZE_MAX] = { 0 };
	const struct bi_dev *d = bi_dev_by_id(fs, st->devid);
	return d && memcmp(d->dev_uuid, st->dev_uuid, 16) == 0 &&
	       bi_dev_read(fs, d, physical, buf, fs->sectorsize) == 0 &&
	       bi_csum(fs->csum_type, buf, fs->sectorsize, sum) == 0 &&
	       memcmp(sum, x->csum, CSUM_SIZE_MAX) == 0;
}

/* How many samples verify when read through @c as it stands. */
static size_t verified(struct btrfsimg_fs *fs, const struct chunk_samples *cs, uint8_t *buf)
{
	size_t n = 0;
	for (size_t i = 0; i < cs->n; i++) {
		struct bi_phys p;
		if (bi_chunk_map_phys(cs->c, cs->v[i].logical, 0, &p) == 0)
			n += sector_verifies(fs, &cs->c->stripes[p.stripe], p.physical, &cs->v[i], buf);
	}
	return n;
}

bool bi_salvage_next_order(uint16_t *v, size_t n)
{
	size_t i = n - 1;
	while (i > 0 && v[i - 1] >= v[i])
		i--;
	if (i == 0)
		return false;
	size_t j = n - 1;
	while (v[j] <= v[i - 1])
		j--;
	uint16_t t = v[i - 1];
	v[i - 1] = v[j];
	v[j] = t;
	for (size_t a = i, b = n - 1; a < b; a++, b--) {
		t = v[a];
		v[a] = v[b];
		v[b] = t;
	}
	return true;
}

bool bi_salvage_extent_holds(struct bi_chunk *c, uint16_t j, uint16_t k, uint64_t physical,
			     uint64_t logical)
{
	struct bi_stripe was = c->stripes[k];
	uint64_t at, len;
	c->stripes[k] = c->stripes[j];
	int rc = bi_chunk_map_reverse(c, k, physical, &at, &len);
	c->stripes[k] = was;
	return rc == 0 && at == logical;
}

/* Indices @a and @b read the same bytes (raid10's mirror pairs). */
static bool mirrors(const struct bi_chunk *c, uint16_t a, uint16_t b)
{
	return a == b || ((bi_chunk_profile(c) & BG_RAID10) && a / 2 == b / 2);
}

/* The free (extent, index) pair with the most votes: its count, 0 when
 * none has any; *tie when another extent has as many for that index (more
 * than its raid10 mirror). */
static uint32_t top_pair(const struct bi_chunk *c, const struct bi_sv_votes *v,
			 const bool *used, const int *at, uint16_t *bj, uint16_t *bk, bool *tie)
{
	uint32_t most = 0;
	uint16_t n = c->num_stripes;
	for (uint16_t j = 0; j < n; j++)
		for (uint16_t k = 0; k < n; k++)
			if (!used[j] && at[k] < 0 && v->v[j][k] > most) {
				most = v->v[j][k];
				*bj = j;
				*bk = k;
			}
	/* raid10: the other extent of a mirror pair ties by right while the
	 * pair's other index is free */
	unsigned equal = 0, allowed = (bi_chunk_profile(c) & BG_RAID10) && (*bk ^ 1u) < n &&
				      at[*bk ^ 1u] < 0;
	for (uint16_t j = 0; most && j < n; j++)
		equal += !used[j] && j != *bj && v->v[j][*bk] == most;
	*tie = equal > allowed;
	return most;
}

void bi_salvage_order_by_votes(struct bi_chunk *c, const struct bi_sv_votes *v,
			       struct bi_sv_order *out)
{
	uint16_t n = c->num_stripes;
	int at[BI_SV_MAX_WIDE];
	bool used[BI_SV_MAX_WIDE] = { false };
	*out = (struct bi_sv_order){ 0 };
	if (n > BI_SV_MAX_WIDE)
		return;
	for (uint16_t k = 0; k < n; k++)
		at[k] = -1;
	uint16_t bj = 0, bk = 0;
	bool tie = false;
	uint32_t most;
	while ((most = top_pair(c, v, used, at, &bj, &bk, &tie)) > 0 && !tie) {
		at[bk] = bj;
		used[bj] = true;
		out->decided++;
	}
	out->refused = tie;
	if (!tie && out->decided + 1 == n) /* the one left goes where the one gap is */
		out->decided++;
	for (uint16_t k = 0, j = 0; k < n; k++) { /* the rest as they stood */
		while (at[k] < 0 && used[j])
			j++;
		if (at[k] < 0) {
			at[k] = j;
			used[j] = true;
		}
	}
	struct bi_stripe was[BI_SV_MAX_WIDE];
	memcpy(was, c->stripes, n * sizeof(*was));
	for (uint16_t k = 0; k < n; k++)
		c->stripes[k] = was[at[k]];
	for (uint16_t k = 0; k < n; k++)
		for (uint16_t j = 0; j < n; j++) {
			bool taken = false; /* extent j sits at k or at a mirror of k */
			for (uint16_t m = 0; m < n; m++)
				taken |= at[m] == j && mirrors(c, k, m);
			*(taken ? &out->votes : &out->against) += v->v[j][k];
		}
}

/* Sample @x votes for each extent of @c whose sector at the sample's
 * place inside its stripe verifies: for the index (both of a raid10
 * pair) the sample's logical address gives. */
static void sample_votes(struct btrfsimg_fs *fs, struct bi_chunk *c, const struct sample *x,
			 uint8_t *buf, struct bi_sv_votes *v)
{
	struct bi_phys p0, p1;
	if (bi_chunk_map_phys(c, x->logical, 0, &p0) < 0)
		return;
	bool pair = (bi_chunk_profile(c) & BG_RAID10) && bi_chunk_map_phys(c, x->logical, 1, &p1) == 0;
	uint64_t inside = p0.physical - c->stripes[p0.stripe].offset;
	for (uint16_t j = 0; j < c->num_stripes; j++) {
		if (!sector_verifies(fs, &c->stripes[j], c->stripes[j].offset + inside, x, buf))
			continue;
		v->v[j][p0.stripe]++;
		if (pair)
			v->v[j][p1.stripe]++;
	}
}

/* A chunk too wide for every order to be tried: placed one stripe at a
 * time by the samples that verify on each extent (bi_salvage_order_by_votes);
 * *refused when two extents are as well voted for one index. */
static size_t wide_order(struct btrfsimg_fs *fs, struct chunk_samples *cs, uint8_t *buf,
			 bool apply, struct bi_sv_order *o)
{
	struct bi_chunk *c = cs->c;
	struct bi_sv_votes *v = calloc(1, sizeof(*v));
	struct bi_stripe was[BI_SV_MAX_WIDE];
	*o = (struct bi_sv_order){ 0 };
	if (!v || c->num_stripes > BI_SV_MAX_WIDE) {
		free(v);
		return verified(fs, cs, buf);
	}
	memcpy(was, c->stripes, c->num_stripes * sizeof(*was));
	for (size_t i = 0; i < cs->n; i++)
		sample_votes(fs, c, &cs->v[i], buf, v);
	bi_salvage_order_by_votes(c, v, o);
	size_t got = verified(fs, cs, buf);
	if (!apply)
		memcpy(c->stripes, was, c->num_stripes * sizeof(*was));
	free(v);
	return got;
}

/* The stripe order of an unsure chunk under which the most samples
 * verify (the present one on a tie), applied when @apply; its count. */
static size_t best_order(struct btrfsimg_fs *fs, struct chunk_samples *cs, uint8_t *buf,
			 bool apply)
{
	struct bi_chunk *c = cs->c;
	size_t n = c->num_stripes;
	if (cs->unsure && n > MAX_ORDERED && cs->n > 0) {
		struct bi_sv_order o;
		return wide_order(fs, cs, buf, apply, &o);
	}
	size_t most = verified(fs, cs, buf);
	if (!cs->unsure || n > MAX_ORDERED || cs->n == 0)
		return most;
	struct bi_stripe orig[MAX_ORDERED], best[MAX_ORDERED];
	uint16_t v[MAX_ORDERED];
	memcpy(orig, c->stripes, n * sizeof(*orig));
	memcpy(best, orig, n * sizeof(*best));
	for (size_t k = 0; k < n; k++)
		v[k] = (uint16_t)k;
	while (bi_salvage_next_order(v, n)) {
		for (size_t k = 0; k < n; k++)
			c->stripes[k] = orig[v[k]];
		size_t got = verified(fs, cs, buf);
		if (got > most) {
			most = got;
			memcpy(best, c->stripes, n * sizeof(*best));
		}
	}
	memcpy(c->stripes, apply ? best : orig, n * sizeof(*best));
	return most;
}

static size_t total(struct btrfsimg_fs *fs, struct chunk_samples *v, size_t n, uint8_t *buf)
{
	size_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += best_order(fs, &v[i], buf, false);
	return sum;
}

static void swap_devids(struct bi_dev *a, struct bi_dev *b)
{
	uint64_t id = a->devid;
	uint8_t u[16];
	a->devid = b->devid;
	b->devid = id;
	memcpy(u, a->dev_uuid, 16);
	memcpy(a->dev_uuid, b->dev_uuid, 16);
	memcpy(b->dev_uuid, u, 16);
}

/* Device @a takes @devid: from the device that holds it (a swap), or free
 * (its uuid that of the DEV_ITEM). */
static void move_devid(struct btrfsimg_fs *fs, struct bi_dev *a, uint64_t devid)
{
	for (size_t j = 0; j < fs->ndevs; j++)
		if (fs->devs[j].member && fs->devs[j].devid == devid) {
			swap_devids(a, &fs->devs[j]);
			return;
		}
	a->devid = devid;
	for (size_t i = 0; i < fs->ndevitems; i++)
		if (fs->devitems[i].devid == devid)
			memcpy(a->dev_uuid, fs->devitems[i].uuid, 16);
}

/* Each device whose tree blocks sit as well under another devid: moved
 * there when more samples verify so. */
static void decide_ties(struct btrfsimg_fs *fs, struct chunk_samples *v, size_t n, uint8_t *buf)
{
	for (size_t t = 0; t < fs->nsalvage_ties; t++) {
		struct bi_dev *a = &fs->devs[fs->salvage_ties[t][0]];
		uint64_t was = a->devid, other = fs->salvage_ties[t][1];
		size_t now = total(fs, v, n, buf);
		bool free_devid = bi_dev_by_id(fs, other) == NULL;
		move_devid(fs, a, other);
		size_t moved = total(fs, v, n, buf);
		if (moved <= now)
			move_devid(fs, a, was);
		bi_damage(fs,
			  "salvage: device '%s' holds its tree blocks where the mirrored stripes of "
			  "devid %" PRIu64 " or %" PRIu64 " put them: the data checksums decide, devid %"
			  PRIu64 " (%zu sampled sectors verify, %zu the other way)",
			  a->name, was, other, a->devid, moved > now ? moved : now,
			  moved > now ? now : moved);
		if (free_devid && moved > now) /* the degraded chunks were named before */
			bi_damage(fs, "salvage: so the missing device is devid %" PRIu64
				  ", not devid %" PRIu64 " as said above", was, other);
	}
}

static void decide_orders(struct btrfsimg_fs *fs, struct chunk_samples *v, size_t n, uint8_t *buf)
{
	for (size_t i = 0; i < n; i++) {
		if (!v[i].unsure)
			continue;
		const struct bi_chunk *c = v[i].c;
		struct bi_sv_order o = { 0 };
		bool wide = c->num_stripes > MAX_ORDERED && v[i].n;
		size_t got = wide ? wide_order(fs, &v[i], buf, true, &o) : best_order(fs, &v[i], buf, true);
		char ids[96] = "";
		size_t used = 0;
		for (uint16_t k = 0; k < c->num_stripes && used < sizeof(ids); k++)
			used += (size_t)snprintf(ids + used, sizeof(ids) - used, "%s%" PRIu64,
						 k ? "," : "", c->stripes[k].devid);
		if (wide)
			bi_damage(fs,
				  "salvage: chunk [%" PRIu64 ", %" PRIu64 ") %s from device extents: "
				  "%u stripes, too many to try every order: placed one at a time by the "
				  "sampled sectors that verify on each device, %u of them by evidence%s; "
				  "stripe order devids %s, %zu of %zu sampled sectors verify, %" PRIu64
				  " votes for another place outvoted",
				  c->logical, c->logical + c->length, bi_chunk_profile_name(c->type),
				  c->num_stripes, o.decided,
				  o.refused ? " (refused: two devices as well voted for one stripe, the "
					      "rest left in devid order)" : "",
				  ids, got, v[i].n, o.against);
		else if (got)
			bi_damage(fs,
				  "salvage: chunk [%" PRIu64 ", %" PRIu64 ") %s from device extents: "
				  "stripe order devids %s, %zu of %zu sampled sectors verify",
				  c->logical, c->logical + c->length, bi_chunk_profile_name(c->type), ids,
				  got, v[i].n);
		else
			bi_damage(fs,
				  "salvage: chunk [%" PRIu64 ", %" PRIu64 ") %s from device extents: "
				  "stripe order unverified (no data checksum to test it on), devids %s "
				  "assumed",
				  c->logical, c->logical + c->length, bi_chunk_profile_name(c->type), ids);
	}
}

static bool is_unsure(const struct btrfsimg_fs *fs, uint64_t logical)
{
	for (size_t i = 0; i < fs->nsalvage_unsure; i++)
		if (fs->salvage_unsure[i] == logical)
			return true;
	return false;
}

/* The striped data chunks of the map, with their samples. */
static int gather(struct btrfsimg_fs *fs, struct chunk_samples **out, size_t *nout)
{
	struct bi_root csum_root;
	size_t nc = bi_chunk_map_count(fs->chunks), n = 0;
	struct chunk_samples *v = calloc(nc ? nc : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	int rc = bi_root_find(fs, OBJ_CSUM_TREE, &csum_root);
	for (size_t k = 0; k < nc && rc == 0; k++) {
		/* the map's own chunk: reordered here, before data is read through it */
		struct bi_chunk *c = (struct bi_chunk *)bi_chunk_map_at(fs->chunks, k);
		if (!striped_data(c))
			continue;
		v[n] = (struct chunk_samples){ .c = c, .unsure = is_unsure(fs, c->logical) };
		rc = take_samples(fs, &csum_root, &v[n]);
		n++;
	}
	*out = v;
	*nout = n;
	return rc;
}

int bi_salvage_stripes(struct btrfsimg_fs *fs)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", fs->err);
	struct chunk_samples *v = NULL;
	size_t n = 0;
	uint8_t *buf = malloc(fs->sectorsize);
	int rc = buf ? gather(fs, &v, &n) : -ENOMEM;
	if (rc == -ENOMEM) {
		rc = bi_err(fs, rc, "salvage: out of memory sampling data checksums");
		goto out;
	}
	if (rc < 0) /* no csum tree to read: the orders stay as the blocks left them */
		bi_damage(fs, "salvage: data checksums not read (%s)", fs->err);
	if (n) {
		decide_ties(fs, v, n, buf);
		decide_orders(fs, v, n, buf);
	}
	snprintf(fs->err, sizeof(fs->err), "%s", was);
	rc = 0;
out:
	free(v);
	free(buf);
	return rc;
}
