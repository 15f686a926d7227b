/* SPDX-License-Identifier: MIT */
/* mem probe: kernel-free logic (see mem_logic.h). */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "ntcore/kit/proc.h"
#include "ntcore/kit/uprobe_insn.h"

/* ------------------------------------------------------------------ */
/* Allocator functions                                                 */
/* ------------------------------------------------------------------ */

static const char *const fn_names[MEM_FN_COUNT] = {
	[MEM_FN_MALLOC] = "malloc",
	[MEM_FN_CALLOC] = "calloc",
	[MEM_FN_REALLOC] = "realloc",
	[MEM_FN_FREE] = "free",
	[MEM_FN_POSIX_MEMALIGN] = "posix_memalign",
	[MEM_FN_ALIGNED_ALLOC] = "aligned_alloc",
	[MEM_FN_MEMALIGN] = "memalign",
	[MEM_FN_VALLOC] = "valloc",
	[MEM_FN_PVALLOC] = "pvalloc",
	[MEM_FN_MMAP] = "mmap",
	[MEM_FN_MUNMAP] = "munmap",
};

const char *mem_fn_name(unsigned fn)
{
	return fn < MEM_FN_COUNT ? fn_names[fn] : NULL;
}

int mem_fn_from_name(const char *name)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < MEM_FN_COUNT; i++)
		if (i != MEM_FN_MMAP && i != MEM_FN_MUNMAP &&
		    strcmp(fn_names[i], name) == 0)
			return (int)i;
	return -1;
}

bool mem_fn_needs_return(unsigned fn)
{
	return fn != MEM_FN_FREE && fn != MEM_FN_MUNMAP && fn < MEM_FN_COUNT;
}

/* ------------------------------------------------------------------ */
/* x86-64 first-instruction decoder                                    */
/* ------------------------------------------------------------------ */

