"""Cuvil from Python: compile an ONNX file or a PyTorch model into a native library and call it.

    import cuvil, torch
    m = cuvil.compile(torch_model, torch.randn(1, 3, 224, 224))
    y = m(x)                      # NumPy arrays or torch tensors in, the same kind out
    m.save("model.so")            # + model.h, for a C/C++ program
    m2 = cuvil.load("model.so")   # in this process or another

The package is a thin layer over libcuvil (through ctypes): the compiler, its passes and the
kernels are all in C.
"""
from . import runtime
from ._compile import compile
from ._dynamo import fx_backend
from ._jit import jit
from ._model import CompiledModel, TensorSpec, load
from ._native import CuvilError, version

__all__ = ["compile", "fx_backend", "jit", "load", "CompiledModel", "TensorSpec", "CuvilError", "version", "runtime"]
__version__ = "0.1.0"
