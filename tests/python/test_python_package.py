"""The Python package (python/cuvil): cuvil.compile from every kind of model, CompiledModel
calls, errors, save/load, threads. References are independent: PyTorch's own forward pass and
ONNX Runtime, never Cuvil."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))


def _use_a_loadable_libcuvil():
    """The package loads libcuvil into this Python process. An AddressSanitizer build's
    libcuvil cannot be loaded into a Python that was not started with the ASan runtime, so in
    `make test`'s sanitized round these tests use the plain build beside it (build-asan ->
    build): they test the Python layer, and that round covers the same C code through the
    command-line tests, which run the sanitized binaries."""
    build = Path(os.environ.get("CUVIL_BUILD", REPO / "build"))
    cache = build / "CMakeCache.txt"
    if cache.is_file() and "CUVIL_SANITIZE:BOOL=ON" in cache.read_text():
        plain = Path(str(build).removesuffix("-asan"))
        lib = plain / "lib" / "libcuvil.so"
        if not lib.is_file():
            raise RuntimeError(f"{build} is a sanitized build and {lib} (the plain one) is missing: build it first")
        os.environ["CUVIL_LIB"] = str(lib)


_use_a_loadable_libcuvil()

import cuvil  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Each test compiles into its own cache folder (no state shared between tests)."""
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))


