/* SPDX-License-Identifier: MIT */
/*
 * python probe: frames into names. A sampled frame is a (code object,
 * instruction) pair of addresses in the target; the code object is read
 * once (pyproc.c) and cached per process, re-checked when reused after a
 * while, and the instruction turned into a line (pyline.c). Native
 * frames are symbolized through the host.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pyplugin.h"

struct code_ent *code_get(struct py_plugin *st, struct pyp *p,
				 uint64_t addr, uint64_t now)
{
	struct code_ent *e = py_map_get(&p->codes, addr);

	if (e && now - e->checked_ns > CODE_RECHECK_NS) {
		/* the address may have been freed and reused by another code;
		 * an address that held no code object may hold one now */
		if (!e->bad && py_code_same((pid_t)p->pid, &p->layout, addr, &e->c)) {
			e->checked_ns = now;
		} else {
			py_code_free(&e->c);
			free(py_map_del(&p->codes, addr));
			e = NULL;
		}
	}
	if (e)
		return e->bad ? NULL : e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (py_read_code((pid_t)p->pid, &p->layout, addr, &p->code_type, &e->c))
		e->bad = true;
	e->checked_ns = now;
	e->last_frame = UINT32_MAX;
	if (py_map_put(&p->codes, addr, e)) {
		py_code_free(&e->c);
		free(e);
		return NULL;
	}
	(void)st;
	return e->bad ? NULL : e;
}

uint32_t frame_of(struct py_plugin *st, struct pyp *p,
			 const struct py_frame *f, uint64_t now)
{
	struct code_ent *e = code_get(st, p, f->code, now);
	int addr, line;

	if (!e) {
		st->unresolved++;
		p->unresolved++;
		return py_agg_frame(st->agg, "<unresolved>", "?", 0);
	}
	if (p->layout.minor == 10) {
		addr = (int32_t)(uint32_t)f->instr * 2;
	} else {
		int64_t d = (int64_t)(f->instr - (f->code + p->layout.code_adaptive));

		addr = d < 0 || d > (1 << 28) ? -1 : (int)d;
	}
	if (e->last_frame != UINT32_MAX && e->last_addr == addr)
		return e->last_frame;
	line = py_addr2line(p->layout.minor, e->c.linetable, e->c.lt_len,
			    e->c.firstlineno, addr);
	if (line < 0)
		line = e->c.firstlineno;
	e->last_frame = py_agg_frame(st->agg, e->c.qualname, e->c.file, line);
	e->last_addr = addr;
	return e->last_frame;
}

/* Native frames of a sample above the innermost Python frame (leaf side
 * up to the interpreter's eval loop), appended root first. */
uint32_t native_frames(struct py_plugin *st, uint32_t pid, int32_t id,
			      uint32_t *out, uint32_t max)
{
	uint64_t ips[PY_NATIVE_MAX];
	uint32_t n = 0, k;
	int fd = bpf_map__fd(st->skel->maps.py_native);

	if (id < 0 || max == 0)
		return 0;
	memset(ips, 0, sizeof(ips));
	if (bpf_map_lookup_elem(fd, &id, ips))
		return 0;
	bpf_map_delete_elem(fd, &id);
	for (k = 0; k < PY_NATIVE_MAX && ips[k]; k++) {
		struct nt_symbol sym;
		const char *name = NULL;
		char buf[64];

		if (st->host->symbolize(st->inst, pid, ips[k], &sym) == 0 && sym.name)
			name = sym.name;
		if (name && (strstr(name, "_PyEval_EvalFrame") ||
			     strstr(name, "PyEval_EvalCode")))
			break;
		if (!name) {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, ips[k]);
			name = buf;
		}
		if (n < max)
			out[n++] = py_agg_frame(st->agg, name, NULL, 0);
	}
	/* leaf first -> root first */
	for (uint32_t i = 0; i < n / 2; i++) {
		uint32_t t = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	return n;
}

/* Walk one thread's Python stack from user space into an idle stack id. */
uint32_t user_walk(struct py_plugin *st, struct pyp *p, uint32_t tid,
			  uint64_t tstate, const char *comm, uint64_t now)
{
	struct py_frame fr[PY_MAX_FRAMES];
	uint32_t ids[PY_MAX_FRAMES], m = 0;
	int nf = py_walk((pid_t)p->pid, &p->layout, tstate, fr, (int)st->cfg->max_frames);

	for (int k = nf; k-- > 0;) {
		ids[m] = frame_of(st, p, &fr[k], now);
		if (ids[m] != UINT32_MAX)
			m++;
	}
	if (!m)
		return UINT32_MAX;
	return py_agg_stack(st->agg, p->pid, tid, PY_ST_IDLE, ids, m, comm);
}
