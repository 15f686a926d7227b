/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus sink .so driven through its exported descriptor with a
 * stand-in host (a small registry of its own): real HTTP over loopback,
 * content negotiation, error pages, a port in use, IPv6, alert counting,
 * config errors. argv[1] is the path of prometheus.so.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ntcore/plugin.h>

static const char *so_path;
static const struct nt_plugin_desc *P;
static void *so;

/* ------------------------------------------------------------------ */
/* Stand-in host: a tiny registry                                      */
/* ------------------------------------------------------------------ */

#define MAXL 4
#define MAXS 64

struct fseries {
	char *labels[MAXL];
	double value;
	uint64_t buckets[17];
	uint64_t count;
	double sum;
};

struct nt_metric {
	struct nt_metric_desc desc;
	struct fseries s[MAXS];
	uint32_t n;
	uint64_t overflow;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nt_metric fams[64];
static uint32_t n_fams;
static char logbuf[8192];
static char errkey[64];
static int visits;

static void h_log(struct nt_instance *inst, int level, const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(logbuf);

	(void)inst;
	(void)level;
	va_start(ap, fmt);
	vsnprintf(logbuf + n, sizeof(logbuf) - n, fmt, ap);
	va_end(ap);
	n = strlen(logbuf);
	if (n + 1 < sizeof(logbuf)) {
		logbuf[n] = '\n';
		logbuf[n + 1] = '\0';
	}
}

static const char *h_name(const struct nt_instance *inst)
{
	(void)inst;
	return "prometheus.0";
}

static int h_config_error(struct nt_instance *inst, const char *key,
			  const char *fmt, ...)
{
	va_list ap;

	(void)inst;
	snprintf(errkey, sizeof(errkey), "%s", key ? key : "");
	va_start(ap, fmt);
	vsnprintf(logbuf, sizeof(logbuf), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int h_subscribe(struct nt_instance *inst, const char *pattern)
{
	(void)inst;
	(void)pattern;
	return 0;
}

static struct nt_metric *h_register(struct nt_instance *inst,
				    const struct nt_metric_desc *d)
{
	struct nt_metric *m;

	(void)inst;
	pthread_mutex_lock(&reg_lock);
	for (uint32_t i = 0; i < n_fams; i++)
		if (strcmp(fams[i].desc.name, d->name) == 0) {
			pthread_mutex_unlock(&reg_lock);
			return &fams[i];
		}
	m = &fams[n_fams++];
	memset(m, 0, sizeof(*m));
	m->desc = *d;
	pthread_mutex_unlock(&reg_lock);
	return m;
}

static struct fseries *find(struct nt_metric *m, const char *const *lv)
{
	for (uint32_t i = 0; i < m->n; i++) {
		uint32_t j;

		for (j = 0; j < m->desc.n_labels; j++)
			if (strcmp(m->s[i].labels[j], lv[j]))
				break;
		if (j == m->desc.n_labels)
			return &m->s[i];
	}
	if (m->n == MAXS || (m->desc.max_series && m->n >= m->desc.max_series)) {
		m->overflow++;
		return NULL;
	}
	for (uint32_t j = 0; j < m->desc.n_labels; j++)
		m->s[m->n].labels[j] = strdup(lv[j]);
	return &m->s[m->n++];
}

static void h_add(struct nt_metric *m, const char *const *lv, double d)
{
	struct fseries *s;

	pthread_mutex_lock(&reg_lock);
	if ((s = find(m, lv)))
		s->value += d;
	pthread_mutex_unlock(&reg_lock);
}

static void h_set(struct nt_metric *m, const char *const *lv, double v)
{
	struct fseries *s;

	pthread_mutex_lock(&reg_lock);
	if ((s = find(m, lv)))
		s->value = v;
	pthread_mutex_unlock(&reg_lock);
}

static void h_observe(struct nt_metric *m, const char *const *lv, double v)
{
	struct fseries *s;
	uint32_t b = 0;

	pthread_mutex_lock(&reg_lock);
	if ((s = find(m, lv))) {
		while (b < m->desc.n_buckets && v > m->desc.buckets[b])
			b++;
		s->buckets[b]++;
		s->count++;
		s->sum += v;
	}
	pthread_mutex_unlock(&reg_lock);
}

static void h_hist_set(struct nt_metric *m, const char *const *lv,
		       const uint64_t *counts, double sum)
{
	struct fseries *s;

	pthread_mutex_lock(&reg_lock);
	if ((s = find(m, lv))) {
		s->count = 0;
		for (uint32_t b = 0; b <= m->desc.n_buckets; b++) {
			s->buckets[b] = counts[b];
			s->count += counts[b];
		}
		s->sum = sum;
	}
	pthread_mutex_unlock(&reg_lock);
}

static int h_visit(struct nt_instance *inst, nt_metric_visit_fn fn, void *arg)
{
	struct nt_metric_series view[MAXS];

	(void)inst;
	pthread_mutex_lock(&reg_lock);
	visits++;
	for (uint32_t f = 0; f < n_fams; f++) {
		struct nt_metric *m = &fams[f];

		for (uint32_t i = 0; i < m->n; i++)
			view[i] = (struct nt_metric_series){
				.label_values = (const char *const *)m->s[i].labels,
				.value = m->s[i].value,
				.bucket_counts = m->s[i].buckets,
				.count = m->s[i].count,
				.sum = m->s[i].sum,
			};
		if (fn(arg, &m->desc, view, m->n, m->overflow))
			break;
	}
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

static const struct nt_host host = {
	.abi_major = NT_ABI_MAJOR,
	.abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = h_log,
	.instance_name = h_name,
	.config_error = h_config_error,
	.subscribe = h_subscribe,
	.metric_register = h_register,
	.metric_add = h_add,
	.metric_set = h_set,
	.metric_observe = h_observe,
	.metric_hist_set = h_hist_set,
	.metrics_visit = h_visit,
};

static void reg_reset(void)
{
	pthread_mutex_lock(&reg_lock);
	for (uint32_t f = 0; f < n_fams; f++)
		for (uint32_t i = 0; i < fams[f].n; i++)
			for (uint32_t j = 0; j < fams[f].desc.n_labels; j++)
				free(fams[f].s[i].labels[j]);
	n_fams = 0;
	visits = 0;
	pthread_mutex_unlock(&reg_lock);
	logbuf[0] = '\0';
	errkey[0] = '\0';
}

/* ------------------------------------------------------------------ */
/* Config built from the plugin's own schema, as the core does         */
/* ------------------------------------------------------------------ */

struct kv {
	const char *key, *val; /* val: string, "true"/"false", or a number */
};

static void *make_config(const struct kv *kv, size_t n)
{
	char *cfg = calloc(1, P->config_size);

	for (uint32_t k = 0; k < P->n_config; k++) {
		const struct nt_cfg_key *c = &P->config[k];
		const char *v = c->def;
		int quoted = 1;

		for (size_t i = 0; i < n; i++)
			if (strcmp(kv[i].key, c->key) == 0) {
				v = kv[i].val;
				quoted = 0;
			}
		ck_assert_ptr_nonnull(v);
		switch (c->type) {
		case NT_CFG_BOOL:
			*(bool *)(cfg + c->offset) = strcmp(v, "true") == 0;
			break;
		case NT_CFG_INT:
			*(int64_t *)(cfg + c->offset) = strtoll(v, NULL, 10);
			break;
		case NT_CFG_FLOAT:
			*(double *)(cfg + c->offset) = strtod(v, NULL);
			break;
		case NT_CFG_STRING:
			if (quoted && v[0] == '"') {
				/* default as libconfig text: strip quotes */
				static char dq[8][256];
				static int slot;
				char *d = dq[slot++ % 8];

				snprintf(d, 256, "%s", v + 1);
				d[strlen(d) - 1] = '\0';
				v = d;
			}
			*(const char **)(cfg + c->offset) = v;
			break;
		default:
			ck_abort_msg("unexpected key type");
		}
	}
	return cfg;
}

/* ------------------------------------------------------------------ */
/* HTTP client                                                         */
/* ------------------------------------------------------------------ */

struct resp {
	int status;
	char *head; /* status line + headers */
	char *body;
	size_t body_len;
};

static int http(int family, unsigned port, const char *method,
		const char *path, const char *accept, struct resp *r)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	char req[1024], *all = NULL, *sep;
	size_t len = 0, cap = 0;
	int fd = socket(family, SOCK_STREAM, 0);

	memset(r, 0, sizeof(*r));
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (void *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (void *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
		 "%s%s%s\r\n",
		 method, path, accept ? "Accept: " : "", accept ? accept : "",
		 accept ? "\r\n" : "");
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	for (;;) {
		ssize_t n;

		if (cap - len < 65536) {
			cap = cap ? cap * 2 : 131072;
			all = realloc(all, cap);
		}
		n = read(fd, all + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	all[len] = '\0';
	sep = strstr(all, "\r\n\r\n");
	ck_assert_ptr_nonnull(sep);
	*sep = '\0';
	r->head = all;
	r->body = sep + 4;
	r->body_len = len - (size_t)(r->body - all);
	ck_assert_int_eq(sscanf(all, "HTTP/1.1 %d", &r->status), 1);
	return 0;
}

static void resp_free(struct resp *r)
{
	free(r->head);
}

/* ------------------------------------------------------------------ */
/* Instance lifecycle                                                  */
/* ------------------------------------------------------------------ */

struct inst {
	void *cfg;
	void *state;
	unsigned port;
};

static int start(struct inst *in, const struct kv *kv, size_t n)
{
	int rc;
	const char *p;

	memset(in, 0, sizeof(*in));
	in->cfg = make_config(kv, n);
	rc = P->init((struct nt_instance *)in, &host, in->cfg, &in->state);
	if (rc)
		return rc;
	rc = P->attach(in->state);
	if (rc)
		return rc;
	p = strstr(logbuf, "serving metrics on http://");
	ck_assert_ptr_nonnull(p);
	p = strstr(p, "]:") ? strstr(p, "]:") + 2 : strrchr(p, ':') + 1;
	in->port = (unsigned)strtoul(p, NULL, 10);
	ck_assert_uint_gt(in->port, 0);
	return 0;
}

static void stop(struct inst *in)
{
	if (in->state) {
		P->detach(in->state);
		P->fini(in->state);
	}
	free(in->cfg);
	in->state = NULL;
	in->cfg = NULL;
}

static const char *const l_dev[] = { "dev" };
static const double bnd[] = { 0.001, 0.01 };
static const struct nt_metric_desc d_bytes = {
	.name = "ntcore_test_bytes_total", .help = "Bytes moved.",
	.type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = l_dev,
	.max_series = 2,
};
static const struct nt_metric_desc d_lat = {
	.name = "ntcore_test_latency_seconds", .help = "Latency.",
	.type = NT_METRIC_HISTOGRAM, .buckets = bnd, .n_buckets = 2,
};

static void populate(void)
{
	struct nt_metric *b = h_register(NULL, &d_bytes),
			 *l = h_register(NULL, &d_lat);
	const char *v1[] = { "8:0" }, *v2[] = { "a\"b" }, *v3[] = { "x" };

	h_add(b, v1, 4096);
	h_add(b, v2, 1);
	h_add(b, v3, 7); /* third label set: overflow */
	h_observe(l, NULL, 0.0005);
	h_observe(l, NULL, 0.005);
	h_observe(l, NULL, 5);
}

/* ------------------------------------------------------------------ */
/* tests                                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_descriptor)
{
	ck_assert_uint_eq(P->abi_major, NT_ABI_MAJOR);
	ck_assert_uint_eq(P->size, sizeof(struct nt_plugin_desc));
	ck_assert_str_eq(P->name, "prometheus");
	ck_assert_uint_eq(P->kind, NT_KIND_SINK);
	ck_assert_ptr_nonnull(P->consume);
	/* Only the descriptor is exported. */
	ck_assert_ptr_null(dlsym(so, "pe_scrape_visit"));
	ck_assert_ptr_null(dlsym(so, "pl_bind"));
}
END_TEST

START_TEST(test_scrape_text)
{
	struct inst in;
	struct resp r;
	const struct kv kv[] = { { "listen", "127.0.0.1:0" } };

	reg_reset();
	ck_assert_int_eq(start(&in, kv, 1), 0);
	populate();

	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/metrics", NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strcasestr(
		r.head, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
	ck_assert_ptr_nonnull(strstr(r.body,
		"# HELP ntcore_test_bytes_total Bytes moved.\n"
		"# TYPE ntcore_test_bytes_total counter\n"
		"ntcore_test_bytes_total{dev=\"8:0\"} 4096\n"
		"ntcore_test_bytes_total{dev=\"a\\\"b\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(r.body,
		"ntcore_test_latency_seconds_bucket{le=\"0.001\"} 1\n"
		"ntcore_test_latency_seconds_bucket{le=\"0.01\"} 2\n"
		"ntcore_test_latency_seconds_bucket{le=\"+Inf\"} 3\n"
		"ntcore_test_latency_seconds_sum 5.0055\n"
		"ntcore_test_latency_seconds_count 3\n"));
	ck_assert_ptr_nonnull(strstr(r.body,
		"ntcore_metric_series_overflow_total{metric=\"ntcore_test_bytes_total\"} 1\n"));
	/* The sink's own counter exists from attach on and counts after
	 * each scrape. */
	ck_assert_ptr_nonnull(strstr(r.body, "ntcore_prometheus_scrapes_total 0\n"));
	resp_free(&r);

	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/metrics", NULL, &r), 0);
	ck_assert_ptr_nonnull(strstr(r.body, "ntcore_prometheus_scrapes_total 1\n"));
	ck_assert_ptr_nonnull(
		strstr(r.body, "ntcore_prometheus_scrape_duration_seconds_count 1\n"));
	ck_assert_ptr_null(strstr(r.body, "# EOF"));
	resp_free(&r);

	/* HEAD: headers only. */
	ck_assert_int_eq(http(AF_INET, in.port, "HEAD", "/metrics", NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body_len, 0);
	resp_free(&r);
	stop(&in);
}
END_TEST

START_TEST(test_scrape_openmetrics)
{
	const char *prom = "application/openmetrics-text;version=1.0.0,"
			   "application/openmetrics-text;version=0.0.1;q=0.75,"
			   "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
	struct inst in;
	struct resp r;
	const struct kv kv[] = { { "listen", "127.0.0.1:0" } };
	const struct kv kv_off[] = { { "listen", "127.0.0.1:0" },
				     { "openmetrics", "false" } };

	reg_reset();
	ck_assert_int_eq(start(&in, kv, 1), 0);
	populate();
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/metrics", prom, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strcasestr(
		r.head, "Content-Type: application/openmetrics-text; "
			"version=1.0.0; charset=utf-8"));
	ck_assert_ptr_nonnull(strstr(r.body,
		"# TYPE ntcore_test_bytes counter\n"
		"ntcore_test_bytes_total{dev=\"8:0\"} 4096\n"));
	ck_assert_ptr_nonnull(strstr(r.body,
		"ntcore_test_latency_seconds_bucket{le=\"0.001\"} 1\n"));
	ck_assert_uint_ge(r.body_len, 6);
	ck_assert_str_eq(r.body + r.body_len - 6, "# EOF\n");
	resp_free(&r);
	stop(&in);

	reg_reset();
	ck_assert_int_eq(start(&in, kv_off, 2), 0);
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/metrics", prom, &r), 0);
	ck_assert_ptr_nonnull(strcasestr(r.head, "version=0.0.4"));
	ck_assert_ptr_null(strstr(r.body, "# EOF"));
	resp_free(&r);
	stop(&in);
}
END_TEST

START_TEST(test_other_pages)
{
	struct inst in;
	struct resp r;
	const struct kv kv[] = { { "listen", "127.0.0.1:0" },
				 { "path", "/prom" } };

	reg_reset();
	ck_assert_int_eq(start(&in, kv, 2), 0);
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/metrics", NULL, &r), 0);
	ck_assert_int_eq(r.status, 404);
	resp_free(&r);
	ck_assert_int_eq(http(AF_INET, in.port, "POST", "/prom", NULL, &r), 0);
	ck_assert_int_eq(r.status, 405);
	ck_assert_ptr_nonnull(strcasestr(r.head, "Allow: GET, HEAD"));
	resp_free(&r);
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/", NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "href=\"/prom\""));
	resp_free(&r);
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/prom", NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
	stop(&in);
	/* Detached: nothing listens any more. */
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/prom", NULL, &r),
			 -ECONNREFUSED);
}
END_TEST

START_TEST(test_port_in_use)
{
	struct inst a, b;
	char listen[64], want[128];
	struct kv kv[] = { { "listen", "127.0.0.1:0" } };
	int rc;

	reg_reset();
	ck_assert_int_eq(start(&a, kv, 1), 0);
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", a.port);
	kv[0].val = listen;
	logbuf[0] = '\0';
	memset(&b, 0, sizeof(b));
	b.cfg = make_config(kv, 1);
	ck_assert_int_eq(P->init((struct nt_instance *)&b, &host, b.cfg,
				 &b.state), 0);
	rc = P->attach(b.state);
	ck_assert_int_eq(rc, -EADDRINUSE);
	snprintf(want, sizeof(want),
		 "cannot listen on 127.0.0.1:%u: address already in use", a.port);
	ck_assert_msg(strstr(logbuf, want), "log was: %s", logbuf);
	P->fini(b.state);
	free(b.cfg);
	stop(&a);
}
END_TEST

START_TEST(test_ipv6)
{
	struct inst in;
	struct resp r;
	const struct kv kv[] = { { "listen", "[::1]:0" } };
	int probe = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };

