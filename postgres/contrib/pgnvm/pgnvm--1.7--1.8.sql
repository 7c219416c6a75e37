/* contrib/pgnvm/pgnvm--1.7--1.8.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.8'" to load this file. \quit

-- 1.8: pgnvm_pool() gains two counters of se2's hybrid pool, after
-- slot_writes: the background writer's pass ahead of the slot clock
-- (docs/storage-engines.md, H5a): dirty slot owners it wrote back, and clean
-- ones it demoted onto the free list (also counted in demotions).
DROP FUNCTION pgnvm_pool();

CREATE FUNCTION pgnvm_pool(
    OUT hybrid boolean,
    OUT descriptors bigint,
    OUT descriptors_in_use bigint,
    OUT redirected bigint,
    OUT copied bigint,
    OUT slots bigint,
    OUT slots_in_use bigint,
    OUT slots_in_use_peak bigint,
    OUT slots_free bigint,
    OUT slots_held bigint,
    OUT redirected_with_slot bigint,
    OUT slot_map_mismatches bigint,
    OUT demotions bigint,
    OUT slot_evictions bigint,
    OUT slot_writes bigint,
    OUT cleaner_writes bigint,
    OUT cleaner_demotions bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_pool'
LANGUAGE C STRICT PARALLEL SAFE;

REVOKE ALL ON FUNCTION pgnvm_pool() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgnvm_pool() TO pg_monitor;
