/* SPDX-License-Identifier: MIT */
/*
 * hello_watch: an out-of-tree ntcore detector. It consumes hello.exec and
 * publishes alert.hello_watch when a traced process executes the program
 * named by `watch`. It uses the plugin kit: config keys declared with one
 * macro each, a hash map counting runs per process (bounded: one more
 * process than max_pids is counted as a drop), and a string builder that
 * writes the message and JSON-escaped evidence into the alert record.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ntcore/kit.h>
#include <ntcore/plugin.h>

struct watch_cfg {
	const char *watch;
	int64_t severity;
	int64_t max_pids;
};

static const struct nt_cfg_key watch_keys[] = {
	NT_KEY_STR(struct watch_cfg, watch, "true",
		   "base name of the program whose exec raises the alert"),
	NT_KEY_INT(struct watch_cfg, severity, 1, 0, 2,
		   "0 info, 1 warning, 2 critical"),
	NT_KEY_INT(struct watch_cfg, max_pids, 4096, 1, 1048576,
		   "processes whose runs are counted at once"),
};

/* An alert record: the shared alert layout, then the text it points to. */
struct watch_alert {
	struct nt_alert a;
	char text[2048];
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
	struct nt_hmap runs; /* u32 pid -> u64 times it ran the program */
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
	nt_hmap_init(&w->runs, sizeof(uint32_t), sizeof(uint64_t),
		     (size_t)w->cfg->max_pids);
	*state = w;
	return 0;
}

/* The record's "filename" field, borrowed; NULL when the schema lacks it. */
static const char *exec_filename(const struct nt_event_hdr *ev,
				 const struct nt_schema *schema, size_t *len)
{
	for (uint32_t i = 0; i < schema->n_fields; i++) {
		const struct nt_field *f = &schema->fields[i];
		if (strcmp(f->name, "filename") == 0 && f->offset + f->size <= ev->size) {
			const char *s = (const char *)ev + f->offset;
			const char *nul = memchr(s, '\0', f->size);
			*len = nul ? (size_t)(nul - s) : f->size;
			return s;
		}
	}
	return NULL;
}

/* The part after the last '/'. */
static const char *base_name(const char *file, size_t len, size_t *base_len)
{
	size_t i = len;

	while (i > 0 && file[i - 1] != '/')
		i--;
	*base_len = len - i;
	return file + i;
}

/* message "pid P ran FILE (N times)", then evidence {"filename":...,"count":N} */
static void alert_text(struct nt_sb *sb, const struct nt_event_hdr *ev,
		       const char *file, size_t len, uint64_t runs,
		       struct nt_alert *a)
{
	nt_sb_puts(sb, "pid ");
	nt_sb_u64(sb, ev->pid);
	nt_sb_puts(sb, " ran ");
	nt_sb_put(sb, file, nt_utf8_cut(file, len, 256));
	nt_sb_puts(sb, " (");
	nt_sb_u64(sb, runs);
	nt_sb_puts(sb, runs == 1 ? " time)" : " times)");
	a->message = (struct nt_vstr){offsetof(struct watch_alert, text),
				      (uint32_t)sb->len};
	size_t start = sb->len;
	nt_sb_puts(sb, "{\"filename\":");
	nt_sb_json_str(sb, file, len);
	nt_sb_puts(sb, ",\"count\":");
	nt_sb_u64(sb, runs);
	nt_sb_putc(sb, '}');
	a->evidence = (struct nt_vstr){(uint32_t)(offsetof(struct watch_alert, text) + start),
				       (uint32_t)(sb->len - start)};
}

static void watch_consume(void *state, const struct nt_event_hdr *ev,
			  const struct nt_schema *schema)
{
	struct watcher *w = state;
	struct watch_alert out;
	struct nt_sb sb;
	size_t len = 0, base_len;
	const char *file = exec_filename(ev, schema, &len), *base;
	uint64_t *runs;

	if (!file)
		return;
	base = base_name(file, len, &base_len);
	if (strlen(w->cfg->watch) != base_len ||
	    memcmp(base, w->cfg->watch, base_len) != 0)
		return;
	runs = nt_hmap_put(&w->runs, &ev->pid, NULL);
	if (!runs) {
		w->host->count_drop(w->inst, "pids", 1);
		return;
	}
	++*runs;
	memset(&out, 0, sizeof(out));
	out.a.hdr = *ev;
	out.a.hdr.type = (uint32_t)w->alert_type;
	out.a.severity = (uint32_t)w->cfg->severity;
	out.a.subject_pid = ev->pid;
	nt_sb_init_buf(&sb, out.text, sizeof(out.text));
	alert_text(&sb, ev, file, len, *runs, &out.a);
	if (sb.failed) { /* a name too long for the record: counted, not cut */
		w->host->count_drop(w->inst, "alert", 1);
		return;
	}
	out.a.hdr.size = (uint32_t)(offsetof(struct watch_alert, text) + sb.len);
	w->host->publish(w->inst, &out.a.hdr);
}

static int watch_attach(void *state) { (void)state; return 0; }
static int watch_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)state; (void)token; (void)budget;
	return 0;
}
static void watch_detach(void *state) { (void)state; }

static void watch_fini(void *state)
{
	struct watcher *w = state;

	nt_hmap_fini(&w->runs);
	free(w);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "hello_watch",
	.kind = NT_KIND_DETECTOR,
	.description = "example detector: alert when a traced process runs a given program",
	.version = "1.1",
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
