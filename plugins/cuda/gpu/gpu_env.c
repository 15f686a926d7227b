/* SPDX-License-Identifier: MIT */
/*
 * cuda_gpu: putting the CUPTI injection library into the job: where the
 * library is (next to this plugin's file) and the job's environment
 * (CUDA_INJECTION64_PATH and the socket), or why there is no job to
 * inject into.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gpu.h"

/* libntcore-cupti.so.1 next to this plugin's own file. */
int gpu_library_path(struct gpu_plugin *g, char *out, size_t len)
{
	Dl_info info;
	const char *slash;

	if (g->cfg->library[0]) {
		snprintf(out, len, "%s", g->cfg->library);
	} else {
		if (!dladdr((void *)gpu_library_path, &info) || !info.dli_fname)
			return -ENOENT;
		slash = strrchr(info.dli_fname, '/');
		snprintf(out, len, "%.*s/libntcore-cupti.so.1", slash ? (int)(slash - info.dli_fname) : 1,
			 slash ? info.dli_fname : ".");
	}
	if (out[0] != '/' || access(out, R_OK)) {
		g->host->log(g->inst, NT_LOG_ERROR, "the CUPTI injection library %s is missing "
			     "(an absolute path is needed): %s", out, strerror(errno ? errno : EINVAL));
		return -ENOENT;
	}
	return 0;
}

/* Why there is no job to inject into: one line. */
static void say_no_child(struct gpu_plugin *g)
{
	uint32_t pid;

	if (g->host->target_pids(g->inst, &pid, 1))
		g->host->log(g->inst, NT_LOG_INFO, "attached to running processes (-p): CUPTI can only "
			     "be injected into a job ntcore starts (ntcore -c FILE -- CMD); no GPU "
			     "times, the other probes work as before");
	else
		g->host->log(g->inst, NT_LOG_INFO, "host-wide: CUPTI can only be injected into a job "
			     "ntcore starts (ntcore -c FILE -- CMD); no GPU times");
}

/* The job's environment; 0 when the library goes in, 1 when not. */
int gpu_set_env(struct gpu_plugin *g, const char *lib)
{
	const struct nt_host *h = g->host;
	char val[64];
	int rc;

	if (!NT_HOST_HAS(h, child_setenv)) {
		h->log(g->inst, NT_LOG_WARN, "this ntcore cannot set a job's environment (ABI < 1.3): no GPU times");
		return 1;
	}
	rc = h->child_setenv(g->inst, "CUDA_INJECTION64_PATH", lib, false);
	if (rc == -ESRCH) {
		say_no_child(g);
		return 1;
	}
	if (rc == -EEXIST) {
		h->log(g->inst, NT_LOG_WARN, "CUDA_INJECTION64_PATH is already set in the job's "
		       "environment (%s): left as it is, so no GPU times from ntcore's CUPTI",
		       getenv("CUDA_INJECTION64_PATH"));
		return 1;
	}
	if (rc)
		return rc;
	h->child_setenv(g->inst, NT_GPU_ENV_SOCKET, g->sock_path, true);
	snprintf(val, sizeof(val), "%lld", (long long)g->cfg->flush_ms);
	h->child_setenv(g->inst, NT_GPU_ENV_FLUSH, val, true);
	snprintf(val, sizeof(val), "%lld:%lld", (long long)g->cfg->buffers,
		 (long long)g->cfg->buffer_kb);
	h->child_setenv(g->inst, NT_GPU_ENV_BUFFERS, val, true);
	nt_sb_reset(&g->text);
	for (uint32_t i = 0; i < g->cfg->kinds.n; i++) {
		nt_sb_puts(&g->text, i ? "," : "");
		nt_sb_puts(&g->text, g->cfg->kinds.v[i]);
	}
	h->child_setenv(g->inst, NT_GPU_ENV_KINDS, g->text.len ? g->text.buf : "", true);
	h->child_setenv(g->inst, NT_GPU_ENV_API, g->cfg->api_records ? "1" : "0", true);
	if (g->cfg->cupti_path[0])
		h->child_setenv(g->inst, NT_GPU_ENV_CUPTI, g->cfg->cupti_path, true);
	return 0;
}
