"""Unit tests of bench/tpch: queries, configurations, comparison, statistics, measurement
helpers, report rendering (no server needed)."""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from bench.core import configs, dram, procfs
from bench.tpch import (
    compare,
    data,
    measure,
    methods,
    queries,
    report,
    runner,
    schema,
    settings,
)
from bench.tpch.report import statistics as stats

# --------------------------------------------------------------------------- queries


def test_parse_query_list() -> None:
    assert queries.parse_list("1-22") == list(range(1, 23))
    assert queries.parse_list("1,6,14") == [1, 6, 14]
    assert queries.parse_list("5-3, 7,q9,Q09") == [3, 4, 5, 7, 9]
    for bad in ("0", "23", "1-30", "x", ","):
        with pytest.raises(ValueError):
            queries.parse_list(bad)


def test_every_query_file_renders() -> None:
    for q in queries.ALL_QUERIES:
        text = queries.sql(q, 1.0)
        assert text.lower().lstrip().startswith(("--", "select", "with"))
        assert not text.endswith(";")
        assert "{{" not in text
        assert q in queries.ORDER_KEYS
    assert set(queries.ORDER_KEYS) == set(queries.ALL_QUERIES)


def test_q11_fraction_scales_with_sf() -> None:
    assert queries.fraction(1.0) == "0.0001"
    assert queries.fraction(0.01) == "0.01"
    assert queries.fraction(10) == "0.00001"
    assert "* 0.0001\n" in queries.sql(11, 1.0)


def test_order_keys_are_select_columns() -> None:
    # every ORDER BY key index must be an output column: count the select list roughly by
    # the answer width of a known query
    assert queries.ORDER_KEYS[2] == (0, 2, 1, 3)
    assert queries.ORDER_KEYS[18] == (4, 3)
    for keys in queries.ORDER_KEYS.values():
        assert len(set(keys)) == len(keys)


# --------------------------------------------------------------------------- comparison


def test_values_equal_tolerance() -> None:
    assert compare.values_equal(Decimal("1.10"), Decimal("1.1"))
    assert compare.values_equal(1.0, 1.0 + 1e-12)
    assert not compare.values_equal(1.0, 1.0 + 1e-6)
    assert compare.values_equal(Decimal("123456789.123"), 123456789.123)
    assert not compare.values_equal("a", "b")
    assert compare.values_equal(None, None)
    assert not compare.values_equal(0, None)


def test_compare_identical_and_different() -> None:
    ref = [("A", Decimal("1.00")), ("B", Decimal("2.00"))]
    assert compare.compare(ref, list(ref), (0,)) is None
    assert "rows instead of" in (compare.compare(ref, ref[:1], (0,)) or "")
    bad = [("A", Decimal("1.00")), ("B", Decimal("2.01"))]
    msg = compare.compare(ref, bad, (0,))
    assert msg is not None and "2.01" in msg
    # wrong order of rows with distinct keys is a difference
    assert compare.compare(ref, list(reversed(ref)), (0,)) is not None
    # single-row answers
    assert compare.compare([(1,)], [(2,)], ()) is not None


def test_compare_ties_any_order() -> None:
    ref = [(10, "x"), (10, "y"), (5, "z")]
    got = [(10, "y"), (10, "x"), (5, "z")]
    assert compare.compare(ref, got, (0,)) is None
    wrong = [(10, "y"), (10, "w"), (5, "z")]
    assert compare.compare(ref, wrong, (0,)) is not None


def test_perturb_is_detected() -> None:
    ref = [("A", Decimal("1.5"), 3)]
    assert compare.compare(ref, compare.perturb(ref), (0,)) is not None
    texts = [("a",)]
    assert compare.compare(texts, compare.perturb(texts), ()) is not None


def test_jsonable_and_digest() -> None:
    rows = [(Decimal("1.50"), dt.date(1995, 3, 15), "AIR  ", None, 3)]
    assert compare.rows_jsonable(rows) == [["1.50", "1995-03-15", "AIR  ", None, 3]]
    assert compare.digest(rows) == compare.digest(list(rows))
    assert compare.digest(rows) != compare.digest(compare.perturb(rows))


# --------------------------------------------------------------------------- statistics


def _rec(
    config: str, q: int, wall: float, status: str = "ok", u: float = 1.0, s: float = 0.25
) -> dict[str, Any]:
    return {
        "config": config,
        "query": q,
        "status": status,
        "wall_s": wall,
        "backend": {"utime_s": u, "stime_s": s, "minflt": 10, "majflt": 0},
        "others_cpu_s": 0.1,
    }


def test_median_geomean_kernel_share() -> None:
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([]) is None
    assert stats.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert stats.geomean([]) is None
    assert stats.geomean([1.0, 0.0]) is None
    assert stats.kernel_share(3.0, 1.0) == 0.25
    assert stats.kernel_share(0.0, 0.0) is None
    assert stats.cpu_seconds(None) is None
    assert stats.cpu_seconds({"utime_s": 0.5, "stime_s": 0.25}) == 0.75
    assert stats.cpu_seconds({"utime_s": 0.0, "stime_s": 0.0, "runtime_s": 0.0123}) == 0.0123


