/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: BPF links released together.
 *
 * Releasing a uprobe, a uprobe_multi link or a perf-event tracepoint makes
 * the kernel wait for an RCU grace period (synchronize_rcu_tasks_trace and
 * friends) before close() returns: 40 to 90 ms each on the project's VMs,
 * so a probe holding eight links took half a second to detach. Waits that
 * run at the same time share their grace period, so a set released from
 * several threads at once costs about one.
 *
 *   struct nt_linkset ls = {0};
 *   nt_linkset_add(&ls, link);         // a struct bpf_link *, or
 *   nt_linkset_add_fd(&ls, fd);        // a raw link fd (uprobe_multi)
 *   nt_linkset_release(&ls);           // all of them, in parallel
 *
 * Ownership: the set owns what was added (NULL links and negative fds are
 * ignored) until nt_linkset_release, which destroys or closes each exactly
 * once and leaves the set empty and reusable. Not thread-safe itself.
 */
#ifndef NTCORE_KIT_LINKS_H
#define NTCORE_KIT_LINKS_H

#include <stddef.h>

struct bpf_link;
struct bpf_object_skeleton;

struct nt_linkset {
	struct bpf_link **links;
	size_t n_links, cap_links;
	int *fds;
	size_t n_fds, cap_fds;
};

/* 0, or -ENOMEM (the link is then destroyed at once, never leaked). */
int nt_linkset_add(struct nt_linkset *ls, struct bpf_link *link);
int nt_linkset_add_fd(struct nt_linkset *ls, int fd);
/* Take the links a skeleton's attach made (skel->links.*): they move to
 * the set and the skeleton's slots become NULL, so that its destroy does
 * not destroy them again. Pass skel->skeleton. */
void nt_linkset_take_skeleton(struct nt_linkset *ls,
			      struct bpf_object_skeleton *s);
/* Destroy every link and close every fd, from up to `NT_LINKSET_THREADS`
 * threads at once (inline where a thread cannot be started). */
void nt_linkset_release(struct nt_linkset *ls);
/* The same for links held elsewhere: destroys links[0..n) and closes
 * fds[0..nfds) in parallel (entries are not changed; NULL/negative skipped). */
void nt_links_release_parallel(struct bpf_link *const *links, size_t n,
			       const int *fds, size_t nfds);

#define NT_LINKSET_THREADS 32

#endif /* NTCORE_KIT_LINKS_H */
