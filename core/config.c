/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const char *const instance_keys[] = {
	"plugin", "name", "required", "enabled", "log_level", "events", "queue_kb", NULL};

void *nt_arena_alloc(struct nt_arena *a, size_t size)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		void **grown = realloc(a->ptrs, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		a->ptrs = grown;
		a->cap = cap;
	}
	void *p = calloc(1, size ? size : 1);
	if (p)
		a->ptrs[a->n++] = p;
	return p;
}

char *nt_arena_strdup(struct nt_arena *a, const char *s)
{
	size_t len = strlen(s);
	char *copy = nt_arena_alloc(a, len + 1);

	if (copy)
		memcpy(copy, s, len + 1);
	return copy;
}

void nt_arena_free(struct nt_arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->ptrs[i]);
	free(a->ptrs);
	memset(a, 0, sizeof(*a));
}

void nt_config_where(const struct nt_config *c, int line, const char **file,
		     int *file_line)
{
	nt_conf_where(&c->src, line, file, file_line);
	if (!c->src.n_files)
		*file = c->path ? c->path : "(config)";
}

void nt_config_error(const struct nt_config *c, int line, const char *inst,
		     const char *fmt, ...)
{
	const char *file;
	int at;
	va_list ap;

	nt_config_where(c, line, &file, &at);
	fprintf(c->diag, "%s%s:%d: ", c->diag == stderr ? nt_log_priority(NT_LOG_ERROR) : "",
		file, at);
	if (inst)
		fprintf(c->diag, "[%s] ", inst);
	va_start(ap, fmt);
	vfprintf(c->diag, fmt, ap);
	va_end(ap);
	fputc('\n', c->diag);
}

const char *nt_cfg_type_name(uint32_t type)
{
	switch (type) {
	case NT_CFG_BOOL: return "a boolean";
	case NT_CFG_INT: return "an integer";
	case NT_CFG_FLOAT: return "a number";
	case NT_CFG_STRING: return "a string";
	case NT_CFG_STRING_LIST: return "a list of strings";
	case NT_CFG_GROUP_LIST: return "a list of groups";
	default: return "?";
	}
}

static int line_of(const config_setting_t *s)
{
	return (int)config_setting_source_line(s);
}

int nt_config_key_line(const config_setting_t *group, const char *key)
{
	config_setting_t *s = key ? config_setting_get_member(group, key) : NULL;

	return line_of(s ? s : group);
}

static bool is_string_list(const config_setting_t *s)
{
	int type = config_setting_type(s);

	if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
		return false;
	for (int i = 0; i < config_setting_length(s); i++)
		if (config_setting_type(config_setting_get_elem(s, (unsigned)i)) !=
		    CONFIG_TYPE_STRING)
			return false;
	return true;
}

/* Copies a string list out of libconfig into arena memory. */
static const char **strlist_copy(struct nt_arena *a, const config_setting_t *s,
				 size_t *n)
{
	*n = (size_t)config_setting_length(s);
	const char **v = nt_arena_alloc(a, (*n + 1) * sizeof(char *));
	if (!v)
		return NULL;
	for (size_t i = 0; i < *n; i++) {
		const char *text = config_setting_get_string_elem(s, (int)i);
		if (!(v[i] = nt_arena_strdup(a, text)))
			return NULL;
	}
	return v;
}

struct fill_ctx {
	const struct nt_config *c;
	const char *inst;
	struct nt_arena *arena;
	int errors;
};

static int fill_group(struct fill_ctx *fx, const config_setting_t *group,
		      const struct nt_cfg_key *keys, uint32_t n_keys,
		      char *base, bool skip_instance_keys);

static bool numeric_in_bounds(const struct nt_cfg_key *k, double v)
{
	return k->min > k->max || (v >= k->min && v <= k->max);
}

static bool in_choices(const struct nt_cfg_key *k, const char *v)
{
	if (!k->choices)
		return true;
	for (const char *const *ch = k->choices; *ch; ch++)
		if (strcmp(*ch, v) == 0)
			return true;
	return false;
}

