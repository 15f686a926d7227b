/* SPDX-License-Identifier: MIT */
/*
 * The trace sink: its descriptor, config keys, metrics and ops. Events are
 * rendered by schema conventions (conv.h) into Perfetto or JSON traces,
 * in plain mode as they come or, in flight-recorder mode, kept in bounded
 * memory and written when an alert fires, on SIGUSR1 and at exit; a report
 * page goes with each (see trace.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ntcore/kit/cfg.h>
#include <ntcore/kit/clock.h>
#include <ntcore/kit/log.h>

#include "trace.h"

static const char *const modes[] = {"plain", "flight", NULL};
static const char *const formats[] = {"perfetto", "json", NULL};
static const char *const severities[] = {"info", "warning", "critical", NULL};

#define C struct trace_cfg
static const struct nt_cfg_key trace_keys[] = {
	NT_KEY_CHOICE(C, mode, "plain", modes,
	     "plain: write the whole run; flight: keep the last window_s in memory, write it on an alert, SIGUSR1 and at exit"),
	NT_KEY_CHOICE(C, format, "perfetto", formats,
	     "perfetto: protobuf trace (ui.perfetto.dev); json: trace events (chrome://tracing, speedscope)"),
	NT_KEY_STR(C, dir, ".", "directory the traces and reports are written to"),
	NT_KEY_STR(C, prefix, "ntcore-trace",
	    "file names: PREFIX-PID-TIME[-SEQ-REASON].pftrace|.json|.html"),
	NT_KEY_INT(C, max_file_mb, 1024, 0, 1 << 20,
	    "plain: start a new part when a file passes this size (0: never)"),
	NT_KEY_INT(C, max_files, 8, 1, 100000, "plain: parts kept (older ones are deleted)"),
	NT_KEY_INT(C, window_s, 60, 1, 86400, "flight: seconds of events kept"),
	NT_KEY_INT(C, buffer_mb, 256, 1, 65536,
	    "flight: memory the recorder may hold (it keeps less than window_s when full)"),
	NT_KEY_BOOL(C, dump_on_alert, true, "flight: write the recorder when an alert fires"),
	NT_KEY_CHOICE(C, alert_min_severity, "warning", severities, "flight: the least severe alert that writes it"),
	NT_KEY_INT(C, dump_min_interval_s, 60, 0, 86400,
	    "flight: seconds between two dumps caused by alerts"),
	NT_KEY_INT(C, dump_delay_ms, 1000, 0, 600000,
	    "flight: wait this long after an alert, so the events of its moment are in"),
	NT_KEY_INT(C, max_dumps, 100, 1, 1000000, "flight: dumps written at most (the exit's included)"),
	NT_KEY_BOOL(C, report, true, "write an HTML report page with each trace"),
	NT_KEY_STRLIST(C, counters,
	    "[\"ntcore_cuda_memory_bytes\", \"ntcore_mem_rss_bytes\", \"ntcore_cuda_gpu_busy_ratio\"]",
	    "metric families (fnmatch patterns) drawn as counter tracks"),
	NT_KEY_STRLIST(C, report_memory, "[\"ntcore_cuda_memory_bytes\"]",
	    "counter families the report's memory timeline plots"),
	NT_KEY_INT(C, counter_interval_ms, 250, 10, 3600000, "how often counters are sampled"),
	NT_KEY_INT(C, max_counter_series, 256, 1, 100000, "counter tracks at most"),
	NT_KEY_BOOL(C, instants, true,
	    "draw events that are neither slices nor alerts as instants on their thread"),
	NT_KEY_INT(C, flame_nodes, 20000, 100, 10000000, "nodes per flame graph in the report"),
	NT_KEY_INT(C, write_buffer_kb, 1024, 4, 1048576, "plain: write when this much is rendered"),
};
#undef C

static const char *const l_inst[] = {"instance"};
static const char *const l_inst_kind[] = {"instance", "kind"};
static const char *const l_inst_result[] = {"instance", "result"};

static const struct nt_metric_desc m_bytes_desc = {
	.name = "ntcore_trace_written_bytes_total", .help = "Bytes of traces written",
	.type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = l_inst};
static const struct nt_metric_desc m_files_desc = {
	.name = "ntcore_trace_files_total", .help = "Files written (kind: trace, report)",
	.type = NT_METRIC_COUNTER, .n_labels = 2, .label_names = l_inst_kind};
static const struct nt_metric_desc m_dumps_desc = {
	.name = "ntcore_trace_dumps_total",
	.help = "Flight-recorder dumps by result (written, failed, rate_limited, over_max_dumps)",
	.type = NT_METRIC_COUNTER, .n_labels = 2, .label_names = l_inst_result};
static const struct nt_metric_desc m_recorder_desc = {
	.name = "ntcore_trace_recorder_bytes", .help = "Memory the flight recorder holds",
	.type = NT_METRIC_GAUGE, .n_labels = 1, .label_names = l_inst};
static const struct nt_metric_desc m_evicted_desc = {
	.name = "ntcore_trace_recorder_evicted_total",
	.help = "Records the flight recorder let go (older than window_s, or over buffer_mb)",
	.type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = l_inst};

void trace_count(struct trace_sink *ts, struct nt_metric *m, const char *what,
		 double n)
{
	const char *labels[2] = {ts->host->instance_name(ts->inst), what};

	if (m)
		ts->host->metric_add(m, labels, n);
}

/* ---- keeping events ------------------------------------------------ */

