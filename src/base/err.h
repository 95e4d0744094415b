/* SPDX-License-Identifier: MIT */
/*
 * Messages, the library's one error idiom. A failing function returns a
 * negative errno and leaves a message on the handle (bi_err). A pure
 * parser, which has no handle, puts its reason into a caller's buffer
 * (bi_why: -EUCLEAN) and the reader that called it adds where the item
 * is (bi_item_err: "corrupt <kind>: root=R block=B slot=S, <reason>").
 * Damage that was worked around goes to the log callback (bi_damage).
 */
#ifndef BI_ERR_H
#define BI_ERR_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef EUCLEAN
#define EUCLEAN 117
#endif

#define BI_PRINTF(a, b) __attribute__((format(printf, a, b)))

struct btrfsimg_fs;

/* ---- failures: return a negative errno, say what and where ---- */

/* Set the handle's message and return @code (a negative errno). */
int bi_err(struct btrfsimg_fs *fs, int code, const char *fmt, ...) BI_PRINTF(3, 4);
/* Set "corrupt <kind>: root=R block=B slot=S, <reason>" (the kernel's
 * generic_err form) on the handle and return @code. */
int bi_item_err(struct btrfsimg_fs *fs, int code, const char *kind, uint64_t root,
		uint64_t block, uint32_t slot, const char *fmt, ...) BI_PRINTF(7, 8);
/* The same for code with no handle (pure parsers, the collision engine):
 * format into @buf (may be NULL) and return @code. */
int bi_msg(char *buf, size_t len, int code, const char *fmt, ...) BI_PRINTF(4, 5);
/* A failed check in a pure parser: the reason into @why (may be NULL),
 * returns -EUCLEAN. */
int bi_why(char *why, size_t whylen, const char *fmt, ...) BI_PRINTF(3, 4);
/* Whether the handle is open; if not, the message says "<fn>: filesystem
 * not open" (callers return -EINVAL: misuse). */
bool bi_opened(struct btrfsimg_fs *fs, const char *fn);

/* ---- reports through the log callback: the work goes on ---- */

/* Damage that was worked around; counted (btrfsimg_damage_count). */
void bi_damage(struct btrfsimg_fs *fs, const char *fmt, ...) BI_PRINTF(2, 3);
/* Informational line (not damage). */
void bi_info(struct btrfsimg_fs *fs, const char *fmt, ...) BI_PRINTF(2, 3);

/* ---- formats every layer shares ---- */

/* A uuid as 36 lowercase characters plus NUL. */
void bi_uuid_str(const uint8_t uuid[16], char out[37]);
bool bi_uuid_is_zero(const uint8_t uuid[16]);

#endif
