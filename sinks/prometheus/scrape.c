/* SPDX-License-Identifier: MIT */
/*
 * One scrape (see expo.h): each family the registry visits is rendered
 * into the body as it comes, its exposed name recorded in the kit's string
 * map, and families exposed under one name (two plugins registering the
 * same metric) merged into one at finish, in the order their names were
 * first seen, with the HELP/TYPE lines of the first.
 */
#include "expo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pe_segment {
	size_t start, end; /* byte range in out, header included */
	uint32_t next;     /* next segment of the same name + 1, or 0 */
	uint32_t last;     /* (on a group's first) its last segment */
	uint32_t first;    /* the group's first segment */
};

void pe_scrape_init(struct pe_scrape *s, enum pe_format fmt, size_t hint)
{
	memset(s, 0, sizeof(*s));
	s->fmt = fmt;
	nt_sb_init(&s->out, 0);
	nt_sb_init(&s->overflow, 0);
	nt_sb_init(&s->scratch, 0);
	nt_sb_init(&s->name, 0);
	nt_sb_init(&s->lnames, 0);
	nt_sb_init(&s->les, 0);
	nt_hmap_init_str(&s->names, sizeof(uint32_t), 0);
	if (hint)
		nt_sb_reserve(&s->out, hint);
}

void pe_scrape_free(struct pe_scrape *s)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, &s->names); nt_hmap_iter_next(&it);)
		free((void *)((const struct nt_hstr *)it.key)->s);
	nt_hmap_fini(&s->names);
	nt_sb_fini(&s->out);
	nt_sb_fini(&s->overflow);
	nt_sb_fini(&s->scratch);
	nt_sb_fini(&s->name);
	nt_sb_fini(&s->lnames);
	nt_sb_fini(&s->les);
	free(s->lname_off);
	free(s->le_off);
	free(s->seg);
	memset(s, 0, sizeof(*s));
}

/* Nothing more is rendered once the body failed (out of memory). */
static int fail(struct pe_scrape *s)
{
	s->out.failed = true;
	return 1;
}

/* A new segment (zeroed but for its range start) at the end of seg. */
static struct pe_segment *segment_add(struct pe_scrape *s)
{
	struct pe_segment *g;

	if (s->n_seg == s->cap_seg) {
		uint32_t cap = s->cap_seg ? s->cap_seg * 2 : 64;
		struct pe_segment *ng = realloc(s->seg, cap * sizeof(*ng));

		if (!ng)
			return NULL;
		s->seg = ng;
		s->cap_seg = cap;
	}
	g = &s->seg[s->n_seg];
	memset(g, 0, sizeof(*g));
	g->start = g->end = s->out.len;
	g->first = g->last = s->n_seg;
	s->n_seg++;
	return g;
}

/* Index the first segment of a name not seen before; the key's bytes are
 * a copy that lives until pe_scrape_free. */
static int name_index(struct pe_scrape *s, const char *name, size_t n,
		      uint32_t idx)
{
	char *copy = malloc(n ? n : 1);
	struct nt_hstr key = { copy, n };
	uint32_t *first;

	if (!copy)
		return -1;
	memcpy(copy, name, n);
	first = nt_hmap_put(&s->names, &key, NULL);
	if (!first) {
		free(copy);
		return -1;
	}
	*first = idx;
	return 0;
}

/*
 * Record the family now starting at out->len under `name`; returns 1 if a
 * family of the same exposed name was seen before in this scrape (its
 * HELP/TYPE lines are then left out and the segments merged at finish).
 */
static int segment_begin(struct pe_scrape *s, const char *name, size_t n)
{
	struct nt_hstr key = { name, n };
	struct pe_segment *g = segment_add(s), *f;
	uint32_t idx = s->n_seg - 1, *first;

	if (!g)
		return fail(s), 0;
	first = nt_hmap_get(&s->names, &key);
	if (!first) {
		if (name_index(s, name, n, idx))
			fail(s);
		return 0;
	}
	f = &s->seg[*first];
	g->first = *first;
	s->seg[f->last].next = idx + 1;
	f->last = idx;
	s->has_dups = 1;
	return 1;
}

