/* SPDX-License-Identifier: MIT */
/* nvlink: the XID table (see xid.h). */
#include "xid.h"

#include <stddef.h>

#include "ntcore/event.h"

#define W NT_SEV_WARNING
#define C NT_SEV_CRITICAL

static const struct nvl_xid_info table[] = {
	{ 8, W, "GPU stopped processing (channel idle timeout)", "restart the application" },
	{ 13, W, "graphics engine exception: a kernel faulted (illegal instruction, out-of-range access)", "debug the application (compute-sanitizer)" },
	{ 31, W, "GPU memory page fault: a kernel accessed an illegal address", "debug the application (compute-sanitizer)" },
	{ 32, W, "invalid or corrupted push buffer stream", "restart the application; check the driver" },
	{ 38, C, "driver firmware error", "reset the GPU" },
	{ 43, W, "GPU stopped processing: a channel was reset after an application fault", "restart the application" },
	{ 45, W, "preemptive cleanup after earlier errors (a process was killed or faulted)", "look at the XID before this one" },
	{ 48, C, "double-bit (uncorrectable) ECC error in GPU memory", "reset the GPU; drain the node if it recurs" },
	{ 56, W, "display engine error", "check the display configuration" },
	{ 57, C, "error programming the video memory interface", "reset the GPU; contact support" },
	{ 58, C, "unstable video memory interface", "reset the GPU; contact support" },
	{ 61, W, "internal micro-controller breakpoint or warning", "reset the GPU if it recurs" },
	{ 62, C, "internal micro-controller halted", "reset the GPU" },
	{ 63, W, "ECC page retirement or row remapping recorded", "reset the GPU when idle to apply it" },
	{ 64, C, "ECC page retirement or row remapping failed", "drain the node; contact support" },
	{ 65, W, "video processor exception", "restart the application" },
	{ 68, W, "video decoder (NVDEC) exception", "restart the application" },
	{ 69, W, "graphics engine class error", "restart the application" },
	{ 74, C, "NVLink error", "check the NVLink counters; reset the GPU" },
	{ 79, C, "GPU has fallen off the bus", "drain the node; check power, cooling and the PCIe slot" },
	{ 80, C, "corrupted data sent to the GPU", "check the PCIe link; reset the GPU" },
	{ 81, W, "VGA subsystem error", "reset the GPU if it recurs" },
	{ 92, W, "high single-bit ECC error rate", "watch the ECC counters; drain the node if they climb" },
	{ 94, W, "contained ECC error: the affected application was stopped, the GPU is fine", "restart the application" },
	{ 95, C, "uncontained ECC error: every application on the GPU is affected", "reset the GPU" },
	{ 109, W, "context switch timeout", "restart the application" },
	{ 110, C, "security fault", "reset the GPU; contact support" },
	{ 119, C, "GSP RPC timeout (the GPU firmware did not answer)", "reset the GPU" },
	{ 120, C, "GSP firmware error", "reset the GPU" },
	{ 121, C, "C2C link error", "reset the GPU; contact support" },
	{ 122, W, "SPI PMU RPC read failure", "reset the GPU if it recurs" },
	{ 123, W, "SPI PMU RPC write failure", "reset the GPU if it recurs" },
	{ 140, C, "unrecovered ECC error", "reset the GPU" },
	{ 143, C, "GPU initialisation failure", "reset the GPU; contact support" },
	{ 154, C, "GPU recovery action changed (the driver asks for a reset or reboot)", "do the recovery action nvidia-smi -q shows" },
};

static const struct nvl_xid_info unknown = {
	0, W, "XID not in ntcore's table", "look it up in NVIDIA's XID catalog"
};

const struct nvl_xid_info *nvl_xid_lookup(uint32_t xid)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].xid == xid)
			return &table[i];
	return &unknown;
}
