/* SPDX-License-Identifier: MIT */
/* The self-contained HTML report page (report.h). */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg.h"

/* Append a string literal. */
#define LIT(b, s) nt_buf_put((b), (s), sizeof(s) - 1)

#define FLAME_PX 1200
#define TOP_N 30

static const char page_css[] =
	"body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222}"
	"h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}"
	"table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 8px;"
	"border-bottom:1px solid #eee;text-align:left;vertical-align:top}"
	"td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
	"pre{background:#f6f6f6;padding:6px;max-width:1200px;white-space:pre-wrap;"
	"overflow-wrap:anywhere}"
	".sev2{color:#b00;font-weight:bold}.sev1{color:#b60}.sev0{color:#06b}"
	"svg.flame text{font:11px monospace;fill:#000;pointer-events:none}"
	"svg.flame g.f{cursor:pointer}svg.flame g.f:hover rect{stroke:#000;stroke-width:.5}"
	".detail{font:12px monospace;min-height:1.4em;color:#444}"
	".empty{color:#888;font-style:italic}";

/* Click a frame to zoom to it, click the root to zoom out; hover shows it. */
static const char page_js[] =
	"document.querySelectorAll('svg.flame').forEach(function(svg){"
	"var W=+svg.getAttribute('data-width'),det=svg.previousElementSibling;"
	"var gs=Array.prototype.slice.call(svg.querySelectorAll('g.f'));"
	"gs.forEach(function(g){var t=g.querySelector('title').textContent;"
	"g.addEventListener('mouseover',function(){if(det)det.textContent=t;});"
	"g.addEventListener('click',function(){zoom(+g.dataset.x,+g.dataset.w,+g.dataset.d);});});"
	"function zoom(x0,w0,d0){gs.forEach(function(g){"
	"var x=+g.dataset.x,w=+g.dataset.w,d=+g.dataset.d,r=g.querySelector('rect'),"
	"tx=g.querySelector('text'),name=g.querySelector('title').textContent.replace(/ \\([^(]*\\)$/,'');"
	"var inside=x>=x0-1e-6&&x+w<=x0+w0+1e-6&&d>=d0,above=d<d0&&x<=x0+1e-6&&x+w>=x0+w0-1e-6;"
	"if(!inside&&!above){g.style.display='none';return;}g.style.display='';"
	"var nx=above?0:(x-x0)*W/w0,nw=above?W:w*W/w0;r.setAttribute('x',nx);"
	"r.setAttribute('width',nw);tx.setAttribute('x',nx+3);var fit=Math.floor((nw-6)/7);"
	"tx.textContent=fit<3?'':(name.length<=fit?name:name.slice(0,fit-2)+'..');});}});";

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t need = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3
		      : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : 0;

	if (!need || need > n)
		return 0;
	for (size_t i = 1; i < need; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* overlong 3/4-byte forms, surrogates, past U+10FFFF */
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return need;
}

static const char *html_entity(unsigned char c)
{
	switch (c) {
	case '<': return "&lt;";
	case '>': return "&gt;";
	case '&': return "&amp;";
	case '"': return "&quot;";
	case '\'': return "&#39;";
	case '\n': return "\n";
	case '\t': return "\t";
	default: return c < 0x20 || c == 0x7f ? "\xef\xbf\xbd" : NULL;
	}
}

void html_escape(struct nt_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0, i = 0;

	while (i < n && u[i]) {
		const char *rep = u[i] < 0x80 ? html_entity(u[i]) : NULL;
		size_t seq = u[i] < 0x80 ? 1 : utf8_seq(u + i, n - i);
		if (!rep && seq) {
			i += seq;
			continue;
		}
		nt_buf_put(b, s + run, i - run);
		nt_buf_put(b, rep ? rep : "\xef\xbf\xbd", strlen(rep ? rep : "\xef\xbf\xbd"));
		run = ++i;
	}
	nt_buf_put(b, s + run, i - run);
}

static void esc(struct nt_buf *b, const char *s)
{
	if (s)
		html_escape(b, s, strlen(s));
}

