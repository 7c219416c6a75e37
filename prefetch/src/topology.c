/*
 * topology.c - CPU topology from sysfs and placement of helper threads for
 * the mapping schemes M1, M2, M3, an explicit CPU list, or unpinned.
 *
 * Two CPUs share a physical core when each is in the other's
 * topology/thread_siblings_list; when that file is missing, when they have
 * the same (physical_package_id, core_id).  Only CPUs that are online and in
 * the caller's affinity mask are ever used.  When a scheme cannot be
 * honoured the placement falls back (documented in README.md, "Mapping
 * schemes and fallbacks") and writes one explanatory message.
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

/* Assign n helpers round-robin over list (or unpinned when nlist == 0). */
static void assign(struct nvmpf_placement *pl, unsigned int n, const int *list,
		   int nlist, int stage)
{
	pl->nhelpers = n;
	for (unsigned int i = 0; i < n; i++) {
		pl->cpu[i] = nlist > 0 ? list[i % (unsigned int)nlist] : -1;
		pl->stage[i] = stage;
	}
}

/*
 * Placement per scheme (see the table in README.md): build the sibling and
 * other-core candidate lists for the home CPU among allowed+online CPUs,
 * assign helpers, and on any deviation from the request record the
 * fallback reason bits and compose the single message to log.
 */
