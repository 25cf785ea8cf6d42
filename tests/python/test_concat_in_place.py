"""Concats written in place (src/codegen/memplan.c, concat_in_place): where a Concat joins its
inputs along its outermost dim, each input is written by its producer straight into its slice of
the Concat's output, and the Concat copies nothing. Checked against ONNX Runtime on one and two
threads, with the generated C showing which Concats still copy (else these tests would pass
without the planning): a nested Concat, a Concat that is a graph output (its inputs written at
offsets into the caller's buffer, one of them by a Split through its table of outputs), an
input read by other nodes too; and the Concats that must copy: one with a graph input, one not
along its outermost dim, one with an input twice, one whose slices do not start on whole cache
lines."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

import cuvil_testlib as tl
from onnx_cases import Case, R, node


def _case() -> Case:
    nodes = [
        # c1 = [a, b] (a is also read by s1), c2 = [c1, d] (d reads c1): nested, in the arena
        node("Conv", ["x", "w1"], ["a"]),
        node("Conv", ["x", "w2"], ["b0"]), node("Relu", ["b0"], ["b"]),
        node("Concat", ["a", "b"], ["c1"], axis=1),
        node("Conv", ["c1", "w3"], ["d"]),
        node("Concat", ["c1", "d"], ["c2"], axis=-3),
        node("GlobalAveragePool", ["c2"], ["y1"]),
        # y2 = [sigmoid(a), tanh(e1), e2] is a graph output; e1, e2 come from a Split
        node("Sigmoid", ["a"], ["s1"]),
        node("Split", ["d", "sp"], ["e1", "e2"], axis=1),
        node("Tanh", ["e1"], ["t1"]),
        node("Concat", ["s1", "t1", "e2"], ["y2"], axis=1),
        # copies: a graph input; axis 2 at batch 1 (rows 1 x 8 before it); an input twice;
        # slices of 300 bytes (3 x 5x5 floats)
        node("Concat", ["x", "b"], ["y3"], axis=1),
        node("Sigmoid", ["d"], ["f"]), node("Relu", ["d"], ["g"]),
        node("Concat", ["f", "g"], ["y4"], axis=2),
        node("Exp", ["b"], ["h"]),
        node("Concat", ["h", "h"], ["y5"], axis=1),
        node("Conv", ["u", "w4"], ["u1"]), node("Conv", ["u", "w5"], ["u2"]),
        node("Concat", ["u1", "u2"], ["y6"], axis=1),
    ]
    inits = {"w1": R(8, 8, 1, 1), "w2": R(4, 8, 1, 1), "w3": R(8, 12, 1, 1), "sp": np.array([4, 4], dtype=np.int64),
             "w4": R(3, 2, 1, 1), "w5": R(3, 2, 1, 1)}
    return Case("concat-in-place", 13, nodes, {"x": [1, 8, 12, 12], "u": [1, 2, 5, 5]}, inits,
                outputs=["y1", "y2", "y3", "y4", "y5", "y6"])


@pytest.mark.parametrize("target", ["x86_64-avx2", "x86_64-avx512"])
def test_concats_in_place(target, tmp_path):
    m, inputs, ref = _case().build()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    src = tl.compile(p, tmp_path / "c", emit="c", target=target)
    code = "".join(f.read_text() for f in sorted(src.glob("*.c")))
    # the four that must copy; the other three are written in place
    assert code.count("cuvil_concat(") == 4, code
    # y2's inputs at their offsets in the caller's buffer: t1 after s1 (8 x 12x12 floats), e2
    # after both (Tanh writes through ptr(), the Split through its table of outputs)
    assert re.search(r"out\[1\] \+ 4608\)\)", code), code
    assert re.search(r"CUVIL_REF_OUTPUT, 1, 6912 }", code), code
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)
