"""Where an output may go relative to what a command reads (never onto, into or around an input), and how a
file gets there whole (:func:`atomic_write`, the one writer every stage uses for files it replaces;
:func:`atomic_write_parquet` for an Arrow table), and a folder (:func:`staged_folder`, the one folder staging);
whether an output may be written at all (:func:`write_refusal`, the one decision), and the one file lock
(:func:`held_lock`).

Every verb that writes a folder (the builders, ``demo``, ``load``, ``subset``) checks this before reading
anything: an output equal to an input, inside one or holding one would let ``--overwrite`` delete what is
being read, or a build read its own output. It sits below the store and the builders so both can use it.

Example:
    >>> relation(Path("/data/export/out"), Path("/data/export"))
    'is inside'
    >>> try:
    ...     check_not_an_input(Path("/data/export"), [Path("/data/export/photos.csv")])
    ... except UsageError as refused:
    ...     print(str(refused).split(":")[0])
    --out /data/export contains the input /data/export/photos.csv
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from cladebench.errors import CladebenchError, UsageError

if TYPE_CHECKING:
    import pyarrow as pa


def absolute(path: str | Path) -> Path:
    """``path`` made absolute (``~`` expanded) without following symbolic links."""
    return Path(os.path.abspath(Path(path).expanduser()))


def resolved(path: str | Path) -> Path:
    """``path`` made absolute with every symbolic link followed; a loop of links (which Python reports as a
    ``RuntimeError`` or an ``OSError`` by version) is one line naming the path, exit 1."""
    try:
        return absolute(path).resolve()
    except (RuntimeError, OSError):
        raise CladebenchError(f"{path}: a loop of symbolic links; name the file itself") from None


def relation(out: Path, source: Path) -> str | None:
    """How ``out`` overlaps ``source`` ("is", "is inside", "contains"), or None when they do not."""
    if out == source:
        return "is"
    if out.is_relative_to(source):
        return "is inside"
    if source.is_relative_to(out):
        return "contains"
    return None


def check_not_an_input(out: str | Path, inputs: Iterable[str | Path | None], out_option: str = "--out") -> None:
    """A :class:`UsageError` when ``out`` is an input, is inside one or contains one (symbolic links followed,
    so a link cannot hide the overlap). ``None`` inputs (options not given) are skipped."""
    out_paths = {absolute(out), resolved(out)}
    for source in inputs:
        if source is None:
            continue
        for source_path in {absolute(source), resolved(source)}:
            for out_path in out_paths:
                found = relation(out_path, source_path)
                if found is not None:
                    raise UsageError(f"{out_option} {out} {found} the input {source}: the output must be a "
                                     "folder of its own, apart from what is read")


LINK = "a link"
WRONG_KIND = "the wrong kind"
TAKEN = "taken"
NOT_OURS = "not ours"
"""Why an output may not be written (:func:`write_refusal`): a symbolic link where a folder is renamed into place,
a file where a folder goes (or a folder where a file goes), something there and no ``--overwrite``, or something
there that cladebench did not write."""


def write_refusal(out: str | Path, *, folder: bool, overwrite: bool = True, ours: Callable[[Path], bool] | None = None,
                  link_ok: bool = True) -> str | None:
    """Why ``out`` may not be written, or None when it may: the one decision of every output, before any work
    (each caller says the reason in its own words, naming its options).

    May be written: nothing there; an empty folder (``folder``); with ``overwrite``, what ``ours`` says cladebench
    wrote (anything when ``ours`` is None). Refused: :data:`LINK` (``link_ok`` False: a folder renamed into place
    must be one of its own), :data:`WRONG_KIND`, :data:`TAKEN` (without ``overwrite``), :data:`NOT_OURS`. A folder
    that cannot be listed raises the ``OSError``."""
    out = Path(out)
    if not link_ok and out.is_symlink():
        return LINK
    if not out.exists():
        return None
    if out.is_dir() != folder:
        return WRONG_KIND
    if overwrite and ours is None:  # anything may be replaced: nothing to read
        return None
    if folder and not any(out.iterdir()):
        return None
    if not overwrite:
        return TAKEN
    if ours is not None and not ours(out):
        return NOT_OURS
    return None


def atomic_write(path: str | Path, data: bytes | str | Callable[[BinaryIO], object], *, durable: bool = False
                 ) -> Path:
    """Write a file whole or not at all: into a temporary file beside it, then renamed over it.

    A kill, a full disk or a failing writer leaves the old file (or none) and never part of the new one; the
    temporary file is removed on any failure (after a kill -9 a hidden ``.<name>.<id>.tmp`` may stay behind).
    Each call has its own temporary name, so writers of the same path in other threads or processes never
    write into one another's file: the last rename wins, whole. ``data`` is the bytes, a str (written as
    UTF-8), or a function that writes to the open binary file (``lambda f: pq.write_table(table, f)``).
    ``durable``: the data reaches the disk (``fsync``) before the rename, so that a power loss cannot leave
    the new name on an empty file either (staged work a resume trusts). Created files get the usual
    permissions (the umask's), as a plain ``open`` gives them.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "notes.txt"
        >>> atomic_write(target, "whole").read_text(), [p.name for p in target.parent.iterdir()]
        ('whole', ['notes.txt'])
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_parquet(path: str | Path, table: pa.Table, *, durable: bool = False) -> Path:
    """Write an Arrow table as a Parquet file with :func:`atomic_write` (whole or not at all)."""
    import pyarrow.parquet as pq

    return atomic_write(path, lambda handle: pq.write_table(table, handle), durable=durable)


LOCK_POLL_S = 0.05
"""How often a bounded wait for a lock tries again."""
WINDOWS_LOCK_OFFSET = 2**31 - 2
"""Where the one byte a Windows lock covers lies: past any note a holder writes, so the note stays readable (a
Windows byte lock is mandatory: a locked byte cannot be read by another process)."""


def _try_lock(handle: int, *, blocking: bool) -> bool:
    """Take an exclusive lock on the open ``handle``: True once held, False when another holds it and not
    ``blocking``. The lock belongs to the open file, so the operating system releases it when the holder closes it
    or ends, however it ends. ``fcntl`` (POSIX) and ``msvcrt`` (Windows) are imported here, where they exist."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(handle, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            while True:
                try:
                    msvcrt.locking(handle, msvcrt.LK_NBLCK, 1)
                    return True
                except PermissionError:  # held by another
                    if not blocking:
                        return False
                    time.sleep(LOCK_POLL_S)
        finally:
            os.lseek(handle, 0, os.SEEK_SET)
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _lock_file_of(path: Path) -> tuple[Path, bool]:
    """What to open to lock ``path``, and whether that is the folder itself: a folder is locked itself where the
    system can (POSIX), through a hidden lock file beside it where it cannot (Windows opens no folder)."""
    if not path.is_dir():
        return path, False
    if sys.platform == "win32":
        return path.with_name(f".{path.name}.lock"), False
    return path, True


def _holder_note(handle: int) -> str:
    """What the holder of a lock file wrote in it (see ``note`` of :func:`held_lock`), in one line."""
    try:
        os.lseek(handle, 0, os.SEEK_SET)
        return " ".join(os.read(handle, 4096).decode("utf-8", "replace").split())
    except OSError:
        return ""


@contextlib.contextmanager
def held_lock(path: str | Path, *, wait_s: float | None = None, busy: str | Callable[[str], str] = "",
              on_wait: Callable[[], None] | None = None, note: str | None = None) -> Iterator[int]:
    """Hold an exclusive lock on ``path`` for the block: the one lock of the package (POSIX and Windows). A
    folder is locked itself (no lock file is left behind; on Windows a hidden ``.<folder>.lock`` beside it); any
    other path is a lock file, created when missing. The operating system releases the lock when the holder ends,
    however it ends (kill -9 too), so no stale lock survives.

    ``wait_s``: None waits as long as it takes, 0 refuses at once, a number refuses after that many seconds; a
    refusal is a :class:`~cladebench.errors.CladebenchError` (exit 1) saying ``busy`` (or what ``busy`` makes of
    the note the holder left, "" when none). ``on_wait`` is called once when the lock is held by another.
    ``note``: written into the lock file once it is held (who holds it, since when), for the refusal of the next.
    Yields the open descriptor."""
    path = Path(path)
    target, folder = _lock_file_of(path)
    try:
        handle = os.open(target, os.O_RDONLY) if folder else os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise CladebenchError(f"cannot lock {path}: {exc.strerror or exc}") from None
    try:
        waited = 0.0
        try:
            while not _try_lock(handle, blocking=wait_s is None and on_wait is None):
                if on_wait is not None:
                    on_wait()
                    on_wait = None
                if wait_s is not None and waited >= wait_s:
                    raise CladebenchError(busy(_holder_note(handle)) if callable(busy) else busy
                                          or f"{path} is locked by another process")
                if wait_s is None:
                    _try_lock(handle, blocking=True)
                    break
                time.sleep(LOCK_POLL_S)
                waited += LOCK_POLL_S
            if note is not None and not folder:
                os.ftruncate(handle, 0)
                os.lseek(handle, 0, os.SEEK_SET)
                os.write(handle, (note.rstrip("\n") + "\n").encode("utf-8"))
        except OSError as exc:  # a file system without locks (some network mounts)
            raise CladebenchError(f"cannot lock {path}: {exc.strerror or exc}") from None
        yield handle
    finally:
        os.close(handle)  # releases the lock


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` may still run: only a pid proven gone is dead (this process, another user's, a
    pid of 0 or less, and any on Windows, where probing would terminate it, count as alive). A zombie (killed,
    its exit not yet collected by its parent) is dead: it answers a signal probe but runs nothing, and a folder
    it left would otherwise look busy until its parent exits."""
    if pid == os.getpid() or pid <= 0 or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a zombie, where /proc says (Linux); False where it cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 1:].split()[:1] == ["Z"]  # the state follows the command, which may hold ")"


