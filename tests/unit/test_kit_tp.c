/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the kit's tp_btf/raw_tp chooser. Tracepoint existence
 * comes from a BTF built here (typedefs btf_trace_alpha and _beta), so
 * the choices are exact on any kernel; the programs are a real BPF object
 * (tests/fixtures/kit/kit_tp.bpf.c) opened but never loaded. The kernel
 * probe itself runs on sched_switch: tp_btf as root on a kernel with BTF,
 * raw_tp without privilege.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "ntcore/kit/bpfset.h"
#include "ntcore/kit/tp.h"

#include "kit_tp.bpf.skel.h"

/* Log lines the stand-in host received; the instance points at it. */
struct seen {
	int errors, warnings;
	char text[1024];
	const struct btf *btf; /* what host->vmlinux_btf returns */
};

static void fake_vlog(struct nt_instance *inst, int level, const char *fmt,
		      va_list ap)
{
	struct seen *s = (struct seen *)(void *)inst;
	size_t used = strlen(s->text);

	s->errors += level == NT_LOG_ERROR;
	s->warnings += level == NT_LOG_WARN;
	vsnprintf(s->text + used, sizeof(s->text) - used, fmt, ap);
	used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "|");
}

static const struct btf *fake_vmlinux_btf(struct nt_instance *inst)
{
	return ((struct seen *)(void *)inst)->btf;
}

static const struct nt_host fake_host = {
	.abi_major = NT_ABI_MAJOR, .abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.vlog = fake_vlog, .vmlinux_btf = fake_vmlinux_btf,
};

/* A BTF with tracepoints alpha and beta, and a struct (not a typedef)
 * named like a third one. */
static struct btf *test_btf(void)
{
	struct btf *btf = btf__new_empty();
	int int_id;

	ck_assert_ptr_nonnull(btf);
	int_id = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	ck_assert_int_gt(int_id, 0);
	ck_assert_int_gt(btf__add_typedef(btf, "btf_trace_alpha", int_id), 0);
	ck_assert_int_gt(btf__add_typedef(btf, "btf_trace_beta", int_id), 0);
	ck_assert_int_gt(btf__add_struct(btf, "btf_trace_delta", 4), 0);
	return btf;
}

START_TEST(test_tp_exists_and_modes)
{
	struct btf *btf = test_btf();

	ck_assert(nt_tp_exists(btf, "alpha"));
	ck_assert(nt_tp_exists(btf, "beta"));
	ck_assert(!nt_tp_exists(btf, "gamma"));
	ck_assert(!nt_tp_exists(btf, "delta")); /* a struct, not a typedef */
	ck_assert(!nt_tp_exists(NULL, "alpha"));
	ck_assert_int_eq(nt_tp_mode_parse("auto"), NT_TP_AUTO);
	ck_assert_int_eq(nt_tp_mode_parse("tp_btf"), NT_TP_ONLY_BTF);
	ck_assert_int_eq(nt_tp_mode_parse("raw_tp"), NT_TP_ONLY_RAW);
	ck_assert_int_eq(nt_tp_mode_parse("fentry"), -EINVAL);
	ck_assert_str_eq(nt_tp_flavour_name(NT_TP_BTF), "tp_btf");
	ck_assert_str_eq(nt_tp_flavour_name(NT_TP_RAW), "raw_tp");
	btf__free(btf);
}
END_TEST

static void fill(struct kit_tp_bpf *s, struct nt_tp_prog p[4])
{
	p[0] = (struct nt_tp_prog){.tp = "alpha", .btf = s->progs.alpha_btf,
				   .raw = s->progs.alpha_raw};
	p[1] = (struct nt_tp_prog){.tp = "beta", .btf = s->progs.beta_btf};
	p[2] = (struct nt_tp_prog){.tp = "gamma", .btf = s->progs.gamma_btf,
				   .raw = s->progs.gamma_raw, .optional = true};
	p[3] = (struct nt_tp_prog){.tp = "delta", .raw = s->progs.delta_raw,
				   .optional = true};
}

