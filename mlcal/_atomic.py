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


# -- whole directories -------------------------------------------------------------------------
# A directory cannot be replaced by one rename, so a save builds the new tree beside the target
# and swaps it in with two renames (old -> backup, new -> target). The names below are fixed per
# target so that the next save or load recognises what a killed process left behind.
_NEW_MARK = ".mlcal-new-"
_OLD_MARK = ".mlcal-old"
#: set to a checkpoint name to make the process SIGKILL itself there (crash tests only)
KILL_AT_ENV = "MLCAL_TEST_KILL_AT"


def checkpoint(name: str) -> None:
    """A point of a multi-step write where a crash test may kill the process."""
    if os.environ.get(KILL_AT_ENV) == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _backup_name(path: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}{_OLD_MARK}")


@contextmanager
def _parent_lock(directory: str) -> Iterator[None]:
    """An exclusive lock on ``directory`` for the moments of a swap or a recovery (a killed
    holder releases it); a no-op where ``flock`` does not exist."""
    try:
        import fcntl
    except ImportError:   # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # releases the lock


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:       # exists, owned by someone else
        return True
    return True


def _is_real_dir(path: str) -> bool:
    import stat

    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def recover_directory(path: str | os.PathLike) -> None:
    """Finish or undo a directory swap that a killed process left half done.

    * a backup with no target (killed between the two renames): the backup is put back;
    * a backup beside a target (killed before the backup was removed): the backup is removed;
    * a build directory whose process is dead: removed.
    """
    import shutil

    path = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(path)
    if not os.path.isdir(directory):
        return
    backup = _backup_name(path)
    prefix = f".{name}{_NEW_MARK}"
    with _parent_lock(directory):
        if _is_real_dir(backup):
            if os.path.lexists(path):
                shutil.rmtree(backup, ignore_errors=True)
            else:
                os.rename(backup, path)
                _fsync_dir(directory)
        for entry in os.listdir(directory):
            if not entry.startswith(prefix):
                continue
            pid = entry[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)) and _is_real_dir(
                    os.path.join(directory, entry)):
                shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)


def _fsync_tree(root: str) -> None:
    for current, dirs, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(current, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(current)


@contextmanager
def replacing_directory(path: str | os.PathLike, *, overwrite: bool = False,
                        replaceable=None) -> Iterator[str]:
    """Yield a fresh directory beside ``path``; on normal exit it becomes ``path``.

    The new tree is fsynced, then swapped in under a lock with ``path -> .<name>.mlcal-old``,
    ``new -> path``, then the backup is removed. After a SIGKILL at any point ``path`` holds
    the old or the new tree, or :func:`recover_directory` (run first by the next save or load)
    restores the old one. On an exception the new tree is removed and ``path`` is untouched.

    Parameters
    ----------
    path : str or os.PathLike
        The target directory.
    overwrite : bool
        Replace an existing non-empty ``path`` (an empty directory is always replaced).
    replaceable : callable, optional
        ``replaceable(path)`` raises if the existing non-empty ``path`` must not be replaced
        (e.g. it is not the kind of directory this writer owns).
    """
    import shutil
    import tempfile

    path = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    recover_directory(path)

    def check_existing() -> None:
        if os.path.isfile(path) or os.path.islink(path) or (
                os.path.isdir(path) and any(os.scandir(path))):
            check_new_path(path, overwrite=overwrite)
            if replaceable is not None:
                replaceable(path)

    check_existing()
    new = tempfile.mkdtemp(prefix=f".{name}{_NEW_MARK}{os.getpid()}-", dir=directory)
    os.chmod(new, 0o777 & ~_umask())
    try:
        yield new
        _fsync_tree(new)
        checkpoint("dir-built")
        backup = _backup_name(path)
        with _parent_lock(directory):
            check_existing()   # again: it may have appeared meanwhile
            moved = os.path.lexists(path)
            if moved:
                os.rename(path, backup)
                _fsync_dir(directory)
                checkpoint("dir-old-moved")
            os.rename(new, path)
            _fsync_dir(directory)
            checkpoint("dir-new-in-place")
            if moved:
                if os.path.isdir(backup) and not os.path.islink(backup):
                    shutil.rmtree(backup)
                else:
                    os.unlink(backup)
                checkpoint("dir-old-removed")
    finally:
        if os.path.lexists(new):
            shutil.rmtree(new, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
