/* SPDX-License-Identifier: MIT */
#include "timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/kit/hmap.h"

#include "det_util.h"

void tl_init(struct timeline *t, uint32_t pid, int32_t dev, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->dev = dev;
	t->max = max ? max : 50000;
}

void tl_fini(struct timeline *t)
{
	free(t->r);
	t->r = NULL;
	t->n = t->cap = 0;
}

static struct tl_rec *tl_push(struct timeline *t, uint64_t ts)
{
	if (!t->t_first || ts < t->t_first)
		t->t_first = ts;
	if (ts > t->t_last)
		t->t_last = ts;
	if (t->n >= t->max) {
		t->dropped++;
		return NULL;
	}
	if (t->n == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 256;
		struct tl_rec *nr;

		if (nc > t->max)
			nc = t->max;
		nr = realloc(t->r, (size_t)nc * sizeof(*nr));
		if (!nr) {
			t->dropped++;
			return NULL;
		}
		t->r = nr;
		t->cap = nc;
	}
	memset(&t->r[t->n], 0, sizeof(t->r[0]));
	return &t->r[t->n++];
}

uint32_t tl_alloc(struct timeline *t, uint64_t ptr, uint64_t size,
		  uint64_t ts, uint32_t stack)
{
	struct tl_rec *r = tl_push(t, ts);

	if (!r)
		return UINT32_MAX;
	r->ptr = ptr;
	r->size = size;
	r->t0 = ts;
	r->stack = stack;
	return (uint32_t)(r - t->r);
}

void tl_free(struct timeline *t, uint32_t idx, uint64_t ts)
{
	if (ts > t->t_last)
		t->t_last = ts;
	if (idx < t->n && !t->r[idx].failed)
		t->r[idx].t1 = ts ? ts : 1;
}

void tl_failed(struct timeline *t, uint64_t size, uint64_t ts, uint32_t stack)
{
	struct tl_rec *r = tl_push(t, ts);

	if (!r)
		return;
	r->size = size;
	r->t0 = r->t1 = ts;
	r->stack = stack;
	r->failed = 1;
}

/* ---------------------------------------------------------------- */

struct cluster {
	uint64_t lo, hi;   /* address range */
	double y_lo, y_hi; /* pixel rows (y_lo is the bottom, larger value) */
};

static int cmp_rec_ptr(const void *a, const void *b)
{
	const struct tl_rec *const *x = a, *const *y = b;

	return ((*x)->ptr > (*y)->ptr) - ((*x)->ptr < (*y)->ptr);
}

/* Merges the address ranges ever used into clusters; gaps up to
 * `merge_gap` stay inside a cluster (they are real holes). */
static size_t build_clusters(const struct timeline *t, struct cluster **out)
{
	const struct tl_rec **v;
	struct cluster *c;
	size_t nv = 0, nc = 0;
	uint64_t used = 0, merge_gap;

	*out = NULL;
	v = malloc((size_t)(t->n ? t->n : 1) * sizeof(*v));
	c = malloc((size_t)(t->n ? t->n : 1) * sizeof(*c));
	if (!v || !c) {
		free(v);
		free(c);
		return 0;
	}
	for (uint32_t i = 0; i < t->n; i++)
		if (!t->r[i].failed && t->r[i].size)
			v[nv++] = &t->r[i];
	qsort(v, nv, sizeof(*v), cmp_rec_ptr);
	/* pass 1: touching ranges, to know how much address space is used */
	for (size_t i = 0; i < nv; i++) {
		uint64_t a = v[i]->ptr, b = v[i]->ptr + v[i]->size;

		if (nc && a <= c[nc - 1].hi) {
			if (b > c[nc - 1].hi)
				c[nc - 1].hi = b;
		} else {
			c[nc].lo = a;
			c[nc].hi = b;
			nc++;
		}
	}
	for (size_t i = 0; i < nc; i++)
		used += c[i].hi - c[i].lo;
	/* pass 2: close gaps small against the whole (2 MiB or 5 %) */
	merge_gap = used / 20;
	if (merge_gap < (2ULL << 20))
		merge_gap = 2ULL << 20;
	{
		size_t k = 0;

		for (size_t i = 0; i < nc; i++) {
			if (k && c[i].lo - c[k - 1].hi <= merge_gap)
				c[k - 1].hi = c[i].hi;
			else
				c[k++] = c[i];
		}
		nc = k;
	}
	free(v);
	*out = c;
	return nc;
}