def small_onnx() -> onnx.ModelProto:
    rng = np.random.RandomState(0)
    w = numpy_helper.from_array(rng.randn(8, 3, 3, 3).astype(np.float32) * 0.2, "w")
    b = numpy_helper.from_array(rng.randn(8).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def ort_run(model: onnx.ModelProto, feeds: dict):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = torch.relu(self.c2(y) + y)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class ResMLP(torch.nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.l1, self.l2, self.l3 = torch.nn.Linear(d, 64), torch.nn.Linear(64, d), torch.nn.Linear(d, 5)

    def forward(self, x):
        h = x + self.l2(torch.relu(self.l1(x)))
        return self.l3(torch.tanh(h))


def seeded(module: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    for p in module.parameters():
        torch.nn.init.normal_(p, std=0.2)
    for name, buf in module.named_buffers():
        if "running_var" in name:
            buf.uniform_(0.5, 1.5)
        elif "running_mean" in name:
            buf.normal_(0, 0.1)
    return module.eval()


def run_in_threads(work, n: int):
    """work(0) .. work(n - 1), each on its own thread, all at once; returns when all are done."""
    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def close(a, b, rtol=1e-4, atol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---- ONNX inputs ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["path", "bytes", "proto"])
def test_onnx_model_kinds(tmp_path, kind):
    m = small_onnx()
    x = np.random.RandomState(1).rand(1, 3, 10, 10).astype(np.float32)
    if kind == "path":
        p = tmp_path / "small.onnx"
        onnx.save(m, p)
        src = str(p)
    else:
        src = m.SerializeToString() if kind == "bytes" else m
    cm = cuvil.compile(src)
    assert [s.name for s in cm.inputs] == ["x"] and cm.inputs[0].shape == (1, 3, 10, 10)
    assert cm.outputs[0].shape == (1, 8, 1, 1) and cm.outputs[0].dtype == np.float32
    close(cm(x), ort_run(m, {"x": x})[0])
    close(cm(x=x), ort_run(m, {"x": x})[0])


def test_compile_errors_are_precise(tmp_path):
    with pytest.raises(FileNotFoundError):
        cuvil.compile(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="cuvil.compile takes"):
        cuvil.compile(42)
    with pytest.raises(cuvil.CuvilError) as e:
        cuvil.compile(b"this is not an onnx model")
    assert e.value.status == "model"
    with pytest.raises(ValueError, match="opt_level must be an int in 0..3"):
        cuvil.compile(small_onnx(), opt_level=7)
    with pytest.raises(cuvil.CuvilError, match="target"):
        cuvil.compile(small_onnx(), target="no-such-cpu")


# ---- torch models ---------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["module", "script", "trace", "fx"])
def test_torch_forms_match_pytorch(form):
    model = seeded(SmallCNN())
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(3))
    want = model(x).detach().numpy()
    if form == "script":
        model = torch.jit.script(model)
    elif form == "trace":
        model = torch.jit.trace(model, (x,))
    elif form == "fx":
        model = torch.fx.symbolic_trace(model)
        assert isinstance(model, torch.fx.GraphModule)
    cm = cuvil.compile(model, x)
    y = cm(x)
    assert isinstance(y, torch.Tensor)
    close(y.numpy(), want)
    close(cm(x.numpy()), want)  # NumPy in, NumPy out
    assert isinstance(cm(x.numpy()), np.ndarray)


def test_residual_mlp_and_torchscript_file(tmp_path):
    model = seeded(ResMLP())
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(4))
    want = model(x).detach().numpy()
    close(cuvil.compile(model, x)(x).numpy(), want)
    p = tmp_path / "mlp.pt"
    torch.jit.save(torch.jit.trace(model, (x,)), str(p))
    close(cuvil.compile(torch.jit.load(str(p)), x)(x).numpy(), want)


@pytest.mark.parametrize("form", ["module", "script", "trace"])
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision_models(name, form):
    import torchvision
    model = seeded(getattr(torchvision.models, name)(weights=None))
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = model(x).numpy()
    src = model if form == "module" else torch.jit.script(model) if form == "script" else torch.jit.trace(model, (x,))
    y = cuvil.compile(src, x, threads=2)(x).numpy()
    close(y, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
    assert y.argmax() == want.argmax()


def test_symbolic_batch():
    model = seeded(ResMLP())
    x = torch.randn(2, 32)
    cm = cuvil.compile(model, x, dims={"batch": (1, 8)})
    assert cm.inputs[0].shape == ("batch", 32) and cm.symbols == {"batch": (1, 8)}
    kept = []
    for n in (1, 3, 8, 3, 1, 3):   # again: the output shapes it learnt for the input shapes
        xb = torch.randn(n, 32, generator=torch.Generator().manual_seed(n))
        y = cm(xb)
        assert y.shape == (n, 5)
        close(y.numpy(), model(xb).detach().numpy())
        kept.append((xb, y))
    for xb, y in kept:   # each call's result is its own array
        close(y.numpy(), model(xb).detach().numpy())
    # a shape seen before: the output is allocated at its own size, not a view of the largest
    assert cm(kept[1][0].numpy()).base is None
    with pytest.raises(ValueError, match=r"batch\) is 9, the model takes 1..8"):
        cm(torch.randn(9, 32))


def test_input_shapes_range_on_onnx():
    m = small_onnx()
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"
    m.graph.input[0].type.tensor_type.shape.dim[3].dim_param = "w"
    m.graph.output[0].type.tensor_type.ClearField("shape")
    cm = cuvil.compile(m, input_shapes={"x": (1, 3, "h", "w")}, dims={"h": (4, 16), "w": 10})
    for h in (4, 9, 16):
        x = np.random.RandomState(h).rand(1, 3, h, 10).astype(np.float32)
        close(cm(x), ort_run(m, {"x": x})[0])


# ---- calls: errors, threads, files ----------------------------------------------------------
def test_wrong_name_dtype_shape_raise():
    cm = cuvil.compile(small_onnx())
    x = np.zeros((1, 3, 10, 10), np.float32)
    with pytest.raises(TypeError, match="no input named 'y'"):
        cm(y=x)
    with pytest.raises(TypeError, match="dtype float64, the model takes float32"):
        cm(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"dim 2 is 11"):
        cm(np.zeros((1, 3, 11, 10), np.float32))
    with pytest.raises(ValueError, match="shape"):
        cm(np.zeros((3, 10, 10), np.float32))
    with pytest.raises(TypeError, match="missing input"):
        cm()
    with pytest.raises(TypeError, match="takes 1 input"):
        cm(x, x)
    with pytest.raises(TypeError, match="given twice"):
        cm(x, x=x)
    # a non-contiguous view is copied, not misread
    big = np.random.RandomState(2).rand(1, 3, 10, 20).astype(np.float32)
    close(cm(big[:, :, :, ::2]), cm(np.ascontiguousarray(big[:, :, :, ::2])))


def test_four_threads_one_model():
    model = seeded(SmallCNN())
    cm = cuvil.compile(model, torch.randn(1, 3, 12, 12))
    xs = [torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(10 + i)) for i in range(4)]
    wants = [model(x).detach().numpy() for x in xs]
    errors = []

    def work(i):
        try:
            for _ in range(25):
                close(cm(xs[i]).numpy(), wants[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    run_in_threads(work, 4)
    assert not errors, errors
    import gc
    gc.collect()
    assert len(cm._ctx.live) == 0  # each thread's context went with its thread


def test_save_load_in_a_fresh_process(tmp_path):
    model = seeded(ResMLP())
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(6))
    cm = cuvil.compile(model, x)
    out = cm.save(tmp_path / "saved" / "mlp.so")
    assert out.is_file() and out.with_suffix(".h").is_file()
    np.save(tmp_path / "x.npy", x.numpy())
    code = (f"import sys, numpy as np; sys.path.insert(0, {str(REPO / 'python')!r}); import cuvil; "
            f"m = cuvil.load({str(out)!r}); np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "CUVIL_CACHE_DIR": str(tmp_path / "other")})
    assert r.returncode == 0, r.stderr
    close(np.load(tmp_path / "y.npy"), model(x).detach().numpy())
    with pytest.raises(ValueError, match=r"\.so"):
        cm.save(tmp_path / "mlp.bin")
    assert "mlp_create" in out.with_suffix(".h").read_text()  # prefixed with the file's name
    # a file Cuvil did not write is never replaced; one it wrote is
    (tmp_path / "mine.h").write_text("my header")
    with pytest.raises(cuvil.CuvilError, match="mine.h"):
        cm.save(tmp_path / "mine.so")
    assert (tmp_path / "mine.h").read_text() == "my header" and not (tmp_path / "mine.so").exists()
    cm.save(out)
    loaded = cuvil.load(out)
    with pytest.raises(FileExistsError, match="exists"):
        loaded.save(tmp_path / "mine.so")
    loaded.save(tmp_path / "copy.so")
    close(cuvil.load(tmp_path / "copy.so")(x.numpy()), model(x).detach().numpy())
    with pytest.raises(ValueError, match="without '='"):
        cuvil.compile(model, x, dims={"a=b": 2})
    with pytest.raises(cuvil.CuvilError, match="loaded from a library"):
        cuvil.load(out).dump_ir()


def test_dump_ir_and_graph_svg(tmp_path):
    cm = cuvil.compile(small_onnx())
    ir = cm.dump_ir()
    assert '= conv "Conv_0"' in ir and "act=relu" in ir  # the Relu fused by the passes
    assert '= global_avg_pool "GlobalAveragePool_2"' in ir
    svg = cm.graph_svg(tmp_path / "g.svg")
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_cache_reuses_and_no_cache_cleans_up(tmp_path):
    m = small_onnx()
    a = cuvil.compile(m)
    b = cuvil.compile(m)
    assert a.path == b.path  # the second compile found the first
    c = cuvil.compile(m, cache=False)
    d = c.path.parent.parent
    assert d.is_dir() and not str(d).startswith(os.environ["CUVIL_CACHE_DIR"])
    c.close()
    del c
    import gc
    gc.collect()
    assert not d.exists()


def test_model_file_with_external_data(tmp_path):
    """A model whose weights lie in a file beside it (torch's dynamo exports write them so) is
    compiled where it lies; new weights in that file are not served from the cache."""
    onnx.save(small_onnx(), tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.onnx.data", size_threshold=0)
    data = tmp_path / "m.onnx.data"
    x = np.random.RandomState(1).rand(1, 3, 10, 10).astype(np.float32)
    for step in range(2):
        if step:  # the same model file, other weights (all floats): negated and halved
            data.write_bytes((np.frombuffer(data.read_bytes(), np.float32) * -0.5).tobytes())
        ref = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        assert data.stat().st_size > 0 and np.abs(ref).max() > 0
        cm = cuvil.compile(str(tmp_path / "m.onnx"))
        close(cm(x), ref)
        assert '= conv "' in cm.dump_ir()  # recompiled from the file where it lies


def test_list_devices():
    devs = cuvil.runtime.list_devices()
    names = [d["target"] for d in devs]
    assert names[-1] == "generic"
    flags = Path("/proc/cpuinfo").read_text()
    if " avx2 " in flags and " fma " in flags:
        assert "x86_64-avx2" in names
    # every listed target compiles and runs here
    m = small_onnx()
    x = np.random.RandomState(7).rand(1, 3, 10, 10).astype(np.float32)
    for t in names:
        cm = cuvil.compile(m, target=t)
        assert cm.target == t
        close(cm(x), ort_run(m, {"x": x})[0])


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_readme_python_quickstart_runs_as_written(tmp_path):
    """The README's Python example, run as a user would (in a fresh process, in an empty folder)."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("## Python"):].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "quickstart.py").write_text(f"import sys; sys.path.insert(0, {str(REPO / 'python')!r})\n" + block)
    r = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "CUVIL_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert "torch.Size([5, 5])" in r.stdout
    assert (tmp_path / "resnet18.so").is_file() and (tmp_path / "resnet18.h").is_file()


# ---- torch.compile --------------------------------------------------------------------------
BRANCHY = """
import torch

class Branchy(torch.nn.Module):
    \"\"\"A graph break (print) and a data-dependent branch: dynamo hands over several graphs.\"\"\"

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l = torch.nn.Linear(8, 6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.bn.running_var.uniform_(0.5, 1.5)
        self.bn.running_mean.normal_(0, 0.1)
        self.eval()

    def forward(self, x):
        y = self.bn(self.l(x))
        print("cuvil test: graph break")
        if y.sum() > 0:
            return torch.relu(y) * 3
        return torch.tanh(y) - 1
"""


def test_torch_compile_backend_entry_point():
    """backend="cuvil" resolves through the installed package's entry point, in a process that
    never imports cuvil; graph breaks and two input shapes (the second recompiles)."""
    code = BRANCHY + r'''
import sys
m = Branchy()
assert "cuvil" not in sys.modules
c = torch.compile(m, backend="cuvil")
with torch.no_grad():
    for n in (4, 4, 9, 3):
        for s in (1.0, -1.0):
            x = torch.randn(n, 8) * s
            y, want = c(x), m(x)
            assert y.shape == want.shape, (y.shape, want.shape)
            torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)
assert "cuvil" in sys.modules  # loaded by torch through the entry point
# what ran was compiled by Cuvil: the graph before the break, each branch's graph, again for
# the new batch sizes (9 and 3 arrive as dynamic shapes: compiled per shape)
builds = sys.modules["cuvil._dynamo"].builds
assert builds >= 6, builds
print("ok", builds)
'''
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert r.stdout.strip().splitlines()[-1].startswith("ok")


def test_fx_backend_directly_and_stale_weights():
    model = seeded(SmallCNN())
    x = torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(8))
    c = torch.compile(model, backend=cuvil.fx_backend)
    with torch.no_grad():
        close(c(x).numpy(), model(x).numpy())
        model.fc.weight.mul_(2)  # in place: the compiled graph must not keep the old weights
        close(c(x).numpy(), model(x).numpy())
    gm = torch.fx.symbolic_trace(seeded(ResMLP()))
    f = cuvil.fx_backend(gm, [torch.randn(3, 32)])
    xs = torch.randn(3, 32)
    close(f(xs).numpy(), gm(xs).detach().numpy())


# ---- @cuvil.jit -----------------------------------------------------------------------------
@cuvil.jit
def jit_mlp(x, w1, b1, w2):
    h = np.maximum(x @ w1 + b1, 0.0)
    return np.tanh(h @ w2).sum(axis=1, keepdims=True) / 3.0


@cuvil.jit(shape_hint={"x": (None, 5)})
def jit_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@cuvil.jit
def jit_misc(a, b, scale=2.0):
    c = np.where(a > b, a, -b).reshape(-1, 2).T
    return np.sqrt(np.minimum(c * c, 4.0) + 1.0) * scale, np.log(c * c + 1).mean(), np.transpose(a) @ b - 1


def test_jit_matches_numpy():
    r = np.random.RandomState(0)
    f32 = lambda *s: r.randn(*s).astype(np.float32)  # noqa: E731
    x, w1, b1, w2 = f32(4, 8), f32(8, 16), f32(16), f32(16, 3)
    close(jit_mlp(x, w1, b1, w2), np.tanh(np.maximum(x @ w1 + b1, 0) @ w2).sum(axis=1, keepdims=True) / 3)
    for rows in (3, 7):  # a second shape compiles a second model
        s = f32(rows, 5)
        e = np.exp(s - s.max(-1, keepdims=True))
        close(jit_softmax(s), e / e.sum(-1, keepdims=True))
    assert len(jit_softmax.cache) == 2
    jit_softmax(f32(3, 5))
    assert len(jit_softmax.cache) == 2  # the same shape again: the cached build
    a, b = f32(3, 4), f32(3, 4)
    c = np.where(a > b, a, -b).reshape(-1, 2).T
    for scale in (2.0, 0.5):  # a non-array argument is a constant of the build
        o1, o2, o3 = jit_misc(a, b, scale=scale)
        close(o1, np.sqrt(np.minimum(c * c, 4) + 1) * scale)
        close(o2, np.log(c * c + 1).mean())
        close(o3, a.T @ b - 1)


def test_jit_errors_name_the_problem():
    x = np.ones((2, 5), np.float32)
    with pytest.raises(NotImplementedError, match=r"numpy\.sin is not supported"):
        cuvil.jit(lambda x: np.sin(x))(x)
    with pytest.raises(NotImplementedError, match=r"numpy\.cumsum is not supported"):
        cuvil.jit(lambda x: np.cumsum(x))(x)
    with pytest.raises(TypeError, match="'x' is float64"):
        jit_softmax(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"shape \(2, 4\), shape_hint says \(None, 5\)"):
        jit_softmax(np.ones((2, 4), np.float32))

    def branchy(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(TypeError, match="data-dependent Python control flow"):
        cuvil.jit(branchy)(x)
    with pytest.raises(TypeError, match="must return traced arrays"):
        cuvil.jit(lambda x: 3.0)(x)
    with pytest.raises(ValueError, match="inner dims differ"):
        cuvil.jit(lambda a, b: a @ b)(x, x)


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_wheel_installs_into_a_fresh_virtualenv(tmp_path):
    """`make wheel` -> a wheel carrying libcuvil and its runtime; installed into a new virtualenv
    of Debian's Python (its NumPy from python3-numpy; no project packages), it imports, compiles
    the bundled model with its own libcuvil and classifies the bundled sample as the checkout's
    build does."""
    build = Path(os.environ.get("CUVIL_BUILD", REPO / "build"))
    build = Path(str(build).removesuffix("-asan"))  # the plain build (see _use_a_loadable_libcuvil)
    r = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "wheel", f"BUILD={build}",
                        f"WHEEL_DIR={tmp_path / 'dist'}"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = list((tmp_path / "dist").glob("cuvil-*-py3-none-linux_*.whl"))
    assert len(wheels) == 1, wheels
    py = "/usr/bin/python3"
    assert Path(py).is_file(), "Debian's python3 is needed (tools/setup/setup.sh installs it)"
    venv = tmp_path / "venv"
    subprocess.run([py, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-deps", str(wheels[0])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    code = f"""
import cuvil, numpy as np
from cuvil import _native
lib = _native.lib()._name
assert lib.startswith({str(venv)!r}), lib
m = cuvil.compile({str(REPO / 'examples/models/tinycnn.onnx')!r})
np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(REPO / 'examples/models/sample.npy')!r})))
print("ok", lib)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("CUVIL_LIB", "CUVIL_BUILD", "PYTHONPATH")}
    env["CUVIL_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok")
    want = cuvil.compile(REPO / "examples/models/tinycnn.onnx")(np.load(REPO / "examples/models/sample.npy"))
    close(np.load(tmp_path / "y.npy"), want, rtol=0, atol=0)


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_demo_trains_compiles_and_evaluates_from_c(tmp_path):
    """The README's first command's demo (tools/demo.sh): a CNN trained on scikit-learn's digits,
    compiled with cuvil.compile, run from C on the held-out digits. Its accuracy is a real one
    (>= 95%) and the C program agrees with PyTorch on (nearly) every digit."""
    import re
    build = Path(str(Path(os.environ.get("CUVIL_BUILD", REPO / "build"))).removesuffix("-asan"))
    r = subprocess.run(["bash", str(REPO / "tools" / "demo.sh"), str(build), str(tmp_path / "demo")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    torch_acc = re.search(r"PyTorch: .* held-out accuracy ([\d.]+)% \((\d+)/360\)", r.stdout)
    c = re.search(r"Cuvil \(C, [\w-]+\): held-out accuracy ([\d.]+)% \((\d+)/360\); same prediction as the "
                  r"reference on (\d+)/360; latency median ([\d.]+) us", r.stdout)
    assert torch_acc and c, r.stdout
    assert float(torch_acc.group(1)) >= 95.0 and float(c.group(1)) >= 95.0, r.stdout
    assert int(c.group(3)) >= 358, r.stdout  # argmax ties aside, the same predictions
    assert abs(int(c.group(2)) - int(torch_acc.group(2))) <= 2
    assert "input: float32[1,1,8,8]" in r.stdout and "output: float32[1,10]" in r.stdout



# ---- regressions from a stranger's test of the package ------------------------------------
def dyn_mlp_onnx(tmp_path) -> Path:
    m = seeded(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5)))
    p = tmp_path / "dyn.onnx"
    torch.onnx.export(m, (torch.randn(2, 32),), str(p), input_names=["x"], dynamic_axes={"x": {0: "B"}},
                      dynamo=False)
    return p


