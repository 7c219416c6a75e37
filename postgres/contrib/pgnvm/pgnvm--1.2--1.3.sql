/* contrib/pgnvm/pgnvm--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.3'" to load this file. \quit

-- 1.3: counter persisted_writes (nvm_data_persist = pmem: blocks written
-- back through a mapping and made durable at once), after mapped_writes, as
-- in storage/nvm_stats.h.
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
