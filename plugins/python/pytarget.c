/* SPDX-License-Identifier: MIT */
/*
 * python probe: which processes are CPython and what becomes of them.
 * A process seen (target list, host-wide scan, exec or an unknown pid in
 * a sample) is inspected until pyproc.c finds its interpreter and layout;
 * then it is registered with the BPF sampler (map py_procs) with its USDT
 * and exception probes, or refused with a python.process event saying
 * why. At its exit its last stacks are published and it is forgotten.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/kit/proc.h"
#include "pyplugin.h"

/* The process's name from /proc/PID/comm; kept when it cannot be read
 * (the process is gone: its events still carry the name it had). */
void read_comm(struct pyp *p)
{
	char name[NT_COMM_LEN + 2];

	if (nt_proc_comm(p->pid, 0, name, sizeof(name)) < 0)
		return;
	memset(p->comm, 0, sizeof(p->comm));
	memcpy(p->comm, name, strnlen(name, NT_COMM_LEN));
}

struct pyp *proc_get(struct py_plugin *st, uint32_t pid, bool create)
{
	struct pyp *p = py_map_get(&st->procs, pid);

	if (p || !create || py_map_count(&st->procs) >= MAX_PROCS)
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

void proc_unlink(struct py_plugin *st, struct pyp *p)
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
	struct py_map_it it = { 0 };
	uint64_t k;
	void *v;

	while (py_map_next(&p->codes, &it, &k, &v)) {
		py_code_free(&((struct code_ent *)v)->c);
		free(v);
	}
	py_map_free(&p->codes);
	it = (struct py_map_it){ 0 };
	while (py_map_next(&p->types, &it, &k, &v))
		free(v);
	py_map_free(&p->types);
	it = (struct py_map_it){ 0 };
	while (py_map_next(&p->fnpub, &it, &k, &v))
		free(v);
	py_map_free(&p->fnpub);
	p->code_type = 0;
}

void proc_free(struct py_plugin *st, struct pyp *p)
{
	proc_unlink(st, p);
	proc_clear_caches(p);
	free(p);
}

static void metric_procs(struct py_plugin *st)
{
	struct py_map_it it = { 0 };
	uint32_t n = 0;
	uint64_t k;
	void *v;

	while (py_map_next(&st->procs, &it, &k, &v))
		n += ((struct pyp *)v)->status == PS_ATTACHED;
	st->host->metric_set(st->m[M_PROCS], NULL, n);
}

static void attach_extras(struct py_plugin *st, struct pyp *p)
{
	char path[PATH_MAX + 64];
	char msg[PATH_MAX + 256];

	snprintf(path, sizeof(path), "/proc/%u/root%s", p->pid, p->found.object);
	if (st->cfg->calls) {
		if (!p->found.has_usdt) {
			snprintf(msg, sizeof(msg),
				 "call tracing is off for pid %u: %s was built without "
				 "USDT markers (no python:function__entry note; CPython's "
				 "--with-dtrace)", p->pid, p->found.object);
			nt_log_warn(st, "%s", msg);
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
				nt_log_warn(st, "pid %u: cannot attach the USDT markers of %s: %s; "
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
			nt_log_warn(st, "pid %u: cannot attach to PyTraceBack_Here in %s: %s; "
			       "exceptions are not counted for it", p->pid,
			       p->found.object, strerror(errno));
	}
}

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
	nt_log_dbg(st, "pid %u belongs to uid %u, not ntcore's: not sampled (other_users = false)",
		      p->pid, (unsigned)uid);
	return false;
}

/* Try to make a pending process sampled. */
/* py_find failed (not yet, or not Python): when out of tries, say so
 * where it is news. */
static void not_python(struct py_plugin *st, struct pyp *p, const char *err)
{
	const struct nt_host *h = st->host;
	char self[PATH_MAX], msg[PATH_MAX + 512];

	if (++p->tries < (p->from_exec ? FIND_TRIES : 1))
		return;
	p->status = PS_NOTPY;
	/* a child of ours that has not exec'd yet (-- CMD): quiet, its exec
	 * brings it back */
	if (nt_proc_exe((uint32_t)getpid(), self, sizeof(self)) > 0 &&
	    strcmp(self, p->found.exe) == 0)
		return;
	snprintf(msg, sizeof(msg), "pid %u is not a CPython process (%s); not sampling it",
		 p->pid, err);
	/* a line only for a process the user named: the shells and tools the
	 * job runs are not news */
	nt_kit_log(h, st->inst,
		   named_target(h, st->inst, p->pid) ? NT_LOG_INFO : NT_LOG_DEBUG,
		   "%s", msg);
	if (h->target_map_fd(st->inst) >= 0)
		publish_proc(st, p, -ENOENT, msg);
}

/* Find p's interpreter and its layout, and attach the probes by path;
 * false when p is not (yet) to be verified. */
static bool find_interpreter(struct py_plugin *st, struct pyp *p)
{
	char err[PATH_MAX + 256], msg[PATH_MAX + 512];
	int ret;

	p->inspected_ns = nt_clock_mono_ns();
	ret = py_find((pid_t)p->pid, &p->found, err, sizeof(err));
	if (ret == -ESRCH) {
		p->status = PS_NOTPY;
		return false;
	}
	if (ret) {
		not_python(st, p, err);
		return false;
	}
	ret = py_resolve_layout((pid_t)p->pid, &p->found, &p->layout, err, sizeof(err));
	if (ret == -ESRCH) {
		p->status = PS_NOTPY;
		return false;
	}
	if (ret) {
		p->status = PS_REFUSED;
		snprintf(msg, sizeof(msg), "pid %u: %s", p->pid, err);
		nt_log_warn(st, "%s", msg);
		publish_proc(st, p, -ENOTSUP, msg);
		return false;
	}
	/* Probes by path and pid need no initialised runtime: attach them now
	 * so the first calls are seen. */
	attach_extras(st, p);
	return true;
}

/* p's interpreter checked: hand it to the BPF sampler. */
static void register_proc(struct py_plugin *st, struct pyp *p)
{
	char msg[PATH_MAX + 512];
	struct py_proc pv;

	memset(&pv, 0, sizeof(pv));
	pv.runtime = p->found.runtime;
	py_layout_to_bpf(&p->layout, &pv.off);
	if (bpf_map_update_elem(bpf_map__fd(st->skel->maps.py_procs), &p->pid, &pv,
				BPF_ANY)) {
		p->status = PS_REFUSED;
		nt_log_warn(st, "pid %u: cannot register it (%s)", p->pid, strerror(errno));
		return;
	}
	p->in_bpf = true;
	p->status = PS_ATTACHED;
	snprintf(msg, sizeof(msg),
		 "pid %u: CPython %d.%d (%s), offsets from %s; sampling at %lld Hz%s%s",
		 p->pid, p->found.major, p->found.minor, p->found.object,
		 p->layout.source, (long long)st->cfg->frequency,
		 p->l_entry ? ", call tracing" : "", p->l_exc ? ", exceptions" : "");
	nt_log_info(st, "%s", msg);
	publish_proc(st, p, 0, msg);
	metric_procs(st);
	seed_idle(st, p);
}

void proc_inspect(struct py_plugin *st, struct pyp *p)
{
	char err[PATH_MAX + 256], msg[PATH_MAX + 512];
	int ret;

	if (p->status != PS_PENDING)
		return;
	if (!p->found.runtime && !proc_allowed(st, p)) {
		p->status = PS_OTHER_USER;
		return;
	}
	if (!p->found.runtime && !find_interpreter(st, p))
		return;
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
		nt_log_warn(st, "%s", msg);
		publish_proc(st, p, -EPROTO, msg);
		return;
	}
	register_proc(st, p);
}

/* A process exec'd (at ts) or was seen unregistered: (re)start its
 * inspection. An exec older than the last inspection was already seen
 * there (the target poll can run before the exec record is read). */
void proc_seen(struct py_plugin *st, uint32_t pid, bool exec, uint64_t ts)
{
	struct pyp *p = proc_get(st, pid, false);

	if (p && (!exec || ts < p->inspected_ns))
		return;
	if (p)
		nt_log_dbg(st, "pid %u exec'd (was %s): inspecting again",
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

void proc_gone(struct py_plugin *st, uint32_t pid)
{
	struct pyp *p = proc_get(st, pid, false);
	struct py_map_it it = { 0 };
	uint64_t k;
	void *v;

	if (!p)
		return;
	if (p->status == PS_ATTACHED && st->rb) {
		uint64_t all = 0;
		struct py_func_row row;

		nt_ring_consume(st->rb);
		publish_all(st, pid);
		py_agg_top(st->agg, pid, 1, &row, &all);
		/* No line for a Python that never ran long enough to be
		 * sampled (a helper the job started). */
		nt_kit_log(st->host, st->inst, all ? NT_LOG_INFO : NT_LOG_DEBUG,
			      "pid %u exited: %llu samples kept; %llu frames could not be "
			      "named (the process was gone before their code was read)",
			      pid, (unsigned long long)all,
			      (unsigned long long)p->unresolved);
		if (p->join_how[0] + p->join_how[1] + p->join_how[2] + p->join_how[3])
			nt_log_info(st, "pid %u: CUDA launches joined with the launching thread's "
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
			free(py_map_it_del(&it));
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

void poll_targets(struct py_plugin *st)
{
	uint32_t pids[1024];
	size_t n = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));

	if (n > NT_ARRAY_LEN(pids))
		n = NT_ARRAY_LEN(pids);
	for (size_t i = 0; i < n; i++)
		if (!proc_get(st, pids[i], false))
			proc_seen(st, pids[i], false, 0);
}

void scan_host(struct py_plugin *st)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char exe[PATH_MAX];
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || pid == (unsigned long)getpid())
			continue;
		if (nt_proc_exe((uint32_t)pid, exe, sizeof(exe)) <= 0)
			continue;
		if (py_is_python_name(exe))
			proc_seen(st, (uint32_t)pid, false, 0);
	}
	closedir(d);
}
