/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the gRPC sink's pure parts: the bounded queue, the OTLP
 * encoder (decoded back with protobuf-c and checked field by field), the
 * endpoint parser, status classification and backoff.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ntcore/plugin.h>

#include "grpc_sink.h"
#include "otlp_logs_service.pb-c.h"
#include "otlp_metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Logs__V1__LogRecord LogRecord;

/* ------------------------------------------------------------------ */
/* A schema with one field of every type                               */
/* ------------------------------------------------------------------ */

struct ev_all {
	struct nt_event_hdr hdr;
	uint64_t u64;
	int64_t s64;
	double f64;
	uint8_t u8;
	uint8_t b;
	uint16_t u16;
	uint32_t u32;
	int32_t s32;
	uint32_t devt;
	char str[8];
	struct nt_vstr vs;
	uint64_t hex;
	uint8_t ip[16];
	int32_t err;
	int32_t err0;
	uint32_t weird;
	char tail[32];
};

static const struct nt_field all_fields[] = {
	NT_FIELD(struct ev_all, u64, NT_F_U64, "", ""),
	NT_FIELD(struct ev_all, s64, NT_F_S64, "", ""),
	NT_FIELD(struct ev_all, f64, NT_F_F64, "", ""),
	NT_FIELD(struct ev_all, u8, NT_F_U8, "", ""),
	NT_FIELD(struct ev_all, b, NT_F_BOOL, "", ""),
	NT_FIELD(struct ev_all, u16, NT_F_U16, "", ""),
	NT_FIELD(struct ev_all, u32, NT_F_U32, "", ""),
	NT_FIELD(struct ev_all, s32, NT_F_S32, "", ""),
	NT_FIELD(struct ev_all, devt, NT_F_DEVT, "", ""),
	NT_FIELD(struct ev_all, str, NT_F_STR, "", ""),
	NT_FIELD(struct ev_all, vs, NT_F_VSTR, "", ""),
	NT_FIELD(struct ev_all, hex, NT_F_HEX64, "", ""),
	NT_FIELD(struct ev_all, ip, NT_F_INADDR, "", ""),
	NT_FIELD(struct ev_all, err, NT_F_ERRNO, "", ""),
	NT_FIELD(struct ev_all, err0, NT_F_ERRNO, "", ""),
	{ .name = "weird", .type = 99, .offset = offsetof(struct ev_all, weird),
	  .size = 4, .unit = "", .desc = "" },
};

static const struct nt_schema all_schema = {
	.name = "test.all",
	.fields = all_fields,
	.n_fields = NT_ARRAY_LEN(all_fields),
	.min_size = offsetof(struct ev_all, tail),
};

static void make_all(struct ev_all *e)
{
	static const uint8_t v4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 7 };

	memset(e, 0, sizeof(*e));
	e->hdr.type = 7;
	e->hdr.ts_ns = 123;
	e->hdr.pid = 4242;
	e->hdr.tid = 4243;
	memcpy(e->hdr.comm, "worker\xff", 7); /* invalid UTF-8 in comm */
	e->u64 = 18446744073709551615ull;
	e->s64 = -5;
	e->f64 = 2.5;
	e->u8 = 200;
	e->b = 1;
	e->u16 = 65535;
	e->u32 = 4000000000u;
	e->s32 = -7;
	e->devt = (259u << 20) | 3;
	memcpy(e->str, "abcdefgh", 8); /* no NUL: full 8 chars */
	memcpy(e->tail, "caf\xc3\xa9!", 6);
	e->vs.off = offsetof(struct ev_all, tail);
	e->vs.len = 6;
	e->hex = 0xffffffff81000000ull;
	memcpy(e->ip, v4, 16);
	e->err = -ENOENT;
	e->err0 = 0;
	e->weird = 0x01020304;
	e->hdr.size = offsetof(struct ev_all, tail) + 6;
}

static const AnyValue *attr(const LogRecord *lr, const char *key)
{
	for (size_t i = 0; i < lr->n_attributes; i++)
		if (strcmp(lr->attributes[i]->key, key) == 0)
			return lr->attributes[i]->value;
	return NULL;
}