/* The recorder tag of a schema (1-based), 0 when none can be given. */
static uint32_t schema_tag(struct trace_sink *ts, const struct nt_schema *s)
{
	uintptr_t tag = (uintptr_t)tmap_get(&ts->schema_tags, &s, sizeof(s));

	if (tag)
		return (uint32_t)tag;
	const struct nt_schema **grown =
		realloc(ts->schemas, (ts->n_schemas + 1) * sizeof(*grown));
	if (!grown)
		return 0;
	ts->schemas = grown;
	ts->schemas[ts->n_schemas] = s;
	tag = ++ts->n_schemas;
	if (tmap_put(&ts->schema_tags, &s, sizeof(s), (void *)tag)) {
		ts->n_schemas--;
		return 0;
	}
	return (uint32_t)tag;
}

static void keep(struct trace_sink *ts, const struct nt_event_hdr *ev,
		 const struct nt_schema *schema)
{
	uint32_t tag = schema_tag(ts, schema);

	if (!tag || rec_append(&ts->rec, tag, ev, ev->size, ev->ts_ns)) {
		ts->host->count_drop(ts->inst, "trace", 1);
		ts->lost++;
	}
}

static void on_alert(struct trace_sink *ts, const struct nt_event_hdr *ev,
		     const struct tr_class *c)
{
	if (!ts->flight || !ts->cfg->dump_on_alert ||
	    tr_field_uint(ev, c->severity) < ts->min_severity)
		return;
	dump_request(ts, c->schema->name,
		     (uint64_t)ts->cfg->dump_delay_ms * 1000000ull, true);
}

static void trace_consume(void *state, const struct nt_event_hdr *ev,
			  const struct nt_schema *schema)
{
	struct trace_sink *ts = state;
	const struct tr_class *c = tr_classify(&ts->classes, schema);

	if (!c) {
		ts->host->count_drop(ts->inst, "trace", 1);
		ts->lost++;
		return;
	}
	if (ts->cfg->report)
		agg_event(&ts->run, ev, c);
	if (ts->flight) {
		keep(ts, ev, schema);
	} else if (ts->f.fd >= 0) {
		plain_event(ts, ev, c);
	} else { /* no file (a part could not be created) */
		ts->host->count_drop(ts->inst, "trace", 1);
		ts->lost++;
	}
	if (c->kind == TR_ALERT)
		on_alert(ts, ev, c);
}

