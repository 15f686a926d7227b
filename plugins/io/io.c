/* SPDX-License-Identifier: MIT */
/*
 * io probe, user side: loads io.bpf.c, forwards io.slow events, copies the
 * per-CPU request statistics into the metric registry on a timer (per device
 * and per process), and writes the io.report table with the slowest
 * requests.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"
#include "ntcore/plugin.h"

#include "io.bpf.skel.h"
#include "io.h"
#include "io_logic.h"

#define TOK_RING 1
#define TOK_TIMER 2

#define IO_SYSFS "/sys"
/* How long the series of a process that exited stay (see docs/io.md). */
#define IO_LINGER_MS 60000
#define IO_MAX_DEVICES 64

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

static const struct nt_cfg_key io_cfg_keys[] = {
	{ .key = "devices", .type = NT_CFG_STRING_LIST,
	  .offset = offsetof(struct io_cfg, devices), .def = "[]",
	  .min = 1, .max = 0,
	  .desc = "block devices to trace, by name (\"vda\", \"nvme0n1p2\") or "
		  "\"MAJOR:MINOR\"; a disk includes its partitions; empty: all" },
	{ .key = "slow_threshold_ms", .type = NT_CFG_FLOAT,
	  .offset = offsetof(struct io_cfg, slow_threshold_ms), .def = "50.0",
	  .min = 0, .max = 3600000,
	  .desc = "requests whose queue + service time reach this become "
		  "io.slow events (0: every request)" },
	{ .key = "slow_events", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct io_cfg, slow_events), .def = "true",
	  .min = 1, .max = 0, .desc = "publish io.slow events" },
	{ .key = "request_events", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct io_cfg, request_events), .def = "false",
	  .min = 1, .max = 0,
	  .desc = "publish an io.request event for every request issued "
		  "(audits and debugging; costly on busy disks)" },
	{ .key = "small_bytes", .type = NT_CFG_INT,
	  .offset = offsetof(struct io_cfg, small_bytes), .def = "4096",
	  .min = 1, .max = 1073741824,
	  .desc = "requests smaller than this count as small "
		  "(ntcore_io_small_requests_total)" },
	{ .key = "per_process", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct io_cfg, per_process), .def = "true",
	  .min = 1, .max = 0,
	  .desc = "export ntcore_io_process_* series (pid, comm labels)" },
	{ .key = "interval_ms", .type = NT_CFG_INT,
	  .offset = offsetof(struct io_cfg, interval_ms), .def = "1000",
	  .min = 100, .max = 3600000,
	  .desc = "how often BPF counters are copied into the metrics" },
	{ .key = "report_interval_s", .type = NT_CFG_INT,
	  .offset = offsetof(struct io_cfg, report_interval_s), .def = "10",
	  .min = 0, .max = 86400,
	  .desc = "publish io.report this often (0: only at exit)" },
	{ .key = "top_n", .type = NT_CFG_INT,
	  .offset = offsetof(struct io_cfg, top_n), .def = "10",
	  .min = 0, .max = 1000,
	  .desc = "rows of the process and slowest-request tables in io.report" },
};

/* ---- schemas ---------------------------------------------------------- */

#define F(m, t, u, d) NT_FIELD(struct io_slow_ev, m, t, u, d)
static const struct nt_field slow_fields[] = {
	F(dev, NT_F_DEVT, "", "device (partition) MAJOR:MINOR"),
	F(op, NT_F_STR, "", "read, write, flush, discard or other"),
	F(bytes, NT_F_U32, "bytes", "request size"),
	F(sector, NT_F_U64, "", "first sector on the whole disk, 512-byte units"),
	F(queue_ns, NT_F_U64, "ns", "created to issued to the driver"),
	F(service_ns, NT_F_U64, "ns", "issued to completed"),
	F(latency_ns, NT_F_U64, "ns", "queue_ns + service_ns"),
	F(error, NT_F_ERRNO, "", "completion status"),
};
#undef F

