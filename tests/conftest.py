from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import osuser


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private PGNVM_HOME, acting as a non-root user (no useradd/chown/mount side effects)."""
    h = tmp_path / "home"
    monkeypatch.setenv("PGNVM_HOME", str(h))
    monkeypatch.setattr(osuser, "is_root", lambda: False)
    return h


@pytest.fixture(autouse=True)
def _no_user_nvm_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests see the default nvm root even under ``PGNVM_NVM_ROOT=... ./pgnvm test``
    (and a test that exports a root through ``--nvm-root`` cannot leak it into the next):
    the variable is set and removed through monkeypatch, so it is restored afterwards."""
    monkeypatch.setenv("PGNVM_NVM_ROOT", "")
    monkeypatch.delenv("PGNVM_NVM_ROOT")


#: a postmaster's maps and smaps with huge_pages = on and vm.nr_hugepages reserved: the main
#: segment (32 MB, 16 huge pages) is a hugetlb mapping; 2 of its huge pages are in this
#: process's page tables, one only here (Private_Hugetlb), one shared with a backend
HUGE_MAPS = (
    "55d0c0000000-55d0c0100000 r-xp 00000000 08:01 1 /usr/lib/postgresql/bin/postgres\n"
    "7f0000000000-7f0002000000 rw-s 00000000 00:10 12345 /anon_hugepage (deleted)\n"
    "7f2000000000-7f2000010000 rw-s 00000000 00:01 8 /SYSV0052e2c1 (deleted)\n"
)
HUGE_SMAPS = (
    "7f0000000000-7f0002000000 rw-s 00000000 00:10 12345 /anon_hugepage (deleted)\n"
    "Size:              32768 kB\nKernelPageSize:     2048 kB\nMMUPageSize:        2048 kB\n"
    "Rss:                   0 kB\nPss:                   0 kB\nShared_Clean:          0 kB\n"
    "Anonymous:             0 kB\nShared_Hugetlb:     2048 kB\nPrivate_Hugetlb:    2048 kB\n"
    "VmFlags: rd wr sh mr mw me ms de ht sd\n"
    "7f2000000000-7f2000010000 rw-s 00000000 00:01 8 /SYSV0052e2c1 (deleted)\n"
    "Size:                 64 kB\nKernelPageSize:        4 kB\nMMUPageSize:           4 kB\n"
    "Rss:                   8 kB\nShared_Hugetlb:        0 kB\nPrivate_Hugetlb:       0 kB\n"
    "VmFlags: rd wr sh mr mw me ms sd\n"
)
#: the machine's pool: 24 huge pages, 6 allocated (the segment's 4 and 2 of another
#: mapping), 12 promised to the segment and not allocated yet
HUGE_MEMINFO = (
    "MemTotal:       24576000 kB\nHugePages_Total:      24\nHugePages_Free:       18\n"
    "HugePages_Rsvd:       12\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n"
    "Hugetlb:           49152 kB\n"
)


@pytest.fixture
def huge_proc(tmp_path: Path) -> Path:
    """A fake /proc of a PostgreSQL server with huge_pages = on (:data:`HUGE_MAPS`,
    :data:`HUGE_SMAPS`, :data:`HUGE_MEMINFO`): postmaster 42 with 2 of the segment's huge
    pages mapped, its backend 43 with 3 (the postmaster's shared one + 2 only it has), a
    bash 44 that is not the server's. No map_files (not root)."""
    (tmp_path / "meminfo").write_text(HUGE_MEMINFO)
    backend = HUGE_SMAPS.replace(
        "Shared_Hugetlb:     2048 kB\nPrivate_Hugetlb:    2048 kB",
        "Shared_Hugetlb:     2048 kB\nPrivate_Hugetlb:    4096 kB",
    )
    for pid, ppid, smaps in ((42, 1, HUGE_SMAPS), (43, 42, backend), (44, 1, "")):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text(f"{pid} (postgres) S {ppid} {pid} {pid} 0 -1 4194560 1 0 0 0\n")
        (d / "maps").write_text(HUGE_MAPS if smaps else "")
        (d / "smaps").write_text(smaps)
        (d / "status").write_text("Name:\tpostgres\nRssAnon:\t  5120 kB\nRssShmem:\t 8 kB\n")
    return tmp_path
