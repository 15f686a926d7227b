/* SPDX-License-Identifier: MIT */
/* Training steps from Python calls or the kernel-launch pattern, and
 * slow-step alerts with their reason; see steps.h. */
#include "steps.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/log.h"

#include "alert.h"
#include "an_util.h"
#include "det.h"
#include "evfield.h"
#include "joint.h"
#include "period.h"
#include "watch.h"

#define MAX_PROCS 256
#define TOP_MOVED 3
#define FIRST_TRY 1024
#define RELEARN_AFTER 16       /* steps in a row off the learned length */
#define PENDING_MAX_NS 5000000000ULL

struct pending {
	bool on;
	uint64_t step, start_ns, end_ns;
	double dur, base;
	uint32_t waited;
	enum det_verdict verdict;
};

struct stp {
	uint32_t pid;
	char comm[NT_COMM_LEN + 1];
	char label[48];           /* "step time (pid N)" for the joint check */
	bool python;
	uint64_t *learn;          /* launch symbols while learning */
	uint32_t n_learn, next_try;
	bool learned, gave_up_logged;
	struct period per;
	uint32_t since, off;
	uint64_t step;            /* anchors seen (launches) / calls (Python) */
	uint64_t start_ns;        /* the current step's start, 0 unknown */
	struct det *det;
	uint64_t last_alert_ns;
	struct pending p;
	bool fresh;               /* a step ended since the last snapshot */
	uint32_t slow_run;        /* slow step times in a row */
	uint64_t py_prev_ns;      /* Python: the report before the last one */
	double py_prev_calls;     /* and the calls of the last one */
	uint64_t slow_start_ns;   /* when the first of them began */
	double last_dur, last_z;
	enum det_verdict last_v;
	float win[64];            /* the last step_window step times, ring */
	uint8_t win_n, win_pos;
};

struct fields {
	const struct nt_schema *schema;
	const struct nt_field *f[8];
};

struct an_steps {
	struct an *a;
	struct det_par par;
	struct an_map procs;
	struct stp *list[MAX_PROCS];
	uint32_t n;
	int group;
	struct fields launch, calls;
};

static const char *const launch_fields[] = {
	"func", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
};
static const char *const calls_fields[] = {
	"calls", "timed_calls", "inclusive_ns", "function", "file",
};

