"""CompiledModel: a Cuvil-compiled shared library called like a function."""
from __future__ import annotations

import ctypes
import math
import os
import shutil
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import _native as N
from ._native import CuvilError

# cuvil_dtype (ONNX TensorProto numbers) <-> NumPy
_NP_OF = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
          9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
          21: np.uint8, 22: np.int8,   # uint4/int4: one element per byte (0..15, -8..7)
          16: np.uint16}   # bfloat16: NumPy has none; its bits as uint16 (TensorSpec.bfloat16)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: its name, NumPy dtype and shape. A symbolic dim is its name (a str);
    `max_shape` holds the largest value each dim takes. A sequence of tensors (`sequence`
    True; a list of arrays in and out) holds up to `seq_max` elements of this dtype, each
    dim at most max_shape's: exactly that where `varies` (a tuple of bools) is False."""
    name: str
    dtype: np.dtype
    shape: tuple
    max_shape: tuple
    sequence: bool = False
    seq_max: int = 0
    varies: tuple = ()
    optional: bool = False   # an ONNX optional: None in (absent) and out
    # bfloat16, which NumPy lacks: dtype is uint16 and the arrays hold the bits. An input may
    # be a torch.bfloat16 tensor, an ml_dtypes.bfloat16 array or the uint16 bits; outputs are
    # torch.bfloat16 tensors when an input is a torch tensor, else uint16 bits (a.view(
    # ml_dtypes.bfloat16), or (a.astype(np.uint32) << 16).view(np.float32), reads them).
    bfloat16: bool = False

    def __repr__(self):
        opt = "optional " if self.optional else ""
        if self.bfloat16:
            opt += "bfloat16 bits: "
        if self.sequence:
            return f"TensorSpec({self.name!r}, {opt}sequence of <= {self.seq_max} {self.dtype}{list(self.max_shape)})"
        return f"TensorSpec({self.name!r}, {opt}{self.dtype}, {self.shape})"


def _spec(t: N.TensorInfo, symbols: dict) -> TensorSpec:
    """A dim is its symbol's name only where the model takes that symbol at run time; a named
    dim that was fixed when compiling (--dim, input_shapes, or unbound: 1) is its number."""
    if t.dtype not in _NP_OF:
        raise CuvilError(f"tensor {t.name!r}: element type {t.dtype} has no NumPy equivalent", "dtype")
    dims = tuple(int(t.dims[i]) for i in range(t.ndim))
    names = [t.dim_names[i].decode(errors="replace") if t.dim_names[i] else None for i in range(t.ndim)]
    if t.is_sequence:
        varies = tuple(bool((t.seq_varies >> i) & 1) for i in range(t.ndim))
        return TensorSpec(t.name.decode(errors="replace"), np.dtype(_NP_OF[t.dtype]), dims, dims, True, int(t.seq_max),
                          varies, bool(t.is_optional), t.dtype == 16)
    shape = tuple(n if n in symbols else d for n, d in zip(names, dims))
    return TensorSpec(t.name.decode(errors="replace"), np.dtype(_NP_OF[t.dtype]), shape, dims,
                      optional=bool(t.is_optional), bfloat16=t.dtype == 16)


def _bf16_bits(spec: TensorSpec, a):
    """A bfloat16 input as its uint16 bits: a torch.bfloat16 tensor (shared, not copied) or an
    ml_dtypes.bfloat16 array viewed; anything else as it is (the dtype check refuses it)."""
    if not spec.bfloat16:
        return a
    if _is_torch(a) and str(a.dtype) == "torch.bfloat16":
        import torch
        return a.view(torch.int16).numpy().view(np.uint16)
    if isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" and a.dtype.itemsize == 2:
        return a.view(np.uint16)
    return a


