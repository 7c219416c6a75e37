"""Unit tests of bench/oltp/pretouch.py (no server): which points are pre-touched, the
option, the statements, the record, the flags and the report's text. The pre-touch on a
server, from its counters: test_oltp_e2e.py::test_oltp_tpcb_pretouch."""

from __future__ import annotations

from typing import Any

from bench import cli
from bench.core import blocks
from bench.oltp import cli as oltp_cli
from bench.oltp import plan, pretouch, report, runner, window


def _opts(*argv: str) -> plan.Options:
    return oltp_cli.options(cli.build_parser().parse_args(["oltp", *argv]))


def test_tpcb_only_and_on_by_default() -> None:
    assert _opts().pretouch is True and plan.Options().pretouch is True
    assert _opts("--no-pretouch").pretouch is False
    assert pretouch.applies("tpcb", True)
    assert not pretouch.applies("tpcb", False)
    for w in ("a", "b", "c", "f"):  # YCSB is never pre-touched
        assert not pretouch.applies(w, True)
    assert pretouch.skipped("tpcb", False) == {"done": False, "why": "--no-pretouch"}
    assert pretouch.skipped("a", True) == {"done": False, "why": pretouch.NOT_NEEDED}


def test_the_plan_records_it() -> None:
    for argv, want in (((), True), (("--no-pretouch",), False)):
        doc = runner.Runner(_opts("--workloads", "tpcb", *argv)).plan_doc()
        assert doc["pretouch"] is want
        assert doc["pretouch_tables"] == {
            "tpcb": ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"]
        }


def test_statements_touch_every_page_by_ctid() -> None:
    sql = pretouch.update_sql("pgbench_accounts", "abalance")
    # one row per heap page, whatever the rows per page: the smallest ctid of each page,
    # fetched by ctid; no key predicate (aid % N hits every page only while keys are dense)
    assert sql == (
        "UPDATE pgbench_accounts SET abalance = abalance WHERE ctid = ANY (ARRAY("
        "SELECT min(ctid) FROM pgbench_accounts GROUP BY (ctid::text::point)[0]))"
    )
    assert "aid" not in sql.replace("abalance", "")
    assert pretouch.vacuum_sql("tpcb") == (
        "VACUUM pgbench_accounts, pgbench_branches, pgbench_tellers"
    )


def test_checkpoints_started_in_the_log() -> None:
    log = (
        "LOG:  checkpoint starting: immediate force wait\n"
        "LOG:  checkpoint complete: wrote 3 buffers\n"
        "LOG:  checkpoint starting: wal\n"
    )
    assert pretouch.checkpoints_started(log) == 2
    assert pretouch.checkpoints_started("LOG:  checkpoint complete: wrote 3 buffers\n") == 0


def test_flag_of_a_checkpoint_before_the_window() -> None:
    clean = window.summary({"checkpointer": {}}, 100)
    settled = {"settled": True, "seconds": 0.0}
    assert window.flags(clean, settled, 0) == []
    assert window.flags(clean, settled, 1) == [
        "1 checkpoint(s) started after the point's CHECKPOINT, before the window "
        "(first-touch FPIs start over)"
    ]


_DONE: dict[str, Any] = {
    "done": True,
    "vacuum_s": 0.4,
    "seconds": 2.5,
    "tables": {},
    "pages": 1700,
    "rows": 1690,
    "wal_fpi": 2046,
    "wal_records": 4000,
    "wal_bytes": 15_000_000,
    "checkpoints": {"started": 0, "done": 0},
}


def test_summary_text() -> None:
    assert pretouch.summary_text(_DONE) == "2.5 s, 2,046 FPI"
    assert pretouch.summary_text(pretouch.skipped("tpcb", False)) == "off"
    assert pretouch.summary_text(pretouch.skipped("a", True)) == "–"
    assert pretouch.summary_text(None) == "–"  # runs from before the pre-touch


def _plan(**kw: Any) -> dict[str, Any]:
    return {
        "records": 5000,
        "workloads": {"tpcb": "TPC-B"},
        "configs": [{"name": "nvm_se2"}],
        "clients": [1],
        "distribution_detail": "uniform",
        "durable_settings": {"fsync": "on"},
        "warmup_s": 10.0,
        "warmup_max_s": 120.0,
        "fpi_settled": 0.05,
        "duration_s": 15.0,
        "repeat": 2,
        "shared_buffers": "128MB",
        "random_seed": 1,
        "memory_ratios": {},
        **kw,
    }


def _method(plan_doc: dict[str, Any]) -> str:
    """The report's method paragraph (the one that says what each point does)."""
    doc = report.document(plan_doc, {}, [], [])
    (p,) = [b[1] for b in doc if b[0] == "p" and "Each point: restart" in b[1]]
    return str(p)


def test_method_paragraph_states_it() -> None:
    tables = {"tpcb": ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"]}
    on = _method(_plan(pretouch=True, pretouch_tables=tables))
    assert (
        "TPC-B: **pre-touch** — `VACUUM` of pgbench_accounts, pgbench_branches, "
        "pgbench_tellers before the CHECKPOINT"
    ) in on
    assert "one row (the smallest `ctid`) of every heap page" in on
    assert "(`--no-pretouch` turns it off)" in on
    assert "on `disk` storage their TPC-B windows start with them in the OS page cache" in on
    assert "a checkpoint starts during it and the window is flagged" in on
    off = _method(_plan(pretouch=False, pretouch_tables=tables))
    assert "TPC-B: **no pre-touch** (`--no-pretouch`)" in off and "VACUUM" not in off
    # no TPC-B in the run, or a run from before the pre-touch: not a word of it
    ycsb = _method(_plan(workloads={"a": "YCSB-A"}, pretouch=True, pretouch_tables=tables))
    assert "pre-touch" not in ycsb
    assert "pre-touch" not in _method(_plan())


def _rec(touch: dict[str, Any] | None, before: int = 0) -> dict[str, Any]:
    stats = {"wal": {"wal_records": 6000.0, "wal_fpi": 1.0, "wal_bytes": 500_000.0}}
    out = {
        "config": "nvm_se2",
        "workload": "tpcb",
        "clients": 1,
        "rep": 1,
        "ratio": None,
        "status": "ok",
        "tps": 100.0,
        "transactions": 1000,
        "stats": stats,
        "warmup": {"settled": True, "seconds": 10.0},
        "placement": "same:0",
        "checkpoints_before_window": before,
    }
    if touch is not None:
        out["pretouch"] = touch
    return out


def test_window_table_column() -> None:
    rows = report.window_rows(
        [
            _rec(_DONE),
            {**_rec(pretouch.skipped("tpcb", False)), "rep": 2},
            {**_rec(None), "rep": 3},
        ],
        "tpcb",
    )
    assert [r[9] for r in rows] == ["2.5 s, 2,046 FPI", "off", "–"]
    assert [r[10] for r in rows] == ["same:0"] * 3
    md = blocks.to_markdown(report.window_blocks([_rec(_DONE)], "tpcb"))
    assert "| pre-touch |" in md and "| 2.5 s, 2,046 FPI |" in md
    assert "TPC-B's pre-touch" in md
    # a run from before window_flags: the flags are computed, with the checkpoints
    late = report.window_rows([_rec(_DONE, before=2)], "tpcb")
    assert late[0][-1].startswith("2 checkpoint(s) started after the point's CHECKPOINT")
