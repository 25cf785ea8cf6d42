"""The command lines themselves: the --emit forms, --info, --bench --json, --threads, the input
formats, --opt-level, --target, --name, and how outputs are named on disk."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

import cuvil_testlib as tl
from onnx_cases import Case, R, node, small_cnn


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """small_cnn saved to disk: (path, inputs, ORT outputs)."""
    d = tmp_path_factory.mktemp("small")
    m, inputs, ref = small_cnn().build()
    p = d / "small.onnx"
    onnx.save(m, p)
    return p, inputs, ref


@pytest.fixture(scope="module")
def small_so(small, tmp_path_factory):
    p, inputs, ref = small
    return tl.compile(p, tmp_path_factory.mktemp("small_so")), inputs, ref


# --------------------------------------------------------------------------------------------
# --emit
# --------------------------------------------------------------------------------------------

def test_emit_so_writes_library_and_header(small, tmp_path):
    p, _, _ = small
    so = tl.compile(p, tmp_path, stem="net")
    assert so == tmp_path / "net.so"
    assert so.read_bytes()[:4] == b"\x7fELF", "the output is not an ELF shared library"
    header = (tmp_path / "net.h").read_text()
    assert "#include" in header or "cuvil_model" in header, header[:500]


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_emit_c_builds_with_make(small, tmp_path):
    p, inputs, ref = small
    src = tl.compile(p, tmp_path, emit="c", stem="net_c")
    assert src.is_dir(), f"--emit c should write a folder, got {src}"
    assert (src / "Makefile").is_file(), f"no Makefile in {sorted(src.iterdir())}"
    assert list(src.glob("*.c")), f"no .c file in {sorted(src.iterdir())}"
    make = subprocess.run(["make", "-C", str(src)], capture_output=True, text=True, timeout=600)
    assert make.returncode == 0, f"make failed:\n{make.stdout}\n{make.stderr}"
    libs = sorted(src.rglob("*.so"))
    assert libs, f"make built no .so: {sorted(q.name for q in src.rglob('*'))}"
    # what make built is a model like any other
    got = tl.run(libs[0], inputs, tmp_path / "run")
    tl.assert_outputs_close(got, ref)


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_emit_c_is_relocatable(small, tmp_path):
    """The emitted folder still builds after it is moved elsewhere (no paths relative to
    where it was written)."""
    p, inputs, ref = small
    src = tl.compile(p, tmp_path / "a", emit="c", stem="net_c")
    moved = tmp_path / "b" / "moved"
    moved.parent.mkdir()
    shutil.move(str(src), moved)
    make = subprocess.run(["make", "-C", str(moved)], capture_output=True, text=True,
                          timeout=600)
    assert make.returncode == 0, f"make failed after a move:\n{make.stdout}\n{make.stderr}"
    assert sorted(moved.rglob("*.so"))


@pytest.mark.parametrize("emit", ["ir", "dot"])
def test_emit_text_to_file(small, emit, tmp_path):
    p, _, _ = small
    out = tl.compile(p, tmp_path, emit=emit)
    text = out.read_text()
    assert text.strip(), f"--emit {emit} wrote an empty file"
    if emit == "dot":
        assert text.lstrip().startswith("digraph"), text[:200]
        _check_dot(text, tmp_path)
    else:
        # the IR names the ops it is made of (case aside; Gemm may have become a matmul)
        low = text.lower()
        assert "conv" in low, text[:2000]


@pytest.mark.parametrize("emit", ["ir", "dot"])
def test_emit_text_to_stdout(small, emit, tmp_path):
    p, _, _ = small
    proc = tl.compile_raw(p, "-", emit=emit, cwd=tmp_path)
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-compile", proc)
    assert proc.stdout.strip(), f"--emit {emit} --output - printed nothing"
    assert not list(tmp_path.iterdir()), f"--output - wrote files: {list(tmp_path.iterdir())}"
    if emit == "dot":
        assert proc.stdout.lstrip().startswith("digraph"), proc.stdout[:200]
        _check_dot(proc.stdout, tmp_path)


def _check_dot(text, tmp_path):
    """Graphviz accepts it, where Graphviz is installed."""
    dot = shutil.which("dot")
    if dot:
        r = subprocess.run([dot, "-Tsvg", "-o", str(tmp_path / "g.svg")], input=text,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"dot refused the graph:\n{r.stderr}\n{text[:2000]}"


def test_emit_ir_at_opt_levels_0_and_3(small, tmp_path):
    """Both levels print IR; optimising does not blow the graph up."""
    p, _, _ = small
    o0 = tl.compile(p, tmp_path, emit="ir", stem="o0", opt_level=0).read_text()
    o3 = tl.compile(p, tmp_path, emit="ir", stem="o3", opt_level=3).read_text()
    assert o0.strip() and o3.strip()
    assert len(o3.splitlines()) <= len(o0.splitlines()) * 2


# --------------------------------------------------------------------------------------------
# --info, --bench, --threads, input formats
# --------------------------------------------------------------------------------------------

def test_info_reports_built_dims(tmp_path):
    m, _, _ = small_cnn("symbolic").build()
    p = tmp_path / "sym.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build", dims={"batch": 3})
    proc = tl.run_tool("cuvil-run", [so, "--info"], cwd=tmp_path)
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-run --info", proc)
    info = proc.stdout
    assert "x" in info and "y" in info, info
    assert "batch" in info, f"--info does not name the symbolic dim 'batch':\n{info}"
    # the dims the model was built for: [3, 3, 8, 8] in and [3, 10] out, in some notation
    assert re.search(r"batch\s*[=:]\s*3\b", info) or re.search(r"\b3\D{1,3}3\D{1,3}8\D{1,3}8\b",
                                                                info), info
    assert re.search(r"\b3\D{1,3}10\b", info), f"output dims [3, 10] not in --info:\n{info}"


def test_info_reports_metadata(small_so, tmp_path):
    so, _, _ = small_so
    proc = tl.run_tool("cuvil-run", [so, "--info"], cwd=tmp_path)
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-run --info", proc)
    low = proc.stdout.lower()
    assert "float32" in low or "float" in low, proc.stdout
    # the descriptor carries the model's sha256 and the target
    assert re.search(r"[0-9a-f]{16,}", low), f"no sha256 in --info:\n{proc.stdout}"


def test_symbolic_dim_defaults_to_1(tmp_path):
    """Without --dim a symbolic dim is 1 (cuvil-compile --help: '--dim NAME=N ... (default
    1)')."""
    m, _, _ = small_cnn("symbolic").build()
    p = tmp_path / "sym.onnx"
    onnx.save(m, p)
    x = tl.seeded_rng("default-dim").standard_normal((1, 3, 8, 8), dtype=np.float32)
    got = tl.compile_and_run(p, {"x": x}, tmp_path)
    tl.assert_outputs_close(got, tl.ort_run(p, {"x": x}))


