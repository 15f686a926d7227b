/* SPDX-License-Identifier: MIT */
/*
 * sched probe: attach and detach: the tracepoint flavour (the kit's
 * chooser), the object loaded and attached, the ring and timers, the
 * threads the targets already have; and all of it let go.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/plugin.h"

#include "sched_priv.h"
#include <dirent.h>
#include <bpf/btf.h>
#include <linux/bpf.h>
#include "ntcore/kit/proc.h"
#include "ntcore/kit/tp.h"
#include "sched.bpf.skel.h"

/* A thread that blocks for the whole run never passes a tracepoint; enter
 * the threads the targets already have (-p PID) so that they are counted
 * from the start: off-CPU time accrues from now, runtime from its current
 * value. Host-wide, threads are entered as they are seen. */
static void seed_targets(struct sched_state *st, uint64_t now)
{
	int fd = bpf_map__fd(st->skel->maps.threads);
	uint32_t pids[256];
	size_t n = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));
	unsigned seeded = 0;

	if (n > NT_ARRAY_LEN(pids))
		n = NT_ARRAY_LEN(pids);
	for (size_t i = 0; i < n; i++) {
		char path[64];
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%u/task", pids[i]);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			struct sched_tstat s;
			__u32 tid;

			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			tid = (__u32)strtoul(de->d_name, NULL, 10);
			memset(&s, 0, sizeof(s));
			s.tgid = pids[i];
			s.tid = tid;
			s.first_ts = now;
			s.se_last = sched_proc_runtime(pids[i], tid);
			if (nt_proc_comm(pids[i], tid, s.comm, sizeof(s.comm)) < 0)
				s.comm[0] = '\0';
			/* Already seen by a program: keep that. */
			if (bpf_map_update_elem(fd, &tid, &s, BPF_NOEXIST) == 0)
				seeded++;
		}
		closedir(d);
	}
	if (seeded)
		nt_log_dbg(st, "%u existing threads of %zu target processes entered",
			      seeded, n);
}

struct bpf_program *const *sched_progs_of(struct sched_bpf *s, bool btf,
					   struct bpf_program *out[NPROG])
{
	if (btf) {
		out[0] = s->progs.sched_switch_btf;
		out[1] = s->progs.sched_wakeup_btf;
		out[2] = s->progs.sched_wakeup_new_btf;
		out[3] = s->progs.sched_migrate_task_btf;
		out[4] = s->progs.sched_process_exit_btf;
		out[5] = s->progs.task_rename_btf;
	} else {
		out[0] = s->progs.sched_switch_raw;
		out[1] = s->progs.sched_wakeup_raw;
		out[2] = s->progs.sched_wakeup_new_raw;
		out[3] = s->progs.sched_migrate_task_raw;
		out[4] = s->progs.sched_process_exit_raw;
		out[5] = s->progs.task_rename_raw;
	}
	return out;
}

/* The six tracepoints, each with its two programs, for the kit's chooser. */
static void tp_table(struct sched_bpf *s, struct nt_tp_prog tps[NPROG])
{
	static const char *const names[NPROG] = {
		"sched_switch", "sched_wakeup", "sched_wakeup_new",
		"sched_migrate_task", "sched_process_exit", "task_rename",
	};
	struct bpf_program *btf[NPROG], *raw[NPROG];

	sched_progs_of(s, true, btf);
	sched_progs_of(s, false, raw);
	for (int i = 0; i < NPROG; i++)
		tps[i] = (struct nt_tp_prog){ .tp = names[i],
					      .group = i == 5 ? "task" : "sched",
					      .btf = btf[i], .raw = raw[i] };
}

/* Open and load the object: the flavour chosen for `mode` (tp_btf where a
 * BTF tracing program loads, the libbpf-tools way), or raw_tp when
 * raw_only. *flavour gets the one tried. */
