// SPDX-License-Identifier: MIT
/*
 * btrfsimg layers: every layer of each image, from the container down to
 * the filesystem: the container (format, size, segment files, EWF
 * acquisition metadata and stored hashes), then the partition table and
 * its partitions. `partitions` (the old name) prints the partition rows.
 *
 * Each layer is a record with a depth (0: the container); a new kind of
 * layer (LUKS, LVM, ...) is one more function that appends records
 * below the layer it lies in. Text indents by depth; JSON writes one
 * object per record: {"image", "depth", "layer", ...}.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/json.h"
#include "common/keys.h"

/* Every partition and every row the library lists is printed: the lists
 * grow as needed (the library bounds both: BI_PART_MAX partitions, and a
 * "stopped" row when its own listing is full). */
#define ATTR_MAX (1 << 16) /* an EWF set names each of its segments */

/* One key of a layer: a string, a number, or a bool; keys given twice
 * make a JSON array (segments). */
struct attr {
	char *key;
	char *str;
	uint64_t num;
	enum { A_STR, A_NUM, A_BOOL } type;
};

struct layer {
	int depth;
	const char *kind; /* "ewf", "raw", "gpt", "mbr", "partition", ... */
	char *title;	  /* text: the rest of the layer's first line */
	struct attr *attrs;
	int nattrs, cap;
	int anchor; /* a volume row: the index in l of its partition, or -1 */
};

/* l: the container, the table and its partitions, in order; v: the rows
 * below them (LUKS, LVM, btrfs), each printed after its partition. */
struct layers {
	const char *image;
	struct layer *l, *v;
	int n, cap, nv, vcap;
	int status;
};

static struct layer *grow_add(struct layer **a, int *n, int *cap, int depth, const char *kind)
{
	if (*n == *cap) {
		int c = *cap ? 2 * *cap : 16;
		struct layer *g = *cap < INT32_MAX / 4 ? realloc(*a, (size_t)c * sizeof(**a)) : NULL;
		if (!g)
			return NULL;
		*a = g;
		*cap = c;
	}
	struct layer *l = &(*a)[(*n)++];
	memset(l, 0, sizeof(*l));
	l->depth = depth;
	l->kind = kind;
	l->anchor = -1;
	return l;
}

static struct layer *layer_add(struct layers *L, int depth, const char *kind)
{
	return grow_add(&L->l, &L->n, &L->cap, depth, kind);
}

static struct attr *attr_add(struct layer *l, const char *key)
{
	if (!l || l->nattrs >= ATTR_MAX)
		return NULL;
	if (l->nattrs == l->cap) {
		int c = l->cap ? 2 * l->cap : 8;
		struct attr *g = realloc(l->attrs, (size_t)c * sizeof(*g));
		if (!g)
			return NULL;
		l->attrs = g;
		l->cap = c;
	}
	struct attr *a = &l->attrs[l->nattrs++];
	memset(a, 0, sizeof(*a));
	a->key = strdup(key);
	if (!a->key) {
		l->nattrs--;
		return NULL;
	}
	return a;
}

static void attr_str(struct layer *l, const char *key, const char *v)
{
	struct attr *a = attr_add(l, key);
	if (a) {
		a->type = A_STR;
		a->str = strdup(v ? v : "");
	}
}

static void attr_num(struct layer *l, const char *key, uint64_t v)
{
	struct attr *a = attr_add(l, key);
	if (a) {
		a->type = A_NUM;
		a->num = v;
	}
}

