/* SPDX-License-Identifier: MIT */
/* The built-in watch and rule sets (data); see defaults.h. */
#include "defaults.h"

#define LIST(...) { .v = (const char *const[]){ __VA_ARGS__ }, \
		    .n = sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *) }
#define NONE { .v = NULL, .n = 0 }

/*
 * Watches. Per-process series feed the reasons of slow steps and the joint
 * check ("training" group) without alerting on their own: a loader's
 * requests doubling is a reason, not news. Device latency, GPU busy, NCCL
 * and CUDA call times, and resident memory alert by themselves.
 * `slower_when` says, per family, which move can make a step slower and so
 * be its reason: times, latencies, request counts and queue times up;
 * throughput (bytes per second, CPU seconds per second) and GPU busy down.
 * The other way is an effect: a training process whose loader is slow
 * waits less on the GPU (the GPU run named "CUDA sync time x0.016").
 */
const struct an_watch_cfg an_default_watches[] = {
	{ .metrics = LIST("ntcore_io_process_requests_total",
			  "ntcore_io_process_service_seconds",
			  "ntcore_io_process_queue_seconds"),
	  .labels = LIST("pid", "comm", "op"), .where = NONE,
	  .direction = "both", .group = "training", .min_change = 0.5,
	  .alert = false, .slower_when = "up" },
	{ .metrics = LIST("ntcore_io_process_bytes_total"),
	  .labels = LIST("pid", "comm", "op"), .where = NONE,
	  .direction = "both", .group = "training", .min_change = 0.5,
	  .alert = false, .slower_when = "down" },
	{ .metrics = LIST("ntcore_io_service_seconds", "ntcore_io_queue_seconds"),
	  .labels = LIST("device", "op"), .where = NONE,
	  .direction = "up", .group = "", .min_change = 1.0, .alert = true,
	  .slower_when = "up" },
	{ .metrics = LIST("ntcore_net_rx_bytes_total", "ntcore_net_tx_bytes_total"),
	  .labels = LIST("pid", "comm"), .where = NONE,
	  .direction = "both", .group = "training", .min_change = 0.5,
	  .alert = false, .slower_when = "down" },
	{ .metrics = LIST("ntcore_sched_oncpu_seconds_total"),
	  .labels = LIST("pid", "comm"), .where = NONE,
	  .direction = "both", .group = "", .min_change = 0.5, .alert = false,
	  .slower_when = "down" },
	{ .metrics = LIST("ntcore_sched_runqueue_wait_seconds_total"),
	  .labels = LIST("pid", "comm"), .where = NONE,
	  .direction = "both", .group = "", .min_change = 0.5, .alert = false,
	  .slower_when = "up" },
	{ .metrics = LIST("ntcore_cuda_sync_seconds_total"),
	  .labels = LIST("pid"), .where = NONE,
	  .direction = "both", .group = "", .min_change = 0.5, .alert = false,
	  .slower_when = "up" },
	{ .metrics = LIST("ntcore_cuda_copy_bytes_total"),
	  .labels = LIST("pid"), .where = NONE,
	  .direction = "both", .group = "", .min_change = 0.5, .alert = false,
	  .slower_when = "down" },
	{ .metrics = LIST("ntcore_cuda_call_seconds"),
	  .labels = LIST("pid", "function"), .where = NONE,
	  .direction = "up", .group = "training", .min_change = 1.0,
	  .alert = true, .slower_when = "up" },
	{ .metrics = LIST("ntcore_cuda_gpu_busy_ratio"),
	  .labels = LIST("gpu"), .where = NONE,
	  .direction = "down", .group = "training", .min_change = 0.3,
	  .alert = true, .slower_when = "down" },
	{ .metrics = LIST("ntcore_mem_rss_bytes"),
	  .labels = LIST("pid"), .where = NONE,
	  .direction = "up", .group = "", .min_change = 0.5, .alert = true,
	  .slower_when = "up" },
};
const uint32_t an_n_default_watches =
	sizeof(an_default_watches) / sizeof(an_default_watches[0]);

/* Strings left out are empty, sustain 0 counts as 1, severity warning. */
#define RULE(...) { __VA_ARGS__ }

/*
 * The seeds' seven rules on what the probes publish. Each has a warm-up
 * (values and seconds of a key before it may fire): the ratio tests
 * compare with a history that must be worth the name (I/O latency: 30 s,
 * a disk's latency depends on what is read and settles over tens of
 * seconds; network bursts have a 10 MB/s floor that start-up handshakes
 * never reach); the absolute tests only skip a key's first moments. The
 * seconds count from the first sight of the key in any of the rule's
 * families: small requests (small_io's values) come only with the
 * anomaly, the device's requests (its denominator) long before.
 */
const struct an_rule_cfg an_default_rules[] = {
	RULE(.name = "net_burst", .what = "network burst",
	     .test = "ratio_to_mean", .metric = "ntcore_net_*x_bytes_total",
	     .by = LIST("pid", "comm"), .threshold = 10.0, .min_value = 10e6,
	     .min_history = 30,
	     .warmup_values = 30, .warmup_s = 5.0),
	RULE(.name = "connection_storm", .what = "connection storm",
	     .test = "above", .metric = "ntcore_net_connections_opened_total",
	     .by = LIST("pid", "comm"), .threshold = 100.0, .sustain = 3,
	     .normal_before = 10,
	     .warmup_values = 10, .warmup_s = 5.0),
	RULE(.name = "migrations_under_load",
	     .what = "CPU migrations under load (NUMA placement)",
	     .test = "above", .metric = "ntcore_sched_migrations_total",
	     .by = LIST("pid"), .threshold = 500.0,
	     .when_metric = "ntcore_sched_oncpu_seconds_total", .when_above = 1.0,
	     .sustain = 5, .normal_before = 10,
	     .warmup_values = 10, .warmup_s = 5.0),
	RULE(.name = "io_latency", .what = "I/O latency 5x its average",
	     .test = "ratio_to_mean", .metric = "ntcore_io_service_seconds",
	     .by = LIST("device", "op"), .threshold = 5.0, .min_history = 30,
	     .when_metric = "ntcore_io_requests_total", .when_above = 10.0,
	     .sustain = 2,
	     .warmup_values = 30, .warmup_s = 30.0),
	RULE(.name = "small_io", .what = "mostly-small I/O",
	     .test = "share", .metric = "ntcore_io_small_requests_total",
	     .over = "ntcore_io_requests_total", .by = LIST("device", "op"),
	     .threshold = 0.8, .min_value = 100.0, .sustain = 3,
	     .warmup_values = 0, .warmup_s = 2.0),
	RULE(.name = "cpu_hot", .what = "CPU core hot",
	     .test = "above", .metric = "ntcore_sched_oncpu_seconds_total",
	     .by = LIST("pid", "tid", "comm"), .threshold = 0.9, .sustain = 10,
	     .normal_before = 10,
	     .warmup_values = 10, .warmup_s = 2.0),
	RULE(.name = "large_alloc", .what = "very large GPU allocation",
	     .test = "ratio_to_max", .event = "cuda.alloc", .field = "size",
	     .by = LIST("pid"), .threshold = 4.0, .min_value = 268435456.0,
	     .min_history = 20,
	     .warmup_values = 20, .warmup_s = 10.0),
};
const uint32_t an_n_default_rules =
	sizeof(an_default_rules) / sizeof(an_default_rules[0]);
