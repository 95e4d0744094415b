/* SPDX-License-Identifier: MIT */
/*
 * LVM2 physical volumes, volume group metadata and logical volume maps
 * (lvm2's lib/format_text/layout.h, format-text.c, import_vsn1.c and
 * doc/lvm_fault_handling.txt for the facts; the code is ours).
 *
 *   label  one of sectors 0..3: "LABELONE" +0, its sector +8, crc +16 (of
 *          bytes 20..511), pv_header offset +20, "LVM2 001" +24;
 *          pv_header: uuid[32], device size, then {offset, size} lists
 *          of data areas and of metadata areas, each ended by zeros.
 *   mda    header at the area's start: crc +0 (of bytes 4..511), magic
 *          " LVM2 x[5A%r0N*>" +4, version +20, start +24, size +32,
 *          raw_locn[0] +40: {offset (from start), size, crc, flags}. The
 *          text lies in a ring buffer after the 512-byte header and may
 *          wrap back to byte 512 of the area.
 *   crc    LVM's: the CRC-32 table with initial value 0xf597a6cf and no
 *          final inversion, i.e. ~crc32(~0xf597a6cf, ...) with zlib's.
 *   text   name { key = value ... } with values integers, "strings" and
 *          [lists]; '#' starts a comment. The VG section holds
 *          extent_size (sectors), physical_volumes { pvN { id, pe_start,
 *          pe_count } } and logical_volumes { lv { status, segmentK {
 *          start_extent, extent_count, type, stripe_count, stripe_size,
 *          stripes = ["pvN", first_pe, ...] } } }; mirror segments list
 *          "mirrors" (sub-LV, extent) and raid1 ones "raids" (rmeta,
 *          rimage pairs).
 *
 * Every number from the text is bounded before use; the byte map checks
 * each extent against the PV's pe_count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "volume/lvm.h"

#include "base/cursor.h"
#include "base/err.h"

#define SECTOR	     512u
#define LVM_CRC_INIT 0xf597a6cfu
#define MDA_MAGIC    " LVM2 x[5A%r0N*>"
#define TEXT_MAX     BI_LVM_TEXT_MAX
#define DEPTH_MAX    8
#define ITEMS_MAX    100000
#define AREAS_MAX    256
#define LV_DEPTH_MAX 4

static uint32_t lvm_crc(const uint8_t *p, size_t n, uint32_t crc)
{
	return ~(uint32_t)crc32(~crc & 0xffffffffu, p, (uInt)n);
}

/* ---------------------------------------------------------------- */
/* Label and metadata area */

static int pv_header(const uint8_t *sec, size_t at, struct bi_lvm_label *out, char *err,
		     size_t errlen)
{
	if (at < 32 || at > SECTOR - 40)
		return bi_msg(err, errlen, -EUCLEAN, "LVM label: pv_header at %zu", at);
	const uint8_t *p = sec + at;
	memcpy(out->pv_id, p, 32);
	out->pv_id[32] = '\0';
	out->dev_size = bi_le64(p + 32);
	size_t i = at + 40;
	int list = 0; /* 0: data areas, 1: metadata areas */
	while (i + 16 <= SECTOR && list < 2) {
		uint64_t off = bi_le64(sec + i), size = bi_le64(sec + i + 8);
		i += 16;
		if (off == 0) {
			list++;
			continue;
		}
		if (list == 1 && out->nmda < BI_LVM_MDAS) {
			out->mda_off[out->nmda] = off;
			out->mda_size[out->nmda++] = size;
		}
	}
	return 1;
}

int bi_lvm_label(bi_read_at_fn rd, void *ctx, uint64_t size, struct bi_lvm_label *out, char *err,
		 size_t errlen)
{
	uint8_t sec[SECTOR];
	memset(out, 0, sizeof(*out));
	for (uint64_t s = 0; s < 4 && (s + 1) * SECTOR <= size; s++) {
		int rc = rd(ctx, s * SECTOR, sec, SECTOR);
		if (rc)
			return rc < 0 ? rc : -EIO;
		if (memcmp(sec, "LABELONE", 8) != 0)
			continue;
		if (memcmp(sec + 24, "LVM2 001", 8) != 0)
			return bi_msg(err, errlen, -EOPNOTSUPP,
				      "LVM label at sector %" PRIu64
				      ": type '%.8s', expect 'LVM2 001'",
				      s, (const char *)sec + 24);
		uint32_t want = bi_le32(sec + 16),
			 have = lvm_crc(sec + 20, SECTOR - 20, LVM_CRC_INIT);
		if (bi_le64(sec + 8) != s || want != have)
			return bi_msg(err, errlen, -EUCLEAN,
				      "LVM label at sector %" PRIu64 ": sector field %" PRIu64
				      ", crc 0x%08x expect 0x%08x",
				      s, bi_le64(sec + 8), have, want);
		return pv_header(sec, bi_le32(sec + 20), out, err, errlen);
	}
	return 0;
}

