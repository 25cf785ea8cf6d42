"""The lowering's conv algorithm choices that bench/conv_sweep.py measured (one thread: the chosen
path within 1.5x of the fastest path the runtime has for the shape, on both x86-64 targets),
each case named with its target, and every choice checked against ONNX Runtime where this
machine runs the target. Before the rules of src/lower/conv.c took one input channel
and strides into account, a learned spectrogram (1 -> 257 channels, 512 taps, stride 160) ran
the depthwise loop, 10-25x slower than the GEMM paths."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cuvil_testlib as tl

TARGETS = ["x86_64-avx2", "x86_64-avx512"]

# name: (input shape, weight shape, strides, pads, group, the note's algorithm on both targets, or
# per target where the targets differ)
CASES = {
    # one input channel, many outputs, long kernel, big stride: the direct convolution
    "spectrogram-1d": ([1, 1, 16000], [257, 1, 512], [160], [0, 0], 1, "direct on a channels-last padded copy"),
    "spectrogram-2d": ([1, 1, 1, 8000], [64, 1, 1, 400], [1, 160], [0, 0, 0, 0], 1,
                       "direct on a channels-last padded copy"),
    # one input channel, short kernel rows (10 floats): the GEMM
    "wav2vec2-conv0": ([1, 1, 8000], [512, 1, 10], [5], [0, 0], 1, "im2col+gemm, gemm"),
    # a channel multiplier of 64 with a gathering stride: the GEMM, group by group
    "multiplier-64": ([1, 4, 1, 4000], [256, 1, 1, 400], [1, 160], [0, 0, 0, 0], 4, "im2col+gemm, gemm"),
    # a multiplier of 4 (fewer outputs than the microkernel's rows): the depthwise loop
    "multiplier-4": ([1, 16, 1, 4000], [64, 1, 1, 9], [1, 4], [0, 0, 0, 0], 16, "direct depthwise"),
    # a conv of one input channel with outputs enough for the GEMM's rows: the GEMM; fewer: the loop
    "one-channel-3x3": ([2, 1, 28, 28], [32, 1, 3, 3], [1, 1], [1, 1, 1, 1], 1, "im2col+gemm, gemm"),
    "one-channel-to-2": ([1, 1, 1, 16000], [2, 1, 1, 9], [1, 3], [0, 0, 0, 0], 1, "direct depthwise"),
    # a depthwise conv with a multiplier of 16 where the loop vectorises: the loop
    "multiplier-16-3x3": ([1, 8, 28, 28], [128, 1, 3, 3], [1, 1], [1, 1, 1, 1], 8, "direct depthwise"),
    # stride 4 with 33-float kernel rows: the direct convolution (AlexNet's first conv)
    "alexnet-11x11-s4": ([1, 3, 99, 99], [64, 3, 11, 11], [4, 4], [2, 2, 2, 2], 1,
                         "direct on a channels-last padded copy"),
    # few output channels a group: the grouped direct kernel (16 a group here; RegNet's 8), on
    # AVX2 too; many: the GEMM, group by group, never swapped (pixels as rows)
    "grouped-g4-s2": ([1, 64, 56, 56], [64, 16, 3, 3], [2, 2], [1, 1, 1, 1], 4, "grouped direct"),
    "regnet-g26": ([1, 208, 14, 14], [208, 8, 3, 3], [1, 1], [1, 1, 1, 1], 26, "grouped direct"),
    "alexnet-g2-5x5": ([1, 96, 27, 27], [256, 48, 5, 5], [1, 1], [2, 2, 2, 2], 2, "im2col+gemm, gemm"),
    # stride 2 with few output channels and K >= 64 (YOLO's stem, 3 -> 16 6x6, K 108): a direct
    # convolution, the one each target has tiles for (AVX-512's channels-last tiles are 32
    # channels wide); K 27 (the usual 3x3 stem) the direct path too, whose stem kernel takes a
    # 3x3 s2 conv of at most 4 input channels
    "few-outputs-6x6-s2": ([1, 3, 64, 64], [16, 3, 6, 6], [2, 2], [2, 2, 2, 2], 1,
                           {"x86_64-avx2": "direct on a channels-last padded copy",
                            "x86_64-avx512": "direct (taps read in place from 4 phases)"}),
    "few-outputs-3x3-s2": ([1, 16, 96, 96], [32, 16, 3, 3], [2, 2], [1, 1, 1, 1], 1,
                           "direct on a channels-last padded copy"),
    # a strided 3x3 conv whose few output pixels the swapped GEMM would take (YOLO-style's 128 ->
    # 128 at 20x20), on a channels-first input: the direct convolution on a channels-last copy;
    # ConvNeXt's 2x2 s2 patches keep the swapped GEMM
    "s2-3x3-few-pixels": ([1, 128, 20, 20], [128, 128, 3, 3], [2, 2], [1, 1, 1, 1], 1,
                          "direct on a channels-last padded copy"),
    # (on AVX-512 the channels-first GEMM's 196 columns fill 94% (a last tile of 4 runs as one
    # vector), no worse than as rows: the direct convolution, which ConvNeXt-Tiny ran 2% faster)
    "s2-2x2-patches": ([1, 192, 28, 28], [384, 192, 2, 2], [2, 2], [0, 0, 0, 0], 1,
                       {"x86_64-avx2": "im2col+gemm, pixels as rows",
                        "x86_64-avx512": "direct on a channels-last padded copy"}),
    "stem-3x3-s2-k27": ([1, 3, 56, 56], [32, 3, 3, 3], [2, 2], [1, 1, 1, 1], 1,
                        "direct (taps read in place from 4 phases)"),
    # ResNet's 7x7 stem (K 147): the stem kernel too (conv2d.c: KxK stride 2, K 3 to 7)
    "stem-7x7-s2": ([1, 3, 64, 64], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3], 1, "direct (taps read in place from 4 phases)"),
    "stem-3x3-s2-5-channels": ([1, 5, 112, 112], [16, 5, 3, 3], [2, 2], [1, 1, 1, 1], 1, "im2col+gemm, gemm"),
    # a squeeze-excitation block's reduction on a 1x1 map: the direct convolution on its pixel;
    # its expansion keeps the pixels-as-rows GEMM
    "se-reduce-1x1-map": ([1, 672, 1, 1], [28, 672, 1, 1], [1, 1], [0, 0, 0, 0], 1,
                          "1x1 direct on channels-last pixels read in place"),
    "se-expand-1x1-map": ([1, 28, 1, 1], [672, 28, 1, 1], [1, 1], [0, 0, 0, 0], 1, "im2col+gemm, pixels as rows"),
    # a 1x1 conv on a map larger than 28x28 keeps the GEMM with output channels as rows, even
    # where 6-row tiles fill worse than 16 columns (AVX2: 16 channels in 18 rows): packing its
    # pixels' rows and transposing the output cost more than the fill saves (MobileNetV2's
    # 32 -> 16 at 112x112, cuvil-bench-conv-avx2: 0.22 ms against 0.38 swapped); at 7x7 (49
    # pixels: two thirds of 4 16-wide tiles) the swapped GEMM
    "pointwise-112x112-to-16": ([1, 32, 112, 112], [16, 32, 1, 1], [1, 1], [0, 0, 0, 0], 1, "1x1 as gemm"),
    "pointwise-7x7": ([1, 160, 7, 7], [480, 160, 1, 1], [1, 1], [0, 0, 0, 0], 1, "im2col+gemm, pixels as rows"),
    # a map 2 high (a CRNN's last convs): 4x4 tiles are half padding, 2x2 ones take fewer multiplies
    "crnn-2x80": ([1, 256, 2, 80], [256, 256, 3, 3], [1, 1], [1, 1, 1, 1], 1, "winograd F(2x2,3x3), tiles as rows"),
    "crnn-4x80": ([1, 256, 4, 80], [256, 256, 3, 3], [1, 1], [1, 1, 1, 1], 1, "winograd F(4x4,3x3), tiles as rows"),
    # 7x7 at 512 channels (ResNets' last stage): F(2x2)'s 16.8 MB of transformed weights pass
    # 4 MiB an image (the pixels-as-rows GEMM); at 256 channels they are 4 MiB (F(2x2))
    "resnet-7x7-512": ([1, 512, 7, 7], [512, 512, 3, 3], [1, 1], [1, 1, 1, 1], 1, "im2col+gemm, pixels as rows"),
    "7x7-256": ([1, 256, 7, 7], [256, 256, 3, 3], [1, 1], [1, 1, 1, 1], 1, "winograd F(2x2,3x3), tiles as rows"),
    # a 2x80 map at 512 channels: F(2x2) refused for its weights, and so F(4x4), whose are more
    "2x80-512": ([1, 512, 2, 80], [512, 512, 3, 3], [1, 1], [1, 1, 1, 1], 1, "im2col+gemm, gemm"),
}


def _model(path, xs, ws, strides, pads, group):
    rng = np.random.default_rng(len(xs) * 1000 + ws[0])
    w = onnx.numpy_helper.from_array((rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=strides, pads=pads, group=group)],
                          "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_choice(case, target, tmp_path):
    xs, ws, strides, pads, group, want = CASES[case]
    if isinstance(want, dict):
        want = want[target]
    p = tmp_path / "m.onnx"
    _model(p, xs, ws, strides, pads, group)
    ir = tl.compile(p, tmp_path / "ir", emit="ir", target=target).read_text()
    (line,) = [ln for ln in ir.splitlines() if " = conv " in ln]
    note = line.split("#")[-1].strip()
    assert note.startswith(want), (want, line)
    if "gemm" in want and "pixels" not in want:
        assert "pixels as rows" not in note, line
    if not tl.host_runs(target):
        return
    x = np.random.default_rng(7).standard_normal(xs).astype(np.float32)
    so = tl.compile(p, tmp_path / "build", target=target)
    for threads in (1, 2):
        tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / f"t{threads}", threads=threads),
                                tl.ort_run(p, {"x": x}))


def _symbolic_grouped(path, c, m, group):
    rng = np.random.default_rng(5)
    w = onnx.numpy_helper.from_array((rng.standard_normal([m, c // group, 3, 3]) / 5).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=group)], "gconv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    m_ = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m_.ir_version = 8
    onnx.save(m_, path)


@pytest.mark.parametrize("target", TARGETS)
def test_grouped_symbolic(target, tmp_path):
    """A grouped conv of symbolic sizes: the grouped kernel while its tile (one group's padded
    input, per thread) stays under 8 MB at the symbols' upper bounds, the GEMM past that; both
    checked against ONNX Runtime at sizes inside the range (the kernel runs the run's sizes)."""
    p = tmp_path / "m.onnx"
    _symbolic_grouped(p, 16, 16, 2)
    for hi, want in ((128, "grouped direct"), (2048, "im2col+gemm, gemm")):
        dims = {"N": "1:2", "H": f"8:{hi}", "W": f"8:{hi}"}
        ir = tl.compile(p, tmp_path / f"ir{hi}", emit="ir", target=target, dims=dims).read_text()
        (line,) = [ln for ln in ir.splitlines() if " = conv " in ln]
        assert line.split("#")[-1].strip().startswith(want), (hi, line)
        if not tl.host_runs(target):
            continue
        so = tl.compile(p, tmp_path / f"build{hi}", target=target, dims=dims)
        for shape in ((1, 16, 9, 13), (2, 16, 100, 37)):
            x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
            tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / f"r{hi}-{shape[2]}", threads=2), tl.ort_run(p, {"x": x}))


