/*
 * The trace sink's pure parts: protobuf wire encoding, the hash map and
 * interner, the flight recorder's bounds, the schema conventions, rendering
 * (JSON writer, exact text), counters, flame graphs, HTML escaping and the
 * report aggregation, and the busy ticks of the trace_gpufx fixture the
 * integration tests draw from. Perfetto output is decoded by the integration tests
 * (tests/integration/trace.sh) with python3-protobuf.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg.h"
#include "conv.h"
#include "counters.h"
#include "flame.h"
#include "pbw.h"
#include "recorder.h"
#include "render.h"
#include "report.h"
#include "tmap.h"

static int bytes_eq(const struct nt_buf *b, const char *want, size_t n)
{
	return b->len == n && memcmp(b->p, want, n) == 0;
}

START_TEST(varints)
{
	struct nt_buf b = {0};

	pbw_varint(&b, 0);
	pbw_varint(&b, 1);
	pbw_varint(&b, 127);
	pbw_varint(&b, 128);
	pbw_varint(&b, 300);
	ck_assert(bytes_eq(&b, "\x00\x01\x7f\x80\x01\xac\x02", 7));
	b.len = 0;
	pbw_varint(&b, UINT64_MAX);
	ck_assert(bytes_eq(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10));
	b.len = 0;
	pbw_uint(&b, 58, 3); /* timestamp_clock_id: a two-byte tag */
	ck_assert(bytes_eq(&b, "\xd0\x03\x03", 3));
	b.len = 0;
	pbw_fixed64(&b, 47, 0x0102030405060708ull);
	ck_assert(bytes_eq(&b, "\xf9\x02\x08\x07\x06\x05\x04\x03\x02\x01", 10));
	b.len = 0;
	pbw_double(&b, 44, 1.0);
	ck_assert(bytes_eq(&b, "\xe1\x02\x00\x00\x00\x00\x00\x00\xf0\x3f", 10));
	b.len = 0;
	pbw_str(&b, 23, "ab");
	ck_assert(bytes_eq(&b, "\xba\x01\x02" "ab", 5));
	nt_buf_free(&b);
}
END_TEST

/* Nested messages: the length is a minimal varint whatever the size. */
START_TEST(nested_lengths)
{
	static const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, 300000};
	char *body = malloc(300000);

	memset(body, 'x', 300000);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct nt_buf b = {0}, want = {0};
		size_t outer = pbw_begin(&b, 1);
		size_t inner = pbw_begin(&b, 2);
		nt_buf_put(&b, body, sizes[i]);
		pbw_end(&b, inner);
		pbw_end(&b, outer);
		/* expected: tag 1, len(tag 2, len(n), n), tag 2, len n, body */
		size_t in_len = 1 + pbw_varint_len(sizes[i]) + sizes[i];
		pbw_tag(&want, 1, PB_LEN);
		pbw_varint(&want, in_len);
		pbw_tag(&want, 2, PB_LEN);
		pbw_varint(&want, sizes[i]);
		nt_buf_put(&want, body, sizes[i]);
		ck_assert_uint_eq(b.len, want.len);
		ck_assert(memcmp(b.p, want.p, b.len) == 0);
		nt_buf_free(&b);
		nt_buf_free(&want);
	}
	free(body);
}
END_TEST

