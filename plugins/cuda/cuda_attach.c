/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: finding the CUDA libraries a target uses (default paths, /proc maps,
 * openat/exec records) and attaching the uprobes of cuda.bpf.c to them;
 * the auto launch layer's runtime fallback and hand-over to the driver.
 */
#include "cuda_plugin.h"

/* ------------------------------------------------------------------ */
/* Attaching                                                           */
/* ------------------------------------------------------------------ */


void batch_add(struct batch *b, uint64_t off, uint64_t cookie,
		      const char *name)
{
	if (b->n >= NT_ARRAY_LEN(b->offs))
		return;
	b->offs[b->n] = off;
	b->cookies[b->n] = cookie;
	b->names[b->n] = name;
	b->n++;
}

void attach_warn(void *arg, const char *path, const char *name,
			bool ret, int err)
{
	struct cuda *c = arg;

	nt_log_warn(c, "%s: cannot attach %s%s: %s", path,
		     name, ret ? " (return)" : "", strerror(err));
}

int batch_attach(struct cuda *c, struct lib *l, struct batch *b)
{
	int r = nt_uprobes_attach(&l->up, b->prog, l->path, b->ret, c->multi,
				  b->offs, b->cookies, b->names, b->n,
				  attach_warn, c);

	if (r < 0)
		nt_log_warn(c, "%s: cannot attach %zu %s probes: %s",
			     l->path, b->n, bpf_program__name(b->prog), strerror(-r));
	else
		c->probes += (uint64_t)r;
	return r;
}

bool launch_layer_on(struct cuda *c, int layer)
{
	return c->layer_launch & (1 << layer);
}

/* auto layer: runtime launches are probed while no driver is known */
bool launch_fallback_wanted(const struct cuda *c, int layer)
{
	return c->auto_layer && layer == NT_CUDA_LAYER_RUNTIME && !c->n_driver_libs;
}

/* Runtime launch probes of `l`, as a fallback (see launch_fallback_wanted). */
void launch_fallback_attach(struct cuda *c, struct lib *l,
				   struct batch *rt, struct batch *rt_ex)
{
	struct batch *bs[2] = {rt, rt_ex};

	for (int i = 0; i < 2; i++) {
		int r = bs[i]->n ? nt_uprobes_attach(&l->fallback, bs[i]->prog, l->path,
						     false, c->multi, bs[i]->offs,
						     bs[i]->cookies, bs[i]->names, bs[i]->n,
						     attach_warn, c)
				 : 0;
		if (r < 0) {
			c->probes -= l->fallback.nprobes;
			nt_uprobes_release(&l->fallback);
			return;
		}
		c->probes += (uint64_t)r;
	}
	if (!l->fallback.nprobes)
		return;
	if (!c->fallback_on)
		nt_log_info(c,
			     "%s: no CUDA driver library (libcuda.so.1) found: launches are probed "
			     "at the runtime layer until one is (launches that bypass this "
			     "runtime, as Triton's and cuBLAS's do, are not seen meanwhile)",
			     l->path);
	c->fallback_on = true;
}

/* Deletes the runtime-launch marks of every thread but `keep`. */
void forget_rt_marks(struct cuda *c, uint32_t keep)
{
	int fd = bpf_map__fd(c->skel->maps.rt_marks);
	uint32_t key, next, dead[256];
	size_t n = 0;
	bool more = bpf_map_get_next_key(fd, NULL, &next) == 0;

	while (more) {
		key = next;
		more = bpf_map_get_next_key(fd, &key, &next) == 0;
		if (key != keep && n < NT_ARRAY_LEN(dead))
			dead[n++] = key;
		if (n == NT_ARRAY_LEN(dead) || !more) {
			for (size_t i = 0; i < n; i++)
				bpf_map_delete_elem(fd, &dead[i]);
			n = 0;
		}
	}
}

