/* SPDX-License-Identifier: MIT */
#include "pyagg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small open-addressing index: slots hold id + 1 (0 = empty) ---- */

struct idx {
	uint32_t *slot;
	uint32_t cap; /* power of two */
	uint32_t n;
};

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

#define FNV0 1469598103934665603ULL

static int idx_grow(struct idx *x, uint64_t (*hash)(const void *, uint32_t),
		    const void *ctx)
{
	uint32_t ncap = x->cap ? x->cap * 2 : 256;
	uint32_t *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -1;
	for (uint32_t i = 0; i < x->cap; i++) {
		uint32_t v = x->slot[i];
		uint64_t h;

		if (!v)
			continue;
		h = hash(ctx, v - 1);
		for (uint32_t j = (uint32_t)h & (ncap - 1);; j = (j + 1) & (ncap - 1))
			if (!ns[j]) {
				ns[j] = v;
				break;
			}
	}
	free(x->slot);
	x->slot = ns;
	x->cap = ncap;
	return 0;
}

/* ---- the aggregate ---- */

struct str_ent {
	char *s;
	uint64_t h;
};

struct frame_ent {
	const char *func, *file;
	int line;
	uint64_t h;
};

struct stack_ent {
	uint32_t pid, tid;
	uint8_t state;
	uint8_t dead; /* forgotten */
	uint32_t n;
	uint32_t *frames;
	const char *comm;
	uint64_t samples, published;
	uint64_t h;
};

struct py_agg {
	struct str_ent *strs;
	uint32_t n_strs, cap_strs;
	struct idx str_idx;

	struct frame_ent *frames;
	uint32_t n_frames, cap_frames;
	struct idx frame_idx;

	struct stack_ent *stacks;
	uint32_t n_stacks, cap_stacks, live_stacks, max_stacks;
	struct idx stack_idx;
	uint32_t other_frame;
};

const char *py_state_name(unsigned state)
{
	static const char *const n[] = { "cpu", "idle", "cuda" };

	return state < PY_ST_N ? n[state] : "?";
}

static uint64_t str_hash_of(const void *ctx, uint32_t id)
{
	return ((const struct py_agg *)ctx)->strs[id].h;
}

static uint64_t frame_hash_of(const void *ctx, uint32_t id)
{
	return ((const struct py_agg *)ctx)->frames[id].h;
}

static uint64_t stack_hash_of(const void *ctx, uint32_t id)
{
	return ((const struct py_agg *)ctx)->stacks[id].h;
}

struct py_agg *py_agg_new(uint32_t max_stacks)
{
	struct py_agg *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->max_stacks = max_stacks ? max_stacks : 100000;
	a->other_frame = UINT32_MAX;
	return a;
}

void py_agg_free(struct py_agg *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; i < a->n_strs; i++)
		free(a->strs[i].s);
	for (uint32_t i = 0; i < a->n_stacks; i++)
		free(a->stacks[i].frames);
	free(a->strs);
	free(a->frames);
	free(a->stacks);
	free(a->str_idx.slot);
	free(a->frame_idx.slot);
	free(a->stack_idx.slot);
	free(a);
}

static int grow_arr(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t ncap;
	void *n;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	n = realloc(*arr, (size_t)ncap * elem);
	if (!n)
		return -1;
	*arr = n;
	*cap = ncap;
	return 0;
}

const char *py_agg_intern(struct py_agg *a, const char *s)
{
	size_t len;
	uint64_t h;
	uint32_t j;

	if (!s)
		return NULL;
	len = strlen(s);
	h = fnv(s, len, FNV0);
	if (a->str_idx.cap) {
		for (j = (uint32_t)h & (a->str_idx.cap - 1); a->str_idx.slot[j];
		     j = (j + 1) & (a->str_idx.cap - 1)) {
			struct str_ent *e = &a->strs[a->str_idx.slot[j] - 1];

			if (e->h == h && strcmp(e->s, s) == 0)
				return e->s;
		}
	}
	if ((a->str_idx.n + 1) * 2 > a->str_idx.cap &&
	    idx_grow(&a->str_idx, str_hash_of, a))
		return NULL;
	if (grow_arr((void **)&a->strs, &a->cap_strs, a->n_strs + 1,
		     sizeof(*a->strs)))
		return NULL;
	struct str_ent *e = &a->strs[a->n_strs];

	e->s = strdup(s);
	if (!e->s)
		return NULL;
	e->h = h;
	for (j = (uint32_t)h & (a->str_idx.cap - 1); a->str_idx.slot[j];
	     j = (j + 1) & (a->str_idx.cap - 1))
		;
	a->str_idx.slot[j] = ++a->n_strs;
	a->str_idx.n++;
	return e->s;
}

