#!/bin/bash
# pg_shmem_allocations of base, se1, se2 and se2's hybrid pool, shared_buffers 16 MB
# (and nvm_buffer_descriptors 64 MB / 256 MB), one fresh cluster, huge_pages off.
# usage: measure.sh BINDIR OUTDIR PORT
set -euo pipefail
B=$1; OUT=$2; PORT=$3
D=/mnt/pgnvm/nvm/sizing-meas
rm -rf "$D"; mkdir -p "$D" "$OUT"; chown pgnvm "$D"
runuser -u pgnvm -- "$B/initdb" -D "$D/data" -A trust --data-checksums >/dev/null
for cfg in base:0 se1:0 se2:0 se2:64MB se2:256MB; do
  eng=${cfg%%:*}; desc=${cfg#*:}
  runuser -u pgnvm -- "$B/pg_ctl" -D "$D/data" -l "$D/log" -w \
    -o "-p $PORT -c listen_addresses= -c unix_socket_directories=$D -c huge_pages=off -c shared_buffers=16MB -c nvm_storage_engine=$eng -c nvm_buffer_descriptors=$desc -c io_method=worker" start >/dev/null
  runuser -u pgnvm -- "$B/psql" -h "$D" -p "$PORT" -d postgres -AtF' ' -c \
    "SELECT coalesce(name, '<free>'), size, allocated_size FROM pg_shmem_allocations ORDER BY 1" \
    > "$OUT/alloc-$eng-$desc.txt"
  runuser -u pgnvm -- "$B/psql" -h "$D" -p "$PORT" -d postgres -AtF' ' -c \
    "SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers','nvm_buffer_descriptors','transaction_buffers','subtransaction_buffers','commit_timestamp_buffers','wal_buffers','io_max_concurrency','shared_memory_size') ORDER BY 1" \
    > "$OUT/settings-$eng-$desc.txt"
  runuser -u pgnvm -- "$B/pg_ctl" -D "$D/data" -w stop >/dev/null
done
rm -rf "$D"
