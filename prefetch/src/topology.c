/*
 * topology.c - CPU topology from sysfs, the caller's affinity and home CPU,
 * and placement of helper threads for the mapping schemes M1, M2, M3, an
 * explicit CPU list, or unpinned: one function per scheme (place_m1 ...)
 * over a context set up once (place_setup), and one message (explain).
 *
 * Two CPUs share a physical core when each is in the other's
 * topology/thread_siblings_list; when that file is missing, when they have
 * the same (physical_package_id, core_id).  Only CPUs that are online and in
 * the caller's affinity mask are ever used.  When a scheme cannot be
 * honoured the placement falls back (documented in README.md, "Mapping
 * schemes and their fallbacks") and writes one explanatory message.
 * Calls only into mapping.c (names, CPU lists); used by nvmprefetch.c and
 * tools/nvmpf-topology.c.
 */
#define _GNU_SOURCE
#include "topology.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SYSFS_CPU_DIR "/sys/devices/system/cpu"

/* snprintf for human-readable messages where truncation is acceptable (a
 * wrapper, so -Wformat-truncation does not ask for a check of each call). */
__attribute__((format(printf, 3, 4)))
static void msgf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Topology from sysfs                                                  */
/* ------------------------------------------------------------------ */

/* Per-CPU topology facts; key[c] identifies c's physical core. */
struct topo {
	cpu_set_t online;
	bool known;                 /* false: sysfs unreadable */
	int key[CPU_SETSIZE];       /* -1 = not online */
};

/*
 * Read a small sysfs file into buf (NUL-terminated, trailing newline cut).
 * Uses open/read rather than stdio: called at create time only, but keeps the
 * library free of stdio state.  Returns 0 or -1.
 */
static int read_small_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n;
	do {
		n = read(fd, buf, size - 1);
	} while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* Read an integer attribute of cpu<c>/topology; -1 if unreadable. */
static long read_topo_long(const char *dir, int c, const char *name)
{
	char path[512], buf[64];
	snprintf(path, sizeof path, "%s/cpu%d/topology/%s", dir, c, name);
	if (read_small_file(path, buf, sizeof buf) != 0)
		return -1;
	char *end;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (errno || end == buf)
		return -1;
	return v;
}

/*
 * Load online CPUs and each one's core key.  Falls back to "every allowed
 * CPU is online and its own core" (t->known = false) if sysfs is unreadable.
 */
static void load_topology(const char *dir, const cpu_set_t *allowed,
			  struct topo *t)
{
	char path[512], buf[4096];
	t->known = true;
	for (int c = 0; c < CPU_SETSIZE; c++)
		t->key[c] = -1;

	snprintf(path, sizeof path, "%s/online", dir);
	if (read_small_file(path, buf, sizeof buf) != 0 ||
	    nvmpf_parse_cpulist(buf, &t->online) != 0 ||
	    CPU_COUNT(&t->online) == 0) {
		t->known = false;
		t->online = *allowed;
	}

	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &t->online))
			continue;
		if (!t->known) {
			t->key[c] = c;
			continue;
		}
		/* Preferred: lowest CPU of the SMT sibling list. */
		snprintf(path, sizeof path,
			 "%s/cpu%d/topology/thread_siblings_list", dir, c);
		cpu_set_t sib;
		if (read_small_file(path, buf, sizeof buf) == 0 &&
		    nvmpf_parse_cpulist(buf, &sib) == 0 && CPU_ISSET(c, &sib)) {
			int low = c;
			for (int s = 0; s < c; s++)
				if (CPU_ISSET(s, &sib)) {
					low = s;
					break;
				}
			t->key[c] = low;
			continue;
		}
		/* Else: first online CPU with the same (package, core_id). */
		long p = read_topo_long(dir, c, "physical_package_id");
		long k = read_topo_long(dir, c, "core_id");
		if (p < 0 || k < 0) {
			t->known = false;
			t->key[c] = c;
			continue;
		}
		t->key[c] = c;
		for (int s = 0; s < c; s++) {
			if (t->key[s] < 0)
				continue;
			if (read_topo_long(dir, s, "physical_package_id") == p &&
			    read_topo_long(dir, s, "core_id") == k) {
				t->key[c] = t->key[s];
				break;
			}
		}
	}
}

