/* SPDX-License-Identifier: MIT */
/*
 * The stdout sink's state, shared by the descriptor, ops and alerts
 * (stdout.c) and the periodic summary (summary.c). Everything runs on the
 * thread that calls the sink's ops; the state is the instance's own.
 */
#ifndef NTCORE_STDOUT_SINK_H
#define NTCORE_STDOUT_SINK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "glance.h"
#include "ntcore/plugin.h"
#include "reports.h"

struct stdout_cfg {
	int64_t interval_ms;
	const char *mode;
	const char *color;
	bool alerts;
	int64_t max_types;
	struct nt_strlist highlights;
	int64_t top;
};

struct type_stat {
	const char *name; /* the schema's, valid while the publisher lives */
	uint64_t total, interval;
};

struct plugin_row {
	char name[64], kind[16], state[16];
	double in, out, dropped;
};

#define MAX_NAMED 64 /* target pids whose reports come first */

struct stdout_sink {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct stdout_cfg *cfg;
	FILE *out;
	bool tty, color, redraw, closed;
	dev_t tty_dev;
	struct type_stat *types; /* index: type id; owned */
	size_t n_types;
	uint64_t alerts;
	uint64_t started_ns;     /* CLOCK_MONOTONIC at init */
	struct plugin_row *rows; /* owned, refilled by every summary */
	size_t n_rows;
	struct glance glance;
	struct reports reports;
};

#define BOLD(s) ((s)->color ? "\033[1m" : "")
#define RED(s) ((s)->color ? "\033[31;1m" : "")
#define YELLOW(s) ((s)->color ? "\033[33m" : "")
#define RESET(s) ((s)->color ? "\033[0m" : "")

/* After a write: true (said once on the log) when stdout went away; the
 * sink then prints nothing more. */
bool stdout_check_closed(struct stdout_sink *s);
/* One summary (summary.c): the interval's, or the final one. */
void stdout_summary(struct stdout_sink *s, bool final);

#endif
