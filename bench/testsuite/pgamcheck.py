"""pg_amcheck with everything PostgreSQL 18 can check, for the checks that verify a
database after they are done with it (``amcheck``, ``crash``, ``stress``)."""

from __future__ import annotations

import re

from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed

#: What pg_amcheck (PG 18) can check beyond its defaults: all index entries must point at
#: heap tuples (--heapallindexed), parent/child key relationships (--parent-check, ShareLock),
#: re-find every tuple from the root (--rootdescend), unique constraints (--checkunique).
AMCHECK_OPTS = (
    "--install-missing",
    "--heapallindexed",
    "--parent-check",
    "--rootdescend",
    "--checkunique",
)


_BENIGN = re.compile(r'^NOTICE:  extension "amcheck" already exists, skipping$')


def findings(output: str) -> list[str]:
    """pg_amcheck's report lines (it prints nothing when all is well), minus the notice
    --install-missing gives where amcheck is already installed."""
    return [ln for ln in output.splitlines() if ln.strip() and not _BENIGN.match(ln)]


def run_amcheck(
    env: EngineEnv,
    databases: list[str],
    timeout: float,
    log_name: str,
    client_env: dict[str, str] | None = None,
) -> str:
    """pg_amcheck the given databases; it must print nothing and exit 0. ``client_env``:
    the environment that reaches another cluster than the configuration's (e.g.
    :meth:`bench.core.cluster.Cluster.env`)."""
    cmd = [env.tool("pg_amcheck"), *AMCHECK_OPTS]
    for db in databases:
        cmd += ["-d", db]
    ran = env.run_tool(cmd, timeout=timeout, log_name=log_name, extra_env=client_env)
    if ran.returncode != 0 or findings(ran.output):
        raise CheckFailed(
            f"pg_amcheck on {', '.join(databases)} exited {ran.returncode}:\n{ran.tail(40)}",
            [str(env.workdir / log_name)],
        )
    return f"pg_amcheck {' '.join(AMCHECK_OPTS)} clean on {', '.join(databases)}"
