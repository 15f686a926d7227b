/* SPDX-License-Identifier: MIT */
#include "allocmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "det_util.h"

/* ------------------------------------------------------------------ */

void stacktab_init(struct stacktab *t, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max ? max : 65536;
}

void stacktab_fini(struct stacktab *t)
{
	for (uint32_t i = 1; i < t->n; i++)
		free(t->str[i]);
	free(t->str);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

static int stacktab_grow_index(struct stacktab *t)
{
	uint32_t ns = t->nslots ? t->nslots * 2 : 256;
	uint32_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t id = 1; id < t->n; id++) {
		uint64_t h = hash_bytes(t->str[id], strlen(t->str[id]), 0);
		uint32_t i = (uint32_t)h & (ns - 1);

		while (slots[i])
			i = (i + 1) & (ns - 1);
		slots[i] = id;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = ns;
	return 0;
}

static uint32_t stacktab_add(struct stacktab *t, const char *s, size_t n)
{
	char *copy;

	if (t->n == 0)
		t->n = 1; /* id 0 reserved */
	if (t->n >= t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 64;
		char **ns = realloc(t->str, nc * sizeof(*ns));

		if (!ns)
			return 0;
		t->str = ns;
		t->cap = nc;
		t->str[0] = NULL;
	}
	copy = malloc(n + 1);
	if (!copy)
		return 0;
	memcpy(copy, s, n);
	copy[n] = '\0';
	t->str[t->n] = copy;
	return t->n++;
}

uint32_t stacktab_intern(struct stacktab *t, const char *s, size_t n)
{
	uint64_t h;
	uint32_t i, id;

	while (n && (s[n - 1] == ';' || s[n - 1] == '\n'))
		n--;
	if (!s || !n)
		return 0;
	if ((t->n + 1) * 2 > t->nslots && stacktab_grow_index(t) < 0)
		return 0;
	h = hash_bytes(s, n, 0);
	i = (uint32_t)h & (t->nslots - 1);
	while ((id = t->slots[i]) != 0) {
		if (strncmp(t->str[id], s, n) == 0 && t->str[id][n] == '\0')
			return id;
		i = (i + 1) & (t->nslots - 1);
	}
	if (t->n >= t->max) {
		if (!t->overflow_id) {
			static const char msg[] = "[more distinct stacks than stack_limit]";

			t->overflow_id = stacktab_add(t, msg, sizeof(msg) - 1);
			if (t->overflow_id) {
				/* index it under its own hash */
				uint64_t h2 = hash_bytes(msg, sizeof(msg) - 1, 0);
				uint32_t j = (uint32_t)h2 & (t->nslots - 1);

				while (t->slots[j])
					j = (j + 1) & (t->nslots - 1);
				t->slots[j] = t->overflow_id;
			}
		}
		return t->overflow_id;
	}
	id = stacktab_add(t, s, n);
	if (id)
		t->slots[i] = id;
	return id;
}

const char *stacktab_get(const struct stacktab *t, uint32_t id)
{
	if (id == 0 || id >= t->n)
		return "";
	return t->str[id];
}

/* ------------------------------------------------------------------ */

static inline size_t slot_of(const struct amap *m, uint32_t pid, uint64_t ptr)
{
	return (size_t)hash_u64(ptr ^ ((uint64_t)pid << 47) ^ pid) & (m->cap - 1);
}

int amap_init(struct amap *m)
{
	memset(m, 0, sizeof(*m));
	m->cap = 1024;
	m->e = calloc(m->cap, sizeof(*m->e));
	m->used = calloc(m->cap, 1);
	if (!m->e || !m->used) {
		amap_fini(m);
		return -ENOMEM;
	}
	return 0;
}

void amap_fini(struct amap *m)
{
	free(m->e);
	free(m->used);
	free(m->procs);
	memset(m, 0, sizeof(*m));
}

static size_t amap_find(const struct amap *m, uint32_t pid, uint64_t ptr,
			bool *found)
{
	size_t i = slot_of(m, pid, ptr);

	while (m->used[i]) {
		if (m->e[i].pid == pid && m->e[i].ptr == ptr) {
			*found = true;
			return i;
		}
		i = (i + 1) & (m->cap - 1);
	}
	*found = false;
	return i;
}

static int amap_grow(struct amap *m)
{
	size_t ncap = m->cap * 2;
	struct amap_entry *ne = calloc(ncap, sizeof(*ne));
	uint8_t *nu = calloc(ncap, 1);
	struct amap old = *m;

	if (!ne || !nu) {
		free(ne);
		free(nu);
		return -ENOMEM;
	}
	m->e = ne;
	m->used = nu;
	m->cap = ncap;
	for (size_t i = 0; i < old.cap; i++) {
		bool f;
		size_t j;

		if (!old.used[i])
			continue;
		j = amap_find(m, old.e[i].pid, old.e[i].ptr, &f);
		m->e[j] = old.e[i];
		m->used[j] = 1;
	}
	free(old.e);
	free(old.used);
	return 0;
}

/* Backward-shift deletion keeps linear probing free of tombstones. */
static void amap_remove_at(struct amap *m, size_t i)
{
	size_t j = i;

	m->used[i] = 0;
	for (;;) {
		size_t k;

		j = (j + 1) & (m->cap - 1);
		if (!m->used[j])
			break;
		k = slot_of(m, m->e[j].pid, m->e[j].ptr);
		/* may e[j] move to the hole at i? (k cyclically outside (i, j]) */
		if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		m->e[i] = m->e[j];
		m->used[i] = 1;
		m->used[j] = 0;
		i = j;
	}
	m->count--;
}

struct amap_proc *amap_proc_find(const struct amap *m, uint32_t pid, int32_t dev)
{
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid && m->procs[i].dev == dev)
			return &m->procs[i];
	return NULL;
}

