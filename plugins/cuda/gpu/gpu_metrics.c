// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu: metrics. Hot counts are kept here per record and copied
 * into the registry every interval_ms (a registry update per kernel would
 * cost a label lookup under a lock each time):
 *  - GPU time and count per kernel and process;
 *  - queueing delay (API call entry -> GPU start) per process, histogram;
 *  - copies: bytes and GPU seconds per direction, their ratio; sets; syncs;
 *  - busy ratio per device (union of the intervals of its kernels, copies
 *    and sets) and per stream (their sum: a stream runs one at a time),
 *    over windows of interval_ms on the records' clock. Records arrive a
 *    flush period or two after the GPU ran them, so a window is reported
 *    once it is SETTLE behind the present; the gauges lag by that much.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

#define NWIN 64
#define QBUCKETS 12
#define KERNEL_LABEL_MAX 200

static const double queue_buckets[QBUCKETS] = {
	1e-6, 5e-6, 10e-6, 50e-6, 100e-6, 500e-6, 1e-3, 5e-3, 10e-3, 50e-3, 0.1, 1.0,
};
static const char *const l_pid_kernel[] = { "pid", "kernel" };
static const char *const l_pid[] = { "pid" };
static const char *const l_pid_kind[] = { "pid", "kind" };
static const char *const l_gpu[] = { "gpu" };
static const char *const l_gpu_stream[] = { "gpu", "stream" };
static const char *const l_how[] = { "how" };

enum { M_KSEC, M_KN, M_QUEUE, M_CBYTES, M_CSEC, M_CBW, M_SBYTES, M_SYNC,
       M_BUSY, M_SBUSY, M_PROCS, M_JOIN, M_N };

static const struct nt_metric_desc descs[M_N] = {
	[M_KSEC] = { "ntcore_cuda_gpu_kernel_seconds_total", "GPU time of kernels (CUPTI), by process and kernel",
		     NT_METRIC_COUNTER, 2, l_pid_kernel, NULL, 0, 0 },
	[M_KN] = { "ntcore_cuda_gpu_kernels_total", "Kernels run on the GPU (CUPTI), by process and kernel",
		   NT_METRIC_COUNTER, 2, l_pid_kernel, NULL, 0, 0 },
	[M_QUEUE] = { "ntcore_cuda_gpu_queue_delay_seconds",
		      "Launch API call entry to kernel start on the GPU", NT_METRIC_HISTOGRAM, 1,
		      l_pid, queue_buckets, QBUCKETS, 0 },
	[M_CBYTES] = { "ntcore_cuda_gpu_memcpy_bytes_total", "Bytes copied by the GPU, by direction",
		       NT_METRIC_COUNTER, 2, l_pid_kind, NULL, 0, 0 },
	[M_CSEC] = { "ntcore_cuda_gpu_memcpy_seconds_total", "GPU time of copies, by direction",
		     NT_METRIC_COUNTER, 2, l_pid_kind, NULL, 0, 0 },
	[M_CBW] = { "ntcore_cuda_gpu_memcpy_bandwidth_bytes_per_second",
		    "Bytes copied / GPU time of the copies so far, by direction", NT_METRIC_GAUGE, 2,
		    l_pid_kind, NULL, 0, 0 },
	[M_SBYTES] = { "ntcore_cuda_gpu_memset_bytes_total", "Bytes set by the GPU",
		       NT_METRIC_COUNTER, 1, l_pid, NULL, 0, 0 },
	[M_SYNC] = { "ntcore_cuda_gpu_sync_seconds_total", "Synchronization time (CUPTI), by kind",
		     NT_METRIC_COUNTER, 2, l_pid_kind, NULL, 0, 0 },
	[M_BUSY] = { "ntcore_cuda_gpu_busy_ratio",
		     "Share of the last settled window the device ran kernels, copies or sets",
		     NT_METRIC_GAUGE, 1, l_gpu, NULL, 0, 0 },
	[M_SBUSY] = { "ntcore_cuda_gpu_stream_busy_ratio",
		      "Share of the last settled window a stream ran kernels, copies or sets",
		      NT_METRIC_GAUGE, 2, l_gpu_stream, NULL, 0, 0 },
	[M_PROCS] = { "ntcore_cuda_gpu_processes", "Processes sending GPU activity",
		      NT_METRIC_GAUGE, 0, NULL, NULL, 0, 0 },
	[M_JOIN] = { "ntcore_cuda_gpu_records_total",
		     "GPU records by how they were joined: call (launch event and stacks), thread (API record), none",
		     NT_METRIC_COUNTER, 1, l_how, NULL, 0, 0 },
};