START_TEST(map_and_interner)
{
	struct tmap m = {0};
	struct strtab t = {.max = 1000};
	char key[32];
	int is_new;

	for (uintptr_t i = 1; i <= 10000; i++) {
		int n = snprintf(key, sizeof(key), "k%lu", (unsigned long)i);
		ck_assert_int_eq(tmap_put(&m, key, (size_t)n, (void *)i), 0);
	}
	ck_assert_uint_eq(tmap_count(&m), 10000);
	for (uintptr_t i = 1; i <= 10000; i++) {
		int n = snprintf(key, sizeof(key), "k%lu", (unsigned long)i);
		ck_assert_ptr_eq(tmap_get(&m, key, (size_t)n), (void *)i);
	}
	ck_assert_ptr_null(tmap_get(&m, "k0", 2));
	tmap_put(&m, "k5", 2, (void *)7);
	ck_assert_ptr_eq(tmap_get(&m, "k5", 2), (void *)7);
	ck_assert_uint_eq(tmap_count(&m), 10000);
	struct nt_hmap_iter it;
	uint32_t seen = 0;
	for (tmap_iter_init(&it, &m); tmap_next(&it);)
		seen++;
	ck_assert_uint_eq(seen, 10000);
	tmap_free(&m, NULL);

	ck_assert_uint_eq(strtab_id(&t, "a", 1, &is_new), 1);
	ck_assert_int_eq(is_new, 1);
	ck_assert_uint_eq(strtab_id(&t, "bb", 2, &is_new), 2);
	ck_assert_uint_eq(strtab_id(&t, "a", 1, &is_new), 1);
	ck_assert_int_eq(is_new, 0);
	ck_assert_str_eq(strtab_str(&t, 2), "bb");
	for (int i = 0; i < 2000; i++) {
		int n = snprintf(key, sizeof(key), "s%d", i);
		strtab_id(&t, key, (size_t)n, NULL);
	}
	ck_assert_uint_eq(t.n, 1000); /* bounded */
	ck_assert_uint_eq(strtab_id(&t, "s1999", 5, NULL), 0);
	strtab_free(&t);
}
END_TEST

struct visit_log {
	uint64_t n, first_ts, last_ts, bytes;
	int bad;
};

static void log_item(void *arg, uint32_t tag, const void *rec, uint32_t len)
{
	struct visit_log *v = arg;
	const uint64_t *ts = rec;

	if (tag != (uint32_t)(*ts % 7) || len != 16 + (*ts % 200) ||
	    ((const unsigned char *)rec)[len - 1] != (unsigned char)*ts)
		v->bad++;
	if (!v->n)
		v->first_ts = *ts;
	if (v->n && *ts != v->last_ts + 1)
		v->bad++;
	v->last_ts = *ts;
	v->n++;
	v->bytes += len;
}

static void append_n(struct recorder *r, uint64_t n, size_t max_seen[1])
{
	unsigned char rec[256];

	for (uint64_t i = 0; i < n; i++) {
		uint32_t len = 16 + (uint32_t)(i % 200);
		memset(rec, 0, sizeof(rec));
		memcpy(rec, &i, sizeof(i));
		rec[len - 1] = (unsigned char)i;
		ck_assert_int_eq(rec_append(r, (uint32_t)(i % 7), rec, len, i), 0);
		if (r->bytes > max_seen[0])
			max_seen[0] = r->bytes;
	}
}

/* The time window: at least window_ns kept, whole chunks beyond it freed. */
START_TEST(recorder_window)
{
	struct recorder r;
	struct visit_log v = {0};
	size_t peak = 0;

	rec_init(&r, 1 << 20, 1000);
	append_n(&r, 200000, &peak);
	ck_assert_uint_le(peak, 1 << 20);
	rec_visit(&r, log_item, &v);
	ck_assert_int_eq(v.bad, 0);
	ck_assert_uint_eq(v.last_ts, 199999);
	ck_assert_uint_le(v.first_ts, 199999 - 1000);
	/* one 64 KiB chunk holds ~450 of these records */
	ck_assert_uint_ge(v.first_ts, 199999 - 1000 - 1000);
	ck_assert_uint_eq(v.n, r.items);
	ck_assert_uint_eq(r.items + r.evicted, 200000);
	rec_fini(&r);
}
END_TEST

/* The byte bound holds at every append; the newest records stay. */
START_TEST(recorder_bytes)
{
	struct recorder r;
	struct visit_log v = {0};
	size_t peak = 0;
	static unsigned char big[300 << 10];

	rec_init(&r, 256 << 10, UINT64_MAX / 2);
	append_n(&r, 200000, &peak);
	ck_assert_uint_le(peak, 256 << 10);
	ck_assert_uint_le(r.peak_bytes, 256 << 10);
	rec_visit(&r, log_item, &v);
	ck_assert_int_eq(v.bad, 0);
	ck_assert_uint_eq(v.last_ts, 199999);
	ck_assert_uint_gt(r.evicted, 190000);
	ck_assert_uint_eq(r.items + r.evicted, 200000);
	/* a record larger than the bound is refused and counted */
	ck_assert_int_eq(rec_append(&r, 1, big, sizeof(big), 200000), -1);
	ck_assert_uint_eq(r.too_big, 1);
	ck_assert_uint_le(r.bytes, 256 << 10);
	rec_fini(&r);
	ck_assert_uint_eq(r.bytes, 0);
}
END_TEST

