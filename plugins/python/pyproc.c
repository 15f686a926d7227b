/* SPDX-License-Identifier: MIT */
/* ntcore python probe: looking into a Python process from outside
 * (pyproc.h): finding the interpreter in its maps and ELF files, reading
 * its memory (process_vm_readv), strings, code objects and thread states,
 * and checking a layout against the running interpreter. */
#include "pyproc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ntcore/kit/proc.h"
#include "ntcore/kit/utf8.h"

/* The kit's parsed line as the walker keeps it: a deleted file's path
 * keeps its " (deleted)" mark (it names no file under /proc/PID/root, so
 * open_mapped goes to map_files, and it is the name reported). */
static void mapping_from(const struct nt_map *in, struct py_mapping *m)
{
	memset(m, 0, sizeof(*m));
	m->start = in->start;
	m->end = in->end;
	m->off = in->offset;
	memcpy(m->perms, in->perms, sizeof(m->perms));
	snprintf(m->path, sizeof(m->path), "%s%s", in->path,
		 in->deleted ? " (deleted)" : "");
}

int py_maps_parse(const char *line, struct py_mapping *m)
{
	char copy[PATH_MAX + 128];
	struct nt_map nm;

	snprintf(copy, sizeof(copy), "%s", line);
	copy[strcspn(copy, "\n")] = '\0';
	if (!nt_maps_parse_line(copy, &nm))
		return -1;
	mapping_from(&nm, m);
	return 0;
}

bool py_is_python_name(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	if (strncmp(b, "lib", 3) == 0)
		b += 3;
	if (strncmp(b, "python", 6) != 0)
		return false;
	/* "python", "python3", "python3.11", "libpython3.12.so.1.0" */
	return b[6] == '\0' || (b[6] >= '0' && b[6] <= '9');
}

int py_proc_uid(pid_t pid, uid_t *uid)
{
	char path[64], line[256];
	unsigned long real;
	int ret = -ESRCH;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return -ESRCH;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %lu", &real) == 1) {
			*uid = (uid_t)real;
			ret = 0;
			break;
		}
	fclose(f);
	return ret;
}

int py_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (!addr)
		return -EFAULT;
	n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int py_read_u64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return py_read(pid, addr, v, sizeof(*v));
}

/* ---- ELF ---- */

struct elf_syms {
	uint64_t runtime, py_version, runtime_size;
	bool has_runtime, has_version, has_usdt;
	int e_type;
	GElf_Phdr load[16];
	int n_load;
};

static void scan_notes(Elf *elf, Elf_Scn *scn, struct elf_syms *s)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	if (!d)
		return;
	while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const char *desc = (const char *)d->d_buf + desc_off;
		size_t dl = nh.n_descsz, pl;

		if (nh.n_type != 3 || dl < 3 * 8 + 2)
			continue;
		/* pc, base, semaphore, then provider\0name\0args\0 */
		desc += 24;
		dl -= 24;
		pl = strnlen(desc, dl);
		if (pl + 1 >= dl)
			continue;
		if (strcmp(desc, "python") == 0 &&
		    strncmp(desc + pl + 1, "function__entry", dl - pl - 1) == 0)
			s->has_usdt = true;
	}
	(void)elf;
}

static int elf_scan(int fd, struct elf_syms *s)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t shstrndx, nph;

	memset(s, 0, sizeof(*s));
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if (!gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) ||
	    elf_getphdrnum(elf, &nph)) {
		elf_end(elf);
		return -EINVAL;
	}
	s->e_type = eh.e_type;
	for (size_t i = 0; i < nph && s->n_load < 16; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			s->load[s->n_load++] = ph;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *sname;

		if (!gelf_getshdr(scn, &sh))
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sh.sh_type == SHT_NOTE && sname && strcmp(sname, ".note.stapsdt") == 0) {
			scan_notes(elf, scn, s);
			continue;
		}
		if (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(d, (int)k, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			n = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!n)
				continue;
			if (!s->has_runtime && strcmp(n, "_PyRuntime") == 0) {
				s->runtime = sym.st_value;
				s->runtime_size = sym.st_size;
				s->has_runtime = true;
			} else if (!s->has_version && strcmp(n, "Py_Version") == 0) {
				s->py_version = sym.st_value;
				s->has_version = true;
			}
		}
	}
	elf_end(elf);
	return 0;
}

