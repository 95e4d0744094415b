// SPDX-License-Identifier: MIT
/*
 * A brute force for `btrfsimg collisions` at a scale Python cannot reach
 * (the 101-subvolume snapshot image: 101 M inodes). It shares nothing with
 * libbtrfsimg: it walks a mounted btrfs as the kernel shows it (readdir's
 * d_ino, statx with STATX_SUBVOL), computes every inode's presented number
 * for each of the 69 schemes with its own formulas, sorts them and counts
 * the numbers two or more inodes share.
 *
 *   brute MOUNTPOINT   (the filesystem mounted at its top level, subvolid=5)
 *
 * Directories are statx'ed; for anything else readdir's d_ino is taken as
 * the st_ino in the directory's subvolume, and one in SPOT_CHECK is
 * statx'ed to check that (statx of every file costs about 20 us here).
 *
 * Prints one line per scheme, "NAME GROUPS INODES READDIR_MISMATCH
 * GROUPS_WITHOUT_STUBS INODES_WITHOUT_STUBS", in the order and with the
 * names of `collisions --json`. The rules are those of
 * tests/images/test_inodes.py's brute(): an inode is a distinct (subvolume, st_ino);
 * a stub directory (st_ino 2) counts once per place it appears, on device 0
 * (on a device of its own under numdevs=many); numdevs=2 puts a subvolume on
 * the device of its parent's subvolume flipped, the top level on device 0; a
 * directory entry naming another subvolume (or a stub) mismatches when its
 * readdir number, presented with the directory's constant, differs from the
 * st_ino presented for what it names (256, or 2 for a stub).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MY_STATX_SUBVOL 0x8000u	/* Linux 6.10; Debian 12's headers predate it */
#define STX_SUBVOL_OFFSET 0xa0	/* struct statx: stx_subvol */
#define TOP_LEVEL 5

struct pair {
	uint64_t subvol, ino;
};

struct entry {
	uint64_t dir_subvol, d_ino, child;	/* child 0: a stub directory */
};

struct subvol_dev {
	uint64_t subvol;
	int dev2;
};

#define SPOT_CHECK 97	/* statx one in this many non-directories */

static uint64_t nondirs;
static struct pair *pairs;
static size_t npairs, cappairs;
static struct entry *entries;
static size_t nentries, capentries;
static uint64_t *stub_parents;
static size_t nstubs, capstubs;
static struct subvol_dev *devs;
static size_t ndevs, capdevs;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "brute: %s: %s: %s\n", what, path, strerror(errno));
	exit(2);
}

static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return v;
	*cap = *cap ? *cap * 2 : 1024;
	v = realloc(v, *cap * size);
	if (!v) {
		fputs("brute: out of memory\n", stderr);
		exit(2);
	}
	return v;
}

static void kernel_stat(int dirfd, const char *name, uint64_t *ino, uint64_t *subvol,
			bool *is_dir)
{
	struct statx stx;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_TYPE | MY_STATX_SUBVOL,
		  &stx) < 0)
		die("statx", name);
	*ino = stx.stx_ino;
	*is_dir = S_ISDIR(stx.stx_mode);
	*subvol = 0;
	if (*is_dir && *ino == 2)
		return; /* a stub: the kernel gives it no subvolume (6.18) */
	if (!(stx.stx_mask & MY_STATX_SUBVOL)) {
		fprintf(stderr, "brute: %s: the kernel gave no STATX_SUBVOL (Linux 6.10+)\n", name);
		exit(2);
	}
	memcpy(subvol, (const char *)&stx + STX_SUBVOL_OFFSET, sizeof(*subvol));
}

static int dev2_of(uint64_t subvol)
{
	for (size_t i = 0; i < ndevs; i++)
		if (devs[i].subvol == subvol)
			return devs[i].dev2;
	fprintf(stderr, "brute: subvolume %llu reached before its parent\n",
		(unsigned long long)subvol);
	exit(2);
}

static void add_pair(uint64_t subvol, uint64_t ino)
{
	pairs = grow(pairs, &cappairs, npairs, sizeof(*pairs));
	pairs[npairs++] = (struct pair){ subvol, ino };
}

