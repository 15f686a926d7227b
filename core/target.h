/* SPDX-License-Identifier: MIT */
/*
 * The target set: host-wide, or a set of processes (from -p and the -- CMD
 * child) held in a BPF hash map that every probe reuses by fd and that the
 * core's follow program keeps up to date across forks and exits.
 */
#ifndef NTCORE_CORE_TARGET_H
#define NTCORE_CORE_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct follow_bpf;
struct ring_buffer;

typedef int (*nt_exit_fn)(void *ctx, void *data, size_t size);

struct nt_targets {
	bool filtered;     /* false: host-wide */
	bool known_exits;  /* host-wide: exits of nt_targets_known pids */
	int known_fd;      /* the follow program's nt_known map, or -1 */
	bool by_cgroup;    /* --cgroup: the follow program adds the processes
			    * of the target cgroups (nt_targets_add_cgroup) */
	int map_fd;        /* -1 when host-wide */
	struct follow_bpf *skel;
	struct ring_buffer *exits;
	uint32_t *pids;    /* the pids given at start (for target_pids) */
	size_t n_pids, cap_pids;
};

/* Create the map and load the follow program when `filtered`. exit_type
 * and exec_type are the proc.exit and proc.exec type ids; on_record
 * receives both kinds of records. */
/* known_exits: also when host-wide, load the follow program so that the
 * exit of a process passed to nt_targets_known comes as a proc.exit record
 * flagged NT_EXIT_IDENTITY_ONLY (the core forgets its identity). */
int nt_targets_open(struct nt_targets *t, bool filtered, bool by_cgroup,
		    bool known_exits, uint32_t exit_type, uint32_t exec_type,
		    nt_exit_fn on_record, void *ctx, char *why, size_t why_len);
/* Report this pid's exit (thread-safe; a no-op without known_exits). */
void nt_targets_known(struct nt_targets *t, uint32_t pid);
int nt_targets_add(struct nt_targets *t, uint32_t pid);
/* Follow every process in the cgroup v2 subtree at `path` (absolute, or
 * relative to the cgroup2 mount), now and later: its id goes into the
 * follow program's map, and the processes already there into the target
 * map. Returns how many processes were there, or -1 with `why` set. */
int nt_targets_add_cgroup(struct nt_targets *t, const char *path, char *why,
			  size_t why_len);
/* The cgroup2 mount point ("/sys/fs/cgroup", "/sys/fs/cgroup/unified" on
 * hybrid hosts) into buf; -1 when cgroup2 is not mounted. */
int nt_cgroup2_mount(char *buf, size_t len);
bool nt_targets_contains(const struct nt_targets *t, uint32_t pid);
/* Epoll fd of the exit ring buffer, -1 when host-wide. */
int nt_targets_exit_fd(const struct nt_targets *t);
int nt_targets_drain(struct nt_targets *t);
void nt_targets_close(struct nt_targets *t);

/* Fork a child that waits at a gate, then execs argv. Returns its pid and the
 * gate's write end in *gate_fd, or -1. */
pid_t nt_child_spawn(char *const argv[], int *gate_fd);
/* Let the child exec (closes the gate), with env ("NAME=VALUE" strings)
 * added to its environment first. */
void nt_child_release(int gate_fd, char *const *env, size_t n_env);

/* Mount tracefs at /sys/kernel/tracing when absent (classic tracepoints). */
void nt_ensure_tracefs(void);

#endif
