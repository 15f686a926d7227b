/* SPDX-License-Identifier: MIT */
/*
 * A host without a daemon or a kernel, for the libFuzzer harnesses of the
 * probes' ring-buffer decoders. It is the core's own bus, metric registry
 * and config validation; what a plugin publishes goes through the bus to a
 * consumer that renders it as the file sink would (JSON Lines, folded), so
 * a record the plugin builds or passes on badly shows up as an ASan or
 * UBSan report. symbolize answers from the address alone; there is no
 * loop, no target map, no BPF.
 */
#ifndef NTCORE_FUZZ_HOST_H
#define NTCORE_FUZZ_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "ntcore/plugin.h"

extern const struct nt_host fuzz_host;

/* The instance handed to init (one per process). */
struct nt_instance *fuzz_instance(void);

/* The plugin's config struct with the schema's defaults and `keys`
 * ("key = value; ..."), built once by the core's validation; NULL when
 * the keys do not validate. Owned by the fuzz host. */
const void *fuzz_config(const struct nt_plugin_desc *desc, const char *keys);

/* A copy of the input in a buffer of exactly `size` bytes (free it): a read
 * past the record is a read past the allocation. */
void *fuzz_copy(const uint8_t *data, size_t size);

/* Splits an input into records, as a ring buffer holds several: a
 * little-endian u16 length, then that many bytes (fewer at the end).
 * Each record is handed to `fn` as a fuzz_copy of exactly its length; a
 * PID_MASK harness first moves the header's pid and tid to numbers no
 * process has (>= 0x40000000), so that no decoder reads a live process
 * of this machine. */
enum { FUZZ_KEEP_PIDS = 0, FUZZ_MASK_PIDS = 1 };
#define FUZZ_NO_PROCESS 0x40000000u
void fuzz_records(const uint8_t *data, size_t size, int pids,
		  void (*fn)(void *arg, void *rec, size_t len), void *arg);

/* Events delivered and rendered so far (for a harness's sanity checks). */
uint64_t fuzz_delivered(void);

#endif
