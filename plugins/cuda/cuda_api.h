/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: the table of CUDA API functions the probe knows, as an
 * X-macro so that the BPF side, the user side and the detectors share one
 * numbering (the `api` field of every cuda.* event). Ids are stable within
 * ABI major 1: new functions are appended, never renumbered.
 *
 * X(ID, "symbol", layer, family)
 *   ID      enum suffix: NT_CUDA_API_<ID>
 *   symbol  the exported symbol probed (real libcudart / libcuda names)
 *   layer   NT_CUDA_LAYER_RUNTIME or NT_CUDA_LAYER_DRIVER
 *   family  NT_CUDA_FAM_*: what the call does (decides the event type)
 *
 * Usable from BPF and C (no includes, no code).
 */
#ifndef NTCORE_CUDA_API_H
#define NTCORE_CUDA_API_H

enum nt_cuda_layer {
	NT_CUDA_LAYER_NONE = 0,
	NT_CUDA_LAYER_RUNTIME = 1, /* libcudart (shared or linked statically) */
	NT_CUDA_LAYER_DRIVER = 2,  /* libcuda */
	NT_CUDA_LAYER_USER = 3,    /* a function of the config's function table */
};

enum nt_cuda_family {
	NT_CUDA_FAM_OTHER = 0,
	NT_CUDA_FAM_ALLOC = 1,   /* -> cuda.alloc */
	NT_CUDA_FAM_FREE = 2,    /* -> cuda.free */
	NT_CUDA_FAM_MEMCPY = 3,  /* -> cuda.memcpy */
	NT_CUDA_FAM_MEMSET = 4,  /* -> cuda.memset */
	NT_CUDA_FAM_LAUNCH = 5,  /* -> cuda.launch */
	NT_CUDA_FAM_GRAPH = 6,   /* -> cuda.graph_launch */
	NT_CUDA_FAM_SYNC = 7,    /* -> cuda.sync */
	NT_CUDA_FAM_KNAME = 8,   /* driver handle -> kernel name (no event) */
	NT_CUDA_FAM_DEVICE = 9,  /* current device / context (no event) */
	NT_CUDA_FAM_GRAPHDEF = 10, /* graph building: capture, nodes,
				    * instantiate, update, destroy (no event:
				    * the kernels a graph launch runs) */
	NT_CUDA_FAM_VMM = 11,    /* virtual memory: cuMemCreate/Map/Unmap/Release
				  * (a mapping is booked as cuda.alloc/free) */
};

