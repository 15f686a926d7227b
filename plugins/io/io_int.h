/* SPDX-License-Identifier: MIT */
/*
 * io probe, user side: what its files share. The config and the state, the
 * metric table's indexes, and each file's entry points:
 *   io.c          descriptor and ops (init, poll, flush, detach, fini)
 *   io_schema.c   event schemas and metric families (data)
 *   io_dev.c      block devices: config entries and names from sysfs
 *   io_attach.c   tracepoint choice, BPF load and attach
 *   io_ring.c     ring records to events (io.slow, io.request)
 *   io_stats.c    per-CPU sums, histogram bounds and quantiles
 *   io_collect.c  BPF maps to metrics, processes that exited
 *   io_report.c   the io.report table
 * Ownership: io.c's init allocates the state, fini frees it and all it
 * holds; the BPF skeleton and ring belong to attach/detach.
 */
#ifndef NTCORE_IO_INT_H
#define NTCORE_IO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/hmap.h"
#include "ntcore/kit/ring.h"
#include "ntcore/kit/sb.h"
#include "ntcore/kit/topn.h"
#include "ntcore/plugin.h"

#include "io.h"

#define IO_DEV_MAJOR(d) ((uint32_t)(d) >> 20)
#define IO_DEV_MINOR(d) ((uint32_t)(d) & 0xfffff)
#define IO_MKDEV(ma, mi) (((uint32_t)(ma) << 20) | (uint32_t)(mi))

#define IO_SYSFS "/sys"
/* How long the series of a process that exited stay (see docs/io.md). */
#define IO_LINGER_MS 60000
#define IO_MAX_DEVICES 64
#define IO_DEV_NAME_LEN 32
/* A comm as a label: NT_COMM_LEN bytes, each bad one U+FFFD (3 bytes). */
#define IO_COMM_LABEL_LEN (3 * NT_COMM_LEN + 1)

#define IO_TOK_RING 1
#define IO_TOK_TIMER 2

struct io_cfg {
	struct nt_strlist devices;
	double slow_threshold_ms;
	bool slow_events;
	bool request_events;
	int64_t small_bytes;
	bool per_process;
	int64_t interval_ms;
	int64_t report_interval_s;
	int64_t top_n;
};

enum io_metric {
	IO_M_REQS, IO_M_BYTES, IO_M_SMALL, IO_M_QUEUE, IO_M_SERVICE, IO_M_SIZE,
	IO_M_SLOW, IO_M_P_REQS, IO_M_P_BYTES, IO_M_P_QUEUE, IO_M_P_SERVICE,
	IO_M_UNSEEN, IO_M_COUNT
};

struct io_bpf;
struct nt_ring;

struct io_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct io_cfg *cfg;
	const char *sysfs;           /* IO_SYSFS; a test's fake tree */
	int ev_slow, ev_report, ev_request;
	struct nt_metric *m[IO_M_COUNT];
	uint32_t devs[IO_MAX_DEVICES];
	size_t n_devs;

	struct io_bpf *skel;
	struct nt_ring *rb;
	int ncpu;
	uint64_t drops_reported, full_reported;
	uint64_t last_report_ms;
	bool final_done;

	struct nt_hmap names;   /* dev_t -> char[IO_DEV_NAME_LEN] */
	struct nt_hmap retired; /* struct io_devop -> totals of expired procs */
	struct nt_hmap dead;    /* tgid -> mono ms it was first seen gone */
	struct nt_topn slow;    /* struct io_slowest, slowest of the run */
};

/* A device and an op: the key of the device rows. */
struct io_devop {
	uint32_t dev;
	uint32_t op;
};

/* One row of the report's device or process table. */
struct io_row {
	uint32_t dev;
	uint32_t pid;            /* 0 in the device table */
	uint32_t op;
	char name[IO_DEV_NAME_LEN];
	char comm[IO_COMM_LABEL_LEN];
	struct io_stats st;
};

/* Rows for the report (io_collect); io_rows_free frees them. */
struct io_rows {
	struct io_row *devs, *procs;
	size_t n_devs, n_procs;
};

