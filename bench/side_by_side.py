#!/usr/bin/env python3
"""tinyrw against tinygrad and numpy/OpenBLAS on the same CPU work, in one run.

Cases: float32 matmuls of 512x512 and 1024x1024 (square, @ of two realized inputs) and the
forward pass of a 784 -> 256 -> 10 MLP on a batch of 64 (x @ W1 + b1, relu, @ W2 + b2), warm and
on its first run (graph build, schedule, optimize and compile included), each on one thread and
on all cores.

- tinyrw: build/bin/bench_tensor (--bench) with --benchmark_filter for BM_Matmul512,
  BM_Matmul1024, BM_MlpForward784FirstRun and BM_MlpForward784, JSON output, under CPU_THREADS=1
  and then without it. Its real time: the median of the repetitions after the first (a warm-up
  against noise; every benchmark compiles its kernels before timing); BM_MlpForward784FirstRun's
  first repetition only (the later ones find its kernels compiled). --tinyrw-beam adds a BEAM=2
  column (and its ratio to OpenBLAS), searched into a fresh cache in a temporary folder.
- tinygrad: its source at --tinygrad-path ($TINYGRAD_PATH, else /tmp/tg), CPU device, hand-coded
  opts (no BEAM; --tinygrad-beam adds a BEAM=2 column), NUM_CPU_THREADS=1 and then its default
  (every core). Each case times realize() plus a device synchronize of a fresh graph over realized
  inputs: warmed up, the median of --repeats runs. Its compile cache (CACHEDB) is a fresh file in a
  temporary folder, so its first run compiles as tinyrw's does.
- numpy: /usr/bin/python3 (--numpy-python) with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed
  from its environment (OpenBLAS picks its kernels for this CPU), OPENBLAS_NUM_THREADS=1 and then
  the number of cores. Its "first run" is its first call (no compile step).

The speed ratios are the other's time over tinyrw's: above 1, tinyrw is faster. A framework that
is missing or fails gives "not available: <reason>" in its column. Python standard library only;
tinygrad and numpy run in subprocesses from small generated snippets.

  python3 bench/side_by_side.py [--bench build/bin/bench_tensor] [--json out.json]

tinygrad's source, from the mirror: mkdir -p /tmp/tg &&
  git -C /work/.mirror/tinygrad+tinygrad/repo archive HEAD tinygrad | tar x -C /tmp/tg
numpy on OpenBLAS (Debian): apt-get install python3-numpy libopenblas0-pthread
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

CASES = [  # (key, label, flop)
    ("matmul512", "matmul 512x512 fp32", 2.0 * 512**3),
    ("matmul1024", "matmul 1024x1024 fp32", 2.0 * 1024**3),
    ("mlp784", "MLP 784-256-10 fwd, batch 64", 2.0 * 64 * (784 * 256 + 256 * 10)),
    ("mlp784_first", "MLP 784-256-10 fwd, first run", 2.0 * 64 * (784 * 256 + 256 * 10)),
]
TINYRW_BENCH = {  # case -> benchmark function name in bench_tensor.cpp
    "matmul512": "BM_Matmul512",
    "matmul1024": "BM_Matmul1024",
    "mlp784": "BM_MlpForward784",
    "mlp784_first": "BM_MlpForward784FirstRun",
}
# the --benchmark_filter part of each: BM_Matmul512's full name is BM_Matmul512/iterations:3/...,
# so not `Matmul512$`; all four: Matmul512/|Matmul1024/|MlpForward784/|MlpForward784FirstRun/
TINYRW_FILTER = {c: fn[len("BM_"):] + "/" for c, fn in TINYRW_BENCH.items()}
RESULT_MARK = "@@SIDE_BY_SIDE@@"


def ncores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def loadavg():
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:
        return None


def last_line(text, limit=300):
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:limit] if lines else ""


# ------------------------------------------------------------------------------------------------
# tinyrw


def parse_benchmark_json(text):
    """The run entries of Google Benchmark's JSON output, also from a truncated file (a crash)."""
    try:
        return json.loads(text).get("benchmarks", [])
    except ValueError:
        pass
    start = text.find('"benchmarks"')
    if start < 0:
        return []
    pos = text.find("[", start)
    if pos < 0:
        return []
    pos += 1
    out, dec = [], json.JSONDecoder()
    while True:
        m = re.compile(r"\s*,?\s*").match(text, pos)
        pos = m.end()
        try:
            obj, pos = dec.raw_decode(text, pos)
        except ValueError:
            return out
        out.append(obj)


