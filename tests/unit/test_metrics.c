/* The metric registry: series, bounded cardinality, histograms, snapshot. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"

static const char *const pid_label[] = {"pid"};
static const double bounds[] = {0.001, 0.01, 0.1};

START_TEST(counters_and_gauges)
{
	struct nt_registry reg;
	const char *why;
	struct nt_metric_desc d = {.name = "ntcore_x_bytes_total", .help = "h",
				   .type = NT_METRIC_COUNTER, .n_labels = 1,
				   .label_names = pid_label};

	nt_registry_init(&reg);
	struct nt_metric *m = nt_registry_register(&reg, &d, &why);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_eq(nt_registry_register(&reg, &d, &why), m);
	const char *a[] = {"1"}, *b[] = {"2"};
	nt_metric_add(m, a, 10);
	nt_metric_add(m, a, 5);
	nt_metric_add(m, b, 1);
	ck_assert_double_eq(nt_metric_value(m, a), 15);
	ck_assert_double_eq(nt_metric_value(m, b), 1);
	nt_metric_remove(m, a);
	ck_assert_double_eq(nt_metric_value(m, a), 0);
	ck_assert_uint_eq(nt_metric_series_count(m), 1);
	ck_assert_double_eq(nt_metric_value(m, b), 1);
	d.type = NT_METRIC_GAUGE;
	ck_assert_ptr_null(nt_registry_register(&reg, &d, &why));
	d.name = "9bad";
	ck_assert_ptr_null(nt_registry_register(&reg, &d, &why));
	ck_assert_str_eq(why, "invalid metric name");
	nt_registry_fini(&reg);
}
END_TEST

START_TEST(cardinality_is_bounded)
{
	struct nt_registry reg;
	const char *why;
	struct nt_metric_desc d = {.name = "ntcore_kernels_total", .help = "h",
				   .type = NT_METRIC_COUNTER, .n_labels = 1,
				   .label_names = pid_label, .max_series = 100};
	char name[32];

	nt_registry_init(&reg);
	struct nt_metric *m = nt_registry_register(&reg, &d, &why);
	for (int i = 0; i < 1000; i++) {
		const char *l[1] = {name};
		snprintf(name, sizeof(name), "k%d", i);
		nt_metric_add(m, l, 1);
	}
	ck_assert_uint_eq(nt_metric_series_count(m), 100);
	ck_assert_uint_eq(nt_metric_overflow(m), 900);
	const char *first[1] = {"k0"}, *last[1] = {"k99"};
	ck_assert_double_eq(nt_metric_value(m, first), 1);
	ck_assert_double_eq(nt_metric_value(m, last), 1);
	nt_registry_fini(&reg);
}
END_TEST

struct seen {
	int families;
	uint64_t buckets[4];
	uint64_t count;
	double sum;
};

static int visit(void *arg, const struct nt_metric_desc *desc,
		 const struct nt_metric_series *series, uint32_t n, uint64_t overflow)
{
	struct seen *s = arg;

	(void)overflow;
	s->families++;
	if (desc->type == NT_METRIC_HISTOGRAM && n == 1) {
		memcpy(s->buckets, series[0].bucket_counts, sizeof(s->buckets));
		s->count = series[0].count;
		s->sum = series[0].sum;
	}
	return 0;
}

START_TEST(histograms)
{
	struct nt_registry reg;
	const char *why;
	struct nt_metric_desc d = {.name = "ntcore_lat_seconds", .help = "h",
				   .type = NT_METRIC_HISTOGRAM, .buckets = bounds,
				   .n_buckets = 3};
	struct seen seen = {0};

	nt_registry_init(&reg);
	struct nt_metric *m = nt_registry_register(&reg, &d, &why);
	ck_assert_ptr_nonnull(m);
	nt_metric_observe(m, NULL, 0.0005);
	nt_metric_observe(m, NULL, 0.001); /* le is inclusive */
	nt_metric_observe(m, NULL, 0.05);
	nt_metric_observe(m, NULL, 7);
	nt_registry_visit(&reg, visit, &seen);
	ck_assert_int_eq(seen.families, 1);
	ck_assert_uint_eq(seen.buckets[0], 2);
	ck_assert_uint_eq(seen.buckets[1], 0);
	ck_assert_uint_eq(seen.buckets[2], 1);
	ck_assert_uint_eq(seen.buckets[3], 1);
	ck_assert_uint_eq(seen.count, 4);
	ck_assert_double_eq_tol(seen.sum, 7.0515, 1e-9);
	const uint64_t counts[4] = {1, 2, 3, 4};
	nt_metric_hist_set(m, NULL, counts, 1.5);
	nt_registry_visit(&reg, visit, &seen);
	ck_assert_uint_eq(seen.count, 10);
	ck_assert_uint_eq(seen.buckets[3], 4);
	d.buckets = (const double[]){1, 1};
	d.name = "ntcore_other_seconds";
	ck_assert_ptr_null(nt_registry_register(&reg, &d, &why));
	ck_assert_str_eq(why, "histogram buckets not ascending");
	nt_registry_fini(&reg);
}
END_TEST