/* ---- schemas for the conventions ---------------------------------- */

struct ev_host {
	struct nt_event_hdr hdr;
	uint64_t duration_ns;
	uint64_t bytes;
	struct nt_vstr api_name;
	struct nt_vstr stack;
	char text[64];
};
static const struct nt_field host_fields[] = {
	NT_FIELD(struct ev_host, duration_ns, NT_F_U64, "ns", ""),
	NT_FIELD(struct ev_host, bytes, NT_F_U64, "bytes", ""),
	NT_FIELD(struct ev_host, api_name, NT_F_VSTR, "", ""),
	NT_FIELD(struct ev_host, stack, NT_F_VSTR, "", "frames, innermost first"),
};
static const struct nt_schema host_schema = {"x.call", "", host_fields, 4,
					     sizeof(struct ev_host) - 64};
static const struct nt_schema enter_schema = {"x.enter", "", host_fields, 4,
					      sizeof(struct ev_host) - 64};

struct ev_dev {
	struct nt_event_hdr hdr;
	uint64_t start_ns, end_ns;
	int32_t device;
	uint32_t pad;
	uint64_t stream, launch_ts_ns;
	struct nt_vstr name;
	char text[64];
};
static const struct nt_field dev_fields[] = {
	NT_FIELD(struct ev_dev, start_ns, NT_F_U64, "ns", ""),
	NT_FIELD(struct ev_dev, end_ns, NT_F_U64, "ns", ""),
	NT_FIELD(struct ev_dev, device, NT_F_S32, "", ""),
	NT_FIELD(struct ev_dev, stream, NT_F_U64, "", ""),
	NT_FIELD(struct ev_dev, launch_ts_ns, NT_F_U64, "ns", ""),
	NT_FIELD(struct ev_dev, name, NT_F_VSTR, "", ""),
};
static const struct nt_schema dev_schema = {"y.kernel_exec", "", dev_fields, 6,
					    sizeof(struct ev_dev) - 64};

struct ev_sw {
	struct nt_event_hdr hdr;
	uint64_t prev_oncpu_ns;
	uint32_t cpu;
	uint32_t pad;
};
static const struct nt_field sw_fields[] = {
	NT_FIELD(struct ev_sw, prev_oncpu_ns, NT_F_U64, "ns", ""),
	NT_FIELD(struct ev_sw, cpu, NT_F_U32, "", ""),
};
static const struct nt_schema sw_schema = {"z.switch", "", sw_fields, 2,
					   sizeof(struct ev_sw)};

struct ev_alert {
	struct nt_alert a;
	char text[64];
};
static const struct nt_field alert_fields[] = {NT_ALERT_FIELDS(struct nt_alert)};
static const struct nt_schema alert_schema = {"alert.t", "", alert_fields, 4,
					      sizeof(struct nt_alert)};

static void vstr(void *rec, struct nt_vstr *v, const char *s, uint32_t at)
{
	v->off = at;
	v->len = (uint32_t)strlen(s);
	memcpy((char *)rec + at, s, v->len);
}

static struct ev_host host_ev(uint64_t ts, uint64_t dur, const char *api)
{
	struct ev_host e = {.hdr = {.size = sizeof(e), .ts_ns = ts, .pid = 10,
				    .tid = 11, .comm = "main"},
			    .duration_ns = dur, .bytes = 4096};
	vstr(&e, &e.api_name, api, offsetof(struct ev_host, text));
	vstr(&e, &e.stack, "leaf;mid;root", offsetof(struct ev_host, text) + 32);
	return e;
}

