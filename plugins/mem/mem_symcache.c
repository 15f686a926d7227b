/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the symbolized text of each (process, stack id), kept in the
 * kit's hash map until the process execs or goes. Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sym_key {
	uint32_t tgid;
	int32_t stack_id;
};

void mem_symcache_init(struct mem_symcache *c)
{
	nt_hmap_init(&c->map, sizeof(struct sym_key), sizeof(struct mem_stack_text), 0);
}

static void text_free(struct mem_stack_text *e)
{
	free(e->text);
	free(e->function);
}

void mem_symcache_free(struct mem_symcache *c)
{
	struct nt_hmap_iter it;

	nt_hmap_iter_init(&it, &c->map);
	while (nt_hmap_iter_next(&it))
		text_free(it.val);
	nt_hmap_fini(&c->map);
}

const struct mem_stack_text *mem_symcache_get(const struct mem_symcache *c,
					      uint32_t tgid, int32_t stack_id)
{
	struct sym_key k = {.tgid = tgid, .stack_id = stack_id};

	return nt_hmap_get(&c->map, &k);
}

int mem_symcache_put(struct mem_symcache *c, uint32_t tgid, int32_t stack_id,
		     const char *text, const char *function, bool incomplete)
{
	struct sym_key k = {.tgid = tgid, .stack_id = stack_id};
	char *t = strdup(text ? text : "");
	char *f = strdup(function ? function : "");
	struct mem_stack_text *s;
	bool created;

	if (!t || !f || !(s = nt_hmap_put(&c->map, &k, &created))) {
		free(t);
		free(f);
		return -ENOMEM;
	}
	if (!created)
		text_free(s);
	s->tgid = tgid;
	s->stack_id = stack_id;
	s->text = t;
	s->function = f;
	s->incomplete = incomplete;
	return 0;
}

void mem_symcache_forget(struct mem_symcache *c, uint32_t tgid)
{
	struct nt_hmap_iter it;

	nt_hmap_iter_init(&it, &c->map);
	while (nt_hmap_iter_next(&it)) {
		struct mem_stack_text *e = it.val;

		if (e->tgid != tgid)
			continue;
		text_free(e);
		nt_hmap_iter_del(&it);
	}
}
