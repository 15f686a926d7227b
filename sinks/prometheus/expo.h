/* SPDX-License-Identifier: MIT */
/*
 * Prometheus exposition encoder: turns what host->metrics_visit() hands out
 * into the text exposition format 0.0.4 or OpenMetrics 1.0.0. Pure code (no
 * HTTP, no core), so tests/unit/test_prometheus.c drives it directly.
 *
 * Use: pe_scrape_init(), then host->metrics_visit(inst, pe_scrape_visit, &s),
 * then pe_scrape_finish(); s.out then holds the whole response body (a
 * malloc'd buffer the caller may steal with pe_buf_steal()).
 */
#ifndef NT_PROM_EXPO_H
#define NT_PROM_EXPO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ntcore/plugin.h>

/* A growable byte buffer. On allocation failure `oom` is set and further
 * appends are ignored (the scrape then answers 500). */
struct pe_buf {
	char *p;
	size_t len, cap;
	int oom;
};

int pe_buf_grow(struct pe_buf *b, size_t need);
void pe_buf_free(struct pe_buf *b);
/* Hand the bytes over (NUL-terminated, caller frees); the buffer is reset. */
char *pe_buf_steal(struct pe_buf *b, size_t *len);

static inline void pe_put(struct pe_buf *b, const char *s, size_t n)
{
	if (b->cap - b->len < n + 1 && pe_buf_grow(b, n + 1))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void pe_putc(struct pe_buf *b, char c)
{
	if (b->cap - b->len < 2 && pe_buf_grow(b, 2))
		return;
	b->p[b->len++] = c;
}

static inline void pe_puts(struct pe_buf *b, const char *s)
{
	pe_put(b, s, strlen(s));
}

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
size_t pe_base_name(struct pe_buf *out, const char *name, uint32_t type);
/* Label name: invalid characters become '_', a leading digit gets a '_'
 * in front, "__" (reserved) at the start is cut to "_", an empty name is
 * "_", and "le" on a histogram becomes "le_". */
void pe_label_name(struct pe_buf *out, const char *name, int histogram);
/* Label value (text and OpenMetrics): \ " and newline escaped; bytes that
 * are not valid UTF-8 become U+FFFD. NULL is "". */
void pe_label_value(struct pe_buf *out, const char *v);
/* HELP text: \ and newline escaped (OpenMetrics also escapes "), invalid
 * UTF-8 replaced. */
void pe_help(struct pe_buf *out, const char *s, enum pe_format fmt);
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
	struct pe_buf out;      /* the response body */
	struct pe_buf overflow; /* overflow family samples, appended at finish */
	struct pe_buf scratch;  /* per-series label text */
	struct pe_buf name;     /* current family base name */
	struct pe_buf les;      /* current family's rendered le="..." values */
	size_t *le_off;         /* n_buckets + 2 offsets into les */
	uint32_t le_cap;
	/* Families seen, to merge two families exposed under one name. */
	struct pe_segment *seg;
	uint32_t n_seg, cap_seg;
	uint32_t *hash; /* open addressing over seg indexes + 1 */
	uint32_t hash_cap;
	struct pe_buf names; /* segment names, NUL-separated */
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
