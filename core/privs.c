/* SPDX-License-Identifier: MIT */
/*
 * Privileges to trace, read from the effective capability set with
 * capget(2) (no libcap: one syscall and three bits).
 */
#include "privs.h"

#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool cap_has(const struct __user_cap_data_struct *data, int cap)
{
	return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

bool nt_privs_can_trace(char *need, size_t need_len)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {0};

	if (syscall(SYS_capget, &hdr, data) != 0)
		return true; /* cannot tell: let the attach say it */
	/* Before 5.8 only CAP_SYS_ADMIN allowed BPF; since, it still does. */
	if (cap_has(data, CAP_SYS_ADMIN))
		return true;
	bool bpf = cap_has(data, CAP_BPF), perfmon = cap_has(data, CAP_PERFMON);
	if (bpf && perfmon)
		return true;
	snprintf(need, need_len,
		 "root, or the capabilities CAP_BPF and CAP_PERFMON (this process%s lacks %s%s%s)",
		 geteuid() ? " is not root and" : "", bpf ? "" : "CAP_BPF",
		 !bpf && !perfmon ? " and " : "", perfmon ? "" : "CAP_PERFMON");
	return false;
}
