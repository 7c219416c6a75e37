/* contrib/pgnvm/pgnvm--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.1'" to load this file. \quit

-- 1.1: the counters have one definition, storage/nvm_stats.h.  pgnvm_stats()
-- returns them in that order (the server checks the declaration below
-- against it), and pgnvm_counters() returns them as rows, for programs.
-- bytes_not_copied, derived from redirects, is now computed by the view.
DROP VIEW pgnvm_stats;
DROP FUNCTION pgnvm_stats();

CREATE FUNCTION pgnvm_stats(
    OUT engine text,
    OUT mapped_reads bigint,
    OUT mapped_writes bigint,
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

-- The counters, one row each, with what they count.
CREATE FUNCTION pgnvm_counters(
    OUT counter text,
    OUT value bigint,
    OUT description text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pgnvm_counters'
LANGUAGE C STRICT PARALLEL SAFE;

-- Counters of the storage engines, summed over all processes since the
-- server started; a redirected miss is a block that was not copied.
CREATE VIEW pgnvm_stats AS
    SELECT s.*,
           s.redirects * current_setting('block_size')::bigint AS bytes_not_copied
      FROM pgnvm_stats() s;
