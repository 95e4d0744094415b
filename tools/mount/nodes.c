// SPDX-License-Identifier: MIT
/*
 * What btrfsimg mount keeps besides the FUSE operations: the inode-number
 * scheme it shows (the library's pure scheme functions, btrfsimg_inum.h),
 * the inodes the kernel holds (FUSE node ids, counted by lookups and
 * forgets, in a hash table under one lock) and the pool of filesystem
 * handles the worker threads share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mount/mount.h"

/* ------------------------------------------------------------ numbers */

int mount_scheme_parse(const char *s, struct mount_scheme *out, char *why, size_t len)
{
	*out = (struct mount_scheme){ 0 };
	if (!strcmp(s, "nfsd"))
		return 0;
	if (!strcmp(s, "nfsd-uniquifier")) {
		out->uniquifier = true;
		return 0;
	}
	unsigned n = 0;
	int end = 0;
	char devs[16] = "";
	if (sscanf(s, "inumbits=%u%n", &n, &end) == 1 && (s[end] == '\0' || s[end] == ',')) {
		if (n < 32 || n > 64) {
			snprintf(why, len, "inumbits=%u: N must be 32..64", n);
			return -1;
		}
		if (s[end] == ',' && (sscanf(s + end, ",numdevs=%15s", devs) != 1))
			devs[0] = '\0';
		/* A FUSE mount has one st_dev: numdevs=1 is the only count it can
		 * show, so inumbits=N alone means it. */
		if (s[end] == '\0' || !strcmp(devs, "1")) {
			out->inumbits = n;
			return 0;
		}
		if ((s[end] == ',' && !devs[0]) ||
		    (devs[0] && strcmp(devs, "2") != 0 && strcmp(devs, "many") != 0)) {
			snprintf(why, len, "'%s': after inumbits=%u comes ,numdevs=1", s, n);
			return -1;
		}
	} else if (strcmp(s, "numdevs=many") != 0 && strcmp(s, "numdevs=2") != 0) {
		snprintf(why, len,
			 "unknown scheme '%s'; give nfsd, nfsd-uniquifier or "
			 "inumbits=N,numdevs=1 (N 32..64)",
			 s);
		return -1;
	}
	snprintf(why, len,
		 "'%s': a FUSE mount has one st_dev, so numdevs=2 and numdevs=many (today's "
		 "one device per subvolume) cannot be shown; give inumbits=N,numdevs=1, nfsd or "
		 "nfsd-uniquifier",
		 s);
	return -1;
}

uint64_t mount_st_ino(const struct mount_scheme *s, uint64_t subvol, uint64_t objectid, bool stub)
{
	/* the made-up #lost+found has objectid 0, which a listing cannot
	 * show (glibc's readdir skips an entry of d_ino 0 as deleted): 1, an
	 * objectid no inode of a subvolume tree has */
	if (objectid == 0)
		objectid = 1;
	if (stub)
		return objectid; /* 2: no overlay, no uniquifier */
	if (s->uniquifier)
		return btrfsimg_presented_ino(objectid, btrfsimg_uniquifier(subvol));
	if (s->inumbits)
		return btrfsimg_presented_ino(objectid,
					      btrfsimg_inumbits_overlay(subvol, s->inumbits));
	return objectid;
}

uint64_t mount_d_ino(const struct mount_scheme *s, uint64_t dir_subvol, uint64_t loc)
{
	return mount_st_ino(s, dir_subvol, loc, false);
}

/* ------------------------------------------------------------ nodes */

static size_t hash_of(const struct mount_node *k, size_t nbuckets)
{
	uint64_t h = k->subvol * 0x9e3779b97f4a7c15ull ^ k->objectid;
	h ^= k->stub_dir * 0xc2b2ae3d27d4eb4full ^ k->stub_child * 0x165667b19e3779f9ull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (size_t)(h & (nbuckets - 1));
}

static bool same(const struct mount_node *a, const struct mount_node *b)
{
	return a->subvol == b->subvol && a->objectid == b->objectid && a->stub_dir == b->stub_dir &&
	       a->stub_child == b->stub_child && a->lost == b->lost;
}