STAGING_SEPARATOR = "-"
"""Between a staging folder's tag, the pid of the process that made it and a random part:
``.<out>.<tag>-<pid>-<random>``."""
PREVIOUS_NAME = ".previous-output"
"""Inside a staging folder while a replacing commit runs: the output being replaced, until the new one is in
place (then it is removed, or, after a kill, put back or removed by the next run)."""

DeadRun = Callable[[Path], bool]
"""Whether a folder (a staging folder beside an output, or the output holding a previous one) is a dead run's own:
a caller's proof in place of the pid in a staging folder's name (e.g. a marker naming its writer, process and
host: a pid alone cannot tell a live run on another machine sharing the folder)."""


def _staging_prefix(out: Path, tag: str) -> str:
    return f".{out.name}.{tag}{STAGING_SEPARATOR}"


def staging_folders(out: str | Path, tag: str) -> list[Path]:
    """The staging folders of ``tag`` beside ``out`` (of any run, live or dead)."""
    out = absolute(out)
    prefix = _staging_prefix(out, tag)
    try:
        return sorted(p for p in out.parent.iterdir() if p.name.startswith(prefix) and p.is_dir()
                      and not p.is_symlink())
    except OSError:
        return []


def _host_token() -> str:
    """This machine, in a staging folder's name: a pid names a process only on the host that made it."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def new_staging_folder(out: str | Path, tag: str) -> Path:
    """A fresh, empty staging folder beside ``out`` (``.<out>.<tag>-<pid>-<random>-<host>``), readable by all (an
    output is for sharing)."""
    out = absolute(out)
    name = STAGING_SEPARATOR.join((str(os.getpid()), uuid.uuid4().hex[:8], _host_token()))
    staging = out.parent / f"{_staging_prefix(out, tag)}{name}"
    staging.mkdir(mode=0o755)
    return staging


def _named_pid_dead(candidate: Path, prefix: str) -> bool:
    """Whether the process a staging name holds is gone; a name made on another host (a folder shared between
    machines) is never taken for dead, since its pid cannot be checked from here."""
    pid, _, rest = candidate.name[len(prefix):].partition(STAGING_SEPARATOR)
    host = rest.split(STAGING_SEPARATOR)[1] if rest.count(STAGING_SEPARATOR) == 1 else None
    if host is not None and host != _host_token():
        return False
    return pid.isdigit() and not process_alive(int(pid))


def remove_dead_staging(out: str | Path, tag: str, dead_run: DeadRun | None = None) -> list[Path]:
    """Remove what killed processes left beside ``out`` under :func:`staged_folder`'s naming (folders and the files
    named after them), only where the process named is gone (``dead_run``, when given, decides instead); returns
    what was removed. A previous output caught mid-commit (inside a dead run's staging folder, ``out`` missing) is
    moved back to ``out`` first; one left inside ``out`` by a run killed while removing it goes only when
    ``dead_run`` vouches for ``out``."""
    out = absolute(out)
    prefix = _staging_prefix(out, tag)
    removed: list[Path] = []
    if not out.parent.is_dir():
        return removed
    for candidate in sorted(out.parent.iterdir()):
        if not candidate.name.startswith(prefix):
            continue
        if not (dead_run(candidate) if dead_run is not None else _named_pid_dead(candidate, prefix)):
            continue
        if candidate.is_dir() and not candidate.is_symlink():
            previous = candidate / PREVIOUS_NAME
            if previous.is_dir() and not out.exists():
                os.rename(previous, out)  # killed between the two renames of a commit: the previous output back
            shutil.rmtree(candidate, ignore_errors=True)
        else:
            candidate.unlink(missing_ok=True)
        removed.append(candidate)
    previous = out / PREVIOUS_NAME
    if dead_run is not None and previous.is_dir() and dead_run(out):
        shutil.rmtree(previous, ignore_errors=True)
        removed.append(previous)
    return removed


def put_in_place(staging: Path, out: str | Path, *, replace: bool = False) -> None:
    """Rename a finished staging folder onto ``out``: over nothing or an empty folder, and with ``replace`` over a
    previous output too, which is first moved into the staging folder (:data:`PREVIOUS_NAME`) and removed only
    once the new one is in place, so ``out`` is always the old output or the new one. An ``OSError`` as it comes
    (over a non-empty folder without ``replace``), the previous output then back in place."""
    out = absolute(out)
    previous = None
    if replace and out.is_dir() and not out.is_symlink() and any(out.iterdir()):
        previous = Path(staging) / PREVIOUS_NAME
        os.rename(out, previous)
    try:
        os.rename(staging, out)
    except BaseException:
        if previous is not None and not out.exists():
            os.rename(previous, out)
        raise
    if previous is not None:
        shutil.rmtree(out / PREVIOUS_NAME, ignore_errors=True)


def discard_staging(staging: Path, out: str | Path) -> None:
    """Remove a staging folder, never with a previous output inside it: that is put back at ``out`` first, or,
    when it cannot be, everything is left for the next run's :func:`remove_dead_staging`."""
    previous = Path(staging) / PREVIOUS_NAME
    if previous.is_dir():
        with contextlib.suppress(OSError):
            if not absolute(out).exists():
                os.rename(previous, absolute(out))
    if previous.is_dir():
        return
    shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def staged_folder(out: str | Path, *, tag: str, replace: bool = False, dead_run: DeadRun | None = None
                  ) -> Iterator[Path]:
    """A hidden folder beside ``out`` to write a whole output into: put in place when the block ends
    (:func:`put_in_place`: over nothing, an empty folder or, with ``replace``, a previous output), removed when the
    block raises (Ctrl-C too). A reader sees no output or all of it; what a killed run left is cleaned by the next
    (:func:`remove_dead_staging`). The one folder staging under every whole-folder output; ``curate/staging.py``
    adds the markers and the checks of what a previous output may be."""
    out = absolute(out)
    if write_refusal(out, folder=True, link_ok=False) == LINK:  # the rename would fail after all the work
        raise CladebenchError(f"{out} is a symbolic link; an output is a folder of its own: name one")
    remove_dead_staging(out, tag, dead_run)
    staging = new_staging_folder(out, tag)
    try:
        yield staging
        put_in_place(staging, out, replace=replace)
    except BaseException:
        discard_staging(staging, out)
        raise