def test_named_dims_fixed_at_compile_time_are_checked(tmp_path):
    """A named dim that is not symbolic at run time (left unbound: 1, or fixed by dims or
    input_shapes) is checked like any fixed dim (it used to pass, and the model read or wrote
    past the caller's buffers)."""
    p = dyn_mlp_onnx(tmp_path)
    for cm, n in ((cuvil.compile(p), 1), (cuvil.compile(p, dims={"B": 4}), 4),
                  (cuvil.compile(p, input_shapes={"x": (3, 32)}), 3)):
        assert cm.inputs[0].shape == (n, 32) and not cm.symbols
        with pytest.raises(ValueError, match=f"dim 0 is {n + 1}, the model takes \\({n}, 32\\)"):
            cm(np.ones((n + 1, 32), np.float32))
        assert cm(np.ones((n, 32), np.float32)).shape == (n, 5)
    with pytest.raises(ValueError, match="without '='"):
        cuvil.compile(p, input_shapes={"x": ("a=b", 32)})


def test_close_while_another_thread_runs(tmp_path):
    """close() waits for calls in flight; later calls raise. (It crashed the process before.)"""
    code = f"""
import sys, threading, time, numpy as np
sys.path.insert(0, {str(REPO / 'python')!r})
import cuvil, torch
torch.manual_seed(0)
m = cuvil.compile(torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3), torch.nn.ReLU()).eval(), torch.randn(4, 3, 64, 64))
x = np.random.rand(4, 3, 64, 64).astype(np.float32)
outcome = []
def work():
    try:
        for _ in range(200):
            m(x)
        outcome.append("done")
    except cuvil.CuvilError as e:
        outcome.append(str(e))
t = threading.Thread(target=work); t.start(); time.sleep(0.05); m.close(); t.join()
assert outcome in (["done"], ["the model was closed"]), outcome
print("ok", outcome)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CUVIL_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr[-3000:]


def test_torch_export_leaves_caller_tensors_and_modes_alone():
    class Inplace(torch.nn.Module):
        def forward(self, x):
            x = x.clone()
            x.add_(1)
            return x * 2

    x = torch.ones(2, 2)
    assert torch.equal(cuvil.compile(Inplace(), x)(x), torch.full((2, 2), 4.0)) and torch.equal(x, torch.ones(2, 2))
    m = seeded(SmallCNN())
    m.train()
    m.bn.eval()  # a frozen BatchNorm in a model being trained
    cuvil.compile(m, torch.randn(1, 3, 12, 12))
    assert m.training and m.c1.training and not m.bn.training


def test_torch_compile_refuses_input_mutation_and_follows_scalars():
    def mutate(x):
        x.add_(1)
        return x * 2
    with pytest.raises(Exception, match="updates its inputs in place"):
        torch.compile(mutate, backend="cuvil")(torch.ones(2, 2))

    def scaled(x, s):
        return (x * s).tanh()
    cf = torch.compile(scaled, backend="cuvil")
    x = torch.randn(3, 4)
    for s in (2.0, 3.0, 2.0, 0.5):  # a float dynamo turns into a tensor read by .item()
        close(cf(x, s).numpy(), scaled(x, s).numpy())


def test_transformer_layers_export():
    """nn.MultiheadAttention / TransformerEncoderLayer take a fused path under no_grad that the
    ONNX exporter cannot write: the export runs outside no_grad."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64,
                                                                         batch_first=True), 2).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        want = layer(x).numpy()
    close(cuvil.compile(layer, x)(x).numpy(), want, rtol=1e-4, atol=1e-4)


