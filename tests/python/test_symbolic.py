"""Symbolic dims through to run time: a model compiled once for a range of a dim (--dim
batch=1:8) or for dims the model leaves unnamed (--shape), run at several sizes against ONNX
Runtime, and sizes outside the ranges refused by run with a message."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cuvil_testlib as tl
from build_models import INPUT_NAME, example_input, get_model


def test_resnet18_one_compile_for_batch_1_to_8(tmp_path):
    onnx_path = get_model("resnet18", "torchscript", 13)
    so = tl.compile(onnx_path, tmp_path / "build", stem="resnet18", dims={"batch": "1:8"})
    for b in (1, 2, 7, 8):
        x = example_input("resnet18", batch=b, seed=b)
        got = tl.run(so, {INPUT_NAME: x}, tmp_path / f"run{b}")
        ref = tl.ort_run(onnx_path, {INPUT_NAME: x})
        tl.assert_outputs_close(got, ref)
        assert next(iter(got.values())).shape == (b, 1000)
    proc, _ = tl.run_raw(so, {INPUT_NAME: example_input("resnet18", batch=9, seed=9)}, tmp_path / "run9")
    assert proc.returncode != 0 and "dim 0 is 9, outside 1..8 (symbol batch)" in proc.stderr, proc.stderr
    # the descriptor states the symbol and the upper bound
    info = tl.run_tool("cuvil-run", [so, "--info"])
    assert info.returncode == 0 and "batch" in info.stdout, info.stdout + info.stderr


def unnamed_dims_model(path):
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, the input's batch, H and W
    unnamed (as Paddle- and TF-exported models leave them)."""
    rng = np.random.default_rng(3)
    w = onnx.numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    fc = onnx.numpy_helper.from_array(rng.standard_normal((5, 8)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, None, None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 5])
    m = helper.make_model(helper.make_graph(nodes, "unnamed", [x], [y], initializer=[w, fc]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def test_unnamed_dims_named_and_bounded_with_shape(tmp_path):
    path = tmp_path / "unnamed.onnx"
    unnamed_dims_model(path)
    so = tl.compile(path, tmp_path / "build", stem="unnamed", dims={"H": "8:32"}, extra=["--shape", "x=1:3,3,H,H"])
    for b, h in ((1, 8), (3, 32), (2, 17)):
        x = np.random.default_rng(b * h).standard_normal((b, 3, h, h)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{b}_{h}")
        tl.assert_outputs_close(got, tl.ort_run(path, {"x": x}))
    # H names both spatial dims: they must agree, and stay in the range
    bad = np.zeros((1, 3, 16, 20), np.float32)
    proc, _ = tl.run_raw(so, {"x": bad}, tmp_path / "bad")
    assert proc.returncode != 0 and "another dim of symbol H is 16" in proc.stderr, proc.stderr
    proc, _ = tl.run_raw(so, {"x": np.zeros((1, 3, 40, 40), np.float32)}, tmp_path / "big")
    assert proc.returncode != 0 and "outside 8..32" in proc.stderr, proc.stderr


def paddle_style_model(path, batch_dim):
    """The same network with its input declared as Paddle's exporter writes it: batch
    `batch_dim` (a dim_value of -1, or "?"), H and W both dim_param "?"; the output [-1, 5]."""
    unnamed_dims_model(path)
    m = onnx.load(path)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    if batch_dim == -1:
        dims[0].dim_value = -1
    else:
        dims[0].dim_param = batch_dim
    dims[2].dim_param = "?"
    dims[3].dim_param = "?"
    out = m.graph.output[0].type.tensor_type.shape.dim
    out[0].dim_value = -1
    onnx.checker.check_model(m)   # ONNX accepts both forms
    onnx.save(m, path)


@pytest.mark.parametrize("batch_dim", [-1, "?"], ids=["minus1", "question"])
def test_each_unnamed_dim_is_its_own_symbol(batch_dim, tmp_path):
    """Every '?' (and -1) is a symbol of its own: 48 x 192 is a valid input (one shared symbol
    made H = W), fixed by --shape or kept symbolic in ranges; checked against ONNX Runtime."""
    path = tmp_path / "paddle.onnx"
    paddle_style_model(path, batch_dim)
    x = np.random.default_rng(5).standard_normal((1, 3, 48, 192)).astype(np.float32)
    ref = tl.ort_run(path, {"x": x})
    so = tl.compile(path, tmp_path / "fixed", stem="m", extra=["--shape", "x=1,3,48,192"])
    tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / "run"), ref)
    so = tl.compile(path, tmp_path / "ranges", stem="m", extra=["--shape", "x=1:2,3,32:64,160:256"])
    for shape in ((1, 3, 48, 192), (2, 3, 33, 250)):
        xi = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        tl.assert_outputs_close(tl.run(so, {"x": xi}, tmp_path / f"run{shape[2]}"), tl.ort_run(path, {"x": xi}))
    info = tl.run_tool("cuvil-run", [so, "--info"])
    assert "x_dim0=1..2, x_dim2=32..64, x_dim3=160..256" in info.stdout, info.stdout


def test_each_unnamed_dim_from_python(tmp_path):
    """The same through the Python package's input_shapes."""
    import cuvil

    path = tmp_path / "paddle.onnx"
    paddle_style_model(path, -1)
    m = cuvil.compile(str(path), input_shapes={"x": (1, 3, 48, 192)}, cache=False)
    x = np.random.default_rng(6).standard_normal((1, 3, 48, 192)).astype(np.float32)
    tl.assert_close(m(x), tl.ort_run(path, {"x": x})["y"])


def test_shape_refuses_what_does_not_fit(tmp_path):
    path = tmp_path / "unnamed.onnx"
    unnamed_dims_model(path)
    for shape, want in (("x=1,3,8", "3 dims given; the input has rank 4"), ("x=1,4,8,8", "dim 1 is 3 in the model"),
                        ("nosuch=1,3,8,8", "the model has no input named 'nosuch'")):
        proc = tl.run_tool("cuvil-compile", ["--model", path, "--output", tmp_path / "x.so", "--shape", shape])
        assert proc.returncode != 0 and want in proc.stderr, (shape, proc.stderr)
    four = tmp_path / "four.onnx"
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "four",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None] * 4)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, four)
    # four symbols (the old sampled compiles stopped at three)
    so = tl.compile(four, tmp_path / "build4", stem="four", extra=["--shape", "x=1:2,1:2,1:4,1:4"])
    for shape in ((1, 1, 1, 1), (2, 2, 4, 4), (2, 1, 3, 4), (1, 2, 4, 1)):
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / ("run" + "_".join(map(str, shape))))
        tl.assert_outputs_close(got, tl.ort_run(four, {"x": x}))
        assert got["y"].shape == shape


