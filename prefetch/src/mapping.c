/*
 * mapping.c - the library's vocabulary: the names of the mapping schemes,
 * the sysfs CPU-list syntax ("0-3,8,10-11") and the compact format of CPU
 * sets in messages.
 *
 * The lowest unit of the library: it calls nothing of the other units, so
 * placement (topology.c) and the pool (nvmprefetch.c) can both use it.
 */
#define _GNU_SOURCE
#include "mapping.h"

#include <stdio.h>

/* Public: "M1", "M2", "M3", "CPUS", "NONE" ("?" for an unknown value). */
const char *nvmpf_scheme_name(nvmpf_scheme scheme)
{
	switch (scheme) {
	case NVMPF_SCHEME_NONE: return "NONE";
	case NVMPF_SCHEME_M1: return "M1";
	case NVMPF_SCHEME_M2: return "M2";
	case NVMPF_SCHEME_M3: return "M3";
	case NVMPF_SCHEME_CPUS: return "CPUS";
	}
	return "?";
}

/* Parse a non-negative decimal number at *p, advancing *p; -1 if none. */
static long parse_num(const char **p)
{
	const char *s = *p;
	if (*s < '0' || *s > '9')
		return -1;
	long v = 0;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (*s - '0');
		if (v >= CPU_SETSIZE)
			return -1;
		s++;
	}
	*p = s;
	return v;
}

/* Parse sysfs list syntax; rejects malformed input and CPUs >= CPU_SETSIZE. */
int nvmpf_parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	const char *p = s;
	while (*p == ' ')
		p++;
	if (*p == '\0')
		return 0; /* empty list is valid (e.g. no offline CPUs) */
	for (;;) {
		long a = parse_num(&p);
		if (a < 0)
			return -1;
		long b = a;
		if (*p == '-') {
			p++;
			b = parse_num(&p);
			if (b < a)
				return -1;
		}
		for (long c = a; c <= b; c++)
			CPU_SET((int)c, set);
		if (*p == ',') {
			p++;
			continue;
		}
		while (*p == ' ' || *p == '\n')
			p++;
		return *p == '\0' ? 0 : -1;
	}
}

/* Runs of consecutive CPUs as "a-b", single CPUs as "a", comma-separated;
 * stops at the last run that fits in size. */
void nvmpf_format_cpuset(const cpu_set_t *set, char *buf, size_t size)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE && off + 1 < size; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		int n = (e > c) ? snprintf(buf + off, size - off, "%s%d-%d",
					   off ? "," : "", c, e)
				: snprintf(buf + off, size - off, "%s%d",
					   off ? "," : "", c);
		if (n < 0 || (size_t)n >= size - off)
			break;
		off += (size_t)n;
		c = e;
	}
	if (off == 0)
		snprintf(buf, size, "(none)");
}