static void choices_text(const struct nt_cfg_key *k, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (const char *const *ch = k->choices; ch && *ch; ch++) {
		int n = snprintf(buf + used, len - used, "%s\"%s\"",
				 used ? ", " : "", *ch);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

static void key_error(struct fill_ctx *fx, const config_setting_t *s,
		      const struct nt_cfg_key *k, const char *what)
{
	nt_config_error(fx->c, line_of(s), fx->inst, "%s: %s", k->key, what);
	fx->errors++;
}

static void fill_numeric(struct fill_ctx *fx, const config_setting_t *s,
			 const struct nt_cfg_key *k, char *dst)
{
	int type = config_setting_type(s);
	bool is_int = type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64;
	char msg[160];

	if (k->type == NT_CFG_INT && !is_int)
		return key_error(fx, s, k, "expected an integer");
	if (k->type == NT_CFG_FLOAT && !is_int && type != CONFIG_TYPE_FLOAT)
		return key_error(fx, s, k, "expected a number");
	double v = is_int ? (double)config_setting_get_int64(s)
			  : config_setting_get_float(s);
	if (!numeric_in_bounds(k, v)) {
		snprintf(msg, sizeof(msg), "%g is out of range [%g, %g]", v,
			 k->min, k->max);
		return key_error(fx, s, k, msg);
	}
	if (k->type == NT_CFG_INT) {
		int64_t iv = config_setting_get_int64(s);
		memcpy(dst, &iv, sizeof(iv));
	} else {
		memcpy(dst, &v, sizeof(v));
	}
}

static void fill_string(struct fill_ctx *fx, const config_setting_t *s,
			const struct nt_cfg_key *k, char *dst)
{
	char msg[512], list[400];

	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return key_error(fx, s, k, "expected a string");
	const char *v = config_setting_get_string(s);
	if (!in_choices(k, v)) {
		choices_text(k, list, sizeof(list));
		snprintf(msg, sizeof(msg), "\"%s\" is not one of %s", v, list);
		return key_error(fx, s, k, msg);
	}
	const char *copy = nt_arena_strdup(fx->arena, v);
	memcpy(dst, &copy, sizeof(copy));
}

static void fill_group_list(struct fill_ctx *fx, const config_setting_t *s,
			    const struct nt_cfg_key *k, char *dst)
{
	int type = config_setting_type(s);
	struct nt_cfg_array arr = {0};

	if (type != CONFIG_TYPE_LIST)
		return key_error(fx, s, k, "expected a list of groups ( {...}, ... )");
	arr.n = (uint32_t)config_setting_length(s);
	char *items = nt_arena_alloc(fx->arena, (size_t)arr.n * k->sub_size);
	if (!items)
		return key_error(fx, s, k, "out of memory");
	for (uint32_t i = 0; i < arr.n; i++) {
		config_setting_t *g = config_setting_get_elem(s, i);
		if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
			key_error(fx, g, k, "each element must be a group { ... }");
			continue;
		}
		fill_group(fx, g, k->sub, k->n_sub, items + (size_t)i * k->sub_size,
			   false);
	}
	arr.items = items;
	memcpy(dst, &arr, sizeof(arr));
}

static void fill_value(struct fill_ctx *fx, const config_setting_t *s,
		       const struct nt_cfg_key *k, char *base)
{
	char *dst = base + k->offset;

	switch (k->type) {
	case NT_CFG_BOOL: {
		if (config_setting_type(s) != CONFIG_TYPE_BOOL)
			return key_error(fx, s, k, "expected true or false");
		bool v = config_setting_get_bool(s);
		memcpy(dst, &v, sizeof(v));
		return;
	}
	case NT_CFG_INT:
	case NT_CFG_FLOAT:
		return fill_numeric(fx, s, k, dst);
	case NT_CFG_STRING:
		return fill_string(fx, s, k, dst);
	case NT_CFG_STRING_LIST: {
		struct nt_strlist list = {0};
		size_t n = 0;
		if (!is_string_list(s))
			return key_error(fx, s, k, "expected a list of strings [\"a\", \"b\"]");
		list.v = strlist_copy(fx->arena, s, &n);
		list.n = (uint32_t)n;
		memcpy(dst, &list, sizeof(list));
		return;
	}
	case NT_CFG_GROUP_LIST:
		return fill_group_list(fx, s, k, dst);
	default:
		return key_error(fx, s, k, "the plugin declares an unknown key type");
	}
}

/* A default is libconfig text, parsed as "v = <def>;". */
static void fill_default(struct fill_ctx *fx, const config_setting_t *group,
			 const struct nt_cfg_key *k, char *base)
{
	config_t tmp;
	char *text;

	if (k->type == NT_CFG_GROUP_LIST || !k->def)
		return;
	if (asprintf(&text, "v = %s;", k->def) < 0)
		return;
	config_init(&tmp);
	if (config_read_string(&tmp, text) == CONFIG_TRUE) {
		config_setting_t *v = config_lookup(&tmp, "v");
		fill_value(fx, v, k, base);
	} else {
		nt_config_error(fx->c, line_of(group), fx->inst,
				"%s: the plugin's default '%s' does not parse",
				k->key, k->def);
		fx->errors++;
	}
	config_destroy(&tmp);
	free(text);
}

static bool is_instance_key(const char *name)
{
	for (const char *const *k = instance_keys; *k; k++)
		if (strcmp(*k, name) == 0)
			return true;
	return false;
}

static const struct nt_cfg_key *find_key(const struct nt_cfg_key *keys,
					 uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(keys[i].key, name) == 0)
			return &keys[i];
	return NULL;
}

