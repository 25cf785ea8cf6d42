#!/usr/bin/env python3
"""The malformed-model corpus: hostile, broken and over-the-limit ONNX models, each with the error
cuvil-compile must give (a substring of its one-line message). tests/python/test_malformed.py
compiles every case and checks the message, the exit status (1, never a signal) and that nothing
is left behind; fuzz/make_seeds.py feeds the models to the fuzzers as seeds.

A case is built by a function here, so the corpus is made by this script, not stored:
    CASES: name -> Case(model bytes, expect, files to put beside the model, extra arguments)

    python tests/malformed/make_corpus.py OUT_DIR    # writes OUT_DIR/<name>.onnx (+ files)
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T = TensorProto
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@dataclass
class Case:
    data: bytes
    expect: str                      # a substring of cuvil-compile's message
    files: dict = field(default_factory=dict)   # name -> bytes | "fifo" | ("symlink", target)
    args: list = field(default_factory=list)    # extra cuvil-compile arguments


# ---- building blocks -----------------------------------------------------------------------

def vi(name, shape, et=T.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def model(nodes, inputs, outputs, inits=(), opset=13, ir=8, value_info=(), opsets=None) -> onnx.ModelProto:
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits),
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=opsets or [helper.make_opsetid("", opset)], producer_name="malformed")
    m.ir_version = ir
    return m


def relu_model(**kw) -> onnx.ModelProto:
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])], **kw)


def b(m) -> bytes:
    return m if isinstance(m, bytes) else m.SerializeToString()


def const_i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def const_f32(name, values):
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


# A protobuf wire encoder for what onnx's Python API will not build (nesting beyond its
# recursion limit).
def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_bytes(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_varint(num: int, v: int) -> bytes:
    return varint(num << 3) + varint(v)


def deep_sequence_type(depth: int) -> bytes:
    """A ValueInfoProto 'x' whose type is sequence(sequence(...(tensor float)))."""
    t = field_bytes(1, field_varint(1, T.FLOAT))                 # TypeProto.tensor_type{elem_type}
    for _ in range(depth):
        t = field_bytes(4, field_bytes(1, t))                     # TypeProto.sequence_type{elem_type}
    return field_bytes(1, b"x") + field_bytes(2, t)              # ValueInfoProto{name, type}


def deep_if(depth: int) -> bytes:
    """A model whose graph holds an If whose then_branch holds an If ... `depth` deep."""
    out_vi = vi("y", [1]).SerializeToString()
    g = field_bytes(1, helper.make_node("Identity", ["c"], ["y"]).SerializeToString()) + field_bytes(12, out_vi)
    for _ in range(depth):
        attr = field_bytes(1, b"then_branch") + field_varint(20, 5) + field_bytes(6, g)   # AttributeProto{name,type=GRAPH,g}
        node = field_bytes(1, b"c") + field_bytes(2, b"y") + field_bytes(4, b"If") + field_bytes(5, attr)
        g = field_bytes(1, node) + field_bytes(12, out_vi)
    g += field_bytes(11, vi("c", [1], T.BOOL).SerializeToString())
    opset = field_bytes(1, b"") + field_varint(2, 13)
    return field_varint(1, 8) + field_bytes(7, g) + field_bytes(8, opset)


def with_external(loc_entries, dims=(4,)):
    """Relu(x) + w where w is external data described by loc_entries (key, value) pairs."""
    w = TensorProto()
    w.name = "w"
    w.data_type = T.FLOAT
    w.dims.extend(dims)
    w.data_location = TensorProto.EXTERNAL
    for k, v in loc_entries:
        e = w.external_data.add()
        e.key, e.value = k, v
    return model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", list(dims))], [vi("y", list(dims))], [w])


# ---- the cases -------------------------------------------------------------------------------

def cases() -> dict:
    c: dict[str, Case] = {}
    good = relu_model()
    gb = b(good)

    # the file is not (a whole) ONNX model
    c["truncated"] = Case(gb[: len(gb) // 2], "not a valid ONNX model")
    c["empty-file"] = Case(b"", "not an ONNX model (no graph)")
    c["text-file"] = Case(b"this is not an ONNX model\n", "not a valid ONNX model")
    m = relu_model()
    m.ClearField("ir_version")
    c["no-ir-version"] = Case(b(m), "no ir_version")
    c["ir-version-999"] = Case(b(relu_model(ir=999)), "ir_version 999 is newer than this Cuvil knows")
    c["opset-99"] = Case(b(relu_model(opset=99)), "opset 99 of the ONNX domain; this Cuvil knows opsets up to")
    c["opset-0"] = Case(b(relu_model(opset=0)), "opset 0 of the ONNX domain, which does not exist")
    c["opset-imported-twice"] = Case(
        b(relu_model(opsets=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx", 14)])),
        "imports the opset of domain 'ai.onnx' twice")
    c["no-default-opset"] = Case(b(relu_model(opsets=[helper.make_opsetid("com.example", 1)])),
                                 "imports no opset for the default ONNX domain")

    # nesting: protobuf-c would recurse without bound (stack overflow)
    seq = field_varint(1, 8) + field_bytes(7, field_bytes(11, deep_sequence_type(5000)) + field_bytes(12, vi("y", [1]).SerializeToString())) \
        + field_bytes(8, field_bytes(1, b"") + field_varint(2, 13))
    c["deep-sequence-type-5000"] = Case(seq, "protobuf messages are nested more than 64 deep")
    c["deep-if-3000"] = Case(deep_if(3000), "graphs are nested more than 8 deep")
    c["deep-if-20"] = Case(deep_if(20), "graphs are nested more than 8 deep")
    # If: a branch missing, a branch output that names nothing, a branch with inputs
    br = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "br", [], [vi("t", [2])])
    ifm = lambda **a: model([helper.make_node("If", ["c"], ["y"], name="the_if", **a)],   # noqa: E731
                            [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2])])
    c["if-no-else"] = Case(b(ifm(then_branch=br)), "required attribute 'else_branch' is missing")
    ghost = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "gh", [], [vi("nowhere", [2])])
    c["if-output-names-nothing"] = Case(b(ifm(then_branch=br, else_branch=ghost)),
                                        "output 'nowhere' of its else_branch is not a value")
    within = helper.make_graph([helper.make_node("Neg", ["x"], ["u"])], "wi", [vi("z", [2])], [vi("u", [2])])
    c["if-branch-with-inputs"] = Case(b(ifm(then_branch=within, else_branch=br)), "an If's branches take none")
    # more outputs than the node has (2 against 1: room for them once overran the list)
    many = helper.make_graph([helper.make_node("Neg", ["x"], [f"m{i}"]) for i in range(2)], "many", [],
                             [vi(f"m{i}", [2]) for i in range(2)])
    c["if-else-more-outputs"] = Case(b(ifm(then_branch=br, else_branch=many)), "its else_branch has 2 outputs, the node 1")
    c["if-then-more-outputs"] = Case(b(ifm(then_branch=many, else_branch=br)), "its then_branch has 2 outputs, the node 1")
    # Loop and Scan: bodies whose inputs or outputs do not match the node, counts out of range
    lbody = lambda nodes, ins, outs: helper.make_graph(nodes, "lb", ins, outs)   # noqa: E731
    loopm = lambda ins, body, outs=("y",), **a: model(   # noqa: E731
        [helper.make_node("Loop", list(ins), list(outs), name="the_loop", body=body, **a)],
        [vi("M", [], T.INT64), vi("c", [], T.BOOL), vi("x", [2])], [vi(o, [2]) for o in outs])
    ok_body = lbody([helper.make_node("Neg", ["s"], ["s2"])], [vi("i", [], T.INT64), vi("cc", [], T.BOOL), vi("s", [2])],
                    [vi("cc", [], T.BOOL), vi("s2", [2])])
    c["loop-body-too-few-inputs"] = Case(b(loopm(["M", "c", "x"], lbody(
        [helper.make_node("Neg", ["x"], ["s2"])], [vi("i", [], T.INT64)], [vi("c", [], T.BOOL), vi("s2", [2])]))),
        "its body has 1 inputs; it needs 3")
    c["loop-body-too-few-outputs"] = Case(b(loopm(["M", "c", "x"], lbody(
        [helper.make_node("Neg", ["s"], ["s2"])], [vi("i", [], T.INT64), vi("cc", [], T.BOOL), vi("s", [2])],
        [vi("cc", [], T.BOOL)]))), "its body has 1 outputs; it needs 2")
    c["loop-never-ends"] = Case(b(loopm(["", "", "x"], ok_body)), "neither a trip count nor a condition")
    c["loop-float-trip-count"] = Case(b(loopm(["x", "c", "x"], ok_body)), "its trip count 'x' is float32")
    c["loop-no-body"] = Case(b(model([helper.make_node("Loop", ["M", "c", "x"], ["y"], name="the_loop")],
                                     [vi("M", [], T.INT64), vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2])])),
                             "body")
    sbody = lbody([helper.make_node("Add", ["s", "e"], ["s2"])], [vi("s", [2]), vi("e", [2])], [vi("s2", [2])])
    scanm = lambda ins, **a: model([helper.make_node("Scan", list(ins), ["y"], name="the_scan", body=sbody, **a)],   # noqa: E731
                                   [vi("x", [2]), vi("z", [3, 2])], [vi("y", [2])])
    c["scan-too-many-scan-inputs"] = Case(b(scanm(["x", "z"], num_scan_inputs=5)), "num_scan_inputs must be between 1 and")
    c["scan-axes-count"] = Case(b(scanm(["x", "z"], num_scan_inputs=1, scan_input_axes=[0, 1])),
                                "scan_input_axes has 2 entries; it needs 1")
    c["scan-direction-2"] = Case(b(scanm(["x", "z"], num_scan_inputs=1, scan_input_directions=[2])),
                                 "a direction is 0 or 1")
    c["scan-axis-out-of-range"] = Case(b(scanm(["x", "z"], num_scan_inputs=1, scan_input_axes=[7])), "scan_in_axes[0]")

    # a field number past 2^29-1 (protobuf-c reads it as an unknown field; the pre-scan must not
    # stop there and leave what follows unchecked)
    bigtag = varint(2**32) + varint(0)
    c["bigtag-then-deep-nesting"] = Case(bigtag + seq, "not a valid ONNX model")
    m = relu_model()
    m.graph.node[0].name = "relu\x00../../etc"
    c["bigtag-then-nul-in-name"] = Case(bigtag + b(m), "not a valid ONNX model")
    g_bytes = bytes(b(relu_model()))
    c["bigtag-inside-graph"] = Case(field_varint(1, 8) + field_bytes(7, varint(2**32) + varint(0)) + g_bytes[2:],
                                    "not a valid ONNX model")
    # ten million empty initializers would take gigabytes once parsed: refused before parsing
    empties = field_bytes(5, b"") * 5_000_000
    c["five-million-empty-initializers"] = Case(field_varint(1, 8) + field_bytes(7, empties)
                                                + field_bytes(8, field_bytes(1, b"") + field_varint(2, 13)),
                                                "protobuf messages and strings (the limit is values=")

    # strings with a NUL byte (protobuf-c would cut them at the NUL)
    m = relu_model()
    m.graph.node[0].name = "relu\x00hidden"
    c["nul-in-node-name"] = Case(b(m), "contains a NUL byte")
    c["nul-in-external-location"] = Case(
        b(with_external([("location", "w.bin\x00../../etc/passwd")])), "contains a NUL byte",
        files={"w.bin": bytes(16)})

    # graph structure
    m = relu_model()
    m.graph.input.append(vi("x", [2, 3]))
    c["graph-input-twice"] = Case(b(m), "graph input 'x' is declared twice")
    c["initializer-shadows-input-other-shape"] = Case(
        b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2, 3]), vi("w", [1, 3])], [vi("y", [2, 3])],
                [const_f32("w", np.ones((2, 2)))])),
        "graph input 'w' is declared float32[1,3] but its initializer is f32[2,2]")
    c["initializer-twice"] = Case(
        b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [3])], [vi("y", [3])],
                [const_f32("w", [1, 2, 3]), const_f32("w", [4, 5, 6])])), "initializer 'w' is defined twice")
    c["output-defined-twice"] = Case(
        b(model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])], [vi("x", [3])],
                [vi("y", [3])])), "output 'y' is defined twice")
    c["dangling-input"] = Case(
        b(model([helper.make_node("Add", ["x", "nowhere"], ["y"])], [vi("x", [3])], [vi("y", [3])])),
        "input 'nowhere' is not a graph input, an initializer or the output of any node")
    c["cycle"] = Case(
        b(model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                 helper.make_node("Relu", ["b"], ["y"])], [vi("x", [3])], [vi("y", [3])])),
        "the graph is unsorted or has a cycle")
    c["self-loop"] = Case(
        b(model([helper.make_node("Add", ["x", "a"], ["a"]), helper.make_node("Relu", ["a"], ["y"])], [vi("x", [3])],
                [vi("y", [3])])), "is the node's own output (a cycle)")
    c["output-not-produced"] = Case(
        b(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [3])], [vi("z", [3])])),
        "graph output 'z' is not produced by any node")
    c["no-outputs"] = Case(b(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [3])], [])),
                           "the graph has no outputs")
    m = relu_model()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -2
    c["negative-dim-value"] = Case(b(m), "a dim_value must not be negative")
    m = relu_model()
    m.graph.input[0].type.tensor_type.ClearField("shape")
    c["input-without-shape"] = Case(b(m), "the model gives no shape")
    m = relu_model()
    m.graph.input[0].type.tensor_type.elem_type = 99
    c["unknown-dtype"] = Case(b(m), "element type 99")
    m = relu_model()
    m.graph.input[0].type.tensor_type.elem_type = T.STRING
    c["string-input"] = Case(b(m), "element type 8 (string) is not supported")
    c["unknown-op"] = Case(b(model([helper.make_node("FancyOp", ["x"], ["y"])], [vi("x", [3])], [vi("y", [3])])),
                           "1 op Cuvil does not support")
    c["op-not-in-its-opset"] = Case(
        b(model([helper.make_node("Range", ["s", "l", "d"], ["y"])], [], [vi("y", [3])],
                [const_f32("s", 0.0), const_f32("l", 3.0), const_f32("d", 1.0)], opset=9)),
        "Range does not exist in opset 9 (ONNX added it in opset 11)")

    # attributes, checked against ONNX's operator schemas
    def conv(**attrs):
        return model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], [vi("x", [1, 2, 5, 5])],
                     [vi("y", None)], [const_f32("w", np.ones((3, 2, 3, 3)))], opset=11)
    c["unknown-attribute"] = Case(b(conv(kernel_shap=[3, 3])), "unknown attribute 'kernel_shap'")
    m = conv(group=1)
    m.graph.node[0].attribute[0].type = onnx.AttributeProto.FLOAT
    m.graph.node[0].attribute[0].f = 1.0
    c["attribute-wrong-type"] = Case(b(m), "attribute 'group' has type float; Conv-11 expects int")
    m = conv(group=1)
    m.graph.node[0].attribute.append(helper.make_attribute("group", 3))
    c["attribute-twice"] = Case(b(m), "attribute 'group' is given twice")
    c["required-attribute-missing"] = Case(
        b(model([helper.make_node("MaxPool", ["x"], ["y"])], [vi("x", [1, 1, 4, 4])], [vi("y", None)])),
        "required attribute 'kernel_shape' is missing")
    c["too-many-inputs"] = Case(
        b(model([helper.make_node("Relu", ["x", "x"], ["y"])], [vi("x", [3])], [vi("y", [3])], opset=14)),
        "has 2 inputs; Relu-14 takes 1")
    m = relu_model()
    a = onnx.AttributeProto()
    a.name, a.ref_attr_name, a.type = "alpha", "outer_alpha", onnx.AttributeProto.FLOAT
    m.graph.node[0].op_type = "LeakyRelu"
    m.graph.node[0].attribute.append(a)
    c["attribute-refers-to-function"] = Case(b(m), "refers to a function attribute")
    c["upsample-deprecated"] = Case(
        b(model([helper.make_node("Upsample", ["x", "s"], ["y"])], [vi("x", [1, 1, 2, 2])], [vi("y", None)],
                [const_f32("s", [1, 1, 2, 2])], opset=11)), "Upsample is deprecated since opset 10")

    # sizes: limits and arithmetic overflow
    c["dims-2^32-x-2^32"] = Case(b(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2**32, 2**32])],
                                         [vi("y", None)])), "over the limit tensor_bytes")
    c["dim-int64-max"] = Case(b(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [INT64_MAX])],
                                      [vi("y", None)])), "over the limit dim=")
    w = TensorProto()
    w.name, w.data_type = "w", T.FLOAT
    w.dims.extend([2**31, 2**31, 4])
    c["initializer-huge-no-data"] = Case(
        b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [1])], [vi("y", None)], [w])),
        "is too large (size overflows)")
    c["reshape-product-wraps-to-input-size"] = Case(
        b(model([helper.make_node("Reshape", ["x", "s"], ["y"])], [vi("x", [4])], [vi("y", None)],
                [const_i64("s", [4, 2**62 + 1])])), "product overflows")
    c["conv-pads-int64-max"] = Case(b(conv(pads=[INT64_MAX, 0, 0, 0])), "pads[0]=9223372036854775807 is out of range")
    c["conv-stride-0"] = Case(b(conv(strides=[0, 1])), "strides and dilations must be positive")
    c["conv-group-0"] = Case(b(conv(group=0)), "group=0 does not divide C=2")
    c["conv-dilation-huge"] = Case(b(conv(dilations=[2**40, 1])), "out of range")
    c["resize-scales-1e9"] = Case(
        b(model([helper.make_node("Resize", ["x", "", "s"], ["y"])], [vi("x", [1, 1, 8, 8])], [vi("y", None)],
                [const_f32("s", [1, 1, 1e9, 1e9])])), "over the limit")
    c["maxpool-pads-not-smaller-than-kernel"] = Case(
        b(model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[2, 0, 0, 0])],
                [vi("x", [1, 1, 4, 4])], [vi("y", None)])), "must be smaller than the kernel")
    c["softmax-axis-out-of-range"] = Case(
        b(model([helper.make_node("Softmax", ["x"], ["y"], axis=5)], [vi("x", [2, 3])], [vi("y", None)])),
        "out of range for rank 2")
    c["concat-axis-out-of-range"] = Case(
        b(model([helper.make_node("Concat", ["x", "x"], ["y"], axis=-3)], [vi("x", [2, 3])], [vi("y", None)])),
        "out of range for rank 2")
    c["transpose-perm-not-a-permutation"] = Case(
        b(model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0])], [vi("x", [2, 3])], [vi("y", None)])),
        "perm is not a permutation")
    c["gather-index-out-of-range"] = Case(
        b(model([helper.make_node("Gather", ["x", "i"], ["y"])], [vi("x", [2, 3])], [vi("y", None)],
                [const_i64("i", [0, 5])])), "is out of range for an axis of size 2")
    c["split-negative"] = Case(
        b(model([helper.make_node("Split", ["x", "s"], ["a", "bb"])], [vi("x", [4])], [vi("a", None), vi("bb", None)],
                [const_i64("s", [-1, 5])])), "split[0]=-1 is invalid")
    c["constantofshape-bomb-tensor-limit"] = Case(
        b(model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [vi("y", None)],
                [const_i64("s", [100000, 100000])], opset=13)), "over the limit tensor_bytes")
    c["constantofshape-bomb-fold-limit"] = Case(
        b(model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [vi("y", None)],
                [const_i64("s", [20000, 20000])], opset=13)), "over the limit folded_bytes")
    c["expand-bomb"] = Case(
        b(model([helper.make_node("Expand", ["x", "s"], ["y"])], [vi("x", [1])], [vi("y", None)],
                [const_i64("s", [10**6, 10**6])])), "over the limit tensor_bytes")
    c["tile-bomb"] = Case(
        b(model([helper.make_node("Tile", ["c", "r"], ["y"])], [], [vi("y", None)],
                [const_f32("c", [1.0, 2.0]), const_i64("r", [10**12])])), "over the limit dim=")
    # a node that must fold (its output's shape is its input data) over the work budget
    c["fold-ops-limit"] = Case(
        b(model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [vi("y", None)], [const_i64("s", [300, 300])],
                opset=13)), "over the limit fold_ops=1000", args=["--limit", "fold_ops=1000"])
    c["folded-bytes-in-total"] = Case(
        b(model([helper.make_node("ConstantOfShape", ["s"], ["y"]), helper.make_node("ConstantOfShape", ["s"], ["z"])],
                [], [vi("y", None), vi("z", None)], [const_i64("s", [40, 1024, 1024])])),
        "over the limit folded_bytes=67108864", args=["--limit", "folded_bytes=64M"])
    many = [helper.make_node("Relu", ["x" if i == 0 else f"h{i}"], [f"h{i + 1}" if i < 9 else "y"]) for i in range(10)]
    c["over-the-node-limit"] = Case(b(model(many, [vi("x", [3])], [vi("y", [3])])), "the limit is nodes=5",
                                    args=["--limit", "nodes=5"])

    # semantics ONNX Runtime refuses, or that Cuvil does not implement
    c["add-opset6-axis-broadcast"] = Case(
        b(model([helper.make_node("Add", ["x", "bb"], ["y"], broadcast=1, axis=1)], [vi("x", [2, 3, 3])],
                [vi("y", None)], [const_f32("bb", [10, 20, 30])], opset=6)), "broadcasting at axis=1 (opsets before 7) is not supported")
    c["gemm-opset6"] = Case(
        b(model([helper.make_node("Gemm", ["a", "w", "cc"], ["y"], broadcast=0)], [vi("a", [2, 3])], [vi("y", None)],
                [const_f32("w", np.ones((3, 4))), const_f32("cc", np.ones((1, 4)))], opset=6)), "must be [2,4] (this node does not broadcast C")
    m = model([helper.make_node("BatchNormalization", ["x", "g", "bb", "mm", "v"], ["y"], spatial=0)],
              [vi("x", [1, 2, 3, 3])], [vi("y", None)],
              [const_f32(n, np.ones(2)) for n in ("g", "bb", "mm", "v")], opset=7)
    c["batchnorm-spatial-0"] = Case(b(m), "spatial=0")
    m = model([helper.make_node("BatchNormalization", ["x", "g", "bb", "mm", "v"], ["y"])],
              [vi("x", [1, 2, 3, 3])], [vi("y", None)],
              [const_f32(n, np.ones(2)) for n in ("g", "bb", "mm", "v")], opset=6)
    c["batchnorm6-training-mode"] = Case(b(m), "is_test=0 (training mode")
    c["dropout6-training-mode"] = Case(b(model([helper.make_node("Dropout", ["x"], ["y"])], [vi("x", [3])], [vi("y", None)],
                                              opset=6)), "is_test=0 (training mode")

    def convt(**attrs):
        return model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)], [vi("x", [1, 2, 5, 5])],
                     [vi("y", None)], [const_f32("w", np.ones((2, 3, 3, 3)))], opset=11)
    c["convtranspose-output-padding-ge-stride"] = Case(b(convt(strides=[2, 2], output_padding=[2, 2])),
                                                       "must be smaller than the stride")
    c["convtranspose-output-shape-too-large"] = Case(b(convt(output_shape=[30, 30])), "does not fit this input")
    c["conv-auto-pad-and-pads"] = Case(b(conv(auto_pad="VALID", pads=[1, 1, 1, 1])),
                                       "pads and auto_pad='valid' are both given")
    c["global-pool-empty-spatial"] = Case(
        b(model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], [vi("x", [1, 2, 0, 3])], [vi("y", None)])),
        "no spatial elements")
    c["constantofshape-scalar-shape"] = Case(
        b(model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [vi("y", None)], [const_i64("s", 3)])),
        "must be 1-D")

    c["op-before-it-exists"] = Case(
        b(model([helper.make_node("HardSwish", ["x"], ["y"])], [vi("x", [3])], [vi("y", [3])], opset=13)),
        "HardSwish does not exist in opset 13 (ONNX added it in opset 14)")
    c["max-opset7-without-broadcasting"] = Case(
        b(model([helper.make_node("Max", ["x", "z"], ["y"])], [vi("x", [2, 3]), vi("z", [3])], [vi("y", None)], opset=7)),
        "must have one shape (this node does not broadcast")
    c["batchnorm14-running-outputs"] = Case(
        b(model([helper.make_node("BatchNormalization", ["x", "g", "bb", "mm", "v"], ["y", "rm", "rv"])],
                [vi("x", [1, 2, 3, 3])], [vi("y", None)], [const_f32(n, np.ones(2)) for n in ("g", "bb", "mm", "v")],
                opset=15)), "only produced with training_mode=1")
    c["convtranspose-output-shape-4-values"] = Case(b(convt(output_shape=[1, 3, 11, 11])), "output_shape has 4 values")
    c["convtranspose-output-padding-with-dilation"] = Case(
        b(convt(strides=[1, 1], dilations=[2, 2], output_padding=[1, 1])), "must be smaller than the stride")
    c["conv-dilation-with-same-padding"] = Case(b(conv(auto_pad="SAME_UPPER", dilations=[2, 2])),
                                                "dilations with auto_pad='same_upper'")
    c["integer-division-by-zero"] = Case(
        b(model([helper.make_node("Div", ["a", "z"], ["y"])], [], [vi("y", None, T.INT64)],
                [const_i64("a", [6, 8]), const_i64("z", [2, 0])])), "integer division by zero")
    g_once = b(relu_model())
    c["singular-field-repeated"] = Case(g_once + field_bytes(7, field_bytes(1, b"")) * 1000,
                                        "which holds one message, is given more than once")
    c["unknown-fields-flood"] = Case(g_once + (varint(100 << 3) + varint(0)) * 5_000_000,
                                     "protobuf messages and strings (the limit is values=")
    # (one base per node: eight Pows of one base are one node after cse)
    c["pow-exponent-copied-per-node"] = Case(
        b(model([helper.make_node("Pow", [f"x{i}", "e"], [f"y{i}"]) for i in range(8)],
                [vi(f"x{i}", [1 << 20]) for i in range(8)],
                [vi(f"y{i}", None) for i in range(8)], [const_i64("e", np.full(1 << 20, 2))])),
        "its kernel's constant data brings the constants computed at compile time over the limit folded_bytes=16777216",
        args=["--limit", "folded_bytes=16M"])

    # declared types that disagree with what the graph computes
    c["declared-output-dtype"] = Case(b(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])],
                                              [vi("y", [2, 3], T.INT64)])), "but the model declares it int64")
    c["declared-output-shape"] = Case(b(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])],
                                              [vi("y", [2, 4])])), "but the model declares it [2,4]")
    m = model([helper.make_node("Size", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y", [], T.FLOAT)])
    c["declared-size-output-float"] = Case(b(m), "but the model declares it float32")
    c["declared-value-info-dtype"] = Case(
        b(model([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], [vi("x", [2, 3])],
                [vi("y", [2, 3])], value_info=[vi("h", [2, 3], T.INT32)])), "but the model declares it int32")

    # external data
    c["external-absolute"] = Case(b(with_external([("location", "/etc/passwd")])), "is absolute")
    c["external-dotdot"] = Case(b(with_external([("location", "../w.bin")])), "contains '..'")
    c["external-symlink-out"] = Case(b(with_external([("location", "link.bin")])), "resolves outside the model's folder",
                                     files={"link.bin": ("symlink", "/etc/passwd")})
    c["external-fifo"] = Case(b(with_external([("location", "w.bin")])), "is not a regular file",
                              files={"w.bin": "fifo"})
    c["external-length-2^64-1"] = Case(b(with_external([("location", "w.bin"), ("length", str(2**64 - 1))])),
                                       "external data length 18446744073709551615, expected 16 bytes",
                                       files={"w.bin": bytes(16)})
    c["external-key-twice"] = Case(b(with_external([("location", "w.bin"), ("length", "16"), ("length", "16")])),
                                   "external data key 'length' is given twice", files={"w.bin": bytes(16)})
    c["external-no-location"] = Case(b(with_external([("offset", "0")])), "external data without a location")
    c["external-too-short"] = Case(b(with_external([("location", "w.bin")])), "is too short",
                                   files={"w.bin": bytes(8)})

    # tensor data
    w = const_f32("w", [1, 2, 3])
    w.raw_data = bytes(8)
    c["raw-data-length"] = Case(b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [3])], [vi("y", None)],
                                        [w])), "raw_data holds 8")
    w = TensorProto()
    w.name, w.data_type = "w", T.INT64
    w.dims.append(2)
    w.float_data.extend([1.0, 2.0])
    c["data-in-wrong-field"] = Case(b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2], T.INT64)],
                                            [vi("y", None, T.INT64)], [w])), "holds its data in float_data")
    w = const_f32("w", [1, 2, 3])
    w.data_type = 99
    c["initializer-unknown-dtype"] = Case(b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [3])],
                                                  [vi("y", None)], [w])), "data_type 99")
    w = const_f32("w", [1, 2, 3])
    w.dims[0] = -3
    c["initializer-negative-dim"] = Case(b(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [3])],
                                                 [vi("y", None)], [w])), "negative dim -3")
    m = relu_model()
    sp = m.graph.sparse_initializer.add()
    sp.values.CopyFrom(const_f32("v", [1.0]))
    sp.values.name = "v"
    sp.indices.CopyFrom(const_i64("i", [0]))
    sp.dims.append(4)
    c["sparse-initializer"] = Case(b(m), "sparse initializers are not supported")
    return c


CASES = cases()


def all_models():
    """(name, model bytes) of every case, for the fuzzers' seed corpus."""
    return [(name, case.data) for name, case in CASES.items()]


def write_case(name: str, case: Case, folder: Path) -> Path:
    """Writes the model and its files into folder; returns the model's path."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.onnx"
    path.write_bytes(case.data)
    for fname, content in case.files.items():
        f = folder / fname
        if content == "fifo":
            os.mkfifo(f)
        elif isinstance(content, tuple):
            os.symlink(content[1], f)
        else:
            f.write_bytes(content)
    return path


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    for name, case in CASES.items():
        write_case(name, case, out / name)
    print(f"{len(CASES)} malformed models in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
