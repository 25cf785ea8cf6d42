"""torch.compile(model, backend="cuvil") and cuvil.fx_backend(gm, example_inputs).

Dynamo hands a backend each FX graph it captures (one per stretch between graph breaks) with
example inputs: the module's parameters and buffers (with inlined nn.Modules they are graph
inputs), the call's tensors and, once a dim has been seen to vary, SymInts for its sizes. The
backend bakes the parameters and buffers into the compiled model as constants (so the compiler
folds BatchNorm and prepacks weights) and compiles one model per set of input shapes: a new
shape compiles again (cached), the ints among the inputs become constants of that build. A
parameter changed in place (its version counter moved) compiles again rather than run stale
weights.
"""
from __future__ import annotations

import threading
from typing import Any

from ._compile import compile as _compile


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


class _Compiled:
    def __init__(self, gm, example_inputs):
        import torch
        self.gm = gm
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        if len(names) != len(example_inputs):
            raise ValueError(f"fx_backend: the graph has {len(names)} inputs, {len(example_inputs)} examples given")
        self.state = [i for i, (n, v) in enumerate(zip(names, example_inputs)) if _is_state(n, v)]
        out = next(n for n in gm.graph.nodes if n.op == "output")
        self.out_kind = type(out.args[0]) if isinstance(out.args[0], (tuple, list)) else None
        self.models: dict[tuple, Any] = {}
        self.lock = threading.Lock()
        self.torch = torch

    def _key(self, args) -> tuple:
        k = []
        for i, a in enumerate(args):
            if isinstance(a, self.torch.Tensor):
                k.append((i, tuple(a.shape), str(a.dtype), a._version if i in self.state else None,
                          a.data_ptr() if i in self.state else None))
            else:
                k.append((i, int(a) if isinstance(a, (int, self.torch.SymInt)) else repr(a)))
        return tuple(k)

    def _build(self, args):
        torch = self.torch
        runtime = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in self.state]
        template = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        bound = _Bound(self.gm, template, runtime)
        examples = tuple(args[i].detach() for i in runtime)
        global builds
        model = _compile(bound, examples)
        builds += 1
        return model, runtime

    def __call__(self, *args):
        key = self._key(args)
        with self.lock:
            entry = self.models.get(key)
            if entry is None:
                entry = self.models[key] = self._build(args)
        model, runtime = entry
        with self.torch.no_grad():
            y = model(*[args[i].detach() for i in runtime])
        if self.out_kind is None:
            return y
        ys = y if isinstance(y, tuple) else (y,)
        return self.out_kind(ys)


def fx_backend(gm, example_inputs):
    """A torch.compile backend (what backend="cuvil" names): compiles `gm`, a torch.fx.GraphModule,
    with Cuvil and returns a function of the same inputs. Also usable on any GraphModule."""
    return _Compiled(gm, list(example_inputs))
