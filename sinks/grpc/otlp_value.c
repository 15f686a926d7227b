/* SPDX-License-Identifier: MIT */
/*
 * One schema field of an event record as an OTLP AnyValue: integers as
 * int_value (u64 above INT64_MAX wraps, documented), doubles, bools,
 * strings made valid UTF-8, and the typed renderings: hex64 as "0x...",
 * addresses as text, dev_t as "major:minor", errno by its name.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "otlp_pb.h"

/* A VSTR field's bytes, or NULL when it points outside the record. */
const char *otlp_vstr_get(const struct nt_event_hdr *ev,
			    const struct nt_field *f, size_t *len)
{
	struct nt_vstr v;

	memcpy(&v, (const char *)ev + f->offset, sizeof(v));
	if ((uint64_t)v.off + v.len > ev->size || v.off < sizeof(*ev)) {
		*len = 0;
		return NULL;
	}
	*len = v.len;
	return (const char *)ev + v.off;
}

void otlp_set_string(struct otlp_arena *a, AnyValue *v, const char *s,
		       size_t len)
{
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = otlp_arena_utf8(a, s, len);
	if (!v->string_value)
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE__NOT_SET;
}

/* A string value copied from a buffer known to be valid UTF-8. */
static void set_const(struct otlp_arena *a, AnyValue *v, const char *s, size_t len)
{
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = otlp_strdup(a, s, len);
	if (!v->string_value)
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE__NOT_SET;
}

/* A string value pointing at static ASCII data. */
static void set_static(AnyValue *v, const char *s)
{
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = (char *)s;
}

/* Decimal digits of x written backwards ending at `end`; returns the start. */
static char *fmt_u32(char *end, uint32_t x)
{
	do {
		*--end = (char)('0' + x % 10);
		x /= 10;
	} while (x);
	return end;
}

/* An integer field of 1 to 8 bytes (U8..S64); false for other types. */
static bool int_value(const uint8_t *p, uint16_t type, AnyValue *v)
{
	union {
		uint8_t u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
		int32_t s32;
		int64_t s64;
	} x;

	switch (type) {
	case NT_F_U8: otlp_set_int(v, p[0]); return true;
	case NT_F_U16: memcpy(&x.u16, p, 2); otlp_set_int(v, x.u16); return true;
	case NT_F_U32: memcpy(&x.u32, p, 4); otlp_set_int(v, x.u32); return true;
	/* OTLP has no unsigned 64-bit value: values above INT64_MAX wrap
	 * (documented) */
	case NT_F_U64: memcpy(&x.u64, p, 8); otlp_set_int(v, (int64_t)x.u64); return true;
	case NT_F_S32: memcpy(&x.s32, p, 4); otlp_set_int(v, x.s32); return true;
	case NT_F_S64: memcpy(&x.s64, p, 8); otlp_set_int(v, x.s64); return true;
	default: return false;
	}
}

static void hex64_value(struct otlp_arena *a, const uint8_t *p, AnyValue *v)
{
	uint64_t x;
	char buf[19], *q = buf + sizeof(buf);

	memcpy(&x, p, sizeof(x));
	do {
		*--q = "0123456789abcdef"[x & 0xf];
		x >>= 4;
	} while (x);
	*--q = 'x';
	*--q = '0';
	set_const(a, v, q, (size_t)(buf + sizeof(buf) - q));
}

/* An IPv4-mapped address as dotted quad, others as IPv6 text. */
static bool inaddr_value(struct otlp_arena *a, const uint8_t *p, uint16_t size,
			 AnyValue *v)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char buf[INET6_ADDRSTRLEN];

	if (size < 16)
		return false;
	if (memcmp(p, mapped, sizeof(mapped)) == 0)
		inet_ntop(AF_INET, p + 12, buf, sizeof(buf));
	else
		inet_ntop(AF_INET6, p, buf, sizeof(buf));
	otlp_set_string(a, v, buf, strlen(buf));
	return true;
}

/* The kernel's dev_t encoding (major << 20 | minor) as "major:minor". */
static void devt_value(struct otlp_arena *a, const uint8_t *p, AnyValue *v)
{
	uint32_t x;
	char buf[24], *q = buf + sizeof(buf);

	memcpy(&x, p, sizeof(x));
	q = fmt_u32(q, x & 0xfffffu);
	*--q = ':';
	q = fmt_u32(q, x >> 20);
	set_const(a, v, q, (size_t)(buf + sizeof(buf) - q));
}

/* An errno (either sign) by its name ("ENOENT"), its number when glibc
 * has no name, "0" for none. */
static void errno_value(struct otlp_arena *a, const uint8_t *p, AnyValue *v)
{
	int32_t x;
	const char *name;

	memcpy(&x, p, sizeof(x));
	if (x == 0) {
		set_static(v, "0");
		return;
	}
	/* glibc's static table: no copy needed */
	name = strerrorname_np(x < 0 ? -x : x);
	if (name) {
		set_static(v, name);
	} else {
		char buf[16], *q = buf + sizeof(buf);

		q = fmt_u32(q, x < 0 ? (uint32_t)-(int64_t)x : (uint32_t)x);
		if (x < 0)
			*--q = '-';
		set_const(a, v, q, (size_t)(buf + sizeof(buf) - q));
	}
}

/* A field type newer than this sink: its bytes in hex. */
static bool raw_value(struct otlp_arena *a, const uint8_t *p, uint16_t size,
		      AnyValue *v)
{
	char *s = otlp_alloc(a, 2 * (size_t)size + 1);

	if (!s)
		return false;
	for (uint16_t i = 0; i < size; i++)
		snprintf(s + 2 * i, 3, "%02x", p[i]);
	s[2 * size] = '\0';
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = s;
	return true;
}

bool otlp_field_value(struct otlp_arena *a, const struct nt_event_hdr *ev,
		      const struct nt_field *f, AnyValue *v)
{
	const uint8_t *p = (const uint8_t *)ev + f->offset;
	size_t len;
	const char *s;

	if ((uint32_t)f->offset + f->size > ev->size)
		return false;
	if (int_value(p, f->type, v))
		return true;
	switch (f->type) {
	case NT_F_F64:
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
		memcpy(&v->double_value, p, sizeof(double));
		return true;
	case NT_F_BOOL:
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
		v->bool_value = p[0] != 0;
		return true;
	case NT_F_HEX64:
		hex64_value(a, p, v);
		return true;
	case NT_F_STR:
		otlp_set_string(a, v, (const char *)p, strnlen((const char *)p, f->size));
		return true;
	case NT_F_VSTR:
		s = otlp_vstr_get(ev, f, &len);
		if (s)
			otlp_set_string(a, v, s, len);
		return s != NULL;
	case NT_F_INADDR:
		return inaddr_value(a, p, f->size, v);
	case NT_F_DEVT:
		devt_value(a, p, v);
		return true;
	case NT_F_ERRNO:
		errno_value(a, p, v);
		return true;
	default:
		return raw_value(a, p, f->size, v);
	}
}