/* "12.345 ms" style durations. */
static void dur_text(struct nt_buf *b, double ns)
{
	if (ns >= 1e9)
		nt_buf_printf(b, "%.3f s", ns / 1e9);
	else if (ns >= 1e6)
		nt_buf_printf(b, "%.3f ms", ns / 1e6);
	else
		nt_buf_printf(b, "%.1f µs", ns / 1e3);
}

static void bytes_text(struct nt_buf *b, double v)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	unsigned u = 0;

	while (fabs(v) >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	nt_buf_printf(b, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void wall_text(struct nt_buf *b, const struct report_meta *m, uint64_t mono)
{
	int64_t ns = (int64_t)mono + m->wall_offset_ns;
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;
	char text[64];

	gmtime_r(&secs, &tm);
	strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
	nt_buf_printf(b, "%s.%03d UTC", text, (int)((ns / 1000000) % 1000));
}

static void head(struct nt_buf *b, const struct agg *a, const struct report_meta *m)
{
	nt_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
		      "'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
		      "img-src data:\"><title>ntcore report: ");
	esc(b, m->reason);
	nt_buf_printf(b, "</title><style>%s</style></head><body>\n<h1>ntcore report: ",
		      page_css);
	esc(b, m->reason);
	LIT(b, "</h1>\n<p>");
	nt_buf_printf(b, "ntcore %s (pid %u) on ", m->version, m->pid);
	esc(b, m->host);
	LIT(b, ", covering ");
	esc(b, m->scope);
	if (a->events) {
		LIT(b, ": ");
		wall_text(b, m, a->first_ts);
		LIT(b, " to ");
		wall_text(b, m, a->last_ts);
		LIT(b, " (");
		dur_text(b, (double)(a->last_ts - a->first_ts));
		LIT(b, ")");
	}
	nt_buf_printf(b, ". %" PRIu64 " events", a->events);
	if (m->lost)
		nt_buf_printf(b, " (%" PRIu64 " earlier ones not kept)", m->lost);
	if (m->trace_file && *m->trace_file) {
		LIT(b, "; timeline: <code>");
		esc(b, m->trace_file);
		LIT(b, "</code> (open it in ui.perfetto.dev)");
	}
	LIT(b, ".</p>\n");
}

static void alerts(struct nt_buf *b, const struct agg *a, const struct report_meta *m)
{
	static const char *const sev[] = {"info", "warning", "critical"};

	nt_buf_printf(b, "<h2 id=\"alerts\">Alerts (%u)</h2>\n", a->n_alerts);
	if (!a->n_alerts) {
		LIT(b, "<p class=\"empty\">No alert.</p>\n");
		return;
	}
	for (uint32_t i = 0; i < a->n_alerts; i++) {
		const struct agg_alert *al = &a->alerts[i];
		unsigned s = al->severity < 3 ? al->severity : 2;
		nt_buf_printf(b, "<div class=\"alert\"><p><span class=\"sev%u\">%s</span> ",
			      s, sev[s]);
		wall_text(b, m, al->ts);
		LIT(b, " <b>");
		esc(b, al->schema);
		nt_buf_printf(b, "</b> pid %u tid %u (", al->pid, al->tid);
		esc(b, al->comm);
		LIT(b, "): <span class=\"msg\">");
		esc(b, al->message);
		LIT(b, "</span></p>\n");
		if (al->stack && *al->stack) {
			LIT(b, "<pre class=\"stack\">");
			for (const char *p = al->stack; *p;) {
				size_t n = strcspn(p, ";");
				html_escape(b, p, n);
				LIT(b, "\n");
				p += n + (p[n] == ';');
			}
			LIT(b, "</pre>\n");
		}
		if (al->evidence && *al->evidence) {
			LIT(b, "<pre class=\"evidence\">");
			esc(b, al->evidence);
			LIT(b, "</pre>\n");
		}
		LIT(b, "</div>\n");
	}
	if (a->alerts_over)
		nt_buf_printf(b, "<p>%" PRIu64 " more alerts not listed.</p>\n",
			      a->alerts_over);
}

static void flame_section(struct nt_buf *b, const struct flame *f,
			  const char *title, const char *id, const char *what,
			  bool gpu)
{
	nt_buf_printf(b, "<h2 id=\"%s\">%s</h2>\n", id, title);
	if (!flame_total(f)) {
		nt_buf_printf(b, "<p class=\"empty\">No %s.</p>\n", what);
		return;
	}
	nt_buf_printf(b, "<p>%s; click a frame to zoom, the root to zoom out.", what);
	if (f->truncated)
		nt_buf_printf(b, " (%" PRIu64 " %s kept at a shallower frame: node limit)",
			      f->truncated, f->unit);
	LIT(b, "</p>\n<div class=\"detail\"></div>\n");
	flame_svg(f, b, FLAME_PX, gpu);
}

/* ---- memory timeline --------------------------------------------- */

#define CHART_W 1100
#define CHART_H 260
#define CHART_X 90

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
				      "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

static void chart_range(const struct agg *a, uint64_t *t0, uint64_t *t1,
			double *vmax)
{
	*t0 = UINT64_MAX;
	*t1 = 0;
	*vmax = 0;
	for (uint32_t i = 0; i < a->n_mem; i++) {
		const struct agg_series *m = &a->mem[i];
		for (uint32_t j = 0; j < m->n; j++) {
			*t0 = m->ts[j] < *t0 ? m->ts[j] : *t0;
			*vmax = m->v[j] > *vmax ? m->v[j] : *vmax;
		}
		*t1 = m->last_ts > *t1 ? m->last_ts : *t1;
		*vmax = m->last_v > *vmax ? m->last_v : *vmax;
	}
	if (*t1 <= *t0)
		*t1 = *t0 + 1000000000ull;
	if (*vmax <= 0)
		*vmax = 1;
}

static void chart_axes(struct nt_buf *b, uint64_t t0, uint64_t t1, double vmax)
{
	for (int i = 0; i <= 4; i++) {
		double y = 10 + CHART_H - CHART_H * i / 4.0;
		nt_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
			      "stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" "
			      "text-anchor=\"end\">", CHART_X, y, CHART_X + CHART_W, y,
			      CHART_X - 6, y + 4);
		bytes_text(b, vmax * i / 4.0);
		LIT(b, "</text>");
		double x = CHART_X + CHART_W * i / 4.0;
		nt_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
			      x, CHART_H + 28);
		dur_text(b, (double)(t1 - t0) * i / 4.0);
		LIT(b, "</text>");
	}
}

