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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
