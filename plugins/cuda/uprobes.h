/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: the uprobes one probe put on one file, attached a program
 * at a time: one uprobe_multi link per program where the kernel has them
 * (Linux 6.6+; attach and detach in milliseconds), else one perf-event
 * uprobe per offset. Shared with the nvlink probe (libnccl), which
 * compiles this file in. Ownership: the set owns its links and fds until
 * nt_uprobes_release.
 */
#ifndef NTCORE_CUDA_UPROBES_H
#define NTCORE_CUDA_UPROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bpf_program;
struct bpf_link;

struct nt_uprobes {
	struct bpf_link **links; /* perf-event uprobes, one per probe */
	size_t nlinks, caplinks;
	int mfds[8];             /* uprobe_multi links, one per program */
	size_t nmfds;
	size_t nprobes;          /* probes attached, both kinds */
};

/* Called for each perf-event uprobe that fails (errno-style `err`). */
typedef void (*nt_uprobes_warn_fn)(void *arg, const char *path,
				   const char *name, bool ret, int err);

/*
 * Attach `prog` at n file offsets of `path`, each with its BPF cookie,
 * entry probes or (`ret`) return probes: one uprobe_multi link when `multi`
 * (the program was loaded for it), else one perf-event uprobe each (a
 * failure is passed to warn and skipped). Returns the probes attached, or
 * -errno when the uprobe_multi link was refused (nothing attached).
 */
int nt_uprobes_attach(struct nt_uprobes *u, struct bpf_program *prog,
		      const char *path, bool ret, bool multi,
		      const uint64_t *offs, const uint64_t *cookies,
		      const char *const *names, size_t n,
		      nt_uprobes_warn_fn warn, void *arg);
/* Detach everything and free; the set is empty (and reusable) after. */
void nt_uprobes_release(struct nt_uprobes *u);
/* Hand every link over to `ls` (released later, in parallel with others:
 * kit/links.h); the set is empty (and reusable) after. */
struct nt_linkset;
void nt_uprobes_move(struct nt_uprobes *u, struct nt_linkset *ls);

#endif /* NTCORE_CUDA_UPROBES_H */
