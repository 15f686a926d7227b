// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu injection library (libntcore-cupti.so.1): the entry
 * point the CUDA driver calls (InitializeInjection, from the process's
 * first cuInit when CUDA_INJECTION64_PATH names this file), finding and
 * starting CUPTI, and the process's exit and forks.
 *
 * The library keeps one state per process in a static pointer: CUPTI's
 * buffer and timestamp callbacks carry no argument, so nothing else could
 * reach it. It never writes to the job's stdout or stderr: what it has to
 * say goes to the daemon in the hello record, which the daemon logs.
 */

#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cupti_cbids.h"
#include "inject.h"
#include "inject_find.h"

#define EXPORT __attribute__((visibility("default")))

static struct inj *the_inj;

static uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cb_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
	if (the_inj) {
		inj_buffer_request(the_inj, buffer, size, max_records);
	} else {
		*buffer = NULL;
		*size = 0;
		*max_records = 0;
	}
}

static void cb_complete(void *context, uint32_t stream_id, uint8_t *buffer,
			size_t size, size_t valid)
{
	(void)context;
	(void)stream_id;
	(void)size;
	if (the_inj)
		inj_buffer_complete(the_inj, buffer, valid);
}

/* ---- the socket -------------------------------------------------------- */

static int connect_daemon(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, sndbuf = 4 << 20;

	if (strlen(path) >= sizeof(a.sun_path))
		return -1;
	strcpy(a.sun_path, path);
	/* non-blocking: a full backlog must not hold the job in cuInit */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	return fd;
}

static void say_hello(struct inj *g, uint32_t status, uint32_t major,
		      uint32_t version, uint32_t flags, const char *text)
{
	struct {
		struct nt_gpu_msg m;
		struct nt_gpu_hello h;
	} msg;

	memset(&msg, 0, sizeof(msg));
	msg.m.magic = NT_GPU_MAGIC;
	msg.m.version = NT_GPU_VERSION;
	msg.m.size = sizeof(msg);
	msg.m.n_records = 1;
	msg.h.h.type = NT_GPU_R_HELLO;
	msg.h.h.size = sizeof(msg.h);
	msg.h.status = status;
	msg.h.cuda_major = major;
	msg.h.cupti_version = version;
	msg.h.flags = flags;
	msg.h.clock_ns = clock_mono_ns();
	snprintf(msg.h.text, sizeof(msg.h.text), "%s", text);
	inj_send_now(g, &msg, sizeof(msg), 100);
}

/* ---- finding CUPTI ------------------------------------------------------ */

struct loaded {
	const char *paths[512];
	char store[512][256];
	size_t n;
};

static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct loaded *l = arg;

	(void)size;
	if (info->dlpi_name && info->dlpi_name[0] && l->n < 512) {
		snprintf(l->store[l->n], sizeof(l->store[0]), "%s", info->dlpi_name);
		l->paths[l->n] = l->store[l->n];
		l->n++;
	}
	return 0;
}

static bool fs_exists(void *arg, const char *path)
{
	(void)arg;
	return access(path, R_OK) == 0;
}

static size_t fs_glob(void *arg, const char *pattern, char out[][512], size_t max)
{
	glob_t gl;
	size_t n = 0;

	(void)arg;
	if (glob(pattern, 0, NULL, &gl) == 0)
		for (; n < gl.gl_pathc && n < max; n++)
			snprintf(out[n], 512, "%s", gl.gl_pathv[n]);
	globfree(&gl);
	return n;
}

static int driver_major(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	int (*get)(int *) = NULL;
	int v = 0;

	if (h) {
		*(void **)&get = dlsym(h, "cuDriverGetVersion");
		if (get && get(&v) != 0)
			v = 0;
		dlclose(h);
	}
	return v / 1000;
}

