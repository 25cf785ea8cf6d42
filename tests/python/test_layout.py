"""Channels-last regions (the lowering's layout pass): tensors between pixels-as-rows GEMMs and
depthwise convs on small maps are kept [N, H, W, C]; the graph's outputs and every tensor that
something else reads stay NCHW. Checked against ONNX Runtime, with the IR showing that the
layout was taken (else these tests would pass without it).

The choices follow the target's GEMM tile (8x32 on AVX-512, 6x16 on AVX2), so each test names
its target and holds an expectation per target: the IR is checked for both on every machine
(--emit ir needs no runtime), the outputs for each target this machine executes."""
from __future__ import annotations

import re

import onnx
import pytest

import cuvil_testlib as tl
from onnx_cases import Case, R, node


def _blocks(tapped: bool, hw: int = 7) -> Case:
    """Two MobileNetV2-style blocks at hw x hw, batch 2: a 1x1 conv, then expand 1x1 -> depthwise
    3x3 -> project 1x1 + the block's input, then expand -> depthwise stride 2 -> project, then
    a global average pool. `tapped`: the first block's expanded tensor is also a graph output,
    and the second depthwise output also feeds a Sigmoid."""
    clip = dict(min=0.0, max=6.0)
    nodes = [
        node("Conv", ["x", "w0", "b0"], ["c0"]),
        node("Conv", ["c0", "we1", "be1"], ["e1c"]),
        node("Clip", ["e1c", "lo", "hi"], ["e1"]),
        node("Conv", ["e1", "wd1", "bd1"], ["d1c"], group=96, pads=[1, 1, 1, 1]),
        node("Clip", ["d1c", "lo", "hi"], ["d1"]),
        node("Conv", ["d1", "wp1", "bp1"], ["p1"]),
        node("Add", ["p1", "c0"], ["a1"]),
        node("Conv", ["a1", "we2", "be2"], ["e2c"]),
        node("Clip", ["e2c", "lo", "hi"], ["e2"]),
        node("Conv", ["e2", "wd2"], ["d2c"], group=96, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Clip", ["d2c", "lo", "hi"], ["d2"]),
        node("Conv", ["d2", "wp2", "bp2"], ["p2"]),
        node("GlobalAveragePool", ["p2"], ["y"]),
    ]
    outputs = ["y"]
    if tapped:
        nodes.append(node("Sigmoid", ["d2"], ["s2"]))
        outputs += ["e1", "s2"]
    inits = {"w0": R(32, 24, 1, 1), "b0": R(32), "we1": R(96, 32, 1, 1), "be1": R(96),
             "wd1": R(96, 1, 3, 3), "bd1": R(96), "wp1": R(32, 96, 1, 1), "bp1": R(32),
             "we2": R(96, 32, 1, 1), "be2": R(96), "wd2": R(96, 1, 3, 3),
             "wp2": R(40, 96, 1, 1), "bp2": R(40),
             "lo": onnx.numpy_helper.to_array(onnx.helper.make_tensor("lo", 1, [], [clip["min"]])),
             "hi": onnx.numpy_helper.to_array(onnx.helper.make_tensor("hi", 1, [], [clip["max"]]))}
    return Case(f"layout-{'tapped' if tapped else 'blocks'}-{hw}", 13, nodes, {"x": [2, 24, hw, hw]}, inits,
                outputs=outputs)


def _bottlenecks() -> Case:
    """Two ResNet-50-style bottlenecks at 14x14 -> 7x7, batch 2, then a global average pool: the
    first with a strided 3x3 and a strided 1x1 shortcut, the second with its input as the
    residual. Every tensor after the input is made and read by pixels-as-rows GEMMs (1x1 and
    3x3), the shortcut and the pool."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"]), node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]), node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "w3", "b3"], ["c3"]),
        node("Conv", ["x", "wd", "bd"], ["d"], strides=[2, 2]),
        node("Add", ["c3", "d"], ["s1"]), node("Relu", ["s1"], ["o1"]),
        node("Conv", ["o1", "w4", "b4"], ["c4"]), node("Relu", ["c4"], ["r4"]),
        node("Conv", ["r4", "w5", "b5"], ["c5"], pads=[1, 1, 1, 1]), node("Relu", ["c5"], ["r5"]),
        node("Conv", ["r5", "w6", "b6"], ["c6"]),
        node("Add", ["c6", "o1"], ["s2"]), node("Relu", ["s2"], ["o2"]),
        node("GlobalAveragePool", ["o2"], ["y"]),
    ]
    inits = {"w1": R(32, 64, 1, 1), "b1": R(32), "w2": R(32, 32, 3, 3), "b2": R(32), "w3": R(96, 32, 1, 1),
             "b3": R(96), "wd": R(96, 64, 1, 1), "bd": R(96), "w4": R(32, 96, 1, 1), "b4": R(32),
             "w5": R(32, 32, 3, 3), "b5": R(32), "w6": R(96, 32, 1, 1), "b6": R(96)}
    return Case("layout-bottlenecks", 13, nodes, {"x": [2, 64, 14, 14]}, inits)


def _layouts(ir: str) -> dict:
    """node name -> its 'channels last ...' note, from --emit ir."""
    out = {}
    for line in ir.splitlines():
        m = re.search(r'= [a-z_]+ "([^"]*)".*channels last (in and out|in|out)', line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


TARGETS = ["x86_64-avx2", "x86_64-avx512"]


def _ir(c: Case, tmp_path, target: str):
    """The case saved as an ONNX file; its IR for target; (path, inputs, reference outputs, IR)."""
    m, inputs, ref = c.build()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    return p, inputs, ref, tl.compile(p, tmp_path / "ir", emit="ir", target=target).read_text()


# 28x28 on AVX-512: the 1x1 convs run with pixels as rows only beside a depthwise conv, so the
# first conv and the blocks' sums (its residual) stay NCHW; each depthwise conv and the 1x1 convs
# on either side of it take channels last. On AVX2 (6 rows of 16) the first conv's 784 pixels
# fill the rows better than its 32 channels fill the columns, so it runs pixels as rows too and
# the whole region is channels last, as at 7x7.
_REGION_28 = {
    "x86_64-avx512": {"Conv_e1c": "out", "Conv_d1c": "in and out", "Conv_p1": "in", "Conv_e2c": "out",
                      "Conv_d2c": "in and out", "Conv_p2": "in and out", "GlobalAveragePool_y": "in"},
    "x86_64-avx2": {"Conv_c0": "out", "Conv_e1c": "in and out", "Conv_d1c": "in and out", "Conv_p1": "in and out",
                    "Conv_e2c": "in and out", "Conv_d2c": "in and out", "Conv_p2": "in and out",
                    "GlobalAveragePool_y": "in"},
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tapped,hw", [(False, 7), (True, 7), (False, 28)], ids=["blocks", "tapped", "28x28"])
def test_channels_last_region(tapped, hw, target, tmp_path):
    p, inputs, ref, ir = _ir(_blocks(tapped, hw), tmp_path, target)
    lay = _layouts(ir)
    if hw == 28:
        assert lay == _REGION_28[target], ir
    elif not tapped:
        # everything between the first conv and the pool: the first conv writes channels last,
        # the pool reads them
        assert len(lay) == 8, ir
        assert list(lay.values()).count("in and out") == 6, lay
        assert lay["GlobalAveragePool_y"] == "in", lay
        assert "weights tap-major" in ir
    else:
        # e1 is a graph output, d2 feeds a Sigmoid: their convs and the depthwise conv beside
        # each stay NCHW on that side, and so the blocks' other tensors on the same conv
        assert len(lay) < 7, lay
        assert len(lay) > 0, ir
    if not tapped:
        # the projections (96 -> 32, 96 -> 40) read their channels-last inputs in place (the
        # direct convolution): both targets' microkernels have 16 or 32 columns
        proj = [re.search(r'"([^"]*)"', ln).group(1) for ln in ir.splitlines() if "pixels read in place" in ln]
        assert sorted(proj) == ["Conv_p1", "Conv_p2"], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


def _wino_bottlenecks() -> Case:
    """A 1x1 conv, then two ResNet-50-style bottlenecks at 28x28 (each its input as the
    residual), batch 2, then a global average pool: the 3x3 convs run as Winograd with tiles
    as rows (49 tiles), and the 1x1 convs on their map with pixels as rows."""
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"])]
    prev = "c0"
    for k in (1, 2):
        nodes += [
            node("Conv", [prev, f"wa{k}", f"ba{k}"], [f"a{k}"]), node("Relu", [f"a{k}"], [f"ra{k}"]),
            node("Conv", [f"ra{k}", f"wb{k}", f"bb{k}"], [f"b{k}"], pads=[1, 1, 1, 1]), node("Relu", [f"b{k}"], [f"rb{k}"]),
            node("Conv", [f"rb{k}", f"wc{k}", f"bc{k}"], [f"c{k}"]),
            node("Add", [f"c{k}", prev], [f"s{k}"]), node("Relu", [f"s{k}"], [f"o{k}"]),
        ]
        prev = f"o{k}"
    nodes.append(node("GlobalAveragePool", [prev], ["y"]))
    inits = {"w0": R(64, 40, 1, 1), "b0": R(64)}
    for k in (1, 2):
        inits.update({f"wa{k}": R(32, 64, 1, 1), f"ba{k}": R(32), f"wb{k}": R(32, 32, 3, 3), f"bb{k}": R(32),
                      f"wc{k}": R(64, 32, 1, 1), f"bc{k}": R(64)})
    return Case("layout-wino-bottlenecks", 13, nodes, {"x": [2, 40, 28, 28]}, inits)


def _direct() -> Case:
    """Strided 3x3 convs with enough taps for the direct convolution on a channels-last copy,
    batch 2: the first reads the graph's NCHW input (the reorder folded into its copy) and
    writes channels last for a 3x3 stride-1 conv at 15x15 (Winograd with tiles as rows), whose
    output the second reads channels last, then a global average pool."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]), node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("GlobalAveragePool", ["c3"], ["y"]),
    ]
    inits = {"w1": R(48, 32, 3, 3), "b1": R(48), "w2": R(48, 48, 3, 3), "b2": R(48), "w3": R(64, 48, 3, 3),
             "b3": R(64)}
    return Case("layout-direct", 13, nodes, {"x": [2, 32, 30, 30]}, inits)


