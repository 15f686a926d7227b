/* SPDX-License-Identifier: MIT */
/* alert.anomaly records, names and units; see alert.h. */
#include "alert.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_util.h"
#include "ntcore/kit/log.h"

static const struct nt_field alert_fields[] = {
	NT_ALERT_FIELDS(struct an_alert_rec),
	NT_FIELD(struct an_alert_rec, kind, NT_F_VSTR, "",
		 "step, series, drift, joint or rule"),
	NT_FIELD(struct an_alert_rec, step, NT_F_U64, "count",
		 "training step of a step alert, else 0"),
	NT_FIELD(struct an_alert_rec, value, NT_F_F64, "",
		 "the anomalous value, in its series' unit"),
	NT_FIELD(struct an_alert_rec, baseline, NT_F_F64, "",
		 "its normal level"),
};

const struct nt_schema an_alert_schema = {
	.name = "alert.anomaly",
	.desc = "an anomaly in the metrics, a slow training step or a rule, with what moved",
	.fields = alert_fields,
	.n_fields = NT_ARRAY_LEN(alert_fields),
	.min_size = sizeof(struct an_alert_rec),
};

static struct an_alert_rec *build(const struct an_alert *al, int type)
{
	size_t ml = strlen(al->message), el = strlen(al->evidence);
	size_t kl = strlen(al->kind), size = sizeof(struct an_alert_rec) + ml + el + kl;
	struct an_alert_rec *r;
	char *p;

	if (size > UINT32_MAX || !(r = calloc(1, size)))
		return NULL;
	r->hdr.type = (uint32_t)type;
	r->hdr.size = (uint32_t)size;
	r->hdr.ts_ns = an_now_ns();
	r->hdr.pid = r->hdr.tid = al->pid;
	if (al->comm)
		memcpy(r->hdr.comm, al->comm, strnlen(al->comm, NT_COMM_LEN));
	r->severity = al->severity;
	r->subject_pid = al->pid;
	r->step = al->step;
	r->value = al->value;
	r->baseline = al->baseline;
	p = (char *)(r + 1);
	r->message = (struct nt_vstr){ (uint32_t)(p - (char *)r), (uint32_t)ml };
	memcpy(p, al->message, ml);
	p += ml;
	r->evidence = (struct nt_vstr){ (uint32_t)(p - (char *)r), (uint32_t)el };
	memcpy(p, al->evidence, el);
	p += el;
	r->kind = (struct nt_vstr){ (uint32_t)(p - (char *)r), (uint32_t)kl };
	memcpy(p, al->kind, kl);
	return r;
}

int an_alert_publish(struct an *a, const struct an_alert *al)
{
	struct an_alert_rec *r = build(al, a->alert_type);
	const char *lv[1] = { al->kind };
	int ret;

	if (!r) {
		a->host->count_drop(a->inst, "alert_oom", 1);
		return -ENOMEM;
	}
	ret = a->host->publish(a->inst, &r->hdr);
	free(r);
	a->host->metric_add(a->m_alerts, lv, 1);
	nt_log_warn(a, "%s", al->message);
	return ret;
}

int an_alert_publish_sb(struct an *a, struct an_alert *al, struct an_sb *msg,
			struct an_sb *ev)
{
	int rc;

	al->message = an_sb_str(msg);
	al->evidence = an_sb_str(ev);
	rc = an_alert_publish(a, al);
	an_sb_free(msg);
	an_sb_free(ev);
	return rc;
}

uint32_t an_severity(const char *word)
{
	if (word && strcmp(word, "critical") == 0)
		return NT_SEV_CRITICAL;
	if (word && strcmp(word, "info") == 0)
		return NT_SEV_INFO;
	return NT_SEV_WARNING;
}

/* Known families: how a person calls them. {label} is replaced by the
 * series' label (a comm through comm_names); an absent label and the space
 * before it are left out. */
static const struct {
	const char *family, *fmt;
} names[] = {
	{ "ntcore_io_process_service_seconds", "{comm} {op} latency" },
	{ "ntcore_io_process_queue_seconds", "{comm} {op} queue time" },
	{ "ntcore_io_process_requests_total", "{comm} {op} requests" },
	{ "ntcore_io_process_bytes_total", "{comm} {op} throughput" },
	{ "ntcore_io_service_seconds", "{device} {op} latency" },
	{ "ntcore_io_queue_seconds", "{device} {op} queue time" },
	{ "ntcore_io_requests_total", "{device} {op} requests" },
	{ "ntcore_io_bytes_total", "{device} {op} throughput" },
	{ "ntcore_io_small_requests_total", "{device} {op} small requests" },
	{ "ntcore_net_rx_bytes_total", "{comm} network receive" },
	{ "ntcore_net_tx_bytes_total", "{comm} network send" },
	{ "ntcore_net_rx_packets_total", "{comm} packets received" },
	{ "ntcore_net_tx_packets_total", "{comm} packets sent" },
	{ "ntcore_net_connections_opened_total", "{comm} new connections" },
	{ "ntcore_net_tcp_retransmits_total", "{comm} TCP retransmits" },
	{ "ntcore_sched_oncpu_seconds_total", "{comm} {tid} CPU time" },
	{ "ntcore_sched_offcpu_seconds_total", "{comm} off-CPU time" },
	{ "ntcore_sched_runqueue_wait_seconds_total", "{comm} run-queue wait" },
	{ "ntcore_sched_migrations_total", "pid {pid} CPU migrations" },
	{ "ntcore_sched_runqueue_latency_seconds", "pid {pid} run-queue latency" },
	{ "ntcore_mem_rss_bytes", "pid {pid} resident memory" },
	{ "ntcore_mem_page_faults_total", "pid {pid} page faults" },
	{ "ntcore_cuda_sync_seconds_total", "pid {pid} CUDA {kind} sync time" },
	{ "ntcore_cuda_copy_bytes_total", "pid {pid} {direction} copies" },
	{ "ntcore_cuda_memory_bytes", "pid {pid} GPU memory" },
	{ "ntcore_cuda_call_seconds", "{function} time" },
	{ "ntcore_cuda_gpu_busy_ratio", "GPU {gpu} busy" },
	{ "ntcore_python_call_seconds_total", "{function} time" },
	{ "ntcore_anomaly_step_seconds", "step time" },
};

