/* SPDX-License-Identifier: MIT */
/*
 * mem probe: an allocator function's file offset and size from a
 * library's ELF symbol tables (libelf).
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

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
