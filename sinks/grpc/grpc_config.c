/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's config beyond its schema (grpc.c): the checks bounds
 * cannot express (endpoint syntax, TLS contradictions, ordered pairs,
 * resource attributes), and what init derives from it: the gRPC target,
 * the CA roots, the compression, the resource's identity.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/compression.h>

#include "grpc_state.h"

#define SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"

/* The TLS half of gs_config_check: the endpoint's scheme against tls and
 * ca_file. */
static int check_tls(struct nt_instance *inst, const struct nt_host *host,
		     const struct grpc_cfg *cfg, int scheme_tls, bool *tls)
{
	if (scheme_tls == 0 && cfg->tls)
		return host->config_error(inst, "tls",
					  "tls = true contradicts the http:// endpoint (use https://)");
	*tls = cfg->tls || scheme_tls == 1;
	if (cfg->ca_file && *cfg->ca_file && !*tls)
		return host->config_error(inst, "ca_file",
					  "ca_file is set but TLS is off (set tls = true or use an https:// endpoint)");
	return 0;
}

int gs_config_check(struct nt_instance *inst, const struct nt_host *host,
		    const struct grpc_cfg *cfg, bool *tls)
{
	char target[512], err[256];
	int scheme_tls;

	if (gs_parse_endpoint(cfg->endpoint, target, sizeof(target), &scheme_tls, err,
			      sizeof(err)) < 0)
		return host->config_error(inst, "endpoint", "\"%s\": %s", cfg->endpoint, err);
	if (check_tls(inst, host, cfg, scheme_tls, tls) < 0)
		return -EINVAL;
	if (cfg->retry_initial_ms > cfg->retry_max_ms)
		return host->config_error(inst, "retry_initial_ms",
					  "retry_initial_ms (%" PRId64 ") exceeds retry_max_ms (%" PRId64 ")",
					  cfg->retry_initial_ms, cfg->retry_max_ms);
	if (cfg->batch_size > cfg->queue_size)
		return host->config_error(inst, "batch_size",
					  "batch_size (%" PRId64 ") exceeds queue_size (%" PRId64 ")",
					  cfg->batch_size, cfg->queue_size);
	for (uint32_t i = 0; i < cfg->resource_attributes.n; i++) {
		const char *kv = cfg->resource_attributes.v[i];
		const char *eq = strchr(kv, '=');

		if (!eq || eq == kv)
			return host->config_error(inst, "resource_attributes",
						  "\"%s\" is not \"key=value\"", kv);
	}
	if (!cfg->service_name || !*cfg->service_name)
		return host->config_error(inst, "service_name", "must not be empty");
	return 0;
}

/* A PEM file of at most `max` bytes, NUL-terminated; NULL and *err set
 * (a positive errno) when it cannot be read. */
static char *read_pem(const char *path, size_t max, int *err)
{
	char *buf = malloc(max + 1);
	ssize_t n;

	if (!buf) {
		*err = ENOMEM;
		return NULL;
	}
	n = nt_file_read(path, buf, max + 1);
	if (n < 0) {
		*err = (int)-n;
		free(buf);
		return NULL;
	}
	return buf;
}

/* The CA roots TLS verifies the collector with: ca_file, else the system
 * roots as Debian's ca-certificates lays them out, else (NULL) gRPC's own. */
static int load_roots(struct gs *s)
{
	const char *path = s->cfg->ca_file;
	int e = 0;

	if (!path || !*path) {
		s->pem_roots = read_pem(SYSTEM_ROOTS, 16 << 20, &e);
		return 0;
	}
	s->pem_roots = read_pem(path, 4 << 20, &e);
	if (!s->pem_roots)
		return s->host->config_error(s->inst, "ca_file", "cannot read \"%s\": %s",
					     path, strerror(e));
	if (!strstr(s->pem_roots, "-----BEGIN CERTIFICATE-----"))
		return s->host->config_error(s->inst, "ca_file",
					     "\"%s\" holds no PEM certificate", path);
	return 0;
}

static int compression_of(const char *name)
{
	if (strcmp(name, "gzip") == 0)
		return GRPC_COMPRESS_GZIP;
	if (strcmp(name, "deflate") == 0)
		return GRPC_COMPRESS_DEFLATE;
	return GRPC_COMPRESS_NONE;
}

int gs_config_apply(struct gs *s)
{
	const struct grpc_cfg *cfg = s->cfg;
	char err[256];
	int scheme_tls;

	gs_parse_endpoint(cfg->endpoint, s->target, sizeof(s->target), &scheme_tls, err,
			  sizeof(err));
	if (s->tls && load_roots(s) < 0)
		return -EINVAL;
	s->compression = compression_of(cfg->compression);
	if (gethostname(s->hostname, sizeof(s->hostname) - 1) < 0)
		snprintf(s->hostname, sizeof(s->hostname), "unknown");
	if (cfg->instance_id && *cfg->instance_id)
		snprintf(s->instance_id, sizeof(s->instance_id), "%s", cfg->instance_id);
	else
		snprintf(s->instance_id, sizeof(s->instance_id), "%s:%d", s->hostname,
			 (int)getpid());
	s->start_wall_ns = nt_clock_wall_ns();
	return 0;
}
