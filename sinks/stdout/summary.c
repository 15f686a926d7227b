/* SPDX-License-Identifier: MIT */
/*
 * The stdout sink's summary (see stdout.c for when it is printed): the
 * core's self-metrics per plugin, the at-a-glance families (glance.c), the
 * busiest event types and, in the final one and on a redrawn screen, the
 * plugin table and the reports (reports.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <ntcore/kit/clock.h>

#include "stdout_sink.h"

static struct plugin_row *row_for(struct stdout_sink *s, const char *name)
{
	for (size_t i = 0; i < s->n_rows; i++)
		if (strcmp(s->rows[i].name, name) == 0)
			return &s->rows[i];
	struct plugin_row *grown = realloc(s->rows, (s->n_rows + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	s->rows = grown;
	struct plugin_row *r = &s->rows[s->n_rows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	return r;
}

/* Per-plugin health from the core's self-metrics, and the highlights. */
static int collect(void *arg, const struct nt_metric_desc *desc,
		   const struct nt_metric_series *series, uint32_t n,
		   uint64_t overflow)
{
	struct stdout_sink *s = arg;

	glance_visit(&s->glance, desc, series, n, overflow);
	for (uint32_t i = 0; i < n; i++) {
		const char *const *l = series[i].label_values;
		struct plugin_row *r;
		if (strcmp(desc->name, "ntcore_events_in_total") == 0 && (r = row_for(s, l[0])))
			r->in = series[i].value;
		else if (strcmp(desc->name, "ntcore_events_out_total") == 0 && (r = row_for(s, l[0])))
			r->out = series[i].value;
		else if (strcmp(desc->name, "ntcore_events_dropped_total") == 0 &&
			 (r = row_for(s, l[1])))
			r->dropped += series[i].value;
		else if (strcmp(desc->name, "ntcore_plugin_state") == 0 && (r = row_for(s, l[0]))) {
			snprintf(r->kind, sizeof(r->kind), "%s", l[1]);
			snprintf(r->state, sizeof(r->state), "%s", l[2]);
		}
	}
	return 0;
}

static void print_plugin_table(struct stdout_sink *s)
{
	fprintf(s->out, "%s%-24s %-9s %-11s %12s %12s %10s%s\n", BOLD(s), "plugin", "kind",
		"state", "events in", "events out", "dropped", RESET(s));
	for (size_t i = 0; i < s->n_rows; i++) {
		const struct plugin_row *r = &s->rows[i];
		bool bad = strcmp(r->state, "failed") == 0 || r->dropped > 0;
		fprintf(s->out, "%s%-24s %-9s %-11s %12.0f %12.0f %10.0f%s\n",
			bad ? YELLOW(s) : "", r->name, r->kind[0] ? r->kind : "-",
			r->state[0] ? r->state : "-", r->in, r->out, r->dropped,
			bad ? RESET(s) : "");
	}
}

/* One line: "plugins: 12 attached; failed: io.0; dropping: cuda.0 (12)". */
static void print_plugin_line(struct stdout_sink *s)
{
	size_t attached = 0;

	for (size_t i = 0; i < s->n_rows; i++)
		attached += strcmp(s->rows[i].state, "attached") == 0;
	fprintf(s->out, "  plugins: %zu attached", attached);
	for (int pass = 0; pass < 2; pass++) {
		bool first = true;
		for (size_t i = 0; i < s->n_rows; i++) {
			const struct plugin_row *r = &s->rows[i];
			bool hit = pass ? r->dropped > 0 : strcmp(r->state, "failed") == 0;
			if (!hit)
				continue;
			fprintf(s->out, "%s%s %s", first ? (pass ? "; dropping:" : "; failed:") : ",",
				YELLOW(s), r->name);
			if (pass)
				fprintf(s->out, " (%.0f)", r->dropped);
			fputs(RESET(s), s->out);
			first = false;
		}
	}
	fputc('\n', s->out);
}

