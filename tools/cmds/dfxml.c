// SPDX-License-Identifier: MIT
/*
 * btrfsimg dfxml: Digital Forensics XML (DFXML 2.0.0-beta.0, the format of
 * fiwalk and The Sleuth Kit's tools), valid against the schema committed
 * under testdata/dfxml/schema/. One <volume> for the filesystem, then one
 * <fileobject> per path as walk visits it (every subvolume reached from
 * the start), then with --deleted one per recovered version.
 *
 * The elements fiwalk writes keep their meaning: <id> is SUBVOL-OBJECTID
 * as in bodyfile (a recovered version's own id), <inode> the objectid with
 * its subvolume in btrfsimg:subvol (the schema wants a bare number),
 * <mode> the permission bits (TSK's mode; the type is <name_type> and
 * <meta_type>, TSK's TSK_FS_META_TYPE numbers), alloc 1 for live files and
 * alloc 0 / unalloc 1 for recovered versions, as fiwalk marks a deleted
 * file. What DFXML has no element for goes in the btrfsimg namespace,
 * which the schema allows (##other) at the end of a fileobject and as
 * attributes.
 *
 * Names: DFXML text is XML 1.0 in UTF-8, which cannot carry every byte a
 * btrfs name may hold. A path that is valid UTF-8 of printable characters
 * without a backslash is written as it is; any other is written escaped as
 * the text output escapes names (text.h: "\\", "\n", "\t", "\r", "\xNN"),
 * marked btrfsimg:escaped="1", so undoing the escapes gives the exact bytes.
 *
 * XML is written with libxml2's xmlTextWriter (escaping of <, &, quotes);
 * the first write error stops the command (exit 2) and leaves the document
 * unterminated, so an incomplete file never validates.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <libxml/xmlversion.h>
#include <libxml/xmlwriter.h>

#include "cli.h"
#include "common/digest.h"
#include "common/json.h"
#include "common/outfile.h"
#include "common/recovered.h"
#include "common/text.h"
#include "common/visit.h"

#define DFXML_NS "http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML"
#define DFXML_VERSION "2.0.0-beta.0"
#define DC_NS "http://purl.org/dc/elements/1.1/"
/* Our extensions' namespace: a name, never fetched. */
#define BTRFSIMG_NS "urn:btrfsimg:dfxml"

struct dfx {
	struct cli *c;
	xmlTextWriterPtr w;
	bool failed;		/* a write failed: stop, leave the document open */
	btrfsimg_forensic *f;	/* --deleted */
};

/* ------------------------------------------------------------ writing */

static const xmlChar *X(const char *s)
{
	return (const xmlChar *)s;
}

static void ok(struct dfx *d, int rc)
{
	if (rc < 0)
		d->failed = true;
}

static void start(struct dfx *d, const char *name)
{
	ok(d, xmlTextWriterStartElement(d->w, X(name)));
}

static void end(struct dfx *d)
{
	ok(d, xmlTextWriterEndElement(d->w));
}

static void attr(struct dfx *d, const char *name, const char *value)
{
	ok(d, xmlTextWriterWriteAttribute(d->w, X(name), X(value)));
}

static void attr_u64(struct dfx *d, const char *name, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRIu64, v);
	attr(d, name, s);
}

static void el(struct dfx *d, const char *name, const char *text)
{
	ok(d, xmlTextWriterWriteElement(d->w, X(name), X(text)));
}

static void el_u64(struct dfx *d, const char *name, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRIu64, v);
	el(d, name, s);
}

/* Length of the character at @s if XML 1.0 can carry it as it is and the
 * text output would not escape it (text.h), else 0: printable ASCII but
 * the backslash, and valid UTF-8 past U+009F except U+FFFE and U+FFFF
 * (XML's Char excludes them; surrogates are not valid UTF-8). */
static size_t xml_plain_len(const uint8_t *s, size_t n)
{
	if (s[0] < 0x80)
		return s[0] >= 0x20 && s[0] < 0x7f && s[0] != '\\';
	size_t len = jw_utf8_len(s, n);
	if (len == 2 && s[0] == 0xc2 && s[1] < 0xa0)
		return 0; /* C1 controls */
	if (len == 3 && s[0] == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf))
		return 0; /* U+FFFE, U+FFFF */
	return len;
}

