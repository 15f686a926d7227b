/* SPDX-License-Identifier: MIT */
/* Unit tests of the Prometheus exposition encoder and the listen parser. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expo.h"
#include "listen.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

static char *lv(const char *v)
{
	static struct nt_sb b;

	nt_sb_fini(&b);
	nt_sb_init(&b, 0);
	pe_label_value(&b, v);
	return (char *)nt_sb_str(&b);
}

static char *base(const char *name, uint32_t type)
{
	static struct nt_sb b;

	nt_sb_fini(&b);
	nt_sb_init(&b, 0);
	pe_base_name(&b, name, type);
	return (char *)nt_sb_str(&b);
}

static char *lname(const char *name, int hist)
{
	static struct nt_sb b;

	nt_sb_fini(&b);
	nt_sb_init(&b, 0);
	pe_label_name(&b, name, hist);
	return (char *)nt_sb_str(&b);
}

static const char *val(double v)
{
	static char o[40];

	pe_fmt_value(o, v);
	return o;
}

static const char *le(double v, enum pe_format f)
{
	static char o[40];

	pe_fmt_le(o, v, f);
	return o;
}

/* A tiny stand-in for the core's visit: a list of families. */
struct fam {
	struct nt_metric_desc d;
	const struct nt_metric_series *s;
	uint32_t n;
	uint64_t overflow;
};

struct stats {
	uint64_t n_families, n_series, n_samples;
};

static char *render(const struct fam *f, size_t nf, enum pe_format fmt,
		    struct stats *out_stats)
{
	struct pe_scrape s;
	size_t len;
	char *body;

	pe_scrape_init(&s, fmt, 0);
	for (size_t i = 0; i < nf; i++)
		ck_assert_int_eq(pe_scrape_visit(&s, &f[i].d, f[i].s, f[i].n,
						 f[i].overflow), 0);
	ck_assert_int_eq(pe_scrape_finish(&s), 0);
	if (out_stats) {
		out_stats->n_families = s.n_families;
		out_stats->n_series = s.n_series;
		out_stats->n_samples = s.n_samples;
	}
	body = nt_sb_take(&s.out, &len);
	ck_assert_uint_eq(strlen(body), len);
	pe_scrape_free(&s);
	return body;
}

/* ------------------------------------------------------------------ */
/* escaping                                                            */
/* ------------------------------------------------------------------ */