/* io_schema.c */
extern const struct nt_schema io_schema_slow, io_schema_request,
	io_schema_report;
extern const struct nt_metric_desc io_metrics[IO_M_COUNT];

struct io_report_ev {
	struct nt_event_hdr hdr;
	struct nt_vstr text;
};

/* io_dev.c */
/*
 * Resolve a `devices` entry: a block device name ("vda", "nvme0n1p2") or
 * "MAJOR:MINOR", against a sysfs tree (normally "/sys"). Returns 0 with the
 * kernel dev_t in *dev, -EINVAL when the entry is malformed, -ENODEV when no
 * such block device exists; `err` says why.
 */
int io_resolve_device(const char *sysfs, const char *spec, uint32_t *dev,
		      char *err, size_t errlen);
/* The kernel's name of a block device ("vda1") from
 * SYSFS/dev/block/M:m/uevent, or "M:m" when it has none. */
const char *io_dev_name(const char *sysfs, uint32_t dev, char *buf, size_t len);
/* The same, cached in st->names ("?" when the cache cannot grow); valid
 * until the next call. */
const char *io_dev_cached_name(struct io_state *st, uint32_t dev);
/* "M:m" into buf[24]. */
const char *io_dev_majmin(uint32_t dev, char buf[24]);
/* The `devices` entries into st->devs; 0, or init's error (logged). */
int io_devices_setup(struct io_state *st);

/* io_ring.c: the ring buffer's callback (libbpf's ring_buffer_sample_fn). */
int io_on_record(void *ctx, void *data, size_t size);
/* comm (NUL-padded, NT_COMM_LEN) as a label value: valid UTF-8. */
void io_comm_label(char out[IO_COMM_LABEL_LEN], const char *comm);

/* io_stats.c */
const char *io_op_str(uint32_t op);
/* dst += src, field by field (comm is taken from src when dst has none). */
void io_stats_add(struct io_stats *dst, const struct io_stats *src);
/* Upper bounds of the histograms, in the metrics' base units. */
extern const double io_lat_bounds_s[IO_LAT_SLOTS];  /* seconds: 2^k us */
extern const double io_size_bounds_b[IO_SIZE_SLOTS]; /* bytes: 512 << k */
/*
 * The q-quantile (0 < q <= 1) of a latency histogram as the upper bound of
 * the slot that holds it, in ns; 0 for an empty histogram, UINT64_MAX when
 * it lies in the +Inf slot.
 */
uint64_t io_lat_quantile_ns(const __u64 hist[IO_LAT_SLOTS + 1], double q);
/* Keep r among the slowest (rows with no latency are empty slots). */
void io_slow_offer(struct nt_topn *t, const struct io_slowest *r);

/* io_collect.c */
/*
 * Sum the per-CPU statistics, update every series, retire processes that
 * are long gone (with `expire`; their counts move into st->retired so
 * device totals never go down). With rows, also hand back the device and
 * process rows for the report.
 */
void io_collect(struct io_state *st, bool expire, struct io_rows *rows);
void io_rows_free(struct io_rows *rows);
/* Each CPU's slowest requests since the last look into st->slow, then
 * reset them. */
void io_collect_slowest(struct io_state *st);

/* io_report.c */
/*
 * The io.report text: per device and op, the busiest processes (at most
 * max_procs, by bytes), then the slowest requests (`slow`, rows of struct
 * io_slowest). Names of devices in the slowest table come from `dev_name`
 * (may be NULL: "M:m"). Sorts the rows.
 */
void io_format_report(struct nt_sb *sb, struct io_rows *rows,
		      size_t max_procs, const struct nt_topn *slow,
		      const char *(*dev_name)(void *arg, uint32_t dev),
		      void *arg);
/* Publish io.report from rows and st->slow. */
void io_publish_report(struct io_state *st, struct io_rows *rows);

/* io_attach.c */
int io_attach(void *state);

/* io.c: undo attach (the ring read one last time first). */
void io_detach(void *state);

#endif /* NTCORE_IO_INT_H */
