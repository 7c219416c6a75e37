"""What the test clusters run: storage engines and their variants, and which engines the
built server accepts."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench import osuser
from bench.cluster import ENGINES
from bench.testsuite import proc

DEFAULT = ("base", "se1")
OPTIONAL = ("se2",)


@dataclass(frozen=True)
class Variant:
    """One test cluster's configuration: a storage engine plus extra server settings.

    ``engine`` is what every check decides by (which assertions apply, the expected
    counters, whether base's reference values are recorded or compared with), so a variant
    of se2 is checked exactly as se2; ``settings`` go into the cluster's configuration
    (pgnvm.conf, included by postgresql.conf) and ``label`` names its results
    (``regress[se2+helper]``).
    """

    label: str
    engine: str
    settings: tuple[tuple[str, str], ...] = ()
    #: the variant changes how WAL is written (nvm_wal): recovery is checked on it too
    writes_wal: bool = False

    @property
    def slug(self) -> str:
        """The label as a cluster/directory name (``se2+helper`` -> ``se2-helper``)."""
        return self.label.replace("+", "-")

    @property
    def settings_dict(self) -> dict[str, str]:
        return dict(self.settings)

    @property
    def wal_pmem(self) -> bool:
        """WAL is written through libpmem2 mappings (``nvm_wal = pmem``)."""
        return self.settings_dict.get("nvm_wal") == "pmem"

    @property
    def is_reference(self) -> bool:
        """Stock base with no extra settings: its answers are what the others must give."""
        return self.engine == "base" and not self.settings


#: Variants of an engine, named ``<engine>+<what>``: run after the engine itself.
VARIANTS: tuple[Variant, ...] = (
    Variant("base+walpmem", "base", (("nvm_wal", "pmem"),), writes_wal=True),
    Variant("se2+inline", "se2", (("nvm_prefetch", "inline"),)),
    Variant("se2+helper", "se2", (("nvm_prefetch", "helper"), ("nvm_prefetch_mapping", "m1"))),
)
KNOWN: tuple[str, ...] = (*ENGINES, *(v.label for v in VARIANTS))


def variant(label: str) -> Variant:
    """The variant a label of ``--engines`` names (a plain engine: no extra settings)."""
    if label in ENGINES:
        return Variant(label, label)
    for v in VARIANTS:
        if v.label == label:
            return v
    raise ValueError(f"unknown engine {label!r} (known: {', '.join(KNOWN)})")


def with_variants(engines: list[str]) -> list[str]:
    """The engines followed, each, by its variants (base, se1, se2, se2+inline, ...)."""
    out: list[str] = []
    for e in engines:
        out.append(e)
        out += [v.label for v in VARIANTS if v.engine == e]
    return out


def probe(bindir: Path, engine: str) -> tuple[bool, str]:
    """Ask ``postgres -C`` whether it accepts ``nvm_storage_engine=<engine>``.

    Needs no cluster: ``-D`` points at a directory holding an empty postgresql.conf, and
    ``-C`` exits right after the configuration is parsed (an unknown parameter or a value
    the check hook refuses fails there).
    """
    if engine == "base":
        return True, "stock I/O"
    tmp = Path(tempfile.mkdtemp(prefix="pgnvm-probe-"))
    try:
        (tmp / "postgresql.conf").write_text("")
        (tmp / "postgresql.auto.conf").write_text("")  # else a LOG line says it is missing
        osuser.chown_to_server(tmp, recursive=True)
        ran = proc.run(
            [
                str(bindir / "postgres"),
                "-D",
                str(tmp),
                "-C",
                "nvm_storage_engine",
                "-c",
                f"nvm_storage_engine={engine}",
            ],
            timeout=60,
            as_server=True,
        )
        out = ran.output.strip()
        lines = out.splitlines()
        # -C prints the value as the last line; log lines may precede it
        return ran.returncode == 0 and bool(lines) and lines[-1].strip() == engine, out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def default_engines(bindir: Path) -> tuple[list[str], dict[str, str]]:
    """base and se1 always (se1 fails loudly until the server has it), plus se2 if accepted,
    each followed by its variants (se2's prefetch variants fail loudly, in setup, if the
    server refuses their settings)."""
    engines = list(DEFAULT)
    notes: dict[str, str] = {}
    for e in OPTIONAL:
        ok, out = probe(bindir, e)
        notes[e] = out
        if ok:
            engines.append(e)
    return with_variants(engines), notes
