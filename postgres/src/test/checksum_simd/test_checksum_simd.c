/*-------------------------------------------------------------------------
 *
 * test_checksum_simd.c
 *	  pgnvm: every variant of the page checksum's block function
 *	  (src/port/pg_checksum_simd.c) against upstream's scalar algorithm.
 *
 * The oracle is reference_checksum.h, upstream's code before patch 0011.
 * For each page and each variant this process can run, the test compares
 * the block function, pg_checksum_page() and pg_checksum_page_readonly()
 * (with pg_checksum_block_optimized set to the variant) with the oracle,
 * and checks that the page is unchanged.  Pages: random ones of several
 * kinds with random and edge-case block numbers, one non-zero word at each
 * of the 2048 positions, pd_checksum and its neighbours varied, all-zero and
 * all-ones pages, pages at every 4-byte misalignment, and a page in a
 * read-only mapping between two inaccessible ones (a write or a read
 * outside the page kills the test).
 *
 * Usage:
 *	 test_checksum_simd [--seed N] [--pages N]	 the tests above
 *	 test_checksum_simd --files FILE...	 every block of these relation
 *		segment files (blkno from the ".N" suffix, as pg_checksums does):
 *		the variants agree with the oracle and, unless the page is new
 *		(all-zero pages are valid without a checksum, as in PageIsVerified()),
 *		with the checksum stored in the page
 *	 test_checksum_simd --chosen	 the variant this process chooses
 *		(PGNVM_CHECKSUM_IMPL or the CPU)
 *	 test_checksum_simd --available	 the variants this process can run
 *
 * The tests print "N passed, M failed" last and exit 1 if any failed.
 *
 * src/test/checksum_simd/test_checksum_simd.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/logging.h"
#include "common/pg_prng.h"
#include "port/pg_checksum_simd.h"
#include "storage/checksum.h"
#include "storage/checksum_impl.h"

#include "reference_checksum.h"

/* how many failures are described in detail */
#define MAX_REPORTED 20

static int64 n_passed = 0;
static int64 n_failed = 0;
static pg_prng_state prng;

/* the variants this process can run */
static PgChecksumImpl impls[PG_CHECKSUM_IMPL_COUNT];
static int	n_impls = 0;

/* block numbers that border segments and the end of the range */
static const BlockNumber edge_blknos[] = {
	0, 1, RELSEG_SIZE - 1, RELSEG_SIZE, 0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF
};

/*
 * Count one comparison; describe the first failures.
 */
static void
record(bool ok, const char *what, PgChecksumImpl impl, BlockNumber blkno,
	   uint32 expected, uint32 got)
{
	if (ok)
	{
		n_passed++;
		return;
	}
	if (n_failed < MAX_REPORTED)
		printf("FAIL %s, variant %s, block %u: expected 0x%08x, got 0x%08x\n",
			   what, pg_checksum_impl_name(impl), blkno, expected, got);
	n_failed++;
}

/*
 * Compare every variant with the oracle on one page.  With page_functions,
 * also pg_checksum_page() and pg_checksum_page_readonly() for blkno (the
 * page must not be new); every call must leave the page unchanged.
 */
