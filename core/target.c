/* SPDX-License-Identifier: MIT */
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/follow.h"
#include "follow.bpf.skel.h"

#define NT_TARGETS_MAX 16384 /* must match core/bpf/common.bpf.h */

static bool tp_btf_works(void)
{
	/* tp_btf needs the kernel's BTF; without it use raw tracepoints. */
	return access("/sys/kernel/btf/vmlinux", R_OK) == 0;
}

static int load_follow(struct nt_targets *t, uint32_t exit_type,
		       uint32_t exec_type, char *why, size_t why_len)
{
	bool btf = tp_btf_works();
	int err;

	t->skel = follow_bpf__open();
	if (!t->skel) {
		snprintf(why, why_len, "cannot open the follow BPF object: %s",
			 strerror(errno));
		return -1;
	}
	t->skel->rodata->exit_type = exit_type;
	t->skel->rodata->exec_type = exec_type;
	t->skel->rodata->nt_filter_on = true;
	t->skel->rodata->cgroup_filter = t->by_cgroup;
	t->skel->rodata->known_exits = t->known_exits;
	bpf_program__set_autoload(t->skel->progs.follow_attach_btf, btf && t->by_cgroup);
	bpf_program__set_autoload(t->skel->progs.follow_attach_raw, !btf && t->by_cgroup);
	bpf_program__set_autoload(t->skel->progs.follow_fork_btf, btf);
	bpf_program__set_autoload(t->skel->progs.follow_exit_btf, btf);
	bpf_program__set_autoload(t->skel->progs.follow_fork_raw, !btf);
	bpf_program__set_autoload(t->skel->progs.follow_exit_raw, !btf);
	bpf_program__set_autoload(t->skel->progs.follow_exec_btf, btf);
	bpf_program__set_autoload(t->skel->progs.follow_exec_raw, !btf);
	if ((err = bpf_map__reuse_fd(t->skel->maps.nt_targets, t->map_fd)) ||
	    (err = follow_bpf__load(t->skel)) || (err = follow_bpf__attach(t->skel))) {
		snprintf(why, why_len,
			 "cannot load the fork-following BPF program: %s (run as root, or with CAP_BPF and CAP_PERFMON)",
			 strerror(-err));
		return -1;
	}
	return 0;
}

int nt_targets_open(struct nt_targets *t, bool filtered, bool by_cgroup,
		    bool known_exits, uint32_t exit_type, uint32_t exec_type,
		    nt_exit_fn on_record, void *ctx, char *why, size_t why_len)
{
	memset(t, 0, sizeof(*t));
	t->map_fd = -1;
	t->known_fd = -1;
	t->filtered = filtered || by_cgroup;
	t->by_cgroup = by_cgroup;
	t->known_exits = known_exits;
	if (!t->filtered && !known_exits)
		return 0;
	t->map_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "nt_targets",
				   sizeof(uint32_t), sizeof(uint8_t),
				   NT_TARGETS_MAX, NULL);
	if (t->map_fd < 0) {
		snprintf(why, why_len,
			 "cannot create the target BPF map: %s (run as root, or with CAP_BPF)",
			 strerror(errno));
		return -1;
	}
	if (load_follow(t, exit_type, exec_type, why, why_len))
		return -1;
	t->known_fd = known_exits ? bpf_map__fd(t->skel->maps.nt_known) : -1;
	t->exits = ring_buffer__new(bpf_map__fd(t->skel->maps.exits), on_record,
				    ctx, NULL);
	if (!t->exits) {
		snprintf(why, why_len, "cannot open the exit ring buffer: %s",
			 strerror(errno));
		return -1;
	}
	return 0;
}

void nt_targets_known(struct nt_targets *t, uint32_t pid)
{
	uint8_t one = 1;

	if (t->known_fd >= 0)
		bpf_map_update_elem(t->known_fd, &pid, &one, BPF_ANY);
}

int nt_targets_add(struct nt_targets *t, uint32_t pid)
{
	uint8_t one = 1;

	if (!t->filtered)
		return 0;
	if (t->n_pids == t->cap_pids) {
		size_t cap = t->cap_pids ? t->cap_pids * 2 : 8;
		uint32_t *grown = realloc(t->pids, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		t->pids = grown;
		t->cap_pids = cap;
	}
	if (bpf_map_update_elem(t->map_fd, &pid, &one, BPF_ANY) < 0)
		return -errno;
	t->pids[t->n_pids++] = pid;
	return 0;
}

int nt_cgroup2_mount(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char dev[64], dir[512], type[64];
	int rc = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %511s %63s %*[^\n]", dev, dir, type) == 3)
		if (strcmp(type, "cgroup2") == 0) {
			snprintf(buf, len, "%s", dir);
			rc = 0;
			break;
		}
	fclose(f);
	return rc;
}

/* Add the processes of one cgroup directory and of every one below it. */
static int add_procs_below(struct nt_targets *t, const char *dir, int depth)
{
	char path[4096];
	unsigned pid;
	int n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	while (f && fscanf(f, "%u", &pid) == 1)
		if (nt_targets_add(t, pid) == 0)
			n++;
	if (f)
		fclose(f);
	DIR *d = depth < 64 ? opendir(dir) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			n += add_procs_below(t, path, depth + 1);
		}
	if (d)
		closedir(d);
	return n;
}

