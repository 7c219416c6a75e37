"""data_pmem's checkpoint protocol against a model of the checkpointer's statistics.

The checkpointer signals a CHECKPOINT's completion first and reports that checkpoint's
I/O to pg_stat_io afterwards, at the top of its main loop (checkpointer.c); a backend
that resets pg_stat_io right after CHECKPOINT returns can come before the report (CI,
2026-11-25: the load checkpoint's 27 fsyncs counted together with the 6 traced ones).
The model below takes the worst schedule: a report is made only when the checkpointer
takes its next request.
"""

from __future__ import annotations

from typing import Any

from bench.testsuite.checks import data_pmem


class _Checkpointer:
    """A connection whose CHECKPOINT behaves as checkpointer.c schedules it, reporting late."""

    def __init__(self) -> None:
        self.dirty_relations = 0  # fsync requests the next checkpoint will absorb
        self.pending = 0  # fsyncs done, not yet reported
        self.reported = 0  # pg_stat_io's count
        self._last: Any = None

    def execute(self, sql: str, args: Any = None) -> _Checkpointer:
        if sql == "CHECKPOINT":
            self.reported += self.pending  # the previous checkpoint's report
            self.pending = self.dirty_relations  # this one's fsyncs, reported later
            self.dirty_relations = 0
        elif sql == "SELECT pg_stat_reset_shared('io')":
            self.reported = 0
        elif sql == data_pmem._IO_REL_FSYNCS:
            self._last = (self.reported,)
        else:
            raise AssertionError(f"unexpected SQL {sql!r}")
        return self

    def fetchone(self) -> Any:
        return self._last


def _traced_checkpoint(settle: Any) -> int:
    """The load, ``settle``, the reset, the traced checkpoint (6 fsyncs) and its report:
    what pg_stat_io counts for the traced checkpoint."""
    c = _Checkpointer()
    c.dirty_relations = 27  # the table's creation and load
    settle(c)
    c.execute("SELECT pg_stat_reset_shared('io')")
    c.dirty_relations = 6  # the update and the VACUUM
    c.execute("CHECKPOINT")
    c.reported += c.pending  # the report, some time later
    c.pending = 0
    return int(data_pmem._value(c, data_pmem._IO_REL_FSYNCS))


def test_after_checkpoint_settled_the_counts_are_the_traced_checkpoints_only() -> None:
    assert _traced_checkpoint(data_pmem.checkpoint_settled) == 6


def test_the_model_shows_the_race_of_a_plain_checkpoint() -> None:
    # the control: with one CHECKPOINT before the reset its report lands after the reset
    assert _traced_checkpoint(lambda c: c.execute("CHECKPOINT")) == 27 + 6
