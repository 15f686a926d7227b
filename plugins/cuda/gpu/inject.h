/* SPDX-License-Identifier: MIT */
/*
 * The CUPTI injection library (libntcore-cupti.so.1): loaded into a job by
 * the CUDA driver through CUDA_INJECTION64_PATH, it enables CUPTI activity
 * records and hands them to the daemon over the socket of gpu_wire.h.
 *
 * Threads: CUPTI asks for buffers on application threads (inj_pool_get must
 * never wait), completes them on its own worker thread or on whichever
 * thread flushes; the library's sender thread converts and sends them, so
 * a slow or absent daemon costs the job dropped records, never time.
 */
#ifndef NTCORE_INJECT_H
#define NTCORE_INJECT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cupti_abi.h"
#include "gpu_wire.h"

/* ---- kernel names: CUPTI's name pointer -> id sent once --------------- */

struct inj_name {
	const char *ptr; /* CUPTI's, stable for the process */
	uint32_t id;     /* 1.. */
	bool sent;       /* a message defining it went out whole */
};

struct inj_names {
	struct inj_name *slots; /* open addressing by pointer */
	uint32_t cap, n;        /* cap a power of two */
};

/* The entry for ptr, added when new (NULL when full: cap reached). */
struct inj_name *inj_names_get(struct inj_names *t, const char *ptr);
void inj_names_free(struct inj_names *t);

/* ---- a message under construction ------------------------------------- */

struct inj_msg {
	uint8_t buf[NT_GPU_MSG_MAX];
	uint32_t len; /* 0: empty (the header is written on the first record) */
	uint32_t n_records;
	struct inj_name *defined[256]; /* names defined in this message */
	uint32_t n_defined;
};

/* Where converted records go: msg_room makes room for `size` bytes
 * (sending the message when needed) and returns where to write, or NULL. */
struct inj_out {
	struct inj_msg msg;
	struct inj_names names;
	uint8_t call_of[2][1024]; /* [driver][cbid] -> enum nt_gpu_call */
	uint64_t unknown_records;
	uint64_t records;
	/* sends msg; returns 0 when sent, -1 when dropped */
	int (*send)(void *arg, const void *buf, size_t len);
	void *send_arg;
	uint64_t send_dropped; /* records of messages that were not sent */
};

void inj_out_init(struct inj_out *o);
/* Append one CUPTI record (converted); unknown kinds are counted. */
void inj_out_record(struct inj_out *o, const struct nt_cupti_activity *rec);
/* Append a raw wire record of `size` bytes (hello, stats). */
int inj_out_raw(struct inj_out *o, const void *rec, size_t size);
/* Send what is pending. */
void inj_out_flush(struct inj_out *o);
void inj_out_fini(struct inj_out *o);

/* ---- the whole library's state ----------------------------------------- */

struct inj_buf {
	struct inj_buf *next;
	uint8_t *data;
	size_t valid;
};

struct inj {
	struct nt_cupti_api_table api;
	void *cupti_handle;
	int fd;               /* the socket, -1 once the daemon is gone */
	bool gone;            /* the daemon went away: stop tracing */
	pid_t pid;            /* detects a fork */
	uint32_t flush_ms;
	uint64_t deadline_ms; /* at exit: no send waits past it (0: none) */
	bool api_records;     /* NTCORE_CUPTI_API: API records for the join */
	bool zero_buffers;    /* CUPTI takes our buffers as zeroed: the sender
			       * zeroes each one before it goes back */
	size_t buf_size;
	uint32_t buf_max, buf_made;
	pthread_mutex_t lock; /* the two lists and the flags below */
	pthread_cond_t wake;
	struct inj_buf *free_list, *full_head, *full_tail;
	struct inj_buf *spare_nodes;
	bool stopping, stopped;
	pthread_t sender;
	bool sender_running;
	bool kinds_stopped;
	uint64_t buffers_done, cupti_dropped;
	struct inj_out out; /* sender thread only */
};

/* Turn CUPTI's activity off (the daemon went away: tracing would only
 * cost the job). inject.c */
void inj_stop_kinds(struct inj *g);
/* The sender thread and the final drain (inject_send.c). The thread
 * makes the first buffers itself (INJ_BUFFERS_AHEAD), so that no
 * application thread allocates or faults in one. */
#define INJ_BUFFERS_AHEAD 2
int inj_sender_start(struct inj *g);
void inj_sender_stop(struct inj *g, uint32_t wait_ms);
/* CUPTI's buffer callbacks. */
void inj_buffer_request(struct inj *g, uint8_t **buffer, size_t *size,
			size_t *max_records);
void inj_buffer_complete(struct inj *g, uint8_t *buffer, size_t valid);
/* Send one message now (hello, stats) with a bounded wait; 0 sent. */
int inj_send_now(struct inj *g, const void *buf, size_t len, int wait_ms);

#endif
