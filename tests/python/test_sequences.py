"""Sequences of tensors (issue 31, item 3; src/ir/ops/op_seq.c): SequenceEmpty, Construct,
Insert, Erase, At, Length, SplitToSequence and ConcatFromSequence, Identity and If on them,
with most elements the compile knows, counts that are symbols (a sequence graph input's) or
only the run's (an If's), and positions or split lengths read when the model runs; sequences as
graph inputs and outputs (the ABI's block, Python's lists, cuvil-run's .pb / folder / .npz). Reference: ONNX
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
    """A sequence into an op that takes tensors, or declared a tensor where the graph gives a
    sequence, is refused by name; so is a constant position out of range."""
    into_abs = _model(tmp_path, "ia", [helper.make_node("SequenceConstruct", ["x"], ["s"]),
                                       helper.make_node("Abs", ["s"], ["y"], name="abs_node")],
                      [_vi("x", F, [2])], [("y", F)])
    tl.assert_clean_failure(tl.compile_raw(into_abs, tmp_path / "ia.so"), mentions=["abs_node", "sequence"])
    as_tensor = _model(tmp_path, "at", [helper.make_node("SequenceConstruct", ["x"], ["s"]),
                                        helper.make_node("Identity", ["s"], ["y"], name="id_node")],
                       [_vi("x", F, [2])], [("y", F)])
    tl.assert_clean_failure(tl.compile_raw(as_tensor, tmp_path / "at.so"), mentions=["id_node", "sequence", "tensor"])
    far = _model(tmp_path, "far", [helper.make_node("SequenceConstruct", ["x"], ["s"]),
                                   helper.make_node("SequenceAt", ["s", "p"], ["y"], name="far_node")],
                 [_vi("x", F, [2])], [("y", F)], [helper.make_tensor("p", I64, [], [1])])
    tl.assert_clean_failure(tl.compile_raw(far, tmp_path / "far.so"), mentions=["far_node", "outside"])


def _seq_vi(name, elem_type, shape):
    return helper.make_tensor_sequence_value_info(name, elem_type, shape)


def _seq_io_model(tmp_path):
    """S (a sequence input, elements float[n] of any length) and t: S with t inserted at p, S's
    length, S's elements joined, S's element at p."""
    import onnx
    g = helper.make_graph(
        [helper.make_node("SequenceInsert", ["S", "t", "p"], ["ins"]),
         helper.make_node("SequenceLength", ["S"], ["len"]),
         helper.make_node("ConcatFromSequence", ["S"], ["cat"], axis=0),
         helper.make_node("SequenceAt", ["S", "p"], ["at"]),
         helper.make_node("Identity", ["S"], ["same"])], "seqio",
        [_seq_vi("S", F, ["n"]), _vi("t", F, [3]), _vi("p", I64, [])],
        [_seq_vi("ins", F, None), _vi("len", I64, []), _vi("cat", F, None), _vi("at", F, None),
         _seq_vi("same", F, ["n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "seqio.onnx"
    onnx.save(m, path)
    return path


def test_sequence_graph_inputs_and_outputs(tmp_path):
    """A sequence as a graph input (its count a symbol, len(S), its elements' lengths each its
    own) and as graph outputs, from Python: every count 1..4 and element lengths 0..5, against
    ONNX Runtime; the count and an element over the bounds are refused by name."""
    path = _seq_io_model(tmp_path)
    model = cuvil.compile(path, sequences={"S": (1, 4)}, input_shapes={"S": [5]}, cache=False)
    assert model.symbols == {"len(S)": (1, 4)}
    assert model.inputs[0].sequence and model.inputs[0].seq_max == 4 and model.inputs[0].max_shape == (5,)
    rng = np.random.default_rng(3)
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    t = np.array([7, 8, 9], np.float32)
    for n in range(1, 5):
        S = [rng.standard_normal(int(rng.integers(0, 6))).astype(np.float32) for _ in range(n)]
        for p in range(-n, n):
            got = model(S=S, t=t, p=np.array(p, np.int64))
            want = sess.run(None, {"S": S, "t": t, "p": np.array(p, np.int64)})
            for g, w in zip(got, want):
                if isinstance(w, list):
                    assert isinstance(g, list) and len(g) == len(w)
                    for a, b in zip(g, w):
                        np.testing.assert_array_equal(a, b)
                else:
                    np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="at most 4"):
        model(S=[t, t, t, t, t], t=t, p=np.array(0, np.int64))
    with pytest.raises(ValueError, match="element 1"):
        model(S=[t, np.zeros(6, np.float32)], t=t, p=np.array(0, np.int64))
    with pytest.raises(cuvil.CuvilError, match="position|outside"):
        model(S=[t], t=t, p=np.array(3, np.int64))


def _write_seq_pb(path, arrays):
    import onnx
    from onnx import numpy_helper
    sp = onnx.SequenceProto(name="S", elem_type=onnx.SequenceProto.TENSOR)
    sp.tensor_values.extend(numpy_helper.from_array(a) for a in arrays)
    path.write_bytes(sp.SerializeToString())


def test_cuvil_run_sequence_files_and_the_model_checks_the_header(tmp_path):
    """cuvil-run takes a sequence as an ONNX SequenceProto .pb or a folder of 0.npy, 1.npy, ...
    and writes a sequence output as .npz (np.load reads it); the compiled model itself checks a
    caller's header (a count outside len(S)'s range, an element dim over its bound) before any
    node reads it, whatever the caller."""
    import ctypes
    path = _seq_io_model(tmp_path)
    so = tl.compile(path, tmp_path / "build", extra=["--seq", "S=1:4", "--shape", "S=5"])
    S = [np.arange(4, dtype=np.float32), np.arange(2, dtype=np.float32) + 10]
    _write_seq_pb(tmp_path / "s.pb", S)
    (tmp_path / "sdir").mkdir()
    for i, a in enumerate(S):
        np.save(tmp_path / "sdir" / f"{i}.npy", a)
    np.save(tmp_path / "t.npy", np.array([7, 8, 9], np.float32))
    np.save(tmp_path / "p.npy", np.array(1, np.int64))
    for src in ("s.pb", "sdir"):
        out = tmp_path / f"out_{src}"
        proc = tl.run_tool("cuvil-run", [str(so), "--input", f"S={tmp_path / src}", "--input", f"t={tmp_path / 't.npy'}",
                                         "--input", f"p={tmp_path / 'p.npy'}", "--output-dir", str(out)])
        assert proc.returncode == 0, proc.stderr
        z = np.load(out / "ins.npz")
        got = [z[f"arr_{i}"] for i in range(len(z.files))]
        assert [g.tolist() for g in got] == [S[0].tolist(), [7, 8, 9], S[1].tolist()]
        assert np.load(out / "len.npy") == 2
        np.testing.assert_array_equal(np.load(out / "cat.npy"), np.concatenate(S))
    _write_seq_pb(tmp_path / "big.pb", [np.zeros(6, np.float32)])
    proc = tl.run_tool("cuvil-run", [str(so), "--input", f"S={tmp_path / 'big.pb'}", "--input", f"t={tmp_path / 't.npy'}",
                                     "--input", f"p={tmp_path / 'p.npy'}", "--output-dir", str(tmp_path / "o2")])
    tl.assert_clean_failure(proc, mentions=["'S'", "element 0"])
    # the ABI, with a forged header: the model's own checks
    model = cuvil.load(so)
    info = model._desc.inputs[0]
    for count, dim, what in ((5, 2, "5 elements"), (0, 2, "0 elements"), (1, 6, "element 0: dim 0 is 6")):
        block = np.zeros(info.nbytes, np.uint8)
        hdr = block[:info.seq_hdr_bytes].view(np.int64)
        hdr[0] = count
        hdr[1:1 + min(count, 4)] = dim
        ins = [block, np.zeros(3, np.float32), np.array(0, np.int64)]
        outs = [np.zeros(o.nbytes, np.uint8) for o in (model._desc.outputs[i] for i in range(5))]
        m = model._ctx.enter()
        try:
            P = ctypes.c_void_p
            st = model._desc.run(m, (P * 3)(*[a.ctypes.data for a in ins]), (P * 5)(*[o.ctypes.data for o in outs]))
            msg = model._desc.errmsg(m).decode()
        finally:
            model._ctx.leave()
        assert st != 0 and what in msg and "'S'" not in msg and "S" in msg, (st, msg)


def test_if_branches_give_sequences_of_different_counts(tmp_path):
    """An If whose branches give sequences of 2 and 3 elements of different lengths: the output
    holds what the branch taken gave (its count read at run time by SequenceLength)."""
    import onnx
    then_g = helper.make_graph([helper.make_node("SequenceConstruct", ["a", "b"], ["ts"])], "then", [],
                               [_seq_vi("ts", F, None)])
    else_g = helper.make_graph([helper.make_node("SplitToSequence", ["b"], ["es"], axis=0, keepdims=1)], "else", [],
                               [_seq_vi("es", F, None)])
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["s"], then_branch=then_g, else_branch=else_g),
         helper.make_node("SequenceLength", ["s"], ["n"])], "ifseq",
        [_vi("c", TensorProto.BOOL, []), _vi("a", F, [2]), _vi("b", F, [3])], [_seq_vi("s", F, None), _vi("n", I64, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "ifseq.onnx"
    onnx.save(m, path)
    model = cuvil.compile(path, cache=False)
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    a, b = np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)
    for c in (True, False):
        feeds = {"c": np.array(c), "a": a, "b": b}
        s, n = model(**feeds)
        ws, wn = sess.run(None, feeds)
        assert [x.tolist() for x in s] == [x.tolist() for x in ws] and int(n) == int(wn)


def test_sequence_input_refusals(tmp_path):
    """Without --seq, with --seq on a tensor or on no input, or with an element dim left open
    and no --shape: one message each, naming the input and the option."""
    path = _seq_io_model(tmp_path)
    cases = [([], ["'S'", "--seq S="]),
             (["--seq", "S=1:4"], ["'S'", "--shape S="]),
             (["--seq", "S=1:4", "--shape", "S=5", "--seq", "t=2"], ["--seq t", "not a sequence"]),
             (["--seq", "S=1:4", "--shape", "S=5", "--seq", "nope=2"], ["--seq nope"]),
             (["--seq", "S=4:1", "--shape", "S=5"], ["--seq"]),
             (["--seq", "S=1:2000", "--shape", "S=5"], ["2000", "1024"])]
    for extra, mentions in cases:
        tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "r.so", extra=extra), mentions=mentions)


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


def test_sequence_map_over_elements_of_every_length(tmp_path):
    """SequenceMap (a body run per element: its element of each sequence input, the tensor
    inputs as they are) over a sequence input whose elements differ in length, giving a
    sequence of each element plus a tensor (a length checked against it) and a sequence of
    their shapes, and a second sequence of another length refused at run time by name."""
    import onnx
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "wb"], ["m"]), helper.make_node("Add", ["m", "f"], ["sum"]),
         helper.make_node("Shape", ["e"], ["shp"])], "body",
        [_vi("e", F, ["n"]), _vi("f", F, ["n"]), _vi("wb", F, [])], [_vi("sum", F, ["n"]), _vi("shp", I64, [1])])
    g = helper.make_graph([helper.make_node("SequenceMap", ["S", "T", "w"], ["out", "shapes"], body=body, name="map_node")],
                          "smap", [_seq_vi("S", F, ["n"]), _seq_vi("T", F, ["n"]), _vi("w", F, [])],
                          [_seq_vi("out", F, None), _seq_vi("shapes", I64, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "smap.onnx"
    onnx.save(m, path)
    model = cuvil.compile(path, sequences={"S": (0, 5), "T": (0, 5)}, input_shapes={"S": [6], "T": [6]}, cache=False)
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    w = np.array(0.5, np.float32)
    for n in range(0, 6):
        lens = [int(rng.integers(0, 7)) for _ in range(n)]
        S = [rng.standard_normal(k).astype(np.float32) for k in lens]
        T = [rng.standard_normal(k).astype(np.float32) for k in lens]
        out, shapes = model(S=S, T=T, w=w)
        wo, ws = sess.run(None, {"S": S, "T": T, "w": w})
        assert len(out) == len(wo) == n and len(shapes) == n
        for a, b in zip(out, wo):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        assert [s.tolist() for s in shapes] == [s.tolist() for s in ws]
    with pytest.raises(cuvil.CuvilError, match="map_node.*differ in length"):
        model(S=[np.zeros(2, np.float32)] * 2, T=[np.zeros(2, np.float32)] * 3, w=w)


def test_loop_appending_to_an_empty_sequence(tmp_path):
    """A Loop whose state starts as SequenceEmpty and gets the iteration's slice appended
    (ONNX's own idiom, as SequenceMap's function body writes it): the sequence of the slices,
    every trip count 0..6 against ONNX Runtime, with a tensor state beside it."""
    body = helper.make_graph(
        [helper.make_node("Add", ["i", "one"], ["i1"]),
         helper.make_node("Unsqueeze", ["i1", "ax0"], ["end"]),
         helper.make_node("Slice", ["x", "zero1", "end"], ["piece"]),
         helper.make_node("SequenceInsert", ["seq_in", "piece"], ["seq_out"]),
         helper.make_node("ReduceSum", ["piece"], ["ps"], keepdims=0),
         helper.make_node("Add", ["acc_in", "ps"], ["acc_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])], "body",
        [_vi("i", I64, []), _vi("c", TensorProto.BOOL, []), _seq_vi("seq_in", F, None), _vi("acc_in", F, [])],
        [_vi("c_out", TensorProto.BOOL, []), _seq_vi("seq_out", F, None), _vi("acc_out", F, [])],
        [helper.make_tensor("one", I64, [], [1]), helper.make_tensor("ax0", I64, [1], [0]),
         helper.make_tensor("zero1", I64, [1], [0])])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["m", "", "empty", "acc0"], ["seq", "acc"], body=body),
             helper.make_node("SequenceLength", ["seq"], ["len"])]
    import onnx
    g = helper.make_graph(nodes, "app", [_vi("m", I64, []), _vi("x", F, [6]), _vi("acc0", F, [])],
                          [_seq_vi("seq", F, None), _vi("acc", F, []), _vi("len", I64, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "app.onnx"
    onnx.save(m, path)
    model = cuvil.compile(path, dims={"m": (0, 6)}, cache=False)
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.arange(1, 7, dtype=np.float32)
    for trips in range(0, 7):
        feeds = {"m": np.array(trips, np.int64), "x": x, "acc0": np.array(0.25, np.float32)}
        seq, acc, n = model(**feeds)
        ws, wa, wn = sess.run(None, feeds)
        assert [s.tolist() for s in seq] == [s.tolist() for s in ws] and int(n) == int(wn) == trips
        np.testing.assert_allclose(acc, wa, rtol=1e-6)
    ir = subprocess.run([str(tl.build_dir() / "bin" / "cuvil-compile"), "--model", str(path), "--output", "-", "--emit",
                         "ir", "--dim", "m=0:6"], capture_output=True, text=True)
    assert "seq_out" in ir.stdout and "seq_insert" not in ir.stdout, ir.stdout + ir.stderr


def test_cuvil_run_refuses_bad_sequence_files(tmp_path):
    """Hostile or wrong sequence files: one message each, exit 1, no output written."""
    import onnx
    from onnx import numpy_helper
    path = _seq_io_model(tmp_path)
    so = tl.compile(path, tmp_path / "build", extra=["--seq", "S=1:4", "--shape", "S=5"])
    np.save(tmp_path / "t.npy", np.array([7, 8, 9], np.float32))
    np.save(tmp_path / "p.npy", np.array(0, np.int64))
    good = onnx.SequenceProto(name="S", elem_type=onnx.SequenceProto.TENSOR)
    good.tensor_values.extend([numpy_helper.from_array(np.zeros(2, np.float32))])
    gb = good.SerializeToString()
    nested = onnx.SequenceProto(name="S", elem_type=onnx.SequenceProto.SEQUENCE)
    nested.sequence_values.extend([good])
    wrong_type = onnx.SequenceProto(name="S", elem_type=onnx.SequenceProto.TENSOR)
    wrong_type.tensor_values.extend([numpy_helper.from_array(np.zeros(2, np.int32))])
    too_many = onnx.SequenceProto(name="S", elem_type=onnx.SequenceProto.TENSOR)
    too_many.tensor_values.extend([numpy_helper.from_array(np.zeros(1, np.float32))] * 5)
    cases = {
        "truncated.pb": (gb[:-3], ["not a valid ONNX SequenceProto"]),
        "badlen.pb": (b"\x1a\xff\xff\xff\xff\x0f" + gb, ["SequenceProto"]),
        "varint.pb": (b"\x08" + b"\xff" * 12, ["SequenceProto"]),
        "nested.pb": (nested.SerializeToString(), ["sequences"]),
        "int32.pb": (wrong_type.SerializeToString(), ["element 0", "int32"]),
        "many.pb": (too_many.SerializeToString(), ["more than 4 elements"]),
        "npy.npy": (None, ["a .npy file holds one tensor"]),
    }
    for name, (data, mentions) in cases.items():
        f = tmp_path / name
        if data is None:
            np.save(f, np.zeros(2, np.float32))
        else:
            f.write_bytes(data)
        out = tmp_path / f"o_{name}"
        proc = tl.run_tool("cuvil-run", [str(so), "--input", f"S={f}", "--input", f"t={tmp_path / 't.npy'}",
                                         "--input", f"p={tmp_path / 'p.npy'}", "--output-dir", str(out)])
        tl.assert_clean_failure(proc, mentions=mentions)
        assert not out.exists() or not any(out.iterdir()), name


def test_torchscript_list_built_in_a_loop(tmp_path):
    """A scripted loop that appends to a Python list and stacks it (TorchScript's exporter
    writes SequenceEmpty, a Loop appending to it, ConcatFromSequence): matches PyTorch at every
    count; an empty list fails the run naming ConcatFromSequence, as ONNX Runtime's does."""
    import torch

    class M(torch.nn.Module):
        def forward(self, x, n: int):
            out = []
            for i in range(n):
                out.append(x[i] * 2.0 + float(i))
            return torch.stack(out)

    m = torch.jit.script(M())
    path = tmp_path / "lst.onnx"
    torch.onnx.export(m, (torch.randn(6, 3), 4), str(path), input_names=["x", "n"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "rows"}}, dynamo=False)
    model = cuvil.compile(path, dims={"rows": (1, 8), "n": (0, 8)}, cache=False)
    for k in range(1, 7):
        x = torch.randn(6, 3, generator=torch.Generator().manual_seed(k))
        np.testing.assert_allclose(model(x=x.numpy(), n=np.array(k, np.int64)), m(x, k).numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(cuvil.CuvilError, match="ConcatFromSequence.*empty"):
        model(x=np.zeros((6, 3), np.float32), n=np.array(0, np.int64))


def test_sequence_files_that_are_not_what_they_seem(tmp_path):
    """cuvil-run refuses what would make a wrong sequence quietly: a TensorProto .pb (it reads as
    an empty SequenceProto field by field), a folder with a gap, a name that is not a number, or
    both 0.npy and 0.pb; a .npz says it is not read as an input."""
    from onnx import numpy_helper
    path = _seq_io_model(tmp_path)
    so = tl.compile(path, tmp_path / "build", extra=["--seq", "S=0:4", "--shape", "S=5"])
    np.save(tmp_path / "t.npy", np.array([7, 8, 9], np.float32))
    np.save(tmp_path / "p.npy", np.array(0, np.int64))
    (tmp_path / "tensor.pb").write_bytes(numpy_helper.from_array(np.ones(3, np.float32), "S").SerializeToString())
    folders = {"gap": ["0.npy", "2.npy"], "zero": ["00.npy", "1.npy"], "both": ["0.npy", "0.pb"]}
    for name, files in folders.items():
        (tmp_path / name).mkdir()
        for f in files:
            if f.endswith(".npy"):
                np.save(tmp_path / name / f, np.ones(2, np.float32))
            else:
                (tmp_path / name / f).write_bytes(numpy_helper.from_array(np.ones(2, np.float32)).SerializeToString())
    np.savez(tmp_path / "s.npz", np.ones(2, np.float32))
    cases = {"tensor.pb": ["not a valid ONNX SequenceProto", "TensorProto"], "gap": ["'2.npy'", "without gaps"],
             "zero": ["'00.npy'"], "both": ["'0.pb'"], "s.npz": [".npz"]}
    for src, mentions in cases.items():
        proc = tl.run_tool("cuvil-run", [str(so), "--input", f"S={tmp_path / src}", "--input", f"t={tmp_path / 't.npy'}",
                                         "--input", f"p={tmp_path / 'p.npy'}", "--output-dir", str(tmp_path / f"o_{src}")])
        tl.assert_clean_failure(proc, mentions=mentions)


def test_python_sequences_of_scalars_torch_elements_and_named_element_dims(tmp_path):
    """Python takes 0-d elements as they are; torch elements give torch outputs; an element dim
    the model names takes its value from --dim, every element's (so elements may stack)."""
    import onnx
    import torch
    g = helper.make_graph([helper.make_node("ConcatFromSequence", ["S"], ["y"], axis=0, new_axis=1)], "sc",
                          [_seq_vi("S", F, [])], [_vi("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "sc.onnx")
    model = cuvil.compile(tmp_path / "sc.onnx", sequences={"S": (1, 3)}, cache=False)
    np.testing.assert_array_equal(model(S=[np.array(1.5, np.float32), np.float32(2.5)]), [1.5, 2.5])
    out = model(S=[torch.tensor(1.0), torch.tensor(2.0)])
    assert isinstance(out, torch.Tensor) and out.tolist() == [1.0, 2.0]
    g = helper.make_graph([helper.make_node("ConcatFromSequence", ["S"], ["y"], axis=0, new_axis=1)], "named",
                          [_seq_vi("S", F, ["a", 2])], [_vi("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "named.onnx")
    named = cuvil.compile(tmp_path / "named.onnx", sequences={"S": (1, 3)}, dims={"a": 3}, cache=False)
    S = [np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((3, 2), np.float32)]
    np.testing.assert_array_equal(named(S=S), np.stack(S))
    with pytest.raises(ValueError, match="element 1"):
        named(S=[S[0], np.ones((2, 2), np.float32)])
