/* SPDX-License-Identifier: MIT */
/*
 * The file sink: JSON Lines (one object per event; metric series too when
 * `metrics = true`) or folded stacks, with size-based rotation. Lines are
 * built in memory and written whole, so a reader never sees half a line,
 * and the flush op on shutdown leaves a complete file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "jsonl.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/ident.h"
#include "ntcore/plugin.h"

static const char *const formats[] = {"jsonl", "folded", NULL};

#define S struct file_cfg
static const struct nt_cfg_key file_keys[] = {
	NT_KEY_STR(S, path, "ntcore-events.jsonl",
		   "output file (relative paths are relative to the working directory)"),
	NT_KEY_CHOICE(S, format, "jsonl", formats,
		      "jsonl: one JSON object per event; folded: 'frames count' lines of events with a stack and a count"),
	NT_KEY_INT(S, max_size_mb, 100, 0, 1 << 20,
		   "rotate when the file would pass this size (0: never)"),
	NT_KEY_INT(S, max_files, 5, 1, 1000, "rotated files kept: PATH.1 (newest) .. PATH.N"),
	NT_KEY_BOOL(S, metrics, false,
		    "also write every metric series each interval and at exit (type \"metric\")"),
	NT_KEY_INT(S, interval_ms, 5000, 100, 86400000,
		   "milliseconds between flushes and metric snapshots"),
	NT_KEY_INT(S, buffer_kb, 256, 4, 65536, "write when this much is buffered"),
	NT_KEY_STR(S, mode, "0600",
		   "permissions (octal) of the files the sink creates; an existing file keeps its own"),
	NT_KEY_BOOL(S, identity, false,
		    "add the process's container.id, k8s.pod.uid, k8s.pod.name, k8s.namespace.name, ntcore.cgroup ... to each event (docs/kubernetes.md)"),
};
#undef S

static const char *const path_label[] = {"instance"};

static const struct nt_metric_desc bytes_desc = {
	.name = "ntcore_file_written_bytes_total",
	.help = "Bytes the file sink wrote", .type = NT_METRIC_COUNTER,
	.n_labels = 1, .label_names = path_label};
static const struct nt_metric_desc rotations_desc = {
	.name = "ntcore_file_rotations_total",
	.help = "Times the file sink rotated its file", .type = NT_METRIC_COUNTER,
	.n_labels = 1, .label_names = path_label};

static int visit_metric(void *arg, const struct nt_metric_desc *desc,
			const struct nt_metric_series *series, uint32_t n,
			uint64_t overflow)
{
	struct file_sink *fs = arg;
	struct timespec now;

	(void)overflow;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t wall = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	struct nt_buf lines = {0};
	nt_jsonl_metric(&lines, wall, desc, series, n);
	if (lines.len && !lines.oom) {
		nt_sb_put(&fs->sb, lines.p, lines.len);
		if (fs->sb.failed) /* metrics are not events: nothing to count */
			nt_sb_rewind(&fs->sb, fs->n_segs ? fs->segs[fs->n_segs - 1].end : 0);
		else
			file_note_lines(fs, false, n);
	}
	nt_buf_free(&lines);
	return 0;
}

static void write_metrics(struct file_sink *fs)
{
	if (fs->cfg->metrics && !fs->folded)
		fs->host->metrics_visit(fs->inst, visit_metric, fs);
}

static int file_init(struct nt_instance *inst, const struct nt_host *host,
		     const void *config, void **state)
{
	struct file_sink *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	fs->inst = inst;
	fs->host = host;
	fs->cfg = config;
	fs->fd = -1;
	fs->folded = strcmp(fs->cfg->format, "folded") == 0;
	if (!*fs->cfg->path) {
		free(fs);
		return host->config_error(inst, "path", "must not be empty");
	}
	char *end;
	const struct file_cfg *cfg = fs->cfg;
	unsigned long mode = strtoul(cfg->mode, &end, 8);
	if (!*cfg->mode || *end || mode > 07777) {
		free(fs);
		return host->config_error(inst, "mode", "'%s' is not an octal file mode (0600, 0644)",
					  cfg->mode);
	}
	fs->mode = (mode_t)mode;
	nt_sb_init(&fs->sb, 0);
	fs->m_bytes = host->metric_register(inst, &bytes_desc);
	fs->m_rotations = host->metric_register(inst, &rotations_desc);
	*state = fs;
	return 0;
}

static int file_attach(void *state)
{
	struct file_sink *fs = state;
	int err = file_open_output(fs);

	if (err) {
		fs->host->log(fs->inst, NT_LOG_ERROR, "cannot open %s: %s", fs->cfg->path,
			      strerror(-err));
		return err;
	}
	/* the buffer and one record past it, allocated once */
	nt_sb_reserve(&fs->sb, (size_t)fs->cfg->buffer_kb * 1024 + (64 << 10));
	return fs->host->add_timer(fs->inst, (uint64_t)fs->cfg->interval_ms, 0);
}

