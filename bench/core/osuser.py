"""The OS user PostgreSQL work runs as.

PostgreSQL refuses to run as root, and its regression tests write into the build tree from
the server side, so when pgnvm runs as root every PostgreSQL-related command (build,
initdb, the server, pg_regress, psql) runs as the unprivileged system user ``pgnvm``
(created on demand). When not root, everything runs as the invoking user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.core import paths

SERVER_USER = "pgnvm"


def is_root() -> bool:
    return os.geteuid() == 0


def current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def server_user() -> str:
    """Name of the OS user that owns data directories and runs the server."""
    return SERVER_USER if is_root() else current_user()


def _lookup(user: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        return None


def ensure_server_user() -> None:
    """As root: create the ``pgnvm`` system user if missing and give it PGNVM_HOME."""
    if not is_root():
        return
    home = paths.pgnvm_home()
    if _lookup(SERVER_USER) is None:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                str(home),
                "--shell",
                "/bin/bash",
                "--comment",
                "pgnvm PostgreSQL server",
                SERVER_USER,
            ],
            check=True,
        )
    home.mkdir(parents=True, exist_ok=True)
    pw = _lookup(SERVER_USER)
    if pw is None:
        raise RuntimeError(f"useradd {SERVER_USER} did not create the user")
    st = home.stat()
    if (st.st_uid, st.st_gid) != (pw.pw_uid, pw.pw_gid):
        os.chown(home, pw.pw_uid, pw.pw_gid)


def server_ids() -> tuple[int, int]:
    """(uid, gid) of the server user (created if missing)."""
    if not is_root():
        return os.geteuid(), os.getegid()
    pw = _lookup(SERVER_USER)
    if pw is None:
        ensure_server_user()
        pw = _lookup(SERVER_USER)
        assert pw is not None
    return pw.pw_uid, pw.pw_gid


def chown_to_server(path: Path, recursive: bool = False) -> None:
    """Give ``path`` (and with ``recursive`` everything below it) to the server user."""
    if not is_root():
        return
    uid, gid = server_ids()
    os.chown(path, uid, gid, follow_symlinks=False)
    if recursive and path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for n in dirs + files:
                os.chown(os.path.join(root, n), uid, gid, follow_symlinks=False)


def ensure_dir(path: Path, owned: bool = True) -> Path:
    """mkdir -p ``path``; directories it creates are owned by the server user if ``owned``."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    if owned:
        for d in missing:
            chown_to_server(d)
    return path


def server_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a command run as the server user (HOME/USER/LOGNAME fixed up)."""
    out = dict(os.environ if env is None else env)
    if is_root():
        pw = _lookup(SERVER_USER)
        out["HOME"] = pw.pw_dir if pw else str(paths.pgnvm_home())
        out["USER"] = out["LOGNAME"] = SERVER_USER
    return out


def pg_command(cmd: Sequence[str], env: Mapping[str, str], root: bool | None = None) -> list[str]:
    """The argv that runs ``cmd`` as the server user with exactly ``env``.

    As root: ``runuser -u pgnvm -- env -i K=V ... cmd`` (runuser alone would reset PATH and
    friends, so the environment is passed explicitly). Otherwise ``cmd`` unchanged.
    """
    if root is None:
        root = is_root()
    cmd = [str(c) for c in cmd]
    if not root:
        return cmd
    runuser = shutil.which("runuser") or "runuser"
    return [
        runuser,
        "-u",
        SERVER_USER,
        "--",
        "env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        *cmd,
    ]


def run_pg(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` as the server user. Accepts subprocess.run's keyword arguments.

    ``env`` (default: this process's environment) is passed through explicitly; ``cwd``
    defaults to PGNVM_HOME when root (the caller's cwd may be unreadable for ``pgnvm``).
    """
    env = server_env(kw.pop("env", None))
    if is_root():
        ensure_server_user()
        kw.setdefault("cwd", str(paths.pgnvm_home()))
        argv = pg_command(cmd, env, root=True)
        return subprocess.run(argv, **kw)
    return subprocess.run([str(c) for c in cmd], env=env, **kw)


def popen_pg(cmd: list[str], **kw: Any) -> subprocess.Popen:
    """``subprocess.Popen`` counterpart of :func:`run_pg` (same user/env/cwd rules)."""
    env = server_env(kw.pop("env", None))
    if is_root():
        ensure_server_user()
        kw.setdefault("cwd", str(paths.pgnvm_home()))
        return subprocess.Popen(pg_command(cmd, env, root=True), **kw)
    return subprocess.Popen([str(c) for c in cmd], env=env, **kw)
