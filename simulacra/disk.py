"""The run folder's disk, checked before the first tick: writable, and with enough free space; and held by one
writer at a time.

A run that cannot write its trace or checkpoint would fail at its first tick with an ``OSError`` deep in a stage;
:func:`check_run_folder` says so at once, naming the folder, what is wrong and what to do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulacra.errors import RunFolderError, RunInUseError

MB = 1024 * 1024

#: what a run writes into its folder (trace, checkpoint, summary, stores, journals, the model's calls); a folder
#: holding none of them is not a run's, and ``--overwrite`` leaves it alone
RUN_FILES = ("trace.jsonl", "checkpoint.json", "summary.json", "chroma", "stores.journal", "checkpoint.journal",
             "llm_calls.jsonl")


def default_run_name(world: str | Path, seed: int) -> str:
    """The run folder's name when none is given (``--run-name``, ``run_name``): ``<world file stem>-seed<seed>``,
    e.g. ``fernhollow-seed0``."""
    return f"{Path(world).stem}-seed{seed}"


def check_run_name(run_name: str) -> str:
    """``run_name`` if it names one folder (made under the database folder), else :class:`RunFolderError`: a
    path (``a/b``, ``/tmp/x``), ``.`` or ``..`` would put the run, and ``--overwrite``'s deletion, elsewhere."""
    if (not run_name or run_name in (".", "..") or "/" in run_name or (os.altsep and os.altsep in run_name)
            or os.sep in run_name or "\0" in run_name):
        raise RunFolderError(f"run name {run_name!r} (--run-name): give a folder name, not a path; the run folder "
                             "is made in the database folder (db_dir, --db-dir: choose the place there)")
    return run_name


#: the lock files this process holds (:func:`hold_run_folder`), to say whose town holds a folder; weak, so that a
#: town dropped without being closed lets its folder go when it is collected (the lock's own finaliser releases it)
_HELD: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def run_lock_path(run_dir: str | Path) -> Path:
    """The lock file of run folder ``run_dir``: ``.<run name>.lock`` beside it in the database folder (outside the
    folder, so that ``--overwrite`` can delete the folder while holding it)."""
    run_dir = Path(run_dir)
    return run_dir.parent / f".{run_dir.name}.lock"


