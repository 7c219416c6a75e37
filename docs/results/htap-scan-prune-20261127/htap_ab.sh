#!/bin/bash
A() { /tmp/w28/htap.sh A$1 /var/lib/pgnvm-lead /work/main; }
B() { /tmp/w28/htap.sh B$1 /var/lib/pgnvm-ab /work/main; }
A 1; B 1; B 2; A 2
echo done > /tmp/w28/htap2/DONE