int mount_nodes_init(struct mount_nodes *t)
{
	*t = (struct mount_nodes){ .nbuckets = 1u << 12 };
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void mount_nodes_free(struct mount_nodes *t)
{
	for (size_t i = 0; t->buckets && i < t->nbuckets; i++) {
		struct mount_node *n = t->buckets[i];
		while (n) {
			struct mount_node *next = n->next;
			free(n);
			n = next;
		}
	}
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
}

/* Double the table when it holds more nodes than buckets (lock held). */
static void grow(struct mount_nodes *t)
{
	size_t nb = t->nbuckets * 2;
	struct mount_node **b = calloc(nb, sizeof(*b));
	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct mount_node *n = t->buckets[i];
		while (n) {
			struct mount_node *next = n->next;
			size_t h = hash_of(n, nb);
			n->next = b[h];
			b[h] = n;
			n = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

struct mount_node *mount_nodes_get(struct mount_nodes *t, const struct mount_node *key)
{
	pthread_mutex_lock(&t->lock);
	size_t h = hash_of(key, t->nbuckets);
	struct mount_node *n = t->buckets[h];
	while (n && !same(n, key))
		n = n->next;
	if (!n) {
		n = malloc(sizeof(*n));
		if (n) {
			*n = *key;
			n->nlookup = 0;
			n->next = t->buckets[h];
			t->buckets[h] = n;
			if (++t->count > t->nbuckets)
				grow(t);
		}
	}
	if (n)
		n->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void mount_nodes_forget(struct mount_nodes *t, struct mount_node *n, uint64_t k)
{
	pthread_mutex_lock(&t->lock);
	n->nlookup = k >= n->nlookup ? 0 : n->nlookup - k;
	if (n->nlookup == 0) {
		struct mount_node **p = &t->buckets[hash_of(n, t->nbuckets)];
		while (*p && *p != n)
			p = &(*p)->next;
		if (*p) {
			*p = n->next;
			t->count--;
			free(n);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

/* ------------------------------------------------------------ handles */

static int open_one(btrfsimg_fs **out, char **images, int nimages,
		    const struct btrfsimg_open_opts *opts, char *err, size_t errlen)
{
	btrfsimg_fs *fs = NULL;
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	o.fs = *opts;
	int rc = btrfsimg_open_images(&fs, (const char *const *)images, (size_t)nimages, &o);
	if (rc < 0) {
		snprintf(err, errlen, "%s",
			 fs && *btrfsimg_errmsg(fs) ? btrfsimg_errmsg(fs) : strerror(-rc));
		btrfsimg_fs_free(fs);
		return rc;
	}
	*out = fs;
	return 0;
}

int mount_pool_open(struct mount_pool *p, btrfsimg_fs *first, int n, char **images, int nimages,
		    const struct btrfsimg_open_opts *opts, char *err, size_t errlen)
{
	*p = (struct mount_pool){ .n = 1 };
	p->fs[0] = first;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	if (n > MOUNT_MAX_HANDLES)
		n = MOUNT_MAX_HANDLES;
	for (; p->n < n; p->n++)
		if (open_one(&p->fs[p->n], images, nimages, opts, err, errlen) < 0)
			break; /* fewer handles: the requests wait for one */
	return p->n;
}

void mount_pool_close(struct mount_pool *p)
{
	for (int i = 1; i < p->n; i++)
		btrfsimg_fs_free(p->fs[i]);
	p->n = 0;
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
}

btrfsimg_fs *mount_pool_get(struct mount_pool *p)
{
	pthread_mutex_lock(&p->lock);
	for (;;) {
		for (int i = 0; i < p->n; i++) {
			if (!p->busy[i]) {
				p->busy[i] = true;
				pthread_mutex_unlock(&p->lock);
				return p->fs[i];
			}
		}
		pthread_cond_wait(&p->freed, &p->lock);
	}
}

void mount_pool_put(struct mount_pool *p, btrfsimg_fs *fs)
{
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->n; i++)
		if (p->fs[i] == fs)
			p->busy[i] = false;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}
