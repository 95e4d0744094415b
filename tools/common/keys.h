/* SPDX-License-Identifier: MIT */
/* What LUKS and LVM need from the command line (--passphrase-file,
 * --volume-key-file, a passphrase prompt, --partition VG/LV). */
#ifndef BTRFSIMG_TOOLS_KEYS_H
#define BTRFSIMG_TOOLS_KEYS_H

#include "cli.h"

/* Give @fs the keys and the volume choice of @c. Keys are read, handed to
 * the library (which copies them) and wiped here. Without a passphrase or
 * volume key file, a terminal on standard input gets a prompt without echo
 * when a LUKS volume is found. EXIT_OK or EXIT_FAILED (said). */
int cli_volume_setup(struct cli *c, btrfsimg_fs *fs);

/* The keys of @c, read from their files, until cli_keys_wipe. */
struct cli_keys {
	unsigned char pass[8192 + 1], vkey[64 + 1];
	size_t plen, vklen;
	bool have_pass, have_vkey;
};

/* Read @c's key files into @k and point @o (an open's options) at them,
 * with the volume, the KDF limit and the prompt as cli_volume_setup gives
 * them. EXIT_OK or EXIT_FAILED (said; @k wiped). */
int cli_keys_options(const struct cli *c, struct cli_keys *k, struct btrfsimg_open_options *o);
void cli_keys_wipe(struct cli_keys *k);

#endif