static int open_mapped(pid_t pid, const struct py_mapping *m)
{
	char p[PATH_MAX + 64];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, m->path);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", (int)pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	return open(p, O_RDONLY | O_CLOEXEC);
}

/* Runtime address of a file virtual address, from the file's mappings. */
static int vaddr_to_addr(const struct elf_syms *s, const struct py_mapping *maps,
			 size_t n, const char *path, uint64_t vaddr, uint64_t *out)
{
	const uint64_t pg = 4096;

	if (s->e_type == ET_EXEC) {
		*out = vaddr;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(maps[i].path, path))
			continue;
		for (int k = 0; k < s->n_load; k++) {
			if ((s->load[k].p_offset & ~(pg - 1)) == maps[i].off) {
				uint64_t bias = maps[i].start - (s->load[k].p_vaddr & ~(pg - 1));

				*out = vaddr + bias;
				return 0;
			}
		}
	}
	return -ENOENT;
}

struct maps_acc {
	struct py_mapping *maps;
	size_t n, cap;
};

/* nt_proc_maps_foreach: keep the mappings of files. */
static int keep_file_mapping(void *arg, const struct nt_map *m)
{
	struct maps_acc *a = arg;

	if (m->path[0] != '/')
		return 0;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 256;
		void *nm = realloc(a->maps, nc * sizeof(*a->maps));

		if (!nm)
			return -ENOMEM;
		a->maps = nm;
		a->cap = nc;
	}
	mapping_from(m, &a->maps[a->n++]);
	return 0;
}

int py_find(pid_t pid, struct py_found *out, char *err, size_t errlen)
{
	struct maps_acc acc = { 0 };
	struct py_mapping *maps;
	size_t n;
	int ret = -ENOENT, l;

	memset(out, 0, sizeof(*out));
	out->major = out->minor = -1;
	l = nt_proc_exe((uint32_t)pid, out->exe, sizeof(out->exe));
	if (l < 0) {
		snprintf(err, errlen, "cannot read /proc/%d/exe: %s", (int)pid,
			 strerror(-l));
		return l == -ENOENT ? -ESRCH : l;
	}
	l = nt_proc_maps_foreach((uint32_t)pid, keep_file_mapping, &acc);
	if (l < 0) {
		free(acc.maps);
		snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid,
			 strerror(-l));
		return l == -ENOENT || l == -ESRCH ? -ESRCH : l;
	}
	maps = acc.maps;
	n = acc.n;
	snprintf(err, errlen, "no python binary or libpython mapped (exe %s)", out->exe);
	for (size_t i = 0; i < n; i++) {
		struct elf_syms s;
		bool seen = false;
		int fd;

		if (!py_is_python_name(maps[i].path))
			continue;
		for (size_t j = 0; j < i; j++)
			if (strcmp(maps[j].path, maps[i].path) == 0)
				seen = true;
		if (seen)
			continue;
		fd = open_mapped(pid, &maps[i]);
		if (fd < 0)
			continue;
		ret = elf_scan(fd, &s);
		close(fd);
		if (ret || !s.has_runtime) {
			snprintf(err, errlen, "%s maps %s but no _PyRuntime symbol in it",
				 out->exe, maps[i].path);
			ret = -ENOENT;
			continue;
		}
		snprintf(out->object, sizeof(out->object), "%s", maps[i].path);
		out->has_usdt = s.has_usdt;
		if (vaddr_to_addr(&s, maps, n, maps[i].path, s.runtime, &out->runtime)) {
			snprintf(err, errlen, "cannot place _PyRuntime of %s", maps[i].path);
			ret = -ENOENT;
			continue;
		}
		if (s.has_version) {
			uint64_t va;

			if (vaddr_to_addr(&s, maps, n, maps[i].path, s.py_version, &va) == 0 &&
			    py_read(pid, va, &out->py_version, sizeof(uint32_t)) == 0) {
				out->py_version &= 0xffffffffu;
				out->major = (int)(out->py_version >> 24);
				out->minor = (int)((out->py_version >> 16) & 0xff);
			}
		}
		if (out->major < 0 &&
		    py_version_from_path(maps[i].path, &out->major, &out->minor) &&
		    py_version_from_path(out->exe, &out->major, &out->minor))
			out->major = out->minor = -1;
		ret = 0;
		break;
	}
	free(maps);
	return ret;
}

