/* SPDX-License-Identifier: MIT */
/*
 * bench/eventpath: the probe "bench_ring", which only benchmarks use. Its
 * BPF program writes `count` records of a 14-field type (bench.thread)
 * into one ring buffer, from a thread of its own (`prefill = false`: the
 * producer runs while the loop reads) or all of them in attach, before the
 * loop starts (`prefill = true`: the path from the ring on is measured
 * alone). The ring is read as every probe reads its ring (ring_buffer__
 * consume on the ring's epoll fd, host->publish per record). Once every
 * record is read or counted as dropped it stops the daemon (SIGTERM to
 * itself) when `stop_when_done`, and at fini writes `report`:
 * produced, read, bpf_dropped, read_start_ns, read_end_ns (CLOCK_MONOTONIC).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/ring.h"
#include "ntcore/plugin.h"

#include "ringbench.bpf.skel.h"
#include "ringbench.h"

struct rb_cfg {
	int64_t count;
	int64_t burst;
	int64_t ring_mb;
	int64_t pause_us;
	bool prefill;
	bool stop_when_done;
	const char *report;
};

static const struct nt_cfg_key rb_keys[] = {
	NT_KEY_INT(struct rb_cfg, count, 1000000, 1, 1000000000, "records to write"),
	NT_KEY_INT(struct rb_cfg, burst, 65536, 1, 8000000, "records per BPF run"),
	NT_KEY_INT(struct rb_cfg, ring_mb, 64, 1, 4096, "ring size (MiB, rounded up to a power of 2)"),
	NT_KEY_INT(struct rb_cfg, pause_us, 0, 0, 1000000, "sleep between two runs (pacing)"),
	NT_KEY_BOOL(struct rb_cfg, prefill, false, "write every record before the loop reads"),
	NT_KEY_BOOL(struct rb_cfg, stop_when_done, true, "SIGTERM the daemon once all is read"),
	NT_KEY_STR(struct rb_cfg, report, "", "file for the final numbers"),
};

#define F(m, t, u, d) NT_FIELD(struct rb_rec, m, t, u, d)
static const struct nt_field rb_fields[] = {
	F(oncpu_ns, NT_F_U64, "ns", "on-CPU time"),
	F(offcpu_ns, NT_F_U64, "ns", "off-CPU time"),
	F(runq_ns, NT_F_U64, "ns", "run-queue wait"),
	F(waits, NT_F_U64, "count", "the record's sequence number"),
	F(switches, NT_F_U64, "count", "context switches"),
	F(migrations, NT_F_U64, "count", "migrations"),
	F(addr, NT_F_HEX64, "", "an address"),
	F(path, NT_F_VSTR, "", "a file"),
};

static const struct nt_schema rb_schema = {
	.name = "bench.thread", .desc = "benchmark record (a thread report's shape)",
	.fields = rb_fields, .n_fields = NT_ARRAY_LEN(rb_fields),
	.min_size = offsetof(struct rb_rec, path_text),
};

struct rb {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct rb_cfg *cfg;
	int type;
	struct ringbench_bpf *skel;
	struct nt_ring *rb;
	pthread_t producer;
	bool producing;
	uint64_t produced;          /* atomic: records asked of the BPF program */
	bool stop;                  /* atomic: quiesce asked the producer to end */
	uint64_t read, drops_reported;
	uint64_t read_start_ns, read_end_ns;
	bool done;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int run_once(struct rb *b, uint64_t first, uint32_t n)
{
	struct rb_args args = {.first_seq = first, .n = n, .type = (uint32_t)b->type};
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &args, .ctx_size_in = sizeof(args));

	return bpf_prog_test_run_opts(bpf_program__fd(b->skel->progs.produce), &o);
}

/* Writes every record, burst by burst; returns 0 or -errno. */
static int produce_all(struct rb *b)
{
	uint64_t total = (uint64_t)b->cfg->count;

	while (__atomic_load_n(&b->produced, __ATOMIC_RELAXED) < total &&
	       !__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		uint64_t first = b->produced;
		uint64_t n = total - first < (uint64_t)b->cfg->burst
				     ? total - first : (uint64_t)b->cfg->burst;
		int err = run_once(b, first, (uint32_t)n);
		if (err)
			return err;
		__atomic_store_n(&b->produced, first + n, __ATOMIC_RELEASE);
		if (b->cfg->pause_us) {
			struct timespec d = {b->cfg->pause_us / 1000000,
					     (b->cfg->pause_us % 1000000) * 1000};
			nanosleep(&d, NULL);
		}
	}
	return 0;
}

static void log_error(struct rb *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	b->host->vlog(b->inst, NT_LOG_ERROR, fmt, ap); /* any thread */
	va_end(ap);
}

