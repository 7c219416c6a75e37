from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pytest

from bench.testsuite import proc, registry
from bench.testsuite.cli import register
from bench.testsuite.model import CheckFailed, CheckSkipped, Status
from bench.testsuite.runner import Interrupted, run_one


def test_select_everything_by_default() -> None:
    global_checks, checks = registry.select(None)
    assert global_checks == [
        "prefetch",
        "storagebench",
        "powerloss_lib",
        "checksum_simd",
        "fault_guard",
        "ha",
        "pytest",
    ]  # pytest last
    assert [c.name for c in checks] == [
        "auth",
        "regress",
        "pgnvm_ext",
        "isolation",
        "amcheck",
        "truncated",
        "checksum",
        "enospc",
        "differential",
        "strace",
        "redirect",
        "cow",
        "cow_failure",
        "mapping_limits",
        "prefetch_lifecycle",
        "stress",
        "slots",
        "crash",
        "powerloss",
        "wal_pmem",
        "data_pmem",
        "tap_recovery",
    ]


def test_select_only() -> None:
    global_checks, checks = registry.select(["crash", "regress", "pytest"])
    assert global_checks == ["pytest"]
    assert [c.name for c in checks] == ["regress", "crash"]  # registry order, not argv order
    assert registry.select(["pytest", "prefetch"]) == (["prefetch", "pytest"], [])
    assert registry.select(["cow"])[0] == []
    with pytest.raises(ValueError, match="bogus"):
        registry.select(["bogus"])


def test_every_check_has_a_time_limit() -> None:
    assert all(0 < c.limit <= 15 * 60 for c in registry.ENGINE_CHECKS)
    assert all(0 < g.limit <= 30 * 60 for g in registry.GLOBAL_CHECKS)
    assert set(registry.GLOBAL_LIMITS) == {g.name for g in registry.GLOBAL_CHECKS}


def test_cli_parses_options() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    a = parser.parse_args(
        ["test", "--configs", "nvm_base_worker, nvm_se1", "--only", "crash", "--keep"]
    )
    assert a.configs == ["nvm_base_worker", "nvm_se1"] and a.only == ["crash"] and a.keep
    assert a.seed is None
    a = parser.parse_args(["test"])
    assert a.configs is None and a.only is None and not a.keep
    assert not a.list and not a.list_configs
    a = parser.parse_args(["test", "--configs", "nvm_se2,nvm_se2_m1"])
    assert a.configs == ["nvm_se2", "nvm_se2_m1"]


def test_every_check_has_a_function() -> None:
    from bench.testsuite.runner import CHECK_FUNCS

    assert list(CHECK_FUNCS) == [c.name for c in registry.ENGINE_CHECKS]
    assert all(callable(f) for f in CHECK_FUNCS.values())


def test_run_one_turns_every_failure_into_a_result() -> None:
    def boom() -> str:
        raise KeyError("x")

    def fail() -> str:
        raise CheckFailed("nope", ["/tmp/a"])

    def skip() -> str:
        raise CheckSkipped("not root")

    r = run_one("a", "base", 10, lambda: "fine")
    assert r.status is Status.PASS and r.detail == "fine" and r.name == "a[base]"
    r = run_one("b", "se1", 10, boom)
    assert r.status is Status.FAIL and "KeyError" in r.detail
    r = run_one("c", None, 10, fail)
    assert r.status is Status.FAIL and r.detail == "nope" and r.artifacts == ["/tmp/a"]
    assert run_one("d", None, 10, skip).status is Status.SKIP


def test_run_one_enforces_the_time_limit() -> None:
    def slow() -> str:
        time.sleep(5)
        return "too late"

    t0 = time.monotonic()
    r = run_one("slow", "base", 0.3, slow)
    assert time.monotonic() - t0 < 3
    assert r.status is Status.FAIL and r.detail.startswith("TIMEOUT")


def test_time_limit_is_not_swallowed_by_except_exception() -> None:
    def stubborn() -> str:
        try:
            time.sleep(5)
        except Exception:
            return "swallowed"
        return "done"

    r = run_one("stubborn", None, 0.3, stubborn)
    assert r.status is Status.FAIL and "TIMEOUT" in r.detail


def test_run_kills_the_whole_process_group_on_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    with pytest.raises(proc.CheckTimeout):
        proc.run(["bash", "-c", script], timeout=1, log=tmp_path / "log")
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Running and not a zombie (an orphan may wait a while for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_run_captures_output_and_exit_code(tmp_path: Path) -> None:
    r = proc.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=30)
    assert r.returncode == 3 and r.output.strip() == "out"
    r = proc.run(["sh", "-c", "echo a; echo b >&2"], timeout=30, log=tmp_path / "x.log")
    assert r.output.split() == ["a", "b"] and (tmp_path / "x.log").read_text().split() == ["a", "b"]


