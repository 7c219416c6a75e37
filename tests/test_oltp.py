"""Unit tests of bench/oltp (no server): options and plan, bad input refused before anything
runs, pgbench scripts and command, log parsing, the report from synthetic records."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.core import blocks, configs, selection
from bench.oltp import cli as oltp_cli
from bench.oltp import pgbench, plan, report, settings, targets, workloads

# --------------------------------------------------------------------------- options, plan


def _opts(*argv: str) -> plan.Options:
    args = cli.build_parser().parse_args(["oltp", *argv])
    return oltp_cli.options(args)


def test_defaults_plan() -> None:
    o = _opts()
    assert o.records == settings.DEFAULT_RECORDS
    assert o.clients == [1, 8]
    assert o.workloads == ["a"]
    assert o.memory_ratios == ["1/2", "1/128"]
    names = o.config_names
    assert names == [
        "disk_base",
        "nvm_base_worker",
        "nvm_base_walpmem_cl",
        "nvm_se1",
        "nvm_se2",
    ]
    pts = plan.points(o, names)
    # 5 configs x 2 client counts + 5 configs x 2 ratios
    assert len(pts) == 20
    assert [p.config for p in pts[:4]] == names[:4]  # configurations interleave
    mem = [p for p in pts if p.ratio]
    assert {p.clients for p in mem} == {8} and {p.workload for p in mem} == {"a"}
    # the default run fits the 30 minutes, the one-off load (~1.5 min) included
    assert len(pts) * plan.point_seconds(o) < 28 * 60
    # data >= 8x shared_buffers by default
    assert plan.size_warning(o) is None


def test_full_matrix_and_repeat() -> None:
    o = _opts(
        "--workloads",
        "all",
        "--clients",
        "8,1,2,4,2",
        "--repeat",
        "2",
        "--memory-ratios",
        "1/8,1/2,0.5,1/128",
        "--configs",
        "nvm_se2,disk_base",
    )
    assert o.clients == [1, 2, 4, 8]
    assert o.workloads == ["a", "b", "c", "f", "tpcb"]
    assert o.memory_ratios == ["1/2", "1/8", "1/128"]  # 0.5 == 1/2, largest first
    plan.check(o)
    assert o.config_names == ["nvm_se2", "disk_base"]  # the order given, as every job
    pts = plan.points(o, ["nvm_se2", "disk_base"])
    assert len(pts) == 2 * (5 * 4 + 3) * 2
    assert len({p.key for p in pts}) == len(pts) // 2
    assert plan.parse_ratios("none") == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--clients", "0"], "--clients"),
        (["--clients", "1,x"], "--clients"),
        (["--clients", "200"], "between 1 and 90"),
        (["--memory-ratios", "2"], "not in (0, 1]"),
        (["--memory-ratios", "1/0"], "not a ratio"),
        (["--memory-ratios", "abc"], "not a ratio"),
        (["--workloads", "a,z"], "unknown z"),
        (["--configs", "nosuch"], "unknown configuration"),
        (["--configs", "mem_limit"], "memory-ratio experiment"),
        (["--records", "10"], "--records"),
        (["--duration", "0"], "--duration"),
        (["--repeat", "0"], "--repeat"),
        (["--shared-buffers", "lots"], "bad size"),
        (["--workloads", "", "--memory-ratios", "none"], "nothing to run"),
        # a whole-database shared_buffers: in no mode (the hybrid pool's descriptors are fine)
        (["--configs", "nvm_se2_wholedb", "--memory-ratios", "none"], "memory-ratio experiment"),
        # shared_buffers of its own: not in the memory experiment, which sets them
        (["--configs", "nvm_se2_slots"], "shared_buffers = 16MB"),
        (["--configs", "nvm_se2_hybrid,nvm_se2_slots"], "--memory-ratios none"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(
    argv: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.oltp import runner

    def boom(*a: Any, **k: Any) -> int:
        raise AssertionError("must not run")

    monkeypatch.setattr(runner, "run", boom)
    monkeypatch.setattr("bench.core.build.ensure_built", boom)
    assert cli.main(["oltp", *argv]) == 2
    assert message in capsys.readouterr().err


def test_not_durable_configuration_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    lazy = configs.Config("nvm_lazy", "base", "nvm", "async commits", {"synchronous_commit": "off"})
    monkeypatch.setitem(configs.BY_NAME, "nvm_lazy", lazy)
    monkeypatch.setattr(configs, "NAMES", (*configs.NAMES, "nvm_lazy"))
    monkeypatch.setattr(configs, "CONFIGS", (*configs.CONFIGS, lazy))
    assert settings.not_durable(lazy)
    with pytest.raises(selection.SelectionError, match="not durable"):
        selection.select(settings.job(), ["nvm_lazy"])
    # the durable settings are written last: nothing of a configuration can undo them
    s = settings.server_settings(configs.BY_NAME["nvm_se2"], "64MB")
    assert s["shared_buffers"] == "64MB"
    assert {k: s[k] for k in settings.DURABLE} == settings.DURABLE


def test_sizes_and_ratios() -> None:
    assert plan.size_mb("128MB") == 128
    assert plan.size_mb("1GB") == 1024
    assert plan.size_mb("16384") == 128  # 8 kB blocks
    assert plan.ratio_shared_buffers("1/2", 2 << 30) == "1024MB"
    assert plan.ratio_shared_buffers("1/128", 2 << 30) == "16MB"
    assert plan.ratio_shared_buffers("1/128", 10 << 20) == "2MB"  # floor
    assert targets.tpcb_scale(2_700_000_000) == 173
    assert targets.cluster_name("oltp", 2000000, "nvm") == "oltp-r2000000-nvm"


# --------------------------------------------------------------------------- se2's hybrid pool

#: usertable of the default 2M records as loaded (results/oltp-20261123), and after that
#: run's 31M transactions on nvm
LOADED_2M = 2_776_408_064
AFTER_DEFAULT_RUN_2M = 3_098_501_120


def test_hybrid_descriptors_cover_the_database_and_its_growth() -> None:
    mb = 1 << 20
    d = configs.size_bytes(settings.hybrid_descriptors(LOADED_2M, "20MB"))
    # room for growth beyond the catalogue's whole-database rule (tpch's, for data that
    # does not grow): 25% of the database on top of it
    plain = configs.size_bytes(configs.whole_db_shared_buffers(LOADED_2M))
    assert d >= plain + LOADED_2M // 4 - 128 * mb
    # what the default run added, with the whole-database rule's 25% still left over
    assert d >= AFTER_DEFAULT_RUN_2M * 1.25
    # the rule: whole_db_shared_buffers(db x 1.25) = 1.5625 x db + 64 MB in 128 MB steps
    assert settings.hybrid_descriptors(LOADED_2M, "20MB") == "4224MB"
    assert d % (128 * mb) == 0
    # the same rule on a reused, grown database: sized from its size at set-up
    grown = configs.size_bytes(settings.hybrid_descriptors(AFTER_DEFAULT_RUN_2M, "20MB"))
    assert grown > d and grown >= AFTER_DEFAULT_RUN_2M * 1.25 * 1.25
    # never fewer descriptors than slots (the server refuses to start), never below 128 MB
    assert settings.hybrid_descriptors(10 * mb, "8GB") == "8192MB"
    assert settings.hybrid_descriptors(LOADED_2M, "1323MB") == "4224MB"
    assert settings.hybrid_descriptors(5 * mb, "2MB") == "128MB"


def test_hybrid_pool_settings() -> None:
    hybrid = configs.BY_NAME["nvm_se2_hybrid"]
    s = settings.server_settings(hybrid, "20MB", descriptors="3456MB")
    # shared_buffers (the slots) is the job's, the descriptors the rule's
    assert s["shared_buffers"] == "20MB" and s["nvm_buffer_descriptors"] == "3456MB"
    assert {k: s[k] for k in settings.DURABLE} == settings.DURABLE
    assert configs.pool_pages_bytes(s) == 3456 << 20
    with pytest.raises(ValueError, match="pool for the whole database is not known"):
        settings.server_settings(hybrid, "20MB")
    with pytest.raises(ValueError, match="memory-ratio experiment"):
        settings.server_settings(configs.BY_NAME["mem_limit"], "20MB", "3456MB")
    # se2 without the hybrid pool: no descriptors written
    assert "nvm_buffer_descriptors" not in settings.server_settings(
        configs.BY_NAME["nvm_se2"], "20MB"
    )


def test_which_configurations_run_in_which_mode() -> None:
    for memory in (True, False):
        job = settings.job(memory_experiment=memory)
        assert "nvm_se2_hybrid" in job.names()
        for name in ("nvm_base_wholedb", "nvm_se2_wholedb", "mem_limit"):
            assert name in job.excluded, (name, memory)
        assert ("nvm_se2_slots" in job.excluded) == memory
    why = settings.not_for_mode(configs.BY_NAME["nvm_se2_slots"], True)
    assert why and "shared_buffers = 16MB" in why and "nvm_buffer_descriptors = 256MB" in why
    assert settings.not_for_mode(configs.BY_NAME["nvm_se2_hybrid"], True) is None
    # the workloads experiment alone runs nvm_se2_slots with its own pool
    o = _opts("--configs", "nvm_se2_slots", "--memory-ratios", "none")
    assert o.config_names == ["nvm_se2_slots"]
    # a selection made for the workloads alone is refused by check() with memory ratios
    o.memory_ratios = ["1/2"]
    with pytest.raises(
        plan.PlanError, match="nvm_se2_slots: a pool of its own \\(shared_buffers = 16MB"
    ):
        plan.check(o)


def test_hybrid_memory_experiment_plan() -> None:
    """The issue's experiment: only the memory ratios, 8 clients, se2's hybrid pool."""
    names = ["nvm_base_worker", "nvm_se2", "nvm_se2_hybrid"]
    o = _opts(
        "--configs", ",".join(names), "--workloads", "", "--memory-ratios", "1/128,1/2",
        "--clients", "8",
    )  # fmt: skip
    assert o.config_names == names and o.workloads == []
    pts = plan.points(o, names)
    assert [(p.config, p.ratio, p.clients) for p in pts] == [
        (n, r, 8) for r in ("1/2", "1/128") for n in names
    ]
    from bench.oltp import runner

    r = runner.Runner(o)  # no server: the set-up's sizes by hand
    r.configs = [configs.BY_NAME[n] for n in names]
    r.db_bytes = {"nvm": LOADED_2M}
    r.mem_sb = {x: plan.ratio_shared_buffers(x, LOADED_2M) for x in o.memory_ratios}
    assert r.mem_sb == {"1/2": "1323MB", "1/128": "20MB"}
    hy = configs.BY_NAME["nvm_se2_hybrid"]
    for sb in r.mem_sb.values():  # shared_buffers = ratio x data, as every configuration's
        s = r.point_settings(hy, sb)
        assert s["shared_buffers"] == sb and s["nvm_buffer_descriptors"] == "4224MB"
        assert "nvm_buffer_descriptors" not in r.point_settings(configs.BY_NAME["nvm_se2"], sb)
    doc = r.plan_doc()
    assert doc["hybrid_pool"] == {
        "nvm_se2_hybrid": {
            "db_bytes_at_setup": LOADED_2M,
            "growth_headroom": settings.GROWTH_HEADROOM,
            "pools": {
                "1/2": {"shared_buffers": "1323MB", "nvm_buffer_descriptors": "4224MB"},
                "1/128": {"shared_buffers": "20MB", "nvm_buffer_descriptors": "4224MB"},
            },
        }
    }
    cfg_doc = {c["name"]: c for c in doc["configs"]}
    assert cfg_doc["nvm_se2_hybrid"]["server_settings"]["nvm_buffer_descriptors"] == "4224MB"
    # the workloads experiment: the same rule at the job's shared_buffers
    o2 = _opts("--configs", "nvm_se2_hybrid", "--memory-ratios", "none")
    r2 = runner.Runner(o2)
    r2.configs, r2.db_bytes = [hy], {"nvm": LOADED_2M}
    assert r2.point_settings(hy, o2.shared_buffers)["shared_buffers"] == "128MB"
    assert r2.hybrid_doc()["nvm_se2_hybrid"]["pools"] == {
        "main": {"shared_buffers": "128MB", "nvm_buffer_descriptors": "4224MB"}
    }


# --------------------------------------------------------------------------- scripts


def test_scripts(tmp_path: Path) -> None:
    a = workloads.WORKLOADS["a"]
    args = workloads.write_scripts(a, "zipfian", tmp_path)
    assert args[0] == "-f" and args[1].endswith("ycsb-read-zipfian.sql@50")
    assert args[3].endswith("ycsb-update-zipfian.sql@50")
    read = (tmp_path / "ycsb-read-zipfian.sql").read_text()
    assert "permute(random_zipfian(0, :records - 1, 1.001), :records) + 1" in read
    assert "field9 FROM usertable WHERE ycsb_key = :k" in read
    upd = workloads.script_text("update", "uniform")
    assert upd.startswith("\\set k random(1, :records)\n")
    assert "UPDATE usertable SET field1" in upd
    rmw = workloads.script_text("rmw", "zipfian")
    assert "BEGIN;" in rmw and "END;" in rmw and "UPDATE" in rmw and "SELECT" in rmw
    assert workloads.write_scripts(workloads.WORKLOADS["tpcb"], "zipfian", tmp_path) == [
        "-b",
        "tpcb-like",
    ]
    assert workloads.script_names(workloads.WORKLOADS["f"]) == ["read", "rmw"]
    assert "1.001" in workloads.DISTRIBUTIONS["zipfian"]
    assert "0.99" in workloads.DISTRIBUTIONS["zipfian"]
    with pytest.raises(ValueError):
        workloads.key_expr("latest")
    ddl = targets.usertable_ddl()
    assert "field9 text" in ddl and "fillfactor = 80" in ddl
    assert "generate_series(1, 500)" in targets.usertable_fill(500)


def test_command(tmp_path: Path) -> None:
    cmd = pgbench.command(
        Path("/x/pgbench"),
        ["-b", "tpcb-like"],
        clients=8,
        threads=2,
        seconds=59.5,
        records=100,
        dbname="oltp",
        log_prefix=tmp_path / "p",
    )
    assert cmd[0] == "/x/pgbench" and cmd[-1] == "oltp"
    assert cmd[cmd.index("-c") + 1] == "8" and cmd[cmd.index("-j") + 1] == "2"
    assert cmd[cmd.index("-T") + 1] == "60"
    assert "-M" in cmd and "prepared" in cmd and "--log" in cmd
    assert f"--random-seed={workloads.RANDOM_SEED}" in cmd
    one = pgbench.command(
        Path("pgbench"), [], clients=1, threads=2, seconds=5, records=1, dbname="d", log_prefix=None
    )
    assert one[one.index("-j") + 1] == "1" and "--log" not in one


# --------------------------------------------------------------------------- pgbench output

SUMMARY = """\
transaction type: multiple scripts
scaling factor: 1
query mode: prepared
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 60 s
number of transactions actually processed: 600123
number of failed transactions: 0 (0.000%)
latency average = 0.799 ms
latency stddev = 1.234 ms
initial connection time = 12.345 ms
tps = 10001.234567 (without initial connection time)
"""


def test_parse_summary() -> None:
    s = pgbench.parse_summary(SUMMARY)
    assert s["transactions"] == 600123
    assert s["failed"] == 0
    assert s["tps"] == pytest.approx(10001.234567)
    assert s["latency_avg_ms"] == pytest.approx(0.799)
    assert pgbench.parse_summary("garbage") == {}


def _log_lines() -> list[str]:
    lines = []
    # 3 seconds: 100, 200, 50 transactions; script 0 = read (100 µs), 1 = update (1000 µs)
    for sec, n in ((1000, 100), (1001, 200), (1002, 50)):
        for i in range(n):
            script = i % 2
            lines.append(f"{i % 4} {i} {100 if script == 0 else 1000} {script} {sec} {i * 10}")
    lines.append("3 999 failed 1 1001 5")
    lines.append("")
    lines.append("broken line")
    return lines


def test_parse_logs(tmp_path: Path) -> None:
    lines = _log_lines()
    (tmp_path / "p.123").write_text("\n".join(lines[:200]) + "\n")
    (tmp_path / "p.123.1").write_text("\n".join(lines[200:]) + "\n")
    (tmp_path / "other.1").write_text("x")
    files = pgbench.log_files(tmp_path / "p")
    assert [f.name for f in files] == ["p.123", "p.123.1"]
    st = pgbench.parse_logs(files, ["read", "update"])
    assert st.lines == 351 and st.failed == 1 and st.bad_lines == 1
    assert len(st.latencies[0]) == 175 and len(st.latencies[1]) == 175
    assert [s.count for s in (st.seconds[k] for k in sorted(st.seconds))] == [100, 200, 50]
    assert [s.count for s in st.full_seconds()] == [200]
    lat = pgbench.latency_summary(st.all_latencies())
    assert lat["p50_ms"] == 0.1 and lat["p95_ms"] == 1.0 and lat["max_ms"] == 1.0
    assert lat["mean_ms"] == pytest.approx(0.55)
    spread = pgbench.per_second_summary([st.seconds[k] for k in sorted(st.seconds)])
    assert spread["min"] == 50 and spread["max"] == 200 and spread["median"] == 100
    pgbench.write_per_second([st.seconds[k] for k in sorted(st.seconds)], tmp_path / "s.csv")
    csv = (tmp_path / "s.csv").read_text().splitlines()
    assert csv[0].startswith("second,epoch,transactions") and csv[2].startswith("1,1001,200,1,")
    size = pgbench.compress_logs(files, tmp_path / "p.log.gz")
    assert size > 0 and not (tmp_path / "p.123").exists()
    with gzip.open(tmp_path / "p.log.gz", "rt") as f:
        assert len(f.read().splitlines()) == 353


def test_percentile() -> None:
    xs = list(range(1, 101))
    assert pgbench.percentile(xs, 50) == 50
    assert pgbench.percentile(xs, 99) == 99
    assert pgbench.percentile(xs, 100) == 100
    assert pgbench.percentile([], 50) is None


# --------------------------------------------------------------------------- report


def _record(
    cfg: str, clients: int, tps: float, rep: int = 1, ratio: str | None = None, durable: bool = True
) -> dict[str, Any]:
    p = plan.Point(cfg, "a", "zipfian", clients, rep, ratio)
    n = int(tps * 60)
    return {
        "key": p.key,
        "config": cfg,
        "workload": "a",
        "distribution": "zipfian",
        "clients": clients,
        "rep": rep,
        "ratio": ratio,
        "shared_buffers": "16MB" if ratio else "128MB",
        "status": "ok",
        "tps": tps,
        "transactions": n,
        "durable": durable,
        "latency": {"p50_ms": 0.2, "p95_ms": 0.5, "p99_ms": 1.0, "max_ms": 9.0},
        "latency_by_op": {"read": {"p99_ms": 0.3}, "update": {"p99_ms": 1.5}},
        "per_second": {"p5": tps * 0.9, "p95": tps * 1.1},
        "wal_bytes_per_txn": 300.0,
        "stats": {
            "checkpointer": {"num_timed": 0, "num_requested": 1},
            "database": {"blks_hit": 90, "blks_read": 10},
        },
        "server_cpu": {
            "groups": {
                "client backend": {"utime_s": 30.0, "stime_s": 10.0},
                "walwriter": {"utime_s": 1.0, "stime_s": 1.0},
                "autovacuum worker": {"utime_s": 0.5, "stime_s": 0.0},
            }
        },
        "pgbench_cpu_s": 12.0,
    }


def _plan_doc(cfgs: list[str]) -> dict[str, Any]:
    return {
        "records": 2000000,
        "clients": [1, 8],
        "workloads": {"a": "YCSB-A"},
        "distribution": "zipfian",
        "distribution_detail": workloads.DISTRIBUTIONS["zipfian"],
        "duration_s": 60,
        "warmup_s": 10,
        "repeat": 2,
        "shared_buffers": "128MB",
        "memory_ratios": {"1/2": "1300MB", "1/128": "20MB"},
        "memory_workload": "a",
        "memory_clients": 8,
        "configs": [{"name": c} for c in cfgs],
        "unavailable": {"nvm_se2_m2": "no SMT"},
        "availability_unknown": {"nvm_se2_m1": "nvmpf-topology not installed"},
        "durable_settings": settings.DURABLE,
        "random_seed": workloads.RANDOM_SEED,
    }


def test_report_from_synthetic_result(tmp_path: Path) -> None:
    cfgs = ["disk_base", "nvm_base_worker", "nvm_se2"]
    base = {"disk_base": 1000.0, "nvm_base_worker": 4000.0, "nvm_se2": 4400.0}
    recs = []
    for rep in (1, 2):
        for n in (1, 8):
            for c in cfgs:
                recs.append(_record(c, n, base[c] * n / 4 + rep, rep))
        for c in cfgs:
            recs.append(_record(c, 8, base[c] / 2, rep, ratio="1/128"))
    recs.append({**_record("nvm_se2", 1, 1.0), "status": "error", "error": "boom", "rep": 3})
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / "plan.json").write_text(json.dumps(_plan_doc(cfgs)))
    (tmp_path / "env.json").write_text(json.dumps({"data_bytes": {"nvm": 2.7e9}, "cpus": 2}))
    report.rebuild(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "Emulated persistent memory, not PMem" in md
    assert "random_zipfian" in md and "1.001" in md
    assert "fsync=on" in md
    assert "1 point(s) failed" in md
    assert "Not available: nvm_se2_m2: no SMT" in md
    assert "Availability unknown (run): nvm_se2_m1: nvmpf-topology not installed" in md
    # nvm_se2 at 8 clients: median of 8801 and 8802; x disk_base = 4.40, x base = 1.10
    assert "| nvm_se2 | 1102 [1101–1102] (1 s: 991–1212) | 8802 [8801–8802]" in md
    assert "4.40× / 1.10×" in md
    assert "Anti-caching" in md and "90.0%" in md
    for img in (
        "throughput_vs_clients.png",
        "throughput_normalised.png",
        "latency_percentiles.png",
        "cpu_split.png",
        "memory_ratio.png",
    ):
        assert (tmp_path / img).is_file(), img
        assert img in md
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    summary = json.loads((tmp_path / "summary.json").read_text())
    cell = summary["nvm_se2-a-zipfian-c8"]
    assert cell["reps"] == 2 and cell["durable"] is True
    assert cell["cpu_us_per_txn"]["client backend"] == pytest.approx(
        40 / (4400 * 2 + 1) / 60 * 1e6, rel=0.01
    )


def test_report_memory_experiment_with_the_hybrid_pool(tmp_path: Path) -> None:
    """The memory table's ratios × the baseline at the same ratio and at the largest one (the
    issue's target: se2's hybrid pool at 1/128 against stock at 1/2), and the pools."""
    cfgs = ["nvm_base_worker", "nvm_se2", "nvm_se2_hybrid"]
    tps = {
        ("nvm_base_worker", "1/2"): 4000.0,
        ("nvm_base_worker", "1/128"): 2000.0,
        ("nvm_se2", "1/2"): 4100.0,
        ("nvm_se2", "1/128"): 3000.0,
        ("nvm_se2_hybrid", "1/2"): 4080.0,
        ("nvm_se2_hybrid", "1/128"): 3960.0,
    }
    # pgbench's CPU seconds in a 60 s window: its share of the vCPUs, which the host's
    # speed does not move but the server's CPU per transaction does
    pgbench_cpu = {
        ("nvm_base_worker", "1/2"): 36.0,
        ("nvm_base_worker", "1/128"): 31.8,
        ("nvm_se2", "1/2"): 36.0,
        ("nvm_se2", "1/128"): 33.0,
        ("nvm_se2_hybrid", "1/2"): 36.36,
        ("nvm_se2_hybrid", "1/128"): 35.64,
    }
    recs = []
    for (cfg, r), t in tps.items():
        rec = _record(cfg, 8, t, ratio=r)
        # 40 s: the server's 42.5 CPU seconds of _record and pgbench's saturate 2 vCPUs
        rec["pgbench_cpu_s"], rec["elapsed_s"] = pgbench_cpu[(cfg, r)], 40.0
        rec["shared_buffers"] = {"1/2": "1300MB", "1/128": "20MB"}[r]
        rec["shmem_bytes"] = (1400 if r == "1/2" else 60) << 20
        rec["db_bytes_end"] = 2900 << 20
        if cfg == "nvm_se2_hybrid":
            rec["nvm_buffer_descriptors"] = "4224MB"
            rec["shmem_bytes"] += 70 << 20
            rec["pool_covers_db"] = r == "1/2"  # say the database outgrew it at 1/128
        else:
            rec["pool_covers_db"] = False
        recs.append(rec)
    doc = _plan_doc(cfgs)
    # as plan.json has them (written with sorted keys): 1/128 before 1/2
    doc["memory_ratios"] = {"1/128": "20MB", "1/2": "1300MB"}
    doc["hybrid_pool"] = {
        "nvm_se2_hybrid": {
            "db_bytes_at_setup": LOADED_2M,
            "growth_headroom": 1.25,
            "pools": {
                "1/128": {"shared_buffers": "20MB", "nvm_buffer_descriptors": "4224MB"},
                "1/2": {"shared_buffers": "1300MB", "nvm_buffer_descriptors": "4224MB"},
            },
        }
    }
    from bench.core import blocks

    md = blocks.to_markdown(report.document(doc, {"cpus": 2}, recs, []))
    assert "× `nvm_base_worker` at the largest ratio (1/2)" in md
    assert "shared_buffers = ratio × data (1/2: 1300MB, 1/128: 20MB)" in md  # largest first
    hy = "| nvm_se2_hybrid | YCSB-A, 8 client(s), ratio"
    # hybrid at 1/2: 4080/4000; at 1/128: 3960/2000 at the same ratio, 3960/4000 vs 1/2
    assert "| nvm_se2_hybrid | 1.02× / 1.02× | 1.98× / 0.99× |" in md
    assert "| nvm_base_worker | 1.00× / 1.00× | 1.00× / 0.50× |" in md
    # at equal host speed: the ratios of pgbench's CPU rates (35.64/31.8, 35.64/36)
    assert "at equal host speed, estimated" in md
    assert "used a median of 1.86-1.97 of the 2 vCPUs" in md
    assert "| nvm_se2_hybrid | 1.01× / 1.01× | 1.12× / 0.99× |" in md
    assert "| nvm_base_worker | 1.00× / 1.00× | 1.00× / 0.88× |" in md
    # not without the vCPUs, nor where a point did not saturate them
    assert "the number of vCPUs is not recorded" in blocks.to_markdown(
        report.document(doc, {}, recs, [])
    )
    assert "not every point saturated the vCPUs" in blocks.to_markdown(
        report.document(doc, {"cpus": 4}, recs, [])
    )
    assert "`nvm_se2_hybrid` (database at set-up 2,648 MB): 1/2: 1300MB of slots, 4224MB" in md
    assert md.index(f"{hy} 1/2 |") < md.index(f"{hy} 1/128 |")  # largest ratio first
    assert f"{hy} 1/2 | 1300MB | 4224MB | 1,470 MB | 2,900 MB | yes |" in md
    assert f"{hy} 1/128 | 20MB | 4224MB | 130 MB | 2,900 MB | **no** |" in md
    assert "| nvm_se2 | YCSB-A, 8 client(s), ratio 1/2 | 1300MB | – | 1,400 MB |" in md
    from bench.oltp import cells, charts

    assert "memory_ratio.png" in charts.draw(tmp_path, doc, cells.cells(recs))  # with the target
    # no window counted pgnvm's work: no such section
    assert "What pgnvm did per transaction" not in md
    # the hybrid's windows did: one row each, base's (all zeros) none
    zeros = {k: 0.0 for k, _ in report.PGNVM_COLUMNS}
    for rec in recs:
        hy1 = rec["config"] == "nvm_se2_hybrid"
        rec["pgnvm_per_txn"] = {**zeros, "cow_copies": 0.274, "demotions": 0.27} if hy1 else zeros
    md = blocks.to_markdown(report.document(doc, {"cpus": 2}, recs, []))
    assert "## What pgnvm did per transaction" in md
    assert "| nvm_se2_hybrid | YCSB-A, 8c, ratio 1/128 | 1 | 0.274 | 0.000 |" in md
    assert "| nvm_base_worker | YCSB-A" not in md.split("per transaction")[-1]


def test_report_states_the_placement() -> None:
    recs = [
        {**_record("nvm_se2", 1, 20000.0), "placement": "same:0"},
        {**_record("nvm_se2", 8, 30000.0), "placement": "free"},
        {
            **_record("nvm_se2", 1, 9000.0, rep=2),
            "placement": "free",
            "placement_fallback": True,
            "placement_why": "pin failed, ran free: taskset not found (util-linux)",
        },
    ]
    doc = {**_plan_doc(["nvm_se2"]), "placement": "same"}
    md = blocks.to_markdown(report.document(doc, {}, recs, []))
    assert "Placement (`--placement same`): at **1 client**" in md
    assert "docs/results/oltp-wal-quiet-20261126" in md
    assert "**Placement not as asked in 1 point(s)**: nvm_se2-a-zipfian-c1 run 2: pin failed" in md
    assert "| nvm_se2 | 1 | 1 | 20000 |" in md and "| same:0 | " in md
    assert "| **free (not as asked)** |" in md and "| free | " in md
    assert report.summary(recs)["nvm_se2-a-zipfian-c1"]["placement"] == ["free", "same:0"]
    free = blocks.to_markdown(report.document({**doc, "placement": "free"}, {}, recs[1:2], []))
    assert "Placement: **free** (`--placement free`)" in free
    old = json.dumps(report.document(_plan_doc(["nvm_se2"]), {}, recs[:1], []))
    assert "Placement" not in old  # a run from before: nothing claimed


def test_report_marks_not_durable(tmp_path: Path) -> None:
    recs = [_record("nvm_se2", 1, 100.0, durable=False)]
    doc = report.document(_plan_doc(["nvm_se2"]), {}, recs, [])
    text = json.dumps(doc)
    assert "NOT DURABLE" in text


def test_empty_report(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps(_plan_doc(["nvm_se2"])))
    (tmp_path / "env.json").write_text(json.dumps({"interrupted": True}))
    report.rebuild(tmp_path)
    assert "Interrupted" in (tmp_path / "report.md").read_text()
