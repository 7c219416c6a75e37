"""./pgnvm micro tablescan|bufman|logging|storage: the plan, bad input, the targets' checks,
storagebench's command lines and JSON documents, the analysis (headline ratios, Fig. 4, fio)
and the report; a smoke run of every benchmark at a tiny size through the whole pipeline
(storagebench built into a temporary directory)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.micro.storage import analysis, fio, plan, report, runner, targets
from bench.micro.storage import cli as storage_cli
from bench.micro.storage.plan import GiB, Job, KiB, MiB, PlanError

# ---------------------------------------------------------------- plan


def test_default_threads_double_the_cores() -> None:
    assert plan.default_threads(2) == (1, 2, 4)
    assert plan.default_threads(1) == (1, 2)
    assert plan.default_threads(3) == (1, 2, 4)


def test_default_jobs_and_where_each_path_runs() -> None:
    o = plan.defaults(cpus=2)
    js = plan.validate(list(plan.BENCHMARKS), o)
    count = {b: sum(j.bench == b for j in js) for b in plan.BENCHMARKS}
    # tablescan: 2 pages x (2 paths on each tmpfs, 3 on disk) x 3 thread counts
    assert count == {"tablescan": 42, "bufman": 99, "logging": 96}
    assert all(j.target == "disk" for j in js if j.variant == "odirect")
    assert all(j.target != "disk" for j in js if j.variant.endswith("-cl"))
    # target by target: the files of one target are gone before the next one's are made
    order = [j.target for j in js]
    assert order == sorted(order, key=plan.TARGETS.index)
    assert plan.estimate_seconds(js, o) < 20 * 60


def test_quick_is_small() -> None:
    q = plan.defaults(quick=True, cpus=2)
    assert q.threads == (1, 2) and q.file_size == 16 * MiB and q.max_seconds < 0.1
    assert q.pool_size < q.file_size


def test_bad_input_is_refused() -> None:
    o = plan.defaults(cpus=2)
    with pytest.raises(PlanError, match="unknown path 'fsync' for bufman"):
        plan.check_paths("bufman", ["pread", "fsync"])
    with pytest.raises(PlanError, match="unknown target 'ssd'"):
        plan.resolve_targets(["nvm", "ssd"])
    assert plan.resolve_targets(["nvm", "disk", "nvm-4k"]) == ("nvm-4k", "nvm-2m", "disk")
    with pytest.raises(PlanError, match="cannot hold the data"):
        plan.validate(["bufman"], replace(o, pool_size=2 * GiB))
    with pytest.raises(PlanError, match="not a multiple of 4k"):
        plan.validate(["tablescan"], replace(o, page_sizes=(6000,)))
    with pytest.raises(PlanError, match="exceeds --log-size"):
        plan.validate(["logging"], replace(o, entry_sizes=(2 * GiB,)))
    with pytest.raises(PlanError, match="nothing to run"):
        plan.validate(
            ["tablescan"], replace(o, targets=("nvm-4k",), paths={"tablescan": ("odirect",)})
        )
    with pytest.raises(PlanError, match="not a size"):
        plan.parse_size("12q")
    assert plan.parse_size("16k") == 16 * KiB and plan.parse_size("2GiB") == 2 * GiB
    assert plan.fmt_size(8 * KiB) == "8k" and plan.fmt_size(128) == "128 B"


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="micro")
    storage_cli.register(sub)
    return p.parse_args(list(argv))


def test_cli_options_and_errors_before_anything_runs() -> None:
    a = _args("bufman", "--paths", "pread,pmem2-cl", "--write-ratios", "80%", "--threads", "1")
    o = storage_cli.options(a, ["bufman"])
    assert o.paths["bufman"] == ("pread", "pmem2-cl") and o.write_ratios == (80,)
    assert o.threads == (1,)
    with pytest.raises(SystemExit, match="unknown path 'bogus'"):
        storage_cli.run(_args("logging", "--paths", "bogus"))
    with pytest.raises(SystemExit, match="unknown target"):
        storage_cli.run(_args("storage", "--targets", "tape"))
    q = storage_cli.options(_args("storage", "--quick", "--no-fio"), list(plan.BENCHMARKS))
    assert q.file_size == 16 * MiB and not q.fio


# ---------------------------------------------------------------- targets


def _target(tmp: Path, name: str = "nvm-4k", fs: str = "tmpfs rw") -> targets.Target:
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    return targets.Target(name, tmp, d, fs, name == "disk", "test")


def test_space_check_says_how_much(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _target(tmp_path, "disk", "ext4 rw")
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    with pytest.raises(targets.TargetError, match=r"the files need .* GiB, only .* GiB free"):
        targets.check_space(t, free + GiB, 0)
    targets.check_space(t, 1 * MiB, 0)
    monkeypatch.setattr(targets.procfs, "meminfo", lambda: {"MemAvailable": "1048576 kB"})
    with pytest.raises(targets.TargetError, match="RAM available"):
        targets.check_space(_target(tmp_path), 512 * MiB, 512 * MiB)


def test_nvm_2m_must_be_a_huge_tmpfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets.storage, "ensure_nvm_root", lambda huge: tmp_path)
    monkeypatch.setattr(targets, "fs_of", lambda p: "tmpfs rw,size=1g")
    with pytest.raises(targets.TargetError, match="no tmpfs with huge=always"):
        targets.resolve("nvm-2m")
    monkeypatch.setattr(targets, "fs_of", lambda p: "ext4 rw")
    with pytest.raises(targets.TargetError, match="is not a tmpfs"):
        targets.resolve("nvm-4k")
    monkeypatch.setattr(targets, "fs_of", lambda p: "tmpfs rw,huge=always")
    t = targets.resolve("nvm-2m")
    assert t.dir.parent == tmp_path and t.dir.is_dir() and "2 MB" in t.note
    targets.cleanup(t)
    assert not t.dir.exists()


# ---------------------------------------------------------------- command lines


def test_command_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    o = plan.defaults(cpus=2)
    disk = _target(tmp_path, "disk", "ext4 rw")
    j = Job("bufman", "disk", "pmem2", 4, 4 * KiB, 80)
    cmd = runner.command(Path("/sb"), j, o, disk)
    assert cmd[:6] == ["/sb", "bufman", "--dir", str(disk.dir), "--path", "pmem2"]
    assert "--drop-caches" in cmd and cmd[cmd.index("--write-ratio") + 1] == "80%"
    assert cmd[cmd.index("--file-size") + 1] == str(2 * GiB)
    log = runner.command(
        Path("/sb"), Job("logging", "nvm-4k", "pmemlog-cl", 1, 128), o, _target(tmp_path)
    )
    assert log[log.index("--path") + 1] == "pmemlog" and "--drop-caches" not in log
    assert log[log.index("--file-size") + 1] == str(GiB)
    monkeypatch.setenv("PMEM2_FORCE_GRANULARITY", "CACHE_LINE")
    assert "PMEM2_FORCE_GRANULARITY" not in runner.job_env(j)
    cl = runner.job_env(Job("bufman", "nvm-4k", "pmem2-cl", 1, 4 * KiB, 80))
    assert cl["PMEM2_FORCE_GRANULARITY"] == "CACHE_LINE"
    assert (
        runner.job_env(Job("logging", "nvm-4k", "pmemlog-cl", 1, 128))["PMEM_IS_PMEM_FORCE"] == "1"
    )


def test_fio_command_and_parse(tmp_path: Path) -> None:
    files = [tmp_path / "a", tmp_path / "b"]
    cmd = fio.command("randread", files, 2 * GiB, GiB, 0.5)
    assert "--rw=randread" in cmd and "--ioengine=psync" in cmd and "--runtime=500ms" in cmd
    assert cmd[-4:] == [
        "--name=t0",
        f"--filename={files[0]}",
        "--name=t1",
        f"--filename={files[1]}",
    ]
    out = 'note: something\n{"jobs": [{"read": {"bw_bytes": 1073741824, "iops": 262144.0}}]}'
    assert fio.parse(out) == {"gib_per_s": 1.0, "ops_per_s": 262144.0}


# ---------------------------------------------------------------- documents and analysis


def _doc(bench: str, path: str, gib: list[float], threads: int = 1, **env: Any) -> dict[str, Any]:
    runs = [
        {
            "rep": i,
            "warmup": False,
            "stopped": False,
            "caches_dropped": None,
            "seconds": 0.5,
            "bytes": 1,
            "ops": 1,
            "reads": 1,
            "writes": 0,
            "gib_per_s": g,
            "ops_per_s": g * 262144,
            "user_s": 0.3,
            "sys_s": 0.1,
            "threads": [{"bytes": 1, "ops": 1, "seconds": 0.5}] * threads,
        }
        for i, g in enumerate(gib)
    ]
    srt = sorted(gib)
    return {
        "schema": "storagebench",
        "schema_version": 1,
        "benchmark": bench,
        "path": path,
        "params": {
            "threads": threads,
            "file_size": 1,
            "work_bytes": 1,
            "warmup": 0,
            "reps": len(gib),
            "max_seconds": 0.5,
            "seed": 1,
        },
        "env": {
            "fs_type": "tmpfs",
            "pmem2_granularity": None,
            "pmem_is_pmem": None,
            "files_reused": True,
            **env,
        },
        "runs": runs,
        "summary": {
            "reps": len(gib),
            "stopped_reps": 0,
            "gib_per_s": {"median": srt[len(srt) // 2], "min": srt[0], "max": srt[-1]},
            "ops_per_s": {"median": srt[len(srt) // 2] * 262144, "min": 0, "max": 0},
        },
    }


def _rec(job: Job, gib: list[float], **env: Any) -> dict[str, Any]:
    return {
        "job": job.key(),
        "label": job.label(),
        "doc": _doc(job.bench, job.v.binary_path, gib, job.threads, **env),
    }


def _records() -> list[dict[str, Any]]:
    recs = []
    for t in (1, 2):
        for v, g in (("pread", 1.0), ("mmap", 0.5), ("pmem2", 2.0), ("pmem2-cl", 4.0)):
            recs.append(
                _rec(
                    Job("bufman", "nvm-4k", v, t, 4096, 80),
                    [g * 0.9, g, g * 1.1],
                    pmem2_granularity="cache-line" if v == "pmem2-cl" else None,
                )
            )
        for v in ("pread", "mmap"):
            recs.append(_rec(Job("tablescan", "nvm-4k", v, t, 4096), [5.0, 5.0, 5.0]))
        for v, g in (("new", 0.1), ("recycled", 0.2 * t), ("pmemlog-cl", 1.0 * t)):
            recs.append(_rec(Job("logging", "nvm-4k", v, t, 128), [g, g, g]))
    bad = Job("logging", "nvm-4k", "pmem2log", 1, 128)
    recs.append({"job": bad.key(), "label": bad.label(), "doc": {"error": "boom"}})
    return recs


def test_check_doc_names_what_is_missing() -> None:
    d = _doc("bufman", "pread", [1.0, 2.0])
    assert analysis.check_doc(d) == []
    assert analysis.check_doc({**d, "schema_version": 2})[0].startswith("schema")
    broken = json.loads(json.dumps(d))
    del broken["runs"][0]["gib_per_s"]
    broken["summary"]["ops_per_s"] = {"median": 1}
    problems = analysis.check_doc(broken)
    assert "run: no 'gib_per_s'" in problems and any("ops_per_s" in p for p in problems)


def test_headlines_relative_and_fio() -> None:
    ix = analysis.Index([analysis.row_of(r) for r in _records()])
    hs = {(h.how, h.what.split(",")[0]): h for h in analysis.headlines(ix, ["nvm-4k"])}
    cl = hs[("pmem2-cl / pread", "libpmem2 vs Linux I/O")].ours
    assert cl is not None and cl.value == pytest.approx(4.0)
    assert cl.low == pytest.approx(3.6 / 1.1) and cl.high == pytest.approx(4.4 / 0.9)
    log = hs[("pmemlog-cl / recycled, peaks", "libpmemlog vs recycled Linux I/O log")].ours
    assert log is not None and log.value == pytest.approx(2.0 / 0.4)  # peaks at 2 threads
    rec = [h for h in analysis.headlines(ix, ["nvm-4k"]) if h.how == "recycled / new, peaks"]
    assert rec[0].ours is not None and rec[0].ours.value == pytest.approx(4.0)
    assert rec[1].ours is None  # no 8k entries in the data
    rel = analysis.relative(ix, "nvm-4k", "mmap")
    assert [(r.threads, round(q.value, 3)) for r, q in rel] == [(1, 0.5), (2, 0.5)]
    fio_rows = [
        {
            "target": "nvm-4k",
            "pattern": "read",
            "threads": 1,
            "gib_per_s": 4.0,
            "gib_per_s_min": 4.0,
            "gib_per_s_max": 4.0,
        }
    ]
    (check,) = analysis.fio_checks(ix, fio_rows)
    assert check.diff == pytest.approx(0.25) and check.agrees is False
    assert check.noise() == ""
    noisy = analysis.FioCheck("nvm-4k", "read", 1, {**fio_rows[0], "gib_per_s_min": 3.0}, None)
    assert noisy.noise() == "fio's repetitions spread" and noisy.diff is None


def test_report_from_raw_files(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records()))
    (tmp_path / "fio.jsonl").write_text(
        json.dumps(
            {
                "target": "nvm-4k",
                "pattern": "read",
                "threads": 1,
                "gib_per_s": 5.2,
                "gib_per_s_min": 5.0,
                "gib_per_s_max": 5.5,
            }
        )
        + "\n"
    )
    (tmp_path / "env.json").write_text(
        json.dumps({"started": "now", "options": {"file_size": GiB}})
    )
    text = report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert md.splitlines()[2].startswith("**Emulated persistent memory, not PMem.**")
    head = "| libpmem2 vs Linux I/O, bufman 80% writes, 4 KiB, 1 thread | 4.7× (PMem) | nvm-4k |"
    assert f"{head} pmem2-cl / pread | **4.00×**" in md
    assert "4.7×" in text and "21.7×" in md and "14.1×" in md
    fio_row = "| nvm-4k | sequential (table scan) | 1 | 5.200 [5.000–5.500] |"
    assert f"{fio_row} 5.000 [5.000–5.000] | -4% | yes |  |" in md
    assert "Failed runs (1)" in md and "boom" in md
    for f in ("fig2_tablescan.png", "fig3_bufman.png", "fig4_relative.png", "fig5_logging.png"):
        assert (tmp_path / f).stat().st_size > 1000, f
        assert f"]({f})" in md
    assert "<table>" in (tmp_path / "report.html").read_text()
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert rows[0].startswith("benchmark,target,path,threads") and len(rows) == 1 + len(_records())


# ---------------------------------------------------------------- smoke run


def _can_build() -> bool:
    if not shutil.which("make") or not shutil.which("gcc"):
        return False
    r = subprocess.run(
        ["make", "-s", "-C", str(runner.SOURCE), "check-deps"], capture_output=True, check=False
    )
    return r.returncode == 0


@pytest.mark.skipif(not _can_build(), reason="no C compiler or PMDK headers")
def test_smoke_run_every_benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every benchmark and path at a tiny size through Run: the documents match schema 1,
    the report and the CSV are written, the files are gone afterwards."""
    monkeypatch.setenv("PGNVM_HOME", str(tmp_path / "home"))
    root = tmp_path / "nvm"
    root.mkdir()
    made: list[targets.Target] = []

    def fake_resolve(name: str) -> targets.Target:
        t = _target(root, name, "tmpfs rw" if name.startswith("nvm") else "ext4 rw")
        t.drop_caches = False
        made.append(t)
        return t

    monkeypatch.setattr(targets, "resolve", fake_resolve)
    o = replace(
        plan.defaults(quick=True, cpus=1),
        targets=("nvm-4k",),
        threads=(1, 2),
        page_sizes=(4 * KiB,),
        write_ratios=(80,),
        entry_sizes=(128,),
        file_size=4 * MiB,
        log_size=4 * MiB,
        pool_size=1 * MiB,
        fio=bool(shutil.which("fio")),
    )
    run = runner.Run(list(plan.BENCHMARKS), o, tmp_path / "out")
    assert run.main() == 0
    recs = [json.loads(x) for x in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert len(recs) == len(run.jobs) == 2 * (2 + 4 + 6)
    for r in recs:
        assert "error" not in r["doc"], r
        assert analysis.check_doc(r["doc"]) == []
        if r["job"]["variant"] == "pmem2-cl":
            assert r["doc"]["env"]["pmem2_granularity"] == "cache-line"
        if r["job"]["variant"] == "pmemlog-cl":
            assert r["doc"]["env"]["pmem_is_pmem"] is True
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Paper vs ours" in md and "Fig. 5: logging" in md
    if o.fio:
        assert "Independent check: fio" in md
    assert not made[0].dir.exists()


def test_a_refused_target_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The space check fails before any run: no result directory, no run directory."""
    monkeypatch.setattr(runner, "build_binary", lambda: tmp_path / "sb")
    monkeypatch.setattr(targets, "resolve", lambda name: _target(tmp_path, name, "ext4 rw"))
    o = replace(plan.defaults(cpus=2), targets=("disk",), file_size=1 << 50, fio=False)
    run = runner.Run(["tablescan"], o, tmp_path / "out")
    with pytest.raises(targets.TargetError, match="GiB free"):
        run.main()
    assert not (tmp_path / "out").exists() and not (tmp_path / "disk").exists()
