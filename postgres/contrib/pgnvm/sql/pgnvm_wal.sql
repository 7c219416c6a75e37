-- pgnvm_wal() (1.2): how WAL is written; checked in every engine and in both
-- nvm_wal modes (./pgnvm test runs base+walpmem with nvm_wal = pmem)
CREATE EXTENSION pgnvm;
SELECT mode = current_setting('nvm_wal') AS mode_matches FROM pgnvm_wal();
-- file: nothing mapped, nothing counted; pmem: a granularity was probed
SELECT CASE mode
         WHEN 'file' THEN granularity IS NULL AND bytes_written = 0
                          AND copies = 0 AND persists = 0 AND mappings = 0
                          AND populates_locked = 0 AND populates_unlocked = 0
         ELSE granularity IN ('byte', 'cache-line', 'page')
       END AS consistent
  FROM pgnvm_wal();
-- a commit that writes WAL: with pmem it is copied and persisted
CREATE TEMP TABLE before AS SELECT * FROM pgnvm_wal();
CREATE TABLE pgnvm_wal_t (a int);
INSERT INTO pgnvm_wal_t SELECT generate_series(1, 1000);
SELECT CASE w.mode
         WHEN 'file' THEN w.bytes_written = 0
         ELSE w.bytes_written > b.bytes_written AND w.copies > b.copies
              AND w.persists > b.persists AND w.mappings >= 1
       END AS counted
  FROM pgnvm_wal() w, before b;
DROP TABLE pgnvm_wal_t;
-- nvm_wal is set at server start
SET nvm_wal = 'pmem';
DROP EXTENSION pgnvm;