/* The stem of a duration key: "report_interval" of "report_interval_ms". */
static size_t duration_stem(const char *key)
{
	static const char *const units[] = {"_ms", "_s", "_us", "_ns"};
	size_t len = strlen(key);

	for (size_t u = 0; u < NT_ARRAY_LEN(units); u++) {
		size_t ul = strlen(units[u]);
		if (len > ul && strcmp(key + len - ul, units[u]) == 0)
			return len - ul;
	}
	return len;
}

/* Durations carry their unit in the key; an old spelling ("interval",
 * "report_interval_ms") names the key that replaced it. */
static const char *renamed_to(const char *name, const struct nt_cfg_key *keys,
			      uint32_t n)
{
	size_t stem = duration_stem(name);

	for (uint32_t i = 0; i < n; i++) {
		size_t ks = duration_stem(keys[i].key);
		if (ks != strlen(keys[i].key) && ks == stem &&
		    strncmp(keys[i].key, name, stem) == 0)
			return keys[i].key;
	}
	return NULL;
}

static void unknown_key(struct fill_ctx *fx, const config_setting_t *s,
			const struct nt_cfg_key *keys, uint32_t n)
{
	char known[512];
	size_t used = 0;
	const char *now = renamed_to(config_setting_name(s), keys, n);

	if (now) {
		nt_config_error(fx->c, line_of(s), fx->inst,
				"unknown key '%s': it is now '%s' (durations carry their unit)",
				config_setting_name(s), now);
		fx->errors++;
		return;
	}

	known[0] = '\0';
	for (uint32_t i = 0; i < n && used < sizeof(known); i++) {
		int w = snprintf(known + used, sizeof(known) - used, "%s%s",
				 i ? ", " : "", keys[i].key);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	nt_config_error(fx->c, line_of(s), fx->inst,
			"unknown key '%s' (known: %s)", config_setting_name(s),
			n ? known : "none");
	fx->errors++;
}

static int fill_group(struct fill_ctx *fx, const config_setting_t *group,
		      const struct nt_cfg_key *keys, uint32_t n_keys,
		      char *base, bool skip_instance_keys)
{
	int before = fx->errors;

	for (int i = 0; i < config_setting_length(group); i++) {
		config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
		const char *name = config_setting_name(s);
		if (skip_instance_keys && is_instance_key(name))
			continue;
		if (!find_key(keys, n_keys, name))
			unknown_key(fx, s, keys, n_keys);
	}
	for (uint32_t i = 0; i < n_keys; i++) {
		const struct nt_cfg_key *k = &keys[i];
		config_setting_t *s = config_setting_get_member(group, k->key);
		if (s)
			fill_value(fx, s, k, base);
		else if (!k->def && k->type != NT_CFG_GROUP_LIST) {
			nt_config_error(fx->c, line_of(group), fx->inst,
					"missing required key '%s' (%s)", k->key,
					nt_cfg_type_name(k->type));
			fx->errors++;
		} else {
			fill_default(fx, group, k, base);
		}
	}
	return fx->errors == before ? 0 : -1;
}

int nt_config_fill(const struct nt_config *c, const config_setting_t *group,
		   const char *inst_name, const struct nt_cfg_key *keys,
		   uint32_t n_keys, uint32_t size, struct nt_arena *arena,
		   void **out)
{
	struct fill_ctx fx = {.c = c, .inst = inst_name, .arena = arena};
	char *base = nt_arena_alloc(arena, size);

	if (!base) {
		nt_config_error(c, line_of(group), inst_name, "out of memory");
		return -1;
	}
	*out = base;
	return fill_group(&fx, group, keys, n_keys, base, true);
}

/* ------------------------------------------------------------------ */

static int expect_type(struct nt_config *c, const config_setting_t *s,
		       int type, const char *what, const char *inst)
{
	if (config_setting_type(s) == type)
		return 0;
	nt_config_error(c, line_of(s), inst, "%s: expected %s",
			config_setting_name(s), what);
	return -1;
}

/* A string, or a list of strings, into a NULL-terminated array whose
 * strings libconfig owns; NULL when `s` is neither. */
static const char **strings_of(const config_setting_t *s, size_t *n)
{
	const char **v;

	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		*n = 1;
		v = calloc(2, sizeof(char *));
		if (v)
			v[0] = config_setting_get_string(s);
		return v;
	}
	if (!is_string_list(s))
		return NULL;
	*n = (size_t)config_setting_length(s);
	v = calloc(*n + 1, sizeof(char *));
	for (size_t d = 0; v && d < *n; d++)
		v[d] = config_setting_get_string_elem(s, (int)d);
	return v;
}

