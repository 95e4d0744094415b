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

#endif