static const char *const reg64[16] = {
	"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
static const char *const reg32[16] = {
	"eax", "ecx",  "edx",  "ebx",  "esp",  "ebp",  "esi",  "edi",
	"r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"};

/* Length of ModRM (+SIB, +displacement) at p; 0 when out of bytes. */
static size_t modrm_len(const uint8_t *p, size_t n)
{
	size_t len = 1;
	unsigned mod, rm;

	if (n < 1)
		return 0;
	mod = p[0] >> 6;
	rm = p[0] & 7;
	if (mod != 3 && rm == 4) {
		if (n < 2)
			return 0;
		len++;
		if (mod == 0 && (p[1] & 7) == 5)
			len += 4;
	}
	if (mod == 0 && rm == 5)
		len += 4;
	else if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len <= n ? len : 0;
}

/* Registers a probe placed after the instruction may see changed. */
static bool scratch_reg(unsigned r)
{
	return r == 0 || r == 10 || r == 11; /* rax, r10, r11 */
}

static void set(struct mem_insn *o, uint32_t len, int cls, const char *text)
{
	o->len = len;
	o->cls = cls;
	snprintf(o->text, sizeof(o->text), "%s", text);
}

void mem_insn_decode(const uint8_t *p, size_t n, struct mem_insn *o)
{
	size_t i = 0, ml;
	bool opsize = false;
	unsigned rex = 0, op, reg, rm, mod;
	char t[40];

	memset(o, 0, sizeof(*o));
	snprintf(o->text, sizeof(o->text), "(unknown)");
	if (n == 0)
		return;
	if (n >= 4 && p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e &&
	    (p[3] == 0xfa || p[3] == 0xfb)) {
		set(o, 4, MEM_INSN_SKIPPABLE, p[3] == 0xfa ? "endbr64" : "endbr32");
		return;
	}
	while (i < n && (p[i] == 0x66 || p[i] == 0x2e)) {
		opsize |= p[i] == 0x66;
		i++;
	}
	if (i < n && (p[i] & 0xf0) == 0x40)
		rex = p[i++];
	if (i >= n)
		return;
	op = p[i++];

	/* Instructions the kernel emulates instead of single-stepping. */
	if (op == 0x90 && i == 1) {
		set(o, 1, MEM_INSN_EMULATED, "nop");
		return;
	}
	if (op >= 0x50 && op <= 0x57 && !opsize && (rex == 0 || rex == 0x41)) {
		snprintf(t, sizeof(t), "push %%%s", reg64[(op - 0x50) + (rex ? 8 : 0)]);
		set(o, (uint32_t)i, MEM_INSN_EMULATED, t);
		return;
	}
	if (!opsize && !rex && i == 1) {
		if (op == 0xe8 && n >= 5) {
			set(o, 5, MEM_INSN_EMULATED, "call rel32");
			return;
		}
		if (op == 0xe9 && n >= 5) {
			set(o, 5, MEM_INSN_EMULATED, "jmp rel32");
			return;
		}
		if (op == 0xeb && n >= 2) {
			set(o, 2, MEM_INSN_EMULATED, "jmp rel8");
			return;
		}
		if (op >= 0x70 && op <= 0x7f && n >= 2) {
			set(o, 2, MEM_INSN_EMULATED, "jcc rel8");
			return;
		}
		if (op == 0x0f && n >= 6 && p[1] >= 0x80 && p[1] <= 0x8f) {
			set(o, 6, MEM_INSN_EMULATED, "jcc rel32");
			return;
		}
	}

	/* Instructions that change nothing a probe after them reads. */
	if (op == 0x0f && i < n && p[i] == 0x1f) { /* multi-byte nop */
		i++;
		if (i < n && ((p[i] >> 3) & 7) == 0 && (ml = modrm_len(p + i, n - i))) {
			set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, "nopl");
			return;
		}
		return;
	}
	if (i >= n && op != 0x3c && op != 0x3d && op != 0xa8 && op != 0xa9 &&
	    !(op >= 0xb8 && op <= 0xbf))
		return;
	mod = i < n ? p[i] >> 6 : 0;
	reg = i < n ? ((p[i] >> 3) & 7) | ((rex & 4) ? 8 : 0) : 0;
	rm = i < n ? (p[i] & 7) | ((rex & 1) ? 8 : 0) : 0;
	const char *const *names = (rex & 8) ? reg64 : reg32;

	switch (op) {
	case 0x84: case 0x85: /* test r/m, r */
	case 0x38: case 0x39: case 0x3a: case 0x3b: /* cmp */
		if (!(ml = modrm_len(p + i, n - i)))
			return;
		if (mod == 3 && op != 0x84 && op != 0x38 && op != 0x3a)
			snprintf(t, sizeof(t), "%s %%%s,%%%s",
				 (op == 0x85) ? "test" : "cmp", names[reg], names[rm]);
		else
			snprintf(t, sizeof(t), "%s r/m,r",
				 (op == 0x84 || op == 0x85) ? "test" : "cmp");
		set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, t);
		return;
	case 0x3c: /* cmp al, imm8 */
	case 0xa8: /* test al, imm8 */
		if (i + 1 > n)
			return;
		set(o, (uint32_t)(i + 1), MEM_INSN_SKIPPABLE, op == 0x3c ? "cmp $imm,%al" : "test $imm,%al");
		return;
	case 0x3d: /* cmp eax, imm32 */
	case 0xa9: /* test eax, imm32 */
		if (i + (opsize ? 2 : 4) > n)
			return;
		set(o, (uint32_t)(i + (opsize ? 2 : 4)), MEM_INSN_SKIPPABLE,
		    op == 0x3d ? "cmp $imm,%eax" : "test $imm,%eax");
		return;
	case 0x80: case 0x83: case 0x81: { /* group 1: only /7 = cmp */
		size_t imm = op == 0x81 ? (opsize ? 2 : 4) : 1;

		if (((p[i] >> 3) & 7) != 7 || !(ml = modrm_len(p + i, n - i)) ||
		    i + ml + imm > n)
			return;
		set(o, (uint32_t)(i + ml + imm), MEM_INSN_SKIPPABLE,
		    mod == 0 && (p[i] & 7) == 5 ? "cmp $imm,rip-relative" : "cmp $imm,r/m");
		return;
	}
	case 0xf6: case 0xf7: { /* group 3: only /0 = test */
		size_t imm = op == 0xf6 ? 1 : (opsize ? 2 : 4);

		if (((p[i] >> 3) & 7) != 0 || !(ml = modrm_len(p + i, n - i)) ||
		    i + ml + imm > n)
			return;
		if (mod == 3)
			snprintf(t, sizeof(t), "test $imm,%%%s", names[rm]);
		else
			snprintf(t, sizeof(t), "test $imm,r/m");
		set(o, (uint32_t)(i + ml + imm), MEM_INSN_SKIPPABLE, t);
		return;
	}
	case 0x89: /* mov r, r/m: skippable when it writes a scratch reg */
		if (mod != 3 || !scratch_reg(rm) || !(ml = modrm_len(p + i, n - i)))
			return;
		snprintf(t, sizeof(t), "mov %%%s,%%%s", names[reg], names[rm]);
		set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, t);
		return;
	case 0x8b: /* mov r/m, r */
		if (!scratch_reg(reg) || !(ml = modrm_len(p + i, n - i)))
			return;
		if (mod == 3)
			snprintf(t, sizeof(t), "mov %%%s,%%%s", names[rm], names[reg]);
		else
			snprintf(t, sizeof(t), "mov r/m,%%%s", names[reg]);
		set(o, (uint32_t)(i + ml), MEM_INSN_SKIPPABLE, t);
		return;
	case 0x31: case 0x33: /* xor reg, reg into a scratch reg */
		if (mod != 3 || !scratch_reg(op == 0x31 ? rm : reg))
			return;
		snprintf(t, sizeof(t), "xor %%%s,%%%s", names[op == 0x31 ? reg : rm],
			 names[op == 0x31 ? rm : reg]);
		set(o, (uint32_t)(i + 1), MEM_INSN_SKIPPABLE, t);
		return;
	default:
		break;
	}
	if (op >= 0xb8 && op <= 0xbf) { /* mov $imm, reg */
		unsigned r = (op - 0xb8) | ((rex & 1) ? 8 : 0);
		size_t imm = (rex & 8) ? 8 : (opsize ? 2 : 4);

		if (!scratch_reg(r) || i + imm > n)
			return;
		snprintf(t, sizeof(t), "mov $imm,%%%s", names[r]);
		set(o, (uint32_t)(i + imm), MEM_INSN_SKIPPABLE, t);
	}
}

