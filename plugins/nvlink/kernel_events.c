/* SPDX-License-Identifier: MIT */
/*
 * nvlink: kernel-side events, attached only where the running kernel has
 * them (checked in tracefs at attach): the dma_fence tracepoints (emit,
 * signaled, wait_start, wait_end: GPU work that DRM drivers fence, waits on
 * it) and nvidia:nvidia_dev_xid (the NVIDIA module reports an XID; its
 * field offsets are read from the tracepoint's format file, since the
 * module's types are not in the kernel's BTF). Records become metrics,
 * dma_fence.wait events for long waits and alert.gpu_xid.
 *
 * The fence tracepoints are tp_btf: a perf-event tracepoint's release
 * waits for a grace period under the kernel's event_mutex, 30-40 ms each
 * and one after the other (the four made ntcore's shutdown 160 ms longer).
 * The typed arguments carry no driver or timeline strings (those sit
 * behind fence->ops function pointers): the BPF side records the two
 * functions and ksym.c names them. The NVIDIA module's XID tracepoint has
 * no BTF at all and stays a classic one, attached only where it exists.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/tp.h"
#include "nvl.h"
#include "nvlink.bpf.skel.h"

static const char *const tracefs_roots[] = { "/sys/kernel/tracing",
					     "/sys/kernel/debug/tracing" };

static bool tp_path(const char *cat, const char *name, const char *file,
		    char *out, size_t n)
{
	struct stat st;

	for (size_t i = 0; i < NT_ARRAY_LEN(tracefs_roots); i++) {
		snprintf(out, n, "%s/events/%s/%s/%s", tracefs_roots[i], cat, name, file);
		if (stat(out, &st) == 0)
			return true;
	}
	return false;
}

/* Offset of `field` in the tracepoint's raw record, -1 if not found. */
static int format_offset(const char *cat, const char *name, const char *field)
{
	char path[256], line[512], want[80];
	int off = -1;
	FILE *f;

	if (!tp_path(cat, name, "format", path, sizeof(path)))
		return -1;
	f = fopen(path, "re");
	if (!f)
		return -1;
	snprintf(want, sizeof(want), " %s;", field);
	while (fgets(line, sizeof(line), f)) {
		const char *o;

		if (!strstr(line, want) || !(o = strstr(line, "offset:")))
			continue;
		off = atoi(o + 7);
		break;
	}
	fclose(f);
	return off;
}

struct tp_prog {
	const char *cat, *name;
	struct bpf_program *(*prog)(struct nvlink_bpf *);
};

#define P(fn) static struct bpf_program *fn##_of(struct nvlink_bpf *k) { return k->progs.fn; }
P(on_fence_emit) P(on_fence_signaled) P(on_fence_wait_start) P(on_fence_wait_end) P(on_xid)
#undef P

static const struct tp_prog tps[] = {
	{ "dma_fence", "dma_fence_emit", on_fence_emit_of },
	{ "dma_fence", "dma_fence_signaled", on_fence_signaled_of },
	{ "dma_fence", "dma_fence_wait_start", on_fence_wait_start_of },
	{ "dma_fence", "dma_fence_wait_end", on_fence_wait_end_of },
	{ "nvidia", "nvidia_dev_xid", on_xid_of },
};

static bool xid_offsets(struct nvl *s)
{
	int dev = format_offset("nvidia", "nvidia_dev_xid", "dev");
	int code = format_offset("nvidia", "nvidia_dev_xid", "error_code");
	int msg = format_offset("nvidia", "nvidia_dev_xid", "msg");

	if (dev < 0 || code < 0 || msg < 0 || dev > 255 || code > 255 || msg > 255) {
		nt_log_info(s, "nvidia:nvidia_dev_xid has an unexpected format; not attached");
		return false;
	}
	s->skel->rodata->xid_off_dev = (uint32_t)dev;
	s->skel->rodata->xid_off_code = (uint32_t)code;
	s->skel->rodata->xid_off_msg = (uint32_t)msg;
	return true;
}

/* A fence tracepoint loads where the kernel's BTF has it; the XID one
 * where tracefs shows it, with a format we can read. */
void nvl_kernel_autoload(struct nvl *s)
{
	struct nt_vmlinux vm;

	nt_vmlinux_get(s->host, s->inst, &vm);
	for (size_t i = 0; i < NT_ARRAY_LEN(tps); i++) {
		bool fence = !strcmp(tps[i].cat, "dma_fence");
		bool on = fence ? s->cfg->dma_fence : s->cfg->xid_tracepoint;
		char path[256];

		if (fence)
			on = on && vm.btf && nt_tp_exists(vm.btf, tps[i].name);
		else
			on = on && tp_path(tps[i].cat, tps[i].name, "id", path,
					   sizeof(path)) && xid_offsets(s);
		bpf_program__set_autoload(tps[i].prog(s->skel), on);
	}
	nt_vmlinux_put(&vm);
}

