/* SPDX-License-Identifier: MIT */
/*
 * pyoffsets-dump: prints, for the CPython whose headers it is compiled
 * against, the struct offsets plugins/python needs, as one initializer of
 * the table in pyoffsets.c. It is how every row of that table was made:
 *
 *   cc -DPy_BUILD_CORE -I$PREFIX/include/python3.X \
 *      -I$PREFIX/include/python3.X/internal \
 *      plugins/python/tools/pyoffsets-dump.c -o /tmp/d && /tmp/d
 *
 * It is a build-time tool only (not part of the plugin).
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#else
#include <frameobject.h>
#endif

#define O(t, f) ((unsigned)offsetof(t, f))

int main(void)
{
	printf("\t/* CPython %s, offsetof() on its own headers (tools/pyoffsets-dump.c) */\n",
	       PY_VERSION);
	printf("\t{ .major = %d, .minor = %d,\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	printf("\t  .source = \"offsetof() on CPython %s headers\",\n", PY_VERSION);
	printf("\t  .runtime_interp_head = %u, .interp_next = %u, .interp_threads_head = %u,\n",
	       O(_PyRuntimeState, interpreters.head), O(PyInterpreterState, next),
#if PY_MINOR_VERSION == 10
	       O(PyInterpreterState, tstate_head));
#else
	       O(PyInterpreterState, threads.head));
#endif
	printf("\t  .ts_next = %u, .ts_interp = %u,\n", O(PyThreadState, next),
	       O(PyThreadState, interp));
#if PY_MINOR_VERSION == 10
	printf("\t  .ts_frame = %u, .ts_thread_id = %u, .tid_is_pthread = 1,\n",
	       O(PyThreadState, frame), O(PyThreadState, thread_id));
	printf("\t  .cframe_current = NO_OFF,\n");
	printf("\t  .frame_code = %u, .frame_previous = %u, .frame_instr = %u,\n"
	       "\t  .frame_owner = NO_OFF, .frame_read = %u,\n",
	       O(PyFrameObject, f_code), O(PyFrameObject, f_back), O(PyFrameObject, f_lasti),
	       O(PyFrameObject, f_lasti) + 4);
	printf("\t  .code_qualname = NO_OFF, .code_adaptive = NO_OFF,\n");
#else
	printf("\t  .ts_thread_id = %u, .tid_is_pthread = 0,\n", O(PyThreadState, native_thread_id));
#if PY_MINOR_VERSION <= 12
	printf("\t  .ts_frame = %u, .cframe_current = %u,\n", O(PyThreadState, cframe),
	       O(_PyCFrame, current_frame));
	printf("\t  .frame_code = %u, .frame_previous = %u, .frame_instr = %u,\n"
	       "\t  .frame_owner = %u, .frame_read = %u,\n",
	       O(_PyInterpreterFrame, f_code), O(_PyInterpreterFrame, previous),
	       O(_PyInterpreterFrame, prev_instr), O(_PyInterpreterFrame, owner),
	       O(_PyInterpreterFrame, localsplus));
#else
	printf("\t  .ts_frame = %u, .cframe_current = NO_OFF,\n", O(PyThreadState, current_frame));
	printf("\t  .frame_code = %u, .frame_previous = %u, .frame_instr = %u,\n"
	       "\t  .frame_owner = %u, .frame_read = %u,\n",
	       O(_PyInterpreterFrame, f_executable), O(_PyInterpreterFrame, previous),
	       O(_PyInterpreterFrame, instr_ptr), O(_PyInterpreterFrame, owner),
	       O(_PyInterpreterFrame, localsplus));
#endif
	printf("\t  .code_qualname = %u, .code_adaptive = %u,\n", O(PyCodeObject, co_qualname),
	       O(PyCodeObject, co_code_adaptive));
#endif
	printf("\t  .code_filename = %u, .code_name = %u, .code_firstlineno = %u,\n"
	       "\t  .code_linetable = %u,\n",
	       O(PyCodeObject, co_filename), O(PyCodeObject, co_name),
	       O(PyCodeObject, co_firstlineno), O(PyCodeObject, co_linetable));
	printf("\t  .bytes_size = %u, .bytes_data = %u,\n", O(PyVarObject, ob_size),
	       O(PyBytesObject, ob_sval));
	printf("\t  .unicode_state = %u, .unicode_length = %u, .unicode_ascii_data = %u,\n"
	       "\t  .unicode_compact_data = %u,\n",
	       O(PyASCIIObject, state), O(PyASCIIObject, length),
	       (unsigned)sizeof(PyASCIIObject), (unsigned)sizeof(PyCompactUnicodeObject));
#if PY_MINOR_VERSION <= 11
	printf("\t  .ts_exc = %u, .ts_exc_tb = %u, .exc_is_type = 1,\n",
	       O(PyThreadState, curexc_type), O(PyThreadState, curexc_traceback));
#else
	printf("\t  .ts_exc = %u, .ts_exc_tb = NO_OFF, .exc_is_type = 0,\n",
	       O(PyThreadState, current_exception));
#endif
	printf("\t  .exc_traceback = %u, .ob_type = %u,\n", O(PyBaseExceptionObject, traceback),
	       O(PyObject, ob_type));
	printf("\t  .type_name = %u },\n", O(PyTypeObject, tp_name));
	return 0;
}
