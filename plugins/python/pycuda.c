/* SPDX-License-Identifier: MIT */
/*
 * python probe: the CUDA join. A cuda.* event of the cuda probe (a
 * kernel launch, a graph launch, a copy or a set) is matched with a
 * Python stack of the launching process (pyjoin.c decides which: the
 * thread's own recent sample, or a blocked thread's); launches are counted
 * in python.stack with state cuda, and every joined stack is lent as
 * python.launch_stack (pylend.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pyplugin.h"

static const struct nt_field *field_named(const struct nt_schema *s,
					  const char *name, uint16_t type)
{
	for (uint32_t i = 0; i < s->n_fields; i++)
		if (strcmp(s->fields[i].name, name) == 0 && s->fields[i].type == type)
			return &s->fields[i];
	return NULL;
}

/* A thread's off-CPU bookkeeping as of t or later (read again when the
 * copy is older than t). */
static void join_offhist(struct py_plugin *st, struct thr *d, uint32_t tid, uint64_t t)
{
	struct py_offcpu oc;

	if (t > d->oh_read) {
		/* the time first, then the maps: whatever happened up to
		 * oh_read is in them (py_offcpu first: a period ending between
		 * the two reads is then found in py_offhist) */
		d->oh_read = nt_clock_mono_ns();
		d->oh_cur_out = 0;
		d->oh_cur_preempted = false;
		if (bpf_map_lookup_elem(bpf_map__fd(st->skel->maps.py_offcpu),
					&tid, &oc) == 0) {
			d->oh_cur_out = oc.out_ns;
			d->oh_cur_preempted = oc.preempted;
		}
		if (bpf_map_lookup_elem(bpf_map__fd(st->skel->maps.py_offhist),
					&tid, &d->oh))
			memset(&d->oh, 0, sizeof(d->oh));
	}
}

/* pyj_off_fn: was thread tid off the CPU at t (py_offcpu, py_offhist)? */
static int join_off_at(void *arg, uint32_t tid, uint64_t t, uint64_t *start)
{
	struct py_plugin *st = arg;
	struct thr *d = py_map_get(&st->threads, tid);

	if (!d)
		return -1;
	join_offhist(st, d, tid, t);
	return pyj_off_at(&d->oh, d->oh_cur_out, d->oh_cur_preempted, d->oh_read,
			  t, start);
}

/* pyj_blocked_fn: did thread tid block in (a, b]? */
static int join_blocked(void *arg, uint32_t tid, uint64_t a, uint64_t b)
{
	struct py_plugin *st = arg;
	struct thr *d = py_map_get(&st->threads, tid);

	if (!d)
		return -1;
	join_offhist(st, d, tid, b);
	return pyj_blocked_in(&d->oh, d->oh_cur_out, d->oh_cur_preempted, d->oh_read, a, b);
}

/*
 * Is the launching thread a Python thread: one with a thread state
 * (py_tstates) that runs Python code? A thread state alone doesn't say:
 * PyTorch's autograd device threads (pt_autograd_N) take one as they start
 * (PythonEngine::thread_init: gil_scoped_acquire, then gil_scoped_release
 * for the thread's life) and never run a Python frame; they launch every
 * backward kernel. So a thread state without a current Python frame, read
 * now from the process, counts as not Python (checked again every 0.5 s).
 */
static bool join_is_python(struct py_plugin *st, struct pyp *p, uint32_t tid,
			   uint64_t now)
{
	struct thr *t = py_map_get(&st->threads, tid);
	struct py_tstate_ent te;
	struct py_frame fr[1];

	if (t && t->pid == p->pid && t->hist.n)
		return true;
	if (t && t->pid == p->pid && t->ts_checked && now - t->ts_checked < 500000000ull)
		return t->ts_python;
	t = thr_get(st, tid, p->pid);
	if (!t)
		return true; /* unknown: no cross-thread join */
	t->ts_checked = now;
	t->ts_python = bpf_map_lookup_elem(bpf_map__fd(st->skel->maps.py_tstates),
					   &tid, &te) == 0 && te.tstate &&
		       py_walk((pid_t)p->pid, &p->layout, te.tstate, fr, 1) > 0;
	return t->ts_python;
}

