// SPDX-License-Identifier: MIT
/*
 * btrfsimg collisions: for every scheme, how many presented inode numbers
 * are shared on one device, by how many inodes, examples by path, how many
 * readdir entries disagree with stat, and how far collision-free schemes
 * may grow. Human output is a short report a sysadmin can act on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "cli.h"
#include "common/json.h"
#include "common/text.h"

#define DEPTH_MAX 4096

struct names_ctx {
	uint64_t parent;
	char name[3 * 255 + 2]; /* the safe form: a damaged name never adds a level */
	size_t len;
	bool found;
};

static int first_name(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name,
		      size_t len)
{
	struct names_ctx *n = ctx;
	(void)index;
	n->parent = parent;
	n->len = btrfsimg_name_safe(name, len < 255 ? len : 255, n->name, sizeof(n->name));
	n->found = true;
	return 1;
}

/* One path of (subvol, objectid) from the top level; NULL if none. */
static char *inode_path(btrfsimg_fs *fs, const struct btrfsimg_subvol *sv, size_t nsv,
			uint64_t subvol, uint64_t obj)
{
	const char *prefix = NULL;
	for (size_t i = 0; i < nsv; i++)
		if (sv[i].id == subvol)
			prefix = sv[i].path;
	if (!prefix)
		return NULL;
	char *tail = strdup("");
	for (int depth = 0; tail && obj != 256 && depth < DEPTH_MAX; depth++) {
		struct names_ctx n = { 0 };
		if (btrfsimg_inode_names(fs, subvol, obj, first_name, &n) < 0 || !n.found) {
			free(tail);
			return NULL;
		}
		size_t old = strlen(tail);
		char *p = malloc(old + n.len + 2);
		if (p) {
			memcpy(p, n.name, n.len);
			p[n.len] = old ? '/' : '\0';
			memcpy(p + n.len + (old ? 1 : 0), tail, old + 1);
		}
		free(tail);
		tail = p;
		obj = n.parent;
	}
	if (!tail || obj != 256) {
		free(tail);
		return NULL;
	}
	size_t len = strlen(prefix) + strlen(tail) + 2;
	char *full = malloc(len);
	if (full)
		snprintf(full, len, "%s%s%s", prefix, *prefix && *tail ? "/" : "", tail);
	free(tail);
	return full;
}

struct report_ctx {
	struct cli *c;
	struct btrfsimg_subvol *sv;
	size_t nsv;
	const struct btrfsimg_fs_collisions *col;
	bool all;		/* --examples 0: every group, streamed */
	size_t examples;	/* else: groups listed per scheme */
	struct jw *w;		/* JSON: the scheme line being written */
	size_t shown;		/* text: groups listed so far */
};

/* A stub's path: its directory's path and the entry's name. */
static char *stub_path(struct report_ctx *r, size_t i)
{
	if (i >= r->col->stubs)
		return NULL;
	const struct btrfsimg_stub *st = &r->col->stub_entries[i];
	char *dir = inode_path(r->c->fs, r->sv, r->nsv, st->subvol, st->dir);
	if (!dir)
		return NULL;
	size_t len = strlen(dir) + st->name_len + 2;
	char *p = malloc(len);
	if (p)
		snprintf(p, len, "%s%s%.*s", dir, *dir ? "/" : "", (int)st->name_len,
			 (const char *)st->name);
	free(dir);
	return p;
}

static char *member_path(struct report_ctx *r, const struct btrfsimg_collide_member *m)
{
	return m->extra ? stub_path(r, m->extra_index)
			: inode_path(r->c->fs, r->sv, r->nsv, m->subvol, m->objectid);
}

/* ------------------------------------------------------------ JSON */

static void put_member(struct jw *w, struct report_ctx *r, const struct btrfsimg_collide_member *m)
{
	jw_open_obj(w, NULL);
	jw_u64(w, "subvol", m->subvol);
	jw_u64(w, "objectid", m->objectid);
	char *p = member_path(r, m);
	jw_str(w, "path", p);
	if (m->extra)
		jw_bool(w, "stub", true);
	free(p);
	jw_close_obj(w);
}

