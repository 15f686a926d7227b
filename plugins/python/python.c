/* SPDX-License-Identifier: MIT */
/*
 * python probe, user side. Finds the CPython processes among the targets,
 * checks each interpreter's layout (pyproc.c), registers it with the BPF
 * sampler, resolves the (code object, instruction) frames it sends into
 * (qualified name, file, line) once per code object, and publishes
 *   - python.stack: folded stacks with sample counts (file sink, format =
 *     "folded", writes flame-graph input), per process, thread and state;
 *   - python.report: the per-function table (samples, self %, total %);
 *   - python.calls (calls = true): exact call counts, inclusive/self time;
 *   - python.exception (exceptions = true): exceptions by type and location;
 *   - python.process: a process attached, or refused and why;
 *   - metrics of samples, top functions, calls, exceptions, walk errors.
 * See docs/python.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"
#include "ntcore/plugin.h"

#include "python.bpf.skel.h"
#include "python.h"
#include "pyagg.h"
#include "pyjoin.h"
#include "pylend.h"
#include "pyline.h"
#include "pyoffsets.h"
#include "pyproc.h"

enum { TOK_RING = 1, TOK_TICK = 2, TOK_REPORT = 3, TOK_DRAIN = 4 };

#define TICK_MS 100
/* The BPF side batches ring wake-ups (64 KiB) so that a sampled thread is
 * not preempted by this reader at every record; pending records are also
 * drained this often, so names are read while short-lived code objects and
 * processes still exist. */
#define DRAIN_MS 20
#define STATS_EVERY 10          /* ticks: BPF counters -> metrics */
#define FIND_TRIES 10           /* ticks an exec'd process may stay unfound (libs loading) */
#define INIT_TRIES 100          /* ticks waiting for an interpreter to initialise */
/* A cached code object is re-checked (its name pointers, one small read)
 * when used again after this long: a freed code object's address is soon
 * reused by another (module and class bodies are freed after they ran). */
#define CODE_RECHECK_NS 1000000ull
#define MAX_PROCS 4096
#define TEXT_MAX (64 * 1024)

struct py_cfg {
	int64_t frequency;
	int64_t max_frames;
	bool idle;
	bool native;
	bool lines;
	bool calls;
	const char *call_pattern;
	bool exceptions;
	int64_t top_n;
	int64_t report_interval_s;
	int64_t ringbuf_kb;
	int64_t max_stacks;
	int64_t native_stacks;
	bool cuda_join;
	bool other_users;
};

#define KEY(k, t, d, lo, hi, text)                                             \
	{ .key = #k, .type = (t), .offset = offsetof(struct py_cfg, k),        \
	  .def = (d), .min = (lo), .max = (hi), .desc = (text) }

static const struct nt_cfg_key py_config[] = {
	KEY(frequency, NT_CFG_INT, "99", 1, 10000,
	    "samples per second per CPU (perf CPU clock); also the idle sample rate"),
	KEY(max_frames, NT_CFG_INT, "64", 1, PY_MAX_FRAMES,
	    "Python frames walked per sample (deeper stacks are cut at the root)"),
	KEY(idle, NT_CFG_BOOL, "true", 1, 0,
	    "also attribute off-CPU time (sleeping, waiting, GIL) like a wall-clock sampler"),
	KEY(native, NT_CFG_BOOL, "false", 1, 0,
	    "append the native frames a Python function was running (needs frame pointers)"),
	KEY(lines, NT_CFG_BOOL, "true", 1, 0,
	    "folded frames carry the line (\"f (file:line)\"); false: \"f (file)\""),
	KEY(calls, NT_CFG_BOOL, "false", 1, 0,
	    "call tracing through CPython's USDT markers: exact counts and times (costly)"),
	KEY(call_pattern, NT_CFG_STRING, "\"*\"", 1, 0,
	    "fnmatch pattern on the function name or \"file:function\" for call tracing"),
	KEY(exceptions, NT_CFG_BOOL, "false", 1, 0,
	    "count raised exceptions by type and raising location (uprobe PyTraceBack_Here)"),
	KEY(top_n, NT_CFG_INT, "20", 1, 1000,
	    "functions in python.report and in the top-function metrics"),
	KEY(report_interval_s, NT_CFG_INT, "0", 0, 86400,
	    "publish stacks and reports every so often (s); 0 = at process exit and shutdown"),
	KEY(ringbuf_kb, NT_CFG_INT, "1024", 64, 1048576,
	    "BPF ring buffer size in KiB (a power of two; the reader is woken every 64 KiB; the ring is mapped into ntcore: it counts in its RSS)"),
	KEY(max_stacks, NT_CFG_INT, "100000", 100, 10000000,
	    "distinct stacks kept (further ones are counted as \"[other stacks]\")"),
	KEY(native_stacks, NT_CFG_INT, "16384", 64, 1048576,
	    "native stack map entries (native = true)"),
	KEY(cuda_join, NT_CFG_BOOL, "true", 1, 0,
	    "join cuda.launch events (cuda probe) with the thread's latest Python stack"),
	KEY(other_users, NT_CFG_BOOL, "false", 1, 0,
	    "host-wide, also sample other users' processes (ntcore's own user's only by default; -p and -- CMD targets always)"),
};

/* ---- events -------------------------------------------------------- */

struct py_stack_ev {
	struct nt_event_hdr hdr;
	uint64_t count;
	uint64_t period_ns;
	struct nt_vstr state;
	struct nt_vstr stack;
};

static const struct nt_field stack_fields[] = {
	NT_FIELD(struct py_stack_ev, count, NT_F_U64, "count",
		 "samples of this stack since the previous python.stack for it"),
	NT_FIELD(struct py_stack_ev, period_ns, NT_F_U64, "ns",
		 "time one sample stands for (1 / frequency); cuda: 0"),
	NT_FIELD(struct py_stack_ev, state, NT_F_VSTR, "",
		 "cpu (on-CPU), idle (off-CPU), cuda (launches joined with Python)"),
	NT_FIELD(struct py_stack_ev, stack, NT_F_VSTR, "",
		 "folded stack, root first: \"f (file:line);g (file:line)\""),
};
static const struct nt_schema stack_schema = {
	.name = "python.stack",
	.desc = "folded Python stacks of a thread with sample counts",
	.fields = stack_fields,
	.n_fields = NT_ARRAY_LEN(stack_fields),
	.min_size = sizeof(struct py_stack_ev),
};

struct py_report_ev {
	struct nt_event_hdr hdr;
	uint32_t subject_pid;
	uint32_t pad_;
	struct nt_vstr text;
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct py_report_ev, subject_pid, NT_F_U32, "",
		 "process the table is about (0: several)"),
	NT_FIELD(struct py_report_ev, text, NT_F_VSTR, "",
		 "per-function table: samples, self %, total %"),
};
static const struct nt_schema report_schema = {
	.name = "python.report",
	.desc = "per-function table of the Python processes",
	.fields = report_fields,
	.n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct py_report_ev),
};

struct py_calls_ev {
	struct nt_event_hdr hdr;
	uint64_t calls;
	uint64_t timed_calls;
	uint64_t inclusive_ns;
	uint64_t self_ns;
	uint64_t sampled_inclusive_ns;
	uint64_t sampled_self_ns;
	int32_t line;
	uint32_t pad_;
	struct nt_vstr function;
	struct nt_vstr file;
};

static const struct nt_field calls_fields[] = {
	NT_FIELD(struct py_calls_ev, calls, NT_F_U64, "count",
		 "calls (returns) since the previous python.calls for this function"),
	NT_FIELD(struct py_calls_ev, timed_calls, NT_F_U64, "count",
		 "of those, calls whose entry marker fired too (the times cover these)"),
	NT_FIELD(struct py_calls_ev, inclusive_ns, NT_F_U64, "ns",
		 "time inside the function and its callees (timed calls)"),
	NT_FIELD(struct py_calls_ev, self_ns, NT_F_U64, "ns",
		 "inclusive time less the time in timed callees"),
	NT_FIELD(struct py_calls_ev, sampled_inclusive_ns, NT_F_U64, "ns",
		 "sampler's estimate since the start: samples with the function on the stack * period"),
	NT_FIELD(struct py_calls_ev, sampled_self_ns, NT_F_U64, "ns",
		 "sampler's estimate since the start: samples with the function innermost * period"),
	NT_FIELD(struct py_calls_ev, line, NT_F_S32, "",
		 "first line of the function (co_firstlineno), or of its first return"),
	NT_FIELD(struct py_calls_ev, function, NT_F_VSTR, "",
		 "qualified name (co_qualname; co_name when the code could not be read)"),
	NT_FIELD(struct py_calls_ev, file, NT_F_VSTR, "", "file name (co_filename)"),
};
static const struct nt_schema calls_schema = {
	.name = "python.calls",
	.desc = "exact call counts and times of functions (USDT, calls = true)",
	.fields = calls_fields,
	.n_fields = NT_ARRAY_LEN(calls_fields),
	.min_size = sizeof(struct py_calls_ev),
};

struct py_exc_ev {
	struct nt_event_hdr hdr;
	uint64_t count;
	int32_t line;
	uint32_t pad_;
	struct nt_vstr exc_type;
	struct nt_vstr function;
	struct nt_vstr file;
	struct nt_vstr stack;
};

