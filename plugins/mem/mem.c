/* SPDX-License-Identifier: MIT */
/*
 * mem probe, user side: per-process RSS and peak, page faults, OOM kills,
 * and heap tracking through uprobes on the C library's allocator with
 * outstanding allocations grouped by symbolized stack (docs/mem.md).
 */
#include <linux/types.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem.h"
#include "mem.bpf.skel.h"
#include "mem_logic.h"

#define TOKEN_RING 1
#define TOKEN_TICK 2
#define TOKEN_RETRY 3

#define STACK_TEXT_MAX 4096
#define SYM_BUDGET 256 /* new stacks symbolized per poll */
#define FINALIZE_EVERY_NS 200000000ull /* exit reports batched over 200 ms */
#define REPORT_TEXT_MAX 16384

/* ------------------------------------------------------------------ */
/* Config                                                              */
/* ------------------------------------------------------------------ */

struct mem_config {
	struct nt_strlist functions;
	const char *heap;
	const char *heap_scope;
	const char *library;
	int64_t sample_min_bytes;
	int64_t sample_every;
	bool stacks;
	int64_t stack_depth;
	int64_t interval_ms;
	int64_t top_n;
	int64_t min_age_ms;
	bool track_mmap;
	bool attach_skip;
	bool rss;
	bool faults;
	bool oom;
	int64_t max_allocs;
	int64_t max_stacks;
};

static const char *const heap_choices[] = {"targets", "always", "off", NULL};
static const char *const scope_choices[] = {"auto", "process", "global", NULL};

#define MEM_CFG struct mem_config

static const struct nt_cfg_key mem_keys[] = {
	NT_KEY_STRLIST(MEM_CFG, functions,
		       "[\"malloc\", \"calloc\", \"realloc\", \"free\", \"posix_memalign\", "
		       "\"aligned_alloc\", \"memalign\", \"valloc\", \"pvalloc\"]",
		       "allocator functions to probe ([] turns heap tracking off)"),
	NT_KEY_CHOICE(MEM_CFG, heap, "targets", heap_choices,
		      "heap tracking: targets (only with -p/-- CMD), always (host-wide too), off"),
	NT_KEY_CHOICE(MEM_CFG, heap_scope, "auto", scope_choices,
		      "uprobes bound to each target (process) or on every process filtered in BPF (global); auto: global for -- CMD, process for -p"),
	NT_KEY_STR(MEM_CFG, library, "",
		   "allocator library to probe; empty: the C library of each target"),
	NT_KEY_INT(MEM_CFG, sample_min_bytes, 0, 0, 1099511627776,
		   "allocations smaller than this are sampled 1 in sample_every (bytes)"),
	NT_KEY_INT(MEM_CFG, sample_every, 1, 1, 1000000,
		   "sampling rate of small allocations; 1 tracks every allocation"),
	NT_KEY_BOOL(MEM_CFG, stacks, true, "record the user stack of each allocation"),
	NT_KEY_INT(MEM_CFG, stack_depth, 32, 1, MEM_MAX_DEPTH,
		   "frames kept per allocation stack"),
	NT_KEY_INT(MEM_CFG, interval_ms, 5000, 100, 3600000,
		   "reporting interval (ms): mem.rss, mem.heap, mem.leak, mem.report"),
	NT_KEY_INT(MEM_CFG, top_n, 10, 1, 1000,
		   "stacks per process in mem.leak / mem.report, most bytes first"),
	NT_KEY_INT(MEM_CFG, min_age_ms, 0, 0, 86400000,
		   "interval reports skip allocations younger than this (ms); exit reports keep all"),
	NT_KEY_BOOL(MEM_CFG, track_mmap, true,
		    "track anonymous mmap/munmap made by the program (not by malloc itself)"),
	NT_KEY_BOOL(MEM_CFG, attach_skip, true,
		    "probe past leading flag-only instructions when that avoids single-stepping"),
	NT_KEY_BOOL(MEM_CFG, rss, true, "trace RSS through kmem/rss_stat"),
	NT_KEY_BOOL(MEM_CFG, faults, true,
		    "count user page faults (exceptions/page_fault_user)"),
	NT_KEY_BOOL(MEM_CFG, oom, true, "publish mem.oom_kill (oom/mark_victim)"),
	NT_KEY_INT(MEM_CFG, max_allocs, 262144, 1024, 16777216,
		   "outstanding allocations tracked at once (all processes)"),
	NT_KEY_INT(MEM_CFG, max_stacks, 16384, 256, 1048576,
		   "distinct allocation stacks kept"),
};

/* ------------------------------------------------------------------ */
/* Events and metrics                                                  */
/* ------------------------------------------------------------------ */

static const struct nt_field rss_fields[] = {
	NT_FIELD(struct mem_rss_event, rss_bytes, NT_F_U64, "bytes", "resident: file + anon + shmem"),
	NT_FIELD(struct mem_rss_event, anon_bytes, NT_F_U64, "bytes", "resident anonymous memory"),
	NT_FIELD(struct mem_rss_event, file_bytes, NT_F_U64, "bytes", "resident file-backed memory"),
	NT_FIELD(struct mem_rss_event, shmem_bytes, NT_F_U64, "bytes", "resident shared memory"),
	NT_FIELD(struct mem_rss_event, swap_bytes, NT_F_U64, "bytes", "swapped out"),
	NT_FIELD(struct mem_rss_event, peak_rss_bytes, NT_F_U64, "bytes", "highest rss_bytes seen"),
	NT_FIELD(struct mem_rss_event, faults, NT_F_U64, "count", "user page faults since tracing began"),
	NT_FIELD(struct mem_rss_event, final, NT_F_BOOL, "", "the process has exited"),
};

static const struct nt_schema rss_schema = {
	.name = "mem.rss",
	.desc = "resident memory of a process, each interval it changed and at exit",
	.fields = rss_fields,
	.n_fields = NT_ARRAY_LEN(rss_fields),
	.min_size = sizeof(struct mem_rss_event),
};

static const struct nt_field heap_fields[] = {
	NT_FIELD(struct mem_heap_event, live_bytes, NT_F_S64, "bytes", "outstanding heap bytes"),
	NT_FIELD(struct mem_heap_event, live_allocs, NT_F_S64, "count", "outstanding heap allocations"),
	NT_FIELD(struct mem_heap_event, peak_bytes, NT_F_S64, "bytes", "highest live_bytes seen"),
	NT_FIELD(struct mem_heap_event, allocs, NT_F_U64, "count", "allocation calls that succeeded"),
	NT_FIELD(struct mem_heap_event, frees, NT_F_U64, "count", "tracked allocations released"),
	NT_FIELD(struct mem_heap_event, alloc_bytes, NT_F_U64, "bytes", "bytes requested (turnover)"),
	NT_FIELD(struct mem_heap_event, freed_bytes, NT_F_U64, "bytes", "bytes released"),
	NT_FIELD(struct mem_heap_event, mmap_live_bytes, NT_F_S64, "bytes", "outstanding anonymous mmap bytes"),
	NT_FIELD(struct mem_heap_event, mmap_peak_bytes, NT_F_S64, "bytes", "highest mmap_live_bytes seen"),
	NT_FIELD(struct mem_heap_event, mmaps, NT_F_U64, "count", "anonymous mmap calls that succeeded"),
	NT_FIELD(struct mem_heap_event, munmaps, NT_F_U64, "count", "tracked regions unmapped"),
	NT_FIELD(struct mem_heap_event, untracked, NT_F_U64, "count", "allocations not tracked: allocs map full"),
	NT_FIELD(struct mem_heap_event, sampled_out, NT_F_U64, "count", "small allocations skipped by sampling"),
	NT_FIELD(struct mem_heap_event, stack_lost, NT_F_U64, "count", "allocations whose stack was not recorded"),
	NT_FIELD(struct mem_heap_event, final, NT_F_BOOL, "", "the process has exited"),
};

static const struct nt_schema heap_schema = {
	.name = "mem.heap",
	.desc = "allocator counters of a process, each interval they changed and at exit",
	.fields = heap_fields,
	.n_fields = NT_ARRAY_LEN(heap_fields),
	.min_size = sizeof(struct mem_heap_event),
};

static const struct nt_field leak_fields[] = {
	NT_FIELD(struct mem_leak_event, bytes, NT_F_U64, "bytes", "outstanding bytes from this stack"),
	NT_FIELD(struct mem_leak_event, allocs, NT_F_U64, "count", "outstanding allocations from this stack"),
	NT_FIELD(struct mem_leak_event, oldest_age_ns, NT_F_U64, "ns", "age of the oldest of them"),
	NT_FIELD(struct mem_leak_event, rank, NT_F_U32, "", "1 = most bytes"),
	NT_FIELD(struct mem_leak_event, stack_id, NT_F_S32, "", "stack map id, -1 when not recorded"),
	NT_FIELD(struct mem_leak_event, final, NT_F_BOOL, "", "reported at process exit"),
	NT_FIELD(struct mem_leak_event, kind, NT_F_U8, "", "0 heap, 1 anonymous mmap"),
	NT_FIELD(struct mem_leak_event, function, NT_F_VSTR, "", "allocating function (first frame outside the allocator)"),
	NT_FIELD(struct mem_leak_event, stack, NT_F_VSTR, "", "frames, root first, ';'-separated (folded)"),
};

static const struct nt_schema leak_schema = {
	.name = "mem.leak",
	.desc = "outstanding allocations of a process grouped by allocation stack (top_n)",
	.fields = leak_fields,
	.n_fields = NT_ARRAY_LEN(leak_fields),
	.min_size = sizeof(struct mem_leak_event),
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct mem_report_event, final, NT_F_BOOL, "", "reported at process exit"),
	NT_FIELD(struct mem_report_event, text, NT_F_VSTR, "", "human-readable table"),
};

static const struct nt_schema report_schema = {
	.name = "mem.report",
	.desc = "per-process memory table: heap, RSS, top stacks by outstanding bytes",
	.fields = report_fields,
	.n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct mem_report_event),
};

