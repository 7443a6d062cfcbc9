"""How long CUDA itself takes to report a sticky fault, and how long a killed CUDA process
takes to be seen gone — the floor under an isolated device's failover (issue 26).

Each measurement runs in a fresh child process (a sticky fault poisons its context):
- fault: the child makes its context, compiles and warms up a no-op kernel, then launches
  a kernel that faults at once (`__trap()`: 719, or a store far outside any allocation:
  700) and spins `cudaStreamQuery` until it reports the error; it prints the time from the
  launch to the error. The parent also times the child's exit after that report (`_exit`).
- kill: the child makes its context (and, if asked, 256 MiB of page-locked memory and a
  1 GiB device buffer), says ready over a pipe and sleeps; the parent SIGKILLs it and times
  until the pipe reports end of file (what an isolated device's user process sees) — a
  child without CUDA as the baseline.

Run on the GPU host: `python3 benches/fault_probe.py` (CuPy). Prints `RESULT |` lines.
"""

import os
import signal
import statistics
import subprocess
import sys
import time

ROUNDS = 3

CHILD = r"""
import os, sys, time
kind = sys.argv[1]
if kind == "nocuda":
    os.write(1, b"ready\n"); time.sleep(60); sys.exit(0)
import ctypes
import cupy as cp
# The driver's cuStreamQuery, whose return value is the status itself (0 done, 600 not
# ready, else the stream's error), so nothing is lost in a binding's translation.
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuStreamQuery.argtypes = [ctypes.c_void_p]
src = r'''
extern "C" __global__ void nop(float* y) { if (threadIdx.x == 0) { y[1] = 2.0f; } }
extern "C" __global__ void trap(float* y) { if (threadIdx.x == 0) { y[0] = 1.0f; __trap(); } }
extern "C" __global__ void oob(float* y, unsigned long long at) { if (threadIdx.x == 0) { y[at] = 1.0f; } }
'''
mod = cp.RawModule(code=src)
y = cp.zeros(256, dtype=cp.float32)
s = cp.cuda.Stream(non_blocking=True)
with s:
    mod.get_function("nop")((1,), (32,), (y,))
s.synchronize()
if kind.startswith("kill"):
    keep = []
    if kind == "kill_pinned":
        keep.append(cp.cuda.alloc_pinned_memory(256 << 20))
        keep.append(cp.empty(1 << 28, dtype=cp.float32))
        cp.cuda.runtime.deviceSynchronize()
    os.write(1, b"ready\n")
    time.sleep(60)
    sys.exit(0)
with s:
    t0 = time.perf_counter()
    if kind == "trap":
        mod.get_function("trap")((1,), (32,), (y,))
    else:
        mod.get_function("oob")((1,), (32,), (y, cp.uint64(1 << 40)))
    while True:
        code = cuda.cuStreamQuery(ctypes.c_void_p(s.ptr))
        if code != 600 or time.perf_counter() - t0 > 10.0:
            break  # the error (or 0: no fault; 600 after 10 s: none surfaced)
    t1 = time.perf_counter()
os.write(1, ("fault %d %.3f\n" % (code, (t1 - t0) * 1e3)).encode())
os._exit(0)
"""


def fault(kind):
    p = subprocess.Popen([sys.executable, "-c", CHILD, kind], stdout=subprocess.PIPE)
    line = p.stdout.readline().decode().split()
    t_report = time.perf_counter()
    p.stdout.read()  # end of file: the child's descriptors closed (it exited)
    t_eof = time.perf_counter()
    p.wait(timeout=30)
    if len(line) < 3:
        return -1, float("nan"), float("nan")
    return int(line[1]), float(line[2]), (t_eof - t_report) * 1e3


def kill(kind):
    p = subprocess.Popen([sys.executable, "-c", CHILD, kind], stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    t0 = time.perf_counter()
    os.kill(p.pid, signal.SIGKILL)
    p.stdout.read()
    t_eof = time.perf_counter()
    p.wait()
    t_reaped = time.perf_counter()
    return (t_eof - t0) * 1e3, (t_reaped - t0) * 1e3


def main():
    for kind in ["trap", "oob"]:
        got = [fault(kind) for _ in range(ROUNDS)]
        codes = sorted({c for c, _, _ in got})
        lat = [t for _, t, _ in got]
        ex = [e for _, _, e in got]
        print(
            "RESULT | fault %s (codes %s) | launch -> error: median %.1f ms, min %.1f, max %.1f"
            " | error -> exit seen: median %.1f ms over %d"
            % (kind, codes, statistics.median(lat), min(lat), max(lat), statistics.median(ex), ROUNDS),
            flush=True,
        )
    for kind in ["nocuda", "kill", "kill_pinned"]:
        got = [kill(kind) for _ in range(ROUNDS)]
        eof = [a for a, _ in got]
        reaped = [b for _, b in got]
        print(
            "RESULT | SIGKILL %s | kill -> end of file: median %.1f ms (min %.1f, max %.1f)"
            " | kill -> reaped: median %.1f ms over %d"
            % (kind, statistics.median(eof), min(eof), max(eof), statistics.median(reaped), ROUNDS),
            flush=True,
        )


if __name__ == "__main__":
    main()