/* AArch64: the entry, simulated or stepped as the kernel will run it. */
static void choose_attach_a64(const uint8_t *code, size_t n,
			      struct mem_attach_point *out)
{
	char text[sizeof(out->first.text)];
	int cls = nt_uprobe_insn_a64(code, n, text, sizeof(text));

	out->first.len = cls < 0 ? 0 : 4;
	out->first.cls = cls == NT_UPROBE_INSN_SIMULATED ? MEM_INSN_EMULATED
							 : MEM_INSN_UNKNOWN;
	snprintf(out->first.text, sizeof(out->first.text), "%.28s%s", text,
		 cls == NT_UPROBE_INSN_REFUSED ? " (refused)" : "");
	out->at = out->first;
	out->emulated = cls == NT_UPROBE_INSN_SIMULATED;
}

void mem_choose_attach(const uint8_t *code, size_t n, bool allow_skip,
		       struct mem_attach_point *out)
{
	mem_choose_attach_isa(MEM_ISA_HOST, code, n, allow_skip, out);
}

void mem_choose_attach_isa(int isa, const uint8_t *code, size_t n,
			   bool allow_skip, struct mem_attach_point *out)
{
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	if (isa == MEM_ISA_AARCH64) {
		choose_attach_a64(code, n, out);
		return;
	}
	if (isa != MEM_ISA_X86_64) {
		snprintf(out->first.text, sizeof(out->first.text), "(not decoded)");
		out->at = out->first;
		return;
	}
	mem_insn_decode(code, n, &out->first);
	out->at = out->first;
	out->emulated = out->first.cls == MEM_INSN_EMULATED;
	if (out->emulated || !allow_skip)
		return;
	for (int k = 0; k < 4 && off < n; k++) {
		struct mem_insn d;

		mem_insn_decode(code + off, n - off, &d);
		if (d.cls == MEM_INSN_EMULATED && off > 0) {
			out->skip = (uint32_t)off;
			out->at = d;
			out->emulated = true;
			return;
		}
		if (d.cls != MEM_INSN_SKIPPABLE || d.len == 0 || k == 3)
			break;
		off += d.len;
	}
}

