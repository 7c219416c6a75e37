"""Outcomes of probe queries (a result, or an error's SQLSTATE and message), and the rule
that every configuration must give stock base's: base records its outcomes as the
reference, the others are compared with them (``truncated``, ``checksum``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from bench.core.configs import REFERENCE
from bench.testsuite.context import EngineEnv, source_key
from bench.testsuite.errmatch import normalise_message
from bench.testsuite.model import CheckFailed


def outcome(relpath: str, run: Callable[[], list[tuple[Any, ...]]]) -> dict[str, Any]:
    """``{"result": rows as text}`` of ``run()``, or ``{"sqlstate", "message"}`` of the
    error it raised (the relation's file path in the message as ``<relfile>``)."""
    try:
        rows = run()
    except psycopg.Error as e:
        msg = e.diag.message_primary or str(e)
        return {
            "sqlstate": e.diag.sqlstate,
            "message": normalise_message(msg, {relpath: "<relfile>"}),
        }
    return {"result": [list(map(str, r)) for r in rows]}


def query_with(c: psycopg.Connection[Any], settings: dict[str, str], sql: str) -> list[Any]:
    """The rows of ``sql`` run with the session ``settings`` (RESET ALL afterwards)."""
    for k, v in settings.items():
        c.execute(f"SET {k} = '{v}'")
    try:
        return c.execute(sql).fetchall()
    finally:
        if not c.broken:
            c.execute("RESET ALL")


def describe(o: dict[str, Any]) -> str:
    if "sqlstate" in o:
        return f"ERROR {o['sqlstate']}: {o['message']}"
    return f"result {o['result']}"


def compare_outcomes(expected: dict[str, Any], got: dict[str, Any], label: str) -> list[str]:
    """Probes whose outcome differs from the base reference."""
    return [
        f"{n}: base {describe(expected[n])} / {label} {describe(got[n]) if n in got else 'not run'}"
        for n in expected
        if got.get(n) != expected[n]
    ]


def against_base(env: EngineEnv, check: str, source: str, outcomes: dict[str, Any]) -> str:
    """Stock base records ``outcomes`` of ``check``; every other configuration must match
    them (:func:`compare_outcomes`). A reference cached by an earlier run counts only while
    the check's ``source`` file and this module are unchanged. Returns the check's summary
    line."""
    ref = env.reference(source_key(check, source, __file__), outcomes)
    if ref.recorded:
        where = ref.source
    elif ref.value is None:
        raise CheckFailed(f"no base reference: run with {REFERENCE} in --configs (once suffices)")
    else:
        diffs = compare_outcomes(ref.value, outcomes, env.label)
        if diffs:
            raise CheckFailed("differs from base: " + "; ".join(diffs))
        where = f"same as base ({ref.source})"
    return "; ".join(f"{n} -> {describe(o)}" for n, o in outcomes.items()) + f" [{where}]"
