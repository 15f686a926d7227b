/* SPDX-License-Identifier: MIT */
/*
 * What the gRPC sink makes of a call's outcome: gRPC status code names,
 * which codes are worth a retry (the OTLP/gRPC spec's list), the retry
 * backoff with jitter, and the names of the reasons events are dropped.
 */
#include "grpc_sink.h"

const char *const gs_drop_reason_names[GS_DROP__N] = {
	[GS_DROP_QUEUE_FULL] = "queue_full",
	[GS_DROP_TOO_LARGE] = "too_large",
	[GS_DROP_PERMANENT] = "permanent_error",
	[GS_DROP_REJECTED] = "rejected",
	[GS_DROP_RETRY_EXHAUSTED] = "retry_exhausted",
	[GS_DROP_SHUTDOWN] = "shutdown",
};

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *gs_code_name(int code)
{
	static const char *const unknown[] = { "CODE_OTHER" };

	if (code >= 0 && (size_t)code < sizeof(code_names) / sizeof(code_names[0]))
		return code_names[code];
	return unknown[0];
}

bool gs_code_retryable(int code)
{
	switch (code) {
	case 1:  /* CANCELLED */
	case 4:  /* DEADLINE_EXCEEDED */
	case 8:  /* RESOURCE_EXHAUSTED: the batch is also halved (grpc.c) */
	case 10: /* ABORTED */
	case 11: /* OUT_OF_RANGE */
	case 14: /* UNAVAILABLE */
	case 15: /* DATA_LOSS */
		return true;
	default:
		return false;
	}
}

uint64_t gs_backoff_ms(uint32_t attempt, uint64_t initial_ms, uint64_t max_ms,
		       uint32_t rnd)
{
	uint64_t d = initial_ms ? initial_ms : 1;
	int64_t jitter;

	for (uint32_t i = 0; i < attempt && d < max_ms; i++)
		d *= 2;
	if (d > max_ms)
		d = max_ms;
	/* +-20%: rnd maps to [-d/5, +d/5] */
	jitter = (int64_t)((d / 5) * 2 + 1);
	jitter = (int64_t)(rnd % (uint64_t)jitter) - (int64_t)(d / 5);
	d = (uint64_t)((int64_t)d + jitter);
	return d ? d : 1;
}
