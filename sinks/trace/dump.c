/* SPDX-License-Identifier: MIT */
/*
 * Flight-recorder dumps. A dump renders the recorder's records into a
 * trace file and aggregates them into a report page. On an alert or
 * SIGUSR1 it runs in a forked child: the child reads its copy-on-write
 * image of the recorder, so the loop goes on at once (rendering a full
 * recorder takes about a second, which would otherwise stall every probe's
 * ring buffer), and the memory it costs is only the pages the loop writes
 * meanwhile. The child touches nothing shared (no log, no metric, no
 * stdio): it writes the files and one status line into a pipe the loop
 * watches, then _exit()s. At exit the dump is written in-process.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ntcore/kit/clock.h>
#include <ntcore/kit/log.h>

#include "trace.h"

struct dump_ctx {
	struct trace_sink *ts;
	struct render r;
	struct nt_buf buf;
	struct out_file f;
	struct agg window;
	int err;
};

static void dump_item(void *arg, uint32_t tag, const void *rec, uint32_t len)
{
	struct dump_ctx *d = arg;
	struct trace_sink *ts = d->ts;
	const struct nt_event_hdr *ev = rec;

	if (len < sizeof(*ev))
		return;
	if (tag == 0 && len >= sizeof(struct ctr_rec)) {
		const struct ctr_rec *c = rec;
		const struct ctr_series *s = ctr_series_of(&ts->ctr, c->series);
		if (s) {
			render_counter(&d->r, ev->ts_ns, s, c->value);
			agg_counter(&d->window, ev->ts_ns, s, c->value);
		}
	} else if (tag && tag <= ts->n_schemas) {
		const struct tr_class *c = tr_classify(&ts->classes, ts->schemas[tag - 1]);
		if (c) {
			render_event(&d->r, ev, c);
			agg_event(&d->window, ev, c);
		}
	}
	if (d->buf.len >= 1u << 20 && !d->err) {
		d->err = d->buf.oom ? -ENOMEM : out_write(&d->f, &d->buf);
		d->buf.len = 0;
	}
}

/* Write the recorder as BASE.ext and BASE.html (the report of `whole` when
 * given, else of the recorder's window). Returns 0 or a negative errno. */
static int dump_write(struct trace_sink *ts, const char *reason,
		      const struct agg *whole, uint64_t *bytes, char *path,
		      size_t path_size)
{
	struct dump_ctx d = {.ts = ts, .f = {.fd = -1, .part = 1}};
	char html[4200];

	out_name(ts, d.f.base, sizeof(d.f.base), reason);
	agg_init(&d.window, (uint32_t)ts->cfg->flame_nodes, &ts->cfg->report_memory);
	d.err = render_init(&d.r, ts->cfg->format, &d.buf, ts->cfg->instants);
	if (!d.err)
		d.err = out_open(&d.f, d.r.ops->ext);
	if (!d.err) {
		render_begin(&d.r);
		rec_visit(&ts->rec, dump_item, &d);
		render_end(&d.r, nt_clock_mono_ns(), true);
		if (!d.err)
			d.err = d.buf.oom ? -ENOMEM : out_write(&d.f, &d.buf);
	}
	*bytes = d.f.size;
	out_close(&d.f);
	if (!d.err && ts->cfg->report) {
		char scope[64];
		snprintf(html, sizeof(html), "%s.html", d.f.base);
		snprintf(scope, sizeof(scope), "the last %" PRId64 " s", ts->cfg->window_s);
		d.err = write_report(ts, whole ? whole : &d.window, html, reason,
				     whole ? "the whole run" : scope,
				     strrchr(d.f.path, '/') + 1, ts->rec.evicted);
	}
	snprintf(path, path_size, "%s", d.f.path);
	render_fini(&d.r);
	nt_buf_free(&d.buf);
	agg_fini(&d.window);
	return d.err;
}

static void child_run(struct trace_sink *ts, const char *reason)
{
	uint64_t bytes = 0;
	char line[4400], path[4200];

	/* finish the dump whatever the terminal sends; never run the
	 * daemon's handlers (they would wake the parent's loop) */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	close(ts->status_fd[0]);
	int err = dump_write(ts, reason, NULL, &bytes, path, sizeof(path));
	int n = snprintf(line, sizeof(line), "%u %d %" PRIu64 " %s\n", ts->seq, err,
			 bytes, path);
	if (n > 0 && write(ts->status_fd[1], line, (size_t)n) < 0)
		_exit(3);
	_exit(err ? 1 : 0);
}

static void dump_start(struct trace_sink *ts, uint64_t now)
{
	char reason[64];

	snprintf(reason, sizeof(reason), "%s", ts->dump_reason);
	ts->dump_due_ns = 0;
	ts->last_dump_ns = now;
	ts->seq++;
	pid_t pid = fork();
	if (pid == 0)
		child_run(ts, reason);
	if (pid > 0) {
		ts->dump_pid = pid;
		return;
	}
	nt_log_warn(ts, "fork for the dump failed (%s); "
		      "writing it in the loop", strerror(errno));
	dump_now_sync(ts, reason);
}

