/* SPDX-License-Identifier: MIT */
/*
 * JSON rendering of events from their schema (one object per line) and of
 * metric series; pure functions over a growable buffer, tested without I/O.
 */
#ifndef NTCORE_SINK_JSONL_H
#define NTCORE_SINK_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "ntcore/plugin.h"

struct nt_buf {
	char *p;
	size_t len, cap;
	int oom; /* set once an append failed; the buffer keeps whole lines */
};

void nt_buf_free(struct nt_buf *b);
void nt_buf_put(struct nt_buf *b, const char *s, size_t n);
void nt_buf_printf(struct nt_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A JSON string literal, quotes included: escapes quotes, backslashes and
 * control characters; bytes that are not valid UTF-8 become U+FFFD. Stops
 * at a NUL or after `n` bytes. */
void nt_json_string(struct nt_buf *b, const char *s, size_t n);

/* One event as a JSON object plus '\n'. `wall_ns` is the event's time since
 * the epoch. Malformed fields (a VSTR outside the record) render as null. */
void nt_jsonl_event(struct nt_buf *b, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema, uint64_t wall_ns);

/* The value of one field as nt_jsonl_event writes it (no key). */
void nt_jsonl_value(struct nt_buf *b, const struct nt_event_hdr *ev,
		    const struct nt_field *f);

/* One line per series of a metric family (file sink `metrics = true`). */
void nt_jsonl_metric(struct nt_buf *b, uint64_t wall_ns,
		     const struct nt_metric_desc *desc,
		     const struct nt_metric_series *series, uint32_t n_series);

/* Folded-stack line "frames count\n" when the schema has a VSTR `stack`
 * and an integer `count`; returns 0 when written, -1 when not applicable. */
int nt_folded_event(struct nt_buf *b, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema);

/* Field helpers shared by sinks. */
const struct nt_field *nt_schema_field(const struct nt_schema *schema,
				       const char *name);
/* Borrowed pointer and length of a VSTR field, NULL when out of bounds. */
const char *nt_event_vstr(const struct nt_event_hdr *ev,
			  const struct nt_field *f, uint32_t *len);
/* Any integer field as u64 (signed ones sign-extended). */
uint64_t nt_event_uint(const struct nt_event_hdr *ev, const struct nt_field *f);

#endif
