"""Sequences of tensors inside a model (issue 31, item 3; src/ir/ops/op_seq.c): SequenceEmpty,
Construct, Insert, Erase, At, Length, SplitToSequence and ConcatFromSequence with element counts
the compile knows and positions or split lengths read when the model runs. Reference: ONNX
Runtime, at every position (negative ones too); positions out of range fail the run with the
node named, as they fail in ONNX Runtime."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _model(tmp_path, name, nodes, inputs, outputs, inits=()):
    return tl.onnx_graph_model(tmp_path / f"{name}.onnx", nodes, inputs, outputs, inits, 17)


def _ort_fails(path, feeds) -> bool:
    try:
        tl.ort_run(path, feeds)
    except Exception:  # noqa: BLE001
        return True
    return False


def test_insert_erase_at_every_position(tmp_path):
    """Elements of different first dims (2, 1, 3 and 4 rows): Construct, Insert at a position,
    Erase at another, At a third, all read when the model runs; the output's first dim is a size
    the run finds. Every combination of positions against ONNX Runtime, including the ones both
    refuse."""
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "y", "z"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "w", "p_ins"], ["s2"]),
        helper.make_node("SequenceErase", ["s2", "p_era"], ["s3"]),
        helper.make_node("SequenceAt", ["s3", "p_at"], ["out"], name="at_node"),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
    ]
    path = _model(tmp_path, "iea", nodes,
                  [_vi("x", F, [2, 3]), _vi("y", F, [1, 3]), _vi("z", F, [3, 3]), _vi("w", F, [4, 3]),
                   _vi("p_ins", I64, []), _vi("p_era", I64, []), _vi("p_at", TensorProto.INT32, [])],
                  [("out", F), ("n", I64)])
    model = cuvil.load(tl.compile(path, tmp_path / "build"))
    rng = np.random.default_rng(3)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in (("x", (2, 3)), ("y", (1, 3)), ("z", (3, 3)),
                                                                        ("w", (4, 3)))}
    checked = refused = 0
    for pi, pe, pa in itertools.product(range(-4, 5), range(-5, 5), range(-4, 4)):
        f = dict(feeds, p_ins=np.array(pi, np.int64), p_era=np.array(pe, np.int64), p_at=np.array(pa, np.int32))
        if _ort_fails(path, f):
            with pytest.raises(cuvil.CuvilError, match="at_node|position"):
                model(**f)
            refused += 1
            continue
        tl.check_vs_ort(model, path, f, rtol=0, atol=0)
        checked += 1
    assert checked > 200 and refused > 50, (checked, refused)


def test_empty_then_inserts_int64(tmp_path):
    """SequenceEmpty of int64, inserts at the front and the back (no position: the end), At."""
    nodes = [
        helper.make_node("SequenceEmpty", [], ["e"], dtype=I64),
        helper.make_node("SequenceInsert", ["e", "a"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "b", "zero"], ["s2"]),
        helper.make_node("SequenceInsert", ["s2", "a"], ["s3"]),
        helper.make_node("SequenceAt", ["s3", "k"], ["out"]),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
    ]
    path = _model(tmp_path, "emp", nodes, [_vi("a", I64, [2, 2]), _vi("b", I64, [3, 2]), _vi("k", I64, [])],
                  [("out", I64), ("n", I64)], [helper.make_tensor("zero", I64, [], [0])])
    model = cuvil.load(tl.compile(path, tmp_path / "build"))
    a, b = np.arange(4, dtype=np.int64).reshape(2, 2), -np.arange(6, dtype=np.int64).reshape(3, 2)
    for k in range(-3, 3):
        tl.check_vs_ort(model, path, {"a": a, "b": b, "k": np.array(k, np.int64)}, rtol=0, atol=0)


@pytest.mark.parametrize("symbolic", [False, True], ids=["fixed", "symbolic"])
def test_split_lengths_at_run_time_then_concat(tmp_path, symbolic):
    """SplitToSequence by lengths read when the model runs (x's length n symbolic or fixed),
    each piece through SequenceAt, and the pieces joined again along the axis and stacked by
    ConcatFromSequence; lengths that do not sum to n fail the run with the node named."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "lens"], ["s"], axis=1, name="split_node"),
        helper.make_node("SequenceAt", ["s", "k"], ["piece"]),
        helper.make_node("ConcatFromSequence", ["s"], ["joined"], axis=1),
        helper.make_node("SplitToSequence", ["x"], ["ones"], axis=1, keepdims=0),
        helper.make_node("ConcatFromSequence", ["ones"], ["stacked"], axis=-1, new_axis=1),
    ]
    n = "n" if symbolic else 7
    path = _model(tmp_path, "spl", nodes if not symbolic else nodes[:3],
                  [_vi("x", F, [2, n]), _vi("lens", I64, [3]), _vi("k", I64, [])],
                  [("piece", F), ("joined", F)] + ([] if symbolic else [("stacked", F)]))
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"n": "1:9"} if symbolic else None))
    rng = np.random.default_rng(5)
    for width, lens in ((7, (2, 0, 5)), (7, (7, 0, 0)), (3, (1, 1, 1)), (9, (4, 4, 1))):
        if not symbolic and width != 7:
            continue
        x = rng.standard_normal((2, width)).astype(np.float32)
        for k in (-3, 0, 1, 2):
            tl.check_vs_ort(model, path, {"x": x, "lens": np.array(lens, np.int64), "k": np.array(k, np.int64)},
                            rtol=0, atol=0)
    x = rng.standard_normal((2, 7)).astype(np.float32)
    for bad in ((2, 2, 2), (8, -1, 0)):
        with pytest.raises(cuvil.CuvilError, match="split_node"):
            model(x=x, lens=np.array(bad, np.int64), k=np.array(0, np.int64))


