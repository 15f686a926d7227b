/* SPDX-License-Identifier: MIT */
/*
 * Queued event records -> a serialized ExportLogsServiceRequest.
 *
 * Mapping (docs/grpc.md has the table): time_unix_nano = event time (epoch
 * ns), observed_time_unix_nano = when the sink saw it, event_name = body
 * = schema name (alerts: body = message, reports: body = text), severity
 * INFO (alerts: by severity), attributes ntcore.event.type, process.pid,
 * thread.id, thread.name (comm), then one per schema field, by field name.
 * Keys and schema strings point at the publishing plugin's static schema
 * data; event strings are copied into the arena.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/ident.h"
#include "otlp_pb.h"

static const LogRecord lr_init = OPENTELEMETRY__PROTO__LOGS__V1__LOG_RECORD__INIT;

size_t otlp_estimate(const struct gq_entry *e)
{
	uint32_t nf = e->schema ? e->schema->n_fields : 0;

	/* strings may grow 3x when sanitized; each attribute costs key, tags and
	 * lengths; the fixed part is the header attributes, times and body */
	return (size_t)e->rec_size * 3 + (size_t)nf * 40 + 256;
}

static const struct nt_field *field_named(const struct nt_schema *s,
					  const char *name, uint16_t type)
{
	for (uint32_t i = 0; i < s->n_fields; i++)
		if (s->fields[i].type == type && strcmp(s->fields[i].name, name) == 0)
			return &s->fields[i];
	return NULL;
}

static int severity_of(const struct nt_schema *s, const struct nt_event_hdr *ev,
		       const char **text)
{
	const struct nt_field *f;
	uint32_t sev;

	*text = "INFO";
	if (strncmp(s->name, "alert.", 6) != 0)
		return OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_INFO;
	f = field_named(s, "severity", NT_F_U32);
	if (!f || (uint32_t)f->offset + 4 > ev->size)
		return OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_WARN;
	memcpy(&sev, (const char *)ev + f->offset, sizeof(sev));
	switch (sev) {
	case NT_SEV_INFO:
		return OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_INFO;
	case NT_SEV_WARNING:
		*text = "WARN";
		return OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_WARN;
	default:
		*text = "ERROR";
		return OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_ERROR;
	}
}

#define N_FIXED_ATTRS 4

/* The four attributes every record has, in kvs/vals/ptrs[0..3]. */
static void fixed_attrs(struct otlp_arena *a, const struct nt_event_hdr *ev,
			const char *type_name, KeyValue *kvs, AnyValue *vals,
			KeyValue **ptrs)
{
	static const char *const fixed_keys[N_FIXED_ATTRS] = {
		"ntcore.event.type", "process.pid", "thread.id", "thread.name",
	};

	for (size_t i = 0; i < N_FIXED_ATTRS; i++) {
		kvs[i] = kv_init;
		kvs[i].key = (char *)fixed_keys[i];
		vals[i] = any_init;
		kvs[i].value = &vals[i];
		ptrs[i] = &kvs[i];
	}
	vals[0].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	vals[0].string_value = (char *)type_name;
	otlp_set_int(&vals[1], ev->pid);
	otlp_set_int(&vals[2], ev->tid);
	otlp_set_string(a, &vals[3], ev->comm, strnlen(ev->comm, NT_COMM_LEN));
}

/* One attribute per readable schema field, after the fixed ones; the
 * unreadable ones are counted in dropped_attributes_count. */
static void field_attrs(struct otlp_arena *a, const struct nt_event_hdr *ev,
			const struct nt_schema *s, LogRecord *lr, KeyValue *kvs,
			AnyValue *vals, KeyValue **ptrs)
{
	size_t n = N_FIXED_ATTRS;

	for (uint32_t i = 0; s && i < s->n_fields; i++) {
		const struct nt_field *f = &s->fields[i];

		kvs[n] = kv_init;
		vals[n] = any_init;
		if (!otlp_field_value(a, ev, f, &vals[n])) {
			lr->dropped_attributes_count++;
			continue;
		}
		const char *semconv = nt_otel_field_key(s->name, f->name);

		kvs[n].key = (char *)(semconv ? semconv : f->name);
		kvs[n].value = &vals[n];
		ptrs[n] = &kvs[n];
		n++;
	}
	lr->n_attributes = n;
	lr->attributes = ptrs;
}