static void
check_page(const char *what, const char *page, BlockNumber blkno,
		   bool page_functions)
{
	PGIOAlignedBlock copy;
	PGIOAlignedBlock saved;
	pg_checksum_block_fn chosen = pg_checksum_block_optimized;
	uint32		ref_block;
	uint16		ref_page = 0;

	/* the oracle, on a copy with pd_checksum zeroed */
	memcpy(saved.data, page, BLCKSZ);
	memcpy(copy.data, page, BLCKSZ);
	((PageHeader) copy.data)->pd_checksum = 0;
	ref_block = reference_checksum_block((PGChecksummablePage *) copy.data);
	if (page_functions)
	{
		memcpy(copy.data, page, BLCKSZ);
		ref_page = reference_checksum_page(copy.data, blkno);
	}

	for (int i = 0; i < n_impls; i++)
	{
		pg_checksum_block_fn fn = pg_checksum_impl_block(impls[i]);
		uint32		got = fn(page);
		bool		ok = got == ref_block;

		if (ok && page_functions)
		{
			uint16		p,
						r;

			pg_checksum_block_optimized = fn;
			p = pg_checksum_page(unconstify(char *, page), blkno);
			r = pg_checksum_page_readonly(page, blkno);
			pg_checksum_block_optimized = chosen;
			ok = p == ref_page && r == ref_page;
			got = (p != ref_page) ? p : r;
			if (!ok)
			{
				record(false, what, impls[i], blkno, ref_page, got);
				continue;
			}
		}
		if (ok && memcmp(page, saved.data, BLCKSZ) != 0)
		{
			record(false, "page changed by", impls[i], blkno, 0, 0);
			continue;
		}
		record(ok, what, impls[i], blkno, ref_block, got);
	}
}

/*
 * Fill a page with random words of one of four kinds, and make it not new
 * (pd_upper != 0) so that the page functions accept it.
 */
static void
random_page(char *page, int kind)
{
	static const uint32 special[] = {
		0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, FNV_PRIME, 0x0001FFFF, 0xFFFE0000
	};
	uint32	   *words = (uint32 *) page;
	int			n = BLCKSZ / sizeof(uint32);

	for (int i = 0; i < n; i++)
	{
		switch (kind)
		{
			case 0:				/* uniform */
				words[i] = pg_prng_uint32(&prng);
				break;
			case 1:				/* sparse: mostly zero */
				words[i] = pg_prng_uint32(&prng) % 64 == 0 ? pg_prng_uint32(&prng) : 0;
				break;
			case 2:				/* extremes of the multiply and the shift */
				words[i] = special[pg_prng_uint32(&prng) % lengthof(special)];
				break;
			default:			/* text-like bytes */
				words[i] = pg_prng_uint32(&prng) & 0x7F7F7F7F;
				break;
		}
	}
	if (((PageHeader) page)->pd_upper == 0)
		((PageHeader) page)->pd_upper = BLCKSZ;
}

static BlockNumber
random_blkno(void)
{
	if (pg_prng_uint32(&prng) % 8 == 0)
		return edge_blknos[pg_prng_uint32(&prng) % lengthof(edge_blknos)];
	return pg_prng_uint32(&prng);
}

/* n random pages of every kind, with random and edge-case block numbers */
static void
test_random_pages(int n)
{
	PGIOAlignedBlock page;

	for (int i = 0; i < n; i++)
	{
		random_page(page.data, i % 4);
		check_page("random page", page.data, random_blkno(), true);
	}
}

/*
 * One non-zero word at each position in an otherwise zero page: each column
 * and row lands in its own sum, in its own order.
 */
static void
test_single_words(void)
{
	PGIOAlignedBlock page;
	uint32	   *words = (uint32 *) page.data;

	for (int k = 0; k < BLCKSZ / (int) sizeof(uint32); k++)
	{
		memset(page.data, 0, BLCKSZ);
		words[k] = pg_prng_uint32(&prng) | 1;
		check_page("single word", page.data, 0, false);
		words[k] = 0xFFFFFFFF;
		check_page("single word 0xFFFFFFFF", page.data, 0, false);
	}
}

/*
 * pd_checksum is ignored, whatever it holds; its neighbours (pd_lsn before,
 * pd_flags and pd_lower after) count.
 */
static void
test_header_fields(void)
{
	static const uint16 values[] = {0, 1, 0x00FF, 0x8000, 0xFFFF};
	PGIOAlignedBlock page;
	PageHeader	phdr = (PageHeader) page.data;

	for (int r = 0; r < 16; r++)
	{
		random_page(page.data, r % 4);
		for (int i = 0; i < lengthof(values); i++)
		{
			phdr->pd_checksum = values[i];
			check_page("pd_checksum set", page.data, random_blkno(), true);
			phdr->pd_flags = values[i];
			check_page("pd_flags set", page.data, random_blkno(), true);
			phdr->pd_lower = values[i];
			check_page("pd_lower set", page.data, random_blkno(), true);
			phdr->pd_lsn.xlogid = ~(uint32) values[i];
			check_page("pd_lsn set", page.data, random_blkno(), true);
		}
	}
}

