/* SPDX-License-Identifier: MIT */
/*
 * Prometheus sink: serves the core's metric registry over HTTP with
 * libmicrohttpd. Threads: the HTTP server runs in libmicrohttpd's own polling
 * thread and touches only host->metrics_visit and host->metric_* (the two
 * host entry points that plugin.h declares thread-safe); it never logs and
 * never runs on the event loop. A scrape renders the whole body during the
 * visit, which holds one family's lock at a time (each family whole, no torn
 * histogram), then the buffer is sent (http.c; the format in expo.h).
 *
 * The loop-side part is tiny: consume() counts alerts into
 * ntcore_prometheus_alerts_total so dashboards can graph them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ntcore/kit/cfg.h>
#include <ntcore/kit/log.h>

#include "prom.h"

#define PROM_DEFAULT_LISTEN "127.0.0.1:9478"

struct prom_config {
	const char *listen;
	const char *path;
	bool openmetrics;
	bool alerts;
	int64_t max_connections;
};

#define C struct prom_config
static const struct nt_cfg_key prom_config_keys[] = {
	NT_KEY_STR(C, listen, "127.0.0.1:9478",
		   "HOST:PORT, [IPV6]:PORT or :PORT (every address) to serve "
		   "on; port 9478 by default, 0 picks a free one"),
	NT_KEY_STR(C, path, "/metrics", "URL path of the metrics endpoint"),
	NT_KEY_BOOL(C, openmetrics, true,
		    "answer OpenMetrics 1.0.0 when the scraper's Accept header "
		    "prefers it (else always text format 0.0.4)"),
	NT_KEY_BOOL(C, alerts, true,
		    "count alert.* events into ntcore_prometheus_alerts_total"
		    "{alert,severity}"),
	NT_KEY_INT(C, max_connections, 16, 1, 1024,
		   "concurrent HTTP connections; more are refused"),
};
#undef C


static const char *const alert_labels[] = { "alert", "severity" };
static const double duration_buckets[] = { 0.0005, 0.001, 0.0025, 0.005,
					    0.01,   0.025, 0.05,   0.1,
					    0.25,   0.5,   1,      2.5 };

static const struct nt_metric_desc m_scrapes_desc = {
	.name = "ntcore_prometheus_scrapes_total",
	.help = "HTTP requests for the metrics path answered with a body.",
	.type = NT_METRIC_COUNTER,
};
static const struct nt_metric_desc m_errors_desc = {
	.name = "ntcore_prometheus_scrape_errors_total",
	.help = "Scrapes answered 500 (out of memory while rendering).",
	.type = NT_METRIC_COUNTER,
};
static const struct nt_metric_desc m_duration_desc = {
	.name = "ntcore_prometheus_scrape_duration_seconds",
	.help = "Time to render one scrape while holding the registry "
		"snapshot (excludes sending).",
	.type = NT_METRIC_HISTOGRAM,
	.buckets = duration_buckets,
	.n_buckets = NT_ARRAY_LEN(duration_buckets),
};
static const struct nt_metric_desc m_samples_desc = {
	.name = "ntcore_prometheus_scrape_samples",
	.help = "Samples (exposition lines with a value) in the last scrape.",
	.type = NT_METRIC_GAUGE,
};
static const struct nt_metric_desc m_bytes_desc = {
	.name = "ntcore_prometheus_scrape_response_bytes",
	.help = "Body size of the last scrape.",
	.type = NT_METRIC_GAUGE,
};
static const struct nt_metric_desc m_alerts_desc = {
	.name = "ntcore_prometheus_alerts_total",
	.help = "Alerts published by detectors, by alert event type and "
		"severity.",
	.type = NT_METRIC_COUNTER,
	.n_labels = 2,
	.label_names = alert_labels,
	.max_series = 1000,
};

/* ------------------------------------------------------------------ */
/* Ops (loop thread)                                                   */
/* ------------------------------------------------------------------ */

