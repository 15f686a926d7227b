/* SPDX-License-Identifier: MIT */
/*
 * Prometheus exposition encoder: turns what host->metrics_visit() hands out
 * into the text exposition format 0.0.4 or OpenMetrics 1.0.0. Pure code (no
 * HTTP, no core), so tests/unit/test_prometheus.c drives it directly.
 *
 * Use: pe_scrape_init(), then host->metrics_visit(inst, pe_scrape_visit, &s),
 * then pe_scrape_finish(); s.out then holds the whole response body (the
 * kit's string builder: the caller may take it with nt_sb_take()).
 *
 *   expo.c      the format's rules: names, escapes, numbers
 *   negotiate.c text format or OpenMetrics, from the Accept header
 *   scrape.c    one scrape: families rendered as the registry shows them,
 *               families exposed under one name merged
 *
 * Text goes into the kit's string builder (unbounded but by memory): when
 * memory runs out an append fails, the builder's `failed` is set, and the
 * scrape answers 500.
 */
#ifndef NT_PROM_EXPO_H
#define NT_PROM_EXPO_H

#include <stddef.h>
#include <stdint.h>

#include <ntcore/kit/hmap.h>
#include <ntcore/kit/sb.h>
#include <ntcore/plugin.h>

enum pe_format {
	PE_FMT_TEXT = 0,        /* text/plain; version=0.0.4 */
	PE_FMT_OPENMETRICS = 1, /* application/openmetrics-text; version=1.0.0 */
};

#define PE_CONTENT_TYPE_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define PE_CONTENT_TYPE_OPENMETRICS                                            \
	"application/openmetrics-text; version=1.0.0; charset=utf-8"

/* Name of the family the encoder adds for the core's per-family label-set
 * overflow counts. */
#define PE_OVERFLOW_METRIC "ntcore_metric_series_overflow_total"

/*
 * Exposed name of a metric: characters outside [a-zA-Z0-9_:] become '_', a
 * leading digit gets a '_' in front, a name that does not start with
 * "ntcore_" gets that prefix. For counters, the base name lacks "_total":
 * the text format's family and sample name is base + "_total", the
 * OpenMetrics family name is the base and its sample base + "_total".
 * Appends the base name to `out` and returns its length.
 */
size_t pe_base_name(struct nt_sb *out, const char *name, uint32_t type);
/* Label name: invalid characters become '_', a leading digit gets a '_'
 * in front, "__" (reserved) at the start is cut to "_", an empty name is
 * "_", and "le" on a histogram becomes "le_". */
void pe_label_name(struct nt_sb *out, const char *name, int histogram);
/* Label value (text and OpenMetrics): \ " and newline escaped; bytes that
 * are not valid UTF-8 become U+FFFD. NULL is "". */
void pe_label_value(struct nt_sb *out, const char *v);
/* HELP text: \ and newline escaped (OpenMetrics also escapes "), invalid
 * UTF-8 replaced. */
void pe_help(struct nt_sb *out, const char *s, enum pe_format fmt);
/* A sample value: integers exactly, else the shortest of %.15g/%.17g that
 * round-trips; NaN, +Inf, -Inf. Writes into o (>= 32 bytes), returns len. */
size_t pe_fmt_value(char *o, double v);
/* An `le` bound: like a value, but OpenMetrics wants canonical numbers
 * ("1.0", not "1"). */
size_t pe_fmt_le(char *o, double v, enum pe_format fmt);

/* Negotiation: OpenMetrics when `allow_om` and the Accept header names
 * application/openmetrics-text with a q above text/plain's. */
enum pe_format pe_negotiate(const char *accept, int allow_om);

struct pe_segment; /* one family's byte range in `out` (for regrouping) */

struct pe_scrape {
	enum pe_format fmt;
	struct nt_sb out;      /* the response body */
	struct nt_sb overflow; /* overflow family samples, appended at finish */
	struct nt_sb scratch;  /* per-series label text */
	struct nt_sb name;     /* current family base name */
	struct nt_sb lnames;   /* current family's rendered label names */
	size_t *lname_off;     /* n_labels + 1 offsets into lnames */
	uint32_t lname_cap;
	struct nt_sb les;      /* current family's rendered le="..." values */
	size_t *le_off;        /* n_buckets + 2 offsets into les */
	uint32_t le_cap;
	/* Families seen, to merge two families exposed under one name. */
	struct pe_segment *seg;
	uint32_t n_seg, cap_seg;
	struct nt_hmap names; /* exposed name (a copy, freed with the scrape)
			       * -> its first segment (uint32_t) */
	int has_dups;
	/* Totals of this scrape. */
	uint64_t n_families, n_series, n_samples, n_overflow_families;
};

void pe_scrape_init(struct pe_scrape *s, enum pe_format fmt, size_t hint);
/* The nt_metric_visit_fn: renders one family. Returns 0 (or 1 to stop on
 * allocation failure). */
int pe_scrape_visit(void *arg, const struct nt_metric_desc *desc,
		    const struct nt_metric_series *series, uint32_t n_series,
		    uint64_t overflow);
/* Appends the overflow family and, for OpenMetrics, "# EOF". Returns 0, or
 * -ENOMEM when any allocation failed. */
int pe_scrape_finish(struct pe_scrape *s);
void pe_scrape_free(struct pe_scrape *s);

#endif /* NT_PROM_EXPO_H */