def test_cells_and_summary() -> None:
    runs = [_rec("a", 1, w) for w in (1.0, 3.0, 2.0)]
    runs += [_rec("b", 1, w) for w in (2.0, 2.0, 2.0)]
    runs += [_rec("a", 2, 4.0), _rec("b", 2, 1.0)]
    runs += [_rec("a", 3, 5.0), _rec("b", 3, 0.0, status="timeout")]
    t = stats.cells(runs)
    c = t[("a", 1)]
    assert (c.median, c.min, c.max) == (2.0, 1.0, 3.0)
    assert c.kernel_share == pytest.approx(0.2)
    assert c.status_summary() == "ok"
    assert not t[("b", 3)].ok
    assert t[("b", 3)].status_summary() == "1 timeout"
    assert stats.common_queries(t, ["a", "b"], [1, 2, 3]) == [1, 2]
    summ = stats.summarize(t, ["a", "b"], [1, 2, 3], references=["b"])
    assert summ["a"].total == pytest.approx(6.0)
    assert summ["b"].total == pytest.approx(3.0)
    assert summ["a"].geomean == pytest.approx((2.0 * 4.0) ** 0.5)
    assert summ["a"].ratios["b"] == pytest.approx((8.0**0.5) / (2.0**0.5))
    assert summ["a"].total_ratios["b"] == pytest.approx(2.0)
    assert summ["b"].n_failed == 1 and summ["a"].n_failed == 0
    assert stats.normalized(t, "a", "b", 2) == pytest.approx(4.0)
    assert stats.normalized(t, "a", "b", 3) is None


def test_paired_ratios_and_repetition_totals() -> None:
    def rec(config: str, q: int, rep: int, wall: float, status: str = "ok") -> dict[str, Any]:
        return {**_rec(config, q, wall, status), "rep": rep}

    runs = [
        rec("a", 1, 1, 2.0),
        rec("b", 1, 1, 1.0),
        rec("a", 1, 2, 3.0),
        rec("b", 1, 2, 4.0),
        rec("a", 1, 3, 5.0),  # b's third repetition timed out: no pair
        rec("b", 1, 3, 9.0, status="timeout"),
        rec("a", 2, 1, 1.0),
        rec("b", 2, 1, 1.0),
        rec("a", 2, 2, 1.0),
        rec("b", 2, 2, 4.0),
    ]
    # repetition i over repetition i, not the ratio of the medians (2.5 / 2.5 here)
    assert stats.paired_ratios(runs, "a", "b", 1) == [2.0, 0.75]
    assert stats.paired_ratios(runs, "a", "b", 2) == [1.0, 0.25]
    assert stats.paired_ratios(runs, "a", "b", 3) == []
    # per repetition: (2 + 1) / (1 + 1), (3 + 1) / (4 + 4); the third lacks b's query 1 and q2
    assert stats.repetition_total_ratios(runs, "a", "b", [1, 2]) == [1.5, 0.5]
    assert stats.repetition_total_ratios(runs, "a", "b", [2]) == [1.0, 0.25]


# --------------------------------------------------------------------------- data & schema


def test_fmt_sf() -> None:
    assert data.fmt_sf(1.0) == "1"
    assert data.fmt_sf(0.01) == "0.01"
    assert data.fmt_sf(10) == "10"
    assert data.fmt_sf(0.1) == "0.1"


def test_manifest_digest_and_hash(tmp_path: Path) -> None:
    f = tmp_path / "region.csv"
    f.write_text("r_regionkey,r_name,r_comment\n0,AFRICA,x\n1,AMERICA,y\n")
    digest, size, rows = data.hash_file(f)
    assert rows == 2 and size == f.stat().st_size and len(digest) == 64
    files = {t: data.FileInfo(f"{t}.csv", 1, 1, "00") for t in data.TABLES}
    m = data.Manifest(1.0, "gen 1", files)
    m2 = data.Manifest.from_json(json.loads(json.dumps(m.to_json())))
    assert m2.digest == m.digest
    files2 = dict(files)
    files2["lineitem"] = data.FileInfo("lineitem.csv", 1, 2, "00")
    assert data.Manifest(1.0, "gen 1", files2).digest != m.digest


def test_ddl_and_checksum() -> None:
    ddl = schema.ddl_statements()
    assert len(ddl["tables"]) == 8
    assert len(ddl["keys"]) == 8
    # indexes only on foreign-key columns (TPC-H clause 1.5.4)
    fk_cols = {(t, c) for t, cols, _, _ in schema.FOREIGN_KEYS for c in cols}
    for t, cols in schema.FK_INDEXES:
        assert all((t, c) in fk_cols for c in cols), (t, cols)
    files = {t: data.FileInfo(f"{t}.csv", 1, 5, "00") for t in data.TABLES}
    m = data.Manifest(1.0, "gen", files)
    exp = schema.expected_checksum(1.0, m)
    assert schema.checksum_mismatch(None, exp) is not None
    assert schema.checksum_mismatch(dict(exp, loaded_rows={}), exp) is None
    stale = dict(exp, schema_version=exp["schema_version"] - 1)
    assert "schema_version" in (schema.checksum_mismatch(stale, exp) or "")


# --------------------------------------------------------------------------- measurement


def test_group_of() -> None:
    assert measure.group_of("postgres: io worker 2") == "io worker"
    assert measure.group_of("postgres: checkpointer ") == "checkpointer"
    assert measure.group_of("postgres: pgnvm tpch [local] idle") == "client backend"
    assert measure.group_of("whatever", "io worker") == "io worker"


def test_cluster_delta() -> None:
    def ps(u: float, s: float, start: int = 1, cu: float = 0.0) -> measure.ProcSample:
        return procfs.ProcSample(u, s, 0, 0, cu, 0.0, start, 0, 0, 0)

    before = measure.ClusterSample(
        ps(1, 1, cu=0.5), {10: ("io worker", ps(1, 0)), 11: ("checkpointer", ps(2, 2))}
    )
    after = measure.ClusterSample(
        ps(1, 1, cu=1.5),
        {
            10: ("io worker", ps(1.5, 0.25)),
            11: ("checkpointer", ps(2, 2)),
            12: ("parallel worker", ps(0.3, 0, 9)),
        },
    )
    d = measure.cluster_delta(before, after)
    assert d["groups"]["io worker"]["utime_s"] == pytest.approx(0.5)
    assert d["groups"]["io worker"]["stime_s"] == pytest.approx(0.25)
    assert d["groups"]["parallel worker"]["utime_s"] == pytest.approx(0.3)
    assert d["exited_children"]["utime_s"] == pytest.approx(1.0)
    assert measure.others_cpu_total(d) == pytest.approx(0.5 + 0.25 + 0.3 + 1.0)