static int prom_init(struct nt_instance *inst, const struct nt_host *host,
		     const void *config, void **state)
{
	const struct prom_config *cfg = config;
	const char *why = NULL;
	struct prom *st;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	if (pl_parse(cfg->listen ? cfg->listen : PROM_DEFAULT_LISTEN,
		     &st->addr, &why) < 0) {
		free(st);
		return host->config_error(inst, "listen", "\"%s\": %s",
					  cfg->listen, why);
	}
	st->path = cfg->path ? cfg->path : "/metrics";
	if (st->path[0] != '/' || strchr(st->path, '?') ||
	    strcmp(st->path, "/") == 0) {
		free(st);
		return host->config_error(inst, "path",
					  "\"%s\": must start with '/', name "
					  "more than \"/\" and have no query",
					  cfg->path);
	}
	st->openmetrics = cfg->openmetrics;
	st->alerts = cfg->alerts;
	st->max_connections = (unsigned)cfg->max_connections;
	if (!host->metrics_visit) {
		nt_log_err(st, "the core offers no metrics_visit");
		free(st);
		return -ENOTSUP;
	}

	st->m_scrapes = host->metric_register(inst, &m_scrapes_desc);
	st->m_errors = host->metric_register(inst, &m_errors_desc);
	st->m_duration = host->metric_register(inst, &m_duration_desc);
	st->m_samples = host->metric_register(inst, &m_samples_desc);
	st->m_bytes = host->metric_register(inst, &m_bytes_desc);
	if (st->alerts) {
		st->m_alerts = host->metric_register(inst, &m_alerts_desc);
		if (host->subscribe(inst, "alert.*") < 0)
			nt_log_warn(st, "cannot subscribe to alert.*; alerts "
					"are not counted");
	}
	if (!st->m_scrapes || !st->m_errors || !st->m_duration ||
	    !st->m_samples || !st->m_bytes || (st->alerts && !st->m_alerts)) {
		nt_log_err(st, "cannot register self-metrics");
		free(st);
		return -ENOMEM;
	}
	*state = st;
	return 0;
}

static int prom_attach(void *state)
{
	struct prom *st = state;
	int fd;

	fd = pl_bind(&st->addr, st->bound, sizeof(st->bound));
	if (fd < 0) {
		nt_log_err(st, "%s", st->bound);
		return fd;
	}
	/* The listen socket is ours until MHD takes it; MHD closes it in
	 * MHD_stop_daemon. No MHD_USE_ERROR_LOG: its messages would come
	 * from its own thread, where host->log must not be called. */
	st->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO,
		0, NULL, NULL, prom_on_request, st,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_CONNECTION_LIMIT, st->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
		MHD_OPTION_END);
	if (!st->mhd) {
		close(fd);
		nt_log_err(st, "cannot start the HTTP server on %s",
			   st->bound);
		return -EIO;
	}
	/* Unlabelled self-metrics exist from the start (0, not absent). */
	{
		static const uint64_t zero[NT_ARRAY_LEN(duration_buckets) + 1];

		st->host->metric_add(st->m_scrapes, NULL, 0);
		st->host->metric_add(st->m_errors, NULL, 0);
		st->host->metric_hist_set(st->m_duration, NULL, zero, 0);
	}
	nt_log_info(st, "serving metrics on http://%s%s", st->bound,
		    st->path);
	return 0;
}

static int prom_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)state;
	(void)token;
	(void)budget;
	return 0;
}

static void prom_detach(void *state)
{
	struct prom *st = state;

	if (st->mhd) {
		MHD_stop_daemon(st->mhd); /* joins the thread, closes the fd */
		st->mhd = NULL;
	}
}

static void prom_fini(void *state)
{
	struct prom *st = state;

	if (!st)
		return;
	prom_detach(st);
	free(st);
}

static void prom_consume(void *state, const struct nt_event_hdr *ev,
			 const struct nt_schema *schema)
{
	static const char *const sev[] = { "info", "warning", "critical" };
	struct prom *st = state;
	const char *labels[2];
	uint32_t s;

	if (!st->alerts || !schema || !schema->name ||
	    strncmp(schema->name, "alert.", 6) != 0 ||
	    ev->size < sizeof(struct nt_event_hdr) + sizeof(uint32_t))
		return;
	memcpy(&s, (const char *)ev + sizeof(struct nt_event_hdr), sizeof(s));
	labels[0] = schema->name;
	labels[1] = s < NT_ARRAY_LEN(sev) ? sev[s] : "unknown";
	st->host->metric_add(st->m_alerts, labels, 1);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "prometheus",
	.kind = NT_KIND_SINK,
	.description = "Prometheus/OpenMetrics endpoint for the metric registry "
		       "(libmicrohttpd)",
	.version = "1.0.0",
	.config = prom_config_keys,
	.n_config = NT_ARRAY_LEN(prom_config_keys),
	.config_size = sizeof(struct prom_config),
	.init = prom_init,
	.attach = prom_attach,
	.poll = prom_poll,
	.detach = prom_detach,
	.fini = prom_fini,
	.consume = prom_consume,
};
