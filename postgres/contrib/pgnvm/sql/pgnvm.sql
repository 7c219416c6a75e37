-- pgnvm extension: works in every engine; what the counters show depends on
-- the engine and is checked per engine by ./pgnvm test.
CREATE EXTENSION pgnvm;
SELECT engine = current_setting('nvm_storage_engine') AS engine_matches FROM pgnvm_stats;
-- one row per shared buffer (shared_buffers is reported in 8kB pages)
SELECT count(*) = (SELECT setting::int FROM pg_settings WHERE name = 'shared_buffers')
       AS one_row_per_buffer
  FROM pgnvm_buffers();
SELECT min(bufferid) = 1 AS first_is_1 FROM pgnvm_buffers();
-- only se2 redirects
SELECT current_setting('nvm_storage_engine') = 'se2' OR
       (redirects = 0 AND cow_copies = 0) AS redirects_only_in_se2
  FROM pgnvm_stats;
SELECT current_setting('nvm_storage_engine') = 'se2' OR
       NOT EXISTS (SELECT 1 FROM pgnvm_buffers() WHERE redirected) AS none_redirected
  ;
DROP EXTENSION pgnvm;
