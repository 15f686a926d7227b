/* SPDX-License-Identifier: MIT */
/* Unit tests of attach-time kernel names (plugins/cuda/cuda_kname.c): the
 * name-offset learner on synthetic process memory (known names, a decoy
 * string shared by every struct, a contradiction, a guess from unknown
 * handles only), the plausibility checks and the runtime -> driver join. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/cuda/cuda_decode.h"
#include "../../plugins/cuda/cuda_kname.h"

/* Synthetic memory: regions at fixed addresses. */
struct region {
	uint64_t addr;
	size_t len;
	unsigned char bytes[512];
};
struct mem {
	struct region r[64];
	int n;
	int reads;
};

static ssize_t mem_read(void *arg, uint32_t pid, uint64_t addr, void *buf,
			size_t len)
{
	struct mem *m = arg;

	(void)pid;
	m->reads++;
	for (int i = 0; i < m->n; i++) {
		struct region *r = &m->r[i];

		if (addr >= r->addr && addr < r->addr + r->len) {
			size_t off = addr - r->addr;
			size_t n = len < r->len - off ? len : r->len - off;

			memcpy(buf, r->bytes + off, n);
			return (ssize_t)n;
		}
	}
	return -EFAULT;
}

static uint64_t put_str(struct mem *m, uint64_t addr, const char *s)
{
	struct region *r = &m->r[m->n++];

	r->addr = addr;
	r->len = strlen(s) + 1;
	memcpy(r->bytes, s, r->len);
	return addr;
}

/* A 256-byte function struct at addr: the name pointer at name_off, the
 * shared module name at 16, a pointer to the struct itself at 0. */
static uint64_t put_struct(struct mem *m, uint64_t addr, int name_off,
			   uint64_t name_ptr, uint64_t module_ptr)
{
	struct region *r = &m->r[m->n++];

	r->addr = addr;
	r->len = 256;
	memset(r->bytes, 0, sizeof(r->bytes));
	memcpy(r->bytes, &addr, 8);
	memcpy(r->bytes + 16, &module_ptr, 8);
	memcpy(r->bytes + name_off, &name_ptr, 8);
	return addr;
}

static const char *const mangled[] = {
	"_Z4gemmPfS_i", "_Z4reluPfi", "_Z3addPKfS0_Pfi", "_Z7softmaxPfii",
	"_Z5scalePff", "_Z6reducePKfPfi", "triton_poi_fused_add_0",
	"triton_red_fused_sum_1", "_Z4castPvS_", "_Z4normPfi",
};
static const char *const demangled[] = {
	"gemm(float*, float*, int)", "relu(float*, int)",
};

/* Ten handles at 0x10000 + i * 0x1000, names at 0x80000 + i * 0x100,
 * the name pointer at offset 72. */
static void build(struct mem *m)
{
	uint64_t module;

	memset(m, 0, sizeof(*m));
	module = put_str(m, 0x90000, "fx_module");
	for (int i = 0; i < 10; i++) {
		uint64_t name = put_str(m, 0x80000 + (uint64_t)i * 0x100,
					mangled[i]);

		put_struct(m, 0x10000 + (uint64_t)i * 0x1000, 72, name, module);
	}
}

#define H(i) (0x10000 + (uint64_t)(i) * 0x1000)

START_TEST(test_learn_from_known)
{
	static struct mem m;
	struct nt_cuda_koff k;
	char *s;

	build(&m);
	nt_cuda_koff_init(&k);
	ck_assert_ptr_null(nt_cuda_koff_name(&k, mem_read, &m, 1, H(5)));
	/* raw mangled, demangled, raw: three known handles */
	ck_assert_int_eq(nt_cuda_koff_teach(&k, mem_read, &m, 1, H(0), demangled[0]), 0);
	ck_assert_int_eq(nt_cuda_koff_teach(&k, mem_read, &m, 1, H(1), demangled[1]), 0);
	ck_assert_int_eq(k.offset, -1);
	ck_assert_int_eq(nt_cuda_koff_teach(&k, mem_read, &m, 1, H(2), mangled[2]), 1);
	ck_assert_int_eq(k.offset, 72);
	ck_assert(!k.guessed);
	ck_assert_uint_eq(k.agree[72 / 8], 3);
	ck_assert_uint_eq(k.agree[16 / 8], 0); /* the decoy never matched */
	s = nt_cuda_koff_name(&k, mem_read, &m, 1, H(4));
	ck_assert_str_eq(s, "scale(float*, float)");
	free(s);
	s = nt_cuda_koff_name(&k, mem_read, &m, 1, H(7));
	ck_assert_str_eq(s, "triton_red_fused_sum_1");
	free(s);
	ck_assert_uint_eq(k.named, 2);
	/* unreadable handle, and a struct whose name fails the checks */
	ck_assert_ptr_null(nt_cuda_koff_name(&k, mem_read, &m, 1, 0x70000));
	put_struct(&m, 0x40000, 72, put_str(&m, 0x41000, "not a name!"), 0);
	ck_assert_ptr_null(nt_cuda_koff_name(&k, mem_read, &m, 1, 0x40000));
	ck_assert_uint_eq(k.refused, 1);
	/* a later known handle confirms */
	nt_cuda_koff_teach(&k, mem_read, &m, 1, H(3), mangled[3]);
	ck_assert_uint_eq(k.confirmed, 1);
	ck_assert_uint_eq(k.contradicted, 0);
}
END_TEST

