"""The nvmpf-topology client (bench/core/topology.py), fed canned JSON of the tool.

The situations are the ones the library's placement rules distinguish (prefetch/src/
topology.c): no SMT, 2 cores x 2 threads, one core with both its threads, an affinity mask
without the siblings, an offline CPU, sysfs without thread_siblings_list (core_id), no
topology at all. The answers (available or not, the library's message) are the tool's; the
client only reads them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench.core import topology


def _m(
    req: str, eff: str, cpus: list[int], fallback: list[str] = (), msg: str = ""
) -> dict[str, Any]:
    return {
        "requested": req,
        "effective": eff,
        "available": req == eff and not fallback,
        "helpers": len(cpus) or 1,
        "helper_cpus": cpus,
        "fallback": list(fallback),
        "message": msg,
    }


def _doc(
    cpus: str, smt: bool, cores: int, *maps: dict[str, Any], known: bool = True, note: str = ""
) -> dict[str, Any]:
    return {
        "usable_cpus": cpus,
        "topology_known": known,
        "note": note,
        "smt": smt,
        "physical_cores": cores,
        "mappings": {m["requested"]: m for m in maps},
    }


NO_SMT_M2 = (
    "nvmprefetch: scheme M2 cannot be honoured: CPU 0 has no SMT sibling in the allowed CPU "
    "set 0-1; falling back to M1: 1 helper(s) on another physical core (1)"
)
NO_SMT_M3 = (
    "nvmprefetch: scheme M3 cannot be honoured: CPU 0 has no SMT sibling in the allowed CPU "
    "set 0-1, so there is no second-stage helper; falling back to M1: 1 helper(s) on "
    "another physical core (1)"
)

#: 2 CPUs, one thread per core (this VM)
NO_SMT = _doc(
    "0-1",
    False,
    2,
    _m("m1", "m1", [1]),
    _m("m2", "m1", [1], ["no_smt"], NO_SMT_M2),
    _m("m3", "m1", [1], ["no_smt"], NO_SMT_M3),
)
#: 2 cores x 2 threads, numbered as Linux does on x86 (siblings n and n+2)
SMT = _doc("0-3", True, 2, _m("m1", "m1", [1]), _m("m2", "m2", [2]), _m("m3", "m3", [1, 2]))
#: one core with both its threads (affinity 1,3): M2 yes, M1 and M3 no second core
ONE_CORE = _doc(
    "1,3",
    True,
    1,
    _m(
        "m1",
        "m2",
        [3],
        ["no_other_core"],
        "nvmprefetch: scheme M1 cannot be honoured: no allowed CPU on a physical core other "
        "than CPU 1's (allowed: 1,3); falling back to M2: 1 helper(s) on an SMT sibling (3)",
    ),
    _m("m2", "m2", [3]),
    _m(
        "m3",
        "m2",
        [3],
        ["no_other_core"],
        "nvmprefetch: scheme M3 cannot be honoured: no allowed CPU on a physical core other "
        "than CPU 1's (allowed: 1,3), so there is no first-stage helper; falling back to M2: "
        "1 helper(s) on an SMT sibling (3)",
    ),
)
#: sysfs without thread_siblings_list nor core_id: every CPU taken as its own core
UNKNOWN = _doc(
    "0-1",
    False,
    2,
    _m("m1", "m1", [1]),
    _m(
        "m2",
        "m1",
        [1],
        ["no_smt", "no_topology"],
        "nvmprefetch: scheme M2 cannot be honoured: CPU 0 has no SMT sibling in the allowed "
        "CPU set 0-1; CPU topology unreadable under /x, every CPU taken as its own core; "
        "falling back to M1: 1 helper(s) on another physical core (1)",
    ),
    known=False,
    note="CPU topology unreadable under /x, every CPU taken as its own core",
)


def test_parse_and_verdicts_no_smt() -> None:
    t = topology.parse(json.dumps(NO_SMT))
    assert (t.usable_cpus, t.smt, t.physical_cores, t.topology_known) == ("0-1", False, 2, True)
    assert t.mappings["m2"].fallback == ("no_smt",) and t.mappings["m2"].helper_cpus == (1,)
    assert topology.verdict(t, "m1") == (True, "")
    assert topology.verdict(t, "m2") == (False, NO_SMT_M2)
    assert topology.verdict(t, "M3") == (False, NO_SMT_M3)
    assert topology.verdict(t, "2,3") == (None, "nvmpf-topology did not report mapping '2,3'")
    assert t.summary() == {
        "source": "nvmpf-topology",
        "usable_cpus": "0-1",
        "physical_cores": 2,
        "smt": False,
        "topology_known": True,
    }


def test_smt_and_one_core() -> None:
    t = topology.parse(SMT)
    for m in ("m1", "m2", "m3"):
        assert topology.verdict(t, m) == (True, ""), m
    one = topology.parse(ONE_CORE)
    assert topology.verdict(one, "m2") == (True, "")
    for m in ("m1", "m3"):
        ok, why = topology.verdict(one, m)
        assert ok is False and "no allowed CPU on a physical core other than" in why


def test_unknown_topology_is_the_library_s_call() -> None:
    t = topology.parse(UNKNOWN)
    assert not t.topology_known and "unreadable" in t.note
    assert t.summary()["note"] == t.note
    ok, why = topology.verdict(t, "m2")
    assert ok is False and "every CPU taken as its own core" in why
    # a fallback without a message still says what happened
    bare = topology.parse(_doc("0", False, 1, _m("m1", "none", [], ["no_other_core"])))
    assert topology.verdict(bare, "m1") == (False, "m1 runs as none (no_other_core)")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        json.dumps({"usable_cpus": "0"}),
        json.dumps({**SMT, "smt": None, "mappings": {"m1": {}}}),
    ],
)
def test_bad_json_is_unknown(text: str) -> None:
    with pytest.raises(topology.TopologyUnknown, match="no valid JSON"):
        topology.parse(text)


def test_command_line() -> None:
    assert topology.command(Path("/p/bin/nvmpf-topology")) == [
        "/p/bin/nvmpf-topology",
        "--json",
        "m1",
        "m2",
        "m3",
    ]
    assert topology.command(Path("t"), ("m2",), sysfs=Path("/fake"), cpus="0-1", home=0) == [
        "t",
        "--json",
        "--sysfs",
        "/fake",
        "--cpus",
        "0-1",
        "--home",
        "0",
        "m2",
    ]


def _tool(bindir: Path, body: str) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    t = bindir / topology.TOOL
    t.write_text("#!/bin/sh\n" + body)
    t.chmod(0o755)
    return t


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topology, "_cache", {})


def test_tool_runs_once_and_is_cached(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    (tmp_path / "out.json").write_text(json.dumps(NO_SMT))
    _tool(bindir, f'echo "$@" >> "{tmp_path}/calls"\ncat "{tmp_path}/out.json"\n')
    assert topology.mapping_verdict(bindir, "m1") == (True, "")
    assert topology.mapping_verdict(bindir, "m2") == (False, NO_SMT_M2)
    assert topology.current(bindir).physical_cores == 2
    assert topology.summary(bindir)["usable_cpus"] == "0-1"  # type: ignore[index]
    # one run, judged from the lowest CPU of the affinity (the same answer in every process)
    home = min(os.sched_getaffinity(0))
    assert (tmp_path / "calls").read_text() == f"--json --home {home} m1 m2 m3\n"


def test_tool_missing_or_failing_is_unknown(tmp_path: Path) -> None:
    assert topology.mapping_verdict(tmp_path / "none", "m2") == (
        None,
        "nvmpf-topology not installed",
    )
    assert topology.summary(tmp_path / "none") == "unknown: nvmpf-topology not installed"
    bad = tmp_path / "bad"
    _tool(bad, "echo 'nvmpf-topology: cannot read /sys' >&2\nexit 3\n")
    assert topology.mapping_verdict(bad, "m1") == (
        None,
        "nvmpf-topology failed: nvmpf-topology: cannot read /sys",
    )
    garbage = tmp_path / "garbage"
    _tool(garbage, "echo hello\n")
    ok, why = topology.mapping_verdict(garbage, "m1")
    assert ok is None and why.startswith("nvmpf-topology printed no valid JSON")