static void attr_bool(struct layer *l, const char *key, bool v)
{
	struct attr *a = attr_add(l, key);
	if (a) {
		a->type = A_BOOL;
		a->num = v;
	}
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* ------------------------------------------------------------ layers */

/* Depth 0: the container. */
static int container_layer(struct layers *L, const char *image, int format)
{
	char err[1024];
	btrfsimg_image *img;
	int rc = btrfsimg_image_open(&img, image, format, err, sizeof(err));
	if (rc < 0) {
		cli_warn("%s", err);
		return rc;
	}
	struct btrfsimg_image_info in;
	btrfsimg_image_info(img, &in);
	struct layer *l = layer_add(L, 0, btrfsimg_format_name(in.format));
	attr_num(l, "size", in.size);
	if (*in.detail)
		attr_str(l, "type", in.detail);
	/* the files there, then the missing ones: one list each, also when
	 * a file is missing between others */
	for (int want = 1; want >= 0; want--)
		for (size_t i = 0; i < in.segments; i++) {
			bool present;
			const char *s = btrfsimg_image_segment(img, i, &present);
			if (present == want)
				attr_str(l, present ? "segments" : "missing", s);
		}
	for (size_t i = 0; i < in.meta; i++) {
		const char *k, *v;
		if (btrfsimg_image_meta(img, i, &k, &v) == 0)
			attr_str(l, k, v);
	}
	char h[41];
	if (in.has_md5) {
		hex(in.md5, 16, h);
		attr_str(l, "md5", h);
	}
	if (in.has_sha1) {
		hex(in.sha1, 20, h);
		attr_str(l, "sha1", h);
	}
	for (size_t i = 0; i < in.notes; i++) {
		cli_warn("warning: %s", btrfsimg_image_note(img, i));
		L->status = EXIT_DAMAGED;
	}
	btrfsimg_image_free(img);
	return 0;
}

/* Depth 1 and 2: the partition table and its partitions. */
static int partition_layers(struct layers *L, const char *image, int format, bool rows_only)
{
	char err[512] = "";
	int n = btrfsimg_list_partitions_format(image, format, NULL, 0, err, sizeof(err));
	struct btrfsimg_partition *p = n > 0 ? calloc((size_t)n, sizeof(*p)) : NULL;
	if (n > 0 && !p)
		n = -ENOMEM;
	if (p) {
		int again = btrfsimg_list_partitions_format(image, format, p, (size_t)n, err,
							    sizeof(err));
		n = again < n ? again : n;
	}
	if (n < 0) {
		cli_warn("%s: %s", image, *err ? err : strerror(-n));
		free(p);
		return n;
	}
	/* damage the table parser worked around (the backup GPT used);
	 * 'layers' hears it from btrfsimg_probe(), with the other layers' */
	if (*err && rows_only) {
		cli_warn("warning: %s: %s", image, err);
		L->status = EXIT_DAMAGED;
	}
	if (n > 0 && !rows_only) {
		struct layer *t = layer_add(L, 1, p[0].gpt ? "gpt" : "mbr");
		attr_num(t, "partitions", (uint64_t)n);
	}
	for (int k = 0; k < n; k++) {
		struct layer *l = layer_add(L, rows_only ? 0 : 2, "partition");
		attr_num(l, "number", (uint64_t)p[k].number);
		attr_num(l, "offset", p[k].offset);
		attr_num(l, "size", p[k].size);
		attr_str(l, "table", p[k].gpt ? "gpt" : "mbr");
		attr_bool(l, "btrfs", p[k].is_btrfs);
	}
	if (n == 0 && !rows_only)
		layer_add(L, 1, "no partition table"); /* text only */
	free(p);
	return 0;
}

/* Below the partitions: LUKS, LVM and btrfs (btrfsimg_probe). A layer
 * goes right after the partition it lies in, its depth that of the
 * library's row plus one (the partition table's level); rows of a VG over
 * several images come last. Locked LUKS volumes are listed, not errors. */
static int part_number(const struct btrfsimg_layer *r, size_t i)
{
	for (int k = (int)i, hops = 0; k >= 0 && hops < 64; k = r[k].parent, hops++)
		if (!strcmp(r[k].kind, "partition"))
			return atoi(r[k].name);
	return 0;
}

/* The index in L->l of partition @number, or -1 (and for 0: none). */
static int anchor_of(const struct layers *L, const int *by_number, int maxnum, int number)
{
	return number > 0 && number <= maxnum ? by_number[number] : -1;
}

/* by_number[N]: the index in L->l of the first partition numbered N. */
static int *partition_index(const struct layers *L, int *maxnum)
{
	*maxnum = 0;
	for (int i = 0; i < L->n; i++)
		for (int a = 0; !strcmp(L->l[i].kind, "partition") && a < L->l[i].nattrs; a++)
			if (!strcmp(L->l[i].attrs[a].key, "number") &&
			    L->l[i].attrs[a].num > (uint64_t)*maxnum &&
			    L->l[i].attrs[a].num < INT32_MAX)
				*maxnum = (int)L->l[i].attrs[a].num;
	int *m = malloc(((size_t)*maxnum + 1) * sizeof(*m));
	for (int i = 0; m && i <= *maxnum; i++)
		m[i] = -1;
	for (int i = 0; m && i < L->n; i++)
		for (int a = 0; !strcmp(L->l[i].kind, "partition") && a < L->l[i].nattrs; a++) {
			uint64_t num = L->l[i].attrs[a].num;
			if (!strcmp(L->l[i].attrs[a].key, "number") && num >= 1 &&
			    num <= (uint64_t)*maxnum && m[num] < 0)
				m[num] = i;
		}
	return m;
}

static int volume_row(struct layers *L, const struct btrfsimg_layer *r, int anchor, int depth)
{
	/* kind points into the rows kept until output */
	struct layer *l = grow_add(&L->v, &L->nv, &L->vcap, depth, r->kind);
	if (!l)
		return -ENOMEM;
	l->anchor = anchor;
	if (r->name[0])
		attr_str(l,
			 !strcmp(r->kind, "btrfs") || !strncmp(r->kind, "luks", 4) ? "label"
										   : "name",
			 r->name);
	attr_num(l, "offset", r->offset);
	if (r->size)
		attr_num(l, "size", r->size);
	if (r->uuid[0])
		attr_str(l, "uuid", r->uuid);
	if (r->cipher[0]) {
		attr_str(l, "cipher", r->cipher);
		attr_num(l, "key_bits", r->key_bits);
		attr_num(l, "sector_size", r->sector_size);
		attr_num(l, "payload_offset", r->payload);
		attr_str(l, "keyslots", r->kdf);
	}
	if (r->detail[0])
		attr_str(l, "detail", r->detail);
	return 0;
}

struct probe_log {
	const struct cli *c;
	bool say; /* every image is probed for each: its damage said once */
	uint64_t damage;
};

/* Damage the probe worked around (the backup GPT header used, a damaged
 * PV label or metadata copy, a LUKS header read from its second copy). */
static void probe_damage(void *ctx, bool damage, const char *msg)
{
	struct probe_log *g = ctx;
	g->damage += damage;
	if (g->say && (g->c->verbose || (damage && !g->c->quiet)))
		fprintf(stderr, "btrfsimg: %s%s\n", damage ? "warning: " : "", msg);
}

/* A LUKS row: opened, or left locked although a key was given (said). */
static void luks_status(const struct cli *c, const char *image,
			const struct btrfsimg_layer *r, int *opened, int *locked)
{
	if (strstr(r->detail, "opened with"))
		(*opened)++;
	else if (c->passphrase_file || c->volume_key_file) {
		(*locked)++;
		cli_warn("%s: %s %s stays locked: %s", image, r->kind, r->uuid, r->detail);
	}
}

/* Whether the probe listed a btrfs, a LUKS or an LVM row. */
static bool probe_found(btrfsimg_fs *fs)
{
	size_t n = 0;
	if (btrfsimg_layers(fs, NULL, 0, &n) < 0 || n == 0)
		return n != 0;
	struct btrfsimg_layer *r = calloc(n, sizeof(*r));
	bool found = !r;
	for (size_t i = 0; r && btrfsimg_layers(fs, r, n, &n) == 0 && i < n; i++)
		found |= strcmp(r[i].kind, "image") && strcmp(r[i].kind, "partition");
	free(r);
	return found;
}

/* The open's messages, said only when it opens (held until then). */
struct held {
	char text[4096];
	size_t used;
	uint64_t damage;
};

static void hold(void *ctx, bool damage, const char *msg)
{
	struct held *h = ctx;
	h->damage += damage;
	if (damage && h->used < sizeof(h->text))
		h->used += (size_t)snprintf(h->text + h->used, sizeof(h->text) - h->used,
					    "btrfsimg: warning: %s\n", msg);
}

/* Nothing found by the probe: no table and no superblock copy anywhere.
 * The open's salvage may still place btrfs by its tree blocks, and adds
 * its row; an open that fails says nothing here (it found nothing). */
static void place_by_open(btrfsimg_fs *fs, struct probe_log *g)
{
	struct held h = { .used = 0 };
	btrfsimg_set_log(fs, hold, &h);
	if (btrfsimg_open(fs) == 0) {
		g->damage += h.damage;
		if (g->say && !g->c->quiet)
			fputs(h.text, stderr);
	}
	btrfsimg_set_log(fs, probe_damage, g);
}

static int volume_layers(struct layers *L, struct cli *c, const char *image,
			 struct btrfsimg_layer **rows)
{
	btrfsimg_fs *fs;
	size_t n = 0;
	int opened = 0, locked = 0;
	struct probe_log g = { c, image == c->images[0], 0 };
	int rc = btrfsimg_fs_new(&fs, NULL);
	if (rc == 0)
		btrfsimg_set_log(fs, probe_damage, &g);
	if (rc == 0 && cli_volume_setup(c, fs) != EXIT_OK)
		rc = -EINVAL;
	/* every image: the PVs of a volume group may lie in several */
	for (int i = 0; rc == 0 && i < c->nimages; i++)
		rc = btrfsimg_add_device_file_format(fs, c->images[i], c->format);
	if (rc == 0)
		rc = btrfsimg_probe(fs);
	if (rc == 0 && !probe_found(fs))
		place_by_open(fs, &g);
	if (rc == 0)
		rc = btrfsimg_layers(fs, NULL, 0, &n);
	*rows = rc == 0 && n ? calloc(n, sizeof(**rows)) : NULL;
	if (*rows)
		rc = btrfsimg_layers(fs, *rows, n, &n);
	if (rc < 0 && rc != -EINVAL)
		cli_warn("%s: %s", image, fs ? btrfsimg_errmsg(fs) : strerror(-rc));
	btrfsimg_fs_free(fs);
	if (g.say && g.damage && L->status < EXIT_DAMAGED)
		L->status = EXIT_DAMAGED;
	int maxnum, *by_number = partition_index(L, &maxnum);
	if (!by_number && rc == 0)
		rc = -ENOMEM;
	for (size_t i = 0; by_number && *rows && i < n && rc == 0; i++) {
		const struct btrfsimg_layer *r = &(*rows)[i];
		int top = (int)i;
		for (int hops = 0; (*rows)[top].parent >= 0 && hops < 64; hops++)
			top = (*rows)[top].parent;
		bool mine = !strcmp((*rows)[top].kind, "image")
				    ? !strcmp((*rows)[top].name, image)
				    : image == c->images[c->nimages - 1];
		if (!mine || !strcmp(r->kind, "image") || !strcmp(r->kind, "partition"))
			continue;
		int num = part_number(*rows, i);
		int under = r->depth > 0 && num ? 1 : 0;
		rc = volume_row(L, r, anchor_of(L, by_number, maxnum, num),
				(int)r->depth + under);
		if (!strncmp(r->kind, "luks", 4))
			luks_status(c, image, r, &opened, &locked);
	}
	free(by_number);
	if (rc == -ENOMEM)
		cli_warn("%s: out of memory listing %zu layers", image, n);
	/* a key was given: a volume it did not open is not a result */
	if (locked && L->status < (opened ? EXIT_DAMAGED : EXIT_FAILED))
		L->status = opened ? EXIT_DAMAGED : EXIT_FAILED;
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ output */

static void put_json(const struct layers *L, const struct layer *l, bool rows_only)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "image", L->image);
	if (!rows_only) {
		jw_i64(&w, "depth", l->depth);
		jw_str(&w, "layer", l->kind);
	}
	for (int i = 0; i < l->nattrs; i++) {
		const struct attr *a = &l->attrs[i];
		bool list = !strcmp(a->key, "segments") || !strcmp(a->key, "missing");
		if (list) {
			bool first = i == 0 || strcmp(l->attrs[i - 1].key, a->key);
			if (!first)
				continue;
			jw_open_arr(&w, a->key);
			for (int j = i; j < l->nattrs && !strcmp(l->attrs[j].key, a->key); j++)
				jw_str(&w, NULL, l->attrs[j].str);
			jw_close_arr(&w);
			continue;
		}
		if (a->type == A_NUM)
			jw_u64(&w, a->key, a->num);
		else if (a->type == A_BOOL)
			jw_bool(&w, a->key, a->num != 0);
		else
			jw_str(&w, a->key, a->str);
	}
	jw_end(&w);
}

