/* SPDX-License-Identifier: MIT */
/*
 * Output files: names (dir/prefix-PID-TIME[-SEQ-REASON].ext, PID ntcore's,
 * TIME UTC), whole writes, plain mode's rendering into size-rotated parts
 * (NAME.pftrace, NAME.2.pftrace, ...; each part a complete trace that
 * describes its own tracks), and report pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include <ntcore/kit/clock.h>
#include <ntcore/kit/log.h>

#include "trace.h"

#ifndef NTCORE_TRACE_VERSION
#define NTCORE_TRACE_VERSION "?"
#endif

void out_name(const struct trace_sink *ts, char *base, size_t size,
	      const char *reason)
{
	time_t now = time(NULL);
	struct tm tm;
	char when[32], safe[64];
	size_t i = 0;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
	if (!reason) {
		snprintf(base, size, "%s/%s-%d-%s", ts->cfg->dir, ts->cfg->prefix,
			 (int)ts->self, when);
		return;
	}
	/* only [A-Za-z0-9._-] of the reason ("alert.cuda_hang") */
	for (; reason[i] && i + 1 < sizeof(safe); i++) {
		char c = reason[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		safe[i] = ok ? c : '_';
	}
	safe[i] = '\0';
	snprintf(base, size, "%s/%s-%d-%s-%u-%s", ts->cfg->dir, ts->cfg->prefix,
		 (int)ts->self, when, ts->seq, safe);
}

static void part_path(const struct out_file *f, uint32_t part, const char *ext,
		      char *path, size_t size)
{
	if (part > 1)
		snprintf(path, size, "%s.%u.%s", f->base, part, ext);
	else
		snprintf(path, size, "%s.%s", f->base, ext);
}

int out_open(struct out_file *f, const char *ext)
{
	part_path(f, f->part, ext, f->path, sizeof(f->path));
	f->fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	f->size = 0;
	return f->fd < 0 ? -errno : 0;
}

int out_write(struct out_file *f, struct nt_buf *b)
{
	const char *p = b->p;
	size_t n = b->len;

	if (f->fd < 0)
		return -EBADF;
	while (n) {
		ssize_t w = write(f->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
		f->size += (uint64_t)w;
	}
	return 0;
}

void out_close(struct out_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* ---- plain mode ---------------------------------------------------- */

int plain_start(struct trace_sink *ts)
{
	ts->f.part = 1;
	out_name(ts, ts->f.base, sizeof(ts->f.base), NULL);
	int err = out_open(&ts->f, ts->r.ops->ext);
	if (err) {
		nt_log_err(ts, "cannot create %s: %s",
			      ts->f.path, strerror(-err));
		return err;
	}
	trace_count(ts, ts->m_files, "trace", 1);
	render_begin(&ts->r);
	return 0;
}

void plain_flush(struct trace_sink *ts)
{
	int err;

	if (!ts->buf.len && !ts->buf.oom)
		return;
	if (ts->buf.oom)
		err = -ENOMEM;
	else
		err = out_write(&ts->f, &ts->buf);
	if (err) {
		ts->host->count_drop(ts->inst, "trace", ts->buf_events);
		ts->lost += ts->buf_events;
		if (!ts->write_failed)
			nt_log_err(ts, "writing %s failed: %s; its events are counted as dropped",
				   ts->f.path, strerror(-err));
		ts->write_failed = true;
	} else {
		trace_count(ts, ts->m_bytes, NULL, (double)ts->buf.len);
		ts->write_failed = false;
	}
	ts->buf.len = 0;
	ts->buf.oom = 0;
	ts->buf_events = 0;
}

/* A part past max_file_mb: end it, start the next, drop the oldest. */
static void plain_rotate(struct trace_sink *ts)
{
	char old[4200];

	render_end(&ts->r, 0, false);
	plain_flush(ts);
	out_close(&ts->f);
	if (ts->f.part >= (uint32_t)ts->cfg->max_files) {
		part_path(&ts->f, ts->f.part + 1 - (uint32_t)ts->cfg->max_files,
			  ts->r.ops->ext, old, sizeof(old));
		unlink(old);
	}
	ts->f.part++;
	int err = out_open(&ts->f, ts->r.ops->ext);
	if (err) {
		nt_log_err(ts, "cannot create %s: %s",
			      ts->f.path, strerror(-err));
		return;
	}
	trace_count(ts, ts->m_files, "trace", 1);
	render_begin(&ts->r);
}

void plain_event(struct trace_sink *ts, const struct nt_event_hdr *ev,
		 const struct tr_class *c)
{
	render_event(&ts->r, ev, c);
	ts->buf_events++;
	if (ts->buf.len < (size_t)ts->cfg->write_buffer_kb * 1024 && !ts->buf.oom)
		return;
	plain_flush(ts);
	if (ts->cfg->max_file_mb && ts->f.fd >= 0 &&
	    ts->f.size >= (uint64_t)ts->cfg->max_file_mb << 20)
		plain_rotate(ts);
}

void plain_finish(struct trace_sink *ts, const char *reason)
{
	char html[4200], name[4200];

	render_end(&ts->r, nt_clock_mono_ns(), true);
	plain_flush(ts);
	if (ts->f.fd >= 0)
		fsync(ts->f.fd);
	out_close(&ts->f);
	if (!ts->cfg->report)
		return;
	snprintf(html, sizeof(html), "%s.html", ts->f.base);
	snprintf(name, sizeof(name), "%s", strrchr(ts->f.path, '/') + 1);
	int err = write_report(ts, &ts->run, html, reason, "the whole run", name,
			       ts->lost);
	if (err) {
		nt_log_err(ts, "cannot write %s: %s", html,
			      strerror(-err));
		return;
	}
	trace_count(ts, ts->m_files, "report", 1);
	nt_log_info(ts, "wrote %s and %s", ts->f.path, html);
}

/* ---- report pages -------------------------------------------------- */

int write_report(struct trace_sink *ts, const struct agg *a, const char *path,
		 const char *reason, const char *scope, const char *trace_file,
		 uint64_t lost)
{
	char host[256] = "?";
	struct nt_buf b = {0};
	struct out_file f = {.fd = -1, .part = 1};

	gethostname(host, sizeof(host) - 1);
	struct report_meta m = {.reason = reason, .scope = scope,
				.trace_file = trace_file, .host = host,
				.version = NTCORE_TRACE_VERSION, .pid = (uint32_t)ts->self,
				.wall_offset_ns = ts->wall_offset_ns, .lost = lost};
	report_html(&b, a, &m);
	f.fd = b.oom ? -1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int err = f.fd < 0 ? (b.oom ? -ENOMEM : -errno) : out_write(&f, &b);
	out_close(&f);
	nt_buf_free(&b);
	return err;
}