#define R(m, t, u, d) NT_FIELD(struct io_request_ev, m, t, u, d)
static const struct nt_field request_fields[] = {
	R(dev, NT_F_DEVT, "", "device (partition) MAJOR:MINOR"),
	R(op, NT_F_STR, "", "read, write, flush, discard or other"),
	R(bytes, NT_F_U32, "bytes", "request size"),
	R(sector, NT_F_U64, "", "first sector on the whole disk, 512-byte units"),
	R(queue_ns, NT_F_U64, "ns", "created to issued to the driver"),
};
#undef R

static const struct nt_schema schema_request = {
	.name = "io.request",
	.desc = "a block request issued to the driver (request_events = true)",
	.fields = request_fields, .n_fields = NT_ARRAY_LEN(request_fields),
	.min_size = sizeof(struct io_request_ev),
};

static const struct nt_schema schema_slow = {
	.name = "io.slow",
	.desc = "a block request that took at least slow_threshold_ms",
	.fields = slow_fields, .n_fields = NT_ARRAY_LEN(slow_fields),
	.min_size = sizeof(struct io_slow_ev),
};

struct io_report_ev {
	struct nt_event_hdr hdr;
	struct nt_vstr text;
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct io_report_ev, text, NT_F_VSTR, "",
		 "devices, busiest processes and slowest requests, as a table"),
};
static const struct nt_schema schema_report = {
	.name = "io.report", .desc = "block I/O table for the live summary",
	.fields = report_fields, .n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct io_report_ev),
};

/* ---- metrics ---------------------------------------------------------- */

static const char *const lbl_dev[] = { "dev", "device", "op" };
static const char *const lbl_proc[] = { "pid", "comm", "dev", "device", "op" };

enum {
	M_REQS, M_BYTES, M_SMALL, M_QUEUE, M_SERVICE, M_SIZE, M_SLOW,
	M_P_REQS, M_P_BYTES, M_P_QUEUE, M_P_SERVICE, M_UNSEEN, M_COUNT
};

#define DEV_C(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER,        \
		      .n_labels = 3, .label_names = lbl_dev }
#define DEV_H(n, h, b, nb) { .name = n, .help = h,                            \
			     .type = NT_METRIC_HISTOGRAM, .n_labels = 3,        \
			     .label_names = lbl_dev, .buckets = b, .n_buckets = nb }
#define PROC_C(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER,       \
		       .n_labels = 5, .label_names = lbl_proc }
#define PROC_H(n, h) { .name = n, .help = h, .type = NT_METRIC_HISTOGRAM,     \
		       .n_labels = 5, .label_names = lbl_proc,                 \
		       .buckets = io_lat_bounds_s, .n_buckets = IO_LAT_SLOTS }

static const struct nt_metric_desc io_metrics[M_COUNT] = {
	[M_REQS] = DEV_C("ntcore_io_requests_total",
			 "Block requests completed"),
	[M_BYTES] = DEV_C("ntcore_io_bytes_total", "Bytes transferred by "
			  "completed block requests"),
	[M_SMALL] = DEV_C("ntcore_io_small_requests_total",
			  "Completed requests smaller than small_bytes"),
	[M_QUEUE] = DEV_H("ntcore_io_queue_seconds", "Time from request "
			  "creation to issue to the driver", io_lat_bounds_s, IO_LAT_SLOTS),
	[M_SERVICE] = DEV_H("ntcore_io_service_seconds", "Time from issue to "
			    "completion (device service time)", io_lat_bounds_s,
			    IO_LAT_SLOTS),
	[M_SIZE] = DEV_H("ntcore_io_request_size_bytes", "Size of completed "
			 "requests", io_size_bounds_b, IO_SIZE_SLOTS),
	[M_SLOW] = DEV_C("ntcore_io_slow_requests_total", "Requests that "
			 "reached slow_threshold_ms"),
	[M_P_REQS] = PROC_C("ntcore_io_process_requests_total",
			    "Block requests completed, by issuing process"),
	[M_P_BYTES] = PROC_C("ntcore_io_process_bytes_total",
			     "Bytes of completed requests, by issuing process"),
	[M_P_QUEUE] = PROC_H("ntcore_io_process_queue_seconds",
			     "Queue time, by issuing process"),
	[M_P_SERVICE] = PROC_H("ntcore_io_process_service_seconds",
			       "Service time, by issuing process"),
	[M_UNSEEN] = { .name = "ntcore_io_untimed_requests_total",
		       .help = "Requests issued whose completion the kernel's "
			       "block_rq_complete tracepoint never reported "
			       "(counted, not timed)",
		       .type = NT_METRIC_COUNTER },
};

