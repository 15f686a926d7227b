/* SPDX-License-Identifier: MIT */
/* Config files read by the daemon, @include expanded, with a line map
 * (see confread.h for why libconfig does not read them itself). */
#include "confread.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

struct expander {
	struct nt_conf_src *src;
	char *out;
	size_t len, cap;
	bool out_bol; /* the next byte written starts an expanded line */
	bool main_is_text; /* relative includes of the main text: from the cwd */
	char *why;
	size_t why_len;
};

/* ---- the expanded text and its line map ------------------------------ */

static int map_line(struct expander *x, uint32_t file, uint32_t line)
{
	struct nt_conf_src *s = x->src;

	if (s->n_lines == s->cap_lines) {
		size_t cap = s->cap_lines ? s->cap_lines * 2 : 256;
		struct nt_conf_line *grown = realloc(s->lines, cap * sizeof(*grown));
		if (!grown)
			return -1;
		s->lines = grown;
		s->cap_lines = cap;
	}
	s->lines[s->n_lines++] = (struct nt_conf_line){file, line};
	return 0;
}

/* Appends text[0..n) of `file`, whose first byte is on line *line. */
static int emit(struct expander *x, uint32_t file, uint32_t *line,
		const char *text, size_t n)
{
	if (x->len + n + 2 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;
		while (cap < x->len + n + 2)
			cap *= 2;
		char *grown = realloc(x->out, cap);
		if (!grown)
			goto oom;
		x->out = grown;
		x->cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		if (x->out_bol && map_line(x, file, *line))
			goto oom;
		x->out[x->len++] = text[i];
		x->out_bol = text[i] == '\n';
		*line += text[i] == '\n';
	}
	x->out[x->len] = '\0';
	return 0;
oom:
	snprintf(x->why, x->why_len, "%s: out of memory", x->src->files[0]);
	return -1;
}

static int add_file(struct nt_conf_src *s, const char *path)
{
	char **grown = realloc(s->files, (s->n_files + 1) * sizeof(*grown));

	if (!grown)
		return -1;
	s->files = grown;
	if (!(s->files[s->n_files] = strdup(path)))
		return -1;
	return (int)s->n_files++;
}

/* ---- reading one file ----------------------------------------------- */

/* Reads a whole regular file of at most `max` bytes. O_NONBLOCK: a FIFO
 * must not hang the open; fstat then refuses it. */
static char *read_whole(const char *path, size_t max, size_t *len, char *why,
			size_t why_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	char *buf = NULL;
	size_t used = 0;

	if (fd < 0) {
		snprintf(why, why_len, "%s: cannot read the config file: %s", path,
			 strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, why_len, "%s: cannot read the config file: %s", path,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "%s: cannot read the config file: %s", path,
			 S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
		goto out;
	}
	if ((size_t)st.st_size > max) {
		snprintf(why, why_len, "%s: the config is larger than %u MiB", path,
			 NT_CONF_MAX_BYTES >> 20);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf) {
		ssize_t n = read(fd, buf + used, (size_t)st.st_size - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, why_len, "%s: cannot read the config file: %s",
				 path, strerror(errno));
			free(buf);
			buf = NULL;
			break;
		}
		used += (size_t)n;
		if (n == 0 || used == (size_t)st.st_size)
			break; /* a file that shrank meanwhile ends early */
	}
	if (buf) {
		buf[used] = '\0';
		*len = used;
	} else if (!why[0]) {
		snprintf(why, why_len, "%s: out of memory", path);
	}
out:
	close(fd);
	return buf;
}

/* ---- the scanner's view of @include --------------------------------- */

/*
 * At the start of a line, libconfig's scanner takes `[ \t]*@include[ \t]+"`
 * as an include, then the path up to the next '"' with \\ and \" as the
 * only escapes. Returns 1 and the path (and the index after the closing
 * quote in *end), 0 when the line holds no include, -1 for an include this
 * reader refuses (a path with a newline, another escape, no closing quote).
 */
