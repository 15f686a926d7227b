/* SPDX-License-Identifier: MIT */
/*
 * bench/anomaly.sh's program. Two measurements, each printed side by side
 * against a naive detector (mean + 3 sd, exponentially weighted over 100
 * values, learning every value, same warm-up and cooldown):
 *
 *  quality  precision, recall and F1 per anomaly kind on the seeded
 *           labelled synthetic streams (plugins/anomaly/synth.h), and the
 *           multivariate check on groups of 8 series that shift together
 *  cost     ns per update and bytes per watched series with N series (10,000
 *           by default): the detector alone, the naive one, and the
 *           plugin's path per series (metric snapshot -> view -> detector)
 *
 *   anomaly_bench [--smoke] [--streams N] [--series N] [--rounds N]
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntcore/plugin.h"

#include "an_util.h"
#include "det.h"
#include "joint.h"
#include "score.h"
#include "synth.h"
#include "view.h"

#define LEN 3000
#define COOLDOWN 20
#define TOL 10

struct opts {
	int streams, series, rounds;
};

static double now_s(void)
{
	return (double)an_now_ns() / 1e9;
}

static size_t heap_used(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* ---- quality ------------------------------------------------------- */

static void print_row(const char *name, const struct score *d,
		      const struct score *n)
{
	printf("  %-15s %4lu %4lu %5lu  %5.3f %5.3f %5.3f | %5lu  %5.3f %5.3f %5.3f\n",
	       name, (unsigned long)d->events, (unsigned long)d->detected,
	       (unsigned long)d->alerts, score_precision(d), score_recall(d),
	       score_f1(d), (unsigned long)n->alerts, score_precision(n),
	       score_recall(n), score_f1(n));
}

static void quality(const struct opts *o)
{
	struct det_par p;
	struct score all = { 0 }, nall = { 0 };
	uint32_t *al = malloc(4096 * sizeof(*al));

	det_par_default(&p);
	printf("quality: %d streams of %d values per kind, seeds 1000..%d\n",
	       o->streams, LEN, 999 + o->streams);
	printf("  %-15s %4s %4s %5s  %5s %5s %5s | %5s  %5s %5s %5s\n", "kind",
	       "anom", "found", "alert", "P", "R", "F1", "naive", "P", "R", "F1");
	for (int k = 0; k < SYN_N_KINDS; k++) {
		struct score d = { 0 }, n = { 0 };

		for (int j = 0; j < o->streams; j++) {
			struct syn_stream s;
			long na;

			syn_make(&s, (enum syn_kind)k, LEN, 1000 + (uint64_t)j);
			na = score_run_det(&p, &s, COOLDOWN, al, 4096);
			score_add(&d, &s, al, (size_t)(na > 4096 ? 4096 : na), TOL);
			na = score_run_naive(&s, 3.0, 100, p.n_init, COOLDOWN, al, 4096);
			score_add(&n, &s, al, (size_t)(na > 4096 ? 4096 : na), TOL);
			syn_free(&s);
		}
		print_row(syn_kind_name((enum syn_kind)k), &d, &n);
		score_merge(&all, &d);
		score_merge(&nall, &n);
	}
	print_row("overall", &all, &nall);
	free(al);
}

/* Groups of 8 series; twice per stream all 8 shift by 3.5 sd for 30
 * values. Found by the joint check, by any member's own detector, by
 * the naive detector on any member. */