static int by_interval_desc(const void *a, const void *b)
{
	const struct type_stat *x = *(struct type_stat *const *)a;
	const struct type_stat *y = *(struct type_stat *const *)b;

	if (x->interval != y->interval)
		return x->interval < y->interval ? 1 : -1;
	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

/* The busiest event types: a table, or one line in append mode. */
static void print_types(struct stdout_sink *s, double secs, bool table)
{
	struct type_stat **order = calloc(s->n_types ? s->n_types : 1, sizeof(*order));
	size_t n = 0, max = (size_t)s->cfg->max_types;

	if (!order)
		return;
	for (size_t i = 0; i < s->n_types; i++)
		if (s->types[i].total)
			order[n++] = &s->types[i];
	qsort(order, n, sizeof(*order), by_interval_desc);
	if (table) {
		fprintf(s->out, "%s%-32s %12s %14s%s\n", BOLD(s), "event type", "per second",
			"total", RESET(s));
		for (size_t i = 0; i < n && i < max; i++)
			fprintf(s->out, "%-32s %12.1f %14llu\n", order[i]->name,
				secs > 0 ? (double)order[i]->interval / secs : 0.0,
				(unsigned long long)order[i]->total);
	} else {
		fprintf(s->out, "  events:");
		for (size_t i = 0; i < n && i < max && order[i]->interval; i++)
			fprintf(s->out, "%s %s %.0f/s", i ? "," : "", order[i]->name,
				secs > 0 ? (double)order[i]->interval / secs : 0.0);
		if (!n || !order[0]->interval)
			fprintf(s->out, " none in the last %.0f s", secs);
		fputc('\n', s->out);
	}
	free(order);
}

static double seconds_up(const struct stdout_sink *s)
{
	return (double)(nt_clock_mono_ns() - s->started_ns) / 1e9;
}

static void print_header(struct stdout_sink *s, double up, bool final)
{
	char clock[16];
	time_t wall = time(NULL);
	struct tm tm;
	double in = 0, dropped = 0;

	for (size_t i = 0; i < s->n_rows; i++) {
		in += s->rows[i].in;
		dropped += s->rows[i].dropped;
	}
	localtime_r(&wall, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	fprintf(s->out, "%s── ntcore %s  up %.0fs%s: %.0f events, %s%.0f dropped%s, %llu alert%s%s ──%s\n",
		BOLD(s), clock, up, final ? " (final)" : "", in,
		dropped > 0 ? YELLOW(s) : "", dropped, dropped > 0 ? BOLD(s) : "",
		(unsigned long long)s->alerts, s->alerts == 1 ? "" : "s",
		s->alerts ? " (above)" : "", RESET(s));
}

/* Does a traced process write to our terminal (its fd 0, 1 or 2)? */
static bool terminal_shared(struct stdout_sink *s)
{
	uint32_t pids[MAX_NAMED];
	size_t n = s->host->target_pids(s->inst, pids, MAX_NAMED);
	char path[64];
	struct stat st;

	for (size_t i = 0; i < n && i < MAX_NAMED; i++)
		for (int fd = 0; fd <= 2; fd++) {
			snprintf(path, sizeof(path), "/proc/%u/fd/%d", pids[i], fd);
			if (stat(path, &st) == 0 && S_ISCHR(st.st_mode) &&
			    st.st_rdev == s->tty_dev)
				return true;
		}
	return false;
}

void stdout_summary(struct stdout_sink *s, bool final)
{
	double up = seconds_up(s), secs = final ? up : (double)s->cfg->interval_ms / 1000.0;
	uint32_t named[MAX_NAMED];
	size_t n_named;

	if (s->closed)
		return;
	if (s->redraw && strcmp(s->cfg->mode, "auto") == 0 && terminal_shared(s))
		s->redraw = false; /* the job writes here: append from now on */
	s->n_rows = 0;
	glance_begin(&s->glance);
	s->host->metrics_visit(s->inst, collect, s);
	fputs(s->redraw && !final ? "\033[H\033[2J" : "\n", s->out);
	print_header(s, up, final);
	glance_print(&s->glance, s->out, secs, (unsigned)s->cfg->top, final);
	print_types(s, secs, final || s->redraw);
	if (final || s->redraw)
		print_plugin_table(s);
	else
		print_plugin_line(s);
	if (final || s->redraw) {
		n_named = s->host->target_pids(s->inst, named, MAX_NAMED);
		reports_print(&s->reports, s->out, named, n_named < MAX_NAMED ? n_named : MAX_NAMED,
			      BOLD(s), RESET(s));
	}
	stdout_check_closed(s);
	for (size_t i = 0; i < s->n_types; i++)
		s->types[i].interval = 0;
}
