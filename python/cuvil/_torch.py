"""PyTorch models -> ONNX, in memory, without baking in data-dependent control flow.

An nn.Module (or fx.GraphModule) is first exported with torch.export (non-strict: its Python
runs on symbolic, fake tensors). A branch or a loop count that depends on a tensor's values
cannot be exported so, and torch.export says so (GuardOnDataDependentSymNode): that is a
CuvilError naming the user's line, never a graph fixed to the example's path. torch.cond
exports as an ONNX If, which Cuvil compiles (its branches run as C control flow); a Loop
(while_loop, a scripted loop) is a refusal (explained by the caller).

Which exporter then writes the ONNX graph (torch's dynamo ONNX exporter takes seconds on a
small CNN, several times what torch.export and the TorchScript exporter take together):
  - the TorchScript exporter, when torch.export has shown its trace sound: the Python path
    does not depend on values (torch.export got through), the program reads no value into
    Python (no .item()/int(t), no unbacked sizes, no torch.cond), and the trace raised no
    TracerWarning about a Python number taken from a tensor in the user's code, or anywhere
    when dims are symbolic (a size taken as a number would be fixed to the example's);
  - otherwise, and when Cuvil refuses what the TorchScript exporter wrote, torch's dynamo
    ONNX exporter, on the exported program itself;
  - when torch.export cannot run the model at all (an unsupported construct), the TorchScript
    tracer, checked: its TracerWarnings about Python values taken from tensors in the user's
    code are the refusal of data-dependent control flow, naming the line (those raised inside
    PyTorch's own code are its comparisons of sizes, nn.MultiheadAttention's, and ignored).
TorchScript modules (torch.jit.script / trace / load) are not traced again: their graph goes
to the TorchScript exporter as it is (a scripted `if` becomes an ONNX If: refused).

Inputs are named after the model's forward arguments (x, not input), for nn.Module, TorchScript
modules and fx.GraphModule alike; outputs are output (one) or output0, output1, ...
"""
from __future__ import annotations

import contextlib
import inspect
import io
import linecache
import logging
import math
import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from ._native import CuvilError

TORCH_OPSET = 17          # the TorchScript exporter's opset (Cuvil covers its ops)
_export_lock = threading.Lock()  # the exporters keep global state: one export at a time
_PKG = os.path.dirname(os.path.abspath(__file__))


def export_input_names(n: int) -> list[str]:
    """The names the trusted TorchScript export (torch.compile's graphs) gives n inputs."""
    return ["input"] if n == 1 else [f"input{i}" for i in range(n)]


def _output_names(n: int) -> list[str]:
    return ["output"] if n == 1 else [f"output{i}" for i in range(n)]


def forward_names(model, n: int | None) -> list[str]:
    """The names of the model's forward arguments (the first n, None: those without a default):
    the TorchScript schema for TorchScript modules, the signature for the others. A *args
    parameter `xs` names the rest xs0, xs1, ..."""
    import torch
    if isinstance(model, torch.jit.ScriptModule):
        names, var = [a.name for a in model.forward.schema.arguments][1:], None
        required = len(names)
    else:
        params = list(inspect.signature(model.forward).parameters.values())
        pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in pos]
        required = sum(p.default is p.empty for p in pos)
        var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    if n is None:
        return names[:required]
    if n > len(names):
        if var is None:
            raise TypeError(f"example_inputs: {n} inputs, the model's forward takes {len(names)} "
                            f"({', '.join(names)})")
        names = names + [f"{var}{i}" for i in range(n - len(names))]
    return names[:n]


# ---- examples, shapes ---------------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _size_in(lo: int, hi: int) -> int:
    """The size an example takes in a symbolic dim of range lo..hi: 2 if it can (torch.export
    specialises a dim whose example is 0 or 1), else the nearest end."""
    return min(max(lo, 2), hi)


