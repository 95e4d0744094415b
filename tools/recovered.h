/* SPDX-License-Identifier: MIT */
/* What deleted, history, cat --deleted, extract --deleted and bodyfile
 * --deleted share: the forensic scan with a progress bar, a recovered
 * version as JSON, its digest and its bytes. */
#ifndef BTRFSIMG_TOOLS_RECOVERED_H
#define BTRFSIMG_TOOLS_RECOVERED_H

#include <stdbool.h>
#include <stdio.h>

#include "btrfsimg_forensic.h"
#include "cli.h"
#include "json.h"

/* Scan every device of c->fs (progress bar on a terminal). EXIT_OK with
 * *out set, or EXIT_FAILED (said). */
int rec_scan(struct cli *c, btrfsimg_forensic **out);
/* Hex digest (@alg "sha256" or "md5") of a version's bytes into @hex.
 * Returns btrfsimg_forensic_read's value (0 whole, 1 partial, < 0). */
int rec_digest(btrfsimg_forensic *f, const char *id, const char *alg, char *hex);
/* The record's fields (a JSON object already begun); @sha256 may be NULL. */
void rec_json(struct jw *w, const struct btrfsimg_recovered *r, const char *sha256);
/* Write a version's bytes to @out. Returns as rec_digest. */
int rec_write(btrfsimg_forensic *f, const char *id, FILE *out);
/* cat --deleted ID: the version's bytes on standard output; exit 1 when
 * partial (the untrusted ranges said on stderr, written as zeros). */
int rec_cat(struct cli *c);
/* extract --deleted's manifest (JSON lines, one per version: "file", its
 * path under DESTDIR, then rec_json's fields), inside DESTDIR. Created
 * new: an existing file or link there refuses the command. A version of
 * the same name is written under another (NAME.~ID~), as a second version
 * of one path is. */
#define REC_MANIFEST "btrfsimg-manifest.jsonl"
/* Before the scan: 0, or EXIT_FAILED (said) when DESTDIR/REC_MANIFEST
 * exists already (rec_extract would refuse it after the scan). */
int rec_extract_check(const struct cli *c);
/* extract --deleted: every version under c->destdir and the manifest
 * (REC_MANIFEST) in it. */
int rec_extract(struct cli *c);

#endif
