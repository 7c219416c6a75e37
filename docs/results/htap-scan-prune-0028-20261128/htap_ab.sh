#!/bin/bash
A() { /tmp/w29/htap.sh A$1 /var/lib/pgnvm-lead; }
B() { /tmp/w29/htap.sh B$1 /var/lib/pgnvm-ab; }
A 1; B 1; B 2; A 2
PERF=1 /tmp/w29/htap.sh Aperf /var/lib/pgnvm-lead
echo done > /tmp/w29/htap/DONE
