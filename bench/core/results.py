"""What every benchmark job writes around its runs: the machine's description
(:func:`environment`), a fresh result directory (:func:`unused_out`), JSON files replaced
atomically (:func:`write_json`), the OS page cache dropped for data on disk
(:func:`drop_os_caches`) and the progress display with an ETA (:class:`Progress`: a rich
bar on a terminal, one line per finished step)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.core import paths, procfs, storage, ui


def write_json(path: Path, doc: Any) -> None:
    """``doc`` as indented JSON at ``path``, replaced atomically (a reader never sees half)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def unused_out(out: Path | None) -> str | None:
    """Why ``out`` (a job's ``--out``) cannot take a new run, or None. Raw files are appended
    run by run, so a directory that holds another run's ``runs.jsonl`` would mix two runs in
    one report."""
    if out is not None and (out / "runs.jsonl").exists():
        return f"--out {out} already holds the results of a run (runs.jsonl); choose another"
    return None


def read_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cmd(*args: str) -> str:
    try:
        r = subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip()


def environment() -> dict[str, Any]:
    cpu = procfs.cpu_model()
    mem = procfs.meminfo().get("MemTotal", "")
    commit = cmd("git", "-C", str(paths.REPO_ROOT), "rev-parse", "HEAD")
    dirty = cmd(
        "git", "-C", str(paths.REPO_ROOT), "status", "--porcelain", "--", "bench", "postgres"
    )
    return {
        "cpu_model": cpu or platform.processor(),
        "cpus": os.cpu_count(),
        "memory": mem,
        "kernel": " ".join(platform.uname()),
        "python": sys.version.split()[0],
        "git_commit": commit,
        "git_dirty": bool(dirty),
        "hostname": platform.node(),
        "thp_enabled": read_text("/sys/kernel/mm/transparent_hugepage/enabled").strip(),
        "nvm_root": storage.describe_nvm_root().to_json(),
    }


def drop_os_caches(datadir: Path) -> str:
    """Make the OS page cache cold for one cluster on disk: ``sync``, then
    ``posix_fadvise(POSIX_FADV_DONTNEED)`` on every file under ``datadir`` (symlinks such as
    pg_wal and pg_tblspc followed). 'dropped', or why not.

    Not ``echo 3 > /proc/sys/vm/drop_caches``: on tmpfs that cannot drop the emulated NVM's
    pages (they are the files), but afterwards the kernel's fault-around skips them: every
    later 4 KB page of an NVM mapping costs a page fault instead of one per 16 pages (seen on
    Linux 6.18 with a plain mmap test: 16,384 faults instead of 1,025 for a 64 MB file, and
    in se2 213,937 instead of ~14,000 for TPC-H SF 1's lineitem, ~40% slower scans), until
    the file is rewritten. Why, we take to be the flag drop_caches leaves on pages it cannot
    drop (PG_reclaim, which shares its bit with PG_readahead, which fault-around skips): not
    verified in the kernel. A disk configuration's cold cache must not slow down the NVM
    configurations that run after it.
    """
    os.sync()
    dropped = failed = 0
    first_error = ""
    for root, _dirs, files in os.walk(datadir, followlinks=True):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError as e:
                failed += 1
                first_error = first_error or f"{name}: {e.strerror or e}"
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                dropped += 1
            finally:
                os.close(fd)
    if failed:
        return f"not dropped for {failed} of {dropped + failed} files ({first_error})"
    return "dropped"


class Progress:
    """A rich progress bar (on a terminal) plus one line per finished run."""

    def __init__(self, total: int, label: str) -> None:
        self.total = total
        self.label = label
        self.every = 25  # without a terminal: a line every that many steps
        self.live = ui.console is not None and ui.console.is_terminal
        self._p: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._p = RichProgress(
                TextColumn(f"[bold cyan]{self.label}[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"),
                TextColumn("{task.description}"),
                console=ui.console,
                transient=True,
            )
            self._p.__enter__()
            self._task = self._p.add_task("starting", total=self.total, eta="?")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.__exit__(None, None, None)

    def update(self, done: int, what: str, eta: float | None) -> None:
        eta_txt = ui.fmt_seconds(eta) if eta is not None else "?"
        if self._p is not None:
            self._p.update(self._task, completed=done, description=what, eta=eta_txt)
        elif done == 0 or done % self.every == 0:
            ui.info(f"running {what} (ETA {eta_txt})")

    def done_one(self, done: int, line: str) -> None:
        if self._p is not None:
            self._p.update(self._task, completed=done)
            self._p.console.print(line, markup=False, highlight=False)
        else:
            ui.info(line)