uint32_t py_agg_frame(struct py_agg *a, const char *func, const char *file,
		      int line)
{
	uint64_t h;
	uint32_t j;

	func = py_agg_intern(a, func ? func : "?");
	file = file ? py_agg_intern(a, file) : NULL;
	if (!func)
		return UINT32_MAX;
	h = fnv(&func, sizeof(func), FNV0);
	h = fnv(&file, sizeof(file), h);
	h = fnv(&line, sizeof(line), h);
	if (a->frame_idx.cap) {
		for (j = (uint32_t)h & (a->frame_idx.cap - 1); a->frame_idx.slot[j];
		     j = (j + 1) & (a->frame_idx.cap - 1)) {
			uint32_t id = a->frame_idx.slot[j] - 1;
			struct frame_ent *e = &a->frames[id];

			if (e->h == h && e->func == func && e->file == file &&
			    e->line == line)
				return id;
		}
	}
	if ((a->frame_idx.n + 1) * 2 > a->frame_idx.cap &&
	    idx_grow(&a->frame_idx, frame_hash_of, a))
		return UINT32_MAX;
	if (grow_arr((void **)&a->frames, &a->cap_frames, a->n_frames + 1,
		     sizeof(*a->frames)))
		return UINT32_MAX;
	a->frames[a->n_frames] = (struct frame_ent){ func, file, line, h };
	for (j = (uint32_t)h & (a->frame_idx.cap - 1); a->frame_idx.slot[j];
	     j = (j + 1) & (a->frame_idx.cap - 1))
		;
	a->frame_idx.slot[j] = ++a->n_frames;
	a->frame_idx.n++;
	return a->n_frames - 1;
}

static uint64_t stack_hash(uint32_t pid, uint32_t tid, unsigned state,
			   const uint32_t *frames, uint32_t n)
{
	uint64_t h = fnv(&pid, sizeof(pid), FNV0);
	uint8_t st = (uint8_t)state;

	h = fnv(&tid, sizeof(tid), h);
	h = fnv(&st, 1, h);
	return fnv(frames, (size_t)n * sizeof(*frames), h);
}

static uint32_t stack_get(struct py_agg *a, uint32_t pid, uint32_t tid,
			  unsigned state, const uint32_t *frames, uint32_t n,
			  const char *comm, bool force)
{
	uint64_t h = stack_hash(pid, tid, state, frames, n);
	uint32_t j;
	struct stack_ent *e;

	if (a->stack_idx.cap) {
		for (j = (uint32_t)h & (a->stack_idx.cap - 1); a->stack_idx.slot[j];
		     j = (j + 1) & (a->stack_idx.cap - 1)) {
			uint32_t id = a->stack_idx.slot[j] - 1;

			e = &a->stacks[id];
			if (e->h == h && !e->dead && e->pid == pid &&
			    e->tid == tid && e->state == state && e->n == n &&
			    memcmp(e->frames, frames, n * sizeof(*frames)) == 0) {
				if (comm && (!e->comm || strcmp(e->comm, comm)))
					e->comm = py_agg_intern(a, comm);
				return id;
			}
		}
	}
	if (a->live_stacks >= a->max_stacks && !force) {
		/* Too many distinct stacks: fold into one per pid/tid/state. */
		if (a->other_frame == UINT32_MAX)
			a->other_frame = py_agg_frame(a, "[other stacks]", NULL, 0);
		if (a->other_frame == UINT32_MAX)
			return UINT32_MAX;
		return stack_get(a, pid, tid, state, &a->other_frame, 1, comm, true);
	}
	if ((a->stack_idx.n + 1) * 2 > a->stack_idx.cap &&
	    idx_grow(&a->stack_idx, stack_hash_of, a))
		return UINT32_MAX;
	if (grow_arr((void **)&a->stacks, &a->cap_stacks, a->n_stacks + 1,
		     sizeof(*a->stacks)))
		return UINT32_MAX;
	e = &a->stacks[a->n_stacks];
	memset(e, 0, sizeof(*e));
	e->frames = malloc((n ? n : 1) * sizeof(*frames));
	if (!e->frames)
		return UINT32_MAX;
	memcpy(e->frames, frames, n * sizeof(*frames));
	e->n = n;
	e->pid = pid;
	e->tid = tid;
	e->state = (uint8_t)state;
	e->h = h;
	e->comm = comm ? py_agg_intern(a, comm) : NULL;
	for (j = (uint32_t)h & (a->stack_idx.cap - 1); a->stack_idx.slot[j];
	     j = (j + 1) & (a->stack_idx.cap - 1))
		;
	a->stack_idx.slot[j] = ++a->n_stacks;
	a->stack_idx.n++;
	a->live_stacks++;
	return a->n_stacks - 1;
}

