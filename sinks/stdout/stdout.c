/* SPDX-License-Identifier: MIT */
/*
 * The stdout sink: a live summary every `interval` seconds (event rates,
 * plugin health from the self-metrics, and the latest text of every
 * `*.report` event) and alerts printed as they come. On a terminal the
 * summary redraws in place with colour; otherwise it is plain text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsonl.h"
#include "ntcore/plugin.h"

struct stdout_cfg {
	int64_t interval;
	const char *color;
	bool alerts;
	int64_t max_types;
};

static const char *const color_modes[] = {"auto", "always", "never", NULL};

static const struct nt_cfg_key stdout_keys[] = {
	{.key = "interval", .type = NT_CFG_INT, .offset = offsetof(struct stdout_cfg, interval),
	 .def = "5", .min = 1, .max = 3600, .desc = "seconds between summaries"},
	{.key = "color", .type = NT_CFG_STRING, .offset = offsetof(struct stdout_cfg, color),
	 .def = "\"auto\"", .min = 1, .max = 0, .choices = color_modes,
	 .desc = "auto: colour and in-place redraw only on a terminal"},
	{.key = "alerts", .type = NT_CFG_BOOL, .offset = offsetof(struct stdout_cfg, alerts),
	 .def = "true", .min = 1, .max = 0, .desc = "print alert.* events as they come"},
	{.key = "max_types", .type = NT_CFG_INT, .offset = offsetof(struct stdout_cfg, max_types),
	 .def = "20", .min = 1, .max = 1000, .desc = "event types listed in the rate table"},
};

struct type_stat {
	const char *name; /* the schema's, valid while the publisher lives */
	uint64_t total, interval;
	char *report;     /* latest text of a *.report event */
	uint32_t report_pid;
};

struct plugin_row {
	char name[64], kind[16], state[16];
	double in, out, dropped;
};

struct stdout_sink {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct stdout_cfg *cfg;
	FILE *out;
	bool tty, color;
	struct type_stat *types; /* index: type id */
	size_t n_types;
	uint64_t alerts;
	struct timespec started;
	struct plugin_row *rows;
	size_t n_rows;
};

#define BOLD(s) ((s)->color ? "\033[1m" : "")
#define RED(s) ((s)->color ? "\033[31;1m" : "")
#define YELLOW(s) ((s)->color ? "\033[33m" : "")
#define RESET(s) ((s)->color ? "\033[0m" : "")

static struct type_stat *type_stat(struct stdout_sink *s, uint32_t type,
				   const struct nt_schema *schema)
{
	if (type >= s->n_types) {
		size_t n = type + 16;
		struct type_stat *grown = realloc(s->types, n * sizeof(*grown));
		if (!grown)
			return NULL;
		memset(grown + s->n_types, 0, (n - s->n_types) * sizeof(*grown));
		s->types = grown;
		s->n_types = n;
	}
	s->types[type].name = schema->name;
	return &s->types[type];
}

static bool has_suffix(const char *text, const char *suffix)
{
	size_t n = strlen(text), m = strlen(suffix);

	return n >= m && strcmp(text + n - m, suffix) == 0;
}

