/* SPDX-License-Identifier: MIT */
/* Record shared by follow.bpf.c and the core: the proc.exit event. */
#ifndef NTCORE_FOLLOW_H
#define NTCORE_FOLLOW_H

#include "ntcore/event.h"

struct nt_proc_exit {
	struct nt_event_hdr hdr;
	int32_t exit_code; /* exit code, or 128 + signal when killed (as $?) */
	uint32_t ppid;
	int32_t signal;    /* the signal that killed it, 0 when it exited */
	uint8_t core_dumped;
	uint8_t pad[3]; /* pad[0]: NT_EXIT_IDENTITY_ONLY, not a target's exit
			 * (not published: the core forgets its identity) */
};
#define NT_EXIT_IDENTITY_ONLY 1

/* proc.exec: a traced process replaced its image (symbol caches are stale). */
#define NT_EXEC_FILENAME_LEN 128
struct nt_proc_exec {
	struct nt_event_hdr hdr;
	uint32_t old_tid; /* the exec'ing thread before it became the leader */
	uint32_t pad;
	char filename[NT_EXEC_FILENAME_LEN];
};

#endif
