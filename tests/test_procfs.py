"""bench.core.procfs: the one /proc reader, on fake /proc trees and on this process."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from bench.core import procfs
from bench.testsuite import proctasks


def _fake_proc(root: Path, pid: int, ppid: int, comm: str, tids: list[int], title: str) -> None:
    d = root / str(pid)
    (d / "task").mkdir(parents=True)
    for t in tids:
        (d / "task" / str(t)).mkdir()
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 101 0 0 0\n")
    (d / "cmdline").write_bytes(title.encode() + b"\0")


def test_parse_stat_takes_comm_up_to_the_last_paren() -> None:
    st = procfs.parse_stat("42 (post (gres) x) Z 7 42 42 0 -1\n")
    assert st == procfs.Stat(comm="post (gres) x", state="Z", ppid=7)
    with pytest.raises(ValueError):
        procfs.parse_stat("garbage")


def test_tasks_children_cmdline_on_a_fake_proc(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 100, 1, "postgres", [100], "postgres -D /x")
    _fake_proc(
        tmp_path, 200, 100, "postgres", [200, 201, 202], "postgres: pgnvm postgres [local] idle"
    )
    _fake_proc(tmp_path, 300, 100, "postgres", [300], "postgres: parallel worker for PID 200")
    _fake_proc(tmp_path, 400, 1, "bash", [400], "bash")
    (tmp_path / "self").mkdir()  # not a pid
    assert procfs.tasks(200, tmp_path) == {200, 201, 202}
    assert procfs.tasks(999, tmp_path) is None
    assert procfs.children(100, tmp_path) == [200, 300]
    assert procfs.cmdline(300, tmp_path) == "postgres: parallel worker for PID 200"
    assert procfs.cmdline(999, tmp_path) == ""
    assert procfs.state(200, tmp_path) == "S" and procfs.state(999, tmp_path) is None
    assert procfs.exists(400, tmp_path) and not procfs.exists(999, tmp_path)


def test_tasks_of_this_process_show_a_new_thread() -> None:
    started, stop = threading.Event(), threading.Event()
    tid: list[int] = []

    def body() -> None:
        tid.append(threading.get_native_id())
        started.set()
        stop.wait(10)

    t = threading.Thread(target=body)
    t.start()
    try:
        started.wait(10)
        seen = procfs.tasks(os.getpid())
        assert seen is not None and os.getpid() in seen and tid[0] in seen
    finally:
        stop.set()
        t.join()
    assert (
        proctasks.wait_for(
            lambda: None if tid[0] not in (procfs.tasks(os.getpid()) or set()) else "alive", 5
        )
        is None
    )


def test_parse_stat_with_odd_comm() -> None:
    line = "123 (postgres: a (b) c) S 1 2 3 0 -1 4194560 " + " ".join(str(i) for i in range(40))
    st = procfs.parse_stat(line)
    assert st.comm == "postgres: a (b) c"
    assert st.state == "S" and st.ppid == 1
    assert st.fields[0] == "S" and st.number(4) == 1 and st.number(10) == 0


def test_sample_self() -> None:
    s = procfs.sample(os.getpid())
    assert s is not None and s.utime >= 0 and s.minflt > 0
    assert procfs.sample(2**22 + 12345) is None


def test_argv_comm_cwd_alive_self() -> None:
    me = os.getpid()
    assert procfs.argv(me) and "python" in procfs.argv(me)[0]
    assert procfs.cmdline(me).startswith(procfs.argv(me)[0])
    assert procfs.comm(me)
    assert procfs.cwd(me) == os.getcwd()
    assert procfs.alive(me) and not procfs.is_zombie(me)
    assert me in procfs.children(os.getppid())
    assert procfs.reaped_or_child_zombie(2**22 + 12345, me)
    assert not procfs.reaped_or_child_zombie(me, 1)


def test_machine(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       24576000 kB\nMemFree:  1 kB\n")
    (tmp_path / "loadavg").write_text("3.91 2.00 1.00 2/300 4242\n")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Some CPU @ 2GHz\n")
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "perf_event_paranoid").write_text("2\n")
    assert procfs.meminfo(tmp_path)["MemTotal"] == "24576000 kB"
    assert procfs.mem_total_bytes(tmp_path) == 24576000 * 1024
    assert procfs.mem_total_bytes(tmp_path / "nope") == 4 << 30
    assert procfs.loadavg(tmp_path) == pytest.approx(3.91)
    assert procfs.loadavg(tmp_path / "nope") is None
    assert procfs.cpu_model(tmp_path) == "Some CPU @ 2GHz"
    assert procfs.sysctl("kernel.perf_event_paranoid", tmp_path) == "2"
    assert procfs.sysctl("kernel.nope", tmp_path) is None
    assert procfs.mem_total_bytes() > 0 and procfs.loadavg() is not None
