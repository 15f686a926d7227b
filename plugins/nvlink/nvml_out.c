/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the loop's side of NVML. Reads the worker's outbox: its notes
 * go to the log, XIDs become alert.gpu_xid (with the meaning from xid.c)
 * and ntcore_nvlink_xid_errors_total, process samples become the
 * per-process metrics, labelled with `pid` and `comm` like the cuda probe's
 * series and kept to the traced processes when there is a target set.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/sb.h"
#include "ntcore/kit/log.h"
#include "nvl.h"
#include "xid.h"

static void say_devices(struct nvl *s, const struct nvml_outbox *b)
{
	char line[1024];
	size_t o = 0;

	if (s->nvml_said || !b->ready || !b->polls)
		return;
	s->nvml_said = true;
	for (uint32_t i = 0; i < s->nvml->ndev && o < sizeof(line) - 1; i++) {
		const struct nvml_dev *d = nvml_poller_dev(s->nvml, i);

		o += (size_t)snprintf(line + o, sizeof(line) - o, "%sgpu %u %s (%s, %s)",
				      i ? "; " : "", d->index, d->name, d->uuid, d->bus_id);
	}
	nt_log_info(s, "NVML: %u GPU(s): %s; first poll took %.2f ms (worker thread)",
		     s->nvml->ndev, o ? line : "none",
		     (double)b->first_poll_ns / 1e6);
}

static bool in_targets(const uint32_t *t, size_t n, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (t[i] == pid)
			return true;
	return false;
}

static void forget_gone(struct nvl *s, uint32_t g, const struct nvl_proc_label *now,
			uint32_t nnow)
{
	const struct nvml_dev *d = nvml_poller_dev(s->nvml, g);

	for (uint32_t i = 0; i < s->nprev[g]; i++) {
		const struct nvl_proc_label *o = &s->prev[g][i];
		char ps[16];
		const char *lv[4] = { d->index_s, d->uuid, ps, o->comm };
		bool still = false;

		for (uint32_t k = 0; k < nnow && !still; k++)
			still = now[k].pid == o->pid && !strcmp(now[k].comm, o->comm);
		if (still)
			continue;
		snprintf(ps, sizeof(ps), "%u", o->pid);
		s->host->metric_remove(s->nm.m[NVM_PROC_MEM], lv);
		s->host->metric_remove(s->nm.m[NVM_PROC_SM], lv);
		s->host->metric_remove(s->nm.m[NVM_PROC_MEMUTIL], lv);
	}
}

static void dev_procs(struct nvl *s, uint32_t g, const struct nvml_outbox *b,
		      const uint32_t *targets, size_t ntargets, bool filter)
{
	const struct nvml_dev *d = nvml_poller_dev(s->nvml, g);
	struct nvl_proc_label now[NVML_PROCS_MAX];
	uint32_t nnow = 0;

	for (uint32_t i = 0; i < b->nprocs[g] && i < NVML_PROCS_MAX; i++) {
		const struct nvml_proc *p = &b->procs[g][i];
		struct nvl_proc_label *l = &now[nnow];
		char ps[16];
		const char *lv[4] = { d->index_s, d->uuid, ps, l->comm };

		if (filter && !in_targets(targets, ntargets, p->pid))
			continue;
		nnow++;
		l->pid = p->pid;
		nvl_comm_of(p->pid, l->comm, sizeof(l->comm));
		snprintf(ps, sizeof(ps), "%u", p->pid);
		if (p->mem_bytes != UINT64_MAX)
			s->host->metric_set(s->nm.m[NVM_PROC_MEM], lv, (double)p->mem_bytes);
		if (p->sm >= 0)
			s->host->metric_set(s->nm.m[NVM_PROC_SM], lv, p->sm);
		if (p->mem >= 0)
			s->host->metric_set(s->nm.m[NVM_PROC_MEMUTIL], lv, p->mem);
	}
	forget_gone(s, g, now, nnow);
	memcpy(s->prev[g], now, nnow * sizeof(now[0]));
	s->nprev[g] = nnow;
}

static void publish_procs(struct nvl *s, const struct nvml_outbox *b)
{
	bool filter = s->host->target_map_fd(s->inst) >= 0;
	size_t nt = s->host->target_pids(s->inst, s->targets, NVL_TARGETS_MAX);

	if (nt > NVL_TARGETS_MAX)
		nt = NVL_TARGETS_MAX;
	for (uint32_t g = 0; g < s->nvml->ndev; g++)
		dev_procs(s, g, b, s->targets, nt, filter);
}

