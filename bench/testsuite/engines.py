"""Which storage engines the built server accepts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench import osuser
from bench.testsuite import proc

DEFAULT = ("base", "se1")
OPTIONAL = ("se2",)


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
    """base and se1 always (se1 fails loudly until the server has it), plus se2 if accepted."""
    engines = list(DEFAULT)
    notes: dict[str, str] = {}
    for e in OPTIONAL:
        ok, out = probe(bindir, e)
        notes[e] = out
        if ok:
            engines.append(e)
    return engines, notes