def hold_run_folder(run_dir: str | Path) -> Callable[[], None]:
    """Hold run folder ``run_dir`` for this writer until the returned function is called (an OS file lock,
    ``filelock``: released by the system too when the process ends, however it ends). A town takes it before it
    creates, replaces or resumes the folder (:func:`simulacra.runtime.prepare_run`) and lets it go when it is
    closed; readers (``interview``, ``inspect``, ``replay``, ``open_run``) do not take it.

    Raises:
        RunInUseError: another town holds the folder: one of this process (a notebook's earlier ``Town`` of the
            same run: close it first) or of another process (a ``simulacra run``).
        RunFolderError: the database folder cannot be created.
    """
    from filelock import FileLock, Timeout

    path = run_lock_path(run_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunFolderError(f"the database folder {path.parent} cannot be created ({err.strerror or err}); make its "
                             "parent writable or choose another --db-dir") from None
    key = str(path.resolve())
    held = _HELD.get(key)
    if held is not None and held.is_locked:
        raise RunInUseError(f"run folder {run_dir} is open in another town of this process: close that one first "
                            f"(town.close(), or use it: `with Town.create(...) as town:` closes it at the block's "
                            f"end), or choose another run name")
    lock = FileLock(str(path), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunInUseError(f"run folder {run_dir} is being written by another process (a `simulacra run`, "
                            f"`simulacra evaluate` or a notebook's town): wait for it to end or stop it, or choose "
                            f"another run name") from None
    except OSError as err:
        raise RunFolderError(f"the run folder {run_dir} cannot be locked for writing ({err.strerror or err}: "
                             f"{path}); make {path.parent} writable or choose another --db-dir") from None
    _HELD[key] = lock

    def release() -> None:
        if _HELD.get(key) is lock:
            del _HELD[key]
        if lock.is_locked:  # the (empty) lock file stays: deleting it would let two writers lock two files
            lock.release()

    return release


def is_run_folder(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` is empty or holds what a run writes (:data:`RUN_FILES`, a worker's ``shard-N``)."""
    names = [p.name for p in Path(run_dir).iterdir()]
    return not names or any(n in RUN_FILES or n.startswith("shard-") for n in names)


def check_run_folder(run_dir: str | Path, min_free_mb: float, remove_on_error: bool = False) -> float:
    """Check that ``run_dir`` (an existing folder) can be written and its disk has ``min_free_mb`` MB free.

    Writability is tested by creating, writing, fsyncing and deleting a small file in it (what the trace and the
    checkpoint do), so a read-only folder, a read-only mount and a full disk are all caught, whoever runs it.

    Args:
        run_dir: the run folder (``database/<run>``).
        min_free_mb: least free space in MB (``simulation.min_free_mb``); 0 = not checked.
        remove_on_error: delete the (empty) folder when the check fails, so that a second try needs no
            ``--overwrite`` (a folder made for a new run just now).
    Returns:
        the free space of the folder's disk in MB.
    Raises:
        RunFolderError: the folder cannot be written (naming it and the system's reason), or less than
            ``min_free_mb`` MB are free (naming both figures and the setting that lowers the minimum).
    """
    try:
        return _check(Path(run_dir), min_free_mb)
    except RunFolderError:
        if remove_on_error:
            remove_run_folder(run_dir)
        raise


def _check(run_dir: Path, min_free_mb: float) -> float:
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=run_dir)
        try:
            os.write(fd, b"simulacra\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        raise RunFolderError(f"the run folder {run_dir} cannot be written ({err.strerror or err}); make it writable "
                             "(chmod u+w) or choose another --db-dir") from None
    free_mb = shutil.disk_usage(run_dir).free / MB
    if min_free_mb > 0 and free_mb < min_free_mb:
        raise RunFolderError(f"the disk of the run folder {run_dir} has {free_mb:.1f} MB free, less than the "
                             f"{min_free_mb:g} MB a run needs (simulation.min_free_mb); free some space, choose "
                             "another --db-dir, or lower the minimum with --set simulation.min_free_mb=N")
    return free_mb


def make_run_folder(run_dir: str | Path) -> None:
    """Create ``run_dir`` and its parents.

    Raises:
        RunFolderError: it cannot be created (naming the folder and the system's reason).
    """
    try:
        Path(run_dir).mkdir(parents=True)
    except OSError as err:
        raise RunFolderError(f"the run folder {run_dir} cannot be created ({err.strerror or err}); make its parent "
                             "writable or choose another --db-dir") from None


def check_replaceable(run_dir: str | Path) -> None:
    """Refuse to replace ``run_dir`` (``--overwrite``) when it is a folder that is not a run's (:func:`is_run_folder`):
    a folder of other files is never deleted.

    Raises:
        RunFolderError: naming the folder and what to do.
    """
    if Path(run_dir).is_dir() and not is_run_folder(run_dir):
        raise RunFolderError(f"{run_dir} is not a simulacra run folder (it holds none of "
                             f"{', '.join(RUN_FILES)}): overwriting (--overwrite) does not delete it; choose "
                             "another run name or database folder")


def remove_run_folder(run_dir: str | Path) -> None:
    """Delete ``run_dir`` and everything in it (``--overwrite``), if it is a run's (:func:`is_run_folder`).

    Raises:
        RunFolderError: it is not a run folder (a folder of other files is never deleted), or it cannot be
            deleted (naming the folder and the system's reason).
    """
    check_replaceable(run_dir)
    try:
        shutil.rmtree(run_dir)
    except OSError as err:
        raise RunFolderError(f"the run folder {run_dir} cannot be replaced ({err.strerror or err}: "
                             f"{err.filename or run_dir}); make it writable or choose another --run-name") from None