static void joint_quality(const struct opts *o)
{
	struct det_par p, jp;
	int events = 0, by_joint = 0, by_member = 0, by_naive = 0, joint_false = 0;
	long naive_false = 0;

	det_par_default(&p);
	p.drift_len = 0;
	jp = p;
	jp.fast.q = 1e-6;     /* the plugin's joint_q */
	jp.min_delta = 0.25;  /* as joint.c sets it */
	for (int g = 0; g < o->streams; g++) {
		struct det *d[8], *j = det_new(&jp);
		struct naive nv[8] = { 0 };
		struct syn_rng r = { 5000 + (uint64_t)g };
		int at[2] = { 1200 + g % 300, 2300 + g % 300 }, hit[3][2] = { { 0 } };

		for (int k = 0; k < 8; k++)
			d[k] = det_new(&p);
		for (int i = 0; i < LEN; i++) {
			double z[8];
			int e = i >= at[0] && i < at[0] + 30 ? 0 : i >= at[1] && i < at[1] + 30 ? 1 : -1;
			/* alarms up to TOL values after a shift count for it */
			int w = i >= at[0] && i < at[0] + 30 + TOL ? 0 :
				i >= at[1] && i < at[1] + 30 + TOL ? 1 : -1;

			for (int k = 0; k < 8; k++) {
				struct det_out out;
				double x = 100.0 + syn_noise(&r) + (e >= 0 ? 3.5 : 0.0);

				if (det_update(d[k], &p, x, &out) >= DET_SPIKE && e >= 0)
					hit[1][e] = 1;
				if (naive_update(&nv[k], x, 3.0, 100, p.n_init)) {
					if (e >= 0)
						hit[2][e] = 1;
					else if (w < 0)
						naive_false++;
				}
				z[k] = out.z;
			}
			if (i >= (int)p.n_init &&
			    det_update(j, &jp, joint_score(z, 8), NULL) == DET_SPIKE) {
				if (w >= 0)
					hit[0][w] = 1;
				else
					joint_false++;
			}
		}
		for (int e = 0; e < 2; e++) {
			events++;
			by_joint += hit[0][e];
			by_member += hit[1][e];
			by_naive += hit[2][e];
		}
		for (int k = 0; k < 8; k++)
			det_free(d[k]);
		det_free(j);
	}
	printf("joint: %d groups of 8 series (%d values), %d shared 3.5 sd shifts of 30 values: found by the "
	       "joint check %d (false alarms %d), by a member's own detector %d, "
	       "by mean+3sd on a member %d (and %ld alarms on noise elsewhere)\n",
	       o->streams, LEN, events, by_joint, joint_false, by_member, by_naive,
	       naive_false);
}

/* ---- cost ---------------------------------------------------------- */

/* Inputs are drawn before the clock starts: 2^20 noise values, read in turn. */
#define INPUTS (1u << 20)
static double *inputs;

static void make_inputs(void)
{
	struct syn_rng r = { 42 };

	inputs = malloc(INPUTS * sizeof(*inputs));
	for (uint32_t i = 0; i < INPUTS; i++)
		inputs[i] = 100.0 + syn_noise(&r);
}

static inline double input(uint64_t k)
{
	return inputs[k & (INPUTS - 1)];
}

static double det_cost(const struct opts *o, size_t *bytes, size_t *warm_bytes)
{
	struct det_par p;
	struct det **d = malloc((size_t)o->series * sizeof(*d));
	uint64_t k = 0;
	size_t h0 = heap_used(), hw;
	double t;

	det_par_default(&p);
	for (int i = 0; i < o->series; i++)
		d[i] = det_new(&p);
	hw = heap_used();
	for (uint32_t w = 0; w < p.n_init; w++)
		for (int i = 0; i < o->series; i++)
			det_update(d[i], &p, input(k++), NULL);
	*warm_bytes = (hw - h0) / (size_t)o->series;
	*bytes = (heap_used() - h0) / (size_t)o->series;
	t = now_s();
	for (int n = 0; n < o->rounds; n++)
		for (int i = 0; i < o->series; i++)
			det_update(d[i], &p, input(k++), NULL);
	t = now_s() - t;
	for (int i = 0; i < o->series; i++)
		det_free(d[i]);
	free(d);
	return t * 1e9 / ((double)o->rounds * o->series);
}

static double naive_cost(const struct opts *o)
{
	struct naive *nv = calloc((size_t)o->series, sizeof(*nv));
	volatile int alarms = 0;
	uint64_t k = 0;
	double t;

	for (int w = 0; w < 200; w++)
		for (int i = 0; i < o->series; i++)
			naive_update(&nv[i], input(k++), 3.0, 100, 200);
	t = now_s();
	for (int n = 0; n < o->rounds; n++)
		for (int i = 0; i < o->series; i++)
			alarms += naive_update(&nv[i], input(k++), 3.0, 100, 200);
	t = now_s() - t;
	(void)alarms; /* kept so the updates are not optimised away; clang wants it read */
	free(nv);
	return t * 1e9 / ((double)o->rounds * o->series);
}

/* The plugin's path: a registry family of N counters read by one view,
 * each new rate into its own detector. */
struct fam {
	struct nt_metric_desc d;
	struct nt_metric_series *s;
	char (*pid)[12];
	const char **lv;
	int n;
};

static int visit(struct nt_instance *inst, nt_metric_visit_fn fn, void *arg)
{
	struct fam *f = (struct fam *)inst;

	return fn(arg, &f->d, f->s, (uint32_t)f->n, 0);
}

struct path_ctx {
	struct det_par p;
	struct det **d;
};

static void on_sample(void *ctx, struct an_series *s, double v, uint64_t now)
{
	struct path_ctx *c = ctx;

	(void)now;
	if (!s->user)
		s->user = det_new(&c->p);
	det_update(s->user, &c->p, v, NULL);
}

