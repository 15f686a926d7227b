/* SPDX-License-Identifier: MIT */
/*
 * Python frames for the CUDA detectors' alerts (pyframes.h): each thread's
 * latest lent Python stack, merged in front of a call's native stack.
 */
#include <stdlib.h>
#include <string.h>

#include "det_util.h"
#include "pyframes.h"

struct pyf_lend {
	uint64_t ts;
	char *text; /* Python frames only, root first, ';'-separated */
};

static uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

void pyf_init(struct pyframes *f)
{
	memset(f, 0, sizeof(*f));
	nt_hmap_init(&f->last, sizeof(uint64_t), sizeof(struct pyf_lend),
		     PYF_THREADS_MAX);
}

static void pyf_clear(struct pyframes *f)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, &f->last); nt_hmap_iter_next(&it);)
		free(((struct pyf_lend *)it.val)->text);
	nt_hmap_clear(&f->last);
}

void pyf_fini(struct pyframes *f)
{
	pyf_clear(f);
	nt_hmap_fini(&f->last);
	free(f->merged);
}

bool pyf_is(const struct nt_schema *schema)
{
	return schema && schema->name && !strcmp(schema->name, PYF_SCHEMA);
}

/* "function (file:line)": the python probe's frame of Python code. */
static bool py_frame(const char *s, size_t n)
{
	const char *open = NULL;

	if (n < 5 || s[n - 1] != ')')
		return false;
	for (size_t i = n - 1; i > 0; i--)
		if (s[i] == '(' && s[i - 1] == ' ') {
			open = s + i;
			break;
		}
	return open && memchr(open, ':', (size_t)(s + n - open)) != NULL;
}

/* The Python frames of a folded text, root first (malloc'ed). */
static char *python_only(const char *s, size_t n)
{
	char *out = malloc(n + 1);
	size_t o = 0, start = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != STACK_SEP)
			continue;
		if (py_frame(s + start, i - start)) {
			if (o)
				out[o++] = STACK_SEP;
			memcpy(out + o, s + start, i - start);
			o += i - start;
		}
		start = i + 1;
	}
	out[o] = '\0';
	return out;
}

void pyf_note(struct pyframes *f, const struct nt_event_hdr *ev,
	      const struct nt_schema *schema)
{
	uint64_t key = thread_key(ev->pid, ev->tid);
	struct pyf_lend *l;
	struct nt_vstr v;
	char *text;

	for (uint32_t i = 0; i < schema->n_fields; i++) {
		const struct nt_field *fd = &schema->fields[i];

		if (strcmp(fd->name, "stack") || fd->type != NT_F_VSTR ||
		    fd->offset + sizeof(v) > ev->size)
			continue;
		memcpy(&v, (const char *)ev + fd->offset, sizeof(v));
		if (!v.len || (uint64_t)v.off + v.len > ev->size)
			return;
		text = python_only((const char *)ev + v.off, v.len);
		if (!text || !text[0]) {
			free(text);
			return;
		}
		if (nt_hmap_count(&f->last) >= PYF_THREADS_MAX &&
		    !nt_hmap_get(&f->last, &key))
			pyf_clear(f); /* bounded: start over */
		l = nt_hmap_put(&f->last, &key, NULL);
		if (!l) {
			free(text);
			return;
		}
		free(l->text);
		l->text = text;
		l->ts = ev->ts_ns;
		return;
	}
}

const char *pyf_find(const struct pyframes *f, uint32_t pid, uint32_t tid,
		     uint64_t ts)
{
	uint64_t key = thread_key(pid, tid);
	const struct pyf_lend *l = nt_hmap_get(&f->last, &key);

	return l && l->ts == ts ? l->text : NULL;
}

bool pyf_merge(struct pyframes *f, struct cuev *e)
{
	const char *py = pyf_find(f, e->pid, e->tid, e->ts);
	size_t pl, need;

	if (!py)
		return false;
	pl = strlen(py);
	need = pl + 1 + e->stack.len + 1;
	if (need > f->merged_cap) {
		char *n = realloc(f->merged, need);

		if (!n)
			return false;
		f->merged = n;
		f->merged_cap = need;
	}
	memcpy(f->merged, py, pl);
	if (e->stack.len) {
		f->merged[pl++] = STACK_SEP;
		memcpy(f->merged + pl, e->stack.p, e->stack.len);
		pl += e->stack.len;
	}
	f->merged[pl] = '\0';
	e->stack.p = f->merged;
	e->stack.len = pl;
	return true;
}

const char *stack_py_frame(const char *stack, char *out, size_t len)
{
	size_t start = 0, best = 0, best_len = 0;
	size_t n = stack ? strlen(stack) : 0;

	if (!len)
		return out;
	out[0] = '\0';
	if (!stack) /* no arithmetic on a null pointer (UBSan) */
		return out;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && stack[i] != STACK_SEP)
			continue;
		if (py_frame(stack + start, i - start)) {
			best = start;
			best_len = i - start;
		}
		start = i + 1;
	}
	if (best_len) {
		if (best_len >= len)
			best_len = len - 1;
		memcpy(out, stack + best, best_len);
		out[best_len] = '\0';
	}
	return out;
}
