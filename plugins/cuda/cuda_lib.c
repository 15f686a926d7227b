/* SPDX-License-Identifier: MIT */
#include "cuda_lib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntcore/kit/proc.h"
#include "ntcore/kit/uprobe_insn.h"

const char *nt_cuda_insn_name(int insn)
{
	switch (insn) {
	case NT_CUDA_INSN_PUSH: return "push (emulated)";
	case NT_CUDA_INSN_ENDBR: return "endbr64+push (probe after endbr64)";
	case NT_CUDA_INSN_OTHER: return "other (single-stepped)";
	case NT_CUDA_INSN_SIMULATED: return "branch/adr (simulated)";
	default: return "unknown";
	}
}

#if defined(__aarch64__)
int nt_cuda_insn_classify(const uint8_t *b, size_t n, uint64_t *skip)
{
	char text[48];

	*skip = 0;
	switch (nt_uprobe_insn_a64(b, n, text, sizeof(text))) {
	case NT_UPROBE_INSN_SIMULATED: return NT_CUDA_INSN_SIMULATED;
	case NT_UPROBE_INSN_STEPPED:
	case NT_UPROBE_INSN_REFUSED: return NT_CUDA_INSN_OTHER;
	default: return NT_CUDA_INSN_UNKNOWN;
	}
}
#elif defined(__x86_64__)
static bool is_push(const uint8_t *b, size_t n)
{
	if (n >= 1 && b[0] >= 0x50 && b[0] <= 0x57)
		return true; /* push %rax..%rdi (0x55: push %rbp) */
	if (n >= 2 && b[0] == 0x41 && b[1] >= 0x50 && b[1] <= 0x57)
		return true; /* push %r8..%r15 */
	return false;
}

int nt_cuda_insn_classify(const uint8_t *b, size_t n, uint64_t *skip)
{
	*skip = 0;
	if (is_push(b, n))
		return NT_CUDA_INSN_PUSH;
	if (n >= 5 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e &&
	    b[3] == 0xfa && is_push(b + 4, n - 4)) {
		*skip = 4;
		return NT_CUDA_INSN_ENDBR;
	}
	return n ? NT_CUDA_INSN_OTHER : NT_CUDA_INSN_UNKNOWN;
}
#else
int nt_cuda_insn_classify(const uint8_t *b, size_t n, uint64_t *skip)
{
	(void)b;
	(void)n;
	*skip = 0;
	return NT_CUDA_INSN_UNKNOWN; /* not decoded on this instruction set */
}
#endif

/* File offset of a virtual address, through the section holding it. */
static bool vaddr_to_off(Elf *e, GElf_Sym *s, uint64_t *off)
{
	Elf_Scn *scn = elf_getscn(e, s->st_shndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
		return false;
	if (s->st_value < sh.sh_addr || s->st_value >= sh.sh_addr + sh.sh_size)
		return false;
	*off = s->st_value - sh.sh_addr + sh.sh_offset;
	return true;
}

static void scan_table(Elf *e, Elf_Scn *scn, GElf_Shdr *sh,
		       struct nt_cuda_sym *syms, size_t n, int fd, int *found)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t cnt;

	if (!data || !sh->sh_entsize)
		return;
	cnt = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < cnt; i++) {
		GElf_Sym s;
		const char *name;

		if (!gelf_getsym(data, (int)i, &s))
			continue;
		if (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
		    GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
			continue;
		if (s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		name = elf_strptr(e, sh->sh_link, s.st_name);
		if (!name || !name[0])
			continue;
		for (size_t k = 0; k < n; k++) {
			uint8_t b[16];
			uint64_t off, skip;
			ssize_t r;

			if (syms[k].offset || strcmp(syms[k].name, name) != 0)
				continue;
			if (!vaddr_to_off(e, &s, &off))
				continue;
			r = pread(fd, b, sizeof(b), (off_t)off);
			syms[k].insn = nt_cuda_insn_classify(
				b, r > 0 ? (size_t)r : 0, &skip);
			syms[k].offset = off + skip;
			(*found)++;
		}
	}
}

int nt_cuda_elf_lookup(const char *path, struct nt_cuda_sym *syms, size_t n)
{
	Elf_Scn *scn = NULL;
	int fd, found = 0;
	Elf *e;

	for (size_t k = 0; k < n; k++) {
		syms[k].offset = 0;
		syms[k].insn = NT_CUDA_INSN_UNKNOWN;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(fd);
		return -ENOEXEC;
	}
	/* .dynsym first (exported), then .symtab (static binaries) */
	for (int pass = 0; pass < 2 && (size_t)found < n; pass++) {
		Elf32_Word want = pass == 0 ? SHT_DYNSYM : SHT_SYMTAB;

		scn = NULL;
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want)
				continue;
			scan_table(e, scn, &sh, syms, n, fd, &found);
		}
	}
	elf_end(e);
	close(fd);
	return found;
}

