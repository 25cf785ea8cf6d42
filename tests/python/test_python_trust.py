"""What the Python package trusts (issue #30): its compile cache, the libraries cuvil.load opens,
the files save writes, and a compile ended by a signal. Each test plants what an attacker (or
an accident) would and checks that nothing is followed, loaded unchecked or left behind, and
that the model still computes what ONNX Runtime computes."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from test_python_package import REPO, close, cuvil, ort_run, small_onnx


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))


def _x():
    return np.random.RandomState(1).rand(1, 3, 10, 10).astype(np.float32)


def _in_fresh_process(code: str, tmp_path: Path, timeout=300, env=None) -> subprocess.CompletedProcess:
    """code run by a new Python (a library loaded here stays mapped in this one)."""
    prolog = f"import sys, numpy as np; sys.path.insert(0, {str(REPO / 'python')!r}); import cuvil\n"
    return subprocess.run([sys.executable, "-c", prolog + code], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=tmp_path)


EVIL_C = r"""
#include <stdio.h>
const char cuvil_marker_[] = "CUVIL-MODEL-" "OUTPUT-V1";   /* it passes for a Cuvil model */
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("the planted library ran", f); fclose(f); }
}
int cuvil_model_entry(void) { return 0; }
"""


def _evil_library(tmp_path: Path) -> tuple[Path, Path]:
    """A shared library whose constructor writes a file when it is loaded: (library, that file)."""
    flag = tmp_path / "planted-ran"
    src = tmp_path / "evil.c"
    src.write_text(EVIL_C % flag)
    so = tmp_path / "evil.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return so, flag


def _entry(tmp_path: Path, m) -> Path:
    """The cache entry of model m (compiled here once to find it)."""
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    r = _in_fresh_process(f"print(cuvil.compile({str(p)!r}).path)", tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    return Path(r.stdout.strip()).parent


COMPILE_AND_RUN = """
m = cuvil.compile({p!r})
np.save({out!r}, m(np.load({x!r})))
print(m.path)
"""


def _compile_in_fresh_process(tmp_path: Path) -> subprocess.CompletedProcess:
    np.save(tmp_path / "x.npy", _x())
    return _in_fresh_process(COMPILE_AND_RUN.format(p=str(tmp_path / "m.onnx"), out=str(tmp_path / "y.npy"),
                                                    x=str(tmp_path / "x.npy")), tmp_path)


# ---- what cuvil.load opens ------------------------------------------------------------------
def test_cuvil_load_refuses_what_is_not_a_model_before_loading_it(tmp_path):
    """A library without a Cuvil model's marker (or a program, a text file) is refused before
    dlopen: its constructors never run."""
    flag = tmp_path / "planted-ran"
    src = tmp_path / "nomarker.c"
    src.write_text((EVIL_C % flag).replace('"CUVIL-MODEL-" "OUTPUT-V1"', '"something else"'))
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "nomarker.so"), str(src)], check=True)
    with pytest.raises(cuvil.CuvilError, match="not a Cuvil model"):
        cuvil.load(tmp_path / "nomarker.so")
    assert not flag.exists()
    with pytest.raises(cuvil.CuvilError, match="a program, not a library|not a shared library"):
        cuvil.load(sys.executable)
    with pytest.raises(cuvil.CuvilError, match="not an ELF shared library"):
        cuvil.load(REPO / "README.md")
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    with pytest.raises(cuvil.CuvilError, match="not a regular file"):
        cuvil.load(fifo)


def test_truncated_library_is_an_error_not_sigbus(tmp_path):
    """A truncated cached .so killed the process with SIGBUS (so did cuvil.load of a truncated
    library, where cuvil-run gives a clean error): the cache builds it again, load refuses it."""
    m = small_onnx()
    entry = _entry(tmp_path, m)
    so = entry / "model.so"
    cut = tmp_path / "cut.so"
    cut.write_bytes(so.read_bytes()[: so.stat().st_size * 3 // 5])
    os.truncate(so, so.stat().st_size * 3 // 5)
    r = _compile_in_fresh_process(tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    close(np.load(tmp_path / "y.npy"), ort_run(m, {"x": _x()})[0])
    r = _in_fresh_process(f"""
