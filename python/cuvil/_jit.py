"""@cuvil.jit: a NumPy function traced into CIR through the builder API, compiled on its first
call for each set of argument shapes, then run natively.

Tracing calls the function once with stand-ins for the arrays; each supported operation on a
stand-in adds a CIR node (cuvil_graph_node). The supported subset:

    a @ b, np.matmul           a + b, a - b, a * b, a / b, -a (arrays, and Python or NumPy scalars)
    np.maximum, np.minimum     np.exp, np.log, np.tanh, np.sqrt
    a.sum / np.sum, a.mean / np.mean, a.max / np.max / np.amax  (axis=None|int|tuple, keepdims)
    a.reshape / np.reshape     a.T, a.transpose / np.transpose
    np.where(cond, a, b)       comparisons a > b, a < b, a >= b, a <= b (for where)

Arrays are float32 (a float64 argument is refused, not silently narrowed). Anything else
raises NotImplementedError naming the call. Arguments that are not arrays (ints, floats) are
constants of the build: another value compiles again (floats compare by their bits: a NaN finds
its build). Each jitted function keeps its last CACHE_SIZE (32) builds, least recently used out
first (`cache_size=`).
"""
from __future__ import annotations

import ctypes
import functools
import inspect
import shutil
import struct
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from . import _native as N
from ._model import CompiledModel

SUPPORTED = ("@/np.matmul, + - * / and unary -, np.maximum, np.minimum, np.exp, np.log, np.tanh, np.sqrt, "
             "sum/mean/max (np.sum, np.mean, np.max, np.amax) over axes, reshape, transpose/.T, np.where, "
             "comparisons > < >= <=")

ATTR_INT, ATTR_FLOAT, ATTR_STRING, ATTR_INTS = 1, 2, 3, 4
DT_F32, DT_I64, DT_BOOL = 1, 7, 9


class _Attr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_int), ("i", ctypes.c_int64), ("f", ctypes.c_float),
                ("s", ctypes.c_char_p), ("ints", ctypes.POINTER(ctypes.c_int64)),
                ("floats", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_size_t)]


def _setup(L):
    if getattr(L, "_jit_ready", False):
        return
    L.cuvil_graph_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    L.cuvil_graph_create.restype = ctypes.c_int
    L.cuvil_graph_destroy.argtypes = [ctypes.c_void_p]
    L.cuvil_graph_destroy.restype = None
    L.cuvil_graph_input.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
    L.cuvil_graph_input.restype = ctypes.c_int
    L.cuvil_graph_constant.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
    L.cuvil_graph_constant.restype = ctypes.c_int
    L.cuvil_graph_node.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                   ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_Attr)]
    L.cuvil_graph_node.restype = ctypes.c_int
    L.cuvil_graph_output.argtypes = [ctypes.c_void_p, ctypes.c_int]
    L.cuvil_graph_output.restype = ctypes.c_int
    L._jit_ready = True


