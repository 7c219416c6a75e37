"""Where things live in our C files (issue 22 item 8), checked on the source.

* The helpers' verification has one file, ``storage/smgr/nvm_verify.c``: the verdict
  table, the write generation and the verdict epoch are defined there and nowhere
  else, no other file relays a verdict (no function of ``nvm_smgr.c`` or
  ``nvm_prefetch.c`` returns one).
* "se2 is on" has one name, ``NvmSe2Active()`` (storage/nvm_buf.h): no other file, and no
  line a patch adds, tests ``NvmBufferPages`` against NULL.
* The storage manager's slot in smgr.c's ``smgrsw[]`` has one name, ``NVM_SMGR_WHICH``
  (storage/nvm_smgr.h), used by the table's entry, by the code that picks it and by
  ``nvm_smgr.c``'s own tests of ``smgr_which``: no bare number.
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
    null_test = r"NvmBufferPages\s*[!=]=\s*NULL"
    assert _files_matching(null_test) == ["src/include/storage/nvm_buf.h"]
    header = _our_c_files()["src/include/storage/nvm_buf.h"]
    body = header[header.index("NvmSe2Active(void)") :]
    assert re.search(null_test, body[: body.index("}")])
    assert [p for p, text in _patch_additions().items() if re.search(null_test, text)] == []


def test_the_smgr_slot_has_one_name() -> None:
    bare = r"smgr_which\s*(?:[!=]=|=)\s*[0-9]|\?\s*1\s*:\s*0\b"
    assert _files_matching(bare) == []
    assert [p for p, text in _patch_additions().items() if re.search(bare, text)] == []
    header = _our_c_files()["src/include/storage/nvm_smgr.h"]
    assert re.search(r"#define NVM_SMGR_WHICH\s+1\b", header)
    smgr = _patch_additions()["0002-smgr-nvm-entry.patch"]
    assert "[NVM_SMGR_WHICH] = {" in smgr
    assert re.search(r"nvm_smgr_handles\(backend\)\s*\?\s*NVM_SMGR_WHICH\s*:\s*MD_SMGR_WHICH", smgr)
