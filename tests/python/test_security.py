"""Regression tests for the untrusted-model defects (docs/SECURITY.md): code injection through
names, data loss through outputs, crashes, overflows, hangs and runaway memory, valid models
that used to fail inside the C compiler, and interrupted or failing builds that left files.
The malformed-model corpus (test_malformed.py) holds the refusals; this file holds what needs
more than one command: models that must compile and run correctly, files that must survive,
processes that are interrupted."""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil_testlib as tl
from onnx_cases import small_cnn

pytestmark = pytest.mark.usefixtures("cuvil_works")
T = TensorProto
PAYLOAD = "b */ __attribute__((constructor)) static void pwn(void){ __builtin_trap(); } /* "


def _vi(name, shape, et=T.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def _model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _relu_chain_with_names(in_name, out_name, dim_param=None, node_name=None):
    d0 = dim_param if dim_param is not None else 2
    m = _model([helper.make_node("Relu", [in_name], ["h"], name=node_name or "relu"),
                helper.make_node("Neg", ["h"], [out_name], name="neg")],
               [_vi(in_name, [d0, 3])], [_vi(out_name, [d0, 3])])
    return m


def _leftovers(folder: Path) -> list:
    """Temporary files and build folders Cuvil may have left in folder."""
    return sorted(p.name for p in folder.iterdir() if ".cuvil-build-" in p.name or ".cuvil-old-" in p.name
                  or ".tmp" in p.name)


def _code_only(c_text: str) -> str:
    """C source with comments and string/char literals removed (a small lexer: enough to tell
    whether a text occurs as code)."""
    out, i, n = [], 0, len(c_text)
    while i < n:
        if c_text.startswith("/*", i):
            j = c_text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c_text.startswith("//", i):
            j = c_text.find("\n", i)
            i = n if j < 0 else j
        elif c_text[i] in "\"'":
            q, j = c_text[i], i + 1
            while j < n and c_text[j] != q:
                j += 2 if c_text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        else:
            out.append(c_text[i])
            i += 1
    return "".join(out)


def _nm_symbols(lib: Path) -> str:
    nm = shutil.which("nm")
    assert nm, "nm (binutils) is needed"
    return subprocess.run([nm, "-a", str(lib)], capture_output=True, text=True, check=True).stdout


# --------------------------------------------------------------------------------------------
# 1. Code injection: names are data
# --------------------------------------------------------------------------------------------

def test_dim_param_cannot_inject_code(tmp_path):
    """A dim_param that closes a comment and declares a constructor: compiled as a name only."""
    m = _relu_chain_with_names("x", "y", dim_param=PAYLOAD)
    p = tmp_path / "evil.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build", dims={PAYLOAD: 2})
    assert "pwn" not in _nm_symbols(so), "the payload was compiled as code"
    # loading the library runs no constructor (it would trap), and the name is reported intact
    info = tl.run_tool("cuvil-run", [so, "--info", "--json"])
    assert info.returncode == 0, info.stderr
    import json
    d = json.loads(info.stdout)["info"]
    assert d["inputs"][0]["dim_names"][0] == PAYLOAD
    # the generated sources and the header hold it only as an escaped literal or cut text
    src = tl.compile(p, tmp_path / "src", emit="c", dims={PAYLOAD: 2})
    for f in [src / "model.c", src / "evil.h", so.with_suffix(".h")]:
        code = _code_only(f.read_text())
        assert "pwn" not in code and "constructor" not in code, f"{f}: the payload is outside comments and strings"
    # the header compiles cleanly on its own, as a user's program would include it
    hdr = so.with_suffix(".h")
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c", str(hdr)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    got = tl.run(so, {"x": x}, tmp_path / "run")
    np.testing.assert_array_equal(got["y"], -np.maximum(x, 0))


