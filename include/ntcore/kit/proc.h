/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: what plugins read about processes from /proc.
 *
 * Every function returns a negative errno on failure; -ENOENT (or -ESRCH
 * from nt_proc_maps_foreach) means the process is gone. Output strings are
 * NUL-terminated and cut to the buffer.
 */
#ifndef NTCORE_KIT_PROC_H
#define NTCORE_KIT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Whether process `pid` exists: kill(pid, 0), no file read. A zombie
 * (exited, not yet reaped) still exists, and pid 0 (the idle task, which
 * the kernel reports as such) always does; use nt_proc_state to tell a
 * zombie.
 */
bool nt_proc_alive(uint32_t pid);
/*
 * The state letter ('R', 'S', 'D', 'Z', 'X', ...) of process pid (tid 0)
 * or of its thread tid, from /proc/PID/stat or /proc/PID/task/TID/stat; 0
 * when it is gone. proc_root is "/proc" when NULL (else, e.g., the host's
 * /proc seen from a container).
 */
char nt_proc_state(const char *proc_root, uint32_t pid, uint32_t tid);

/* Read up to size - 1 bytes of a (small, /proc) file into buf and
 * NUL-terminate; returns the bytes read or -errno. */
ssize_t nt_file_read(const char *path, char *buf, size_t size);

/* The name of process pid (tid 0) or of its thread tid, without the
 * newline: /proc/PID/comm or /proc/PID/task/TID/comm. Returns its length. */
int nt_proc_comm(uint32_t pid, uint32_t tid, char *out, size_t size);
/* The command line with its arguments joined by spaces ("" for a kernel
 * thread). Returns its length. */
int nt_proc_cmdline(uint32_t pid, char *out, size_t size);
/* The cgroup v2 path ("/user.slice/..."), from the "0::" line of
 * /proc/PID/cgroup, else the first line's path (cgroup v1). Returns its
 * length. */
int nt_proc_cgroup(uint32_t pid, char *out, size_t size);
/* The same from the text of a /proc/PID/cgroup file; -ENOENT when no line
 * has a path. Pure. */
int nt_cgroup_path(const char *text, char *out, size_t size);
/* The executable's path, the target of /proc/PID/exe. Returns its length. */
int nt_proc_exe(uint32_t pid, char *out, size_t size);

/* One line of /proc/PID/maps. */
struct nt_map {
	uint64_t start, end; /* addresses [start, end) */
	uint64_t offset;     /* file offset of start */
	uint64_t inode;      /* 0 for anonymous memory */
	uint32_t dev_major, dev_minor;
	char perms[5];       /* "r-xp" */
	bool deleted;        /* the file was deleted (" (deleted)" cut off) */
	const char *path;    /* "" when anonymous; "[heap]", "[stack]", ... */
	size_t path_len;
};

/* Parse one maps line (modified: the path is NUL-terminated in place).
 * false when it is not a maps line. Pure. */
bool nt_maps_parse_line(char *line, struct nt_map *m);
/*
 * Call fn for each mapping of pid in address order, the line read whole
 * however long. fn returns 0 to go on; anything else stops the walk and is
 * returned. Returns 0, fn's value, -ESRCH when the process is gone, or
 * -errno. The mapping is borrowed for the call.
 */
int nt_proc_maps_foreach(uint32_t pid,
			 int (*fn)(void *arg, const struct nt_map *m),
			 void *arg);

#endif /* NTCORE_KIT_PROC_H */
