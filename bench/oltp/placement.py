"""Where a point's pgbench and server run: the vCPU placement of 1-client points (issue 23,
part 2).

With one client every transaction is a round trip between pgbench and its backend. On a
small VM whether the two share a vCPU or wake each other across vCPUs (an inter-processor
interrupt of a KVM guest, ~70 µs a round trip on the 2-vCPU VM) decides the throughput more
than the WAL path does: YCSB-A at 1 client ran 18.5-25.4k tps with both on one vCPU and
5.7-9.0k across two, and the scheduler's choice changed from run to run
(docs/results/oltp-wal-quiet-20261126). So by default (``--placement same``) a 1-client
point runs both on one vCPU:

* right after the server's start for the point its postmaster is pinned,
  ``taskset -a -cp CPU PID``: every process it forks from then on inherits the affinity
  (pgbench's backends, the job's own connections, autovacuum workers); the auxiliary
  processes started before (checkpointer, background writer, walwriter, io workers, the
  autovacuum launcher) keep running on every CPU;
* pgbench, warm-up and measured run, runs under ``taskset -c CPU``;
* a backend forked after the pin is asked where it may run (``Cpus_allowed_list``); a pin
  that did not reach it counts as failed;
* after the point the postmaster's affinity is set back to every CPU this process may use,
  and a new backend is asked again (the next point's restart forks a new postmaster, which
  inherits this process's affinity, anyway).

Points with more than one client are never pinned: there the scheduler spreading backends
over the vCPUs is part of what is measured. ``--placement free`` pins nothing (the job's
behaviour before). If only one CPU is there, ``taskset`` is missing or fails, or the pin
does not reach a new backend, the point runs free and its record says why
(``placement_why``, ``placement_fallback``), as do the console and the report. Never
silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.core import procfs

SAME = "same"
FREE = "free"
MODES = (SAME, FREE)

#: one sentence of why, for the report and the help
WHY = (
    "with one client every transaction is a round trip between pgbench and its backend, and "
    "on a small VM one across vCPUs (an inter-processor interrupt) costs more than the WAL "
    "path, so an unpinned 1-client point measures where the scheduler put the two "
    "(docs/results/oltp-wal-quiet-20261126: same vCPU 18.5-25.4k tps, across 5.7-9.0k)"
)


@dataclass(frozen=True)
class Wanted:
    """``--placement``: ``same`` (the lowest CPU this process may use), ``same:N`` or
    ``free``."""

    mode: str = SAME
    cpu: int | None = None

    def __str__(self) -> str:
        return self.mode if self.cpu is None else f"{self.mode}:{self.cpu}"


DEFAULT = Wanted()


def parse(text: str) -> Wanted:
    """``same``, ``same:N`` or ``free`` (ValueError with the reason otherwise)."""
    mode, sep, cpu = text.strip().lower().partition(":")
    if mode not in MODES or (sep and (mode != SAME or not cpu.isdigit())):
        raise ValueError(f"{text!r} (same, same:CPU or free)")
    return Wanted(mode, int(cpu) if sep else None)


def allowed_cpus() -> set[int]:
    """The CPUs this process (and so a postmaster it starts) may run on."""
    return set(os.sched_getaffinity(0))


def cpu_list(cpus: Iterable[int]) -> str:
    """CPUs as the kernel lists them: ``0-3,6``."""
    xs = sorted(set(cpus))
    runs: list[tuple[int, int]] = []
    for x in xs:
        if runs and x == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], x)
        else:
            runs.append((x, x))
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def check(w: Wanted, allowed: set[int]) -> str | None:
    """Why ``w`` cannot be asked for on this machine (a CPU this process may not use)."""
    if w.cpu is not None and w.cpu not in allowed:
        return f"CPU {w.cpu} is not one this process may use ({cpu_list(allowed)})"
    return None


@dataclass(frozen=True)
class Decision:
    """The CPU a point's pgbench and postmaster are to be pinned to, or None (free) and why;
    ``fallback``: a pin was asked for but cannot be (the report flags it)."""

    cpu: int | None
    why: str | None = None
    fallback: bool = False


def decide(w: Wanted, clients: int, allowed: set[int]) -> Decision:
    """Where a point of ``clients`` clients runs under ``--placement w``."""
    if w.mode == FREE:
        return Decision(None, "--placement free")
    if clients != 1:
        return Decision(None, f"{clients} clients: only 1-client points are pinned")
    if len(allowed) < 2:
        return Decision(None, f"one CPU only ({cpu_list(allowed)}): nothing to place", True)
    cpu = min(allowed) if w.cpu is None else w.cpu
    why = check(Wanted(w.mode, cpu), allowed)
    if why:
        return Decision(None, why, True)
    return Decision(cpu)


def pin_args(pid: int, cpus: Iterable[int]) -> list[str]:
    """taskset's arguments that set the affinity of every thread of ``pid``."""
    return ["-a", "-cp", cpu_list(cpus), str(pid)]


