#!/bin/bash
# HTAP A/B after 0028: YCSB-A zipfian 8 clients + 1 client of forced seq scans (count(*)),
# hybrid pool at 1/128 (11MB slots, 2304MB descriptors), lead's oltp4k cluster.
# usage: htap.sh LABEL HOME   (PERF=1: perf record -a during the 60 s)
set -u
L=$1; H=$2; export PGNVM_HOME=$H; cd /work/main
D=/tmp/w29/htap; O=$D/$L; mkdir -p $O; chmod 777 $D $O
C=""; for kv in shared_buffers=11MB max_wal_size=5GB checkpoint_timeout=30min max_connections=100 jit=off track_io_timing=on log_checkpoints=on log_min_duration_statement=-1 io_method=worker fsync=on synchronous_commit=on full_page_writes=on nvm_buffer_descriptors=2304MB; do C="$C -c $kv"; done
PGNVM_HOME=/var/lib/pgnvm-lead ./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null 2>&1
./pgnvm cluster start --name oltp4k-r1000000-nvm --engine se2 $C --no-build >/dev/null || exit 1
S=$(grep unix_socket_directories /mnt/pgnvm/nvm/pgnvm-lead-9032b914/oltp4k-r1000000-nvm/data/pgnvm.conf | cut -d"'" -f2)
B=$H/install/release/bin
Q() { su pgnvm -c "$B/psql -h $S -p 5525 -d oltp -AtX -c \"$1\""; }
Q "ALTER EXTENSION pgnvm UPDATE" >/dev/null 2>&1
Q "SHOW nvm_storage_engine; SHOW shared_buffers; SHOW nvm_buffer_descriptors; SHOW transaction_buffers" > $O/settings
echo "SELECT count(*) FROM usertable;" > $O/scan.sql; chmod 644 $O/scan.sql
PGB="cd /tmp; $B/pgbench -h $S -p 5525 -n -M prepared -c 8 -j 2 -D records=1000000 --random-seed=20261122 -f /work/main/results/oltp-after-0027/scripts/ycsb-read-zipfian.sql@50 -f /work/main/results/oltp-after-0027/scripts/ycsb-update-zipfian.sql@50 oltp"
Q "VACUUM usertable" > $O/vacuum.txt 2>&1
su pgnvm -c "$PGB -T 30" > $O/warm.txt 2>&1
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters()" > $O/cnt.before
Q "SELECT cleaner_writes, demotions, slot_writes FROM pgnvm_pool()" > $O/pool.before
Q "SELECT blks_hit, blks_read FROM pg_stat_slru WHERE name = 'transaction'" > $O/slru.before
head -1 /proc/stat > $O/cpu.before
su pgnvm -c "$PGB -T 60" > $O/oltp.txt 2>&1 &
P1=$!
su pgnvm -c "cd /tmp; PGOPTIONS='-c max_parallel_workers_per_gather=0 -c enable_indexscan=off -c enable_indexonlyscan=off -c enable_bitmapscan=off' $B/pgbench -h $S -p 5525 -n -c 1 -T 60 -f $O/scan.sql oltp" > $O/scan.txt 2>&1 &
P2=$!
if [ -n "${PERF:-}" ]; then sleep 10; perf record -F 999 -a -o $O/perf.data -- sleep 30 >/dev/null 2>&1; fi
wait $P1 $P2
head -1 /proc/stat > $O/cpu.after
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters()" > $O/cnt.after
Q "SELECT cleaner_writes, demotions, slot_writes FROM pgnvm_pool()" > $O/pool.after
Q "SELECT blks_hit, blks_read FROM pg_stat_slru WHERE name = 'transaction'" > $O/slru.after
Q "SELECT pg_relation_size('usertable')/8192" > $O/pages
./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null
echo "$L $(tr '\n' ' ' < $O/settings) oltp $(grep -o 'tps = [0-9.]*' $O/oltp.txt) scans $(grep -o 'processed: [0-9]*' $O/scan.txt) slru $(cat $O/slru.before) -> $(cat $O/slru.after)"