	/* Hosts without IPv6 loopback cannot run this one. */
	if (probe < 0 || bind(probe, (struct sockaddr *)&a6, sizeof(a6)) < 0) {
		if (probe >= 0)
			close(probe);
		fprintf(stderr, "test_ipv6: no ::1 on this host\n");
		return;
	}
	close(probe);
	reg_reset();
	ck_assert_int_eq(start(&in, kv, 1), 0);
	ck_assert_ptr_nonnull(strstr(logbuf, "http://[::1]:"));
	populate();
	ck_assert_int_eq(http(AF_INET6, in.port, "GET", "/metrics", NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "ntcore_test_bytes_total{dev=\"8:0\"} 4096\n"));
	resp_free(&r);
	stop(&in);
}
END_TEST

START_TEST(test_config_errors)
{
	struct inst in;
	const struct kv bad_listen[] = { { "listen", "9478" } };
	const struct kv bad_v6[] = { { "listen", "::1:9478" } };
	const struct kv bad_path[] = { { "listen", "127.0.0.1:0" },
				       { "path", "metrics" } };

	reg_reset();
	ck_assert_int_eq(start(&in, bad_listen, 1), -EINVAL);
	ck_assert_str_eq(errkey, "listen");
	ck_assert_ptr_nonnull(strstr(logbuf, "\"9478\": missing port"));
	free(in.cfg);
	ck_assert_int_eq(start(&in, bad_v6, 1), -EINVAL);
	ck_assert_ptr_nonnull(strstr(logbuf, "brackets"));
	free(in.cfg);
	ck_assert_int_eq(start(&in, bad_path, 2), -EINVAL);
	ck_assert_str_eq(errkey, "path");
	free(in.cfg);
}
END_TEST

