"""The timing the PyTorch and CuPy baselines under benches/ share: three warm-up calls,
then the median of 7 rounds of `reps` calls, in seconds per call. The script's own
directory is on Python's path, so `from torch_timing import timed` finds this file.
"""
import time


def timed(f, reps=20):
    for _ in range(3):
        f()
    v = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        v.append((time.perf_counter() - t) / reps)
    v.sort()
    return v[len(v) // 2]
