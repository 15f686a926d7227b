/* SPDX-License-Identifier: MIT */
/* The host vtable: what plugins may ask of the core (include/ntcore/plugin.h). */
#include "host.h"

#include <errno.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <bpf/btf.h>

#include "btfshare.h"
#include "log.h"
#include "sinks.h"

static void host_log(struct nt_instance *inst, int level, const char *fmt, ...)
{
	va_list ap;

	if (level > inst->log_level)
		return;
	va_start(ap, fmt);
	nt_daemon_vlog(inst->d, level, inst->prefix, fmt, ap);
	va_end(ap);
}

/* Thread-safe: the level is set before any plugin runs, the start-up hold
 * takes its own lock, and nt_vlog writes each line with one fputs (stdio
 * locks the stream). */
static void host_vlog(struct nt_instance *inst, int level, const char *fmt,
		      va_list ap)
{
	if (level > inst->log_level)
		return;
	nt_daemon_vlog(inst->d, level, inst->prefix, fmt, ap);
}

bool nt_on_loop_thread(const struct nt_daemon *d)
{
	return !d->loop_thread_set || pthread_equal(pthread_self(), d->loop_thread);
}

/* The loop thread's host functions, called from elsewhere (a sink's
 * consume, poll or on_signal, which run on the sink's own thread): refused,
 * and said once per instance. */
static bool loop_only(struct nt_instance *inst, const char *fn)
{
	if (nt_on_loop_thread(inst->d))
		return true;
	if (!__atomic_exchange_n(&inst->warned_thread, true, __ATOMIC_RELAXED))
		nt_daemon_log(inst->d, NT_LOG_ERROR, inst->prefix,
			      "host->%s called off the loop thread (a sink's ops run on the sink's own thread): refused",
			      fn);
	return false;
}

static const char *host_instance_name(const struct nt_instance *inst)
{
	return inst->name;
}

static int host_config_error(struct nt_instance *inst, const char *key,
			     const char *fmt, ...)
{
	const struct nt_config *c = &inst->d->cfg;
	int line = inst->cfg ? nt_config_key_line(inst->cfg->group, key) : 0;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (key)
		nt_config_error(c, line, inst->name, "%s: %s", key, msg);
	else
		nt_config_error(c, line, inst->name, "%s", msg);
	inst->config_failed = true;
	return -EINVAL;
}

static int host_register_schema(struct nt_instance *inst,
				const struct nt_schema *schema)
{
	const char *why = NULL;
	if (!loop_only(inst, "register_schema"))
		return -EPERM;
	int id = nt_bus_register(&inst->d->bus, inst, schema, &why);

	if (id < 0)
		host_log(inst, NT_LOG_ERROR, "cannot register event type '%s': %s",
			 schema && schema->name ? schema->name : "?", why);
	return id;
}

static int host_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	if (!loop_only(inst, "publish"))
		return -EPERM;
	inst->events_in++;
	return nt_bus_publish(&inst->d->bus, ev);
}

static int host_subscribe(struct nt_instance *inst, const char *pattern)
{
	if (!loop_only(inst, "subscribe"))
		return -EPERM;
	return nt_bus_subscribe(&inst->d->bus, inst, pattern);
}

static const struct nt_schema *host_schema_of(const struct nt_instance *inst,
					      uint32_t type)
{
	return nt_bus_schema(&inst->d->bus, type);
}

static struct nt_metric *host_metric_register(struct nt_instance *inst,
					      const struct nt_metric_desc *desc)
{
	const char *why = NULL;
	struct nt_metric *m = nt_registry_register(&inst->d->reg, desc, &why);

	if (!m)
		host_log(inst, NT_LOG_ERROR, "cannot register metric '%s': %s",
			 desc && desc->name ? desc->name : "?", why);
	return m;
}

static int host_metrics_visit(struct nt_instance *inst, nt_metric_visit_fn fn,
			      void *arg)
{
	/* Self-metrics are synced by the loop thread every second. */
	return nt_registry_visit(&inst->d->reg, fn, arg);
}

static void on_watch_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nt_watch *watch = w->data;

	(void)loop;
	(void)revents;
	if (!nt_sink_post_poll(watch->inst, watch))
		nt_instance_poll(watch->inst, watch->token);
}