uint32_t py_agg_stack(struct py_agg *a, uint32_t pid, uint32_t tid,
		      unsigned state, const uint32_t *frames, uint32_t n,
		      const char *comm)
{
	return stack_get(a, pid, tid, state, frames, n, comm, false);
}

void py_agg_add(struct py_agg *a, uint32_t stack, uint64_t samples)
{
	if (stack < a->n_stacks)
		a->stacks[stack].samples += samples;
}

uint64_t py_agg_samples(const struct py_agg *a, uint32_t stack)
{
	return stack < a->n_stacks ? a->stacks[stack].samples : 0;
}

static size_t put(char *buf, size_t len, size_t at, const char *s)
{
	size_t l = strlen(s);

	if (at + 1 >= len)
		return at;
	if (at + l >= len)
		l = len - 1 - at;
	memcpy(buf + at, s, l);
	buf[at + l] = '\0';
	return at + l;
}

size_t py_agg_folded(const struct py_agg *a, uint32_t stack, bool lines,
		     char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	if (!len || stack >= a->n_stacks)
		return 0;
	return py_agg_folded_frames(a, a->stacks[stack].frames, a->stacks[stack].n,
				    lines, buf, len);
}

size_t py_agg_folded_frames(const struct py_agg *a, const uint32_t *frames,
			    uint32_t n, bool lines, char *buf, size_t len)
{
	size_t at = 0;
	char num[32];

	if (!len)
		return 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		const struct frame_ent *f;

		if (frames[i] >= a->n_frames)
			continue;
		f = &a->frames[frames[i]];
		if (at)
			at = put(buf, len, at, ";");
		at = put(buf, len, at, f->func);
		if (f->file) {
			at = put(buf, len, at, " (");
			at = put(buf, len, at, f->file);
			if (lines) {
				snprintf(num, sizeof(num), ":%d", f->line);
				at = put(buf, len, at, num);
			}
			at = put(buf, len, at, ")");
		}
	}
	return at;
}

void py_agg_emit(struct py_agg *a, uint32_t pid, py_stack_fn fn, void *arg)
{
	for (uint32_t i = 0; i < a->n_stacks; i++) {
		struct stack_ent *e = &a->stacks[i];

		if (e->dead || (pid && e->pid != pid) || e->samples == e->published)
			continue;
		fn(arg, i, e->pid, e->tid, e->state, e->comm,
		   e->samples - e->published);
		e->published = e->samples;
	}
}

/* ---- per-function rows ---- */

struct fn_acc {
	const char *func, *file;
	uint64_t self, total, self_cpu;
	uint32_t last_stack; /* to count a function once per stack */
};

static int row_cmp(const void *x, const void *y)
{
	const struct fn_acc *a = x, *b = y;

	if (a->self != b->self)
		return a->self < b->self ? 1 : -1;
	if (a->total != b->total)
		return a->total < b->total ? 1 : -1;
	return strcmp(a->func, b->func);
}

