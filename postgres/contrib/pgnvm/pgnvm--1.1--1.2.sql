/* contrib/pgnvm/pgnvm--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.2'" to load this file. \quit

-- 1.2: how this server writes WAL (nvm_wal, access/nvm_wal.h): the mode; the
-- store granularity libpmem2 found in pg_wal at server start (byte, cache
-- line, page; NULL with nvm_wal = file) and PMEM2_FORCE_GRANULARITY if the
-- server was started with it; the pmem write path's counters, summed over
-- all processes since start.
CREATE FUNCTION pgnvm_wal(
    OUT mode text,
    OUT granularity text,
    OUT forced_granularity text,
    OUT bytes_written bigint,
    OUT copies bigint,
    OUT persists bigint,
    OUT mappings bigint,
    OUT mapping_failures bigint,
    OUT populate_ms float8)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_wal'
LANGUAGE C STRICT PARALLEL SAFE;