/* dlopen the job's CUPTI; 0, or -1 with why. */
static int open_cupti(struct inj *g, char *path, size_t path_len, int *major,
		      char *why, size_t why_len)
{
	struct loaded *l = calloc(1, sizeof(*l));
	struct nt_cupti_where w = { .exists = fs_exists, .glob = fs_glob };
	bool bare = false;
	int rc;

	if (!l) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	dl_iterate_phdr(note_object, l);
	w.loaded = l->paths;
	w.n_loaded = l->n;
	w.override = getenv(NT_GPU_ENV_CUPTI);
	w.driver_major = driver_major();
#if defined(__aarch64__)
	w.arch = "sbsa";
#else
	w.arch = "x86_64";
#endif
	*major = nt_cupti_cuda_major(&w);
	rc = nt_cupti_find(&w, path, path_len, &bare, why, why_len);
	free(l);
	if (rc)
		return -1;
	g->cupti_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!g->cupti_handle) {
		if (!bare)
			snprintf(why, why_len, "cannot load %.400s: %.300s", path, dlerror());
		return -1;
	}
	return 0;
}

static int resolve(struct inj *g, char *why, size_t why_len)
{
	static const struct {
		const char *name;
		size_t off;
		bool optional;
	} fns[] = {
#define FN(n, opt) { "cupti" #n, offsetof(struct nt_cupti_api_table, n), opt }
		FN(GetVersion, true), FN(GetResultString, true),
		FN(ActivityRegisterCallbacks, false), FN(ActivityEnable, false),
		FN(ActivityDisable, false), FN(ActivityEnableRuntimeApi, true),
		FN(ActivityEnableDriverApi, true), FN(ActivityGetNextRecord, false),
		FN(ActivityGetNumDroppedRecords, true), FN(ActivityFlushAll, false),
		FN(ActivityRegisterTimestampCallback, true), FN(SetThreadIdType, true),
		FN(ActivitySetAttribute, true),
#undef FN
	};

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		void *f = dlsym(g->cupti_handle, fns[i].name);

		if (!f && !fns[i].optional) {
			snprintf(why, why_len, "the CUPTI has no %s", fns[i].name);
			return -1;
		}
		memcpy((char *)&g->api + fns[i].off, &f, sizeof(f));
	}
	return 0;
}

static const char *result_name(struct inj *g, nt_cupti_result r)
{
	const char *s = NULL;

	if (g->api.GetResultString && g->api.GetResultString(r, &s) == NT_CUPTI_SUCCESS && s)
		return s;
	return "CUPTI error";
}

