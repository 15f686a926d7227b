/* SPDX-License-Identifier: MIT */
/*
 * python probe: publishing what was aggregated. python.stack (folded
 * stacks), python.report (per-function table), python.calls (exact call
 * counts from the BPF py_calls map), python.exception, and the metrics of
 * samples, top functions, calls, exceptions and walk errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "pyplugin.h"

struct emit_ctx {
	struct py_plugin *st;
	char *buf;
	size_t len;
};

static void emit_stack(void *arg, uint32_t stack, uint32_t pid, uint32_t tid,
		       unsigned state, const char *comm, uint64_t delta)
{
	struct emit_ctx *ec = arg;
	struct py_plugin *st = ec->st;
	const char *sn = py_state_name(state);
	size_t fl = py_agg_folded(st->agg, stack, st->cfg->lines, ec->buf, ec->len);
	size_t sl = strlen(sn), at;
	struct py_stack_ev *e;
	char c[NT_COMM_LEN] = { 0 };
	struct pyp *p = proc_get(st, pid, false);

	if (!fl)
		return;
	e = ev_begin(st, sizeof(*e), fl + sl + 8);
	if (!e)
		return;
	at = sizeof(*e);
	e->count = delta;
	e->period_ns = state == PY_ST_CUDA ? 0 : st->period_ns;
	ev_str(e, &at, &e->state, sn, sl);
	ev_str(e, &at, &e->stack, ec->buf, fl);
	if (comm)
		memcpy(c, comm, strnlen(comm, NT_COMM_LEN));
	hdr_fill(&e->hdr, st->t_stack, at, pid, tid, c);
	st->host->publish(st->inst, &e->hdr);
	if (p && state < PY_ST_CUDA) {
		const char *lv[2] = { p->pid_s, sn };

		st->host->metric_add(st->m[M_SAMPLES], lv, (double)delta);
	}
}

/* Sampled totals of (func, file) in pid, from the per-function rows. */
struct fn_rows {
	uint32_t pid;
	struct py_func_row *rows;
	size_t n;
};

static void sampled_time(struct py_plugin *st, struct fn_rows *fr, uint32_t pid,
			 const char *func, const char *file, uint64_t *incl,
			 uint64_t *self)
{
	*incl = *self = 0;
	if (!fr->rows || fr->pid != pid) {
		size_t cap = py_agg_n_frames(st->agg) + 1;

		free(fr->rows);
		fr->rows = calloc(cap, sizeof(*fr->rows));
		fr->n = fr->rows ? py_agg_top(st->agg, pid, cap, fr->rows, NULL) : 0;
		fr->pid = pid;
	}
	for (size_t i = 0; i < fr->n; i++)
		if (strcmp(fr->rows[i].func, func) == 0 && fr->rows[i].file &&
		    strcmp(fr->rows[i].file, file) == 0) {
			*incl = fr->rows[i].total * st->period_ns;
			*self = fr->rows[i].self * st->period_ns;
			return;
		}
}

struct call_acc {
	struct call_name *name;
	uint32_t pid;
	struct py_call_stats d;
};

struct call_accs {
	struct call_acc *v;
	size_t n, cap;
};

/* The row of (target, pid), added zeroed if new; NULL on ENOMEM. */
static struct call_acc *call_acc_of(struct call_accs *a, struct call_name *target,
				    uint32_t pid)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].name == target && a->v[i].pid == pid)
			return &a->v[i];
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		struct call_acc *na = realloc(a->v, nc * sizeof(*na));

		if (!na)
			return NULL;
		a->v = na;
		a->cap = nc;
	}
	memset(&a->v[a->n], 0, sizeof(a->v[a->n]));
	a->v[a->n].name = target;
	a->v[a->n].pid = pid;
	return &a->v[a->n++];
}

/* Sum the BPF keys of pid (0: all) per function since the last time:
 * returns seen before the process was registered carry no code object and
 * fold into the key that has one for the same name pointers. */
