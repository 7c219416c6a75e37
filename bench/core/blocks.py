"""A report as blocks, rendered as Markdown and HTML (the reports of ``./pgnvm tpch`` and
``./pgnvm micro tablescan|bufman|logging|storage``), and numbers as reports print them.

A block is a tuple: ``("h1" | "h2" | "p", text)``, ``("img", file, title)`` or ``("table",
header, rows)``; ``**bold**`` and ``code`` in text become HTML.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

Block = tuple[Any, ...]


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    return f"{x:.{digits}f}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def num(x: float | None) -> str:
    if x is None:
        return "–"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def _md_table(hdr: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    esc = [[str(x).replace("|", "\\|").replace("\n", " ") for x in r] for r in rows]
    return [
        "| " + " | ".join(hdr) + " |",
        "|" + "---|" * len(hdr),
        *["| " + " | ".join(r) + " |" for r in esc],
        "",
    ]


#: Markdown of each kind of block.
MARKDOWN: dict[str, Callable[[Block], list[str]]] = {
    "h1": lambda b: [f"# {b[1]}\n"],
    "h2": lambda b: [f"## {b[1]}\n"],
    "p": lambda b: [f"{b[1]}\n"],
    "img": lambda b: [f"![{b[2]}]({b[1]})\n"],
    "table": lambda b: _md_table(b[1], b[2]),
}


def _inline(text: str) -> str:
    """``**bold**`` and ``code`` of a paragraph as HTML (the rest escaped)."""
    t = html.escape(text)
    parts = t.split("**")
    t = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = t.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html_table(hdr: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    return [
        "<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in hdr) + "</tr>",
        *["<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in r) + "</tr>" for r in rows],
        "</table>",
    ]


#: HTML of each kind of block.
HTML: dict[str, Callable[[Block], list[str]]] = {
    "h1": lambda b: [f"<h1>{html.escape(b[1])}</h1>"],
    "h2": lambda b: [f"<h2>{html.escape(b[1])}</h2>"],
    "p": lambda b: [f"<p>{_inline(b[1])}</p>"],
    "img": lambda b: [f"<p><img src='{html.escape(b[1])}' alt='{html.escape(b[2])}'></p>"],
    "table": lambda b: _html_table(b[1], b[2]),
}


def _render(blocks: Sequence[Block], kinds: dict[str, Callable[[Block], list[str]]]) -> list[str]:
    return [line for blk in blocks if blk[0] in kinds for line in kinds[blk[0]](blk)]


def to_markdown(blocks: Sequence[Block]) -> str:
    return "\n".join(_render(blocks, MARKDOWN)) + "\n"


def to_html(blocks: Sequence[Block], title: str) -> str:
    head = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto;"
        "padding:0 1em}table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}img{max-width:100%}"
        "code{background:#f3f3f3}</style></head><body>",
    ]
    return "\n".join([*head, *_render(blocks, HTML), "</body></html>"]) + "\n"
