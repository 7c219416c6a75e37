"""The bash bootstrap (./pgnvm): the mirror of the deb-src entry for `apt-get source
postgresql-18` comes from the machine's own apt sources (``./pgnvm --print-src-uri``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.core import paths

DEBIAN_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

LOCAL_MIRROR_SOURCES = """\
Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://src-only.example/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example/debian
Suites: bookworm
Components: main

Types: deb deb-src
URIs: http://apt-cacher.lan:3142/debian/
  http://second.example/debian
Suites:
  trixie
  trixie-updates
Components: main contrib non-free-firmware
"""

THIRD_PARTY_SOURCES = """\
Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
Architectures: amd64
"""

SOURCES_LIST = """\
# deb cdrom:[Debian GNU/Linux 12 _Bookworm_]/ bookworm main
#deb http://commented.example/debian bookworm main
deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
deb http://security.debian.org/debian-security bookworm-security main contrib
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://ftp.de.debian.org/debian/ bookworm main  # mirror
deb http://later.example/debian bookworm main
"""


def uri(*files: Path) -> str:
    r = subprocess.run(
        ["bash", str(paths.REPO_ROOT / "pgnvm"), "--print-src-uri", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        ("debian.sources", DEBIAN_SOURCES, "http://deb.debian.org/debian"),
        ("mirror.sources", LOCAL_MIRROR_SOURCES, "http://apt-cacher.lan:3142/debian"),
        ("sources.list", SOURCES_LIST, "http://ftp.de.debian.org/debian"),
        ("nodesource.sources", THIRD_PARTY_SOURCES, "http://deb.debian.org/debian"),  # default
        ("empty.list", "", "http://deb.debian.org/debian"),
    ],
)
def test_mirror_of_debian_main(tmp_path: Path, name: str, text: str, want: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    assert uri(f) == want


def test_first_file_with_debian_main_wins(tmp_path: Path) -> None:
    third = tmp_path / "nodesource.sources"
    third.write_text(THIRD_PARTY_SOURCES)
    local = tmp_path / "mirror.sources"
    local.write_text(LOCAL_MIRROR_SOURCES)
    listed = tmp_path / "sources.list"
    listed.write_text(SOURCES_LIST)
    assert (
        uri(third, tmp_path / "missing.list", local, listed) == "http://apt-cacher.lan:3142/debian"
    )
    assert uri(listed, local) == "http://ftp.de.debian.org/debian"


def test_this_machine_has_an_answer() -> None:
    got = uri()
    assert got.startswith(("http://", "https://", "mirror+", "file:")), got
