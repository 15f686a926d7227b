/* SPDX-License-Identifier: MIT */
/* A module's separate debug file, looked up locally only (debuginfo.h). */
#include "debuginfo.h"

#include <fcntl.h>
#include <gelf.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* True when the ELF file open on `fd` carries the GNU build id `id`. */
static bool has_build_id(int fd, const unsigned char *id, int id_len)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	bool same = false;

	while (elf && !same && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		while (!same &&
		       (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0)
			same = nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			       !memcmp((char *)data->d_buf + name_off, "GNU", 4) &&
			       nh.n_descsz == (GElf_Word)id_len &&
			       !memcmp((char *)data->d_buf + desc_off, id, (size_t)id_len);
	}
	if (elf)
		elf_end(elf);
	return same;
}

/* The debuglink name beside the file, in its .debug folder, under
 * /usr/lib/debug (gdb's and libdwfl's places). */
static int by_debuglink(const char *file_name, const char *link,
			const unsigned char *id, int id_len, char **found)
{
	char dir_buf[PATH_MAX], path[PATH_MAX];
	static const char *const forms[] = {"%s/%s", "%s/.debug/%s",
					    "/usr/lib/debug%s/%s"};

	if (snprintf(dir_buf, sizeof(dir_buf), "%s", file_name) >= (int)sizeof(dir_buf))
		return -1;
	const char *dir = dirname(dir_buf);
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		if (snprintf(path, sizeof(path), forms[i], dir, link) >= (int)sizeof(path))
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (strcmp(path, file_name) && has_build_id(fd, id, id_len)) {
			*found = strdup(path);
			return fd;
		}
		close(fd);
	}
	return -1;
}

int nt_find_debuginfo_local(Dwfl_Module *mod, void **userdata,
			    const char *modname, Dwarf_Addr base,
			    const char *file_name, const char *debuglink_file,
			    GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *id = NULL;
	GElf_Addr id_vaddr;
	int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);

	if (id_len <= 0)
		return dwfl_standard_find_debuginfo(mod, userdata, modname, base,
						    file_name, debuglink_file,
						    debuglink_crc, debuginfo_file_name);
	int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
					      file_name, debuglink_file,
					      debuglink_crc, debuginfo_file_name);
	if (fd >= 0 || !file_name || !debuglink_file)
		return fd;
	return by_debuglink(file_name, debuglink_file, id, id_len,
			    debuginfo_file_name);
}
