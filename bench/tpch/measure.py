"""What is measured around one query execution, besides wall-clock time.

/proc is read by :mod:`bench.core.procfs` (:class:`~bench.core.procfs.ProcSample`: a
process's or thread's user/system CPU time, minor/major page faults, on-CPU time from
schedstat, context switches; readable for any process as root, for the server user's
processes otherwise). Here:

* :func:`backend_delta` - over two :func:`~bench.core.procfs.thread_samples` of the
  backend (``/proc/<pid>/task/<tid>/...``): the measured backend's main thread (tid == pid)
  is the computation thread; every other thread of the backend process is a prefetch helper
  (``nvm_prefetch = helper``: created during the query on its first redirected read, alive
  until the connection closes, so they are still there when the query has ended). The
  process-wide ``/proc/<pid>/stat`` would sum both.
* :func:`cluster_sample` - the same for every child of the postmaster, grouped by backend
  type, and the postmaster's *reaped children* times (``cutime``/``cstime``): processes that
  exit during the query (parallel workers) are counted there once the postmaster has
  waited for them.
* :class:`PerfCounters` - hardware counters (cycles, instructions, stalled cycles, LLC and
  L1D read misses; user and kernel counted apart) and software counters of one process,
  with ``perf_event_open(2)`` through ctypes: no ``perf`` binary needed. A counter the
  machine does not have (a VM without a virtual PMU) is recorded as unavailable with the
  kernel's reason; the run goes on.
* :func:`stat_io_snapshot` / :func:`stat_io_delta` - ``pg_stat_io`` before/after.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import struct
from decimal import Decimal
from typing import Any

import psycopg

from bench.core import procfs
from bench.core.servercpu import (  # noqa: F401 - re-exported: tpch's measure API
    ClusterSample,
    cluster_delta,
    cluster_sample,
    group_of,
    others_cpu_total,
)

# --------------------------------------------------------------------------- /proc

_SUMMED = ("utime_s", "stime_s", "minflt", "majflt", "runtime_s", "vcsw", "nvcsw")


def backend_delta(
    pid: int, before: dict[int, procfs.ProcSample], after: dict[int, procfs.ProcSample]
) -> tuple[dict[str, float] | None, dict[str, Any]]:
    """(main thread's delta, helper threads' summed delta) of backend ``pid`` between two
    :func:`thread_samples`. The main thread (tid == pid) is the computation thread; every
    other thread is a helper: one that is in both samples (same start time) counts its
    difference, one that started in between counts from zero. Helpers that exited in
    between are not seen (libnvmprefetch's live until the process exits). The helper dict
    has ``threads`` (how many were seen after the query) and ``tids``."""
    main: dict[str, float] | None = None
    if pid in before and pid in after:
        main = after[pid].minus(before[pid])
    helpers: dict[str, Any] = dict.fromkeys(_SUMMED, 0.0)
    helpers["minflt"] = helpers["majflt"] = helpers["vcsw"] = helpers["nvcsw"] = 0
    tids = []
    for tid, s in sorted(after.items()):
        if tid == pid:
            continue
        prev = before.get(tid)
        base = prev if prev is not None and prev.starttime == s.starttime else procfs.ZERO
        d = s.minus(base)
        for k in _SUMMED:
            helpers[k] += d[k]
        tids.append(tid)
    helpers["threads"] = len(tids)
    helpers["tids"] = tids
    for k in ("utime_s", "stime_s", "runtime_s"):
        helpers[k] = round(helpers[k], 6)
    return main, helpers


# --------------------------------------------------------------------------- perf_event_open

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_HW_CACHE = 3
PERF_FORMAT_TOTAL_TIME_ENABLED = 1
PERF_FORMAT_TOTAL_TIME_RUNNING = 2
PERF_FLAG_FD_CLOEXEC = 8
IOC_ENABLE, IOC_DISABLE, IOC_RESET = 0x2400, 0x2401, 0x2403
_SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_F_DISABLED, _F_EXCLUDE_USER, _F_EXCLUDE_KERNEL, _F_EXCLUDE_HV = 1, 1 << 4, 1 << 5, 1 << 6


def _cache(cache_id: int, op: int, result: int) -> int:
    return cache_id | (op << 8) | (result << 16)


#: name -> (type, config). Hardware events are opened twice, user-only and kernel-only.
HW_EVENTS: dict[str, tuple[int, int]] = {
    "cycles": (PERF_TYPE_HARDWARE, 0),
    "instructions": (PERF_TYPE_HARDWARE, 1),
    "stalled_cycles_frontend": (PERF_TYPE_HARDWARE, 7),
    "stalled_cycles_backend": (PERF_TYPE_HARDWARE, 8),
    "llc_read_misses": (PERF_TYPE_HW_CACHE, _cache(2, 0, 1)),
    "l1d_read_misses": (PERF_TYPE_HW_CACHE, _cache(0, 0, 1)),
}
SW_EVENTS: dict[str, tuple[int, int]] = {
    "task_clock_ns": (PERF_TYPE_SOFTWARE, 1),
    "page_faults": (PERF_TYPE_SOFTWARE, 2),
    "context_switches": (PERF_TYPE_SOFTWARE, 3),
    "cpu_migrations": (PERF_TYPE_SOFTWARE, 4),
}


def counter_names() -> list[str]:
    names = [f"{n}_{m}" for n in HW_EVENTS for m in ("user", "kernel")]
    return names + list(SW_EVENTS)


_libc: ctypes.CDLL | None = None


def _syscall_nr() -> int | None:
    return _SYSCALL_NR.get(platform.machine())


def perf_event_open(
    ptype: int, config: int, pid: int, exclude_user: bool = False, exclude_kernel: bool = False
) -> int:
    """Open a disabled counter on ``pid`` (any CPU); returns the fd or raises OSError."""
    global _libc
    nr = _syscall_nr()
    if nr is None:
        raise OSError(
            errno.ENOSYS, f"perf_event_open: unknown syscall number on {platform.machine()}"
        )
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    flags = _F_DISABLED | _F_EXCLUDE_HV
    if exclude_user:
        flags |= _F_EXCLUDE_USER
    if exclude_kernel:
        flags |= _F_EXCLUDE_KERNEL
    read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config,
    # sample_period, sample_type, read_format, flag bits, wakeup_events, bp_type, config1
    attr = struct.pack("<IIQQQQQIIQ", ptype, 64, config, 0, 0, read_format, flags, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 64)
    fd = _libc.syscall(
        ctypes.c_long(nr),
        buf,
        ctypes.c_int(pid),
        ctypes.c_int(-1),
        ctypes.c_int(-1),
        ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC),
    )
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(fd)


def read_counter(fd: int) -> tuple[int, int, int]:
    """(value, time enabled, time running) of a counter fd."""
    data = os.read(fd, 24)
    v, en, run = struct.unpack("<QQQ", data)
    return v, en, run


def scaled(value: int, enabled: int, running: int) -> float | None:
    """The counter value extrapolated for multiplexing (None if it never ran)."""
    if running == 0:
        return None if enabled else 0.0
    return value * enabled / running


_hw_probe: str | bool | None = False  # False: not probed; None: available; str: why not


def hardware_unavailable_reason() -> str | None:
    """None when hardware counters can be opened on this machine, else why not."""
    global _hw_probe
    if _hw_probe is False:
        try:
            fd = perf_event_open(PERF_TYPE_HARDWARE, 0, 0)
            os.close(fd)
            _hw_probe = None
        except OSError as e:
            _hw_probe = (
                f"perf_event_open(cycles) failed: {e.strerror or e} "
                f"(errno {e.errno}); no hardware performance counters on this "
                "machine (e.g. a VM without a virtual PMU) or not permitted "
                f"(kernel.perf_event_paranoid={_paranoid()})"
            )
    return _hw_probe if isinstance(_hw_probe, str) else None


def _paranoid() -> str:
    return procfs.sysctl("kernel.perf_event_paranoid") or "?"


class PerfCounters:
    """Counters attached to one process for the duration of a query."""

    def __init__(self, pid: int, hardware: bool = True) -> None:
        self.pid = pid
        self.fds: dict[str, int] = {}
        self.errors: dict[str, str] = {}
        hw_reason = hardware_unavailable_reason() if hardware else "disabled"
        for name, (t, c) in HW_EVENTS.items():
            for mode in ("user", "kernel"):
                key = f"{name}_{mode}"
                if hw_reason is not None:
                    self.errors[key] = hw_reason
                    continue
                self._open(key, t, c, exclude_user=mode == "kernel", exclude_kernel=mode == "user")
        for name, (t, c) in SW_EVENTS.items():
            self._open(name, t, c)

    def _open(self, key: str, t: int, c: int, **kw: bool) -> None:
        try:
            self.fds[key] = perf_event_open(t, c, self.pid, **kw)
        except OSError as e:
            self.errors[key] = f"{e.strerror or e} (errno {e.errno})"

    def start(self) -> None:
        for fd in self.fds.values():
            fcntl.ioctl(fd, IOC_RESET, 0)
            fcntl.ioctl(fd, IOC_ENABLE, 0)

    def stop(self) -> dict[str, Any]:
        """Disable, read and close; returns {"counters": {name: value|None},
        "unavailable": {name: reason}, "multiplexed": [names]}."""
        values: dict[str, float | None] = {}
        mux: list[str] = []
        for key, fd in self.fds.items():
            try:
                fcntl.ioctl(fd, IOC_DISABLE, 0)
                v, en, run = read_counter(fd)
                values[key] = scaled(v, en, run)
                if run and run < en:
                    mux.append(key)
            except OSError as e:
                values[key] = None
                self.errors[key] = str(e)
        self.close()
        for key in self.errors:
            values.setdefault(key, None)
        hw_reason = hardware_unavailable_reason()
        unavailable = {k: v for k, v in self.errors.items() if v != hw_reason}
        out: dict[str, Any] = {"counters": values, "unavailable": unavailable, "multiplexed": mux}
        if hw_reason is not None:
            out["hardware"] = f"not available: {hw_reason}"
        return out

    def close(self) -> None:
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}


# --------------------------------------------------------------------------- pg_stat_io

IoKey = tuple[str, str, str]


def stat_io_snapshot(conn: psycopg.Connection) -> dict[IoKey, dict[str, float]]:
    """pg_stat_io as {(backend_type, object, context): {numeric column: value}}."""
    cur = conn.execute("select * from pg_stat_io")
    cols = [d.name for d in cur.description or []]
    out: dict[IoKey, dict[str, float]] = {}
    for row in cur.fetchall():
        rec = dict(zip(cols, row, strict=True))
        key = (str(rec.pop("backend_type")), str(rec.pop("object")), str(rec.pop("context")))
        rec.pop("stats_reset", None)
        # counts are bigint, *_bytes numeric (Decimal), *_time double precision
        out[key] = {
            k: float(v)
            for k, v in rec.items()
            if isinstance(v, int | float | Decimal) and not isinstance(v, bool)
        }
    return out


def stat_io_delta(
    before: dict[IoKey, dict[str, float]], after: dict[IoKey, dict[str, float]]
) -> list[dict[str, Any]]:
    """Rows of pg_stat_io that changed: {backend_type, object, context, column: delta}."""
    rows = []
    for key, vals in sorted(after.items()):
        prev = before.get(key, {})
        d = {k: v - prev.get(k, 0.0) for k, v in vals.items()}
        d = {k: (int(v) if float(v).is_integer() else round(v, 3)) for k, v in d.items() if v}
        if d:
            rows.append({"backend_type": key[0], "object": key[1], "context": key[2], **d})
    return rows


def stat_io_sum(rows: list[dict[str, Any]], backend_type: str, col: str) -> float:
    return float(sum(r.get(col, 0) for r in rows if r["backend_type"] == backend_type))