static void chart_line(struct nt_buf *b, const struct agg_series *m, uint64_t t0,
		       uint64_t t1, double vmax, const char *color)
{
	double sx = (double)CHART_W / (double)(t1 - t0), sy = CHART_H / vmax;
	double prev = m->n ? m->v[0] : m->last_v;

	nt_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
		      "points=\"", color);
	/* a step line: a value holds until the next sample */
	for (uint32_t j = 0; j < m->n; j++) {
		double x = CHART_X + (double)(m->ts[j] - t0) * sx;
		nt_buf_printf(b, "%.1f,%.1f %.1f,%.1f ", x, 10 + CHART_H - prev * sy, x,
			      10 + CHART_H - m->v[j] * sy);
		prev = m->v[j];
	}
	double lx = CHART_X + (double)(m->last_ts - t0) * sx;
	double ly = 10 + CHART_H - m->last_v * sy;
	/* a dot on the newest value: visible even for a single sample */
	nt_buf_printf(b, "%.1f,%.1f\"/>\n<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
		      "fill=\"%s\"/>\n", lx, ly, lx, ly, color);
}

static void memory(struct nt_buf *b, const struct agg *a)
{
	uint64_t t0, t1;
	double vmax;

	LIT(b, "<h2 id=\"memory\">Device memory</h2>\n");
	if (!a->n_mem) {
		LIT(b, "<p class=\"empty\">No memory counter sampled (the "
			      "<code>report_memory</code> families).</p>\n");
		return;
	}
	chart_range(a, &t0, &t1, &vmax);
	nt_buf_printf(b, "<svg class=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" "
		      "width=\"%d\" height=\"%d\" font-size=\"11\">\n",
		      CHART_X + CHART_W + 10, CHART_H + 40);
	chart_axes(b, t0, t1, vmax);
	for (uint32_t i = 0; i < a->n_mem; i++)
		chart_line(b, &a->mem[i], t0, t1, vmax, palette[i % 8]);
	LIT(b, "</svg>\n<ul class=\"legend\">\n");
	for (uint32_t i = 0; i < a->n_mem; i++) {
		const struct agg_series *m = &a->mem[i];
		nt_buf_printf(b, "<li><span style=\"color:%s\">&#9632;</span> ",
			      palette[i % 8]);
		esc(b, m->s->name);
		if (m->s->pid)
			nt_buf_printf(b, " pid %u", m->s->pid);
		LIT(b, ": last ");
		bytes_text(b, m->last_v);
		LIT(b, "</li>\n");
	}
	LIT(b, "</ul>\n");
}