START_TEST(test_tp_apply_btf)
{
	struct kit_tp_bpf *s = kit_tp_bpf__open();
	struct btf *btf = test_btf();
	struct seen seen = {0};
	struct nt_instance *inst = (struct nt_instance *)(void *)&seen;
	struct nt_tp_prog p[4];

	ck_assert_ptr_nonnull(s);
	fill(s, p);
	ck_assert_int_eq(nt_tp_apply(&fake_host, inst, btf, NT_TP_BTF, p, 4), 0);
	ck_assert(p[0].loaded && p[1].loaded && !p[2].loaded && !p[3].loaded);
	ck_assert(bpf_program__autoload(s->progs.alpha_btf));
	ck_assert(!bpf_program__autoload(s->progs.alpha_raw));
	ck_assert(bpf_program__autoload(s->progs.beta_btf));
	ck_assert(!bpf_program__autoload(s->progs.gamma_btf));
	ck_assert(!bpf_program__autoload(s->progs.gamma_raw));
	ck_assert(!bpf_program__autoload(s->progs.delta_raw));
	ck_assert_int_eq(seen.errors, 0);
	ck_assert_int_eq(seen.warnings, 2);
	ck_assert_str_eq(seen.text,
			 "this kernel has no tracepoint gamma; that part is off|"
			 "this kernel has no tracepoint delta; that part is off|");

	/* The same object as raw_tp: beta has no raw_tp program and is
	 * required. */
	memset(&seen, 0, sizeof(seen));
	p[2].skip = true;
	ck_assert_int_eq(nt_tp_apply(&fake_host, inst, btf, NT_TP_RAW, p, 4), -ENOENT);
	ck_assert(p[0].loaded && !p[1].loaded && !p[2].loaded && !p[3].loaded);
	ck_assert(!bpf_program__autoload(s->progs.alpha_btf));
	ck_assert(bpf_program__autoload(s->progs.alpha_raw));
	ck_assert(!bpf_program__autoload(s->progs.beta_btf));
	ck_assert_int_eq(seen.errors, 1);
	ck_assert_str_eq(seen.text,
			 "tracepoint beta needs tp_btf, not raw_tp|"
			 "this kernel has no tracepoint delta; that part is off|");
	kit_tp_bpf__destroy(s);
	btf__free(btf);
}
END_TEST

START_TEST(test_tp_apply_without_btf)
{
	struct kit_tp_bpf *s = kit_tp_bpf__open();
	struct seen seen = {0};
	struct nt_tp_prog p[4];

	ck_assert_ptr_nonnull(s);
	fill(s, p);
	p[1].optional = true;
	/* No BTF: every tracepoint is assumed present. */
	ck_assert_int_eq(nt_tp_apply(&fake_host, (struct nt_instance *)(void *)&seen,
				     NULL, NT_TP_RAW, p, 4), 0);
	ck_assert(p[0].loaded && !p[1].loaded && p[2].loaded && p[3].loaded);
	ck_assert(bpf_program__autoload(s->progs.gamma_raw));
	ck_assert(bpf_program__autoload(s->progs.delta_raw));
	ck_assert_str_eq(seen.text,
			 "tracepoint beta needs tp_btf, not raw_tp; that part is off|");

	/* Named with their group, tracepoints are looked up in tracefs. */
	bool tracefs = access("/sys/kernel/tracing/events", X_OK) == 0 ||
		       access("/sys/kernel/debug/tracing/events", X_OK) == 0;
	struct nt_tp_prog q[] = {
		{.tp = "sched_switch", .group = "sched", .raw = s->progs.switch_raw},
		{.tp = "nt_no_such_tp", .group = "sched", .raw = s->progs.delta_raw,
		 .optional = true},
	};
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(nt_tp_apply(&fake_host, (struct nt_instance *)(void *)&seen,
				     NULL, NT_TP_RAW, q, 2), 0);
	ck_assert(q[0].loaded);
	ck_assert_int_eq(q[1].loaded, !tracefs);
	ck_assert_int_eq(bpf_program__autoload(s->progs.delta_raw), !tracefs);
	ck_assert_str_eq(seen.text, tracefs ? "this kernel has no tracepoint "
					      "nt_no_such_tp; that part is off|" : "");
	kit_tp_bpf__destroy(s);
}
END_TEST

START_TEST(test_tp_choose)
{
	struct kit_tp_bpf *s = kit_tp_bpf__open();
	struct btf *btf = test_btf();
	struct seen seen = {0};
	struct nt_instance *inst = (struct nt_instance *)(void *)&seen;
	struct nt_tp_prog p[4];

	ck_assert_ptr_nonnull(s);
	fill(s, p);
	/* alpha exists in this BTF but not in the kernel: the probe fails. */
	ck_assert_int_eq(nt_tp_flavour(btf, NT_TP_AUTO, p, 4), NT_TP_RAW);
	ck_assert_int_eq(nt_tp_flavour(btf, NT_TP_ONLY_RAW, p, 4), NT_TP_RAW);
	ck_assert_int_eq(nt_tp_flavour(btf, NT_TP_ONLY_BTF, p, 4), -ENOTSUP);
	ck_assert_int_eq(nt_tp_flavour(NULL, NT_TP_AUTO, p, 4), NT_TP_RAW);
	ck_assert_int_eq(nt_tp_choose(&fake_host, inst, btf, NT_TP_ONLY_BTF, p, 4),
			 -ENOTSUP);
	ck_assert_int_eq(seen.errors, 1);
	ck_assert_str_eq(seen.text, "tp_btf programs cannot load here (no BTF "
				    "tracing support or no privilege); use raw_tp|");
	p[1].skip = true;
	ck_assert_int_eq(nt_tp_choose(&fake_host, inst, btf, NT_TP_AUTO, p, 4),
			 NT_TP_RAW);
	ck_assert(bpf_program__autoload(s->progs.alpha_raw));
	kit_tp_bpf__destroy(s);
	btf__free(btf);
}
END_TEST

