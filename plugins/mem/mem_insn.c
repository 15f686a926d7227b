/* SPDX-License-Identifier: MIT */
/*
 * mem probe: where a uprobe goes on an allocator's first instructions:
 * an x86-64 decoder of the few instructions that start those functions
 * (which the kernel emulates, which it single-steps, which are safe to
 * step past), and the arm64 answer from the kit. Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/uprobe_insn.h"

static const char *const reg64[16] = {
	"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
static const char *const reg32[16] = {
	"eax", "ecx",  "edx",  "ebx",  "esp",  "ebp",  "esi",  "edi",
	"r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"};

/* Length of ModRM (+SIB, +displacement) at p; 0 when out of bytes. */
static size_t modrm_len(const uint8_t *p, size_t n)
{
	size_t len = 1;
	unsigned mod, rm;

	if (n < 1)
		return 0;
	mod = p[0] >> 6;
	rm = p[0] & 7;
	if (mod != 3 && rm == 4) {
		if (n < 2)
			return 0;
		len++;
		if (mod == 0 && (p[1] & 7) == 5)
			len += 4;
	}
	if (mod == 0 && rm == 5)
		len += 4;
	else if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len <= n ? len : 0;
}

/* Registers a probe placed after the instruction may see changed. */
static bool scratch_reg(unsigned r)
{
	return r == 0 || r == 10 || r == 11; /* rax, r10, r11 */
}

static void set(struct mem_insn *o, uint32_t len, int cls, const char *text)
{
	o->len = len;
	o->cls = cls;
	snprintf(o->text, sizeof(o->text), "%s", text);
}

/* One instruction being decoded: its bytes, where the opcode ended, the
 * prefixes seen and the ModRM fields (when there is a ModRM byte). */
struct x86 {
	const uint8_t *p;
	size_t n, i;
	bool opsize;
	unsigned rex, op, mod, reg, rm;
	const char *const *names; /* 64- or 32-bit register names */
};

/* Instructions the kernel emulates instead of single-stepping. */
static bool decode_emulated(const struct x86 *d, struct mem_insn *o)
{
	const uint8_t *p = d->p;
	unsigned op = d->op;
	char t[40];

	if (op == 0x90 && d->i == 1)
		return set(o, 1, MEM_INSN_EMULATED, "nop"), true;
	if (op >= 0x50 && op <= 0x57 && !d->opsize && (d->rex == 0 || d->rex == 0x41)) {
		snprintf(t, sizeof(t), "push %%%s", reg64[(op - 0x50) + (d->rex ? 8 : 0)]);
		set(o, (uint32_t)d->i, MEM_INSN_EMULATED, t);
		return true;
	}
	if (d->opsize || d->rex || d->i != 1)
		return false;
	if (op == 0xe8 && d->n >= 5)
		return set(o, 5, MEM_INSN_EMULATED, "call rel32"), true;
	if (op == 0xe9 && d->n >= 5)
		return set(o, 5, MEM_INSN_EMULATED, "jmp rel32"), true;
	if (op == 0xeb && d->n >= 2)
		return set(o, 2, MEM_INSN_EMULATED, "jmp rel8"), true;
	if (op >= 0x70 && op <= 0x7f && d->n >= 2)
		return set(o, 2, MEM_INSN_EMULATED, "jcc rel8"), true;
	if (op == 0x0f && d->n >= 6 && p[1] >= 0x80 && p[1] <= 0x8f)
		return set(o, 6, MEM_INSN_EMULATED, "jcc rel32"), true;
	return false;
}

/* test and cmp in their forms that start functions: flags only. true
 * when op is one of them (o is set only when the bytes are all there). */
