/* SPDX-License-Identifier: MIT */
/*
 * The timeline model between the renderer (render.c: events -> tracks,
 * slices, flows, counters by schema conventions) and the two file formats
 * (tl_perfetto.c: Perfetto protobuf; tl_json.c: JSON trace events). A
 * writer appends to a caller-owned buffer; everything passed in is borrowed
 * for the call.
 */
#ifndef NTCORE_TRACE_TL_H
#define NTCORE_TRACE_TL_H

#include <stdbool.h>
#include <stdint.h>

#include "jsonl.h" /* struct nt_buf */

enum tl_track_kind {
	TL_PROCESS = 1, /* a process (pid) */
	TL_THREAD,      /* a thread (pid, tid) */
	TL_CHILD,       /* a named track under a thread or process */
	TL_GROUP,       /* a top-level named track ("GPU 0", "Alerts") */
	TL_COUNTER,     /* a counter track (under a process or top-level) */
};

/*
 * A track. `uuid` is unique in one file; `parent` is 0 or the uuid of an
 * already described track. `jpid`/`jtid` are the ids the JSON format files
 * the track's events under (JSON has only processes and threads: GPU and
 * child tracks get synthetic ids, named by metadata events).
 */
struct tl_track {
	uint64_t uuid, parent;
	uint32_t kind; /* enum tl_track_kind */
	uint32_t pid, tid;
	uint32_t jpid, jtid;
	const char *name;  /* owned by the renderer */
	const char *unit;  /* counters: "bytes", "ns", "" */
	bool named_by_main; /* a process track named by its main thread */
};

enum tl_arg_type { TLA_UINT = 1, TLA_INT, TLA_DOUBLE, TLA_BOOL, TLA_STR };

/* One argument (Perfetto debug annotation, JSON "args" member). */
struct tl_arg {
	const char *name;
	uint32_t type; /* enum tl_arg_type */
	uint32_t len;  /* TLA_STR */
	union {
		uint64_t u;
		int64_t i;
		double d;
		const char *s;
	} v;
};

/*
 * A slice [ts, ts + dur] or, with `instant`, an instant at ts. flow_out: a
 * flow starts here (non-zero id); flow_in: a flow ends here.
 */
struct tl_slice {
	const struct tl_track *track;
	uint64_t ts, dur;
	const char *name;
	uint32_t name_len;
	bool instant;
	const char *category;
	const struct tl_arg *args;
	uint32_t n_args;
	uint64_t flow_out, flow_in;
};

struct tl_ops {
	const char *ext; /* file name extension: "pftrace", "json" */
	/* Start a file (headers, clock snapshot); `mono_ns`, `boot_ns`,
	 * `real_ns`: the three clocks read at one instant. */
	void (*begin)(void *w, struct nt_buf *b, uint64_t mono_ns,
		      uint64_t boot_ns, uint64_t real_ns);
	void (*track)(void *w, struct nt_buf *b, const struct tl_track *t);
	void (*slice)(void *w, struct nt_buf *b, const struct tl_slice *s);
	void (*counter)(void *w, struct nt_buf *b, const struct tl_track *t,
			uint64_t ts, double value);
	/* Close a file (JSON: the closing bracket). */
	void (*end)(void *w, struct nt_buf *b);
	void (*free)(void *w);
};

/* Writers: each returns a fresh state for ops->begin.. ops->free. */
void *tl_perfetto_new(void);
extern const struct tl_ops tl_perfetto_ops;
void *tl_json_new(void);
extern const struct tl_ops tl_json_ops;

#endif