START_TEST(conventions)
{
	struct tr_classes cs = {0};
	const struct tr_class *h = tr_classify(&cs, &host_schema);
	const struct tr_class *en = tr_classify(&cs, &enter_schema);
	const struct tr_class *d = tr_classify(&cs, &dev_schema);
	const struct tr_class *s = tr_classify(&cs, &sw_schema);
	const struct tr_class *a = tr_classify(&cs, &alert_schema);

	ck_assert_ptr_eq(tr_classify(&cs, &host_schema), h); /* cached */
	ck_assert_uint_eq(h->kind, TR_HOST_SLICE);
	ck_assert(!h->enter && en->enter);
	ck_assert(h->stack_leaf_first);
	ck_assert_str_eq(h->plugin, "x");
	ck_assert_uint_eq(h->hidden, 0x5); /* duration_ns, api_name */
	ck_assert_uint_eq(d->kind, TR_DEVICE_SLICE);
	ck_assert_ptr_nonnull(d->device);
	ck_assert_ptr_nonnull(d->launch_ts);
	ck_assert_uint_eq(d->hidden, 0x23); /* start, end, name */
	ck_assert_uint_eq(s->kind, TR_INSTANT);
	ck_assert_uint_eq(s->n_states, 1);
	ck_assert_str_eq(s->state_names[0], "oncpu");
	ck_assert_uint_eq(a->kind, TR_ALERT);

	struct ev_host e = host_ev(1000, 50, "cudaMalloc");
	uint32_t len;
	const char *name = tr_event_name(h, &e.hdr, &len);
	ck_assert_int_eq((int)len, 10);
	ck_assert(memcmp(name, "cudaMalloc", 10) == 0);
	e.api_name.len = 0; /* no name: the schema's */
	name = tr_event_name(h, &e.hdr, &len);
	ck_assert(len == 6 && memcmp(name, "x.call", 6) == 0);
	e.api_name.off = 4000; /* out of the record: not read */
	e.api_name.len = 4;
	ck_assert_ptr_null(tr_field_str(&e.hdr, h->api_name, &len));
	tr_classes_free(&cs);
}
END_TEST

static struct ev_dev dev_ev(uint64_t start, uint64_t end, uint64_t launch)
{
	struct ev_dev e = {.hdr = {.size = sizeof(e), .ts_ns = start, .pid = 10,
				   .tid = 11, .comm = "main"},
			   .start_ns = start, .end_ns = end, .device = 0, .stream = 7,
			   .launch_ts_ns = launch};
	vstr(&e, &e.name, "k1", offsetof(struct ev_dev, text));
	return e;
}

#define HAS(b, s) ck_assert_msg(strstr((b)->p, (s)) != NULL, "missing: %s\nin:\n%s", (s), (b)->p)