static const struct nt_field exc_fields[] = {
	NT_FIELD(struct py_exc_ev, count, NT_F_U64, "count",
		 "exceptions since the previous python.exception for this key"),
	NT_FIELD(struct py_exc_ev, line, NT_F_S32, "", "raising line"),
	NT_FIELD(struct py_exc_ev, exc_type, NT_F_VSTR, "", "exception type (tp_name)"),
	NT_FIELD(struct py_exc_ev, function, NT_F_VSTR, "", "raising function (qualified name)"),
	NT_FIELD(struct py_exc_ev, file, NT_F_VSTR, "", "raising file"),
	NT_FIELD(struct py_exc_ev, stack, NT_F_VSTR, "", "folded Python stack of the raise"),
};
static const struct nt_schema exc_schema = {
	.name = "python.exception",
	.desc = "exceptions raised into Python code, by type and location (exceptions = true)",
	.fields = exc_fields,
	.n_fields = NT_ARRAY_LEN(exc_fields),
	.min_size = sizeof(struct py_exc_ev),
};

struct py_proc_ev {
	struct nt_event_hdr hdr;
	uint32_t subject_pid;
	int32_t status;
	struct nt_vstr version;
	struct nt_vstr object;
	struct nt_vstr message;
};

static const struct nt_field proc_fields[] = {
	NT_FIELD(struct py_proc_ev, subject_pid, NT_F_U32, "", "the process"),
	NT_FIELD(struct py_proc_ev, status, NT_F_ERRNO, "",
		 "0 attached; -ENOTSUP unknown version; -EPROTO layout mismatch; -ENOENT not Python"),
	NT_FIELD(struct py_proc_ev, version, NT_F_VSTR, "", "\"3.11\" or \"\""),
	NT_FIELD(struct py_proc_ev, object, NT_F_VSTR, "", "binary or libpython holding _PyRuntime"),
	NT_FIELD(struct py_proc_ev, message, NT_F_VSTR, "", "what was done, or why not"),
};
static const struct nt_schema proc_schema = {
	.name = "python.process",
	.desc = "a Python process was attached to, or refused (and why)",
	.fields = proc_fields,
	.n_fields = NT_ARRAY_LEN(proc_fields),
	.min_size = sizeof(struct py_proc_ev),
};

/* ---- metrics ------------------------------------------------------- */

static const char *const l_pid_state[] = { "pid", "state" };
static const char *const l_pid_fn[] = { "pid", "function" };
static const char *const l_pid_fn_kind[] = { "pid", "function", "kind" };
static const char *const l_pid_type[] = { "pid", "type" };
static const char *const l_reason[] = { "reason" };

enum { M_SAMPLES, M_FSELF, M_FTOTAL, M_CALLS, M_CALLSEC, M_EXC, M_WALKERR,
       M_PROCS, M_N };

static const struct nt_metric_desc metric_desc[M_N] = {
	[M_SAMPLES] = { "ntcore_python_samples_total",
			"Python stack samples by process and state (cpu, idle)",
			NT_METRIC_COUNTER, 2, l_pid_state, NULL, 0, 0 },
	[M_FSELF] = { "ntcore_python_function_self_samples_total",
		      "Samples whose innermost frame is this function (top functions)",
		      NT_METRIC_COUNTER, 2, l_pid_fn, NULL, 0, 0 },
	[M_FTOTAL] = { "ntcore_python_function_samples_total",
		       "Samples with this function anywhere on the stack (top functions)",
		       NT_METRIC_COUNTER, 2, l_pid_fn, NULL, 0, 0 },
	[M_CALLS] = { "ntcore_python_calls_total",
		      "Calls of traced functions (calls = true)",
		      NT_METRIC_COUNTER, 2, l_pid_fn, NULL, 0, 0 },
	[M_CALLSEC] = { "ntcore_python_call_seconds_total",
			"Time in traced functions, kind inclusive or self",
			NT_METRIC_COUNTER, 3, l_pid_fn_kind, NULL, 0, 0 },
	[M_EXC] = { "ntcore_python_exceptions_total",
		    "Exceptions raised into Python code by type (exceptions = true)",
		    NT_METRIC_COUNTER, 2, l_pid_type, NULL, 0, 0 },
	[M_WALKERR] = { "ntcore_python_walk_errors_total",
			"Samples not walked or cut: no_thread_state, read_error, truncated, unresolved_frame",
			NT_METRIC_COUNTER, 1, l_reason, NULL, 0, 16 },
	[M_PROCS] = { "ntcore_python_processes",
		      "Python processes being sampled now",
		      NT_METRIC_GAUGE, 0, NULL, NULL, 0, 1 },
};

/* ---- state --------------------------------------------------------- */

enum { PS_PENDING = 0, PS_ATTACHED = 1, PS_REFUSED = 2, PS_NOTPY = 3,
       PS_OTHER_USER = 4 /* host-wide, not ntcore's user's (other_users) */ };

struct code_ent {
	struct py_code c;
	uint64_t checked_ns;
	bool bad; /* not a code object / unreadable */
};

struct fn_pub { /* published totals of a top function's metrics */
	uint64_t self, total;
};

struct exc_ent {
	uint32_t pid, tid;
	const char *type;
	uint32_t top_frame; /* frame id of the raising frame */
	uint32_t stack;     /* stack id (state cpu, 0 samples) for the text */
	uint64_t count, published;
	char comm[NT_COMM_LEN];
};

struct call_name {
	char *func, *file;
	int line;
	bool match;
	struct py_call_stats pub;
};

struct pyp {
	uint32_t pid;
	char comm[NT_COMM_LEN]; /* for its events' headers (read from /proc) */
	int status;
	bool from_exec;     /* found by exec: keep looking while libs load */
	char pid_s[12];
	int tries, init_tries;
	struct py_found found;
	struct py_layout layout;
	uint64_t code_type;
	struct py_map codes;   /* code addr -> struct code_ent */
	struct py_map types;   /* type addr -> char * name */
	struct py_map fnpub;   /* interned function label -> struct fn_pub */
	struct bpf_link *l_entry, *l_return, *l_exc;
	bool in_bpf;
	uint64_t unresolved; /* frames whose code object could not be read */
	uint64_t inspected_ns; /* when it was last found (mono) */
	uint64_t join_how[4];  /* CUDA launches by enum pyj_how */
	uint64_t join_why[PYJ_WHY_N]; /* ... PYJ_NONE ones by enum pyj_why */
	uint64_t join_lag_max_ns; /* largest launch -> join delay (the event's age) */
};

struct thr {
	uint32_t pid;
	uint32_t idle_stack; /* UINT32_MAX: none */
	uint32_t cpu_stack;
	uint64_t cpu_ts;
	uint64_t acc_ns;
	uint64_t flushed_to; /* off-CPU time up to here already counted */
	/* CUDA join */
	struct pyj_hist hist;     /* recent on-CPU samples and idle walks */
	struct py_offhist oh;     /* py_offhist as read at oh_read (mono ns) */
	uint64_t oh_read, oh_cur_out;
	bool oh_cur_preempted;
	uint64_t ts_checked;      /* py_tstates looked up (launching threads) */
	bool ts_python;           /* it has a Python thread state with a
				   * Python frame */
};

struct py_plugin {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct py_cfg *cfg;
	int t_stack, t_report, t_calls, t_exc, t_proc;
	struct py_lend lend; /* python.launch_stack (pylend.h) */
	struct nt_metric *m[M_N];

	struct python_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **perf_links;
	int *perf_fds;
	int n_cpus;
	struct bpf_link *l_switch, *l_exec;
	bool attached;

	struct py_agg *agg;
	struct py_map procs;   /* pid -> struct pyp */
	struct py_map threads; /* tid -> struct thr */
	struct py_map names;   /* call key hash -> struct call_name (by key) */
	struct py_map siblings; /* (pid, func, file) hash -> resolved call_name */
	struct exc_ent *excs;
	size_t n_excs, cap_excs;
	uint64_t period_ns;
	uint32_t tick;
	uint64_t drops_reported;
	uint64_t stats_pub[8];
	uint64_t unresolved, unresolved_pub;
	int cuda_stack_field, cuda_kernel_field; /* cached per schema */
	const struct nt_schema *cuda_schema;
	char *text;      /* TEXT_MAX scratch for reports */
	uint8_t *evbuf;  /* event scratch */
	size_t evbuf_cap;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- event building ------------------------------------------------ */

static void *ev_begin(struct py_plugin *st, size_t fixed, size_t extra)
{
	size_t need = fixed + extra;

	if (need > st->evbuf_cap) {
		uint8_t *n = realloc(st->evbuf, need);

		if (!n)
			return NULL;
		st->evbuf = n;
		st->evbuf_cap = need;
	}
	memset(st->evbuf, 0, fixed);
	return st->evbuf;
}

/* Append s as a vstr at *at (record-relative). */
static void ev_str(void *rec, size_t *at, struct nt_vstr *v, const char *s,
		   size_t len)
{
	memcpy((char *)rec + *at, s, len);
	v->off = (uint32_t)*at;
	v->len = (uint32_t)len;
	*at += len;
}

static void read_comm(struct pyp *p);

static void hdr_fill(struct nt_event_hdr *h, int type, size_t size,
		     uint32_t pid, uint32_t tid, const char *comm)
{
	h->type = (uint32_t)type;
	h->size = (uint32_t)((size + 7) & ~(size_t)7);
	h->ts_ns = mono_ns();
	h->pid = pid;
	h->tid = tid;
	if (comm)
		memcpy(h->comm, comm, NT_COMM_LEN);
}

static void publish_proc(struct py_plugin *st, struct pyp *p, int status,
			 const char *msg)
{
	char ver[16] = "";
	const char *obj = p->found.object;
	size_t lm = strlen(msg), lo = strlen(obj), lv, at;
	struct py_proc_ev *e;

	if (p->found.major >= 0)
		snprintf(ver, sizeof(ver), "%d.%d", p->found.major, p->found.minor);
	lv = strlen(ver);
	e = ev_begin(st, sizeof(*e), lm + lo + lv + 8);
	if (!e)
		return;
	at = sizeof(*e);
	e->subject_pid = p->pid;
	e->status = status;
	ev_str(e, &at, &e->version, ver, lv);
	ev_str(e, &at, &e->object, obj, lo);
	ev_str(e, &at, &e->message, msg, lm);
	read_comm(p); /* an exec since it was first seen renames it */
	hdr_fill(&e->hdr, st->t_proc, at, p->pid, p->pid, p->comm);
	st->host->publish(st->inst, &e->hdr);
}

/* ---- processes ----------------------------------------------------- */

/* The process's name from /proc/PID/comm; kept when it cannot be read
 * (the process is gone: its events still carry the name it had). */
static void read_comm(struct pyp *p)
{
	char path[48], name[NT_COMM_LEN + 2] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", p->pid);
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(name, sizeof(name), f)) {
		name[strcspn(name, "\n")] = '\0';
		memset(p->comm, 0, sizeof(p->comm));
		memcpy(p->comm, name, strnlen(name, NT_COMM_LEN));
	}
	fclose(f);
}