struct amap_proc *amap_proc(struct amap *m, uint32_t pid, int32_t dev)
{
	struct amap_proc *p = amap_proc_find(m, pid, dev);

	if (p)
		return p;
	if (m->nprocs == m->cprocs) {
		size_t nc = m->cprocs ? m->cprocs * 2 : 8;
		struct amap_proc *np = realloc(m->procs, nc * sizeof(*np));

		if (!np)
			return NULL;
		m->procs = np;
		m->cprocs = nc;
	}
	p = &m->procs[m->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->dev = dev;
	return p;
}

int amap_alloc(struct amap *m, const struct amap_entry *a)
{
	struct amap_proc *p;
	bool found;
	size_t i;
	int ret = 0;

	if ((m->count + 1) * 4 > m->cap * 3 && amap_grow(m) < 0)
		return -ENOMEM;
	p = amap_proc(m, a->pid, a->dev);
	if (!p)
		return -ENOMEM;
	i = amap_find(m, a->pid, a->ptr, &found);
	if (found) {
		struct amap_proc *op = amap_proc(m, m->e[i].pid, m->e[i].dev);

		if (op) {
			op->live_bytes -= m->e[i].size;
			op->live_count--;
			op->replaced++;
		}
		ret = 1;
	} else {
		m->count++;
	}
	m->e[i] = *a;
	m->used[i] = 1;
	p->live_bytes += a->size;
	p->live_count++;
	p->n_alloc++;
	if (p->live_bytes > p->peak_bytes)
		p->peak_bytes = p->live_bytes;
	return ret;
}

bool amap_lookup(const struct amap *m, uint32_t pid, uint64_t ptr,
		 struct amap_entry *out)
{
	bool found;
	size_t i = amap_find(m, pid, ptr, &found);

	if (found && out)
		*out = m->e[i];
	return found;
}

bool amap_set_aux(struct amap *m, uint32_t pid, uint64_t ptr, uint32_t aux)
{
	bool found;
	size_t i = amap_find(m, pid, ptr, &found);

	if (found)
		m->e[i].aux = aux;
	return found;
}

bool amap_free(struct amap *m, uint32_t pid, uint64_t ptr, int32_t dev_hint,
	       struct amap_entry *out)
{
	bool found;
	size_t i = amap_find(m, pid, ptr, &found);
	struct amap_proc *p;

