/*
 * nvmpf-topology.c - what each prefetch mapping would do on this machine.
 *
 *   nvmpf-topology [--json] [--sysfs DIR] [--cpus LIST] [--home CPU]
 *                  [MAPPING...]
 *
 * For each MAPPING (default: m1 m2 m3; the syntax of nvmpf_parse_mapping:
 * m1, m2, m3 or a CPU list) it answers where libnvmprefetch would place the
 * helper threads for a process with this tool's CPU affinity (or --cpus),
 * whether the mapping runs as asked or falls back, and the message the
 * library would log.  The answer comes from the library's own code (the
 * placement nvmpf_create uses, without starting any thread), linked in from
 * the static archive.  README.md, "nvmpf-topology", describes the output.
 *
 * Exit status: 0; 2 for a malformed MAPPING, --cpus or --home or a bad
 * option (the reason on stderr); 1 if the placement or the output failed.
 */
#define _GNU_SOURCE
#include "topology.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "nvmpf-topology"

/* One MAPPING argument: what it asks for and where it would run. */
struct answer {
	const char *text;               /* as given */
	nvmpf_scheme requested;
	int cpus[NVMPF_MAX_HELPERS];    /* its CPU list, if any */
	int ncpus;
	struct nvmpf_placement pl;
};

/* Command-line settings. */
struct options {
	bool json;
	const char *sysfs;              /* NULL: the library's default */
	bool have_cpus;
	cpu_set_t cpus;                 /* --cpus */
	bool have_home;
	int home;                       /* --home */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--json] [--sysfs DIR] [--cpus LIST] "
		"[--home CPU] [MAPPING...]\n"
		"  What libnvmprefetch would do with each MAPPING (m1, m2, m3 or a CPU\n"
		"  list such as 2,3 or 4-7; default: m1 m2 m3) for a process with this\n"
		"  tool's CPU affinity.\n"
		"  --json       print JSON (see prefetch/README.md)\n"
		"  --sysfs DIR  read the topology from DIR instead of "
		"/sys/devices/system/cpu\n"
		"  --cpus LIST  the process's CPU affinity instead of this tool's\n"
		"  --home CPU   the computation thread's CPU (-1: unknown); default:\n"
		"               the only CPU of the affinity, else the CPU this tool\n"
		"               runs on, or the lowest CPU of --cpus if that is not one\n"
		"               of them\n");
}

/* A whole decimal number in [lo, hi] (a leading '-' allowed); false if the
 * text is anything else. */
static bool parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi ||
	    isspace((unsigned char)*s))
		return false;
	*out = (int)v;
	return true;
}

/* Parse the options into *o; the MAPPING arguments start at *first.
 * Returns 0, or the exit status after printing what is wrong. */
