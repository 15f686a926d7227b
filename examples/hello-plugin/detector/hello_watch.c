/* SPDX-License-Identifier: MIT */
/*
 * hello_watch: an out-of-tree ntcore detector. It consumes hello.exec and
 * publishes alert.hello_watch when a traced process executes the program
 * named by `watch`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ntcore/plugin.h>

struct watch_cfg {
	const char *watch;
	int64_t severity;
};

static const struct nt_cfg_key watch_keys[] = {
	{.key = "watch", .type = NT_CFG_STRING, .offset = offsetof(struct watch_cfg, watch),
	 .def = "\"true\"", .min = 1, .max = 0,
	 .desc = "base name of the program whose exec raises the alert"},
	{.key = "severity", .type = NT_CFG_INT, .offset = offsetof(struct watch_cfg, severity),
	 .def = "1", .min = 0, .max = 2, .desc = "0 info, 1 warning, 2 critical"},
};

/* An alert record: the shared alert layout, then the text it points to. */
struct watch_alert {
	struct nt_alert a;
	char text[512];
};

static const struct nt_field alert_fields[] = {NT_ALERT_FIELDS(struct nt_alert)};

static const struct nt_schema alert_schema = {
	.name = "alert.hello_watch",
	.desc = "a traced process ran the watched program",
	.fields = alert_fields,
	.n_fields = NT_ARRAY_LEN(alert_fields),
	.min_size = sizeof(struct nt_alert),
};

struct watcher {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct watch_cfg *cfg;
	int alert_type;
	uint64_t seen;
};

static int watch_init(struct nt_instance *inst, const struct nt_host *host,
		      const void *config, void **state)
{
	struct watcher *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->inst = inst;
	w->host = host;
	w->cfg = config;
	if (strchr(w->cfg->watch, '/')) {
		free(w);
		return host->config_error(inst, "watch", "a base name, not a path");
	}
	w->alert_type = host->register_schema(inst, &alert_schema);
	if (w->alert_type < 0 || host->subscribe(inst, "hello.exec") < 0) {
		free(w);
		return -EINVAL;
	}
	*state = w;
	return 0;
}

static void watch_consume(void *state, const struct nt_event_hdr *ev,
			  const struct nt_schema *schema)
{
	struct watcher *w = state;
	const struct nt_field *f = NULL;
	char filename[256];
	struct watch_alert out;

	for (uint32_t i = 0; i < schema->n_fields; i++)
		if (strcmp(schema->fields[i].name, "filename") == 0)
			f = &schema->fields[i];
	if (!f)
		return;
	snprintf(filename, sizeof(filename), "%.*s", (int)f->size,
		 (const char *)ev + f->offset);
	const char *base = strrchr(filename, '/');
	base = base ? base + 1 : filename;
	if (strcmp(base, w->cfg->watch) != 0)
		return;
	w->seen++;
	memset(&out, 0, sizeof(out));
	out.a.hdr = *ev;
	out.a.hdr.type = (uint32_t)w->alert_type;
	out.a.severity = (uint32_t)w->cfg->severity;
	out.a.subject_pid = ev->pid;
	int msg_len = snprintf(out.text, sizeof(out.text) / 2,
			       "pid %u ran %s (seen %llu times)", ev->pid, filename,
			       (unsigned long long)w->seen);
	int ev_len = snprintf(out.text + msg_len, sizeof(out.text) - (size_t)msg_len,
			      "{\"filename\":\"%s\",\"count\":%llu}", filename,
			      (unsigned long long)w->seen);
	out.a.message = (struct nt_vstr){offsetof(struct watch_alert, text), (uint32_t)msg_len};
	out.a.evidence = (struct nt_vstr){offsetof(struct watch_alert, text) + (uint32_t)msg_len,
					  (uint32_t)ev_len};
	out.a.hdr.size = (uint32_t)(offsetof(struct watch_alert, text) + (size_t)msg_len +
				    (size_t)ev_len);
	w->host->publish(w->inst, &out.a.hdr);
}

static int watch_attach(void *state) { (void)state; return 0; }
static int watch_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)state; (void)token; (void)budget;
	return 0;
}
static void watch_detach(void *state) { (void)state; }
static void watch_fini(void *state) { free(state); }

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "hello_watch",
	.kind = NT_KIND_DETECTOR,
	.description = "example detector: alert when a traced process runs a given program",
	.version = "1.0",
	.config = watch_keys,
	.n_config = NT_ARRAY_LEN(watch_keys),
	.config_size = sizeof(struct watch_cfg),
	.init = watch_init,
	.attach = watch_attach,
	.poll = watch_poll,
	.detach = watch_detach,
	.fini = watch_fini,
	.consume = watch_consume,
};