struct other {
	struct nt_metric *b;
	int visited;
};

static void *add_to_b(void *arg)
{
	struct other *o = arg;
	const char *l[1] = {"x"};

	nt_metric_add(o->b, l, 1);
	return NULL;
}

/* While a scrape holds one family, another family's update completes: with
 * a registry-wide lock this join would never return. */
static int visit_and_update_other(void *arg, const struct nt_metric_desc *desc,
				  const struct nt_metric_series *series, uint32_t n,
				  uint64_t overflow)
{
	struct other *o = arg;
	pthread_t t;

	(void)series;
	(void)n;
	(void)overflow;
	if (strcmp(desc->name, "ntcore_a_total") == 0) {
		pthread_create(&t, NULL, add_to_b, o);
		pthread_join(t, NULL);
		o->visited++;
	}
	return 0;
}

START_TEST(a_scrape_holds_one_family_at_a_time)
{
	struct nt_registry reg;
	const char *why;
	struct nt_metric_desc a = {.name = "ntcore_a_total", .help = "h",
				   .type = NT_METRIC_COUNTER, .n_labels = 1,
				   .label_names = pid_label};
	struct nt_metric_desc b = a;
	struct other o = {0};
	const char *l[1] = {"x"};

	b.name = "ntcore_b_total";
	nt_registry_init(&reg);
	nt_metric_add(nt_registry_register(&reg, &a, &why), l, 1);
	o.b = nt_registry_register(&reg, &b, &why);
	nt_registry_visit(&reg, visit_and_update_other, &o);
	ck_assert_int_eq(o.visited, 1);
	ck_assert_double_eq(nt_metric_value(o.b, l), 1);
	nt_registry_fini(&reg);
}
END_TEST

/* Identity labels (issue 21): a fake identity per pid. pids 1-2 share a
 * pod, 3 is a host process. */
