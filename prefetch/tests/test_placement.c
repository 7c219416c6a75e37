/*
 * test_placement.c - golden tests of helper placement (nvmpf_place): for
 * every scheme and each of its fallback paths, on the fake sysfs trees under
 * tests/sysfs/ and synthetic affinity masks, the exact effective scheme,
 * fallback bits, helper CPUs and stages, and the exact message the library
 * logs.  The cases are data, in tests/placement.cases (its header explains
 * the columns).  No thread is started, so 4-CPU topologies are tested on any
 * machine.  Run from prefetch/ (the paths are relative).
 *
 * Trees: smt-2x2 (2 cores x 2 SMT threads: {0,1} and {2,3}), vm-2x1 (2
 * CPUs, one thread per core, like the development VM), single (one CPU),
 * no-topology (only "online": topology unreadable) and missing (no tree).
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "internal.h"

#define CASES_FILE "tests/placement.cases"
#define MAXV 8

/* One placement and its expected outcome (a case of CASES_FILE). */
struct place_case {
	int line;                   /* in CASES_FILE */
	char tree[64];
	char allowed[64];
	int home;
	char scheme[8];
	int cpus[MAXV], ncpus;
	unsigned int nhelpers;
	char effective[8];
	unsigned int fallback;
	int cpu[MAXV], n;
	int stage[MAXV], nstage;
	int caller_cpu, smt_siblings, cpus_allowed;
	char message[400];
};

/* Scheme by name ("M1"); -1 if unknown. */
static int scheme_by_name(const char *name)
{
	for (int s = NVMPF_SCHEME_NONE; s <= NVMPF_SCHEME_CPUS; s++)
		if (strcmp(nvmpf_scheme_name((nvmpf_scheme)s), name) == 0)
			return s;
	return -1;
}

/* Fallback bits from "no_smt,cpu_not_allowed" ("-" = none); -1 if a name
 * is unknown. */
