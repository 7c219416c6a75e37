"""Where things live in our C files (issue 22 item 8), checked on the source.

* The helpers' verification has one file, ``storage/smgr/nvm_verify.c``: the verdict
  table, the write generation and the verdict epoch are defined there and nowhere
  else, no other file relays a verdict (no function of ``nvm_smgr.c`` or
  ``nvm_prefetch.c`` returns one).
* "se2 is on" has one name, ``NvmSe2Active()`` (storage/nvm_buf.h): it reads ``NvmSe2On``,
  which only nvm_buf.c sets; no other file, and no line a patch adds, names it.
* The storage manager's slot in smgr.c's ``smgrsw[]`` has one name, ``NVM_SMGR_WHICH``
  (storage/nvm_smgr.h), used by the table's entry, by the code that picks it and by
  ``nvm_smgr.c``'s own tests of ``smgr_which``: no bare number.
* pgnvm's settings have one home: every variable that guc_tables.c registers for pgnvm,
  and every table of values, is defined in ``utils/misc/nvm_guc.c`` and nowhere else;
  one patch (0001) registers them all, and the only header of ours it includes is
  ``utils/nvm_guc.h``. ``nvm_verify.c`` includes no header of a file above it (calls go
  down only).
* pgnvm's shared memory is hooked once: the patches call only ``NvmShmemSize()`` and
  ``NvmShmemInit()`` (``storage/ipc/nvm_shmem.c``), once each, and every part's
  ``Nvm*ShmemSize()``/``Nvm*ShmemInit()`` is called from ``nvm_shmem.c`` only.
* A buffer's redirection has one record, the descriptor's ``BM_NVM_REDIRECTED`` (defined
  by patch 0005 in buf_internals.h, mirrored for bufmgr.h by nvm_buf.h's
  ``NVM_BM_REDIRECTED``): the flag byte ``NvmBufferFlags[]`` holds only
  ``NVM_BUF_COW_RUNNING`` and ``NVM_BUF_NO_DEMOTE``, and ``NVM_BUF_REDIRECTED`` is named
  nowhere, not even in a comment or a patch's header.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
POSTGRES = REPO / "postgres"
SRC = POSTGRES / "src"
VERIFY = "src/backend/storage/smgr/nvm_verify.c"


def _strip_comments(c_source: str) -> str:
    return re.sub(r"/\*.*?\*/", "", c_source, flags=re.S)


def _our_c_files() -> dict[str, str]:
    """Every C source and header we add to PostgreSQL or the extension, comments removed,
    by path relative to postgres/."""
    out = {}
    for sub in ("src", "contrib"):
        for path in sorted((POSTGRES / sub).rglob("*.[ch]")):
            out[path.relative_to(POSTGRES).as_posix()] = _strip_comments(
                path.read_text(errors="replace")
            )
    return out


def _patch_additions() -> dict[str, str]:
    """The lines each patch adds (without their '+'), by patch name."""
    out = {}
    for path in sorted((POSTGRES / "patches").glob("*.patch")):
        added = [
            line[1:]
            for line in path.read_text().splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        out[path.name] = "\n".join(added)
    return out


def _files_matching(pattern: str) -> list[str]:
    rx = re.compile(pattern, re.M)
    return [p for p, text in _our_c_files().items() if rx.search(text)]


def test_the_verification_state_is_defined_in_nvm_verify_c_only() -> None:
    # the verdict table and its slots, the job numbers and the epoch, the write counters
    for what in (
        r"\bNvmVerdict\s*\*\s*Verdicts\b",
        r"^typedef struct NvmVerdict\b",
        r"^static uint64 NextSeq\b",
        r"^static uint64 EpochFirstSeq\b",
        r"pg_atomic_uint64\s+writes_started\b",
        r"#define NVM_VERDICT_STATE\b",
    ):
        assert _files_matching(what) == [VERIFY], what


def test_no_file_relays_a_verdict() -> None:
    # a verdict goes from nvm_verify.c to the buffer manager that asks, and nowhere else
    assert _files_matching(r"\bNvmVerifyResult\b|\bNVM_VERIFY_(?:OK|FAILED|NONE)\b") == [
        "src/backend/storage/buffer/nvm_buf.c",
        VERIFY,
        "src/include/storage/nvm_verify.h",
    ]


def test_se2_is_on_has_one_name() -> None:
    # NvmSe2Active() reads NvmSe2On (nvm_buf.h), which only nvm_buf.c sets; nobody else
    # names it, in our files or in a line a patch adds (patch 0026: no NvmBufferPages)
    flag = r"\bNvmSe2On\b"
    assert _files_matching(flag) == [
        "src/backend/storage/buffer/nvm_buf.c",
        "src/include/storage/nvm_buf.h",
    ]
    header = _our_c_files()["src/include/storage/nvm_buf.h"]
    body = header[header.index("NvmSe2Active(void)") :]
    assert re.search(flag, body[: body.index("}")])
    assert [p for p, text in _patch_additions().items() if re.search(flag, text)] == []


def test_the_smgr_slot_has_one_name() -> None:
    bare = r"smgr_which\s*(?:[!=]=|=)\s*[0-9]|\?\s*1\s*:\s*0\b"
    assert _files_matching(bare) == []
    assert [p for p, text in _patch_additions().items() if re.search(bare, text)] == []
    header = _our_c_files()["src/include/storage/nvm_smgr.h"]
    assert re.search(r"#define NVM_SMGR_WHICH\s+1\b", header)
    smgr = _patch_additions()["0002-smgr-nvm-entry.patch"]
    assert "[NVM_SMGR_WHICH] = {" in smgr
    assert re.search(r"nvm_smgr_handles\(backend\)\s*\?\s*NVM_SMGR_WHICH\s*:\s*MD_SMGR_WHICH", smgr)


GUC_FILE = "src/backend/utils/misc/nvm_guc.c"


def _guc_tables_patches() -> dict[str, str]:
    """The lines each patch adds to guc_tables.c, by patch name (patches that add none
    left out)."""
    out = {}
    for path in sorted((POSTGRES / "patches").glob("*.patch")):
        sections = re.split(r"(?m)^(?=--- a/)", path.read_text())
        added = [
            line[1:]
            for s in sections
            if s.startswith("--- a/src/backend/utils/misc/guc_tables.c")
            for line in s.splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        if added:
            out[path.name] = "\n".join(added)
    return out


def test_the_settings_are_defined_in_one_file() -> None:
    patches = _guc_tables_patches()
    assert list(patches) == ["0001-nvm-storage-engine-guc.patch"]
    registered = patches["0001-nvm-storage-engine-guc.patch"]
    assert re.findall(r'#include "([^"]+)"', registered) == ["utils/nvm_guc.h"]
    variables = set(re.findall(r"^\s*&(nvm_[a-z_]+),", registered, re.M))
    tables = set(re.findall(r"\b(nvm_[a-z_]+_options)\b", registered))
    assert {"nvm_storage_engine", "nvm_prefetch", "nvm_wal"} <= variables
    assert {"nvm_storage_engine_options", "nvm_prefetch_options", "nvm_wal_options"} <= tables
    for name in sorted(variables):
        assert _files_matching(rf"^(?:int|bool|char\s*\*)\s*{name}\s*=") == [GUC_FILE], name
    for name in sorted(tables):
        assert _files_matching(rf"config_enum_entry\s+{name}\[\]\s*=") == [GUC_FILE], name
    assert _files_matching(r"config_enum_entry\s+\w+\[\]\s*=") == [GUC_FILE]


def test_nvm_verify_c_includes_nothing_above_it() -> None:
    text = _our_c_files()[VERIFY]
    includes = set(re.findall(r'#include "([^"]+)"', text))
    above = {"storage/nvm_buf.h", "storage/nvm_smgr.h", "storage/nvm_prefetch.h"}
    assert not includes & above, includes & above


SHMEM_FILE = "src/backend/storage/ipc/nvm_shmem.c"


def test_shared_memory_is_hooked_once() -> None:
    calls = r"\b(Nvm\w*Shmem(?:Size|Init))\(\)"
    hooked = [
        (name, call)
        for name, text in _patch_additions().items()
        for call in re.findall(calls, text)
    ]
    assert sorted(hooked) == [
        ("0014-nvm-shmem.patch", "NvmShmemInit"),
        ("0014-nvm-shmem.patch", "NvmShmemSize"),
    ]
    files = _our_c_files()
    parts = set(re.findall(calls, files[SHMEM_FILE])) - {"NvmShmemSize", "NvmShmemInit"}
    assert {"NvmBufShmemInit", "NvmStatsShmemInit", "NvmVerifyShmemInit"} <= parts
    definers = {
        name: path
        for path, text in files.items()
        for name in re.findall(r"(?m)^(Nvm\w*Shmem(?:Size|Init))\(void\)\n\{", text)
    }
    assert parts <= set(definers)
    for path, text in files.items():
        # a part is called by nvm_shmem.c, or by its own file: by nobody else
        strangers = {
            name
            for name in re.findall(calls, text)
            if path not in (SHMEM_FILE, definers.get(name))
            and not re.search(rf"(?m)^extern \w+ {name}\(void\);", text)
        }
        assert not strangers, (path, strangers)
    # ShmemInitStruct only inside the parts' Init functions
    for path, text in files.items():
        for m in re.finditer(r"\bShmemInitStruct\(", text):
            fn = re.findall(r"(?m)^(\w+)\(", text[: m.start()])[-1]
            assert re.fullmatch(r"Nvm\w*ShmemInit", fn), (path, fn)


def test_the_redirection_has_one_record() -> None:
    gone = "NVM_BUF_REDIRECTED"
    for path in sorted(POSTGRES.rglob("*")):
        if path.is_file() and path.suffix in (".c", ".h", ".patch"):
            assert gone not in path.read_text(errors="replace"), path.relative_to(POSTGRES)
    header = _our_c_files()["src/include/storage/nvm_buf.h"]
    byte_bits = set(re.findall(r"(?m)^#define (NVM_BUF_\w+)\s+0x", header))
    assert byte_bits == {"NVM_BUF_COW_RUNNING", "NVM_BUF_NO_DEMOTE"}
    # every test or change of a bit of the flag byte (or of a copy of it) names one of those
    named = r"(?:NvmBufferFlags\[[^\]]*\]|\bflags)\s*(?:&|\|)=?\s*~?(NVM_\w+)"
    sources = [*_patch_additions().values(), *_our_c_files().values()]
    uses = {m.group(1) for text in sources for m in re.finditer(named, text)}
    assert uses == byte_bits, uses
    defined = [
        name
        for name, text in _patch_additions().items()
        if re.search(r"#define BM_NVM_REDIRECTED\s+\(1U << 21\)", text)
    ]
    assert defined == ["0005-bufmgr-redirected-buffers.patch"]
    assert re.search(r"#define NVM_BM_REDIRECTED\s+\(1U << 21\)", header)
    assert _files_matching(r"StaticAssertDecl\(NVM_BM_REDIRECTED == BM_NVM_REDIRECTED") == [
        "src/backend/storage/buffer/nvm_buf.c"
    ]
