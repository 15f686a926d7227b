/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the allocator uprobes: attach points resolved once per
 * library, uprobe_multi links where the kernel has them, per-function
 * links otherwise, bound to a pid or on every process.
 */
#include <linux/types.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"
#include <sys/syscall.h>
#include "mem.bpf.skel.h"

/* Resolve each configured function of a library once, logging where it
 * is probed and whether the kernel will emulate or single-step there. */
static struct mem_lib *lib_get(struct mem_state *st, const char *path)
{
	struct mem_lib *grown, *lib;
	const struct mem_config *c = st->cfg;

	for (size_t i = 0; i < st->n_libs; i++)
		if (strcmp(st->libs[i].path, path) == 0)
			return &st->libs[i];
	grown = realloc(st->libs, (st->n_libs + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	st->libs = grown;
	lib = &st->libs[st->n_libs++];
	memset(lib, 0, sizeof(*lib));
	snprintf(lib->path, sizeof(lib->path), "%s", path);

	for (unsigned fn = 0; fn < MEM_FN_COUNT; fn++) {
		struct mem_fn_point *pt = &lib->pts[lib->n_pts];
		struct mem_attach_point ap;
		struct mem_elf_func ef;
		bool dup = false;
		char hex[3 * 16 + 1] = "";
		int rc;

		if (fn == MEM_FN_MMAP || fn == MEM_FN_MUNMAP) {
			if (!c->track_mmap)
				continue;
		} else if (!(st->fn_mask & (1u << fn))) {
			continue;
		}
		rc = mem_elf_find_func(path, mem_fn_name(fn), &ef);
		if (rc) {
			nt_kit_log(st->host, st->inst, rc == -ENOENT ? NT_LOG_INFO : NT_LOG_WARN,
				      "%s: %s: %s; not probed", path, mem_fn_name(fn),
				      rc == -ENOENT ? "no such function" :
				      rc == -ENOTSUP ? "an IFUNC (resolved at run time)" :
				      strerror(-rc));
			continue;
		}
		mem_choose_attach(ef.code, ef.code_len, c->attach_skip, &ap);
		for (uint32_t i = 0; i < ef.code_len && i < 8; i++)
			snprintf(hex + 3 * i, 4, "%02x ", ef.code[i]);
		for (size_t i = 0; i < lib->n_pts; i++)
			if (lib->pts[i].off == ef.file_off + ap.skip) {
				nt_log_dbg(st, "%s: %s is an alias of %s; probed once",
					      path, mem_fn_name(fn), mem_fn_name(lib->pts[i].fn));
				dup = true;
			}
		if (dup)
			continue;
		pt->fn = fn;
		pt->off = ef.file_off + ap.skip;
		pt->ok = true;
		lib->n_pts++;
		if (ap.skip)
			nt_log_info(st, "%s: %s starts with '%s' (%s), which the kernel single-steps (~15 us a hit); probing %s+%u at '%s' (emulated)",
				      path, mem_fn_name(fn), ap.first.text, hex,
				      mem_fn_name(fn), ap.skip, ap.at.text);
		else
			nt_kit_log(st->host, st->inst,
				      ap.emulated || fn == MEM_FN_MUNMAP ? NT_LOG_INFO : NT_LOG_WARN,
				      "%s: %s starts with '%s' (%s): %s",
				      path, mem_fn_name(fn), ap.first.text, hex,
				      ap.emulated ? "emulated by the kernel (cheap uprobe)"
						  : "no emulated instruction within reach; the kernel single-steps it (~15 us a hit)");
	}
	return lib;
}


struct mem_uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__aligned_u64 path;
	__aligned_u64 offsets;
	__aligned_u64 ref_ctr_offsets;
	__aligned_u64 cookies;
	__u32 cnt;
	__u32 um_flags;
	__u32 pid;
};

/* One link for all offsets: one grace period to detach, not one each. */
static int attach_multi(struct bpf_program *prog, int pid,
				     const char *path, const uint64_t *offs,
				     const uint64_t *cookies, size_t n, bool ret)
{
	struct mem_uprobe_multi_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (__u32)bpf_program__fd(prog);
	a.attach_type = MEM_BPF_TRACE_UPROBE_MULTI;
	a.path = (__u64)(uintptr_t)path;
	a.offsets = (__u64)(uintptr_t)offs;
	a.cookies = (__u64)(uintptr_t)cookies;
	a.cnt = (__u32)n;
	a.um_flags = ret ? MEM_BPF_F_UPROBE_MULTI_RETURN : 0;
	a.pid = pid > 0 ? (__u32)pid : 0;
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
}

/* The points of a library as entry and return probe lists. */
struct heap_points {
	uint64_t eoff[MEM_FN_COUNT], ecook[MEM_FN_COUNT];
	uint64_t roff[MEM_FN_COUNT], rcook[MEM_FN_COUNT];
	size_t ne, nr;
};

/* Both programs through uprobe_multi links: 0 when attached, 1 when the
 * kernel refuses the link type (per-function links follow, and are used
 * from then on), or -errno. */
static int attach_heap_multi(struct mem_state *st, int pid, const char *path,
			     const struct heap_points *hp,
			     struct mem_link **links, size_t *n_links)
{
	int e = attach_multi(st->skel->progs.heap_enter, pid, path, hp->eoff,
			     hp->ecook, hp->ne, false);
	int r = -1, err;