def _torch_out(spec: TensorSpec, r):
    import torch
    if spec.bfloat16:   # the bits, as the tensor they are
        return torch.from_numpy(r.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(r)


def _seq_block(spec: TensorSpec, info, elems) -> np.ndarray:
    """A list of arrays as the sequence block the model reads (cuvil_model.h): the count, each
    element's dims, then each element's data in its slot; checked against the spec first."""
    if not isinstance(elems, (list, tuple)):
        raise TypeError(f"input {spec.name!r} is a sequence: give a list of arrays, got {type(elems).__name__}")
    if len(elems) > spec.seq_max:
        raise ValueError(f"input {spec.name!r}: {len(elems)} elements, the model takes at most {spec.seq_max}")
    block = np.zeros(info.nbytes, np.uint8)
    hdr = block[:info.seq_hdr_bytes].view(np.int64)
    hdr[0] = len(elems)
    for i, e in enumerate(elems):
        if _is_torch(e):
            e = e.detach().cpu().contiguous()
            e = _bf16_bits(spec, e) if spec.bfloat16 and str(e.dtype) == "torch.bfloat16" else e.numpy()
        a = np.asarray(_bf16_bits(spec, e))
        if not a.flags.c_contiguous:   # (ascontiguousarray would make a 0-d element 1-d)
            a = a.copy(order="C")
        if a.dtype != spec.dtype:
            raise TypeError(f"input {spec.name!r}: element {i} is {a.dtype}, the model takes {spec.dtype}")
        ok = a.ndim == len(spec.max_shape) and all(
            (0 <= g <= m) if v else g == m for g, m, v in zip(a.shape, spec.max_shape, spec.varies))
        if not ok:
            want = ",".join(f"<={m}" if v else str(m) for m, v in zip(spec.max_shape, spec.varies))
            raise ValueError(f"input {spec.name!r}: element {i} has shape {a.shape}, the model takes [{want}]")
        hdr[1 + i * a.ndim:1 + (i + 1) * a.ndim] = a.shape
        at = info.seq_hdr_bytes + i * info.seq_slot_bytes
        block[at:at + a.nbytes] = a.reshape(-1).view(np.uint8)
    return block


def _seq_list(spec: TensorSpec, info, block: np.ndarray) -> list:
    """The model's sequence block as a list of arrays (views into it), its header checked."""
    hdr = block[:info.seq_hdr_bytes].view(np.int64)
    n, r = int(hdr[0]), len(spec.max_shape)
    if not 0 <= n <= spec.seq_max:
        raise CuvilError(f"output {spec.name!r}: the model gave {n} elements (a broken model)", "internal")
    out = []
    for i in range(n):
        shp = tuple(int(d) for d in hdr[1 + i * r:1 + (i + 1) * r])
        if any(not 0 <= d <= m for d, m in zip(shp, spec.max_shape)):
            raise CuvilError(f"output {spec.name!r}: element {i} has dims {shp} (a broken model)", "internal")
        at = info.seq_hdr_bytes + i * info.seq_slot_bytes
        out.append(block[at:at + math.prod(shp) * spec.dtype.itemsize].view(spec.dtype).reshape(shp))
    return out


def _is_torch(x) -> bool:
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")


MAX_THREADS = 256  # CUVIL_MAX_THREADS of the runtime


def check_threads(threads) -> int:
    if threads is None:
        return 1
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be an int in 1..{MAX_THREADS} (or None: 1), got {threads!r}")
    return threads


class _Ctx:
    """One execution context, owned by the thread-local storage of the thread that made it: it
    is destroyed when that thread ends (or at close)."""

    def __init__(self, owner: "_Contexts", m: ctypes.c_void_p):
        self.m = m
        self.fin = weakref.finalize(self, owner._destroy, m)


class _Contexts:
    """The model's execution contexts, one per Python thread that calls it (a context is not
    thread-safe; contexts are independent and share the weights). close() waits for the calls
    in flight, then destroys them all."""

    def __init__(self, desc: N.ModelDesc, threads: int):
        self.desc, self.threads = desc, threads
        self.local = threading.local()
        self.live: "weakref.WeakSet[_Ctx]" = weakref.WeakSet()
        self.cv = threading.Condition()
        self.running = 0
        self.closed = False

    def _destroy(self, m):
        with self.cv:
            if not self.closed:
                self.desc.destroy(m)

    def enter(self) -> ctypes.c_void_p:
        """The calling thread's context, counted as running until leave()."""
        with self.cv:
            if self.closed:
                raise CuvilError("the model was closed", "invalid argument")
            self.running += 1
        try:
            c = getattr(self.local, "c", None)
            if c is None:
                opts = N.ModelOptions()
                opts.n_threads = self.threads
                m = ctypes.c_void_p()
                s = self.desc.create(ctypes.byref(opts), ctypes.byref(m))
                if s != 0:
                    msg = self.desc.errmsg(m).decode(errors="replace") if m else "out of memory"
                    if m:
                        self.desc.destroy(m)
                    raise CuvilError(f"creating a context: {msg}", N.status_name(s))
                c = _Ctx(self, m)
                with self.cv:
                    self.live.add(c)
                self.local.c = c
            return c.m
        except BaseException:
            self.leave()
            raise

    def leave(self):
        with self.cv:
            self.running -= 1
            self.cv.notify_all()

    def close(self):
        with self.cv:
            if self.closed:
                return
            while self.running:
                self.cv.wait()
            for c in list(self.live):
                if c.fin.detach() is not None:  # not destroyed already (its thread ended)
                    self.desc.destroy(c.m)
            self.live = weakref.WeakSet()
            self.closed = True
        self.local = threading.local()


def _release(ctx: _Contexts, owned_dir: Path | None):
    ctx.close()
    if owned_dir is not None:  # a compile with cache=False: its folder goes with the model
        shutil.rmtree(owned_dir, ignore_errors=True)


class CompiledModel:
    """A compiled model: `model(*inputs)` runs it.

    Inputs are NumPy arrays or torch tensors (CPU), positional in the order of `.inputs` or by
    name as keywords; a contiguous array or tensor of the right dtype is read in place. The
    result has the kind of the inputs (torch tensors if any input is one, else NumPy arrays):
    one output on its own, several as a tuple. A wrong name, dtype or shape raises TypeError or
    ValueError naming the input. Calls from several threads run in parallel (each thread gets
    its own context; the GIL is released while the model runs).
    """

    def __init__(self, path: str | Path, *, threads: int | None = None, _onnx: Path | None = None,
                 _compile_args: list[str] | None = None, _owned_dir: Path | None = None,
                 _fd: int | None = None, _expect: dict | None = None, _sources_unchanged=None):
        """_fd, _expect (the cache): the library already open (without following a symbolic
        link), the {"size", "sha256", "owner"} it must have and the {"model_sha256",
        "options"} its descriptor must carry. The fd is closed here."""
        from . import _load
        check = dict(_expect or {})
        self.path = Path(path) if _fd is not None else Path(path).resolve()
        fd = _fd if _fd is not None else _load.open_checked(self.path)
        try:
            _load.check_fd(fd, self.path, size=check.get("size"), sha256=check.get("sha256"),
                           owner=check.get("owner"))
            self._dll = _load.dlopen_fd(fd, self.path)
        except OSError as e:
            raise CuvilError(f"{self.path} is not a loadable shared library: {e}", "invalid argument") from None
        finally:
            os.close(fd)
        try:
            entry = self._dll.cuvil_model_entry
        except AttributeError:
            raise CuvilError(f"{self.path} is not a Cuvil model (no cuvil_model_entry)", "invalid argument") from None
        entry.restype = ctypes.POINTER(N.ModelDesc)
        entry.argtypes = []
        d = entry()
        if not d:
            raise CuvilError(f"{self.path}: cuvil_model_entry returned NULL", "internal")
        self._desc = d.contents
        if self._desc.abi_version != N.MODEL_ABI_VERSION:
            raise CuvilError(f"{self.path}: model ABI {self._desc.abi_version}, this package speaks "
                             f"{N.MODEL_ABI_VERSION}; recompile it", "unsupported")
        for k in ("model_sha256", "options"):
            got = (getattr(self._desc, k) or b"").decode(errors="replace")
            if k in check and got != check[k]:
                raise CuvilError(f"{self.path}: its {k} is {got!r}, {check[k]!r} was built", "invalid argument")
        self.symbols = {self._desc.syms[i].name.decode(): (int(self._desc.syms[i].min), int(self._desc.syms[i].max))
                        for i in range(self._desc.n_syms)}
        self.inputs = [_spec(self._desc.inputs[i], self.symbols) for i in range(self._desc.n_inputs)]
        self.outputs = [_spec(self._desc.outputs[i], self.symbols) for i in range(self._desc.n_outputs)]
        self.target = self._desc.target.decode()
        self.threads = check_threads(threads)
        self._ctx = _Contexts(self._desc, self.threads)
        self._finalizer = weakref.finalize(self, _release, self._ctx, _owned_dir)
        self._onnx = _onnx
        self._sources_unchanged = _sources_unchanged
        self._compile_args = list(_compile_args or [])
        # Symbolic models: the output shapes a run gave, by its input shapes, so that the next
        # run with those shapes allocates only what it writes (the largest shapes of a decode
        # step's 24 KV-cache outputs are 600 MB, whose fresh pages cost milliseconds a run).
        self._out_shapes: dict = {}
        # Sizes only the run finds (a NonZero's count): the outputs' shapes depend on the
        # inputs' values, so every run gets the largest buffers and reports its shapes.
        self._run_sizes = self._desc.n_run_sizes > 0

    def __repr__(self):
        return (f"CompiledModel({str(self.path)!r}, target={self.target!r}, inputs={self.inputs}, "
                f"outputs={self.outputs})")

    def close(self):
        """Destroys the contexts now (also done when the model is garbage-collected); calling
        the model afterwards raises CuvilError. Not while another thread is running it."""
        self._finalizer()

    # ---- calling ----------------------------------------------------------------------
    def _arrange(self, args, kwargs) -> list:
        n = len(self.inputs)
        if len(args) > n:
            raise TypeError(f"the model takes {n} input{'s' if n != 1 else ''} "
                            f"({', '.join(s.name for s in self.inputs)}), got {len(args)}")
        vals: list[Any] = list(args) + [None] * (n - len(args))
        names = [s.name for s in self.inputs]
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"the model has no input named {k!r} (inputs: {', '.join(names)})")
            i = names.index(k)
            if vals[i] is not None:
                raise TypeError(f"input {k!r} given twice")
            vals[i] = v
        missing = [names[i] for i in range(n) if vals[i] is None and not self.inputs[i].optional]
        if missing:
            raise TypeError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        return vals

    def __call__(self, *args, **kwargs):
        vals = self._arrange(args, kwargs)
        want_torch = any(_is_torch(v) or (isinstance(v, (list, tuple)) and any(_is_torch(e) for e in v)) for v in vals)
        arrays, keep, seq_key = [], [], []
        for i, (spec, v) in enumerate(zip(self.inputs, vals)):
            if v is None:   # an optional input left out: NULL
                arrays.append(None)
                seq_key.append(None)
                continue
            if spec.sequence:
                arrays.append(_seq_block(spec, self._desc.inputs[i], v))
                seq_key.append(tuple(np.shape(e) for e in v))
                continue
            if _is_torch(v):
                if v.device.type != "cpu":
                    raise ValueError(f"input {spec.name!r}: a tensor on {v.device}; Cuvil runs on the CPU")
                v = v.detach()
                if not v.is_contiguous():
                    v = v.contiguous()
                keep.append(v)
                want = "bfloat16 (torch.bfloat16, or its bits as uint16)" if spec.bfloat16 else spec.dtype
                try:
                    a = _bf16_bits(spec, v) if spec.bfloat16 and str(v.dtype) == "torch.bfloat16" else v.numpy()
                except TypeError:   # (shares the tensor's memory; a dtype NumPy lacks cannot)
                    raise TypeError(f"input {spec.name!r}: dtype {v.dtype}, the model takes {want}") from None
            else:
                a = np.asarray(_bf16_bits(spec, v))
            if a.dtype != spec.dtype:
                want = "bfloat16 (torch.bfloat16, ml_dtypes.bfloat16, or its bits as uint16)" if spec.bfloat16 else spec.dtype
                raise TypeError(f"input {spec.name!r}: dtype {a.dtype}, the model takes {want}")
            self._check_shape(spec, a.shape)
            arrays.append(a if a.flags.c_contiguous else a.copy(order="C"))  # (ascontiguousarray makes 0-d 1-d)
        syms = self._bind_symbols(arrays)
        key = (tuple(a.shape if a is not None else None for a in arrays), tuple(seq_key)) \
            if syms is not None and not self._run_sizes else None
        known = self._out_shapes.get(key) if key is not None else None
        outs = [np.empty(self._desc.outputs[i].nbytes, np.uint8) if s.sequence else np.empty(shp, dtype=s.dtype)
                for i, (s, shp) in enumerate(zip(self.outputs, known or [s.max_shape for s in self.outputs]))]
        m = self._ctx.enter()
        try:
            res, shapes = self._run(m, arrays, outs, syms, want_torch)
        finally:
            self._ctx.leave()
        if key is not None and known is None:
            if len(self._out_shapes) >= 64:   # oldest first; another thread may be at it too
                self._out_shapes.pop(next(iter(self._out_shapes), None), None)
            self._out_shapes[key] = shapes
        return res

    def _run(self, m, arrays, outs, syms, want_torch):
        in_ptrs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data if a is not None else None for a in arrays])
        out_ptrs = (ctypes.c_void_p * max(1, len(outs)))(*[o.ctypes.data for o in outs])
        if syms is None and not self._run_sizes:
            s = self._desc.run(m, in_ptrs, out_ptrs)
            shapes = [o.shape for o in outs]
        else:
            in_dims = [(ctypes.c_int64 * N.MAX_DIMS)(*(a.shape if a is not None else ())) for a in arrays]
            out_dims = [(ctypes.c_int64 * N.MAX_DIMS)() for _ in outs]
            P = ctypes.POINTER(ctypes.c_int64)
            ind = (P * max(1, len(in_dims)))(*[ctypes.cast(d, P) for d in in_dims])
            outd = (P * max(1, len(out_dims)))(*[ctypes.cast(d, P) for d in out_dims])
            s = self._desc.run_shapes(m, in_ptrs, ind, out_ptrs, outd)
            shapes = [o.shape if sp.sequence else tuple(int(d[i]) for i in range(len(o.shape)))
                      for d, o, sp in zip(out_dims, outs, self.outputs)]
        if s != 0:
            raise CuvilError(self._desc.errmsg(m).decode(errors="replace"), N.status_name(s))
        res = []
        for i, (o, shp) in enumerate(zip(outs, shapes)):
            if self.outputs[i].optional and not self._desc.output_present(m, i):
                res.append(None)   # an optional output the run gave no value
                continue
            if self.outputs[i].sequence:   # a list of arrays, from its header
                els = _seq_list(self.outputs[i], self._desc.outputs[i], o)
                res.append([_torch_out(self.outputs[i], e) for e in els] if want_torch else els)
                continue
            if shp != o.shape:
                o = o.reshape(-1)[:math.prod(shp)].reshape(shp)
            res.append(o)
        if want_torch:
            res = [r if isinstance(r, list) or r is None else _torch_out(sp, r) for r, sp in zip(res, self.outputs)]
        return (res[0] if len(res) == 1 else tuple(res)), shapes

    def _check_shape(self, spec: TensorSpec, shape: tuple):
        if len(shape) != len(spec.shape):
            raise ValueError(f"input {spec.name!r}: shape {tuple(shape)}, the model takes {spec.shape}")
        for i, (got, want) in enumerate(zip(shape, spec.shape)):
            if isinstance(want, int) and got != want:
                raise ValueError(f"input {spec.name!r}: dim {i} is {got}, the model takes {spec.shape}")
            if isinstance(want, str) and want in self.symbols:
                lo, hi = self.symbols[want]
                if not lo <= got <= hi:
                    raise ValueError(f"input {spec.name!r}: dim {i} ({want}) is {got}, the model takes "
                                     f"{lo}..{hi}")

    def _bind_symbols(self, arrays):
        """None for a model without symbolic dims (run at the descriptor's dims), else the
        symbols' values (run_shapes checks them against each other)."""
        if not self.symbols:
            return None
        seen: dict = {}
        for spec, a in zip(self.inputs, arrays):
            for i, s in enumerate(spec.shape if a is not None else ()):
                if isinstance(s, str):
                    if s in seen and seen[s][0] != a.shape[i]:
                        raise ValueError(f"input {spec.name!r}: dim {i} ({s}) is {a.shape[i]}, but input "
                                         f"{seen[s][1]!r} gave {s} = {seen[s][0]}")
                    seen.setdefault(s, (a.shape[i], spec.name))
        return {k: v[0] for k, v in seen.items()}

    # ---- files ------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Writes the library to `path` (a .so) and its C header beside it (same name, .h),
        whose entry points are prefixed with the file's name (`resnet18.so`: resnet18_create,
        resnet18_run, ...) as with cuvil-compile; `cuvil.load(path)` opens it again, in this
        process or another. Like cuvil-compile, it never replaces a file Cuvil did not write."""
        path = Path(path)
        if path.suffix != ".so":
            raise ValueError(f"save: the path must end in .so, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._onnx is not None and self._onnx.is_file():
            # compiled again under the new name (the prefix comes from it); the cache makes the
            # graph's part quick, and the compiler's output rules apply
            from ._cleanup import new_build_folders
            self._check_sources()
            N.compile_args(["--model", str(self._onnx), "--output", str(path)] + self._compile_args,
                           folders=new_build_folders(path))
            return path
        header, target_h = self.path.with_suffix(".h"), path.with_suffix(".h")
        for p in (path, target_h):
            if os.path.lexists(p):
                raise FileExistsError(f"save: {p} exists; a model loaded from a library is copied, and "
                                      f"never over another file")
        pairs = [(self.path, path, 0o755)] + ([(header, target_h, 0o644)] if header.is_file() else [])
        done = []
        try:
            for src, dst, mode in pairs:
                _copy_new(src, dst, mode)
                done.append(dst)
        except BaseException:
            for d in done:   # no half a model: the library without its header
                d.unlink(missing_ok=True)
            raise
        return path

    def _check_sources(self):
        """The model's files are the ones it was compiled from (a save or a dump compiles them
        again): CuvilError if they changed since."""
        if self._sources_unchanged is not None and not self._sources_unchanged():
            raise CuvilError(f"{self._onnx} (or a file it reads) changed since this model was compiled; compile "
                             f"it again with cuvil.compile", "invalid argument")

    def _recompile(self, emit: str, out: Path):
        if self._onnx is None or not self._onnx.is_file():
            raise CuvilError("this model was loaded from a library: its graph is not at hand (compile it "
                             "with cuvil.compile to dump it)", "invalid argument")
        self._check_sources()
        N.compile_args(["--model", str(self._onnx), "--output", str(out), "--emit", emit] + self._compile_args,
                       folders=lambda: [str(out.parent)])

    def dump_ir(self) -> str:
        """The CIR of the model after the compiler's passes, as text."""
        import tempfile
        d = tempfile.mkdtemp(prefix="cuvil-ir-")
        try:
            out = Path(d) / "model.ir"
            self._recompile("ir", out)
            return out.read_text()
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def graph_svg(self, path: str | Path) -> Path:
        """Renders the compiled graph with Graphviz (`dot`) into the SVG file `path`."""
        import subprocess
        import tempfile
        dot = shutil.which("dot")
        if not dot:
            raise CuvilError("graph_svg needs Graphviz's `dot` on PATH (Debian: apt-get install graphviz)", "io")
        path = Path(path)
        d = tempfile.mkdtemp(prefix="cuvil-dot-")
        try:
            g = Path(d) / "model.dot"
            self._recompile("dot", g)
            r = subprocess.run([dot, "-Tsvg", str(g), "-o", str(path)], capture_output=True, text=True)
            if r.returncode != 0:
                raise CuvilError(f"dot failed: {r.stderr.strip()}", "io")
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return path


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it: another thread creating
    a file meanwhile would get the wrong mode)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _copy_new(src: Path, dst: Path, mode: int):
    """Copies src to dst, which must not exist, through a temporary file of an unpredictable name
    created beside dst (O_EXCL: never through a link planted there); dst appears whole, and an
    existing dst (a link included) is never replaced."""
    import tempfile
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    try:
        with open(src, "rb") as f, os.fdopen(fd, "wb", closefd=False) as out:
            shutil.copyfileobj(f, out, 1 << 22)
        os.fchmod(fd, mode & ~_umask())
        os.fsync(fd)
        try:
            os.link(tmp, dst)   # fails if dst exists, whatever it is
        except FileExistsError:
            raise FileExistsError(f"save: {dst} exists; a model loaded from a library is copied, and never over "
                                  f"another file") from None
    finally:
        os.close(fd)
        os.unlink(tmp)


def load(path: str | Path, *, threads: int | None = None) -> CompiledModel:
    """Opens a model saved by CompiledModel.save (or built by cuvil-compile). Loading a library
    runs its code: load only libraries you built or whose builder you trust (docs/SECURITY.md).
    It is checked first as cuvil-run checks it (a regular, well-formed ELF shared library, no
    segment past the end of the file, a Cuvil model's marker): CuvilError otherwise."""
    return CompiledModel(path, threads=threads)
