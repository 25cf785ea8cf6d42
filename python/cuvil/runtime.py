"""What this machine can run."""
from __future__ import annotations

import platform
from pathlib import Path

# the CPU features each x86-64 target's code uses (src/codegen/targets.inc's cflags)
_X86_NEEDS = {
    "x86_64-avx2": {"avx2", "fma", "f16c"},
    "x86_64-avx512": {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl"},
}


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def list_devices() -> list[dict]:
    """The targets compiled models can run on here, best first: each a dict with `target`
    (the name `cuvil.compile(target=...)` and `cuvil-compile --target` take), `arch` and the
    CPU `features` it uses. `generic` (portable C) is always last."""
    arch = platform.machine()
    flags = _cpu_flags()
    out = []
    if arch == "x86_64":
        for t in ("x86_64-avx512", "x86_64-avx2"):
            if _X86_NEEDS[t] <= flags:
                out.append({"target": t, "arch": arch, "features": sorted(_X86_NEEDS[t])})
    elif arch == "aarch64":
        out.append({"target": "aarch64-neon", "arch": arch, "features": ["neon"]})
    elif arch == "riscv64" and ("v" in flags or any(f.startswith("rv64") and "v" in f[4:] for f in flags)):
        out.append({"target": "riscv64-rvv", "arch": arch, "features": ["v"]})
    out.append({"target": "generic", "arch": "any", "features": []})
    return out