/* identity_families: ( { match = "ntcore_sched_*"; labels = [...]; }, ... ) */
static int load_identity_families(struct nt_config *c, const config_setting_t *s)
{
	int n = config_setting_type(s) == CONFIG_TYPE_LIST ? config_setting_length(s) : -1;

	if (n < 0) {
		nt_config_error(c, line_of(s), NULL,
				"identity_families: expected a list of groups ( { match = \"GLOB\"; labels = [...]; } )");
		return -1;
	}
	c->id_families = calloc((size_t)n + 1, sizeof(*c->id_families));
	for (int i = 0; c->id_families && i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
		const config_setting_t *m = config_setting_get_member(g, "match");
		const config_setting_t *l = config_setting_get_member(g, "labels");
		struct nt_id_family *f = &c->id_families[c->n_id_families];

		if (!m || config_setting_type(m) != CONFIG_TYPE_STRING || !l ||
		    !(f->labels = strings_of(l, &f->n_labels))) {
			nt_config_error(c, line_of(g), NULL,
					"identity_families: each group needs match = \"GLOB\" and labels = [\"pid\", \"comm\", ...]");
			return -1;
		}
		f->match = config_setting_get_string(m);
		c->n_id_families++;
	}
	return 0;
}

static int load_daemon_key(struct nt_config *c, const config_setting_t *s)
{
	const char *name = config_setting_name(s);

	if (strcmp(name, "log_level") == 0) {
		if (expect_type(c, s, CONFIG_TYPE_STRING, "a string", NULL))
			return -1;
		c->log_level = nt_log_level_parse(config_setting_get_string(s));
		if (c->log_level < 0) {
			nt_config_error(c, line_of(s), NULL,
					"log_level: expected \"error\", \"warn\", \"info\" or \"debug\"");
			return -1;
		}
	} else if (strcmp(name, "plugin_dirs") == 0) {
		if (!is_string_list(s) || !(c->plugin_dirs = strings_of(s, &c->n_plugin_dirs))) {
			nt_config_error(c, line_of(s), NULL,
					"plugin_dirs: expected a list of strings");
			return -1;
		}
	} else if (strcmp(name, "cgroup") == 0) {
		if (!(c->cgroups = strings_of(s, &c->n_cgroups))) {
			nt_config_error(c, line_of(s), NULL,
					"cgroup: expected a cgroup path or a list of them");
			return -1;
		}
	} else if (strcmp(name, "identity_labels") == 0) {
		if (!(c->id_labels = strings_of(s, &c->n_id_labels))) {
			nt_config_error(c, line_of(s), NULL,
					"identity_labels: expected a list of \"pid\", \"tid\", \"comm\", \"cgroup\", \"container\", \"pod\"");
			return -1;
		}
		c->id_labels_line = line_of(s);
	} else if (strcmp(name, "identity_families") == 0) {
		return load_identity_families(c, s);
	} else if (strcmp(name, "kubelet_dir") == 0) {
		if (expect_type(c, s, CONFIG_TYPE_STRING, "a string", NULL))
			return -1;
		c->kubelet_dir = config_setting_get_string(s);
	} else if (strcmp(name, "downward_dir") == 0) {
		if (expect_type(c, s, CONFIG_TYPE_STRING, "a string", NULL))
			return -1;
		c->downward_dir = config_setting_get_string(s);
	} else {
		nt_config_error(c, line_of(s), NULL,
				"unknown key 'ntcore.%s' (known: log_level, plugin_dirs, cgroup, identity_labels, identity_families, kubelet_dir, downward_dir)",
				name);
		return -1;
	}
	return 0;
}