static int file_poll(void *state, uint32_t token, uint32_t budget)
{
	struct file_sink *fs = state;

	(void)token;
	(void)budget;
	write_metrics(fs);
	file_flush_buffer(fs);
	return 0;
}

/* The folded line of an event with a stack, if it has one. */
static bool render_folded(struct file_sink *fs, const struct nt_event_hdr *ev,
			  const struct nt_schema *schema, bool *skip)
{
	struct nt_buf line = {0};
	bool ok;

	*skip = nt_folded_event(&line, ev, schema) != 0;
	ok = *skip || (!line.oom && (nt_sb_put(&fs->sb, line.p, line.len), !fs->sb.failed));
	nt_buf_free(&line);
	return ok;
}

/* The process's identity before the line's closing "}\n" (the core's
 * cache, safe from this thread: no call into the loop). */
static bool add_identity(struct file_sink *fs, const struct nt_event_hdr *ev)
{
	struct nt_identity id;

	if (!ev->pid || !NT_HOST_HAS(fs->host, identity) ||
	    fs->host->identity(fs->inst, ev->pid, &id) != 0 || fs->sb.len < 2)
		return true;
	nt_sb_rewind(&fs->sb, fs->sb.len - 2);
	nt_sb_ident_json(&fs->sb, &id);
	nt_sb_put(&fs->sb, "}\n", 2);
	return !fs->sb.failed;
}

static bool render(struct file_sink *fs, const struct nt_event_hdr *ev,
		   const struct nt_schema *schema, bool *skip)
{
	*skip = false;
	if (fs->folded)
		return render_folded(fs, ev, schema, skip);
	return jr_render(&fs->jr, &fs->sb, ev, schema,
			 fs->host->wall_ns(fs->inst, ev->ts_ns)) &&
	       (!fs->cfg->identity || add_identity(fs, ev));
}

static void file_consume(void *state, const struct nt_event_hdr *ev,
			 const struct nt_schema *schema)
{
	struct file_sink *fs = state;
	size_t before = fs->sb.len;
	bool skip;

	if (!render(fs, ev, schema, &skip)) {
		/* out of memory: write what is there, try once more */
		nt_sb_rewind(&fs->sb, before);
		file_flush_buffer(fs);
		if (!render(fs, ev, schema, &skip)) {
			nt_sb_rewind(&fs->sb, 0);
			fs->host->count_drop(fs->inst, "file", 1);
			return;
		}
	}
	if (skip)
		return; /* no stack in this event: nothing to write */
	file_note_lines(fs, true, 1);
	if (fs->sb.len >= (size_t)fs->cfg->buffer_kb * 1024)
		file_flush_buffer(fs);
}

/* "429 stacks" / "12034 events" (+ "metrics", rotations), for the
 * end-of-run line about this file. */
static void tell_written(struct file_sink *fs)
{
	char what[160];
	int n = snprintf(what, sizeof(what), "%llu %s",
			 (unsigned long long)fs->written_events,
			 fs->folded ? (fs->written_events == 1 ? "stack" : "stacks")
				    : (fs->written_events == 1 ? "event" : "events"));

	if (fs->cfg->metrics && !fs->folded && n > 0 && (size_t)n < sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, " and metrics");
	if (fs->rotations && n > 0 && (size_t)n < sizeof(what))
		snprintf(what + n, sizeof(what) - (size_t)n,
			 "; rotated %llu times, older lines in %s.1..%lld",
			 (unsigned long long)fs->rotations, fs->cfg->path,
			 (long long)fs->cfg->max_files);
	if (NT_HOST_HAS(fs->host, output_written))
		fs->host->output_written(fs->inst, fs->cfg->path, what);
}

static void file_flush(void *state)
{
	struct file_sink *fs = state;

	write_metrics(fs);
	file_flush_buffer(fs);
	if (fs->fd >= 0) {
		fsync(fs->fd);
		tell_written(fs);
	}
}

static void file_detach(void *state)
{
	struct file_sink *fs = state;

	file_flush_buffer(fs);
	if (fs->fd >= 0)
		close(fs->fd);
	fs->fd = -1;
}

static void file_fini(void *state)
{
	struct file_sink *fs = state;

	nt_sb_fini(&fs->sb);
	jr_cache_free(&fs->jr);
	free(fs->segs);
	free(fs);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "file",
	.kind = NT_KIND_SINK,
	.description = "JSON Lines (or folded stacks) to a file, with size-based rotation",
	.version = "1.0",
	.config = file_keys,
	.n_config = NT_ARRAY_LEN(file_keys),
	.config_size = sizeof(struct file_cfg),
	.init = file_init,
	.attach = file_attach,
	.poll = file_poll,
	.detach = file_detach,
	.fini = file_fini,
	.consume = file_consume,
	.flush = file_flush,
};