def test_symbolic_batch3_model_runs_batch3(tmp_path):
    m, inputs, ref = small_cnn("symbolic").build()     # dims={"batch": 3}
    p = tmp_path / "sym.onnx"
    onnx.save(m, p)
    assert inputs["x"].shape[0] == 3
    got = tl.compile_and_run(p, inputs, tmp_path, dims={"batch": 3})
    tl.assert_outputs_close(got, ref)


def test_bench_json(small_so, tmp_path):
    so, inputs, _ = small_so
    proc, out_dir = tl.run_raw(so, inputs, tmp_path, extra=["--bench", "20", "--json"])
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-run --bench --json", proc)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, f"--json should print one line, got:\n{proc.stdout}"
    r = json.loads(lines[0])
    for k in ("median_ms", "p99_ms", "min_ms", "load_ms", "first_ms", "peak_rss_mb"):
        assert k in r, f"{k} missing from {r}"
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r[k])
    assert r["min_ms"] <= r["median_ms"] <= r["p99_ms"], r
    assert r["peak_rss_mb"] > 1, r


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_threads_same_result(small_so, threads, tmp_path):
    so, inputs, ref = small_so
    got = tl.run(so, inputs, tmp_path, threads=threads)
    tl.assert_outputs_close(got, ref)


def test_threads_on_conv_heavy_model(tmp_path):
    """Threads split real work: a bigger conv, batch 4, compared at 1 and 2 threads."""
    c = Case("conv-threads", 13,
             [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
              node("Relu", ["c"], ["r"]),
              node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1], group=4)],
             {"x": [4, 16, 28, 28]},
             {"w": R(32, 16, 3, 3), "b": R(32), "w2": R(32, 8, 3, 3)})
    m, inputs, ref = c.build()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build")
    one = tl.run(so, inputs, tmp_path / "t1", threads=1)
    two = tl.run(so, inputs, tmp_path / "t2", threads=2)
    tl.assert_outputs_close(one, ref)
    tl.assert_outputs_close(two, ref)