/*
 * Build the candidate lists: SMT siblings of home, and CPUs on other cores
 * ordered so that the first thread of each other core comes before any
 * second thread (helpers spread over distinct cores first).
 */
static void candidate_lists(const struct topo *t, const cpu_set_t *allowed,
			    int home, int *sib, int *nsib, int *oth, int *noth)
{
	static const int max_rank = 64;
	*nsib = 0;
	*noth = 0;
	int hkey = (home >= 0 && home < CPU_SETSIZE) ? t->key[home] : -2;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, allowed) || t->key[c] < 0 || c == home)
			continue;
		if (hkey >= 0 && t->key[c] == hkey)
			sib[(*nsib)++] = c;
	}
	for (int rank = 0; rank < max_rank; rank++) {
		int added = 0;
		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (!CPU_ISSET(c, allowed) || t->key[c] < 0 ||
			    c == home || (hkey >= 0 && t->key[c] == hkey))
				continue;
			/* rank of c within its core among allowed CPUs */
			int r = 0;
			for (int s = t->key[c]; s < c; s++)
				if (CPU_ISSET(s, allowed) && t->key[s] == t->key[c])
					r++;
			if (r == rank) {
				oth[(*noth)++] = c;
				added++;
			}
		}
		if (!added)
			break;
	}
}

/* Physical cores with at least one CPU of usable, and those with two or
 * more (SMT). */
static void count_cores(const struct topo *t, const cpu_set_t *usable,
			int *cores, int *smt_cores)
{
	unsigned short n[CPU_SETSIZE] = { 0 }; /* usable CPUs per core key */
	*cores = 0;
	*smt_cores = 0;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, usable) || t->key[c] < 0)
			continue;
		unsigned short k = ++n[t->key[c]];
		*cores += k == 1;
		*smt_cores += k == 2;
	}
}

/* ------------------------------------------------------------------ */
/* The caller                                                           */
/* ------------------------------------------------------------------ */

/* The calling thread's affinity mask; if unreadable, the online CPUs
 * 0..n-1. */
void nvmpf_caller_affinity(cpu_set_t *allowed)
{
	if (sched_getaffinity(0, sizeof *allowed, allowed) == 0)
		return;
	CPU_ZERO(allowed);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	for (long c = 0; c < n && c < CPU_SETSIZE; c++)
		CPU_SET((int)c, allowed);
}

/* The home CPU: the only CPU of allowed (*pinned = 1), else the CPU the
 * caller runs on now (*pinned = 0; -1 if unknown). */
int nvmpf_home_cpu(const cpu_set_t *allowed, int *pinned)
{
	*pinned = 0;
	if (CPU_COUNT(allowed) != 1)
		return sched_getcpu();
	*pinned = 1;
	int home = -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, allowed))
			home = c;
	return home;
}

/* ------------------------------------------------------------------ */
/* Placement                                                            */
/* ------------------------------------------------------------------ */

/*
 * What every scheme's placement works from, set up once by nvmpf_place():
 * the topology, the usable CPUs, the home CPU and its two candidate lists,
 * and the reasons collected when the request cannot be honoured.
 */
struct place_ctx {
	const nvmpf_config *cfg;
	const char *dir;               /* sysfs CPU directory read */
	struct topo t;
	cpu_set_t usable;              /* allowed and online */
	int home;                      /* -1: unknown or not usable */
	int sib[CPU_SETSIZE], nsib;    /* SMT siblings of home */
	int oth[CPU_SETSIZE], noth;    /* CPUs on other cores, spread */
	char allowed_s[128];           /* usable, formatted for messages */
	char why[200];                 /* "; "-separated reasons, "" if none */
};

/* Append one reason to x->why, after "; " if there is one already. */
__attribute__((format(printf, 2, 3)))
static void add_why(struct place_ctx *x, const char *fmt, ...)
{
	size_t wl = strlen(x->why);
	if (wl)
		msgf(x->why + wl, sizeof x->why - wl, "; ");
	wl = strlen(x->why);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->why + wl, sizeof x->why - wl, fmt, ap);
	va_end(ap);
}

/* Reason: home has no allowed SMT sibling (so: what is missing). */
static void why_no_smt(struct place_ctx *x, const char *so)
{
	add_why(x, "CPU %d has no SMT sibling in the allowed CPU set %s%s",
		x->home, x->allowed_s, so);
}

