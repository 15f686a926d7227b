/* SPDX-License-Identifier: MIT */
/*
 * hello: an out-of-tree ntcore probe built against the installed SDK only.
 * It publishes hello.exec for every exec of a traced process. It uses the
 * plugin kit for its config key, its log lines and the tp_btf/raw_tp
 * choice (on the kernel BTF the daemon parsed once for every plugin).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ntcore/bpf.h>
#include <ntcore/kit.h>
#include <ntcore/kit/tp.h>
#include <ntcore/plugin.h>

#include "hello.h"
#include "hello.skel.h"

struct hello_cfg {
	const char *attach;
};

static const char *const attach_modes[] = {"auto", "tp_btf", "raw_tp", NULL};

static const struct nt_cfg_key hello_keys[] = {
	NT_KEY_CHOICE(struct hello_cfg, attach, "auto", attach_modes,
		      "tracepoint flavour: auto (tp_btf where it works), tp_btf, raw_tp"),
};

static const struct nt_field exec_fields[] = {
	NT_FIELD(struct hello_exec, old_pid, NT_F_U32, "", "thread id before exec"),
	NT_FIELD(struct hello_exec, filename, NT_F_STR, "", "the program executed"),
};

static const struct nt_schema exec_schema = {
	.name = "hello.exec",
	.desc = "a traced process called exec",
	.fields = exec_fields,
	.n_fields = NT_ARRAY_LEN(exec_fields),
	.min_size = sizeof(struct hello_exec),
};

struct hello {
	struct nt_instance *inst;
	const struct nt_host *host; /* inst and host: what nt_log_* take */
	const struct hello_cfg *cfg;
	int exec_type;
	struct hello_bpf *skel;
	struct ring_buffer *ring;
	uint64_t drops_reported;
};

static int hello_init(struct nt_instance *inst, const struct nt_host *host,
		      const void *config, void **state)
{
	struct hello *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->inst = inst;
	h->host = host;
	h->cfg = config;
	h->exec_type = host->register_schema(inst, &exec_schema);
	if (h->exec_type < 0) {
		int err = h->exec_type;
		free(h);
		return err;
	}
	*state = h;
	return 0;
}

/* Records go from the ring buffer to the bus without a copy. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct hello *h = ctx;

	(void)size;
	h->host->publish(h->inst, data);
	return 0;
}

/* tp_btf where it works, else raw_tp: autoload set before load. */
static int choose_flavour(struct hello *h)
{
	struct nt_tp_prog progs[] = {
		{.tp = "sched_process_exec", .btf = h->skel->progs.hello_exec,
		 .raw = h->skel->progs.hello_exec_raw},
	};
	struct nt_vmlinux vm;
	int flavour;

	nt_vmlinux_get(h->host, h->inst, &vm);
	flavour = nt_tp_choose(h->host, h->inst, vm.btf,
			       nt_tp_mode_parse(h->cfg->attach), progs, 1);
	nt_vmlinux_put(&vm);
	return flavour;
}

static void hello_detach(void *state);

static int hello_attach(void *state)
{
	struct hello *h = state;
	int flavour, err;

	h->skel = hello_bpf__open();
	if (!h->skel)
		return -errno;
	h->skel->rodata->exec_type = (__u32)h->exec_type;
	err = flavour = choose_flavour(h);
	if (flavour < 0)
		goto cleanup;
	err = nt_bpf_use_targets(h->host, h->inst, h->skel->maps.nt_targets,
				 &h->skel->rodata->nt_filter_on);
	if (!err)
		err = hello_bpf__load(h->skel);
	if (!err)
		err = hello_bpf__attach(h->skel);
	if (err) {
		nt_log_err(h, "cannot load or attach (%s): %s",
			   nt_tp_flavour_name(flavour), strerror(-err));
		goto cleanup;
	}
	nt_log_info(h, "attached to sched_process_exec (%s)",
		    nt_tp_flavour_name(flavour));
	err = nt_bpf_ring_open(h->host, h->inst, h->skel->maps.events, on_record,
			       h, 0, &h->ring);
	if (!err)
		return 0;
cleanup: /* the core calls detach only after a successful attach */
	hello_detach(h);
	return err;
}

static int hello_poll(void *state, uint32_t token, uint32_t budget)
{
	struct hello *h = state;

	(void)token;
	(void)budget;
	nt_bpf_report_drops(h->host, h->inst, bpf_map__fd(h->skel->maps.nt_drops),
			    &h->drops_reported);
	return ring_buffer__consume(h->ring);
}

static void hello_detach(void *state)
{
	struct hello *h = state;

	ring_buffer__free(h->ring);
	hello_bpf__destroy(h->skel);
	h->ring = NULL;
	h->skel = NULL;
}

static void hello_fini(void *state)
{
	free(state);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "hello",
	.kind = NT_KIND_PROBE,
	.description = "example probe: every exec of a traced process",
	.version = "1.1",
	.config = hello_keys,
	.n_config = NT_ARRAY_LEN(hello_keys),
	.config_size = sizeof(struct hello_cfg),
	.init = hello_init,
	.attach = hello_attach,
	.poll = hello_poll,
	.detach = hello_detach,
	.fini = hello_fini,
};
