// SPDX-License-Identifier: MIT
/* ntcore python probe: python.launch_stack (see pylend.h). */
#include "pylend.h"

#include <stdlib.h>
#include <string.h>

#define LEND_TEXT_MAX 16384

struct py_lend_ev {
	struct nt_event_hdr hdr;
	uint32_t how;
	uint32_t pad_;
	struct nt_vstr stack;
};

static const struct nt_field lend_fields[] = {
	NT_FIELD(struct py_lend_ev, how, NT_F_U32, "",
		 "1 the thread's own sample, 2 its next sample, 3 a blocked thread's stack (docs/python.md)"),
	NT_FIELD(struct py_lend_ev, stack, NT_F_VSTR, "",
		 "root first: Python frames, [launched by thread ...] when lent across threads, native frames outward of the eval loop"),
};

static const struct nt_schema lend_schema = {
	.name = "python.launch_stack",
	.desc = "the Python stack of a CUDA host call (same ts, pid, tid as the call's event)",
	.fields = lend_fields,
	.n_fields = NT_ARRAY_LEN(lend_fields),
	.min_size = sizeof(struct py_lend_ev),
};

static const struct nt_schema call_schema_def = {
	.name = "python.call_stack",
	.desc = "the Python stack of a CUDA allocation, error, sync or blocking-call entry (same ts, pid, tid as the call's event)",
	.fields = lend_fields,
	.n_fields = NT_ARRAY_LEN(lend_fields),
	.min_size = sizeof(struct py_lend_ev),
};

/* Which channel lends the stack of a call of this schema. */
static struct py_lend_chan *chan_of(struct py_lend *l, const char *call_schema)
{
	static const char *const calls[] = { "cuda.alloc", "cuda.error",
					     "cuda.sync", "cuda.enter" };

	for (size_t i = 0; call_schema && i < NT_ARRAY_LEN(calls); i++)
		if (!strcmp(call_schema, calls[i]))
			return &l->call;
	return &l->launch;
}

int py_lend_init(struct py_lend *l, const struct nt_host *host,
		 struct nt_instance *inst)
{
	memset(l, 0, sizeof(*l));
	l->launch.listeners = l->call.listeners = -1;
	l->launch.type = host->register_schema(inst, &lend_schema);
	l->call.type = host->register_schema(inst, &call_schema_def);
	if (l->launch.type < 0)
		return l->launch.type;
	return l->call.type < 0 ? l->call.type : 0;
}

int py_lend_subscribe(const struct nt_host *host, struct nt_instance *inst)
{
	static const char *const lent[] = {
		"cuda.graph_launch", "cuda.memcpy", "cuda.memset",
		/* issue 19: Python frames in the CUDA detectors' alerts */
		"cuda.alloc", "cuda.error", "cuda.sync", "cuda.enter",
	};
	int err;

	for (size_t i = 0; i < sizeof(lent) / sizeof(lent[0]); i++)
		if ((err = host->subscribe(inst, lent[i])) < 0)
			return err;
	return 0;
}

bool py_lend_wanted(const struct py_lend *l, const char *call_schema)
{
	const struct py_lend_chan *c = chan_of((struct py_lend *)l, call_schema);

	return c->type > 0 && c->listeners != 0;
}

void py_lend_publish(struct py_lend *l, const struct nt_host *host,
		     struct nt_instance *inst, const struct nt_event_hdr *call,
		     const char *call_schema, const struct py_agg *agg,
		     const uint32_t *frames, uint32_t n, bool lines, unsigned how)
{
	struct py_lend_chan *c = chan_of(l, call_schema);
	struct py_lend_ev *e;
	size_t len;
	int took;

	if (!py_lend_wanted(l, call_schema) || !n)
		return;
	if (!l->buf && !(l->buf = malloc(sizeof(*e) + LEND_TEXT_MAX)))
		return;
	e = (struct py_lend_ev *)l->buf;
	memset(e, 0, sizeof(*e));
	len = py_agg_folded_frames(agg, frames, n, lines, l->buf + sizeof(*e), LEND_TEXT_MAX);
	e->hdr = *call;
	e->hdr.type = (uint32_t)c->type;
	e->hdr.size = (uint32_t)(sizeof(*e) + len);
	e->how = how;
	e->stack.off = sizeof(*e);
	e->stack.len = (uint32_t)len;
	took = host->publish(inst, &e->hdr);
	/* subscriptions are fixed once the instances run */
	if (c->listeners < 0)
		c->listeners = took > 0;
}

void py_lend_fini(struct py_lend *l)
{
	free(l->buf);
	l->buf = NULL;
}