static int fake_ident(void *ctx, uint32_t pid, struct nt_identity *out)
{
	(*(int *)ctx)++;
	memset(out, 0, sizeof(*out));
	snprintf(out->cgroup, sizeof(out->cgroup), pid < 3 ? "/kubepods/pod-a/c1" : "/");
	if (pid < 3) {
		snprintf(out->container_id, sizeof(out->container_id), "%064d", 7);
		snprintf(out->runtime, sizeof(out->runtime), "containerd");
		snprintf(out->pod_uid, sizeof(out->pod_uid), "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
		snprintf(out->pod_name, sizeof(out->pod_name), "trainer-0");
		snprintf(out->pod_namespace, sizeof(out->pod_namespace), "ml");
	}
	return 0;
}

struct id_seen {
	char names[256];
	char first[512];
	uint32_t n;
};

static int visit_shape(void *arg, const struct nt_metric_desc *desc,
		       const struct nt_metric_series *series, uint32_t n_series,
		       uint64_t overflow)
{
	struct id_seen *s = arg;

	(void)overflow;
	if (strcmp(desc->name, "ntcore_x_cpu_seconds_total") != 0)
		return 0;
	s->n = n_series;
	for (uint32_t i = 0; i < desc->n_labels; i++) {
		strcat(s->names, desc->label_names[i]);
		strcat(s->names, ",");
	}
	for (uint32_t i = 0; n_series && i < desc->n_labels; i++) {
		strcat(s->first, series[0].label_values[i]);
		strcat(s->first, ",");
	}
	return 0;
}

START_TEST(identity_labels)
{
	static const char *const decl[] = {"pid", "comm", "kind"};
	struct nt_metric_desc d = {.name = "ntcore_x_cpu_seconds_total", .help = "h",
				   .type = NT_METRIC_COUNTER, .n_labels = 3,
				   .label_names = decl, .max_series = 4};
	struct nt_label_policy pol = {.default_mask = NT_IDL_HOSTWIDE, .ident = fake_ident};
	struct nt_registry reg;
	struct id_seen seen = {0};
	const char *why;
	int calls = 0;

	pol.ctx = &calls;
	nt_registry_init(&reg);
	reg.policy = &pol;
	struct nt_metric *m = nt_registry_register(&reg, &d, &why);
	ck_assert_ptr_nonnull(m);
	const char *p1[] = {"1", "python3", "user"}, *p2[] = {"2", "python3", "user"},
		   *p3[] = {"3", "python3", "user"};
	nt_metric_add(m, p1, 1.5);
	nt_metric_add(m, p2, 2.0);
	nt_metric_add(m, p3, 4.0);
	nt_metric_remove(m, p1); /* no pid: the pod's series stays */
	nt_registry_visit(&reg, visit_shape, &seen);
	ck_assert_str_eq(seen.names, "comm,kind,container_id,namespace,pod,uid,");
	ck_assert_uint_eq(seen.n, 2); /* pids 1 and 2 in one series */
	ck_assert_str_eq(seen.first,
			 "python3,user,containerd://0000000000000000000000000000000000000000000000000000000000000007,"
			 "ml,trainer-0,0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0,");
	ck_assert_double_eq(nt_metric_value(m, p2), 3.5);
	ck_assert_double_eq(nt_metric_value(m, p3), 4.0);
	ck_assert_int_eq(calls, 5); /* 3 updates, 2 reads; remove skipped */
	/* a fork storm: 1000 host processes with distinct names stay at the cap */
	for (int i = 0; i < 1000; i++) {
		char pid[16], comm[16];
		snprintf(pid, sizeof(pid), "%d", 100 + i);
		snprintf(comm, sizeof(comm), "w%d", i);
		const char *l[] = {pid, comm, "user"};
		nt_metric_add(m, l, 1);
	}
	ck_assert_uint_eq(nt_metric_series_count(m), 4);
	ck_assert_uint_eq(nt_metric_overflow(m), 998);
	nt_registry_fini(&reg);

	/* gauges set per process add up per pod; an exit takes its part out */
	static const char *const gdecl[] = {"pid", "comm"};
	struct nt_metric_desc g = {.name = "ntcore_x_rss_bytes", .help = "h",
				   .type = NT_METRIC_GAUGE, .n_labels = 2,
				   .label_names = gdecl};
	nt_registry_init(&reg);
	reg.policy = &pol;
	m = nt_registry_register(&reg, &g, &why);
	const char *g1[] = {"1", "python3"}, *g2[] = {"2", "python3"};
	nt_metric_set(m, g1, 100);
	nt_metric_set(m, g2, 50);
	nt_metric_set(m, g1, 120); /* 1 grew: the pod holds 170 */
	ck_assert_double_eq(nt_metric_value(m, g2), 170);
	nt_metric_remove(m, g1);   /* 1 exited: 50 left */
	ck_assert_double_eq(nt_metric_value(m, g2), 50);
	ck_assert_uint_eq(nt_metric_series_count(m), 1);
	/* a gauge that does not add up (a duration): the last value set */
	struct nt_metric_desc st = {.name = "ntcore_x_step_seconds", .help = "h",
				    .type = NT_METRIC_GAUGE, .n_labels = 2,
				    .label_names = gdecl};
	struct nt_metric *sm = nt_registry_register(&reg, &st, &why);
	nt_metric_set(sm, g1, 1.5);
	nt_metric_set(sm, g2, 0.25);
	ck_assert_double_eq(nt_metric_value(sm, g1), 0.25);
	nt_metric_remove(sm, g2);
	ck_assert_uint_eq(nt_metric_series_count(sm), 1);
	/* histograms set from BPF totals add their increments */
	static const double hb[] = {1, 10};
	struct nt_metric_desc h = {.name = "ntcore_x_lat_seconds", .help = "h",
				   .type = NT_METRIC_HISTOGRAM, .n_labels = 1,
				   .label_names = gdecl, .buckets = hb, .n_buckets = 2};
	struct nt_metric *hm = nt_registry_register(&reg, &h, &why);
	const uint64_t c1[] = {1, 2, 0}, c1b[] = {2, 2, 1}, c2[] = {0, 0, 4};
	nt_metric_hist_set(hm, g1, c1, 5.0);
	nt_metric_hist_set(hm, g2, c2, 80.0);
	nt_metric_hist_set(hm, g1, c1b, 30.0);
	ck_assert_double_eq(nt_metric_value(hm, g1), 9); /* 5 from 1, 4 from 2 */
	nt_registry_fini(&reg);

	/* a family rule keeps pid (and adds the cgroup) for one family */
	ck_assert_int_eq(nt_label_policy_add_rule(&pol, "ntcore_x_*", NT_IDL_PID | NT_IDL_CGROUP), 0);
	nt_registry_init(&reg);
	reg.policy = &pol;
	m = nt_registry_register(&reg, &d, &why);
	nt_metric_add(m, p1, 1);
	memset(&seen, 0, sizeof(seen));
	nt_registry_visit(&reg, visit_shape, &seen);
	ck_assert_str_eq(seen.names, "pid,kind,cgroup,");
	ck_assert_str_eq(seen.first, "1,user,/kubepods/pod-a/c1,");
	nt_metric_remove(m, p1);
	ck_assert_uint_eq(nt_metric_series_count(m), 0);
	/* registered again with the declared labels: the same family */
	ck_assert_ptr_eq(nt_registry_register(&reg, &d, &why), m);
	nt_registry_fini(&reg);
	nt_label_policy_free(&pol);
}
END_TEST

START_TEST(label_words)
{
	const char *ok[] = {"comm", "container", "pod"}, *bad[] = {"comm", "node"},
		   *decl[] = {"declared", "pid"}, *why = NULL;
	uint32_t mask;

	ck_assert_int_eq(nt_label_mask_parse(ok, 3, &mask, &why), 0);
	ck_assert_uint_eq(mask, NT_IDL_HOSTWIDE);
	ck_assert_int_eq(nt_label_mask_parse(bad, 2, &mask, &why), -1);
	ck_assert_str_eq(why, "node");
	ck_assert_int_eq(nt_label_mask_parse(decl, 2, &mask, &why), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, counters_and_gauges);
	tcase_add_test(tc, cardinality_is_bounded);
	tcase_add_test(tc, histograms);
	tcase_add_test(tc, a_scrape_holds_one_family_at_a_time);
	tcase_add_test(tc, identity_labels);
	tcase_add_test(tc, label_words);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
