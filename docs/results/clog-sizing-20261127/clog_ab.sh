#!/bin/bash
L=/var/lib/pgnvm-lead
/tmp/w28/clog.sh def1 "" $L; /tmp/w28/clog.sh tb1 "transaction_buffers=576" $L
/tmp/w28/clog.sh tb2 "transaction_buffers=576" $L; /tmp/w28/clog.sh def2 "" $L
ENG=base SB=706MB /tmp/w28/clog.sh stock1 "" $L  # refused: the cluster is se2 (an engine change needs --force); no stock run
echo done
