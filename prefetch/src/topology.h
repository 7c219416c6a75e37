/*
 * topology.h - placement of helper threads (topology.c): the caller's
 * affinity and home CPU; the CPU topology from sysfs; and, for a
 * configuration, an affinity mask and a home CPU, where each helper runs,
 * what fallback that was, and the one message that explains it.  Used by
 * nvmprefetch.c (nvmpf_create) and tools/nvmpf-topology.c.  Not installed.
 */
#ifndef NVMPF_TOPOLOGY_H
#define NVMPF_TOPOLOGY_H

#include "mapping.h"

/* Result of placing helpers, and what the placement saw. */
struct nvmpf_placement {
	nvmpf_scheme effective;
	unsigned int fallback;          /* NVMPF_FB_* */
	unsigned int nhelpers;
	int cpu[NVMPF_MAX_HELPERS];     /* -1 = unpinned */
	int stage[NVMPF_MAX_HELPERS];
	int caller_cpu;                 /* home CPU, -1 unknown/not usable */
	int smt_siblings;               /* usable SMT siblings of caller_cpu */
	int cpus_allowed;               /* CPU_COUNT(&usable) */
	cpu_set_t usable;               /* allowed and online */
	int physical_cores;             /* cores with a usable CPU */
	int smt_cores;                  /* cores with two or more */
	char topology_note[128];        /* why the topology is unknown (then
					   NVMPF_FB_NO_TOPOLOGY), else "" */
	char message[320];              /* fallback explanation, "" if none */
};

/* The calling thread's affinity mask (all online CPUs if unreadable). */
NVMPF_HIDDEN void nvmpf_caller_affinity(cpu_set_t *allowed);

/* The computation thread's home CPU for placement: the only CPU of allowed
 * (then *pinned = 1), else the CPU the caller runs on now (-1 unknown). */
NVMPF_HIDDEN int nvmpf_home_cpu(const cpu_set_t *allowed, int *pinned);

/*
 * Decide where helpers run for cfg (already validated) given the caller's
 * allowed set and home CPU.  Returns NVMPF_OK or NVMPF_ENOMEM.
 */
NVMPF_HIDDEN int nvmpf_place(const nvmpf_config *cfg, const cpu_set_t *allowed,
			     int home_cpu, struct nvmpf_placement *pl);

#endif /* NVMPF_TOPOLOGY_H */
