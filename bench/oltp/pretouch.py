"""The pre-touch of TPC-B's and YCSB's updating points: the first-touch full-page images
written before the warm-up.

Every point starts right after a ``CHECKPOINT``; with ``full_page_writes = on`` the first
change of each page after it writes a full-page image (FPI). TPC-B (pgbench's
``tpcb-like``) updates ``pgbench_accounts`` rows chosen uniformly, so the first touches are
spread over all its pages and the FPI-settled warm-up (:mod:`bench.oltp.window`) does not
settle at the job's sizes: 0.16-0.31 FPI per transaction after 45 s at 1 client, and tps
followed the FPI rate more than the configuration
(docs/results/oltp-wal-placed-20261127: pairs 1.14, 0.84, 0.99 pmem/file WAL). YCSB's
zipfian keys were thought to settle in the warm-up, and there they did
(docs/results/oltp-tpcbmethod-20261126); but its scrambled keys (``permute()``) spread even
the hot set over usertable's pages, and at 2M records, 8 clients and ``--memory-ratios
1/2,1/128`` half the YCSB-A windows started unsettled (0.045-0.065 FPI/txn after the 30 s
warm-up limit, window 0.011-0.020) with tps following the FPI rate (29-40k for one
configuration; docs/results/hybrid-hitpath-20261127, oltp2m). So every workload that
updates (TPC-B, YCSB-A, B, F) is pre-touched; YCSB-C only reads.

The pre-touch takes all of them at once, for every configuration alike
(docs/oltp.md, "The measured window"):

1. **Before** the point's ``CHECKPOINT``: ``VACUUM`` of the touched tables
   (:func:`vacuum_sql`). Each pre-touch leaves one dead row version per page, the
   workload many more; without it the tables would grow from point to point (new versions
   that find no room on their page go to another page, at the end of the table when no page
   has room) and the next pre-touch would find fewer pages with room for a HOT update.
   VACUUM makes that space free again, so the tables stay the size of the workload's own
   churn. It runs before the CHECKPOINT, so its own changes (pruning, hint bits, the
   visibility map) are behind the checkpoint's redo point; never between the pre-touch and
   the window, where it would add its own work and page changes to what the window finds.
2. **After** the ``CHECKPOINT``: one ``UPDATE`` per table that sets a column to itself in
   exactly one row of every heap page that holds a live row (:func:`update_sql`). The row of
   a page is chosen by its ``ctid`` (the smallest of the page), not by a key predicate such
   as ``aid % 40 = 0``: a key predicate hits every page only while the keys lie on the pages
   in order and more densely than its modulus (about 61 accounts per 8 kB page at
   fillfactor 100 when loaded), and TPC-B's non-HOT updates move rows to other pages over
   the points of a run; ``ctid`` hits each page exactly once, whatever the rows per page.
   The update writes the page's FPI, and the index and visibility-map pages it changes get
   theirs too. Pages with no live row (emptied by VACUUM) are not touched; the record says
   how many there were.

The existing FPI-settled warm-up follows as before. The workloads differ only in their
table list (:data:`TABLES`): TPC-B's three tables, and for YCSB's updating workloads
``usertable``, whose ``field1`` (the field the workload updates; not indexed, so with
fillfactor 80 the update may be HOT) is set to itself. ``--no-pretouch`` turns it off for
all of them (neither the VACUUM nor the UPDATE run: the method of before).
"""

from __future__ import annotations

import re
from typing import Any

from bench.oltp import workloads

#: TPC-B's tables and the column the pre-touch sets to itself (pgbench's balances: not
#: indexed, so the update may be HOT)
TPCB_TABLES: tuple[tuple[str, str], ...] = (
    ("pgbench_accounts", "abalance"),
    ("pgbench_branches", "bbalance"),
    ("pgbench_tellers", "tbalance"),
)
#: YCSB's: usertable and the field its updates change (not indexed)
YCSB_TABLES: tuple[tuple[str, str], ...] = ((workloads.TABLE, "field1"),)
#: per workload that updates: the tables whose every heap page the pre-touch modifies, and
#: the column it sets to itself. YCSB's workloads with an operation other than a read (A, B,
#: F; not C)
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "tpcb": TPCB_TABLES,
    **{
        name: YCSB_TABLES
        for name, w in workloads.WORKLOADS.items()
        if w.ycsb and any(op != "read" for op, _ in w.mix)
    },
}
#: why a workload without an entry in :data:`TABLES` is not pre-touched
NOT_NEEDED = "read-only: it updates no row (the pre-touch is for the workloads that do)"
OFF = "--no-pretouch"

#: a server log line of a checkpoint that starts (``log_checkpoints = on``, every config)
_CHECKPOINT_STARTING = re.compile(r"\bcheckpoint starting:")


def applies(workload: str, enabled: bool) -> bool:
    """Whether a point of ``workload`` is pre-touched (``enabled``: not ``--no-pretouch``)."""
    return enabled and workload in TABLES


def skipped(workload: str, enabled: bool) -> dict[str, Any]:
    """The record of a point that is not pre-touched, and why."""
    return {"done": False, "why": OFF if workload in TABLES and not enabled else NOT_NEEDED}


def wal_group(workload: str) -> str | None:
    """The name under which ``workload``'s max_wal_size is sized from its pre-touched pages
    (runner ``size_pretouch_wal``): ``tpcb``, ``ycsb`` (A, B and F share usertable), or None
    for a workload that is never pre-touched."""
    if workload not in TABLES:
        return None
    return "tpcb" if workload == "tpcb" else "ycsb"


#: the workloads of each :func:`wal_group`, as messages and the report name them
WAL_GROUP_TITLES = {"tpcb": "TPC-B", "ycsb": "YCSB"}


def vacuum_sql(workload: str) -> str:
    """The VACUUM run before the point's CHECKPOINT (module docstring, step 1)."""
    return "VACUUM " + ", ".join(t for t, _ in TABLES[workload])


def update_sql(table: str, column: str) -> str:
    """The statement that modifies every heap page of ``table`` holding a live row once:
    the row with the smallest ``ctid`` of each page (the page is the ctid's first
    component), fetched by a TID scan (``ctid = ANY (ARRAY(...))``), its ``column`` set to
    itself. Its row count is the number of pages it touched."""
    return (
        f"UPDATE {table} SET {column} = {column} "
        f"WHERE ctid = ANY (ARRAY(SELECT min(ctid) FROM {table} "
        "GROUP BY (ctid::text::point)[0]))"
    )


#: pages of a table (the main fork), as the UPDATE finds it
PAGES_SQL = "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int"


def checkpoints_started(log_text: str) -> int:
    """Checkpoints that started in a stretch of the server log."""
    return len(_CHECKPOINT_STARTING.findall(log_text))


def summary_text(rec: dict[str, Any] | None) -> str:
    """A point's pre-touch for the report's window table: ``2.1 s, 1,700 FPI`` (the UPDATEs'
    seconds and full-page images), ``off`` (``--no-pretouch``), ``–`` where it does not
    apply or the run is from before it."""
    if not rec:
        return "–"
    if not rec.get("done"):
        return "off" if rec.get("why") == OFF else "–"
    return f"{rec['seconds']:g} s, {rec['wal_fpi']:,} FPI"
