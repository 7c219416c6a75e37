"""The workloads as pgbench scripts: YCSB core workloads A, B, C, F on YCSB's ``usertable``
and TPC-B (pgbench's built-in ``tpcb-like``).

YCSB operations are separate pgbench scripts chosen by weight (``-f read.sql@50 -f
update.sql@50``), so pgbench's per-transaction log says which operation each transaction was
(its ``script_no``) and latencies are reported per operation.

Key choice (:data:`DISTRIBUTIONS`):

* ``zipfian``: ``permute(random_zipfian(0, records - 1, 1.001), records) + 1``. YCSB's
  scrambled zipfian draws a zipfian rank with θ = 0.99 and hashes it over the key space so
  that hot keys are not neighbours. pgbench's ``random_zipfian`` accepts only s ≥ 1.001, so
  the rank follows P(rank i) ∝ 1 / i^1.001 (the closest pgbench can express; θ = 0.99 and
  1.001 give nearly the same skew), and pgbench's ``permute()`` (a keyed pseudo-random
  permutation, seeded by ``--random-seed``) scatters the ranks over the keys.
* ``uniform``: ``random(1, records)``.

Every run uses the same ``--random-seed``, so the hot keys are the same keys in every
configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: pgbench's smallest zipfian parameter (random_zipfian refuses s < 1.001)
ZIPF_S = "1.001"
YCSB_THETA = "0.99"
FIELDS = 10  # field0 .. field9
FIELD_LEN = 100
TABLE = "usertable"
#: --random-seed of every pgbench run (the permutation and the key sequence are reproducible)
RANDOM_SEED = 20261122

DISTRIBUTIONS: dict[str, str] = {
    "zipfian": (
        f"scrambled zipfian: permute(random_zipfian(0, records-1, s={ZIPF_S}), records) + 1 "
        f"(YCSB: θ = {YCSB_THETA}; pgbench's random_zipfian needs s ≥ {ZIPF_S}; "
        f"permute() seeded with --random-seed {RANDOM_SEED})"
    ),
    "uniform": "uniform: random(1, records)",
}


def key_expr(distribution: str) -> str:
    """The pgbench expression of the key (1 .. :records)."""
    if distribution == "zipfian":
        return f"permute(random_zipfian(0, :records - 1, {ZIPF_S}), :records) + 1"
    if distribution == "uniform":
        return "random(1, :records)"
    raise ValueError(f"unknown distribution {distribution!r}")


_ALL_FIELDS = ", ".join(f"field{i}" for i in range(FIELDS))
#: A new 100-byte value from an integer (md5 hex repeated): computed in the server, so the
#: statement stays prepared with integer parameters only.
_NEW_VALUE = f"substr(repeat(md5(:v::text), 4), 1, {FIELD_LEN})"

OPS: dict[str, str] = {
    "read": f"SELECT {_ALL_FIELDS} FROM {TABLE} WHERE ycsb_key = :k;\n",
    # PostgreSQL writes a whole new row version on any update (MVCC), so which one field
    # changes does not matter for the cost: field1 stands for YCSB's random field
    "update": "\\set v random(0, 2147483647)\n"
    f"UPDATE {TABLE} SET field1 = {_NEW_VALUE} WHERE ycsb_key = :k;\n",
    "rmw": "\\set v random(0, 2147483647)\n"
    "BEGIN;\n"
    f"SELECT {_ALL_FIELDS} FROM {TABLE} WHERE ycsb_key = :k;\n"
    f"UPDATE {TABLE} SET field1 = {_NEW_VALUE} WHERE ycsb_key = :k;\n"
    "END;\n",
}


@dataclass(frozen=True)
class Workload:
    name: str  # as --workloads names it
    title: str
    mix: tuple[tuple[str, int], ...]  # (operation, weight); empty: pgbench's built-in
    builtin: str | None = None  # pgbench -b NAME

    @property
    def ycsb(self) -> bool:
        return self.builtin is None

    def describe(self) -> str:
        if self.builtin:
            return f"{self.title} (pgbench -b {self.builtin}, its own uniform keys)"
        return f"{self.title}: " + " / ".join(f"{w}% {op}" for op, w in self.mix)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("a", "YCSB-A (update heavy)", (("read", 50), ("update", 50))),
        Workload("b", "YCSB-B (read mostly)", (("read", 95), ("update", 5))),
        Workload("c", "YCSB-C (read only)", (("read", 100),)),
        Workload("f", "YCSB-F (read-modify-write)", (("read", 50), ("rmw", 50))),
        Workload("tpcb", "TPC-B", (), builtin="tpcb-like"),
    )
}
#: the workload of the memory-ratio (anti-caching) experiment: paper 003's 50/50 zipfian
MEMORY_WORKLOAD = "a"


def script_text(op: str, distribution: str) -> str:
    """One operation's pgbench script."""
    return f"\\set k {key_expr(distribution)}\n" + OPS[op]


def write_scripts(w: Workload, distribution: str, directory: Path) -> list[str]:
    """Write ``w``'s scripts into ``directory``; returns pgbench's script arguments
    (``-f FILE@WEIGHT ...`` or ``-b NAME``)."""
    if w.builtin:
        return ["-b", w.builtin]
    directory.mkdir(parents=True, exist_ok=True)
    args = []
    for op, weight in w.mix:
        f = directory / f"ycsb-{op}-{distribution}.sql"
        f.write_text(script_text(op, distribution))
        args += ["-f", f"{f}@{weight}"]
    return args


def script_names(w: Workload) -> list[str]:
    """The operations by pgbench's script_no (0, 1, ...)."""
    return [op for op, _ in w.mix] if w.mix else [w.builtin or "builtin"]