def _w1_model(path, xs, ws, strides, pads, dilations, batch_sym=None):
    """A conv over [N, C, H, W] with KW = 1 (strides, pads and dilations along H), or its 1-D twin."""
    rng = np.random.default_rng(11)
    w = onnx.numpy_helper.from_array((rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b")
    shape = [batch_sym or xs[0]] + list(xs[1:])
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=strides, pads=pads,
                                            dilations=dilations)],
                          "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


# (C, H, M, K, stride, pads (top, bottom), dilation): Magika's 256 -> 512 5x1 on 512 x 1 (smaller)
W1_CASES = {"magika-like": (64, 120, 96, 5, 1, (0, 0), 1), "strided-padded-dilated": (24, 77, 40, 3, 2, (2, 1), 2)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(W1_CASES))
def test_conv_one_pixel_wide_runs_as_1d(case, target, tmp_path):
    """A 2-D conv whose W axis is trivial (W = KW = 1, as jax2tf writes a 1-D conv) takes the
    kernels' 1-D view, H and W swapped: the same algorithm as its 1-D twin over [N, C, L], and
    ONNX Runtime's numbers, with a fixed and a symbolic batch."""
    C, H, M, K, s, (pt, pb), d = W1_CASES[case]
    p = tmp_path / "m.onnx"
    _w1_model(p, [2, C, H, 1], [M, C, K, 1], [s, 1], [pt, 0, pb, 0], [d, 1])
    twin = tmp_path / "twin.onnx"
    _w1_model(twin, [2, C, H], [M, C, K], [s], [pt, pb], [d])

    def note(path, name):
        ir = tl.compile(path, tmp_path / name, emit="ir", target=target).read_text()
        (line,) = [ln for ln in ir.splitlines() if " = conv " in ln]
        return line.split("#")[-1].strip()

    def kernel_params(path, name):   # the conv's parameters as the emitted C gives them to the runtime
        c = tl.compile(path, tmp_path / name, emit="c", target=target)
        text = "".join(f.read_text() for f in sorted(c.glob("*.c")))
        found = re.findall(r"cuvil_conv2d_params P\d+ = (\{.*?\});", text)
        assert len(found) == 1, found
        return found[0]

    assert note(p, "ir") == note(twin, "ir_twin")
    params = kernel_params(p, "c")
    assert ".H = 1," in params and params == kernel_params(twin, "c_twin"), params
    if not tl.host_runs(target):
        return
    x = np.random.default_rng(3).standard_normal([2, C, H, 1]).astype(np.float32)
    so = tl.compile(p, tmp_path / "build", target=target)
    for threads in (1, 2):
        tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / f"t{threads}", threads=threads), tl.ort_run(p, {"x": x}))
    sym = tmp_path / "sym.onnx"
    _w1_model(sym, [2, C, H, 1], [M, C, K, 1], [s, 1], [pt, 0, pb, 0], [d, 1], batch_sym="n")
    so = tl.compile(sym, tmp_path / "build_sym", target=target, dims={"n": "1:4"})
    x3 = np.random.default_rng(4).standard_normal([3, C, H, 1]).astype(np.float32)
    tl.assert_outputs_close(tl.run(so, {"x": x3}, tmp_path / "sym_run"), tl.ort_run(p.with_name("sym.onnx"), {"x": x3}))


