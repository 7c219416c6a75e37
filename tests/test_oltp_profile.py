"""./pgnvm oltp --profile: the per-command perf report, the wait sampler, profile.md."""

from __future__ import annotations

import threading
from typing import Any

from bench.core import perf
from bench.oltp import profile

REPORT = """# Samples: 40K of event 'cpu-clock'
# Overhead  Command   Shared Object      Symbol
#
    21.30%  swapper   [kernel.kallsyms]  [k] default_idle
     9.80%  postgres  postgres           [.] LWLockAcquireOrWait
     4.10%  pgbench   libc.so.6          [.] __memmove_avx_unaligned_erms
     2.00%  postgres  libpmem2.so.1      [.] memmove_movnt_avx_clwb
"""


def test_parse_report_by_command() -> None:
    top = perf.parse_report(REPORT)
    assert [(t["comm"], t["symbol"], t["kernel"]) for t in top] == [
        ("swapper", "default_idle", True),
        ("postgres", "LWLockAcquireOrWait", False),
        ("pgbench", "__memmove_avx_unaligned_erms", False),
        ("postgres", "memmove_movnt_avx_clwb", False),
    ]
    assert top[0]["dso"] == "[kernel.kallsyms]" and top[3]["dso"] == "libpmem2.so.1"


def test_parse_report_without_command_has_no_comm() -> None:
    top = perf.parse_report("  36.90%  postgres  [.] pg_checksum_page_readonly\n")
    assert top == [
        {"pct": 36.9, "dso": "postgres", "symbol": "pg_checksum_page_readonly", "kernel": False}
    ]


def test_record_command_whole_machine_or_processes(tmp_path: Any) -> None:
    assert "-a" in perf.PerfRecord(None, tmp_path / "x.data").command()
    cmd = perf.PerfRecord([10, 11], tmp_path / "x.data").command()
    assert cmd[cmd.index("-p") + 1] == "10,11" and "-a" not in cmd


class _Conn:
    """Three samples: two backends, then one, then the sampler is stopped."""

    def __init__(self, rows: list[list[tuple[str]]], done: threading.Event) -> None:
        self.rows, self.done = rows, done

    def __enter__(self) -> _Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str) -> _Conn:
        assert "application_name = 'pgbench'" in sql and "state = 'active'" in sql
        self.current = self.rows.pop(0) if self.rows else []
        if not self.rows:
            self.done.set()
        return self

    def fetchall(self) -> list[tuple[str]]:
        return self.current


def test_wait_sampler_shares() -> None:
    done = threading.Event()
    rows = [[("LWLock:WALWrite",), ("CPU",)], [("LWLock:WALWrite",)], [("IO:WalSync",)]]
    s = profile.WaitSampler(lambda: _Conn(rows, done), interval=0.001)  # type: ignore[arg-type,return-value]
    with s:
        assert done.wait(5)
    assert s.shares() == {"LWLock:WALWrite": 0.5, "CPU": 0.25, "IO:WalSync": 0.25}
    assert s.samples >= 3 and s.error is None


def test_render_lists_waits_and_functions_per_profiled_point() -> None:
    recs = [
        {
            "key": "nvm_se2_pmem-a-8c",
            "tps": 31000.0,
            "status": "ok",
            "profile": {
                "functions": perf.parse_report(REPORT),
                "waits": {"LWLock:WALWrite": 0.464, "CPU": 0.288},
                "wait_samples": 1000,
                "wait_error": None,
            },
        },
        {"key": "nvm_se2-a-8c", "tps": 33000.0, "status": "ok"},  # a later repetition
        {
            "key": "x",
            "tps": None,
            "status": "error",
            "profile": {"functions": "perf report failed: boom", "waits": {}, "wait_error": "e"},
        },
    ]
    text = profile.render(recs)
    assert "## nvm_se2_pmem-a-8c (31,000 tps)" in text
    assert "| LWLock:WALWrite | 46.4% |" in text
    assert "| 9.8% | postgres | `LWLockAcquireOrWait` | postgres |" in text
    assert "| 21.3% | swapper | `default_idle` [k] | [kernel.kallsyms] |" in text
    assert "nvm_se2-a-8c" not in text
    assert "not profiled: perf report failed: boom" in text
    assert "wait events not sampled: e" in text