static int load_daemon_group(struct nt_config *c, const config_setting_t *g)
{
	int errors = 0;

	for (int i = 0; i < config_setting_length(g); i++)
		if (load_daemon_key(c, config_setting_get_elem(g, (unsigned)i)))
			errors++;
	return errors ? -1 : 0;
}

static int load_instance_keys(struct nt_config *c, struct nt_inst_cfg *ic)
{
	const config_setting_t *g = ic->group;
	config_setting_t *s;
	int errors = 0;

	if ((s = config_setting_get_member(g, "required")))
		errors += expect_type(c, s, CONFIG_TYPE_BOOL, "true or false", ic->name) ? 1
			: (ic->required = config_setting_get_bool(s), 0);
	if ((s = config_setting_get_member(g, "enabled")))
		errors += expect_type(c, s, CONFIG_TYPE_BOOL, "true or false", ic->name) ? 1
			: (ic->enabled = config_setting_get_bool(s), 0);
	if ((s = config_setting_get_member(g, "log_level"))) {
		if (expect_type(c, s, CONFIG_TYPE_STRING, "a string", ic->name) ||
		    (ic->log_level = nt_log_level_parse(config_setting_get_string(s))) < 0) {
			nt_config_error(c, line_of(s), ic->name,
					"log_level: expected \"error\", \"warn\", \"info\" or \"debug\"");
			errors++;
		}
	}
	if ((s = config_setting_get_member(g, "queue_kb"))) {
		long long kb = config_setting_get_int64(s);
		if (config_setting_type(s) != CONFIG_TYPE_INT &&
		    config_setting_type(s) != CONFIG_TYPE_INT64)
			kb = -1;
		if (kb < NT_QUEUE_KB_MIN || kb > NT_QUEUE_KB_MAX) {
			nt_config_error(c, line_of(s), ic->name,
					"queue_kb: expected an integer from %d to %d (KiB)",
					NT_QUEUE_KB_MIN, NT_QUEUE_KB_MAX);
			errors++;
		} else {
			ic->queue_kb = (uint32_t)kb;
		}
	}
	if ((s = config_setting_get_member(g, "events"))) {
		if (!is_string_list(s)) {
			nt_config_error(c, line_of(s), ic->name,
					"events: expected a list of strings [\"cuda.*\", ...]");
			errors++;
		} else {
			ic->n_events = (size_t)config_setting_length(s);
			ic->events = calloc(ic->n_events + 1, sizeof(char *));
			for (size_t i = 0; ic->events && i < ic->n_events; i++)
				ic->events[i] = config_setting_get_string_elem(s, (int)i);
			ic->events_set = true;
		}
	}
	return errors;
}

static int load_instance(struct nt_config *c, config_setting_t *g, size_t idx)
{
	struct nt_inst_cfg *ic = &c->insts[idx];
	config_setting_t *s;
	const char *name = NULL;

	*ic = (struct nt_inst_cfg){.enabled = true, .log_level = -1, .group = g,
				   .line = line_of(g)};
	if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
		nt_config_error(c, line_of(g), NULL,
				"plugins: each element must be a group { plugin = \"...\"; ... }");
		return 1;
	}
	s = config_setting_get_member(g, "plugin");
	if (!s) {
		nt_config_error(c, line_of(g), NULL, "missing required key 'plugin'");
		return 1;
	}
	if (expect_type(c, s, CONFIG_TYPE_STRING, "a string", NULL))
		return 1;
	ic->plugin = config_setting_get_string(s);
	if ((s = config_setting_get_member(g, "name"))) {
		if (expect_type(c, s, CONFIG_TYPE_STRING, "a string", NULL))
			return 1;
		name = config_setting_get_string(s);
		snprintf(ic->name, sizeof(ic->name), "%s", name);
	} else {
		int same = 0;
		for (size_t i = 0; i < idx; i++)
			same += strcmp(c->insts[i].plugin ? c->insts[i].plugin : "",
				       ic->plugin) == 0;
		snprintf(ic->name, sizeof(ic->name), "%s.%d", ic->plugin, same);
	}
	for (size_t i = 0; i < idx; i++)
		if (strcmp(c->insts[i].name, ic->name) == 0) {
			const char *here, *there;
			int here_line, there_line;
			nt_config_where(c, ic->line, &here, &here_line);
			nt_config_where(c, c->insts[i].line, &there, &there_line);
			if (strcmp(here, there) == 0)
				nt_config_error(c, ic->line, NULL,
						"instance name '%s' is already used at line %d",
						ic->name, there_line);
			else
				nt_config_error(c, ic->line, NULL,
						"instance name '%s' is already used at %s:%d",
						ic->name, there, there_line);
			return 1;
		}
	return load_instance_keys(c, ic);
}