def test_dot_output_escapes_names(tmp_path):
    """Names and dim_params that would close a DOT string and add a node stay inside labels."""
    evil = '"]; x [label="'
    m = _relu_chain_with_names('in"\\put', 'out\n"y', dim_param=evil, node_name='n"]; z [shape=box')
    p = tmp_path / "evil.onnx"
    onnx.save(m, p)
    dot_file = tl.compile(p, tmp_path, emit="dot")
    dot = shutil.which("dot")
    assert dot, "graphviz is installed by the setup"
    r = subprocess.run([dot, "-Tplain", str(dot_file)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    nodes = sorted(line.split()[1] for line in r.stdout.splitlines() if line.startswith("node "))
    assert all(n[0] in "vno" and (n[1:].isdigit() or n.startswith("out")) for n in nodes), nodes
    assert len(nodes) == 4, nodes   # input, two ops, output


@pytest.mark.parametrize("case", ["comment-opener", "long-names"])
def test_valid_names_compile_and_run(case, tmp_path):
    """Names that used to break the C compiler (-Werror=comment, -Werror=format-truncation)."""
    if case == "comment-opener":
        names = ("in/*put", "out */ /* put", "conv /* 1")
    else:
        names = ("i" * 600, "o" * 700, "n" * 800)
    m = _relu_chain_with_names(names[0], names[1], node_name=names[2])
    p = tmp_path / "names.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build")
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    proc, out = tl.run_raw(so, {names[0]: x}, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    (got,) = tl.read_outputs(out).values()
    np.testing.assert_array_equal(got, -np.maximum(x, 0))


# --------------------------------------------------------------------------------------------
# 2. Data loss: Cuvil never deletes or overwrites what it did not write
# --------------------------------------------------------------------------------------------

@pytest.fixture
def small(tmp_path):
    m, inputs, ref = small_cnn().build()
    p = tmp_path / "model.onnx"
    onnx.save(m, p)
    return p, inputs, ref


def test_emit_c_refuses_folder_with_user_files(small, tmp_path):
    p, _, _ = small
    d = tmp_path / "project"
    d.mkdir()
    (d / "main.c").write_text("int main(void) { return 0; }\n")
    proc = tl.compile_raw(p, d, emit="c")
    tl.assert_clean_failure(proc, mentions=["not written by cuvil"])
    assert sorted(x.name for x in d.iterdir()) == ["main.c"]
    assert (d / "main.c").read_text() == "int main(void) { return 0; }\n"
    assert not _leftovers(tmp_path)


def test_emit_c_dot_is_refused(small, tmp_path):
    p, _, _ = small
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(p, work / "model.onnx")
    (work / "notes.txt").write_text("mine")
    proc = tl.compile_raw(work / "model.onnx", ".", emit="c", cwd=work)
    tl.assert_clean_failure(proc)
    assert sorted(x.name for x in work.iterdir()) == ["model.onnx", "notes.txt"]


def test_emit_c_replaces_its_own_folder_but_not_a_users_file_in_it(small, tmp_path):
    p, _, _ = small
    d = tmp_path / "gen"
    tl.compile(p, tmp_path, emit="c", stem="gen")
    # what the folder's Makefile builds counts as Cuvil's
    (d / "model.o").write_bytes(b"obj")
    (d / "libgen.so").write_bytes(b"lib")
    kernel = next((d / "runtime").rglob("*.c"))
    kernel.with_suffix(".o").write_bytes(b"obj")
    tl.compile(p, tmp_path, emit="c", stem="gen", opt_level=0)
    assert (d / "Makefile").is_file() and not (d / "model.o").exists()
    # a file of the user's inside: refused, kept
    (d / "my_notes.md").write_text("keep me")
    proc = tl.compile_raw(p, d, emit="c")
    tl.assert_clean_failure(proc, mentions=["my_notes.md"])
    assert (d / "my_notes.md").read_text() == "keep me" and (d / "Makefile").is_file()
    assert not _leftovers(tmp_path)


def test_output_that_is_the_model_is_refused(small, tmp_path):
    p, _, _ = small
    before = p.read_bytes()
    for emit, out in [(None, p), ("ir", p), (None, p.with_suffix(".so"))]:
        if out != p:
            # the header path of model.so is model.h; make the model be that header
            out = tmp_path / "x.so"
            shutil.copy(p, tmp_path / "x.h")
        proc = tl.compile_raw(out if out == p else tmp_path / "x.h", out, emit=emit)
        tl.assert_clean_failure(proc, any_of=["the model itself", "not written by cuvil"])
    assert p.read_bytes() == before
    assert (tmp_path / "x.h").read_bytes() == before


def test_output_named_like_the_header_is_refused(small, tmp_path):
    p, _, _ = small
    proc = tl.compile_raw(p, tmp_path / "out.h")
    tl.assert_clean_failure(proc, mentions=["header"])
    assert not (tmp_path / "out.h").exists()


def test_existing_text_file_is_not_overwritten_by_emit_ir(small, tmp_path):
    p, _, _ = small
    notes = tmp_path / "notes.ir"
    notes.write_text("my notes")
    proc = tl.compile_raw(p, notes, emit="ir")
    tl.assert_clean_failure(proc, mentions=["not written by cuvil"])
    assert notes.read_text() == "my notes"
    tl.compile(p, tmp_path, emit="ir", stem="mine")
    tl.compile(p, tmp_path, emit="ir", stem="mine", opt_level=0)   # its own file: replaced


@pytest.mark.parametrize("emit", ["so", "a", "c"])
def test_output_paths_with_commas_spaces_and_newlines(small, emit, tmp_path):
    p, inputs, ref = small
    d = tmp_path / "a, b\nc d"
    d.mkdir()
    name = {"so": "m,1 x.so", "a": "m,1 x.a", "c": "m,1 x"}[emit]
    out = d / name
    proc = tl.compile_raw(p, out, emit=emit)
    assert proc.returncode == 0, proc.stderr
    assert not _leftovers(d) and not _leftovers(tmp_path)
    if emit == "so":
        tl.assert_outputs_close(tl.run(out, inputs, tmp_path / "run"), ref)
        assert (d / "m,1 x.h").is_file()
    elif emit == "a":
        members = subprocess.run(["ar", "t", str(out)], capture_output=True, text=True, check=True).stdout
        assert "model.o" in members and "weights.o" in members
    else:
        assert (out / "model.c").is_file() and (out / "Makefile").is_file()


# --------------------------------------------------------------------------------------------
# 3. Crashes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra_initializers", [50, 55, 58, 61, 64, 70])
def test_conv_batchnorm_fold_with_many_initializers(extra_initializers, tmp_path):
    """BatchNorm folding adds constants while it holds a pointer to the weight's dims: the value
    array must not move under it (use-after-free at a capacity boundary)."""
    rng = tl.seeded_rng(f"bnfold-{extra_initializers}")
    C, M = 3, 4
    inits = [numpy_helper.from_array(rng.standard_normal((M, C, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(M).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(M).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(M).astype(np.float32), "beta"),
             numpy_helper.from_array(rng.standard_normal(M).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.uniform(0.5, 2, M).astype(np.float32), "var")]
    inits += [numpy_helper.from_array(np.full((1,), i, np.float32), f"unused{i}") for i in range(extra_initializers)]
    m = _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"])],
               [_vi("x", [1, C, 6, 6])], [_vi("y", [1, M, 6, 6])], inits)
    p = tmp_path / "bn.onnx"
    onnx.save(m, p)
    x = rng.standard_normal((1, C, 6, 6)).astype(np.float32)
    got = tl.compile_and_run(p, {"x": x}, tmp_path)
    tl.assert_outputs_close(got, tl.ort_run(m, {"x": x}))


def test_cuvil_run_refuses_truncated_library(small, tmp_path):
    p, _, _ = small
    so = tl.compile(p, tmp_path / "build")
    data = so.read_bytes()
    for keep in [16, 64, len(data) // 10, len(data) // 2, len(data) - 100, len(data) - 1]:
        bad = tmp_path / f"trunc{keep}.so"
        bad.write_bytes(data[:keep])
        proc = tl.run_tool("cuvil-run", [bad, "--info"])
        tl.assert_clean_failure(proc, mentions=["cannot load model"], what=f"truncated to {keep} bytes")


# --------------------------------------------------------------------------------------------
# 5. Hangs and unbounded memory
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_cuvil_run_refuses_special_input_files(small, special, tmp_path):
    p, _, _ = small
    so = tl.compile(p, tmp_path / "build")
    f = special
    if special == "fifo":
        f = tmp_path / "in.fifo"
        os.mkfifo(f)
    t0 = time.monotonic()
    proc = tl.run_tool("cuvil-run", [so, "--input", f"x={f}", "--output-dir", tmp_path / "out"], timeout=60)
    assert time.monotonic() - t0 < 30
    tl.assert_clean_failure(proc, mentions=["not a regular file"], absent=[tmp_path / "out"])


def test_cuvil_run_refuses_pb_input_named_for_another_input(small, tmp_path):
    p, inputs, _ = small
    so = tl.compile(p, tmp_path / "build")
    f = tmp_path / "other.pb"
    f.write_bytes(numpy_helper.from_array(inputs["x"], name="not_x").SerializeToString())
    proc = tl.run_tool("cuvil-run", [so, "--input", f"x={f}", "--output-dir", tmp_path / "out"])
    tl.assert_clean_failure(proc, mentions=["holds the tensor 'not_x'"], absent=[tmp_path / "out"])


class _ChildCPU:
    """CPU seconds (user + system) the child processes started inside the block used: unlike
    wall time, not inflated when other work shares the machine."""
    def __enter__(self):
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.t0 = r.ru_utime + r.ru_stime
        return self

    def __exit__(self, *exc):
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.seconds = r.ru_utime + r.ru_stime - self.t0
        return False


def _chain(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu" if i % 2 == 0 else "Neg", ["x" if i == 0 else f"h{i}"],
                              [f"h{i + 1}" if i < n - 1 else "y"]) for i in range(n)]
    return _model(nodes, [_vi("x", [1, 16])], [_vi("y", [1, 16])])


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_codegen_time_is_linear_in_graph_size(tmp_path):
    """A 200,000-node chain through --emit c in under 5 s of CPU time (the plain build; a sanitizer
    build is allowed 4x), and 4x the nodes take well under 16x the time of a quarter of them."""
    times = {}
    for n in (50000, 200000):
        p = tmp_path / f"chain{n}.onnx"
        onnx.save(_chain(n), p)
        with _ChildCPU() as cpu:   # 200,000 nodes is over the default limit (100,000): raised
            proc = tl.compile_raw(p, tmp_path / f"out{n}", emit="c", extra=["--limit", "nodes=200K"])
        times[n] = cpu.seconds
        assert proc.returncode == 0, proc.stderr
        shutil.rmtree(tmp_path / f"out{n}")
    budget = 5.0 * (4 if tl.build_dir().name.endswith("-asan") else 1)
    assert times[200000] < budget, times
    assert times[200000] < 8 * max(times[50000], 0.05), f"not linear: {times}"


SLOW_CC = """#!/bin/sh
# a C compiler that announces itself, starts a helper (as gcc starts cc1) and takes its time
echo $$ > "{pidfile}"
sleep 60 &
echo $! > "{pidfile}.child"
wait
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1,
                                 signal.SIGALRM, signal.SIGXCPU, signal.SIGABRT, signal.SIGTRAP, signal.SIGSYS,
                                 signal.SIGRTMIN + 1])
def test_interrupted_compile_leaves_nothing(small, sig, tmp_path):
    p, _, _ = small
    pidfile = tmp_path / "cc.pid"
    cc = tmp_path / "slowcc.sh"
    cc.write_text(SLOW_CC.format(pidfile=pidfile))
    cc.chmod(0o755)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    argv = [str(tl.bin_path("cuvil-compile")), "--model", str(p), "--output", str(out_dir / "m.so"), "--cc", str(cc)]
    # the signal's default disposition in cuvil-compile whatever this test inherited: under
    # `nohup cmd &` SIGHUP and SIGINT come ignored, and cuvil keeps an ignored signal ignored
    proc = subprocess.Popen(argv, cwd=out_dir, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    child = Path(str(pidfile) + ".child")
    deadline = time.monotonic() + 60
    while not child.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert child.exists(), "the C compiler never started"
    time.sleep(0.1)
    assert any(".cuvil-build-" in x.name for x in out_dir.iterdir()), "no build folder while compiling?"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert proc.returncode == -int(sig), (proc.returncode, proc.stderr.read())
    assert not list(out_dir.iterdir()), f"left behind: {list(out_dir.iterdir())}"
    time.sleep(0.3)
    for pid in (int(pidfile.read_text()), int(child.read_text())):
        stat = Path(f"/proc/{pid}/stat")
        alive = stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        assert not alive, f"process {pid} of the C compiler was left running"


# --------------------------------------------------------------------------------------------
# 6. Valid models that used to fail inside the C compiler
# --------------------------------------------------------------------------------------------

def test_slice_with_int64_min_step_compiles_and_matches(tmp_path):
    def c(n, v):
        return numpy_helper.from_array(np.asarray(v, np.int64), n)
    m = _model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])], [_vi("x", [5, 4])], [_vi("y", None)],
               [c("s", [-1]), c("e", [-(2**63)]), c("a", [0]), c("st", [-(2**63)])])
    p = tmp_path / "slice.onnx"
    onnx.save(m, p)
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    got = tl.compile_and_run(p, {"x": x}, tmp_path)
    tl.assert_outputs_close(got, tl.ort_run(m, {"x": x}))


# --------------------------------------------------------------------------------------------
# Failing toolchain, full disk, failing dlopen: clear errors, no partial files
# --------------------------------------------------------------------------------------------

def test_failing_c_compiler(small, tmp_path):
    p, _, _ = small
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = tl.compile_raw(p, out_dir / "m.so", extra=["--cc", "false"])
    tl.assert_clean_failure(proc, mentions=["false failed"], absent=[out_dir], max_lines=3)


def test_full_disk(small, tmp_path):
    """A file-size limit stands in for a full disk: every write fails past 1 KiB."""
    p, _, _ = small
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def limit(n=1024):
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))

    argv = [str(tl.bin_path("cuvil-compile")), "--model", str(p), "--output", str(out_dir / "m.so")]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=out_dir, preexec_fn=limit, timeout=300)
    tl.assert_clean_failure(proc, mentions=["write failed", "file too large"], absent=[out_dir])
    for emit in ("c", "ir"):
        argv = [str(tl.bin_path("cuvil-compile")), "--model", str(p), "--output", str(out_dir / "gen"), "--emit", emit]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=out_dir, preexec_fn=lambda: limit(128),
                              timeout=300)
        tl.assert_clean_failure(proc, mentions=["write failed"], absent=[out_dir])


def test_failing_dlopen(tmp_path):
    """A shared library whose dependencies cannot be resolved: one clear message, no outputs."""
    src = tmp_path / "bad.c"
    src.write_text("void missing_function(void);\nvoid f(void) { missing_function(); }\n")
    lib = tmp_path / "bad.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    proc = tl.run_tool("cuvil-run", [lib, "--input", f"x={tmp_path / 'none.npy'}", "--output-dir", tmp_path / "out"])
    tl.assert_clean_failure(proc, mentions=["cannot load model", "missing_function"], absent=[tmp_path / "out"])


def test_model_create_uses_the_callers_allocator_and_survives_its_failure(small, tmp_path):
    """The model ABI's allocator option (fault injection for create): each of create's
    allocations failing in turn gives CUVIL_ERR_NOMEM and frees what it took."""
    import ctypes

    p, _, _ = small
    so = tl.compile(p, tmp_path / "build")
    lib = ctypes.CDLL(str(so))
    ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)
    FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)

    class Options(ctypes.Structure):
        _fields_ = [("n_threads", ctypes.c_int), ("weights_path", ctypes.c_char_p), ("alloc", ALLOC),
                    ("free", FREE), ("alloc_user", ctypes.c_void_p), ("buffer", ctypes.c_void_p),
                    ("buffer_bytes", ctypes.c_size_t)]

    libc = ctypes.CDLL(None)
    libc.aligned_alloc.restype = ctypes.c_void_p
    libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    create, destroy = lib.model_create, lib.model_destroy
    create.argtypes = [ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]
    destroy.argtypes = [ctypes.c_void_p]
    for fail_at in range(4):
        state = {"n": 0, "live": set()}

        def alloc(size, align, user, state=state, fail_at=fail_at):
            state["n"] += 1
            if state["n"] == fail_at + 1:
                return None
            ptr = libc.aligned_alloc(align, (size + align - 1) // align * align)
            state["live"].add(ptr)
            return ptr

        def free(ptr, user, state=state):
            state["live"].discard(ptr)
            libc.free(ptr)

        a, f = ALLOC(alloc), FREE(free)
        opts = Options(1, None, a, f, None, None, 0)
        m = ctypes.c_void_p()
        st = create(ctypes.byref(opts), ctypes.byref(m))
        if fail_at < 2:
            assert st == 6, f"allocation {fail_at + 1} failed, create returned {st} (want CUVIL_ERR_NOMEM=6)"
        else:
            assert st == 0 and state["n"] == 2, (st, state["n"])
        if m.value:
            destroy(m)
        assert not state["live"], f"allocation {fail_at + 1} failing leaked {len(state['live'])} blocks"


# --------------------------------------------------------------------------------------------
# Found by a hostile review (helper): regressions
# --------------------------------------------------------------------------------------------

def test_cuvils_own_binaries_and_programs_are_not_taken_for_its_outputs(small, tmp_path):
    """A file is Cuvil's to replace only if it is a model library (exports cuvil_model_entry, no
    program interpreter) or a model archive (a model.o member with the marker): not cuvil-compile
    itself, not libcuvil, not a program that links a model statically."""
    p, _, _ = small
    victims = {"cuvil-compile-copy": tl.bin_path("cuvil-compile"),
               "libcuvil-copy.so": tl.build_dir() / "lib" / "libcuvil.so",
               "libcuvil-copy.a": tl.build_dir() / "lib" / "libcuvil.a"}
    for name, src in victims.items():
        shutil.copy(src, tmp_path / name)
    # a program that links a compiled model's archive carries the archive's marker
    lib = tmp_path / "lib"
    lib.mkdir()
    proc = tl.compile_raw(p, lib / "libmodel.a")
    assert proc.returncode == 0, proc.stderr
    main_c = tmp_path / "main.c"
    main_c.write_text('#include "libmodel.h"\nint main(void) { return model_model() == 0; }\n')
    r = subprocess.run(["cc", "-std=c11", "-I", str(lib), "-o", str(tmp_path / "myapp"), str(main_c),
                        str(lib / "libmodel.a"), "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in list(victims) + ["myapp"]:
        before = (tmp_path / name).read_bytes()
        proc = tl.compile_raw(p, tmp_path / name)
        tl.assert_clean_failure(proc, mentions=["was not written by cuvil"], what=name)
        assert (tmp_path / name).read_bytes() == before, f"{name} was changed"
    # its own previous library and archive it does replace
    assert tl.compile_raw(p, lib / "libmodel.a").returncode == 0
    so = tl.compile(p, tmp_path / "again", stem="net")
    assert tl.compile_raw(p, so).returncode == 0


@pytest.mark.parametrize("what", ["inputs", "outputs", "opsets", "initializers"])
def test_wide_models_load_in_linear_time(what, tmp_path):
    """100,000 graph inputs, outputs, opset imports or initializers: no pairwise comparisons."""
    n = 100_000
    if what == "opsets":
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
        m.opset_import.extend(helper.make_opsetid(f"com.example.d{i}", 1) for i in range(n))
    elif what == "inputs":
        m = _model([helper.make_node("Relu", ["x0"], ["y"])], [_vi(f"x{i}", [1]) for i in range(n)], [_vi("y", [1])])
    elif what == "outputs":
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1])], [_vi("y", [1])])
        m.graph.output.extend(_vi(f"o{i}", [1]) for i in range(n))
        m.graph.node.extend(helper.make_node("Identity", ["y"], [f"o{i}"]) for i in range(n))
    else:
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1])], [_vi("y", [1])],
                   [numpy_helper.from_array(np.zeros(1, np.float32), f"w{i}") for i in range(n)])
    p = tmp_path / "wide.onnx"
    onnx.save(m, p)
    with _ChildCPU() as cpu:
        proc = tl.compile_raw(p, tmp_path / "m.ir", emit="ir", timeout=120)
    elapsed = cpu.seconds
    assert proc.returncode == 0 or (proc.returncode == 1 and proc.stderr.startswith("cuvil-compile:")), proc.stderr
    assert elapsed < 10 * (4 if tl.build_dir().name.endswith("-asan") else 1), f"{elapsed:.1f} s"


def test_concat_of_many_inputs_compiles_and_runs(tmp_path):
    """The inputs of a Concat are a static table, not a stack array or code per input."""
    n = 20_000
    m = _model([helper.make_node("Concat", ["x"] * n, ["y"], axis=0)], [_vi("x", [1, 2])], [_vi("y", [n, 2])])
    p = tmp_path / "wide.onnx"
    onnx.save(m, p)
    x = np.array([[1.5, -2.0]], np.float32)
    t0 = time.monotonic()
    got = tl.compile_and_run(p, {"x": x}, tmp_path)
    assert time.monotonic() - t0 < 120
    np.testing.assert_array_equal(got["y"], np.repeat(x, n, axis=0))


def test_folding_that_would_take_too_long_is_left_to_run_time(tmp_path):
    """A MaxPool with a 2048x2048 window over a constant: ~10^14 operations to fold; the compiler
    leaves it to the compiled model and finishes at once."""
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["c"]),
                helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2048, 2048])],
               [], [_vi("y", None)], [numpy_helper.from_array(np.array([1, 1, 4096, 4096], np.int64), "s")])
    p = tmp_path / "bomb.onnx"
    onnx.save(m, p)
    with _ChildCPU() as cpu:
        proc = tl.compile_raw(p, tmp_path / "out", emit="c", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert cpu.seconds < 20


def test_prepacked_weights_count_with_the_models_own_constants(tmp_path):
    """Prepacked weights are a copy of weights the model holds: they count against total_bytes
    with the model's constants, not against folded_bytes (which bounds what folding creates and
    which a large model's weights alone exceed: BERT-base was refused). A MatMul with a 4 MB
    weight compiles under --limit folded_bytes=1M, B prepacked, and matches ONNX Runtime."""
    rng = np.random.default_rng(9)
    w = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 1024])], [_vi("y", None)], [w])
    p = tmp_path / "mm.onnx"
    onnx.save(m, p)
    ir = tl.compile_raw(p, "-", emit="ir", extra=["--limit", "folded_bytes=1M"])
    assert ir.returncode == 0 and "B prepacked" in ir.stdout, ir.stderr
    so = tl.compile(p, tmp_path / "out", extra=["--limit", "folded_bytes=1M"])
    x = rng.standard_normal((2, 1024)).astype(np.float32)
    tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / "run"), tl.ort_run(p, {"x": x}))


@pytest.mark.parametrize("stem", ["stdint", "string", "math", "cuvil_rt", "cuvil", "libcuvil", "lib1", "lib2dconv"])
def test_output_names_that_clash_with_headers_or_cuvil(small, stem, tmp_path):
    p, inputs, ref = small
    so = tl.compile(p, tmp_path / "build", stem=stem)
    tl.assert_outputs_close(tl.run(so, inputs, tmp_path / "run"), ref)
    src = tl.compile(p, tmp_path / "src", emit="c", stem=stem)
    assert oct(src.stat().st_mode & 0o777) == oct(0o755 & ~_umask())


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_error_lines_cannot_be_forged_by_names(tmp_path):
    m = _model([helper.make_node("FancyOp", ["x"], ["y"], name="n\ncuvil-compile: compiled fine\x1b[2J")],
               [_vi("x", [1])], [_vi("y", [1])])
    p = tmp_path / "forge.onnx"
    onnx.save(m, p)
    proc = tl.compile_raw(p, tmp_path / "m.so")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert sum(line.startswith("cuvil-compile:") for line in lines) == 1, proc.stderr
    assert "\x1b" not in proc.stderr


def test_dot_output_is_valid_utf8(tmp_path):
    m = _relu_chain_with_names("inAB", "out")
    p = tmp_path / "u.onnx"
    p.write_bytes(m.SerializeToString().replace(b"inAB", b"in\xff\xfe"))   # same length: not UTF-8
    dot_file = tl.compile(p, tmp_path, emit="dot")
    dot_file.read_bytes().decode("utf-8")   # raises if not UTF-8
    r = subprocess.run([shutil.which("dot"), "-Tplain", str(dot_file)], capture_output=True, text=True)
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr


@pytest.mark.parametrize("op,inputs,attrs", [
    ("HardSigmoid", 1, {}), ("Max", 2, {}), ("Min", 2, {}), ("Clip", 1, {}), ("Relu", 1, {}),
    ("ReduceMax", 1, {"keepdims": 0}), ("ReduceMin", 1, {"keepdims": 0}),
])
def test_nan_and_infinity_match_onnx_runtime(op, inputs, attrs, tmp_path):
    vals = [np.array([np.nan, 1.0, np.inf, -np.inf, -0.0, 3.0], np.float32),
            np.array([1.0, np.nan, -np.inf, 2.0, 0.0, np.nan], np.float32)]
    names = [f"x{i}" for i in range(inputs)]
    out_shape = [] if op.startswith("Reduce") else [6]
    m = _model([helper.make_node(op, names, ["y"], **attrs)], [_vi(n, [6]) for n in names], [_vi("y", out_shape)])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    feeds = {n: vals[i] for i, n in enumerate(names)}
    got = tl.compile_and_run(p, feeds, tmp_path)
    np.testing.assert_array_equal(got["y"], tl.ort_run(m, feeds)["y"])


@pytest.mark.parametrize("arg,expect", [
    ("bogus=1", "no such limit (limits: model_bytes, nesting"), ("nodes=abc", "expected a positive integer"),
    ("nodes=0", "expected a positive integer"), ("nodes", "--limit wants NAME=N"), ("dim=-5", "expected a positive"),
    ("tensor_bytes=99999999999T", "expected a positive integer"),
])
def test_limit_option_is_checked(small, arg, expect, tmp_path):
    p, _, _ = small
    proc = tl.compile_raw(p, tmp_path / "m.so", extra=["--limit", arg])
    tl.assert_clean_failure(proc, mentions=[expect], absent=[tmp_path / "m.so"])


def test_limits_can_be_raised_and_lowered(small, tmp_path):
    p, inputs, ref = small
    proc = tl.compile_raw(p, tmp_path / "m.so", extra=["--limit", "nodes=3"])
    tl.assert_clean_failure(proc, mentions=["the limit is nodes=3"])
    so = tl.compile(p, tmp_path, stem="ok", extra=["--limit", "nodes=1K", "--limit", "tensor_bytes=1G"])
    tl.assert_outputs_close(tl.run(so, inputs, tmp_path / "run"), ref)


def _user_objects_with_a_model(small, tmp_path):
    """The model's objects (model.o, part_*.o) and weights.o of an --emit c folder built with its
    Makefile's flags, and a user's app.o; returns (model path, the model's objects)."""
    p, _, _ = small
    src = tl.compile(p, tmp_path, emit="c", stem="gen")
    flags = ["-std=c11", "-fPIC", "-fvisibility=hidden", "-I", str(src / "runtime" / "include")]
    objs = []
    for c in sorted(src.glob("*.c")):
        if c.name == "weights.c":
            continue
        objs.append(str(tmp_path / (c.stem + ".o")))
        subprocess.run(["cc", *flags, "-DCUVIL_MODEL_SHARED", "-c", str(c), "-o", objs[-1]], check=True)
    subprocess.run(["cc", "-c", str(src / "weights.S"), "-Wa,-I" + str(src), "-o", str(tmp_path / "weights.o")],
                   check=True)
    (tmp_path / "app.c").write_text("int my_app_function(void) { return 42; }\n")
    subprocess.run(["cc", "-fPIC", "-c", str(tmp_path / "app.c"), "-o", str(tmp_path / "app.o")], check=True)
    return p, objs


def test_a_users_library_or_archive_with_a_model_inside_is_not_cuvils(small, tmp_path):
    p, objs = _user_objects_with_a_model(small, tmp_path)
    o = [str(tmp_path / "app.o"), *objs, str(tmp_path / "weights.o")]
    subprocess.run(["cc", "-shared", "-o", str(tmp_path / "libapp.so"), *o, "-lm"], check=True)
    subprocess.run(["ar", "rcs", str(tmp_path / "libmine.a"), *o], check=True)
    for name in ("libapp.so", "libmine.a"):
        before = (tmp_path / name).read_bytes()
        proc = tl.compile_raw(p, tmp_path / name)
        tl.assert_clean_failure(proc, mentions=["was not written by cuvil"], what=name)
        assert (tmp_path / name).read_bytes() == before


def test_emit_c_keeps_a_users_empty_folder(small, tmp_path):
    p, _, _ = small
    d = tl.compile(p, tmp_path, emit="c", stem="gen")
    (d / "notes" / "sub").mkdir(parents=True)
    proc = tl.compile_raw(p, d, emit="c")
    tl.assert_clean_failure(proc, mentions=["notes"])
    assert (d / "notes" / "sub").is_dir()


def _output_named(name: str, tmp_path: Path):
    m = _model([helper.make_node("Neg", ["x"], [name])], [_vi("x", [3])], [_vi(name, [3])])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    return tl.compile(p, tmp_path / "build")


def test_cuvil_run_never_overwrites_its_input(tmp_path):
    """A model whose output is named like the input file: refused, the input is kept."""
    so = _output_named("data", tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    x = np.array([1, 2, 3], np.float32)
    np.save(work / "data.npy", x)
    proc = tl.run_tool("cuvil-run", [so, "--input", "x=data.npy"], cwd=work)
    tl.assert_clean_failure(proc, mentions=["which is an input of this run"])
    np.testing.assert_array_equal(np.load(work / "data.npy"), x)


def test_cuvil_run_prints_names_without_control_characters(tmp_path):
    so = _output_named("y\n\x1b[2J\x1b]0;pwned\x07", tmp_path)
    x = np.array([1, 2, 3], np.float32)
    np.save(tmp_path / "x.npy", x)
    for args in (["--info"], ["--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out")]):
        proc = tl.run_tool("cuvil-run", [so, *args])
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, repr(proc.stdout)


def test_many_opset_imports_with_many_nodes_load_fast(tmp_path):
    """The opset of each node is looked up, not scanned for (200,000 imports x 20,000 nodes)."""
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"h{i}"], [f"h{i + 1}" if i < 19999 else "y"])
             for i in range(20000)]
    m = _model(nodes, [_vi("x", [2])], [_vi("y", [2])])
    del m.opset_import[:]
    m.opset_import.extend(helper.make_opsetid(f"com.example.d{i}", 1) for i in range(200000))
    m.opset_import.append(helper.make_opsetid("", 13))
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    with _ChildCPU() as cpu:
        proc = tl.compile_raw(p, tmp_path / "m.ir", emit="ir")
    assert proc.returncode == 0, proc.stderr
    assert cpu.seconds < 10 * (4 if tl.build_dir().name.endswith("-asan") else 1), cpu.seconds