static void calls_collect(struct py_plugin *st, uint32_t pid, struct call_accs *a)
{
	int fd = bpf_map__fd(st->skel->maps.py_calls);
	struct py_call_key key, next, *prev = NULL;
	struct py_call_stats val;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct call_name *cn, *target;
		struct call_acc *c;

		key = next;
		prev = &key;
		if ((pid && key.pid != pid) || bpf_map_lookup_elem(fd, &key, &val))
			continue;
		cn = py_map_get(&st->names, call_key_hash(&key));
		if (!cn)
			continue;
		target = cn;
		if (!key.code) {
			struct call_name *sib = py_map_get(&st->siblings, call_key_hash(&key));

			if (sib)
				target = sib;
		}
		if (!target->match || val.calls == cn->pub.calls)
			continue;
		if (!(c = call_acc_of(a, target, key.pid)))
			break;
		c->d.calls += val.calls - cn->pub.calls;
		c->d.timed += val.timed - cn->pub.timed;
		c->d.incl_ns += val.incl_ns - cn->pub.incl_ns;
		c->d.self_ns += val.self_ns - cn->pub.self_ns;
		cn->pub = val;
	}
}

/* One function's python.calls event and its call metrics. */
static void publish_call(struct py_plugin *st, const struct call_acc *c,
			 struct fn_rows *fr)
{
	struct call_name *cn = c->name;
	size_t lf = strlen(cn->func), lfi = strlen(cn->file), at;
	struct py_calls_ev *e = ev_begin(st, sizeof(*e), lf + lfi + 8);
	struct pyp *p = proc_get(st, c->pid, false);
	char label[2 * PY_NAME_MAX + 4];
	const char *pid_s = p ? p->pid_s : "0";
	const char *lv[2] = { pid_s, label };
	const char *li[3] = { pid_s, label, "inclusive" };
	const char *ls[3] = { pid_s, label, "self" };

	if (!e)
		return;
	at = sizeof(*e);
	e->calls = c->d.calls;
	e->timed_calls = c->d.timed;
	e->inclusive_ns = c->d.incl_ns;
	e->self_ns = c->d.self_ns;
	e->line = cn->line;
	sampled_time(st, fr, c->pid, cn->func, cn->file, &e->sampled_inclusive_ns,
		     &e->sampled_self_ns);
	ev_str(e, &at, &e->function, cn->func, lf);
	ev_str(e, &at, &e->file, cn->file, lfi);
	hdr_fill(&e->hdr, st->t_calls, at, c->pid, c->pid, NULL);
	st->host->publish(st->inst, &e->hdr);
	snprintf(label, sizeof(label), "%s (%s)", cn->func, cn->file);
	st->host->metric_add(st->m[M_CALLS], lv, (double)c->d.calls);
	if (c->d.timed) {
		st->host->metric_add(st->m[M_CALLSEC], li, (double)c->d.incl_ns / 1e9);
		st->host->metric_add(st->m[M_CALLSEC], ls, (double)c->d.self_ns / 1e9);
	}
}

static void publish_calls(struct py_plugin *st, uint32_t pid)
{
	struct call_accs a = { 0 };
	struct fn_rows fr = { 0 };

	calls_collect(st, pid, &a);
	for (size_t i = 0; i < a.n; i++)
		publish_call(st, &a.v[i], &fr);
	free(a.v);
	free(fr.rows);
}

static void publish_excs(struct py_plugin *st, uint32_t pid, char *buf, size_t len)
{
	for (size_t i = 0; i < st->n_excs; i++) {
		struct exc_ent *x = &st->excs[i];
		const char *func = "?", *file = "";
		int line = 0;
		size_t fl, lt, lfn, lfi, at;
		struct py_exc_ev *e;
		struct pyp *p;

		if ((pid && x->pid != pid) || x->count == x->published)
			continue;
		fl = py_agg_folded(st->agg, x->stack, true, buf, len);
		func = py_agg_frame_func(st->agg, x->top_frame, &file, &line);
		if (!file)
			file = "";
		lt = strlen(x->type);
		lfn = strlen(func);
		lfi = strlen(file);
		e = ev_begin(st, sizeof(*e), lt + lfn + lfi + fl + 8);
		if (!e)
			continue;
		at = sizeof(*e);
		e->count = x->count - x->published;
		e->line = line;
		ev_str(e, &at, &e->exc_type, x->type, lt);
		ev_str(e, &at, &e->function, func, lfn);
		ev_str(e, &at, &e->file, file, lfi);
		ev_str(e, &at, &e->stack, buf, fl);
		hdr_fill(&e->hdr, st->t_exc, at, x->pid, x->tid, x->comm);
		st->host->publish(st->inst, &e->hdr);
		p = proc_get(st, x->pid, false);
		{
			const char *lv[2] = { p ? p->pid_s : "0", x->type };

			st->host->metric_add(st->m[M_EXC], lv, (double)e->count);
		}
		x->published = x->count;
	}
}

