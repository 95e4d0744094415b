// SPDX-License-Identifier: MIT
/*
 * btrfsimg inodes: every inode with what today's kernel presents and what
 * the 2021 proposals would present (inumbits=N, the nfsd uniquifier,
 * numdevs=2, the "tree:ino" /proc form).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfsimg_inum.h"
#include "cli.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/text.h"

/* A text line's symlink target (" -> target"). */
enum { TARGET_NONE, TARGET_READ, TARGET_UNREADABLE };

struct inodes_ctx {
	struct cli *c;
	bool buffered; /* lines gather in w; else (text for a terminal) printed */
	unsigned bits;
	uint64_t count;
	uint64_t cur;	 /* the subvolume the line fragments below are for */
	struct jw w;	 /* lines not yet written out */
	int write_errno; /* the first failed write(2), or 0 */
	char head[64], mid1[128], mid2[64], mid3[96];
	/* objectid, ino (inumbits=N), nfs fileid, the fileid with inumbits=N:
	 * each climbs with the objectid */
	struct jw_run run_obj, run_ino, run_nfs, run_nfs_n;
	struct jw_run run_gen; /* generations: the same in long runs */
	size_t head_len, mid1_len, mid2_len, mid3_len;
	bool text_head; /* the text header is out */
};

/* The fields that only depend on the subvolume, formatted once per
 * subvolume: lines are hot (a million inodes) and most of their bytes
 * are these constants. */
static void switch_subvol(struct inodes_ctx *x, uint64_t subvol,
			  const struct btrfsimg_inode_numbers *n)
{
	x->cur = subvol;
	char dev[24] = "null", sv[24], overlay[24], uniq[24];
	if (n->numdevs2_dev >= 0)
		snprintf(dev, sizeof(dev), "%d", n->numdevs2_dev);
	sv[jw_u64_json(subvol, sv)] = '\0'; /* numbers as every JSON writer puts them */
	overlay[jw_u64_json(n->overlay, overlay)] = '\0';
	uniq[jw_u64_json(n->uniquifier, uniq)] = '\0';
	x->head_len =
		(size_t)snprintf(x->head, sizeof(x->head), "{\"subvol\":%s,\"objectid\":", sv);
	x->mid1_len = (size_t)snprintf(
		x->mid1, sizeof(x->mid1),
		",\"tree_id\":%s,\"inumbits\":%u,\"overlay\":%s,\"ino\":", sv, x->bits, overlay);
	x->mid2_len = (size_t)snprintf(x->mid2, sizeof(x->mid2),
				       ",\"uniquifier\":%s,\"nfs_fileid\":", uniq);
	x->mid3_len =
		(size_t)snprintf(x->mid3, sizeof(x->mid3),
				 ",\"numdevs2_dev\":%s,\"proc_ino\":\"%" PRIu64 ":", dev, subvol);
}

static void flush_lines(struct inodes_ctx *x)
{
	jw_flush_fd(&x->w, STDOUT_FILENO, &x->write_errno);
}

/* A fragment of at most sizeof(@arr) bytes: the whole array is copied (a
 * few moves of constant size; its tail is zero) and @len bytes kept. */
#define PUT_FRAG(p, arr, len) (memcpy((p), (arr), sizeof(arr)), (p) += (len))

/* The most a line takes besides its path: the fragments, whole, seven
 * numbers (22 each, quotes included; 24 written by a jw_run), the literals. */
#define LINE_FIXED_MAX (64 + 128 + 64 + 96 + 24 + 10 * 24 + 240)

static inline char *copy_bytes(char *dst, const char *src, size_t n)
{
	for (size_t k = 0; k < n; k++)
		dst[k] = src[k];
	return dst + n;
}

/* One JSON line, written in place (the walking thread's: handing each
 * inode to a formatting thread cost more in copies, page faults and
 * wake-ups than the formatting, now that workers parse the leaves). */