def _thp_setting(name):
    try:
        text = open(f"/sys/kernel/mm/transparent_hugepage/{name}").read()
    except OSError:
        return None
    m = re.search(r"\[([\w+]+)\]", text)
    return m.group(1) if m else None


def test_arena_in_huge_pages(tmp_path):
    """A model's arena of 2 MB or more asks Linux for 2 MB pages (madvise): with transparent
    huge pages in 'madvise' mode (Debian's default) the process running it has AnonHugePages,
    which nothing else in cuvil-run asks for. Its output still matches. (In 'always' mode every
    large block gets them, with or without the madvise.)"""
    mode, defrag = _thp_setting("enabled"), _thp_setting("defrag")
    if mode not in ("madvise", "always"):
        pytest.skip(f"transparent huge pages are {mode!r} on this machine, not 'madvise' or 'always'")
    if defrag == "never" or not os.path.exists("/proc/self/smaps_rollup"):
        pytest.skip(f"no 2 MB page at first touch here (THP defrag {defrag!r}) or no /proc/PID/smaps_rollup")
    c = Case("conv-huge-arena", 13,
             [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
              node("Relu", ["c"], ["r"]),
              node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])],
             {"x": [1, 8, 256, 256]},          # r, in the arena: 2 MB
             {"w": R(8, 8, 3, 3), "w2": R(8, 8, 3, 3)})
    m, inputs, ref = c.build()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build")
    tl.assert_outputs_close(tl.run(so, inputs, tmp_path / "check"), ref)
    x = tl.write_input(inputs["x"], tmp_path / "x.npy")
    proc = subprocess.Popen([str(tl.bin_path("cuvil-run")), str(so), "--input", f"x={x}", "--bench", "100000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    huge_kb, deadline = 0, time.monotonic() + 20
    try:
        while not huge_kb and proc.poll() is None and time.monotonic() < deadline:
            try:
                rollup = open(f"/proc/{proc.pid}/smaps_rollup").read()
            except OSError:
                break
            m = re.search(r"^AnonHugePages:\s+(\d+) kB", rollup, re.M)
            huge_kb = int(m.group(1)) if m else 0
            time.sleep(0.005)
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert huge_kb >= 2048, f"no 2 MB page in cuvil-run's memory (THP {mode!r}); its stderr: {err[-2000:]}"


def test_pb_input(small_so, tmp_path):
    so, inputs, ref = small_so
    got = tl.run(so, inputs, tmp_path, fmt="pb")
    tl.assert_outputs_close(got, ref)


def test_output_files_only_in_output_dir(small_so, tmp_path):
    so, inputs, _ = small_so
    proc, out_dir = tl.run_raw(so, inputs, tmp_path)
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-run", proc)
    assert sorted(q.name for q in out_dir.iterdir()) == ["y.npy"]


def test_output_names_on_disk(tmp_path):
    """Output names are file names as they are, except that a '/' is sanitised."""
    c = Case("names", 13,
             [node("Relu", ["x"], ["head/logits"]), node("Sigmoid", ["x"], ["probs:0"]),
              node("Tanh", ["x"], ["out.v2"])],
             {"x": [2, 3]}, outputs=["head/logits", "probs:0", "out.v2"])
    m, inputs, ref = c.build()
    p = tmp_path / "names.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build")
    proc, out_dir = tl.run_raw(so, inputs, tmp_path / "run")
    if proc.returncode != 0:
        raise tl.CuvilError("cuvil-run", proc)
    files = sorted(q.name for q in out_dir.rglob("*") if q.is_file())
    assert "probs:0.npy" in files and "out.v2.npy" in files, files
    assert len(files) == 3 and all("/" not in f for f in files), files
    assert not any(q.is_dir() for q in out_dir.iterdir()), "an output name made a folder"
    tl.assert_outputs_close(tl.read_outputs(out_dir), ref)


def test_rerun_overwrites_outputs(small_so, tmp_path):
    so, inputs, ref = small_so
    tl.run(so, {"x": np.zeros_like(inputs["x"])}, tmp_path)
    got = tl.run(so, inputs, tmp_path)
    tl.assert_outputs_close(got, ref)


# --------------------------------------------------------------------------------------------
# --opt-level, --target, --name
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_opt_levels_agree(small, level, tmp_path):
    p, inputs, ref = small
    got = tl.compile_and_run(p, inputs, tmp_path, opt_level=level)
    tl.assert_outputs_close(got, ref)


@pytest.mark.parametrize("target", ["generic", "x86_64-avx2"])
def test_targets_agree(small, target, tmp_path):
    if target == "x86_64-avx2":
        flags = open("/proc/cpuinfo").read()
        assert " avx2" in flags and " fma" in flags, "this machine has no AVX2/FMA"
    p, inputs, ref = small
    got = tl.compile_and_run(p, inputs, tmp_path, target=target)
    tl.assert_outputs_close(got, ref)


ABI_PROBE = r"""
import ctypes, json, sys

class Desc(ctypes.Structure):       # the leading fields of cuvil_model_desc
    _fields_ = [("abi_version", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("n_inputs", ctypes.c_int), ("n_outputs", ctypes.c_int)]

out = []
for path, prefix in zip(sys.argv[1::2], sys.argv[2::2]):
    lib = ctypes.CDLL(path)          # RTLD_LOCAL, as cuvil_model.h shows
    r = {"path": path, "has_prefix_model": hasattr(lib, prefix + "_model"),
         "has_entry": hasattr(lib, "cuvil_model_entry")}
    if r["has_entry"]:
        lib.cuvil_model_entry.restype = ctypes.POINTER(Desc)
        d = lib.cuvil_model_entry().contents
        r.update(abi=d.abi_version, name=d.name.decode(), n_in=d.n_inputs, n_out=d.n_outputs)
    if r["has_prefix_model"]:
        f = getattr(lib, prefix + "_model")
        f.restype = ctypes.POINTER(Desc)
        r["prefix_model_name"] = f().contents.name.decode()
    out.append(r)
print(json.dumps(out))
"""


def _abi_probe(*lib_prefix_pairs):
    """Loads the libraries in a separate Python (a bad library must not take pytest down)
    and reads the head of each descriptor."""
    import sys

    args = [str(a) for pair in lib_prefix_pairs for a in pair]
    r = subprocess.run([sys.executable, "-c", ABI_PROBE, *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, f"loading {args} failed ({r.returncode}):\n{r.stderr}"
    return json.loads(r.stdout)


def test_name_prefix_and_abi(small, tmp_path):
    p, inputs, ref = small
    so = tl.compile(p, tmp_path, stem="net", name="mynet")
    header = (tmp_path / "net.h").read_text()
    for sym in ("mynet_create", "mynet_run", "mynet_model"):
        assert sym in header, f"{sym} not declared in the header:\n{header[:3000]}"
    (d,) = _abi_probe((so, "mynet"))
    assert d["has_entry"], f"{so.name} does not export cuvil_model_entry"
    assert d["has_prefix_model"], f"{so.name} does not export mynet_model"
    abi = int(__import__("re").search(r"#define CUVIL_MODEL_ABI_VERSION (\d+)",
                                      (tl.REPO / "include/cuvil/cuvil_model.h").read_text()).group(1))
    assert (d["abi"], d["name"], d["n_in"], d["n_out"]) == (abi, "mynet", 1, 1), d
    assert d["prefix_model_name"] == "mynet", d
    got = tl.run(so, inputs, tmp_path / "run")
    tl.assert_outputs_close(got, ref)


def test_two_models_in_one_process(small, tmp_path):
    """Two compiled models load side by side, each answering with its own descriptor."""
    p, _, _ = small
    a = tl.compile(p, tmp_path / "a", name="net_a")
    b = tl.compile(p, tmp_path / "b", name="net_b")
    da, db = _abi_probe((a, "net_a"), (b, "net_b"))
    assert (da["name"], db["name"]) == ("net_a", "net_b"), (da, db)
    assert (da["prefix_model_name"], db["prefix_model_name"]) == ("net_a", "net_b"), (da, db)


def test_compile_overwrites_its_own_previous_output(small, tmp_path):
    p, inputs, ref = small
    first = tl.compile(p, tmp_path, stem="m", opt_level=0)
    before = first.read_bytes()
    so = tl.compile(p, tmp_path, stem="m")
    assert so.read_bytes()[:4] == b"\x7fELF"
    assert so.read_bytes() != before, "the second compile (another opt level) did not replace the library"
    tl.assert_outputs_close(tl.run(so, inputs, tmp_path / "run"), ref)


@pytest.mark.parametrize("stale", ["m.so", "m.h"])
def test_compile_refuses_to_overwrite_files_it_did_not_write(small, stale, tmp_path):
    """A file at the output (or header) path that Cuvil did not write is a user's: refused, kept."""
    p, _, _ = small
    (tmp_path / stale).write_text("a user's file\n")
    proc = tl.compile_raw(p, tmp_path / "m.so")
    assert proc.returncode == 1, proc.stderr
    assert "was not written by Cuvil" in proc.stderr and stale in proc.stderr, proc.stderr
    assert (tmp_path / stale).read_text() == "a user's file\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == [stale], list(tmp_path.iterdir())


def test_dump_ir_env_writes_every_pass(small, tmp_path, monkeypatch):
    """CUVIL_DUMP_IR=DIR: the IR after loading and after each pass, as text and DOT, and the final
    graph as cuvil_ir.ir / cuvil_ir.dot, in a new folder per compile (a second compile gets
    another folder; nothing is overwritten); DIR is made when missing."""
    p, inputs, ref = small
    dump = tmp_path / "dump"
    monkeypatch.setenv("CUVIL_DUMP_IR", str(dump))
    tl.compile(p, tmp_path / "a")
    tl.compile(p, tmp_path / "b")
    runs = sorted(dump.iterdir())
    assert len(runs) == 2 and all(r.name.startswith("ir-") for r in runs), runs
    files = sorted(f.name for f in runs[0].iterdir())
    assert files[:2] == ["00-load.dot", "00-load.ir"] and "01-shape_infer.ir" in files, files
    assert files[-2:] == ["cuvil_ir.dot", "cuvil_ir.ir"], files
    assert len(files) >= 10 and len(files) % 2 == 0
    last_ir = runs[0] / [f for f in files if f.endswith(".ir") and f[0].isdigit()][-1]
    final = (runs[0] / "cuvil_ir.ir").read_text()
    assert final == last_ir.read_text(), "the final graph is the one after the last pass"
    assert final.startswith("graph \"small_cnn\"") and " = conv " in final
    for f in runs[0].glob("*.dot"):
        _check_dot(f.read_text(), tmp_path)


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes"])
def test_dump_ir_env_on_dumps_in_working_directory(small, tmp_path, monkeypatch, value):
    """CUVIL_DUMP_IR=1 (a switch, not a path): the dump goes to ./cuvil-ir, and the compile works."""
    p, inputs, ref = small
    monkeypatch.setenv("CUVIL_DUMP_IR", value)
    work = tmp_path / "work"
    work.mkdir()
    r = tl.compile_raw(p, tmp_path / "m.so", cwd=work)
    assert r.returncode == 0, r.stderr
    assert not (work / value).exists()
    (run,) = (work / "cuvil-ir").iterdir()
    _check_dot((run / "cuvil_ir.dot").read_text(), tmp_path)
    tl.assert_outputs_close(tl.run(tmp_path / "m.so", inputs, tmp_path / "run"), ref)


@pytest.mark.parametrize("value", ["0", "false", "off", ""])
def test_dump_ir_env_off(small, tmp_path, monkeypatch, value):
    p, _, _ = small
    monkeypatch.setenv("CUVIL_DUMP_IR", value)
    r = tl.compile_raw(p, tmp_path / "m.so", cwd=tmp_path)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["m.h", "m.so"]


def test_dump_ir_env_unwritable_warns_once(small, tmp_path, monkeypatch):
    """A folder that cannot be made (its parent is a file): one warning, the compile succeeds."""
    p, inputs, ref = small
    (tmp_path / "file").write_text("not a folder\n")
    monkeypatch.setenv("CUVIL_DUMP_IR", str(tmp_path / "file" / "dump"))
    r = tl.compile_raw(p, tmp_path / "m.so")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "warning: CUVIL_DUMP_IR" in lines[0] and "Not a directory" in lines[0], r.stderr
    tl.assert_outputs_close(tl.run(tmp_path / "m.so", inputs, tmp_path / "run"), ref)

def test_many_nodes_compile_as_parts(tmp_path):
    """A chain of 700 nodes is written as part files of 256 nodes each, compiled apart (and in
    parallel), linked into one library that matches ONNX Runtime; the static archive of the
    same (with the parts' objects) is recognised as Cuvil's and replaced by a second compile."""
    n = 700
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Add" if i % 2 else "Mul", [prev, "c"], [f"v{i}"]))
        prev = f"v{i}"
    c = onnx.numpy_helper.from_array(np.full((1, 16), 1.001, np.float32), "c")
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], initializer=[c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    p = tmp_path / "chain.onnx"
    onnx.save(m, p)
    src = tl.compile(p, tmp_path, emit="c", stem="src")
    parts = sorted(f.name for f in src.glob("part_*.c"))
    assert parts == [f"part_{k:04d}.c" for k in range(3)], parts
    assert "part_0002.o" in (src / ".cuvil-output").read_text()
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    so = tl.compile(p, tmp_path / "so")
    tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / "run"), tl.ort_run(p, {"x": x}))
    for _ in range(2):   # the second replaces the first: Cuvil's archive, part objects and all
        r = tl.compile_raw(p, tmp_path / "chain.a", emit="a")
        assert r.returncode == 0, r.stderr
    members = subprocess.run(["ar", "t", str(tmp_path / "chain.a")], capture_output=True, text=True).stdout.split()
    assert {"model.o", "weights.o", "part_0000.o", "part_0002.o"} <= set(members), members


def test_output_folder_with_trailing_slash(small, tmp_path):
    """--output DIR/ puts the output into DIR, named after the model (it was refused)."""
    p, inputs, ref = small
    out = tmp_path / "out"
    out.mkdir()
    r = tl.compile_raw(p, str(out) + "/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(f.name for f in out.iterdir()) == ["small.h", "small.so"]
    tl.assert_outputs_close(tl.run(out / "small.so", inputs, tmp_path / "run"), ref)
    r = tl.compile_raw(p, str(out) + "/", emit="ir", cwd=tmp_path)
    assert r.returncode == 0 and (out / "small.ir").is_file(), r.stderr
    src = tmp_path / "src"
    src.mkdir()
    r = tl.compile_raw(p, str(src) + "//", emit="c", cwd=tmp_path)
    assert r.returncode == 0 and (src / "model.c").is_file(), r.stderr
    r = tl.compile_raw(p, str(tmp_path / "nowhere") + "/", cwd=tmp_path)
    tl.assert_clean_failure(r, mentions=["no such folder"])


def test_threads_over_the_bound_says_the_bound(small, tmp_path):
    p, inputs, _ = small
    so = tl.compile(p, tmp_path)
    proc, _ = tl.run_raw(so, inputs, tmp_path / "run", threads=300)
    tl.assert_clean_failure(proc, mentions=["0..256", "CUVIL_MAX_THREADS"])