static void put_group(struct jw *w, struct report_ctx *r, const struct btrfsimg_collide_group *g)
{
	jw_open_arr(w, NULL);
	for (size_t k = 0; k < g->nmembers; k++)
		put_member(w, r, &g->members[k]);
	jw_close_arr(w);
}

static int group_json(void *ctx, const struct btrfsimg_collide_group *g)
{
	struct report_ctx *r = ctx;
	struct jw *w = r->w;
	put_group(w, r, g);
	/* every group of a scheme makes one long line: write it out as it
	 * grows, so memory stays small */
	if (w->len >= (1u << 20)) {
		fwrite(w->buf, 1, w->len, w->out);
		w->len = 0;
	}
	return 0;
}

/* The scheme's result with the stub directories left out (the same when
 * there are none). */
static const struct btrfsimg_collide_result *bare(const struct report_ctx *r, size_t i)
{
	return &btrfsimg_collisions_without_stubs(r->col)->results[i];
}

static int scheme_json(struct report_ctx *r, size_t i)
{
	const struct btrfsimg_collide_result *res = &r->col->report->results[i];
	char name[48];
	btrfsimg_scheme_name(&res->scheme, name, sizeof(name));
	struct jw w;
	int rc = 0;
	jw_begin(&w, stdout);
	jw_str(&w, "scheme", name);
	jw_u64(&w, "groups", res->groups);
	jw_u64(&w, "inodes", res->inodes);
	jw_open_arr(&w, "examples");
	if (r->all && res->groups) {
		r->w = &w;
		rc = btrfsimg_collisions_groups(r->col, &res->scheme, true, group_json, r);
	} else {
		for (size_t g = 0; g < res->nexamples; g++)
			put_group(&w, r, &res->examples[g]);
	}
	jw_close_arr(&w);
	jw_u64(&w, "readdir_mismatch", r->col->readdir_mismatch[i]);
	jw_bool(&w, "collision_free", res->groups == 0);
	jw_u64(&w, "groups_without_stubs", bare(r, i)->groups);
	jw_u64(&w, "inodes_without_stubs", bare(r, i)->inodes);
	jw_bool(&w, "collision_free_without_stubs", bare(r, i)->groups == 0);
	jw_end(&w);
	return rc;
}

static void headroom_json(struct jw *w, const struct btrfsimg_collide_result *res)
{
	char name[48];
	btrfsimg_scheme_name(&res->scheme, name, sizeof(name));
	jw_open_obj(w, NULL);
	jw_str(w, "scheme", name);
	jw_u64(w, "max_objectid", res->max_objectid);
	if (res->proven)
		jw_u64(w, "max_subvol", res->max_subvol);
	else
		jw_null(w, "max_subvol");
	jw_bool(w, "proven", res->proven);
	jw_str(w, "reason", res->reason);
	jw_close_obj(w);
}

static void put_min(struct jw *w, const char *key, unsigned n)
{
	if (n)
		jw_u64(w, key, n);
	else
		jw_null(w, key);
}

/* "nfs": the NFS schemes (v3 and v4 readdir), the composed ones, the
 * 32-bit figures of every scheme, the transition (btrfsimg_nfs_report). */