/* @s[0..@n) as element text: as it is, or escaped and marked (the
 * file's header comment). */
static void el_name(struct dfx *d, const char *name, const uint8_t *s, size_t n)
{
	size_t i = 0, len;
	while (i < n && (len = xml_plain_len(s + i, n - i)) > 0)
		i += len;
	start(d, name);
	if (i == n) {
		struct jw w = { 0 };
		jw_raw(&w, (const char *)s, n);
		jw_raw(&w, "", 1);
		ok(d, xmlTextWriterWriteString(d->w, X(w.buf)));
		jw_line_free(&w);
		end(d);
		return;
	}
	attr(d, "btrfsimg:escaped", "1");
	struct jw w = { 0 };
	for (i = 0; i < n; i += len) {
		len = xml_plain_len(s + i, n - i);
		if (len) {
			jw_raw(&w, (const char *)s + i, len);
			continue;
		}
		text_name_jw(&w, s + i, 1, NULL); /* one byte: "\\", "\n", "\xNN"... */
		len = 1;
	}
	jw_raw(&w, "", 1);
	ok(d, xmlTextWriterWriteString(d->w, X(w.buf)));
	jw_line_free(&w);
	end(d);
}

/* xs:dateTime in UTC with nanoseconds; a time it cannot hold (before year
 * 1 or after 9999, nanoseconds past 999999999) is left out. */
static void el_time(struct dfx *d, const char *name, const struct btrfsimg_timespec *t)
{
	char s[TEXT_TIME_MAX];
	if (t->nsec > 999999999u)
		return;
	text_time(s, t->sec, t->nsec);
	if (s[0] == '@' || strncmp(s, "0000", 4) == 0)
		return;
	el(d, name, s);
}

/* ------------------------------------------------------------ one file */

/* TSK's TSK_FS_META_TYPE and name type letters (tsk_fs.h), which DFXML's
 * meta_type and name_type carry. */
static void file_type(uint32_t mode, unsigned *meta, const char **name)
{
	switch (mode & S_IFMT) {
	case S_IFREG: *meta = 1; *name = "r"; return;
	case S_IFDIR: *meta = 2; *name = "d"; return;
	case S_IFIFO: *meta = 3; *name = "p"; return;
	case S_IFCHR: *meta = 4; *name = "c"; return;
	case S_IFBLK: *meta = 5; *name = "b"; return;
	case S_IFLNK: *meta = 6; *name = "l"; return;
	case S_IFSOCK: *meta = 8; *name = "s"; return;
	default: *meta = 0; *name = "-"; return;
	}
}

/* What a fileobject says besides its inode: gathered before it is
 * written, since <error> comes before everything the reads give. */
struct fobj {
	const uint8_t *path;
	size_t path_len;
	char id[160];
	bool recovered;
	bool has_parent;
	uint64_t parent_subvol, parent_objectid;
	uint64_t subvol, objectid;
	const struct btrfsimg_inode *inode;
	uint8_t *target;	/* symlink target (malloc'd) */
	size_t target_len;
	char md5[2 * 64 + 1], sha256[2 * 64 + 1];	/* "" when not computed */
	struct jw err;		/* messages, "; " between them */
	struct runs *runs;	/* NULL: none listed */
	const struct btrfsimg_recovered *rec;
};

static void fobj_error(struct dfx *d, struct fobj *o, const char *what, const char *msg)
{
	if (o->err.len)
		jw_raw(&o->err, "; ", 2);
	jw_raw(&o->err, what, strlen(what));
	jw_raw(&o->err, ": ", 2);
	jw_raw(&o->err, msg, strlen(msg));
	jw_grow(&o->err, 1);
	o->err.buf[o->err.len] = '\0'; /* kept terminated, not counted */
	cli_warn("%.*s: %s: %s", (int)o->path_len, (const char *)o->path, what, msg);
	d->c->errors++;
}

static bool runs_compressed(const struct runs *r);

