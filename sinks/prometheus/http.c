/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus sink's HTTP side, on libmicrohttpd's polling thread: one
 * request answered, the metrics path by a scrape (scrape.c) rendered whole
 * during the registry visit (each family under its own lock, no torn
 * histogram), then sent. Never logs and never touches the event loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ntcore/kit/clock.h>

#include "expo.h"
#include "prom.h"

static double now_s(void)
{
	return (double)nt_clock_mono_ns() * 1e-9;
}

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
	body = rc < 0 ? NULL : nt_sb_take(&s.out, &len);
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

enum MHD_Result prom_on_request(void *cls, struct MHD_Connection *c,
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