/* ---- objects ---- */

/* Code point c as UTF-8 at out[*at] if it fits with a NUL after it; a
 * surrogate or a value past U+10FFFF (a malformed string object) as
 * U+FFFD, so names are always valid UTF-8. */
static void put_utf8(uint32_t c, char *out, size_t outlen, size_t *at)
{
	char b[4];
	size_t n = nt_utf8_encode(c, b);

	if (!n)
		n = nt_utf8_encode(0xfffd, b);
	if (*at + n + 1 > outlen)
		return;
	memcpy(out + *at, b, n);
	*at += n;
}

int py_read_str(pid_t pid, const struct py_layout *l, uint64_t addr,
		char *out, size_t outlen)
{
	uint32_t state;
	int64_t length;
	unsigned kind;
	size_t at = 0, bytes;
	uint8_t *tmp;
	int ret;

	if (!outlen)
		return -EINVAL;
	out[0] = '\0';
	if ((ret = py_read(pid, addr + l->unicode_state, &state, sizeof(state))) ||
	    (ret = py_read(pid, addr + l->unicode_length, &length, sizeof(length))))
		return ret;
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || length < 0 || length > 65536 ||
	    (kind != 1 && kind != 2 && kind != 4))
		return -EINVAL;
	if ((state >> 6) & 1) { /* compact ASCII */
		size_t n = (size_t)length < outlen - 1 ? (size_t)length : outlen - 1;

		if ((ret = py_read(pid, addr + l->unicode_ascii_data, out, n)))
			return ret;
		out[n] = '\0';
		return (int)n;
	}
	bytes = (size_t)length * kind;
	if (bytes > 4 * outlen)
		bytes = 4 * outlen - 4 * outlen % kind;
	tmp = malloc(bytes ? bytes : 1);
	if (!tmp)
		return -ENOMEM;
	ret = py_read(pid, addr + l->unicode_compact_data, tmp, bytes);
	if (ret) {
		free(tmp);
		return ret;
	}
	for (size_t i = 0; i < bytes / kind; i++) {
		uint32_t c;

		if (kind == 1) {
			c = tmp[i];
		} else if (kind == 2) {
			uint16_t v;

			memcpy(&v, tmp + 2 * i, 2);
			c = v;
		} else {
			memcpy(&c, tmp + 4 * i, 4);
		}
		put_utf8(c, out, outlen, &at);
	}
	out[at] = '\0';
	free(tmp);
	return (int)at;
}

int py_read_tp_name(pid_t pid, const struct py_layout *l, uint64_t type,
		    char *out, size_t outlen)
{
	uint64_t name;
	int ret;

	if (!outlen)
		return -EINVAL;
	if ((ret = py_read_u64(pid, type + l->type_name, &name)))
		return ret;
	/* tp_name is a C string: read what we can, stop at NUL */
	memset(out, 0, outlen);
	for (size_t got = 0; got + 1 < outlen;) {
		size_t chunk = outlen - 1 - got < 32 ? outlen - 1 - got : 32;

		if (py_read(pid, name + got, out + got, chunk))
			break;
		if (memchr(out + got, '\0', chunk))
			break;
		got += chunk;
	}
	out[outlen - 1] = '\0';
	return out[0] ? 0 : -EINVAL;
}

int py_read_type_name(pid_t pid, const struct py_layout *l, uint64_t obj,
		      char *out, size_t outlen, uint64_t *type_addr)
{
	uint64_t type;
	int ret;

	if ((ret = py_read_u64(pid, obj + l->ob_type, &type)))
		return ret;
	if (type_addr)
		*type_addr = type;
	return py_read_tp_name(pid, l, type, out, outlen);
}

void py_code_free(struct py_code *c)
{
	free(c->qualname);
	free(c->file);
	free(c->linetable);
	memset(c, 0, sizeof(*c));
}

