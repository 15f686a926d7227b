/* SPDX-License-Identifier: MIT */
/*
 * Prometheus exposition encoder (see expo.h). Written by hand because no
 * Debian C library encodes the exposition format (libprom / prometheus-client-c
 * are not packaged, and they own their registry rather than render ours).
 */
#include "expo.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

struct pe_segment {
	size_t start, end;   /* byte range in out, header included */
	size_t name_off;     /* into scrape.names */
	uint32_t name_len;
	uint32_t next;       /* next segment of the same name + 1, or 0 */
	uint32_t last;       /* (on a group's first) its last segment */
	uint32_t first;      /* the group's first segment */
};

/* ------------------------------------------------------------------ */
/* Buffer                                                              */
/* ------------------------------------------------------------------ */

int pe_buf_grow(struct pe_buf *b, size_t need)
{
	size_t cap;
	char *p;

	if (b->oom)
		return -1;
	if (b->cap - b->len >= need)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < need) {
		if (cap > SIZE_MAX / 2) {
			b->oom = 1;
			return -1;
		}
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void pe_buf_free(struct pe_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

char *pe_buf_steal(struct pe_buf *b, size_t *len)
{
	char *p;

	if (pe_buf_grow(b, 1)) {
		*len = 0;
		return NULL;
	}
	b->p[b->len] = '\0';
	p = b->p;
	*len = b->len;
	memset(b, 0, sizeof(*b));
	return p;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

static int name_char(unsigned char c, int first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	    c == ':')
		return 1;
	return !first && c >= '0' && c <= '9';
}

size_t pe_base_name(struct pe_buf *out, const char *name, uint32_t type)
{
	size_t start = out->len, n = name ? strlen(name) : 0;

	if (type == NT_METRIC_COUNTER && n >= 6 &&
	    memcmp(name + n - 6, "_total", 6) == 0)
		n -= 6;
	if (n < 7 || memcmp(name, "ntcore_", 7) != 0)
		pe_put(out, "ntcore_", 7);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		pe_putc(out, name_char(c, 0) ? (char)c : '_');
	}
	return out->len - start;
}

void pe_label_name(struct pe_buf *out, const char *name, int histogram)
{
	size_t i = 0;

	if (!name || !*name) {
		pe_putc(out, '_');
		return;
	}
	if (histogram && strcmp(name, "le") == 0) {
		pe_puts(out, "le_");
		return;
	}
	if (name[0] == '_' && name[1] == '_') {
		while (name[i + 1] == '_')
			i++; /* keep one '_' */
		if (!name[i + 1]) {
			pe_putc(out, '_');
			return;
		}
	} else if (name[0] >= '0' && name[0] <= '9') {
		pe_putc(out, '_');
	}
	for (; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];

		pe_putc(out, (name_char(c, 0) && c != ':') ? (char)c : '_');
	}
}

/* ------------------------------------------------------------------ */
/* Escaping                                                            */
/* ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return (s[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
			return 0;
		if (c == 0xE0 && s[1] < 0xA0)
			return 0; /* overlong */
		if (c == 0xED && s[1] >= 0xA0)
			return 0; /* surrogate */
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
		    (s[3] & 0xC0) != 0x80)
			return 0;
		if (c == 0xF0 && s[1] < 0x90)
			return 0;
		if (c == 0xF4 && s[1] >= 0x90)
			return 0;
		return 4;
	}
	return 0;
}

static void escape(struct pe_buf *out, const char *v, int quote)
{
	const unsigned char *s = (const unsigned char *)v, *run = s;

	if (!v)
		return;
	for (;;) {
		unsigned char c = *s;
		size_t n;

		/* Fast path: plain printable ASCII. */
		if (c >= 0x20 && c < 0x80 && c != '\\' && c != '"') {
			s++;
			continue;
		}
		if (c == '"' && !quote) {
			s++;
			continue;
		}
		pe_put(out, (const char *)run, (size_t)(s - run));
		if (c == 0)
			return;
		if (c == '\\') {
			pe_put(out, "\\\\", 2);
			s++;
		} else if (c == '"') {
			pe_put(out, "\\\"", 2);
			s++;
		} else if (c == '\n') {
			pe_put(out, "\\n", 2);
			s++;
		} else if ((n = utf8_len(s)) != 0) {
			pe_put(out, (const char *)s, n);
			s += n;
		} else {
			pe_put(out, "\xEF\xBF\xBD", 3); /* U+FFFD */
			s++;
		}
		run = s;
	}
}