static void put_inode(struct dfx *d, const struct fobj *o)
{
	const struct btrfsimg_inode *i = o->inode;
	unsigned meta;
	const char *ntype;
	file_type(i->mode, &meta, &ntype);
	el(d, "name_type", ntype);
	if (!i->synthesized) /* a made-up root directory's size is unknown */
		el_u64(d, "filesize", i->size);
	if (o->recovered)
		el(d, "unalloc", "1");
	el(d, "alloc", o->recovered ? "0" : "1");
	if ((o->rec && o->rec->compressed) || runs_compressed(o->runs))
		el(d, "compressed", "1");
	start(d, "inode");
	attr_u64(d, "btrfsimg:subvol", o->subvol);
	ok(d, xmlTextWriterWriteFormatString(d->w, "%" PRIu64, o->objectid));
	end(d);
	el_u64(d, "meta_type", meta);
	el_u64(d, "mode", i->mode & 07777);
	el_u64(d, "nlink", i->nlink);
	if (i->synthesized)
		return; /* owner and times unknown: left out */
	el_u64(d, "uid", i->uid);
	el_u64(d, "gid", i->gid);
	el_time(d, "mtime", &i->mtime);
	el_time(d, "ctime", &i->ctime);
	el_time(d, "atime", &i->atime);
	el_time(d, "crtime", &i->otime);
}

static void put_hashes(struct dfx *d, const struct fobj *o)
{
	static const char *const algs[] = { "md5", "sha256" };
	const char *hex[] = { o->md5, o->sha256 };
	for (int k = 0; k < 2; k++) {
		if (!hex[k][0])
			continue;
		start(d, "hashdigest");
		attr(d, "type", algs[k]);
		ok(d, xmlTextWriterWriteString(d->w, X(hex[k])));
		end(d);
	}
}

/* The btrfsimg elements after DFXML's own. */
static void put_extensions(struct dfx *d, const struct fobj *o)
{
	if (o->inode->synthesized) { /* a lost root directory, made up */
		el(d, "btrfsimg:synthesized", "1");
		return;
	}
	el_u64(d, "btrfsimg:inode_generation", o->inode->generation);
	el_u64(d, "btrfsimg:transid", o->inode->transid);
	if (!o->rec)
		return;
	/* as deleted --json names them */
	el(d, "btrfsimg:kind", btrfsimg_recovered_kind_name(o->rec->kind));
	el(d, "btrfsimg:status", btrfsimg_recovered_status_name(o->rec->status));
	el_u64(d, "btrfsimg:generation", o->rec->generation);
	el(d, "btrfsimg:verified", o->rec->verified ? "1" : "0");
	for (size_t k = 0; k < o->rec->nbad; k++) {
		start(d, "btrfsimg:bad_range");
		attr_u64(d, "file_offset", o->rec->bad[k].offset);
		attr_u64(d, "len", o->rec->bad[k].length);
		attr(d, "why", o->rec->bad[k].why);
		end(d);
	}
}

/* ------------------------------------------------------------ byte runs */

/* A file's records from the forward map (btrfsimg_extents), gathered
 * before the fileobject is written; kept in a jw buffer, the CLI's one
 * growth helper. Each is written as one <byte_run>:
 *   regular data   file_offset, len, fs_offset (the byte offset in the
 *                  btrfs device: what fiwalk's fs_offset is on a
 *                  one-device filesystem), img_offset (in the image file,
 *                  when the bytes lie there as they are: raw images),
 *                  btrfsimg:logical, btrfsimg:devid, btrfsimg:image (which
 *                  <image_filename>, from 1), btrfsimg:disk_offset (in the
 *                  disk a container holds), btrfsimg:other_copies
 *                  ("DEVID:PHYSICAL:IMAGE:IMG_OFFSET ...", "-" for none:
 *                  DUP and RAID1 copies), btrfsimg:csum (what checks the
 *                  bytes: full, partial, none, nodatasum); compressed: len is the bytes on disk,
 *                  uncompressed_len the file range's, btrfsimg:compression;
 *   inline         type="resident", as TSK marks data inside metadata;
 *   hole, prealloc fill="0" (they read as zeros), btrfsimg:type;
 * a recovered version's runs (btrfsimg_forensic_extents) the same, plus
 * btrfsimg:bad where they overlap its bad ranges. */
struct runs {
	struct jw buf;	/* struct btrfsimg_extent, one after another */
	size_t n;
};

static void runs_free(struct runs *r)
{
	if (r)
		jw_line_free(&r->buf);
	free(r);
}

