// SPDX-License-Identifier: MIT
/* Escaped names and readable times for the text output (see text.h). */
#include "common/text.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "common/json.h"

/* Bytes at @s that pass through as they are: 0 when the byte at @s must be
 * escaped. */
static size_t plain_len(const uint8_t *s, size_t n, const char *also)
{
	uint8_t c = s[0];
	if (c < 0x80)
		return c >= 0x20 && c < 0x7f && c != '\\' && !(also && strchr(also, c)) ? 1 : 0;
	size_t len = jw_utf8_len(s, n);
	if (len == 2 && c == 0xc2 && s[1] < 0xa0)
		return 0; /* U+0080..U+009F: C1 controls */
	return len;
}

/* The escape of @c at @p: its length (2 or 4). */
static size_t escape_at(char *p, uint8_t c)
{
	static const char hex[] = "0123456789abcdef";
	p[0] = '\\';
	switch (c) {
	case '\\': p[1] = '\\'; return 2;
	case '\n': p[1] = 'n'; return 2;
	case '\t': p[1] = 't'; return 2;
	case '\r': p[1] = 'r'; return 2;
	default:
		p[1] = 'x';
		p[2] = hex[c >> 4];
		p[3] = hex[c & 15];
		return 4;
	}
}

void text_name_jw(struct jw *w, const uint8_t *s, size_t n, const char *also)
{
	size_t i = 0;
	while (i < n) {
		size_t run = 0, len;
		while (i + run < n && (len = plain_len(s + i + run, n - i - run, also)) > 0)
			run += len;
		if (run) {
			jw_raw(w, (const char *)s + i, run);
			i += run;
		} else {
			jw_grow(w, 4);
			w->len += escape_at(w->buf + w->len, s[i++]);
		}
	}
}

void text_name(FILE *out, const uint8_t *s, size_t n, const char *also)
{
	struct jw w = { 0 };
	text_name_jw(&w, s, n, also);
	if (w.len)
		fwrite(w.buf, 1, w.len, out);
	jw_line_free(&w);
}

/* The calendar's way, for the times text_time_at does not format itself. */
static void time_by_libc(char out[TEXT_TIME_MAX], int64_t sec, uint32_t nsec)
{
	struct tm tm;
	time_t t = (time_t)sec;
	size_t n = 0;
	if ((int64_t)t == sec && gmtime_r(&t, &tm) && tm.tm_year >= -1900 &&
	    tm.tm_year <= 9999 - 1900)
		n = strftime(out, TEXT_TIME_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
	if (n)
		snprintf(out + n, TEXT_TIME_MAX - n, ".%09" PRIu32 "Z", nsec);
	else
		snprintf(out, TEXT_TIME_MAX, "@%" PRId64 ".%09" PRIu32, sec, nsec);
}

/* Year, month, day of @days since 1970-01-01 in the proleptic Gregorian
 * calendar (the era arithmetic of Howard Hinnant's "chrono-compatible
 * low-level date algorithms"), for any day gmtime_r can hold. */
static void civil_of(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	uint64_t doe = (uint64_t)(z - era * 146097);			       /* [0, 146096] */
	uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);		       /* [0, 365] */
	uint64_t mp = (5 * doy + 2) / 153;				       /* [0, 11] */
	*d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* Without gmtime_r and strftime (their locking and parsing were most of a
 * text line's cost): years 1000 to 9999 and nanoseconds below 10^9, which
 * is every time a filesystem holds in practice; else the library's way. */
size_t text_time_at(char *p, int64_t sec, uint32_t nsec)
{
	int64_t days = sec / 86400, rem = sec % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	int64_t y;
	unsigned mo, d;
	civil_of(days, &y, &mo, &d);
	if (y < 1000 || y > 9999 || nsec >= 1000000000u) {
		char t[TEXT_TIME_MAX];
		time_by_libc(t, sec, nsec);
		size_t n = strlen(t);
		memcpy(p, t, n);
		return n;
	}
	unsigned hms = (unsigned)rem;
	jw_put4(p, (uint32_t)y);
	p[4] = '-';
	memcpy(p + 5, jw_digit_pairs + mo * 2, 2);
	p[7] = '-';
	memcpy(p + 8, jw_digit_pairs + d * 2, 2);
	p[10] = 'T';
	memcpy(p + 11, jw_digit_pairs + hms / 3600 * 2, 2);
	p[13] = ':';
	memcpy(p + 14, jw_digit_pairs + hms / 60 % 60 * 2, 2);
	p[16] = ':';
	memcpy(p + 17, jw_digit_pairs + hms % 60 * 2, 2);
	p[19] = '.';
	jw_put4(p + 20, nsec / 100000);
	jw_put4(p + 24, nsec / 10 % 10000);
	p[28] = (char)('0' + nsec % 10);
	p[29] = 'Z';
	return 30;
}

void text_time(char out[TEXT_TIME_MAX], int64_t sec, uint32_t nsec)
{
	out[text_time_at(out, sec, nsec)] = '\0';
}
