/* SPDX-License-Identifier: MIT */
#include "allocmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------------ */
/* Interned stack texts: the copies live in str[id], the index (an nt_hmap
 * of struct nt_hstr pointing at them -> id) finds a text's id. */

void stacktab_init(struct stacktab *t, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max ? max : 65536;
	nt_hmap_init_str(&t->index, sizeof(uint32_t), 0);
}

void stacktab_fini(struct stacktab *t)
{
	for (uint32_t i = 1; i < t->n; i++)
		free(t->str[i]);
	free(t->str);
	nt_hmap_fini(&t->index);
	memset(t, 0, sizeof(*t));
}

/* Copies the text into str[] and indexes it; its id, 0 on ENOMEM. */
static uint32_t stacktab_add(struct stacktab *t, const char *s, size_t n)
{
	struct nt_hstr key = { .len = n };
	uint32_t *slot;
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
	key.s = copy;
	slot = nt_hmap_put(&t->index, &key, NULL);
	if (!slot) {
		free(copy);
		return 0;
	}
	*slot = t->n;
	t->str[t->n] = copy;
	return t->n++;
}

uint32_t stacktab_intern(struct stacktab *t, const char *s, size_t n)
{
	static const char msg[] = "[more distinct stacks than stack_limit]";
	struct nt_hstr key;
	const uint32_t *id;

	while (n && (s[n - 1] == ';' || s[n - 1] == '\n'))
		n--;
	if (!s || !n)
		return 0;
	key = (struct nt_hstr){ .s = s, .len = n };
	id = nt_hmap_get(&t->index, &key);
	if (id)
		return *id;
	if (t->n >= t->max) {
		if (!t->overflow_id)
			t->overflow_id = stacktab_add(t, msg, sizeof(msg) - 1);
		return t->overflow_id;
	}
	return stacktab_add(t, s, n);
}

const char *stacktab_get(const struct stacktab *t, uint32_t id)
{
	if (id == 0 || id >= t->n)
		return "";
	return t->str[id];
}

/* ------------------------------------------------------------------ */
/* Live allocations: an nt_hmap (struct amap_key -> struct amap_entry). */

struct amap_key {
	uint32_t pid;
	uint32_t zero; /* the key is hashed and compared whole */
	uint64_t ptr;
};

static inline struct amap_key amap_key(uint32_t pid, uint64_t ptr)
{
	return (struct amap_key){ .pid = pid, .ptr = ptr };
}

int amap_init(struct amap *m)
{
	memset(m, 0, sizeof(*m));
	return nt_hmap_init(&m->live, sizeof(struct amap_key),
			    sizeof(struct amap_entry), 0);
}

void amap_fini(struct amap *m)
{
	nt_hmap_fini(&m->live);
	free(m->procs);
	memset(m, 0, sizeof(*m));
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
	struct amap_key key = amap_key(a->pid, a->ptr);
	struct amap_proc *p = amap_proc(m, a->pid, a->dev);
	struct amap_entry *e;
	bool created;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	e = nt_hmap_put(&m->live, &key, &created);
	if (!e)
		return -ENOMEM;
	if (!created) {
		struct amap_proc *op = amap_proc(m, e->pid, e->dev);

		if (op) {
			op->live_bytes -= e->size;
			op->live_count--;
			op->replaced++;
		}
		ret = 1;
	}
	*e = *a;
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
	struct amap_key key = amap_key(pid, ptr);
	const struct amap_entry *e = nt_hmap_get(&m->live, &key);

	if (e && out)
		*out = *e;
	return e != NULL;
}

bool amap_set_aux(struct amap *m, uint32_t pid, uint64_t ptr, uint32_t aux)
{
	struct amap_key key = amap_key(pid, ptr);
	struct amap_entry *e = nt_hmap_get(&m->live, &key);

	if (e)
		e->aux = aux;
	return e != NULL;
}

bool amap_free(struct amap *m, uint32_t pid, uint64_t ptr, int32_t dev_hint,
	       struct amap_entry *out)
{
	struct amap_key key = amap_key(pid, ptr);
	struct amap_entry *e = nt_hmap_get(&m->live, &key);
	struct amap_proc *p;

	if (!e) {
		p = amap_proc(m, pid, dev_hint < 0 ? 0 : dev_hint);
		if (p)
			p->unmatched_frees++;
		return false;
	}
	if (out)
		*out = *e;
	p = amap_proc(m, pid, e->dev);
	if (p) {
		p->live_bytes -= e->size;
		p->live_count--;
		p->n_free++;
		p->freed_bytes += e->size;
	}
	nt_hmap_del(&m->live, &key);
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
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, (struct nt_hmap *)&m->live);
	     nt_hmap_iter_next(&it);) {
		const struct amap_entry *e = it.val;

		if (e->pid != pid || (dev >= 0 && e->dev != dev))
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
		v[n++] = *e;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_addr);
	*out = v;
	return (long)n;
}

void amap_drop_pid(struct amap *m, uint32_t pid)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, &m->live); nt_hmap_iter_next(&it);)
		if (((const struct amap_entry *)it.val)->pid == pid)
			nt_hmap_iter_del(&it);
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
