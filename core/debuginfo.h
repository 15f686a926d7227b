/* SPDX-License-Identifier: MIT */
/*
 * Finding a module's separate debug file on this machine only: libdwfl's
 * standard search, less its last resort. elfutils 0.188 then asks
 * debuginfod, whose client library libdw dlopens with libcurl, GnuTLS,
 * OpenSSL, Kerberos and LDAP: 5.5 MB of ntcore's RSS from the first
 * library without a local debug file on, to fetch nothing (ntcore sets no
 * DEBUGINFOD_URLS) or, where the host sets them, to download debug files
 * over the network from inside a tracing daemon's event loop.
 */
#ifndef NTCORE_CORE_DEBUGINFO_H
#define NTCORE_CORE_DEBUGINFO_H

#include <elfutils/libdwfl.h>

/* A Dwfl_Callbacks.find_debuginfo: by build id (/usr/lib/debug/.build-id,
 * libdwfl's own), then the .gnu_debuglink name next to the file, in its
 * .debug folder and under /usr/lib/debug, a candidate kept only when its
 * build id is the module's. A module without a build id goes to
 * dwfl_standard_find_debuginfo, which asks debuginfod only by build id. */
int nt_find_debuginfo_local(Dwfl_Module *mod, void **userdata,
			    const char *modname, Dwarf_Addr base,
			    const char *file_name, const char *debuglink_file,
			    GElf_Word debuglink_crc, char **debuginfo_file_name);

#endif
