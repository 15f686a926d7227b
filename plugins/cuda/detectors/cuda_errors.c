/* SPDX-License-Identifier: MIT */
/*
 * cuda_errors: every probed CUDA call that returned an error (cuda.error),
 * by function and error name. The first occurrence of each distinct
 * (function, error) is reported at once with its stack; repeats within
 * `interval_ms` are counted and summed up in one later alert; at most
 * `max_alerts` alerts per interval in all.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/cfg.h"
#include "ntcore/plugin.h"

#include "../cuda.h"
#include "cudaev.h"
#include "cuerr.h"
#include "det_alert.h"
#include "det_util.h"
#include "pyframes.h"

struct er_cfg {
	int64_t interval_ms;
	int64_t max_alerts;
	int64_t max_keys;
	int64_t stack_frames;
	struct nt_strlist ignore;
};

static const struct nt_cfg_key er_keys[] = {
	NT_KEY_INT(struct er_cfg, interval_ms, 10000, 100, 86400000,
		"repeats of one (function, error) are summed up once per interval"),
	NT_KEY_INT(struct er_cfg, max_alerts, 20, 1, 100000,
		"most alerts per interval, all errors together"),
	NT_KEY_INT(struct er_cfg, max_keys, 1024, 16, 1000000,
		"distinct (function, error) pairs kept"),
	NT_KEY_INT(struct er_cfg, stack_frames, 24, 1, 128,
		"frames of the first stack in the evidence"),
	NT_KEY_STRLIST(struct er_cfg, ignore,
		"[\"cudaErrorNotReady\", \"CUDA_ERROR_NOT_READY\", "
		"\"cudaErrorPeerAccessAlreadyEnabled\", "
		"\"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED\"]",
		"error names that are counted but never alerted (not failures)"),
};

static const struct nt_schema er_alert_schema = {
	.name = "alert.cuda_errors",
	.desc = "a CUDA API call returned an error",
	.fields = det_alert_fields,
	.n_fields = 4,
	.min_size = sizeof(struct nt_alert),
};

static const char *const lbl_fe[] = { "function", "error" };
static const struct nt_metric_desc m_err_desc = {
	"ntcore_cuda_errors_total", "CUDA calls that returned an error",
	NT_METRIC_COUNTER, 2, lbl_fe, NULL, 0, 0 };
static const struct nt_metric_desc m_supp_desc = {
	"ntcore_cuda_errors_suppressed_total",
	"errors not alerted one by one (rate limit), summed up later",
	NT_METRIC_COUNTER, 0, NULL, NULL, 0, 0 };

struct er_key {
	char func[64];
	char err[64];
	uint64_t count;
	uint64_t pending;       /* since the last alert */
	uint64_t first_ts, last_ts, last_alert_ns;
	uint32_t first_pid, first_tid, last_pid, alerts;
	int32_t code, device;
	uint32_t layer;
	uint64_t size;
	char comm[NT_COMM_LEN + 1];
	char *stack;            /* the first stack seen */
};

struct er {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct er_cfg *cfg;
	int alert_type;
	struct cuev_cache cc;
	struct pyframes py; /* lent Python stacks (pyframes.h) */
	struct er_key *keys;
	size_t nk, ck;
	uint64_t window_start_ns;
	uint64_t alerts_in_window;
	uint64_t dropped_keys;
	struct nt_metric *m_err, *m_supp;
};

static bool ignored(const struct er_cfg *cfg, const char *err)
{
	for (uint32_t i = 0; i < cfg->ignore.n; i++)
		if (strcmp(cfg->ignore.v[i], err) == 0)
			return true;
	return false;
}

static struct er_key *key_get(struct er *r, const char *func, const char *err)
{
	struct er_key *k;

	for (size_t i = 0; i < r->nk; i++)
		if (strcmp(r->keys[i].func, func) == 0 &&
		    strcmp(r->keys[i].err, err) == 0)
			return &r->keys[i];
	if (r->nk >= (size_t)r->cfg->max_keys)
		return NULL;
	if (r->nk == r->ck) {
		size_t nc = r->ck ? r->ck * 2 : 16;
		struct er_key *n = realloc(r->keys, nc * sizeof(*n));

		if (!n)
			return NULL;
		r->keys = n;
		r->ck = nc;
	}
	k = &r->keys[r->nk++];
	memset(k, 0, sizeof(*k));
	snprintf(k->func, sizeof(k->func), "%s", func);
	snprintf(k->err, sizeof(k->err), "%s", err);
	return k;
}

