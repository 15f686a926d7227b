/* SPDX-License-Identifier: MIT */
/* Plugin kit: the string builder's growth, integer and JSON appends. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ntcore/kit/sb.h"
#include "ntcore/kit/utf8.h"

#define SB_FIRST_CAP 256
#define SB_NO_BOUND (SIZE_MAX / 4)

void nt_sb_init(struct nt_sb *b, size_t max)
{
	*b = (struct nt_sb){.max = max && max < SB_NO_BOUND ? max : SB_NO_BOUND,
			    .owned = true};
}

void nt_sb_init_buf(struct nt_sb *b, char *buf, size_t size)
{
	*b = (struct nt_sb){.buf = buf, .cap = size,
			    .max = size ? size - 1 : 0};
	if (size)
		buf[0] = '\0';
	else
		b->failed = true; /* nowhere to write even the NUL */
}

void nt_sb_fini(struct nt_sb *b)
{
	if (b->owned)
		free(b->buf);
	*b = (struct nt_sb){0};
}

void nt_sb_rewind(struct nt_sb *b, size_t len)
{
	if (len < b->len)
		b->len = len;
	if (b->buf && b->cap)
		b->buf[b->len] = '\0';
	b->failed = !b->cap && !b->owned;
}

bool nt_sb_reserve(struct nt_sb *b, size_t n)
{
	if (b->failed)
		return false;
	if (b->cap - b->len > n)
		return true;
	if (!b->owned || n > b->max - b->len) {
		b->failed = true;
		return false;
	}
	size_t need = b->len + n + 1, cap = b->cap ? b->cap : SB_FIRST_CAP;
	while (cap < need)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	char *grown = realloc(b->buf, cap);
	if (!grown) {
		b->failed = true;
		return false;
	}
	b->buf = grown;
	b->cap = cap;
	return true;
}

static const char two_digits[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233"
	"34353637383940414243444546474849505152535455565758596061626364656667"
	"6869707172737475767778798081828384858687888990919293949596979899";

/* Digits of v at the end of out[20]; returns where they start. */
static char *u64_digits(uint64_t v, char out[20])
{
	char *p = out + 20;

	while (v >= 100) {
		unsigned pair = (unsigned)(v % 100) * 2;
		v /= 100;
		*--p = two_digits[pair + 1];
		*--p = two_digits[pair];
	}
	if (v >= 10) {
		*--p = two_digits[v * 2 + 1];
		*--p = two_digits[v * 2];
	} else {
		*--p = (char)('0' + v);
	}
	return p;
}

void nt_sb_u64(struct nt_sb *b, uint64_t v)
{
	char digits[20];
	char *p = u64_digits(v, digits);

	nt_sb_put(b, p, (size_t)(digits + 20 - p));
}

void nt_sb_i64(struct nt_sb *b, int64_t v)
{
	char digits[21];
	uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	char *p = u64_digits(mag, digits + 1);

	if (v < 0)
		*--p = '-';
	nt_sb_put(b, p, (size_t)(digits + 21 - p));
}

void nt_sb_hex(struct nt_sb *b, uint64_t v)
{
	static const char hex[16] = "0123456789abcdef";
	char digits[16];
	char *p = digits + 16;

	do {
		*--p = hex[v & 0xf];
		v >>= 4;
	} while (v);
	nt_sb_put(b, p, (size_t)(digits + 16 - p));
}

/* 1 for the bytes a JSON string takes as they are: printable ASCII but
 * the quote and the backslash. */
static const unsigned char json_plain[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Escapes the byte(s) at s that are not plain; returns how many it took. */
static size_t json_special(struct nt_sb *b, const unsigned char *s, size_t n)
{
	static const char hex[16] = "0123456789abcdef";
	size_t seq;

	switch (*s) {
	case '"': nt_sb_put(b, "\\\"", 2); return 1;
	case '\\': nt_sb_put(b, "\\\\", 2); return 1;
	case '\n': nt_sb_put(b, "\\n", 2); return 1;
	case '\r': nt_sb_put(b, "\\r", 2); return 1;
	case '\t': nt_sb_put(b, "\\t", 2); return 1;
	case '\b': nt_sb_put(b, "\\b", 2); return 1;
	case '\f': nt_sb_put(b, "\\f", 2); return 1;
	default: break;
	}
	if (*s < 0x20 || *s == 0x7f) {
		char esc[6] = {'\\', 'u', '0', '0', hex[*s >> 4], hex[*s & 0xf]};
		nt_sb_put(b, esc, sizeof(esc));
		return 1;
	}
	seq = nt_utf8_seq(s, n);
	if (!seq) {
		nt_sb_put(b, "\\ufffd", 6);
		return 1;
	}
	nt_sb_put(b, s, seq);
	return seq;
}

void nt_sb_json_str(struct nt_sb *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t start = b->len, i = 0;

	nt_sb_putc(b, '"');
	while (i < n && u[i] && !b->failed) {
		size_t end = i;
		while (end < n && json_plain[u[end]])
			end++;
		if (end > i) {
			nt_sb_put(b, s + i, end - i);
			i = end;
		} else {
			i += json_special(b, u + i, n - i);
		}
	}
	nt_sb_putc(b, '"');
	if (b->failed && b->len > start) {
		b->len = start;
		b->buf[start] = '\0';
	}
}

void nt_sb_printf(struct nt_sb *b, const char *fmt, ...)
{
	size_t room = b->failed ? 0 : b->cap - b->len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		if (room)
			b->buf[b->len] = '\0';
		b->failed = true;
		return;
	}
	if ((size_t)n >= room) {
		if (room)
			b->buf[b->len] = '\0'; /* undo the partial text */
		if (!nt_sb_reserve(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}
