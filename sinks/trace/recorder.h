/* SPDX-License-Identifier: MIT */
/*
 * The flight recorder's memory: copies of the last records (events and
 * counter samples) in arrival order, in a list of chunks. Two bounds hold
 * at every append: the chunks' total size never exceeds `max_bytes`, and
 * whole chunks whose newest record is older than `window_ns` before the
 * newest record seen are freed. Eviction is by whole chunks (of
 * `chunk_bytes`, at most 1/16 of the bound), oldest first, so the window
 * kept is at least window_ns unless the byte bound cuts it shorter.
 *
 * Each item is 8-byte aligned: a struct rec_item header, then `len` bytes
 * (an event record, castable to struct nt_event_hdr).
 */
#ifndef NTCORE_TRACE_RECORDER_H
#define NTCORE_TRACE_RECORDER_H

#include <stddef.h>
#include <stdint.h>

struct rec_item {
	uint32_t len;
	uint32_t tag; /* the caller's: which schema (0: a counter sample) */
};

struct rec_chunk {
	struct rec_chunk *next;
	size_t cap, used;
	uint64_t newest_ts;
	uint64_t n_items;
	_Alignas(8) unsigned char data[];
};

struct recorder {
	struct rec_chunk *head, *tail;
	size_t bytes;       /* allocated: chunk headers and capacity */
	size_t max_bytes, chunk_bytes;
	uint64_t window_ns;
	uint64_t newest_ts;
	uint64_t items;     /* held now */
	uint64_t evicted;   /* items freed by either bound */
	uint64_t too_big;   /* items larger than the bound: not kept */
	size_t peak_bytes;
};

void rec_init(struct recorder *r, size_t max_bytes, uint64_t window_ns);
/* Keep a copy of one record; returns 0, or -1 when it cannot be kept
 * (larger than the bound, or out of memory). */
int rec_append(struct recorder *r, uint32_t tag, const void *rec, uint32_t len,
	       uint64_t ts);
/* Visit every item held, oldest first. */
typedef void (*rec_visit_fn)(void *arg, uint32_t tag, const void *rec,
			     uint32_t len);
void rec_visit(const struct recorder *r, rec_visit_fn fn, void *arg);
void rec_fini(struct recorder *r);

#endif