int bi_lvm_mda_text(bi_read_at_fn rd, void *ctx, uint64_t size, const struct bi_lvm_label *lb,
		    int i, char **text, char *err, size_t errlen)
{
	uint8_t h[SECTOR];
	uint64_t mo = lb->mda_off[i], ms = lb->mda_size[i];
	*text = NULL;
	if (ms < 2 * SECTOR || !bi_fits64(size, mo, ms))
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata area %d at byte %" PRIu64 " (%" PRIu64
			      " bytes) does not fit the volume (size %" PRIu64 ")",
			      i, mo, ms, size);
	int rc = rd(ctx, mo, h, SECTOR);
	if (rc)
		return rc < 0 ? rc : -EIO;
	uint32_t have = lvm_crc(h + 4, SECTOR - 4, LVM_CRC_INIT);
	if (memcmp(h + 4, MDA_MAGIC, 16) != 0 || bi_le32(h) != have || bi_le64(h + 24) != mo)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata area %d at byte %" PRIu64
			      ": bad header (magic, crc 0x%08x expect 0x%08x, or start %" PRIu64
			      ")",
			      i, mo, have, bi_le32(h), bi_le64(h + 24));
	uint64_t off = bi_le64(h + 40), len = bi_le64(h + 48);
	uint32_t crc = bi_le32(h + 56);
	if (len == 0 || off < SECTOR || off >= ms || len > ms - SECTOR || len > TEXT_MAX)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata area %d: text at %" PRIu64 " (%" PRIu64
			      " bytes) outside the area (%" PRIu64 " bytes)",
			      i, off, len, ms);
	char *t = malloc(len + 1);
	if (!t)
		return -ENOMEM;
	uint64_t first = len < ms - off ? len : ms - off;
	rc = rd(ctx, mo + off, t, first);
	if (rc == 0 && first < len)
		rc = rd(ctx, mo + SECTOR, t + first, len - first);
	if (rc) {
		free(t);
		return rc < 0 ? rc : -EIO;
	}
	if (lvm_crc((uint8_t *)t, len, LVM_CRC_INIT) != crc) {
		free(t);
		return bi_msg(err, errlen, -EUCLEAN, "LVM metadata area %d: text crc mismatch", i);
	}
	t[len] = '\0';
	*text = t;
	return 0;
}

/* The text format, parsed below. */
static int parse_seqno(const char *t, size_t len, uint64_t *seqno);

int bi_lvm_mda_scan(bi_read_at_fn rd, void *ctx, uint64_t size, const struct bi_lvm_label *lb,
		    int i, char **text)
{
	uint64_t mo = lb->mda_off[i], ms = lb->mda_size[i];
	*text = NULL;
	if (ms < 2 * SECTOR || ms > TEXT_MAX || !bi_fits64(size, mo, ms))
		return -ENOENT;
	char *ring = malloc(ms + 1);
	if (!ring)
		return -ENOMEM;
	int rc = rd(ctx, mo, ring, ms);
	if (rc) {
		free(ring);
		return rc < 0 ? rc : -EIO;
	}
	ring[ms] = '\0';
	uint64_t best = 0, damaged = bi_le64((uint8_t *)ring + 40); /* raw_locn[0] */
	const char *pick = NULL;
	size_t picklen = 0;
	for (size_t at = SECTOR; at < ms;) {
		if (!ring[at]) { /* the zeros between copies: 8 bytes at a time */
			uint64_t w = 0;
			while (at + 8 <= ms && (memcpy(&w, ring + at, 8), w == 0))
				at += 8;
			while (at < ms && !ring[at])
				at++;
			continue;
		}
		size_t n = strlen(ring + at);
		uint64_t seq;
		if (n && at != damaged && parse_seqno(ring + at, n, &seq) == 0 &&
		    (!pick || seq > best)) {
			best = seq;
			pick = ring + at;
			picklen = n;
		}
		at += n + 1;
	}
	if (pick) {
		*text = strndup(pick, picklen);
		rc = *text ? 0 : -ENOMEM;
	} else
		rc = -ENOENT;
	free(ring);
	return rc;
}

/* ---------------------------------------------------------------- */
/* The text format */

enum tkind { T_SECTION, T_INT, T_STR, T_LIST };

struct tnode {
	enum tkind kind;
	char *name;	    /* key or section name */
	char *str;	    /* T_STR */
	int64_t num;	    /* T_INT */
	struct tnode *kids; /* T_SECTION / T_LIST members, in order */
	struct tnode *next;
};

struct lex {
	const char *p, *end;
	int items;
	char *err;
	size_t errlen;
	int line;
};

static void tfree(struct tnode *n)
{
	while (n) {
		struct tnode *next = n->next;
		tfree(n->kids);
		free(n->name);
		free(n->str);
		free(n);
		n = next;
	}
}

static void skip_ws(struct lex *x)
{
	while (x->p < x->end) {
		char c = *x->p;
		if (c == '#') {
			while (x->p < x->end && *x->p != '\n')
				x->p++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			x->line += c == '\n';
			x->p++;
		} else
			break;
	}
}

static int lerr(struct lex *x, const char *what)
{
	return bi_msg(x->err, x->errlen, -EUCLEAN, "LVM metadata line %d: %s", x->line, what);
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '+' || c == '-';
}

