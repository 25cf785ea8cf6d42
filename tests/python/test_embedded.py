"""Output fit for embedded builds: a model run with no malloc at all from a caller's buffer sized
by the header's constants, weights as a C array (--weights-format c) giving the same results, and
no path of the build machine in any output (byte-identical outputs from two folders)."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import cuvil_testlib as tl

EXAMPLE = tl.REPO / "examples" / "models" / "tinycnn.onnx"
SAMPLE = tl.REPO / "examples" / "models" / "sample.npy"
REF = tl.REPO / "examples" / "models" / "sample_ref.npy"

NO_MALLOC_PROG = r'''
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tiny.h"

/* Every allocation of the process goes through these while `watching`: the model must make none.
 * (glibc's own entry points underneath, so no dlsym and no recursion.) */
extern void *__libc_malloc(size_t);
extern void *__libc_memalign(size_t, size_t);
static int watching, calls;
void *malloc(size_t n) {
    calls += watching;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (b && a > (size_t)-1 / b) return NULL;
    void *p = malloc(a * b);   /* counted there */
    if (p) memset(p, 0, a * b);
    return p;
}
void *aligned_alloc(size_t al, size_t n) {
    calls += watching;
    return __libc_memalign(al, n);
}

static unsigned char buffer[TINY_BUFFER_BYTES + 7];

int main(int argc, char **argv) {
    (void)argc;
    static float in[1 * 3 * 64 * 64], out[10];
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(in, sizeof in, 1, f) != 1) return 3;
    fclose(f);
    cuvil_model_options o;
    memset(&o, 0, sizeof o);
    cuvil_model *m = NULL;
    /* too small: refused with a message in the buffer's context */
    o.buffer = buffer + 7;   /* any alignment */
    o.buffer_bytes = TINY_BUFFER_BYTES / 2;
    watching = 1;
    if (tiny_create(&o, &m) != CUVIL_ERR_INVALID_ARG || !m || !strstr(tiny_errmsg(m), "smaller")) return 4;
    o.buffer_bytes = TINY_BUFFER_BYTES;
    if (tiny_create(&o, &m) != CUVIL_OK) return 5;
    const void *ins[1] = {in};
    void *outs[1] = {out};
    for (int r = 0; r < 3; r++)
        if (tiny_run(m, ins, outs) != CUVIL_OK) return 6;
    tiny_destroy(m);
    watching = 0;
    printf("allocations %d\n", calls);
    for (int i = 0; i < 10; i++) printf("%.9g\n", out[i]);
    return calls ? 7 : 0;
}
'''


def test_header_states_memory_and_runs_without_malloc(tmp_path):
    so = tl.compile(EXAMPLE, tmp_path, stem="tiny")
    hdr = (tmp_path / "tiny.h").read_text()
    sizes = {k: int(v) for k, v in re.findall(r"#define TINY_(ARENA|SCRATCH|BUFFER)_BYTES \(\(size_t\)(\d+)\)", hdr)}
    assert set(sizes) == {"ARENA", "SCRATCH", "BUFFER"}, hdr[-1500:]
    assert sizes["ARENA"] > 0 and sizes["SCRATCH"] > 0
    assert sizes["BUFFER"] >= sizes["ARENA"] + sizes["SCRATCH"]
    src = tmp_path / "prog.c"
    src.write_text(NO_MALLOC_PROG)
    b = subprocess.run(["cc", "-std=c11", "-O1", str(src), "-I", str(tmp_path), str(so), f"-Wl,-rpath,{tmp_path}",
                        "-o", str(tmp_path / "prog")], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr
    x = np.load(SAMPLE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    r = subprocess.run([str(tmp_path / "prog"), str(tmp_path / "in.bin")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    lines = r.stdout.split()
    assert lines[:2] == ["allocations", "0"]
    got = np.array([float(v) for v in lines[2:]], np.float32).reshape(np.load(REF).shape)
    tl.assert_close(got, np.load(REF), "model run from a caller's buffer")


@pytest.mark.plain   # (the system compiler or pip does the work: the sanitizer pass gains little; CI time)
def test_weights_as_c_array(tmp_path):
    asm = tl.compile(EXAMPLE, tmp_path / "asm", stem="tiny")
    proc = subprocess.run([str(tl.bin_path("cuvil-compile")), "--model", str(EXAMPLE), "--output", str(tmp_path / "c.so"),
                           "--weights-format", "c", "--target", tl.effective_target()], capture_output=True, text=True,
                          timeout=600)   # (the target tl.compile took: $CUVIL_TEST_TARGET's kernels round differently)
    assert proc.returncode == 0, proc.stderr
    x = np.load(SAMPLE)
    a = tl.run(asm, {"input": x}, tmp_path / "ra")
    c = tl.run(tmp_path / "c.so", {"input": x}, tmp_path / "rc")
    for k in a:
        np.testing.assert_array_equal(a[k], c[k])   # the same bytes reach the kernels
    # sources for another toolchain: weights.c, no .incbin
    out = tmp_path / "srcs"
    proc = subprocess.run([str(tl.bin_path("cuvil-compile")), "--model", str(EXAMPLE), "--output", str(out), "--emit",
                           "c", "--weights-format", "c", "--target", tl.effective_target()], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (out / "weights.c").is_file() and not (out / "weights.S").exists() and not (out / "weights.bin").exists()
    mk = subprocess.run(["make", "-s", "-j2"], cwd=out, capture_output=True, text=True, timeout=600)
    assert mk.returncode == 0, mk.stdout + mk.stderr
    d = tl.run(out / "libsrcs.so", {"input": x}, tmp_path / "rd")
    for k in a:
        np.testing.assert_array_equal(a[k], d[k])


def test_bad_weights_format_is_refused(tmp_path):
    proc = subprocess.run([str(tl.bin_path("cuvil-compile")), "--model", str(EXAMPLE), "--output", str(tmp_path / "x.so"),
                           "--weights-format", "hex"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--weights-format wants asm or c" in proc.stderr, proc.stderr


@pytest.mark.parametrize("emit", ["so", "c"])
def test_outputs_byte_identical_from_two_folders(tmp_path, emit):
    """The same model and options compiled by Cuvil from two places, with the model at two
    paths: the library and every source file are byte for byte the same."""
    outs = []
    for side in ("a", "b"):
        d = tmp_path / f"place-{side}-{'x' * (3 if side == 'a' else 11)}"
        d.mkdir()
        model = d / "tinycnn.onnx"
        shutil.copy(EXAMPLE, model)
        out = d / ("tiny.so" if emit == "so" else "tiny")
        args = [str(tl.bin_path("cuvil-compile")), "--model", str(model), "--output", str(out)]
        if emit == "c":
            args += ["--emit", "c"]
        proc = subprocess.run(args, cwd=d, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    if emit == "so":
        assert outs[0].read_bytes() == outs[1].read_bytes(), "the .so differs between the two folders"
        assert (outs[0].parent / "tiny.h").read_bytes() == (outs[1].parent / "tiny.h").read_bytes()
        assert str(tmp_path).encode() not in outs[0].read_bytes()
    else:
        files_a = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file())
        files_b = sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file())
        assert files_a == files_b
        for f in files_a:
            assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f"{f} differs"
            assert str(tmp_path).encode() not in (outs[0] / f).read_bytes(), f"{f} names the build folder"
