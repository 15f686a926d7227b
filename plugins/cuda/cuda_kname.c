/* SPDX-License-Identifier: MIT */
/* Attach-time kernel names: the runtime -> driver launch join and the
 * learned offset of the name pointer in the driver's function struct
 * (cuda_kname.h says how and why). */
#include "cuda_kname.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "cuda_decode.h"

static const char *const method_names[NT_KNAME_METHODS] = {
	"none", "load", "symbol", "join", "memory",
};

const char *nt_cuda_kname_method_name(int method)
{
	return method >= 0 && method < NT_KNAME_METHODS ?
		method_names[method] : "none";
}

ssize_t nt_cuda_mem_read_proc(void *arg, uint32_t pid, uint64_t addr,
			      void *buf, size_t len)
{
	size_t done = 0;

	(void)arg;
	/* page by page: a read that crosses into an unmapped page still
	 * returns what lies before it */
	while (done < len) {
		size_t chunk = 4096 - ((addr + done) & 4095);
		struct iovec local, remote;
		ssize_t n;

		if (chunk > len - done)
			chunk = len - done;
		local.iov_base = (char *)buf + done;
		local.iov_len = chunk;
		remote.iov_base = (void *)(uintptr_t)(addr + done);
		remote.iov_len = chunk;
		n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
		if (n <= 0)
			return done ? (ssize_t)done : (n < 0 ? -errno : -EFAULT);
		done += (size_t)n;
		if ((size_t)n < chunk)
			break;
	}
	return (ssize_t)done;
}

static bool user_pointer(uint64_t p)
{
	return p >= 0x10000 && p < 0x800000000000ull;
}

/* The NUL-terminated string at p (malloc'd), or NULL. */
static char *read_cstring(nt_cuda_mem_fn mem, void *arg, uint32_t pid,
			  uint64_t p)
{
	char buf[NT_CUDA_KOFF_NAME_MAX];
	ssize_t n;

	if (!user_pointer(p))
		return NULL;
	n = mem(arg, pid, p, buf, sizeof(buf));
	if (n <= 0 || !memchr(buf, '\0', (size_t)n))
		return NULL;
	return buf[0] ? strdup(buf) : NULL;
}

static bool ident_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '_' || ch == '$' || ch == '.';
}

bool nt_cuda_kname_plausible(const char *s)
{
	size_t n;

	if (!s || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') ||
		    (s[0] >= 'A' && s[0] <= 'Z')))
		return false;
	for (n = 0; s[n]; n++)
		if (!ident_char(s[n]))
			return false;
	if (n < 2 || n >= NT_CUDA_KNAME_MAX)
		return false;
	if (s[0] == '_' && s[1] == 'Z') {
		char *d = nt_cuda_demangle(s);

		free(d);
		return d != NULL;
	}
	return true;
}

/* Does the string at p name `name` (raw, or demangled equal)? */
static bool names_equal(const char *raw, const char *name)
{
	char *d;
	bool eq;

	if (!strcmp(raw, name))
		return true;
	d = nt_cuda_demangle(raw);
	eq = d && !strcmp(d, name);
	free(d);
	return eq;
}

void nt_cuda_koff_init(struct nt_cuda_koff *k)
{
	memset(k, 0, sizeof(*k));
	k->offset = -1;
}

/* The offset with the most agreeing votes: NT_CUDA_KOFF_NEED at least and
 * at most one against per 8 for (a mistaken join is tolerated, a slot that
 * merely held the name once is not); -1 if none. */
static int best_offset(const struct nt_cuda_koff *k)
{
	int best = -1;

	for (int i = 0; i < NT_CUDA_KOFF_SLOTS; i++)
		if (k->agree[i] >= NT_CUDA_KOFF_NEED &&
		    k->disagree[i] * 8u <= k->agree[i] &&
		    (best < 0 || k->agree[i] > k->agree[best]))
			best = i;
	return best < 0 ? -1 : best * 8;
}

/* The raw string at the learned offset of handle's struct, or NULL. */
static char *nt_cuda_koff_read(const struct nt_cuda_koff *k, nt_cuda_mem_fn mem,
			       void *arg, uint32_t pid, uint64_t handle)
{
	uint64_t p;

	if (k->offset < 0 || !user_pointer(handle) ||
	    mem(arg, pid, handle + (uint64_t)k->offset, &p, 8) != 8)
		return NULL;
	return read_cstring(mem, arg, pid, p);
}

int nt_cuda_koff_teach(struct nt_cuda_koff *k, nt_cuda_mem_fn mem, void *arg,
		       uint32_t pid, uint64_t handle, const char *name)
{
	uint64_t slots[NT_CUDA_KOFF_SLOTS];
	ssize_t n;

	if (!name || !name[0] || !user_pointer(handle))
		return 0;
	if (k->offset >= 0 && k->confirmed >= 16) {
		/* learned and confirmed: check the learned slot only (a full
		 * vote costs ~65 reads) */
		char *s = nt_cuda_koff_read(k, mem, arg, pid, handle);

		if (s && names_equal(s, name))
			k->confirmed++;
		else
			k->contradicted++;
		free(s);
		return 0;
	}
	n = mem(arg, pid, handle, slots, sizeof(slots));
	if (n < 8)
		return 0;
	k->taught++;
	for (int i = 0; i < (int)(n / 8); i++) {
		char *s = read_cstring(mem, arg, pid, slots[i]);
		bool eq = s && names_equal(s, name);

		if (eq && k->agree[i] < UINT16_MAX)
			k->agree[i]++;
		else if (!eq && k->agree[i] && k->disagree[i] < UINT16_MAX)
			k->disagree[i]++; /* only offsets that ever agreed */
		if (k->offset == i * 8 && eq)
			k->confirmed++;
		else if (k->offset == i * 8)
			k->contradicted++;
		free(s);
	}
	if (k->offset < 0 || k->guessed) {
		int best = best_offset(k);

		if (best < 0)
			return 0;
		k->guessed = false; /* a known name overrules a guess */
		k->announced = k->announced && k->offset == best;
		k->offset = best;
		return 1;
	}
	k->offset = best_offset(k); /* relearn if proved wrong */
	return 0;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h ? h : 1;
}