void dump_request(struct trace_sink *ts, const char *reason, uint64_t delay_ns,
		  bool rate_limited)
{
	uint64_t now = nt_clock_mono_ns();
	uint64_t gap = (uint64_t)ts->cfg->dump_min_interval_s * 1000000000ull;

	if (ts->dump_due_ns)
		return; /* one is pending: it will cover this moment too */
	if (ts->seq >= (uint64_t)ts->cfg->max_dumps) {
		trace_count(ts, ts->m_dumps, "over_max_dumps", 1);
		return;
	}
	if (rate_limited && ts->last_dump_ns && now < ts->last_dump_ns + gap) {
		trace_count(ts, ts->m_dumps, "rate_limited", 1);
		return;
	}
	snprintf(ts->dump_reason, sizeof(ts->dump_reason), "%s", reason);
	ts->dump_due_ns = now + delay_ns;
	if (!ts->dump_due_ns)
		ts->dump_due_ns = 1;
}

static void dump_done(struct trace_sink *ts, int err, uint64_t bytes,
		      const char *path)
{
	if (err) {
		nt_log_err(ts, "dump %s failed: %s", path,
			      strerror(-err));
		trace_count(ts, ts->m_dumps, "failed", 1);
		return;
	}
	nt_log_info(ts, "flight recorder written: %s (%" PRIu64
		      " bytes)%s", path, bytes, ts->cfg->report ? " and its .html report" : "");
	trace_count(ts, ts->m_dumps, "written", 1);
	trace_count(ts, ts->m_files, "trace", 1);
	if (ts->cfg->report)
		trace_count(ts, ts->m_files, "report", 1);
	trace_count(ts, ts->m_bytes, NULL, (double)bytes);
}

/* Status lines "SEQ ERR BYTES PATH" of finished children. */
void dump_status(struct trace_sink *ts)
{
	ssize_t n;
	char *nl;

	while ((n = read(ts->status_fd[0], ts->status + ts->status_len,
			 sizeof(ts->status) - 1 - ts->status_len)) > 0) {
		ts->status_len += (size_t)n;
		ts->status[ts->status_len] = '\0';
		while ((nl = strchr(ts->status, '\n'))) {
			unsigned seq = 0;
			int err = 0, off = 0;
			uint64_t bytes = 0;
			*nl = '\0';
			if (sscanf(ts->status, "%u %d %" SCNu64 " %n", &seq, &err, &bytes,
				   &off) == 3) {
				dump_done(ts, err, bytes, ts->status + off);
				if (seq == ts->seq)
					ts->dump_reported = true;
			}
			ts->status_len -= (size_t)(nl + 1 - ts->status);
			memmove(ts->status, nl + 1, ts->status_len + 1);
		}
		if (ts->status_len == sizeof(ts->status) - 1)
			ts->status_len = 0; /* a line too long: not ours */
	}
}

/* Reap the child; one gone without its status line crashed. (The loop's
 * SIGCHLD handling may have reaped it first: ECHILD.) */
static void dump_check_child(struct trace_sink *ts, int flags)
{
	int st = 0;
	pid_t p;

	if (!ts->dump_pid)
		return;
	p = waitpid(ts->dump_pid, &st, flags);
	if (p == 0 || (p < 0 && errno != ECHILD))
		return;
	dump_status(ts); /* its line, if it wrote one before exiting */
	if (ts->dump_reported) {
		ts->dump_pid = 0;
		ts->dump_reported = false;
		return;
	}
	nt_log_err(ts, "the dump writer (pid %d) died%s%s",
		      (int)ts->dump_pid, p > 0 && WIFSIGNALED(st) ? " by signal " : "",
		      p > 0 && WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
	trace_count(ts, ts->m_dumps, "failed", 1);
	ts->dump_pid = 0;
}

void dump_tick(struct trace_sink *ts, uint64_t now)
{
	dump_status(ts);
	dump_check_child(ts, WNOHANG);
	if (ts->dump_due_ns && now >= ts->dump_due_ns && !ts->dump_pid)
		dump_start(ts, now);
}

/* Wait for a dump child still writing (at exit and detach). */
void dump_wait(struct trace_sink *ts)
{
	dump_check_child(ts, 0);
}

void dump_now_sync(struct trace_sink *ts, const char *reason)
{
	uint64_t bytes = 0;
	char path[4200];

	if (ts->seq >= (uint64_t)ts->cfg->max_dumps) {
		trace_count(ts, ts->m_dumps, "over_max_dumps", 1);
		nt_log_warn(ts, "max_dumps (%lld) reached: the %s "
			      "dump is not written", (long long)ts->cfg->max_dumps, reason);
		return;
	}
	ts->seq++;
	int err = dump_write(ts, reason, strcmp(reason, "exit") == 0 ? &ts->run : NULL,
			     &bytes, path, sizeof(path));
	dump_done(ts, err, bytes, path);
}
