"""End to end: ``./pgnvm oltp`` on a small database over three configurations.

Runs the real command (``python -m bench oltp``) against clusters of its own (prefix
``oltptest``, ports 5540/5541), so it never touches the ``oltp-*`` clusters of a real run.
Uses the installed release build when there is one (``--no-build``), else builds it.
YCSB-A and TPC-B at 1 and 2 clients plus one point of the memory-ratio experiment, on
``disk_base``, ``nvm_base_walpmem_cl`` (WAL through libpmem2, cache-line granularity forced
through the configuration's server environment) and ``nvm_se2`` (copy-on-write of redirected
pages). Checks the raw files and the report, then that nothing was lost or
damaged by any engine's write path: every YCSB row is still there, TPC-B's balances agree
(accounts = tellers = branches = history), and amcheck finds the heap and the indexes
sound. The placement: at 1 client pgbench's backends (as the run's sampler saw them) and a
backend forked after the pin may run on one vCPU only, pgbench ran under taskset on it, and
the pin is gone after the point; at 2 clients nothing is pinned. With perf installed it
runs with ``--profile``: every point has its top functions, wait-event samples and perf
data, and profile.md lists them. A second run into the same --out is refused. No timing
assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import cluster, configs, paths, perf
from bench.core.server import Server
from bench.oltp import placement, settings, targets, window

PORT = 5540
PREFIX = "oltptest"
RECORDS = 5000
WANTED = ["disk_base", "nvm_base_walpmem_cl", "nvm_se2"]


def _configs() -> list[str]:
    """WANTED, with nvm_base_worker in place of what the installed build cannot run (e.g. a
    stock PostgreSQL build: no se2, no pmem WAL)."""
    bindir = paths.install_dir("release") / "bin"
    if not (bindir / "postgres").is_file():
        return WANTED
    common = settings.common_settings(settings.DEFAULT_SHARED_BUFFERS)
    avail = configs.availability(bindir, [configs.BY_NAME[n] for n in WANTED], common)
    names = [n if avail[n].available is not False else "nvm_base_worker" for n in WANTED]
    return list(dict.fromkeys(names))


def _oltp(
    out: Path,
    names: list[str],
    workloads: str = "a,tpcb",
    clients: str = "1,2",
    ratios: str = "1/2",
    profile: bool = True,
    warmup: tuple[str, str] = ("1", "6"),
    extra: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(paths.REPO_ROOT)
    env["PGNVM_OLTP_CLUSTER_PREFIX"] = PREFIX
    build = ["--no-build"] if (paths.install_dir("release") / "bin" / "postgres").is_file() else []
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "oltp",
        "--records",
        str(RECORDS),
        "--workloads",
        workloads,
        "--clients",
        clients,
        "--duration",
        "2",
        "--warmup",
        warmup[0],
        "--warmup-max",
        warmup[1],
        "--memory-ratios",
        ratios,
        "--configs",
        ",".join(names),
        "--port",
        str(PORT),
        "--out",
        str(out),
        *build,
        *(["--profile"] if profile and perf.available() is None else []),
        *extra,
    ]
    return subprocess.run(
        cmd, cwd=paths.REPO_ROOT, env=env, capture_output=True, text=True, timeout=1500, check=False
    )


@pytest.fixture(scope="module")
def test_clusters() -> Iterator[None]:
    yield
    for storage in ("nvm", "disk"):
        name = targets.cluster_name(PREFIX, RECORDS, storage)
        if cluster.Cluster.exists(name):
            cluster.Cluster.load(name).destroy()


def _one(conn, sql: str):  # type: ignore[no-untyped-def]
    row = conn.execute(sql).fetchone()
    assert row is not None, sql
    return row[0]


def _check_nothing_lost(name: str, tpcb: bool = True) -> None:
    """The cluster after the run: all rows there, TPC-B's money neither made nor lost
    (``tpcb``), amcheck content with heap and indexes."""
    srv = Server(cluster.Cluster.load(name), dbname=targets.DBNAME)
    srv.start()
    tables = ["usertable"]
    if tpcb:
        tables += ["pgbench_accounts", "pgbench_tellers", "pgbench_branches"]
    try:
        with srv.connect() as conn:
            assert _one(conn, "select count(*) from usertable") == RECORDS, name
            balances = (
                []
                if not tpcb
                else [
                    _one(conn, f"select coalesce(sum({col}), 0) from {table}")
                    for table, col in (
                        ("pgbench_accounts", "abalance"),
                        ("pgbench_tellers", "tbalance"),
                        ("pgbench_branches", "bbalance"),
                        ("pgbench_history", "delta"),
                    )
                ]
            )
            if tpcb:
                assert len(set(balances)) == 1, (name, balances)
                assert _one(conn, "select count(*) from pgbench_history") > 0, name
            conn.execute("create extension if not exists amcheck")
            for table in tables:
                bad = conn.execute(
                    f"select * from verify_heapam('{table}', check_toast => true)"
                ).fetchall()
                assert bad == [], (name, table, bad)
            for (index,) in conn.execute(
                "select c.oid::regclass::text from pg_index i join pg_class c"
                " on c.oid = i.indexrelid join pg_am a on a.oid = c.relam"
                " where a.amname = 'btree' and c.relnamespace = 'public'::regnamespace"
            ).fetchall():
                if tpcb or not index.startswith("pgbench_"):
                    conn.execute(f"select bt_index_parent_check('{index}', true)")
    finally:
        srv.stop()


def _check_placement(x: dict) -> None:  # type: ignore[type-arg]
    """A point's placement (--placement same, the default): at 1 client the postmaster's
    new backends (the one asked after the pin, and every client backend the measured run's
    sampler saw: pgbench's) may run on one CPU only, pgbench ran under taskset on it, and
    after the point a new backend may run anywhere again; at 2 clients nothing is pinned."""
    allowed = placement.allowed_cpus()
    every = placement.cpu_list(allowed)
    if x["clients"] > 1 or len(allowed) < 2:
        assert x["placement"] == "free", x["key"]
        assert x["placement_fallback"] is (x["clients"] == 1), x["key"]
        assert x["backend_cpus"] == every and x["run_backend_cpus"] == [every], x["key"]
        assert not x["command"].startswith("taskset"), x["key"]
        return
    cpu = str(min(allowed))
    assert x["placement"] == f"same:{cpu}" and x["placement_why"] is None, x["key"]
    assert x["backend_cpus"] == cpu and x["run_backend_cpus"] == [cpu], x["key"]
    assert x["command"].startswith(f"taskset -c {cpu} "), x["key"]
    assert x["backend_cpus_after"] == every and "unpin_error" not in x, x["key"]


def test_oltp_end_to_end(tmp_path: Path, test_clusters: None) -> None:
    names = _configs()
    out = tmp_path / "run"
    r = _oltp(out, names)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("runs.jsonl", "env.json", "plan.json", "summary.json", "report.md", "report.html"):
        assert (out / f).is_file(), f
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    # per configuration: a and tpcb at 1 and 2 clients, and the 1/2 memory point
    assert len(runs) == len(names) * 5
    assert {x["config"] for x in runs} == set(names)
    assert {x["status"] for x in runs} == {"ok"}
    for x in runs:
        assert x["durable"] is True, x["key"]
        assert x["durability"] == {
            "fsync": "on",
            "full_page_writes": "on",
            "synchronous_commit": "on",
        }
        assert x["pgbench_exit"] == 0 and x["failed"] == 0, x["key"]
        assert x["tps"] > 0 and x["transactions"] > 0, x["key"]
        # the warm-up: 1 s, then 5 s slices until one settles, at most 6 s in all
        warm = x["warmup"]
        secs = [s["seconds"] for s in warm["slices"]]
        assert secs[0] == 1 and sum(secs) == warm["seconds"] <= 6, (x["key"], warm)
        assert warm["settled"] == (warm["last_fpi_per_txn"] <= 0.05), (x["key"], warm)
        assert all(s["fpi_per_txn"] > 0.05 for s in warm["slices"][:-1]), (x["key"], warm)
        assert all(s["flushed"] for s in warm["slices"]) and x["stats_flushed"], x["key"]
        win = x["window"]
        assert win["transactions"] == x["transactions"] and win["wal_records"] > 0, x["key"]
        assert win["wal_bytes_per_txn"] > 0 and win["wal_fpi"] >= 0, x["key"]
        assert set(win["checkpoints"]) == {"started", "done"}, x["key"]
        assert x["window_flags"] == window.flags(win, warm), x["key"]
        assert x["latency"]["n"] > 0 and x["latency"]["p99_ms"] >= x["latency"]["p50_ms"]
        assert (out / "per_second" / f"{x['key']}-rep{x['rep']}.csv").is_file(), x["key"]
        _check_placement(x)
        if configs.BY_NAME[x["config"]].writes_wal_pmem:  # the environment reached the server
            assert x["wal_pmem"] == {"granularity": "cache-line", "forced": True}, x["key"]
        else:
            assert "wal_pmem" not in x
    if perf.available() is None:  # --profile: every point has one repetition, profiled
        for x in runs:
            prof = x["profile"]
            assert isinstance(prof["functions"], list) and prof["functions"], x["key"]
            assert all("comm" in f for f in prof["functions"]), x["key"]  # by command
            assert prof["wait_samples"] > 0 and prof["wait_error"] is None, x["key"]
            assert (out / "perf" / prof["perf_data"]).is_file(), x["key"]
        assert all(f"## {x['key']} (" in (out / "profile.md").read_text() for x in runs)
    mem = [x for x in runs if "-mem" in x["key"]]
    assert {x["config"] for x in mem} == set(names) and {x["clients"] for x in mem} == {2}
    summary = json.loads((out / "summary.json").read_text())
    assert {x["key"] for x in runs} <= set(summary)
    md = (out / "report.md").read_text()
    assert md.startswith(f"# OLTP: YCSB / TPC-B through pgbench, {RECORDS:,} records")
    assert "**Emulated persistent memory, not PMem.**" in md
    assert "## Anti-caching" in md
    assert "FPI/txn" in md and "warm-up s" in md
    assert "Placement (`--placement same`): at **1 client**" in md
    assert all(n in md for n in names)
    if "nvm_base_walpmem_cl" in names:
        assert "`nvm_base_walpmem_cl` cache-line (forced)" in md

    for storage in ("disk", "nvm"):
        _check_nothing_lost(targets.cluster_name(PREFIX, RECORDS, storage))

    # the same --out again: refused before anything runs, the first run's files untouched
    before = (out / "runs.jsonl").read_text()
    r2 = _oltp(out, names[:1])
    assert r2.returncode == 2, r2.stdout + r2.stderr
    assert "already holds the results of a run" in r2.stderr
    assert (out / "runs.jsonl").read_text() == before


HYBRID = ["nvm_base_worker", "nvm_se2_hybrid"]


def test_oltp_hybrid_memory_experiment(tmp_path: Path, test_clusters: None) -> None:
    """se2's hybrid pool in the memory experiment alone (issue 22's OLTP target, in
    miniature): shared_buffers = ratio x data as for stock, the descriptors of the rule
    for the database at set-up, both as the server shows them; the shared memory and the
    coverage recorded; the report's ratios against stock at the largest ratio; nothing lost."""
    bindir = paths.install_dir("release") / "bin"
    if (bindir / "postgres").is_file():
        common = settings.common_settings(settings.DEFAULT_SHARED_BUFFERS)
        v = configs.verdict(configs.BY_NAME["nvm_se2_hybrid"], bindir, common)
        if v.available is False:
            pytest.skip(f"nvm_se2_hybrid not available: {v.why}")
    out = tmp_path / "hybrid"
    r = _oltp(out, HYBRID, workloads="", clients="2", ratios="1/2,1/128", profile=False)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    env = json.loads((out / "env.json").read_text())
    plan_doc = json.loads((out / "plan.json").read_text())
    assert [(x["config"], x["ratio"]) for x in runs] == [
        (c, ratio) for ratio in ("1/2", "1/128") for c in HYBRID
    ]
    assert {x["status"] for x in runs} == {"ok"}
    db = env["db_bytes"]["nvm"]
    assert db > env["data_bytes"]["nvm"] > 0  # the whole database, not usertable alone
    by = {(x["config"], x["ratio"]): x for x in runs}
    for ratio in ("1/2", "1/128"):
        base, hy = by[("nvm_base_worker", ratio)], by[("nvm_se2_hybrid", ratio)]
        sb = plan_doc["memory_ratios"][ratio]
        assert base["shared_buffers"] == hy["shared_buffers"] == sb  # the same DRAM pages
        want = settings.hybrid_descriptors(db, sb)
        assert hy["nvm_buffer_descriptors"] == want and base["nvm_buffer_descriptors"] is None
        # as the server has them
        assert configs.size_bytes(hy["pool"]["shared_buffers"]) == configs.size_bytes(sb)
        assert configs.size_bytes(hy["pool"]["nvm_buffer_descriptors"]) == configs.size_bytes(want)
        assert configs.size_bytes(base["pool"]["shared_buffers"]) == configs.size_bytes(sb)
        assert base["pool"]["nvm_buffer_descriptors"] in ("0", None)
        assert hy["pool_covers_db"] is True and hy["db_bytes_end"] >= db // 2
        # the descriptors cost shared memory beyond the same slots
        assert hy["shmem_bytes"] > base["shmem_bytes"] > 0
    assert by[("nvm_base_worker", "1/128")]["pool_covers_db"] is False
    assert plan_doc["hybrid_pool"]["nvm_se2_hybrid"]["db_bytes_at_setup"] == db
    md = (out / "report.md").read_text()
    assert "× `nvm_base_worker` at the largest ratio (1/2)" in md
    assert "## Buffer pools and shared memory" in md
    assert "se2's hybrid pool: shared_buffers is its DRAM" in md
    _check_nothing_lost(targets.cluster_name(PREFIX, RECORDS, "nvm"), tpcb=False)


