"""``./pgnvm oltp``: YCSB core workloads and TPC-B through pgbench over the storage
configurations (paper 003's OLTP experiments), see bench/oltp/README.md."""