struct win {
	int64_t k; /* window index, -1 empty */
	uint64_t busy;
};

struct busy {
	int32_t device;
	uint64_t stream; /* UINT64_MAX: the device as a whole */
	uint64_t watermark;
	struct win w[NWIN];
	bool seen;
};

struct kagg {
	uint32_t pid, name;
	uint64_t ns, n, ns_out, n_out;
};

struct pagg { /* per process */
	uint32_t pid;
	uint64_t q[QBUCKETS + 1];
	double qsum;
	bool qdirty;
	uint64_t cbytes[11], cns[11], cbytes_out[11], cns_out[11];
	uint64_t sbytes, sbytes_out;
	uint64_t syncns[5], syncns_out[5];
};

struct gpu_metrics {
	struct gpu_plugin *g;
	struct nt_metric *m[M_N];
	struct nt_metric_desc d[M_N]; /* descs with the configured max_series */
	struct kagg *k;
	uint32_t nk, capk;
	struct gpu_map kat;   /* pid << 32 | name -> index in k */
	struct pagg *p;
	uint32_t np, capp;
	struct busy *b;
	uint32_t nb, capb;
	uint64_t win_ns, settle_ns;
	int64_t reported; /* last window reported */
	double procs;
};

struct gpu_metrics *gpu_metrics_new(struct gpu_plugin *g)
{
	struct gpu_metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->g = g;
	for (int i = 0; i < M_N; i++) {
		m->d[i] = descs[i];
		m->d[i].max_series = (uint32_t)g->cfg->max_series;
		m->m[i] = g->host->metric_register(g->inst, &m->d[i]);
	}
	m->win_ns = (uint64_t)g->cfg->interval_ms * 1000000ull;
	m->settle_ns = (uint64_t)(2 * g->cfg->flush_ms + 300) * 1000000ull;
	m->reported = -1;
	return m;
}

void gpu_metrics_free(struct gpu_metrics *m)
{
	if (!m)
		return;
	free(m->k);
	free(m->p);
	free(m->b);
	gpu_map_free(&m->kat);
	free(m);
}

static struct pagg *pagg_of(struct gpu_metrics *m, uint32_t pid)
{
	for (uint32_t i = 0; i < m->np; i++)
		if (m->p[i].pid == pid)
			return &m->p[i];
	if (m->np == m->capp) {
		uint32_t cap = m->capp ? m->capp * 2 : 8;
		struct pagg *p = realloc(m->p, cap * sizeof(*p));

		if (!p)
			return NULL;
		m->p = p;
		m->capp = cap;
	}
	memset(&m->p[m->np], 0, sizeof(m->p[0]));
	m->p[m->np].pid = pid;
	return &m->p[m->np++];
}

static struct kagg *kagg_of(struct gpu_metrics *m, uint32_t pid, uint32_t name)
{
	uint64_t key = (uint64_t)pid << 32 | name, i;

	if (gpu_map_get(&m->kat, key, &i))
		return &m->k[i];
	if (m->nk == m->capk) {
		uint32_t cap = m->capk ? m->capk * 2 : 64;
		struct kagg *k = realloc(m->k, cap * sizeof(*k));

		if (!k)
			return NULL;
		m->k = k;
		m->capk = cap;
	}
	if (gpu_map_put(&m->kat, key, m->nk))
		return NULL;
	memset(&m->k[m->nk], 0, sizeof(m->k[0]));
	m->k[m->nk].pid = pid;
	m->k[m->nk].name = name;
	return &m->k[m->nk++];
}

static struct busy *busy_of(struct gpu_metrics *m, int32_t device, uint64_t stream)
{
	for (uint32_t i = 0; i < m->nb; i++)
		if (m->b[i].device == device && m->b[i].stream == stream)
			return &m->b[i];
	if (m->nb == m->capb) {
		uint32_t cap = m->capb ? m->capb * 2 : 8;
		struct busy *b = realloc(m->b, cap * sizeof(*b));

		if (!b)
			return NULL;
		m->b = b;
		m->capb = cap;
	}
	memset(&m->b[m->nb], 0, sizeof(m->b[0]));
	m->b[m->nb].device = device;
	m->b[m->nb].stream = stream;
	for (int i = 0; i < NWIN; i++)
		m->b[m->nb].w[i].k = -1;
	return &m->b[m->nb++];
}

