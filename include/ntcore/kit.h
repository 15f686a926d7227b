/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: the plumbing every plugin needs, once.
 *
 * Headers under <ntcore/kit/> plus libntcore-kit.a, which plugins link
 * (pkg-config ntcore-plugin; in the tree, kit_dep) and the daemon never
 * does. Each header stands alone; this one includes those that need
 * nothing beyond libc. <ntcore/kit/tp.h> (the tp_btf/raw_tp choice) needs
 * libbpf and is included on its own. docs/plugin-kit.md says what each
 * piece is for.
 */
#ifndef NTCORE_KIT_H
#define NTCORE_KIT_H

#include "kit/cfg.h"   /* NT_KEY_INT(...): config keys, one macro each */
#include "kit/clock.h" /* nt_clock_mono_ns(): the events' clock */
#include "kit/hmap.h"  /* struct nt_hmap: the one hash map */
#include "kit/log.h"   /* nt_log_err(st, ...): instance-prefixed log */
#include "kit/proc.h"  /* nt_proc_alive, comm, cmdline, cgroup, maps */
#include "kit/sb.h"    /* struct nt_sb: bounded string builder */
#include "kit/topn.h"  /* struct nt_topn: the N largest rows */
#include "kit/utf8.h"  /* nt_utf8_valid, nt_utf8_repair */

#endif /* NTCORE_KIT_H */