def wrap(cmd: Sequence[str], cpu: int | None) -> list[str]:
    """``cmd`` run on ``cpu`` (``taskset -c``), or as it is (None)."""
    return ["taskset", "-c", str(cpu), *cmd] if cpu is not None else list(cmd)


Run = Callable[..., "subprocess.CompletedProcess[str]"]


def taskset(
    args: Sequence[str],
    run: Run = subprocess.run,
    which: Callable[[str], str | None] = shutil.which,
) -> str | None:
    """Run ``taskset args``: None, or why it failed."""
    exe = which("taskset")
    what = "taskset " + " ".join(args)
    if exe is None:
        return "taskset not found (util-linux)"
    try:
        r = run([exe, *args], capture_output=True, text=True, check=False)
    except OSError as e:
        return f"{what}: {e}"
    if r.returncode != 0:
        return f"{what}: exit {r.returncode}: {(r.stderr or '').strip()[-300:]}"
    return None


def _same(seen: str | None, cpus: set[int]) -> bool:
    try:
        return seen is not None and procfs.parse_cpu_list(seen) == cpus
    except ValueError:
        return False


def _fields(where: str, why: str | None, fallback: bool, seen: str | None) -> dict[str, Any]:
    """A point's record fields of its placement (:meth:`PointPlacement.apply`)."""
    return {
        "placement": where,
        "placement_why": why,
        "placement_fallback": fallback,
        "backend_cpus": seen,
    }


class PointPlacement:
    """The placement of one point: :meth:`apply` after the server started for it,
    :meth:`command` for each pgbench run, :meth:`undo` after it. ``backend_cpus``, given to
    both, connects and returns the ``Cpus_allowed_list`` of the backend it got (None if it
    could not ask)."""

    def __init__(
        self,
        wanted: Wanted,
        clients: int,
        allowed: set[int] | None = None,
        run: Run = subprocess.run,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self.allowed = allowed if allowed is not None else allowed_cpus()
        self.decision = decide(wanted, clients, self.allowed)
        self.cpu: int | None = None  # where pgbench runs: set once the pin held
        self.pinned: int | None = None  # the postmaster whose affinity was changed
        #: what the console should say: a pin that failed, or backends pinned although free
        self.warning: str | None = None
        self._run = run
        self._which = which

    def _taskset(self, args: Sequence[str]) -> str | None:
        return taskset(args, self._run, self._which)

    def apply(
        self, postmaster: int | None, backend_cpus: Callable[[], str | None]
    ) -> dict[str, Any]:
        """Pin ``postmaster`` as decided and check that a new backend inherits it. The
        point's record fields: ``placement`` (``same:CPU`` or ``free``), ``placement_why``
        (why free), ``placement_fallback`` (a pin was asked for and did not happen),
        ``backend_cpus`` (where a backend forked now may run)."""
        d = self.decision
        if d.cpu is None:
            seen = backend_cpus()
            why = d.why or ""
            if seen is not None and not _same(seen, self.allowed):
                why += f"; but a new backend may run only on {seen}"
                self.warning = why
            if d.fallback:
                self.warning = why
            return _fields(FREE, why, d.fallback, seen)
        if postmaster is None:
            self.warning = "pin failed, ran free: no postmaster pid to pin"
            return _fields(FREE, self.warning, True, None)
        err = self._taskset(pin_args(postmaster, [d.cpu]))
        if err is None:
            self.pinned = postmaster
        seen = backend_cpus()
        if err is None and not _same(seen, {d.cpu}):
            err = (
                f"pinned the postmaster ({postmaster}) to CPU {d.cpu}, but a new backend "
                f"may run on {seen or '(could not ask)'}"
            )
        if err is not None:
            self.warning = f"pin failed, ran free: {err}"
            return _fields(FREE, self.warning, True, seen)
        self.cpu = d.cpu
        return _fields(f"{SAME}:{d.cpu}", None, False, seen)

    def command(self, cmd: Sequence[str]) -> list[str]:
        """A pgbench command of the point, run where its backends run."""
        return wrap(cmd, self.cpu)

    def undo(self, backend_cpus: Callable[[], str | None]) -> dict[str, Any]:
        """Give the pinned postmaster every CPU back; the record's ``backend_cpus_after``
        (where a backend forked then may run) and ``unpin_error``, if any. Nothing when
        nothing was pinned."""
        if self.pinned is None:
            return {}
        err = self._taskset(pin_args(self.pinned, self.allowed))
        self.pinned = None
        out: dict[str, Any] = {"backend_cpus_after": backend_cpus()}
        if err is None and not _same(out["backend_cpus_after"], self.allowed):
            err = f"a new backend may still run only on {out['backend_cpus_after']}"
        if err is not None:
            out["unpin_error"] = err
        return out