static double addr_y(const struct cluster *c, size_t nc, uint64_t a)
{
	size_t lo = 0, hi = nc;

	/* the cluster whose lo <= a */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (c[mid].lo <= a)
			lo = mid;
		else
			hi = mid;
	}
	if (a <= c[lo].lo)
		return c[lo].y_lo;
	if (a >= c[lo].hi)
		return c[lo].y_hi;
	return c[lo].y_lo - (c[lo].y_lo - c[lo].y_hi) *
				    ((double)(a - c[lo].lo) /
				     (double)(c[lo].hi - c[lo].lo));
}

static double nice_step(double range, int ticks)
{
	double raw = range / ticks, p = pow(10, floor(log10(raw))), m = raw / p;

	if (m < 1.5)
		return p;
	if (m < 3.5)
		return 2 * p;
	if (m < 7.5)
		return 5 * p;
	return 10 * p;
}

#define SVG_W 1280
#define SVG_H 800
#define PL 150  /* plot left */
#define PR 30
#define PT 90   /* plot top */
#define PB 150  /* room under the plot */

/* What the sections of the timeline's SVG share. */
struct svg {
	FILE *f;
	const struct timeline *t;
	struct cluster *c;
	size_t nc;
	double W, H, span_s, brk;
	uint64_t tmin, tmax;
	struct nt_sb sb;
	unsigned nfail;
};

/* vertical layout: clusters stacked bottom-up, gaps collapsed */
static void svg_layout(struct svg *g)
{
	size_t nc = g->nc;
	const double H = g->H;
	double brk = g->brk;
	double avail, total = 0, y;
	const struct cluster *c = g->c;

	if (nc > 1) {
		g->brk = brk = 120.0 / (double)(nc - 1);
		if (brk > 14)
			g->brk = brk = 14;
	}
	avail = H - brk * (double)(nc ? nc - 1 : 0);
	for (size_t i = 0; i < nc; i++)
		total += (double)(c[i].hi - c[i].lo);
	y = PT + H;
	for (size_t i = 0; i < nc; i++) {
		double h = total > 0 ? avail * (double)(c[i].hi - c[i].lo) / total : 0;

		g->c[i].y_lo = y;
		g->c[i].y_hi = y - h;
		y -= h + brk;
	}
}

/* the title and the fragmentation reading */
static void svg_header(struct svg *g, const char *title, const struct frag_stats *fs, uint64_t fs_ts)
{
	FILE *f = g->f;
	uint64_t tmin = g->tmin;
	struct nt_sb sb = g->sb;
	char b1[32];
	char b2[32];
	char line[512];

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		   "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
		   "font-size=\"12\">\n",
		SVG_W, SVG_H, SVG_W, SVG_H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
	sb_xml_str(&sb, title ? title : "CUDA memory timeline");
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"18\" font-weight=\"bold\">%s</text>\n",
		PL, nt_sb_str(&sb));
	nt_sb_reset(&sb);
	if (fs) {
		frag_reading(fs, line, sizeof(line));
		sb_xml_str(&sb, line);
		char when[64];

		if (fs_ts && fs_ts >= tmin)
			snprintf(when, sizeof(when), "worst fragmentation, at %.3f s",
				 (double)(fs_ts - tmin) / 1e9);
		else
			snprintf(when, sizeof(when), "fragmentation at the end");
		fprintf(f, "<text x=\"%d\" y=\"44\">%s: score %.0f/100, "
			   "external %.2f, %" PRIu64 " holes, free in span %s, largest hole %s, "
			   "span %s</text>\n",
			PL, when, fs->score, fs->external, fs->holes,
			fmt_bytes(fs->free_bytes, b1, sizeof(b1)),
			fmt_bytes(fs->largest_hole, b2, sizeof(b2)),
			fmt_bytes(fs->span, line + 400, 32));
		{
			/* the reading on one or two lines (split at "; " or ": ") */
			const char *r = nt_sb_str(&sb), *cut = NULL;
			size_t n = strlen(r);

			if (n > 150) {
				for (const char *q = r + 60; q < r + n - 20; q++)
					if ((q[0] == ';' || q[0] == ':') && q[1] == ' ' &&
					    q - r <= 150 && !memchr(q - 6, '&', 6))
						cut = q + 1;
			}
			fprintf(f, "<text x=\"%d\" y=\"62\" fill=\"%s\">%.*s</text>\n", PL,
				fs->score >= 70 ? "#b00000" : "#333333",
				(int)(cut ? (size_t)(cut - r) : n), r);
			if (cut)
				fprintf(f, "<text x=\"%d\" y=\"77\" fill=\"%s\">%s</text>\n",
					PL + 12, fs->score >= 70 ? "#b00000" : "#333333",
					cut + 1);
		}
		nt_sb_reset(&sb);
	}
	g->sb = sb;
}

