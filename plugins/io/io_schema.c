/* SPDX-License-Identifier: MIT */
/*
 * io probe: its event schemas (io.slow, io.request, io.report) and metric
 * families, as data. Names and fields are the probe's interface: sinks,
 * dashboards and docs/io.md depend on them.
 */
#include "io_int.h"

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

const struct nt_schema io_schema_request = {
	.name = "io.request",
	.desc = "a block request issued to the driver (request_events = true)",
	.fields = request_fields, .n_fields = NT_ARRAY_LEN(request_fields),
	.min_size = sizeof(struct io_request_ev),
};

const struct nt_schema io_schema_slow = {
	.name = "io.slow",
	.desc = "a block request that took at least slow_threshold_ms",
	.fields = slow_fields, .n_fields = NT_ARRAY_LEN(slow_fields),
	.min_size = sizeof(struct io_slow_ev),
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct io_report_ev, text, NT_F_VSTR, "",
		 "devices, busiest processes and slowest requests, as a table"),
};
const struct nt_schema io_schema_report = {
	.name = "io.report", .desc = "block I/O table for the live summary",
	.fields = report_fields, .n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct io_report_ev),
};

/* ---- metrics ---------------------------------------------------------- */

static const char *const lbl_dev[] = { "dev", "device", "op" };
static const char *const lbl_proc[] = { "pid", "comm", "dev", "device", "op" };

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

const struct nt_metric_desc io_metrics[IO_M_COUNT] = {
	[IO_M_REQS] = DEV_C("ntcore_io_requests_total",
			 "Block requests completed"),
	[IO_M_BYTES] = DEV_C("ntcore_io_bytes_total", "Bytes transferred by "
			  "completed block requests"),
	[IO_M_SMALL] = DEV_C("ntcore_io_small_requests_total",
			  "Completed requests smaller than small_bytes"),
	[IO_M_QUEUE] = DEV_H("ntcore_io_queue_seconds", "Time from request "
			  "creation to issue to the driver", io_lat_bounds_s, IO_LAT_SLOTS),
	[IO_M_SERVICE] = DEV_H("ntcore_io_service_seconds", "Time from issue to "
			    "completion (device service time)", io_lat_bounds_s,
			    IO_LAT_SLOTS),
	[IO_M_SIZE] = DEV_H("ntcore_io_request_size_bytes", "Size of completed "
			 "requests", io_size_bounds_b, IO_SIZE_SLOTS),
	[IO_M_SLOW] = DEV_C("ntcore_io_slow_requests_total", "Requests that "
			 "reached slow_threshold_ms"),
	[IO_M_P_REQS] = PROC_C("ntcore_io_process_requests_total",
			    "Block requests completed, by issuing process"),
	[IO_M_P_BYTES] = PROC_C("ntcore_io_process_bytes_total",
			     "Bytes of completed requests, by issuing process"),
	[IO_M_P_QUEUE] = PROC_H("ntcore_io_process_queue_seconds",
			     "Queue time, by issuing process"),
	[IO_M_P_SERVICE] = PROC_H("ntcore_io_process_service_seconds",
			       "Service time, by issuing process"),
	[IO_M_UNSEEN] = { .name = "ntcore_io_untimed_requests_total",
		       .help = "Requests issued whose completion the kernel's "
			       "block_rq_complete tracepoint never reported "
			       "(counted, not timed)",
		       .type = NT_METRIC_COUNTER },
};