def examples_from_shapes(model, input_shapes: dict, dims: dict) -> tuple:
    """float32 tensors for the forward arguments without a default, from input_shapes (by name
    or index): a number is that size, a (lo, hi[, step]) range or a symbol bound by dims to
    one takes a size inside it."""
    import torch
    names = forward_names(model, None)
    by_name = {}
    for k, v in input_shapes.items():
        if _is_int(k):
            if not 0 <= k < len(names):
                raise ValueError(f"input_shapes: no input {k} (the model's forward takes {', '.join(names)})")
            k = names[k]
        by_name[k] = v
    missing = [n for n in names if n not in by_name]
    if missing:
        raise TypeError(f"compiling a torch model needs example_inputs, or input_shapes for every input of its "
                        f"forward (missing: {', '.join(missing)})")
    g = torch.Generator().manual_seed(0)
    out = []
    for n in names:
        shape = []
        for d, v in enumerate(by_name[n]):
            if isinstance(v, str):
                v = dims.get(v)
                if v is None:
                    raise ValueError(f"input_shapes[{n!r}]: dim {d} is symbol {by_name[n][d]!r}, which has no size: "
                                     f"bind it with dims={{{by_name[n][d]!r}: N or (lo, hi)}}, or give example_inputs")
            if _is_int(v):
                shape.append(v)
            elif isinstance(v, (tuple, list)) and len(v) in (2, 3) and all(_is_int(x) for x in v):
                shape.append(_size_in(v[0], v[1]))
            else:
                raise TypeError(f"input_shapes[{n!r}]: dim {d} is {v!r}; a dim is an int, a (lo, hi) range or a "
                                f"symbol's name")
        out.append(torch.randn(*shape, generator=g))
    return tuple(out)


@dataclass
class Export:
    """An exported model: its ONNX bytes, the --dim bindings the export adds (a range given in
    input_shapes), which exporter wrote it and whether the graph holds control flow."""
    data: bytes
    dims: dict = field(default_factory=dict)
    method: str = "dynamo"
    control_flow: list = field(default_factory=list)   # "If 'node_cond__0'", ...


def _normalise(example_inputs) -> tuple:
    import torch
    if isinstance(example_inputs, (torch.Tensor, np.ndarray)):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError(f"example_inputs is a {type(example_inputs).__name__}; give a tensor or a tuple of tensors")
    xs = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(x if x.flags.c_contiguous else x.copy(order="C"))
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"example_inputs[{i}] is a {type(x).__name__}; the examples are tensors or arrays")
        xs.append(x.detach().clone())   # the export may run the model: the caller's tensors stay as they are
    return tuple(xs)


def _symbolic_dims(names, xs, dims, input_shapes) -> tuple[dict, dict]:
    """{input: {dim: symbol}} for the dims that stay symbolic, and the --dim bindings of the
    ranges given in input_shapes (symbol <input>_dim<d>). A dim named "batch" in dims is dim 0
    of every input."""
    shapes = {}
    for k, v in (input_shapes or {}).items():
        if _is_int(k):
            if not 0 <= k < len(names):
                raise ValueError(f"input_shapes: no input {k} (the model has {len(names)} inputs)")
            k = names[k]
        if k not in names:
            raise ValueError(f"input_shapes: no input {k!r} (the model's inputs are {', '.join(names)})")
        x = xs[names.index(k)]
        v = list(v)
        if len(v) != x.dim():
            raise ValueError(f"input_shapes[{k!r}]: {len(v)} dims, the example has {x.dim()}")
        for d, dv in enumerate(v):
            if _is_int(dv) and dv != x.shape[d]:
                raise ValueError(f"input_shapes[{k!r}]: dim {d} is {dv}, the example's is {x.shape[d]} (a torch "
                                 f"model is exported at its example's sizes; give a range to make a dim symbolic)")
            if isinstance(dv, str):
                from ._compile import _name
                _name(dv, "input_shapes")
        shapes[k] = v
    axes_of, extra = {}, {}
    for name, x in zip(names, xs):
        axes = {}
        for d, v in enumerate(shapes.get(name, [])):
            if isinstance(v, str):
                axes[d] = v
            elif isinstance(v, (tuple, list)):
                axes[d] = f"{name}_dim{d}"
                extra[axes[d]] = tuple(v)
        if "batch" in (dims or {}) and 0 not in axes and x.dim() > 0:
            axes[0] = "batch"
        if axes:
            axes_of[name] = axes
    return axes_of, extra


@contextlib.contextmanager
def _eval_mode(model):
    modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
    if hasattr(model, "eval"):
        model.eval()
    try:
        yield
    finally:
        for m, training in modes:   # each submodule's own mode back (a frozen BatchNorm stays frozen)
            m.training = training


@contextlib.contextmanager
def _quiet_torch():
    """torch.export logs what it could not trace at WARNING; the error says it once."""
    names = ("torch.fx.experimental.symbolic_shapes", "torch._dynamo", "torch.export", "torch._export",
             "torch.onnx", "torch._subclasses")
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in names]
    for lg, _ in saved:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch(\.|$)")
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch(\.|$)")
            warnings.filterwarnings("ignore", message=r"You are using the legacy TorchScript-based ONNX export")
            yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


