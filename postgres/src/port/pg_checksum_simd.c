/*-------------------------------------------------------------------------
 *
 * pg_checksum_simd.c
 *	  pgnvm: the block function of the page checksum in a scalar variant and
 *	  in vector variants (AVX2, AVX-512), one of them chosen at run time.
 *
 * The page checksum (storage/checksum_impl.h) keeps N_SUMS = 32 independent
 * FNV-1a-like sums, one per 32-bit column of the page seen as a 64 x 32
 * array of words, and was designed to vectorize: the 32 sums fill exactly
 * four AVX2 registers or two AVX-512 registers.  The vector variants advance
 * a whole row per step where the scalar loop advances one column, with the
 * same operations on the same values, so every variant computes the same
 * checksum bit for bit.  With data checksums on, se2 verifies every page it
 * reads in place, and this function was 37-43% of some TPC-H queries.
 *
 * Every variant reads pd_checksum as zero and never writes into the page: the
 * same function serves pg_checksum_page() and pg_checksum_page_readonly()
 * (the pages se2 verifies in its read-only mapping).  The scalar variant is
 * checksum_impl.h's block function, given a copy of the first row with
 * pd_checksum zeroed; the vector variants (pg_checksum_simd_template.h, one
 * body for both widths) mask the field in a register.
 *
 * The first call of pg_checksum_block_optimized() chooses the variant, as
 * pg_crc32c_sse42_choose.c does for CRC-32C: the one named by the environment
 * variable PGNVM_CHECKSUM_IMPL (scalar, avx2 or avx512; unset, empty or
 * "auto": choose), else the widest one the CPU offers and the operating
 * system enables (XGETBV: it saves the registers on a context switch).  An
 * unknown name, or a variant that this CPU or this build lacks, is an error
 * (FATAL in the server, exit status 1 in other programs): a forced variant
 * serves tests, which must not silently get another one.
 *
 * This file is compiled into libpgport (pg_checksums, pg_upgrade and any
 * program including checksum_impl.h) and libpgport_srv (the server).  The
 * vector variants need no global -m flags: function target attributes.  They
 * exist on x86-64 when the compiler has GCC's <cpuid.h> and the _xgetbv()
 * intrinsic (configure's HAVE__GET_CPUID_COUNT and HAVE_XSAVE_INTRINSICS);
 * compilers with those (GCC 8+, clang) also have GCC's vector extension and
 * understand the "avx2" and "avx512f" targets.
 *
 * IDENTIFICATION
 *	  src/port/pg_checksum_simd.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#if defined(__x86_64__) && defined(HAVE__GET_CPUID) && \
	defined(HAVE__GET_CPUID_COUNT) && defined(HAVE_XSAVE_INTRINSICS)
#define CHECKSUM_X86_SIMD 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* the algorithm's constants and its scalar block function, not the pages' */
#define PG_CHECKSUM_BLOCK_ONLY
#include "storage/checksum_impl.h"

#include "port/pg_checksum_simd.h"

/* bytes of one row: one word of each of the N_SUMS sums */
#define ROW_BYTES (sizeof(uint32) * N_SUMS)

/*
 * The scalar variant: checksum_impl.h's loop, with the first row taken from a
 * copy in which pd_checksum is zeroed.
 */
static uint32
pg_checksum_block_scalar(const char *page)
{
	union
	{
		PageHeaderData phdr;
		uint32		row[N_SUMS];
	}			first;

	memcpy(first.row, page, sizeof(first.row));
	first.phdr.pd_checksum = 0;
	return pg_checksum_block(first.row, (const PGChecksummablePage *) page);
}

#ifdef CHECKSUM_X86_SIMD

/* the template's mask: pd_checksum is the low half of the third word */
StaticAssertDecl(offsetof(PageHeaderData, pd_checksum) == 2 * sizeof(uint32) &&
				 sizeof(((PageHeaderData *) NULL)->pd_checksum) == 2,
				 "pd_checksum must be the low half of the page's third word");

/* vectors of uint32 (GCC's vector extension, also clang's) */
typedef uint32 ChecksumVec256 __attribute__((vector_size(32)));
typedef uint32 ChecksumVec512 __attribute__((vector_size(64)));

/* the AVX2 variant: the 32 sums in four registers of 8 lanes */
#define CV_NAME pg_checksum_block_avx2
#define CV_TARGET "avx2"
#define CV_TYPE ChecksumVec256
#include "pg_checksum_simd_template.h"

/* the AVX-512 variant: in two registers of 16 lanes; AVX-512F only */
#define CV_NAME pg_checksum_block_avx512
#define CV_TARGET "avx512f"
#define CV_TYPE ChecksumVec512
#include "pg_checksum_simd_template.h"

/*
 * Does the operating system save the register states of xcr0_bits (XGETBV)?
 * Asks CPUID first whether XGETBV may be used (OSXSAVE).
 */
pg_attribute_target("xsave")
static bool
os_saves_registers(uint64 xcr0_bits)
{
	unsigned int eax,
				ebx,
				ecx,
				edx;

	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) ||
		(ecx & (1 << 27)) == 0) /* OSXSAVE */
		return false;
	return (_xgetbv(0) & xcr0_bits) == xcr0_bits;
}