static void put_json(struct inodes_ctx *x, const struct btrfsimg_inode_entry *e,
		     const struct btrfsimg_inode_numbers *n)
{
	const struct btrfsimg_inode *i = &e->inode;
	struct jw *w = &x->w;
	if (i->subvol != x->cur)
		switch_subvol(x, i->subvol, n);
	jw_grow(w, LINE_FIXED_MAX + e->path_len);
	char *p = w->buf + w->len;
	PUT_FRAG(p, x->head, x->head_len);
	/* the objectid's digits are written once and copied byte by byte: a
	 * wider load of bytes just stored in pairs stalls until they land */
	const char *obj = p;
	size_t obj_len = jw_run_at(&x->run_obj, p, i->objectid);
	p += obj_len;
	JW_PUT_LIT(p, ",\"st_ino\":");
	p = copy_bytes(p, obj, obj_len);
	PUT_FRAG(p, x->mid1, x->mid1_len);
	p += jw_run_at(&x->run_ino, p, n->ino);
	PUT_FRAG(p, x->mid2, x->mid2_len);
	p += jw_run_at(&x->run_nfs, p, n->nfs_fileid);
	/* what a Linux NFSv4 client's readdir shows (st_ino), and both with
	 * the btrfs mounted inumbits=N under nfsd (composed) */
	JW_PUT_LIT(p, ",\"nfs4_d_fileid\":");
	p = copy_bytes(p, obj, obj_len);
	JW_PUT_LIT(p, ",\"nfs_fileid_inumbits\":");
	p += jw_run_at(&x->run_nfs_n, p, n->nfs_fileid_inumbits);
	JW_PUT_LIT(p, ",\"nfs4_d_fileid_inumbits\":");
	p += jw_run_at(&x->run_ino, p, n->ino);
	PUT_FRAG(p, x->mid3, x->mid3_len);
	if (obj[0] == '"') /* past 2^53: a number quoted, in the string bare */
		p += jw_dec_at(p, i->objectid);
	else
		p = copy_bytes(p, obj, obj_len);
	JW_PUT_LIT(p, "\",\"generation\":");
	p += jw_run_at(&x->run_gen, p, i->generation);
	JW_PUT_LIT(p, ",\"mode\":");
	p += jw_dec_at(p, i->mode);
	JW_PUT_LIT(p, ",\"nlink\":");
	p += jw_dec_at(p, i->nlink);
	JW_PUT_LIT(p, ",\"size\":");
	p += jw_u64_at(p, i->size);
	if (e->path) {
		JW_PUT_LIT(p, ",\"path\":");
		p = jw_str_at(w, p, e->path, e->path_len, LINE_FIXED_MAX);
	} else {
		JW_PUT_LIT(p, ",\"path\":null");
	}
	if (e->reachable)
		JW_PUT_LIT(p, ",\"reachable\":true}\n");
	else
		JW_PUT_LIT(p, ",\"reachable\":false}\n");
	w->len = (size_t)(p - w->buf);
	if (w->len >= JW_OUT_BLOCK)
		flush_lines(x);
}

/* " -> target" of a symlink ("?" when unreadable, the error on stderr). */
static void put_text_target(struct cli *c, const struct btrfsimg_inode *i)
{
	uint8_t *t = NULL;
	size_t len = 0;
	fputs(" -> ", stdout);
	if (btrfsimg_readlink(c->fs, i->subvol, i->objectid, &t, &len) == 0) {
		text_name(stdout, t, len, NULL);
	} else {
		cli_warn("inode %" PRIu64 ":%" PRIu64 ": %s", i->subvol, i->objectid,
			 btrfsimg_errmsg(c->fs));
		putchar('?');
		c->errors++;
	}
	free(t);
}

