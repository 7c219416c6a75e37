"""Build PostgreSQL 18 with the pgnvm patches.

``./pgnvm build [--flavour release|check|all] [--force]``

Steps (all PostgreSQL work runs as the server user, see :mod:`bench.core.osuser`):

1. ``apt-get source --download-only postgresql-18`` into ``$PGNVM_HOME/src`` (skipped when an
   upstream tarball is already there; any 18.x is accepted, the newest one present wins).
2. Extract ONLY the upstream ``postgresql-18_18.*.orig.tar.*`` into ``build/<flavour>/``
   (Debian's packaging patches are not applied).
3. Apply ``postgres/patches/*.patch`` in sorted order (``patch -p1 --forward --batch``).
4. Copy ``postgres/src/X`` over ``<tree>/src/X`` (only files whose content differs), and
   ``postgres/contrib/X`` over ``<tree>/contrib/X``.
5. Copy libnvmprefetch (``prefetch/``) to ``<tree>/nvmprefetch`` and build its static
   archive there; ``configure`` gets its header directory (CPPFLAGS) and archive (LIBS), so
   the server links it statically (se2's prefetching, ``nvm_prefetch.c``).
6. ``configure`` (flavour-specific flags), ``make``, ``make install`` (which also installs
   libnvmprefetch's header and libraries and its ``nvmpf-topology`` tool into the prefix,
   for other programs).

Incremental rule: the *config stamp* hashes the upstream tarball name, every patch (name
and content), the configure arguments and flags, and libnvmprefetch's files. When it
changes (or ``--force``), the tree and the install prefix are wiped and rebuilt from scratch.
Otherwise only the overlay is re-synced and make / make install run, so editing a file
under postgres/src rebuilds in seconds. The *install stamp* additionally hashes the
overlay's content and the make targets: when it matches, nothing runs at all.

Overlay files that disappear from postgres/src are reverted in the tree: the pre-overlay
version (pristine or patched upstream) is kept under ``<tree>/.pgnvm/orig/`` when a file is
first overlaid, and restored from there; files the overlay added are deleted.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.core import osuser, paths, ui

#: Bump when the build recipe changes in a way that needs a from-scratch rebuild.
RECIPE_VERSION = 1
SOURCE_PACKAGE = "postgresql-18"
EXTRA_VERSION = " (pgnvm)"
CONTRIBS: tuple[str, ...] = (
    "amcheck",
    "pg_prewarm",
    "pg_buffercache",
    "pg_stat_statements",
    "pageinspect",
    "test_decoding",  # the recovery TAP suite's logical decoding tests need it
    "pgnvm",  # ours, from postgres/contrib/pgnvm
)
CONFIGURE_COMMON: tuple[str, ...] = (
    "--with-liburing",
    "--with-icu",
    "--with-ssl=openssl",
    "--with-lz4",
    "--with-zstd",
    "--enable-tap-tests",
    "--enable-depend",
    f"--with-extra-version={EXTRA_VERSION}",
)
FLAVOUR_CONFIGURE: dict[str, tuple[str, ...]] = {
    "release": (),
    "check": ("--enable-cassert", "--enable-debug"),
}
FLAVOUR_CFLAGS: dict[str, str] = {
    "release": "-O2",
    "check": "-O1 -g",
}
#: Overlay entries that are never copied into the tree.
OVERLAY_IGNORE = {".gitkeep", ".gitignore", ".DS_Store"}

TARBALL_RE = re.compile(r"^postgresql-18_(?P<version>18[0-9A-Za-z.+~]*)\.orig\.tar\.(?:gz|bz2|xz)$")

META = ".pgnvm"  # metadata directory inside the tree
PREFETCH_SUBDIR = "nvmprefetch"  # libnvmprefetch's copy inside the tree
LOG_NAME = "build.log"


class BuildError(RuntimeError):
    pass


# --------------------------------------------------------------------------- pure helpers


def make_jobs() -> int:
    env = os.environ.get("PGNVM_MAKE_JOBS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return (os.cpu_count() or 2) + 1


def version_key(version: str) -> tuple:
    """Sort key for upstream versions à la dpkg: '18.10' > '18.9' > '18.1' > '18~rc1'.

    Each maximal run of digits compares numerically, other characters by dpkg's rules
    ('~' sorts before everything, even the end of the string).
    """
    key: list[tuple[int, int | str]] = []
    for digits, other in re.findall(r"(\d+)|(\D+)", version):
        if digits:
            key.append((2, int(digits)))
        else:
            for ch in other:
                if ch == "~":
                    key.append((0, ""))
                else:
                    key.append((3 if ch.isalpha() else 4, ch))
    key.append((1, ""))  # end of string: after '~', before anything else
    return tuple(key)


def tarball_version(name: str) -> str | None:
    m = TARBALL_RE.match(name)
    return m.group("version") if m else None


def pick_tarball(candidates: Iterable[Path]) -> Path | None:
    """Newest upstream 18.x orig tarball among ``candidates`` (others are ignored)."""
    best: tuple[tuple, Path] | None = None
    for p in candidates:
        v = tarball_version(p.name)
        if v is None:
            continue
        k = version_key(v)
        if best is None or k > best[0]:
            best = (k, p)
    return best[1] if best else None


def list_patches(patch_dir: Path) -> list[Path]:
    """``*.patch`` files of ``patch_dir`` in the order they are applied (sorted by name)."""
    if not patch_dir.is_dir():
        return []
    return sorted((p for p in patch_dir.glob("*.patch") if p.is_file()), key=lambda p: p.name)


def configure_args(flavour: str, prefix: Path) -> list[str]:
    return [f"--prefix={prefix}", *CONFIGURE_COMMON, *FLAVOUR_CONFIGURE[flavour]]


def configure_env(flavour: str, tree: Path | None = None) -> dict[str, str]:
    """Environment of ``configure``; with ``tree``, also what links libnvmprefetch in.

    The library is built inside the tree (``<tree>/nvmprefetch``, see ``prefetch_files``) and
    linked statically: its header directory goes to CPPFLAGS, its archive to LIBS, so the
    server (the only program that references it) carries it and nothing needs installing.
    """
    env = {"CFLAGS": FLAVOUR_CFLAGS[flavour]}
    if tree is not None:
        lib = tree / PREFETCH_SUBDIR
        env["CPPFLAGS"] = f"-I{lib / 'include'}"
        env["LIBS"] = str(lib / "build" / "libnvmprefetch.a")
    return env


def prefetch_files(prefetch_dir: Path) -> dict[str, Path]:
    """The files of libnvmprefetch copied into the tree: its Makefile, header, sources and
    tools (``nvmpf-topology``, installed with it)."""
    files = overlay_files(prefetch_dir)
    return {
        rel: p
        for rel, p in files.items()
        if rel == "Makefile" or rel.startswith(("include/", "src/", "tools/"))
    }


def prefetch_build_step() -> list[str]:
    """Build the static library inside the tree (before configure, which links against it)."""
    return ["make", "-C", PREFETCH_SUBDIR, "build/libnvmprefetch.a"]


def make_steps(jobs: int) -> list[list[str]]:
    j = f"-j{jobs}"
    steps = [["make", j]]
    steps += [["make", j, "-C", f"contrib/{c}"] for c in CONTRIBS]
    steps += [["make", j, "-C", "src/test/isolation"], ["make", j, "-C", "src/test/regress"]]
    return steps


def install_steps(prefix: Path | None = None) -> list[list[str]]:
    steps = [["make", "install"]]
    steps += [["make", "-C", f"contrib/{c}", "install"] for c in CONTRIBS]
    steps += [["make", "-C", "src/test/isolation", "install"]]
    if prefix is not None:
        # libnvmprefetch's header and libraries next to PostgreSQL's, for other programs
        steps += [["make", "-C", PREFETCH_SUBDIR, f"PREFIX={prefix}", "install"]]
    return steps


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_stamp(
    tarball_name: str,
    patches: list[tuple[str, bytes]],
    args: list[str],
    env: dict[str, str],
    prefetch: dict[str, str] | None = None,
) -> str:
    """Hash of everything that requires a from-scratch rebuild when it changes.

    ``prefetch`` (libnvmprefetch's file hashes) is part of it: the server links the library
    statically and make does not know the binary depends on the archive.
    """
    doc = {
        "recipe": RECIPE_VERSION,
        "tarball": tarball_name,
        "patches": [[name, _sha256(content)] for name, content in patches],
        "configure": args,
        "env": sorted(env.items()),
    }
    if prefetch:
        doc["prefetch"] = sorted(prefetch.items())
    return _sha256(json.dumps(doc, sort_keys=True).encode())


def install_stamp(config: str, overlay: dict[str, str], steps: list[list[str]]) -> str:
    """Hash of the config stamp + overlay content + make targets: equal means nothing to do."""
    doc = {"config": config, "overlay": sorted(overlay.items()), "steps": steps}
    return _sha256(json.dumps(doc, sort_keys=True).encode())


def overlay_files(overlay_dir: Path) -> dict[str, Path]:
    """Files under ``overlay_dir`` keyed by their path relative to it (posix style)."""
    out: dict[str, Path] = {}
    if not overlay_dir.is_dir():
        return out
    for p in sorted(overlay_dir.rglob("*")):
        if p.is_dir() or p.name in OVERLAY_IGNORE:
            continue
        if p.name.endswith("~") or p.name.endswith(".swp") or p.name.startswith(".#"):
            continue
        out[p.relative_to(overlay_dir).as_posix()] = p
    return out


def overlay_hashes(files: dict[str, Path]) -> dict[str, str]:
    return {rel: _sha256(p.read_bytes()) for rel, p in files.items()}


@dataclass
class Plan:
    """What a build invocation has to do."""

    action: str  # "noop" | "incremental" | "full"
    reason: str


def decide(
    *,
    force: bool,
    saved_config: str | None,
    new_config: str,
    configured: bool,
    saved_install: str | None,
    new_install: str,
    installed: bool,
) -> Plan:
    """The incremental-build rule (pure: unit-tested)."""
    if force:
        return Plan("full", "--force")
    if saved_config is None or not configured:
        return Plan("full", "no configured tree")
    if saved_config != new_config:
        return Plan("full", "patches, upstream tarball or configure flags changed")
    if saved_install == new_install and installed:
        return Plan("noop", "up to date")
    if not installed:
        return Plan("incremental", "install prefix missing")
    return Plan("incremental", "postgres/src changed")


@dataclass
class SyncResult:
    copied: list[str]
    reverted: list[str]
    removed: list[str]

    @property
    def changed(self) -> bool:
        return bool(self.copied or self.reverted or self.removed)


def sync_overlay(
    overlay: dict[str, Path],
    tree: Path,
    chown: Callable[[Path], None] = lambda p: None,
    subdir: str = "src",
) -> SyncResult:
    """Make ``<tree>/<subdir>`` reflect ``overlay`` (rel path -> source file).

    Copies only files whose content differs (so make's timestamps stay meaningful), keeps the
    pre-overlay version of each newly overlaid file in ``<tree>/.pgnvm/orig`` and restores it
    when the file leaves the overlay (with a fresh mtime, so make rebuilds it).
    """
    meta = tree / META
    manifest_path = meta / ("overlay.json" if subdir == "src" else f"overlay-{subdir}.json")
    orig_root = meta / "orig" if subdir == "src" else meta / f"orig-{subdir}"
    manifest: dict[str, dict] = {}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
    res = SyncResult([], [], [])

    def write(dst: Path, data: bytes, mode: int) -> None:
        created: list[Path] = []
        d = dst.parent
        while not d.exists():
            created.append(d)
            d = d.parent
        dst.parent.mkdir(parents=True, exist_ok=True)
        for c in reversed(created):
            chown(c)
        tmp = dst.with_name(dst.name + ".pgnvm-tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, mode)
        chown(tmp)
        os.replace(tmp, dst)

    for rel, src in overlay.items():
        dst = tree / subdir / rel
        data = src.read_bytes()
        mode = 0o755 if os.access(src, os.X_OK) else 0o644
        if rel not in manifest:
            had_original = dst.is_file()
            if had_original:
                backup = orig_root / rel
                write(backup, dst.read_bytes(), dst.stat().st_mode & 0o777)
            manifest[rel] = {"had_original": had_original}
        if not dst.is_file() or dst.read_bytes() != data:
            write(dst, data, mode)
            res.copied.append(rel)

    for rel in sorted(set(manifest) - set(overlay)):
        dst = tree / subdir / rel
        if manifest[rel].get("had_original"):
            backup = orig_root / rel
            write(dst, backup.read_bytes(), backup.stat().st_mode & 0o777)
            backup.unlink()
            res.reverted.append(rel)
        else:
            if dst.exists():
                dst.unlink()
            res.removed.append(rel)
        del manifest[rel]

    meta.mkdir(exist_ok=True)
    chown(meta)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return res


# --------------------------------------------------------------------------- side effects


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    # read-only + 0666: whoever created the lock file, root and the server user can both lock it
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            ui.info(f"waiting for another build holding {path}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write_stamp(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n")
    osuser.chown_to_server(path)


def _deb_src_available() -> bool:
    r = subprocess.run(
        ["apt-cache", "showsrc", SOURCE_PACKAGE], capture_output=True, text=True, check=False
    )
    return r.returncode == 0 and "Package:" in r.stdout


def ensure_source(refresh: bool = False) -> Path:
    """The upstream tarball to build from, downloading it with apt-get source if needed."""
    src = osuser.ensure_dir(paths.src_dir())
    tarball = None if refresh else pick_tarball(src.iterdir())
    if tarball is not None:
        return tarball
    if shutil.which("apt-get") is None:
        raise BuildError(
            f"no upstream tarball in {src} and no apt-get to fetch one; put a "
            "postgresql-18_18.*.orig.tar.* there"
        )
    if not _deb_src_available():
        if osuser.is_root():
            ui.info("apt-get update (deb-src index for postgresql-18)")
            subprocess.run(["apt-get", "update", "-qq"], check=False)
        if not _deb_src_available():
            raise BuildError(
                f"apt knows no source package {SOURCE_PACKAGE}: run ./pgnvm once as root (it "
                "writes /etc/apt/sources.list.d/pgnvm-src.sources and runs apt-get update)"
            )
    ui.step(f"apt-get source --download-only {SOURCE_PACKAGE} (into {src})")
    r = osuser.run_pg(
        ["apt-get", "source", "--download-only", SOURCE_PACKAGE],
        cwd=str(src),
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise BuildError(f"apt-get source failed:\n{r.stdout}{r.stderr}")
    tarball = pick_tarball(src.iterdir())
    if tarball is None:
        raise BuildError(f"apt-get source left no postgresql-18_18.*.orig.tar.* in {src}")
    return tarball


class _Builder:
    def __init__(self, flavour: str, tree: Path, prefix: Path, log: Path) -> None:
        self.flavour = flavour
        self.tree = tree
        self.prefix = prefix
        self.log = log

    def run(
        self,
        cmd: list[str],
        what: str,
        *,
        stdin: bytes | None = None,
        env_extra: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        t0 = time.monotonic()
        ui.step(what)
        env = dict(os.environ)
        env.update(env_extra or {})
        with open(self.log, "ab") as logf:
            logf.write(f"\n### {what}\n### $ {' '.join(cmd)}\n".encode())
            logf.flush()
            start = logf.tell()
            r = osuser.run_pg(
                cmd,
                cwd=str(cwd or self.tree),
                env=env,
                stdout=logf,
                stderr=subprocess.STDOUT,
                input=stdin,
                check=False,
            )
        if r.returncode != 0:
            ui.show_tail(self.log, 60, start)
            raise BuildError(f"{what} failed (exit {r.returncode}); full log: {self.log}")
        ui.info(f"   {what}: {ui.fmt_seconds(time.monotonic() - t0)}")


def _wipe(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def ensure_built(
    flavour: str = "release", force: bool = False, refresh_source: bool = False
) -> Path:
    """Build and install ``flavour`` if needed; returns the install prefix.

    A fast no-op when nothing changed since the last successful build.
    """
    if flavour not in paths.FLAVOURS:
        raise BuildError(f"unknown flavour {flavour!r}")
    t_start = time.monotonic()
    osuser.ensure_server_user()
    build_root = osuser.ensure_dir(paths.build_dir(flavour).parent)
    osuser.ensure_dir(paths.install_dir(flavour).parent)
    tree = paths.build_dir(flavour)
    prefix = paths.install_dir(flavour)

    with _lock(build_root / f".{flavour}.lock"):
        tarball = ensure_source(refresh=refresh_source)
        patch_files = list_patches(paths.PATCHES_DIR)
        patches = [(p.name, p.read_bytes()) for p in patch_files]
        args = configure_args(flavour, prefix)
        cenv = configure_env(flavour, tree)
        pf_files = prefetch_files(paths.PREFETCH_DIR)
        cstamp = config_stamp(tarball.name, patches, args, cenv, overlay_hashes(pf_files))
        overlay = overlay_files(paths.OVERLAY_DIR)
        contrib_overlay = overlay_files(paths.CONTRIB_OVERLAY_DIR)
        jobs = make_jobs()
        steps = make_steps(jobs)
        isteps = install_steps(prefix)
        # -jN is machine-dependent and does not change the result: keep it out of the stamp.
        istamp = install_stamp(
            cstamp,
            overlay_hashes(overlay)
            | {f"contrib/{k}": v for k, v in overlay_hashes(contrib_overlay).items()},
            [[a for a in s if not a.startswith("-j")] for s in steps + isteps],
        )
        meta = tree / META
        plan = decide(
            force=force,
            saved_config=_read(meta / "config.stamp"),
            new_config=cstamp,
            configured=(tree / "config.status").is_file(),
            saved_install=_read(meta / "install.stamp"),
            new_install=istamp,
            installed=(prefix / "bin" / "postgres").is_file(),
        )
        if plan.action == "noop":
            ui.info(f"{flavour}: up to date ({prefix})")
            return prefix

        ui.step(
            f"building {flavour} ({plan.action}: {plan.reason}) from {tarball.name}, "
            f"{len(patches)} patch(es), {len(overlay)} overlay file(s)"
        )
        log = tree / LOG_NAME
        b = _Builder(flavour, tree, prefix, log)

        if plan.action == "full":
            _wipe(tree)
            _wipe(prefix)
            osuser.ensure_dir(tree)
            log.write_bytes(b"")
            osuser.chown_to_server(log)
            b.run(
                ["tar", "-xf", str(tarball), "--strip-components=1", "-C", str(tree)],
                f"extract {tarball.name}",
            )
            for p in patch_files:
                b.run(
                    ["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch"],
                    f"apply patch {p.name}",
                    stdin=p.read_bytes(),
                )
            osuser.ensure_dir(meta)
            res = sync_overlay(overlay, tree, osuser.chown_to_server)
            cres = sync_overlay(contrib_overlay, tree, osuser.chown_to_server, "contrib")
            if res.copied or cres.copied:
                ui.info(
                    f"   overlay: copied {len(res.copied)} file(s) from postgres/src, "
                    f"{len(cres.copied)} from postgres/contrib"
                )
            sync_overlay(pf_files, tree, osuser.chown_to_server, PREFETCH_SUBDIR)
            b.run(prefetch_build_step(), "build libnvmprefetch (static)")
            b.run(["./configure", *args], f"configure ({flavour})", env_extra=cenv)
            _write_stamp(meta / "config.stamp", cstamp)
        else:
            with open(log, "ab") as f:
                f.write(f"\n### incremental build {time.ctime()}\n".encode())
            res = sync_overlay(overlay, tree, osuser.chown_to_server)
            cres = sync_overlay(contrib_overlay, tree, osuser.chown_to_server, "contrib")
            for kind, items in (
                ("copied", res.copied + [f"contrib/{c}" for c in cres.copied]),
                ("reverted", res.reverted + [f"contrib/{c}" for c in cres.reverted]),
                ("removed", res.removed + [f"contrib/{c}" for c in cres.removed]),
            ):
                if items:
                    ui.info(f"   overlay {kind}: {', '.join(items)}")

        (meta / "install.stamp").unlink(missing_ok=True)
        for s in steps:
            b.run(s, " ".join(a for a in s if not a.startswith("-j")))
        for s in isteps:
            b.run(s, " ".join(s))
        _write_stamp(meta / "install.stamp", istamp)
        ui.info(
            f"{flavour}: built and installed into {prefix} in "
            f"{ui.fmt_seconds(time.monotonic() - t_start)}"
        )
        return prefix


def bindir(flavour: str = "release") -> Path:
    return paths.install_dir(flavour) / "bin"
