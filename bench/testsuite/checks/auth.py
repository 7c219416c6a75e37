"""auth: nobody gets into a test cluster who does not belong (bench/core/auth.py).

Every cluster pgnvm creates follows Debian's pg_createcluster convention: ``peer`` on the
Unix socket through the ident map (the server's OS user, and root, may connect), and
``scram-sha-256`` over TCP (loopback) with the generated password of ``$PGNVM_HOME/secrets``.
As another OS user (``pgnvm-intruder``, a system user made for this check without a home
or shell) the check tries the superuser over the socket and over TCP, without a password
and with a wrong one, and reads the secrets; every attempt must be refused by the server
(or the file system) with the reason PostgreSQL gives. Then the allowed ways in: the
server's user over the socket (``peer``), this process (root) over the socket (``peer``),
and over TCP with the password file the clients' environment names (``scram-sha-256``),
each shown by ``SYSTEM_USER`` (``<method>:<identity>``). No rule of ``pg_hba.conf`` says
``trust``, and the file has no error.
"""

from __future__ import annotations

import os
import subprocess

import psycopg

from bench.core import auth, osuser
from bench.testsuite import proc
from bench.testsuite.context import EngineEnv
from bench.testsuite.model import CheckFailed, CheckSkipped

INTRUDER = "pgnvm-intruder"


def _ensure_intruder() -> None:
    if osuser._lookup(INTRUDER) is None:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                INTRUDER,
            ],
            check=True,
            capture_output=True,
        )


def _as_intruder(env: EngineEnv, cmd: list[str], extra: dict[str, str]) -> proc.Ran:
    e = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/nonexistent",
        "PGCONNECT_TIMEOUT": "10",
        **extra,
    }
    argv = ["runuser", "-u", INTRUDER, "--", "env", "-i", *(f"{k}={v}" for k, v in e.items())]
    return proc.run([*argv, *cmd], timeout=60, log=env.workdir / "auth-intruder.log")


def _psql(env: EngineEnv, host: str) -> list[str]:
    return [
        env.tool("psql"),
        "-X",
        "-w",  # never prompt
        "-h",
        host,
        "-p",
        str(env.server.cluster.spec.port),
        "-U",
        auth.SUPERUSER,
        "-d",
        "postgres",
        "-Atc",
        "SELECT system_user",
    ]


def auth_check(env: EngineEnv, limit: float) -> str:
    if not osuser.is_root():
        raise CheckSkipped("needs root to act as another OS user")
    _ensure_intruder()
    cluster = env.server.cluster
    sock = str(cluster.socket_dir)
    refused = {
        "socket": (_psql(env, sock), {}, f'Peer authentication failed for user "{auth.SUPERUSER}"'),
        "TCP, no password": (_psql(env, "127.0.0.1"), {}, "no password supplied"),
        "TCP, wrong password": (
            _psql(env, "127.0.0.1"),
            {"PGPASSWORD": "not-the-password"},
            f'password authentication failed for user "{auth.SUPERUSER}"',
        ),
        "TCP, our password file": (
            _psql(env, "127.0.0.1"),
            {"PGPASSFILE": str(auth.pgpass_file())},
            "no password supplied",  # the intruder cannot read it: as without one
        ),
    }
    problems, seen = [], []
    for what, (cmd, extra, expect) in refused.items():
        ran = _as_intruder(env, cmd, extra)
        if ran.returncode == 0:
            problems.append(f"{what}: the intruder got in ({ran.output.strip()!r})")
        elif expect not in ran.output:
            problems.append(f"{what}: refused, but not with {expect!r}: {ran.tail(3)!r}")
        else:
            seen.append(what)
    secrets = [auth.password_file(), auth.pgpass_file()]
    for f in secrets:
        st = f.stat()
        if st.st_mode & 0o077:
            problems.append(f"{f} has mode {oct(st.st_mode & 0o777)}, expected 0600")
        ran = _as_intruder(env, ["cat", str(f)], {})
        if ran.returncode == 0:
            problems.append(f"the intruder can read {f}")
    # the ways in that are allowed, and how the server saw each
    ran = env.run_tool(_psql(env, sock), timeout=60, log_name="auth-server-user.log")
    got = {"server's user, socket": ran.output.strip() if ran.returncode == 0 else ran.tail(3)}
    with psycopg.connect(cluster.conninfo(), autocommit=True) as c:
        row = c.execute("SELECT system_user").fetchone()
        got["root, socket"] = str(row[0]) if row else "?"
        rules = c.execute(
            "SELECT count(*) FILTER (WHERE auth_method = 'trust'), "
            "count(*) FILTER (WHERE error IS NOT NULL) FROM pg_hba_file_rules"
        ).fetchone()
    tcp = (
        f"host=127.0.0.1 port={cluster.spec.port} user={auth.SUPERUSER} dbname=postgres "
        f"passfile={auth.pgpass_file()}"
    )
    try:
        with psycopg.connect(tcp, autocommit=True) as c:
            row = c.execute("SELECT system_user").fetchone()
            got["root, TCP + password file"] = str(row[0]) if row else "?"
    except psycopg.Error as e:
        got["root, TCP + password file"] = f"refused: {e}".strip()
    want = {
        "server's user, socket": f"peer:{osuser.server_user()}",
        "root, socket": "peer:root",
        "root, TCP + password file": f"scram-sha-256:{auth.SUPERUSER}",
    }
    for k, v in want.items():
        if got[k] != v:
            problems.append(f"{k}: expected SYSTEM_USER {v!r}, got {got[k]!r}")
    if rules is None or rules[0] != 0 or rules[1] != 0:
        problems.append(f"pg_hba_file_rules: (trust rules, errors) = {rules}")
    if problems:
        raise CheckFailed("; ".join(problems))
    return (
        f"{INTRUDER} refused ({', '.join(seen)}), cannot read the secrets; allowed: "
        + ", ".join(f"{k} = {v}" for k, v in got.items())
        + f"; uid {os.geteuid()}"
    )
