"""Bad input, the way a user meets it: broken or foreign model files, unsupported ops, external
data (the good kind, and locations that try to leave the model's folder), bad command lines,
and bad inputs to cuvil-run. Every failure must be clean: a non-zero exit status (not a crash),
one clear message on stderr, and nothing left behind (no OUT, no OUT.h, no output .npy).

Each test first relies on the `cuvil_works` positive control, so that a tool that fails on
everything cannot pass them.
"""
from __future__ import annotations

import io
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cuvil_testlib as tl
from onnx_cases import node, small_cnn

pytestmark = pytest.mark.usefixtures("cuvil_works")


def _outputs(out_base):
    """The files cuvil-compile must not leave behind when it fails on OUT=out_base."""
    return [out_base, out_base.with_suffix(".h")]


def _save_small(tmp_path, name="model.onnx", batch="fixed"):
    m, inputs, ref = small_cnn(batch).build()
    p = tmp_path / name
    onnx.save(m, p)
    return p, m, inputs, ref


# --------------------------------------------------------------------------------------------
# Files that are not (whole) ONNX models
# --------------------------------------------------------------------------------------------

def _npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def _broken_files(tmp_path):
    good, m, _, _ = _save_small(tmp_path, "good.onnx")
    data = good.read_bytes()
    rng = tl.seeded_rng("random-bytes")
    return {
        "truncated-half": data[: len(data) // 2],
        "truncated-last-byte": data[:-1],
        "truncated-10-bytes": data[:10],
        "empty-file": b"",
        "random-bytes": rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "text-file": b"this is not an ONNX model\njust some text\n",
        "npy-file": _npy_bytes(np.zeros((1, 3, 8, 8), np.float32)),
        "graph-without-nodes-or-outputs": helper.make_model(
            helper.make_graph([], "g", [], []),
            opset_imports=[helper.make_opsetid("", 13)]).SerializeToString(),
    }


BROKEN = ["truncated-half", "truncated-last-byte", "truncated-10-bytes", "empty-file",
          "random-bytes", "text-file", "npy-file", "graph-without-nodes-or-outputs"]


@pytest.mark.parametrize("kind", BROKEN)
def test_compile_refuses_broken_model_file(kind, tmp_path):
    data = _broken_files(tmp_path)[kind]
    bad = tmp_path / f"{kind}.onnx"
    bad.write_bytes(data)
    if kind.startswith("truncated") or kind in ("random-bytes", "text-file", "npy-file"):
        with pytest.raises(Exception):   # the protobuf library itself refuses these
            onnx.load_model_from_string(data)
    out = tmp_path / "out" / "m.so"
    out.parent.mkdir()
    proc = tl.compile_raw(bad, out)
    tl.assert_clean_failure(proc, absent=_outputs(out) + [out.parent],
                            any_of=[bad.name, "onnx", "parse", "protobuf", "truncat", "invalid",
                                    "corrupt", "malformed", "graph", "empty"],
                            what=f"compiling a {kind} file")


def test_compile_refuses_missing_model_file(tmp_path):
    out = tmp_path / "m.so"
    proc = tl.compile_raw(tmp_path / "no-such-model.onnx", out)
    tl.assert_clean_failure(proc, absent=_outputs(out), mentions=["no-such-model.onnx"])


def test_compile_refuses_a_directory_as_model(tmp_path):
    d = tmp_path / "adir.onnx"
    d.mkdir()
    out = tmp_path / "m.so"
    proc = tl.compile_raw(d, out)
    tl.assert_clean_failure(proc, absent=_outputs(out), mentions=["adir.onnx"])


# --------------------------------------------------------------------------------------------
# Unsupported ops: all of them reported at once
# --------------------------------------------------------------------------------------------

def test_compile_lists_every_unsupported_op(tmp_path):
    # FancyOp (domain com.example, version 3) and RoiAlign (ai.onnx 13, which Cuvil does not
    # support)
    nodes = [
        node("Relu", ["x"], ["r"], name="relu_ok"),
        node("FancyOp", ["r"], ["y"], domain="com.example", name="fancy_node", alpha=1.0),
        node("RoiAlign", ["x", "boxes", "maxo"], ["sel"], name="roi_node"),
    ]
    g = helper.make_graph(
        nodes, "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8]),
         helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8]),
         helper.make_tensor_value_info("sel", TensorProto.FLOAT, [3, 4, 1, 1])],
        initializer=[onnx.numpy_helper.from_array(np.array([0, 0, 0], np.int64), "maxo")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.example", 3)])
    m.ir_version = 7
    p = tmp_path / "unsupported.onnx"
    onnx.save(m, p)
    out = tmp_path / "m.so"
    proc = tl.compile_raw(p, out)
    tl.assert_clean_failure(
        proc, absent=_outputs(out), max_lines=8,
        mentions=["fancy_node", "FancyOp", "com.example", "roi_node", "RoiAlign", "13"],
        what="both unsupported ops must be listed, each with node name, op and opset")
    assert "relu_ok" not in proc.stderr, "a supported node is listed as unsupported"


def _chain_model(ops, path):
    """A chain of nodes x -> v0 -> v1 ...: ops is a list of (domain, op, name)."""
    nodes, prev = [], "x"
    for i, (dom, op, name) in enumerate(ops):
        nodes.append(helper.make_node(op, [prev], [f"v{i}"], name=name, domain=dom))
        prev = f"v{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)])
    doms = sorted({d for d, _, _ in ops if d})
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in doms])
    m.ir_version = 8
    onnx.save(m, path)