def test_stat_io_delta() -> None:
    k = ("client backend", "relation", "normal")
    before = {k: {"reads": 5.0, "hits": 10.0, "read_bytes": 40960.0}}
    after = {
        k: {"reads": 8.0, "hits": 10.0, "read_bytes": 65536.0},
        ("io worker", "relation", "normal"): {"reads": 2.0},
    }
    rows = measure.stat_io_delta(before, after)
    assert {
        "backend_type": "client backend",
        "object": "relation",
        "context": "normal",
        "reads": 3,
        "read_bytes": 24576,
    } in rows
    assert measure.stat_io_sum(rows, "io worker", "reads") == 2


def test_perf_counters_degrade() -> None:
    """Software counters work wherever perf_event_open does; hardware ones are either
    counted or recorded as not available, never an exception."""
    pc = measure.PerfCounters(os.getpid())
    pc.start()
    sum(range(100000))
    res = pc.stop()
    assert set(res["counters"]) == set(measure.counter_names())
    if measure.hardware_unavailable_reason() is not None:
        assert res["counters"]["cycles_user"] is None
        assert res["hardware"].startswith("not available")


def test_scaled() -> None:
    assert measure.scaled(100, 10, 5) == 200
    assert measure.scaled(0, 0, 0) == 0.0
    assert measure.scaled(5, 10, 0) is None


# --------------------------------------------------------------------------- runner helpers


def test_parse_perturb() -> None:
    assert runner.parse_perturb("nvm_se1:6, mem_limit:q14") == {("nvm_se1", 6), ("mem_limit", 14)}
    assert runner.parse_perturb(None) == set()


def test_csv_row_flattens() -> None:
    rec = _rec("nvm_se1", 6, 1.5)
    rec["others"] = {
        "groups": {"io worker": {"utime_s": 0.5, "stime_s": 0.25, "procs": 3}},
        "exited_children": {"utime_s": 0.0, "stime_s": 0.0},
    }
    rec["pg_stat_io"] = [
        {
            "backend_type": "client backend",
            "object": "relation",
            "context": "normal",
            "reads": 7,
            "hits": 3,
        }
    ]
    rec["perf"] = {"counters": {"cycles_user": 123.0}}
    row = runner.csv_row(rec)
    assert row["io_worker_cpu_s"] == pytest.approx(0.75)
    assert row["client_reads"] == 7 and row["client_hits"] == 3
    assert row["cycles_user"] == 123.0 and row["cycles_kernel"] is None
    assert set(row) <= set(runner.CSV_FIELDS)


# --------------------------------------------------------------------------- report


def _plan(names: list[str], qs: list[int]) -> dict[str, Any]:
    cfg = []
    for n in names:
        c = configs.BY_NAME[n]
        cfg.append(
            {
                "name": n,
                "engine": c.engine,
                "storage": c.storage,
                "doc": c.doc,
                "settings": c.settings,
                "prewarm": c.prewarm,
                "drop_caches": c.drop_caches,
                "server_settings": {"shared_buffers": "128MB"},
            }
        )
    return {
        "sf": 0.01,
        "queries": qs,
        "repeat": 2,
        "timeout_s": 60.0,
        "parallel_workers": 0,
        "shared_buffers": "128MB",
        "work_mem": "64MB",
        "configs": cfg,
        "unavailable": {"nvm_se2": "not in this build"},
        "order": "interleaved",
        "started_at": "2026-01-01T00:00:00",
    }


def test_report_renders(tmp_path: Path) -> None:
    names = ["disk_base", "nvm_base_worker", "nvm_se1", "mem_limit"]
    qs = [1, 6, 14]
    recs = []
    for n_i, n in enumerate(names):
        for q in qs:
            for rep in (1, 2):
                r = _rec(n, q, 0.5 + 0.1 * n_i + 0.01 * q + 0.001 * rep)
                r["rep"] = rep
                r["loadavg_1m"] = 0.3
                r["pg_stat_io"] = [
                    {
                        "backend_type": "client backend",
                        "object": "relation",
                        "context": "normal",
                        "reads": 10,
                        "hits": 5,
                    }
                ]
                recs.append(r)
    recs.append(dict(_rec("nvm_se1", 14, 0.0, status="timeout"), rep=3))
    mism = [
        {
            "query": 6,
            "config": "nvm_se1",
            "rep": 1,
            "reference": "disk_base",
            "diff": "row 1: (2) instead of (1)",
        }
    ]
    rpt = report.Report(
        tmp_path,
        report.Analysis(
            _plan(names, qs),
            {"cpus": 2, "hardware_counters": "x"},
            recs,
            mism,
            {(1, "nvm_se1"): "Seq Scan", (1, "disk_base"): "Index"},
        ),
    )
    rpt.write()
    md = (tmp_path / "report.md").read_text()
    assert "CORRECTNESS FAILED" in md and "Q06" in md
    assert "nvm_se2" in md and "NOT AVAILABLE" in md
    assert "not available" in md  # hardware counters
    # the normalised table gives the spread of the per-repetition pairs, and the totals per
    # repetition (q14's third nvm_se1 run has no nvm_base_worker partner: not counted)
    assert "| Q01 | 0.836 [0.84–0.84] | 1.000 | 1.164 [1.16–1.16] | 1.327 [1.33–1.33] |" in md
    assert "× nvm_base_worker: disk_base 0.851, 0.851; nvm_se1 1.149, 1.149; mem_limit" in md
    for png in (
        "wallclock_normalized.png",
        "kernel_share.png",
        "totals.png",
        "page_faults.png",
        "cpu_breakdown.png",
    ):
        assert (tmp_path / png).stat().st_size > 1000, png
        assert png in md
    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<img src='totals.png'" in html
    summ = json.loads((tmp_path / "summary.json").read_text())
    # q14 had a timeout in nvm_se1 but also ok runs: it still has a median everywhere
    assert summ["common_queries"] == [1, 6, 14]
    assert summ["cells"]["nvm_se1/q14"]["status"] == "2 ok, 1 timeout"
    rpt.print_summary()


