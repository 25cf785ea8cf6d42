"""Opening a compiled model's library: checked before dlopen, and never a stale copy.

Loading a shared library runs its code (its constructors run inside dlopen), so what can be
checked is checked first, on the open file itself (no name is looked up twice):
  - a regular file (not a FIFO or a device), opened without following a symbolic link where
    the caller says so (the cache);
  - a well-formed 64-bit ELF shared object whose program headers, segments and section
    headers lie inside the file (as cuvil-run checks: a truncated library would otherwise map
    past the end of the file and die with SIGBUS when touched), not a program (no interpreter);
  - the marker string every Cuvil model carries (src/codegen/codegen.c);
  - for the cache, its size and SHA-256 against what was recorded when it was built.
Then the very file checked is handed to dlopen through /proc/self/fd, under a name used once
in this process: glibc returns an already-loaded library when the name matches, so loading a
path again after a new library was saved there would otherwise return the old model.
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import stat
import struct
import tempfile
import threading
from pathlib import Path

from ._native import CuvilError

# split so that this file does not itself carry the marker
MARKER = b"CUVIL-MODEL-" + b"OUTPUT-V1"
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")   # Elf64_Ehdr
_PHDR = struct.Struct("<IIQQQQQQ")           # Elf64_Phdr
ET_DYN, PT_INTERP = 3, 3


def _elf_problem(fd: int, size: int) -> str | None:
    """What is wrong with the ELF file open at fd (size bytes), or None."""
    h = os.pread(fd, _EHDR.size, 0)
    if len(h) < _EHDR.size or h[:4] != b"\x7fELF":
        return "not an ELF shared library"
    (ident, e_type, _m, _v, _e, phoff, shoff, _f, ehsize, phentsize, phnum, shentsize, shnum,
     _s) = _EHDR.unpack(h)
    if ident[4] != 2 or ident[5] != (1 if struct.pack("=H", 1) == b"\x01\x00" else 2) or ehsize < _EHDR.size \
            or phentsize != _PHDR.size:
        return "not a 64-bit ELF shared library for this machine"
    if e_type != ET_DYN:
        return "not a shared library (an ELF file of another kind)"
    if phoff > size or phnum * _PHDR.size > size - phoff:
        return "truncated (its program headers lie past the end of the file)"
    if shnum and (shoff > size or shentsize != 64 or shnum * 64 > size - shoff):
        return "truncated (its section headers lie past the end of the file)"
    ph = os.pread(fd, phnum * _PHDR.size, phoff)
    if len(ph) != phnum * _PHDR.size:
        return "unreadable program headers"
    for i in range(phnum):
        p_type, _fl, off, _va, _pa, filesz, _ms, _al = _PHDR.unpack_from(ph, i * _PHDR.size)
        if p_type == PT_INTERP:
            return "a program, not a library"
        if off > size or filesz > size - off:
            return "truncated (a segment lies past the end of the file)"
    return None


def _scan(fd: int, size: int, hashing: bool) -> tuple[bool, str | None]:
    """(whether the file holds the marker, its SHA-256 if hashing), read with pread (a file
    that shrinks meanwhile reads short; it is never mapped here)."""
    h = hashlib.sha256() if hashing else None
    found, tail, off = False, b"", 0
    while off < size:
        chunk = os.pread(fd, min(1 << 22, size - off), off)
        if not chunk:
            break
        if h:
            h.update(chunk)
        if not found:
            found = MARKER in tail + chunk
            tail = chunk[-(len(MARKER) - 1):]
        off += len(chunk)
    if off != size:
        return found, "short"
    return found, h.hexdigest() if h else None


def open_checked(path: Path, *, nofollow: bool = False) -> int:
    """An fd of the file at path for check_fd (not following a symbolic link when nofollow)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY | (os.O_NOFOLLOW if nofollow else 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"no compiled model at {path}") from None
    except OSError as e:
        raise CuvilError(f"{path} is not a loadable shared library: {e.strerror}", "invalid argument") from None


def check_fd(fd: int, path: Path, *, size: int | None = None, sha256: str | None = None,
             owner: int | None = None):
    """Checks the library open at fd as the module's doc says; CuvilError (status "invalid
    argument") naming `path` and what is wrong."""
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file"
    elif owner is not None and st.st_uid != owner:
        why = f"owned by user {st.st_uid}, not {owner}"
    elif size is not None and st.st_size != size:
        why = f"{st.st_size} bytes, {size} were written"
    else:
        why = _elf_problem(fd, st.st_size)
    if why is None:
        marked, digest = _scan(fd, st.st_size, sha256 is not None)
        if digest == "short":
            why = "truncated while being read"
        elif not marked:
            why = "not a Cuvil model (no Cuvil marker in it)"
        elif sha256 is not None and digest != sha256:
            why = "its contents differ from what was built"
    if why:
        raise CuvilError(f"{path} is not a loadable shared library: {why}", "invalid argument")


_names = itertools.count()
_dir_lock = threading.Lock()
_link_dir: tuple[int, str] | None = None   # (pid, folder): a forked child makes its own


def _rmdir(d: str):
    try:
        os.rmdir(d)
    except OSError:
        pass


def _private_dir() -> str:
    global _link_dir
    with _dir_lock:
        if _link_dir is None or _link_dir[0] != os.getpid() or not os.path.isdir(_link_dir[1]):
            import atexit
            _link_dir = (os.getpid(), tempfile.mkdtemp(prefix="cuvil-load-"))
            atexit.register(_rmdir, _link_dir[1])
        return _link_dir[1]


def dlopen_fd(fd: int, path: Path) -> ctypes.CDLL:
    """dlopen of the file open at fd (checked by open_checked), under a name never used before
    in this process (see the module's doc)."""
    proc = f"/proc/self/fd/{fd}"
    if not os.path.exists(proc):   # no /proc: by path (the checks above were on this name)
        return ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    link = os.path.join(_private_dir(), f"{next(_names)}.so")
    os.symlink(proc, link)
    try:
        return ctypes.CDLL(link, mode=ctypes.RTLD_LOCAL)
    finally:
        os.unlink(link)
