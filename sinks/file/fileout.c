/* SPDX-License-Identifier: MIT */
/*
 * The file sink's output file: opened with the configured mode, rotated by
 * size, written in whole lines; a write cut short (a full disk) leaves only
 * whole lines in the file and counts exactly the events it lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

/* The configured mode on a file this sink creates (umask aside: the
 * user asked for it); a file that exists keeps its mode. */
int file_open_output(struct file_sink *fs)
{
	struct stat st;
	int flags = O_WRONLY | O_APPEND | O_CLOEXEC;

	fs->fd = open(fs->cfg->path, flags | O_CREAT | O_EXCL, fs->mode);
	if (fs->fd >= 0)
		fchmod(fs->fd, fs->mode);
	else if (errno == EEXIST)
		fs->fd = open(fs->cfg->path, flags);
	if (fs->fd < 0 && errno == ENOENT) /* a dangling symlink: create it */
		fs->fd = open(fs->cfg->path, flags | O_CREAT, fs->mode);
	if (fs->fd < 0)
		return -errno;
	fs->rotatable = fstat(fs->fd, &st) == 0 && S_ISREG(st.st_mode);
	fs->size = fs->rotatable ? (uint64_t)st.st_size : 0;
	return 0;
}

void file_rotate(struct file_sink *fs)
{
	char from[4096], to[4096];

	close(fs->fd);
	fs->fd = -1;
	for (int64_t i = fs->cfg->max_files; i >= 1; i--) {
		if (i == 1)
			snprintf(from, sizeof(from), "%s", fs->cfg->path);
		else
			snprintf(from, sizeof(from), "%s.%lld", fs->cfg->path, (long long)(i - 1));
		snprintf(to, sizeof(to), "%s.%lld", fs->cfg->path, (long long)i);
		rename(from, to); /* a missing older file is fine */
	}
	const char *label[1] = {fs->host->instance_name(fs->inst)};
	fs->host->metric_add(fs->m_rotations, label, 1);
	fs->rotations++;
	int err = file_open_output(fs);
	if (err)
		fs->host->log(fs->inst, NT_LOG_ERROR, "cannot reopen %s after rotation: %s",
			      fs->cfg->path, strerror(-err));
}

/* Writes p[0..n); returns 0 or -errno, *done the bytes written before. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
	*done = 0;
	while (*done < n) {
		ssize_t w = write(fd, p + *done, n - *done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		*done += (size_t)w;
	}
	return 0;
}

/* Record that lines [previous end, sb.len) of one kind were appended. */
void file_note_lines(struct file_sink *fs, bool events, uint64_t lines)
{
	struct seg *last = fs->n_segs ? &fs->segs[fs->n_segs - 1] : NULL;

	if (last && last->events == events) {
		last->end = fs->sb.len;
		last->lines += lines;
		return;
	}
	if (fs->n_segs == fs->cap_segs) {
		size_t cap = fs->cap_segs ? fs->cap_segs * 2 : 16;
		struct seg *grown = realloc(fs->segs, cap * sizeof(*grown));
		if (!grown) { /* counted as events: never under-count a drop */
			if (last) {
				last->end = fs->sb.len;
				last->lines += lines;
			}
			return;
		}
		fs->segs = grown;
		fs->cap_segs = cap;
	}
	fs->segs[fs->n_segs++] = (struct seg){fs->sb.len, lines, events};
}

/* Event lines among the first `keep` bytes of the buffer (whole lines),
 * and in all of it. */
static void count_events(const struct file_sink *fs, size_t keep,
			 uint64_t *kept, uint64_t *all)
{
	size_t start = 0;

	*kept = *all = 0;
	for (size_t i = 0; i < fs->n_segs; start = fs->segs[i++].end) {
		const struct seg *s = &fs->segs[i];
		if (!s->events)
			continue;
		*all += s->lines;
		if (s->end <= keep) {
			*kept += s->lines;
		} else if (start < keep) {
			for (const char *p = fs->sb.buf + start, *e = fs->sb.buf + keep;
			     (p = memchr(p, '\n', (size_t)(e - p))); p++)
				(*kept)++;
		}
	}
}

/* A write cut short: the file keeps its whole lines only (the partial one
 * is cut off, so later writes never follow half a line), the events not
 * written are counted as dropped, metric lines are not events. */
static void write_failed(struct file_sink *fs, size_t done, int err)
{
	size_t keep = done;
	uint64_t kept, all;

	while (keep && fs->sb.buf[keep - 1] != '\n')
		keep--;
	if (done > keep && fs->rotatable &&
	    ftruncate(fs->fd, (off_t)(fs->size + keep)) != 0)
		fs->host->log(fs->inst, NT_LOG_ERROR,
			      "%s: cannot cut off a partial line: %s", fs->cfg->path,
			      strerror(errno));
	count_events(fs, keep, &kept, &all);
	fs->size += keep;
	fs->written_events += kept;
	if (all > kept)
		fs->host->count_drop(fs->inst, "file", all - kept);
	if (!fs->write_failed)
		fs->host->log(fs->inst, NT_LOG_ERROR,
			      "writing %s failed: %s; events not written are counted as dropped",
			      fs->cfg->path, strerror(-err));
	fs->write_failed = true;
}

void file_flush_buffer(struct file_sink *fs)
{
	uint64_t max = (uint64_t)fs->cfg->max_size_mb << 20;
	size_t done = 0;
	int err = -EBADF;

	if (!fs->sb.len)
		return;
	if (max && fs->rotatable && fs->size && fs->size + fs->sb.len > max)
		file_rotate(fs);
	if (fs->fd >= 0)
		err = write_all(fs->fd, fs->sb.buf, fs->sb.len, &done);
	if (err) {
		write_failed(fs, done, err);
	} else {
		const char *label[1] = {fs->host->instance_name(fs->inst)};
		uint64_t kept, all;
		count_events(fs, fs->sb.len, &kept, &all);
		fs->size += fs->sb.len;
		fs->host->metric_add(fs->m_bytes, label, (double)fs->sb.len);
		fs->write_failed = false;
		fs->written_events += kept;
	}
	nt_sb_rewind(&fs->sb, 0);
	fs->n_segs = 0;
}
