/* SPDX-License-Identifier: MIT */
#include "symbolize.h"

#include "clock.h"
#include "debuginfo.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define CACHE_MAX 65536
#define REFRESH_NS 100000000ull /* re-read the maps at most every 100 ms */

struct sym_entry {
	uint64_t addr;
	char *name, *module, *file;
	uint64_t offset;
	uint32_t line;
	int err;
	bool no_module;   /* a miss: no mapped object covers addr */
	uint32_t gen;     /* maps generation a miss was seen in */
};

/* One file-backed mapping of /proc/PID/maps. */
struct file_map {
	uint64_t start, end;
	char *path;
};

struct nt_sym_proc {
	uint32_t pid;
	Dwfl *dwfl;
	uint64_t last_use;
	uint64_t refreshed_ns;
	uint64_t created_ns;     /* CLOCK_MONOTONIC of the first report */
	uint64_t maps_hash;      /* of /proc/PID/maps at the last report */
	struct file_map *maps;   /* its file-backed mappings, by address */
	size_t n_maps;
	uint32_t maps_gen;       /* bumped whenever the maps changed */
	struct sym_entry *slots; /* open addressing on addr */
	size_t n, cap;
};

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = nt_find_debuginfo_local, /* no debuginfod (debuginfo.h) */
};

void nt_symbolizer_init(struct nt_symbolizer *s)
{
	memset(s, 0, sizeof(*s));
}

static void cache_clear(struct nt_sym_proc *p)
{
	for (size_t i = 0; i < p->cap; i++) {
		free(p->slots[i].name);
		free(p->slots[i].module);
		free(p->slots[i].file);
	}
	free(p->slots);
	p->slots = NULL;
	p->n = p->cap = 0;
}

static void maps_free(struct nt_sym_proc *p)
{
	for (size_t i = 0; i < p->n_maps; i++)
		free(p->maps[i].path);
	free(p->maps);
	p->maps = NULL;
	p->n_maps = 0;
}

static void proc_free(struct nt_sym_proc *p)
{
	if (!p)
		return;
	cache_clear(p);
	maps_free(p);
	if (p->dwfl)
		dwfl_end(p->dwfl);
	free(p);
}

void nt_symbolizer_fini(struct nt_symbolizer *s)
{
	for (int i = 0; i < NT_SYM_PROCS; i++)
		proc_free(s->procs[i]);
	if (s->cxx_lib)
		dlclose(s->cxx_lib);
	memset(s, 0, sizeof(*s));
}

void nt_symbolizer_forget(struct nt_symbolizer *s, uint32_t pid,
			  uint64_t before_ns)
{
	for (int i = 0; i < NT_SYM_PROCS; i++)
		if (s->procs[i] && s->procs[i]->pid == pid &&
		    s->procs[i]->created_ns < before_ns) {
			proc_free(s->procs[i]);
			s->procs[i] = NULL;
		}
}

static void maps_add(struct file_map **maps, size_t *n, size_t *cap,
		     const char *line)
{
	unsigned long long start, end;
	int path_at = 0;

	if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &start, &end, &path_at) < 2 ||
	    !path_at || line[path_at] != '/')
		return;
	if (*n == *cap) {
		size_t grown_cap = *cap ? *cap * 2 : 64;
		struct file_map *grown = realloc(*maps, grown_cap * sizeof(*grown));
		if (!grown)
			return;
		*maps = grown;
		*cap = grown_cap;
	}
	char *path = strdup(line + path_at);
	if (!path)
		return;
	path[strcspn(path, "\n")] = '\0';
	(*maps)[(*n)++] = (struct file_map){start, end, path};
}

/* Read /proc/PID/maps: its FNV-1a hash (whether the process mapped or
 * unmapped anything since the last look) and, when `keep`, its file-backed
 * mappings (which file really lies at an address). */