/* The JSON writer's exact text for each convention. */
START_TEST(render_json)
{
	struct tr_classes cs = {0};
	struct nt_buf b = {0};
	struct render r;
	struct ev_host e1 = host_ev(1000, 50, "cudaMalloc");
	struct ev_dev d1 = dev_ev(2000, 2500, 1010);
	struct ev_host en = host_ev(3000, 0, "cudaDeviceSynchronize");
	struct ev_host ret = host_ev(3000, 500, "cudaDeviceSynchronize");
	struct ev_host hang = host_ev(5000, 0, "cudaStreamSynchronize");
	struct ev_sw sw = {.hdr = {.size = sizeof(sw), .ts_ns = 8000, .pid = 10,
				   .tid = 11, .comm = "main"}, .prev_oncpu_ns = 3000, .cpu = 1};
	struct ev_alert al = {.a = {.hdr = {.size = sizeof(al), .ts_ns = 6000, .pid = 10,
					    .tid = 11, .comm = "main"},
				    .severity = 2, .subject_pid = 10}};
	struct ctr_series cser = {.id = 1, .pid = 10, .family = "m_bytes",
				  .name = "m_bytes{device=0}", .unit = "bytes"};

	vstr(&al, &al.a.message, "disk full", sizeof(struct nt_alert));
	vstr(&al, &al.a.evidence, "{}", sizeof(struct nt_alert) + 16);
	ck_assert_int_eq(render_init(&r, "json", &b, true), 0);
	render_begin(&r);
	render_event(&r, &e1.hdr, tr_classify(&cs, &host_schema));
	render_event(&r, &d1.hdr, tr_classify(&cs, &dev_schema));
	render_event(&r, &en.hdr, tr_classify(&cs, &enter_schema));
	render_event(&r, &ret.hdr, tr_classify(&cs, &host_schema));
	render_event(&r, &hang.hdr, tr_classify(&cs, &enter_schema));
	render_event(&r, &al.a.hdr, tr_classify(&cs, &alert_schema));
	render_counter(&r, 7000, &cser, 42);
	render_event(&r, &sw.hdr, tr_classify(&cs, &sw_schema));
	render_end(&r, 9000, true);

	HAS(&b, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":10,\"tid\":0,\"args\":{\"name\":\"main\"}}");
	HAS(&b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":11,\"args\":{\"name\":\"main\"}}");
	HAS(&b, "{\"ph\":\"X\",\"name\":\"cudaMalloc\",\"cat\":\"x\",\"ts\":1.000,\"dur\":0.050,"
		"\"pid\":10,\"tid\":11,\"args\":{\"bytes\":4096,\"stack\":\"leaf;mid;root\"}}");
	HAS(&b, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":2000000000,\"tid\":0,\"args\":{\"name\":\"GPU 0\"}}");
	HAS(&b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":2000000000,\"tid\":7,\"args\":{\"name\":\"stream 7\"}}");
	HAS(&b, "{\"ph\":\"X\",\"name\":\"launch\",\"cat\":\"flow\",\"ts\":1.010,\"dur\":0.000,"
		"\"pid\":10,\"tid\":11,\"args\":{}}");
	HAS(&b, "{\"ph\":\"s\",\"id\":1,\"name\":\"launch\",\"cat\":\"flow\",\"ts\":1.010,\"pid\":10,\"tid\":11}");
	HAS(&b, "{\"ph\":\"X\",\"name\":\"k1\",\"cat\":\"y\",\"ts\":2.000,\"dur\":0.500,\"pid\":2000000000,"
		"\"tid\":7,\"args\":{\"device\":0,\"stream\":7,\"launch_ts_ns\":1010}}");
	HAS(&b, "{\"ph\":\"f\",\"bp\":\"e\",\"id\":1,\"name\":\"launch\",\"cat\":\"flow\",\"ts\":2.000,"
		"\"pid\":2000000000,\"tid\":7}");
	HAS(&b, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"disk full\",\"cat\":\"alert\",\"ts\":6.000,"
		"\"pid\":1999999999,\"tid\":0,\"args\":{\"severity\":2,\"subject_pid\":10,\"evidence\":\"{}\"}}");
	HAS(&b, "{\"ph\":\"C\",\"name\":\"m_bytes{device=0}\",\"ts\":7.000,\"pid\":10,\"tid\":0,"
		"\"args\":{\"value\":42}}");
	HAS(&b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":1000000000,\"args\":"
		"{\"name\":\"main oncpu\"}}");
	HAS(&b, "{\"ph\":\"X\",\"name\":\"oncpu\",\"cat\":\"z\",\"ts\":5.000,\"dur\":3.000,\"pid\":10,"
		"\"tid\":1000000000,\"args\":{}}");
	/* the returned call is not drawn open; the hung one is, to the end */
	HAS(&b, "{\"ph\":\"X\",\"name\":\"cudaStreamSynchronize\",\"cat\":\"open\",\"ts\":5.000,"
		"\"dur\":4.000,\"pid\":10,\"tid\":11,\"args\":{\"unfinished\":true}}");
	ck_assert_ptr_null(strstr(b.p, "\"name\":\"cudaDeviceSynchronize\",\"cat\":\"open\""));
	ck_assert(b.len > 4 && strcmp(b.p + b.len - 4, "\n]}\n") == 0);
	ck_assert_uint_eq(r.flows, 1);
	render_fini(&r);
	nt_buf_free(&b);
	tr_classes_free(&cs);
}
END_TEST

struct emitted {
	int n;
	uint32_t id[16];
	double v[16];
	const char *name[16];
	uint32_t pid[16];
};

static void on_emit(void *arg, uint64_t ts, const struct ctr_series *s, double v)
{
	struct emitted *e = arg;

	(void)ts;
	if (e->n < 16) {
		e->id[e->n] = s->id;
		e->v[e->n] = v;
		e->name[e->n] = s->name;
		e->pid[e->n] = s->pid;
	}
	e->n++;
}

