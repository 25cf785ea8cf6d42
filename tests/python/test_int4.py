"""int4 and uint4 (ONNX 1.16+): packed two per byte in ONNX files, one element per byte in
Cuvil's memory and at its API (numpy int8/uint8). Checked against numpy: a packed int4
initializer dequantized per axis, Cast and QuantizeLinear to 4 bits (QuantizeLinear saturates),
an int4 model output; and the refusals: an input value outside the 4-bit range fails the run
naming the input, and an op that would compute in 8 bits (Add) is refused when compiling."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I4, U4 = TensorProto.FLOAT, TensorProto.INT4, TensorProto.UINT4


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _pack(vals):
    """4-bit values packed two per byte, the first in the low nibble (ONNX's layout)."""
    v = [int(x) & 0xF for x in vals] + ([0] if len(vals) % 2 else [])
    return bytes(v[i] | (v[i + 1] << 4) for i in range(0, len(v), 2))


def test_packed_int4_initializer_dequantized(tmp_path):
    rng = np.random.default_rng(4)
    w = rng.integers(-8, 8, (3, 5)).astype(np.int8)   # 15 values: an odd count, a half-filled last byte
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    init = helper.make_tensor("w", I4, [3, 5], _pack(w.ravel()), raw=True)
    sc = helper.make_tensor("s", F, [3], scale)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["d"], axis=0),
             helper.make_node("MatMul", ["x", "d"], ["y"], )]
    # x [2, 3] @ d [3, 5]
    path = tl.onnx_graph_model(tmp_path / "q.onnx", nodes, [_vi("x", F, [2, 3])], [("y", F)], inits=[init, sc], opset=21)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got = cuvil.load(tl.compile(path, tmp_path / "q"))(x=x)
    np.testing.assert_allclose(got, x @ (w.astype(np.float32) * scale[:, None]), rtol=1e-5, atol=1e-6)


def test_cast_and_quantize_to_4_bits(tmp_path):
    x = np.array([-9.5, -8.0, -7.6, -0.4, 0.0, 3.9, 7.0, 7.9, 8.0, 15.2, 16.0], np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=I4), helper.make_node("Cast", ["x"], ["cu"], to=U4),
             helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("Cast", ["q"], ["back"], to=TensorProto.INT32)]
    inits = [helper.make_tensor("s", F, [], [0.5]), helper.make_tensor("z", I4, [], _pack([1]), raw=True)]
    path = tl.onnx_graph_model(tmp_path / "c.onnx", nodes, [_vi("x", F, [11])],
                               [("c", I4), ("cu", U4), ("q", I4), ("back", TensorProto.INT32)], inits=inits, opset=21)
    c, cu, q, back = cuvil.load(tl.compile(path, tmp_path / "c"))(x=x)
    assert c.dtype == np.int8 and cu.dtype == np.uint8 and q.dtype == np.int8
    t = np.trunc(x)   # Cast: truncated; out of range (undefined in ONNX) 0, as ONNX's reference
    np.testing.assert_array_equal(c, np.where((t >= -8) & (t <= 7), t, 0).astype(np.int8))
    np.testing.assert_array_equal(cu, np.where((t >= 0) & (t <= 15), t, 0).astype(np.uint8))
    want_q = np.clip(np.rint(x / 0.5) + 1, -8, 7).astype(np.int8)   # QuantizeLinear saturates
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(back, want_q.astype(np.int32))


def test_int4_input_range_checked(tmp_path):
    nodes = [helper.make_node("DequantizeLinear", ["x", "s"], ["y"])]
    path = tl.onnx_graph_model(tmp_path / "i.onnx", nodes, [_vi("x", U4, [4])], [("y", F)],
                               inits=[helper.make_tensor("s", F, [], [2.0])], opset=21)
    model = cuvil.load(tl.compile(path, tmp_path / "i"))
    np.testing.assert_array_equal(model(x=np.array([0, 3, 9, 15], np.uint8)), [0, 6, 18, 30])
    with pytest.raises(cuvil.CuvilError, match=r"element 2 is 16, outside uint4's 0\.\.15: x"):
        model(x=np.array([0, 3, 16, 15], np.uint8))


def test_int4_arithmetic_refused(tmp_path):
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    path = tl.onnx_graph_model(tmp_path / "a.onnx", nodes, [_vi("a", I4, [4]), _vi("b", I4, [4])], [("y", I4)], opset=21)
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "a.so"), mentions=["Add", "int4"])
