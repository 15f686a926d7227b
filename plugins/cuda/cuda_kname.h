/* SPDX-License-Identifier: MIT */
/*
 * Attach-time kernel names (issue 19): names of kernels whose handles were
 * made before ntcore attached, found without the call that made them.
 *
 * - join: a runtime launch (named by its host stub's symbol) followed on the
 *   same thread, within NT_CUDA_JOIN_NS, by a driver launch seen for the
 *   first time: the runtime made that driver launch, the driver handle gets
 *   the runtime launch's name;
 * - memory: a driver handle (CUfunction / CUkernel) points to the driver's
 *   struct, which holds a pointer to the function's NUL-terminated name. The
 *   offset of that pointer is learned, not assumed: for handles whose name
 *   is known (a cuModuleGetFunction seen after the attach, a join), each
 *   8-aligned slot of the struct's first NT_CUDA_KOFF_SPAN bytes that points
 *   to the same name is a vote; an offset with NT_CUDA_KOFF_NEED votes and
 *   none against is used for unknown handles, each result checked
 *   (identifier-like, a `_Z` name must demangle). With no known name at
 *   all (a steady job at the driver layer makes no handle after the
 *   attach), the offset is guessed from the unknown handles themselves:
 *   once NT_CUDA_KOFF_GUESS_MIN handles or more were looked at, the
 *   lowest slot where 4 in 5 of them point to a plausible name, all
 *   different (a module's name, shared by
 *   its kernels, is not taken; the lowest, since the next function's
 *   struct may follow this one). A known name later overrules a guess.
 *
 * Pure apart from nt_cuda_mem_read_proc (process_vm_readv); memory is read
 * through a callback so the unit test feeds synthetic memory.
 */
#ifndef NT_CUDA_KNAME_H
#define NT_CUDA_KNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ntcore/kit/hmap.h"

#define NT_CUDA_KOFF_SPAN 512          /* bytes of a handle's struct searched */
#define NT_CUDA_KOFF_SLOTS (NT_CUDA_KOFF_SPAN / 8)
#define NT_CUDA_KOFF_NEED 3            /* known handles that must agree */
#define NT_CUDA_KOFF_NAME_MAX 1024     /* longest name read */
#define NT_CUDA_KOFF_GUESS_MIN 8       /* unknown handles before a guess */
#define NT_CUDA_KOFF_GUESS_MAX 32      /* unknown handles looked at at most */
#define NT_CUDA_JOIN_NS 2000000ull     /* runtime -> driver launch, same thread */
#define NT_CUDA_JOIN_TIDS 16           /* threads remembered per process */

/* How a kernel got its name (the label `method` of
 * ntcore_cuda_launches_named_total). */
enum nt_cuda_kname_method {
	NT_KNAME_NONE = 0,   /* unnamed: the handle in hex */
	NT_KNAME_LOAD,       /* cuModuleGetFunction / cuLibraryGetKernel seen */
	NT_KNAME_SYMBOL,     /* runtime launch: the host stub's symbol */
	NT_KNAME_JOIN,       /* driver launch made by a named runtime launch */
	NT_KNAME_MEMORY,     /* read from the driver's struct */
	NT_KNAME_METHODS
};
const char *nt_cuda_kname_method_name(int method);

/* Reads len bytes of pid's memory at addr into buf; returns the bytes read
 * (may be fewer) or -errno. */
typedef ssize_t (*nt_cuda_mem_fn)(void *arg, uint32_t pid, uint64_t addr,
				  void *buf, size_t len);
/* The real reader (process_vm_readv, page by page). arg unused. */
ssize_t nt_cuda_mem_read_proc(void *arg, uint32_t pid, uint64_t addr,
			      void *buf, size_t len);

/* The offset learner: one per decoder (the offset is the driver's, shared
 * by every process of one driver version). */
struct nt_cuda_koff {
	uint16_t agree[NT_CUDA_KOFF_SLOTS];    /* known handles named right */
	uint16_t disagree[NT_CUDA_KOFF_SLOTS]; /* known handles named wrong */
	int offset;                /* learned byte offset, -1 none yet */
	bool guessed;              /* offset from unknown handles only */
	uint32_t nobs;             /* unknown handles looked at (guess) */
	uint64_t obs[NT_CUDA_KOFF_GUESS_MAX][NT_CUDA_KOFF_SLOTS]; /* hash of
	                              a plausible name per slot, 0 none */
	bool announced;            /* the plugin logged the offset */
	uint32_t taught;           /* known handles looked at */
	uint64_t confirmed;        /* known handles named right once learned */
	uint64_t contradicted;     /* known handles named wrong once learned */
	uint64_t named;            /* unknown handles named */
	uint64_t refused;          /* unknown handles whose result failed checks */
};

void nt_cuda_koff_init(struct nt_cuda_koff *k);
/* A driver handle of pid whose name is known (raw mangled or demangled):
 * vote. Returns 1 when this vote made the offset learned, else 0. */
int nt_cuda_koff_teach(struct nt_cuda_koff *k, nt_cuda_mem_fn mem, void *arg,
		       uint32_t pid, uint64_t handle, const char *name);
/* An unknown driver handle seen for the first time: while nothing is
 * learned, look at it for a guess. Returns 1 when this made a guess. */
int nt_cuda_koff_observe(struct nt_cuda_koff *k, nt_cuda_mem_fn mem,
			 void *arg, uint32_t pid, uint64_t handle);
/* The name an unknown handle's struct points to at the learned offset,
 * demangled when mangled (malloc'd), or NULL (no offset yet, unreadable,
 * failed the checks). */
char *nt_cuda_koff_name(struct nt_cuda_koff *k, nt_cuda_mem_fn mem,
			void *arg, uint32_t pid, uint64_t handle);
/* Is s a plausible kernel name (identifier characters, a `_Z` name
 * demangles)? */
bool nt_cuda_kname_plausible(const char *s);

/* Per process: how each handle was named, and each thread's last runtime
 * launch seen for the first time (for the join). */
struct nt_cuda_kn_join {
	uint32_t tid;
	uint64_t ts_ns;
	uint64_t func;            /* runtime func (host stub) */
};
struct nt_cuda_knproc {
	struct nt_hmap method;    /* u64 handle -> u8 enum nt_cuda_kname_method */
	struct nt_cuda_kn_join last[NT_CUDA_JOIN_TIDS];
	uint32_t next;            /* round robin over last[] */
};
void nt_cuda_knproc_init(struct nt_cuda_knproc *kp);
void nt_cuda_knproc_fini(struct nt_cuda_knproc *kp);
void nt_cuda_kn_set_method(struct nt_cuda_knproc *kp, uint64_t handle,
			   int method);
int nt_cuda_kn_method(const struct nt_cuda_knproc *kp, uint64_t handle);
/* A runtime launch seen for the first time on tid at ts. */
void nt_cuda_kn_note_runtime(struct nt_cuda_knproc *kp, uint32_t tid,
			     uint64_t ts_ns, uint64_t func);
/* A driver launch seen for the first time on tid at ts: the runtime func
 * that made it (taken: it joins once), or 0. */
uint64_t nt_cuda_kn_join_driver(struct nt_cuda_knproc *kp, uint32_t tid,
				uint64_t ts_ns);

#endif