void nvl_kernel_attach(struct nvl *s)
{
	char said[256];
	size_t o = 0;

	said[0] = '\0';
	for (size_t i = 0; i < NT_ARRAY_LEN(tps) && s->ntp < NVL_TP_MAX; i++) {
		struct bpf_program *p = tps[i].prog(s->skel);
		struct bpf_link *l;

		if (!bpf_program__autoload(p))
			continue;
		l = bpf_program__attach(p);
		if (!l) {
			nt_log_warn(s, "%s:%s: cannot attach: %s",
				     tps[i].cat, tps[i].name, strerror(errno));
			continue;
		}
		s->tp[s->ntp++] = l;
		o += (size_t)snprintf(said + o, sizeof(said) - o, "%s%s", o ? ", " : "",
				      tps[i].name);
	}
	nt_log_info(s, "kernel tracepoints attached: %s",
		     o ? said : "none (no dma_fence or nvidia_dev_xid here, or off)");
}

static void on_fence(struct nvl *s, const struct nvl_raw_fence *r)
{
	const struct nvl_ksym *drv = nvl_ksym_find(&s->ksyms, r->driver_fn);
	const char *lv[1] = { nvl_ksym_driver(drv) };
	struct nvl_ev_fence_wait *e = (struct nvl_ev_fence_wait *)s->rec.bytes;

	if (r->kind == NVL_FENCE_SIGNALED) {
		if (r->latency_ns)
			s->host->metric_observe(s->nm.m[NVM_FENCE_SIGNAL], lv,
						(double)r->latency_ns / 1e9);
		return;
	}
	s->host->metric_observe(s->nm.m[NVM_FENCE_WAIT], lv, (double)r->latency_ns / 1e9);
	if (r->latency_ns < (uint64_t)s->cfg->fence_wait_threshold_us * 1000ull ||
	    s->types[NVL_EV_FENCE_WAIT] <= 0)
		return;
	memset(e, 0, sizeof(*e));
	e->hdr = r->hdr;
	e->hdr.type = (uint32_t)s->types[NVL_EV_FENCE_WAIT];
	e->hdr.size = sizeof(*e);
	e->hdr.ts_ns = r->hdr.ts_ns - r->latency_ns; /* the wait's start */
	e->duration_ns = r->latency_ns;
	e->context = r->context;
	e->seqno = r->seqno;
	snprintf(e->driver, sizeof(e->driver), "%s", lv[0]);
	snprintf(e->timeline, sizeof(e->timeline), "%s",
		 nvl_ksym_find(&s->ksyms, r->timeline_fn)->func);
	s->host->publish(s->inst, &e->hdr);
}

void nvl_kernel_record(struct nvl *s, const void *rec, size_t size)
{
	const struct nt_event_hdr *h = rec;

	if (h->type == NVL_RAW_FENCE && size >= sizeof(struct nvl_raw_fence)) {
		on_fence(s, rec);
	} else if (h->type == NVL_RAW_XID && size >= sizeof(struct nvl_raw_xid)) {
		const struct nvl_raw_xid *x = rec;
		char dev[NVL_STR_LEN + 1], msg[NVL_XID_MSG_LEN + 1];

		memcpy(dev, x->dev, NVL_STR_LEN);
		dev[NVL_STR_LEN] = '\0';
		memcpy(msg, x->msg, NVL_XID_MSG_LEN);
		msg[NVL_XID_MSG_LEN] = '\0';
		nvl_xid_alert(s, -1, x->xid, dev, "tracepoint", msg, 0);
	}
}

void nvl_kernel_tick(struct nvl *s)
{
	static const char *const kinds[NVL_FENCE_N] = { "emit", "signaled",
							"wait_start", "wait_end" };
	int fd;

	if (!s->skel || !s->cfg->dma_fence)
		return;
	fd = bpf_map__fd(s->skel->maps.fence_counts);
	for (uint32_t k = 0; k < NVL_FENCE_N; k++) {
		uint64_t n = nt_bpf_percpu_sum_at(fd, k);
		const char *lv[1] = { kinds[k] };

		if (n == s->fence_reported[k])
			continue;
		s->fence_reported[k] = n;
		s->host->metric_set(s->nm.m[NVM_FENCE_EVENTS], lv, (double)n);
	}
}
