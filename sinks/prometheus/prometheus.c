/* SPDX-License-Identifier: MIT */
/*
 * Prometheus sink: serves the core's metric registry over HTTP with
 * libmicrohttpd. Threads: the HTTP server runs in libmicrohttpd's own polling
 * thread and touches only host->metrics_visit and host->metric_* (the two
 * host entry points that plugin.h declares thread-safe); it never logs and
 * never runs on the event loop. A scrape renders the whole body during the
 * visit, which holds one family's lock at a time (each family whole, no torn
 * histogram), then the buffer is sent.
 *
 * The loop-side part is tiny: consume() counts alerts into
 * ntcore_prometheus_alerts_total so dashboards can graph them.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include <ntcore/plugin.h>

#include "expo.h"
#include "listen.h"

#define PROM_DEFAULT_LISTEN "127.0.0.1:9478"

struct prom_config {
	const char *listen;
	const char *path;
	bool openmetrics;
	bool alerts;
	int64_t max_connections;
};

static const struct nt_cfg_key prom_config_keys[] = {
	{ .key = "listen", .type = NT_CFG_STRING,
	  .offset = offsetof(struct prom_config, listen),
	  .def = "\"" PROM_DEFAULT_LISTEN "\"", .min = 1, .max = 0,
	  .desc = "HOST:PORT, [IPV6]:PORT or :PORT (every address) to serve on; "
		  "port 9478 by default, 0 picks a free one" },
	{ .key = "path", .type = NT_CFG_STRING,
	  .offset = offsetof(struct prom_config, path), .def = "\"/metrics\"",
	  .min = 1, .max = 0, .desc = "URL path of the metrics endpoint" },
	{ .key = "openmetrics", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct prom_config, openmetrics), .def = "true",
	  .min = 1, .max = 0,
	  .desc = "answer OpenMetrics 1.0.0 when the scraper's Accept header "
		  "prefers it (else always text format 0.0.4)" },
	{ .key = "alerts", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct prom_config, alerts), .def = "true",
	  .min = 1, .max = 0,
	  .desc = "count alert.* events into ntcore_prometheus_alerts_total"
		  "{alert,severity}" },
	{ .key = "max_connections", .type = NT_CFG_INT,
	  .offset = offsetof(struct prom_config, max_connections), .def = "16",
	  .min = 1, .max = 1024,
	  .desc = "concurrent HTTP connections; more are refused" },
};

struct prom {
	struct nt_instance *inst;
	const struct nt_host *host;
	struct pl_addr addr;
	const char *path;
	bool openmetrics;
	bool alerts;
	unsigned max_connections;
	struct MHD_Daemon *mhd;
	char bound[PL_HOST_MAX + 64];
	_Atomic size_t last_size; /* body size of the last scrape: buffer hint */

	struct nt_metric *m_scrapes, *m_errors, *m_duration, *m_samples,
		*m_bytes, *m_alerts;
};

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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ */
/* HTTP (libmicrohttpd's thread)                                       */
/* ------------------------------------------------------------------ */