/* ------------------------------------------------------------------ */
/* Finding the C library                                               */
/* ------------------------------------------------------------------ */

bool mem_is_libc_path(const char *path)
{
	const char *base;
	size_t len;

	if (!path || path[0] != '/')
		return false;
	base = strrchr(path, '/') + 1;
	len = strlen(base);
	if (strcmp(base, "libc.so.6") == 0 || strcmp(base, "libc.so") == 0)
		return true;
	/* glibc before 2.34 installed libc-2.NN.so */
	if (strncmp(base, "libc-", 5) == 0 && len > 8 &&
	    strcmp(base + len - 3, ".so") == 0)
		return true;
	/* musl: the dynamic linker is the C library */
	return strncmp(base, "ld-musl-", 8) == 0 || strcmp(base, "libc.musl-x86_64.so.1") == 0;
}

int mem_map_libc(const struct nt_map *m, char *out, size_t outlen)
{
	if (m->deleted || !mem_is_libc_path(m->path))
		return -ENOENT; /* a deleted file was never matched: keep it so */
	if (m->path_len >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, m->path, m->path_len + 1);
	return 0;
}

int mem_maps_find_libc(const char *maps, char *out, size_t outlen)
{
	const char *line = maps;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[4096];
		struct nt_map m;

		if (len < sizeof(buf)) {
			int rc;

			memcpy(buf, line, len);
			buf[len] = '\0';
			if (nt_maps_parse_line(buf, &m) &&
			    (rc = mem_map_libc(&m, out, outlen)) != -ENOENT)
				return rc;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

int mem_ldconfig_find_libc(const char *text, char *out, size_t outlen)
{
#if defined(__x86_64__)
	static const char *const abi = "x86-64";
#elif defined(__aarch64__)
	static const char *const abi = "AArch64";
#else
	static const char *const abi = NULL;
#endif
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *s = line;

		while (s < line + len && (*s == ' ' || *s == '\t'))
			s++;
		if ((size_t)(line + len - s) > 10 && strncmp(s, "libc.so.6 (", 11) == 0) {
			const char *close = memchr(s, ')', (size_t)(line + len - s));
			const char *arrow = close ? strstr(close, "=> ") : NULL;
			bool abi_ok = true;

			if (close && abi) {
				size_t flen = (size_t)(close - (s + 11));
				char flags[128];

				if (flen >= sizeof(flags))
					flen = sizeof(flags) - 1;
				memcpy(flags, s + 11, flen);
				flags[flen] = '\0';
				abi_ok = strstr(flags, abi) != NULL;
			}
			if (abi_ok && arrow && arrow < line + len) {
				const char *p = arrow + 3;
				size_t plen = (size_t)(line + len - p);

				if (plen >= outlen)
					return -ENAMETOOLONG;
				memcpy(out, p, plen);
				out[plen] = '\0';
				return 0;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* ------------------------------------------------------------------ */
/* ELF                                                                 */
/* ------------------------------------------------------------------ */

static int find_in_symtab(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
			  const char *name, GElf_Sym *found)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || !sh->sh_entsize)
		return -ENOENT;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *s;

		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
			continue;
		s = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!s || strcmp(s, name) != 0)
			continue;
		if (GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC)
			return -ENOTSUP;
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		*found = sym;
		return 0;
	}
	return -ENOENT;
}

int mem_elf_find_func(const char *path, const char *name,
		      struct mem_elf_func *out)
{
	int fd, rc = -ENOENT;
	Elf *elf;
	GElf_Sym sym;
	size_t nphdr;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		close(fd);
		return -ENOEXEC;
	}
	for (int pass = 0; pass < 2 && rc == -ENOENT; pass++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(elf, scn)) != NULL) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh) ||
			    sh.sh_type != (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB))
				continue;
			rc = find_in_symtab(elf, scn, &sh, name, &sym);
			if (rc != -ENOENT)
				break;
		}
	}
	if (rc == 0) {
		rc = -ENOENT;
		if (elf_getphdrnum(elf, &nphdr) == 0) {
			for (size_t i = 0; i < nphdr; i++) {
				GElf_Phdr ph;

				if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
				    sym.st_value < ph.p_vaddr ||
				    sym.st_value >= ph.p_vaddr + ph.p_filesz)
					continue;
				out->vaddr = sym.st_value;
				out->file_off = sym.st_value - ph.p_vaddr + ph.p_offset;
				out->size = sym.st_size;
				rc = 0;
				break;
			}
		}
	}
	if (rc == 0) {
		size_t want = sizeof(out->code);
		ssize_t got;

		if (out->size && out->size < want)
			want = (size_t)out->size;
		got = pread(fd, out->code, want, (off_t)out->file_off);
		if (got < 0)
			rc = -errno;
		else
			out->code_len = (uint32_t)got;
	}
	elf_end(elf);
	close(fd);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Grouping                                                            */