	if (!found) {
		p = amap_proc(m, pid, dev_hint < 0 ? 0 : dev_hint);
		if (p)
			p->unmatched_frees++;
		return false;
	}
	if (out)
		*out = m->e[i];
	p = amap_proc(m, pid, m->e[i].dev);
	if (p) {
		p->live_bytes -= m->e[i].size;
		p->live_count--;
		p->n_free++;
		p->freed_bytes += m->e[i].size;
	}
	amap_remove_at(m, i);
	return true;
}

static int cmp_addr(const void *a, const void *b)
{
	const struct amap_entry *x = a, *y = b;

	return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

long amap_collect(const struct amap *m, uint32_t pid, int32_t dev,
		  struct amap_entry **out)
{
	size_t n = 0, cap = 0;
	struct amap_entry *v = NULL;

	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i] || m->e[i].pid != pid ||
		    (dev >= 0 && m->e[i].dev != dev))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct amap_entry *nv = realloc(v, nc * sizeof(*nv));

			if (!nv) {
				free(v);
				return -1;
			}
			v = nv;
			cap = nc;
		}
		v[n++] = m->e[i];
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_addr);
	*out = v;
	return (long)n;
}

void amap_drop_pid(struct amap *m, uint32_t pid)
{
	size_t i = 0;

	/* removal shifts later entries back, so re-examine slot i */
	while (i < m->cap) {
		if (m->used[i] && m->e[i].pid == pid)
			amap_remove_at(m, i);
		else
			i++;
	}
	/* a wrapped cluster may have shifted an entry of pid to slot 0.. */
	for (i = 0; i < m->cap; i++)
		if (m->used[i] && m->e[i].pid == pid) {
			amap_remove_at(m, i);
			i = (size_t)-1;
		}
	for (size_t k = 0; k < m->nprocs;) {
		if (m->procs[k].pid == pid)
			m->procs[k] = m->procs[--m->nprocs];
		else
			k++;
	}
}

static int cmp_stack(const void *a, const void *b)
{
	const struct amap_entry *x = a, *y = b;

	if (x->stack != y->stack)
		return (x->stack > y->stack) - (x->stack < y->stack);
	return (x->dev > y->dev) - (x->dev < y->dev);
}

static int cmp_total(const void *a, const void *b)
{
	const struct stack_total *x = a, *y = b;

	if (x->bytes != y->bytes)
		return (x->bytes < y->bytes) - (x->bytes > y->bytes);
	return (x->stack > y->stack) - (x->stack < y->stack);
}

long stack_totals(const struct amap_entry *v, size_t n, struct stack_total **out)
{
	struct amap_entry *s;
	struct stack_total *t;
	size_t k = 0;

	*out = NULL;
	if (!n)
		return 0;
	s = malloc(n * sizeof(*s));
	t = calloc(n, sizeof(*t));
	if (!s || !t) {
		free(s);
		free(t);
		return -1;
	}
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_stack);
	for (size_t i = 0; i < n; i++) {
		if (k == 0 || t[k - 1].stack != s[i].stack ||
		    t[k - 1].dev != s[i].dev) {
			t[k].stack = s[i].stack;
			t[k].dev = s[i].dev;
			t[k].first_ts = s[i].ts_ns;
			k++;
		}
		t[k - 1].bytes += s[i].size;
		t[k - 1].count++;
		if (s[i].ts_ns < t[k - 1].first_ts)
			t[k - 1].first_ts = s[i].ts_ns;
		if (s[i].ts_ns > t[k - 1].last_ts)
			t[k - 1].last_ts = s[i].ts_ns;
	}
	free(s);
	qsort(t, k, sizeof(*t), cmp_total);
	*out = t;
	return (long)k;
}