void nvl_nvml_drain(struct nvl *s)
{
	struct nvml_outbox *b = s->box;

	nvml_poller_take(s->nvml, b);
	for (uint32_t i = 0; i < b->nnotes; i++)
		nt_kit_log(s->host, s->inst, b->failed ? NT_LOG_WARN : NT_LOG_INFO,
			   "NVML: %s", b->notes[i]);
	if (b->notes_lost)
		nt_log_info(s, "NVML: %" PRIu64 " more notes",
			     b->notes_lost);
	say_devices(s, b);
	for (uint32_t i = 0; i < b->nxids; i++) {
		const struct nvml_dev *d = nvml_poller_dev(s->nvml, b->xids[i].gpu);

		nvl_xid_alert(s, (int)b->xids[i].gpu, (uint32_t)b->xids[i].xid,
			      d ? d->bus_id : "", "nvml", "", 0);
	}
	if (b->xids_lost)
		s->host->count_drop(s->inst, "nvml_xid", b->xids_lost);
	if (b->procs_fresh && b->ready)
		publish_procs(s, b);
}

/* "00000000:00:06.0" and "0000:00:06.0" name the same device: compare
 * bus:device.function. */
static bool same_bus(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	return la >= 7 && lb >= 7 && !strcasecmp(a + la - 7, b + lb - 7);
}

/* The same XID of the same GPU from the other source within 2 s. */
static bool seen_recently(struct nvl *s, uint32_t xid, const char *bus)
{
	uint64_t now = nt_clock_mono_ns();

	for (uint32_t i = 0; i < NVL_XID_RECENT; i++)
		if (s->xid_recent[i].xid == xid && s->xid_recent[i].ts_ns &&
		    now - s->xid_recent[i].ts_ns < 2000000000ull &&
		    same_bus(s->xid_recent[i].bus, bus))
			return true;
	s->xid_recent[s->xid_next % NVL_XID_RECENT].xid = xid;
	s->xid_recent[s->xid_next % NVL_XID_RECENT].ts_ns = now;
	snprintf(s->xid_recent[s->xid_next % NVL_XID_RECENT].bus,
		 sizeof(s->xid_recent[0].bus), "%s", bus);
	s->xid_next++;
	return false;
}

static const struct nvml_dev *dev_by_bus(struct nvl *s, const char *bus)
{
	for (uint32_t i = 0; s->nvml && s->box->ready && i < s->nvml->ndev; i++) {
		const struct nvml_dev *d = nvml_poller_dev(s->nvml, i);

		if (same_bus(d->bus_id, bus))
			return d;
	}
	return NULL;
}

void nvl_xid_alert(struct nvl *s, int gpu, uint32_t xid, const char *bus,
		   const char *source, const char *msg, uint32_t pid)
{
	const struct nvml_dev *d = gpu >= 0 && s->nvml ? nvml_poller_dev(s->nvml, (uint32_t)gpu)
						       : dev_by_bus(s, bus);
	const struct nvl_xid_info *info = nvl_xid_lookup(xid);
	char xs[16], text[512], ev[1024], emsg[300];
	struct nt_sb sb;
	const char *lv[4] = { d ? d->index_s : "", d ? d->uuid : "", xs, source };
	struct nvl_ev_xid *e = (struct nvl_ev_xid *)s->rec.bytes;

	snprintf(xs, sizeof(xs), "%u", xid);
	s->host->metric_add(s->nm.m[NVM_XID], lv, 1);
	if (seen_recently(s, xid, bus))
		return; /* one alert for both sources */
	snprintf(text, sizeof(text), "GPU %s (%s): XID %u: %s; %s",
		 d ? d->index_s : "?", d ? d->bus_id : bus, xid, info->meaning,
		 info->action);
	nt_sb_init_buf(&sb, emsg, sizeof(emsg));
	nt_sb_json_str(&sb, msg, strlen(msg));
	snprintf(ev, sizeof(ev),
		 "{\"gpu\":%d,\"uuid\":\"%s\",\"pci_bus_id\":\"%s\",\"xid\":%u,"
		 "\"meaning\":\"%s\",\"action\":\"%s\",\"source\":\"%s\",\"driver_message\":%s}",
		 d ? (int)d->index : -1, d ? d->uuid : "", d ? d->bus_id : bus, xid,
		 info->meaning, info->action, source, emsg);
	memset(e, 0, sizeof(*e));
	e->gpu = d ? (int32_t)d->index : -1;
	e->xid = xid;
	nvl_publish_alert(s, NVL_EV_XID, sizeof(*e), info->severity, pid, text, ev);
}
