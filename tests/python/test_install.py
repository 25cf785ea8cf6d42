"""make install: an installed compiler, moved to another folder, works from anywhere without the
source tree, and libcuvil exports only its public API."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import cuvil_testlib as tl

EXAMPLE = tl.REPO / "examples" / "models" / "tinycnn.onnx"


def sanitized() -> bool:
    cache = tl.build_dir() / "CMakeCache.txt"
    return cache.is_file() and "CUVIL_SANITIZE:BOOL=ON" in cache.read_text(errors="replace")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """An install made with cmake --install, then moved: nothing may point at where it was made."""
    root = tmp_path_factory.mktemp("install")
    first = root / "first"
    proc = subprocess.run(["cmake", "--install", str(tl.build_dir()), "--prefix", str(first)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    moved = root / "moved"
    shutil.move(str(first), str(moved))
    return moved


def clean_env():
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CUVIL_")}
    env["CUVIL_VENV"] = __import__("os").environ.get("CUVIL_VENV", "")
    return env


def test_installed_compiler_works_from_another_folder(installed, tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    proc = subprocess.run([str(installed / "bin" / "cuvil-compile"), "--model", str(EXAMPLE), "--output", "tiny.so",
                           "--verbose"], cwd=work, capture_output=True, text=True, env=clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    # the runtime and headers come from the install, not from the source or build tree
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("cuvil: runtime ")]
    assert line and line[0] == (f"cuvil: runtime {installed}/lib/cuvil/{line[0].split('/lib/cuvil/')[1].split('/')[0]}"
                                f"/libcuvil_rt.a, headers {installed}/share/cuvil"), proc.stderr
    sample = np.load(tl.REPO / "examples" / "models" / "sample.npy")
    ref = np.load(tl.REPO / "examples" / "models" / "sample_ref.npy")
    np.save(work / "in.npy", sample)
    run = subprocess.run([str(installed / "bin" / "cuvil-run"), "tiny.so", "--input", "in.npy", "--output-dir", "out"],
                         cwd=work, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    outs = list((work / "out").glob("*.npy"))
    assert len(outs) == 1
    tl.assert_close(np.load(outs[0]), ref, "installed model output")


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_installed_emit_c_builds_with_make(installed, tmp_path):
    proc = subprocess.run([str(installed / "bin" / "cuvil-compile"), "--model", str(EXAMPLE), "--output", "srcs",
                           "--emit", "c"], cwd=tmp_path, capture_output=True, text=True, env=clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    mk = subprocess.run(["make", "-s", "-j2"], cwd=tmp_path / "srcs", capture_output=True, text=True, timeout=600)
    assert mk.returncode == 0, mk.stdout + mk.stderr
    assert (tmp_path / "srcs" / "libsrcs.so").is_file()


def test_libcuvil_exports_only_its_api(installed):
    nm = subprocess.run(["nm", "-D", "--defined-only", str(installed / "lib" / "libcuvil.so")], capture_output=True,
                        text=True, timeout=60)
    assert nm.returncode == 0, nm.stderr
    names = [ln.split()[-1] for ln in nm.stdout.splitlines() if ln.strip()]
    header = (tl.REPO / "include" / "cuvil" / "cuvil.h").read_text()
    assert names, "libcuvil.so exports nothing"
    for n in names:
        assert n.startswith("cuvil_") and re.search(rf"\b{n}\(", header), f"libcuvil.so exports {n}, which cuvil.h does not declare"
    assert "cuvil_compile_file" in names and "cuvil_graph_node" in names


def test_program_against_installed_headers_and_library(installed, tmp_path):
    """A C program using the builder API, compiled against the installed header and library."""
    src = tmp_path / "prog.c"
    src.write_text(r'''
#include <stdio.h>
#include <cuvil/cuvil.h>
int main(int argc, char **argv) {
    (void)argc;
    cuvil_ctx *ctx; cuvil_graph *g; cuvil_options o;
    if (cuvil_ctx_create(&ctx)) return 2;
    cuvil_options_init(&o);
    cuvil_graph_create(ctx, "p", &g);
    int x = cuvil_graph_input(g, "x", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, NULL), y;
    if (x < 0 || cuvil_graph_node(g, "relu", "r", 1, &x, 1, &y, NULL, 0, NULL) || cuvil_graph_output(g, y) ||
        cuvil_compile_graph(g, &o, argv[1])) { fprintf(stderr, "%s\n", cuvil_errmsg(ctx)); return 1; }
    cuvil_graph_destroy(g);
    cuvil_ctx_destroy(ctx);
    return 0;
}
''')
    cc = ["cc", "-std=c11", str(src), "-I", str(installed / "include"), "-L", str(installed / "lib"), "-lcuvil",
          f"-Wl,-rpath,{installed / 'lib'}", "-o", str(tmp_path / "prog")]
    if sanitized():
        cc.insert(1, "-fsanitize=address,undefined")
    b = subprocess.run(cc, capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr
    r = subprocess.run([str(tmp_path / "prog"), str(tmp_path / "relu.so")], capture_output=True, text=True,
                       env=clean_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "relu.so").is_file()


@pytest.mark.parametrize("emit", ["so", "c"])
def test_installed_and_build_tree_compilers_give_identical_outputs(installed, tmp_path, emit):
    """Two copies of Cuvil at different paths (the build tree and an install moved elsewhere)
    compile the same model to the same bytes, and no output names either place."""
    outs = []
    for side, tool in (("tree", tl.bin_path("cuvil-compile")), ("installed", installed / "bin" / "cuvil-compile")):
        d = tmp_path / side
        d.mkdir()
        out = d / ("tiny.so" if emit == "so" else "tiny")
        proc = subprocess.run([str(tool), "--model", str(EXAMPLE), "--output", out.name] +
                              (["--emit", "c"] if emit == "c" else []), cwd=d, capture_output=True, text=True,
                              env=clean_env(), timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    files = ([Path("tiny.so"), Path("tiny.h")] if emit == "so" else
             sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file()))
    base = [o.parent if emit == "so" else o for o in outs]
    if emit == "c":
        assert files == sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file())
    places = [str(tl.REPO).encode(), str(tl.build_dir()).encode(), str(installed).encode(), str(tmp_path).encode()]
    for f in files:
        a, b = (base[0] / f).read_bytes(), (base[1] / f).read_bytes()
        assert a == b, f"{f} differs between the build tree's compiler and the installed one"
        for p in places:
            assert p not in a, f"{f} names {p.decode()}"