int nt_targets_add_cgroup(struct nt_targets *t, const char *path, char *why,
			  size_t why_len)
{
	char full[4096], mnt[512];
	struct statfs sfs;
	struct stat st;
	uint8_t one = 1;

	snprintf(full, sizeof(full), "%s", path);
	if (path[0] != '/' || stat(full, &st) != 0) {
		if (nt_cgroup2_mount(mnt, sizeof(mnt)) != 0) {
			snprintf(why, why_len, "--cgroup %s: cgroup2 is not mounted", path);
			return -1;
		}
		snprintf(full, sizeof(full), "%s/%s", mnt, path[0] == '/' ? path + 1 : path);
	}
	if (stat(full, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "--cgroup %s: no such cgroup directory", path);
		return -1;
	}
	if (statfs(full, &sfs) != 0 || sfs.f_type != CGROUP2_SUPER_MAGIC) {
		snprintf(why, why_len,
			 "--cgroup %s: not a cgroup v2 directory (the filter follows the unified hierarchy; on a hybrid host it is mounted at /sys/fs/cgroup/unified)",
			 path);
		return -1;
	}
	/* A v2 cgroup's id, as the kernel's kernfs node id, is the inode. */
	uint64_t id = (uint64_t)st.st_ino;
	if (!t->skel || bpf_map_update_elem(bpf_map__fd(t->skel->maps.nt_cgroups),
					    &id, &one, BPF_ANY) < 0) {
		snprintf(why, why_len, "--cgroup %s: cannot add it to the filter: %s",
			 path, t->skel ? strerror(errno) : "targets not opened by cgroup");
		return -1;
	}
	/* After the follow program is attached: a process forked while we
	 * scan is added by it, one already there by the scan. */
	return add_procs_below(t, full, 0);
}

bool nt_targets_contains(const struct nt_targets *t, uint32_t pid)
{
	uint8_t v;

	if (!t->filtered)
		return true;
	return bpf_map_lookup_elem(t->map_fd, &pid, &v) == 0;
}

int nt_targets_exit_fd(const struct nt_targets *t)
{
	return t->exits ? ring_buffer__epoll_fd(t->exits) : -1;
}

int nt_targets_drain(struct nt_targets *t)
{
	return t->exits ? ring_buffer__consume(t->exits) : 0;
}

void nt_targets_close(struct nt_targets *t)
{
	ring_buffer__free(t->exits);
	follow_bpf__destroy(t->skel);
	if (t->map_fd >= 0)
		close(t->map_fd);
	free(t->pids);
	memset(t, 0, sizeof(*t));
	t->map_fd = -1;
	t->known_fd = -1;
}

/*
 * The gate: the daemon writes 'e' <u32 length> "NAME=VALUE" for each
 * variable plugins asked for (host->child_setenv), then 'g'. EOF before
 * 'g' means the daemon gave up: the child exits without running the
 * command.
 */
static bool read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool child_wait_gate(int fd)
{
	char kind;
	uint32_t len;

	while (read_full(fd, &kind, 1)) {
		char *kv, *eq;

		if (kind == 'g')
			return true;
		if (kind != 'e' || !read_full(fd, &len, sizeof(len)) || len > (1u << 20) ||
		    !(kv = malloc(len + 1)) || !read_full(fd, kv, len))
			return false;
		kv[len] = '\0';
		if ((eq = strchr(kv, '='))) {
			*eq = '\0';
			setenv(kv, eq + 1, 1);
		}
		free(kv);
	}
	return false;
}

pid_t nt_child_spawn(char *const argv[], int *gate_fd)
{
	int gate[2];
	pid_t pid;

	if (pipe2(gate, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(gate[0]);
		close(gate[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;

		close(gate[1]);
		/* systemd's notify socket and watchdog are the daemon's */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		/* Wait until every probe is attached. */
		if (!child_wait_gate(gate[0]))
			_exit(127);
		execvp(argv[0], argv);
		int err = errno;
		fprintf(stderr, "ntcore: cannot run '%s': %s\n", argv[0],
			strerror(err));
		/* a shell's statuses: 127 not found, 126 found but not run */
		_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
	}
	close(gate[0]);
	*gate_fd = gate[1];
	return pid;
}

static bool write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

void nt_child_release(int gate_fd, char *const *env, size_t n_env)
{
	bool ok = true;

	for (size_t i = 0; i < n_env && ok; i++) {
		uint32_t len = (uint32_t)strlen(env[i]);

		ok = write_full(gate_fd, "e", 1) && write_full(gate_fd, &len, sizeof(len)) &&
		     write_full(gate_fd, env[i], len);
	}
	if (!ok || !write_full(gate_fd, "g", 1))
		perror("ntcore: releasing the child");
	close(gate_fd);
}

void nt_ensure_tracefs(void)
{
	struct stat st;

	if (stat("/sys/kernel/tracing/events", &st) == 0)
		return;
	/* Best effort: BTF tracepoints need no tracefs, classic ones do. */
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) != 0 &&
	    stat("/sys/kernel/debug/tracing/events", &st) != 0)
		fprintf(stderr,
			"ntcore: warning: tracefs is not mounted and could not be mounted: %s\n",
			strerror(errno));
}