/*
 * Does CPUID leaf 7 report the feature bit of register EBX?
 */
static bool
cpuid7_ebx_has(int bit)
{
	unsigned int eax,
				ebx,
				ecx,
				edx;

	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
		return false;
	return (ebx & (1U << bit)) != 0;
}

#endif							/* CHECKSUM_X86_SIMD */

/*
 * Can this process run variant impl: built in, and supported by the CPU and
 * the operating system?
 */
static bool
impl_available(PgChecksumImpl impl)
{
	switch (impl)
	{
		case PG_CHECKSUM_IMPL_SCALAR:
			return true;
#ifdef CHECKSUM_X86_SIMD
		case PG_CHECKSUM_IMPL_AVX2:
			/* XMM and YMM state; AVX2 */
			return os_saves_registers(0x06) && cpuid7_ebx_has(5);
		case PG_CHECKSUM_IMPL_AVX512:
			/* also opmask and both halves of ZMM state; AVX-512F */
			return os_saves_registers(0xe6) && cpuid7_ebx_has(16);
#endif
		default:
			return false;
	}
}

/*
 * The block function of variant impl, or NULL if this process cannot run it.
 */
pg_checksum_block_fn
pg_checksum_impl_block(PgChecksumImpl impl)
{
	if (!impl_available(impl))
		return NULL;
	switch (impl)
	{
		case PG_CHECKSUM_IMPL_SCALAR:
			return pg_checksum_block_scalar;
#ifdef CHECKSUM_X86_SIMD
		case PG_CHECKSUM_IMPL_AVX2:
			return pg_checksum_block_avx2;
		case PG_CHECKSUM_IMPL_AVX512:
			return pg_checksum_block_avx512;
#endif
		default:
			return NULL;
	}
}

/*
 * The name of variant impl, as PGNVM_CHECKSUM_IMPL spells it.
 */
const char *
pg_checksum_impl_name(PgChecksumImpl impl)
{
	switch (impl)
	{
		case PG_CHECKSUM_IMPL_SCALAR:
			return "scalar";
		case PG_CHECKSUM_IMPL_AVX2:
			return "avx2";
		case PG_CHECKSUM_IMPL_AVX512:
			return "avx512";
	}
	return "unknown";
}

/*
 * Report a PGNVM_CHECKSUM_IMPL value that cannot be honoured, and end the
 * process: FATAL in the server, exit status 1 elsewhere.
 */
pg_noreturn static void
impl_env_error(const char *value, const char *problem)
{
#ifndef FRONTEND
	ereport(FATAL,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for environment variable %s: \"%s\"",
					PG_CHECKSUM_IMPL_ENV, value),
			 errdetail_internal("%s", problem)));
#else
	fprintf(stderr, _("invalid value for environment variable %s: \"%s\": %s\n"),
			PG_CHECKSUM_IMPL_ENV, value, problem);
	exit(1);
#endif
}

/* the chosen variant; valid once pg_checksum_block_optimized is not the chooser */
static PgChecksumImpl chosen_impl = PG_CHECKSUM_IMPL_SCALAR;

static uint32 pg_checksum_block_choose(const char *page);

pg_checksum_block_fn pg_checksum_block_optimized = pg_checksum_block_choose;

/*
 * Choose the variant (once; later calls return the first choice): the one
 * PGNVM_CHECKSUM_IMPL names, or the widest available.  Concurrent first calls
 * in threads of one process reach the same choice, so no lock is needed.
 */
PgChecksumImpl
pg_checksum_impl_chosen(void)
{
	const char *value;
	int			impl;

	if (pg_checksum_block_optimized != pg_checksum_block_choose)
		return chosen_impl;

	value = getenv(PG_CHECKSUM_IMPL_ENV);
	if (value == NULL || value[0] == '\0' || strcmp(value, "auto") == 0)
	{
		impl = PG_CHECKSUM_IMPL_COUNT - 1;
		while (!impl_available((PgChecksumImpl) impl))
			impl--;
	}
	else
	{
		for (impl = 0; impl < PG_CHECKSUM_IMPL_COUNT; impl++)
			if (strcmp(value, pg_checksum_impl_name((PgChecksumImpl) impl)) == 0)
				break;
		if (impl == PG_CHECKSUM_IMPL_COUNT)
			impl_env_error(value, "known variants: scalar, avx2, avx512, auto");
		if (!impl_available((PgChecksumImpl) impl))
			impl_env_error(value, "this CPU or this build lacks that variant");
	}

	chosen_impl = (PgChecksumImpl) impl;
	pg_checksum_block_optimized = pg_checksum_impl_block(chosen_impl);
	return chosen_impl;
}

/*
 * The first value of pg_checksum_block_optimized: choose, then checksum with
 * the chosen variant, which later calls reach directly.
 */
static uint32
pg_checksum_block_choose(const char *page)
{
	(void) pg_checksum_impl_chosen();
	return pg_checksum_block_optimized(page);
}