void pe_label_value(struct pe_buf *out, const char *v)
{
	escape(out, v, 1);
}

void pe_help(struct pe_buf *out, const char *s, enum pe_format fmt)
{
	escape(out, s, fmt == PE_FMT_OPENMETRICS);
}

/* ------------------------------------------------------------------ */
/* Numbers                                                             */
/* ------------------------------------------------------------------ */

static size_t fmt_u64(char *o, uint64_t v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		o[i] = tmp[n - 1 - i];
	o[n] = '\0';
	return n;
}

size_t pe_fmt_value(char *o, double v)
{
	int n;

	if (isnan(v)) {
		memcpy(o, "NaN", 4);
		return 3;
	}
	if (isinf(v)) {
		memcpy(o, v > 0 ? "+Inf" : "-Inf", 5);
		return 4;
	}
	if (fabs(v) < 9007199254740992.0 && v == (double)(int64_t)v) {
		int64_t i = (int64_t)v;

		if (i < 0) {
			o[0] = '-';
			return 1 + fmt_u64(o + 1, (uint64_t)-i);
		}
		return fmt_u64(o, (uint64_t)i);
	}
	n = snprintf(o, 32, "%.15g", v);
	if (strtod(o, NULL) != v)
		n = snprintf(o, 32, "%.17g", v);
	return (size_t)n;
}

size_t pe_fmt_le(char *o, double v, enum pe_format fmt)
{
	size_t n = pe_fmt_value(o, v);

	/* OpenMetrics canonical numbers: an integral value has ".0". */
	if (fmt == PE_FMT_OPENMETRICS && !isnan(v) && !isinf(v) &&
	    !strpbrk(o, ".eE")) {
		memcpy(o + n, ".0", 3);
		n += 2;
	}
	return n;
}

/* ------------------------------------------------------------------ */
/* Negotiation                                                         */
/* ------------------------------------------------------------------ */

enum pe_format pe_negotiate(const char *accept, int allow_om)
{
	double q_om = 0, q_text = 0;
	const char *p = accept;

	if (!allow_om || !accept)
		return PE_FMT_TEXT;
	while (*p) {
		const char *end = strchr(p, ','), *semi;
		size_t len, tlen;
		double q = 1.0;

		if (!end)
			end = p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		len = (size_t)(end - p);
		semi = memchr(p, ';', len);
		tlen = semi ? (size_t)(semi - p) : len;
		while (tlen && (p[tlen - 1] == ' ' || p[tlen - 1] == '\t'))
			tlen--;
		for (const char *a = semi; a && a < end;) {
			const char *nx;

			a++;
			while (a < end && (*a == ' ' || *a == '\t'))
				a++;
			if (end - a > 2 && (a[0] == 'q' || a[0] == 'Q') &&
			    a[1] == '=')
				q = strtod(a + 2, NULL);
			nx = memchr(a, ';', (size_t)(end - a));
			a = nx;
		}
		if (tlen == 28 &&
		    strncasecmp(p, "application/openmetrics-text", 28) == 0) {
			if (q > q_om)
				q_om = q;
		} else if ((tlen == 10 && strncasecmp(p, "text/plain", 10) == 0) ||
			   (tlen == 6 && strncasecmp(p, "text/*", 6) == 0) ||
			   (tlen == 3 && strncmp(p, "*/*", 3) == 0)) {
			if (q > q_text)
				q_text = q;
		}
		p = *end ? end + 1 : end;
	}
	return q_om > 0 && q_om >= q_text ? PE_FMT_OPENMETRICS : PE_FMT_TEXT;
}

/* ------------------------------------------------------------------ */
/* Scrape                                                              */
/* ------------------------------------------------------------------ */