#define STR_CASE OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define INT_CASE OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE

static void ck_attr_str(const LogRecord *lr, const char *key, const char *want)
{
	const AnyValue *v = attr(lr, key);

	ck_assert_msg(v, "attribute %s missing", key);
	ck_assert_int_eq(v->value_case, STR_CASE);
	ck_assert_str_eq(v->string_value, want);
}

static void ck_attr_int(const LogRecord *lr, const char *key, int64_t want)
{
	const AnyValue *v = attr(lr, key);

	ck_assert_msg(v, "attribute %s missing", key);
	ck_assert_int_eq(v->value_case, INT_CASE);
	ck_assert_int_eq(v->int_value, want);
}

static const struct otlp_resource_info res_info = {
	.service_name = "ntcore",
	.service_version = "9.9.9",
	.service_instance_id = "host1:77",
	.host_name = "host1",
};

static Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *
encode_decode(struct otlp_encoder *enc, const struct gq_entry *const *e, uint32_t n)
{
	size_t len = 0;
	uint8_t *buf = otlp_encode_logs(enc, e, n, &len);
	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req;

	ck_assert_ptr_nonnull(buf);
	req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
		NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(req);
	return req;
}

/* ------------------------------------------------------------------ */
/* Queue                                                               */
/* ------------------------------------------------------------------ */

static struct nt_event_hdr *mk_rec(uint8_t *buf, uint32_t payload, uint32_t seq)
{
	struct nt_event_hdr *h = (struct nt_event_hdr *)(void *)buf;

	memset(h, 0, sizeof(*h));
	h->type = 1;
	h->size = (uint32_t)sizeof(*h) + payload;
	h->pid = seq;
	for (uint32_t i = 0; i < payload; i++)
		buf[sizeof(*h) + i] = (uint8_t)(seq + i);
	return h;
}

static bool rec_ok(const struct gq_entry *e, uint32_t seq, uint32_t payload)
{
	const struct nt_event_hdr *h = gq_record(e);
	const uint8_t *p = (const uint8_t *)h;

	if (h->pid != seq || h->size != sizeof(*h) + payload || e->rec_size != h->size)
		return false;
	for (uint32_t i = 0; i < payload; i++)
		if (p[sizeof(*h) + i] != (uint8_t)(seq + i))
			return false;
	return true;
}

START_TEST(queue_count_bound)
{
	struct gq q;
	uint8_t buf[256];
	const struct gq_entry *out[8];

	ck_assert_int_eq(gq_init(&q, 64 * 1024, 3), 0);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(gq_push(&q, mk_rec(buf, 8, i), NULL, i, i, i), GQ_OK);
	ck_assert_int_eq(gq_push(&q, mk_rec(buf, 8, 3), NULL, 0, 0, 0), GQ_FULL);
	ck_assert_uint_eq(q.count, 3);
	ck_assert_uint_eq(gq_peek(&q, out, 8, 1 << 20), 3);
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert(rec_ok(out[i], i, 8));
		ck_assert_uint_eq(out[i]->wall_ns, i);
	}
	/* peeking does not consume */
	ck_assert_uint_eq(gq_peek(&q, out, 2, 1 << 20), 2);
	ck_assert(rec_ok(out[0], 0, 8));
	gq_release(&q, 2);
	ck_assert_uint_eq(q.count, 1);
	ck_assert(rec_ok(gq_oldest(&q), 2, 8));
	ck_assert_int_eq(gq_push(&q, mk_rec(buf, 8, 9), NULL, 0, 0, 0), GQ_OK);
	gq_release(&q, 2);
	ck_assert_uint_eq(q.count, 0);
	ck_assert_uint_eq(q.used, 0);
	ck_assert_ptr_null(gq_oldest(&q));
	gq_free(&q);
}
END_TEST

