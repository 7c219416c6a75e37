/* contrib/pgnvm/pgnvm--1.6--1.7.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.7'" to load this file. \quit

-- 1.7: five counters after mapping_fallbacks, as in storage/nvm_stats.h: se2's
-- views kept across pins (docs/storage-engines.md, H4): pins that took a kept
-- view again, pins that looked the page up, kept views found stale, kept
-- views whose generation matched the wrong block (must be 0), and chunks of
-- kept views dropped to stay within nvm_view_memory.  pgnvm_stats() lists the
-- counters, so it and the view are declared again; pgnvm_counters() and
-- pgnvm_backend_counters() need no change.
DROP VIEW pgnvm_stats;
DROP FUNCTION pgnvm_stats();

CREATE FUNCTION pgnvm_stats(
    OUT engine text,
    OUT mapped_reads bigint,
    OUT mapped_writes bigint,
    OUT persisted_writes bigint,
    OUT redirects bigint,
    OUT cow_copies bigint,
    OUT hints_skipped bigint,
    OUT prefetch_jobs bigint,
    OUT prefetch_bytes bigint,
    OUT prefetch_dropped bigint,
    OUT verified_by_helper bigint,
    OUT verified_by_backend bigint,
    OUT helper_verify_failed bigint,
    OUT mappings_created bigint,
    OUT mappings_evicted bigint,
    OUT mapping_fallbacks bigint,
    OUT views_kept bigint,
    OUT views_resolved bigint,
    OUT views_stale bigint,
    OUT view_mismatches bigint,
    OUT view_chunks_dropped bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_stats'
LANGUAGE C STRICT PARALLEL SAFE;

-- Counters of the storage engines, summed over all processes since the
-- server started; a redirected miss is a block that was not copied.
CREATE VIEW pgnvm_stats AS
    SELECT s.*,
           s.redirects * current_setting('block_size')::bigint AS bytes_not_copied
      FROM pgnvm_stats() s;