START_TEST(test_tp_kernel_probe)
{
	struct kit_tp_bpf *s = kit_tp_bpf__open();
	struct nt_vmlinux vm;
	struct seen seen = {0};
	struct nt_instance *inst = (struct nt_instance *)(void *)&seen;
	struct nt_host old_host = fake_host;
	int want;

	ck_assert_ptr_nonnull(s);
	/* A 1.1 host: the plugin parses the BTF itself and owns it. */
	old_host.size = offsetof(struct nt_host, vlog);
	nt_vmlinux_get(&old_host, inst, &vm);
	ck_assert_ptr_eq(vm.btf, vm.owned);
	ck_assert_int_eq(vm.btf != NULL, access("/sys/kernel/btf/vmlinux", R_OK) == 0);
	struct nt_tp_prog p[] = {
		{.tp = "sched_switch", .btf = s->progs.switch_btf,
		 .raw = s->progs.switch_raw},
	};
	want = vm.btf && geteuid() == 0 ? NT_TP_BTF : NT_TP_RAW;
	ck_assert_int_eq(nt_tp_flavour(vm.btf, NT_TP_AUTO, p, 1), want);
	if (vm.btf)
		ck_assert(nt_tp_exists(vm.btf, "sched_switch"));
	nt_vmlinux_put(&vm);
	ck_assert_ptr_eq(vm.btf, NULL);

	/* A 1.2 host too: not host->vmlinux_btf, which would pin the daemon's
	 * parse for the run, but btf__load_vmlinux_btf (the daemon's shared
	 * parse, interposed by core/btfshare.c; a parse of its own here). */
	seen.btf = test_btf();
	nt_vmlinux_get(&fake_host, inst, &vm);
	ck_assert_ptr_ne(vm.btf, seen.btf);
	ck_assert_ptr_eq(vm.btf, vm.owned);
	ck_assert_int_eq(vm.btf != NULL, access("/sys/kernel/btf/vmlinux", R_OK) == 0);
	nt_vmlinux_put(&vm);
	ck_assert_ptr_eq(vm.owned, NULL);
	ck_assert(nt_tp_exists(seen.btf, "alpha")); /* the host's, untouched */
	btf__free((struct btf *)seen.btf);
	kit_tp_bpf__destroy(s);
}
END_TEST

/* A hash map from a fully zeroed attribute block: libbpf 1.1's
 * bpf_map_create and bpf_map_get_next_key pass the kernel a block valgrind
 * sees as partly uninitialised, and this test also runs under valgrind. */
static int set_map_create(uint32_t key_size, uint32_t max)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_HASH;
	a.key_size = key_size;
	a.value_size = 1;
	a.max_entries = max;
	return (int)syscall(__NR_bpf, BPF_MAP_CREATE, &a, sizeof(a));
}

/* The set holds exactly the keys given, each with the value 1; a full map
 * stops the fill with its error, the keys before it kept. */
START_TEST(test_bpf_set_fill)
{
	uint16_t ports[] = {22, 443, 8080}, extra[] = {1, 2}, absent = 80;
	uint8_t val = 0;
	int fd = set_map_create(sizeof(uint16_t), 4);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(nt_bpf_set_fill(fd, ports, sizeof(ports[0]), 3), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(bpf_map_lookup_elem(fd, &ports[i], &val), 0);
		ck_assert_uint_eq(val, 1);
	}
	ck_assert_int_ne(bpf_map_lookup_elem(fd, &absent, &val), 0);
	/* room for one more key only: 3 went in above, no other */
	ck_assert_int_eq(nt_bpf_set_fill(fd, extra, sizeof(extra[0]), 2), -E2BIG);
	ck_assert_int_eq(bpf_map_lookup_elem(fd, &extra[0], &val), 0);
	ck_assert_int_eq(nt_bpf_set_fill(fd, NULL, sizeof(uint16_t), 0), 0);
	close(fd);
}
END_TEST

static Suite *tp_suite(void)
{
	Suite *s = suite_create("kit_tp");
	TCase *t = tcase_create("tp");

	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_tp_exists_and_modes);
	tcase_add_test(t, test_tp_apply_btf);
	tcase_add_test(t, test_tp_apply_without_btf);
	tcase_add_test(t, test_tp_choose);
	tcase_add_test(t, test_tp_kernel_probe);
	tcase_add_test(t, test_bpf_set_fill);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(tp_suite());
	int failed;

	libbpf_set_print(NULL); /* opening is quiet; failed probes are expected */
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
