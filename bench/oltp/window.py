"""What a point's measured window wrote to WAL, and when its warm-up is long enough.

Every point starts after a restart and a ``CHECKPOINT``: the first change of each page after
it writes a full-page image (FPI, ``full_page_writes = on``). In a short run the share of
the measured window that still pays these first-touch FPIs depends on how far the warm-up
got, and a checkpoint inside the window (``max_wal_size`` reached) starts them over: TPC-B's
WAL per transaction varied 3x between repetitions of one point in
docs/results/oltp-wal-20261126 (FPI per transaction 0.30-1.07, 0-3 checkpoints per window).

The method (docs/oltp.md, "The measured window"):

* the warm-up lasts at least ``--warmup`` seconds, then goes on in slices of
  :data:`SLICE_S` seconds until a slice writes at most ``--fpi-settled`` FPIs per
  transaction (:func:`settled`), or ``--warmup-max`` seconds are spent (the point is then
  flagged ``warmup_settled: false``);
* the window is summarised from pg_stat_wal / pg_stat_checkpointer deltas
  (:func:`summary`): records, FPIs and bytes per transaction, and the checkpoints that
  started or completed within it; a window with a checkpoint is flagged (:func:`flags`) and
  the report says so next to its WAL per transaction.

The same rule, threshold and settings apply to every configuration.
"""

from __future__ import annotations

from typing import Any

#: seconds of one warm-up slice after the minimum warm-up
SLICE_S = 5.0
#: default --fpi-settled: FPIs per transaction a warm-up slice may write and count as past
#: the first-touch FPIs (0.05 x 8 KB ~ 400 B/txn; TPC-B's WAL without FPIs is ~900 B/txn)
DEFAULT_FPI_SETTLED = 0.05
#: default --warmup-max, seconds
DEFAULT_WARMUP_MAX = 120.0


def slice_seed(base: int, i: int) -> int:
    """``--random-seed`` of warm-up slice ``i`` (0, 1, ...): a sequence of keys of its own
    (``base`` + 1 + i), not the measured window's (``base``). With one seed for all,
    every slice replayed the keys of the first and the window those of the warm-up: a 5 s
    slice after a 10 s one wrote 0.0 FPIs per transaction (every page it touched was touched
    already), and the window wrote its first-touch FPIs once past the warm-up's keys."""
    return base + 1 + i


#: pg_stat_checkpointer counters of checkpoints (timed or requested) started, and done
_STARTED = ("num_timed", "num_requested")
_DONE = "num_done"


def fpi_per_txn(wal_delta: dict[str, float], transactions: float) -> float | None:
    """FPIs per transaction of a pg_stat_wal delta (None without transactions)."""
    if transactions <= 0 or "wal_fpi" not in wal_delta:
        return None
    return wal_delta["wal_fpi"] / transactions


def settled(slice_fpi_per_txn: float | None, threshold: float) -> bool:
    """Whether a warm-up slice that wrote ``slice_fpi_per_txn`` FPIs per transaction is
    past the first-touch FPIs: at most ``threshold`` (a slice without transactions is
    not)."""
    return slice_fpi_per_txn is not None and slice_fpi_per_txn <= threshold


def next_slice(
    spent: float, last_fpi_per_txn: float | None, minimum: float, maximum: float, threshold: float
) -> float | None:
    """Seconds of the next warm-up slice, or None when the warm-up is over: the first slice
    is the minimum (``--warmup``); after it the warm-up ends once the last slice
    :func:`settled` or ``maximum`` (``--warmup-max``) seconds are spent, else goes on by
    :data:`SLICE_S` (the last slice cut to the maximum)."""
    if spent < minimum:
        return minimum - spent
    if spent > 0 and settled(last_fpi_per_txn, threshold):
        return None
    if spent >= maximum:
        return None
    return min(SLICE_S, maximum - spent)


def checkpoints(ckpt_delta: dict[str, float]) -> dict[str, int]:
    """Checkpoints started (timed + requested) and completed in a pg_stat_checkpointer
    delta."""
    return {
        "started": int(sum(ckpt_delta.get(k, 0) for k in _STARTED)),
        "done": int(ckpt_delta.get(_DONE, 0)),
    }


def summary(stats: dict[str, Any], transactions: int) -> dict[str, Any]:
    """The measured window of a point from :func:`bench.oltp.runner.stats_delta`'s
    ``stats``: pg_stat_wal's records, FPIs and bytes (and per transaction), the WAL
    position's advance, and the checkpoints within it."""
    wal = stats.get("wal") or {}
    out: dict[str, Any] = {
        "transactions": transactions,
        "wal_records": int(wal.get("wal_records", 0)),
        "wal_fpi": int(wal.get("wal_fpi", 0)),
        "wal_bytes": int(wal.get("wal_bytes", 0)),
        "lsn_bytes": stats.get("wal_bytes"),
        "checkpoints": checkpoints(stats.get("checkpointer") or {}),
    }
    for k in ("wal_records", "wal_fpi", "wal_bytes"):
        out[f"{k}_per_txn"] = round(out[k] / transactions, 3) if transactions else None
    return out


def flags(
    window: dict[str, Any], warmup: dict[str, Any] | None, started_before: int = 0
) -> list[str]:
    """Why a point's window is not comparable with the steady state, if it is not: a
    checkpoint started or completed within it, a warm-up that did not settle, or
    ``started_before`` checkpoints that started between the point's CHECKPOINT and the
    window (after the pre-touch, :mod:`bench.oltp.pretouch`, or in the warm-up):
    each one starts the first-touch FPIs over."""
    out = []
    if started_before:
        out.append(
            f"{started_before} checkpoint(s) started after the point's CHECKPOINT, before the "
            "window (first-touch FPIs start over)"
        )
    c = window.get("checkpoints") or {}
    if c.get("started") or c.get("done"):
        out.append(
            f"checkpoint in the window ({c.get('started', 0)} started, {c.get('done', 0)} done)"
        )
    if warmup is not None and not warmup.get("settled", True):
        out.append(
            f"warm-up did not settle in {warmup.get('seconds')} s "
            f"(last slice {warmup.get('last_fpi_per_txn')} FPI/txn > {warmup.get('threshold')})"
        )
    return out