static char *take_name(struct lex *x)
{
	const char *s = x->p;
	while (x->p < x->end && name_char(*x->p))
		x->p++;
	if (x->p == s || x->p - s > 255)
		return NULL;
	return strndup(s, (size_t)(x->p - s));
}

static struct tnode *node_new(struct lex *x, enum tkind k)
{
	if (++x->items > ITEMS_MAX)
		return NULL;
	struct tnode *n = calloc(1, sizeof(*n));
	if (n)
		n->kind = k;
	return n;
}

/* A "string" with \" and \\ escapes. */
static int take_string(struct lex *x, struct tnode *n)
{
	x->p++;
	size_t cap = 0;
	const char *s = x->p;
	while (x->p < x->end && *x->p != '"') {
		if (*x->p == '\\' && x->p + 1 < x->end)
			x->p++;
		x->p++;
		cap++;
	}
	if (x->p >= x->end)
		return lerr(x, "unterminated string");
	n->str = malloc(cap + 1);
	if (!n->str)
		return -ENOMEM;
	size_t k = 0;
	for (const char *q = s; q < x->p; q++) {
		if (*q == '\\')
			q++;
		n->str[k++] = *q;
	}
	n->str[k] = '\0';
	x->p++;
	return 0;
}

static int take_int(struct lex *x, struct tnode *n)
{
	if (x->p >= x->end)
		return lerr(x, "expected a value");
	bool neg = *x->p == '-';
	if (neg)
		x->p++;
	uint64_t v = 0;
	const char *s = x->p;
	while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
		if (v > (uint64_t)(INT64_MAX / 10))
			return lerr(x, "number out of range");
		v = v * 10 + (uint64_t)(*x->p++ - '0');
	}
	if (x->p == s)
		return lerr(x, "expected a value");
	if (x->p < x->end && *x->p == '.') { /* a float: kept as its integer part */
		x->p++;
		while (x->p < x->end && *x->p >= '0' && *x->p <= '9')
			x->p++;
	}
	n->num = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

static int scalar(struct lex *x, struct tnode **out)
{
	struct tnode *n = node_new(x, T_INT);
	if (!n)
		return x->items > ITEMS_MAX ? lerr(x, "too many items") : -ENOMEM;
	int rc;
	if (x->p < x->end && *x->p == '"') {
		n->kind = T_STR;
		rc = take_string(x, n);
	} else
		rc = take_int(x, n);
	if (rc < 0) {
		tfree(n);
		return rc;
	}
	*out = n;
	return 0;
}

static int value(struct lex *x, struct tnode *n)
{
	skip_ws(x);
	if (x->p < x->end && *x->p == '[') {
		struct tnode **tail = &n->kids;
		n->kind = T_LIST;
		x->p++;
		for (;;) {
			skip_ws(x);
			if (x->p < x->end && *x->p == ']') {
				x->p++;
				return 0;
			}
			if (n->kids) {
				if (x->p >= x->end || *x->p != ',')
					return lerr(x, "expected ',' or ']' in a list");
				x->p++;
				skip_ws(x);
			}
			int rc = scalar(x, tail);
			if (rc < 0)
				return rc;
			tail = &(*tail)->next;
		}
	}
	struct tnode *s;
	int rc = scalar(x, &s);
	if (rc < 0)
		return rc;
	n->kind = s->kind;
	n->num = s->num;
	n->str = s->str;
	s->str = NULL;
	tfree(s);
	return 0;
}

/* Items up to '}' (depth > 0) or the end of the text (depth 0). */
static int items(struct lex *x, struct tnode **tail, int depth)
{
	if (depth > DEPTH_MAX)
		return lerr(x, "sections nested too deep");
	for (;;) {
		skip_ws(x);
		if (x->p >= x->end)
			return depth ? lerr(x, "missing '}'") : 0;
		if (*x->p == '}') {
			if (!depth)
				return lerr(x, "unexpected '}'");
			x->p++;
			return 0;
		}
		struct tnode *n = node_new(x, T_SECTION);
		if (!n)
			return x->items > ITEMS_MAX ? lerr(x, "too many items") : -ENOMEM;
		*tail = n;
		tail = &n->next;
		n->name = take_name(x);
		if (!n->name)
			return lerr(x, "expected a name");
		skip_ws(x);
		if (x->p < x->end && *x->p == '{') {
			x->p++;
			int rc = items(x, &n->kids, depth + 1);
			if (rc < 0)
				return rc;
		} else if (x->p < x->end && *x->p == '=') {
			x->p++;
			int rc = value(x, n);
			if (rc < 0)
				return rc;
		} else
			return lerr(x, "expected '{' or '='");
	}
}

