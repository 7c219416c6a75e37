"""Unit tests of bench/oltp (no server): options and plan, bad input refused before anything
runs, pgbench scripts and command, log parsing, the report from synthetic records."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.core import configs, selection
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
