"""One command for BENCHMARKS.md's summary: runs the benches on this GPU host — ours
against raw cudarc in each process, then PyTorch (and CuPy) on the same card where they
are installed — and prints every comparison as one Markdown table with the card, driver,
commit and date.

    python3 benches/summary.py                 # every bench below, then the torch scripts
    python3 benches/summary.py sgemm fft       # only these
    python3 benches/summary.py --logs DIR      # no runs: tables from saved outputs (*.txt)
    python3 benches/summary.py --timeout 120   # each bench stopped after 120 s (its lines so far kept)

A bench runs through `.gpu/run.sh bench NAME` when a gpu-pack is present (the lent GPU
host has no Rust toolchain), else `cargo bench --bench NAME`. Every bench prints
`RESULT | what | value` lines; a line whose value ends in `ratio R` is one row (ours,
then the baseline, as the bench printed them), and a PyTorch line (`RESULT | what | torch
V unit`) is joined to ours of the same `what` (ratio = torch time ÷ ours, or ours rate ÷
torch's: above 1 means we are faster).
"""
import datetime
import os
import re
import subprocess
import sys

BENCHES = ["sgemm", "matmul", "fft", "rng", "solver", "batched_solver", "sparse", "dense_to_csr",
           "reductions", "sort", "einsum", "dnn", "conv", "kernels", "graphs", "kernel_cache", "copies", "collectives"]
TORCH_SCRIPTS = ["benches/reductions_torch.py", "benches/sort_torch.py", "benches/matmul_torch.py", "benches/einsum_torch.py",
                 "benches/dnn_torch.py", "benches/conv_torch.py"]
RESULT = re.compile(r"^RESULT \| (?P<what>[^|]+?) \| (?P<value>.+)$")
NUMBER_UNIT = re.compile(r"(?P<num>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>µs|us|ms|s|TFLOP/s|GB/s|TB/s|Gsamples/s|M kernels/s|msg/s)\b")
TIME_UNITS = {"µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return ""


def run(cmd, timeout):
    """`cmd`'s output; what it printed before `timeout` seconds if it runs longer."""
    print(f"running {' '.join(cmd)} ...", file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        print(f"  stopped after {timeout} s", file=sys.stderr, flush=True)
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return text(e.stdout) + text(e.stderr)


def run_bench(name, timeout):
    if os.path.isdir(".gpu"):
        return run(["bash", ".gpu/run.sh", "bench", name], timeout)
    return run(["cargo", "bench", "--bench", name], timeout)


def results(text):
    """The (what, value) pairs of a bench's output."""
    for line in text.splitlines():
        m = RESULT.match(line.strip())
        if m:
            yield m["what"].strip(), m["value"].strip()


def ratio_row(bench, what, value):
    """A row from a line whose value ends in `ratio R`: (bench, what, ours, baseline, ratio)."""
    m = re.search(r"^(?P<pair>.*?),?\s*ratio (?P<ratio>[0-9.]+)", value)
    if not m:
        return None
    pair = m["pair"]
    parts = re.split(r",\s*(?=raw|world|baseline)", pair, maxsplit=1)
    ours = re.sub(r"^(ours|actor)\s+", "", parts[0].strip())
    baseline = parts[1].strip() if len(parts) > 1 else ""
    return (bench, what, ours, baseline, float(m["ratio"]))


def measure(text):
    """The first number with a unit in `text`: (seconds or rate, unit)."""
    m = NUMBER_UNIT.search(text)
    if not m:
        return None
    return float(m["num"]), m["unit"]


def torch_rows(ours_lines, torch_lines):
    """PyTorch's lines joined to ours of the same `what` (or ours whose `what` starts with it)."""
    rows = []
    for what, value in torch_lines:
        if not value.startswith(("torch", "cupy")):
            continue
        lib = value.split()[0]
        theirs = measure(value)
        mine = next((v for w, v in ours_lines if w == what or w.startswith(what + " (")), None)
        if theirs is None or mine is None:
            continue
        ours = measure(re.sub(r"^.*?\bours\s+", "", mine) if "ours" in mine else mine)
        if ours is None or ours[1] != theirs[1]:
            continue
        if ours[1] in TIME_UNITS:
            r = theirs[0] / ours[0]
        else:
            r = ours[0] / theirs[0]
        rows.append(("vs " + lib, what, f"{ours[0]} {ours[1]}", f"{lib} {theirs[0]} {theirs[1]}", r))
    return rows


def table(rows, header):
    out = [header, "", "| bench | operation | ours | baseline | ratio |", "|---|---|---|---|---|"]
    for bench, what, ours, baseline, r in rows:
        bold = "**" if r >= 0.98 else ""
        out.append(f"| {bench} | {what} | {ours} | {baseline} | {bold}{r:.3f}{bold} |")
    return "\n".join(out)


def context():
    card = sh("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader") or "no nvidia-smi"
    # A pack's binaries are of the commit it was built from, whatever tree they run in.
    if os.path.exists(".gpu/commit"):
        commit = open(".gpu/commit").read().strip()
    else:
        commit = sh("git rev-parse --short HEAD") or "unknown commit"
    torch = sh(f"{sys.executable} -c 'import torch; print(torch.__version__)'") or "no torch"
    day = datetime.date.today().isoformat()
    return f"**{card}** — commit {commit}, {day}, PyTorch {torch}"


def main(argv):
    logs, timeout = None, None
    if "--timeout" in argv:
        i = argv.index("--timeout")
        timeout = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if "--logs" in argv:
        i = argv.index("--logs")
        logs = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    names = argv or BENCHES
    outputs, torch_out = {}, []
    if logs:
        for f in sorted(os.listdir(logs)):
            if f.endswith(".txt"):
                text = open(os.path.join(logs, f)).read()
                (torch_out if f.endswith("_torch.txt") else outputs.setdefault(f[:-4], [])).append(text)
        outputs = {k: "\n".join(v) for k, v in outputs.items()}
        torch_out = "\n".join(torch_out)
    else:
        outputs = {n: run_bench(n, timeout) for n in names}
        have_torch = subprocess.run([sys.executable, "-c", "import torch, cupy"], capture_output=True).returncode == 0
        torch_out = "\n".join(run([sys.executable, s], timeout) for s in TORCH_SCRIPTS) if have_torch else ""
    rows, ours_all = [], []
    for bench, text in outputs.items():
        lines = list(results(text))
        ours_all += lines
        rows += [r for r in (ratio_row(bench, w, v) for w, v in lines) if r]
    rows += torch_rows(ours_all, list(results(torch_out)))
    print(table(rows, context()))


if __name__ == "__main__":
    main(sys.argv[1:])