# NCHW: only the graph's input. Bottlenecks: channels last everything after it, the 3x3 convs'
# inputs too (their im2col packed from it, K tap-major like their weights), the shortcut's
# output (from its subsampled copy), the first block's sum (read by the next block's 1x1 conv
# and added as its residual), the second's (read by the pool). Winograd: everything after the
# first conv, Winograd's inputs and outputs too. The same on both targets.
_SAME = {
    "bottlenecks": (_bottlenecks, {"Conv_c1": "out", "Conv_c2": "in and out", "Conv_d": "out",
                                   "Conv_c3": "in and out", "Conv_c4": "in and out", "Conv_c5": "in and out",
                                   "Conv_c6": "in and out", "GlobalAveragePool_y": "in"}, {"weights tap-major": 2}),
    "winograd": (_wino_bottlenecks, {"Conv_c0": "out", "Conv_a1": "in and out", "Conv_b1": "in and out",
                                     "Conv_c1": "in and out", "Conv_a2": "in and out", "Conv_b2": "in and out",
                                     "Conv_c2": "in and out", "GlobalAveragePool_y": "in"}, {"tiles as rows": 2}),
}
_STAGES = {(k, t): v for k, v in _SAME.items() for t in TARGETS}
# Bottlenecks on AVX-512: the first 1x1 conv's 196 pixels fill its GEMM's columns to 94% (the
# last tile of 4 runs as one 16-lane vector), its 32 channels as rows to 98%: it keeps the
# channels-first GEMM (its input is the graph's), and the strided 3x3 conv after it takes the
# direct convolution on a channels-last copy of its channels-first input (no tap-major im2col
# for it then).
_STAGES[("bottlenecks", "x86_64-avx512")] = (
    _bottlenecks, {"Conv_c2": "out", "Conv_d": "out", "Conv_c3": "in and out", "Conv_c4": "in and out",
                   "Conv_c5": "in and out", "Conv_c6": "in and out", "GlobalAveragePool_y": "in"},
    {"weights tap-major": 1})
