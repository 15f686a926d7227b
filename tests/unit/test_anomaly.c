/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the anomaly detector (plugins/anomaly): the extreme-value
 * fits, SPOT/DSPOT on the seeded labelled synthetic streams (the F1 bar and
 * no alert on anomaly-free streams), the multivariate check, the step
 * finder, the metric views against a stand-in registry, and the plugin
 * itself through its descriptor with a stand-in host: rules, slow steps
 * with their reason, Python steps, config errors.
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntcore/plugin.h"

#include "alert.h"
#include "an_util.h"
#include "anomaly.h"
#include "det.h"
#include "gpd.h"
#include "joint.h"
#include "period.h"
#include "score.h"
#include "spot.h"
#include "steps.h"
#include "synth.h"
#include "view.h"

#define SEC 1000000000ULL
#define MS 1000000ULL

/* Streams of each kind the F1 test runs (bench/anomaly.sh runs more). */
#define STREAMS 10

/* ================================================================== */
/* plumbing and fits                                                   */
/* ================================================================== */

START_TEST(test_map)
{
	struct an_map m;
	static int vals[5000];

	an_map_init(&m);
	for (int i = 0; i < 5000; i++)
		ck_assert_int_eq(an_map_put(&m, (uint64_t)i * 7919 + 1, &vals[i]), 0);
	for (int i = 0; i < 5000; i += 2)
		an_map_del(&m, (uint64_t)i * 7919 + 1);
	ck_assert_uint_eq(an_map_count(&m), 2500);
	for (int i = 0; i < 5000; i++)
		ck_assert_ptr_eq(an_map_get(&m, (uint64_t)i * 7919 + 1),
				 i % 2 ? &vals[i] : NULL);
	an_map_fini(&m);
}
END_TEST

START_TEST(test_gpd_quantile)
{
	struct gpd e = { 0.0, 1.0 }, h = { 0.5, 2.0 };

	/* exponential tail: t - sigma log(q n / nt) */
	ck_assert_double_eq_tol(gpd_quantile(&e, 0.0, 0.01, 100, 10), log(10.0), 1e-12);
	/* t + sigma/gamma ((q n/nt)^-gamma - 1) = 1 + 4 (0.01^-0.5 - 1) = 37 */
	ck_assert_double_eq_tol(gpd_quantile(&h, 1.0, 0.001, 1000, 100), 37.0, 1e-9);
	/* never below t */
	ck_assert_double_eq(gpd_quantile(&e, 5.0, 0.5, 20, 5), 5.0);
}
END_TEST

/* n GPD(gamma, sigma) draws by inversion. */
static float *gpd_draws(double gamma, double sigma, size_t n, uint64_t seed)
{
	struct syn_rng r = { seed };
	float *y = malloc(n * sizeof(*y));

	for (size_t i = 0; i < n; i++) {
		double u = syn_uniform(&r);

		y[i] = (float)(gamma == 0.0 ? -sigma * log(1.0 - u) :
			       sigma / gamma * (pow(1.0 - u, -gamma) - 1.0));
	}
	return y;
}

START_TEST(test_grimshaw_recovers)
{
	struct gpd g;
	double root = 0.0;
	float *y = gpd_draws(0.25, 2.0, 4000, 7);

	gpd_fit_grimshaw(y, 4000, &g, &root);
	ck_assert_msg(fabs(g.gamma - 0.25) < 0.06, "gamma %f", g.gamma);
	ck_assert_msg(fabs(g.sigma - 2.0) < 0.16, "sigma %f", g.sigma);
	ck_assert(root > 0.0);
	/* warm start from that root on a second sample: same answer as a
	 * cold fit */
	free(y);
	y = gpd_draws(0.25, 2.0, 4000, 8);
	{
		struct gpd cold;
		double r0 = 0.0, r1 = root;

		gpd_fit_grimshaw(y, 4000, &cold, &r0);
		gpd_fit_grimshaw(y, 4000, &g, &r1);
		ck_assert_double_eq_tol(g.gamma, cold.gamma, 1e-6);
		ck_assert_double_eq_tol(g.sigma, cold.sigma, 1e-6);
	}
	free(y);
	y = gpd_draws(0.0, 3.0, 4000, 9);
	root = 0.0;
	gpd_fit_grimshaw(y, 4000, &g, &root);
	ck_assert_msg(fabs(g.gamma) < 0.05, "gamma %f", g.gamma);
	ck_assert_msg(fabs(g.sigma - 3.0) < 0.2, "sigma %f", g.sigma);
	free(y);
}
END_TEST

START_TEST(test_moments)
{
	struct gpd g;
	float *y = gpd_draws(0.1, 1.0, 20000, 11);
	double s = 0, q = 0;

	for (int i = 0; i < 20000; i++) {
		s += y[i];
		q += (double)y[i] * y[i];
	}
	s /= 20000;
	gpd_fit_moments(s, q / 20000 - s * s, &g);
	ck_assert_msg(fabs(g.gamma - 0.1) < 0.05, "gamma %f", g.gamma);
	ck_assert_msg(fabs(g.sigma - 1.0) < 0.08, "sigma %f", g.sigma);
	free(y);
}
END_TEST

/* SPOT's promise: on the distribution it was calibrated on, about a
 * fraction q of values alarm. */
START_TEST(test_spot_rate)
{
	struct spot_par p = { .q = 1e-3, .level = 0.9, .cap = 64 };
	struct spot s;
	float peaks[64], *init = gpd_draws(0.0, 1.0, 2000, 3);
	struct syn_rng r = { 4 };
	int alarms = 0;

	spot_calibrate(&s, peaks, &p, init, 2000);
	ck_assert(s.t > 2.0f && s.t < 2.6f); /* the 0.9 quantile: ln 10 */
	for (int i = 0; i < 200000; i++) {
		double x = -log(1.0 - syn_uniform(&r));

		if (spot_alarm(&s, x))
			alarms++;
		else
			spot_add(&s, peaks, &p, x);
	}
	/* 200 expected; -ln(1e-3) = 6.9 is the true z_q */
	ck_assert_msg(alarms >= 120 && alarms <= 320, "%d alarms", alarms);
	ck_assert_msg(fabs(s.zq - 6.9) < 0.8, "zq %f", s.zq);
	free(init);
}
END_TEST

START_TEST(test_det_spike_and_shift)
{
	struct det_par p;
	struct det *d;
	struct syn_rng r = { 5 };
	struct det_out o;
	int alarms = 0, first = -1;

	det_par_default(&p);
	d = det_new(&p);
	for (int i = 0; i < 1500; i++) {
		double x = 50.0 + syn_normal(&r) + (i == 700 ? 20.0 : 0.0) +
			   (i >= 1000 ? 15.0 : 0.0);
		enum det_verdict v = det_update(d, &p, x, &o);

		if (i < 200)
			ck_assert_int_eq(v, DET_WARMUP);
		if (v == DET_SPIKE || v == DET_DRIFT) {
			alarms++;
			if (first < 0)
				first = i;
			if (i == 700)
				ck_assert_double_eq_tol(o.baseline, 50.0, 1.0);
		}
	}
	ck_assert_int_eq(first, 700);
	/* the spike, then the shift until it is taken as the new normal */
	ck_assert_msg(alarms >= 2 && alarms <= 1 + p.rebase_after + 2, "%d", alarms);
	ck_assert_double_eq_tol(det_baseline(d, &p), 65.0, 1.5);
	det_free(d);
}
END_TEST