/* The text header line into @out: its length. */
static size_t text_head(char out[160], unsigned bits)
{
	char ino[24];
	snprintf(ino, sizeof(ino), "inumbits=%u ino", bits);
	int n = snprintf(out, 160, "%6s %10s  %-*s  %-22s  %-22s  %s\n", "subvol", "objectid",
			 TEXT_TIME_WIDTH, "mtime (UTC)", ino, "nfs v3/v4 fileid", "path");
	return n < 0 ? 0 : (size_t)n < 160 ? (size_t)n : 159;
}

static void put_text_head(unsigned bits)
{
	char head[160];
	fwrite(head, 1, text_head(head, bits), stdout);
}

/* One text line as put_text prints it, into the line buffer; @target: a
 * symlink's (TARGET_*), @t its bytes. */
static void put_text_line(struct inodes_ctx *x, const struct btrfsimg_inode_entry *e,
			  const struct btrfsimg_inode_numbers *n, int target, const uint8_t *t,
			  size_t tlen)
{
	const struct btrfsimg_inode *i = &e->inode;
	struct jw *w = &x->w;
	if (!x->text_head) { /* with the first line: none on a failure */
		char head[160];
		jw_raw(w, head, text_head(head, x->bits));
		x->text_head = true;
	}
	/* two decimal numbers (at most 20 digits each), the time, two hex
	 * numbers (at most 18), the separators */
	jw_grow(w, 2 * 20 + TEXT_TIME_MAX + 2 * 18 + 32);
	char *p = w->buf + w->len;
	p = text_dec(p, i->subvol, 6);
	*p++ = ' ';
	p = text_dec(p, i->objectid, 10);
	JW_PUT_LIT(p, "  ");
	char tm[TEXT_TIME_MAX];
	p = text_left(p, tm, text_time_at(tm, i->mtime.sec, i->mtime.nsec), TEXT_TIME_WIDTH);
	JW_PUT_LIT(p, "  ino ");
	p = text_hex_alt(p, n->ino, 18);
	JW_PUT_LIT(p, "  nfs ");
	p = text_hex_alt(p, n->nfs_fileid, 18);
	JW_PUT_LIT(p, "  ");
	w->len = (size_t)(p - w->buf);
	if (!e->path)
		jw_lit(w, "<unreachable>");
	else if (e->path_len)
		text_name_jw(w, (const uint8_t *)e->path, e->path_len, NULL);
	else
		jw_lit(w, "."); /* the top level */
	if (target == TARGET_READ) {
		jw_lit(w, " -> ");
		text_name_jw(w, t, tlen, NULL);
	} else if (target == TARGET_UNREADABLE) {
		jw_lit(w, " -> ?");
	}
	if (e->reachable || !e->path)
		jw_lit(w, "\n");
	else
		jw_lit(w, " [nlink 0]\n");
	if (w->len >= JW_OUT_BLOCK)
		flush_lines(x);
}

static void put_text(struct cli *c, const struct btrfsimg_inode_entry *e,
		     const struct btrfsimg_inode_numbers *p)
{
	const struct btrfsimg_inode *i = &e->inode;
	char mtime[TEXT_TIME_MAX];
	text_time(mtime, i->mtime.sec, i->mtime.nsec);
	printf("%6" PRIu64 " %10" PRIu64 "  %-*s  ino %#18" PRIx64 "  nfs %#18" PRIx64 "  ",
	       i->subvol, i->objectid, TEXT_TIME_WIDTH, mtime, p->ino, p->nfs_fileid);
	if (!e->path)
		fputs("<unreachable>", stdout);
	else if (e->path_len)
		text_name(stdout, (const uint8_t *)e->path, e->path_len, NULL);
	else
		putchar('.'); /* the top level */
	if (S_ISLNK(i->mode))
		put_text_target(c, i);
	puts(e->reachable || !e->path ? "" : " [nlink 0]");
}

/* A text line into the line buffer; a symlink's target is read first, its
 * failure said on stderr. */
