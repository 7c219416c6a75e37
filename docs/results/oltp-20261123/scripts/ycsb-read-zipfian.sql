\set k permute(random_zipfian(0, :records - 1, 1.001), :records) + 1
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9 FROM usertable WHERE ycsb_key = :k;
