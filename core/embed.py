#!/usr/bin/env python3
"""embed.py INPUT OUTPUT SYMBOL: write INPUT as a C string constant."""
import sys

src, out, symbol = sys.argv[1:4]
data = open(src, 'rb').read()
with open(out, 'w') as f:
    f.write('/* generated from %s by core/embed.py */\n' % src.split('/')[-1])
    f.write('const char %s[] = {\n' % symbol)
    for i in range(0, len(data), 16):
        f.write(''.join('%d,' % b for b in data[i:i + 16]) + '\n')
    f.write('0};\n')
