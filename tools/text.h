/* SPDX-License-Identifier: MIT */
/*
 * What the text (non-JSON) output of the CLI shares: names escaped so that
 * a line stays a line, and times a person can read.
 *
 * Names are bytes. Printable ASCII and valid UTF-8 characters pass through;
 * a backslash is written "\\", newline, tab and carriage return "\n", "\t",
 * "\r", and every other byte (control bytes, DEL, C1 controls, bytes that
 * are not valid UTF-8) "\xNN" (two lowercase hex digits). Undoing those
 * escapes gives the exact bytes back.
 */
#ifndef BTRFSIMG_TOOLS_TEXT_H
#define BTRFSIMG_TOOLS_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* @s[0..@n) escaped onto @out; the ASCII bytes in @also (may be NULL) are
 * written "\xNN" too (bodyfile: its field separator). */
void text_name(FILE *out, const uint8_t *s, size_t n, const char *also);

/* ISO 8601 in UTC with nanoseconds, "2026-12-03T10:56:20.135319767Z";
 * a time the calendar cannot hold as "@SEC.NNNNNNNNN". */
#define TEXT_TIME_MAX 48
#define TEXT_TIME_WIDTH 30	/* the usual length, for columns */
void text_time(char out[TEXT_TIME_MAX], int64_t sec, uint32_t nsec);

#endif
