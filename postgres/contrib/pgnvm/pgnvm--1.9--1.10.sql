/* contrib/pgnvm/pgnvm--1.9--1.10.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.10'" to load this file. \quit

-- 1.10: se2 keeps no views per buffer after the pin any more (a pin's view is
-- computed from the buffer's tag through the process's cache of segment
-- mappings, docs/storage-engines.md H4g), so view_chunks_dropped is gone;
-- views_kept, views_resolved, views_stale and view_mismatches now count the
-- views taken through that cache, its look-ups, its entries found stale and
-- its entries that failed the mapping check.  pgnvm_stats() lists the
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
    OUT view_mismatches bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_stats'
LANGUAGE C STRICT PARALLEL SAFE;

-- Counters of the storage engines, summed over all processes since the
-- server started; a redirected miss is a block that was not copied.
CREATE VIEW pgnvm_stats AS
    SELECT s.*,
           s.redirects * current_setting('block_size')::bigint AS bytes_not_copied
      FROM pgnvm_stats() s;
