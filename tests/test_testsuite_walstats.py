"""pg_waldump --stats=record parsing and comparison (the wal_pmem check)."""

from __future__ import annotations

import pytest

from bench.testsuite import walstats

# pg_waldump --stats=record, runs of spaces shortened (the parser splits on whitespace)
OUT = """WAL statistics between 0/3002968 and 0/303C110:
Type  N  (%)  Record size  (%)  FPI size  (%)  Combined size  (%)
----  -  ---  -----------  ---  --------  ---  -------------  ---
XLOG/FPI_FOR_HINT  5 (  2.28)  245 (  1.12)  40960 ( 19.27)  41205 ( 17.58)
Transaction/COMMIT  1 (  0.46)  2201 ( 10.10)  0 (  0.00)  2201 (  0.94)
Standby/RUNNING_XACTS  2 (  0.91)  84 (  0.39)  0 (  0.00)  84 (  0.04)
Heap2/MULTI_INSERT+INIT  1 (  0.46)  514 (  2.36)  0 (  0.00)  514 (  0.22)
Btree/INSERT_LEAF  129 ( 58.90)  9083 ( 41.66)  75760 ( 35.64)  84843 ( 36.20)
  --------  --------  --------  --------
Total  138  12127 [9.30%]  116720 [90.70%]  128847 [100%]
"""


def test_parse_and_count() -> None:
    stats = walstats.parse_stats(OUT)
    assert stats["Heap2/MULTI_INSERT+INIT"] == (1, 514, 0)
    assert stats["Btree/INSERT_LEAF"] == (129, 9083, 75760)
    assert "Standby/RUNNING_XACTS" in stats
    counts = walstats.counts(stats)
    assert "Standby/RUNNING_XACTS" not in counts and counts["XLOG/FPI_FOR_HINT"] == 5


def test_differences() -> None:
    a = {"Heap/INSERT": 3, "Transaction/COMMIT": 1}
    assert walstats.differences(a, dict(a), ("file", "pmem")) == []
    assert walstats.differences(a, {"Heap/INSERT": 3}, ("file", "pmem")) == [
        "Transaction/COMMIT: file 1, pmem 0"
    ]


def test_not_a_stats_table() -> None:
    with pytest.raises(ValueError):
        walstats.parse_stats("pg_waldump: error: could not find file")