static void put_text(const struct layer *l, bool rows_only)
{
	int ind = 2 + 2 * l->depth;
	if (rows_only || !strcmp(l->kind, "partition")) {
		uint64_t v[4] = { 0 };
		bool btrfs = false;
		const char *table = "";
		for (int i = 0; i < l->nattrs; i++) {
			const struct attr *a = &l->attrs[i];
			if (!strcmp(a->key, "number"))
				v[0] = a->num;
			if (!strcmp(a->key, "offset"))
				v[1] = a->num;
			if (!strcmp(a->key, "size"))
				v[2] = a->num;
			if (!strcmp(a->key, "btrfs"))
				btrfs = a->num != 0;
			if (!strcmp(a->key, "table"))
				table = a->str;
		}
		printf("%*s%3" PRIu64 "  offset %14" PRIu64 "  size %14" PRIu64 "  %s%s\n", ind, "",
		       v[0], v[1], v[2], table, btrfs ? "  btrfs" : "");
		return;
	}
	printf("%*s%s\n", ind, "", l->kind);
	for (int i = 0; i < l->nattrs; i++) {
		const struct attr *a = &l->attrs[i];
		if (a->type == A_NUM)
			printf("%*s  %-24s %" PRIu64 "\n", ind, "", a->key, a->num);
		else if (a->type == A_BOOL)
			printf("%*s  %-24s %s\n", ind, "", a->key, a->num ? "yes" : "no");
		else
			printf("%*s  %-24s %s\n", ind, "", a->key, a->str);
	}
}

