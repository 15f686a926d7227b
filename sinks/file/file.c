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

#include "jsonl.h"
#include "jsonr.h"
#include "ntcore/kit/ident.h"
#include "ntcore/plugin.h"

struct file_cfg {
	const char *path;
	const char *format;
	int64_t max_size_mb;
	int64_t max_files;
	bool metrics;
	int64_t interval_ms;
	int64_t buffer_kb;
	const char *mode;
	bool identity;
};

static const char *const formats[] = {"jsonl", "folded", NULL};

static const struct nt_cfg_key file_keys[] = {
	{.key = "path", .type = NT_CFG_STRING, .offset = offsetof(struct file_cfg, path),
	 .def = "\"ntcore-events.jsonl\"", .min = 1, .max = 0,
	 .desc = "output file (relative paths are relative to the working directory)"},
	{.key = "format", .type = NT_CFG_STRING, .offset = offsetof(struct file_cfg, format),
	 .def = "\"jsonl\"", .min = 1, .max = 0, .choices = formats,
	 .desc = "jsonl: one JSON object per event; folded: 'frames count' lines of events with a stack and a count"},
	{.key = "max_size_mb", .type = NT_CFG_INT, .offset = offsetof(struct file_cfg, max_size_mb),
	 .def = "100", .min = 0, .max = 1 << 20,
	 .desc = "rotate when the file would pass this size (0: never)"},
	{.key = "max_files", .type = NT_CFG_INT, .offset = offsetof(struct file_cfg, max_files),
	 .def = "5", .min = 1, .max = 1000, .desc = "rotated files kept: PATH.1 (newest) .. PATH.N"},
	{.key = "metrics", .type = NT_CFG_BOOL, .offset = offsetof(struct file_cfg, metrics),
	 .def = "false", .min = 1, .max = 0,
	 .desc = "also write every metric series each interval and at exit (type \"metric\")"},
	{.key = "interval_ms", .type = NT_CFG_INT, .offset = offsetof(struct file_cfg, interval_ms),
	 .def = "5000", .min = 100, .max = 86400000,
	 .desc = "milliseconds between flushes and metric snapshots"},
	{.key = "buffer_kb", .type = NT_CFG_INT, .offset = offsetof(struct file_cfg, buffer_kb),
	 .def = "256", .min = 4, .max = 65536, .desc = "write when this much is buffered"},
	{.key = "mode", .type = NT_CFG_STRING, .offset = offsetof(struct file_cfg, mode),
	 .def = "\"0600\"", .min = 1, .max = 0,
	 .desc = "permissions (octal) of the files the sink creates; an existing file keeps its own"},
	{.key = "identity", .type = NT_CFG_BOOL, .offset = offsetof(struct file_cfg, identity),
	 .def = "false", .min = 1, .max = 0,
	 .desc = "add the process's container.id, k8s.pod.uid, k8s.pod.name, k8s.namespace.name, ntcore.cgroup ... to each event (docs/kubernetes.md)"},
};

static const char *const path_label[] = {"instance"};

static const struct nt_metric_desc bytes_desc = {
	.name = "ntcore_file_written_bytes_total",
	.help = "Bytes the file sink wrote", .type = NT_METRIC_COUNTER,
	.n_labels = 1, .label_names = path_label};
static const struct nt_metric_desc rotations_desc = {
	.name = "ntcore_file_rotations_total",
	.help = "Times the file sink rotated its file", .type = NT_METRIC_COUNTER,
	.n_labels = 1, .label_names = path_label};

/* A run of lines of one kind in the buffer, so that a write cut short
 * (a full disk) tells exactly how many events got into the file. */
struct seg {
	size_t end;      /* offset in the buffer just past the run */
	uint64_t lines;
	bool events;     /* event lines, else metric lines */
};

struct file_sink {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct file_cfg *cfg;
	bool folded;
	mode_t mode;
	int fd;
	uint64_t size;      /* bytes in the current file */
	struct nt_sb sb;    /* whole lines only */
	struct jr_cache jr; /* compiled renderers (jsonr.h) */
	struct seg *segs;
	size_t n_segs, cap_segs;
	uint64_t written_events; /* lines of events written, for the user */
	uint64_t rotations;
	bool write_failed;  /* logged once */
	bool rotatable;     /* a regular file: never rename /dev/null or a fifo */
	struct nt_metric *m_bytes, *m_rotations;
};

/* The configured mode on a file this sink creates (umask aside: the
 * user asked for it); a file that exists keeps its mode. */
static int open_output(struct file_sink *fs)
{
	struct stat st;
	int flags = O_WRONLY | O_APPEND | O_CLOEXEC;

	fs->fd = open(fs->cfg->path, flags | O_CREAT | O_EXCL, fs->mode);
	if (fs->fd >= 0)
		fchmod(fs->fd, fs->mode);
	else if (errno == EEXIST)
		fs->fd = open(fs->cfg->path, flags);
	if (fs->fd < 0 && errno == ENOENT) /* a dangling symlink: create it */
		fs->fd = open(fs->cfg->path, flags | O_CREAT, fs->mode);
	if (fs->fd < 0)
		return -errno;
	fs->rotatable = fstat(fs->fd, &st) == 0 && S_ISREG(st.st_mode);
	fs->size = fs->rotatable ? (uint64_t)st.st_size : 0;
	return 0;
}