def test_interrupt_is_recorded_and_propagated() -> None:
    def ctrl_c() -> str:
        raise KeyboardInterrupt

    with pytest.raises(Interrupted) as info:
        run_one("regress", "se1", 10, ctrl_c)
    assert isinstance(info.value, KeyboardInterrupt)
    assert info.value.result.status is Status.FAIL
    assert info.value.result.name == "regress[se1]" and info.value.result.detail == "interrupted"


def test_pick_port_avoids_other_clusters_and_busy_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.core import cluster as clu
    from bench.testsuite import context

    others = [
        clu.Cluster(clu.ClusterSpec(name="tpch", port=5471)),
        clu.Cluster(clu.ClusterSpec(name="pgnvm-test-base", port=5473)),  # ours: reusable
    ]
    monkeypatch.setattr(clu.Cluster, "all", classmethod(lambda cls: others))
    monkeypatch.setattr(clu, "port_in_use", lambda port, host="127.0.0.1": port == 5472)
    assert context.pick_port(5471, set()) == 5473
    assert context.pick_port(5471, {5473}) == 5474


def test_amcheck_findings_ignore_only_the_install_notice() -> None:
    from bench.testsuite.pgamcheck import findings

    notice = 'NOTICE:  extension "amcheck" already exists, skipping'
    assert findings("") == [] and findings(f"{notice}\n{notice}\n") == []
    report = f'{notice}\nbtree index "regression.public.t_i":\n    ERROR:  invalid page in block 3'
    assert findings(report) == [
        'btree index "regression.public.t_i":',
        "    ERROR:  invalid page in block 3",
    ]


def test_references_recorded_by_base_are_cached_across_runs(tmp_path: Path) -> None:
    from bench.testsuite.context import RunState

    def state(stamp: str) -> RunState:
        return RunState(
            stamp=stamp,
            results_dir=tmp_path,
            work_root=tmp_path,
            keep=False,
            seed=1,
            tree=tmp_path,
            reference_file=tmp_path / "ref.json",
        )

    first = state("run1")
    assert first.load_reference("k") is None
    first.store_reference("k", {"q": "d/1"})
    assert first.load_reference("k") == ({"q": "d/1"}, "this run")
    later = state("run2")
    assert later.load_reference("k") == ({"q": "d/1"}, "cached base run run1")
    assert later.load_reference("other") is None
    (tmp_path / "ref.json").write_text("{broken")
    assert state("run3").load_reference("k") is None