static void put_layer(const struct cli *c, const struct layers *L, const struct layer *l,
		      bool rows_only)
{
	if (c->json && !strcmp(l->kind, "no partition table"))
		return;
	if (c->json)
		put_json(L, l, rows_only);
	else
		put_text(l, rows_only);
}

/* Each layer of L->l, the volume rows of a partition right after it (in
 * the library's order: a stable counting sort by anchor), then the rows
 * in no partition. */
static void put_all(const struct cli *c, const struct layers *L, bool rows_only)
{
	int *at = calloc((size_t)L->n + 2, sizeof(int));
	int *ord = malloc(((size_t)L->nv + 1) * sizeof(int));
	if (!at || !ord) { /* no room to sort: every row still printed */
		for (int i = 0; i < L->n; i++)
			put_layer(c, L, &L->l[i], rows_only);
		for (int i = 0; i < L->nv; i++)
			put_layer(c, L, &L->v[i], rows_only);
		goto out;
	}
	for (int k = 0; k < L->nv; k++)
		at[(L->v[k].anchor < 0 ? L->n : L->v[k].anchor) + 1]++;
	for (int i = 0; i <= L->n; i++)
		at[i + 1] += at[i];
	for (int k = 0; k < L->nv; k++) /* at[a] moves to the end of bucket a */
		ord[at[L->v[k].anchor < 0 ? L->n : L->v[k].anchor]++] = k;
	for (int i = 0, k = 0; i <= L->n; i++) { /* now bucket i ends at at[i] */
		if (i < L->n)
			put_layer(c, L, &L->l[i], rows_only);
		for (; k < at[i]; k++)
			put_layer(c, L, &L->v[ord[k]], rows_only);
	}
out:
	free(at);
	free(ord);
}

