/* SPDX-License-Identifier: MIT */
/*
 * The report page: one self-contained HTML file (inline CSS, SVG and a
 * little script; a Content-Security-Policy that forbids every network
 * load) with the alerts and their evidence, flame graphs, the memory
 * timeline, the top device slices (kernels, copies) and host calls, and
 * per-plugin summaries, from one `struct agg`.
 */
#ifndef NTCORE_TRACE_REPORT_H
#define NTCORE_TRACE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"

struct agg;

struct report_meta {
	const char *reason;     /* "exit", "signal", "alert.cuda_hang" ... */
	const char *scope;      /* "the whole run", "the last 60 s" */
	const char *trace_file; /* the trace written with it, or "" */
	const char *host;
	const char *version;
	uint32_t pid;           /* ntcore's */
	int64_t wall_offset_ns; /* CLOCK_MONOTONIC + this = ns since the epoch */
	uint64_t lost;          /* events dropped or evicted before the scope */
};

/* HTML text: escapes <, >, &, quotes; invalid UTF-8 bytes become U+FFFD. */
void html_escape(struct nt_buf *b, const char *s, size_t n);
void report_html(struct nt_buf *out, const struct agg *a,
		 const struct report_meta *m);

#endif