# Direct: the 3x3 stride-1 conv's 16 tiles per image at 15x15 run as rows (Winograd; on
# AVX2, whose 6 rows the 16 tiles fill to 89%, since tiles as rows take every map of up to 100
# tiles on x86), so all three convs are channels last, the strided ones direct on a
# channels-last copy.
for _t in TARGETS:
    _STAGES[("direct", _t)] = (
        _direct, {"Conv_c1": "out", "Conv_c2": "in and out", "Conv_c3": "in and out", "GlobalAveragePool_y": "in"},
        {"direct on a channels-last padded copy": 2, "tiles as rows": 1})


@pytest.mark.parametrize("stage,target", sorted(_STAGES), ids=[f"{s}-{t}" for s, t in sorted(_STAGES)])
def test_channels_last_resnet_stages(stage, target, tmp_path):
    build, want, notes = _STAGES[(stage, target)]
    p, inputs, ref, ir = _ir(build(), tmp_path, target)
    assert _layouts(ir) == want, ir
    for note, n in notes.items():
        assert ir.count(note) == n, (note, ir)
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_projection_whole_k(target, tmp_path):
    """A projection (1x1, 320 -> 64) on a channels-last input at 7x7, batch 2: the direct
    convolution reads the input in place, on AVX-512 with its weights repacked in one K block of
    320 (more than the target's kc), on AVX2 in K blocks of its kc. Checked against ONNX Runtime."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"]), node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"]),
        node("GlobalAveragePool", ["c2"], ["y"]),
    ]
    inits = {"w1": R(320, 48, 1, 1), "b1": R(320), "w2": R(64, 320, 1, 1), "b2": R(64)}
    p, inputs, ref, ir = _ir(Case("layout-projection", 13, nodes, {"x": [2, 48, 7, 7]}, inits), tmp_path, target)
    assert _layouts(ir) == {"Conv_c1": "out", "Conv_c2": "in and out", "GlobalAveragePool_y": "in"}, ir
    proj = [ln for ln in ir.splitlines() if '"Conv_c2"' in ln]
    assert "pixels read in place" in proj[0], ir
    assert ("kc=320" if target == "x86_64-avx512" else "kc=256") in proj[0], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


def _c3_bottleneck(hw: int, ch: int) -> Case:
    """A YOLO-style bottleneck at hw x hw: a 1x1 conv to ch channels (SiLU), a 3x3 conv (SiLU)
    whose output is added to the 1x1 conv's input, that sum concatenated with the input (so
    channels first: a Concat reads it), then a 1x1 conv."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"]), node("Sigmoid", ["c1"], ["g1"]), node("Mul", ["c1", "g1"], ["s1"]),
        node("Conv", ["s1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), node("Sigmoid", ["c2"], ["g2"]),
        node("Mul", ["c2", "g2"], ["s2"]),
        node("Add", ["x", "s2"], ["a"]),
        node("Concat", ["a", "x"], ["cat"], axis=1),
        node("Conv", ["cat", "w3", "b3"], ["y"]),
    ]
    inits = {"w1": R(ch, 2 * ch, 1, 1), "b1": R(ch), "w2": R(2 * ch, ch, 3, 3), "b2": R(2 * ch),
             "w3": R(2 * ch, 4 * ch, 1, 1), "b3": R(2 * ch)}
    return Case(f"layout-c3-{hw}-{ch}", 13, nodes, {"x": [1, 2 * ch, hw, hw]}, inits)


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_tiles_as_rows_up_to_40x40(target, tmp_path):
    """On a 40x40 map (100 tiles) the 3x3 conv runs Winograd with tiles as rows whatever the
    tiles' fill, reading its input channels last (the input transform a vector of channels at a
    time), and the 1x1 conv that makes that input runs as the pixels-as-rows GEMM to write it so
    (feeds_wino_t), though 1600 pixels is over the maps where 1x1 convs go channels last for
    their own sake; its output, which a Concat reads, stays channels first. The last 1x1 conv,
    on the Concat, keeps its channels-first GEMM. Both targets; outputs against ONNX Runtime."""
    p, inputs, ref, ir = _ir(_c3_bottleneck(40, 32), tmp_path, target)
    assert _layouts(ir) == {"Conv_c1": "out", "Conv_c2": "in"}, ir
    line = {m.group(1): ln for ln in ir.splitlines() if (m := re.search(r'= conv "([^"]*)"', ln))}
    assert "winograd F(4x4,3x3), tiles as rows" in line["Conv_c2"], ir
    assert "pixels as rows" in line["Conv_c1"], ir
    assert "1x1 as gemm" in line["Conv_y"], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_few_channel_3x3_on_a_large_map(target, tmp_path):
    """16 -> 32 -> 3x3 at 80x80 (400 tiles: channels first). On AVX-512 the 3x3 conv's 16 and
    32 channels (2CM/(C+M) = 21) run the channels-first direct convolution, whose transforms-free
    tiles of 8 output channels beat Winograd there; AVX2, whose direct path is channels last at
    16 columns, keeps Winograd (tiles as columns). Outputs against ONNX Runtime."""
    p, inputs, ref, ir = _ir(_c3_bottleneck(80, 16), tmp_path, target)
    line = {m.group(1): ln for ln in ir.splitlines() if (m := re.search(r'= conv "([^"]*)"', ln))}
    want = "direct (taps read in place" if target == "x86_64-avx512" else "winograd F(4x4,3x3), gemm"
    assert want in line["Conv_c2"], ir
    assert _layouts(ir) == {}, ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


def _lines(ir: str) -> dict:
    """conv node name -> its IR line."""
    return {m.group(1): ln for ln in ir.splitlines() if (m := re.search(r'= conv "([^"]*)"', ln))}


@pytest.mark.parametrize("target", TARGETS)
def test_channels_first_where_the_layout_was_not_taken(target, tmp_path):
    """Kernels chosen for a channels-last layout that the layout pass did not give them get
    their channels-first kernels back. A 3x3 conv at 40x40 on a graph input whose output is a
    graph output (Winograd with tiles as rows on that map, for the layout: reverted to tiles as
    columns, channels first in and out). At 20x20, where another input's 3x3 convs run Winograd
    with tiles as rows (the first writing channels last for the second), a 1x1 conv on the same
    map (swapped to the pixels-as-rows GEMM there) whose output a Reshape reads: reverted to
    the GEMM. Both targets, outputs against ONNX Runtime."""
    import numpy as np
    nodes = [
        node("Conv", ["z", "w1", "b1"], ["y1"], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "w2", "b2"], ["c2"]), node("Reshape", ["c2", "shape"], ["y2"]),
        node("Conv", ["x", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]), node("Relu", ["c3"], ["r3"]),
        node("Conv", ["r3", "w4", "b4"], ["y3"], pads=[1, 1, 1, 1]),
    ]
    inits = {"w1": R(64, 48, 3, 3), "b1": R(64), "w2": R(40, 48, 1, 1), "b2": R(40),
             "w3": R(64, 48, 3, 3), "b3": R(64), "w4": R(64, 64, 3, 3), "b4": R(64),
             "shape": np.array([1, 40, 400], dtype=np.int64)}
    case = Case("layout-revert", 13, nodes, {"x": [1, 48, 20, 20], "z": [1, 48, 40, 40]}, inits,
                outputs=["y1", "y2", "y3"])
    p, inputs, ref, ir = _ir(case, tmp_path, target)
    line = _lines(ir)
    assert "winograd F(4x4,3x3), gemm" in line["Conv_y1"] and "channels last" not in line["Conv_y1"], ir
    assert "1x1 as gemm" in line["Conv_c2"], ir
    assert "tiles as rows" in line["Conv_c3"] and "channels last out" in line["Conv_c3"], ir
    assert "tiles as rows" in line["Conv_y3"] and "channels last in" in line["Conv_y3"], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_head_read_by_a_reshape_keeps_its_gemm(target, tmp_path):
    """At 40x40 a 1x1 conv feeds a 3x3 conv (Winograd with tiles as rows, channels-last input),
    whose output feeds a 1x1 head to 255 channels that a Reshape reads: the head is not swapped
    to the pixels-as-rows GEMM on the Winograd map (it would transpose its output, and make the
    3x3 conv's output channels last for nothing), so the 3x3 conv writes channels first."""
    import numpy as np
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"]),
        node("Conv", ["c1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        node("Conv", ["c2", "w3", "b3"], ["c3"]), node("Reshape", ["c3", "shape"], ["y"]),
    ]
    inits = {"w1": R(32, 64, 1, 1), "b1": R(32), "w2": R(64, 32, 3, 3), "b2": R(64),
             "w3": R(255, 64, 1, 1), "b3": R(255), "shape": np.array([1, 3, 85, 1600], dtype=np.int64)}
    p, inputs, ref, ir = _ir(Case("layout-head", 13, nodes, {"x": [1, 64, 40, 40]}, inits), tmp_path, target)
    line = _lines(ir)
    assert _layouts(ir) == {"Conv_c1": "out", "Conv_c2": "in"}, ir
    assert "1x1 as gemm" in line["Conv_c3"], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_resnet_56x56_stage_channels_last(target, tmp_path):
    """A ResNet-50 bottleneck at 56x56 (196 tiles, 64 channels: Winograd with tiles as rows
    where the tiles fill the rows as well as the columns), its 1x1 convs swapped to the
    pixels-as-rows GEMM. Outputs against ONNX Runtime."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"]), node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "w3", "b3"], ["c3"]),
        node("Add", ["c3", "x"], ["s"]), node("Relu", ["s"], ["o"]),
        node("GlobalAveragePool", ["o"], ["y"]),
    ]
    inits = {"w1": R(64, 256, 1, 1), "b1": R(64), "w2": R(64, 64, 3, 3), "b2": R(64),
             "w3": R(256, 64, 1, 1), "b3": R(256)}
    p, inputs, ref, ir = _ir(Case("layout-56", 13, nodes, {"x": [1, 256, 56, 56]}, inits), tmp_path, target)
    line = _lines(ir)
    assert "tiles as rows" in line["Conv_c2"] and "channels last in and out" in line["Conv_c2"], ir
    # (the sum stays channels first: its other input is the graph's input)
    assert _layouts(ir) == {"Conv_c1": "out", "Conv_c2": "in and out", "Conv_c3": "in"}, ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


def test_generated_c_keeps_algo_notes_whole(tmp_path):
    """The generated C's comment on each node ends with the lowering's whole note: the Winograd
    convs' (over 96 bytes: algorithm, tiles as rows, weights, layout) are not cut short."""
    m, _, _ = _wino_bottlenecks().build()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    src = "".join(f.read_text() for f in sorted((tl.compile(p, tmp_path / "c", emit="c")).glob("*.c")))
    notes = re.findall(r"; (winograd[^\n]*?) \*/\n", src)
    assert len(notes) == 2, src
    for n in notes:
        assert len(n) > 96 and n.endswith("weights transformed and prepacked, channels last in and out"), n


def _se_blocks(tapped: bool) -> Case:
    """Two MobileNetV3-style blocks with squeeze-excitation at 7x7, batch 2: expand 1x1 ->
    depthwise 3x3 -> x * HardSigmoid(fc2(Relu(fc1(pool(x))))) -> project 1x1, the first block's
    scale on the Mul's left (as torchvision exports it), the second's on its right; between the
    blocks a per-channel constant minus the projection ([1, C, 1, 1] on the left), the Max of
    that and the projection (two channels-last inputs) and a PReLU (slope [C, 1, 1]); the second
    block's pool a ReduceMean over H and W. The scale
    is per image ([2, C, 1, 1]). `tapped`: the second block's x * s is also a graph output, and
    the PReLU's output is multiplied by a constant broadcast over the rows ([7]: not over H and W,
    so channels first)."""
    def se(i, x, c, r, scale_left):
        mean = i == 2 and not tapped   # timm's x.mean((2, 3), keepdim=True): a global pool too
        return [
            node("ReduceMean", [x], [f"g{i}"], axes=[2, 3], keepdims=1) if mean else node("GlobalAveragePool", [x], [f"g{i}"]),
            node("Conv", [f"g{i}", f"wf{i}", f"bf{i}"], [f"f{i}"]), node("Relu", [f"f{i}"], [f"fr{i}"]),
            node("Conv", [f"fr{i}", f"wg{i}", f"bg{i}"], [f"h{i}"]),
            node("HardSigmoid", [f"h{i}"], [f"s{i}"], alpha=1.0 / 6, beta=0.5),
            node("Mul", [f"s{i}", x] if scale_left else [x, f"s{i}"], [f"m{i}"]),
        ]
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"]),
             node("Conv", ["c0", "we1", "be1"], ["e1c"]), node("Relu", ["e1c"], ["e1"]),
             node("Conv", ["e1", "wd1", "bd1"], ["d1"], group=96, pads=[1, 1, 1, 1]),
             *se(1, "d1", 96, 24, True),
             node("Conv", ["m1", "wp1", "bp1"], ["p1"]),
             node("Sub", ["k", "p1"], ["q0"]), node("Max", ["q0", "p1"], ["q1"]),
             node("PRelu", ["q1", "slope"], ["a1"]),
             *([node("Mul", ["a1", "row"], ["a1w"])] if tapped else []),
             node("Conv", ["a1w" if tapped else "a1", "we2", "be2"], ["e2c"]), node("Relu", ["e2c"], ["e2"]),
             node("Conv", ["e2", "wd2", "bd2"], ["d2"], group=96, pads=[1, 1, 1, 1]),
             *se(2, "d2", 96, 24, False),
             node("Conv", ["m2", "wp2", "bp2"], ["p2"]),
             node("GlobalAveragePool", ["p2"], ["y"])]
    inits = {"w0": R(32, 24, 1, 1), "b0": R(32), "k": R(1, 32, 1, 1), "slope": R(32, 1, 1), "row": R(7)}
    for i in (1, 2):
        inits.update({f"we{i}": R(96, 32, 1, 1), f"be{i}": R(96), f"wd{i}": R(96, 1, 3, 3), f"bd{i}": R(96),
                      f"wf{i}": R(24, 96, 1, 1), f"bf{i}": R(24), f"wg{i}": R(96, 24, 1, 1), f"bg{i}": R(96),
                      f"wp{i}": R(32, 96, 1, 1), f"bp{i}": R(32)})
    return Case(f"layout-se-{'tapped' if tapped else 'blocks'}", 13, nodes, {"x": [2, 24, 7, 7]}, inits,
                outputs=["y", "m2"] if tapped else ["y"])


