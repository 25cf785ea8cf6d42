"""A build for a CPU the machine lacks: an x86_64-avx512 model on a CPU with AVX2 but no
AVX-512 fails at create with a message naming the target and the missing feature (from
cuvil-run, from a C program linking the static archive, and from Python: CuvilError), never
with SIGILL; the x86_64-avx2 build of the same model runs there and matches ONNX Runtime.

The AVX2-only CPU is this machine when it has no AVX-512, else qemu-user emulating an AMD
EPYC-Rome (Zen 2: AVX2, FMA, F16C, no AVX-512) on this one: the same binaries, the same
check (CPUID), answered by the emulated CPU."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cuvil_testlib as tl

TINY = tl.REPO / "examples" / "models" / "tinycnn.onnx"
AVX2_CPU = "EPYC-Rome"


def _avx2_only_prefix() -> list:
    """The command prefix that runs a program on a CPU with AVX2 and no AVX-512."""
    if not tl.host_runs("x86_64-avx2"):
        pytest.fail("this machine has no AVX2, and qemu-user cannot emulate AVX2 from it", pytrace=False)
    if not tl.host_runs("x86_64-avx512"):
        return []
    q = shutil.which("qemu-x86_64")
    if not q:
        pytest.fail("qemu-x86_64 is missing (Debian's qemu-user; tools/setup/setup.sh installs it): it "
                    "emulates a CPU without AVX-512 on this AVX-512 machine", pytrace=False)
    return [q, "-cpu", AVX2_CPU]


def _run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    # qemu warns about the emulated model's features TCG leaves out: not the program's words
    r.stderr = "\n".join(ln for ln in r.stderr.splitlines() if not ln.startswith("qemu-x86_64: warning:"))
    return r


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """tinycnn compiled for both x86-64 targets, a random input and ONNX Runtime's output."""
    d = tmp_path_factory.mktemp("targets")
    out = {t: tl.compile(TINY, d / t, target=t) for t in ("x86_64-avx2", "x86_64-avx512")}
    x = tl.seeded_rng("targets").standard_normal((1, 3, 64, 64)).astype(np.float32)
    np.save(d / "x.npy", x)
    return d, out, d / "x.npy", tl.ort_run(TINY, {"input": x})


def _check_refusal(r, what):
    tl.assert_clean_failure(r, mentions=("x86_64-avx512", "lacks avx512f"), what=what)


# qemu-user cannot run an AddressSanitizer build (its shadow memory): the plain pass of make
# test runs the tests that put build/bin/cuvil-run or libcuvil under qemu; the C program's
# test, which links nothing of the sanitized build, runs in both.
@pytest.mark.plain
def test_cuvil_run_refuses_avx512_build_on_avx2_cpu(builds):
    d, so, x, ref = builds
    pre = _avx2_only_prefix()
    run = [str(tl.bin_path("cuvil-run"))]
    r = _run(pre + run + [str(so["x86_64-avx512"]), "--input", f"input={x}", "--output-dir", str(d)])
    _check_refusal(r, "cuvil-run of an x86_64-avx512 build on an AVX2-only CPU")
    # --info reads the descriptor on that CPU too, and says what the build needs and what is missing
    r = _run(pre + run + [str(so["x86_64-avx512"]), "--info"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"^cpu: +avx2 fma f16c avx512f avx512bw avx512dq avx512vl \(this CPU lacks avx512f\)$",
                     r.stdout, re.M), r.stdout
    # the AVX2 build of the same model runs there, and gives ONNX Runtime's answer
    od = d / "avx2-out"
    od.mkdir(exist_ok=True)
    r = _run(pre + run + [str(so["x86_64-avx2"]), "--input", f"input={x}", "--output-dir", str(od)])
    assert r.returncode == 0, r.stderr
    tl.assert_outputs_close(tl.read_outputs(od), ref)


def test_info_states_cpu_features(builds):
    """On this machine: --info (text and JSON) lists the features each build's code uses."""
    import json

    _, so, _, _ = builds
    feats = tl.target_features()
    for t, path in so.items():
        r = tl.run_tool("cuvil-run", [path, "--info", "--json"])
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)["info"]
        assert info["cpu_features"] == " ".join(feats[t]), info
        assert info["cpu_lacks"] == (None if tl.host_runs(t) else "avx512f"), info