/* Which activity kinds: NTCORE_CUPTI_KINDS="kernel,memcpy,memset,sync". */
static bool kind_wanted(const char *name)
{
	const char *k = getenv(NT_GPU_ENV_KINDS);
	size_t n = strlen(name);

	if (!k)
		k = NT_GPU_DEFAULT_KINDS;
	for (const char *p = k; (p = strstr(p, name)); p += n)
		if ((p == k || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

static int enable_apis(struct inj *g, uint32_t *flags, char *why, size_t why_len)
{
	nt_cupti_result r = NT_CUPTI_SUCCESS;

	if (g->api.ActivityEnableRuntimeApi && g->api.ActivityEnableDriverApi) {
		for (size_t i = 0; r == NT_CUPTI_SUCCESS &&
		     i < sizeof(nt_cupti_runtime_cbids) / sizeof(nt_cupti_runtime_cbids[0]); i++)
			r = g->api.ActivityEnableRuntimeApi(nt_cupti_runtime_cbids[i].cbid, 1);
		for (size_t i = 0; r == NT_CUPTI_SUCCESS &&
		     i < sizeof(nt_cupti_driver_cbids) / sizeof(nt_cupti_driver_cbids[0]); i++)
			r = g->api.ActivityEnableDriverApi(nt_cupti_driver_cbids[i].cbid, 1);
		*flags |= NT_GPU_HELLO_API_FILTER;
	} else {
		/* an older CUPTI: every runtime and driver call (filtered here) */
		if ((r = g->api.ActivityEnable(NT_CUPTI_KIND_RUNTIME)) == NT_CUPTI_SUCCESS)
			r = g->api.ActivityEnable(NT_CUPTI_KIND_DRIVER);
	}
	if (r != NT_CUPTI_SUCCESS)
		snprintf(why, why_len, "enabling API records: %s", result_name(g, r));
	return r == NT_CUPTI_SUCCESS ? 0 : -1;
}

static int start_cupti(struct inj *g, uint32_t *flags, char *why, size_t why_len)
{
	static const struct {
		const char *name;
		uint32_t kind;
	} kinds[] = {
		{ "kernel", NT_CUPTI_KIND_CONCURRENT_KERNEL },
		{ "memcpy", NT_CUPTI_KIND_MEMCPY },
		{ "memset", NT_CUPTI_KIND_MEMSET },
		{ "sync", NT_CUPTI_KIND_SYNCHRONIZATION },
	};
	nt_cupti_result r;
	uint8_t zeroed = 1;
	size_t zeroed_size = sizeof(zeroed);

	/* the clock first: records made before it would carry CUPTI's own */
	if (g->api.ActivityRegisterTimestampCallback &&
	    g->api.ActivityRegisterTimestampCallback(clock_mono_ns) == NT_CUPTI_SUCCESS)
		*flags |= NT_GPU_HELLO_MONOTONIC;
	/* thread ids are in API records only */
	if (g->api_records && g->api.SetThreadIdType &&
	    g->api.SetThreadIdType(NT_CUPTI_THREAD_ID_SYSTEM) == NT_CUPTI_SUCCESS)
		*flags |= NT_GPU_HELLO_SYSTEM_TID;
	/* Our buffers come zeroed (calloc, then zeroed by the sender thread
	 * before reuse): else CUPTI zeroes each buffer it is given, on the
	 * application thread that needed one, in the middle of a launch. */
	if (g->api.ActivitySetAttribute &&
	    g->api.ActivitySetAttribute(NT_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size,
					&zeroed) == NT_CUPTI_SUCCESS) {
		g->zero_buffers = true;
		*flags |= NT_GPU_HELLO_ZEROED;
	}
	r = g->api.ActivityRegisterCallbacks(cb_request, cb_complete);
	if (r != NT_CUPTI_SUCCESS) {
		snprintf(why, why_len, "cuptiActivityRegisterCallbacks: %s", result_name(g, r));
		return -1;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (!kind_wanted(kinds[i].name))
			continue;
		r = g->api.ActivityEnable(kinds[i].kind);
		if (r != NT_CUPTI_SUCCESS) {
			snprintf(why, why_len, "cuptiActivityEnable(%s): %s", kinds[i].name,
				 result_name(g, r));
			return -1;
		}
	}
	if (!g->api_records) {
		/* API records cost the job about 1.5-2 us per runtime call
		 * (docs/cuda-gpu.md, Cost); without them records carry the
		 * process only */
		*flags |= NT_GPU_HELLO_NO_API;
		return 0;
	}
	return enable_apis(g, flags, why, why_len);
}

/* ---- exit and fork -------------------------------------------------------- */

static void at_exit(void)
{
	struct inj *g = the_inj;

	if (!g || getpid() != g->pid)
		return;
	inj_sender_stop(g, 500);
}

static void fork_prepare(void)
{
	if (the_inj)
		pthread_mutex_lock(&the_inj->lock);
}

static void fork_parent(void)
{
	if (the_inj)
		pthread_mutex_unlock(&the_inj->lock);
}

/* A forked child shares the parent's socket: it must never write to it,
 * and it has no sender thread. */
static void fork_child(void)
{
	struct inj *g = the_inj;

	if (!g)
		return;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->wake, NULL);
	g->gone = true;
	g->sender_running = false;
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
}

static void read_env(struct inj *g)
{
	const char *f = getenv(NT_GPU_ENV_FLUSH), *b = getenv(NT_GPU_ENV_BUFFERS);
	const char *api = getenv(NT_GPU_ENV_API);
	unsigned count = 8, kib = 2048;

	g->flush_ms = f && atoi(f) > 0 ? (uint32_t)atoi(f) : 200;
	g->api_records = api && strcmp(api, "1") == 0;
	if (b)
		sscanf(b, "%u:%u", &count, &kib);
	g->buf_max = count >= 2 && count <= 1024 ? count : 8;
	g->buf_size = (size_t)(kib >= 64 && kib <= 65536 ? kib : 2048) << 10;
}

static void describe(struct inj *g, const char *path, uint32_t version,
		     int major, uint32_t flags, char *text, size_t len)
{
	struct link_map *lm = NULL;

	if (!strchr(path, '/') && dlinfo(g->cupti_handle, RTLD_DI_LINKMAP, &lm) == 0 &&
	    lm && lm->l_name)
		path = lm->l_name;
	if (flags & NT_GPU_HELLO_NO_API) {
		snprintf(text, len, "CUPTI %u from %.600s for CUDA %d; clock %s; kinds %s; "
			 "no API records (api_records = false: GPU records carry the process, "
			 "not the launching thread or stack)", version, path, major,
			 flags & NT_GPU_HELLO_MONOTONIC ? "CLOCK_MONOTONIC" : "CUPTI's own",
			 getenv(NT_GPU_ENV_KINDS) ? getenv(NT_GPU_ENV_KINDS) : NT_GPU_DEFAULT_KINDS);
		return;
	}
	snprintf(text, len, "CUPTI %u from %.600s for CUDA %d; clock %s; thread ids %s; "
		 "API records %s", version, path, major,
		 flags & NT_GPU_HELLO_MONOTONIC ? "CLOCK_MONOTONIC" : "CUPTI's own (not joinable)",
		 flags & NT_GPU_HELLO_SYSTEM_TID ? "gettid" : "pthread (joined by time)",
		 flags & NT_GPU_HELLO_API_FILTER ? "of the join's functions only"
						 : "of every call (older CUPTI)");
}

void inj_stop_kinds(struct inj *g)
{
	static const uint32_t kinds[] = { NT_CUPTI_KIND_CONCURRENT_KERNEL, NT_CUPTI_KIND_MEMCPY,
					  NT_CUPTI_KIND_MEMSET, NT_CUPTI_KIND_SYNCHRONIZATION,
					  NT_CUPTI_KIND_RUNTIME, NT_CUPTI_KIND_DRIVER };

	if (g->api.ActivityDisable)
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			g->api.ActivityDisable(kinds[i]);
}

/* CUPTI found and loaded: start it and the sender; 0, or -1 with why. */
static int start(struct inj *g, const char *path, int major, char *why,
		 size_t why_len)
{
	char text[NT_GPU_TEXT_MAX];
	uint32_t flags = 0, version = 0;

	if (resolve(g, why, why_len))
		return -1;
	if (g->api.GetVersion)
		g->api.GetVersion(&version);
	the_inj = g; /* CUPTI may ask for a buffer as soon as it is enabled */
	if (start_cupti(g, &flags, why, why_len) || inj_sender_start(g)) {
		if (!why[0])
			snprintf(why, why_len, "cannot start the sender thread");
		inj_stop_kinds(g);
		the_inj = NULL;
		return -1;
	}
	describe(g, path, version, major, flags, text, sizeof(text));
	say_hello(g, NT_GPU_ST_OK, (uint32_t)major, version, flags, text);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atexit(at_exit);
	return 0;
}

/*
 * Runs in the job, inside its first cuInit. Returns 1 (loaded) whatever
 * happens: the job must run, traced or not.
 */
EXPORT int InitializeInjection(void)
{
	const char *sock = getenv(NT_GPU_ENV_SOCKET);
	char path[1024], why[768] = "";
	struct inj *g;
	int major = 0;

	if (the_inj || !sock || !(g = calloc(1, sizeof(*g))))
		return 1;
	g->pid = getpid();
	g->fd = connect_daemon(sock);
	if (g->fd < 0) {
		free(g); /* no daemon to tell: the job runs untraced */
		return 1;
	}
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->wake, NULL);
	read_env(g);
	if (open_cupti(g, path, sizeof(path), &major, why, sizeof(why))) {
		say_hello(g, NT_GPU_ST_NO_CUPTI, (uint32_t)major, 0, 0, why);
	} else if (start(g, path, major, why, sizeof(why))) {
		say_hello(g, NT_GPU_ST_CUPTI_ERROR, (uint32_t)major, 0, 0, why);
	} else {
		return 1;
	}
	close(g->fd);
	g->fd = -1;
	/* g stays allocated: CUPTI may still call back (and gets no buffer) */
	return 1;
}
