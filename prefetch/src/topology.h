/*
 * topology.h - placement of helper threads (topology.c): reads the CPU
 * topology from sysfs and decides, for a configuration, an affinity mask and
 * a home CPU, where each helper runs, what fallback that was, and the one
 * message that explains it.  Used by nvmprefetch.c (nvmpf_create).
 * Not installed.
 */
#ifndef NVMPF_TOPOLOGY_H
#define NVMPF_TOPOLOGY_H

#include "mapping.h"

/* Result of placing helpers. */
struct nvmpf_placement {
	nvmpf_scheme effective;
	unsigned int fallback;          /* NVMPF_FB_* */
	unsigned int nhelpers;
	int cpu[NVMPF_MAX_HELPERS];     /* -1 = unpinned */
	int stage[NVMPF_MAX_HELPERS];
	int caller_cpu;
	int smt_siblings;
	int cpus_allowed;
	char message[320];              /* fallback explanation, "" if none */
};

/*
 * Decide where helpers run for cfg (already validated) given the caller's
 * allowed set and home CPU.  Returns NVMPF_OK or NVMPF_ENOMEM.
 */
NVMPF_HIDDEN int nvmpf_place(const nvmpf_config *cfg, const cpu_set_t *allowed,
			     int home_cpu, struct nvmpf_placement *pl);

#endif /* NVMPF_TOPOLOGY_H */
