/* SPDX-License-Identifier: MIT */
/* The stdout sink's at-a-glance lines (see glance.h). */
#include "glance.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *text, const char *suffix)
{
	size_t n = strlen(text), m = strlen(suffix);

	return n >= m && strcmp(text + n - m, suffix) == 0;
}

/* "ntcore_cuda_copy_bytes_total" -> "cuda_copy", bytes. */
static void make_title(struct glance_item *it)
{
	const char *name = it->metric;

	if (strncmp(name, "ntcore_", 7) == 0)
		name += 7;
	snprintf(it->title, sizeof(it->title), "%s", name);
	if (ends_with(it->title, "_total"))
		it->title[strlen(it->title) - 6] = '\0';
	if (ends_with(it->title, "_bytes")) {
		it->title[strlen(it->title) - 6] = '\0';
		it->bytes = true;
	}
}

int glance_init(struct glance *g, const struct nt_strlist *specs, const char **bad)
{
	memset(g, 0, sizeof(*g));
	if (!specs->n)
		return 0;
	g->items = calloc(specs->n, sizeof(*g->items));
	if (!g->items)
		return -ENOMEM;
	for (uint32_t i = 0; i < specs->n; i++) {
		struct glance_item *it = &g->items[g->n];
		const char *spec = specs->v[i], *colon = strchr(spec, ':');
		size_t mlen = colon ? (size_t)(colon - spec) : strlen(spec);
		if (!mlen || mlen >= sizeof(it->metric) ||
		    (colon && (!colon[1] || strlen(colon + 1) >= sizeof(it->label)))) {
			*bad = spec;
			return -EINVAL;
		}
		memcpy(it->metric, spec, mlen);
		snprintf(it->label, sizeof(it->label), "%s", colon ? colon + 1 : "");
		make_title(it);
		g->n++;
	}
	return 0;
}

static void free_vals(struct glance_val *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

void glance_begin(struct glance *g)
{
	for (size_t i = 0; i < g->n; i++) {
		struct glance_item *it = &g->items[i];
		free_vals(it->prev, it->n_prev);
		it->prev = it->vals;
		it->n_prev = it->n_vals;
		it->vals = NULL;
		it->n_vals = 0;
		it->have_prev = it->found;
		it->delta = it->total; /* minus the new total, below */
		it->found = false;
		it->total = 0;
	}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct glance_val *)a)->name,
		      ((const struct glance_val *)b)->name);
}

/* Sums the series by the value of label `li` into it->vals (sorted). */
static void group_by_label(struct glance_item *it, uint32_t li,
			   const struct nt_metric_series *series, uint32_t n)
{
	struct glance_val *v = calloc(n ? n : 1, sizeof(*v));
	size_t nv = 0;

	if (!v)
		return;
	for (uint32_t i = 0; i < n; i++) {
		v[nv].name = strdup(series[i].label_values[li]);
		v[nv].value = series[i].value;
		if (v[nv].name)
			nv++;
	}
	qsort(v, nv, sizeof(*v), by_name);
	size_t out = 0;
	for (size_t i = 0; i < nv; i++) {
		if (out && strcmp(v[out - 1].name, v[i].name) == 0) {
			v[out - 1].value += v[i].value;
			free(v[i].name);
		} else {
			v[out++] = v[i];
		}
	}
	it->vals = v;
	it->n_vals = out;
}

/* delta of each value against the previous collection (merge by name). */
static void compute_deltas(struct glance_item *it)
{
	size_t j = 0;

	for (size_t i = 0; i < it->n_vals; i++) {
		struct glance_val *v = &it->vals[i];
		while (j < it->n_prev && strcmp(it->prev[j].name, v->name) < 0)
			j++;
		bool seen = j < it->n_prev && strcmp(it->prev[j].name, v->name) == 0;
		v->delta = v->value - (seen ? it->prev[j].value : 0);
	}
}

