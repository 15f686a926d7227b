/* SPDX-License-Identifier: MIT */
/*
 * io probe: attach. The block tracepoints as tp_btf programs (their
 * arguments need BTF; there is no raw_tp flavour), chosen with the kit on
 * the kernel BTF the daemon shares; the BPF object's settings from the
 * config; load, the device filter, attach, the ring and the timer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/bpfset.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/tp.h"

#include "io.bpf.skel.h"
#include "io_int.h"

/* Which programs load: block_rq_issue and block_rq_complete are needed;
 * the others refine attribution and are off where the kernel lacks them. */
static int choose_programs(struct io_state *st)
{
	struct io_bpf *s = st->skel;
	struct nt_tp_prog progs[] = {
		{ .tp = "block_rq_issue", .btf = s->progs.io_issue },
		{ .tp = "block_rq_complete", .btf = s->progs.io_complete },
		{ .tp = "block_io_start", .btf = s->progs.io_start,
		  .optional = true },
		{ .tp = "block_rq_insert", .btf = s->progs.io_insert,
		  .optional = true },
		{ .tp = "block_rq_requeue", .btf = s->progs.io_requeue,
		  .optional = true },
	};
	struct nt_vmlinux vm;
	int err;

	nt_vmlinux_get(st->host, st->inst, &vm);
	if (!vm.btf) {
		nt_log_err(st, "no kernel BTF (/sys/kernel/btf/vmlinux): io "
			       "cannot run");
		return -ENOTSUP;
	}
	err = nt_tp_apply(st->host, st->inst, vm.btf, NT_TP_BTF, progs,
			  NT_ARRAY_LEN(progs));
	nt_vmlinux_put(&vm);
	if (err) {
		nt_log_err(st, "no block_rq_issue/complete tracepoints: io "
			       "cannot run");
		return -ENOTSUP;
	}
	/* Before 6.5: the inserting / issuing task stands in for the
	 * submitter, which is right for direct I/O without a scheduler and
	 * often a kworker otherwise. */
	if (!progs[2].loaded)
		nt_log_warn(st, "kernel lacks block_io_start (Linux 6.5+): "
				"requests are attributed to the task that "
				"inserts or issues them");
	return 0;
}

static void set_rodata(struct io_state *st)
{
	const struct io_cfg *cfg = st->cfg;
	struct io_bpf *s = st->skel;

	s->rodata->ev_slow_type = (uint32_t)st->ev_slow;
	s->rodata->ev_request_type =
		cfg->request_events ? (uint32_t)st->ev_request : 0;
	s->rodata->slow_ns = (uint64_t)(cfg->slow_threshold_ms * 1e6);
	s->rodata->slow_events = cfg->slow_events;
	s->rodata->small_bytes = (uint32_t)cfg->small_bytes;
	s->rodata->dev_filter_on = st->n_devs > 0;
}

static int load_and_attach(struct io_state *st)
{
	int err = io_bpf__load(st->skel);

	if (err) {
		nt_log_err(st, "cannot load the BPF programs: %s", strerror(-err));
		return err;
	}
	err = nt_bpf_set_fill(bpf_map__fd(st->skel->maps.devs), st->devs,
			      sizeof(st->devs[0]), st->n_devs);
	if (err) {
		nt_log_err(st, "cannot fill the device filter: %s", strerror(-err));
		return err;
	}
	err = io_bpf__attach(st->skel);
	if (err)
		nt_log_err(st, "cannot attach the tracepoints: %s",
			   strerror(-err));
	return err;
}

static void log_tracing(struct io_state *st)
{
	char list[256] = "all devices";
	size_t pos = 0;

	for (size_t i = 0; i < st->n_devs && pos < sizeof(list) - 40; i++)
		pos += (size_t)snprintf(list + pos, sizeof(list) - pos,
					"%s%s (%u:%u)", i ? ", " : "",
					io_dev_cached_name(st, st->devs[i]),
					IO_DEV_MAJOR(st->devs[i]),
					IO_DEV_MINOR(st->devs[i]));
	nt_log_info(st, "tracing block requests on %s%s, slow >= %.3g ms", list,
		    st->skel->rodata->nt_filter_on ? " issued by the targets" : "",
		    st->cfg->slow_threshold_ms);
}

int io_attach(void *state)
{
	struct io_state *st = state;
	const struct nt_host *h = st->host;
	int err;

	st->ncpu = libbpf_num_possible_cpus();
	if (st->ncpu <= 0)
		return -EINVAL;
	st->skel = io_bpf__open();
	if (!st->skel) {
		err = -errno;
		nt_log_err(st, "cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	err = choose_programs(st);
	if (err)
		goto fail;
	set_rodata(st);
	err = nt_bpf_use_targets(h, st->inst, st->skel->maps.nt_targets,
				 &st->skel->rodata->nt_filter_on);
	if (!err)
		err = load_and_attach(st);
	if (!err)
		err = nt_ring_open(h, st->inst, st->skel->maps.events,
				   io_on_record, st, IO_TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, (uint64_t)st->cfg->interval_ms,
			   IO_TOK_TIMER);
	if (err) {
		nt_log_err(st, "cannot register with the loop: %s", strerror(-err));
		goto fail;
	}
	st->last_report_ms = nt_clock_mono_ns() / NT_NS_PER_MS;
	st->final_done = false;
	log_tracing(st);
	return 0;
fail:
	io_detach(st);
	return err < 0 ? err : -EINVAL;
}