try:
    cuvil.load({str(cut)!r})
except cuvil.CuvilError as e:
    print("refused:", e)
""", tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "refused:" in r.stdout and "truncated" in r.stdout, r.stdout
    # the same file through cuvil-run: the same verdict
    run = subprocess.run([str(Path(os.environ.get("CUVIL_BUILD", REPO / "build")) / "bin" / "cuvil-run"), str(cut),
                          "--info"], capture_output=True, text=True)
    assert run.returncode == 1 and "truncated" in run.stderr


def test_save_over_a_loaded_library_then_load_gives_the_new_model(tmp_path):
    """dlopen returns a loaded library again for the same name: save over a loaded library's
    path, then load, gave the old model in the same process."""
    a, b = small_onnx(), small_onnx()
    w = onnx.numpy_helper.to_array(b.graph.initializer[0]) * -1.0
    b.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(w.astype(np.float32), "w"))
    x = _x()
    out = cuvil.compile(a).save(tmp_path / "m.so")
    close(cuvil.load(out)(x), ort_run(a, {"x": x})[0])
    cuvil.compile(b).save(out)
    close(cuvil.load(out)(x), ort_run(b, {"x": x})[0])
    assert not np.allclose(ort_run(a, {"x": x})[0], ort_run(b, {"x": x})[0])


def test_save_never_writes_through_a_planted_temporary_name(tmp_path):
    """save of a loaded library wrote through `.NAME.<pid>.tmp`, following a link planted there."""
    m = small_onnx()
    first = cuvil.compile(m).save(tmp_path / "a.so")
    loaded = cuvil.load(first)   # a library: save copies it
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for name in ("b.so", "b.h"):
        (tmp_path / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
    out = loaded.save(tmp_path / "b.so")
    assert victim.read_text() == "precious"
    assert not out.is_symlink() and not out.with_suffix(".h").is_symlink()
    close(cuvil.load(out)(_x()), ort_run(m, {"x": _x()})[0])
    assert out.with_suffix(".h").read_bytes() == first.with_suffix(".h").read_bytes()


SLOW_CC = """#!/bin/sh
# a C compiler that announces itself, starts a helper (as gcc starts cc1) and takes its time
echo $$ > "{pidfile}"
sleep 60 &
echo $! > "{pidfile}.child"
wait
"""


@pytest.mark.parametrize("case", ["SIGTERM", "SIGINT", "SIGHUP", "own-handler"])
def test_signal_during_compile_leaves_nothing(tmp_path, case):
    """A signal during cuvil.compile used to leave *.cuvil-build-* (and the C compiler) behind.
    Now the compile's folder and compiler go, then the signal has the effect it would have had:
    the default action, KeyboardInterrupt, or the program's own handler (called after)."""
    pidfile = tmp_path / "cc.pid"
    cc = tmp_path / "slowcc.sh"
    cc.write_text(SLOW_CC.format(pidfile=pidfile))
    cc.chmod(0o755)
    onnx.save(small_onnx(), tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    sig = signal.SIGTERM if case == "own-handler" else getattr(signal, case)
    own = ""
    if case == "own-handler":
        own = (f"import signal\nsignal.signal(signal.SIGTERM, lambda s, f: (open({str(tmp_path / 'handled')!r}, 'w'),"
               f" sys.exit(3)))\n")
    prolog = f"import sys; sys.path.insert(0, {str(REPO / 'python')!r}); import cuvil\n"
    proc = subprocess.Popen([sys.executable, "-c", prolog + own + f"cuvil.compile({str(tmp_path / 'm.onnx')!r})"],
                            env={**os.environ, "CC": str(cc), "CUVIL_CACHE_DIR": str(cache)},
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    child = Path(str(pidfile) + ".child")
    deadline = time.monotonic() + 60
    while not child.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert child.exists(), "the C compiler never started: " + (proc.stderr.read() if proc.poll() is not None else "")
    time.sleep(0.1)
    assert list(cache.rglob("*.cuvil-build-*")), "no build folder while compiling?"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    err = proc.stderr.read()
    want = {"own-handler": 3}.get(case, -int(sig))
    assert proc.returncode == want, (proc.returncode, err[-2000:])
    if case == "own-handler":
        assert (tmp_path / "handled").exists()
    if case == "SIGINT":
        assert "KeyboardInterrupt" in err
    assert not list(cache.iterdir()), f"left behind: {list(cache.rglob('*'))}"
    time.sleep(0.3)
    for pid in (int(pidfile.read_text()), int(child.read_text())):
        st = Path(f"/proc/{pid}/stat")
        alive = st.exists() and st.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        assert not alive, f"process {pid} of the C compiler was left running"


# ---- the cache folder ------------------------------------------------------------------------
def test_cache_folder_is_private_and_refused_when_not(tmp_path, monkeypatch):
    cuvil.compile(small_onnx())
    root = tmp_path / "cache"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for i, (mode, owner) in enumerate(((0o777, None), (0o770, None), (0o700, 65534))):
        d = tmp_path / f"other{i}"
        d.mkdir()
        d.chmod(mode)
        if owner is not None:   # another user's folder: one made so (as root), else the root folder's
            if os.geteuid() == 0:
                os.chown(d, owner, owner)
            else:
                d = Path("/")
        monkeypatch.setenv("CUVIL_CACHE_DIR", str(d))
        before = sorted(os.listdir(d))
        with pytest.raises(cuvil.CuvilError, match="writable by|belongs to user"):
            cuvil.compile(small_onnx())
        assert sorted(os.listdir(d)) == before
    close(cuvil.compile(small_onnx(), cache=False)(_x()), ort_run(small_onnx(), {"x": _x()})[0])


def test_symlink_planted_in_the_cache_is_not_followed(tmp_path):
    """A link planted where an entry goes used to redirect the compile's writes: a model.onnx
    in the link's target was replaced."""
    m = small_onnx()
    entry = _entry(tmp_path, m)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "model.onnx").write_text("precious")
    for planted in ("folder", "file"):
        if entry.is_symlink() or entry.is_file():
            entry.unlink()
        else:
            import shutil
            shutil.rmtree(entry)
        if planted == "folder":
            entry.symlink_to(victim)
        else:   # an entry whose files are links into the victim's folder
            entry.mkdir(mode=0o700)
            for f in ("model.onnx", "model.so", "model.h", "entry.json"):
                (entry / f).symlink_to(victim / f)
        r = _compile_in_fresh_process(tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        close(np.load(tmp_path / "y.npy"), ort_run(m, {"x": _x()})[0])
        assert sorted(p.name for p in victim.iterdir()) == ["model.onnx"]
        assert (victim / "model.onnx").read_text() == "precious"
        assert entry.is_dir() and not entry.is_symlink() and not any(p.is_symlink() for p in entry.iterdir())


@pytest.mark.parametrize("how", ["pre-created", "swapped"])
def test_planted_library_in_the_cache_never_runs(tmp_path, how):
    """A library planted in the cache used to be loaded (its constructors run) before anything
    checked it: a pre-created entry, or the .so of a real entry swapped for another."""
    m = small_onnx()
    entry = _entry(tmp_path, m)
    evil, flag = _evil_library(tmp_path)
    if how == "pre-created":   # what the key's folder holds before the first compile
        import shutil
        onnx_copy = (entry / "model.onnx").read_bytes()
        shutil.rmtree(entry)
        entry.mkdir()
        (entry / "model.onnx").write_bytes(onnx_copy)
    (entry / "model.so").write_bytes(evil.read_bytes())
    r = _compile_in_fresh_process(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not flag.exists(), "the planted library was loaded"
    close(np.load(tmp_path / "y.npy"), ort_run(m, {"x": _x()})[0])
    assert (entry / "model.so").read_bytes() != evil.read_bytes()   # rebuilt in its place


def test_external_data_in_a_subfolder_changed_is_rebuilt(tmp_path):
    """The key covers every file the model reads: weights kept in a subfolder, changed, used to
    give the stale build."""
    (tmp_path / "weights").mkdir()
    onnx.save(small_onnx(), tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights/m.bin", size_threshold=0)
    data = tmp_path / "weights" / "m.bin"
    x = _x()
    import onnxruntime as ort
    for step in range(3):
        if step == 1:   # other weights, same size: negated and halved
            data.write_bytes((np.frombuffer(data.read_bytes(), np.float32) * -0.5).tobytes())
        ref = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        cm = cuvil.compile(str(tmp_path / "m.onnx"))
        close(cm(x), ref)
        if step == 2:   # unchanged: the cache's build
            assert cm.path == prev
        prev = cm.path


def test_entry_records_what_was_built(tmp_path):
    """entry.json names the key, the model's SHA-256, the options and the library's SHA-256;
    an entry whose record does not match is built again, not loaded."""
    import hashlib
    m = small_onnx()
    cm = cuvil.compile(m)
    entry = cm.path.parent
    rec = json.loads((entry / "entry.json").read_text())
    assert rec["key"] == entry.name
    assert rec["model_sha256"] == hashlib.sha256(m.SerializeToString()).hexdigest()
    assert rec["so_sha256"] == hashlib.sha256(cm.path.read_bytes()).hexdigest()
    assert rec["options"] == cm._desc.options.decode()
    rec["so_sha256"] = "0" * 64
    (entry / "entry.json").write_text(json.dumps(rec))
    onnx.save(m, tmp_path / "m.onnx")   # the same bytes: the same key
    r = _compile_in_fresh_process(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((entry / "entry.json").read_text())["so_sha256"] != "0" * 64   # rebuilt


def test_folders_of_a_killed_compile_are_removed_by_the_next(tmp_path):
    """SIGKILL cannot be caught: the build folder of a compile killed so is removed by the next
    compile in the same cache (it is named after its process, which is gone); a live process's
    folder is left alone."""
    cuvil.compile(small_onnx())
    root = tmp_path / "cache"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = root / f".build-{dead.pid}-abc123"
    (stale / "model.so.cuvil-build-x").mkdir(parents=True)
    live = root / f".build-{os.getppid()}-def456"
    live.mkdir()
    m = small_onnx()
    m.graph.node[1].name = "another"   # another key: a build happens
    close(cuvil.compile(m)(_x()), ort_run(m, {"x": _x()})[0])
    assert not stale.exists() and live.is_dir()


def test_relative_model_path_survives_a_change_of_folder(tmp_path, monkeypatch):
    """A model with external data compiled by a relative path is found again by save after the
    program changes its working folder."""
    (tmp_path / "w").mkdir()
    onnx.save(small_onnx(), tmp_path / "w" / "m.onnx", save_as_external_data=True, location="m.bin",
              size_threshold=0)
    monkeypatch.chdir(tmp_path / "w")
    cm = cuvil.compile("m.onnx")
    monkeypatch.chdir(tmp_path)
    out = cm.save(tmp_path / "saved.so")
    close(cuvil.load(out)(_x()), ort_run(small_onnx(), {"x": _x()})[0])


@pytest.mark.parametrize("where", ["/dev/zero", "../outside.bin", "fifo"])
def test_external_data_is_checked_before_it_is_read(where, tmp_path):
    """The cache key hashes a model's external data: a location the compiler refuses (absolute,
    '..') or a file that is not regular (a FIFO, /dev/zero) is never read (it hashed /dev/zero
    forever, blocked on a FIFO); the compile is refused with the compiler's message."""
    from onnx import TensorProto, helper

    d = tmp_path / "m"
    d.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 16)
    if where == "fifo":
        os.mkfifo(d / "fifo")
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", where), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], initializer=[t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, d / "m.onnx")
    r = _in_fresh_process(f"""
try:
    cuvil.compile({str(d / 'm.onnx')!r})
    print("COMPILED")
except cuvil.CuvilError as e:
    print("REFUSED:", e)
""", tmp_path, timeout=120, env={"CUVIL_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("REFUSED:") and "external" in r.stdout.lower(), r.stdout