static void print_alert(struct stdout_sink *s, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	static const char *const sev_names[] = {"info", "warning", "critical"};
	const struct nt_alert *a = (const struct nt_alert *)ev;
	const struct nt_field *msg_field = nt_schema_field(schema, "message");
	uint32_t len = 0;
	const char *msg = msg_field ? nt_event_vstr(ev, msg_field, &len) : NULL;
	time_t now = time(NULL);
	struct tm tm;
	char clock[16];

	if (ev->size < sizeof(*a))
		return;
	localtime_r(&now, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	uint32_t sev = a->severity < 3 ? a->severity : 2;
	fprintf(s->out, "%s%s ALERT %-8s %s pid %u: %.*s%s\n",
		sev == NT_SEV_CRITICAL ? RED(s) : sev == NT_SEV_WARNING ? YELLOW(s) : "",
		clock, sev_names[sev], schema->name, a->subject_pid, msg ? (int)len : 0,
		msg ? msg : "", RESET(s));
	fflush(s->out);
}

static void keep_report(struct type_stat *t, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	const struct nt_field *f = nt_schema_field(schema, "text");
	uint32_t len;
	const char *text;

	if (!f || f->type != NT_F_VSTR || !(text = nt_event_vstr(ev, f, &len)))
		return;
	char *copy = malloc((size_t)len + 1);
	if (!copy)
		return;
	memcpy(copy, text, len);
	copy[len] = '\0';
	free(t->report);
	t->report = copy;
	t->report_pid = ev->pid;
}

static void stdout_consume(void *state, const struct nt_event_hdr *ev,
			   const struct nt_schema *schema)
{
	struct stdout_sink *s = state;
	struct type_stat *t = type_stat(s, ev->type, schema);

	if (!t)
		return;
	t->total++;
	t->interval++;
	if (strncmp(schema->name, "alert.", 6) == 0) {
		s->alerts++;
		if (s->cfg->alerts)
			print_alert(s, ev, schema);
	} else if (has_suffix(schema->name, ".report")) {
		keep_report(t, ev, schema);
	}
}

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

/* Collects per-plugin health from the core's self-metrics. */
static int collect_rows(void *arg, const struct nt_metric_desc *desc,
			const struct nt_metric_series *series, uint32_t n,
			uint64_t overflow)
{
	struct stdout_sink *s = arg;

	(void)overflow;
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

static void print_plugins(struct stdout_sink *s)
{
	s->n_rows = 0;
	s->host->metrics_visit(s->inst, collect_rows, s);
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

static int by_interval_desc(const void *a, const void *b)
{
	const struct type_stat *x = *(struct type_stat *const *)a;
	const struct type_stat *y = *(struct type_stat *const *)b;

	if (x->interval != y->interval)
		return x->interval < y->interval ? 1 : -1;
	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static void print_types(struct stdout_sink *s, double secs)
{
	struct type_stat **order = calloc(s->n_types ? s->n_types : 1, sizeof(*order));
	size_t n = 0;

	if (!order)
		return;
	for (size_t i = 0; i < s->n_types; i++)
		if (s->types[i].total)
			order[n++] = &s->types[i];
	qsort(order, n, sizeof(*order), by_interval_desc);
	fprintf(s->out, "%s%-32s %12s %12s %14s%s\n", BOLD(s), "event type", "last", "per second",
		"total", RESET(s));
	for (size_t i = 0; i < n && i < (size_t)s->cfg->max_types; i++)
		fprintf(s->out, "%-32s %12llu %12.1f %14llu\n", order[i]->name,
			(unsigned long long)order[i]->interval,
			secs > 0 ? (double)order[i]->interval / secs : 0.0,
			(unsigned long long)order[i]->total);
	if (!n)
		fprintf(s->out, "(no events yet)\n");
	free(order);
}

static void print_reports(struct stdout_sink *s)
{
	for (size_t i = 0; i < s->n_types; i++) {
		const struct type_stat *t = &s->types[i];
		if (!t->report)
			continue;
		fprintf(s->out, "\n%s── %s (pid %u) ──%s\n%s", BOLD(s), t->name, t->report_pid,
			RESET(s), t->report);
		if (t->report[0] && t->report[strlen(t->report) - 1] != '\n')
			fputc('\n', s->out);
	}
}

static void print_summary(struct stdout_sink *s, bool final)
{
	struct timespec now;
	char clock[16];
	time_t wall = time(NULL);
	struct tm tm;

	clock_gettime(CLOCK_MONOTONIC, &now);
	double up = (double)(now.tv_sec - s->started.tv_sec) +
		    (double)(now.tv_nsec - s->started.tv_nsec) / 1e9;
	localtime_r(&wall, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	if (s->tty && s->color && !final)
		fputs("\033[H\033[2J", s->out);
	else
		fputs("\n", s->out);
	fprintf(s->out, "%sntcore %s  up %.0fs%s%s  alerts: %llu%s\n", BOLD(s), clock, up,
		final ? "  (final)" : "", RESET(s), (unsigned long long)s->alerts,
		s->alerts ? " (see above)" : "");
	print_types(s, final ? up : (double)s->cfg->interval);
	fputc('\n', s->out);
	print_plugins(s);
	print_reports(s);
	fflush(s->out);
	for (size_t i = 0; i < s->n_types; i++)
		s->types[i].interval = 0;
}

static int stdout_init(struct nt_instance *inst, const struct nt_host *host,
		       const void *config, void **state)
{
	struct stdout_sink *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->inst = inst;
	s->host = host;
	s->cfg = config;
	s->out = stdout;
	s->tty = isatty(STDOUT_FILENO);
	s->color = strcmp(s->cfg->color, "always") == 0 ||
		   (strcmp(s->cfg->color, "auto") == 0 && s->tty);
	clock_gettime(CLOCK_MONOTONIC, &s->started);
	*state = s;
	return 0;
}

static int stdout_attach(void *state)
{
	struct stdout_sink *s = state;

	return s->host->add_timer(s->inst, (uint64_t)s->cfg->interval * 1000, 0);
}

static int stdout_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)token;
	(void)budget;
	print_summary(state, false);
	return 0;
}

static void stdout_flush(void *state)
{
	print_summary(state, true);
}

static void stdout_detach(void *state)
{
	(void)state;
}

static void stdout_fini(void *state)
{
	struct stdout_sink *s = state;

	for (size_t i = 0; i < s->n_types; i++)
		free(s->types[i].report);
	free(s->types);
	free(s->rows);
	free(s);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "stdout",
	.kind = NT_KIND_SINK,
	.description = "live terminal summary every N seconds and alerts as they come",
	.version = "1.0",
	.config = stdout_keys,
	.n_config = NT_ARRAY_LEN(stdout_keys),
	.config_size = sizeof(struct stdout_cfg),
	.init = stdout_init,
	.attach = stdout_attach,
	.poll = stdout_poll,
	.detach = stdout_detach,
	.fini = stdout_fini,
	.consume = stdout_consume,
	.flush = stdout_flush,
};
