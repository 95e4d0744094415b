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
#include "json.h"

#define DEPTH_MAX 4096

struct names_ctx {
	uint64_t parent;
	uint8_t name[256];
	size_t len;
	bool found;
};

static int first_name(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name,
		      size_t len)
{
	struct names_ctx *n = ctx;
	(void)index;
	n->parent = parent;
	n->len = len < 255 ? len : 255;
	memcpy(n->name, name, n->len);
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
};

/* A stub's path: its directory's path and the entry's name. */
static char *stub_path(struct report_ctx *r, const struct btrfsimg_collide_member *m)
{
	if (m->extra_index >= r->col->stubs)
		return NULL;
	const struct btrfsimg_stub *st = &r->col->stub_entries[m->extra_index];
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
	return m->extra ? stub_path(r, m)
			: inode_path(r->c->fs, r->sv, r->nsv, m->subvol, m->objectid);
}

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

static void scheme_json(struct report_ctx *r, const struct btrfsimg_collide_result *res,
			uint64_t mismatch)
{
	char name[48];
	btrfsimg_scheme_name(&res->scheme, name, sizeof(name));
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "scheme", name);
	jw_u64(&w, "groups", res->groups);
	jw_u64(&w, "inodes", res->inodes);
	jw_open_arr(&w, "examples");
	for (size_t g = 0; g < res->nexamples; g++) {
		jw_open_arr(&w, NULL);
		for (size_t k = 0; k < res->examples[g].nmembers; k++)
			put_member(&w, r, &res->examples[g].members[k]);
		jw_close_arr(&w);
	}
	jw_close_arr(&w);
	jw_u64(&w, "readdir_mismatch", mismatch);
	jw_bool(&w, "collision_free", res->groups == 0);
	jw_end(&w);
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

static void summary_json(const struct btrfsimg_fs_collisions *col)
{
	const struct btrfsimg_collide_report *rep = col->report;
	struct jw w;
	jw_begin(&w, stdout);
	jw_bool(&w, "summary", true);
	if (rep->min_free_n1)
		jw_u64(&w, "min_inumbits_numdevs1", rep->min_free_n1);
	else
		jw_null(&w, "min_inumbits_numdevs1");
	if (rep->min_free_n2)
		jw_u64(&w, "min_inumbits_numdevs2", rep->min_free_n2);
	else
		jw_null(&w, "min_inumbits_numdevs2");
	jw_u64(&w, "subvols", col->nsubvols);
	jw_u64(&w, "skipped_subvols", col->skipped_subvols);
	jw_u64(&w, "inodes", col->inodes);
	jw_u64(&w, "stubs", col->stubs);
	jw_u64(&w, "max_objectid", col->max_objectid);
	jw_u64(&w, "max_subvol", col->max_subvol);
	jw_u64(&w, "mount_subvol", col->mount_subvol);
	jw_open_arr(&w, "headroom");
	for (size_t i = 0; i < rep->nresults; i++)
		if (rep->results[i].groups == 0)
			headroom_json(&w, &rep->results[i]);
	jw_close_arr(&w);
	jw_end(&w);
}

static const struct btrfsimg_collide_result *find(const struct btrfsimg_collide_report *rep,
						  unsigned n,
					   bool uniq, int devs)
{
	for (size_t i = 0; i < rep->nresults; i++) {
		const struct btrfsimg_scheme *s = &rep->results[i].scheme;
		if (s->inumbits == n && s->uniquifier == uniq && s->numdevs == devs)
			return &rep->results[i];
	}
	return NULL;
}

static void print_examples(struct report_ctx *r, const struct btrfsimg_collide_result *res,
			   size_t max)
{
	for (size_t g = 0; g < res->nexamples && g < max; g++) {
		const struct btrfsimg_collide_group *grp = &res->examples[g];
		printf("    number %" PRIu64 " is shared by %" PRIu64 " inodes:\n", grp->ino,
		       grp->size);
		for (size_t k = 0; k < grp->nmembers && k < 4; k++) {
			const struct btrfsimg_collide_member *m = &grp->members[k];
			char *p = member_path(r, m);
			printf("      subvol %-6" PRIu64 " inode %-10" PRIu64 " %s%s\n", m->subvol,
			       m->objectid, p ? (*p ? p : "(top level)") : "(unreachable)",
			       m->extra ? " (stub directory)" : "");
			free(p);
		}
		if (grp->size > 4)
			printf("      ... and %" PRIu64 " more\n", grp->size - 4);
	}
}

