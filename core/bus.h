/* SPDX-License-Identifier: MIT */
/*
 * The event bus: the schema registry (type id -> schema) and the fan-out from
 * a publisher to every subscriber whose glob matches the event's type name.
 * Single-threaded (the loop thread). Subscribers are opaque pointers handed
 * back to the deliver callback, so the bus is tested without a daemon.
 */
#ifndef NTCORE_CORE_BUS_H
#define NTCORE_CORE_BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/event.h"

typedef void (*nt_bus_deliver_fn)(void *subscriber,
				  const struct nt_event_hdr *ev,
				  const struct nt_schema *schema);

struct nt_bus_type {
	const struct nt_schema *schema;
	const void *owner;    /* registering instance */
	void **subscribers;   /* resolved lazily from the globs */
	size_t n_subscribers;
	bool resolved;
	uint64_t published;
};

struct nt_bus_sub {
	void *subscriber;
	char *pattern;
};

struct nt_bus {
	nt_bus_deliver_fn deliver;
	struct nt_bus_type *types; /* id = index + 1 */
	size_t n_types, cap_types;
	struct nt_bus_sub *subs;
	size_t n_subs, cap_subs;
	/* publish() calls in progress (a consumer may publish in turn): the
	 * subscriber arrays they iterate are freed only when the outermost
	 * one returns (`retired`), however the subscriptions change meanwhile */
	unsigned depth;
	void ***retired;
	size_t n_retired, cap_retired;
	uint64_t dropped_unknown; /* records with an unregistered type id */
	uint64_t dropped_short;   /* records shorter than their schema */
};

void nt_bus_init(struct nt_bus *bus, nt_bus_deliver_fn deliver);
void nt_bus_fini(struct nt_bus *bus);

/* Returns the type id (> 0); the same schema pointer registered twice yields
 * the same id; another schema under an existing name is -EEXIST; a schema
 * with bad fields -EINVAL (message in *why). */
int nt_bus_register(struct nt_bus *bus, const void *owner,
		    const struct nt_schema *schema, const char **why);
int nt_bus_subscribe(struct nt_bus *bus, void *subscriber, const char *pattern);
/* Remove every subscription and registration of a subscriber/owner (reload). */
void nt_bus_forget(struct nt_bus *bus, const void *who);

const struct nt_schema *nt_bus_schema(const struct nt_bus *bus, uint32_t type);
int nt_bus_type_id(const struct nt_bus *bus, const char *name);

/* Fans the record out; returns the number of deliveries, or -1 when the
 * record was dropped (and counted). */
int nt_bus_publish(struct nt_bus *bus, const struct nt_event_hdr *ev);

/* Shell-style glob: '*' any run, '?' one char. */
bool nt_glob_match(const char *pattern, const char *text);

#endif
