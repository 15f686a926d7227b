/* SPDX-License-Identifier: MIT */
/* Per-process reports of the stdout sink (see reports.h). */
#include "reports.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static size_t count_type(const struct reports *r, const char *type)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++)
		n += r->v[i].type == type;
	return n;
}

/* The slot to reuse when a type has too many processes: its least
 * reported, oldest entry. */
static struct report *evictee(struct reports *r, const char *type)
{
	struct report *worst = NULL;

	for (size_t i = 0; i < r->n; i++) {
		struct report *e = &r->v[i];
		if (e->type == type &&
		    (!worst || e->count < worst->count ||
		     (e->count == worst->count && e->seq < worst->seq)))
			worst = e;
	}
	return worst;
}

static struct report *slot_for(struct reports *r, const char *type, uint32_t pid)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].type == type && r->v[i].pid == pid)
			return &r->v[i];
	if (count_type(r, type) >= REPORTS_PER_TYPE) {
		struct report *e = evictee(r, type);
		free(e->text);
		memset(e, 0, sizeof(*e));
		return e;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		struct report *grown = realloc(r->v, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		r->v = grown;
		r->cap = cap;
	}
	memset(&r->v[r->n], 0, sizeof(r->v[0]));
	return &r->v[r->n++];
}

void reports_keep(struct reports *r, const char *type, uint32_t pid,
		  const char *comm, const char *text, uint32_t len)
{
	char *copy = malloc((size_t)len + 1);
	struct report *e;

	if (!copy)
		return;
	memcpy(copy, text, len);
	copy[len] = '\0';
	if (!(e = slot_for(r, type, pid))) {
		free(copy);
		return;
	}
	free(e->text);
	e->type = type;
	e->pid = pid;
	snprintf(e->comm, sizeof(e->comm), "%.15s", comm);
	e->text = copy;
	e->count++;
	e->seq = ++r->seq;
}

static bool is_named(uint32_t pid, const uint32_t *named, size_t n_named)
{
	for (size_t i = 0; i < n_named; i++)
		if (named[i] == pid)
			return true;
	return false;
}

/* Is `a` a better report to show than `b`? */
static bool better(const struct report *a, const struct report *b,
		   const uint32_t *named, size_t n_named)
{
	bool na = is_named(a->pid, named, n_named), nb = is_named(b->pid, named, n_named);

	if (na != nb)
		return na;
	if (a->count != b->count)
		return a->count > b->count;
	return a->seq > b->seq;
}

void reports_print(const struct reports *r, FILE *out, const uint32_t *named,
		   size_t n_named, const char *bold, const char *reset)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct report *best = &r->v[i];
		bool first = true;
		size_t others = 0;
		/* each type once: at its first entry */
		for (size_t j = 0; j < r->n; j++) {
			if (r->v[j].type != best->type)
				continue;
			if (j < i)
				first = false;
			else if (j != i)
				others++;
		}
		if (!first)
			continue;
		for (size_t j = i + 1; j < r->n; j++)
			if (r->v[j].type == best->type && better(&r->v[j], best, named, n_named))
				best = &r->v[j];
		if (best->pid)
			fprintf(out, "\n%s── %s: pid %u (%s) ──%s\n%s", bold, best->type,
				best->pid, best->comm, reset, best->text);
		else /* about no one process */
			fprintf(out, "\n%s── %s ──%s\n%s", bold, best->type, reset, best->text);
		if (best->text[0] && best->text[strlen(best->text) - 1] != '\n')
			fputc('\n', out);
		if (others)
			fprintf(out, "(%zu other process%s sent %s too: see the file sink)\n",
				others, others == 1 ? "" : "es", best->type);
	}
}

void reports_free(struct reports *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].text);
	free(r->v);
	memset(r, 0, sizeof(*r));
}
