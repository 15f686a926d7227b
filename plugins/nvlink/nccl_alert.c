/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the words of alert.nccl_hang. One finding of the hang check
 * (nccl_state.h) becomes a one-line message naming the rank that does not
 * join (or the call that does not return), the call, its collective
 * number and how long the other side has waited, and a JSON evidence
 * object with the same facts as fields.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ntcore/kit/log.h"
#include "nccl_model.h"
#include "nvl.h"

static void describe(const struct nvl_hang *h, char *out, size_t n)
{
	double waited = (double)h->wait_ns / 1e9;
	const char *call = nvl_call_name(h->call);

	if (nvl_call_is_init(h->call))
		snprintf(out, n,
			 "NCCL: rank %d (pid %u) has waited %.1f s in %s on communicator %016" PRIx64
			 " for %d ranks; %d joined on this host, rank %d has not",
			 h->wait_rank, h->wait_pid, waited, call, h->uid, h->nranks,
			 h->ranks_seen, h->missing_rank);
	else if (h->missing_pid)
		snprintf(out, n,
			 "NCCL: rank %d (pid %u) has not joined %s #%" PRIu64
			 " (%" PRIu64 " bytes %s) on communicator %016" PRIx64
			 " that rank %d (pid %u) entered %.1f s ago%s",
			 h->missing_rank, h->missing_pid, call, h->seq, h->bytes,
			 nvl_dtype_name(h->dtype), h->uid, h->wait_rank, h->wait_pid,
			 waited, h->blocked ? " and is still waiting in it" : "");
	else
		snprintf(out, n,
			 "NCCL: rank %d (pid %u, tid %u) has been inside %s #%" PRIu64
			 " (%" PRIu64 " bytes %s) on communicator %016" PRIx64
			 " for %.1f s; %d of %d ranks are traced on this host",
			 h->wait_rank, h->wait_pid, h->wait_tid, call, h->seq,
			 h->bytes, nvl_dtype_name(h->dtype), h->uid, waited,
			 h->ranks_seen, h->nranks);
}

void nvl_nccl_hang_alert(struct nvl *s, const struct nvl_hang *h)
{
	struct nvl_ev_hang *e = (struct nvl_ev_hang *)s->rec.bytes;
	char msg[512], ev[1024];

	describe(h, msg, sizeof(msg));
	snprintf(ev, sizeof(ev),
		 "{\"call\":\"%s\",\"seq\":%" PRIu64 ",\"communicator\":\"%016" PRIx64
		 "\",\"nranks\":%d,\"count\":%" PRIu64 ",\"bytes\":%" PRIu64
		 ",\"dtype\":\"%s\",\"op\":\"%s\",\"waiting_rank\":%d,\"waiting_pid\":%u,"
		 "\"waiting_tid\":%u,\"waiting_s\":%.3f,\"blocked\":%s,\"missing_rank\":%d,"
		 "\"missing_pid\":%u,\"missing_last_seq\":%" PRIu64 ",\"ranks_seen\":%d}",
		 nvl_call_name(h->call), h->seq, h->uid, h->nranks, h->count, h->bytes,
		 nvl_dtype_name(h->dtype), nvl_op_name(h->op), h->wait_rank,
		 h->wait_pid, h->wait_tid, (double)h->wait_ns / 1e9,
		 h->blocked ? "true" : "false", h->missing_rank, h->missing_pid,
		 h->missing_last_seq, h->ranks_seen);
	memset(e, 0, sizeof(*e));
	e->rank = h->wait_rank;
	e->missing_rank = h->missing_rank;
	e->seq = h->seq;
	snprintf(e->call, sizeof(e->call), "%s", nvl_call_name(h->call));
	nt_log_warn(s, "%s", msg);
	s->host->metric_add(s->nm.m[NVM_NCCL_HANGS], NULL, 1);
	nvl_publish_alert(s, NVL_EV_HANG, sizeof(*e), NT_SEV_CRITICAL,
			  h->missing_pid ? h->missing_pid : h->wait_pid, msg, ev);
}
