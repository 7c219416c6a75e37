"""One libpmem2 seam in the server (issue 23 part 3), checked on the source.

* Only ``postgres/src/backend/storage/file/nvm_pmem.c`` includes ``<libpmem2.h>`` or calls
  a ``pmem2_*`` function among the files we add to PostgreSQL (``postgres/src``) and the
  extension (``postgres/contrib``); everything else goes through ``storage/nvm_pmem.h``.
* The granularity has one name per value: the names ``NvmPmemGranularityName()`` returns
  are the ones every parser of the server's output accepts (the ``nvm_wal = pmem`` and
  ``nvm_data_persist = pmem`` start-up lines, ``pgnvm_wal()``'s regression test).
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.core import counters
from bench.testsuite.checks import data_pmem

REPO = Path(__file__).resolve().parent.parent
POSTGRES = REPO / "postgres"
SEAM = POSTGRES / "src/backend/storage/file/nvm_pmem.c"
_PMEM2_USE = re.compile(r"#\s*include\s*<libpmem2\.h>|\bpmem2_[a-z_]+\s*\(")


def _strip_comments(c_source: str) -> str:
    return re.sub(r"/\*.*?\*/", "", c_source, flags=re.S)


def _users_of_libpmem2() -> list[str]:
    found = []
    for sub in ("src", "contrib"):
        for path in sorted((POSTGRES / sub).rglob("*.[ch]")):
            if _PMEM2_USE.search(_strip_comments(path.read_text(errors="replace"))):
                found.append(path.relative_to(POSTGRES).as_posix())
    return found


def _granularity_names() -> set[str]:
    body = _strip_comments(SEAM.read_text())
    fn = body[body.index("NvmPmemGranularityName(NvmPmemGranularity g)") :]
    fn = fn[: fn.index("\n}\n")]
    return set(re.findall(r'return "([^"]+)";', fn)) - {"none"}


def test_only_the_seam_uses_libpmem2() -> None:
    assert _users_of_libpmem2() == ["src/backend/storage/file/nvm_pmem.c"]


def test_the_granularity_has_one_name_everywhere() -> None:
    names = _granularity_names()
    assert names == {"byte", "cache-line", "page"}
    for name in names:
        wal_line = (
            f'LOG:  nvm_wal = pmem: WAL in "/x/pg_wal" is written through libpmem2 mappings, '
            f"store granularity {name} (persist: msync())"
        )
        m = counters.wal_pmem_logged(wal_line)
        assert m is not None and m.group("gran") == name
        data_line = (
            f'nvm_data_persist = pmem: relation blocks in "/x/base" are persisted when '
            f"written, at {name} granularity (msync())"
        )
        m2 = data_pmem._LOGGED_RE.search(data_line)
        assert m2 is not None and m2.group("gran") == name
    regress = (POSTGRES / "contrib/pgnvm/sql/pgnvm_wal.sql").read_text()
    assert "granularity IN (" + ", ".join(f"'{n}'" for n in sorted(names)) + ")" in regress
