"""EXPLAIN (FORMAT JSON) plans, as the checks read them: find a node, and the numbers of the
scan or Gather node a check exists to observe."""

from __future__ import annotations

import json
from typing import Any

from bench.testsuite.model import CheckFailed


def find_plan_node(plan: dict[str, Any], node_type: str) -> dict[str, Any] | None:
    """The first node of ``node_type`` in an EXPLAIN (FORMAT JSON) plan tree, depth first."""
    if plan.get("Node Type") == node_type:
        return plan
    for child in plan.get("Plans", []):
        found = find_plan_node(child, node_type)
        if found is not None:
            return found
    return None


def plan_node(explain_json: Any, node_type: str) -> dict[str, Any]:
    """The first ``node_type`` node of the output of EXPLAIN (FORMAT JSON) (its text or the
    parsed value); CheckFailed with the plan when there is none."""
    doc = json.loads(explain_json) if isinstance(explain_json, str) else explain_json
    node = find_plan_node(doc[0]["Plan"], node_type)
    if node is None:
        raise CheckFailed(f"no {node_type} in the plan: {json.dumps(doc)[:1000]}")
    return node


def scan_stats(explain_json: Any) -> tuple[int, int]:
    """(rows, shared blocks read) of the Seq Scan in EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)."""
    node = plan_node(explain_json, "Seq Scan")
    return int(float(node["Actual Rows"])), int(node["Shared Read Blocks"])


def index_scan_stats(explain_json: Any) -> tuple[int, int]:
    """(rows, shared blocks read) of the Index Scan in EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)."""
    node = plan_node(explain_json, "Index Scan")
    return int(float(node["Actual Rows"])), int(node["Shared Read Blocks"])


def gather_workers(explain_json: Any) -> tuple[int, int]:
    """(workers planned, workers launched) of the Gather in EXPLAIN (ANALYZE, FORMAT JSON)."""
    node = plan_node(explain_json, "Gather")
    return int(node.get("Workers Planned", 0)), int(node.get("Workers Launched", 0))