# --------------------------------------------------------------------------------------------
# Resource amplification and limits
# --------------------------------------------------------------------------------------------

def _shared_weight_model(path, n=40):
    """n MatMuls (each then Tanh) that all read one 256 KiB weight."""
    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((256, 256)) / 16).astype(np.float32), "w")
    nodes, prev = [], "x"
    for i in range(n):
        nodes += [helper.make_node("MatMul", [prev, "w"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [f"v{i}"])]
        prev = f"v{i}"
    onnx.save(_model(nodes, [_vi("x", [4, 256])], [_vi(prev, None)], [w]), path)


def test_one_weight_read_by_many_nodes_is_packed_once(tmp_path):
    """A weight read by 40 MatMuls is packed once for the GEMM (weights.bin was 40 copies)."""
    import json

    p = tmp_path / "shared.onnx"
    _shared_weight_model(p)
    so = tl.compile(p, tmp_path / "b")
    info = json.loads(tl.run_tool("cuvil-run", [so, "--info", "--json"]).stdout)["info"]
    assert info["weights_bytes"] < 2 * 256 * 256 * 4, info["weights_bytes"]
    x = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    tl.assert_outputs_close(tl.run(so, {"x": x}, tmp_path / "run"), tl.ort_run(p, {"x": x}))


def test_packed_bytes_count_against_a_limit(tmp_path):
    p = tmp_path / "shared.onnx"
    _shared_weight_model(p, n=2)
    proc = tl.compile_raw(p, tmp_path / "m.so", extra=["--limit", "packed_bytes=100K"])
    tl.assert_clean_failure(proc, mentions=["packed_bytes=102400", "weight 'w'"], absent=[tmp_path / "m.so"])
    assert tl.compile_raw(p, tmp_path / "m.so", extra=["--limit", "packed_bytes=1M"]).returncode == 0


def test_initializers_too_large_to_link_are_refused_before_reading(tmp_path):
    """2.5 GiB of external data (a sparse file: no disk used) passed every limit and failed in
    the linker after 40 s at 5.2 GB: refused before the data is read, in a moment."""
    n = (5 << 29) // 4
    t = TensorProto(name="w", data_type=T.FLOAT, dims=[n], data_location=T.EXTERNAL)
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", str(n * 4))):
        e = t.external_data.add()
        e.key, e.value = k, v
    with open(tmp_path / "w.bin", "wb") as f:
        f.truncate(n * 4)
    onnx.save(_model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [n])], [_vi("y", None)], [t]),
              tmp_path / "big.onnx")
    start = time.monotonic()
    proc = tl.compile_raw(tmp_path / "big.onnx", tmp_path / "big.so")
    tl.assert_clean_failure(proc, mentions=["2684354560 bytes", "external weights"], absent=[tmp_path / "big.so"])
    assert time.monotonic() - start < 20