def test_three_symbols(tmp_path):
    """Batch, H and W all symbolic (--shape with three ranges): one compile, checked against ONNX
    Runtime at the corners of the box and inside it, and each dim outside its range refused."""
    path = tmp_path / "unnamed.onnx"
    unnamed_dims_model(path)
    so = tl.compile(path, tmp_path / "build", stem="three", extra=["--shape", "x=1:4,3,4:12,5:9"])
    for b, h, w in ((1, 4, 5), (4, 12, 9), (1, 12, 5), (4, 4, 9), (2, 7, 6), (3, 11, 8)):
        x = np.random.default_rng(b * 100 + h * 10 + w).standard_normal((b, 3, h, w)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{b}_{h}_{w}")
        tl.assert_outputs_close(got, tl.ort_run(path, {"x": x}))
        assert got["y"].shape == (b, 5)
    for shape, want in (((5, 3, 4, 5), "dim 0 is 5, outside 1..4"), ((1, 3, 13, 5), "dim 2 is 13, outside 4..12"),
                        ((1, 3, 4, 4), "dim 3 is 4, outside 5..9")):
        proc, _ = tl.run_raw(so, {"x": np.zeros(shape, np.float32)}, tmp_path / "bad")
        assert proc.returncode != 0 and want in proc.stderr, (shape, proc.stderr)


@pytest.fixture(scope="module")
def transformer_layer(tmp_path_factory):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)
    m = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True).eval()
    path = tmp_path_factory.mktemp("tel") / "encoder_layer.onnx"
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", max=512)
    torch.onnx.export(m, (torch.randn(2, 5, 32),), str(path), input_names=["x"], output_names=["y"], dynamo=True,
                      dynamic_shapes={"src": {0: batch, 1: seq}})
    return path