/* A driver library is probed: the runtime-layer launch probes go. */
void launch_fallback_end(struct cuda *c, const struct lib *drv)
{
	c->n_driver_libs++;
	if (!c->fallback_on)
		return;
	for (size_t i = 0; i < c->nlibs; i++) {
		c->probes -= c->libs[i].fallback.nprobes;
		nt_uprobes_release(&c->libs[i].fallback);
	}
	c->fallback_on = false;
	/* A launch in flight (the opener's, if the runtime loads its driver
	 * inside a launch) reaches both layers: the BPF side counts it once.
	 * The other threads' marks are of launches long done: forget them. */
	uint64_t mark;
	forget_rt_marks(c, c->opener_tid);
	if (c->opener_tid && bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.rt_marks),
						 &c->opener_tid, &mark) == 0) {
		c->skel->bss->handover = true; /* the BPF side ends it */
		c->handover_until = c->tick + 2;
	}
	nt_log_info(c,
		     "%s: a CUDA driver library: launches are now probed at the driver layer",
		     drv->path);
}

/* Does function-table entry `fe` name this file? */
bool fn_lib_matches(const struct fn_entry *fe, const char *path,
			   const struct stat *st)
{
	const char *base = strrchr(path, '/');
	size_t n = strlen(fe->library);
	char pfx[256];

	base = base ? base + 1 : path;
	if (fe->library[0] == '/') {
		struct stat s2;

		return stat(fe->library, &s2) == 0 && s2.st_ino == st->st_ino &&
		       s2.st_dev == st->st_dev;
	}
	if (!strncmp(fe->library, "lib", 3))
		return !strncmp(base, fe->library, n);
	snprintf(pfx, sizeof(pfx), "lib%s.so", fe->library);
	return !strncmp(base, pfx, strlen(pfx));
}

struct lib *lib_find(struct cuda *c, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < c->nlibs; i++)
		if (c->libs[i].dev == dev && c->libs[i].ino == ino)
			return &c->libs[i];
	return NULL;
}

/* Was the program at `path` found to hold a CUDA runtime (linked in)? A
 * short-lived one may exit before its records are read: its memory map
 * is then read while it is held at its exec, to name its stacks. */
bool exe_has_runtime(struct cuda *c, const char *path)
{
	struct stat st;
	const struct lib *l;

	return stat(path, &st) == 0 && (l = lib_find(c, st.st_dev, st.st_ino)) &&
	       l->kind == NT_CUDA_LIB_RUNTIME;
}

/* The name of a live process (/proc/PID/comm) into an event header. */
void proc_comm(uint32_t pid, char comm[NT_COMM_LEN])
{
	char path[48], name[NT_COMM_LEN + 2] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(name, sizeof(name), f)) {
		name[strcspn(name, "\n")] = '\0';
		memset(comm, 0, NT_COMM_LEN);
		memcpy(comm, name, strnlen(name, NT_COMM_LEN));
	}
	fclose(f);
}

void publish_library(struct cuda *c, const struct lib *l, uint32_t pid,
			    int err, size_t nprobes)
{
	struct nt_cuda_rec *r = &c->rec[0];
	struct nt_cuda_library *e;
	const char *what;

	memset(r->u.bytes, 0, sizeof(*e));
	e = (void *)r->u.bytes;
	e->hdr.type = (uint32_t)c->types[NT_CUDA_EVT_LIBRARY];
	e->hdr.size = sizeof(*e);
	e->hdr.ts_ns = nt_clock_mono_ns();
	e->hdr.pid = pid;
	e->hdr.tid = pid;
	if (pid)
		proc_comm(pid, e->hdr.comm);
	e->layer = l->kind == NT_CUDA_LIB_RUNTIME ? NT_CUDA_LAYER_RUNTIME
		   : l->kind == NT_CUDA_LIB_DRIVER ? NT_CUDA_LAYER_DRIVER
						    : NT_CUDA_LAYER_USER;
	e->ret = err;
	e->device = -1;
	e->flags = l->is_static ? NT_CUDA_F_STATIC : 0;
	e->n_probes = (uint32_t)nprobes;
	e->is_static = l->is_static;
	what = l->kind == NT_CUDA_LIB_RUNTIME
		       ? (l->is_static ? "runtime (static)" : "runtime")
	       : l->kind == NT_CUDA_LIB_DRIVER ? "driver"
					       : "functions";
	nt_cuda_rec_str(r, &e->path, l->path, strlen(l->path));
	nt_cuda_rec_str(r, &e->version, what, strlen(what));
	c->host->publish(c->inst, &r->u.hdr);
}

/*
 * Probe the file at `path` (openable here: for another mount namespace,
 * /proc/PID/root/...). Deduplicated by inode; a file with nothing to probe
 * is remembered too.
 */