static int match_include(const char *t, size_t len, size_t i, size_t *end,
			 char *name, size_t name_len, const char **bad)
{
	static const char kw[] = "@include";
	size_t n = 0;

	while (i < len && (t[i] == ' ' || t[i] == '\t'))
		i++;
	if (len - i < sizeof(kw) || memcmp(t + i, kw, sizeof(kw) - 1) != 0)
		return 0;
	i += sizeof(kw) - 1;
	if (t[i] != ' ' && t[i] != '\t')
		return 0;
	while (i < len && (t[i] == ' ' || t[i] == '\t'))
		i++;
	if (i >= len || t[i++] != '"')
		return 0;
	for (; i < len && t[i] != '"'; i++) {
		char c = t[i];
		if (c == '\\' && i + 1 < len && (t[i + 1] == '\\' || t[i + 1] == '"'))
			c = t[++i];
		else if (c == '\\' || c == '\n' || c == '\0')
			return *bad = c == '\\' ? "an escape other than \\\\ or \\\""
				    : "a path that is not on one line", -1;
		if (n + 1 >= name_len)
			return *bad = "a path that is too long", -1;
		name[n++] = c;
	}
	if (i >= len)
		return *bad = "no closing quote", -1;
	name[n] = '\0';
	*end = i + 1;
	return n ? 1 : (*bad = "an empty path", -1);
}

/* Skips a comment or string starting at t[i]; returns the index after it
 * (or i when none starts there), counting newlines into *line. */
static size_t skip_lexeme(const char *t, size_t len, size_t i, uint32_t *line)
{
	if (t[i] == '#' || (t[i] == '/' && i + 1 < len && t[i + 1] == '/')) {
		while (i < len && t[i] != '\n')
			i++;
		return i;
	}
	if (t[i] == '/' && i + 1 < len && t[i + 1] == '*') {
		for (i += 2; i < len && !(t[i] == '*' && i + 1 < len && t[i + 1] == '/'); i++)
			*line += t[i] == '\n';
		return i < len ? i + 2 : len;
	}
	if (t[i] == '"') {
		for (i++; i < len && t[i] != '"'; i++) {
			if (t[i] == '\\' && i + 1 < len && (t[i + 1] == '"' || t[i + 1] == '\\'))
				i++;
			*line += t[i] == '\n';
		}
		return i < len ? i + 1 : len;
	}
	return i;
}

/* ---- expansion ------------------------------------------------------ */

static int expand(struct expander *x, uint32_t file, const char *t, size_t len,
		  int depth);

/* The path of an include: absolute, or beside the including file.
 * Returns -1 when it does not fit. */
static int include_path(const struct expander *x, uint32_t parent,
			const char *name, char *out, size_t out_len)
{
	const char *from = x->src->files[parent];
	const char *slash = strrchr(from, '/');
	size_t dir = slash ? (size_t)(slash - from) : 0;
	size_t name_len = strlen(name);

	if (name[0] == '/' || (parent == 0 && x->main_is_text) || !slash)
		dir = 0;
	if (dir + name_len + 2 > out_len)
		return -1;
	if (dir) {
		memcpy(out, from, dir);
		out[dir++] = '/';
	}
	memcpy(out + dir, name, name_len + 1);
	return 0;
}

static int include_file(struct expander *x, uint32_t parent, uint32_t line,
			const char *name, int depth)
{
	char path[PATH_MAX], msg[PATH_MAX + 256] = "";
	const char *pfile = x->src->files[parent];
	size_t len = 0;
	char *text;
	int idx, rc;

	if (depth >= NT_CONF_MAX_DEPTH) {
		snprintf(x->why, x->why_len,
			 "%s:%u: @include \"%s\": nested more than %d deep (an include cycle?)",
			 pfile, line, name, NT_CONF_MAX_DEPTH);
		return -1;
	}
	if (include_path(x, parent, name, path, sizeof(path))) {
		snprintf(x->why, x->why_len, "%s:%u: @include \"%s\": path too long",
			 pfile, line, name);
		return -1;
	}
	if (nt_trust_path(path, "config file", NULL, msg, sizeof(msg)) ||
	    !(text = read_whole(path, NT_CONF_MAX_BYTES - x->len, &len, msg, sizeof(msg)))) {
		snprintf(x->why, x->why_len, "%s:%u: @include \"%s\": %s", pfile, line,
			 name, msg);
		return -1;
	}
	if ((idx = add_file(x->src, path)) < 0) {
		free(text);
		snprintf(x->why, x->why_len, "%s: out of memory", pfile);
		return -1;
	}
	rc = expand(x, (uint32_t)idx, text, len, depth + 1);
	free(text);
	return rc;
}

