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

/*
 * Symbol tables are read with pread through small buffers, never through
 * the file's mapping: looking for a few names walks the whole table, and
 * every page of a mapped table walked became part of ntcore's RSS. A
 * library with 36 MB of symbol tables raised the peak RSS from 17 to 52 MB
 * here; libtorch's tables are larger, and the cuda and nvlink probes each
 * walk every library of every target (a 109-124 MB peak on the GPU
 * machine). The page cache the reads go through is not the process's.
 */
#define SYM_CHUNK 2730         /* Elf64_Sym per read: 64 KiB */
#define STR_WINDOW (256 * 1024)

/* A window on a string table: names are mostly laid out in the order of
 * the symbols that use them, so one read serves many lookups. */
struct str_window {
	int fd;
	uint64_t table_off, table_size;
	uint64_t at;    /* the window's offset in the table */
	size_t len;     /* bytes read into buf */
	char *buf;
};

/* The NUL-terminated name at `off` in the table, or NULL (out of the table,
 * or longer than the window). */
static const char *window_name(struct str_window *w, uint64_t off)
{
	size_t want;
	ssize_t r;

	if (off >= w->table_size)
		return NULL;
	if (off >= w->at && off < w->at + w->len &&
	    memchr(w->buf + (off - w->at), '\0', w->len - (off - w->at)))
		return w->buf + (off - w->at);
	want = w->table_size - off < STR_WINDOW ? (size_t)(w->table_size - off)
						: STR_WINDOW;
	r = pread(w->fd, w->buf, want, (off_t)(w->table_off + off));
	w->at = off;
	w->len = r > 0 ? (size_t)r : 0;
	return w->len && memchr(w->buf, '\0', w->len) ? w->buf : NULL;
}

/* A window on the string table at section `strndx`, its buffer allocated
 * (free it); false, with nothing allocated, if that is not a string table
 * or there is no memory. */
static bool window_open(Elf *e, size_t strndx, int fd, struct str_window *w)
{
	Elf_Scn *scn = elf_getscn(e, strndx);
	GElf_Shdr sh;

	*w = (struct str_window){ .fd = fd };
	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB)
		return false;
	w->table_off = sh.sh_offset;
	w->table_size = sh.sh_size;
	w->buf = malloc(STR_WINDOW);
	return w->buf != NULL;
}

static bool wanted_func(const Elf64_Sym *s)
{
	int type = ELF64_ST_TYPE(s->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) &&
	       s->st_shndx != SHN_UNDEF && s->st_value;
}

/* Fill syms[k] (file offset past an endbr64, first instruction's class)
 * for the symbol `s` named syms[k].name, if not found before. */
static void sym_found(Elf *e, const Elf64_Sym *s, struct nt_cuda_sym *sym,
		      int fd, int *found)
{
	GElf_Sym gs = { .st_value = s->st_value, .st_shndx = s->st_shndx };
	uint8_t b[16];
	uint64_t off, skip;
	ssize_t r;

	if (sym->offset || !vaddr_to_off(e, &gs, &off))
		return;
	r = pread(fd, b, sizeof(b), (off_t)off);
	sym->insn = nt_cuda_insn_classify(b, r > 0 ? (size_t)r : 0, &skip);
	sym->offset = off + skip;
	(*found)++;
}

static void match_chunk(Elf *e, const Elf64_Sym *chunk, size_t cnt,
			struct str_window *w, struct nt_cuda_sym *syms,
			size_t n, int *found)
{
	for (size_t i = 0; i < cnt; i++) {
		const char *name;

		if (!wanted_func(&chunk[i]))
			continue;
		name = window_name(w, chunk[i].st_name);
		if (!name || !name[0])
			continue;
		for (size_t k = 0; k < n; k++)
			if (!syms[k].offset && !strcmp(syms[k].name, name))
				sym_found(e, &chunk[i], &syms[k], w->fd, found);
	}
}

/* One symbol table (a 64-bit one in this machine's byte order, the only
 * kind a CUDA process maps) and its string table, read chunk by chunk. */