START_TEST(queue_byte_bound_and_too_large)
{
	struct gq q;
	uint8_t buf[8192];
	uint32_t pushed = 0;
	size_t entry = (sizeof(struct gq_entry) + sizeof(struct nt_event_hdr) + 100 + 7) & ~7ul;

	ck_assert_int_eq(gq_init(&q, 4096, 1000), 0);
	while (gq_push(&q, mk_rec(buf, 100, pushed), NULL, 0, 0, 0) == GQ_OK)
		pushed++;
	ck_assert_uint_eq(pushed, 4096 / entry);
	ck_assert_uint_le(q.used, q.cap);
	/* a record bigger than half the ring is refused outright */
	ck_assert_int_eq(gq_push(&q, mk_rec(buf, 3000, 0), NULL, 0, 0, 0), GQ_TOO_LARGE);
	gq_free(&q);
}
END_TEST

/* Many pushes and releases of varying sizes through a small ring: FIFO order
 * and content survive every wrap, and memory never exceeds the bound. */
START_TEST(queue_wraps_fifo)
{
	struct gq q;
	uint8_t buf[1024];
	const struct gq_entry *out[16];
	uint32_t next_push = 0, next_pop = 0;
	uint32_t rnd = 12345;
	uint32_t full = 0;

	ck_assert_int_eq(gq_init(&q, 2048, 1000), 0);
	for (int round = 0; round < 20000; round++) {
		rnd = rnd * 1103515245u + 12345u;
		uint32_t payload = (rnd >> 8) % 200;

		if ((rnd >> 20) % 3 != 0) {
			int r = gq_push(&q, mk_rec(buf, payload, next_push), NULL,
					payload, 0, 0);
			if (r == GQ_OK)
				next_push++;
			else
				full++;
		} else {
			uint32_t n = gq_peek(&q, out, 1 + (rnd >> 24) % 16, 1 << 20);

			for (uint32_t i = 0; i < n; i++)
				ck_assert_msg(rec_ok(out[i], next_pop + i, (uint32_t)out[i]->wall_ns),
					      "entry %u corrupted", next_pop + i);
			gq_release(&q, n);
			next_pop += n;
		}
		ck_assert_uint_le(q.used, q.cap);
		ck_assert_uint_eq(q.count, next_push - next_pop);
	}
	ck_assert_uint_gt(full, 0);
	ck_assert_uint_le(q.bytes_hwm, 2048);
	gq_free(&q);
}
END_TEST

