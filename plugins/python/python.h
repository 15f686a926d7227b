/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: records shared by python.bpf.c (kernel side) and
 * python.c (user side). These ring-buffer records are internal: the user
 * side resolves them (code objects -> names, lines) and publishes the
 * python.* events described in docs/python.md.
 */
#ifndef NTCORE_PYTHON_H
#define NTCORE_PYTHON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "ntcore/event.h"

/* Most Python frames one sample walks (the rest is marked truncated). */
#define PY_MAX_FRAMES 128
/* Most native frames recorded with a sample (`native = true`). */
#define PY_NATIVE_MAX 64
/* Thread states scanned to find the current thread's one. */
#define PY_MAX_TSTATES 256
/* Frame header bytes read in one go (offsets below must be < this - 8). */
#define PY_FRAME_BUF 128
/* Offset "not present in this version". */
#define PY_NO_OFF 0xffff
/* Depth of the per-thread call stack kept for call tracing. */
#define PY_CALL_DEPTH 64
/* Bytes of a function or file name copied by call tracing. */
#define PY_NAME_MAX 128

/*
 * Offsets of one CPython minor version, as the BPF walker needs them; all
 * in bytes, PY_NO_OFF where the field does not exist. Filled from the
 * table in pyoffsets.c (3.10 .. 3.12) or from the interpreter's own
 * _Py_DebugOffsets (3.13).
 */
struct py_bpf_offsets {
	__u16 runtime_interp_head; /* _PyRuntimeState.interpreters.head */
	__u16 interp_next;         /* PyInterpreterState.next */
	__u16 interp_threads_head; /* PyInterpreterState.threads.head */
	__u16 ts_next;             /* PyThreadState.next */
	__u16 ts_frame;            /* .frame (3.10) .cframe (3.11, 3.12) .current_frame (3.13) */
	__u16 ts_thread_id;        /* .native_thread_id (3.11+), .thread_id (3.10: pthread_t) */
	__u16 cframe_current;      /* _PyCFrame.current_frame (3.11, 3.12) */
	__u16 frame_code;          /* frame -> code object */
	__u16 frame_previous;      /* frame -> calling frame */
	__u16 frame_instr;         /* prev_instr / instr_ptr (pointer), f_lasti (3.10: int) */
	__u16 frame_owner;         /* char owner (3.11+) */
	__u16 ts_exc;              /* curexc_type (<= 3.11) / current_exception (3.12+) */
	__u16 ts_exc_tb;           /* curexc_traceback (<= 3.11) */
	__u16 exc_traceback;       /* PyBaseExceptionObject.traceback (3.12+) */
	__u16 ob_type;             /* PyObject.ob_type */
	__u8 tid_is_pthread;       /* 3.10: compare thread_id with the thread pointer */
	__u8 instr_is_int;         /* 3.10: frame_instr is an int index, not a pointer */
	__u8 owner_cstack;         /* owner value of C-stack shim frames (skip), 0xff none */
	__u8 exc_is_type;          /* ts_exc is the type (<= 3.11), else the exception */
	__u16 frame_read;          /* bytes of a frame header to read (<= PY_FRAME_BUF) */
};

/* Per traced Python process (BPF map py_procs, key: tgid). */
struct py_proc {
	__u64 runtime; /* address of _PyRuntime in the process */
	struct py_bpf_offsets off;
};

/* A thread's cached thread state (BPF map py_tstates, key: tid). */
struct py_tstate_ent {
	__u64 tstate; /* 0: not a Python thread (negative entry) */
	__u64 ts_ns;  /* when looked up (negative entries expire) */
};

enum py_rec_kind {
	PY_REC_CPU = 1,    /* on-CPU sample (perf event tick) */
	PY_REC_IDLE = 2,   /* stack walked as the thread left the CPU */
	PY_REC_WEIGHT = 3, /* off-CPU time of a thread, for its last idle stack */
	PY_REC_EXC = 4,    /* an exception reached Python code (first frame) */
	PY_REC_FUNC = 5,   /* call tracing: a new function key and its names */
	PY_REC_EXEC = 6,   /* a target process exec'd: inspect it */
	PY_REC_UNKNOWN = 7, /* a target sampled but not registered: inspect it */
};

/* PY_REC_IDLE: `aux` is 1 when the thread was preempted (runnable), 0
 * when it blocked. */

/* Sample flags */
#define PY_F_TRUNCATED (1u << 0) /* more frames than max_frames */
#define PY_F_NOTSTATE (1u << 1)  /* thread has no Python thread state */
#define PY_F_READERR (1u << 2)   /* a read of interpreter memory failed */

/* One Python frame: code object address and instruction pointer (3.11+)
 * or instruction index (3.10). */