static struct pyp *proc_get(struct py_plugin *st, uint32_t pid, bool create)
{
	struct pyp *p = py_map_get(&st->procs, pid);

	if (p || !create || st->procs.n >= MAX_PROCS)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->found.major = p->found.minor = -1;
	snprintf(p->pid_s, sizeof(p->pid_s), "%u", pid);
	read_comm(p);
	if (py_map_put(&st->procs, pid, p)) {
		free(p);
		return NULL;
	}
	return p;
}

static void proc_unlink(struct py_plugin *st, struct pyp *p)
{
	if (p->in_bpf && st->skel) {
		bpf_map_delete_elem(bpf_map__fd(st->skel->maps.py_procs), &p->pid);
		p->in_bpf = false;
	}
	bpf_link__destroy(p->l_entry);
	bpf_link__destroy(p->l_return);
	bpf_link__destroy(p->l_exc);
	p->l_entry = p->l_return = p->l_exc = NULL;
}

static void proc_clear_caches(struct pyp *p)
{
	uint32_t it = 0;
	uint64_t k;
	void *v;

	while (py_map_next(&p->codes, &it, &k, &v)) {
		py_code_free(&((struct code_ent *)v)->c);
		free(v);
	}
	py_map_free(&p->codes);
	it = 0;
	while (py_map_next(&p->types, &it, &k, &v))
		free(v);
	py_map_free(&p->types);
	it = 0;
	while (py_map_next(&p->fnpub, &it, &k, &v))
		free(v);
	py_map_free(&p->fnpub);
	p->code_type = 0;
}

static void proc_free(struct py_plugin *st, struct pyp *p)
{
	proc_unlink(st, p);
	proc_clear_caches(p);
	free(p);
}

static void metric_procs(struct py_plugin *st)
{
	uint32_t it = 0, n = 0;
	uint64_t k;
	void *v;

	while (py_map_next(&st->procs, &it, &k, &v))
		n += ((struct pyp *)v)->status == PS_ATTACHED;
	st->host->metric_set(st->m[M_PROCS], NULL, n);
}

static void attach_extras(struct py_plugin *st, struct pyp *p)
{
	const struct nt_host *h = st->host;
	char path[PATH_MAX + 64];
	char msg[PATH_MAX + 256];

	snprintf(path, sizeof(path), "/proc/%u/root%s", p->pid, p->found.object);
	if (st->cfg->calls) {
		if (!p->found.has_usdt) {
			snprintf(msg, sizeof(msg),
				 "call tracing is off for pid %u: %s was built without "
				 "USDT markers (no python:function__entry note; CPython's "
				 "--with-dtrace)", p->pid, p->found.object);
			h->log(st->inst, NT_LOG_WARN, "%s", msg);
			publish_proc(st, p, -ENOTSUP, msg);
		} else {
			p->l_entry = bpf_program__attach_usdt(st->skel->progs.py_func_entry,
							      (pid_t)p->pid, path, "python",
							      "function__entry", NULL);
			p->l_return = p->l_entry
				? bpf_program__attach_usdt(st->skel->progs.py_func_return,
							   (pid_t)p->pid, path, "python",
							   "function__return", NULL)
				: NULL;
			if (!p->l_entry || !p->l_return) {
				int err = -errno;

				bpf_link__destroy(p->l_entry);
				p->l_entry = NULL;
				h->log(st->inst, NT_LOG_WARN,
				       "pid %u: cannot attach the USDT markers of %s: %s; "
				       "call tracing is off for it", p->pid,
				       p->found.object, strerror(-err));
			}
		}
	}
	if (st->cfg->exceptions) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "PyTraceBack_Here");

		p->l_exc = bpf_program__attach_uprobe_opts(st->skel->progs.py_exc,
							   (pid_t)p->pid, path, 0, &uo);
		if (!p->l_exc)
			h->log(st->inst, NT_LOG_WARN,
			       "pid %u: cannot attach to PyTraceBack_Here in %s: %s; "
			       "exceptions are not counted for it", p->pid,
			       p->found.object, strerror(errno));
	}
}

static void seed_idle(struct py_plugin *st, struct pyp *p);

