/* SPDX-License-Identifier: MIT */
/*
 * The channel between the CUPTI injection library (inside the job) and the
 * cuda_gpu plugin (inside the daemon): a SOCK_SEQPACKET unix socket, one
 * connection per process, one message per send (at most NT_GPU_MSG_MAX
 * bytes). Both ends run on the same host and are built from the same tree,
 * so records are native-endian C structs; the version in the hello lets a
 * daemon refuse a library of another build.
 *
 * A message is a struct nt_gpu_msg followed by records, each starting with
 * a struct nt_gpu_rec header whose `size` covers the header and is a
 * multiple of 8. The daemon checks every size against the message and
 * ignores record types it does not know (counted).
 *
 * Kernel names travel once per connection: NT_GPU_R_NAME defines a name id
 * before the first record that uses it, in the same message, until a
 * message carrying the definition was sent whole.
 */
#ifndef NTCORE_GPU_WIRE_H
#define NTCORE_GPU_WIRE_H

#include <stdint.h>

#define NT_GPU_MAGIC 0x4e544750u /* "NTGP" */
#define NT_GPU_VERSION 1
#define NT_GPU_MSG_MAX 32768u
/* Environment the daemon gives the job. */
#define NT_GPU_ENV_SOCKET "NTCORE_CUPTI_SOCKET"
#define NT_GPU_ENV_CUPTI "NTCORE_CUPTI_PATH"    /* user override */
#define NT_GPU_ENV_FLUSH "NTCORE_CUPTI_FLUSH_MS" /* delivery period */
#define NT_GPU_ENV_BUFFERS "NTCORE_CUPTI_BUFFERS" /* "count:KiB" */
#define NT_GPU_ENV_KINDS "NTCORE_CUPTI_KINDS"   /* "kernel,memcpy,memset[,sync]" */
#define NT_GPU_ENV_API "NTCORE_CUPTI_API"       /* "1": API records for the join */
/* The activity kinds when NTCORE_CUPTI_KINDS is not set (and the plugin's
 * default): CUPTI's SYNCHRONIZATION kind costs about 4 us per launch on
 * an H100 (docs/cuda-gpu.md, Cost), so it is asked for by name only. */
#define NT_GPU_DEFAULT_KINDS "kernel,memcpy,memset"

enum nt_gpu_rtype {
	NT_GPU_R_HELLO = 1,
	NT_GPU_R_NAME,
	NT_GPU_R_API,
	NT_GPU_R_KERNEL,
	NT_GPU_R_MEMCPY,
	NT_GPU_R_MEMSET,
	NT_GPU_R_SYNC,
	NT_GPU_R_STATS,
};

/* What an API call does (the table in cupti_cbids.h). */
enum nt_gpu_call { NT_GPU_CALL_LAUNCH = 1, NT_GPU_CALL_GRAPH, NT_GPU_CALL_COPY,
		   NT_GPU_CALL_SET };

struct nt_gpu_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved;
	uint32_t size; /* the whole message, this header included */
	uint32_t n_records;
};

struct nt_gpu_rec {
	uint16_t type; /* enum nt_gpu_rtype */
	uint16_t size; /* bytes, this header included, multiple of 8 */
	uint32_t reserved;
};

/* The library's status, first record of the first message. */
enum nt_gpu_status {
	NT_GPU_ST_OK = 0,        /* tracing: text says which CUPTI */
	NT_GPU_ST_NO_CUPTI = 1,  /* no CUPTI for the job's CUDA: text says where it looked */
	NT_GPU_ST_CUPTI_ERROR = 2, /* CUPTI refused: text says which call */
};

#define NT_GPU_TEXT_MAX 1024
struct nt_gpu_hello {
	struct nt_gpu_rec h;
	uint32_t status;      /* enum nt_gpu_status */
	uint32_t cuda_major;  /* of the job's runtime (0 unknown) */
	uint32_t cupti_version; /* cuptiGetVersion */
	uint32_t flags;       /* NT_GPU_HELLO_* */
	uint64_t clock_ns;    /* CLOCK_MONOTONIC when the hello was made */
	char text[NT_GPU_TEXT_MAX]; /* NUL-terminated */
};
#define NT_GPU_HELLO_SYSTEM_TID 1u /* API threadId is gettid() */
#define NT_GPU_HELLO_MONOTONIC 2u  /* records carry CLOCK_MONOTONIC */
#define NT_GPU_HELLO_API_FILTER 4u /* only the join's API calls traced */
#define NT_GPU_HELLO_NO_API 8u     /* no API records at all (NTCORE_CUPTI_API=0) */
#define NT_GPU_HELLO_ZEROED 16u    /* CUPTI takes the library's zeroed buffers as they are */

struct nt_gpu_name {
	struct nt_gpu_rec h;
	uint32_t id;
	uint32_t len; /* followed by len bytes, no NUL, padded to 8 */
};

struct nt_gpu_api {
	struct nt_gpu_rec h;
	uint64_t start, end;
	uint32_t tid;
	uint32_t correlation;
	uint32_t cbid;
	uint8_t driver; /* 1: driver API, 0: runtime API */
	uint8_t call;   /* enum nt_gpu_call */
	uint16_t pad;
};

struct nt_gpu_kernel {
	struct nt_gpu_rec h;
	uint64_t start, end;
	uint32_t correlation;
	uint32_t device, context, stream;
	int32_t grid[3], block[3];
	int32_t static_shared, dynamic_shared;
	uint32_t name_id;
	uint16_t registers;
	uint16_t pad;
};

struct nt_gpu_memcpy {
	struct nt_gpu_rec h;
	uint64_t start, end, bytes;
	uint32_t correlation, runtime_correlation;
	uint32_t device, context, stream;
	uint8_t copy_kind, src_kind, dst_kind, pad;
};

struct nt_gpu_memset {
	struct nt_gpu_rec h;
	uint64_t start, end, bytes;
	uint32_t correlation;
	uint32_t device, context, stream;
	uint32_t value;
};

struct nt_gpu_sync {
	struct nt_gpu_rec h;
	uint64_t start, end;
	uint32_t correlation;
	uint32_t type; /* CUPTI synchronization type */
	uint32_t context, stream;
	uint32_t event;
	uint32_t pad;
};

/* Cumulative counts of the library (so a lost message loses no count). */
struct nt_gpu_stats {
	struct nt_gpu_rec h;
	uint64_t cupti_dropped;   /* records CUPTI lost for lack of buffers */
	uint64_t send_dropped;    /* records in messages that could not be sent */
	uint64_t records_sent;
	uint64_t buffers;         /* buffers CUPTI completed */
	uint64_t unknown_records; /* record kinds the library does not read */
};

#endif /* NTCORE_GPU_WIRE_H */
