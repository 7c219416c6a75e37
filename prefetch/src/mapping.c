/*
 * mapping.c - the library's vocabulary: the names of the mapping schemes and
 * fallback reasons, the one parser of CPU lists ("0-3,8,10-11": sysfs files,
 * and the mapping syntax "m1 | m2 | m3 | CPU list" of nvmpf_parse_mapping,
 * which PostgreSQL's nvm_prefetch_mapping uses), and the compact format of
 * CPU sets in messages.
 *
 * The lowest unit of the library: it calls nothing of the other units, so
 * placement (topology.c) and the pool (nvmprefetch.c) can both use it.
 */
#define _GNU_SOURCE
#include "mapping.h"

#include <stdbool.h>
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

/* ------------------------------------------------------------------ */
/* CPU lists: "3", "2,3", "4-7, 9"                                      */
/* ------------------------------------------------------------------ */

/* What can be wrong with a mapping or a CPU list. */
enum list_error {
	LIST_OK = 0,
	LIST_SYNTAX,    /* not m1/m2/m3, not a CPU number where one must be */
	LIST_UPPER,     /* "4-" */
	LIST_RANGE,     /* descending range, or a CPU >= CPU_SETSIZE */
	LIST_COUNT      /* more CPUs than the caller can take */
};

/* Scanner state of a CPU list: items separated by commas, each a CPU number
 * or an ascending range "lo-hi", with blanks allowed around items. */
struct list_scan {
	const char *p;          /* after the last item and its blanks */
	bool started;           /* an item was scanned */
	long lo, hi;            /* the last item */
	enum list_error error;
};

/* Blanks as isspace() in the C locale, independent of the caller's. */
static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	       c == '\r';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const char *skip_blanks(const char *p)
{
	while (is_blank(*p))
		p++;
	return p;
}

/* Decimal number at *p (a digit), advancing *p past all its digits; values
 * of CPU_SETSIZE and above read as CPU_SETSIZE (no overflow). */
static long scan_number(const char **p)
{
	long v = 0;
	for (; is_digit(**p); (*p)++) {
		v = v * 10 + (**p - '0');
		if (v > CPU_SETSIZE)
			v = CPU_SETSIZE;
	}
	return v;
}

/* Record an error; false, for "return fail(...)". */
static bool fail(struct list_scan *sc, enum list_error e)
{
	sc->error = e;
	return false;
}

/*
 * Scan the next item of the list into sc->lo..sc->hi.  True for an item;
 * false at the end of the list or on an error (sc->error).  What follows an
 * item is checked when the next one is asked for, so a list is judged from
 * left to right: the first thing wrong is the one reported.
 */
static bool scan_next(struct list_scan *sc)
{
	const char *p = sc->p;
	if (sc->started) {
		if (*p == '\0')
			return false;
		if (*p != ',')
			return fail(sc, LIST_SYNTAX);
		p++;
	}
	sc->started = true;
	p = skip_blanks(p);
	if (!is_digit(*p))
		return fail(sc, LIST_SYNTAX);
	sc->lo = sc->hi = scan_number(&p);
	if (*p == '-') {
		p++;
		if (!is_digit(*p))
			return fail(sc, LIST_UPPER);
		sc->hi = scan_number(&p);
	}
	if (sc->lo > sc->hi || sc->hi >= CPU_SETSIZE)
		return fail(sc, LIST_RANGE);
	sc->p = skip_blanks(p);
	return true;
}

/* Parse a CPU list into *set (sysfs files, nvmpf-topology --cpus): the
 * syntax of nvmpf_parse_mapping's lists without a length limit; a list of
 * blanks only is the empty set. */
int nvmpf_parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	if (*skip_blanks(s) == '\0')
		return 0; /* empty list is valid (e.g. no offline CPUs) */
	struct list_scan sc = { .p = s };
	while (scan_next(&sc))
		for (long c = sc.lo; c <= sc.hi; c++)
			CPU_SET((int)c, set);
	return sc.error ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Mappings: "m1" | "m2" | "m3" | CPU list                              */
