/* SPDX-License-Identifier: MIT */
/*
 * python probe: the events it publishes (python.stack, python.report,
 * python.calls, python.exception, python.process; python.launch_stack is
 * pylend.h's), its metrics, and how an event record is built in the
 * plugin's scratch buffer. See docs/python.md for every field.
 */
#ifndef NTCORE_PYEVENTS_H
#define NTCORE_PYEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "ntcore/plugin.h"

struct py_stack_ev {
	struct nt_event_hdr hdr;
	uint64_t count;
	uint64_t period_ns;
	struct nt_vstr state;
	struct nt_vstr stack;
};

struct py_report_ev {
	struct nt_event_hdr hdr;
	uint32_t subject_pid;
	uint32_t pad_;
	struct nt_vstr text;
};

struct py_calls_ev {
	struct nt_event_hdr hdr;
	uint64_t calls;
	uint64_t timed_calls;
	uint64_t inclusive_ns;
	uint64_t self_ns;
	uint64_t sampled_inclusive_ns;
	uint64_t sampled_self_ns;
	int32_t line;
	uint32_t pad_;
	struct nt_vstr function;
	struct nt_vstr file;
};

struct py_exc_ev {
	struct nt_event_hdr hdr;
	uint64_t count;
	int32_t line;
	uint32_t pad_;
	struct nt_vstr exc_type;
	struct nt_vstr function;
	struct nt_vstr file;
	struct nt_vstr stack;
};

struct py_proc_ev {
	struct nt_event_hdr hdr;
	uint32_t subject_pid;
	int32_t status;
	struct nt_vstr version;
	struct nt_vstr object;
	struct nt_vstr message;
};

extern const struct nt_schema py_stack_schema, py_report_schema,
	py_calls_schema, py_exc_schema, py_proc_schema;

enum { M_SAMPLES, M_FSELF, M_FTOTAL, M_CALLS, M_CALLSEC, M_EXC, M_WALKERR,
       M_PROCS, M_N };

extern const struct nt_metric_desc py_metric_desc[M_N];

struct py_plugin;
struct pyp;

/* A zeroed record of `fixed` bytes with room for `extra` bytes of strings
 * after it, in st's scratch buffer (valid until the next call); NULL on
 * ENOMEM. */
void *ev_begin(struct py_plugin *st, size_t fixed, size_t extra);
/* Append s as a vstr at *at (record-relative). */
void ev_str(void *rec, size_t *at, struct nt_vstr *v, const char *s,
	    size_t len);
/* The header of a record of `size` bytes (rounded up to 8), stamped now. */
void hdr_fill(struct nt_event_hdr *h, int type, size_t size, uint32_t pid,
	      uint32_t tid, const char *comm);
/* python.process: p attached (status 0) or refused, and why. */
void publish_proc(struct py_plugin *st, struct pyp *p, int status,
		  const char *msg);

#endif /* NTCORE_PYEVENTS_H */