/* Which Python stack a launch at ev->ts_ns goes with (pyjoin.h). */
static void join_pick(struct py_plugin *st, struct pyp *p,
		      const struct nt_event_hdr *ev, struct pyj_result *r)
{
	struct pyj_thread cand[256];
	struct pyj_limits lim = { .own_max_ns = 1000000000ull,
				  .period_ns = st->period_ns };
	struct thr *t = py_map_get(&st->threads, ev->tid);
	const struct pyj_hist *own = t && t->pid == ev->pid ? &t->hist : NULL;
	bool own_py = true;
	size_t n = 0;

	if (!own || !own->n) {
		struct py_map_it it = { 0 };
		uint64_t k;
		void *v;

		own_py = join_is_python(st, p, ev->tid, nt_clock_mono_ns());
		while (!own_py && n < NT_ARRAY_LEN(cand) &&
		       py_map_next(&st->threads, &it, &k, &v)) {
			struct thr *d = v;

			if (d->pid == ev->pid && d->hist.n && k != ev->tid)
				cand[n++] = (struct pyj_thread){ d->pid, (uint32_t)k, &d->hist };
		}
	}
	pyj_join(ev->pid, ev->tid, ev->ts_ns, own, own_py, cand, n,
		 st->cfg->idle ? join_off_at : NULL, st->cfg->idle ? join_blocked : NULL,
		 st, &lim, r);
}

/* A vstr field of ev (a field of its schema), or false. */
static bool ev_vstr(const struct nt_event_hdr *ev, const struct nt_field *f,
		    const char **txt, uint32_t *len)
{
	struct nt_vstr v;

	if (!f || (uint32_t)f->offset + sizeof(struct nt_vstr) > ev->size)
		return false;
	memcpy(&v, (const char *)ev + f->offset, sizeof(v));
	if (!v.len || (uint64_t)v.off + v.len > ev->size)
		return false;
	*txt = (const char *)ev + v.off;
	*len = v.len;
	return true;
}

/* The Python frames of the joined stack (native frames of that sample
 * dropped), marked when the stack is another thread's; or a marker frame
 * when none was joined. Returns how many ids were written. */
static uint32_t joined_frames(struct py_plugin *st, const struct nt_event_hdr *ev,
			      const char *comm, const struct pyj_result *jr,
			      uint32_t *ids)
{
	const uint32_t *fr = NULL;
	uint32_t n = 0, nf = 0;

	if (jr->how != PYJ_NONE)
		fr = py_agg_stack_frames(st->agg, jr->stack, &nf);
	if (!fr || !nf) {
		ids[n++] = py_agg_frame(st->agg, "[no recent Python sample]", NULL, 0);
		return n;
	}
	for (uint32_t i = 0; i < nf && n < PY_MAX_FRAMES; i++) {
		const char *file;
		int line;

		py_agg_frame_func(st->agg, fr[i], &file, &line);
		if (file)
			ids[n++] = fr[i];
	}
	if (jr->how == PYJ_CROSS) {
		/* crossed threads: the launch is another thread's */
		char mark[64];

		snprintf(mark, sizeof(mark), "[launched by thread %u %s]", ev->tid, comm);
		ids[n++] = py_agg_frame(st->agg, mark, NULL, 0);
	}
	return n;
}

/* The native frames of the launch's own stack (txt: root first,
 * ';'-separated) after the last eval-loop frame, at most the innermost
 * PY_NATIVE_MAX (a ring of the latest ones), appended to ids. */