def test_refusals(tmp_path):
    """A sequence as a graph output, or into an op that takes tensors, is refused by name; so is
    a constant position out of range."""
    seq_out = _model(tmp_path, "so", [helper.make_node("SequenceConstruct", ["x", "x"], ["s"])], [_vi("x", F, [2])],
                     [])
    import onnx
    m = onnx.load(seq_out)
    m.graph.output.append(onnx.ValueInfoProto(name="s"))
    onnx.save(m, seq_out)
    tl.assert_clean_failure(tl.compile_raw(seq_out, tmp_path / "so.so"), mentions=["'s'", "sequence"])
    into_add = _model(tmp_path, "ia", [helper.make_node("SequenceConstruct", ["x"], ["s"]),
                                       helper.make_node("Identity", ["s"], ["y"], name="id_node")],
                      [_vi("x", F, [2])], [("y", F)])
    tl.assert_clean_failure(tl.compile_raw(into_add, tmp_path / "ia.so"), mentions=["id_node", "sequence"])
    far = _model(tmp_path, "far", [helper.make_node("SequenceConstruct", ["x"], ["s"]),
                                   helper.make_node("SequenceAt", ["s", "p"], ["y"], name="far_node")],
                 [_vi("x", F, [2])], [("y", F)], [helper.make_tensor("p", I64, [], [1])])
    tl.assert_clean_failure(tl.compile_raw(far, tmp_path / "far.so"), mentions=["far_node", "outside"])


