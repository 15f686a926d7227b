/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: aggregation of resolved samples (pyagg.h). Strings,
 * frames and stacks are interned through the kit's hash map (nt_hmap):
 * strings by content, frames by (interned func, interned file, line),
 * stacks by the bytes of (pid, tid, state, frame ids); each gets a dense
 * id, an index into its array.
 */
#include "pyagg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/hmap.h"
#include "ntcore/kit/sb.h"

struct frame_ent {
	const char *func, *file;
	int line;
};

/* A frame's key: interned pointers, so equal names are equal pointers. */
struct frame_key {
	const char *func, *file;
	int64_t line;
};

/* The words of a stack's key before its frame ids. */
#define STACK_KEY_HEAD 3

struct stack_ent {
	uint32_t pid, tid;
	uint8_t state;
	uint8_t dead; /* forgotten */
	uint32_t n;
	uint32_t *key;    /* pid, tid, state, frames[n] (the index's key) */
	uint32_t *frames; /* key + STACK_KEY_HEAD */
	const char *comm;
	uint64_t samples, published;
};

struct py_agg {
	char **strs;
	uint32_t n_strs, cap_strs;
	struct nt_hmap str_idx; /* struct nt_hstr -> uint32_t id */

	struct frame_ent *frames;
	uint32_t n_frames, cap_frames;
	struct nt_hmap frame_idx; /* struct frame_key -> uint32_t id */

	struct stack_ent *stacks;
	uint32_t n_stacks, cap_stacks, live_stacks, max_stacks;
	struct nt_hmap stack_idx; /* struct nt_hstr over stack_ent.key -> id */
	uint32_t other_frame;
};

const char *py_state_name(unsigned state)
{
	static const char *const n[] = { "cpu", "idle", "cuda" };

	return state < PY_ST_N ? n[state] : "?";
}

struct py_agg *py_agg_new(uint32_t max_stacks)
{
	struct py_agg *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->max_stacks = max_stacks ? max_stacks : 100000;
	a->other_frame = UINT32_MAX;
	nt_hmap_init_str(&a->str_idx, sizeof(uint32_t), 0);
	nt_hmap_init(&a->frame_idx, sizeof(struct frame_key), sizeof(uint32_t), 0);
	nt_hmap_init_str(&a->stack_idx, sizeof(uint32_t), 0);
	return a;
}

void py_agg_free(struct py_agg *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; i < a->n_strs; i++)
		free(a->strs[i]);
	for (uint32_t i = 0; i < a->n_stacks; i++)
		free(a->stacks[i].key);
	free(a->strs);
	free(a->frames);
	free(a->stacks);
	nt_hmap_fini(&a->str_idx);
	nt_hmap_fini(&a->frame_idx);
	nt_hmap_fini(&a->stack_idx);
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
	struct nt_hstr key;
	uint32_t *id;
	char *copy;

	if (!s)
		return NULL;
	key = (struct nt_hstr){ s, strlen(s) };
	id = nt_hmap_get(&a->str_idx, &key);
	if (id)
		return a->strs[*id];
	if (grow_arr((void **)&a->strs, &a->cap_strs, a->n_strs + 1, sizeof(*a->strs)))
		return NULL;
	copy = strdup(s);
	key.s = copy; /* the map's key points at the interned copy */
	if (!copy || !(id = nt_hmap_put(&a->str_idx, &key, NULL))) {
		free(copy);
		return NULL;
	}
	*id = a->n_strs;
	a->strs[a->n_strs++] = copy;
	return copy;
}

uint32_t py_agg_frame(struct py_agg *a, const char *func, const char *file,
		      int line)
{
	struct frame_key key;
	uint32_t *id;
	bool created;

	func = py_agg_intern(a, func ? func : "?");
	file = file ? py_agg_intern(a, file) : NULL;
	if (!func)
		return UINT32_MAX;
	memset(&key, 0, sizeof(key));
	key.func = func;
	key.file = file;
	key.line = line;
	if (grow_arr((void **)&a->frames, &a->cap_frames, a->n_frames + 1,
		     sizeof(*a->frames)))
		return UINT32_MAX;
	id = nt_hmap_put(&a->frame_idx, &key, &created);
	if (!id)
		return UINT32_MAX;
	if (created) {
		*id = a->n_frames;
		a->frames[a->n_frames++] = (struct frame_ent){ func, file, line };
	}
	return *id;
}

