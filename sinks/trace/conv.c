/* SPDX-License-Identifier: MIT */
/* Reading the schema conventions (conv.h) once per schema. */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

#include "jsonl.h"

static bool is_int(const struct nt_field *f)
{
	switch (f->type) {
	case NT_F_U8: case NT_F_U16: case NT_F_U32: case NT_F_U64:
	case NT_F_S32: case NT_F_S64: case NT_F_HEX64:
		return true;
	default:
		return false;
	}
}

static bool is_text(const struct nt_field *f)
{
	return f->type == NT_F_VSTR || f->type == NT_F_STR;
}

static bool unit_ns(const struct nt_field *f)
{
	return f->unit && strcmp(f->unit, "ns") == 0;
}

static const struct nt_field *field_if(const struct nt_schema *s,
				       const char *name,
				       bool (*ok)(const struct nt_field *))
{
	const struct nt_field *f = nt_schema_field(s, name);

	return f && ok(f) ? f : NULL;
}

static bool is_u64_ns(const struct nt_field *f)
{
	return f->type == NT_F_U64 && unit_ns(f);
}

static bool is_int_ns(const struct nt_field *f)
{
	return is_int(f) && unit_ns(f);
}

static bool is_u64(const struct nt_field *f)
{
	return f->type == NT_F_U64;
}

static bool is_device(const struct nt_field *f)
{
	return f->type == NT_F_S32 || f->type == NT_F_U32;
}

static bool is_stream(const struct nt_field *f)
{
	return f->type == NT_F_U64 || f->type == NT_F_U32 || f->type == NT_F_HEX64;
}

static bool is_vstr(const struct nt_field *f)
{
	return f->type == NT_F_VSTR;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void hide(struct tr_class *c, const struct nt_field *f)
{
	if (!f)
		return;
	size_t i = (size_t)(f - c->schema->fields);
	if (i < 64)
		c->hidden |= 1ull << i;
}

/* prev_<state>_ns fields: state slices ending at the event. */
static void find_states(struct tr_class *c)
{
	const struct nt_schema *s = c->schema;

	for (uint32_t i = 0; i < s->n_fields && c->n_states < TR_MAX_STATES; i++) {
		const struct nt_field *f = &s->fields[i];
		size_t n = strlen(f->name);
		if (n <= 8 || strncmp(f->name, "prev_", 5) != 0 ||
		    !ends_with(f->name, "_ns") || !is_int_ns(f) || n - 8 >= 24)
			continue;
		memcpy(c->state_names[c->n_states], f->name + 5, n - 8);
		c->state_names[c->n_states][n - 8] = '\0';
		c->states[c->n_states++] = f;
	}
}

static void find_fields(struct tr_class *c)
{
	const struct nt_schema *s = c->schema;

	c->duration = field_if(s, "duration_ns", is_int_ns);
	c->start = field_if(s, "start_ns", is_u64_ns);
	c->end = field_if(s, "end_ns", is_u64_ns);
	c->device = field_if(s, "device", is_device);
	c->stream = field_if(s, "stream", is_stream);
	c->launch_ts = field_if(s, "launch_ts_ns", is_u64);
	c->api_name = field_if(s, "api_name", is_text);
	c->name = field_if(s, "name", is_text);
	c->stack = field_if(s, "stack", is_text);
	c->py_stack = field_if(s, "py_stack", is_text);
	c->count = field_if(s, "count", is_int);
	c->period = field_if(s, "period_ns", is_int_ns);
	c->state = field_if(s, "state", is_text);
	c->text = field_if(s, "text", is_text);
	c->severity = field_if(s, "severity", is_int);
	c->message = field_if(s, "message", is_vstr);
	c->evidence = field_if(s, "evidence", is_vstr);
	c->stack_leaf_first = c->stack && c->stack->desc &&
			      strstr(c->stack->desc, "innermost first");
	find_states(c);
}

static void find_kind(struct tr_class *c)
{
	const char *name = c->schema->name;

	if (strncmp(name, "alert.", 6) == 0 && c->severity && c->message) {
		c->kind = TR_ALERT;
		hide(c, c->message);
	} else if (c->start && c->end) {
		c->kind = TR_DEVICE_SLICE;
		hide(c, c->start);
		hide(c, c->end);
		hide(c, c->name);
	} else if (c->duration) {
		c->kind = TR_HOST_SLICE;
		hide(c, c->duration);
		hide(c, c->api_name ? c->api_name : c->name);
	} else if (c->stack && c->count) {
		c->kind = TR_SAMPLE;
	}
	c->enter = c->kind == TR_HOST_SLICE && ends_with(name, ".enter");
	c->report = c->text && ends_with(name, ".report");
}

const struct tr_class *tr_classify(struct tr_classes *cs,
				   const struct nt_schema *schema)
{
	struct tr_class *c = tmap_get(&cs->by_schema, &schema, sizeof(schema));

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->schema = schema;
	size_t n = strcspn(schema->name, ".");
	if (n >= sizeof(c->plugin))
		n = sizeof(c->plugin) - 1;
	memcpy(c->plugin, schema->name, n);
	find_fields(c);
	find_kind(c);
	if (tmap_put(&cs->by_schema, &schema, sizeof(schema), c)) {
		free(c);
		return NULL;
	}
	return c;
}

void tr_classes_free(struct tr_classes *c)
{
	tmap_free(&c->by_schema, free);
}

const char *tr_field_str(const struct nt_event_hdr *ev, const struct nt_field *f,
		   uint32_t *len)
{
	if (!f)
		return NULL;
	if (f->type == NT_F_VSTR)
		return nt_event_vstr(ev, f, len);
	if ((uint32_t)f->offset + f->size > ev->size)
		return NULL;
	const char *at = (const char *)ev + f->offset;
	*len = (uint32_t)strnlen(at, f->size);
	return at;
}

uint64_t tr_field_uint(const struct nt_event_hdr *ev, const struct nt_field *f)
{
	if (!f || (uint32_t)f->offset + f->size > ev->size)
		return 0;
	return nt_event_uint(ev, f);
}

const char *tr_event_name(const struct tr_class *c,
			  const struct nt_event_hdr *ev, uint32_t *len)
{
	const char *s = NULL;

	if (c->kind != TR_DEVICE_SLICE)
		s = tr_field_str(ev, c->api_name, len);
	if (!s || !*len)
		s = tr_field_str(ev, c->name, len);
	if (!s || !*len) {
		s = c->schema->name;
		*len = (uint32_t)strlen(s);
	}
	return s;
}
