// SPDX-License-Identifier: MIT
/*
 * Keys for encrypted volumes, from files or a terminal prompt, and the
 * LVM logical volume to open. The passphrase file is taken byte for byte
 * (cryptsetup --key-file: a trailing newline is part of it); the volume
 * key file holds the raw key (cryptsetup luksDump --dump-volume-key
 * --volume-key-file). Key bytes never reach stdout or stderr and are
 * wiped from this side once the library holds its copy.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/keys.h"

#define KEY_FILE_MAX 8192

/* The whole of @path into @buf; its length, or -1 (said). */
static ssize_t slurp(const char *opt, const char *path, unsigned char *buf, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		cli_warn("%s %s: %s", opt, path, strerror(errno));
		return -1;
	}
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, max + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0)
				cli_warn("%s %s: %s", opt, path, strerror(errno));
			close(fd);
			return r < 0 ? -1 : (ssize_t)n;
		}
		n += (size_t)r;
		if (n > max) {
			close(fd);
			explicit_bzero(buf, max + 1);
			cli_warn("%s %s: longer than %zu bytes", opt, path, max);
			return -1;
		}
	}
}

/* The prompt: "Passphrase for VOLUME: " on the terminal, echo off. */
static int ask(void *ctx, const char *volume, void *buf, size_t max)
{
	(void)ctx;
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct termios old, quiet;
	bool tty = tcgetattr(fd, &old) == 0;
	if (tty) {
		quiet = old;
		quiet.c_lflag &= (tcflag_t)~ECHO;
		quiet.c_lflag |= ECHONL;
		tcsetattr(fd, TCSAFLUSH, &quiet);
	}
	dprintf(fd, "Passphrase for %s: ", volume);
	size_t n = 0;
	unsigned char *p = buf;
	int rc = -ENODATA; /* end of input before a line: declined */
	for (;;) {
		unsigned char ch;
		ssize_t r = read(fd, &ch, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0 && ch == '\n')
			rc = 0;
		if (r <= 0 || ch == '\n')
			break;
		if (n == max) {
			rc = -E2BIG;
			break;
		}
		p[n++] = ch;
	}
	if (tty)
		tcsetattr(fd, TCSAFLUSH, &old);
	close(fd);
	if (rc < 0)
		explicit_bzero(buf, max);
	return rc < 0 ? rc : (int)n;
}

void cli_keys_wipe(struct cli_keys *k)
{
	explicit_bzero(k, sizeof(*k));
}

/* The key files of @c into @k, the passphrase file first. */
static int read_keys(const struct cli *c, struct cli_keys *k)
{
	memset(k, 0, sizeof(*k));
	if (c->passphrase_file) {
		ssize_t n = slurp("--passphrase-file", c->passphrase_file, k->pass, KEY_FILE_MAX);
		if (n < 0)
			return EXIT_FAILED;
		k->plen = (size_t)n;
		k->have_pass = true;
	}
	if (c->volume_key_file) {
		ssize_t n = slurp("--volume-key-file", c->volume_key_file, k->vkey, 64);
		if (n < 0)
			return EXIT_FAILED;
		if (n == 0) {
			cli_warn("--volume-key-file %s: empty", c->volume_key_file);
			return EXIT_FAILED;
		}
		k->vklen = (size_t)n;
		k->have_vkey = true;
	}
	return EXIT_OK;
}

int cli_keys_options(const struct cli *c, struct cli_keys *k, struct btrfsimg_open_options *o)
{
	if (read_keys(c, k) != EXIT_OK) {
		cli_keys_wipe(k);
		return EXIT_FAILED;
	}
	o->passphrase = k->have_pass ? k->pass : NULL;
	o->passphrase_len = k->plen;
	o->volume_key = k->have_vkey ? k->vkey : NULL;
	o->volume_key_len = k->vklen;
	o->volume = c->volume;
	o->kdf_limit_ms = c->kdf_ms;
	if (!c->passphrase_file && !c->volume_key_file && isatty(STDIN_FILENO))
		o->passphrase_fn = ask;
	return EXIT_OK;
}

/* The step-by-step route, for a probe (layers): the same keys, handed to
 * the library one call each. */
int cli_volume_setup(struct cli *c, btrfsimg_fs *fs)
{
	if (c->volume && btrfsimg_select_volume(fs, c->volume) < 0) {
		cli_warn("--partition %s: expected VG/LV", c->volume);
		return EXIT_FAILED;
	}
	struct cli_keys k;
	if (read_keys(c, &k) != EXIT_OK) {
		cli_keys_wipe(&k);
		return EXIT_FAILED; /* a key file, said */
	}
	int rc = k.have_pass ? btrfsimg_set_passphrase(fs, k.pass, k.plen) : 0;
	if (c->kdf_ms && btrfsimg_set_kdf_limit(fs, c->kdf_ms) < 0) {
		cli_keys_wipe(&k);
		cli_warn("--kdf-limit: not accepted");
		return EXIT_FAILED;
	}
	if (rc == 0 && k.have_vkey)
		rc = btrfsimg_set_volume_key(fs, k.vkey, k.vklen);
	cli_keys_wipe(&k);
	if (rc < 0) {
		cli_warn("cannot keep the key: %s", strerror(-rc));
		return EXIT_FAILED;
	}
	if (!c->passphrase_file && !c->volume_key_file && isatty(STDIN_FILENO))
		btrfsimg_set_passphrase_fn(fs, ask, NULL);
	return EXIT_OK;
}
