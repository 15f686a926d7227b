/* SPDX-License-Identifier: MIT */
/* The file sink's compiled JSON renderer (jsonr.h). */
#include "jsonr.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"

#define KEY_MAX 80 /* ,"name": of a field, escaped, and room to copy it in
		    * 16-byte steps; longer names go the generic way */
#define OVERSHOOT 16 /* those steps write up to this much past a key */

struct jr_field {
	uint16_t type, offset, size;
	uint8_t key_len;
	bool slow; /* a type rendered by jsonl.c (doubles, addresses, ...) */
	char key[KEY_MAX]; /* zero after the key */
	const struct nt_field *f;
};

struct jr_schema {
	const struct nt_schema *schema;
	size_t head_len;
	char head[160];      /* ,"type":"NAME","pid": (zero after) */
	size_t worst_fixed;  /* the record's text at most, VSTR text aside */
	uint32_t n_vstr;
	uint16_t vstr[16];   /* the first VSTR fields, whose text adds to it */
	uint32_t n_fields;
	struct jr_field fields[];
};

/* Escaped text of what jsonl.c writes for the string s. */
static size_t escaped(char *out, size_t cap, const char *s)
{
	struct nt_buf b = {0};
	size_t n = 0;

	nt_json_string(&b, s, strlen(s));
	if (b.p && !b.oom && b.len < cap) {
		memcpy(out, b.p, b.len);
		n = b.len;
	}
	nt_buf_free(&b);
	return n;
}

/* Worst text of a field's value (VSTR text counted per record). */
static size_t field_worst(const struct jr_field *jf)
{
	switch (jf->type) {
	case NT_F_STR: return 6u * jf->size + 2;
	case NT_F_VSTR: return 6; /* "null", or the quotes of its text */
	case NT_F_BOOL: return 5;
	case NT_F_DEVT: return 2 + 20 + 1 + 20;
	case NT_F_HEX64: return 2 + 2 + 16;
	default: return jf->slow ? 96 + 2u * jf->size : 21;
	}
}

static bool is_slow_type(uint16_t type)
{
	switch (type) {
	case NT_F_U8: case NT_F_U16: case NT_F_U32: case NT_F_U64:
	case NT_F_S32: case NT_F_S64: case NT_F_BOOL: case NT_F_HEX64:
	case NT_F_STR: case NT_F_VSTR: case NT_F_DEVT:
		return false;
	default:
		return true;
	}
}

static struct jr_schema *compile(const struct nt_schema *schema)
{
	struct jr_schema *js = calloc(1, sizeof(*js) +
					     schema->n_fields * sizeof(struct jr_field));
	char name[KEY_MAX];
	size_t n;

	if (!js)
		return NULL;
	js->schema = schema;
	n = escaped(name, sizeof(name), schema->name);
	if (!n || n + 24 + OVERSHOOT > sizeof(js->head))
		goto slow_schema;
	js->head_len = (size_t)snprintf(js->head, sizeof(js->head),
					",\"type\":%.*s,\"pid\":", (int)n, name);
	js->worst_fixed = 6 + 20 + js->head_len + 20 + 7 + 20 + 9 + 6 * 16 + 2 + 2 +
			  OVERSHOOT;
	js->n_fields = schema->n_fields;
	for (uint32_t i = 0; i < schema->n_fields; i++) {
		const struct nt_field *f = &schema->fields[i];
		struct jr_field *jf = &js->fields[i];

		n = escaped(name, KEY_MAX - 2 - OVERSHOOT, f->name);
		if (!n)
			goto slow_schema;
		jf->key[0] = ',';
		memcpy(jf->key + 1, name, n);
		jf->key[n + 1] = ':';
		jf->key_len = (uint8_t)(n + 2);
		jf->type = f->type;
		jf->offset = f->offset;
		jf->size = f->size;
		jf->slow = is_slow_type(f->type);
		jf->f = f;
		js->worst_fixed += jf->key_len + field_worst(jf);
		if (f->type == NT_F_VSTR && js->n_vstr == NT_ARRAY_LEN(js->vstr))
			goto slow_schema; /* more than we keep track of */
		if (f->type == NT_F_VSTR)
			js->vstr[js->n_vstr++] = (uint16_t)i;
	}
	return js;
slow_schema:
	/* names too long to precompute: the generic renderer does it */
	js->head_len = 0;
	return js;
}

void jr_cache_free(struct jr_cache *c)
{
	for (uint32_t i = 0; i < c->n; i++)
		free(c->by_type[i]);
	free(c->by_type);
	*c = (struct jr_cache){0};
}

static struct jr_schema *lookup(struct jr_cache *c, uint32_t type,
				const struct nt_schema *schema)
{
	if (type < c->n && c->by_type[type] && c->by_type[type]->schema == schema)
		return c->by_type[type];
	if (type >= c->n) {
		uint32_t n = type + 16;
		struct jr_schema **grown = realloc(c->by_type, n * sizeof(*grown));
		if (!grown)
			return NULL;
		memset(grown + c->n, 0, (n - c->n) * sizeof(*grown));
		c->by_type = grown;
		c->n = n;
	}
	free(c->by_type[type]); /* another schema under this id: a reload */
	c->by_type[type] = compile(schema);
	return c->by_type[type];
}

