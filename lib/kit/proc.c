/* SPDX-License-Identifier: MIT */
/* Plugin kit: process liveness, names, cgroup and mappings from /proc. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/kit/proc.h"

bool nt_proc_alive(uint32_t pid)
{
	if (pid == 0)
		return true;
	if (pid > INT_MAX) /* kill() would take it for a process group */
		return false;
	return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

ssize_t nt_file_read(const char *path, char *buf, size_t size)
{
	size_t got = 0;
	int fd;

	if (!size)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got < size - 1) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

char nt_proc_state(const char *proc_root, uint32_t pid, uint32_t tid)
{
	char path[PATH_MAX], stat[256];
	const char *paren;

	if (!proc_root)
		proc_root = "/proc";
	if (tid)
		snprintf(path, sizeof(path), "%s/%u/task/%u/stat", proc_root, pid, tid);
	else
		snprintf(path, sizeof(path), "%s/%u/stat", proc_root, pid);
	if (nt_file_read(path, stat, sizeof(stat)) <= 0)
		return 0;
	/* "pid (comm) S ...": comm may hold ')' itself, so the last one. */
	paren = strrchr(stat, ')');
	if (!paren || paren[1] != ' ' || !paren[2])
		return 0;
	return paren[2];
}

int nt_proc_comm(uint32_t pid, uint32_t tid, char *out, size_t size)
{
	char path[64];
	ssize_t n;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	n = nt_file_read(path, out, size);
	if (n < 0)
		return (int)n;
	if (n > 0 && out[n - 1] == '\n')
		out[--n] = '\0';
	return (int)n;
}

int nt_proc_cmdline(uint32_t pid, char *out, size_t size)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	n = nt_file_read(path, out, size);
	if (n < 0)
		return (int)n;
	while (n > 0 && out[n - 1] == '\0')
		n--; /* the terminator of the last argument */
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\0')
			out[i] = ' ';
	out[n] = '\0';
	return (int)n;
}

/* The path field of a "hierarchy:controllers:path" line, or NULL. */
static const char *cgroup_line_path(const char *line)
{
	const char *end = line + strcspn(line, "\n");
	const char *c = memchr(line, ':', (size_t)(end - line));

	if (c)
		c = memchr(c + 1, ':', (size_t)(end - c - 1));
	return c ? c + 1 : NULL;
}

int nt_cgroup_path(const char *text, char *out, size_t size)
{
	const char *pick = NULL;
	size_t len;

	if (!size)
		return -EINVAL;
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		const char *path = cgroup_line_path(line);
		bool v2 = strncmp(line, "0::", 3) == 0;

		if (path && (v2 || !pick))
			pick = path;
		if (v2 || !nl)
			break;
		line = nl + 1;
	}
	if (!pick)
		return -ENOENT;
	len = strcspn(pick, "\n");
	if (len >= size)
		len = size - 1;
	memcpy(out, pick, len);
	out[len] = '\0';
	return (int)len;
}

int nt_proc_cgroup(uint32_t pid, char *out, size_t size)
{
	char path[64], text[8192];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	if ((n = nt_file_read(path, text, sizeof(text))) < 0)
		return (int)n;
	return nt_cgroup_path(text, out, size);
}

int nt_proc_exe(uint32_t pid, char *out, size_t size)
{
	char path[64];
	ssize_t n;

	if (!size)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, out, size - 1);
	if (n < 0)
		return -errno;
	out[n] = '\0';
	return (int)n;
}
