#!/bin/sh
# Inclusive share (perf's "Children") of the functions that make up the churn, per
# perf.data file: perfsplit.sh perf/h128.data > perf/h128.children.txt
# (perf record -e cpu-clock -F 999 -g -p <cluster's processes>, frame-pointer build)
for f in "$@"; do
	echo "== $f"
	perf report -i "$f" --children --sort sym -g none --stdio --percent-limit 0.2 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -150
done
