/* SPDX-License-Identifier: MIT */
/*
 * ntcore SDK: the binary event record and its schema.
 *
 * An event is one contiguous record: a fixed header followed by a payload
 * whose layout a schema describes. BPF programs write records in exactly this
 * layout into their ring buffer (the header is plain C with fixed-width
 * fields, usable from a .bpf.c file), so the hot path is ringbuf -> schema
 * lookup -> fan-out with no copy.
 *
 * Compatibility: this header is part of the ABI (see plugin.h). Fields are
 * never moved or removed within an ABI major; new field types may be appended
 * to enum nt_field_type in a minor release, and a sink that meets a type it
 * does not know renders it as raw hex.
 */
#ifndef NTCORE_EVENT_H
#define NTCORE_EVENT_H

#ifndef __VMLINUX_H__
#include <stdint.h>
#endif

#define NT_COMM_LEN 16

/*
 * The fixed event header, 40 bytes, 8-byte aligned.
 *
 * type   schema id handed out by host->register_schema(); BPF code receives
 *        it through a `const volatile` rodata variable set before load.
 * size   total record size in bytes, header included.
 * ts_ns  CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns()); sinks turn it into
 *        wall-clock time with host->wall_ns(), which the core computes from
 *        one offset taken at start-up.
 * pid    the process id (kernel tgid), never a thread id.
 * tid    the thread id (kernel pid).
 * comm   the thread's command name, NUL-padded (may lack a NUL at 16 chars).
 */
struct nt_event_hdr {
	uint32_t type;
	uint32_t size;
	uint64_t ts_ns;
	uint32_t pid;
	uint32_t tid;
	char comm[NT_COMM_LEN];
};

/*
 * A variable-length string or byte run inside the same record: `off` is the
 * offset from the start of the record (the header), `len` the byte count
 * without any terminator. Used for symbolized stacks, kernel names, paths.
 */
struct nt_vstr {
	uint32_t off;
	uint32_t len;
};

/* How a field's bytes are read and rendered. */
enum nt_field_type {
	NT_F_U8 = 1,
	NT_F_U16,
	NT_F_U32,
	NT_F_U64,
	NT_F_S32,
	NT_F_S64,
	NT_F_F64,
	NT_F_BOOL,   /* one byte, 0 or 1 */
	NT_F_HEX64,  /* u64 rendered as "0x..." (addresses, handles) */
	NT_F_STR,    /* fixed char[size], NUL-padded */
	NT_F_VSTR,   /* struct nt_vstr pointing into the record */
	NT_F_INADDR, /* 16 bytes: IPv6, or IPv4-mapped IPv6 (::ffff:a.b.c.d) */
	NT_F_DEVT,   /* u32 kernel dev_t (major << 20 | minor), rendered "M:m" */
	NT_F_ERRNO,  /* s32 kernel-style -errno or 0, rendered as its name */
};

/*
 * One payload field. `offset` counts from the start of the record (so the
 * first payload field sits at sizeof(struct nt_event_hdr)); `size` is the
 * byte size (checked by the core against the type at registration); `unit`
 * is a base unit ("bytes", "ns", "count", "" when dimensionless).
 */
struct nt_field {
	const char *name;
	uint16_t type;
	uint16_t offset;
	uint16_t size;
	uint16_t reserved;
	const char *unit;
	const char *desc;
};

/*
 * An event type. `name` is dotted: "<plugin>.<what>" ("sched.switch",
 * "cuda.launch"); alerts are "alert.<detector>". `min_size` is the smallest
 * valid record size (header + fixed payload); shorter records are counted as
 * malformed and dropped by the bus. The schema and every string it points to
 * must outlive the plugin instance that registered it (static data is usual).
 */
struct nt_schema {
	const char *name;
	const char *desc;
	const struct nt_field *fields;
	uint32_t n_fields;
	uint32_t min_size;
};

#define NT_FIELD(strct, member, ftype, unit_, desc_)                           \
	{ .name = #member, .type = (ftype),                                    \
	  .offset = (uint16_t)__builtin_offsetof(strct, member),               \
	  .size = (uint16_t)sizeof(((strct *)0)->member), .unit = (unit_),     \
	  .desc = (desc_) }

#define NT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Alerts ("alert.<detector>") begin with one shared layout so the stdout sink
 * can print any alert: severity, the process concerned, a one-line human
 * message and the evidence (JSON text: numbers, stacks, what to try). A
 * detector registers its own schema whose first fields are NT_ALERT_FIELDS
 * and may append more after `evidence`.
 */
enum nt_severity { NT_SEV_INFO = 0, NT_SEV_WARNING = 1, NT_SEV_CRITICAL = 2 };

struct nt_alert {
	struct nt_event_hdr hdr;
	uint32_t severity;     /* enum nt_severity */
	uint32_t subject_pid;  /* process the alert is about */
	struct nt_vstr message;
	struct nt_vstr evidence;
};

#define NT_ALERT_FIELDS(strct)                                                 \
	NT_FIELD(strct, severity, NT_F_U32, "", "0 info, 1 warning, 2 critical"), \
	NT_FIELD(strct, subject_pid, NT_F_U32, "", "process the alert is about"), \
	NT_FIELD(strct, message, NT_F_VSTR, "", "one-line human message"),    \
	NT_FIELD(strct, evidence, NT_F_VSTR, "", "JSON evidence object")

#endif /* NTCORE_EVENT_H */
