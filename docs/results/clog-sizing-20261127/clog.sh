#!/bin/bash
# OLTP only (YCSB-A zipfian 8 clients), lead cluster, release of home $3; label $1; extra -c settings in $2 (space separated)
set -u
L=$1; X=$2; H=$3; ENG=${ENG:-se2}; export PGNVM_HOME=$H; cd /work/main
D=/tmp/w28/clog${SCAN:+2}; O=$D/$L; mkdir -p $O; chmod 777 $D $O
C=""; for kv in shared_buffers=${SB:-11MB} max_wal_size=5GB checkpoint_timeout=30min max_connections=100 jit=off track_io_timing=on log_checkpoints=on log_min_duration_statement=-1 io_method=worker fsync=on synchronous_commit=on full_page_writes=on $X; do C="$C -c $kv"; done
[ "$ENG" = se2 ] && C="$C -c nvm_buffer_descriptors=2304MB"
./pgnvm cluster start --name oltp4k-r1000000-nvm --engine $ENG $C --no-build >/dev/null || exit 1
S=$(grep unix_socket_directories /mnt/pgnvm/nvm/pgnvm-lead-9032b914/oltp4k-r1000000-nvm/data/pgnvm.conf | cut -d"'" -f2)
B=$H/install/release/bin
Q() { su pgnvm -c "$B/psql -h $S -p 5525 -d oltp -AtX -c \"$1\""; }
Q "SHOW nvm_storage_engine; SHOW shared_buffers; SHOW nvm_buffer_descriptors; SHOW transaction_buffers" > $O/settings
PGB="cd /tmp; $B/pgbench -h $S -p 5525 -n -M prepared -c 8 -j 2 -D records=1000000 --random-seed=20261122 -f /work/main/results/oltp-after-0027/scripts/ycsb-read-zipfian.sql@50 -f /work/main/results/oltp-after-0027/scripts/ycsb-update-zipfian.sql@50 oltp"
Q "VACUUM usertable" > /dev/null 2>&1
su pgnvm -c "$PGB -T 30" > $O/warm.txt 2>&1
Q "SELECT blks_hit, blks_read FROM pg_stat_slru WHERE name = 'transaction'" > $O/slru.before
cat /proc/stat | head -1 > $O/cpu.before
if [ -z "${SCAN:-}" ]; then
su pgnvm -c "$PGB -T 60" > $O/oltp.txt 2>&1
else
echo "SELECT count(*) FROM usertable;" > $O/scan.sql; chmod 644 $O/scan.sql
su pgnvm -c "$PGB -T 60" > $O/oltp.txt 2>&1 &
P1=$!
su pgnvm -c "cd /tmp; PGOPTIONS='-c max_parallel_workers_per_gather=0 -c enable_indexscan=off -c enable_indexonlyscan=off -c enable_bitmapscan=off' $B/pgbench -h $S -p 5525 -n -c 1 -T 60 -f $O/scan.sql oltp" > $O/scan.txt 2>&1 &
P2=$!
wait $P1 $P2
fi
cat /proc/stat | head -1 > $O/cpu.after
Q "SELECT blks_hit, blks_read FROM pg_stat_slru WHERE name = 'transaction'" > $O/slru.after
./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null
echo "$L $(tr '\n' ' ' < $O/settings) $(grep -o 'tps = [0-9.]*' $O/oltp.txt) ${SCAN:+scans $(grep -o "processed: [0-9]*" $O/scan.txt) }slru $(cat $O/slru.before) -> $(cat $O/slru.after)"
