"""The Python package's overheads next to the C++ runtime's, measured in one run.

    python3 bench/python/bench.py [--quick] [--runs N] [--report-only] [--build-dir DIR]

Prints "name value unit" per line, as thd-bench does (docs/performance.md):

    py.mw.dispatch.async        x.add_(1.0) on 16 floats of node 0, issued in a Python
                                loop, then thd.synchronize()                     ops/s
    py.mw.sync.rtt              (x + 1).sum().item() on 16 floats, the median over
                                single round trips                                  us
    py.mw.copy.to_worker.64MiB  thd.from_numpy(a).dist_send() of a 64 MiB float32
                                NumPy array; one thd.synchronize() per timed batch GB/s

each next to its C++ counterpart of `thd-bench dispatch` (mw.dispatch.async,
mw.sync.rtt, mw.copy.to_worker.64MiB), which this script runs in the same run, and
their ratio (ratio.py.*: Python / C++; for the round trip, a time, below 1 is
Python faster, as thd-bench's ratio.mw.sync.rtt). Each figure is the median of --runs
runs (default 3), each ratio the median of the runs' own ratios; the C++ and Python
runs alternate (C++ first, then Python first, ...) so background load hits both alike.

Targets (full runs only), checked on stderr: py.mw.dispatch.async >= 1M ops/s and
>= 0.5x C++; py.mw.sync.rtt <= 1.3x C++; upload >= 0.9x C++. A missed target makes
the exit status 1, unless --report-only. --quick runs a few thousand ops and 64 KiB
copies: a smoke test of the script (ctest bench.python.smoke), not a measurement.

The Python side runs as `thdrun -n 2 python3 bench.py --child ...`: a master and one
worker, the tcp backend on loopback, as thd-bench's dispatch suite runs.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# The names of the figures: the Python one, its C++ counterpart of `thd-bench
# dispatch`, whether a larger value is better, and the target on the ratio.
DISPATCH, RTT, UPLOAD = "dispatch", "rtt", "upload"
DISPATCH_TARGET_OPS = 1e6
# (op, value): the ratio Python / C++ must be at least (rates) or at most (the time).
RATIO_TARGETS = {DISPATCH: (">=", 0.5), RTT: ("<=", 1.3), UPLOAD: (">=", 0.9)}


def copy_label(quick):
    return "64KiB" if quick else "64MiB"


def figure_names(quick):
    size = copy_label(quick)
    return {
        DISPATCH: ("py.mw.dispatch.async", "mw.dispatch.async", "ops/s"),
        RTT: ("py.mw.sync.rtt", "mw.sync.rtt", "us"),
        UPLOAD: (f"py.mw.copy.to_worker.{size}", f"mw.copy.to_worker.{size}", "GB/s"),
    }


def parse_figures(text):
    """{name: value} of the "name value unit" lines of a bench's stdout."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


# ---- the Python side: the master of a thdrun job ----------------------------------


def run_child(quick, reps):
    import numpy as np

    import thd

    thd.init_master_worker(backend="tcp")  # the worker rank serves and exits in here
    size = copy_label(quick)

    # Dispatch: in-place adds, results dropped by the loop, one synchronize per rep.
    ops = 2000 if quick else 200_000
    x = thd.zeros(16)
    for _ in range(1000):  # warm-up: first touch, connection set-up
        x.add_(1.0)
    thd.synchronize()
    issued = 1000
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(ops):
            x.add_(1.0)
        thd.synchronize()
        rates.append(ops / (time.perf_counter() - t0))
        issued += ops
    got = x.numpy()  # float32 counts exactly up to 2**24 adds
    if not (got == float(issued)).all():
        raise RuntimeError(f"x.add_(1.0) x {issued}: x = {got.tolist()}, expected {float(issued)} everywhere")
    print(f"py.mw.dispatch.async {statistics.median(rates):.2f} ops/s", flush=True)

    # Round trip: each timed on its own, the median over all (as mw.sync.rtt).
    x = thd.full((16,), 2.0)
    expected = (2.0 + 1.0) * 16
    samples = []
    deadline = time.perf_counter() + (0.05 if quick else 1.0 * reps / 5 + 0.2)
    while len(samples) < 21 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        v = (x + 1).sum().item()
        samples.append(time.perf_counter() - t0)
        if v != expected:
            raise RuntimeError(f"(x + 1).sum() gave {v}, expected {expected}")
    print(f"py.mw.sync.rtt {statistics.median(samples[1:]) * 1e6:.2f} us", flush=True)

    # Upload: a NumPy array shared with a local thd.Tensor, dist_send back to back.
    nbytes = 64 << (10 if quick else 20)
    a = (np.arange(nbytes // 4, dtype=np.int64) % 8191 - 4095).astype(np.float32)
    local = thd.from_numpy(a)
    back = local.dist_send().get().numpy()
    if not np.array_equal(back, a):
        raise RuntimeError(f"dist_send then get() of {size} did not give the array back")
    batch = 1 if quick else 8
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            local.dist_send()
        thd.synchronize()
        rates.append(nbytes * batch / (time.perf_counter() - t0) / 1e9)
    print(f"py.mw.copy.to_worker.{size} {statistics.median(rates):.2f} GB/s", flush=True)
    thd.shutdown()


# ---- the driver ---------------------------------------------------------------------


def find_build_dir(given):
    for d in (given, os.environ.get("THD_BUILD_DIR"), os.path.join(REPO, "build")):
        if d and os.path.isfile(os.path.join(d, "bin", "thd-bench")):
            return os.path.abspath(d)
    raise SystemExit("bench.py: no build directory with bin/thd-bench; build thd-bench, thdrun and "
                     "thd_python and pass --build-dir (or set THD_BUILD_DIR)")


def run(cmd, env, timeout, what):
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"bench.py: {what} ran past {timeout} s: {' '.join(cmd)}")
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"bench.py: {what} failed with status {p.returncode}: {' '.join(cmd)}")
    return parse_figures(p.stdout)