/* A pid given with -p, or the -- CMD child itself (not its descendants). */
static bool named_target(const struct nt_host *h, const struct nt_instance *inst,
			 uint32_t pid)
{
	uint32_t pids[64];
	size_t n = h->target_pids(inst, pids, NT_ARRAY_LEN(pids));

	for (size_t i = 0; i < n && i < NT_ARRAY_LEN(pids); i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* Host-wide, another user's process is sampled only with other_users:
 * its stacks name its code, and land in files other users may read. A
 * process the user named (-p, -- CMD and their children) always is. */
static bool proc_allowed(struct py_plugin *st, struct pyp *p)
{
	uid_t uid;

	if (st->cfg->other_users || st->host->target_map_fd(st->inst) >= 0)
		return true;
	if (py_proc_uid((pid_t)p->pid, &uid))
		return false; /* gone */
	if (uid == geteuid())
		return true;
	st->host->log(st->inst, NT_LOG_DEBUG,
		      "pid %u belongs to uid %u, not ntcore's: not sampled (other_users = false)",
		      p->pid, (unsigned)uid);
	return false;
}

/* Try to make a pending process sampled. */
static void proc_inspect(struct py_plugin *st, struct pyp *p)
{
	const struct nt_host *h = st->host;
	char err[PATH_MAX + 256], msg[PATH_MAX + 512];
	struct py_proc pv;
	int ret;

	if (p->status != PS_PENDING)
		return;
	if (!p->found.runtime && !proc_allowed(st, p)) {
		p->status = PS_OTHER_USER;
		return;
	}
	if (!p->found.runtime) {
		p->inspected_ns = mono_ns();
		ret = py_find((pid_t)p->pid, &p->found, err, sizeof(err));
		if (ret == -ESRCH) {
			p->status = PS_NOTPY;
			return;
		}
		if (ret) {
			char self[PATH_MAX];
			ssize_t l;

			if (++p->tries < (p->from_exec ? FIND_TRIES : 1))
				return;
			p->status = PS_NOTPY;
			/* a child of ours that has not exec'd yet (-- CMD): quiet,
			 * its exec brings it back */
			l = readlink("/proc/self/exe", self, sizeof(self) - 1);
			if (l > 0) {
				self[l] = '\0';
				if (strcmp(self, p->found.exe) == 0)
					return;
			}
			snprintf(msg, sizeof(msg),
				 "pid %u is not a CPython process (%s); not sampling it",
				 p->pid, err);
			/* a line only for a process the user named: the
			 * shells and tools the job runs are not news */
			h->log(st->inst, named_target(h, st->inst, p->pid) ? NT_LOG_INFO
									  : NT_LOG_DEBUG,
			       "%s", msg);
			if (h->target_map_fd(st->inst) >= 0)
				publish_proc(st, p, -ENOENT, msg);
			return;
		}
		ret = py_resolve_layout((pid_t)p->pid, &p->found, &p->layout, err,
					sizeof(err));
		if (ret) {
			if (ret == -ESRCH) {
				p->status = PS_NOTPY;
				return;
			}
			p->status = PS_REFUSED;
			snprintf(msg, sizeof(msg), "pid %u: %s", p->pid, err);
			h->log(st->inst, NT_LOG_WARN, "%s", msg);
			publish_proc(st, p, -ENOTSUP, msg);
			return;
		}
		/* Probes by path and pid need no initialised runtime: attach
		 * them now so the first calls are seen. */
		attach_extras(st, p);
	}
	ret = py_verify((pid_t)p->pid, &p->found, &p->layout, &p->code_type, err,
			sizeof(err));
	if (ret == -EAGAIN) {
		if (++p->init_tries < INIT_TRIES)
			return;
		ret = -EPROTO;
	}
	if (ret == -ESRCH) {
		p->status = PS_NOTPY;
		proc_unlink(st, p);
		return;
	}
	if (ret) {
		p->status = PS_REFUSED;
		proc_unlink(st, p);
		snprintf(msg, sizeof(msg),
			 "pid %u: CPython %d.%d (%s): %s; offsets from %s; not sampling it",
			 p->pid, p->found.major, p->found.minor, p->found.object, err,
			 p->layout.source);
		h->log(st->inst, NT_LOG_WARN, "%s", msg);
		publish_proc(st, p, -EPROTO, msg);
		return;
	}
	memset(&pv, 0, sizeof(pv));
	pv.runtime = p->found.runtime;
	py_layout_to_bpf(&p->layout, &pv.off);
	if (bpf_map_update_elem(bpf_map__fd(st->skel->maps.py_procs), &p->pid, &pv,
				BPF_ANY)) {
		p->status = PS_REFUSED;
		h->log(st->inst, NT_LOG_WARN, "pid %u: cannot register it (%s)",
		       p->pid, strerror(errno));
		return;
	}
	p->in_bpf = true;
	p->status = PS_ATTACHED;
	snprintf(msg, sizeof(msg),
		 "pid %u: CPython %d.%d (%s), offsets from %s; sampling at %lld Hz%s%s",
		 p->pid, p->found.major, p->found.minor, p->found.object,
		 p->layout.source, (long long)st->cfg->frequency,
		 p->l_entry ? ", call tracing" : "", p->l_exc ? ", exceptions" : "");
	h->log(st->inst, NT_LOG_INFO, "%s", msg);
	publish_proc(st, p, 0, msg);
	metric_procs(st);
	seed_idle(st, p);
}

/* A process exec'd (at ts) or was seen unregistered: (re)start its
 * inspection. An exec older than the last inspection was already seen
 * there (the target poll can run before the exec record is read). */
static void proc_seen(struct py_plugin *st, uint32_t pid, bool exec, uint64_t ts)
{
	struct pyp *p = proc_get(st, pid, false);

	if (p && (!exec || ts < p->inspected_ns))
		return;
	if (p)
		st->host->log(st->inst, NT_LOG_DEBUG, "pid %u exec'd (was %s): inspecting again",
			      pid, p->status == PS_ATTACHED ? "sampled" : "not sampled");
	if (p && exec) {
		proc_unlink(st, p);
		proc_clear_caches(p);
		memset(&p->found, 0, sizeof(p->found));
		p->found.major = p->found.minor = -1;
		p->status = PS_PENDING;
		p->tries = p->init_tries = 0;
	}
	if (!p)
		p = proc_get(st, pid, true);
	if (!p)
		return;
	p->from_exec = exec;
	proc_inspect(st, p);
}

/* ---- resolving frames ---------------------------------------------- */

static struct code_ent *code_get(struct py_plugin *st, struct pyp *p,
				 uint64_t addr, uint64_t now)
{
	struct code_ent *e = py_map_get(&p->codes, addr);

	if (e && now - e->checked_ns > CODE_RECHECK_NS) {
		/* the address may have been freed and reused by another code;
		 * an address that held no code object may hold one now */
		if (!e->bad && py_code_same((pid_t)p->pid, &p->layout, addr, &e->c)) {
			e->checked_ns = now;
		} else {
			py_code_free(&e->c);
			free(py_map_del(&p->codes, addr));
			e = NULL;
		}
	}
	if (e)
		return e->bad ? NULL : e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (py_read_code((pid_t)p->pid, &p->layout, addr, &p->code_type, &e->c))
		e->bad = true;
	e->checked_ns = now;
	if (py_map_put(&p->codes, addr, e)) {
		py_code_free(&e->c);
		free(e);
		return NULL;
	}
	(void)st;
	return e->bad ? NULL : e;
}

static uint32_t frame_of(struct py_plugin *st, struct pyp *p,
			 const struct py_frame *f, uint64_t now)
{
	struct code_ent *e = code_get(st, p, f->code, now);
	int addr, line;

	if (!e) {
		st->unresolved++;
		p->unresolved++;
		return py_agg_frame(st->agg, "<unresolved>", "?", 0);
	}
	if (p->layout.minor == 10) {
		addr = (int32_t)(uint32_t)f->instr * 2;
	} else {
		int64_t d = (int64_t)(f->instr - (f->code + p->layout.code_adaptive));

		addr = d < 0 || d > (1 << 28) ? -1 : (int)d;
	}
	line = py_addr2line(p->layout.minor, e->c.linetable, e->c.lt_len,
			    e->c.firstlineno, addr);
	if (line < 0)
		line = e->c.firstlineno;
	return py_agg_frame(st->agg, e->c.qualname, e->c.file, line);
}

/* Native frames of a sample above the innermost Python frame (leaf side
 * up to the interpreter's eval loop), appended root first. */
static uint32_t native_frames(struct py_plugin *st, uint32_t pid, int32_t id,
			      uint32_t *out, uint32_t max)
{
	uint64_t ips[PY_NATIVE_MAX];
	uint32_t n = 0, k;
	int fd = bpf_map__fd(st->skel->maps.py_native);

	if (id < 0 || max == 0)
		return 0;
	memset(ips, 0, sizeof(ips));
	if (bpf_map_lookup_elem(fd, &id, ips))
		return 0;
	bpf_map_delete_elem(fd, &id);
	for (k = 0; k < PY_NATIVE_MAX && ips[k]; k++) {
		struct nt_symbol sym;
		const char *name = NULL;
		char buf[64];

		if (st->host->symbolize(st->inst, pid, ips[k], &sym) == 0 && sym.name)
			name = sym.name;
		if (name && (strstr(name, "_PyEval_EvalFrame") ||
			     strstr(name, "PyEval_EvalCode")))
			break;
		if (!name) {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, ips[k]);
			name = buf;
		}
		if (n < max)
			out[n++] = py_agg_frame(st->agg, name, NULL, 0);
	}
	/* leaf first -> root first */
	for (uint32_t i = 0; i < n / 2; i++) {
		uint32_t t = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	return n;
}

static struct thr *thr_get(struct py_plugin *st, uint32_t tid, uint32_t pid)
{
	struct thr *t = py_map_get(&st->threads, tid);

	if (t && t->pid != pid) {
		free(py_map_del(&st->threads, tid));
		t = NULL;
	}
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->idle_stack = t->cpu_stack = UINT32_MAX;
	if (py_map_put(&st->threads, tid, t)) {
		free(t);
		return NULL;
	}
	return t;
}

static void exc_add(struct py_plugin *st, struct pyp *p,
		    const struct py_sample_rec *r, uint32_t stack,
		    uint32_t top_frame)
{
	char name[256];
	const char *type = py_map_get(&p->types, r->aux);

	if (!type) {
		if (py_read_tp_name((pid_t)p->pid, &p->layout, r->aux, name, sizeof(name)))
			snprintf(name, sizeof(name), "<type 0x%" PRIx64 ">", (uint64_t)r->aux);
		type = py_agg_intern(st->agg, name);
		char *copy = type ? strdup(type) : NULL;

		if (copy && py_map_put(&p->types, r->aux, copy))
			free(copy);
	} else {
		type = py_agg_intern(st->agg, type);
	}
	if (!type)
		return;
	for (size_t i = 0; i < st->n_excs; i++) {
		struct exc_ent *e = &st->excs[i];

		if (e->pid == p->pid && e->type == type && e->top_frame == top_frame) {
			e->count++;
			e->stack = stack;
			return;
		}
	}
	if (st->n_excs == st->cap_excs) {
		size_t nc = st->cap_excs ? st->cap_excs * 2 : 64;
		struct exc_ent *n;

		if (nc > 65536)
			return;
		n = realloc(st->excs, nc * sizeof(*n));
		if (!n)
			return;
		st->excs = n;
		st->cap_excs = nc;
	}
	st->excs[st->n_excs++] = (struct exc_ent){
		.pid = p->pid, .tid = r->hdr.tid, .type = type,
		.top_frame = top_frame, .stack = stack, .count = 1,
	};
	memcpy(st->excs[st->n_excs - 1].comm, r->hdr.comm, NT_COMM_LEN);
}

/* ---- ring records -------------------------------------------------- */

/* Walk one thread's Python stack from user space into an idle stack id. */
static uint32_t user_walk(struct py_plugin *st, struct pyp *p, uint32_t tid,
			  uint64_t tstate, const char *comm, uint64_t now)
{
	struct py_frame fr[PY_MAX_FRAMES];
	uint32_t ids[PY_MAX_FRAMES], m = 0;
	int nf = py_walk((pid_t)p->pid, &p->layout, tstate, fr, (int)st->cfg->max_frames);

	for (int k = nf; k-- > 0;) {
		ids[m] = frame_of(st, p, &fr[k], now);
		if (ids[m] != UINT32_MAX)
			m++;
	}
	if (!m)
		return UINT32_MAX;
	return py_agg_stack(st->agg, p->pid, tid, PY_ST_IDLE, ids, m, comm);
}

/* "S", "R", ... of a thread and its name; 0 if unreadable. */
static char thread_state(uint32_t pid, uint32_t tid, char *comm, size_t len)
{
	char path[64], buf[512], *lp, *rp;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	lp = strchr(buf, '(');
	rp = strrchr(buf, ')');
	if (!lp || !rp || rp < lp || rp[1] != ' ')
		return 0;
	snprintf(comm, len, "%.*s", (int)(rp - lp - 1), lp + 1);
	return rp[2];
}

/* One thread of p: walk it from user space if its current off-CPU
 * period has no stack of its own (see seed_idle). */
static void seed_thread(struct py_plugin *st, struct pyp *p, int ofd,
			uint32_t tid, uint64_t tstate, uint64_t now)
{
	struct thr *t = py_map_get(&st->threads, tid);
	struct py_offcpu oc, again;
	char comm[NT_COMM_LEN + 1] = "";
	bool have = bpf_map_lookup_elem(ofd, &tid, &oc) == 0;
	uint32_t stack;

	if (have && (!oc.out_ns || oc.walk_ns >= oc.out_ns))
		return; /* running, or BPF walked it as it left */
	if (!have && t && t->pid == p->pid && t->idle_stack != UINT32_MAX)
		return;
	if (have && now - oc.out_ns < st->period_ns)
		return; /* just left: a WEIGHT may come first anyway */
	if (thread_state(p->pid, tid, comm, sizeof(comm)) == 'R' || !comm[0])
		return; /* running: the sampler sees it */
	stack = user_walk(st, p, tid, tstate, comm, now);
	t = stack != UINT32_MAX ? thr_get(st, tid, p->pid) : NULL;
	if (!t)
		return;
	if (have) {
		/* not if it ran meanwhile: BPF owns the entry again */
		if (bpf_map_lookup_elem(ofd, &tid, &again) ||
		    again.out_ns != oc.out_ns)
			return;
		t->idle_stack = stack;
		pyj_note(&t->hist, again.out_ns, stack, PYJ_IDLE);
		again.walk_ns = again.vwalk_ns = again.out_ns;
		bpf_map_update_elem(ofd, &tid, &again, BPF_EXIST);
	} else {
		t->idle_stack = stack;
		pyj_note(&t->hist, now, stack, PYJ_IDLE);
		/* off the CPU from now on, as if BPF had seen it leave */
		memset(&oc, 0, sizeof(oc));
		oc.out_ns = now;
		oc.walk_ns = oc.vwalk_ns = now;
		bpf_map_update_elem(ofd, &tid, &oc, BPF_NOEXIST);
	}
}

/* The threads of pid with their thread pointer (the py_tasks iterator). */
static int task_thread_ptrs(struct py_plugin *st, uint32_t pid,
			struct py_task_rec *out, int max)
{
	union bpf_iter_link_info li;
	LIBBPF_OPTS(bpf_iter_attach_opts, o);
	struct bpf_link *l;
	int fd, n = 0, err;
	ssize_t r;

	memset(&li, 0, sizeof(li));
	li.task.pid = pid;
	o.link_info = &li;
	o.link_info_len = sizeof(li);
	l = bpf_program__attach_iter(st->skel->progs.py_tasks, &o);
	if (!l)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(l));
	if (fd < 0) {
		err = -errno;
		bpf_link__destroy(l);
		return err;
	}
	while (n < max &&
	       (r = read(fd, out + n, (size_t)(max - n) * sizeof(*out))) > 0)
		n += (int)(r / (ssize_t)sizeof(*out));
	close(fd);
	bpf_link__destroy(l);
	return n;
}

/*
 * (native tid, thread state) of the threads of p's first interpreter.
 * 3.10 stores pthread_self() as a thread state's id: the thread pointer
 * the task iterator reads for each tid, less tp_to_pthread. Until
 * a new thread runs, its state holds its creator's id; the list is newest
 * first, so the older (the creator's own) state wins a duplicate.
 */
static int threads_of(struct py_plugin *st, struct pyp *p, uint32_t *tids,
		      uint64_t *tss, int max)
{
	uint64_t ids[256], live[256];
	struct py_task_rec tr[256];
	int nl, nt, n = 0;

	if (!p->layout.tid_is_pthread)
		return py_threads((pid_t)p->pid, &p->layout, p->found.runtime,
				  tids, tss, (size_t)max);
	nl = py_tstates((pid_t)p->pid, &p->layout, p->found.runtime, ids, live, 256);
	if (nl <= 0)
		return nl;
	nt = task_thread_ptrs(st, p->pid, tr, 256);
	for (int i = nl; i-- > 0 && n < max;) {
		for (int j = 0; j < nt; j++) {
			bool dup = false;

			if (tr[j].tgid != p->pid || !ids[i] ||
			    tr[j].tp - st->skel->rodata->tp_to_pthread != ids[i])
				continue;
			for (int k = 0; k < n && !dup; k++)
				dup = tids[k] == tr[j].tid;
			if (!dup) {
				tids[n] = tr[j].tid;
				tss[n++] = live[i];
			}
			break;
		}
	}
	return n;
}

/*
 * Blocked threads whose current off-CPU period has no stack of its own:
 * those blocked since before we saw them (asleep when the process was
 * registered, or attached with -p: they never leave the CPU again), and
 * those whose switch-out walk was skipped by the once-per-period limit.
 * A blocked thread's Python stack cannot change, so a walk from user
 * space now is the stack of the whole period.
 */
static void seed_idle(struct py_plugin *st, struct pyp *p)
{
	uint32_t tids[256];
	uint64_t tss[256];
	int n, ofd;
	uint64_t now = mono_ns();

	if (!st->cfg->idle || p->status != PS_ATTACHED)
		return;
	ofd = bpf_map__fd(st->skel->maps.py_offcpu);
	n = threads_of(st, p, tids, tss, 256);
	for (int i = 0; i < n; i++)
		seed_thread(st, p, ofd, tids[i], tss[i], now);
}

static void on_sample(struct py_plugin *st, const struct py_sample_rec *r,
		      size_t size)
{
	uint32_t ids[PY_MAX_FRAMES + PY_NATIVE_MAX + 2];
	uint32_t n = 0, nf = r->n_frames, stack, top = UINT32_MAX;
	struct pyp *p = proc_get(st, r->hdr.pid, false);
	uint64_t now = mono_ns();
	unsigned state;
	struct thr *t;

	if (!p || p->status != PS_ATTACHED)
		return;
	if (nf > PY_MAX_FRAMES ||
	    size < PY_SAMPLE_HDR_SIZE + (size_t)nf * sizeof(struct py_frame))
		return;
	if (r->flags & PY_F_TRUNCATED)
		ids[n++] = py_agg_frame(st->agg, "[truncated]", NULL, 0);
	/* frames[0] is the innermost: walk backwards for root first */
	for (uint32_t i = nf; i-- > 0;) {
		ids[n] = frame_of(st, p, &r->frames[i], now);
		if (ids[n] != UINT32_MAX)
			n++;
	}
	if (n)
		top = ids[n - 1];
	if ((r->flags & PY_F_READERR) && !nf)
		ids[n++] = py_agg_frame(st->agg, "[unreadable]", NULL, 0);
	if (st->cfg->native && r->hdr.type != PY_REC_EXC)
		n += native_frames(st, r->hdr.pid, r->native_id, ids + n,
				   PY_NATIVE_MAX);
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == UINT32_MAX)
			return;
	state = r->hdr.type == PY_REC_IDLE ? PY_ST_IDLE : PY_ST_CPU;
	{
		char comm[NT_COMM_LEN + 1];

		memcpy(comm, r->hdr.comm, NT_COMM_LEN);
		comm[NT_COMM_LEN] = '\0';
		stack = py_agg_stack(st->agg, r->hdr.pid, r->hdr.tid, state, ids, n, comm);
	}
	if (stack == UINT32_MAX)
		return;
	t = thr_get(st, r->hdr.tid, r->hdr.pid);
	switch (r->hdr.type) {
	case PY_REC_CPU:
		py_agg_add(st->agg, stack, 1);
		if (t) {
			t->cpu_stack = stack;
			t->cpu_ts = r->hdr.ts_ns;
			pyj_note(&t->hist, r->hdr.ts_ns, stack, PYJ_CPU);
		}
		break;
	case PY_REC_IDLE:
		if (t) {
			t->idle_stack = stack;
			pyj_note(&t->hist, r->hdr.ts_ns, stack,
				 r->aux & 1 ? PYJ_PREEMPT : PYJ_IDLE);
		}
		break;
	case PY_REC_EXC:
		if (top != UINT32_MAX)
			exc_add(st, p, r, stack, top);
		break;
	}
}

