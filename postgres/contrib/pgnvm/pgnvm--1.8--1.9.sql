/* contrib/pgnvm/pgnvm--1.8--1.9.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.9'" to load this file. \quit

-- 1.9: pgnvm_wal() says where the pmem write path pre-faults its mappings
-- (docs/storage-engines.md, W10): calls made under WALWriteLock (a copy's
-- pages not pre-faulted before), calls made by a committing backend before it
-- queues on the lock, and the time of the former (populate_ms stays the
-- time of both).
DROP FUNCTION pgnvm_wal();

CREATE FUNCTION pgnvm_wal(
    OUT mode text,
    OUT granularity text,
    OUT forced_granularity text,
    OUT bytes_written bigint,
    OUT copies bigint,
    OUT persists bigint,
    OUT mappings bigint,
    OUT mapping_failures bigint,
    OUT populate_ms float8,
    OUT populates_locked bigint,
    OUT populates_unlocked bigint,
    OUT populate_locked_ms float8)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_wal'
LANGUAGE C STRICT PARALLEL SAFE;