static void nfs_json(struct jw *w, const struct btrfsimg_nfs_report *n)
{
	jw_open_obj(w, "nfs");
	jw_u64(w, "transition_changed", n->transition_changed);
	jw_u64(w, "transition_kept", n->transition_kept);
	jw_open_arr(w, "schemes");
	for (size_t i = 0; i < n->n; i++) {
		const struct btrfsimg_nfs_figures *f = &n->figures[i];
		char name[64];
		btrfsimg_scheme_name(&f->scheme, name, sizeof(name));
		jw_open_obj(w, NULL);
		jw_str(w, "scheme", name);
		jw_u64(w, "groups", f->groups);
		jw_u64(w, "inodes", f->inodes);
		jw_u64(w, "over32", f->over32);
		jw_u64(w, "low32_groups", f->low32_groups);
		jw_u64(w, "low32_inodes", f->low32_inodes);
		if (f->nfs) {
			jw_u64(w, "readdir_v3", f->readdir_v3);
			jw_u64(w, "readdir_v4", f->readdir_v4);
		} else {
			jw_null(w, "readdir_v3");
			jw_null(w, "readdir_v4");
		}
		jw_close_obj(w);
	}
	jw_close_arr(w);
	jw_close_obj(w);
}

static void summary_json(struct report_ctx *r)
{
	const struct btrfsimg_fs_collisions *col = r->col;
	const struct btrfsimg_collide_report *rep = col->report;
	const struct btrfsimg_collide_report *ns = btrfsimg_collisions_without_stubs(col);
	struct jw w;
	jw_begin(&w, stdout);
	jw_bool(&w, "summary", true);
	put_min(&w, "min_inumbits_numdevs1", rep->min_free_n1);
	put_min(&w, "min_inumbits_numdevs2", rep->min_free_n2);
	jw_u64(&w, "subvols", col->nsubvols);
	jw_u64(&w, "skipped_subvols", col->skipped_subvols);
	jw_u64(&w, "inodes", col->inodes);
	jw_u64(&w, "stubs", col->stubs);
	jw_u64(&w, "max_objectid", col->max_objectid);
	jw_u64(&w, "max_subvol", col->max_subvol);
	jw_u64(&w, "mount_subvol", col->mount_subvol);
	jw_open_arr(&w, "headroom");
	for (size_t i = 0; i < rep->nresults; i++)
		if (btrfsimg_collisions_headroom(col, i, false))
			headroom_json(&w, &rep->results[i]);
	jw_close_arr(&w);
	put_min(&w, "min_inumbits_numdevs1_without_stubs", ns->min_free_n1);
	put_min(&w, "min_inumbits_numdevs2_without_stubs", ns->min_free_n2);
	jw_open_arr(&w, "headroom_without_stubs");
	for (size_t i = 0; i < ns->nresults; i++)
		if (btrfsimg_collisions_headroom(col, i, true))
			headroom_json(&w, &ns->results[i]);
	jw_close_arr(&w);
	jw_open_arr(&w, "stub_paths");
	for (size_t i = 0; i < col->stubs; i++) {
		char *p = stub_path(r, i);
		jw_str(&w, NULL, p);
		free(p);
	}
	jw_close_arr(&w);
	nfs_json(&w, col->nfs);
	jw_end(&w);
}

/* ------------------------------------------------------------ text */