def _deep_sequence_model(path, depth):
    sys.path.insert(0, str(tl.REPO / "tests" / "malformed"))
    try:
        import make_corpus as mc
    finally:
        sys.path.pop(0)
    path.write_bytes(mc.field_varint(1, 8) + mc.field_bytes(7, mc.field_bytes(11, mc.deep_sequence_type(depth))
                     + mc.field_bytes(12, _vi("y", [1]).SerializeToString())) + mc.field_bytes(8, mc.field_varint(2, 13)))


def test_nesting_limit_is_capped(tmp_path):
    """--limit nesting=10000 let protobuf-c's recursion overflow the stack: the limit is capped,
    and a model nested as deep as the cap allows is parsed (and refused for its sequence type)."""
    p = tmp_path / "deep.onnx"
    _deep_sequence_model(p, 5000)   # 10,000 levels: crashed with --limit nesting=10010
    proc = tl.compile_raw(p, tmp_path / "m.so", extra=["--limit", "nesting=10010"])
    tl.assert_clean_failure(proc, mentions=["nesting=10010: at most 1000"])
    _deep_sequence_model(p, 495)    # 990 levels and a few
    proc = tl.compile_raw(p, tmp_path / "m.so", extra=["--limit", "nesting=1000"])
    tl.assert_clean_failure(proc, mentions=["only tensors, sequences of tensors and optionals of those are supported"])


