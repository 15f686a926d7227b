/* SPDX-License-Identifier: MIT */
/*
 * Hang timing for one process: when did its GPU activity (launches, copies,
 * sync returns) last happen, what did it last launch, and which threads sit
 * inside a synchronisation call since when.
 *
 * The caller feeds events as they come and calls hang_check() from a timer
 * every `interval`: a process whose activity stopped `timeout` ago and that
 * still runs is due for one report per quiet period; a report therefore
 * comes at most timeout + interval after the last activity.
 */
#ifndef CUDA_DET_HANG_H
#define CUDA_DET_HANG_H

#include <stdbool.h>
#include <stdint.h>

#define HANG_MAX_BLOCKED 32
#define HANG_NAME_LEN 128

enum hang_act {
	HANG_ACT_LAUNCH = 1,
	HANG_ACT_MEMCPY,
	HANG_ACT_MEMSET,
	HANG_ACT_SYNC,
	HANG_ACT_ALLOC,
	HANG_ACT_FREE,
	HANG_ACT_OTHER,
};

struct hang_blocked {
	uint32_t tid;
	uint32_t api;       /* the sync function */
	uint64_t since_ns;
	uint32_t stack;     /* stacktab id, 0 if none */
	char func[48];
};

struct hang_proc {
	uint32_t pid;
	bool seen;
	uint64_t last_act_ns;
	uint32_t last_act_kind;
	char last_act_func[48];
	/* the last launch */
	uint64_t launch_ns;
	uint64_t launches;
	uint32_t launch_tid;
	uint32_t launch_stack;
	char launch_name[HANG_NAME_LEN];
	char launch_func[48];
	/* threads inside a synchronisation call */
	struct hang_blocked blocked[HANG_MAX_BLOCKED];
	uint32_t nblocked;
	/* reporting */
	bool reported;           /* this quiet period was reported */
	uint64_t reported_at_ns;
	int64_t cpu_ticks_quiet; /* process cpu ticks when the check first saw quiet */
	uint64_t reports;
};

void hang_proc_init(struct hang_proc *p, uint32_t pid);
/* Any GPU activity that completed at ts (a launch/copy/sync return). */
void hang_activity(struct hang_proc *p, uint64_t ts_ns, enum hang_act kind,
		   const char *func);
void hang_launch(struct hang_proc *p, uint64_t ts_ns, uint32_t tid,
		 const char *func, const char *kernel, uint32_t stack);
/* A thread entered a synchronisation call (it has not returned yet). */
void hang_sync_enter(struct hang_proc *p, uint64_t ts_ns, uint32_t tid,
		     uint32_t api, const char *func, uint32_t stack);
/* The thread's synchronisation call returned at ts (counts as activity). */
void hang_sync_exit(struct hang_proc *p, uint64_t ts_ns, uint32_t tid,
		    const char *func);

enum hang_verdict {
	HANG_OK = 0,      /* active, or quiet for less than the timeout */
	HANG_DUE,         /* quiet >= timeout, alive, not yet reported: report */
	HANG_REPORTED,    /* quiet and already reported */
	HANG_GONE,        /* the process no longer runs */
};

/* alive: the process still runs (not gone, not a zombie). */
enum hang_verdict hang_check(struct hang_proc *p, uint64_t now_ns,
			     uint64_t timeout_ns, bool alive);
/* The thread blocked longest in a sync, or NULL. */
const struct hang_blocked *hang_longest_blocked(const struct hang_proc *p);

#endif