/* ================================================================== */
/* the labelled synthetic streams                                      */
/* ================================================================== */

#define COOLDOWN 20
#define TOL 10
#define LEN 3000

static void run_kind(enum syn_kind k, int n, struct score *dspot,
		     struct score *naive)
{
	struct det_par p;
	uint32_t al[1024];

	det_par_default(&p);
	for (int j = 0; j < n; j++) {
		struct syn_stream s;
		long na;

		ck_assert_int_eq(syn_make(&s, k, LEN, 1000 + (uint64_t)j), 0);
		na = score_run_det(&p, &s, COOLDOWN, al, 1024);
		ck_assert(na >= 0 && na <= 1024);
		score_add(dspot, &s, al, (size_t)na, TOL);
		na = score_run_naive(&s, 3.0, 100, p.n_init, COOLDOWN, al, 1024);
		score_add(naive, &s, al, (size_t)(na > 1024 ? 1024 : na), TOL);
		syn_free(&s);
	}
}

START_TEST(test_synthetic_f1)
{
	struct score all = { 0 }, nall = { 0 };
	int n = STREAMS;

	printf("anomaly synthetic streams (%d per kind, %d values): DSPOT | mean+3sd\n",
	       n, LEN);
	for (int k = 0; k < SYN_N_KINDS; k++) {
		struct score d = { 0 }, nv = { 0 };

		run_kind((enum syn_kind)k, n, &d, &nv);
		printf("  %-15s anomalies %3lu found %3lu alerts %3lu  P %.3f R %.3f F1 %.3f"
		       " | alerts %4lu F1 %.3f\n", syn_kind_name((enum syn_kind)k),
		       (unsigned long)d.events, (unsigned long)d.detected,
		       (unsigned long)d.alerts, score_precision(&d), score_recall(&d),
		       score_f1(&d), (unsigned long)nv.alerts, score_f1(&nv));
		if (k >= SYN_N_ANOMALY)
			ck_assert_msg(d.alerts == 0, "%s: %lu alerts on an anomaly-free stream",
				      syn_kind_name((enum syn_kind)k),
				      (unsigned long)d.alerts);
		else
			ck_assert_msg(score_f1(&d) >= 0.8, "%s: F1 %.3f",
				      syn_kind_name((enum syn_kind)k), score_f1(&d));
		score_merge(&all, &d);
		score_merge(&nall, &nv);
	}
	printf("  overall F1 %.3f (P %.3f R %.3f) | mean+3sd F1 %.3f\n", score_f1(&all),
	       score_precision(&all), score_recall(&all), score_f1(&nall));
	ck_assert_msg(score_f1(&all) >= 0.8, "overall F1 %.3f", score_f1(&all));
	ck_assert(score_f1(&all) > score_f1(&nall));
}
END_TEST

START_TEST(test_synthetic_deterministic)
{
	struct syn_stream a, b;

	syn_make(&a, SYN_SEASONAL, LEN, 77);
	syn_make(&b, SYN_SEASONAL, LEN, 77);
	ck_assert_uint_eq(a.nev, b.nev);
	ck_assert_int_eq(memcmp(a.x, b.x, LEN * sizeof(double)), 0);
	ck_assert_int_eq(memcmp(a.ev, b.ev, sizeof(a.ev)), 0);
	for (uint32_t i = 0; i < a.nev; i++)
		ck_assert_uint_ge(a.ev[i].start, SYN_QUIET);
	syn_free(&a);
	syn_free(&b);
}
END_TEST

/* Eight related series shift together by 3.5 sd: no series alarms alone,
 * the combined score does; on the same streams without the shift, no
 * alarm at all. */
static int joint_run(bool shift, int *alone)
{
	struct det_par p, jp;
	struct det *d[8], *j;
	struct syn_rng r = { 21 };
	int found = -1;

	det_par_default(&p);
	jp = p;
	jp.drift_len = 0;
	p.drift_len = 0;
	for (int k = 0; k < 8; k++)
		d[k] = det_new(&p);
	j = det_new(&jp);
	*alone = 0;
	for (int i = 0; i < 3000; i++) {
		double z[8];
		struct det_out o;

		for (int k = 0; k < 8; k++) {
			double x = 100.0 + syn_normal(&r) +
				   (shift && i >= 2000 && i < 2030 ? 3.5 : 0.0);

			if (det_update(d[k], &p, x, &o) >= DET_SPIKE)
				(*alone)++;
			z[k] = o.z;
		}
		if (i >= (int)p.n_init &&
		    det_update(j, &jp, joint_score(z, 8), &o) == DET_SPIKE &&
		    found < 0)
			found = i;
	}
	for (int k = 0; k < 8; k++)
		det_free(d[k]);
	det_free(j);
	return found;
}

START_TEST(test_joint)
{
	int alone, at = joint_run(true, &alone);

	ck_assert_int_eq(alone, 0);
	ck_assert_msg(at >= 2000 && at < 2005, "joint alarm at %d", at);
	ck_assert_int_eq(joint_run(false, &alone), -1);
	ck_assert_int_eq(alone, 0);
	{
		double z[3] = { 1.0, 0.5, 0.0 };

		ck_assert_double_eq_tol(joint_score(z, 3), 0.5, 1e-12);
	}
}
END_TEST

/* ================================================================== */
/* the step finder                                                     */
/* ================================================================== */

/* A training step: embedding, 6 identical layers (3 kernels each, the
 * same symbols every layer), loss, 6 layers backward, optimizer; every
 * 10th step a logging kernel. Warm-up: 40 autotuning launches first. */
static size_t make_launches(uint64_t *out, size_t max, int steps)
{
	size_t n = 0;

	for (int i = 0; i < 40 && n < max; i++)
		out[n++] = 900 + (uint64_t)i;
	for (int s = 0; s < steps; s++) {
		out[n++] = 1; /* embedding */
		for (int l = 0; l < 6; l++) {
			out[n++] = 10;
			out[n++] = 11;
			out[n++] = 12;
		}
		out[n++] = 2; /* loss */
		out[n++] = 3; /* loss backward */
		for (int l = 0; l < 6; l++) {
			out[n++] = 20;
			out[n++] = 21;
		}
		if (s % 10 == 9)
			out[n++] = 50; /* logging */
		out[n++] = 4; /* optimizer */
	}
	return n;
}

START_TEST(test_period)
{
	static uint64_t seq[8192];
	size_t n = make_launches(seq, 8192, 100);
	struct period p;

	ck_assert_int_eq(period_find(seq, n, &p), 0);
	/* 1 + 18 + 2 + 12 + 1 = 34 launches a step; the logging step has 35,
	 * within the 5 % the anchors allow? no: 34 vs 35 is 3 %, yes */
	ck_assert_uint_eq(p.length, 34);
	ck_assert(p.anchor == 1 || p.anchor == 2 || p.anchor == 3 || p.anchor == 4);
	ck_assert_uint_eq(p.steps, 100);
	ck_assert_uint_ge(p.regular, 4);
	/* a symbol-less stream (every launch the same kernel) has no step */
	for (size_t i = 0; i < 1000; i++)
		seq[i] = 7;
	ck_assert_int_eq(period_find(seq, 1000, &p), -1);
}
END_TEST

