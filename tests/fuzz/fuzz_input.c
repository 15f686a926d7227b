/* SPDX-License-Identifier: MIT */
/* Cutting a fuzz input into exact-size records (fuzz_host.h). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_host.h"

void *fuzz_copy(const uint8_t *data, size_t size)
{
	void *copy = malloc(size ? size : 1);

	if (copy && size)
		memcpy(copy, data, size);
	return copy;
}

void fuzz_records(const uint8_t *data, size_t size, int pids,
		  void (*fn)(void *arg, void *rec, size_t len), void *arg)
{
	while (size >= 2) {
		size_t len = (size_t)data[0] | (size_t)data[1] << 8;
		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		void *rec = fuzz_copy(data, len);
		if (rec && pids == FUZZ_MASK_PIDS && len >= sizeof(struct nt_event_hdr)) {
			struct nt_event_hdr *h = rec;
			h->pid = FUZZ_NO_PROCESS | (h->pid & 0xffff);
			h->tid = FUZZ_NO_PROCESS | (h->tid & 0xffff);
		}
		if (rec)
			fn(arg, rec, len);
		free(rec);
		data += len;
		size -= len;
	}
}
