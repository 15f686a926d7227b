#!/usr/bin/env python3
"""patch_version.py IN OUT HEX: copy a CPython executable and set its
Py_Version symbol (3.11+, in .rodata) to HEX, e.g. 0x030e00f0 (3.14), so
the copy runs as before but says it is a version the probe does not know."""
import struct, sys

src, dst, ver = sys.argv[1], sys.argv[2], int(sys.argv[3], 16)
data = bytearray(open(src, "rb").read())
if data[:4] != b"\x7fELF" or data[4] != 2:
    sys.exit("not a 64-bit ELF file")
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
loads = []
for i in range(phnum):
    p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if p_type == 1:
        loads.append((p_vaddr, p_offset, p_filesz))
addr = None
for (name, typ, flags, a, off, size, link, info, align, entsize) in secs:
    if typ not in (2, 11) or not entsize:  # SYMTAB, DYNSYM
        continue
    stroff = secs[link][4]
    for k in range(size // entsize):
        st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, off + k * entsize)
        end = data.index(b"\0", stroff + st_name)
        if data[stroff + st_name:end] == b"Py_Version" and st_shndx:
            addr = st_value
            break
    if addr:
        break
if not addr:
    sys.exit("no Py_Version symbol in " + src)
for vaddr, off, filesz in loads:
    if vaddr <= addr < vaddr + filesz:
        pos = off + addr - vaddr
        old, = struct.unpack_from("<I", data, pos)
        struct.pack_into("<I", data, pos, ver)
        open(dst, "wb").write(data)
        print("Py_Version 0x%08x -> 0x%08x at file offset 0x%x" % (old, ver, pos))
        break
else:
    sys.exit("Py_Version not in a loaded segment")
