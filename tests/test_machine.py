"""``./pgnvm machine``: each line from a fake /sys and /proc, and the command as a whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import cli, machine_cli


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_huge_pages(tmp_path: Path) -> None:
    mm = tmp_path / "kernel" / "mm"
    _write(mm / "transparent_hugepage" / "enabled", "always [madvise] never\n")
    _write(
        mm / "transparent_hugepage" / "shmem_enabled", "always within_size advise [never] deny\n"
    )
    _write(mm / "hugepages" / "hugepages-2048kB" / "nr_hugepages", "16\n")
    _write(mm / "hugepages" / "hugepages-2048kB" / "free_hugepages", "8\n")
    line = machine_cli.huge_pages_line(tmp_path)
    assert line.startswith("tmpfs huge=always (nvm-2m, --huge) available")
    assert "THP enabled=madvise, shmem_enabled=never" in line and "2048kB: 16 (8 free)" in line
    _write(
        mm / "transparent_hugepage" / "shmem_enabled", "always within_size advise never [deny]\n"
    )
    assert "not available" in machine_cli.huge_pages_line(tmp_path)
    assert "no transparent huge pages" in machine_cli.huge_pages_line(tmp_path / "none")


def test_smt_from_sysfs(tmp_path: Path) -> None:
    cpus = tmp_path / "devices" / "system" / "cpu"
    for i, sib in enumerate(("0,2", "1,3", "0,2", "1,3")):
        _write(cpus / f"cpu{i}" / "topology" / "thread_siblings_list", sib + "\n")
    line = machine_cli.smt_line(None, tmp_path)
    assert line.startswith("yes") and "M2/M3 can run" in line and "not installed" in line
    for i in range(4):
        _write(cpus / f"cpu{i}" / "topology" / "thread_siblings_list", f"{i}\n")
    assert machine_cli.smt_line(None, tmp_path).startswith("no")


def test_numa_nodes(tmp_path: Path) -> None:
    nodes = tmp_path / "devices" / "system" / "node"
    _write(nodes / "node0" / "cpulist", "0-7\n")
    _write(nodes / "node0" / "meminfo", "Node 0 MemTotal:       16777216 kB\n")
    _write(nodes / "node1" / "cpulist", "\n")  # CXL memory: a node without CPUs
    _write(nodes / "node1" / "meminfo", "Node 1 MemTotal:       67108864 kB\n")
    line = machine_cli.numa_line(tmp_path)
    assert line.startswith("2: node0 16.0 GiB, CPUs 0-7; node1 64.0 GiB, no CPUs: memory-only")
    assert "numactl" in line
    assert machine_cli.numa_line(tmp_path / "none").startswith("no NUMA information")


def test_checksum_variants() -> None:
    both = "processor: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw\n"
    assert machine_cli.checksum_line(both).startswith("scalar, AVX2, AVX-512 (")
    avx2 = "flags: fpu avx2\n"
    assert machine_cli.checksum_line(avx2) == (
        "scalar, AVX2 (the server picks the widest: AVX2); not on this CPU: AVX-512"
    )
    assert "not on this CPU: AVX2, AVX-512" in machine_cli.checksum_line("flags: fpu\n")


def test_machine_command(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert cli.main(["machine", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in ("nvm root", "DAX / MAP_SYNC", "huge pages", "SMT (M2/M3)", "hardware counters"):
        assert doc[key]
    assert "NUMA nodes" in doc and "checksum variants" in doc
    assert cli.main(["machine", "--nvm-root", str(tmp_path / "missing")]) == 1
    assert "does not exist" in capsys.readouterr().err
