/* SPDX-License-Identifier: MIT */
/* Call stacks of CUDA calls: an id per stack, frames named and formatted
 * (innermost first), formatted stacks cached by call site. */
#include "cuda_decode_priv.h"

#include <stdio.h>
#include <string.h>

uint64_t nt_cuda_stack_id(const uint64_t *ips, uint32_t n)
{
	uint64_t h;

	if (!n)
		return 0;
	h = nt_hash_bytes(ips, (size_t)n * sizeof(*ips));
	return h ? h : 1;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Where a frame-pointer walk has gone past the real stack: an address in
 * no mapped file, the same frame again (a frame that points to itself),
 * or an unnamed address inside the dynamic loader (what a walk finds
 * beyond _start when the startup code keeps no frame pointer). */
bool nt_cuda_frame_implausible(uint64_t ip, uint64_t prev_ip, int sym_rc,
			       const struct nt_symbol *sym)
{
	const char *mod = sym->module ? base_name(sym->module) : NULL;

	if (!ip || ip == prev_ip || !mod)
		return true;
	return (sym_rc < 0 || !sym->name || !sym->name[0]) &&
	       strncmp(mod, "ld-", 3) == 0;
}

/* One frame: its name, else "module+0xoffset" (the offset in the module,
 * as addr2line takes it), else the address. ';' kept out of names. */
static int format_frame(char *frame, size_t len, uint64_t ip, int rc,
			const struct nt_symbol *sym)
{
	int w;

	if (rc >= 0 && sym->name && sym->name[0])
		w = snprintf(frame, len, "%s", sym->name);
	else if (sym->module && sym->module[0])
		w = snprintf(frame, len, "%s+0x%llx", base_name(sym->module),
			     (unsigned long long)sym->offset);
	else
		w = snprintf(frame, len, "0x%llx", (unsigned long long)ip);
	if (w < 0)
		return 0;
	if ((size_t)w >= len)
		w = (int)len - 1;
	for (int k = 0; k < w; k++)
		if (frame[k] == ';')
			frame[k] = ',';
	return w;
}

/* Root first, as folded stacks are: the walk gives the innermost frame
 * first, so frames are laid from the end of buf backwards, then moved to
 * its start. When buf is too small the root side is what is left out. */
size_t nt_cuda_format_stack(struct nt_cuda_state *st, uint32_t pid,
			    const uint64_t *ips, uint32_t n, char *buf,
			    size_t cap, const char *top)
{
	size_t end, pos, kept;
	bool named = true; /* every frame named with its module: cacheable */
	const char *text;

	if (!cap)
		return 0;
	buf[0] = '\0';
	end = pos = cap - 1;
	if (n > st->stack_depth)
		n = st->stack_depth;
	if ((text = nt_cuda_sc_get(&st->stacks, pid, ips, n, top, &kept)) &&
	    kept < cap) {
		memcpy(buf, text, kept + 1);
		return kept;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct nt_symbol sym = {0};
		char frame[512];
		int rc = st->sym ? st->sym(st->sym_arg, pid, ips[i], &sym) : -ENOENT;

		/* frame 0 is the probed function itself: always kept */
		if (i && nt_cuda_frame_implausible(ips[i], ips[i - 1], rc, &sym))
			break;
		if (!ips[i])
			break;
		/* frame 0 is the probed function: its name is known even when
		 * its library was mapped after the last read of the maps and
		 * the process is gone by now */
		if (!i && top && top[0] && !sym.module) {
			sym.name = top;
			rc = 0;
		}
		named &= rc >= 0 && sym.module && sym.module[0];
		size_t w = (size_t)format_frame(frame, sizeof(frame), ips[i], rc, &sym);
		size_t need = w + (pos < end ? 1 : 0);
		if (!w || need > pos)
			break;
		if (pos < end)
			buf[--pos] = ';';
		pos -= w;
		memcpy(buf + pos, frame, w);
	}
	buf[end] = '\0';
	memmove(buf, buf + pos, end - pos + 1);
	if (named)
		nt_cuda_sc_put(&st->stacks, pid, ips, n, top, buf, end - pos);
	return end - pos;
}
