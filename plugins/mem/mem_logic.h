/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the parts that need no kernel, compiled into mem.so and into
 * tests/unit/test_mem.c, one file each: allocator names (mem_fns.c),
 * attach-point choice from the first instructions of a function
 * (mem_insn.c), the C library's path from maps or `ldconfig -p`
 * (mem_libcname.c), ELF symbol lookup (mem_elf.c), grouping of outstanding
 * allocations by stack (mem_groups.c), frame text (mem_frames.c), the
 * per-process stack-text cache (mem_symcache.c) and the report text
 * (mem_text.c).
 */
#ifndef NTCORE_MEM_LOGIC_H
#define NTCORE_MEM_LOGIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/hmap.h"
#include "ntcore/plugin.h"

/* ---- allocator functions ---------------------------------------- */

/* Name of an enum mem_fn value ("malloc"), NULL if out of range. */
const char *mem_fn_name(unsigned fn);
/* enum mem_fn for a name, or -1. Only heap functions (not mmap/munmap). */
int mem_fn_from_name(const char *name);
/* True for functions whose return value is needed (get a uretprobe). */
bool mem_fn_needs_return(unsigned fn);

/* ---- first instructions ----------------------------------------- */

enum mem_insn_class {
	MEM_INSN_UNKNOWN = 0, /* not decoded: the kernel single-steps it */
	MEM_INSN_EMULATED,    /* the kernel emulates it: cheap uprobe */
	MEM_INSN_SKIPPABLE,   /* changes only flags, rax, r10 or r11: a probe
			       * after it sees the same arguments and stack */
};

struct mem_insn {
	uint32_t len;
	int cls; /* enum mem_insn_class */
	char text[40];
};

/* Decode one x86-64 instruction at p (n bytes readable). Instructions the
 * decoder does not know come back MEM_INSN_UNKNOWN with len 0. */
void mem_insn_decode(const uint8_t *p, size_t n, struct mem_insn *out);

struct mem_attach_point {
	uint32_t skip;              /* bytes after the symbol to probe at */
	struct mem_insn first;      /* the function's first instruction */
	struct mem_insn at;         /* the instruction probed */
	bool emulated;              /* `at` is emulated by the kernel */
};

/* The instruction set of the code to probe: the machine's own. */
enum mem_isa {
	MEM_ISA_OTHER = 0, /* not decoded: every probe on the entry, cost unknown */
	MEM_ISA_X86_64,
	MEM_ISA_AARCH64,
};
#if defined(__x86_64__)
#define MEM_ISA_HOST MEM_ISA_X86_64
#elif defined(__aarch64__)
#define MEM_ISA_HOST MEM_ISA_AARCH64
#else
#define MEM_ISA_HOST MEM_ISA_OTHER
#endif

/*
 * Choose where to put a uprobe in a function whose first bytes are
 * code[0..n) (n <= size of the function), for this machine's instruction
 * set. x86-64: with allow_skip, leading skippable instructions (at most 3,
 * within n bytes) are passed over when an emulated instruction follows;
 * otherwise the probe goes on the entry. AArch64: always the entry (a
 * uretprobe must see x30 before the prologue saves it); `emulated` says
 * whether the kernel simulates the first instruction (kit/uprobe_insn.h).
 */
void mem_choose_attach(const uint8_t *code, size_t n, bool allow_skip,
		       struct mem_attach_point *out);
/* The same for a given enum mem_isa (tests read both on any machine). */
void mem_choose_attach_isa(int isa, const uint8_t *code, size_t n,
			   bool allow_skip, struct mem_attach_point *out);

/* ---- finding the C library -------------------------------------- */

/* Is this path a C library (glibc libc.so.6 / libc-2.x.so, musl)? */
bool mem_is_libc_path(const char *path);
/* First C library mapped in a /proc/PID/maps text; 0 or -ENOENT. */
int mem_maps_find_libc(const char *maps, char *out, size_t outlen);
struct nt_map;
/* 0 and its path in out when m maps a C library; -ENOENT when not;
 * -ENAMETOOLONG when the path does not fit. */
int mem_map_libc(const struct nt_map *m, char *out, size_t outlen);
/* The libc.so.6 line of `ldconfig -p` output for this machine's ABI;
 * 0 or -ENOENT. */
int mem_ldconfig_find_libc(const char *text, char *out, size_t outlen);

/* ---- ELF -------------------------------------------------------- */

struct mem_elf_func {
	uint64_t vaddr;
	uint64_t file_off;  /* what uprobes take */
	uint64_t size;
	uint8_t code[16];
	uint32_t code_len;
};

/* Look up a defined function in .dynsym (then .symtab). 0, -ENOENT when
 * absent, -ENOTSUP for an IFUNC, other negative errno on I/O errors. */
