/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: finding what to probe. ELF symbol lookup (file offsets for
 * uprobes, the first instruction at each), library classification (CUDA
 * runtime, driver, a runtime linked statically into an executable or a
 * shared object) and /proc/PID/maps scanning. Pure user space (libelf),
 * unit-tested against the fixture libraries. Shared with the nvlink probe
 * (libnccl), which compiles this file in.
 */
#ifndef NTCORE_CUDA_LIB_H
#define NTCORE_CUDA_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How the kernel's uprobe will handle the first instruction. */
enum nt_cuda_insn {
	NT_CUDA_INSN_UNKNOWN = 0,
	NT_CUDA_INSN_PUSH = 1,     /* push %reg: emulated, cheap */
	NT_CUDA_INSN_ENDBR = 2,    /* endbr64 then push: probe placed after it */
	NT_CUDA_INSN_OTHER = 3,    /* single-stepped: expensive */
	NT_CUDA_INSN_SIMULATED = 4,/* arm64: a branch or adr(p) the kernel
				    * simulates (kit/uprobe_insn.h) */
};

struct nt_cuda_sym {
	const char *name;  /* the wanted name (borrowed from the caller) */
	uint64_t offset;   /* file offset for the uprobe (0: not found) */
	int insn;          /* enum nt_cuda_insn at offset */
};

/*
 * Look up `n` function names in the ELF file at `path` (.dynsym, then
 * .symtab). Fills offset/insn of each found (defined FUNC symbols only;
 * when a function starts with endbr64 followed by a push, the offset is
 * moved past the endbr64 so the uprobe's first instruction is emulated).
 * Returns how many were found, or -errno when the file is not readable ELF
 * (-ENOEXEC also for a 32-bit or foreign-endian one: no CUDA process maps
 * one). The tables are read with pread, not mapped (cuda_lib.c says why).
 */
int nt_cuda_elf_lookup(const char *path, struct nt_cuda_sym *syms, size_t n);

/* Classify the first instruction bytes (at least 8 readable) for this
 * machine: x86-64 (push, endbr64+push) or AArch64 (simulated or stepped;
 * *skip stays 0: a uretprobe must sit on the entry). */
int nt_cuda_insn_classify(const uint8_t *b, size_t n, uint64_t *skip);
const char *nt_cuda_insn_name(int insn);

/* What a mapped object is to the probe, by the symbols it defines. */
enum nt_cuda_libkind {
	NT_CUDA_LIB_NONE = 0,
	NT_CUDA_LIB_RUNTIME = 1,   /* defines cudaMalloc and cudaLaunchKernel */
	NT_CUDA_LIB_DRIVER = 2,    /* defines cuInit and cuLaunchKernel */
};

/* Classify by symbols (-errno when not ELF). */
int nt_cuda_elf_classify(const char *path);

/* Basename helpers: "libcudart.so.13" is a runtime name, "libcuda.so.1" a
 * driver name (the probe still classifies by symbols). */
bool nt_cuda_name_is_runtime(const char *path);
bool nt_cuda_name_is_driver(const char *path);

/* One file-backed executable mapping of /proc/PID/maps. */
struct nt_cuda_map {
	uint64_t start, end, offset;
	uint64_t ino;
	uint32_t dev_major, dev_minor;
	const char *path;   /* valid during the callback */
};

typedef int (*nt_cuda_map_fn)(void *arg, const struct nt_cuda_map *m);

/* Parse one maps line; false if it is not a file-backed mapping. */
bool nt_cuda_parse_maps_line(char *line, struct nt_cuda_map *m);
/* Call fn once per distinct executable file of pid (first r-xp mapping);
 * fn returning non-zero stops. Returns 0 or -errno. */
int nt_cuda_scan_maps(uint32_t pid, nt_cuda_map_fn fn, void *arg);

/* A path as process `pid` sees it (its root or cwd), openable from here;
 * `path` itself when that does not exist or pid is 0. */
void nt_cuda_proc_path(uint32_t pid, const char *path, char *out, size_t n);
/* fn(arg, path, pid) for every distinct executable file pid maps, the path
 * openable from here (nt_cuda_proc_path). Returns 0 or -errno. */
int nt_cuda_scan_files(uint32_t pid,
		       void (*fn)(void *arg, const char *path, uint32_t pid),
		       void *arg);
/* fn(arg, path) for every file matching one of the n glob patterns (a
 * pattern without wildcards: the file, when it exists). */
void nt_cuda_glob_each(const char *const *pats, size_t n,
		       void (*fn)(void *arg, const char *path), void *arg);
/* fn(arg, pid) for every process but this one; fn returning non-zero
 * stops. Returns 0 or -errno when /proc cannot be read. */
int nt_cuda_for_each_pid(int (*fn)(void *arg, uint32_t pid), void *arg);

#endif /* NTCORE_CUDA_LIB_H */