static void layer_free(struct layer *l)
{
	for (int j = 0; j < l->nattrs; j++) {
		free(l->attrs[j].str);
		free(l->attrs[j].key);
	}
	free(l->attrs);
}

static void layers_free(struct layers *L)
{
	for (int i = 0; i < L->n; i++)
		layer_free(&L->l[i]);
	for (int i = 0; i < L->nv; i++)
		layer_free(&L->v[i]);
	free(L->l);
	free(L->v);
	memset(L, 0, sizeof(*L));
}

/* One image; EXIT_OK, EXIT_DAMAGED or EXIT_FAILED (said). */
static int layers_one(struct cli *c, const char *image, bool rows_only)
{
	struct layers L = { 0 };
	L.image = image;
	L.status = EXIT_OK;
	if (!rows_only && container_layer(&L, image, c->format) < 0) {
		layers_free(&L);
		return EXIT_FAILED;
	}
	int rc = partition_layers(&L, image, c->format, rows_only);
	struct btrfsimg_layer *rows = NULL;
	if (rc == 0 && !rows_only && volume_layers(&L, c, image, &rows) < 0)
		L.status = EXIT_FAILED;
	if (rows_only && !c->json)
		printf("%s: %s\n", image, L.n ? "" : "no partition table");
	else if (!c->json)
		printf("%s\n", image);
	put_all(c, &L, rows_only);
	int status = rc < 0 ? EXIT_FAILED : L.status;
	layers_free(&L);
	free(rows);
	return status;
}

