"""torch.compile(model, backend="cuvil") and cuvil.fx_backend(gm, example_inputs).

Dynamo hands a backend each FX graph it captures (one per stretch between graph breaks) with
example inputs: the module's parameters and buffers (with inlined nn.Modules they are graph
inputs), the call's tensors and, once a dim has been seen to vary, SymInts for its sizes. The
backend bakes the parameters and buffers into the compiled model as constants (so the compiler
folds BatchNorm and prepacks weights) and compiles one model per set of input shapes: a new
shape compiles again (cached), the ints among the inputs become constants of that build. A
parameter changed in place (its version counter moved) compiles again rather than run stale
weights. A graph Cuvil cannot compile (an op it lacks, an export that fails) runs eagerly in
PyTorch instead, for those input shapes, with one RuntimeWarning saying why.
"""
from __future__ import annotations

import threading
import warnings
from typing import Any

from ._compile import compile as _compile
from ._native import CuvilError
from ._torch import export_input_names


def _is_state(name: str, value: Any) -> bool:
    """A placeholder that stands for module state rather than a call's input."""
    import torch
    return isinstance(value, torch.nn.Parameter) or ("_buffers_" in name and isinstance(value, torch.Tensor))


class _Bound:
    """gm with its constant arguments (state, ints) fixed, taking the runtime tensors only."""

    def __new__(cls, gm, template: list, runtime: list[int]):
        import torch

        class Bound(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gm = gm

            def forward(self, *xs):
                args = list(template)
                for i, x in zip(runtime, xs):
                    args[i] = x
                out = self.gm(*args)
                return tuple(out) if isinstance(out, (tuple, list)) else out

        return Bound()


builds = 0  # models compiled by this backend in this process (for tests and curiosity)
_EAGER = object()  # a graph Cuvil could not compile, run by PyTorch


def _mutated_inputs(gm) -> list[str]:
    """Placeholders the graph updates in place (x.add_(1), x[0] = ...): a compiled model
    computes its outputs but cannot write back into the caller's tensors."""
    import operator
    ph = {n for n in gm.graph.nodes if n.op == "placeholder"}
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or not n.args or n.args[0] not in ph:
            continue
        name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or n.target in (operator.setitem, operator.iadd,
                                                                            operator.imul, operator.isub):
            out.append(f"{n.args[0].name} ({name})")
    return out


class _Build:
    """One compiled model of the graph: which runtime inputs it takes, and the inputs the export
    baked in as constants (a 0-d tensor read with .item(), an input that only steered the
    trace), with the values they had: another value needs another build."""

    def __init__(self, model, taken: list[int], baked: dict):
        self.model, self.taken, self.baked = model, taken, baked

    def fits(self, args) -> bool:
        return all(v.shape == args[i].shape and bool((v == args[i].detach()).all()) for i, v in self.baked.items())


class _Compiled:
    def __init__(self, gm, example_inputs):
        import torch
        self.gm = gm
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        if len(names) != len(example_inputs):
            raise ValueError(f"fx_backend: the graph has {len(names)} inputs, {len(example_inputs)} examples given")
        mutated = _mutated_inputs(gm)
        if mutated:
            raise NotImplementedError("cuvil backend: the graph updates its inputs in place ("
                                      + ", ".join(mutated) + "); Cuvil compiles functional graphs only")
        self.state = [i for i, (n, v) in enumerate(zip(names, example_inputs)) if _is_state(n, v)]
        out = next(n for n in gm.graph.nodes if n.op == "output")
        self.out_kind = type(out.args[0]) if isinstance(out.args[0], (tuple, list)) else None
        self.builds: dict[tuple, list[_Build]] = {}
        self.lock = threading.Lock()
        self.torch = torch
        self.warned_grad = False
        self.eager: set[tuple] = set()   # keys (input shapes) of the builds that failed: run by PyTorch
        self.warned_eager = False

    def _version(self, a):
        try:
            return a._version
        except RuntimeError:  # an inference tensor keeps no version counter (nor is updated in place)
            return None

    def _key(self, args) -> tuple:
        k = []
        for i, a in enumerate(args):
            if isinstance(a, self.torch.Tensor):
                k.append((i, tuple(a.shape), str(a.dtype), self._version(a) if i in self.state else None,
                          a.data_ptr() if i in self.state else None))
            else:
                k.append((i, int(a) if isinstance(a, (int, self.torch.SymInt)) else repr(a)))
        return tuple(k)

    def _build(self, args) -> _Build:
        torch = self.torch
        runtime = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in self.state]
        template = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        bound = _Bound(self.gm, template, runtime)
        global builds
        model = _compile(bound, tuple(args[i].detach() for i in runtime), _torch_method="trusted")
        builds += 1
        # the export names the inputs input (one) or input0, input1, ...: those it dropped were baked
        names = export_input_names(len(runtime))
        kept = {s.name for s in model.inputs}
        taken = [i for i, nm in zip(runtime, names) if nm in kept]
        baked = {i: args[i].detach().clone() for i, nm in zip(runtime, names) if nm not in kept}
        return _Build(model, taken, baked)

    def __call__(self, *args):
        key = self._key(args)
        with self.lock:
            builds = self.builds.setdefault(key, [])
            b = next((b for b in builds if b.fits(args)), None)
            if b is None:
                if key in self.eager:
                    b = _EAGER
                else:
                    try:
                        b = self._build(args)
                    except (CuvilError, NotImplementedError) as e:
                        # as other backends do with what they cannot compile: this graph runs
                        # in PyTorch (for these shapes), and says so once
                        self.eager.add(key)
                        if not self.warned_eager:
                            self.warned_eager = True
                            warnings.warn(f"cuvil backend: a graph runs eagerly in PyTorch, Cuvil cannot compile "
                                          f"it: {e}", RuntimeWarning, stacklevel=2)
                        b = _EAGER
                    else:
                        builds.append(b)
        if b is _EAGER:
            return self.gm(*args)
        if not self.warned_grad and self.torch.is_grad_enabled() and any(
                isinstance(a, self.torch.Tensor) and a.requires_grad for a in args):
            self.warned_grad = True
            warnings.warn("cuvil backend: the compiled graph runs for inference; its outputs do not track "
                          "gradients (run it under torch.no_grad(), or use another backend to train)",
                          stacklevel=2)
        y = b.model(*[args[i].detach() for i in b.taken])
        if self.out_kind is None:
            return y
        ys = y if isinstance(y, tuple) else (y,)
        return self.out_kind(ys)


def fx_backend(gm, example_inputs):
    """A torch.compile backend (what backend="cuvil" names): compiles `gm`, a torch.fx.GraphModule,
    with Cuvil and returns a function of the same inputs. Also usable on any GraphModule."""
    return _Compiled(gm, list(example_inputs))
