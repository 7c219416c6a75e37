"""The one reader of ``/proc``: processes, their threads and the machine's counters.

Every function takes the ``/proc`` root as an argument (default :data:`PROC`), so unit tests
point it at a fake tree. A file that cannot be read means the process (or thread) is gone:
the functions return ``None`` / empty values then, never raise.

* ``/proc/<pid>/stat`` (:func:`stat`, :func:`parse_stat`): ``pid (comm) state ppid ...``;
  comm may hold spaces and parentheses, so it ends at the *last* ``)``. A process that
  exited but was not reaped yet is a zombie (state ``Z``); once reaped, ``/proc/<pid>`` is
  gone.
* ``/proc/<pid>/task`` (:func:`tasks`): the threads; the main thread's tid is the pid.
* :class:`ProcSample` (:func:`read_sample`, :func:`sample`, :func:`thread_samples`): user /
  system CPU, faults, reaped children's CPU (``stat``), on-CPU time (``schedstat``, ns) and
  context switches (``status``) of a process or of one thread (``task/<tid>``).
* ``cmdline`` (:func:`argv`; :func:`cmdline` is the PostgreSQL process title), ``comm``,
  ``cwd``, :func:`children` of a process; :func:`alive`, :func:`is_zombie`;
  :func:`cpus_allowed` (``status``: the CPUs it may run on, :func:`parse_cpu_list`).
* Memory of a process: :func:`memory_status` (``status``: RssAnon, RssFile, RssShmem),
  :func:`shared_segments` (``maps``: the shared anonymous mappings, PostgreSQL's shared
  memory), :func:`vma_fields` (``smaps``: what one process has of one
  mapping; of a hugetlb mapping, :func:`hugetlb_page_size`, its huge pages are
  ``Shared_Hugetlb`` / ``Private_Hugetlb``, not ``Rss``: :func:`hugetlb_mapped`),
  :func:`resident_bytes` (the mapping's pages resident in DRAM, whoever touched them:
  ``mincore(2)`` on ``map_files``, which needs CAP_SYS_ADMIN) and, for a hugetlb mapping,
  where that mincore sees nothing, :func:`hugetlb_allocated_bytes` (the huge pages its
  object holds, from ``st_blocks`` of ``map_files``).
* The machine: :func:`meminfo`, :func:`hugepages` (the hugetlb pool), :func:`mem_total_bytes`,
  :func:`loadavg`, :func:`cpu_busy_seconds` (``/proc/stat``), :func:`cpu_model`,
  :func:`sysctl`.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# --------------------------------------------------------------------------- stat


@dataclass(frozen=True)
class Stat:
    """A parsed ``/proc/<pid>/stat`` line: comm, state, ppid, and every field from 3
    (state) on in ``fields`` (field N of proc(5) is ``fields[N - 3]``)."""

    comm: str
    state: str
    ppid: int
    fields: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def number(self, n: int) -> int:
        """Field ``n`` of proc(5) (1-based: 10 minflt, 14 utime, 22 starttime, ...)."""
        return int(self.fields[n - 3])


def parse_stat(text: str) -> Stat:
    """``/proc/<pid>/stat``: raises ValueError on anything else."""
    head, sep, rest = text.rpartition(")")
    if not sep or "(" not in head:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    fields = rest.split()
    if len(fields) < 2:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    return Stat(
        comm=head.split("(", 1)[1], state=fields[0], ppid=int(fields[1]), fields=tuple(fields)
    )


def stat(pid: int, root: Path = PROC) -> Stat | None:
    """The stat of process ``pid``, None once it is gone."""
    try:
        return parse_stat((root / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def state(pid: int, root: Path = PROC) -> str | None:
    """The process state letter (``R``, ``S``, ``Z``...), None once it is gone."""
    st = stat(pid, root)
    return st.state if st is not None else None


def is_zombie(pid: int, root: Path = PROC) -> bool:
    return state(pid, root) == "Z"


def exists(pid: int, root: Path = PROC) -> bool:
    """``/proc/<pid>`` is there (running, or a zombie not reaped yet). Also true for the tid
    of a live thread of another process."""
    return (root / str(pid)).exists()


def wait_gone(pid: int, timeout: float = 10.0, root: Path = PROC) -> bool:
    """Wait until process ``pid`` has exited and been reaped (``/proc/<pid>`` is gone);
    False if it is still there after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not exists(pid, root):
            return True
        time.sleep(0.005)
    return False