def _bin_layouts(ir: str) -> dict:
    """binary node name -> True where it runs channels last, from --emit ir."""
    out = {}
    for line in ir.splitlines():
        m = re.search(r'= (mul|add|sub|max|prelu) "([^"]*)"', line)
        if m:
            out[m.group(2)] = line.rstrip().endswith("# channels last")
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tapped", [False, True], ids=["blocks", "tapped"])
def test_channels_last_se_blocks(tapped, target, tmp_path):
    """The squeeze-excitation Mul, a per-channel Add and a PReLU run channels last, so the
    depthwise convs beside them stay in the region; a Mul whose output the caller gets (tapped)
    writes NCHW, and so its depthwise conv's side. Outputs against ONNX Runtime."""
    p, inputs, ref, ir = _ir(_se_blocks(tapped), tmp_path, target)
    lay, bins = _layouts(ir), _bin_layouts(ir)
    assert set(bins) == {"Mul_m1", "Sub_q0", "Max_q1", "PRelu_a1", "Mul_m2"} | ({"Mul_a1w"} if tapped else set()), ir
    assert bins["Mul_m1"], ir
    assert lay["Conv_d1"] == "in and out", ir
    if tapped:
        # the row-broadcast Mul reads NCHW, and so the PReLU, the Max and the Sub before it (one
        # layout for an op's input and output of the same shape), and the projection writes NCHW
        assert not any(bins[k] for k in ("Mul_m2", "Mul_a1w", "PRelu_a1", "Max_q1", "Sub_q0")), ir
        assert lay["Conv_p1"] == "in", ir
        assert "Conv_d2" not in lay, ir
    else:
        assert bins["Mul_m2"], ir
        assert lay["Conv_d2"] == "in and out", ir
        assert lay["ReduceMean_g2"] == "in", ir   # (pass mean_pool: a global pool, channels last)
        assert all(bins.values()), ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_projection_after_squeeze_excitation_at_14x14(target, tmp_path):
    """A MobileNetV3-style block at 14x14 (196 pixels: the projection's tiles fill no better as
    rows): expand 1x1 -> depthwise 3x3 -> x * HardSigmoid(fc(pool(x))) -> project 1x1 + the
    block's input. The projection reads the depthwise conv's output through the scale's Mul,
    so it runs as the pixels-as-rows GEMM beside a depthwise conv, and the block is channels
    last from the expansion's output to the projection's input (the depthwise conv, the pool
    and the Mul on it). Outputs against ONNX Runtime."""
    nodes = [
        node("Conv", ["x", "we", "be"], ["e"]), node("Relu", ["e"], ["er"]),
        node("Conv", ["er", "wd", "bd"], ["d"], group=120, pads=[1, 1, 1, 1]), node("Relu", ["d"], ["dr"]),
        node("GlobalAveragePool", ["dr"], ["g"]),
        node("Conv", ["g", "wf", "bf"], ["f"]), node("HardSigmoid", ["f"], ["s"], alpha=1.0 / 6, beta=0.5),
        node("Mul", ["dr", "s"], ["m"]),
        node("Conv", ["m", "wp", "bp"], ["p"]), node("Add", ["p", "x"], ["y"]),
    ]
    inits = {"we": R(120, 40, 1, 1), "be": R(120), "wd": R(120, 1, 3, 3), "bd": R(120),
             "wf": R(120, 120, 1, 1), "bf": R(120), "wp": R(40, 120, 1, 1), "bp": R(40)}
    p, inputs, ref, ir = _ir(Case("layout-se-14", 13, nodes, {"x": [1, 40, 14, 14]}, inits), tmp_path, target)
    lay = _layouts(ir)
    assert lay.get("Conv_e") == "out" and lay.get("Conv_d") == "in and out", ir
    assert lay.get("Conv_p", "").startswith("in"), ir
    assert "pixels as rows" in _lines(ir)["Conv_p"], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_square_and_doubling_1x1_direct(target, tmp_path):
    """1x1 convs beside depthwise convs at 28x28, batch 2, channels last: the square one (64 ->
    64) and the doubling one (64 -> 128) run as the direct convolution on pixels read in place
    (src/lower/layout.c, direct_t_projection), the expansion by 4 (128 -> 512) as the
    pixels-as-rows GEMM, which packs them. Checked against ONNX Runtime."""
    nodes = [
        node("Conv", ["x", "w0", "b0"], ["c0"]), node("Relu", ["c0"], ["r0"]),
        node("Conv", ["r0", "wd1"], ["d1"], group=64, pads=[1, 1, 1, 1]),
        node("Conv", ["d1", "w1", "b1"], ["c1"]), node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "wd2"], ["d2"], group=64, pads=[1, 1, 1, 1]),
        node("Conv", ["d2", "w2", "b2"], ["c2"]), node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "wd3"], ["d3"], group=128, pads=[1, 1, 1, 1]),
        node("Conv", ["d3", "w3", "b3"], ["c3"]),
        node("GlobalAveragePool", ["c3"], ["y"]),
    ]
    inits = {"w0": R(64, 32, 1, 1), "b0": R(64), "wd1": R(64, 1, 3, 3), "w1": R(64, 64, 1, 1), "b1": R(64),
             "wd2": R(64, 1, 3, 3), "w2": R(128, 64, 1, 1), "b2": R(128), "wd3": R(128, 1, 3, 3),
             "w3": R(512, 128, 1, 1), "b3": R(512)}
    p, inputs, ref, ir = _ir(Case("layout-square-1x1", 13, nodes, {"x": [2, 32, 28, 28]}, inits), tmp_path, target)
    lines = {n: [ln for ln in ir.splitlines() if f'"{n}"' in ln][0] for n in ("Conv_c1", "Conv_c2", "Conv_c3")}
    for n in ("Conv_c1", "Conv_c2", "Conv_c3"):
        assert "channels last in" in lines[n], ir
    assert "pixels read in place" in lines["Conv_c1"], ir
    assert "pixels read in place" in lines["Conv_c2"], ir
    assert "pixels read in place" not in lines["Conv_c3"] and "im2col+gemm" in lines["Conv_c3"], ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)