START_TEST(test_contradiction_unlearns)
{
	static struct mem m;
	struct nt_cuda_koff k;

	build(&m);
	nt_cuda_koff_init(&k);
	for (int i = 0; i < 3; i++)
		nt_cuda_koff_teach(&k, mem_read, &m, 1, H(i), mangled[i]);
	ck_assert_int_eq(k.offset, 72);
	/* a known name the struct at 72 does not hold (a wrong join) */
	nt_cuda_koff_teach(&k, mem_read, &m, 1, H(3), "other_kernel");
	ck_assert_uint_eq(k.contradicted, 1);
	ck_assert_int_eq(k.offset, -1); /* 3 for, 1 against: not trusted */
	for (int i = 4; i < 10; i++)
		nt_cuda_koff_teach(&k, mem_read, &m, 1, H(i), mangled[i]);
	ck_assert_int_eq(k.offset, 72); /* 9 for, 1 against */
}
END_TEST

START_TEST(test_guess_from_unknown)
{
	static struct mem m;
	struct nt_cuda_koff k;
	char *s;

	build(&m);
	/* handle 3 is of another kind: its name pointer at 120 */
	put_struct(&m, 0x30000, 120, put_str(&m, 0x31000, "_Z3oddv"), 0x90000);
	nt_cuda_koff_init(&k);
	for (int i = 0; i < 7; i++)
		ck_assert_int_eq(nt_cuda_koff_observe(&k, mem_read, &m, 1,
						      i == 3 ? 0x30000 : H(i)), 0);
	ck_assert_int_eq(k.offset, -1);
	/* the 8th: slot 72 names 7 of 8 (4 in 5 at least), each differently;
	 * the module at 16 is plausible but shared, the self pointer at 0
	 * names nothing, 120 names 1 */
	ck_assert_int_eq(nt_cuda_koff_observe(&k, mem_read, &m, 1, H(7)), 1);
	ck_assert_int_eq(k.offset, 72);
	ck_assert(k.guessed);
	s = nt_cuda_koff_name(&k, mem_read, &m, 1, H(9));
	ck_assert_str_eq(s, "norm(float*, int)");
	free(s);
	/* known names overrule the guess (here: confirm it) */
	for (int i = 0; i < 3; i++)
		nt_cuda_koff_teach(&k, mem_read, &m, 1, H(i), mangled[i]);
	ck_assert(!k.guessed);
	ck_assert_int_eq(k.offset, 72);
}
END_TEST

START_TEST(test_plausible)
{
	ck_assert(nt_cuda_kname_plausible("_Z4gemmPfS_i"));
	ck_assert(nt_cuda_kname_plausible("triton_poi_fused_add_0"));
	ck_assert(nt_cuda_kname_plausible("sm90_xmma_gemm_f16f16_f32"));
	ck_assert(!nt_cuda_kname_plausible("_Zgarbage"));
	ck_assert(!nt_cuda_kname_plausible("a b"));
	ck_assert(!nt_cuda_kname_plausible("/lib/x.so"));
	ck_assert(!nt_cuda_kname_plausible("9abc"));
	ck_assert(!nt_cuda_kname_plausible("x"));
	ck_assert(!nt_cuda_kname_plausible(""));
	ck_assert(!nt_cuda_kname_plausible(NULL));
}
END_TEST

