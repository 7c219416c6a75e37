/*-------------------------------------------------------------------------
 *
 * bench_checksum_simd.c
 *	  pgnvm: nanoseconds per 8 kB page of each variant of the page checksum
 *	  (src/port/pg_checksum_simd.c), cache-hot and cache-cold.
 *
 * Times pg_checksum_page_readonly() (what se2 calls for every page it reads
 * in place) with pg_checksum_block_optimized set to each variant this
 * process can run, and upstream's pg_checksum_page() (reference_checksum.h,
 * compiled with checksum.c's flags) as the baseline, and a block function
 * that only XORs the page's words together: the cost of reading the page
 * (what no checksum can go below; it computes no checksum).
 *
 *	 hot   the same few pages (--hot-pages, default 16 = 128 kB: L2) over
 *		   and over (--hot-reps passes per run)
 *	 cold  one pass over a buffer much larger than the last-level cache
 *		   (--cold-mb, default 1024), pages in a random order, so that every
 *		   page comes from memory
 *
 * Every run (--runs, default 21) times each variant once, in an order that
 * rotates from run to run; the table gives the median ns per page with the
 * minimum and maximum, and the ratio to the scalar variant: the median of
 * the per-run ratios, with their minimum and maximum.  The checksums of all
 * variants are summed and must agree.  --cpu N pins the process.
 *
 * src/test/checksum_simd/bench_checksum_simd.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <sched.h>
#include <time.h>

#include "common/logging.h"
#include "common/pg_prng.h"
#include "port/pg_checksum_simd.h"
#include "storage/checksum.h"
#include "storage/checksum_impl.h"

#include "reference_checksum.h"

#define MAX_RUNS 1001

/* what is timed: upstream's page function, or one of our variants */
typedef struct BenchVariant
{
	const char *name;
	pg_checksum_block_fn block; /* NULL: upstream's pg_checksum_page() */
	double		ns[MAX_RUNS];	/* ns per page, one per run */
	double		ratio[MAX_RUNS];	/* to the scalar variant, same run */
	uint64		sum;			/* of all checksums computed */
	bool		checksums;		/* false: the read floor, other values */
} BenchVariant;

/*
 * The read floor: XOR of the page's words (vectorized by the compiler with
 * checksum.c's flags), called like a block function.
 */
static uint32
read_floor(const char *page)
{
	uint64		x = 0;

	for (int i = 0; i < BLCKSZ / (int) sizeof(uint64); i++)
		x ^= ((const uint64 *) page)[i];
	return (uint32) (x ^ (x >> 32));
}

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* median, minimum and maximum of n values (sorted in place) */
static void
stats(double *v, int n, double *median, double *min, double *max)
{
	qsort(v, n, sizeof(double), cmp_double);
	*median = (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	*min = v[0];
	*max = v[n - 1];
}

/*
 * Checksum the pages order[0..npages-1] of buf reps times with variant v;
 * returns ns per page.
 */
static double
time_pass(BenchVariant *v, char *buf, const uint32 *order, int npages, int reps)
{
	uint64		sum = 0;
	double		t0;
	double		t1;

	pg_checksum_block_optimized = v->block;
	t0 = now_ns();
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < npages; i++)
		{
			char	   *page = buf + (size_t) order[i] * BLCKSZ;

			if (v->block == NULL)
				sum += reference_checksum_page(page, order[i]);
			else
				sum += pg_checksum_page_readonly(page, order[i]);
		}
	t1 = now_ns();
	v->sum += sum;
	return (t1 - t0) / ((double) npages * reps);
}

/*
 * One benchmark (hot or cold): runs x variants, then its table rows.
 */
static void
bench(const char *label, BenchVariant *vars, int nvars, char *buf,
	  uint32 *order, int npages, int reps, int runs)
{
	int			scalar = -1;

	for (int v = 0; v < nvars; v++)
	{
		vars[v].sum = 0;
		if (vars[v].block == pg_checksum_impl_block(PG_CHECKSUM_IMPL_SCALAR))
			scalar = v;
	}
	for (int run = 0; run < runs; run++)
	{
		for (int j = 0; j < nvars; j++)
		{
			int			v = (run + j) % nvars;

			vars[v].ns[run] = time_pass(&vars[v], buf, order, npages, reps);
		}
		for (int v = 0; v < nvars; v++)
			vars[v].ratio[run] = vars[v].ns[run] / vars[scalar].ns[run];
	}
	for (int v = 0; v < nvars; v++)
	{
		double		med,
					min,
					max,
					rmed,
					rmin,
					rmax;

		if (vars[v].checksums && vars[v].sum != vars[0].sum)
			pg_fatal("%s: variant %s computed other checksums than %s",
					 label, vars[v].name, vars[0].name);
		stats(vars[v].ns, runs, &med, &min, &max);
		stats(vars[v].ratio, runs, &rmed, &rmin, &rmax);
		printf("| %s | %s | %.0f | %.0f-%.0f | %.2f | %.2f-%.2f |\n",
			   label, vars[v].name, med, min, max, rmed, rmin, rmax);
	}
}

