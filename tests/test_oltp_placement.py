"""bench/oltp/placement.py: where a point's pgbench and server run (no server). The
decision (1 client pinned, more clients and ``--placement free`` not), the taskset commands
of a point (pin, pgbench, undo) with a fake taskset, a failing or missing taskset and a pin
that does not reach a new backend (each runs free and says so), the option, and the real
taskset on a process of ours. The report's account: tests/test_oltp.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.core import procfs
from bench.oltp import cli as oltp_cli
from bench.oltp import placement, plan

TWO = {0, 1}
PM = 4242  # the "postmaster" of the fake taskset


class FakeTaskset:
    """taskset as a recording fake: the affinity it sets is what a new "backend" gets."""

    def __init__(self, allowed: set[int] = TWO, fail: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.cpus = placement.cpu_list(allowed)
        self.fail = fail
        self.reaches_backends = True

    def run(self, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd[1:])
        if self.fail:
            return subprocess.CompletedProcess(cmd, 1, "", self.fail)
        if self.reaches_backends:
            self.cpus = cmd[-2]
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def backend_cpus(self) -> str | None:
        return self.cpus


def _point(
    clients: int, wanted: str = "same", fake: FakeTaskset | None = None, which: bool = True
) -> tuple[placement.PointPlacement, FakeTaskset]:
    fake = fake or FakeTaskset()
    pp = placement.PointPlacement(
        placement.parse(wanted),
        clients,
        allowed=TWO,
        run=fake.run,
        which=(lambda _: "/usr/bin/taskset") if which else (lambda _: None),
    )
    return pp, fake


PGBENCH = ["pgbench", "-c", "1", "oltp"]


def _fields(where: str, why: str | None, fallback: bool, seen: str) -> dict[str, Any]:
    """The record fields a point's placement should give."""
    keys = ("placement", "placement_why", "placement_fallback", "backend_cpus")
    return dict(zip(keys, (where, why, fallback, seen), strict=True))


# --------------------------------------------------------------------------- the decision


def test_one_client_is_pinned_more_clients_and_free_are_not() -> None:
    same = placement.parse("same")
    assert placement.decide(same, 1, TWO) == placement.Decision(0)
    assert placement.decide(placement.parse("same:1"), 1, TWO) == placement.Decision(1)
    eight = placement.decide(same, 8, TWO)
    assert eight.cpu is None and not eight.fallback
    assert eight.why == "8 clients: only 1-client points are pinned"
    free = placement.decide(placement.parse("free"), 1, TWO)
    assert free == placement.Decision(None, "--placement free")
    # a pin asked for that cannot be: free, flagged as a fall-back
    one = placement.decide(same, 1, {3})
    assert one.cpu is None and one.fallback and "one CPU only (3)" in (one.why or "")
    gone = placement.decide(placement.parse("same:5"), 1, TWO)
    assert gone.cpu is None and gone.fallback and "CPU 5" in (gone.why or "")