static const struct nt_field oom_fields[] = {
	NT_FIELD(struct mem_oom_event, killer_pid, NT_F_U32, "", "process that ran the OOM killer"),
	NT_FIELD(struct mem_oom_event, uid, NT_F_U32, "", "victim's uid"),
	NT_FIELD(struct mem_oom_event, oom_score_adj, NT_F_S32, "", "victim's oom_score_adj"),
	NT_FIELD(struct mem_oom_event, total_vm_bytes, NT_F_U64, "bytes", "victim's virtual size"),
	NT_FIELD(struct mem_oom_event, anon_rss_bytes, NT_F_U64, "bytes", "victim's resident anonymous memory"),
	NT_FIELD(struct mem_oom_event, file_rss_bytes, NT_F_U64, "bytes", "victim's resident file memory"),
	NT_FIELD(struct mem_oom_event, shmem_rss_bytes, NT_F_U64, "bytes", "victim's resident shared memory"),
	NT_FIELD(struct mem_oom_event, swap_bytes, NT_F_U64, "bytes", "victim's swapped-out memory"),
	NT_FIELD(struct mem_oom_event, pgtables_bytes, NT_F_U64, "bytes", "victim's page tables"),
};

static const struct nt_schema oom_schema = {
	.name = "mem.oom_kill",
	.desc = "the OOM killer chose a victim (pid/comm of the header)",
	.fields = oom_fields,
	.n_fields = NT_ARRAY_LEN(oom_fields),
	.min_size = sizeof(struct mem_oom_event),
};

static const char *const pid_label[] = {"pid"};

enum {
	M_RSS,
	M_RSS_ANON,
	M_RSS_PEAK,
	M_SWAP,
	M_FAULTS,
	M_OOM,
	M_HEAP_LIVE,
	M_HEAP_LIVE_ALLOCS,
	M_HEAP_PEAK,
	M_HEAP_ALLOCS,
	M_HEAP_FREES,
	M_HEAP_ALLOC_BYTES,
	M_HEAP_FREED_BYTES,
	M_MMAP_LIVE,
	M_UNTRACKED,
	M_COUNT,
};

#define GAUGE(n, h) { .name = n, .help = h, .type = NT_METRIC_GAUGE, .n_labels = 1, .label_names = pid_label }
#define COUNTER(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = pid_label }

static const struct nt_metric_desc metric_descs[M_COUNT] = {
	[M_RSS] = GAUGE("ntcore_mem_rss_bytes", "resident memory (file + anon + shmem)"),
	[M_RSS_ANON] = GAUGE("ntcore_mem_rss_anon_bytes", "resident anonymous memory"),
	[M_RSS_PEAK] = GAUGE("ntcore_mem_rss_peak_bytes", "highest resident memory seen"),
	[M_SWAP] = GAUGE("ntcore_mem_swap_bytes", "swapped-out memory"),
	[M_FAULTS] = COUNTER("ntcore_mem_page_faults_total", "user page faults"),
	[M_OOM] = COUNTER("ntcore_mem_oom_kills_total", "processes chosen by the OOM killer"),
	[M_HEAP_LIVE] = GAUGE("ntcore_mem_heap_live_bytes", "outstanding heap bytes"),
	[M_HEAP_LIVE_ALLOCS] = GAUGE("ntcore_mem_heap_live_allocations", "outstanding heap allocations"),
	[M_HEAP_PEAK] = GAUGE("ntcore_mem_heap_peak_bytes", "highest outstanding heap bytes"),
	[M_HEAP_ALLOCS] = COUNTER("ntcore_mem_heap_allocations_total", "allocation calls that succeeded"),
	[M_HEAP_FREES] = COUNTER("ntcore_mem_heap_frees_total", "tracked allocations released"),
	[M_HEAP_ALLOC_BYTES] = COUNTER("ntcore_mem_heap_allocated_bytes_total", "bytes requested"),
	[M_HEAP_FREED_BYTES] = COUNTER("ntcore_mem_heap_freed_bytes_total", "bytes released"),
	[M_MMAP_LIVE] = GAUGE("ntcore_mem_mmap_live_bytes", "outstanding anonymous mmap bytes"),
	[M_UNTRACKED] = COUNTER("ntcore_mem_heap_untracked_total", "allocations not tracked (allocs map full)"),
};

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

/* One process the plugin has seen (target, or any process host-wide). */
struct mem_proc_info {
	uint32_t pid;
	char comm[NT_COMM_LEN];
	bool finalized;
	bool heap_attached;
	uint64_t gone_ns; /* when finalized: series removed one interval later */
	uint64_t comm_ns; /* when comm was read (a -- CMD child execs later) */
	/* last values pushed to counters / published */
	uint64_t c_faults, c_allocs, c_frees, c_alloc_bytes, c_freed_bytes, c_untracked;
	uint64_t pub_rss, pub_peak, pub_faults, pub_swap;
	uint64_t pub_allocs, pub_frees, pub_mmaps, pub_munmaps;
	struct mem_link *links; /* per-pid uprobes */
	size_t n_links;
	char lib[PATH_MAX];
};

struct mem_sym_retry {
	uint32_t tgid;
	int32_t stack_id;
	uint64_t first_ns;
};

/* An attach point resolved once per library file. */
struct mem_fn_point {
	unsigned fn;
	uint64_t off; /* file offset + skip */
	bool ok;
};

struct mem_lib {
	char path[PATH_MAX];
	struct mem_fn_point pts[MEM_FN_COUNT];
	size_t n_pts;
};

/* A BPF link: from libbpf, or a raw fd (uprobe_multi, unknown to libbpf 1.1). */
struct mem_link {
	struct bpf_link *link;
	int fd;
};

static void mem_link_destroy(struct mem_link *l)
{
	if (l->link)
		bpf_link__destroy(l->link);
	else if (l->fd >= 0)
		close(l->fd);
	l->link = NULL;
	l->fd = -1;
}

/*
 * Unregistering a uprobe waits for a kernel grace period (~0.1 s a link on
 * the project's VMs), so links of processes that left are destroyed by a
 * worker thread and the loop never waits for them.
 */
struct mem_reaper {
	pthread_t th;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mem_link *q;
	size_t n, cap;
};

struct mem_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct mem_config *cfg;
	struct mem_bpf *skel;
	struct ring_buffer *rb;
	uint32_t fn_mask;
	bool heap_on;      /* heap probes wanted */
	bool per_pid;      /* uprobes bound to target pids (else pid -1) */
	bool btf;
	int t_rss, t_heap, t_leak, t_report, t_oom;
	struct nt_metric *m[M_COUNT];
	uint64_t drops_reported;
	uint32_t page_shift;

	struct mem_proc_info **procs; /* sorted by pid */
	size_t n_procs, cap_procs;

	struct mem_lib *libs;
	size_t n_libs;

	struct mem_link *glinks; /* pid -1 uprobes */
	size_t n_glinks;
	struct mem_link *tlinks; /* tracepoints */
	size_t n_tlinks;

	uint32_t *exits; /* processes to finalize */
	size_t n_exits, cap_exits;

	struct mem_reaper reaper;
	uint32_t sym_budget; /* stacks symbolized eagerly in this poll */
	struct mem_sym_retry *retry; /* incomplete stacks to symbolize again */
	size_t n_retry;
	uint64_t last_finalize_ns;
	bool multi_ok; /* uprobe_multi links work (Linux 6.6+) */
	struct mem_symcache syms;
	struct mem_groups groups;
	char *buf; /* event assembly */
	size_t buf_len;
	char self_exe[PATH_MAX];
	char self_libc[PATH_MAX];
};

/* ---- process table ---------------------------------------------- */

