/* SPDX-License-Identifier: MIT */
/*
 * python probe: the schemas of its events and the descriptions of its
 * metrics (data), and the few helpers that build an event record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyplugin.h"

static const struct nt_field stack_fields[] = {
	NT_FIELD(struct py_stack_ev, count, NT_F_U64, "count",
		 "samples of this stack since the previous python.stack for it"),
	NT_FIELD(struct py_stack_ev, period_ns, NT_F_U64, "ns",
		 "time one sample stands for (1 / frequency); cuda: 0"),
	NT_FIELD(struct py_stack_ev, state, NT_F_VSTR, "",
		 "cpu (on-CPU), idle (off-CPU), cuda (launches joined with Python)"),
	NT_FIELD(struct py_stack_ev, stack, NT_F_VSTR, "",
		 "folded stack, root first: \"f (file:line);g (file:line)\""),
};
const struct nt_schema py_stack_schema = {
	.name = "python.stack",
	.desc = "folded Python stacks of a thread with sample counts",
	.fields = stack_fields,
	.n_fields = NT_ARRAY_LEN(stack_fields),
	.min_size = sizeof(struct py_stack_ev),
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct py_report_ev, subject_pid, NT_F_U32, "",
		 "process the table is about (0: several)"),
	NT_FIELD(struct py_report_ev, text, NT_F_VSTR, "",
		 "per-function table: samples, self %, total %"),
};
const struct nt_schema py_report_schema = {
	.name = "python.report",
	.desc = "per-function table of the Python processes",
	.fields = report_fields,
	.n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct py_report_ev),
};

static const struct nt_field calls_fields[] = {
	NT_FIELD(struct py_calls_ev, calls, NT_F_U64, "count",
		 "calls (returns) since the previous python.calls for this function"),
	NT_FIELD(struct py_calls_ev, timed_calls, NT_F_U64, "count",
		 "of those, calls whose entry marker fired too (the times cover these)"),
	NT_FIELD(struct py_calls_ev, inclusive_ns, NT_F_U64, "ns",
		 "time inside the function and its callees (timed calls)"),
	NT_FIELD(struct py_calls_ev, self_ns, NT_F_U64, "ns",
		 "inclusive time less the time in timed callees"),
	NT_FIELD(struct py_calls_ev, sampled_inclusive_ns, NT_F_U64, "ns",
		 "sampler's estimate since the start: samples with the function on the stack * period"),
	NT_FIELD(struct py_calls_ev, sampled_self_ns, NT_F_U64, "ns",
		 "sampler's estimate since the start: samples with the function innermost * period"),
	NT_FIELD(struct py_calls_ev, line, NT_F_S32, "",
		 "first line of the function (co_firstlineno), or of its first return"),
	NT_FIELD(struct py_calls_ev, function, NT_F_VSTR, "",
		 "qualified name (co_qualname; co_name when the code could not be read)"),
	NT_FIELD(struct py_calls_ev, file, NT_F_VSTR, "", "file name (co_filename)"),
};
const struct nt_schema py_calls_schema = {
	.name = "python.calls",
	.desc = "exact call counts and times of functions (USDT, calls = true)",
	.fields = calls_fields,
	.n_fields = NT_ARRAY_LEN(calls_fields),
	.min_size = sizeof(struct py_calls_ev),
};

static const struct nt_field exc_fields[] = {
	NT_FIELD(struct py_exc_ev, count, NT_F_U64, "count",
		 "exceptions since the previous python.exception for this key"),
	NT_FIELD(struct py_exc_ev, line, NT_F_S32, "", "raising line"),
	NT_FIELD(struct py_exc_ev, exc_type, NT_F_VSTR, "", "exception type (tp_name)"),
	NT_FIELD(struct py_exc_ev, function, NT_F_VSTR, "", "raising function (qualified name)"),
	NT_FIELD(struct py_exc_ev, file, NT_F_VSTR, "", "raising file"),
	NT_FIELD(struct py_exc_ev, stack, NT_F_VSTR, "", "folded Python stack of the raise"),
};
const struct nt_schema py_exc_schema = {
	.name = "python.exception",
	.desc = "exceptions raised into Python code, by type and location (exceptions = true)",
	.fields = exc_fields,
	.n_fields = NT_ARRAY_LEN(exc_fields),
	.min_size = sizeof(struct py_exc_ev),
};

static const struct nt_field proc_fields[] = {
	NT_FIELD(struct py_proc_ev, subject_pid, NT_F_U32, "", "the process"),
	NT_FIELD(struct py_proc_ev, status, NT_F_ERRNO, "",
		 "0 attached; -ENOTSUP unknown version; -EPROTO layout mismatch; -ENOENT not Python"),
	NT_FIELD(struct py_proc_ev, version, NT_F_VSTR, "", "\"3.11\" or \"\""),
	NT_FIELD(struct py_proc_ev, object, NT_F_VSTR, "", "binary or libpython holding _PyRuntime"),
	NT_FIELD(struct py_proc_ev, message, NT_F_VSTR, "", "what was done, or why not"),
};
const struct nt_schema py_proc_schema = {
	.name = "python.process",
	.desc = "a Python process was attached to, or refused (and why)",
	.fields = proc_fields,
	.n_fields = NT_ARRAY_LEN(proc_fields),
	.min_size = sizeof(struct py_proc_ev),
};

static const char *const l_pid_state[] = { "pid", "state" };
static const char *const l_pid_fn[] = { "pid", "function" };
static const char *const l_pid_fn_kind[] = { "pid", "function", "kind" };
static const char *const l_pid_type[] = { "pid", "type" };
static const char *const l_reason[] = { "reason" };

const struct nt_metric_desc py_metric_desc[M_N] = {
	[M_SAMPLES] = { "ntcore_python_samples_total",
			"Python stack samples by process and state (cpu, idle)",
			NT_METRIC_COUNTER, 2, l_pid_state, NULL, 0, 0 },
	[M_FSELF] = { "ntcore_python_function_self_samples_total",
		      "Samples whose innermost frame is this function (top functions)",
		      NT_METRIC_COUNTER, 2, l_pid_fn, NULL, 0, 0 },
	[M_FTOTAL] = { "ntcore_python_function_samples_total",
		       "Samples with this function anywhere on the stack (top functions)",
		       NT_METRIC_COUNTER, 2, l_pid_fn, NULL, 0, 0 },
	[M_CALLS] = { "ntcore_python_calls_total",
		      "Calls of traced functions (calls = true)",
		      NT_METRIC_COUNTER, 2, l_pid_fn, NULL, 0, 0 },
	[M_CALLSEC] = { "ntcore_python_call_seconds_total",
			"Time in traced functions, kind inclusive or self",
			NT_METRIC_COUNTER, 3, l_pid_fn_kind, NULL, 0, 0 },
	[M_EXC] = { "ntcore_python_exceptions_total",
		    "Exceptions raised into Python code by type (exceptions = true)",
		    NT_METRIC_COUNTER, 2, l_pid_type, NULL, 0, 0 },
	[M_WALKERR] = { "ntcore_python_walk_errors_total",
			"Samples not walked or cut: no_thread_state, read_error, truncated, unresolved_frame",
			NT_METRIC_COUNTER, 1, l_reason, NULL, 0, 16 },
	[M_PROCS] = { "ntcore_python_processes",
		      "Python processes being sampled now",
		      NT_METRIC_GAUGE, 0, NULL, NULL, 0, 1 },
};

void *ev_begin(struct py_plugin *st, size_t fixed, size_t extra)
{
	size_t need = fixed + extra;

	if (need > st->evbuf_cap) {
		uint8_t *n = realloc(st->evbuf, need);

		if (!n)
			return NULL;
		st->evbuf = n;
		st->evbuf_cap = need;
	}
	memset(st->evbuf, 0, fixed);
	return st->evbuf;
}

void ev_str(void *rec, size_t *at, struct nt_vstr *v, const char *s,
		   size_t len)
{
	memcpy((char *)rec + *at, s, len);
	v->off = (uint32_t)*at;
	v->len = (uint32_t)len;
	*at += len;
}

void hdr_fill(struct nt_event_hdr *h, int type, size_t size,
		     uint32_t pid, uint32_t tid, const char *comm)
{
	h->type = (uint32_t)type;
	h->size = (uint32_t)((size + 7) & ~(size_t)7);
	h->ts_ns = nt_clock_mono_ns();
	h->pid = pid;
	h->tid = tid;
	if (comm)
		memcpy(h->comm, comm, NT_COMM_LEN);
}

void publish_proc(struct py_plugin *st, struct pyp *p, int status,
			 const char *msg)
{
	char ver[16] = "";
	const char *obj = p->found.object;
	size_t lm = strlen(msg), lo = strlen(obj), lv, at;
	struct py_proc_ev *e;

	if (p->found.major >= 0)
		snprintf(ver, sizeof(ver), "%d.%d", p->found.major, p->found.minor);
	lv = strlen(ver);
	e = ev_begin(st, sizeof(*e), lm + lo + lv + 8);
	if (!e)
		return;
	at = sizeof(*e);
	e->subject_pid = p->pid;
	e->status = status;
	ev_str(e, &at, &e->version, ver, lv);
	ev_str(e, &at, &e->object, obj, lo);
	ev_str(e, &at, &e->message, msg, lm);
	read_comm(p); /* an exec since it was first seen renames it */
	hdr_fill(&e->hdr, st->t_proc, at, p->pid, p->pid, p->comm);
	st->host->publish(st->inst, &e->hdr);
}