def _runs(out: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]


def test_oltp_tpcb_pretouch(tmp_path: Path, test_clusters: None) -> None:
    """TPC-B's pre-touch (bench.oltp.pretouch), from counters only: with no warm-up at all
    (--warmup 0 --warmup-max 0) the measured window follows the pre-touch directly, and
    writes fewer full-page images per transaction than the warm-up's settle threshold (the
    window of a point without it starts with every first touch of pgbench_accounts still
    to come). The pre-touch changed one row on every page of the three tables that holds
    one and wrote at least one FPI for each; no checkpoint came between it and the window.
    Two repetitions: the second's VACUUM runs on what the first left. With
    --no-pretouch neither the VACUUM nor the UPDATEs run, and the record and the report
    say so."""
    name = _configs()[-1]  # nvm_se2 (nvm_base_worker where the build has no se2)
    out = tmp_path / "pretouch"
    r = _oltp(out, [name], "tpcb", "1", "none", False, ("0", "0"), ("--repeat", "2"))
    assert r.returncode == 0, r.stdout + r.stderr
    runs = _runs(out)
    assert [x["rep"] for x in runs] == [1, 2] and {x["status"] for x in runs} == {"ok"}
    tables = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"]
    for x in runs:
        touch, win = x["pretouch"], x["window"]
        assert touch["done"] is True and list(touch["tables"]) == tables, touch
        assert touch["vacuum_s"] >= 0 and touch["seconds"] >= 0, touch
        for t, each in touch["tables"].items():
            # one row per page that holds a live row: pgbench_accounts' pages hold ~60 rows
            # each and none is emptied by a few thousand updates (2% allowed); a branch or
            # teller row updated by 2 clients at once may leave its first page empty for
            # another, so of those only that some row was changed
            assert 1 <= each["rows"] <= each["pages"], (t, each)
            assert t != tables[0] or each["rows"] >= 0.98 * each["pages"], (t, each)
        assert touch["wal_fpi"] >= touch["rows"] > 0, touch
        assert x["warmup"]["slices"] == [], x["warmup"]  # nothing between it and the window
        assert x["checkpoints_before_window"] == 0 and win["checkpoints"]["started"] == 0, x
        assert win["transactions"] > 0
        fpi = win["wal_fpi"] / win["transactions"]
        assert fpi < window.DEFAULT_FPI_SETTLED, (x["key"], x["rep"], win, touch)
    md = (out / "report.md").read_text()
    assert "TPC-B: **pre-touch** — `VACUUM` of pgbench_accounts" in md
    assert " FPI |" in md  # the window table's pre-touch column
    # max_wal_size sized from the pre-touched pages at set-up (a few hundred here: 4GB),
    # written for every TPC-B point and shown by its server
    sized = json.loads((out / "plan.json").read_text())["tpcb_wal"]["nvm"]
    assert sized["pretouch_pages"] > 0 and sized["max_wal_size"] == "4GB", sized
    assert sized["wal_dir"].endswith("/pg_wal") and sized["wal_dir_free_bytes"] > 4 << 30
    for x in runs:
        assert x["max_wal_size"] == x["max_wal_size_shown"] == "4GB", x
    assert "so TPC-B's points run with `max_wal_size` = max(4GB, 3 × the pre-touched" in md

    off = tmp_path / "no-pretouch"
    r = _oltp(off, [name], "tpcb", "1", "none", False, ("0", "0"), ("--no-pretouch",))
    assert r.returncode == 0, r.stdout + r.stderr
    (x,) = _runs(off)
    assert x["pretouch"] == {"done": False, "why": "--no-pretouch"}, x["pretouch"]
    assert x["status"] == "ok" and x["checkpoints_before_window"] == 0
    assert json.loads((off / "plan.json").read_text())["pretouch"] is False
    md = (off / "report.md").read_text()
    assert "TPC-B: **no pre-touch** (`--no-pretouch`)" in md and "| off |" in md


