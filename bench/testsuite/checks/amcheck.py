"""amcheck: pg_amcheck over the databases the suites left behind."""

from __future__ import annotations

from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed
from bench.testsuite.pgamcheck import run_amcheck


def amcheck(env: EngineEnv, limit: float) -> str:
    with env.server.connect() as c:
        dbs = [
            r[0]
            for r in c.execute(
                "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname"
            ).fetchall()
        ]
    wanted = [d for d in ("regression", "isolation_regression") if d in dbs]
    if "regression" not in wanted:
        raise CheckFailed(
            "no 'regression' database: amcheck checks what the regress check leaves behind "
            f"(databases present: {', '.join(dbs)}); run regress first"
        )
    return run_amcheck(env, [*wanted, "postgres"], limit, "amcheck.log")