def test_parse_and_cpu_lists() -> None:
    assert str(placement.parse("same")) == "same" and placement.parse("SAME") == placement.DEFAULT
    assert str(placement.parse("same:3")) == "same:3"
    assert placement.parse("free") == placement.Wanted("free")
    for bad in ("both", "free:1", "same:", "same:x", "same:-1", ""):
        with pytest.raises(ValueError):
            placement.parse(bad)
    assert placement.cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert placement.pin_args(7, {1, 0}) == ["-a", "-cp", "0-1", "7"]
    assert procfs.parse_cpu_list("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
    assert procfs.parse_cpu_list("3") == {3}
    with pytest.raises(ValueError):
        procfs.parse_cpu_list("2-1")


# --------------------------------------------------------------------------- one point


def test_one_client_point_pins_postmaster_and_pgbench_and_undoes_it() -> None:
    pp, fake = _point(1)
    rec = pp.apply(PM, fake.backend_cpus)
    assert rec == _fields("same:0", None, False, "0") and pp.warning is None
    assert fake.calls == [["-a", "-cp", "0", str(PM)]]
    assert pp.command(PGBENCH) == ["taskset", "-c", "0", *PGBENCH]
    assert pp.undo(fake.backend_cpus) == {"backend_cpus_after": "0-1"}
    assert fake.calls[-1] == ["-a", "-cp", "0-1", str(PM)]
    assert pp.undo(fake.backend_cpus) == {} and len(fake.calls) == 2  # once


@pytest.mark.parametrize(
    ("clients", "wanted", "why"),
    [(8, "same", "8 clients: only 1-client points are pinned"), (1, "free", "--placement free")],
)
def test_free_points_are_not_touched(clients: int, wanted: str, why: str) -> None:
    pp, fake = _point(clients, wanted)
    rec = pp.apply(PM, fake.backend_cpus)
    assert rec == _fields("free", why, False, "0-1") and pp.warning is None
    assert fake.calls == []
    assert pp.command(PGBENCH) == PGBENCH
    assert pp.undo(fake.backend_cpus) == {} and fake.calls == []


def test_a_free_point_says_when_backends_are_still_pinned() -> None:
    """What a pin left over from the point before would look like."""
    fake = FakeTaskset()
    fake.cpus = "1"
    pp, _ = _point(8, fake=fake)
    rec = pp.apply(PM, fake.backend_cpus)
    assert rec["placement"] == "free" and rec["backend_cpus"] == "1"
    assert rec["placement_why"].endswith("; but a new backend may run only on 1")
    assert pp.warning == rec["placement_why"]  # on the console too


def test_taskset_failing_runs_free_and_says_so() -> None:
    pp, fake = _point(1, fake=FakeTaskset(fail="taskset: failed to set pid 4242's affinity"))
    rec = pp.apply(PM, fake.backend_cpus)
    assert rec["placement"] == "free" and rec["placement_fallback"] is True
    assert rec["placement_why"] == (
        f"pin failed, ran free: taskset -a -cp 0 {PM}: exit 1: "
        "taskset: failed to set pid 4242's affinity"
    )
    assert pp.command(PGBENCH) == PGBENCH  # pgbench free too
    assert pp.warning == rec["placement_why"]  # on the console too
    assert pp.undo(fake.backend_cpus) == {}  # nothing was pinned


def test_taskset_missing_or_no_postmaster_runs_free_and_says_so() -> None:
    pp, fake = _point(1, which=False)
    rec = pp.apply(PM, fake.backend_cpus)
    assert rec["placement"] == "free" and rec["placement_fallback"] is True
    assert "taskset not found" in rec["placement_why"] and fake.calls == []
    assert pp.command(PGBENCH) == PGBENCH
    pp, fake = _point(1)
    rec = pp.apply(None, fake.backend_cpus)
    assert rec["placement_fallback"] is True and "no postmaster pid" in rec["placement_why"]


def test_a_pin_that_does_not_reach_a_backend_runs_free_and_is_undone() -> None:
    fake = FakeTaskset()
    fake.reaches_backends = False
    pp, _ = _point(1, fake=fake)
    rec = pp.apply(PM, fake.backend_cpus)
    assert rec["placement"] == "free" and rec["placement_fallback"] is True
    assert "but a new backend may run on 0-1" in rec["placement_why"]
    assert pp.command(PGBENCH) == PGBENCH
    assert pp.undo(fake.backend_cpus) == {"backend_cpus_after": "0-1"}
    assert fake.calls[-1] == ["-a", "-cp", "0-1", str(PM)]


def test_an_undo_that_does_not_reach_a_backend_is_said() -> None:
    pp, fake = _point(1)
    pp.apply(PM, fake.backend_cpus)
    fake.reaches_backends = False
    out = pp.undo(fake.backend_cpus)
    assert out == {
        "backend_cpus_after": "0",
        "unpin_error": "a new backend may still run only on 0",
    }


# --------------------------------------------------------------------------- the real taskset


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_real_taskset_pins_and_unpins_a_process() -> None:
    """The commands work with util-linux's taskset: a process of ours stands in for the
    postmaster (it is its own "backend": what ``taskset -a -cp`` gave it)."""
    allowed = placement.allowed_cpus()
    cpu = max(allowed)
    proc = subprocess.Popen(["sleep", "60"])
    try:
        pp = placement.PointPlacement(placement.Wanted("same", cpu), 1)
        rec = pp.apply(proc.pid, lambda: procfs.cpus_allowed(proc.pid))
        assert rec["placement"] == f"same:{cpu}", rec
        assert procfs.cpus_allowed(proc.pid) == str(cpu)
        out = subprocess.run(
            pp.command(["grep", "Cpus_allowed_list", "/proc/self/status"]),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.split() == ["Cpus_allowed_list:", str(cpu)]
        assert pp.undo(lambda: procfs.cpus_allowed(proc.pid)) == {
            "backend_cpus_after": placement.cpu_list(allowed)
        }
    finally:
        proc.kill()
        proc.wait()
    assert procfs.cpus_allowed(os.getpid()) == placement.cpu_list(allowed)


def test_cpus_allowed_of_a_fake_proc_tree(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "status").write_text("Name:\tpostgres\nCpus_allowed_list:\t0-1\n")
    assert procfs.cpus_allowed(7, tmp_path) == "0-1"
    assert procfs.cpus_allowed(8, tmp_path) is None


# --------------------------------------------------------------------------- the option


def test_option() -> None:
    args = cli.build_parser().parse_args(["oltp"])
    assert oltp_cli.options(args).placement == placement.Wanted("same")
    args = cli.build_parser().parse_args(["oltp", "--placement", "free"])
    assert oltp_cli.options(args).placement == placement.Wanted("free")
    for bad in ("both", f"same:{max(placement.allowed_cpus()) + 1}"):
        args = cli.build_parser().parse_args(["oltp", "--placement", bad])
        with pytest.raises(plan.PlanError, match="--placement"):
            oltp_cli.options(args)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_run_sampler_records_where_client_backends_may_run() -> None:
    """The measured run's sampler (``run_backend_cpus``): a shell stands in for the
    postmaster, its two children for client backends, one of them pinned."""
    from bench.oltp import runner

    allowed = placement.allowed_cpus()
    cpu = max(allowed)
    parent = subprocess.Popen(["sh", "-c", f"taskset -c {cpu} sleep 60 & sleep 60 & wait"])
    try:
        for _ in range(200):
            kids = procfs.children(parent.pid)
            if len(kids) == 2 and all(procfs.comm(k) == "sleep" for k in kids):
                break
            time.sleep(0.01)
        sampler = runner.CpuSampler(parent.pid)
        sampler._tick()
        assert sampler.backend_cpus() == sorted({str(cpu), placement.cpu_list(allowed)})
    finally:
        for k in procfs.children(parent.pid):
            os.kill(k, signal.SIGKILL)
        parent.wait()
