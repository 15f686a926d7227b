/* SPDX-License-Identifier: MIT */
/*
 * Process identity: cgroup path shapes (container runtimes, Kubernetes pods
 * under the systemd and cgroupfs drivers), /proc/PID/cgroup, the kubelet's
 * pod directory, and the thread-safe per-process cache.
 *
 * Shapes recognised (ID = 64 hex digits, UID = pod UID):
 *   docker       /docker/ID, /system.slice/docker-ID.scope
 *   containerd   .../cri-containerd-ID.scope, /default/ID (nerdctl),
 *                nerdctl-ID.scope
 *   CRI-O        .../crio-ID.scope, .../crio-ID
 *   podman       /machine.slice/libpod-ID.scope, .../libpod-ID,
 *                /libpod_parent/libpod-ID
 *   Kubernetes   kubepods[.slice]/[kubepods-]{burstable,besteffort}[.slice]/
 *                [kubepods-QOS-]podUID[.slice]/<container component>;
 *                a pod directly under kubepods is Guaranteed. Under the
 *                cgroupfs driver the container component is the bare ID
 *                (runtime not shown).
 * conmon's own scopes (crio-conmon-ID, libpod-conmon-ID) are not containers.
 */
#include "ident.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool is_hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static void copy_str(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* A component that is exactly a container id after `prefix`, with an
 * optional ".scope" suffix: "cri-containerd-ID.scope", "ID". */
static bool match_id(const char *comp, size_t len, const char *prefix,
		     char *id_out)
{
	size_t plen = strlen(prefix);

	if (len >= 6 && memcmp(comp + len - 6, ".scope", 6) == 0)
		len -= 6;
	if (len != plen + 64 || memcmp(comp, prefix, plen) != 0 ||
	    !is_hex_run(comp + plen, 64))
		return false;
	copy_str(id_out, NT_ID_CONTAINER_LEN, comp + plen, 64);
	return true;
}

static const struct {
	const char *prefix, *runtime;
} id_prefixes[] = {
	{"docker-", "docker"},      {"cri-containerd-", "containerd"},
	{"crio-", "cri-o"},         {"libpod-", "podman"},
	{"nerdctl-", "containerd"}, {"containerd-", "containerd"},
};

/* The runtime of a bare id, from the component above it. */
static const char *bare_runtime(const char *parent, size_t plen)
{
	if (plen == 6 && memcmp(parent, "docker", 6) == 0)
		return "docker";
	if (plen == 13 && memcmp(parent, "libpod_parent", 13) == 0)
		return "podman";
	if (plen == 7 && memcmp(parent, "default", 7) == 0)
		return "containerd";
	return "";
}

static bool parse_container(const char *comp, size_t len, const char *parent,
			    size_t plen, struct nt_identity *out)
{
	char id[NT_ID_CONTAINER_LEN];

	for (size_t i = 0; i < sizeof(id_prefixes) / sizeof(id_prefixes[0]); i++)
		if (match_id(comp, len, id_prefixes[i].prefix, id)) {
			memcpy(out->container_id, id, sizeof(id));
			snprintf(out->runtime, sizeof(out->runtime), "%s",
				 id_prefixes[i].runtime);
			return true;
		}
	if (match_id(comp, len, "", id)) {
		memcpy(out->container_id, id, sizeof(id));
		snprintf(out->runtime, sizeof(out->runtime), "%s",
			 bare_runtime(parent, plen));
		return true;
	}
	return false;
}

/* "pod" + UID, after an optional "kubepods-[QOS-]" and before an optional
 * ".slice"; the systemd driver writes the UID's dashes as underscores.
 * A static pod's UID is 32 hex digits with no dashes. */
static bool parse_pod(const char *comp, size_t len, struct nt_identity *out)
{
	const char *p = comp, *end = comp + len;
	char uid[NT_ID_POD_UID_LEN];

	if (len >= 6 && memcmp(end - 6, ".slice", 6) == 0)
		end -= 6;
	if ((size_t)(end - p) > 9 && memcmp(p, "kubepods-", 9) == 0) {
		p += 9;
		if (end - p > 10 && memcmp(p, "burstable-", 10) == 0)
			p += 10;
		else if (end - p > 11 && memcmp(p, "besteffort-", 11) == 0)
			p += 11;
	}
	if (end - p < 3 || memcmp(p, "pod", 3) != 0)
		return false;
	p += 3;
	size_t n = (size_t)(end - p);
	if (n == 32 && is_hex_run(p, 32)) {
		copy_str(out->pod_uid, sizeof(out->pod_uid), p, 32);
		return true;
	}
	if (n != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
		char ch = p[i];
		if (dash_pos ? (ch != '-' && ch != '_') : !is_hex_run(&ch, 1))
			return false;
		uid[i] = dash_pos ? '-' : ch;
	}
	uid[36] = '\0';
	memcpy(out->pod_uid, uid, sizeof(uid));
	return true;
}

