"""Can the prefetch helper mappings (M1, M2, M3) be honoured on this machine? Asked of the
prefetching library itself.

libnvmprefetch (``prefetch/src/topology.c``) places helper threads by the CPU topology: M1
on another physical core than the computation thread, M2 on its SMT sibling, M3 one of each.
When the machine cannot honour a scheme the library falls back (M2 runs as M1 on a machine
without SMT) and logs why; a benchmark would then measure M1 under the name M2. The library
installs a tool with its own answer into the PostgreSQL install prefix,
``<prefix>/bin/nvmpf-topology``::

    nvmpf-topology --json [--sysfs DIR] [--cpus LIST] [--home CPU] [MAPPING...]

which prints (MAPPING defaults to m1 m2 m3)::

    {"usable_cpus": "0-1", "topology_known": true, "note": "", "smt": false,
     "physical_cores": 2,
     "mappings": {"m1": {"requested": "m1", "effective": "m1", "available": true,
                         "helpers": 1, "helper_cpus": [1], "fallback": [], "message": ""},
                  ...}}

This module runs it (once per install, cached) and answers per mapping: available, not
available (with the library's own message), or unknown when the tool is not installed or
fails (``nvmpf-topology not installed``: the configuration then runs and the report says
so). There is deliberately no second implementation of the library's rules here.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOL = "nvmpf-topology"
MAPPINGS: tuple[str, ...] = ("m1", "m2", "m3")
TIMEOUT = 30  # seconds


@dataclass(frozen=True)
class Mapping:
    """The library's placement of one ``nvm_prefetch_mapping``."""

    requested: str
    effective: str
    available: bool
    helpers: int = 0
    helper_cpus: tuple[int, ...] = ()
    fallback: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class Topology:
    """What ``nvmpf-topology --json`` reported."""

    usable_cpus: str
    topology_known: bool
    note: str
    smt: bool
    physical_cores: int
    mappings: dict[str, Mapping] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """For env.json / reports."""
        return {
            "source": TOOL,
            "usable_cpus": self.usable_cpus,
            "physical_cores": self.physical_cores,
            "smt": self.smt,
            "topology_known": self.topology_known,
            **({"note": self.note} if self.note else {}),
        }


class TopologyUnknown(RuntimeError):
    """The tool is missing, failed or printed something else than its JSON."""


def parse(doc: str | dict[str, Any]) -> Topology:
    """The tool's JSON (text or parsed); raises TopologyUnknown when it is not that."""
    try:
        d = json.loads(doc) if isinstance(doc, str) else doc
        maps = {
            str(k): Mapping(
                requested=str(m.get("requested", k)),
                effective=str(m["effective"]),
                available=bool(m["available"]),
                helpers=int(m.get("helpers", 0)),
                helper_cpus=tuple(int(c) for c in m.get("helper_cpus") or ()),
                fallback=tuple(str(f) for f in m.get("fallback") or ()),
                message=str(m.get("message") or ""),
            )
            for k, m in (d.get("mappings") or {}).items()
        }
        return Topology(
            usable_cpus=str(d["usable_cpus"]),
            topology_known=bool(d["topology_known"]),
            note=str(d.get("note") or ""),
            smt=bool(d["smt"]),
            physical_cores=int(d["physical_cores"]),
            mappings=maps,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise TopologyUnknown(f"{TOOL} printed no valid JSON ({type(e).__name__}: {e})") from e


def command(
    tool: Path,
    mappings: tuple[str, ...] = MAPPINGS,
    sysfs: Path | None = None,
    cpus: str | None = None,
    home: int | None = None,
) -> list[str]:
    cmd = [str(tool), "--json"]
    if sysfs is not None:
        cmd += ["--sysfs", str(sysfs)]
    if cpus is not None:
        cmd += ["--cpus", cpus]
    if home is not None:
        cmd += ["--home", str(home)]
    return [*cmd, *mappings]


def query(tool: Path, mappings: tuple[str, ...] = MAPPINGS, **kw: Any) -> Topology:
    """Run the tool; raises TopologyUnknown (with the reason) when that does not work."""
    if not tool.is_file():
        raise TopologyUnknown(f"{TOOL} not installed")
    try:
        r = subprocess.run(
            command(tool, mappings, **kw),
            capture_output=True,
            text=True,
            check=False,
            timeout=TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TopologyUnknown(f"{TOOL} failed: {e}") from e
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        raise TopologyUnknown(f"{TOOL} failed: {why}")
    return parse(r.stdout)


_cache: dict[tuple[str, tuple[str, ...]], Topology | TopologyUnknown] = {}


def current(bindir: Path, mappings: tuple[str, ...] = MAPPINGS) -> Topology:
    """The topology the tool of the install ``bindir`` reports for this process's CPUs (the
    server inherits its affinity), once per process; raises TopologyUnknown."""
    key = (str(bindir), tuple(mappings))
    if key not in _cache:
        try:
            # the backend's CPU is not known in advance (the scheduler places it): judge
            # from the lowest CPU this process may use, so that every process (the
            # benchmark, its tests) gets the same answer, word for word
            _cache[key] = query(bindir / TOOL, tuple(mappings), home=min(os.sched_getaffinity(0)))
        except TopologyUnknown as e:
            _cache[key] = e
    got = _cache[key]
    if isinstance(got, TopologyUnknown):
        raise got
    return got


def verdict(topo: Topology, mapping: str) -> tuple[bool | None, str]:
    """(True, "") if ``mapping`` runs as asked; (False, the library's message) if it does
    not; (None, why) when the tool did not report it."""
    m = topo.mappings.get(mapping.strip().lower())
    if m is None:
        return None, f"{TOOL} did not report mapping {mapping!r}"
    if m.available:
        return True, ""
    return False, m.message or f"{m.requested} runs as {m.effective} ({', '.join(m.fallback)})"


def mapping_verdict(
    bindir: Path, mapping: str, mappings: tuple[str, ...] = MAPPINGS
) -> tuple[bool | None, str]:
    """:func:`verdict` of ``mapping`` with the tool of the install ``bindir``; (None, why)
    when the tool cannot answer (e.g. ``nvmpf-topology not installed``)."""
    wanted = tuple(dict.fromkeys((*mappings, mapping.strip().lower())))
    try:
        return verdict(current(bindir, wanted), mapping)
    except TopologyUnknown as e:
        return None, str(e)


def summary(bindir: Path) -> dict[str, Any] | str:
    """For env.json: the tool's view of the machine, or ``unknown: <why>``."""
    try:
        return current(bindir).summary()
    except TopologyUnknown as e:
        return f"unknown: {e}"