START_TEST(test_fmt)
{
	char b[64];

	ck_assert_str_eq(an_fmt_count(12400, b, sizeof(b)), "12,400");
	ck_assert_str_eq(an_fmt_count(7, b, sizeof(b)), "7");
	ck_assert_str_eq(an_fmt_count(1234567, b, sizeof(b)), "1,234,567");
	ck_assert_str_eq(an_fmt_ratio(0.4e-3, 2.4e-3, b, sizeof(b)), "x6");
	ck_assert_str_eq(an_fmt_ratio(2.0, 3.0, b, sizeof(b)), "x1.5");
	ck_assert_str_eq(an_fmt_ratio(0.0, 3.0, b, sizeof(b)), "from 0");
	ck_assert_str_eq(an_fmt_value("ntcore_io_service_seconds", NT_METRIC_HISTOGRAM,
				      0.0024, b, sizeof(b)), "2.4 ms");
	ck_assert_str_eq(an_fmt_value("ntcore_net_rx_bytes_total", NT_METRIC_COUNTER,
				      3.0 * 1048576, b, sizeof(b)), "3 MiB/s");
	ck_assert_str_eq(an_fmt_value("ntcore_net_connections_opened_total",
				      NT_METRIC_COUNTER, 250, b, sizeof(b)), "250/s");
}
END_TEST

/* ================================================================== */
/* a stand-in registry and host                                        */
/* ================================================================== */

#define MAX_FAM 16
#define MAX_SER 16
#define MAX_PUB 256

struct fser {
	const char *lv[6];
	double value, sum;
	uint64_t count;
	uint64_t buckets[2];
};

struct ffam {
	struct nt_metric_desc d;
	struct fser s[MAX_SER];
	uint32_t n;
};

struct fake {
	struct ffam fam[MAX_FAM];
	int nfam;
	const struct nt_schema *schemas[32];
	int nschemas;
	char subs[32][64];
	int nsubs;
	struct nt_event_hdr *pub[MAX_PUB];
	int npub;
	int config_errors;
	char last_error[256];
	uint64_t timer_ms;
};

static struct fake F;

static struct ffam *fam_add(const char *name, uint32_t type, uint32_t nl,
			    const char *const *labels)
{
	struct ffam *f = &F.fam[F.nfam++];

	f->d = (struct nt_metric_desc){ .name = name, .type = type,
					.n_labels = nl, .label_names = labels,
					.n_buckets = 1 };
	return f;
}

static struct fser *ser_add(struct ffam *f, const char *a, const char *b,
			    const char *c, const char *d)
{
	struct fser *s = &f->s[f->n++];

	s->lv[0] = a;
	s->lv[1] = b;
	s->lv[2] = c;
	s->lv[3] = d;
	return s;
}

static void observe(struct fser *s, double v, uint64_t n)
{
	s->sum += v * (double)n;
	s->count += n;
	s->buckets[0] += n;
}

