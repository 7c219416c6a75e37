"""Subprocesses that die with their check: own process group, killed on timeout/Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class CheckTimeout(BaseException):
    """The check's time limit ran out."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise CheckTimeout in the main thread after ``seconds``."""

    def _expired(signum: int, frame: object) -> None:
        raise CheckTimeout(f"time limit of {seconds:.0f}s exceeded")

    old = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def is_root() -> bool:
    return os.geteuid() == 0


def server_argv(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """argv + environment that run ``cmd`` as the server's OS user (``pgnvm`` when root)."""
    from bench.core import osuser

    senv = osuser.server_env(env)
    if is_root():
        osuser.ensure_server_user()
    return osuser.pg_command([str(c) for c in cmd], senv), senv


@dataclass
class Ran:
    cmd: list[str]
    returncode: int
    output: str  # stdout+stderr interleaved
    duration: float

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


def _kill_group(p: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        p.wait(timeout=10)


def run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float | None = None,
    log: Path | None = None,
    as_server: bool = False,
) -> Ran:
    """Run ``cmd`` in its own process group, output to ``log`` (and returned).

    The whole group is SIGKILLed if the timeout passes, the check's time limit
    fires or Ctrl-C arrives, so no ``make``/``pg_regress`` grandchild lingers.
    """
    merged = dict(os.environ)
    if env:
        merged.update(env)
    full = [str(c) for c in cmd]
    if as_server:
        full, merged = server_argv(full, merged)
        if cwd is None and is_root():
            from bench.core import paths

            cwd = paths.pgnvm_home()
    t0 = time.monotonic()
    ctx: contextlib.AbstractContextManager[object]
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        ctx = open(log, "wb")  # noqa: SIM115
    else:
        ctx = contextlib.nullcontext(subprocess.PIPE)
    with ctx as out:
        p = subprocess.Popen(
            full,
            env=merged,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,  # type: ignore[arg-type]
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            data, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            text = log.read_text(errors="replace") if log else ""
            raise CheckTimeout(
                f"{cmd[0]} did not finish within {timeout:.0f}s\n{text[-3000:]}"
            ) from None
        except BaseException:
            _kill_group(p)
            raise
    text = (
        log.read_text(errors="replace")
        if log is not None
        else (data or b"").decode(errors="replace")
    )
    return Ran(list(full), p.returncode, text, time.monotonic() - t0)


class Background:
    """A background process (pgbench, strace) in its own group; ``stop()`` kills the group."""

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        as_server: bool = False,
    ) -> None:
        merged = dict(os.environ)
        if env:
            merged.update(env)
        cmd = [str(c) for c in cmd]
        if as_server:
            cmd, merged = server_argv(cmd, merged)
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        self._out = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            list(cmd),
            env=merged,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            _kill_group(self.proc)
        self._out.close()
        return self.proc.returncode

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")


#: nice value of the processes of a timed load (see :func:`yield_cpu`)
TIMED_LOAD_NICE = 10


def yield_cpu(pids: Sequence[int]) -> list[int]:
    """Lower the CPU priority of ``pids`` (server backends of a *timed* load: ``crash``'s
    pgbench clients until the kill, ``stress``'s readers until the writers finish) to
    :data:`TIMED_LOAD_NICE`. Such a load does as much as the CPU lets it in a time set by
    something else, so at full priority it takes every cycle from the configuration
    running side by side (lanes) without finishing any sooner; at nice 10 it still runs
    whenever a CPU is idle, and the work with a fixed amount to do (the writers, the
    acknowledgement recorder, the other lane's checks) goes first. What the check asserts
    is unchanged; its detail reports how much such a load did. Returns the pids changed
    (a backend that is already gone is skipped)."""
    done = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpriority(os.PRIO_PROCESS, pid, TIMED_LOAD_NICE)
            done.append(pid)
    return done
