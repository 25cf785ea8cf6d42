"""cuvil.compile: any supported model -> an ONNX file -> libcuvil -> CompiledModel."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from . import _native as N
from ._model import CompiledModel, check_threads
from ._native import CuvilError

# the opset torch's exporter writes (TorchScript-based exporter: Cuvil covers its ops)
TORCH_OPSET = 17


def _cache_dir() -> Path:
    d = os.environ.get("CUVIL_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuvil" / "python"


def _dim_text(v) -> str:
    """4 -> "4", (1, 8) -> "1:8", (32, 1024, 32) -> "32:1024:32", "batch" -> "batch"."""
    if isinstance(v, bool):
        raise TypeError(f"a dim is an int, a (lo, hi[, step]) range or a name, got {v!r}")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _name(v, "a dim's symbol")
    if isinstance(v, (tuple, list)) and len(v) in (2, 3) and all(isinstance(x, int) and not isinstance(x, bool)
                                                                  for x in v):
        return ":".join(str(x) for x in v)
    raise TypeError(f"a dim is an int, a (lo, hi[, step]) range or a name, got {v!r}")


def _name(n, where: str) -> str:
    """A symbol or input name as cuvil-compile's NAME=... syntax can carry it."""
    if not isinstance(n, str) or not n or "=" in n or "," in n:
        raise ValueError(f"{where}: a name is a non-empty str without '=' or ',', got {n!r}")
    return n


def _args(dims, input_shapes, target, opt_level) -> list[str]:
    a = []
    if target:
        a += ["--target", str(target)]
    if opt_level is not None:
        a += ["--opt-level", str(int(opt_level))]
    for name, v in (dims or {}).items():
        a += ["--dim", f"{_name(name, 'dims')}={_dim_text(v)}"]
    for name, shape in (input_shapes or {}).items():
        a += ["--shape", f"{_name(name, 'input_shapes')}=" + ",".join(_dim_text(d) for d in shape)]
    return a


def _is_torch_module(m) -> bool:
    try:
        import torch
    except ImportError:
        return False
    return isinstance(m, (torch.nn.Module, torch.jit.ScriptModule))


def export_input_names(n: int) -> list[str]:
    """The names the export gives a torch model's n inputs: input (one), input0, input1, ..."""
    return ["input"] if n == 1 else [f"input{i}" for i in range(n)]


_export_lock = threading.Lock()  # torch.onnx.export keeps global state: one export at a time


