/* SPDX-License-Identifier: MIT */
/* ntcore cuda: formatted stacks by (pid, frames) (stackcache.h). */
#include "stackcache.h"

#include <stdlib.h>
#include <string.h>

static uint64_t frames_hash(uint32_t pid, const uint64_t *ips, uint32_t n,
			    const char *top)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ pid ^ ((uint64_t)n << 32) ^
		     (uint64_t)(uintptr_t)top;

	for (uint32_t i = 0; i < n; i++) {
		h ^= ips[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return h;
}

static struct nt_cuda_sc_slot *slot_of(struct nt_cuda_stack_cache *c,
				       uint64_t hash)
{
	return &c->slots[hash & (NT_CUDA_SC_SLOTS - 1)];
}

static void slot_clear(struct nt_cuda_sc_slot *s)
{
	free(s->ips);
	memset(s, 0, sizeof(*s));
}

const char *nt_cuda_sc_get(struct nt_cuda_stack_cache *c, uint32_t pid,
			   const uint64_t *ips, uint32_t n, const char *top,
			   size_t *len)
{
	uint64_t h;
	struct nt_cuda_sc_slot *s;

	if (!c->slots || !n) {
		c->misses++;
		return NULL;
	}
	h = frames_hash(pid, ips, n, top);
	s = slot_of(c, h);
	if (!s->ips || s->hash != h || s->pid != pid || s->n != n || s->top != top ||
	    memcmp(s->ips, ips, n * sizeof(*ips))) {
		c->misses++;
		return NULL;
	}
	c->hits++;
	*len = s->len;
	return s->text;
}

void nt_cuda_sc_put(struct nt_cuda_stack_cache *c, uint32_t pid,
		    const uint64_t *ips, uint32_t n, const char *top,
		    const char *text, size_t len)
{
	struct nt_cuda_sc_slot *s;
	uint64_t h;

	if (!n)
		return;
	if (!c->slots && !(c->slots = calloc(NT_CUDA_SC_SLOTS, sizeof(*c->slots))))
		return;
	h = frames_hash(pid, ips, n, top);
	s = slot_of(c, h);
	slot_clear(s); /* direct-mapped: the newcomer takes the slot */
	s->ips = malloc(n * sizeof(*ips) + len + 1);
	if (!s->ips)
		return;
	memcpy(s->ips, ips, n * sizeof(*ips));
	s->text = (char *)(s->ips + n);
	memcpy(s->text, text, len);
	s->text[len] = '\0';
	s->len = len;
	s->hash = h;
	s->pid = pid;
	s->n = n;
	s->top = top;
}

void nt_cuda_sc_forget_pid(struct nt_cuda_stack_cache *c, uint32_t pid)
{
	for (size_t i = 0; c->slots && i < NT_CUDA_SC_SLOTS; i++)
		if (c->slots[i].ips && c->slots[i].pid == pid)
			slot_clear(&c->slots[i]);
}

void nt_cuda_sc_fini(struct nt_cuda_stack_cache *c)
{
	for (size_t i = 0; c->slots && i < NT_CUDA_SC_SLOTS; i++)
		slot_clear(&c->slots[i]);
	free(c->slots);
	memset(c, 0, sizeof(*c));
}