/*
 * An all-zero page is new: PageIsVerified() accepts it without a checksum
 * and pg_checksums skips it, so only the block functions see it.  An
 * all-ones page is not new.
 */
static void
test_uniform_pages(void)
{
	PGIOAlignedBlock page;

	memset(page.data, 0, BLCKSZ);
	if (!PageIsNew(page.data))
		record(false, "all-zero page is not new", PG_CHECKSUM_IMPL_SCALAR, 0, 0, 0);
	check_page("all-zero page", page.data, 0, false);

	memset(page.data, 0xFF, BLCKSZ);
	for (int i = 0; i < lengthof(edge_blknos); i++)
		check_page("all-ones page", page.data, edge_blknos[i], true);
}

/* a page at every 4-byte misalignment of a 64-byte boundary */
static void
test_alignment(void)
{
	char	   *buf = palloc(BLCKSZ + 128);
	char	   *base = (char *) TYPEALIGN(64, buf);

	for (int off = 0; off < 64; off += 4)
	{
		random_page(base + off, off % 4);
		check_page("misaligned page", base + off, random_blkno(), true);
	}
	pfree(buf);
}

/*
 * A page mapped read-only between two inaccessible pages: the variants and
 * both page functions must neither write into it nor read outside it.
 */
static void
test_readonly_mapping(void)
{
	long		os_page = sysconf(_SC_PAGESIZE);
	size_t		guard = Max(os_page, 4096);
	char	   *map;
	char	   *page;

	map = mmap(NULL, BLCKSZ + 2 * guard, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || BLCKSZ % guard != 0)
	{
		record(false, "read-only mapping could not be set up",
			   PG_CHECKSUM_IMPL_SCALAR, 0, 0, 0);
		return;
	}
	page = map + guard;
	if (mprotect(page, BLCKSZ, PROT_READ | PROT_WRITE) != 0)
		pg_fatal("mprotect: %m");
	random_page(page, 0);
	((PageHeader) page)->pd_checksum = 0xABCD;
	if (mprotect(page, BLCKSZ, PROT_READ) != 0)
		pg_fatal("mprotect: %m");
	check_page("read-only mapped page", page, random_blkno(), true);
	munmap(map, BLCKSZ + 2 * guard);
}

/* the functions of port/pg_checksum_simd.h besides the block functions */
static void
test_api(void)
{
	PgChecksumImpl chosen = pg_checksum_impl_chosen();

	record(pg_checksum_impl_block(PG_CHECKSUM_IMPL_SCALAR) != NULL,
		   "scalar variant available", PG_CHECKSUM_IMPL_SCALAR, 0, 1, 0);
	record(pg_checksum_impl_block(PG_CHECKSUM_IMPL_COUNT) == NULL,
		   "no variant past the last", PG_CHECKSUM_IMPL_SCALAR, 0, 1, 0);
	record(strcmp(pg_checksum_impl_name(PG_CHECKSUM_IMPL_AVX512), "avx512") == 0,
		   "name of avx512", PG_CHECKSUM_IMPL_AVX512, 0, 1, 0);
	record(pg_checksum_block_optimized == pg_checksum_impl_block(chosen),
		   "the chosen variant is the one called", chosen, 0, 1, 0);
	record(pg_checksum_impl_chosen() == chosen,
		   "the choice is made once", chosen, 0, 1, 0);
}

/*
 * Every block of relation segment files: the variants agree with the oracle
 * and, for pages that are not new, with the stored checksum.
 */