size_t py_agg_top(const struct py_agg *a, uint32_t pid, size_t top,
		  struct py_func_row *rows, uint64_t *all)
{
	struct fn_acc *acc = NULL;
	uint32_t n_acc = 0, cap_acc = 0;
	uint64_t sum = 0;
	size_t out = 0;
	/* function key (func, file) -> acc index, linear probing */
	uint32_t *slot = NULL, cap = 0;

	for (uint32_t i = 0; i < a->n_stacks; i++) {
		const struct stack_ent *e = &a->stacks[i];

		if (e->dead || e->pid != pid || e->state == PY_ST_CUDA || !e->samples)
			continue;
		sum += e->samples;
		for (uint32_t k = 0; k < e->n; k++) {
			const struct frame_ent *f = &a->frames[e->frames[k]];
			uint64_t h = fnv(&f->func, sizeof(f->func), FNV0);
			uint32_t j;

			h = fnv(&f->file, sizeof(f->file), h);
			if ((n_acc + 1) * 2 > cap) {
				uint32_t ncap = cap ? cap * 2 : 256;
				uint32_t *ns = calloc(ncap, sizeof(*ns));

				if (!ns)
					goto done;
				for (uint32_t s = 0; s < cap; s++) {
					if (!slot[s])
						continue;
					const struct fn_acc *r = &acc[slot[s] - 1];
					uint64_t rh = fnv(&r->func, sizeof(r->func), FNV0);

					rh = fnv(&r->file, sizeof(r->file), rh);
					for (j = (uint32_t)rh & (ncap - 1); ns[j]; j = (j + 1) & (ncap - 1))
						;
					ns[j] = slot[s];
				}
				free(slot);
				slot = ns;
				cap = ncap;
			}
			for (j = (uint32_t)h & (cap - 1); slot[j]; j = (j + 1) & (cap - 1)) {
				const struct fn_acc *r = &acc[slot[j] - 1];

				if (r->func == f->func && r->file == f->file)
					break;
			}
			if (!slot[j]) {
				if (grow_arr((void **)&acc, &cap_acc, n_acc + 1, sizeof(*acc)))
					goto done;
				acc[n_acc] = (struct fn_acc){ f->func, f->file, 0, 0, 0, UINT32_MAX };
				slot[j] = ++n_acc;
			}
			struct fn_acc *r = &acc[slot[j] - 1];

			if (r->last_stack != i) {
				r->total += e->samples;
				r->last_stack = i;
			}
			if (k == e->n - 1) {
				r->self += e->samples;
				if (e->state == PY_ST_CPU)
					r->self_cpu += e->samples;
			}
		}
	}
	if (n_acc)
		qsort(acc, n_acc, sizeof(*acc), row_cmp);
	for (uint32_t i = 0; i < n_acc && out < top; i++, out++) {
		rows[out].func = acc[i].func;
		rows[out].file = acc[i].file;
		rows[out].self = acc[i].self;
		rows[out].total = acc[i].total;
		rows[out].self_cpu = acc[i].self_cpu;
		rows[out].self_pct = sum ? 100.0 * (double)acc[i].self / (double)sum : 0;
		rows[out].total_pct = sum ? 100.0 * (double)acc[i].total / (double)sum : 0;
	}
done:
	free(slot);
	free(acc);
	if (all)
		*all = sum;
	return out;
}

size_t py_agg_report(const struct py_agg *a, uint32_t pid, size_t top,
		     char *buf, size_t len)
{
	struct py_func_row *rows = calloc(top ? top : 1, sizeof(*rows));
	uint64_t all = 0;
	size_t n, at = 0;
	int w;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (!rows)
		return 0;
	n = py_agg_top(a, pid, top, rows, &all);
	w = snprintf(buf, len,
		     "python: pid %u, %llu samples; top %zu functions by self samples\n"
		     "%10s %7s %10s %7s %7s  %s\n",
		     pid, (unsigned long long)all, n, "SELF", "SELF%", "TOTAL",
		     "TOTAL%", "ONCPU%", "FUNCTION (FILE)");
	at = w > 0 ? ((size_t)w < len ? (size_t)w : len - 1) : 0;
	for (size_t i = 0; i < n && at + 1 < len; i++) {
		w = snprintf(buf + at, len - at, "%10llu %6.2f%% %10llu %6.2f%% %6.1f%%  %s%s%s%s\n",
			     (unsigned long long)rows[i].self, rows[i].self_pct,
			     (unsigned long long)rows[i].total, rows[i].total_pct,
			     rows[i].self ? 100.0 * (double)rows[i].self_cpu / (double)rows[i].self : 0.0,
			     rows[i].func, rows[i].file ? " (" : "",
			     rows[i].file ? rows[i].file : "", rows[i].file ? ")" : "");
		if (w < 0)
			break;
		at += (size_t)w;
		if (at >= len)
			at = len - 1;
	}
	free(rows);
	return at;
}

