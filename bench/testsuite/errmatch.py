"""Matching of server errors and server-log problems (pure logic)."""

from __future__ import annotations

import re
from dataclasses import dataclass

DISK_FULL = "53100"
DATA_CORRUPTED = "XX001"

# PostgreSQL 18 md.c, all with SQLSTATE 53100 for ENOSPC:
#   mdextend():     "could not extend file \"%s\": %m"
#                   "could not extend file \"%s\": wrote only %d of %d bytes at block %u"
#   mdzeroextend(): "could not extend file \"%s\" with FileFallocate(): %m" / "...: %m"
# where %m for ENOSPC is "No space left on device".
ENOSPC_RE = re.compile(
    r'could not extend file "[^"]+"(?: with FileFallocate\(\))?: '
    r"(?:No space left on device|wrote only \d+ of \d+ bytes at block \d+)"
)

# md.c mdreadv()/md_readv_report():
#   "could not read blocks %u..%u in file \"%s\": read only %zu of %zu bytes"
SHORT_READ_RE = re.compile(
    r'could not read blocks? \d+(?:\.\.\d+)? in file "[^"]+": read only \d+ of \d+ bytes'
)

_FILE_RE = re.compile(r'(file|directory) "[^"]*"')


@dataclass(frozen=True)
class ServerError:
    sqlstate: str
    message: str

    def __str__(self) -> str:
        return f"SQLSTATE {self.sqlstate}: {self.message}"


def enospc_problem(err: ServerError | None) -> str | None:
    """Why ``err`` is not the expected out-of-space error, or None if it is."""
    if err is None:
        return "no error was raised"
    problems = []
    if err.sqlstate != DISK_FULL:
        problems.append(f"SQLSTATE {err.sqlstate}, expected {DISK_FULL} (disk_full)")
    if not ENOSPC_RE.search(err.message):
        problems.append(f"message {err.message!r} does not match {ENOSPC_RE.pattern!r}")
    return "; ".join(problems) or None


def normalise_message(message: str, replacements: dict[str, str] | None = None) -> str:
    """Make an error message comparable across clusters.

    Relation file paths differ between clusters (database OID, relfilenode),
    so each given path is replaced by its placeholder, then any remaining
    quoted file name by ``"<file>"``.
    """
    out = message
    for path, placeholder in sorted((replacements or {}).items(), key=lambda kv: -len(kv[0])):
        out = out.replace(path, placeholder)
    return _FILE_RE.sub(
        lambda m: f'{m.group(1)} "<file>"' if "<" not in m.group(0) else m.group(0), out
    )


_LOG_PROBLEM_RE = re.compile(
    r"^.*(?:\bPANIC:|terminated by signal|was terminated by exception|TRAP: |"
    r"server process \(PID \d+\) exited with exit code [^0]).*$",
    re.MULTILINE,
)


def log_problems(log_text: str) -> list[str]:
    """Server log lines that show a crash: PANIC, a backend killed by a signal, a TRAP."""
    return [m.group(0).strip() for m in _LOG_PROBLEM_RE.finditer(log_text)]


_LEVEL_RE = re.compile(r"\b(LOG|FATAL|PANIC|ERROR|DETAIL|HINT):\s+(.*)$")
_CONFIG_PROBLEMS = ("invalid value for parameter", "unrecognized configuration parameter")


def headline(text: str) -> str:
    """The one line of a failure's output that says why (for a summary line).

    A setting the server refuses beats everything (plus its DETAIL), then the first
    FATAL/PANIC/ERROR, then the first non-empty line; log prefixes are dropped.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    parsed = [(_LEVEL_RE.search(ln), ln) for ln in lines]
    for i, (m, ln) in enumerate(parsed):
        if any(p in ln for p in _CONFIG_PROBLEMS):
            out = m.group(2) if m else ln
            nxt = parsed[i + 1][0] if i + 1 < len(parsed) else None
            if nxt and nxt.group(1) == "DETAIL":
                out += f" ({nxt.group(2)})"
            return out
    for m, _ in parsed:
        if m and m.group(1) in ("FATAL", "PANIC", "ERROR"):
            return f"{m.group(1)}: {m.group(2)}"
    return lines[0] if lines else ""
