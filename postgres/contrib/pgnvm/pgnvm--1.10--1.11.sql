/* contrib/pgnvm/pgnvm--1.10--1.11.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.11'" to load this file. \quit

-- 1.11: the counter prunes_deferred (on-access prunes a read-only heap fetch
-- of se2 left to the page's next change, because the page was read in place:
-- postgres patch 0027).  pgnvm_stats() lists the counters, so it and the view
-- are declared again; pgnvm_counters() and pgnvm_backend_counters() need no
-- change.
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
    OUT prunes_deferred bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_stats'
LANGUAGE C STRICT PARALLEL SAFE;

-- Counters of the storage engines, summed over all processes since the
-- server started; a redirected miss is a block that was not copied.
CREATE VIEW pgnvm_stats AS
    SELECT s.*,
           s.redirects * current_setting('block_size')::bigint AS bytes_not_copied
      FROM pgnvm_stats() s;