/* ---- state ------------------------------------------------------------ */

struct io_name {
	uint32_t dev;
	char name[32];
};

struct io_dead {
	uint32_t tgid;
	uint64_t since_ms;
};

struct io_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct io_cfg *cfg;
	int ev_slow, ev_report, ev_request;
	struct nt_metric *m[M_COUNT];
	uint32_t devs[IO_MAX_DEVICES];
	size_t n_devs;

	struct io_bpf *skel;
	struct ring_buffer *rb;
	int ncpu;
	uint64_t drops_reported, full_reported;
	uint64_t last_report_ms;
	bool final_done;

	struct io_name *names;       /* dev_t -> name cache */
	size_t n_names, cap_names;
	struct io_row *retired;      /* totals of expired processes, per dev/op */
	size_t n_retired, cap_retired;
	struct io_dead *dead;
	size_t n_dead, cap_dead;
	struct io_slow_top slow;     /* slowest requests of the run */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void comm_label(char out[NT_COMM_LEN + 1], const char *comm)
{
	size_t i;

	for (i = 0; i < NT_COMM_LEN && comm[i]; i++)
		out[i] = (comm[i] >= 0x20 && comm[i] < 0x7f) ? comm[i] : '?';
	out[i] = '\0';
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	p = realloc(*arr, nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static const char *dev_name(struct io_state *st, uint32_t dev)
{
	for (size_t i = 0; i < st->n_names; i++)
		if (st->names[i].dev == dev)
			return st->names[i].name;
	if (grow((void **)&st->names, &st->cap_names, st->n_names,
		 sizeof(*st->names)) < 0)
		return "?";
	struct io_name *n = &st->names[st->n_names++];

	n->dev = dev;
	io_dev_name(IO_SYSFS, dev, n->name, sizeof(n->name));
	return n->name;
}

static const char *dev_name_cb(void *arg, uint32_t dev)
{
	return dev_name(arg, dev);
}

/* ---- init ------------------------------------------------------------- */

/* Stop producing (ABI 1.6): the skeleton's links go, all at once; the ring
 * and maps stay for the core's last read. */
static void io_quiesce(void *state)
{
	struct io_state *st = state;
	struct nt_linkset ls = {0};

	if (st->skel)
		nt_linkset_take_skeleton(&ls, st->skel->skeleton);
	nt_linkset_release(&ls);
}

static void io_fini(void *state);

static int io_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct io_cfg *cfg = config;
	struct io_state *st;
	size_t missing = 0;

	if (cfg->devices.n > IO_MAX_DEVICES)
		return host->config_error(inst, "devices",
					  "at most %d devices (got %u)",
					  IO_MAX_DEVICES, cfg->devices.n);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = cfg;

	for (uint32_t i = 0; i < cfg->devices.n; i++) {
		char err[320];
		uint32_t dev;
		int rc = io_resolve_device(IO_SYSFS, cfg->devices.v[i], &dev,
					   err, sizeof(err));

		if (rc == -EINVAL) {
			free(st);
			return host->config_error(inst, "devices", "%s", err);
		}
		if (rc < 0) {
			int line = 0;
			const char *file = host->config_file(inst, &line);

			host->log(inst, NT_LOG_ERROR, "%s:%d: devices: %s",
				  file ? file : "?", line, err);
			missing++;
			continue;
		}
		st->devs[st->n_devs++] = dev;
	}
	if (cfg->devices.n && !st->n_devs) {
		host->log(inst, NT_LOG_ERROR,
			  "none of the configured devices exists: nothing to "
			  "trace");
		free(st);
		return -ENODEV;
	}
	if (missing)
		host->log(inst, NT_LOG_WARN, "tracing the %zu device(s) that "
			  "exist; %zu configured one(s) missing", st->n_devs,
			  missing);

	if (io_slow_top_init(&st->slow, (size_t)cfg->top_n) < 0) {
		free(st);
		return -ENOMEM;
	}
	st->ev_slow = host->register_schema(inst, &schema_slow);
	st->ev_report = host->register_schema(inst, &schema_report);
	st->ev_request = host->register_schema(inst, &schema_request);
	if (st->ev_slow < 0 || st->ev_report < 0 || st->ev_request < 0) {
		host->log(inst, NT_LOG_ERROR, "cannot register the io.* schemas");
		io_fini(st);
		return -EEXIST;
	}
	for (int i = 0; i < M_COUNT; i++) {
		if (!cfg->per_process && i >= M_P_REQS && i <= M_P_SERVICE)
			continue;
		st->m[i] = host->metric_register(inst, &io_metrics[i]);
		if (!st->m[i]) {
			host->log(inst, NT_LOG_ERROR, "cannot register metric %s",
				  io_metrics[i].name);
			io_fini(st);
			return -EINVAL;
		}
	}
	*state = st;
	return 0;
}

/* ---- ring buffer ------------------------------------------------------ */

static int io_on_record(void *ctx, void *data, size_t size)
{
	struct io_state *st = ctx;
	const struct io_slow_ev *e = data;
	char devs[24], op[9];

	if (size >= sizeof(e->hdr) && e->hdr.size > size) {
		/* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if (size >= sizeof(struct io_request_ev) &&
	    (int)e->hdr.type == st->ev_request) {
		st->host->publish(st->inst, data);
		return 0;
	}
	if (size < sizeof(*e) || (int)e->hdr.type != st->ev_slow)
		return 0;
	snprintf(devs, sizeof(devs), "%u:%u", IO_DEV_MAJOR(e->dev),
		 IO_DEV_MINOR(e->dev));
	memcpy(op, e->op, 8);
	op[8] = '\0';
	const char *lv[] = { devs, dev_name(st, e->dev), op };

	st->host->metric_add(st->m[M_SLOW], lv, 1);
	st->host->publish(st->inst, data);
	return 0;
}

/* ---- metrics copy ----------------------------------------------------- */

static bool proc_alive(uint32_t pid)
{
	return pid == 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* Has the process been gone longer than the linger time? */
static bool proc_expired(struct io_state *st, uint32_t tgid, uint64_t now)
{
	size_t i;

	for (i = 0; i < st->n_dead && st->dead[i].tgid != tgid; i++)
		;
	if (proc_alive(tgid)) {
		if (i < st->n_dead)
			st->dead[i] = st->dead[--st->n_dead];
		return false;
	}
	if (i == st->n_dead) {
		if (grow((void **)&st->dead, &st->cap_dead, st->n_dead,
			 sizeof(*st->dead)) < 0)
			return false;
		st->dead[st->n_dead].tgid = tgid;
		st->dead[st->n_dead++].since_ms = now;
		return false;
	}
	/* Several keys share a process: it stays in `dead` until the walk
	 * that finds no key of it (see io_tick). */
	return now - st->dead[i].since_ms >= IO_LINGER_MS;
}

/* Forget dead processes whose keys were all retired. */
static void io_dead_prune(struct io_state *st)
{
	uint64_t now = now_ms();

	for (size_t i = 0; i < st->n_dead;) {
		if (now - st->dead[i].since_ms >= IO_LINGER_MS)
			st->dead[i] = st->dead[--st->n_dead];
		else
			i++;
	}
}

static struct io_row *row_find(struct io_row **rows, size_t *n, size_t *cap,
			       uint32_t dev, uint32_t op)
{
	for (size_t i = 0; i < *n; i++)
		if ((*rows)[i].dev == dev && (*rows)[i].op == op)
			return &(*rows)[i];
	if (grow((void **)rows, cap, *n, sizeof(**rows)) < 0)
		return NULL;
	struct io_row *r = &(*rows)[(*n)++];

	memset(r, 0, sizeof(*r));
	r->dev = dev;
	r->op = op;
	return r;
}

static void hist_set(struct io_state *st, int m, const char *const *lv,
		     const __u64 *hist, size_t n, double sum)
{
	uint64_t counts[IO_LAT_SLOTS + 1];

	if (!st->m[m] || n > NT_ARRAY_LEN(counts))
		return;
	for (size_t i = 0; i < n; i++)
		counts[i] = hist[i];
	st->host->metric_hist_set(st->m[m], lv, counts, sum);
}

static void proc_series(struct io_state *st, const struct io_key *k,
			const struct io_stats *s, bool remove)
{
	char pid[16], comm[NT_COMM_LEN + 1], devs[24];

	if (!st->cfg->per_process)
		return;
	snprintf(pid, sizeof(pid), "%u", k->tgid);
	comm_label(comm, s->comm);
	snprintf(devs, sizeof(devs), "%u:%u", IO_DEV_MAJOR(k->dev),
		 IO_DEV_MINOR(k->dev));
	const char *lv[] = { pid, comm, devs, dev_name(st, k->dev),
			     io_op_str(k->op) };
	const struct nt_host *h = st->host;

	if (remove) {
		for (int i = M_P_REQS; i <= M_P_SERVICE; i++)
			h->metric_remove(st->m[i], lv);
		return;
	}
	h->metric_set(st->m[M_P_REQS], lv, (double)s->ops);
	h->metric_set(st->m[M_P_BYTES], lv, (double)s->bytes);
	hist_set(st, M_P_QUEUE, lv, s->queue_hist, IO_LAT_SLOTS + 1, (double)s->queue_ns_sum / 1e9);
	hist_set(st, M_P_SERVICE, lv, s->service_hist, IO_LAT_SLOTS + 1,
		 (double)s->service_ns_sum / 1e9);
}

/*
 * Sum the per-CPU statistics, update every series, retire processes that
 * are long gone (their counts move into `retired` so device totals never go
 * down). With rows != NULL, also hand back the device and process rows for
 * the report (caller frees).
 */
static void io_collect(struct io_state *st, bool expire, struct io_row **dev_rows,
		       size_t *n_dev_rows, struct io_row **proc_rows,
		       size_t *n_proc_rows)
{
	int fd = bpf_map__fd(st->skel->maps.stats);
	size_t vsz = sizeof(struct io_stats); /* a multiple of 8 already */
	struct io_stats *per = calloc((size_t)st->ncpu, vsz);
	struct io_row *devs = NULL, *procs = NULL;
	size_t n_devs = 0, cap_devs = 0, n_procs = 0, cap_procs = 0;
	struct io_key key, next, *prev = NULL, *gone = NULL;
	size_t n_gone = 0, cap_gone = 0;
	uint64_t now = now_ms();

	if (!per)
		return;
	for (size_t i = 0; i < st->n_retired; i++) {
		struct io_row *r = row_find(&devs, &n_devs, &cap_devs,
					    st->retired[i].dev, st->retired[i].op);
		if (r)
			io_stats_add(&r->st, &st->retired[i].st);
	}
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct io_stats sum;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, per) < 0)
			continue;
		memset(&sum, 0, sizeof(sum));
		for (int c = 0; c < st->ncpu; c++)
			io_stats_add(&sum, &per[c]);
		struct io_row *d = row_find(&devs, &n_devs, &cap_devs, key.dev,
					    key.op);
		if (d)
			io_stats_add(&d->st, &sum);
		if (expire && proc_expired(st, key.tgid, now)) {
			/* Gone for long: its totals move into `retired` (the
			 * device rows keep them), its series and key go. */
			struct io_row *r = row_find(&st->retired, &st->n_retired,
						    &st->cap_retired, key.dev,
						    key.op);
			if (r && !grow((void **)&gone, &cap_gone, n_gone,
				       sizeof(*gone))) {
				io_stats_add(&r->st, &sum);
				proc_series(st, &key, &sum, true);
				gone[n_gone++] = key;
			}
			continue;
		}
		proc_series(st, &key, &sum, false);
		if (proc_rows && !grow((void **)&procs, &cap_procs, n_procs,
				       sizeof(*procs))) {
			struct io_row *p = &procs[n_procs++];

			memset(p, 0, sizeof(*p));
			p->dev = key.dev;
			p->op = key.op;
			p->pid = key.tgid;
			snprintf(p->name, sizeof(p->name), "%s",
				 dev_name(st, key.dev));
			comm_label(p->comm, sum.comm);
			p->st = sum;
		}
	}
	free(per);
	/* Deleting while walking would restart the walk: delete after it. */
	for (size_t i = 0; i < n_gone; i++)
		bpf_map_delete_elem(fd, &gone[i]);
	free(gone);
	if (expire)
		io_dead_prune(st);

	for (size_t i = 0; i < n_devs; i++) {
		struct io_row *d = &devs[i];
		char devs_s[24];

		snprintf(devs_s, sizeof(devs_s), "%u:%u", IO_DEV_MAJOR(d->dev),
			 IO_DEV_MINOR(d->dev));
		snprintf(d->name, sizeof(d->name), "%s", dev_name(st, d->dev));
		const char *lv[] = { devs_s, d->name, io_op_str(d->op) };
		const struct nt_host *h = st->host;

		h->metric_set(st->m[M_REQS], lv, (double)d->st.ops);
		h->metric_set(st->m[M_BYTES], lv, (double)d->st.bytes);
		h->metric_set(st->m[M_SMALL], lv, (double)d->st.small_ops);
		hist_set(st, M_QUEUE, lv, d->st.queue_hist, IO_LAT_SLOTS + 1,
			 (double)d->st.queue_ns_sum / 1e9);
		hist_set(st, M_SERVICE, lv, d->st.service_hist, IO_LAT_SLOTS + 1,
			 (double)d->st.service_ns_sum / 1e9);
		hist_set(st, M_SIZE, lv, d->st.size_hist, IO_SIZE_SLOTS + 1,
			 (double)d->st.bytes);
	}
	if (dev_rows) {
		*dev_rows = devs;
		*n_dev_rows = n_devs;
	} else {
		free(devs);
	}
	if (proc_rows) {
		*proc_rows = procs;
		*n_proc_rows = n_procs;
	} else {
		free(procs);
	}
}

/* Collect each CPU's slowest request since the last look, then reset. */
static void io_collect_slowest(struct io_state *st)
{
	int fd = bpf_map__fd(st->skel->maps.slowest);
	struct io_slowest_set *per = calloc((size_t)st->ncpu, sizeof(*per));
	uint32_t zero = 0;

	if (!per)
		return;
	if (bpf_map_lookup_elem(fd, &zero, per) == 0) {
		for (int c = 0; c < st->ncpu; c++)
			for (int i = 0; i < IO_SLOW_SLOTS; i++)
				io_slow_top_offer(&st->slow, &per[c].s[i]);
		memset(per, 0, (size_t)st->ncpu * sizeof(*per));
		bpf_map_update_elem(fd, &zero, per, BPF_ANY);
	}
	free(per);
}

static void io_publish_report(struct io_state *st, struct io_row *devs,
			      size_t n_devs, struct io_row *procs,
			      size_t n_procs)
{
	size_t cap = 8192 + (n_devs + (size_t)st->cfg->top_n * 2) * 160;
	struct io_report_ev *ev = calloc(1, sizeof(*ev) + cap);
	size_t len;

	if (!ev)
		return;
	len = io_format_report((char *)(ev + 1), cap, devs, n_devs, procs,
			       n_procs, (size_t)st->cfg->top_n, &st->slow,
			       dev_name_cb, st);
	if (len >= cap)
		len = cap - 1;
	ev->hdr.type = (uint32_t)st->ev_report;
	ev->hdr.size = (uint32_t)(sizeof(*ev) + len);
	ev->hdr.ts_ns = now_ns();
	ev->hdr.pid = (uint32_t)getpid();
	ev->hdr.tid = ev->hdr.pid;
	snprintf(ev->hdr.comm, sizeof(ev->hdr.comm), "ntcore");
	ev->text.off = sizeof(*ev);
	ev->text.len = (uint32_t)len;
	st->host->publish(st->inst, &ev->hdr);
	free(ev);
}

static void io_tick(struct io_state *st, bool final)
{
	uint64_t now = now_ms(), full;
	struct io_row *devs = NULL, *procs = NULL;
	size_t n_devs = 0, n_procs = 0;
	bool report = final || (st->cfg->report_interval_s &&
				now - st->last_report_ms >=
					(uint64_t)st->cfg->report_interval_s * 1000);

	nt_bpf_report_drops(st->host, st->inst,
			    bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	full = nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.stats_full));
	if (full > st->full_reported) {
		st->host->count_drop(st->inst, "map_full", full - st->full_reported);
		if (!st->full_reported)
			st->host->log(st->inst, NT_LOG_WARN,
				      "statistics table full: some requests "
				      "are not counted");
		st->full_reported = full;
	}
	st->host->metric_set(st->m[M_UNSEEN], NULL,
			     (double)nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.unseen)));
	io_collect_slowest(st);
	io_collect(st, !final, report ? &devs : NULL, &n_devs,
		   report ? &procs : NULL, &n_procs);
	if (report) {
		st->last_report_ms = now;
		io_publish_report(st, devs, n_devs, procs, n_procs);
	}
	free(devs);
	free(procs);
}