int
main(int argc, char **argv)
{
	int			runs = 21;
	int			hot_pages = 16;
	int			hot_reps = 500;
	int			cold_mb = 1024;
	int			cpu = -1;
	BenchVariant *vars;
	int			nvars = 0;
	int			cold_pages;
	char	   *buf;
	uint32	   *order;
	pg_prng_state prng;

	pg_logging_init(argv[0]);
	for (int i = 1; i + 1 < argc; i += 2)
	{
		int			n = atoi(argv[i + 1]);

		if (strcmp(argv[i], "--runs") == 0 && n >= 1 && n <= MAX_RUNS)
			runs = n;
		else if (strcmp(argv[i], "--hot-pages") == 0 && n >= 1)
			hot_pages = n;
		else if (strcmp(argv[i], "--hot-reps") == 0 && n >= 1)
			hot_reps = n;
		else if (strcmp(argv[i], "--cold-mb") == 0 && n >= 1)
			cold_mb = n;
		else if (strcmp(argv[i], "--cpu") == 0 && n >= 0)
			cpu = n;
		else
			pg_fatal("usage: %s [--runs N] [--hot-pages N] [--hot-reps N] [--cold-mb N] [--cpu N]",
					 argv[0]);
	}
	if (argc % 2 == 0)
		pg_fatal("usage: %s [--runs N] [--hot-pages N] [--hot-reps N] [--cold-mb N] [--cpu N]",
				 argv[0]);
	if (cpu >= 0)
	{
		cpu_set_t	set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0)
			pg_fatal("could not pin to CPU %d: %m", cpu);
	}

	/* upstream's page function, ours (narrowest first), the read floor */
	(void) pg_checksum_impl_chosen();
	vars = palloc0(sizeof(BenchVariant) * (PG_CHECKSUM_IMPL_COUNT + 2));
	vars[nvars].checksums = true;
	vars[nvars++].name = "upstream pg_checksum_page";
	for (int i = 0; i < PG_CHECKSUM_IMPL_COUNT; i++)
	{
		pg_checksum_block_fn fn = pg_checksum_impl_block((PgChecksumImpl) i);

		if (fn == NULL)
			continue;
		vars[nvars].name = pg_checksum_impl_name((PgChecksumImpl) i);
		vars[nvars].checksums = true;
		vars[nvars++].block = fn;
	}
	vars[nvars].name = "read floor (no checksum)";
	vars[nvars++].block = read_floor;

	/* random, not new pages; the cold buffer's pages in a random order */
	cold_pages = (int) ((int64) cold_mb * 1024 * 1024 / BLCKSZ);
	cold_pages = Max(cold_pages, hot_pages);
	buf = pg_malloc((size_t) cold_pages * BLCKSZ);
	order = palloc(sizeof(uint32) * cold_pages);
	pg_prng_seed(&prng, 20261122);
	for (size_t i = 0; i < (size_t) cold_pages * BLCKSZ / sizeof(uint64); i++)
		((uint64 *) buf)[i] = pg_prng_uint64(&prng);
	for (int p = 0; p < cold_pages; p++)
	{
		((PageHeader) (buf + (size_t) p * BLCKSZ))->pd_upper = BLCKSZ;
		order[p] = p;
	}
	for (int p = cold_pages - 1; p > 0; p--)
	{
		int			q = (int) pg_prng_uint64_range(&prng, 0, p);
		uint32		t = order[p];

		order[p] = order[q];
		order[q] = t;
	}

	printf("BLCKSZ %d; %d runs; hot: %d pages (%d kB) x %d passes; "
		   "cold: %d pages (%d MB) in random order, one pass\n\n",
		   BLCKSZ, runs, hot_pages, hot_pages * BLCKSZ / 1024, hot_reps,
		   cold_pages, cold_mb);
	printf("| cache | variant | ns/page (median) | min-max | x scalar (median) | min-max |\n");
	printf("|---|---|---|---|---|---|\n");
	bench("hot", vars, nvars, buf, order, hot_pages, hot_reps, runs);
	bench("cold", vars, nvars, buf, order, cold_pages, 1, runs);
	return 0;
}
