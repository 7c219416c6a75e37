/*
 * mapping.h - the library's private vocabulary (mapping.c): CPU lists into
 * CPU sets, fallback reason names, and the compact CPU-set format used in
 * messages.  The scheme names and the mapping parser are public
 * (nvmpf_scheme_name(), nvmpf_parse_mapping() in nvmprefetch.h).
 *
 * The lowest unit of the library: it depends on nothing but the public
 * header; topology.c and nvmprefetch.c build on it.  Not installed.
 */
#ifndef NVMPF_MAPPING_H
#define NVMPF_MAPPING_H

#include "nvmprefetch.h"

#include <sched.h>
#include <stddef.h>

/* Library-internal symbols: not exported from the shared library. */
#define NVMPF_HIDDEN __attribute__((visibility("hidden")))

/* Parse a CPU list ("0-3,8,10-11"; blanks around items allowed, CPUs below
 * CPU_SETSIZE, any number of them) into *set.  0 or -1 (malformed). */
NVMPF_HIDDEN int nvmpf_parse_cpulist(const char *s, cpu_set_t *set);

/* Name of one fallback bit: "no_smt", "no_other_core", "cpu_not_allowed",
 * "no_topology", "pin_failed" (NVMPF_FB_* without the prefix, lower case);
 * NULL if bit is not exactly one known bit. */
NVMPF_HIDDEN const char *nvmpf_fallback_name(unsigned int bit);

/* Format a CPU set as a compact list ("0-3,8"; "(none)" when empty). */
NVMPF_HIDDEN void nvmpf_format_cpuset(const cpu_set_t *set, char *buf,
				      size_t size);

#endif /* NVMPF_MAPPING_H */