def _torch_to_onnx(model, example_inputs, dims, input_shapes) -> tuple[bytes, dict]:
    """Exports a torch.nn.Module / TorchScript module / fx.GraphModule in memory. A dim named
    "batch" in `dims` is dim 0 of every input; `input_shapes` ({name or index: dims}) marks
    dims symbolic (a name, or a (lo, hi) range, which becomes a --dim binding returned here);
    its numbers must be the example's. The example tensors are cloned first: the export runs
    the model, and an in-place op must not change the caller's tensors."""
    import torch
    if example_inputs is None:
        raise TypeError("compiling a torch model needs example_inputs (a tensor or a tuple of tensors)")
    if isinstance(example_inputs, (torch.Tensor, np.ndarray)):
        example_inputs = (example_inputs,)
    example_inputs = tuple(torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
                           for x in example_inputs)
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"example_inputs[{i}] is a {type(x).__name__}; the examples are tensors or arrays")
    example_inputs = tuple(x.detach().clone() for x in example_inputs)
    names = export_input_names(len(example_inputs))
    shapes = {}
    for k, v in (input_shapes or {}).items():
        if isinstance(k, int) and not isinstance(k, bool):
            if not 0 <= k < len(names):
                raise ValueError(f"input_shapes: no input {k} (the model has {len(names)} inputs)")
            k = names[k]
        if k not in names:
            raise ValueError(f"input_shapes: no input {k!r} (the exported inputs are {', '.join(names)})")
        x = example_inputs[names.index(k)]
        v = list(v)
        if len(v) != x.dim():
            raise ValueError(f"input_shapes[{k!r}]: {len(v)} dims, the example has {x.dim()}")
        for d, dv in enumerate(v):
            if isinstance(dv, int) and not isinstance(dv, bool) and dv != x.shape[d]:
                raise ValueError(f"input_shapes[{k!r}]: dim {d} is {dv}, the example's is {x.shape[d]} (a torch "
                                 f"model is exported at its example's sizes; give a range to make a dim symbolic)")
            if isinstance(dv, str):
                _name(dv, "input_shapes")
        shapes[k] = v
    dynamic_axes: dict[str, dict[int, str]] = {}
    extra_dims = {}  # a range given in input_shapes: a --dim binding of the symbol the export names
    for name, x in zip(names, example_inputs):
        axes = {}
        for d, v in enumerate(shapes.get(name, [])):
            if isinstance(v, str):
                axes[d] = v
            elif isinstance(v, (tuple, list)):
                axes[d] = f"{name}_dim{d}"
                extra_dims[axes[d]] = tuple(v)
        if "batch" in (dims or {}) and 0 not in axes and x.dim() > 0:
            axes[0] = "batch"
        if axes:
            dynamic_axes[name] = axes
    buf = io.BytesIO()
    modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
    if hasattr(model, "eval"):
        model.eval()
    try:
        with _export_lock:
            # the outputs are named output (one) or output0, output1, ... (several). Not under
            # no_grad: there, nn.MultiheadAttention takes a fused path the exporter cannot write
            out = model(*[x.clone() for x in example_inputs])
            n_out = len(out) if isinstance(out, (tuple, list)) else 1
            out_names = ["output"] if n_out == 1 else [f"output{i}" for i in range(n_out)]
            torch.onnx.export(model, example_inputs, buf, input_names=names, output_names=out_names,
                              dynamic_axes=dynamic_axes or None, opset_version=TORCH_OPSET, dynamo=False)
    except (RuntimeError, TypeError, ValueError, NotImplementedError, AssertionError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CuvilError(f"exporting the torch model to ONNX failed ({type(e).__name__}): {first[:800]}",
                         "unsupported") from e
    finally:
        for m, training in modes:  # each submodule's own mode back (a frozen BatchNorm stays frozen)
            m.training = training
    return buf.getvalue(), extra_dims


def _lib_identity() -> str:
    """What the cache key knows of libcuvil: its version and its file (a rebuilt library
    compiles again)."""
    p = N.lib()._name
    try:
        st = os.stat(p)
        return f"{N.version()}|{p}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        return f"{N.version()}|{p}"


def _external_files(src: Path | None, data: bytes) -> list[str]:
    """For a model file, what the cache key must know beside its bytes: its place, and each file
    beside it that it names (its external data: a tensor's location is a path relative to the
    model) with its size and time."""
    if src is None:
        return []
    out = [str(src)]
    try:
        for f in sorted(src.parent.iterdir()):
            if f != src and f.name.encode() in data and f.is_file():
                st = f.stat()
                out.append(f"{f.name}|{st.st_size}|{st.st_mtime_ns}")
    except OSError:
        pass
    return out


def compile(model: Any, example_inputs: Any = None, *, input_shapes: dict | None = None, dims: dict | None = None,
            target: str | None = None, opt_level: int = 2, threads: int | None = None,
            cache: bool = True) -> CompiledModel:
    """Compiles `model` into a native library and returns it ready to call.

    model: an ONNX file's path, ONNX bytes, an onnx.ModelProto, a torch.nn.Module, a TorchScript
        module (torch.jit.script / trace / load) or a torch.fx.GraphModule (torch models are
        exported to ONNX in memory with `example_inputs`).
    input_shapes: {input name (or index for torch models): dims}, each dim an int, a (lo, hi)
        range (symbolic at run time) or a symbol's name; as `cuvil-compile --shape`.
    dims: {symbol: int or (lo, hi[, step])}: fixes a symbolic dim or keeps it symbolic in the
        range; as `cuvil-compile --dim`. For torch models a symbol named "batch" is dim 0 of
        every input.
    target: "generic", "x86_64-avx2", "x86_64-avx512", ... (default: this machine's best).
    threads: threads each call uses (default 1).
    cache: reuse an earlier compile of the same model and options (in $CUVIL_CACHE_DIR, else
        ~/.cache/cuvil/python).
    """
    dims = dict(dims or {})
    shapes = dict(input_shapes or {})
    src = None  # a model file (with external data: compiled where it lies)
    if _is_torch_module(model):
        data, extra = _torch_to_onnx(model, example_inputs, dims, shapes)
        for k, v in extra.items():
            dims.setdefault(k, v)
        shapes = {}  # the export fixed the ranks; ranges became dims above
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif isinstance(model, (str, os.PathLike)):
        p = Path(model)
        if not p.is_file():
            raise FileNotFoundError(f"no ONNX model at {p}")
        data = p.read_bytes()
        src = p.resolve()
    elif type(model).__name__ == "ModelProto":
        data = model.SerializeToString()
    else:
        raise TypeError(f"cuvil.compile takes an ONNX path, bytes or ModelProto, a torch.nn.Module, a "
                        f"TorchScript module or an fx.GraphModule, not {type(model).__name__}")
    check_threads(threads)
    if isinstance(opt_level, bool) or not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be an int in 0..3, got {opt_level!r}")
    args = _args(dims, shapes, target, opt_level)
    ext = _external_files(src, data)
    key = hashlib.sha256(data + "\0".join(args + [_lib_identity()] + ext).encode()).hexdigest()[:32]
    if cache:
        root = _cache_dir()
    else:
        root = Path(tempfile.mkdtemp(prefix="cuvil-"))
    d = root / key
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CuvilError(f"cannot use the cache folder {root}: {e.strerror} (set CUVIL_CACHE_DIR, or cache=False)",
                         "io") from None
    onnx_path, so = d / "model.onnx", d / "model.so"
    # a model with external data is read where it lies; the others from the cache's copy
    model_file = src if src is not None and len(ext) > 1 else onnx_path
    if cache and so.is_file() and onnx_path.is_file():
        try:
            return CompiledModel(so, threads=threads, _onnx=model_file, _compile_args=args)
        except (CuvilError, OSError):
            # a damaged cache entry (the cache is ours): compiled again below
            for f in (so, so.with_suffix(".h")):
                f.unlink(missing_ok=True)
    try:
        # written under a temporary name and renamed: a concurrent compile never sees half a file
        tmp = d / f"model.onnx.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, onnx_path)
        N.compile_args(["--model", str(model_file), "--output", str(so)] + args,
                       folders=lambda: [str(d if cache else root)])
        return CompiledModel(so, threads=threads, _onnx=model_file, _compile_args=args,
                             _owned_dir=None if cache else root)
    except BaseException:
        # nothing of a failed compile stays behind (cuvil-compile leaves no partial output)
        shutil.rmtree(d if cache else root, ignore_errors=True)
        raise
