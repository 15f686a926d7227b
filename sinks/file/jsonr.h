/* SPDX-License-Identifier: MIT */
/*
 * The file sink's fast JSON Lines renderer: each schema is compiled once
 * into a list of fields with their `,"name":` text already escaped, and a
 * record is written through the kit's string-builder cursor with one room
 * check (kit/sb.h), integers and strings by the kit's writers, no snprintf
 * but for the rare double. The text is byte for byte what jsonl.c's
 * nt_jsonl_event writes (test_jsonl compares them field type by type); this
 * one is for the hot path.
 */
#ifndef NTCORE_SINK_JSONR_H
#define NTCORE_SINK_JSONR_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/kit/sb.h"
#include "ntcore/plugin.h"

struct jr_schema;

/* Renderers by type id, compiled on first use. Owned by the sink. */
struct jr_cache {
	struct jr_schema **by_type; /* index: type id */
	uint32_t n;
};

void jr_cache_free(struct jr_cache *c);

/* Appends one record as a JSON object plus '\n' to `sb`. False when it
 * did not fit (the builder's bound, or memory): nothing was appended and
 * sb->failed is set. */
bool jr_render(struct jr_cache *c, struct nt_sb *sb,
	       const struct nt_event_hdr *ev, const struct nt_schema *schema,
	       uint64_t wall_ns);

#endif