START_TEST(counter_sampling)
{
	static const char *const pats[] = {"ntcore_x_*_bytes"};
	static const struct nt_strlist patterns = {pats, 1};
	static const char *const lnames[] = {"pid", "device"};
	struct nt_metric_desc d = {.name = "ntcore_x_mem_bytes", .type = NT_METRIC_GAUGE,
				   .n_labels = 2, .label_names = lnames};
	struct nt_metric_desc other = d;
	const char *lv1[] = {"42", "0"}, *lv2[] = {"43", "1"}, *lv3[] = {"44", "2"};
	struct nt_metric_series s[3] = {{.label_values = lv1, .value = 10},
					{.label_values = lv2, .value = 20},
					{.label_values = lv3, .value = 30}};
	struct ctr_sampler cs;
	struct emitted e = {0};

	other.name = "ntcore_x_mem_total";
	ctr_init(&cs, &patterns, 2, 1000);
	cs.emit = on_emit;
	cs.arg = &e;
	cs.now = 100;
	ctr_visit(&cs, &other, s, 3, 0); /* not wanted */
	ck_assert_int_eq(e.n, 0);
	ctr_visit(&cs, &d, s, 3, 0);
	ck_assert_int_eq(e.n, 2); /* the third series is over max_series */
	ck_assert_uint_eq(cs.overflow, 1);
	ck_assert_str_eq(e.name[0], "ntcore_x_mem_bytes{device=0}");
	ck_assert_uint_eq(e.pid[0], 42);
	ck_assert_str_eq(ctr_series_of(&cs, 2)->unit, "bytes");
	cs.now = 200;
	ctr_visit(&cs, &d, s, 2, 0); /* unchanged: nothing */
	ck_assert_int_eq(e.n, 2);
	s[1].value = 21;
	ctr_visit(&cs, &d, s, 2, 0);
	ck_assert_int_eq(e.n, 3);
	ck_assert_uint_eq(e.id[2], 2);
	ck_assert(e.v[2] == 21);
	cs.now = 1100; /* refresh_ns passed for series 1 */
	ctr_visit(&cs, &d, s, 2, 0);
	ck_assert_int_eq(e.n, 4);
	ck_assert_uint_eq(e.id[3], 1);
	ctr_fini(&cs);
}
END_TEST

START_TEST(flame_tree)
{
	struct flame f;
	struct nt_buf svg = {0};

	flame_init(&f, 100, "samples");
	flame_add(&f, NULL, "main;a;b", 8, false, NULL, 0, 3);
	flame_add(&f, NULL, "main;a;c", 8, false, NULL, 0, 2);
	flame_add(&f, "[cpu]", "c;a;main", 8, true, "leaf", 4, 5); /* leaf first */
	ck_assert_uint_eq(flame_total(&f), 10);
	/* all, main, a, b, c, [cpu], main, a, c, leaf */
	ck_assert_uint_eq(f.n, 10);
	flame_svg(&f, &svg, 1000, false);
	ck_assert_ptr_nonnull(strstr(svg.p, "<title>main (5 samples, 50.00%)</title>"));
	ck_assert_ptr_nonnull(strstr(svg.p, "<title>b (3 samples, 30.00%)</title>"));
	ck_assert_ptr_nonnull(strstr(svg.p, "<title>leaf (5 samples, 50.00%)</title>"));
	/* [cpu] -> main -> a -> c -> leaf: the leaf is at depth 5 */
	ck_assert_ptr_nonnull(strstr(svg.p, "data-d=\"5\"><title>leaf"));
	nt_buf_free(&svg);
	flame_fini(&f);

	flame_init(&f, 4, "calls"); /* all + 3 nodes */
	flame_add(&f, NULL, "a;b;c;d;e", 9, false, NULL, 0, 1);
	ck_assert_uint_eq(f.n, 4);
	ck_assert_uint_eq(f.truncated, 1);
	ck_assert_uint_eq(flame_total(&f), 1);
	flame_fini(&f);
}
END_TEST

static const char *escaped(const char *s, size_t n)
{
	static struct nt_buf b;

	b.len = 0;
	nt_buf_put(&b, "", 0);
	html_escape(&b, s, n);
	return b.p;
}