void pe_scrape_init(struct pe_scrape *s, enum pe_format fmt, size_t hint)
{
	memset(s, 0, sizeof(*s));
	s->fmt = fmt;
	if (hint)
		pe_buf_grow(&s->out, hint);
}

void pe_scrape_free(struct pe_scrape *s)
{
	pe_buf_free(&s->out);
	pe_buf_free(&s->overflow);
	pe_buf_free(&s->scratch);
	pe_buf_free(&s->name);
	pe_buf_free(&s->les);
	pe_buf_free(&s->names);
	free(s->le_off);
	free(s->seg);
	free(s->hash);
	memset(s, 0, sizeof(*s));
}

static uint32_t hash_name(const char *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	return h;
}

static int rehash(struct pe_scrape *s, uint32_t cap)
{
	uint32_t *h = calloc(cap, sizeof(*h));

	if (!h)
		return -1;
	for (uint32_t i = 0; i < s->n_seg; i++) {
		struct pe_segment *g = &s->seg[i];
		uint32_t k;

		if (g->first != i)
			continue;
		k = hash_name(s->names.p + g->name_off, g->name_len) & (cap - 1);
		while (h[k])
			k = (k + 1) & (cap - 1);
		h[k] = i + 1;
	}
	free(s->hash);
	s->hash = h;
	s->hash_cap = cap;
	return 0;
}

/*
 * Record the family now starting at out->len under `name`; returns 1 if a
 * family of the same exposed name was seen before in this scrape (its
 * HELP/TYPE lines are then left out and the segments merged at finish).
 */
