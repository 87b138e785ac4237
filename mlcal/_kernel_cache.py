"""Where numba caches mlcal's compiled kernels, and a one-line notice when they are compiled.

numba compiles a kernel on its first call (tens of seconds for a first ``auto`` fit) and caches
the machine code on disk. mlcal ships that cache: building the wheel (``pip install .``) runs
``mlcal warmup`` and packs the result into ``mlcal/_numba_cache/`` (see
``build_support/mlcal_build.py``). :class:`PackagedCacheLocator` is the numba cache locator that
finds it after installation, which numba's own locators cannot do reliably:

* its index stamp is a hash of the source file's bytes; older numba releases stamp with the
  file's mtime, which ``pip install`` does not preserve, so a shipped index would look stale;
* the folder is named after the numba and numpy versions, so a cache built against other
  versions (the build environment is resolved apart from the target) is never read.

What numba already checks stays as it is: each index entry is keyed by the CPU name and features
and the Python bytecode, so a cache built on another CPU is simply not used (that CPU compiles
and adds its own entry); an unknown numba version in an index file makes numba ignore it.

The locator applies to mlcal's own modules, after ``NUMBA_CACHE_DIR`` (an explicit cache folder
wins) and before numba's in-tree and user-wide locators; when the packaged folder cannot be
written (a read-only install) it declines and numba falls back to those, compiling as before.
Setting ``NUMBA_CACHE_LOCATOR_CLASSES`` replaces numba's locator list, and this one with it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

import numba
import numpy as np
from numba.core import caching, event

PACKAGE_DIR = Path(__file__).resolve().parent
#: the packaged cache folder (one sub-folder per numba/numpy version pair)
CACHE_ROOT = PACKAGE_DIR / "_numba_cache"
COMPILE_NOTICE = "mlcal: compiling numba kernels (one-time, cached on disk)..."


def cache_dir() -> Path:
    """The packaged cache folder for the running numba and numpy versions."""
    return CACHE_ROOT / f"numba-{numba.__version__}_numpy-{np.__version__}"


@functools.lru_cache(maxsize=None)
def _content_hash(path: str, mtime_ns: int, size: int) -> str:
    # mtime and size are only part of the memo key (a file edited in a running process is
    # hashed again); the stamp itself is the content
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class PackagedCacheLocator(caching._CacheLocator):
    """numba cache locator for kernels defined in mlcal's modules: the packaged folder
    :func:`cache_dir`, mirroring the package layout, stamped by source content."""

    def __init__(self, py_func, py_file: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        relative = Path(py_file).resolve().parent.relative_to(PACKAGE_DIR)
        self._cache_path = str(cache_dir() / relative)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        st = os.stat(self._py_file)
        return _content_hash(self._py_file, st.st_mtime_ns, st.st_size)

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file: str):
        try:
            Path(py_file).resolve().relative_to(PACKAGE_DIR)
        except ValueError:
            return None                      # not one of mlcal's kernels
        if not os.path.isfile(py_file):
            return None
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()      # creates it and checks that it can be written
        except OSError:
            return None                      # read-only install: numba's own locators decide
        return locator


def install_locator() -> None:
    """Put :class:`PackagedCacheLocator` in numba's locator list (once), right after the
    ``NUMBA_CACHE_DIR`` locator. Must run before the first ``@njit(cache=True)`` kernel of mlcal
    is defined: numba picks a kernel's locator when it is decorated."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
    classes = impl._locator_classes
    if PackagedCacheLocator in classes:
        return
    user_dir = (getattr(caching, "UserProvidedCacheLocator", None)
                or getattr(caching, "_UserProvidedCacheLocator", None))
    at = classes.index(user_dir) + 1 if user_dir in classes else 0
    classes.insert(at, PackagedCacheLocator)


class _CompileNotice(event.Listener):
    """Prints :data:`COMPILE_NOTICE` to stderr when numba starts compiling the first mlcal
    kernel of the process (loading cached code is no compile event), then stays quiet."""

    def __init__(self):
        self.done = False

    def on_start(self, ev) -> None:
        if self.done:
            return
        dispatcher = ev.data.get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if module.split(".")[0] == "mlcal":
            # not unregistered here: numba is iterating over its listeners right now
            self.done = True
            print(COMPILE_NOTICE, file=sys.stderr, flush=True)

    def on_end(self, ev) -> None:
        pass


def install_compile_notice() -> None:
    """Announce the first kernel compilation of this process on stderr (once)."""
    event.register("numba:compile", _CompileNotice())
