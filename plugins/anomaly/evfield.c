/* SPDX-License-Identifier: MIT */
/* Event fields by name through the schema; see evfield.h. */
#include "evfield.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const struct nt_field *evf_find(const struct nt_schema *s, const char *name)
{
	for (uint32_t i = 0; s && i < s->n_fields; i++)
		if (strcmp(s->fields[i].name, name) == 0)
			return &s->fields[i];
	return NULL;
}

static bool inside(const struct nt_event_hdr *ev, const struct nt_field *f)
{
	return (uint32_t)f->offset + f->size <= ev->size;
}

bool evf_num(const struct nt_event_hdr *ev, const struct nt_field *f,
	     double *out)
{
	union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
		int32_t s32; int64_t s64; double f64; } v;

	if (!f || !inside(ev, f) || f->size > sizeof(v))
		return false;
	memcpy(&v, (const unsigned char *)ev + f->offset, f->size);
	switch (f->type) {
	case NT_F_U8: case NT_F_BOOL: *out = v.u8; return true;
	case NT_F_U16: *out = v.u16; return true;
	case NT_F_U32: case NT_F_DEVT: *out = v.u32; return true;
	case NT_F_U64: case NT_F_HEX64: *out = (double)v.u64; return true;
	case NT_F_S32: case NT_F_ERRNO: *out = v.s32; return true;
	case NT_F_S64: *out = (double)v.s64; return true;
	case NT_F_F64: *out = v.f64; return true;
	default: return false;
	}
}

bool evf_str(const struct nt_event_hdr *ev, const struct nt_field *f,
	     char *buf, size_t len)
{
	const char *p = (const char *)ev + (f ? f->offset : 0);
	double d;

	if (!f || !inside(ev, f) || !len)
		return false;
	if (f->type == NT_F_STR) {
		snprintf(buf, len, "%.*s", (int)strnlen(p, f->size), p);
		return true;
	}
	if (f->type == NT_F_VSTR) {
		struct nt_vstr vs;

		memcpy(&vs, p, sizeof(vs));
		if ((uint64_t)vs.off + vs.len > ev->size)
			return false;
		snprintf(buf, len, "%.*s", (int)vs.len, (const char *)ev + vs.off);
		return true;
	}
	if (!evf_num(ev, f, &d))
		return false;
	snprintf(buf, len, "%.17g", d);
	return true;
}

bool evf_key(const struct nt_event_hdr *ev, const struct nt_schema *s,
	     const char *name, char *buf, size_t len)
{
	if (strcmp(name, "pid") == 0) {
		snprintf(buf, len, "%" PRIu32, ev->pid);
		return true;
	}
	if (strcmp(name, "tid") == 0) {
		snprintf(buf, len, "%" PRIu32, ev->tid);
		return true;
	}
	if (strcmp(name, "comm") == 0) {
		snprintf(buf, len, "%.*s", (int)strnlen(ev->comm, NT_COMM_LEN),
			 ev->comm);
		return true;
	}
	return evf_str(ev, evf_find(s, name), buf, len);
}