/* the plot frame, each cluster's band and address labels */
static void svg_clusters(struct svg *g)
{
	FILE *f = g->f;
	const struct cluster *c = g->c;
	size_t nc = g->nc;
	const double W = g->W;
	const double H = g->H;
	double brk = g->brk;
	char b1[32];

	/* plot frame */
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" "
		   "fill=\"#f7f7f7\" stroke=\"#888888\"/>\n", PL, PT, W, H);
	/* clusters: background band and address labels */
	for (size_t i = 0; i < nc; i++) {
		fprintf(f, "<rect x=\"%d\" y=\"%.2f\" width=\"%.0f\" height=\"%.2f\" "
			   "fill=\"#ffffff\" stroke=\"#dddddd\"/>\n",
			PL, c[i].y_hi, W, c[i].y_lo - c[i].y_hi);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
			   "font-size=\"10\">0x%" PRIx64 "</text>\n",
			PL - 6, c[i].y_lo, c[i].lo);
		if (c[i].y_lo - c[i].y_hi > 24)
			fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
				   "font-size=\"10\">0x%" PRIx64 "</text>\n",
				PL - 6, c[i].y_hi + 10, c[i].hi);
		if (i + 1 < nc && brk >= 4)
			fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" "
				   "stroke=\"#aaaaaa\" stroke-dasharray=\"6,4\"><title>"
				   "never-used address range of %s left out</title></line>\n",
				PL, c[i].y_hi - brk / 2, PL + W, c[i].y_hi - brk / 2,
				fmt_bytes(c[i + 1].lo - c[i].hi, b1, sizeof(b1)));
	}
}

/* One colour per allocation stack, the same in every picture. */
static unsigned stack_hue(uint32_t stack)
{
	uint64_t key = (uint64_t)stack + 1;

	return (unsigned)(nt_hash_bytes(&key, sizeof(key)) % 360);
}

