"""The stress check's workload and its oracle (pure logic).

Writers own disjoint groups and run fixed, seeded sequences of transactions, each of which
updates every row of one group (``v = v + 1``, sometimes a new ``pad`` too, which is
indexed, so the update cannot be HOT; sometimes rolled back). The final table therefore
depends only on the seed, not on how the writers, readers and VACUUM interleave: for each
group, v = initial + committed updates, pad = the one written by its last committed
non-HOT update. :func:`final_rows` renders it exactly as the server prints
``SELECT g, k, v, pad FROM stress ORDER BY g, k``.

Readers check the invariant that holds in every snapshot: within a group all rows have the
same v (min = max), the group has exactly its rows, and a later snapshot never shows a
group older than an earlier one did.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass

HOT = "hot"  # SET v = v + 1 (pad untouched: may be a HOT update)
NON_HOT = "nonhot"  # SET v = v + 1, pad = <new>: pad is indexed, never HOT
ABORT = "abort"  # SET v = v + 1, then ROLLBACK
KIND_WEIGHTS: tuple[tuple[str, float], ...] = ((HOT, 0.6), (NON_HOT, 0.3), (ABORT, 0.1))


@dataclass(frozen=True)
class Tx:
    group: int
    kind: str
    n: int  # unique over all writers: salts the new pad of a NON_HOT update


def initial_v(group: int) -> int:
    return group * 1_000_000


def pad_of(group: int, k: int, n: int | None) -> str:
    """The SQL ``repeat(md5(g || ':' || k [|| ':' || n]), 6)``."""
    key = f"{group}:{k}" if n is None else f"{group}:{k}:{n}"
    return hashlib.md5(key.encode()).hexdigest() * 6


def owned_groups(writer: int, writers: int, groups: int) -> list[int]:
    return [g for g in range(groups) if g % writers == writer]


def writer_plan(seed: int, writer: int, writers: int, groups: int, n_tx: int) -> list[Tx]:
    """The fixed transaction sequence of one writer."""
    rng = random.Random(f"{seed}:stress-writer:{writer}")
    mine = owned_groups(writer, writers, groups)
    kinds = [k for k, _ in KIND_WEIGHTS]
    weights = [w for _, w in KIND_WEIGHTS]
    return [
        Tx(rng.choice(mine), rng.choices(kinds, weights)[0], i * writers + writer)
        for i in range(n_tx)
    ]


@dataclass
class GroupState:
    v: int
    pad_n: int | None = None  # n of the last committed NON_HOT update; None: initial pad


def final_state(plans: list[list[Tx]], groups: int) -> dict[int, GroupState]:
    """Each group after every plan ran to its end."""
    state = {g: GroupState(initial_v(g)) for g in range(groups)}
    for plan in plans:
        for tx in plan:
            if tx.kind == ABORT:
                continue
            st = state[tx.group]
            st.v += 1
            if tx.kind == NON_HOT:
                st.pad_n = tx.n
    return state


def final_rows(state: dict[int, GroupState], rows_per_group: int) -> Iterator[tuple[str, ...]]:
    """The expected ``SELECT g, k, v, pad ORDER BY g, k`` as text rows."""
    for g in sorted(state):
        st = state[g]
        for k in range(1, rows_per_group + 1):
            yield (str(g), str(k), str(st.v), pad_of(g, k, st.pad_n))


def check_groups(
    rows: list[tuple[int, int | None, int | None, int]],
    rows_per_group: int,
    last_seen: dict[int, int],
    groups: int | None = None,
) -> list[str]:
    """Violations in one snapshot's ``(g, min(v), max(v), count(*))`` rows. ``groups``: the
    rows must cover exactly groups 0..groups-1 (a whole-table scan). ``last_seen`` (g -> v
    an earlier snapshot of the same reader showed) is updated."""
    out = []
    if groups is not None:
        got = sorted(r[0] for r in rows)
        if got != list(range(groups)):
            missing = sorted(set(range(groups)) - set(got))
            out.append(f"scan saw {len(got)} groups, expected {groups} (missing {missing[:10]})")
    for g, lo, hi, n in rows:
        if lo is None or hi is None:
            out.append(f"group {g}: no rows")
            continue
        if lo != hi:
            out.append(f"group {g}: half-updated, min(v)={lo} max(v)={hi}")
        if n != rows_per_group:
            out.append(f"group {g}: {n} rows, expected {rows_per_group}")
        prev = last_seen.get(g)
        if prev is not None and lo < prev:
            out.append(f"group {g}: went back in time, v={lo} after v={prev}")
        last_seen[g] = max(hi, prev if prev is not None else hi)
    return out