/* The process's container and pod under OpenTelemetry's keys (issue 21),
 * after the other attributes: from the core's identity cache
 * (host->identity, safe on this thread; the sink looked the pid up when it
 * queued the record, which keeps a process that exited meanwhile in the
 * cache). */
static void identity_attrs(struct otlp_encoder *enc, const struct gq_entry *e,
			   LogRecord *lr, KeyValue *kvs, AnyValue *vals)
{
	struct nt_ident_attr at[NT_IDENT_ATTRS_MAX];
	struct nt_identity id;
	uint32_t pid = gq_record(e)->pid;
	size_t k = 0, n = lr->n_attributes;

	if (pid && enc->ident && enc->ident(enc->ident_ctx, pid, &id) == 0)
		k = nt_ident_attrs(&id, at);
	for (size_t i = 0; i < k; i++, n++) {
		kvs[n] = kv_init;
		vals[n] = any_init;
		kvs[n].key = (char *)at[i].key;
		otlp_set_string(&enc->arena, &vals[n], at[i].value,
				strlen(at[i].value));
		kvs[n].value = &vals[n];
		lr->attributes[n] = &kvs[n];
	}
	lr->n_attributes = n;
}

/* The body: an alert's message, a report's text, else the type name. */
static void set_body(struct otlp_arena *a, const struct nt_event_hdr *ev,
		     const struct nt_schema *s, const char *type_name,
		     AnyValue *body)
{
	const struct nt_field *bf = NULL;

	*body = any_init;
	if (s && strncmp(s->name, "alert.", 6) == 0)
		bf = field_named(s, "message", NT_F_VSTR);
	else if (s && otlp_has_suffix(s->name, ".report"))
		bf = field_named(s, "text", NT_F_VSTR);
	if (bf) {
		size_t len;
		const char *txt = otlp_vstr_get(ev, bf, &len);

		if (txt)
			otlp_set_string(a, body, txt, len);
	}
	if (body->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE__NOT_SET) {
		body->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		body->string_value = (char *)type_name;
	}
}

static LogRecord *log_record(struct otlp_encoder *enc, const struct gq_entry *e)
{
	struct otlp_arena *a = &enc->arena;
	const struct nt_event_hdr *ev = gq_record(e);
	const struct nt_schema *s = e->schema;
	uint32_t nf = s ? s->n_fields : 0;
	size_t nattr = N_FIXED_ATTRS + nf + NT_IDENT_ATTRS_MAX;
	LogRecord *lr = otlp_alloc(a, sizeof(*lr));
	KeyValue *kvs = otlp_alloc(a, nattr * sizeof(*kvs));
	AnyValue *vals = otlp_alloc(a, (nattr + 1) * sizeof(*vals));
	KeyValue **ptrs = otlp_alloc(a, nattr * sizeof(*ptrs));
	const char *type_name = s ? s->name : "unknown";
	const char *sev_text;

	if (!lr || !kvs || !vals || !ptrs)
		return NULL;
	*lr = lr_init;
	lr->time_unix_nano = e->wall_ns;
	lr->observed_time_unix_nano = e->observed_ns;
	lr->event_name = (char *)type_name;
	if (s) {
		lr->severity_number = severity_of(s, ev, &sev_text);
		lr->severity_text = (char *)sev_text;
	}
	fixed_attrs(a, ev, type_name, kvs, vals, ptrs);
	field_attrs(a, ev, s, lr, kvs, vals, ptrs);
	identity_attrs(enc, e, lr, kvs, vals);
	set_body(a, ev, s, type_name, &vals[nattr]);
	lr->body = &vals[nattr];
	return lr;
}

