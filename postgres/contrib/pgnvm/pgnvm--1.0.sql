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
    OUT bytes_not_copied bigint)
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

CREATE VIEW pgnvm_stats AS SELECT * FROM pgnvm_stats();

REVOKE ALL ON FUNCTION pgnvm_buffers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgnvm_buffers() TO pg_monitor;