/* Copies n bytes of text padded to a multiple of 16 (a key, the head) in
 * 16-byte steps: a variable-length memcpy here compiled to `rep movs`, the
 * slowest part of a record. Writes up to OVERSHOOT bytes past n, which
 * the next piece overwrites (the room reserved covers it). */
static inline char *put_padded(char *p, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i += 16)
		memcpy(p + i, s + i, 16);
	return p + n;
}

/* A type jsonl.c renders (doubles, addresses, errno names, raw bytes). */
static char *render_slow(char *p, const struct nt_event_hdr *ev,
			 const struct jr_field *jf)
{
	struct nt_buf b = {0};

	nt_jsonl_value(&b, ev, jf->f);
	p = b.p && !b.oom ? nt_fmt_put(p, b.p, b.len) : nt_fmt_put(p, "null", 4);
	nt_buf_free(&b);
	return p;
}

static char *render_field(char *p, const struct nt_event_hdr *ev,
			  const struct jr_field *jf)
{
	const char *at = (const char *)ev + jf->offset;
	uint64_t u = 0;

	switch (jf->type) {
	case NT_F_U8: return nt_fmt_u64(p, *(const uint8_t *)at);
	case NT_F_BOOL:
		return *(const uint8_t *)at ? nt_fmt_put(p, "true", 4)
					     : nt_fmt_put(p, "false", 5);
	case NT_F_U16: {
		uint16_t v;
		memcpy(&v, at, 2);
		return nt_fmt_u64(p, v);
	}
	case NT_F_U32: {
		uint32_t v;
		memcpy(&v, at, 4);
		return nt_fmt_u64(p, v);
	}
	case NT_F_S32: {
		int32_t v;
		memcpy(&v, at, 4);
		return nt_fmt_i64(p, v);
	}
	case NT_F_U64:
		memcpy(&u, at, 8);
		return nt_fmt_u64(p, u);
	case NT_F_S64:
		memcpy(&u, at, 8);
		return nt_fmt_i64(p, (int64_t)u);
	case NT_F_HEX64:
		memcpy(&u, at, 8);
		p = nt_fmt_put(p, "\"0x", 3);
		p = nt_fmt_hex(p, u);
		return nt_fmt_put(p, "\"", 1);
	case NT_F_STR:
		return nt_fmt_json_str(p, at, jf->size);
	case NT_F_VSTR: {
		uint32_t len;
		const char *s = nt_event_vstr(ev, jf->f, &len);
		return s ? nt_fmt_json_str(p, s, len) : nt_fmt_put(p, "null", 4);
	}
	case NT_F_DEVT: {
		uint32_t v;
		memcpy(&v, at, 4);
		*p++ = '"';
		p = nt_fmt_u64(p, v >> 20);
		*p++ = ':';
		p = nt_fmt_u64(p, v & 0xfffff);
		*p++ = '"';
		return p;
	}
	default:
		return render_slow(p, ev, jf);
	}
}

/* The record's text at most: the fixed part and each VSTR's text. */
static size_t worst_case(const struct jr_schema *js,
			 const struct nt_event_hdr *ev)
{
	size_t worst = js->worst_fixed;

	for (uint32_t i = 0; i < js->n_vstr; i++) {
		const struct jr_field *jf = &js->fields[js->vstr[i]];
		uint32_t len;
		if ((uint32_t)jf->offset + jf->size <= ev->size &&
		    nt_event_vstr(ev, jf->f, &len))
			worst += 6u * len;
	}
	return worst;
}

static bool render_generic(struct nt_sb *sb, const struct nt_event_hdr *ev,
			   const struct nt_schema *schema, uint64_t wall_ns)
{
	struct nt_buf b = {0};
	bool ok;

	nt_jsonl_event(&b, ev, schema, wall_ns);
	ok = b.p && !b.oom;
	if (ok) {
		nt_sb_put(sb, b.p, b.len);
		ok = !sb->failed;
	}
	nt_buf_free(&b);
	return ok;
}

bool jr_render(struct jr_cache *c, struct nt_sb *sb,
	       const struct nt_event_hdr *ev, const struct nt_schema *schema,
	       uint64_t wall_ns)
{
	struct jr_schema *js = lookup(c, ev->type, schema);
	char *p;

	if (!js || !js->head_len)
		return render_generic(sb, ev, schema, wall_ns);
	p = nt_sb_cursor(sb, worst_case(js, ev));
	if (!p)
		return false;
	p = nt_fmt_put(p, "{\"ts\":", 6);
	p = nt_fmt_u64(p, wall_ns);
	p = put_padded(p, js->head, js->head_len);
	p = nt_fmt_u64(p, ev->pid);
	p = nt_fmt_put(p, ",\"tid\":", 7);
	p = nt_fmt_u64(p, ev->tid);
	p = nt_fmt_put(p, ",\"comm\":", 8);
	p = nt_fmt_json_str(p, ev->comm, sizeof(ev->comm));
	for (uint32_t i = 0; i < js->n_fields; i++) {
		const struct jr_field *jf = &js->fields[i];
		if ((uint32_t)jf->offset + jf->size > ev->size)
			continue;
		p = put_padded(p, jf->key, jf->key_len);
		p = render_field(p, ev, jf);
	}
	p = nt_fmt_put(p, "}\n", 2);
	nt_sb_advance(sb, p);
	return true;
}
