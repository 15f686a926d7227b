/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's transport, on the sink thread: the channel (credentials,
 * reconnect pacing, compression, user agent) and one unary call of the
 * gRPC core C API, made cancellable by flush() through s->inflight.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "grpc_state.h"

/* What one call sends and receives; released by call_io_free. */
struct call_io {
	grpc_metadata_array md_init, md_trail;
	grpc_byte_buffer *send_bb, *recv_bb;
	grpc_status_code status;
	grpc_slice details;
	const char *err_str;
};

static void set_msg(struct rpc_result *r, grpc_slice details, const char *err)
{
	size_t n = GRPC_SLICE_LENGTH(details);

	if (n) {
		if (n >= sizeof(r->msg))
			n = sizeof(r->msg) - 1;
		memcpy(r->msg, GRPC_SLICE_START_PTR(details), n);
		r->msg[n] = '\0';
	} else if (err) {
		snprintf(r->msg, sizeof(r->msg), "%s", err);
	} else {
		r->msg[0] = '\0';
	}
	for (char *c = r->msg; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
}

/* gRPC's deadline for a monotonic one of ours; at least 1 ms away. */
static gpr_timespec call_deadline_of(uint64_t deadline_mono)
{
	uint64_t now = nt_clock_mono_ns();
	int64_t left_ms;

	left_ms = deadline_mono > now ? (int64_t)((deadline_mono - now) / 1000000) : 1;
	if (left_ms < 1)
		left_ms = 1;
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			    gpr_time_from_millis(left_ms, GPR_TIMESPAN));
}

