"""Unit tests of bench/oltp/pretouch.py (no server): which points are pre-touched (TPC-B,
YCSB-A, B, F), the option, the statements, the record, the flags, the max_wal_size sized
for them and the report's text. The pre-touch on a server, from its counters:
test_oltp_e2e.py::test_oltp_tpcb_pretouch and ::test_oltp_ycsb_pretouch."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import cli
from bench.core import blocks, configs
from bench.oltp import cli as oltp_cli
from bench.oltp import plan, pretouch, report, runner, settings, window, workloads


def _opts(*argv: str) -> plan.Options:
    return oltp_cli.options(cli.build_parser().parse_args(["oltp", *argv]))


def test_updating_workloads_only_and_on_by_default() -> None:
    assert _opts().pretouch is True and plan.Options().pretouch is True
    assert _opts("--no-pretouch").pretouch is False
    for w in ("tpcb", "a", "b", "f"):  # every workload that updates
        assert pretouch.applies(w, True), w
        assert not pretouch.applies(w, False), w  # --no-pretouch: none of them
        assert pretouch.skipped(w, False) == {"done": False, "why": "--no-pretouch"}, w
    assert not pretouch.applies("c", True) and not pretouch.applies("c", False)  # reads only
    assert pretouch.skipped("c", True) == {"done": False, "why": pretouch.NOT_NEEDED}
    assert pretouch.skipped("c", False) == {"done": False, "why": pretouch.NOT_NEEDED}
    assert pretouch.NOT_NEEDED.startswith("read-only")


def test_ycsb_pretouches_usertable_as_tpcb_its_tables() -> None:
    # the same code, another table list: usertable and the field YCSB's updates change
    for w in ("a", "b", "f"):
        assert pretouch.TABLES[w] == (("usertable", "field1"),), w
        assert pretouch.vacuum_sql(w) == "VACUUM usertable", w
        assert pretouch.wal_group(w) == "ycsb", w
    assert "c" not in pretouch.TABLES and pretouch.wal_group("c") is None
    assert pretouch.wal_group("tpcb") == "tpcb"
    assert pretouch.update_sql("usertable", "field1") == (
        "UPDATE usertable SET field1 = field1 WHERE ctid = ANY (ARRAY("
        "SELECT min(ctid) FROM usertable GROUP BY (ctid::text::point)[0]))"
    )
    # field1 is the column the workload's own updates set (not the indexed key)
    assert "SET field1 = " in workloads.OPS["update"] and "SET field1 = " in workloads.OPS["rmw"]


def test_the_plan_records_it() -> None:
    tables = {
        "tpcb": ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"],
        **{w: ["usertable"] for w in ("a", "b", "f")},
    }
    for argv, want in (((), True), (("--no-pretouch",), False)):
        doc = runner.Runner(_opts("--workloads", "tpcb", *argv)).plan_doc()
        assert doc["pretouch"] is want
        assert doc["pretouch_tables"] == tables


def test_the_workloads_whose_wal_is_sized() -> None:
    # the default run: YCSB-A, and YCSB-A in the memory experiment
    assert plan.run_workloads(_opts()) == ["a"] and plan.wal_groups(_opts()) == ["ycsb"]
    # the memory experiment alone still runs YCSB-A
    assert plan.wal_groups(_opts("--workloads", "")) == ["ycsb"]
    assert plan.wal_groups(_opts("--workloads", "a,tpcb")) == ["ycsb", "tpcb"]
    assert plan.wal_groups(_opts("--workloads", "tpcb", "--memory-ratios", "none")) == ["tpcb"]
    assert plan.wal_groups(_opts("--workloads", "c", "--memory-ratios", "none")) == []
    # --no-pretouch keeps the sizing: the same server settings with and without it
    assert plan.wal_groups(_opts("--no-pretouch")) == ["ycsb"]


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


# --------------------------------------------------------------------------- max_wal_size

#: pgbench_accounts' heap pages at the default run's scale (2M YCSB records: scale 173,
#: 1,640 pages per 100,000 accounts at fillfactor 100) + _tellers' and _branches'
DEFAULT_PAGES = 173 * 1640 + 10 + 1
#: the checkpoint WAL volume starts: max_wal_size / (1 + checkpoint_completion_target 0.9)
TRIGGER = 1 / 1.9


def test_pretouch_max_wal_size_from_the_pretouched_pages() -> None:
    gb = 1 << 30
    # the default run: ~2.2 GB of full-page images; 4GB starts a checkpoint after ~2.1 GB
    fpi = DEFAULT_PAGES * 8192
    assert 2.1 * gb < fpi < 2.3 * gb
    assert configs.size_bytes("4GB") * TRIGGER < fpi
    size = settings.pretouch_max_wal_size(DEFAULT_PAGES)
    assert size == "7GB"  # 3 x 2.17 GB = 6.5 GB, rounded up to whole GB
    assert configs.size_bytes(size) * TRIGGER > 1.5 * fpi  # the trigger well past the FPIs
    # small databases keep every workload's 4GB
    assert settings.pretouch_max_wal_size(0) == "4GB"
    assert settings.pretouch_max_wal_size(1700) == "4GB"
    # rounded up: exactly 5 GB of 3 x FPIs is 5GB, one page more is 6GB
    pages_5gb = 5 * gb // (3 * 8192)
    assert 3 * pages_5gb * 8192 <= 5 * gb
    assert settings.pretouch_max_wal_size(pages_5gb) == "5GB"
    assert settings.pretouch_max_wal_size(pages_5gb + 1) == "6GB"


def test_wal_space_shortfall() -> None:
    gb = 1 << 30
    assert settings.wal_space_shortfall("7GB", 10 * gb, 0) is None
    assert settings.wal_space_shortfall("7GB", 6 * gb, gb) is None  # old WAL is recycled
    why = settings.wal_space_shortfall("7GB", 5 * gb, gb)
    assert why == (
        "max_wal_size 7GB does not fit: pg_wal may grow to it between checkpoints, but its "
        "file system has 6.0 GB for WAL (5.0 GB free + 1.0 GB of WAL already there)"
    )


def _target(tmp_path: Path, pages: int, group: str = "tpcb") -> Any:
    """A stand-in for targets.Target after its set-up (TPC-B's, or with ``group`` "ycsb"
    usertable's): a data directory with pg_wal holding one 16 MB segment."""
    datadir = tmp_path / "data"
    (datadir / "pg_wal").mkdir(parents=True)
    (datadir / "pg_wal" / "000000010000000000000001").write_bytes(b"\0" * (16 << 20))
    return SimpleNamespace(
        name="oltp-r2000000-nvm",
        pretouch_pages={group: pages},
        server=SimpleNamespace(cluster=SimpleNamespace(datadir=datadir)),
    )


def test_size_pretouch_wal_and_the_settings_of_a_tpcb_point(tmp_path: Path) -> None:
    tg = _target(tmp_path, DEFAULT_PAGES)
    fs = os.statvfs(tmp_path)
    if fs.f_bavail * fs.f_frsize < 8 << 30:  # the 7GB must fit for the first half
        tg.pretouch_pages["tpcb"] = 1700
    pages = tg.pretouch_pages["tpcb"]
    sized = runner.size_pretouch_wal(tg, "tpcb")
    want = settings.pretouch_max_wal_size(pages)
    assert sized["max_wal_size"] == want and sized["pretouch_pages"] == pages
    assert sized["fpi_bytes"] == pages * 8192 and sized["factor"] == 3
    assert sized["wal_bytes_at_setup"] == 16 << 20
    assert sized["wal_dir"] == str((tmp_path / "data" / "pg_wal").resolve())
    r = runner.Runner(_opts("--workloads", "a,tpcb", "--configs", "nvm_base_worker"))
    r.configs = [configs.BY_NAME["nvm_base_worker"]]
    r.pretouch_wal = {"tpcb": {"nvm": sized}}
    cfg = configs.BY_NAME["nvm_base_worker"]
    assert r.point_settings(cfg, "128MB", "tpcb")["max_wal_size"] == want
    assert r.point_settings(cfg, "128MB", "a")["max_wal_size"] == "4GB"  # YCSB: as before
    assert r.plan_doc()["tpcb_wal"] == {"nvm": sized}
    # the default run's size on the default storage
    r.pretouch_wal = {
        "tpcb": {"nvm": {**sized, "max_wal_size": settings.pretouch_max_wal_size(DEFAULT_PAGES)}}
    }
    s = r.point_settings(cfg, "128MB", "tpcb")
    assert configs.size_bytes(s["max_wal_size"]) * TRIGGER > DEFAULT_PAGES * 8192


def test_fit_pretouch_max_wal_size() -> None:
    gb, mb = 1 << 30, 1 << 20
    fit = settings.fit_pretouch_max_wal_size
    assert fit("7GB", DEFAULT_PAGES, 10 * gb, 0) == "7GB"
    assert fit("7GB", DEFAULT_PAGES, 6 * gb, gb) == "7GB"  # old WAL is recycled
    # a small database on a 2 GB device: the 4GB floor cut to 3/4 of the room
    assert fit("4GB", 334, 2 * gb - 16 * mb, 16 * mb) == "1536MB"
    # cut only while 3 × the full-page images still fit in the cut
    pages = 1536 * mb // (3 * 8192)
    assert fit("4GB", pages, 2 * gb, 0) == "1536MB"
    assert fit("4GB", pages + 1, 2 * gb, 0) is None
    assert fit("7GB", DEFAULT_PAGES, 5 * gb, gb) is None  # 4.5 GB < 3 × 2.2 GB


def test_size_pretouch_wal_cuts_the_floor_to_fit_a_small_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tg = _target(tmp_path, 334, "ycsb")
    gb = 1 << 30
    free = gb + gb // 2  # + the 16 MB segment already there

    def statvfs(_: object) -> Any:
        return SimpleNamespace(f_bavail=free // 4096, f_frsize=4096)

    monkeypatch.setattr(runner.os, "statvfs", statvfs)
    sized = runner.size_pretouch_wal(tg, "ycsb")
    room_mb = (free + (16 << 20)) * 3 // 4 >> 20
    assert sized["max_wal_size"] == f"{room_mb}MB" and sized["cut_from"] == "4GB"
    err = capsys.readouterr()
    notice = err.out + err.err
    assert f"YCSB's points run with max_wal_size {room_mb}MB, cut from 4GB" in notice, notice


def test_size_pretouch_wal_refuses_what_the_wal_directory_cannot_hold(tmp_path: Path) -> None:
    tg = _target(tmp_path, 400_000_000)  # 3.3 TB of full-page images: 9,156GB of WAL
    with pytest.raises(RuntimeError) as e:
        runner.size_pretouch_wal(tg, "tpcb")
    msg = str(e.value)
    assert msg.startswith(
        "oltp-r2000000-nvm: TPC-B's max_wal_size is sized from its 400,000,000 pre-touched "
        "pages (max(4GB, 3 × their full-page images)), and max_wal_size 9156GB does not fit"
    ), msg
    assert "Free space there, or run fewer --records." in msg


def test_method_paragraph_states_the_wal_size() -> None:
    tables = {"tpcb": ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"]}
    sized = {
        "nvm": {
            "pretouch_pages": DEFAULT_PAGES,
            "fpi_bytes": DEFAULT_PAGES * 8192,
            "factor": 3,
            "minimum": "4GB",
            "max_wal_size": "7GB",
        }
    }
    on = _method(_plan(pretouch=True, pretouch_tables=tables, tpcb_wal=sized))
    assert (
        "so TPC-B's points run with `max_wal_size` = max(4GB, 3 × the pre-touched pages × "
        "8 kB) rounded up to whole GB, from the pages counted at set-up (nvm: **7GB** for "
        "283,731 pages (2.2 GB of them)"
    ) in on, on
    assert (
        "where its WAL directory's file system cannot hold it, it is cut to 75% of the room "
        "there if that still holds 3 × the pre-touch's full-page images, and the run is "
        "refused otherwise"
    ) in on
    assert "cut from" not in on
    cut = {"nvm": {**sized["nvm"], "max_wal_size": "1536MB", "cut_from": "7GB"}}
    on = _method(_plan(pretouch=True, pretouch_tables=tables, tpcb_wal=cut))
    assert "(nvm: **1536MB** for 283,731 pages (2.2 GB of them), cut from 7GB to fit" in on
    small = {"nvm": {**sized["nvm"], "pretouch_pages": 1642, "fpi_bytes": 1642 * 8192}}
    on = _method(_plan(pretouch=True, pretouch_tables=tables, tpcb_wal=small))
    assert "(nvm: **7GB** for 1,642 pages (13 MB of them)" in on
    assert "a checkpoint starts during it and the window is flagged" in on
    # a run from before the sizing: the sentence of then
    old = _method(_plan(pretouch=True, pretouch_tables=tables))
    assert "where that comes near `max_wal_size`, a checkpoint starts during it" in old
    assert "rounded up" not in old


#: usertable's heap pages at the default 2M records: 6 rows of ~1 KB per page at fillfactor
#: 80 (settings.ROW_BYTES)
YCSB_DEFAULT_PAGES = -(-2_000_000 // 6)


def test_ycsb_max_wal_size_from_usertable(tmp_path: Path) -> None:
    gb = 1 << 30
    fpi = YCSB_DEFAULT_PAGES * 8192
    # the default run's YCSB pre-touch (~2.5 GB) would pass 4GB's checkpoint trigger (~2.1 GB)
    assert 2.5 * gb < fpi < 2.6 * gb and configs.size_bytes("4GB") * TRIGGER < fpi
    size = settings.pretouch_max_wal_size(YCSB_DEFAULT_PAGES)
    assert size == "8GB"  # 3 x 2.54 GB = 7.6 GB, rounded up
    assert configs.size_bytes(size) * TRIGGER > 1.5 * fpi  # the trigger well past the FPIs
    # 1M records (~1.3 GB of FPIs): 3 x 1.27 GB = 3.8 GB, rounded up to the common 4GB,
    # whose trigger (~2.1 GB) lies ~1.7x past them
    assert settings.pretouch_max_wal_size(-(-1_000_000 // 6)) == "4GB"
    tg = _target(tmp_path, 1700, "ycsb")
    sized = runner.size_pretouch_wal(tg, "ycsb")
    assert sized["max_wal_size"] == "4GB" and sized["pretouch_pages"] == 1700
    r = runner.Runner(_opts("--workloads", "a,c,tpcb", "--configs", "nvm_base_worker"))
    r.configs = [configs.BY_NAME["nvm_base_worker"]]
    cfg = configs.BY_NAME["nvm_base_worker"]
    r.pretouch_wal = {
        "ycsb": {"nvm": {**sized, "max_wal_size": "8GB"}},
        "tpcb": {"nvm": {**sized, "max_wal_size": "7GB"}},
    }
    for w, want in (("a", "8GB"), ("b", "8GB"), ("f", "8GB"), ("tpcb", "7GB"), ("c", "4GB")):
        assert r.point_settings(cfg, "128MB", w)["max_wal_size"] == want, w
    assert r.point_settings(cfg, "128MB")["max_wal_size"] == "4GB"  # plan.json's configs
    doc = r.plan_doc()
    assert doc["ycsb_wal"]["nvm"]["max_wal_size"] == "8GB"
    assert doc["tpcb_wal"]["nvm"]["max_wal_size"] == "7GB"
    big = _target(tmp_path / "big", 400_000_000, "ycsb")
    with pytest.raises(RuntimeError) as e:
        runner.size_pretouch_wal(big, "ycsb")
    assert str(e.value).startswith(
        "oltp-r2000000-nvm: YCSB's max_wal_size is sized from its 400,000,000 pre-touched "
        "pages (max(4GB, 3 × their full-page images)), and max_wal_size 9156GB does not fit"
    ), e.value


_YCSB_TABLES = {
    "tpcb": ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"],
    **{w: ["usertable"] for w in ("a", "b", "f")},
}


def test_method_paragraph_states_ycsbs() -> None:
    sized = {
        "nvm": {
            "pretouch_pages": YCSB_DEFAULT_PAGES,
            "fpi_bytes": YCSB_DEFAULT_PAGES * 8192,
            "factor": 3,
            "minimum": "4GB",
            "max_wal_size": "8GB",
        }
    }
    ab = {"a": "YCSB-A", "b": "YCSB-B", "c": "YCSB-C"}
    on = _method(_plan(workloads=ab, pretouch=True, pretouch_tables=_YCSB_TABLES, ycsb_wal=sized))
    assert (
        " YCSB-A/B: **pre-touch** — `VACUUM` of usertable before the CHECKPOINT (what "
        "earlier points left dead is cleaned, the tables stay bounded), and after it one "
        "`UPDATE` per table that sets field1 to itself in one row (the smallest `ctid`) of "
        "every heap page holding a live row"
    ) in on, on
    assert "on `disk` storage their YCSB-A/B windows start with them in the OS page" in on
    assert (
        "so YCSB-A/B's points run with `max_wal_size` = max(4GB, 3 × the pre-touched pages × "
        "8 kB) rounded up to whole GB, from the pages counted at set-up (nvm: **8GB** for "
        "333,334 pages (2.5 GB of them)"
    ) in on, on
    assert "TPC-B" not in on and "YCSB-C" not in on
    # the memory experiment alone runs YCSB-A; with TPC-B both sentences, TPC-B's first
    mem = _plan(workloads={}, memory_ratios={"1/2": "1GB"}, memory_workload="a")
    assert " YCSB-A: **pre-touch**" in _method(
        {**mem, "pretouch": True, "pretouch_tables": _YCSB_TABLES}
    )
    both = _method(
        _plan(
            workloads={"tpcb": "TPC-B", "a": "YCSB-A"}, pretouch=True, pretouch_tables=_YCSB_TABLES
        )
    )
    assert 0 < both.index(" TPC-B: **pre-touch**") < both.index(" YCSB-A: **pre-touch**")
    off = _method(_plan(workloads=ab, pretouch=False, pretouch_tables=_YCSB_TABLES))
    assert (
        " YCSB-A/B: **no pre-touch** (`--no-pretouch`): the first-touch full-page images of "
        "the usertable pages its keys hit are written in the warm-up"
    ) in off and "VACUUM" not in off
    # YCSB-C only reads: not a word; a run from before YCSB's pre-touch: not a word either
    only_c = _plan(workloads={"c": "YCSB-C"}, pretouch=True, pretouch_tables=_YCSB_TABLES)
    assert "pre-touch" not in _method(only_c)
    old = {"tpcb": _YCSB_TABLES["tpcb"]}
    assert "pre-touch" not in _method(_plan(workloads=ab, pretouch=True, pretouch_tables=old))