/* Off-CPU time of a thread, counted as samples of its last idle stack. */
static void add_offcpu(struct py_plugin *st, struct thr *t, uint64_t start,
		       uint64_t end)
{
	uint64_t n;

	if (t->flushed_to > start)
		start = t->flushed_to;
	if (end <= start || t->idle_stack == UINT32_MAX)
		return;
	t->acc_ns += end - start;
	n = t->acc_ns / st->period_ns;
	t->acc_ns -= n * st->period_ns;
	if (n)
		py_agg_add(st->agg, t->idle_stack, n);
}

static uint64_t call_key_hash(const struct py_call_key *key)
{
	uint64_t h = 1469598103934665603ULL;
	const uint8_t *k = (const uint8_t *)key;

	for (size_t i = 0; i < sizeof(*key); i++) {
		h ^= k[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void on_func(struct py_plugin *st, const struct py_func_rec *r)
{
	struct call_name *cn;
	char both[2 * PY_NAME_MAX + 2];
	uint64_t h = call_key_hash(&r->key);
	struct pyp *p = proc_get(st, r->key.pid, false);
	struct code_ent *ce = NULL;

	if (py_map_get(&st->names, h))
		return;
	cn = calloc(1, sizeof(*cn));
	if (!cn)
		return;
	if (p && p->status == PS_ATTACHED && r->key.code)
		ce = code_get(st, p, r->key.code, mono_ns());
	if (ce) {
		/* trust the frame's code object only when it is the function the
		 * marker names (same co_name, same file) */
		const char *q = ce->c.qualname, *dot = strrchr(q, '.');
		char fn[PY_NAME_MAX + 1], fl[PY_NAME_MAX + 1];

		snprintf(fn, sizeof(fn), "%.*s", PY_NAME_MAX, r->func);
		snprintf(fl, sizeof(fl), "%.*s", PY_NAME_MAX, r->file);
		if (strcmp(dot ? dot + 1 : q, fn) || strcmp(ce->c.file, fl))
			ce = NULL;
	}
	if (ce) {
		cn->func = strdup(ce->c.qualname);
		cn->file = strdup(ce->c.file);
		cn->line = ce->c.firstlineno;
	} else {
		cn->func = strndup(r->func, PY_NAME_MAX);
		cn->file = strndup(r->file, PY_NAME_MAX);
		cn->line = r->line;
	}
	if (!cn->func || !cn->file) {
		free(cn->func);
		free(cn->file);
		free(cn);
		return;
	}
	snprintf(both, sizeof(both), "%s:%s", cn->file, cn->func);
	cn->match = fnmatch(st->cfg->call_pattern, cn->func, 0) == 0 ||
		    fnmatch(st->cfg->call_pattern, r->func, 0) == 0 ||
		    fnmatch(st->cfg->call_pattern, both, 0) == 0;
	if (py_map_put(&st->names, h, cn)) {
		free(cn->func);
		free(cn->file);
		free(cn);
		return;
	}
	if (r->key.code) {
		struct py_call_key sk = r->key;

		sk.code = 0;
		py_map_put(&st->siblings, call_key_hash(&sk), cn);
	}
}

static int on_ring(void *ctx, void *data, size_t size)
{
	struct py_plugin *st = ctx;
	const struct nt_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	switch (h->type) {
	case PY_REC_CPU:
	case PY_REC_IDLE:
	case PY_REC_EXC:
		if (size >= PY_SAMPLE_HDR_SIZE)
			on_sample(st, data, size);
		break;
	case PY_REC_WEIGHT:
		if (size >= sizeof(struct py_weight_rec)) {
			const struct py_weight_rec *w = data;
			struct thr *t = py_map_get(&st->threads, h->tid);

			if (t && t->pid == h->pid)
				add_offcpu(st, t, w->start_ns, w->start_ns + w->off_ns);
		}
		break;
	case PY_REC_FUNC:
		if (size >= sizeof(struct py_func_rec))
			on_func(st, data);
		break;
	case PY_REC_EXEC:
	case PY_REC_UNKNOWN:
		proc_seen(st, h->pid, h->type == PY_REC_EXEC, h->ts_ns);
		break;
	}
	return 0;
}

/* ---- publishing ---------------------------------------------------- */

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

static void publish_calls(struct py_plugin *st, uint32_t pid)
{
	int fd = bpf_map__fd(st->skel->maps.py_calls);
	struct py_call_key key, next, *prev = NULL;
	struct py_call_stats val;
	struct fn_rows fr = { 0 };
	struct call_acc *acc = NULL;
	size_t n_acc = 0, cap_acc = 0;

	/* Sum the BPF keys per function: returns seen before the process was
	 * registered carry no code object and fold into the key that has one
	 * for the same name pointers. */
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct call_name *cn, *target;
		size_t i;

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
		for (i = 0; i < n_acc; i++)
			if (acc[i].name == target && acc[i].pid == key.pid)
				break;
		if (i == n_acc) {
			if (n_acc == cap_acc) {
				size_t nc = cap_acc ? cap_acc * 2 : 64;
				struct call_acc *na = realloc(acc, nc * sizeof(*na));

				if (!na)
					break;
				acc = na;
				cap_acc = nc;
			}
			memset(&acc[n_acc], 0, sizeof(acc[n_acc]));
			acc[n_acc].name = target;
			acc[n_acc].pid = key.pid;
			n_acc++;
		}
		acc[i].d.calls += val.calls - cn->pub.calls;
		acc[i].d.timed += val.timed - cn->pub.timed;
		acc[i].d.incl_ns += val.incl_ns - cn->pub.incl_ns;
		acc[i].d.self_ns += val.self_ns - cn->pub.self_ns;
		cn->pub = val;
	}
	for (size_t i = 0; i < n_acc; i++) {
		struct call_name *cn = acc[i].name;
		size_t lf = strlen(cn->func), lfi = strlen(cn->file), at;
		struct py_calls_ev *e = ev_begin(st, sizeof(*e), lf + lfi + 8);
		struct pyp *p = proc_get(st, acc[i].pid, false);
		char label[2 * PY_NAME_MAX + 4];
		const char *pid_s = p ? p->pid_s : "0";

		if (!e)
			continue;
		at = sizeof(*e);
		e->calls = acc[i].d.calls;
		e->timed_calls = acc[i].d.timed;
		e->inclusive_ns = acc[i].d.incl_ns;
		e->self_ns = acc[i].d.self_ns;
		e->line = cn->line;
		sampled_time(st, &fr, acc[i].pid, cn->func, cn->file,
			     &e->sampled_inclusive_ns, &e->sampled_self_ns);
		ev_str(e, &at, &e->function, cn->func, lf);
		ev_str(e, &at, &e->file, cn->file, lfi);
		hdr_fill(&e->hdr, st->t_calls, at, acc[i].pid, acc[i].pid, NULL);
		st->host->publish(st->inst, &e->hdr);
		snprintf(label, sizeof(label), "%s (%s)", cn->func, cn->file);
		{
			const char *lv[2] = { pid_s, label };
			const char *li[3] = { pid_s, label, "inclusive" };
			const char *ls[3] = { pid_s, label, "self" };

			st->host->metric_add(st->m[M_CALLS], lv, (double)acc[i].d.calls);
			if (acc[i].d.timed) {
				st->host->metric_add(st->m[M_CALLSEC], li,
						     (double)acc[i].d.incl_ns / 1e9);
				st->host->metric_add(st->m[M_CALLSEC], ls,
						     (double)acc[i].d.self_ns / 1e9);
			}
		}
	}
	free(acc);
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

/* Count the off-CPU time of threads still off the CPU up to now. */
static void flush_offcpu(struct py_plugin *st, uint32_t pid)
{
	int fd = bpf_map__fd(st->skel->maps.py_offcpu);
	uint32_t key, next, *prev = NULL;
	struct py_offcpu oc;
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct thr *t;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &oc) || (!oc.out_ns && !oc.acc_ns))
			continue;
		t = py_map_get(&st->threads, key);
		if (!t || (pid && t->pid != pid))
			continue;
		/* time sent yet neither at a switch-in (acc) nor ended (out) */
		if (oc.acc_ns)
			add_offcpu(st, t, oc.acc_start, oc.acc_start + oc.acc_ns);
		if (oc.out_ns)
			add_offcpu(st, t, oc.out_ns, now);
		t->flushed_to = now;
	}
}