def test_unsupported_ops_grouped_with_counts(tmp_path):
    """411 unsupported nodes of 3 ops (Bernoulli, RoiAlign, MaxUnpool):
    each op once, with its count and its first node's name; the message is not cut."""
    ops = ([("", "Bernoulli", f"bernoulli_node_{i:03d}_{'q' * 30}") for i in range(300)]
           + [("", "RoiAlign", f"roi_node_{i:03d}_{'s' * 30}") for i in range(100)]
           + [("", "MaxUnpool", f"unpool_node_{i:03d}_{'n' * 30}") for i in range(11)])
    _chain_model(ops, tmp_path / "m.onnx")
    proc = tl.compile_raw(tmp_path / "m.onnx", tmp_path / "m.so")
    tl.assert_clean_failure(proc, max_lines=5, mentions=["411 nodes use 3 ops"])
    err = proc.stderr
    for op, n, first in (("Bernoulli", 300, ops[0][2]), ("RoiAlign", 100, ops[300][2]), ("MaxUnpool", 11, ops[400][2])):
        (line,) = [ln for ln in err.splitlines() if ln.strip().startswith(op + " ")]
        assert f"{op} (opset 17); {n} nodes, the first '{first}'" in line, line


def test_unsupported_ops_all_listed_past_2kb(tmp_path):
    """120 distinct custom ops with long names: every one listed, whole, though the message is
    far longer than the 2 KB the error buffer once held."""
    ops = [("com.example.vendor", f"VendorFusedOperation{i:03d}", f"vendor_node_{i:03d}_{'z' * 40}")
           for i in range(120)]
    _chain_model(ops, tmp_path / "m.onnx")
    proc = tl.compile_raw(tmp_path / "m.onnx", tmp_path / "m.so")
    tl.assert_clean_failure(proc, max_lines=200, mentions=["120 nodes use 120 ops"])
    assert len(proc.stderr) > 8000, len(proc.stderr)
    for dom, op, name in ops:
        assert proc.stderr.count(f"{dom}.{op} (opset 1); node '{name}'") == 1, (op, proc.stderr[-500:])


# --------------------------------------------------------------------------------------------
# External data
# --------------------------------------------------------------------------------------------

def _external_model(folder, location="weights.bin", one_file=True):
    """small_cnn saved with its initializers as external data in folder; returns (path,
    inputs, ref)."""
    folder.mkdir(parents=True, exist_ok=True)
    m, inputs, ref = small_cnn().build()
    p = folder / "model.onnx"
    onnx.save_model(m, p, save_as_external_data=True, all_tensors_to_one_file=one_file,
                    location=location if one_file else None, size_threshold=0)
    loaded = onnx.load(p, load_external_data=False)
    assert any(t.data_location == TensorProto.EXTERNAL for t in loaded.graph.initializer)
    return p, inputs, ref


