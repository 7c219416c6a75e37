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
    (tmp_path / "meminfo").write_text(
        "MemTotal:       24576000 kB\nMemFree:  1 kB\nMemAvailable:   10240 kB\n"
    )
    (tmp_path / "loadavg").write_text("3.91 2.00 1.00 2/300 4242\n")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Some CPU @ 2GHz\n")
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "perf_event_paranoid").write_text("2\n")
    assert procfs.meminfo(tmp_path)["MemTotal"] == "24576000 kB"
    assert procfs.mem_total_bytes(tmp_path) == 24576000 * 1024
    assert procfs.mem_total_bytes(tmp_path / "nope") == 4 << 30
    assert procfs.mem_available_bytes(tmp_path) == 10 << 20
    assert procfs.mem_available_bytes(tmp_path / "nope") is None
    assert procfs.loadavg(tmp_path) == pytest.approx(3.91)
    assert procfs.loadavg(tmp_path / "nope") is None
    assert procfs.cpu_model(tmp_path) == "Some CPU @ 2GHz"
    assert procfs.sysctl("kernel.perf_event_paranoid", tmp_path) == "2"
    assert procfs.sysctl("kernel.nope", tmp_path) is None
    assert procfs.mem_total_bytes() > 0 and procfs.loadavg() is not None


def test_memory_of_a_process_on_a_fake_proc(tmp_path: Path) -> None:
    d = tmp_path / "42"
    d.mkdir()
    (d / "status").write_text(
        "Name:\tpostgres\nVmRSS:\t  300 kB\nRssAnon:\t  100 kB\nRssFile:\t  50 kB\n"
        "RssShmem:\t  150 kB\nThreads:\t1\n"
    )
    assert procfs.memory_status(42, tmp_path) == {
        "VmRSS": 300 * 1024,
        "RssAnon": 100 * 1024,
        "RssFile": 50 * 1024,
        "RssShmem": 150 * 1024,
    }
    assert procfs.memory_status(43, tmp_path) is None
    (d / "maps").write_text(
        "55d0c0000000-55d0c0100000 r-xp 00000000 08:01 1 /usr/lib/postgresql/bin/postgres\n"
        "7f0000000000-7f0008000000 rw-s 00000000 00:01 7 /dev/zero (deleted)\n"
        "7f1000000000-7f1040000000 rw-s 00000000 00:2a 9 /mnt/pgnvm/nvm/x/base/5/16384\n"
        "7f2000000000-7f2000010000 rw-s 00000000 00:01 8 /SYSV0052e2c1 (deleted)\n"
        "7f3000000000-7f3010000000 rw-p 00000000 00:00 0 \n"
        "7f4000000000-7f4000200000 rw-s 00000000 00:19 5 /dev/shm/PostgreSQL.123\n"
    )
    # the shared anonymous mappings, largest first: not the bigger tmpfs file, not private
    # memory, not a POSIX DSM segment
    assert procfs.shared_segments(42, tmp_path) == [
        (0x7F0000000000, 0x7F0008000000),
        (0x7F2000000000, 0x7F2000010000),
    ]
    assert procfs.shared_segments(43, tmp_path) == []
    (d / "smaps").write_text(
        "7f0000000000-7f0008000000 rw-s 00000000 00:01 7 /dev/zero (deleted)\n"
        "Size:             131072 kB\nRss:                2048 kB\nPss:    1024 kB\n"
        "VmFlags: rd wr sh mr mw me ms sd\n"
        "7f1000000000-7f1040000000 rw-s 00000000 00:2a 9 /mnt/pgnvm/nvm/x/base/5/16384\n"
        "Size:            1048576 kB\nRss:              900000 kB\n"
    )
    assert procfs.vma_fields(42, 0x7F0000000000, tmp_path)["Rss"] == 2048 * 1024
    assert procfs.vma_fields(42, 0x7F1000000000, tmp_path)["Rss"] == 900000 * 1024
    assert procfs.vma_fields(42, 0x7F5000000000, tmp_path) is None
    assert procfs.resident_bytes(42, (0x7F0000000000, 0x7F0008000000), tmp_path) is None


def test_resident_bytes_of_a_shared_mapping_of_this_process() -> None:
    import mmap

    m = mmap.mmap(-1, 16 << 20, mmap.MAP_SHARED)
    try:
        for off in range(0, 3 << 20, mmap.PAGESIZE):
            m[off] = 1
        seg = procfs.shared_segments(os.getpid())[0]
        assert seg[1] - seg[0] == 16 << 20
        got = procfs.resident_bytes(os.getpid(), seg)
        if got is None:  # not CAP_SYS_ADMIN: map_files cannot be opened
            assert os.geteuid() != 0
        else:
            assert got == 3 << 20
        assert procfs.vma_fields(os.getpid(), seg[0])["Rss"] == 3 << 20
    finally:
        m.close()


def test_a_hugetlb_segment_on_a_fake_proc(huge_proc: Path) -> None:
    """The readers on a server with huge_pages = on (conftest.huge_proc: postmaster 42)."""
    tmp_path, d = huge_proc, huge_proc / "42"
    huge, sysv = (0x7F0000000000, 0x7F0002000000), (0x7F2000000000, 0x7F2000010000)
    assert procfs.shared_segments(42, tmp_path) == [huge, sysv]
    assert procfs.hugetlb_segments(42, tmp_path) == {huge[0]}  # by its name in maps
    assert procfs.hugetlb_segments(45, tmp_path) == set()
    # its pages are not Rss, but Shared_Hugetlb + Private_Hugetlb
    assert procfs.vma_fields(42, huge[0], tmp_path)["Rss"] == 0
    assert procfs.hugetlb_mapped(procfs.vma_fields(42, huge[0], tmp_path)) == 4 << 20
    assert procfs.hugetlb_mapped(procfs.vma_fields(42, sysv[0], tmp_path)) == 0
    assert procfs.vma_fields(42, sysv[0], tmp_path)["Rss"] == 8192
    assert procfs.vma_fields(42, 0x7F5000000000, tmp_path) is None
    assert procfs.vma_fields(42, huge[0], tmp_path) == {
        "Size": 32 << 20,
        "KernelPageSize": 2 << 20,
        "MMUPageSize": 2 << 20,
        "Rss": 0,
        "Pss": 0,
        "Shared_Clean": 0,
        "Anonymous": 0,
        "Shared_Hugetlb": 2 << 20,
        "Private_Hugetlb": 2 << 20,
    }
    assert procfs.hugetlb_page_size(42, huge[0], tmp_path) == 2 << 20
    assert procfs.hugetlb_page_size(42, sysv[0], tmp_path) is None
    assert procfs.hugetlb_page_size(45, huge[0], tmp_path) is None  # gone
    assert procfs.hugepages(tmp_path) == {
        "total": 24,
        "free": 18,
        "rsvd": 12,
        "surp": 0,
        "page_bytes": 2 << 20,
    }
    assert procfs.hugepages(tmp_path / "none") is None
    # the pages allocated to the segment's object: its map_files entry's blocks (here a
    # plain file of 8 MB written; the kernel's is the hugetlbfs object)
    assert procfs.hugetlb_allocated_bytes(42, huge, tmp_path) is None  # no map_files: not root
    (d / "map_files").mkdir()
    (d / "map_files" / "7f0000000000-7f0002000000").write_bytes(b"\1" * (8 << 20))
    assert procfs.hugetlb_allocated_bytes(42, huge, tmp_path) == 8 << 20
