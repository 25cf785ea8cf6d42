"""The files an ONNX model reads besides itself: its tensors' external data (`location`, a path
relative to the model's folder, subfolders included), found by walking the protobuf wire format
(the package must not need the onnx package to compile an ONNX file). Only the messages that
can hold a tensor are entered:

    ModelProto.graph (7), .functions (25)        FunctionProto.node (7)
    GraphProto.node (1), .initializer (5), .sparse_initializer (15)
    NodeProto.attribute (5)
    AttributeProto.t (5), .g (6), .tensors (10), .graphs (11), .sparse_tensor (22), .sparse_tensors (23)
    SparseTensorProto.values (1), .indices (2)
    TensorProto.external_data (13): StringStringEntryProto key (1), value (2)

A malformed file yields what was found before the damage (the compiler refuses the file anyway).
"""
from __future__ import annotations

MODEL, GRAPH, FUNCTION, NODE, ATTR, SPARSE, TENSOR, ENTRY = range(8)
_CHILDREN = {
    MODEL: {7: GRAPH, 25: FUNCTION},
    FUNCTION: {7: NODE},
    GRAPH: {1: NODE, 5: TENSOR, 15: SPARSE},
    NODE: {5: ATTR},
    ATTR: {5: TENSOR, 6: GRAPH, 10: TENSOR, 11: GRAPH, 22: SPARSE, 23: SPARSE},
    SPARSE: {1: TENSOR, 2: TENSOR},
    TENSOR: {13: ENTRY},
}
_MAX_DEPTH = 64


def _varint(b: memoryview, i: int, end: int) -> tuple[int, int]:
    v = shift = 0
    while i < end:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
        if shift > 63:
            break
    raise ValueError("bad varint")


def _fields(b: memoryview, i: int, end: int):
    """(field number, start, end) of each length-delimited field in b[i:end]."""
    while i < end:
        key, i = _varint(b, i, end)
        wt, num = key & 7, key >> 3
        if wt == 0:
            _, i = _varint(b, i, end)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = _varint(b, i, end)
            if n > end - i:
                raise ValueError("field past the end")
            yield num, i, i + n
            i += n
        else:
            raise ValueError("unsupported wire type")
        if i > end:
            raise ValueError("field past the end")


def external_locations(data: bytes) -> list[str]:
    """The `location`s of the model's external tensors, in order of appearance, each once."""
    if b"location" not in data:
        return []
    b = memoryview(data)
    found: list[str] = []

    def walk(kind: int, i: int, end: int, depth: int):
        if depth > _MAX_DEPTH:
            raise ValueError("too deep")
        if kind == ENTRY:
            key = value = None
            for num, s, e in _fields(b, i, end):
                if num == 1:
                    key = bytes(b[s:e])
                elif num == 2:
                    value = bytes(b[s:e])
            if key == b"location" and value is not None:
                loc = value.decode("utf-8", errors="surrogateescape")
                if loc not in found:
                    found.append(loc)
            return
        children = _CHILDREN[kind]
        for num, s, e in _fields(b, i, end):
            child = children.get(num)
            if child is not None:
                walk(child, s, e, depth + 1)

    try:
        walk(MODEL, 0, len(b), 0)
    except (ValueError, IndexError):
        pass
    return found