static uint32_t native_tail(struct py_plugin *st, const char *txt, uint32_t len,
			    uint32_t *ids)
{
	const char *frames[PY_NATIVE_MAX];
	size_t lens[PY_NATIVE_MAX];
	uint32_t k = 0, head = 0;

	for (size_t i = 0, start = 0; i <= len; i++) {
		if (i < len && txt[i] != ';')
			continue;
		size_t l = i - start;
		const char *f = txt + start;

		start = i + 1;
		if (!l)
			continue;
		if (memmem(f, l, "_PyEval_EvalFrame", 17)) {
			k = head = 0;
			continue;
		}
		frames[(head + k) % PY_NATIVE_MAX] = f;
		lens[(head + k) % PY_NATIVE_MAX] = l;
		if (k < PY_NATIVE_MAX)
			k++;
		else
			head = (head + 1) % PY_NATIVE_MAX;
	}
	for (uint32_t i = 0; i < k; i++) {
		uint32_t at = (head + i) % PY_NATIVE_MAX;
		char name[256];
		size_t l = lens[at] < sizeof(name) - 1 ? lens[at] : sizeof(name) - 1;

		memcpy(name, frames[at], l);
		name[l] = '\0';
		ids[i] = py_agg_frame(st->agg, name, NULL, 0);
	}
	return k;
}

/* The launch's statistics for the exit line (pid's join_how/join_why). */
static void count_join(struct pyp *p, const struct nt_event_hdr *ev,
		       const struct pyj_result *jr)
{
	uint64_t now = nt_clock_mono_ns();

	if (now > ev->ts_ns && now - ev->ts_ns > p->join_lag_max_ns)
		p->join_lag_max_ns = now - ev->ts_ns;
	p->join_how[jr->how & 3]++;
	if (jr->how == PYJ_NONE && jr->why < PYJ_WHY_N)
		p->join_why[jr->why]++;
}

/* A launch counted in python.stack (state cuda), its kernel innermost. */
static void count_launch(struct py_plugin *st, const struct nt_event_hdr *ev,
			 const struct nt_field *fk, const char *comm,
			 uint32_t *ids, uint32_t n)
{
	const char *txt;
	uint32_t len, stack;

	if (ev_vstr(ev, fk, &txt, &len)) {
		char name[512];
		size_t l = len < 400 ? len : 400;

		snprintf(name, sizeof(name), "[kernel] %.*s", (int)l, txt);
		ids[n++] = py_agg_frame(st->agg, name, NULL, 0);
	}
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == UINT32_MAX)
			return;
	stack = py_agg_stack(st->agg, ev->pid, ev->tid, PY_ST_CUDA, ids, n, comm);
	if (stack != UINT32_MAX)
		py_agg_add(st->agg, stack, 1);
}

/*
 * A host call of the cuda probe: joined with a Python stack. Launches
 * (`launch`) are counted in python.stack (state cuda); every joined call's
 * stack is also lent as python.launch_stack while someone listens.
 */
void on_cuda_launch(struct py_plugin *st, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema, bool launch)
{
	uint32_t ids[PY_MAX_FRAMES + PY_NATIVE_MAX + 4];
	struct pyp *p = proc_get(st, ev->pid, false);
	char comm[NT_COMM_LEN + 1];
	struct pyj_result jr;
	const char *txt;
	uint32_t n, len;

	if (!p || p->status != PS_ATTACHED || (!launch && !py_lend_wanted(&st->lend, schema->name)))
		return;
	memcpy(comm, ev->comm, NT_COMM_LEN);
	comm[NT_COMM_LEN] = '\0';
	/* our own records up to now first: the samples and idle walks of the
	 * time of the launch may still wait in the ring (batched wake-ups) */
	if (st->rb)
		nt_ring_consume(st->rb);
	join_pick(st, p, ev, &jr);
	if (launch)
		count_join(p, ev, &jr);
	n = joined_frames(st, ev, comm, &jr, ids);
	if (ev_vstr(ev, field_named(schema, "stack", NT_F_VSTR), &txt, &len))
		n += native_tail(st, txt, len, ids + n);
	if (jr.how != PYJ_NONE)
		py_lend_publish(&st->lend, st->host, st->inst, ev, schema->name,
				st->agg, ids, n,
				st->cfg->lines, (unsigned)jr.how);
	if (launch)
		count_launch(st, ev, field_named(schema, "kernel", NT_F_VSTR), comm,
			     ids, n);
}
