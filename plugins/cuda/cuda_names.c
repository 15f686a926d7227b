/* SPDX-License-Identifier: MIT */
/* Kernel names: demangled, learned at attach or from a launch, read from
 * the target's memory where nothing else named the kernel. */
#include "cuda_decode_priv.h"

#include <string.h>

/* From the C++ runtime (libstdc++), callable from C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

/* ------------------------------------------------------------------ */
/* Kernel names                                                        */
/* ------------------------------------------------------------------ */

char *nt_cuda_demangle(const char *mangled)
{
	int status = -1;
	char *d;

	if (!mangled || mangled[0] != '_' || mangled[1] != 'Z')
		return NULL;
	d = __cxa_demangle(mangled, NULL, NULL, &status);
	if (status != 0) {
		free(d);
		return NULL;
	}
	return d;
}

/* A driver handle's name became known: say how, and let the offset learner
 * look for it in the handle's struct (cuda_kname.h). */
static void kname_known(struct nt_cuda_state *st, struct nt_cuda_proc *p,
			uint64_t handle, const char *name, int method)
{
	nt_cuda_kn_set_method(&p->kn, handle, method);
	if (st->mem)
		nt_cuda_koff_teach(&st->koff, st->mem, st->mem_arg, p->pid,
				   handle, name);
}

int nt_cuda_learn_kname(struct nt_cuda_state *st,
			const struct nt_cuda_raw_kname *k, size_t size)
{
	struct nt_cuda_proc *p;
	char *name;

	if (size < NT_CUDA_RAW_KNAME_FIXED || k->name_len > NT_CUDA_KNAME_MAX ||
	    size < NT_CUDA_RAW_KNAME_FIXED + (size_t)k->name_len)
		return -EINVAL;
	if (k->ret != 0 || !k->handle)
		return 0;
	p = nt_cuda_proc_get(st, k->hdr.pid);
	if (!p)
		return -ENOMEM;
	if (k->api == NT_CUDA_API_cuKernelGetFunction) {
		/* the function inherits its kernel's name */
		const char *kn = nt_cuda_smap_get(&p->knames, k->parent);

		if (!kn)
			return 0;
		kname_known(st, p, k->handle, kn, NT_KNAME_LOAD);
		return nt_cuda_smap_put(&p->knames, k->handle, strdup(kn));
	}
	if (!k->name_len)
		return 0;
	name = strndup(k->name, k->name_len);
	if (!name)
		return -ENOMEM;
	kname_known(st, p, k->handle, name, NT_KNAME_LOAD);
	{
		char *d = nt_cuda_demangle(name);

		if (d) {
			free(name);
			name = d;
		}
	}
	return nt_cuda_smap_put(&p->knames, k->handle, name);
}

static const char *kernel_name_from_memory(struct nt_cuda_state *st,
					   struct nt_cuda_proc *p, int layer,
					   uint64_t func);

const char *nt_cuda_kernel_name(struct nt_cuda_state *st, uint32_t pid,
				int layer, uint64_t func)
{
	struct nt_cuda_proc *p = nt_cuda_proc_get(st, pid);
	const char *n;

	if (!p)
		return "";
	n = nt_cuda_smap_get(&p->knames, func);
	if (n)
		return n;
	if (layer == NT_CUDA_LAYER_RUNTIME && st->sym) {
		struct nt_symbol sym = {0};

		if (st->sym(st->sym_arg, pid, func, &sym) >= 0 && sym.name &&
		    sym.name[0]) {
			char *c = strdup(sym.name);

			nt_cuda_kn_set_method(&p->kn, func, NT_KNAME_SYMBOL);
			if (c && nt_cuda_smap_put(&p->knames, func, c) == 0)
				return nt_cuda_smap_get(&p->knames, func);
		}
	}
	return kernel_name_from_memory(st, p, layer, func);
}

/* Attach-time name of a handle made before the attach: read from the
 * driver's struct at the learned offset ("" until one is learned). A
 * driver handle that cannot be named so is remembered as "" (the timer
 * asks for every unnamed counter's name each tick); a runtime func is not,
 * its symbol may be found once the core rereads the memory map. */
static const char *kernel_name_from_memory(struct nt_cuda_state *st,
					   struct nt_cuda_proc *p, int layer,
					   uint64_t func)
{
	char *name;

	if (!st->mem || st->koff.offset < 0)
		return "";
	name = nt_cuda_koff_name(&st->koff, st->mem, st->mem_arg, p->pid, func);
	if (!name) {
		if (layer == NT_CUDA_LAYER_DRIVER)
			nt_cuda_smap_put(&p->knames, func, strdup(""));
		return "";
	}
	nt_cuda_kn_set_method(&p->kn, func, NT_KNAME_MEMORY);
	if (nt_cuda_smap_put(&p->knames, func, name) != 0)
		return "";
	return nt_cuda_smap_get(&p->knames, func);
}

const char *nt_cuda_launch_name(struct nt_cuda_state *st,
				const struct nt_cuda_raw_launch *rl)
{
	struct nt_cuda_proc *p = nt_cuda_proc_get(st, rl->hdr.pid);
	const char *name;

	if (!p)
		return "";
	if (rl->layer == NT_CUDA_LAYER_DRIVER) {
		/* any driver launch of the thread takes the runtime launch
		 * before it (a later one must not be joined to it) */
		uint64_t rt = nt_cuda_kn_join_driver(&p->kn, rl->hdr.tid,
						     rl->hdr.ts_ns);
		const char *rn = rt ? nt_cuda_smap_get(&p->knames, rt) : NULL;
		const char *have = nt_cuda_smap_get(&p->knames, rl->func);

		if (rn && rn[0] && (!have || !have[0])) {
			kname_known(st, p, rl->func, rn, NT_KNAME_JOIN);
			nt_cuda_smap_put(&p->knames, rl->func, strdup(rn));
		}
	}
	if (rl->layer == NT_CUDA_LAYER_DRIVER && st->mem && st->koff.offset < 0 &&
	    !nt_cuda_smap_get(&p->knames, rl->func))
		nt_cuda_koff_observe(&st->koff, st->mem, st->mem_arg, p->pid,
				     rl->func);
	name = nt_cuda_kernel_name(st, rl->hdr.pid, rl->layer, rl->func);
	if (rl->layer == NT_CUDA_LAYER_RUNTIME && name[0])
		nt_cuda_kn_note_runtime(&p->kn, rl->hdr.tid, rl->hdr.ts_ns,
					rl->func);
	return name;
}

int nt_cuda_kernel_method(struct nt_cuda_state *st, uint32_t pid,
			  uint64_t func)
{
	struct nt_cuda_proc *p = nt_cuda_proc_find(st, pid);

	return p ? nt_cuda_kn_method(&p->kn, func) : NT_KNAME_NONE;
}

