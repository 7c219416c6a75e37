"""Unit tests of bench/oltp/window.py (no server): the warm-up's slices and when it ends, the
measured window's WAL per transaction and checkpoints, the flags, the report's table of
windows, and the options of the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench import cli
from bench.core import blocks
from bench.oltp import cli as oltp_cli
from bench.oltp import pgbench, plan, report, runner, settings, window, workloads


def _opts(*argv: str) -> plan.Options:
    return oltp_cli.options(cli.build_parser().parse_args(["oltp", *argv]))


def _slices(fpis: list[float | None], minimum: float, maximum: float, thr: float) -> list[float]:
    """The slices :func:`window.next_slice` runs when slice i writes fpis[i] FPIs/txn."""
    spent, last, out = 0.0, None, []
    while (sec := window.next_slice(spent, last, minimum, maximum, thr)) is not None:
        last = fpis[len(out)]
        out.append(sec)
        spent += sec
    return out


def test_warmup_goes_on_until_a_slice_settles() -> None:
    # the minimum first, then 5 s slices until one writes <= 0.05 FPI/txn
    assert _slices([1.0, 0.4, 0.1, 0.05, 0.0], 10, 120, 0.05) == [10, 5, 5, 5]
    # settled within the minimum: the minimum only
    assert _slices([0.01], 10, 120, 0.05) == [10]


def test_warmup_stops_at_its_maximum() -> None:
    # never settles: slices up to the maximum, the last one cut to it
    assert _slices([1.0] * 10, 10, 22, 0.05) == [10, 5, 5, 2]
    # a slice without transactions is not settled
    assert _slices([None] * 10, 0, 10, 0.05) == [5, 5]


def test_no_warmup() -> None:
    assert _slices([], 0, 0, 0.05) == []
    # --warmup-max == --warmup: the fixed warm-up of before
    assert _slices([1.0], 10, 10, 0.05) == [10]


def test_fpi_per_txn_and_settled() -> None:
    assert window.fpi_per_txn({"wal_fpi": 50.0}, 1000) == 0.05
    assert window.fpi_per_txn({"wal_fpi": 50.0}, 0) is None
    assert window.fpi_per_txn({}, 10) is None
    assert window.settled(0.05, 0.05) and not window.settled(0.0501, 0.05)
    assert not window.settled(None, 0.05)


# one TPC-B window of docs/results/oltp-wal-20261126/huge-quiet-3cb9249 (nvm_se2 8c rep 1)
_STATS: dict[str, Any] = {
    "wal": {"wal_records": 1_254_000.0, "wal_fpi": 217_400.0, "wal_bytes": 1_805_000_000.0},
    "checkpointer": {"num_timed": 0.0, "num_requested": 3.0, "num_done": 3.0},
    "wal_bytes": 1_804_000_000,
}


def test_window_summary() -> None:
    w = window.summary(_STATS, 181_400)
    assert w["wal_records"] == 1_254_000 and w["wal_fpi"] == 217_400
    assert w["wal_bytes_per_txn"] == round(1_805_000_000 / 181_400, 3)
    assert w["wal_fpi_per_txn"] == round(217_400 / 181_400, 3)
    assert w["wal_records_per_txn"] == round(1_254_000 / 181_400, 3)
    assert w["lsn_bytes"] == 1_804_000_000
    assert w["checkpoints"] == {"started": 3, "done": 3}
    empty = window.summary({}, 0)
    assert empty["wal_bytes_per_txn"] is None and empty["checkpoints"] == {
        "started": 0,
        "done": 0,
    }


def test_window_flags() -> None:
    clean = window.summary({**_STATS, "checkpointer": {"num_done": 0}}, 100)
    settled = {"settled": True, "seconds": 25.0}
    assert window.flags(clean, settled) == []
    assert window.flags(clean, None) == []
    # a checkpoint started or done in the window
    for ck in ({"num_requested": 1.0}, {"num_timed": 1.0}, {"num_done": 1.0}):
        w = window.summary({**_STATS, "checkpointer": ck}, 100)
        assert [f for f in window.flags(w, settled) if f.startswith("checkpoint in")], ck
    late = {"settled": False, "seconds": 120.0, "last_fpi_per_txn": 0.3, "threshold": 0.05}
    assert window.flags(clean, late) == [
        "warm-up did not settle in 120.0 s (last slice 0.3 FPI/txn > 0.05)"
    ]


def _rec(cfg: str, clients: int, rep: int, fpi: float, ckpt: float) -> dict[str, Any]:
    stats = {
        "wal": {"wal_records": 6000.0, "wal_fpi": fpi * 1000, "wal_bytes": 900_000.0},
        "checkpointer": {"num_requested": ckpt, "num_done": ckpt},
    }
    return {
        "config": cfg,
        "workload": "tpcb",
        "clients": clients,
        "rep": rep,
        "ratio": None,
        "status": "ok",
        "tps": 100.0,
        "transactions": 1000,
        "stats": stats,
    }


def test_report_window_table() -> None:
    new = _rec("nvm_se2", 8, 1, 0.02, 0)
    new["warmup"] = {"settled": True, "seconds": 25.0}
    new["window"] = window.summary(new["stats"], 1000)
    new["window_flags"] = []
    new["placement"] = "free"
    old = _rec("nvm_se2", 1, 2, 1.067, 2)  # a run from before: no window recorded
    other = {**_rec("nvm_se2", 1, 1, 0.0, 0), "workload": "a"}
    rows = report.window_rows([new, old, other], "tpcb")
    assert [r[:3] for r in rows] == [["nvm_se2", 1, 2], ["nvm_se2", 8, 1]]
    assert rows[0][4:] == [
        "900",
        "6.00",
        "1.067",
        "2/2",
        "-",
        "–",  # nor its pre-touch
        "–",  # nor its placement
        "checkpoint in the window (2 started, 2 done)",
    ]
    assert rows[1][4:] == ["900", "6.00", "0.020", "0/0", "25", "–", "free", "ok"]
    md = blocks.to_markdown(report.window_blocks([new, old], "tpcb"))
    assert "FPI/txn" in md and "checkpoint in the window" in md
    assert report.window_blocks([other], "tpcb") == []


def test_options_of_the_rule() -> None:
    o = _opts()
    assert (o.warmup_max, o.fpi_settled) == (window.DEFAULT_WARMUP_MAX, window.DEFAULT_FPI_SETTLED)
    o = _opts("--warmup", "5", "--warmup-max", "60", "--fpi-settled", "0.02")
    assert (o.warmup, o.warmup_max, o.fpi_settled) == (5, 60, 0.02)
    with pytest.raises(plan.PlanError, match="--warmup-max: at least --warmup"):
        plan.check(plan.Options(warmup=30, warmup_max=20))
    with pytest.raises(plan.PlanError, match="--fpi-settled: not negative"):
        plan.check(plan.Options(fpi_settled=-0.1))


def test_checkpoints_apart_for_every_configuration() -> None:
    s = settings.common_settings("128MB")
    assert s["max_wal_size"] == "4GB" and s["checkpoint_timeout"] == "30min"


class _FakeConn:
    """A connection whose pg_stat_activity shows ``counts[i]`` other clients at the i-th
    look (the last one ever after)."""

    def __init__(self, counts: list[int]) -> None:
        self.counts, self.looks, self.cleared = counts, 0, 0

    def execute(self, sql: str) -> _FakeConn:
        if "pg_stat_clear_snapshot" in sql:
            self.cleared += 1
        else:
            self.looks += 1
        return self

    def fetchone(self) -> tuple[int]:
        return (self.counts[min(self.looks, len(self.counts)) - 1],)


def test_await_flushed_waits_for_pgbench_backends() -> None:
    c = _FakeConn([3, 1, 0])
    assert runner.await_flushed(c, timeout=5) is True  # type: ignore[arg-type]
    assert c.looks == 3 and c.cleared == 3  # a fresh snapshot at each look
    stuck = _FakeConn([1])
    assert runner.await_flushed(stuck, timeout=0.2) is False  # type: ignore[arg-type]
    assert stuck.looks > 1


def test_warmup_slices_draw_keys_of_their_own() -> None:
    base = workloads.RANDOM_SEED
    seeds = [window.slice_seed(base, i) for i in range(30)]
    assert base not in seeds and len(set(seeds)) == len(seeds)

    def command(**seed: int) -> list[str]:
        return pgbench.command(
            Path("pgbench"),
            [],
            clients=1,
            threads=1,
            seconds=5,
            records=10,
            dbname="d",
            log_prefix=None,
            **seed,
        )

    cmd = command(seed=seeds[1])
    assert f"--random-seed={seeds[1]}" in cmd and f"--random-seed={base}" not in cmd
    default = command()
    assert f"--random-seed={base}" in default  # the measured window's


def test_pgnvm_per_txn_rates_without_levels() -> None:
    """A window's pgnvm counters per transaction: copies, demotions and write-backs are
    rates; the pool's levels (peak, budget) and the derived bytes are not."""
    d = {
        "cow_copies": 300,
        "cleaner_writes": 150,
        "demotions": 75,
        "redirects": 0,
        "bytes_not_copied": 0,
        "slots_in_use_peak": 640,
        "slots": 640,
    }
    got = runner.pgnvm_per_txn(d, 1000)
    assert got == {"cow_copies": 0.3, "cleaner_writes": 0.15, "demotions": 0.075, "redirects": 0.0}
    assert runner.pgnvm_per_txn(None, 1000) is None
    assert runner.pgnvm_per_txn(d, 0) is None