static void on_watch_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct nt_watch *watch = w->data;

	(void)loop;
	(void)revents;
	if (!nt_sink_post_poll(watch->inst, watch))
		nt_instance_poll(watch->inst, watch->token);
}

static struct nt_watch *watch_new(struct nt_instance *inst, uint32_t token)
{
	struct nt_watch **grown = realloc(inst->watches,
					  (inst->n_watches + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	inst->watches = grown;
	struct nt_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->inst = inst;
	w->token = token;
	inst->watches[inst->n_watches++] = w;
	return w;
}

static int host_watch_fd(struct nt_instance *inst, int fd, uint32_t token)
{
	struct nt_watch *w;

	if (fd < 0)
		return -EBADF;
	if (!loop_only(inst, "watch_fd"))
		return -EPERM;
	if (!(w = watch_new(inst, token)))
		return -ENOMEM;
	ev_io_init(&w->io, on_watch_io, fd, EV_READ);
	w->io.data = w;
	ev_io_start(inst->d->loop, &w->io);
	return 0;
}

static int host_add_timer(struct nt_instance *inst, uint64_t interval_ms,
			  uint32_t token)
{
	struct nt_watch *w;

	if (!interval_ms)
		return -EINVAL;
	if (!loop_only(inst, "add_timer"))
		return -EPERM;
	if (!(w = watch_new(inst, token)))
		return -ENOMEM;
	w->is_timer = true;
	double secs = (double)interval_ms / 1000.0;
	ev_timer_init(&w->timer, on_watch_timer, secs, secs);
	w->timer.data = w;
	ev_timer_start(inst->d->loop, &w->timer);
	return 0;
}

void nt_instance_unwatch(struct nt_instance *inst)
{
	for (size_t i = 0; i < inst->n_watches; i++) {
		struct nt_watch *w = inst->watches[i];
		if (w->is_timer)
			ev_timer_stop(inst->d->loop, &w->timer);
		else
			ev_io_stop(inst->d->loop, &w->io);
		free(w);
	}
	free(inst->watches);
	inst->watches = NULL;
	inst->n_watches = 0;
}

int nt_instance_drain(struct nt_instance *inst)
{
	int total = 0;

	/* Fds only: timers would re-run periodic work, not pending records. */
	for (size_t i = 0; i < inst->n_watches && inst->st == NT_ST_ATTACHED; i++) {
		struct nt_watch *w = inst->watches[i];
		for (int round = 0; !w->is_timer && round < 64; round++) {
			int n = inst->lib.desc.poll(inst->state, w->token, 65536);
			if (n <= 0)
				break;
			total += n;
		}
	}
	return total;
}

static int host_target_map_fd(const struct nt_instance *inst)
{
	return inst->d->targets.filtered ? inst->d->targets.map_fd : -1;
}

static size_t host_target_pids(const struct nt_instance *inst, uint32_t *out,
			       size_t max)
{
	const struct nt_targets *t = &inst->d->targets;

	for (size_t i = 0; i < t->n_pids && i < max; i++)
		out[i] = t->pids[i];
	return t->n_pids;
}

static int host_symbolize(struct nt_instance *inst, uint32_t pid, uint64_t addr,
			  struct nt_symbol *out)
{
	if (!loop_only(inst, "symbolize"))
		return -EPERM;
	return nt_symbolize(&inst->d->sym, pid, addr, out);
}

static uint64_t host_wall_ns(const struct nt_instance *inst, uint64_t mono_ns)
{
	return (uint64_t)((int64_t)mono_ns + inst->d->wall_offset_ns);
}

static void host_count_drop(struct nt_instance *inst, const char *stage,
			    uint64_t n)
{
	const char *labels[2] = {stage, inst->name};

	__atomic_add_fetch(&inst->dropped, n, __ATOMIC_RELAXED);
	if (inst->d->m_dropped)
		nt_metric_add(inst->d->m_dropped, labels, (double)n);
}

static const struct btf *host_vmlinux_btf(struct nt_instance *inst)
{
	struct nt_daemon *d = inst->d;

	if (!d->vmlinux_btf_tried) {
		d->vmlinux_btf_tried = true;
		d->vmlinux_btf = btf__load_vmlinux_btf();
		if (d->vmlinux_btf)
			nt_btfshare_pin(); /* valid until exit, as the ABI says */
		if (!d->vmlinux_btf)
			host_log(inst, NT_LOG_DEBUG,
				 "no kernel BTF (/sys/kernel/btf/vmlinux): %s",
				 strerror(errno));
	}
	return d->vmlinux_btf;
}

void nt_host_release(struct nt_daemon *d)
{
	/* the same parse libbpf's loads shared (btfshare.c) */
	d->vmlinux_btf = NULL;
	nt_btfshare_release();
	d->vmlinux_btf_tried = false;
}

static const char *host_config_file(const struct nt_instance *inst, int *line)
{
	const char *file;
	int at;

	/* The group may sit in an @include file: name that file. */
	nt_config_where(&inst->d->cfg, inst->cfg ? inst->cfg->line : 0, &file, &at);
	if (line)
		*line = at;
	return file;
}

/* Recorded now, handed to the child at the gate (nt_child_release). */
static int host_child_setenv(struct nt_instance *inst, const char *name,
			     const char *value, bool overwrite)
{
	struct nt_daemon *d = inst->d;
	size_t len = name ? strlen(name) : 0, i;
	char *kv, **grown;

	if (!len || strchr(name, '=') || !value)
		return -EINVAL;
	if (!loop_only(inst, "child_setenv"))
		return -EPERM;
	if (d->child <= 0 || d->child_gate < 0)
		return -ESRCH;
	/* the child's environment is the daemon's as it was at the fork */
	if (!overwrite && getenv(name))
		return -EEXIST;
	if (asprintf(&kv, "%s=%s", name, value) < 0)
		return -ENOMEM;
	for (i = 0; i < d->n_child_env; i++) {
		if (strncmp(d->child_env[i], kv, len + 1) == 0) {
			if (!overwrite) {
				free(kv);
				return -EEXIST;
			}
			free(d->child_env[i]);
			d->child_env[i] = kv;
			return 0;
		}
	}
	grown = realloc(d->child_env, (d->n_child_env + 1) * sizeof(*grown));
	if (!grown) {
		free(kv);
		return -ENOMEM;
	}
	d->child_env = grown;
	d->child_env[d->n_child_env++] = kv;
	return 0;
}

static void host_output_written(struct nt_instance *inst, const char *path,
				const char *what)
{
	pthread_mutex_lock(&inst->d->outputs_lock);
	int err = nt_outputs_add(&inst->d->outputs, path, what);
	pthread_mutex_unlock(&inst->d->outputs_lock);
	if (err)
		host_log(inst, NT_LOG_WARN, "wrote %s", path); /* say it now, then */
}

static int host_identity(struct nt_instance *inst, uint32_t pid,
			 struct nt_identity *out)
{
	return nt_ident_get(&inst->d->ident, pid, out);
}

static bool host_stop_now(struct nt_instance *inst)
{
	return nt_daemon_stop_now(inst->d);
}

const struct nt_host nt_host_vtable = {
	.abi_major = NT_ABI_MAJOR,
	.abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = host_log,
	.instance_name = host_instance_name,
	.config_error = host_config_error,
	.register_schema = host_register_schema,
	.publish = host_publish,
	.subscribe = host_subscribe,
	.schema_of = host_schema_of,
	.metric_register = host_metric_register,
	.metric_add = nt_metric_add,
	.metric_set = nt_metric_set,
	.metric_observe = nt_metric_observe,
	.metric_hist_set = nt_metric_hist_set,
	.metric_remove = nt_metric_remove,
	.metrics_visit = host_metrics_visit,
	.watch_fd = host_watch_fd,
	.add_timer = host_add_timer,
	.target_map_fd = host_target_map_fd,
	.target_pids = host_target_pids,
	.symbolize = host_symbolize,
	.wall_ns = host_wall_ns,
	.count_drop = host_count_drop,
	.config_file = host_config_file,
	.vlog = host_vlog,
	.vmlinux_btf = host_vmlinux_btf,
	.child_setenv = host_child_setenv,
	.output_written = host_output_written,
	.stop_now = host_stop_now,
	.identity = host_identity,
};