static void rotate(struct file_sink *fs)
{
	char from[4096], to[4096];

	close(fs->fd);
	fs->fd = -1;
	for (int64_t i = fs->cfg->max_files; i >= 1; i--) {
		if (i == 1)
			snprintf(from, sizeof(from), "%s", fs->cfg->path);
		else
			snprintf(from, sizeof(from), "%s.%lld", fs->cfg->path, (long long)(i - 1));
		snprintf(to, sizeof(to), "%s.%lld", fs->cfg->path, (long long)i);
		rename(from, to); /* a missing older file is fine */
	}
	const char *label[1] = {fs->host->instance_name(fs->inst)};
	fs->host->metric_add(fs->m_rotations, label, 1);
	fs->rotations++;
	int err = open_output(fs);
	if (err)
		fs->host->log(fs->inst, NT_LOG_ERROR, "cannot reopen %s after rotation: %s",
			      fs->cfg->path, strerror(-err));
}

/* Writes p[0..n); returns 0 or -errno, *done the bytes written before. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
	*done = 0;
	while (*done < n) {
		ssize_t w = write(fd, p + *done, n - *done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		*done += (size_t)w;
	}
	return 0;
}

/* Record that lines [previous end, sb.len) of one kind were appended. */
static void note_lines(struct file_sink *fs, bool events, uint64_t lines)
{
	struct seg *last = fs->n_segs ? &fs->segs[fs->n_segs - 1] : NULL;

	if (last && last->events == events) {
		last->end = fs->sb.len;
		last->lines += lines;
		return;
	}
	if (fs->n_segs == fs->cap_segs) {
		size_t cap = fs->cap_segs ? fs->cap_segs * 2 : 16;
		struct seg *grown = realloc(fs->segs, cap * sizeof(*grown));
		if (!grown) { /* counted as events: never under-count a drop */
			if (last) {
				last->end = fs->sb.len;
				last->lines += lines;
			}
			return;
		}
		fs->segs = grown;
		fs->cap_segs = cap;
	}
	fs->segs[fs->n_segs++] = (struct seg){fs->sb.len, lines, events};
}

/* Event lines among the first `keep` bytes of the buffer (whole lines),
 * and in all of it. */
static void count_events(const struct file_sink *fs, size_t keep,
			 uint64_t *kept, uint64_t *all)
{
	size_t start = 0;

	*kept = *all = 0;
	for (size_t i = 0; i < fs->n_segs; start = fs->segs[i++].end) {
		const struct seg *s = &fs->segs[i];
		if (!s->events)
			continue;
		*all += s->lines;
		if (s->end <= keep) {
			*kept += s->lines;
		} else if (start < keep) {
			for (const char *p = fs->sb.buf + start, *e = fs->sb.buf + keep;
			     (p = memchr(p, '\n', (size_t)(e - p))); p++)
				(*kept)++;
		}
	}
}

/* A write cut short: the file keeps its whole lines only (the partial one
 * is cut off, so later writes never follow half a line), the events not
 * written are counted as dropped, metric lines are not events. */
static void write_failed(struct file_sink *fs, size_t done, int err)
{
	size_t keep = done;
	uint64_t kept, all;

	while (keep && fs->sb.buf[keep - 1] != '\n')
		keep--;
	if (done > keep && fs->rotatable &&
	    ftruncate(fs->fd, (off_t)(fs->size + keep)) != 0)
		fs->host->log(fs->inst, NT_LOG_ERROR,
			      "%s: cannot cut off a partial line: %s", fs->cfg->path,
			      strerror(errno));
	count_events(fs, keep, &kept, &all);
	fs->size += keep;
	fs->written_events += kept;
	if (all > kept)
		fs->host->count_drop(fs->inst, "file", all - kept);
	if (!fs->write_failed)
		fs->host->log(fs->inst, NT_LOG_ERROR,
			      "writing %s failed: %s; events not written are counted as dropped",
			      fs->cfg->path, strerror(-err));
	fs->write_failed = true;
}

static void flush_buffer(struct file_sink *fs)
{
	uint64_t max = (uint64_t)fs->cfg->max_size_mb << 20;
	size_t done = 0;
	int err = -EBADF;

	if (!fs->sb.len)
		return;
	if (max && fs->rotatable && fs->size && fs->size + fs->sb.len > max)
		rotate(fs);
	if (fs->fd >= 0)
		err = write_all(fs->fd, fs->sb.buf, fs->sb.len, &done);
	if (err) {
		write_failed(fs, done, err);
	} else {
		const char *label[1] = {fs->host->instance_name(fs->inst)};
		uint64_t kept, all;
		count_events(fs, fs->sb.len, &kept, &all);
		fs->size += fs->sb.len;
		fs->host->metric_add(fs->m_bytes, label, (double)fs->sb.len);
		fs->write_failed = false;
		fs->written_events += kept;
	}
	nt_sb_rewind(&fs->sb, 0);
	fs->n_segs = 0;
}

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
			note_lines(fs, false, n);
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
	int err = open_output(fs);

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
	flush_buffer(fs);
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
		flush_buffer(fs);
		if (!render(fs, ev, schema, &skip)) {
			nt_sb_rewind(&fs->sb, 0);
			fs->host->count_drop(fs->inst, "file", 1);
			return;
		}
	}
	if (skip)
		return; /* no stack in this event: nothing to write */
	note_lines(fs, true, 1);
	if (fs->sb.len >= (size_t)fs->cfg->buffer_kb * 1024)
		flush_buffer(fs);
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
	flush_buffer(fs);
	if (fs->fd >= 0) {
		fsync(fs->fd);
		tell_written(fs);
	}
}

static void file_detach(void *state)
{
	struct file_sink *fs = state;

	flush_buffer(fs);
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