int mem_elf_find_func(const char *path, const char *name,
		      struct mem_elf_func *out);

/* ---- grouping outstanding allocations by stack ------------------- */

struct mem_group {
	uint32_t tgid;
	int32_t stack_id;
	uint32_t kind;   /* enum mem_kind */
	uint64_t bytes;  /* outstanding bytes (weighted) */
	uint64_t count;  /* outstanding allocations (weighted) */
	uint64_t oldest_ns;
};

struct mem_groups {
	struct nt_hmap map; /* struct mem_group by (tgid, stack_id, kind) */
};

void mem_groups_init(struct mem_groups *g);
void mem_groups_free(struct mem_groups *g);
void mem_groups_reset(struct mem_groups *g);
int mem_groups_add(struct mem_groups *g, uint32_t tgid, int32_t stack_id,
		   uint32_t kind, uint64_t bytes, uint64_t count,
		   uint64_t ts_ns);
/* Up to max groups of tgid, most bytes first (then most allocations,
 * then lowest stack id); returns how many were written. *total_groups
 * (optional) gets the number of groups of tgid. */
size_t mem_groups_top(const struct mem_groups *g, uint32_t tgid,
		      struct mem_group *out, size_t max, size_t *total_groups);

/* Every group in one array sorted by tgid, then as mem_groups_top orders
 * them (caller frees); *n gets the count. NULL when empty or out of memory. */
struct mem_group *mem_groups_sorted(const struct mem_groups *g, size_t *n);
/* The run of tgid's groups in a sorted array; *count gets its length. */
const struct mem_group *mem_groups_find(const struct mem_group *sorted, size_t n,
					uint32_t tgid, size_t *count);

/* ---- stack text ------------------------------------------------- */

/* One frame: "name+0xoff (module)", or "module+0xoff" (no symbol: the
 * offset in the module, as addr2line takes it), or "0xaddr". Never holds
 * ';' (the frame separator). */
void mem_format_frame(char *buf, size_t len, uint64_t addr, int sym_rc,
		      const struct nt_symbol *sym);
/* Has a frame-pointer walk gone past the real stack at `addr`? An address
 * in no mapped file, the previous frame again (prev_addr), or an unnamed
 * address inside the dynamic loader (beyond _start). */
bool mem_frame_implausible(uint64_t addr, uint64_t prev_addr, int sym_rc,
			   const struct nt_symbol *sym);
/* Allocator plumbing a leak should not be blamed on (operator new,
 * malloc wrappers of the C library itself). */
bool mem_frame_is_allocator(const char *name, const char *module,
			    const char *alloc_module);

struct mem_stack_text {
	uint32_t tgid;
	int32_t stack_id;
	char *text;     /* frames, root first, ';'-separated (folded) */
	char *function; /* the allocating function's name (never NULL) */
	bool incomplete; /* some frame's module was unknown: worth a retry */
};

struct mem_symcache {
	struct nt_hmap map; /* struct mem_stack_text by (tgid, stack_id) */
};

void mem_symcache_init(struct mem_symcache *c);
void mem_symcache_free(struct mem_symcache *c);
const struct mem_stack_text *mem_symcache_get(const struct mem_symcache *c,
					      uint32_t tgid, int32_t stack_id);
/* Copies text and function; replaces an existing entry. */
int mem_symcache_put(struct mem_symcache *c, uint32_t tgid, int32_t stack_id,
		     const char *text, const char *function, bool incomplete);
void mem_symcache_forget(struct mem_symcache *c, uint32_t tgid);

/* ---- numbers and the report ------------------------------------- */

/* /proc/PID/statm: size resident shared ... in pages. 0 or -EINVAL. */
int mem_parse_statm(const char *text, uint64_t *size, uint64_t *resident,
		    uint64_t *shared);

struct mem_report_proc {
	uint32_t pid;
	const char *comm;
	bool final;
	bool heap; /* heap counters below are meaningful */
	int64_t live_bytes, live_allocs, peak_bytes, mmap_live_bytes;
	uint64_t allocs, frees;
	bool rss;
	uint64_t rss_bytes, peak_rss_bytes;
};

struct mem_report_line {
	const struct mem_group *g;
	const char *text;     /* stack text, or NULL */
	const char *function; /* or NULL */
};

/*
 * The mem.report text for one process: a summary line, then one line per
 * stack. Returns the length written (like snprintf, may exceed len - 1 when
 * truncated), buf always NUL-terminated.
 */
size_t mem_format_report(char *buf, size_t len, const struct mem_report_proc *p,
			 const struct mem_report_line *lines, size_t n_lines,
			 size_t total_groups);

#endif /* NTCORE_MEM_LOGIC_H */
