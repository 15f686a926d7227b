/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: choosing tp_btf or raw_tp programs for tracepoints.
 *
 * A probe that attaches to kernel tracepoints ships each program twice,
 * SEC("tp_btf/NAME") (typed arguments, cheapest) and SEC("raw_tp/NAME")
 * (works without kernel BTF), and loads one flavour, as libbpf-tools do:
 * probe whether a BTF tracing program loads and attaches on this kernel,
 * then bpf_program__set_autoload() the chosen flavour on and the other off,
 * before load.
 *
 * The kernel's BTF (a few MB to parse) is parsed once per daemon run:
 * nt_vmlinux_get takes the daemon's shared parse through
 * btf__load_vmlinux_btf (core/btfshare.c), which is freed once every BPF
 * object is loaded, so call it around load, not later (host->vmlinux_btf
 * would keep it, 5 MB, for the whole run); outside the daemon it parses
 * for the caller alone. Lookups use that handle, never
 * libbpf_find_vmlinux_btf_id() (which parses the whole BTF again on every
 * call).
 *
 *   struct nt_vmlinux vm;
 *   struct nt_tp_prog progs[] = {
 *       { .tp = "sched_switch", .btf = skel->progs.switch_btf,
 *         .raw = skel->progs.switch_raw },
 *       { .tp = "sched_process_exit", .btf = skel->progs.exit_btf,
 *         .raw = skel->progs.exit_raw, .optional = true },
 *   };
 *   nt_vmlinux_get(host, inst, &vm);
 *   int flavour = nt_tp_choose(host, inst, vm.btf, NT_TP_AUTO, progs, 2);
 *   nt_vmlinux_put(&vm);
 *   if (flavour < 0) return flavour;      // logged: what is missing
 *   err = x_bpf__load(skel);              // then attach each progs[i].loaded
 *
 * A program pointer may be NULL where a probe has only one flavour (a
 * tracepoint whose arguments need BTF): that tracepoint is then off (or the
 * choice fails, when it is not optional) with the other flavour.
 */
#ifndef NTCORE_KIT_TP_H
#define NTCORE_KIT_TP_H

#include <stdbool.h>
#include <stddef.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "../plugin.h"

enum nt_tp_flavour {
	NT_TP_RAW = 0, /* raw_tp/: untyped u64 arguments, no BTF needed */
	NT_TP_BTF = 1, /* tp_btf/: typed arguments, needs kernel BTF */
};

enum nt_tp_mode {
	NT_TP_AUTO = 0,   /* tp_btf where it works, else raw_tp */
	NT_TP_ONLY_BTF,   /* tp_btf or fail */
	NT_TP_ONLY_RAW,   /* raw_tp */
};

/* "auto", "tp_btf", "raw_tp" (a config key's choices) to a mode; -EINVAL
 * for anything else. */
int nt_tp_mode_parse(const char *text);
static inline const char *nt_tp_flavour_name(int flavour)
{
	return flavour == NT_TP_BTF ? "tp_btf" : "raw_tp";
}

/* One tracepoint of a BPF object and its program in each flavour. */
struct nt_tp_prog {
	const char *tp;          /* "sched_switch" */
	const char *group;       /* "sched", or NULL: see nt_tp_apply */
	struct bpf_program *btf; /* its tp_btf/ program, or NULL */
	struct bpf_program *raw; /* its raw_tp/ program, or NULL */
	bool optional;           /* a kernel without it: this one is off */
	bool skip;               /* in: off by config (neither is loaded) */
	bool loaded;             /* out: a program of it will be loaded */
};

/* The kernel's BTF for lookups (`owned`, let go by nt_vmlinux_put: under
 * the daemon that only drops this use of the shared parse). btf is NULL
 * on a kernel without BTF. */
struct nt_vmlinux {
	const struct btf *btf;
	struct btf *owned;
};
void nt_vmlinux_get(const struct nt_host *host, struct nt_instance *inst,
		    struct nt_vmlinux *vm);
void nt_vmlinux_put(struct nt_vmlinux *vm);

/* Whether the kernel has tracepoint `tp`: its btf_trace_<tp> typedef is in
 * the BTF (false without BTF). */
bool nt_tp_exists(const struct btf *vmlinux, const char *tp);
/* Whether a tp_btf program loads and attaches on tracepoint `tp` here (a
 * no-op program, attached and detached at once; needs CAP_BPF). */
bool nt_tp_btf_works(const struct btf *vmlinux, const char *tp);

/*
 * The flavour for `mode`: NT_TP_AUTO probes with the first tracepoint of
 * progs that has a tp_btf program and exists. Returns the flavour, or
 * -ENOTSUP for NT_TP_ONLY_BTF on a kernel where tp_btf does not work.
 */
int nt_tp_flavour(const struct btf *vmlinux, enum nt_tp_mode mode,
		  const struct nt_tp_prog *progs, size_t n);
/*
 * Set autoload on every program for `flavour` and fill each `loaded`: a
 * skipped tracepoint, or an optional one the kernel lacks or that has no
 * program of this flavour, is off (the latter two logged as warnings).
 * Existence is known from the BTF; without BTF, from tracefs
 * (events/GROUP/TP) for a tracepoint that names its group; otherwise it is
 * assumed present (attach then says what is missing). Returns 0, or
 * -ENOENT after logging every required tracepoint that cannot be loaded.
 */
int nt_tp_apply(const struct nt_host *host, struct nt_instance *inst,
		const struct btf *vmlinux, int flavour,
		struct nt_tp_prog *progs, size_t n);
/* nt_tp_flavour, then nt_tp_apply: the flavour, or a negative errno
 * (logged). */
int nt_tp_choose(const struct nt_host *host, struct nt_instance *inst,
		 const struct btf *vmlinux, enum nt_tp_mode mode,
		 struct nt_tp_prog *progs, size_t n);

#endif /* NTCORE_KIT_TP_H */
