/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: opening and loading the BPF object of cuda.bpf.c
 * (best attach type first), mapping the launch fast-path slots, filling
 * the per-API capture specs, and attaching the library-discovery
 * tracepoints.
 */
#include "cuda_plugin.h"

static void set_lib_prefixes(struct cuda *c)
{
	struct cuda_bpf *s = c->skel;
	uint32_t n = 0;

	snprintf((char *)s->rodata->lib_pfx[n++], NT_CUDA_LIB_PFX_LEN, "libcudart.so");
	snprintf((char *)s->rodata->lib_pfx[n++], NT_CUDA_LIB_PFX_LEN, "libcuda.so");
	for (size_t i = 0; i < c->nfns && n < NT_CUDA_LIB_PFX_MAX; i++) {
		const char *lib = c->fns[i].library;
		char pfx[NT_CUDA_LIB_PFX_LEN];
		bool dup = false;

		if (lib[0] == '/')
			lib = strrchr(lib, '/') + 1;
		if (!strncmp(lib, "lib", 3))
			snprintf(pfx, sizeof(pfx), "%s", lib);
		else
			snprintf(pfx, sizeof(pfx), "lib%s.so", lib);
		for (uint32_t k = 0; k < n; k++)
			dup |= !strcmp((const char *)s->rodata->lib_pfx[k], pfx);
		if (!dup)
			memcpy((char *)s->rodata->lib_pfx[n++], pfx, sizeof(pfx));
	}
	s->rodata->n_lib_pfx = n;
}

static void cuda_set_multi(struct cuda_bpf *s, bool on)
{
	struct bpf_program *progs[] = {
		s->progs.call_enter, s->progs.call_return, s->progs.launch_rt,
		s->progs.launch_rt_ex, s->progs.launch_drv, s->progs.launch_drv_ex,
		s->progs.fn_enter, s->progs.fn_return,
	};

	if (!on)
		return;
	for (size_t i = 0; i < NT_ARRAY_LEN(progs); i++)
		bpf_program__set_expected_attach_type(
			progs[i], (enum bpf_attach_type)NT_BPF_TRACE_UPROBE_MULTI);
}

/* Open the BPF object and set everything that must be set before load. */
static int reopen(struct cuda *c, struct cuda_bpf **out)
{
	const struct cuda_cfg *cfg = c->cfg;
	struct cuda_bpf *s;
	int err;

	*out = NULL;
	s = cuda_bpf__open();
	if (!s) {
		err = -errno;
		nt_log_err(c, "cannot open the BPF object: %s",
			     strerror(-err));
		return err;
	}
	c->skel = s;
	s->rodata->stacks_on = cfg->stacks;
	s->rodata->launch_events = cfg->launch_events;
	s->rodata->enter_events = cfg->enter_events;
	s->rodata->stop_on_load = cfg->stop_on_load;
	s->rodata->watch_so = cfg->watch_libraries;
	s->rodata->auto_layer = c->auto_layer;
	for (size_t i = 0; i < c->nfns; i++)
		s->rodata->fn_threshold_ns[i] = c->fns[i].threshold_ns;
	set_lib_prefixes(c);
	/* a launch event per launch needs room for bursts; without them the
	 * ring carries calls and first launches only */
	bpf_map__set_max_entries(s->maps.events,
				 (uint32_t)(cfg->ringbuf_kb ? cfg->ringbuf_kb
							    : cfg->launch_events ? 8192 : 2048) * 1024);
	/* a 32nd of the ring: a wake-up per few hundred launch records */
	s->rodata->launch_wake_bytes = (uint64_t)bpf_map__max_entries(s->maps.events) / 32;
	err = nt_bpf_use_targets(c->host, c->inst, s->maps.nt_targets,
				 &s->rodata->nt_filter_on);
	if (err)
		return err;
	/* watch_so only makes sense (and costs little) with a target set */
	if (!s->rodata->nt_filter_on)
		s->rodata->watch_so = false;
	*out = s;
	return 0;
}

/* Map the launch slots (the fast path of cuda.bpf.c) and fill the specs. */
static void slots_and_specs(struct cuda *c, struct cuda_bpf *s)
{
	size_t len = sizeof(struct nt_cuda_lslot) * NT_CUDA_LSLOTS;
	long pg = sysconf(_SC_PAGESIZE);
	void *m;

	len = (len + (size_t)pg - 1) & ~((size_t)pg - 1);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
		 bpf_map__fd(s->maps.lslots), 0);
	if (m == MAP_FAILED) {
		nt_log_warn(c,
			     "cannot map the launch slots (%s): every launch takes the hash path",
			     strerror(errno));
	} else {
		c->lslots = m;
		c->lslots_len = len;
	}
	for (unsigned api = 1; api < NT_CUDA_API_COUNT; api++) {
		struct nt_cuda_spec sp;
		uint32_t k = api;

		if (nt_cuda_spec_for(api, &sp))
			bpf_map_update_elem(bpf_map__fd(s->maps.specs), &k, &sp,
					    BPF_ANY);
	}
}

/* Load attempts, best first: uprobe_multi links (6.6+; one link per
 * program and file, attach and detach in milliseconds), then one perf
 * event per probe, then without the discovery tracepoints (no vmlinux
 * BTF or bpf_loop, before 5.17: libraries are then found at start). */
int cuda_load(struct cuda *c)
{
	struct cuda_bpf *s;
	int err;

	err = reopen(c, &s);
	if (err)
		return err;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (attempt) {
			cuda_bpf__destroy(s);
			c->skel = s = NULL;
			err = reopen(c, &s);
			if (err)
				return err;
		}
		c->multi = attempt == 0;
		cuda_set_multi(s, c->multi);
		if (attempt == 2) {
			bpf_program__set_autoload(s->progs.on_exec, false);
			bpf_program__set_autoload(s->progs.on_openat_exit, false);
		}
		err = cuda_bpf__load(s);
		if (!err)
			break;
		nt_log_info(c, "BPF load attempt %d (%s) failed: %s",
			     attempt + 1,
			     attempt == 0   ? "uprobe_multi"
			     : attempt == 1 ? "perf-event uprobes"
					    : "without the exec tracepoint",
			     strerror(-err));
	}
	if (err) {
		nt_log_err(c,
			     "cannot load the BPF programs: %s (run as root, or with CAP_BPF and CAP_PERFMON)",
			     strerror(-err));
		return err;
	}
	slots_and_specs(c, s);
	return 0;
}

void cuda_attach_discovery(struct cuda *c)
{
	struct cuda_bpf *s = c->skel;

	if (bpf_program__autoload(s->progs.on_openat_exit))
		c->tp_links[0] = bpf_program__attach(s->progs.on_openat_exit);
	if (bpf_program__autoload(s->progs.on_exec))
		c->tp_links[1] = bpf_program__attach(s->progs.on_exec);
	for (size_t i = 0; i < NT_ARRAY_LEN(c->tp_links); i++)
		if (!c->tp_links[i])
			nt_log_warn(c,
				     "library discovery tracepoint %zu not attached: %s; libraries loaded later may be missed",
				     i, strerror(errno));
}