/* ------------------------------------------------------------------ */

static uint64_t group_hash(uint32_t tgid, int32_t stack_id, uint32_t kind)
{
	uint64_t h = ((uint64_t)tgid << 32) ^ (uint32_t)stack_id ^ ((uint64_t)kind << 62);

	return h * 0x9e3779b97f4a7c15ull;
}

void mem_groups_init(struct mem_groups *g)
{
	memset(g, 0, sizeof(*g));
}

void mem_groups_free(struct mem_groups *g)
{
	free(g->slots);
	memset(g, 0, sizeof(*g));
}

void mem_groups_reset(struct mem_groups *g)
{
	if (g->slots)
		memset(g->slots, 0, g->cap * sizeof(*g->slots));
	g->n = 0;
}

static struct mem_group *group_slot(struct mem_group *slots, size_t cap,
				    uint32_t tgid, int32_t stack_id,
				    uint32_t kind)
{
	size_t j = group_hash(tgid, stack_id, kind) >> 20 & (cap - 1);

	while (slots[j].count && !(slots[j].tgid == tgid &&
				   slots[j].stack_id == stack_id &&
				   slots[j].kind == kind))
		j = (j + 1) & (cap - 1);
	return &slots[j];
}

int mem_groups_add(struct mem_groups *g, uint32_t tgid, int32_t stack_id,
		   uint32_t kind, uint64_t bytes, uint64_t count, uint64_t ts_ns)
{
	struct mem_group *s;

	if (!count)
		count = 1;
	if ((g->n + 1) * 2 > g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct mem_group *slots = calloc(cap, sizeof(*slots));

		if (!slots)
			return -ENOMEM;
		for (size_t i = 0; i < g->cap; i++)
			if (g->slots[i].count)
				*group_slot(slots, cap, g->slots[i].tgid,
					    g->slots[i].stack_id,
					    g->slots[i].kind) = g->slots[i];
		free(g->slots);
		g->slots = slots;
		g->cap = cap;
	}
	s = group_slot(g->slots, g->cap, tgid, stack_id, kind);
	if (!s->count) {
		s->tgid = tgid;
		s->stack_id = stack_id;
		s->kind = kind;
		s->oldest_ns = ts_ns;
		g->n++;
	}
	s->bytes += bytes;
	s->count += count;
	if (ts_ns < s->oldest_ns)
		s->oldest_ns = ts_ns;
	return 0;
}

static int group_cmp(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	return (int)x->kind - (int)y->kind;
}

size_t mem_groups_top(const struct mem_groups *g, uint32_t tgid,
		      struct mem_group *out, size_t max, size_t *total_groups)
{
	struct mem_group *all;
	size_t n = 0;

	if (total_groups)
		*total_groups = 0;
	if (!g->n)
		return 0;
	all = malloc(g->n * sizeof(*all));
	if (!all)
		return 0;
	for (size_t i = 0; i < g->cap; i++)
		if (g->slots[i].count && g->slots[i].tgid == tgid)
			all[n++] = g->slots[i];
	qsort(all, n, sizeof(*all), group_cmp);
	if (total_groups)
		*total_groups = n;
	if (n > max)
		n = max;
	memcpy(out, all, n * sizeof(*out));
	free(all);
	return n;
}

static int group_cmp_tgid(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return group_cmp(a, b);
}

struct mem_group *mem_groups_sorted(const struct mem_groups *g, size_t *n)
{
	struct mem_group *all;
	size_t k = 0;

