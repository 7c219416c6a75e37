"""bench/core/otherwork.py: other work on the machine, net of the run's own processes, from
fabricated /proc trees."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.core import otherwork, procfs

T = procfs.CLK_TCK  # ticks per second


def _stat_line(busy_s: float, idle_s: float = 100.0) -> str:
    """/proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice;
    ``busy_s`` split over user, nice, system, irq and softirq."""
    parts = [0.5, 0.1, 0.3, 0.05, 0.05]  # user, nice, system, irq, softirq
    u, n, s, i, si = (round(busy_s * p * T) for p in parts)
    return f"cpu  {u} {n} {s} {round(idle_s * T)} 777 {i} {si} 555 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"


def _proc(root: Path, pid: int, ppid: int, cpu_s: float, reaped_s: float = 0.0) -> None:
    """/proc/<pid>/stat with ``cpu_s`` split into utime/stime and ``reaped_s`` of children."""
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    ut, st = round(cpu_s * T) - round(cpu_s * T) // 4, round(cpu_s * T) // 4
    cut, cst = round(reaped_s * T) - round(reaped_s * T) // 2, round(reaped_s * T) // 2
    fields = [
        "S", ppid, pid, pid, 0, -1, 0,  # state .. flags (3-9)
        10, 0, 0, 0,  # minflt cminflt majflt cmajflt (10-13)
        ut, st, cut, cst,  # utime stime cutime cstime (14-17)
        20, 0, 1, 0, 4242,  # priority nice threads itrealvalue starttime (18-22)
    ]  # fmt: skip
    (d / "stat").write_text(f"{pid} (p {pid}) " + " ".join(map(str, fields)) + "\n")


def _tree(root: Path, busy_s: float, tool_s: float, child_s: float, reaped_s: float) -> None:
    """A machine: this tool (pid 100) with a live child (101) and reaped ones, a postmaster
    (200, a child of ours as far as /proc goes: measured as the server, not the tool) and
    another user's process (300)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(_stat_line(busy_s))
    _proc(root, 100, 1, tool_s, reaped_s)
    _proc(root, 101, 100, child_s)
    _proc(root, 200, 100, 50.0)
    _proc(root, 300, 1, 99.0)


def test_machine_busy_seconds(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text(_stat_line(12.0))
    assert procfs.cpu_busy_seconds(tmp_path) == pytest.approx(12.0)  # no idle, iowait, steal
    (tmp_path / "stat").write_text("intr 1 2 3\n")
    assert procfs.cpu_busy_seconds(tmp_path) is None
    assert procfs.cpu_busy_seconds(tmp_path / "nowhere") is None
    assert otherwork.sample(root=tmp_path / "nowhere") is None


def test_own_cpu_is_the_tool_its_children_and_reaped_ones(tmp_path: Path) -> None:
    _tree(tmp_path, 10.0, tool_s=2.0, child_s=0.5, reaped_s=0.25)
    assert otherwork.own_cpu_seconds(100, exclude={200}, root=tmp_path) == pytest.approx(2.75)
    # without the exclusion the postmaster would count as ours
    assert otherwork.own_cpu_seconds(100, root=tmp_path) == pytest.approx(52.75)


def test_other_work_is_the_machine_minus_server_minus_tool(tmp_path: Path) -> None:
    before, after = tmp_path / "a", tmp_path / "b"
    _tree(before, busy_s=100.0, tool_s=2.0, child_s=0.5, reaped_s=0.0)
    # 2 s later: the machine did 4 CPU seconds, the server 1.5, the tool 0.3 + 0.1 + 0.1
    _tree(after, busy_s=104.0, tool_s=2.3, child_s=0.6, reaped_s=0.1)
    s0 = otherwork.sample({200}, 100, before)
    s1 = otherwork.sample({200}, 100, after)
    assert s0 is not None and s1 is not None
    s1 = dataclasses.replace(s1, t=s0.t + 2.0)
    d = otherwork.delta(s0, s1, server_cpu_s=1.5)
    assert d == {
        "window_s": 2.0,
        "busy_cpu_s": pytest.approx(4.0),
        "server_cpu_s": 1.5,
        "tool_cpu_s": pytest.approx(0.5),
        "other_cpu_s": pytest.approx(2.0),
    }
    assert otherwork.blocks([d]) == [pytest.approx(1.0)]  # one CPU busy with other work
    # tick rounding never makes other work negative
    assert otherwork.delta(s0, s1, server_cpu_s=9.0)["other_cpu_s"] == 0.0


def test_short_windows_pool_into_blocks() -> None:
    w = [{"window_s": 0.25, "other_cpu_s": 0.0}] * 4 + [{"window_s": 0.5, "other_cpu_s": 0.5}]
    # four quiet 0.25 s queries make one block; the 0.5 s rest joins it
    assert otherwork.blocks(w) == [pytest.approx(0.5 / 1.5)]
    w2 = [{"window_s": 1.0, "other_cpu_s": 0.1}, {"window_s": 2.0, "other_cpu_s": 3.0}]
    assert otherwork.blocks(w2) == [pytest.approx(0.1), pytest.approx(1.5)]
    assert otherwork.summary(w2) == {"median": pytest.approx(0.8), "max": 1.5, "blocks": 2}
    assert otherwork.summary([]) is None


@pytest.mark.parametrize(
    ("median", "mx", "busy"),
    [(0.1, 0.5, False), (0.25, 1.0, False), (0.26, 0.3, True), (0.1, 1.01, True)],
)
def test_busy_threshold(median: float, mx: float, busy: bool) -> None:
    assert otherwork.busy({"median": median, "max": mx, "blocks": 3}) is busy
    assert not otherwork.busy(None)
