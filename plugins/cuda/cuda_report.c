/* SPDX-License-Identifier: MIT */
/* The per-process text report of the cuda probe. */
#include "cuda_decode_priv.h"

#include <stdio.h>
#include <string.h>

#include "ntcore/kit/sb.h"
#include "ntcore/kit/topn.h"

/* ------------------------------------------------------------------ */
/* Report                                                              */
/* ------------------------------------------------------------------ */

static void report_top_kernels(struct nt_sb *b, const struct nt_cuda_kcount *k,
			       size_t n)
{
	struct nt_topn best;

	if (!n)
		return;
	if (nt_topn_init(&best, 10, sizeof(*k)) < 0) {
		b->failed = true;
		return;
	}
	for (size_t i = 0; i < n; i++)
		nt_topn_offer(&best, k[i].count, &k[i]);
	nt_sb_printf(b, "  top kernels:\n");
	for (size_t i = 0; i < nt_topn_count(&best); i++) {
		const struct nt_cuda_kcount *r = nt_topn_at(&best, i, NULL);

		nt_sb_printf(b, "    %10llu  %.160s\n", (unsigned long long)r->count,
			     r->name && r->name[0] ? r->name : "(unnamed)");
	}
	nt_topn_fini(&best);
}

char *nt_cuda_report_text(const struct nt_cuda_proc *p,
			  const struct nt_cuda_kcount *top, size_t ntop)
{
	struct nt_sb b;
	const struct nt_cuda_totals *t = &p->tot;
	char h1[32], h2[32];
	uint64_t launches = 0;

	nt_sb_init(&b, 0);
	for (size_t i = 0; i < ntop; i++)
		launches += top[i].count;
	/* the totals also hold the kernels graph launches ran */
	if (t->launches > launches)
		launches = t->launches;
	nt_sb_printf(&b, "cuda: pid %u (%s)\n", p->pid, p->comm);
	nt_sb_printf(&b, "  launches %llu (%zu kernels), graph launches %llu\n",
		  (unsigned long long)launches, ntop,
		  (unsigned long long)t->graph_launches);
	nt_fmt_bytes(t->alloc_bytes, h1, sizeof(h1));
	nt_fmt_bytes(t->free_bytes, h2, sizeof(h2));
	nt_sb_printf(&b, "  allocations %llu (%s, %llu failed), frees %llu (%s)\n",
		  (unsigned long long)t->allocs, h1,
		  (unsigned long long)t->alloc_failed,
		  (unsigned long long)t->frees, h2);
	nt_fmt_bytes(t->peak_device_bytes, h1, sizeof(h1));
	nt_fmt_bytes(p->device_bytes_now, h2, sizeof(h2));
	nt_sb_printf(&b, "  device memory: peak %s, still allocated %s in %zu blocks\n",
		  h1, h2, p->nblocks);
	for (int d = 1; d <= NT_CUDA_DIR_P2P; d++) {
		if (!t->copies[d])
			continue;
		nt_fmt_bytes(t->copy_bytes[d], h1, sizeof(h1));
		nt_sb_printf(&b, "  copies %s: %llu, %s", nt_cuda_dir_name((unsigned)d),
			  (unsigned long long)t->copies[d], h1);
		if (t->sync_copy_ns[d])
			nt_sb_printf(&b, ", synchronous %.2f GB/s",
				  (double)t->sync_copy_bytes[d] /
					  (double)t->sync_copy_ns[d]);
		nt_sb_printf(&b, "\n");
	}
	nt_sb_printf(&b, "  synchronisation: %llu calls, %.3f s blocked; API errors %llu\n",
		  (unsigned long long)t->syncs, (double)t->sync_ns / 1e9,
		  (unsigned long long)t->errors);
	report_top_kernels(&b, top, ntop);
	if (b.failed) {
		nt_sb_fini(&b);
		return NULL;
	}
	return b.buf ? nt_sb_take(&b, NULL) : strdup("");
}