def test_compiles_from_several_threads():
    errors, models = [], [seeded(ResMLP()) for _ in range(4)]

    def work(i):
        try:
            x = torch.randn(3, 32)
            close(cuvil.compile(models[i], x)(x).numpy(), models[i](x).detach().numpy())
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    run_in_threads(work, 4)
    assert not errors, errors


def test_torch_compile_inference_tensors_and_grad_warning():
    with torch.inference_mode():
        m = seeded(ResMLP())
        x = torch.randn(3, 32)
        close(torch.compile(m, backend="cuvil")(x).numpy(), m(x).numpy())
    m2 = seeded(ResMLP())
    with pytest.warns(UserWarning, match="do not track gradients"):
        torch.compile(m2, backend="cuvil")(torch.randn(3, 32))


def test_argument_checks():
    m = seeded(ResMLP())
    x = torch.randn(2, 32)
    for bad in (0, -1, 2.5, True, 10000):
        with pytest.raises(ValueError, match="threads must be an int"):
            cuvil.compile(m, x, threads=bad)
    with pytest.raises(ValueError, match="opt_level"):
        cuvil.compile(m, x, opt_level=2.7)
    with pytest.raises(ValueError, match="no input 1"):
        cuvil.compile(m, x, input_shapes={1: (2, 32)})
    with pytest.raises(ValueError, match="dim 0 is 1099511627776, the example's is 2"):
        cuvil.compile(m, x, input_shapes={0: (2**40, 32)})
    cm = cuvil.compile(m, x.numpy())  # a NumPy example is one input, not a batch of them
    close(cm(x.numpy()), m(x).detach().numpy())
    with pytest.raises(TypeError, match="dtype torch.bfloat16"):
        cm(x.to(torch.bfloat16))
    with pytest.raises(cuvil.CuvilError, match="not a loadable shared library"):
        cuvil.load(REPO / "README.md")