/* May another alert go out now? (global limit per interval) */
static bool er_budget(struct er *r, uint64_t now)
{
	uint64_t iv = (uint64_t)r->cfg->interval_ms * 1000000ULL;

	if (now - r->window_start_ns >= iv) {
		r->window_start_ns = now;
		r->alerts_in_window = 0;
	}
	if (r->alerts_in_window >= (uint64_t)r->cfg->max_alerts)
		return false;
	r->alerts_in_window++;
	return true;
}

static void er_alert(struct er *r, struct er_key *k, uint64_t now)
{
	struct nt_sb ev, msg;
	char fn[256], sfn[256], pyfn[256];
	const char *hint = cuerr_hint(k->err);
	uint32_t sev = cuerr_severe(k->err) ? NT_SEV_CRITICAL : NT_SEV_WARNING;
	struct det_subject subj = { .pid = k->alerts ? k->last_pid : k->first_pid,
				    .tid = k->alerts ? 0 : k->first_tid,
				    .comm = k->comm };
	uint64_t n = k->alerts ? k->pending : 1;

	stack_user_frame(k->stack, fn, sizeof(fn));
	stack_py_frame(k->stack, pyfn, sizeof(pyfn));
	nt_sb_init(&ev, 0);
	nt_sb_init(&msg, 0);
	nt_sb_puts(&ev, "{\"function\":");
	sb_json_str(&ev, k->func);
	nt_sb_puts(&ev, ",\"error\":");
	sb_json_str(&ev, k->err);
	nt_sb_printf(&ev, ",\"code\":%d,\"layer\":\"%s\",\"count\":%" PRIu64
		       ",\"new_since_last_alert\":%" PRIu64 ",\"first_pid\":%u"
		       ",\"first_tid\":%u,\"device\":%d,\"size\":%" PRIu64
		       ",\"first_seen_s_ago\":%.3f,\"caller\":",
		  k->code, k->layer == NT_CUDA_LAYER_DRIVER ? "driver" : "runtime",
		  k->count, n, k->first_pid, k->first_tid, k->device, k->size,
		  now >= k->first_ts ? (double)(now - k->first_ts) / 1e9 : 0.0);
	sb_json_str(&ev, fn);
	nt_sb_puts(&ev, ",\"python_caller\":");
	sb_json_str(&ev, pyfn);
	nt_sb_puts(&ev, ",\"first_stack\":");
	sb_json_stack(&ev, k->stack, (unsigned)r->cfg->stack_frames);
	nt_sb_puts(&ev, ",\"hint\":");
	sb_json_str(&ev, hint);
	nt_sb_putc(&ev, '}');
	if (k->alerts == 0)
		nt_sb_printf(&msg, "%s returned %s in pid %u (%s), called from %s: %s",
			  k->func, k->err, k->first_pid, k->comm,
			  pyfn[0] ? pyfn : fn[0] ? short_fn(fn, sfn, sizeof(sfn)) : "(no stack)",
			  hint);
	else
		nt_sb_printf(&msg, "%s returned %s %" PRIu64 " more times (%" PRIu64
				" in all) since the last report; first called from %s",
			  k->func, k->err, n, k->count,
			  pyfn[0] ? pyfn : fn[0] ? short_fn(fn, sfn, sizeof(sfn)) : "(no stack)");
	det_alert_publish(r->host, r->inst, (uint32_t)r->alert_type, &subj, sev,
			  nt_sb_str(&msg), nt_sb_str(&ev));
	r->host->log(r->inst, sev == NT_SEV_CRITICAL ? NT_LOG_WARN : NT_LOG_INFO,
		     "%s", nt_sb_str(&msg));
	k->alerts++;
	k->pending = 0;
	k->last_alert_ns = now;
	nt_sb_fini(&ev);
	nt_sb_fini(&msg);
}