	*n = 0;
	if (!g->n || !(all = malloc(g->n * sizeof(*all))))
		return NULL;
	for (size_t i = 0; i < g->cap; i++)
		if (g->slots[i].count)
			all[k++] = g->slots[i];
	qsort(all, k, sizeof(*all), group_cmp_tgid);
	*n = k;
	return all;
}

const struct mem_group *mem_groups_find(const struct mem_group *sorted, size_t n,
					uint32_t tgid, size_t *count)
{
	size_t lo = 0, hi = n, end;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (sorted[mid].tgid < tgid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < n && sorted[end].tgid == tgid; end++)
		;
	*count = end - lo;
	return *count ? &sorted[lo] : NULL;
}

/* ------------------------------------------------------------------ */
/* Stack text                                                          */
/* ------------------------------------------------------------------ */

static const char *basename_of(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

void mem_format_frame(char *buf, size_t len, uint64_t addr, int sym_rc,
		      const struct nt_symbol *sym)
{
	const char *mod = sym ? basename_of(sym->module) : NULL;

	if (sym_rc == 0 && sym && sym->name) {
		if (mod)
			snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", sym->name,
				 sym->offset, mod);
		else
			snprintf(buf, len, "%s+0x%" PRIx64, sym->name, sym->offset);
	} else if (mod) {
		snprintf(buf, len, "%s+0x%" PRIx64, mod, sym->offset);
	} else {
		snprintf(buf, len, "0x%" PRIx64, addr);
	}
	for (char *p = buf; (p = strchr(p, ';')); p++)
		*p = ','; /* C++ names may hold one; frames are ';'-separated */
}

bool mem_frame_implausible(uint64_t addr, uint64_t prev_addr, int sym_rc,
			   const struct nt_symbol *sym)
{
	const char *mod = sym ? basename_of(sym->module) : NULL;

	if (!addr || addr == prev_addr || !mod)
		return true;
	return (sym_rc != 0 || !sym->name || !sym->name[0]) && strncmp(mod, "ld-", 3) == 0;
}

bool mem_frame_is_allocator(const char *name, const char *module,
			    const char *alloc_module)
{
	static const char *const wrappers[] = {
		"operator new", "operator delete", "_Znw", "_Zna", "__libc_",
	};

	if (module && alloc_module && strcmp(module, alloc_module) == 0)
		return true;
	if (!name)
		return false;
	for (size_t i = 0; i < NT_ARRAY_LEN(wrappers); i++)
		if (strncmp(name, wrappers[i], strlen(wrappers[i])) == 0)
			return true;
	return mem_fn_from_name(name) >= 0;
}

static uint64_t key_hash(uint32_t tgid, int32_t stack_id)
{
	return ((((uint64_t)tgid << 32) | (uint32_t)stack_id) *
		0x9e3779b97f4a7c15ull) >> 20;
}

void mem_symcache_init(struct mem_symcache *c)
{
	memset(c, 0, sizeof(*c));
}

void mem_symcache_free(struct mem_symcache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		free(c->slots[i].text);
		free(c->slots[i].function);
	}
	free(c->slots);
	memset(c, 0, sizeof(*c));
}

static struct mem_stack_text *sym_slot(struct mem_stack_text *slots, size_t cap,
				       uint32_t tgid, int32_t stack_id)
{
	size_t j = key_hash(tgid, stack_id) & (cap - 1);

	while (slots[j].text &&
	       !(slots[j].tgid == tgid && slots[j].stack_id == stack_id))
		j = (j + 1) & (cap - 1);
	return &slots[j];
}

const struct mem_stack_text *mem_symcache_get(const struct mem_symcache *c,
					      uint32_t tgid, int32_t stack_id)
{
	const struct mem_stack_text *s;

	if (!c->cap)
		return NULL;
	s = sym_slot(c->slots, c->cap, tgid, stack_id);
	return s->text ? s : NULL;
}

static int symcache_rehash(struct mem_symcache *c, size_t cap, uint32_t drop_tgid,
			   bool drop)
{
	struct mem_stack_text *slots = calloc(cap, sizeof(*slots));
	size_t n = 0;

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < c->cap; i++) {
		struct mem_stack_text *e = &c->slots[i];

		if (!e->text)
			continue;
		if (drop && e->tgid == drop_tgid) {
			free(e->text);
			free(e->function);
			continue;
		}
		*sym_slot(slots, cap, e->tgid, e->stack_id) = *e;
		n++;
	}
	free(c->slots);
	c->slots = slots;
	c->cap = cap;
	c->n = n;
	return 0;
}

