/* SPDX-License-Identifier: MIT */
/* ntcore plugin kit: BPF set maps filled from arrays (kit/bpfset.h). */
#include "ntcore/kit/bpfset.h"

#include <errno.h>
#include <stdint.h>

#include <bpf/bpf.h>

int nt_bpf_set_fill(int map_fd, const void *keys, size_t key_size, size_t n)
{
	const uint8_t one = 1;
	const char *key = keys;

	for (size_t i = 0; i < n; i++, key += key_size)
		if (bpf_map_update_elem(map_fd, key, &one, BPF_ANY))
			return -errno;
	return 0;
}
