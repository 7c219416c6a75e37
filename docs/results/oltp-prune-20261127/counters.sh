#!/bin/bash
# counters per transaction of 20 s of YCSB-A at 1/128, for the build of home $1 (tree $2)
H=$1; T=$2; cd $T; export PGNVM_HOME=$H
./pgnvm cluster start --name oltp4k-r1000000-nvm --no-build >/dev/null
S=$(grep unix_socket_directories /mnt/pgnvm/nvm/pgnvm-lead-9032b914/oltp4k-r1000000-nvm/data/pgnvm.conf | cut -d"'" -f2)
Q() { su pgnvm -c "$H/install/release/bin/psql -h $S -p 5525 -d oltp -AtX -c \"$1\""; }
Q "CREATE EXTENSION IF NOT EXISTS pgnvm" >/dev/null 2>&1
Q "SHOW shared_buffers"; Q "SHOW nvm_buffer_descriptors"
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters() WHERE counter IN ('cow_copies','redirects','prunes_deferred','hints_skipped')" > /tmp/w27/cnt.before 2>&1
Q "SELECT cleaner_writes, demotions, slot_writes FROM pgnvm_pool()" > /tmp/w27/pool.before
su pgnvm -c "cd /tmp; $H/install/release/bin/pgbench -h $S -p 5525 -n -M prepared -c 8 -j 2 -T 20 -D records=1000000 --random-seed=20261122 -f /tmp/w27/ab2/A1/scripts/ycsb-read-zipfian.sql@50 -f /tmp/w27/ab2/A1/scripts/ycsb-update-zipfian.sql@50 oltp" 2>&1 | grep -E 'processed|tps'
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters() WHERE counter IN ('cow_copies','redirects','prunes_deferred','hints_skipped')"
cat /tmp/w27/cnt.before
Q "SELECT cleaner_writes, demotions, slot_writes FROM pgnvm_pool()"; cat /tmp/w27/pool.before
./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null