def test_transformer_encoder_layer_dynamic_batch_and_seq(transformer_layer, tmp_path):
    """torch.nn.TransformerEncoderLayer with dynamic batch and sequence: compiled once, matched
    against ONNX Runtime at three (batch, seq) pairs (attention is quadratic in seq)."""
    so = tl.compile(transformer_layer, tmp_path / "build", stem="encoder", dims={"batch": "1:4", "seq": "1:16"})
    for b, s in ((1, 1), (2, 9), (4, 16)):
        x = np.random.default_rng(b * 100 + s).standard_normal((b, s, 32)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{b}_{s}")
        tl.assert_outputs_close(got, tl.ort_run(transformer_layer, {"x": x}))
        assert got["y"].shape == (b, s, 32)
    # the dims that follow the symbols are expressions of them, in the IR and in the header:
    # nn.MultiheadAttention's projection [seq, batch, 3 * 32], and its attention, one node that
    # reads the heads [batch, nhead, seq, head_dim] in place and writes [batch * seq, 32]
    ir = tl.compile(transformer_layer, tmp_path / "ir", stem="encoder", emit="ir",
                    dims={"batch": "1:4", "seq": "1:16"}).read_text()
    assert re.search(r"= attention .*: f32\[batch\*seq,32\]", ir) and " = gather " not in ir, ir
    for want in ("symbol batch : 1..4", "symbol seq : 1..16", '"x" : f32[batch,seq,32]', "f32[seq,batch,96]",
                 '"y" : f32[batch,seq,32]'):
        assert want in ir, want + "\n" + ir
    header = so.with_suffix(".h").read_text()
    assert "y f32[batch,seq,32]" in header, header


def test_broadcast_at_symbol_value_one(tmp_path):
    """At N=1 a dim of x[N,3] and of the constant c[1,3] are both 1, yet one follows N and the
    other broadcasts: Add, Where and Mul must be right at every N in the range, 1 included."""
    rng = np.random.default_rng(11)
    c = onnx.numpy_helper.from_array(rng.standard_normal((1, 3)).astype(np.float32), "c")
    m = onnx.numpy_helper.from_array(np.array([[True, False, True]]), "m")
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Where", ["m", "a", "x"], ["w"]),
             helper.make_node("Mul", ["w", "y"], ["z"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])
    model = helper.make_model(helper.make_graph(nodes, "bcast", [x, y], [z], initializer=[c, m]),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "bcast.onnx"
    onnx.save(model, path)
    so = tl.compile(path, tmp_path / "build", stem="bcast", dims={"N": "1:4"})
    for n in (1, 2, 3, 4):
        feeds = {"x": rng.standard_normal((n, 3)).astype(np.float32), "y": rng.standard_normal((1, 3)).astype(np.float32)}
        got = tl.run(so, feeds, tmp_path / f"run{n}")
        want = np.where(np.array([[True, False, True]]), feeds["x"] + onnx.numpy_helper.to_array(c),
                        feeds["x"]) * feeds["y"]
        np.testing.assert_allclose(got["z"], want, rtol=1e-6)
        tl.assert_outputs_close(got, tl.ort_run(path, feeds))


def _torchvision_dynamic_hw(tmp_path_factory, name):
    """torchvision's model `name` (seeded random weights) exported with its batch, H and W left
    dynamic (N, H, W)."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None).eval()
    path = tmp_path_factory.mktemp(f"{name}hw") / f"{name}_hw.onnx"
    torch.onnx.export(m, (torch.randn(1, 3, 64, 64),), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}}, opset_version=13, dynamo=False)
    return path


@pytest.fixture(scope="module")
def resnet18_dynamic_hw(tmp_path_factory):
    return _torchvision_dynamic_hw(tmp_path_factory, "resnet18")


def test_cnn_with_dynamic_height_and_width_in_steps(resnet18_dynamic_hw, tmp_path):
    """Strided convolutions and pools divide H and W, so the sizes are polynomials of H/32 and
    W/32 only: --dim H=LO:HI:STEP compiles ResNet-18 once for every multiple of 32 in the
    ranges; sizes off the step are refused by run; without a step every size in the range runs."""
    so = tl.compile(resnet18_dynamic_hw, tmp_path / "build", stem="r18hw",
                    extra=["--dim", "N=1", "--dim", "H=32:256:32", "--dim", "W=64:128:64"])
    for h, w in ((32, 64), (224, 128), (256, 64), (96, 128)):
        x = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{h}_{w}")
        tl.assert_outputs_close(got, tl.ort_run(resnet18_dynamic_hw, {"x": x}))
    proc, _ = tl.run_raw(so, {"x": np.zeros((1, 3, 48, 64), np.float32)}, tmp_path / "off")
    assert proc.returncode != 0 and "dim 2 is 48, not a multiple of 32 (symbol H)" in proc.stderr, proc.stderr
    proc, _ = tl.run_raw(so, {"x": np.zeros((3, 64, 64), np.float32)}, tmp_path / "rank")
    assert proc.returncode != 0 and "has shape [3,64,64] (rank 3); the model takes rank 4: [1,3,H,W]" in proc.stderr, \
        proc.stderr
    info = tl.run_tool("cuvil-run", [so, "--info"])
    assert "H=32..256 step 32" in info.stdout, info.stdout
    # without a step: every H in the range (floor divisions in the shapes, no longer refused)
    so = tl.compile(resnet18_dynamic_hw, tmp_path / "nostep", stem="r18nostep",
                    extra=["--dim", "N=1", "--dim", "H=32:256", "--dim", "W=64"])
    for h in (32, 33, 47, 161, 255):
        x = np.random.default_rng(h).standard_normal((1, 3, h, 64)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"nostep{h}")
        tl.assert_outputs_close(got, tl.ort_run(resnet18_dynamic_hw, {"x": x}))
    proc = tl.compile_raw(resnet18_dynamic_hw, tmp_path / "bad.so", extra=["--dim", "N=1", "--dim", "H=40:256:32",
                                                                        "--dim", "W=64"])
    assert proc.returncode != 0 and "the range 40:256:32 of dim 'H' must start and end on multiples of its step 32" \
        in proc.stderr, proc.stderr


def _conv_choices(ir_text):
    """The kernel each conv and fused block runs, in order (the lowering's words in --emit ir)."""
    return [ln.split("# ")[-1] for ln in ir_text.splitlines() if " = conv " in ln or " = mbblock " in ln]


@pytest.fixture(scope="module")
def mobilenet_v2_dynamic_hw(tmp_path_factory):
    return _torchvision_dynamic_hw(tmp_path_factory, "mobilenet_v2")


@pytest.mark.parametrize("target", ["x86_64-avx2", "x86_64-avx512"])
@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v2"])
def test_symbolic_cnn_takes_the_specialised_kernels(resnet18_dynamic_hw, mobilenet_v2_dynamic_hw, tmp_path, target,
                                                    model):
    """A symbolic build chooses each conv's kernel as a specialised build does, at the point of
    the ranges it chooses at (each symbol's geometric mean: N=1:4 -> 2, H and W 32:1024 ->
    181): the same Winograd variants (F(4x4), tiles as rows), direct and pixels-as-rows GEMMs,
    channels-last layouts and MobileNetV2's fused inverted-residual blocks, for the named
    target. Then at odd sizes across the ranges it matches ONNX Runtime (run here where the
    host runs the target)."""
    path = {"resnet18": resnet18_dynamic_hw, "mobilenet_v2": mobilenet_v2_dynamic_hw}[model]
    sym = ["--dim", "N=1:4", "--dim", "H=32:1024", "--dim", "W=32:1024"]
    fixed = ["--dim", "N=2", "--dim", "H=181", "--dim", "W=181"]
    ir_s = tl.compile(path, tmp_path / "s", stem="s", emit="ir", target=target, extra=sym).read_text()
    ir_f = tl.compile(path, tmp_path / "f", stem="f", emit="ir", target=target, extra=fixed).read_text()
    cs, cf = _conv_choices(ir_s), _conv_choices(ir_f)
    assert cs == cf, "\n".join(f"{a}  |  {b}" for a, b in zip(cs, cf))
    if model == "resnet18":
        assert len(cs) == 20 and any("winograd F(4x4,3x3), tiles as rows" in c for c in cs), cs
    else:
        assert any("in bands of rows" in c for c in cs), cs   # the fused block
    assert any("channels last" in c for c in cs), cs
    if not tl.host_runs(target):
        return
    so = tl.compile(path, tmp_path / "b", stem="sym", target=target, extra=sym)
    for n, h, w in ((1, 224, 224), (2, 33, 47), (1, 181, 300), (3, 97, 64)):
        x = np.random.default_rng(n * h + w).standard_normal((n, 3, h, w)).astype(np.float32)
        tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / f"r{n}_{h}_{w}"), tl.ort_run(path, {"x": x}))


def test_dim_expressions_long_names_and_no_polynomial(tmp_path):
    """Found by a review: a dim's expression over long symbol names is written whole (it used
    to fall back to a number), and a dim that follows a symbol but is no polynomial of it (a
    slice clamped at the small end) is an exact expression with min, right at every value."""
    N, H, W = "num_images_in_batch", "input_image_height", "input_image_width"
    inits = [onnx.numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "w"),
             onnx.numpy_helper.from_array(np.array([-1, 4], np.int64), "shp")]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Reshape", ["c", "shp"], ["rs"])],
                          "long", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, 2, H, W])],
                          [helper.make_tensor_value_info("rs", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "long.onnx"
    onnx.save(m, path)
    so = tl.compile(path, tmp_path / "build", stem="long", dims={N: "1:3", H: "4:9", W: "4:6"})
    # a 3x3 conv without padding: N*4*(H-2)*(W-2) elements, 4 per row
    want = f"rs f32[{N}*{H}*{W} - 2*{N}*{H} - 2*{N}*{W} + 4*{N},4]"
    assert want in so.with_suffix(".h").read_text(), so.with_suffix(".h").read_text()
    x = np.random.default_rng(1).standard_normal((2, 2, 6, 5)).astype(np.float32)
    got = tl.run(so, {"x": x}, tmp_path / "run")
    tl.assert_outputs_close(got, tl.ort_run(path, {"x": x}))
    assert got["rs"].shape == (2 * 4 * 4 * 3 // 4, 4)
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("st", [4]), ("en", [100]), ("ax", [1]))]
    g = helper.make_graph([helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])], "clamped",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "clamped.onnx"
    onnx.save(m, path)
    # the slice x[:, 4:100] clamps at both ends: an expression with min, exact at every seq
    ir = tl.compile(path, tmp_path / "ir", stem="clamped", emit="ir", dims={"seq": "1:64"}).read_text()
    assert 'output %' in ir and '"y" : f32[1,seq - min(seq, 4)]' in ir, ir
    ir = tl.compile(path, tmp_path / "ir8", stem="clamped", emit="ir", dims={"seq": "8:64"}).read_text()
    assert '"y" : f32[1,seq - 4]' in ir, ir
    so = tl.compile(path, tmp_path / "build1", stem="clamped", dims={"seq": "1:64"})
    for seq in (1, 3, 4, 5, 37, 64):
        x = np.random.default_rng(seq).standard_normal((1, seq)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{seq}")
        tl.assert_outputs_close(got, tl.ort_run(path, {"x": x}))
        assert got["y"].shape == (1, max(seq - 4, 0))


def test_cnn_with_dynamic_batch_height_and_width(resnet18_dynamic_hw, tmp_path):
    """Three symbols on a real CNN: ResNet-18 compiled once for batch 1..4 and H, W multiples of
    32 in 32..128 matches ONNX Runtime across the box."""
    so = tl.compile(resnet18_dynamic_hw, tmp_path / "build", stem="r18nhw",
                    extra=["--dim", "N=1:4", "--dim", "H=32:128:32", "--dim", "W=32:128:32"])
    for n, h, w in ((1, 32, 32), (4, 128, 128), (3, 64, 128), (2, 96, 32)):
        x = np.random.default_rng(n * 1000 + h + w).standard_normal((n, 3, h, w)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{n}_{h}_{w}")
        tl.assert_outputs_close(got, tl.ort_run(resnet18_dynamic_hw, {"x": x}))
        assert got["y"].shape == (n, 1000)
    # strides halve H and W: the stem's conv gives H/2, its max pool H/4, the last stage H/32
    ir = tl.compile(resnet18_dynamic_hw, tmp_path / "ir", stem="r18nhw", emit="ir",
                    extra=["--dim", "N=1:4", "--dim", "H=32:128:32", "--dim", "W=32:128:32"]).read_text()
    for want in ("symbol H : 32..128 step 32", "f32[N,64,H/2,W/2]", "f32[N,64,H/4,W/4]", "f32[N,512,H/32,W/32]",
                 '"y" : f32[N,1000]'):
        assert want in ir, want + "\n" + ir
    header = so.with_suffix(".h").read_text()
    assert "x f32[N,3,H,W]" in header and "y f32[N,1000]" in header, header


def test_size_peaking_between_samples_and_last_index(tmp_path):
    """m = Expand(x[1,H], [K-H, H]) has H*(K-H) elements, largest at H = K/2, at neither end of
    the range: memory is sized over the whole range (the old sampled compiles could miss it). And x[:, -1] on
    the symbolic axis (the last token) follows H like any size."""
    K = 64
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["h"], axis=0),
             helper.make_node("Sub", ["K", "h"], ["r"]), helper.make_node("Concat", ["r", "h"], ["shp"], axis=0),
             helper.make_node("Expand", ["x", "shp"], ["m"]), helper.make_node("Exp", ["m"], ["e"]),
             helper.make_node("ReduceSum", ["e", "ax0"], ["y"], keepdims=0),
             helper.make_node("Gather", ["x", "last"], ["z"], axis=1)]
    inits = [onnx.numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
             onnx.numpy_helper.from_array(np.array([K], np.int64), "K"),
             onnx.numpy_helper.from_array(np.array(-1, np.int64), "last")]
    g = helper.make_graph(nodes, "peak", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "H"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "peak.onnx"
    onnx.save(model, path)
    so = tl.compile(path, tmp_path / "build", stem="peak", dims={"H": "1:63"})
    for h in (1, 20, 31, 32, 33, 50, 63):
        x = np.random.default_rng(h).standard_normal((1, h)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{h}")
        np.testing.assert_allclose(got["y"], (K - h) * np.exp(x[0]), rtol=1e-5)
        np.testing.assert_array_equal(got["z"], x[:, -1])
        tl.assert_outputs_close(got, tl.ort_run(path, {"x": x}))


def test_values_computed_from_symbols_run_when_the_model_runs(tmp_path):
    """Constants that depend on a symbol cannot sit in the weights: the positions Range(0, S)
    and the position embeddings gathered with them, a causal mask built from them, 1/sqrt(S),
    ConstantOfShape of the input's shape, and Shape and Size as graph outputs are computed again
    when the model runs, at each (B, S)."""
    rng = np.random.default_rng(5)
    tok, posw = rng.standard_normal((50, 8)).astype(np.float32), rng.standard_normal((40, 8)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(tok, "tok"), onnx.numpy_helper.from_array(posw, "posw"),
             onnx.numpy_helper.from_array(np.array(0, np.int64), "zero"),
             onnx.numpy_helper.from_array(np.array(1, np.int64), "one"),
             onnx.numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             onnx.numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             onnx.numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf"),
             onnx.numpy_helper.from_array(np.array(0, np.float32), "fzero")]
    N = helper.make_node
    nodes = [N("Shape", ["ids"], ["shp"]), N("Gather", ["shp", "one"], ["S"], axis=0),
             N("Range", ["zero", "S", "one"], ["pos"]),
             N("Gather", ["tok", "ids"], ["te"], axis=0), N("Gather", ["posw", "pos"], ["pe"], axis=0),
             N("Add", ["te", "pe"], ["e"]),
             N("Cast", ["S"], ["Sf"], to=TensorProto.FLOAT), N("Sqrt", ["Sf"], ["sq"]), N("Div", ["e", "sq"], ["es"]),
             N("Unsqueeze", ["pos", "ax1"], ["pcol"]), N("Unsqueeze", ["pos", "ax0"], ["prow"]),
             N("Less", ["pcol", "prow"], ["upper"]), N("Where", ["upper", "ninf", "fzero"], ["mask"]),
             N("Transpose", ["es"], ["esT"], perm=[0, 2, 1]), N("MatMul", ["es", "esT"], ["sc"]),
             N("Add", ["sc", "mask"], ["scm"]), N("Softmax", ["scm"], ["att"], axis=-1), N("MatMul", ["att", "es"], ["y"]),
             N("ConstantOfShape", ["shp"], ["ones"], value=onnx.numpy_helper.from_array(np.array([1.5], np.float32))),
             N("ReduceSum", ["ones"], ["count"], keepdims=0), N("Size", ["ids"], ["size"])]
    g = helper.make_graph(nodes, "revive", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("shp", TensorProto.INT64, None),
                           helper.make_tensor_value_info("count", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("size", TensorProto.INT64, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "revive.onnx"
    onnx.save(model, path)
    so = tl.compile(path, tmp_path / "build", stem="revive", dims={"B": "1:4", "S": "1:16"})
    for b, s in ((1, 1), (1, 16), (2, 9), (3, 5), (4, 1), (4, 16)):
        ids = np.random.default_rng(b * 31 + s).integers(0, 50, (b, s)).astype(np.int64)
        got = tl.run(so, {"ids": ids}, tmp_path / f"run{b}_{s}")
        tl.assert_outputs_close(got, tl.ort_run(path, {"ids": ids}))
        np.testing.assert_array_equal(got["shp"], [b, s])
        assert got["size"] == b * s and got["count"] == pytest.approx(1.5 * b * s)
        # the first position attends to itself only (the mask), so its row is its own embedding
        np.testing.assert_allclose(got["y"][:, 0], (tok[ids[:, 0]] + posw[0]) / np.sqrt(s), rtol=1e-5, atol=1e-6)


def test_causal_attention_from_pytorch_with_dynamic_batch_and_seq(tmp_path):
    """A GPT-style block from PyTorch (dynamo exporter): token and position embeddings with
    positions arange(seq), a causal mask triu(full((seq, seq), -inf), 1), scores scaled by
    seq ** -0.5, and seq itself as an output. Compiled once, it matches ONNX Runtime at several
    (batch, seq) pairs."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = torch.nn.Embedding(100, 16), torch.nn.Embedding(64, 16)

        def forward(self, ids):
            s = ids.shape[1]
            h = self.tok(ids) + self.pos(torch.arange(s))
            mask = torch.triu(torch.full((s, s), float("-inf")), 1)
            att = torch.softmax(h @ h.transpose(1, 2) / (s ** 0.5) + mask, -1)
            return att @ h, s * torch.ones(1)

    path = tmp_path / "causal.onnx"
    batch, seq = torch.export.Dim("batch", max=8), torch.export.Dim("seq", max=64)
    torch.onnx.export(Block().eval(), (torch.randint(0, 100, (2, 5)),), str(path), input_names=["ids"],
                      output_names=["y", "n"], dynamo=True, dynamic_shapes={"ids": {0: batch, 1: seq}})
    so = tl.compile(path, tmp_path / "build", stem="causal", dims={"batch": "1:4", "seq": "1:40"})
    for b, s in ((1, 1), (1, 40), (2, 17), (3, 3), (4, 40)):
        ids = np.random.default_rng(b * 31 + s).integers(0, 100, (b, s)).astype(np.int64)
        got = tl.run(so, {"ids": ids}, tmp_path / f"run{b}_{s}")
        tl.assert_outputs_close(got, tl.ort_run(path, {"ids": ids}))
        assert got["y"].shape == (b, s, 16) and got["n"].tolist() == [s]


def test_value_from_a_symbol_through_sum_runs_when_the_model_runs(tmp_path):
    """Sum of values computed from the symbol (Cast(Shape(x)) twice) cannot fold: it runs when
    the model runs, y = 2 N x at every N."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
             helper.make_node("Sum", ["sf", "sf"], ["two_n"]), helper.make_node("Mul", ["x", "two_n"], ["y"])]
    g = helper.make_graph(nodes, "sumsym", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "sumsym.onnx"
    onnx.save(model, path)
    so = tl.compile(path, tmp_path / "build", stem="sumsym", dims={"N": "1:8"})
    for n in (1, 3, 8):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        np.testing.assert_allclose(tl.run(so, {"x": x}, tmp_path / f"run{n}")["y"], 2 * n * x, rtol=1e-6)


def test_review_cases_sign_change_empty_slice_int_clip_and_shape_conflict(tmp_path):
    """Found by a review: an integer whose sign follows the symbol (Trilu k = S - 3) is one
    number to fit; a slice x[:, 1:S-1] that is empty at S = 2 compiles for S = 2..64; an int64
    Clip of a shape runs clipped (it used to run unclipped), an int64 ReduceProd of one runs
    when the model runs (it used to be refused); and two --shape options that give one symbol different
    values are refused by name."""
    N, T = helper.make_node, TensorProto
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("one", 1), ("three", 3), ("ax", [1]), ("st", [1]), ("m1", [-1]), ("lo", 2), ("hi", 6))]
    nodes = [N("Shape", ["x"], ["s"]), N("Gather", ["s", "one"], ["S"], axis=0), N("Sub", ["S", "three"], ["k"]),
             N("Trilu", ["x", "k"], ["tri"]), N("Slice", ["x", "st", "m1", "ax"], ["mid"]),
             N("Clip", ["s", "lo", "hi"], ["clipped"])]
    outs = [helper.make_tensor_value_info(n, T.FLOAT, None) for n in ("tri", "mid")]

    def save(name, nodes, outs):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", T.FLOAT, ["B", "S"])], outs, inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
        model.ir_version = 8
        onnx.save(model, tmp_path / f"{name}.onnx")
        return tmp_path / f"{name}.onnx"

    path = save("tri_slice", nodes[:5], outs)
    so = tl.compile(path, tmp_path / "build", stem="tri", dims={"B": "1:3", "S": "2:64"})
    for b, s in ((1, 2), (3, 3), (2, 5), (3, 64)):
        x = np.random.default_rng(b * 100 + s).standard_normal((b, s)).astype(np.float32)
        got = tl.run(so, {"x": x}, tmp_path / f"run{b}_{s}")
        tl.assert_outputs_close(got, tl.ort_run(path, {"x": x}))
        np.testing.assert_array_equal(got["tri"], np.triu(x, s - 3))
        assert got["mid"].shape == (b, s - 2)
    clip = save("clip", nodes[:1] + nodes[5:], [helper.make_tensor_value_info("clipped", T.INT64, None)])
    so = tl.compile(clip, tmp_path / "clipb", stem="clip", dims={"B": "1:3", "S": "1:8"})
    for b, s in ((1, 1), (3, 8), (2, 5)):
        got = tl.run(so, {"x": np.zeros((b, s), np.float32)}, tmp_path / f"clip{b}_{s}")
        np.testing.assert_array_equal(got["clipped"], np.clip([b, s], 2, 6))
    # an int64 reduction of a shape (once refused: no int64 kernel) runs when the model runs
    rp = save("rprod", nodes[:1] + [N("ReduceProd", ["s"], ["numel"], keepdims=0)],
              [helper.make_tensor_value_info("numel", T.INT64, None)])
    so = tl.compile(rp, tmp_path / "rprodb", stem="rprod", dims={"B": "1:3", "S": "1:8"})
    for b, s in ((1, 1), (3, 8), (2, 5)):
        got = tl.run(so, {"x": np.zeros((b, s), np.float32)}, tmp_path / f"rprod{b}_{s}")
        np.testing.assert_array_equal(got["numel"], b * s)
    proc = tl.compile_raw(path, tmp_path / "conflict.so", extra=["--shape", "x=1,8"])
    assert proc.returncode == 0, proc.stderr
    two = tmp_path / "two.onnx"
    g = helper.make_graph([N("Add", ["x", "y"], ["z"])], "two",
                          [helper.make_tensor_value_info(n, T.FLOAT, ["B", "S"]) for n in ("x", "y")],
                          [helper.make_tensor_value_info("z", T.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, two)
    proc = tl.compile_raw(two, tmp_path / "two.so", extra=["--shape", "x=2,8", "--shape", "y=2,9"])
    assert proc.returncode != 0 and "--shape y: dim 1 is symbol 'S', which --shape x (dim 1) gives as 8; here it is 9" \
        in proc.stderr, proc.stderr


def _peak_rss_mb(argv) -> float:
    """Runs argv and returns its peak resident memory in MB (this child's own, by wait4)."""
    import os
    import subprocess

    p = subprocess.Popen([str(a) for a in argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, err
    return ru.ru_maxrss / 1024.0


def _transposed_weight_model(rng, k: int, n: int) -> onnx.ModelProto:
    """y = x @ transpose(wt), x [batch, k], wt [n, k] (a constant the compiler folds)."""
    wt = rng.standard_normal((n, k)).astype(np.float32) * 0.03
    g = helper.make_graph(
        [helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0]),
         helper.make_node("MatMul", ["x", "w"], ["y"])],
        "share", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])],
        initializer=[onnx.numpy_helper.from_array(wt, "wt")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_symbolic_compile_holds_few_weight_copies(tmp_path):
    """A symbolic compile is one compile (shapes as expressions, no compile per sample of the
    symbols): the compiler holds at most 5 copies of a 16 MB weight at its peak (the weight, its
    folded transpose, the GEMM's packed panels, the weights file's blob as it grows). Measured
    against the same compile of a model with a 64 KB weight, to leave out what does not depend
    on the weight. The model's outputs are checked against ONNX Runtime at 3 batch sizes."""
    rng = np.random.default_rng(7)
    peaks = {}
    for n in (16, 4096):
        m = _transposed_weight_model(rng, 1024, n)
        p = tmp_path / f"share{n}.onnx"
        onnx.save(m, p)
        so = tmp_path / f"share{n}.so"
        peaks[n] = _peak_rss_mb([tl.build_dir() / "bin" / "cuvil-compile", "--model", p, "--output", so,
                                 "--dim", "batch=1:64"])
    copies = (peaks[4096] - peaks[16]) / 16.0
    assert copies < 6.0, f"cuvil-compile held {copies:.1f} copies of a 16 MB weight at its peak ({peaks})"
    for b in (1, 37, 64):
        x = rng.standard_normal((b, 1024)).astype(np.float32)
        tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / f"b{b}"), tl.ort_run(m, {"x": x}))


def test_range_from_zero_runs_empty_tensors(tmp_path):
    """A KV cache starts empty: --dim past=0:16 keeps past symbolic down to 0, and the model
    runs with [1, 0, 4] inputs (a Concat with the new entry, then a reduction over the cache);
    a fixed dim of 0 is refused."""
    g = helper.make_graph(
        [helper.make_node("Concat", ["past", "new"], ["cache"], axis=1),
         helper.make_node("ReduceSum", ["cache", "ax"], ["s"], keepdims=0),
         helper.make_node("Mul", ["cache", "two"], ["y"])],
        "kv", [helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "past", 4]),
               helper.make_tensor_value_info("new", TensorProto.FLOAT, [1, 1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, 4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 4])],
        initializer=[onnx.numpy_helper.from_array(np.array([1], np.int64), "ax"),
                     onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    p = tmp_path / "kv.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build", dims={"past": "0:16"})
    rng = np.random.default_rng(3)
    for past in (0, 1, 9, 16):
        feed = {"past": rng.standard_normal((1, past, 4)).astype(np.float32),
                "new": rng.standard_normal((1, 1, 4)).astype(np.float32)}
        tl.assert_outputs_close(tl.run(so, feed, tmp_path / f"p{past}"), tl.ort_run(m, feed))
    proc = tl.compile_raw(p, tmp_path / "zero.so", dims={"past": "0"})
    assert proc.returncode != 0 and "--dim" in proc.stderr, proc.stderr


def test_reshape_count_mismatch_names_input_then_output(tmp_path):
    """A Reshape of a symbolic input whose element count the run finds wrong: the message gives
    the input's count, then the output's, as it says."""
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(np.array([2, 4096], np.int64), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "r.onnx"
    onnx.save(m, path)
    so = tl.compile(path, tmp_path / "b", dims={"n": "1:10000"})
    with pytest.raises(tl.CuvilError, match=r"element counts of input and output differ \(1792 and 8192\)"):
        tl.run(so, {"x": np.zeros(1792, np.float32)}, tmp_path / "run")


def test_shape_error_names_the_dims_left_at_1(tmp_path):
    """A reflect Pad of 3 on a symbolic axis: compiled without --dim the axis is 1, and the error
    says which symbolic dims no --dim gave (silero-vad's, a first compile's surprise); with --dim
    it compiles and matches ONNX Runtime."""
    g = helper.make_graph([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], "pad",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", "n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("p", TensorProto.INT64, [4], [0, 3, 0, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "pad.onnx"
    onnx.save(m, path)
    with pytest.raises(tl.CuvilError, match=r"symbolic dims rows, n, given no --dim, were compiled at 1"):
        tl.compile(path, tmp_path / "a")
    so = tl.compile(path, tmp_path / "b", dims={"rows": "2", "n": "4:64"})
    x = np.random.default_rng(0).standard_normal((2, 9)).astype(np.float32)
    np.testing.assert_array_equal(tl.run(so, {"x": x}, tmp_path / "r")["y"], tl.ort_run(path, {"x": x})["y"])


@pytest.mark.parametrize("delta", [1.0, -1.0])
def test_float_range_over_a_symbolic_size(tmp_path, delta):
    """Range(0, Cast<float>(Shape(x)[3]), 1), as YOLOv8's anchors are made (NudeNet's 320n.onnx):
    its count is an expression of the symbol, so one build serves every width (it wanted --dim
    on the Range's output); a delta of -1 counts down from the width. Against ONNX Runtime at
    three widths."""
    start, limit = ("zero", "wf") if delta > 0 else ("wf", "zero")
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i3"], ["w"], axis=0),
             helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Range", [start, limit, "d"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])]
    g = helper.make_graph(nodes, "frange", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
                          [helper.make_tensor("i3", TensorProto.INT64, [], [3]), helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                           helper.make_tensor("d", TensorProto.FLOAT, [], [delta])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "frange.onnx"
    onnx.save(m, path)
    so = tl.compile(path, tmp_path / "b", dims={"h": "1:8", "w": "1:64"})
    for h, w in ((3, 5), (8, 64), (1, 1)):
        x = np.random.default_rng(w).standard_normal((1, 2, h, w)).astype(np.float32)
        got, want = tl.run(so, {"x": x}, tmp_path / f"r{w}"), tl.ort_run(path, {"x": x})
        for k in ("y", "r"):
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k} at width {w}")
