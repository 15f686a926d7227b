/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the NVML poller. NVML calls take from microseconds to tens of
 * milliseconds (nvmlDeviceGetPcieThroughput samples for ~20 ms per
 * direction; nvmlInit itself can take a second), so they never run on the
 * loop: a worker thread initialises NVML, polls every GPU each interval and
 * sets the device metrics itself (the host's metric_* calls are
 * thread-safe), then waits for XID events until the next poll. What the
 * loop must do (publish alerts, log, name processes, filter them by the
 * target set) it finds in an outbox, signalled through an eventfd that the
 * loop watches.
 *
 * A reading NVML reports NOT_SUPPORTED on a GPU (NVLink on a GPU without
 * links, PCIe byte counters on an older driver) is asked once, counted
 * once (ntcore_nvlink_nvml_unsupported{gpu,uuid,query} = 1), noted once in
 * the log, and left out from then on: its series never appear.
 */
#ifndef NVLINK_NVML_POLL_H
#define NVLINK_NVML_POLL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"
#include "nvl_metrics.h"
#include "nvml_load.h"

#define NVML_DEV_MAX 16
#define NVML_PROCS_MAX 64
#define NVML_XIDS_MAX 64
#define NVML_NOTES_MAX 16
#define NVML_NOTE_LEN 200

enum nvml_query {
	NQ_UTIL,
	NQ_MEMORY,
	NQ_POWER,
	NQ_ENERGY,
	NQ_TEMP,
	NQ_SM_CLOCK,
	NQ_MEM_CLOCK,
	NQ_REASONS,
	NQ_PCIE_RATE,
	NQ_PCIE_BYTES,
	NQ_PCIE_REPLAY,
	NQ_NVLINK_STATE,
	NQ_NVLINK_FIELDS,
	NQ_ECC,
	NQ_PROCS,
	NQ_PROC_UTIL,
	NQ_N
};

/* "utilization", "nvlink_state", ... (the `query` label) */
const char *nvml_query_name(int q);

struct nvml_proc {
	uint32_t pid;
	uint64_t mem_bytes;  /* UINT64_MAX: not available */
	double sm, mem;      /* ratios, < 0: no sample this interval */
};

struct nvml_xid {
	uint32_t gpu;
	uint64_t xid;
	uint64_t ts_ns;
};

/* Static facts of one GPU, and what it does not support. */
struct nvml_dev {
	nvml_device_t h;
	uint32_t index;
	char index_s[12];
	char uuid[NVML_UUID_LEN];
	char name[NVML_NAME_LEN];
	char bus_id[NVML_BUSID_LEN];
	uint32_t unsupported;  /* bit per enum nvml_query */
	uint32_t failing;      /* bit per query: other error already noted */
	uint32_t link_absent;  /* bit per NVLink link */
	uint32_t link_field_unsup; /* bit per field kind (tx, rx, 3 errors) */
	unsigned long long last_util_us; /* process-utilisation watermark */
	uint64_t pcie_tx, pcie_rx, pcie_ns; /* last byte counters, when read */
};

/* Worker -> loop. */
struct nvml_outbox {
	struct nvml_proc procs[NVML_DEV_MAX][NVML_PROCS_MAX];
	uint32_t nprocs[NVML_DEV_MAX];
	bool procs_fresh;
	struct nvml_xid xids[NVML_XIDS_MAX];
	uint32_t nxids;
	uint64_t xids_lost;
	char notes[NVML_NOTES_MAX][NVML_NOTE_LEN];
	uint32_t nnotes;
	uint64_t notes_lost;
	uint64_t polls;
	uint64_t first_poll_ns, max_poll_ns;
	bool ready, failed; /* init done (devices known) / init failed */
};

struct nvml_poller {
	struct nvml_lib lib;
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct nvl_metrics *nm;
	uint64_t interval_ns;
	bool procs_on, xids_on;
	/* worker-owned after start */
	struct nvml_dev dev[NVML_DEV_MAX];
	uint32_t ndev;
	nvml_event_set_t events;
	struct nvml_proc scratch[NVML_DEV_MAX][NVML_PROCS_MAX];
	/* shared */
	pthread_t thr;
	bool running;
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct nvml_outbox out;
};

/*
 * Open the library (on the caller's thread: a dlopen, fast) and start the
 * worker. Returns 0; -ENOENT with `err` set when the library cannot be
 * opened; another -errno when the thread or eventfd cannot be made.
 */
int nvml_poller_start(struct nvml_poller *p, const char *lib_path,
		      char *err, size_t errlen);
/* Stop the worker (returns within ~0.1 s), shut NVML down, close. */
void nvml_poller_stop(struct nvml_poller *p);
/* Loop side: read the eventfd and move the outbox into `copy` (the
 * outbox is emptied; static device facts stay). */
void nvml_poller_take(struct nvml_poller *p, struct nvml_outbox *copy);
/* After `ready`: the device facts (read-only for the loop). */
const struct nvml_dev *nvml_poller_dev(const struct nvml_poller *p,
				       uint32_t i);

/* Worker internals (nvml_read.c, nvml_links.c, nvml_procs.c). */
void nvml_note(struct nvml_poller *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void nvml_read_dev(struct nvml_poller *p, struct nvml_dev *d, uint64_t now_ns,
		   struct nvml_proc *procs, uint32_t *nprocs);
void nvml_read_nvlink(struct nvml_poller *p, struct nvml_dev *d);
void nvml_read_procs(struct nvml_poller *p, struct nvml_dev *d,
		     struct nvml_proc *out, uint32_t *n);
/* Shared by the worker's readers: NOT_SUPPORTED -> counted once, skipped
 * from then on; another error -> noted once per query. */
bool nvml_ok(struct nvml_poller *p, struct nvml_dev *d, int q, nvml_return_t r);
bool nvml_want(struct nvml_poller *p, struct nvml_dev *d, int q, bool present);
void nvml_unsupported(struct nvml_poller *p, struct nvml_dev *d, int q);

#endif /* NVLINK_NVML_POLL_H */