uint32_t py_agg_n_frames(const struct py_agg *a)
{
	return a->n_frames;
}

void py_agg_forget(struct py_agg *a, uint32_t pid)
{
	for (uint32_t i = 0; i < a->n_stacks; i++) {
		struct stack_ent *e = &a->stacks[i];

		if (e->pid == pid && !e->dead) {
			e->dead = 1;
			free(e->frames);
			e->frames = NULL;
			e->n = 0;
			a->live_stacks--;
		}
	}
}

uint32_t py_agg_n_stacks(const struct py_agg *a)
{
	return a->live_stacks;
}

const char *py_agg_frame_func(const struct py_agg *a, uint32_t frame,
			      const char **file, int *line)
{
	if (frame >= a->n_frames) {
		*file = NULL;
		*line = 0;
		return "?";
	}
	*file = a->frames[frame].file;
	*line = a->frames[frame].line;
	return a->frames[frame].func;
}

const uint32_t *py_agg_stack_frames(const struct py_agg *a, uint32_t stack,
				    uint32_t *n)
{
	if (stack >= a->n_stacks || a->stacks[stack].dead)
		return NULL;
	*n = a->stacks[stack].n;
	return a->stacks[stack].frames;
}

/* ---- u64 -> pointer map ---- */

static uint32_t mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return (uint32_t)k;
}

void *py_map_get(const struct py_map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (uint32_t j = mix64(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
		if (!m->vals[j])
			return NULL;
		if (m->vals[j] != PY_MAP_TOMB && m->keys[j] == key)
			return m->vals[j];
	}
}

static int map_rehash(struct py_map *m, uint32_t ncap)
{
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	void **nv = calloc(ncap, sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	for (uint32_t i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->vals[i] || m->vals[i] == PY_MAP_TOMB)
			continue;
		for (j = mix64(m->keys[i]) & (ncap - 1); nv[j]; j = (j + 1) & (ncap - 1))
			;
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	m->used = m->n;
	return 0;
}

int py_map_put(struct py_map *m, uint64_t key, void *val)
{
	uint32_t j, tomb = UINT32_MAX;

	if ((m->used + 1) * 4 > m->cap * 3 &&
	    map_rehash(m, m->n * 4 > m->cap ? (m->cap ? m->cap * 2 : 64) : (m->cap ? m->cap : 64)))
		return -1;
	for (j = mix64(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
		if (!m->vals[j])
			break;
		if (m->vals[j] == PY_MAP_TOMB) {
			if (tomb == UINT32_MAX)
				tomb = j;
			continue;
		}
		if (m->keys[j] == key) {
			m->vals[j] = val;
			return 0;
		}
	}
	if (tomb != UINT32_MAX) {
		j = tomb;
	} else {
		m->used++;
	}
	m->keys[j] = key;
	m->vals[j] = val;
	m->n++;
	return 0;
}

void *py_map_del(struct py_map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (uint32_t j = mix64(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
		void *v = m->vals[j];

		if (!v)
			return NULL;
		if (v != PY_MAP_TOMB && m->keys[j] == key) {
			m->vals[j] = PY_MAP_TOMB;
			m->n--;
			return v;
		}
	}
}

bool py_map_next(const struct py_map *m, uint32_t *it, uint64_t *key,
		 void **val)
{
	while (*it < m->cap) {
		uint32_t j = (*it)++;

		if (m->vals[j] && m->vals[j] != PY_MAP_TOMB) {
			*key = m->keys[j];
			*val = m->vals[j];
			return true;
		}
	}
	return false;
}

void py_map_free(struct py_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