static void publish_report(struct py_plugin *st, uint32_t pid)
{
	size_t at = 0, cap = TEXT_MAX;
	uint32_t it = 0;
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
static void publish_all(struct py_plugin *st, uint32_t pid)
{
	struct emit_ctx ec = { st, st->text, TEXT_MAX };

	if (!st->skel)
		return;
	if (st->cfg->idle)
		flush_offcpu(st, pid);
	py_agg_emit(st->agg, pid, emit_stack, &ec);
	if (st->cfg->calls)
		publish_calls(st, pid);
	if (st->cfg->exceptions)
		publish_excs(st, pid, st->text, TEXT_MAX);
	publish_report(st, pid);
}

/* ---- CUDA join ----------------------------------------------------- */

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
		d->oh_read = mono_ns();
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
		uint32_t it = 0;
		uint64_t k;
		void *v;

		own_py = join_is_python(st, p, ev->tid, mono_ns());
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

/*
 * A host call of the cuda probe: joined with a Python stack. Launches
 * (`launch`) are counted in python.stack (state cuda); every joined call's
 * stack is also lent as python.launch_stack while someone listens.
 */
static void on_cuda_launch(struct py_plugin *st, const struct nt_event_hdr *ev,
			   const struct nt_schema *schema, bool launch)
{
	uint32_t ids[PY_MAX_FRAMES + PY_NATIVE_MAX + 4];
	uint32_t n = 0, nf = 0;
	const uint32_t *fr = NULL;
	const struct nt_field *fs = field_named(schema, "stack", NT_F_VSTR);
	const struct nt_field *fk = field_named(schema, "kernel", NT_F_VSTR);
	struct pyp *p = proc_get(st, ev->pid, false);
	char comm[NT_COMM_LEN + 1];
	struct pyj_result jr;
	uint32_t stack;

	if (!p || p->status != PS_ATTACHED || (!launch && !py_lend_wanted(&st->lend)))
		return;
	memcpy(comm, ev->comm, NT_COMM_LEN);
	comm[NT_COMM_LEN] = '\0';
	/* our own records up to now first: the samples and idle walks of the
	 * time of the launch may still wait in the ring (batched wake-ups) */
	if (st->rb)
		ring_buffer__consume(st->rb);
	join_pick(st, p, ev, &jr);
	if (launch) {
		uint64_t now = mono_ns();

		if (now > ev->ts_ns && now - ev->ts_ns > p->join_lag_max_ns)
			p->join_lag_max_ns = now - ev->ts_ns;
		p->join_how[jr.how & 3]++;
		if (jr.how == PYJ_NONE && jr.why < PYJ_WHY_N)
			p->join_why[jr.why]++;
	}
	if (jr.how != PYJ_NONE)
		fr = py_agg_stack_frames(st->agg, jr.stack, &nf);
	if (!fr || !nf) {
		ids[n++] = py_agg_frame(st->agg, "[no recent Python sample]", NULL, 0);
	} else {
		/* the Python frames only (drop native frames of that sample) */
		for (uint32_t i = 0; i < nf && n < PY_MAX_FRAMES; i++) {
			const char *file;
			int line;

			py_agg_frame_func(st->agg, fr[i], &file, &line);
			if (file)
				ids[n++] = fr[i];
		}
		if (jr.how == PYJ_CROSS) {
			/* crossed threads: the launch is another thread's */
			char mark[64];

			snprintf(mark, sizeof(mark), "[launched by thread %u %s]",
				 ev->tid, comm);
			ids[n++] = py_agg_frame(st->agg, mark, NULL, 0);
		}
	}
	if (fs && (uint32_t)fs->offset + sizeof(struct nt_vstr) <= ev->size) {
		struct nt_vstr v;
		const char *txt;
		const char *frames[PY_NATIVE_MAX];
		size_t lens[PY_NATIVE_MAX];
		uint32_t k = 0;

		memcpy(&v, (const char *)ev + fs->offset, sizeof(v));
		if (v.len && (uint64_t)v.off + v.len <= ev->size) {
			txt = (const char *)ev + v.off;
			/* root first, ';'-separated: the native frames after the
			 * last eval-loop frame, at most the innermost
			 * PY_NATIVE_MAX (a ring of the latest ones) */
			uint32_t head = 0;
			for (size_t i = 0, start = 0; i <= v.len; i++) {
				if (i < v.len && txt[i] != ';')
					continue;
				size_t len = i - start;
				const char *f = txt + start;
				start = i + 1;
				if (!len)
					continue;
				if (memmem(f, len, "_PyEval_EvalFrame", 17)) {
					k = head = 0;
					continue;
				}
				frames[(head + k) % PY_NATIVE_MAX] = f;
				lens[(head + k) % PY_NATIVE_MAX] = len;
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
				ids[n++] = py_agg_frame(st->agg, name, NULL, 0);
			}
		}
	}
	if (jr.how != PYJ_NONE)
		py_lend_publish(&st->lend, st->host, st->inst, ev, st->agg, ids, n,
				st->cfg->lines, (unsigned)jr.how);
	if (!launch)
		return;
	if (fk && (uint32_t)fk->offset + sizeof(struct nt_vstr) <= ev->size) {
		struct nt_vstr v;

		memcpy(&v, (const char *)ev + fk->offset, sizeof(v));
		if (v.len && (uint64_t)v.off + v.len <= ev->size) {
			char name[512];
			size_t l = v.len < 400 ? v.len : 400;

			snprintf(name, sizeof(name), "[kernel] %.*s", (int)l,
				 (const char *)ev + v.off);
			ids[n++] = py_agg_frame(st->agg, name, NULL, 0);
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == UINT32_MAX)
			return;
	stack = py_agg_stack(st->agg, ev->pid, ev->tid, PY_ST_CUDA, ids, n, comm);
	if (stack != UINT32_MAX)
		py_agg_add(st->agg, stack, 1);
}

/* ---- process exit -------------------------------------------------- */

static void proc_gone(struct py_plugin *st, uint32_t pid)
{
	struct pyp *p = proc_get(st, pid, false);
	uint32_t it = 0;
	uint64_t k;
	void *v;

	if (!p)
		return;
	if (p->status == PS_ATTACHED && st->rb) {
		uint64_t all = 0;
		struct py_func_row row;

		ring_buffer__consume(st->rb);
		publish_all(st, pid);
		py_agg_top(st->agg, pid, 1, &row, &all);
		/* No line for a Python that never ran long enough to be
		 * sampled (a helper the job started). */
		st->host->log(st->inst, all ? NT_LOG_INFO : NT_LOG_DEBUG,
			      "pid %u exited: %llu samples kept; %llu frames could not be "
			      "named (the process was gone before their code was read)",
			      pid, (unsigned long long)all,
			      (unsigned long long)p->unresolved);
		if (p->join_how[0] + p->join_how[1] + p->join_how[2] + p->join_how[3])
			st->host->log(st->inst, NT_LOG_INFO,
				      "pid %u: CUDA launches joined with the launching thread's "
				      "own stack %llu (+%llu by its next sample), lent a blocked "
				      "thread's stack %llu; not joined %llu: Python thread "
				      "without a recent sample %llu, no other Python thread "
				      "walked %llu, blocked-thread history too short %llu, "
				      "other thread running or preempted %llu, its block "
				      "without a walk %llu, joined too late for the threads' "
				      "histories %llu, the thread blocked between its sample and "
				      "the launch %llu; largest launch-to-join delay %llu ms", pid,
				      (unsigned long long)p->join_how[PYJ_OWN],
				      (unsigned long long)p->join_how[PYJ_OWN_AFTER],
				      (unsigned long long)p->join_how[PYJ_CROSS],
				      (unsigned long long)p->join_how[PYJ_NONE],
				      (unsigned long long)p->join_why[PYJ_WHY_PYTHON],
				      (unsigned long long)p->join_why[PYJ_WHY_NODONOR],
				      (unsigned long long)p->join_why[PYJ_WHY_UNKNOWN],
				      (unsigned long long)p->join_why[PYJ_WHY_RUNNING],
				      (unsigned long long)p->join_why[PYJ_WHY_NOWALK],
				      (unsigned long long)p->join_why[PYJ_WHY_LATE],
				      (unsigned long long)p->join_why[PYJ_WHY_MOVED],
				      (unsigned long long)(p->join_lag_max_ns / 1000000));
	}
	py_agg_forget(st->agg, pid);
	while (py_map_next(&st->threads, &it, &k, &v))
		if (((struct thr *)v)->pid == pid)
			free(py_map_del(&st->threads, k));
	for (size_t i = 0; i < st->n_excs;) {
		if (st->excs[i].pid == pid)
			st->excs[i] = st->excs[--st->n_excs];
		else
			i++;
	}
	if (st->skel && st->cfg->calls) {
		int fd = bpf_map__fd(st->skel->maps.py_calls);
		struct py_call_key key, next, *prev = NULL;

		while (bpf_map_get_next_key(fd, prev, &next) == 0) {
			key = next;
			if (key.pid == pid) {
				bpf_map_delete_elem(fd, &key);
				prev = NULL; /* restart: the walk order changed */
			} else {
				prev = &key;
			}
		}
	}
	py_map_del(&st->procs, pid);
	proc_free(st, p);
	metric_procs(st);
}

static void py_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct py_plugin *st = state;

	if (!st->skel)
		return;
	if (strcmp(schema->name, "proc.exit") == 0)
		proc_gone(st, ev->pid);
	else if (strcmp(schema->name, "cuda.launch") == 0)
		on_cuda_launch(st, ev, schema, true);
	else if (strncmp(schema->name, "cuda.", 5) == 0)
		on_cuda_launch(st, ev, schema, false); /* graph launch, copy, set */
}

/* ---- timers -------------------------------------------------------- */

static void poll_targets(struct py_plugin *st)
{
	uint32_t pids[1024];
	size_t n = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));

	if (n > NT_ARRAY_LEN(pids))
		n = NT_ARRAY_LEN(pids);
	for (size_t i = 0; i < n; i++)
		if (!proc_get(st, pids[i], false))
			proc_seen(st, pids[i], false, 0);
}