/* Every entry of the directory open at @fd, which lives in @subvol. */
static void walk(int fd, uint64_t subvol, const char *path)
{
	DIR *d = fdopendir(fd);
	if (!d)
		die("fdopendir", path);
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		uint64_t ino, sv;
		bool is_dir;
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN && ++nondirs % SPOT_CHECK) {
			/* Only a directory can be another subvolume's root, and
			 * readdir's d_ino of anything else is its st_ino: statx
			 * of a hundred million files would take the better part
			 * of an hour. Every SPOT_CHECK-th one is checked. */
			add_pair(subvol, de->d_ino);
			continue;
		}
		kernel_stat(dirfd(d), de->d_name, &ino, &sv, &is_dir);
		if (!is_dir && (sv != subvol || ino != de->d_ino)) {
			fprintf(stderr, "brute: %s/%s: d_ino %llu subvolume %llu but st_ino %llu "
				"subvolume %llu\n", path, de->d_name, (unsigned long long)de->d_ino,
				(unsigned long long)subvol, (unsigned long long)ino,
				(unsigned long long)sv);
			exit(2);
		}
		if (is_dir && ino == 2) { /* a stub: no subvolume of its own */
			stub_parents = grow(stub_parents, &capstubs, nstubs, sizeof(*stub_parents));
			stub_parents[nstubs++] = subvol;
			entries = grow(entries, &capentries, nentries, sizeof(*entries));
			entries[nentries++] = (struct entry){ subvol, de->d_ino, 0 };
			continue;
		}
		add_pair(sv, ino);
		if (sv != subvol) {
			entries = grow(entries, &capentries, nentries, sizeof(*entries));
			entries[nentries++] = (struct entry){ subvol, de->d_ino, sv };
			devs = grow(devs, &capdevs, ndevs, sizeof(*devs));
			devs[ndevs++] = (struct subvol_dev){ sv, dev2_of(subvol) ^ 1 };
		}
		if (is_dir) {
			int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
			if (cfd < 0)
				die("open", de->d_name);
			walk(cfd, sv, de->d_name);
		}
	}
	if (errno)
		die("readdir", path);
	closedir(d);
}

static uint64_t swab64(uint64_t v)
{
	uint64_t r = 0;
	for (int i = 0; i < 8; i++)
		r = r << 8 | ((v >> (8 * i)) & 0xff);
	return r;
}

enum kind { NFSD, UNIQ, N1, N2, MANY };

struct scheme {
	enum kind kind;
	int bits;
};

/* The number XORed into a subvolume's inode numbers under the scheme. */
static uint64_t constant(const struct scheme *s, uint64_t subvol)
{
	if (subvol == TOP_LEVEL)
		return 0;
	switch (s->kind) {
	case UNIQ:
		return swab64(subvol);
	case N1:
	case N2:
		return swab64(subvol) >> (64 - s->bits);
	default:
		return 0;
	}
}

static uint64_t presented(uint64_t ino, uint64_t v)
{
	return ino == v ? ino : ino ^ v;
}

/* LSD radix sort by 16-bit digits, skipping digits every value shares. */
static void radix_sort(uint64_t *v, uint64_t *tmp, size_t n)
{
	static size_t count[65536];
	for (int shift = 0; shift < 64; shift += 16) {
		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[(v[i] >> shift) & 0xffff]++;
		if (n && count[(v[0] >> shift) & 0xffff] == n)
			continue;
		size_t sum = 0;
		for (size_t d = 0; d < 65536; d++) {
			size_t c = count[d];
			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(v[i] >> shift) & 0xffff]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
}

/* Sort one device's numbers and add up those shared by two or more. */
static void count_shared(uint64_t *v, uint64_t *tmp, size_t n, uint64_t *groups,
			 uint64_t *inodes)
{
	radix_sort(v, tmp, n);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && v[j] == v[i])
			j++;
		if (j - i >= 2) {
			(*groups)++;
			*inodes += j - i;
		}
		i = j;
	}
}

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	if (x->subvol != y->subvol)
		return x->subvol < y->subvol ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Shared numbers and the inodes in them, the first @stubs stubs counted. */
