"""How ``./pgnvm tpch`` runs each query (``--method``): when the server restarts, what is
prewarmed, which runs are discarded. :func:`schedule` turns a method into the ordered list
of runs the runner makes.

* ``cold`` (the default): every run restarts the server (cold shared buffers; a
  configuration with ``prewarm``, ``mem_limit``, is then prewarmed); configurations
  interleave per query and repetition.
* ``prewarm``: the in-memory limit's method for every configuration: every run restarts the
  server and ``pg_prewarm`` loads every table and index of the database before the query.
  Meant for configurations whose pool covers the database (``mem_limit``, ``*_wholedb``,
  or ``--shared-buffers`` large enough); the runner says which do not.
* ``warm``: one server start per configuration (and its prewarm if it has one); each query
  then runs once more than ``--repeat`` on fresh connections and the first run, the warm-up,
  is discarded (recorded with ``warmup``, answer checked, not in the statistics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar


@dataclass(frozen=True)
class Method:
    name: str
    restart_each_run: bool  # False: one start per configuration
    prewarm_all: bool  # pg_prewarm after every start, whatever the configuration
    warmup_runs: int  # runs of each query discarded before the measured ones
    doc: str  # what the report says it means


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "cold",
            True,
            False,
            0,
            "every run restarts the server (cold shared buffers; mem_limit is then "
            "prewarmed with pg_prewarm), then runs the query in a fresh connection",
        ),
        Method(
            "prewarm",
            True,
            True,
            0,
            "every run restarts the server and loads every table and index of the database "
            "with pg_prewarm (the in-memory limit's method, for any configuration), then runs "
            "the query in a fresh connection",
        ),
        Method(
            "warm",
            False,
            False,
            1,
            "one server start per configuration (mem_limit is then prewarmed); each query "
            "runs on fresh connections, a first warm-up run (discarded) then the measured "
            "repetitions",
        ),
    )
}
NAMES: tuple[str, ...] = tuple(METHODS)
DEFAULT = "cold"

C = TypeVar("C")


@dataclass(frozen=True)
class Step(Generic[C]):
    """One run: configuration, query, repetition (0: a discarded warm-up), and whether the
    server is restarted (and prewarmed, see :func:`prewarms`) before it."""

    config: C
    query: int
    rep: int
    restart: bool

    @property
    def warmup(self) -> bool:
        return self.rep < 1


def schedule(method: Method, configs: list[C], queries: list[int], repeat: int) -> list[Step[C]]:
    """The runs of ``method`` in order. Per-run restarts: for each repetition, for each query,
    every configuration in turn (drift hits all alike). One start per configuration: each
    configuration in turn, each query's warm-up run(s) then its ``repeat`` runs."""
    if method.restart_each_run:
        return [
            Step(c, q, rep, True) for rep in range(1, repeat + 1) for q in queries for c in configs
        ]
    out: list[Step[C]] = []
    for c in configs:
        for q in queries:
            for rep in range(1 - method.warmup_runs, repeat + 1):
                out.append(Step(c, q, rep, not out or out[-1].config is not c))
    return out


def order_text(method: Method) -> str:
    """The order of the runs as plan.json and the report state it."""
    if method.restart_each_run:
        return "for each repetition, for each query, every configuration in turn"
    return (
        "for each configuration (one server start), for each query: "
        f"{method.warmup_runs} warm-up run(s), discarded, then the repetitions"
    )


def prewarms(method: Method, config_prewarm: bool) -> bool:
    """Whether a start is followed by pg_prewarm of the whole database."""
    return method.prewarm_all or config_prewarm
