#!/bin/bash
A() { /tmp/w29/htap.sh R-A$1 /var/lib/pgnvm-lead; }
B() { /tmp/w29/htap.sh R-B$1 /var/lib/pgnvm-ab; }
A 1; B 1; B 2; A 2
echo done > /tmp/w29/htap/RDONE