@pytest.mark.parametrize("layout", ["one-file", "file-per-tensor", "in-subfolder"])
def test_external_data_compiles_and_matches_ort(layout, tmp_path):
    if layout == "one-file":
        p, inputs, ref = _external_model(tmp_path / "m", "weights.bin")
    elif layout == "file-per-tensor":
        p, inputs, ref = _external_model(tmp_path / "m", one_file=False)
    else:
        (tmp_path / "m" / "data").mkdir(parents=True)
        p, inputs, ref = _external_model(tmp_path / "m", "data/weights.bin")
    tl.assert_outputs_close(tl.ort_run(p, inputs), ref)   # ONNX Runtime reads it too
    got = tl.compile_and_run(p, inputs, tmp_path / "work")
    tl.assert_outputs_close(got, ref)


def test_external_data_compiled_from_another_cwd(tmp_path):
    """The location is relative to the model's folder, not to the working directory."""
    p, inputs, ref = _external_model(tmp_path / "m", "weights.bin")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out" / "m.so"
    out.parent.mkdir()
    proc = tl.run_tool("cuvil-compile", tl.compile_args(p, out), cwd=elsewhere,
                       timeout=tl.COMPILE_TIMEOUT)
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-compile", proc)
    tl.assert_outputs_close(tl.run(out, inputs, tmp_path / "run"), ref)


