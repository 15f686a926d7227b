/* SPDX-License-Identifier: MIT */
/*
 * A fake host for the probes' ring-handler tests (test_mem_ring.c,
 * test_sched_ring.c): it keeps what a handler publishes (the last record,
 * whole), the drops it counts, every metric update (metric index, labels,
 * value) and the last warning, so a test feeds byte records and checks the
 * outcome with no kernel. Header-only: each test is one program.
 *
 * The metric handles are the addresses of fake_metrics[i]: set st->m[i] =
 * FAKE_METRIC(i) and the updates say which family they went to.
 */
#ifndef NTCORE_TEST_FAKE_RING_HOST_H
#define NTCORE_TEST_FAKE_RING_HOST_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ntcore/plugin.h"

#define FAKE_MAX_ADDS 64
#define FAKE_METRICS 32
#define FAKE_METRIC(i) ((struct nt_metric *)&fake_metrics[(i)])

static char fake_metrics[FAKE_METRICS];

/* What the fake host saw; fake_reset() clears it. */
static struct {
	unsigned char last[512];
	size_t last_size;
	int published, drops, warns;
	char drop_stage[16], warn[256];
	struct {
		int m;
		char label[3][24]; /* the first three label values ("" past n) */
		double v;
	} adds[FAKE_MAX_ADDS];
	int n_adds;
	unsigned n_labels[FAKE_METRICS]; /* labels per family, set by the test */
} seen;

static inline void fake_reset(void)
{
	unsigned n_labels[FAKE_METRICS];

	memcpy(n_labels, seen.n_labels, sizeof(n_labels));
	memset(&seen, 0, sizeof(seen));
	memcpy(seen.n_labels, n_labels, sizeof(n_labels));
}

static int fake_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	(void)inst;
	seen.published++;
	seen.last_size = ev->size < sizeof(seen.last) ? ev->size : sizeof(seen.last);
	memcpy(seen.last, ev, seen.last_size);
	return 0;
}

static void fake_count_drop(struct nt_instance *inst, const char *stage, uint64_t n)
{
	(void)inst;
	seen.drops += (int)n;
	snprintf(seen.drop_stage, sizeof(seen.drop_stage), "%s", stage);
}

static void fake_metric_add(struct nt_metric *m, const char *const *lv, double d)
{
	int i = (int)((char *)m - fake_metrics);

	if (seen.n_adds == FAKE_MAX_ADDS)
		return;
	seen.adds[seen.n_adds].m = i;
	for (unsigned k = 0; k < 3; k++)
		snprintf(seen.adds[seen.n_adds].label[k], sizeof(seen.adds[0].label[k]),
			 "%s", k < seen.n_labels[i] ? lv[k] : "");
	seen.adds[seen.n_adds++].v = d;
}

static void fake_metric_remove(struct nt_metric *m, const char *const *lv)
{
	(void)m;
	(void)lv;
}

static void fake_vlog(struct nt_instance *inst, int level, const char *fmt, va_list ap)
{
	(void)inst;
	if (level == NT_LOG_WARN) {
		seen.warns++;
		vsnprintf(seen.warn, sizeof(seen.warn), fmt, ap);
	}
}

static const struct nt_host fake_host = {
	.abi_major = NT_ABI_MAJOR, .abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.publish = fake_publish, .count_drop = fake_count_drop,
	.metric_add = fake_metric_add, .metric_remove = fake_metric_remove,
	.vlog = fake_vlog,
};

/* The sum of the values added to family m whose label k is `value` (any
 * labels when value is NULL). */
static inline double fake_added(int m, unsigned k, const char *value)
{
	double sum = 0;

	for (int i = 0; i < seen.n_adds; i++)
		if (seen.adds[i].m == m && (!value || !strcmp(seen.adds[i].label[k], value)))
			sum += seen.adds[i].v;
	return sum;
}

#endif /* NTCORE_TEST_FAKE_RING_HOST_H */
