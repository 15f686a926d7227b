/* SPDX-License-Identifier: MIT */
/*
 * Reading an event's fields by name through its schema, so the detector
 * depends on no probe's header: a field is looked up once per schema and
 * read as a number (every integer type, f64, bool) or a string (fixed
 * strings and vstrs). The header's pid, tid and comm are read under those
 * names too.
 */
#ifndef AN_EVFIELD_H
#define AN_EVFIELD_H

#include <stdbool.h>
#include <stddef.h>

#include "ntcore/event.h"

/* The field named `name`, or NULL. */
const struct nt_field *evf_find(const struct nt_schema *s, const char *name);
/* A numeric field's value; false when it is not numeric or lies outside
 * the record. */
bool evf_num(const struct nt_event_hdr *ev, const struct nt_field *f,
	     double *out);
/* A string field (or a number printed) into buf; false when absent. */
bool evf_str(const struct nt_event_hdr *ev, const struct nt_field *f,
	     char *buf, size_t len);
/* A key part by name: "pid", "tid", "comm" from the header, else the
 * schema's field; false when absent. */
bool evf_key(const struct nt_event_hdr *ev, const struct nt_schema *s,
	     const char *name, char *buf, size_t len);

#endif
