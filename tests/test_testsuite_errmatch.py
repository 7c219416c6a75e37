from __future__ import annotations

from bench.testsuite.errmatch import (
    SHORT_READ_RE,
    ServerError,
    enospc_problem,
    headline,
    log_problems,
    normalise_message,
)

STOCK_EXTEND = (
    'could not extend file "pg_tblspc/16390/PG_18_202506291/5/16391": No space left on device'
)
STOCK_ZEROEXTEND = (
    'could not extend file "pg_tblspc/16390/PG_18_202506291/5/16391" with FileFallocate(): '
    "No space left on device"
)


def test_stock_enospc_messages_accepted() -> None:
    assert enospc_problem(ServerError("53100", STOCK_EXTEND)) is None
    short = 'could not extend file "base/5/1": wrote only 4096 of 8192 bytes at block 7'
    assert enospc_problem(ServerError("53100", short)) is None
    assert enospc_problem(ServerError("53100", STOCK_ZEROEXTEND)) is None


def test_enospc_requires_disk_full_sqlstate() -> None:
    p = enospc_problem(ServerError("58030", STOCK_EXTEND))
    assert p is not None and "58030" in p and "53100" in p


def test_enospc_requires_the_message() -> None:
    p = enospc_problem(ServerError("53100", 'could not write to file "x": No space left on device'))
    assert p is not None and "does not match" in p
    assert enospc_problem(ServerError("53100", 'could not extend file "x": Input/output error'))


def test_enospc_no_error_is_a_problem() -> None:
    assert enospc_problem(None) == "no error was raised"


def test_short_read_regex() -> None:
    msg = 'could not read blocks 200..200 in file "base/5/16384": read only 0 of 8192 bytes'
    assert SHORT_READ_RE.search(msg)
    assert not SHORT_READ_RE.search('could not read blocks 1..2 in file "x": Bad address')


def test_normalise_message_replaces_paths() -> None:
    msg = 'could not read blocks 200..200 in file "base/5/16384": read only 0 of 8192 bytes'
    assert (
        normalise_message(msg, {"base/5/16384": "<relfile>"})
        == 'could not read blocks 200..200 in file "<relfile>": read only 0 of 8192 bytes'
    )
    # a path nobody told us about is still made comparable; the numbers are kept
    assert normalise_message('could not open file "base/1/2": x 5') == (
        'could not open file "<file>": x 5'
    )
    a = normalise_message('file "base/5/16384" block 3', {"base/5/16384": "<r>"})
    b = normalise_message('file "base/7/24576" block 3', {"base/7/24576": "<r>"})
    assert a == b
    assert normalise_message('file "base/5/1" block 3') != normalise_message('file "x" block 4')


def test_log_problems() -> None:
    log = "\n".join(
        [
            "2025-01-01 00:00:00 UTC [10] LOG:  database system is ready to accept connections",
            "2025-01-01 00:00:01 UTC [11] ERROR:  could not extend file: No space left on device",
            "2025-01-01 00:00:02 UTC [10] LOG:  server process (PID 12) was terminated by "
            "signal 7: Bus error",
            "2025-01-01 00:00:03 UTC [13] PANIC:  could not write to file",
            'TRAP: failed Assert("x"), File: "md.c", Line: 1, PID: 14',
            "2025-01-01 00:00:04 UTC [10] LOG:  server process (PID 15) exited with exit code 1",
            '2025-01-01 00:00:05 UTC [10] LOG:  background worker "x" (PID 16) exited with exit '
            "code 0",
        ]
    )
    found = log_problems(log)
    assert len(found) == 4
    assert "signal 7" in found[0] and "PANIC" in found[1] and found[2].startswith("TRAP")
    assert "exit code 1" in found[3]
    assert log_problems("LOG:  checkpoint complete\nERROR:  relation does not exist\n") == []


def test_headline_prefers_the_refused_setting() -> None:
    initdb = "\n".join(
        [
            "creating configuration files ... ok",
            "running bootstrap script ... 2026-11-21 00:03:11.527 GMT [28270] LOG:  "
            'invalid value for parameter "nvm_storage_engine": "se2"',
            '2026-11-21 00:03:11.527 GMT [28270] DETAIL:  Storage engine "se2" is not available.',
            '2026-11-21 00:03:11.530 UTC [28270] FATAL:  configuration file "x" contains errors',
            'initdb: removing data directory "x"',
        ]
    )
    assert headline(initdb) == (
        'invalid value for parameter "nvm_storage_engine": "se2" '
        '(Storage engine "se2" is not available.)'
    )
    stock = (
        'LOG:  unrecognized configuration parameter "nvm_storage_engine" in file "x" line 3\n'
        "FATAL:  configuration file contains errors\n"
    )
    assert headline(stock) == (
        'unrecognized configuration parameter "nvm_storage_engine" in file "x" line 3'
    )


def test_headline_falls_back_to_fatal_then_first_line() -> None:
    assert headline("waiting\n[1] FATAL:  could not map file\nmore") == (
        "FATAL: could not map file"
    )
    assert headline("\n  plain failure\nsecond") == "plain failure"
    assert headline("") == ""
