/* SPDX-License-Identifier: MIT */
/* nvlink: communicators, collective numbering and the hang check (see
 * nccl_state.h). */
#include "nccl_state.h"

#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

struct nvl_comm *nvl_comm_find(struct nvl_comms *t, uint32_t pid,
			       uint64_t handle)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].used && t->v[i].pid == pid && t->v[i].handle == handle)
			return &t->v[i];
	return NULL;
}

static struct nvl_comm *comm_slot(struct nvl_comms *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (!t->v[i].used)
			return &t->v[i];
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 16;
		struct nvl_comm *n = realloc(t->v, ncap * sizeof(*n));

		if (!n)
			return NULL;
		t->v = n;
		t->cap = ncap;
	}
	return &t->v[t->n++];
}

struct nvl_comm *nvl_comm_add(struct nvl_comms *t, uint32_t pid,
			      uint64_t handle, uint64_t uid, int32_t rank,
			      int32_t nranks)
{
	struct nvl_comm *c = nvl_comm_find(t, pid, handle);

	if (!c)
		c = comm_slot(t);
	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->used = true;
	c->pid = pid;
	c->handle = handle;
	c->uid = uid;
	c->rank = rank;
	c->nranks = nranks;
	return c;
}

void nvl_comm_drop(struct nvl_comms *t, uint32_t pid, uint64_t handle)
{
	struct nvl_comm *c = nvl_comm_find(t, pid, handle);

	if (c)
		c->used = false;
}

void nvl_comm_drop_pid(struct nvl_comms *t, uint32_t pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].pid == pid)
			t->v[i].used = false;
}

