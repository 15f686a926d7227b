/* SPDX-License-Identifier: MIT */
/*
 * io probe: the io.report table for the live summary. Devices by op, the
 * busiest processes, the slowest requests of the run; latencies as the
 * bounds of the histogram buckets that hold the quantiles.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/kit/clock.h"

#include "io_int.h"

static const char *fmt_ns(uint64_t ns, char *b, size_t len)
{
	if (ns == UINT64_MAX)
		snprintf(b, len, ">67s");
	else if (ns < 1000000)
		snprintf(b, len, "%lluus", (unsigned long long)((ns + 999) / 1000));
	else if (ns < 10000000)
		snprintf(b, len, "%.1fms", (double)ns / 1e6);
	else if (ns < 10000000000ull)
		snprintf(b, len, "%.0fms", (double)ns / 1e6);
	else
		snprintf(b, len, "%.1fs", (double)ns / 1e9);
	return b;
}

static const char *fmt_bytes(uint64_t b, char *out, size_t len)
{
	if (b < 1024)
		snprintf(out, len, "%lluB", (unsigned long long)b);
	else if (b < 1048576)
		snprintf(out, len, "%.1fKiB", (double)b / 1024);
	else if (b < 1073741824ull)
		snprintf(out, len, "%.1fMiB", (double)b / 1048576);
	else
		snprintf(out, len, "%.1fGiB", (double)b / 1073741824);
	return out;
}

static int cmp_row_bytes(const void *a, const void *b)
{
	const struct io_row *x = a, *y = b;

	if (x->st.bytes != y->st.bytes)
		return x->st.bytes > y->st.bytes ? -1 : 1;
	if (x->st.ops != y->st.ops)
		return x->st.ops > y->st.ops ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int cmp_row_dev(const void *a, const void *b)
{
	const struct io_row *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

static void row_line(struct nt_sb *sb, const struct io_row *r, bool with_proc)
{
	char b[24], q50[16], q99[16], s50[16], s99[16];
	double small = r->st.ops ? 100.0 * (double)r->st.small_ops /
					   (double)r->st.ops : 0;

	if (with_proc)
		nt_sb_printf(sb, "%-8u %-16s", r->pid, r->comm);
	nt_sb_printf(sb, "%-10s %-7s %8llu %10s %6.1f%% %8s %8s %8s %8s\n",
	       r->name, io_op_str(r->op), (unsigned long long)r->st.ops,
	       fmt_bytes(r->st.bytes, b, sizeof(b)), small,
	       fmt_ns(io_lat_quantile_ns(r->st.queue_hist, 0.5), q50, sizeof(q50)),
	       fmt_ns(io_lat_quantile_ns(r->st.queue_hist, 0.99), q99, sizeof(q99)),
	       fmt_ns(io_lat_quantile_ns(r->st.service_hist, 0.5), s50, sizeof(s50)),
	       fmt_ns(io_lat_quantile_ns(r->st.service_hist, 0.99), s99, sizeof(s99)));
}

static void slow_line(struct nt_sb *sb, const struct io_slowest *s,
		      const char *(*dev_name)(void *arg, uint32_t dev), void *arg)
{
	char comm[NT_COMM_LEN + 1], nb[32], b[24], t1[16], t2[16], t3[16];

	memcpy(comm, s->comm, NT_COMM_LEN);
	comm[NT_COMM_LEN] = '\0';
	if (dev_name)
		snprintf(nb, sizeof(nb), "%s", dev_name(arg, s->dev));
	else
		io_dev_majmin(s->dev, nb);
	nt_sb_printf(sb, "%-8u %-16s %-10s %-7s %10s %14llu %8s %8s %8s\n",
		     s->pid, comm, nb, io_op_str(s->op),
		     fmt_bytes(s->bytes, b, sizeof(b)),
		     (unsigned long long)s->sector,
		     fmt_ns(s->latency_ns, t1, sizeof(t1)),
		     fmt_ns(s->queue_ns, t2, sizeof(t2)),
		     fmt_ns(s->service_ns, t3, sizeof(t3)));
}

void io_format_report(struct nt_sb *sb, struct io_rows *rows,
		      size_t max_procs, const struct nt_topn *slow,
		      const char *(*dev_name)(void *arg, uint32_t dev),
		      void *arg)
{
	static const char *hdr = "%-10s %-7s %8s %10s %7s %8s %8s %8s %8s\n";

	/* qsort's array must not be NULL, even empty (UBSan) */
	if (rows->n_devs > 1)
		qsort(rows->devs, rows->n_devs, sizeof(*rows->devs), cmp_row_dev);
	if (rows->n_procs > 1)
		qsort(rows->procs, rows->n_procs, sizeof(*rows->procs),
		      cmp_row_bytes);
	nt_sb_puts(sb, "io: block requests issued (queue = created to issued, "
		       "service = issued to completed; p50/p99 are bucket "
		       "bounds)\n");
	nt_sb_printf(sb, hdr, "DEVICE", "OP", "REQS", "BYTES", "<SMALL",
		     "Q_P50", "Q_P99", "SVC_P50", "SVC_P99");
	for (size_t i = 0; i < rows->n_devs; i++)
		row_line(sb, &rows->devs[i], false);
	if (rows->n_procs && max_procs) {
		nt_sb_printf(sb, "busiest processes:\n%-8s %-16s", "PID", "COMM");
		nt_sb_printf(sb, hdr, "DEVICE", "OP", "REQS", "BYTES", "<SMALL",
			     "Q_P50", "Q_P99", "SVC_P50", "SVC_P99");
		for (size_t i = 0; i < rows->n_procs && i < max_procs; i++)
			row_line(sb, &rows->procs[i], true);
	}
	if (!slow || !nt_topn_count(slow))
		return;
	nt_sb_printf(sb, "slowest requests:\n%-8s %-16s %-10s %-7s %10s %14s "
			 "%8s %8s %8s\n", "PID", "COMM", "DEVICE", "OP", "BYTES",
		     "SECTOR", "TOTAL", "QUEUE", "SERVICE");
	for (size_t i = 0; i < nt_topn_count(slow); i++)
		slow_line(sb, nt_topn_at(slow, i, NULL), dev_name, arg);
}

static const char *dev_name_cb(void *arg, uint32_t dev)
{
	return io_dev_cached_name(arg, dev);
}

void io_publish_report(struct io_state *st, struct io_rows *rows)
{
	size_t cap = 8192 + (rows->n_devs + (size_t)st->cfg->top_n * 2) * 160;
	struct io_report_ev *ev;
	struct nt_sb sb;

	nt_sb_init(&sb, cap - 1);
	io_format_report(&sb, rows, (size_t)st->cfg->top_n, &st->slow,
			 dev_name_cb, st);
	ev = calloc(1, sizeof(*ev) + sb.len + 1);
	if (!ev) {
		nt_sb_fini(&sb);
		return;
	}
	memcpy(ev + 1, nt_sb_str(&sb), sb.len);
	ev->hdr.type = (uint32_t)st->ev_report;
	ev->hdr.size = (uint32_t)(sizeof(*ev) + sb.len);
	ev->hdr.ts_ns = nt_clock_mono_ns();
	ev->hdr.pid = (uint32_t)getpid();
	ev->hdr.tid = ev->hdr.pid;
	snprintf(ev->hdr.comm, sizeof(ev->hdr.comm), "ntcore");
	ev->text.off = sizeof(*ev);
	ev->text.len = (uint32_t)sb.len;
	st->host->publish(st->inst, &ev->hdr);
	nt_sb_fini(&sb);
	free(ev);
}