static int maps_read(struct nt_sym_proc *p, uint64_t *hash, bool keep)
{
	char path[64], line[4096 + 256];
	uint64_t h = 1469598103934665603ull;
	struct file_map *maps = NULL;
	size_t n = 0, cap = 0;

	snprintf(path, sizeof(path), "/proc/%u/maps", p->pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	size_t lines = 0;
	while (fgets(line, sizeof(line), f)) {
		for (const char *c = line; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
		if (keep)
			maps_add(&maps, &n, &cap, line);
		lines++;
	}
	fclose(f);
	/* A process that has exited but is not yet reaped shows empty maps:
	 * it is gone, and what was known of it must stay. */
	if (!lines) {
		free(maps);
		return -ESRCH;
	}
	*hash = h;
	if (keep) {
		maps_free(p);
		p->maps = maps;
		p->n_maps = n;
	}
	return 0;
}

/* The file mapped at addr, NULL if none (the maps are sorted). */
static const char *mapped_file(const struct nt_sym_proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n_maps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < p->maps[mid].start)
			hi = mid;
		else if (addr >= p->maps[mid].end)
			lo = mid + 1;
		else
			return p->maps[mid].path;
	}
	return NULL;
}

struct module_query {
	const char *path;
	uint64_t addr;
	Dwfl_Module *found;
};

static int match_module(Dwfl_Module *mod, void **userdata, const char *name,
			Dwarf_Addr start, void *arg)
{
	struct module_query *q = arg;
	Dwarf_Addr low, high;

	(void)userdata;
	(void)start;
	dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
	if (name && strcmp(name, q->path) == 0 && q->addr >= low && q->addr < high) {
		q->found = mod;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

/* dwfl spans a module from its first to its last segment; a library mapped
 * later into a hole between another library's segments falls inside that
 * span. Trust the maps for which file is at the address. */
static Dwfl_Module *module_at(struct nt_sym_proc *p, uint64_t addr)
{
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, addr);
	const char *file = mapped_file(p, addr);

	if (!mod || !file)
		return mod;
	const char *name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	if (name && strcmp(name, file) == 0)
		return mod;
	struct module_query q = {.path = file, .addr = addr};
	dwfl_getmodules(p->dwfl, match_module, &q, 0);
	return q.found ? q.found : mod;
}

/* Report the process's modules. After the first time, modules already
 * known are kept (dwfl_report_begin_add), with everything dwfl loaded for
 * them (re-reading libtorch_cuda.so's symbol table costs about a second),
 * and a report cut short by the process exiting wipes nothing. A stale span
 * that a newer library falls into is corrected by module_at() from the
 * maps. */
static int proc_report(struct nt_sym_proc *p, bool first)
{
	if (first)
		dwfl_report_begin(p->dwfl);
	else
		dwfl_report_begin_add(p->dwfl);
	int err = dwfl_linux_proc_report(p->dwfl, (pid_t)p->pid);
	dwfl_report_end(p->dwfl, NULL, NULL);
	p->refreshed_ns = nt_mono_ns();
	return err;
}

/* On a miss: re-report only if the maps changed. An address never seen
 * always looks (a library mapped since the last report, e.g. right after a
 * probe pre-loaded the maps at exec); a cached miss at most every
 * REFRESH_NS. Returns -ESRCH when the process is gone. */
static int proc_refresh(struct nt_sym_proc *p, bool always)
{
	uint64_t hash;

	if (!always && nt_mono_ns() - p->refreshed_ns <= REFRESH_NS)
		return 0;
	p->refreshed_ns = nt_mono_ns();
	if (maps_read(p, &hash, false))
		return -ESRCH;
	if (hash == p->maps_hash)
		return 0;
	if (maps_read(p, &p->maps_hash, true))
		return -ESRCH;
	p->maps_gen++;
	return proc_report(p, false) ? -ESRCH : 0;
}

static struct nt_sym_proc *proc_get(struct nt_symbolizer *s, uint32_t pid)
{
	int victim = 0;

	for (int i = 0; i < NT_SYM_PROCS; i++) {
		if (s->procs[i] && s->procs[i]->pid == pid) {
			s->procs[i]->last_use = ++s->clock;
			return s->procs[i];
		}
		if (!s->procs[i] || (s->procs[victim] &&
				     s->procs[i]->last_use < s->procs[victim]->last_use))
			victim = i;
	}
	struct nt_sym_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->last_use = ++s->clock;
	p->created_ns = nt_mono_ns();
	p->dwfl = dwfl_begin(&proc_callbacks);
	if (!p->dwfl || maps_read(p, &p->maps_hash, true) || proc_report(p, true) != 0) {
		proc_free(p);
		return NULL;
	}
	proc_free(s->procs[victim]);
	s->procs[victim] = p;
	return p;
}

/* libstdc++'s __cxa_demangle, looked up once (struct nt_symbolizer). */
static void load_demangler(struct nt_symbolizer *s)
{
	s->cxx_tried = true;
	s->cxx_lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (s->cxx_lib)
		*(void **)&s->cxa_demangle = dlsym(s->cxx_lib, "__cxa_demangle");
}

static char *demangle(struct nt_symbolizer *s, const char *name)
{
	int status = -1;
	char *out = NULL;

	if (name && name[0] == '_' && name[1] == 'Z') {
		if (!s->cxx_tried)
			load_demangler(s);
		if (s->cxa_demangle)
			out = s->cxa_demangle(name, NULL, NULL, &status);
	}
	if (status == 0 && out)
		return out;
	free(out);
	return name ? strdup(name) : NULL;
}

static void resolve(struct nt_symbolizer *s, struct nt_sym_proc *p,
		    uint64_t addr, struct sym_entry *e)
{
	Dwfl_Module *mod = module_at(p, addr);
	GElf_Off offset = 0;
	GElf_Sym sym;

	if (!mod || !mapped_file(p, addr)) {
		/* Perhaps a library loaded after our last look at the maps. A
		 * process already gone keeps what was known of it: its other
		 * frames still resolve. */
		if (proc_refresh(p, true) == 0)
			mod = module_at(p, addr);
	}
	e->addr = addr;
	e->err = -ENOENT;
	/* A miss is cached until the maps change (JIT code, anonymous
	 * executable memory): retrying each time would re-read the maps. */
	e->no_module = !mod;
	e->gen = p->maps_gen;
	if (!mod)
		return;
	const char *module = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL,
					      NULL, NULL);
	e->module = module ? strdup(module) : NULL;
	const char *name = dwfl_module_addrinfo(mod, addr, &offset, &sym, NULL,
						NULL, NULL);
	if (!name) {
		/* No symbol: the address relative to the module, as addr2line
		 * and objdump take it ("libcublas.so.13+0x1a2b3c", not +0x0). */
		Dwarf_Addr rel = addr;
		if (dwfl_module_relocate_address(mod, &rel) >= 0)
			e->offset = rel;
		return;
	}
	e->name = demangle(s, name);
	e->offset = offset;
	e->err = e->name ? 0 : -ENOMEM;
	Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
	int lineno = 0;
	const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL,
						NULL)
				: NULL;
	if (file) {
		e->file = strdup(file);
		e->line = (uint32_t)lineno;
	}
}