const char *an_comm_name(const struct an *a, const char *comm, char *buf,
			 size_t len)
{
	const struct nt_strlist *l = &a->cfg->comm_names;

	for (uint32_t i = 0; i < l->n; i++) {
		const char *eq = strchr(l->v[i], '=');
		char pat[64];

		if (!eq || (size_t)(eq - l->v[i]) >= sizeof(pat))
			continue;
		memcpy(pat, l->v[i], (size_t)(eq - l->v[i]));
		pat[eq - l->v[i]] = '\0';
		if (fnmatch(pat, comm, 0) == 0) {
			snprintf(buf, len, "%s", eq + 1);
			return buf;
		}
	}
	snprintf(buf, len, "%s", comm);
	return buf;
}

/* Expands one {label} of fmt at *f into sb; advances *f past it. */
static void expand_label(const struct an *a, const struct an_series *s,
			 const char **f, struct an_sb *sb)
{
	const char *end = strchr(*f, '}');
	char label[32], cn[64];
	const char *v;

	if (!end || (size_t)(end - *f - 1) >= sizeof(label)) {
		an_sb_putn(sb, *f, 1);
		(*f)++;
		return;
	}
	memcpy(label, *f + 1, (size_t)(end - *f - 1));
	label[end - *f - 1] = '\0';
	*f = end + 1;
	v = an_series_label_by(s, label);
	if (!v || !*v) {
		an_sb_trim_space(sb);
		return;
	}
	if (strcmp(label, "comm") == 0)
		v = an_comm_name(a, v, cn, sizeof(cn));
	an_sb_puts(sb, v);
}

const char *an_series_name(const struct an *a, const struct an_series *s,
			   char *buf, size_t len)
{
	struct an_sb sb;
	const char *f = NULL;

	for (size_t i = 0; i < NT_ARRAY_LEN(names); i++)
		if (strcmp(names[i].family, s->family) == 0)
			f = names[i].fmt;
	if (!f)
		return an_series_id(s, buf, len);
	an_sb_init(&sb);
	while (*f) {
		if (*f == '{')
			expand_label(a, s, &f, &sb);
		else
			an_sb_putn(&sb, f++, 1);
	}
	snprintf(buf, len, "%s", an_sb_str(&sb));
	an_sb_free(&sb);
	return buf;
}

const char *an_series_id(const struct an_series *s, char *buf, size_t len)
{
	struct an_sb sb;

	an_sb_init(&sb);
	an_sb_puts(&sb, s->family);
	an_sb_puts(&sb, "{");
	for (uint32_t i = 0; i < s->n_vals; i++)
		an_sb_printf(&sb, "%s%s=\"%s\"", i ? "," : "", s->label_names[i],
			     an_series_label(s, i));
	an_sb_puts(&sb, "}");
	snprintf(buf, len, "%s", an_sb_str(&sb));
	an_sb_free(&sb);
	return buf;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

static const char *fmt_time(double v, char *buf, size_t len)
{
	double a = fabs(v);

	if (a >= 1.0 || a == 0.0)
		snprintf(buf, len, "%.3g s", v);
	else if (a >= 1e-3)
		snprintf(buf, len, "%.3g ms", v * 1e3);
	else
		snprintf(buf, len, "%.3g us", v * 1e6);
	return buf;
}

static const char *fmt_bytes(double v, const char *per, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (fabs(v) >= 1024.0 && u < 4) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.3g %s%s", v, unit[u], per);
	return buf;
}

const char *an_fmt_value(const char *family, uint32_t type, double v,
			 char *buf, size_t len)
{
	bool rate = type == NT_METRIC_COUNTER;

	if (ends_with(family, "_seconds_total") && rate)
		snprintf(buf, len, "%.3g s/s", v);
	else if (ends_with(family, "_seconds"))
		fmt_time(v, buf, len);
	else if (ends_with(family, "_bytes_total") && rate)
		fmt_bytes(v, "/s", buf, len);
	else if (ends_with(family, "_bytes"))
		fmt_bytes(v, "", buf, len);
	else
		snprintf(buf, len, fabs(v) >= 1000.0 && fabs(v) < 1e9 ? "%.0f%s" : "%.3g%s",
			 v, rate ? "/s" : "");
	return buf;
}

const char *an_fmt_ratio(double before, double after, char *buf, size_t len)
{
	double r;

	if (!(fabs(before) > 0.0)) {
		snprintf(buf, len, "from 0");
		return buf;
	}
	r = after / before;
	if (r >= 10.0 || r <= -10.0)
		snprintf(buf, len, "x%.0f", r);
	else
		snprintf(buf, len, "x%.2g", r);
	return buf;
}