static bool decode_test_cmp(const struct x86 *d, struct mem_insn *o)
{
	const uint8_t *p = d->p;
	size_t i = d->i, n = d->n, ml, imm;
	unsigned op = d->op;
	char t[40];

	switch (op) {
	case 0x84: case 0x85: /* test r/m, r */
	case 0x38: case 0x39: case 0x3a: case 0x3b: /* cmp */
		if (!(ml = modrm_len(p + i, n - i)))
			return true;
		if (d->mod == 3 && op != 0x84 && op != 0x38 && op != 0x3a)
			snprintf(t, sizeof(t), "%s %%%s,%%%s", (op == 0x85) ? "test" : "cmp",
				 d->names[d->reg], d->names[d->rm]);
		else
			snprintf(t, sizeof(t), "%s r/m,r",
				 (op == 0x84 || op == 0x85) ? "test" : "cmp");
		set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, t);
		return true;
	case 0x3c: /* cmp al, imm8 */
	case 0xa8: /* test al, imm8 */
		if (i + 1 <= n)
			set(o, (uint32_t)(i + 1), MEM_INSN_SKIPPABLE,
			    op == 0x3c ? "cmp $imm,%al" : "test $imm,%al");
		return true;
	case 0x3d: /* cmp eax, imm32 */
	case 0xa9: /* test eax, imm32 */
		if (i + (d->opsize ? 2 : 4) <= n)
			set(o, (uint32_t)(i + (d->opsize ? 2 : 4)), MEM_INSN_SKIPPABLE,
			    op == 0x3d ? "cmp $imm,%eax" : "test $imm,%eax");
		return true;
	case 0x80: case 0x83: case 0x81: /* group 1: only /7 = cmp */
		imm = op == 0x81 ? (d->opsize ? 2 : 4) : 1;
		if (((p[i] >> 3) & 7) != 7 || !(ml = modrm_len(p + i, n - i)) ||
		    i + ml + imm > n)
			return true;
		set(o, (uint32_t)(i + ml + imm), MEM_INSN_SKIPPABLE,
		    d->mod == 0 && (p[i] & 7) == 5 ? "cmp $imm,rip-relative" : "cmp $imm,r/m");
		return true;
	case 0xf6: case 0xf7: /* group 3: only /0 = test */
		imm = op == 0xf6 ? 1 : (d->opsize ? 2 : 4);
		if (((p[i] >> 3) & 7) != 0 || !(ml = modrm_len(p + i, n - i)) ||
		    i + ml + imm > n)
			return true;
		if (d->mod == 3)
			snprintf(t, sizeof(t), "test $imm,%%%s", d->names[d->rm]);
		else
			snprintf(t, sizeof(t), "test $imm,r/m");
		set(o, (uint32_t)(i + ml + imm), MEM_INSN_SKIPPABLE, t);
		return true;
	default:
		return false;
	}
}

/* mov and xor that write only a scratch register. */
static void decode_mov_xor(const struct x86 *d, struct mem_insn *o)
{
	size_t i = d->i, n = d->n, ml, imm;
	unsigned op = d->op, r;
	const char *const *names = d->names;
	char t[40];

	if (op == 0x89) { /* mov r, r/m: skippable when it writes a scratch reg */
		if (d->mod != 3 || !scratch_reg(d->rm) || !(ml = modrm_len(d->p + i, n - i)))
			return;
		snprintf(t, sizeof(t), "mov %%%s,%%%s", names[d->reg], names[d->rm]);
		set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, t);
	} else if (op == 0x8b) { /* mov r/m, r */
		if (!scratch_reg(d->reg) || !(ml = modrm_len(d->p + i, n - i)))
			return;
		if (d->mod == 3)
			snprintf(t, sizeof(t), "mov %%%s,%%%s", names[d->rm], names[d->reg]);
		else
			snprintf(t, sizeof(t), "mov r/m,%%%s", names[d->reg]);
		set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, t);
	} else if (op == 0x31 || op == 0x33) { /* xor reg, reg into a scratch reg */
		if (d->mod != 3 || !scratch_reg(op == 0x31 ? d->rm : d->reg))
			return;
		snprintf(t, sizeof(t), "xor %%%s,%%%s", names[op == 0x31 ? d->reg : d->rm],
			 names[op == 0x31 ? d->rm : d->reg]);
		set(o, (uint32_t)(i + 1), MEM_INSN_SKIPPABLE, t);
	} else if (op >= 0xb8 && op <= 0xbf) { /* mov $imm, reg */
		r = (op - 0xb8) | ((d->rex & 1) ? 8 : 0);
		imm = (d->rex & 8) ? 8 : (d->opsize ? 2 : 4);
		if (!scratch_reg(r) || i + imm > n)
			return;
		snprintf(t, sizeof(t), "mov $imm,%%%s", names[r]);
		set(o, (uint32_t)(i + imm), MEM_INSN_SKIPPABLE, t);
	}
}

