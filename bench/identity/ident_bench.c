/* SPDX-License-Identifier: MIT */
/*
 * bench/identity.sh: what a process's identity costs (issue 21).
 *   resolve   first lookup of a live process: /proc/PID/cgroup read and
 *             parsed, /proc/PID/stat read (is it exiting?), cached
 *   hit       a later lookup (mutex + hash), from the cache
 *   parse     nt_ident_parse_proc_cgroup of a kubepods line alone
 *   metric    nt_metric_add on a family with a pid label: as declared,
 *             and under the host-wide policy (pid -> comm, container_id,
 *             namespace, pod, uid: an identity hit per update)
 * Pure user space (no BPF): children that sleep stand in for processes.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ident.h"
#include "labels.h"
#include "metrics.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ident_of(void *ctx, uint32_t pid, struct nt_identity *out)
{
	return nt_ident_get(ctx, pid, out);
}

static double bench_metric(struct nt_label_policy *pol, const char *const *pids,
			   int n_pids, int rounds)
{
	static const char *const decl[] = {"pid", "comm"};
	struct nt_metric_desc d = {.name = "ntcore_bench_seconds_total", .help = "h",
				   .type = NT_METRIC_COUNTER, .n_labels = 2,
				   .label_names = decl};
	struct nt_registry reg;
	const char *why;

	nt_registry_init(&reg);
	reg.policy = pol;
	struct nt_metric *m = nt_registry_register(&reg, &d, &why);
	double t0 = now_s();
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < n_pids; i++) {
			const char *l[2] = {pids[i], "worker"};
			nt_metric_add(m, l, 1.0);
		}
	double dt = now_s() - t0;
	nt_registry_fini(&reg);
	return dt / ((double)rounds * n_pids) * 1e9;
}

int main(int argc, char **argv)
{
	bool smoke = argc > 1 && strcmp(argv[1], "--smoke") == 0;
	int n = smoke ? 50 : 500, rounds = smoke ? 20 : 400;
	pid_t *kids = calloc((size_t)n, sizeof(*kids));
	char **pid_s = calloc((size_t)n, sizeof(*pid_s));
	struct nt_ident_cache c;
	struct nt_identity id;

	for (int i = 0; i < n; i++) {
		if ((kids[i] = fork()) == 0) {
			pause();
			_exit(0);
		}
		pid_s[i] = malloc(16);
		snprintf(pid_s[i], 16, "%d", (int)kids[i]);
	}
	nt_ident_cache_init(&c, 0, "/proc", "/var/lib/kubelet");
	double t0 = now_s();
	for (int i = 0; i < n; i++)
		nt_ident_get(&c, (uint32_t)kids[i], &id);
	double resolve_us = (now_s() - t0) / n * 1e6;
	t0 = now_s();
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < n; i++)
			nt_ident_get(&c, (uint32_t)kids[i], &id);
	double hit_ns = (now_s() - t0) / ((double)rounds * n) * 1e9;
	const char *line = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
			   "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-"
			   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n";
	t0 = now_s();
	for (int r = 0; r < rounds * 10; r++)
		nt_ident_parse_proc_cgroup(line, &id);
	double parse_ns = (now_s() - t0) / (rounds * 10) * 1e9;

	struct nt_label_policy declared = {.default_mask = NT_IDL_DECLARED};
	struct nt_label_policy hostwide = {.default_mask = NT_IDL_HOSTWIDE,
					   .ident = ident_of, .ctx = &c};
	double m_decl = bench_metric(&declared, (const char *const *)pid_s, n, rounds);
	double m_host = bench_metric(&hostwide, (const char *const *)pid_s, n, rounds);

	printf("identity (%d live processes, %d rounds)%s\n", n, rounds, smoke ? " [smoke]" : "");
	printf("  resolve, first lookup of a process   %8.2f us\n", resolve_us);
	printf("  hit, from the cache                  %8.1f ns   (resolve / hit = %.0f)\n",
	       hit_ns, resolve_us * 1e3 / hit_ns);
	printf("  parse a kubepods line alone          %8.1f ns\n", parse_ns);
	printf("  metric_add, labels as declared       %8.1f ns\n", m_decl);
	printf("  metric_add, host-wide identity labels%8.1f ns   (ratio %.2f)\n", m_host,
	       m_host / m_decl);
	for (int i = 0; i < n; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
		free(pid_s[i]);
	}
	nt_ident_cache_fini(&c);
	free(kids);
	free(pid_s);
	return 0;
}