/* Reason: no allowed CPU on another core, but a sibling (so: ditto). */
static void why_no_other_core(struct place_ctx *x, const char *so)
{
	add_why(x, "no allowed CPU on a physical core other than CPU %d's "
		"(allowed: %s)%s", x->home, x->allowed_s, so);
}

/* Reason: home is the only allowed CPU. */
static void why_alone(struct place_ctx *x)
{
	add_why(x, "no allowed CPU other than CPU %d (allowed: %s)", x->home,
		x->allowed_s);
}

/* Place n stage-1 helpers round-robin over list (unpinned when nlist is 0)
 * and record the scheme that implements. */
static void assign(struct nvmpf_placement *pl, nvmpf_scheme effective,
		   unsigned int n, const int *list, int nlist)
{
	pl->effective = effective;
	pl->nhelpers = n;
	for (unsigned int i = 0; i < n; i++) {
		pl->cpu[i] = nlist > 0 ? list[i % (unsigned int)nlist] : -1;
		pl->stage[i] = 1;
	}
}

/* Helpers asked for by M1, M2 and NONE: cfg->nhelpers, default 1. */
static unsigned int helpers_wanted(const struct place_ctx *x)
{
	return x->cfg->nhelpers ? x->cfg->nhelpers : 1;
}

/* Place n helpers on the first non-empty of two candidate lists, as scheme
 * s1 or s2, else unpinned (NONE). */
static void assign_first(struct nvmpf_placement *pl, unsigned int n,
			 nvmpf_scheme s1, const int *l1, int n1,
			 nvmpf_scheme s2, const int *l2, int n2)
{
	if (n1 > 0)
		assign(pl, s1, n, l1, n1);
	else if (n2 > 0)
		assign(pl, s2, n, l2, n2);
	else
		assign(pl, NVMPF_SCHEME_NONE, n, NULL, 0);
}

/* NONE: helpers unpinned. */
static void place_none(struct place_ctx *x, struct nvmpf_placement *pl)
{
	assign(pl, NVMPF_SCHEME_NONE, helpers_wanted(x), NULL, 0);
}

/* M1: helpers on other cores; else on home's sibling (M2); else unpinned. */
static void place_m1(struct place_ctx *x, struct nvmpf_placement *pl)
{
	if (x->noth == 0) {
		pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
		if (x->nsib > 0)
			why_no_other_core(x, "");
		else
			why_alone(x);
	}
	assign_first(pl, helpers_wanted(x), NVMPF_SCHEME_M1, x->oth, x->noth,
		     NVMPF_SCHEME_M2, x->sib, x->nsib);
}

/* M2: helpers on home's siblings; else on other cores (M1); else
 * unpinned. */
static void place_m2(struct place_ctx *x, struct nvmpf_placement *pl)
{
	if (x->nsib == 0) {
		pl->fallback |= NVMPF_FB_NO_SMT;
		if (x->noth == 0)
			pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
		why_no_smt(x, "");
	}
	assign_first(pl, helpers_wanted(x), NVMPF_SCHEME_M2, x->sib, x->nsib,
		     NVMPF_SCHEME_M1, x->oth, x->noth);
}

/*
 * M3: stage 1 on the explicit cfg->cpus[0] or another core, stage 2 on
 * cfg->cpus[1] or home's sibling.  Explicit CPUs that are not usable are
 * replaced by topology; with only one of the two stages possible, one
 * helper runs as M1 or M2; with neither, unpinned.
 */
