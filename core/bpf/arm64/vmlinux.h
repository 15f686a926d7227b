/* The kernel types the arm64 BPF programs compile against: Linux 6.1.0-50-arm64.
 * Regenerate with scripts/gen-vmlinux.sh (docs/arm64.md). */
#include "vmlinux_601.h"