static int segment_begin(struct pe_scrape *s, const char *name, size_t n)
{
	struct pe_segment *g;
	uint32_t k, idx = s->n_seg;

	if (s->n_seg == s->cap_seg) {
		uint32_t cap = s->cap_seg ? s->cap_seg * 2 : 64;
		struct pe_segment *ng = realloc(s->seg, cap * sizeof(*ng));

		if (!ng) {
			s->out.oom = 1;
			return 0;
		}
		s->seg = ng;
		s->cap_seg = cap;
	}
	if ((s->n_seg + 1) * 2 > s->hash_cap &&
	    rehash(s, s->hash_cap ? s->hash_cap * 2 : 128)) {
		s->out.oom = 1;
		return 0;
	}
	g = &s->seg[idx];
	memset(g, 0, sizeof(*g));
	g->start = g->end = s->out.len;
	g->first = idx;
	g->last = idx;
	s->n_seg++;

	k = hash_name(name, n) & (s->hash_cap - 1);
	while (s->hash[k]) {
		struct pe_segment *f = &s->seg[s->hash[k] - 1];

		if (f->name_len == n &&
		    memcmp(s->names.p + f->name_off, name, n) == 0) {
			g->first = s->hash[k] - 1;
			g->name_off = f->name_off;
			g->name_len = (uint32_t)n;
			s->seg[f->last].next = idx + 1;
			f->last = idx;
			s->has_dups = 1;
			return 1;
		}
		k = (k + 1) & (s->hash_cap - 1);
	}
	g->name_off = s->names.len;
	g->name_len = (uint32_t)n;
	pe_put(&s->names, name, n);
	if (s->names.oom)
		s->out.oom = 1;
	s->hash[k] = idx + 1;
	return 0;
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

/* "{a=\"x\",b=\"y\"" (no closing brace) into scratch; returns 1 if any. */
static int render_labels(struct pe_scrape *s, const struct nt_metric_desc *d,
			 const char *lnames, const size_t *lname_off,
			 const struct nt_metric_series *ser)
{
	struct pe_buf *b = &s->scratch;

	b->len = 0;
	for (uint32_t i = 0; i < d->n_labels; i++) {
		pe_putc(b, i ? ',' : '{');
		pe_put(b, lnames + lname_off[i], lname_off[i + 1] - lname_off[i]);
		pe_put(b, "=\"", 2);
		pe_label_value(b, ser->label_values ? ser->label_values[i] : NULL);
		pe_putc(b, '"');
	}
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

static void put_value(struct pe_buf *b, double v)
{
	char num[40];
	size_t n = pe_fmt_value(num, v);

	pe_putc(b, ' ');
	pe_put(b, num, n);
	pe_putc(b, '\n');
}

static void put_u64(struct pe_buf *b, uint64_t v)
{
	char num[24];
	size_t n = fmt_u64(num, v);

	pe_putc(b, ' ');
	pe_put(b, num, n);
	pe_putc(b, '\n');
}

int pe_scrape_visit(void *arg, const struct nt_metric_desc *d,
		    const struct nt_metric_series *series, uint32_t n_series,
		    uint64_t overflow)
{
	struct pe_scrape *s = arg;
	struct pe_buf *o = &s->out;
	const int om = s->fmt == PE_FMT_OPENMETRICS;
	const int hist = d->type == NT_METRIC_HISTOGRAM;
	const int counter = d->type == NT_METRIC_COUNTER;
	size_t lname_off_stack[17], *lname_off = lname_off_stack;
	struct pe_buf lnames = { 0 };
	const char *name;
	size_t nlen;
	int dup;

	s->name.len = 0;
	nlen = pe_base_name(&s->name, d->name, d->type);
	if (counter)
		pe_put(&s->name, "_total", 6); /* sample name */
	if (s->name.oom) {
		s->out.oom = 1;
		return 1;
	}
	name = s->name.p;

	s->n_families++;

	/* Label names, rendered once per family. */
	if (d->n_labels + 1 > NT_ARRAY_LEN(lname_off_stack)) {
		lname_off = malloc((d->n_labels + 1) * sizeof(*lname_off));
		if (!lname_off) {
			s->out.oom = 1;
			return 1;
		}
	}
	lname_off[0] = 0;
	for (uint32_t i = 0; i < d->n_labels; i++) {
		pe_label_name(&lnames, d->label_names ? d->label_names[i] : NULL,
			      hist);
		lname_off[i + 1] = lnames.len;
	}

	/* The family as a whole is exposed under the text sample name, the
	 * OpenMetrics family name drops a counter's _total. */
	dup = segment_begin(s, name, s->name.len);
	if (!dup) {
		/* One overflow sample per family, zero included, so that an
		 * alert on increase() sees the first overflow. (A second
		 * family under the same name keeps only the first's.) */
		pe_puts(&s->overflow, PE_OVERFLOW_METRIC "{metric=\"");
		pe_put(&s->overflow, name, s->name.len);
		pe_put(&s->overflow, "\"}", 2);
		put_u64(&s->overflow, overflow);
		s->n_overflow_families++;

		size_t flen = om || !counter ? nlen : s->name.len;

		if (d->help && *d->help) {
			pe_put(o, "# HELP ", 7);
			pe_put(o, name, flen);
			pe_putc(o, ' ');
			pe_help(o, d->help, s->fmt);
			pe_putc(o, '\n');
		}
		pe_put(o, "# TYPE ", 7);
		pe_put(o, name, flen);
		pe_putc(o, ' ');
		pe_puts(o, type_word(d->type));
		pe_putc(o, '\n');
	}

	if (!hist) {
		for (uint32_t i = 0; i < n_series; i++) {
			const struct nt_metric_series *ser = &series[i];

			prefetch_labels(series, n_series, i, d->n_labels);

			pe_put(o, name, s->name.len);
			if (render_labels(s, d, lnames.p, lname_off, ser)) {
				pe_put(o, s->scratch.p, s->scratch.len);
				pe_putc(o, '}');
			}
			put_value(o, ser->value);
		}
		s->n_samples += n_series;
	} else {
		/* le="..." strings once per family. */
		if (s->le_cap < d->n_buckets + 2) {
			size_t *lo = realloc(s->le_off,
					     (d->n_buckets + 2) * sizeof(*lo));

			if (!lo) {
				s->out.oom = 1;
				goto out;
			}
			s->le_off = lo;
			s->le_cap = d->n_buckets + 2;
		}
		s->les.len = 0;
		for (uint32_t b = 0; b <= d->n_buckets; b++) {
			char num[40];
			size_t n = b < d->n_buckets ?
				pe_fmt_le(num, d->buckets[b], s->fmt) :
				(memcpy(num, "+Inf", 5), 4);

			s->le_off[b] = s->les.len;
			pe_put(&s->les, "le=\"", 4);
			pe_put(&s->les, num, n);
			pe_put(&s->les, "\"}", 2);
		}
		s->le_off[d->n_buckets + 1] = s->les.len;
		if (s->les.oom) {
			s->out.oom = 1;
			goto out;
		}

		for (uint32_t i = 0; i < n_series; i++) {
			const struct nt_metric_series *ser = &series[i];
			int has;

			prefetch_labels(series, n_series, i, d->n_labels);
			has = render_labels(s, d, lnames.p, lname_off, ser);
			uint64_t cum = 0;

			for (uint32_t b = 0; b <= d->n_buckets; b++) {
				cum += ser->bucket_counts ? ser->bucket_counts[b] : 0;
				pe_put(o, name, nlen);
				pe_put(o, "_bucket", 7);
				if (has) {
					pe_put(o, s->scratch.p, s->scratch.len);
					pe_putc(o, ',');
				} else {
					pe_putc(o, '{');
				}
				pe_put(o, s->les.p + s->le_off[b],
				       s->le_off[b + 1] - s->le_off[b]);
				put_u64(o, cum);
			}
			/* _sum and _count; count is the +Inf bucket, so the
			 * two always agree. */
			pe_put(o, name, nlen);
			pe_put(o, "_sum", 4);
			if (has) {
				pe_put(o, s->scratch.p, s->scratch.len);
				pe_putc(o, '}');
			}
			put_value(o, ser->sum);
			pe_put(o, name, nlen);
			pe_put(o, "_count", 6);
			if (has) {
				pe_put(o, s->scratch.p, s->scratch.len);
				pe_putc(o, '}');
			}
			put_u64(o, cum);
		}
		s->n_samples += (uint64_t)n_series * (d->n_buckets + 3);
	}
	s->n_series += n_series;
out:
	if (s->n_seg)
		s->seg[s->n_seg - 1].end = o->len;
	if (lname_off != lname_off_stack)
		free(lname_off);
	pe_buf_free(&lnames);
	if (s->scratch.oom)
		s->out.oom = 1;
	return s->out.oom ? 1 : 0;
}

/* Rewrite `out` so that segments of one name are adjacent, in the order
 * their names were first seen. */
static int regroup(struct pe_scrape *s)
{
	struct pe_buf nb = { 0 };

	if (pe_buf_grow(&nb, s->out.len + 1))
		return -1;
	for (uint32_t i = 0; i < s->n_seg; i++) {
		if (s->seg[i].first != i)
			continue;
		for (uint32_t j = i + 1; j; j = s->seg[j - 1].next) {
			struct pe_segment *g = &s->seg[j - 1];

			pe_put(&nb, s->out.p + g->start, g->end - g->start);
		}
	}
	pe_buf_free(&s->out);
	s->out = nb;
	return 0;
}

int pe_scrape_finish(struct pe_scrape *s)
{
	const int om = s->fmt == PE_FMT_OPENMETRICS;

	if (s->has_dups && !s->out.oom && regroup(s))
		return -ENOMEM;
	if (s->overflow.len) {
		static const char help[] =
			"Updates to label sets beyond a metric's series limit "
			"(max_series), dropped by the core, per metric.";
		static const char base[] = "ntcore_metric_series_overflow";

		pe_puts(&s->out, "# HELP ");
		pe_puts(&s->out, om ? base : PE_OVERFLOW_METRIC);
		pe_putc(&s->out, ' ');
		pe_puts(&s->out, help);
		pe_puts(&s->out, "\n# TYPE ");
		pe_puts(&s->out, om ? base : PE_OVERFLOW_METRIC);
		pe_puts(&s->out, " counter\n");
		pe_put(&s->out, s->overflow.p, s->overflow.len);
		s->n_samples += s->n_overflow_families;
	}
	if (om)
		pe_puts(&s->out, "# EOF\n");
	if (s->out.oom || s->overflow.oom)
		return -ENOMEM;
	return 0;
}
