/* SPDX-License-Identifier: MIT */
#include "cuerr.h"

#include <stddef.h>
#include <string.h>

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
	const char *name[2]; /* runtime, driver spelling */
	const char *hint;
} hints[] = {
	{ { "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY" },
	  "the device is out of memory: lower the batch size or model size, "
	  "release cached blocks, and look at the cuda_memleak and cuda_frag "
	  "alerts for a leak or fragmentation" },
	{ { "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE" },
	  "an argument is out of range: check sizes, pointers and the copy "
	  "direction at the call shown in the stack" },
	{ { "cudaErrorInvalidDevicePointer", NULL },
	  "the pointer is not a live device pointer of this context: a double "
	  "free, a host pointer, or memory of another device" },
	{ { "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS" },
	  "a kernel accessed memory out of bounds and the context is now "
	  "unusable: rerun with CUDA_LAUNCH_BLOCKING=1 under compute-sanitizer "
	  "to find the kernel" },
	{ { "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED" },
	  "a kernel failed (often an out-of-bounds access); rerun with "
	  "CUDA_LAUNCH_BLOCKING=1 so the error points at the failing launch" },
	{ { "cudaErrorAssert", "CUDA_ERROR_ASSERT" },
	  "a device-side assert fired (in PyTorch often an index out of range, "
	  "e.g. a class label >= number of classes); rerun with "
	  "CUDA_LAUNCH_BLOCKING=1 to see which kernel" },
	{ { "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" },
	  "the launch asks for too many registers, threads or shared memory "
	  "per block: lower the block size" },
	{ { "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT" },
	  "a kernel ran past the display watchdog: run on a GPU without a "
	  "display or split the kernel" },
	{ { "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU" },
	  "the binary has no code for this GPU architecture: rebuild with a "
	  "-gencode for it or install a build that supports it" },
	{ { "cudaErrorInsufficientDriver", NULL },
	  "the driver is older than the CUDA runtime: upgrade the driver or "
	  "use a runtime that matches it" },
	{ { "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE" },
	  "no GPU is visible: check CUDA_VISIBLE_DEVICES, the driver and the "
	  "container's GPU access" },
	{ { "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE" },
	  "the device ordinal is out of range: check CUDA_VISIBLE_DEVICES and "
	  "the device index in your code" },
	{ { "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE" },
	  "a stream, event or graph handle was used after it was destroyed or "
	  "on another device" },
	{ { "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE" },
	  "the GPU reported an uncorrectable memory error: a hardware problem, "
	  "move the job off this GPU and tell the operators" },
	{ { "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED" },
	  "CUDA could not initialise: check the driver, and do not use CUDA in "
	  "a process forked after CUDA was initialised (use spawn)" },
	{ { "cudaErrorNotReady", "CUDA_ERROR_NOT_READY" },
	  "not a failure: a query found work still pending" },
};

const char *cuerr_hint(const char *name)
{
	if (name)
		for (size_t i = 0; i < LEN(hints); i++)
			for (int k = 0; k < 2; k++)
				if (hints[i].name[k] &&
				    strcmp(hints[i].name[k], name) == 0)
					return hints[i].hint;
	return "see the CUDA documentation of this error and the call shown "
	       "in the stack";
}

int cuerr_severe(const char *name)
{
	static const char *const severe[] = {
		"cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY",
		"cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
		"cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED",
		"cudaErrorAssert", "CUDA_ERROR_ASSERT",
		"cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR",
		"cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
		"cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS",
		"cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
		"cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC",
		"cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE",
		"cudaErrorUnknown", "CUDA_ERROR_UNKNOWN",
	};

	for (size_t i = 0; name && i < LEN(severe); i++)
		if (strcmp(severe[i], name) == 0)
			return 1;
	return 0;
}
