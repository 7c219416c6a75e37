"""Console output helpers (rich when available, plain text otherwise)."""

from __future__ import annotations

import sys
from collections import deque
from pathlib import Path

try:
    from rich.console import Console

    console: Console | None = Console(stderr=True, highlight=False, soft_wrap=True)
except ImportError:  # pragma: no cover - the venv always has rich
    console = None


def _out(msg: str, style: str | None) -> None:
    if console is not None:
        console.print(msg, style=style, markup=False)
    else:
        print(msg, file=sys.stderr, flush=True)


def info(msg: str) -> None:
    _out(f"pgnvm: {msg}", None)


def step(msg: str) -> None:
    _out(f"==> {msg}", "bold cyan")


def notice(msg: str) -> None:
    _out(f"pgnvm: NOTICE: {msg}", "yellow")


def error(msg: str) -> None:
    _out(f"pgnvm: error: {msg}", "bold red")


def tail(path: Path, lines: int = 40, start: int = 0) -> str:
    """Last ``lines`` lines of ``path`` (from byte offset ``start``); '' if unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            dq = deque(f, maxlen=lines)
    except OSError:
        return ""
    return b"".join(dq).decode("utf-8", "replace")


def show_tail(path: Path, lines: int = 40, start: int = 0) -> None:
    text = tail(path, lines, start)
    if not text:
        return
    _out(f"----- last {lines} lines of {path} -----", "dim")
    print(text.rstrip("\n"), file=sys.stderr, flush=True)
    _out("-----", "dim")


def fmt_seconds(s: float) -> str:
    s = round(s)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s"