def alive(pid: int, root: Path = PROC) -> bool:
    """Whether ``pid`` exists and is not a zombie (a killed process not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return state(pid, root) not in ("Z", "X")


def reaped_or_child_zombie(pid: int, parent: int, root: Path = PROC) -> bool:
    """Whether ``pid`` has left the process table, or is a zombie that only ``parent`` (its
    parent, e.g. this very process) can reap."""
    st = stat(pid, root)
    if st is None:
        return True
    return st.state in ("Z", "X") and st.ppid == parent


# --------------------------------------------------------------------------- processes


def pids(root: Path = PROC) -> list[int]:
    """Every process id, ascending."""
    try:
        return sorted(int(e.name) for e in root.iterdir() if e.name.isdigit())
    except OSError:
        return []


def children(ppid: int, root: Path = PROC) -> list[int]:
    """The processes whose parent is ``ppid`` (e.g. the postmaster's server processes)."""
    out = []
    for pid in pids(root):
        st = stat(pid, root)
        if st is not None and st.ppid == ppid:
            out.append(pid)
    return out


def tasks(pid: int, root: Path = PROC) -> set[int] | None:
    """The thread ids of process ``pid`` (None once the process is gone)."""
    try:
        return {int(e.name) for e in (root / str(pid) / "task").iterdir() if e.name.isdigit()}
    except OSError:
        return None


def argv(pid: int, root: Path = PROC) -> list[str]:
    """The arguments of ``pid`` (``[]`` if gone). PostgreSQL rewrites a server process's
    argv into its title: ``['postgres: io worker 0']``."""
    try:
        raw = (root / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def cmdline(pid: int, root: Path = PROC) -> str:
    """The command line as one string (a server process's title), "" if gone."""
    try:
        raw = (root / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def comm(pid: int, root: Path = PROC) -> str:
    try:
        return (root / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def cwd(pid: int, root: Path = PROC) -> str | None:
    """The working directory of ``pid``; None if gone, a zombie, or not ours to look at."""
    try:
        return os.readlink(root / str(pid) / "cwd")
    except OSError:
        return None


def parse_cpu_list(text: str) -> set[int]:
    """A CPU list as the kernel and ``taskset -c`` write it (``0-1,4``) as a set of CPUs;
    ValueError if it is not one."""
    out: set[int] = set()
    for part in text.strip().split(","):
        lo, _, hi = part.strip().partition("-")
        first, last = int(lo), int(hi or lo)
        if first < 0 or last < first:
            raise ValueError(f"not a CPU list: {text!r}")
        out.update(range(first, last + 1))
    return out


def cpus_allowed(pid: int, root: Path = PROC) -> str | None:
    """The CPUs ``pid`` may run on, as ``status`` lists them (``Cpus_allowed_list``, e.g.
    ``0-1``: its affinity, what ``taskset -p`` sets); None once it is gone."""
    try:
        text = (root / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name == "Cpus_allowed_list":
            return value.strip()
    return None


# --------------------------------------------------------------------------- CPU samples


@dataclass
class ProcSample:
    """What /proc says about the CPU use of a process or of one of its threads."""

    utime: float  # seconds
    stime: float
    minflt: int
    majflt: int
    cutime: float  # reaped children
    cstime: float
    starttime: int  # clock ticks since boot (identifies the process with the pid)
    runtime_ns: int  # on-CPU time (schedstat), 0 if unavailable
    vcsw: int  # voluntary context switches
    nvcsw: int

    def minus(self, before: ProcSample) -> dict[str, float]:
        return {
            "utime_s": self.utime - before.utime,
            "stime_s": self.stime - before.stime,
            "minflt": self.minflt - before.minflt,
            "majflt": self.majflt - before.majflt,
            "runtime_s": (self.runtime_ns - before.runtime_ns) / 1e9,
            "vcsw": self.vcsw - before.vcsw,
            "nvcsw": self.nvcsw - before.nvcsw,
        }


ZERO = ProcSample(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def read_sample(d: Path) -> ProcSample | None:
    """The sample of the process or thread whose /proc directory is ``d``
    (``/proc/<pid>`` sums all threads, ``/proc/<pid>/task/<tid>`` is one); None if gone."""
    try:
        st = parse_stat((d / "stat").read_text())
        minflt, majflt = st.number(10), st.number(12)
        utime, stime, cutime, cstime = (st.number(n) for n in (14, 15, 16, 17))
        starttime = st.number(22)
    except (OSError, ValueError, IndexError):
        return None
    runtime = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        runtime = int((d / "schedstat").read_text().split()[0])
    vcsw = nvcsw = 0
    with contextlib.suppress(OSError, ValueError):
        for line in (d / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vcsw = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                nvcsw = int(line.split()[1])
    return ProcSample(
        utime=utime / CLK_TCK,
        stime=stime / CLK_TCK,
        minflt=minflt,
        majflt=majflt,
        cutime=cutime / CLK_TCK,
        cstime=cstime / CLK_TCK,
        starttime=starttime,
        runtime_ns=runtime,
        vcsw=vcsw,
        nvcsw=nvcsw,
    )


def sample(pid: int, root: Path = PROC) -> ProcSample | None:
    """The sample of process ``pid`` as a whole (all its threads); None if gone."""
    return read_sample(root / str(pid))


def thread_samples(pid: int, root: Path = PROC) -> dict[int, ProcSample]:
    """tid -> sample of every thread of process ``pid`` (empty if it is gone)."""
    out: dict[int, ProcSample] = {}
    for tid in sorted(tasks(pid, root) or ()):
        s = read_sample(root / str(pid) / "task" / str(tid))
        if s is not None:  # a thread may exit between listing and reading it
            out[tid] = s
    return out


# --------------------------------------------------------------------------- memory

#: the fields of ``/proc/<pid>/status`` :func:`memory_status` returns (bytes)
MEMORY_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def memory_status(pid: int, root: Path = PROC) -> dict[str, int] | None:
    """Resident memory of process ``pid`` in bytes (:data:`MEMORY_FIELDS` of its ``status``:
    RssAnon its private memory, RssShmem the shared memory it has mapped: System V and
    shared anonymous mappings *and* tmpfs files, RssFile other files); None once it is
    gone. Cheap: the kernel keeps these as counters."""
    try:
        text = (root / str(pid) / "status").read_text()
    except OSError:
        return None
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name in MEMORY_FIELDS:
            with contextlib.suppress(ValueError, IndexError):
                out[name] = int(value.split()[0]) * 1024  # kB
    return out


#: the names ``maps`` gives a shared anonymous mapping (``shared_memory_type = mmap``, with
#: and without huge pages) and a System V segment
_ANON_SHARED = ("/dev/zero (deleted)", "/anon_hugepage (deleted)", "/SYSV")


def shared_segments(pid: int, root: Path = PROC) -> list[tuple[int, int]]:
    """(start, end) of every shared anonymous mapping of ``pid``, largest first: of a
    PostgreSQL postmaster, its shared memory (the main segment with the buffer pool first,
    the small System V one, any other made before the children were forked; every server
    process maps them at the same addresses). Not a tmpfs file (the emulated persistent
    memory, POSIX DSM segments). Empty if it has none or is gone."""
    out = [(a, b) for a, b, name in _shared_maps(pid, root) if name.startswith(_ANON_SHARED)]
    return sorted(out, key=lambda seg: seg[0] - seg[1])


def _shared_maps(pid: int, root: Path) -> list[tuple[int, int, str]]:
    """(start, end, name) of every shared mapping in ``pid``'s ``maps`` (empty if gone)."""
    out: list[tuple[int, int, str]] = []
    try:
        text = (root / str(pid) / "maps").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or len(parts[1]) < 4 or parts[1][3] != "s":
            continue
        a, _, b = parts[0].partition("-")
        out.append((int(a, 16), int(b, 16), parts[5].strip()))
    return out


def hugetlb_segments(pid: int, root: Path = PROC) -> set[int]:
    """The starts of ``pid``'s shared anonymous mappings in hugetlb pages, by their name in
    ``maps`` (``/anon_hugepage``; cheap: ``maps`` walks no page tables, ``smaps`` does).
    Empty if it has none or is gone."""
    return {a for a, _, name in _shared_maps(pid, root) if name.startswith("/anon_hugepage")}


def vma_fields(pid: int, start: int, root: Path = PROC) -> dict[str, int] | None:
    """The sizes ``smaps`` gives the mapping of ``pid`` at ``start``, in bytes (``Size``,
    ``KernelPageSize``, ``Rss``, ``Shared_Hugetlb``...: every ``Name: N kB`` line of it).
    None if the process or the mapping is gone."""
    head = f"{start:x}-"
    inside = False
    out: dict[str, int] | None = None
    try:
        text = (root / str(pid) / "smaps").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if not line[:1].isupper():  # a mapping's first line: "start-end perms ..."
            if out is not None:
                break
            inside = line.startswith(head)
            if inside:
                out = {}
        elif inside and out is not None:
            name, sep, value = line.partition(":")
            parts = value.split()
            if sep and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                out[name] = int(parts[0]) * 1024
    return out


def hugetlb_mapped(fields: dict[str, int]) -> int:
    """The huge pages a mapping's :func:`vma_fields` show mapped, in bytes: its
    ``Shared_Hugetlb`` + ``Private_Hugetlb`` (a page only this process maps is private,
    even in a shared mapping)."""
    return fields.get("Shared_Hugetlb", 0) + fields.get("Private_Hugetlb", 0)


def hugetlb_page_size(pid: int, start: int, root: Path = PROC) -> int | None:
    """The page size of ``pid``'s mapping at ``start`` if it is a hugetlb mapping
    (``KernelPageSize`` in ``smaps`` above the base page: PostgreSQL's main segment with
    ``huge_pages = on|try`` and ``vm.nr_hugepages`` reserved, named ``/anon_hugepage``),
    else None (base pages, a transparent huge page included, or gone)."""
    fields = vma_fields(pid, start, root)
    size = (fields or {}).get("KernelPageSize")
    return size if size is not None and size > mmap.PAGESIZE else None


_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return _libc


def resident_bytes(pid: int, segment: tuple[int, int], root: Path = PROC) -> int | None:
    """Bytes of ``pid``'s shared mapping ``segment`` resident in DRAM, touched by any
    process, living or exited: the mapping's object opened through
    ``/proc/<pid>/map_files/<start>-<end>``, mapped here read-only (no page is touched) and
    asked with ``mincore(2)``. None where that is not possible (not CAP_SYS_ADMIN, the
    process or mapping gone)."""
    start, end = segment
    length = end - start
    try:
        fd = os.open(root / str(pid) / "map_files" / f"{start:x}-{end:x}", os.O_RDONLY)
    except OSError:
        return None
    try:
        libc = _c()
        addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return None
        try:
            page = mmap.PAGESIZE
            vec = ctypes.create_string_buffer((length + page - 1) // page)
            if libc.mincore(addr, length, vec) != 0:
                return None
            flags = vec.raw
            return (len(flags) - flags.count(0)) * page  # bit 0: resident (others reserved)
        finally:
            libc.munmap(addr, length)
    finally:
        os.close(fd)


def hugetlb_allocated_bytes(pid: int, segment: tuple[int, int], root: Path = PROC) -> int | None:
    """Bytes of huge pages allocated to ``pid``'s hugetlb mapping ``segment``, touched by any
    process, living or exited: ``st_blocks`` of its object, through
    ``/proc/<pid>/map_files/<start>-<end>`` (hugetlbfs adds a huge page's blocks when it
    allocates the page). What :func:`resident_bytes` gives for base pages: mincore asks
    the page tables of the asking process for a hugetlb mapping, which has touched nothing.
    None where that is not possible (not CAP_SYS_ADMIN, the process or mapping gone).

    Seen on Linux 6.18 with ``vm.nr_hugepages = 16``, a MAP_SHARED | MAP_ANONYMOUS |
    MAP_HUGETLB mapping of 8 huge pages, 3 touched by its process and 2 more by a child that
    exited: ``st_blocks`` × 512 = 6 MB, then 10 MB; :func:`resident_bytes` 0 both times
    (the process's own mincore: 1,536 base pages, its 3); smaps ``Rss`` 0 and
    ``Private_Hugetlb`` 6,144 kB (a page only one process maps is private, even in a shared
    mapping), the child's 4,096 kB; ``RssShmem`` 0; ``HugePages_Rsvd`` 8 at the mmap, all of
    it reserved before any touch."""
    start, end = segment
    try:
        st = os.stat(root / str(pid) / "map_files" / f"{start:x}-{end:x}")
    except OSError:
        return None
    return st.st_blocks * 512


# --------------------------------------------------------------------------- the machine


def meminfo(root: Path = PROC) -> dict[str, str]:
    """``/proc/meminfo`` as name -> value text (``{"MemTotal": "24576000 kB", ...}``)."""
    out: dict[str, str] = {}
    try:
        text = (root / "meminfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip()] = value.strip()
    return out


def hugepages(root: Path = PROC) -> dict[str, int] | None:
    """The hugetlb pool of the default huge page size in ``/proc/meminfo``: ``total``,
    ``free``, ``rsvd`` (promised to mappings, not allocated yet), ``surp`` (pages) and
    ``page_bytes``; None when /proc does not say."""
    m = meminfo(root)
    try:
        out = {
            k: int(m[f"HugePages_{k.capitalize()}"].split()[0])
            for k in ("total", "free", "rsvd", "surp")
        }
        out["page_bytes"] = int(m["Hugepagesize"].split()[0]) * 1024
    except (KeyError, ValueError, IndexError):
        return None
    return out


def mem_total_bytes(root: Path = PROC, default: int = 4 << 30) -> int:
    """MemTotal in bytes (``default`` when /proc does not say)."""
    try:
        return int(meminfo(root)["MemTotal"].split()[0]) * 1024
    except (KeyError, ValueError, IndexError):
        return default


def mem_available_bytes(root: Path = PROC) -> int | None:
    """MemAvailable in bytes: what the kernel estimates can be allocated without swapping
    (free memory + reclaimable page cache; tmpfs files and shared memory are not in it);
    None when /proc does not say."""
    try:
        return int(meminfo(root)["MemAvailable"].split()[0]) * 1024
    except (KeyError, ValueError, IndexError):
        return None


def loadavg(root: Path = PROC) -> float | None:
    """The 1-minute load average (other work on the machine disturbs the timings)."""
    try:
        return float((root / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_busy_seconds(root: Path = PROC) -> float | None:
    """CPU seconds the whole machine has spent busy since boot, summed over its CPUs: the
    ``cpu`` line of ``/proc/stat`` (user, nice, system, irq, softirq; idle, iowait and the
    hypervisor's steal are not busy, guest time is already in user). None if unreadable."""
    try:
        for line in (root / "stat").read_text().splitlines():
            if line.startswith("cpu "):
                f = [int(x) for x in line.split()[1:8]]
                user, nice, system, _idle, _iowait, irq, softirq = f
                return (user + nice + system + irq + softirq) / CLK_TCK
    except (OSError, ValueError):
        return None
    return None


def cpu_model(root: Path = PROC) -> str:
    """The first ``model name`` of ``/proc/cpuinfo`` ("" if none)."""
    try:
        text = (root / "cpuinfo").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def sysctl(name: str, root: Path = PROC) -> str | None:
    """A kernel setting, e.g. ``sysctl("kernel.perf_event_paranoid")`` ->
    ``/proc/sys/kernel/perf_event_paranoid`` stripped; None if unreadable."""
    try:
        return (root / "sys" / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None
