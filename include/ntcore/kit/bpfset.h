/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: a BPF "set" map (a hash whose value is one byte, 1)
 * filled from an array of keys, the way filters reach the kernel (io's
 * devices, net's ports): the BPF side asks only whether a key is there.
 *
 *   nt_bpf_set_fill(bpf_map__fd(skel->maps.ports), ports, sizeof(*ports), n);
 *
 * Ownership: nothing is kept; `keys` is read during the call.
 */
#ifndef NTCORE_KIT_BPFSET_H
#define NTCORE_KIT_BPFSET_H

#include <stddef.h>

/* Inserts each of the n keys (key_size bytes apart) with the value 1.
 * 0, or the first failure's -errno (the keys before it are in). */
int nt_bpf_set_fill(int map_fd, const void *keys, size_t key_size, size_t n);

#endif
