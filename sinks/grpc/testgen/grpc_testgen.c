/* SPDX-License-Identifier: MIT */
/*
 * grpc_testgen: a test-only probe that publishes exactly `count` events of a
 * known schema (one field of every nt_field_type), `per_tick` of them every
 * `interval_ms`, plus a counter, a labelled counter, a gauge and a histogram
 * whose values follow from the count. The gRPC sink's integration tests and
 * benchmark use it as a workload whose every attribute value is known.
 * Not installed.
 *
 * Event i (seq = i, 0-based) carries:
 *   seq u64 = i          neg s64 = -3 * i        ratio f64 = i / 4.0
 *   flag bool = i odd    small u8 = i % 256      mid u16 = i % 65536
 *   word u32 = i * 7     label str[12] = "ev-<i % 10>"
 *   text vstr = "event <i> é" (every 100th: "bad\xff<i>", invalid UTF-8)
 *   addr hex64 = 0xdead0000 + i
 *   ip inaddr = 10.1.2.3 for even i, ::1 for odd i
 *   dev devt = 8:<i % 16>   err errno = -ENOENT when i % 3 == 0, else 0
 *   header: pid = the daemon's pid, tid = its loop thread, comm "testgen"
 * Metrics, after n events: ntcore_grpc_testgen_events_total = n,
 *   ntcore_grpc_testgen_parity_total{parity="even"|"odd"},
 *   ntcore_grpc_testgen_last_seq = n - 1,
 *   ntcore_grpc_testgen_value_seconds observes {0, 0.005, 0.01, 0.05}[i % 4]
 *   with buckets 0.001, 0.01, 0.1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ntcore/kit.h>
#include <ntcore/plugin.h>

struct tg_cfg {
	int64_t count;
	int64_t per_tick;
	int64_t interval_ms;
	int64_t start_delay_ms;
};

#define C struct tg_cfg
static const struct nt_cfg_key tg_config[] = {
	NT_KEY_INT(C, count, 1000, 0, 1000000000000, "events to publish in all"),
	NT_KEY_INT(C, per_tick, 100, 1, 10000000, "events per timer tick"),
	NT_KEY_INT(C, interval_ms, 10, 1, 60000, "timer period (ms)"),
	NT_KEY_INT(C, start_delay_ms, 0, 0, 600000,
		   "wait this long after attach before the first event"),
};
#undef C

struct tg_event {
	struct nt_event_hdr hdr;
	uint64_t seq;
	int64_t neg;
	double ratio;
	uint8_t flag;
	uint8_t small;
	uint16_t mid;
	uint32_t word;
	char label[12];
	struct nt_vstr text;
	uint64_t addr;
	uint8_t ip[16];
	uint32_t dev;
	int32_t err;
	char buf[48]; /* vstr storage */
};

static const struct nt_field tg_fields[] = {
	NT_FIELD(struct tg_event, seq, NT_F_U64, "count", "sequence number from 0"),
	NT_FIELD(struct tg_event, neg, NT_F_S64, "", "-3 * seq"),
	NT_FIELD(struct tg_event, ratio, NT_F_F64, "", "seq / 4"),
	NT_FIELD(struct tg_event, flag, NT_F_BOOL, "", "seq is odd"),
	NT_FIELD(struct tg_event, small, NT_F_U8, "", "seq % 256"),
	NT_FIELD(struct tg_event, mid, NT_F_U16, "", "seq % 65536"),
	NT_FIELD(struct tg_event, word, NT_F_U32, "", "seq * 7"),
	NT_FIELD(struct tg_event, label, NT_F_STR, "", "\"ev-<seq % 10>\""),
	NT_FIELD(struct tg_event, text, NT_F_VSTR, "", "free text"),
	NT_FIELD(struct tg_event, addr, NT_F_HEX64, "", "0xdead0000 + seq"),
	NT_FIELD(struct tg_event, ip, NT_F_INADDR, "", "10.1.2.3 or ::1"),
	NT_FIELD(struct tg_event, dev, NT_F_DEVT, "", "8:<seq % 16>"),
	NT_FIELD(struct tg_event, err, NT_F_ERRNO, "", "-ENOENT every third"),
};

static const struct nt_schema tg_schema = {
	.name = "grpc_testgen.event",
	.desc = "synthetic event for the gRPC sink tests",
	.fields = tg_fields,
	.n_fields = NT_ARRAY_LEN(tg_fields),
	.min_size = offsetof(struct tg_event, buf),
};

static const char *const lbl_parity[] = { "parity" };
static const double value_buckets[] = { 0.001, 0.01, 0.1 };
static const double values[4] = { 0.0, 0.005, 0.01, 0.05 };

static const struct nt_metric_desc md_events = {
	.name = "ntcore_grpc_testgen_events_total",
	.help = "Events published by grpc_testgen",
	.type = NT_METRIC_COUNTER,
};
static const struct nt_metric_desc md_parity = {
	.name = "ntcore_grpc_testgen_parity_total",
	.help = "Events published by grpc_testgen, by parity of seq",
	.type = NT_METRIC_COUNTER,
	.n_labels = 1,
	.label_names = lbl_parity,
};
static const struct nt_metric_desc md_last = {
	.name = "ntcore_grpc_testgen_last_seq",
	.help = "seq of the last event published",
	.type = NT_METRIC_GAUGE,
};
static const struct nt_metric_desc md_value = {
	.name = "ntcore_grpc_testgen_value_seconds",
	.help = "Synthetic observations {0, 0.005, 0.01, 0.05}[seq % 4]",
	.type = NT_METRIC_HISTOGRAM,
	.buckets = value_buckets,
	.n_buckets = NT_ARRAY_LEN(value_buckets),
};

