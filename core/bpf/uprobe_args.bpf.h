/* SPDX-License-Identifier: MIT */
/*
 * Function arguments at a uprobe on a function's entry past the sixth
 * (common.bpf.h has PT_REGS_PARM6, libbpf 1.1 stops at the fifth), for
 * each calling convention the BPF side is built for (__TARGET_ARCH_x86,
 * _arm64). Include after vmlinux.h and <bpf/bpf_tracing.h>.
 *
 * Where the integer arguments are at a function's first instruction:
 *   x86-64 (System V): 1-6 in rdi rsi rdx rcx r8 r9; 7 on at [rsp + 8],
 *     [rsp + 16] ... ([rsp] holds the return address).
 *   arm64 (AAPCS64): 1-8 in x0-x7; 9 on at [sp], [sp + 8] ... (the return
 *     address is in x30, nothing is pushed by the call).
 * A struct of 9-16 bytes (CUDA's dim3) takes two slots on both.
 */
#ifndef NTCORE_UPROBE_ARGS_BPF_H
#define NTCORE_UPROBE_ARGS_BPF_H

#if defined(__TARGET_ARCH_arm64)
#define NT_PT_REGS_PARM7(x) (((const struct user_pt_regs *)(x))->regs[6])
#define NT_PT_REGS_PARM8(x) (((const struct user_pt_regs *)(x))->regs[7])
#elif !defined(__TARGET_ARCH_x86)
#error "uprobe_args.bpf.h: no calling convention for this __TARGET_ARCH"
#endif

/*
 * Integer arguments 7 .. 6 + n (n <= 4) of the probed call into out[0..n):
 * out[0] is the 7th argument. Slots not read are left as they were.
 */
static __always_inline void nt_uprobe_args_from7(struct pt_regs *ctx,
						 __u64 *out, __u32 n)
{
	__u64 sp = PT_REGS_SP(ctx);

	if (n > 4)
		n = 4;
#if defined(__TARGET_ARCH_x86)
	if (n)
		bpf_probe_read_user(out, n * 8, (void *)(sp + 8));
#else
	if (n > 0)
		out[0] = NT_PT_REGS_PARM7(ctx);
	if (n > 1)
		out[1] = NT_PT_REGS_PARM8(ctx);
	if (n > 2)
		bpf_probe_read_user(out + 2, (n - 2) * 8, (void *)sp);
#endif
}

#endif /* NTCORE_UPROBE_ARGS_BPF_H */
