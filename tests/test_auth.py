"""bench/core/auth.py: what the clusters' pg_hba.conf / pg_ident.conf say and how the
secrets are kept (the end-to-end refusal of another OS user is ./pgnvm test's ``auth``)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from bench.core import auth, osuser


def _rules(text: str) -> list[list[str]]:
    return [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def test_hba_is_peer_on_the_socket_and_scram_on_loopback_only() -> None:
    rules = _rules(auth.HBA)
    assert all("trust" not in r and "password" not in r and "md5" not in r for r in rules)
    local = [r for r in rules if r[0] == "local"]
    host = [r for r in rules if r[0] == "host"]
    assert local and all(r[3:] == ["peer", f"map={auth.MAP}"] for r in local)
    assert host and all(r[4] == "scram-sha-256" for r in host)
    assert {r[3] for r in host} == {"127.0.0.1/32", "::1/128"}
    assert len(local) + len(host) == len(rules)


def test_ident_map_names_only_our_users(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert auth.ident_users() == [osuser.current_user()]  # not root: the invoking user
    monkeypatch.setattr(osuser, "is_root", lambda: True)
    assert auth.ident_users() == ["pgnvm", "root"]
    lines = _rules(auth.ident_text(["pgnvm", "root"]))
    assert lines == [[auth.MAP, "pgnvm", "all"], [auth.MAP, "root", "all"]]


def test_secrets_are_private_and_stable(home: Path) -> None:
    f = auth.password_file()
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(f.parent.stat().st_mode) == 0o700
    pw = auth.password()
    assert len(pw) >= 24 and re.fullmatch(r"[A-Za-z0-9_-]+", pw)
    assert auth.password_file() == f and auth.password() == pw  # made once
    p = auth.pgpass_file()
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert p.read_text() == f"*:*:*:{auth.SUPERUSER}:{pw}\n"


def test_another_home_gets_another_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(osuser, "is_root", lambda: False)
    pws = []
    for h in ("a", "b"):
        monkeypatch.setenv("PGNVM_HOME", str(tmp_path / h))
        pws.append(auth.password())
    assert pws[0] != pws[1]


def test_password_mark_follows_the_password(home: Path, tmp_path: Path) -> None:
    datadir = tmp_path / "data"
    datadir.mkdir()
    assert not auth.password_is_set(datadir)
    auth.mark_password_set(datadir)
    assert auth.password_is_set(datadir)
    assert auth.password() not in (datadir / auth.MARK).read_text()  # a digest, not the secret
    auth.password_file().write_text("another\n")  # secrets made anew: set again
    assert not auth.password_is_set(datadir)


def test_write_files(home: Path, tmp_path: Path) -> None:
    datadir = tmp_path / "data"
    datadir.mkdir()
    (datadir / "pg_hba.conf").write_text("local all all trust\n")
    auth.write_files(datadir)
    assert (datadir / "pg_hba.conf").read_text() == auth.HBA
    assert f"{auth.MAP}  {osuser.current_user()}  all" in (datadir / "pg_ident.conf").read_text()
    for n in ("pg_hba.conf", "pg_ident.conf"):
        assert stat.S_IMODE((datadir / n).stat().st_mode) == 0o600