static void *producer_thread(void *arg)
{
	struct rb *b = arg;
	int err = produce_all(b);

	if (err)
		log_error(b, "BPF_PROG_TEST_RUN failed: %s", strerror(-err));
	return NULL;
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct rb *b = ctx;
	const struct nt_event_hdr *h = data;

	if (size < sizeof(*h) || h->size > size)
		return 0;
	b->read++;
	b->host->publish(b->inst, h);
	return 0;
}

static int rb_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	struct rb *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->inst = inst;
	b->host = host;
	b->cfg = config;
	b->type = host->register_schema(inst, &rb_schema);
	*state = b;
	return b->type > 0 ? 0 : b->type;
}

static int rb_attach(void *state)
{
	struct rb *b = state;
	size_t ring = 4096;
	int err;

	while (ring < ((size_t)b->cfg->ring_mb << 20))
		ring <<= 1;
	b->skel = ringbench_bpf__open();
	if (!b->skel)
		return -errno;
	bpf_map__set_max_entries(b->skel->maps.events, (uint32_t)ring);
	if ((err = ringbench_bpf__load(b->skel)))
		return err;
	err = nt_ring_open(b->host, b->inst, b->skel->maps.events, on_record,
			   b, 0, &b->rb);
	if (err)
		return err;
	if (b->cfg->prefill) {
		err = produce_all(b); /* the loop has not started: nothing reads */
		b->host->log(b->inst, NT_LOG_INFO, "ring prefilled with %llu records",
			     (unsigned long long)b->produced);
		return err;
	}
	/* The loop may read the last record before the producer stores its
	 * count; no record follows to wake it, so a timer re-checks. */
	if ((err = b->host->add_timer(b->inst, 50, 1)))
		return err;
	if ((err = pthread_create(&b->producer, NULL, producer_thread, b)))
		return -err;
	b->producing = true;
	return 0;
}

static uint64_t bpf_drops(struct rb *b)
{
	return nt_bpf_percpu_sum(bpf_map__fd(b->skel->maps.nt_drops));
}

static int rb_poll(void *state, uint32_t token, uint32_t budget)
{
	struct rb *b = state;
	int n;

	(void)token;
	(void)budget;
	if (!b->read_start_ns)
		b->read_start_ns = mono_ns();
	n = nt_ring_consume(b->rb);
	if (n < 0)
		return n;
	if (!b->done &&
	    __atomic_load_n(&b->produced, __ATOMIC_ACQUIRE) == (uint64_t)b->cfg->count &&
	    b->read + bpf_drops(b) == (uint64_t)b->cfg->count) {
		b->done = true;
		b->read_end_ns = mono_ns();
		if (b->cfg->stop_when_done)
			kill(getpid(), SIGTERM);
	}
	return n;
}

static void rb_flush(void *state)
{
	struct rb *b = state;

	if (b->skel)
		nt_bpf_report_drops(b->host, b->inst,
				    bpf_map__fd(b->skel->maps.nt_drops),
				    &b->drops_reported);
}

/* Stop producing (ABI 1.6): the producer thread ends after its current
 * run; what it wrote stays in the ring for the core's last read. */
static void rb_quiesce(void *state)
{
	struct rb *b = state;

	__atomic_store_n(&b->stop, true, __ATOMIC_RELEASE);
	if (b->producing) {
		pthread_join(b->producer, NULL);
		b->producing = false;
	}
}

static void rb_detach(void *state)
{
	struct rb *b = state;

	rb_quiesce(b); /* a core without quiesce: here, after its last read */
	rb_flush(b);
	nt_ring_free(b->rb);
	b->rb = NULL;
	ringbench_bpf__destroy(b->skel);
	b->skel = NULL;
}

/* The final numbers, once nothing runs any more. */
static void rb_fini(void *state)
{
	struct rb *b = state;
	FILE *f;

	if (*b->cfg->report && (f = fopen(b->cfg->report, "w"))) {
		fprintf(f, "produced=%llu read=%llu bpf_dropped=%llu read_start_ns=%llu read_end_ns=%llu\n",
			(unsigned long long)b->produced, (unsigned long long)b->read,
			(unsigned long long)b->drops_reported,
			(unsigned long long)b->read_start_ns,
			(unsigned long long)b->read_end_ns);
		fclose(f);
	}
	free(b);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "bench_ring",
	.kind = NT_KIND_PROBE,
	.description = "benchmark probe: a BPF program writes numbered records into one ring",
	.version = "1",
	.config = rb_keys,
	.n_config = NT_ARRAY_LEN(rb_keys),
	.config_size = sizeof(struct rb_cfg),
	.init = rb_init, .attach = rb_attach, .poll = rb_poll,
	.detach = rb_detach, .fini = rb_fini, .flush = rb_flush,
	.quiesce = rb_quiesce,
};