static struct tnode *child(const struct tnode *s, const char *name)
{
	for (struct tnode *n = s ? s->kids : NULL; n; n = n->next)
		if (n->name && strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

static bool get_u64(const struct tnode *s, const char *name, uint64_t *out)
{
	struct tnode *n = child(s, name);
	if (!n || n->kind != T_INT || n->num < 0)
		return false;
	*out = (uint64_t)n->num;
	return true;
}

/*
 * A count the metadata states about itself (segment_count, stripe_count,
 * mirror_count, device_count, extent_count ...): 1 with @out in
 * [@lo, @hi], or -EUCLEAN naming @who, the field, have and expect. lvm2
 * reads these as unsigned 32-bit numbers and refuses a VG whose counts
 * disagree with what it lists (import_vsn1.c); a negative value or one
 * past 32 bits is refused here before it can size or drive any work.
 */
static int get_count(const struct tnode *s, const char *field, uint64_t lo, uint64_t hi,
		     const char *who, uint64_t *out, char *err, size_t errlen)
{
	struct tnode *n = child(s, field);
	if (!n)
		return bi_msg(err, errlen, -EUCLEAN, "LVM metadata: %s: no %s", who, field);
	if (n->kind != T_INT)
		return bi_msg(err, errlen, -EUCLEAN, "LVM metadata: %s: %s is not a number", who,
			      field);
	if (n->num < 0 || (uint64_t)n->num < lo || (uint64_t)n->num > hi)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata: %s: %s have %" PRId64 " expect %" PRIu64 "..%" PRIu64,
			      who, field, n->num, lo, hi);
	*out = (uint64_t)n->num;
	return 1;
}

/* @field of @s, which must equal @listed (what the text lists). */
static int check_count(const struct tnode *s, const char *field, uint64_t listed, const char *who,
		       const char *what, char *err, size_t errlen)
{
	uint64_t have;
	int rc = get_count(s, field, 0, UINT32_MAX, who, &have, err, errlen);
	if (rc < 0)
		return rc;
	if (have != listed)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata: %s: %s have %" PRIu64 " expect %" PRIu64 " (the %s "
			      "listed)",
			      who, field, have, listed, what);
	return 0;
}

static const char *get_str(const struct tnode *s, const char *name)
{
	struct tnode *n = child(s, name);
	return n && n->kind == T_STR ? n->str : NULL;
}

static bool has_flag(const struct tnode *s, const char *list, const char *flag)
{
	struct tnode *n = child(s, list);
	for (struct tnode *v = n && n->kind == T_LIST ? n->kids : NULL; v; v = v->next)
		if (v->kind == T_STR && strcmp(v->str, flag) == 0)
			return true;
	return false;
}

/* ---------------------------------------------------------------- */
/* From the tree to the VG */

static int find_pv(const struct bi_lvm_vg *vg, const char *name)
{
	for (int i = 0; i < vg->npv; i++)
		if (strcmp(vg->pvs[i].name, name) == 0)
			return i;
	return -1;
}

static int find_lv(const struct bi_lvm_vg *vg, const char *name)
{
	for (int i = 0; i < vg->nlv; i++)
		if (strcmp(vg->lvs[i].name, name) == 0)
			return i;
	return -1;
}

static int count(const struct tnode *s)
{
	int n = 0;
	for (struct tnode *k = s ? s->kids : NULL; k; k = k->next)
		n += k->kind == T_SECTION && k->kids != NULL;
	return n;
}

static int load_pvs(struct bi_lvm_vg *vg, const struct tnode *s, char *err, size_t errlen)
{
	vg->pvs = calloc((size_t)count(s) + 1, sizeof(*vg->pvs));
	if (!vg->pvs)
		return -ENOMEM;
	for (struct tnode *k = s ? s->kids : NULL; k; k = k->next) {
		if (k->kind != T_SECTION)
			continue;
		struct bi_lvm_pv *p = &vg->pvs[vg->npv];
		const char *id = get_str(k, "id");
		uint64_t pe_start;
		char who[300];
		snprintf(who, sizeof(who), "PV '%s'", k->name);
		if (!id || strlen(id) >= sizeof(p->id) || strlen(k->name) >= sizeof(p->name))
			return bi_msg(err, errlen, -EUCLEAN,
				      "LVM metadata: physical volume '%s' lacks a valid id",
				      k->name);
		int rc = get_count(k, "pe_start", 0, UINT64_MAX >> 10, who, &pe_start, err, errlen);
		if (rc > 0)
			rc = get_count(k, "pe_count", 0, UINT32_MAX, who, &p->pe_count, err, errlen);
		if (rc < 0)
			return rc;
		snprintf(p->name, sizeof(p->name), "%s", k->name);
		snprintf(p->id, sizeof(p->id), "%s", id);
		p->pe_start = pe_start * SECTOR;
		p->dev = -1;
		vg->npv++;
	}
	return 0;
}

static const char *const refused_types[] = {
	"thin",	      "thin-pool", "snapshot", "cache",	     "cache-pool", "vdo",      "vdo-pool",
	"writecache", "integrity", "raid0",    "raid0_meta", "raid4",	   "raid5",    "raid5_la",
	"raid5_ls",   "raid5_ra",  "raid5_rs", "raid5_n",    "raid6",	   "raid6_zr", "raid6_nr",
	"raid6_nc",   "raid10",	   "error",    "zero",	     "free",	   NULL,
};

/* Areas of a "stripes" list (pv, extent pairs) or of "mirrors"/"raids". */
static int seg_areas(struct bi_lvm_vg *vg, struct bi_lvm_lv *lv, struct bi_lvm_seg *g,
		     const struct tnode *list, bool raid, char *err, size_t errlen)
{
	int n = 0;
	for (struct tnode *v = list ? list->kids : NULL; v; v = v->next)
		n++;
	if (!list || list->kind != T_LIST || n == 0 || n > 2 * AREAS_MAX || n % 2)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata: LV '%s': segment at extent %" PRIu64
			      " has no valid area list",
			      lv->name, g->start);
	g->areas = calloc((size_t)n / 2, sizeof(*g->areas));
	if (!g->areas)
		return -ENOMEM;
	for (struct tnode *v = list->kids; v; v = v->next->next) {
		struct tnode *w = v->next;
		struct bi_lvm_area *a = &g->areas[g->narea];
		if (v->kind != T_STR || (!raid && (w->kind != T_INT || w->num < 0)) ||
		    (raid && w->kind != T_STR))
			return bi_msg(err, errlen, -EUCLEAN,
				      "LVM metadata: LV '%s': bad area list entry", lv->name);
		a->pv = g->kind == BI_LVM_STRIPED ? find_pv(vg, v->str) : -1;
		a->lv = -1; /* a mirror leg: resolved once every LV is known */
		a->start = raid ? 0 : (uint64_t)w->num;
		if (g->kind == BI_LVM_STRIPED && a->pv < 0)
			return bi_msg(err, errlen, -EUCLEAN,
				      "LVM metadata: LV '%s' names an unknown PV '%s'", lv->name,
				      v->str);
		g->narea++;
	}
	return 0;
}

