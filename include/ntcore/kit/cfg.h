/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: config keys declared with one macro per key.
 *
 * Each macro expands to one `struct nt_cfg_key` initializer (plugin.h) for
 * the member `m` of the plugin's config struct `S`; the key's name is the
 * member's name. What a hand-written entry gets wrong, these check at
 * compile time:
 *  - the member has the C type the core stores for that key type
 *    (int64_t for NT_KEY_INT, bool, double, const char *, struct nt_strlist,
 *    struct nt_cfg_array): a mismatch is a static assertion naming the key;
 *  - NT_KEY_INT takes its default and bounds as integers and asserts
 *    min <= default <= max (a swapped pair would otherwise read as "no
 *    bounds" to the core, which ignores bounds with min > max);
 *  - defaults are written as C literals and turned into the libconfig text
 *    the core parses (NT_KEY_STR(S, path, "/var/log/x", ...) gives
 *    "\"/var/log/x\""), so no key carries hand-escaped quotes.
 *
 *   struct hello_cfg { int64_t interval_ms; bool stacks; const char *mode; };
 *   static const char *const modes[] = { "auto", "raw_tp", NULL };
 *   static const struct nt_cfg_key hello_keys[] = {
 *       NT_KEY_INT(struct hello_cfg, interval_ms, 1000, 100, 3600000,
 *                  "how often the maps are read (ms)"),
 *       NT_KEY_BOOL(struct hello_cfg, stacks, true, "record user stacks"),
 *       NT_KEY_CHOICE(struct hello_cfg, mode, "auto", modes, "attach flavour"),
 *   };
 *
 * Integer defaults must be plain integer literals (or macros expanding to
 * one): "(1 << 20)" or "100ULL" are not libconfig integers. Integer bounds
 * are stored in the key's doubles, exact up to 2^53.
 */
#ifndef NTCORE_KIT_CFG_H
#define NTCORE_KIT_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../plugin.h"

#define NT_KIT_STR_(x) #x
/* Macro-expanded, then quoted: NT_KIT_STR(MAX_DEPTH) gives "32". */
#define NT_KIT_STR(x) NT_KIT_STR_(x)

/* 0, or a compile error saying `msg` when `cond` is false. */
#define NT_KIT_ASSERT0(cond, msg)                                              \
	(0 * sizeof(struct {                                                   \
		_Static_assert(cond, msg);                                     \
		int nt_kit_unused;                                             \
	}))

#define NT_KIT_MEMBER_IS(S, m, T)                                              \
	__builtin_types_compatible_p(__typeof__(((S *)0)->m), T)

/* offsetof(S, m) after checking the member's type is T. */
#define NT_KIT_OFFSET(S, m, T)                                                 \
	((uint32_t)(offsetof(S, m) +                                           \
		    NT_KIT_ASSERT0(NT_KIT_MEMBER_IS(S, m, T),                  \
				   "config key '" #m "' must be of type " #T)))

/* A bool key; def_ is true or false (quoted as written: stdbool.h's
 * `true` would expand to 1, which libconfig reads as an integer). */
#define NT_KEY_BOOL(S, m, def_, desc_)                                         \
	{ .key = #m, .type = NT_CFG_BOOL, .offset = NT_KIT_OFFSET(S, m, bool), \
	  .def = #def_, .min = 1.0, .max = 0.0, .desc = (desc_) }

/* An int64_t key bounded to [lo_, hi_], with lo_ <= def_ <= hi_. */
#define NT_KEY_INT(S, m, def_, lo_, hi_, desc_)                                \
	{ .key = #m, .type = NT_CFG_INT,                                       \
	  .offset = (uint32_t)(NT_KIT_OFFSET(S, m, int64_t) +                  \
			       NT_KIT_ASSERT0((lo_) <= (def_) && (def_) <= (hi_), \
					      "config key '" #m "': default "  \
					      "outside [min, max]")),          \
	  .def = NT_KIT_STR(def_), .min = (double)(lo_), .max = (double)(hi_), \
	  .desc = (desc_) }

/* A double key bounded to [lo_, hi_] (an integer in the file is accepted). */
#define NT_KEY_FLOAT(S, m, def_, lo_, hi_, desc_)                              \
	{ .key = #m, .type = NT_CFG_FLOAT,                                     \
	  .offset = NT_KIT_OFFSET(S, m, double), .def = NT_KIT_STR(def_),      \
	  .min = (lo_), .max = (hi_), .desc = (desc_) }

/* A string key; def_ is a C string literal ("" for empty). */
#define NT_KEY_STR(S, m, def_, desc_)                                          \
	{ .key = #m, .type = NT_CFG_STRING,                                    \
	  .offset = NT_KIT_OFFSET(S, m, const char *), .def = #def_,           \
	  .min = 1.0, .max = 0.0, .desc = (desc_) }

/* A string key that must be set in the config file (no default). */
#define NT_KEY_STR_REQUIRED(S, m, desc_)                                       \
	{ .key = #m, .type = NT_CFG_STRING,                                    \
	  .offset = NT_KIT_OFFSET(S, m, const char *), .def = NULL,            \
	  .min = 1.0, .max = 0.0, .desc = (desc_) }

/* A string key limited to choices_ (a NULL-terminated array). */
#define NT_KEY_CHOICE(S, m, def_, choices_, desc_)                             \
	{ .key = #m, .type = NT_CFG_STRING,                                    \
	  .offset = NT_KIT_OFFSET(S, m, const char *), .def = #def_,           \
	  .min = 1.0, .max = 0.0, .desc = (desc_), .choices = (choices_) }

/* A list of strings; def_ is its libconfig text: "[]", "[\"a\", \"b\"]". */
#define NT_KEY_STRLIST(S, m, def_, desc_)                                      \
	{ .key = #m, .type = NT_CFG_STRING_LIST,                               \
	  .offset = NT_KIT_OFFSET(S, m, struct nt_strlist), .def = (def_),     \
	  .min = 1.0, .max = 0.0, .desc = (desc_) }

/* A list of strings that must be set in the config file. */
#define NT_KEY_STRLIST_REQUIRED(S, m, desc_)                                   \
	{ .key = #m, .type = NT_CFG_STRING_LIST,                               \
	  .offset = NT_KIT_OFFSET(S, m, struct nt_strlist), .def = NULL,       \
	  .min = 1.0, .max = 0.0, .desc = (desc_) }

/* A list of groups, each validated against sub_ (an array of keys of
 * struct Sub) and stored as a struct Sub; empty by default. */
#define NT_KEY_GROUPS(S, m, Sub, sub_, desc_)                                  \
	{ .key = #m, .type = NT_CFG_GROUP_LIST,                                \
	  .offset = NT_KIT_OFFSET(S, m, struct nt_cfg_array), .def = NULL,     \
	  .min = 1.0, .max = 0.0, .desc = (desc_), .sub = (sub_),              \
	  .n_sub = (uint32_t)NT_ARRAY_LEN(sub_), .sub_size = sizeof(Sub) }

#endif /* NTCORE_KIT_CFG_H */
