"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (issue 32): every reduction, with and
without weights and ignore_index, 2-D and 4-D, against ONNX Runtime at random data; a target
that is not a class fails the run naming the node."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I64 = TensorProto.FLOAT, TensorProto.INT64


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_loss_vs_ort(tmp_path, op, reduction, weighted):
    kw = {"reduction": reduction, "ignore_index": 2}
    ins = ["x", "t"] + (["w"] if weighted else [])
    outs = ["y"] + (["lp"] if op == "SoftmaxCrossEntropyLoss" else [])
    node = helper.make_node(op, ins, outs, **kw)
    vis = [helper.make_tensor_value_info("x", F, [3, 5, 4, 2]), helper.make_tensor_value_info("t", I64, [3, 4, 2])]
    if weighted:
        vis.append(helper.make_tensor_value_info("w", F, [5]))
    path = tl.onnx_graph_model(tmp_path / "loss.onnx", [node], vis, [(o, F) for o in outs], opset=13)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(3)
    for _ in range(3):
        feeds = {"x": rng.standard_normal((3, 5, 4, 2)).astype(np.float32), "t": rng.integers(0, 5, (3, 4, 2))}
        if weighted:
            feeds["w"] = rng.uniform(0.1, 2, 5).astype(np.float32)
        tl.check_vs_ort(model, path, feeds, rtol=1e-5, atol=1e-5)
    bad = dict(feeds, t=np.full((3, 4, 2), 5, np.int64))
    with pytest.raises(cuvil.CuvilError, match=rf"{op}.*not a class index"):
        model(**bad)