def test_uneven_pieces_rejoined_float16(tmp_path):
    """SplitToSequence by a constant scalar split (pieces of 3, 3 and 1: the sequence's axis
    dim not shared), ConcatFromSequence along another axis (its length found by the run) and
    along the split axis, on float16 elements."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "three"], ["s"], axis=1),
        helper.make_node("SequenceAt", ["s", "k"], ["piece"]),
        helper.make_node("ConcatFromSequence", ["s"], ["back"], axis=1),
    ]
    path = _model(tmp_path, "unev", nodes, [_vi("x", TensorProto.FLOAT16, [2, 7, 3]), _vi("k", I64, [])],
                  [("piece", TensorProto.FLOAT16), ("back", TensorProto.FLOAT16)],
                  [helper.make_tensor("three", I64, [], [3])])
    model = cuvil.load(tl.compile(path, tmp_path / "build"))
    x = np.random.default_rng(7).standard_normal((2, 7, 3)).astype(np.float16)
    for k in range(-3, 3):
        tl.check_vs_ort(model, path, {"x": x, "k": np.array(k, np.int64)}, rtol=0, atol=0)


def test_sequences_inside_a_loop_body_and_a_branch(tmp_path):
    """A Loop whose body builds a sequence of its state and the iteration's slice, takes an
    element back at a position computed from the iteration number, and a runtime If whose
    branches use sequences of their own: both against ONNX Runtime."""
    body = helper.make_graph(
        [helper.make_node("Unsqueeze", ["i", "ax0"], ["i1"]),
         helper.make_node("Cast", ["i1"], ["fi"], to=F),
         helper.make_node("Add", ["st", "fi"], ["st2"]),
         helper.make_node("SequenceConstruct", ["st", "st2"], ["sq"]),
         helper.make_node("SequenceInsert", ["sq", "st2", "zero"], ["sq2"]),
         helper.make_node("Mod", ["i", "three"], ["pos"]),
         helper.make_node("SequenceAt", ["sq2", "pos"], ["el"]),
         helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Mul", ["el", "half"], ["st_out"])],
        "body", [_vi("i", I64, []), _vi("c", TensorProto.BOOL, []), _vi("st", F, [3])],
        [_vi("c_out", TensorProto.BOOL, []), _vi("st_out", F, [3])],
        [helper.make_tensor("ax0", I64, [1], [0]), helper.make_tensor("zero", I64, [], [0]),
         helper.make_tensor("three", I64, [], [3]), helper.make_tensor("half", F, [], [0.5])])
    then_g = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["y", "y"], ["ts"]),
         helper.make_node("ConcatFromSequence", ["ts"], ["t_out"], axis=0)], "then", [], [_vi("t_out", F, [6])])
    else_g = helper.make_graph(
        [helper.make_node("SplitToSequence", ["y"], ["es"], axis=0, keepdims=0),
         helper.make_node("ConcatFromSequence", ["es"], ["e_out"], axis=0, new_axis=1)], "else", [],
        [_vi("e_out", F, [3])])
    nodes = [helper.make_node("Loop", ["m", "", "x"], ["y"], body=body),
             helper.make_node("If", ["flag"], ["z"], then_branch=then_g, else_branch=else_g)]
    path = _model(tmp_path, "lpif", nodes, [_vi("m", I64, []), _vi("x", F, [3]), _vi("flag", TensorProto.BOOL, [])],
                  [("y", F), ("z", F)])
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"m": "0:6"}))
    x = np.array([1.0, -2.0, 0.5], np.float32)
    for m in range(0, 7):
        for flag in (True, False):
            tl.check_vs_ort(model, path, {"m": np.array(m, np.int64), "x": x, "flag": np.array(flag)}, rtol=1e-6,
                            atol=1e-6)


def test_onnx_sequence_models_pass(tmp_path):
    """ONNX's own sequence models (Debian's libonnx-testdata 1.12, simple/test_sequence_model1-8:
    tensors in and out, sequences inside) through tools/onnx_conformance.py: all pass."""
    data = Path("/usr/share/libonnx-testdata/data")
    assert (data / "simple").is_dir(), f"{data} is missing: install Debian's libonnx-testdata (make setup does)"
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(tl.REPO / "tools" / "onnx_conformance.py"), "--data", str(data),
                           "--all-folders", "--build", str(tl.build_dir()), "-j", "2", "--filter", "test_sequence_model",
                           "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert len(res) == 8, sorted(res)
    assert all(v["status"] == "pass" for v in res.values()), res


def test_found_size_over_the_declared_room_fails_cleanly(tmp_path):
    """SequenceAt's output dim that the elements do not share is planned at the graph output's
    declared size (2) where that is smaller than the largest element's (5): taking the larger
    element fails the run by name instead of writing past the output; so does joining more
    than the declared length along ConcatFromSequence's axis."""
    import onnx
    g = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "z"], ["s"]),
         helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at_node"),
         helper.make_node("SequenceConstruct", ["z", "w"], ["s2"]),
         helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=0, name="cat_node")], "g",
        [_vi("x", F, [5]), _vi("z", F, [2]), _vi("w", F, ["k"]), _vi("p", I64, [])],
        [_vi("y", F, [2]), _vi("c", F, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "room.onnx"
    onnx.save(m, path)
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"k": "1:6"}))
    x, z = np.arange(5, dtype=np.float32), np.array([7, 8], np.float32)
    y, c = model(x=x, z=z, w=np.array([1, 2], np.float32), p=np.array(1, np.int64))
    np.testing.assert_array_equal(y, z)
    np.testing.assert_array_equal(c, [7, 8, 1, 2])
    with pytest.raises(cuvil.CuvilError, match="at_node"):
        model(x=x, z=z, w=np.array([1, 2], np.float32), p=np.array(0, np.int64))
    with pytest.raises(cuvil.CuvilError, match="cat_node"):
        model(x=x, z=z, w=np.arange(5, dtype=np.float32), p=np.array(1, np.int64))
