/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the plugin's user-side state and the functions its files share.
 * nvlink.c holds the descriptor and the ops; nvml_out.c turns the NVML
 * worker's outbox into alerts and process metrics; nccl_attach.c finds
 * libnccl and attaches the uprobes; nccl_record.c turns ring records into
 * events and metrics, nccl_events.c runs the hang check; kernel_events.c attaches the
 * dma_fence and XID tracepoints and handles their records.
 * Everything here runs on the loop thread.
 */
#ifndef NVLINK_NVL_H
#define NVLINK_NVL_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/kit/ring.h"
#include "ntcore/plugin.h"
#include "nccl_state.h"
#include "ksym.h"
#include "nvl_events.h"
#include "nvl_metrics.h"
#include "nvlink.h"
#include "../cuda/uprobes.h"
#include "nvml_poll.h"

struct nvlink_bpf;
struct nt_ring;
struct bpf_link;

struct nvl_cfg {
	int64_t interval_ms;
	bool nvml;
	const char *nvml_library;
	bool processes;
	bool xid_events;
	bool nccl;
	struct nt_strlist libraries;
	bool stop_on_load;
	bool collective_events;
	int64_t hang_timeout_ms;
	bool dma_fence;
	int64_t fence_wait_threshold_us;
	bool xid_tracepoint;
	int64_t ringbuf_kb;
	int64_t max_series;
};

/* A file checked for NCCL entry points (deduplicated by inode). */
struct nvl_lib {
	uint64_t dev, ino;
	char *path;
	bool is_nccl;
	struct nt_uprobes up;     /* its links (plugins/cuda/uprobes.h) */
	size_t nprobes;           /* entry points probed (entry + return each) */
};

/* Per-interval bandwidth sums of one (pid, rank, call). */
struct nvl_bw {
	uint32_t pid;
	char comm[NT_COMM_LEN + 1];
	int32_t rank;
	uint32_t call;
	bool used;
	uint64_t alg_bytes, ns;
	double busbw_factor;
};

#define NVL_BW_MAX 256
#define NVL_TP_MAX 8
#define NVL_XID_RECENT 16
#define NVL_TARGETS_MAX 4096
#define NVL_PENDING_MAX 256

struct nvl_proc_label {
	uint32_t pid;
	char comm[NT_COMM_LEN + 1];
};

struct nvl {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct nvl_cfg *cfg;
	int types[NVL_EV_N];
	struct nvl_metrics nm;
	struct nt_metric_desc mdesc[NVM_N];
	/* NVML */
	struct nvml_poller *nvml;
	struct nvml_outbox *box;
	bool nvml_said;            /* "N GPUs" logged */
	struct nvl_proc_label prev[NVML_DEV_MAX][NVML_PROCS_MAX];
	uint32_t nprev[NVML_DEV_MAX];
	struct { uint32_t xid; uint64_t ts_ns; char bus[16]; } xid_recent[NVL_XID_RECENT];
	uint32_t xid_next;
	/* BPF */
	struct nvlink_bpf *skel;
	struct nt_ring *rb;
	struct bpf_link *tp[NVL_TP_MAX];
	size_t ntp;
	bool multi;
	struct nvl_lib *libs;
	size_t nlibs, caplibs;
	uint64_t probes;
	uint64_t drops_reported;
	uint64_t fence_reported[4];
	struct nvl_ksyms ksyms;     /* names of fence drivers' functions */
	/* NCCL */
	struct nvl_comms comms;
	struct nvl_groups groups;
	struct nvl_bw bw[NVL_BW_MAX];
	uint64_t bw_lost;
	struct nvl_pending pend[NVL_PENDING_MAX]; /* scratch of the hang check */
	uint32_t targets[NVL_TARGETS_MAX];        /* scratch: the target pids */
	/* one record being built, 8-byte aligned */
	union {
		struct nt_event_hdr hdr;
		uint64_t align;
		uint8_t bytes[4096];
	} rec;
};

/* nvl_util.c: the command name of pid, "?" when it is gone. */
const char *nvl_comm_of(uint32_t pid, char *buf, size_t n);

/* nvml_out.c */
void nvl_nvml_drain(struct nvl *s);
void nvl_xid_alert(struct nvl *s, int gpu, uint32_t xid, const char *bus,
		   const char *source, const char *msg, uint32_t pid);

/* nccl_attach.c */
void nvl_nccl_discover(struct nvl *s);
void nvl_nccl_on_path(struct nvl *s, const void *rec, size_t size);
void nvl_nccl_set_prefixes(struct nvl *s);
void nvl_nccl_release(struct nvl *s);

/* nccl_record.c: one NVL_RAW_CALL record of `size` bytes (short or bad
 * ones are ignored); the bandwidth gauges of the interval, then reset. */
void nvl_nccl_record(struct nvl *s, const void *rec, size_t size);
void nvl_nccl_bw_publish(struct nvl *s);
void nvl_nccl_forget_pid(struct nvl *s, uint32_t pid);

/* nccl_events.c: the interval's gauges and hang check. */
void nvl_nccl_tick(struct nvl *s);

/* nccl_alert.c: alert.nccl_hang for one finding of the hang check. */
void nvl_nccl_hang_alert(struct nvl *s, const struct nvl_hang *h);

/* kernel_events.c */
void nvl_kernel_autoload(struct nvl *s);
void nvl_kernel_attach(struct nvl *s);
void nvl_kernel_record(struct nvl *s, const void *rec, size_t size);
void nvl_kernel_tick(struct nvl *s);

/* nvl_util.c: an alert whose fixed part the caller filled in s->rec
 * (after NT_ALERT_FIELDS); returns the subscribers that took it. */
int nvl_publish_alert(struct nvl *s, int type_idx, size_t fixed_size,
		      uint32_t severity, uint32_t pid, const char *message,
		      const char *evidence);

#endif /* NVLINK_NVL_H */