int py_read_code(pid_t pid, const struct py_layout *l, uint64_t addr,
		 uint64_t *code_type, struct py_code *out)
{
	char buf[1024];
	uint64_t type = 0, lt = 0, name = 0, file = 0;
	int64_t lt_len = 0;
	int32_t first = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	if (*code_type) {
		if ((ret = py_read_u64(pid, addr + l->ob_type, &type)))
			return ret;
		if (type != *code_type)
			return -EINVAL;
	} else {
		if ((ret = py_read_type_name(pid, l, addr, buf, sizeof(buf), &type)))
			return ret;
		if (strcmp(buf, "code") != 0)
			return -EINVAL;
		*code_type = type;
	}
	name = 0;
	if (l->code_qualname != PY_NO_OFF)
		ret = py_read_u64(pid, addr + l->code_qualname, &name);
	if (!name && (ret = py_read_u64(pid, addr + l->code_name, &name)))
		return ret;
	if ((ret = py_read_u64(pid, addr + l->code_filename, &file)) ||
	    (ret = py_read(pid, addr + l->code_firstlineno, &first, sizeof(first))) ||
	    (ret = py_read_u64(pid, addr + l->code_linetable, &lt)))
		return ret;
	out->name_ptr = name;
	out->filename_ptr = file;
	out->firstlineno = first;
	if (py_read_str(pid, l, name, buf, sizeof(buf)) < 0)
		snprintf(buf, sizeof(buf), "<code 0x%llx>", (unsigned long long)addr);
	out->qualname = strdup(buf);
	if (py_read_str(pid, l, file, buf, sizeof(buf)) < 0)
		snprintf(buf, sizeof(buf), "<unknown>");
	out->file = strdup(buf);
	if (lt && py_read(pid, lt + l->bytes_size, &lt_len, sizeof(lt_len)) == 0 &&
	    lt_len > 0 && lt_len < (1 << 20)) {
		out->linetable = malloc((size_t)lt_len);
		if (out->linetable &&
		    py_read(pid, lt + l->bytes_data, out->linetable, (size_t)lt_len) == 0) {
			out->lt_len = (uint32_t)lt_len;
		} else {
			free(out->linetable);
			out->linetable = NULL;
		}
	}
	if (!out->qualname || !out->file) {
		py_code_free(out);
		return -ENOMEM;
	}
	return 0;
}

bool py_code_same(pid_t pid, const struct py_layout *l, uint64_t addr,
		  const struct py_code *c)
{
	/* co_filename, co_name[, co_qualname] are adjacent in every version:
	 * one read */
	uint64_t v[3] = { 0, 0, 0 }, name;
	uint16_t lo = l->code_filename;
	size_t n = l->code_qualname != PY_NO_OFF ? 3 : 2;

	if (l->code_name != lo + 8 ||
	    (n == 3 && l->code_qualname != lo + 16)) {
		uint64_t file = 0;

		name = 0;
		if (l->code_qualname != PY_NO_OFF)
			py_read_u64(pid, addr + l->code_qualname, &name);
		if (!name)
			py_read_u64(pid, addr + l->code_name, &name);
		py_read_u64(pid, addr + l->code_filename, &file);
		return name == c->name_ptr && file == c->filename_ptr;
	}
	if (py_read(pid, addr + lo, v, n * 8))
		return false;
	name = n == 3 && v[2] ? v[2] : v[1];
	return name == c->name_ptr && v[0] == c->filename_ptr;
}

int py_resolve_layout(pid_t pid, const struct py_found *f,
		      struct py_layout *out, char *err, size_t errlen)
{
	const struct py_layout *row;

