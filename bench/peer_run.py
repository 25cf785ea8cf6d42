#!/usr/bin/env python3
"""One benchmark round of a peer, in its own process (bench/bench.py runs it), so that no
runtime's idle threads run beside the one being timed (ONNX Runtime's workers spin after a run;
with two threads on two cores that alone slowed a Cuvil run beside it by 40%).

    peer_run.py ort   MODEL.onnx INPUT.npy THREADS ITERS
    peer_run.py eager NAME       INPUT.npy THREADS ITERS
    peer_run.py suite-eager NAME INPUT.npy THREADS ITERS     (a bench/suite.py model; suite-compile:
                                                              under torch.compile, compiled by the first run)
    peer_run.py aoti  PACKAGE.pt2 INPUT.npy THREADS ITERS
    peer_run.py cuvil MODEL.so   INPUT.npy THREADS ITERS     (through the cuvil package)

INPUT may be a .npz of named inputs instead (ort and cuvil only): a transformer's feed.

Prints one JSON line: times_ms (each timed run), load_ms (session or package load, after the
Python module's import), first_ms (the first run), peak_rss_mb (this process's peak resident
set, VmHWM).

With --serve after ITERS (ignored then), it loads the model, runs it once and 3 times more,
prints {"load_ms", "first_ms"} and then serves turns: for each line N read from stdin it runs
the model once untimed and N times timed, and prints {"times_ms", "peak_rss_mb"}; it ends at
the end of stdin. bench/bench.py keeps a Cuvil and an ONNX Runtime server side by side and
alternates their turns, with a pause before each longer than either's idle spinning, so that
the one not being timed is asleep.
"""
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np


def main():
    kind, what, inp, threads, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    serve = sys.argv[6:] == ["--serve"]
    feed = dict(np.load(inp)) if inp.endswith(".npz") else None   # named inputs (transformers)
    x = None if feed else np.load(inp)
    if kind == "cuvil":
        import cuvil
        t = time.perf_counter()
        model = cuvil.load(what, threads=threads)
        run = (lambda: model(**feed)) if feed else (lambda: model(x))  # noqa: E731
    elif kind == "ort":
        import onnxruntime as ort
        t = time.perf_counter()
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(what, so, providers=["CPUExecutionProvider"])
        feed = feed or {sess.get_inputs()[0].name: x}
        run = lambda: sess.run(None, feed)  # noqa: E731
    else:
        import torch
        t = time.perf_counter()
        torch.set_num_threads(threads)
        xt = torch.from_numpy(x)
        if kind == "eager":
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "models"))
            import build_models
            model = build_models.build_torch_model(what).eval()
            fn = model
        elif kind in ("suite-eager", "suite-compile"):
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "models"))
            import build_suite
            model = build_suite.build_torch(what)
            fn = torch.compile(model) if kind == "suite-compile" else model
        else:
            fn = torch._inductor.aoti_load_package(what)

        def run():
            with torch.inference_mode():
                return fn(xt)
    load_ms = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    run()
    first_ms = (time.perf_counter() - t) * 1e3
    for _ in range(3):
        run()
    if serve:
        print(json.dumps(dict(load_ms=load_ms, first_ms=first_ms)), flush=True)
        for line in sys.stdin:
            run()
            print(json.dumps(dict(times_ms=timed(run, int(line)), peak_rss_mb=peak_rss_mb())), flush=True)
        return
    times = timed(run, iters)
    print(json.dumps(dict(times_ms=times, load_ms=load_ms, first_ms=first_ms, peak_rss_mb=peak_rss_mb())))


def timed(run, n):
    """The times of n runs, ms."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def peak_rss_mb():
    # VmHWM: Linux keeps ru_maxrss across execve, so it would report the parent's peak
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return rss


if __name__ == "__main__":
    main()
