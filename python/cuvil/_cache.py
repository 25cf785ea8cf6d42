"""The compile cache of cuvil.compile ($CUVIL_CACHE_DIR, else ~/.cache/cuvil/python).

A cached library is code this process will run, so the cache trusts nothing it did not check:
  - the cache folder is private: created 0700, and refused (CuvilError) when another user owns
    it or a group or other users may write to it;
  - an entry is a folder <key>/ (the key: SHA-256 of the model's bytes, the options, libcuvil's
    identity, $CC, and the name and SHA-256 of every file the model reads besides itself)
    holding model.onnx, model.so, model.h and entry.json (what was built: the key, the model's
    SHA-256, the options, the library's size and SHA-256, the descriptor's options text);
  - an entry is built in a fresh private folder (.build-<pid>-XXXX, mkdtemp: O_EXCL, 0700),
    its files created with O_EXCL|O_NOFOLLOW, and renamed into place whole;
  - before anything is loaded, the entry is opened without following symbolic links (the
    folder and each file), each must be ours and not writable by others, entry.json must match
    the key, the model and the options, model.onnx its SHA-256, and model.so its size, SHA-256
    and the checks of _load (ELF, segments inside the file, marker); the descriptor's model
    SHA-256 and options are compared after loading. An entry that fails any check is damaged:
    it is moved aside and built again;
  - folders of compiles that died (SIGKILL, a crash) are removed by the next build.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from . import _cleanup
from ._native import CuvilError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
FORMAT = 1


class Damaged(Exception):
    """A cache entry that cannot be trusted (the reason is the message)."""


def default_root() -> Path:
    d = os.environ.get("CUVIL_CACHE_DIR")
    if d:
        return Path(d).absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).absolute() / "cuvil" / "python"


def open_root(root: Path) -> Path:
    """The cache folder, created private if absent; CuvilError if it is not ours alone."""
    hint = "(set CUVIL_CACHE_DIR to a folder of your own, or pass cache=False)"
    try:
        root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            pass
        st = os.stat(root)   # the folder named (a link the user set up is theirs to make)
    except OSError as e:
        raise CuvilError(f"cannot use the cache folder {root}: {e.strerror} {hint}", "io") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CuvilError(f"the cache folder {root} is not a folder {hint}", "io")
    if st.st_uid != os.geteuid():
        raise CuvilError(f"the cache folder {root} belongs to user {st.st_uid}, not to this one ({os.geteuid()}): "
                         f"a library in it would run as you {hint}", "io")
    if st.st_mode & 0o022:
        raise CuvilError(f"the cache folder {root} is writable by {'group' if st.st_mode & 0o020 else 'others'} "
                         f"(mode {stat.S_IMODE(st.st_mode):o}): a library in it would run as you {hint}", "io")
    return root


def sha256_file(path: Path, *, dir_fd: int | None = None, nofollow: bool = False) -> str:
    fd = os.open(path, _FILE_FLAGS if nofollow else os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 22):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _check_ours(fd: int, what: str, kind) -> os.stat_result:
    st = os.fstat(fd)
    if not kind(st.st_mode):
        raise Damaged(f"{what} is not a {'folder' if kind is stat.S_ISDIR else 'regular file'}")
    if st.st_uid != os.geteuid():
        raise Damaged(f"{what} belongs to user {st.st_uid}")
    if st.st_mode & 0o022:
        raise Damaged(f"{what} is writable by others")
    return st


def _read_small(name: str, dir_fd: int, limit: int = 1 << 20) -> bytes:
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    try:
        st = _check_ours(fd, name, stat.S_ISREG)
        if st.st_size > limit:
            raise Damaged(f"{name} is {st.st_size} bytes")
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


def lookup(root: Path, key: str, expect: dict, make_model):
    """The model of entry `key`, checked as the module's doc says; None when there is none.
    expect: {"model_sha256", "args"} the entry must have been built for. make_model(path, fd,
    checks) loads the library open at fd. Raises Damaged."""
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            kfd = os.open(key, _DIR_FLAGS, dir_fd=rfd)
        except FileNotFoundError:
            return None
        except OSError as e:   # a symbolic link (ELOOP), a file (ENOTDIR), ...
            if not os.path.lexists(root / key):
                return None
            raise Damaged(f"{key} cannot be opened as a folder: {e.strerror}") from None
        try:
            _check_ours(kfd, key, stat.S_ISDIR)
            try:
                m = json.loads(_read_small("entry.json", kfd))
            except FileNotFoundError:
                raise Damaged("entry.json is missing") from None
            except (ValueError, OSError) as e:
                raise Damaged(f"entry.json is unreadable: {e}") from None
            if not isinstance(m, dict) or m.get("format") != FORMAT or m.get("key") != key or \
                    m.get("model_sha256") != expect["model_sha256"] or m.get("args") != expect["args"]:
                raise Damaged("entry.json describes another build")
            try:
                if sha256_file(Path("model.onnx"), dir_fd=kfd, nofollow=True) != m["model_sha256"]:
                    raise Damaged("model.onnx is not the model compiled")
                fd = os.open("model.so", _FILE_FLAGS, dir_fd=kfd)
            except OSError as e:
                raise Damaged(f"a file of the entry cannot be opened: {e.strerror}") from None
            try:
                _check_ours(fd, "model.so", stat.S_ISREG)
            except Damaged:
                os.close(fd)
                raise
            checks = {"size": m.get("so_size"), "sha256": m.get("so_sha256"), "owner": os.geteuid(),
                      "model_sha256": m["model_sha256"], "options": m.get("options")}
            try:
                return make_model(root / key / "model.so", fd, checks)   # closes fd
            except CuvilError as e:
                raise Damaged(str(e)) from None
        finally:
            os.close(kfd)
    finally:
        os.close(rfd)


def _write_new(path: Path, data: bytes, mode: int = 0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)


def new_build(root: Path) -> Path:
    """A fresh private folder to build an entry in (stale ones of dead processes go first)."""
    _cleanup.remove_stale(root, (".build-", ".trash-"))
    return Path(tempfile.mkdtemp(prefix=f".build-{os.getpid()}-", dir=root))


def write_entry(build: Path, data: bytes):
    _write_new(build / "model.onnx", data)


def seal(build: Path, manifest: dict):
    """Records what was built (the library's size and SHA-256 with the rest) in entry.json."""
    so = build / "model.so"
    m = dict(manifest, format=FORMAT, so_size=os.lstat(so).st_size, so_sha256=sha256_file(so, nofollow=True))
    _write_new(build / "entry.json", json.dumps(m, sort_keys=True).encode())


def commit(root: Path, build: Path, key: str, still_good) -> bool:
    """Renames the finished build folder to <key>. When an entry is there already: if
    still_good() (another process built the same), ours is dropped and False returned; a
    damaged one is moved aside and removed."""
    dst = root / key
    for _ in range(3):
        try:
            os.rename(build, dst)   # onto nothing, or onto an empty folder
            return True
        except OSError:
            if still_good():
                shutil.rmtree(build, ignore_errors=True)
                return False
            aside = Path(tempfile.mkdtemp(prefix=f".trash-{os.getpid()}-", dir=root))
            try:
                os.rename(dst, aside / "old")   # a link or a file moves as itself, never followed
            except FileNotFoundError:
                pass
            finally:
                shutil.rmtree(aside, ignore_errors=True)
    raise CuvilError(f"cannot put the compiled model into the cache at {dst}", "io")