int nt_cuda_elf_classify(const char *path)
{
	struct nt_cuda_sym s[4] = {
		{ .name = "cudaMalloc" }, { .name = "cudaLaunchKernel" },
		{ .name = "cuInit" }, { .name = "cuLaunchKernel" },
	};
	int r = nt_cuda_elf_lookup(path, s, 4);

	if (r < 0)
		return r;
	if (s[0].offset && s[1].offset)
		return NT_CUDA_LIB_RUNTIME;
	if (s[2].offset && s[3].offset)
		return NT_CUDA_LIB_DRIVER;
	return NT_CUDA_LIB_NONE;
}

static const char *base_of(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

bool nt_cuda_name_is_runtime(const char *path)
{
	return strncmp(base_of(path), "libcudart.so", 12) == 0;
}

bool nt_cuda_name_is_driver(const char *path)
{
	return strncmp(base_of(path), "libcuda.so", 10) == 0;
}

/* The mappings the probe can attach to: executable, file-backed, the file
 * still there (" (deleted)" files cannot be probed by path). */
static bool map_from_kit(const struct nt_map *k, struct nt_cuda_map *m)
{
	if (k->path[0] != '/' || !k->inode || k->perms[2] != 'x' || k->deleted)
		return false;
	m->start = k->start;
	m->end = k->end;
	m->offset = k->offset;
	m->ino = k->inode;
	m->dev_major = k->dev_major;
	m->dev_minor = k->dev_minor;
	m->path = k->path;
	return true;
}

bool nt_cuda_parse_maps_line(char *line, struct nt_cuda_map *m)
{
	struct nt_map k;

	return nt_maps_parse_line(line, &k) && map_from_kit(&k, m);
}

/* nt_cuda_scan_maps's walk: the inodes seen, so each file is passed once. */
struct scan_maps {
	nt_cuda_map_fn fn;
	void *arg;
	uint64_t seen[512];
	size_t nseen;
	bool stopped; /* fn asked to stop */
};

static int scan_maps_one(void *arg, const struct nt_map *k)
{
	struct scan_maps *w = arg;
	struct nt_cuda_map m;

	if (!map_from_kit(k, &m))
		return 0;
	for (size_t i = 0; i < w->nseen; i++)
		if (w->seen[i] == m.ino)
			return 0;
	if (w->nseen < sizeof(w->seen) / sizeof(w->seen[0]))
		w->seen[w->nseen++] = m.ino;
	if (w->fn(w->arg, &m)) {
		w->stopped = true;
		return 1;
	}
	return 0;
}

int nt_cuda_scan_maps(uint32_t pid, nt_cuda_map_fn fn, void *arg)
{
	struct scan_maps w = { .fn = fn, .arg = arg };
	int err = nt_proc_maps_foreach(pid, scan_maps_one, &w);

	return w.stopped ? 0 : err;
}

void nt_cuda_proc_path(uint32_t pid, const char *path, char *out, size_t n)
{
	struct stat st;

	if (pid && path[0] == '/') {
		snprintf(out, n, "/proc/%u/root%s", pid, path);
		if (stat(out, &st) == 0)
			return;
	} else if (pid) {
		snprintf(out, n, "/proc/%u/cwd/%s", pid, path);
		if (stat(out, &st) == 0)
			return;
	}
	snprintf(out, n, "%s", path);
}

int nt_cuda_for_each_pid(int (*fn)(void *arg, uint32_t pid), void *arg)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || pid == (unsigned long)getpid())
			continue;
		if (fn(arg, (uint32_t)pid))
			break;
	}
	closedir(d);
	return 0;
}

void nt_cuda_glob_each(const char *const *pats, size_t n,
		       void (*fn)(void *arg, const char *path), void *arg)
{
	for (size_t i = 0; i < n; i++) {
		glob_t g;

		if (glob(pats[i], 0, NULL, &g) != 0)
			continue;
		for (size_t k = 0; k < g.gl_pathc; k++)
			fn(arg, g.gl_pathv[k]);
		globfree(&g);
	}
}

struct files_ctx {
	void (*fn)(void *arg, const char *path, uint32_t pid);
	void *arg;
	uint32_t pid;
};

static int files_cb(void *arg, const struct nt_cuda_map *m)
{
	struct files_ctx *fc = arg;
	char p[4096 + 64];

	nt_cuda_proc_path(fc->pid, m->path, p, sizeof(p));
	fc->fn(fc->arg, p, fc->pid);
	return 0;
}

int nt_cuda_scan_files(uint32_t pid,
		       void (*fn)(void *arg, const char *path, uint32_t pid),
		       void *arg)
{
	struct files_ctx fc = { fn, arg, pid };

	return nt_cuda_scan_maps(pid, files_cb, &fc);
}