static enum MHD_Result reply_static(struct MHD_Connection *c,
				    unsigned code, const char *ctype,
				    const char *body, const char *allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(body), (void *)body,
					    MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result serve_metrics(struct prom *st, struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);
	enum pe_format fmt = pe_negotiate(accept, st->openmetrics);
	size_t hint = atomic_load_explicit(&st->last_size, memory_order_relaxed);
	struct MHD_Response *r;
	struct pe_scrape s;
	enum MHD_Result ret;
	uint64_t samples;
	double t0, t1;
	size_t len;
	char *body;
	int rc;

	pe_scrape_init(&s, fmt, hint + hint / 8 + 4096);
	t0 = now_s();
	rc = st->host->metrics_visit(st->inst, pe_scrape_visit, &s);
	if (pe_scrape_finish(&s) < 0 && rc >= 0)
		rc = -ENOMEM;
	t1 = now_s();
	samples = s.n_samples;
	body = rc < 0 ? NULL : pe_buf_steal(&s.out, &len);
	pe_scrape_free(&s);
	if (!body) {
		st->host->metric_add(st->m_errors, NULL, 1);
		return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "text/plain; charset=utf-8",
				    "ntcore: rendering the metrics failed\n",
				    NULL);
	}
	atomic_store_explicit(&st->last_size, len, memory_order_relaxed);

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				fmt == PE_FMT_OPENMETRICS ?
					PE_CONTENT_TYPE_OPENMETRICS :
					PE_CONTENT_TYPE_TEXT);
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);

	/* After the visit: no family lock is held any more. */
	st->host->metric_add(st->m_scrapes, NULL, 1);
	st->host->metric_observe(st->m_duration, NULL, t1 - t0);
	st->host->metric_set(st->m_samples, NULL, (double)samples);
	st->host->metric_set(st->m_bytes, NULL, (double)len);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct prom *st = cls;
	static const char index_html[] =
		"<html><head><title>ntcore</title></head><body>"
		"<h1>ntcore</h1><p><a href=\"%s\">Metrics</a></p>"
		"</body></html>\n";

	(void)version;
	(void)upload_data;
	/* First call: headers only. Answering now would make MHD close the
	 * connection (the body, if any, is unread); answer on the next call,
	 * once the request is complete, so scrapers keep their connection. */
	if (!*con_cls) {
		*con_cls = st; /* any non-NULL marker */
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0; /* discard a body */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				    "text/plain; charset=utf-8",
				    "method not allowed\n", "GET, HEAD");
	if (strcmp(url, st->path) == 0)
		return serve_metrics(st, c);
	if (strcmp(url, "/") == 0) {
		char page[sizeof(index_html) + 512];
		struct MHD_Response *r;
		enum MHD_Result ret;
		int n = snprintf(page, sizeof(page), index_html, st->path);

		r = MHD_create_response_from_buffer((size_t)n, page,
						    MHD_RESPMEM_MUST_COPY);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/html; charset=utf-8");
		ret = MHD_queue_response(c, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		return ret;
	}
	return reply_static(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8",
			    "not found\n", NULL);
}

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
		free(st);
		host->log(inst, NT_LOG_ERROR, "the core offers no metrics_visit");
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
			host->log(inst, NT_LOG_WARN,
				  "cannot subscribe to alert.*; alerts are "
				  "not counted");
	}
	if (!st->m_scrapes || !st->m_errors || !st->m_duration ||
	    !st->m_samples || !st->m_bytes || (st->alerts && !st->m_alerts)) {
		host->log(inst, NT_LOG_ERROR, "cannot register self-metrics");
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
		st->host->log(st->inst, NT_LOG_ERROR, "%s", st->bound);
		return fd;
	}
	/* The listen socket is ours until MHD takes it; MHD closes it in
	 * MHD_stop_daemon. No MHD_USE_ERROR_LOG: its messages would come
	 * from its own thread, where host->log must not be called. */
	st->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO,
		0, NULL, NULL, on_request, st,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_CONNECTION_LIMIT, st->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
		MHD_OPTION_END);
	if (!st->mhd) {
		close(fd);
		st->host->log(st->inst, NT_LOG_ERROR,
			      "cannot start the HTTP server on %s", st->bound);
		return -EIO;
	}
	/* Unlabelled self-metrics exist from the start (0, not absent). */
	{
		static const uint64_t zero[NT_ARRAY_LEN(duration_buckets) + 1];

		st->host->metric_add(st->m_scrapes, NULL, 0);
		st->host->metric_add(st->m_errors, NULL, 0);
		st->host->metric_hist_set(st->m_duration, NULL, zero, 0);
	}
	st->host->log(st->inst, NT_LOG_INFO, "serving metrics on http://%s%s",
		      st->bound, st->path);
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
