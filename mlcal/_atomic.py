"""Crash-safe file writes: every artifact mlcal writes goes through :func:`atomic_path`.

The content is written to a temporary file in the target's own directory, flushed to disk
(fsync) and only then moved over the target with one rename. A process killed at any moment
(SIGTERM, SIGKILL, power loss after the fsync) leaves either the complete old file or the
complete new one, never a truncated mix. A killed writer may leave its temporary file behind;
it is named ``.<target name>.<random>.tmp<suffix>`` beside the target.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager, suppress
from typing import Any, Iterator


def _refuse_existing(path: str) -> None:
    raise FileExistsError(f"{path} already exists; pass overwrite=True (CLI: --force) "
                          "to replace it")


def check_new_path(path: str | os.PathLike, *, overwrite: bool = False) -> None:
    """The one "nothing a user saved is overwritten without asking" guard.

    Raises ``FileExistsError`` when ``path`` exists and ``overwrite`` is False. Call it before
    expensive work whose result goes to ``path``; :func:`atomic_path` checks again when it
    writes.
    """
    path = os.path.abspath(os.fspath(path))
    if not overwrite and os.path.lexists(path):
        _refuse_existing(path)


def _new_file_mode(existing: str) -> int:
    """Mode for the new file: the replaced file's, else what ``open`` would give (0666 & ~umask);
    ``mkstemp`` alone would leave every artifact readable by its owner only."""
    try:
        return os.stat(existing).st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _fsync_dir(directory: str) -> None:
    # makes the rename itself durable; not possible on every platform/filesystem
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[str]:
    """Yield a temporary path to write; on normal exit it replaces ``path`` atomically.

    An ``OSError`` creating, writing (an error naming the temporary file, or no file) or
    committing the file is re-raised as the same kind of error with the same OS reason,
    naming ``path`` (the temporary file's name means nothing to the user).

    Parameters
    ----------
    path : str or os.PathLike
        The final file.
    overwrite : bool
        Replace an existing ``path``; otherwise ``FileExistsError`` is raised, before anything
        is written and again (without touching the existing file) if the file appeared
        meanwhile.

    Yields
    ------
    str
        A fresh, empty file in the same directory with the same extension as ``path`` (so
        writers that infer a format from the name still work). On an exception it is removed
        and ``path`` is left as it was.
    """
    path = os.path.abspath(os.fspath(path))
    check_new_path(path, overwrite=overwrite)
    directory, name = os.path.split(path)
    suffix = os.path.splitext(name)[1]
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=f".tmp{suffix}", dir=directory)
    except OSError as exc:
        raise _naming_target(exc, path) from exc
    os.close(fd)
    try:
        try:
            yield tmp
        except OSError as exc:   # the caller's write to the temporary file failed
            if exc.filename not in (tmp, None) and exc.filename2 != tmp:
                raise   # about another file
            raise _naming_target(exc, path) from exc
        try:
            _commit(tmp, path, directory, overwrite)
        except FileExistsError:
            raise
        except OSError as exc:
            raise _naming_target(exc, path) from exc
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)


def _naming_target(exc: OSError, path: str) -> OSError:
    """The same kind of error (same errno, same OS reason) naming the file the user asked
    for instead of mlcal's temporary file beside it."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), path)


def _commit(tmp: str, path: str, directory: str, overwrite: bool) -> None:
    """Flush ``tmp`` to disk and move it over ``path`` (no-clobber unless ``overwrite``)."""
    os.chmod(tmp, _new_file_mode(path))
    fd = os.open(tmp, os.O_RDONLY)   # flush whatever the writer wrote, however it wrote it
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if overwrite:
        os.replace(tmp, path)
    else:
        try:   # a hard link fails if the target appeared meanwhile: no-clobber, atomically
            os.link(tmp, path)
        except FileExistsError:
            _refuse_existing(path)
        except OSError:   # filesystem without hard links
            if os.path.exists(path):
                _refuse_existing(path)
            os.replace(tmp, path)
        else:
            os.unlink(tmp)
    _fsync_dir(directory)


def write_atomic(path: str | os.PathLike, data: str | bytes, *, overwrite: bool = False) -> str:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` with :func:`atomic_path`; returns the
    absolute path."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_path(path, overwrite=overwrite) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(payload)
    return os.path.abspath(os.fspath(path))


def write_json(path: str | os.PathLike, obj: Any, *, overwrite: bool = False,
               indent: int | None = 1, nonfinite: str = "null") -> str:
    """Write ``obj`` as strict JSON (see :func:`mlcal._safe_json.dumps_safe`; NaN/inf become
    null, or an error with ``nonfinite="error"``) with a final newline, atomically; returns the
    absolute path. The one writer of mlcal's JSON files: calibrators and reports."""
    from mlcal._safe_json import dumps_safe

    return write_atomic(path, dumps_safe(obj, indent=indent, nonfinite=nonfinite) + "\n",
                        overwrite=overwrite)
