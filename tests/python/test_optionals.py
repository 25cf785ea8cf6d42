"""ONNX's optionals (issue 31, item 3): optional(tensor) and optional(seq(tensor)) as graph
inputs (the caller leaves one out: NULL, Python's None, cuvil-run's empty OptionalProto or no
--input), as graph outputs (cuvil_model_desc.output_present, Python's None, no file), through
Identity and If's branches, and Optional, OptionalHasElement, OptionalGetElement. Reference:
ONNX Runtime, with and without each value."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil
import cuvil_testlib as tl

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _save(tmp_path, g, name, opset=18):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, path)
    return path


def _opt_tensor(name, shape):
    return helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(F, shape)))


def _opt_model(tmp_path):
    """x: optional float[n]; z = x + y when x is there, else -y (an If on OptionalHasElement);
    o = x passed on (an optional output); h = whether x is there."""
    then_g = helper.make_graph([helper.make_node("OptionalGetElement", ["x"], ["v"], name="get_node"),
                                helper.make_node("Add", ["v", "y"], ["tz"])], "t", [],
                               [helper.make_tensor_value_info("tz", F, ["n"])])
    else_g = helper.make_graph([helper.make_node("Neg", ["y"], ["ez"])], "e", [],
                               [helper.make_tensor_value_info("ez", F, ["n"])])
    g = helper.make_graph([helper.make_node("OptionalHasElement", ["x"], ["h"]),
                           helper.make_node("If", ["h"], ["z"], then_branch=then_g, else_branch=else_g),
                           helper.make_node("Identity", ["x"], ["o"])], "opt",
                          [_opt_tensor("x", ["n"]), helper.make_tensor_value_info("y", F, ["n"])],
                          [helper.make_tensor_value_info("z", F, ["n"]), _opt_tensor("o", ["n"]),
                           helper.make_tensor_value_info("h", TensorProto.BOOL, [])])
    return _save(tmp_path, g, "opt")


def _same(got, want):
    if want is None:
        assert got is None
    elif isinstance(want, list):
        assert isinstance(got, list) and [a.tolist() for a in got] == [b.tolist() for b in want]
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_optional_input_and_output_with_and_without_a_value(tmp_path):
    path = _opt_model(tmp_path)
    model = cuvil.compile(path, dims={"n": (1, 8)}, cache=False)
    assert model.inputs[0].optional and model.outputs[1].optional and not model.inputs[1].optional
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    for n in (1, 3, 8):
        y = rng.standard_normal(n).astype(np.float32)
        for x in (rng.standard_normal(n).astype(np.float32), None):
            got = model(x=x, y=y)
            want = sess.run(None, {"x": x, "y": y})
            for g, w in zip(got, want):
                _same(g, w)
        assert model(y=y)[1] is None   # (left out: absent)


def test_optional_get_element_of_nothing_fails_the_run(tmp_path):
    g = helper.make_graph([helper.make_node("OptionalGetElement", ["x"], ["v"], name="get_node")], "get",
                          [_opt_tensor("x", [3])], [helper.make_tensor_value_info("v", F, [3])])
    model = cuvil.compile(_save(tmp_path, g, "get"), cache=False)
    np.testing.assert_array_equal(model(x=np.ones(3, np.float32)), np.ones(3))
    with pytest.raises(cuvil.CuvilError, match="get_node.*no value"):
        model(x=None)


def test_optional_sequences_and_empty_optionals(tmp_path):
    """Optional of a sequence made in one branch and an empty Optional (its 'type' attribute) in
    the other (ONNX's test_if_opt, with a run-time condition), OptionalHasElement of a plain
    tensor and of no input, and an optional(seq) graph input."""
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2]))
    then_g = helper.make_graph([helper.make_node("Optional", [], ["none"], type=seq_t)], "t", [],
                               [helper.make_value_info("none", helper.make_optional_type_proto(seq_t))])
    else_g = helper.make_graph([helper.make_node("SequenceConstruct", ["a", "a"], ["sq"]),
                                helper.make_node("Optional", ["sq"], ["some"])], "e", [],
                               [helper.make_value_info("some", helper.make_optional_type_proto(seq_t))])
    g = helper.make_graph([helper.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
                           helper.make_node("OptionalHasElement", ["a"], ["ha"]),
                           helper.make_node("OptionalHasElement", [""], ["hn"]),
                           helper.make_node("OptionalHasElement", ["s"], ["hs"]),
                           helper.make_node("OptionalGetElement", ["s"], ["sv"])], "oseq",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("a", F, [2]),
                           helper.make_value_info("s", helper.make_optional_type_proto(seq_t))],
                          [helper.make_value_info("r", helper.make_optional_type_proto(seq_t)),
                           helper.make_tensor_value_info("ha", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("hn", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("hs", TensorProto.BOOL, []),
                           helper.make_value_info("sv", seq_t)])
    path = _save(tmp_path, g, "oseq")
    model = cuvil.compile(path, sequences={"s": (0, 3)}, cache=False)
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    a = np.array([1, 2], np.float32)
    s = [np.array([3, 4], np.float32)] * 2
    for c in (True, False):
        got = model(c=np.array(c), a=a, s=s)
        want = sess.run(None, {"c": np.array(c), "a": a, "s": s})
        for x, w in zip(got, want):
            _same(x, w)
    r, ha, hn, hs, sv = model(c=np.array(False), a=a, s=s)
    assert bool(ha) and not bool(hn) and bool(hs)
    with pytest.raises(cuvil.CuvilError, match="no value"):
        model(c=np.array(False), a=a, s=None)


def test_cuvil_run_optional_files(tmp_path):
    """cuvil-run: an OptionalProto with a value or without, or the input left out; an optional
    output without a value writes no file and says so."""
    path = _opt_model(tmp_path)
    so = tl.compile(path, tmp_path / "build", dims={"n": "1:8"})
    y = np.array([1, 2, 3], np.float32)
    np.save(tmp_path / "y.npy", y)
    full = onnx.OptionalProto(name="x", elem_type=onnx.OptionalProto.TENSOR,
                              tensor_value=numpy_helper.from_array(np.array([10, 20, 30], np.float32)))
    (tmp_path / "full.pb").write_bytes(full.SerializeToString())
    (tmp_path / "empty.pb").write_bytes(onnx.OptionalProto(name="x").SerializeToString())
    for src, present in (("full.pb", True), ("empty.pb", False), (None, False)):
        out = tmp_path / f"out_{src}"
        args = [str(so), "--input", f"y={tmp_path / 'y.npy'}", "--output-dir", str(out)]
        if src:
            args += ["--input", f"x={tmp_path / src}"]
        proc = tl.run_tool("cuvil-run", args)
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_allclose(np.load(out / "z.npy"), [11, 22, 33] if present else -y)
        assert (out / "o.npy").exists() == present
        assert ("o: " in proc.stdout) and (("none" in proc.stdout) != present), proc.stdout
    bad = onnx.OptionalProto(name="x", elem_type=onnx.OptionalProto.SEQUENCE,
                             sequence_value=onnx.SequenceProto(elem_type=onnx.SequenceProto.TENSOR))
    (tmp_path / "bad.pb").write_bytes(bad.SerializeToString())
    proc = tl.run_tool("cuvil-run", [str(so), "--input", f"y={tmp_path / 'y.npy'}", "--input",
                                     f"x={tmp_path / 'bad.pb'}", "--output-dir", str(tmp_path / "o3")])
    tl.assert_clean_failure(proc, mentions=["'x'", "sequence"])


def test_optionals_into_other_ops_are_refused(tmp_path):
    g = helper.make_graph([helper.make_node("Abs", ["x"], ["v"], name="abs_node")], "r",
                          [_opt_tensor("x", [3])], [helper.make_tensor_value_info("v", F, [3])])
    tl.assert_clean_failure(tl.compile_raw(_save(tmp_path, g, "r"), tmp_path / "r.so"),
                            mentions=["abs_node", "'x'", "optional", "OptionalGetElement"])


def test_optional_inputs_from_their_values_files_and_declared_outputs(tmp_path):
    """cuvil-run reads an optional input from its value's own file too (a TensorProto .pb, a
    SequenceProto for an optional sequence: empty is a value, not absent); an empty Optional of
    a declared tensor type gives None through an If to an output declared so; a graph output
    listed twice is given twice."""
    from onnx import numpy_helper
    path = _opt_model(tmp_path)
    so = tl.compile(path, tmp_path / "build", dims={"n": "1:8"})
    np.save(tmp_path / "y.npy", np.array([1, 2], np.float32))
    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(np.array([5, 6], np.float32), "x").SerializeToString())
    proc = tl.run_tool("cuvil-run", [str(so), "--input", f"x={tmp_path / 'x.pb'}", "--input", f"y={tmp_path / 'y.npy'}",
                                     "--output-dir", str(tmp_path / "o")])
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "z.npy"), [6, 8])
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, ["k"]))
    then_g = helper.make_graph([helper.make_node("SequenceLength", ["s"], ["tl"])], "t", [],
                               [helper.make_tensor_value_info("tl", I64, [])])
    else_g = helper.make_graph([helper.make_node("Constant", [], ["el"], value=helper.make_tensor("m1", I64, [], [-1]))],
                               "e", [], [helper.make_tensor_value_info("el", I64, [])])
    g = helper.make_graph([helper.make_node("OptionalHasElement", ["s"], ["h"]),
                           helper.make_node("If", ["h"], ["L"], then_branch=helper.make_graph(
                               [helper.make_node("OptionalGetElement", ["s"], ["sv"]),
                                helper.make_node("SequenceLength", ["sv"], ["tl"])], "t", [],
                               [helper.make_tensor_value_info("tl", I64, [])]), else_branch=else_g)], "os",
                          [helper.make_value_info("s", helper.make_optional_type_proto(seq_t))],
                          [helper.make_tensor_value_info("L", I64, [])])
    so2 = tl.compile(_save(tmp_path, g, "os"), tmp_path / "b2", extra=["--seq", "s=0:3", "--shape", "s=4"])
    for k in (0, 1, 2):
        sp = numpy_helper.from_list([np.ones(2, np.float32)] * k, "s", dtype=TensorProto.FLOAT)
        (tmp_path / f"s{k}.pb").write_bytes(sp.SerializeToString())
        proc = tl.run_tool("cuvil-run", [str(so2), "--input", f"s={tmp_path / f's{k}.pb'}", "--output-dir",
                                         str(tmp_path / f"os{k}")])
        assert proc.returncode == 0, proc.stderr
        assert int(np.load(tmp_path / f"os{k}" / "L.npy")) == k
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    tg = helper.make_graph([helper.make_node("Optional", ["x"], ["o1"])], "t", [], [helper.make_value_info("o1", opt_t)])
    eg = helper.make_graph([helper.make_node("Optional", [], ["o2"], type=helper.make_tensor_type_proto(F, [2]))], "e", [],
                           [helper.make_value_info("o2", opt_t)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["O"], then_branch=tg, else_branch=eg)], "decl",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", F, [2])],
                          [helper.make_value_info("O", opt_t), helper.make_value_info("O", opt_t)])
    model = cuvil.compile(_save(tmp_path, g, "decl"), cache=False)
    x = np.array([3, 4], np.float32)
    a, b = model(c=np.array(True), x=x)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, x)
    assert model(c=np.array(False), x=x) == (None, None)
