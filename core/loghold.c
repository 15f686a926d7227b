/* SPDX-License-Identifier: MIT */
/* Held log lines (see loghold.h). */
#include "loghold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct nt_held_line {
	int level;
	char *prefix; /* NULL for the core's own lines */
	char *text;
};

void nt_loghold_start(struct nt_loghold *h)
{
	pthread_mutex_lock(&h->lock);
	h->on = true;
	pthread_mutex_unlock(&h->lock);
}

static bool hold_locked(struct nt_loghold *h, int level, const char *prefix,
			const char *text);

bool nt_loghold_vadd(struct nt_loghold *h, int level, const char *prefix,
		     const char *fmt, va_list ap)
{
	char text[2048];
	bool held;

	pthread_mutex_lock(&h->lock);
	if ((held = h->on)) {
		vsnprintf(text, sizeof(text), fmt, ap);
		if (!hold_locked(h, level, prefix, text))
			nt_log(level, prefix, "%s", text); /* print rather than lose it */
	}
	pthread_mutex_unlock(&h->lock);
	return held;
}

static bool hold_locked(struct nt_loghold *h, int level, const char *prefix,
			const char *text)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct nt_held_line *grown = realloc(h->lines, cap * sizeof(*grown));
		if (!grown)
			return false;
		h->lines = grown;
		h->cap = cap;
	}
	struct nt_held_line *l = &h->lines[h->n];
	l->level = level;
	l->prefix = prefix ? strdup(prefix) : NULL;
	l->text = strdup(text);
	if (!l->text || (prefix && !l->prefix)) {
		free(l->prefix);
		free(l->text);
		return false;
	}
	h->n++;
	return true;
}

void nt_loghold_release(struct nt_loghold *h, bool print)
{
	pthread_mutex_lock(&h->lock);
	for (size_t i = 0; i < h->n; i++) {
		if (print)
			nt_log(h->lines[i].level, h->lines[i].prefix, "%s",
			       h->lines[i].text);
		free(h->lines[i].prefix);
		free(h->lines[i].text);
	}
	free(h->lines);
	h->lines = NULL;
	h->n = h->cap = 0;
	h->on = false;
	pthread_mutex_unlock(&h->lock);
}