static struct mem_proc_info *proc_find(struct mem_state *st, uint32_t pid,
				       size_t *pos)
{
	size_t lo = 0, hi = st->n_procs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (st->procs[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return lo < st->n_procs && st->procs[lo]->pid == pid ? st->procs[lo] : NULL;
}

static void proc_read_comm(struct mem_proc_info *p)
{
	char comm[64];

	if (p->finalized)
		return;
	if (nt_proc_comm(p->pid, 0, comm, sizeof(comm)) > 0)
		snprintf(p->comm, sizeof(p->comm), "%.15s", comm);
	p->comm_ns = nt_clock_mono_ns();
}

static struct mem_proc_info *proc_get(struct mem_state *st, uint32_t pid)
{
	size_t pos;
	struct mem_proc_info *p = proc_find(st, pid, &pos);

	if (p)
		return p;
	if (st->n_procs == st->cap_procs) {
		size_t cap = st->cap_procs ? st->cap_procs * 2 : 16;
		struct mem_proc_info **grown = realloc(st->procs, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		st->procs = grown;
		st->cap_procs = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	snprintf(p->comm, sizeof(p->comm), "?");
	proc_read_comm(p);
	memmove(st->procs + pos + 1, st->procs + pos,
		(st->n_procs - pos) * sizeof(*st->procs));
	st->procs[pos] = p;
	st->n_procs++;
	return p;
}

static void links_take(struct nt_linkset *ls, struct mem_link **links,
		       size_t *n);

static void *reaper_main(void *arg)
{
	struct mem_reaper *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->n && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		if (!r->n && r->stop)
			break;
		struct mem_link *batch = r->q;
		size_t n = r->n;

		r->q = NULL;
		r->n = r->cap = 0;
		pthread_mutex_unlock(&r->mu);
		struct nt_linkset ls = {0};
		links_take(&ls, &batch, &n); /* together: one grace period */
		nt_linkset_release(&ls);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Hand links over (the array itself stays the caller's). */
static void reaper_push(struct mem_reaper *r, struct mem_link *links, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&r->mu);
	if (!r->started && !r->stop &&
	    pthread_create(&r->th, NULL, reaper_main, r) == 0)
		r->started = true;
	if (r->started && r->n + n > r->cap) {
		size_t cap = (r->n + n) * 2;
		struct mem_link *q = realloc(r->q, cap * sizeof(*q));

		if (q) {
			r->q = q;
			r->cap = cap;
		}
	}
	if (r->started && r->n + n <= r->cap) {
		memcpy(r->q + r->n, links, n * sizeof(*links));
		r->n += n;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		return;
	}
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < n; i++) /* no thread: do it here */
		mem_link_destroy(&links[i]);
}

/* Wait until every handed-over link is gone. */
static void reaper_stop(struct mem_reaper *r)
{
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->started)
		pthread_join(r->th, NULL);
	r->started = false;
	free(r->q);
	r->q = NULL;
	r->n = r->cap = 0;
}

static void proc_links_destroy(struct mem_state *st, struct mem_proc_info *p)
{
	reaper_push(&st->reaper, p->links, p->n_links);
	free(p->links);
	p->links = NULL;
	p->n_links = 0;
	p->heap_attached = false;
}

static void proc_remove(struct mem_state *st, uint32_t pid)
{
	size_t pos;
	struct mem_proc_info *p = proc_find(st, pid, &pos);

	if (!p)
		return;
	proc_links_destroy(st, p);
	for (int i = 0; i < M_COUNT; i++)
		if (st->m[i]) {
			char pidbuf[16];
			const char *lv[1] = {pidbuf};

			snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
			st->host->metric_remove(st->m[i], lv);
		}
	free(p);
	memmove(st->procs + pos, st->procs + pos + 1,
		(st->n_procs - pos - 1) * sizeof(*st->procs));
	st->n_procs--;
}

/* ---- the C library ------------------------------------------------ */

/* The C library a freshly started program gets from the dynamic linker:
 * the one this daemon was linked against (same ABI), else `ldconfig -p`. */
static int resolve_self_libc(struct mem_state *st, char *out, size_t len)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	struct link_map *lm = NULL;
	char text[65536];
	FILE *f;

	if (h) {
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name &&
		    lm->l_name[0] == '/') {
			char real[PATH_MAX];

			snprintf(out, len, "%s", realpath(lm->l_name, real) ? real : lm->l_name);
			dlclose(h);
			return 0;
		}
		dlclose(h);
	}
	f = popen("ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null", "re");
	if (f) {
		size_t n = fread(text, 1, sizeof(text) - 1, f);

		text[n] = '\0';
		pclose(f);
		if (mem_ldconfig_find_libc(text, out, len) == 0)
			return 0;
	}
	nt_log_err(st, "cannot find the C library (dlinfo and ldconfig -p failed); set library = \"/path/to/libc.so.6\"");
	return -ENOENT;
}

static bool same_mount_ns(uint32_t pid)
{
	char a[64], b[64], path[64];
	ssize_t na, nb;

	snprintf(path, sizeof(path), "/proc/%u/ns/mnt", pid);
	na = readlink("/proc/self/ns/mnt", a, sizeof(a) - 1);
	nb = readlink(path, b, sizeof(b) - 1);
	return na <= 0 || nb <= 0 || (na == nb && memcmp(a, b, (size_t)na) == 0);
}

/* The child of `-- CMD` waits, not yet exec'd, as a copy of this daemon. */
static bool proc_is_unexeced_child(struct mem_state *st, uint32_t pid)
{
	char exe[PATH_MAX];

	if (nt_proc_exe(pid, exe, sizeof(exe)) <= 0)
		return false;
	return strcmp(exe, st->self_exe) == 0;
}

struct libc_found {
	char path[PATH_MAX];
};

/* nt_proc_maps_foreach callback: 1 (stop) at the first C library. */
static int first_libc(void *arg, const struct nt_map *m)
{
	struct libc_found *found = arg;
	int rc = mem_map_libc(m, found->path, sizeof(found->path));

	return rc == -ENOENT ? 0 : rc == 0 ? 1 : rc;
}

/* Library whose allocator functions a process uses. */
static int resolve_libc(struct mem_state *st, uint32_t pid, char *out, size_t len)
{
	struct libc_found found;
	const char *exe = found.path;
	int rc;

	if (st->cfg->library && st->cfg->library[0]) {
		snprintf(out, len, "%s", st->cfg->library);
		return 0;
	}
	/* The -- CMD child's maps are still ours, not its program's. */
	if (!pid || proc_is_unexeced_child(st, pid))
		return resolve_self_libc(st, out, len);
	/* Line by line: a large process's maps run to megabytes, and the
	 * libraries sit near the end. */
	rc = nt_proc_maps_foreach(pid, first_libc, &found);
	if (rc < 0 && rc != -ENAMETOOLONG) {
		nt_kit_log(st->host, st->inst, rc == -ESRCH || rc == -ENOENT ? NT_LOG_DEBUG : NT_LOG_ERROR,
			   "pid %u: cannot read /proc/%u/maps: %s", pid, pid, strerror(-rc));
		return rc;
	}
	if (rc != 1) {
		nt_log_err(st, "pid %u maps no shared C library (a static binary?): no heap tracking for it; set library = ... for another allocator",
			   pid);
		return rc < 0 ? rc : -ENOENT;
	}
	if (same_mount_ns(pid)) {
		char real[PATH_MAX];

		snprintf(out, len, "%s", realpath(exe, real) ? real : exe);
	} else {
		/* The process sees another root: open its library through it. */
		int pre = snprintf(out, len, "/proc/%u/root", pid);

		if (pre < 0 || (size_t)pre + strlen(exe) >= len)
			return -ENAMETOOLONG;
		memcpy(out + pre, exe, strlen(exe) + 1);
	}
	return 0;
}

/* Resolve each configured function of a library once, logging where it
 * is probed and whether the kernel will emulate or single-step there. */
static struct mem_lib *lib_get(struct mem_state *st, const char *path)
{
	struct mem_lib *grown, *lib;
	const struct mem_config *c = st->cfg;

	for (size_t i = 0; i < st->n_libs; i++)
		if (strcmp(st->libs[i].path, path) == 0)
			return &st->libs[i];
	grown = realloc(st->libs, (st->n_libs + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	st->libs = grown;
	lib = &st->libs[st->n_libs++];
	memset(lib, 0, sizeof(*lib));
	snprintf(lib->path, sizeof(lib->path), "%s", path);

	for (unsigned fn = 0; fn < MEM_FN_COUNT; fn++) {
		struct mem_fn_point *pt = &lib->pts[lib->n_pts];
		struct mem_attach_point ap;
		struct mem_elf_func ef;
		bool dup = false;
		char hex[3 * 16 + 1] = "";
		int rc;

		if (fn == MEM_FN_MMAP || fn == MEM_FN_MUNMAP) {
			if (!c->track_mmap)
				continue;
		} else if (!(st->fn_mask & (1u << fn))) {
			continue;
		}
		rc = mem_elf_find_func(path, mem_fn_name(fn), &ef);
		if (rc) {
			nt_kit_log(st->host, st->inst, rc == -ENOENT ? NT_LOG_INFO : NT_LOG_WARN,
				      "%s: %s: %s; not probed", path, mem_fn_name(fn),
				      rc == -ENOENT ? "no such function" :
				      rc == -ENOTSUP ? "an IFUNC (resolved at run time)" :
				      strerror(-rc));
			continue;
		}
		mem_choose_attach(ef.code, ef.code_len, c->attach_skip, &ap);
		for (uint32_t i = 0; i < ef.code_len && i < 8; i++)
			snprintf(hex + 3 * i, 4, "%02x ", ef.code[i]);
		for (size_t i = 0; i < lib->n_pts; i++)
			if (lib->pts[i].off == ef.file_off + ap.skip) {
				nt_log_dbg(st, "%s: %s is an alias of %s; probed once",
					      path, mem_fn_name(fn), mem_fn_name(lib->pts[i].fn));
				dup = true;
			}
		if (dup)
			continue;
		pt->fn = fn;
		pt->off = ef.file_off + ap.skip;
		pt->ok = true;
		lib->n_pts++;
		if (ap.skip)
			nt_log_info(st, "%s: %s starts with '%s' (%s), which the kernel single-steps (~15 us a hit); probing %s+%u at '%s' (emulated)",
				      path, mem_fn_name(fn), ap.first.text, hex,
				      mem_fn_name(fn), ap.skip, ap.at.text);
		else
			nt_kit_log(st->host, st->inst,
				      ap.emulated || fn == MEM_FN_MUNMAP ? NT_LOG_INFO : NT_LOG_WARN,
				      "%s: %s starts with '%s' (%s): %s",
				      path, mem_fn_name(fn), ap.first.text, hex,
				      ap.emulated ? "emulated by the kernel (cheap uprobe)"
						  : "no emulated instruction within reach; the kernel single-steps it (~15 us a hit)");
	}
	return lib;
}

static int links_push(struct mem_link **v, size_t *n, struct bpf_link *l, int fd)
{
	struct mem_link *grown = realloc(*v, (*n + 1) * sizeof(*grown));

	if (!grown) {
		struct mem_link ml = {l, fd};

		mem_link_destroy(&ml);
		return -ENOMEM;
	}
	*v = grown;
	(*v)[*n].link = l;
	(*v)[*n].fd = fd;
	(*n)++;
	return 0;
}

/*
 * BPF_LINK_CREATE for a uprobe_multi link (Linux 6.6), laid out by hand:
 * the installed UAPI header and libbpf 1.1 predate it. The first 16 bytes
 * are link_create's prog_fd, target_fd, attach_type and flags.
 */
#define MEM_BPF_TRACE_UPROBE_MULTI 48
#define MEM_BPF_F_UPROBE_MULTI_RETURN 1

struct mem_uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__aligned_u64 path;
	__aligned_u64 offsets;
	__aligned_u64 ref_ctr_offsets;
	__aligned_u64 cookies;
	__u32 cnt;
	__u32 um_flags;
	__u32 pid;
};

/* One link for all offsets: one grace period to detach, not one each. */
static int attach_multi(struct bpf_program *prog, int pid,
				     const char *path, const uint64_t *offs,
				     const uint64_t *cookies, size_t n, bool ret)
{
	struct mem_uprobe_multi_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (__u32)bpf_program__fd(prog);
	a.attach_type = MEM_BPF_TRACE_UPROBE_MULTI;
	a.path = (__u64)(uintptr_t)path;
	a.offsets = (__u64)(uintptr_t)offs;
	a.cookies = (__u64)(uintptr_t)cookies;
	a.cnt = (__u32)n;
	a.um_flags = ret ? MEM_BPF_F_UPROBE_MULTI_RETURN : 0;
	a.pid = pid > 0 ? (__u32)pid : 0;
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
}

/* Attach the allocator probes of `path` for pid (-1: every process). */
static int heap_attach(struct mem_state *st, int pid, const char *path,
		       struct mem_link **links, size_t *n_links)
{
	struct mem_lib *lib = lib_get(st, path);
	uint64_t eoff[MEM_FN_COUNT], ecook[MEM_FN_COUNT];
	uint64_t roff[MEM_FN_COUNT], rcook[MEM_FN_COUNT];
	size_t ne = 0, nr = 0;
	int attached = 0, err = 0;

	if (!lib)
		return -ENOMEM;
	for (size_t i = 0; i < lib->n_pts; i++) {
		eoff[ne] = lib->pts[i].off;
		ecook[ne++] = lib->pts[i].fn;
		if (mem_fn_needs_return(lib->pts[i].fn)) {
			roff[nr] = lib->pts[i].off;
			rcook[nr++] = lib->pts[i].fn;
		}
	}
	if (!ne)
		return -ENOENT;
	if (st->multi_ok) {
		int e = attach_multi(st->skel->progs.heap_enter, pid, path, eoff, ecook,
				     ne, false);
		int r = -1;

		if (e >= 0 && nr)
			r = attach_multi(st->skel->progs.alloc_return, pid, path, roff,
					 rcook, nr, true);
		if (e >= 0 && (r >= 0 || !nr)) {
			if (links_push(links, n_links, NULL, e) ||
			    (r >= 0 && links_push(links, n_links, NULL, r)))
				return -ENOMEM;
			return 0;
		}
		err = -errno;
		if (e >= 0)
			close(e);
		if (err == -ESRCH || err == -ENOENT || err == -EACCES || err == -EPERM) {
			nt_log_err(st, "cannot attach uprobes to %s (pid %d): %s", path, pid,
				      strerror(-err));
			return err;
		}
		nt_log_info(st, "uprobe_multi links refused (%s): one uprobe link per function",
			      strerror(-err));
		st->multi_ok = false;
	}
	for (size_t i = 0; i < ne; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, eo, .bpf_cookie = ecook[i]);
		struct bpf_link *l;

		l = bpf_program__attach_uprobe_opts(st->skel->progs.heap_enter, pid, path,
						    (size_t)eoff[i], &eo);
		if (!l) {
			err = -errno;
			nt_log_err(st, "cannot attach uprobe %s:%s (pid %d): %s", path,
				      mem_fn_name((unsigned)ecook[i]), pid, strerror(-err));
			continue;
		}
		if (links_push(links, n_links, l, -1))
			return -ENOMEM;
		attached++;
	}
	for (size_t i = 0; i < nr; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, ro, .retprobe = true, .bpf_cookie = rcook[i]);
		struct bpf_link *l;

		l = bpf_program__attach_uprobe_opts(st->skel->progs.alloc_return, pid,
						    path, (size_t)roff[i], &ro);
		if (!l) {
			err = -errno;
			nt_log_err(st, "cannot attach uretprobe %s:%s (pid %d): %s", path,
				      mem_fn_name((unsigned)rcook[i]), pid, strerror(-err));
			continue;
		}
		if (links_push(links, n_links, l, -1))
			return -ENOMEM;
	}
	if (!attached)
		return err ? err : -ENOENT;
	return 0;
}