/* Add [s, e) to the windows it covers (too old windows are skipped). */
static void busy_add(struct gpu_metrics *m, struct busy *b, uint64_t s, uint64_t e)
{
	b->seen = true;
	for (uint64_t k = s / m->win_ns; s < e; k++) {
		uint64_t wend = (k + 1) * m->win_ns, part = (e < wend ? e : wend) - s;
		struct win *w = &b->w[k % NWIN];

		if (w->k < (int64_t)k) {
			w->k = (int64_t)k;
			w->busy = 0;
		}
		if (w->k == (int64_t)k)
			w->busy += part;
		s = wend;
	}
}

static void busy_note(struct gpu_metrics *m, int32_t device, uint64_t stream,
		      uint64_t start, uint64_t end)
{
	struct busy *d = busy_of(m, device, UINT64_MAX);

	if (end <= start || !d)
		return;
	/* the device: the union of its intervals, kept by a watermark (records
	 * come roughly in completion order) */
	if (end > d->watermark) {
		busy_add(m, d, start > d->watermark ? start : d->watermark, end);
		d->watermark = end;
	}
	if (m->g->cfg->stream_busy) {
		struct busy *st = busy_of(m, device, stream);

		if (st)
			busy_add(m, st, start, end);
	}
}

void gpu_metrics_queue(struct gpu_metrics *m, uint32_t pid, uint64_t ns)
{
	struct pagg *p = pagg_of(m, pid);
	double secs = (double)ns / 1e9;
	int i = 0;

	if (!p)
		return;
	while (i < QBUCKETS && secs > queue_buckets[i])
		i++;
	p->q[i]++;
	p->qsum += secs;
	p->qdirty = true;
}

void gpu_metrics_exec(struct gpu_metrics *m, uint32_t pid, unsigned what,
		      uint32_t name_id, int32_t device, uint64_t stream,
		      uint64_t start, uint64_t end, uint64_t bytes, unsigned kind)
{
	struct pagg *p = pagg_of(m, pid);
	uint64_t ns = end > start ? end - start : 0;

	if (!p)
		return;
	if (what == GPU_X_KERNEL) {
		struct kagg *k = kagg_of(m, pid, name_id);

		if (k) {
			k->ns += ns;
			k->n++;
		}
	} else if (what == GPU_X_MEMCPY && kind < 11) {
		p->cbytes[kind] += bytes;
		p->cns[kind] += ns;
	} else if (what == GPU_X_MEMSET) {
		p->sbytes += bytes;
	} else if (what == GPU_X_SYNC && kind < 5) {
		p->syncns[kind] += ns;
		return; /* a wait, not work: not GPU busy time */
	}
	busy_note(m, device, stream, start, end);
}

static void push_kernels(struct gpu_metrics *m)
{
	struct gpu_plugin *g = m->g;

	for (uint32_t i = 0; i < m->nk; i++) {
		struct kagg *k = &m->k[i];
		char pid[16], name[KERNEL_LABEL_MAX + 1];
		const char *labels[2] = { pid, name };
		uint32_t len;
		const char *s = gpu_str(&g->strs, k->name, &len);

		if (k->n == k->n_out)
			continue;
		snprintf(pid, sizeof(pid), "%u", k->pid);
		snprintf(name, sizeof(name), "%.*s", (int)(len < KERNEL_LABEL_MAX ? len : KERNEL_LABEL_MAX),
			 len ? s : "?");
		g->host->metric_add(m->m[M_KSEC], labels, (double)(k->ns - k->ns_out) / 1e9);
		g->host->metric_add(m->m[M_KN], labels, (double)(k->n - k->n_out));
		k->ns_out = k->ns;
		k->n_out = k->n;
	}
}

static void push_process(struct gpu_metrics *m, struct pagg *p)
{
	static const char *const sync_kind[5] = { "unknown", "event", "stream_wait_event",
						  "stream", "context" };
	const struct nt_host *h = m->g->host;
	char pid[16];
	const char *l1[1] = { pid }, *l2[2] = { pid, NULL };

	snprintf(pid, sizeof(pid), "%u", p->pid);
	if (p->qdirty)
		h->metric_hist_set(m->m[M_QUEUE], l1, p->q, p->qsum);
	p->qdirty = false;
	for (unsigned k = 0; k < 11; k++) {
		if (p->cbytes[k] == p->cbytes_out[k] && p->cns[k] == p->cns_out[k])
			continue;
		l2[1] = gpu_copy_kind_label(k);
		h->metric_add(m->m[M_CBYTES], l2, (double)(p->cbytes[k] - p->cbytes_out[k]));
		h->metric_add(m->m[M_CSEC], l2, (double)(p->cns[k] - p->cns_out[k]) / 1e9);
		if (p->cns[k])
			h->metric_set(m->m[M_CBW], l2, (double)p->cbytes[k] * 1e9 / (double)p->cns[k]);
		p->cbytes_out[k] = p->cbytes[k];
		p->cns_out[k] = p->cns[k];
	}
	if (p->sbytes != p->sbytes_out)
		h->metric_add(m->m[M_SBYTES], l1, (double)(p->sbytes - p->sbytes_out));
	p->sbytes_out = p->sbytes;
	for (unsigned k = 0; k < 5; k++) {
		if (p->syncns[k] == p->syncns_out[k])
			continue;
		l2[1] = sync_kind[k];
		h->metric_add(m->m[M_SYNC], l2, (double)(p->syncns[k] - p->syncns_out[k]) / 1e9);
		p->syncns_out[k] = p->syncns[k];
	}
}

