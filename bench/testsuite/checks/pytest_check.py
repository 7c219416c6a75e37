"""pytest: the repository's Python unit tests (``pytest -q tests``), run once."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from bench.core import paths
from bench.testsuite import proc
from bench.testsuite.model import CheckFailed

_SUMMARY_RE = re.compile(r"^=*\s*(\d+ (?:passed|failed|error).*?)\s*=*$", re.MULTILINE)


def pytest_check(workdir_log: Path, limit: float, artifacts: Path) -> str:
    ran = proc.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=paths.REPO_ROOT,
        timeout=limit,
        log=workdir_log,
    )
    summaries = _SUMMARY_RE.findall(ran.output)
    last = summaries[-1] if summaries else f"exit {ran.returncode}"
    if ran.returncode != 0:
        artifacts.mkdir(parents=True, exist_ok=True)
        saved = artifacts / "pytest.log"
        shutil.copyfile(workdir_log, saved)
        raise CheckFailed(f"pytest: {last} (log: {saved})\n{ran.tail(30)}", [str(saved)])
    return f"pytest -q tests: {last}"