struct py_frame {
	__u64 code;
	__u64 instr;
};

/*
 * PY_REC_CPU / PY_REC_IDLE / PY_REC_EXC: a walked stack. frames[0] is the
 * innermost frame. For PY_REC_EXC, `aux` is the exception type object (or
 * the exception object on 3.12+, whose type the user side reads);
 * `native_id` a stack map id (native = true) or -1. The record is
 * sizeof(struct py_sample_rec) - sizeof(frames) + n_frames * 16 bytes.
 */
struct py_sample_rec {
	struct nt_event_hdr hdr; /* hdr.type = enum py_rec_kind */
	__u64 aux;
	__s32 native_id;
	__u16 n_frames;
	__u16 flags;
	__u32 cpu;
	__u32 pad_;
	struct py_frame frames[PY_MAX_FRAMES];
};

#define PY_SAMPLE_HDR_SIZE (sizeof(struct py_sample_rec) - \
			    PY_MAX_FRAMES * sizeof(struct py_frame))

/* PY_REC_WEIGHT: `off_ns` of off-CPU time ended for hdr.tid. */
struct py_weight_rec {
	struct nt_event_hdr hdr;
	__u64 off_ns;
	__u64 start_ns; /* when it left the CPU */
};

/*
 * Call tracing. CPython 3.11+ fires python:function__entry only for frames
 * entered from C (gh-98894: Python-to-Python calls are inlined and skip
 * the marker) while function__return fires for every return, so calls are
 * counted at return and timed only when their entry was seen too.
 * Key: the returning frame's code object (0 when the thread state could
 * not be read; then func/file tell functions apart).
 */
struct py_call_key {
	__u32 pid;
	__u32 pad_;
	__u64 code;
	__u64 func; /* funcname char * (USDT argument) */
	__u64 file; /* filename char * */
};

struct py_call_stats {
	__u64 calls;   /* returns seen */
	__u64 timed;   /* of which the entry was seen too */
	__u64 incl_ns; /* of the timed calls */
	__u64 self_ns;
};

/* Per-thread shadow call stack (frames whose entry marker fired). */
struct py_call_frame {
	__u64 func, file;
	__u64 start_ns;
	__u64 child_ns;
};

struct py_call_stack {
	__u32 depth; /* may exceed PY_CALL_DEPTH: deeper frames are not timed */
	__u32 pad_;
	struct py_call_frame f[PY_CALL_DEPTH];
};

/* PY_REC_FUNC: the names of a function key seen for the first time. */
struct py_func_rec {
	struct nt_event_hdr hdr;
	struct py_call_key key;
	__s32 line; /* line of the return marker */
	__u32 pad_;
	char func[PY_NAME_MAX];
	char file[PY_NAME_MAX];
};

/* Off-CPU bookkeeping per thread (BPF map py_offcpu, key: tid). */
struct py_offcpu {
	__u64 out_ns;      /* when it left the CPU, 0 while running */
	__u64 walk_ns;     /* last idle stack walk */
	__u64 acc_ns;      /* off-CPU time not sent yet (sent once >= a period) */
	__u64 acc_start;   /* start of the oldest unsent off-CPU period */
	__u64 vwalk_ns;    /* last walk as it blocked (not preempted) */
	__u32 preempted;   /* the period in progress began by a preemption */
	__u32 pad_;
	__u64 vkey;        /* where the last walk as it blocked was: top
			    * frame, its code object and instruction (0:
			    * unknown); a block elsewhere is walked anyway */
};

/*
 * The last PY_OFFHIST completed off-CPU periods of a Python thread (BPF map
 * py_offhist, key: tid; `idle = true`): [out[i], in[i]) for i < pos, slot
 * i % PY_OFFHIST; bit i of `preempted` (i % 64 of word i / 64): that period began by a
 * preemption (runnable, not waiting). The CUDA join reads it to tell
 * whether a thread was blocked when another thread of its process
 * launched a kernel.
 */
#define PY_OFFHIST 256
struct py_offhist {
	__u32 pos; /* periods recorded so far */
	__u32 pad_;
	__u64 preempted[PY_OFFHIST / 64];
	__u64 out[PY_OFFHIST];
	__u64 in[PY_OFFHIST];
};

/* A thread of a process, from the py_tasks task iterator: its thread
 * pointer (x86-64 FS base, arm64 TPIDR_EL0), from which its
 * pthread_self(), what 3.10 stores as a thread state's id, is
 * tp - tp_to_pthread (python.bpf.c). */
struct py_task_rec {
	__u32 tid;
	__u32 tgid;
	__u64 tp;
};

#endif /* NTCORE_PYTHON_H */
