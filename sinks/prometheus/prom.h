/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus sink's state, shared by the descriptor and ops
 * (prometheus.c, loop thread) and the HTTP handler (http.c, libmicrohttpd's
 * thread). The HTTP side reads the configuration fields, which init sets
 * before the server starts and nothing changes while it runs, and touches
 * the host only through metrics_visit and metric_* (thread-safe).
 */
#ifndef NT_PROM_PROM_H
#define NT_PROM_PROM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include <ntcore/plugin.h>

#include "listen.h"

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

/* libmicrohttpd's access handler; cls is the struct prom. Serves
 * GET/HEAD of the metrics path, an index page at "/", 404 and 405 else. */
enum MHD_Result prom_on_request(void *cls, struct MHD_Connection *c,
				const char *url, const char *method,
				const char *version, const char *upload_data,
				size_t *upload_data_size, void **con_cls);

#endif /* NT_PROM_PROM_H */
