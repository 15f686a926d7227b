/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the NVML worker thread (see nvml_poll.h): NVML init and the
 * device list, the poll of every GPU each interval, the wait for XID
 * events between polls, and the outbox the loop reads.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ntcore/kit/clock.h"
#include "nvml_poll.h"

/* Longest NVML event wait: how long stopping the worker may take. */
#define EVENT_SLICE_MS 100

static void signal_loop(struct nvml_poller *p)
{
	uint64_t one = 1;

	if (write(p->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, the loop has enough to read */
	}
}

/* Called with the lock held or not: takes it itself. */
void nvml_note(struct nvml_poller *p, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&p->lock);
	if (p->out.nnotes < NVML_NOTES_MAX) {
		va_start(ap, fmt);
		vsnprintf(p->out.notes[p->out.nnotes++], NVML_NOTE_LEN, fmt, ap);
		va_end(ap);
	} else {
		p->out.notes_lost++;
	}
	pthread_mutex_unlock(&p->lock);
}

static void dev_facts(struct nvml_poller *p, struct nvml_dev *d)
{
	const struct nvml_lib *l = &p->lib;
	struct nvml_pci_info pci;
	const char *lv[4];

	snprintf(d->index_s, sizeof(d->index_s), "%u", d->index);
	if (!l->uuid || l->uuid(d->h, d->uuid, sizeof(d->uuid)) != NVML_OK)
		snprintf(d->uuid, sizeof(d->uuid), "GPU-unknown-%u", d->index);
	if (!l->name || l->name(d->h, d->name, sizeof(d->name)) != NVML_OK)
		snprintf(d->name, sizeof(d->name), "?");
	memset(&pci, 0, sizeof(pci));
	if (l->pci_info && l->pci_info(d->h, &pci) == NVML_OK)
		snprintf(d->bus_id, sizeof(d->bus_id), "%s", pci.bus_id);
	lv[0] = d->index_s;
	lv[1] = d->uuid;
	lv[2] = d->bus_id;
	lv[3] = d->name;
	p->host->metric_set(p->nm->m[NVM_INFO], lv, 1);
}

static void register_xids(struct nvml_poller *p)
{
	const struct nvml_lib *l = &p->lib;
	uint32_t registered = 0;

	if (!p->xids_on || !l->event_set_create || !l->register_events ||
	    !l->event_wait || l->event_set_create(&p->events) != NVML_OK) {
		p->events = NULL;
		return;
	}
	for (uint32_t i = 0; i < p->ndev; i++) {
		unsigned long long sup = NVML_EVENT_XID_CRITICAL;

		if (l->supported_events &&
		    l->supported_events(p->dev[i].h, &sup) != NVML_OK)
			sup = 0;
		if ((sup & NVML_EVENT_XID_CRITICAL) &&
		    l->register_events(p->dev[i].h, NVML_EVENT_XID_CRITICAL,
				       p->events) == NVML_OK)
			registered++;
	}
	if (!registered) {
		nvml_note(p, "no GPU delivers XID events through NVML");
		if (l->event_set_free)
			l->event_set_free(p->events);
		p->events = NULL;
	}
}

/* NVML init and the device list; false when NVML cannot be used. */
static bool worker_init(struct nvml_poller *p)
{
	const struct nvml_lib *l = &p->lib;
	unsigned int count = 0;
	char buf[32];
	nvml_return_t r = l->init();

	if (r != NVML_OK) {
		nvml_note(p, "NVML init failed: %s (no NVIDIA driver loaded?); GPU metrics off",
			  nvml_lib_strerror(l, r, buf, sizeof(buf)));
		return false;
	}
	r = l->device_count(&count);
	if (r != NVML_OK)
		count = 0;
	for (unsigned int i = 0; i < count && p->ndev < NVML_DEV_MAX; i++) {
		struct nvml_dev *d = &p->dev[p->ndev];

		memset(d, 0, sizeof(*d));
		if (l->device_by_index(i, &d->h) != NVML_OK)
			continue;
		d->index = i;
		dev_facts(p, d);
		p->ndev++;
	}
	if (count > NVML_DEV_MAX)
		nvml_note(p, "%u GPUs; only the first %d are polled", count,
			  NVML_DEV_MAX);
	register_xids(p);
	return true;
}

static void poll_all(struct nvml_poller *p)
{
	struct nvml_proc (*procs)[NVML_PROCS_MAX] = p->scratch;
	uint32_t nprocs[NVML_DEV_MAX];
	uint64_t t0 = nt_clock_mono_ns(), dt;

	for (uint32_t i = 0; i < p->ndev; i++)
		nvml_read_dev(p, &p->dev[i], t0, procs[i], &nprocs[i]);
	dt = nt_clock_mono_ns() - t0;
	p->host->metric_observe(p->nm->m[NVM_POLL], NULL, (double)dt / 1e9);
	pthread_mutex_lock(&p->lock);
	memcpy(p->out.procs, p->scratch, sizeof(p->scratch));
	memcpy(p->out.nprocs, nprocs, sizeof(nprocs));
	p->out.procs_fresh = true;
	if (!p->out.polls++)
		p->out.first_poll_ns = dt;
	if (dt > p->out.max_poll_ns)
		p->out.max_poll_ns = dt;
	pthread_mutex_unlock(&p->lock);
	signal_loop(p);
}

