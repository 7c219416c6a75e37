/* contrib/pgnvm/pgnvm--1.5--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.6'" to load this file. \quit

-- 1.6: the buffer pool's descriptors and DRAM slots (se2's hybrid pool:
-- nvm_buffer_descriptors), one row; redirected_with_slot and
-- slot_map_mismatches must read 0 at any time.  Without the hybrid pool
-- every descriptor owns its slot for good (slots = descriptors).
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
    OUT slot_writes bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'pgnvm_pool'
LANGUAGE C STRICT PARALLEL SAFE;

REVOKE ALL ON FUNCTION pgnvm_pool() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgnvm_pool() TO pg_monitor;
