/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: looking into a Python process from outside.
 * Finding the interpreter (_PyRuntime through the ELF symbol tables of the
 * mapped python binary or libpython), its version, checking the layout
 * against the live interpreter, and reading code objects and strings with
 * process_vm_readv.
 */
#ifndef NTCORE_PYPROC_H
#define NTCORE_PYPROC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyoffsets.h"

/* One line of /proc/PID/maps. */
struct py_mapping {
	uint64_t start, end, off;
	char perms[5];
	char path[PATH_MAX];
};

/* Parse one maps line; 0 on success (path may be empty). Pure. */
int py_maps_parse(const char *line, struct py_mapping *m);

/* True for a file name that may hold the interpreter: "python3.11",
 * "python3", "libpython3.12.so.1.0" (basename only is looked at). Pure. */
bool py_is_python_name(const char *path);

/* The real user id of a process (/proc/PID/status); 0 or -ESRCH. */
int py_proc_uid(pid_t pid, uid_t *uid);

struct py_found {
	char object[PATH_MAX];  /* file holding _PyRuntime (as mapped) */
	char exe[PATH_MAX];     /* /proc/PID/exe target */
	uint64_t runtime;       /* address of _PyRuntime */
	uint64_t py_version;    /* Py_Version (3.11+), 0 if absent */
	int major, minor;       /* -1 when unknown */
	bool has_usdt;          /* object carries python:function__entry */
};

/*
 * Find the interpreter of pid. Returns 0; -ENOENT when no mapped object
 * defines _PyRuntime (not a CPython process, or not loaded yet); -ESRCH
 * when the process is gone; other -errno. err gets a message.
 */
int py_find(pid_t pid, struct py_found *out, char *err, size_t errlen);

/* Read len bytes at addr of pid; 0 or -errno (-EFAULT for a short read). */
int py_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int py_read_u64(pid_t pid, uint64_t addr, uint64_t *v);

/*
 * Read a str object into UTF-8 (compact strings: ASCII, UCS1, UCS2,
 * UCS4). Returns the length, or -errno (-EINVAL: not a compact str).
 */
int py_read_str(pid_t pid, const struct py_layout *l, uint64_t addr,
		char *out, size_t outlen);

/* tp_name of the type object at type. */
int py_read_tp_name(pid_t pid, const struct py_layout *l, uint64_t type,
		    char *out, size_t outlen);

/* Type name of the object at addr ("code", "str", ...). */
int py_read_type_name(pid_t pid, const struct py_layout *l, uint64_t obj,
		      char *out, size_t outlen, uint64_t *type_addr);

/* A code object as the user side keeps it. */
struct py_code {
	char *qualname; /* co_qualname (3.11+) or co_name (3.10) */
	char *file;     /* co_filename */
	int firstlineno;
	uint8_t *linetable;
	uint32_t lt_len;
	uint64_t filename_ptr, name_ptr; /* to notice a reused address */
};

/*
 * Read the code object at addr. `code_type` is the process's code type
 * address once known (0: check the type name, and store it). Returns 0 or
 * -errno (-EINVAL when the object is not a code object).
 */
int py_read_code(pid_t pid, const struct py_layout *l, uint64_t addr,
		 uint64_t *code_type, struct py_code *out);
void py_code_free(struct py_code *c);

/* Check that the code object at addr still has these name pointers. */
bool py_code_same(pid_t pid, const struct py_layout *l, uint64_t addr,
		  const struct py_code *c);

/*
 * Resolve the layout of a found interpreter: the table row for its
 * version, or (3.13) its _Py_DebugOffsets. Returns 0, or -ENOTSUP for a
 * version we do not know / cannot read, with the reason in err.
 */
int py_resolve_layout(pid_t pid, const struct py_found *f,
		      struct py_layout *out, char *err, size_t errlen);

/*
 * Check the layout against the live interpreter: the first interpreter's
 * first thread state must point back at the interpreter, its thread id
 * must be one of the process's threads, and a current frame's code object
 * must be of type "code". Returns 0; -EAGAIN when the runtime is not
 * initialised yet (retry later); -EPROTO when the numbers do not match
 * (err says what was read); -ESRCH when gone. `code_type` receives the
 * code type's address when a frame was checked.
 */
int py_verify(pid_t pid, const struct py_found *f, const struct py_layout *l,
	      uint64_t *code_type, char *err, size_t errlen);

/*
 * The thread states of the first interpreter: up to max (thread id as the
 * layout stores it: native tid, or pthread_self() on 3.10, thread state)
 * pairs, newest first.
 */
int py_tstates(pid_t pid, const struct py_layout *l, uint64_t runtime,
	       uint64_t *ids, uint64_t *tstates, size_t max);

/*
 * The thread states of the first interpreter: up to max (at most 256)
 * (native tid, thread state) pairs. 3.10 has no native thread id: returns
 * -ENOTSUP.
 */
int py_threads(pid_t pid, const struct py_layout *l, uint64_t runtime,
	       uint32_t *tids, uint64_t *tstates, size_t max);

/* Walk a thread's Python frames from user space, innermost first, like
 * the BPF walker (code object, instruction pointer); returns the count. */
int py_walk(pid_t pid, const struct py_layout *l, uint64_t tstate,
	    struct py_frame *out, int max);

#endif
