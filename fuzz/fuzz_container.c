// SPDX-License-Identifier: MIT
/*
 * Container target: a mutated EWF, qcow2, VMDK, VHD/VHDX or split raw file
 * through detection, the container libraries (libewf, libqcow, libvmdk,
 * libvhdi) and a read of the virtual disk, as the CLI does it.
 *
 * Input: byte 0 chooses the format (low 3 bits, enum btrfsimg_format: 0
 * detects by signature) and the file name's extension (.E01, .qcow2,
 * .vmdk, .vhd, .vhdx, .001); the rest is the file. The libraries open files
 * by name, so the input is written to a private temporary folder first.
 *
 * Beside the input lie a FIFO ("fifo") and a symlink to /dev/zero
 * ("zero"): a backing file, parent or extent file named so (seeds
 * qcow2-backing-*, vmdk-extent-*) must be refused, never opened for good (a
 * FIFO would block the run until libFuzzer's -timeout).
 *
 * Invariants: a failed open leaves a message naming the file; an opened
 * image reports a segment list whose first entry is the file; reads inside
 * the disk return 0 or fail with a message, reads past its end fail;
 * adding the file as a device and opening the filesystem never crashes and
 * always leaves a message on failure. Memory is bounded by the libraries'
 * own checks against the size claims of their tables, under libFuzzer's
 * -rss_limit_mb / -malloc_limit_mb (CI: 2048).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfsimg.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)

static char dir[64];

static const char *const exts[8] = { ".img",   ".img",	".001", ".E01",
				     ".qcow2", ".vmdk", ".vhd", ".vhdx" };

static void on_log(void *ctx, bool damage, const char *msg)
{
	(void)ctx;
	(void)damage;
	CHECK(msg && *msg);
}

static void read_some(btrfsimg_image *img, uint64_t size)
{
	static uint8_t buf[1u << 17];
	const uint64_t at[] = { 0, 65536, size / 2, size > 4096 ? size - 4096 : 0 };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		size_t n = size - at[i] < sizeof(buf) ? (size_t)(size - at[i]) : sizeof(buf);
		if (at[i] >= size)
			continue;
		int rc = btrfsimg_image_read(img, at[i], buf, n);
		CHECK(rc == 0 || (rc < 0 && *btrfsimg_image_errmsg(img)));
	}
	CHECK(btrfsimg_image_read(img, size, buf, 1) < 0);
}

static void through_fs(const char *path, int format)
{
	btrfsimg_fs *fs;
	if (btrfsimg_fs_new(&fs, NULL) < 0)
		return;
	btrfsimg_set_log(fs, on_log, NULL);
	int rc = btrfsimg_add_device_file_format(fs, path, format);
	CHECK(rc >= 0 || *btrfsimg_errmsg(fs));
	if (rc == 0) {
		rc = btrfsimg_open(fs);
		CHECK(rc == 0 || *btrfsimg_errmsg(fs));
	}
	btrfsimg_fs_free(fs);
}

/* Leaks inside the container libraries themselves (libewf 20140813 loses
 * its chunk buffers on some read errors: libewf_chunk_data_initialize) are
 * theirs to fix, not ours: LeakSanitizer leaves them out. Ours are still
 * reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libewf.so\nleak:libqcow.so\nleak:libvmdk.so\nleak:libvhdi.so\n";
}

static void remove_dir(void)
{
	char p[96];
	snprintf(p, sizeof(p), "%s/fifo", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/zero", dir);
	unlink(p);
	rmdir(dir);
}

/* The files a hostile image names beside itself: a FIFO, a device. */
static void hostile_neighbours(void)
{
	char p[96];
	snprintf(p, sizeof(p), "%s/fifo", dir);
	if (mkfifo(p, 0600) != 0 && errno != EEXIST)
		abort();
	snprintf(p, sizeof(p), "%s/zero", dir);
	if (symlink("/dev/zero", p) != 0 && errno != EEXIST)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/fuzz-container-%d", (int)getpid());
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			abort();
		atexit(remove_dir);
		hostile_neighbours();
	}
	int format = data[0] & 7;
	char path[128];
	snprintf(path, sizeof(path), "%s/in%s", dir, exts[format]);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, data + 1, size - 1) == (ssize_t)(size - 1));
	close(fd);

	char err[1024];
	btrfsimg_image *img = NULL;
	int rc = btrfsimg_image_open(&img, path, format, err, sizeof(err));
	CHECK(rc == 0 || (rc < 0 && *err));
	if (rc == 0) {
		struct btrfsimg_image_info in;
		btrfsimg_image_info(img, &in);
		CHECK(in.format != BTRFSIMG_FORMAT_AUTO && in.segments >= 1);
		CHECK(btrfsimg_image_segment(img, 0, NULL) != NULL);
		for (size_t i = 0; i < in.meta; i++) {
			const char *k, *v;
			CHECK(btrfsimg_image_meta(img, i, &k, &v) == 0 && k && v);
		}
		read_some(img, in.size);
		btrfsimg_image_free(img);
	}
	through_fs(path, format);
	unlink(path);
	return 0;
}
