/* contrib/pgnvm/pgnvm--1.4--1.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgnvm UPDATE TO '1.5'" to load this file. \quit

-- 1.5: the counters of one server process, by PID, as rows like
-- pgnvm_counters(); no rows if no live server process has that PID.  A
-- process's work is the difference of two readings taken while it lives
-- (its slot goes on from what earlier holders of its PGPROC counted); unlike
-- the sums, that difference leaves out autovacuum and other sessions.
CREATE FUNCTION pgnvm_backend_counters(
    pid integer,
    OUT counter text,
    OUT value bigint,
    OUT description text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pgnvm_backend_counters'
LANGUAGE C STRICT PARALLEL SAFE;