START_TEST(queue_peek_byte_cap)
{
	struct gq q;
	uint8_t buf[256];
	const struct gq_entry *out[8];
	size_t est;

	ck_assert_int_eq(gq_init(&q, 64 * 1024, 100), 0);
	for (uint32_t i = 0; i < 5; i++)
		gq_push(&q, mk_rec(buf, 50, i), NULL, 0, 0, 0);
	est = otlp_estimate(gq_oldest(&q));
	ck_assert_uint_eq(gq_peek(&q, out, 8, 2 * est), 2);
	ck_assert_uint_eq(gq_peek(&q, out, 8, 2 * est + 1), 2);
	/* at least one entry even when it alone exceeds the cap */
	ck_assert_uint_eq(gq_peek(&q, out, 8, 1), 1);
	gq_free(&q);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Endpoint, codes, backoff, utf8                                      */
/* ------------------------------------------------------------------ */

static void ep_ok(const char *in, const char *want, int want_tls)
{
	char t[256], err[256];
	int tls;

	ck_assert_msg(gs_parse_endpoint(in, t, sizeof(t), &tls, err, sizeof(err)) == 0,
		      "%s: %s", in, err);
	ck_assert_str_eq(t, want);
	ck_assert_int_eq(tls, want_tls);
}

static void ep_bad(const char *in, const char *want_in_err)
{
	char t[256], err[256];
	int tls;

	ck_assert_msg(gs_parse_endpoint(in, t, sizeof(t), &tls, err, sizeof(err)) < 0,
		      "%s accepted", in);
	ck_assert_msg(strstr(err, want_in_err), "%s: error \"%s\" lacks \"%s\"", in, err,
		      want_in_err);
}

START_TEST(endpoint_parse)
{
	ep_ok("localhost:4317", "localhost:4317", -1);
	ep_ok("127.0.0.1:1", "127.0.0.1:1", -1);
	ep_ok("[::1]:4317", "[::1]:4317", -1);
	ep_ok("http://otel-collector.svc:4317", "otel-collector.svc:4317", 0);
	ep_ok("https://collector.example.com:443/", "collector.example.com:443", 1);
	ep_ok("unix:/run/otel.sock", "unix:/run/otel.sock", -1);
	ep_ok("unix:///run/otel.sock", "unix:/run/otel.sock", -1);

	ep_bad("", "empty");
	ep_bad("localhost", "missing port");
	ep_bad("localhost:", "missing port");
	ep_bad("localhost:99999", "out of range");
	ep_bad("localhost:0", "out of range");
	ep_bad("localhost:43x7", "not a number");
	ep_bad(":4317", "missing host");
	ep_bad("::1:4317", "brackets");
	ep_bad("[::1]", "missing port");
	ep_bad("[::1:4317", "unterminated");
	ep_bad("ftp://host:21", "unknown scheme");
	ep_bad("http://host:4317/v1/logs", "path");
	ep_bad("local host:4317", "blank");
	ep_bad("ho$t:4317", "invalid character");
	ep_bad("unix:relative.sock", "absolute");
}
END_TEST

START_TEST(codes_and_backoff)
{
	ck_assert_str_eq(gs_code_name(14), "UNAVAILABLE");
	ck_assert_str_eq(gs_code_name(0), "OK");
	ck_assert_str_eq(gs_code_name(16), "UNAUTHENTICATED");
	ck_assert_str_eq(gs_code_name(99), "CODE_OTHER");
	/* OTLP/gRPC: retryable */
	int retry[] = { 1, 4, 8, 10, 11, 14, 15 };
	int perm[] = { 2, 3, 5, 6, 7, 9, 12, 13, 16 };

	for (size_t i = 0; i < NT_ARRAY_LEN(retry); i++)
		ck_assert_msg(gs_code_retryable(retry[i]), "%d", retry[i]);
	for (size_t i = 0; i < NT_ARRAY_LEN(perm); i++)
		ck_assert_msg(!gs_code_retryable(perm[i]), "%d", perm[i]);

	/* 250 ms doubling to 5000 ms, +-20% */
	uint64_t base[] = { 250, 500, 1000, 2000, 4000, 5000, 5000, 5000 };

	for (uint32_t a = 0; a < NT_ARRAY_LEN(base); a++) {
		for (uint32_t r = 0; r < 2000; r += 7) {
			uint64_t d = gs_backoff_ms(a, 250, 5000, r * 2654435761u);

			ck_assert_uint_ge(d, base[a] - base[a] / 5);
			ck_assert_uint_le(d, base[a] + base[a] / 5);
		}
	}
	ck_assert_uint_ge(gs_backoff_ms(60, 1, 10, 0), 8);
	ck_assert_uint_le(gs_backoff_ms(60, 1, 10, 0), 12);
}
END_TEST

START_TEST(utf8)
{
	char out[64];

	ck_assert_uint_eq(otlp_utf8_sanitize("plain", 5, out), 5);
	ck_assert_str_eq(out, "plain");
	otlp_utf8_sanitize("caf\xc3\xa9", 5, out);
	ck_assert_str_eq(out, "caf\xc3\xa9");
	otlp_utf8_sanitize("a\xff" "b", 3, out);
	ck_assert_str_eq(out, "a\xef\xbf\xbd" "b");
	otlp_utf8_sanitize("\xc3", 1, out); /* truncated sequence */
	ck_assert_str_eq(out, "\xef\xbf\xbd");
	otlp_utf8_sanitize("\xc0\xaf", 2, out); /* overlong '/' */
	ck_assert_str_eq(out, "\xef\xbf\xbd\xef\xbf\xbd");
	otlp_utf8_sanitize("\xed\xa0\x80", 3, out); /* surrogate */
	ck_assert_str_eq(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	otlp_utf8_sanitize("\xf0\x9f\x98\x80", 4, out); /* emoji */
	ck_assert_str_eq(out, "\xf0\x9f\x98\x80");
	otlp_utf8_sanitize("ab\0cd", 5, out); /* stops at NUL */
	ck_assert_str_eq(out, "ab");

	ck_assert_str_eq(otlp_unit_of("ntcore_x_seconds"), "s");
	ck_assert_str_eq(otlp_unit_of("ntcore_x_bytes_total"), "By");
	ck_assert_str_eq(otlp_unit_of("ntcore_x_total"), "");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Logs encoding                                                       */
/* ------------------------------------------------------------------ */

START_TEST(encode_all_types)
{
	struct otlp_encoder *enc = otlp_encoder_new(&res_info, 1000);
	struct gq q;
	struct ev_all e;
	const struct gq_entry *ent[1];

	ck_assert_ptr_nonnull(enc);
	ck_assert_int_eq(gq_init(&q, 64 * 1024, 16), 0);
	make_all(&e);
	ck_assert_int_eq(gq_push(&q, &e.hdr, &all_schema, 1700000000123456789ull,
				 1700000000999999999ull, 5), GQ_OK);
	ck_assert_uint_eq(gq_peek(&q, ent, 1, 1 << 20), 1);

	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req =
		encode_decode(enc, ent, 1);

	ck_assert_uint_eq(req->n_resource_logs, 1);
	Opentelemetry__Proto__Logs__V1__ResourceLogs *rl = req->resource_logs[0];

	ck_assert_ptr_nonnull(rl->resource);
	ck_assert_uint_eq(rl->resource->n_attributes, 4);
	ck_assert_str_eq(rl->resource->attributes[0]->key, "service.name");
	ck_assert_str_eq(rl->resource->attributes[0]->value->string_value, "ntcore");
	ck_assert_str_eq(rl->resource->attributes[1]->key, "service.version");
	ck_assert_str_eq(rl->resource->attributes[2]->key, "service.instance.id");
	ck_assert_str_eq(rl->resource->attributes[2]->value->string_value, "host1:77");
	ck_assert_str_eq(rl->resource->attributes[3]->key, "host.name");
	ck_assert_str_eq(rl->resource->attributes[3]->value->string_value, "host1");
	ck_assert_uint_eq(rl->n_scope_logs, 1);
	ck_assert_str_eq(rl->scope_logs[0]->scope->name, "ntcore");
	ck_assert_str_eq(rl->scope_logs[0]->scope->version, "9.9.9");
	ck_assert_uint_eq(rl->scope_logs[0]->n_log_records, 1);

	const LogRecord *lr = rl->scope_logs[0]->log_records[0];

	ck_assert_uint_eq(lr->time_unix_nano, 1700000000123456789ull);
	ck_assert_uint_eq(lr->observed_time_unix_nano, 1700000000999999999ull);
	ck_assert_int_eq(lr->severity_number,
			 OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_INFO);
	ck_assert_str_eq(lr->severity_text, "INFO");
	ck_assert_str_eq(lr->event_name, "test.all");
	ck_assert_str_eq(lr->body->string_value, "test.all");
	ck_assert_uint_eq(lr->n_attributes, 4 + NT_ARRAY_LEN(all_fields));
	ck_assert_uint_eq(lr->dropped_attributes_count, 0);

	ck_attr_str(lr, "ntcore.event.type", "test.all");
	ck_attr_int(lr, "process.pid", 4242);
	ck_attr_int(lr, "thread.id", 4243);
	ck_attr_str(lr, "thread.name", "worker\xef\xbf\xbd");
	ck_attr_int(lr, "u64", -1); /* documented wrap above INT64_MAX */
	ck_attr_int(lr, "s64", -5);
	ck_assert_double_eq(attr(lr, "f64")->double_value, 2.5);
	ck_attr_int(lr, "u8", 200);
	ck_assert_int_eq(attr(lr, "b")->value_case,
			 OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE);
	ck_assert_int_eq(attr(lr, "b")->bool_value, 1);
	ck_attr_int(lr, "u16", 65535);
	ck_attr_int(lr, "u32", 4000000000ll);
	ck_attr_int(lr, "s32", -7);
	ck_attr_str(lr, "devt", "259:3");
	ck_attr_str(lr, "str", "abcdefgh");
	ck_attr_str(lr, "vs", "caf\xc3\xa9!");
	ck_attr_str(lr, "hex", "0xffffffff81000000");
	ck_attr_str(lr, "ip", "192.168.1.7");
	ck_attr_str(lr, "err", "ENOENT");
	ck_attr_str(lr, "err0", "0");
	ck_attr_str(lr, "weird", "04030201");

	opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req, NULL);
	gq_free(&q);
	otlp_encoder_free(enc);
}
END_TEST

struct ev_alert {
	struct nt_alert a;
	char buf[64];
};

static const struct nt_field alert_fields[] = {
	NT_ALERT_FIELDS(struct nt_alert),
};

static const struct nt_schema alert_schema = {
	.name = "alert.test",
	.fields = alert_fields,
	.n_fields = NT_ARRAY_LEN(alert_fields),
	.min_size = offsetof(struct ev_alert, buf),
};

START_TEST(encode_alert_and_bad_vstr)
{
	struct otlp_encoder *enc = otlp_encoder_new(&res_info, 1000);
	struct gq q;
	struct ev_alert e;
	const struct gq_entry *ent[2];

	ck_assert_int_eq(gq_init(&q, 64 * 1024, 16), 0);
	memset(&e, 0, sizeof(e));
	e.a.hdr.type = 3;
	e.a.severity = NT_SEV_CRITICAL;
	e.a.subject_pid = 99;
	memcpy(e.buf, "leak of 4 MiB{\"bytes\":4194304}", 30);
	e.a.message.off = offsetof(struct ev_alert, buf);
	e.a.message.len = 13;
	e.a.evidence.off = offsetof(struct ev_alert, buf) + 13;
	e.a.evidence.len = 17;
	e.a.hdr.size = offsetof(struct ev_alert, buf) + 30;
	ck_assert_int_eq(gq_push(&q, &e.a.hdr, &alert_schema, 1, 2, 3), GQ_OK);
	/* the same alert with its evidence pointing past the record */
	e.a.severity = NT_SEV_WARNING;
	e.a.evidence.len = 1000;
	ck_assert_int_eq(gq_push(&q, &e.a.hdr, &alert_schema, 1, 2, 3), GQ_OK);
	ck_assert_uint_eq(gq_peek(&q, ent, 2, 1 << 20), 2);

	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req =
		encode_decode(enc, ent, 2);
	LogRecord **lrs = req->resource_logs[0]->scope_logs[0]->log_records;

	ck_assert_int_eq(lrs[0]->severity_number,
			 OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_ERROR);
	ck_assert_str_eq(lrs[0]->severity_text, "ERROR");
	ck_assert_str_eq(lrs[0]->body->string_value, "leak of 4 MiB");
	ck_attr_str(lrs[0], "evidence", "{\"bytes\":4194304}");
	ck_attr_int(lrs[0], "subject_pid", 99);
	ck_attr_int(lrs[0], "severity", 2);
	ck_assert_uint_eq(lrs[0]->dropped_attributes_count, 0);

	ck_assert_int_eq(lrs[1]->severity_number,
			 OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_WARN);
	ck_assert_ptr_null(attr(lrs[1], "evidence"));
	ck_assert_uint_eq(lrs[1]->dropped_attributes_count, 1);
	ck_assert_uint_eq(lrs[1]->n_attributes, 4 + 3);

	opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req, NULL);
	gq_free(&q);
	otlp_encoder_free(enc);
}
END_TEST

/* A big batch: every record decodes back in order; the arena is reused. */
START_TEST(encode_batch_order)
{
	struct otlp_encoder *enc = otlp_encoder_new(&res_info, 1000);
	struct gq q;
	struct ev_all e;
	const struct gq_entry **ent = calloc(2000, sizeof(*ent));

	ck_assert_int_eq(gq_init(&q, 4 << 20, 4000), 0);
	for (int round = 0; round < 3; round++) {
		for (uint32_t i = 0; i < 2000; i++) {
			make_all(&e);
			e.hdr.pid = i;
			ck_assert_int_eq(gq_push(&q, &e.hdr, &all_schema, i, i, i), GQ_OK);
		}
		ck_assert_uint_eq(gq_peek(&q, ent, 2000, SIZE_MAX), 2000);

		Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req =
			encode_decode(enc, ent, 2000);
		Opentelemetry__Proto__Logs__V1__ScopeLogs *sl = req->resource_logs[0]->scope_logs[0];

		ck_assert_uint_eq(sl->n_log_records, 2000);
		for (uint32_t i = 0; i < 2000; i++) {
			ck_assert_uint_eq(sl->log_records[i]->time_unix_nano, i);
			ck_attr_int(sl->log_records[i], "process.pid", i);
		}
		opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req, NULL);
		gq_release(&q, 2000);
	}
	free(ent);
	gq_free(&q);
	otlp_encoder_free(enc);
}
END_TEST

