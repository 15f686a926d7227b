/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus exposition format's rules (see expo.h): metric and label
 * names made valid, label values and HELP text escaped (and made valid
 * UTF-8 with the kit's check), sample values and `le` bounds written the
 * way each format wants them. Written by hand because no Debian C library
 * encodes the exposition format (libprom / prometheus-client-c are not
 * packaged, and they own their registry rather than render ours).
 */
#include "expo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ntcore/kit/utf8.h>

static int name_char(unsigned char c, int first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	    c == ':')
		return 1;
	return !first && c >= '0' && c <= '9';
}

size_t pe_base_name(struct nt_sb *out, const char *name, uint32_t type)
{
	size_t start = out->len, n = name ? strlen(name) : 0;

	if (type == NT_METRIC_COUNTER && n >= 6 &&
	    memcmp(name + n - 6, "_total", 6) == 0)
		n -= 6;
	if (n < 7 || memcmp(name, "ntcore_", 7) != 0)
		nt_sb_put(out, "ntcore_", 7);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		nt_sb_putc(out, name_char(c, 0) ? (char)c : '_');
	}
	return out->len - start;
}

void pe_label_name(struct nt_sb *out, const char *name, int histogram)
{
	size_t i = 0;

	if (!name || !*name) {
		nt_sb_putc(out, '_');
		return;
	}
	if (histogram && strcmp(name, "le") == 0) {
		nt_sb_puts(out, "le_");
		return;
	}
	if (name[0] == '_' && name[1] == '_') {
		while (name[i + 1] == '_')
			i++; /* keep one '_' */
		if (!name[i + 1]) {
			nt_sb_putc(out, '_');
			return;
		}
	} else if (name[0] >= '0' && name[0] <= '9') {
		nt_sb_putc(out, '_');
	}
	for (; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];

		nt_sb_putc(out, (name_char(c, 0) && c != ':') ? (char)c : '_');
	}
}

static void escape(struct nt_sb *out, const char *v, int quote)
{
	const unsigned char *s = (const unsigned char *)v, *run = s;

	if (!v)
		return;
	for (;;) {
		unsigned char c = *s;
		size_t n;

		/* Fast path: plain printable ASCII. */
		if (c >= 0x20 && c < 0x80 && c != '\\' && c != '"') {
			s++;
			continue;
		}
		if (c == '"' && !quote) {
			s++;
			continue;
		}
		nt_sb_put(out, (const char *)run, (size_t)(s - run));
		if (c == 0)
			return;
		if (c == '\\') {
			nt_sb_put(out, "\\\\", 2);
			s++;
		} else if (c == '"') {
			nt_sb_put(out, "\\\"", 2);
			s++;
		} else if (c == '\n') {
			nt_sb_put(out, "\\n", 2);
			s++;
		} else if ((n = nt_utf8_seq(s, 4)) != 0) {
			/* 4: the string ends at a NUL, which no sequence
			 * holds, so the check never reads past it */
			nt_sb_put(out, (const char *)s, n);
			s += n;
		} else {
			nt_sb_put(out, "\xEF\xBF\xBD", 3); /* U+FFFD */
			s++;
		}
		run = s;
	}
}

void pe_label_value(struct nt_sb *out, const char *v)
{
	escape(out, v, 1);
}

void pe_help(struct nt_sb *out, const char *s, enum pe_format fmt)
{
	escape(out, s, fmt == PE_FMT_OPENMETRICS);
}

size_t pe_fmt_value(char *o, double v)
{
	int n;

	if (isnan(v)) {
		memcpy(o, "NaN", 4);
		return 3;
	}
	if (isinf(v)) {
		memcpy(o, v > 0 ? "+Inf" : "-Inf", 5);
		return 4;
	}
	if (fabs(v) < 9007199254740992.0 && v == (double)(int64_t)v) {
		struct nt_sb b;

		nt_sb_init_buf(&b, o, 32);
		nt_sb_i64(&b, (int64_t)v);
		return b.len;
	}
	n = snprintf(o, 32, "%.15g", v);
	if (strtod(o, NULL) != v)
		n = snprintf(o, 32, "%.17g", v);
	return (size_t)n;
}

size_t pe_fmt_le(char *o, double v, enum pe_format fmt)
{
	size_t n = pe_fmt_value(o, v);

	/* OpenMetrics canonical numbers: an integral value has ".0". */
	if (fmt == PE_FMT_OPENMETRICS && !isnan(v) && !isinf(v) &&
	    !strpbrk(o, ".eE")) {
		memcpy(o + n, ".0", 3);
		n += 2;
	}
	return n;
}