static const struct btrfsimg_extent *run_at(const struct runs *r, size_t k)
{
	size_t at = k * sizeof(struct btrfsimg_extent);
	return (const struct btrfsimg_extent *)(void *)(r->buf.buf + at);
}

/* Whether any of a live file's data is stored compressed (fiwalk's
 * <compressed>). */
static bool runs_compressed(const struct runs *r)
{
	for (size_t k = 0; r && k < r->n; k++)
		if (run_at(r, k)->compression)
			return true;
	return false;
}

static int image_index(const struct cli *c, const char *device)
{
	for (int i = 0; device && i < c->nimages; i++)
		if (strcmp(c->images[i], device) == 0)
			return i + 1;
	return 0;
}

static void put_copies(struct dfx *d, const struct btrfsimg_extent *e)
{
	const struct btrfsimg_extent_copy *c0 = &e->copies[0];
	attr_u64(d, "fs_offset", c0->physical);
	if (c0->has_image_offset)
		attr_u64(d, "img_offset", c0->image_offset);
	attr_u64(d, "btrfsimg:logical", e->logical);
	attr_u64(d, "btrfsimg:devid", c0->devid);
	int img = image_index(d->c, c0->device);
	if (img)
		attr_u64(d, "btrfsimg:image", (uint64_t)img);
	if (c0->has_disk_offset && !c0->has_image_offset)
		attr_u64(d, "btrfsimg:disk_offset", c0->disk_offset);
	if (c0->note && c0->note[0])
		attr(d, "btrfsimg:note", c0->note);
	if (e->ncopies < 2)
		return;
	struct jw w = { 0 };
	char one[96], img_s[24], off_s[24];
	for (size_t k = 1; k < e->ncopies && k < BTRFSIMG_EXTENT_COPIES_MAX; k++) {
		const struct btrfsimg_extent_copy *ck = &e->copies[k];
		int ik = image_index(d->c, ck->device);
		snprintf(img_s, sizeof(img_s), ik ? "%d" : "-", ik);
		snprintf(off_s, sizeof(off_s), ck->has_image_offset ? "%" PRIu64 : "-",
			 ck->image_offset);
		int n = snprintf(one, sizeof(one), "%s%" PRIu64 ":%" PRIu64 ":%s:%s",
				 k > 1 ? " " : "", ck->devid, ck->physical, img_s, off_s);
		jw_raw(&w, one, (size_t)n);
	}
	jw_raw(&w, "", 1);
	attr(d, "btrfsimg:other_copies", w.buf);
	jw_line_free(&w);
}

/* What checks the run's bytes when they are read: "full", "partial" (with
 * the bytes covered), "none", "nodatasum", "inline". */
static void put_csum(struct dfx *d, const struct btrfsimg_extent *e)
{
	const char *name = btrfsimg_csum_cover_name(e->csum);
	if (!name)
		return;
	attr(d, "btrfsimg:csum", name);
	if (e->csum == BTRFSIMG_CSUM_PARTIAL)
		attr_u64(d, "btrfsimg:csum_bytes", e->csum_bytes);
}

static void put_compression(struct dfx *d, const struct btrfsimg_extent *e)
{
	static const char *const comp[] = { "none", "zlib", "lzo", "zstd" };
	if (e->compression)
		attr(d, "btrfsimg:compression",
		     e->compression > 0 && e->compression < 4 ? comp[e->compression] : "unknown");
}

/* Why a recovered version's run cannot be trusted where its bytes overlap
 * the version's bad ranges: each distinct why once, comma-separated
 * ("reused", "unreadable", "csum mismatch", "items not found"), so a run's
 * img_offset is never taken as the version's bytes where they are not. */
static void put_bad(struct dfx *d, const struct btrfsimg_recovered *rec,
		    const struct btrfsimg_extent *e)
{
	struct jw w = { 0 };
	uint64_t end_off = e->file_offset + e->length;
	for (size_t k = 0; rec && k < rec->nbad; k++) {
		const struct btrfsimg_bad_range *br = &rec->bad[k];
		if (br->offset >= end_off || br->offset + br->length <= e->file_offset)
			continue;
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = strcmp(rec->bad[j].why, br->why) == 0 &&
			       rec->bad[j].offset < end_off &&
			       rec->bad[j].offset + rec->bad[j].length > e->file_offset;
		if (seen)
			continue;
		if (w.len)
			jw_raw(&w, ",", 1);
		jw_raw(&w, br->why, strlen(br->why));
	}
	if (w.len) {
		jw_raw(&w, "", 1);
		attr(d, "btrfsimg:bad", w.buf);
	}
	jw_line_free(&w);
}