void nvl_comms_free(struct nvl_comms *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

uint64_t nvl_comm_collective(struct nvl_comm *c, const struct nvl_coll *k)
{
	struct nvl_coll *slot;

	c->seq++;
	slot = &c->ring[c->seq % NVL_RING];
	*slot = *k;
	slot->seq = c->seq;
	return c->seq;
}

/* ------------------------------------------------------------------ */
/* Hang check                                                          */
/* ------------------------------------------------------------------ */

struct check {
	struct nvl_comms *t;
	const struct nvl_pending *pend;
	size_t npend;
	uint64_t now, timeout;
	struct nvl_hang *out;
	size_t max, n;
};

/* The collective a rank has entered and not returned from, if any. */
static const struct nvl_pending *pending_of(const struct check *k,
					    const struct nvl_comm *c)
{
	for (size_t i = 0; i < k->npend; i++) {
		const struct nvl_pending *p = &k->pend[i];

		if (p->pid == c->pid && p->comm == c->handle &&
		    nvl_call_is_collective(p->c.call))
			return p;
	}
	return NULL;
}

static uint64_t entered(const struct nvl_comm *c, const struct nvl_pending *p)
{
	return c->seq + (p ? 1 : 0);
}

/* Collective #seq of rank c (returned, or the one pending). */
static bool coll_at(const struct nvl_comm *c, const struct nvl_pending *p,
		    uint64_t seq, struct nvl_coll *out)
{
	const struct nvl_coll *r;

	if (p && seq == c->seq + 1) {
		*out = p->c;
		out->seq = seq;
		out->ts_ns = p->ts_ns;
		return true;
	}
	if (!seq || seq > c->seq || c->seq - seq >= NVL_RING)
		return false;
	r = &c->ring[seq % NVL_RING];
	if (r->seq != seq)
		return false;
	*out = *r;
	return true;
}

static struct nvl_hang *report(struct check *k, const struct nvl_comm *w,
			       const struct nvl_coll *coll, uint64_t ts_ns)
{
	struct nvl_hang *h;

	if (k->n >= k->max)
		return NULL;
	h = &k->out[k->n++];
	memset(h, 0, sizeof(*h));
	h->uid = w ? w->uid : 0;
	h->nranks = w ? w->nranks : -1;
	h->wait_rank = w ? w->rank : -1;
	h->wait_pid = w ? w->pid : 0;
	h->call = coll->call;
	h->seq = coll->seq;
	h->bytes = coll->bytes;
	h->count = coll->count;
	h->dtype = coll->dtype;
	h->op = coll->op;
	h->wait_ns = k->now - ts_ns;
	h->missing_rank = -1;
	return h;
}

/* Ranks of one communicator: the one that entered most, and each rank
 * behind it whose awaited collective the leader entered >= timeout ago. */
static void check_group(struct check *k, size_t first)
{
	struct nvl_comm *v = k->t->v, *lead = NULL;
	const struct nvl_pending *lp = NULL;
	uint64_t uid = v[first].uid, maxe = 0;
	int32_t seen = 0;

	for (size_t i = first; i < k->t->n; i++) {
		const struct nvl_pending *p;

		if (!v[i].used || v[i].uid != uid)
			continue;
		seen++;
		p = pending_of(k, &v[i]);
		if (!lead || entered(&v[i], p) > maxe) {
			lead = &v[i];
			lp = p;
			maxe = entered(&v[i], p);
		}
	}
	for (size_t i = first; i < k->t->n; i++) {
		struct nvl_comm *m = &v[i];
		uint64_t awaited;
		struct nvl_coll coll;
		struct nvl_hang *h;

		if (!m->used || m->uid != uid || m == lead)
			continue;
		awaited = entered(m, pending_of(k, m)) + 1;
		if (awaited > maxe || m->reported_missing >= awaited)
			continue;
		if (!coll_at(lead, lp, awaited, &coll) ||
		    k->now - coll.ts_ns < k->timeout)
			continue;
		h = report(k, lead, &coll, coll.ts_ns);
		if (!h)
			return;
		h->wait_tid = lp ? lp->tid : 0;
		h->blocked = lp && awaited == lead->seq + 1;
		h->missing_rank = m->rank;
		h->missing_pid = m->pid;
		h->missing_last_seq = entered(m, pending_of(k, m));
		h->ranks_seen = seen;
		m->reported_missing = awaited;
		if (h->blocked)
			lead->reported_blocked = awaited;
	}
}

static bool first_of_uid(const struct nvl_comms *t, size_t i)
{
	if (!t->v[i].used || !t->v[i].uid)
		return false;
	for (size_t j = 0; j < i; j++)
		if (t->v[j].used && t->v[j].uid == t->v[i].uid)
			return false;
	return true;
}

static int32_t ranks_seen(const struct nvl_comms *t, uint64_t uid)
{
	int32_t n = 0;

	for (size_t i = 0; uid && i < t->n; i++)
		n += t->v[i].used && t->v[i].uid == uid;
	return n;
}

/* A collective or point-to-point call still inside NCCL after `timeout`
 * that no lagging rank explains (the others are not traced here). */
static void check_blocked(struct check *k, const struct nvl_pending *p)
{
	struct nvl_comm *c = nvl_comm_find(k->t, p->pid, p->comm);
	struct nvl_coll coll = p->c;
	struct nvl_hang *h;

	if (!c || !nvl_call_moves_data(p->c.call) ||
	    k->now - p->ts_ns < k->timeout)
		return;
	coll.seq = nvl_call_is_collective(p->c.call) ? c->seq + 1 : 0;
	if (coll.seq && c->reported_blocked >= coll.seq)
		return;
	if (!coll.seq && c->reported_blocked == p->ts_ns)
		return; /* p2p: keyed by its entry time */
	h = report(k, c, &coll, p->ts_ns);
	if (!h)
		return;
	h->wait_tid = p->tid;
	h->blocked = true;
	h->ranks_seen = ranks_seen(k->t, c->uid);
	c->reported_blocked = coll.seq ? coll.seq : p->ts_ns;
}

static bool init_reported(struct nvl_comms *t, uint64_t key)
{
	for (size_t i = 0; i < NVL_INIT_REPORTED; i++)
		if (t->init_reported[i] == key)
			return true;
	t->init_reported[t->init_next++ % NVL_INIT_REPORTED] = key;
	return false;
}

/* The lowest rank of p's communicator not waiting in its init here. */
static int32_t init_missing(const struct check *k, const struct nvl_pending *p,
			    int32_t *seen)
{
	int32_t missing = -1;

	*seen = 0;
	for (int32_t r = 0; r < p->nranks && r < 4096; r++) {
		bool here = false;

		for (size_t i = 0; i < k->npend && !here; i++)
			here = nvl_call_is_init(k->pend[i].c.call) &&
			       k->pend[i].uid == p->uid && k->pend[i].rank == r;
		*seen += here;
		if (!here && missing < 0)
			missing = r;
	}
	return missing;
}

static void check_init(struct check *k, const struct nvl_pending *p)
{
	struct nvl_hang *h;

	if (!nvl_call_is_init(p->c.call) || k->now - p->ts_ns < k->timeout)
		return;
	if (init_reported(k->t, (uint64_t)p->tid ^ p->ts_ns))
		return;
	h = report(k, NULL, &p->c, p->ts_ns);
	if (!h)
		return;
	h->uid = p->uid;
	h->nranks = p->nranks;
	h->wait_rank = p->rank;
	h->wait_pid = p->pid;
	h->wait_tid = p->tid;
	h->blocked = true;
	h->missing_rank = init_missing(k, p, &h->ranks_seen);
}

size_t nvl_hang_check(struct nvl_comms *t, const struct nvl_pending *pend,
		      size_t npend, uint64_t now_ns, uint64_t timeout_ns,
		      struct nvl_hang *out, size_t max)
{
	struct check k = { t, pend, npend, now_ns, timeout_ns, out, max, 0 };

	for (size_t i = 0; i < t->n; i++)
		if (first_of_uid(t, i))
			check_group(&k, i);
	for (size_t i = 0; i < npend; i++) {
		check_blocked(&k, &pend[i]);
		check_init(&k, &pend[i]);
	}
	return k.n;
}

/* ------------------------------------------------------------------ */
/* Groups                                                              */
/* ------------------------------------------------------------------ */

struct nvl_group *nvl_group_get(struct nvl_groups *g, uint32_t tid,
				uint64_t now_ns, bool create)
{
	struct nvl_group *stale = &g->v[0];

	for (size_t i = 0; i < NVL_GROUPS_MAX; i++) {
		struct nvl_group *e = &g->v[i];

		if (e->tid == tid && e->tid) {
			e->last_ns = now_ns;
			return e;
		}
		if (e->last_ns < stale->last_ns)
			stale = e;
	}
	if (!create)
		return NULL;
	memset(stale, 0, sizeof(*stale));
	stale->tid = tid;
	stale->last_ns = now_ns;
	return stale;
}