int glance_visit(void *arg, const struct nt_metric_desc *desc,
		 const struct nt_metric_series *series, uint32_t n,
		 uint64_t overflow)
{
	struct glance *g = arg;

	(void)overflow;
	for (size_t i = 0; i < g->n; i++) {
		struct glance_item *it = &g->items[i];
		if (strcmp(it->metric, desc->name) != 0 ||
		    desc->type == NT_METRIC_HISTOGRAM)
			continue;
		it->found = true;
		it->counter = desc->type == NT_METRIC_COUNTER;
		for (uint32_t k = 0; k < n; k++)
			it->total += series[k].value;
		it->delta = it->have_prev ? it->total - it->delta : it->total;
		for (uint32_t li = 0; it->label[0] && li < desc->n_labels; li++)
			if (strcmp(desc->label_names[li], it->label) == 0) {
				group_by_label(it, li, series, n);
				compute_deltas(it);
			}
	}
	return 0;
}

void glance_fmt_bytes(double bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;

	while (bytes >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static void fmt_amount(const struct glance_item *it, double v, double secs,
		       char *buf, size_t len)
{
	if (it->counter) {
		double rate = secs > 0 ? v / secs : 0;
		if (it->bytes) {
			glance_fmt_bytes(rate, buf, len);
			strncat(buf, "/s", len - strlen(buf) - 1);
		} else {
			snprintf(buf, len, rate >= 100 ? "%.0f/s" : "%.1f/s", rate);
		}
	} else if (it->bytes) {
		glance_fmt_bytes(v, buf, len);
	} else {
		snprintf(buf, len, "%.0f", v);
	}
}

static int by_rank_desc(const void *a, const void *b)
{
	double x = ((const struct glance_val *)a)->delta;
	double y = ((const struct glance_val *)b)->delta;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* ": vector_add 12000/s, scale 6000/s" for the `top` largest. */
static void print_top(const struct glance_item *it, FILE *out, double secs,
		      unsigned top, bool final)
{
	struct glance_val *order = malloc((it->n_vals ? it->n_vals : 1) * sizeof(*order));
	char amount[48];

	if (!order)
		return;
	memcpy(order, it->vals, it->n_vals * sizeof(*order));
	/* rank by what is shown: the interval's delta, or the value */
	for (size_t i = 0; i < it->n_vals; i++)
		order[i].delta = it->counter && !final ? order[i].delta : order[i].value;
	qsort(order, it->n_vals, sizeof(*order), by_rank_desc);
	for (size_t i = 0; i < it->n_vals && i < top; i++) {
		if (it->counter && order[i].delta <= 0)
			break;
		fmt_amount(it, order[i].delta, secs, amount, sizeof(amount));
		/* "device 0 3.2 GiB", but "vector_add 12000/s" */
		bool numeric = order[i].name[0] &&
			       strspn(order[i].name, "0123456789") == strlen(order[i].name);
		fprintf(out, "%s %s%s%.60s %s", i ? "," : ":", numeric ? it->label : "",
			numeric ? " " : "", order[i].name, amount);
	}
	free(order);
}

void glance_print(const struct glance *g, FILE *out, double secs,
		  unsigned top, bool final)
{
	char amount[48];

	for (size_t i = 0; i < g->n; i++) {
		const struct glance_item *it = &g->items[i];
		if (!it->found)
			continue;
		fmt_amount(it, it->counter && !final ? it->delta : it->total,
			   secs, amount, sizeof(amount));
		fprintf(out, "  %-18s %s", it->title, amount);
		if (final && it->counter)
			fprintf(out, " (%.0f in all)", it->total);
		if (it->n_vals)
			print_top(it, out, secs, top, final);
		fputc('\n', out);
	}
}

void glance_free(struct glance *g)
{
	for (size_t i = 0; i < g->n; i++) {
		free_vals(g->items[i].vals, g->items[i].n_vals);
		free_vals(g->items[i].prev, g->items[i].n_prev);
	}
	free(g->items);
	memset(g, 0, sizeof(*g));
}