/* Report the newest window that is SETTLE behind now. */
static void push_busy(struct gpu_metrics *m, uint64_t now)
{
	int64_t k;

	if (now < m->settle_ns + m->win_ns)
		return;
	k = (int64_t)((now - m->settle_ns) / m->win_ns) - 1;
	if (k <= m->reported)
		return;
	m->reported = k;
	for (uint32_t i = 0; i < m->nb; i++) {
		struct busy *b = &m->b[i];
		struct win *w = &b->w[k % NWIN];
		double r = w->k == k ? (double)w->busy / (double)m->win_ns : 0.0;
		char gpu[16], stream[24];
		const char *labels[2] = { gpu, stream };

		if (!b->seen)
			continue;
		snprintf(gpu, sizeof(gpu), "%d", b->device);
		snprintf(stream, sizeof(stream), "%llu", (unsigned long long)b->stream);
		m->g->host->metric_set(b->stream == UINT64_MAX ? m->m[M_BUSY] : m->m[M_SBUSY],
				       labels, r > 1.0 ? 1.0 : r);
	}
}

void gpu_metrics_tick(struct gpu_metrics *m, uint64_t now)
{
	struct gpu_plugin *g = m->g;
	static const char *const how[GPU_JOIN_N] = { "none", "thread", "call" };
	uint64_t sum[GPU_JOIN_N] = { 0 };
	struct nt_hmap_iter it = {0};
	uint64_t k, v;

	push_kernels(m);
	for (uint32_t i = 0; i < m->np; i++)
		push_process(m, &m->p[i]);
	push_busy(m, now);
	g->host->metric_set(m->m[M_PROCS], NULL, m->procs);
	while (gpu_map_next(&g->procs, &it, &k, &v)) {
		struct gpu_pstate *ps = (struct gpu_pstate *)(uintptr_t)v;

		for (int i = 0; i < GPU_JOIN_N; i++) {
			sum[i] += ps->n_joined[i];
			ps->n_joined[i] = 0;
		}
	}
	for (int i = 0; i < GPU_JOIN_N; i++) {
		const char *l[1] = { how[i] };

		if (sum[i])
			g->host->metric_add(m->m[M_JOIN], l, (double)sum[i]);
	}
}

/* A finished process: push what is left, keep its counters (they are
 * totals), drop the local state. */
void gpu_metrics_forget(struct gpu_metrics *m, uint32_t pid)
{
	uint32_t kept = 0;

	push_kernels(m);
	for (uint32_t i = 0; i < m->np; i++) {
		if (m->p[i].pid == pid)
			push_process(m, &m->p[i]);
		else
			m->p[kept++] = m->p[i];
	}
	m->np = kept;
	kept = 0;
	gpu_map_free(&m->kat);
	for (uint32_t i = 0; i < m->nk; i++)
		if (m->k[i].pid != pid)
			m->k[kept++] = m->k[i];
	m->nk = kept;
	for (uint32_t i = 0; i < m->nk; i++)
		gpu_map_put(&m->kat, (uint64_t)m->k[i].pid << 32 | m->k[i].name, i);
}

void gpu_metrics_process(struct gpu_metrics *m, int delta)
{
	m->procs += delta;
}

const char *gpu_copy_kind_name(unsigned kind)
{
	static const char *const n[] = { "unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					 "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };

	return kind < 11 ? n[kind] : "unknown";
}

const char *gpu_copy_kind_label(unsigned kind)
{
	static const char *const n[] = { "unknown", "h2d", "d2h", "h2a", "a2h", "a2a",
					 "a2d", "d2a", "d2d", "h2h", "p2p" };

	return kind < 11 ? n[kind] : "unknown";
}

const char *gpu_sync_type_name(unsigned type)
{
	static const char *const n[] = { "synchronization", "event synchronize",
					 "stream wait event", "stream synchronize",
					 "context synchronize" };

	return type < 5 ? n[type] : n[0];
}