static void place_m3(struct place_ctx *x, struct nvmpf_placement *pl)
{
	const nvmpf_config *cfg = x->cfg;
	int s1 = -1, s2 = -1;
	if (cfg->ncpus == 2) {
		if (CPU_ISSET(cfg->cpus[0], &x->usable) &&
		    CPU_ISSET(cfg->cpus[1], &x->usable)) {
			s1 = cfg->cpus[0];
			s2 = cfg->cpus[1];
		} else {
			pl->fallback |= NVMPF_FB_CPU_NOT_ALLOWED;
			add_why(x, "explicit M3 CPUs {%d,%d} not all in the "
				"allowed CPU set %s; placing by topology",
				cfg->cpus[0], cfg->cpus[1], x->allowed_s);
		}
	}
	if (s1 < 0) {
		s1 = x->noth > 0 ? x->oth[0] : -1;
		s2 = x->nsib > 0 ? x->sib[0] : -1;
	}
	if (s1 >= 0 && s2 >= 0) {
		pl->effective = NVMPF_SCHEME_M3;
		pl->nhelpers = 2;
		pl->cpu[0] = s1;
		pl->stage[0] = 1;
		pl->cpu[1] = s2;
		pl->stage[1] = 2;
	} else if (s1 >= 0) {
		pl->fallback |= NVMPF_FB_NO_SMT;
		why_no_smt(x, ", so there is no second-stage helper");
		assign(pl, NVMPF_SCHEME_M1, 1, &s1, 1);
	} else if (s2 >= 0) {
		pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
		why_no_other_core(x, ", so there is no first-stage helper");
		assign(pl, NVMPF_SCHEME_M2, 1, &s2, 1);
	} else {
		pl->fallback |= NVMPF_FB_NO_SMT | NVMPF_FB_NO_OTHER_CORE;
		why_alone(x);
		assign(pl, NVMPF_SCHEME_NONE, 1, NULL, 0);
	}
}

/* CPUS: helper i on the i-th usable listed CPU (round-robin); listed CPUs
 * that are not usable are dropped; none left: unpinned. */
static void place_cpus(struct place_ctx *x, struct nvmpf_placement *pl)
{
	const nvmpf_config *cfg = x->cfg;
	int valid[NVMPF_MAX_HELPERS * 4];
	int nvalid = 0;
	cpu_set_t bad;
	CPU_ZERO(&bad);
	for (unsigned int i = 0; i < cfg->ncpus; i++) {
		if (CPU_ISSET(cfg->cpus[i], &x->usable)) {
			if (nvalid < (int)(sizeof valid / sizeof valid[0]))
				valid[nvalid++] = cfg->cpus[i];
		} else {
			CPU_SET(cfg->cpus[i], &bad);
		}
	}
	unsigned int n = cfg->nhelpers;
	n = n ? n : (unsigned int)(nvalid > 0 ? nvalid : 1);
	if (n > NVMPF_MAX_HELPERS)
		n = NVMPF_MAX_HELPERS;
	if (CPU_COUNT(&bad) > 0) {
		char bad_s[128];
		nvmpf_format_cpuset(&bad, bad_s, sizeof bad_s);
		pl->fallback |= NVMPF_FB_CPU_NOT_ALLOWED;
		add_why(x, "CPU(s) %s not online or not in the allowed CPU set "
			"%s%s", bad_s, x->allowed_s,
			nvalid ? "; using the others" : "");
	}
	assign(pl, nvalid > 0 ? NVMPF_SCHEME_CPUS : NVMPF_SCHEME_NONE, n, valid,
	       nvalid);
}

/* Format "CPU a, CPU b" / "CPUs 1,3" for the list of helper CPUs. */
static void format_cpu_list(const int *cpu, unsigned int n, char *buf,
			    size_t size)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	bool any_unpinned = false;
	for (unsigned int i = 0; i < n; i++) {
		if (cpu[i] >= 0)
			CPU_SET(cpu[i], &s);
		else
			any_unpinned = true;
	}
	if (CPU_COUNT(&s) == 0) {
		snprintf(buf, size, "unpinned");
		return;
	}
	char list[128];
	nvmpf_format_cpuset(&s, list, sizeof list);
	msgf(buf, size, "%s %s%s", CPU_COUNT(&s) == 1 ? "CPU" : "CPUs",
		 list, any_unpinned ? " and unpinned" : "");
}

/* How helpers of an effective scheme run, for the message. */
static const char *placed_how(nvmpf_scheme effective)
{
	switch (effective) {
	case NVMPF_SCHEME_M1: return "on another physical core";
	case NVMPF_SCHEME_M2: return "on an SMT sibling";
	case NVMPF_SCHEME_M3: return "in tandem";
	case NVMPF_SCHEME_CPUS: return "on the listed CPUs";
	case NVMPF_SCHEME_NONE: break;
	}
	return "not pinned";
}