static int load_plugins_list(struct nt_config *c, config_setting_t *list)
{
	int errors = 0;

	if (config_setting_type(list) != CONFIG_TYPE_LIST) {
		nt_config_error(c, line_of(list), NULL,
				"plugins: expected a list ( { plugin = \"...\"; }, ... )");
		return -1;
	}
	c->n_insts = (size_t)config_setting_length(list);
	c->insts = calloc(c->n_insts ? c->n_insts : 1, sizeof(*c->insts));
	if (!c->insts)
		return -1;
	for (size_t i = 0; i < c->n_insts; i++)
		errors += load_instance(c, config_setting_get_elem(list, (unsigned)i), i);
	return errors ? -1 : 0;
}

/* Reads the file(s) with confread.c, then parses the joined text. The
 * include directory is a path no file can be under: should libconfig's
 * scanner ever meet an @include that confread.c did not expand, opening
 * it fails with an error instead of reading anything. */
static int read_text(struct nt_config *c, const char *path, const char *text)
{
	char why[PATH_MAX + 512];
	char *joined = nt_conf_read(path, text, &c->src, why, sizeof(why));
	const char *file;
	int line;

	const char *prio = c->diag == stderr ? nt_log_priority(NT_LOG_ERROR) : "";

	if (!joined) {
		fprintf(c->diag, "%s%s\n", prio, why);
		return -1;
	}
	config_set_include_dir(&c->cfg, "/dev/null");
	int read = config_read_string(&c->cfg, joined);
	free(joined);
	if (read == CONFIG_TRUE)
		return 0;
	nt_config_where(c, config_error_line(&c->cfg), &file, &line);
	fprintf(c->diag, "%s%s:%d: %s\n", prio, file, line, config_error_text(&c->cfg));
	return -1;
}

int nt_config_load(struct nt_config *c, const char *path, const char *text,
		   FILE *diag)
{
	config_setting_t *root, *list = NULL;
	int errors = 0;

	memset(c, 0, sizeof(*c));
	c->diag = diag ? diag : stderr;
	c->log_level = NT_LOG_INFO;
	c->path = strdup(path);
	config_init(&c->cfg);
	if (read_text(c, path, text))
		return -1;
	root = config_root_setting(&c->cfg);
	for (int i = 0; i < config_setting_length(root); i++) {
		config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
		const char *name = config_setting_name(s);
		if (strcmp(name, "ntcore") == 0) {
			if (expect_type(c, s, CONFIG_TYPE_GROUP, "a group { ... }", NULL) ||
			    load_daemon_group(c, s))
				errors++;
		} else if (strcmp(name, "plugins") == 0) {
			list = s;
		} else {
			nt_config_error(c, line_of(s), NULL,
					"unknown top-level key '%s' (known: ntcore, plugins)",
					name);
			errors++;
		}
	}
	if (!list) {
		fprintf(c->diag, "%s%s:1: missing the 'plugins' list\n",
			c->diag == stderr ? nt_log_priority(NT_LOG_ERROR) : "", path);
		errors++;
	} else if (load_plugins_list(c, list)) {
		errors++;
	}
	return errors ? -1 : 0;
}

void nt_config_free(struct nt_config *c)
{
	for (size_t i = 0; i < c->n_insts; i++)
		free(c->insts[i].events);
	free(c->insts);
	free(c->plugin_dirs);
	free(c->cgroups);
	free(c->id_labels);
	for (size_t i = 0; i < c->n_id_families; i++)
		free(c->id_families[i].labels);
	free(c->id_families);
	free(c->path);
	nt_conf_src_free(&c->src);
	config_destroy(&c->cfg);
	memset(c, 0, sizeof(*c));
}