static void scan_host(struct py_plugin *st)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char p[64], exe[PATH_MAX];
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		ssize_t l;

		if (*end || !pid || pid == (unsigned long)getpid())
			continue;
		snprintf(p, sizeof(p), "/proc/%lu/exe", pid);
		l = readlink(p, exe, sizeof(exe) - 1);
		if (l <= 0)
			continue;
		exe[l] = '\0';
		if (py_is_python_name(exe))
			proc_seen(st, (uint32_t)pid, false, 0);
	}
	closedir(d);
}

static void read_stats(struct py_plugin *st)
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

static void tick(struct py_plugin *st)
{
	uint32_t it = 0;
	uint64_t k;
	void *v;

	st->tick++;
	while (py_map_next(&st->procs, &it, &k, &v)) {
		struct pyp *p = v;

		if (p->status == PS_PENDING)
			proc_inspect(st, p);
		else
			seed_idle(st, p);
	}
	if (st->tick % STATS_EVERY)
		return;
	read_stats(st);
	if (st->host->target_map_fd(st->inst) >= 0)
		poll_targets(st);
	/* processes that went away without a proc.exit (host-wide mode) */
	it = 0;
	while (py_map_next(&st->procs, &it, &k, &v)) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%u", (uint32_t)k);
		if (access(path, F_OK) != 0)
			proc_gone(st, (uint32_t)k);
	}
}

static int py_poll(void *state, uint32_t token, uint32_t budget)
{
	struct py_plugin *st = state;
	int n = 0;

	(void)budget;
	if (!st->skel)
		return 0;
	switch (token) {
	case TOK_RING:
		n = ring_buffer__consume(st->rb);
		if (n < 0 && n != -EINTR) {
			st->host->log(st->inst, NT_LOG_WARN, "ring buffer: %s",
				      strerror(-n));
			n = 0;
		}
		break;
	case TOK_DRAIN:
		n = ring_buffer__consume(st->rb);
		break;
	case TOK_TICK:
		n = ring_buffer__consume(st->rb);
		tick(st);
		break;
	case TOK_REPORT:
		ring_buffer__consume(st->rb);
		publish_all(st, 0);
		break;
	}
	return n < 0 ? 0 : n;
}

/* ---- lifecycle ----------------------------------------------------- */

static int py_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct py_cfg *cfg = config;
	struct py_plugin *st;
	int64_t kb = cfg->ringbuf_kb;

	if (kb & (kb - 1))
		return host->config_error(inst, "ringbuf_kb",
					  "%lld is not a power of two", (long long)kb);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = cfg;
	st->period_ns = 1000000000ull / (uint64_t)cfg->frequency;
	st->agg = py_agg_new((uint32_t)cfg->max_stacks);
	st->text = malloc(TEXT_MAX);
	if (!st->agg || !st->text)
		goto nomem;
	st->t_stack = host->register_schema(inst, &stack_schema);
	st->t_report = host->register_schema(inst, &report_schema);
	st->t_calls = host->register_schema(inst, &calls_schema);
	st->t_exc = host->register_schema(inst, &exc_schema);
	st->t_proc = host->register_schema(inst, &proc_schema);
	if (st->t_stack < 0 || st->t_report < 0 || st->t_calls < 0 ||
	    st->t_exc < 0 || st->t_proc < 0) {
		host->log(inst, NT_LOG_ERROR, "cannot register event schemas");
		py_agg_free(st->agg);
		free(st->text);
		free(st);
		return -EEXIST;
	}
	for (int i = 0; i < M_N; i++) {
		st->m[i] = host->metric_register(inst, &metric_desc[i]);
		if (!st->m[i]) {
			host->log(inst, NT_LOG_ERROR, "cannot register metric %s",
				  metric_desc[i].name);
			py_agg_free(st->agg);
			free(st->text);
			free(st);
			return -ENOMEM;
		}
	}
	host->subscribe(inst, "proc.exit");
	if (cfg->cuda_join) {
		host->subscribe(inst, "cuda.launch");
		/* their stacks are lent only (python.launch_stack) */
		host->subscribe(inst, "cuda.graph_launch");
		host->subscribe(inst, "cuda.memcpy");
		host->subscribe(inst, "cuda.memset");
		if (py_lend_init(&st->lend, host, inst))
			host->log(inst, NT_LOG_WARN, "cannot register python.launch_stack: no stacks lent");
	}
	*state = st;
	return 0;