static void
test_files(int nfiles, char **files)
{
	PGIOAlignedBlock page;
	int64		blocks = 0,
				new_pages = 0;

	for (int f = 0; f < nfiles; f++)
	{
		const char *dot = strrchr(files[f], '.');
		const char *slash = strrchr(files[f], '/');
		BlockNumber segno = 0;
		int			fd;
		ssize_t		r;

		/* "16384.2" is segment 2 of relation 16384 */
		if (dot != NULL && (slash == NULL || dot > slash))
			segno = (BlockNumber) atoi(dot + 1);

		fd = open(files[f], O_RDONLY | PG_BINARY, 0);
		if (fd < 0)
			pg_fatal("could not open \"%s\": %m", files[f]);
		for (BlockNumber b = 0; (r = read(fd, page.data, BLCKSZ)) == BLCKSZ; b++)
		{
			BlockNumber blkno = segno * RELSEG_SIZE + b;
			bool		is_new = PageIsNew(page.data);
			char		what[MAXPGPATH + 64];

			snprintf(what, sizeof(what), "%s block %u", files[f], b);
			blocks++;
			if (is_new)
				new_pages++;
			check_page(what, page.data, blkno, !is_new);
			if (!is_new)
			{
				uint16		stored = ((PageHeader) page.data)->pd_checksum;
				uint16		computed = pg_checksum_page_readonly(page.data, blkno);

				snprintf(what, sizeof(what), "stored checksum of %s block %u",
						 files[f], b);
				record(stored == computed, what, pg_checksum_impl_chosen(),
					   blkno, stored, computed);
			}
		}
		if (r != 0)
			pg_fatal("\"%s\": %s", files[f],
					 r < 0 ? strerror(errno) : "size not a multiple of BLCKSZ");
		close(fd);
	}
	printf("%d files, " INT64_FORMAT " blocks (" INT64_FORMAT
		   " new: no checksum, as in PageIsVerified)\n",
		   nfiles, blocks, new_pages);
}

int
main(int argc, char **argv)
{
	uint64		seed = 0;
	bool		seeded = false;
	int			pages = 50000;
	int			argi = 1;

	pg_logging_init(argv[0]);

	/* choose first: the test then sets pg_checksum_block_optimized itself */
	(void) pg_checksum_impl_chosen();

	for (int i = 0; i < PG_CHECKSUM_IMPL_COUNT; i++)
		if (pg_checksum_impl_block((PgChecksumImpl) i) != NULL)
			impls[n_impls++] = (PgChecksumImpl) i;

	if (argc == 2 && strcmp(argv[1], "--chosen") == 0)
	{
		printf("%s\n", pg_checksum_impl_name(pg_checksum_impl_chosen()));
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--available") == 0)
	{
		for (int i = 0; i < n_impls; i++)
			printf("%s\n", pg_checksum_impl_name(impls[i]));
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "--files") == 0)
		test_files(argc - 2, argv + 2);
	else
	{
		for (; argi + 1 < argc; argi += 2)
		{
			if (strcmp(argv[argi], "--seed") == 0)
			{
				seed = strtou64(argv[argi + 1], NULL, 10);
				seeded = true;
			}
			else if (strcmp(argv[argi], "--pages") == 0)
				pages = atoi(argv[argi + 1]);
			else
				break;
		}
		if (argi != argc)
			pg_fatal("usage: %s [--seed N] [--pages N] | --files FILE... | --chosen | --available",
					 argv[0]);
		if (!seeded && !pg_strong_random(&seed, sizeof(seed)))
			pg_fatal("could not generate a random seed");
		pg_prng_seed(&prng, seed);
		printf("seed " UINT64_FORMAT ", %d random pages\n", seed, pages);

		test_api();
		test_random_pages(pages);
		test_single_words();
		test_header_fields();
		test_uniform_pages();
		test_alignment();
		test_readonly_mapping();
	}

	printf("variants:");
	for (int i = 0; i < n_impls; i++)
		printf(" %s", pg_checksum_impl_name(impls[i]));
	printf("\n" INT64_FORMAT " passed, " INT64_FORMAT " failed\n",
		   n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
