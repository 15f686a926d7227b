/* SPDX-License-Identifier: MIT */
/*
 * The OTLP encoder's lasting part: the resource (service.name,
 * service.version, service.instance.id, host.name and the configured
 * extra attributes, a key given twice keeping the later value) and the
 * instrumentation scope, made once in their own arena.
 */
#include <stdlib.h>
#include <string.h>

#include "otlp_pb.h"

static KeyValue *res_kv(struct otlp_encoder *enc, const char *key,
			size_t klen, const char *val, size_t vlen)
{
	KeyValue *kv = otlp_alloc(&enc->res_arena, sizeof(*kv));
	AnyValue *v = otlp_alloc(&enc->res_arena, sizeof(*v));

	if (!kv || !v)
		return NULL;
	*kv = kv_init;
	*v = any_init;
	kv->key = otlp_arena_utf8(&enc->res_arena, key, klen);
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = otlp_arena_utf8(&enc->res_arena, val, vlen);
	if (!kv->key || !v->string_value)
		return NULL;
	kv->value = v;
	return kv;
}

struct otlp_encoder *otlp_encoder_new(const struct otlp_resource_info *res,
				      uint64_t start_wall_ns)
{
	struct otlp_encoder *enc = calloc(1, sizeof(*enc));
	static const Scope scope_init =
		OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	const char *fixed[][2] = {
		{ "service.name", res->service_name },
		{ "service.version", res->service_version },
		{ "service.instance.id", res->service_instance_id },
		{ "host.name", res->host_name },
	};
	size_t nmax = 4 + res->n_extra;

	if (!enc)
		return NULL;
	enc->res_arena.chunk_size = 16 * 1024;
	enc->start_wall_ns = start_wall_ns;
	enc->res_attrs = otlp_alloc(&enc->res_arena, nmax * sizeof(KeyValue *));
	if (!enc->res_attrs)
		goto fail;
	for (size_t i = 0; i < 4; i++) {
		if (!fixed[i][1] || !*fixed[i][1])
			continue;
		enc->res_attrs[enc->n_res_attrs] =
			res_kv(enc, fixed[i][0], strlen(fixed[i][0]), fixed[i][1],
			       strlen(fixed[i][1]));
		if (!enc->res_attrs[enc->n_res_attrs++])
			goto fail;
	}
	for (uint32_t i = 0; i < res->n_extra; i++) {
		const char *eq = strchr(res->extra[i], '=');
		size_t klen;

		if (!eq)
			continue;
		klen = (size_t)(eq - res->extra[i]);
		/* a key given twice: the later one wins */
		size_t j;

		for (j = 0; j < enc->n_res_attrs; j++)
			if (strlen(enc->res_attrs[j]->key) == klen &&
			    memcmp(enc->res_attrs[j]->key, res->extra[i], klen) == 0)
				break;
		KeyValue *kv = res_kv(enc, res->extra[i], klen, eq + 1, strlen(eq + 1));

		if (!kv)
			goto fail;
		enc->res_attrs[j] = kv;
		if (j == enc->n_res_attrs)
			enc->n_res_attrs++;
	}
	enc->scope = scope_init;
	enc->scope.name = (char *)"ntcore";
	enc->scope.version = otlp_strdup(&enc->res_arena, res->service_version,
					 strlen(res->service_version));
	if (!enc->scope.version)
		goto fail;
	return enc;
fail:
	otlp_encoder_free(enc);
	return NULL;
}

void otlp_encoder_free(struct otlp_encoder *enc)
{
	if (!enc)
		return;
	otlp_arena_free(&enc->arena);
	otlp_arena_free(&enc->res_arena);
	free(enc->metrics);
	free(enc->envelope);
	free(enc);
}

Resource *otlp_make_resource(struct otlp_encoder *enc)
{
	static const Resource res_init = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	Resource *r = otlp_alloc(&enc->arena, sizeof(*r));

	if (!r)
		return NULL;
	*r = res_init;
	r->n_attributes = enc->n_res_attrs;
	r->attributes = enc->res_attrs;
	return r;
}

void otlp_encoder_set_ident(struct otlp_encoder *enc, otlp_ident_fn fn, void *ctx)
{
	enc->ident = fn;
	enc->ident_ctx = ctx;
}