/*
 * The three envelope levels (ExportLogsServiceRequest.resource_logs = 1,
 * ResourceLogs.resource = 1 / scope_logs = 2, ScopeLogs.scope = 1 /
 * log_records = 2) are written here as tag + length, around the resource
 * and scope serialized once and each LogRecord serialized by protobuf-c.
 * Packing the whole tree with protobuf-c instead recomputes the size of
 * every nested message once per level above it (its pack asks each
 * submessage for its size first): the envelope by hand halves the encoding
 * cost of a batch. The bytes are the same; the unit test decodes them with
 * protobuf-c.
 */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* tag byte of a length-delimited field 1..15 */
#define LEN_TAG(field) ((uint8_t)(((field) << 3) | 2))

static int envelope_prepare(struct otlp_encoder *enc)
{
	static const Resource res_init = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	Resource r = res_init;
	size_t rs, ss;

	if (enc->envelope)
		return 0;
	r.n_attributes = enc->n_res_attrs;
	r.attributes = enc->res_attrs;
	rs = opentelemetry__proto__resource__v1__resource__get_packed_size(&r);
	ss = opentelemetry__proto__common__v1__instrumentation_scope__get_packed_size(&enc->scope);
	/* resource field, then the scope field that opens each ScopeLogs */
	enc->res_len = 1 + varint_len(rs) + rs;
	enc->scope_len = 1 + varint_len(ss) + ss;
	enc->envelope = malloc(enc->res_len + enc->scope_len);
	if (!enc->envelope)
		return -ENOMEM;
	uint8_t *p = enc->envelope;

	*p++ = LEN_TAG(1);
	p = put_varint(p, rs);
	p += opentelemetry__proto__resource__v1__resource__pack(&r, p);
	*p++ = LEN_TAG(1);
	p = put_varint(p, ss);
	opentelemetry__proto__common__v1__instrumentation_scope__pack(&enc->scope, p);
	return 0;
}

uint8_t *otlp_encode_logs(struct otlp_encoder *enc,
			  const struct gq_entry *const *entries, uint32_t n,
			  size_t *len)
{
	struct otlp_arena *a = &enc->arena;
	LogRecord **recs;
	size_t *sizes;
	uint8_t *buf = NULL, *p;
	size_t sl_body, rl_body, total;

	if (envelope_prepare(enc) < 0)
		return NULL;
	otlp_arena_reset(a);
	recs = otlp_alloc(a, (n ? n : 1) * sizeof(*recs));
	sizes = otlp_alloc(a, (n ? n : 1) * sizeof(*sizes));
	if (!recs || !sizes)
		goto out;
	sl_body = enc->scope_len;
	for (uint32_t i = 0; i < n; i++) {
		recs[i] = log_record(enc, entries[i]);
		if (!recs[i])
			goto out;
		sizes[i] = opentelemetry__proto__logs__v1__log_record__get_packed_size(recs[i]);
		sl_body += 1 + varint_len(sizes[i]) + sizes[i];
	}
	rl_body = enc->res_len + 1 + varint_len(sl_body) + sl_body;
	total = 1 + varint_len(rl_body) + rl_body;
	buf = malloc(total);
	if (!buf)
		goto out;
	p = buf;
	*p++ = LEN_TAG(1); /* ExportLogsServiceRequest.resource_logs */
	p = put_varint(p, rl_body);
	memcpy(p, enc->envelope, enc->res_len); /* ResourceLogs.resource */
	p += enc->res_len;
	*p++ = LEN_TAG(2); /* ResourceLogs.scope_logs */
	p = put_varint(p, sl_body);
	memcpy(p, enc->envelope + enc->res_len, enc->scope_len); /* ScopeLogs.scope */
	p += enc->scope_len;
	for (uint32_t i = 0; i < n; i++) {
		*p++ = LEN_TAG(2); /* ScopeLogs.log_records */
		p = put_varint(p, sizes[i]);
		p += opentelemetry__proto__logs__v1__log_record__pack(recs[i], p);
	}
	*len = (size_t)(p - buf);
out:
	otlp_arena_reset(a);
	return buf;
}

