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
 * This file holds the descriptor, the ops and the alerts; the summary is
 * summary.c, its parts glance.c and reports.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ntcore/kit/cfg.h>
#include <ntcore/kit/clock.h>
#include <ntcore/kit/log.h>

#include "jsonl.h"
#include "stdout_sink.h"

static const char *const screen_modes[] = {"auto", "append", "redraw", NULL};
static const char *const color_modes[] = {"auto", "always", "never", NULL};

#define C struct stdout_cfg
static const struct nt_cfg_key stdout_keys[] = {
	NT_KEY_INT(C, interval_ms, 5000, 100, 3600000, "milliseconds between summaries"),
	NT_KEY_CHOICE(C, mode, "auto", screen_modes,
		      "append: new lines under the job's output; redraw: one screen in place; "
		      "auto: redraw only on a terminal no traced process writes to"),
	NT_KEY_CHOICE(C, color, "auto", color_modes, "auto: colour only on a terminal"),
	NT_KEY_BOOL(C, alerts, true, "print alert.* events as they come"),
	NT_KEY_INT(C, max_types, 10, 1, 1000, "event types listed (per second, total)"),
	NT_KEY_STRLIST(C, highlights,
		       "[\"ntcore_cuda_launches_total:kernel\", \"ntcore_cuda_memory_bytes:device\", "
		       "\"ntcore_cuda_copy_bytes_total:direction\", \"ntcore_cuda_api_errors_total:error\"]",
		       "metric families shown at a glance, \"METRIC[:LABEL]\": counters per second, "
		       "gauges summed, the top values of LABEL; absent ones are skipped"),
	NT_KEY_INT(C, top, 3, 1, 20, "label values shown per highlight"),
};
#undef C

/* A write to stdout failed (EPIPE: the reader left): say so once, on
 * stderr, and print nothing more. */
bool stdout_check_closed(struct stdout_sink *s)
{
	if (s->closed)
		return true;
	if (fflush(s->out) == 0 && !ferror(s->out))
		return false;
	int err = errno;
	s->closed = true;
	nt_log_warn(s, "stdout is closed (%s): the summary stops here; the other sinks go on",
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
	stdout_check_closed(s);
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
	s->started_ns = nt_clock_mono_ns();
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
	stdout_summary(state, false);
	return 0;
}

static void stdout_flush(void *state)
{
	stdout_summary(state, true);
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