/* A directive: what precedes it, the file, then a line break so that the
 * rest of the including line stays on a line of its own. */
static int expand_directive(struct expander *x, uint32_t file, uint32_t line,
			    const char *name, int depth)
{
	uint32_t l = line;

	if (include_file(x, file, line, name, depth))
		return -1;
	return x->out_bol ? 0 : emit(x, file, &l, "\n", 1);
}

static int expand(struct expander *x, uint32_t file, const char *t, size_t len,
		  int depth)
{
	uint32_t line = 1, seg_line = 1;
	size_t i = 0, seg = 0, end;
	bool bol = true;
	char name[PATH_MAX];
	const char *bad = NULL;

	while (i < len) {
		int r = bol ? match_include(t, len, i, &end, name, sizeof(name), &bad) : 0;
		if (r < 0) {
			snprintf(x->why, x->why_len, "%s:%u: @include: %s",
				 x->src->files[file], line, bad);
			return -1;
		}
		if (r > 0) {
			if (emit(x, file, &seg_line, t + seg, i - seg) ||
			    expand_directive(x, file, line, name, depth))
				return -1;
			i = seg = end;
			seg_line = line;
			bol = false;
			continue;
		}
		size_t next = skip_lexeme(t, len, i, &line);
		if (next != i) {
			i = next;
			bol = false;
			continue;
		}
		bol = t[i] == '\n';
		line += bol;
		i++;
	}
	return emit(x, file, &seg_line, t + seg, len - seg);
}

/* ---- entry points ---------------------------------------------------- */

static char *main_text(const char *path, const char *text, size_t *len,
		       char *why, size_t why_len)
{
	struct stat st;

	if (text) {
		*len = strlen(text);
		return strdup(text);
	}
	/* A missing or unreadable file says so plainly, before any trust
	 * verdict about a path that is not there. */
	if (stat(path, &st) != 0) {
		snprintf(why, why_len, "%s: cannot read the config file: %s", path,
			 strerror(errno));
		return NULL;
	}
	if (nt_trust_path(path, "config file", NULL, why, why_len))
		return NULL;
	return read_whole(path, NT_CONF_MAX_BYTES, len, why, why_len);
}

char *nt_conf_read(const char *path, const char *text, struct nt_conf_src *src,
		   char *why, size_t why_len)
{
	struct expander x = {.src = src, .out_bol = true, .why = why,
			     .why_len = why_len, .main_is_text = text != NULL};
	size_t len = 0;
	char *body;

	memset(src, 0, sizeof(*src));
	why[0] = '\0';
	if (add_file(src, path) < 0) {
		snprintf(why, why_len, "%s: out of memory", path);
		return NULL;
	}
	if (!(body = main_text(path, text, &len, why, why_len)))
		return NULL;
	int rc = expand(&x, 0, body, len, 0);
	free(body);
	if (rc == 0 && !x.out && !(x.out = strdup(""))) {
		snprintf(why, why_len, "%s: out of memory", path);
		rc = -1;
	}
	if (rc) {
		free(x.out);
		return NULL;
	}
	return x.out;
}

void nt_conf_where(const struct nt_conf_src *src, int line, const char **file,
		   int *file_line)
{
	*file = src->n_files ? src->files[0] : "(config)";
	*file_line = line;
	if (line >= 1 && (size_t)line <= src->n_lines) {
		const struct nt_conf_line *l = &src->lines[line - 1];
		*file = src->files[l->file];
		*file_line = (int)l->line;
	}
}

void nt_conf_src_free(struct nt_conf_src *src)
{
	for (size_t i = 0; i < src->n_files; i++)
		free(src->files[i]);
	free(src->files);
	free(src->lines);
	memset(src, 0, sizeof(*src));
}
