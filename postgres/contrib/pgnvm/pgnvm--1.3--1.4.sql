/* contrib/pgnvm/pgnvm--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.4'" to load this file. \quit

-- 1.4: three counters after prefetch_dropped, as in storage/nvm_stats.h:
-- redirected pages whose checksum a prefetch helper verified (its verdict
-- used by the backend), those the backend verified itself, and those a
-- helper found invalid.  pgnvm_stats() lists the counters, so it and the
-- view are declared again; pgnvm_counters() needs no change.
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
    OUT mapping_fallbacks bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_stats'
LANGUAGE C STRICT PARALLEL SAFE;

-- Counters of the storage engines, summed over all processes since the
-- server started; a redirected miss is a block that was not copied.
CREATE VIEW pgnvm_stats AS
    SELECT s.*,
           s.redirects * current_setting('block_size')::bigint AS bytes_not_copied
      FROM pgnvm_stats() s;