/* The index key of (pid, tid, state, frames) in key[STACK_KEY_HEAD + n]. */
static struct nt_hstr stack_key(uint32_t *key, uint32_t pid, uint32_t tid,
				unsigned state, const uint32_t *frames, uint32_t n)
{
	key[0] = pid;
	key[1] = tid;
	key[2] = state;
	memcpy(key + STACK_KEY_HEAD, frames, (size_t)n * sizeof(*frames));
	return (struct nt_hstr){ (const char *)key,
				 (STACK_KEY_HEAD + (size_t)n) * sizeof(*key) };
}

/* A new stack entry owning `key` (its frames after the head). */
static uint32_t stack_add(struct py_agg *a, uint32_t *key, uint32_t n,
			  const char *comm)
{
	struct nt_hstr k = { (const char *)key,
			     (STACK_KEY_HEAD + (size_t)n) * sizeof(*key) };
	struct stack_ent *e;
	uint32_t *id;

	if (grow_arr((void **)&a->stacks, &a->cap_stacks, a->n_stacks + 1,
		     sizeof(*a->stacks)) ||
	    !(id = nt_hmap_put(&a->stack_idx, &k, NULL))) {
		free(key);
		return UINT32_MAX;
	}
	*id = a->n_stacks;
	e = &a->stacks[a->n_stacks];
	memset(e, 0, sizeof(*e));
	e->key = key;
	e->frames = key + STACK_KEY_HEAD;
	e->n = n;
	e->pid = key[0];
	e->tid = key[1];
	e->state = (uint8_t)key[2];
	e->comm = comm ? py_agg_intern(a, comm) : NULL;
	a->live_stacks++;
	return a->n_stacks++;
}

static uint32_t stack_get(struct py_agg *a, uint32_t pid, uint32_t tid,
			  unsigned state, const uint32_t *frames, uint32_t n,
			  const char *comm, bool force)
{
	size_t words = STACK_KEY_HEAD + (size_t)n;
	uint32_t local[512], *key = words <= 512 ? local : malloc(words * 4);
	struct nt_hstr k;
	uint32_t *id;

	if (!key)
		return UINT32_MAX;
	k = stack_key(key, pid, tid, state, frames, n);
	id = nt_hmap_get(&a->stack_idx, &k);
	if (key != local)
		free(key);
	if (id) {
		struct stack_ent *e = &a->stacks[*id];

		if (comm && (!e->comm || strcmp(e->comm, comm)))
			e->comm = py_agg_intern(a, comm);
		return *id;
	}
	if (a->live_stacks >= a->max_stacks && !force) {
		/* Too many distinct stacks: fold into one per pid/tid/state. */
		if (a->other_frame == UINT32_MAX)
			a->other_frame = py_agg_frame(a, "[other stacks]", NULL, 0);
		if (a->other_frame == UINT32_MAX)
			return UINT32_MAX;
		return stack_get(a, pid, tid, state, &a->other_frame, 1, comm, true);
	}
	key = malloc(words * sizeof(*key));
	if (!key)
		return UINT32_MAX;
	stack_key(key, pid, tid, state, frames, n);
	return stack_add(a, key, n, comm);
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

static void folded_into(const struct py_agg *a, const uint32_t *frames,
			uint32_t n, bool lines, struct nt_sb *sb)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct frame_ent *f;

		if (frames[i] >= a->n_frames)
			continue;
		f = &a->frames[frames[i]];
		if (sb->len)
			nt_sb_putc(sb, ';');
		nt_sb_puts(sb, f->func);
		if (f->file) {
			nt_sb_put(sb, " (", 2);
			nt_sb_puts(sb, f->file);
			if (lines) {
				nt_sb_putc(sb, ':');
				nt_sb_i64(sb, f->line);
			}
			nt_sb_putc(sb, ')');
		}
	}
}

