#!/bin/bash
# HTAP A/B: YCSB-A zipfian 8 clients + 1 client of sequential scans (count(*) of usertable),
# hybrid pool at 1/128, on the lead home's oltp4k cluster; usage: htap.sh LABEL HOME TREE
set -u
L=$1; H=$2; T=$3; export PGNVM_HOME=$H; cd $T
O=/tmp/w28/htap2/$L; mkdir -p $O; chmod 777 /tmp/w28/htap2 $O
python3 - <<'PY'
import json
p = "/var/lib/pgnvm-lead/clusters/oltp4k-r1000000-nvm/spec.json"
j = json.load(open(p)); s = j["spec"]
s["engine"] = "se2"; s["settings"]["shared_buffers"] = "11MB"
s["settings"]["nvm_buffer_descriptors"] = "2304MB"
json.dump(j, open(p, "w"), indent=2)
PY
mkdir -p $H/clusters/oltp4k-r1000000-nvm
[ $H = /var/lib/pgnvm-lead ] || cp /var/lib/pgnvm-lead/clusters/oltp4k-r1000000-nvm/spec.json $H/clusters/oltp4k-r1000000-nvm/spec.json
./pgnvm cluster start --name oltp4k-r1000000-nvm --no-build >/dev/null || exit 1
S=$(grep unix_socket_directories /mnt/pgnvm/nvm/pgnvm-lead-9032b914/oltp4k-r1000000-nvm/data/pgnvm.conf | cut -d"'" -f2)
B=$H/install/release/bin
Q() { su pgnvm -c "$B/psql -h $S -p 5525 -d oltp -AtX -c \"$1\""; }
Q "ALTER EXTENSION pgnvm UPDATE" >/dev/null 2>&1
Q "SHOW nvm_storage_engine; SHOW shared_buffers; SHOW nvm_buffer_descriptors" > $O/settings
echo "SELECT count(*) FROM usertable;" > $O/scan.sql; chmod 644 $O/scan.sql
PGB="cd /tmp; $B/pgbench -h $S -p 5525 -n -M prepared -c 8 -j 2 -D records=1000000 --random-seed=20261122 -f /work/main/results/oltp-after-0027/scripts/ycsb-read-zipfian.sql@50 -f /work/main/results/oltp-after-0027/scripts/ycsb-update-zipfian.sql@50 oltp"
Q "VACUUM usertable" > $O/vacuum.txt 2>&1
su pgnvm -c "$PGB -T 30" > $O/warm.txt 2>&1
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters()" > $O/cnt.before
Q "SELECT cleaner_writes, demotions, slot_writes FROM pgnvm_pool()" > $O/pool.before
su pgnvm -c "$PGB -T 60" > $O/oltp.txt 2>&1 &
P1=$!
su pgnvm -c "cd /tmp; PGOPTIONS='-c max_parallel_workers_per_gather=0 -c enable_indexscan=off -c enable_indexonlyscan=off -c enable_bitmapscan=off' $B/pgbench -h $S -p 5525 -n -c 1 -T 60 -f $O/scan.sql oltp" > $O/scan.txt 2>&1 &
P2=$!
wait $P1 $P2
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters()" > $O/cnt.after
Q "SELECT cleaner_writes, demotions, slot_writes FROM pgnvm_pool()" > $O/pool.after
Q "SELECT pg_relation_size('usertable')/8192" > $O/pages
./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null
echo "$L oltp $(grep -o 'tps = [0-9.]*' $O/oltp.txt) scans $(grep -o 'processed: [0-9]*' $O/scan.txt)"