static long fallback_bits(char *names)
{
	long bits = 0;
	if (strcmp(names, "-") == 0)
		return 0;
	for (char *save, *t = strtok_r(names, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		unsigned int b = 1;
		while (nvmpf_fallback_name(b) &&
		       strcmp(t, nvmpf_fallback_name(b)) != 0)
			b <<= 1;
		if (!nvmpf_fallback_name(b))
			return -1;
		bits |= b;
	}
	return bits;
}

/* "3,-1,2" into v (at most MAXV); "-" is the empty list.  Count or -1. */
static int int_list(const char *s, int *v)
{
	int n = 0;
	if (strcmp(s, "-") == 0)
		return 0;
	for (const char *p = s; n < MAXV;) {
		char *end;
		long x = strtol(p, &end, 10);
		if (end == p)
			return -1;
		v[n++] = (int)x;
		if (*end == '\0')
			return n;
		if (*end != ',')
			return -1;
		p = end + 1;
	}
	return -1;
}

/* Read the next case from f; 1 = read, 0 = end of file, -1 = malformed. */
static int read_case(FILE *f, int *lineno, struct place_case *k)
{
	char line[512], cpus[64], fb[96], hcpus[64], stages[64], arrow[4];
	do {
		if (!fgets(line, sizeof line, f))
			return 0;
		(*lineno)++;
	} while (line[0] == '#' || line[0] == '\n');
	memset(k, 0, sizeof *k);
	k->line = *lineno;
	long bits;
	if (sscanf(line, "%63s %63s %d %7s %63s %u %3s %7s %95s %63s %63s %d %d %d",
		   k->tree, k->allowed, &k->home, k->scheme, cpus, &k->nhelpers,
		   arrow, k->effective, fb, hcpus, stages, &k->caller_cpu,
		   &k->smt_siblings, &k->cpus_allowed) != 14 ||
	    strcmp(arrow, "=>") != 0 || (k->ncpus = int_list(cpus, k->cpus)) < 0 ||
	    (k->n = int_list(hcpus, k->cpu)) < 0 ||
	    (k->nstage = int_list(stages, k->stage)) != k->n ||
	    (bits = fallback_bits(fb)) < 0 || !fgets(line, sizeof line, f))
		return -1;
	(*lineno)++;
	k->fallback = (unsigned int)bits;
	line[strcspn(line, "\n")] = '\0';
	const char *msg = line + strspn(line, " ");
	snprintf(k->message, sizeof k->message, "%s",
		 strcmp(msg, "(none)") == 0 ? "" : msg);
	return 1;
}

/* Place one case and compare every field; names the case on a mismatch. */
static void check_case(const struct place_case *k)
{
	char dir[128];
	snprintf(dir, sizeof dir, "tests/sysfs/%s", k->tree);
	nvmpf_config cfg;
	nvmpf_config_init(&cfg);
	cfg.scheme = (nvmpf_scheme)scheme_by_name(k->scheme);
	cfg.cpus = k->ncpus ? k->cpus : NULL;
	cfg.ncpus = (unsigned int)k->ncpus;
	cfg.nhelpers = k->nhelpers;
	cfg.sysfs_cpu_dir = dir;
	cpu_set_t allowed;
	struct nvmpf_placement pl;
	int failed = t_cur_failed;
	t_cur_failed = 0;
	CHECK(scheme_by_name(k->scheme) >= 0 && scheme_by_name(k->effective) >= 0);
	CHECK_EQ(nvmpf_parse_cpulist(k->allowed, &allowed), 0);
	CHECK_EQ(nvmpf_place(&cfg, &allowed, k->home, &pl), NVMPF_OK);
	CHECK_EQ(pl.effective, scheme_by_name(k->effective));
	CHECK_EQ(pl.fallback, k->fallback);
	CHECK_EQ(pl.nhelpers, k->n);
	for (int i = 0; i < k->n; i++) {
		CHECK_EQ(pl.cpu[i], k->cpu[i]);
		CHECK_EQ(pl.stage[i], k->stage[i]);
	}
	CHECK_EQ(pl.caller_cpu, k->caller_cpu);
	CHECK_EQ(pl.smt_siblings, k->smt_siblings);
	CHECK_EQ(pl.cpus_allowed, k->cpus_allowed);
	CHECK(strcmp(pl.message, k->message) == 0);
	if (t_cur_failed)
		fprintf(stderr, "    %s:%d: %s allowed %s home %d scheme %s\n"
			"    message: %s\n", CASES_FILE, k->line, k->tree,
			k->allowed, k->home, k->scheme, pl.message);
	t_cur_failed |= failed;
}

/* Run the cases of one tree (at least one must exist). */
static void check_tree(const char *tree)
{
	FILE *f = fopen(CASES_FILE, "r");
	if (!f) {
		perror(CASES_FILE);
		CHECK(f != NULL);
		return;
	}
	struct place_case k;
	int lineno = 0, n = 0, rc;
	while ((rc = read_case(f, &lineno, &k)) == 1)
		if (strcmp(k.tree, tree) == 0) {
			check_case(&k);
			n++;
		}
	if (rc < 0)
		fprintf(stderr, "    %s:%d: malformed case\n", CASES_FILE, lineno);
	CHECK_EQ(rc, 0);
	CHECK(n > 0);
	fclose(f);
}

static void test_place_smt_2x2(void) { check_tree("smt-2x2"); }
static void test_place_vm_2x1(void) { check_tree("vm-2x1"); }
static void test_place_single_cpu(void) { check_tree("single"); }
static void test_place_no_topology(void) { check_tree("no-topology"); }
static void test_place_missing_sysfs(void) { check_tree("missing"); }

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN(test_place_smt_2x2);
	RUN(test_place_vm_2x1);
	RUN(test_place_single_cpu);
	RUN(test_place_no_topology);
	RUN(test_place_missing_sysfs);
	return t_finish();
}
