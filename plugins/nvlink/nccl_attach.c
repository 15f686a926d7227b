/* SPDX-License-Identifier: MIT */
/*
 * nvlink: finding libnccl and putting the uprobes on it, the way the cuda
 * probe finds libcudart, with the same machinery (plugins/cuda/cuda_lib.c:
 * ELF symbol lookup with the first-instruction check, globs, /proc/PID/maps
 * scan; plugins/cuda/uprobes.c: the links; core/bpf/libload.bpf.h: a
 * target that opens a libnccl* is held while the probes attach): well-known system paths and the configured `libraries`
 * at attach, then every library the targets have mapped (every process
 * host-wide), then each libnccl a target opens later (a venv's
 * nvidia/nccl/lib/libnccl.so.2 loaded by torch).
 *
 * A file is NCCL when it defines ncclAllReduce or pncclAllReduce. Each
 * entry point is looked up under both spellings (the system library
 * exports pnccl* as the strong symbols and nccl* as weak aliases at the
 * same address) and probed once per address.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "../cuda/cuda_lib.h"
#include "../cuda/uprobes.h"
#include "nccl_model.h"
#include "nvl.h"
#include "nvlink.bpf.skel.h"

static struct nvl_lib *lib_find(struct nvl *s, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < s->nlibs; i++)
		if (s->libs[i].dev == dev && s->libs[i].ino == ino)
			return &s->libs[i];
	return NULL;
}

static struct nvl_lib *lib_new(struct nvl *s, const struct stat *st,
			       const char *path)
{
	struct nvl_lib *l;

	if (s->nlibs == s->caplibs) {
		size_t ncap = s->caplibs ? s->caplibs * 2 : 16;
		struct nvl_lib *n = realloc(s->libs, ncap * sizeof(*n));

		if (!n)
			return NULL;
		s->libs = n;
		s->caplibs = ncap;
	}
	l = &s->libs[s->nlibs];
	memset(l, 0, sizeof(*l));
	l->dev = st->st_dev;
	l->ino = st->st_ino;
	l->path = strdup(path);
	if (!l->path)
		return NULL;
	s->nlibs++;
	return l;
}

static void attach_warn(void *arg, const char *path, const char *name,
			bool ret, int err)
{
	struct nvl *s = arg;

	nt_log_warn(s, "%s: cannot attach %s%s: %s", path,
		     name, ret ? " (return)" : "", strerror(err));
}

/* File offset of every entry point (0: absent), one per address. */
static int lookup(const char *path, uint64_t offs[NVL_C_N])
{
	struct nt_cuda_sym syms[2 * NVL_C_N];
	int found;

	memset(syms, 0, sizeof(syms));
	for (uint32_t c = 0; c < NVL_C_N; c++) {
		const char *pn = nvl_call_pname(c);

		syms[2 * c].name = c ? nvl_call_name(c) : "";
		syms[2 * c + 1].name = pn ? pn : "";
	}
	found = nt_cuda_elf_lookup(path, syms, 2 * NVL_C_N);
	if (found < 0)
		return found;
	for (uint32_t c = 0; c < NVL_C_N; c++) {
		offs[c] = c ? (syms[2 * c].offset ? syms[2 * c].offset
						  : syms[2 * c + 1].offset)
			    : 0;
		for (uint32_t k = 1; k < c && offs[c]; k++)
			if (offs[k] == offs[c])
				offs[c] = 0; /* an alias of a call already probed */
	}
	return offs[NVL_C_ALLREDUCE] ? 1 : 0;
}

static void publish_lib(struct nvl *s, const struct nvl_lib *l, uint32_t pid,
			int err)
{
	struct nvl_ev_lib *e = (struct nvl_ev_lib *)s->rec.bytes;

	if (s->types[NVL_EV_LIB] <= 0)
		return;
	memset(e, 0, sizeof(*e));
	e->hdr.type = (uint32_t)s->types[NVL_EV_LIB];
	e->hdr.size = sizeof(*e);
	e->hdr.ts_ns = nt_clock_mono_ns();
	e->hdr.pid = e->hdr.tid = pid;
	e->n_probes = (uint32_t)l->nprobes;
	e->err = err;
	snprintf(e->path, sizeof(e->path), "%s", l->path);
	s->host->publish(s->inst, &e->hdr);
}

static int attach_lib(struct nvl *s, struct nvl_lib *l, const uint64_t offs[NVL_C_N])
{
	uint64_t o[NVL_C_N], cookies[NVL_C_N];
	const char *names[NVL_C_N];
	size_t n = 0;
	int r1, r2;

	for (uint32_t c = 1; c < NVL_C_N; c++)
		if (offs[c]) {
			o[n] = offs[c];
			names[n] = nvl_call_name(c);
			cookies[n++] = c;
		}
	/* return probes first: an entry never lacks its return */
	r1 = nt_uprobes_attach(&l->up, s->skel->progs.nccl_return, l->path, true,
			       s->multi, o, cookies, names, n, attach_warn, s);
	r2 = r1 < 0 ? r1
		    : nt_uprobes_attach(&l->up, s->skel->progs.nccl_enter, l->path,
					false, s->multi, o, cookies, names, n,
					attach_warn, s);
	if (r1 < 0 || r2 < 0) {
		nt_log_warn(s, "%s: cannot attach the NCCL probes: %s",
			     l->path, strerror(-(r1 < 0 ? r1 : r2)));
		return r1 < 0 ? r1 : r2;
	}
	l->nprobes = (size_t)(r1 < r2 ? r1 : r2);
	s->probes += l->nprobes;
	return l->nprobes == n ? 0 : -EIO;
}