struct tg {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct tg_cfg *cfg;
	int type;
	uint64_t next;
	uint64_t start_after_ns;
	struct nt_metric *m_events, *m_parity, *m_last, *m_value;
	uint64_t obs[4]; /* observations of values[v] so far */
	uint32_t pid, tid;
};

static int tg_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	struct tg *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->inst = inst;
	t->host = host;
	t->cfg = config;
	t->type = host->register_schema(inst, &tg_schema);
	if (t->type <= 0) {
		int err = t->type < 0 ? t->type : -EINVAL;

		nt_log_err(t, "cannot register %s: %d", tg_schema.name, t->type);
		free(t);
		return err;
	}
	t->m_events = host->metric_register(inst, &md_events);
	t->m_parity = host->metric_register(inst, &md_parity);
	t->m_last = host->metric_register(inst, &md_last);
	t->m_value = host->metric_register(inst, &md_value);
	t->pid = (uint32_t)getpid();
	t->tid = (uint32_t)gettid();
	*state = t;
	return 0;
}

static int tg_attach(void *state)
{
	struct tg *t = state;

	t->start_after_ns = nt_clock_mono_ns() + (uint64_t)t->cfg->start_delay_ms * NT_NS_PER_MS;
	return t->host->add_timer(t->inst, (uint64_t)t->cfg->interval_ms, 1);
}

static void fill(struct tg *t, struct tg_event *e, uint64_t i)
{
	static const uint8_t v4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3 };
	static const uint8_t v6[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	int n;

	memset(e, 0, sizeof(*e));
	e->hdr.type = (uint32_t)t->type;
	e->hdr.ts_ns = nt_clock_mono_ns();
	e->hdr.pid = t->pid;
	e->hdr.tid = t->tid;
	memcpy(e->hdr.comm, "testgen", 8);
	e->seq = i;
	e->neg = -3 * (int64_t)i;
	e->ratio = (double)i / 4.0;
	e->flag = i & 1;
	e->small = (uint8_t)(i % 256);
	e->mid = (uint16_t)(i % 65536);
	e->word = (uint32_t)(i * 7);
	snprintf(e->label, sizeof(e->label), "ev-%u", (unsigned)(i % 10));
	if (i % 100 == 0)
		n = snprintf(e->buf, sizeof(e->buf), "bad\xff%llu", (unsigned long long)i);
	else
		n = snprintf(e->buf, sizeof(e->buf), "event %llu \xc3\xa9", (unsigned long long)i);
	e->text.off = offsetof(struct tg_event, buf);
	e->text.len = (uint32_t)n;
	e->addr = 0xdead0000ull + i;
	memcpy(e->ip, i % 2 ? v6 : v4, 16);
	e->dev = (8u << 20) | (uint32_t)(i % 16);
	e->err = i % 3 == 0 ? -ENOENT : 0;
	e->hdr.size = (uint32_t)(offsetof(struct tg_event, buf) + (size_t)n);
}

static int tg_poll(void *state, uint32_t token, uint32_t budget)
{
	struct tg *t = state;
	uint64_t end = (uint64_t)t->cfg->count;
	uint64_t k = 0, n_even = 0, n_odd = 0;
	uint64_t obs[4] = { 0 };
	struct tg_event e;

	(void)token;
	(void)budget;
	if (t->next >= end || nt_clock_mono_ns() < t->start_after_ns)
		return 0;
	for (; k < (uint64_t)t->cfg->per_tick && t->next < end; k++, t->next++) {
		fill(t, &e, t->next);
		t->host->publish(t->inst, &e.hdr);
		if (t->next & 1)
			n_odd++;
		else
			n_even++;
		obs[t->next % 4]++;
	}
	if (k) {
		const char *even[1] = { "even" }, *odd[1] = { "odd" };

		t->host->metric_add(t->m_events, NULL, (double)k);
		if (n_even)
			t->host->metric_add(t->m_parity, even, (double)n_even);
		if (n_odd)
			t->host->metric_add(t->m_parity, odd, (double)n_odd);
		t->host->metric_set(t->m_last, NULL, (double)(t->next - 1));
		/* buckets <=0.001: values[0]; <=0.01: values[1], values[2];
		 * <=0.1: values[3]; +Inf: none */
		for (int v = 0; v < 4; v++)
			t->obs[v] += obs[v];
		uint64_t bc[4] = { t->obs[0], t->obs[1] + t->obs[2], t->obs[3], 0 };
		double sum = (double)t->obs[1] * values[1] + (double)t->obs[2] * values[2] +
			     (double)t->obs[3] * values[3];

		t->host->metric_hist_set(t->m_value, NULL, bc, sum);
		if (t->next == end)
			nt_log_info(t, "published all %llu events", (unsigned long long)end);
	}
	return (int)k;
}

static void tg_detach(void *state)
{
	(void)state;
}

static void tg_fini(void *state)
{
	free(state);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "grpc_testgen",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(tg_config),
	.description = "test-only: publishes a known number of synthetic events",
	.version = "0.1.0",
	.config = tg_config,
	.config_size = sizeof(struct tg_cfg),
	.init = tg_init,
	.attach = tg_attach,
	.poll = tg_poll,
	.detach = tg_detach,
	.fini = tg_fini,
};
