/* SPDX-License-Identifier: MIT */
#include "ntcore/kit/ring.h"

#include <errno.h>
#include <limits.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct nt_ring {
	int fd;
	size_t size;               /* data bytes, a power of two */
	size_t page;
	unsigned long *consumer;   /* its own page, read-write */
	const unsigned long *producer; /* then the producer's page ... */
	const uint8_t *data;       /* ... and the data, mapped once */
	ring_buffer_sample_fn cb;
	void *ctx;
	uint8_t *copy;             /* a record that crosses the end */
	size_t copy_cap;
};

void nt_ring_free(struct nt_ring *r)
{
	if (!r)
		return;
	if (r->consumer)
		munmap(r->consumer, r->page);
	if (r->producer)
		munmap((void *)r->producer, r->page + r->size);
	free(r->copy);
	free(r);
}

int nt_ring_new(int map_fd, size_t size, ring_buffer_sample_fn cb, void *ctx,
		struct nt_ring **out)
{
	struct nt_ring *r = calloc(1, sizeof(*r));
	void *p;
	int err;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->fd = map_fd;
	r->size = size;
	r->page = (size_t)sysconf(_SC_PAGESIZE);
	r->cb = cb;
	r->ctx = ctx;
	if (!size || (size & (size - 1)) || size % r->page) {
		free(r);
		return -EINVAL;
	}
	p = mmap(NULL, r->page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	r->consumer = p;
	p = mmap(NULL, r->page + size, PROT_READ, MAP_SHARED, map_fd, (off_t)r->page);
	if (p == MAP_FAILED)
		goto fail;
	r->producer = p;
	r->data = (const uint8_t *)p + r->page;
	*out = r;
	return 0;
fail:
	err = -errno;
	nt_ring_free(r);
	return err;
}

int nt_ring_open(const struct nt_host *host, struct nt_instance *inst,
		 const struct bpf_map *map, ring_buffer_sample_fn cb, void *ctx,
		 uint32_t token, struct nt_ring **out)
{
	int err = nt_ring_new(bpf_map__fd(map), bpf_map__max_entries(map), cb,
			      ctx, out);

	if (err) {
		host->log(inst, NT_LOG_ERROR, "cannot map the ring buffer %s: %s",
			  bpf_map__name(map), strerror(-err));
		return err;
	}
	err = host->watch_fd(inst, (*out)->fd, token);
	if (err) {
		host->log(inst, NT_LOG_ERROR, "cannot watch the ring buffer %s: %s",
			  bpf_map__name(map), strerror(err < 0 ? -err : EINVAL));
		nt_ring_free(*out);
		*out = NULL;
		return err < 0 ? err : -EINVAL;
	}
	return 0;
}

/* The sample at `off` of `len` bytes: in place, or copied when it crosses
 * the end of the data (a header never does: both are 8-byte aligned). */
static void *sample_at(struct nt_ring *r, size_t off, size_t len)
{
	size_t first = r->size - off;

	if (len <= first)
		return (void *)(r->data + off);
	if (len > r->copy_cap) {
		uint8_t *bigger = realloc(r->copy, len);

		if (!bigger)
			return NULL;
		r->copy = bigger;
		r->copy_cap = len;
	}
	memcpy(r->copy, r->data + off, first);
	memcpy(r->copy + first, r->data, len - first);
	return r->copy;
}

/* Records from *cons up to prod: the count, or cb's negative return. A
 * record not yet committed stops the walk (it is read next time). */
static int64_t read_upto(struct nt_ring *r, unsigned long *cons,
			 unsigned long prod)
{
	int64_t n = 0;

	while (*cons < prod) {
		size_t off = *cons & (r->size - 1);
		const uint32_t *hdr = (const uint32_t *)(r->data + off);
		uint32_t word = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
		uint32_t len = word & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
		int rc = 0;

		if (word & BPF_RINGBUF_BUSY_BIT)
			break;
		*cons += (len + BPF_RINGBUF_HDR_SZ + 7) & ~7ul;
		if (!(word & BPF_RINGBUF_DISCARD_BIT)) {
			size_t body = (off + BPF_RINGBUF_HDR_SZ) & (r->size - 1);
			void *sample = sample_at(r, body, len);

			rc = sample ? r->cb(r->ctx, sample, len) : -ENOMEM;
			n++;
		}
		__atomic_store_n(r->consumer, *cons, __ATOMIC_RELEASE);
		if (rc < 0)
			return rc;
	}
	return n;
}

int nt_ring_consume(struct nt_ring *r)
{
	unsigned long cons = __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE);
	int64_t total = 0;

	for (;;) {
		unsigned long prod = __atomic_load_n(r->producer, __ATOMIC_ACQUIRE);
		int64_t n;

		if (cons >= prod)
			break;
		n = read_upto(r, &cons, prod);
		if (n < 0)
			return (int)n;
		total += n;
		if (cons < prod) /* a record still being written */
			break;
	}
	return total > INT_MAX ? INT_MAX : (int)total;
}

size_t nt_ring_size(const struct nt_ring *r)
{
	return r->size;
}

int nt_ring_fd(const struct nt_ring *r)
{
	return r->fd;
}
