#!/bin/bash
A() { /tmp/w29/htap.sh A$1 /var/lib/pgnvm-lead; }
B() { /tmp/w29/htap.sh B$1 /var/lib/pgnvm-ab; }
B 3; A 3; A 4; B 4
echo done > /tmp/w29/htap/DONE2