def run_cpp(build, quick, env, timeout):
    cmd = [os.path.join(build, "bin", "thd-bench"), "dispatch", "--filter", "mw."]
    cmd += ["--quick"] if quick else ["--reps", "5"]
    return run(cmd, env, timeout, "thd-bench dispatch")


def run_python(build, quick, reps, env, timeout):
    cmd = [os.path.join(build, "bin", "thdrun"), "-n", "2", sys.executable, os.path.abspath(__file__), "--child",
           "--reps", str(reps)] + (["--quick"] if quick else [])
    return run(cmd, env, timeout, "the Python master")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one rep: a smoke test, no targets")
    ap.add_argument("--runs", type=int, default=None, help="runs of each side; the median is reported (default 3)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions inside one Python run (default 5)")
    ap.add_argument("--report-only", action="store_true", help="print the verdicts but exit 0 when one is missed")
    ap.add_argument("--build-dir", help="the build tree (default $THD_BUILD_DIR, else build/)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one bench process may run")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    reps = args.reps if args.reps is not None else (1 if args.quick else 5)
    if runs < 1 or reps < 1:
        ap.error("--runs and --reps must be at least 1")
    if args.child:
        run_child(args.quick, reps)
        return 0

    build = find_build_dir(args.build_dir)
    env = dict(os.environ)
    env.setdefault("THD_LOG_LEVEL", "warn")
    env.pop("THD_BACKEND", None)
    # The build tree's package, unless thd is installed (or on PYTHONPATH) already.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(build, "python"), env.get("PYTHONPATH")) if p)

    names = figure_names(args.quick)
    py_runs = {k: [] for k in names}
    cpp_runs = {k: [] for k in names}
    for i in range(runs):
        # Alternate which side goes first, so a drift in the machine's load hits both.
        order = ("cpp", "py") if i % 2 == 0 else ("py", "cpp")
        for side in order:
            if side == "cpp":
                got = run_cpp(build, args.quick, env, args.timeout)
                dest, col = cpp_runs, 1
            else:
                got = run_python(build, args.quick, reps, env, args.timeout)
                dest, col = py_runs, 0
            for key, n in names.items():
                if n[col] not in got:
                    raise SystemExit(f"bench.py: {n[col]} missing from the {side} run's output")
                dest[key].append(got[n[col]])

    missed = []
    for key, (py_name, cpp_name, unit) in names.items():
        py, cpp = statistics.median(py_runs[key]), statistics.median(cpp_runs[key])
        # The median of the runs' own ratios: each pairs two measurements taken one
        # right after the other, so a change of the machine's load between runs
        # (on a shared machine, 2x) does not enter a ratio.
        ratio = statistics.median(p / c for p, c in zip(py_runs[key], cpp_runs[key]))
        print(f"{py_name} {py:.2f} {unit}")
        print(f"{cpp_name} {cpp:.2f} {unit}")
        print(f"ratio.{py_name} {ratio:.2f} x")
        if runs > 1:
            each = ", ".join(f"{p:.2f}/{c:.2f}" for p, c in zip(py_runs[key], cpp_runs[key]))
            print(f"# {py_name}: runs (Python/C++ {unit}): {each}", file=sys.stderr)
        if args.quick:
            continue
        checks = [(f"ratio.{py_name}", ratio, *RATIO_TARGETS[key], "x")]
        if key == DISPATCH:
            checks.insert(0, (py_name, py, ">=", DISPATCH_TARGET_OPS, unit))
        for name, value, op, target, u in checks:
            met = value >= target if op == ">=" else value <= target
            if not met:
                missed.append(name)
            print(f"bench.py: target {name} {op} {target:g} {u}: {value:.2f} {u}, {'met' if met else 'MISSED'}",
                  file=sys.stderr)
    if missed:
        print(f"bench.py: FAIL: missed {', '.join(missed)}", file=sys.stderr)
        return 0 if args.report_only else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