def test_cache_recovers_and_failed_compiles_leave_nothing(tmp_path):
    m = small_onnx()
    onnx.save(m, tmp_path / "m.onnx")
    code = (f"import sys, numpy as np; sys.path.insert(0, {str(REPO / 'python')!r}); import cuvil; "
            f"m = cuvil.compile({str(tmp_path / 'm.onnx')!r}); print(m.path); "
            f"np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r})))")
    x = np.random.RandomState(1).rand(1, 3, 10, 10).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for damage in (None, b"", b"not a library"):  # each in a fresh process (a loaded library stays mapped)
        if damage is not None:
            so.write_bytes(damage)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        so = Path(r.stdout.strip())
        close(np.load(tmp_path / "y.npy"), ort_run(m, {"x": x})[0])
    key_dir = so.parent
    bad = small_onnx()
    bad.graph.node[0].op_type = "NoSuchOp"
    before = set(Path(os.environ["CUVIL_CACHE_DIR"]).iterdir())
    with pytest.raises(cuvil.CuvilError, match="NoSuchOp"):
        cuvil.compile(bad)
    assert set(Path(os.environ["CUVIL_CACHE_DIR"]).iterdir()) == before and key_dir in before


def test_jit_refuses_what_it_cannot_trace():
    x = np.ones((2, 3), np.float32)
    for f, what in ((lambda x: x ** 2, "power"), (lambda x: x[0], "indexing"),
                    (lambda x: x.astype(np.float32), ".astype"), (lambda x: x.min(), ".min")):
        with pytest.raises(NotImplementedError, match=what):
            cuvil.jit(f)(x)
    with pytest.raises(TypeError, match="only named parameters"):
        cuvil.jit(lambda *xs: xs[0])
    with pytest.raises(TypeError, match="'ws' is a list"):
        cuvil.jit(lambda x, ws: x @ ws[0])(x, [np.ones((3, 3), np.float32)])