START_TEST(html_escaping)
{
	ck_assert_str_eq(escaped("a<b>&\"c'", 9), "a&lt;b&gt;&amp;&quot;c&#39;");
	ck_assert_str_eq(escaped("vector<float>::x", 16), "vector&lt;float&gt;::x");
	ck_assert_str_eq(escaped("h\xc3\xa9 \xe2\x82\xac", 7), "h\xc3\xa9 \xe2\x82\xac");
	ck_assert_str_eq(escaped("\xff" "a", 2), "\xef\xbf\xbd" "a");
	ck_assert_str_eq(escaped("\xc3", 1), "\xef\xbf\xbd");
	ck_assert_str_eq(escaped("\xed\xa0\x80", 3), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_str_eq(escaped("l1\nl2\x01", 6), "l1\nl2\xef\xbf\xbd");
	ck_assert_str_eq(escaped("ab\0cd", 5), "ab");
}
END_TEST

START_TEST(aggregation)
{
	static const char *const fams[] = {"m_bytes"};
	static const struct nt_strlist mem = {fams, 1};
	struct tr_classes cs = {0};
	struct agg a;
	struct ctr_series s = {.id = 1, .family = "m_bytes", .name = "m_bytes"};
	struct ctr_series other = {.id = 2, .family = "x_total", .name = "x_total"};

	agg_init(&a, 1000, &mem);
	for (int i = 0; i < 3; i++) {
		struct ev_host e = host_ev(1000 + (uint64_t)i, 100, "cudaMemcpy");
		agg_event(&a, &e.hdr, tr_classify(&cs, &host_schema));
		struct ev_dev d = dev_ev(2000, 2000 + 1000 * (uint64_t)(i + 1), 0);
		agg_event(&a, &d.hdr, tr_classify(&cs, &dev_schema));
	}
	struct agg_stat *k = tmap_get(&a.kernels, "k1", 2);
	ck_assert_uint_eq(k->count, 3);
	ck_assert_uint_eq(k->total_ns, 6000);
	ck_assert_uint_eq(k->max_ns, 3000);
	struct agg_stat *c = tmap_get(&a.apis, "cudaMemcpy", 10);
	ck_assert_uint_eq(c->count, 3);
	ck_assert_uint_eq(c->total_ns, 300);
	ck_assert_uint_eq(flame_total(&a.calls), 3);
	ck_assert_uint_eq(flame_total(&a.gpu), 6000);
	ck_assert_uint_eq((uintptr_t)tmap_get(&a.schemas, "x.call", 6), 3);
	/* memory: only the configured family; decimated, the last one kept */
	for (uint64_t t = 1; t <= 10000; t++) {
		agg_counter(&a, t, &s, (double)t);
		agg_counter(&a, t, &other, 1);
	}
	ck_assert_uint_eq(a.n_mem, 1);
	ck_assert_uint_le(a.mem[0].n, AGG_MEM_POINTS);
	ck_assert_uint_ge(a.mem[0].n, AGG_MEM_POINTS / 2);
	ck_assert_uint_eq(a.mem[0].last_ts, 10000);
	ck_assert(a.mem[0].last_v == 10000);
	ck_assert_uint_eq(a.mem[0].ts[0], 1);
	agg_fini(&a);
	tr_classes_free(&cs);
}
END_TEST

/* ---- the trace_gpufx fixture's busy ticks ---------------------------- */

/* The fixture (tests/fixtures/trace/gpufx.c, linked in) driven through a
 * stand-in host that keeps the spans of its calls and kernels. */
extern const struct nt_plugin_desc ntcore_plugin;

struct fx_cfg_copy { /* struct fx_cfg of gpufx.c, field for field */
	const char *mode;
	int64_t launches, rate, alert_every_ms;
};

struct span {
	uint64_t start, end;
};

/* The kit's clock (lib/kit/clock.c), replaced so that the fixture's ticks
 * come at the times a test sets; the real clock while it sets none. */
static uint64_t test_mono_ns;

static uint64_t clock_read(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t nt_clock_mono_ns(void)
{
	return test_mono_ns ? test_mono_ns : clock_read(CLOCK_MONOTONIC);
}

uint64_t nt_clock_wall_ns(void)
{
	return clock_read(CLOCK_REALTIME);
}

static struct fx_seen {
	struct span calls[4096], kernels[4096];
	size_t n_calls, n_kernels;
	int n_types;
} fx_seen;

static int fx_register_schema(struct nt_instance *inst, const struct nt_schema *s)
{
	(void)inst;
	(void)s;
	return ++fx_seen.n_types; /* gpufx registers gpufx.call first, kernels third */
}

static int fx_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	uint64_t u[3];

	(void)inst;
	memcpy(u, ev + 1, sizeof(u)); /* call: duration; kernel: start, end */
	if (ev->type == 1 && fx_seen.n_calls < 4096)
		fx_seen.calls[fx_seen.n_calls++] = (struct span){ev->ts_ns, ev->ts_ns + u[0]};
	else if (ev->type == 3 && fx_seen.n_kernels < 4096)
		fx_seen.kernels[fx_seen.n_kernels++] = (struct span){u[0], u[1]};
	return 1;
}

static struct nt_metric *fx_metric_register(struct nt_instance *inst,
					    const struct nt_metric_desc *d)
{
	(void)inst;
	return (struct nt_metric *)d; /* any non-NULL handle */
}

static void fx_metric_set(struct nt_metric *m, const char *const *lv, double v)
{
	(void)m;
	(void)lv;
	(void)v;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Spans on one track (one thread, one stream) never cross: sorted by start,
 * each begins at or after the end of the one before. */
static void assert_no_crossing(struct span *s, size_t n, const char *what)
{
	qsort(s, n, sizeof(*s), span_cmp);
	for (size_t i = 1; i < n; i++)
		ck_assert_msg(s[i].start >= s[i - 1].end,
			      "%s %zu [%llu, %llu] crosses [%llu, %llu]", what, i,
			      (unsigned long long)s[i].start, (unsigned long long)s[i].end,
			      (unsigned long long)s[i - 1].start,
			      (unsigned long long)s[i - 1].end);
}

/* A libev repeating timer held up by a period or more fires again at once:
 * two busy ticks 20 us apart. Their slices must not cross (the flight
 * test's dumps failed the nesting check when they did); the tick after
 * them, 10 ms on, is back in its 9 ms before now. */
START_TEST(fixture_back_to_back_ticks)
{
	static const struct nt_host host = {
		.abi_major = NT_ABI_MAJOR, .abi_minor = NT_ABI_MINOR,
		.size = sizeof(struct nt_host),
		.register_schema = fx_register_schema, .publish = fx_publish,
		.metric_register = fx_metric_register, .metric_set = fx_metric_set,
	};
	/* as the flight test: 50 pairs a tick in 4 us slots */
	struct fx_cfg_copy cfg = {.mode = "busy", .launches = 12, .rate = 5000};
	const uint64_t t0 = 100000000000ull;
	void *state = NULL;

	memset(&fx_seen, 0, sizeof(fx_seen));
	ck_assert_int_eq(ntcore_plugin.init(NULL, &host, &cfg, &state), 0);
	test_mono_ns = t0;
	ck_assert_int_eq(ntcore_plugin.poll(state, 0, 4096), 0);
	test_mono_ns = t0 + 20000;
	ck_assert_int_eq(ntcore_plugin.poll(state, 0, 4096), 0);
	test_mono_ns = t0 + 10020000;
	ck_assert_int_eq(ntcore_plugin.poll(state, 0, 4096), 0);
	test_mono_ns = 0;
	ntcore_plugin.fini(state);
	ck_assert_uint_eq(fx_seen.n_calls, 150);
	ck_assert_uint_eq(fx_seen.n_kernels, 150);
	/* the first tick: [t0 - 9 ms, + 200 us); the second right after it */
	ck_assert_uint_eq(fx_seen.calls[0].start, t0 - 9000000);
	ck_assert_uint_eq(fx_seen.calls[50].start, t0 - 9000000 + 200000);
	ck_assert_uint_eq(fx_seen.calls[100].start, t0 + 10020000 - 9000000);
	assert_no_crossing(fx_seen.calls, fx_seen.n_calls, "call");
	assert_no_crossing(fx_seen.kernels, fx_seen.n_kernels, "kernel");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("core");
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, varints);
	tcase_add_test(tc, nested_lengths);
	tcase_add_test(tc, map_and_interner);
	tcase_add_test(tc, recorder_window);
	tcase_add_test(tc, recorder_bytes);
	tcase_add_test(tc, conventions);
	tcase_add_test(tc, render_json);
	tcase_add_test(tc, counter_sampling);
	tcase_add_test(tc, flame_tree);
	tcase_add_test(tc, html_escaping);
	tcase_add_test(tc, aggregation);
	tcase_add_test(tc, fixture_back_to_back_ticks);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
