/* SPDX-License-Identifier: MIT */
/*
 * mem probe: which C library a process allocates from (its maps, or the
 * daemon's own for the -- CMD child that has not exec'd yet).
 */
#include <linux/types.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"
#include <dlfcn.h>
#include <link.h>

/* The C library a freshly started program gets from the dynamic linker:
 * the one this daemon was linked against (same ABI), else `ldconfig -p`. */
int mem_resolve_self_libc(struct mem_state *st, char *out, size_t len)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	struct link_map *lm = NULL;
	char text[65536];
	FILE *f;

	if (h) {
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name &&
		    lm->l_name[0] == '/') {
			char real[PATH_MAX];

			snprintf(out, len, "%s", realpath(lm->l_name, real) ? real : lm->l_name);
			dlclose(h);
			return 0;
		}
		dlclose(h);
	}
	f = popen("ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null", "re");
	if (f) {
		size_t n = fread(text, 1, sizeof(text) - 1, f);

		text[n] = '\0';
		pclose(f);
		if (mem_ldconfig_find_libc(text, out, len) == 0)
			return 0;
	}
	nt_log_err(st, "cannot find the C library (dlinfo and ldconfig -p failed); set library = \"/path/to/libc.so.6\"");
	return -ENOENT;
}

static bool same_mount_ns(uint32_t pid)
{
	char a[64], b[64], path[64];
	ssize_t na, nb;

	snprintf(path, sizeof(path), "/proc/%u/ns/mnt", pid);
	na = readlink("/proc/self/ns/mnt", a, sizeof(a) - 1);
	nb = readlink(path, b, sizeof(b) - 1);
	return na <= 0 || nb <= 0 || (na == nb && memcmp(a, b, (size_t)na) == 0);
}

/* The child of `-- CMD` waits, not yet exec'd, as a copy of this daemon. */
bool mem_proc_is_unexeced_child(struct mem_state *st, uint32_t pid)
{
	char exe[PATH_MAX];

	if (nt_proc_exe(pid, exe, sizeof(exe)) <= 0)
		return false;
	return strcmp(exe, st->self_exe) == 0;
}

struct libc_found {
	char path[PATH_MAX];
};

/* nt_proc_maps_foreach callback: 1 (stop) at the first C library. */
static int first_libc(void *arg, const struct nt_map *m)
{
	struct libc_found *found = arg;
	int rc = mem_map_libc(m, found->path, sizeof(found->path));

	return rc == -ENOENT ? 0 : rc == 0 ? 1 : rc;
}

/* Library whose allocator functions a process uses. */
int mem_resolve_libc(struct mem_state *st, uint32_t pid, char *out, size_t len)
{
	struct libc_found found;
	const char *exe = found.path;
	int rc;

	if (st->cfg->library && st->cfg->library[0]) {
		snprintf(out, len, "%s", st->cfg->library);
		return 0;
	}
	/* The -- CMD child's maps are still ours, not its program's. */
	if (!pid || mem_proc_is_unexeced_child(st, pid))
		return mem_resolve_self_libc(st, out, len);
	/* Line by line: a large process's maps run to megabytes, and the
	 * libraries sit near the end. */
	rc = nt_proc_maps_foreach(pid, first_libc, &found);
	if (rc < 0 && rc != -ENAMETOOLONG) {
		nt_kit_log(st->host, st->inst, rc == -ESRCH || rc == -ENOENT ? NT_LOG_DEBUG : NT_LOG_ERROR,
			   "pid %u: cannot read /proc/%u/maps: %s", pid, pid, strerror(-rc));
		return rc;
	}
	if (rc != 1) {
		nt_log_err(st, "pid %u maps no shared C library (a static binary?): no heap tracking for it; set library = ... for another allocator",
			   pid);
		return rc < 0 ? rc : -ENOENT;
	}
	if (same_mount_ns(pid)) {
		char real[PATH_MAX];

		snprintf(out, len, "%s", realpath(exe, real) ? real : exe);
	} else {
		/* The process sees another root: open its library through it. */
		int pre = snprintf(out, len, "/proc/%u/root", pid);

		if (pre < 0 || (size_t)pre + strlen(exe) >= len)
			return -ENAMETOOLONG;
		memcpy(out + pre, exe, strlen(exe) + 1);
	}
	return 0;
}
