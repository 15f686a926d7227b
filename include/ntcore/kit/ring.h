/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: reading a BPF ring buffer with its data mapped once.
 *
 * libbpf's ring_buffer maps a ring's data pages twice, one copy after the
 * other, so that a record crossing the end reads as one piece; the kernel
 * maps every page at mmap time, so each MiB of ring was 2 MiB of the
 * daemon's RSS (training.conf's rings: 10.5 MB of 35). nt_ring maps the
 * data once and copies the rare record that crosses the end into a buffer
 * of its own. Same callback, same return values as ring_buffer__consume,
 * same wake-up behaviour (the consumer position is published the same
 * way, record by record), and the map's fd itself is what the loop
 * watches.
 *
 *   struct nt_ring *r;
 *   err = nt_ring_open(host, inst, skel->maps.events, on_record, st,
 *                      TOKEN, &r);             // logs what failed
 *   ...  in poll(TOKEN):  n = nt_ring_consume(r);
 *   nt_ring_free(r);                           // detach
 *
 * Ownership: the ring (mappings and copy buffer) belongs to the caller
 * until nt_ring_free; the map stays the BPF object's. The loop's watch on
 * the fd goes when the instance detaches. One reader at a time.
 */
#ifndef NTCORE_KIT_RING_H
#define NTCORE_KIT_RING_H

#include <stddef.h>
#include <stdint.h>

#include <bpf/libbpf.h>

#include "../plugin.h"

struct nt_ring;

/* Map `map` (a BPF_MAP_TYPE_RINGBUF) and watch it under `token`. 0, or a
 * negative errno after logging; *out is NULL then. */
int nt_ring_open(const struct nt_host *host, struct nt_instance *inst,
		 const struct bpf_map *map, ring_buffer_sample_fn cb, void *ctx,
		 uint32_t token, struct nt_ring **out);
/* The same without a host (tests, tools): the map's fd and its
 * max_entries; nothing watched or logged. */
int nt_ring_new(int map_fd, size_t size, ring_buffer_sample_fn cb, void *ctx,
		struct nt_ring **out);
/* Every committed record to cb, in order: the number read (at most
 * INT_MAX), or cb's negative return (the record it refused is consumed),
 * as ring_buffer__consume does. A record still being written ends it. */
int nt_ring_consume(struct nt_ring *r);
/* Bytes of data in the ring (its max_entries). */
size_t nt_ring_size(const struct nt_ring *r);
/* The map's fd (pollable: readable when records wait). */
int nt_ring_fd(const struct nt_ring *r);
/* Unmaps and frees; NULL is ignored. */
void nt_ring_free(struct nt_ring *r);

#endif /* NTCORE_KIT_RING_H */