def test_one_run_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from bench.testsuite import runner

    monkeypatch.setenv("PGNVM_HOME", str(tmp_path))
    code = (
        "import sys, time; from bench.testsuite.runner import one_run_at_a_time\n"
        "with one_run_at_a_time():\n"
        "    print('got', flush=True); time.sleep(float(sys.argv[1]))\n"
    )
    first = subprocess.Popen([sys.executable, "-c", code, "1.5"], stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None and first.stdout.readline() == "got\n"
    t0 = time.monotonic()
    with runner.one_run_at_a_time():  # waits for the first run
        waited = time.monotonic() - t0
    first.wait(5)
    assert waited > 0.5
    assert (tmp_path / "test" / ".run.lock").read_text().strip() == str(os.getpid())
    with runner.one_run_at_a_time():  # free again: no wait
        pass


def test_prove_summary_parsing() -> None:
    """tap_recovery reads prove's closing lines; a failed file is named."""
    from bench.testsuite.checks import pgsuites

    out = (
        "t/001_stream_rep.pl ................... ok\n"
        "t/035_standby_logical_decoding.pl ..... skipped: Injection points not supported\n"
        "t/040_standby_failover_slots_sync.pl (Wstat: 7424 (exited 29) Tests: 18 Failed: 1)\n"
        "Files=50, Tests=477, 230 wallclock secs ( 0.25 usr)\n"
        "Result: FAIL\n"
    )
    assert pgsuites._PROVE_RESULT_RE.search(out).group(1) == "FAIL"
    assert pgsuites._PROVE_FILES_RE.search(out).groups() == ("50", "477")
    assert pgsuites._PROVE_FAILED_RE.findall(out) == ["t/040_standby_failover_slots_sync.pl"]
    assert len(pgsuites._PROVE_SKIPPED_RE.findall(out)) == 1


def test_tap_failure_excerpt_says_why_from_the_failed_files_logs(tmp_path: Path) -> None:
    """A CI log shows prove's summary only; the excerpt carries the cause (2026-11-26: a CI
    run failed 027_stream_regress's regression run and both dumps, and its logs were gone
    with the clone). Lines of a passing file and ordinary server chatter stay out."""
    from bench.testsuite.checks.pgsuites import tap_failure_excerpt

    (tmp_path / "regress_log_027_stream_regress").write_text(
        "[09:41:02.1](0.1s) ok 1 - setup\n"
        "not ok 90        + errors                                    266 ms\n"
        "#   Failed test 'dump primary server'\n"
        "#          got: '256'\n"
        "#     expected: '0'\n"
        "pg_dumpall: error: could not write to output file: No space left on device\n"
        "# Running: pg_dumpall --file /x/primary.dump\n"
    )
    (tmp_path / "027_stream_regress_primary.log").write_text(
        "2026-11-26 LOG:  checkpoint starting: time\n"
        '2026-11-26 ERROR:  could not extend file "base/16384/2619": No space left on device\n'
        "2026-11-26 LOG:  server process (PID 4242) was terminated by signal 6: Aborted\n"
    )
    (tmp_path / "regress_log_001_stream_rep").write_text("not ok 3 - not this one\n")
    got = tap_failure_excerpt(tmp_path, ["t/027_stream_regress.pl"])
    assert "--- regress_log_027_stream_regress:" in got
    assert "not ok 90" in got and "Failed test 'dump primary server'" in got
    assert "got: '256'" in got and "pg_dumpall: error: could not write" in got
    assert "--- 027_stream_regress_primary.log:" in got
    assert "could not extend file" in got and "terminated by signal 6" in got
    assert "checkpoint starting" not in got and "# Running" not in got
    assert "not this one" not in got
    assert tap_failure_excerpt(tmp_path, ["t/099_absent.pl"]).startswith("(no explanatory")


def test_tap_recovery_runs_once_per_distinct_recovery_path() -> None:
    """The recovery suite, the most expensive check, runs where recovery differs: stock,
    each engine, prefetch helpers on hot standbys, and the PMem write path (WAL and data
    through libpmem2) with se2; variants that change nothing recovery does are skipped with
    the configuration that covers them named."""
    from bench.core import configs
    from bench.testsuite import registry
    from bench.testsuite import settings as test_settings
    from bench.testsuite.checks.pgsuites import tap_recovery_skip

    defaults = (*test_settings.DEFAULT_CONFIGS, *test_settings.WITH_SE2)
    runs = {
        n
        for n in defaults
        if tap_recovery_skip(configs.BY_NAME[n]) is None
        and "tap_recovery" in registry.CONFIG_CHECKS.get(n, ("tap_recovery",))
    }
    assert runs == {"nvm_base_worker", "nvm_se1", "nvm_se2", "nvm_se2_m1", "nvm_se2_pmem"}
    why = tap_recovery_skip(configs.BY_NAME["nvm_base_walpmem"])
    assert why is not None and "nvm_data_persist = pmem" in why


@pytest.mark.parametrize(
    ("global_checks", "flavours"),
    [(["prefetch", "pytest"], ["check", "release"]), (["prefetch"], ["check"]), ([], ["check"])],
)
def test_the_run_builds_the_flavours_its_checks_use(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    global_checks: list[str],
    flavours: list[str],
) -> None:
    # tests/' end-to-end tests run the installed release flavour as it is: a run with
    # pytest builds it first, or they would test an older server (seen: a seam change
    # whose granularity name the stale release build did not yet have)
    from bench.core import build
    from bench.testsuite import runner

    built: list[str] = []
    monkeypatch.setattr(build, "ensure_built", built.append)
    monkeypatch.setattr(runner, "repo_results_dir", lambda: home / "results")
    runner._prepare(runner.Options(build=True), global_checks)
    assert built == flavours
    built.clear()
    (build.bindir("check")).mkdir(parents=True)
    (build.bindir("check") / "postgres").touch()
    runner._prepare(runner.Options(build=False), global_checks)
    assert built == []  # --no-build: as installed


def test_lanes_take_the_reference_then_the_checks_run_once_then_the_longest() -> None:
    from bench.testsuite import runner

    order = runner.lane_order(
        [
            ("nvm_se2_inline", 180.0),
            (runner.ONCE, runner.ONCE_NEXT),
            ("nvm_se2_pmem", 370.0),
            ("nvm_base_worker", runner.REFERENCE_FIRST),
            ("nvm_se1", 300.0),
            ("nvm_se2", 300.0),
        ]
    )
    # the second lane starts on the checks that wait for no reference value
    assert order == [
        "nvm_base_worker",
        runner.ONCE,
        "nvm_se2_pmem",
        "nvm_se1",
        "nvm_se2",
        "nvm_se2_inline",
    ]


def test_hybrid_pool_configuration_runs_only_its_checks() -> None:
    """nvm_se2_slots costs test time only for what exercises se2's hybrid pool (issue 22's
    list and ``slots``), unless ``--only`` names checks; the others run everything."""
    _, checks = registry.select(None)
    mine = [c.name for c in registry.checks_for("nvm_se2_slots", checks, named=False)]
    assert mine == ["checksum", "differential", "redirect", "cow", "stress", "slots", "crash"]
    named = registry.checks_for("nvm_se2_slots", checks[:3], named=True)
    assert [c.name for c in named] == [c.name for c in checks[:3]]
    assert registry.checks_for("nvm_se2", checks, named=False) == checks
    from bench.core import configs

    assert set(registry.CONFIG_CHECKS) <= set(configs.NAMES)