/* Probe the file at `path` (openable from here). Deduplicated by inode; a
 * file without NCCL is remembered as checked. */
static int probe_file(struct nvl *s, const char *path, uint32_t pid)
{
	uint64_t offs[NVL_C_N];
	struct nvl_lib *l;
	struct stat st;
	int r;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	if (lib_find(s, st.st_dev, st.st_ino))
		return 0;
	l = lib_new(s, &st, path);
	if (!l)
		return -ENOMEM;
	if (lookup(path, offs) <= 0)
		return 0;
	l->is_nccl = true;
	r = attach_lib(s, l, offs);
	nt_log_info(s, "%s: NCCL, %zu entry points probed",
		     path, l->nprobes);
	publish_lib(s, l, pid, r);
	return r;
}

static void probe_file_cb(void *arg, const char *path, uint32_t pid)
{
	probe_file(arg, path, pid);
}

static int scan_pid(void *arg, uint32_t pid)
{
	nt_cuda_scan_files(pid, probe_file_cb, arg);
	return 0;
}

static void probe_path_cb(void *arg, const char *path)
{
	probe_file(arg, path, 0);
}

static void scan_globs(struct nvl *s)
{
	static const char *const pats[] = {
		"/usr/lib/x86_64-linux-gnu/libnccl.so.*[0-9]",
		"/usr/lib/aarch64-linux-gnu/libnccl.so.*[0-9]",
		"/usr/lib64/libnccl.so.*[0-9]",
		"/usr/local/cuda/lib64/libnccl.so.*[0-9]",
		"/usr/local/cuda/targets/*/lib/libnccl.so.*[0-9]",
	};

	nt_cuda_glob_each(pats, NT_ARRAY_LEN(pats), probe_path_cb, s);
	nt_cuda_glob_each(s->cfg->libraries.v, s->cfg->libraries.n,
			  probe_path_cb, s);
}

void nvl_nccl_discover(struct nvl *s)
{
	uint32_t pids[1024];
	size_t n = s->host->target_pids(s->inst, pids, NT_ARRAY_LEN(pids));

	scan_globs(s);
	if (s->host->target_map_fd(s->inst) < 0) {
		nt_cuda_for_each_pid(scan_pid, s);
	} else {
		for (size_t i = 0; i < n && i < NT_ARRAY_LEN(pids); i++)
			scan_pid(s, pids[i]);
	}
	nt_log_info(s, "NCCL: %" PRIu64 " probes in %zu files; watching for libnccl loaded later",
		     s->probes, s->nlibs);
}

void nvl_nccl_on_path(struct nvl *s, const void *rec, size_t size)
{
	const struct nvl_raw_path *p = rec;
	char path[NVL_PATH_MAX + 1], full[NVL_PATH_MAX + 64];

	if (size < sizeof(*p))
		return;
	memcpy(path, p->path, NVL_PATH_MAX);
	path[NVL_PATH_MAX] = '\0';
	if (p->hdr.type == NVL_RAW_OPEN) { /* a name in lib_pfx: libnccl* */
		nt_cuda_proc_path(p->hdr.pid, path, full, sizeof(full));
		probe_file(s, full, p->hdr.pid);
	}
	if (p->stopped && kill((pid_t)p->hdr.pid, SIGCONT) != 0)
		nt_log_warn(s, "cannot continue pid %u: %s",
			     p->hdr.pid, strerror(errno));
}

void nvl_nccl_set_prefixes(struct nvl *s)
{
	struct nvlink_bpf *k = s->skel;
	uint32_t n = 0;

	snprintf((char *)k->rodata->lib_pfx[n++], NVL_PFX_LEN, "libnccl.so");
	for (uint32_t i = 0; i < s->cfg->libraries.n && n < NVL_PFX_MAX; i++) {
		const char *b = strrchr(s->cfg->libraries.v[i], '/');

		b = b ? b + 1 : s->cfg->libraries.v[i];
		if (strchr(b, '*') || strchr(b, '?') || strchr(b, '['))
			continue; /* a glob: found at attach only */
		snprintf((char *)k->rodata->lib_pfx[n++], NVL_PFX_LEN, "%s", b);
	}
	k->rodata->n_lib_pfx = n;
	k->rodata->stop_on_load = s->cfg->stop_on_load;
	k->rodata->watch_so = false;
}

void nvl_nccl_release(struct nvl *s)
{
	for (size_t i = 0; i < s->nlibs; i++) {
		nt_uprobes_release(&s->libs[i].up);
		free(s->libs[i].path);
	}
	free(s->libs);
	s->libs = NULL;
	s->nlibs = s->caplibs = 0;
	s->probes = 0;
}