static void scan_table(Elf *e, const GElf_Shdr *sh, struct nt_cuda_sym *syms,
		       size_t n, int fd, int *found)
{
	struct str_window w;
	Elf64_Sym *chunk;

	if (sh->sh_entsize != sizeof(Elf64_Sym) ||
	    !window_open(e, sh->sh_link, fd, &w))
		return;
	chunk = malloc(SYM_CHUNK * sizeof(*chunk));
	for (uint64_t at = 0; chunk && at < sh->sh_size && (size_t)*found < n;) {
		ssize_t r = pread(fd, chunk, SYM_CHUNK * sizeof(*chunk),
				  (off_t)(sh->sh_offset + at));

		if (r < (ssize_t)sizeof(*chunk))
			break;
		match_chunk(e, chunk, (size_t)r / sizeof(*chunk), &w, syms, n, found);
		at += (uint64_t)r - (uint64_t)r % sizeof(*chunk);
	}
	free(chunk);
	free(w.buf);
}

/* The GNU hash of a symbol name (the dynamic linker's, DT_GNU_HASH). */
static uint32_t gnu_hash(const char *name)
{
	uint32_t h = 5381;

	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	return h;
}

struct gnu_table {
	int fd;
	uint64_t off;          /* of the .gnu.hash section */
	uint32_t nbuckets, symoffset, bloom_words;
	uint64_t dynsym_off, dynsym_count;
	struct str_window *names;
};

/* The .dynsym index of `name` through the GNU hash table, or 0. Each step
 * is one small read: bucket, chain word, symbol, name. */
static uint32_t gnu_find(const struct gnu_table *t, const char *name,
			 Elf64_Sym *out)
{
	uint32_t h = gnu_hash(name), idx, word;
	uint64_t buckets = t->off + 16 + (uint64_t)t->bloom_words * 8;
	uint64_t chain = buckets + (uint64_t)t->nbuckets * 4;

	if (pread(t->fd, &idx, 4, (off_t)(buckets + (h % t->nbuckets) * 4)) != 4 ||
	    idx < t->symoffset)
		return 0;
	for (; idx < t->dynsym_count; idx++) {
		const char *n;

		if (pread(t->fd, &word, 4, (off_t)(chain + (uint64_t)(idx - t->symoffset) * 4)) != 4)
			return 0;
		if ((word | 1) == (h | 1) &&
		    pread(t->fd, out, sizeof(*out),
			  (off_t)(t->dynsym_off + (uint64_t)idx * sizeof(*out))) == sizeof(*out) &&
		    (n = window_name(t->names, out->st_name)) && !strcmp(n, name))
			return idx;
		if (word & 1)
			return 0;
	}
	return 0;
}

/* .dynsym through its GNU hash section `hs`: false when the file has none
 * the reader understands (then the table is walked). */
static bool lookup_gnu_hash(Elf *e, const GElf_Shdr *dynsym, const GElf_Shdr *hs,
			    struct nt_cuda_sym *syms, size_t n, int fd, int *found)
{
	uint32_t head[4];
	struct str_window w;
	struct gnu_table t = { .fd = fd, .off = hs->sh_offset, .names = &w,
			       .dynsym_off = dynsym->sh_offset,
			       .dynsym_count = dynsym->sh_size / sizeof(Elf64_Sym) };

	if (pread(fd, head, sizeof(head), (off_t)hs->sh_offset) != sizeof(head) ||
	    !head[0])
		return false;
	if (!window_open(e, dynsym->sh_link, fd, &w))
		return false;
	t.nbuckets = head[0];
	t.symoffset = head[1];
	t.bloom_words = head[2];
	for (size_t k = 0; k < n; k++) {
		Elf64_Sym s;

		if (!syms[k].offset && gnu_find(&t, syms[k].name, &s) && wanted_func(&s))
			sym_found(e, &s, &syms[k], fd, found);
	}
	free(w.buf);
	return true;
}

/* The GNU hash section over the symbol table at index `symidx`, if any. */
static bool gnu_hash_of(Elf *e, size_t symidx, GElf_Shdr *out)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, out) && out->sh_type == SHT_GNU_HASH &&
		    out->sh_link == symidx)
			return true;
	return false;
}

static bool native_elf64(Elf *e)
{
	const char *id = elf_getident(e, NULL);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const int data = ELFDATA2LSB;
#else
	const int data = ELFDATA2MSB;
#endif

	return id && id[EI_CLASS] == ELFCLASS64 && id[EI_DATA] == data;
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
	if (!e || elf_kind(e) != ELF_K_ELF || !native_elf64(e)) {
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
			GElf_Shdr sh, hs;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want)
				continue;
			if (want == SHT_DYNSYM && sh.sh_entsize == sizeof(Elf64_Sym) &&
			    gnu_hash_of(e, elf_ndxscn(scn), &hs) &&
			    lookup_gnu_hash(e, &sh, &hs, syms, n, fd, &found))
				continue;
			scan_table(e, &sh, syms, n, fd, &found);
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