def test_report_rebuild(tmp_path: Path) -> None:
    names = ["nvm_base_sync", "nvm_se1"]
    (tmp_path / "plan.json").write_text(json.dumps(_plan(names, [1])))
    (tmp_path / "env.json").write_text(json.dumps({"cpus": 2}))
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(_rec(n, 1, 1.0)) + "\n" for n in names))
    rep = report.rebuild(tmp_path)
    assert rep.a.baseline == "nvm_base_sync"  # nvm_base_worker did not run
    assert "Correctness: OK" in (tmp_path / "report.md").read_text()


# --------------------------------------------------------------------------- prefetch helpers


def _fake_task(proc: Path, pid: int, tid: int, ut: int, st: int, minflt: int, start: int) -> None:
    d = proc / str(pid) / "task" / str(tid)
    d.mkdir(parents=True, exist_ok=True)
    # fields from 3 (state) on; 10 minflt, 12 majflt, 14 utime, 15 stime, 22 starttime
    f = ["S"] + ["0"] * 49
    f[10 - 3], f[14 - 3], f[15 - 3], f[22 - 3] = str(minflt), str(ut), str(st), str(start)
    (d / "stat").write_text(f"{tid} (postgres: x (y)) " + " ".join(f) + "\n")
    (d / "schedstat").write_text(f"{(ut + st) * 10_000_000} 0 5\n")
    (d / "status").write_text("voluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches:\t1\n")


