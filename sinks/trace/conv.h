/* SPDX-License-Identifier: MIT */
/*
 * The schema conventions the trace sink renders by (docs/trace.md,
 * briefs' gpu-events contract): what an event is is read from its schema's
 * field names, types and units, never from the plugin that published it.
 *
 *   host slice    a field `duration_ns` (integer, unit "ns"): the slice
 *                 [ts, ts + duration_ns] on the thread's track; 0: instant
 *   device slice  u64 fields `start_ns` and `end_ns` (unit "ns"); on the
 *                 track "GPU <device>" / "stream <stream>" when `device`
 *                 and `stream` exist, else the thread's
 *   flow          a u64 `launch_ts_ns` != 0: arrow from the thread at that
 *                 time to the device slice
 *   alert         schema "alert.*" with NT_ALERT_FIELDS
 *   sample        a string `stack` and an integer `count` (flame-graph input)
 *   state slice   an integer "ns" field `prev_<state>_ns`: the slice
 *                 [ts - value, ts] named <state> on a child track of the
 *                 thread (sched.switch's prev_oncpu_ns: on-CPU time)
 *   open call     schema "*.enter" with duration_ns == 0: a call entered;
 *                 the next host slice of the same name on that thread ends
 *                 it; still open at the trace's end, it is drawn to the end
 *   report text   schema "*.report" with a string `text`
 * Anything else is an instant on its thread's track.
 *
 * Stacks are root first, ';'-separated; a stack field whose description
 * says "innermost first" (the cuda probe's today) is read leaf first.
 */
#ifndef NTCORE_TRACE_CONV_H
#define NTCORE_TRACE_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"
#include "tmap.h"

enum tr_kind {
	TR_INSTANT = 0,
	TR_HOST_SLICE,
	TR_DEVICE_SLICE,
	TR_ALERT,
	TR_SAMPLE,
};

#define TR_MAX_STATES 4

struct tr_class {
	const struct nt_schema *schema;
	uint32_t kind;          /* enum tr_kind */
	bool enter;             /* opens a call (see above) */
	bool report;            /* a report text */
	bool stack_leaf_first;  /* `stack` is innermost first */
	char plugin[32];        /* schema name up to its first '.' */
	const struct nt_field *duration, *start, *end, *device, *stream, *launch_ts;
	const struct nt_field *api_name, *name, *stack, *py_stack;
	const struct nt_field *count, *period, *state, *text;
	const struct nt_field *severity, *message, *evidence;
	const struct nt_field *states[TR_MAX_STATES];
	char state_names[TR_MAX_STATES][24];
	uint32_t n_states;
	uint64_t hidden; /* bit i: field i is drawn, not listed as an argument */
};

/* Classes per schema pointer; schemas outlive the sink instance. */
struct tr_classes {
	struct tmap by_schema;
};

const struct tr_class *tr_classify(struct tr_classes *c,
				   const struct nt_schema *schema);
void tr_classes_free(struct tr_classes *c);

/* A VSTR or STR field's bytes (borrowed, not NUL-terminated); NULL when
 * absent or out of the record. */
const char *tr_field_str(const struct nt_event_hdr *ev, const struct nt_field *f,
		   uint32_t *len);
/* Any integer field (signed ones sign-extended); 0 when f is NULL. */
uint64_t tr_field_uint(const struct nt_event_hdr *ev, const struct nt_field *f);

/* Name of an event drawn as a slice or instant: api_name, else name, else
 * the schema's name. */
const char *tr_event_name(const struct tr_class *c,
			  const struct nt_event_hdr *ev, uint32_t *len);

#endif
