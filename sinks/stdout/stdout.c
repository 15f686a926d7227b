/* SPDX-License-Identifier: MIT */
/*
 * The stdout sink: a summary every `interval_ms` and alerts as they
 * come. It appends, a few lines at a time, because the wrapped job writes
 * to the same terminal: a screen is redrawn in place only when stdout is a
 * terminal that no traced process writes to (mode "auto"), or when asked.
 * Each summary shows events and drops, the metric families of
 * `highlights` (GPU launches/s with the top kernels, device memory) and
 * the plugins in trouble; the final one adds the event types, every plugin
 * and the reports, each under the process it describes. If stdout goes
 * away (a closed pipe), the sink stops printing; the other sinks go on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "glance.h"
#include "jsonl.h"
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

static const char *const screen_modes[] = {"auto", "append", "redraw", NULL};
static const char *const color_modes[] = {"auto", "always", "never", NULL};

static const struct nt_cfg_key stdout_keys[] = {
	{.key = "interval_ms", .type = NT_CFG_INT, .offset = offsetof(struct stdout_cfg, interval_ms),
	 .def = "5000", .min = 100, .max = 3600000, .desc = "milliseconds between summaries"},
	{.key = "mode", .type = NT_CFG_STRING, .offset = offsetof(struct stdout_cfg, mode),
	 .def = "\"auto\"", .min = 1, .max = 0, .choices = screen_modes,
	 .desc = "append: new lines under the job's output; redraw: one screen in place; "
		 "auto: redraw only on a terminal no traced process writes to"},
	{.key = "color", .type = NT_CFG_STRING, .offset = offsetof(struct stdout_cfg, color),
	 .def = "\"auto\"", .min = 1, .max = 0, .choices = color_modes,
	 .desc = "auto: colour only on a terminal"},
	{.key = "alerts", .type = NT_CFG_BOOL, .offset = offsetof(struct stdout_cfg, alerts),
	 .def = "true", .min = 1, .max = 0, .desc = "print alert.* events as they come"},
	{.key = "max_types", .type = NT_CFG_INT, .offset = offsetof(struct stdout_cfg, max_types),
	 .def = "10", .min = 1, .max = 1000, .desc = "event types listed (per second, total)"},
	{.key = "highlights", .type = NT_CFG_STRING_LIST,
	 .offset = offsetof(struct stdout_cfg, highlights),
	 .def = "[\"ntcore_cuda_launches_total:kernel\", \"ntcore_cuda_memory_bytes:device\", "
		"\"ntcore_cuda_copy_bytes_total:direction\", \"ntcore_cuda_api_errors_total:error\"]",
	 .min = 1, .max = 0,
	 .desc = "metric families shown at a glance, \"METRIC[:LABEL]\": counters per second, "
		 "gauges summed, the top values of LABEL; absent ones are skipped"},
	{.key = "top", .type = NT_CFG_INT, .offset = offsetof(struct stdout_cfg, top),
	 .def = "3", .min = 1, .max = 20, .desc = "label values shown per highlight"},
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
	struct type_stat *types; /* index: type id */
	size_t n_types;
	uint64_t alerts;
	struct timespec started;
	struct plugin_row *rows;
	size_t n_rows;
	struct glance glance;
	struct reports reports;
};

#define BOLD(s) ((s)->color ? "\033[1m" : "")
#define RED(s) ((s)->color ? "\033[31;1m" : "")
#define YELLOW(s) ((s)->color ? "\033[33m" : "")
#define RESET(s) ((s)->color ? "\033[0m" : "")

/* A write to stdout failed (EPIPE: the reader left): say so once, on
 * stderr, and print nothing more. */
static bool check_closed(struct stdout_sink *s)
{
	if (s->closed)
		return true;
	if (fflush(s->out) == 0 && !ferror(s->out))
		return false;
	int err = errno;
	s->closed = true;
	s->host->log(s->inst, NT_LOG_WARN,
		     "stdout is closed (%s): the summary stops here; the other sinks go on",
		     strerror(err));
	return true;
}

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

	if (ev->size < sizeof(*a) || s->closed)
		return;
	localtime_r(&now, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	uint32_t sev = a->severity < 3 ? a->severity : 2;
	fprintf(s->out, "%s%s ALERT %-8s %s pid %u: %.*s%s\n",
		sev == NT_SEV_CRITICAL ? RED(s) : sev == NT_SEV_WARNING ? YELLOW(s) : "",
		clock, sev_names[sev], schema->name, a->subject_pid, msg ? (int)len : 0,
		msg ? msg : "", RESET(s));
	check_closed(s);
}

static void keep_report(struct stdout_sink *s, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	const struct nt_field *f = nt_schema_field(schema, "text");
	uint32_t len;
	const char *text;
	char comm[NT_COMM_LEN + 1];

	if (!f || f->type != NT_F_VSTR || !(text = nt_event_vstr(ev, f, &len)))
		return;
	memcpy(comm, ev->comm, NT_COMM_LEN);
	comm[NT_COMM_LEN] = '\0';
	reports_keep(&s->reports, schema->name, ev->pid, comm, text, len);
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
		keep_report(s, ev, schema);
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
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - s->started.tv_sec) +
	       (double)(now.tv_nsec - s->started.tv_nsec) / 1e9;
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

static void print_summary(struct stdout_sink *s, bool final)
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
	check_closed(s);
	for (size_t i = 0; i < s->n_types; i++)
		s->types[i].interval = 0;
}

static int stdout_init(struct nt_instance *inst, const struct nt_host *host,
		       const void *config, void **state)
{
	struct stdout_sink *s = calloc(1, sizeof(*s));
	struct stat st;
	const char *bad = NULL;

	if (!s)
		return -ENOMEM;
	s->inst = inst;
	s->host = host;
	s->cfg = config;
	s->out = stdout;
	s->tty = isatty(STDOUT_FILENO) && fstat(STDOUT_FILENO, &st) == 0;
	s->tty_dev = s->tty ? st.st_rdev : 0;
	s->redraw = s->tty && strcmp(s->cfg->mode, "append") != 0;
	s->color = strcmp(s->cfg->color, "always") == 0 ||
		   (strcmp(s->cfg->color, "auto") == 0 && s->tty);
	clock_gettime(CLOCK_MONOTONIC, &s->started);
	int err = glance_init(&s->glance, &s->cfg->highlights, &bad);
	if (err) {
		free(s);
		if (err == -EINVAL)
			return host->config_error(inst, "highlights",
						  "\"%s\" is not \"METRIC\" or \"METRIC:LABEL\"", bad);
		return err;
	}
	*state = s;
	return 0;
}

static int stdout_attach(void *state)
{
	struct stdout_sink *s = state;

	return s->host->add_timer(s->inst, (uint64_t)s->cfg->interval_ms, 0);
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

	reports_free(&s->reports);
	glance_free(&s->glance);
	free(s->types);
	free(s->rows);
	free(s);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "stdout",
	.kind = NT_KIND_SINK,
	.description = "a summary every N seconds (events, drops, GPU at a glance) and alerts as they come",
	.version = "1.1",
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
