// SPDX-License-Identifier: MIT
/* ntcore cuda_gpu: choosing the job's libcupti (see inject_find.h). */
#include "inject_find.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base_of(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* N of "<stem>...so.N[.x.y]" when the basename starts with stem; else 0 */
static int so_major(const char *path, const char *stem)
{
	const char *b = base_of(path), *so;

	if (strncmp(b, stem, strlen(stem)) != 0)
		return 0;
	so = strstr(b, ".so.");
	return so ? atoi(so + 4) : 0;
}

int nt_cupti_cuda_major(const struct nt_cupti_where *w)
{
	for (size_t i = 0; i < w->n_loaded; i++) {
		int m = so_major(w->loaded[i], "libcudart");

		if (m > 0)
			return m;
	}
	return w->driver_major > 0 ? w->driver_major : 0;
}

/* The directory part of path into dir (no trailing slash). */
static void dir_of(const char *path, char *dir, size_t len)
{
	const char *s = strrchr(path, '/');

	snprintf(dir, len, "%.*s", s ? (int)(s - path) : 1, s ? path : ".");
}

static int take(const char *path, char *out, size_t out_len)
{
	snprintf(out, out_len, "%s", path);
	return 0;
}

static int next_to_runtime(const struct nt_cupti_where *w, int major, char *out,
			   size_t out_len)
{
	static const char *const rel[] = { "", "/../../cuda_cupti/lib",
					   "/../extras/CUPTI/lib64" };
	char dir[512], p[1100];

	for (size_t i = 0; i < w->n_loaded; i++) {
		if (so_major(w->loaded[i], "libcudart") != major ||
		    !strchr(w->loaded[i], '/'))
			continue;
		dir_of(w->loaded[i], dir, sizeof(dir));
		for (size_t r = 0; r < sizeof(rel) / sizeof(rel[0]); r++) {
			snprintf(p, sizeof(p), "%s%s/libcupti.so.%d", dir, rel[r], major);
			if (w->exists(w->arg, p))
				return take(p, out, out_len);
		}
	}
	return -1;
}

static int in_toolkits(const struct nt_cupti_where *w, int major, char *out,
		       size_t out_len)
{
	char pat[4][256], found[16][512];

	snprintf(pat[0], sizeof(pat[0]), "/usr/local/cuda/targets/%s-linux/lib/libcupti.so.%d",
		 w->arch, major);
	snprintf(pat[1], sizeof(pat[1]), "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.%d", major);
	snprintf(pat[2], sizeof(pat[2]), "/usr/local/cuda-%d.*/targets/%s-linux/lib/libcupti.so.%d",
		 major, w->arch, major);
	snprintf(pat[3], sizeof(pat[3]), "/usr/local/cuda-%d.*/extras/CUPTI/lib64/libcupti.so.%d",
		 major, major);
	for (int i = 0; i < 4; i++) {
		size_t n = w->glob(w->arg, pat[i], found, 16);

		/* glob sorts: the newest minor last */
		for (size_t k = n; k-- > 0;)
			if (w->exists(w->arg, found[k]))
				return take(found[k], out, out_len);
	}
	return -1;
}

int nt_cupti_find(const struct nt_cupti_where *w, char *out, size_t out_len,
		  bool *bare, char *why, size_t why_len)
{
	int major = nt_cupti_cuda_major(w);

	*bare = false;
	if (!major) {
		snprintf(why, why_len, "cannot tell the job's CUDA version (no libcudart loaded, "
			 "no cuDriverGetVersion)");
		return -1;
	}
	for (size_t i = 0; i < w->n_loaded; i++)
		if (so_major(w->loaded[i], "libcupti") == major &&
		    strchr(w->loaded[i], '/'))
			return take(w->loaded[i], out, out_len);
	if (w->override && *w->override) {
		int m = so_major(w->override, "libcupti");

		if (m && m != major) {
			snprintf(why, why_len, "%s=%s is CUPTI %d, the job's CUDA is %d",
				 "NTCORE_CUPTI_PATH", w->override, m, major);
			return -1;
		}
		if (!w->exists(w->arg, w->override)) {
			snprintf(why, why_len, "%s=%s: no such file", "NTCORE_CUPTI_PATH",
				 w->override);
			return -1;
		}
		return take(w->override, out, out_len);
	}
	if (next_to_runtime(w, major, out, out_len) == 0 ||
	    in_toolkits(w, major, out, out_len) == 0)
		return 0;
	/* the dynamic linker's search (LD_LIBRARY_PATH, ld.so.cache) */
	snprintf(out, out_len, "libcupti.so.%d", major);
	*bare = true;
	snprintf(why, why_len, "no libcupti.so.%d for CUDA %d: not loaded, not next to the "
		 "job's libcudart, not in /usr/local/cuda*, not on the library path "
		 "(set NTCORE_CUPTI_PATH)", major, major);
	return 0;
}