class _Builder:
    """One graph under construction (a context and a cuvil_graph)."""

    def __init__(self, name: str):
        self.L = N.lib()
        _setup(self.L)
        self.ctx = ctypes.c_void_p()
        if self.L.cuvil_ctx_create(ctypes.byref(self.ctx)) != 0:
            raise N.CuvilError("out of memory", "out of memory")
        self.g = ctypes.c_void_p()
        if self.L.cuvil_graph_create(self.ctx, name.encode(), ctypes.byref(self.g)) != 0:
            self._fail("creating the graph")
        self.n = 0

    def _fail(self, what: str):
        raise N.CuvilError(f"cuvil.jit: {what}: {self.L.cuvil_errmsg(self.ctx).decode(errors='replace')}", "model")

    def close(self):
        if self.g:
            self.L.cuvil_graph_destroy(self.g)
            self.g = ctypes.c_void_p()
        if self.ctx:
            self.L.cuvil_ctx_destroy(self.ctx)
            self.ctx = ctypes.c_void_p()

    def input(self, name: str, shape: tuple, dtype=DT_F32) -> int:
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        v = self.L.cuvil_graph_input(self.g, name.encode(), dtype, len(shape), dims, None)
        if v < 0:
            self._fail(f"input {name!r}")
        return v

    def const(self, arr: np.ndarray) -> int:
        arr = np.require(arr, requirements="C")   # (np.ascontiguousarray makes a 0-d array 1-d)
        dt = {np.dtype(np.float32): DT_F32, np.dtype(np.int64): DT_I64}[arr.dtype]
        dims = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
        self.n += 1
        v = self.L.cuvil_graph_constant(self.g, f"c{self.n}".encode(), dt, arr.ndim, dims, arr.ctypes.data)
        if v < 0:
            self._fail("a constant")
        return v

    def node(self, op: str, inputs: list[int], attrs: dict | None = None) -> int:
        self.n += 1
        keep, cattrs = [], []
        for k, val in (attrs or {}).items():
            a = _Attr()
            a.name = k.encode()
            if isinstance(val, (list, tuple)):
                arr = (ctypes.c_int64 * max(1, len(val)))(*val)
                keep.append(arr)
                a.type, a.ints, a.n = ATTR_INTS, ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64)), len(val)
            else:
                a.type, a.i = ATTR_INT, int(val)
            cattrs.append(a)
        ins = (ctypes.c_int * max(1, len(inputs)))(*inputs)
        out = (ctypes.c_int * 1)()
        at = (_Attr * max(1, len(cattrs)))(*cattrs)
        if self.L.cuvil_graph_node(self.g, op.encode(), f"{op}_{self.n}".encode(), len(inputs), ins, 1, out, None,
                                   len(cattrs), at) != 0:
            self._fail(f"{op}")
        return out[0]

    def output(self, v: int):
        if self.L.cuvil_graph_output(self.g, v) != 0:
            self._fail("an output")

    def compile(self, path: Path):
        from . import _cleanup
        args = [b"--output", str(path).encode()]
        arr = (ctypes.c_char_p * len(args))(*args)

        def call():
            if self.L.cuvil_compile_graph_args(self.g, len(args), arr) != 0:
                self._fail("compiling")
        _cleanup.run(call, lambda: [str(path.parent)])


def _axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"cuvil.jit: axis {a} is out of range for {ndim} dims")
        out.append(a % ndim)
    return tuple(sorted(set(out)))