/* Does slot i name 4 in 5 observed handles or more, all names different? */
static bool slot_names_most(const struct nt_cuda_koff *k, int i)
{
	uint32_t named = 0;

	for (uint32_t a = 0; a < k->nobs; a++) {
		if (!k->obs[a][i])
			continue;
		named++;
		for (uint32_t b = 0; b < a; b++)
			if (k->obs[a][i] == k->obs[b][i])
				return false; /* shared: a module's name */
	}
	return named * 5 >= k->nobs * 4;
}

/* The lowest slot that names most observed handles (4 in 5: a handle of
 * another kind, a CUkernel among CUfunctions, may hold it elsewhere), all
 * names different; -1 if none. The lowest: the handle points to its
 * struct's start, and what lies past the struct (the next function's
 * struct, its name pointer included) would qualify as well. */
static int guess_offset(const struct nt_cuda_koff *k)
{
	for (int i = 0; i < NT_CUDA_KOFF_SLOTS; i++)
		if (slot_names_most(k, i))
			return i * 8;
	return -1;
}

int nt_cuda_koff_observe(struct nt_cuda_koff *k, nt_cuda_mem_fn mem,
			 void *arg, uint32_t pid, uint64_t handle)
{
	uint64_t slots[NT_CUDA_KOFF_SLOTS];
	uint64_t *row;
	ssize_t n;
	int off;

	if (k->offset >= 0 || k->nobs >= NT_CUDA_KOFF_GUESS_MAX ||
	    !user_pointer(handle))
		return 0;
	n = mem(arg, pid, handle, slots, sizeof(slots));
	if (n < 8)
		return 0;
	row = k->obs[k->nobs++];
	memset(row, 0, sizeof(k->obs[0]));
	for (int i = 0; i < (int)(n / 8); i++) {
		char *s = read_cstring(mem, arg, pid, slots[i]);

		if (s && nt_cuda_kname_plausible(s))
			row[i] = str_hash(s);
		free(s);
	}
	if (k->nobs < NT_CUDA_KOFF_GUESS_MIN || (off = guess_offset(k)) < 0)
		return 0;
	k->offset = off;
	k->guessed = true;
	return 1;
}

char *nt_cuda_koff_name(struct nt_cuda_koff *k, nt_cuda_mem_fn mem,
			void *arg, uint32_t pid, uint64_t handle)
{
	char *s, *d;

	if (k->offset < 0)
		return NULL;
	s = nt_cuda_koff_read(k, mem, arg, pid, handle);
	if (!s)
		return NULL; /* unreadable, or no string there */
	if (!nt_cuda_kname_plausible(s)) {
		k->refused++;
		free(s);
		return NULL;
	}
	k->named++;
	d = nt_cuda_demangle(s);
	if (d) {
		free(s);
		return d;
	}
	return s;
}

/* ---- per process: methods and the join --------------------------- */

void nt_cuda_knproc_init(struct nt_cuda_knproc *kp)
{
	memset(kp, 0, sizeof(*kp));
	nt_hmap_init(&kp->method, sizeof(uint64_t), sizeof(uint8_t), 65536);
}

void nt_cuda_knproc_fini(struct nt_cuda_knproc *kp)
{
	nt_hmap_fini(&kp->method);
}

void nt_cuda_kn_set_method(struct nt_cuda_knproc *kp, uint64_t handle,
			   int method)
{
	uint8_t *m = nt_hmap_put(&kp->method, &handle, NULL);

	if (m)
		*m = (uint8_t)method;
}

int nt_cuda_kn_method(const struct nt_cuda_knproc *kp, uint64_t handle)
{
	const uint8_t *m = nt_hmap_get(&kp->method, &handle);

	return m ? *m : NT_KNAME_NONE;
}

void nt_cuda_kn_note_runtime(struct nt_cuda_knproc *kp, uint32_t tid,
			     uint64_t ts_ns, uint64_t func)
{
	struct nt_cuda_kn_join *j = NULL;

	for (int i = 0; i < NT_CUDA_JOIN_TIDS; i++)
		if (kp->last[i].tid == tid)
			j = &kp->last[i];
	if (!j)
		j = &kp->last[kp->next++ % NT_CUDA_JOIN_TIDS];
	j->tid = tid;
	j->ts_ns = ts_ns;
	j->func = func;
}

uint64_t nt_cuda_kn_join_driver(struct nt_cuda_knproc *kp, uint32_t tid,
				uint64_t ts_ns)
{
	for (int i = 0; i < NT_CUDA_JOIN_TIDS; i++) {
		struct nt_cuda_kn_join *j = &kp->last[i];
		uint64_t func = j->func;

		if (j->tid != tid || !func)
			continue;
		j->func = 0;
		if (ts_ns >= j->ts_ns && ts_ns - j->ts_ns <= NT_CUDA_JOIN_NS)
			return func;
	}
	return 0;
}