static void text_report(struct report_ctx *r)
{
	const struct btrfsimg_fs_collisions *col = r->col;
	const struct btrfsimg_collide_report *rep = col->report;
	printf("%zu subvolumes, %" PRIu64 " inodes, %" PRIu64 " stub directories "
	       "(largest objectid %" PRIu64 ", largest subvolume id %" PRIu64 ")\n",
	       col->nsubvols, col->inodes, col->stubs, col->max_objectid, col->max_subvol);
	if (col->skipped_subvols)
		printf("%" PRIu64 " deleted or unreachable subvolumes not counted\n",
		       col->skipped_subvols);
	const struct btrfsimg_collide_result *today = find(rep, 0, false, 1);
	const struct btrfsimg_collide_result *many = find(rep, 0, false, 3);
	printf("\nToday's kernel (a device per subvolume): %" PRIu64 " shared numbers%s; "
	       "readdir disagrees with stat for %" PRIu64 " subvolume entries.\n",
	       many ? many->groups : 0,
	       many && many->groups ? " (stub directories share the superblock's device)" : "",
	       col->readdir_mismatch[many - rep->results]);
	if (today) {
		printf("\nNFS export today (one fsid, fileid = inode number): %" PRIu64
		       " numbers shared by %" PRIu64 " inodes.\n",
		       today->groups, today->inodes);
		if (today->groups)
			printf("  Clients see the same fileid for different files: find reports "
			       "loops, tar/rsync treat them as hard links.\n");
		print_examples(r, today, 3);
	}
	printf("\n");
	for (int devs = 1; devs <= 2; devs++) {
		unsigned n = devs == 1 ? rep->min_free_n1 : rep->min_free_n2;
		if (!n) {
			printf("numdevs=%d: no inumbits value avoids collisions on this filesystem.\n",
			       devs);
			continue;
		}
		const struct btrfsimg_collide_result *res = find(rep, n, false, devs);
		printf("numdevs=%d: use inumbits=%u or more (smallest collision-free).\n  %s\n",
		       devs, n, res ? res->reason : "");
	}
	printf("  overlayfs xino keeps working for up to 128 layers with inumbits <= 56.\n");
	const struct btrfsimg_collide_result *u = find(rep, 0, true, 1);
	if (u)
		printf("\nnfsd with ino_uniquifier: %s (%" PRIu64 " shared numbers).\n",
		       u->groups ? "collides" : "collision-free", u->groups);
}

static int cmd_collisions(struct cli *c)
{
	struct btrfsimg_fs_collisions *col;
	int rc = btrfsimg_collisions(c->fs, c->have_mount_subvol ? c->mount_subvol : 0, 10, &col);
	if (rc < 0)
		return cli_fail(c, rc, "collisions");
	struct report_ctx r = { .c = c, .col = col };
	if (btrfsimg_subvols(c->fs, &r.sv, &r.nsv) < 0)
		r.nsv = 0;
	if (c->json) {
		for (size_t i = 0; i < col->report->nresults; i++)
			scheme_json(&r, &col->report->results[i], col->readdir_mismatch[i]);
		summary_json(col);
	} else {
		text_report(&r);
	}
	btrfsimg_subvols_free(r.sv, r.nsv);
	btrfsimg_fs_collisions_free(col);
	return cli_status(c);
}

static const struct cmd_option collisions_options[] = {
	{ OPT_JSON, "one JSON object per scheme, then a summary" },
	{ OPT_MOUNT_SUBVOL, NULL },
	CMD_IMAGE_OPTIONS,
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_collisions = {
	.name = "collisions",
	.summary = "inode-number collisions under every scheme",
	.args = "IMAGE...",
	.about = "For today's kernel and every proposed scheme: the inode numbers shared on\n"
		 "one device, the inodes behind them (by path), readdir/stat disagreements,\n"
		 "the smallest safe inumbits, and how far the filesystem may grow.",
	.examples = "btrfsimg collisions disk.img\n"
		    "btrfsimg collisions --json --mount-subvol 256 disk.img",
	.options = collisions_options,
	.run = cmd_collisions,
};
