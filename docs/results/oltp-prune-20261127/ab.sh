#!/bin/bash
# same cluster (the lead home's oltp4k), A = main's build, B = patch 0027; order A B B A A B
export PGNVM_OLTP_CLUSTER_PREFIX=oltp4k
run() { # label home tree
  cd $3; PGNVM_HOME=$2 ./pgnvm oltp --records 1000000 --configs nvm_se2_hybrid --workloads '' \
    --memory-ratios 1/128 --clients 8 --duration 60 --warmup-max 30 --no-build --port 5525 \
    --out /tmp/w27/ab2/$1 > /tmp/w27/ab2/$1.log 2>&1
  PGNVM_HOME=$2 ./pgnvm cluster stop --name oltp4k-r1000000-nvm >/dev/null 2>&1
}
A() { run A$1 /var/lib/pgnvm-lead /work/main; }
B() { run B$1 /var/lib/pgnvm-prune /work/prune; }
mkdir -p /tmp/w27/ab2
A 1; B 1; B 2; A 2; A 3; B 3
echo done > /tmp/w27/ab2/DONE