# ---- issue #30: what users type and see ----------------------------------------------------
def test_compile_errors_name_the_users_file(tmp_path, monkeypatch):
    bad = small_onnx()
    bad.graph.node[1].op_type = "NoSuchOp"
    onnx.save(bad, tmp_path / "bad.onnx")
    for given in (str(tmp_path / "bad.onnx"), "bad.onnx"):
        monkeypatch.chdir(tmp_path)
        with pytest.raises(cuvil.CuvilError, match="NoSuchOp") as e:
            cuvil.compile(given)
        assert str(e.value).startswith(given + ":"), str(e.value)
        assert os.environ["CUVIL_CACHE_DIR"] not in str(e.value)
    with pytest.raises(cuvil.CuvilError) as e:
        cuvil.compile(bad.SerializeToString())
    assert str(e.value).startswith("<ONNX bytes>:") and os.environ["CUVIL_CACHE_DIR"] not in str(e.value)


def test_compiling_onnx_does_not_import_torch(tmp_path):
    """An ONNX path, bytes or ModelProto compiles and runs without importing torch (4-5 s)."""
    onnx.save(small_onnx(), tmp_path / "m.onnx")
    code = f"""
import sys
sys.path.insert(0, {str(REPO / 'python')!r})
import numpy as np, onnx, cuvil
x = np.ones((1, 3, 10, 10), np.float32)
p = {str(tmp_path / 'm.onnx')!r}
for src in (p, open(p, 'rb').read(), onnx.load(p)):
    y = cuvil.compile(src)(x)
    assert y.shape == (1, 8, 1, 1)
assert 'torch' not in sys.modules, 'torch was imported'
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CUVIL_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr[-3000:]


# ---- issue #30: torch models: data-dependent control flow, argument names, input_shapes ----
class DataBranch(torch.nn.Module):
    """Its result depends on the sign of x.sum(): a trace would keep the example's side."""

    def forward(self, x):
        if x.sum() > 0:  # the data-dependent line
            return x * 2
        return x - 10