static void er_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct er *r = state;
	struct cuev e;
	char func[64], errb[64];
	const char *err;
	const char *lv[2];
	struct er_key *k;
	uint64_t now;

	if (pyf_is(schema)) {
		pyf_note(&r->py, ev, schema);
		return;
	}
	if (!cuev_decode(&r->cc, ev, schema, &e) || e.type != CUEV_ERROR)
		return;
	pyf_merge(&r->py, &e);
	cuev_api_name(&e, func, sizeof(func));
	if (e.error_name.len)
		err = cuev_str_copy(e.error_name, errb, sizeof(errb));
	else
		err = nt_cuda_error_format((int)e.layer, e.ret, errb, sizeof(errb));
	lv[0] = func;
	lv[1] = err;
	r->host->metric_add(r->m_err, lv, 1);
	if (ignored(r->cfg, err))
		return;
	k = key_get(r, func, err);
	if (!k) {
		r->dropped_keys++;
		return;
	}
	now = nt_clock_mono_ns();
	k->count++;
	k->last_ts = e.ts;
	k->last_pid = e.pid;
	if (k->count == 1) {
		k->first_ts = e.ts;
		k->first_pid = e.pid;
		k->first_tid = e.tid;
		k->code = e.ret;
		k->layer = e.layer;
		k->device = e.device;
		k->size = e.size;
		snprintf(k->comm, sizeof(k->comm), "%s", e.comm);
		if (e.stack.len) {
			k->stack = malloc(e.stack.len + 1);
			if (k->stack)
				cuev_str_copy(e.stack, k->stack, e.stack.len + 1);
		}
		if (er_budget(r, now)) {
			er_alert(r, k, now);
			return;
		}
	}
	k->pending++;
	r->host->metric_add(r->m_supp, NULL, 1);
}

/* Timer: sum up the repeats whose interval has passed. */
static void er_tick(struct er *r)
{
	uint64_t now = nt_clock_mono_ns();
	uint64_t iv = (uint64_t)r->cfg->interval_ms * 1000000ULL;

	for (size_t i = 0; i < r->nk; i++) {
		struct er_key *k = &r->keys[i];

		if (!k->pending || now - k->last_alert_ns < iv)
			continue;
		if (!er_budget(r, now))
			break;
		er_alert(r, k, now);
	}
}

static int er_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	struct er *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->inst = inst;
	r->host = host;
	r->cfg = config;
	r->alert_type = host->register_schema(inst, &er_alert_schema);
	if (r->alert_type < 0) {
		err = r->alert_type;
		host->log(inst, NT_LOG_ERROR, "cannot register alert.cuda_errors: %d", err);
		goto fail;
	}
	pyf_init(&r->py);
	if ((err = host->subscribe(inst, "cuda.error")) < 0 ||
	    (err = host->subscribe(inst, PYF_SCHEMA)) < 0)
		goto fail;
	r->m_err = host->metric_register(inst, &m_err_desc);
	r->m_supp = host->metric_register(inst, &m_supp_desc);
	if (!r->m_err || !r->m_supp) {
		err = -ENOMEM;
		goto fail;
	}
	*state = r;
	return 0;
fail:
	pyf_fini(&r->py);
	free(r);
	return err;
}

static int er_attach(void *state)
{
	struct er *r = state;
	uint64_t iv = (uint64_t)r->cfg->interval_ms / 4;

	return r->host->add_timer(r->inst, iv < 25 ? 25 : iv, 1);
}

static int er_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)token;
	(void)budget;
	er_tick(state);
	return 0;
}

static void er_flush(void *state)
{
	struct er *r = state;
	uint64_t now = nt_clock_mono_ns();

	/* shutdown: the pending repeats, regardless of the interval */
	for (size_t i = 0; i < r->nk; i++)
		if (r->keys[i].pending)
			er_alert(r, &r->keys[i], now);
}

static void er_detach(void *state)
{
	(void)state;
}

static void er_fini(void *state)
{
	struct er *r = state;

	if (!r)
		return;
	for (size_t i = 0; i < r->nk; i++)
		free(r->keys[i].stack);
	free(r->keys);
	pyf_fini(&r->py);
	free(r);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda_errors",
	.kind = NT_KIND_DETECTOR,
	.n_config = NT_ARRAY_LEN(er_keys),
	.description = "CUDA API errors by function and error name, rate-limited, with the first stack of each",
	.version = "0.1.0",
	.config = er_keys,
	.config_size = sizeof(struct er_cfg),
	.init = er_init,
	.attach = er_attach,
	.poll = er_poll,
	.detach = er_detach,
	.fini = er_fini,
	.consume = er_consume,
	.flush = er_flush,
};