size_t py_agg_folded_frames(const struct py_agg *a, const uint32_t *frames,
			    uint32_t n, bool lines, char *buf, size_t len)
{
	struct nt_sb sb;
	size_t at;

	if (!len)
		return 0;
	buf[0] = '\0';
	nt_sb_init_buf(&sb, buf, len);
	folded_into(a, frames, n, lines, &sb);
	if (!sb.failed)
		return sb.len;
	/* longer than buf: the text cut at len - 1 bytes, as callers expect */
	nt_sb_init(&sb, 0);
	folded_into(a, frames, n, lines, &sb);
	at = sb.len < len - 1 ? sb.len : len - 1;
	memcpy(buf, nt_sb_str(&sb), at);
	buf[at] = '\0';
	nt_sb_fini(&sb);
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

/* A function's key: its interned name and file. */
struct fn_key {
	const char *func, *file;
};

struct fn_rows_acc {
	struct fn_acc *acc;
	uint32_t n, cap;
	struct nt_hmap idx; /* struct fn_key -> uint32_t index into acc */
};

/* Count one stack of e->samples into its functions' rows (a function
 * once per stack in total, the innermost frame's in self). */
static int fn_rows_add(const struct py_agg *a, struct fn_rows_acc *r, uint32_t i)
{
	const struct stack_ent *e = &a->stacks[i];

	for (uint32_t k = 0; k < e->n; k++) {
		const struct frame_ent *f = &a->frames[e->frames[k]];
		struct fn_key key = { f->func, f->file };
		struct fn_acc *row;
		bool created;
		uint32_t *at;

		if (grow_arr((void **)&r->acc, &r->cap, r->n + 1, sizeof(*r->acc)) ||
		    !(at = nt_hmap_put(&r->idx, &key, &created)))
			return -1;
		if (created) {
			*at = r->n;
			r->acc[r->n++] = (struct fn_acc){ f->func, f->file, 0, 0, 0, UINT32_MAX };
		}
		row = &r->acc[*at];
		if (row->last_stack != i) {
			row->total += e->samples;
			row->last_stack = i;
		}
		if (k == e->n - 1) {
			row->self += e->samples;
			if (e->state == PY_ST_CPU)
				row->self_cpu += e->samples;
		}
	}
	return 0;
}

size_t py_agg_top(const struct py_agg *a, uint32_t pid, size_t top,
		  struct py_func_row *rows, uint64_t *all)
{
	struct fn_rows_acc r = { 0 };
	uint64_t sum = 0;
	size_t out = 0;

	nt_hmap_init(&r.idx, sizeof(struct fn_key), sizeof(uint32_t), 0);
	for (uint32_t i = 0; i < a->n_stacks; i++) {
		const struct stack_ent *e = &a->stacks[i];

		if (e->dead || e->pid != pid || e->state == PY_ST_CUDA || !e->samples)
			continue;
		sum += e->samples;
		if (fn_rows_add(a, &r, i))
			goto done;
	}
	/* sorted whole, not kept by the kit's top-N: ties order by total
	 * samples, then by name (nt_topn keeps the order they came in) */
	if (r.n)
		qsort(r.acc, r.n, sizeof(*r.acc), row_cmp);
	for (uint32_t i = 0; i < r.n && out < top; i++, out++) {
		rows[out].func = r.acc[i].func;
		rows[out].file = r.acc[i].file;
		rows[out].self = r.acc[i].self;
		rows[out].total = r.acc[i].total;
		rows[out].self_cpu = r.acc[i].self_cpu;
		rows[out].self_pct = sum ? 100.0 * (double)r.acc[i].self / (double)sum : 0;
		rows[out].total_pct = sum ? 100.0 * (double)r.acc[i].total / (double)sum : 0;
	}
done:
	nt_hmap_fini(&r.idx);
	free(r.acc);
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
			struct nt_hstr k = { (const char *)e->key,
					     (STACK_KEY_HEAD + (size_t)e->n) * sizeof(*e->key) };

			nt_hmap_del(&a->stack_idx, &k);
			e->dead = 1;
			free(e->key);
			e->key = e->frames = NULL;
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
