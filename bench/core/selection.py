"""Which configurations a job runs: ONE selection for ``./pgnvm tpch``, ``oltp``,
``micro scan`` and ``test``.

A job describes itself once (:class:`Job`: its default names, the settings every
configuration of it shares, the configurations of the catalogue it cannot run and why, the
build flavour it runs); its command line builds the :class:`Selection` once from the job and
the user's ``--configs`` (:func:`select`: unknown names and names the job cannot run are an
error that lists the names it can run), and hands it to the runner, which holds
:class:`~bench.core.configs.Config` objects only. Once the build is there the runner asks
:meth:`Selection.judge` for the availability of each (:func:`bench.core.configs.availability`):

* **run**: the configurations to run, in the order given (``--configs``) or the job's
  default order;
* **refused**: name -> why the build or the machine cannot run it (not run, the reason is
  printed and recorded; ``./pgnvm test`` counts it as a failure);
* **unknown**: name -> why its availability cannot be told (e.g. ``nvmpf-topology`` not
  installed): run, and said so.

``--list-configs`` of every job is :func:`listing` (the catalogue with the job's defaults
marked). ``./pgnvm test``'s defaults have a gated part (:attr:`Job.gated`: se2 and its
variants, run by default only where the server accepts :attr:`Job.gate`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import configs, paths, ui
from bench.core.configs import Config, Verdict


class SelectionError(ValueError):
    """A ``--configs`` the job cannot take (unknown name, or one the job cannot run)."""


@dataclass(frozen=True)
class Job:
    """What a job brings to the selection."""

    name: str  # for messages: "tpch", "micro scan", ...
    defaults: tuple[str, ...]  # run without --configs, in this order
    common: Mapping[str, str]  # the settings every configuration of the job starts from
    #: configurations of the catalogue the job cannot run: name -> why
    excluded: Mapping[str, str] = field(default_factory=dict)
    flavour: str = "release"  # the build whose server is asked
    #: default names run only where the server accepts :attr:`gate` (``./pgnvm test``: se2)
    gated: tuple[str, ...] = ()
    gate: str | None = None
    #: a refused configuration is a failure of the run, not a skip (``./pgnvm test``)
    refused_fails: bool = False

    @property
    def all_defaults(self) -> tuple[str, ...]:
        return (*self.defaults, *self.gated)

    def names(self) -> list[str]:
        """The configurations of the catalogue this job can run."""
        return [n for n in configs.NAMES if n not in self.excluded]

    def bindir(self) -> Path:
        return paths.install_dir(self.flavour) / "bin"

    def built(self) -> bool:
        return (self.bindir() / "postgres").is_file()


@dataclass
class Selection:
    """The configurations of one run of a job (:func:`select`), judged once the build is
    there (:meth:`judge`)."""

    job: Job
    wanted: list[Config]
    given: bool  # named by --configs (else the job's defaults)
    verdicts: dict[str, Verdict] | None = None
    #: what the gate's probe said (``{"nvm_se2": "yes"}``), when the defaults have a gate
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def run(self) -> list[Config]:
        """The configurations to run (all wanted before :meth:`judge`)."""
        v = self.verdicts or {}
        return [c for c in self.wanted if c.name not in v or v[c.name].runs]

    @property
    def refused(self) -> dict[str, str]:
        """name -> why this build or machine cannot run it."""
        return self._why(False)

    @property
    def unknown(self) -> dict[str, str]:
        """name -> why its availability is unknown (it runs)."""
        return self._why(None)

    def _why(self, available: bool | None) -> dict[str, str]:
        v = self.verdicts or {}
        return {
            c.name: v[c.name].why
            for c in self.wanted
            if c.name in v and v[c.name].available is available
        }

    def verdict(self, name: str) -> Verdict:
        return (self.verdicts or {}).get(name, configs.AVAILABLE)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.wanted]

    def judge(
        self, bindir: Path | None = None, say: Callable[[str], None] = ui.notice
    ) -> Selection:
        """Ask the build in ``bindir`` (default: the job's flavour) and the machine whether
        each configuration can run, drop the gated defaults if the gate is refused, and say
        what is not run or runs with unknown availability. SelectionError if nothing runs
        (except for a job whose refused configurations fail)."""
        bindir = bindir or self.job.bindir()
        j = self.job
        if j.gate and not self.given:
            g = configs.verdict(configs.BY_NAME[j.gate], bindir, dict(j.common))
            self.notes[j.gate] = g.describe()
            if not g.runs:
                self.wanted = [c for c in self.wanted if c.name not in j.gated]
                say(f"{', '.join(j.gated)} not in the default run: {j.gate}: {g.describe()}")
        self.verdicts = configs.availability(bindir, self.wanted, dict(j.common))
        for name, why in self.refused.items():
            what = "its checks fail" if j.refused_fails else "skipped"
            say(f"configuration {name} is not available, {what}: {why}")
        for name, why in self.unknown.items():
            say(f"configuration {name}: availability unknown ({why}); running it")
        if not (self.wanted if j.refused_fails else self.run):
            raise SelectionError(f"pgnvm {j.name}: no configuration to run")
        return self


def select(job: Job, wanted: Iterable[str] | None = None) -> Selection:
    """The configurations named by ``wanted`` (``--configs``; None or empty: the job's
    defaults, gated ones included until :meth:`Selection.judge`), in that order, each once.
    SelectionError for a name the catalogue does not have (listing the names the job can
    run) and for one the job cannot run (with why)."""
    names = list(dict.fromkeys(wanted or ()))
    given = bool(names)
    if not given:
        names = list(job.all_defaults)
    bad = [n for n in names if n not in configs.BY_NAME]
    if bad:
        raise SelectionError(
            f"unknown configuration(s) {', '.join(bad)} "
            f"(known: {', '.join(job.names())}; see --list-configs)"
        )
    refused = [f"{n}: {job.excluded[n]}" for n in names if n in job.excluded]
    if refused:
        raise SelectionError("; ".join(refused))
    return Selection(job, [configs.BY_NAME[n] for n in names], given)


def listing(job: Job) -> list[str]:
    """The lines ``--list-configs`` prints for ``job``: the catalogue, the job's defaults
    marked, each configuration's availability with the job's build (unknown while it is not
    built) and what the job cannot run."""
    verdicts = None
    if job.built():
        verdicts = configs.availability(job.bindir(), configs.CONFIGS, dict(job.common))
    return configs.listing(job.all_defaults, verdicts, dict(job.common), dict(job.excluded))