	if (e >= 0 && hp->nr)
		r = attach_multi(st->skel->progs.alloc_return, pid, path, hp->roff,
				 hp->rcook, hp->nr, true);
	if (e >= 0 && (r >= 0 || !hp->nr)) {
		if (mem_links_push(links, n_links, NULL, e) ||
		    (r >= 0 && mem_links_push(links, n_links, NULL, r)))
			return -ENOMEM;
		return 0;
	}
	err = -errno;
	if (e >= 0)
		close(e);
	if (err == -ESRCH || err == -ENOENT || err == -EACCES || err == -EPERM) {
		nt_log_err(st, "cannot attach uprobes to %s (pid %d): %s", path, pid,
			   strerror(-err));
		return err;
	}
	nt_log_info(st, "uprobe_multi links refused (%s): one uprobe link per function",
		    strerror(-err));
	st->multi_ok = false;
	return 1;
}

/* One link per function: how many attached, or -ENOMEM; *err keeps the
 * last failure. */
static int attach_heap_each(struct mem_state *st, int pid, const char *path,
			    const uint64_t *offs, const uint64_t *cooks, size_t n,
			    bool ret, struct mem_link **links, size_t *n_links, int *err)
{
	struct bpf_program *prog = ret ? st->skel->progs.alloc_return
				       : st->skel->progs.heap_enter;
	int attached = 0;

	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret, .bpf_cookie = cooks[i]);
		struct bpf_link *l;

		l = bpf_program__attach_uprobe_opts(prog, pid, path, (size_t)offs[i], &o);
		if (!l) {
			*err = -errno;
			nt_log_err(st, "cannot attach %s %s:%s (pid %d): %s",
				   ret ? "uretprobe" : "uprobe", path,
				   mem_fn_name((unsigned)cooks[i]), pid, strerror(-*err));
			continue;
		}
		if (mem_links_push(links, n_links, l, -1))
			return -ENOMEM;
		attached++;
	}
	return attached;
}

int mem_heap_attach(struct mem_state *st, int pid, const char *path,
		       struct mem_link **links, size_t *n_links)
{
	struct mem_lib *lib = lib_get(st, path);
	struct heap_points hp = {0};
	int attached, rets, err = 0;

	if (!lib)
		return -ENOMEM;
	for (size_t i = 0; i < lib->n_pts; i++) {
		hp.eoff[hp.ne] = lib->pts[i].off;
		hp.ecook[hp.ne++] = lib->pts[i].fn;
		if (mem_fn_needs_return(lib->pts[i].fn)) {
			hp.roff[hp.nr] = lib->pts[i].off;
			hp.rcook[hp.nr++] = lib->pts[i].fn;
		}
	}
	if (!hp.ne)
		return -ENOENT;
	if (st->multi_ok) {
		err = attach_heap_multi(st, pid, path, &hp, links, n_links);
		if (err <= 0)
			return err;
		err = 0; /* each failure below sets it */
	}
	attached = attach_heap_each(st, pid, path, hp.eoff, hp.ecook, hp.ne, false,
				    links, n_links, &err);
	if (attached < 0)
		return attached;
	rets = attach_heap_each(st, pid, path, hp.roff, hp.rcook, hp.nr, true,
				links, n_links, &err);
	if (rets < 0)
		return rets;
	if (!attached)
		return err ? err : -ENOENT;
	return 0;
}

int mem_heap_attach_pid(struct mem_state *st, uint32_t pid)
{
	struct mem_proc_info *p = mem_proc_get(st, pid);
	int rc;

	if (!p)
		return -ENOMEM;
	if (p->heap_attached)
		return 0;
	rc = mem_resolve_libc(st, pid, p->lib, sizeof(p->lib));
	if (rc)
		return rc;
	rc = mem_heap_attach(st, (int)pid, p->lib, &p->links, &p->n_links);
	if (rc) {
		mem_proc_links_destroy(st, p);
		return rc;
	}
	p->heap_attached = true;
	nt_log_info(st, "pid %u (%s): heap probes on %s",
		      pid, p->comm, p->lib);
	return 0;
}
