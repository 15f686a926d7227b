/* SPDX-License-Identifier: MIT */
/* Protocol-buffers wire encoding into a struct nt_buf (see pbw.h). */
#include "pbw.h"

#include <string.h>

void pbw_varint(struct nt_buf *b, uint64_t v)
{
	unsigned char tmp[10];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (unsigned char)v;
	nt_buf_put(b, (const char *)tmp, n);
}

void pbw_uint(struct nt_buf *b, uint32_t field, uint64_t v)
{
	pbw_tag(b, field, PB_VARINT);
	pbw_varint(b, v);
}

void pbw_fixed64(struct nt_buf *b, uint32_t field, uint64_t v)
{
	unsigned char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	pbw_tag(b, field, PB_I64);
	nt_buf_put(b, (const char *)le, sizeof(le));
}

void pbw_double(struct nt_buf *b, uint32_t field, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	pbw_fixed64(b, field, bits);
}

void pbw_bytes(struct nt_buf *b, uint32_t field, const void *p, size_t n)
{
	pbw_tag(b, field, PB_LEN);
	pbw_varint(b, n);
	nt_buf_put(b, p, n);
}

size_t pbw_begin(struct nt_buf *b, uint32_t field)
{
	pbw_tag(b, field, PB_LEN);
	nt_buf_put(b, "", 1); /* one length byte, fixed up by pbw_end */
	return b->len;
}

void pbw_end(struct nt_buf *b, size_t mark)
{
	static const char pad[10];

	if (b->oom || mark == 0 || mark > b->len)
		return;
	size_t len = b->len - mark;
	size_t need = pbw_varint_len(len);
	if (need > 1) {
		nt_buf_put(b, pad, need - 1);
		if (b->oom)
			return;
		memmove(b->p + mark + need - 1, b->p + mark, len);
	}
	unsigned char *at = (unsigned char *)b->p + mark - 1;
	for (size_t i = 0; i < need; i++, len >>= 7)
		at[i] = (unsigned char)((len & 0x7f) | (i + 1 < need ? 0x80 : 0));
}
