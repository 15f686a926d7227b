/* SPDX-License-Identifier: MIT */
/* The stdout sink's logic: which process's report is shown, and the
 * at-a-glance lines computed from metric families. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glance.h"
#include "reports.h"

static char *print_reports(const struct reports *r, const uint32_t *named, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	reports_print(r, f, named, n, "", "");
	fclose(f);
	return buf;
}

START_TEST(test_report_of_the_job_not_the_shim)
{
	static const char *const type = "mem.report"; /* one pointer per type */
	struct reports r = {0};
	uint32_t job = 100;

	/* the job reports every interval, shims once each at their exit,
	 * the last one after the job's latest */
	for (int i = 0; i < 5; i++)
		reports_keep(&r, type, job, "python3", "job table\n", 10);
	reports_keep(&r, type, 201, "sh", "shim\n", 5);
	reports_keep(&r, type, 202, "readlink", "readlink table\n", 15);
	char *out = print_reports(&r, NULL, 0);
	ck_assert_ptr_nonnull(strstr(out, "── mem.report: pid 100 (python3) ──\njob table\n"));
	ck_assert_ptr_null(strstr(out, "readlink table"));
	ck_assert_ptr_nonnull(strstr(out, "(2 other processes sent mem.report too"));
	free(out);
	/* a process the user named comes first, however often it reported */
	uint32_t named = 202;
	out = print_reports(&r, &named, 1);
	ck_assert_ptr_nonnull(strstr(out, "pid 202 (readlink)"));
	free(out);
	reports_free(&r);
}
END_TEST

START_TEST(test_reports_bounded)
{
	static const char *const type = "x.report";
	struct reports r = {0};

	for (uint32_t pid = 1; pid <= 3 * REPORTS_PER_TYPE; pid++)
		reports_keep(&r, type, pid, "p", "t", 1);
	ck_assert_uint_eq(r.n, REPORTS_PER_TYPE);
	reports_free(&r);
}
END_TEST

/* Visit a family as the core would: one series per (pid, kernel). */
static void visit_launches(struct glance *g, const double *values)
{
	static const char *const names[] = {"pid", "kernel"};
	static const struct nt_metric_desc d = {.name = "ntcore_cuda_launches_total",
						.type = NT_METRIC_COUNTER, .n_labels = 2,
						.label_names = names};
	const char *l0[] = {"1", "vector_add"}, *l1[] = {"2", "vector_add"},
		   *l2[] = {"1", "scale"};
	struct nt_metric_series s[3] = {{.label_values = l0, .value = values[0]},
					{.label_values = l1, .value = values[1]},
					{.label_values = l2, .value = values[2]}};

	glance_begin(g);
	glance_visit(g, &d, s, 3, 0);
}

START_TEST(test_glance_rates_and_top)
{
	const char *specs_v[] = {"ntcore_cuda_launches_total:kernel", "ntcore_absent_total"};
	struct nt_strlist specs = {.v = specs_v, .n = 2};
	struct glance g;
	const char *bad = NULL;
	char *buf = NULL;
	size_t len = 0;

	ck_assert_int_eq(glance_init(&g, &specs, &bad), 0);
	visit_launches(&g, (double[]){100, 50, 10});
	visit_launches(&g, (double[]){600, 550, 30}); /* +1000 vector_add, +20 scale in 2 s */
	FILE *f = open_memstream(&buf, &len);
	glance_print(&g, f, 2.0, 3, false);
	fclose(f);
	ck_assert_str_eq(buf, "  cuda_launches      510/s: vector_add 500/s, scale 10.0/s\n");
	free(buf);
	glance_free(&g);
	const char *bad_v[] = {":kernel"};
	struct nt_strlist bad_specs = {.v = bad_v, .n = 1};
	ck_assert_int_eq(glance_init(&g, &bad_specs, &bad), -22);
	ck_assert_str_eq(bad, ":kernel");
	glance_free(&g);
}
END_TEST

START_TEST(test_glance_gauge_bytes)
{
	static const char *const names[] = {"pid", "device", "kind"};
	static const struct nt_metric_desc d = {.name = "ntcore_cuda_memory_bytes",
						.type = NT_METRIC_GAUGE, .n_labels = 3,
						.label_names = names};
	const char *specs_v[] = {"ntcore_cuda_memory_bytes:device"};
	struct nt_strlist specs = {.v = specs_v, .n = 1};
	const char *l0[] = {"1", "0", "device"}, *l1[] = {"1", "1", "device"};
	struct nt_metric_series s[2] = {{.label_values = l0, .value = 3.0 * (1 << 30)},
					{.label_values = l1, .value = 512.0 * (1 << 20)}};
	struct glance g;
	const char *bad;
	char *buf = NULL;
	size_t len = 0;

	ck_assert_int_eq(glance_init(&g, &specs, &bad), 0);
	glance_begin(&g);
	glance_visit(&g, &d, s, 2, 0);
	FILE *f = open_memstream(&buf, &len);
	glance_print(&g, f, 5.0, 3, false);
	fclose(f);
	ck_assert_str_eq(buf, "  cuda_memory        3.5 GiB: device 0 3.0 GiB, device 1 512.0 MiB\n");
	free(buf);
	glance_free(&g);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stdout");
	TCase *tc = tcase_create("logic");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_report_of_the_job_not_the_shim);
	tcase_add_test(tc, test_reports_bounded);
	tcase_add_test(tc, test_glance_rates_and_top);
	tcase_add_test(tc, test_glance_gauge_bytes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
