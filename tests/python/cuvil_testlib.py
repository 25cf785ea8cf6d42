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


def compile_and_run(onnx_path, inputs: dict, work_dir, **compile_opts) -> dict:
    so = compile(onnx_path, Path(work_dir) / "build", **compile_opts)
    return run(so, inputs, Path(work_dir) / "run")


# --------------------------------------------------------------------------------------------
# ONNX Runtime reference
# --------------------------------------------------------------------------------------------


def ort_run(onnx_model, inputs: dict) -> dict:
    """ONNX Runtime's outputs for onnx_model (a path, bytes or a ModelProto), by output name."""
    import onnxruntime as ort

    if hasattr(onnx_model, "SerializeToString"):
        onnx_model = onnx_model.SerializeToString()
    elif not isinstance(onnx_model, bytes):
        onnx_model = str(onnx_model)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(onnx_model, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


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