nomem:
	py_agg_free(st->agg);
	free(st->text);
	free(st);
	return -ENOMEM;
}

static void py_detach(void *state)
{
	struct py_plugin *st = state;
	uint32_t it = 0;
	uint64_t k;
	void *v;

	while (py_map_next(&st->procs, &it, &k, &v))
		proc_unlink(st, v);
	if (st->perf_links)
		for (int i = 0; i < st->n_cpus; i++)
			bpf_link__destroy(st->perf_links[i]);
	if (st->perf_fds)
		for (int i = 0; i < st->n_cpus; i++)
			if (st->perf_fds[i] >= 0)
				close(st->perf_fds[i]);
	free(st->perf_links);
	free(st->perf_fds);
	st->perf_links = NULL;
	st->perf_fds = NULL;
	bpf_link__destroy(st->l_switch);
	bpf_link__destroy(st->l_exec);
	st->l_switch = st->l_exec = NULL;
	ring_buffer__free(st->rb);
	st->rb = NULL;
	python_bpf__destroy(st->skel);
	st->skel = NULL;
}

/* Stop producing (ABI 1.6): the samplers, the USDT probes and the
 * tracepoints go, all at once; the ring and maps stay for the core's last
 * read (the perf event fds are closed at detach). */
static void py_quiesce(void *state)
{
	struct py_plugin *st = state;
	struct nt_linkset ls = {0};
	uint32_t it = 0;
	uint64_t k;
	void *v;

	while (py_map_next(&st->procs, &it, &k, &v)) {
		struct pyp *p = v;
		nt_linkset_add(&ls, p->l_entry);
		nt_linkset_add(&ls, p->l_return);
		nt_linkset_add(&ls, p->l_exc);
		p->l_entry = p->l_return = p->l_exc = NULL;
	}
	for (int i = 0; st->perf_links && i < st->n_cpus; i++) {
		nt_linkset_add(&ls, st->perf_links[i]);
		st->perf_links[i] = NULL;
	}
	nt_linkset_add(&ls, st->l_switch);
	nt_linkset_add(&ls, st->l_exec);
	st->l_switch = st->l_exec = NULL;
	nt_linkset_release(&ls);
}

static int open_perf(struct py_plugin *st)
{
	struct perf_event_attr attr;
	int opened = 0, last_err = 0;

	st->n_cpus = libbpf_num_possible_cpus();
	if (st->n_cpus <= 0)
		return -EINVAL;
	st->perf_links = calloc((size_t)st->n_cpus, sizeof(*st->perf_links));
	st->perf_fds = calloc((size_t)st->n_cpus, sizeof(*st->perf_fds));
	if (!st->perf_links || !st->perf_fds)
		return -ENOMEM;
	for (int i = 0; i < st->n_cpus; i++)
		st->perf_fds[i] = -1;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = st->period_ns; /* cpu-clock counts nanoseconds */
	for (int i = 0; i < st->n_cpus; i++) {
		int fd = (int)syscall(__NR_perf_event_open, &attr, -1, i, -1,
				      PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			last_err = -errno;
			continue; /* offline CPU */
		}
		st->perf_fds[i] = fd;
		st->perf_links[i] = bpf_program__attach_perf_event(st->skel->progs.py_sample, fd);
		if (!st->perf_links[i]) {
			last_err = -errno;
			continue;
		}
		opened++;
	}
	return opened ? 0 : (last_err ? last_err : -ENODEV);
}

/* How far glibc's pthread_self() is below the thread pointer, measured in
 * this process (the targets use the same C library, as a rule): 0 on
 * x86-64, sizeof(struct pthread) on arm64. */
static uint64_t tp_to_pthread_self(void)
{
#if defined(__aarch64__)
	return (uint64_t)(uintptr_t)__builtin_thread_pointer() -
	       (uint64_t)pthread_self();
#else
	return 0;
#endif
}

static int py_attach(void *state)
{
	struct py_plugin *st = state;
	const struct py_cfg *c = st->cfg;
	const struct nt_host *h = st->host;
	int err;

	st->skel = python_bpf__open();
	if (!st->skel) {
		err = -errno;
		h->log(st->inst, NT_LOG_ERROR, "cannot open the BPF object: %s",
		       strerror(-err));
		return err;
	}
	st->skel->rodata->max_frames = (uint32_t)c->max_frames;
	st->skel->rodata->want_native = c->native;
	st->skel->rodata->want_idle = c->idle;
	st->skel->rodata->period_ns = st->period_ns;
	st->skel->rodata->self_pid = (uint32_t)getpid();
	st->skel->rodata->tp_to_pthread = tp_to_pthread_self();
	bpf_map__set_max_entries(st->skel->maps.py_events,
				 (uint32_t)c->ringbuf_kb * 1024);
	bpf_map__set_max_entries(st->skel->maps.py_native,
				 c->native ? (uint32_t)c->native_stacks : 1);
	bpf_program__set_autoload(st->skel->progs.py_switch, c->idle);
	bpf_program__set_autoload(st->skel->progs.py_tasks, c->idle);
	bpf_program__set_autoload(st->skel->progs.py_func_entry, c->calls);
	bpf_program__set_autoload(st->skel->progs.py_func_return, c->calls);
	bpf_program__set_autoload(st->skel->progs.py_exc, c->exceptions);
	err = nt_bpf_use_targets(h, st->inst, st->skel->maps.nt_targets,
				 &st->skel->rodata->nt_filter_on);
	if (err)
		goto fail;
	err = python_bpf__load(st->skel);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot load the BPF programs: %s",
		       strerror(-err));
		goto fail;
	}
	err = open_perf(st);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR,
		       "cannot open the CPU-clock perf events for sampling: %s",
		       strerror(-err));
		goto fail;
	}
	if (c->idle) {
		st->l_switch = bpf_program__attach(st->skel->progs.py_switch);
		if (!st->l_switch) {
			err = -errno;
			h->log(st->inst, NT_LOG_ERROR, "cannot attach sched_switch: %s",
			       strerror(-err));
			goto fail;
		}
	}
	st->l_exec = bpf_program__attach(st->skel->progs.py_exec);
	if (!st->l_exec) {
		err = -errno;
		h->log(st->inst, NT_LOG_ERROR, "cannot attach sched_process_exec: %s",
		       strerror(-err));
		goto fail;
	}
	err = nt_bpf_ring_open(h, st->inst, st->skel->maps.py_events, on_ring, st,
			       TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, TICK_MS, TOK_TICK);
	if (!err)
		err = h->add_timer(st->inst, DRAIN_MS, TOK_DRAIN);
	if (!err && c->report_interval_s)
		err = h->add_timer(st->inst, (uint64_t)c->report_interval_s * 1000, TOK_REPORT);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot add timers: %s",
		       strerror(-err));
		goto fail;
	}
	if (h->target_map_fd(st->inst) >= 0)
		poll_targets(st);
	else
		scan_host(st);
	if (h->target_map_fd(st->inst) < 0 && !c->other_users)
		h->log(st->inst, NT_LOG_INFO,
		       "host-wide: sampling the processes of uid %u only (other_users = true for every user's)",
		       (unsigned)geteuid());
	h->log(st->inst, NT_LOG_INFO,
	       "sampling Python stacks at %lld Hz on %d CPUs%s%s%s%s",
	       (long long)c->frequency, st->n_cpus, c->idle ? ", off-CPU time too" : "",
	       c->native ? ", native frames" : "", c->calls ? ", call tracing" : "",
	       c->exceptions ? ", exceptions" : "");
	return 0;
fail:
	py_detach(st);
	return err;
}

static void py_flush(void *state)
{
	struct py_plugin *st = state;

	if (!st->skel)
		return;
	ring_buffer__consume(st->rb);
	publish_all(st, 0);
	read_stats(st);
}

static void py_fini(void *state)
{
	struct py_plugin *st = state;
	uint32_t it = 0;
	uint64_t k;
	void *v;

	if (!st)
		return;
	if (st->skel)
		py_detach(st);
	while (py_map_next(&st->procs, &it, &k, &v))
		proc_free(st, v);
	py_map_free(&st->procs);
	py_lend_fini(&st->lend);
	it = 0;
	while (py_map_next(&st->threads, &it, &k, &v))
		free(v);
	py_map_free(&st->threads);
	it = 0;
	while (py_map_next(&st->names, &it, &k, &v)) {
		struct call_name *cn = v;

		free(cn->func);
		free(cn->file);
		free(cn);
	}
	py_map_free(&st->names);
	py_map_free(&st->siblings);
	free(st->excs);
	py_agg_free(st->agg);
	free(st->text);
	free(st->evbuf);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "python",
	.kind = NT_KIND_PROBE,
	.description = "CPython stack sampler (3.10-3.13): flame graphs, per-function "
		       "table, USDT call tracing, exceptions",
	.version = "1.0",
	.config = py_config,
	.n_config = NT_ARRAY_LEN(py_config),
	.config_size = sizeof(struct py_cfg),
	.init = py_init,
	.attach = py_attach,
	.poll = py_poll,
	.detach = py_detach,
	.quiesce = py_quiesce,
	.fini = py_fini,
	.consume = py_consume,
	.flush = py_flush,
};
