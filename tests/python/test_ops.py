"""Op-level tests: each case is a tiny ONNX graph (built with onnx.helper, no torch) compiled by
cuvil-compile, run by cuvil-run on seeded random inputs, and compared with ONNX Runtime.

The cases cover the attribute and opset variants that the TorchScript (opset 11/13) and dynamo
(opset 18) exporters produce for CNNs, plus the shape arithmetic around Reshape/Resize/Pad that
the compiler has to fold away. Ids read `<Op>-<variant>`; `pytest -k Conv` runs one family.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import cuvil_testlib as tl
from onnx_cases import INT64_MAX, INT64_MIN, Case, In, R, f32, i64, node

CASES: list = []


def add(*cases):
    CASES.extend(cases)


def C(name, arr):
    """A Constant node, the way the TorchScript exporter writes its constants."""
    return node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(arr),
                                                                          name))


def unary(op, opset=13, shape=(2, 3, 4, 5), kind="normal", **attrs):
    return node(op, ["x"], ["y"], **attrs), {"x": In(list(shape), kind)}


# --------------------------------------------------------------------------------------------
# Conv
# --------------------------------------------------------------------------------------------

def conv(id_, x, w, b=True, opset=13, **attrs):
    ins = ["x", "w"] + (["b"] if b else [])
    inits = {"w": R(*w)}
    if b:
        inits["b"] = R(w[0])
    return Case(f"Conv-{id_}", opset, [node("Conv", ins, ["y"], **attrs)], {"x": x}, inits)


add(
    conv("3x3-pad1", [1, 3, 8, 8], (4, 3, 3, 3), kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    conv("no-kernel_shape-attr", [1, 3, 8, 8], (4, 3, 3, 3), pads=[1, 1, 1, 1]),
    conv("1x1", [1, 8, 5, 5], (16, 8, 1, 1)),
    conv("stride2-pad1", [1, 3, 9, 9], (8, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1]),
    # enough taps (C * 9 >= 256) for the direct convolution at stride 2, odd and even sizes
    conv("stride2-direct", [1, 32, 15, 18], (16, 32, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1]),
    conv("stride2-direct-asym", [2, 40, 12, 11], (9, 40, 3, 3), strides=[2, 2], pads=[0, 1, 1, 0]),
    conv("7x7-stride2-pad3", [1, 3, 20, 20], (8, 3, 7, 7), strides=[2, 2], pads=[3, 3, 3, 3]),
    conv("asym-pads", [1, 3, 8, 9], (4, 3, 3, 3), pads=[0, 1, 2, 1]),
    conv("rect-kernel", [1, 3, 8, 8], (4, 3, 1, 3), pads=[0, 1, 0, 1]),
    conv("dilation2", [1, 4, 10, 10], (6, 4, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2]),
    conv("dilation-stride-mixed", [1, 4, 11, 12], (6, 4, 3, 3), dilations=[2, 1],
         strides=[1, 2], pads=[1, 0, 2, 1]),
    conv("groups2", [1, 4, 7, 7], (6, 2, 3, 3), group=2, pads=[1, 1, 1, 1]),
    conv("groups4-dilation2", [1, 16, 12, 12], (32, 4, 3, 3), group=4, dilations=[2, 2]),
    conv("depthwise", [1, 8, 9, 9], (8, 1, 3, 3), group=8, pads=[1, 1, 1, 1]),
    conv("depthwise-stride2", [1, 8, 10, 10], (8, 1, 3, 3), group=8, strides=[2, 2],
         pads=[1, 1, 1, 1]),
    conv("depthwise-multiplier2", [1, 8, 9, 9], (16, 1, 3, 3), group=8, pads=[1, 1, 1, 1]),
    conv("depthwise-5x5", [1, 6, 11, 11], (6, 1, 5, 5), group=6, pads=[2, 2, 2, 2]),
    # 8 channels at a time on small maps (+ the 4 left over), at stride 1 and 2
    conv("depthwise-7x7-map", [1, 20, 7, 7], (20, 1, 3, 3), group=20, pads=[1, 1, 1, 1]),
    conv("depthwise-14-to-7", [1, 12, 14, 14], (12, 1, 3, 3), group=12, strides=[2, 2],
         pads=[0, 0, 1, 1]),
    conv("no-bias", [1, 3, 8, 8], (4, 3, 3, 3), b=False, pads=[1, 1, 1, 1]),
    conv("batch2", [2, 3, 8, 8], (4, 3, 3, 3), pads=[1, 1, 1, 1]),
    conv("auto_pad-SAME_UPPER-stride2", [1, 3, 8, 8], (4, 3, 3, 3), auto_pad="SAME_UPPER",
         strides=[2, 2]),
    conv("auto_pad-SAME_LOWER-stride2", [1, 3, 8, 8], (4, 3, 3, 3), auto_pad="SAME_LOWER",
         strides=[2, 2]),
    conv("auto_pad-SAME_UPPER-4x4", [1, 3, 7, 7], (4, 3, 4, 4), auto_pad="SAME_UPPER"),
    conv("auto_pad-VALID", [1, 3, 8, 8], (4, 3, 3, 3), auto_pad="VALID"),
    conv("1d", [1, 3, 10], (4, 3, 3), pads=[1, 1]),
    conv("1d-stride2-dilation2-groups", [1, 4, 17], (8, 2, 3), strides=[2], dilations=[2],
         group=2, pads=[2, 1]),
    conv("opset11", [1, 3, 8, 8], (4, 3, 3, 3), opset=11, pads=[1, 1, 1, 1]),
    conv("opset18", [1, 3, 8, 8], (4, 3, 3, 3), opset=18, pads=[1, 1, 1, 1], group=1,
         auto_pad="NOTSET", strides=[1, 1], dilations=[1, 1], kernel_shape=[3, 3]),
)


# --------------------------------------------------------------------------------------------
# ConvTranspose
# --------------------------------------------------------------------------------------------

def convt(id_, x, w, b=True, opset=13, **attrs):
    ins = ["x", "w"] + (["b"] if b else [])
    group = attrs.get("group", 1)
    inits = {"w": R(*w)}
    if b:
        inits["b"] = R(w[1] * group)
    return Case(f"ConvTranspose-{id_}", opset, [node("ConvTranspose", ins, ["y"], **attrs)],
                {"x": x}, inits)


add(
    convt("stride1", [1, 4, 5, 5], (4, 3, 3, 3)),
    convt("stride2", [1, 4, 5, 5], (4, 3, 3, 3), strides=[2, 2]),
    convt("stride2-pads1-outpad1", [1, 4, 5, 6], (4, 3, 3, 3), strides=[2, 2],
          pads=[1, 1, 1, 1], output_padding=[1, 1]),
    convt("k4-stride2-pads1", [1, 8, 4, 4], (8, 4, 4, 4), strides=[2, 2], pads=[1, 1, 1, 1]),
    convt("k2-stride2", [1, 8, 6, 6], (8, 4, 2, 2), strides=[2, 2], kernel_shape=[2, 2]),
    convt("asym-pads", [1, 4, 5, 5], (4, 3, 3, 3), strides=[2, 2], pads=[0, 1, 1, 0]),
    convt("groups2", [1, 4, 5, 5], (4, 3, 3, 3), group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
    convt("depthwise", [1, 6, 5, 5], (6, 1, 3, 3), group=6, strides=[2, 2], pads=[1, 1, 1, 1],
          output_padding=[1, 1]),
    convt("dilation2", [1, 4, 5, 5], (4, 3, 3, 3), dilations=[2, 2]),
    convt("no-bias", [1, 4, 5, 5], (4, 3, 3, 3), b=False, strides=[2, 2]),
    convt("1d", [1, 4, 7], (4, 2, 3), strides=[2], pads=[1, 1], output_padding=[1]),
    convt("opset11", [1, 4, 5, 5], (4, 3, 3, 3), opset=11, strides=[2, 2]),
)


# --------------------------------------------------------------------------------------------
# BatchNormalization (inference)
# --------------------------------------------------------------------------------------------

def bn(id_, x, opset=13, **attrs):
    c = x[1]
    return Case(f"BatchNormalization-{id_}", opset,
                [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], **attrs)],
                {"x": x}, {"s": R(c, kind="pos"), "b": R(c), "m": R(c), "v": R(c, kind="pos")})


add(
    bn("4d", [2, 3, 5, 5]),
    bn("4d-eps1e-3-momentum", [1, 8, 4, 4], epsilon=1e-3, momentum=0.9),
    bn("3d", [2, 4, 7]),
    bn("2d", [3, 6]),
    bn("opset9", [1, 3, 4, 4], opset=9),
    bn("opset15", [1, 3, 4, 4], opset=15),
    Case("BatchNormalization-after-Conv", 13,
         [node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
          node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
          node("Relu", ["bn"], ["y"])],
         {"x": [1, 3, 8, 8]},
         {"w": R(8, 3, 3, 3), "cb": R(8), "s": R(8, kind="pos"), "b": R(8), "m": R(8),
          "v": R(8, kind="pos")}),
    Case("BatchNormalization-after-ConvTranspose", 13,
         [node("ConvTranspose", ["x", "w", "cb"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1],
               output_padding=[1, 1]),
          node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])],
         {"x": [1, 4, 5, 5]},
         {"w": R(4, 6, 3, 3), "cb": R(6), "s": R(6, kind="pos"), "b": R(6), "m": R(6),
          "v": R(6, kind="pos")}),
    Case("BatchNormalization-Conv-shared-input", 13,   # the conv output has a second user
         [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
          node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
          node("Add", ["bn", "c"], ["y"])],
         {"x": [1, 3, 6, 6]},
         {"w": R(4, 3, 3, 3), "s": R(4, kind="pos"), "b": R(4), "m": R(4),
          "v": R(4, kind="pos")}),
)


# --------------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------------

def act(id_, op, opset=13, shape=(2, 3, 4, 5), kind="wide", **attrs):
    n, ins = unary(op, opset, shape, kind, **attrs)
    return Case(f"{op}-{id_}", opset, [n], ins)


add(
    act("4d", "Relu"),
    act("2d", "Relu", shape=(3, 7)),
    act("opset6", "Relu", opset=6),
    act("default-alpha", "LeakyRelu"),
    act("alpha0.1", "LeakyRelu", alpha=0.1),
    act("4d", "Sigmoid"),
    act("4d", "Tanh"),
    act("default", "HardSigmoid"),
    act("torch-alpha1_6", "HardSigmoid", alpha=1.0 / 6.0, beta=0.5),
    act("opset14", "HardSwish", opset=14),
    act("opset18", "HardSwish", opset=18),
    act("4d", "Identity", kind="normal"),
    act("1d", "Relu", shape=(17,)),
)


def prelu(id_, x, slope, opset=13, slope_input=False):
    inputs = {"x": In(x, "wide")}
    inits = {}
    if slope_input:
        inputs["s"] = In(list(slope))
    else:
        inits["s"] = R(*slope)
    return Case(f"PRelu-{id_}", opset, [node("PRelu", ["x", "s"], ["y"])], inputs, inits)


add(
    prelu("per-channel-C11", [2, 4, 3, 3], (4, 1, 1)),
    prelu("per-channel-1C11", [2, 4, 3, 3], (1, 4, 1, 1)),
    prelu("slope-1", [2, 4, 3, 3], (1,)),
    prelu("slope-111", [2, 4, 3, 3], (1, 1, 1)),
    prelu("slope-scalar", [2, 4, 3, 3], ()),
    prelu("2d-per-channel", [3, 5], (5,)),
    prelu("opset9", [1, 4, 3, 3], (4, 1, 1), opset=9),
    prelu("slope-as-input", [1, 4, 3, 3], (4, 1, 1), slope_input=True),
)


def clip(id_, opset, lo=None, hi=None, as_const=False, attrs=False):
    x = {"x": In([2, 3, 4, 5], "wide")}
    if attrs:   # opset 6: attributes
        kw = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        return Case(f"Clip-{id_}", opset, [node("Clip", ["x"], ["y"], **kw)], x)
    ins, nodes, inits = ["x"], [], {}
    for nm, v in (("lo", lo), ("hi", hi)):
        if v is None:
            ins.append("")        # an omitted optional input
            continue
        if as_const:
            nodes.append(C(nm, np.array(v, np.float32)))
        else:
            inits[nm] = np.array(v, np.float32)
        ins.append(nm)
    while ins[-1] == "":
        ins.pop()
    return Case(f"Clip-{id_}", opset, nodes + [node("Clip", ins, ["y"])], x, inits)


add(
    clip("opset6-attrs-relu6", 6, 0.0, 6.0, attrs=True),
    clip("opset6-attrs-min-only", 6, lo=-1.0, attrs=True),
    clip("opset6-attrs-max-only", 6, hi=0.5, attrs=True),
    clip("opset11-inputs-relu6", 11, 0.0, 6.0),
    clip("opset11-inputs-hardtanh", 11, -1.0, 1.0),
    clip("opset11-min-only", 11, lo=0.0),
    clip("opset11-max-only", 11, hi=1.5),
    clip("opset11-none", 11),
    clip("opset13-Constant-nodes", 13, 0.0, 6.0, as_const=True),
    clip("opset13-max-only", 13, hi=2.0),
    clip("opset18-initializers", 18, -1.0, 1.0),
)


# --------------------------------------------------------------------------------------------
# Elementwise binary ops with numpy broadcasting
# --------------------------------------------------------------------------------------------

BCAST = {
    # id: (A input/init spec, B input/init spec); "i:" graph input, "w:" initializer
    "same-shape": ("i", [2, 3, 4, 5], "i", [2, 3, 4, 5]),
    "scalar-init": ("i", [2, 3, 4, 5], "w", []),
    "scalar-init-left": ("w", [], "i", [2, 3, 4, 5]),
    "C11-init": ("i", [2, 3, 4, 5], "w", [3, 1, 1]),
    "1C11-init": ("i", [2, 3, 4, 5], "w", [1, 3, 1, 1]),
    "rank-mismatch-W": ("i", [2, 3, 4, 5], "i", [5]),
    "rank-mismatch-HW": ("i", [4, 5], "i", [2, 3, 4, 5]),
    "both-broadcast": ("i", [2, 1, 4, 1], "i", [1, 3, 1, 5]),
    "N1-vs-1N": ("i", [3, 1], "i", [1, 4]),
    "2d-row-init": ("i", [3, 6], "w", [6]),
}


def binary(op, bid, opset=13):
    ka, sa, kb, sb = BCAST[bid]
    kinds = {"Div": ("normal", "nonzero"), "Pow": ("pos", "unit")}.get(op, ("normal", "normal"))
    inputs, inits = {}, {}
    for nm, k, s, kind in (("a", ka, sa, kinds[0]), ("b", kb, sb, kinds[1])):
        if k == "i":
            inputs[nm] = In(s, kind)
        else:
            inits[nm] = R(*s, kind=kind)
    sfx = "" if opset == 13 else f"-opset{opset}"
    return Case(f"{op}-{bid}{sfx}", opset, [node(op, ["a", "b"], ["y"])], inputs, inits)


CORE_BCAST = ["same-shape", "scalar-init", "scalar-init-left", "C11-init", "rank-mismatch-W",
              "both-broadcast"]
for _op in ("Add", "Sub", "Mul", "Div", "Pow"):
    for _bid in BCAST if _op == "Add" else CORE_BCAST:   # every pattern once, on Add
        add(binary(_op, _bid))
add(
    binary("Add", "C11-init", opset=7),
    binary("Mul", "both-broadcast", opset=14),
    binary("Div", "scalar-init", opset=14),
    binary("Pow", "scalar-init", opset=15),
    Case("Pow-exponent-2", 13, [node("Pow", ["x", "e"], ["y"])], {"x": [2, 3, 4, 5]},
         {"e": f32(2.0).reshape(())}),
    Case("Pow-exponent-0.5", 13, [node("Pow", ["x", "e"], ["y"])],
         {"x": In([2, 3, 4, 5], "pos")}, {"e": f32(0.5).reshape(())}),
    Case("Pow-exponent-3-negative-base", 13, [node("Pow", ["x", "e"], ["y"])],
         {"x": [2, 3, 4, 5]}, {"e": f32(3.0).reshape(())}),
    Case("Pow-exponent-int64", 13, [node("Pow", ["x", "e"], ["y"])], {"x": [2, 3, 4, 5]},
         {"e": np.array(2, np.int64)}),
    Case("Add-same-input-twice", 13, [node("Add", ["x", "x"], ["y"])], {"x": [2, 3, 4, 5]}),
    Case("Mul-chain-SE-gate", 13,
         [node("GlobalAveragePool", ["x"], ["p"]), node("Sigmoid", ["p"], ["g"]),
          node("Mul", ["x", "g"], ["y"])], {"x": [1, 8, 5, 5]}),
)


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------

def pool(op, id_, x, opset=None, **attrs):
    opset = opset or {"MaxPool": 12, "AveragePool": 11}.get(op, 13)
    return Case(f"{op}-{id_}", opset, [node(op, ["x"], ["y"], **attrs)], {"x": x})


add(
    pool("MaxPool", "k2s2", [1, 3, 8, 8], kernel_shape=[2, 2], strides=[2, 2]),
    pool("MaxPool", "k3s2p1-resnet", [1, 4, 16, 16], kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1]),
    pool("MaxPool", "k3s1p1", [1, 3, 7, 7], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    pool("MaxPool", "asym-pads", [1, 3, 7, 8], kernel_shape=[3, 3], strides=[2, 2],
         pads=[0, 1, 1, 0]),
    pool("MaxPool", "ceil_mode", [1, 3, 9, 10], kernel_shape=[3, 3], strides=[2, 2],
         ceil_mode=1),
    pool("MaxPool", "ceil_mode-pads", [1, 3, 10, 11], kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1], ceil_mode=1),
    # ceil would add a window that starts in the right padding: it is dropped (as in torch)
    pool("MaxPool", "ceil_mode-last-window-dropped", [1, 2, 7, 7], kernel_shape=[2, 2],
         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    pool("MaxPool", "dilation2", [1, 3, 11, 11], kernel_shape=[3, 3], dilations=[2, 2]),
    pool("MaxPool", "dilation2-pads-ceil", [1, 3, 30, 31], kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], dilations=[2, 2], ceil_mode=1),
    pool("MaxPool", "1d", [1, 3, 11], kernel_shape=[3], strides=[2], pads=[1, 1]),
    pool("MaxPool", "opset10-ceil", [1, 3, 10, 10], opset=10, kernel_shape=[3, 3],
         strides=[2, 2], ceil_mode=1),
    pool("MaxPool", "opset8", [1, 3, 8, 8], opset=8, kernel_shape=[2, 2], strides=[2, 2]),
    pool("MaxPool", "opset18", [1, 3, 9, 9], opset=18, kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1], dilations=[1, 1], ceil_mode=0, storage_order=0),
    pool("MaxPool", "auto_pad-SAME_UPPER", [1, 3, 7, 7], kernel_shape=[3, 3], strides=[2, 2],
         auto_pad="SAME_UPPER"),
    pool("AveragePool", "k2s2", [1, 3, 8, 8], kernel_shape=[2, 2], strides=[2, 2]),
    pool("AveragePool", "k3s2p1-exclude-pad", [1, 3, 9, 9], kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
    pool("AveragePool", "k3s2p1-include-pad", [1, 3, 9, 9], kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
    pool("AveragePool", "asym-pads-include-pad", [1, 3, 8, 8], kernel_shape=[3, 3],
         pads=[0, 1, 2, 1], count_include_pad=1),
    pool("AveragePool", "ceil_mode", [1, 3, 9, 10], kernel_shape=[3, 3], strides=[2, 2],
         ceil_mode=1),
    pool("AveragePool", "ceil_mode-pads-exclude", [1, 3, 30, 31], kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=0),
    pool("AveragePool", "ceil_mode-pads-include", [1, 3, 30, 31], kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
    pool("AveragePool", "ceil_mode-k2-pads-include-window-dropped", [1, 2, 7, 7],
         kernel_shape=[2, 2],
         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
    pool("AveragePool", "k4s4-torch-avg_pool2d", [1, 4, 30, 30], kernel_shape=[4, 4],
         strides=[4, 4], pads=[0, 0, 0, 0], ceil_mode=0, count_include_pad=1),
    pool("AveragePool", "1d", [1, 3, 11], kernel_shape=[3], strides=[2], pads=[1, 1]),
    pool("AveragePool", "opset10-ceil", [1, 3, 10, 10], opset=10, kernel_shape=[3, 3],
         strides=[2, 2], ceil_mode=1),
    pool("AveragePool", "opset19", [1, 3, 9, 9], opset=19, kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1]),
    pool("GlobalAveragePool", "4d", [2, 8, 7, 7]),
    pool("GlobalAveragePool", "3d", [2, 8, 9]),
    pool("GlobalAveragePool", "1x1-input", [1, 16, 1, 1]),
    pool("GlobalMaxPool", "4d", [2, 8, 7, 7]),
    pool("GlobalMaxPool", "3d", [2, 8, 9]),
)


# --------------------------------------------------------------------------------------------
# Shape ops: Flatten, Reshape, Transpose, Concat, Split, Slice, Squeeze, Unsqueeze
# --------------------------------------------------------------------------------------------

for _ax in (0, 1, 2, 3, -1, -3):
    add(Case(f"Flatten-axis{_ax}", 13, [node("Flatten", ["x"], ["y"], axis=_ax)],
             {"x": [2, 3, 4, 5]}))
add(Case("Flatten-default-axis", 13, [node("Flatten", ["x"], ["y"])], {"x": [2, 3, 4, 5]}),
    Case("Flatten-opset11", 11, [node("Flatten", ["x"], ["y"], axis=1)], {"x": [1, 8, 1, 1]}))


def reshape(id_, x, shape, opset=13, **attrs):
    return Case(f"Reshape-{id_}", opset, [node("Reshape", ["x", "s"], ["y"], **attrs)],
                {"x": x}, {"s": i64(*shape)})


add(
    reshape("flat", [2, 3, 4, 5], [120]),
    reshape("0-and-minus1", [2, 3, 4, 5], [0, -1]),
    reshape("minus1-first", [2, 3, 4, 5], [-1, 20]),
    reshape("0-0-minus1", [2, 3, 4, 5], [0, 0, -1]),
    reshape("0-in-middle", [2, 3, 4, 5], [2, 0, 20]),
    reshape("split-dim", [2, 12, 5], [2, 3, 4, 5]),
    reshape("to-4d", [2, 48], [2, 3, 4, 4]),
    reshape("opset5", [2, 3, 4, 5], [0, -1], opset=5),
    reshape("opset14-allowzero0", [2, 3, 4, 5], [0, -1], opset=14, allowzero=0),
    # the dynamo exporter writes allowzero=1 (with no 0 in the shape)
    reshape("opset18-allowzero1-dynamo", [1, 16, 7, 7], [1, 16, 49], opset=18, allowzero=1),
    reshape("opset18-allowzero1-minus1", [1, 16, 1, 1], [1, -1], opset=18, allowzero=1),
)


def transpose(id_, x, perm=None, opset=13):
    kw = {} if perm is None else {"perm": perm}
    return Case(f"Transpose-{id_}", opset, [node("Transpose", ["x"], ["y"], **kw)], {"x": x})


add(
    transpose("default-perm-4d", [2, 3, 4, 5]),
    transpose("default-perm-2d", [3, 7]),
    transpose("NCHW-to-NHWC", [2, 3, 4, 5], [0, 2, 3, 1]),
    transpose("NHWC-to-NCHW", [2, 4, 5, 3], [0, 3, 1, 2]),
    transpose("3d-021", [2, 49, 16], [0, 2, 1]),
    transpose("2d-10", [6, 5], [1, 0]),
    transpose("identity-perm", [2, 3, 4], [0, 1, 2]),
    transpose("5d-shuffle", [1, 2, 3, 4, 5], [0, 2, 1, 3, 4]),
    transpose("opset1", [2, 3, 4], [1, 0, 2], opset=1),
)


def concat(id_, shapes, axis, opset=13, init_idx=()):
    names = [f"x{i}" for i in range(len(shapes))]
    inputs = {n: s for i, (n, s) in enumerate(zip(names, shapes)) if i not in init_idx}
    inits = {n: R(*s) for i, (n, s) in enumerate(zip(names, shapes)) if i in init_idx}
    return Case(f"Concat-{id_}", opset, [node("Concat", names, ["y"], axis=axis)], inputs,
                inits)


add(
    concat("axis1", [[1, 3, 4, 4], [1, 5, 4, 4]], 1),
    concat("axis-1-three", [[2, 3, 2], [2, 3, 5], [2, 3, 1]], -1),
    concat("axis-3", [[2, 3, 4, 5], [2, 2, 4, 5]], -3),
    concat("axis0", [[2, 3], [4, 3]], 0),
    concat("with-initializer", [[1, 4, 3, 3], [1, 2, 3, 3]], 1, init_idx=(1,)),
    concat("single-input", [[2, 3]], 1),
    # more inputs than any fixed-size table in the loader would hold (DenseNet-style concats)
    concat("100-inputs", [[1, 2, 3]] * 100, 1, init_idx=tuple(range(0, 100, 3))),
    concat("opset11", [[1, 3, 2, 2], [1, 3, 2, 2]], 1, opset=11),
)


def split(id_, opset, x, n_out, axis=None, split_attr=None, split_input=None,
          num_outputs=None):
    outs = [f"y{i}" for i in range(n_out)]
    kw = {}
    if axis is not None:
        kw["axis"] = axis
    if split_attr is not None:
        kw["split"] = split_attr
    if num_outputs is not None:
        kw["num_outputs"] = num_outputs
    ins, inits = ["x"], {}
    if split_input is not None:
        ins.append("s")
        inits["s"] = i64(*split_input)
    return Case(f"Split-{id_}", opset, [node("Split", ins, outs, **kw)], {"x": x}, inits,
                outputs=outs)


add(
    split("opset11-attr-split", 11, [1, 6, 4, 4], 2, axis=1, split_attr=[2, 4]),
    split("opset11-equal-default", 11, [1, 6, 4, 4], 3, axis=1),
    split("opset11-default-axis0", 11, [4, 3], 2),
    split("opset13-input-split", 13, [1, 6, 4, 4], 3, axis=1, split_input=[1, 2, 3]),
    split("opset13-equal-default", 13, [1, 16, 3, 3], 2, axis=1),
    split("opset13-negative-axis", 13, [2, 3, 8], 2, axis=-1, split_input=[5, 3]),
    split("opset18-num_outputs-even", 18, [1, 16, 15, 15], 2, axis=1, num_outputs=2),
    split("opset18-num_outputs-uneven", 18, [1, 8, 3], 3, axis=1, num_outputs=3),
    split("opset18-input-split", 18, [2, 7], 2, axis=1, split_input=[3, 4]),
)


def slice_(id_, x, starts, ends, axes=None, steps=None, opset=13):
    inputs = ["x", "st", "en"]
    inits = {"st": i64(*starts), "en": i64(*ends)}
    if axes is not None or steps is not None:
        inputs.append("ax" if axes is not None else "")
        if axes is not None:
            inits["ax"] = i64(*axes)
    if steps is not None:
        inputs.append("sp")
        inits["sp"] = i64(*steps)
    return Case(f"Slice-{id_}", opset, [node("Slice", inputs, ["y"])], {"x": x}, inits)


def slice_attr(id_, x, starts, ends, axes=None):
    kw = {"starts": starts, "ends": ends}
    if axes is not None:
        kw["axes"] = axes
    return Case(f"Slice-{id_}", 9, [node("Slice", ["x"], ["y"], **kw)], {"x": x})


add(
    slice_attr("opset9-attrs", [2, 6, 5, 5], [1], [4], [1]),
    slice_attr("opset9-attrs-no-axes", [6, 5], [1, 0], [5, 3]),
    slice_attr("opset9-attrs-negative", [2, 6, 5], [-3], [-1], [-1]),
    slice_attr("opset9-attrs-INT64_MAX", [2, 6, 5], [2], [INT64_MAX], [1]),
    slice_("opset10-no-steps", [2, 6, 5, 5], [1, 1], [4, 5], [1, 2], opset=10),
    slice_("opset10-steps2", [2, 6, 5, 5], [0], [6], [1], [2], opset=10),
    slice_("start-end", [2, 6, 5, 5], [1], [4], [1]),
    slice_("no-axes", [6, 5], [1, 0], [5, 3]),
    slice_("axes-omitted-steps-given", [6, 5], [1, 0], [6, 5], steps=[2, 2]),
    slice_("negative-starts-ends", [2, 6, 5], [-4], [-1], [1]),
    slice_("negative-axis", [2, 6, 5], [1], [4], [-1]),
    slice_("ends-INT64_MAX", [2, 16, 16, 16], [1], [INT64_MAX], [2]),
    slice_("ends-beyond-dim", [2, 6, 5], [2], [100], [1]),
    slice_("starts-below-0-clamped", [2, 6, 5], [-100], [3], [1]),
    slice_("steps2-two-axes-torch", [1, 16, 30, 30], [0, 1], [INT64_MAX, INT64_MAX], [2, 3],
           [2, 2]),
    slice_("steps3", [1, 3, 10, 10], [1], [10], [3], [3]),
    slice_("steps-minus1-reverse", [2, 6, 5], [-1], [INT64_MIN], [1], [-1]),
    slice_("steps-minus1-reverse-torch-ends", [2, 6, 5], [-1], [-INT64_MAX], [2], [-1]),
    slice_("steps-minus2-part", [2, 9, 5], [7], [1], [1], [-2]),
    slice_("empty-of-one-axis-kept", [2, 6, 5], [0], [1], [0]),
    slice_("opset11", [2, 6, 5], [1], [3], [1], opset=11),
    slice_("opset18", [2, 6, 5], [1], [INT64_MAX], [1], [1], opset=18),
)


def squeeze(id_, opset, x, axes=None, attr=None, op="Squeeze"):
    ins, inits, kw = ["x"], {}, {}
    if attr:
        if axes is not None:
            kw["axes"] = axes
    elif axes is not None:
        ins.append("ax")
        inits["ax"] = i64(*axes)
    return Case(f"{op}-{id_}", opset, [node(op, ins, ["y"], **kw)], {"x": x}, inits)


add(
    squeeze("opset11-attr", 11, [2, 1, 4, 1], [1], attr=True),
    squeeze("opset11-attr-two-negative", 11, [2, 1, 4, 1], [-1, 1], attr=True),
    squeeze("opset11-no-axes", 11, [1, 8, 1, 1], attr=True),
    squeeze("opset13-input", 13, [2, 1, 4, 1], [3]),
    squeeze("opset13-input-two", 13, [1, 8, 1, 1], [2, 3]),
    squeeze("opset13-negative", 13, [1, 8, 1, 1], [-1]),
    squeeze("opset13-no-axes", 13, [1, 8, 1, 1]),
    squeeze("opset18-input", 18, [1, 16, 1, 1], [3]),
    squeeze("opset11-attr", 11, [2, 4], [0], attr=True, op="Unsqueeze"),
    squeeze("opset11-attr-two", 11, [2, 4], [1, 3], attr=True, op="Unsqueeze"),
    squeeze("opset11-attr-negative", 11, [2, 16], [-1], attr=True, op="Unsqueeze"),
    squeeze("opset13-input", 13, [2, 16], [2, 3], op="Unsqueeze"),
    squeeze("opset13-negative", 13, [2, 16], [-1], op="Unsqueeze"),
    squeeze("opset13-unsorted", 13, [2, 4], [3, 0], op="Unsqueeze"),
    squeeze("opset18-input", 18, [1, 16], [-1], op="Unsqueeze"),
)


# --------------------------------------------------------------------------------------------
# Gemm and MatMul
# --------------------------------------------------------------------------------------------

def gemm(id_, c_shape=(5,), transA=0, transB=0, alpha=None, beta=None, opset=13,
         b_input=False, m=3, k=4, n=5):
    a = [k, m] if transA else [m, k]
    b = [n, k] if transB else [k, n]
    kw = {}
    if transA:
        kw["transA"] = 1
    if transB:
        kw["transB"] = 1
    if alpha is not None:
        kw["alpha"] = alpha
    if beta is not None:
        kw["beta"] = beta
    inputs = {"a": a}
    inits = {}
    if b_input:
        inputs["b"] = b
    else:
        inits["b"] = R(*b)
    ins = ["a", "b"]
    if c_shape is not None:
        inits["c"] = R(*c_shape)
        ins.append("c")
    return Case(f"Gemm-{id_}", opset, [node("Gemm", ins, ["y"], **kw)], inputs, inits)


add(
    gemm("C-N"),
    gemm("C-1N", (1, 5)),
    gemm("C-MN", (3, 5)),
    gemm("C-M1", (3, 1)),
    gemm("C-scalar", ()),
    gemm("C-1", (1,)),
    gemm("C-absent", None),
    gemm("transB-linear", transB=1),
    gemm("transA", transA=1),
    gemm("transA-transB", transA=1, transB=1, c_shape=(3, 5)),
    gemm("alpha-beta", alpha=0.5, beta=2.0),
    gemm("alpha-C-absent", None, alpha=1.5),
    gemm("beta0", beta=0.0),
    gemm("B-input", b_input=True),
    gemm("transB-B-input", transB=1, b_input=True),
    gemm("opset11", opset=11, transB=1),
    gemm("opset9", opset=9, transB=1),
    gemm("classifier-1x512x10", transB=1, m=1, k=512, n=10, c_shape=(10,)),
    gemm("batch8", transB=1, m=8, k=48, n=64, c_shape=(64,)),
)


def matmul(id_, a, b, b_init=False, opset=13):
    inputs = {"a": a}
    inits = {}
    if b_init:
        inits["b"] = R(*b)
    else:
        inputs["b"] = b
    return Case(f"MatMul-{id_}", opset, [node("MatMul", ["a", "b"], ["y"])], inputs, inits)


add(
    matmul("2d", [3, 4], [4, 5]),
    matmul("2d-init", [3, 4], [4, 5], b_init=True),
    matmul("3d-batched", [2, 3, 4], [2, 4, 5]),
    matmul("3d-x-2d-init-linear", [1, 49, 16], [16, 16], b_init=True),
    matmul("4d-batched", [2, 3, 4, 5], [2, 3, 5, 6]),
    matmul("4d-broadcast-batch", [2, 1, 3, 4], [3, 4, 5]),
    matmul("3d-broadcast-1", [1, 3, 4], [5, 4, 2]),
    matmul("2d-x-3d", [3, 4], [2, 4, 5]),
    matmul("1d-left", [4], [4, 5]),
    matmul("1d-right", [2, 3, 4], [4]),
    matmul("1d-left-batched", [4], [2, 4, 5]),
    matmul("attention-qkT", [1, 49, 16], [1, 16, 49]),
    matmul("odd-sizes", [7, 13], [13, 11]),
    matmul("opset9", [3, 4], [4, 5], opset=9),
)


# --------------------------------------------------------------------------------------------
# LayerNormalization (opset 17)
# --------------------------------------------------------------------------------------------

def layer_norm(id_, x, axis=-1, bias=True, eps=None):
    norm = x[axis:] if axis >= 0 else x[axis:]
    kw = {"axis": axis}
    if eps is not None:
        kw["epsilon"] = eps
    ins = ["x", "s"] + (["b"] if bias else [])
    inits = {"s": R(*norm)}
    if bias:
        inits["b"] = R(*norm)
    return Case(f"LayerNormalization-{id_}", 17, [node("LayerNormalization", ins, ["y"], **kw)], {"x": In(x, "wide")},
                inits)


add(
    layer_norm("last-axis", [2, 5, 32]),
    layer_norm("two-axes", [2, 3, 4, 5], axis=2),
    layer_norm("axis1-no-bias-eps", [3, 4, 6], axis=1, bias=False, eps=1e-3),
    # the Mean and InvStdDev outputs (training exports use them), one of them omitted
    Case("LayerNormalization-stats", 17, [node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"], axis=1)],
         {"x": In([2, 3, 4], "wide")}, {"s": R(3, 4), "b": R(3, 4)}, outputs=["y", "mean", "inv"]),
    Case("LayerNormalization-inv-only", 17, [node("LayerNormalization", ["x", "s"], ["y", "", "inv"], axis=-2)],
         {"x": In([2, 3, 4], "wide")}, {"s": R(3, 4)}, outputs=["y", "inv"]),
)


def instance_norm(id_, x, opset=6, eps=None):
    kw = {} if eps is None else {"epsilon": eps}
    return Case(f"InstanceNormalization-{id_}", opset, [node("InstanceNormalization", ["x", "s", "b"], ["y"], **kw)],
                {"x": In(x, "wide")}, {"s": R(x[1]), "b": R(x[1])})


add(
    instance_norm("2d", [2, 3, 5, 7]),
    instance_norm("1d-eps", [1, 4, 9], eps=1e-2),
    instance_norm("3d", [1, 2, 3, 4, 5]),
)


# --------------------------------------------------------------------------------------------
# Softmax
# --------------------------------------------------------------------------------------------

def softmax(id_, x, opset, axis=None, op="Softmax"):
    kw = {} if axis is None else {"axis": axis}
    return Case(f"{op}-{id_}", opset, [node(op, ["x"], ["y"], **kw)],
                {"x": In(x, "wide")})


add(
    softmax("opset11-axis1-3d-flattening", [2, 3, 4], 11, 1),
    softmax("opset11-default-axis-3d", [2, 3, 4], 11),
    softmax("opset11-axis1-4d-flattening", [2, 3, 4, 5], 11, 1),
    softmax("opset11-axis2-3d", [2, 49, 49], 11, 2),
    softmax("opset11-axis-1-2d", [2, 10], 11, -1),
    softmax("opset13-axis-1", [2, 3, 4], 13, -1),
    softmax("opset13-axis1-3d", [2, 3, 4], 13, 1),
    softmax("opset13-axis1-4d", [2, 3, 4, 5], 13, 1),
    softmax("opset13-default-axis", [2, 3, 4], 13),
    softmax("opset13-axis1-2d-classifier", [1, 10], 13, 1),
    softmax("opset13-axis0", [3, 4], 13, 0),
    softmax("opset18-axis-1", [1, 49, 49], 18, -1),
    softmax("opset11-axis1-3d-flattening", [2, 3, 4], 11, 1, op="Hardmax"),
    softmax("opset13-axis1-3d", [2, 3, 4], 13, 1, op="Hardmax"),
    softmax("opset13-default-axis", [2, 5, 7], 13, op="Hardmax"),
)


# --------------------------------------------------------------------------------------------
# Identity, Dropout, Constant
# --------------------------------------------------------------------------------------------

add(
    Case("Identity-chain", 13, [node("Identity", ["x"], ["t"]), node("Relu", ["t"], ["y"])],
         {"x": [2, 3]}),
    Case("Identity-of-initializer", 13,
         [node("Identity", ["w"], ["t"]), node("Add", ["x", "t"], ["y"])], {"x": [2, 3]},
         {"w": R(2, 3)}),
    Case("Dropout-opset10-attr-ratio", 10, [node("Dropout", ["x"], ["y"], ratio=0.5)],
         {"x": [2, 3, 4]}),
    Case("Dropout-opset12-ratio-input", 12, [node("Dropout", ["x", "r"], ["y"])],
         {"x": [2, 3, 4]}, {"r": np.array(0.5, np.float32)}),
    Case("Dropout-opset13-ratio-training_mode-false", 13,
         [node("Dropout", ["x", "r", "t"], ["y"])], {"x": [2, 3, 4]},
         {"r": np.array(0.3, np.float32), "t": np.array(False)}),
    Case("Dropout-opset13-no-ratio", 13, [node("Dropout", ["x"], ["y"])], {"x": [2, 3, 4]}),
    Case("Constant-value-tensor", 13,
         [node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(
             np.linspace(-1, 1, 3, dtype=np.float32).reshape(3, 1, 1), "c")),
          node("Add", ["x", "c"], ["y"])], {"x": [1, 3, 2, 2]}),
    Case("Constant-value_float", 13,
         [node("Constant", [], ["c"], value_float=2.5), node("Mul", ["x", "c"], ["y"])],
         {"x": [2, 3]}),
    Case("Constant-value_floats", 13,
         [node("Constant", [], ["c"], value_floats=[1.0, -2.0, 0.5]),
          node("Add", ["x", "c"], ["y"])], {"x": [2, 3]}),
    Case("Constant-value_ints-as-shape", 13,
         [node("Constant", [], ["s"], value_ints=[0, -1]), node("Reshape", ["x", "s"], ["y"])],
         {"x": [2, 3, 4]}),
    Case("Constant-value_int-as-axes", 13,
         [node("Constant", [], ["a"], value_ints=[1]), node("Unsqueeze", ["x", "a"], ["y"])],
         {"x": [2, 3]}),
    Case("Constant-opset9-value", 9,
         [node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(f32(0.5), "c")),
          node("Mul", ["x", "c"], ["y"])], {"x": [2, 3]}),
)


# --------------------------------------------------------------------------------------------
# Pad
# --------------------------------------------------------------------------------------------

def pad(id_, opset, x, pads, mode=None, value=None, axes=None):
    kw = {} if mode is None else {"mode": mode}
    if opset < 11:
        kw["pads"] = pads
        if value is not None:
            kw["value"] = value
        return Case(f"Pad-{id_}", opset, [node("Pad", ["x"], ["y"], **kw)], {"x": x})
    ins, inits = ["x", "p"], {"p": i64(*pads)}
    if value is not None:
        ins.append("v")
        inits["v"] = np.array(value, np.float32)
    if axes is not None:
        if value is None:
            ins.append("")
        ins.append("ax")
        inits["ax"] = i64(*axes)
    return Case(f"Pad-{id_}", opset, [node("Pad", ins, ["y"], **kw)], {"x": x}, inits)


add(
    pad("opset2-attr-constant", 2, [1, 3, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1], value=1.5),
    pad("opset2-attr-default-mode", 2, [1, 3, 4, 5], [0, 0, 1, 1, 0, 0, 1, 1]),
    pad("opset2-attr-reflect", 2, [1, 3, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1], mode="reflect"),
    pad("opset2-attr-edge", 2, [1, 3, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1], mode="edge"),
    pad("opset11-input-constant-value", 11, [1, 3, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1],
        value=-0.5),
    pad("opset11-input-no-value", 11, [1, 3, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1]),
    pad("opset11-torch-F.pad", 11, [1, 16, 32, 32], [0, 0, 1, 1, 0, 0, 1, 2],
        mode="constant"),
    pad("opset13-reflect", 13, [1, 3, 5, 6], [0, 0, 2, 1, 0, 0, 1, 2], mode="reflect"),
    pad("opset13-edge", 13, [1, 3, 5, 6], [0, 0, 2, 1, 0, 0, 1, 2], mode="edge"),
    pad("opset13-negative-crop", 13, [1, 3, 6, 7], [0, 0, -1, -2, 0, 0, -2, -1]),
    pad("opset13-mixed-sign", 13, [1, 3, 6, 7], [0, 0, 2, -1, 0, 0, -2, 1], value=3.0),
    pad("opset13-channel-pad", 13, [1, 3, 4, 4], [0, 1, 0, 0, 0, 2, 0, 0]),
    pad("opset13-3d-reflect", 13, [2, 3, 8], [0, 0, 3, 0, 0, 2], mode="reflect"),
    pad("opset18-axes", 18, [1, 3, 4, 5], [1, 2, 2, 1], axes=[2, 3]),
    pad("opset18-negative-axes", 18, [1, 3, 4, 5], [1, 0], axes=[-1], value=0.25),
)


# --------------------------------------------------------------------------------------------
# ReduceMean
# --------------------------------------------------------------------------------------------

def rmean(id_, opset, x, axes=None, keepdims=None, noop=None, op="ReduceMean"):
    kw = {}
    if keepdims is not None:
        kw["keepdims"] = keepdims
    if noop is not None:
        kw["noop_with_empty_axes"] = noop
    ins, inits = ["x"], {}
    if axes is not None:
        if opset < 18:
            kw["axes"] = axes
        else:
            ins.append("ax")
            inits["ax"] = i64(*axes)
    return Case(f"{op}-{id_}", opset, [node(op, ins, ["y"], **kw)], {"x": x}, inits)


add(
    rmean("opset13-axes23-keepdims", 13, [2, 3, 4, 5], [2, 3], 1),
    rmean("opset13-axes23-default-keepdims", 13, [2, 3, 4, 5], [2, 3]),
    rmean("opset13-axis1-keepdims0", 13, [2, 49, 16], [1], 0),
    rmean("opset13-negative-axes", 13, [2, 3, 4, 5], [-1, -2], 1),
    rmean("opset13-no-axes-all", 13, [2, 3, 4, 5], keepdims=1),
    rmean("opset11-axes23-keepdims0", 11, [2, 3, 4, 5], [2, 3], 0),
    rmean("opset18-input-axes23", 18, [2, 3, 4, 5], [2, 3], 1),
    rmean("opset18-input-axes-keepdims0", 18, [2, 49, 16], [1], 0),
    rmean("opset18-input-negative-axes", 18, [2, 3, 4, 5], [-1, -2], 1),
    rmean("opset18-no-axes-all", 18, [2, 3, 4, 5], keepdims=1),
    rmean("opset18-no-axes-noop", 18, [2, 3, 4, 5], keepdims=1, noop=1),
    rmean("opset18-noop0-explicit", 18, [2, 3, 4, 5], [1], keepdims=1, noop=0),
    # the dynamo exporter writes global max pool as ReduceMax over the last two axes
    rmean("opset18-dynamo-global-max", 18, [1, 16, 30, 30], [-2, -1], 1, op="ReduceMax"),
    rmean("opset13-attr-axes", 13, [2, 3, 4, 5], [2, 3], 1, op="ReduceMax"),
    # ReduceLogSum: reduce_sum then log (positive inputs, so that the log is defined)
    rmean("opset13-attr-axes", 13, In([2, 3, 4, 5], "pos"), [1, 3], 0, op="ReduceLogSum"),
    rmean("opset18-input-axes", 18, In([2, 3, 4, 5], "pos"), [2], 1, op="ReduceLogSum"),
    rmean("opset18-no-axes-all", 18, In([3, 4], "pos"), keepdims=0, op="ReduceLogSum"),
)


# --------------------------------------------------------------------------------------------
# Resize
# --------------------------------------------------------------------------------------------

def resize(id_, opset, x, scales=None, sizes=None, roi_style="empty-name", **attrs):
    """roi_style: 'empty-name' (opset 13+ '' inputs) or 'empty-tensor' (opset 11 style,
    what the TorchScript exporter writes)."""
    inits = {}
    if opset == 10:
        inits["sc"] = f32(*scales)
        return Case(f"Resize-{id_}", opset, [node("Resize", ["x", "sc"], ["y"], **attrs)],
                    {"x": x}, inits)
    empty = roi_style == "empty-tensor" or opset == 11
    if empty:
        inits["roi"] = np.zeros([0], np.float32)
    ins = ["x", "roi" if empty else ""]
    if scales is not None:
        inits["sc"] = f32(*scales)
        ins.append("sc")
    else:
        if empty:
            inits["sc"] = np.zeros([0], np.float32)
            ins.append("sc")
        else:
            ins.append("")
        inits["sz"] = i64(*sizes)
        ins.append("sz")
    return Case(f"Resize-{id_}", opset, [node("Resize", ins, ["y"], **attrs)], {"x": x}, inits)


X_UP = [1, 2, 5, 7]      # odd sizes, so rounding and coordinate modes differ
X_DOWN = [1, 2, 9, 12]
add(
    resize("opset10-nearest-x2", 10, [1, 3, 4, 5], [1, 1, 2, 2], mode="nearest"),
    resize("opset10-linear-x2", 10, [1, 3, 4, 5], [1, 1, 2, 2], mode="linear"),
    resize("opset10-nearest-x1.5", 10, X_UP, [1, 1, 1.5, 1.5], mode="nearest"),
    resize("opset11-torch-nearest-scales", 11, [1, 3, 4, 5], [1, 1, 2, 2], mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    resize("opset11-torch-bilinear-sizes", 11, X_UP, sizes=[1, 2, 10, 14], mode="linear",
           coordinate_transformation_mode="pytorch_half_pixel"),
    resize("opset11-torch-bilinear-align_corners", 11, X_UP, sizes=[1, 2, 10, 14],
           mode="linear", coordinate_transformation_mode="align_corners"),
    resize("opset13-torch-nearest-scales", 13, [1, 3, 4, 5], [1, 1, 2, 2], mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    resize("opset13-roi-empty-tensor", 13, [1, 3, 4, 5], [1, 1, 2, 2],
           roi_style="empty-tensor", mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    resize("opset13-default-attrs-scales", 13, X_UP, [1, 1, 2, 2]),
    resize("opset18-dynamo-nearest", 18, [1, 16, 15, 15], [1, 1, 2, 2], mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor",
           antialias=0, exclude_outside=0, extrapolation_value=0.0, cubic_coeff_a=-0.75,
           keep_aspect_ratio_policy="stretch"),
    resize("opset18-dynamo-bilinear", 18, [1, 16, 15, 15], sizes=[1, 16, 30, 30],
           mode="linear", coordinate_transformation_mode="half_pixel", nearest_mode="floor",
           antialias=0, keep_aspect_ratio_policy="stretch"),
    resize("opset18-dynamo-bilinear-align_corners", 18, [1, 16, 15, 15],
           sizes=[1, 16, 30, 30], mode="linear", coordinate_transformation_mode="align_corners"),
)
for _nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
    add(resize(f"opset13-nearest-{_nm}-asymmetric-up", 13, X_UP, sizes=[1, 2, 8, 11],
               mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode=_nm),
        resize(f"opset13-nearest-{_nm}-half_pixel-down", 13, X_DOWN, sizes=[1, 2, 6, 5],
               mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode=_nm),
        resize(f"opset11-nearest-{_nm}-scales1.5", 11, X_UP, [1, 1, 1.5, 1.5],
               mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode=_nm))
for _ct in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"):
    add(resize(f"opset13-linear-{_ct}-up-sizes", 13, X_UP, sizes=[1, 2, 8, 11], mode="linear",
               coordinate_transformation_mode=_ct),
        resize(f"opset13-linear-{_ct}-down-sizes", 13, X_DOWN, sizes=[1, 2, 6, 5],
               mode="linear", coordinate_transformation_mode=_ct),
        resize(f"opset13-linear-{_ct}-scales2", 13, X_UP, [1, 1, 2, 2], mode="linear",
               coordinate_transformation_mode=_ct),
        resize(f"opset18-linear-{_ct}-sizes", 18, X_UP, sizes=[1, 2, 11, 8], mode="linear",
               coordinate_transformation_mode=_ct))
add(resize("opset13-linear-pytorch_half_pixel-to-1", 13, [1, 2, 4, 5], sizes=[1, 2, 1, 3],
           mode="linear", coordinate_transformation_mode="pytorch_half_pixel"))


# --------------------------------------------------------------------------------------------
# Shape arithmetic the exporters emit; the compiler folds it to constants
# --------------------------------------------------------------------------------------------

def flatten_via_shape(opset, unsqueeze_attr):
    uq = (node("Unsqueeze", ["g"], ["u"], axes=[0]) if unsqueeze_attr
          else node("Unsqueeze", ["g", "ax0"], ["u"]))
    nodes = [node("Shape", ["x"], ["s"]), C("i0", np.array(0, np.int64)),
             node("Gather", ["s", "i0"], ["g"], axis=0)]
    if not unsqueeze_attr:
        nodes.append(C("ax0", i64(0)))
    nodes += [uq, C("m1", i64(-1)), node("Concat", ["u", "m1"], ["shape"], axis=0),
              node("Reshape", ["x", "shape"], ["y"])]
    return nodes


add(
    Case("shape-Shape-Gather-Unsqueeze-Concat-Reshape-opset11", 11, flatten_via_shape(11, True),
         {"x": [2, 3, 4, 5]}),
    Case("shape-Shape-Gather-Unsqueeze-Concat-Reshape-opset13", 13,
         flatten_via_shape(13, False), {"x": [2, 3, 4, 5]}),
    Case("shape-Shape-start-end-opset15", 15,
         [node("Shape", ["x"], ["s"], start=0, end=2), C("m1", i64(-1)),
          node("Concat", ["s", "m1"], ["shape"], axis=0), node("Reshape", ["x", "shape"], ["y"])],
         {"x": [2, 3, 4, 5]}),
    Case("shape-Shape-negative-start-opset15", 15,
         [node("Shape", ["x"], ["s"], start=-2), C("m1", i64(-1)),
          node("Concat", ["m1", "s"], ["shape"], axis=0),
          node("Reshape", ["x", "shape"], ["t"]), node("Relu", ["t"], ["y"])],
         {"x": [1, 3, 4, 5]}),
    # F.interpolate(size=...) in TorchScript opset 11/13: sizes = Concat(Shape(x)[0:2], [H,W])
    Case("shape-Resize-sizes-from-Shape-Slice-Concat-opset13", 13,
         [node("Shape", ["x"], ["s"]), C("z", i64(0)), C("two", i64(2)),
          node("Slice", ["s", "z", "two", "z"], ["nc"]), C("hw", i64(10, 14)),
          node("Concat", ["nc", "hw"], ["sz"], axis=0),
          node("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
               coordinate_transformation_mode="half_pixel")],
         {"x": [1, 2, 5, 7]}),
    # a scale factor through Cast: sizes = Cast(Cast(Shape(x)[2:], float) * 2, int64)
    Case("shape-Cast-float-Mul-Cast-int64-Resize-opset13", 13,
         [node("Shape", ["x"], ["s"]), C("two", i64(2)), C("four", i64(4)), C("z", i64(0)),
          node("Slice", ["s", "two", "four", "z"], ["hw"]),
          node("Cast", ["hw"], ["hwf"], to=onnx.TensorProto.FLOAT), C("k", f32(2.0)),
          node("Mul", ["hwf", "k"], ["hw2f"]),
          node("Cast", ["hw2f"], ["hw2"], to=onnx.TensorProto.INT64),
          node("Slice", ["s", "z", "two", "z"], ["nc"]),
          node("Concat", ["nc", "hw2"], ["sz"], axis=0),
          node("Resize", ["x", "", "", "sz"], ["y"], mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
         {"x": [1, 3, 4, 5]}),
    # torch.chunk in TorchScript: split points from Shape -> Gather -> Add -> Div -> Mul
    Case("shape-chunk-Gather-Add-Div-Mul-Slice-opset13", 13,
         [node("Shape", ["x"], ["s"]), C("one", i64(1)),
          node("Gather", ["s", "one"], ["c"], axis=0), node("Add", ["c", "one"], ["c1"]),
          C("two", i64(2)), node("Div", ["c1", "two"], ["half"]),
          node("Mul", ["half", "one"], ["e0"]), C("z", i64(0)),
          node("Slice", ["x", "z", "e0", "one"], ["y0"]),
          node("Mul", ["half", "two"], ["e1"]),
          node("Slice", ["x", "e0", "e1", "one"], ["y1"])],
         {"x": [1, 16, 5, 5]}, outputs=["y0", "y1"]),
    # F.pad in TorchScript: the pads come from ConstantOfShape/Concat/Reshape/Slice(-1)/
    # Transpose/Reshape/Cast
    Case("shape-torch-F.pad-ConstantOfShape-chain-opset13", 13,
         [C("n4", i64(4)), C("p", i64(1, 2, 1, 1)),
          node("ConstantOfShape", ["n4"], ["zeros"], value=onnx.numpy_helper.from_array(
              i64(0), "v")),
          node("Concat", ["p", "zeros"], ["cat"], axis=0), C("rs", i64(-1, 2)),
          node("Reshape", ["cat", "rs"], ["pairs"]), C("st", i64(-1)), C("en", i64(-INT64_MAX)),
          C("ax", i64(0)), C("sp", i64(-1)),
          node("Slice", ["pairs", "st", "en", "ax", "sp"], ["rev"]),
          node("Transpose", ["rev"], ["tr"], perm=[1, 0]), C("m1", i64(-1)),
          node("Reshape", ["tr", "m1"], ["flat"]),
          node("Cast", ["flat"], ["pads"], to=onnx.TensorProto.INT64),
          node("Pad", ["x", "pads", ""], ["y"], mode="constant")],
         {"x": [1, 3, 6, 6]}),
    Case("shape-Cast-float-to-float-data", 13,
         [node("Cast", ["x"], ["c"], to=onnx.TensorProto.FLOAT), node("Relu", ["c"], ["y"])],
         {"x": [2, 3]}),
    Case("shape-ConstantOfShape-ones-Add-opset13", 13,
         [C("shp", i64(1, 3, 1, 1)),
          node("ConstantOfShape", ["shp"], ["ones"], value=onnx.numpy_helper.from_array(
              f32(1.0), "v")),
          node("Add", ["x", "ones"], ["y"])],
         {"x": [1, 3, 4, 4]}),
)


# --------------------------------------------------------------------------------------------
# A symbolic dim, fixed with --dim
# --------------------------------------------------------------------------------------------

add(
    Case("symbolic-batch-dim-batch3", 13,
         flatten_via_shape(13, False)[:-1]
         + [node("Reshape", ["x", "shape"], ["f"]), node("MatMul", ["f", "w"], ["y"])],
         {"x": In(["batch", 4, 5])}, {"w": R(20, 3)}, dims={"batch": 3},
         output_shapes={"y": ["batch", 3]}),
    Case("symbolic-batch-conv-gap-gemm-batch2", 13,
         [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
          node("Relu", ["c"], ["r"]), node("GlobalAveragePool", ["r"], ["p"]),
          node("Flatten", ["p"], ["f"], axis=1),
          node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)],
         {"x": In(["batch", 3, 8, 8])},
         {"w": R(8, 3, 3, 3), "b": R(8), "fw": R(10, 8), "fb": R(10)}, dims={"batch": 2},
         output_shapes={"y": ["batch", 10]}),
    Case("symbolic-two-dims-H-W", 13,
         [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
          node("GlobalMaxPool", ["c"], ["y"])],
         {"x": In([1, 3, "height", "width"])}, {"w": R(4, 3, 3, 3)},
         dims={"height": 9, "width": 6}, output_shapes={"y": [1, 4, 1, 1]}),
)


# --------------------------------------------------------------------------------------------

_ids = [c.id for c in CASES]
assert len(_ids) == len(set(_ids)), sorted({i for i in _ids if _ids.count(i) > 1})


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_op(case: Case, tmp_path):
    model, inputs, ref = case.build()
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    so = tl.compile(path, tmp_path / "build", dims=case.dims)
    got = tl.run(so, inputs, tmp_path / "run")
    tl.assert_outputs_close(got, ref)