static void on_drop(void *ctx, struct an_series *s)
{
	(void)ctx;
	det_free(s->user);
}

static double path_cost(const struct opts *o, size_t *bytes)
{
	static const char *const lbl[] = { "pid" };
	struct fam f = { .d = { .name = "ntcore_bench_ops_total",
				.type = NT_METRIC_COUNTER, .n_labels = 1,
				.label_names = lbl }, .n = o->series };
	struct nt_host host = { .size = sizeof(host), .metrics_visit = visit };
	struct path_ctx c;
	struct an_view_def d = { .globs = (const char *const[]){ "ntcore_bench_*" },
				 .n_globs = 1, .labels = lbl, .n_labels = 1,
				 .on_sample = on_sample, .on_drop = on_drop, .ctx = &c };
	struct an_view *v = an_view_new((uint32_t)o->series + 1);
	uint64_t t = 1, k = 0;
	size_t h0;
	double el;

	det_par_default(&c.p);
	f.s = calloc((size_t)f.n, sizeof(*f.s));
	f.pid = calloc((size_t)f.n, sizeof(*f.pid));
	f.lv = calloc((size_t)f.n, sizeof(*f.lv));
	for (int i = 0; i < f.n; i++) {
		snprintf(f.pid[i], sizeof(f.pid[i]), "%d", 100000 + i);
		f.lv[i] = f.pid[i];
		f.s[i].label_values = &f.lv[i];
	}
	an_view_add(v, &d);
	h0 = heap_used();
	for (uint32_t w = 0; w <= c.p.n_init; w++, t += 1000000000ULL) {
		for (int i = 0; i < f.n; i++)
			f.s[i].value += input(k++);
		an_view_tick(v, &host, (struct nt_instance *)&f, t);
	}
	*bytes = (heap_used() - h0) / (size_t)o->series;
	el = now_s();
	for (int n = 0; n < o->rounds; n++, t += 1000000000ULL) {
		for (int i = 0; i < f.n; i++)
			f.s[i].value += input(k++);
		an_view_tick(v, &host, (struct nt_instance *)&f, t);
	}
	el = now_s() - el;
	an_view_free(v);
	free(f.s);
	free(f.pid);
	free(f.lv);
	return el * 1e9 / ((double)o->rounds * o->series);
}

static void cost(const struct opts *o)
{
	size_t det_bytes, warm_bytes, path_bytes;
	struct det_par p;
	double dc, nc, pc;

	det_par_default(&p);
	make_inputs();
	dc = det_cost(o, &det_bytes, &warm_bytes);
	nc = naive_cost(o);
	pc = path_cost(o, &path_bytes);
	free(inputs);
	printf("cost: %d watched series, %d values each after a warm-up of %u "
	       "(one core; the plugin path includes the snapshot of the registry)\n",
	       o->series, o->rounds, p.n_init);
	printf("  %-34s %10s %14s\n", "", "ns/update", "bytes/series");
	printf("  %-34s %10.1f %14zu   (det_size() %zu; %zu during warm-up)\n",
	       "DSPOT + drift test (det.c)", dc, det_bytes, det_size(&p), warm_bytes);
	printf("  %-34s %10.1f %14zu\n", "mean+3sd (naive)", nc, sizeof(struct naive));
	printf("  %-34s %10.1f %14zu   (series table, labels, detector)\n",
	       "plugin path: snapshot+view+DSPOT", pc, path_bytes);
	printf("  ratio DSPOT / naive: %.1fx time, %.0fx memory; a snapshot of %d "
	       "series costs %.2f ms\n", nc > 0 ? dc / nc : 0.0,
	       (double)det_bytes / sizeof(struct naive), o->series,
	       pc * o->series / 1e6);
}

int main(int argc, char **argv)
{
	struct opts o = { .streams = 30, .series = 10000, .rounds = 300 };

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--smoke") == 0) {
			o.streams = 5;
			o.rounds = 20;
		} else if (i + 1 < argc && strcmp(argv[i], "--streams") == 0) {
			o.streams = atoi(argv[++i]);
		} else if (i + 1 < argc && strcmp(argv[i], "--series") == 0) {
			o.series = atoi(argv[++i]);
		} else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) {
			o.rounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: anomaly_bench [--smoke] [--streams N] "
					"[--series N] [--rounds N]\n");
			return 2;
		}
	}
	if (o.streams < 1 || o.series < 1 || o.rounds < 1) {
		fprintf(stderr, "anomaly_bench: counts must be positive\n");
		return 2;
	}
	quality(&o);
	joint_quality(&o);
	cost(&o);
	return 0;
}