START_TEST(resource_extra_attributes)
{
	const char *extra[] = { "deployment.environment=prod", "host.name=override", "k=a=b" };
	struct otlp_resource_info ri = res_info;
	struct gq q;
	struct ev_all e;
	const struct gq_entry *ent[1];

	ri.extra = extra;
	ri.n_extra = 3;
	struct otlp_encoder *enc = otlp_encoder_new(&ri, 1000);

	ck_assert_int_eq(gq_init(&q, 64 * 1024, 16), 0);
	make_all(&e);
	gq_push(&q, &e.hdr, &all_schema, 1, 1, 1);
	gq_peek(&q, ent, 1, 1 << 20);

	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req =
		encode_decode(enc, ent, 1);
	Opentelemetry__Proto__Resource__V1__Resource *r = req->resource_logs[0]->resource;

	ck_assert_uint_eq(r->n_attributes, 6);
	ck_assert_str_eq(r->attributes[3]->key, "host.name");
	ck_assert_str_eq(r->attributes[3]->value->string_value, "override");
	ck_assert_str_eq(r->attributes[4]->key, "deployment.environment");
	ck_assert_str_eq(r->attributes[4]->value->string_value, "prod");
	ck_assert_str_eq(r->attributes[5]->key, "k");
	ck_assert_str_eq(r->attributes[5]->value->string_value, "a=b");
	opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req, NULL);
	gq_free(&q);
	otlp_encoder_free(enc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Metrics encoding                                                    */
/* ------------------------------------------------------------------ */

START_TEST(encode_metrics)
{
	struct otlp_encoder *enc = otlp_encoder_new(&res_info, 1000);
	static const char *const lnames[] = { "reason" };
	static const double bounds[] = { 0.001, 0.01 };
	const struct nt_metric_desc counter = {
		.name = "ntcore_x_events_total", .help = "events", .type = NT_METRIC_COUNTER,
		.n_labels = 1, .label_names = lnames,
	};
	const struct nt_metric_desc gauge = {
		.name = "ntcore_x_queue_bytes", .help = "q", .type = NT_METRIC_GAUGE,
	};
	const struct nt_metric_desc hist = {
		.name = "ntcore_x_latency_seconds", .help = "lat", .type = NT_METRIC_HISTOGRAM,
		.buckets = bounds, .n_buckets = 2,
	};
	const char *lv1[] = { "queue_full" }, *lv2[] = { "shutdown" };
	struct nt_metric_series cs[2] = {
		{ .label_values = lv1, .value = 12 },
		{ .label_values = lv2, .value = 3 },
	};
	struct nt_metric_series gs = { .value = 4096 };
	uint64_t bc[3] = { 5, 0, 2 };
	struct nt_metric_series hs = { .bucket_counts = bc, .count = 7, .sum = 20.5 };
	uint32_t points;
	size_t len;
	uint8_t *buf;

	otlp_metrics_begin(enc, 5000);
	ck_assert_int_eq(otlp_metrics_visit(enc, &counter, cs, 2, 0), 0);
	ck_assert_int_eq(otlp_metrics_visit(enc, &gauge, &gs, 1, 0), 0);
	ck_assert_int_eq(otlp_metrics_visit(enc, &hist, &hs, 1, 0), 0);
	ck_assert_int_eq(otlp_metrics_visit(enc, &gauge, NULL, 0, 0), 0); /* empty: skipped */
	buf = otlp_encode_metrics(enc, &len, &points);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(points, 4);

	Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req =
		opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
			NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(req);
	Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm =
		req->resource_metrics[0]->scope_metrics[0];

	ck_assert_uint_eq(req->resource_metrics[0]->resource->n_attributes, 4);
	ck_assert_uint_eq(sm->n_metrics, 3);

	Opentelemetry__Proto__Metrics__V1__Metric *m = sm->metrics[0];

	ck_assert_str_eq(m->name, "ntcore_x_events_total");
	ck_assert_str_eq(m->description, "events");
	ck_assert_int_eq(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM);
	ck_assert(m->sum->is_monotonic);
	ck_assert_int_eq(m->sum->aggregation_temporality,
			 OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE);
	ck_assert_uint_eq(m->sum->n_data_points, 2);
	ck_assert_double_eq(m->sum->data_points[0]->as_double, 12);
	ck_assert_uint_eq(m->sum->data_points[0]->start_time_unix_nano, 1000);
	ck_assert_uint_eq(m->sum->data_points[0]->time_unix_nano, 5000);
	ck_assert_str_eq(m->sum->data_points[0]->attributes[0]->key, "reason");
	ck_assert_str_eq(m->sum->data_points[0]->attributes[0]->value->string_value, "queue_full");
	ck_assert_str_eq(m->sum->data_points[1]->attributes[0]->value->string_value, "shutdown");
	ck_assert_double_eq(m->sum->data_points[1]->as_double, 3);

	m = sm->metrics[1];
	ck_assert_int_eq(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
	ck_assert_str_eq(m->unit, "By");
	ck_assert_double_eq(m->gauge->data_points[0]->as_double, 4096);
	ck_assert_uint_eq(m->gauge->data_points[0]->n_attributes, 0);

	m = sm->metrics[2];
	ck_assert_int_eq(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM);
	ck_assert_str_eq(m->unit, "s");
	Opentelemetry__Proto__Metrics__V1__HistogramDataPoint *hp = m->histogram->data_points[0];

	ck_assert_uint_eq(hp->count, 7);
	ck_assert_double_eq(hp->sum, 20.5);
	ck_assert_uint_eq(hp->n_explicit_bounds, 2);
	ck_assert_double_eq(hp->explicit_bounds[1], 0.01);
	ck_assert_uint_eq(hp->n_bucket_counts, 3);
	ck_assert_uint_eq(hp->bucket_counts[0], 5);
	ck_assert_uint_eq(hp->bucket_counts[1], 0);
	ck_assert_uint_eq(hp->bucket_counts[2], 2);
	opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(req, NULL);

	/* a second round starts from scratch */
	otlp_metrics_begin(enc, 6000);
	otlp_metrics_visit(enc, &gauge, &gs, 1, 0);
	buf = otlp_encode_metrics(enc, &len, &points);
	ck_assert_uint_eq(points, 1);
	free(buf);
	otlp_encoder_free(enc);
}
END_TEST

static Suite *grpc_suite(void)
{
	Suite *s = suite_create("grpc");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, queue_count_bound);
	tcase_add_test(tc, queue_byte_bound_and_too_large);
	tcase_add_test(tc, queue_wraps_fifo);
	tcase_add_test(tc, queue_peek_byte_cap);
	tcase_add_test(tc, endpoint_parse);
	tcase_add_test(tc, codes_and_backoff);
	tcase_add_test(tc, utf8);
	tcase_add_test(tc, encode_all_types);
	tcase_add_test(tc, encode_alert_and_bad_vstr);
	tcase_add_test(tc, encode_batch_order);
	tcase_add_test(tc, resource_extra_attributes);
	tcase_add_test(tc, encode_metrics);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(grpc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
