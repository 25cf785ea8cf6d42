"""cuvil.compile: any supported model -> an ONNX file -> libcuvil -> CompiledModel."""
from __future__ import annotations

import hashlib
import os
import stat
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from . import _cache, _load
from . import _native as N
from ._model import CompiledModel, check_threads
from ._native import CuvilError


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


def _seq_text(v) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return str(v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return f"{v[0]}:{v[1]}"
    raise TypeError(f"a sequence's count is an int or a (lo, hi) range, got {v!r}")


def _write_calibration(calibration, folder: Path) -> str:
    """The calibration sets as cuvil-compile --calibrate reads them: a folder per set of
    <input>.npy ('/' in a name written '_'), or, for arrays alone (a model with one input), one
    .npy file per set."""
    if isinstance(calibration, (str, bytes, os.PathLike)):
        raise TypeError("calibration is a list of input sets, not a path (a folder of .npy sets: cuvil-compile "
                        "--quantize int8 --calibrate DIR)")
    if isinstance(calibration, (np.ndarray, dict)) or type(calibration).__module__.startswith("torch"):
        raise TypeError("calibration is a list of input sets (each a dict {input name: array}, or one array for a model "
                        f"with one input), not a {type(calibration).__name__}")
    sets = list(calibration)
    if not sets:
        raise ValueError("calibration is empty: give a list of input sets (dicts of input name -> array, or arrays)")
    dicts = [isinstance(c, dict) for c in sets]
    if any(dicts) and not all(dicts):
        raise TypeError("calibration mixes dicts and arrays: give every set as a dict {input name: array}, or every "
                        "set as one array (a model with one input)")
    for k, c in enumerate(sets):
        if all(dicts):
            d = folder / f"set_{k:06d}"
            d.mkdir()
            files = {}
            for name, a in c.items():
                if not isinstance(name, str) or not name or name in (".", "..") or "\0" in name or len(name) > 240:
                    raise ValueError(f"calibration set {k}: input name {name!r}")
                f = name.replace("/", "_") + ".npy"
                if f in files:
                    raise ValueError(f"calibration set {k}: inputs {files[f]!r} and {name!r} would both be {f}")
                files[f] = name
                np.save(d / f, _as_array(a), allow_pickle=False)
        else:
            if isinstance(c, (list, tuple)):
                raise TypeError(f"calibration set {k} is a {type(c).__name__}: give a dict {{input name: array}} "
                                "(or one array for a model with one input)")
            np.save(folder / f"set_{k:06d}.npy", _as_array(c), allow_pickle=False)
    return str(folder)


def _as_array(a):
    if type(a).__module__.startswith("torch"):
        a = a.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(a)


def _quant_args(quantize, calibration_dir, calibration_method, keep_float) -> list[str]:
    if not quantize:
        return []
    a = ["--quantize", quantize]
    if calibration_dir is not None:
        a += ["--calibrate", calibration_dir, "--calibration", calibration_method]
    for k in keep_float or ():
        a += ["--keep-float", str(k)]
    return a


def _args(dims, input_shapes, target, opt_level, sequences=None, precision=None) -> list[str]:
    a = []
    if target:
        a += ["--target", str(target)]
    if opt_level is not None:
        a += ["--opt-level", str(int(opt_level))]
    if precision:   # ("fp32" said: a float16 model's weights in float32 too)
        a += ["--precision", precision]
    for name, v in (dims or {}).items():
        a += ["--dim", f"{_name(name, 'dims')}={_dim_text(v)}"]
    for name, shape in (input_shapes or {}).items():
        a += ["--shape", f"{_name(name, 'input_shapes')}=" + ",".join(_dim_text(d) for d in shape)]
    for name, v in (sequences or {}).items():
        a += ["--seq", f"{_name(name, 'sequences')}={_seq_text(v)}"]
    return a


def _is_torch_module(m) -> bool:
    """Without importing torch (seconds, at the first call) when the program has not: then no
    object can be a torch module."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "nn"):
        return False
    return isinstance(m, (torch.nn.Module, torch.jit.ScriptModule))


def _lib_identity() -> str:
    """What the cache key knows of libcuvil: its version and its file (a rebuilt library
    compiles again), and the C compiler it will run ($CC)."""
    p = N.lib()._name
    cc = os.environ.get("CC", "")
    try:
        st = os.stat(p)
        return f"{N.version()}|{p}|{st.st_size}|{st.st_mtime_ns}|{cc}"
    except OSError:
        return f"{N.version()}|{p}|{cc}"


def _external_files(src: Path | None, data: bytes) -> list[tuple[str, Path | None]]:
    """For a model file, the files it reads besides itself (its tensors' external data, by
    location relative to its folder, subfolders included): (location, path). The compiler's
    rules apply first (docs/SECURITY.md): a location that is empty, absolute, holds '..' or
    resolves outside the model's folder gets no path (nothing is read; the compiler refuses
    the model)."""
    if src is None:
        return []
    from ._onnxfiles import external_locations
    folder = os.path.realpath(src.parent)
    out = []
    for loc in external_locations(data):
        p = Path(loc)
        inside = bool(loc) and not p.is_absolute() and ".." not in p.parts and "\0" not in loc
        if inside:
            real = os.path.realpath(src.parent / loc)
            inside = real.startswith(folder.rstrip("/") + "/")
        out.append((loc, src.parent / loc if inside else None))
    return out


def _fingerprint(files: list[tuple[str, Path | None]]) -> list[str]:
    """location|SHA-256 of each file: of a regular file only, opened without blocking and read
    to the size it had when opened (a FIFO or a device is never read: location|not a file; a
    missing one: location|missing; one outside the folder: location|refused; the compiler says
    why)."""
    out = []
    for loc, p in files:
        if p is None:
            out.append(f"{loc}|refused")
            continue
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
        except OSError:
            out.append(f"{loc}|missing")
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                out.append(f"{loc}|not a file")
                continue
            h, left = hashlib.sha256(), st.st_size
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 22))):
                h.update(chunk)
                left -= len(chunk)
            out.append(f"{loc}|{st.st_size}|{h.hexdigest()}")
        except OSError:
            out.append(f"{loc}|unreadable")
        finally:
            os.close(fd)
    return out


def compile(model: Any, example_inputs: Any = None, *, input_shapes: dict | None = None, dims: dict | None = None,
            target: str | None = None, opt_level: int = 2, threads: int | None = None,
            cache: bool = True, sequences: dict | None = None, precision: str | None = None,
            enable_fp16: bool = False, quantize: str | None = None, calibration=None,
            calibration_method: str = "minmax", keep_float=None, activations: str | None = None,
            _torch_method: str = "auto", _extra: list | None = None) -> CompiledModel:
    """Compiles `model` into a native library and returns it ready to call.

    model: an ONNX file's path, ONNX bytes, an onnx.ModelProto, a torch.nn.Module, a TorchScript
        module (torch.jit.script / trace / load) or a torch.fx.GraphModule. Torch models are
        exported to ONNX in memory (torch.export, see cuvil._torch) at `example_inputs`, or,
        without them, at float32 inputs of the sizes input_shapes gives; their inputs are
        named after the forward's arguments.
    input_shapes: {input name (or index for torch models): dims}, each dim an int, a (lo, hi)
        range (symbolic at run time) or a symbol's name; as `cuvil-compile --shape`.
    dims: {symbol: int or (lo, hi[, step])}: fixes a symbolic dim or keeps it symbolic in the
        range; as `cuvil-compile --dim`. For torch models a symbol named "batch" is dim 0 of
        every input.
    sequences: {sequence input: count or (lo, hi)}: how many elements an ONNX input of sequence
        type holds; its elements' dims where the model leaves them open come from
        input_shapes (the largest each may be); as `cuvil-compile --seq`. The model then takes
        (and gives, for a sequence output) a list of arrays.
    target: "generic", "x86_64-avx2", "x86_64-avx512", ... (default: this machine's best).
    threads: threads each call uses (default 1).
    precision: "fp32" (default), "fp16" or "bf16": the library stores its float32 weights in 16
        bits (rounded to nearest even; about half the file); a MatMul's or Gemm's weights and an
        embedding table stay so in memory, the others are widened when the model is loaded;
        arithmetic, activations and the model's inputs and outputs stay as they are, except that
        with "bf16" those products take their other operand in bfloat16 too. A float16 or
        bfloat16 model keeps the products' weights its initializers hold exactly in 16 bits
        unless precision="fp32" is given. As `cuvil-compile --precision`. enable_fp16=True is
        precision="fp16".
    activations: "fp32" (default), "fp16" or "bf16": the float32 tensors that go from one kernel
        to others (of 1,024 elements and more) are stored in 16 bits between them, each rounded
        once to nearest even; the kernels compute in float32. As `cuvil-compile --activations`.
    quantize: "int4-weights": MatMul/Gemm weights in 4 bits (`--quantize int4-weights`, no
        calibration). "int8": Cuvil's own quantizer (`cuvil-compile --quantize int8`) on `calibration`,
        a list of input sets (each a dict {input name: array}, or one array for a model with
        one input); calibration_method "minmax", "percentile" or "entropy"; keep_float: node
        names or ops left in float32. The accuracy cost on the calibration sets goes to stderr.
        Quantized builds are not cached.
    cache: reuse an earlier compile of the same model and options (in $CUVIL_CACHE_DIR, else
        ~/.cache/cuvil/python: a private folder, see docs/SECURITY.md).
    """
    dims = dict(dims or {})
    shapes = dict(input_shapes or {})
    check_threads(threads)
    if precision is not None and precision not in ("fp32", "fp16", "bf16"):
        raise ValueError(f"precision must be 'fp32', 'fp16' or 'bf16', got {precision!r}")
    if not isinstance(enable_fp16, bool):
        raise TypeError(f"enable_fp16 must be True or False, got {enable_fp16!r}")
    if enable_fp16:
        if precision not in (None, "fp16"):
            raise ValueError(f"enable_fp16=True asks for precision='fp16', but precision={precision!r} was given too")
        precision = "fp16"
    if activations is not None:
        if activations not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"activations must be 'fp32', 'fp16' or 'bf16', got {activations!r}")
        _extra = ["--activations", activations] + list(_extra or [])
    if quantize == "int4-weights":
        if calibration is not None:
            raise ValueError("quantize='int4-weights' takes no calibration (the weights alone)")
        return compile(model, example_inputs, input_shapes=input_shapes, dims=dims, target=target, opt_level=opt_level,
                       threads=threads, cache=cache, sequences=sequences, precision=precision, _torch_method=_torch_method,
                       _extra=_quant_args(quantize, None, None, keep_float) + list(_extra or []))
    if quantize is not None:
        if quantize != "int8":
            raise ValueError(f"quantize must be 'int8', 'int4-weights' or None, got {quantize!r}")
        if calibration is None:
            raise ValueError("quantize='int8' needs calibration: a list of input sets")
        if calibration_method not in ("minmax", "percentile", "entropy"):
            raise ValueError(f"calibration_method must be 'minmax', 'percentile' or 'entropy', got {calibration_method!r}")
        calib_dir = Path(tempfile.mkdtemp(prefix="cuvil-calibration-"))
        try:
            qargs = _quant_args(quantize, _write_calibration(calibration, calib_dir), calibration_method, keep_float)
            return compile(model, example_inputs, input_shapes=input_shapes, dims=dims, target=target,
                           opt_level=opt_level, threads=threads, cache=False, sequences=sequences, precision=precision,
                           _torch_method=_torch_method, _extra=qargs + list(_extra or []))
        finally:
            shutil.rmtree(calib_dir, ignore_errors=True)
    elif calibration is not None or keep_float:
        raise ValueError("calibration and keep_float go with quantize='int8'")
    if isinstance(opt_level, bool) or not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be an int in 0..3, got {opt_level!r}")
    for name, v in dims.items():   # checked before an export that may take seconds
        _name(name, "dims")
        _dim_text(v)
    if _is_torch_module(model):
        return _compile_torch(model, example_inputs, dims, shapes, target, opt_level, threads, cache, _torch_method,
                              precision, _extra)
    src = None  # a model file: compiled where it lies (its external data beside it)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, label = bytes(model), "<ONNX bytes>"
    elif isinstance(model, (str, os.PathLike)):
        p = Path(model)
        if not p.is_file():
            raise FileNotFoundError(f"no ONNX model at {p}")
        data, src, label = p.read_bytes(), p, str(model)
    elif type(model).__name__ == "ModelProto":
        data, label = model.SerializeToString(), "<onnx.ModelProto>"
    else:
        raise TypeError(f"cuvil.compile takes an ONNX path, bytes or ModelProto, a torch.nn.Module, a "
                        f"TorchScript module or an fx.GraphModule, not {type(model).__name__}")
    return _compile_onnx(data, src, label, _args(dims, shapes, target, opt_level, sequences, precision) + (_extra or []),
                         threads, cache)


def _compile_torch(model, example_inputs, dims, shapes, target, opt_level, threads, cache, method, precision=None,
                   extra=None):
    """The first of _torch.exports' graphs that Cuvil compiles; a graph with control flow left
    in it that Cuvil cannot compile (a Loop: while_loop, a scripted loop) is a refusal that
    says so (an If, from torch.cond or a scripted if, compiles)."""
    from . import _torch
    first = None
    for e, _names in _torch.exports(model, example_inputs, dims, shapes, method=method):
        d = dict(dims)
        for k, v in e.dims.items():
            d.setdefault(k, v)
        label = f"<torch model, exported by {e.method}>"
        try:
            # the export fixed the ranks; ranges in input_shapes became dims above
            return _compile_onnx(e.data, None, label, _args(d, {}, target, opt_level, precision=precision) + (extra or []),
                                 threads, cache)
        except CuvilError as err:
            if err.status != "unsupported":
                raise
            if e.control_flow:
                raise CuvilError(f"the torch model has control flow left in its graph (exported as "
                                 f"{', '.join(e.control_flow)}) that Cuvil does not compile: {err}", "unsupported") from None
            first = first or err   # what the other exporter writes may compile
    raise first


def _compile_onnx(data: bytes, src: Path | None, label: str, args: list[str], threads, cache: bool) -> CompiledModel:
    where = src.absolute() if src is not None else None   # (the working folder may change later)
    files = _external_files(where, data)
    ext = ([str(where)] + _fingerprint(files)) if files else []
    model_sha = hashlib.sha256(data).hexdigest()
    key = hashlib.sha256(data + "\0".join(args + [_lib_identity()] + ext).encode()).hexdigest()[:32]
    root = _cache.open_root(_cache.default_root()) if cache else Path(tempfile.mkdtemp(prefix="cuvil-"))
    entry = root / key
    # the model's file: the cache's copy, or, with external data, the user's file where it lies
    model_file = (lambda: where) if files else (lambda: entry / "model.onnx")

    def sources_unchanged() -> bool:
        try:
            return _cache.sha256_file(model_file()) == model_sha and (not files or _fingerprint(files) == ext[1:])
        except OSError:
            return False

    def make(path, fd, checks) -> CompiledModel:
        return CompiledModel(path, threads=threads, _fd=fd, _expect=checks, _onnx=model_file(), _compile_args=args,
                             _sources_unchanged=sources_unchanged, _owned_dir=None if cache else root)

    expect = {"model_sha256": model_sha, "args": args}
    if cache:
        try:
            found = _cache.lookup(root, key, expect, make)
            if found is not None:
                return found
        except _cache.Damaged:
            pass   # built again below, and put in its place
    try:
        build = _cache.new_build(root)
    except OSError as e:
        raise CuvilError(f"cannot use the cache folder {root}: {e.strerror} (set CUVIL_CACHE_DIR, or cache=False)",
                         "io") from None
    try:
        _cache.write_entry(build, data)
        copy = build / "model.onnx"
        # a model file is compiled where the user named it (messages name it; its external data
        # is read there); the descriptor's SHA-256 below proves the bytes were the ones read here
        given = str(src) if src is not None else str(copy)
        N.compile_args(["--model", given, "--output", str(build / "model.so")] + args,
                       folders=lambda: [str(build)], rename={str(copy): label})
        fd = os.open(build / "model.so", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            cm = CompiledModel(build / "model.so", threads=threads, _fd=fd, _expect={"model_sha256": model_sha},
                               _compile_args=args, _sources_unchanged=sources_unchanged,
                               _owned_dir=None if cache else root)
        except CuvilError as e:
            if "model_sha256" in str(e):
                raise CuvilError(f"{label} changed while it was being compiled; compile it again", "io") from None
            raise
        if files and _fingerprint(files) != ext[1:]:   # the weights compiled are not the ones keyed
            raise CuvilError(f"{label}'s external data changed while it was being compiled; compile it again", "io")
        _cache.seal(build, dict(expect, key=key, options=cm._desc.options.decode(errors="replace"), files=ext))

        def checked(path, fd, checks) -> bool:
            try:
                _load.check_fd(fd, path, size=checks["size"], sha256=checks["sha256"], owner=checks["owner"])
                return True
            finally:
                os.close(fd)

        def still_good() -> bool:   # the entry another process put there meanwhile
            try:
                return _cache.lookup(root, key, expect, checked) is True
            except _cache.Damaged:
                return False

        _cache.commit(root, build, key, still_good)
        cm.path, cm._onnx = entry / "model.so", model_file()
        return cm
    except BaseException:
        # nothing of a failed compile stays behind (cuvil-compile leaves no partial output)
        shutil.rmtree(build, ignore_errors=True)
        if not cache:
            shutil.rmtree(root, ignore_errors=True)
        raise