	if (f->major < 0) {
		snprintf(err, errlen,
			 "cannot tell the CPython version of %s (no Py_Version "
			 "symbol, no version in the file name)", f->object);
		return -ENOTSUP;
	}
	row = py_layout_lookup(f->major, f->minor);
	if (!row) {
		if (f->py_version)
			snprintf(err, errlen,
				 "CPython %d.%d (Py_Version 0x%08llx) in %s is not a version "
				 "this probe knows (%s); not sampling it",
				 f->major, f->minor, (unsigned long long)f->py_version,
				 f->object, py_layout_known());
		else
			snprintf(err, errlen,
				 "CPython %d.%d in %s is not a version this probe knows "
				 "(%s); not sampling it",
				 f->major, f->minor, f->object, py_layout_known());
		return -ENOTSUP;
	}
	if (f->major == 3 && f->minor >= 13) {
		uint8_t buf[PY_DEBUG_OFFSETS_313_SIZE];
		char why[256];
		int ret = py_read(pid, f->runtime, buf, sizeof(buf));

		if (ret) {
			snprintf(err, errlen, "cannot read _Py_DebugOffsets: %s",
				 strerror(-ret));
			return ret == -ESRCH ? ret : -ENOTSUP;
		}
		if (py_layout_from_debug(buf, sizeof(buf), f->py_version, out, why,
					 sizeof(why))) {
			snprintf(err, errlen, "CPython %d.%d: %s; not sampling it",
				 f->major, f->minor, why);
			return -ENOTSUP;
		}
		return 0;
	}
	*out = *row;
	return 0;
}

/* Thread state ts's first frame with a code object (C-stack shims
 * skipped): its type must be "code". 1 when one was checked, 0 when the
 * thread has none, -EPROTO when the type is wrong (err said). */
static int check_first_code(pid_t pid, const struct py_found *f,
			    const struct py_layout *l, uint64_t ts,
			    uint64_t *code_type, char *err, size_t errlen)
{
	uint64_t frame = 0;
	char tname[64];
	int ret;

	if (py_read_u64(pid, ts + l->ts_frame, &frame) == 0 && frame &&
	    l->cframe_current != PY_NO_OFF)
		py_read_u64(pid, frame + l->cframe_current, &frame);
	for (int k = 0; frame && k < 8; k++) {
		uint64_t code = 0, prev = 0;
		uint8_t owner = 0;

		py_read_u64(pid, frame + l->frame_code, &code);
		py_read_u64(pid, frame + l->frame_previous, &prev);
		if (l->frame_owner != PY_NO_OFF)
			py_read(pid, frame + l->frame_owner, &owner, 1);
		if (code && !(l->minor >= 12 && owner == 3)) {
			ret = py_read_type_name(pid, l, code, tname, sizeof(tname), code_type);
			if (ret || strcmp(tname, "code") != 0) {
				snprintf(err, errlen,
					 "a frame's code object 0x%llx has type \"%s\", "
					 "not \"code\": the %d.%d offsets do not match",
					 (unsigned long long)code, ret ? "?" : tname,
					 f->major, f->minor);
				return -EPROTO;
			}
			return 1;
		}
		frame = prev;
	}
	return 0;
}

/* Thread state ts (the i-th): it points back at interp and, where it
 * holds a native thread id, the first one is a thread of pid. */
static int check_tstate(pid_t pid, const struct py_found *f,
			const struct py_layout *l, uint64_t interp, uint64_t ts,
			int i, char *err, size_t errlen)
{
	uint64_t back = 0, tid = 0;
	char path[64];
	struct stat st;
	int ret;

	if ((ret = py_read_u64(pid, ts + l->ts_interp, &back)) || back != interp) {
		snprintf(err, errlen,
			 "thread state 0x%llx points at interpreter 0x%llx, not "
			 "0x%llx: the %d.%d offsets do not match this interpreter",
			 (unsigned long long)ts, (unsigned long long)back,
			 (unsigned long long)interp, f->major, f->minor);
		return -EPROTO;
	}
	if (l->tid_is_pthread)
		return 0;
	if (py_read_u64(pid, ts + l->ts_thread_id, &tid))
		return -EPROTO;
	snprintf(path, sizeof(path), "/proc/%d/task/%llu", (int)pid,
		 (unsigned long long)tid);
	if (tid && stat(path, &st) != 0 && i == 0) {
		snprintf(err, errlen,
			 "thread state's native thread id %llu is not a "
			 "thread of pid %d: the %d.%d offsets do not match",
			 (unsigned long long)tid, (int)pid, f->major, f->minor);
		return -EPROTO;
	}
	return 0;
}