static const char *type_word(uint32_t type)
{
	switch (type) {
	case NT_METRIC_COUNTER:
		return "counter";
	case NT_METRIC_GAUGE:
		return "gauge";
	case NT_METRIC_HISTOGRAM:
		return "histogram";
	default:
		return "unknown";
	}
}

/* Grow an array of size_t offsets to hold n. */
static int offsets_reserve(size_t **off, uint32_t *cap, uint32_t n)
{
	size_t *grown;

	if (*cap >= n)
		return 0;
	grown = realloc(*off, n * sizeof(*grown));
	if (!grown)
		return -1;
	*off = grown;
	*cap = n;
	return 0;
}

/* The family's label names, rendered once into lnames (lname_off[i] is
 * where name i starts, lname_off[n_labels] where the last ends). */
static int render_label_names(struct pe_scrape *s,
			      const struct nt_metric_desc *d, int hist)
{
	if (offsets_reserve(&s->lname_off, &s->lname_cap, d->n_labels + 1))
		return fail(s);
	nt_sb_reset(&s->lnames);
	s->lname_off[0] = 0;
	for (uint32_t i = 0; i < d->n_labels; i++) {
		pe_label_name(&s->lnames,
			      d->label_names ? d->label_names[i] : NULL, hist);
		s->lname_off[i + 1] = s->lnames.len;
	}
	return s->lnames.failed ? fail(s) : 0;
}

/* "{a=\"x\",b=\"y\"" (no closing brace) into scratch; returns 1 if any. */
static int render_labels(struct pe_scrape *s, const struct nt_metric_desc *d,
			 const struct nt_metric_series *ser)
{
	struct nt_sb *b = &s->scratch;
	const char *lnames = nt_sb_str(&s->lnames);
	const size_t *off = s->lname_off;

	nt_sb_reset(b);
	for (uint32_t i = 0; i < d->n_labels; i++) {
		nt_sb_putc(b, i ? ',' : '{');
		nt_sb_put(b, lnames + off[i], off[i + 1] - off[i]);
		nt_sb_put(b, "=\"", 2);
		pe_label_value(b, ser->label_values ? ser->label_values[i] : NULL);
		nt_sb_putc(b, '"');
	}
	if (b->failed) /* the next reset would forget it */
		fail(s);
	return d->n_labels > 0;
}

/*
 * The label strings of a series live wherever the registry allocated them:
 * at 100k series the scrape is bound by cache misses on them. Ask for the
 * pointer arrays a few series ahead and for the strings a little closer.
 */
static inline void prefetch_labels(const struct nt_metric_series *series,
				   uint32_t n, uint32_t i, uint32_t n_labels)
{
	enum { FAR = 16, NEAR = 8 };

	if (i + FAR < n && series[i + FAR].label_values)
		__builtin_prefetch(series[i + FAR].label_values);
	if (i + NEAR < n && series[i + NEAR].label_values)
		for (uint32_t j = 0; j < n_labels && j < 4; j++)
			__builtin_prefetch(series[i + NEAR].label_values[j]);
}

static void put_value(struct nt_sb *b, double v)
{
	char num[40];
	size_t n = pe_fmt_value(num, v);

	nt_sb_putc(b, ' ');
	nt_sb_put(b, num, n);
	nt_sb_putc(b, '\n');
}

static void put_u64(struct nt_sb *b, uint64_t v)
{
	nt_sb_putc(b, ' ');
	nt_sb_u64(b, v);
	nt_sb_putc(b, '\n');
}

/*
 * The family's overflow sample and its HELP/TYPE lines, unless a family
 * of this exposed name came before. One overflow sample per family, zero
 * included, so that an alert on increase() sees the first overflow. (A
 * second family under the same name keeps only the first's.) The text
 * format names a counter family by its sample name, OpenMetrics by the
 * base name (nlen bytes of s->name).
 */