def _inverted_residual(c_in: int, hidden: int, hw: int) -> Case:
    """MobileNetV3-Large's second block at hw x hw: expand 1x1 + Relu -> depthwise 3x3 stride 2 +
    Relu -> project 1x1 to 24 channels."""
    nodes = [
        node("Conv", ["x", "we", "be"], ["ec"]), node("Relu", ["ec"], ["e"]),
        node("Conv", ["e", "wd", "bd"], ["dc"], group=hidden, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["dc"], ["d"]),
        node("Conv", ["d", "wp", "bp"], ["y"]),
    ]
    inits = {"we": R(hidden, c_in, 1, 1), "be": R(hidden), "wd": R(hidden, 1, 3, 3), "bd": R(hidden),
             "wp": R(24, hidden, 1, 1), "bp": R(24)}
    return Case(f"inverted-residual-{hidden}-{hw}", 13, nodes, {"x": [1, c_in, hw, hw]}, inits)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c_in,hidden,hw,fused", [(16, 64, 112, True), (24, 72, 56, False)],
                         ids=["3.2MB-fused", "0.9MB-layer-by-layer"])
def test_inverted_residual_block_fused_from_2mb(c_in, hidden, hw, fused, target, tmp_path):
    """An inverted-residual block whose expanded tensor passes 2 MB (MobileNetV3-Large's 16 -> 64
    at 112x112: 3.2 MB) runs as one kernel, band by band (the expand conv in it); its 56x56 block
    (0.9 MB, in L2) runs layer by layer."""
    p, inputs, ref, ir = _ir(_inverted_residual(c_in, hidden, hw), tmp_path, target)
    assert ("expand 1x1 -> depthwise 3x3 s2 -> project 1x1 in bands of rows" in ir) == fused, ir
    assert ("in bands of rows" in ir) == fused, ir
    tl.check_target_outputs(p, inputs, ref, tmp_path, target)
