"""``./pgnvm machine``: what this machine can and cannot measure, one line each.

* the nvm root (``--nvm-root`` / ``$PGNVM_NVM_ROOT``, else the tmpfs pgnvm mounts) and what
  it is (:mod:`bench.core.rootkind`): tmpfs emulation, DAX, or a page-cache file system;
* DAX / MAP_SYNC on that root (a MAP_SYNC mapping of a small file there);
* huge pages: tmpfs ``huge=always`` (transparent huge pages for shmem), the hugetlb pools;
* SMT siblings (prefetch mappings M2/M3), asked of the prefetching library's
  ``nvmpf-topology`` when an install has it, else read from sysfs;
* hardware performance counters (``perf_event_open``, as ``./pgnvm tpch`` opens them);
* NUMA nodes (a memory-only node is how CXL memory is usually met);
* the CPU's page checksum variants (AVX2, AVX-512 from /proc/cpuinfo).

The readers take their roots (``/sys``, ``/proc``) as parameters for the tests.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench.core import paths, rootkind, storage, topology

SYS = Path("/sys")
PROC = Path("/proc")


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _selected(text: str) -> str:
    """The ``[chosen]`` word of a sysfs choice list (``always [madvise] never``)."""
    for w in text.split():
        if w.startswith("[") and w.endswith("]"):
            return w[1:-1]
    return text or "?"


def root_line(root: rootkind.RootKind) -> str:
    return root.summary()


def map_sync_line(root: rootkind.RootKind, directory: Path) -> str:
    """MAP_SYNC on the root (probed here, whatever the root's kind)."""
    if not directory.is_dir():
        return f"not probed: {directory} does not exist yet (pgnvm mounts it on first use)"
    ok, why = rootkind.probe_map_sync(directory)
    if ok:
        extra = "" if root.kind == rootkind.DAX else " (but no dax mount option?)"
        return f"yes: {directory} maps with MAP_SYNC (DAX){extra}"
    if ok is False:
        return (
            f"no: {why}; libpmem2 persists with msync there (page granularity); cache-line "
            "persists only when forced (the _cl configurations)"
        )
    return f"not probed: {why}"


def huge_pages_line(sys_root: Path = SYS) -> str:
    mm = sys_root / "kernel" / "mm"
    thp = _selected(_read(mm / "transparent_hugepage" / "enabled"))
    shmem = _selected(_read(mm / "transparent_hugepage" / "shmem_enabled"))
    pools = []
    for d in sorted((mm / "hugepages").glob("hugepages-*")):
        n = _read(d / "nr_hugepages") or "?"
        free = _read(d / "free_hugepages") or "?"
        pools.append(f"{d.name.removeprefix('hugepages-')}: {n} ({free} free)")
    if not thp or thp == "?":
        tmpfs = "no transparent huge pages: tmpfs huge=always (nvm-2m, --huge) not available"
    elif shmem == "deny":
        tmpfs = "shmem_enabled=deny: tmpfs huge=always (nvm-2m, --huge) not available"
    else:
        tmpfs = "tmpfs huge=always (nvm-2m, --huge) available"
    return f"{tmpfs}; THP enabled={thp}, shmem_enabled={shmem}; hugetlb pools: " + (
        ", ".join(pools) or "none"
    )


def smt_line(bindir: Path | None, sys_root: Path = SYS) -> str:
    """SMT from the library's own tool when installed, else sysfs."""
    if bindir is not None and (bindir / topology.TOOL).is_file():
        try:
            t = topology.current(bindir)
        except topology.TopologyUnknown as e:
            src = f"{topology.TOOL} failed ({e}); "
        else:
            maps = ", ".join(
                f"{k.upper()} " + ("yes" if v.available else f"NO (runs as {v.effective.upper()})")
                for k, v in sorted(t.mappings.items())
            )
            return (
                f"{'yes' if t.smt else 'no'} ({t.physical_cores} physical cores, CPUs "
                f"{t.usable_cpus}; {topology.TOOL}): {maps}"
            )
    else:
        src = f"{topology.TOOL} not installed (./pgnvm build); "
    cpus = sys_root / "devices" / "system" / "cpu"
    sib = {_read(d / "topology" / "thread_siblings_list") for d in sorted(cpus.glob("cpu[0-9]*"))}
    sib.discard("")
    smt = any("," in s or "-" in s for s in sib)
    return (
        f"{'yes' if smt else 'no'} ({src}sysfs: sibling sets {', '.join(sorted(sib)) or '?'}): "
        + ("M2/M3 can run" if smt else "M2/M3 not available (they need an SMT sibling)")
    )


def counters_line() -> str:
    from bench.tpch import measure  # the detection ./pgnvm tpch uses

    why = measure.hardware_unavailable_reason()
    if why is None:
        return "yes: perf_event_open(cycles) works; tpch reports backend counters"
    return f"no: {why}"


def numa_line(sys_root: Path = SYS) -> str:
    nodes = sorted(
        (sys_root / "devices" / "system" / "node").glob("node[0-9]*"),
        key=lambda d: int(d.name[4:]),
    )
    if not nodes:
        return "no NUMA information (one node assumed)"
    parts = []
    for d in nodes:
        cpus = _read(d / "cpulist")
        mem = ""
        for line in _read(d / "meminfo").splitlines():
            if "MemTotal:" in line:
                kb = int(line.split()[-2])
                mem = f"{kb / (1 << 20):.1f} GiB"
        kind = f"CPUs {cpus}" if cpus else "no CPUs: memory-only (CXL or far memory?)"
        parts.append(f"{d.name} {mem or '?'}, {kind}")
    tail = "; pin with numactl --cpunodebind/--membind (docs/hardware.md)" if len(nodes) > 1 else ""
    return f"{len(nodes)}: " + "; ".join(parts) + tail


def dax_node_line(root: rootkind.RootKind, sys_root: Path = SYS) -> str | None:
    """The NUMA node of a DAX root's device, when sysfs says."""
    if root.kind != rootkind.DAX or root.mount is None:
        return None
    dev = root.mount.device
    if not dev.startswith("/dev/"):
        return None
    name = Path(os.path.realpath(dev)).name
    node = _read(sys_root / "class" / "block" / name / "device" / "numa_node")
    if not node:
        whole = name.rstrip("0123456789").removesuffix("p")  # pmem0p1 -> pmem0
        node = _read(sys_root / "class" / "block" / whole / "device" / "numa_node")
    return f"{name} is on NUMA node {node}" if node and node != "-1" else None


def checksum_line(cpuinfo: str) -> str:
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags = set(value.split())
            break
    have = ["scalar"]
    if "avx2" in flags:
        have.append("AVX2")
    if "avx512f" in flags:
        have.append("AVX-512")
    missing = [n for f, n in (("avx2", "AVX2"), ("avx512f", "AVX-512")) if f not in flags]
    return f"{', '.join(have)} (the server picks the widest: {have[-1]})" + (
        f"; not on this CPU: {', '.join(missing)}" if missing else ""
    )


def _bindir() -> Path | None:
    for fl in paths.FLAVOURS:
        b = paths.install_dir(fl) / "bin"
        if (b / topology.TOOL).is_file():
            return b
    return None


def facts(huge: bool = False) -> list[tuple[str, str]]:
    """(what, the line) for this machine and this command's nvm root."""
    root_path = storage.default_nvm_root(huge)
    root = storage.describe_nvm_root(huge)
    out = [("nvm root", root_line(root))]
    out.append(("DAX / MAP_SYNC", map_sync_line(root, root_path)))
    node = dax_node_line(root)
    if node:
        out.append(("root's NUMA node", node))
    out.append(("huge pages", huge_pages_line()))
    out.append(("SMT (M2/M3)", smt_line(_bindir())))
    out.append(("hardware counters", counters_line()))
    out.append(("NUMA nodes", numa_line()))
    out.append(("checksum variants", checksum_line(_read(PROC / "cpuinfo"))))
    for c in root.caveats():
        out.append(("caveat", c))
    return out


def cmd_machine(args: argparse.Namespace) -> int:
    storage.use_root_option(args.nvm_root, 0, what="./pgnvm machine")
    got = facts(args.huge)
    if args.json:
        doc = {k: v for k, v in got if k != "caveat"}
        doc["caveats"] = [v for k, v in got if k == "caveat"]  # type: ignore[assignment]
        print(json.dumps(doc, indent=2))
        return 0
    width = max(len(k) for k, _ in got)
    for k, v in got:
        print(f"{k:<{width}}  {v}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "machine",
        help="what this machine can and cannot measure (nvm root, DAX, huge pages, SMT, "
        "counters, NUMA, checksums)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    storage.add_root_argument(p)
    p.add_argument("--huge", action="store_true", help="describe the huge-page tmpfs root")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_machine)