int py_verify(pid_t pid, const struct py_found *f, const struct py_layout *l,
	      uint64_t *code_type, char *err, size_t errlen)
{
	uint64_t interp = 0, ts = 0;
	int ret;

	ret = py_read_u64(pid, f->runtime + l->runtime_interp_head, &interp);
	if (ret) {
		snprintf(err, errlen, "cannot read _PyRuntime at 0x%llx: %s",
			 (unsigned long long)f->runtime, strerror(-ret));
		return ret == -ESRCH ? ret : -EPROTO;
	}
	if (!interp) {
		snprintf(err, errlen, "interpreter not initialised yet");
		return -EAGAIN;
	}
	if ((ret = py_read_u64(pid, interp + l->interp_threads_head, &ts))) {
		snprintf(err, errlen,
			 "interpreters.head 0x%llx cannot be read (%s): the %d.%d "
			 "offsets do not match this interpreter",
			 (unsigned long long)interp, strerror(-ret), f->major, f->minor);
		return ret == -ESRCH ? ret : -EPROTO;
	}
	if (!ts) {
		snprintf(err, errlen, "no thread state yet");
		return -EAGAIN;
	}
	for (int i = 0; ts && i < 64; i++) {
		if ((ret = check_tstate(pid, f, l, interp, ts, i, err, errlen)))
			return ret;
		ret = check_first_code(pid, f, l, ts, code_type, err, errlen);
		if (ret < 0)
			return ret;
		if (ret > 0 || py_read_u64(pid, ts + l->ts_next, &ts))
			break;
	}
	return 0;
}

int py_tstates(pid_t pid, const struct py_layout *l, uint64_t runtime,
	       uint64_t *ids, uint64_t *tstates, size_t max)
{
	uint64_t interp = 0, ts = 0;
	size_t n = 0;
	int ret;

	if ((ret = py_read_u64(pid, runtime + l->runtime_interp_head, &interp)))
		return ret;
	if (!interp || (ret = py_read_u64(pid, interp + l->interp_threads_head, &ts)))
		return ret;
	for (int i = 0; ts && i < PY_MAX_TSTATES && n < max; i++) {
		if (py_read_u64(pid, ts + l->ts_thread_id, &ids[n]))
			break;
		tstates[n++] = ts;
		if (py_read_u64(pid, ts + l->ts_next, &ts))
			break;
	}
	return (int)n;
}

int py_threads(pid_t pid, const struct py_layout *l, uint64_t runtime,
	       uint32_t *tids, uint64_t *tstates, size_t max)
{
	uint64_t ids[256];
	int n;

	if (l->tid_is_pthread)
		return -ENOTSUP;
	if (max > sizeof(ids) / sizeof(ids[0]))
		max = sizeof(ids) / sizeof(ids[0]);
	n = py_tstates(pid, l, runtime, ids, tstates, max);
	for (int i = 0; i < n; i++)
		tids[i] = (uint32_t)ids[i];
	return n;
}

int py_walk(pid_t pid, const struct py_layout *l, uint64_t tstate,
	    struct py_frame *out, int max)
{
	uint64_t frame = 0;
	int n = 0;

	if (py_read_u64(pid, tstate + l->ts_frame, &frame))
		return 0;
	if (frame && l->cframe_current != PY_NO_OFF &&
	    py_read_u64(pid, frame + l->cframe_current, &frame))
		return 0;
	for (int i = 0; frame && i < 2 * PY_MAX_FRAMES && n < max; i++) {
		uint64_t code = 0, prev = 0, instr = 0;
		uint8_t owner = 0;

		if (py_read_u64(pid, frame + l->frame_code, &code) ||
		    py_read_u64(pid, frame + l->frame_previous, &prev))
			break;
		if (l->minor == 10) {
			uint32_t lasti = 0;

			py_read(pid, frame + l->frame_instr, &lasti, sizeof(lasti));
			instr = lasti;
		} else {
			py_read_u64(pid, frame + l->frame_instr, &instr);
		}
		if (l->frame_owner != PY_NO_OFF)
			py_read(pid, frame + l->frame_owner, &owner, 1);
		if (code && !(l->minor >= 12 && owner == 3)) {
			out[n].code = code;
			out[n].instr = instr;
			n++;
		}
		frame = prev;
	}
	return n;
}