# ---- where in the user's code --------------------------------------------------------------
def _chain(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _user_frame(e: BaseException) -> str | None:
    """file:line: `code` of the innermost frame outside PyTorch and Cuvil in e's tracebacks."""
    import torch
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    best = None
    for ex in _chain(e):
        tb, frames = ex.__traceback__, []
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        for fn, line in reversed(frames):
            a = os.path.abspath(fn)
            if a.startswith((torch_dir + os.sep, _PKG + os.sep)) or fn.startswith("<"):
                continue
            best = (fn, line)
            break
        if best:
            break
    if best is None:
        return None
    code = linecache.getline(best[0], best[1]).strip()
    return f"{best[0]}:{best[1]}" + (f": `{code}`" if code else "")


def _first_lines(e: BaseException, n: int = 3) -> str:
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()][:n]
    return " ".join(ln.strip() for ln in lines)[:600] or type(e).__name__


_DATA_DEPENDENT = ("GuardOnDataDependentSymNode", "DataDependentOutputException")


def _data_dependent(e: BaseException) -> bool:
    for ex in _chain(e):
        if type(ex).__name__ in _DATA_DEPENDENT or "data-dependent" in str(ex):
            return True
    return False


def _dims_refused(e: BaseException) -> bool:
    for ex in _chain(e):
        s = str(ex)
        if type(ex).__name__ == "ConstraintViolationError" or "Constraints violated" in s or \
                "conflicts between user-specified ranges and inferred ranges" in s:
            return True
    return False


def _refuse_data_dependent(e: BaseException, how: str, raised: BaseException | None = None) -> CuvilError:
    """The refusal of a model whose trace depends on its input's values: e says what, the
    tracebacks of `raised` (what propagated; e itself by default) say where."""
    where = _user_frame(raised or e)
    return CuvilError(f"the torch model's Python control flow depends on its input's values"
                      f"{' at ' + where if where else ''} ({how}: {_first_lines(e, 1)}). Compiling it would fix the "
                      f"result to the example's path; compute both sides with torch.where, or use torch.cond "
                      f"(which exports as an ONNX If: Cuvil compiles it)", "unsupported")


# ---- the dynamo exporter -------------------------------------------------------------------
def _resized(x, d: int, n: int):
    """x with n entries along dim d (repeated, or zeros when it has none): an example for a
    symbolic dim (torch.export runs the model on fake tensors: only the shape matters)."""
    import torch
    if x.shape[d] == n:
        return x
    if x.shape[d] == 0:
        shape = list(x.shape)
        shape[d] = n
        return torch.zeros(shape, dtype=x.dtype)
    reps = [1] * x.dim()
    reps[d] = math.ceil(n / x.shape[d])
    return x.repeat(*reps).narrow(d, 0, n)


def _torch_export(model, names, xs, axes_of, dims, extra):
    """torch.export.export of the model (non-strict: its Python runs on fake tensors), its
    symbolic dims as asked: (the ExportedProgram, the examples it ran on). Data-dependent
    control flow and dims that cannot stay symbolic are CuvilErrors; other failures propagate."""
    import torch
    from torch.export import Dim
    made: dict[str, object] = {}
    spec, ex = [], []
    for name, x in zip(names, xs):
        axes = axes_of.get(name, {})
        ax_spec = {}
        for d, sym in axes.items():
            rng = extra.get(sym, dims.get(sym))
            lo, hi = (rng[0], rng[1]) if isinstance(rng, (tuple, list)) else (0, None)
            if sym not in made:
                made[sym] = Dim(f"cuvil_d{len(made)}", min=lo, max=hi) if hi is not None else \
                    Dim(f"cuvil_d{len(made)}")
            ax_spec[d] = made[sym]
            want = _size_in(lo, hi if hi is not None else max(lo, 2, x.shape[d]))
            if x.shape[d] < 2 or (hi is not None and not lo <= x.shape[d] <= hi):
                x = _resized(x, d, want)
        spec.append(ax_spec or None)
        ex.append(x)
    dynamic = tuple(spec) if made else None
    held = io.StringIO()   # torch.export prints the partial graph of a failed export on stderr
    try:
        with contextlib.redirect_stderr(held):
            ep = torch.export.export(model, tuple(ex), dynamic_shapes=dynamic, strict=False)
    except Exception as e:  # noqa: BLE001 - sorted below
        if _data_dependent(e):
            raise _refuse_data_dependent(e, "torch.export") from e
        if _dims_refused(e):
            raise CuvilError(f"the torch model cannot keep the dims asked to be symbolic ({_first_lines(e, 4)})",
                             "unsupported") from e
        raise
    if held.getvalue():
        sys.stderr.write(held.getvalue())   # what the model itself printed there
    return ep, tuple(ex)


