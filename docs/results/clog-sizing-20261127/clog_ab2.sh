#!/bin/bash
while ! grep -q done /tmp/w28/clog_ab.log; do sleep 5; done
L=/var/lib/pgnvm-lead
SCAN=1 /tmp/w28/clog.sh hdef1 "" $L; SCAN=1 /tmp/w28/clog.sh htb1 "transaction_buffers=576" $L
SCAN=1 /tmp/w28/clog.sh htb2 "transaction_buffers=576" $L; SCAN=1 /tmp/w28/clog.sh hdef2 "" $L
echo done2