static void put_run(struct dfx *d, const struct btrfsimg_recovered *rec,
		    const struct btrfsimg_extent *e)
{
	start(d, "byte_run");
	attr_u64(d, "file_offset", e->file_offset);
	switch (e->type) {
	case BTRFSIMG_EXTENT_REGULAR:
		attr_u64(d, "len", e->compression ? e->disk_length : e->length);
		if (e->compression && e->logical == e->disk_bytenr)
			attr_u64(d, "uncompressed_len", e->length);
		if (e->ncopies)
			put_copies(d, e);
		else
			attr_u64(d, "btrfsimg:logical", e->logical);
		put_compression(d, e);
		put_csum(d, e);
		break;
	case BTRFSIMG_EXTENT_INLINE:
		attr_u64(d, "len", e->length);
		attr(d, "type", "resident");
		put_compression(d, e);
		put_csum(d, e);
		break;
	default: /* hole, prealloc */
		attr_u64(d, "len", e->length);
		attr(d, "fill", "0");
		attr(d, "btrfsimg:type", e->type == BTRFSIMG_EXTENT_PREALLOC ? "prealloc" : "hole");
		if (e->type == BTRFSIMG_EXTENT_PREALLOC)
			attr_u64(d, "btrfsimg:logical", e->logical);
		break;
	}
	put_bad(d, rec, e);
	end(d);
}

static void put_runs(struct dfx *d, const struct fobj *o)
{
	if (!o->runs)
		return;
	start(d, "byte_runs");
	for (size_t k = 0; k < o->runs->n; k++)
		put_run(d, o->rec, run_at(o->runs, k));
	end(d);
}

/* The forward map of a live regular file or symlink into o->runs; a
 * failure is the fileobject's <error> (the runs read before it stay). */
static void live_runs(struct dfx *d, const struct visit_node *n, struct fobj *o)
{
	btrfsimg_extents *it = NULL;
	const struct btrfsimg_extent *e;
	if (n->stub || !(S_ISREG(n->inode.mode) || S_ISLNK(n->inode.mode)))
		return;
	o->runs = calloc(1, sizeof(*o->runs));
	if (!o->runs) {
		fobj_error(d, o, "byte runs", "out of memory");
		return;
	}
	int rc = btrfsimg_extents_open(d->c->fs, n->subvol, n->objectid, BTRFSIMG_EXTENTS_CSUM,
				       &it);
	while (rc >= 0 && (rc = btrfsimg_extents_next(it, &e)) > 0) {
		jw_raw(&o->runs->buf, (const char *)e, sizeof(*e));
		o->runs->n++;
		if (e->type == BTRFSIMG_EXTENT_REGULAR && !e->ncopies)
			fobj_error(d, o, "byte runs: no copy mapped",
				   btrfsimg_errmsg(d->c->fs));
	}
	if (rc < 0)
		fobj_error(d, o, "byte runs", btrfsimg_errmsg(d->c->fs));
	btrfsimg_extents_close(it);
}

static int on_version_run(void *ctx, const struct btrfsimg_extent *e)
{
	struct runs *r = ctx;
	jw_raw(&r->buf, (const char *)e, sizeof(*e));
	r->n++;
	return 0;
}

/* A recovered version's runs (btrfsimg_forensic_extents: where its bytes
 * lay when it was written; csum "unchecked", its own check being
 * btrfsimg:verified), as a live file's; none for a directory. */
static void version_runs(struct dfx *d, const struct btrfsimg_recovered *r, struct fobj *o)
{
	if (!(S_ISREG(r->inode.mode) || S_ISLNK(r->inode.mode)))
		return;
	o->runs = calloc(1, sizeof(*o->runs));
	if (!o->runs) {
		fobj_error(d, o, "byte runs", "out of memory");
		return;
	}
	int rc = btrfsimg_forensic_extents(d->f, r->id, on_version_run, o->runs);
	if (rc < 0)
		fobj_error(d, o, "byte runs", btrfsimg_errmsg(d->c->fs));
}