static void family_header(struct pe_scrape *s, const struct nt_metric_desc *d,
			  size_t nlen, uint64_t overflow)
{
	struct nt_sb *o = &s->out;
	const char *name = nt_sb_str(&s->name);
	size_t flen = s->fmt == PE_FMT_OPENMETRICS ||
			      d->type != NT_METRIC_COUNTER ? nlen : s->name.len;

	nt_sb_puts(&s->overflow, PE_OVERFLOW_METRIC "{metric=\"");
	nt_sb_put(&s->overflow, name, s->name.len);
	nt_sb_put(&s->overflow, "\"}", 2);
	put_u64(&s->overflow, overflow);
	s->n_overflow_families++;

	if (d->help && *d->help) {
		nt_sb_put(o, "# HELP ", 7);
		nt_sb_put(o, name, flen);
		nt_sb_putc(o, ' ');
		pe_help(o, d->help, s->fmt);
		nt_sb_putc(o, '\n');
	}
	nt_sb_put(o, "# TYPE ", 7);
	nt_sb_put(o, name, flen);
	nt_sb_putc(o, ' ');
	nt_sb_puts(o, type_word(d->type));
	nt_sb_putc(o, '\n');
}

/* Counter and gauge samples: one line per series. */
static void render_plain(struct pe_scrape *s, const struct nt_metric_desc *d,
			 const struct nt_metric_series *series,
			 uint32_t n_series)
{
	struct nt_sb *o = &s->out;
	const char *name = nt_sb_str(&s->name);

	for (uint32_t i = 0; i < n_series; i++) {
		const struct nt_metric_series *ser = &series[i];

		prefetch_labels(series, n_series, i, d->n_labels);
		nt_sb_put(o, name, s->name.len);
		if (render_labels(s, d, ser)) {
			nt_sb_put(o, s->scratch.buf, s->scratch.len);
			nt_sb_putc(o, '}');
		}
		put_value(o, ser->value);
	}
	s->n_samples += n_series;
}

/* The family's le="..."} strings, once: les, with le_off[b] where bucket
 * b's starts (the last is +Inf). */
static int render_les(struct pe_scrape *s, const struct nt_metric_desc *d)
{
	if (offsets_reserve(&s->le_off, &s->le_cap, d->n_buckets + 2))
		return fail(s);
	nt_sb_reset(&s->les);
	for (uint32_t b = 0; b <= d->n_buckets; b++) {
		char num[40];
		size_t n = b < d->n_buckets ?
			pe_fmt_le(num, d->buckets[b], s->fmt) :
			(memcpy(num, "+Inf", 5), 4);

		s->le_off[b] = s->les.len;
		nt_sb_put(&s->les, "le=\"", 4);
		nt_sb_put(&s->les, num, n);
		nt_sb_put(&s->les, "\"}", 2);
	}
	s->le_off[d->n_buckets + 1] = s->les.len;
	return s->les.failed ? fail(s) : 0;
}

/* name + suffix + the series' labels (has: any) + "}" */
static void put_sample_name(struct pe_scrape *s, size_t nlen,
			    const char *suffix, size_t slen, int has)
{
	struct nt_sb *o = &s->out;

	nt_sb_put(o, nt_sb_str(&s->name), nlen);
	nt_sb_put(o, suffix, slen);
	if (has) {
		nt_sb_put(o, s->scratch.buf, s->scratch.len);
		nt_sb_putc(o, '}');
	}
}

/* One histogram series: cumulative buckets, _sum and _count (the +Inf
 * bucket, so the two always agree). */
static void render_histogram_series(struct pe_scrape *s,
				    const struct nt_metric_desc *d,
				    const struct nt_metric_series *ser,
				    size_t nlen, int has)
{
	struct nt_sb *o = &s->out;
	const char *les = nt_sb_str(&s->les);
	uint64_t cum = 0;

	for (uint32_t b = 0; b <= d->n_buckets; b++) {
		cum += ser->bucket_counts ? ser->bucket_counts[b] : 0;
		nt_sb_put(o, nt_sb_str(&s->name), nlen);
		nt_sb_put(o, "_bucket", 7);
		if (has) {
			nt_sb_put(o, s->scratch.buf, s->scratch.len);
			nt_sb_putc(o, ',');
		} else {
			nt_sb_putc(o, '{');
		}
		nt_sb_put(o, les + s->le_off[b], s->le_off[b + 1] - s->le_off[b]);
		put_u64(o, cum);
	}
	put_sample_name(s, nlen, "_sum", 4, has);
	put_value(o, ser->sum);
	put_sample_name(s, nlen, "_count", 6, has);
	put_u64(o, cum);
}