static int run_all(struct cli *c, bool rows_only)
{
	int status = EXIT_OK;
	for (int i = 0; i < c->nimages; i++) {
		int s = layers_one(c, c->images[i], rows_only);
		if (s > status)
			status = s;
	}
	return status;
}

/* ------------------------------------------------------------ --scan */

static void uuid_text(const uint8_t u[16], char out[37])
{
	static const char *const hexd = "0123456789abcdef";
	size_t o = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hexd[u[i] >> 4];
		out[o++] = hexd[u[i] & 15];
	}
	out[o] = '\0';
}

static void found_json(const struct btrfsimg_found_fs *f)
{
	char u[37];
	struct jw w;
	jw_begin(&w, stdout);
	uuid_text(f->fsid, u);
	jw_str(&w, "fsid", u);
	uuid_text(f->metadata_uuid, u);
	jw_str(&w, "metadata_uuid", u);
	jw_str(&w, "label", f->label);
	jw_bool(&w, "current", f->current);
	jw_u64(&w, "superblocks", f->supers);
	jw_u64(&w, "super_generation", f->super_generation);
	jw_u64(&w, "nodesize", f->nodesize);
	jw_str(&w, "csum", btrfsimg_csum_name(f->csum_type));
	jw_u64(&w, "blocks", f->blocks);
	if (f->blocks) {
		jw_u64(&w, "generation_min", f->gen_min);
		jw_u64(&w, "generation_max", f->gen_max);
		jw_u64(&w, "first_offset", f->first);
		jw_u64(&w, "last_offset", f->last);
	}
	jw_u64(&w, "devices", f->devices);
	jw_end(&w);
}

static void found_text(const struct btrfsimg_found_fs *f)
{
	char u[37], m[37];
	uuid_text(f->fsid, u);
	uuid_text(f->metadata_uuid, m);
	printf("btrfs %s%s\n", u, f->current ? "  (the superblock in use names it)" : "");
	if (strcmp(u, m))
		printf("  %-16s %s\n", "metadata_uuid", m);
	if (f->supers)
		printf("  %-16s %u valid, generation %" PRIu64 ", label '%s'\n", "superblocks",
		       f->supers, f->super_generation, f->label);
	else
		printf("  %-16s none valid\n", "superblocks");
	printf("  %-16s %" PRIu32 "\n  %-16s %s\n", "nodesize", f->nodesize, "checksum",
	       btrfsimg_csum_name(f->csum_type));
	if (f->blocks)
		printf("  %-16s %" PRIu64 " of generations %" PRIu64 "-%" PRIu64 "\n"
		       "  %-16s offsets %" PRIu64 "-%" PRIu64 " of %" PRIu32 " device%s\n",
		       "tree blocks", f->blocks, f->gen_min, f->gen_max, "found at", f->first,
		       f->last, f->devices, f->devices == 1 ? "" : "s");
	else
		printf("  %-16s none verify\n", "tree blocks");
}

/* layers --scan: every btrfs on the devices all images lead to (as an
 * open locates them), from one read of each. */
static int scan_filesystems(struct cli *c)
{
	btrfsimg_fs *fs;
	struct btrfsimg_found_fs found[64];
	size_t n = 0;
	int rc = btrfsimg_fs_new(&fs, &c->opts);
	if (rc == 0 && cli_volume_setup(c, fs) != EXIT_OK)
		rc = -EINVAL;
	for (int i = 0; rc == 0 && i < c->nimages; i++)
		rc = btrfsimg_add_device_file_format(fs, c->images[i], c->format);
	if (rc == 0)
		rc = btrfsimg_scan_filesystems(fs, found, sizeof(found) / sizeof(*found), &n);
	if (rc < 0) {
		cli_warn("%s: %s", c->images[0], fs ? btrfsimg_errmsg(fs) : strerror(-rc));
		btrfsimg_fs_free(fs);
		return EXIT_FAILED;
	}
	btrfsimg_fs_free(fs);
	if (n == 0 && !c->json)
		printf("no btrfs tree block or superblock found\n");
	for (size_t i = 0; i < n && i < sizeof(found) / sizeof(*found); i++) {
		if (c->json)
			found_json(&found[i]);
		else
			found_text(&found[i]);
	}
	return EXIT_OK;
}

