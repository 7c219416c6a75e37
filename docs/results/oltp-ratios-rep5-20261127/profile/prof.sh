#!/bin/bash
# flat perf profile of YCSB-A zipfian, 8 clients, on the lead's oltp4k cluster
# usage: prof.sh LABEL ENGINE SHARED_BUFFERS DESCRIPTORS(or '')
set -u
L=$1; E=$2; SB=$3; D=$4
H=/var/lib/pgnvm-lead; export PGNVM_HOME=$H; cd /work/main
O=/tmp/w28/prof-$L; mkdir -p $O; chmod 777 $O
python3 - "$E" "$SB" "$D" <<'PY'
import json, sys
p = "/var/lib/pgnvm-lead/clusters/oltp4k-r1000000-nvm/spec.json"
j = json.load(open(p)); s = j["spec"]
s["engine"] = sys.argv[1]; s["settings"]["shared_buffers"] = sys.argv[2]
if sys.argv[3]: s["settings"]["nvm_buffer_descriptors"] = sys.argv[3]
else: s["settings"].pop("nvm_buffer_descriptors", None)
json.dump(j, open(p, "w"), indent=2)
PY
./pgnvm cluster start --name oltp4k-r1000000-nvm --no-build >/dev/null || exit 1
S=$(grep unix_socket_directories /mnt/pgnvm/nvm/pgnvm-lead-9032b914/oltp4k-r1000000-nvm/data/pgnvm.conf | cut -d"'" -f2)
Q() { su pgnvm -c "$H/install/release/bin/psql -h $S -p 5525 -d oltp -AtX -c \"$1\""; }
Q "SHOW nvm_storage_engine; SHOW shared_buffers; SHOW nvm_buffer_descriptors" > $O/settings
PGB="cd /tmp; $H/install/release/bin/pgbench -h $S -p 5525 -n -M prepared -c 8 -j 2 -D records=1000000 --random-seed=20261122 -f /work/main/results/oltp-after-0027/scripts/ycsb-read-zipfian.sql@50 -f /work/main/results/oltp-after-0027/scripts/ycsb-update-zipfian.sql@50 oltp"
su pgnvm -c "$PGB -T 30" > $O/warm.txt 2>&1
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters()" > $O/cnt.before 2>&1
su pgnvm -c "$PGB -T 40" > $O/run.txt 2>&1 &
P=$!
sleep 10
perf record -F 999 -a -o $O/perf.data -- sleep 20 2> $O/perf.err
wait $P
Q "SELECT string_agg(counter||'='||value, ' ') FROM pgnvm_counters()" > $O/cnt.after 2>&1
./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null
perf script -i $O/perf.data -F comm,pid,sym 2>/dev/null | gzip > $O/script.gz
grep -E 'tps|processed' $O/run.txt
