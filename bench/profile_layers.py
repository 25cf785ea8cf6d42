#!/usr/bin/env python3
"""Per-layer time of a Cuvil-compiled model: where a run spends its time.

Compiles the model to C (`cuvil-compile --emit c`), wraps each node call of the generated run
function in a clock, builds the library with the generated Makefile and runs it with
`cuvil-run --bench`; the library prints, when it is unloaded, the median time of each node
over the runs, largest first, with its description (op, shapes, algorithm) from model.c.

    $VENV/bin/python bench/profile_layers.py --model M.onnx [--threads N] [--iters 50] [--top 30]
        [--compile-arg=--opt-level=2 ...] [--input NAME=FILE.npy ...] [--by-op]

Without --input, each input is N(0,1) float32 with its symbolic dims at 1; a model with token ids
wants --input (tools/models/build_transformers.py writes them: `--feeds DIR`). --by-op adds the
time summed per op (the first word of each node's description), largest first.

This is a measurement tool, not a test: the clock calls add ~50 ns per node.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]

PROLOGUE = r"""
#include <time.h>
static double prof_t_[%(n)d][%(iters)d];
static int prof_run_ = -1;
static double prof_now_(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
static int prof_cmp_(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static const char *const prof_desc_[%(n)d] = {%(descs)s};
__attribute__((destructor)) static void prof_dump_(void) {
    int runs = prof_run_ + 1 < %(iters)d ? prof_run_ + 1 : %(iters)d;
    if (runs <= 0) return;
    for (int k = 0; k < %(n)d; k++) {
        if (prof_t_[k][0] == 0.0 && prof_t_[k][runs - 1] == 0.0) continue;   /* another file's node */
        qsort(prof_t_[k], (size_t)runs, sizeof(double), prof_cmp_);
        fprintf(stderr, "PROF %%d %%.5f %%s\n", k, prof_t_[k][runs / 2], prof_desc_[k]);
    }
}
"""


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--compile-arg", action="append", default=[])
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                    help="an input's data (repeatable); the others are N(0,1) float32")
    ap.add_argument("--by-op", action="store_true", help="also the time per op")
    args = ap.parse_args(argv)
    given = dict(a.split("=", 1) for a in args.input)
    build = Path(args.build)
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "m"
        subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", args.model, "--output", str(out),
                        "--emit", "c", "--name", "m"] + args.compile_arg, check=True)
        # the node functions live in model.c or, for a large model, in part_NNNN.c files: each
        # file gets its own clocks (static arrays, a destructor that prints its nodes)
        files = [out / "model.c"] + sorted(out.glob("part_*.c"))
        call = r"node(\d+)\(A, (?:W, )?S, in, out, D\)"
        n = 0
        for f in files:
            n = max([n] + [int(c) + 1 for c in re.findall(r"^    (?:if \()?" + call, f.read_text(), flags=re.M)])
        if n == 0:
            print("no node calls found in the generated C", file=sys.stderr)
            return 1
        iters = args.iters + 10
        for f in files:
            src = f.read_text()
            calls = [int(c) for c in re.findall(r"^    (?:if \()?" + call, src, flags=re.M)]
            if not calls:
                continue
            first = calls[0]
            # descriptions: the comment before each "static int nodeK(" definition
            descs = {}
            for m in re.finditer(r"^static int node(\d+)\(", src, flags=re.M):
                before = re.findall(r"^/\* (.*?) \*/$", src[:m.start()], flags=re.M)
                if before:
                    descs[int(m.group(1))] = before[-1][:400]
            pro = PROLOGUE % dict(n=n, iters=iters, descs=",".join(c_str(descs.get(k, "?")) for k in range(n)))
            src = src.replace('#include "cuvil_rt.h"', pro + '\n#include "cuvil_rt.h"', 1)
            if pro not in src:   # a part without that include: the prologue goes first
                src = '#include <stdio.h>\n#include <stdlib.h>\n' + pro + src
            src = re.sub(r"^    (node(\d+)\(A, (?:W, )?S, in, out, D\));",
                         lambda m: f"    {{ double t_ = prof_now_(); if ({m.group(2)} == {first}) prof_run_++; {m.group(1)}; "
                         f"if (prof_run_ >= 0 && prof_run_ < {iters}) prof_t_[{m.group(2)}][prof_run_] = prof_now_() - t_; }}",
                         src, flags=re.M)
            src = re.sub(r"^    if \((node(\d+)\(A, (?:W, )?S, in, out, D\))\) return",
                         lambda m: f"    if ({m.group(2)} == {first}) prof_run_++;\n    if ({m.group(1)}) return",
                         src, flags=re.M)
            f.write_text(src)
        subprocess.run(["make", "-s", "-C", str(out), "-j2", "CFLAGS=-O2"], check=True)
        model = onnx.load(args.model, load_external_data=False)
        init = {i.name for i in model.graph.initializer}
        feeds = []
        rng = np.random.default_rng(0)
        for i, inp in enumerate(x for x in model.graph.input if x.name not in init):
            if inp.name in given:
                feeds += ["--input", f"{inp.name}={given[inp.name]}"]
                continue
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                    for d in inp.type.tensor_type.shape.dim]
            p = Path(td) / f"in{i}.npy"
            np.save(p, rng.standard_normal(dims).astype(np.float32))
            feeds += ["--input", f"{inp.name}={p}"]
        r = subprocess.run([str(build / "bin" / "cuvil-run"), str(out / "libm.so"), *feeds, "--bench", str(args.iters),
                            "--warmup", "3", "--threads", str(args.threads), "--output-dir", td],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stdout, r.stderr, file=sys.stderr)
            return 1
        print(r.stdout.strip().splitlines()[-1])
        rows = []
        for line in r.stderr.splitlines():
            if line.startswith("PROF "):
                _, k, ms, desc = line.split(" ", 3)
                rows.append((float(ms), int(k), desc))
        total = sum(r[0] for r in rows)
        rows.sort(reverse=True)
        print(f"sum of node medians {total:.3f} ms over {len(rows)} nodes")
        print("| node | ms | % | what |\n|---|---|---|---|")
        for ms, k, desc in rows[:args.top]:
            print(f"| {k} | {ms:.3f} | {100 * ms / total:.1f} | {desc} |")
        if args.by_op:
            ops = {}
            for ms, _, desc in rows:
                op = desc.split()[0] if desc.split() else "?"
                t, c = ops.get(op, (0.0, 0))
                ops[op] = (t + ms, c + 1)
            print("\n| op | nodes | ms | % |\n|---|---|---|---|")
            for op, (ms, c) in sorted(ops.items(), key=lambda kv: -kv[1][0]):
                print(f"| {op} | {c} | {ms:.3f} | {100 * ms / total:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