def test_extension_schema_is_not_the_roles() -> None:
    """A schema named like the server's role comes first on the default search_path: the
    OLTP load's unqualified tables would go into it (a run made so reloaded usertable)."""
    from bench.core import osuser
    from bench.oltp import targets

    assert targets.EXT_SCHEMA != osuser.SERVER_USER


class _NvmConn:
    """A connection for :func:`runner.nvm_snapshot`: ``fail`` makes every query raise, as a
    server whose pgnvm lacks a function does; ``broken`` as a lost connection."""

    def __init__(self, fail: bool = False, broken: bool = False) -> None:
        self.fail, self.broken, self.closed = fail, broken, False

    def execute(self, sql: str, *args: object) -> None:
        if self.fail:
            raise psycopg.errors.UndefinedFunction("function pgnvm_pool() does not exist")
        raise AssertionError("not reached in these tests")


def test_nvm_window_keeps_counters_or_says_why_not() -> None:
    from bench.core import counters

    c0 = dict.fromkeys((*counters.COUNTERS, *counters.DERIVED), 0)
    c1 = {**c0, "cow_copies": 30}
    w = runner.nvm_window((c0, None), (c1, None))
    assert w == ({**dict.fromkeys(c0, 0), "cow_copies": 30}, None)
    # no extension: nothing, not zeros
    assert runner.nvm_window((None, None), (None, None)) == (None, None)
    # a reading that failed (either end): no counters, and why
    why = "pgnvm_counters(): no such function"
    assert runner.nvm_window((c0, None), why) == (None, why)
    assert runner.nvm_window(why, (c1, None)) == (None, why)


def test_nvm_snapshot_goes_on_without_a_usable_extension() -> None:
    assert runner.nvm_snapshot(_NvmConn(), None) == (None, None)  # type: ignore[arg-type]
    got = runner.nvm_snapshot(_NvmConn(fail=True), "pgnvm_ext")  # type: ignore[arg-type]
    assert isinstance(got, str) and "pgnvm_pool() does not exist" in got
    with pytest.raises(psycopg.Error):  # a lost connection is not the extension's fault
        runner.nvm_snapshot(_NvmConn(fail=True, broken=True), "pgnvm_ext")  # type: ignore[arg-type]