static int layers_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") ||
	    cli_needs(c, c->opts.partition != 0, "--partition", c->scan, "--scan") ||
	    cli_needs(c, (c->opts.flags & BTRFSIMG_OPEN_OFFSET) != 0, "--offset", c->scan, "--scan"))
		return EXIT_USAGE;
	return EXIT_OK;
}

static int cmd_layers(struct cli *c)
{
	return c->scan ? scan_filesystems(c) : run_all(c, false);
}

static int cmd_partitions(struct cli *c)
{
	return run_all(c, true);
}

static const struct cmd_option layers_options[] = {
	{ OPT_JSON, "one JSON object per layer (with --scan: per filesystem)" },
	{ OPT_SCAN, NULL },
	{ OPT_FORMAT, NULL },
	{ OPT_PARTITION, NULL },
	{ OPT_OFFSET, NULL },
	{ OPT_PASSPHRASE_FILE, NULL },
	{ OPT_VOLUME_KEY_FILE, NULL },
	{ OPT_KDF_LIMIT, NULL },
	{ OPT_END, NULL },
};

static const struct cmd_option partitions_options[] = {
	{ OPT_JSON, "one JSON object per partition" },
	{ OPT_FORMAT, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_layers = {
	.name = "layers",
	.summary = "every layer of an image: container, partitions, LUKS, LVM, btrfs",
	.args = "IMAGE...",
	.about = "The layers of each image, from the outside in. The container: its format\n"
		 "(raw, split, ewf, qcow2, vmdk, vhd, vhdx), the size of the disk it holds,\n"
		 "its files (segments; missing ones named), for EWF the acquisition metadata\n"
		 "(case number, examiner, evidence number, dates, ...) and the MD5/SHA-1\n"
		 "stored at acquisition, for qcow2/VMDK/VHD a backing or parent file. Then\n"
		 "the MBR or GPT partition table and each partition: number, byte offset,\n"
		 "size, and whether it holds btrfs. Below them LUKS1/LUKS2 (UUID, cipher,\n"
		 "key size, sector size, payload offset, the KDF of each keyslot; what lies\n"
		 "inside once a passphrase or volume key is given), LVM physical volumes,\n"
		 "volume groups and logical volumes (type, segments, or why unreadable), and\n"
		 "btrfs (fsid, label). Keys are never printed. No filesystem is opened.\n"
		 "Every partition is listed and probed. Exit status 1 when a segment is\n"
		 "missing or truncated, or damage in a layer was worked around (the backup\n"
		 "GPT header used, an older LVM metadata copy; said on stderr). With a key\n"
		 "given, a LUKS volume left locked is named on stderr with its reason: exit\n"
		 "status 2 if none opened, else 1.\n"
		 "With --scan, instead of the layers: every btrfs whose tree blocks are on\n"
		 "the devices the layers lead to (as an open finds them; --partition,\n"
		 "--offset choose), from one read of each: fsid (and metadata_uuid), the\n"
		 "label and generation of a valid superblock copy if one survives, which\n"
		 "one the superblock in use names, nodesize, checksum type, how many tree\n"
		 "blocks verify, their generations and the device offsets they span. An\n"
		 "old filesystem that mkfs made another over is read with --fsid.",
	.examples = "btrfsimg layers disk.E01\n"
		    "btrfsimg layers --scan --json disk.img\n"
		    "btrfsimg layers --json disk.qcow2\n"
		    "btrfsimg layers --format split disk.img.001\n"
		    "btrfsimg layers --passphrase-file pass.txt fedora-luks2.img",
	.options = layers_options,
	.check = layers_check,
	.run = cmd_layers,
	.no_fs = true,
};

const struct cmd_struct cmd_struct_partitions = {
	.name = "partitions",
	.summary = "the partition rows of 'layers' (its former name)",
	.args = "IMAGE...",
	.about = "The MBR or GPT partition table of each whole-disk image (inside its\n"
		 "container, if any): number, byte offset, size, table type, and whether\n"
		 "the partition holds btrfs (choose one for the other commands with\n"
		 "--partition N or --offset BYTES). 'btrfsimg layers' shows the container\n"
		 "too. No filesystem is opened.",
	.examples = "btrfsimg partitions disk.img\n"
		    "btrfsimg partitions --json disk.img",
	.options = partitions_options,
	.run = cmd_partitions,
	.no_fs = true,
};
