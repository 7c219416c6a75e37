"""Map, pre-fault writable (MADV_POPULATE_WRITE) and unmap a zero-filled 16 MB file, as
nvm_wal_open() does for each WAL segment: median of 30, on each directory given."""

import ctypes
import mmap
import os
import sys
import time

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
SEG = 16 << 20
for d in sys.argv[1:]:
    p = os.path.join(d, "seg")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"\0" * SEG)  # as XLogFileInit zero-fills
    ts = []
    for _ in range(30):
        t = time.perf_counter()
        a = libc.mmap(None, SEG, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        assert libc.madvise(a, SEG, 23) == 0, ctypes.get_errno()  # MADV_POPULATE_WRITE
        libc.munmap(a, SEG)
        ts.append(time.perf_counter() - t)
    ts.sort()
    print(d, f"map+populate+unmap 16 MB: median {ts[15] * 1e3:.3f} ms, min {ts[0] * 1e3:.3f} ms")
    os.close(fd)
    os.unlink(p)