static void on_text(struct inodes_ctx *x, const struct btrfsimg_inode_entry *e,
		    const struct btrfsimg_inode_numbers *n)
{
	uint8_t *t = NULL;
	size_t tlen = 0;
	int target = TARGET_NONE;
	const struct btrfsimg_inode *i = &e->inode;
	if (S_ISLNK(i->mode)) {
		if (btrfsimg_readlink(x->c->fs, i->subvol, i->objectid, &t, &tlen) == 0) {
			target = TARGET_READ;
		} else {
			cli_warn("inode %" PRIu64 ":%" PRIu64 ": %s", i->subvol, i->objectid,
				 btrfsimg_errmsg(x->c->fs));
			x->c->errors++;
			target = TARGET_UNREADABLE;
		}
	}
	put_text_line(x, e, n, target, t, tlen);
	free(t);
}

static int on_inode(void *ctx, const struct btrfsimg_inode_entry *e,
		    const struct btrfsimg_inode_numbers *p)
{
	struct inodes_ctx *x = ctx;
	progress_tick_at("inodes", ++x->count, e->inode.subvol, e->inode.objectid);
	if (e->name_damage) { /* the path shows the name's safe form */
		fprintf(stderr, "btrfsimg: %.*s: damaged name: %s: shown by its safe form\n",
			(int)e->path_len, e->path ? e->path : "", e->name_damage);
		x->c->errors++;
	}
	if (x->c->json)
		put_json(x, e, p);
	else if (x->buffered)
		on_text(x, e, p);
	else {
		if (x->count == 1)
			put_text_head(x->bits); /* with the first line: none on a failure */
		put_text(x->c, e, p);
	}
	return 0;
}

static int cmd_inodes(struct cli *c)
{
	struct inodes_ctx x = { .c = c,
				.bits = c->inumbits >= 0 ? (unsigned)c->inumbits : 56,
				.cur = 0,
				.w = { .out = stdout } };
	/* lines gather in one buffer written in large blocks, bypassing
	 * stdio; text for a terminal is printed as it is found, in step with
	 * the progress line */
	x.buffered = c->json || !isatty(STDOUT_FILENO);
	if (x.buffered)
		fflush(stdout);
	progress_inodes_total(c->fs, c->have_subvol ? c->subvol : 0, false);
	int rc =
		btrfsimg_inodes_presented(c->fs, c->have_subvol ? c->subvol : 0, x.bits,
					  c->have_mount_subvol ? c->mount_subvol : 0, on_inode, &x);
	flush_lines(&x);
	progress_done();
	jw_line_free(&x.w);
	if (rc < 0)
		return cli_fail(c, rc, "inodes");
	if (x.write_errno) {
		cli_warn("write error on standard output: %s", strerror(x.write_errno));
		return EXIT_FAILED;
	}
	return cli_status(c);
}

static const struct cmd_option inodes_options[] = {
	{ OPT_JSON, "one JSON object per inode" },
	{ OPT_SUBVOL, "only subvolume ID (default: every subvolume)" },
	{ OPT_INUMBITS, "the inumbits=N proposal's numbers (0 or 32..64;\n"
			"default 56)" },
	{ OPT_MOUNT_SUBVOL, NULL },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_inodes = {
	.name = "inodes",
	.summary = "every inode with today's and each proposal's numbers",
	.args = "IMAGE...",
	.about = "Every inode, in subvolume then objectid order, with one path, today's\n"
		 "st_ino and each proposal's number (inumbits=N, the nfsd uniquifier,\n"
		 "numdevs=2's device, the /proc form). Streamed: memory stays small.\n"
		 "Text: a header, then mtime (ISO 8601, UTC, ns), the numbers and the path,\n"
		 "escaped as walk's, \"-> target\" for symlinks.",
	.examples = "btrfsimg inodes disk.img\n"
		    "btrfsimg inodes --json --inumbits 48 --mount-subvol 5 disk.img",
	.options = inodes_options,
	.run = cmd_inodes,
};
