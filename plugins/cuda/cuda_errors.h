/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: names of the CUDA runtime (cudaError_t) and driver (CUresult)
 * return codes, as the CUDA 13 headers define them (values are facts of the
 * CUDA ABI; regenerate with plugins/cuda/gen-errors.sh when a toolkit adds
 * codes). nt_cuda_error_name() returns NULL for a code it does not know;
 * nt_cuda_error_format() always writes a name ("cudaError(1234)").
 */
#ifndef NTCORE_CUDA_ERRORS_H
#define NTCORE_CUDA_ERRORS_H

#include <stdio.h>

#include "cuda_api.h"

static inline const char *nt_cuda_runtime_error_name(int code)
{
	switch (code) {
	case 0: return "cudaSuccess";
	case 1: return "cudaErrorInvalidValue";
	case 2: return "cudaErrorMemoryAllocation";
	case 3: return "cudaErrorInitializationError";
	case 4: return "cudaErrorCudartUnloading";
	case 5: return "cudaErrorProfilerDisabled";
	case 6: return "cudaErrorProfilerNotInitialized";
	case 7: return "cudaErrorProfilerAlreadyStarted";
	case 8: return "cudaErrorProfilerAlreadyStopped";
	case 9: return "cudaErrorInvalidConfiguration";
	case 12: return "cudaErrorInvalidPitchValue";
	case 13: return "cudaErrorInvalidSymbol";
	case 16: return "cudaErrorInvalidHostPointer";
	case 17: return "cudaErrorInvalidDevicePointer";
	case 18: return "cudaErrorInvalidTexture";
	case 19: return "cudaErrorInvalidTextureBinding";
	case 20: return "cudaErrorInvalidChannelDescriptor";
	case 21: return "cudaErrorInvalidMemcpyDirection";
	case 22: return "cudaErrorAddressOfConstant";
	case 23: return "cudaErrorTextureFetchFailed";
	case 24: return "cudaErrorTextureNotBound";
	case 25: return "cudaErrorSynchronizationError";
	case 26: return "cudaErrorInvalidFilterSetting";
	case 27: return "cudaErrorInvalidNormSetting";
	case 28: return "cudaErrorMixedDeviceExecution";
	case 31: return "cudaErrorNotYetImplemented";
	case 32: return "cudaErrorMemoryValueTooLarge";
	case 34: return "cudaErrorStubLibrary";
	case 35: return "cudaErrorInsufficientDriver";
	case 36: return "cudaErrorCallRequiresNewerDriver";
	case 37: return "cudaErrorInvalidSurface";
	case 43: return "cudaErrorDuplicateVariableName";
	case 44: return "cudaErrorDuplicateTextureName";
	case 45: return "cudaErrorDuplicateSurfaceName";
	case 46: return "cudaErrorDevicesUnavailable";
	case 49: return "cudaErrorIncompatibleDriverContext";
	case 52: return "cudaErrorMissingConfiguration";
	case 53: return "cudaErrorPriorLaunchFailure";
	case 65: return "cudaErrorLaunchMaxDepthExceeded";
	case 66: return "cudaErrorLaunchFileScopedTex";
	case 67: return "cudaErrorLaunchFileScopedSurf";
	case 68: return "cudaErrorSyncDepthExceeded";
	case 69: return "cudaErrorLaunchPendingCountExceeded";
	case 98: return "cudaErrorInvalidDeviceFunction";
	case 100: return "cudaErrorNoDevice";
	case 101: return "cudaErrorInvalidDevice";
	case 102: return "cudaErrorDeviceNotLicensed";
	case 103: return "cudaErrorSoftwareValidityNotEstablished";
	case 127: return "cudaErrorStartupFailure";
	case 200: return "cudaErrorInvalidKernelImage";
	case 201: return "cudaErrorDeviceUninitialized";
	case 205: return "cudaErrorMapBufferObjectFailed";
	case 206: return "cudaErrorUnmapBufferObjectFailed";
	case 207: return "cudaErrorArrayIsMapped";
	case 208: return "cudaErrorAlreadyMapped";
	case 209: return "cudaErrorNoKernelImageForDevice";
	case 210: return "cudaErrorAlreadyAcquired";
	case 211: return "cudaErrorNotMapped";
	case 212: return "cudaErrorNotMappedAsArray";
	case 213: return "cudaErrorNotMappedAsPointer";
	case 214: return "cudaErrorECCUncorrectable";
	case 215: return "cudaErrorUnsupportedLimit";
	case 216: return "cudaErrorDeviceAlreadyInUse";
	case 217: return "cudaErrorPeerAccessUnsupported";
	case 218: return "cudaErrorInvalidPtx";
	case 219: return "cudaErrorInvalidGraphicsContext";
	case 220: return "cudaErrorNvlinkUncorrectable";
	case 221: return "cudaErrorJitCompilerNotFound";
	case 222: return "cudaErrorUnsupportedPtxVersion";
	case 223: return "cudaErrorJitCompilationDisabled";
	case 224: return "cudaErrorUnsupportedExecAffinity";
	case 225: return "cudaErrorUnsupportedDevSideSync";
	case 226: return "cudaErrorContained";
	case 300: return "cudaErrorInvalidSource";
	case 301: return "cudaErrorFileNotFound";
	case 302: return "cudaErrorSharedObjectSymbolNotFound";
	case 303: return "cudaErrorSharedObjectInitFailed";
	case 304: return "cudaErrorOperatingSystem";
	case 400: return "cudaErrorInvalidResourceHandle";
	case 401: return "cudaErrorIllegalState";
	case 402: return "cudaErrorLossyQuery";
	case 500: return "cudaErrorSymbolNotFound";
	case 600: return "cudaErrorNotReady";
	case 700: return "cudaErrorIllegalAddress";
	case 701: return "cudaErrorLaunchOutOfResources";
	case 702: return "cudaErrorLaunchTimeout";
	case 703: return "cudaErrorLaunchIncompatibleTexturing";
	case 704: return "cudaErrorPeerAccessAlreadyEnabled";
	case 705: return "cudaErrorPeerAccessNotEnabled";
	case 708: return "cudaErrorSetOnActiveProcess";
	case 709: return "cudaErrorContextIsDestroyed";
	case 710: return "cudaErrorAssert";
	case 711: return "cudaErrorTooManyPeers";
	case 712: return "cudaErrorHostMemoryAlreadyRegistered";
	case 713: return "cudaErrorHostMemoryNotRegistered";
	case 714: return "cudaErrorHardwareStackError";
	case 715: return "cudaErrorIllegalInstruction";
	case 716: return "cudaErrorMisalignedAddress";
	case 717: return "cudaErrorInvalidAddressSpace";
	case 718: return "cudaErrorInvalidPc";
	case 719: return "cudaErrorLaunchFailure";
	case 720: return "cudaErrorCooperativeLaunchTooLarge";
	case 721: return "cudaErrorTensorMemoryLeak";
	case 800: return "cudaErrorNotPermitted";
	case 801: return "cudaErrorNotSupported";
	case 802: return "cudaErrorSystemNotReady";
	case 803: return "cudaErrorSystemDriverMismatch";
	case 804: return "cudaErrorCompatNotSupportedOnDevice";
	case 805: return "cudaErrorMpsConnectionFailed";
	case 806: return "cudaErrorMpsRpcFailure";
	case 807: return "cudaErrorMpsServerNotReady";
	case 808: return "cudaErrorMpsMaxClientsReached";
	case 809: return "cudaErrorMpsMaxConnectionsReached";
	case 810: return "cudaErrorMpsClientTerminated";
	case 811: return "cudaErrorCdpNotSupported";
	case 812: return "cudaErrorCdpVersionMismatch";
	case 900: return "cudaErrorStreamCaptureUnsupported";
	case 901: return "cudaErrorStreamCaptureInvalidated";
	case 902: return "cudaErrorStreamCaptureMerge";
	case 903: return "cudaErrorStreamCaptureUnmatched";
	case 904: return "cudaErrorStreamCaptureUnjoined";
	case 905: return "cudaErrorStreamCaptureIsolation";
	case 906: return "cudaErrorStreamCaptureImplicit";
	case 907: return "cudaErrorCapturedEvent";
	case 908: return "cudaErrorStreamCaptureWrongThread";
	case 909: return "cudaErrorTimeout";
	case 910: return "cudaErrorGraphExecUpdateFailure";
	case 911: return "cudaErrorExternalDevice";
	case 912: return "cudaErrorInvalidClusterSize";
	case 913: return "cudaErrorFunctionNotLoaded";
	case 914: return "cudaErrorInvalidResourceType";
	case 915: return "cudaErrorInvalidResourceConfiguration";
	case 999: return "cudaErrorUnknown";
	default: return NULL;
	}
}