def run_tinyrw(bench, threads, repetitions, timeout, cases, beam=0):
    """{case: {"ms": ...} or {"error": ...}} for one thread setting (None: every core); with
    BEAM=beam when beam > 0, searching into a fresh cache (the search runs in each benchmark's
    first, untimed realize; its first repetition, which the median leaves out, may include it)."""
    if not os.path.isfile(bench) or not os.access(bench, os.X_OK):
        return {c: {"error": f"no benchmark binary at {bench} (build bench_tensor)"}
                for c in cases}
    env = dict(os.environ)
    env.pop("CPU_THREADS", None)
    env.pop("BEAM", None)
    if threads is not None:
        env["CPU_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as tmp:
        if beam > 0:
            env["BEAM"] = str(beam)
            env["TINYRW_CACHE_DIR"] = os.path.join(tmp, "cache")
        out_path = os.path.join(tmp, "out.json")
        regex = "|".join(TINYRW_FILTER[c] for c in cases)
        cmd = [bench, f"--benchmark_filter={regex}",
               f"--benchmark_repetitions={repetitions}", f"--benchmark_out={out_path}",
               "--benchmark_out_format=json", "--benchmark_format=json"]
        failure, stdout = None, ""
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            stdout = p.stdout
            if p.returncode != 0:
                how = f"exited with {p.returncode}"
                if p.returncode < 0:
                    try:
                        how = f"killed by {signal.Signals(-p.returncode).name}"
                    except ValueError:
                        pass
                failure = f"{os.path.basename(bench)} {how}" + \
                    (f": {last_line(p.stderr)}" if last_line(p.stderr) else "")
        except subprocess.TimeoutExpired:
            failure = f"{os.path.basename(bench)} ran past {timeout} s"
        except OSError as e:
            failure = f"cannot run {bench}: {e}"
        text = ""
        if os.path.exists(out_path):
            with open(out_path) as f:
                text = f.read()
    entries = parse_benchmark_json(text) or parse_benchmark_json(stdout)
    results = {}
    for case in cases:
        fn = TINYRW_BENCH[case]
        runs = [e for e in entries if e.get("run_type", "iteration") == "iteration"
                and e.get("name", "").split("/")[0] == fn]
        errors = [e.get("error_message") or e.get("skip_message") or "error" for e in runs
                  if e.get("error_occurred") or e.get("skipped")]
        runs = [e for e in runs if not (e.get("error_occurred") or e.get("skipped"))]
        if errors:
            results[case] = {"error": f"{fn}: {errors[0]}"}
            continue
        if not runs:
            results[case] = {"error": f"{failure}; no result for {fn}" if failure else
                             f"{fn} is not in {bench} (rebuild bench_tensor)"}
            continue
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
        ms = [e["real_time"] * scale[e.get("time_unit", "ns")] for e in
              sorted(runs, key=lambda e: e.get("repetition_index", 0))]
        if case == "mlp784_first":
            value, how = ms[0], "first repetition (one iteration)"
        elif len(ms) > 1:
            value, how = statistics.median(ms[1:]), f"median of repetitions 2..{len(ms)}"
        else:
            value, how = ms[0], "one repetition"
        results[case] = {"ms": value, "how": how, "name": runs[0]["name"],
                         "iterations": runs[0].get("iterations"), "all_ms": ms}
    return results


# ------------------------------------------------------------------------------------------------
# tinygrad and numpy: a generated snippet in a subprocess prints one JSON line after RESULT_MARK

COMMON_SNIPPET = r'''
import json, statistics, sys, time
P = json.loads(sys.argv[1])
MARK = P["mark"]
def measure(fn, warmup, repeats):
    for _ in range(warmup): fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e3)
    return {"ms": statistics.median(ts), "min_ms": min(ts), "runs": len(ts)}
def first(fn):
    t0 = time.perf_counter(); fn()
    return {"ms": (time.perf_counter() - t0) * 1e3, "runs": 1}
def guarded(results, case, f):
    if case not in P["cases"]: return
    try: results[case] = f()
    except Exception as e: results[case] = {"error": f"{type(e).__name__}: {e}"[:300]}
'''

TINYGRAD_SNIPPET = COMMON_SNIPPET + r'''
sys.path.insert(0, P["path"])
from tinygrad import Tensor, Device
from tinygrad.helpers import NUM_CPU_THREADS
dev = Device["CPU"]
info = {"num_cpu_threads": NUM_CPU_THREADS.value, "renderer": type(dev.renderer).__name__}
res = {}
def sync(t): t.realize(); dev.synchronize()
def mm(n, reps):
    a = Tensor.rand(n, n, device="CPU").realize(); b = Tensor.rand(n, n, device="CPU").realize()
    dev.synchronize()
    return measure(lambda: sync(a @ b), P["warmup"], reps)
x = Tensor.rand(64, 784, device="CPU").realize()
w1 = Tensor.rand(784, 256, device="CPU").realize(); b1 = Tensor.rand(256, device="CPU").realize()
w2 = Tensor.rand(256, 10, device="CPU").realize(); b2 = Tensor.rand(10, device="CPU").realize()
dev.synchronize()
fwd = lambda: sync((x @ w1 + b1).relu() @ w2 + b2)
guarded(res, "mlp784_first", lambda: first(fwd))
guarded(res, "mlp784", lambda: measure(fwd, P["warmup"], P["repeats"]))
guarded(res, "matmul512", lambda: mm(512, P["repeats"]))
guarded(res, "matmul1024", lambda: mm(1024, max(3, P["repeats"] // 2)))
print(MARK + json.dumps({"info": info, "results": res}), flush=True)
'''

NUMPY_SNIPPET = COMMON_SNIPPET + r'''
import ctypes
import numpy as np
info = {"numpy": np.__version__, "blas": None}
def fwd_of(x, w1, b1, w2, b2): return lambda: np.maximum(x @ w1 + b1, 0) @ w2 + b2
rng = np.random.default_rng(0)
f32 = lambda *s: rng.random(s, dtype=np.float32)
x, w1, b1, w2, b2 = f32(64, 784), f32(784, 256), f32(256), f32(256, 10), f32(10)
res = {}
guarded(res, "mlp784_first", lambda: first(fwd_of(x, w1, b1, w2, b2)))  # the first BLAS call
guarded(res, "mlp784", lambda: measure(fwd_of(x, w1, b1, w2, b2), P["warmup"], P["repeats"]))
def mm(n, reps):
    a, b = f32(n, n), f32(n, n)
    return measure(lambda: a @ b, P["warmup"], reps)
guarded(res, "matmul512", lambda: mm(512, P["repeats"]))
guarded(res, "matmul1024", lambda: mm(1024, max(3, P["repeats"] // 2)))
# which BLAS the matmuls ran on, and what OpenBLAS says of itself
libs = sorted({ln.split()[-1] for ln in open("/proc/self/maps")
               if len(ln.split()) >= 6 and "blas" in ln.split()[-1].lower()})
info["blas_libraries"] = libs
for lib in libs:
    try: so = ctypes.CDLL(lib)
    except OSError: continue
    if hasattr(so, "openblas_get_config"):
        so.openblas_get_config.restype = ctypes.c_char_p
        so.openblas_get_corename.restype = ctypes.c_char_p
        info["blas"] = "OpenBLAS " + so.openblas_get_config().decode()
        info["openblas_core"] = so.openblas_get_corename().decode()
        info["openblas_threads"] = so.openblas_get_num_threads()
        break
if info["blas"] is None and libs: info["blas"] = "not OpenBLAS: " + ", ".join(libs)
print(MARK + json.dumps({"info": info, "results": res}), flush=True)
'''


def run_snippet(python, snippet, params, env, timeout, what):
    """(info, {case: result}) or (None, reason)."""
    params = dict(params, mark=RESULT_MARK)
    try:
        p = subprocess.run([python, "-c", snippet, json.dumps(params)], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"{what} ran past {timeout} s"
    except OSError as e:
        return None, f"cannot run {python}: {e}"
    for line in p.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            out = json.loads(line[len(RESULT_MARK):])
            return out["info"], out["results"]
    return None, f"{what} failed (exit {p.returncode}): " + \
        (last_line(p.stderr) or last_line(p.stdout) or "no output")


def run_tinygrad(args, threads, beam):
    path = args.tinygrad_path
    if not os.path.isfile(os.path.join(path, "tinygrad", "__init__.py")):
        return None, (f"no tinygrad source at {path} (set TINYGRAD_PATH or --tinygrad-path; "
                      "--help says how to extract it)")
    env = dict(os.environ)
    for var in ("BEAM", "NOOPT", "DEBUG", "DEV", "NUM_CPU_THREADS", "CACHELEVEL", "VIZ", "JIT",
                "PYTHONPATH"):
        env.pop(var, None)
    if threads is not None:
        env["NUM_CPU_THREADS"] = str(threads)
    if beam:
        env["BEAM"] = str(beam)
    with tempfile.TemporaryDirectory(prefix="side_by_side_tg_") as tmp:
        env["CACHEDB"] = os.path.join(tmp, "cache.db")  # nothing compiled before this run
        return run_snippet(args.tinygrad_python, TINYGRAD_SNIPPET,
                           {"path": os.path.abspath(path), "warmup": args.warmup,
                            "repeats": args.repeats, "cases": args.cases}, env, args.timeout,
                           f"tinygrad{' BEAM=' + str(beam) if beam else ''}")


def run_numpy(args, threads):
    if not shutil.which(args.numpy_python) and not os.path.isfile(args.numpy_python):
        return None, f"no python at {args.numpy_python}"
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH", "PYTHONHOME",
                "OMP_NUM_THREADS", "GOTO_NUM_THREADS"):
        env.pop(var, None)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    info, res = run_snippet(args.numpy_python, NUMPY_SNIPPET,
                            {"warmup": args.warmup, "repeats": args.repeats,
                             "cases": args.cases}, env, args.timeout,
                            "numpy")
    if info is None and "No module named 'numpy'" in res:
        res = (f"numpy is not installed for {args.numpy_python} "
               "(apt-get install python3-numpy libopenblas0-pthread)")
    return info, res


# ------------------------------------------------------------------------------------------------


def cell(r, flop, first_run):
    if r is None:
        return "—"
    if "error" in r:
        return f"not available: {r['error']}"
    if first_run:
        return f"{r['ms']:.2f} ms"
    return f"{r['ms']:.3f} ms / {flop / (r['ms'] * 1e6):.1f}"


def ratio(mine, other):
    if not mine or not other or "ms" not in mine or "ms" not in other:
        return "—"
    return f"{other['ms'] / mine['ms']:.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/bin/bench_tensor",
                    help="tinyrw's bench_tensor (default build/bin/bench_tensor: from the current "
                         "folder, else from the repository root)")
    ap.add_argument("--tinygrad-path", default=os.environ.get("TINYGRAD_PATH", "/tmp/tg"))
    ap.add_argument("--tinygrad-python", default=sys.executable,
                    help="python (>= 3.11) for tinygrad (default: this one)")
    ap.add_argument("--tinygrad-beam", action="store_true",
                    help="also run tinygrad with BEAM=2 (slow: it searches every kernel)")
    ap.add_argument("--tinyrw-beam", action="store_true",
                    help="also run tinyrw with BEAM=2 (its search into a fresh cache first)")
    ap.add_argument("--numpy-python", default="/usr/bin/python3")
    ap.add_argument("--threads", type=int, default=ncores(),
                    help="the multi-threaded row's OPENBLAS_NUM_THREADS (default: the cores this "
                         "process may use; tinyrw and tinygrad use every core by default)")
    ap.add_argument("--repeats", type=int, default=10,
                    help="timed runs per case for tinygrad and numpy (the median; half for 1024)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tinyrw-repetitions", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per subprocess")
    ap.add_argument("--skip", default="", help="comma list of tinyrw,tinygrad,numpy to leave out")
    ap.add_argument("--cases", default=",".join(c for c, _, _ in CASES),
                    help="comma list of the cases to run (default: all: %(default)s)")
    ap.add_argument("--json", metavar="OUT", help="write the figures to OUT as JSON")
    args = ap.parse_args()
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in args.cases if c not in TINYRW_BENCH]
    if unknown or not args.cases:
        ap.error(f"--cases: unknown {unknown}; choose from {', '.join(TINYRW_BENCH)}")
    cases = [c for c in CASES if c[0] in args.cases]

    bench = args.bench
    if not os.path.isabs(bench) and not os.path.exists(bench):
        bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), bench)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    settings = [("1", 1, 1), (f"all ({ncores()})", None, args.threads)]  # label, env, blas threads
    load_before = loadavg()

    frameworks = ["tinyrw", "tinygrad", "numpy"] + (["tinygrad_beam2"] if args.tinygrad_beam
                                                     else []) + \
        (["tinyrw_beam2"] if args.tinyrw_beam else [])
    table = {label: {} for label, _, _ in settings}
    infos = {}
    for label, threads, blas_threads in settings:
        row = table[label]

        def fill(name, fn, *a):
            t0 = time.time()
            if name.split("_")[0] in skip:
                row[name] = {c: {"error": "skipped (--skip)"} for c in args.cases}
                return
            print(f"[{label} thread(s)] {name} ...", file=sys.stderr, flush=True)
            out = fn(*a)
            if isinstance(out, tuple):
                info, res = out
                if info is None:
                    res = {c: {"error": res} for c in args.cases}
                else:
                    infos.setdefault(name, {})[label] = info
            else:
                res = out
            row[name] = res
            print(f"[{label} thread(s)] {name}: {time.time() - t0:.1f} s", file=sys.stderr,
                  flush=True)

        fill("tinyrw", run_tinyrw, bench, threads, args.tinyrw_repetitions, args.timeout,
             args.cases)
        if args.tinyrw_beam:
            fill("tinyrw_beam2", run_tinyrw, bench, threads, args.tinyrw_repetitions,
                 args.timeout, args.cases, 2)
        fill("tinygrad", run_tinygrad, args, threads, 0)
        if args.tinygrad_beam:
            fill("tinygrad_beam2", run_tinygrad, args, threads, 2)
        fill("numpy", run_numpy, args, blas_threads)
    load_after = loadavg()

    # the table
    head = ["case", "threads", "tinyrw ms / GFLOPS", "tinygrad ms / GFLOPS"]
    if args.tinygrad_beam:
        head.append("tinygrad BEAM=2 ms / GFLOPS")
    head += ["numpy ms / GFLOPS", "tinyrw/tinygrad speed ratio"]
    if args.tinygrad_beam:
        head.append("tinyrw/tinygrad BEAM=2 speed ratio")
    head.append("tinyrw/OpenBLAS speed ratio")
    if args.tinyrw_beam:
        head += ["tinyrw BEAM=2 ms / GFLOPS", "tinyrw BEAM=2/OpenBLAS speed ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, label, flop in cases:
        first_run = case == "mlp784_first"
        for tlabel, _, blas_threads in settings:
            row = table[tlabel]
            get = lambda name: row.get(name, {}).get(case)
            tl = tlabel if tlabel == "1" else f"{tlabel}; BLAS {blas_threads}"
            cells = [label, tl, cell(get("tinyrw"), flop, first_run),
                     cell(get("tinygrad"), flop, first_run)]
            if args.tinygrad_beam:
                cells.append(cell(get("tinygrad_beam2"), flop, first_run))
            cells += [cell(get("numpy"), flop, first_run), ratio(get("tinyrw"), get("tinygrad"))]
            if args.tinygrad_beam:
                cells.append(ratio(get("tinyrw"), get("tinygrad_beam2")))
            blas = infos.get("numpy", {}).get(tlabel, {}).get("blas") or ""
            cells.append(ratio(get("tinyrw"), get("numpy")) +
                         ("" if not blas or blas.startswith("OpenBLAS") else f" ({blas})"))
            if args.tinyrw_beam:
                cells += [cell(get("tinyrw_beam2"), flop, first_run),
                          ratio(get("tinyrw_beam2"), get("numpy"))]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    print("\n".join(lines))
    print()
    print("Ratios: the other's time over tinyrw's (above 1: tinyrw faster). GFLOPS: "
          "2*M*N*K of the matmuls over the median time. First run: tinyrw's and tinygrad's first "
          "forward pass in a process (graph build, schedule, compile, run), numpy's first call." +
          (" tinyrw BEAM=2's first run includes its search." if args.tinyrw_beam else ""))
    for name, per in infos.items():
        for tlabel, info in per.items():
            print(f"- {name} [{tlabel}]: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    print(f"- load average before {load_before}, after {load_after} ({ncores()} cores)")

    if args.json:
        out = {"cores": ncores(), "load_before": load_before, "load_after": load_after,
               "bench": bench, "tinygrad_path": args.tinygrad_path, "info": infos, "rows": []}
        for case, label, flop in cases:
            for tlabel, threads, blas_threads in settings:
                entry = {"case": case, "label": label, "threads": tlabel,
                         "cpu_threads": threads, "blas_threads": blas_threads, "flop": flop}
                for name in frameworks:
                    r = dict(table[tlabel].get(name, {}).get(case) or {})
                    if "ms" in r and case != "mlp784_first":
                        r["gflops"] = flop / (r["ms"] * 1e6)
                    entry[name] = r
                out["rows"].append(entry)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"- figures written to {args.json}")


if __name__ == "__main__":
    main()
