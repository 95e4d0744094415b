// SPDX-License-Identifier: MIT
/*
 * nfswalk: the recorder run inside the seed-kernel VM (testdata/gen-nfs.sh).
 * Walks a directory depth-first without following symlinks and prints, per
 * path, what a program sees: "TAG<TAB>path<TAB>st_ino<TAB>d_ino<TAB>st_dev"
 * (d_ino "-" for the start). Paths are relative, names escaped as \ooo when
 * not printable ASCII or a tab/backslash. Built static: the VM has no libc.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char *tag;

static void put_path(const char *p)
{
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c >= 0x7f || c == '\\')
			printf("\\%03o", c);
		else
			putchar(c);
	}
}

static int emit(const char *rel, const char *abs, const char *d_ino)
{
	struct stat st;
	if (lstat(abs, &st) != 0) {
		printf("%s\t", tag);
		put_path(rel);
		printf("\tERR\t%s\t-\n", d_ino);
		return 0;
	}
	printf("%s\t", tag);
	put_path(rel);
	printf("\t%llu\t%s\t%u:%u\n", (unsigned long long)st.st_ino, d_ino,
	       major(st.st_dev), minor(st.st_dev));
	return S_ISDIR(st.st_mode);
}

static void walk(const char *rel, const char *abs)
{
	DIR *d = opendir(abs);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *r, *a, num[24];
		if (asprintf(&r, "%s%s%s", rel, *rel ? "/" : "", e->d_name) < 0 ||
		    asprintf(&a, "%s/%s", abs, e->d_name) < 0)
			exit(1);
		snprintf(num, sizeof(num), "%llu", (unsigned long long)e->d_ino);
		if (emit(r, a, num))
			walk(r, a);
		free(r);
		free(a);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	tag = argv[1];
	emit("", argv[2], "-");
	walk("", argv[2]);
	fflush(stdout);
	return 0;
}
