/* SPDX-License-Identifier: MIT */
/*
 * Events to a timeline (tl.h) by the schema conventions of conv.h: tracks
 * per process and thread (named from the events' comm), per GPU device and
 * stream, child tracks for state slices and samples, an "Alerts" track,
 * counter tracks per metric series; flows from launches to device slices;
 * calls still open at the end drawn to the end. One `struct render` writes
 * one file: render_begin .. render_end; every track is described in the
 * file before its first use.
 */
#ifndef NTCORE_TRACE_RENDER_H
#define NTCORE_TRACE_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "conv.h"
#include "tl.h"
#include "tmap.h"

/* A counter series as the counter sampler keeps it (counters.h). */
struct ctr_series {
	uint32_t id;
	uint32_t pid;       /* the series' `pid` label, 0 when none */
	const char *family; /* metric family name */
	const char *name;   /* family{labels other than pid} */
	const char *unit;   /* "bytes", "seconds", "ratio", "" */
};

struct render {
	const struct tl_ops *ops;
	void *w;                /* the writer's state */
	struct nt_buf *buf;     /* output, owned by the caller */
	struct tmap tracks;     /* key -> struct tl_track * */
	struct tmap opens;      /* (pid, tid) -> struct open_call * */
	uint64_t next_uuid, next_flow;
	uint32_t next_jtid;     /* synthetic JSON thread ids */
	bool instants;          /* draw events of no other kind as instants */
	uint64_t slices, flows, counters; /* drawn so far (statistics) */
	char scratch[64][48];   /* formatted argument values of one event */
};

/* fmt: "perfetto" or "json". Returns 0, or -ENOMEM. */
int render_init(struct render *r, const char *fmt, struct nt_buf *buf,
		bool instants);
/* Start a file: headers and clock snapshot, no track described yet. */
void render_begin(struct render *r);
void render_event(struct render *r, const struct nt_event_hdr *ev,
		  const struct tr_class *c);
void render_counter(struct render *r, uint64_t ts,
		    const struct ctr_series *s, double value);
/* End a file: calls still open are drawn up to end_ts (when `final`). */
void render_end(struct render *r, uint64_t end_ts, bool final);
void render_fini(struct render *r);

#endif
