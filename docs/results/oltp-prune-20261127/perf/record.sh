#!/bin/bash
# OLTP 1/128 hybrid with a dwarf call-graph perf window of the backends
cd /work/main
export PGNVM_HOME=/var/lib/pgnvm-lead PGNVM_OLTP_CLUSTER_PREFIX=oltp4k
./pgnvm oltp --records 1000000 --configs nvm_se2_hybrid --workloads '' --memory-ratios 1/128 \
  --clients 8 --duration 40 --warmup-max 30 --no-build --out /tmp/w27/prunediag > /tmp/w27/prunediag.log 2>&1 &
P=$!
# wait for the measured window: pgbench running with -T 40
for i in $(seq 1 400); do
  if pgrep -f 'pgbench.*-T 40' >/dev/null; then break; fi; sleep 1; done
sleep 8
pids=all
echo "pids=$pids" >> /tmp/w27/prunediag.log
perf record -F 299 --call-graph dwarf,16384 -a -o /tmp/w27/prune.perf.data -- sleep 6 >> /tmp/w27/prunediag.log 2>&1
wait $P
echo "rc=$?" >> /tmp/w27/prunediag.log
