/* SPDX-License-Identifier: MIT */
/* Unit tests of the mem probe's kernel-free logic (plugins/mem/mem_logic.c). */
#include <linux/types.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/sb.h"
#include "mem.h"
#include "mem_logic.h"

/* ---- instruction decoding ----------------------------------------- */

static void decode(const uint8_t *code, size_t n, struct mem_insn *out)
{
	mem_insn_decode(code, n, out);
}

START_TEST(test_decode_emulated)
{
	struct mem_insn d;
	static const uint8_t push_r12[] = {0x41, 0x54};
	static const uint8_t push_rbp[] = {0x55};
	static const uint8_t je32[] = {0x0f, 0x84, 0xbf, 0x00, 0x00, 0x00};
	static const uint8_t jne8[] = {0x75, 0x14};
	static const uint8_t jmp32[] = {0xe9, 0x32, 0xf6, 0xff, 0xff};
	static const uint8_t call[] = {0xe8, 0, 0, 0, 0};
	static const uint8_t nop[] = {0x90};
	static const uint8_t push_rex_w[] = {0x48, 0x55}; /* not emulated */

	decode(push_r12, sizeof(push_r12), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	ck_assert_uint_eq(d.len, 2);
	ck_assert_str_eq(d.text, "push %r12");
	decode(push_rbp, sizeof(push_rbp), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	ck_assert_uint_eq(d.len, 1);
	ck_assert_str_eq(d.text, "push %rbp");
	decode(je32, sizeof(je32), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	ck_assert_uint_eq(d.len, 6);
	decode(jne8, sizeof(jne8), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	ck_assert_uint_eq(d.len, 2);
	decode(jmp32, sizeof(jmp32), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	ck_assert_uint_eq(d.len, 5);
	decode(call, sizeof(call), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	decode(nop, sizeof(nop), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_EMULATED);
	decode(push_rex_w, sizeof(push_rex_w), &d);
	ck_assert_int_ne(d.cls, MEM_INSN_EMULATED);
}
END_TEST

START_TEST(test_decode_skippable)
{
	struct mem_insn d;
	static const uint8_t test_rdi[] = {0x48, 0x85, 0xff};
	static const uint8_t cmpb_rip[] = {0x80, 0x3d, 0x46, 0x1b, 0x14, 0x00, 0x00};
	static const uint8_t mov_ecx_r10d[] = {0x41, 0x89, 0xca};
	static const uint8_t test_imm_r9d[] = {0x41, 0xf7, 0xc1, 0xff, 0x0f, 0x00, 0x00};
	static const uint8_t mov_imm_eax[] = {0xb8, 0x0b, 0x00, 0x00, 0x00};
	static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
	static const uint8_t nopw[] = {0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0};
	static const uint8_t xor_eax[] = {0x31, 0xc0};

	decode(test_rdi, sizeof(test_rdi), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 3);
	ck_assert_str_eq(d.text, "test %rdi,%rdi");
	decode(cmpb_rip, sizeof(cmpb_rip), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 7);
	decode(mov_ecx_r10d, sizeof(mov_ecx_r10d), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 3);
	ck_assert_str_eq(d.text, "mov %ecx,%r10d");
	decode(test_imm_r9d, sizeof(test_imm_r9d), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 7);
	decode(mov_imm_eax, sizeof(mov_imm_eax), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 5);
	decode(endbr64, sizeof(endbr64), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 4);
	decode(nopw, sizeof(nopw), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 10);
	decode(xor_eax, sizeof(xor_eax), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_SKIPPABLE);
	ck_assert_uint_eq(d.len, 2);
}
END_TEST

START_TEST(test_decode_refuses)
{
	struct mem_insn d;
	/* Writes an argument register: a probe after it would read a
	 * changed argument. */
	static const uint8_t mov_rdi_rbx[] = {0x48, 0x89, 0xfb};
	static const uint8_t sub_rsp[] = {0x48, 0x83, 0xec, 0x18};
	static const uint8_t syscall_[] = {0x0f, 0x05};
	static const uint8_t mul_rsi[] = {0x48, 0xf7, 0xe6};
	static const uint8_t truncated[] = {0x80, 0x3d, 0x46};

	decode(mov_rdi_rbx, sizeof(mov_rdi_rbx), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_UNKNOWN);
	decode(sub_rsp, sizeof(sub_rsp), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_UNKNOWN);
	decode(syscall_, sizeof(syscall_), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_UNKNOWN);
	decode(mul_rsi, sizeof(mul_rsi), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_UNKNOWN);
	decode(truncated, sizeof(truncated), &d);
	ck_assert_int_eq(d.cls, MEM_INSN_UNKNOWN);
	ck_assert_uint_eq(d.len, 0);
}
END_TEST

/* The first bytes of glibc 2.36's allocator functions (Debian 12). */
START_TEST(test_choose_attach_glibc)
{
	struct mem_attach_point ap;
	static const uint8_t free_[] = {0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0x00,
					0x00, 0x00, 0x55, 0x48, 0x8d, 0x77, 0xf0};
	static const uint8_t malloc_[] = {0x41, 0x54, 0x55, 0x53, 0x48, 0x89, 0xfb};
	static const uint8_t memalign_[] = {0x80, 0x3d, 0x71, 0x0e, 0x14, 0x00, 0x00,
					    0x74, 0x07, 0xe9, 0x32, 0xf6, 0xff, 0xff};
	static const uint8_t mmap_[] = {0x41, 0x89, 0xca, 0x41, 0xf7, 0xc1, 0xff, 0x0f,
					0x00, 0x00, 0x75, 0x14, 0xb8, 0x09};
	static const uint8_t munmap_[] = {0xb8, 0x0b, 0x00, 0x00, 0x00, 0x0f, 0x05,
					  0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff};
	static const uint8_t reallocarray_[] = {0x48, 0x89, 0xf0, 0x48, 0xf7, 0xe2};

	mem_choose_attach_isa(MEM_ISA_X86_64, free_, sizeof(free_), true, &ap);
	ck_assert_uint_eq(ap.skip, 3);
	ck_assert(ap.emulated);
	ck_assert_str_eq(ap.first.text, "test %rdi,%rdi");
	ck_assert_str_eq(ap.at.text, "jcc rel32");

	mem_choose_attach_isa(MEM_ISA_X86_64, free_, sizeof(free_), false, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(!ap.emulated);

	mem_choose_attach_isa(MEM_ISA_X86_64, malloc_, sizeof(malloc_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(ap.emulated);

	mem_choose_attach_isa(MEM_ISA_X86_64, memalign_, sizeof(memalign_), true, &ap);
	ck_assert_uint_eq(ap.skip, 7);
	ck_assert(ap.emulated);

	mem_choose_attach_isa(MEM_ISA_X86_64, mmap_, sizeof(mmap_), true, &ap);
	ck_assert_uint_eq(ap.skip, 10);
	ck_assert(ap.emulated);

	/* mov + syscall: nothing emulated within reach, probe the entry */
	mem_choose_attach_isa(MEM_ISA_X86_64, munmap_, sizeof(munmap_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(!ap.emulated);

	/* mov %rsi,%rax is skippable, mul writes rdx (an argument): stop */
	mem_choose_attach_isa(MEM_ISA_X86_64, reallocarray_, sizeof(reallocarray_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(!ap.emulated);

	/* the function is shorter than the skipped run: stay at the entry */
	mem_choose_attach_isa(MEM_ISA_X86_64, free_, 3, true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
}
END_TEST

/* The same on Debian 12's arm64 glibc 2.36: always the entry; free's cbz
 * is simulated, the frame push of the others is stepped, munmap's nop is
 * stepped too (simulated only on recent kernels). */
START_TEST(test_choose_attach_glibc_a64)
{
	struct mem_attach_point ap;
	static const uint8_t free_[] = {0x80, 0x08, 0x00, 0xb4, 0xfd, 0x7b, 0xbc, 0xa9};
	static const uint8_t malloc_[] = {0xfd, 0x7b, 0xbc, 0xa9, 0xfd, 0x03, 0x00, 0x91};
	static const uint8_t mmap_[] = {0xbf, 0x2c, 0x40, 0xf2, 0x21, 0x01, 0x00, 0x54};
	static const uint8_t munmap_[] = {0x1f, 0x20, 0x03, 0xd5, 0xe8, 0x1a, 0x80, 0xd2};
	static const uint8_t ldr_lit[] = {0x40, 0x00, 0x00, 0x58};

	mem_choose_attach_isa(MEM_ISA_AARCH64, free_, sizeof(free_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(ap.emulated);
	ck_assert_str_eq(ap.first.text, "cbz x0");
	ck_assert_str_eq(ap.at.text, "cbz x0");

	/* allow_skip changes nothing: x30 must still hold the return address */
	mem_choose_attach_isa(MEM_ISA_AARCH64, malloc_, sizeof(malloc_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(!ap.emulated);
	ck_assert_str_eq(ap.first.text, "stp x29, x30, [sp, #-64]!");

	mem_choose_attach_isa(MEM_ISA_AARCH64, mmap_, sizeof(mmap_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(!ap.emulated);
	ck_assert_str_eq(ap.first.text, "f2402cbf"); /* tst x5, #0xfff */

	mem_choose_attach_isa(MEM_ISA_AARCH64, munmap_, sizeof(munmap_), true, &ap);
	ck_assert(!ap.emulated);
	ck_assert_str_eq(ap.first.text, "nop");

	mem_choose_attach_isa(MEM_ISA_AARCH64, ldr_lit, sizeof(ldr_lit), true, &ap);
	ck_assert(!ap.emulated);
	ck_assert_str_eq(ap.first.text, "ldr (literal) (refused)");

	mem_choose_attach_isa(MEM_ISA_AARCH64, free_, 2, true, &ap);
	ck_assert_uint_eq(ap.first.len, 0);
	ck_assert(!ap.emulated);

	/* another instruction set: not decoded, the entry */
	mem_choose_attach_isa(MEM_ISA_OTHER, free_, sizeof(free_), true, &ap);
	ck_assert_uint_eq(ap.skip, 0);
	ck_assert(!ap.emulated);
	ck_assert_str_eq(ap.first.text, "(not decoded)");
}
END_TEST

/* ---- finding the C library ------------------------------------------ */

START_TEST(test_maps_find_libc)
{
	char out[256];
	const char *maps =
		"55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 123 /usr/bin/app\n"
		"7f1c2a000000-7f1c2a021000 rw-p 00000000 00:00 0 \n"
		"7f1c2a200000-7f1c2a226000 r--p 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libcrypt.so.1\n"
		"7f1c2a400000-7f1c2a426000 r--p 00000000 fd:01 789 /lib/x86_64-linux-gnu/libc.so.6\n"
		"7f1c2a426000-7f1c2a57b000 r-xp 00026000 fd:01 789 /lib/x86_64-linux-gnu/libc.so.6\n"
		"7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0 [stack]\n";
	const char *old = "7f00-7f01 r-xp 0 fd:01 1 /lib64/libc-2.17.so\n";
	const char *musl = "7f00-7f01 r-xp 0 fd:01 1 /lib/ld-musl-x86_64.so.1\n";
	const char *none = "7f00-7f01 r-xp 0 fd:01 1 /usr/bin/static\n"
			   "7f02-7f03 rw-p 0 00:00 0 [heap]\n";

	ck_assert_int_eq(mem_maps_find_libc(maps, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/lib/x86_64-linux-gnu/libc.so.6");
	ck_assert_int_eq(mem_maps_find_libc(old, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/lib64/libc-2.17.so");
	ck_assert_int_eq(mem_maps_find_libc(musl, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/lib/ld-musl-x86_64.so.1");
	ck_assert_int_eq(mem_maps_find_libc(none, out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(mem_maps_find_libc(maps, out, 8), -ENAMETOOLONG);
	ck_assert(!mem_is_libc_path("/usr/lib/libcrypt.so.1"));
	ck_assert(!mem_is_libc_path("/usr/lib/libc-client.so.2007e"));
	ck_assert(!mem_is_libc_path("libc.so.6"));
}
END_TEST

START_TEST(test_ldconfig_find_libc)
{
	char out[256];
	const char *text =
		"1234 libs found in cache `/etc/ld.so.cache'\n"
		"\tlibcrypt.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcrypt.so.1\n"
		"\tlibc.so.6 (libc6,x32) => /libx32/libc.so.6\n"
		"\tlibc.so.6 (libc6,AArch64) => /lib/aarch64-linux-gnu/libc.so.6\n"
		"\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"
		"\tlibc.so.6 (libc6) => /lib32/libc.so.6\n";

	/* the line of this machine's ABI, whichever comes first */
	ck_assert_int_eq(mem_ldconfig_find_libc(text, out, sizeof(out)), 0);
#if defined(__x86_64__)
	ck_assert_str_eq(out, "/lib/x86_64-linux-gnu/libc.so.6");
#elif defined(__aarch64__)
	ck_assert_str_eq(out, "/lib/aarch64-linux-gnu/libc.so.6");
#endif
	ck_assert_int_eq(mem_ldconfig_find_libc("nothing\n", out, sizeof(out)), -ENOENT);
}
END_TEST

/* ---- ELF ----------------------------------------------------------- */

/* The real C library of this process: malloc and free resolve to code. */
START_TEST(test_elf_find_func)
{
	char maps[1 << 16], lib[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	size_t n;
	struct mem_elf_func ef, ef2;

	ck_assert_ptr_nonnull(f);
	n = fread(maps, 1, sizeof(maps) - 1, f);
	maps[n] = '\0';
	fclose(f);
	ck_assert_int_eq(mem_maps_find_libc(maps, lib, sizeof(lib)), 0);
	ck_assert_int_eq(mem_elf_find_func(lib, "malloc", &ef), 0);
	ck_assert_uint_gt(ef.size, 16);
	ck_assert_uint_eq(ef.code_len, 16);
	ck_assert_int_eq(mem_elf_find_func(lib, "free", &ef2), 0);
	ck_assert_uint_ne(ef.file_off, ef2.file_off);
	ck_assert_int_eq(mem_elf_find_func(lib, "no_such_function_xyz", &ef), -ENOENT);
	ck_assert_int_lt(mem_elf_find_func("/nonexistent/lib.so", "malloc", &ef), 0);
}
END_TEST

/* ---- function names -------------------------------------------------- */

START_TEST(test_fn_names)
{
	ck_assert_int_eq(mem_fn_from_name("malloc"), MEM_FN_MALLOC);
	ck_assert_int_eq(mem_fn_from_name("pvalloc"), MEM_FN_PVALLOC);
	ck_assert_int_eq(mem_fn_from_name("mallocc"), -1);
	ck_assert_int_eq(mem_fn_from_name("mmap"), -1); /* track_mmap's job */
	ck_assert_str_eq(mem_fn_name(MEM_FN_POSIX_MEMALIGN), "posix_memalign");
	ck_assert(mem_fn_needs_return(MEM_FN_MALLOC));
	ck_assert(mem_fn_needs_return(MEM_FN_MMAP));
	ck_assert(!mem_fn_needs_return(MEM_FN_FREE));
	ck_assert(!mem_fn_needs_return(MEM_FN_MUNMAP));
}
END_TEST

/* ---- grouping ------------------------------------------------------- */

START_TEST(test_groups)
{
	struct mem_groups g;
	struct mem_group top[3];
	size_t total;

	mem_groups_init(&g);
	/* pid 7: 100 x 1 KiB from stack 3, 5 x 4 KiB from stack 9, one
	 * sampled 64-byte block of weight 16 from stack 2; pid 8: one. */
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(mem_groups_add(&g, 7, 3, MEM_KIND_HEAP, 1024, 1, 1000 + i), 0);
	for (int i = 0; i < 5; i++)
		mem_groups_add(&g, 7, 9, MEM_KIND_HEAP, 4096, 1, 500);
	mem_groups_add(&g, 7, 2, MEM_KIND_HEAP, 64 * 16, 16, 10);
	mem_groups_add(&g, 7, 3, MEM_KIND_MMAP, 1 << 20, 1, 10);
	mem_groups_add(&g, 8, 3, MEM_KIND_HEAP, 1, 1, 10);
	ck_assert_uint_eq(nt_hmap_count(&g.map), 5);

	ck_assert_uint_eq(mem_groups_top(&g, 7, top, 3, &total), 3);
	ck_assert_uint_eq(total, 4);
	ck_assert_int_eq(top[0].stack_id, 3);
	ck_assert_uint_eq(top[0].kind, MEM_KIND_MMAP);
	ck_assert_uint_eq(top[1].stack_id, 3);
	ck_assert_uint_eq(top[1].kind, MEM_KIND_HEAP);
	ck_assert_uint_eq(top[1].bytes, 102400);
	ck_assert_uint_eq(top[1].count, 100);
	ck_assert_uint_eq(top[1].oldest_ns, 1000);
	ck_assert_int_eq(top[2].stack_id, 9);
	ck_assert_uint_eq(top[2].bytes, 20480);

	ck_assert_uint_eq(mem_groups_top(&g, 8, top, 3, &total), 1);
	ck_assert_uint_eq(top[0].bytes, 1);
	ck_assert_uint_eq(mem_groups_top(&g, 9, top, 3, &total), 0);
	ck_assert_uint_eq(total, 0);

	/* one sorted array, runs per process */
	size_t ns, cnt;
	struct mem_group *all = mem_groups_sorted(&g, &ns);
	const struct mem_group *run;

	ck_assert_ptr_nonnull(all);
	ck_assert_uint_eq(ns, 5);
	run = mem_groups_find(all, ns, 7, &cnt);
	ck_assert_uint_eq(cnt, 4);
	ck_assert_uint_eq(run[0].kind, MEM_KIND_MMAP);
	ck_assert_uint_eq(run[1].bytes, 102400);
	ck_assert_uint_eq(run[3].bytes, 1024);
	run = mem_groups_find(all, ns, 8, &cnt);
	ck_assert_uint_eq(cnt, 1);
	ck_assert_uint_eq(run[0].tgid, 8);
	ck_assert_ptr_null(mem_groups_find(all, ns, 5, &cnt));
	ck_assert_uint_eq(cnt, 0);
	ck_assert_ptr_null(mem_groups_find(all, ns, 9, &cnt));
	free(all);

	/* growth keeps every group */
	for (int s = 0; s < 1000; s++)
		mem_groups_add(&g, 11, s, MEM_KIND_HEAP, (uint64_t)s + 1, 1, 0);
	ck_assert_uint_eq(mem_groups_top(&g, 11, top, 1, &total), 1);
	ck_assert_uint_eq(total, 1000);
	ck_assert_int_eq(top[0].stack_id, 999);
	mem_groups_reset(&g);
	ck_assert_uint_eq(mem_groups_top(&g, 7, top, 3, &total), 0);
	mem_groups_free(&g);
}
END_TEST

/* ---- stack text ------------------------------------------------------ */

START_TEST(test_symcache)
{
	struct mem_symcache c;
	const struct mem_stack_text *t;
	char text[32], fn[32];

	mem_symcache_init(&c);
	ck_assert_ptr_null(mem_symcache_get(&c, 1, 1));
	for (int i = 0; i < 300; i++) {
		snprintf(text, sizeof(text), "t%d", i);
		snprintf(fn, sizeof(fn), "f%d", i);
		ck_assert_int_eq(mem_symcache_put(&c, (uint32_t)(i % 3), i, text, fn, i == 7), 0);
	}
	t = mem_symcache_get(&c, 2, 299); /* 299 % 3 == 2 */
	ck_assert_ptr_nonnull(t);
	t = mem_symcache_get(&c, 1, 7);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t->text, "t7");
	ck_assert_str_eq(t->function, "f7");
	ck_assert(t->incomplete);
	mem_symcache_put(&c, 1, 7, "new", "g", false);
	ck_assert_str_eq(mem_symcache_get(&c, 1, 7)->text, "new");
	ck_assert(!mem_symcache_get(&c, 1, 7)->incomplete);
	ck_assert_uint_eq(nt_hmap_count(&c.map), 300);
	mem_symcache_forget(&c, 1);
	ck_assert_uint_eq(nt_hmap_count(&c.map), 200);
	ck_assert_ptr_null(mem_symcache_get(&c, 1, 7));
	ck_assert_str_eq(mem_symcache_get(&c, 0, 3)->text, "t3");
	mem_symcache_free(&c);
}
END_TEST

START_TEST(test_frames)
{
	char buf[128];
	struct nt_symbol sym = {.name = "leak_some", .offset = 0x2a,
				.module = "/tmp/x/mem-leaker"};

	mem_format_frame(buf, sizeof(buf), 0x401000, 0, &sym);
	ck_assert_str_eq(buf, "leak_some+0x2a (mem-leaker)");
	/* no symbol: the frame keeps its offset in the module */
	mem_format_frame(buf, sizeof(buf), 0x401000, -ENOENT, &sym);
	ck_assert_str_eq(buf, "mem-leaker+0x2a");
	memset(&sym, 0, sizeof(sym));
	mem_format_frame(buf, sizeof(buf), 0xdead, -ESRCH, &sym);
	ck_assert_str_eq(buf, "0xdead");
	/* where the frame-pointer walk went past the stack */
	ck_assert(mem_frame_implausible(0xdead, 0x401000, -ESRCH, &sym));   /* no module */
	sym.module = "/tmp/x/mem-leaker";
	sym.name = "main";
	ck_assert(!mem_frame_implausible(0x401000, 0x402000, 0, &sym));
	ck_assert(mem_frame_implausible(0x401000, 0x401000, 0, &sym));     /* a repeat */
	sym.module = "/lib64/ld-linux-x86-64.so.2";
	ck_assert(!mem_frame_implausible(0x7f0000, 0x401000, 0, &sym));    /* named */
	sym.name = NULL;
	ck_assert(mem_frame_implausible(0x7f0000, 0x401000, -ENOENT, &sym));

	ck_assert(mem_frame_is_allocator("operator new(unsigned long)", "/usr/lib/libstdc++.so.6", NULL));
	ck_assert(mem_frame_is_allocator("strdup", "/lib/libc.so.6", "/lib/libc.so.6"));
	ck_assert(mem_frame_is_allocator("malloc", "/opt/libjemalloc.so.2", NULL));
	ck_assert(!mem_frame_is_allocator("leak_some", "/tmp/x/mem-leaker", "/lib/libc.so.6"));
}
END_TEST

START_TEST(test_bytes_and_statm)
{
	char b[32];
	uint64_t s, r, sh;

	nt_fmt_bytes(512, b, sizeof(b));
	ck_assert_str_eq(b, "512 B");
	nt_fmt_bytes(102400, b, sizeof(b));
	ck_assert_str_eq(b, "100.0 KiB");
	nt_fmt_bytes(64ull << 20, b, sizeof(b));
	ck_assert_str_eq(b, "64.0 MiB");
	nt_fmt_bytes(3ull << 30, b, sizeof(b));
	ck_assert_str_eq(b, "3.0 GiB");
	ck_assert_int_eq(mem_parse_statm("2500 1200 300 10 0 900 0\n", &s, &r, &sh), 0);
	ck_assert_uint_eq(s, 2500);
	ck_assert_uint_eq(r, 1200);
	ck_assert_uint_eq(sh, 300);
	ck_assert_int_eq(mem_parse_statm("x", &s, &r, &sh), -EINVAL);
}
END_TEST

START_TEST(test_report_text)
{
	char buf[2048];
	struct mem_group g[2] = {
		{.tgid = 7, .stack_id = 3, .kind = MEM_KIND_HEAP, .bytes = 102400, .count = 100},
		{.tgid = 7, .stack_id = 5, .kind = MEM_KIND_MMAP, .bytes = 64u << 20, .count = 1},
	};
	struct mem_report_line lines[2] = {
		{&g[0], "main+0x40 (mem-leaker);leak_some+0x2a (mem-leaker)", "leak_some"},
		{&g[1], NULL, NULL},
	};
	struct mem_report_proc p = {
		.pid = 7, .comm = "mem-leaker", .final = true, .heap = true,
		.live_bytes = 102400, .live_allocs = 100, .peak_bytes = 1024000,
		.allocs = 1000, .frees = 900, .rss = true,
		.rss_bytes = 70u << 20, .peak_rss_bytes = 71u << 20,
	};
	size_t n = mem_format_report(buf, sizeof(buf), &p, lines, 2, 5);

	ck_assert_uint_eq(n, strlen(buf));
	ck_assert_str_eq(buf,
		"pid 7 (mem-leaker) exited: heap 100.0 KiB in 100 allocations outstanding "
		"(peak 1000.0 KiB; 1000 allocs, 900 frees); rss 70.0 MiB (peak 71.0 MiB)\n"
		"  #1 100.0 KiB in 100 allocs from leak_some: main+0x40 (mem-leaker);leak_some+0x2a (mem-leaker)\n"
		"  #2 64.0 MiB in 1 mmaps from ?: [stack not recorded]\n"
		"  ... 3 more stacks\n");

	/* truncation: still terminated, returns the full length */
	char small[16];
	size_t full = mem_format_report(small, sizeof(small), &p, lines, 2, 5);
	ck_assert_uint_eq(full, n);
	ck_assert_uint_eq(strlen(small), 15);
}
END_TEST

static Suite *mem_suite(void)
{
	Suite *s = suite_create("mem");
	TCase *tc = tcase_create("logic");

	tcase_add_test(tc, test_decode_emulated);
	tcase_add_test(tc, test_decode_skippable);
	tcase_add_test(tc, test_decode_refuses);
	tcase_add_test(tc, test_choose_attach_glibc);
	tcase_add_test(tc, test_choose_attach_glibc_a64);
	tcase_add_test(tc, test_maps_find_libc);
	tcase_add_test(tc, test_ldconfig_find_libc);
	tcase_add_test(tc, test_elf_find_func);
	tcase_add_test(tc, test_fn_names);
	tcase_add_test(tc, test_groups);
	tcase_add_test(tc, test_symcache);
	tcase_add_test(tc, test_frames);
	tcase_add_test(tc, test_bytes_and_statm);
	tcase_add_test(tc, test_report_text);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mem_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
