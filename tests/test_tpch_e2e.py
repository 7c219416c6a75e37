"""End to end: ``./pgnvm tpch`` at scale factor 0.01 over three configurations.

Runs the real command (``python -m bench tpch``) against clusters of its own (prefix
``tpchtest``, ports 5530/5531), so it never touches the ``tpch-*`` clusters of a real run.
Uses the installed release build when there is one (``--no-build``), else builds it (as a
fresh machine's first ``./pgnvm tpch`` would). Checks the raw files and the report of a full
run, then that a deliberately wrong answer (the PGNVM_TPCH_PERTURB test hook) fails the run
naming the query and the configurations. Then the se2 prefetch configurations on two
queries: the helper threads' CPU is recorded apart from the backend's main thread, and a
mapping the CPU topology cannot honour is listed as not available. Last, ``--data-checksums
off`` on two queries: clusters of its own (``-nocsum``), a cluster whose setting does not match
is initialised again and reloaded, and the checksummed clusters are still reused afterwards.
The methods ``warm`` and ``prewarm`` on two queries (the full run is ``cold``, the default),
each with the DRAM of every run. No timing assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import cluster, configs, osuser, paths
from bench.tpch import runner, settings

PORT = 5530


def _prefix() -> str:
    """Cluster name prefix (the nvm data directories of other PGNVM_HOMEs are elsewhere on the
    shared tmpfs: ``paths.home_tag()``)."""
    return "tpchtest"


def _configs() -> list[str]:
    """nvm_base_sync, nvm_se1, mem_limit; nvm_base_worker instead of nvm_se1 on a build
    without se1 (a stock PostgreSQL build)."""
    wanted = ["nvm_base_sync", "nvm_se1", "mem_limit"]
    bindir = paths.install_dir("release") / "bin"
    if (bindir / "postgres").is_file():
        avail = _availability(bindir, wanted)
        wanted = [n if avail[n].available else "nvm_base_worker" for n in wanted]
    return wanted


def _availability(bindir: Path, names: list[str]) -> dict[str, configs.Verdict]:
    common = settings.common_settings(settings.Common())
    return configs.availability(bindir, [configs.BY_NAME[n] for n in names], common)


def _tpch(
    out: Path,
    *args: str,
    env_extra: dict[str, str] | None = None,
    config_names: list[str] | None = None,
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(paths.REPO_ROOT)
    env[runner.PREFIX_ENV] = _prefix()
    env.pop(runner.PERTURB_ENV, None)
    env.update(env_extra or {})
    build = ["--no-build"] if (paths.install_dir("release") / "bin" / "postgres").is_file() else []
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "tpch",
        "--sf",
        "0.01",
        "--configs",
        ",".join(config_names or _configs()),
        "--port",
        str(PORT),
        "--out",
        str(out),
        "--timeout",
        "120",
        *build,
        *args,
    ]
    return subprocess.run(
        cmd, cwd=paths.REPO_ROOT, env=env, capture_output=True, text=True, timeout=1500, check=False
    )


@pytest.fixture(scope="module")
def test_clusters() -> Iterator[None]:
    yield
    for name in (
        f"{_prefix()}-sf0.01-{storage}{suffix}"
        for storage in ("nvm", "disk")
        for suffix in ("", "-nocsum")
    ):
        if cluster.Cluster.exists(name):
            cluster.Cluster.load(name).destroy()


def test_tpch_end_to_end(tmp_path: Path, test_clusters: None) -> None:
    cfgs = _configs()
    out = tmp_path / "full"
    r = _tpch(out, "--queries", "1-22", "--repeat", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in (
        "runs.jsonl",
        "runs.csv",
        "env.json",
        "plan.json",
        "summary.json",
        "report.md",
        "report.html",
        "wallclock_normalized.png",
        "kernel_share.png",
        "totals.png",
        "page_faults.png",
        "cpu_breakdown.png",
        "mismatches.json",
    ):
        assert (out / name).is_file(), name
    said = r.stdout + r.stderr
    assert "66 runs (3 configurations x 22 queries x 1; method cold), estimated " in said
    assert "wall time " in said and "(66 of 66 runs, set-up included)" in said
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 22 * 3
    assert {r["status"] for r in runs} == {"ok"}
    # other work on the machine, net of the run's own processes, around every query
    assert all(set(r["other_work"]) >= {"window_s", "other_cpu_s"} for r in runs)
    assert {r["config"] for r in runs} == set(cfgs)
    for rec in runs:
        assert rec["wall_s"] > 0
        assert rec["backend"]["minflt"] >= 0
        assert "perf" in rec and "counters" in rec["perf"]
        assert any(x["backend_type"] == "client backend" for x in rec["pg_stat_io"])
        assert rec["dram"]["shared_mb"] > 0 and rec["dram"]["backend_mb"] > 0, rec["dram"]
        assert rec["restarted"] and "warmup" not in rec
    # every configuration gives the same answer to every query
    digests: dict[int, set[str]] = {}
    for rec in runs:
        digests.setdefault(rec["query"], set()).add(rec["answer"])
    assert all(len(d) == 1 for d in digests.values()), digests
    # mem_limit was prewarmed, the nvm configurations were not
    assert all(r.get("prewarm_blocks", 0) > 0 for r in runs if r["config"] == "mem_limit")
    csv_lines = (out / "runs.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 22 * 3
    env = json.loads((out / "env.json").read_text())
    assert "PostgreSQL 18" in env["server_version"]
    assert env["git_commit"]
    md = (out / "report.md").read_text()
    assert "Correctness: OK" in md and "**Method: cold** (`--method cold`)" in md
    assert "| shared [MB] | backend [MB] | DRAM [MB] |" in md
    assert cfgs[0] in md and "Q22" in md
    assert json.loads((out / "mismatches.json").read_text()) == []
    assert "TPC-H SF 0.01" in r.stdout  # the console summary table
    # pgnvm's counters around every query of every configuration whose database has the
    # extension (this build's: every one); base counts nothing, se1 copies from its mappings
    assert "(schema pgnvm)" in env["pgnvm_extension"]["nvm"], env["pgnvm_extension"]
    for rec in runs:
        assert set(rec["pgnvm_stats"]) >= set(runner.NVM_KEYS), rec
        if configs.BY_NAME[rec["config"]].engine == "base":
            assert rec["pgnvm_stats"]["mapped_reads"] == rec["pgnvm_stats"]["redirects"] == 0
    if "nvm_se1" in cfgs:
        assert sum(r["pgnvm_stats"]["mapped_reads"] for r in runs if r["config"] == "nvm_se1")
    assert "nvm_redirects" in csv_lines[0].split(",") and "## pgnvm counters" in md
    assert json.loads((out / "plan.json").read_text())["pgnvm_counters_scope"].startswith(
        "whole server"
    )

    # a second run reuses the loaded database and catches a wrong answer
    out2 = tmp_path / "wrong"
    r2 = _tpch(
        out2, "--queries", "6,14", "--repeat", "1", env_extra={runner.PERTURB_ENV: f"{cfgs[1]}:6"}
    )
    assert r2.returncode == 1, r2.stdout + r2.stderr
    text = r2.stdout + r2.stderr
    assert "WRONG ANSWER" in text and "Q06" in text and cfgs[1] in text
    assert cfgs[0] in text  # the configuration it was compared with
    env2 = json.loads((out2 / "env.json").read_text())
    assert env2["load"] == {"nvm": "reused"}
    mism = json.loads((out2 / "mismatches.json").read_text())
    assert [(m["query"], m["config"], m["reference"]) for m in mism] == [(6, cfgs[1], cfgs[0])]
    assert "CORRECTNESS FAILED" in (out2 / "report.md").read_text()
    assert (out2 / "answers" / f"q06.{cfgs[1]}.rep1.WRONG.json").is_file()


PREFETCH_CONFIGS = ["nvm_se2", "nvm_se2_inline", "nvm_se2_m1", "nvm_se2_m2", "nvm_se2_m3"]


def test_tpch_prefetch_helpers(tmp_path: Path, test_clusters: None) -> None:
    bindir = paths.install_dir("release") / "bin"
    if not (bindir / "postgres").is_file():
        pytest.skip("no release build installed")
    avail = _availability(bindir, PREFETCH_CONFIGS)
    if not avail["nvm_se2_m1"].runs:
        pytest.skip(f"nvm_se2_m1 not available: {avail['nvm_se2_m1'].why}")
    out = tmp_path / "prefetch"
    r = _tpch(out, "--queries", "1,6", "--repeat", "1", config_names=PREFETCH_CONFIGS)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    ran = [n for n in PREFETCH_CONFIGS if avail[n].runs]
    assert {x["config"] for x in runs} == set(ran)
    assert {x["status"] for x in runs} == {"ok"}
    assert len({(x["query"], x["answer"]) for x in runs}) == 2  # same answers everywhere
    plan = json.loads((out / "plan.json").read_text())
    md = (out / "report.md").read_text()
    summary = json.loads((out / "summary.json").read_text())
    for n in PREFETCH_CONFIGS:
        v = avail[n]
        if v.available is False:  # e.g. m2/m3 without SMT: listed with the reason, not run
            assert plan["unavailable"][n] == v.why
            assert f"{n} — not available: {v.why}" in md
            assert summary["not_available"][n] == v.why
            assert f"{n}: not available" in r.stdout
        elif v.available is None:  # e.g. nvmpf-topology not installed: run, and said so
            assert plan["availability_unknown"][n] == v.why
            assert f"{n} — unknown: {v.why}" in md
            assert summary["availability_unknown"][n] == v.why
            assert f"{n}: availability unknown: {v.why}" in r.stdout
    for x in runs:
        assert x["backend"]["utime_s"] + x["backend"]["stime_s"] >= 0
        h = x["helpers"]
        if x["config"] in ("nvm_se2", "nvm_se2_inline"):
            assert h["threads"] == 0 and "prefetch" not in x
            if x["config"] == "nvm_se2_inline":
                assert x["pgnvm_stats"]["prefetch_jobs"] > 0  # the backend prefetched itself
            continue
        # helper configurations: the pool exists, its threads are not the backend's
        assert h["threads"] >= 1, x
        assert x["backend_pid"] not in h["tids"]
        assert h["utime_s"] >= 0 and h["stime_s"] >= 0
        pf = x["prefetch"]
        assert pf["mode"] == "helper" and pf["helpers"] == h["threads"]
        assert sorted(pf["helper_tids"]) == sorted(h["tids"])
        assert pf["jobs_enqueued"] > 0
        mapping = x["config"].rsplit("_", 1)[1]
        if avail[x["config"]].available:  # the library said it places it as named
            assert pf["scheme"].lower() == mapping  # no fallback
        else:  # unknown beforehand: whatever the library did, it is recorded
            assert pf["scheme"] and (pf["scheme"].lower() == mapping or pf["fallback"])
        assert x["pgnvm_stats"]["prefetch_jobs"] > 0
    assert "## Prefetch helper threads" in md


def _base_and_se2() -> list[str]:
    """nvm_base_worker and nvm_se2 (nvm_base_sync for one the build does not have); skips
    without an installed release build."""
    bindir = paths.install_dir("release") / "bin"
    if not (bindir / "postgres").is_file():
        pytest.skip("no release build installed")
    names = ["nvm_base_worker", "nvm_se2"]
    avail = _availability(bindir, names)
    return [n if avail[n].available else "nvm_base_sync" for n in names]


def test_tpch_data_checksums_off(tmp_path: Path, test_clusters: None) -> None:
    names = _base_and_se2()
    nocsum = f"{_prefix()}-sf0.01-nvm-nocsum"
    csum = f"{_prefix()}-sf0.01-nvm"
    had_csum = cluster.Cluster.exists(csum)

    out = tmp_path / "off"
    r = _tpch(
        out, "--queries", "1,6", "--repeat", "1", "--data-checksums", "off", config_names=names
    )
    assert r.returncode == 0, r.stdout + r.stderr
    env = json.loads((out / "env.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    assert env["clusters"] == {"nvm": nocsum}
    assert env["data_checksums"] == {"nvm": "off"} and plan["data_checksums"] == "off"
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert {x["status"] for x in runs} == {"ok"} and len(runs) == 2 * len(set(names))
    md = (out / "report.md").read_text()
    assert md.startswith("# TPC-H SF 0.01 on pgnvm, data checksums off")
    assert "data checksums **off** (initdb --no-data-checksums" in md
    assert "data checksums off" in r.stdout  # the console summary's title

    # a cluster under the -nocsum name that has checksums after all: initialised again
    c = cluster.Cluster.load(nocsum)
    assert not c.is_running()
    en = osuser.run_pg(
        [str(c.bin("pg_checksums")), "--enable", "--no-sync", "-D", str(c.datadir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert en.returncode == 0, en.stdout + en.stderr
    out2 = tmp_path / "off-again"
    r2 = _tpch(
        out2, "--queries", "6", "--repeat", "1", "--data-checksums", "off", config_names=names[:1]
    )
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert "has data_checksums = on" in r2.stdout + r2.stderr
    env2 = json.loads((out2 / "env.json").read_text())
    assert env2["data_checksums"] == {"nvm": "off"}
    assert env2["load"]["nvm"].startswith("loaded: ")

    # the checksummed cluster of the other tests is still there and reused
    if had_csum:
        out3 = tmp_path / "on"
        r3 = _tpch(out3, "--queries", "6", "--repeat", "1", config_names=names[:1])
        assert r3.returncode == 0, r3.stdout + r3.stderr
        env3 = json.loads((out3 / "env.json").read_text())
        assert env3["clusters"] == {"nvm": csum}
        assert env3["data_checksums"] == {"nvm": "on"} and env3["load"] == {"nvm": "reused"}
        assert json.loads((out3 / "plan.json").read_text())["data_checksums"] == "on"


def test_tpch_methods(tmp_path: Path, test_clusters: None) -> None:
    """--method warm (one start per configuration, a discarded warm-up run per query) and
    prewarm (every configuration prewarmed after each restart), with the DRAM columns."""
    names = _base_and_se2()
    ran = list(dict.fromkeys(names))
    for method, repeat in (("warm", 2), ("prewarm", 1)):
        out = tmp_path / method
        r = _tpch(
            out,
            "--queries",
            "1,6",
            "--repeat",
            str(repeat),
            "--method",
            method,
            config_names=names,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
        assert {x["status"] for x in runs} == {"ok"}
        assert len({(x["query"], x["answer"]) for x in runs}) == 2  # same answers everywhere
        warmups = [x for x in runs if x.get("warmup")]
        if method == "warm":
            assert len(runs) == len(ran) * 2 * (repeat + 1)
            assert [(x["config"], x["query"]) for x in warmups] == [
                (c, q) for c in ran for q in (1, 6)
            ]
            assert sum(x["restarted"] for x in runs) == len(ran)  # one start each
        else:
            assert not warmups and len(runs) == len(ran) * 2 * repeat
            assert all(x["restarted"] and x["prewarm_blocks"] > 0 for x in runs)
        for x in runs:
            d = x["dram"]
            assert d["samples"] >= 2 and d["shared_mb"] > 0 and d["backend_mb"] > 0, d
            assert d["total_mb"] >= d["shared_mb"]
        plan = json.loads((out / "plan.json").read_text())
        assert plan["method"] == method and all(plan["pool_covers_db"].values())
        md = (out / "report.md").read_text()
        assert f"**Method: {method}** (`--method {method}`)" in md
        assert "| shared [MB] | backend [MB] | DRAM [MB] |" in md
        assert "## Peak DRAM per query" in md
        summary = json.loads((out / "summary.json").read_text())
        assert summary["method"]["name"] == method
        assert summary["method"]["warmup_runs_discarded"] == len(warmups)
        for c in ran:
            assert summary["configs"][c]["dram_peak_mb"]["total"] > 0
        assert f"method {method}" in r.stdout  # the console summary's title
