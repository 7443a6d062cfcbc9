"""Why did `gesvdjBatched` fault (700) on a batch of 20×7 matrices in the first GPU run?

Calls cuSOLVER's `gesvdjBatched` through CuPy on batches of m×n matrices — each call in a
fresh process, since a fault poisons the context — with the singular values only and
U/V passed as null pointers (what `svd_values_batched` did), with the values only but
U/V buffers passed (m·m and n·n per matrix), and with the vectors; prints whether each
faulted and the largest error of the singular values against NumPy's in float64.

Run on the GPU host: `python3 benches/gesvdj_probe.py`. Prints `RESULT |` lines.
"""

import subprocess
import sys

CHILD = r"""
import sys
import numpy as np
import cupy as cp
from cupy_backends.cuda.libs import cusolver
from cupy.cuda import device

m, n, count, how = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(7)
host = rng.standard_normal((count, n, m))  # each matrix column-major: n columns of m
a = cp.asarray(host.astype(np.float32).reshape(-1))
s = cp.zeros(min(m, n) * count, dtype=cp.float32)
info = cp.zeros(count, dtype=cp.int32)
h = device.get_cusolver_handle()
params = cusolver.createGesvdjInfo()
jobz = cusolver.CUSOLVER_EIG_MODE_VECTOR if how == "vectors" else cusolver.CUSOLVER_EIG_MODE_NOVECTOR
if how == "null":
    u_ptr = v_ptr = 0
    keep = []
else:
    u = cp.zeros(m * m * count, dtype=cp.float32)
    v = cp.zeros(n * n * count, dtype=cp.float32)
    u_ptr, v_ptr, keep = u.data.ptr, v.data.ptr, [u, v]
lwork = cusolver.sgesvdjBatched_bufferSize(h, jobz, m, n, a.data.ptr, m, s.data.ptr, u_ptr, m, v_ptr, n, params, count)
work = cp.zeros(max(lwork, 1), dtype=cp.float32)
cusolver.sgesvdjBatched(h, jobz, m, n, a.data.ptr, m, s.data.ptr, u_ptr, m, v_ptr, n, work.data.ptr, lwork, info.data.ptr, params, count)
try:
    cp.cuda.runtime.deviceSynchronize()
except cp.cuda.runtime.CUDARuntimeError as e:
    print("fault %d" % e.status)
    sys.exit(0)
want = np.stack([np.linalg.svd(host[k].T, compute_uv=False) for k in range(count)])
got = cp.asnumpy(s).reshape(count, min(m, n)).astype(np.float64)
print("ok err %.2e info %d lwork %d" % (np.abs(np.sort(got, axis=1) - np.sort(want, axis=1)).max() / np.abs(want).max(), int(cp.asnumpy(info).max()), lwork))
"""


def main():
    for m, n in [(16, 16), (20, 7), (7, 20), (32, 5)]:
        for how in ["null", "buffers", "vectors"]:
            p = subprocess.run(
                [sys.executable, "-c", CHILD, str(m), str(n), "1000", how],
                capture_output=True,
                text=True,
                timeout=120,
            )
            out = (p.stdout.strip() or p.stderr.strip().splitlines()[-1:] or ["(nothing)"])
            out = out if isinstance(out, str) else out[0]
            print("RESULT | gesvdjBatched %dx%d x1000 values %s | %s" % (m, n, how, out), flush=True)


if __name__ == "__main__":
    main()