class Traced:
    """A stand-in for an array while a function is traced."""

    __array_priority__ = 1000

    def __init__(self, b: _Builder, vid: int, shape: tuple, dtype):
        self.b, self.id, self.shape, self.dtype = b, vid, tuple(int(d) for d in shape), np.dtype(dtype)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    T = property(lambda self: self.transpose())

    def __repr__(self):
        return f"<cuvil.jit traced array {self.shape} {self.dtype}>"

    def __bool__(self):
        raise TypeError("cuvil.jit: the truth value of a traced array is not known while tracing "
                        "(data-dependent Python control flow cannot be compiled; use np.where)")

    def __len__(self):
        return self.shape[0]

    # ---- helpers ----
    def _lift(self, x) -> "Traced":
        if isinstance(x, Traced):
            if x.b is not self.b:
                raise ValueError("cuvil.jit: arrays from two different traces")
            return x
        a = np.asarray(x)
        if a.dtype.kind in "fiub":
            a = a.astype(np.float32)
        else:
            raise TypeError(f"cuvil.jit: cannot use a {a.dtype} value here")
        return Traced(self.b, self.b.const(a), a.shape, np.float32)

    def _binary(self, op: str, other, reverse=False, out_dtype=None) -> "Traced":
        o = self._lift(other)
        a, c = (o, self) if reverse else (self, o)
        shape = np.broadcast_shapes(a.shape, c.shape)
        return Traced(self.b, self.b.node(op, [a.id, c.id]), shape, out_dtype or np.float32)

    def _unary(self, op: str) -> "Traced":
        return Traced(self.b, self.b.node(op, [self.id]), self.shape, self.dtype)

    # ---- operators ----
    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("div", o)
    def __rtruediv__(self, o): return self._binary("div", o, True)
    def __gt__(self, o): return self._binary("greater", o, out_dtype=np.bool_)
    def __lt__(self, o): return self._binary("less", o, out_dtype=np.bool_)
    def __ge__(self, o): return self._binary("greater_equal", o, out_dtype=np.bool_)
    def __le__(self, o): return self._binary("less_equal", o, out_dtype=np.bool_)
    def __neg__(self): return self._unary("neg")
    def __pos__(self): return self

    def _unsupported(self, what: str):
        raise NotImplementedError(f"cuvil.jit: {what} is not supported (supported: {SUPPORTED})")

    def __pow__(self, o): self._unsupported("** (power)")
    def __rpow__(self, o): self._unsupported("** (power)")
    def __mod__(self, o): self._unsupported("% (modulo)")
    def __rmod__(self, o): self._unsupported("% (modulo)")
    def __floordiv__(self, o): self._unsupported("// (floor division)")
    def __rfloordiv__(self, o): self._unsupported("// (floor division)")
    def __abs__(self): self._unsupported("abs()")
    def __getitem__(self, i): self._unsupported("indexing and slicing")
    def __setitem__(self, i, v): self._unsupported("item assignment")
    def __iter__(self): self._unsupported("iterating over an array")
    def __eq__(self, o): self._unsupported("== (use > < >= <=)")
    def __ne__(self, o): self._unsupported("!= (use > < >= <=)")
    __hash__ = object.__hash__

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._unsupported(f"the array method or attribute .{name}")

    def __matmul__(self, o): return self._matmul(self, self._lift(o))
    def __rmatmul__(self, o): return self._matmul(self._lift(o), self)

    def _matmul(self, a: "Traced", c: "Traced") -> "Traced":
        if a.ndim == 0 or c.ndim == 0:
            raise ValueError("cuvil.jit: matmul of a scalar (use *)")
        sa = a.shape if a.ndim > 1 else (1,) + a.shape
        sc = c.shape if c.ndim > 1 else c.shape + (1,)
        if sa[-1] != sc[-2]:
            raise ValueError(f"cuvil.jit: matmul {a.shape} @ {c.shape}: inner dims differ")
        shape = np.broadcast_shapes(sa[:-2], sc[:-2]) + (sa[-2], sc[-1])
        if a.ndim == 1:
            shape = shape[:-2] + shape[-1:]
        if c.ndim == 1:
            shape = shape[:-1]
        return Traced(self.b, self.b.node("matmul", [a.id, c.id]), shape, np.float32)

    def _reduce(self, op: str, axis=None, keepdims=False):
        axes = _axes(axis, self.ndim)
        ax = self.b.const(np.array(axes, dtype=np.int64))
        shape = tuple(1 if i in axes else d for i, d in enumerate(self.shape)) if keepdims else \
            tuple(d for i, d in enumerate(self.shape) if i not in axes)
        return Traced(self.b, self.b.node(op, [self.id, ax], {"keepdims": int(bool(keepdims))}), shape, self.dtype)

    def sum(self, axis=None, keepdims=False): return self._reduce("reduce_sum", axis, keepdims)
    def mean(self, axis=None, keepdims=False): return self._reduce("reduce_mean", axis, keepdims)
    def max(self, axis=None, keepdims=False): return self._reduce("reduce_max", axis, keepdims)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = [int(s) for s in shape]
        if shape.count(-1) > 1:
            raise ValueError("cuvil.jit: reshape with more than one -1")
        known = int(np.prod([s for s in shape if s != -1]))
        if -1 in shape:
            if known == 0 or self.size % known:
                raise ValueError(f"cuvil.jit: cannot reshape {self.shape} to {tuple(shape)}")
            shape[shape.index(-1)] = self.size // known
        if int(np.prod(shape)) != self.size:
            raise ValueError(f"cuvil.jit: cannot reshape {self.shape} to {tuple(shape)}")
        sv = self.b.const(np.array(shape, dtype=np.int64))
        return Traced(self.b, self.b.node("reshape", [self.id, sv]), tuple(shape), self.dtype)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        perm = tuple(int(a) % self.ndim for a in axes) if axes else tuple(reversed(range(self.ndim)))
        if sorted(perm) != list(range(self.ndim)):
            raise ValueError(f"cuvil.jit: transpose axes {axes} are not a permutation of {self.ndim} dims")
        return Traced(self.b, self.b.node("transpose", [self.id], {"perm": list(perm)}),
                      tuple(self.shape[p] for p in perm), self.dtype)

    # ---- NumPy protocols ----
    _UFUNCS = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
               "maximum": "max", "minimum": "min", "greater": "greater", "less": "less",
               "greater_equal": "greater_equal", "less_equal": "less_equal"}
    _UNARY = {"exp": "exp", "log": "log", "tanh": "tanh", "sqrt": "sqrt", "negative": "neg"}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        if method != "__call__" or kwargs:
            raise NotImplementedError(f"cuvil.jit: numpy.{name}.{method} with {sorted(kwargs)} is not supported "
                                      f"(supported: {SUPPORTED})")
        if name == "matmul":
            return self._matmul(self._lift(inputs[0]), self._lift(inputs[1]))
        if name in self._UNARY:
            return self._lift(inputs[0])._unary(self._UNARY[name])
        if name in self._UFUNCS:
            a = self._lift(inputs[0])
            dt = np.bool_ if name.startswith(("greater", "less")) else None
            return a._binary(self._UFUNCS[name], inputs[1], out_dtype=dt)
        raise NotImplementedError(f"cuvil.jit: numpy.{name} is not supported (supported: {SUPPORTED})")

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__
        if name in ("sum", "mean", "max", "amax"):
            op = {"sum": "sum", "mean": "mean", "max": "max", "amax": "max"}[name]
            extra = set(kwargs) - {"axis", "keepdims"}
            if extra or len(args) > 2:
                raise NotImplementedError(f"cuvil.jit: numpy.{name} with {sorted(extra)} is not supported")
            x = self._lift(args[0])
            return getattr(x, op)(args[1] if len(args) > 1 else kwargs.get("axis"), kwargs.get("keepdims", False))
        if name == "reshape":
            return self._lift(args[0]).reshape(args[1] if len(args) > 1 else kwargs["newshape"])
        if name == "transpose":
            axes = args[1] if len(args) > 1 else kwargs.get("axes")
            return self._lift(args[0]).transpose(*(() if axes is None else (axes,)))
        if name == "where" and len(args) == 3 and not kwargs:
            c = self._lift_bool(args[0])
            x, y = self._lift(args[1]), self._lift(args[2])
            shape = np.broadcast_shapes(c.shape, x.shape, y.shape)
            return Traced(self.b, self.b.node("where", [c.id, x.id, y.id]), shape, np.float32)
        if name in ("matmul", "maximum", "minimum"):
            return getattr(np, name)(*args)  # through __array_ufunc__
        raise NotImplementedError(f"cuvil.jit: numpy.{name} is not supported (supported: {SUPPORTED})")

    def _lift_bool(self, c) -> "Traced":
        if isinstance(c, Traced):
            if c.dtype != np.bool_:
                raise TypeError("cuvil.jit: np.where's condition must be a comparison (a boolean array)")
            return c
        raise NotImplementedError("cuvil.jit: np.where with a constant condition is not supported")


