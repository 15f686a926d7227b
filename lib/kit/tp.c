/* SPDX-License-Identifier: MIT */
/* Plugin kit: the tp_btf / raw_tp choice, on the kernel BTF shared through
 * the host. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "ntcore/kit/log.h"
#include "ntcore/kit/tp.h"

int nt_tp_mode_parse(const char *text)
{
	if (!strcmp(text, "auto"))
		return NT_TP_AUTO;
	if (!strcmp(text, "tp_btf"))
		return NT_TP_ONLY_BTF;
	if (!strcmp(text, "raw_tp"))
		return NT_TP_ONLY_RAW;
	return -EINVAL;
}

void nt_vmlinux_get(const struct nt_host *host, struct nt_instance *inst,
		    struct nt_vmlinux *vm)
{
	/* Not host->vmlinux_btf: that pins the parse (5 MB) for the whole run.
	 * Under the daemon btf__load_vmlinux_btf is the run's one shared parse
	 * (core/btfshare.c), freed once every object is loaded; elsewhere it
	 * parses for this caller alone. */
	(void)host;
	(void)inst;
	*vm = (struct nt_vmlinux){0};
	vm->owned = btf__load_vmlinux_btf(); /* NULL without kernel BTF */
	vm->btf = vm->owned;
}

void nt_vmlinux_put(struct nt_vmlinux *vm)
{
	btf__free(vm->owned);
	*vm = (struct nt_vmlinux){0};
}

/* The BTF id of the tracepoint's btf_trace_<tp> typedef: what a tp_btf
 * program's attach_btf_id is (libbpf looks it up the same way). */
static int tp_btf_id(const struct btf *vmlinux, const char *tp)
{
	char name[192];
	int n;

	if (!vmlinux)
		return -ENOENT;
	n = snprintf(name, sizeof(name), "btf_trace_%s", tp);
	if (n < 0 || (size_t)n >= sizeof(name))
		return -ENAMETOOLONG;
	return btf__find_by_name_kind(vmlinux, name, BTF_KIND_TYPEDEF);
}

bool nt_tp_exists(const struct btf *vmlinux, const char *tp)
{
	return tp_btf_id(vmlinux, tp) > 0;
}

bool nt_tp_btf_works(const struct btf *vmlinux, const char *tp)
{
	/* r0 = 0; exit */
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	int id = tp_btf_id(vmlinux, tp), prog, link;

	if (id <= 0)
		return false;
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = BPF_TRACE_RAW_TP,
		    .attach_btf_id = (__u32)id);
	prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), &opts);
	if (prog < 0)
		return false;
	link = bpf_raw_tracepoint_open(NULL, prog);
	close(prog);
	if (link < 0)
		return false;
	close(link);
	return true;
}

int nt_tp_flavour(const struct btf *vmlinux, enum nt_tp_mode mode,
		  const struct nt_tp_prog *progs, size_t n)
{
	const char *probe = NULL;

	if (mode == NT_TP_ONLY_RAW)
		return NT_TP_RAW;
	for (size_t i = 0; i < n && !probe; i++)
		if (progs[i].btf && !progs[i].skip &&
		    nt_tp_exists(vmlinux, progs[i].tp))
			probe = progs[i].tp;
	if (probe && nt_tp_btf_works(vmlinux, probe))
		return NT_TP_BTF;
	return mode == NT_TP_ONLY_BTF ? -ENOTSUP : NT_TP_RAW;
}

/* Without BTF: whether tracefs lists events/GROUP/TP; true when no tracefs
 * can be read (nothing is known, so attach will tell). */
static bool tp_in_tracefs(const char *group, const char *tp)
{
	static const char *const roots[] = {"/sys/kernel/tracing",
					    "/sys/kernel/debug/tracing"};
	char path[256];

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (access(path, X_OK) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/events/%s/%s", roots[i], group, tp);
		return access(path, F_OK) == 0;
	}
	return true;
}

static bool tp_present(const struct btf *vmlinux, const struct nt_tp_prog *p)
{
	if (vmlinux)
		return nt_tp_exists(vmlinux, p->tp);
	return !p->group || tp_in_tracefs(p->group, p->tp);
}

/* Why a tracepoint that is wanted cannot be loaded in this flavour. */
static void report_off(const struct nt_host *host, struct nt_instance *inst,
		       const struct nt_tp_prog *p, bool exists, int flavour)
{
	int level = p->optional ? NT_LOG_WARN : NT_LOG_ERROR;
	const char *then = p->optional ? "; that part is off" : "";

	if (!exists)
		nt_kit_log(host, inst, level, "this kernel has no tracepoint %s%s",
			   p->tp, then);
	else
		nt_kit_log(host, inst, level, "tracepoint %s needs %s, not %s%s",
			   p->tp, nt_tp_flavour_name(!flavour),
			   nt_tp_flavour_name(flavour), then);
}

int nt_tp_apply(const struct nt_host *host, struct nt_instance *inst,
		const struct btf *vmlinux, int flavour,
		struct nt_tp_prog *progs, size_t n)
{
	int err = 0;

	for (size_t i = 0; i < n; i++) {
		struct nt_tp_prog *p = &progs[i];
		struct bpf_program *use = flavour == NT_TP_BTF ? p->btf : p->raw;
		struct bpf_program *other = flavour == NT_TP_BTF ? p->raw : p->btf;
		bool exists = !p->skip && tp_present(vmlinux, p);

		p->loaded = !p->skip && use && exists;
		if (use)
			bpf_program__set_autoload(use, p->loaded);
		if (other)
			bpf_program__set_autoload(other, false);
		if (p->skip || p->loaded)
			continue;
		report_off(host, inst, p, exists, flavour);
		if (!p->optional && !err)
			err = -ENOENT;
	}
	return err;
}

int nt_tp_choose(const struct nt_host *host, struct nt_instance *inst,
		 const struct btf *vmlinux, enum nt_tp_mode mode,
		 struct nt_tp_prog *progs, size_t n)
{
	int flavour = nt_tp_flavour(vmlinux, mode, progs, n), err;

	if (flavour < 0) {
		nt_kit_log(host, inst, NT_LOG_ERROR,
			   "tp_btf programs cannot load here (%s); use raw_tp",
			   vmlinux ? "no BTF tracing support or no privilege"
				   : "no kernel BTF");
		return flavour;
	}
	err = nt_tp_apply(host, inst, vmlinux, flavour, progs, n);
	if (err)
		return err;
	nt_kit_log(host, inst, NT_LOG_DEBUG, "tracepoints as %s",
		   nt_tp_flavour_name(flavour));
	return flavour;
}