static int heap_attach_pid(struct mem_state *st, uint32_t pid)
{
	struct mem_proc_info *p = proc_get(st, pid);
	int rc;

	if (!p)
		return -ENOMEM;
	if (p->heap_attached)
		return 0;
	rc = resolve_libc(st, pid, p->lib, sizeof(p->lib));
	if (rc)
		return rc;
	rc = heap_attach(st, (int)pid, p->lib, &p->links, &p->n_links);
	if (rc) {
		proc_links_destroy(st, p);
		return rc;
	}
	p->heap_attached = true;
	nt_log_info(st, "pid %u (%s): heap probes on %s",
		      pid, p->comm, p->lib);
	return 0;
}

/* ---- stacks ------------------------------------------------------- */

static void retry_push(struct mem_state *st, uint32_t tgid, int32_t stack_id)
{
	struct mem_sym_retry *grown;

	for (size_t i = 0; i < st->n_retry; i++)
		if (st->retry[i].tgid == tgid && st->retry[i].stack_id == stack_id)
			return;
	if (st->n_retry >= 4096)
		return;
	grown = realloc(st->retry, (st->n_retry + 1) * sizeof(*grown));
	if (!grown)
		return;
	st->retry = grown;
	st->retry[st->n_retry].tgid = tgid;
	st->retry[st->n_retry].stack_id = stack_id;
	st->retry[st->n_retry++].first_ns = nt_clock_mono_ns();
}

/*
 * Symbolize a stack of a process into the cache. A frame whose module the
 * symbolizer does not know yet (it re-reads a process's maps at most every
 * 100 ms, and a process that just exec'd still shows its old maps there)
 * leaves the entry incomplete and queued for a retry while the process
 * lives.
 */
static void symbolize_stack(struct mem_state *st, uint32_t tgid, int32_t stack_id)
{
	uint64_t ips[MEM_MAX_DEPTH];
	char text[STACK_TEXT_MAX], frame[512], function[512] = "", first[512] = "";
	int depth = (int)st->cfg->stack_depth;
	struct mem_proc_info *p = proc_find(st, tgid, NULL);
	const char *alloc_lib = p && p->lib[0] ? p->lib : st->self_libc;
	const struct mem_stack_text *have;
	bool unknown = false;

	if (stack_id < 0)
		return;
	have = mem_symcache_get(&st->syms, tgid, stack_id);
	if (have && !have->incomplete)
		return;
	memset(ips, 0, sizeof(ips));
	if (bpf_map_lookup_elem(bpf_map__fd(st->skel->maps.stacks), &stack_id, ips))
		return;
	/* Root first, ';'-separated (folded): frames come innermost first,
	 * so they are laid from the end of text backwards; a full buffer
	 * leaves out the root side. */
	size_t end = sizeof(text) - 1, pos = end;
	text[end] = '\0';
	for (int i = 0; i < depth && i < MEM_MAX_DEPTH && ips[i]; i++) {
		struct nt_symbol sym;
		int rc = st->host->symbolize(st->inst, tgid, ips[i], &sym);

		if (rc && !sym.module) {
			/* a library the symbolizer does not know yet, or the
			 * walk gone astray: retry while the process lives */
			unknown = true;
		}
		if (i && mem_frame_implausible(ips[i], ips[i - 1], rc, &sym))
			break;
		mem_format_frame(frame, sizeof(frame), ips[i], rc, &sym);
		if (!first[0])
			snprintf(first, sizeof(first), "%s", rc == 0 && sym.name ? sym.name : frame);
		if (!function[0] && rc == 0 && sym.name &&
		    !mem_frame_is_allocator(sym.name, sym.module, alloc_lib) &&
		    !mem_is_libc_path(sym.module))
			snprintf(function, sizeof(function), "%s", sym.name);
		size_t w = strlen(frame), need = w + (pos < end ? 1 : 0);
		if (need > pos)
			break;
		if (pos < end)
			text[--pos] = ';';
		pos -= w;
		memcpy(text + pos, frame, w);
	}
	memmove(text, text + pos, end - pos + 1);
	unknown = unknown && nt_proc_alive(tgid);
	mem_symcache_put(&st->syms, tgid, stack_id, text,
			 function[0] ? function : first, unknown);
	if (unknown)
		retry_push(st, tgid, stack_id);
}

/* The 100 ms timer: stacks whose symbolization was incomplete. */
static void retry_stacks(struct mem_state *st)
{
	uint64_t now = nt_clock_mono_ns();
	size_t k = 0;

	for (size_t i = 0; i < st->n_retry; i++) {
		struct mem_sym_retry r = st->retry[i];
		const struct mem_stack_text *t;

		if (now - r.first_ns < 3000000000ull && nt_proc_alive(r.tgid)) {
			symbolize_stack(st, r.tgid, r.stack_id);
			t = mem_symcache_get(&st->syms, r.tgid, r.stack_id);
			if (t && t->incomplete) {
				st->retry[k++] = r;
				continue;
			}
		}
	}
	st->n_retry = k;
}

/* ---- publishing --------------------------------------------------- */

static void hdr_fill(struct mem_state *st, struct nt_event_hdr *h, int type,
		     uint32_t size, uint32_t pid)
{
	struct mem_proc_info *p = proc_find(st, pid, NULL);

	memset(h, 0, sizeof(*h));
	h->type = (uint32_t)type;
	h->size = size;
	h->ts_ns = nt_clock_mono_ns();
	h->pid = pid;
	h->tid = pid;
	if (p) {
		if (h->ts_ns - p->comm_ns > (uint64_t)st->cfg->interval_ms * 500000ull)
			proc_read_comm(p);
		memcpy(h->comm, p->comm, sizeof(h->comm));
	}
}

static void *buf_get(struct mem_state *st, size_t len)
{
	if (len > st->buf_len) {
		char *b = realloc(st->buf, len);

		if (!b)
			return NULL;
		st->buf = b;
		st->buf_len = len;
	}
	memset(st->buf, 0, len);
	return st->buf;
}

static void put_vstr(void *rec, size_t *off, struct nt_vstr *v, const char *s)
{
	size_t len = s ? strlen(s) : 0;

	v->off = (uint32_t)*off;
	v->len = (uint32_t)len;
	if (len)
		memcpy((char *)rec + *off, s, len);
	*off += len;
}

static void metric_set(struct mem_state *st, int m, uint32_t pid, double v)
{
	char pidbuf[16];
	const char *lv[1] = {pidbuf};

	if (!st->m[m])
		return;
	snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
	st->host->metric_set(st->m[m], lv, v);
}

static void metric_delta(struct mem_state *st, int m, uint32_t pid,
			 uint64_t now, uint64_t *last)
{
	char pidbuf[16];
	const char *lv[1] = {pidbuf};

	if (now <= *last)
		return;
	if (st->m[m]) {
		snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
		st->host->metric_add(st->m[m], lv, (double)(now - *last));
	}
	*last = now;
}