@pytest.mark.plain
def test_python_raises_cuvil_error_on_avx2_cpu(builds):
    d, so, x, ref = builds
    pre = _avx2_only_prefix()
    code = f"""
import sys, numpy as np, cuvil
x = np.load({str(x)!r})
try:
    cuvil.load({str(so["x86_64-avx512"])!r})(x)
    print("NO ERROR")
except cuvil.CuvilError as e:
    print("CuvilError:", e)
np.save({str(d / "py.npy")!r}, cuvil.load({str(so["x86_64-avx2"])!r})(x))
"""
    env = dict(os.environ, CUVIL_LIB=str(tl.build_dir() / "lib" / "libcuvil.so"),
               PYTHONPATH=str(tl.REPO / "python"))
    r = _run(pre + [sys.executable, "-c", code], env=env)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "CuvilError:" in r.stdout and "x86_64-avx512" in r.stdout and "lacks avx512f" in r.stdout, r.stdout
    tl.assert_close(np.load(d / "py.npy"), ref["logits"])


C_HOST = r"""
#include <stdio.h>
#include "tiny.h"
static unsigned char mem[TINY_BUFFER_BYTES];
int main(void) {
    cuvil_model *m = NULL;
    cuvil_status s = tiny_create(NULL, &m);
    printf("create: %d: %s\n", (int)s, m ? tiny_errmsg(m) : "(no context)");
    static float x[1 * 3 * 64 * 64], y[10];
    const void *in[] = {x};
    void *out[] = {y};
    s = tiny_run(m, in, out);   /* a caller that ignores create's status */
    printf("run: %d: %s\n", (int)s, m ? tiny_errmsg(m) : "(no context)");
    tiny_destroy(m);
    cuvil_model_options o = { .buffer = mem, .buffer_bytes = sizeof mem };
    s = tiny_create(&o, &m);
    printf("buffer: %d: %s\n", (int)s, m ? tiny_errmsg(m) : "(no context)");
    tiny_destroy(m);
    return 0;
}
"""


def test_c_program_gets_the_error(tmp_path):
    """A C program linking the x86_64-avx512 static archive: create (allocating, and in the
    caller's buffer) returns CUVIL_ERR_UNSUPPORTED with the message on the AVX2-only CPU."""
    pre = _avx2_only_prefix()
    r = tl.compile_raw(TINY, tmp_path / "tiny.a", target="x86_64-avx512", emit="a")
    assert r.returncode == 0, r.stderr
    (tmp_path / "main.c").write_text(C_HOST)
    subprocess.run(["cc", "-O2", "main.c", "-I.", "tiny.a", "-lm", "-pthread", "-o", "main"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=120)
    r = _run(pre + ["./main"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for what in ("create", "buffer"):
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(what + ":"))
        assert line.startswith(f"{what}: 3: this CPU lacks avx512f") and "x86_64-avx512" in line, r.stdout
    # run on the context that create refused: an error (the create's message kept), not SIGILL
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("run:"))
    assert line.startswith("run: 1: this CPU lacks avx512f"), r.stdout


def test_code_before_the_check_is_baseline(builds):
    """Static proof for every path, not only the one run above: the functions a host may call
    on any CPU (create up to its check, errmsg, destroy, the descriptor) and the check itself
    contain no AVX instruction (no v-prefixed mnemonic), in the x86_64-avx512 build."""
    _, so, _, _ = builds
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(so["x86_64-avx512"])], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    funcs = {}
    for block in dis.split("\n\n"):
        m = re.match(r"[0-9a-f]+ <([^>]+)>:\n", block)
        if m:
            funcs[m.group(1)] = [ln.split("\t")[-1] for ln in block.splitlines()[1:] if "\t" in ln]
    want = ["tinycnn_create", "tinycnn_errmsg", "tinycnn_destroy", "tinycnn_model", "tinycnn_run", "tinycnn_run_shapes",
            "cuvil_model_entry", "cuvil_rt_cpu_lacks",
            # the runtime's glue they forward to (runtime/glue/context.c)
            "cuvil_glue_create", "cuvil_glue_run_shapes", "cuvil_glue_errmsg", "cuvil_glue_destroy", "cuvil_glue_set_err"]
    # and what they call before the check, where not inlined
    want += [f for f in ("cpuid", "has_feature", "xcr0", "cpu_lacks", "default_alloc", "default_free", "add64",
                         "check_args", "no_external_weights") if f in funcs]
    for f in want:
        assert f in funcs, f"{f} not in the library's disassembly"
        avx = [ins for ins in funcs[f] if re.match(r"v[a-z]", ins.strip())]
        assert not avx, f"{f} uses AVX before the CPU check: {avx[:5]}"
    # and the model's kernels do use AVX-512 (so that the check above means something)
    assert any("%zmm" in ins for ins in sum(funcs.values(), [])), "no zmm instruction in the AVX-512 build"