static int dev_of(const struct nvml_poller *p, nvml_device_t h)
{
	for (uint32_t i = 0; i < p->ndev; i++)
		if (p->dev[i].h == h)
			return (int)i;
	return -1;
}

static void push_xid(struct nvml_poller *p, const struct nvml_event_data *e)
{
	int d = dev_of(p, e->device);

	pthread_mutex_lock(&p->lock);
	if (p->out.nxids < NVML_XIDS_MAX && d >= 0) {
		struct nvml_xid *x = &p->out.xids[p->out.nxids++];

		x->gpu = (uint32_t)d;
		x->xid = e->event_data;
		x->ts_ns = nt_clock_mono_ns();
	} else {
		p->out.xids_lost++;
	}
	pthread_mutex_unlock(&p->lock);
	signal_loop(p);
}

/* The event set fails (not a timeout): XIDs off, said once; the wait
 * becomes a plain sleep. */
static void drop_events(struct nvml_poller *p, nvml_return_t r)
{
	char buf[32];

	nvml_note(p, "waiting for XID events failed: %s; XID events off",
		  nvml_lib_strerror(&p->lib, r, buf, sizeof(buf)));
	if (p->lib.event_set_free)
		p->lib.event_set_free(p->events);
	p->events = NULL;
}

/* Until `deadline` (or stop): XID events, or a plain sleep without them.
 * Returns false when asked to stop. */
static bool wait_until(struct nvml_poller *p, uint64_t deadline)
{
	for (;;) {
		uint64_t now = nt_clock_mono_ns();
		struct nvml_event_data e;
		bool stop;

		pthread_mutex_lock(&p->lock);
		stop = p->stop;
		if (!stop && !p->events && now < deadline) {
			struct timespec ts = { (time_t)(deadline / 1000000000ull),
					       (long)(deadline % 1000000000ull) };

			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
			stop = p->stop;
		}
		pthread_mutex_unlock(&p->lock);
		if (stop)
			return false;
		now = nt_clock_mono_ns();
		if (now >= deadline)
			return true;
		if (!p->events)
			continue;
		memset(&e, 0, sizeof(e));
		uint64_t left_ms = (deadline - now) / 1000000ull + 1;
		nvml_return_t r = p->lib.event_wait(
			p->events, &e,
			left_ms < EVENT_SLICE_MS ? (unsigned)left_ms : EVENT_SLICE_MS);

		if (r == NVML_OK && (e.event_type & NVML_EVENT_XID_CRITICAL))
			push_xid(p, &e);
		else if (r != NVML_OK && r != NVML_ERR_TIMEOUT)
			drop_events(p, r); /* never spin on an error */
	}
}

static void *worker(void *arg)
{
	struct nvml_poller *p = arg;
	bool ready = worker_init(p);

	pthread_mutex_lock(&p->lock);
	p->out.ready = ready;
	p->out.failed = !ready;
	pthread_mutex_unlock(&p->lock);
	signal_loop(p);
	if (!ready)
		return NULL;
	for (;;) {
		uint64_t deadline = nt_clock_mono_ns() + p->interval_ns;

		poll_all(p);
		if (!wait_until(p, deadline))
			break;
	}
	if (p->events && p->lib.event_set_free)
		p->lib.event_set_free(p->events);
	p->events = NULL;
	p->lib.shutdown();
	return NULL;
}

int nvml_poller_start(struct nvml_poller *p, const char *lib_path,
		      char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	p->efd = -1;
	if (nvml_lib_open(&p->lib, lib_path, err, errlen) < 0)
		return -ENOENT;
	p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->efd < 0) {
		rc = -errno;
		nvml_lib_close(&p->lib);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	p->stop = false;
	rc = pthread_create(&p->thr, NULL, worker, p);
	if (rc) {
		snprintf(err, errlen, "cannot start the NVML thread: %s", strerror(rc));
		nvml_poller_stop(p);
		return -rc;
	}
	p->running = true;
	return 0;
}

void nvml_poller_stop(struct nvml_poller *p)
{
	if (p->running) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thr, NULL);
		p->running = false;
	}
	if (p->efd >= 0) {
		close(p->efd);
		p->efd = -1;
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
	}
	nvml_lib_close(&p->lib);
}

void nvml_poller_take(struct nvml_poller *p, struct nvml_outbox *copy)
{
	uint64_t n;

	if (read(p->efd, &n, sizeof(n)) < 0) {
		/* EAGAIN: nothing signalled since the last read */
	}
	pthread_mutex_lock(&p->lock);
	*copy = p->out;
	p->out.procs_fresh = false;
	p->out.nxids = 0;
	p->out.xids_lost = 0;
	p->out.nnotes = 0;
	p->out.notes_lost = 0;
	pthread_mutex_unlock(&p->lock);
}

const struct nvml_dev *nvml_poller_dev(const struct nvml_poller *p, uint32_t i)
{
	return i < p->ndev ? &p->dev[i] : NULL;
}
