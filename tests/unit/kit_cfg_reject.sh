#!/usr/bin/env bash
# kit_cfg_reject.sh CC INCLUDE_DIR: the config-key macros of
# include/ntcore/kit/cfg.h refuse, at compile time and with a message naming
# the key, a member of the wrong type, a default outside its bounds and
# swapped bounds (tests/unit/kit_cfg_reject.c, one case each).
set -uo pipefail
CC=$1 INC=$2
SRC=$(dirname "$0")/kit_cfg_reject.c
T=$(mktemp -d /tmp/nt-kit-cfg-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
compile() { "$CC" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$INC" -DCASE="$1" "$SRC" >"$T/err" 2>&1; }

compile 0 || { echo "FAIL case 0 (valid keys) does not compile:"; cat "$T/err"; fail=1; }
# The key's name, then the rest of the message (gcc quotes the name as \').
key=("" wrong_int small_int ok_int ok_int flag)
what=(""
  "must be of type int64_t"
  "must be of type int64_t"
  "default outside [min, max]"
  "default outside [min, max]"
  "must be of type const char *")
for n in 1 2 3 4 5; do
  if compile "$n"; then
    echo "FAIL case $n compiled"; fail=1
  elif ! grep -F "config key " "$T/err" | grep -F "${key[$n]}" | grep -qF "${what[$n]}"; then
    echo "FAIL case $n: no \"config key ${key[$n]} ... ${what[$n]}\" in:"; cat "$T/err"; fail=1
  else
    echo "ok case $n: ${key[$n]} ${what[$n]}"
  fi
done
exit $fail
