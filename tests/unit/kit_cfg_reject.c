/* SPDX-License-Identifier: MIT */
/*
 * Config-key macros that must not compile (tests/unit/kit_cfg_reject.sh
 * builds this with -DCASE=1..4 and expects each static assertion, and with
 * -DCASE=0 expects success).
 */
#include "ntcore/kit/cfg.h"

struct cfg {
	int64_t ok_int;
	long long wrong_int;
	int small_int;
	bool flag;
	const char *text;
};

static const struct nt_cfg_key keys[] = {
	NT_KEY_INT(struct cfg, ok_int, 5, 1, 10, "fine"),
#if CASE == 1 /* an int key on a long long member */
	NT_KEY_INT(struct cfg, wrong_int, 5, 1, 10, "wrong type"),
#elif CASE == 2 /* an int key on an int member */
	NT_KEY_INT(struct cfg, small_int, 5, 1, 10, "wrong type"),
#elif CASE == 3 /* the default outside its bounds */
	NT_KEY_INT(struct cfg, ok_int, 50, 1, 10, "out of bounds"),
#elif CASE == 4 /* swapped bounds, which the core would read as none */
	NT_KEY_INT(struct cfg, ok_int, 5, 10, 1, "swapped"),
#elif CASE == 5 /* a string key on a bool */
	NT_KEY_STR(struct cfg, flag, "x", "wrong type"),
#endif
};

const struct nt_cfg_key *kit_cfg_reject_keys(void);
const struct nt_cfg_key *kit_cfg_reject_keys(void)
{
	return keys;
}
