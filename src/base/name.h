/* SPDX-License-Identifier: MIT */
/*
 * Names that cannot be one path component, and the one safe form every
 * front end shows them by.
 *
 * A btrfs name may hold any byte but NUL and '/', and is neither empty,
 * "." nor "..": the kernel's tree-checker refuses the rest when a block is
 * read (check_dir_item, btrfs_check_namelen), so such a name is damage or
 * a forgery. Paths this library builds join components with '/', so such
 * a name would read as a separator, cut the path at a NUL, or step out of
 * its directory. Valid names pass unchanged; a damaged one becomes a
 * valid component by percent-escaping (RFC 3986 style, uppercase hex):
 *
 *   NUL -> %00   '/' -> %2F   '%' -> %25   (every such byte of the name)
 *   "." -> %2E   ".." -> %2E%2E   ""  -> %
 *
 * Undoing the escapes gives the name's bytes back (bi_name_raw), so the
 * form is stable and distinct for distinct damaged names; it may equal a
 * valid name of the same directory (nothing a component can hold is
 * reserved), and then the valid name wins a lookup.
 */
#ifndef BI_NAME_H
#define BI_NAME_H

#include <stddef.h>
#include <stdint.h>

/* The longest safe form of a name of @len bytes. */
#define BI_NAME_SAFE_MAX(len) (3 * (size_t)(len) + 1)

/* Why @name[0..@len) cannot be one path component, or NULL when it can. */
const char *bi_name_problem(const uint8_t *name, size_t len);

/* The safe form of @name into @out (@cap bytes, NUL-terminated when @cap
 * is not 0, cut to fit): its length, which may be @cap or more. */
size_t bi_name_safe(const uint8_t *name, size_t len, char *out, size_t cap);

/* The bytes whose safe form is @safe[0..@len), when those bytes are a
 * damaged name (the inverse of bi_name_safe on damaged names): their
 * length into *@out_len, into @out (@cap bytes; @len suffices), and 0;
 * -EINVAL when @safe is no such form (a valid name stands for itself). */
int bi_name_raw(const char *safe, size_t len, uint8_t *out, size_t cap, size_t *out_len);

#endif