def test_thread_samples_and_backend_delta(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    tick = procfs.CLK_TCK
    pid = 4242
    _fake_task(proc, pid, pid, 10, 5, 100, 1000)  # before the query: only the main thread
    before = procfs.thread_samples(pid, proc)
    assert list(before) == [pid]
    # after: the main thread ran on; two helpers started during the query
    _fake_task(proc, pid, pid, 10 + 2 * tick, 5 + tick // 2, 150, 1000)
    _fake_task(proc, pid, pid + 1, tick, tick, 900, 2000)
    _fake_task(proc, pid, pid + 2, tick // 2, 0, 40, 2001)
    after = procfs.thread_samples(pid, proc)
    assert sorted(after) == [pid, pid + 1, pid + 2]
    main, helpers = measure.backend_delta(pid, before, after)
    assert main is not None
    assert main["utime_s"] == pytest.approx(2.0)
    assert main["stime_s"] == pytest.approx((tick // 2) / tick)
    assert main["minflt"] == 50
    assert helpers["threads"] == 2 and helpers["tids"] == [pid + 1, pid + 2]
    assert helpers["utime_s"] == pytest.approx(1.0 + (tick // 2) / tick)
    assert helpers["stime_s"] == pytest.approx(1.0)
    assert helpers["minflt"] == 940
    assert helpers["vcsw"] == 6
    # a helper already there before counts its difference only
    main2, h2 = measure.backend_delta(pid, after, after)
    assert main2 is not None and main2["utime_s"] == 0 and h2["utime_s"] == 0
    # no helpers: zeros, not missing
    _, none = measure.backend_delta(pid, before, before)
    assert none["threads"] == 0 and none["utime_s"] == 0
    assert procfs.thread_samples(99999, proc) == {}


def test_thread_samples_self() -> None:
    s = procfs.thread_samples(os.getpid())
    assert os.getpid() in s and s[os.getpid()].minflt >= 0


def test_csv_row_helpers() -> None:
    rec = _rec("nvm_se2_m1", 1, 1.0)
    rec["helpers"] = {"threads": 1, "utime_s": 0.3, "stime_s": 0.2, "minflt": 900}
    rec["prefetch"] = {"scheme": "M1", "jobs_enqueued": 10, "jobs_dropped": 1}
    row = runner.csv_row(rec)
    assert row["helper_threads"] == 1 and row["helper_utime_s"] == 0.3
    assert row["pf_scheme"] == "M1" and row["pf_jobs_dropped"] == 1
    assert row["pf_fault_errors"] is None
    assert set(row) <= set(runner.CSV_FIELDS)


def test_report_helper_cpu(tmp_path: Path) -> None:
    names = ["nvm_base_worker", "nvm_se2", "nvm_se2_m1"]
    recs = []
    for n in names:
        for q in (1, 6):
            r = _rec(n, q, 1.0)
            r["helpers"] = {"threads": 0, "utime_s": 0.0, "stime_s": 0.0, "minflt": 0}
            if n == "nvm_se2_m1":
                r["helpers"] = {
                    "threads": 1,
                    "utime_s": 0.25,
                    "stime_s": 0.5,
                    "runtime_s": 0.8,  # schedstat: preferred over the ticks
                    "minflt": 9,
                }
                r["prefetch"] = {
                    "mapping": "m1",
                    "scheme": "M1",
                    "helper_cpus": [1],
                    "jobs_enqueued": 100,
                    "jobs_dropped": 0,
                    "jobs_skipped": 3,
                    "fault_errors": 0,
                    "helper_cpu_ms": 700.0,
                    "fallback": None,
                }
            recs.append(r)
    plan = _plan(names, [1, 6])
    plan["unavailable"] = {"nvm_se2_m2": "no SMT sibling: CPUs 0-1 are one thread per core"}
    rpt = report.Report(tmp_path, report.Analysis(plan, {"cpus": 2}, recs, []))
    assert rpt.a.helper_configs == ["nvm_se2_m1"]
    assert rpt.a.helper_total("nvm_se2_m1") == pytest.approx(1.6)
    assert rpt.a.helper_total("nvm_se2") is None
    rpt.write()
    md = (tmp_path / "report.md").read_text()
    assert "## Prefetch helper threads" in md
    assert "helper CPU [s]" in md and "helper threads user [s]" in md
    assert "0.800 / 1.250 (1 thr)" in md  # per query: helpers / main thread (no schedstat)
    assert "nvm_se2_m2 — not available: no SMT sibling: CPUs 0-1 are one thread per core" in md
    assert "includes its own helper threads" in md
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert summ["configs"]["nvm_se2_m1"]["helper_cpu_s"] == pytest.approx(1.6)
    assert summ["configs"]["nvm_se2"]["helper_cpu_s"] is None
    assert summ["cells"]["nvm_se2_m1/q01"]["helper_cpu_s"] == pytest.approx(0.8)
    assert summ["not_available"] == plan["unavailable"]
    rpt.print_summary()


# --------------------------------------------------------------------------- data checksums


def test_checksums_cluster_names() -> None:
    from bench.tpch import targets

    assert targets.cluster_name("tpch", 1.0, "nvm") == "tpch-sf1-nvm"
    assert targets.cluster_name("tpch", 1.0, "nvm", True) == "tpch-sf1-nvm"
    assert targets.cluster_name("tpch", 1.0, "nvm", False) == "tpch-sf1-nvm-nocsum"
    assert targets.cluster_name("tpch", 0.01, "disk", False) == "tpch-sf0.01-disk-nocsum"
    assert targets.checksums_text(True) == "on" and targets.checksums_text(False) == "off"
    on = targets.Target("nvm", 1.0)
    off = targets.Target("disk", 1.0, "tpch", 5580, data_checksums=False)
    assert on.name == "tpch-sf1-nvm" and on.data_checksums
    assert off.name == "tpch-sf1-disk-nocsum" and not off.data_checksums
    assert off.port == 5581  # the ports do not depend on the setting


def test_checksums_cluster_spec() -> None:
    from bench.core import cluster as cl

    spec = cl.ClusterSpec(name="x")
    assert spec.data_checksums and cl.checksums_flag(spec) == "--data-checksums"
    off = cl.ClusterSpec(name="x", data_checksums=False)
    assert cl.checksums_flag(off) == "--no-data-checksums"
    assert cl.needs_reinit(spec, off) == ["data_checksums"]
    # a spec.json written before the field existed: clusters were always initdb'd with them
    old = {k: v for k, v in spec.to_json().items() if k != "data_checksums"}
    assert cl.ClusterSpec.from_json(old).data_checksums is True
    assert cl.ClusterSpec.from_json(off.to_json()).data_checksums is False


@pytest.mark.parametrize(("arg", "on"), [(None, True), ("on", True), ("off", False)])
def test_checksums_cli_option(monkeypatch: pytest.MonkeyPatch, arg: str | None, on: bool) -> None:
    import argparse

    from bench.tpch import cli as tpch_cli

    seen: list[runner.Options] = []
    monkeypatch.setattr(runner, "run", lambda o: seen.append(o) or 0)
    p = argparse.ArgumentParser()
    tpch_cli.register(p.add_subparsers())
    argv = ["tpch", "--sf", "0.01"] + (["--data-checksums", arg] if arg else [])
    args = p.parse_args(argv)
    assert args.func(args) == 0
    assert seen[0].data_checksums is on
    with pytest.raises(SystemExit):
        p.parse_args(["tpch", "--data-checksums", "maybe"])


def test_checksums_out_dir_and_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    for on, suffix in ((True, "-sf1"), (False, "-sf1-nocsum")):
        r = runner.Runner(runner.Options(data_checksums=on))
        r.started = dt.datetime(2026, 1, 2, 3, 4, 5)
        assert r.out_dir() == runner.RESULTS_DIR / f"20260102-030405{suffix}"
        assert r.plan_doc()["data_checksums"] == ("on" if on else "off")
    r = runner.Runner(runner.Options(data_checksums=False, out=Path("/x/y")))
    assert r.out_dir() == Path("/x/y")  # --out wins


def test_report_states_checksums(tmp_path: Path) -> None:
    names = ["nvm_base_worker", "nvm_se1"]
    recs = [_rec(n, 1, 1.0) for n in names]
    for setting in ("off", "on", None):  # None: a plan.json written before the option
        out = tmp_path / str(setting)
        out.mkdir()
        plan = _plan(names, [1])
        if setting is not None:
            plan["data_checksums"] = setting
        rpt = report.Report(out, report.Analysis(plan, {"cpus": 2}, recs, []))
        rpt.write()
        md = (out / "report.md").read_text()
        shown = setting or "on"
        assert md.startswith(f"# TPC-H SF 0.01 on pgnvm, data checksums {shown}\n")
        if shown == "off":
            assert "data checksums **off** (initdb --no-data-checksums" in md
            assert "data checksums on" not in md
        else:
            assert "data checksums on (initdb --data-checksums)" in md
            assert "data checksums **off**" not in md
        assert f"repetition(s); data checksums {'**off**' if shown == 'off' else 'on'}" in md
        summ = json.loads((out / "summary.json").read_text())
        assert summ["data_checksums"] == shown


def _report_md(tmp_path: Path, name: str, other_cpu_s: float, load: float) -> str:
    """report.md of a fabricated run of 2 configurations x 3 queries x 2 runs whose queries
    each took 1 s, with ``other_cpu_s`` of other work in each and the load average ``load``."""
    names, qs = ["nvm_base_worker", "nvm_se1"], [1, 6, 14]
    recs = []
    for n in names:
        for q in qs:
            for rep in (1, 2):
                r = dict(_rec(n, q, 1.0), rep=rep, loadavg_1m=load)
                r["other_work"] = {"window_s": 1.0, "other_cpu_s": other_cpu_s}
                recs.append(r)
    out = tmp_path / name
    out.mkdir()
    report.Report(out, report.Analysis(_plan(names, qs), {"cpus": 2}, recs, [])).write()
    return (out / "report.md").read_text()


def test_busy_warning_judges_other_work_not_the_load(tmp_path: Path) -> None:
    """The load average counts this run's own server: a quiet run at load 1.3 on 2 CPUs
    gets no warning; a run with 0.6 CPUs of other work does. Both show the figures."""
    quiet = _report_md(tmp_path, "quiet", other_cpu_s=0.05, load=1.3)
    assert "Warning: the machine was busy" not in quiet
    assert "| other work (CPUs busy outside this run) | median 0.05, max 0.05 over 12" in quiet
    assert "this run's own server included) | median 1.30, max 1.30 |" in quiet
    busy = _report_md(tmp_path, "busy", other_cpu_s=0.6, load=0.2)
    assert "**Warning: the machine was busy with other work during the runs**" in busy
    assert "median 0.60, max 0.60 on 2 CPUs" in busy


def test_default_run_fits_its_budget() -> None:
    """The estimate reproduces the default run of issue 21 (594 runs: 19m55s with data
    generation and loads), and every default configuration, M2/M3 included (a machine with
    SMT runs them), stays within 20 minutes at SF 1: a default added later must fit too."""
    from bench.tpch import settings as tpch_settings

    est = tpch_settings.estimate_seconds(594, 1.0) + tpch_settings.SETUP_S_PER_SF
    assert abs(est - (19 * 60 + 55)) < 30
    runs = len(tpch_settings.DEFAULT_CONFIGS) * 22 * 3
    assert tpch_settings.estimate_seconds(runs, 1.0) + tpch_settings.SETUP_S_PER_SF <= (
        tpch_settings.BUDGET_S
    )
    assert "nvm_base_worker" in tpch_settings.DEFAULT_CONFIGS
    assert not set(tpch_settings.BY_NAME_ONLY) & set(tpch_settings.DEFAULT_CONFIGS)


# --------------------------------------------------------------------------- method, DRAM


def _dram(shared: float, backend: float) -> dict[str, Any]:
    return {
        "shared_mb": shared,
        "backend_mb": backend,
        "total_mb": shared + backend,
        "shared_start_mb": shared,
        "samples": 3,
        "interval_s": 0.05,
        "shared_source": "resident pages of the shared memory (mincore)",
    }


def test_report_method_and_dram_columns(tmp_path: Path) -> None:
    names = ["nvm_base_worker", "nvm_se2"]
    recs = []
    for n, shared in (("nvm_base_worker", 140.0), ("nvm_se2", 40.0)):
        for q in (1, 6):
            # the warm-up: checked, not counted (its DRAM would be the peak)
            recs.append(dict(_rec(n, q, 9.0), rep=0, warmup=True, dram=_dram(999.0, 1.0)))
            for rep in (1, 2):
                r = _rec(n, q, 1.0 + rep / 10)
                r["rep"] = rep
                r["dram"] = _dram(shared + 10 * (q == 1) + rep, 5.0 * rep)  # peaks in Q1
                recs.append(r)
    plan = _plan(names, [1, 6])
    plan.pop("unavailable")
    plan.update(method="warm", method_doc=methods.METHODS["warm"].doc)
    a = report.Analysis(plan, {"cpus": 2}, recs, [])
    assert a.method == "warm" and a.warmups == 4 and len(a.records) == 8
    assert a.dram("nvm_se2") == {"shared": 52.0, "backend": 10.0, "total": 62.0}
    assert a.dram("nvm_base_worker", 1) == {"shared": 152.0, "backend": 10.0, "total": 162.0}
    assert a.summary["nvm_se2"].total == pytest.approx(1.15 * 2)  # the warm-ups' 9 s left out
    report.Report(tmp_path, a).write()
    md = (tmp_path / "report.md").read_text()
    # the method's own line under the title (the protocol says it again)
    assert f"\n\n**Method: warm** (`--method warm`): {methods.METHODS['warm'].doc}." in md
    assert "4 warm-up run(s) discarded" in md
    head = next(line for line in md.splitlines() if line.startswith("| configuration | engine"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    assert cols[5:8] == ["shared [MB]", "backend [MB]", "DRAM [MB]"]
    row = next(line for line in md.splitlines() if line.startswith("| nvm_se2 | se2"))
    assert [c.strip() for c in row.strip("|").split("|")][5:8] == ["52", "10", "62"]
    assert "## Peak DRAM per query" in md and "| Q06 | 152 (142 + 10) | 52 (42 + 10) |" in md
    assert "a peak shorter than the interval can be missed" in md and "mincore" in md
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert summ["method"]["name"] == "warm" and summ["method"]["warmup_runs_discarded"] == 4
    assert summ["configs"]["nvm_se2"]["dram_peak_mb"]["total"] == 62.0
    assert summ["cells"]["nvm_se2/q06"]["dram_peak_mb"]["shared"] == 42.0
    row_csv = runner.csv_row(recs[1])
    assert (row_csv["dram_shared_mb"], row_csv["dram_total_mb"]) == (151.0, 156.0)
    assert runner.csv_row(recs[0])["warmup"] is True
    # no server had hugetlb pages: not a word of them
    assert "Huge pages" not in md and runner.csv_row(recs[1])["dram_hugetlb_reserved_mb"] is None


def test_report_says_shared_counts_the_touched_hugetlb_pages(tmp_path: Path) -> None:
    """mem_limit with huge_pages = on and vm.nr_hugepages reserved (bench.core.dram's
    ``hugetlb`` section): *shared* is the touched huge pages, the report says so and gives
    the reserved segment beside it; runs.csv has both."""
    names = ["mem_limit", "nvm_se2"]
    recs = []
    for n in names:
        for q in (1, 6):
            r = _rec(n, q, 1.0)
            r["rep"] = 1
            r["dram"] = _dram(1650.0 if n == "mem_limit" else 50.0, 5.0)
            if n == "mem_limit":
                r["dram"]["hugetlb"] = {
                    "counted_in_shared": "touched",
                    "touched_mb": 1640.0 - 100 * (q == 6),
                    "touched_start_mb": 1600.0,
                    "reserved_mb": 2180.0,
                    "page_kb": 2048,
                    "measured_as": dram.SOURCE_HUGETLB_ALLOCATED,
                    "pool_mb": 2304.0,
                    "pool_taken_mb": 2180.0,
                    "pool_rsvd_mb": 540.0,
                }
            recs.append(r)
    plan = _plan(names, [1, 6])
    plan.pop("unavailable")
    plan.update(method="prewarm", method_doc=methods.METHODS["prewarm"].doc)
    report.Report(tmp_path, report.Analysis(plan, {"cpus": 2}, recs, [])).write()
    md = (tmp_path / "report.md").read_text()
    assert (
        "**Huge pages**: the main shared memory segment was in hugetlb pages (2048 kB; "
        "`huge_pages` with `vm.nr_hugepages` reserved) in mem_limit. *shared* counts the "
        "huge pages the server **touched**"
    ) in md
    assert "not the ones it **reserved**" in md
    assert "(peaks: mem_limit: 1640 MB touched of 2180 MB reserved; the pool: 2304 MB" in md
    row = runner.csv_row(recs[0])
    assert (row["dram_hugetlb_touched_mb"], row["dram_hugetlb_reserved_mb"]) == (1640.0, 2180.0)
    assert runner.csv_row(recs[2])["dram_hugetlb_touched_mb"] is None  # nvm_se2: base pages


def test_report_of_a_run_before_the_method_and_dram(tmp_path: Path) -> None:
    names = ["nvm_base_worker", "nvm_se1"]
    a = report.Analysis(_plan(names, [1]), {"cpus": 2}, [_rec(n, 1, 1.0) for n in names], [])
    assert a.method == "cold" and a.warmups == 0
    report.Report(tmp_path, a).write()
    md = (tmp_path / "report.md").read_text()
    assert "\n\n**Method: cold**" in md and "not sampled" in md
    assert json.loads((tmp_path / "summary.json").read_text())["configs"]["nvm_se1"][
        "dram_peak_mb"
    ] == {"shared": None, "backend": None, "total": None}


def test_report_says_which_pools_a_prewarm_did_not_cover(tmp_path: Path) -> None:
    names = ["nvm_base_worker", "mem_limit"]
    plan = _plan(names, [1])
    plan.update(method="prewarm", pool_covers_db={"nvm_base_worker": False, "mem_limit": True})
    a = report.Analysis(plan, {"cpus": 2}, [_rec(n, 1, 1.0) for n in names], [])
    report.Report(tmp_path, a).write()
    md = (tmp_path / "report.md").read_text()
    assert f"**Method: prewarm** (`--method prewarm`): {methods.METHODS['prewarm'].doc}." in md
    assert "The pool of nvm_base_worker does not cover the database" in md
    assert "| nvm_base_worker | base | nvm | 128MB (< database) |" in md
    assert "| mem_limit | base | nvm | 128MB |" in md
    rows = [
        line
        for line in md.splitlines()
        if line.startswith(("| nvm_base_worker | base", "| mem_limit | base"))
    ]
    assert all("| yes |" in r for r in rows[-2:])  # the configuration table: both prewarmed


# --------------------------------------------------------------------------- pgnvm counters


def _nvm(redirects: int, kept: int, stale: int = 0, helper: int = 0, backend: int = 0) -> dict:
    """A run's pgnvm delta as the runner records it (bench.core.counters.run_delta)."""
    d = dict.fromkeys(runner.NVM_KEYS, 0)
    d.update(redirects=redirects, views_kept=kept, views_stale=stale)
    d.update(verified_by_helper=helper, verified_by_backend=backend, slots=16384)
    return d


def test_csv_row_has_the_pgnvm_counters() -> None:
    rec = _rec("nvm_se2_m1", 6, 1.0)
    rec["pgnvm_stats"] = _nvm(120, 4000, stale=3, helper=100, backend=20)
    row = runner.csv_row(rec)
    assert (row["nvm_redirects"], row["nvm_views_kept"], row["nvm_views_stale"]) == (120, 4000, 3)
    assert (row["nvm_verified_by_helper"], row["nvm_slots"]) == (100, 16384)
    assert len(runner.CSV_FIELDS) == len(set(runner.CSV_FIELDS)) and set(row) <= set(
        runner.CSV_FIELDS
    )
    # no extension: empty cells, no error
    row = runner.csv_row(_rec("mem_limit", 6, 1.0))
    assert all(row[f"nvm_{k}"] is None for k in runner.NVM_KEYS)


def test_report_pgnvm_counters(tmp_path: Path) -> None:
    names = ["nvm_base_worker", "nvm_se2_m1", "mem_limit"]
    recs = []
    for q in (1, 6):
        for rep, (r, k, v) in enumerate(((100, 10, 7), (300, 30, 9), (200, 20, 8)), 1):
            recs.append(dict(_rec("nvm_base_worker", q, 2.0), rep=rep, pgnvm_stats=_nvm(0, 0)))
            se2 = _nvm(r * q, k * q, stale=q, helper=v, backend=1)
            recs.append(dict(_rec("nvm_se2_m1", q, 1.0), rep=rep, pgnvm_stats=se2))
            recs.append(dict(_rec("mem_limit", q, 0.5), rep=rep))  # no extension
    a = report.Analysis(_plan(names, [1, 6]), {"cpus": 2}, recs, [])
    assert a.nvm_configs == ["nvm_base_worker", "nvm_se2_m1"]
    # medians per query (Q1: 200, Q6: 1200), summed over the common queries
    assert a.median_of("nvm_se2_m1", 6, stats.nvm_counter("redirects")) == 1200
    assert a.nvm_total("nvm_se2_m1", "redirects") == 1400
    assert a.nvm_total("nvm_se2_m1", "verified") == 2 * (8 + 1)
    assert a.nvm_total("nvm_base_worker", "redirects") == 0
    assert a.nvm_total("mem_limit", "redirects") is None
    report.Report(tmp_path, a).write()
    md = (tmp_path / "report.md").read_text()
    sect = md[md.index("## pgnvm counters") : md.index("## pg_stat_io")]
    assert "**whole server**" in sect
    # columns zero in every configuration left out; mem_limit has no row
    assert "| configuration | engine | redirects | views kept | views stale | verified | " in sect
    assert "| nvm_se2_m1 | se2 | 1400 | 140 | 7 | 18 | 16 |" in sect
    assert "| nvm_base_worker | base | 0 | 0 | 0 | 0 | 0 |" in sect and "| mem_limit" not in sect
    assert "nvm_base_worker: every counter shown is 0." in sect
    assert "| query | nvm_se2_m1 |" in sect and "| Q06 | 1200 / 120 / 6 / 0 / 9 |" in sect
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert summ["configs"]["nvm_se2_m1"]["pgnvm_counters"]["views_kept"] == 140
    assert summ["configs"]["mem_limit"]["pgnvm_counters"] is None
    assert summ["cells"]["nvm_se2_m1/q01"]["pgnvm_counters"]["redirects"] == 200
    # a run without any counters: said so, no table
    b = report.Analysis(_plan(["mem_limit"], [1]), {"cpus": 2}, [_rec("mem_limit", 1, 1.0)], [])
    report.Report(tmp_path, b).write()
    assert (
        "Not recorded: no configuration's database had extension pgnvm"
        in (tmp_path / "report.md").read_text()
    )


# --------------------------------------------------------------------------- DRAM


def test_a_pool_for_the_whole_database_must_fit_the_dram_available() -> None:
    gib = 1 << 30
    mem_limit, se2_wholedb = configs.BY_NAME["mem_limit"], configs.BY_NAME["nvm_se2_wholedb"]
    assert settings.fills_dram_with_db(mem_limit)
    assert settings.fills_dram_with_db(configs.BY_NAME["nvm_base_wholedb"])
    # se2 redirects its buffers to the mapping; the others keep the job's 128 MB
    assert not settings.fills_dram_with_db(se2_wholedb)
    assert not settings.fills_dram_with_db(configs.BY_NAME["nvm_se2_hybrid"])
    assert not settings.fills_dram_with_db(configs.BY_NAME["nvm_base_worker"])
    db = 5 * gib  # SF 3
    assert settings.dram_shortfall(mem_limit, db, 6 * gib) is None  # db + 1 GiB fits
    why = settings.dram_shortfall(mem_limit, db, 6 * gib - 1)
    assert why is not None and "about 6.0 GiB (the 5.0 GiB database + 1 GiB" in why
    assert "only 6.0 GiB available (MemAvailable" in why
    assert settings.dram_shortfall(se2_wholedb, db, gib) is None
    assert settings.dram_shortfall(mem_limit, db, None) is None  # /proc does not say: run


def test_a_small_load_fits_a_small_file_system() -> None:
    """SF 0.01 (17 MB of database) on the 2 GiB tmpfs of test_storage_root_e2e: a fixed
    2 GiB margin refused it (CI of 2026-11-26); the margin grows with the data."""
    gib = 1 << 30
    assert settings.load_bytes(0.01) < gib // 2
    assert settings.load_shortfall(0.01, 2 * gib - (64 << 20), 20 * gib, tmpfs=True) is None
    # the margin never exceeds LOAD_MARGIN + LOAD_FLOOR, and covers the data up to it
    assert (
        settings.load_bytes(3)
        == int(settings.DB_BYTES_PER_SF * 3) + settings.LOAD_MARGIN + settings.LOAD_FLOOR
    )
    assert settings.load_bytes(1) >= 2 * int(settings.DB_BYTES_PER_SF)


def test_a_load_must_fit_the_file_system_and_on_a_tmpfs_the_dram() -> None:
    gib = 1 << 30
    need = settings.load_bytes(3)  # SF 3: ~6.9 GiB
    assert settings.load_shortfall(3, need, need, tmpfs=True) is None
    why = settings.load_shortfall(3, need - 1, 100 * gib, tmpfs=False)
    assert why == "loading TPC-H SF 3 needs about 6.9 GiB, its file system has 6.9 GiB free"
    why = settings.load_shortfall(3, 15 * gib, 4 * gib, tmpfs=True)
    assert why is not None and "on a tmpfs, i.e. of DRAM, only 4.0 GiB available" in why
    # on a disk the page cache gives way: DRAM does not matter
    assert settings.load_shortfall(3, 15 * gib, 4 * gib, tmpfs=False) is None
    assert settings.load_shortfall(3, 15 * gib, None, tmpfs=True) is None
