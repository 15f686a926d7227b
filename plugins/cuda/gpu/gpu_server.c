// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu: the socket the jobs' injection libraries connect to.
 * One SOCK_SEQPACKET listening socket in a private directory (mode 0700,
 * made by mkdtemp), connections accepted only from traced processes
 * (SO_PEERCRED pid in the core's target map), all of them behind one epoll
 * fd that the loop watches (connections come and go; the host API watches
 * fds for the plugin's life). A job can connect, run and exit before the
 * loop gets to accept it; its pid has then left the target map, so a
 * connection of a pid not in it is parked, unread, until that pid's
 * proc.exit (published for traced processes only) shows it was traced,
 * and refused after GPU_PARKED_NS otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "gpu.h"

#define LISTEN_KEY UINT64_MAX

int gpu_server_open(struct gpu_plugin *g, char *why, size_t why_len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = LISTEN_KEY };
	const char *tmp = getenv("TMPDIR");

	snprintf(g->dir, sizeof(g->dir), "%s/ntcore-cupti.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g->dir)) {
		snprintf(why, why_len, "mkdtemp %s: %s", g->dir, strerror(errno));
		g->dir[0] = '\0';
		return -errno;
	}
	snprintf(g->sock_path, sizeof(g->sock_path), "%s/s", g->dir);
	if (strlen(g->sock_path) >= sizeof(a.sun_path)) {
		snprintf(why, why_len, "socket path too long: %s", g->sock_path);
		return -ENAMETOOLONG;
	}
	strcpy(a.sun_path, g->sock_path);
	g->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (g->listen_fd < 0 || bind(g->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(g->listen_fd, 128)) {
		snprintf(why, why_len, "socket %s: %s", g->sock_path, strerror(errno));
		return -errno;
	}
	g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (g->epoll_fd < 0 || epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->listen_fd, &ev)) {
		snprintf(why, why_len, "epoll: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

struct gpu_pstate *gpu_pstate_of(struct gpu_plugin *g, uint32_t pid)
{
	uint64_t v;

	return gpu_map_get(&g->procs, pid, &v) ? (struct gpu_pstate *)(uintptr_t)v : NULL;
}

static void conn_close(struct gpu_plugin *g, struct gpu_pstate *ps)
{
	if (ps->fd < 0)
		return;
	epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, ps->fd, NULL);
	close(ps->fd);
	ps->fd = -1;
	ps->closed_ns = nt_clock_mono_ns();
	g->n_conns--;
	if (ps->tracing)
		gpu_metrics_process(g->m, -1);
}

void gpu_pstate_free(struct gpu_plugin *g, struct gpu_pstate *ps)
{
	conn_close(g, ps);
	gpu_map_del(&g->procs, ps->pid);
	gpu_proc_free(ps->join);
	free(ps);
}

static void read_comm(uint32_t pid, char comm[16])
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	comm[0] = '\0';
	if ((f = fopen(path, "re"))) {
		if (fgets(comm, 16, f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
}

/* A traced process, or any when host-wide (the socket is private anyway). */
static bool peer_allowed(struct gpu_plugin *g, uint32_t pid)
{
	int fd = g->host->target_map_fd(g->inst);
	uint32_t named[64];
	uint8_t v;

	if (fd < 0 || bpf_map_lookup_elem(fd, &pid, &v) == 0)
		return true;
	/* A short job may have exited (and left the target map) before its
	 * connection is accepted: the pids the user named still count. */
	size_t n = g->host->target_pids(g->inst, named, 64);
	for (size_t i = 0; i < n && i < 64; i++)
		if (named[i] == pid)
			return true;
	return false;
}

static void conn_new(struct gpu_plugin *g, int fd, uint32_t pid)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = pid };
	struct gpu_pstate *ps = gpu_pstate_of(g, pid);

	if (ps) /* the same pid again: it exec'd and loaded CUDA anew */
		gpu_records_forget(g, pid);
	if (!(ps = calloc(1, sizeof(*ps))) ||
	    !(ps->join = gpu_proc_new(pid, (uint32_t)g->cfg->max_calls, (uint32_t)g->cfg->max_apis)) ||
	    gpu_map_put(&g->procs, pid, (uint64_t)(uintptr_t)ps) ||
	    epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, fd, &ev)) {
		if (ps) {
			gpu_map_del(&g->procs, pid);
			gpu_proc_free(ps->join);
		}
		free(ps);
		close(fd);
		g->host->log(g->inst, NT_LOG_WARN, "pid %u: cannot take its connection: %s", pid,
			     strerror(errno ? errno : ENOMEM));
		return;
	}
	ps->pid = pid;
	ps->fd = fd;
	ps->status = UINT32_MAX;
	read_comm(pid, ps->comm);
	g->n_conns++;
}

static bool exited_lately(const struct gpu_plugin *g, uint32_t pid)
{
	for (uint32_t i = 0; i < GPU_EXITS_KEPT; i++)
		if (g->exits[i].pid == pid && nt_clock_mono_ns() - g->exits[i].ts < GPU_PARKED_NS)
			return true;
	return false;
}

static void refuse(struct gpu_plugin *g, int fd, int pid)
{
	g->host->log(g->inst, NT_LOG_WARN, "refused a connection from pid %d: not a traced "
		     "process", pid);
	close(fd);
}

/* Not in the target map: park it until its proc.exit, or refuse it. */
static void park(struct gpu_plugin *g, int fd, uint32_t pid)
{
	if (g->n_parked == GPU_PARKED_MAX) {
		refuse(g, fd, (int)pid);
		return;
	}
	g->parked[g->n_parked].fd = fd;
	g->parked[g->n_parked].pid = pid;
	g->parked[g->n_parked].since = nt_clock_mono_ns();
	g->n_parked++;
}

static void accept_all(struct gpu_plugin *g)
{
	for (;;) {
		int fd = accept4(g->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (fd < 0)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid <= 0) {
			refuse(g, fd, (int)cred.pid);
			continue;
		}
		if (!peer_allowed(g, (uint32_t)cred.pid) && !exited_lately(g, (uint32_t)cred.pid)) {
			park(g, fd, (uint32_t)cred.pid);
			continue;
		}
		if (g->n_conns >= (uint32_t)g->cfg->max_connections) {
			g->host->log(g->inst, NT_LOG_WARN, "pid %d: over max_connections (%lld); "
				     "its GPU activity is not traced", (int)cred.pid,
				     (long long)g->cfg->max_connections);
			close(fd);
			continue;
		}
		conn_new(g, fd, (uint32_t)cred.pid);
	}
}

/* One accept4() (about a microsecond) per host call of a process not
 * connected: its connection is in the backlog before its first launch
 * (the library connects in cuInit), and waiting for the loop to accept it
 * would lose the launches in between. */
void gpu_server_accept_now(struct gpu_plugin *g)
{
	if (g->listen_fd >= 0)
		accept_all(g);
}

static void unpark(struct gpu_plugin *g, uint32_t i)
{
	g->parked[i] = g->parked[--g->n_parked];
}

void gpu_server_exited(struct gpu_plugin *g, uint32_t pid, const char *comm)
{
	g->exits[g->exits_next % GPU_EXITS_KEPT].pid = pid;
	g->exits[g->exits_next % GPU_EXITS_KEPT].ts = nt_clock_mono_ns();
	g->exits_next++;
	for (uint32_t i = 0; i < g->n_parked; i++) {
		struct gpu_pstate *ps;
		int fd = g->parked[i].fd;

		if (g->parked[i].pid != pid)
			continue;
		unpark(g, i);
		g->host->log(g->inst, NT_LOG_DEBUG, "pid %u connected and exited before its "
			     "connection was taken: taken now", pid);
		/* its messages wait in the socket: epoll reports them */
		conn_new(g, fd, pid);
		if ((ps = gpu_pstate_of(g, pid)) && !ps->comm[0])
			snprintf(ps->comm, sizeof(ps->comm), "%s", comm); /* /proc is gone */
		return;
	}
}

void gpu_server_expire(struct gpu_plugin *g, uint64_t now)
{
	for (uint32_t i = 0; i < g->n_parked;) {
		if (now - g->parked[i].since < GPU_PARKED_NS) {
			i++;
			continue;
		}
		refuse(g, g->parked[i].fd, (int)g->parked[i].pid);
		unpark(g, i);
	}
}

/* Read up to budget messages of one connection; -1 when it ended. */
static int conn_read(struct gpu_plugin *g, struct gpu_pstate *ps, uint32_t budget,
		     uint8_t *buf)
{
	int n = 0;

	while ((uint32_t)n < budget) {
		ssize_t len = recv(ps->fd, buf, NT_GPU_MSG_MAX, MSG_DONTWAIT | MSG_TRUNC);

		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return n;
		if (len <= 0)
			return -1; /* EOF: the process exited (or closed CUDA) */
		ps->seq++;
		n++;
		if (len > (ssize_t)NT_GPU_MSG_MAX) {
			g->malformed++;
			continue;
		}
		gpu_records_message(g, ps, buf, (size_t)len);
	}
	return n;
}

int gpu_server_poll(struct gpu_plugin *g, uint32_t budget)
{
	struct epoll_event evs[64];
	uint8_t *buf = malloc(NT_GPU_MSG_MAX);
	int n, handled = 0;

	if (!buf)
		return -ENOMEM;
	n = epoll_wait(g->epoll_fd, evs, 64, 0);
	for (int i = 0; i < n; i++) {
		struct gpu_pstate *ps;
		int got;

		if (evs[i].data.u64 == LISTEN_KEY) {
			accept_all(g);
			continue;
		}
		ps = gpu_pstate_of(g, (uint32_t)evs[i].data.u64);
		if (!ps || ps->fd < 0)
			continue;
		got = conn_read(g, ps, budget > (uint32_t)handled ? budget - (uint32_t)handled : 1, buf);
		if (got < 0)
			conn_close(g, ps);
		else
			handled += got;
	}
	free(buf);
	gpu_records_retry(g, false);
	return handled;
}

void gpu_server_close(struct gpu_plugin *g)
{
	struct nt_hmap_iter it = {0};
	uint64_t k, v;

	while (gpu_map_next(&g->procs, &it, &k, &v))
		conn_close(g, (struct gpu_pstate *)(uintptr_t)v);
	while (g->n_parked)
		close(g->parked[--g->n_parked].fd);
	if (g->epoll_fd >= 0)
		close(g->epoll_fd);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	g->epoll_fd = g->listen_fd = -1;
	if (g->sock_path[0])
		unlink(g->sock_path);
	if (g->dir[0])
		rmdir(g->dir);
	g->sock_path[0] = g->dir[0] = '\0';
}
