/* SPDX-License-Identifier: MIT */
/*
 * Reads the cuda probe's events (plugins/cuda/cuda.h) and the core's
 * proc.exit by field NAME through the schema handed to consume(), so a
 * detector keeps working when the probe appends or moves fields. The
 * offsets found for a schema are cached (one lookup per event type).
 */
#ifndef CUDA_DET_CUDAEV_H
#define CUDA_DET_CUDAEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/event.h"

enum cuev_type {
	CUEV_OTHER = 0,
	CUEV_ALLOC,
	CUEV_FREE,
	CUEV_MEMCPY,
	CUEV_MEMSET,
	CUEV_LAUNCH,
	CUEV_GRAPH,
	CUEV_SYNC,
	CUEV_ENTER,
	CUEV_ERROR,
	CUEV_PROC_EXIT,
};

/* A string inside the record: not NUL-terminated. */
struct cuev_str {
	const char *p;
	size_t len;
};

struct cuev {
	enum cuev_type type;
	uint64_t ts;        /* the probe's record time: a call's ENTRY */
	uint64_t end_ts;    /* when the call returned: ts + duration_ns when
			     * measured (NT_CUDA_F_RET), else ts */
	uint32_t pid, tid;
	char comm[NT_COMM_LEN + 1];
	/* the common block of every cuda record */
	uint64_t duration_ns;
	uint32_t api;
	uint32_t layer;
	uint32_t flags;
	int32_t ret;
	int32_t device;
	/* typed parts (0 when the schema lacks the field) */
	uint64_t ptr;       /* alloc/free/memset ptr */
	uint64_t size;      /* alloc/free size, memcpy/memset/enter bytes, error size */
	uint64_t outstanding;
	uint64_t stack_id;
	uint64_t alloc_ts;
	uint32_t kind;      /* enum nt_cuda_mem_kind */
	uint32_t family;    /* cuda.enter: enum nt_cuda_family */
	int32_t exit_code;  /* proc.exit */
	struct cuev_str api_name, stack, kernel, error_name;
};

#define CUEV_CACHE 32

struct cuev_layout {
	const struct nt_schema *schema;
	enum cuev_type type;
	/* offsets of known fields, -1 when absent; sizes/types beside */
	int16_t off[20];
	uint16_t size[20];
	uint16_t ftype[20];
};

struct cuev_cache {
	struct cuev_layout l[CUEV_CACHE];
	uint32_t n;
};

/* The event type of a schema name ("cuda.alloc" -> CUEV_ALLOC). */
enum cuev_type cuev_type_of(const char *schema_name);
/* Decodes ev; returns false for records too short or unknown types. */
bool cuev_decode(struct cuev_cache *c, const struct nt_event_hdr *ev,
		 const struct nt_schema *schema, struct cuev *out);
/* Copies a cuev_str into buf, NUL-terminated and truncated. */
const char *cuev_str_copy(struct cuev_str s, char *buf, size_t len);
/* The API function's name: api_name when present, else from the api id. */
const char *cuev_api_name(const struct cuev *e, char *buf, size_t len);
/* The call returned (NT_CUDA_F_RET set) with a non-zero code. */
bool cuev_failed(const struct cuev *e);

#endif