static inline const char *nt_cuda_driver_error_name(int code)
{
	switch (code) {
	case 0: return "CUDA_SUCCESS";
	case 1: return "CUDA_ERROR_INVALID_VALUE";
	case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
	case 3: return "CUDA_ERROR_NOT_INITIALIZED";
	case 4: return "CUDA_ERROR_DEINITIALIZED";
	case 5: return "CUDA_ERROR_PROFILER_DISABLED";
	case 6: return "CUDA_ERROR_PROFILER_NOT_INITIALIZED";
	case 7: return "CUDA_ERROR_PROFILER_ALREADY_STARTED";
	case 8: return "CUDA_ERROR_PROFILER_ALREADY_STOPPED";
	case 34: return "CUDA_ERROR_STUB_LIBRARY";
	case 36: return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
	case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
	case 100: return "CUDA_ERROR_NO_DEVICE";
	case 101: return "CUDA_ERROR_INVALID_DEVICE";
	case 102: return "CUDA_ERROR_DEVICE_NOT_LICENSED";
	case 200: return "CUDA_ERROR_INVALID_IMAGE";
	case 201: return "CUDA_ERROR_INVALID_CONTEXT";
	case 202: return "CUDA_ERROR_CONTEXT_ALREADY_CURRENT";
	case 205: return "CUDA_ERROR_MAP_FAILED";
	case 206: return "CUDA_ERROR_UNMAP_FAILED";
	case 207: return "CUDA_ERROR_ARRAY_IS_MAPPED";
	case 208: return "CUDA_ERROR_ALREADY_MAPPED";
	case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
	case 210: return "CUDA_ERROR_ALREADY_ACQUIRED";
	case 211: return "CUDA_ERROR_NOT_MAPPED";
	case 212: return "CUDA_ERROR_NOT_MAPPED_AS_ARRAY";
	case 213: return "CUDA_ERROR_NOT_MAPPED_AS_POINTER";
	case 214: return "CUDA_ERROR_ECC_UNCORRECTABLE";
	case 215: return "CUDA_ERROR_UNSUPPORTED_LIMIT";
	case 216: return "CUDA_ERROR_CONTEXT_ALREADY_IN_USE";
	case 217: return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
	case 218: return "CUDA_ERROR_INVALID_PTX";
	case 219: return "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT";
	case 220: return "CUDA_ERROR_NVLINK_UNCORRECTABLE";
	case 221: return "CUDA_ERROR_JIT_COMPILER_NOT_FOUND";
	case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
	case 223: return "CUDA_ERROR_JIT_COMPILATION_DISABLED";
	case 224: return "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY";
	case 225: return "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC";
	case 226: return "CUDA_ERROR_CONTAINED";
	case 300: return "CUDA_ERROR_INVALID_SOURCE";
	case 301: return "CUDA_ERROR_FILE_NOT_FOUND";
	case 302: return "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND";
	case 303: return "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED";
	case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
	case 400: return "CUDA_ERROR_INVALID_HANDLE";
	case 401: return "CUDA_ERROR_ILLEGAL_STATE";
	case 402: return "CUDA_ERROR_LOSSY_QUERY";
	case 500: return "CUDA_ERROR_NOT_FOUND";
	case 600: return "CUDA_ERROR_NOT_READY";
	case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
	case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
	case 703: return "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING";
	case 704: return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
	case 705: return "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED";
	case 708: return "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE";
	case 709: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
	case 710: return "CUDA_ERROR_ASSERT";
	case 711: return "CUDA_ERROR_TOO_MANY_PEERS";
	case 712: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
	case 713: return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
	case 714: return "CUDA_ERROR_HARDWARE_STACK_ERROR";
	case 715: return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
	case 716: return "CUDA_ERROR_MISALIGNED_ADDRESS";
	case 717: return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
	case 718: return "CUDA_ERROR_INVALID_PC";
	case 719: return "CUDA_ERROR_LAUNCH_FAILED";
	case 720: return "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
	case 721: return "CUDA_ERROR_TENSOR_MEMORY_LEAK";
	case 800: return "CUDA_ERROR_NOT_PERMITTED";
	case 801: return "CUDA_ERROR_NOT_SUPPORTED";
	case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
	case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
	case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
	case 805: return "CUDA_ERROR_MPS_CONNECTION_FAILED";
	case 806: return "CUDA_ERROR_MPS_RPC_FAILURE";
	case 807: return "CUDA_ERROR_MPS_SERVER_NOT_READY";
	case 808: return "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED";
	case 809: return "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED";
	case 810: return "CUDA_ERROR_MPS_CLIENT_TERMINATED";
	case 811: return "CUDA_ERROR_CDP_NOT_SUPPORTED";
	case 812: return "CUDA_ERROR_CDP_VERSION_MISMATCH";
	case 900: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
	case 901: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
	case 902: return "CUDA_ERROR_STREAM_CAPTURE_MERGE";
	case 903: return "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED";
	case 904: return "CUDA_ERROR_STREAM_CAPTURE_UNJOINED";
	case 905: return "CUDA_ERROR_STREAM_CAPTURE_ISOLATION";
	case 906: return "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
	case 907: return "CUDA_ERROR_CAPTURED_EVENT";
	case 908: return "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD";
	case 909: return "CUDA_ERROR_TIMEOUT";
	case 910: return "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE";
	case 911: return "CUDA_ERROR_EXTERNAL_DEVICE";
	case 912: return "CUDA_ERROR_INVALID_CLUSTER_SIZE";
	case 913: return "CUDA_ERROR_FUNCTION_NOT_LOADED";
	case 914: return "CUDA_ERROR_INVALID_RESOURCE_TYPE";
	case 915: return "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION";
	case 916: return "CUDA_ERROR_KEY_ROTATION";
	case 999: return "CUDA_ERROR_UNKNOWN";
	default: return NULL;
	}
}

/* Name of `code` as returned by a function of `layer`, or NULL. */
static inline const char *nt_cuda_error_name(int layer, int code)
{
	return layer == NT_CUDA_LAYER_DRIVER ? nt_cuda_driver_error_name(code)
					     : nt_cuda_runtime_error_name(code);
}

/* Always a name: the known one or "cudaError(N)" / "CUresult(N)". */
static inline const char *nt_cuda_error_format(int layer, int code, char *buf,
					       size_t bufsz)
{
	const char *n = nt_cuda_error_name(layer, code);

	if (n)
		return n;
	snprintf(buf, bufsz, "%s(%d)",
		 layer == NT_CUDA_LAYER_DRIVER ? "CUresult" : "cudaError", code);
	return buf;
}

#endif /* NTCORE_CUDA_ERRORS_H */