static bool comp_is(const char *comp, size_t len, const char *a, const char *b)
{
	return (strlen(a) == len && memcmp(comp, a, len) == 0) ||
	       (strlen(b) == len && memcmp(comp, b, len) == 0);
}

/* QoS from the components between kubepods and the pod. */
static bool parse_qos(const char *comp, size_t len, struct nt_identity *out)
{
	if (comp_is(comp, len, "burstable", "kubepods-burstable.slice"))
		snprintf(out->qos, sizeof(out->qos), "burstable");
	else if (comp_is(comp, len, "besteffort", "kubepods-besteffort.slice"))
		snprintf(out->qos, sizeof(out->qos), "besteffort");
	else
		return false;
	return true;
}

bool nt_ident_parse_path(const char *path, struct nt_identity *out)
{
	const char *parent = "", *p = path;
	size_t plen = 0;
	bool in_kubepods = false, found = false;

	while (*p) {
		while (*p == '/')
			p++;
		const char *comp = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - comp);
		if (!len || (len == 2 && comp[0] == '.' && comp[1] == '.'))
			continue;
		if (comp_is(comp, len, "kubepods", "kubepods.slice")) {
			in_kubepods = true;
		} else if (in_kubepods && !out->pod_uid[0] &&
			   parse_pod(comp, len, out)) {
			if (!out->qos[0])
				snprintf(out->qos, sizeof(out->qos), "guaranteed");
			found = true;
		} else if (in_kubepods && !out->pod_uid[0] &&
			   parse_qos(comp, len, out)) {
			/* the pod comes next */
		} else if (parse_container(comp, len, parent, plen, out)) {
			found = true;
		}
		parent = comp;
		plen = len;
	}
	if (!out->pod_uid[0])
		out->qos[0] = '\0';
	return found;
}

static void set_cgroup(struct nt_identity *out, const char *path, size_t len)
{
	copy_str(out->cgroup, sizeof(out->cgroup), path, len);
}

void nt_ident_parse_proc_cgroup(const char *text, struct nt_identity *out)
{
	const char *line = text;
	bool have_v2 = false;

	memset(out, 0, sizeof(*out));
	/* The v2 line first: it names the cgroup. */
	for (line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		size_t len = strcspn(line, "\n");
		if (len >= 3 && memcmp(line, "0::", 3) == 0) {
			set_cgroup(out, line + 3, len - 3);
			have_v2 = true;
			break;
		}
	}
	if (out->cgroup[0] && nt_ident_parse_path(out->cgroup, out))
		return;
	/* Hybrid hosts: the containers show in the v1 hierarchies. */
	for (line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		size_t len = strcspn(line, "\n");
		const char *colon = memchr(line, ':', len);
		const char *path = colon ? memchr(colon + 1, ':', len - (size_t)(colon + 1 - line)) : NULL;
		char buf[NT_ID_CGROUP_LEN];

		if (!path || (len >= 3 && memcmp(line, "0::", 3) == 0))
			continue;
		path++;
		copy_str(buf, sizeof(buf), path, len - (size_t)(path - line));
		if (nt_ident_parse_path(buf, out)) {
			if (!have_v2 || strcmp(out->cgroup, "/") == 0)
				set_cgroup(out, buf, strlen(buf));
			return;
		}
	}
}

/* Reads at most cap-1 bytes of a small file; -1 when it cannot. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	if (fd < 0)
		return -1;
	while ((size_t)total < cap - 1 &&
	       (n = read(fd, buf + total, cap - 1 - (size_t)total)) > 0)
		total += n;
	close(fd);
	buf[total] = '\0';
	return total;
}

/* A Kubernetes name: lowercase alphanumerics, '-' and '.' only. */
static void copy_name(char *dst, size_t cap, const char *src, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k + 1 < cap; i++) {
		char ch = src[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '.'))
			break;
		dst[k++] = ch;
	}
	dst[k] = '\0';
}

/* The kubelet's etc-hosts ends with "IP<TAB>[FQDN<TAB>]HOSTNAME": the
 * hostname is the pod's name unless the pod sets spec.hostname. */
