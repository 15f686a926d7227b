/* SPDX-License-Identifier: MIT */
#include "symbolize.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* From the C++ runtime (libstdc++), callable from C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

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

struct nt_sym_proc {
	uint32_t pid;
	Dwfl *dwfl;
	uint64_t last_use;
	uint64_t refreshed_ns;
	uint64_t created_ns;     /* CLOCK_MONOTONIC of the first report */
	uint64_t maps_hash;      /* of /proc/PID/maps at the last report */
	uint32_t maps_gen;       /* bumped whenever the maps changed */
	struct sym_entry *slots; /* open addressing on addr */
	size_t n, cap;
};

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

static void proc_free(struct nt_sym_proc *p)
{
	if (!p)
		return;
	cache_clear(p);
	if (p->dwfl)
		dwfl_end(p->dwfl);
	free(p);
}

void nt_symbolizer_fini(struct nt_symbolizer *s)
{
	for (int i = 0; i < NT_SYM_PROCS; i++)
		proc_free(s->procs[i]);
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

/* FNV-1a of /proc/PID/maps: whether the process mapped or unmapped
 * anything since the last look, for the price of one read. */
static int maps_hash(uint32_t pid, uint64_t *out)
{
	char path[64], buf[65536];
	uint64_t h = 1469598103934665603ull;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ESRCH;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ (uint8_t)buf[i]) * 1099511628211ull;
	close(fd);
	*out = h;
	return n < 0 ? -ESRCH : 0;
}

/* Report the process's modules. After the first time modules already known
 * are kept (dwfl_report_begin_add): re-reading libtorch_cuda.so's symbol
 * table costs about a second, a new library only its own. */
static int proc_report(struct nt_sym_proc *p, bool first)
{
	if (first)
		dwfl_report_begin(p->dwfl);
	else
		dwfl_report_begin_add(p->dwfl);
	int err = dwfl_linux_proc_report(p->dwfl, (pid_t)p->pid);
	dwfl_report_end(p->dwfl, NULL, NULL);
	p->refreshed_ns = now_ns();
	return err;
}

/* On a miss: re-report only if the maps changed. An address never seen
 * always looks (a library mapped since the last report, e.g. right after a
 * probe pre-loaded the maps at exec); a cached miss at most every
 * REFRESH_NS. Returns -ESRCH when the process is gone. */
static int proc_refresh(struct nt_sym_proc *p, bool always)
{
	uint64_t hash;

	if (!always && now_ns() - p->refreshed_ns <= REFRESH_NS)
		return 0;
	p->refreshed_ns = now_ns();
	if (maps_hash(p->pid, &hash))
		return -ESRCH;
	if (hash == p->maps_hash)
		return 0;
	p->maps_hash = hash;
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
	p->created_ns = now_ns();
	p->dwfl = dwfl_begin(&proc_callbacks);
	if (!p->dwfl || maps_hash(pid, &p->maps_hash) || proc_report(p, true) != 0) {
		proc_free(p);
		return NULL;
	}
	proc_free(s->procs[victim]);
	s->procs[victim] = p;
	return p;
}

static char *demangle(const char *name)
{
	int status = -1;
	char *out = NULL;

	if (name && name[0] == '_' && name[1] == 'Z')
		out = __cxa_demangle(name, NULL, NULL, &status);
	if (status == 0 && out)
		return out;
	free(out);
	return name ? strdup(name) : NULL;
}

static void resolve(struct nt_sym_proc *p, uint64_t addr, struct sym_entry *e)
{
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, addr);
	GElf_Off offset = 0;
	GElf_Sym sym;

	if (!mod) {
		/* Perhaps a library loaded after our last look at the maps. A
		 * process already gone keeps what was known of it: its other
		 * frames still resolve. */
		if (proc_refresh(p, true) == 0)
			mod = dwfl_addrmodule(p->dwfl, addr);
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
	if (!name)
		return;
	e->name = demangle(name);
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
		resolve(p, addr, e);
		p->n += fresh;
	}
	out->name = e->name;
	out->offset = e->offset;
	out->module = e->module;
	out->file = e->file;
	out->line = e->line;
	return e->err;
}
