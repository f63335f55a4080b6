#!/usr/bin/env python3
"""What a filesystem charges for making N files durable at once: N fdatasyncs on N threads
against one syncfs (docs/benchmarks.md, "Group sync"; docs/io.md, "Group sync").

    scripts/syncfs-probe.py FOLDER FILES ROUNDS fdatasync|syncfs [zero]

Creates FILES files of 1 GiB in FOLDER (64 MiB of each reserved with fallocate, KEEP_SIZE, as a
segment's reservation), then ROUNDS times writes one 64 KiB direct block to every file and syncs
them all the chosen way; prints rounds/s, the sync's p50/p90 and the process's CPU per round.
`zero` writes the reserved blocks with zeros first (blocks written before the data).
"""
import ctypes, mmap, os, resource, sys, time
from concurrent.futures import ThreadPoolExecutor

libc = ctypes.CDLL("libc.so.6", use_errno=True)
folder, count, rounds, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
zero = len(sys.argv) > 5 and sys.argv[5] == "zero"
assert mode in ("fdatasync", "syncfs"), mode
os.makedirs(folder, exist_ok=True)
fds = []
for i in range(count):
    path = os.path.join(folder, f"probe-{i}")
    if os.path.exists(path):
        os.unlink(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    os.truncate(fd, 1 << 30)
    libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(64 << 20))  # FALLOC_FL_KEEP_SIZE
    fds.append(fd)
block = mmap.mmap(-1, 65536)
block.write(b"x" * 65536)
if zero:
    zeros = mmap.mmap(-1, 1 << 20)
    for fd in fds:
        for offset in range(0, 64 << 20, 1 << 20):
            os.pwritev(fd, [zeros], offset)
    os.sync()
pool = ThreadPoolExecutor(max_workers=count)
before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
latencies = []
for r in range(rounds):
    for fd in fds:
        os.pwritev(fd, [block], r * 65536)
    began = time.perf_counter()
    if mode == "fdatasync":
        list(pool.map(os.fdatasync, fds))
    elif libc.syncfs(fds[0]) != 0:
        raise OSError(ctypes.get_errno(), "syncfs")
    latencies.append(time.perf_counter() - began)
ended, after = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
latencies.sort()
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(f"{mode} files={count} zero={zero}: {rounds / (ended - started):.0f} rounds/s, "
      f"sync p50 {latencies[len(latencies) // 2] * 1e6:.0f} us p90 "
      f"{latencies[int(len(latencies) * 0.9)] * 1e6:.0f} us, CPU {cpu / rounds * 1e6:.0f} us/round")
for i, fd in enumerate(fds):
    os.close(fd)
    os.unlink(os.path.join(folder, f"probe-{i}"))
