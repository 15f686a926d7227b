/* SPDX-License-Identifier: MIT */
/*
 * io probe: the ring buffer's records to events. io.request records are
 * published as they are; io.slow ones also count in
 * ntcore_io_slow_requests_total. A record that claims more bytes than the
 * ring holds is dropped and counted; one too short for its type, or of a
 * type this instance does not know, is ignored.
 */
#include <string.h>

#include "ntcore/kit/utf8.h"

#include "io_int.h"

void io_comm_label(char out[IO_COMM_LABEL_LEN], const char *comm)
{
	nt_utf8_repair(comm, strnlen(comm, NT_COMM_LEN), out, IO_COMM_LABEL_LEN);
}

int io_on_record(void *ctx, void *data, size_t size)
{
	struct io_state *st = ctx;
	const struct io_slow_ev *e = data;
	char devs[24], op[9];

	if (size >= sizeof(e->hdr) && e->hdr.size > size) {
		/* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if (size >= sizeof(struct io_request_ev) &&
	    (int)e->hdr.type == st->ev_request) {
		st->host->publish(st->inst, data);
		return 0;
	}
	if (size < sizeof(*e) || (int)e->hdr.type != st->ev_slow)
		return 0;
	memcpy(op, e->op, 8);
	op[8] = '\0';
	const char *lv[] = { io_dev_majmin(e->dev, devs),
			     io_dev_cached_name(st, e->dev), op };

	st->host->metric_add(st->m[IO_M_SLOW], lv, 1);
	st->host->publish(st->inst, data);
	return 0;
}
