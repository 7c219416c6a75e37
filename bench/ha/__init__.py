"""``./pgnvm ha``: a highly available pgnvm cluster (Patroni on etcd), bench/ha/README.md."""