START_TEST(test_label_escape)
{
	ck_assert_str_eq(lv("plain"), "plain");
	ck_assert_str_eq(lv(""), "");
	ck_assert_str_eq(lv(NULL), "");
	ck_assert_str_eq(lv("a\\b"), "a\\\\b");
	ck_assert_str_eq(lv("say \"hi\""), "say \\\"hi\\\"");
	ck_assert_str_eq(lv("two\nlines"), "two\\nlines");
	ck_assert_str_eq(lv("\\\"\n"), "\\\\\\\"\\n");
	/* Tabs and other control bytes are legal as they are. */
	ck_assert_str_eq(lv("a\tb"), "a\tb");
	/* UTF-8 kept, invalid bytes replaced by U+FFFD. */
	ck_assert_str_eq(lv("caf\xC3\xA9"), "caf\xC3\xA9");
	ck_assert_str_eq(lv("\xE2\x82\xAC"), "\xE2\x82\xAC");
	ck_assert_str_eq(lv("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
	ck_assert_str_eq(lv("a\xFFz"), "a\xEF\xBF\xBDz");
	ck_assert_str_eq(lv("\xC3"), "\xEF\xBF\xBD");          /* truncated */
	ck_assert_str_eq(lv("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD"); /* overlong */
	ck_assert_str_eq(lv("\xED\xA0\x80"),
			 "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* surrogate */
}
END_TEST

START_TEST(test_help_escape)
{
	struct nt_sb b;

	nt_sb_init(&b, 0);
	pe_help(&b, "a \"q\" \\ b\nc", PE_FMT_TEXT);
	/* 0.0.4: only backslash and newline are escaped in HELP. */
	ck_assert_str_eq(nt_sb_str(&b), "a \"q\" \\\\ b\\nc");
	nt_sb_reset(&b);
	pe_help(&b, "a \"q\" \\ b\nc", PE_FMT_OPENMETRICS);
	ck_assert_str_eq(nt_sb_str(&b), "a \\\"q\\\" \\\\ b\\nc");
	nt_sb_fini(&b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* names                                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_names)
{
	/* Counters lose _total in the base name (added back per format). */
	ck_assert_str_eq(base("ntcore_sched_switches_total", NT_METRIC_COUNTER),
			 "ntcore_sched_switches");
	ck_assert_str_eq(base("ntcore_sched_switches", NT_METRIC_COUNTER),
			 "ntcore_sched_switches");
	/* Non-counters keep it (promtool will flag it, which is right). */
	ck_assert_str_eq(base("ntcore_x_total", NT_METRIC_GAUGE),
			 "ntcore_x_total");
	/* Prefix and character rules. */
	ck_assert_str_eq(base("io_bytes", NT_METRIC_GAUGE), "ntcore_io_bytes");
	ck_assert_str_eq(base("9lives", NT_METRIC_GAUGE), "ntcore_9lives");
	ck_assert_str_eq(base("ntcore_cuda.mem-bytes", NT_METRIC_GAUGE),
			 "ntcore_cuda_mem_bytes");
	ck_assert_str_eq(base("ntcore_\xC3\xA9t\xC3\xA9", NT_METRIC_GAUGE),
			 "ntcore___t__");
	ck_assert_str_eq(base("ntcore_a:b", NT_METRIC_GAUGE), "ntcore_a:b");
	ck_assert_str_eq(base("", NT_METRIC_GAUGE), "ntcore_");

	ck_assert_str_eq(lname("pid", 0), "pid");
	ck_assert_str_eq(lname("kernel-name", 0), "kernel_name");
	ck_assert_str_eq(lname("a:b", 0), "a_b");
	ck_assert_str_eq(lname("1st", 0), "_1st");
	ck_assert_str_eq(lname("__name__", 0), "_name__");
	ck_assert_str_eq(lname("___", 0), "_");
	ck_assert_str_eq(lname("", 0), "_");
	ck_assert_str_eq(lname(NULL, 0), "_");
	ck_assert_str_eq(lname("le", 0), "le");
	ck_assert_str_eq(lname("le", 1), "le_");
}
END_TEST

/* ------------------------------------------------------------------ */
/* numbers                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_values)
{
	ck_assert_str_eq(val(0), "0");
	ck_assert_str_eq(val(-0.0), "0");
	ck_assert_str_eq(val(42), "42");
	ck_assert_str_eq(val(-3), "-3");
	ck_assert_str_eq(val(18446744073709551615.0), "1.8446744073709552e+19");
	ck_assert_str_eq(val(9007199254740991.0), "9007199254740991");
	ck_assert_str_eq(val(9007199254740992.0), "9007199254740992");
	ck_assert_str_eq(val(0.1), "0.1");
	ck_assert_str_eq(val(2.5e-7), "2.5e-07");
	ck_assert_str_eq(val(1.0 / 3), "0.33333333333333331");
	ck_assert_str_eq(val(1e300), "1e+300");
	ck_assert_str_eq(val(NAN), "NaN");
	ck_assert_str_eq(val(INFINITY), "+Inf");
	ck_assert_str_eq(val(-INFINITY), "-Inf");
	/* Round trip of awkward doubles. */
	for (double v = 0.001; v < 1000; v *= 1.37) {
		char o[40];

		pe_fmt_value(o, v);
		ck_assert(strtod(o, NULL) == v);
	}

	ck_assert_str_eq(le(1, PE_FMT_TEXT), "1");
	ck_assert_str_eq(le(1, PE_FMT_OPENMETRICS), "1.0");
	ck_assert_str_eq(le(0.005, PE_FMT_OPENMETRICS), "0.005");
	ck_assert_str_eq(le(1e20, PE_FMT_OPENMETRICS), "1e+20");
	ck_assert_str_eq(le(250, PE_FMT_OPENMETRICS), "250.0");
}
END_TEST

/* ------------------------------------------------------------------ */
/* families                                                            */
/* ------------------------------------------------------------------ */

static const char *const l_pid_comm[] = { "pid", "comm" };
static const char *const s1[] = { "12", "python3" };
static const char *const s2[] = { "13", "a\"b\\c\nd" };

START_TEST(test_counter_gauge_text)
{
	const struct nt_metric_series cs[] = {
		{ .label_values = s1, .value = 7 },
		{ .label_values = s2, .value = 0.25 },
	};
	const struct nt_metric_series gs[] = { { .value = -1.5 } };
	const struct fam f[] = {
		{ .d = { .name = "ntcore_sched_switches_total",
			 .help = "Context switches.", .type = NT_METRIC_COUNTER,
			 .n_labels = 2, .label_names = l_pid_comm },
		  .s = cs, .n = 2 },
		{ .d = { .name = "ntcore_temp_celsius", .help = NULL,
			 .type = NT_METRIC_GAUGE },
		  .s = gs, .n = 1, .overflow = 3 },
	};
	struct stats st;
	char *body = render(f, 2, PE_FMT_TEXT, &st);

	ck_assert_str_eq(body,
		"# HELP ntcore_sched_switches_total Context switches.\n"
		"# TYPE ntcore_sched_switches_total counter\n"
		"ntcore_sched_switches_total{pid=\"12\",comm=\"python3\"} 7\n"
		"ntcore_sched_switches_total{pid=\"13\",comm=\"a\\\"b\\\\c\\nd\"} 0.25\n"
		"# TYPE ntcore_temp_celsius gauge\n"
		"ntcore_temp_celsius -1.5\n"
		"# HELP ntcore_metric_series_overflow_total Updates to label "
		"sets beyond a metric's series limit (max_series), dropped by "
		"the core, per metric.\n"
		"# TYPE ntcore_metric_series_overflow_total counter\n"
		"ntcore_metric_series_overflow_total{metric=\"ntcore_sched_switches_total\"} 0\n"
		"ntcore_metric_series_overflow_total{metric=\"ntcore_temp_celsius\"} 3\n");
	ck_assert_uint_eq(st.n_families, 2);
	ck_assert_uint_eq(st.n_series, 3);
	ck_assert_uint_eq(st.n_samples, 5);
	free(body);
}
END_TEST

START_TEST(test_counter_openmetrics)
{
	const struct nt_metric_series cs[] = {
		{ .label_values = s1, .value = 7 },
	};
	const struct fam f[] = {
		{ .d = { .name = "ntcore_sched_switches_total",
			 .help = "Say \"switch\".", .type = NT_METRIC_COUNTER,
			 .n_labels = 2, .label_names = l_pid_comm },
		  .s = cs, .n = 1 },
	};
	char *body = render(f, 1, PE_FMT_OPENMETRICS, NULL);

	ck_assert_str_eq(body,
		"# HELP ntcore_sched_switches Say \\\"switch\\\".\n"
		"# TYPE ntcore_sched_switches counter\n"
		"ntcore_sched_switches_total{pid=\"12\",comm=\"python3\"} 7\n"
		"# HELP ntcore_metric_series_overflow Updates to label "
		"sets beyond a metric's series limit (max_series), dropped by "
		"the core, per metric.\n"
		"# TYPE ntcore_metric_series_overflow counter\n"
		"ntcore_metric_series_overflow_total{metric=\"ntcore_sched_switches_total\"} 0\n"
		"# EOF\n");
	free(body);
}
END_TEST

static const double bounds[] = { 0.1, 1, 10 };
static const char *const l_dev[] = { "le", "dev" };

START_TEST(test_histogram)
{
	/* Non-cumulative input: 1 in (..0.1], 0 in (0.1..1], 2 in (1..10],
	 * 3 above 10 -> cumulative 1,1,3,6 and count 6. */
	static const uint64_t c1[] = { 1, 0, 2, 3 };
	static const uint64_t c2[] = { 0, 0, 0, 0 };
	static const char *const v1[] = { "x", "8:0" };
	static const char *const v2[] = { "y", "8:16" };
	const struct nt_metric_series hs[] = {
		{ .label_values = v1, .bucket_counts = c1, .count = 6,
		  .sum = 41.5 },
		{ .label_values = v2, .bucket_counts = c2, .count = 0, .sum = 0 },
	};
	const struct fam f[] = {
		{ .d = { .name = "ntcore_io_latency_seconds", .help = "Latency.",
			 .type = NT_METRIC_HISTOGRAM, .n_labels = 2,
			 .label_names = l_dev, .buckets = bounds,
			 .n_buckets = 3 },
		  .s = hs, .n = 2 },
	};
	struct stats st;
	char *body = render(f, 1, PE_FMT_TEXT, &st);

	ck_assert_str_eq(body,
		"# HELP ntcore_io_latency_seconds Latency.\n"
		"# TYPE ntcore_io_latency_seconds histogram\n"
		"ntcore_io_latency_seconds_bucket{le_=\"x\",dev=\"8:0\",le=\"0.1\"} 1\n"
		"ntcore_io_latency_seconds_bucket{le_=\"x\",dev=\"8:0\",le=\"1\"} 1\n"
		"ntcore_io_latency_seconds_bucket{le_=\"x\",dev=\"8:0\",le=\"10\"} 3\n"
		"ntcore_io_latency_seconds_bucket{le_=\"x\",dev=\"8:0\",le=\"+Inf\"} 6\n"
		"ntcore_io_latency_seconds_sum{le_=\"x\",dev=\"8:0\"} 41.5\n"
		"ntcore_io_latency_seconds_count{le_=\"x\",dev=\"8:0\"} 6\n"
		"ntcore_io_latency_seconds_bucket{le_=\"y\",dev=\"8:16\",le=\"0.1\"} 0\n"
		"ntcore_io_latency_seconds_bucket{le_=\"y\",dev=\"8:16\",le=\"1\"} 0\n"
		"ntcore_io_latency_seconds_bucket{le_=\"y\",dev=\"8:16\",le=\"10\"} 0\n"
		"ntcore_io_latency_seconds_bucket{le_=\"y\",dev=\"8:16\",le=\"+Inf\"} 0\n"
		"ntcore_io_latency_seconds_sum{le_=\"y\",dev=\"8:16\"} 0\n"
		"ntcore_io_latency_seconds_count{le_=\"y\",dev=\"8:16\"} 0\n"
		"# HELP ntcore_metric_series_overflow_total Updates to label "
		"sets beyond a metric's series limit (max_series), dropped by "
		"the core, per metric.\n"
		"# TYPE ntcore_metric_series_overflow_total counter\n"
		"ntcore_metric_series_overflow_total{metric=\"ntcore_io_latency_seconds\"} 0\n");
	ck_assert_uint_eq(st.n_samples, 2 * 6 + 1);
	free(body);
}
END_TEST

START_TEST(test_histogram_nolabels_openmetrics)
{
	static const uint64_t c[] = { 2, 3, 0, 1 };
	const struct nt_metric_series hs[] = {
		{ .bucket_counts = c, .count = 6, .sum = 12.25 },
	};
	const struct fam f[] = {
		{ .d = { .name = "ntcore_x_seconds", .help = "X.",
			 .type = NT_METRIC_HISTOGRAM, .buckets = bounds,
			 .n_buckets = 3 },
		  .s = hs, .n = 1 },
	};
	char *body = render(f, 1, PE_FMT_OPENMETRICS, NULL);
	const char *want =
		"# HELP ntcore_x_seconds X.\n"
		"# TYPE ntcore_x_seconds histogram\n"
		"ntcore_x_seconds_bucket{le=\"0.1\"} 2\n"
		"ntcore_x_seconds_bucket{le=\"1.0\"} 5\n"
		"ntcore_x_seconds_bucket{le=\"10.0\"} 5\n"
		"ntcore_x_seconds_bucket{le=\"+Inf\"} 6\n"
		"ntcore_x_seconds_sum 12.25\n"
		"ntcore_x_seconds_count 6\n";

	ck_assert_int_eq(strncmp(body, want, strlen(want)), 0);
	ck_assert_ptr_nonnull(strstr(body, "\n# EOF\n"));
	ck_assert_str_eq(body + strlen(body) - 6, "# EOF\n");
	free(body);
}
END_TEST

START_TEST(test_duplicate_family_merged)
{
	static const char *const l[] = { "inst" };
	static const char *const a[] = { "a" }, *const b[] = { "b" },
				*const c[] = { "c" };
	const struct nt_metric_series sa[] = { { .label_values = a, .value = 1 } };
	const struct nt_metric_series sb[] = { { .label_values = b, .value = 2 } };
	const struct nt_metric_series sc[] = { { .label_values = c, .value = 3 } };
	const struct fam f[] = {
		{ .d = { .name = "ntcore_n_total", .help = "N.",
			 .type = NT_METRIC_COUNTER, .n_labels = 1,
			 .label_names = l },
		  .s = sa, .n = 1 },
		{ .d = { .name = "ntcore_g", .help = "G.",
			 .type = NT_METRIC_GAUGE, .n_labels = 1, .label_names = l },
		  .s = sb, .n = 1 },
		{ .d = { .name = "ntcore_n_total", .help = "N again.",
			 .type = NT_METRIC_COUNTER, .n_labels = 1,
			 .label_names = l },
		  .s = sc, .n = 1, .overflow = 9 },
	};
	char *body = render(f, 3, PE_FMT_TEXT, NULL);
	const char *want =
		"# HELP ntcore_n_total N.\n"
		"# TYPE ntcore_n_total counter\n"
		"ntcore_n_total{inst=\"a\"} 1\n"
		"ntcore_n_total{inst=\"c\"} 3\n"
		"# HELP ntcore_g G.\n"
		"# TYPE ntcore_g gauge\n"
		"ntcore_g{inst=\"b\"} 2\n";

	ck_assert_int_eq(strncmp(body, want, strlen(want)), 0);
	/* One overflow sample per exposed name. */
	ck_assert_ptr_nonnull(strstr(body, "{metric=\"ntcore_n_total\"} 0\n"));
	ck_assert_ptr_null(strstr(body, "{metric=\"ntcore_n_total\"} 9\n"));
	free(body);
}
END_TEST

START_TEST(test_empty_family)
{
	const struct fam f[] = {
		{ .d = { .name = "ntcore_e_total", .help = "E.",
			 .type = NT_METRIC_COUNTER },
		  .s = NULL, .n = 0, .overflow = 5 },
	};
	char *body = render(f, 1, PE_FMT_TEXT, NULL);

	ck_assert_ptr_nonnull(strstr(body, "# TYPE ntcore_e_total counter\n"
					   "# HELP ntcore_metric"));
	ck_assert_ptr_nonnull(
		strstr(body, "ntcore_metric_series_overflow_total"
			     "{metric=\"ntcore_e_total\"} 5\n"));
	free(body);
}
END_TEST

START_TEST(test_many_series)
{
	/* 100k series in 10 families: sizes and counts add up. */
	enum { N = 100000, F = 10 };
	static const char *const ln[] = { "l0", "l1" };
	struct nt_metric_series *ser = calloc(N, sizeof(*ser));
	char (*lab)[16] = calloc(N, sizeof(*lab));
	const char **lvs = calloc(2 * N, sizeof(*lvs));
	struct pe_scrape s;
	size_t lines = 0;

	for (int i = 0; i < N; i++) {
		snprintf(lab[i], sizeof(lab[i]), "s%d", i);
		lvs[2 * i] = lab[i];
		lvs[2 * i + 1] = "v";
		ser[i].label_values = &lvs[2 * i];
		ser[i].value = i;
	}
	pe_scrape_init(&s, PE_FMT_TEXT, 0);
	for (int f = 0; f < F; f++) {
		struct nt_metric_desc d = { .name = "ntcore_many_total",
					    .help = "h", .type = NT_METRIC_COUNTER,
					    .n_labels = 2, .label_names = ln };
		char nm[32];

		snprintf(nm, sizeof(nm), "ntcore_many%d_total", f);
		d.name = nm;
		pe_scrape_visit(&s, &d, ser + f * (N / F), N / F, 0);
	}
	ck_assert_int_eq(pe_scrape_finish(&s), 0);
	ck_assert_uint_eq(s.n_series, N);
	ck_assert_uint_eq(s.n_samples, N + F);
	for (size_t i = 0; i < s.out.len; i++)
		lines += s.out.buf[i] == '\n';
	ck_assert_uint_eq(lines, N + F * 2 + 2 + F);
	{
		const char *w = "ntcore_many9_total{l0=\"s99999\",l1=\"v\"} 99999\n";

		ck_assert_ptr_nonnull(memmem(s.out.buf, s.out.len, w, strlen(w)));
	}
	pe_scrape_free(&s);
	free(ser);
	free(lab);
	free(lvs);
}
END_TEST

/* ------------------------------------------------------------------ */
/* negotiation                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_negotiate)
{
	/* What Prometheus 2.42 sends. */
	const char *prom = "application/openmetrics-text;version=1.0.0,"
			   "application/openmetrics-text;version=0.0.1;q=0.75,"
			   "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

	ck_assert_int_eq(pe_negotiate(prom, 1), PE_FMT_OPENMETRICS);
	ck_assert_int_eq(pe_negotiate(prom, 0), PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate(NULL, 1), PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate("", 1), PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate("*/*", 1), PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate("text/plain", 1), PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate("Application/OpenMetrics-Text", 1),
			 PE_FMT_OPENMETRICS);
	ck_assert_int_eq(pe_negotiate("application/openmetrics-text; q=0.2 , "
				      "text/plain;q=0.9", 1),
			 PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate("text/plain;q=0.3, "
				      "application/openmetrics-text;q=0.4", 1),
			 PE_FMT_OPENMETRICS);
	ck_assert_int_eq(pe_negotiate("application/openmetrics-text;q=0", 1),
			 PE_FMT_TEXT);
	ck_assert_int_eq(pe_negotiate("application/openmetrics-textx", 1),
			 PE_FMT_TEXT);
}
END_TEST

/* ------------------------------------------------------------------ */
/* listen                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_listen_parse)
{
	struct pl_addr a;
	const char *why = NULL;

	ck_assert_int_eq(pl_parse("127.0.0.1:9478", &a, &why), 0);
	ck_assert_str_eq(a.host, "127.0.0.1");
	ck_assert_uint_eq(a.port, 9478);
	ck_assert_int_eq(pl_parse("[::1]:8080", &a, &why), 0);
	ck_assert_str_eq(a.host, "::1");
	ck_assert_uint_eq(a.port, 8080);
	ck_assert_int_eq(pl_parse("[fe80::1%lo]:1", &a, &why), 0);
	ck_assert_str_eq(a.host, "fe80::1%lo");
	ck_assert_int_eq(pl_parse(":9478", &a, &why), 0);
	ck_assert_str_eq(a.host, "");
	ck_assert_int_eq(pl_parse("localhost:0", &a, &why), 0);
	ck_assert_str_eq(a.host, "localhost");
	ck_assert_uint_eq(a.port, 0);

	ck_assert_int_eq(pl_parse("9478", &a, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "missing port"));
	ck_assert_int_eq(pl_parse("::1:9478", &a, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "brackets"));
	ck_assert_int_eq(pl_parse("[::1]", &a, &why), -EINVAL);
	ck_assert_int_eq(pl_parse("[]:1", &a, &why), -EINVAL);
	ck_assert_int_eq(pl_parse("h:", &a, &why), -EINVAL);
	ck_assert_int_eq(pl_parse("h:-1", &a, &why), -EINVAL);
	ck_assert_int_eq(pl_parse("h:65536", &a, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "0 to 65535"));
	ck_assert_int_eq(pl_parse("h:80x", &a, &why), -EINVAL);
	ck_assert_int_eq(pl_parse("", &a, &why), -EINVAL);
	ck_assert_int_eq(pl_parse(NULL, &a, &why), -EINVAL);
}
END_TEST

START_TEST(test_listen_bind_in_use)
{
	struct pl_addr a;
	const char *why;
	char desc[512], again[512], want[64];
	int fd, fd2;
	unsigned port;

	ck_assert_int_eq(pl_parse("127.0.0.1:0", &a, &why), 0);
	fd = pl_bind(&a, desc, sizeof(desc));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(sscanf(desc, "127.0.0.1:%u", &port), 1);
	ck_assert_uint_gt(port, 0);

	a.port = port;
	fd2 = pl_bind(&a, again, sizeof(again));
	ck_assert_int_eq(fd2, -EADDRINUSE);
	snprintf(want, sizeof(want), "cannot listen on 127.0.0.1:%u: address "
		 "already in use", port);
	ck_assert_ptr_nonnull(strstr(again, want));
	close(fd);

	/* IPv6 loopback, when the host has it. */
	ck_assert_int_eq(pl_parse("[::1]:0", &a, &why), 0);
	fd = pl_bind(&a, desc, sizeof(desc));
	if (fd != -EADDRNOTAVAIL && fd != -EAFNOSUPPORT) {
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(strncmp(desc, "[::1]:", 6), 0);
		close(fd);
	}

	ck_assert_int_eq(pl_parse("no-such-host.invalid:1", &a, &why), 0);
	ck_assert_int_lt(pl_bind(&a, desc, sizeof(desc)), 0);
	ck_assert_ptr_nonnull(strstr(desc, "no-such-host.invalid:1"));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("prometheus");
	TCase *t = tcase_create("encoder");

	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_label_escape);
	tcase_add_test(t, test_help_escape);
	tcase_add_test(t, test_names);
	tcase_add_test(t, test_values);
	tcase_add_test(t, test_counter_gauge_text);
	tcase_add_test(t, test_counter_openmetrics);
	tcase_add_test(t, test_histogram);
	tcase_add_test(t, test_histogram_nolabels_openmetrics);
	tcase_add_test(t, test_duplicate_family_merged);
	tcase_add_test(t, test_empty_family);
	tcase_add_test(t, test_many_series);
	tcase_add_test(t, test_negotiate);
	tcase_add_test(t, test_listen_parse);
	tcase_add_test(t, test_listen_bind_in_use);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