START_TEST(test_join)
{
	struct nt_cuda_knproc kp;

	nt_cuda_knproc_init(&kp);
	nt_cuda_kn_note_runtime(&kp, 5, 1000, 0xaaa);
	ck_assert_uint_eq(nt_cuda_kn_join_driver(&kp, 6, 1500), 0);
	ck_assert_uint_eq(nt_cuda_kn_join_driver(&kp, 5, 1000 + NT_CUDA_JOIN_NS + 1), 0);
	nt_cuda_kn_note_runtime(&kp, 5, 2000, 0xbbb);
	nt_cuda_kn_note_runtime(&kp, 7, 2100, 0xccc);
	ck_assert_uint_eq(nt_cuda_kn_join_driver(&kp, 5, 2500), 0xbbb);
	ck_assert_uint_eq(nt_cuda_kn_join_driver(&kp, 5, 2600), 0); /* taken */
	ck_assert_uint_eq(nt_cuda_kn_join_driver(&kp, 7, 2700), 0xccc);
	nt_cuda_kn_set_method(&kp, 0x1234, NT_KNAME_JOIN);
	ck_assert_int_eq(nt_cuda_kn_method(&kp, 0x1234), NT_KNAME_JOIN);
	ck_assert_int_eq(nt_cuda_kn_method(&kp, 0x9999), NT_KNAME_NONE);
	ck_assert_str_eq(nt_cuda_kname_method_name(NT_KNAME_MEMORY), "memory");
	nt_cuda_knproc_fini(&kp);
}
END_TEST

/* Host stubs 0x1000.. named by the symbolizer, nothing else. */
static int stub_sym(void *arg, uint32_t pid, uint64_t addr,
		    struct nt_symbol *s)
{
	(void)arg;
	(void)pid;
	memset(s, 0, sizeof(*s));
	if (addr >= 0x1000 && addr < 0x1000 + 4 * 0x10) {
		const char *const n[] = { mangled[0], mangled[1],
						 mangled[2], mangled[3] };

		s->name = demangled[0]; /* the core demangles */
		if (addr != 0x1000)
			s->name = n[(addr - 0x1000) / 0x10];
		s->module = "/w/job";
		return 0;
	}
	return -ENOENT;
}

static struct nt_cuda_raw_launch rec(int layer, uint32_t tid, uint64_t ts,
				     uint64_t func)
{
	struct nt_cuda_raw_launch r;

	memset(&r, 0, sizeof(r));
	r.hdr.pid = 1;
	r.hdr.tid = tid;
	r.hdr.ts_ns = ts;
	r.layer = (uint8_t)layer;
	r.func = func;
	r.first = 1;
	return r;
}

/* The decoder end to end: runtime launches named by their stubs, the
 * driver launches they made joined, the offset learned from the joins,
 * an old driver handle named from memory, a direct driver launch after a
 * joined one on the same thread not joined. */
START_TEST(test_decoder_join_and_memory)
{
	static struct mem m;
	struct nt_cuda_state st;
	struct nt_cuda_raw_launch r;

	build(&m);
	nt_cuda_state_init(&st, stub_sym, NULL);
	st.mem = mem_read;
	st.mem_arg = &m;
	for (int i = 0; i < 3; i++) {
		r = rec(NT_CUDA_LAYER_RUNTIME, 5, 1000 + i * 100, 0x1000 + i * 0x10);
		ck_assert_str_ne(nt_cuda_launch_name(&st, &r), "");
		r = rec(NT_CUDA_LAYER_DRIVER, 5, 1010 + i * 100, H(i));
		ck_assert_str_eq(nt_cuda_launch_name(&st, &r),
				 i ? mangled[i] : demangled[0]);
		ck_assert_int_eq(nt_cuda_kernel_method(&st, 1, H(i)), NT_KNAME_JOIN);
		ck_assert_int_eq(nt_cuda_kernel_method(&st, 1, 0x1000 + i * 0x10),
				 NT_KNAME_SYMBOL);
	}
	ck_assert_int_eq(st.koff.offset, 72);
	/* a direct driver launch on thread 5 right after: memory, not join */
	r = rec(NT_CUDA_LAYER_DRIVER, 5, 1250, H(6));
	ck_assert_str_eq(nt_cuda_launch_name(&st, &r), "triton_poi_fused_add_0");
	ck_assert_int_eq(nt_cuda_kernel_method(&st, 1, H(6)), NT_KNAME_MEMORY);
	/* an unreadable driver handle: unnamed, remembered as such */
	r = rec(NT_CUDA_LAYER_DRIVER, 6, 2000, 0x70000);
	ck_assert_str_eq(nt_cuda_launch_name(&st, &r), "");
	m.reads = 0;
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 1, NT_CUDA_LAYER_DRIVER, 0x70000), "");
	ck_assert_int_eq(m.reads, 0);
	ck_assert_int_eq(nt_cuda_kernel_method(&st, 1, 0x70000), NT_KNAME_NONE);
	nt_cuda_state_fini(&st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cuda_kname");
	TCase *tc = tcase_create("kname");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_learn_from_known);
	tcase_add_test(tc, test_contradiction_unlearns);
	tcase_add_test(tc, test_guess_from_unknown);
	tcase_add_test(tc, test_plausible);
	tcase_add_test(tc, test_join);
	tcase_add_test(tc, test_decoder_join_and_memory);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
