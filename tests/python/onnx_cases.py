"""A small language for one-op ONNX test graphs, shared by the op tests and the CLI tests.

    Case("Conv-groups2", 13,
         [node("Conv", ["x", "w", "b"], ["y"], group=2, pads=[1, 1, 1, 1])],
         inputs={"x": [1, 4, 7, 7]},
         inits={"w": R(6, 2, 3, 3), "b": R(6)})

Graph inputs are float32 N(0,1) unless given as In(shape, kind=..., dtype=...); initializers are
arrays or R(...) specs (seeded from the case id); the outputs default to ["y"] and get their
types and shapes from ONNX Runtime, as an exporter's would be. Everything is deterministic.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def _data(rng: np.random.Generator, shape, kind: str, dtype) -> np.ndarray:
    shape = tuple(shape)
    if kind == "normal":
        a = rng.standard_normal(shape)
    elif kind == "pos":           # away from 0, positive: Pow bases, variances, divisors
        a = rng.uniform(0.5, 2.0, shape)
    elif kind == "nonzero":       # |a| in [0.5, 2], either sign: divisors
        a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif kind == "unit":
        a = rng.uniform(-1.0, 1.0, shape)
    elif kind == "wide":          # for saturating ops: Sigmoid, Tanh, HardSigmoid, Clip, Softmax
        a = rng.standard_normal(shape) * 4.0
    else:
        raise ValueError(kind)
    return np.asarray(a).astype(dtype)


@dataclass
class In:
    """A graph input: shape (ints, or strings for symbolic dims), how to fill it, dtype."""
    shape: list
    kind: str = "normal"
    dtype: type = np.float32


@dataclass
class R:
    """An initializer filled with seeded random data."""
    shape: tuple
    kind: str = "normal"
    dtype: type = np.float32

    def __init__(self, *shape, kind: str = "normal", dtype=np.float32):
        self.shape, self.kind, self.dtype = tuple(shape), kind, dtype


def i64(*v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def f32(*v) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def node(op, inputs, outputs, domain: str = "", name: str | None = None, **attrs):
    return helper.make_node(op, inputs, outputs, name=name or f"{op}_{outputs[0]}",
                            domain=domain, **attrs)


@dataclass
class Case:
    id: str
    opset: int
    nodes: list
    inputs: dict                                  # name -> shape list or In
    inits: dict = field(default_factory=dict)     # name -> ndarray or R
    outputs: list = field(default_factory=lambda: ["y"])
    dims: dict | None = None                      # --dim NAME=N for symbolic input dims
    output_shapes: dict | None = None             # name -> declared shape (else from ORT)
    extra_opsets: dict = field(default_factory=dict)
    out_dtypes: dict = field(default_factory=dict)  # name -> numpy dtype, when not float32

    def rng(self, what: str) -> np.random.Generator:
        return np.random.default_rng(zlib.crc32(f"{self.id}/{what}".encode()))

    def _in(self, name) -> In:
        s = self.inputs[name]
        return s if isinstance(s, In) else In(list(s))

    def input_data(self) -> dict:
        out = {}
        for name in self.inputs:
            s = self._in(name)
            shape = [self.dims[d] if isinstance(d, str) else d for d in s.shape]
            out[name] = _data(self.rng(f"in:{name}"), shape, s.kind, s.dtype)
        return out

    def initializers(self) -> list:
        out = []
        for name, v in self.inits.items():
            if isinstance(v, R):
                v = _data(self.rng(f"init:{name}"), v.shape, v.kind, v.dtype)
            out.append(numpy_helper.from_array(np.asarray(v), name))
        return out

    def model(self, output_types: dict | None = None) -> onnx.ModelProto:
        """The ModelProto. output_types: name -> (elem_type, shape) for the graph outputs;
        without it they carry just float32 and no shape (enough for ONNX Runtime)."""
        ins = []
        for name in self.inputs:
            s = self._in(name)
            et = helper.np_dtype_to_tensor_dtype(np.dtype(s.dtype))
            ins.append(helper.make_tensor_value_info(name, et, s.shape))
        outs = []
        for name in self.outputs:
            et0 = helper.np_dtype_to_tensor_dtype(np.dtype(self.out_dtypes.get(name, np.float32)))
            et, shape = (output_types or {}).get(name, (et0, None))
            if self.output_shapes and name in self.output_shapes:
                shape = self.output_shapes[name]
            outs.append(helper.make_tensor_value_info(name, et, shape))
        g = helper.make_graph(self.nodes, self.id.replace("-", "_"), ins, outs,
                              initializer=self.initializers())
        opsets = [helper.make_opsetid("", self.opset)]
        opsets += [helper.make_opsetid(d, v) for d, v in self.extra_opsets.items()]
        m = helper.make_model(g, opset_imports=opsets, producer_name="cuvil-tests")
        m.ir_version = max(7, helper.find_min_ir_version_for(opsets, True))
        return m

    def build(self):
        """(final ModelProto with output shapes from ORT, inputs, ORT reference outputs)."""
        from cuvil_testlib import ort_run

        inputs = self.input_data()
        ref = ort_run(self.model(), inputs)
        types = {n: (helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
                 for n, a in ref.items()}
        m = self.model(types)
        onnx.checker.check_model(m)
        return m, inputs, ref


def small_cnn(batch="fixed") -> Case:
    """Conv-Relu-MaxPool-Conv-GlobalAveragePool-Flatten-Gemm, x [1,3,8,8] -> y [1,10]; with
    batch='symbolic' the batch dim is dim_param 'batch' (compile it with --dim batch=N)."""
    b = "batch" if batch == "symbolic" else 1
    return Case(
        "small-cnn" + ("-symbolic-batch" if b == "batch" else ""), 13,
        [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
         node("Relu", ["c1"], ["r1"]),
         node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
         node("GlobalAveragePool", ["c2"], ["g"]),
         node("Flatten", ["g"], ["f"], axis=1),
         node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)],
        {"x": In([b, 3, 8, 8])},
        {"w1": R(8, 3, 3, 3), "b1": R(8), "w2": R(16, 8, 3, 3), "b2": R(16), "fw": R(10, 16),
         "fb": R(10)},
        dims={"batch": 3} if b == "batch" else None,
        output_shapes={"y": [b, 10]})
