/* The kernel types the x86 BPF programs compile against: Linux 6.18.44-fc-v669.
 * Regenerate with scripts/gen-vmlinux.sh (docs/arm64.md). */
#include "vmlinux_618.h"
