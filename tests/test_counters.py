"""pgnvm's counters: the one Python list (bench/core/counters.py) against the one C list
(the X-macro NVM_STATS_COUNTERS of postgres/src/include/storage/nvm_stats.h)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.core import counters, paths

HEADER = paths.REPO_ROOT / "postgres" / "src" / "include" / "storage" / "nvm_stats.h"
#: a line of the X-macro list: <tab>X(name, "description") \
X_LINE = re.compile(r'^\tX\((?P<name>[a-z_][a-z0-9_]*), "(?P<doc>[^"]*)"\)\s*\\?$')


def header_counters(text: str) -> list[tuple[str, str]]:
    """(name, description) of every X(...) line of ``#define NVM_STATS_COUNTERS(X)``."""
    m = re.search(r"^#define NVM_STATS_COUNTERS\(X\)\s*\\\n((?:.*\\\n)*.*)$", text, re.M)
    if m is None:
        raise AssertionError("no #define NVM_STATS_COUNTERS(X) in the header")
    out = []
    for line in m.group(1).splitlines():
        if not line.strip() or line.strip() == "\\":
            continue
        x = X_LINE.match(line)
        if x is None:
            raise AssertionError(f'not an X(name, "description") line: {line!r}')
        out.append((x["name"], x["doc"]))
    return out


SAMPLE = """\
/* nvm_stats.h */
#define NVM_STATS_COUNTERS(X) \\
\tX(mapped_reads, "blocks copied from a mapping (se1, se2)") \\
\tX(redirects, "buffer misses served by redirection") \\
\tX(prefetch_dropped, "jobs dropped: helper queue full")

typedef struct NvmStatsSlot { ... } NvmStatsSlot;
"""


def test_header_parser_on_a_sample() -> None:
    assert header_counters(SAMPLE) == [
        ("mapped_reads", "blocks copied from a mapping (se1, se2)"),
        ("redirects", "buffer misses served by redirection"),
        ("prefetch_dropped", "jobs dropped: helper queue full"),
    ]
    with pytest.raises(AssertionError, match="no #define"):
        header_counters("/* nothing */")


def test_python_counters_match_the_c_definition() -> None:
    names = [n for n, _ in header_counters(HEADER.read_text())]
    assert len(names) == len(set(names)), names
    assert tuple(names) == counters.COUNTERS


def test_one_list_of_names() -> None:
    assert len(counters.COUNTERS) == len(set(counters.COUNTERS))
    assert {"mapped_reads", "redirects", "cow_copies", "prefetch_jobs"} <= set(counters.COUNTERS)
    d = counters.delta(dict.fromkeys(counters.COUNTERS, 1), dict.fromkeys(counters.COUNTERS, 3))
    assert list(d) == list(counters.COUNTERS) and set(d.values()) == {2}


def test_the_header_is_where_the_docs_say() -> None:
    assert str(Path(*HEADER.parts[-4:])) == "src/include/storage/nvm_stats.h"
    assert "nvm_stats.h" in (counters.__doc__ or "")


# --------------------------------------------------------------------------- one run's delta


def _readings(base: int, **grown: int) -> dict[str, int]:
    """Counters as pgnvm_counters() gives them: every counter at ``base`` but ``grown``."""
    vals = dict.fromkeys((*counters.COUNTERS, *counters.DERIVED), base)
    vals.update(grown)
    return vals


#: pgnvm_pool() before and after (part of its columns)
POOL0 = {
    "demotions": 5,
    "slot_evictions": 2,
    "slot_writes": 0,
    "cleaner_writes": 20,
    "cleaner_demotions": 1,
    "slots_in_use_peak": 10,
    "slots": 100,
}
POOL1 = {
    **POOL0,
    "demotions": 9,
    "slot_writes": 3,
    "cleaner_writes": 70,
    "slots_in_use_peak": 12,
}


def test_run_delta_counts_what_grew_in_the_interval() -> None:
    before = _readings(1000, redirects=40_000, views_kept=7)
    after = _readings(1000, redirects=52_345, views_kept=107, verified_by_backend=1003)
    d = counters.run_delta((before, POOL0), (after, POOL1))
    assert d is not None
    assert (d["redirects"], d["views_kept"], d["verified_by_backend"]) == (12_345, 100, 3)
    assert d["cow_copies"] == 0 and d["bytes_not_copied"] == 0
    # the slot clock: differences; the peak and the budget as they are after
    assert {k: d[k] for k in (*counters.POOL_COUNTERS, *counters.POOL_LEVELS)} == {
        "demotions": 4,
        "slot_evictions": 0,
        "slot_writes": 3,
        "cleaner_writes": 50,
        "cleaner_demotions": 0,
        "slots_in_use_peak": 12,
        "slots": 100,
    }
    pool = (*counters.POOL_COUNTERS, *counters.POOL_LEVELS)
    assert set(d) == {*counters.COUNTERS, *counters.DERIVED, *pool}


def test_run_delta_without_the_extension_or_the_pool() -> None:
    c = _readings(3)
    # no extension (or a reading that failed): nothing, not zeros
    assert counters.run_delta((None, None), (None, None)) is None
    assert counters.run_delta((c, POOL0), (None, POOL1)) is None
    # pgnvm < 1.6 has no pgnvm_pool(): the counters alone
    d = counters.run_delta((c, None), (_readings(3, redirects=8), None))
    assert d is not None and d["redirects"] == 5 and "demotions" not in d


def test_run_delta_of_a_pool_before_pgnvm_1_8() -> None:
    """pgnvm 1.6/1.7's pgnvm_pool() has no background writer's counters: absent, not 0."""
    old0 = {k: v for k, v in POOL0.items() if not k.startswith("cleaner_")}
    old1 = {k: v for k, v in POOL1.items() if not k.startswith("cleaner_")}
    d = counters.run_delta((_readings(3), old0), (_readings(3), old1))
    assert d is not None and d["slot_writes"] == 3
    assert "cleaner_writes" not in d and "cleaner_demotions" not in d
