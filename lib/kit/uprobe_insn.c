/* SPDX-License-Identifier: MIT */
/*
 * Plugin kit: how an arm64 kernel runs the AArch64 instruction a uprobe
 * replaces (simulated, single-stepped out of line, or refused). The
 * encodings are the Arm ARM's; which class each lands in is the kernel's
 * arm_probe_decode_insn (arch/arm64/kernel/probes/decode-insn.c).
 */
#include <stdbool.h>
#include <stdio.h>

#include "ntcore/kit/uprobe_insn.h"

struct a64_form {
	uint32_t mask, value;
	int cls;            /* enum nt_uprobe_insn */
	const char *name;
	bool names_reg;     /* append the register in bits 0-4 (w/x by bit 31) */
};

/* First match wins; more specific forms come before broader ones. */
static const struct a64_form a64_forms[] = {
	/* Branches and PC-relative addresses: simulated in the handler. */
	{0xfc000000, 0x14000000, NT_UPROBE_INSN_SIMULATED, "b", false},
	{0xfc000000, 0x94000000, NT_UPROBE_INSN_SIMULATED, "bl", false},
	{0xff000010, 0x54000000, NT_UPROBE_INSN_SIMULATED, "b.cond", false},
	{0x7f000000, 0x34000000, NT_UPROBE_INSN_SIMULATED, "cbz", true},
	{0x7f000000, 0x35000000, NT_UPROBE_INSN_SIMULATED, "cbnz", true},
	{0x7f000000, 0x36000000, NT_UPROBE_INSN_SIMULATED, "tbz", true},
	{0x7f000000, 0x37000000, NT_UPROBE_INSN_SIMULATED, "tbnz", true},
	{0x9f000000, 0x10000000, NT_UPROBE_INSN_SIMULATED, "adr", true},
	{0x9f000000, 0x90000000, NT_UPROBE_INSN_SIMULATED, "adrp", true},
	{0xfffffc1f, 0xd61f0000, NT_UPROBE_INSN_SIMULATED, "br", false},
	{0xfffffc1f, 0xd63f0000, NT_UPROBE_INSN_SIMULATED, "blr", false},
	{0xfffffc1f, 0xd65f0000, NT_UPROBE_INSN_SIMULATED, "ret", false},
	/* Authenticated returns: branches the kernel does not simulate. */
	{0xfffffbff, 0xd65f0bff, NT_UPROBE_INSN_REFUSED, "retaa/retab", false},
	/* PC-relative loads, exclusives, exceptions: refused. */
	{0xbf000000, 0x18000000, NT_UPROBE_INSN_REFUSED, "ldr (literal)", false},
	{0xff000000, 0x98000000, NT_UPROBE_INSN_REFUSED, "ldrsw (literal)", false},
	{0xff000000, 0xd8000000, NT_UPROBE_INSN_REFUSED, "prfm (literal)", false},
	{0x3f000000, 0x08000000, NT_UPROBE_INSN_REFUSED, "load/store exclusive", false},
	{0xff000000, 0xd4000000, NT_UPROBE_INSN_REFUSED, "exception (svc/brk)", false},
	/* Prologue instructions: stepped out of line. */
	{0xffffffff, 0xd503201f, NT_UPROBE_INSN_STEPPED, "nop", false},
	{0xffffffff, 0xd503233f, NT_UPROBE_INSN_STEPPED, "paciasp", false},
	{0xffffffff, 0xd503237f, NT_UPROBE_INSN_STEPPED, "pacibsp", false},
	{0xffffff3f, 0xd503241f, NT_UPROBE_INSN_STEPPED, "bti", false},
	{0xffffffff, 0x910003fd, NT_UPROBE_INSN_STEPPED, "mov x29, sp", false},
	{0xff8003ff, 0xd10003ff, NT_UPROBE_INSN_STEPPED, "sub sp, sp, #imm", false},
};

/* HINTs the kernel steps (NOP, PAC*, BTI*, XPACLRI); it refuses the rest
 * (WFE, WFI, AUTIASP ...). Bits 5-11 hold the hint number. */
static bool a64_hint_steppable(uint32_t insn)
{
	switch (insn & 0xfe0) {
	case 0x000: case 0x0e0: case 0x100: case 0x140: /* nop xpaclri pacia1716 pacib1716 */
	case 0x300: case 0x320: case 0x340: case 0x360: /* paciaz paciasp pacibz pacibsp */
	case 0x400: case 0x440: case 0x480: case 0x4c0: /* bti, bti c/j/jc */
		return true;
	default:
		return false;
	}
}

/* `stp x29, x30, [sp, #-N]!`, the frame-pointer prologue, with its N. */
static bool a64_frame_push(uint32_t insn, char *text, size_t len)
{
	int imm7;

	if ((insn & 0xffc07fff) != 0xa9807bfd)
		return false;
	imm7 = (int)((insn >> 15) & 0x7f);
	if (imm7 & 0x40)
		imm7 -= 0x80;
	snprintf(text, len, "stp x29, x30, [sp, #%d]!", imm7 * 8);
	return true;
}

int nt_uprobe_insn_a64(const uint8_t *code, size_t n, char *text, size_t len)
{
	uint32_t insn;

	if (n < 4) {
		snprintf(text, len, "(none)");
		return -1;
	}
	insn = (uint32_t)code[0] | (uint32_t)code[1] << 8 |
	       (uint32_t)code[2] << 16 | (uint32_t)code[3] << 24;
	if (a64_frame_push(insn, text, len))
		return NT_UPROBE_INSN_STEPPED;
	for (size_t i = 0; i < sizeof(a64_forms) / sizeof(a64_forms[0]); i++) {
		const struct a64_form *f = &a64_forms[i];

		if ((insn & f->mask) != f->value)
			continue;
		if (f->names_reg)
			snprintf(text, len, "%s %c%u", f->name,
				 (insn >> 31) || f->name[0] == 'a' ? 'x' : 'w', insn & 0x1f);
		else
			snprintf(text, len, "%s", f->name);
		return f->cls;
	}
	if ((insn & 0xfffff01f) == 0xd503201f) { /* another HINT */
		bool ok = a64_hint_steppable(insn);

		snprintf(text, len, "hint #%u", (insn >> 5) & 0x7f);
		return ok ? NT_UPROBE_INSN_STEPPED : NT_UPROBE_INSN_REFUSED;
	}
	snprintf(text, len, "%08x", insn);
	return NT_UPROBE_INSN_STEPPED;
}