static size_t find(const struct btrfsimg_collide_report *rep, unsigned n, bool uniq, int devs)
{
	for (size_t i = 0; i < rep->nresults; i++) {
		const struct btrfsimg_scheme *s = &rep->results[i].scheme;
		if (s->inumbits == n && s->uniquifier == uniq && s->numdevs == devs)
			return i;
	}
	return SIZE_MAX;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* A path as text output writes names (escaped: a line stays a line). */
static void put_path(const char *p)
{
	if (!p)
		fputs("(unreachable)", stdout);
	else if (!*p)
		fputs("(top level)", stdout);
	else
		text_name(stdout, (const uint8_t *)p, strlen(p), NULL);
	putchar('\n');
}

/* One group: its inodes by path, then its stub directories as one line
 * (every stub presents 2, and they are named in their own section). */
static int group_text(void *ctx, const struct btrfsimg_collide_group *g)
{
	struct report_ctx *r = ctx;
	size_t limit = r->all ? SIZE_MAX : 4, stubs = 0, shown = 0;
	printf("    number %" PRIu64 " is shared by %" PRIu64 " %s:\n", g->ino, g->size,
	       plural(g->size, "inode", "inodes"));
	for (size_t k = 0; k < g->nmembers; k++) {
		const struct btrfsimg_collide_member *m = &g->members[k];
		if (m->extra) {
			stubs++;
			continue;
		}
		if (shown++ >= limit)
			continue;
		char *p = member_path(r, m);
		printf("      subvol %-6" PRIu64 " inode %-10" PRIu64 " ", m->subvol, m->objectid);
		put_path(p);
		free(p);
	}
	/* members are kept up to a limit, subvolumes first: the stubs of a
	 * group of 2 on device 0 are all of them */
	if (g->nmembers < g->size && g->ino == 2 && g->device == 0)
		stubs = r->col->stubs;
	uint64_t real = g->size - stubs;
	if (real > shown || shown > limit)
		printf("      ... and %" PRIu64 " more\n", real - (shown < limit ? shown : limit));
	if (stubs)
		printf("      %s %zu stub %s (inode 2, listed above)\n", shown ? "and the" : "the",
		       stubs, plural(stubs, "directory", "directories"));
	r->shown++;
	return 0;
}

static int print_groups(struct report_ctx *r, const struct btrfsimg_collide_result *res)
{
	r->shown = 0;
	if (r->all)
		return res->groups ? btrfsimg_collisions_groups(r->col, &res->scheme, true,
								group_text, r) : 0;
	for (size_t g = 0; g < res->nexamples && g < r->examples; g++)
		group_text(r, &res->examples[g]);
	if (res->groups > r->shown)
		printf("    ... %" PRIu64 " more shared numbers (--examples 0 lists every one)\n",
		       res->groups - r->shown);
	return 0;
}

static void stubs_text(struct report_ctx *r)
{
	const struct btrfsimg_fs_collisions *col = r->col;
	if (!col->stubs)
		return;
	printf("\nStub directories: %" PRIu64 ". A snapshot shows each subvolume nested in its\n"
	       "source as an empty directory with inode 2 (README: \"Stub directories\").\n"
	       "All of them present 2 on one device under every scheme (today's kernel:\n"
	       "the superblock's), so each verdict below is also given without them.\n",
	       col->stubs);
	size_t n = r->all ? col->stubs : r->examples;
	for (size_t i = 0; i < col->stubs && i < n; i++) {
		char *p = stub_path(r, i);
		printf("    subvol %-6" PRIu64 " ", col->stub_entries[i].subvol);
		put_path(p);
		free(p);
	}
	if (col->stubs > n)
		printf("    ... and %" PRIu64 " more (--examples 0 lists every one)\n",
		       col->stubs - n);
}

static void verdict_text(struct report_ctx *r, int devs)
{
	const struct btrfsimg_fs_collisions *col = r->col;
	const struct btrfsimg_collide_report *rep = col->report, *ns = col->report_without_stubs;
	unsigned n = devs == 1 ? rep->min_free_n1 : rep->min_free_n2;
	unsigned m = ns ? (devs == 1 ? ns->min_free_n1 : ns->min_free_n2) : n;
	if (n) {
		size_t i = find(rep, n, false, devs);
		printf("numdevs=%d: use inumbits=%u or more (smallest collision-free).\n  %s\n", devs,
		       n, i < rep->nresults ? rep->results[i].reason : "");
		return;
	}
	if (!ns) {
		printf("numdevs=%d: no inumbits value avoids collisions on this filesystem.\n", devs);
		return;
	}
	printf("numdevs=%d: no inumbits value avoids collisions with the stub directories.\n", devs);
	if (!m) {
		printf("  Without them, none either.\n");
		return;
	}
	size_t i = find(ns, m, false, devs);
	printf("  Without them: use inumbits=%u or more (smallest collision-free).\n  %s\n", m,
	       i < ns->nresults ? ns->results[i].reason : "");
}

static void nfs_row(const struct btrfsimg_nfs_figures *f)
{
	char name[64];
	btrfsimg_scheme_name(&f->scheme, name, sizeof(name));
	printf("  %-30s %8" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8" PRIu64, name, f->groups,
	       f->inodes, f->over32, f->low32_groups);
	if (f->nfs)
		printf(" %8" PRIu64 " %8" PRIu64, f->readdir_v3, f->readdir_v4);
	printf("\n");
}

/* NFS v3 and v4 clients, the composed schemes, the transition, 32 bits. */
static void nfs_text(const struct btrfsimg_fs_collisions *col)
{
	const struct btrfsimg_nfs_report *n = col->nfs;
	printf("\nNFS clients (one fsid; NFSv3 and NFSv4 see the same fileids in stat;\n"
	       "readdir: v3 READDIR's fileid, v4 a Linux client's d_ino = MOUNTED_ON_FILEID).\n"
	       "inumbits=N+nfsd-uniquifier: the btrfs mounted inumbits=N under the patched\n"
	       "nfsd, which XORs its uniquifier into the overlaid number.\n");
	printf("  %-30s %8s %10s %10s %8s %8s %8s\n", "scheme", "shared", "inodes", ">2^32-1",
	       "low32", "rd!=st3", "rd!=st4");
	for (size_t i = 0; i < n->nnfs; i++) {
		unsigned b = n->figures[i].scheme.inumbits;
		if (b == 0 || b == 32 || b == 40 || b == 48 || b == 56 || b == 64)
			nfs_row(&n->figures[i]);
	}
	printf("  (--json: every N)\n");
	if (n->nnfs > 1 && n->figures[1].readdir_v4)
		printf("Under NFSv4 with the uniquifier readdir and stat disagree for every inode\n"
		       "outside subvolume 5 (%" PRIu64 " here, with subvolume entries): the patch\n"
		       "uniquifies MOUNTED_ON_FILEID only at the root of a crossed mount.\n",
		       n->figures[1].readdir_v4);
	printf("Turning the uniquifier on: %" PRIu64 " fileids change for a client that mounts\n"
	       "afterwards (%" PRIu64 " stay); a client holding handles from before keeps\n"
	       "today's fileids for everything it reaches through them (fh_options).\n",
	       n->transition_changed, n->transition_kept);
	printf("\n32-bit consumers (stat without large-file support: EOVERFLOW past 2^32-1;\n"
	       "NFSv2 and tools keeping 32 bits: collisions of the low 32 bits):\n");
	printf("  %-30s %8s %10s %10s %8s\n", "scheme", "shared", "inodes", ">2^32-1", "low32");
	for (size_t i = n->nnfs; i < n->n; i++) {
		const struct btrfsimg_nfs_figures *f = &n->figures[i];
		unsigned b = f->scheme.inumbits;
		if (b == 0 || b == 32 || b == 40 || b == 48 || b == 56 || b == 64)
			nfs_row(f);
	}
	printf("  (--json: every N)\n");
}

static int text_report(struct report_ctx *r)
{
	const struct btrfsimg_fs_collisions *col = r->col;
	const struct btrfsimg_collide_report *rep = col->report;
	int rc = 0;
	printf("%zu subvolumes, %" PRIu64 " inodes, %" PRIu64 " stub directories "
	       "(largest objectid %" PRIu64 ", largest subvolume id %" PRIu64 ")\n",
	       col->nsubvols, col->inodes, col->stubs, col->max_objectid, col->max_subvol);
	if (col->skipped_subvols)
		printf("%" PRIu64 " deleted or unreachable subvolumes not counted\n",
		       col->skipped_subvols);
	stubs_text(r);
	size_t today = find(rep, 0, false, 1), many = find(rep, 0, false, 3);
	if (many < rep->nresults) {
		const struct btrfsimg_collide_result *res = &rep->results[many];
		printf("\nToday's kernel (a device per subvolume): %" PRIu64 " shared numbers", res->groups);
		if (res->groups && col->stubs)
			printf(" (stub directories share the superblock's device; %" PRIu64
			       " without them)", bare(r, many)->groups);
		printf("; readdir disagrees with stat for %" PRIu64 " subvolume entries.\n",
		       col->readdir_mismatch[many]);
	}
	if (today < rep->nresults) {
		const struct btrfsimg_collide_result *res = &rep->results[today];
		printf("\nNFS export today (one fsid, fileid = inode number): %" PRIu64
		       " numbers shared by %" PRIu64 " inodes", res->groups, res->inodes);
		if (col->stubs)
			printf(" (%" PRIu64 " by %" PRIu64 " without the stub directories)",
			       bare(r, today)->groups, bare(r, today)->inodes);
		printf(".\n");
		if (res->groups)
			printf("  Clients see the same fileid for different files: find reports "
			       "loops, tar/rsync treat them as hard links.\n");
		rc = print_groups(r, res);
	}
	printf("\n");
	for (int devs = 1; devs <= 2; devs++)
		verdict_text(r, devs);
	printf("  overlayfs xino keeps working for up to 128 layers with inumbits <= 56.\n");
	size_t u = find(rep, 0, true, 1);
	if (u < rep->nresults) {
		const struct btrfsimg_collide_result *res = &rep->results[u];
		printf("\nnfsd with ino_uniquifier: %s (%" PRIu64 " shared numbers",
		       res->groups ? "collides" : "collision-free", res->groups);
		if (res->groups && col->stubs)
			printf("; %" PRIu64 " without the stub directories", bare(r, u)->groups);
		printf(").\n");
	}
	nfs_text(col);
	return rc;
}

static int cmd_collisions(struct cli *c)
{
	struct report_ctx r = { .c = c, .all = c->have_examples && c->examples == 0,
				.examples = c->have_examples ? (size_t)c->examples : c->json ? 10 : 3 };
	struct btrfsimg_fs_collisions *col;
	int rc = btrfsimg_collisions(c->fs, c->have_mount_subvol ? c->mount_subvol : 0,
				     r.all ? 0 : r.examples, &col);
	if (rc < 0)
		return cli_fail(c, rc, "collisions");
	r.col = col;
	if (btrfsimg_subvols(c->fs, &r.sv, &r.nsv) < 0)
		r.nsv = 0;
	if (c->json) {
		for (size_t i = 0; rc == 0 && i < col->report->nresults; i++)
			rc = scheme_json(&r, i);
		if (rc == 0)
			summary_json(&r);
	} else {
		rc = text_report(&r);
	}
	btrfsimg_subvols_free(r.sv, r.nsv);
	if (rc < 0)
		rc = cli_fail(c, rc, "collisions");
	else
		rc = cli_status(c);
	btrfsimg_fs_collisions_free(col);
	return rc;
}

static const struct cmd_option collisions_options[] = {
	{ OPT_JSON, "one JSON object per scheme, then a summary" },
	{ OPT_MOUNT_SUBVOL, NULL },
	{ OPT_EXAMPLES, "list N groups per scheme (default 3, JSON 10);\n"
			"0: every group, each with every member" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_collisions = {
	.name = "collisions",
	.summary = "inode-number collisions under every scheme",
	.args = "IMAGE...",
	.about = "For today's kernel and every proposed scheme: the inode numbers shared on\n"
		 "one device, the inodes behind them (by path), readdir/stat disagreements,\n"
		 "the smallest safe inumbits, and how far the filesystem may grow. Stub\n"
		 "directories (inode 2, where a snapshot had nested subvolumes) are named\n"
		 "apart, and every verdict is also given without them.",
	.examples = "btrfsimg collisions disk.img\n"
		    "btrfsimg collisions --examples 0 disk.img\n"
		    "btrfsimg collisions --json --mount-subvol 256 disk.img",
	.options = collisions_options,
	.run = cmd_collisions,
};