static void report_rss(struct mem_state *st, uint32_t pid,
		       const struct mem_proc *pr, bool final)
{
	struct mem_proc_info *p = proc_get(st, pid);
	struct mem_rss_event *e;
	unsigned sh = st->page_shift;
	uint64_t rss = pr->pages[MEM_FILEPAGES] + pr->pages[MEM_ANONPAGES] +
		       pr->pages[MEM_SHMEMPAGES];

	if (!p)
		return;
	metric_set(st, M_RSS, pid, (double)(rss << sh));
	metric_set(st, M_RSS_ANON, pid, (double)(pr->pages[MEM_ANONPAGES] << sh));
	metric_set(st, M_RSS_PEAK, pid, (double)(pr->peak_rss_pages << sh));
	metric_set(st, M_SWAP, pid, (double)(pr->pages[MEM_SWAPENTS] << sh));
	metric_delta(st, M_FAULTS, pid, pr->faults, &p->c_faults);
	if (!final && rss == p->pub_rss && pr->peak_rss_pages == p->pub_peak &&
	    pr->faults == p->pub_faults && pr->pages[MEM_SWAPENTS] == p->pub_swap)
		return;
	p->pub_rss = rss;
	p->pub_peak = pr->peak_rss_pages;
	p->pub_faults = pr->faults;
	p->pub_swap = pr->pages[MEM_SWAPENTS];
	e = buf_get(st, sizeof(*e));
	if (!e)
		return;
	hdr_fill(st, &e->hdr, st->t_rss, sizeof(*e), pid);
	e->rss_bytes = rss << sh;
	e->anon_bytes = pr->pages[MEM_ANONPAGES] << sh;
	e->file_bytes = pr->pages[MEM_FILEPAGES] << sh;
	e->shmem_bytes = pr->pages[MEM_SHMEMPAGES] << sh;
	e->swap_bytes = pr->pages[MEM_SWAPENTS] << sh;
	e->peak_rss_bytes = pr->peak_rss_pages << sh;
	e->faults = pr->faults;
	e->final = final;
	st->host->publish(st->inst, &e->hdr);
}

static void report_heap(struct mem_state *st, uint32_t pid,
			const struct mem_heap_stats *hs, bool final)
{
	struct mem_proc_info *p = proc_get(st, pid);
	struct mem_heap_event *e;

	if (!p)
		return;
	metric_set(st, M_HEAP_LIVE, pid, (double)hs->live_bytes);
	metric_set(st, M_HEAP_LIVE_ALLOCS, pid, (double)hs->live_allocs);
	metric_set(st, M_HEAP_PEAK, pid, (double)hs->peak_bytes);
	metric_set(st, M_MMAP_LIVE, pid, (double)hs->mmap_live_bytes);
	metric_delta(st, M_HEAP_ALLOCS, pid, hs->allocs, &p->c_allocs);
	metric_delta(st, M_HEAP_FREES, pid, hs->frees, &p->c_frees);
	metric_delta(st, M_HEAP_ALLOC_BYTES, pid, hs->alloc_bytes, &p->c_alloc_bytes);
	metric_delta(st, M_HEAP_FREED_BYTES, pid, hs->freed_bytes, &p->c_freed_bytes);
	metric_delta(st, M_UNTRACKED, pid, hs->untracked, &p->c_untracked);
	if (!final && hs->allocs == p->pub_allocs && hs->frees == p->pub_frees &&
	    hs->mmaps == p->pub_mmaps && hs->munmaps == p->pub_munmaps)
		return;
	p->pub_allocs = hs->allocs;
	p->pub_frees = hs->frees;
	p->pub_mmaps = hs->mmaps;
	p->pub_munmaps = hs->munmaps;
	e = buf_get(st, sizeof(*e));
	if (!e)
		return;
	hdr_fill(st, &e->hdr, st->t_heap, sizeof(*e), pid);
	e->live_bytes = hs->live_bytes;
	e->live_allocs = hs->live_allocs;
	e->peak_bytes = hs->peak_bytes;
	e->allocs = hs->allocs;
	e->frees = hs->frees;
	e->alloc_bytes = hs->alloc_bytes;
	e->freed_bytes = hs->freed_bytes;
	e->mmap_live_bytes = hs->mmap_live_bytes;
	e->mmap_peak_bytes = hs->mmap_peak_bytes;
	e->mmaps = hs->mmaps;
	e->munmaps = hs->munmaps;
	e->untracked = hs->untracked;
	e->sampled_out = hs->sampled_out;
	e->stack_lost = hs->stack_lost;
	e->final = final;
	st->host->publish(st->inst, &e->hdr);
}

/* mem.leak for each of the top stacks, then mem.report. `gs` are the
 * process's groups, most bytes first. */
static void report_stacks(struct mem_state *st, uint32_t pid, bool final,
			  const struct mem_group *gs, size_t total,
			  const struct mem_heap_stats *hs, bool have_hs,
			  const struct mem_proc *pr, bool have_pr)
{
	size_t top = (size_t)st->cfg->top_n;
	size_t n = total < top ? total : top;
	struct mem_report_line *lines = calloc(top, sizeof(*lines));
	struct mem_proc_info *p = proc_get(st, pid);
	uint64_t now = nt_clock_mono_ns();
	char *text = NULL;

	if (!lines || !p)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct mem_stack_text *t;
		struct mem_leak_event *e;
		size_t off = sizeof(*e), fl, sl;

		symbolize_stack(st, pid, gs[i].stack_id);
		t = gs[i].stack_id >= 0 ? mem_symcache_get(&st->syms, pid, gs[i].stack_id) : NULL;
		lines[i].g = &gs[i];
		lines[i].text = t ? t->text : NULL;
		lines[i].function = t ? t->function : NULL;
		fl = t ? strlen(t->function) : 0;
		sl = t ? strlen(t->text) : 0;
		e = buf_get(st, off + fl + sl);
		if (!e)
			continue;
		hdr_fill(st, &e->hdr, st->t_leak, (uint32_t)(off + fl + sl), pid);
		e->bytes = gs[i].bytes;
		e->allocs = gs[i].count;
		e->oldest_age_ns = now > gs[i].oldest_ns ? now - gs[i].oldest_ns : 0;
		e->rank = (uint32_t)(i + 1);
		e->stack_id = gs[i].stack_id;
		e->final = final;
		e->kind = (uint8_t)gs[i].kind;
		put_vstr(e, &off, &e->function, t ? t->function : NULL);
		put_vstr(e, &off, &e->stack, t ? t->text : NULL);
		st->host->publish(st->inst, &e->hdr);
	}
	if (!n && !final)
		goto out;

	struct mem_report_proc rp = {
		.pid = pid,
		.comm = p->comm,
		.final = final,
		.heap = have_hs,
		.rss = have_pr,
	};
	if (have_hs) {
		rp.live_bytes = hs->live_bytes;
		rp.live_allocs = hs->live_allocs;
		rp.peak_bytes = hs->peak_bytes;
		rp.mmap_live_bytes = hs->mmap_live_bytes;
		rp.allocs = hs->allocs;
		rp.frees = hs->frees;
	}
	if (have_pr) {
		rp.rss_bytes = (pr->pages[MEM_FILEPAGES] + pr->pages[MEM_ANONPAGES] +
				pr->pages[MEM_SHMEMPAGES]) << st->page_shift;
		rp.peak_rss_bytes = pr->peak_rss_pages << st->page_shift;
	}
	text = malloc(REPORT_TEXT_MAX);
	if (!text)
		goto out;
	size_t tl = mem_format_report(text, REPORT_TEXT_MAX, &rp, lines, n, total);
	if (tl >= REPORT_TEXT_MAX)
		tl = REPORT_TEXT_MAX - 1;
	struct mem_report_event *r = buf_get(st, sizeof(*r) + tl);
	if (r) {
		size_t off = sizeof(*r);

		hdr_fill(st, &r->hdr, st->t_report, (uint32_t)(sizeof(*r) + tl), pid);
		r->final = final;
		text[tl] = '\0';
		put_vstr(r, &off, &r->text, text);
		st->host->publish(st->inst, &r->hdr);
	}
out:
	free(text);
	free(lines);
}

/* ---- reading the maps ------------------------------------------- */

struct pid_gen {
	uint32_t tgid, gen;
};

struct scan_ctx {
	const uint32_t *only; /* NULL: every process; else this sorted set */
	size_t n_only;
	uint64_t min_ts;      /* skip allocations newer than this */
	struct pid_gen *gens; /* current image of each process, sorted */
	size_t n_gens;
	/* keys to delete: of finalized processes, or of an image before exec */
	struct mem_alloc_key *doomed;
	size_t n_doomed, cap_doomed;
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void doom(struct scan_ctx *sc, const struct mem_alloc_key *k)
{
	if (sc->n_doomed == sc->cap_doomed) {
		size_t cap = sc->cap_doomed ? sc->cap_doomed * 2 : 256;
		struct mem_alloc_key *g = realloc(sc->doomed, cap * sizeof(*g));

		if (!g)
			return;
		sc->doomed = g;
		sc->cap_doomed = cap;
	}
	sc->doomed[sc->n_doomed++] = *k;
}

static void scan_one(struct mem_state *st, struct scan_ctx *sc,
		     const struct mem_alloc_key *k, const struct mem_alloc_val *v)
{
	const struct pid_gen *g = bsearch(&k->tgid, sc->gens, sc->n_gens,
					  sizeof(*sc->gens), cmp_u32);

	if (sc->only) {
		if (!bsearch(&k->tgid, sc->only, sc->n_only, sizeof(uint32_t), cmp_u32))
			return;
		doom(sc, k);
	} else if (!g || g->gen != v->gen) {
		if (g)
			doom(sc, k); /* left behind by an exec */
		return;
	} else if (v->ts_ns > sc->min_ts) {
		return;
	}
	if (g && g->gen == v->gen)
		mem_groups_add(&st->groups, k->tgid, v->stack_id, v->kind,
			       v->size * v->weight, v->weight, v->ts_ns);
}

static void read_gens(struct mem_state *st, struct scan_ctx *sc)
{
	int fd = bpf_map__fd(st->skel->maps.heap);
	uint32_t key, next;
	size_t cap = 0;

	for (int rc = bpf_map_get_next_key(fd, NULL, &key); rc == 0;
	     rc = bpf_map_get_next_key(fd, &key, &next), key = next) {
		struct mem_heap_stats hs;

		if (bpf_map_lookup_elem(fd, &key, &hs))
			continue;
		if (sc->n_gens == cap) {
			struct pid_gen *g;

			cap = cap ? cap * 2 : 64;
			g = realloc(sc->gens, cap * sizeof(*g));
			if (!g)
				break;
			sc->gens = g;
		}
		sc->gens[sc->n_gens].tgid = key;
		sc->gens[sc->n_gens++].gen = hs.gen;
	}
	if (sc->n_gens)
		qsort(sc->gens, sc->n_gens, sizeof(*sc->gens), cmp_u32);
}

/* Group the outstanding allocations (of sc->only, or of everyone). */
static void scan_allocs(struct mem_state *st, struct scan_ctx *sc)
{
	int fd = bpf_map__fd(st->skel->maps.allocs);
	enum { CHUNK = 4096 };
	struct mem_alloc_key *keys = malloc(CHUNK * sizeof(*keys));
	struct mem_alloc_val *vals = malloc(CHUNK * sizeof(*vals));
	struct mem_alloc_key cur, next;
	__u64 in = 0, out = 0;
	bool first = true, batch_ok = true;

	mem_groups_reset(&st->groups);
	read_gens(st, sc);
	if (!keys || !vals)
		goto done;
	/* Batched lookup (one syscall per CHUNK records) ... */
	for (;;) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		__u32 count = CHUNK;
		int rc;

		/* Tools like valgrind do not know what the batch writes. */
		memset(keys, 0, CHUNK * sizeof(*keys));
		memset(vals, 0, CHUNK * sizeof(*vals));
		rc = bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals,
					  &count, &opts);
		int err = rc ? -errno : 0;