class DataLoop(torch.nn.Module):
    """A loop whose count is a value of x: a trace would unroll the example's count."""

    def forward(self, x):
        n = int(x.abs().sum())  # the data-dependent line
        y = x
        for _ in range(n):
            y = torch.tanh(y) + 1
        return y


class CondBranch(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 10, (x,))


def _line_of(cls, marker="the data-dependent line") -> str:
    import inspect
    lines, start = inspect.getsourcelines(cls.forward)
    return f"{__file__}:{start + next(i for i, ln in enumerate(lines) if marker in ln)}"


def _pytorch_or_refusal(src, model, examples, method="auto", where=None, why="depends on its input's values"):
    """Compiling src at examples[0] either gives PyTorch's answer at every example (both sides
    of the branch, other loop counts) or raises CuvilError saying why (and where)."""
    try:
        cm = cuvil.compile(src, examples[0], **({} if method == "auto" else {"_torch_method": method}))
    except cuvil.CuvilError as e:
        assert why in str(e), str(e)
        if where:
            assert where in str(e), str(e)
        return "refused"
    for x in examples:
        close(cm(x).numpy(), model(x).numpy())
    return "compiled"


@pytest.mark.parametrize("method", ["auto", "torchscript"])
@pytest.mark.parametrize("cls", [DataBranch, DataLoop])
def test_data_dependent_control_flow_is_never_baked_in(cls, method):
    """torch.export (auto) and the TorchScript tracer (its fallback, forced here) each refuse a
    branch or a loop count that depends on the input's values, naming the user's line (they
    used to give -2 where PyTorch gives -11, 1.716 where it gives 1.959)."""
    model = cls().eval()
    pos, neg = torch.full((1, 2), 0.5), torch.full((1, 2), -0.5)
    small = torch.full((1, 2), 0.25)   # another loop count than pos's
    assert _pytorch_or_refusal(model, model, [pos, neg, small], method, where=_line_of(cls)) == "refused"


def test_torch_cond_and_scripted_branches_compile_both_paths():
    """torch.cond exports as an ONNX If, a scripted `if` too: Cuvil compiles the If as control
    flow, so both match PyTorch on either side of the branch (never the example's branch for
    every input)."""
    pos, neg = torch.full((1, 2), 0.5), torch.full((1, 2), -0.5)
    for src, model in ((CondBranch(), CondBranch()), (torch.jit.script(DataBranch()), DataBranch())):
        assert _pytorch_or_refusal(src, model, [pos, neg, pos], why="control flow") == "compiled"


def test_torchscript_file_compiles_from_input_shapes_with_its_argument_names(tmp_path):
    """The form users type: a TorchScript file loaded, input_shapes instead of example inputs,
    a target; the inputs keep the forward's argument names (x, y) for nn.Module, TorchScript
    and fx.GraphModule, and input_shapes takes those names or indices."""
    class TwoIn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = SmallCNN()

        def forward(self, x, bias):
            return self.cnn(x) + bias

    model = seeded(TwoIn())
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    b = torch.randn(1, 10, generator=torch.Generator().manual_seed(2))
    want = model(x, b).detach().numpy()
    p = tmp_path / "m.pt"
    torch.jit.save(torch.jit.trace(model, (x, b)), str(p))
    target = "x86_64-avx2" if "x86_64-avx2" in [d["target"] for d in cuvil.runtime.list_devices()] else "generic"
    forms = {"load": torch.jit.load(str(p)), "module": model, "script": torch.jit.script(model),
             "fx": torch.fx.symbolic_trace(model)}
    for form, src in forms.items():
        shapes = {"x": (1, 3, 12, 12), "bias": (1, 10)} if form != "fx" else {0: (1, 3, 12, 12), 1: (1, 10)}
        cm = cuvil.compile(src, input_shapes=shapes, target=target)
        assert [s.name for s in cm.inputs] == ["x", "bias"], (form, cm.inputs)
        assert cm.target == target
        close(cm(x=x, bias=b).numpy(), want)
    # a symbol shared by two inputs, its range in dims, without examples: symbolic
    for form in ("load", "module"):
        cm = cuvil.compile(forms[form], input_shapes={"x": ("n", 3, 12, 12), "bias": ("n", 10)}, dims={"n": (1, 4)})
        assert cm.inputs[0].shape == ("n", 3, 12, 12) and cm.symbols == {"n": (1, 4)}
        for n in (1, 3):
            xn, bn = x.repeat(n, 1, 1, 1), b.repeat(n, 1)
            close(cm(xn, bn).numpy(), model(xn, bn).detach().numpy())
    cm = cuvil.compile(model, input_shapes={"x": ((1, 4), 3, 12, 12), "bias": (1, 10)})   # a range: x_dim0
    assert cm.symbols == {"x_dim0": (1, 4)}
    for n in (1, 3):
        xn = x.repeat(n, 1, 1, 1)
        close(cm(xn, b).numpy(), model(xn, b).detach().numpy())
    with pytest.raises(TypeError, match="missing: bias"):
        cuvil.compile(model, input_shapes={"x": (1, 3, 12, 12)})
    with pytest.raises(ValueError, match=r"no input 'input'.*x, bias"):
        cuvil.compile(model, (x, b), input_shapes={"input": (1, 3, 12, 12)})