void mem_insn_decode(const uint8_t *p, size_t n, struct mem_insn *o)
{
	struct x86 d = {.p = p, .n = n};
	size_t ml;

	memset(o, 0, sizeof(*o));
	snprintf(o->text, sizeof(o->text), "(unknown)");
	if (n == 0)
		return;
	if (n >= 4 && p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e &&
	    (p[3] == 0xfa || p[3] == 0xfb)) {
		set(o, 4, MEM_INSN_SKIPPABLE, p[3] == 0xfa ? "endbr64" : "endbr32");
		return;
	}
	while (d.i < n && (p[d.i] == 0x66 || p[d.i] == 0x2e)) {
		d.opsize |= p[d.i] == 0x66;
		d.i++;
	}
	if (d.i < n && (p[d.i] & 0xf0) == 0x40)
		d.rex = p[d.i++];
	if (d.i >= n)
		return;
	d.op = p[d.i++];
	if (decode_emulated(&d, o))
		return;
	/* Instructions that change nothing a probe after them reads. */
	if (d.op == 0x0f && d.i < n && p[d.i] == 0x1f) { /* multi-byte nop */
		d.i++;
		if (d.i < n && ((p[d.i] >> 3) & 7) == 0 && (ml = modrm_len(p + d.i, n - d.i)))
			set(o, (uint32_t)(d.i + ml), MEM_INSN_SKIPPABLE, "nopl");
		return;
	}
	if (d.i >= n && d.op != 0x3c && d.op != 0x3d && d.op != 0xa8 && d.op != 0xa9 &&
	    !(d.op >= 0xb8 && d.op <= 0xbf))
		return;
	d.mod = d.i < n ? p[d.i] >> 6 : 0;
	d.reg = d.i < n ? ((p[d.i] >> 3) & 7) | ((d.rex & 4) ? 8 : 0) : 0;
	d.rm = d.i < n ? (p[d.i] & 7) | ((d.rex & 1) ? 8 : 0) : 0;
	d.names = (d.rex & 8) ? reg64 : reg32;
	if (!decode_test_cmp(&d, o))
		decode_mov_xor(&d, o);
}

/* AArch64: the entry, simulated or stepped as the kernel will run it. */
static void choose_attach_a64(const uint8_t *code, size_t n,
			      struct mem_attach_point *out)
{
	char text[sizeof(out->first.text)];
	int cls = nt_uprobe_insn_a64(code, n, text, sizeof(text));

	out->first.len = cls < 0 ? 0 : 4;
	out->first.cls = cls == NT_UPROBE_INSN_SIMULATED ? MEM_INSN_EMULATED
							 : MEM_INSN_UNKNOWN;
	snprintf(out->first.text, sizeof(out->first.text), "%.28s%s", text,
		 cls == NT_UPROBE_INSN_REFUSED ? " (refused)" : "");
	out->at = out->first;
	out->emulated = cls == NT_UPROBE_INSN_SIMULATED;
}

void mem_choose_attach(const uint8_t *code, size_t n, bool allow_skip,
		       struct mem_attach_point *out)
{
	mem_choose_attach_isa(MEM_ISA_HOST, code, n, allow_skip, out);
}

void mem_choose_attach_isa(int isa, const uint8_t *code, size_t n,
			   bool allow_skip, struct mem_attach_point *out)
{
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	if (isa == MEM_ISA_AARCH64) {
		choose_attach_a64(code, n, out);
		return;
	}
	if (isa != MEM_ISA_X86_64) {
		snprintf(out->first.text, sizeof(out->first.text), "(not decoded)");
		out->at = out->first;
		return;
	}
	mem_insn_decode(code, n, &out->first);
	out->at = out->first;
	out->emulated = out->first.cls == MEM_INSN_EMULATED;
	if (out->emulated || !allow_skip)
		return;
	for (int k = 0; k < 4 && off < n; k++) {
		struct mem_insn d;

		mem_insn_decode(code + off, n - off, &d);
		if (d.cls == MEM_INSN_EMULATED && off > 0) {
			out->skip = (uint32_t)off;
			out->at = d;
			out->emulated = true;
			return;
		}
		if (d.cls != MEM_INSN_SKIPPABLE || d.len == 0 || k == 3)
			break;
		off += d.len;
	}
}
