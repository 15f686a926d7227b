/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: the kernels of each CUDA graph of a process, so that a
 * graph launch counts the kernels it runs, by name. Pure: fed by the
 * decoder (cuda_decode.c) with the graph-building calls the probe sees
 * (stream capture, explicit kernel nodes, instantiation, exec update,
 * kernel-node parameter updates, destruction) and the launches made while
 * a thread captures; unit-tested in tests/unit/test_cuda_graph.c.
 *
 * Graph handles, executable graph handles and node handles are process
 * addresses (cudaGraph_t / CUgraph are the same objects, likewise execs
 * and nodes), so one table serves both API layers. A kernel is kept as
 * the (layer, func) its launch or node named, so its name is resolved the
 * way a launch's is (nt_cuda_kernel_name).
 *
 * Ownership: struct nt_cuda_graphs owns every list in it; lists returned
 * by nt_cuda_graph_kernels are borrowed until the next call on the table.
 */
#ifndef NTCORE_CUDA_GRAPH_H
#define NTCORE_CUDA_GRAPH_H

#include <stdint.h>

#include "ntcore/kit/hmap.h"

/* Most kernels kept per graph (a larger graph counts its first ones and
 * says so in `truncated`). */
#define NT_CUDA_GRAPH_MAX_KERNELS 65536

struct nt_cuda_gkern {
	uint64_t node;  /* graph node handle, 0 for a captured launch */
	uint64_t func;  /* host stub / kernel handle / CUfunction */
	uint8_t layer;  /* enum nt_cuda_layer of the call that named it */
	uint8_t pad[7];
};

struct nt_cuda_glist {
	struct nt_cuda_gkern *k;
	uint32_t n, cap;
	uint32_t truncated; /* kernels left out (over the bound) */
};

struct nt_cuda_graphs {
	struct nt_hmap capture; /* tid (u32) -> glist being captured */
	struct nt_hmap graphs;  /* graph (u64) -> glist */
	struct nt_hmap execs;   /* executable graph (u64) -> glist */
	struct nt_hmap nodes;   /* kernel node (u64) -> its graph (u64) */
	uint64_t max_handles;   /* bound of each table (0: none) */
};

void nt_cuda_graphs_init(struct nt_cuda_graphs *g, uint64_t max_handles);
void nt_cuda_graphs_fini(struct nt_cuda_graphs *g);

/* A thread begins capturing (its previous capture list, if any, is
 * dropped) / a launch made while it captures / it ends the capture into
 * `graph` (0: the capture failed; the list is dropped). Return 0 or
 * -ENOMEM / -E2BIG (the caller counts the drop). */
int nt_cuda_graph_capture_begin(struct nt_cuda_graphs *g, uint32_t tid);
int nt_cuda_graph_capture_add(struct nt_cuda_graphs *g, uint32_t tid,
			      int layer, uint64_t func);
int nt_cuda_graph_capture_end(struct nt_cuda_graphs *g, uint32_t tid,
			      uint64_t graph);

/* cudaGraphAddKernelNode / cuGraphAddKernelNode. */
int nt_cuda_graph_add_node(struct nt_cuda_graphs *g, uint64_t graph,
			   uint64_t node, int layer, uint64_t func);
/* cudaGraphKernelNodeSetParams: the node's kernel in its graph. */
void nt_cuda_graph_node_set(struct nt_cuda_graphs *g, uint64_t node,
			    int layer, uint64_t func);
/* cudaGraphExecKernelNodeSetParams: the node's kernel in one exec only. */
void nt_cuda_graph_exec_node_set(struct nt_cuda_graphs *g, uint64_t exec,
				 uint64_t node, int layer, uint64_t func);
/* Instantiate and exec update: the exec runs the graph's kernels as they
 * are now. */
int nt_cuda_graph_instantiate(struct nt_cuda_graphs *g, uint64_t exec,
			      uint64_t graph);
void nt_cuda_graph_destroy(struct nt_cuda_graphs *g, uint64_t graph);
void nt_cuda_graph_exec_destroy(struct nt_cuda_graphs *g, uint64_t exec);

/* The kernels one launch of `exec` runs (NULL: an exec not seen made). */
const struct nt_cuda_glist *nt_cuda_graph_kernels(const struct nt_cuda_graphs *g,
						  uint64_t exec);

#endif /* NTCORE_CUDA_GRAPH_H */