int mem_symcache_put(struct mem_symcache *c, uint32_t tgid, int32_t stack_id,
		     const char *text, const char *function, bool incomplete)
{
	struct mem_stack_text *s;
	char *t, *f;

	if ((c->n + 1) * 2 > c->cap &&
	    symcache_rehash(c, c->cap ? c->cap * 2 : 64, 0, false))
		return -ENOMEM;
	t = strdup(text ? text : "");
	f = strdup(function ? function : "");
	if (!t || !f) {
		free(t);
		free(f);
		return -ENOMEM;
	}
	s = sym_slot(c->slots, c->cap, tgid, stack_id);
	if (s->text) {
		free(s->text);
		free(s->function);
	} else {
		c->n++;
	}
	s->tgid = tgid;
	s->stack_id = stack_id;
	s->text = t;
	s->function = f;
	s->incomplete = incomplete;
	return 0;
}

void mem_symcache_forget(struct mem_symcache *c, uint32_t tgid)
{
	if (c->cap)
		symcache_rehash(c, c->cap, tgid, true);
}

/* ------------------------------------------------------------------ */
/* Numbers and the report                                              */
/* ------------------------------------------------------------------ */

void mem_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024.0 && u < 3) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
}

int mem_parse_statm(const char *text, uint64_t *size, uint64_t *resident,
		    uint64_t *shared)
{
	unsigned long long a, b, c;

	if (!text || sscanf(text, "%llu %llu %llu", &a, &b, &c) != 3)
		return -EINVAL;
	*size = a;
	*resident = b;
	*shared = c;
	return 0;
}

#define APPEND(...)                                                            \
	do {                                                                   \
		int w_ = snprintf(buf + (used < len ? used : len), used < len ? len - used : 0, \
				  __VA_ARGS__);                                \
		if (w_ > 0)                                                    \
			used += (size_t)w_;                                    \
	} while (0)

size_t mem_format_report(char *buf, size_t len, const struct mem_report_proc *p,
			 const struct mem_report_line *lines, size_t n_lines,
			 size_t total_groups)
{
	size_t used = 0;
	char a[32], b[32], c[32];

	if (len)
		buf[0] = '\0';
	APPEND("pid %u (%s)%s:", p->pid, p->comm ? p->comm : "?",
	       p->final ? " exited" : "");
	if (p->heap) {
		mem_fmt_bytes(a, sizeof(a), p->live_bytes > 0 ? (uint64_t)p->live_bytes : 0);
		mem_fmt_bytes(b, sizeof(b), p->peak_bytes > 0 ? (uint64_t)p->peak_bytes : 0);
		APPEND(" heap %s in %" PRId64 " allocations outstanding (peak %s; %" PRIu64
		       " allocs, %" PRIu64 " frees)",
		       a, p->live_allocs, b, p->allocs, p->frees);
		if (p->mmap_live_bytes > 0) {
			mem_fmt_bytes(c, sizeof(c), (uint64_t)p->mmap_live_bytes);
			APPEND("; anon mmap %s", c);
		}
		APPEND(p->rss ? ";" : "");
	}
	if (p->rss) {
		mem_fmt_bytes(a, sizeof(a), p->rss_bytes);
		mem_fmt_bytes(b, sizeof(b), p->peak_rss_bytes);
		APPEND(" rss %s (peak %s)", a, b);
	}
	APPEND("\n");
	for (size_t i = 0; i < n_lines; i++) {
		const struct mem_group *g = lines[i].g;

		mem_fmt_bytes(a, sizeof(a), g->bytes);
		APPEND("  #%zu %s in %" PRIu64 " %s from %s: %s\n", i + 1, a, g->count,
		       g->kind == MEM_KIND_MMAP ? "mmaps" : "allocs",
		       lines[i].function && lines[i].function[0] ? lines[i].function : "?",
		       lines[i].text ? lines[i].text : "[stack not recorded]");
	}
	if (total_groups > n_lines)
		APPEND("  ... %zu more stacks\n", total_groups - n_lines);
	return used;
}
