/* SPDX-License-Identifier: MIT */
/*
 * The kernel's BTF, parsed once per run and shared by every BPF object.
 *
 * libbpf parses /sys/kernel/btf/vmlinux for each object it loads (CO-RE
 * relocations and tp_btf programs need it) and frees it when the load is
 * done: training.conf paid 13 parses (2.4 to 10 ms and ~5 MB of heap each,
 * heap that glibc then kept). libbpf 1.1 has no option to hand an object a
 * BTF parsed elsewhere, but it calls btf__load_vmlinux_btf() and btf__free()
 * through its PLT, so the dynamic linker binds those calls, and the
 * plugins', to the definitions below, which the executable exports
 * (core/meson.build: --export-dynamic-symbol). The first call parses (with
 * libbpf's own function, found with RTLD_NEXT); later calls return the same
 * object, and btf__free() of it does nothing until the daemon releases it
 * at exit. libbpf only reads an object's vmlinux BTF (candidate lookups,
 * attach ids; module BTFs are split BTFs on top of it), so one object can
 * serve every load.
 *
 * The one piece of process-wide mutable state in the core: libbpf calls
 * these functions without a context pointer. Guarded by a mutex.
 */
#include "btfshare.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include <bpf/btf.h>

#include "clock.h"

typedef struct btf *(*load_fn)(void);
typedef void (*free_fn)(struct btf *);

static struct {
	pthread_mutex_t lock;
	struct btf *btf;     /* the shared parse, NULL before */
	bool tried;          /* parsed (or found missing) once */
	bool pinned;         /* handed to a plugin (host->vmlinux_btf): kept */
	int err;             /* errno of a failed parse */
	struct nt_btfshare_stats stats;
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

static load_fn real_load(void)
{
	static load_fn fn; /* resolved once; the same value every time */

	if (!fn)
		*(void **)&fn = dlsym(RTLD_NEXT, "btf__load_vmlinux_btf");
	return fn;
}

static free_fn real_free(void)
{
	static free_fn fn;

	if (!fn)
		*(void **)&fn = dlsym(RTLD_NEXT, "btf__free");
	return fn;
}

struct btf *btf__load_vmlinux_btf(void)
{
	struct btf *btf;
	int err;

	pthread_mutex_lock(&shared.lock);
	if (!shared.tried && real_load()) {
		uint64_t t0 = nt_mono_ns();

		shared.tried = true;
		errno = 0;
		shared.btf = real_load()();
		shared.err = shared.btf ? 0 : (errno ? errno : ENOENT);
		shared.stats.parses++;
		shared.stats.parse_ns = nt_mono_ns() - t0;
	}
	shared.stats.calls++;
	btf = shared.btf;
	err = shared.err;
	pthread_mutex_unlock(&shared.lock);
	if (!btf)
		errno = err ? err : ENOSYS;
	return btf;
}

void btf__free(struct btf *btf)
{
	if (!btf || !real_free())
		return;
	pthread_mutex_lock(&shared.lock);
	bool is_shared = btf == shared.btf;
	pthread_mutex_unlock(&shared.lock);
	if (!is_shared)
		real_free()(btf);
}

void nt_btfshare_pin(void)
{
	pthread_mutex_lock(&shared.lock);
	shared.pinned = true;
	pthread_mutex_unlock(&shared.lock);
}

bool nt_btfshare_release_unpinned(void)
{
	pthread_mutex_lock(&shared.lock);
	struct btf *btf = shared.pinned ? NULL : shared.btf;
	if (btf) {
		shared.btf = NULL;
		shared.tried = false;
	}
	pthread_mutex_unlock(&shared.lock);
	if (btf && real_free())
		real_free()(btf);
	return btf != NULL;
}

void nt_btfshare_release(void)
{
	pthread_mutex_lock(&shared.lock);
	struct btf *btf = shared.btf;
	shared.btf = NULL;
	shared.tried = false;
	shared.pinned = false;
	pthread_mutex_unlock(&shared.lock);
	if (btf && real_free())
		real_free()(btf);
}

struct nt_btfshare_stats nt_btfshare_stats(void)
{
	pthread_mutex_lock(&shared.lock);
	struct nt_btfshare_stats s = shared.stats;
	pthread_mutex_unlock(&shared.lock);
	return s;
}
