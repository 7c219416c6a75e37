"""prefetch: libnvmprefetch's own tests (unit + stress, and the stress tests under
ThreadSanitizer), run once from the repository root:

    make -s -C prefetch && make -s -C prefetch test && make -s -C prefetch tsan-test

Both test targets print ``N passed, M failed`` as their last line; the check passes iff
every make exits 0. The logs are kept in the results directory on failure.
:func:`make_steps` is also the storagebench check's (checks/storagebench_check.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from bench.core import paths
from bench.testsuite import proc
from bench.testsuite.model import CheckFailed

_SUMMARY_RE = re.compile(r"^(\d+) passed, (\d+) failed\s*$", re.MULTILINE)

#: (name, make target or None for the library itself)
STEPS: tuple[tuple[str, str | None], ...] = (
    ("build", None),
    ("test", "test"),
    ("tsan", "tsan-test"),
)


def summary(output: str) -> str | None:
    """The last ``N passed, M failed`` line of a test run, or None."""
    found = _SUMMARY_RE.findall(output)
    if not found:
        return None
    p, f = found[-1]
    return f"{p} passed, {f} failed"


def make_steps(
    directory: str,
    steps: tuple[tuple[str, str | None], ...],
    workdir: Path,
    limit: float,
    artifacts: Path,
    make_args: tuple[str, ...] = (),
) -> str:
    """``make -s -C directory [make_args] [target]`` for each (name, target) step (None: the
    default goal), from the repository root; CheckFailed (log kept) on the first that fails.
    The test targets' ``N passed, M failed`` lines, joined."""
    parts = []
    for name, target in steps:
        log = workdir / f"{directory}-{name}.log"
        cmd = ["make", "-s", "-C", directory, *make_args, *([target] if target else [])]
        ran = proc.run(cmd, cwd=paths.REPO_ROOT, timeout=limit, log=log)
        line = summary(ran.output)
        if ran.returncode != 0:
            artifacts.mkdir(parents=True, exist_ok=True)
            saved = artifacts / log.name
            shutil.copyfile(log, saved)
            raise CheckFailed(
                f"{' '.join(cmd)} exited {ran.returncode}"
                + (f" ({line})" if line else "")
                + f" (log: {saved})\n{ran.tail(30)}",
                [str(saved)],
            )
        if target is not None:
            if line is None:
                raise CheckFailed(f"{' '.join(cmd)} printed no 'N passed, M failed' line")
            parts.append(f"{target}: {line}")
    return "; ".join(parts)


def prefetch_check(workdir: Path, limit: float, artifacts: Path) -> str:
    return make_steps("prefetch", STEPS, workdir, limit, artifacts)
