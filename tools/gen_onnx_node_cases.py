#!/usr/bin/env python3
"""Writes the node cases of the pinned onnx wheel (tools/setup/requirements.txt: onnx==1.23.2)
as ONNX backend test data: DIR/node/<case>/model.onnx and test_data_set_*/{input,output}_*.pb,
the layout of Debian's libonnx-testdata, for tools/onnx_conformance.py --data DIR.

The wheel ships the case generators (onnx.backend.test.case.node), not their data; each case's
expected outputs are computed by the generators (ONNX's reference implementation), as ONNX's
own `backend-test-tools generate-data` does for its other folders. Seeded by the generators
themselves (numpy's global state, reset here first), so a rerun writes the same cases.

    $CUVIL_VENV/bin/python tools/gen_onnx_node_cases.py DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper


def write_value(path: Path, value, vi: onnx.ValueInfoProto) -> None:
    t = vi.type
    if t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, vi.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, vi.name)
    elif t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, vi.name)
    elif isinstance(value, onnx.TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(np.asarray(value), vi.name)
    path.write_bytes(proto.SerializeToString())


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1]) / "node"
    np.random.seed(0)
    from onnx.backend.test.case import node as node_cases
    cases = node_cases.collect_testcases()
    n = 0
    for case in cases:
        d = out / case.name
        if d.exists():   # a name twice: the first kept
            continue
        d.mkdir(parents=True)
        (d / "model.onnx").write_bytes(case.model.SerializeToString())
        g = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets or []):
            s = d / f"test_data_set_{i}"
            s.mkdir()
            for j, v in enumerate(inputs):
                write_value(s / f"input_{j}.pb", v, g.input[j])
            for j, v in enumerate(outputs):
                write_value(s / f"output_{j}.pb", v, g.output[j])
        n += 1
    print(f"{n} node cases of onnx {onnx.__version__} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
