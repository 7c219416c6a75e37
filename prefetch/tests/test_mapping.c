/*
 * test_mapping.c - tests of the library's vocabulary (mapping.c): the
 * mapping parser nvmpf_parse_mapping and the CPU-list parser it shares with
 * the sysfs reader, over the cases in tests/mapping.cases (every accepted
 * form and every error text), the parser's argument handling, and the
 * fallback names.
 * Run from prefetch/ (the cases file path is relative).
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "mapping.h"

#include <stdbool.h>

#define CASES_FILE "tests/mapping.cases"

/* Undo C escapes (\t \n \" \\) of a quoted TEXT in place up to the closing
 * quote; returns the character after it, NULL if there is none. */
static char *unquote(char *s)
{
	char *out = s;
	for (char *p = s; *p; p++) {
		if (*p == '"') {
			*out = '\0';
			return p + 1;
		}
		if (*p == '\\' && p[1]) {
			p++;
			*out++ = *p == 't' ? '\t' : *p == 'n' ? '\n' : *p;
		} else {
			*out++ = *p;
		}
	}
	return NULL;
}

/*
 * What TEXT gives, in the RESULT syntax of CASES_FILE: for a mapping
 * (opts: "max=N" / "max=null") "SCHEME CPU,..." or "error: MESSAGE"; for
 * a CPU list (cpulist) the set as messages print it, or "error".
 */
static void parse_text(const char *text, const char *opts, bool cpulist,
		       char *got, size_t size)
{
	if (cpulist) {
		cpu_set_t set;
		if (nvmpf_parse_cpulist(text, &set) == 0)
			nvmpf_format_cpuset(&set, got, size);
		else
			snprintf(got, size, "error");
		return;
	}
	int cpus[NVMPF_MAX_HELPERS], maxcpus = NVMPF_MAX_HELPERS;
	bool null_cpus = strstr(opts, "max=null") != NULL;
	const char *max = strstr(opts, "max=");
	if (max && !null_cpus)
		maxcpus = atoi(max + 4);
	nvmpf_scheme scheme;
	int ncpus = -1;
	char err[200] = "x";
	int rc = nvmpf_parse_mapping(text, &scheme, null_cpus ? NULL : cpus,
				     maxcpus, &ncpus, err, sizeof err);
	if (rc != NVMPF_OK) {
		CHECK(scheme == NVMPF_SCHEME_NONE && ncpus == 0);
		snprintf(got, size, "error: %s", err);
		return;
	}
	CHECK_EQ(err[0], '\0');
	size_t off = (size_t)snprintf(got, size, "%s", nvmpf_scheme_name(scheme));
	for (int i = 0; i < ncpus && !null_cpus; i++)
		off += (size_t)snprintf(got + off, size - off, "%s%d",
					i ? "," : " ", cpus[i]);
}

/* Check one case line: [cpulist] "TEXT" [OPTIONS] => RESULT. */
static void check_line(int lineno, char *line)
{
	bool cpulist = strncmp(line, "cpulist ", 8) == 0;
	char *text = strchr(line, '"');
	char *rest = text ? unquote(text + 1) : NULL;
	char *arrow = rest ? strstr(rest, "=>") : NULL;
	if (!arrow) {
		fprintf(stderr, "    %s:%d: malformed case\n", CASES_FILE, lineno);
		CHECK(arrow != NULL);
		return;
	}
	text++;
	*arrow = '\0';
	char *want = arrow + 2 + strspn(arrow + 2, " ");
	want[strcspn(want, "\n")] = '\0';
	char got[400];
	int failed = t_cur_failed;
	t_cur_failed = 0;
	parse_text(text, rest, cpulist, got, sizeof got);
	CHECK(strcmp(got, want) == 0);
	if (t_cur_failed)
		fprintf(stderr, "    %s:%d: \"%s\": got %s\n", CASES_FILE, lineno,
			text, got);
	t_cur_failed |= failed;
}

/* Every case of CASES_FILE. */
static void test_mapping_cases(void)
{
	FILE *f = fopen(CASES_FILE, "r");
	if (!f) {
		perror(CASES_FILE);
		CHECK(f != NULL);
		return;
	}
	char line[512];
	int lineno = 0, n = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (line[0] == '"' || strncmp(line, "cpulist ", 8) == 0) {
			check_line(lineno, line);
			n++;
		}
	}
	fclose(f);
	CHECK(n >= 40);
}

/* Arguments: NULL outputs, NULL text, no error buffer, a short one. */
static void test_mapping_arguments(void)
{
	nvmpf_scheme s = NVMPF_SCHEME_M1;
	int cpus[4], n = 7;
	char err[200];
	CHECK_EQ(nvmpf_parse_mapping("m1", NULL, cpus, 4, &n, err, sizeof err),
		 NVMPF_EINVAL);
	CHECK(strcmp(err, "invalid argument") == 0);
	CHECK_EQ(nvmpf_parse_mapping("m1", &s, cpus, 4, NULL, err, sizeof err),
		 NVMPF_EINVAL);
	CHECK_EQ(nvmpf_parse_mapping(NULL, &s, cpus, 4, &n, err, sizeof err),
		 NVMPF_EINVAL);
	CHECK(strncmp(err, "expected m1, m2, m3", 19) == 0);
	CHECK_EQ(nvmpf_parse_mapping("2,3", &s, cpus, 4, &n, NULL, 0), NVMPF_OK);
	CHECK_EQ(s, NVMPF_SCHEME_CPUS);
	CHECK_EQ(n, 2);
	CHECK_EQ(nvmpf_parse_mapping("7-", &s, cpus, 4, &n, NULL, 0),
		 NVMPF_EINVAL);
	char small[8];
	CHECK_EQ(nvmpf_parse_mapping("7-", &s, cpus, 4, &n, small, sizeof small),
		 NVMPF_EINVAL);
	CHECK(strcmp(small, "a CPU r") == 0);
	/* maxcpus 0 (or less) with an array: no CPU fits. */
	CHECK_EQ(nvmpf_parse_mapping("1", &s, cpus, 0, &n, err, sizeof err),
		 NVMPF_EINVAL);
	CHECK(strcmp(err, "at most 0 helper CPUs can be listed") == 0);
	CHECK_EQ(nvmpf_parse_mapping("m2", &s, cpus, 0, &n, err, sizeof err),
		 NVMPF_OK);
	CHECK_EQ(s, NVMPF_SCHEME_M2);
	CHECK_EQ(n, 0);
}

/* Fallback names: one per bit, NULL for anything else. */
static void test_fallback_names(void)
{
	static const char *const names[] = { "no_smt", "no_other_core",
					      "cpu_not_allowed", "no_topology",
					      "pin_failed" };
	for (unsigned int i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *n = nvmpf_fallback_name(1u << i);
		CHECK(n && strcmp(n, names[i]) == 0);
	}
	CHECK(nvmpf_fallback_name(0) == NULL);
	CHECK(nvmpf_fallback_name(NVMPF_FB_NO_SMT | NVMPF_FB_NO_OTHER_CORE) ==
	      NULL);
	CHECK(nvmpf_fallback_name(1u << 5) == NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN(test_mapping_cases);
	RUN(test_mapping_arguments);
	RUN(test_fallback_names);
	return t_finish();
}