/* The six ops of a unary call, all in one batch. */
static void fill_ops(grpc_op ops[6], struct call_io *io, bool wait_ready)
{
	memset(ops, 0, 6 * sizeof(*ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (wait_ready)
		ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = io->send_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &io->md_init;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &io->recv_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &io->md_trail;
	ops[5].data.recv_status_on_client.status = &io->status;
	ops[5].data.recv_status_on_client.status_details = &io->details;
	ops[5].data.recv_status_on_client.error_string = &io->err_str;
}

/* Start the batch and wait for it; flush() may cancel the call meanwhile. */
static void run_call(struct gs *s, grpc_call *call, grpc_op ops[6],
		     struct call_io *io, struct rpc_result *r)
{
	pthread_mutex_lock(&s->lock);
	s->inflight = call;
	if (s->abandon_req > s->abandon_done)
		grpc_call_cancel(call, NULL); /* flush gave up already */
	pthread_mutex_unlock(&s->lock);

	grpc_call_error ce = grpc_call_start_batch(call, ops, 6, call, NULL);

	if (ce != GRPC_CALL_OK) {
		r->code = GRPC_STATUS_INTERNAL;
		snprintf(r->msg, sizeof(r->msg), "grpc_call_start_batch: %s",
			 grpc_call_error_to_string(ce));
	} else {
		grpc_event ev = grpc_completion_queue_pluck(
			s->cq, call, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type != GRPC_OP_COMPLETE) {
			r->code = GRPC_STATUS_INTERNAL;
			snprintf(r->msg, sizeof(r->msg), "completion queue event %d", ev.type);
		} else {
			r->code = (int)io->status;
			set_msg(r, io->details, io->err_str);
		}
	}
	pthread_mutex_lock(&s->lock);
	s->inflight = NULL;
	pthread_mutex_unlock(&s->lock);
}

/* Copy the response message out of gRPC's buffer (r->resp). */
static void read_response(grpc_byte_buffer *bb, struct rpc_result *r)
{
	grpc_byte_buffer_reader rd;

	if (!grpc_byte_buffer_reader_init(&rd, bb))
		return;
	grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
	size_t n = GRPC_SLICE_LENGTH(all);

	r->resp = malloc(n ? n : 1);
	if (r->resp) {
		memcpy(r->resp, GRPC_SLICE_START_PTR(all), n);
		r->resp_len = n;
	}
	grpc_slice_unref(all);
	grpc_byte_buffer_reader_destroy(&rd);
}

static void call_io_free(struct call_io *io)
{
	if (io->recv_bb)
		grpc_byte_buffer_destroy(io->recv_bb);
	grpc_byte_buffer_destroy(io->send_bb);
	if (io->err_str)
		gpr_free((void *)io->err_str);
	grpc_slice_unref(io->details);
	grpc_metadata_array_destroy(&io->md_init);
	grpc_metadata_array_destroy(&io->md_trail);
}

void gs_rpc_unary(struct gs *s, const char *method, grpc_slice payload,
		  uint64_t deadline_mono, bool wait_ready, struct rpc_result *r)
{
	struct call_io io = { .status = GRPC_STATUS_UNKNOWN,
			      .details = grpc_empty_slice() };
	grpc_op ops[6];
	grpc_call *call;

	memset(r, 0, sizeof(*r));
	call = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
					grpc_slice_from_static_string(method), NULL,
					call_deadline_of(deadline_mono), NULL);
	if (!call) {
		r->code = GRPC_STATUS_INTERNAL;
		snprintf(r->msg, sizeof(r->msg), "cannot create a call");
		return;
	}
	grpc_metadata_array_init(&io.md_init);
	grpc_metadata_array_init(&io.md_trail);
	io.send_bb = grpc_raw_byte_buffer_create(&payload, 1);
	fill_ops(ops, &io, wait_ready);
	run_call(s, call, ops, &io, r);
	if (r->code == GRPC_STATUS_OK && io.recv_bb)
		read_response(io.recv_bb, r);
	call_io_free(&io);
	grpc_call_unref(call);
}

int gs_open_channel(struct gs *s)
{
	grpc_arg args[8];
	int n = 0;
	char ua[64];

#define IARG(k, v)                                                             \
	do {                                                                   \
		args[n].type = GRPC_ARG_INTEGER;                               \
		args[n].key = (char *)(k);                                     \
		args[n].value.integer = (int)(v);                              \
		n++;                                                           \
	} while (0)
	IARG(GRPC_ARG_ENABLE_RETRIES, 0); /* the sink retries, see gs_send_batch */
	/* Reconnect pacing follows the sink's backoff. Not
	 * GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the
	 * connection attempt's timeout (default 20 s), and a busy host can
	 * need more than retry_initial_ms for a TCP + HTTP/2 handshake. */
	IARG(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, s->cfg->retry_initial_ms);
	IARG(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, s->cfg->retry_max_ms);
	if (s->compression != GRPC_COMPRESS_NONE)
		IARG(GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM, s->compression);
#undef IARG
	snprintf(ua, sizeof(ua), "ntcore-grpc/%s", NTCORE_GRPC_VERSION);
	args[n].type = GRPC_ARG_STRING;
	args[n].key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING;
	args[n].value.string = ua;
	n++;

	grpc_channel_args cargs = { .num_args = (size_t)n, .args = args };
	grpc_channel_credentials *creds =
		s->tls ? grpc_ssl_credentials_create(s->pem_roots, NULL, NULL, NULL)
		       : grpc_insecure_credentials_create();

	if (!creds)
		return -EINVAL;
	s->ch = grpc_channel_create(s->target, creds, &cargs);
	grpc_channel_credentials_release(creds);
	if (!s->ch)
		return -EINVAL;
	/* start connecting now, so a bad endpoint shows up early */
	grpc_channel_check_connectivity_state(s->ch, 1);
	s->cq = grpc_completion_queue_create_for_pluck(NULL);
	return s->cq ? 0 : -ENOMEM;
}

void gs_close_channel(struct gs *s)
{
	if (s->ch)
		grpc_channel_destroy(s->ch);
	s->ch = NULL;
	if (s->cq) {
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_pluck(s->cq, NULL,
						   gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
	}
	s->cq = NULL;
}
