/* SPDX-License-Identifier: MIT */
/*
 * The trace sink's state, shared by its files: trace.c (descriptor, config,
 * ops), out.c (file names, writing, rotation), dump.c (flight-recorder
 * dumps in a forked child, report pages).
 *
 * Modes. plain: every event is rendered as it arrives into the current
 * file, rotated by size; the report page is written at exit. flight: every
 * event is copied into the recorder (bounded by window_s and buffer_mb);
 * an alert (at or above the configured severity, rate-limited), SIGUSR1
 * and the exit write the recorder out as a trace plus a report page.
 * Everything runs on the daemon's loop thread, except a dump, which a
 * forked child writes from its copy-on-write image of the recorder while
 * the loop goes on.
 */
#ifndef NTCORE_TRACE_TRACE_H
#define NTCORE_TRACE_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agg.h"
#include "conv.h"
#include "counters.h"
#include "jsonl.h"
#include "ntcore/plugin.h"
#include "recorder.h"
#include "render.h"
#include "tmap.h"

struct trace_cfg {
	const char *mode;
	const char *format;
	const char *dir;
	const char *prefix;
	int64_t max_file_mb;
	int64_t max_files;
	int64_t window_s;
	int64_t buffer_mb;
	bool dump_on_alert;
	const char *alert_min_severity;
	int64_t dump_min_interval_s;
	int64_t dump_delay_ms;
	int64_t max_dumps;
	bool report;
	struct nt_strlist counters;
	struct nt_strlist report_memory;
	int64_t counter_interval_ms;
	int64_t max_counter_series;
	bool instants;
	int64_t flame_nodes;
	int64_t write_buffer_kb;
};

/* A counter sample, as a record of its own in the recorder (tag 0). */
struct ctr_rec {
	struct nt_event_hdr hdr;
	uint32_t series;
	uint32_t pad;
	double value;
};

/* One output file being written (plain mode, or a dump). */
struct out_file {
	int fd;
	uint64_t size;
	uint32_t part;      /* plain mode: 1, 2, ... */
	char base[4096];    /* dir/prefix-pid-time[-seq-reason], no extension */
	char path[4200];
};

struct trace_sink {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct trace_cfg *cfg;
	bool flight;
	uint32_t min_severity;
	pid_t self;                 /* ntcore's pid, in file names */
	int64_t wall_offset_ns;     /* mono + offset = wall */
	struct tr_classes classes;
	struct ctr_sampler ctr;
	struct agg run;             /* the whole run, for the exit report */
	uint64_t lost;              /* events not rendered or kept */
	bool finished;              /* flush ran: the files are complete */

	/* plain mode */
	struct render r;
	struct nt_buf buf;
	uint64_t buf_events;        /* events in buf not yet written */
	struct out_file f;
	bool write_failed;

	/* flight mode */
	struct recorder rec;
	uint64_t evicted_seen;            /* rec.evicted already counted */
	const struct nt_schema **schemas; /* recorder tag - 1 -> schema */
	uint32_t n_schemas;
	struct tmap schema_tags;          /* schema pointer -> tag */

	/* dumps */
	uint32_t seq;               /* dumps started, for file names */
	uint64_t dump_due_ns;       /* a dump is pending for then (0: none) */
	char dump_reason[64];
	uint64_t last_dump_ns;
	pid_t dump_pid;             /* the child writing a dump, 0: none */
	bool dump_reported;         /* it wrote its status line */
	int status_fd[2];           /* children -> loop: one line per dump */
	char status[1024];
	size_t status_len;

	struct nt_metric *m_bytes, *m_files, *m_dumps, *m_recorder, *m_evicted;
};

/* out.c */
void out_name(const struct trace_sink *ts, char *base, size_t size,
	      const char *reason);
int out_open(struct out_file *f, const char *ext);
int out_write(struct out_file *f, struct nt_buf *b);
void out_close(struct out_file *f);
int plain_start(struct trace_sink *ts);
void plain_flush(struct trace_sink *ts);
void plain_event(struct trace_sink *ts, const struct nt_event_hdr *ev,
		 const struct tr_class *c);
void plain_finish(struct trace_sink *ts, const char *reason);
int write_report(struct trace_sink *ts, const struct agg *a, const char *path,
		 const char *reason, const char *scope, const char *trace_file,
		 uint64_t lost);

/* dump.c */
void dump_request(struct trace_sink *ts, const char *reason, uint64_t delay_ns,
		  bool rate_limited);
void dump_tick(struct trace_sink *ts, uint64_t now);
void dump_status(struct trace_sink *ts);
void dump_now_sync(struct trace_sink *ts, const char *reason);
void dump_wait(struct trace_sink *ts);

void trace_count(struct trace_sink *ts, struct nt_metric *m, const char *what,
		 double n);

#endif