/* ---- tables -------------------------------------------------------- */

struct row {
	const char *name;
	uint32_t len;
	const struct agg_stat *st;
};

static int by_time_then_count(const void *x, const void *y)
{
	const struct agg_stat *a = ((const struct row *)x)->st;
	const struct agg_stat *b = ((const struct row *)y)->st;

	if (a->total_ns != b->total_ns)
		return a->total_ns < b->total_ns ? 1 : -1;
	return a->count < b->count ? 1 : a->count > b->count ? -1 : 0;
}

static struct row *sorted_rows(const struct tmap *m, uint32_t *n)
{
	struct row *rows = calloc(tmap_count(m) ? tmap_count(m) : 1, sizeof(*rows));
	const struct tmap_ent *e;
	struct nt_hmap_iter it;

	*n = 0;
	for (tmap_iter_init(&it, m); rows && (e = tmap_next(&it));)
		rows[(*n)++] = (struct row){e->key, e->klen, e->val};
	if (rows)
		qsort(rows, *n, sizeof(*rows), by_time_then_count);
	return rows;
}

static void stat_table(struct nt_buf *b, const struct tmap *m, const char *title,
		       const char *id, const char *what)
{
	uint32_t n;
	struct row *rows = sorted_rows(m, &n);
	uint64_t all = 0;

	nt_buf_printf(b, "<h2 id=\"%s\">%s</h2>\n", id, title);
	if (!rows || !n) {
		nt_buf_printf(b, "<p class=\"empty\">No %s.</p>\n", what);
		free(rows);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		all += rows[i].st->total_ns;
	nt_buf_printf(b, "<table class=\"top\"><tr><th>%s</th><th class=\"n\">count</th>"
		      "<th class=\"n\">total</th><th class=\"n\">share</th>"
		      "<th class=\"n\">mean</th><th class=\"n\">max</th></tr>\n", what);
	for (uint32_t i = 0; i < n && i < TOP_N; i++) {
		const struct agg_stat *st = rows[i].st;
		LIT(b, "<tr><td class=\"name\">");
		html_escape(b, rows[i].name, rows[i].len);
		nt_buf_printf(b, "</td><td class=\"n\">%" PRIu64 "</td><td class=\"n\">",
			      st->count);
		dur_text(b, (double)st->total_ns);
		nt_buf_printf(b, "</td><td class=\"n\">%.1f%%</td><td class=\"n\">",
			      all ? 100.0 * (double)st->total_ns / (double)all : 0.0);
		dur_text(b, st->count ? (double)st->total_ns / (double)st->count : 0);
		LIT(b, "</td><td class=\"n\">");
		dur_text(b, (double)st->max_ns);
		LIT(b, "</td></tr>\n");
	}
	LIT(b, "</table>\n");
	if (n > TOP_N)
		nt_buf_printf(b, "<p>%u more not listed.</p>\n", n - TOP_N);
	free(rows);
}

/* ---- per-plugin summaries ------------------------------------------ */

static int by_name(const void *x, const void *y)
{
	const struct tmap_ent *a = *(const struct tmap_ent *const *)x;
	const struct tmap_ent *b = *(const struct tmap_ent *const *)y;
	size_t n = a->klen < b->klen ? a->klen : b->klen;
	int c = memcmp(a->key, b->key, n);

	return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

static const struct tmap_ent **sorted_ents(const struct tmap *m, uint32_t *n)
{
	const struct tmap_ent **ents = calloc(tmap_count(m) ? tmap_count(m) : 1, sizeof(*ents));
	const struct tmap_ent *e;
	struct nt_hmap_iter it;

	*n = 0;
	for (tmap_iter_init(&it, m); ents && (e = tmap_next(&it));)
		ents[(*n)++] = e;
	if (ents)
		qsort(ents, *n, sizeof(*ents), by_name);
	return ents;
}

static void plugins(struct nt_buf *b, const struct agg *a)
{
	uint32_t n, nr;
	const struct tmap_ent **ents = sorted_ents(&a->schemas, &n);
	const struct tmap_ent **reps = sorted_ents(&a->reports, &nr);

	LIT(b, "<h2 id=\"plugins\">Per plugin</h2>\n<table class=\"plugins\">"
		      "<tr><th>plugin</th><th>event</th><th class=\"n\">events</th></tr>\n");
	for (uint32_t i = 0; ents && i < n; i++) {
		size_t p = strcspn(ents[i]->key, ".");
		bool first = i == 0 || strncmp(ents[i - 1]->key, ents[i]->key, p + 1) != 0;
		LIT(b, "<tr><td>");
		if (first)
			html_escape(b, ents[i]->key, p < ents[i]->klen ? p : ents[i]->klen);
		LIT(b, "</td><td>");
		html_escape(b, ents[i]->key, ents[i]->klen);
		nt_buf_printf(b, "</td><td class=\"n\">%" PRIuPTR "</td></tr>\n",
			      (uintptr_t)ents[i]->val);
	}
	LIT(b, "</table>\n");
	for (uint32_t i = 0; reps && i < nr; i++) {
		LIT(b, "<details open><summary>");
		html_escape(b, reps[i]->key, reps[i]->klen);
		LIT(b, "</summary><pre class=\"report\">");
		esc(b, reps[i]->val);
		LIT(b, "</pre></details>\n");
	}
	free(ents);
	free(reps);
}

/* One flame graph per sample schema (their weights differ in unit). */
static void samples_sections(struct nt_buf *b, const struct agg *a)
{
	char title[160], id[80], what[160];

	if (!a->n_samples) {
		LIT(b, "<h2 id=\"flame-samples\">Stacks (sampled)</h2>\n"
		       "<p class=\"empty\">No stack samples.</p>\n");
		return;
	}
	for (uint32_t i = 0; i < a->n_samples; i++) {
		const struct agg_samples *s = &a->samples[i];
		snprintf(title, sizeof(title), "Stacks of %s", s->schema);
		snprintf(id, sizeof(id), "flame-%s", s->schema);
		for (char *p = id; *p; p++)
			if (*p == '.')
				*p = '-';
		snprintf(what, sizeof(what), "%s stacks (weight: %s)", s->schema, s->unit);
		/* green for weights of time (GPU us), warm for samples */
		flame_section(b, &s->f, title, id, what, strcmp(s->unit, "samples") != 0);
	}
	if (a->samples_over)
		nt_buf_printf(b, "<p>%" PRIu64 " samples of further schemas not drawn.</p>\n",
			      a->samples_over);
}

void report_html(struct nt_buf *out, const struct agg *a,
		 const struct report_meta *m)
{
	head(out, a, m);
	alerts(out, a, m);
	samples_sections(out, a);
	flame_section(out, &a->gpu, "GPU time by stack", "flame-gpu",
		      "device activity (weight: GPU nanoseconds)", true);
	flame_section(out, &a->calls, "Calls by stack", "flame-calls",
		      "calls with a stack (weight: calls)", false);
	memory(out, a);
	stat_table(out, &a->kernels, "Top kernels and copies (GPU time)", "kernels",
		   "device activity");
	stat_table(out, &a->apis, "Top API calls (time in the call)", "calls",
		   "host calls");
	plugins(out, a);
	nt_buf_printf(out, "<script>%s</script>\n</body></html>\n", page_js);
}