/* A new library entry for the file (kind -1: nothing probed yet). */
static struct lib *lib_new(struct cuda *c, const char *path,
			   const struct stat *st)
{
	struct lib *l;

	if (c->nlibs == c->caplibs) {
		size_t ncap = c->caplibs ? c->caplibs * 2 : 32;
		struct lib *n = realloc(c->libs, ncap * sizeof(*n));

		if (!n)
			return NULL;
		c->libs = n;
		c->caplibs = ncap;
	}
	l = &c->libs[c->nlibs++];
	memset(l, 0, sizeof(*l));
	l->dev = st->st_dev;
	l->ino = st->st_ino;
	l->kind = -1;
	l->path = strdup(path);
	return l->path ? l : NULL;
}

/* The file's offsets of every API symbol and of the function table's
 * symbols that name this file (malloc'ed, NT_CUDA_API_COUNT + nfns). */
static struct nt_cuda_sym *lib_symbols(struct cuda *c, const char *path,
				       const struct stat *st, int *found)
{
	size_t nsyms = NT_CUDA_API_COUNT + c->nfns;
	struct nt_cuda_sym *syms = calloc(nsyms, sizeof(*syms));

	if (!syms) {
		*found = -ENOMEM;
		return NULL;
	}
	syms[0].name = "";
#define SYMNAME_(id, sym, layer, fam) syms[NT_CUDA_API_##id].name = sym;
	NT_CUDA_APIS(SYMNAME_)
#undef SYMNAME_
	for (size_t i = 0; i < c->nfns; i++)
		syms[NT_CUDA_API_COUNT + i].name =
			fn_lib_matches(&c->fns[i], path, st) ? c->fns[i].symbol : "";
	*found = nt_cuda_elf_lookup(path, syms, nsyms);
	if (*found < 0) {
		free(syms);
		return NULL;
	}
	return syms;
}

/* Put one API function of a library of `kind` into its batch: generic
 * calls into call_enter/call_return (0, 1), launches into the program of
 * their layer and form (2..5), or the auto layer's fallback (8, 9). */
static void batch_api(struct cuda *c, struct batch *bt, const char *path,
		      const struct nt_cuda_sym *sy, unsigned api, int kind)
{
	int layer = nt_cuda_api_layer(api);
	bool fallback;

	if (!sy->offset)
		return;
	if ((layer == NT_CUDA_LAYER_RUNTIME) != (kind == NT_CUDA_LIB_RUNTIME))
		return;
	if (sy->insn == NT_CUDA_INSN_OTHER)
		nt_log_dbg(c,
			     "%s: %s starts with an instruction the kernel single-steps (slower probe)",
			     path, sy->name);
	if (nt_cuda_api_family(api) != NT_CUDA_FAM_LAUNCH) {
		batch_add(&bt[0], sy->offset, api, sy->name);
		batch_add(&bt[1], sy->offset, api, sy->name);
		return;
	}
	fallback = launch_fallback_wanted(c, layer);
	if (!launch_layer_on(c, layer) && !fallback)
		return;
	switch (api) {
	case NT_CUDA_API_cudaLaunchKernelExC:
	case NT_CUDA_API_cudaLaunchKernelExC_ptsz:
		batch_add(&bt[fallback ? 9 : 3], sy->offset, api, sy->name);
		break;
	case NT_CUDA_API_cuLaunchKernelEx:
	case NT_CUDA_API_cuLaunchKernelEx_ptsz:
		batch_add(&bt[5], sy->offset, api, sy->name);
		break;
	default:
		batch_add(fallback ? &bt[8]
			  : layer == NT_CUDA_LAYER_RUNTIME ? &bt[2] : &bt[4],
			  sy->offset, api, sy->name);
	}
}

/* Attach every probe the library's symbols call for; -EIO when some
 * batch failed (the others stay). */
