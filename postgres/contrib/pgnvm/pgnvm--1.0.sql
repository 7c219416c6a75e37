/* contrib/pgnvm/pgnvm--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pgnvm" to load this file. \quit

-- Counters of the storage engines, summed over all processes since the
-- server started.
CREATE FUNCTION pgnvm_stats(
    OUT engine text,
    OUT mapped_reads bigint,
    OUT mapped_writes bigint,
    OUT redirects bigint,
    OUT cow_copies bigint,
    OUT hints_skipped bigint,
    OUT bytes_not_copied bigint,
    OUT prefetch_jobs bigint,
    OUT prefetch_bytes bigint,
    OUT prefetch_dropped bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_stats'
LANGUAGE C STRICT PARALLEL SAFE;

-- One row per shared buffer: is its page read in place from the relation
-- file (se2)?
CREATE FUNCTION pgnvm_buffers(
    OUT bufferid integer,
    OUT redirected boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pgnvm_buffers'
LANGUAGE C STRICT PARALLEL SAFE;

-- The calling process's prefetch helper threads (nvm_prefetch = helper).
CREATE FUNCTION pgnvm_prefetch(
    OUT mode text,
    OUT mapping text,
    OUT distance integer,
    OUT helpers integer,
    OUT scheme text,
    OUT fallback text,
    OUT helper_tids integer[],
    OUT helper_cpus integer[],
    OUT jobs_enqueued bigint,
    OUT jobs_dropped bigint,
    OUT jobs_done bigint,
    OUT jobs_skipped bigint,
    OUT fault_errors bigint,
    OUT helper_cpu_ms double precision)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_prefetch'
LANGUAGE C STRICT PARALLEL RESTRICTED;

CREATE VIEW pgnvm_stats AS SELECT * FROM pgnvm_stats();

REVOKE ALL ON FUNCTION pgnvm_buffers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgnvm_buffers() TO pg_monitor;