CACHE_SIZE = 32  # builds a jitted function keeps by default (the least recently used goes first)


def _const_key(v):
    """A constant argument as a cache key: floats by their bits (a NaN equals itself, -0.0 is not
    0.0: both can change a result), the others by type and value."""
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    return (type(v).__name__, v)


class _Jitted:
    def __init__(self, fn, shape_hint, cache_size: int = CACHE_SIZE):
        self.fn = fn
        self.sig = inspect.signature(fn)
        for p in self.sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"cuvil.jit: {fn.__name__} takes *{p.name}; only named parameters are supported")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"cuvil.jit: cache_size must be an int >= 1, got {cache_size!r}")
        self.shape_hint = dict(shape_hint or {})
        self.cache_size = cache_size
        self.cache: OrderedDict[tuple, CompiledModel] = OrderedDict()
        self.builds = 0   # models compiled (a hit in the cache compiles nothing)
        self.lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def _check_hint(self, name, a):
        want = self.shape_hint.get(name)
        if want is None:
            return
        if len(want) != a.ndim or any(w is not None and w != d for w, d in zip(want, a.shape)):
            raise ValueError(f"{self.fn.__name__}: argument {name!r} has shape {a.shape}, shape_hint says {tuple(want)}")

    def __call__(self, *args, **kwargs):
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        arrays, consts = {}, {}
        for name, v in bound.arguments.items():
            if isinstance(v, np.ndarray):
                if v.dtype != np.float32:
                    raise TypeError(f"{self.fn.__name__}: argument {name!r} is {v.dtype}; cuvil.jit takes float32 "
                                    f"arrays (convert with .astype(np.float32))")
                self._check_hint(name, v)
                arrays[name] = v
            elif v is None or isinstance(v, (bool, int, float, str)):
                consts[name] = v
            else:
                raise TypeError(f"{self.fn.__name__}: argument {name!r} is a {type(v).__name__}; cuvil.jit takes "
                                f"float32 NumPy arrays and Python scalars (bool, int, float, str, None)")
        key = tuple((n, a.shape) for n, a in arrays.items()) + tuple((n, _const_key(v)) for n, v in consts.items())
        with self.lock:
            model = self.cache.get(key)
            if model is None:
                model = self.cache[key] = self._build(arrays, consts)
                self.builds += 1
                while len(self.cache) > self.cache_size:
                    # the least recently used: dropped, not closed (a thread may be running it;
                    # it goes, with its folder, when the last reference does)
                    self.cache.popitem(last=False)
            else:
                self.cache.move_to_end(key)
        return model(*arrays.values())

    def _build(self, arrays: dict, consts: dict) -> CompiledModel:
        b = _Builder(self.fn.__name__)
        try:
            traced = {n: Traced(b, b.input(n, a.shape), a.shape, np.float32) for n, a in arrays.items()}
            out = self.fn(**traced, **consts)
            outs = out if isinstance(out, tuple) else (out,)
            for o in outs:
                if not isinstance(o, Traced):
                    raise TypeError(f"cuvil.jit: {self.fn.__name__} must return traced arrays computed from its "
                                    f"array arguments, not {type(o).__name__}")
                if o.dtype != np.float32:
                    raise TypeError(f"cuvil.jit: {self.fn.__name__} returns a {o.dtype} array; float32 only")
                b.output(o.id)
            d = Path(tempfile.mkdtemp(prefix="cuvil-jit-"))
            try:
                so = d / "jit.so"
                b.compile(so)
                return CompiledModel(so, _owned_dir=d)
            except BaseException:
                shutil.rmtree(d, ignore_errors=True)   # nothing of a failed build stays behind
                raise
        finally:
            b.close()


def jit(fn=None, *, shape_hint: dict | None = None, cache_size: int = CACHE_SIZE):
    """Compiles a NumPy function with Cuvil on its first call (per argument shapes and constant
    arguments); see the module's doc for the operations it traces. `shape_hint` ({argument:
    shape, None for any size}) checks the arguments' shapes before anything runs. The function
    keeps its last `cache_size` builds (32 by default; the least recently used goes first)."""
    if fn is None:
        return lambda f: _Jitted(f, shape_hint, cache_size)
    return _Jitted(fn, shape_hint, cache_size)