@pytest.mark.parametrize("target", TARGETS)
def test_block_one_pixel_wide(target, tmp_path):
    """An inverted-residual block on a map one pixel wide (expand 1x1, depthwise 3x3 padded on
    both axes, project 1x1; the expanded tensor 2.3 MB, where blocks fuse): the 1x1 convs take
    the 1-D kernel view, the depthwise conv does not, so the block stays three convs; ONNX
    Runtime's numbers."""
    rng = np.random.default_rng(21)
    H, C, E = 6000, 16, 96
    inits = [onnx.numpy_helper.from_array(a.astype(np.float32), n) for n, a in [
        ("we", rng.standard_normal([E, C, 1, 1]) / 4), ("wd", rng.standard_normal([E, 1, 3, 3]) / 3),
        ("wp", rng.standard_normal([C, E, 1, 1]) / 10)]]
    nodes = [helper.make_node("Conv", ["x", "we"], ["e"]), helper.make_node("Relu", ["e"], ["er"]),
             helper.make_node("Conv", ["er", "wd"], ["d"], group=E, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d"], ["dr"]), helper.make_node("Conv", ["dr", "wp"], ["y"])]
    g = helper.make_graph(nodes, "blk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    ir = tl.compile(p, tmp_path / "ir", emit="ir", target=target).read_text()
    assert " = mbblock " not in ir and ir.count(" = conv ") == 3, ir
    if not tl.host_runs(target):
        return
    x = rng.standard_normal([1, C, H, 1]).astype(np.float32)
    so = tl.compile(p, tmp_path / "build", target=target)
    for threads in (1, 2):
        tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / f"t{threads}", threads=threads), tl.ort_run(p, {"x": x}))