def _tracer_unsafe(ep) -> bool:
    """Could a trace of this model differ from the exported program? When it turns a tensor's
    values into Python numbers (.item(), int(t), .tolist(): aten._local_scalar_dense, unbacked
    symbols), makes sizes from them (nonzero), or holds control flow (torch.cond, while_loop:
    higher-order ops, in this graph or a subgraph's)."""
    import torch
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    scalar = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default}
    for n in ep.graph.nodes:
        if n.target in scalar or isinstance(n.target, torch._ops.HigherOrderOperator):
            return True
        val = n.meta.get("val")
        try:
            if val is not None and free_unbacked_symbols(val):
                return True
        except Exception:  # noqa: BLE001 - a value it cannot walk: assume the worst
            return True
    return False


def _onnx_of(ep, ex, names, axes_of) -> Export:
    """torch's dynamo ONNX exporter on the exported program."""
    import torch
    prog = torch.onnx.export(ep, ex, dynamo=True, verbose=False, report=False)
    proto = prog.model_proto
    # the export's symbols (s0, s77, ...) by the dims they stand for
    sym_of = {}
    users = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs]
    for name, node in zip(names, users):
        val = node.meta.get("val")
        for d, sym in axes_of.get(name, {}).items():
            if val is not None and d < val.dim() and isinstance(val.shape[d], torch.SymInt):
                sym_of[str(val.shape[d])] = sym
    _rename(proto, names, sym_of)
    return Export(proto.SerializeToString(), method="torch.export", control_flow=_control_flow(proto))


def _control_flow(proto) -> list[str]:
    return [f"{n.op_type} '{n.name}'" for n in proto.graph.node if n.op_type in ("If", "Loop", "Scan")]


def _rename(proto, names: list[str], sym_of: dict):
    """The graph's inputs get the forward's names, its outputs output/output0..., its
    symbolic dims the names asked for; value_info (hints the compiler does not need, naming
    the export's symbols) goes."""
    g = proto.graph
    values = {}
    if len(g.input) == len(names):
        values.update({i.name: n for i, n in zip(g.input, names) if i.name != n})
    outs = _output_names(len(g.output))
    values.update({o.name: n for o, n in zip(g.output, outs) if o.name != n})
    taken = {v for n in g.node for v in list(n.input) + list(n.output)} | {i.name for i in g.initializer}
    if any(new in taken and new not in values for new in values.values()):
        values = {}   # a name in use already: the export's names stay
    if values:
        def sub(graph):
            for n in graph.node:
                for i, v in enumerate(n.input):
                    n.input[i] = values.get(v, v)
                for i, v in enumerate(n.output):
                    n.output[i] = values.get(v, v)
                for a in n.attribute:
                    for sg in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                        sub(sg)
            for vi in list(graph.input) + list(graph.output):
                vi.name = values.get(vi.name, vi.name)
        sub(g)
    pat = re.compile(r"\b[su]\d+\b")
    for vi in list(g.input) + list(g.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param"):
                p = d.dim_param
                if p in sym_of:
                    d.dim_param = sym_of[p]
                elif pat.search(p):   # an expression of the export's symbols: unknown here
                    d.ClearField("dim_param")
    del g.value_info[:]


# ---- the TorchScript exporter --------------------------------------------------------------
class _Unverified(Exception):
    """The tracer took a Python value from a tensor where its result could not be trusted."""


_CONVERSIONS = r"(Converting a tensor to a (Python|NumPy)|Iterating over a tensor)"


def _torchscript(model, names, xs, axes_of, mode: str, n_out: int | None = None) -> Export:
    """The TorchScript exporter (for a ScriptModule: its graph; otherwise it traces the model).
    mode says what a TracerWarning about a Python value taken from a tensor means:
      "checked"   in the user's code: the refusal of data-dependent control flow (PyTorch's own
                  code compares sizes with each other: ignored);
      "verified"  torch.export has shown the Python path does not depend on values; one in the
                  user's code is still a reason not to trust the trace: _Unverified;
      "symbolic"  as verified, and with symbolic dims a size taken as a Python number anywhere
                  would be fixed to the example's: any of them is _Unverified;
      "trusted"   torch.compile's graphs (no Python control flow): none is looked at."""
    import torch
    buf = io.BytesIO()
    with warnings.catch_warnings():
        if mode != "trusted":
            warnings.filterwarnings("error", category=torch.jit.TracerWarning, message=_CONVERSIONS)
        if mode in ("checked", "verified"):
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"torch(\.|$)")
        try:
            if n_out is None:
                # Not under no_grad: there, nn.MultiheadAttention takes a fused path the exporter cannot write
                out = model(*[x.clone() for x in xs])
                n_out = len(out) if isinstance(out, (tuple, list)) else 1
            torch.onnx.export(model, xs, buf, input_names=names, output_names=_output_names(n_out),
                              dynamic_axes=dict(axes_of) or None, opset_version=TORCH_OPSET, dynamo=False)
        except Exception as e:  # noqa: BLE001 - a tracer warning turned error, or the exporter's own
            w = next((x for x in _chain(e) if isinstance(x, torch.jit.TracerWarning)), None)
            if w is not None and mode == "checked":
                raise _refuse_data_dependent(w, "the TorchScript tracer", e) from e
            if w is not None:
                raise _Unverified(str(w)) from e
            raise
    import onnx
    data = buf.getvalue()
    return Export(data, method="TorchScript", control_flow=_control_flow(onnx.load_from_string(data)))