static int attach_symbols(struct cuda *c, struct lib *l, const char *path,
			  const struct nt_cuda_sym *syms, int kind)
{
	/* 8, 9: runtime launches as the auto layer's fallback */
	static struct batch bt[10]; /* loop thread only: not re-entered */
	struct bpf_program *progs[10] = {
		c->skel->progs.call_enter, c->skel->progs.call_return,
		c->skel->progs.launch_rt, c->skel->progs.launch_rt_ex,
		c->skel->progs.launch_drv, c->skel->progs.launch_drv_ex,
		c->skel->progs.fn_enter, c->skel->progs.fn_return,
		c->skel->progs.launch_rt, c->skel->progs.launch_rt_ex,
	};
	int err = 0;

	for (int i = 0; i < 10; i++) {
		bt[i].prog = progs[i];
		bt[i].ret = i == 1 || i == 7;
		bt[i].n = 0;
	}
	for (unsigned api = 1; kind > 0 && api < NT_CUDA_API_COUNT; api++)
		batch_api(c, bt, path, &syms[api], api, kind);
	for (size_t i = 0; i < c->nfns; i++) {
		const struct nt_cuda_sym *sy = &syms[NT_CUDA_API_COUNT + i];

		if (!sy->offset)
			continue;
		batch_add(&bt[6], sy->offset, NT_CUDA_FN_BASE + i, sy->name);
		batch_add(&bt[7], sy->offset, NT_CUDA_FN_BASE + i, sy->name);
	}
	/* return probes first: an entry never lacks its return */
	for (int i = 7; i >= 0; i--)
		if (batch_attach(c, l, &bt[i]) < 0)
			err = -EIO;
	if (bt[8].n + bt[9].n)
		launch_fallback_attach(c, l, &bt[8], &bt[9]);
	return err;
}

int probe_file(struct cuda *c, const char *path, uint32_t pid)
{
	struct nt_cuda_sym *syms;
	struct stat st;
	struct lib *l;
	int kind, found, err;
	size_t before;
	bool fn_any = false;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return -errno ? -errno : -EINVAL;
	if (lib_find(c, st.st_dev, st.st_ino))
		return 0;
	l = lib_new(c, path, &st);
	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < c->nfns; i++)
		fn_any |= fn_lib_matches(&c->fns[i], path, &st);
	kind = nt_cuda_elf_classify(path);
	if (kind <= 0 && !fn_any)
		return 0; /* nothing here */
	syms = lib_symbols(c, path, &st, &found);
	if (!syms)
		return found;
	l->kind = kind > 0 ? kind : NT_CUDA_LIB_NONE;
	l->is_static = kind == NT_CUDA_LIB_RUNTIME && !nt_cuda_name_is_runtime(path);
	before = l->up.nprobes;
	err = attach_symbols(c, l, path, syms, kind);
	free(syms);
	if (l->kind == NT_CUDA_LIB_DRIVER && c->auto_layer)
		launch_fallback_end(c, l);
	nt_log_info(c, "%s: %s, %zu probes attached",
		     path,
		     l->kind == NT_CUDA_LIB_RUNTIME
			     ? (l->is_static ? "CUDA runtime (static)" : "CUDA runtime")
		     : l->kind == NT_CUDA_LIB_DRIVER ? "CUDA driver"
						     : "function table",
		     l->up.nprobes - before);
	publish_library(c, l, pid, err, l->up.nprobes - before);
	return 0;
}

void probe_file_cb(void *arg, const char *path, uint32_t pid)
{
	probe_file(arg, path, pid);
}

void scan_pid(struct cuda *c, uint32_t pid)
{
	nt_cuda_scan_files(pid, probe_file_cb, c);
}

void probe_path_cb(void *arg, const char *path)
{
	probe_file(arg, path, 0);
}

void scan_default_paths(struct cuda *c)
{
	static const char *const pats[] = {
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"/usr/lib64/libcuda.so.1",
		"/usr/lib/aarch64-linux-gnu/libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",
		"/usr/lib/wsl/lib/libcuda.so.1",
		"/usr/local/cuda/lib64/libcudart.so.*[0-9]",
		"/usr/local/cuda/targets/*/lib/libcudart.so.*[0-9]",
	};

	nt_cuda_glob_each(pats, NT_ARRAY_LEN(pats), probe_path_cb, c);
	nt_cuda_glob_each(c->cfg->libraries.v, c->cfg->libraries.n,
			  probe_path_cb, c);
}

int scan_pid_cb(void *arg, uint32_t pid)
{
	scan_pid(arg, pid);
	return 0;
}

void scan_all_pids(struct cuda *c)
{
	nt_cuda_for_each_pid(scan_pid_cb, c);
}