/*
 * Compose pl->message when the request was not honoured as asked (x->why)
 * or the topology was unreadable (pl->topology_note): "scheme X cannot be
 * honoured: <why>[; <note>]; falling back to Y: <helpers>" or, when only
 * the topology is in question, "scheme X: <note>; <helpers>".
 */
static void explain(const struct place_ctx *x, struct nvmpf_placement *pl)
{
	const char *why = x->why;
	if (!why[0] && x->t.known)
		return;
	char where[160];
	format_cpu_list(pl->cpu, pl->nhelpers, where, sizeof where);
	const char *note = pl->topology_note;
	const char *sep = why[0] && note[0] ? "; " : "";
	const char *scheme = nvmpf_scheme_name(x->cfg->scheme);
	if (pl->effective != x->cfg->scheme ||
	    pl->fallback & ~NVMPF_FB_NO_TOPOLOGY)
		msgf(pl->message, sizeof pl->message,
		     "nvmprefetch: scheme %s cannot be honoured: %s%s%s; "
		     "falling back to %s: %u helper(s) %s (%s)", scheme, why,
		     sep, note,
		     nvmpf_scheme_name(pl->effective), pl->nhelpers,
		     placed_how(pl->effective), where);
	else
		msgf(pl->message, sizeof pl->message,
		     "nvmprefetch: scheme %s: %s; %u helper(s) %s (%s)", scheme,
		     note, pl->nhelpers, placed_how(pl->effective), where);
}

/*
 * Set up the placement context: topology from sysfs, usable CPUs (allowed
 * and online; the affinity mask alone if that is empty), home CPU (-1 if not
 * usable), candidate lists, and the facts every placement reports.
 */
static void place_setup(struct place_ctx *x, const nvmpf_config *cfg,
			const cpu_set_t *allowed, int home,
			struct nvmpf_placement *pl)
{
	x->cfg = cfg;
	x->dir = cfg->sysfs_cpu_dir ? cfg->sysfs_cpu_dir : SYSFS_CPU_DIR;
	x->why[0] = '\0';
	load_topology(x->dir, allowed, &x->t);

	CPU_AND(&x->usable, allowed, &x->t.online);
	if (CPU_COUNT(&x->usable) == 0)
		x->usable = *allowed; /* odd sysfs: trust the affinity mask */
	if (home >= 0 && (home >= CPU_SETSIZE || !CPU_ISSET(home, &x->usable)))
		home = -1;
	x->home = home;
	candidate_lists(&x->t, &x->usable, home, x->sib, &x->nsib, x->oth,
			&x->noth);
	nvmpf_format_cpuset(&x->usable, x->allowed_s, sizeof x->allowed_s);

	memset(pl, 0, sizeof *pl);
	pl->caller_cpu = home;
	pl->smt_siblings = x->nsib;
	pl->cpus_allowed = CPU_COUNT(&x->usable);
	pl->usable = x->usable;
	count_cores(&x->t, &x->usable, &pl->physical_cores, &pl->smt_cores);
	if (!x->t.known) {
		pl->fallback |= NVMPF_FB_NO_TOPOLOGY;
		msgf(pl->topology_note, sizeof pl->topology_note,
		     "CPU topology unreadable under %s, every CPU taken as its "
		     "own core", x->dir);
	}
}

/*
 * Placement per scheme (see the table in README.md): set up the context,
 * let the scheme's function assign the helpers (recording fallback bits and
 * reasons on any deviation from the request), then compose the single
 * message to log.
 */
int nvmpf_place(const nvmpf_config *cfg, const cpu_set_t *allowed,
		int home, struct nvmpf_placement *pl)
{
	struct place_ctx *x = malloc(sizeof *x);
	if (!x)
		return NVMPF_ENOMEM;
	place_setup(x, cfg, allowed, home, pl);
	switch (cfg->scheme) {
	case NVMPF_SCHEME_NONE: place_none(x, pl); break;
	case NVMPF_SCHEME_M1: place_m1(x, pl); break;
	case NVMPF_SCHEME_M2: place_m2(x, pl); break;
	case NVMPF_SCHEME_M3: place_m3(x, pl); break;
	case NVMPF_SCHEME_CPUS: place_cpus(x, pl); break;
	}
	explain(x, pl);
	free(x);
	return NVMPF_OK;
}