static int render_histogram(struct pe_scrape *s,
			    const struct nt_metric_desc *d,
			    const struct nt_metric_series *series,
			    uint32_t n_series, size_t nlen)
{
	if (render_les(s, d))
		return 1;
	for (uint32_t i = 0; i < n_series; i++) {
		int has;

		prefetch_labels(series, n_series, i, d->n_labels);
		has = render_labels(s, d, &series[i]);
		render_histogram_series(s, d, &series[i], nlen, has);
	}
	s->n_samples += (uint64_t)n_series * (d->n_buckets + 3);
	return 0;
}

int pe_scrape_visit(void *arg, const struct nt_metric_desc *d,
		    const struct nt_metric_series *series, uint32_t n_series,
		    uint64_t overflow)
{
	struct pe_scrape *s = arg;
	const int hist = d->type == NT_METRIC_HISTOGRAM;
	size_t nlen;

	nt_sb_reset(&s->name);
	nlen = pe_base_name(&s->name, d->name, d->type);
	if (d->type == NT_METRIC_COUNTER)
		nt_sb_put(&s->name, "_total", 6); /* sample name */
	if (s->name.failed)
		return fail(s);
	s->n_families++;
	if (render_label_names(s, d, hist))
		return 1;
	/* The family as a whole is exposed under the text sample name. */
	if (!segment_begin(s, nt_sb_str(&s->name), s->name.len))
		family_header(s, d, nlen, overflow);
	if (!hist) {
		render_plain(s, d, series, n_series);
		s->n_series += n_series;
	} else if (!render_histogram(s, d, series, n_series, nlen)) {
		s->n_series += n_series;
	}
	if (s->n_seg)
		s->seg[s->n_seg - 1].end = s->out.len;
	return s->out.failed ? 1 : 0;
}

/* Rewrite `out` so that segments of one name are adjacent, in the order
 * their names were first seen. */
static int regroup(struct pe_scrape *s)
{
	struct nt_sb nb;

	nt_sb_init(&nb, 0);
	if (!nt_sb_reserve(&nb, s->out.len + 1)) {
		nt_sb_fini(&nb);
		return -1;
	}
	for (uint32_t i = 0; i < s->n_seg; i++) {
		if (s->seg[i].first != i)
			continue;
		for (uint32_t j = i + 1; j; j = s->seg[j - 1].next) {
			struct pe_segment *g = &s->seg[j - 1];

			nt_sb_put(&nb, s->out.buf + g->start, g->end - g->start);
		}
	}
	nt_sb_fini(&s->out);
	s->out = nb;
	return 0;
}

int pe_scrape_finish(struct pe_scrape *s)
{
	const int om = s->fmt == PE_FMT_OPENMETRICS;

	if (s->has_dups && !s->out.failed && regroup(s))
		return -ENOMEM;
	if (s->overflow.len) {
		static const char help[] =
			"Updates to label sets beyond a metric's series limit "
			"(max_series), dropped by the core, per metric.";
		static const char base[] = "ntcore_metric_series_overflow";

		nt_sb_puts(&s->out, "# HELP ");
		nt_sb_puts(&s->out, om ? base : PE_OVERFLOW_METRIC);
		nt_sb_putc(&s->out, ' ');
		nt_sb_puts(&s->out, help);
		nt_sb_puts(&s->out, "\n# TYPE ");
		nt_sb_puts(&s->out, om ? base : PE_OVERFLOW_METRIC);
		nt_sb_puts(&s->out, " counter\n");
		nt_sb_put(&s->out, s->overflow.buf, s->overflow.len);
		s->n_samples += s->n_overflow_families;
	}
	if (om)
		nt_sb_puts(&s->out, "# EOF\n");
	if (s->out.failed || s->overflow.failed)
		return -ENOMEM;
	return 0;
}
