/* SPDX-License-Identifier: MIT */
#include "bus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void nt_bus_init(struct nt_bus *bus, nt_bus_deliver_fn deliver)
{
	memset(bus, 0, sizeof(*bus));
	bus->deliver = deliver;
}

/* Free a subscriber array now, or once no publish() iterates any. */
static void retire(struct nt_bus *bus, void **subscribers)
{
	if (!subscribers)
		return;
	if (!bus->depth) {
		free(subscribers);
		return;
	}
	if (bus->n_retired == bus->cap_retired) {
		size_t cap = bus->cap_retired ? bus->cap_retired * 2 : 8;
		void ***grown = realloc(bus->retired, cap * sizeof(*grown));
		if (!grown)
			return; /* leaked rather than freed under an iteration */
		bus->retired = grown;
		bus->cap_retired = cap;
	}
	bus->retired[bus->n_retired++] = subscribers;
}

static void free_retired(struct nt_bus *bus)
{
	for (size_t i = 0; i < bus->n_retired; i++)
		free(bus->retired[i]);
	bus->n_retired = 0;
}

static void invalidate(struct nt_bus *bus)
{
	for (size_t i = 0; i < bus->n_types; i++) {
		retire(bus, bus->types[i].subscribers);
		bus->types[i].subscribers = NULL;
		bus->types[i].n_subscribers = 0;
		bus->types[i].resolved = false;
	}
}

void nt_bus_fini(struct nt_bus *bus)
{
	bus->depth = 0;
	invalidate(bus);
	free_retired(bus);
	free(bus->retired);
	for (size_t i = 0; i < bus->n_subs; i++)
		free(bus->subs[i].pattern);
	free(bus->subs);
	free(bus->types);
	memset(bus, 0, sizeof(*bus));
}