def _relocate(p, new_location):
    """Rewrites every external-data location in the model file p to new_location."""
    m = onnx.load(p, load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = new_location
    p.write_bytes(m.SerializeToString())


ESCAPES = ["absolute", "dotdot-outside", "dotdot-inside", "symlink-outside"]


@pytest.mark.parametrize("how", ESCAPES)
def test_external_data_escaping_model_folder_is_refused(how, tmp_path):
    p, _, _ = _external_model(tmp_path / "models" / "m", "weights.bin")
    weights = p.parent / "weights.bin"
    outside = tmp_path / "outside"
    outside.mkdir()
    # the data really is where the location points, so only the policy can refuse it
    if how == "absolute":
        loc = str(outside / "weights.bin")
        shutil.copy(weights, outside / "weights.bin")
    elif how == "dotdot-outside":
        loc = "../../outside/weights.bin"
        shutil.copy(weights, outside / "weights.bin")
    elif how == "dotdot-inside":
        (p.parent / "sub").mkdir()
        loc = "sub/../weights.bin"
    else:
        shutil.copy(weights, outside / "weights.bin")
        os.symlink(outside, p.parent / "link")
        loc = "link/weights.bin"
    _relocate(p, loc)
    out = tmp_path / "out" / "m.so"
    out.parent.mkdir()
    proc = tl.compile_raw(p, out)
    tl.assert_clean_failure(proc, absent=_outputs(out) + [out.parent], mentions=[loc],
                            what=f"external data location {loc!r} ({how})")


def test_external_data_missing_file_is_reported(tmp_path):
    p, _, _ = _external_model(tmp_path / "m", "weights.bin")
    (p.parent / "weights.bin").unlink()
    out = tmp_path / "m.so"
    proc = tl.compile_raw(p, out)
    tl.assert_clean_failure(proc, absent=_outputs(out), mentions=["weights.bin"])


def test_external_data_file_too_short_is_reported(tmp_path):
    p, _, _ = _external_model(tmp_path / "m", "weights.bin")
    w = p.parent / "weights.bin"
    w.write_bytes(w.read_bytes()[:-16])
    out = tmp_path / "m.so"
    proc = tl.compile_raw(p, out)
    tl.assert_clean_failure(proc, absent=_outputs(out), mentions=["weights.bin"])


# --------------------------------------------------------------------------------------------
# Bad command lines
# --------------------------------------------------------------------------------------------

GOOD_DIM = ["--dim", "batch=1"]


@pytest.mark.parametrize("what,extra", [
    ("unknown-emit", GOOD_DIM + ["--emit", "exe"]),
    ("unknown-target", GOOD_DIM + ["--target", "riscv-quantum"]),
    ("opt-level-7", GOOD_DIM + ["--opt-level", "7"]),
    ("opt-level-not-a-number", GOOD_DIM + ["--opt-level", "fast"]),
    ("dim-without-value", ["--dim", "batch"]),
    ("dim-not-a-number", ["--dim", "batch=many"]),
    ("dim-zero", ["--dim", "batch=0"]),
    ("dim-negative", ["--dim", "batch=-1"]),
    ("dim-unknown-name", GOOD_DIM + ["--dim", "nosuchdim=2"]),
    ("unknown-option", GOOD_DIM + ["--frobnicate"]),
    ("emit-twice", GOOD_DIM + ["--emit", "so", "--emit", "c"]),
    ("opt-level-twice", GOOD_DIM + ["-O1", "--opt-level", "2"]),
    ("name-twice", GOOD_DIM + ["--name", "a", "--name", "b"]),
])
def test_compile_refuses_bad_option(what, extra, tmp_path):
    # the model has a symbolic 'batch' dim, so --dim batch=... is meaningful for it
    p, *_ = _save_small(tmp_path, batch="symbolic")
    out = tmp_path / "out" / "m.so"
    out.parent.mkdir()
    proc = tl.compile_raw(p, out, extra=extra)
    tl.assert_clean_failure(proc, absent=_outputs(out) + [out.parent], max_lines=6,
                            what=f"cuvil-compile {' '.join(extra)}")


def test_compile_refuses_output_given_twice(tmp_path):
    """--output twice is an error naming the option, not "the last one wins"; nothing is written."""
    p, *_ = _save_small(tmp_path, batch="symbolic")
    a, b = tmp_path / "a" / "m.so", tmp_path / "b" / "m.so"
    a.parent.mkdir()
    b.parent.mkdir()
    proc = tl.run_tool("cuvil-compile", ["--model", p, "--output", a, "--output", b] + GOOD_DIM)
    assert proc.returncode != 0 and "option given twice: --output" in proc.stderr, proc.stderr
    assert not list(a.parent.iterdir()) and not list(b.parent.iterdir())


def test_compile_good_options_control(tmp_path):
    """The control for the tests above: the same model with good options compiles."""
    p, *_ = _save_small(tmp_path, batch="symbolic")
    tl.compile(p, tmp_path / "out", extra=GOOD_DIM + ["--emit", "so", "--opt-level", "2"])


def test_compile_without_model_argument(tmp_path):
    out = tmp_path / "m.so"
    proc = tl.run_tool("cuvil-compile", ["--output", out], cwd=tmp_path)
    tl.assert_clean_failure(proc, absent=_outputs(out), mentions=["--model"], max_lines=20)


def test_compile_into_missing_folder(tmp_path):
    """Either creates the folder and writes a working model, or fails cleanly."""
    p, _, inputs, ref = _save_small(tmp_path)
    out = tmp_path / "no" / "such" / "dir" / "m.so"
    proc = tl.compile_raw(p, out, cwd=tmp_path)
    if proc.returncode == 0:
        assert out.is_file() and out.with_suffix(".h").is_file()
        tl.assert_outputs_close(tl.run(out, inputs, tmp_path / "run"), ref)
    else:
        tl.assert_clean_failure(proc, absent=_outputs(out))


# --------------------------------------------------------------------------------------------
# cuvil-run with bad inputs
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_so(tmp_path_factory):
    """(compiled small_cnn .so, its inputs, its ORT outputs): input x [1,3,8,8] float32."""
    d = tmp_path_factory.mktemp("small_so")
    p, m, inputs, ref = _save_small(d)
    return tl.compile(p, d / "build"), inputs, ref


def _run_bad(so, args, tmp_path):
    out_dir = tmp_path / "outputs"
    out_dir.mkdir()
    proc = tl.run_tool("cuvil-run", [so] + args + ["--output-dir", out_dir], cwd=tmp_path)
    return proc, out_dir


def test_run_good_input_works(small_so, tmp_path):
    """The control for the tests below: the same model with a right input runs."""
    so, inputs, ref = small_so
    tl.assert_outputs_close(tl.run(so, inputs, tmp_path), ref)


def test_run_wrong_input_name(small_so, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.npy"
    np.save(f, inputs["x"])
    proc, out_dir = _run_bad(so, ["--input", f"nope={f}"], tmp_path)
    tl.assert_clean_failure(proc, mentions=["nope"], absent=[out_dir])


def test_run_missing_input(small_so, tmp_path):
    so, _, _ = small_so
    proc, out_dir = _run_bad(so, [], tmp_path)
    tl.assert_clean_failure(proc, mentions=["x"], absent=[out_dir])


def test_run_input_given_twice(small_so, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.npy"
    np.save(f, inputs["x"])
    proc, out_dir = _run_bad(so, ["--input", f"x={f}", "--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, mentions=["x"], absent=[out_dir])


@pytest.mark.parametrize("shape", [(1, 3, 8, 9), (2, 3, 8, 8), (3, 8, 8), (1, 3, 8, 8, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_run_wrong_shape(small_so, shape, tmp_path):
    so, _, _ = small_so
    f = tmp_path / "x.npy"
    np.save(f, np.zeros(shape, np.float32))
    proc, out_dir = _run_bad(so, ["--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, mentions=["x"], any_of=["shape", "dim", "rank"],
                            absent=[out_dir])


@pytest.mark.parametrize("dtype", ["float64", "int64", "float16", "int32"])
def test_run_wrong_dtype(small_so, dtype, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.npy"
    np.save(f, inputs["x"].astype(dtype))
    proc, out_dir = _run_bad(so, ["--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, mentions=["x"],
                            any_of=[dtype, np.dtype(dtype).str, "dtype", "type", "float32"],
                            absent=[out_dir])


@pytest.mark.parametrize("cut", ["data", "header"])
def test_run_truncated_npy(small_so, cut, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.npy"
    np.save(f, inputs["x"])
    data = f.read_bytes()
    f.write_bytes(data[:-7] if cut == "data" else data[:40])
    proc, out_dir = _run_bad(so, ["--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, any_of=["x.npy", "truncat", "short", "npy", "size"],
                            absent=[out_dir])


def test_run_truncated_pb(small_so, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.pb"
    tl.write_input(inputs["x"], f, "pb")
    f.write_bytes(f.read_bytes()[:-9])
    proc, out_dir = _run_bad(so, ["--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, absent=[out_dir])


@pytest.mark.parametrize("what", ["missing-file", "text-file", "fortran-order", "big-endian"])
def test_run_unreadable_input_file(small_so, what, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.npy"
    if what == "text-file":
        f.write_text("not an array\n")
    elif what == "fortran-order":
        np.save(f, np.asfortranarray(inputs["x"]))
        # a dense C-order reader must not take this silently (or must transpose right)
        assert b"'fortran_order': True" in f.read_bytes()
    elif what == "big-endian":
        np.save(f, inputs["x"].astype(">f4"))
    proc, out_dir = _run_bad(so, ["--input", f"x={f}"], tmp_path)
    if what in ("fortran-order", "big-endian") and proc.returncode == 0:
        # accepting it is fine only if the result is right
        _, inputs2, ref = small_so
        tl.assert_outputs_close(tl.read_outputs(out_dir), ref)
        return
    tl.assert_clean_failure(proc, absent=[out_dir], any_of=["x.npy", "npy", "fortran",
                                                            "endian", "order", "dtype"])


def test_run_not_a_model(tmp_path):
    fake = tmp_path / "fake.so"
    fake.write_text("not a shared library\n")
    f = tmp_path / "x.npy"
    np.save(f, np.zeros((1, 3, 8, 8), np.float32))
    proc, out_dir = _run_bad(fake, ["--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, mentions=["fake.so"], absent=[out_dir])


def test_run_shared_library_that_is_not_a_model(tmp_path):
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/"
                             "libm.so.6", "/lib64/libm.so.6") if os.path.exists(p)), None)
    assert libm, "no libm.so.6 found"
    f = tmp_path / "x.npy"
    np.save(f, np.zeros((1, 3, 8, 8), np.float32))
    proc, out_dir = _run_bad(libm, ["--input", f"x={f}"], tmp_path)
    tl.assert_clean_failure(proc, any_of=["libm", "cuvil_model_entry", "model", "symbol"],
                            absent=[out_dir])


def test_run_bad_threads(small_so, tmp_path):
    so, inputs, _ = small_so
    f = tmp_path / "x.npy"
    np.save(f, inputs["x"])
    proc, out_dir = _run_bad(so, ["--input", f"x={f}", "--threads", "-2"], tmp_path)
    tl.assert_clean_failure(proc, mentions=["threads"], absent=[out_dir])
