/*
 * test_shared.c - tests against the shared library: the public API works
 * when linked dynamically, and only the public API is exported (internal
 * functions and test hooks have hidden visibility).
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "nvmprefetch.h"

#include <dlfcn.h>
#include <stdint.h>

static void test_roundtrip_shared(void)
{
	static unsigned char buf[1 << 16] __attribute__((aligned(4096)));
	memset(buf, 1, sizeof buf);
	nvmpf_config c;
	nvmpf_config_init(&c);
	c.scheme = NVMPF_SCHEME_NONE;
	nvmpf_pool *p = NULL;
	CHECK_EQ(nvmpf_create(&c, &p), NVMPF_OK);
	if (!p)
		return;
	for (int i = 0; i < 16; i++)
		CHECK_EQ(nvmpf_enqueue(p, buf + i * 4096, 4096), NVMPF_OK);
	CHECK_EQ(nvmpf_drain(p, 5000000000), NVMPF_OK);
	nvmpf_stats st;
	CHECK_EQ(nvmpf_get_stats(p, &st), NVMPF_OK);
	CHECK_EQ(st.jobs_done, 16);
	CHECK_EQ(st.bytes_done, sizeof buf);
	CHECK_EQ(st.pages_touched, sizeof buf / 4096);
	CHECK_EQ(st.lines_prefetched, sizeof buf / 64);
	nvmpf_destroy(p);
}

static void test_exports(void)
{
	const char *pub[] = { "nvmpf_config_init", "nvmpf_create", "nvmpf_enqueue",
			      "nvmpf_drain", "nvmpf_get_stats", "nvmpf_get_info",
			      "nvmpf_destroy", "nvmpf_strerror", "nvmpf_scheme_name",
			      "nvmpf_log_discard", "nvmpf_enqueue_seq",
			      "nvmpf_retire", "nvmpf_parse_mapping" };
	for (unsigned int i = 0; i < sizeof pub / sizeof pub[0]; i++)
		CHECK(dlsym(RTLD_DEFAULT, pub[i]) != NULL);
	const char *hidden[] = { "nvmpf_place", "nvmpf_parse_cpulist",
				 "nvmpf_fallback_name", "nvmpf_format_cpuset",
				 "nvmpf_internal_set_paused",
				 "nvmpf_internal_preset_ring",
				 "nvmpf_internal_fingerprint" };
	for (unsigned int i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
		CHECK(dlsym(RTLD_DEFAULT, hidden[i]) == NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN(test_roundtrip_shared);
	RUN(test_exports);
	return t_finish();
}