def test_torch_models_compile_without_the_torchscript_exporter(monkeypatch):
    """torch warns that its TorchScript exporter will be removed: without it, a torch.export-able
    model still compiles (torch's dynamo ONNX exporter writes the graph)."""
    real = torch.onnx.export

    def export(*args, dynamo=True, **kwargs):
        if not dynamo:
            raise ImportError("the TorchScript-based exporter is gone")
        return real(*args, dynamo=dynamo, **kwargs)
    monkeypatch.setattr(torch.onnx, "export", export)
    model = seeded(SmallCNN())
    x = torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(3))
    cm = cuvil.compile(model, x, dims={"batch": (1, 4)})
    assert [s.name for s in cm.inputs] == ["x"] and cm.symbols == {"batch": (1, 4)}
    for n in (1, 4):
        close(cm(x[:1].repeat(n, 1, 1, 1)).numpy(), model(x[:1].repeat(n, 1, 1, 1)).detach().numpy())


# ---- issue #30: torch.compile and @cuvil.jit ------------------------------------------------
def test_torch_compile_runs_what_cuvil_cannot_compile_eagerly():
    """A graph with an op Cuvil lacks (a random draw: Bernoulli, here of probability 1) runs in
    PyTorch, with one warning, at the first call and after (it used to raise at the first call)."""
    torch.manual_seed(0)

    class Draw(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * torch.bernoulli(torch.ones_like(x))
    m = Draw().eval()
    c = torch.compile(m, backend="cuvil")
    import warnings
    with warnings.catch_warnings(record=True) as w, torch.no_grad():
        warnings.simplefilter("always")
        for i in range(3):
            x = torch.randn(1, 2, 6, 6, generator=torch.Generator().manual_seed(i))
            close(c(x).numpy(), m(x).numpy())
    ours = [x for x in w if "cuvil backend: a graph runs eagerly" in str(x.message)]
    assert len(ours) == 1 and ("Bernoulli" in str(ours[0].message) or "RandomUniform" in str(ours[0].message)), \
        [str(x.message) for x in w]


def test_jit_zero_d_failed_builds_lru_and_nan_constants(tmp_path, monkeypatch):
    x0 = np.array(3.0, np.float32)
    y = cuvil.jit(lambda x: x * 2.0 + 1.0)(x0)
    assert y.shape == () and y == 7.0   # (1,) before
    # a failed build leaves no folder behind
    import tempfile
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    huge = cuvil.jit(lambda a: a @ a.T)   # a 100000 x 100000 output: over the tensor_bytes limit
    with pytest.raises(cuvil.CuvilError, match="tensor_bytes"):
        huge(np.ones((100000, 1), np.float32))
    assert not list(tmp_path.glob("cuvil-jit-*")), list(tmp_path.iterdir())
    # at most cache_size builds, the least recently used out first
    f = cuvil.jit(lambda a: a + 1.0, cache_size=2)
    for n in (1, 2, 1, 3):
        close(f(np.zeros(n, np.float32)), np.ones(n))
    assert [k[0][1] for k in f.cache] == [(1,), (3,)] and f.builds == 3
    f(np.zeros(1, np.float32))
    assert f.builds == 3
    f(np.zeros(2, np.float32))   # evicted: built again
    assert f.builds == 4 and len(f.cache) == 2
    # a NaN constant finds its build (compared by bits); -0.0 is not 0.0
    g = cuvil.jit(lambda a, s: a * s)
    ones = np.ones(2, np.float32)
    for s in (float("nan"), float("nan"), 0.0, -0.0):
        out = g(ones, s)
        assert np.array_equal(out, ones * np.float32(s), equal_nan=True) and np.signbit(out[0]) == np.signbit(s)
    assert g.builds == 3
