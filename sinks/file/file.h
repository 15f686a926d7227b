/* SPDX-License-Identifier: MIT */
/*
 * The file sink's state, shared by file.c (descriptor, ops, rendering)
 * and fileout.c (the output file: opening with its mode, rotation, whole-
 * line writes, and exact counts of what a write cut short lost).
 * Everything here is the sink instance's, used from the sink's thread.
 */
#ifndef NTCORE_SINK_FILE_H
#define NTCORE_SINK_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jsonr.h"
#include "ntcore/kit/sb.h"
#include "ntcore/plugin.h"

struct file_cfg {
	const char *path;
	const char *format;
	int64_t max_size_mb;
	int64_t max_files;
	bool metrics;
	int64_t interval_ms;
	int64_t buffer_kb;
	const char *mode;
	bool identity;
};

/* A run of lines of one kind in the buffer, so that a write cut short
 * (a full disk) tells exactly how many events got into the file. */
struct seg {
	size_t end;      /* offset in the buffer just past the run */
	uint64_t lines;
	bool events;     /* event lines, else metric lines */
};

struct file_sink {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct file_cfg *cfg;
	bool folded;
	mode_t mode;
	int fd;
	uint64_t size;      /* bytes in the current file */
	struct nt_sb sb;    /* whole lines only */
	struct jr_cache jr; /* compiled renderers (jsonr.h) */
	struct seg *segs;
	size_t n_segs, cap_segs;
	uint64_t written_events; /* lines of events written, for the user */
	uint64_t rotations;
	bool write_failed;  /* logged once */
	bool rotatable;     /* a regular file: never rename /dev/null or a fifo */
	struct nt_metric *m_bytes, *m_rotations;
};

/* Opens cfg->path (created with fs->mode); 0 or -errno. */
int file_open_output(struct file_sink *fs);
/* PATH -> PATH.1 -> ... PATH.max_files, then a new PATH. */
void file_rotate(struct file_sink *fs);
/* Lines [end of the previous run, sb.len) of one kind were appended. */
void file_note_lines(struct file_sink *fs, bool events, uint64_t lines);
/* Writes the buffer (rotating first when due) and empties it; what a
 * failed write lost is counted as dropped. */
void file_flush_buffer(struct file_sink *fs);

#endif
