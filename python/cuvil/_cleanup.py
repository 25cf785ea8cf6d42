"""Nothing of a compile outlives it: not an exception, and not SIGTERM, SIGINT or SIGHUP.

libcuvil removes its own temporary files on every error, but in a Python process it installs
no signal handlers (the process's signal handling is the program's), so a signal's default
action would end the process with the build folder (`*.cuvil-build-*`) and the C compiler left
behind. Each compile therefore runs through `run()`: it registers the folders the compile
writes in, and, when called from the main thread, runs the compile on a worker thread while the
main thread waits interruptibly with handlers installed for those three signals. A handler
stops the compiler processes working in a registered folder (found by their working folder:
libcuvil runs the C compiler inside its build folder), removes the folders, then hands the
signal to the handler that was there before (Python's KeyboardInterrupt for SIGINT; for the
default action it restores it and raises the signal again, so the exit status is the
signal's). Handlers are in place only while a main-thread compile runs, and a signal whose
previous handler was not set from Python (a C library's) or is SIG_IGN is left alone. Compiles
on other threads cannot install handlers (Python runs them on the main thread only): their
folders are still cleaned up by a main-thread handler, by their own exceptions, and, after a
SIGKILL or a crash, by the next compile in the same cache (`remove_stale`).
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Callable

_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, n))
_lock = threading.RLock()   # re-entrant: a second signal may arrive while clean_now holds it
_live: dict[int, Callable[[], list[str]]] = {}   # token -> the folders to stop and remove now
_next = 0


def _register(folders: Callable[[], list[str]]) -> int:
    global _next
    with _lock:
        _next += 1
        _live[_next] = folders
        return _next


def _forget(token: int):
    with _lock:
        _live.pop(token, None)


def _descendants() -> list[int]:
    """This process's descendants (from /proc), deepest last."""
    parent = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                parent[int(n)] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    out, frontier = [], [os.getpid()]
    while frontier:
        kids = [p for p, pp in parent.items() if pp in frontier and p not in out]
        out += kids
        frontier = kids
    return out


def _inside(path: str, folders: list[str]) -> bool:
    path = path.removesuffix(" (deleted)")
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in folders)


def clean_now():
    """Stops the C compilers of the compiles in flight and removes their folders."""
    with _lock:
        folders = [str(d) for f in _live.values() for d in f()]
    if not folders:
        return
    for pid in _descendants():   # the C compiler and its helpers work inside a build folder
        try:
            if _inside(os.readlink(f"/proc/{pid}/cwd"), folders):
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for d in folders:
        shutil.rmtree(d, ignore_errors=True)


_previous: dict[int, object] = {}


def _on_signal(signum, frame):
    clean_now()
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        return prev(signum, frame)   # Python's SIGINT handler raises KeyboardInterrupt here
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)     # the default action: the process ends by this signal


def _install() -> dict:
    installed = {}
    for s in _SIGNALS:
        try:
            prev = signal.getsignal(s)
        except (ValueError, OSError):
            continue
        if prev is None or prev == signal.SIG_IGN:   # a C library's handler, or ignored: left alone
            continue
        installed[s] = prev
        _previous[s] = prev
        signal.signal(s, _on_signal)
    return installed


def _restore(installed: dict):
    for s, prev in installed.items():
        if signal.getsignal(s) is _on_signal:   # unless the program replaced ours meanwhile
            signal.signal(s, prev)


def run(call: Callable[[], object], folders: Callable[[], list[str]]):
    """call() (a compile writing only inside what folders() lists), cleaned up after a signal
    as the module's doc says; exceptions of call() propagate, and on any exception the
    folders are removed (after the compile has stopped)."""
    token = _register(folders)
    try:
        if threading.current_thread() is not threading.main_thread():
            return call()
        box: dict = {}

        def work():
            try:
                box["value"] = call()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box["error"] = e

        installed = _install()
        try:
            t = threading.Thread(target=work, name="cuvil-compile", daemon=True)
            t.start()
            try:
                t.join()   # interruptible: a handler runs (and may raise) while waiting
            except BaseException:
                clean_now()   # stop the compiler, then wait for the call to return
                t.join()
                raise
        finally:
            _restore(installed)
        if "error" in box:
            raise box["error"]
        return box.get("value")
    except BaseException:
        for d in folders():
            shutil.rmtree(d, ignore_errors=True)
        raise
    finally:
        _forget(token)


def new_build_folders(output: Path) -> Callable[[], list[str]]:
    """For a compile straight to `output` (outside any folder of ours): the build folders
    libcuvil creates beside it that were not there before."""
    pattern = glob.escape(str(output)) + ".cuvil-build-*"
    before = set(glob.glob(pattern))
    return lambda: [p for p in glob.glob(pattern) if p not in before]


def remove_stale(root: Path, prefixes: tuple[str, ...]):
    """Removes the folders `<prefix><pid>-...` in root whose process is gone (a compile killed
    by SIGKILL or a crash). The pid of a live process is never touched, whoever's it is."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for n in names:
        for p in prefixes:
            if not n.startswith(p):
                continue
            pid = n[len(p):].split("-", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                path = root / n
                if path.is_symlink() or not path.is_dir():
                    path.unlink(missing_ok=True)
                else:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass
