/* SPDX-License-Identifier: MIT */
/*
 * python probe: attaching and detaching. Opens and configures the BPF
 * object, loads it, opens one CPU-clock perf event per CPU for the
 * sampler, attaches the tracepoints, opens the ring and the timers; detach
 * and quiesce (ABI 1.6) release all of it.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/tp.h"
#include "pyplugin.h"

void py_detach(void *state)
{
	struct py_plugin *st = state;
	struct py_map_it it = { 0 };
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
	nt_ring_free(st->rb);
	st->rb = NULL;
	python_bpf__destroy(st->skel);
	st->skel = NULL;
}

/* Stop producing (ABI 1.6): the samplers, the USDT probes and the
 * tracepoints go, all at once; the ring and maps stay for the core's last
 * read (the perf event fds are closed at detach). */
void py_quiesce(void *state)
{
	struct py_plugin *st = state;
	struct nt_linkset ls = {0};
	struct py_map_it it = { 0 };
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

/* Open the BPF object and size and switch its parts by config. */
static int bpf_open_configured(struct py_plugin *st)
{
	const struct py_cfg *c = st->cfg;
	struct python_bpf *sk;
	/* tp_btf only (their arguments need BTF): no flavour to choose, the
	 * kit's table only switches them by config */
	struct nt_tp_prog tps[2];
	int err;

	st->skel = sk = python_bpf__open();
	if (!sk) {
		err = -errno;
		nt_log_err(st, "cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	sk->rodata->max_frames = (uint32_t)c->max_frames;
	sk->rodata->want_native = c->native;
	sk->rodata->want_idle = c->idle;
	sk->rodata->period_ns = st->period_ns;
	sk->rodata->self_pid = (uint32_t)getpid();
	sk->rodata->tp_to_pthread = tp_to_pthread_self();
	bpf_map__set_max_entries(sk->maps.py_events, (uint32_t)c->ringbuf_kb * 1024);
	bpf_map__set_max_entries(sk->maps.py_native,
				 c->native ? (uint32_t)c->native_stacks : 1);
	tps[0] = (struct nt_tp_prog){ .tp = "sched_switch", .btf = sk->progs.py_switch,
				      .skip = !c->idle };
	tps[1] = (struct nt_tp_prog){ .tp = "sched_process_exec",
				      .btf = sk->progs.py_exec };
	err = nt_tp_apply(st->host, st->inst, NULL, NT_TP_BTF, tps, NT_ARRAY_LEN(tps));
	if (err)
		return err;
	bpf_program__set_autoload(sk->progs.py_tasks, c->idle);
	bpf_program__set_autoload(sk->progs.py_func_entry, c->calls);
	bpf_program__set_autoload(sk->progs.py_func_return, c->calls);
	bpf_program__set_autoload(sk->progs.py_exc, c->exceptions);
	return nt_bpf_use_targets(st->host, st->inst, sk->maps.nt_targets,
				  &sk->rodata->nt_filter_on);
}

/* One program attached (its link in *out), or an error logged. */
static int attach_one(struct py_plugin *st, struct bpf_program *prog,
		      struct bpf_link **out, const char *what)
{
	int err;

	*out = bpf_program__attach(prog);
	if (*out)
		return 0;
	err = -errno;
	nt_log_err(st, "cannot attach %s: %s", what, strerror(-err));
	return err;
}

static int add_timers(struct py_plugin *st)
{
	const struct nt_host *h = st->host;
	int err = h->add_timer(st->inst, TICK_MS, TOK_TICK);

	if (!err)
		err = h->add_timer(st->inst, DRAIN_MS, TOK_DRAIN);
	if (!err && st->cfg->report_interval_s)
		err = h->add_timer(st->inst, (uint64_t)st->cfg->report_interval_s * 1000,
				   TOK_REPORT);
	if (err)
		nt_log_err(st, "cannot add timers: %s", strerror(-err));
	return err;
}

/* The first processes, and what is sampled. */
static void start_sampling(struct py_plugin *st)
{
	const struct py_cfg *c = st->cfg;
	bool host_wide = st->host->target_map_fd(st->inst) < 0;

	if (host_wide)
		scan_host(st);
	else
		poll_targets(st);
	if (host_wide && !c->other_users)
		nt_log_info(st, "host-wide: sampling the processes of uid %u only "
			    "(other_users = true for every user's)", (unsigned)geteuid());
	nt_log_info(st, "sampling Python stacks at %lld Hz on %d CPUs%s%s%s%s",
		    (long long)c->frequency, st->n_cpus,
		    c->idle ? ", off-CPU time too" : "", c->native ? ", native frames" : "",
		    c->calls ? ", call tracing" : "", c->exceptions ? ", exceptions" : "");
}

int py_attach(void *state)
{
	struct py_plugin *st = state;
	int err = bpf_open_configured(st);

	if (err)
		goto fail;
	err = python_bpf__load(st->skel);
	if (err) {
		nt_log_err(st, "cannot load the BPF programs: %s", strerror(-err));
		goto fail;
	}
	err = open_perf(st);
	if (err) {
		nt_log_err(st, "cannot open the CPU-clock perf events for sampling: %s",
			   strerror(-err));
		goto fail;
	}
	if (st->cfg->idle &&
	    (err = attach_one(st, st->skel->progs.py_switch, &st->l_switch, "sched_switch")))
		goto fail;
	err = attach_one(st, st->skel->progs.py_exec, &st->l_exec, "sched_process_exec");
	if (err)
		goto fail;
	err = nt_ring_open(st->host, st->inst, st->skel->maps.py_events, on_ring,
			   st, TOK_RING, &st->rb);
	if (err || (err = add_timers(st)))
		goto fail;
	start_sampling(st);
	return 0;
fail:
	py_detach(st);
	return err;
}