const char *an_fmt_count(uint64_t n, char *buf, size_t len)
{
	char raw[32];
	size_t l, o = 0;

	snprintf(raw, sizeof(raw), "%" PRIu64, n);
	l = strlen(raw);
	for (size_t i = 0; i < l && o + 2 < len; i++) {
		if (i && (l - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = raw[i];
	}
	buf[o] = '\0';
	return buf;
}

static void cache_fields(struct fields *fs, const struct nt_schema *s,
			 const char *const *names, size_t n)
{
	if (fs->schema == s)
		return;
	fs->schema = s;
	for (size_t i = 0; i < n; i++)
		fs->f[i] = evf_find(s, names[i]);
}

static struct stp *proc_get(struct an_steps *S, const struct nt_event_hdr *ev)
{
	struct stp *p = an_map_get(&S->procs, ev->pid + 1ULL);

	if (p || S->n >= MAX_PROCS)
		return p;
	if (!(p = calloc(1, sizeof(*p))) || !(p->det = det_new(&S->par))) {
		free(p);
		return NULL;
	}
	if (an_map_put(&S->procs, ev->pid + 1ULL, p) < 0) {
		det_free(p->det);
		free(p);
		return NULL;
	}
	p->pid = ev->pid;
	snprintf(p->comm, sizeof(p->comm), "%.*s",
		 (int)strnlen(ev->comm, NT_COMM_LEN), ev->comm);
	snprintf(p->label, sizeof(p->label), "step time (pid %u)", p->pid);
	p->next_try = FIRST_TRY;
	S->list[S->n++] = p;
	return p;
}

static void proc_free(struct stp *p)
{
	free(p->learn);
	det_free(p->det);
	free(p);
}

static void proc_gone(struct an_steps *S, uint32_t pid)
{
	struct stp *p = an_map_get(&S->procs, pid + 1ULL);
	char lv[16];
	const char *l[1] = { lv };

	if (!p)
		return;
	an_map_del(&S->procs, pid + 1ULL);
	for (uint32_t i = 0; i < S->n; i++)
		if (S->list[i] == p)
			S->list[i] = S->list[--S->n];
	snprintf(lv, sizeof(lv), "%u", pid);
	S->a->host->metric_remove(S->a->m_step_s, l);
	S->a->host->metric_remove(S->a->m_step_rate, l);
	S->a->host->metric_remove(S->a->m_steps, l);
	if (S->a->cfg->items_per_step > 0.0)
		S->a->host->metric_remove(S->a->m_items, l);
	proc_free(p);
}

/* ---- the alert ----------------------------------------------------- */

static void moved_json(struct an *a, struct an_sb *ev, const struct an_moved *m,
		       size_t n)
{
	char id[512], name[256];

	an_sb_puts(ev, ",\"moved\":[");
	for (size_t i = 0; i < n; i++) {
		an_sb_printf(ev, "%s{\"series\":", i ? "," : "");
		an_sb_json_str(ev, an_series_id(m[i].s, id, sizeof(id)));
		an_sb_puts(ev, ",\"name\":");
		an_sb_json_str(ev, an_series_name(a, m[i].s, name, sizeof(name)));
		an_sb_puts(ev, ",\"before\":");
		an_sb_json_num(ev, m[i].before);
		an_sb_puts(ev, ",\"after\":");
		an_sb_json_num(ev, m[i].after);
		an_sb_printf(ev, ",\"alarmed\":%s}", m[i].alarmed ? "true" : "false");
	}
	an_sb_puts(ev, "]");
}

static void reason_text(struct an *a, struct an_sb *msg, const struct an_moved *m)
{
	char name[256], before[48], after[48], ratio[32];
	const struct an_series *s = m->s;

	an_series_name(a, s, name, sizeof(name));
	an_fmt_value(s->family, s->type, m->before, before, sizeof(before));
	an_fmt_value(s->family, s->type, m->after, after, sizeof(after));
	an_fmt_ratio(m->before, m->after, ratio, sizeof(ratio));
	an_sb_printf(msg, "; %s %s at the same time (%s -> %s)", name, ratio,
		     before, after);
}

static void step_alert(struct an_steps *S, struct stp *p,
		       const struct an_moved *m, size_t n)
{
	struct an *a = S->a;
	struct an_sb msg, ev;
	char num[32];
	double pct = 100.0 * (p->p.dur / p->p.base - 1.0);
	struct an_alert al = { .kind = "step", .severity = NT_SEV_WARNING,
			       .pid = p->pid, .comm = p->comm, .step = p->p.step,
			       .value = p->p.dur, .baseline = p->p.base };

	an_sb_init(&msg);
	an_sb_init(&ev);
	an_sb_printf(&msg, "step %s: %.0f %% slower (%.3g s, normal %.3g s%s)",
		     an_fmt_count(p->p.step, num, sizeof(num)), pct, p->p.dur,
		     p->p.base, p->p.verdict == DET_DRIFT ? ", a gradual slowdown" : "");
	if (n)
		reason_text(a, &msg, &m[0]);
	else
		an_sb_puts(&msg, "; no watched metric moved at the same time");
	an_sb_printf(&ev, "{\"pid\":%u,\"step\":%" PRIu64 ",\"source\":\"%s\","
			  "\"duration_s\":", p->pid, p->p.step,
		     p->python ? "python" : "launches");
	an_sb_json_num(&ev, p->p.dur);
	an_sb_puts(&ev, ",\"baseline_s\":");
	an_sb_json_num(&ev, p->p.base);
	an_sb_puts(&ev, ",\"slower_percent\":");
	an_sb_json_num(&ev, pct);
	if (!p->python)
		an_sb_printf(&ev, ",\"launches_per_step\":%u", p->per.length);
	moved_json(a, &ev, m, n);
	an_sb_puts(&ev, "}");
	an_alert_publish_sb(a, &al, &msg, &ev);
}

/*
 * A pending slow step is published at the first snapshot after it ended
 * that shows a watched series moved, or, without one, once
 * reason_wait_steps more steps ended (or 5 s passed). It waits for a
 * snapshot on the timer rather than taking one at once: a snapshot taken
 * right after a timed one holds the counters whose change came too soon
 * (view.h), and the stale ones lost to the histograms that moved least.
 */
static void pending_check(struct an_steps *S, struct stp *p, uint64_t now,
			  bool step_ended)
{
	struct an_moved m[TOP_MOVED];
	size_t n;
	bool give_up;

	if (!p->p.on)
		return;
	if (step_ended)
		p->p.waited++;
	/* without a reason, wait for reason_wait_steps steps and two
	 * snapshots at least: a probe's update may be due */
	give_up = (p->p.waited >= (uint32_t)S->a->cfg->reason_wait_steps &&
		   now - p->p.end_ns >= 2 * (uint64_t)S->a->cfg->interval_ms * 1000000ULL) ||
		  now - p->p.end_ns >= PENDING_MAX_NS;
	if (step_ended && !give_up)
		return;
	n = an_watch_moved(S->a->watch, p->p.start_ns,
			   S->a->cfg->reason_min_change, m, TOP_MOVED);
	if (!n && !give_up)
		return;
	p->p.on = false;
	step_alert(S, p, m, n);
}

/* ---- steps ----------------------------------------------------------- */

static void step_metrics(struct an_steps *S, struct stp *p, double dur,
			 uint64_t count)
{
	const struct nt_host *h = S->a->host;
	char lv[16];
	const char *l[1] = { lv };

	snprintf(lv, sizeof(lv), "%u", p->pid);
	h->metric_set(S->a->m_step_s, l, dur);
	h->metric_add(S->a->m_steps, l, (double)count);
	if (dur > 0.0) {
		h->metric_set(S->a->m_step_rate, l, 1.0 / dur);
		if (S->a->cfg->items_per_step > 0.0)
			h->metric_set(S->a->m_items, l,
				      S->a->cfg->items_per_step / dur);
	}
}

/* Pushes `count` steps of `dur` (a Python batch is many) to the window;
 * returns the window's mean step time. */
static double window_push(struct an_steps *S, struct stp *p, double dur,
			  uint64_t count)
{
	uint32_t w = (uint32_t)S->a->cfg->step_window;
	double sum = 0.0;

	for (uint64_t i = 0; i < count && i < w; i++) {
		p->win[p->win_pos] = (float)dur;
		p->win_pos = (uint8_t)((p->win_pos + 1) % w);
		if (p->win_n < w)
			p->win_n++;
	}
	for (uint32_t i = 0; i < p->win_n; i++)
		sum += p->win[i];
	return p->win_n ? sum / p->win_n : dur;
}

/*
 * Whether a step the detector flagged is a slowdown worth an alert: the
 * mean of the last step_window steps (it among them) must be slower than
 * normal by step_window_slowdown too. One hiccup of a fast loop (the GPU
 * run's clean 5 minutes: 17 ms steps, a 43 ms one now and then, every
 * fourth step when a loader worker hiccups) costs little and is not; a
 * stall of a second is at once; a loop slowed for good is in a few steps.
 */
static bool slow_enough(const struct an_steps *S, double mean, double base)
{
	return !(base > 0.0) ||
	       mean >= (1.0 + S->a->cfg->step_window_slowdown) * base;
}

static void step_done(struct an_steps *S, struct stp *p, double dur,
		      uint64_t start_ns, uint64_t end_ns, uint64_t count)
{
	double mean = window_push(S, p, dur, count);
	struct det_out o;
	uint64_t cool = (uint64_t)S->a->cfg->cooldown_s * 1000000000ULL;

	step_metrics(S, p, dur, count);
	det_update(p->det, &S->par, dur, &o);
	p->fresh = true;
	p->last_dur = dur;
	p->last_z = o.z;
	p->last_v = o.verdict;
	if (p->p.on) {
		pending_check(S, p, end_ns, true);
		return;
	}
	if ((o.verdict != DET_SPIKE && o.verdict != DET_DRIFT) ||
	    !slow_enough(S, mean, o.baseline)) {
		p->slow_run = 0;
		return;
	}
	if (!p->slow_run++)
		p->slow_start_ns = start_ns;
	if (p->slow_run < (uint32_t)S->a->cfg->step_sustain ||
	    (p->last_alert_ns && end_ns - p->last_alert_ns < cool))
		return;
	start_ns = p->slow_start_ns;
	p->slow_run = 0;
	p->last_alert_ns = end_ns;
	p->p = (struct pending){ .on = true, .step = p->step, .start_ns = start_ns,
				 .end_ns = end_ns, .dur = dur, .base = o.baseline,
				 .verdict = o.verdict };
	/* the latest snapshot may hold the reason already (a long step
	 * spans several): then the alert goes out now, not a snapshot later
	 * (the GPU run's slow steps came every fourth, 60 ms apart) */
	pending_check(S, p, end_ns, false);
}

/* ---- launch pattern -------------------------------------------------- */

static void relearn(struct stp *p)
{
	p->learned = false;
	p->n_learn = 0;
	p->next_try = FIRST_TRY;
	p->start_ns = 0;
	p->off = 0;
}

static void learn_push(struct an_steps *S, struct stp *p, uint64_t sym)
{
	uint32_t cap = (uint32_t)S->a->cfg->step_learn_launches;
	int rc;

	if (!p->learn && !(p->learn = malloc(cap * sizeof(*p->learn))))
		return;
	p->learn[p->n_learn++] = sym;
	if (p->n_learn < p->next_try && p->n_learn < cap)
		return;
	p->next_try = p->next_try * 2 < cap ? p->next_try * 2 : cap;
	rc = period_find(p->learn, p->n_learn, &p->per);
	if (rc == 0) {
		p->learned = true;
		p->step = p->per.steps;
		p->since = p->per.since;
		free(p->learn);
		p->learn = NULL;
		nt_log_info(S->a, "pid %u (%s): a training step is %u kernel launches "
				"(found in %u launches, %u kernels once per step)",
				p->pid, p->comm, p->per.length, p->n_learn,
				p->per.regular);
	} else if (p->n_learn >= cap) {
		if (!p->gave_up_logged)
			nt_log_info(S->a, "pid %u (%s): no repeating kernel sequence in "
					"%u launches; trying again", p->pid, p->comm, cap);
		p->gave_up_logged = true;
		relearn(p);
	}
}

static void on_boundary(struct an_steps *S, struct stp *p, uint64_t ts)
{
	uint32_t len = p->per.length;

	p->off = p->since < len / 2 || p->since > 2 * len ? p->off + 1 : 0;
	if (p->off >= RELEARN_AFTER) {
		nt_log_info(S->a, "pid %u: the launch pattern changed; learning it again",
				p->pid);
		relearn(p);
		return;
	}
	if (p->start_ns && ts > p->start_ns)
		step_done(S, p, (double)(ts - p->start_ns) / 1e9, p->start_ns, ts, 1);
	p->step++;
	p->start_ns = ts;
	p->since = 0;
}

static void on_launch(struct an_steps *S, const struct nt_event_hdr *ev,
		      const struct nt_schema *sc)
{
	struct stp *p;
	double v[7];
	uint32_t grid[3], block[3];
	uint64_t sym;

	cache_fields(&S->launch, sc, launch_fields, NT_ARRAY_LEN(launch_fields));
	for (int i = 0; i < 7; i++)
		if (!S->launch.f[i] || !evf_num(ev, S->launch.f[i], &v[i]))
			v[i] = 0.0;
	if (!(p = proc_get(S, ev)) || p->python)
		return;
	for (int i = 0; i < 3; i++) {
		grid[i] = (uint32_t)v[1 + i];
		block[i] = (uint32_t)v[4 + i];
	}
	sym = period_symbol((uint64_t)v[0], grid, block);
	if (!p->learned) {
		learn_push(S, p, sym);
		return;
	}
	p->since++;
	if (sym == p->per.anchor)
		on_boundary(S, p, ev->ts_ns);
}

/* ---- Python function ------------------------------------------------- */

/* The pattern against the qualified name ("Trainer.step",
 * "main.<locals>.train_step"), its last part, and "file:qualname". */
static bool function_matches(const char *pat, const char *fn, const char *file)
{
	const char *last = strrchr(fn, '.');
	char both[512];

	snprintf(both, sizeof(both), "%s:%s", file, fn);
	return fnmatch(pat, fn, 0) == 0 || fnmatch(pat, both, 0) == 0 ||
	       (last && fnmatch(pat, last + 1, 0) == 0);
}

static void on_calls(struct an_steps *S, const struct nt_event_hdr *ev,
		     const struct nt_schema *sc)
{
	const char *pat = S->a->cfg->step_function;
	char fn[256], file[256];
	double calls, timed, incl, dur;
	uint64_t prev;
	struct stp *p;

	cache_fields(&S->calls, sc, calls_fields, NT_ARRAY_LEN(calls_fields));
	if (!pat[0] || !evf_num(ev, S->calls.f[0], &calls) ||
	    !evf_num(ev, S->calls.f[1], &timed) ||
	    !evf_num(ev, S->calls.f[2], &incl) ||
	    !evf_str(ev, S->calls.f[3], fn, sizeof(fn)) ||
	    !evf_str(ev, S->calls.f[4], file, sizeof(file)) ||
	    !function_matches(pat, fn, file) || !(p = proc_get(S, ev)))
		return;
	p->python = true;
	prev = p->py_prev_ns;  /* the report before the previous one */
	p->py_prev_ns = p->start_ns;
	p->start_ns = ev->ts_ns;
	if (calls < 1.0)
		return;
	/* Timed calls give the step time. CPython 3.11+ fires the entry
	 * marker only for frames entered from C, so a step function called
	 * from Python code is counted but never timed: then the time of the
	 * last two reports over their calls is the mean step. One report
	 * alone made steady steps look slow: a report that came late
	 * stretched its interval (x3.7 once on a loaded machine), and steps
	 * about as long as the report interval fell one or two in a batch. */
	if (timed >= calls / 2.0) {
		dur = incl / timed / 1e9;
	} else if (prev && ev->ts_ns > prev) {
		dur = (double)(ev->ts_ns - prev) / 1e9 / (calls + p->py_prev_calls);
	} else {
		p->py_prev_calls = calls;
		return;
	}
	p->py_prev_calls = calls;
	p->step += (uint64_t)calls;
	step_done(S, p, dur, prev ? prev : ev->ts_ns, ev->ts_ns, (uint64_t)calls);
}

/* ---- set-up ---------------------------------------------------------- */

void an_steps_event(struct an_steps *S, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema)
{
	if (!S)
		return;
	if (strcmp(schema->name, "cuda.launch") == 0)
		on_launch(S, ev, schema);
	else if (strcmp(schema->name, "python.calls") == 0)
		on_calls(S, ev, schema);
	else if (strcmp(schema->name, "proc.exit") == 0)
		proc_gone(S, ev->pid);
}

void an_steps_tick(struct an_steps *S, uint64_t now_ns)
{
	for (uint32_t i = 0; S && i < S->n; i++) {
		struct stp *p = S->list[i];

		if (p->fresh && S->group >= 0)
			an_joint_member_named(S->a->joint, S->group, p->label,
					      p->last_dur, p->last_z, p->last_v);
		p->fresh = false;
		if (p->p.on) /* the snapshot just taken may hold the reason */
			pending_check(S, p, now_ns, false);
	}
}

struct an_steps *an_steps_new(struct an *a, int *err)
{
	const char *src = a->cfg->steps;
	struct an_steps *S;
	bool python = a->cfg->step_function[0] != '\0';

	*err = 0;
	if (strcmp(src, "off") == 0)
		return NULL;
	if (strcmp(src, "python") == 0 && !python) {
		*err = a->host->config_error(a->inst, "step_function",
					     "steps = \"python\" needs the function's name");
		return NULL;
	}
	if (!(S = calloc(1, sizeof(*S)))) {
		*err = -ENOMEM;
		return NULL;
	}
	S->a = a;
	an_map_init(&S->procs);
	an_det_par(a, NULL, &S->par);
	S->par.fast.q = S->par.slow.q = a->cfg->step_q;
	S->par.n_init = (uint32_t)a->cfg->step_n_init;
	S->par.min_change = a->cfg->step_min_slowdown;
	S->par.direction = DET_UP;
	S->group = an_joint_group(a->joint, a->cfg->step_group);
	if ((strcmp(src, "python") == 0 || (strcmp(src, "auto") == 0 && python)) &&
	    a->host->subscribe(a->inst, "python.calls") < 0)
		*err = -EINVAL;
	if ((strcmp(src, "launches") == 0 || (strcmp(src, "auto") == 0 && !python)) &&
	    a->host->subscribe(a->inst, "cuda.launch") < 0)
		*err = -EINVAL;
	if (!*err && a->host->subscribe(a->inst, "proc.exit") < 0)
		*err = -EINVAL;
	if (*err) {
		an_steps_free(S);
		return NULL;
	}
	return S;
}

void an_steps_free(struct an_steps *S)
{
	if (!S)
		return;
	for (uint32_t i = 0; i < S->n; i++)
		proc_free(S->list[i]);
	an_map_fini(&S->procs);
	free(S);
}