static void h_log(struct nt_instance *i, int level, const char *fmt, ...)
{
	va_list ap;

	(void)i;
	if (!getenv("TEST_VERBOSE") && level > NT_LOG_ERROR)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *h_name(const struct nt_instance *i)
{
	(void)i;
	return "anomaly.0";
}

static int h_config_error(struct nt_instance *i, const char *key,
			  const char *fmt, ...)
{
	va_list ap;
	int n;

	(void)i;
	n = snprintf(F.last_error, sizeof(F.last_error), "%s: ", key ? key : "");
	va_start(ap, fmt);
	vsnprintf(F.last_error + n, sizeof(F.last_error) - (size_t)n, fmt, ap);
	va_end(ap);
	F.config_errors++;
	return -EINVAL;
}

static int h_register(struct nt_instance *i, const struct nt_schema *s)
{
	(void)i;
	for (int k = 0; k < F.nschemas; k++)
		if (strcmp(F.schemas[k]->name, s->name) == 0)
			return k + 100;
	F.schemas[F.nschemas++] = s;
	return F.nschemas - 1 + 100;
}

static int h_publish(struct nt_instance *i, const struct nt_event_hdr *ev)
{
	(void)i;
	if (F.npub < MAX_PUB) {
		F.pub[F.npub] = malloc(ev->size);
		memcpy(F.pub[F.npub++], ev, ev->size);
	}
	return 1;
}

static int h_subscribe(struct nt_instance *i, const char *p)
{
	(void)i;
	snprintf(F.subs[F.nsubs++], 64, "%s", p);
	return 0;
}

static int dummy;
static struct nt_metric *h_metric_register(struct nt_instance *i,
					   const struct nt_metric_desc *d)
{
	(void)i;
	ck_assert_msg(strncmp(d->name, "ntcore_anomaly_", 15) == 0, "%s", d->name);
	return (struct nt_metric *)&dummy;
}

static void h_metric_v(struct nt_metric *m, const char *const *lv, double v)
{
	(void)m;
	(void)lv;
	(void)v;
}

static void h_metric_remove(struct nt_metric *m, const char *const *lv)
{
	(void)m;
	(void)lv;
}

static int h_visit(struct nt_instance *i, nt_metric_visit_fn fn, void *arg)
{
	(void)i;
	for (int k = 0; k < F.nfam; k++) {
		struct ffam *f = &F.fam[k];
		struct nt_metric_series ss[MAX_SER];

		for (uint32_t j = 0; j < f->n; j++)
			ss[j] = (struct nt_metric_series){
				.label_values = f->s[j].lv, .value = f->s[j].value,
				.bucket_counts = f->s[j].buckets,
				.count = f->s[j].count, .sum = f->s[j].sum };
		if (fn(arg, &f->d, ss, f->n, 0))
			break;
	}
	return 0;
}

static int h_add_timer(struct nt_instance *i, uint64_t ms, uint32_t token)
{
	(void)i;
	(void)token;
	F.timer_ms = ms;
	return 0;
}

static void h_count_drop(struct nt_instance *i, const char *stage, uint64_t n)
{
	(void)i;
	(void)stage;
	(void)n;
}

static const struct nt_host host = {
	.abi_major = NT_ABI_MAJOR, .abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = h_log, .instance_name = h_name, .config_error = h_config_error,
	.register_schema = h_register, .publish = h_publish,
	.subscribe = h_subscribe, .metric_register = h_metric_register,
	.metric_add = h_metric_v, .metric_set = h_metric_v,
	.metric_observe = h_metric_v, .metric_remove = h_metric_remove,
	.metrics_visit = h_visit, .add_timer = h_add_timer,
	.count_drop = h_count_drop,
};

static void fake_reset(void)
{
	for (int i = 0; i < F.npub; i++)
		free(F.pub[i]);
	memset(&F, 0, sizeof(F));
}

/* The published alerts' fields. */
static const char *alert_str(int i, size_t off, char *buf, size_t len)
{
	const struct an_alert_rec *a = (const void *)F.pub[i];
	const struct nt_vstr *v = (const void *)((const char *)a + off);

	snprintf(buf, len, "%.*s", (int)v->len, (const char *)a + v->off);
	return buf;
}

static int count_alerts(const char *kind)
{
	char k[32];
	int n = 0;

	for (int i = 0; i < F.npub; i++)
		n += strcmp(alert_str(i, offsetof(struct an_alert_rec, kind), k,
				      sizeof(k)), kind) == 0;
	return n;
}

static int find_alert(const char *kind, const char *needle)
{
	char k[32], m[512];

	for (int i = 0; i < F.npub; i++)
		if (strcmp(alert_str(i, offsetof(struct an_alert_rec, kind), k,
				     sizeof(k)), kind) == 0 &&
		    strstr(alert_str(i, offsetof(struct an_alert_rec, message), m,
				     sizeof(m)), needle))
			return i;
	return -1;
}

/* ================================================================== */
/* views                                                               */
/* ================================================================== */

struct got {
	int n;
	double last;
	const struct an_series *s;
};

static void got_sample(void *ctx, struct an_series *s, double v, uint64_t now)
{
	struct got *g = ctx;

	(void)now;
	g->n++;
	g->last = v;
	g->s = s;
}

static const char *const l_pcto[] = { "pid", "comm", "tid", "op" };

START_TEST(test_view)
{
	static const char *const globs[] = { "ntcore_x_*" };
	static const char *const keep[] = { "pid" };
	static const char *const where[] = { "op=read" };
	struct got g = { 0 }, gh = { 0 };
	struct an_view *v;
	struct ffam *c, *h;
	struct fser *t1, *t2, *t3, *h1;
	struct an_view_def d = { .globs = globs, .n_globs = 1, .labels = keep,
				 .n_labels = 1, .where = where, .n_where = 1,
				 .on_sample = got_sample, .ctx = &g };
	struct an_view_def dh = d;
	uint64_t t = 1000 * SEC;

	fake_reset();
	c = fam_add("ntcore_x_ops_total", NT_METRIC_COUNTER, 4, l_pcto);
	h = fam_add("ntcore_y_seconds", NT_METRIC_HISTOGRAM, 4, l_pcto);
	t1 = ser_add(c, "7", "a", "70", "read");
	t2 = ser_add(c, "7", "a", "71", "read");
	t3 = ser_add(c, "7", "a", "71", "write"); /* filtered out */
	h1 = ser_add(h, "7", "a", "70", "read");
	v = an_view_new(100);
	ck_assert_int_eq(an_view_add(v, &d), 0);
	dh.globs = (const char *const[]){ "ntcore_y_seconds" };
	dh.ctx = &gh;
	ck_assert_int_eq(an_view_add(v, &dh), 1);
	an_view_tick(v, &host, NULL, t);
	ck_assert_int_eq(g.n, 0); /* a rate needs two readings */
	t1->value = 10;
	t2->value = 20;
	t3->value = 1000;
	observe(h1, 0.002, 4);
	observe(h1, 0.004, 4);
	an_view_tick(v, &host, NULL, t + 2 * SEC);
	ck_assert_int_eq(g.n, 1);
	ck_assert_double_eq_tol(g.last, 15.0, 1e-9); /* (10 + 20) / 2 s, writes out */
	ck_assert_str_eq(an_series_label(g.s, 0), "7");
	ck_assert_int_eq(gh.n, 1);
	ck_assert_double_eq_tol(gh.last, 0.003, 1e-12);
	/* nothing changed: no value, whatever the time */
	an_view_tick(v, &host, NULL, t + 3 * SEC);
	ck_assert_int_eq(g.n, 1);
	/* a change: the rate is over the time since the last change */
	t1->value += 40;
	an_view_tick(v, &host, NULL, t + 6 * SEC);
	ck_assert_int_eq(g.n, 2);
	ck_assert_double_eq_tol(g.last, 10.0, 1e-9);
	ck_assert_ptr_nonnull(an_view_find(v, 0, "ntcore_x_ops_total", "7", 1));
	ck_assert_ptr_null(an_view_find(v, 0, "ntcore_x_ops_total", "8", 1));
	ck_assert_uint_eq(an_view_series(v), 2);
	an_view_free(v);
	fake_reset();
}
END_TEST

/* ================================================================== */
/* the plugin through its descriptor                                   */
/* ================================================================== */

struct plug {
	void *dl;
	const struct nt_plugin_desc *d;
	struct an_cfg *cfg;
	void *state;
	char *strings[64];
	const char **lists[16];
	int ns, nl;
};

static void cfg_set(struct plug *x, const struct nt_cfg_key *k, const char *val)
{
	char *p = (char *)x->cfg + k->offset;

	switch (k->type) {
	case NT_CFG_BOOL:
		*(bool *)p = strcmp(val, "true") == 0;
		break;
	case NT_CFG_INT:
		*(int64_t *)p = strtoll(val, NULL, 10);
		break;
	case NT_CFG_FLOAT:
		*(double *)p = strtod(val, NULL);
		break;
	case NT_CFG_STRING: {
		char *s = strdup(val[0] == '"' ? val + 1 : val);

		if (val[0] == '"')
			s[strlen(s) - 1] = '\0';
		x->strings[x->ns++] = s;
		*(const char **)p = s;
		break;
	}
	case NT_CFG_STRING_LIST: {
		struct nt_strlist *l = (struct nt_strlist *)p;
		const char **v = calloc(16, sizeof(*v));
		const char *q = val;

		l->n = 0;
		while ((q = strchr(q, '"'))) {
			const char *e = strchr(q + 1, '"');

			x->strings[x->ns++] = strndup(q + 1, (size_t)(e - q - 1));
			v[l->n++] = x->strings[x->ns - 1];
			q = e + 1;
		}
		l->v = v;
		x->lists[x->nl++] = v;
		break;
	}
	default: /* group lists: empty unless a test sets them */
		break;
	}
}

/* Opens the plugin, fills its config from the defaults and `over`
 * ("key=value" pairs), runs init; returns init's result. */
static int plug_open(struct plug *x, const char *const *over)
{
	const struct nt_cfg_key *keys;

	memset(x, 0, sizeof(*x));
	x->dl = dlopen(ANOMALY_SO, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(x->dl != NULL, "dlopen: %s", dlerror());
	x->d = dlsym(x->dl, NT_PLUGIN_SYMBOL);
	ck_assert_ptr_nonnull(x->d);
	ck_assert_str_eq(x->d->name, "anomaly");
	ck_assert_int_eq(x->d->kind, NT_KIND_DETECTOR);
	x->cfg = calloc(1, x->d->config_size);
	keys = x->d->config;
	for (uint32_t i = 0; i < x->d->n_config; i++)
		if (keys[i].def)
			cfg_set(x, &keys[i], keys[i].def);
	for (; over && *over; over++) {
		const char *eq = strchr(*over, '=');

		for (uint32_t i = 0; i < x->d->n_config; i++)
			if (strlen(keys[i].key) == (size_t)(eq - *over) &&
			    strncmp(keys[i].key, *over, (size_t)(eq - *over)) == 0)
				cfg_set(x, &keys[i], eq + 1);
	}
	return 0;
}

static int plug_init(struct plug *x)
{
	int rc = x->d->init(NULL, &host, x->cfg, &x->state);

	if (rc == 0)
		ck_assert_int_eq(x->d->attach(x->state), 0);
	return rc;
}

static void plug_close(struct plug *x)
{
	if (x->state) {
		x->d->detach(x->state);
		x->d->fini(x->state);
	}
	for (int i = 0; i < x->ns; i++)
		free(x->strings[i]);
	for (int i = 0; i < x->nl; i++)
		free(x->lists[i]);
	free(x->cfg);
	dlclose(x->dl);
}

static const struct nt_schema *schema_named(const char *name)
{
	for (int i = 0; i < F.nschemas; i++)
		if (strcmp(F.schemas[i]->name, name) == 0)
			return F.schemas[i];
	return NULL;
}

START_TEST(test_plugin_schema)
{
	struct plug x;
	const struct nt_schema *s;

	fake_reset();
	plug_open(&x, NULL);
	ck_assert_int_eq(plug_init(&x), 0);
	s = schema_named("alert.anomaly");
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->fields[0].name, "severity");
	ck_assert_str_eq(s->fields[3].name, "evidence");
	ck_assert_str_eq(s->fields[4].name, "kind");
	ck_assert_uint_eq(F.timer_ms, 500);
	/* defaults: launches for steps, the large-allocation rule's event */
	{
		bool launch = false, alloc = false, pexit = false;

		for (int i = 0; i < F.nsubs; i++) {
			launch |= strcmp(F.subs[i], "cuda.launch") == 0;
			alloc |= strcmp(F.subs[i], "cuda.alloc") == 0;
			pexit |= strcmp(F.subs[i], "proc.exit") == 0;
		}
		ck_assert(launch && alloc && pexit);
	}
	plug_close(&x);
	fake_reset();
}
END_TEST

START_TEST(test_plugin_config_errors)
{
	struct plug x;
	static const char *const small_init[] = { "n_init=15", NULL };
	static const char *const py[] = { "steps=\"python\"", NULL };
	static const char *const bad_names[] = { "comm_names=[\"nope\"]", NULL };
	struct an_rule_cfg bad_rule = { .name = "r", .test = "share",
					.metric = "ntcore_a_total", .threshold = 1 };

	fake_reset();
	plug_open(&x, small_init);
	ck_assert_int_eq(plug_init(&x), -EINVAL);
	ck_assert_str_eq(F.last_error, "n_init: must be at least depth + 10 (20)");
	plug_close(&x);

	fake_reset();
	plug_open(&x, py);
	ck_assert_int_eq(plug_init(&x), -EINVAL);
	ck_assert_ptr_nonnull(strstr(F.last_error, "step_function:"));
	plug_close(&x);

	fake_reset();
	plug_open(&x, bad_names);
	ck_assert_int_eq(plug_init(&x), -EINVAL);
	ck_assert_ptr_nonnull(strstr(F.last_error, "comm_names"));
	plug_close(&x);

	fake_reset();
	plug_open(&x, NULL);
	x.cfg->rules = (struct nt_cfg_array){ &bad_rule, 1 };
	ck_assert_int_eq(plug_init(&x), -EINVAL);
	ck_assert_str_eq(F.last_error,
			 "rules: rule \"r\" share needs over (the denominator family)");
	plug_close(&x);
	fake_reset();
}
END_TEST

static const char *const l_dop[] = { "dev", "device", "op" };

/* Polls the plugin as its timer would: the views take rates over real
 * time and hold a change that comes too soon after the previous one. */
static void poll_after(struct plug *x, long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
	x->d->poll(x->state, 1, 0);
}

/* The small-I/O rule on a device whose reads go from 1 MiB to 4 KiB. */
START_TEST(test_rule_small_io)
{
	struct plug x;
	struct ffam *req, *small;
	struct fser *r, *s;
	char m[512];

	fake_reset();
	req = fam_add("ntcore_io_requests_total", NT_METRIC_COUNTER, 3, l_dop);
	small = fam_add("ntcore_io_small_requests_total", NT_METRIC_COUNTER, 3, l_dop);
	r = ser_add(req, "254:0", "vda", "read", NULL);
	s = ser_add(small, "254:0", "vda", "read", NULL);
	plug_open(&x, NULL);
	ck_assert_int_eq(plug_init(&x), 0);
	for (int i = 0; i < 20; i++) { /* 2.2 s: past the rule's warm-up */
		r->value += 500;       /* large reads: few small ones */
		s->value += i % 3;
		poll_after(&x, 110);
	}
	ck_assert_int_eq(F.npub, 0);
	for (int i = 0; i < 5; i++) {
		r->value += 5000;
		s->value += 4900;
		poll_after(&x, 110);
	}
	ck_assert_int_eq(count_alerts("rule"), 1); /* sustain 3, then cooldown */
	ck_assert_int_ge(find_alert("rule", "mostly-small I/O: vda read small requests 98 %"), 0);
	alert_str(0, offsetof(struct an_alert_rec, evidence), m, sizeof(m));
	ck_assert_ptr_nonnull(strstr(m, "\"rule\":\"small_io\""));
	plug_close(&x);
	fake_reset();
}
END_TEST

/* A device's reads at 646 us for 40 snapshots (0.4 s: a process's
 * imports), then the first reads of fresh files at 10.2 ms: the GPU run's
 * cold start. `rule` NULL: the built-in io_latency rule. Returns the
 * rule alerts. */
static int io_cold_start(const struct an_rule_cfg *rule)
{
	struct plug x;
	struct ffam *req, *svc;
	struct fser *r, *s;
	int n;

	fake_reset();
	req = fam_add("ntcore_io_requests_total", NT_METRIC_COUNTER, 3, l_dop);
	svc = fam_add("ntcore_io_service_seconds", NT_METRIC_HISTOGRAM, 3, l_dop);
	r = ser_add(req, "254:0", "vda", "read", NULL);
	s = ser_add(svc, "254:0", "vda", "read", NULL);
	plug_open(&x, NULL);
	if (rule)
		x.cfg->rules = (struct nt_cfg_array){ rule, 1 };
	ck_assert_int_eq(plug_init(&x), 0);
	for (int i = 0; i < 45; i++) {
		r->value += 20;
		observe(s, i < 40 ? 646e-6 : 10.2e-3, 20);
		poll_after(&x, 10);
	}
	n = count_alerts("rule");
	if (n)
		printf("io cold start: %s\n", alert_str(0, offsetof(struct an_alert_rec,
						message), (char[256]){ 0 }, 256));
	plug_close(&x);
	fake_reset();
	return n;
}

/* Every rule has a warm-up in values and in time (the GPU run's false
 * "I/O latency 5x its average" at loop step 0): the built-in io_latency
 * has 30 values of history after 0.4 s, but not 30 s; the same rule with
 * a 0.3 s warm-up fires, with a 1 s one not. */
START_TEST(test_rule_warmup)
{
	struct an_rule_cfg rule = {
		.name = "lat", .test = "ratio_to_mean", .metric = "ntcore_io_service_seconds",
		.by = { (const char *const[]){ "device", "op" }, 2 }, .threshold = 5.0,
		.min_history = 30, .when_metric = "ntcore_io_requests_total",
		.when_above = 10.0, .sustain = 2, .warmup_values = 30, .warmup_s = 0.3,
		.severity = "warning", .what = "",
	};

	ck_assert_int_eq(io_cold_start(NULL), 0);
	ck_assert_int_eq(io_cold_start(&rule), 1);
	rule.warmup_s = 1.0;
	ck_assert_int_eq(io_cold_start(&rule), 0);
	rule.warmup_s = 0.0;
	rule.warmup_values = 44; /* 44 values seen before the first that may pass */
	ck_assert_int_eq(io_cold_start(&rule), 0);
}
END_TEST

/* The same when the device had no small request before: the small
 * family's series is seen first with the anomaly; the rule's warm-up runs
 * from the device's requests (its denominator), 2.2 s before. */
START_TEST(test_rule_small_io_new_key)
{
	struct plug x;
	struct ffam *req, *small;
	struct fser *r, *s = NULL, *other;

	fake_reset();
	req = fam_add("ntcore_io_requests_total", NT_METRIC_COUNTER, 3, l_dop);
	small = fam_add("ntcore_io_small_requests_total", NT_METRIC_COUNTER, 3, l_dop);
	r = ser_add(req, "254:0", "vda", "read", NULL);
	/* another disk's small writes keep the family changing (the view
	 * holds a change that comes much sooner than the family's usual) */
	other = ser_add(small, "8:0", "sda", "write", NULL);
	plug_open(&x, NULL);
	ck_assert_int_eq(plug_init(&x), 0);
	for (int i = 0; i < 20; i++) {
		r->value += 500;
		other->value += 3;
		poll_after(&x, 110);
	}
	for (int i = 0; i < 5; i++) {
		if (!s)
			s = ser_add(small, "254:0", "vda", "read", NULL);
		r->value += 5000;
		s->value += 4900;
		other->value += 3;
		poll_after(&x, 110);
	}
	ck_assert_int_eq(count_alerts("rule"), 1);
	ck_assert_int_ge(find_alert("rule", "mostly-small I/O: vda read small requests"), 0);
	plug_close(&x);
	fake_reset();
}
END_TEST

static const char *const l_ptc[] = { "pid", "tid", "comm" };

/* A thread hot from its start is how it works; one that becomes hot is
 * news (cpu_hot's normal_before). Host-wide per-thread counters. */
START_TEST(test_rule_cpu_hot)
{
	struct plug x;
	struct ffam *cpu;
	struct fser *always, *becomes;
	double t;

	fake_reset();
	cpu = fam_add("ntcore_sched_oncpu_seconds_total", NT_METRIC_COUNTER, 3, l_ptc);
	always = ser_add(cpu, "10", "10", "spinner", NULL);
	becomes = ser_add(cpu, "20", "21", "worker", NULL);
	plug_open(&x, (const char *const[]){ "interval_ms=50", NULL });
	ck_assert_int_eq(plug_init(&x), 0);
	/* the view's rate uses real time between polls: sleep one interval,
	 * and add the CPU time of the time that really passed (under
	 * valgrind a poll takes longer than its sleep) */
	uint64_t last = an_now_ns();

	for (int i = 0; i < 80; i++) {
		struct timespec ts = { 0, 50 * 1000000L };
		uint64_t now;

		nanosleep(&ts, NULL);
		now = an_now_ns();
		t = (double)(now - last) / 1e9;
		last = now;
		always->value += t;                       /* 100 % */
		/* 10 % for 3 s (2 s of warm-up, then normal_before), then 100 % */
		becomes->value += i < 60 ? 0.1 * t : t;
		x.d->poll(x.state, 1, 0);
	}
	ck_assert_int_eq(count_alerts("rule"), 1);
	ck_assert_int_ge(find_alert("rule", "CPU core hot: "), 0);
	{
		const struct an_alert_rec *a = (const void *)F.pub[0];

		ck_assert_uint_eq(a->subject_pid, 20);
		ck_assert_str_eq(a->hdr.comm, "worker");
	}
	plug_close(&x);
	fake_reset();
}
END_TEST

/* ---- steps from kernel launches ------------------------------------ */

struct launch_rec {
	struct nt_event_hdr hdr;
	uint64_t func;
	uint32_t grid_x, grid_y, grid_z, block_x, block_y, block_z;
	uint32_t pad;
	struct nt_vstr kernel;
};

static const struct nt_field launch_fields[] = {
	NT_FIELD(struct launch_rec, func, NT_F_HEX64, "", ""),
	NT_FIELD(struct launch_rec, grid_x, NT_F_U32, "", ""),
	NT_FIELD(struct launch_rec, grid_y, NT_F_U32, "", ""),
	NT_FIELD(struct launch_rec, grid_z, NT_F_U32, "", ""),
	NT_FIELD(struct launch_rec, block_x, NT_F_U32, "", ""),
	NT_FIELD(struct launch_rec, block_y, NT_F_U32, "", ""),
	NT_FIELD(struct launch_rec, block_z, NT_F_U32, "", ""),
	NT_FIELD(struct launch_rec, kernel, NT_F_VSTR, "", ""),
};
static const struct nt_schema launch_schema = { "cuda.launch", "", launch_fields,
	NT_ARRAY_LEN(launch_fields), sizeof(struct launch_rec) };

static void launch(struct plug *x, uint64_t ts, uint64_t func, uint32_t grid)
{
	struct launch_rec r = { .hdr = { .type = 1, .size = sizeof(r), .ts_ns = ts,
					 .pid = 4242, .tid = 4242, .comm = "python3" },
				.func = func, .grid_x = grid, .grid_y = 1, .grid_z = 1,
				.block_x = 256, .block_y = 1, .block_z = 1 };

	x->d->consume(x->state, &r.hdr, &launch_schema);
}

static const char *const l_pcop[] = { "pid", "comm", "dev", "device", "op" };

/*
 * A training loop of 100 ms steps (34 launches, make_launches' shape) and a
 * data loader whose reads take 0.4 ms; from step 120 on, the loader's reads
 * take 2.4 ms and the steps 300 ms. The alert must name step 120 (or the
 * next two), 200 % slower, and the loader's read latency x6.
 */
START_TEST(test_slow_step_reason)
{
	struct plug x;
	static uint64_t seq[16384];
	size_t n = make_launches(seq, 16384, 200);
	struct ffam *svc;
	struct fser *loader, *other;
	/* event clock behind the real one: the view stamps values
	 * with the real monotonic clock, as the daemon does */
	uint64_t ts = an_now_ns() / 2, step_start = ts;
	int step = 0, i;
	char msg[512];
	const struct an_alert_rec *a;

	fake_reset();
	svc = fam_add("ntcore_io_process_service_seconds", NT_METRIC_HISTOGRAM, 5, l_pcop);
	loader = ser_add(svc, "4300", "pt_data_worker", "254:0", "vda");
	loader->lv[4] = "read";
	other = ser_add(svc, "99", "journald", "254:0", "vda");
	other->lv[4] = "write";
	plug_open(&x, (const char *const[]){ "n_init=20", "step_n_init=30",
					     "step_learn_launches=2048", NULL });
	ck_assert_int_eq(plug_init(&x), 0);
	for (i = 40; i < (int)n; i++) {
		bool slow = step >= 120;

		if (seq[i] == 1) { /* a step begins: the loader read its batch */
			observe(loader, slow ? 2.4e-3 : 0.4e-3, 16);
			observe(other, 1e-3, 1);
			x.d->poll(x.state, 1, 0);
			step_start = ts;
			step++;
			if (F.npub)
				break;
		}
		ts += (slow ? 300 : 100) * MS / 34;
		launch(&x, ts, seq[i], (uint32_t)seq[i] % 7 + 1);
	}
	(void)step_start;
	ck_assert_int_eq(count_alerts("step"), 1);
	ck_assert_int_le(step, 124);
	a = (const void *)F.pub[0];
	alert_str(0, offsetof(struct an_alert_rec, message), msg, sizeof(msg));
	printf("slow step alert after loop step %d: %s\n", step, msg);
	ck_assert_uint_ge(a->step, 118);
	ck_assert_uint_le(a->step, 123);
	ck_assert_ptr_nonnull(strstr(msg, "% slower"));
	ck_assert_ptr_nonnull(strstr(msg, "data-loader read latency x6 at the same time"));
	ck_assert_double_eq_tol(a->baseline, 0.1, 0.01);
	ck_assert_uint_eq(a->subject_pid, 4242);
	alert_str(0, offsetof(struct an_alert_rec, evidence), msg, sizeof(msg));
	ck_assert_ptr_nonnull(strstr(msg, "\"launches_per_step\":34"));
	ck_assert_ptr_nonnull(strstr(msg, "comm=\\\"pt_data_worker\\\""));
	plug_close(&x);
	fake_reset();
}
END_TEST

/* The same loop without the slowdown: no alert of any kind. */
START_TEST(test_steady_steps_quiet)
{
	struct plug x;
	static uint64_t seq[16384];
	size_t n = make_launches(seq, 16384, 400);
	struct syn_rng r = { 99 };
	uint64_t ts = an_now_ns() / 2;
	struct ffam *svc;
	struct fser *loader;

	fake_reset();
	svc = fam_add("ntcore_io_process_service_seconds", NT_METRIC_HISTOGRAM, 5, l_pcop);
	loader = ser_add(svc, "4300", "pt_data_worker", "254:0", "vda");
	loader->lv[4] = "read";
	plug_open(&x, (const char *const[]){ "n_init=20", "step_n_init=30",
					     "step_learn_launches=2048", NULL });
	ck_assert_int_eq(plug_init(&x), 0);
	for (size_t i = 40; i < n; i++) {
		if (seq[i] == 1) {
			observe(loader, 0.4e-3 * (1.0 + 0.1 * syn_normal(&r)), 16);
			x.d->poll(x.state, 1, 0);
		}
		/* step time jitters by 5 % */
		ts += (uint64_t)((100.0 + 5.0 * syn_normal(&r)) * (double)MS / 34.0);
		launch(&x, ts, seq[i], (uint32_t)seq[i] % 7 + 1);
	}
	ck_assert_int_eq(F.npub, 0);
	plug_close(&x);
	fake_reset();
}
END_TEST

/*
 * The GPU run's clean 5 minutes: 17 ms steps, now and then one 26 % slower
 * or, every fourth step (one loader worker hiccuping), 2.5x: no alert
 * (a step alert needs 50 % and the last 8 steps 50 % slower on average).
 */
START_TEST(test_step_hiccups_quiet)
{
	struct plug x;
	static uint64_t seq[16384];
	size_t n = make_launches(seq, 16384, 400);
	struct syn_rng r = { 7 };
	uint64_t ts = an_now_ns() / 2;
	int step = 0;

	fake_reset();
	plug_open(&x, (const char *const[]){ "step_learn_launches=2048", NULL });
	ck_assert_int_eq(plug_init(&x), 0);
	for (size_t i = 40; i < n; i++) {
		double ms = 17.0 * (1.0 + 0.03 * syn_normal(&r));

		if (seq[i] == 1)
			step++;
		if (step == 150)
			ms = 17.0 * 1.26;
		if (step == 250 || step == 254 || step == 262 || step == 330)
			ms = 17.0 * 2.5;
		ts += (uint64_t)(ms * (double)MS / 34.0);
		launch(&x, ts, seq[i], (uint32_t)seq[i] % 7 + 1);
	}
	ck_assert_int_eq(F.npub, 0);
	plug_close(&x);
	fake_reset();
}
END_TEST

static const char *const l_p[] = { "pid" };
static const char *const l_pco[] = { "pid", "comm", "op" };

/* Runs one step of the slowed-loader loop: its launches at once, then
 * `polls` snapshots 10 ms apart, the loader's requests and the trainer's
 * CUDA sync time growing by what a poll of that phase adds. */
struct loader_loop {
	struct plug x;
	uint64_t *seq;
	size_t i, n;
	struct fser *req, *sync, *bytes;
};

static void loader_step(struct loader_loop *L, int polls, bool slow)
{
	do {
		launch(&L->x, an_now_ns(), L->seq[L->i], (uint32_t)L->seq[L->i] % 7 + 1);
		L->i++;
	} while (L->i < L->n && L->seq[L->i] != 1);
	for (int k = 0; k < polls; k++) {
		L->req->value += slow ? 4096 : 16;         /* x256 requests */
		L->bytes->value += slow ? 4 << 20 : 16 << 20; /* bytes /4 */
		L->sync->value += slow ? 5e-5 : 3e-3;      /* sync x0.016 */
		poll_after(&L->x, 10);
	}
}

/*
 * The GPU run's slowed loader: from step 120 the loader worker's reads go
 * to 4 KiB requests (x256 a second, bytes a quarter), every fourth step
 * takes 10 snapshots instead of one, the trainer's CUDA sync time falls
 * to 1/60. Every series is still in its warm-up (n_init 200). The alert
 * comes as the slow step ends and names the loader's read requests (the
 * sync time's fall is an effect: no reason; the requests' level before
 * the step, not a warm-up mean that took the slow values in).
 */
START_TEST(test_slow_loader_reason)
{
	static uint64_t seq[16384];
	struct loader_loop L = { .seq = seq, .i = 40, .n = make_launches(seq, 16384, 200) };
	struct ffam *req, *sync, *bytes;
	char msg[1024];
	int step;

	fake_reset();
	sync = fam_add("ntcore_cuda_sync_seconds_total", NT_METRIC_COUNTER, 1, l_p);
	req = fam_add("ntcore_io_process_requests_total", NT_METRIC_COUNTER, 3, l_pco);
	bytes = fam_add("ntcore_io_process_bytes_total", NT_METRIC_COUNTER, 3, l_pco);
	L.sync = ser_add(sync, "4242", NULL, NULL, NULL);
	L.req = ser_add(req, "4300", "pt_data_worker", "read", NULL);
	L.bytes = ser_add(bytes, "4300", "pt_data_worker", "read", NULL);
	plug_open(&L.x, (const char *const[]){ "step_learn_launches=2048", "step_n_init=50", NULL });
	ck_assert_int_eq(plug_init(&L.x), 0);
	for (step = 0; step < 120; step++)
		loader_step(&L, 1, false);
	ck_assert_int_eq(F.npub, 0);
	for (; step < 132 && !F.npub; step++)
		loader_step(&L, step % 4 == 0 ? 10 : 1, true);
	ck_assert_int_eq(count_alerts("step"), 1);
	alert_str(0, offsetof(struct an_alert_rec, message), msg, sizeof(msg));
	printf("slowed loader: alert in loop step %d: %s\n", step - 1, msg);
	/* the slow step is 120; its alert goes out as 121 begins */
	ck_assert_int_eq(step - 1, 121);
	ck_assert_ptr_nonnull(strstr(msg, "; data-loader read requests x"));
	alert_str(0, offsetof(struct an_alert_rec, evidence), msg, sizeof(msg));
	ck_assert_ptr_nonnull(strstr(msg, "\"moved\":[{\"series\":\"ntcore_io_process_requests_total{pid=\\\"4300\\\""));
	ck_assert_ptr_null(strstr(msg, "ntcore_cuda_sync_seconds_total"));
	plug_close(&L.x);
	fake_reset();
}
END_TEST

/* ---- steps from a Python function ---------------------------------- */

struct calls_rec {
	struct nt_event_hdr hdr;
	uint64_t calls, timed_calls, inclusive_ns;
	struct nt_vstr function, file;
	char text[64];
};

static const struct nt_field calls_fields[] = {
	NT_FIELD(struct calls_rec, calls, NT_F_U64, "count", ""),
	NT_FIELD(struct calls_rec, timed_calls, NT_F_U64, "count", ""),
	NT_FIELD(struct calls_rec, inclusive_ns, NT_F_U64, "ns", ""),
	NT_FIELD(struct calls_rec, function, NT_F_VSTR, "", ""),
	NT_FIELD(struct calls_rec, file, NT_F_VSTR, "", ""),
};
static const struct nt_schema calls_schema = { "python.calls", "", calls_fields,
	NT_ARRAY_LEN(calls_fields), offsetof(struct calls_rec, text) };

static void calls(struct plug *x, uint64_t ts, const char *fn, uint64_t n,
		  double step_s)
{
	struct calls_rec r = { .hdr = { .type = 2, .size = sizeof(r), .ts_ns = ts,
					.pid = 777, .tid = 777, .comm = "python3" },
			       .calls = n, .timed_calls = n,
			       .inclusive_ns = (uint64_t)(step_s * 1e9) * n };
	size_t l = strlen(fn);

	memcpy(r.text, fn, l);
	memcpy(r.text + l, "train.py", 8);
	r.function = (struct nt_vstr){ offsetof(struct calls_rec, text), (uint32_t)l };
	r.file = (struct nt_vstr){ (uint32_t)(offsetof(struct calls_rec, text) + l), 8 };
	x->d->consume(x->state, &r.hdr, &calls_schema);
}

START_TEST(test_python_steps)
{
	struct plug x;
	uint64_t ts = an_now_ns() / 2;
	char msg[512];
	const struct an_alert_rec *a;

	fake_reset();
	plug_open(&x, (const char *const[]){ "step_function=\"train_step\"",
					     "step_n_init=30", NULL });
	ck_assert_int_eq(plug_init(&x), 0);
	for (int i = 0; i < 60; i++) {
		ts += SEC;
		calls(&x, ts, "train_step", 10, 0.1);
		calls(&x, ts, "other", 10, 5.0); /* not the step */
	}
	ck_assert_int_eq(F.npub, 0);
	calls(&x, ts + SEC, "train_step", 10, 0.2);
	/* nothing watched moved: after reason_wait_steps more samples */
	calls(&x, ts + 2 * SEC, "train_step", 10, 0.1);
	calls(&x, ts + 3 * SEC, "train_step", 10, 0.1);
	ck_assert_int_eq(count_alerts("step"), 1);
	a = (const void *)F.pub[0];
	ck_assert_uint_eq(a->step, 610);
	alert_str(0, offsetof(struct an_alert_rec, message), msg, sizeof(msg));
	ck_assert_str_eq(msg, "step 610: 100 % slower (0.2 s, normal 0.1 s); "
			      "no watched metric moved at the same time");
	plug_close(&x);
	fake_reset();
}
END_TEST

/* ---- an event rule --------------------------------------------------- */

struct alloc_rec {
	struct nt_event_hdr hdr;
	uint64_t size;
};
static const struct nt_field alloc_fields[] = {
	NT_FIELD(struct alloc_rec, size, NT_F_U64, "bytes", ""),
};
static const struct nt_schema alloc_schema = { "cuda.alloc", "", alloc_fields, 1,
	sizeof(struct alloc_rec) };

START_TEST(test_rule_large_alloc)
{
	struct plug x;
	struct alloc_rec r = { .hdr = { .type = 3, .size = sizeof(r), .pid = 55,
					.tid = 55, .comm = "trainer" } };

	fake_reset();
	plug_open(&x, NULL);
	ck_assert_int_eq(plug_init(&x), 0);
	for (int i = 0; i < 30; i++) { /* one a second: past the 10 s warm-up */
		r.hdr.ts_ns = (uint64_t)i * SEC;
		r.size = (uint64_t)(64 + i) << 20; /* 64..93 MiB */
		x.d->consume(x.state, &r.hdr, &alloc_schema);
	}
	r.size = 300ULL << 20; /* 3.2x the largest: not yet */
	x.d->consume(x.state, &r.hdr, &alloc_schema);
	ck_assert_int_eq(F.npub, 0);
	r.size = 2ULL << 30;   /* 2 GiB: 6.8x the largest, 300 MiB */
	x.d->consume(x.state, &r.hdr, &alloc_schema);
	ck_assert_int_eq(count_alerts("rule"), 1);
	ck_assert_int_ge(find_alert("rule", "very large GPU allocation: pid 55 (trainer) "
				    "cuda.alloc size 2 GiB, x6.8 the largest before (300 MiB)"), 0);
	plug_close(&x);
	fake_reset();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("anomaly");
	TCase *t = tcase_create("logic"), *p = tcase_create("plugin");

	tcase_set_timeout(t, 120);
	tcase_set_timeout(p, 120);
	tcase_add_test(t, test_map);
	tcase_add_test(t, test_gpd_quantile);
	tcase_add_test(t, test_grimshaw_recovers);
	tcase_add_test(t, test_moments);
	tcase_add_test(t, test_spot_rate);
	tcase_add_test(t, test_det_spike_and_shift);
	tcase_add_test(t, test_synthetic_deterministic);
	tcase_add_test(t, test_synthetic_f1);
	tcase_add_test(t, test_joint);
	tcase_add_test(t, test_period);
	tcase_add_test(t, test_fmt);
	tcase_add_test(t, test_view);
	tcase_add_test(p, test_plugin_schema);
	tcase_add_test(p, test_plugin_config_errors);
	tcase_add_test(p, test_rule_small_io);
	tcase_add_test(p, test_rule_cpu_hot);
	tcase_add_test(p, test_rule_warmup);
	tcase_add_test(p, test_rule_small_io_new_key);
	tcase_add_test(p, test_slow_step_reason);
	tcase_add_test(p, test_steady_steps_quiet);
	tcase_add_test(p, test_step_hiccups_quiet);
	tcase_add_test(p, test_slow_loader_reason);
	tcase_add_test(p, test_python_steps);
	tcase_add_test(p, test_rule_large_alloc);
	suite_add_tcase(s, t);
	suite_add_tcase(s, p);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