def test_emit_c_replace_keeps_a_file_that_appears_meanwhile(small, tmp_path):
    """A file a user writes into an --emit c folder while Cuvil replaces it was deleted with the
    old folder. The replacing step is held for 2 s (strace delays its renameat2) while the test
    writes a file there: it survives (in the folder the old output moved to, with a warning),
    and of the old output only what Cuvil wrote is gone."""
    p, _, _ = small
    out = tmp_path / "gen"
    tl.compile(p, tmp_path, emit="c", stem="gen")
    strace = shutil.which("strace")
    assert strace, "strace is missing (Debian's strace; tools/setup/setup.sh installs it)"
    cmd = [strace, "-f", "-o", os.devnull, "-e", "trace=renameat2", "-e", "inject=renameat2:delay_enter=2s:when=1",
           str(tl.bin_path("cuvil-compile")), "--model", str(p), "--output", str(out), "--emit", "c"]
    # (LeakSanitizer cannot run under ptrace: the sanitizer pass of make test runs this too)
    env = {**os.environ, "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    deadline = time.monotonic() + 60

    def swapping():
        """The new folder made public (0700 -> 0755) comes after the last check, just before the swap."""
        for d in tmp_path.glob("gen.cuvil-build-*"):
            try:
                if d.stat().st_mode & 0o777 == 0o755:
                    return True
            except FileNotFoundError:
                pass
        return False

    while not swapping():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    (out / "my-notes.txt").write_text("keep me\n")   # the swap waits in strace for 2 s
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    kept = [f for f in tmp_path.rglob("my-notes.txt")]
    assert len(kept) == 1 and kept[0].read_text() == "keep me\n", (kept, err)
    assert "appeared in the folder while it was replaced" in err and kept[0].parent.name in err, err
    assert sorted(f.name for f in kept[0].parent.iterdir()) == ["my-notes.txt"]
    assert (out / "model.c").is_file() and (out / ".cuvil-output").is_file()


def test_emit_c_manifest_cannot_name_files_outside(small, tmp_path):
    """A folder holding only a forged manifest that lists '../victim.txt': not Cuvil's (a
    manifest Cuvil writes names its own files only), so the folder is refused and the file
    outside it is not deleted."""
    p, _, _ = small
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    out = tmp_path / "gen"
    out.mkdir()
    for entry in ("../victim.txt", "/etc/hostname", "a/../../victim.txt", "./model.c"):
        (out / ".cuvil-output").write_text(f"# Written by Cuvil 0.1.0\nmodel.c\n{entry}\n")
        proc = tl.compile_raw(p, out, emit="c")
        tl.assert_clean_failure(proc, mentions=["not empty and was not written by Cuvil"], what=entry)
        assert victim.read_text() == "mine\n"
        assert sorted(f.name for f in out.iterdir()) == [".cuvil-output"]


def test_views_that_run_nothing_make_no_parts(tmp_path):
    """600 Unsqueeze/Squeeze views (each shares its input's bytes: no code) before one Relu: one
    part file, not one per view."""
    nodes, prev = [], "x"
    for i in range(300):
        nodes += [helper.make_node("Unsqueeze", [prev, "ax"], [f"u{i}"]), helper.make_node("Squeeze", [f"u{i}", "ax"], [f"s{i}"])]
        prev = f"s{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"]))
    ax = numpy_helper.from_array(np.array([0], np.int64), "ax")
    m = _model(nodes, [_vi("x", [4, 5])], [_vi("y", [4, 5])], [ax], opset=13)
    onnx.save(m, tmp_path / "views.onnx")
    src = tl.compile(tmp_path / "views.onnx", tmp_path, emit="c", stem="src", opt_level=0)
    parts = sorted(f.name for f in src.glob("part_*.c"))
    assert len(parts) == 1, parts
    x = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)
    so = tl.compile(tmp_path / "views.onnx", tmp_path / "so", opt_level=0)
    np.testing.assert_array_equal(tl.run(so, {"x": x}, tmp_path / "run")["y"], np.maximum(x, 0))


@pytest.mark.parametrize("group", [1, 2])
def test_conv_whose_padded_input_overflows_is_refused(group, tmp_path):
    """Strides and pads each within the dim limit (2^32 - 1) on a 1x1 input give a 2x2 output,
    but a zero-padded copy of the input (what the conv kernels make) of 2^64 floats and more:
    its size wrapped, and the run wrote past its scratch (a crash) until the conv's check
    refused it. One message naming the node, a non-zero exit, no library."""
    s = 2 ** 32 - 1
    w = numpy_helper.from_array(np.ones((2, 4 // group, 1, 1), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="huge_pads", strides=[s, s], pads=[0, 0, s, s],
                                 group=group)],
               [_vi("x", [1, 4, 1, 1])], [_vi("y", None)], [w])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    proc = tl.compile_raw(p, tmp_path / "m.so")
    tl.assert_clean_failure(proc, mentions=["huge_pads", "zero-padded input", "tensor_bytes"], absent=[tmp_path / "m.so"])