/* one bar per allocation, coloured by its stack */
static void svg_bars(struct svg *g, const struct stacktab *st)
{
	FILE *f = g->f;
	const struct timeline *t = g->t;
	const struct cluster *c = g->c;
	size_t nc = g->nc;
	const double W = g->W;
	uint64_t tmin = g->tmin;
	uint64_t tmax = g->tmax;
	struct nt_sb sb = g->sb;
	char b1[32];

	/* bars */
	for (uint32_t i = 0; i < t->n; i++) {
		const struct tl_rec *r = &t->r[i];
		double x0, x1, ya, yb;
		unsigned hue;
		char top[160];

		if (r->failed || !r->size)
			continue;
		x0 = PL + W * (double)(r->t0 - tmin) / (double)(tmax - tmin);
		x1 = PL + W * (double)((r->t1 ? r->t1 : tmax) - tmin) /
				  (double)(tmax - tmin);
		if (x1 - x0 < 0.6)
			x1 = x0 + 0.6;
		ya = addr_y(c, nc, r->ptr);
		yb = addr_y(c, nc, r->ptr + r->size);
		if (ya - yb < 0.6)
			yb = ya - 0.6;
		hue = stack_hue(r->stack);
		stack_user_frame(st ? stacktab_get(st, r->stack) : "", top, sizeof(top));
		nt_sb_reset(&sb);
		sb_xml_str(&sb, top);
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			   "fill=\"hsl(%u,60%%,55%%)\" fill-opacity=\"%s\" stroke=\"%s\" "
			   "stroke-width=\"0.3\"><title>0x%" PRIx64 " %s, alloc %.3f s, %s%s%s</title></rect>\n",
			x0, yb, x1 - x0, ya - yb, hue, r->t1 ? "0.55" : "0.9",
			r->t1 ? "none" : "#333333", r->ptr,
			fmt_bytes(r->size, b1, sizeof(b1)),
			(double)(r->t0 - tmin) / 1e9, r->t1 ? "freed" : "never freed",
			sb.len ? " at " : "", nt_sb_str(&sb));
	}
	g->sb = sb;
}

/* failed allocations, in red */
static void svg_failed(struct svg *g)
{
	FILE *f = g->f;
	const struct timeline *t = g->t;
	const double W = g->W;
	const double H = g->H;
	uint64_t tmin = g->tmin;
	uint64_t tmax = g->tmax;
	char b1[32];

	/* failed allocations, in red */
	for (uint32_t i = 0; i < t->n; i++) {
		const struct tl_rec *r = &t->r[i];
		double x;

		if (!r->failed)
			continue;
		x = PL + W * (double)(r->t0 - tmin) / (double)(tmax - tmin);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\" "
			   "stroke=\"#e00000\" stroke-width=\"1.5\" "
			   "stroke-dasharray=\"4,3\"/>\n", x, PT - 8, x, PT + H);
		fprintf(f, "<path d=\"M %.1f %d l -6 -10 l 12 0 z\" fill=\"#e00000\">"
			   "<title>failed allocation of %s at %.3f s</title></path>\n",
			x, PT - 8, fmt_bytes(r->size, b1, sizeof(b1)),
			(double)(r->t0 - tmin) / 1e9);
		if (g->nfail < 12)
			fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"#e00000\" "
				   "font-size=\"11\" text-anchor=\"%s\">failed: %s</text>\n",
				x + (x > PL + W - 150 ? -8 : 8), PT - 10 - 12 * (int)(g->nfail % 3),
				x > PL + W - 150 ? "end" : "start",
				fmt_bytes(r->size, b1, sizeof(b1)));
		g->nfail++;
	}
}

/* the moment of the worst fragmentation */
static void svg_worst(struct svg *g, const struct frag_stats *fs, uint64_t fs_ts)
{
	FILE *f = g->f;
	const double W = g->W;
	const double H = g->H;
	uint64_t tmin = g->tmin;
	uint64_t tmax = g->tmax;

	/* the moment of the worst fragmentation */
	if (fs && fs_ts && fs_ts >= tmin && fs_ts <= tmax) {
		double x = PL + W * (double)(fs_ts - tmin) / (double)(tmax - tmin);

		fprintf(f, "<line class=\"worst\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" "
			   "y2=\"%.0f\" stroke=\"#555555\" stroke-width=\"1\" "
			   "stroke-dasharray=\"2,2\"><title>worst fragmentation: score "
			   "%.0f, %" PRIu64 " holes</title></line>\n",
			x, PT, x, PT + H, fs->score, fs->holes);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"#555555\" "
			   "text-anchor=\"%s\">worst: score %.0f</text>\n",
			x + (x > PL + W - 120 ? -4 : 4), PT + 12,
			x > PL + W - 120 ? "end" : "start", fs->score);
	}
}