static int io_poll(void *state, uint32_t token, uint32_t budget)
{
	struct io_state *st = state;
	int n;

	(void)budget; /* libbpf 1.1 has no bounded consume */
	if (!st->rb)
		return 0;
	if (token == TOK_RING) {
		n = ring_buffer__consume(st->rb);
		return n < 0 ? 0 : n;
	}
	if (token == TOK_TIMER) {
		ring_buffer__consume(st->rb);
		io_tick(st, false);
	}
	return 0;
}

/* ---- attach / detach -------------------------------------------------- */

static void io_detach(void *state);

static int io_attach(void *state)
{
	struct io_state *st = state;
	const struct nt_host *h = st->host;
	const struct io_cfg *cfg = st->cfg;
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int err;

	st->ncpu = libbpf_num_possible_cpus();
	if (st->ncpu <= 0) {
		btf__free(vmlinux);
		return -EINVAL;
	}
	if (!nt_bpf_kernel_has_tp(vmlinux, "block_rq_issue") ||
	    !nt_bpf_kernel_has_tp(vmlinux, "block_rq_complete")) {
		h->log(st->inst, NT_LOG_ERROR,
		       "no kernel BTF (/sys/kernel/btf/vmlinux) or no "
		       "block_rq_issue/complete tracepoints: io cannot run");
		btf__free(vmlinux);
		return -ENOTSUP;
	}
	st->skel = io_bpf__open();
	if (!st->skel) {
		err = -errno;
		h->log(st->inst, NT_LOG_ERROR, "cannot open the BPF object: %s",
		       strerror(-err));
		btf__free(vmlinux);
		return err;
	}
	if (!nt_bpf_kernel_has_tp(vmlinux, "block_io_start")) {
		/* Before 6.5: the inserting / issuing task stands in for the
		 * submitter, which is right for direct I/O without a
		 * scheduler and often a kworker otherwise. */
		bpf_program__set_autoload(st->skel->progs.io_start, false);
		h->log(st->inst, NT_LOG_WARN,
		       "kernel lacks block_io_start (Linux 6.5+): requests are "
		       "attributed to the task that inserts or issues them");
	}
	if (!nt_bpf_kernel_has_tp(vmlinux, "block_rq_insert"))
		bpf_program__set_autoload(st->skel->progs.io_insert, false);
	if (!nt_bpf_kernel_has_tp(vmlinux, "block_rq_requeue"))
		bpf_program__set_autoload(st->skel->progs.io_requeue, false);
	btf__free(vmlinux);

	st->skel->rodata->ev_slow_type = (uint32_t)st->ev_slow;
	st->skel->rodata->ev_request_type =
		cfg->request_events ? (uint32_t)st->ev_request : 0;
	st->skel->rodata->slow_ns = (uint64_t)(cfg->slow_threshold_ms * 1e6);
	st->skel->rodata->slow_events = cfg->slow_events;
	st->skel->rodata->small_bytes = (uint32_t)cfg->small_bytes;
	st->skel->rodata->dev_filter_on = st->n_devs > 0;
	err = nt_bpf_use_targets(h, st->inst, st->skel->maps.nt_targets,
				 &st->skel->rodata->nt_filter_on);
	if (err)
		goto fail;
	err = io_bpf__load(st->skel);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot load the BPF programs: %s",
		       strerror(-err));
		goto fail;
	}
	for (size_t i = 0; i < st->n_devs; i++) {
		uint8_t one = 1;

		bpf_map_update_elem(bpf_map__fd(st->skel->maps.devs),
				    &st->devs[i], &one, BPF_ANY);
	}
	err = io_bpf__attach(st->skel);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot attach the tracepoints: %s",
		       strerror(-err));
		goto fail;
	}
	err = nt_bpf_ring_open(h, st->inst, st->skel->maps.events, io_on_record, st,
			       TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, (uint64_t)cfg->interval_ms, TOK_TIMER);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot register with the loop: %s",
		       strerror(-err));
		goto fail;
	}
	st->last_report_ms = now_ms();
	st->final_done = false;
	{
		char list[256] = "all devices";
		size_t pos = 0;

		for (size_t i = 0; i < st->n_devs && pos < sizeof(list) - 40; i++)
			pos += (size_t)snprintf(list + pos, sizeof(list) - pos,
						"%s%s (%u:%u)", i ? ", " : "",
						dev_name(st, st->devs[i]),
						IO_DEV_MAJOR(st->devs[i]),
						IO_DEV_MINOR(st->devs[i]));
		h->log(st->inst, NT_LOG_INFO,
		       "tracing block requests on %s%s, slow >= %.3g ms", list,
		       st->skel->rodata->nt_filter_on ? " issued by the targets"
						      : "",
		       cfg->slow_threshold_ms);
	}
	return 0;