static void pod_name_from_hosts(const char *text, struct nt_identity *id)
{
	const char *last = NULL, *line = text;

	while (line && *line) {
		if (*line != '#' && *line != '\n' && strncmp(line, "127.", 4) &&
		    strncmp(line, "::1", 3) && strncmp(line, "fe0", 3) &&
		    strncmp(line, "fe00", 4) && strncmp(line, "ff0", 3))
			last = line;
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	if (!last)
		return;
	size_t len = strcspn(last, "\n");
	const char *name = last + len;
	while (name > last && name[-1] != '\t' && name[-1] != ' ')
		name--;
	copy_name(id->pod_name, sizeof(id->pod_name), name,
		  (size_t)(last + len - name));
}

void nt_ident_read_kubelet(const char *kubelet_dir, struct nt_identity *id)
{
	char path[512], buf[4096];
	glob_t g;

	if (!kubelet_dir || !*kubelet_dir || !id->pod_uid[0])
		return;
	snprintf(path, sizeof(path), "%s/pods/%s/etc-hosts", kubelet_dir, id->pod_uid);
	if (read_small(path, buf, sizeof(buf)) > 0)
		pod_name_from_hosts(buf, id);
	snprintf(path, sizeof(path),
		 "%s/pods/%s/volumes/kubernetes.io~projected/*/namespace",
		 kubelet_dir, id->pod_uid);
	if (glob(path, GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc &&
	    read_small(g.gl_pathv[0], buf, sizeof(buf)) > 0)
		copy_name(id->pod_namespace, sizeof(id->pod_namespace), buf,
			  strlen(buf));
	globfree(&g);
}

/* ------------------------------------------------------------------ */
/* The cache                                                           */
/* ------------------------------------------------------------------ */

struct nt_ident_entry {
	struct nt_ident_entry *next;
	uint32_t pid;
	uint64_t dead_ns; /* when it exited (or was found gone), 0 alive */
	uint64_t used_ns; /* last asked for (coarse clock) */
	struct nt_identity id;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	/* coarse: read on every hit, and a tick (4 ms) is precise enough */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A process that is gone, a zombie, or on its way out (PF_EXITING in
 * the leader's flags: the exit tracepoint may have fired already) will not
 * have its exit reported. */
static bool process_gone(const char *proc_root, uint32_t pid)
{
	char path[128], buf[512];
	unsigned long flags = 0;
	char state = 0;

	snprintf(path, sizeof(path), "%s/%u/stat", proc_root, pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return true;
	const char *paren = strrchr(buf, ')');
	/* ") S ppid pgrp session tty_nr tpgid flags" */
	if (!paren || sscanf(paren + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return true;
	return state == 'Z' || state == 'X' || (flags & 0x4 /* PF_EXITING */);
}

int nt_ident_cache_init(struct nt_ident_cache *c, size_t max_entries,
			const char *proc_root, const char *kubelet_dir)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->n_buckets = 4096;
	c->max_entries = max_entries ? max_entries : 65536;
	c->proc_root = proc_root ? proc_root : "/proc";
	c->kubelet_dir = kubelet_dir;
	c->buckets = calloc(c->n_buckets, sizeof(*c->buckets));
	return c->buckets ? 0 : -ENOMEM;
}

static void drop_all(struct nt_ident_cache *c)
{
	for (size_t b = 0; b < c->n_buckets; b++) {
		while (c->buckets[b]) {
			struct nt_ident_entry *e = c->buckets[b];
			c->buckets[b] = e->next;
			free(e);
		}
	}
	c->n_entries = 0;
}

static void read_name_file(const char *dir, const char *file, char *out, size_t cap)
{
	char path[512], buf[256];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (read_small(path, buf, sizeof(buf)) > 0)
		copy_name(out, cap, buf, strlen(buf));
}

int nt_ident_cache_downward(struct nt_ident_cache *c, const char *dir)
{
	char uid[NT_ID_POD_UID_LEN] = "";

	read_name_file(dir, "uid", uid, sizeof(uid));
	if (strlen(uid) != 36)
		return -1;
	memcpy(c->dw_uid, uid, sizeof(uid));
	read_name_file(dir, "name", c->dw_name, sizeof(c->dw_name));
	read_name_file(dir, "namespace", c->dw_ns, sizeof(c->dw_ns));
	return 0;
}

void nt_ident_cache_fini(struct nt_ident_cache *c)
{
	if (c->buckets)
		drop_all(c);
	free(c->buckets);
	pthread_mutex_destroy(&c->lock);
	memset(c, 0, sizeof(*c));
}

static struct nt_ident_entry **find(struct nt_ident_cache *c, uint32_t pid)
{
	struct nt_ident_entry **e = &c->buckets[(pid * 2654435761u) % c->n_buckets];

	while (*e && (*e)->pid != pid)
		e = &(*e)->next;
	return e;
}

static int resolve(const struct nt_ident_cache *c, uint32_t pid,
		   struct nt_identity *out)
{
	char path[128], buf[4096];

	snprintf(path, sizeof(path), "%s/%u/cgroup", c->proc_root, pid);
	if (read_small(path, buf, sizeof(buf)) < 0) {
		memset(out, 0, sizeof(*out));
		return -ESRCH;
	}
	nt_ident_parse_proc_cgroup(buf, out);
	nt_ident_read_kubelet(c->kubelet_dir, out);
	if (c->dw_uid[0] && strcmp(c->dw_uid, out->pod_uid) == 0) {
		if (!out->pod_name[0])
			memcpy(out->pod_name, c->dw_name, sizeof(out->pod_name));
		if (!out->pod_namespace[0])
			memcpy(out->pod_namespace, c->dw_ns, sizeof(out->pod_namespace));
	}
	return 0;
}

/* Insert under the lock; a full cache starts over (a process whose exit
 * was missed must not hold a slot for ever). */
static void insert_locked(struct nt_ident_cache *c, uint32_t pid,
			  const struct nt_identity *id, uint64_t dead_ns)
{
	struct nt_ident_entry *fresh;

	if (*find(c, pid) || !(fresh = malloc(sizeof(*fresh))))
		return;
	if (c->n_entries >= c->max_entries) {
		c->evicted += c->n_entries;
		drop_all(c);
	}
	fresh->pid = pid;
	fresh->id = *id;
	fresh->dead_ns = fresh->used_ns = dead_ns;
	fresh->next = NULL;
	*find(c, pid) = fresh;
	c->n_entries++;
}

int nt_ident_get(struct nt_ident_cache *c, uint32_t pid, struct nt_identity *out)
{
	if (!c->buckets) { /* a daemon that keeps no identity (tests) */
		memset(out, 0, sizeof(*out));
		return -ENOSYS;
	}
	pthread_mutex_lock(&c->lock);
	struct nt_ident_entry *e = *find(c, pid);
	if (e) {
		*out = e->id;
		c->hits++;
		if (e->dead_ns)
			e->used_ns = mono_ns();
		pthread_mutex_unlock(&c->lock);
		return e->id.cgroup[0] || !e->dead_ns ? 0 : -ESRCH;
	}
	pthread_mutex_unlock(&c->lock);
	/* Read /proc unlocked: other threads' hits do not wait on it. */
	int rc = resolve(c, pid, out);
	pthread_mutex_lock(&c->lock);
	if (rc)
		c->failed++;
	else
		c->resolved++;
	/* A process already gone is kept as such (not read again for each
	 * of its late records) until the sweep after the grace period. */
	insert_locked(c, pid, out, rc ? mono_ns() : 0);
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return rc;
	if (c->on_resolved)
		c->on_resolved(c->ctx, pid);
	/* It may have exited before the kernel was asked to report it. */
	if (process_gone(c->proc_root, pid))
		nt_ident_forget(c, pid);
	return 0;
}

void nt_ident_forget(struct nt_ident_cache *c, uint32_t pid)
{
	if (!c->buckets)
		return;
	pthread_mutex_lock(&c->lock);
	struct nt_ident_entry *e = *find(c, pid);
	if (e && !e->dead_ns)
		e->dead_ns = e->used_ns = mono_ns();
	pthread_mutex_unlock(&c->lock);
}

void nt_ident_sweep(struct nt_ident_cache *c, uint64_t grace_ns)
{
	uint64_t now = mono_ns();

	pthread_mutex_lock(&c->lock);
	for (size_t b = 0; b < c->n_buckets; b++) {
		struct nt_ident_entry **slot = &c->buckets[b];
		while (*slot) {
			struct nt_ident_entry *e = *slot;
			if (e->dead_ns && now - e->used_ns >= grace_ns) {
				*slot = e->next;
				free(e);
				c->n_entries--;
				c->evicted++;
			} else {
				slot = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
}

size_t nt_ident_cache_size(struct nt_ident_cache *c)
{
	pthread_mutex_lock(&c->lock);
	size_t n = c->n_entries;
	pthread_mutex_unlock(&c->lock);
	return n;
}