/* the time axis and the address axis's label */
static void svg_axis(struct svg *g)
{
	FILE *f = g->f;
	const double W = g->W;
	const double H = g->H;
	double span_s = g->span_s;

	/* time axis */
	{
		double step = nice_step(span_s, 10);

		for (double s = 0; s <= span_s + step * 1e-6; s += step) {
			double x = PL + W * s / span_s;

			fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" "
				   "stroke=\"#888888\"/>\n", x, PT + H, x, PT + H + 5);
			fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
				x, PT + H + 18, s);
		}
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">time since "
			   "the first allocation (s)</text>\n", PL + W / 2, PT + H + 36);
		fprintf(f, "<text x=\"20\" y=\"%.0f\" transform=\"rotate(-90 20 %.0f)\" "
			   "text-anchor=\"middle\">device address (never-used ranges "
			   "collapsed)</text>\n", PT + H / 2, PT + H / 2);
	}
}

/* the legend */
static void svg_legend(struct svg *g)
{
	FILE *f = g->f;
	const struct timeline *t = g->t;
	const double H = g->H;

	/* legend */
	{
		double ly = PT + H + 62;

		fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"22\" height=\"10\" "
			   "fill=\"hsl(200,60%%,55%%)\" fill-opacity=\"0.55\"/>"
			   "<text x=\"%d\" y=\"%.0f\">one allocation, from its alloc (left "
			   "edge) to its free (right edge); colour = allocating stack</text>\n",
			PL, ly - 9, PL + 30, ly);
		fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"22\" height=\"10\" "
			   "fill=\"hsl(200,60%%,55%%)\" fill-opacity=\"0.9\" stroke=\"#333333\"/>"
			   "<text x=\"%d\" y=\"%.0f\">still allocated at the end</text>\n",
			PL, ly + 9, PL + 30, ly + 18);
		fprintf(f, "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" "
			   "stroke=\"#e00000\" stroke-width=\"1.5\" stroke-dasharray=\"4,3\"/>"
			   "<text x=\"%d\" y=\"%.0f\">failed allocation (%u)</text>\n",
			PL, ly + 31, PL + 22, ly + 31, PL + 30, ly + 36, g->nfail);
		fprintf(f, "<text x=\"%d\" y=\"%.0f\">white space inside a band at a "
			   "given time = free holes between live allocations</text>\n",
			PL, ly + 56);
		if (t->dropped)
			fprintf(f, "<text x=\"%d\" y=\"%.0f\" fill=\"#b00000\">%" PRIu64
				   " later allocations not drawn (timeline_max "
				   "reached)</text>\n", PL, ly + 74, t->dropped);
	}
}

int tl_write_svg(const struct timeline *t, FILE *f, const char *title,
		 uint64_t t_end, const struct stacktab *st,
		 const struct frag_stats *fs, uint64_t fs_ts)
{
	struct svg g = { .f = f, .t = t, .W = SVG_W - PL - PR, .H = SVG_H - PT - PB };

	g.nc = build_clusters(t, &g.c);
	g.tmin = t->t_first;
	g.tmax = t_end > t->t_last ? t_end : t->t_last;
	if (g.tmax <= g.tmin)
		g.tmax = g.tmin + 1000000; /* 1 ms: a picture of one instant */
	g.span_s = (double)(g.tmax - g.tmin) / 1e9;
	nt_sb_init(&g.sb, 0);
	svg_layout(&g);
	svg_header(&g, title, fs, fs_ts);
	svg_clusters(&g);
	svg_bars(&g, st);
	svg_failed(&g);
	svg_worst(&g, fs, fs_ts);
	svg_axis(&g);
	svg_legend(&g);
	fprintf(f, "</svg>\n");
	free(g.c);
	nt_sb_fini(&g.sb);
	return ferror(f) ? -EIO : 0;
}

int tl_write_svg_file(const struct timeline *t, const char *path,
		      const char *title, uint64_t t_end,
		      const struct stacktab *st, const struct frag_stats *fs,
		      uint64_t fs_ts)
{
	char tmp[4096];
	FILE *f;
	int err;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	err = tl_write_svg(t, f, title, t_end, st, fs, fs_ts);
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) != 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}
