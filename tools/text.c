// SPDX-License-Identifier: MIT
/* Escaped names and readable times for the text output (see text.h). */
#include "text.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "json.h"

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

static void put_escape(FILE *out, uint8_t c)
{
	switch (c) {
	case '\\': fputs("\\\\", out); break;
	case '\n': fputs("\\n", out); break;
	case '\t': fputs("\\t", out); break;
	case '\r': fputs("\\r", out); break;
	default: fprintf(out, "\\x%02x", c);
	}
}

void text_name(FILE *out, const uint8_t *s, size_t n, const char *also)
{
	size_t i = 0;
	while (i < n) {
		size_t run = 0, len;
		while (i + run < n && (len = plain_len(s + i + run, n - i - run, also)) > 0)
			run += len;
		if (run) {
			fwrite(s + i, 1, run, out);
			i += run;
		} else {
			put_escape(out, s[i++]);
		}
	}
}

void text_time(char out[TEXT_TIME_MAX], int64_t sec, uint32_t nsec)
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