static void publish_top_metrics(struct py_plugin *st, struct pyp *p)
{
	size_t top = (size_t)st->cfg->top_n;
	struct py_func_row *rows = calloc(top, sizeof(*rows));
	char label[1024];
	size_t n;

	if (!rows)
		return;
	n = py_agg_top(st->agg, p->pid, top, rows, NULL);
	for (size_t i = 0; i < n; i++) {
		const char *key;
		struct fn_pub *fp;
		const char *lv[2] = { p->pid_s, label };

		snprintf(label, sizeof(label), "%s%s%s%s", rows[i].func,
			 rows[i].file ? " (" : "", rows[i].file ? rows[i].file : "",
			 rows[i].file ? ")" : "");
		key = py_agg_intern(st->agg, label);
		if (!key)
			continue;
		fp = py_map_get(&p->fnpub, (uint64_t)(uintptr_t)key);
		if (!fp) {
			fp = calloc(1, sizeof(*fp));
			if (!fp || py_map_put(&p->fnpub, (uint64_t)(uintptr_t)key, fp)) {
				free(fp);
				continue;
			}
		}
		if (rows[i].self > fp->self)
			st->host->metric_add(st->m[M_FSELF], lv, (double)(rows[i].self - fp->self));
		if (rows[i].total > fp->total)
			st->host->metric_add(st->m[M_FTOTAL], lv, (double)(rows[i].total - fp->total));
		if (rows[i].self > fp->self)
			fp->self = rows[i].self;
		if (rows[i].total > fp->total)
			fp->total = rows[i].total;
	}
	free(rows);
}

static void publish_report(struct py_plugin *st, uint32_t pid)
{
	size_t at = 0, cap = TEXT_MAX;
	struct py_map_it it = { 0 };
	uint64_t k;
	void *v;
	struct py_report_ev *e;

	st->text[0] = '\0';
	while (py_map_next(&st->procs, &it, &k, &v)) {
		struct pyp *p = v;

		if (p->status != PS_ATTACHED || (pid && p->pid != pid))
			continue;
		if (at + 256 >= cap)
			break;
		at += py_agg_report(st->agg, p->pid, (size_t)st->cfg->top_n,
				    st->text + at, cap - at);
		publish_top_metrics(st, p);
	}
	if (!at)
		return;
	e = ev_begin(st, sizeof(*e), at + 8);
	if (!e)
		return;
	{
		size_t pos = sizeof(*e);

		e->subject_pid = pid;
		ev_str(e, &pos, &e->text, st->text, at);
		struct pyp *subject = pid ? proc_get(st, pid, false) : NULL;
		hdr_fill(&e->hdr, st->t_report, pos, pid, pid, subject ? subject->comm : NULL);
	}
	st->host->publish(st->inst, &e->hdr);
}

/* Everything of pid (0: all) since the last time. */
void publish_all(struct py_plugin *st, uint32_t pid)
{
	struct emit_ctx ec = { st, st->text, TEXT_MAX };

	/* without the BPF object (a test feeding records), only what the
	 * records gave: the maps' pending off-CPU time and calls are not there */
	if (st->cfg->idle && st->skel)
		flush_offcpu(st, pid);
	py_agg_emit(st->agg, pid, emit_stack, &ec);
	if (st->cfg->calls && st->skel)
		publish_calls(st, pid);
	if (st->cfg->exceptions)
		publish_excs(st, pid, st->text, TEXT_MAX);
	publish_report(st, pid);
}

void read_stats(struct py_plugin *st)
{
	static const char *const reasons[] = { NULL, NULL, "no_thread_state",
					       "read_error", "truncated" };
	int fd = bpf_map__fd(st->skel->maps.py_stats);
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;

	if (ncpu <= 0)
		return;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return;
	for (uint32_t k = 2; k <= 4; k++) {
		uint64_t sum = 0;

		if (bpf_map_lookup_elem(fd, &k, vals))
			continue;
		for (int i = 0; i < ncpu; i++)
			sum += vals[i];
		if (sum > st->stats_pub[k]) {
			const char *lv[1] = { reasons[k] };

			st->host->metric_add(st->m[M_WALKERR], lv,
					     (double)(sum - st->stats_pub[k]));
			st->stats_pub[k] = sum;
		}
	}
	free(vals);
	if (st->unresolved > st->unresolved_pub) {
		const char *lv[1] = { "unresolved_frame" };

		st->host->metric_add(st->m[M_WALKERR], lv,
				     (double)(st->unresolved - st->unresolved_pub));
		st->unresolved_pub = st->unresolved;
	}
	nt_bpf_report_drops(st->host, st->inst, bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
}
