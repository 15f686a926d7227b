/* SPDX-License-Identifier: MIT */
/*
 * sched probe: user-side logic without a kernel or a daemon (compiled into
 * sched.so and into tests/unit/test_sched.c): turning cumulative per-thread
 * totals into monotonic deltas, a u32-keyed table, the run-queue histogram
 * layout, the top-threads ranking and the report text.
 */
#ifndef NTCORE_SCHED_LOGIC_H
#define NTCORE_SCHED_LOGIC_H

#include "ntcore/kit/hmap.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched.h"

/* Cumulative totals of one thread, as published so far or as read now. */
struct sched_totals {
	uint64_t on_ns, off_ns, runq_ns, runq_n;
	uint64_t vol, invol, migr, wake;
};

/* Totals of a map value as of `now`; `se_now`: the thread's kernel runtime
 * read now, or 0 when unknown (see sched_acct_now). */
void sched_totals_from(const struct sched_tstat *s, uint64_t now,
		       uint64_t se_now, struct sched_totals *out);

/*
 * delta = cur - *last per field, never negative: a field that reads below
 * what was already published (a map value read mid-update) gives 0 and does
 * not move *last back. *last advances to the published values. Returns true
 * when any delta is non-zero.
 */
bool sched_totals_advance(struct sched_totals *last,
			  const struct sched_totals *cur,
			  struct sched_totals *delta);

/* ---- u32 -> pointer table (the kit's hash map, typed) ------------- */

struct sched_map {
	struct nt_hmap map; /* uint32_t key -> void * value */
};

int sched_map_init(struct sched_map *m, size_t hint);
void *sched_map_get(const struct sched_map *m, uint32_t key);
/* Inserts or replaces; returns 0 or -ENOMEM. */
int sched_map_put(struct sched_map *m, uint32_t key, void *val);
/* Removes and returns the value (NULL when absent). */
void *sched_map_del(struct sched_map *m, uint32_t key);
/* Calls fn on every value; fn may not change the table. */
void sched_map_each(const struct sched_map *m, void (*fn)(void *val, void *arg),
		    void *arg);
/* Frees the table, calling free_val (may be NULL) on each value. */
void sched_map_fini(struct sched_map *m, void (*free_val)(void *val));

/* ---- run-queue latency histogram ---------------------------------- */

/* Finite upper bounds of the metric's buckets, in seconds: 2^(i+1) us for
 * slot i; the last slot is the +Inf bucket. */
#define SCHED_HIST_BOUNDS (SCHED_HIST_SLOTS - 1)
void sched_hist_bounds(double out[SCHED_HIST_BOUNDS]);
/* Adds b into a. */
void sched_hist_merge(struct sched_hist *a, const struct sched_hist *b);
uint64_t sched_hist_count(const struct sched_hist *h);
/* Upper bound (seconds) of the bucket holding quantile q (0..1); the last
 * finite bound times two for the +Inf bucket; 0 when empty. */
double sched_hist_quantile(const struct sched_hist *h, double q);

/* ---- top threads --------------------------------------------------- */

struct sched_row {
	uint32_t pid, tid;
	char comm[NT_COMM_LEN + 1];
	bool exited;
	struct sched_totals t;
};

/* Keeps rows[0..*n) the `cap` rows with the most on-CPU time, in no
 * particular order; returns true when `r` was kept. */
bool sched_top_keep(struct sched_row *rows, size_t *n, size_t cap,
		    const struct sched_row *r);
/* Sorts by on-CPU time, most first (ties: tid ascending). */
void sched_rows_sort(struct sched_row *rows, size_t n);

/*
 * Writes the sched.report text: a header line, the run-queue summary and up
 * to top_n rows (already sorted). Returns the length written (always
 * NUL-terminated, truncated to cap - 1).
 */
size_t sched_report_format(char *buf, size_t cap, const struct sched_row *rows,
			   size_t n, size_t top_n, const struct sched_hist *all,
			   double elapsed_s, uint64_t threads_seen);

#endif /* NTCORE_SCHED_LOGIC_H */