static struct sym_entry *cache_slot(struct nt_sym_proc *p, uint64_t addr)
{
	if ((p->n + 1) * 2 > p->cap) {
		if (p->cap >= CACHE_MAX)
			cache_clear(p);
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct sym_entry *old = p->slots;
		size_t old_cap = p->cap;
		p->slots = calloc(cap, sizeof(*p->slots));
		if (!p->slots) {
			p->slots = old;
			return NULL;
		}
		p->cap = cap;
		for (size_t i = 0; i < old_cap; i++) {
			if (!old[i].addr)
				continue;
			size_t j = (old[i].addr * 0x9e3779b97f4a7c15ull) & (cap - 1);
			while (p->slots[j].addr)
				j = (j + 1) & (cap - 1);
			p->slots[j] = old[i];
		}
		free(old);
	}
	size_t j = (addr * 0x9e3779b97f4a7c15ull) & (p->cap - 1);
	while (p->slots[j].addr && p->slots[j].addr != addr)
		j = (j + 1) & (p->cap - 1);
	return &p->slots[j];
}

int nt_symbolize(struct nt_symbolizer *s, uint32_t pid, uint64_t addr,
		 struct nt_symbol *out)
{
	memset(out, 0, sizeof(*out));
	if (!addr)
		return -ENOENT;
	struct nt_sym_proc *p = proc_get(s, pid);
	if (!p)
		return -ESRCH;
	struct sym_entry *e = cache_slot(p, addr);
	if (!e)
		return -ENOMEM;
	bool fresh = !e->addr;
	/* A cached miss is looked up again once the maps have changed. */
	if (!fresh && e->no_module)
		proc_refresh(p, false);
	if (fresh || (e->no_module && e->gen != p->maps_gen)) {
		resolve(s, p, addr, e);
		p->n += fresh;
	}
	out->name = e->name;
	out->offset = e->offset;
	out->module = e->module;
	out->file = e->file;
	out->line = e->line;
	return e->err;
}