fail:
	io_detach(st);
	return err < 0 ? err : -EINVAL;
}

static void io_final(struct io_state *st)
{
	if (st->final_done || !st->skel || !st->rb)
		return;
	st->final_done = true;
	ring_buffer__consume(st->rb);
	io_tick(st, true);
}

static void io_flush(void *state)
{
	io_final(state);
}

static void io_detach(void *state)
{
	struct io_state *st = state;

	io_final(st);
	ring_buffer__free(st->rb);
	st->rb = NULL;
	io_bpf__destroy(st->skel);
	st->skel = NULL;
}

static void io_fini(void *state)
{
	struct io_state *st = state;

	if (!st)
		return;
	if (st->skel)
		io_detach(st);
	io_slow_top_free(&st->slow);
	free(st->names);
	free(st->retired);
	free(st->dead);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "io",
	.kind = NT_KIND_PROBE,
	.description = "block I/O per device and process: bytes, requests, "
		       "queue and service latency, sizes, slowest requests",
	.version = "0.1.0",
	.config = io_cfg_keys,
	.n_config = NT_ARRAY_LEN(io_cfg_keys),
	.config_size = sizeof(struct io_cfg),
	.init = io_init,
	.attach = io_attach,
	.poll = io_poll,
	.detach = io_detach,
	.quiesce = io_quiesce,
	.fini = io_fini,
	.flush = io_flush,
};