static void on_counter(void *arg, uint64_t ts_ns, const struct ctr_series *s,
		       double value)
{
	struct trace_sink *ts = arg;

	if (ts->cfg->report)
		agg_counter(&ts->run, ts_ns, s, value);
	if (!ts->flight) {
		if (ts->f.fd >= 0)
			render_counter(&ts->r, ts_ns, s, value);
		return;
	}
	struct ctr_rec rec = {.hdr = {.size = sizeof(rec), .ts_ns = ts_ns},
			      .series = s->id, .value = value};
	if (rec_append(&ts->rec, 0, &rec, sizeof(rec), ts_ns))
		ts->host->count_drop(ts->inst, "trace", 1);
}

/* ---- ops ----------------------------------------------------------- */

static int check_dir(struct nt_instance *inst, const struct nt_host *host,
		     const char *dir)
{
	struct stat st;

	if (!*dir)
		return host->config_error(inst, "dir", "must not be empty");
	if (stat(dir, &st) != 0)
		return host->config_error(inst, "dir", "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return host->config_error(inst, "dir", "%s is not a directory", dir);
	if (access(dir, W_OK | X_OK) != 0)
		return host->config_error(inst, "dir", "%s: cannot write there: %s",
					  dir, strerror(errno));
	return 0;
}

static void register_metrics(struct trace_sink *ts)
{
	const struct nt_host *h = ts->host;

	ts->m_bytes = h->metric_register(ts->inst, &m_bytes_desc);
	ts->m_files = h->metric_register(ts->inst, &m_files_desc);
	ts->m_dumps = h->metric_register(ts->inst, &m_dumps_desc);
	ts->m_recorder = h->metric_register(ts->inst, &m_recorder_desc);
	ts->m_evicted = h->metric_register(ts->inst, &m_evicted_desc);
}

static uint32_t severity_of(const char *name)
{
	return strcmp(name, "critical") == 0 ? NT_SEV_CRITICAL
	       : strcmp(name, "warning") == 0 ? NT_SEV_WARNING : NT_SEV_INFO;
}

static int trace_init(struct nt_instance *inst, const struct nt_host *host,
		      const void *config, void **state)
{
	const struct trace_cfg *cfg = config;
	int err = check_dir(inst, host, cfg->dir);

	if (err)
		return err;
	if (!*cfg->prefix || strchr(cfg->prefix, '/'))
		return host->config_error(inst, "prefix", "must be a non-empty file name part");
	struct trace_sink *ts = calloc(1, sizeof(*ts));
	if (!ts)
		return -ENOMEM;
	ts->inst = inst;
	ts->host = host;
	ts->cfg = cfg;
	ts->flight = strcmp(cfg->mode, "flight") == 0;
	ts->min_severity = severity_of(cfg->alert_min_severity);
	ts->self = getpid();
	ts->f.fd = -1;
	ts->status_fd[0] = ts->status_fd[1] = -1;
	uint64_t now = nt_clock_mono_ns();
	ts->wall_offset_ns = (int64_t)(host->wall_ns(inst, now) - now);
	ctr_init(&ts->ctr, &cfg->counters, (uint32_t)cfg->max_counter_series,
		 ts->flight ? (uint64_t)cfg->window_s * 250000000ull : 0);
	agg_init(&ts->run, (uint32_t)cfg->flame_nodes, &cfg->report_memory);
	rec_init(&ts->rec, (size_t)cfg->buffer_mb << 20,
		 (uint64_t)cfg->window_s * 1000000000ull);
	if (render_init(&ts->r, cfg->format, &ts->buf, cfg->instants)) {
		render_fini(&ts->r);
		free(ts);
		return -ENOMEM;
	}
	register_metrics(ts);
	*state = ts;
	return 0;
}

static int trace_attach(void *state)
{
	struct trace_sink *ts = state;
	int err;

	if (ts->flight) {
		if (pipe2(ts->status_fd, O_CLOEXEC | O_NONBLOCK) != 0)
			return -errno;
		if ((err = ts->host->watch_fd(ts->inst, ts->status_fd[0], 1)) < 0)
			return err;
	} else if ((err = plain_start(ts))) {
		return err;
	}
	err = ts->host->add_timer(ts->inst, (uint64_t)ts->cfg->counter_interval_ms, 0);
	return err < 0 ? err : 0;
}

/* Recorder gauges: its memory, and what it let go since the last tick. */
static void recorder_metrics(struct trace_sink *ts)
{
	const char *label[1] = {ts->host->instance_name(ts->inst)};

	ts->host->metric_set(ts->m_recorder, label, (double)ts->rec.bytes);
	if (ts->rec.evicted != ts->evicted_seen) {
		trace_count(ts, ts->m_evicted, NULL,
			    (double)(ts->rec.evicted - ts->evicted_seen));
		ts->evicted_seen = ts->rec.evicted;
	}
}

static int trace_poll(void *state, uint32_t token, uint32_t budget)
{
	struct trace_sink *ts = state;
	uint64_t now = nt_clock_mono_ns();

	(void)budget;
	if (token == 1) {
		dump_status(ts);
		return 0;
	}
	ctr_sample(&ts->ctr, ts->host, ts->inst, now, on_counter, ts);
	if (ts->flight) {
		recorder_metrics(ts);
		dump_tick(ts, now);
	} else if (ts->f.fd >= 0) {
		plain_flush(ts);
	}
	return 0;
}

static void trace_on_signal(void *state, int signo)
{
	struct trace_sink *ts = state;

	if (signo != SIGUSR1)
		return;
	if (!ts->flight) {
		plain_flush(ts);
		nt_log_info(ts, "SIGUSR1: %s flushed", ts->f.path);
		return;
	}
	dump_request(ts, "signal", 0, false);
	dump_tick(ts, nt_clock_mono_ns());
}

static void trace_flush(void *state)
{
	struct trace_sink *ts = state;

	if (ts->finished)
		return;
	ts->finished = true;
	ctr_sample(&ts->ctr, ts->host, ts->inst, nt_clock_mono_ns(), on_counter, ts);
	if (ts->flight) {
		dump_wait(ts);
		dump_now_sync(ts, "exit");
	} else if (ts->f.fd >= 0) {
		plain_finish(ts, "exit");
	}
}

static void trace_detach(void *state)
{
	struct trace_sink *ts = state;

	if (ts->flight)
		dump_wait(ts);
	else if (ts->f.fd >= 0)
		plain_flush(ts);
	out_close(&ts->f);
}

static void trace_fini(void *state)
{
	struct trace_sink *ts = state;

	for (int i = 0; i < 2; i++)
		if (ts->status_fd[i] >= 0)
			close(ts->status_fd[i]);
	render_fini(&ts->r);
	nt_buf_free(&ts->buf);
	rec_fini(&ts->rec);
	agg_fini(&ts->run);
	ctr_fini(&ts->ctr);
	tr_classes_free(&ts->classes);
	tmap_free(&ts->schema_tags, NULL);
	free(ts->schemas);
	free(ts);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "trace",
	.kind = NT_KIND_SINK,
	.description = "Perfetto/JSON timelines, a flight recorder and an HTML report page",
	.version = "1.0",
	.config = trace_keys,
	.n_config = NT_ARRAY_LEN(trace_keys),
	.config_size = sizeof(struct trace_cfg),
	.init = trace_init,
	.attach = trace_attach,
	.poll = trace_poll,
	.detach = trace_detach,
	.fini = trace_fini,
	.consume = trace_consume,
	.flush = trace_flush,
	.on_signal = trace_on_signal,
};