static int load_seg(struct bi_lvm_vg *vg, struct bi_lvm_lv *lv, struct bi_lvm_seg *g,
		    const struct tnode *s, char *err, size_t errlen)
{
	const char *type = get_str(s, "type");
	char who[300];
	snprintf(who, sizeof(who), "LV '%s' %s", lv->name, s->name);
	if (!type)
		return bi_msg(err, errlen, -EUCLEAN, "LVM metadata: %s: no type", who);
	int rc = get_count(s, "start_extent", 0, UINT32_MAX, who, &g->start, err, errlen);
	if (rc > 0)
		rc = get_count(s, "extent_count", 1, UINT32_MAX, who, &g->count, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(g->type, sizeof(g->type), "%s", type);
	for (int i = 0; refused_types[i]; i++)
		if (strcmp(type, refused_types[i]) == 0) {
			snprintf(lv->refused, sizeof(lv->refused), "%s", type);
			return 0;
		}
	if (strcmp(type, "striped") == 0) {
		uint64_t stripes = 0, ss = 0;
		g->kind = BI_LVM_STRIPED;
		rc = get_count(s, "stripe_count", 1, AREAS_MAX, who, &stripes, err, errlen);
		if (rc > 0 && stripes > 1)
			rc = get_count(s, "stripe_size", 1, 1u << 22, who, &ss, err, errlen);
		if (rc < 0)
			return rc;
		if (g->count % stripes)
			return bi_msg(err, errlen, -EUCLEAN,
				      "LVM metadata: %s: extent_count %" PRIu64
				      " is not a multiple of stripe_count %" PRIu64,
				      who, g->count, stripes);
		g->stripe_bytes = ss * SECTOR;
		rc = seg_areas(vg, lv, g, child(s, "stripes"), false, err, errlen);
		if (rc == 0 && (uint64_t)g->narea != stripes)
			rc = bi_msg(err, errlen, -EUCLEAN,
				    "LVM metadata: %s: stripe_count have %" PRIu64
				    " expect %d (the stripes listed)",
				    who, stripes, g->narea);
		return rc;
	}
	if (strcmp(type, "mirror") == 0 || strcmp(type, "raid1") == 0) {
		bool raid = type[0] == 'r';
		g->kind = BI_LVM_MIRROR;
		rc = seg_areas(vg, lv, g, child(s, raid ? "raids" : "mirrors"), raid, err, errlen);
		if (rc == 0) /* lvm2 reads the leg count first and sizes the list by it */
			rc = check_count(s, raid ? "device_count" : "mirror_count",
					 (uint64_t)g->narea, who, raid ? "rmeta/rimage pairs" : "legs",
					 err, errlen);
		return rc;
	}
	snprintf(lv->refused, sizeof(lv->refused), "%s", type);
	return 0;
}

static int load_lv(struct bi_lvm_vg *vg, struct bi_lvm_lv *lv, const struct tnode *s, char *err,
		   size_t errlen)
{
	snprintf(lv->name, sizeof(lv->name), "%s", s->name);
	const char *id = get_str(s, "id");
	snprintf(lv->id, sizeof(lv->id), "%s", id ? id : "");
	lv->visible = has_flag(s, "status", "VISIBLE");
	int n = 0;
	for (struct tnode *k = s->kids; k; k = k->next)
		n += k->kind == T_SECTION && strncmp(k->name, "segment", 7) == 0 && k->kids;
	char who[300];
	snprintf(who, sizeof(who), "LV '%s'", lv->name);
	int rc = check_count(s, "segment_count", (uint64_t)n, who, "segments", err, errlen);
	if (rc < 0)
		return rc;
	lv->segs = calloc((size_t)n + 1, sizeof(*lv->segs));
	if (!lv->segs)
		return -ENOMEM;
	for (struct tnode *k = s->kids; k; k = k->next) {
		if (k->kind != T_SECTION || strncmp(k->name, "segment", 7) != 0 || !k->kids)
			continue;
		rc = load_seg(vg, lv, &lv->segs[lv->nseg++], k, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Segments sorted by start_extent must tile [0, extents) without holes. */
static int check_lv(struct bi_lvm_lv *lv, char *err, size_t errlen)
{
	for (int i = 1; i < lv->nseg; i++)
		for (int j = i; j > 0 && lv->segs[j].start < lv->segs[j - 1].start; j--) {
			struct bi_lvm_seg t = lv->segs[j];
			lv->segs[j] = lv->segs[j - 1];
			lv->segs[j - 1] = t;
		}
	uint64_t at = 0;
	for (int i = 0; i < lv->nseg; i++) {
		if (lv->segs[i].start != at || lv->segs[i].count > (UINT64_MAX >> 24) - at)
			return bi_msg(err, errlen, -EUCLEAN,
				      "LVM metadata: LV '%s': segment at extent %" PRIu64
				      ", expect %" PRIu64 " (a gap or overlap)",
				      lv->name, lv->segs[i].start, at);
		at += lv->segs[i].count;
	}
	lv->extents = at;
	return 0;
}

/* Mirror legs name sub-LVs: resolve them, check extents against PVs. */
static int link_lv(struct bi_lvm_vg *vg, struct bi_lvm_lv *lv, const struct tnode *s, char *err,
		   size_t errlen)
{
	for (int i = 0; i < lv->nseg; i++) {
		struct bi_lvm_seg *g = &lv->segs[i];
		if (lv->refused[0])
			return 0;
		if (g->narea <= 0) /* every read picks an area: a segment needs one */
			return bi_msg(
				err, errlen, -EUCLEAN,
				"LVM metadata: LV '%s': segment at extent %" PRIu64 " lists no %s",
				lv->name, g->start, g->kind == BI_LVM_STRIPED ? "stripes" : "legs");
		if (g->kind == BI_LVM_STRIPED) {
			uint64_t per = g->count / (uint64_t)g->narea;
			for (int a = 0; a < g->narea; a++) {
				const struct bi_lvm_pv *p = &vg->pvs[g->areas[a].pv];
				if (g->areas[a].start > p->pe_count ||
				    per > p->pe_count - g->areas[a].start)
					return bi_msg(err, errlen, -EUCLEAN,
						      "LVM metadata: LV '%s': extents %" PRIu64
						      "+%" PRIu64
						      " past the end of PV '%s' (%" PRIu64
						      " extents)",
						      lv->name, g->areas[a].start, per, p->name,
						      p->pe_count);
			}
			continue;
		}
		/* find the names again in the text: mirrors/raids lists */
		const struct tnode *seg = NULL;
		for (struct tnode *c = s->kids; c; c = c->next)
			if (c->kind == T_SECTION && strncmp(c->name, "segment", 7) == 0 &&
			    c->kids) {
				uint64_t st;
				if (get_u64(c, "start_extent", &st) && st == g->start)
					seg = c;
			}
		bool raid = strcmp(g->type, "raid1") == 0;
		const struct tnode *list = child(seg, raid ? "raids" : "mirrors");
		int a = 0, idx = 0;
		for (struct tnode *v = list ? list->kids : NULL; v && a < g->narea;
		     v = v->next, idx++) {
			/* mirrors: name, extent; raids: rmeta, rimage (the data leg) */
			if (idx % 2 != (raid ? 1 : 0))
				continue;
			g->areas[a].lv = v->kind == T_STR ? find_lv(vg, v->str) : -1;
			if (g->areas[a].lv < 0 || g->areas[a].lv == (int)(lv - vg->lvs))
				return bi_msg(err, errlen, -EUCLEAN,
					      "LVM metadata: LV '%s': unknown leg '%s'", lv->name,
					      v->kind == T_STR ? v->str : "?");
			a++;
		}
	}
	return 0;
}

/* An old-style snapshot: a hidden LV of segment type "snapshot" names its
 * origin and its copy-on-write store, the visible LV the user sees as the
 * snapshot. The store holds exceptions, not a filesystem: refuse it by
 * name (the origin reads as itself). */
static void mark_cow(struct bi_lvm_vg *vg, const struct tnode *lvnode)
{
	for (struct tnode *c = lvnode->kids; c; c = c->next) {
		const char *t = c->kind == T_SECTION ? get_str(c, "type") : NULL;
		const char *cow = t && strcmp(t, "snapshot") == 0 ? get_str(c, "cow_store") : NULL;
		int lv = cow ? find_lv(vg, cow) : -1;
		if (lv >= 0)
			snprintf(vg->lvs[lv].refused, sizeof(vg->lvs[lv].refused), "snapshot");
	}
}

static int load_vg(struct bi_lvm_vg *vg, const struct tnode *s, char *err, size_t errlen)
{
	const char *id = get_str(s, "id");
	uint64_t es = 0;
	snprintf(vg->name, sizeof(vg->name), "%s", s->name);
	if (!id || !get_u64(s, "seqno", &vg->seqno) || !get_u64(s, "extent_size", &es) || es == 0 ||
	    es > (1u << 24))
		return bi_msg(err, errlen, -EUCLEAN,
			      "LVM metadata: VG '%s' lacks id, seqno or a valid extent_size",
			      s->name);
	snprintf(vg->id, sizeof(vg->id), "%s", id);
	vg->extent_bytes = es * SECTOR;
	int rc = load_pvs(vg, child(s, "physical_volumes"), err, errlen);
	const struct tnode *lvs = child(s, "logical_volumes");
	if (rc == 0) {
		vg->lvs = calloc((size_t)count(lvs) + 1, sizeof(*vg->lvs));
		rc = vg->lvs ? 0 : -ENOMEM;
	}
	for (struct tnode *k = lvs ? lvs->kids : NULL; rc == 0 && k; k = k->next)
		if (k->kind == T_SECTION && k->kids) {
			rc = load_lv(vg, &vg->lvs[vg->nlv++], k, err, errlen);
			if (rc == 0)
				rc = check_lv(&vg->lvs[vg->nlv - 1], err, errlen);
		}
	int i = 0;
	for (struct tnode *k = lvs ? lvs->kids : NULL; rc == 0 && k; k = k->next)
		if (k->kind == T_SECTION && k->kids) {
			mark_cow(vg, k);
			rc = link_lv(vg, &vg->lvs[i++], k, err, errlen);
		}
	return rc;
}

int bi_lvm_parse(const char *text, size_t len, struct bi_lvm_vg *vg, char *err, size_t errlen)
{
	struct lex x = { text, text + len, 0, err, errlen, 1 };
	struct tnode *root = NULL;
	memset(vg, 0, sizeof(*vg));
	int rc = items(&x, &root, 0);
	struct tnode *s = NULL;
	for (struct tnode *k = root; rc == 0 && k; k = k->next)
		if (k->kind == T_SECTION && child(k, "physical_volumes")) {
			s = k;
			break;
		}
	if (rc == 0 && !s)
		rc = bi_msg(err, errlen, -EUCLEAN, "LVM metadata: no volume group section");
	if (rc == 0)
		rc = load_vg(vg, s, err, errlen);
	tfree(root);
	if (rc < 0)
		bi_lvm_vg_free(vg);
	return rc;
}

/* seqno of a text that parses as a whole VG (the ring's candidates). */
static int parse_seqno(const char *t, size_t len, uint64_t *seqno)
{
	struct bi_lvm_vg vg;
	char err[8];
	int rc = bi_lvm_parse(t, len, &vg, err, sizeof(err));
	if (rc == 0) {
		*seqno = vg.seqno;
		bi_lvm_vg_free(&vg);
	}
	return rc;
}

void bi_lvm_vg_free(struct bi_lvm_vg *vg)
{
	for (int i = 0; vg->lvs && i < vg->nlv; i++) {
		for (int j = 0; j < vg->lvs[i].nseg; j++)
			free(vg->lvs[i].segs[j].areas);
		free(vg->lvs[i].segs);
	}
	free(vg->lvs);
	free(vg->pvs);
	memset(vg, 0, sizeof(*vg));
}

bool bi_lvm_same_id(const char *a, const char *b)
{
	for (;;) {
		while (*a == '-')
			a++;
		while (*b == '-')
			b++;
		if (*a != *b)
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

/* ---------------------------------------------------------------- */
/* The byte map */

uint64_t bi_lvm_lv_size(const struct bi_lvm_vg *vg, int lv)
{
	uint64_t ext = vg->lvs[lv].extents;
	return ext > UINT64_MAX / vg->extent_bytes ? 0 : ext * vg->extent_bytes;
}

static bool complete(const struct bi_lvm_vg *vg, int lv, int depth, char *why, size_t whylen)
{
	const struct bi_lvm_lv *l = &vg->lvs[lv];
	if (depth > LV_DEPTH_MAX) {
		snprintf(why, whylen, "legs nested too deep");
		return false;
	}
	for (int i = 0; i < l->nseg; i++) {
		const struct bi_lvm_seg *g = &l->segs[i];
		bool any = false;
		for (int a = 0; a < g->narea; a++) {
			if (g->kind == BI_LVM_STRIPED && vg->pvs[g->areas[a].pv].dev < 0) {
				snprintf(why, whylen, "needs missing PV %s (%s)",
					 vg->pvs[g->areas[a].pv].name, vg->pvs[g->areas[a].pv].id);
				return false;
			}
			if (g->kind == BI_LVM_MIRROR)
				any |= g->areas[a].lv >= 0 &&
				       complete(vg, g->areas[a].lv, depth + 1, why, whylen);
		}
		if (g->kind == BI_LVM_MIRROR && !any)
			return false;
	}
	return true;
}

bool bi_lvm_lv_complete(const struct bi_lvm_vg *vg, int lv, char *why, size_t whylen)
{
	if (vg->lvs[lv].refused[0]) {
		snprintf(why, whylen, "segment type '%s' not supported", vg->lvs[lv].refused);
		return false;
	}
	return complete(vg, lv, 0, why, whylen);
}

struct lvrd {
	const struct bi_lvm_vg *vg;
	bi_lvm_pv_read_fn rd;
	void *ctx;
	char *err;
	size_t errlen;
	char note[300]; /* a leg that failed, the read served by another */
};

static int lv_read(struct lvrd *r, int lv, int depth, uint64_t off, uint8_t *buf, size_t len);

static int seg_read(struct lvrd *r, const struct bi_lvm_lv *l, const struct bi_lvm_seg *g,
		    int depth, uint64_t in, uint8_t *buf, size_t n)
{
	const struct bi_lvm_vg *vg = r->vg;
	if (g->kind == BI_LVM_MIRROR) {
		int rc = -EIO, failed = -1;
		for (int a = 0; a < g->narea; a++) {
			if (g->areas[a].lv < 0)
				continue;
			uint64_t at = g->areas[a].start * vg->extent_bytes + in;
			rc = lv_read(r, g->areas[a].lv, depth + 1, at, buf, n);
			if (rc == 0 && failed >= 0 && !r->note[0])
				snprintf(r->note, sizeof(r->note),
					 "LV %.40s/%.40s: leg %.48s failed at byte %" PRIu64
					 "; read from leg %.48s",
					 vg->name, l->name, vg->lvs[g->areas[failed].lv].name,
					 g->start * vg->extent_bytes + in,
					 vg->lvs[g->areas[a].lv].name);
			if (rc == 0)
				return 0;
			failed = failed < 0 ? a : failed;
		}
		return rc;
	}
	uint64_t stripe = 0, at = in;
	if (g->narea > 1) {
		uint64_t chunk = in / g->stripe_bytes;
		stripe = chunk % (uint64_t)g->narea;
		at = chunk / (uint64_t)g->narea * g->stripe_bytes + in % g->stripe_bytes;
	}
	const struct bi_lvm_area *a = &g->areas[stripe];
	const struct bi_lvm_pv *p = &vg->pvs[a->pv];
	if (p->dev < 0)
		return bi_msg(r->err, r->errlen, -EIO,
			      "LV %s/%s: bytes at %" PRIu64 " lie on missing PV %s", vg->name,
			      l->name, g->start * vg->extent_bytes + in, p->name);
	return r->rd(r->ctx, a->pv, p->pe_start + a->start * vg->extent_bytes + at, buf, n);
}

static int lv_read(struct lvrd *r, int lv, int depth, uint64_t off, uint8_t *buf, size_t len)
{
	const struct bi_lvm_vg *vg = r->vg;
	const struct bi_lvm_lv *l = &vg->lvs[lv];
	if (depth > LV_DEPTH_MAX || l->refused[0])
		return bi_msg(r->err, r->errlen, -EIO, "LV %s/%s cannot be read", vg->name,
			      l->name);
	while (len > 0) {
		uint64_t ext = off / vg->extent_bytes;
		int i = 0;
		while (i < l->nseg && ext >= l->segs[i].start + l->segs[i].count)
			i++;
		if (i == l->nseg)
			return bi_msg(r->err, r->errlen, -EIO,
				      "LV %s/%s: read at byte %" PRIu64 " past its end", vg->name,
				      l->name, off);
		const struct bi_lvm_seg *g = &l->segs[i];
		uint64_t in = off - g->start * vg->extent_bytes;
		uint64_t room = (g->start + g->count) * vg->extent_bytes - off;
		if (g->kind == BI_LVM_STRIPED && g->narea > 1)
			room = g->stripe_bytes - in % g->stripe_bytes;
		size_t n = room < len ? (size_t)room : len;
		int rc = seg_read(r, l, g, depth, in, buf, n);
		if (rc)
			return rc < 0 ? rc : -EIO;
		off += n;
		buf += n;
		len -= n;
	}
	return 0;
}

int bi_lvm_read(const struct bi_lvm_vg *vg, int lv, bi_lvm_pv_read_fn rd, void *ctx, uint64_t off,
		void *buf, size_t len, char *err, size_t errlen)
{
	struct lvrd r = { vg, rd, ctx, err, errlen, "" };
	uint64_t size = bi_lvm_lv_size(vg, lv);
	if (!bi_fits64(size, off, len))
		return bi_msg(err, errlen, -EIO,
			      "LV %s/%s: read of %zu bytes at %" PRIu64 " past its end (%" PRIu64
			      " bytes)",
			      vg->name, vg->lvs[lv].name, len, off, size);
	int rc = lv_read(&r, lv, 0, off, buf, len);
	if (rc == 0 && r.note[0])
		snprintf(err, errlen, "%s", r.note);
	return rc;
}