START_TEST(test_alerts_counted)
{
	static const struct nt_schema alert = { .name = "alert.cuda_memleak" };
	static const struct nt_schema other = { .name = "sched.switch" };
	struct {
		struct nt_event_hdr hdr;
		uint32_t severity, pid;
	} ev = { .hdr = { .size = sizeof(ev) }, .severity = NT_SEV_CRITICAL };
	struct inst in;
	struct resp r;
	const struct kv kv[] = { { "listen", "127.0.0.1:0" } };

	reg_reset();
	ck_assert_int_eq(start(&in, kv, 1), 0);
	P->consume(in.state, &ev.hdr, &alert);
	P->consume(in.state, &ev.hdr, &alert);
	P->consume(in.state, &ev.hdr, &other);
	ev.severity = NT_SEV_WARNING;
	P->consume(in.state, &ev.hdr, &alert);
	ck_assert_int_eq(http(AF_INET, in.port, "GET", "/metrics", NULL, &r), 0);
	ck_assert_ptr_nonnull(strstr(r.body,
		"ntcore_prometheus_alerts_total{alert=\"alert.cuda_memleak\","
		"severity=\"critical\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(r.body,
		"ntcore_prometheus_alerts_total{alert=\"alert.cuda_memleak\","
		"severity=\"warning\"} 1\n"));
	ck_assert_ptr_null(strstr(r.body, "sched.switch"));
	resp_free(&r);
	stop(&in);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s = suite_create("prometheus-http");
	TCase *t = tcase_create("http");
	SRunner *r;
	int failed;

	if (argc < 2) {
		fprintf(stderr, "usage: %s path/to/prometheus.so\n", argv[0]);
		return 2;
	}
	so_path = argv[1];
	so = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		fprintf(stderr, "dlopen %s: %s\n", so_path, dlerror());
		return 1;
	}
	P = dlsym(so, NT_PLUGIN_SYMBOL);
	if (!P) {
		fprintf(stderr, "%s: no %s\n", so_path, NT_PLUGIN_SYMBOL);
		return 1;
	}
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_descriptor);
	tcase_add_test(t, test_scrape_text);
	tcase_add_test(t, test_scrape_openmetrics);
	tcase_add_test(t, test_other_pages);
	tcase_add_test(t, test_port_in_use);
	tcase_add_test(t, test_ipv6);
	tcase_add_test(t, test_config_errors);
	tcase_add_test(t, test_alerts_counted);
	suite_add_tcase(s, t);
	r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	reg_reset();
	dlclose(so);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