static void put_fileobject(struct dfx *d, const struct fobj *o)
{
	start(d, "fileobject");
	if (o->has_parent) {
		start(d, "parent_object");
		start(d, "inode");
		attr_u64(d, "btrfsimg:subvol", o->parent_subvol);
		ok(d, xmlTextWriterWriteFormatString(d->w, "%" PRIu64, o->parent_objectid));
		end(d);
		end(d);
	}
	el_name(d, "filename", o->path, o->path_len);
	if (o->err.len)
		el_name(d, "error", (const uint8_t *)o->err.buf, o->err.len);
	el(d, "id", o->id);
	put_inode(d, o);
	if (o->target)
		el_name(d, "link_target", o->target, o->target_len);
	put_runs(d, o);
	put_hashes(d, o);
	put_extensions(d, o);
	end(d);
}

static void fobj_free(struct fobj *o)
{
	runs_free(o->runs);
	free(o->target);
	jw_line_free(&o->err);
}

/* ------------------------------------------------------------ live files */

static void live_hashes(struct dfx *d, const struct visit_node *n, struct fobj *o)
{
	static const char *const algs[] = { "md5", "sha256" };
	char *hex[] = { o->md5, o->sha256 };
	for (int k = 0; k < 2; k++) {
		int rc = digest_file(d->c->fs, n->subvol, n->objectid, n->inode.size, algs[k],
				     hex[k]);
		if (rc < 0) {
			hex[k][0] = '\0';
			fobj_error(d, o, algs[k], btrfsimg_errmsg(d->c->fs));
			return; /* the second would fail as the first did */
		}
	}
}

static void live_target(struct dfx *d, const struct visit_node *n, struct fobj *o)
{
	int rc = btrfsimg_readlink(d->c->fs, n->subvol, n->objectid, &o->target, &o->target_len);
	if (rc < 0) {
		o->target = NULL;
		fobj_error(d, o, "readlink", btrfsimg_errmsg(d->c->fs));
	}
}

static int on_node(void *ctx, const struct visit_node *n)
{
	struct dfx *d = ctx;
	struct fobj o = { .path = n->path, .path_len = n->path_len, .subvol = n->subvol,
			  .objectid = n->objectid, .inode = &n->inode,
			  .has_parent = !n->is_start, .parent_subvol = n->dir_subvol,
			  .parent_objectid = n->dir_objectid };
	if (n->is_start) { /* the start itself, as walk shows it */
		o.path = (const uint8_t *)".";
		o.path_len = 1;
	}
	snprintf(o.id, sizeof(o.id), "%" PRIu64 "-%" PRIu64, n->subvol, n->objectid);
	if (d->c->hash && S_ISREG(n->inode.mode))
		live_hashes(d, n, &o);
	if (S_ISLNK(n->inode.mode) && !n->stub)
		live_target(d, n, &o);
	live_runs(d, n, &o);
	put_fileobject(d, &o);
	fobj_free(&o);
	return d->failed ? -EIO : 0;
}

/* ------------------------------------------------------------ recovered */

static int on_recovered(void *ctx, const struct btrfsimg_recovered *r)
{
	struct dfx *d = ctx;
	struct fobj o = { .path = (const uint8_t *)r->path, .path_len = strlen(r->path),
			  .recovered = true, .subvol = r->subvol, .objectid = r->objectid,
			  .inode = &r->inode, .rec = r };
	snprintf(o.id, sizeof(o.id), "%s", r->id);
	/* contents only for a version whose every byte was read (as bodyfile
	 * --deleted): a partial one's zeros would hash as if they were its */
	if (d->c->hash && r->status == BTRFSIMG_REC_INTACT && !S_ISDIR(r->inode.mode) &&
	    (btrfsimg_forensic_digest(d->f, r->id, "md5", o.md5, sizeof(o.md5)) != 0 ||
	     btrfsimg_forensic_digest(d->f, r->id, "sha256", o.sha256, sizeof(o.sha256)) != 0)) {
		o.md5[0] = o.sha256[0] = '\0';
		fobj_error(d, &o, "hash", "the version could not be read whole");
	}
	version_runs(d, r, &o);
	put_fileobject(d, &o);
	fobj_free(&o);
	return d->failed ? -EIO : 0;
}

