/* SPDX-License-Identifier: MIT */
#include "jsonl.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(struct nt_buf *b, size_t more)
{
	if (b->oom)
		return -1;
	if (b->len + more + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void nt_buf_free(struct nt_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void nt_buf_put(struct nt_buf *b, const char *s, size_t n)
{
	if (grow(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void nt_buf_printf(struct nt_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		nt_buf_put(b, small, (size_t)n);
		return;
	}
	if (grow(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t need;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) { need = 2; cp = s[0] & 0x1f; }
	else if ((s[0] & 0xf0) == 0xe0) { need = 3; cp = s[0] & 0x0f; }
	else if ((s[0] & 0xf8) == 0xf0) { need = 4; cp = s[0] & 0x07; }
	else return 0;
	if (need > n)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are invalid. */
	if ((need == 2 && cp < 0x80) || (need == 3 && cp < 0x800) ||
	    (need == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return need;
}

void nt_json_string(struct nt_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	nt_buf_put(b, "\"", 1);
	for (size_t i = 0; i < n && u[i];) {
		unsigned char c = u[i];
		size_t run;
		switch (c) {
		case '"': nt_buf_put(b, "\\\"", 2); i++; continue;
		case '\\': nt_buf_put(b, "\\\\", 2); i++; continue;
		case '\n': nt_buf_put(b, "\\n", 2); i++; continue;
		case '\r': nt_buf_put(b, "\\r", 2); i++; continue;
		case '\t': nt_buf_put(b, "\\t", 2); i++; continue;
		case '\b': nt_buf_put(b, "\\b", 2); i++; continue;
		case '\f': nt_buf_put(b, "\\f", 2); i++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			nt_buf_printf(b, "\\u%04x", c);
			i++;
		} else if ((run = utf8_len(u + i, n - i)) == 0) {
			nt_buf_put(b, "\\ufffd", 6);
			i++;
		} else {
			nt_buf_put(b, s + i, run);
			i += run;
		}
	}
	nt_buf_put(b, "\"", 1);
}

const struct nt_field *nt_schema_field(const struct nt_schema *schema,
				       const char *name)
{
	for (uint32_t i = 0; i < schema->n_fields; i++)
		if (strcmp(schema->fields[i].name, name) == 0)
			return &schema->fields[i];
	return NULL;
}

const char *nt_event_vstr(const struct nt_event_hdr *ev,
			  const struct nt_field *f, uint32_t *len)
{
	struct nt_vstr v;

	memcpy(&v, (const char *)ev + f->offset, sizeof(v));
	if ((uint64_t)v.off + v.len > ev->size ||
	    (v.len && v.off < sizeof(struct nt_event_hdr)))
		return NULL;
	*len = v.len;
	return (const char *)ev + v.off;
}

uint64_t nt_event_uint(const struct nt_event_hdr *ev, const struct nt_field *f)
{
	const char *at = (const char *)ev + f->offset;
	uint8_t u8; uint16_t u16; uint32_t u32; int32_t s32; uint64_t u64;

	switch (f->type) {
	case NT_F_U8: case NT_F_BOOL: memcpy(&u8, at, 1); return u8;
	case NT_F_U16: memcpy(&u16, at, 2); return u16;
	case NT_F_U32: case NT_F_DEVT: memcpy(&u32, at, 4); return u32;
	case NT_F_S32: case NT_F_ERRNO: memcpy(&s32, at, 4); return (uint64_t)(int64_t)s32;
	case NT_F_U64: case NT_F_S64: case NT_F_HEX64: memcpy(&u64, at, 8); return u64;
	default: return 0;
	}
}

static void render_inaddr(struct nt_buf *b, const unsigned char *a)
{
	static const unsigned char v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	char text[INET6_ADDRSTRLEN];

	if (memcmp(a, v4_prefix, sizeof(v4_prefix)) == 0)
		inet_ntop(AF_INET, a + 12, text, sizeof(text));
	else
		inet_ntop(AF_INET6, a, text, sizeof(text));
	nt_buf_printf(b, "\"%s\"", text);
}

static void render_errno(struct nt_buf *b, int32_t value)
{
	/* INT32_MIN has no positive counterpart (and names no errno) */
	const char *name = value == INT32_MIN ? NULL
			   : value ? strerrorname_np(value < 0 ? -value : value) : "OK";

	if (name)
		nt_buf_printf(b, "\"%s\"", name);
	else
		nt_buf_printf(b, "%d", value);
}

static void render_field(struct nt_buf *b, const struct nt_event_hdr *ev,
			 const struct nt_field *f)
{
	const char *at = (const char *)ev + f->offset;
	uint64_t u = nt_event_uint(ev, f);
	uint32_t len;
	double d;

	switch (f->type) {
	case NT_F_U8: case NT_F_U16: case NT_F_U32: case NT_F_U64:
		nt_buf_printf(b, "%llu", (unsigned long long)u);
		return;
	case NT_F_S32: case NT_F_S64:
		nt_buf_printf(b, "%lld", (long long)u);
		return;
	case NT_F_BOOL:
		nt_buf_printf(b, "%s", u ? "true" : "false");
		return;
	case NT_F_HEX64:
		nt_buf_printf(b, "\"0x%llx\"", (unsigned long long)u);
		return;
	case NT_F_F64:
		memcpy(&d, at, sizeof(d));
		if (isfinite(d))
			nt_buf_printf(b, "%.17g", d);
		else
			nt_buf_put(b, "null", 4);
		return;
	case NT_F_STR:
		nt_json_string(b, at, f->size);
		return;
	case NT_F_VSTR: {
		const char *s = nt_event_vstr(ev, f, &len);
		if (s)
			nt_json_string(b, s, len);
		else
			nt_buf_put(b, "null", 4);
		return;
	}
	case NT_F_INADDR:
		render_inaddr(b, (const unsigned char *)at);
		return;
	case NT_F_DEVT:
		nt_buf_printf(b, "\"%llu:%llu\"", (unsigned long long)(u >> 20),
			      (unsigned long long)(u & 0xfffff));
		return;
	case NT_F_ERRNO:
		render_errno(b, (int32_t)u);
		return;
	default:
		nt_buf_put(b, "\"0x", 3);
		for (uint16_t i = 0; i < f->size; i++)
			nt_buf_printf(b, "%02x", (unsigned char)at[i]);
		nt_buf_put(b, "\"", 1);
	}
}

void nt_jsonl_event(struct nt_buf *b, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema, uint64_t wall_ns)
{
	nt_buf_printf(b, "{\"ts\":%llu,\"type\":", (unsigned long long)wall_ns);
	nt_json_string(b, schema->name, strlen(schema->name));
	nt_buf_printf(b, ",\"pid\":%u,\"tid\":%u,\"comm\":", ev->pid, ev->tid);
	nt_json_string(b, ev->comm, sizeof(ev->comm));
	for (uint32_t i = 0; i < schema->n_fields; i++) {
		const struct nt_field *f = &schema->fields[i];
		if ((uint32_t)f->offset + f->size > ev->size)
			continue;
		nt_buf_put(b, ",", 1);
		nt_json_string(b, f->name, strlen(f->name));
		nt_buf_put(b, ":", 1);
		render_field(b, ev, f);
	}
	nt_buf_put(b, "}\n", 2);
}

static void render_double(struct nt_buf *b, double v)
{
	if (isfinite(v))
		nt_buf_printf(b, "%.17g", v);
	else
		nt_buf_put(b, "null", 4);
}

void nt_jsonl_metric(struct nt_buf *b, uint64_t wall_ns,
		     const struct nt_metric_desc *desc,
		     const struct nt_metric_series *series, uint32_t n_series)
{
	for (uint32_t s = 0; s < n_series; s++) {
		const struct nt_metric_series *ser = &series[s];
		nt_buf_printf(b, "{\"ts\":%llu,\"type\":\"metric\",\"name\":",
			      (unsigned long long)wall_ns);
		nt_json_string(b, desc->name, strlen(desc->name));
		nt_buf_put(b, ",\"labels\":{", 11);
		for (uint32_t l = 0; l < desc->n_labels; l++) {
			if (l)
				nt_buf_put(b, ",", 1);
			nt_json_string(b, desc->label_names[l], strlen(desc->label_names[l]));
			nt_buf_put(b, ":", 1);
			nt_json_string(b, ser->label_values[l], strlen(ser->label_values[l]));
		}
		nt_buf_put(b, "}", 1);
		if (desc->type != NT_METRIC_HISTOGRAM) {
			nt_buf_put(b, ",\"value\":", 9);
			render_double(b, ser->value);
			nt_buf_put(b, "}\n", 2);
			continue;
		}
		uint64_t cumulative = 0;
		nt_buf_put(b, ",\"buckets\":[", 12);
		for (uint32_t k = 0; k <= desc->n_buckets; k++) {
			cumulative += ser->bucket_counts[k];
			if (k < desc->n_buckets)
				nt_buf_printf(b, "%s[%.17g,%llu]", k ? "," : "",
					      desc->buckets[k], (unsigned long long)cumulative);
			else
				nt_buf_printf(b, "%s[\"+Inf\",%llu]", k ? "," : "",
					      (unsigned long long)cumulative);
		}
		nt_buf_put(b, "],\"sum\":", 8);
		render_double(b, ser->sum);
		nt_buf_printf(b, ",\"count\":%llu}\n", (unsigned long long)ser->count);
	}
}

int nt_folded_event(struct nt_buf *b, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema)
{
	const struct nt_field *stack = nt_schema_field(schema, "stack");
	const struct nt_field *count = nt_schema_field(schema, "count");
	uint32_t len;

	if (!stack || !count || stack->type != NT_F_VSTR ||
	    (uint32_t)count->offset + count->size > ev->size)
		return -1;
	const char *frames = nt_event_vstr(ev, stack, &len);
	if (!frames || !len)
		return -1;
	/* One line per stack: a newline inside the frames would split it. */
	size_t start = b->len;
	for (uint32_t i = 0; i < len; i++) {
		char c = frames[i] == '\n' ? ' ' : frames[i];
		nt_buf_put(b, &c, 1);
	}
	nt_buf_printf(b, " %llu\n", (unsigned long long)nt_event_uint(ev, count));
	return b->len > start ? 0 : -1;
}

void nt_jsonl_value(struct nt_buf *b, const struct nt_event_hdr *ev,
		    const struct nt_field *f)
{
	render_field(b, ev, f);
}
