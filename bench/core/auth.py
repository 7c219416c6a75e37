"""Who may connect to the clusters pgnvm creates: Debian's ``pg_createcluster`` convention.

* Unix socket: ``peer`` through the ident map ``pgnvm``: the server's OS user (``pgnvm`` as
  root, else the invoking user) and, when pgnvm runs as root, ``root`` (who may become the
  server's user anyway) may connect as any role; any other OS user is refused.
* TCP (loopback only, ``listen_addresses = '127.0.0.1'``): ``scram-sha-256``. The
  superuser ``pgnvm`` has a generated password, kept in ``$PGNVM_HOME/secrets`` (mode
  0600, the server's user owns it): ``superuser.password`` (initdb's ``--pwfile``) and
  ``pgpass`` (libpq's password file; the clusters' client environment names it in
  ``PGPASSFILE``, so our tools and a user who exports it reach a cluster over TCP too).

One password per PGNVM_HOME: every cluster of a home has the same superuser password.
A cluster made before this (``--auth=trust``) gets the files at its next start and the
password then (:func:`bench.core.cluster.Cluster.start`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from bench.core import osuser, paths

#: the role initdb makes (-U): the superuser of every cluster pgnvm creates
SUPERUSER = "pgnvm"
#: the ident map of pg_hba.conf's local lines
MAP = "pgnvm"
#: in a data directory: the SHA-256 of the password its superuser has (set by initdb's
#: --pwfile or by :func:`set_password`)
MARK = "pgnvm_auth"

HBA = f"""\
# Written by pgnvm (bench/core/auth.py) at every start; edits are overwritten.
# Debian's pg_createcluster convention: peer on the Unix socket (through the ident map
# "{MAP}", pg_ident.conf), scram-sha-256 on TCP (loopback only: listen_addresses).
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  peer map={MAP}
local   replication  all                  peer map={MAP}
host    all          all   127.0.0.1/32   scram-sha-256
host    all          all   ::1/128        scram-sha-256
host    replication  all   127.0.0.1/32   scram-sha-256
host    replication  all   ::1/128        scram-sha-256
"""


def ident_users() -> list[str]:
    """OS users that may connect over the Unix socket (as any role): the server's user and,
    as root, root."""
    users = [osuser.server_user()]
    if osuser.is_root() and "root" not in users:
        users.append("root")
    return users


def ident_text(users: list[str]) -> str:
    lines = [
        "# Written by pgnvm (bench/core/auth.py) at every start; edits are overwritten.",
        "# MAPNAME  SYSTEM-USERNAME  PG-USERNAME",
    ]
    lines += [f"{MAP}  {u}  all" for u in users]
    return "\n".join(lines) + "\n"


def secrets_dir() -> Path:
    return paths.pgnvm_home() / "secrets"


def private_file(path: Path, text: str) -> None:
    """Write ``path`` (mode 0600 from its creation on) and give it to the server's user."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    osuser.chown_to_server(path.parent)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    osuser.chown_to_server(tmp)
    os.replace(tmp, path)


def password_file() -> Path:
    """The superuser's password (made once per PGNVM_HOME), for initdb ``--pwfile``."""
    f = secrets_dir() / "superuser.password"
    if not f.is_file():
        private_file(f, secrets.token_urlsafe(24) + "\n")
    return f


def password() -> str:
    return password_file().read_text().strip()


def pgpass_file() -> Path:
    """libpq's password file for the superuser over TCP (any host, port, database)."""
    f = secrets_dir() / "pgpass"
    want = f"*:*:*:{SUPERUSER}:{password()}\n"
    if not f.is_file() or f.read_text() != want:
        private_file(f, want)
    return f


def write_files(datadir: Path) -> None:
    """pg_hba.conf and pg_ident.conf of the data directory, as above."""
    for name, text in (("pg_hba.conf", HBA), ("pg_ident.conf", ident_text(ident_users()))):
        target = datadir / name
        target.write_text(text)
        osuser.chown_to_server(target)
        os.chmod(target, 0o600)


#: initdb's own pg_hba.conf, before write_files() replaces it: never trust
INITDB_OPTIONS = ("--auth-local=peer", "--auth-host=scram-sha-256")


def _digest() -> str:
    return hashlib.sha256(password().encode()).hexdigest()


def mark_password_set(datadir: Path) -> None:
    target = datadir / MARK
    target.write_text(_digest() + "\n")
    osuser.chown_to_server(target)
    os.chmod(target, 0o600)


def password_is_set(datadir: Path) -> bool:
    try:
        return (datadir / MARK).read_text().strip() == _digest()
    except OSError:
        return False


def set_password(conninfo: str, datadir: Path) -> str | None:
    """Give the superuser this home's password (a cluster made before, with trust, or after
    the secrets were made anew): over the Unix socket, the SCRAM verifier computed by libpq
    (the password itself never reaches the server or its log). Returns why it could not
    (a standby is read-only: it gets the password from its primary), None when done."""
    import psycopg

    try:
        with psycopg.connect(conninfo, autocommit=True) as c:
            row = c.execute("SELECT pg_is_in_recovery()").fetchone()
            if row and row[0]:
                return "the server is in recovery (a standby)"
            verifier = c.pgconn.encrypt_password(
                password().encode(), SUPERUSER.encode(), b"scram-sha-256"
            ).decode()
            c.execute(f"ALTER ROLE {SUPERUSER} PASSWORD '{verifier}'")
    except psycopg.Error as e:
        return str(e).strip()
    mark_password_set(datadir)
    return None
