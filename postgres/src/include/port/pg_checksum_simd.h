/*-------------------------------------------------------------------------
 *
 * pg_checksum_simd.h
 *	  pgnvm: the block function of the page checksum, chosen at run time
 *	  among a scalar variant and vector variants (AVX2, AVX-512) that compute
 *	  the same value.
 *
 * storage/checksum_impl.h calls pg_checksum_block_optimized() for every
 * page it checksums; src/port/pg_checksum_simd.c (libpgport) implements it.
 * The variant is chosen on the first call: the one named by the environment
 * variable PGNVM_CHECKSUM_IMPL (scalar, avx2 or avx512), or without it the
 * widest one the CPU supports.  The other functions are for tests and
 * benchmarks, which compare and time the variants side by side.
 *
 * src/include/port/pg_checksum_simd.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_CHECKSUM_SIMD_H
#define PG_CHECKSUM_SIMD_H

/* the variants, narrowest first */
typedef enum PgChecksumImpl
{
	PG_CHECKSUM_IMPL_SCALAR,
	PG_CHECKSUM_IMPL_AVX2,
	PG_CHECKSUM_IMPL_AVX512,
} PgChecksumImpl;

#define PG_CHECKSUM_IMPL_COUNT (PG_CHECKSUM_IMPL_AVX512 + 1)

/* the environment variable that forces a variant */
#define PG_CHECKSUM_IMPL_ENV "PGNVM_CHECKSUM_IMPL"

/*
 * A block function: the 32-bit checksum of a BLCKSZ page (aligned on at
 * least 4 bytes) before the block number is mixed in, with pd_checksum read
 * as zero.  It never writes into the page.
 */
typedef uint32 (*pg_checksum_block_fn) (const char *page);

/* the chosen variant (the first call chooses) */
extern PGDLLIMPORT pg_checksum_block_fn pg_checksum_block_optimized;

extern PgChecksumImpl pg_checksum_impl_chosen(void);
extern const char *pg_checksum_impl_name(PgChecksumImpl impl);
extern pg_checksum_block_fn pg_checksum_impl_block(PgChecksumImpl impl);

#endif							/* PG_CHECKSUM_SIMD_H */
