"""libcuvil and the compiled-model ABI through ctypes.

ctypes, not an extension module: libcuvil's API is plain C with a handful of calls, a model is
reached through one descriptor (include/cuvil/cuvil_model.h), and ctypes releases the GIL around
every foreign call, so that models run in parallel from several Python threads. Nothing here
needs a compiler at install time.

Where libcuvil is found, first match wins:
  1. $CUVIL_LIB (the path of libcuvil.so);
  2. the copy installed inside the package (cuvil/_native/lib/libcuvil.so, in a wheel);
  3. the build folder of the checkout the package sits in ($CUVIL_BUILD, else <repo>/build).
libcuvil finds the runtime it compiles models against from its own location.
"""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

MAX_DIMS = 8
MODEL_ABI_VERSION = 9

STATUS_NAMES = ["ok", "invalid argument", "model", "unsupported", "shape", "dtype", "out of memory",
                "io", "toolchain", "internal"]


class CuvilError(RuntimeError):
    """A call into Cuvil failed; `status` is the C status name ("shape", "model", ...)."""

    def __init__(self, message: str, status: str = "error"):
        super().__init__(message)
        self.status = status


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int),
                ("dims", ctypes.c_int64 * MAX_DIMS),
                ("dim_names", ctypes.c_char_p * MAX_DIMS),
                ("nbytes", ctypes.c_size_t),
                ("is_sequence", ctypes.c_int),
                ("seq_max", ctypes.c_int),
                ("seq_varies", ctypes.c_uint32),
                ("seq_hdr_bytes", ctypes.c_size_t),
                ("seq_slot_bytes", ctypes.c_size_t),
                ("is_optional", ctypes.c_int)]


class SymInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("min", ctypes.c_int64),
                ("max", ctypes.c_int64),
                ("step", ctypes.c_int64)]


class ModelOptions(ctypes.Structure):
    _fields_ = [("n_threads", ctypes.c_int),
                ("weights_path", ctypes.c_char_p),
                ("alloc", ctypes.c_void_p),
                ("free", ctypes.c_void_p),
                ("alloc_user", ctypes.c_void_p),
                ("buffer", ctypes.c_void_p),
                ("buffer_bytes", ctypes.c_size_t)]


CreateFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ModelOptions), ctypes.POINTER(ctypes.c_void_p))
RunFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                         ctypes.POINTER(ctypes.c_void_p))
ErrmsgFn = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)
DestroyFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
PresentFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
RunShapesFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)))


class ModelDesc(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32),
                ("name", ctypes.c_char_p),
                ("n_inputs", ctypes.c_int),
                ("n_outputs", ctypes.c_int),
                ("inputs", ctypes.POINTER(TensorInfo)),
                ("outputs", ctypes.POINTER(TensorInfo)),
                ("model_sha256", ctypes.c_char_p),
                ("cuvil_version", ctypes.c_char_p),
                ("target", ctypes.c_char_p),
                ("options", ctypes.c_char_p),
                ("arena_bytes", ctypes.c_size_t),
                ("weights_bytes", ctypes.c_size_t),
                ("create", CreateFn),
                ("run", RunFn),
                ("errmsg", ErrmsgFn),
                ("destroy", DestroyFn),
                ("n_syms", ctypes.c_int),
                ("syms", ctypes.POINTER(SymInfo)),
                ("run_shapes", RunShapesFn),
                ("cpu_features", ctypes.c_char_p),
                ("n_run_sizes", ctypes.c_int),
                ("output_present", PresentFn)]


def status_name(code: int) -> str:
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else f"status {code}"


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    out = []
    if os.environ.get("CUVIL_LIB"):
        out.append(Path(os.environ["CUVIL_LIB"]))
    out.append(here / "_native" / "lib" / "libcuvil.so")
    build = os.environ.get("CUVIL_BUILD")
    out.append(Path(build) / "lib" / "libcuvil.so" if build else here.parents[1] / "build" / "lib" / "libcuvil.so")
    return out


_lib = None
_lib_lock = threading.Lock()


def lib() -> ctypes.CDLL:
    """libcuvil, loaded once (CuvilError naming where it looked if it is nowhere)."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for p in _candidates():
            if p.is_file():
                handle = ctypes.CDLL(str(p), mode=ctypes.RTLD_LOCAL)
                break
            tried.append(str(p))
        else:
            raise CuvilError("libcuvil.so not found (looked at " + ", ".join(tried) + "); build Cuvil "
                             "(`make build`), install the cuvil wheel, or set CUVIL_LIB", "io")
        handle.cuvil_version.restype = ctypes.c_char_p
        handle.cuvil_version.argtypes = []
        handle.cuvil_ctx_create.restype = ctypes.c_int
        handle.cuvil_ctx_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        handle.cuvil_ctx_destroy.restype = None
        handle.cuvil_ctx_destroy.argtypes = [ctypes.c_void_p]
        handle.cuvil_errmsg.restype = ctypes.c_char_p
        handle.cuvil_errmsg.argtypes = [ctypes.c_void_p]
        handle.cuvil_compile_args.restype = ctypes.c_int
        handle.cuvil_compile_args.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        handle.cuvil_compile_graph_args.restype = ctypes.c_int
        handle.cuvil_compile_graph_args.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _lib = handle
        return _lib


def version() -> str:
    return lib().cuvil_version().decode()


def _argv(args: list[str]):
    enc = [a.encode() for a in args]
    arr = (ctypes.c_char_p * len(enc))(*enc)
    return arr, enc  # keep `enc` alive as long as `arr`


def compile_args(args: list[str], folders=None, rename: dict | None = None) -> None:
    """cuvil-compile with these arguments, in this process; CuvilError with the compiler's message.
    folders: a function listing the folders the compile writes in, removed if it fails or a
    signal ends it (see _cleanup). rename: {text: replacement} applied to the message (a
    temporary copy's path -> what the caller gave)."""
    from . import _cleanup
    L = lib()

    def call():
        ctx = ctypes.c_void_p()
        if L.cuvil_ctx_create(ctypes.byref(ctx)) != 0:
            raise CuvilError("out of memory", "out of memory")
        try:
            arr, _keep = _argv(args)
            s = L.cuvil_compile_args(ctx, len(args), arr)
            if s != 0:
                msg = L.cuvil_errmsg(ctx).decode(errors="replace")
                for k, v in (rename or {}).items():
                    msg = msg.replace(k, v)
                raise CuvilError(msg, status_name(s))
        finally:
            L.cuvil_ctx_destroy(ctx)

    _cleanup.run(call, folders or (lambda: []))
