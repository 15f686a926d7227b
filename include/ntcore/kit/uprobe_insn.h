/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: what an arm64 kernel does with the instruction a
 * uprobe replaces, so a probe can say what each hit will cost before it
 * attaches (the AArch64 counterpart of the x86-64 first-instruction
 * decoders in plugins/mem and plugins/cuda).
 *
 * Facts from arch/arm64/kernel/probes (decode-insn.c, uprobes.c): a hit
 * traps on a BRK; the kernel then either simulates the instruction in the
 * handler (branches B/BL/B.cond/CBZ/CBNZ/TBZ/TBNZ/BR/BLR/RET, ADR/ADRP;
 * NOP too on recent kernels) or copies it to an out-of-line slot and
 * single-steps it there (a second trap: every prologue instruction,
 * `stp x29, x30, [sp, #-N]!`, `sub sp, ...`, `paciasp`, `bti c`). It
 * refuses a uprobe on literal loads (LDR/LDRSW/PRFM literal), exclusive
 * loads and stores, exception-generating instructions (SVC, BRK ...) and
 * the HINTs it does not whitelist (WFE, WFI ...).
 *
 * A uretprobe replaces the return address in x30 at the probed
 * instruction, so return probes must sit on a function's first
 * instruction (before the prologue saves x30): unlike x86-64, no attach
 * point past the entry is offered here.
 */
#ifndef NTCORE_KIT_UPROBE_INSN_H
#define NTCORE_KIT_UPROBE_INSN_H

#include <stddef.h>
#include <stdint.h>

enum nt_uprobe_insn {
	NT_UPROBE_INSN_STEPPED = 0,   /* single-stepped out of line: two traps */
	NT_UPROBE_INSN_SIMULATED = 1, /* done in the breakpoint handler: one trap */
	NT_UPROBE_INSN_REFUSED = 2,   /* the kernel will not place a uprobe on it */
};

/*
 * Classify the AArch64 instruction at code[0..4) (little-endian, as in the
 * ELF file). Writes a short mnemonic ("cbz x0", "stp x29, x30, [sp, #-64]!",
 * "paciasp") to text[len] (len >= 1). Returns an enum nt_uprobe_insn, or
 * -1 (text "(none)") when n < 4.
 */
int nt_uprobe_insn_a64(const uint8_t *code, size_t n, char *text, size_t len);

#endif /* NTCORE_KIT_UPROBE_INSN_H */
