\set k permute(random_zipfian(0, :records - 1, 1.001), :records) + 1
\set v random(0, 2147483647)
UPDATE usertable SET field1 = substr(repeat(md5(:v::text), 4), 1, 100) WHERE ycsb_key = :k;