/* ------------------------------------------------------------------ */

/* "m1", "m2", "m3" in any case: that scheme; else NVMPF_SCHEME_NONE. */
static nvmpf_scheme scheme_keyword(const char *s)
{
	if ((s[0] == 'm' || s[0] == 'M') && s[1] >= '1' && s[1] <= '3' &&
	    s[2] == '\0')
		return (nvmpf_scheme)(NVMPF_SCHEME_M1 + (s[1] - '1'));
	return NVMPF_SCHEME_NONE;
}

/* The text of an error (the wording of PostgreSQL's nvm_prefetch_mapping
 * check hook, which this parser replaces). */
static void list_error_text(enum list_error e, int limit, char *err,
			    size_t errlen)
{
	if (!err || errlen == 0)
		return;
	switch (e) {
	case LIST_OK:
		break;
	case LIST_SYNTAX:
		snprintf(err, errlen, "expected m1, m2, m3 or a list of CPU "
			 "numbers such as \"1\", \"2,3\" or \"4-7\"");
		break;
	case LIST_UPPER:
		snprintf(err, errlen, "a CPU range needs an upper bound, as in "
			 "\"4-7\"");
		break;
	case LIST_RANGE:
		snprintf(err, errlen, "CPU numbers must be ascending within a "
			 "range and below %d", CPU_SETSIZE);
		break;
	case LIST_COUNT:
		snprintf(err, errlen, "at most %d helper CPUs can be listed",
			 limit);
		break;
	}
}

/* Public: see nvmprefetch.h.  The keywords are matched on the whole text
 * (no blanks); anything else is read as a CPU list. */
int nvmpf_parse_mapping(const char *text, nvmpf_scheme *scheme, int *cpus,
			int maxcpus, int *ncpus, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!scheme || !ncpus) {
		if (err && errlen)
			snprintf(err, errlen, "invalid argument");
		return NVMPF_EINVAL;
	}
	*scheme = NVMPF_SCHEME_NONE;
	*ncpus = 0;
	if (!text)
		text = "";
	nvmpf_scheme kw = scheme_keyword(text);
	if (kw != NVMPF_SCHEME_NONE) {
		*scheme = kw;
		return NVMPF_OK;
	}

	int limit = NVMPF_MAX_HELPERS;
	if (cpus && maxcpus < limit)
		limit = maxcpus > 0 ? maxcpus : 0;
	struct list_scan sc = { .p = text };
	int n = 0;
	while (!sc.error && scan_next(&sc))
		for (long c = sc.lo; c <= sc.hi && !sc.error; c++) {
			if (n >= limit) {
				fail(&sc, LIST_COUNT);
				break;
			}
			if (cpus)
				cpus[n] = (int)c;
			n++;
		}
	if (sc.error) {
		list_error_text(sc.error, limit, err, errlen);
		return NVMPF_EINVAL;
	}
	*scheme = NVMPF_SCHEME_CPUS;
	*ncpus = n;
	return NVMPF_OK;
}

/* ------------------------------------------------------------------ */
/* Names and formats for messages                                       */
/* ------------------------------------------------------------------ */

/* "no_smt", "no_other_core", "cpu_not_allowed", "no_topology",
 * "pin_failed" for one NVMPF_FB_* bit; NULL for anything else. */
const char *nvmpf_fallback_name(unsigned int bit)
{
	switch (bit) {
	case NVMPF_FB_NO_SMT: return "no_smt";
	case NVMPF_FB_NO_OTHER_CORE: return "no_other_core";
	case NVMPF_FB_CPU_NOT_ALLOWED: return "cpu_not_allowed";
	case NVMPF_FB_NO_TOPOLOGY: return "no_topology";
	case NVMPF_FB_PIN_FAILED: return "pin_failed";
	}
	return NULL;
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