def exports(model, example_inputs, dims: dict, input_shapes: dict, *, method: str = "auto"):
    """The model as ONNX, best first: yields (Export, input names); the caller compiles each in
    turn until one compiles. method "auto": torch.export first (data-dependent control flow is
    refused there, naming the line); what it exported is written by the TorchScript exporter,
    quick, when torch.export has shown that trace sound (no value read into Python, no size
    taken as a number under symbolic dims), else, and then too, by the dynamo ONNX exporter;
    when torch.export cannot run the model, the checked TorchScript tracer. "torchscript": the
    checked tracer only. "trusted": the tracer unchecked, inputs input/input0..., for
    torch.compile's graphs (dynamo captured them without Python control flow, and the backend
    checks the inputs the trace baked in)."""
    import torch
    if example_inputs is None:
        if not input_shapes:
            raise TypeError("compiling a torch model needs example_inputs (a tensor or a tuple of tensors) or "
                            "input_shapes ({argument: shape})")
        example_inputs = examples_from_shapes(model, input_shapes, dims)
    xs = _normalise(example_inputs)
    names = export_input_names(len(xs)) if method == "trusted" else forward_names(model, len(xs))
    axes_of, extra = _symbolic_dims(names, xs, dims, input_shapes)

    def run(step):
        with _export_lock, _eval_mode(model), _quiet_torch():
            try:
                e = step()
            except (CuvilError, _Unverified):
                raise
            except (RuntimeError, TypeError, ValueError, NotImplementedError, AssertionError, AttributeError,
                    KeyError, IndexError) as ex:
                raise CuvilError(f"exporting the torch model to ONNX failed ({type(ex).__name__}): "
                                 f"{_first_lines(ex, 1)[:800]}", "unsupported") from ex
        e.dims = extra
        return e, names

    if method != "auto" or isinstance(model, torch.jit.ScriptModule):
        mode = {"trusted": "trusted"}.get(method, "checked")
        yield run(lambda: _torchscript(model, names, xs, axes_of, mode))
        return
    try:
        with _export_lock, _eval_mode(model), _quiet_torch():
            ep, ex = _torch_export(model, names, xs, axes_of, dims, extra)
    except CuvilError:
        raise   # a refusal: data-dependent control flow, dims that cannot stay symbolic
    except Exception:  # noqa: BLE001 - torch.export cannot run the model (an unsupported construct)
        yield run(lambda: _torchscript(model, names, xs, axes_of, "checked"))
        return
    if not _tracer_unsafe(ep):
        try:
            yield run(lambda: _torchscript(model, names, xs, axes_of, "symbolic" if axes_of else "verified",
                                           n_out=len(ep.graph_signature.user_outputs)))
        except Exception:  # noqa: BLE001 - not trusted, or the exporter failed (or is gone: it is deprecated)
            pass
    yield run(lambda: _onnx_of(ep, ex, names, axes_of))