bool nt_glob_match(const char *p, const char *t)
{
	const char *star = NULL, *resume = NULL;

	while (*t) {
		if (*p == '*') {
			star = p++;
			resume = t;
		} else if (*p == '?' || *p == *t) {
			p++;
			t++;
		} else if (star) {
			p = star + 1;
			t = ++resume;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

static size_t field_type_size(uint16_t type)
{
	switch (type) {
	case NT_F_U8: case NT_F_BOOL: return 1;
	case NT_F_U16: return 2;
	case NT_F_U32: case NT_F_S32: case NT_F_DEVT: case NT_F_ERRNO: return 4;
	case NT_F_U64: case NT_F_S64: case NT_F_F64: case NT_F_HEX64:
	case NT_F_VSTR: return 8;
	case NT_F_INADDR: return 16;
	case NT_F_STR: return 0; /* any size */
	default: return (size_t)-1;
	}
}

static const char *check_schema(const struct nt_schema *s)
{
	if (!s->name || !*s->name)
		return "schema without a name";
	if (s->min_size < sizeof(struct nt_event_hdr))
		return "min_size smaller than the event header";
	if (s->n_fields && !s->fields)
		return "fields declared but missing";
	for (uint32_t i = 0; i < s->n_fields; i++) {
		const struct nt_field *f = &s->fields[i];
		size_t want = field_type_size(f->type);
		if (!f->name)
			return "field without a name";
		if (want == (size_t)-1)
			return "field of unknown type";
		if (want && f->size != want)
			return "field size does not match its type";
		if (f->offset < sizeof(struct nt_event_hdr) ||
		    (uint32_t)f->offset + f->size > s->min_size)
			return "field outside the record's fixed part";
	}
	return NULL;
}

int nt_bus_type_id(const struct nt_bus *bus, const char *name)
{
	for (size_t i = 0; i < bus->n_types; i++)
		if (bus->types[i].schema &&
		    strcmp(bus->types[i].schema->name, name) == 0)
			return (int)i + 1;
	return -ENOENT;
}

int nt_bus_register(struct nt_bus *bus, const void *owner,
		    const struct nt_schema *schema, const char **why)
{
	*why = check_schema(schema);
	if (*why)
		return -EINVAL;
	int id = nt_bus_type_id(bus, schema->name);
	if (id > 0) {
		struct nt_bus_type *t = &bus->types[id - 1];
		if (t->schema == schema)
			return id;
		*why = "another schema is registered under this name";
		return -EEXIST;
	}
	if (bus->n_types == bus->cap_types) {
		size_t cap = bus->cap_types ? bus->cap_types * 2 : 32;
		struct nt_bus_type *grown =
			realloc(bus->types, cap * sizeof(*grown));
		if (!grown) {
			*why = "out of memory";
			return -ENOMEM;
		}
		bus->types = grown;
		bus->cap_types = cap;
	}
	bus->types[bus->n_types] = (struct nt_bus_type){
		.schema = schema, .owner = owner};
	bus->n_types++;
	invalidate(bus);
	return (int)bus->n_types;
}

int nt_bus_subscribe(struct nt_bus *bus, void *subscriber, const char *pattern)
{
	if (bus->n_subs == bus->cap_subs) {
		size_t cap = bus->cap_subs ? bus->cap_subs * 2 : 16;
		struct nt_bus_sub *grown = realloc(bus->subs, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		bus->subs = grown;
		bus->cap_subs = cap;
	}
	char *copy = strdup(pattern);
	if (!copy)
		return -ENOMEM;
	bus->subs[bus->n_subs++] = (struct nt_bus_sub){subscriber, copy};
	invalidate(bus);
	return 0;
}

void nt_bus_forget(struct nt_bus *bus, const void *who)
{
	size_t kept = 0;

	for (size_t i = 0; i < bus->n_subs; i++) {
		if (bus->subs[i].subscriber == who)
			free(bus->subs[i].pattern);
		else
			bus->subs[kept++] = bus->subs[i];
	}
	bus->n_subs = kept;
	/* Type ids stay stable: the slot is emptied, never reused for another
	 * name, so records in flight are dropped rather than misread. */
	for (size_t i = 0; i < bus->n_types; i++)
		if (bus->types[i].owner == who)
			bus->types[i].schema = NULL;
	invalidate(bus);
}

const struct nt_schema *nt_bus_schema(const struct nt_bus *bus, uint32_t type)
{
	if (type == 0 || type > bus->n_types)
		return NULL;
	return bus->types[type - 1].schema;
}

static void resolve(struct nt_bus *bus, struct nt_bus_type *t)
{
	t->resolved = true;
	t->subscribers = calloc(bus->n_subs ? bus->n_subs : 1, sizeof(void *));
	if (!t->subscribers)
		return;
	for (size_t i = 0; i < bus->n_subs; i++) {
		void *who = bus->subs[i].subscriber;
		bool dup = false;
		if (!nt_glob_match(bus->subs[i].pattern, t->schema->name))
			continue;
		for (size_t j = 0; j < t->n_subscribers; j++)
			dup |= t->subscribers[j] == who;
		if (!dup)
			t->subscribers[t->n_subscribers++] = who;
	}
}

int nt_bus_publish(struct nt_bus *bus, const struct nt_event_hdr *ev)
{
	const struct nt_schema *schema = nt_bus_schema(bus, ev->type);

	if (!schema) {
		bus->dropped_unknown++;
		return -1;
	}
	if (ev->size < schema->min_size) {
		bus->dropped_short++;
		return -1;
	}
	struct nt_bus_type *t = &bus->types[ev->type - 1];
	if (!t->resolved)
		resolve(bus, t);
	t->published++;
	/* A consumer may subscribe (and so invalidate the array) mid-way:
	 * the array and its count stay valid until the outermost publish
	 * returns, and the change applies from the next event on. */
	size_t n = t->n_subscribers;
	void **subs = t->subscribers;
	bus->depth++;
	for (size_t i = 0; i < n; i++)
		bus->deliver(subs[i], ev, schema);
	if (--bus->depth == 0 && bus->n_retired)
		free_retired(bus);
	return (int)n;
}
