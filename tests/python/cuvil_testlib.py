"""Helpers for Cuvil's Python tests: find the binaries, compile and run a model the way a user
does (through cuvil-compile and cuvil-run), get ONNX Runtime's answer, and compare.

    so = compile(onnx_path, tmp_path, dims={"batch": 2})     # -> tmp_path/<stem>.so
    got = run(so, {"input": x}, tmp_path)                    # -> {output name: ndarray}
    ref = ort_run(onnx_path, {"input": x})
    assert_outputs_close(got, ref)

The build folder is $CUVIL_BUILD (absolute, or relative to the repo root), default <repo>/build;
the binaries are <build>/bin/cuvil-compile and <build>/bin/cuvil-run.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
MODELS_DIR = REPO / "tools" / "models"
if str(MODELS_DIR) not in sys.path:
    sys.path.insert(0, str(MODELS_DIR))

# The project's tolerance: |got - ref| <= ATOL_SCALE * max|ref| + RTOL * |ref|, per output.
RTOL = 1e-3
ATOL_SCALE = 1e-4

COMPILE_TIMEOUT = int(os.environ.get("CUVIL_TEST_COMPILE_TIMEOUT", "900"))
RUN_TIMEOUT = int(os.environ.get("CUVIL_TEST_RUN_TIMEOUT", "300"))


# --------------------------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------------------------


def build_dir() -> Path:
    d = os.environ.get("CUVIL_BUILD")
    if not d:
        return REPO / "build"
    p = Path(d).expanduser()
    return p if p.is_absolute() else REPO / p


def bin_path(tool: str) -> Path:
    return build_dir() / "bin" / tool


def missing_binaries() -> list:
    """Messages for each Cuvil binary that is not there or not executable."""
    out = []
    for tool in ("cuvil-compile", "cuvil-run"):
        p = bin_path(tool)
        if not p.is_file():
            out.append(f"{p} does not exist")
        elif not os.access(p, os.X_OK):
            out.append(f"{p} is not executable")
    return out


class CuvilError(AssertionError):
    """A Cuvil command failed; carries the command line, exit status and stderr."""

    def __init__(self, what: str, proc: subprocess.CompletedProcess):
        self.proc = proc
        self.returncode = proc.returncode
        self.stderr = proc.stderr
        cmd = " ".join(shlex.quote(str(a)) for a in proc.args)
        super().__init__(f"{what} failed with exit status {proc.returncode}\n"
                         f"  command: {cmd}\n"
                         f"  stderr:\n{_indent(proc.stderr)}"
                         + (f"\n  stdout:\n{_indent(proc.stdout)}" if proc.stdout.strip() else ""))


def _indent(text: str, limit: int = 6000) -> str:
    text = text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more chars)"
    return "\n".join("    " + line for line in text.rstrip().splitlines()) or "    (empty)"


def run_tool(tool: str, args, timeout: int = RUN_TIMEOUT,
             cwd=None) -> subprocess.CompletedProcess:
    """Runs build/bin/<tool> with args in cwd (default: the system's temporary folder, never
    the checkout); never raises on a non-zero exit."""
    import tempfile

    cwd = cwd if cwd is not None else tempfile.gettempdir()
    argv = [str(bin_path(tool))] + [str(a) for a in args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              errors="replace")
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{tool} timed out after {timeout} s: "
                             f"{' '.join(shlex.quote(a) for a in argv)}") from e


# --------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------

def target_features() -> dict:
    """{target: the CPU features its code uses}, from src/codegen/targets.inc (as /proc/cpuinfo
    names them on x86-64)."""
    import re

    text = (REPO / "src" / "codegen" / "targets.inc").read_text()
    return {m.group(1): tuple(m.group(2).split())
            for m in re.finditer(r'^CUVIL_TARGET\("([^"]*)", "[^"]*", "[^"]*", "[^"]*", "([^"]*)"', text, re.M)}


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def host_runs(target: str) -> bool:
    """Whether this machine executes code built for target (an x86-64 target's features)."""
    import platform

    if target == "generic":
        return True
    if not target.startswith("x86_64") or platform.machine() != "x86_64":
        return False
    return set(target_features().get(target, ("?",))) <= _cpu_flags()


def host_target() -> str:
    """The target cuvil-compile picks by default here: the best one this machine executes."""
    for t in ("x86_64-avx512", "x86_64-avx2"):
        if host_runs(t):
            return t
    return "generic"


def env_target():
    """$CUVIL_TEST_TARGET: the target every compile of the tests builds for when the test names
    none (make test runs a subset again with x86_64-avx2 on an AVX-512 machine); None: the
    compiler's default (host_target())."""
    return os.environ.get("CUVIL_TEST_TARGET") or None


def effective_target() -> str:
    """The target a test's compile builds for when the test names none."""
    return env_target() or host_target()


# --------------------------------------------------------------------------------------------
# cuvil-compile
# --------------------------------------------------------------------------------------------


def compile_args(onnx_path, output, *, emit=None, target=None, opt_level=None, dims=None,
                 name=None, extra=()) -> list:
    args = ["--model", onnx_path, "--output", output]
    if emit is not None:
        args += ["--emit", emit]
    if target is None and emit != "c":
        target = env_target()
    if target is not None:
        args += ["--target", target]
    if opt_level is not None:
        args += ["--opt-level", str(opt_level)]
    for k, v in (dims or {}).items():
        args += ["--dim", f"{k}={v}"]
    if name is not None:
        args += ["--name", name]
    return args + [str(a) for a in extra]


def compile_raw(onnx_path, output, cwd=None, **opts) -> subprocess.CompletedProcess:
    """cuvil-compile --model onnx_path --output output [options]; returns the process. Runs in
    cwd, by default the output's folder (so that stray files never land in the checkout)."""
    timeout = opts.pop("timeout", COMPILE_TIMEOUT)
    if cwd is None and str(output) != "-" and Path(output).parent.is_dir():
        cwd = Path(output).parent
    return run_tool("cuvil-compile", compile_args(onnx_path, output, **opts), timeout=timeout,
                    cwd=cwd)


def compile(onnx_path, out_dir, *, stem=None, emit="so", **opts) -> Path:  # noqa: A001
    """Compiles onnx_path into out_dir and returns what cuvil-compile wrote: for emit 'so' (the
    default) out_dir/<stem>.so, whose header out_dir/<stem>.h must be beside it; for 'c' the
    folder out_dir/<stem>; for 'ir'/'dot' the text file out_dir/<stem>.ir|.dot.
    Raises CuvilError with the stderr on failure."""
    onnx_path = Path(onnx_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or onnx_path.stem
    suffix = {"so": ".so", "c": "", "ir": ".ir", "dot": ".dot"}[emit]
    out = out_dir / f"{stem}{suffix}"
    proc = compile_raw(onnx_path, out, emit=None if emit == "so" else emit, **opts)
    if proc.returncode != 0:
        raise CuvilError("cuvil-compile", proc)
    if not out.exists():
        raise AssertionError(f"cuvil-compile exited 0 but wrote no {out}\n"
                             f"  stderr:\n{_indent(proc.stderr)}")
    if emit == "so" and not out.with_suffix(".h").is_file():
        raise AssertionError(f"cuvil-compile wrote {out} but no header {out.with_suffix('.h')}")
    return out


# --------------------------------------------------------------------------------------------
# cuvil-run
# --------------------------------------------------------------------------------------------


def output_file_stem(name: str) -> str:
    """The file name cuvil-run gives an output, without .npy. The contract: names are used as
    they are unless they contain '/'; we take a sanitised name to map '/' to '_'."""
    return name.replace("/", "_") if "/" in name else name


def write_input(arr: np.ndarray, path: Path, fmt: str = "npy") -> Path:
    if fmt == "npy":
        np.save(path, arr, allow_pickle=False)
    elif fmt == "pb":
        from onnx import numpy_helper

        path.write_bytes(numpy_helper.from_array(arr).SerializeToString())
    else:
        raise ValueError(fmt)
    return path


def run_raw(so, inputs: dict, work_dir, *, fmt: str = "npy", threads=None, extra=(),
            out_dir=None):
    """Writes inputs to work_dir/inputs/in<i>.<fmt>, runs cuvil-run with --output-dir
    (default work_dir/outputs, created empty), returns (process, output dir)."""
    work_dir = Path(work_dir)
    in_dir = work_dir / "inputs"
    in_dir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(out_dir) if out_dir else work_dir / "outputs"
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [so]
    for i, (name, arr) in enumerate(inputs.items()):
        f = in_dir / f"in{i}.{fmt}"
        if isinstance(arr, (str, Path)):      # a file already written by the caller
            f = Path(arr)
        else:
            write_input(np.asarray(arr), f, fmt)
        args += ["--input", f"{name}={f}"]
    args += ["--output-dir", out_dir]
    if threads is not None:
        args += ["--threads", str(threads)]
    args += list(extra)
    return run_tool("cuvil-run", args, cwd=work_dir), out_dir


def read_outputs(out_dir) -> dict:
    """{file stem: array} for every .npy in out_dir."""
    return {p.name[:-4]: np.load(p, allow_pickle=False)
            for p in sorted(Path(out_dir).iterdir()) if p.name.endswith(".npy")}


def run(so, inputs: dict, work_dir=None, **kw) -> dict:
    """Runs the compiled model so on inputs (name -> ndarray) and returns {output: ndarray},
    keyed by the file names cuvil-run wrote (see output_file_stem). work_dir: a per-test
    folder (pytest's tmp_path) that the inputs and outputs are written under; without it a
    temporary folder, removed afterwards."""
    if work_dir is None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="cuvil-run-") as td:
            return run(so, inputs, td, **kw)
    proc, out_dir = run_raw(so, inputs, work_dir, **kw)
    if proc.returncode != 0:
        raise CuvilError("cuvil-run", proc)
    got = read_outputs(out_dir)
    if not got:
        raise AssertionError(f"cuvil-run exited 0 but wrote no .npy into {out_dir}\n"
                             f"  stderr:\n{_indent(proc.stderr)}")
    return got


def check_target_outputs(onnx_path, inputs: dict, ref: dict, work_dir, target: str) -> None:
    """onnx_path built for target and run on 1 and 2 threads, its outputs against ref (ONNX
    Runtime's), where this machine executes target's code (an AVX2-only machine checks the
    AVX-512 build's choices, in its IR or C, only)."""
    if not host_runs(target):
        return
    so = compile(onnx_path, Path(work_dir) / "build", target=target)
    for threads in (1, 2):
        got = run(so, inputs, Path(work_dir) / f"t{threads}", threads=threads)
        assert_outputs_close(got, ref)


def compile_and_run(onnx_path, inputs: dict, work_dir, **compile_opts) -> dict:
    so = compile(onnx_path, Path(work_dir) / "build", **compile_opts)
    return run(so, inputs, Path(work_dir) / "run")


# --------------------------------------------------------------------------------------------
# ONNX Runtime reference
# --------------------------------------------------------------------------------------------


_ORT_INT8_EXACT = None


def ort_int8_exact() -> bool:
    """Whether this machine's ONNX Runtime sums uint8 x int8 products exactly. With VNNI its
    kernels do; without (an AVX2-only CPU, AVX-512 without VNNI) MLAS adds each pair of
    products with vpmaddubsw into a saturating int16 (255 x 127 x 2 > 32767), so its int8 run
    of a model with ordinary int8 weights is not ONNX's. Probed with a MatMulInteger whose every
    pair saturates."""
    global _ORT_INT8_EXACT
    if _ORT_INT8_EXACT is None:
        from onnx import TensorProto, helper, numpy_helper
        g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, (1, 64))],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              [numpy_helper.from_array(np.full((64, 1), 127, np.int8), "b")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        y = _ort_session_run(m.SerializeToString(), {"a": np.full((1, 64), 255, np.uint8)})["y"]
        _ORT_INT8_EXACT = int(y.reshape(-1)[0]) == 255 * 127 * 64
    return _ORT_INT8_EXACT


# (op, weight input, its zero point's input): the int8 weights an integer kernel multiplies
# with a uint8 operand. A DequantizeLinear's int8 initializer: QDQ weights, which ONNX Runtime
# folds into such a kernel.
_INT8_WEIGHTS = {("", "MatMulInteger"): (1, 3), ("", "ConvInteger"): (1, 3), ("", "QLinearConv"): (3, 5),
                 ("", "QLinearMatMul"): (3, 5), ("", "DequantizeLinear"): (0, 2), ("com.microsoft", "QGemm"): (3, 5),
                 ("com.microsoft", "DynamicQuantizeMatMul"): (1, 3), ("com.microsoft", "MatMulIntegerToFloat"): (1, 5)}
# ... and where the other operand's zero point is (its type: int8 x int8 does not saturate, and
# ONNX Runtime has no int8 x uint8 kernel)
_OTHER_ZP = {"QLinearConv": 2, "QLinearMatMul": 2, "QGemm": 2}


def _ort_exact_int8_model(m):
    """The same model with each int8 weight initializer of an integer op stored as uint8 (q +
    128, its zero point + 128: the same values q - zp), so that ONNX Runtime runs its exact
    uint8 x uint8 kernels on a CPU where its uint8 x int8 ones saturate. A model whose int8
    weights cannot move (DynamicQuantizeLSTM: ONNX Runtime takes only zero points of 0) skips
    the test: there is no exact ONNX Runtime reference for it on this CPU."""
    import onnx
    import pytest
    from onnx import numpy_helper
    m = type(m).FromString(m.SerializeToString())   # (a copy: the caller's model stays as it was)
    inits = {t.name: t for t in m.graph.initializer}
    # weights quantized in the model (QuantizeLinear of a constant, int8): quantized to uint8
    # instead, their DequantizeLinears' zero points moved with them
    consts = set(inits) | {o for n in m.graph.node if n.op_type == "Constant" for o in n.output}
    for n in list(m.graph.node):
        if (n.op_type != "QuantizeLinear" or n.domain not in ("", "ai.onnx") or len(n.input) < 3 or n.input[0] not in consts
                or n.input[2] not in inits or inits[n.input[2]].data_type != onnx.TensorProto.INT8
                or any(n.output[0] in d.input for d in m.graph.node if d.op_type != "DequantizeLinear")
                or n.output[0] in {o.name for o in m.graph.output}):
            continue
        zq = numpy_helper.from_array((numpy_helper.to_array(inits[n.input[2]]).astype(np.int16) + 128).astype(np.uint8),
                                     n.input[2] + "__u8q")
        m.graph.initializer.append(zq)
        n.input[2] = zq.name
        for d in m.graph.node:
            if d.op_type == "DequantizeLinear" and d.input[0] == n.output[0] and len(d.input) > 2:
                d.input[2] = zq.name
    for n in list(m.graph.node):
        if n.domain == "com.microsoft" and n.op_type == "DynamicQuantizeLSTM" and any(
                i in inits and inits[i].data_type == onnx.TensorProto.INT8 for i in n.input[1:3]):
            pytest.skip("ONNX Runtime's int8 kernels on this CPU (no VNNI) saturate their int16 pair sums, and its "
                        "DynamicQuantizeLSTM takes no uint8 form with a zero point: no exact reference here (the same "
                        "Cuvil code is checked against it on a CPU with VNNI)")
        wz = _INT8_WEIGHTS.get((n.domain if n.domain != "ai.onnx" else "", n.op_type))
        if not wz or len(n.input) <= wz[0] or n.input[wz[0]] not in inits:
            continue
        w = inits[n.input[wz[0]]]
        if w.data_type != onnx.TensorProto.INT8:
            continue
        oz = _OTHER_ZP.get(n.op_type)
        if oz is not None and n.input[oz] in inits and inits[n.input[oz]].data_type == onnx.TensorProto.INT8:
            continue
        wv = numpy_helper.to_array(w).astype(np.int16)
        zname = n.input[wz[1]] if len(n.input) > wz[1] and n.input[wz[1]] else None
        if zname is not None and zname not in inits:
            continue   # (a computed zero point: left alone)
        if zname is not None:
            zv = numpy_helper.to_array(inits[zname]).astype(np.int16)
        elif n.op_type == "DequantizeLinear" and len(n.input) > 1 and n.input[1] in inits:
            zv = np.zeros(numpy_helper.to_array(inits[n.input[1]]).shape, np.int16)   # (as many as the scales)
        else:
            zv = np.zeros((), np.int16)
        nw = numpy_helper.from_array((wv + 128).astype(np.uint8), n.input[wz[0]] + "__u8")
        nz = numpy_helper.from_array((zv + 128).astype(np.uint8), (zname or n.name or n.output[0]) + "__u8zp")
        m.graph.initializer.extend([nw, nz])
        ins = list(n.input) + [""] * (wz[1] + 1 - len(n.input))
        ins[wz[0]], ins[wz[1]] = nw.name, nz.name
        del n.input[:]
        n.input.extend(ins)
    return m


def _ort_session_run(model, inputs: dict) -> dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


def ort_run(onnx_model, inputs: dict) -> dict:
    """ONNX Runtime's outputs for onnx_model (a path, bytes or a ModelProto), by output name.
    On a CPU where ONNX Runtime's uint8 x int8 sums saturate (ort_int8_exact), a model with int8
    weights runs in an equivalent uint8 form (_ort_exact_int8_model)."""
    if not ort_int8_exact():
        import onnx
        if isinstance(onnx_model, bytes):
            onnx_model = onnx.load_from_string(onnx_model)
        elif not hasattr(onnx_model, "SerializeToString"):
            onnx_model = onnx.load(str(onnx_model))   # (with its external data)
        onnx_model = _ort_exact_int8_model(onnx_model)
    if hasattr(onnx_model, "SerializeToString"):
        onnx_model = onnx_model.SerializeToString()
    elif not isinstance(onnx_model, bytes):
        onnx_model = str(onnx_model)
    return _ort_session_run(onnx_model, inputs)


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------


def onnx_graph_model(path, nodes, inputs, outputs, inits=(), opset: int = 17) -> Path:
    """Saves a one-graph ONNX model to path: inputs are value infos, outputs (name, elem type)
    pairs declared without a shape (the model's run gives it), inits initializers."""
    import onnx
    from onnx import helper
    g = helper.make_graph(nodes, Path(path).stem, inputs,
                          [helper.make_tensor_value_info(o, t, None) for o, t in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return Path(path)


def check_vs_ort(model, path, feeds: dict, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """A loaded model's outputs for feeds against ONNX Runtime's on the model at path: same
    count, shapes, dtypes and (within the tolerances) values."""
    want = ort_run(path, feeds)
    got = model(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want), (len(got), len(want))
    for (name, w), g in zip(want.items(), got):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def assert_close(got, ref, name: str = "output", rtol: float = RTOL,
                 atol_scale: float = ATOL_SCALE) -> None:
    """The project's tolerance, per output: |got - ref| <= atol + rtol*|ref| elementwise with
    atol = atol_scale * max|ref|. Shapes and dtypes must agree exactly; integer and bool
    outputs must be equal. On failure reports the max abs and rel error and the worst index."""
    __tracebackhide__ = True
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        raise AssertionError(f"{name}: shape {got.shape} != reference {ref.shape}")
    if got.dtype != ref.dtype:
        raise AssertionError(f"{name}: dtype {got.dtype} != reference {ref.dtype}")
    if ref.size == 0:
        return
    if not np.issubdtype(ref.dtype, np.floating):
        bad = got != ref
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise AssertionError(f"{name}: {int(bad.sum())} of {ref.size} elements differ; "
                                 f"first at {idx}: got {got[idx]} want {ref[idx]}")
        return
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    if not np.isfinite(r).all():
        # the reference itself has inf/nan: they must match exactly there
        nf = ~np.isfinite(r)
        same = (np.isnan(r[nf]) & np.isnan(g[nf])) | (r[nf] == g[nf])
        if not same.all():
            raise AssertionError(f"{name}: non-finite reference values not reproduced")
        g = np.where(nf, 0.0, g)
        r = np.where(nf, 0.0, r)
    scale = float(np.max(np.abs(r)))
    atol = atol_scale * scale
    err = np.abs(g - r)
    err = np.where(np.isnan(err), np.inf, err)
    tol = atol + rtol * np.abs(r)
    bad = ~(err <= tol)
    if bad.any():
        worst = np.unravel_index(int(np.argmax(err - tol)), r.shape)
        rel = err / np.maximum(np.abs(r), np.finfo(np.float32).tiny)
        imax = np.unravel_index(int(np.argmax(err)), r.shape)
        rmax = np.unravel_index(int(np.argmax(np.where(np.isfinite(rel), rel, 0))), r.shape)
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {r.size} elements out of tolerance "
            f"(rtol {rtol:g}, atol {atol:.3g} = {atol_scale:g} * max|ref| {scale:.6g})\n"
            f"  max abs err {float(err[imax]):.6g} at {tuple(map(int, imax))}: "
            f"got {g[imax]:.8g} want {r[imax]:.8g}\n"
            f"  max rel err {float(rel[rmax]):.6g} at {tuple(map(int, rmax))}: "
            f"got {g[rmax]:.8g} want {r[rmax]:.8g}\n"
            f"  worst vs tolerance at {tuple(map(int, worst))}: "
            f"got {g[worst]:.8g} want {r[worst]:.8g}\n"
            f"  got has {int(np.isnan(g).sum())} NaN, {int(np.isinf(g).sum())} inf")


def assert_outputs_close(got: dict, ref: dict, **kw) -> None:
    """Every output of ref (ORT, by ONNX output name) must be in got (cuvil-run, by file stem)
    and close; got must have no other outputs."""
    __tracebackhide__ = True
    want = {output_file_stem(n): n for n in ref}
    missing = [n for s, n in want.items() if s not in got]
    extra = [s for s in got if s not in want]
    if missing or extra:
        raise AssertionError(f"outputs differ: missing {missing}, unexpected {extra} "
                             f"(got {sorted(got)}, want {sorted(ref)})")
    errors = []
    for stem, n in want.items():
        try:
            assert_close(got[stem], ref[n], name=n, **kw)
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        raise AssertionError("\n".join(errors))


# --------------------------------------------------------------------------------------------
# Misc
# --------------------------------------------------------------------------------------------


def seeded_rng(key: str) -> np.random.Generator:
    """A generator seeded from a string (a test id), stable across runs and machines."""
    return np.random.default_rng(zlib.crc32(key.encode()))


def assert_clean_failure(proc: subprocess.CompletedProcess, *, mentions=(), any_of=(),
                         absent=(), max_lines: int = 4, what: str = "") -> None:
    """A failure the way the CLI contract wants it: exit status non-zero but not a crash, one
    clear message on stderr (at most max_lines lines), mentioning every string in `mentions`
    and at least one of `any_of` (case-insensitive), and none of the paths in `absent` left
    behind."""
    __tracebackhide__ = True
    cmd = " ".join(shlex.quote(str(a)) for a in proc.args)
    err = proc.stderr or ""
    ctx = f"{what}\n  command: {cmd}\n  exit status: {proc.returncode}\n  stderr:\n{_indent(err)}"
    if proc.returncode == 0:
        raise AssertionError(f"expected a failure, got exit status 0{ctx}")
    if proc.returncode < 0 or proc.returncode >= 125:
        raise AssertionError(f"crashed or killed instead of failing cleanly{ctx}")
    for bad in ("AddressSanitizer", "runtime error:", "Segmentation fault", "core dumped",
                "Traceback", "internal error", "assertion"):
        if bad.lower() in err.lower():
            raise AssertionError(f"stderr looks like a crash or a bug ({bad!r}){ctx}")
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    if not lines:
        raise AssertionError(f"no message on stderr{ctx}")
    if len(lines) > max_lines:
        raise AssertionError(f"expected one clear message, got {len(lines)} lines{ctx}")
    low = err.lower()
    for m in mentions:
        if str(m).lower() not in low:
            raise AssertionError(f"the message does not mention {str(m)!r}{ctx}")
    if any_of and not any(str(m).lower() in low for m in any_of):
        raise AssertionError(f"the message mentions none of {list(any_of)}{ctx}")
    for p in absent:
        p = Path(p)
        if p.exists() or p.is_symlink():
            left = sorted(str(q) for q in p.iterdir()) if p.is_dir() else [str(p)]
            if p.is_dir() and not left:
                continue   # an empty output folder the caller created is fine
            raise AssertionError(f"left behind after the failure: {left}{ctx}")
