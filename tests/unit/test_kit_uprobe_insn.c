/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the kit's AArch64 uprobe-instruction classifier: the first
 * words of Debian 12's arm64 glibc 2.36 (free: cbz x0, simulated; malloc:
 * stp x29, x30, [sp, #-64]!, stepped), every branch form the kernel
 * simulates, the prologue forms it steps, and the forms it refuses.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "ntcore/kit/uprobe_insn.h"

static int classify(uint32_t word, char *text, size_t len)
{
	uint8_t b[4] = {(uint8_t)word, (uint8_t)(word >> 8), (uint8_t)(word >> 16),
			(uint8_t)(word >> 24)};

	return nt_uprobe_insn_a64(b, sizeof(b), text, len);
}

#define EXPECT(word, cls, txt)                                                 \
	do {                                                                   \
		char t_[48];                                                   \
		ck_assert_int_eq(classify(word, t_, sizeof(t_)), cls);         \
		ck_assert_str_eq(t_, txt);                                     \
	} while (0)

START_TEST(test_glibc_entries)
{
	/* libc.so.6 (2.36-9, arm64): free, malloc */
	EXPECT(0xb4000880, NT_UPROBE_INSN_SIMULATED, "cbz x0");
	EXPECT(0xa9bc7bfd, NT_UPROBE_INSN_STEPPED, "stp x29, x30, [sp, #-64]!");
	EXPECT(0xa9bf7bfd, NT_UPROBE_INSN_STEPPED, "stp x29, x30, [sp, #-16]!");
}
END_TEST

START_TEST(test_simulated)
{
	EXPECT(0x14000010, NT_UPROBE_INSN_SIMULATED, "b");
	EXPECT(0x94000010, NT_UPROBE_INSN_SIMULATED, "bl");
	EXPECT(0x54000040, NT_UPROBE_INSN_SIMULATED, "b.cond");
	EXPECT(0x35000041, NT_UPROBE_INSN_SIMULATED, "cbnz w1");
	EXPECT(0x36000043, NT_UPROBE_INSN_SIMULATED, "tbz w3");
	EXPECT(0x900008b5, NT_UPROBE_INSN_SIMULATED, "adrp x21");
	EXPECT(0x10000080, NT_UPROBE_INSN_SIMULATED, "adr x0");
	EXPECT(0xd61f0220, NT_UPROBE_INSN_SIMULATED, "br");
	EXPECT(0xd63f0220, NT_UPROBE_INSN_SIMULATED, "blr");
	EXPECT(0xd65f03c0, NT_UPROBE_INSN_SIMULATED, "ret");
}
END_TEST

START_TEST(test_stepped)
{
	EXPECT(0xd503201f, NT_UPROBE_INSN_STEPPED, "nop");
	EXPECT(0xd503233f, NT_UPROBE_INSN_STEPPED, "paciasp");
	EXPECT(0xd503245f, NT_UPROBE_INSN_STEPPED, "bti");
	EXPECT(0x910003fd, NT_UPROBE_INSN_STEPPED, "mov x29, sp");
	EXPECT(0xd10083ff, NT_UPROBE_INSN_STEPPED, "sub sp, sp, #imm");
	EXPECT(0xaa0003e1, NT_UPROBE_INSN_STEPPED, "aa0003e1"); /* mov x1, x0 */
	EXPECT(0xd503211f, NT_UPROBE_INSN_STEPPED, "hint #8"); /* pacia1716 */
}
END_TEST

START_TEST(test_refused)
{
	EXPECT(0x58000040, NT_UPROBE_INSN_REFUSED, "ldr (literal)");
	EXPECT(0x98000040, NT_UPROBE_INSN_REFUSED, "ldrsw (literal)");
	EXPECT(0xc85f7c00, NT_UPROBE_INSN_REFUSED, "load/store exclusive");
	EXPECT(0xd4000001, NT_UPROBE_INSN_REFUSED, "exception (svc/brk)");
	EXPECT(0xd65f0bff, NT_UPROBE_INSN_REFUSED, "retaa/retab");
	EXPECT(0xd503205f, NT_UPROBE_INSN_REFUSED, "hint #2"); /* wfe */
	EXPECT(0xd50323bf, NT_UPROBE_INSN_REFUSED, "hint #29"); /* autiasp */
}
END_TEST

START_TEST(test_short_and_small_text)
{
	uint8_t b[3] = {0x80, 0x08, 0x00};
	char t[8];

	ck_assert_int_eq(nt_uprobe_insn_a64(b, sizeof(b), t, sizeof(t)), -1);
	ck_assert_str_eq(t, "(none)");
	/* a text buffer too small is cut, never overrun */
	ck_assert_int_eq(classify(0xa9bc7bfd, t, sizeof(t)), NT_UPROBE_INSN_STEPPED);
	ck_assert_str_eq(t, "stp x29");
}
END_TEST

static Suite *insn_suite(void)
{
	Suite *s = suite_create("kit_uprobe_insn");
	TCase *t = tcase_create("a64");

	tcase_add_test(t, test_glibc_entries);
	tcase_add_test(t, test_simulated);
	tcase_add_test(t, test_stepped);
	tcase_add_test(t, test_refused);
	tcase_add_test(t, test_short_and_small_text);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(insn_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
