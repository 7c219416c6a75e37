"""bench/core/selection.py: one configuration selection for every job (issue 21, part 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.core import configs, selection
from bench.micro import settings as micro_settings
from bench.oltp import settings as oltp_settings
from bench.testsuite import settings as test_settings
from bench.tpch import settings as tpch_settings

#: each job's command line, as a user types it
JOBS = {
    "tpch": ["tpch", "--sf", "0.01"],
    "oltp": ["oltp", "--records", "1000"],
    "micro scan": ["micro", "scan"],
    "test": ["test", "--no-build"],
}


def _verdicts(monkeypatch: pytest.MonkeyPatch, table: dict[str, configs.Verdict]) -> None:
    """Availability as ``table`` says (available where it says nothing)."""
    monkeypatch.setattr(configs, "verdict", lambda c, b, s: table.get(c.name, configs.AVAILABLE))


def test_unknown_name_is_an_error_listing_the_names_the_job_can_run() -> None:
    with pytest.raises(selection.SelectionError) as e:
        selection.select(micro_settings.job(), ["nvm_se2", "nvm_se9", "se2"])
    msg = str(e.value)
    assert msg.startswith("unknown configuration(s) nvm_se9, se2 (known: nvm_base_sync, ")
    assert (
        "nvm_se2_pmem_cl, nvm_base_wholedb, nvm_se2_wholedb, nvm_se2_hybrid, mem_limit; see "
        "--list-configs)" in msg
    )
    assert "disk_base" not in msg  # micro scan cannot run it: not offered


@pytest.mark.parametrize("job", JOBS)
def test_every_job_refuses_an_unknown_name_before_anything_runs(
    job: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*a: Any, **k: Any) -> int:
        raise AssertionError("must not run")

    monkeypatch.setattr("bench.core.build.ensure_built", boom)
    monkeypatch.setattr("bench.tpch.runner.run", boom)
    monkeypatch.setattr("bench.oltp.runner.run", boom)
    monkeypatch.setattr("bench.micro.scan.Bench.main", boom)
    monkeypatch.setattr("bench.testsuite.runner.run_tests", boom)
    try:
        rc = cli.main([*JOBS[job], "--configs", "nvm_base_worker,nosuch"])
    except SystemExit as e:
        rc, err = 2, str(e)
    else:
        err = capsys.readouterr().err
    assert rc != 0
    assert "unknown configuration(s) nosuch (known: " in err and "nvm_se2_m1" in err


def test_job_exclusions_are_refused_with_why() -> None:
    with pytest.raises(selection.SelectionError, match="disk_base: micro scan measures"):
        selection.select(micro_settings.job(), ["disk_base"])
    with pytest.raises(selection.SelectionError, match="mem_limit: its whole-database"):
        selection.select(oltp_settings.job(), ["nvm_se2", "mem_limit"])


def test_refused_is_said_and_not_run_unknown_runs_and_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _verdicts(
        monkeypatch,
        {
            "nvm_se2_m2": configs.Verdict(False, "no SMT sibling"),
            "nvm_se2_m1": configs.Verdict(None, "nvmpf-topology not installed"),
        },
    )
    said: list[str] = []
    sel = selection.select(tpch_settings.job(), ["nvm_se2_m2", "nvm_se2_m1", "nvm_base_worker"])
    assert sel.run == sel.wanted  # nothing judged yet
    sel.judge(Path("/x"), say=said.append)
    assert [c.name for c in sel.run] == ["nvm_se2_m1", "nvm_base_worker"]  # order given
    assert all(isinstance(c, configs.Config) for c in sel.run)
    assert sel.refused == {"nvm_se2_m2": "no SMT sibling"}
    assert sel.unknown == {"nvm_se2_m1": "nvmpf-topology not installed"}
    assert said == [
        "configuration nvm_se2_m2 is not available, skipped: no SMT sibling",
        "configuration nvm_se2_m1: availability unknown (nvmpf-topology not installed); running it",
    ]


def test_nothing_to_run_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _verdicts(monkeypatch, {"nvm_se2": configs.Verdict(False, "no se2")})
    sel = selection.select(oltp_settings.job(), ["nvm_se2"])
    with pytest.raises(selection.SelectionError, match="pgnvm oltp: no configuration to run"):
        sel.judge(Path("/x"), say=lambda _: None)


def test_defaults_in_the_jobs_order() -> None:
    assert selection.select(oltp_settings.job()).names == list(oltp_settings.default_configs())
    assert not selection.select(oltp_settings.job()).given
    assert selection.select(tpch_settings.job(), []).names == list(tpch_settings.DEFAULT_CONFIGS)


@pytest.mark.parametrize("job", JOBS)
def test_every_list_configs_is_the_one_listing(
    job: str, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[selection.Job] = []

    def listing(j: selection.Job) -> list[str]:
        seen.append(j)
        return [f"LISTED {j.name}"]

    monkeypatch.setattr(selection, "listing", listing)
    argv = [a for a in JOBS[job] if a != "--no-build"]
    assert cli.main([*argv, "--list-configs"]) == 0
    assert f"LISTED {job}\n" in capsys.readouterr().out
    assert [j.name for j in seen] == [job]


def test_the_listing_marks_the_jobs_defaults(home: Path) -> None:
    text = "\n".join(selection.listing(micro_settings.job()))
    assert "nvm_se1\n" in text and "nvm_se2_m1  (not in the default set)" in text
    assert "available: not for this job: micro scan measures" in text
    assert "unknown (build not present yet)" in text
    text = "\n".join(selection.listing(test_settings.job()))
    assert "nvm_se2_m1\n" in text  # a gated default is a default


@pytest.mark.parametrize("job", JOBS)
def test_every_job_hands_its_runner_the_selection(
    job: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command line selects once (through selection.select) and its runner gets the
    Selection: Config objects, not names."""
    selected: list[selection.Selection] = []
    real = selection.select

    def select(j: selection.Job, wanted: Any = None) -> selection.Selection:
        selected.append(real(j, wanted))
        return selected[-1]

    got: list[Any] = []
    monkeypatch.setattr(selection, "select", select)
    monkeypatch.setattr("bench.tpch.runner.run", lambda o: got.append(o.selection) or 0)
    monkeypatch.setattr("bench.oltp.runner.run", lambda o: got.append(o.selection) or 0)
    monkeypatch.setattr("bench.micro.scan.Bench.main", lambda b: got.append(b.selection) or 0)
    monkeypatch.setattr("bench.testsuite.runner.run_tests", lambda o: got.append(o.selection) or 0)
    assert cli.main([*JOBS[job], "--configs", "nvm_se2,nvm_base_worker"]) == 0
    assert len(selected) == 1 and got == selected
    assert selected[0].job.name == job
    assert selected[0].wanted == [configs.BY_NAME["nvm_se2"], configs.BY_NAME["nvm_base_worker"]]
