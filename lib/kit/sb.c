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

char *nt_sb_take(struct nt_sb *b, size_t *len)
{
	char *text;

	if (!b->owned)
		return NULL;
	text = b->buf ? b->buf : calloc(1, 1);
	if (text && len)
		*len = b->len;
	if (text)
		nt_sb_init(b, b->max);
	return text;
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

/* The 2 digits of v < 100 just before p. */
static inline char *put2(char *p, unsigned v)
{
	p -= 2;
	memcpy(p, two_digits + v * 2, 2);
	return p;
}

/* Exactly 8 digits of v < 10^8 (leading zeros kept) just before p. */
static inline char *put8(char *p, uint32_t v)
{
	uint32_t hi = v / 10000, lo = v % 10000;

	p = put2(p, lo % 100);
	p = put2(p, lo / 100);
	p = put2(p, hi % 100);
	return put2(p, hi / 100);
}

/* Digits of v ending just before `end`; returns where they start. Works in
 * 8-digit chunks of 32-bit arithmetic, which is what makes it fast. */
static char *u64_digits(uint64_t v, char *end)
{
	char *p = end;
	uint32_t w;

	while (v >= 100000000) {
		p = put8(p, (uint32_t)(v % 100000000));
		v /= 100000000;
	}
	for (w = (uint32_t)v; w >= 100; w /= 100)
		p = put2(p, w % 100);
	if (w >= 10)
		return put2(p, w);
	*--p = (char)('0' + w);
	return p;
}

static const uint64_t pow10_table[20] = {
	1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
	10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
	100000000000ull, 1000000000000ull, 10000000000000ull,
	100000000000000ull, 1000000000000000ull, 10000000000000000ull,
	100000000000000000ull, 1000000000000000000ull,
	10000000000000000000ull,
};

/* Decimal digits of v: log10 from the bit length (1233/4096 ~ log10(2)),
 * then one comparison; no division. */
static unsigned u64_len(uint64_t v)
{
	uint64_t x = v | 1; /* 0 has one digit, as 1 has */
	unsigned t = ((64 - (unsigned)__builtin_clzll(x)) * 1233) >> 12;

	return t + 1 - (x < pow10_table[t]);
}

/* Room for n more bytes already there: the fast paths write in place. */
static bool has_room(const struct nt_sb *b, size_t n)
{
	return !b->failed && b->cap - b->len > n;
}

void nt_sb_u64(struct nt_sb *b, uint64_t v)
{
	char digits[20], *p;

	if (has_room(b, 20)) {
		b->len += u64_len(v);
		u64_digits(v, b->buf + b->len);
		b->buf[b->len] = '\0';
		return;
	}
	p = u64_digits(v, digits + 20);
	nt_sb_put(b, p, (size_t)(digits + 20 - p));
}

void nt_sb_i64(struct nt_sb *b, int64_t v)
{
	char digits[21];
	uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	char *p = u64_digits(mag, digits + 21);

	if (v < 0)
		*--p = '-';
	nt_sb_put(b, p, (size_t)(digits + 21 - p));
}

static const char hex_digits[16] = "0123456789abcdef";

void nt_sb_hex(struct nt_sb *b, uint64_t v)
{
	char digits[16];
	char *p = digits + 16;

	do {
		*--p = hex_digits[v & 0xf];
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

/* The escape of a byte that is not plain ASCII text: its short form, or
 * \u00XX for the other control bytes and DEL. */
static size_t escape_ascii(unsigned char c, char *o)
{
	static const char short_form[32] = {
		['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r',
	};

	o[0] = '\\';
	if (c == '"' || c == '\\') {
		o[1] = (char)c;
		return 2;
	}
	if (c < 0x20 && short_form[c]) {
		o[1] = short_form[c];
		return 2;
	}
	memcpy(o + 1, "u00", 3);
	o[4] = hex_digits[c >> 4];
	o[5] = hex_digits[c & 0xf];
	return 6;
}

/*
 * The escaped form of the one non-plain character at u (n bytes left):
 * written to o, its length returned, and *took set to the bytes it
 * covers. A byte that starts no valid UTF-8 sequence becomes \ufffd, so
 * no input byte takes more than 6 output bytes.
 */
static size_t json_special(const unsigned char *u, size_t n, char *o,
			   size_t *took)
{
	size_t k;

	*took = 1;
	if (u[0] < 0x80)
		return escape_ascii(u[0], o);
	if ((k = nt_utf8_seq(u, n))) {
		memcpy(o, u, k);
		*took = k;
		return k;
	}
	memcpy(o, "\\ufffd", 6);
	return 6;
}

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether any byte of w is zero (the classic SWAR test). */
static inline uint64_t any_zero(uint64_t w)
{
	return (w - ONES) & ~w & HIGHS;
}

/* The length of the run of plain bytes at u, 8 bytes a step: a word is
 * plain unless a byte is below 0x20, 0x7f or above, '"' or '\\'. */
static size_t plain_run(const unsigned char *u, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, u + i, 8);
		if (((w - 0x20 * ONES) & ~w & HIGHS) | (w & HIGHS) |
		    any_zero(w ^ (0x7f * ONES)) | any_zero(w ^ ('"' * ONES)) |
		    any_zero(w ^ ('\\' * ONES)))
			break;
	}
	while (i < n && json_plain[u[i]])
		i++;
	return i;
}

/* Writes the escaped text of u[0..n) to o (room for 6 * n); returns its
 * length. Runs of plain bytes are copied whole. */
static size_t json_write(const unsigned char *u, size_t n, char *o)
{
	size_t i = 0, w = 0, took;

	for (;;) {
		size_t start = i;
		i += plain_run(u + i, n - i);
		memcpy(o + w, u + start, i - start);
		w += i - start;
		if (i == n)
			return w;
		w += json_special(u + i, n - i, o + w, &took);
		i += took;
	}
}

/* The length json_write would write, for the exact-fit check. */
static size_t json_len(const unsigned char *u, size_t n)
{
	size_t i = 0, w = 0, took;
	char scratch[6];

	while (i < n) {
		if (json_plain[u[i]]) {
			w++;
			i++;
			continue;
		}
		w += json_special(u + i, n - i, scratch, &took);
		i += took;
	}
	return w;
}

void nt_sb_json_str(struct nt_sb *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	const char *nul = memchr(s, '\0', n);
	size_t worst;

	if (nul)
		n = (size_t)(nul - s);
	if (n > SB_NO_BOUND / 8) {
		b->failed = true;
		return;
	}
	worst = 6 * n + 2;
	/* Room for the worst case (growing for it when that stays within the
	 * bound), else measure first: near the bound only the exact length
	 * decides. */
	if (!has_room(b, worst) &&
	    !(worst <= b->max - b->len && b->owned && nt_sb_reserve(b, worst)) &&
	    !nt_sb__room(b, json_len(u, n) + 2))
		return;
	b->buf[b->len++] = '"';
	b->len += json_write(u, n, b->buf + b->len);
	b->buf[b->len++] = '"';
	b->buf[b->len] = '\0';
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

/* ------------------------------------------------------------------ */
/* The cursor API: room checked once per record                        */
/* ------------------------------------------------------------------ */

char *nt_sb_cursor(struct nt_sb *b, size_t worst)
{
	if (!nt_sb__room(b, worst))
		return NULL;
	return b->buf + b->len;
}

char *nt_fmt_u64(char *p, uint64_t v)
{
	char *end = p + u64_len(v);

	u64_digits(v, end);
	return end;
}

char *nt_fmt_i64(char *p, int64_t v)
{
	if (v >= 0)
		return nt_fmt_u64(p, (uint64_t)v);
	*p++ = '-';
	return nt_fmt_u64(p, 0 - (uint64_t)v);
}

char *nt_fmt_hex(char *p, uint64_t v)
{
	unsigned n = 1;

	for (uint64_t x = v >> 4; x; x >>= 4)
		n++;
	for (unsigned i = n; i > 0; i--, v >>= 4)
		p[i - 1] = hex_digits[v & 0xf];
	return p + n;
}

char *nt_fmt_json_str(char *p, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, took;

	*p++ = '"';
	/* 8 plain bytes a step, stored as they are read; the first word
	 * with a NUL or a byte to escape goes to the loop below */
	for (; i + 8 <= n; i += 8, p += 8) {
		uint64_t w;
		memcpy(&w, u + i, 8);
		if (((w - 0x20 * ONES) & ~w & HIGHS) | (w & HIGHS) |
		    any_zero(w ^ (0x7f * ONES)) | any_zero(w ^ ('"' * ONES)) |
		    any_zero(w ^ ('\\' * ONES)))
			break;
		memcpy(p, &w, 8);
	}
	while (i < n && u[i]) {
		if (json_plain[u[i]]) {
			*p++ = (char)u[i++];
			continue;
		}
		p += json_special(u + i, n - i, p, &took);
		i += took;
	}
	*p++ = '"';
	return p;
}

const char *nt_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024.0 && u < 4) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}