def test_oltp_ycsb_pretouch(tmp_path: Path, test_clusters: None) -> None:
    """YCSB-A's pre-touch (bench.oltp.pretouch, usertable), from counters only, as TPC-B's
    above: with no warm-up at all the measured window follows the pre-touch directly and
    writes fewer full-page images per transaction than the run's settle threshold, here
    --fpi-settled 0.005 (a tenth of the default): without the pre-touch the window takes
    the first touch of every usertable page its zipfian keys hit, a few hundred of the
    ~830 pages in a 2 s window of some 10,000-40,000 transactions (≥ ~0.01 FPI/txn). The
    pre-touch changed one row on every usertable page that holds one (VACUUMed first) and
    wrote at least one FPI for each; no checkpoint came between it and the window; the
    point's max_wal_size is the one sized for YCSB at set-up. Two repetitions: the second's
    VACUUM runs on what the first left. With --no-pretouch the record says so and its
    window writes more FPIs per transaction than the pre-touched ones."""
    name = _configs()[-1]  # nvm_se2 (nvm_base_worker where the build has no se2)
    settled = "0.005"
    out = tmp_path / "ycsb-pretouch"
    common = ("--repeat", "2", "--fpi-settled", settled)
    r = _oltp(out, [name], "a", "1", "none", False, ("0", "0"), common)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = _runs(out)
    assert [x["rep"] for x in runs] == [1, 2] and {x["status"] for x in runs} == {"ok"}
    on = []
    for x in runs:
        touch, win = x["pretouch"], x["window"]
        assert touch["done"] is True and list(touch["tables"]) == ["usertable"], touch
        assert touch["vacuum_s"] >= 0 and touch["seconds"] >= 0, touch
        each = touch["tables"]["usertable"]
        # usertable's pages hold 6 rows each and a few thousand mostly HOT updates empty
        # none of them (2% allowed)
        assert 0.98 * each["pages"] <= each["rows"] <= each["pages"], each
        assert touch["wal_fpi"] >= touch["rows"] > 0, touch
        assert x["warmup"]["slices"] == [] and x["warmup"]["threshold"] == float(settled)
        assert x["checkpoints_before_window"] == 0 and win["checkpoints"]["started"] == 0, x
        assert win["transactions"] > 0
        fpi = win["wal_fpi"] / win["transactions"]
        assert fpi < float(settled), (x["key"], x["rep"], win, touch)
        on.append(fpi)
    plan_doc = json.loads((out / "plan.json").read_text())
    assert plan_doc["pretouch_tables"]["a"] == ["usertable"]
    sized = plan_doc["ycsb_wal"]["nvm"]
    # usertable's pages counted at set-up: a few hundred at 5,000 records (4GB)
    assert sized["pretouch_pages"] > 0 and sized["fpi_bytes"] == sized["pretouch_pages"] * 8192
    for x in runs:
        assert x["max_wal_size"] == x["max_wal_size_shown"] == sized["max_wal_size"] == "4GB"
    md = (out / "report.md").read_text()
    assert "YCSB-A: **pre-touch** — `VACUUM` of usertable" in md
    assert "so YCSB-A's points run with `max_wal_size`" in md
    assert " FPI |" in md  # the window table's pre-touch column

    off = tmp_path / "ycsb-no-pretouch"
    r = _oltp(off, [name], "a", "1", "none", False, ("0", "0"), ("--no-pretouch", *common[2:]))
    assert r.returncode == 0, r.stdout + r.stderr
    (x,) = _runs(off)
    assert x["pretouch"] == {"done": False, "why": "--no-pretouch"}, x["pretouch"]
    assert x["status"] == "ok" and x["checkpoints_before_window"] == 0
    win = x["window"]
    assert win["wal_fpi"] / win["transactions"] > max(on), (win, on)
    md = (off / "report.md").read_text()
    assert "YCSB-A: **no pre-touch** (`--no-pretouch`)" in md and "| off |" in md