		for (__u32 i = 0; i < count; i++)
			scan_one(st, sc, &keys[i], &vals[i]);
		if (err == -ENOENT)
			goto done;
		if (err) {
			if (first && (err == -EINVAL || err == -ENOTSUP || err == -EOPNOTSUPP))
				batch_ok = false;
			break;
		}
		first = false;
		in = out;
	}
	if (batch_ok)
		goto done;
	/* ... else one key at a time. */
	for (int rc = bpf_map_get_next_key(fd, NULL, &cur); rc == 0;
	     rc = bpf_map_get_next_key(fd, &cur, &next), cur = next) {
		struct mem_alloc_val v;

		if (bpf_map_lookup_elem(fd, &cur, &v) == 0)
			scan_one(st, sc, &cur, &v);
	}
done:
	free(keys);
	free(vals);
	free(sc->gens);
	sc->gens = NULL;
	sc->n_gens = 0;
	/* Interval scans drop the blocks of images replaced by exec. */
	if (!sc->only) {
		for (size_t i = 0; i < sc->n_doomed; i++)
			bpf_map_delete_elem(fd, &sc->doomed[i]);
		free(sc->doomed);
		sc->doomed = NULL;
		sc->n_doomed = sc->cap_doomed = 0;
	}
}

static void finalize_pending(struct mem_state *st);

/* Every interval: RSS, heap counters, top stacks, drops. */
static void tick_body(struct mem_state *st);

static void tick(struct mem_state *st)
{
	uint64_t t0 = nt_clock_mono_ns();

	tick_body(st);
	nt_log_dbg(st, "interval work took %.1f ms",
		      (double)(nt_clock_mono_ns() - t0) / 1e6);
}