/* clang-format off */
#define NT_CUDA_APIS(X)                                                        \
	/* ---- runtime: allocation ---- */                                    \
	X(cudaMalloc,                   "cudaMalloc",                   NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocAsync,              "cudaMallocAsync",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocAsync_ptsz,         "cudaMallocAsync_ptsz",         NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocFromPoolAsync,      "cudaMallocFromPoolAsync",      NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocFromPoolAsync_ptsz, "cudaMallocFromPoolAsync_ptsz", NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocManaged,            "cudaMallocManaged",            NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocHost,               "cudaMallocHost",               NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaHostAlloc,                "cudaHostAlloc",                NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	X(cudaMallocPitch,              "cudaMallocPitch",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_ALLOC)  \
	/* ---- runtime: free ---- */                                          \
	X(cudaFree,                     "cudaFree",                     NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_FREE)   \
	X(cudaFreeAsync,                "cudaFreeAsync",                NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_FREE)   \
	X(cudaFreeAsync_ptsz,           "cudaFreeAsync_ptsz",           NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_FREE)   \
	X(cudaFreeHost,                 "cudaFreeHost",                 NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_FREE)   \
	/* ---- runtime: copies and sets ---- */                               \
	X(cudaMemcpy,                   "cudaMemcpy",                   NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpy_ptds,              "cudaMemcpy_ptds",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpyAsync,              "cudaMemcpyAsync",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpyAsync_ptsz,         "cudaMemcpyAsync_ptsz",         NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpyPeer,               "cudaMemcpyPeer",               NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpyPeerAsync,          "cudaMemcpyPeerAsync",          NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpy2D,                 "cudaMemcpy2D",                 NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemcpy2DAsync,            "cudaMemcpy2DAsync",            NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMCPY) \
	X(cudaMemset,                   "cudaMemset",                   NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMSET) \
	X(cudaMemsetAsync,              "cudaMemsetAsync",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMSET) \
	X(cudaMemsetAsync_ptsz,         "cudaMemsetAsync_ptsz",         NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_MEMSET) \
	/* ---- runtime: launches ---- */                                      \
	X(cudaLaunchKernel,             "cudaLaunchKernel",             NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_LAUNCH) \
	X(cudaLaunchKernel_ptsz,        "cudaLaunchKernel_ptsz",        NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_LAUNCH) \
	X(cudaLaunchKernelExC,          "cudaLaunchKernelExC",          NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_LAUNCH) \
	X(cudaLaunchKernelExC_ptsz,     "cudaLaunchKernelExC_ptsz",     NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_LAUNCH) \
	X(cudaLaunchCooperativeKernel,  "cudaLaunchCooperativeKernel",  NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_LAUNCH) \
	X(cudaGraphLaunch,              "cudaGraphLaunch",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPH)  \
	X(cudaGraphLaunch_ptsz,         "cudaGraphLaunch_ptsz",         NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPH)  \
	/* ---- runtime: synchronisation, device ---- */                       \
	X(cudaDeviceSynchronize,        "cudaDeviceSynchronize",        NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_SYNC)   \
	X(cudaStreamSynchronize,        "cudaStreamSynchronize",        NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_SYNC)   \
	X(cudaStreamSynchronize_ptsz,   "cudaStreamSynchronize_ptsz",   NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_SYNC)   \
	X(cudaEventSynchronize,         "cudaEventSynchronize",         NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_SYNC)   \
	X(cudaSetDevice,                "cudaSetDevice",                NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_DEVICE) \
	/* ---- driver: allocation ---- */                                     \
	X(cuMemAlloc_v2,                "cuMemAlloc_v2",                NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocAsync,              "cuMemAllocAsync",              NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocAsync_ptsz,         "cuMemAllocAsync_ptsz",         NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocFromPoolAsync,      "cuMemAllocFromPoolAsync",      NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz", NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocManaged,            "cuMemAllocManaged",            NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocHost_v2,            "cuMemAllocHost_v2",            NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemHostAlloc,               "cuMemHostAlloc",               NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	X(cuMemAllocPitch_v2,           "cuMemAllocPitch_v2",           NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_ALLOC)  \
	/* ---- driver: free ---- */                                           \
	X(cuMemFree_v2,                 "cuMemFree_v2",                 NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_FREE)   \
	X(cuMemFreeAsync,               "cuMemFreeAsync",               NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_FREE)   \
	X(cuMemFreeAsync_ptsz,          "cuMemFreeAsync_ptsz",          NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_FREE)   \
	X(cuMemFreeHost,                "cuMemFreeHost",                NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_FREE)   \
	/* ---- driver: copies and sets ---- */                                \
	X(cuMemcpy,                     "cuMemcpy",                     NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyAsync,                "cuMemcpyAsync",                NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyHtoD_v2,              "cuMemcpyHtoD_v2",              NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyDtoH_v2,              "cuMemcpyDtoH_v2",              NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyDtoD_v2,              "cuMemcpyDtoD_v2",              NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyHtoDAsync_v2,         "cuMemcpyHtoDAsync_v2",         NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyDtoHAsync_v2,         "cuMemcpyDtoHAsync_v2",         NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyDtoDAsync_v2,         "cuMemcpyDtoDAsync_v2",         NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyPeer,                 "cuMemcpyPeer",                 NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemcpyPeerAsync,            "cuMemcpyPeerAsync",            NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMCPY) \
	X(cuMemsetD8_v2,                "cuMemsetD8_v2",                NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMSET) \
	X(cuMemsetD32_v2,               "cuMemsetD32_v2",               NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMSET) \
	X(cuMemsetD8Async,              "cuMemsetD8Async",              NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMSET) \
	X(cuMemsetD32Async,             "cuMemsetD32Async",             NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_MEMSET) \
	/* ---- driver: launches ---- */                                       \
	X(cuLaunchKernel,               "cuLaunchKernel",               NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_LAUNCH) \
	X(cuLaunchKernel_ptsz,          "cuLaunchKernel_ptsz",          NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_LAUNCH) \
	X(cuLaunchKernelEx,             "cuLaunchKernelEx",             NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_LAUNCH) \
	X(cuLaunchKernelEx_ptsz,        "cuLaunchKernelEx_ptsz",        NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_LAUNCH) \
	X(cuLaunchCooperativeKernel,    "cuLaunchCooperativeKernel",    NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_LAUNCH) \
	X(cuGraphLaunch,                "cuGraphLaunch",                NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_GRAPH)  \
	X(cuGraphLaunch_ptsz,           "cuGraphLaunch_ptsz",           NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_GRAPH)  \
	/* ---- driver: synchronisation ---- */                                \
	X(cuCtxSynchronize,             "cuCtxSynchronize",             NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_SYNC)   \
	X(cuStreamSynchronize,          "cuStreamSynchronize",          NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_SYNC)   \
	X(cuStreamSynchronize_ptsz,     "cuStreamSynchronize_ptsz",     NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_SYNC)   \
	X(cuEventSynchronize,           "cuEventSynchronize",           NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_SYNC)   \
	/* ---- driver: kernel handles -> names, contexts -> devices ---- */   \
	X(cuModuleGetFunction,          "cuModuleGetFunction",          NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_KNAME)  \
	X(cuLibraryGetKernel,           "cuLibraryGetKernel",           NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_KNAME)  \
	X(cuKernelGetFunction,          "cuKernelGetFunction",          NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_KNAME)  \
	X(cuCtxSetCurrent,              "cuCtxSetCurrent",              NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_DEVICE) \
	X(cuDevicePrimaryCtxRetain,     "cuDevicePrimaryCtxRetain",     NT_CUDA_LAYER_DRIVER,  NT_CUDA_FAM_DEVICE) \
	/* ---- appended in ABI 1.x (ids above unchanged): graphs, virtual \
	 * memory, context push ---- */                                       \
	X(cudaStreamBeginCapture,        "cudaStreamBeginCapture",        NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaStreamBeginCapture_ptsz,   "cudaStreamBeginCapture_ptsz",   NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaStreamBeginCaptureToGraph, "cudaStreamBeginCaptureToGraph",  NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaStreamEndCapture,          "cudaStreamEndCapture",          NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaStreamEndCapture_ptsz,     "cudaStreamEndCapture_ptsz",     NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphInstantiate,          "cudaGraphInstantiate",          NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphInstantiateWithFlags, "cudaGraphInstantiateWithFlags",  NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphInstantiateWithParams, "cudaGraphInstantiateWithParams",  NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphAddKernelNode,        "cudaGraphAddKernelNode",        NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphKernelNodeSetParams,  "cudaGraphKernelNodeSetParams",  NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphExecKernelNodeSetParams, "cudaGraphExecKernelNodeSetParams",  NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphExecUpdate,           "cudaGraphExecUpdate",           NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphDestroy,              "cudaGraphDestroy",              NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cudaGraphExecDestroy,          "cudaGraphExecDestroy",          NT_CUDA_LAYER_RUNTIME, NT_CUDA_FAM_GRAPHDEF) \
	X(cuStreamBeginCapture_v2,       "cuStreamBeginCapture_v2",       NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuStreamBeginCapture_v2_ptsz,  "cuStreamBeginCapture_v2_ptsz",  NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuStreamBeginCaptureToGraph,   "cuStreamBeginCaptureToGraph",   NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuStreamEndCapture,            "cuStreamEndCapture",            NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuStreamEndCapture_ptsz,       "cuStreamEndCapture_ptsz",       NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphInstantiateWithFlags,   "cuGraphInstantiateWithFlags",   NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphInstantiateWithParams,  "cuGraphInstantiateWithParams",  NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphInstantiate_v2,         "cuGraphInstantiate_v2",         NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphAddKernelNode_v2,       "cuGraphAddKernelNode_v2",       NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphKernelNodeSetParams_v2, "cuGraphKernelNodeSetParams_v2",  NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphExecKernelNodeSetParams_v2, "cuGraphExecKernelNodeSetParams_v2",  NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphExecUpdate_v2,          "cuGraphExecUpdate_v2",          NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphDestroy,                "cuGraphDestroy",                NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuGraphExecDestroy,            "cuGraphExecDestroy",            NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_GRAPHDEF) \
	X(cuMemCreate,                   "cuMemCreate",                   NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_VMM) \
	X(cuMemRelease,                  "cuMemRelease",                  NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_VMM) \
	X(cuMemMap,                      "cuMemMap",                      NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_VMM) \
	X(cuMemUnmap,                    "cuMemUnmap",                    NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_VMM) \
	X(cuCtxPushCurrent_v2,           "cuCtxPushCurrent_v2",           NT_CUDA_LAYER_DRIVER, NT_CUDA_FAM_DEVICE)
/* clang-format on */

#define NT_CUDA_API_ENUM_(id, sym, layer, fam) NT_CUDA_API_##id,
enum nt_cuda_api {
	NT_CUDA_API_NONE = 0,
	NT_CUDA_APIS(NT_CUDA_API_ENUM_)
	NT_CUDA_API_COUNT
};
#undef NT_CUDA_API_ENUM_

#endif /* NTCORE_CUDA_API_H */
