/* SPDX-License-Identifier: MIT */
/*
 * Line tables, written from CPython's own description of them
 * (Objects/lnotab_notes.txt for 3.10, Objects/locations.md for 3.11+) and
 * checked against co_lines() of real interpreters (tests/unit/
 * test_python_fixtures.c).
 */
#include "pyline.h"

/* 3.10: pairs (unsigned byte delta, signed line delta; -128 = no line). */
static int addr2line_310(const uint8_t *lt, size_t len, int first, int addr)
{
	size_t i = 0;
	int start = -1, end = 0, line = first, ar_line = -1;

	while (end <= addr) {
		/* next non-empty range */
		do {
			if (i + 1 >= len)
				return -1;
			start = end;
			end += lt[i];
			if ((int8_t)lt[i + 1] == -128) {
				ar_line = -1;
			} else {
				line += (int8_t)lt[i + 1];
				ar_line = line;
			}
			i += 2;
		} while (start == end);
	}
	(void)start;
	return ar_line;
}

static unsigned scan_varint(const uint8_t *p, const uint8_t *lim)
{
	unsigned read, val, shift = 0;

	if (p >= lim)
		return 0;
	read = *p++;
	val = read & 63;
	while ((read & 64) && p < lim) {
		read = *p++;
		shift += 6;
		if (shift < 32)
			val |= (read & 63) << shift;
	}
	return val;
}

static int scan_svarint(const uint8_t *p, const uint8_t *lim)
{
	unsigned u = scan_varint(p, lim);

	return (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
}

/* 3.11+: entries starting with a byte whose top bit is set; bits 3-6 the
 * form, bits 0-2 the length in code units minus one. */
static int addr2line_311(const uint8_t *lt, size_t len, int first, int addr)
{
	const uint8_t *p = lt, *lim = lt + len;
	int end = 0, line = first, ar_line = -1;

	while (end <= addr) {
		int code, delta = 0;

		if (p >= lim)
			return -1;
		code = (*p >> 3) & 15;
		if (code == 13 || code == 14)
			delta = scan_svarint(p + 1, lim);
		else if (code == 11)
			delta = 1;
		else if (code == 12)
			delta = 2;
		line += delta;
		ar_line = code == 15 ? -1 : line;
		end += ((*p & 7) + 1) * 2;
		do
			p++;
		while (p < lim && (*p & 128) == 0);
	}
	return ar_line;
}

int py_addr2line(int minor, const uint8_t *lt, size_t len, int first, int addr)
{
	if (addr < 0)
		return first;
	if (!lt)
		return -1;
	if (minor <= 10)
		return addr2line_310(lt, len, first, addr);
	return addr2line_311(lt, len, first, addr);
}