static void tick_body(struct mem_state *st)
{
	int pfd = bpf_map__fd(st->skel->maps.procs);
	int hfd = bpf_map__fd(st->skel->maps.heap);
	uint64_t now = nt_clock_mono_ns();
	uint32_t key, next;
	int rc;

	finalize_pending(st);
	if (st->cfg->rss || st->cfg->faults) {
		uint32_t stale[64];
		size_t n_stale = 0;

		for (rc = bpf_map_get_next_key(pfd, NULL, &key); rc == 0;
		     rc = bpf_map_get_next_key(pfd, &key, &next), key = next) {
			struct mem_proc_info *p = proc_find(st, key, NULL);
			struct mem_proc pr;

			/* Updated after its final report (the exit's unmapping
			 * host-wide), or gone without an exit record. */
			if ((p && p->finalized) ||
			    (!p && !nt_proc_alive(key))) {
				if (n_stale < NT_ARRAY_LEN(stale))
					stale[n_stale++] = key;
				continue;
			}
			if (bpf_map_lookup_elem(pfd, &key, &pr) == 0)
				report_rss(st, key, &pr, false);
		}
		for (size_t i = 0; i < n_stale; i++)
			bpf_map_delete_elem(pfd, &stale[i]);
	}
	if (st->heap_on) {
		struct scan_ctx sc = {
			.min_ts = now - (uint64_t)st->cfg->min_age_ms * 1000000ull,
		};

		size_t n_sorted = 0;
		struct mem_group *sorted;

		scan_allocs(st, &sc);
		sorted = mem_groups_sorted(&st->groups, &n_sorted);
		for (rc = bpf_map_get_next_key(hfd, NULL, &key); rc == 0;
		     rc = bpf_map_get_next_key(hfd, &key, &next), key = next) {
			struct mem_heap_stats hs;
			struct mem_proc pr;
			const struct mem_group *gs;
			size_t n_gs;
			bool have_pr;

			if (bpf_map_lookup_elem(hfd, &key, &hs))
				continue;
			/* A process that left without an exit record (lost
			 * ring-buffer space): finalize it now. */
			if (!nt_proc_alive(key)) {
				struct mem_proc_info *p = proc_get(st, key);

				if (p && !p->finalized) {
					uint32_t *grown = st->exits;

					if (st->n_exits == st->cap_exits) {
						size_t cap = st->cap_exits ? st->cap_exits * 2 : 16;

						grown = realloc(st->exits, cap * sizeof(*grown));
						if (grown) {
							st->exits = grown;
							st->cap_exits = cap;
						}
					}
					if (st->n_exits < st->cap_exits)
						st->exits[st->n_exits++] = key;
				}
				continue;
			}
			report_heap(st, key, &hs, false);
			have_pr = bpf_map_lookup_elem(pfd, &key, &pr) == 0;
			gs = mem_groups_find(sorted, n_sorted, key, &n_gs);
			if (n_gs)
				report_stacks(st, key, false, gs, n_gs, &hs, true, &pr, have_pr);
		}
		free(sorted);
		finalize_pending(st);
	}
	/* Forget processes finalized at least one interval ago. */
	for (size_t i = 0; i < st->n_procs;) {
		struct mem_proc_info *p = st->procs[i];

		if (p->finalized && now - p->gone_ns >= (uint64_t)st->cfg->interval_ms * 1000000ull) {
			proc_remove(st, p->pid);
			continue;
		}
		i++;
	}
	nt_bpf_report_drops(st->host, st->inst, bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
}

/* ---- process exit ------------------------------------------------- */

static void queue_exit(struct mem_state *st, uint32_t pid, const char *comm)
{
	struct mem_proc_info *p = proc_find(st, pid, NULL);

	if (p && p->finalized)
		return;
	if (!p && comm && comm[0])
		p = proc_get(st, pid);
	/* The name it died with (its group leader's): /proc may be gone,
	 * and a short-lived -- CMD child may not have been seen since exec. */
	if (p && comm && comm[0]) {
		memcpy(p->comm, comm, sizeof(p->comm) - 1);
		p->comm[sizeof(p->comm) - 1] = '\0';
	}
	for (size_t i = 0; i < st->n_exits; i++)
		if (st->exits[i] == pid)
			return;
	if (st->n_exits == st->cap_exits) {
		size_t cap = st->cap_exits ? st->cap_exits * 2 : 16;
		uint32_t *grown = realloc(st->exits, cap * sizeof(*grown));

		if (!grown)
			return;
		st->exits = grown;
		st->cap_exits = cap;
	}
	st->exits[st->n_exits++] = pid;
}

/* A pid given with -p, or the -- CMD child itself (not its descendants). */
static bool named_target(const struct mem_state *st, uint32_t pid)
{
	uint32_t pids[64];
	size_t n = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));

	for (size_t i = 0; i < n && i < NT_ARRAY_LEN(pids); i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* Final reports of the processes that left, then forget their data. */
static void finalize_pending(struct mem_state *st)
{
	int pfd = bpf_map__fd(st->skel->maps.procs);
	int hfd = bpf_map__fd(st->skel->maps.heap);
	int afd = bpf_map__fd(st->skel->maps.allocs);
	struct scan_ctx sc = {0};
	uint32_t *pids;
	size_t n, n_sorted = 0;
	bool any_heap = false;
	struct mem_group *sorted;
	uint64_t t0;

	if (!st->n_exits)
		return;
	t0 = nt_clock_mono_ns();
	pids = st->exits;
	n = st->n_exits;
	st->exits = NULL;
	st->n_exits = st->cap_exits = 0;
	qsort(pids, n, sizeof(*pids), cmp_u32);

	for (size_t i = 0; i < n; i++) {
		struct mem_heap_stats hs;

		if (bpf_map_lookup_elem(hfd, &pids[i], &hs) == 0 && hs.allocs + hs.mmaps)
			any_heap = true;
	}
	if (any_heap) {
		sc.only = pids;
		sc.n_only = n;
		scan_allocs(st, &sc);
	} else {
		mem_groups_reset(&st->groups);
	}
	sorted = mem_groups_sorted(&st->groups, &n_sorted);
	for (size_t i = 0; i < n; i++) {
		uint32_t pid = pids[i];
		struct mem_heap_stats hs;
		struct mem_proc pr;
		bool have_hs = bpf_map_lookup_elem(hfd, &pid, &hs) == 0;
		bool have_pr = bpf_map_lookup_elem(pfd, &pid, &pr) == 0;
		struct mem_proc_info *p = proc_get(st, pid);
		char live[32];

		if (!p || p->finalized)
			continue;
		if (have_pr)
			report_rss(st, pid, &pr, true);
		if (have_hs) {
			report_heap(st, pid, &hs, true);
			mem_fmt_bytes(live, sizeof(live),
				      hs.live_bytes > 0 ? (uint64_t)hs.live_bytes : 0);
		}
		/* Host-wide, a process without heap data gets only its final
		 * mem.rss; a target always gets its table. */
		if (have_hs || (have_pr && st->host->target_map_fd(st->inst) >= 0)) {
			size_t n_gs;
			const struct mem_group *gs = mem_groups_find(sorted, n_sorted, pid, &n_gs);

			report_stacks(st, pid, true, gs, n_gs, &hs, have_hs, &pr, have_pr);
		}
		/* A line for a process the user named; a helper the job ran
		 * (a shell shim) gets its report, not a line of its own. */
		if (p->heap_attached || (st->host->target_map_fd(st->inst) >= 0 && (have_hs || have_pr)))
			nt_kit_log(st->host, st->inst, named_target(st, pid) ? NT_LOG_INFO : NT_LOG_DEBUG,
				      "target pid %u (%s) exited%s%s%s; final report published, the other targets go on",
				      pid, p->comm, have_hs ? ": " : "",
				      have_hs ? live : "", have_hs ? " of heap outstanding" : "");
		proc_links_destroy(st, p);
		p->finalized = true;
		p->gone_ns = nt_clock_mono_ns();
		bpf_map_delete_elem(hfd, &pid);
		bpf_map_delete_elem(pfd, &pid);
		mem_symcache_forget(&st->syms, pid);
	}
	for (size_t i = 0; i < sc.n_doomed; i++)
		bpf_map_delete_elem(afd, &sc.doomed[i]);
	nt_log_dbg(st, "final reports of %zu processes (%zu blocks dropped) took %.1f ms",
		      n, sc.n_doomed, (double)(nt_clock_mono_ns() - t0) / 1e6);
	free(sc.doomed);
	free(sorted);
	free(pids);
}

/* ---- ring buffer -------------------------------------------------- */

static int on_record(void *ctx, void *data, size_t size)
{
	struct mem_state *st = ctx;
	const struct nt_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	if (h->type != 0 && h->size > size) {
		/* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if (h->type != 0) {
		st->host->publish(st->inst, h);
		if (h->type == (uint32_t)st->t_oom) {
			char pidbuf[16];
			const char *lv[1] = {pidbuf};

			snprintf(pidbuf, sizeof(pidbuf), "%u", h->pid);
			if (st->m[M_OOM])
				st->host->metric_add(st->m[M_OOM], lv, 1);
			nt_log_warn(st, "OOM killer chose pid %u (%.16s)", h->pid, h->comm);
		}
		return 0;
	}
	if (size < sizeof(struct mem_internal))
		return 0;
	const struct mem_internal *r = data;

	switch (r->kind) {
	case MEM_REC_STACK:
		/* Symbolize while the process lives, within a budget per
		 * poll; the rest wait for the report that needs them. */
		if (st->sym_budget) {
			st->sym_budget--;
			symbolize_stack(st, r->tgid, r->stack_id);
		}
		break;
	case MEM_REC_EXEC:
		/* New image: stacks of the old one name other code. */
		mem_symcache_forget(&st->syms, r->tgid);
		break;
	case MEM_REC_EXIT:
		queue_exit(st, r->tgid, r->hdr.comm);
		break;
	case MEM_REC_FORK:
		if (st->per_pid) {
			struct mem_proc_info *parent = proc_find(st, r->tgid, NULL);

			if (parent && parent->heap_attached) {
				int rc = heap_attach_pid(st, r->child);

				if (rc) /* a child that is already gone is no news */
					nt_kit_log(st->host, st->inst,
						      rc == -ESRCH || rc == -ENOENT ? NT_LOG_DEBUG : NT_LOG_WARN,
						      "pid %u (child of %u): no heap probes: %s",
						      r->child, r->tgid, strerror(-rc));
			}
		}
		break;
	default:
		break;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Ops                                                                 */
/* ------------------------------------------------------------------ */

static void links_take(struct nt_linkset *ls, struct mem_link **links,
		       size_t *n)
{
	for (size_t i = 0; i < *n; i++) {
		if ((*links)[i].link)
			nt_linkset_add(ls, (*links)[i].link);
		else
			nt_linkset_add_fd(ls, (*links)[i].fd);
	}
	free(*links);
	*links = NULL;
	*n = 0;
}

/* Stop producing (ABI 1.6): every uprobe and tracepoint link goes, all at
 * once; the ring and maps stay for the core's last read. */
static void mem_quiesce(void *state)
{
	struct mem_state *st = state;
	struct nt_linkset ls = {0};

	for (size_t i = 0; i < st->n_procs; i++) {
		links_take(&ls, &st->procs[i]->links, &st->procs[i]->n_links);
		st->procs[i]->heap_attached = false;
	}
	links_take(&ls, &st->glinks, &st->n_glinks);
	links_take(&ls, &st->tlinks, &st->n_tlinks);
	nt_linkset_release(&ls);
}

static void mem_fini(void *state);

static int mem_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	const struct mem_config *c = config;
	struct mem_state *st;
	bool have_alloc = false;

	for (uint32_t i = 0; i < c->functions.n; i++) {
		const char *name = c->functions.v[i];
		int fn = mem_fn_from_name(name);

		if (fn < 0)
			return host->config_error(inst, "functions",
						  "unknown allocator function '%s' (known: malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc)",
						  name);
		if (fn != MEM_FN_FREE)
			have_alloc = true;
	}
	if (have_alloc && strcmp(c->heap, "off") != 0) {
		bool have_free = false;

		for (uint32_t i = 0; i < c->functions.n; i++)
			have_free |= strcmp(c->functions.v[i], "free") == 0;
		if (!have_free)
			return host->config_error(inst, "functions",
						  "lists allocating functions but not 'free': every block would look leaked");
	}
	if (c->library && c->library[0] && access(c->library, R_OK) != 0)
		return host->config_error(inst, "library", "cannot read '%s': %s",
					  c->library, strerror(errno));
	if (c->sample_every > 1 && c->sample_min_bytes == 0)
		host->log(inst, NT_LOG_WARN,
			  "sample_every = %" PRId64 " has no effect while sample_min_bytes = 0",
			  c->sample_every);

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = c;
	for (uint32_t i = 0; i < c->functions.n; i++)
		st->fn_mask |= 1u << mem_fn_from_name(c->functions.v[i]);
	st->heap_on = strcmp(c->heap, "off") != 0 && have_alloc;
	st->page_shift = (uint32_t)__builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
	mem_symcache_init(&st->syms);
	mem_groups_init(&st->groups);
	pthread_mutex_init(&st->reaper.mu, NULL);
	pthread_cond_init(&st->reaper.cv, NULL);
	if (nt_proc_exe((uint32_t)getpid(), st->self_exe, sizeof(st->self_exe)) < 0)
		st->self_exe[0] = '\0';

	if ((st->t_rss = host->register_schema(inst, &rss_schema)) < 0 ||
	    (st->t_heap = host->register_schema(inst, &heap_schema)) < 0 ||
	    (st->t_leak = host->register_schema(inst, &leak_schema)) < 0 ||
	    (st->t_report = host->register_schema(inst, &report_schema)) < 0 ||
	    (st->t_oom = host->register_schema(inst, &oom_schema)) < 0) {
		int err = st->t_rss < 0 ? st->t_rss : st->t_heap < 0 ? st->t_heap :
			  st->t_leak < 0 ? st->t_leak : st->t_report < 0 ? st->t_report : st->t_oom;
		mem_fini(st);
		return err;
	}
	for (int i = 0; i < M_COUNT; i++)
		st->m[i] = host->metric_register(inst, &metric_descs[i]);
	host->subscribe(inst, "proc.exit");
	*state = st;
	return 0;
}

static bool tp_exists(struct mem_state *st, const char *group, const char *name)
{
	char path[256];

	if (st->btf)
		return libbpf_find_vmlinux_btf_id(name, BPF_TRACE_RAW_TP) > 0;
	snprintf(path, sizeof(path), "/sys/kernel/tracing/events/%s/%s", group, name);
	if (access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof(path), "/sys/kernel/debug/tracing/events/%s/%s", group, name);
	return access(path, F_OK) == 0;
}

static void want_tp(struct mem_state *st, bool on, struct bpf_program *btf,
		    struct bpf_program *raw, const char *group, const char *name)
{
	bool exists = on && tp_exists(st, group, name);

	if (on && !exists)
		nt_log_warn(st, "this kernel has no %s/%s tracepoint; that part is off", group, name);
	bpf_program__set_autoload(btf, exists && st->btf);
	bpf_program__set_autoload(raw, exists && !st->btf);
}

static int attach_tp(struct mem_state *st, struct bpf_program *prog)
{
	struct bpf_link *l;

	if (!bpf_program__autoload(prog))
		return 0;
	l = bpf_program__attach(prog);
	if (!l) {
		int err = -errno;

		nt_log_err(st, "cannot attach %s: %s",
			      bpf_program__name(prog), strerror(-err));
		return err;
	}
	return links_push(&st->tlinks, &st->n_tlinks, l, -1);
}

static int mem_attach(void *state)
{
	struct mem_state *st = state;
	const struct mem_config *c = st->cfg;
	struct mem_bpf *s;
	int map_fd = st->host->target_map_fd(st->inst);
	uint32_t pids[256];
	size_t n_pids = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));
	bool heap = st->heap_on;
	int err;

	if (heap && map_fd < 0 && strcmp(c->heap, "always") != 0) {
		nt_log_info(st, "host-wide run: heap tracking is off (it would put a uprobe on every process's malloc); use -p PID or -- CMD, or heap = \"always\"");
		heap = false;
	}
	st->heap_on = heap;
	if (n_pids > NT_ARRAY_LEN(pids))
		n_pids = NT_ARRAY_LEN(pids);
	resolve_self_libc(st, st->self_libc, sizeof(st->self_libc));
	/* Uprobes bound to the target pids, or on every process with the
	 * target map as filter. A bound probe reaches a child only once the
	 * fork is seen in user space, after its first allocations; so the
	 * -- CMD child (a copy of this daemon until it execs: a launcher
	 * whose children matter) gets global probes unless told otherwise. */
	st->per_pid = false;
	if (heap && map_fd >= 0 && n_pids > 0) {
		bool spawned = false;

		for (size_t i = 0; i < n_pids; i++)
			spawned |= proc_is_unexeced_child(st, pids[i]);
		st->per_pid = strcmp(c->heap_scope, "process") == 0 ||
			      (strcmp(c->heap_scope, "auto") == 0 && !spawned);
	}

	st->skel = s = mem_bpf__open();
	if (!s) {
		err = -errno;
		nt_log_err(st, "cannot open the BPF object: %s",
			      strerror(-err));
		return err;
	}
	st->btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
	s->rodata->oom_type = (uint32_t)st->t_oom;
	s->rodata->page_shift = st->page_shift;
	s->rodata->sample_min_bytes = (uint64_t)c->sample_min_bytes;
	s->rodata->sample_every = (uint32_t)c->sample_every;
	s->rodata->want_stacks = c->stacks;
	s->rodata->want_fork = st->per_pid;
	s->rodata->heap_filter = !st->per_pid;
	s->rodata->self_tgid = (uint32_t)getpid();
	if ((err = nt_bpf_use_targets(st->host, st->inst, s->maps.nt_targets,
				      &s->rodata->nt_filter_on)))
		return err;
	bpf_map__set_max_entries(s->maps.allocs, heap ? (uint32_t)c->max_allocs : 1);
	bpf_map__set_max_entries(s->maps.stacks,
				 heap && c->stacks ? (uint32_t)c->max_stacks : 1);
	bpf_map__set_value_size(s->maps.stacks, (uint32_t)c->stack_depth * sizeof(__u64));
	/* Programs loaded for uprobe_multi links; kernels before 6.6 ignore
	 * the attach type of a kprobe program and take per-function links. */
	st->multi_ok = heap;
	if (heap) {
		bpf_program__set_expected_attach_type(s->progs.heap_enter,
						      MEM_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(s->progs.alloc_return,
						      MEM_BPF_TRACE_UPROBE_MULTI);
	}
	if (!heap)
		bpf_map__set_max_entries(s->maps.seen_stacks, 1);
	want_tp(st, c->rss, s->progs.rss_stat_btf, s->progs.rss_stat_raw, "kmem", "rss_stat");
	want_tp(st, c->faults, s->progs.page_fault_btf, s->progs.page_fault_raw,
		"exceptions", "page_fault_user");
	want_tp(st, c->oom, s->progs.mark_victim_btf, s->progs.mark_victim_raw, "oom", "mark_victim");
	want_tp(st, true, s->progs.exit_btf, s->progs.exit_raw, "sched", "sched_process_exit");
	want_tp(st, st->per_pid, s->progs.fork_btf, s->progs.fork_raw, "sched", "sched_process_fork");
	want_tp(st, heap, s->progs.exec_btf, s->progs.exec_raw, "sched", "sched_process_exec");

	err = mem_bpf__load(s);
	if (err) {
		nt_log_err(st, "cannot load the BPF object: %s (run as root, or with CAP_BPF and CAP_PERFMON)",
			      strerror(-err));
		return err;
	}
	struct bpf_program *tps[] = {
		s->progs.rss_stat_btf, s->progs.rss_stat_raw, s->progs.page_fault_btf,
		s->progs.page_fault_raw, s->progs.mark_victim_btf, s->progs.mark_victim_raw,
		s->progs.exit_btf, s->progs.exit_raw, s->progs.fork_btf, s->progs.fork_raw,
		s->progs.exec_btf, s->progs.exec_raw,
	};
	for (size_t i = 0; i < NT_ARRAY_LEN(tps); i++)
		if ((err = attach_tp(st, tps[i])))
			return err;

	/* Seed RSS of running targets: the tracepoint fires only on change. */
	if (c->rss)
		for (size_t i = 0; i < n_pids; i++) {
			char path[64], text[256];
			uint64_t size, res, shared;
			struct mem_proc pr = {0};

			if (proc_is_unexeced_child(st, pids[i]))
				continue; /* its RSS is a copy of ours */
			snprintf(path, sizeof(path), "/proc/%u/statm", pids[i]);
			if (nt_file_read(path, text, sizeof(text)) <= 0 ||
			    mem_parse_statm(text, &size, &res, &shared))
				continue;
			pr.pages[MEM_FILEPAGES] = shared;
			pr.pages[MEM_ANONPAGES] = res > shared ? res - shared : 0;
			pr.peak_rss_pages = res;
			bpf_map_update_elem(bpf_map__fd(s->maps.procs), &pids[i], &pr, BPF_NOEXIST);
		}

	if (heap) {
		if (st->per_pid) {
			size_t ok = 0;

			for (size_t i = 0; i < n_pids; i++) {
				int rc = heap_attach_pid(st, pids[i]);

				if (rc)
					nt_log_err(st, "pid %u: no heap tracking: %s", pids[i],
						      strerror(-rc));
				else
					ok++;
			}
			if (!ok)
				nt_log_warn(st, "no target got heap probes; RSS and faults go on");
		} else {
			/* Each distinct library of the targets once (this
			 * daemon's for the -- CMD child or host-wide). */
			char libs[8][PATH_MAX];
			size_t n_libs = 0, ok = 0;

			for (size_t i = 0; i < (n_pids ? n_pids : 1) && n_libs < 8; i++) {
				char lib[PATH_MAX];
				bool dup = false;

				if (resolve_libc(st, n_pids ? pids[i] : 0, lib, sizeof(lib)))
					continue;
				for (size_t j = 0; j < n_libs; j++)
					dup |= strcmp(libs[j], lib) == 0;
				if (!dup)
					memcpy(libs[n_libs++], lib, sizeof(lib));
			}
			for (size_t j = 0; j < n_libs; j++) {
				err = heap_attach(st, -1, libs[j], &st->glinks, &st->n_glinks);
				if (err) {
					nt_log_err(st, "no heap probes on %s: %s", libs[j],
						      strerror(-err));
					continue;
				}
				ok++;
				nt_log_info(st, "heap probes on %s for every process%s", libs[j],
					      map_fd >= 0 ? " (filtered to the targets in BPF)" : "");
			}
			if (!ok)
				nt_log_err(st, "no heap tracking; RSS and faults go on");
		}
	}

	if ((err = nt_bpf_ring_open(st->host, st->inst, s->maps.events, on_record,
				    st, TOKEN_RING, &st->rb)) ||
	    (err = st->host->add_timer(st->inst, (uint64_t)c->interval_ms, TOKEN_TICK)))
		return err;
	if (heap && c->stacks &&
	    (err = st->host->add_timer(st->inst, 100, TOKEN_RETRY)))
		return err;
	return 0;
}

static int mem_poll(void *state, uint32_t token, uint32_t budget)
{
	struct mem_state *st = state;
	int n = 0;

	(void)budget; /* libbpf 1.1 has no ring_buffer__consume_n */
	if (!st->rb)
		return 0;
	st->sym_budget = SYM_BUDGET;
	if (token == TOKEN_RING) {
		uint64_t now;

		n = ring_buffer__consume(st->rb);
		if (n < 0)
			return n;
		/* Exits are batched: each batch scans the allocs map once. */
		now = nt_clock_mono_ns();
		if (st->n_exits >= 256 || now - st->last_finalize_ns >= FINALIZE_EVERY_NS) {
			finalize_pending(st);
			st->last_finalize_ns = now;
		}
	} else if (token == TOKEN_RETRY) {
		if (st->n_retry)
			retry_stacks(st);
	} else if (token == TOKEN_TICK) {
		ring_buffer__consume(st->rb);
		tick(st);
	}
	return n;
}

static void mem_consume(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct mem_state *st = state;

	if (schema && schema->name && strcmp(schema->name, "proc.exit") == 0)
		queue_exit(st, ev->pid, NULL); /* its comm is the last thread's */
}

static void mem_flush(void *state)
{
	struct mem_state *st = state;

	if (!st->skel || !st->rb)
		return;
	st->sym_budget = SYM_BUDGET;
	ring_buffer__consume(st->rb);
	if (st->n_retry)
		retry_stacks(st);
	finalize_pending(st);
	tick(st);
}

static void mem_detach(void *state)
{
	struct mem_state *st = state;
	uint64_t t0 = nt_clock_mono_ns();

	if (st->skel && st->rb) {
		ring_buffer__consume(st->rb);
		finalize_pending(st);
	}
	for (size_t i = 0; i < st->n_procs; i++)
		proc_links_destroy(st, st->procs[i]);
	reaper_push(&st->reaper, st->glinks, st->n_glinks);
	free(st->glinks);
	st->glinks = NULL;
	st->n_glinks = 0;
	reaper_push(&st->reaper, st->tlinks, st->n_tlinks);
	reaper_stop(&st->reaper); /* every link gone before the object */
	free(st->tlinks);
	st->tlinks = NULL;
	st->n_tlinks = 0;
	ring_buffer__free(st->rb);
	st->rb = NULL;
	mem_bpf__destroy(st->skel);
	st->skel = NULL;
	nt_log_dbg(st, "detach took %.1f ms",
		      (double)(nt_clock_mono_ns() - t0) / 1e6);
}

static void mem_fini(void *state)
{
	struct mem_state *st = state;

	if (!st)
		return;
	if (st->skel || st->rb)
		mem_detach(st);
	for (size_t i = 0; i < st->n_procs; i++)
		free(st->procs[i]);
	free(st->procs);
	free(st->libs);
	free(st->exits);
	free(st->retry);
	free(st->buf);
	mem_symcache_free(&st->syms);
	mem_groups_free(&st->groups);
	pthread_mutex_destroy(&st->reaper.mu);
	pthread_cond_destroy(&st->reaper.cv);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "mem",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(mem_keys),
	.description = "RSS and peak, page faults, OOM kills, heap tracking with leak stacks (uprobes on the C allocator)",
	.version = "0.1.0",
	.config = mem_keys,
	.config_size = sizeof(struct mem_config),
	.init = mem_init,
	.attach = mem_attach,
	.poll = mem_poll,
	.detach = mem_detach,
	.quiesce = mem_quiesce,
	.fini = mem_fini,
	.consume = mem_consume,
	.flush = mem_flush,
};