int nvmpf_place(const nvmpf_config *cfg, const cpu_set_t *allowed,
		int home, struct nvmpf_placement *pl)
{
	struct topo *t = malloc(sizeof *t);
	int *sib = malloc(sizeof(int) * CPU_SETSIZE);
	int *oth = malloc(sizeof(int) * CPU_SETSIZE);
	if (!t || !sib || !oth) {
		free(t);
		free(sib);
		free(oth);
		return NVMPF_ENOMEM;
	}
	const char *dir = cfg->sysfs_cpu_dir ? cfg->sysfs_cpu_dir : SYSFS_CPU_DIR;
	load_topology(dir, allowed, t);

	/* Usable CPUs: allowed and online. */
	cpu_set_t usable;
	CPU_AND(&usable, allowed, &t->online);
	if (CPU_COUNT(&usable) == 0)
		usable = *allowed; /* odd sysfs: trust the affinity mask */
	if (home >= 0 && (home >= CPU_SETSIZE || !CPU_ISSET(home, &usable)))
		home = -1;

	int nsib, noth;
	candidate_lists(t, &usable, home, sib, &nsib, oth, &noth);

	memset(pl, 0, sizeof *pl);
	pl->caller_cpu = home;
	pl->smt_siblings = nsib;
	pl->cpus_allowed = CPU_COUNT(&usable);
	if (!t->known)
		pl->fallback |= NVMPF_FB_NO_TOPOLOGY;

	char allowed_s[128];
	nvmpf_format_cpuset(&usable, allowed_s, sizeof allowed_s);
	char why[200] = "";
	unsigned int n = cfg->nhelpers;

	switch (cfg->scheme) {
	case NVMPF_SCHEME_NONE:
		assign(pl, n ? n : 1, NULL, 0, 1);
		pl->effective = NVMPF_SCHEME_NONE;
		break;
	case NVMPF_SCHEME_M1:
		n = n ? n : 1;
		if (noth > 0) {
			assign(pl, n, oth, noth, 1);
			pl->effective = NVMPF_SCHEME_M1;
		} else if (nsib > 0) {
			pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
			msgf(why, sizeof why,
				 "no allowed CPU on a physical core other than "
				 "CPU %d's (allowed: %s)", home, allowed_s);
			assign(pl, n, sib, nsib, 1);
			pl->effective = NVMPF_SCHEME_M2;
		} else {
			pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
			msgf(why, sizeof why,
				 "no allowed CPU other than CPU %d (allowed: %s)",
				 home, allowed_s);
			assign(pl, n, NULL, 0, 1);
			pl->effective = NVMPF_SCHEME_NONE;
		}
		break;
	case NVMPF_SCHEME_M2:
		n = n ? n : 1;
		if (nsib > 0) {
			assign(pl, n, sib, nsib, 1);
			pl->effective = NVMPF_SCHEME_M2;
		} else {
			pl->fallback |= NVMPF_FB_NO_SMT;
			msgf(why, sizeof why,
				 "CPU %d has no SMT sibling in the allowed CPU "
				 "set %s", home, allowed_s);
			if (noth > 0) {
				assign(pl, n, oth, noth, 1);
				pl->effective = NVMPF_SCHEME_M1;
			} else {
				pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
				assign(pl, n, NULL, 0, 1);
				pl->effective = NVMPF_SCHEME_NONE;
			}
		}
		break;
	case NVMPF_SCHEME_M3: {
		int s1 = -1, s2 = -1;
		if (cfg->ncpus == 2) {
			bool ok1 = CPU_ISSET(cfg->cpus[0], &usable);
			bool ok2 = CPU_ISSET(cfg->cpus[1], &usable);
			if (ok1 && ok2) {
				s1 = cfg->cpus[0];
				s2 = cfg->cpus[1];
			} else {
				pl->fallback |= NVMPF_FB_CPU_NOT_ALLOWED;
				msgf(why, sizeof why,
					 "explicit M3 CPUs {%d,%d} not all in the "
					 "allowed CPU set %s; placing by topology",
					 cfg->cpus[0], cfg->cpus[1], allowed_s);
			}
		}
		if (s1 < 0) {
			s1 = noth > 0 ? oth[0] : -1;
			s2 = nsib > 0 ? sib[0] : -1;
		}
		size_t wl = strlen(why);
		if (s1 >= 0 && s2 >= 0) {
			pl->nhelpers = 2;
			pl->cpu[0] = s1;
			pl->stage[0] = 1;
			pl->cpu[1] = s2;
			pl->stage[1] = 2;
			pl->effective = NVMPF_SCHEME_M3;
		} else if (s1 >= 0) {
			pl->fallback |= NVMPF_FB_NO_SMT;
			msgf(why + wl, sizeof why - wl,
				 "%sCPU %d has no SMT sibling in the allowed CPU "
				 "set %s, so there is no second-stage helper",
				 wl ? "; " : "", home, allowed_s);
			assign(pl, 1, &s1, 1, 1);
			pl->effective = NVMPF_SCHEME_M1;
		} else if (s2 >= 0) {
			pl->fallback |= NVMPF_FB_NO_OTHER_CORE;
			msgf(why + wl, sizeof why - wl,
				 "%sno allowed CPU on a physical core other than "
				 "CPU %d's (allowed: %s), so there is no "
				 "first-stage helper", wl ? "; " : "", home,
				 allowed_s);
			assign(pl, 1, &s2, 1, 1);
			pl->effective = NVMPF_SCHEME_M2;
		} else {
			pl->fallback |= NVMPF_FB_NO_SMT | NVMPF_FB_NO_OTHER_CORE;
			msgf(why + wl, sizeof why - wl,
				 "%sno allowed CPU other than CPU %d (allowed: "
				 "%s)", wl ? "; " : "", home, allowed_s);
			assign(pl, 1, NULL, 0, 1);
			pl->effective = NVMPF_SCHEME_NONE;
		}
		break;
	}
	case NVMPF_SCHEME_CPUS: {
		int valid[NVMPF_MAX_HELPERS * 4];
		int nvalid = 0;
		cpu_set_t bad;
		CPU_ZERO(&bad);
		for (unsigned int i = 0; i < cfg->ncpus; i++) {
			if (CPU_ISSET(cfg->cpus[i], &usable)) {
				if (nvalid < (int)(sizeof valid / sizeof valid[0]))
					valid[nvalid++] = cfg->cpus[i];
			} else {
				CPU_SET(cfg->cpus[i], &bad);
			}
		}
		n = n ? n : (unsigned int)(nvalid > 0 ? nvalid : 1);
		if (n > NVMPF_MAX_HELPERS)
			n = NVMPF_MAX_HELPERS;
		if (CPU_COUNT(&bad) > 0) {
			char bad_s[128];
			nvmpf_format_cpuset(&bad, bad_s, sizeof bad_s);
			pl->fallback |= NVMPF_FB_CPU_NOT_ALLOWED;
			msgf(why, sizeof why,
				 "CPU(s) %s not online or not in the allowed "
				 "CPU set %s%s", bad_s, allowed_s,
				 nvalid ? "; using the others" : "");
		}
		assign(pl, n, valid, nvalid, 1);
		pl->effective = nvalid > 0 ? NVMPF_SCHEME_CPUS : NVMPF_SCHEME_NONE;
		break;
	}
	}

	if (why[0] || !t->known) {
		char where[160];
		format_cpu_list(pl->cpu, pl->nhelpers, where, sizeof where);
		const char *what =
			pl->effective == NVMPF_SCHEME_M1 ? "on another physical core" :
			pl->effective == NVMPF_SCHEME_M2 ? "on an SMT sibling" :
			pl->effective == NVMPF_SCHEME_M3 ? "in tandem" :
			pl->effective == NVMPF_SCHEME_CPUS ? "on the listed CPUs" :
							     "not pinned";
		char topo_note[128] = "";
		if (!t->known)
			msgf(topo_note, sizeof topo_note,
				 "%sCPU topology unreadable under %s, every CPU "
				 "taken as its own core", why[0] ? "; " : "", dir);
		if (pl->effective != cfg->scheme || pl->fallback & ~NVMPF_FB_NO_TOPOLOGY)
			msgf(pl->message, sizeof pl->message,
				 "nvmprefetch: scheme %s cannot be honoured: %s%s; "
				 "falling back to %s: %u helper(s) %s (%s)",
				 nvmpf_scheme_name(cfg->scheme), why, topo_note,
				 nvmpf_scheme_name(pl->effective), pl->nhelpers,
				 what, where);
		else
			msgf(pl->message, sizeof pl->message,
				 "nvmprefetch: scheme %s: %s; %u helper(s) %s (%s)",
				 nvmpf_scheme_name(cfg->scheme), topo_note + 0,
				 pl->nhelpers, what, where);
	}
	free(t);
	free(sib);
	free(oth);
	return NVMPF_OK;
}