static int parse_options(int argc, char **argv, struct options *o, int *first)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "sysfs", required_argument, NULL, 's' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "home", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	memset(o, 0, sizeof *o);
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			o->json = true;
			break;
		case 's':
			o->sysfs = optarg;
			break;
		case 'c':
			o->have_cpus = true;
			if (nvmpf_parse_cpulist(optarg, &o->cpus) != 0 ||
			    CPU_COUNT(&o->cpus) == 0) {
				fprintf(stderr, PROG ": invalid --cpus \"%s\": "
					"expected a list of CPU numbers below %d "
					"such as \"1\", \"2,3\" or \"4-7\"\n",
					optarg, CPU_SETSIZE);
				return 2;
			}
			break;
		case 'H':
			o->have_home = true;
			if (!parse_int(optarg, -1, CPU_SETSIZE - 1, &o->home)) {
				fprintf(stderr, PROG ": invalid --home \"%s\": "
					"expected a CPU number below %d or -1\n",
					optarg, CPU_SETSIZE);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			fprintf(stderr, PROG ": unknown option or missing "
				"argument: %s\n", argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	*first = optind;
	return 0;
}

/*
 * The home CPU by the library's rule for an affinity mask (nvmpf_home_cpu:
 * its only CPU, else the CPU we run on); with --cpus, a CPU we do not run
 * on is replaced by the lowest CPU of the mask, where a process with that
 * mask could run.
 */
static int default_home(const struct options *o, const cpu_set_t *allowed)
{
	int pinned;
	int home = nvmpf_home_cpu(allowed, &pinned);
	if (o->have_cpus && (home < 0 || home >= CPU_SETSIZE ||
			     !CPU_ISSET(home, allowed)))
		for (home = 0; home < CPU_SETSIZE; home++)
			if (CPU_ISSET(home, allowed))
				break;
	return home;
}

/* Would the library run the mapping as asked?  Same scheme, and no
 * fallback but an unreadable topology. */
static bool available(const struct answer *a)
{
	return a->pl.effective == a->requested &&
	       !(a->pl.fallback & ~(unsigned int)NVMPF_FB_NO_TOPOLOGY);
}

/* "m1", "m2", "m3", "cpus", "none". */
static const char *lower_name(nvmpf_scheme s)
{
	static const char *const names[] = { "none", "m1", "m2", "m3", "cpus" };
	return (unsigned int)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* ---- JSON ---- */

/* s as a JSON string literal. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* n integers as a JSON array. */
static void json_ints(FILE *f, const int *v, unsigned int n)
{
	fputc('[', f);
	for (unsigned int i = 0; i < n; i++)
		fprintf(f, "%s%d", i ? ", " : "", v[i]);
	fputc(']', f);
}

/* The fallback bits as a JSON array of names. */
static void json_fallback(FILE *f, unsigned int bits)
{
	fputc('[', f);
	const char *sep = "";
	for (unsigned int b = 1; nvmpf_fallback_name(b); b <<= 1)
		if (bits & b) {
			fprintf(f, "%s\"%s\"", sep, nvmpf_fallback_name(b));
			sep = ", ";
		}
	fputc(']', f);
}

/* One mapping's object. */
static void json_answer(FILE *f, const struct answer *a)
{
	const struct nvmpf_placement *pl = &a->pl;
	fprintf(f, "{\"requested\": \"%s\", \"effective\": \"%s\", "
		"\"available\": %s, \"helpers\": %u, \"helper_cpus\": ",
		lower_name(a->requested), lower_name(pl->effective),
		available(a) ? "true" : "false", pl->nhelpers);
	json_ints(f, pl->cpu, pl->nhelpers);
	fputs(", \"fallback\": ", f);
	json_fallback(f, pl->fallback);
	fputs(", \"message\": ", f);
	json_str(f, pl->message);
	fputs(", \"helper_stages\": ", f);
	json_ints(f, pl->stage, pl->nhelpers);
	fputs(", \"requested_cpus\": ", f);
	json_ints(f, a->cpus, (unsigned int)a->ncpus);
	fputc('}', f);
}

/* The whole answer; the machine facts come from the first placement (they
 * are the same for every mapping). */
static void print_json(FILE *f, const struct answer *a, int n)
{
	const struct nvmpf_placement *pl = &a[0].pl;
	char usable[512];
	nvmpf_format_cpuset(&pl->usable, usable, sizeof usable);
	fputs("{\"usable_cpus\": ", f);
	json_str(f, usable);
	fprintf(f, ", \"topology_known\": %s, \"note\": ",
		pl->fallback & NVMPF_FB_NO_TOPOLOGY ? "false" : "true");
	json_str(f, pl->topology_note);
	fprintf(f, ", \"smt\": %s, \"physical_cores\": %d, \"home_cpu\": %d,\n"
		" \"mappings\": {\n", pl->smt_cores > 0 ? "true" : "false",
		pl->physical_cores, pl->caller_cpu);
	for (int i = 0; i < n; i++) {
		fputs("   ", f);
		json_str(f, a[i].text);
		fputs(": ", f);
		json_answer(f, &a[i]);
		fputs(i + 1 < n ? ",\n" : "\n", f);
	}
	fputs(" }}\n", f);
}

/* ---- text ---- */

/* The helpers' CPUs: "CPU 1, CPU 3", "unpinned", M3: "CPU 2 (stage 1),
 * CPU 1 (stage 2)". */
static void print_helpers(FILE *f, const struct nvmpf_placement *pl)
{
	for (unsigned int i = 0; i < pl->nhelpers; i++) {
		fputs(i ? ", " : "", f);
		if (pl->cpu[i] < 0)
			fputs("unpinned", f);
		else
			fprintf(f, "CPU %d", pl->cpu[i]);
		if (pl->effective == NVMPF_SCHEME_M3)
			fprintf(f, " (stage %d)", pl->stage[i]);
	}
}

/* The same facts for people: the machine, then a line per mapping and the
 * library's message under it. */
static void print_text(FILE *f, const struct answer *a, int n)
{
	const struct nvmpf_placement *pl = &a[0].pl;
	char usable[512];
	nvmpf_format_cpuset(&pl->usable, usable, sizeof usable);
	fprintf(f, "usable CPUs %s: %d physical core%s, %s; home CPU ", usable,
		pl->physical_cores, pl->physical_cores == 1 ? "" : "s",
		pl->smt_cores > 0 ? "with SMT siblings" : "no SMT siblings");
	if (pl->caller_cpu >= 0)
		fprintf(f, "%d\n", pl->caller_cpu);
	else
		fputs("unknown\n", f);
	if (pl->topology_note[0])
		fprintf(f, "topology unknown: %s\n", pl->topology_note);
	for (int i = 0; i < n; i++) {
		const struct nvmpf_placement *p = &a[i].pl;
		fprintf(f, "%-6s %s %s, %u helper%s: ", a[i].text,
			available(&a[i]) ? "available:" : "not available, runs as",
			nvmpf_scheme_name(p->effective), p->nhelpers,
			p->nhelpers == 1 ? "" : "s");
		print_helpers(f, p);
		fputc('\n', f);
		if (p->message[0])
			fprintf(f, "       %s\n", p->message);
	}
}

/* The default and the given MAPPINGs, without repeats (JSON keys). */
static int collect_mappings(int argc, char **argv, int first,
			    struct answer **out, int *nout)
{
	static char *defaults[] = { "m1", "m2", "m3" };
	char **texts = first < argc ? argv + first : defaults;
	int ntexts = first < argc ? argc - first : 3;
	struct answer *a = calloc((size_t)ntexts, sizeof *a);
	if (!a) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	int n = 0;
	for (int i = 0; i < ntexts; i++) {
		bool seen = false;
		for (int j = 0; j < n && !seen; j++)
			seen = strcmp(a[j].text, texts[i]) == 0;
		if (seen)
			continue;
		char err[200];
		a[n].text = texts[i];
		if (nvmpf_parse_mapping(texts[i], &a[n].requested, a[n].cpus,
					NVMPF_MAX_HELPERS, &a[n].ncpus, err,
					sizeof err) != NVMPF_OK) {
			fprintf(stderr, PROG ": invalid mapping \"%s\": %s\n",
				texts[i], err);
			free(a);
			return 2;
		}
		n++;
	}
	*out = a;
	*nout = n;
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	int first, rc = parse_options(argc, argv, &o, &first);
	if (rc)
		return rc;
	struct answer *a;
	int n;
	if ((rc = collect_mappings(argc, argv, first, &a, &n)) != 0)
		return rc;

	cpu_set_t allowed;
	if (o.have_cpus)
		allowed = o.cpus;
	else
		nvmpf_caller_affinity(&allowed);
	int home = o.have_home ? o.home : default_home(&o, &allowed);

	for (int i = 0; i < n; i++) {
		nvmpf_config cfg;
		nvmpf_config_init(&cfg);
		cfg.scheme = a[i].requested;
		cfg.cpus = a[i].ncpus ? a[i].cpus : NULL;
		cfg.ncpus = (unsigned int)a[i].ncpus;
		cfg.sysfs_cpu_dir = o.sysfs;
		if ((rc = nvmpf_place(&cfg, &allowed, home, &a[i].pl)) != NVMPF_OK) {
			fprintf(stderr, PROG ": %s\n", nvmpf_strerror(rc));
			free(a);
			return 1;
		}
	}
	if (o.json)
		print_json(stdout, a, n);
	else
		print_text(stdout, a, n);
	free(a);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": cannot write the answer\n");
		return 1;
	}
	return 0;
}
