/*-------------------------------------------------------------------------
 *
 * pg_checksum_simd_template.h
 *	  pgnvm: the vector variants of the page checksum's block function,
 *	  one body instantiated for each vector width.
 *
 * pg_checksum_simd.c includes this once per instruction set, with
 *
 *	  CV_NAME	  the function to define: static uint32 CV_NAME(const char *page)
 *	  CV_TARGET	  its target attribute ("avx2", "avx512f")
 *	  CV_TYPE	  a GCC vector type of uint32 as wide as the target's
 *				  registers (32 or 64 bytes)
 *
 * which are undefined at the end.  The body is checksum_impl.h's
 * pg_checksum_block() turned sideways: its inner loop over the N_SUMS
 * columns becomes N_SUMS / lanes vector operations per row (4 for AVX2, 2
 * for AVX-512), with CHECKSUM_COMP's operations on every lane: unsigned
 * 32-bit xor, multiply modulo 2^32 and logical shift, hence the same value
 * bit for bit.  A row is loaded with memcpy(), which compiles to unaligned
 * vector loads (pages are only 4-byte aligned by contract).  pd_checksum is
 * the low half of the first row's third word on x86 (little-endian): the
 * first row's first vector is ANDed with a mask that clears it.
 *
 * src/port/pg_checksum_simd_template.h
 *
 *-------------------------------------------------------------------------
 */

#define CV_LANES ((int) (sizeof(CV_TYPE) / sizeof(uint32)))
#define CV_VECS (N_SUMS / CV_LANES)

/* CHECKSUM_COMP of checksum_impl.h, on every lane */
#define CV_COMP(sum, value) \
do { \
	CV_TYPE		cv_tmp = (sum) ^ (value); \
	(sum) = (cv_tmp * FNV_PRIME) ^ (cv_tmp >> 17); \
} while (0)

pg_attribute_target(CV_TARGET)
static uint32
CV_NAME(const char *page)
{
	CV_TYPE		sums[CV_VECS];
	CV_TYPE		value;
	CV_TYPE		first_mask;
	CV_TYPE		zero = {0};
	uint32		mask_words[CV_LANES];
	uint32		result = 0;
	int			i,
				k;

	StaticAssertStmt(sizeof(sums) == ROW_BYTES,
					 "a row must be a whole number of vectors");

	/* initialize partial checksums to their corresponding offsets */
	memcpy(sums, checksumBaseOffsets, sizeof(sums));

	/* the first row, with pd_checksum (half of the third word) read as zero */
	for (i = 0; i < CV_LANES; i++)
		mask_words[i] = (i == 2) ? 0xFFFF0000 : 0xFFFFFFFF;
	memcpy(&first_mask, mask_words, sizeof(first_mask));
	for (k = 0; k < CV_VECS; k++)
	{
		memcpy(&value, page + k * sizeof(CV_TYPE), sizeof(value));
		if (k == 0)
			value &= first_mask;
		CV_COMP(sums[k], value);
	}

	/* main checksum calculation: the other rows */
	for (i = 1; i < BLCKSZ / (int) ROW_BYTES; i++)
		for (k = 0; k < CV_VECS; k++)
		{
			memcpy(&value, page + i * ROW_BYTES + k * sizeof(CV_TYPE),
				   sizeof(value));
			CV_COMP(sums[k], value);
		}

	/* finally add in two rounds of zeroes for additional mixing */
	for (i = 0; i < 2; i++)
		for (k = 0; k < CV_VECS; k++)
			CV_COMP(sums[k], zero);

	/* xor fold partial checksums together */
	for (k = 0; k < CV_VECS; k++)
		for (i = 0; i < CV_LANES; i++)
			result ^= sums[k][i];

	return result;
}

#undef CV_COMP
#undef CV_LANES
#undef CV_VECS
#undef CV_NAME
#undef CV_TARGET
#undef CV_TYPE
