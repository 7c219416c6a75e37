#!/bin/bash
# Issue 22 target 4 in pairs: stock at 1/2 (A) and the hybrid at 1/128 (B), ABBA ABBA AB..., one point per invocation
# run from the repository root; OUT: where the ten points go
mkdir -p "${OUT:-results/abba}"
export PGNVM_HOME=/var/lib/pgnvm-lead PGNVM_OLTP_CLUSTER_PREFIX=oltp4k
order="A B B A A B B A A B"
i=0
for x in $order; do
  i=$((i+1))
  if [ $x = A ]; then cfg=nvm_base_worker; r=1/2; else cfg=nvm_se2_hybrid; r=1/128; fi
  ./pgnvm oltp --records 1000000 --configs $cfg --workloads '' --clients 8 --repeat 1 --warmup-max 30 --memory-ratios $r --no-build --out ${OUT:-results/abba}/$(printf %02d $i)-$x > ${OUT:-results/abba}/$(printf %02d $i)-$x.log 2>&1
  echo "$i $x rc=$?" >> ${OUT:-results/abba}/progress
done
echo done >> ${OUT:-results/abba}/progress
