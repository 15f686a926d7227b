/* SPDX-License-Identifier: MIT */
/*
 * net probe: where the cgroup v2 hierarchy is mounted, for the cgroup
 * sock_release program that sees UDP sockets end (attached at its root).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"

#include "net_int.h"

int net_find_cgroup2(const char *mounts, char *out, size_t outlen)
{
	const char *line = mounts;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		char dev[64], dir[512], type[64];
		char tmp[1024];

		if (ll < sizeof(tmp)) {
			memcpy(tmp, line, ll);
			tmp[ll] = '\0';
			if (sscanf(tmp, "%63s %511s %63s", dev, dir, type) == 3 &&
			    strcmp(type, "cgroup2") == 0) {
				if (strlen(dir) >= outlen)
					return -ENAMETOOLONG;
				strcpy(out, dir);
				return 0;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int net_cgroup2_root_fd(struct net_state *st)
{
	char buf[16384], dir[512];
	ssize_t n = nt_file_read("/proc/self/mounts", buf, sizeof(buf));
	int fd;

	if (n < 0)
		return (int)n;
	if (net_find_cgroup2(buf, dir, sizeof(dir)) < 0)
		return -ENOENT;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	nt_log_dbg(st, "cgroup v2 root: %s", dir);
	return fd;
}
