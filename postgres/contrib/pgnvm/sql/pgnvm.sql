-- pgnvm extension: works in every engine; what the counters show depends on
-- the engine and is checked per engine by ./pgnvm test.
CREATE EXTENSION pgnvm;
SELECT engine = current_setting('nvm_storage_engine') AS engine_matches FROM pgnvm_stats;
-- the counters (storage/nvm_stats.h), and the view's columns are exactly these
SELECT counter, value >= 0 AS counted, description <> '' AS described
  FROM pgnvm_counters();
SELECT array_agg(c.counter ORDER BY c.ord) =
       (SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
         WHERE attrelid = 'pgnvm_stats'::regclass AND attnum > 0
           AND attname NOT IN ('engine', 'bytes_not_copied')) AS view_matches_counters
  FROM pgnvm_counters() WITH ORDINALITY AS c(counter, value, description, ord);
SELECT bytes_not_copied = redirects * 8192 AS bytes_derived FROM pgnvm_stats;
-- one process's counters (1.5): the same counters, in the same order; no rows
-- for a PID that is no server process's, nor for NULL
SELECT array_agg(b.counter ORDER BY b.ord) =
       (SELECT array_agg(c.counter ORDER BY c.ord)
          FROM pgnvm_counters() WITH ORDINALITY AS c(counter, value, description, ord))
       AS same_counters,
       bool_and(b.value >= 0 AND b.description <> '') AS counted
  FROM pgnvm_backend_counters(pg_backend_pid())
       WITH ORDINALITY AS b(counter, value, description, ord);
SELECT count(*) AS rows_for_no_process FROM pgnvm_backend_counters(0);
SELECT count(*) AS rows_for_null FROM pgnvm_backend_counters(NULL);
-- one row per shared buffer (its descriptor: with se2's hybrid pool,
-- nvm_buffer_descriptors; else shared_buffers, reported in 8kB pages)
SELECT count(*) = (SELECT descriptors FROM pgnvm_pool()) AND
       count(*) >= (SELECT setting::int FROM pg_settings WHERE name = 'shared_buffers')
       AS one_row_per_buffer
  FROM pgnvm_buffers();
SELECT min(bufferid) = 1 AS first_is_1 FROM pgnvm_buffers();
-- the pool (1.6): shared_buffers is the slots (the DRAM for pages), as many as
-- descriptors unless the pool is hybrid; slots within the budget, none for a
-- redirected buffer (se2's hybrid pool), the maps agree
SELECT hybrid = (current_setting('nvm_buffer_descriptors') <> '0') AS hybrid_matches,
       slots = (SELECT setting::int FROM pg_settings
                WHERE name = 'shared_buffers') AS slots_are_shared_buffers,
       (slots < descriptors) = hybrid AND slots <= descriptors AS slots_within_descriptors,
       slots_in_use <= slots AND slots_in_use_peak <= slots AS within_budget,
       redirected_with_slot = 0 AS redirected_hold_no_slot,
       slot_map_mismatches = 0 AS maps_agree
  FROM pgnvm_pool();
-- only se2 redirects
SELECT current_setting('nvm_storage_engine') = 'se2' OR
       (redirects = 0 AND cow_copies = 0) AS redirects_only_in_se2
  FROM pgnvm_stats;
SELECT current_setting('nvm_storage_engine') = 'se2' OR
       NOT EXISTS (SELECT 1 FROM pgnvm_buffers() WHERE redirected) AS none_redirected
  ;
-- pgnvm_prefetch(): this backend's settings; no helper threads before a
-- redirected scan wants them, and none at all unless nvm_prefetch = helper
SELECT mode = current_setting('nvm_prefetch') AS mode_matches,
       mapping = current_setting('nvm_prefetch_mapping') AS mapping_matches,
       distance = (SELECT setting::int FROM pg_settings
                   WHERE name = 'nvm_prefetch_distance') AS distance_matches,
       helpers = 0 AS no_helpers_yet,
       helper_tids IS NULL AND jobs_enqueued IS NULL AS no_pool
  FROM pgnvm_prefetch();
-- only se2 prefetches
SELECT current_setting('nvm_storage_engine') = 'se2' OR
       (prefetch_jobs = 0 AND prefetch_dropped = 0) AS prefetch_only_in_se2
  FROM pgnvm_stats;
-- the mapping is checked when it is set
SET nvm_prefetch_mapping = 'm4';
SET nvm_prefetch_mapping = '3-1';
SET nvm_prefetch_mapping = '0-1, 3';
SHOW nvm_prefetch_mapping;
RESET nvm_prefetch_mapping;
DROP EXTENSION pgnvm;
-- an installation of version 1.0 (counters listed in its own order): the
-- server refuses its pgnvm_stats() instead of mislabelling the counters
CREATE EXTENSION pgnvm VERSION '1.0';
SELECT redirects FROM pgnvm_stats;
ALTER EXTENSION pgnvm UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pgnvm';
SELECT engine = current_setting('nvm_storage_engine') AS engine_matches FROM pgnvm_stats;
DROP EXTENSION pgnvm;