static void count_scheme(const struct scheme *s, uint64_t *v, uint64_t *tmp, size_t stubs,
			 uint64_t *groups_out, uint64_t *inodes_out)
{
	uint64_t groups = 0, inodes = 0;
	if (s->kind == MANY) { /* a device per subvolume, one for the stubs */
		for (size_t i = 0; i < npairs;) {
			size_t j = i, n = 0;
			for (; j < npairs && pairs[j].subvol == pairs[i].subvol; j++)
				v[n++] = pairs[j].ino;
			count_shared(v, tmp, n, &groups, &inodes);
			i = j;
		}
		for (size_t i = 0; i < stubs; i++)
			v[i] = 2;
		count_shared(v, tmp, stubs, &groups, &inodes);
	} else {
		for (int dev = 0; dev < (s->kind == N2 ? 2 : 1); dev++) {
			size_t n = 0;
			uint64_t last = 0, c = 0;
			int d = 0;
			for (size_t i = 0; i < npairs; i++) {
				if (i == 0 || pairs[i].subvol != last) {
					last = pairs[i].subvol;
					c = constant(s, last);
					d = s->kind == N2 ? dev2_of(last) : 0;
				}
				if (d != dev)
					continue;
				v[n++] = presented(pairs[i].ino, c);
			}
			if (dev == 0)
				for (size_t i = 0; i < stubs; i++)
					v[n++] = 2;
			count_shared(v, tmp, n, &groups, &inodes);
		}
	}
	*groups_out = groups;
	*inodes_out = inodes;
}

/* One line: the counts with the stubs, readdir mismatches, then the counts
 * without the stubs (`collisions --json`'s *_without_stubs). */
static void run_scheme(const struct scheme *s, uint64_t *v, uint64_t *tmp)
{
	uint64_t groups, inodes, bare_groups, bare_inodes;
	count_scheme(s, v, tmp, nstubs, &groups, &inodes);
	bare_groups = groups;
	bare_inodes = inodes;
	if (nstubs)
		count_scheme(s, v, tmp, 0, &bare_groups, &bare_inodes);
	uint64_t mismatch = 0;
	for (size_t i = 0; i < nentries; i++) {
		const struct entry *e = &entries[i];
		uint64_t st = e->child ? presented(256, constant(s, e->child)) : 2;
		mismatch += presented(e->d_ino, constant(s, e->dir_subvol)) != st;
	}
	char name[40];
	switch (s->kind) {
	case NFSD: snprintf(name, sizeof(name), "nfsd"); break;
	case UNIQ: snprintf(name, sizeof(name), "nfsd-uniquifier"); break;
	case MANY: snprintf(name, sizeof(name), "numdevs=many"); break;
	default:
		snprintf(name, sizeof(name), "inumbits=%d,numdevs=%d", s->bits,
			 s->kind == N1 ? 1 : 2);
	}
	printf("%s %llu %llu %llu %llu %llu\n", name, (unsigned long long)groups,
	       (unsigned long long)inodes, (unsigned long long)mismatch,
	       (unsigned long long)bare_groups, (unsigned long long)bare_inodes);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: brute MOUNTPOINT\n", stderr);
		return 2;
	}
	uint64_t ino, sv;
	bool is_dir;
	kernel_stat(AT_FDCWD, argv[1], &ino, &sv, &is_dir);
	if (sv != TOP_LEVEL) {
		fprintf(stderr, "brute: %s is subvolume %llu, not the top level\n", argv[1],
			(unsigned long long)sv);
		return 2;
	}
	devs = grow(devs, &capdevs, ndevs, sizeof(*devs));
	devs[ndevs++] = (struct subvol_dev){ TOP_LEVEL, 0 };
	add_pair(sv, ino);
	int fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		die("open", argv[1]);
	walk(fd, sv, argv[1]);
	qsort(pairs, npairs, sizeof(*pairs), cmp_pair);
	size_t n = 0; /* hard links: one inode, many paths */
	for (size_t i = 0; i < npairs; i++)
		if (n == 0 || cmp_pair(&pairs[n - 1], &pairs[i]))
			pairs[n++] = pairs[i];
	fprintf(stderr, "brute: %zu paths, %zu inodes, %zu subvolumes, %zu stubs\n", npairs, n,
		ndevs, nstubs);
	npairs = n;
	uint64_t *v = malloc((npairs + nstubs + 1) * sizeof(*v));
	uint64_t *tmp = malloc((npairs + nstubs + 1) * sizeof(*tmp));
	if (!v || !tmp) {
		fputs("brute: out of memory\n", stderr);
		return 2;
	}
	run_scheme(&(struct scheme){ NFSD, 0 }, v, tmp);
	run_scheme(&(struct scheme){ UNIQ, 0 }, v, tmp);
	for (int bits = 32; bits <= 64; bits++) {
		run_scheme(&(struct scheme){ N1, bits }, v, tmp);
		run_scheme(&(struct scheme){ N2, bits }, v, tmp);
	}
	run_scheme(&(struct scheme){ MANY, 0 }, v, tmp);
	free(v);
	free(tmp);
	free(pairs);
	free(entries);
	free(stub_parents);
	free(devs);
	return 0;
}