static int put_recovered(struct dfx *d)
{
	int st = rec_scan(d->c, &d->f);
	if (st)
		return st;
	int rc = btrfsimg_forensic_recovered(d->f, on_recovered, d);
	btrfsimg_forensic_free(d->f);
	d->f = NULL;
	if (d->failed)
		return EXIT_FAILED;
	if (rc < 0)
		return cli_fail(d->c, rc, "dfxml");
	return EXIT_OK;
}

/* ------------------------------------------------------------ document */

/* The command line, each argument as walk shows a name. */
static void put_command_line(struct dfx *d)
{
	struct jw w = { 0 };
	for (int i = 0; i < d->c->argc; i++) {
		if (i)
			jw_raw(&w, " ", 1);
		jw_raw(&w, d->c->argv[i], strlen(d->c->argv[i]));
	}
	el_name(d, "command_line", (const uint8_t *)w.buf, w.len);
	jw_line_free(&w);
}

static void put_creator(struct dfx *d)
{
	char now[32];
	time_t t = time(NULL);
	struct tm tm;
	start(d, "creator");
	el(d, "program", "btrfsimg");
	el(d, "version", btrfsimg_version());
	start(d, "build_environment");
#if defined(__clang__)
	el(d, "compiler", __VERSION__); /* "Debian Clang 14.0.6" */
#elif defined(__GNUC__)
	el(d, "compiler", "GCC " __VERSION__);
#endif
	start(d, "library");
	attr(d, "name", "libxml2");
	attr(d, "version", LIBXML_DOTTED_VERSION);
	end(d);
	end(d);
	start(d, "execution_environment");
	put_command_line(d);
	if (gmtime_r(&t, &tm) && strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm))
		el(d, "start_time", now);
	end(d);
	end(d);
}

static void put_source(struct dfx *d)
{
	start(d, "source");
	for (int i = 0; i < d->c->nimages; i++)
		el_name(d, "image_filename", (const uint8_t *)d->c->images[i],
			strlen(d->c->images[i]));
	end(d);
}

static void begin_volume(struct dfx *d)
{
	struct btrfsimg_super_info si;
	char uuid[37];
	start(d, "volume");
	if (btrfsimg_super(d->c->fs, &si) < 0)
		return;
	snprintf(uuid, sizeof(uuid),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 si.fsid[0], si.fsid[1], si.fsid[2], si.fsid[3], si.fsid[4], si.fsid[5],
		 si.fsid[6], si.fsid[7], si.fsid[8], si.fsid[9], si.fsid[10], si.fsid[11],
		 si.fsid[12], si.fsid[13], si.fsid[14], si.fsid[15]);
	attr(d, "btrfsimg:fsid", uuid);
	attr_u64(d, "btrfsimg:generation", si.generation);
	if (si.sectorsize)
		el_u64(d, "block_size", si.sectorsize);
	el(d, "ftype_str", "btrfs");
	if (si.sectorsize)
		el_u64(d, "block_count", si.total_bytes / si.sectorsize);
}

static void begin_document(struct dfx *d)
{
	ok(d, xmlTextWriterSetIndent(d->w, 1));
	ok(d, xmlTextWriterSetIndentString(d->w, X("  ")));
	ok(d, xmlTextWriterStartDocument(d->w, "1.0", "UTF-8", NULL));
	start(d, "dfxml");
	attr(d, "xmlns", DFXML_NS);
	attr(d, "xmlns:dc", DC_NS);
	attr(d, "xmlns:btrfsimg", BTRFSIMG_NS);
	attr(d, "version", DFXML_VERSION);
	start(d, "metadata");
	el(d, "dc:type", "Disk Image");
	end(d);
	put_creator(d);
	put_source(d);
	begin_volume(d);
}

static FILE *open_output(const struct cli *c)
{
	if (!c->output)
		return stdout;
	FILE *f = out_fcreate(AT_FDCWD, c->output, 0644);
	if (!f)
		cli_warn("dfxml: cannot create '%s': %s (the output is created new, never "
			 "over an existing file or through a link)", c->output, strerror(errno));
	return f;
}

