#!/bin/sh
# madvise on PostgreSQL-style shared memory; run as root (reserves 160 2 MB pages for the
# hugetlb cases and gives them back).
set -e
uname -r
for a in dontneed remove free pageout; do for k in anon sysv; do ./madv 256 $a $k; echo; done; done
old=$(cat /proc/sys/vm/nr_hugepages)
echo 160 > /proc/sys/vm/nr_hugepages
for a in remove dontneed; do ./madv 256 $a huge 2048; echo; ./madv 256 $a huge 8; echo; done
echo "$old" > /proc/sys/vm/nr_hugepages
