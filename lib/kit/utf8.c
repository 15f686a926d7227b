/* SPDX-License-Identifier: MIT */
/* Plugin kit: UTF-8 sequence checks, repair, encoding and cutting. */
#include <string.h>

#include "ntcore/kit/utf8.h"

static bool is_cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* The second byte's range depends on the lead byte: it is what rules out
 * overlong forms (E0, F0), surrogates (ED) and values past U+10FFFF (F4). */
static bool second_ok(unsigned char lead, unsigned char c)
{
	switch (lead) {
	case 0xe0: return c >= 0xa0 && c <= 0xbf;
	case 0xed: return c >= 0x80 && c <= 0x9f;
	case 0xf0: return c >= 0x90 && c <= 0xbf;
	case 0xf4: return c >= 0x80 && c <= 0x8f;
	default: return is_cont(c);
	}
}

size_t nt_utf8_seq(const void *s, size_t n)
{
	const unsigned char *u = s;
	size_t need;

	if (!n)
		return 0;
	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xc2 && u[0] <= 0xdf)
		need = 2;
	else if (u[0] >= 0xe0 && u[0] <= 0xef)
		need = 3;
	else if (u[0] >= 0xf0 && u[0] <= 0xf4)
		need = 4;
	else
		return 0; /* a continuation byte, C0/C1 (overlong), F5..FF */
	if (n < need || !second_ok(u[0], u[1]))
		return 0;
	for (size_t i = 2; i < need; i++)
		if (!is_cont(u[i]))
			return 0;
	return need;
}

bool nt_utf8_valid(const void *s, size_t n)
{
	const unsigned char *u = s;

	for (size_t i = 0; i < n;) {
		size_t k;

		if (u[i] < 0x80) {
			i++;
			continue;
		}
		if (!(k = nt_utf8_seq(u + i, n - i)))
			return false;
		i += k;
	}
	return true;
}

size_t nt_utf8_repair(const void *in, size_t n, char *out, size_t size)
{
	static const char replacement[3] = {(char)0xef, (char)0xbf, (char)0xbd};
	const unsigned char *u = in;
	size_t i = 0, o = 0;

	if (!size)
		return 0;
	while (i < n) {
		size_t k = u[i] < 0x80 ? 1 : nt_utf8_seq(u + i, n - i);
		const void *src = k ? (const void *)(u + i) : replacement;
		size_t len = k ? k : sizeof(replacement);

		if (size - o <= len)
			break;
		memcpy(out + o, src, len);
		o += len;
		i += k ? k : 1;
	}
	out[o] = '\0';
	return o;
}

size_t nt_utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

size_t nt_utf8_cut(const void *s, size_t n, size_t max)
{
	const unsigned char *u = s;
	size_t end = max;

	if (n <= max)
		return n;
	/* Step back over at most three continuation bytes to a lead byte. */
	while (end > 0 && max - end < 3 && is_cont(u[end]))
		end--;
	if (is_cont(u[end]))
		return max; /* no lead byte in reach: not UTF-8 here anyway */
	/* A valid character that ends by max stays (the bytes after it were
	 * stray continuation bytes). */
	size_t k = nt_utf8_seq(u + end, n - end);
	return k && end + k <= max ? max : end;
}