static int walk_and_write(struct dfx *d)
{
	struct cli *c = d->c;
	struct visit_opts vo = { .subvol = cli_start_subvol(c), .path = c->path,
				 .objectid = c->inode_objectid };
	begin_document(d);
	int rc = d->failed ? -EIO : visit_tree(c->fs, &vo, on_node, d, &c->errors);
	if (d->failed)
		return EXIT_FAILED;
	if (rc < 0)
		return cli_fail(c, rc, "dfxml");
	if (c->only_deleted) {
		int st = put_recovered(d);
		if (st)
			return st;
	}
	ok(d, xmlTextWriterEndDocument(d->w)); /* closes volume and dfxml */
	return d->failed ? EXIT_FAILED : EXIT_OK;
}

/* libxml2 prints its I/O errors on stderr itself; the command says them
 * once, its way ("dfxml: write error on ..."). */
static void quiet(void *ctx, const char *fmt, ...)
{
	(void)ctx;
	(void)fmt;
}

static int cmd_dfxml(struct cli *c)
{
	FILE *out = open_output(c);
	if (!out)
		return EXIT_FAILED;
	xmlSetGenericErrorFunc(NULL, quiet);
	struct dfx d = { .c = c };
	xmlOutputBufferPtr buf = xmlOutputBufferCreateFile(out, NULL);
	d.w = buf ? xmlNewTextWriter(buf) : NULL; /* owns buf from here */
	int st;
	if (!d.w) {
		xmlOutputBufferClose(buf);
		cli_warn("dfxml: out of memory");
		st = EXIT_FAILED;
	} else {
		st = walk_and_write(&d);
		if (xmlTextWriterFlush(d.w) < 0)
			d.failed = true;
		xmlFreeTextWriter(d.w);
		/* a failed fflush inside libxml2 leaves only the stream's mark */
		if (fflush(out) != 0 || ferror(out))
			d.failed = true;
	}
	if (d.failed)
		cli_warn("dfxml: write error on %s", c->output ? c->output : "standard output");
	if (out != stdout && fclose(out) != 0 && st == EXIT_OK) {
		cli_warn("dfxml: write error on %s: %s", c->output, strerror(errno));
		st = EXIT_FAILED;
	}
	if (st == EXIT_OK && d.failed)
		st = EXIT_FAILED;
	return st == EXIT_OK ? cli_status(c) : st;
}

static int dfxml_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") || cli_inode_alone(c) ||
	    cli_needs(c, c->opts.flags & BTRFSIMG_OPEN_NO_DATA_VERIFY, "--no-verify", c->hash,
		      "--hash"))
		return EXIT_USAGE;
	return EXIT_OK;
}

static const struct cmd_option dfxml_options[] = {
	{ OPT_OUTPUT, NULL },
	{ OPT_HASH, "MD5 and SHA-256 of regular files' contents (as fiwalk)" },
	{ OPT_DELETED, "add the recovered versions ('btrfsimg deleted'):\n"
		       "alloc 0, unalloc 1, id, kind, status, generation" },
	{ OPT_SUBVOL, NULL },
	{ OPT_PATH, NULL },
	{ OPT_INODE, "start at inode S:O (subvolume S, objectid O)" },
	{ OPT_NO_VERIFY, "with --hash: do not verify data checksums" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_dfxml = {
	.name = "dfxml",
	.summary = "Digital Forensics XML (fiwalk's format): files, times, hashes, byte runs",
	.args = "IMAGE...",
	.about = "DFXML 2.0.0-beta.0, as fiwalk writes it: one <fileobject> per path\n"
		 "(name, size, inode as objectid with its subvolume, mode, owner, times\n"
		 "with nanoseconds, byte runs with their offsets in the image, MD5 and\n"
		 "SHA-256 with --hash), then with --deleted one per recovered version.\n"
		 "Names that are not printable UTF-8 are escaped as in the text output\n"
		 "and marked btrfsimg:escaped=\"1\".",
	.examples = "btrfsimg dfxml --hash disk.img > disk.dfxml\n"
		    "btrfsimg dfxml --hash --deleted -f disk.dfxml disk.E01\n"
		    "xmllint --noout --schema dfxml.xsd disk.dfxml",
	.options = dfxml_options,
	.check = dfxml_check,
	.run = cmd_dfxml,
};
