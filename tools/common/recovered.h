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
#include "common/json.h"

/* Scan every device of c->fs (progress bar on a terminal). EXIT_OK with
 * *out set, or EXIT_FAILED (said). */
int rec_scan(struct cli *c, btrfsimg_forensic **out);
/* The record's fields (a JSON object already begun); @sha256 may be NULL. */
/* A version whose path shows a damaged name by its safe form
 * (btrfsimg_name_safe): said on stderr and counted as damage. */
void rec_name_damage(struct cli *c, const struct btrfsimg_recovered *r);
void rec_json(struct jw *w, const struct btrfsimg_recovered *r, const char *sha256);
/* The read flags the options ask for: --no-verify gives BTRFSIMG_FORENSIC_RAW
 * (csum mismatch ranges as the bytes on disk), else 0. */
unsigned rec_read_flags(const struct cli *c);
/* Write a version's bytes to @out (@flags: BTRFSIMG_FORENSIC_*). Returns
 * btrfsimg_forensic_read's value (0 whole, 1 partial, < 0). */
int rec_write(btrfsimg_forensic *f, const char *id, unsigned flags, FILE *out);
/* How a bad range was written under @flags, for the warnings: "written as
 * zeros", or as the bytes on disk (unverified) for a csum mismatch read raw. */
const char *rec_bad_as(const struct btrfsimg_bad_range *b, unsigned flags);
/* cat --deleted ID: the version's bytes on standard output; exit 1 when
 * partial (the untrusted ranges said on stderr, written as zeros, or with
 * --no-verify the csum mismatch ones as on disk, said so). */
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
