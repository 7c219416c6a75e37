#!/bin/bash
while ! grep -q done /tmp/w28/clog_ab.log; do sleep 5; done
L=/var/lib/pgnvm-lead
/tmp/w28/clog2.sh hdef1 "" $L; /tmp/w28/clog2.sh htb1 "transaction_buffers=576" $L
/tmp/w28/clog2.sh htb2 "transaction_buffers=576" $L; /tmp/w28/clog2.sh hdef2 "" $L
echo done2
