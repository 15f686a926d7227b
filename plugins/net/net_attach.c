/* SPDX-License-Identifier: MIT */
/*
 * net probe: attach. The socket tracepoints as tp_btf programs (their
 * arguments need BTF; there is no raw_tp flavour), chosen with the kit on
 * the kernel BTF the daemon shares; the BPF object's settings from the
 * config; load, the port filter, attach, the cgroup v2 hook that sees UDP
 * sockets end, the ring and the timer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/bpfset.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/tp.h"

#include "net.bpf.skel.h"
#include "net_int.h"

/* Which programs load: the byte counts and the TCP state changes are
 * needed; the rest is optional, or off with its protocol. */
static int choose_programs(struct net_state *st)
{
	const struct net_cfg *cfg = st->cfg;
	struct net_bpf *s = st->skel;
	struct nt_tp_prog progs[] = {
		{ .tp = "sock_send_length", .btf = s->progs.net_send },
		{ .tp = "sock_recv_length", .btf = s->progs.net_recv },
		{ .tp = "inet_sock_set_state", .btf = s->progs.net_state },
		{ .tp = "sk_data_ready", .btf = s->progs.net_data_ready,
		  .optional = true, .skip = !cfg->udp },
		{ .tp = "tcp_retransmit_skb", .btf = s->progs.net_retransmit,
		  .optional = true, .skip = !cfg->tcp },
		{ .tp = "tcp_send_reset", .btf = s->progs.net_reset_sent,
		  .optional = true, .skip = !cfg->tcp },
		{ .tp = "tcp_receive_reset", .btf = s->progs.net_reset_recv,
		  .optional = true, .skip = !cfg->tcp },
	};
	struct nt_vmlinux vm;
	int err = -ENOTSUP;

	nt_vmlinux_get(st->host, st->inst, &vm);
	if (vm.btf)
		err = nt_tp_apply(st->host, st->inst, vm.btf, NT_TP_BTF, progs,
				  NT_ARRAY_LEN(progs));
	nt_vmlinux_put(&vm);
	if (err) {
		nt_log_err(st, "this kernel lacks the sock:sock_send_length / "
			       "sock_recv_length tracepoints (Linux 6.3+) or "
			       "kernel BTF (/sys/kernel/btf/vmlinux): net cannot "
			       "count bytes");
		return -ENOTSUP;
	}
	if (!cfg->udp)
		bpf_program__set_autoload(s->progs.net_sock_release, false);
	return 0;
}

static void set_rodata(struct net_state *st)
{
	const struct net_cfg *cfg = st->cfg;
	struct net_bpf *s = st->skel;

	s->rodata->ev_open_type = (uint32_t)st->ev_open;
	s->rodata->ev_close_type = (uint32_t)st->ev_close;
	s->rodata->ev_reset_type = (uint32_t)st->ev_reset;
	s->rodata->ev_fail_type = (uint32_t)st->ev_fail;
	s->rodata->want_tcp = cfg->tcp;
	s->rodata->want_udp = cfg->udp;
	s->rodata->port_filter_on = st->n_ports > 0;
	bpf_map__set_max_entries(s->maps.conns, (uint32_t)cfg->max_connections);
}

static int load_and_attach(struct net_state *st)
{
	int err = net_bpf__load(st->skel);

	if (err) {
		nt_log_err(st, "cannot load the BPF programs: %s", strerror(-err));
		return err;
	}
	err = nt_bpf_set_fill(bpf_map__fd(st->skel->maps.ports), st->ports,
			      sizeof(st->ports[0]), (size_t)st->n_ports);
	if (err) {
		nt_log_err(st, "cannot fill the port filter: %s", strerror(-err));
		return err;
	}
	err = net_bpf__attach(st->skel);
	if (err)
		nt_log_err(st, "cannot attach the tracepoints: %s",
			   strerror(-err));
	return err;
}

/* UDP sockets end without a state change: a cgroup sock_release program
 * on the cgroup v2 root sees them go. Without it, UDP flows are reported
 * when the run ends. */
static void hook_sock_release(struct net_state *st)
{
	int cg = net_cgroup2_root_fd(st), err = cg;

	if (cg >= 0) {
		st->cg_link = bpf_program__attach_cgroup(
			st->skel->progs.net_sock_release, cg);
		if (!st->cg_link)
			err = -errno;
		close(cg);
	}
	if (!st->cg_link)
		nt_log_warn(st, "cannot hook socket release on the cgroup v2 "
				"root (%s): the end of a UDP socket is not seen; "
				"UDP flows are reported when the run ends",
			    strerror(-err));
}

int net_attach(void *state)
{
	struct net_state *st = state;
	const struct nt_host *h = st->host;
	int err;

	st->skel = net_bpf__open();
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
	if (err)
		goto fail;
	if (st->cfg->udp)
		hook_sock_release(st);
	err = nt_ring_open(h, st->inst, st->skel->maps.events,
			   net_on_record, st, NET_TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, (uint64_t)st->cfg->interval_ms,
			   NET_TOK_TIMER);
	if (err) {
		nt_log_err(st, "cannot register with the loop: %s", strerror(-err));
		goto fail;
	}
	st->last_report_ms = nt_clock_mono_ns() / NT_NS_PER_MS;
	st->final_done = false;
	nt_log_info(st, "tracing%s%s%s, %s, %d port filter(s)",
		    st->cfg->tcp ? " tcp" : "", st->cfg->udp ? " udp" : "",
		    st->skel->rodata->nt_filter_on ? " of the targets"
						   : " host-wide",
		    st->cg_link ? "udp close via cgroup" : "no udp close hook",
		    st->n_ports);
	return 0;
fail:
	net_detach(st);
	return err < 0 ? err : -EINVAL;
}