static int load(struct sched_state *st, const struct btf *vmlinux, int mode,
		bool raw_only, int *flavour)
{
	const struct sched_cfg *c = st->cfg;
	struct nt_tp_prog tps[NPROG];
	struct sched_bpf *s;
	int err;

	s = sched_bpf__open();
	if (!s)
		return -errno ? -errno : -ENOMEM;
	tp_table(s, tps);
	*flavour = raw_only ? NT_TP_RAW : nt_tp_flavour(vmlinux, mode, tps, NPROG);
	err = *flavour < 0 ? *flavour
			   : nt_tp_apply(st->host, st->inst, vmlinux, *flavour, tps, NPROG);
	if (err) {
		sched_bpf__destroy(s);
		return err;
	}
	s->rodata->switch_type = (__u32)st->t_switch;
	s->rodata->switch_events = c->switch_events;
	s->rodata->hist_global = !strcmp(c->runq_hist, "global");
	s->rodata->wake_bytes = (__u64)c->ringbuf_kb * 1024 / 16;
	bpf_map__set_max_entries(s->maps.threads, (__u32)c->max_threads);
	bpf_map__set_max_entries(s->maps.hists, (__u32)c->max_processes + 1);
	bpf_map__set_max_entries(s->maps.events, (__u32)c->ringbuf_kb * 1024);
	err = nt_bpf_use_targets(st->host, st->inst, s->maps.nt_targets,
				 &s->rodata->nt_filter_on);
	if (!err)
		err = sched_bpf__load(s);
	if (err) {
		sched_bpf__destroy(s);
		return err;
	}
	/* "other" exists from the start: when the table is full, samples
	 * fold into it instead of being lost */
	__u32 other = 0;
	static const struct sched_hist empty;
	bpf_map_update_elem(bpf_map__fd(s->maps.hists), &other, &empty, BPF_NOEXIST);
	st->skel = s;
	st->btf = *flavour == NT_TP_BTF;
	return 0;
}

/* Load with the configured flavour; in auto mode a tp_btf object that
 * fails to load is reopened as raw_tp. The BTF is libbpf's parse, which
 * the daemon shares between loads and frees once all are loaded
 * (core/btfshare.c); host->vmlinux_btf would pin it (13 MB) for the run. */
static int load_any(struct sched_state *st)
{
	int mode = nt_tp_mode_parse(st->cfg->attach), flavour = NT_TP_RAW, err;
	struct btf *vmlinux = btf__load_vmlinux_btf();

	err = load(st, vmlinux, mode, false, &flavour);
	if (err && flavour == NT_TP_BTF && mode == NT_TP_AUTO) {
		nt_log_warn(st, "tp_btf programs failed to load (%s); using raw_tp",
			    strerror(-err));
		err = load(st, vmlinux, mode, true, &flavour);
	}
	btf__free(vmlinux);
	if (err)
		nt_log_err(st, "cannot load BPF (%s): %s",
			   nt_tp_flavour_name(flavour), strerror(-err));
	return err;
}

int sched_attach(void *state)
{
	struct sched_state *st = state;
	const struct sched_cfg *c = st->cfg;
	const struct nt_host *h = st->host;
	struct bpf_program *use[NPROG];
	int err;

	err = load_any(st);
	if (err)
		return err;
	sched_progs_of(st->skel, st->btf, use);
	for (int i = 0; i < NPROG; i++) {
		st->links[i] = bpf_program__attach(use[i]);
		if (!st->links[i]) {
			err = -errno ? -errno : -EINVAL;
			nt_log_err(st, "cannot attach %s: %s",
			       bpf_program__name(use[i]), strerror(-err));
			goto fail;
		}
	}
	err = nt_ring_open(h, st->inst, st->skel->maps.events, sched_on_ring, st,
			   TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, (uint64_t)c->interval_ms, TOK_TICK);
	if (!err && c->report_interval_s)
		err = h->add_timer(st->inst, (uint64_t)c->report_interval_s * 1000,
				   TOK_REPORT);
	if (err) {
		nt_log_err(st, "cannot add timers: %s",
		       strerror(-err));
		goto fail;
	}
	st->start_ns = nt_clock_mono_ns();
	seed_targets(st, st->start_ns);
	nt_log_info(st, "attached (%s) to sched_switch, sched_wakeup, sched_wakeup_new, sched_migrate_task, sched_process_exit, task_rename",
	       st->btf ? "tp_btf" : "raw_tp");
	return 0;
fail:
	sched_detach(st);
	return err;
}

/* The ring, the links, then the object (sched_fini and a failed attach). */
void sched_detach(void *state)
{
	struct sched_state *st = state;

	nt_ring_free(st->rb);
	st->rb = NULL;
	for (int i = 0; i < NPROG; i++) {
		bpf_link__destroy(st->links[i]);
		st->links[i] = NULL;
	}
	sched_bpf__destroy(st->skel);
	st->skel = NULL;
}
