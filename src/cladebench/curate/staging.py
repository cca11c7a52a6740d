"""One way to write an output folder: checked before anything is read, marked, staged beside it, renamed into place.

Every builder (``build coobserved``, ``build crypticbio``, ``build finegrained``), ``demo`` and
``demo-model train`` write a folder the user names. The rules, the same for all of them:

- **An output is never an input.** ``--out`` equal to an input, inside one, or holding one is a usage
  error (exit 2), raised before anything is read (:func:`check_not_an_input`): otherwise
  ``--overwrite`` would delete the export it was reading, and a build could read its own output.
- **Every output is marked.** The folder holds :data:`MARKER_NAME`, a small JSON file naming the
  command that wrote it (its ``writer``, e.g. ``"build coobserved"``).
- **``--overwrite`` replaces only a previous output of the same writer**: a folder whose marker names
  it (or, for outputs written before markers, what :class:`OutputTarget`'s ``legacy`` test
  recognises), and only when it holds nothing but what that writer put there: the marker lists it
  (``contents``, written at the commit, every path inside it but a Lance dataset's own files), and a file the
  user added beside it or inside a folder it wrote (notes, a dataset loaded into the folder) makes the
  overwrite a refusal naming it, with nothing touched. A file, a symbolic
  link, a folder of someone else's files or another command's output is refused (exit 1) and left
  exactly as it was. An empty folder is always fine. Without ``--overwrite`` an existing non-empty
  folder is refused.
- **Nothing half-written.** A builder works in a hidden staging folder beside the output
  (``.<name>.building-<pid>-<random>``) whose marker also records the process and host; the previous
  output is moved into the staging folder, the staging folder renamed onto the output's name, and only
  then the previous output removed (:func:`staged_output`). A failure or Ctrl-C removes the staging
  folder and leaves the previous output as it was. The folder mechanics are :mod:`cladebench.paths`'
  staging (:func:`~cladebench.paths.staged_folder` and its parts), the one every whole-folder output uses;
  this module adds the marker and what it lets a rerun prove.
- **kill -9 leaves nothing that a rerun does not clean.** A rerun looks beside the output for staging
  folders of the same writer whose process (same host) is gone, and removes them; if the run was killed
  between its two renames (the previous output already inside the staging folder, the new one not yet in
  place), the previous output is moved back first (:func:`clean_leftovers`). A staging folder it cannot
  prove is a dead run's own (no marker, another writer, another host, a live process) is left alone.
- **Checked and cleaned before anything is read.** A builder enters :func:`staged_output` before it reads
  any input, so a refused output costs nothing and a killed run's leftovers are cleaned even when the
  inputs turn out to be unreadable; no builder has a temp name, marker or rename of its own.

Folders that are written in place (``demo``: its run records name its datasets by path, so it cannot
be renamed afterwards) use :func:`prepare_in_place`: the same checks, the previous output set aside in one
rename and removed, then the marker first.

A finished output changed in place afterwards (``build cameratrap --append-to`` adds a Lance version and
rewrites the folder's bookkeeping files) cannot be staged either: it goes through :func:`journaled_change`
under :func:`folder_lock`. The journal is a folder in the output (its name the caller's) holding a copy of each
file the change may rewrite (or the note that it was absent) and, written last and whole by :func:`atomic_write`,
:data:`JOURNAL_FILE` with the caller's record: a change is pending exactly when that file is there. An exception
or Ctrl-C in the block calls the caller's undo at once; after a kill the journal stays, and the next run, holding
the lock, reads it (:func:`pending_journal`), undoes what the record says (its own part, e.g. a Lance version,
then :func:`restore_journaled` for the files) and :func:`discard_journal` ends it (the file first, in one unlink).

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> target = OutputTarget(root / "out", writer="build example")
    >>> with staged_output(target) as staging:
    ...     _ = (staging / "rows.txt").write_text("1\\n")
    >>> sorted(p.name for p in (root / "out").iterdir())
    ['.cladebench-output.json', 'rows.txt']
    >>> read_marker(root / "out")["writer"]
    'build example'
    >>> (root / "mine").mkdir(); _ = (root / "mine" / "thesis.tex").write_text("years of work")
    >>> try:
    ...     check_replaceable(OutputTarget(root / "mine", writer="build example", overwrite=True))
    ... except CladebenchError as error:
    ...     print(error.exit_code, str(error).split(";")[0])
    1 ... is not an output of `cladebench build example` (it has no .cladebench-output.json naming it)
    >>> shutil.rmtree(root)
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import shutil
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.errors import CladebenchError
from cladebench.paths import (
    LINK,
    NOT_OURS,
    PREVIOUS_NAME,
    STAGING_SEPARATOR,
    TAKEN,
    WRONG_KIND,
    absolute,
    atomic_write,
    check_not_an_input,
    discard_staging,
    held_lock,
    new_staging_folder,
    process_alive,
    put_in_place,
    remove_dead_staging,
    write_refusal,
)
from cladebench.paths import staging_folders as _staging_folders

MARKER_NAME = ".cladebench-output.json"
"""File in every output folder naming the command that wrote it; ``--overwrite`` trusts nothing else."""
TOOL_PREFIX = ".cladebench-"
"""Names in an output that the tool keeps for itself (the marker, an append's journal): never a user's file."""
_TAG = "building"
"""The tag of this module's staging folders in :mod:`cladebench.paths`' naming."""
STAGING_TAG = f".{_TAG}{STAGING_SEPARATOR}"
"""Staging folders are ``.<out name>.building-<pid>-<random>``, beside the output."""
WORK_NAME = ".work"
"""Inside a staging folder: scratch space (DuckDB's database and spill files, caches) removed before the
commit; being inside the staging folder, a killed run's scratch goes with it when a rerun cleans up."""
JOURNAL_FILE = "journal.json"
"""Inside a journal folder (:func:`journaled_change`): the record, written last and whole; its presence, and
nothing else, says a change is pending."""


@dataclass(frozen=True)
class OutputTarget:
    """An output folder a command is about to write, and what it may replace."""

    out: Path
    """The folder the user named."""
    writer: str
    """The command that writes it, as its marker records it (``"build coobserved"``, ``"demo"``)."""
    overwrite: bool = False
    """Whether a previous output of the same writer may be replaced."""
    inputs: tuple[Path, ...] = ()
    """Files and folders the command reads: the output must be none of them, inside none, contain none."""
    out_option: str = "--out"
    """How the user named the output (``--out``, ``dataset.out``), for messages."""
    overwrite_option: str = "--overwrite"
    """How the user asks for replacement (``--overwrite``, ``overwrite: true``), for messages; empty for a writer
    that replaces its own previous output unasked (the demo), whose messages then name no option."""
    legacy: Callable[[Path], bool] | None = field(default=None, compare=False)
    """Recognises an output of this writer from before markers existed (None: only the marker counts)."""


# --- the marker ----------------------------------------------------------------------------------


def read_marker(folder: Path) -> dict[str, object] | None:
    """The marker of ``folder`` as a dict, or None when it has none (or an unreadable one)."""
    try:
        marker = json.loads((Path(folder) / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def write_marker(folder: Path, writer: str, contents: Iterable[str] | None = None) -> Path:
    """Mark ``folder`` as written by ``writer`` from this process on this host; ``contents``, the names the
    writer put in it (recorded at the commit), are all that a later ``--overwrite`` may replace."""
    from cladebench import __version__

    marker: dict[str, object] = {"writer": writer, "cladebench_version": __version__, "pid": os.getpid(),
                              "host": socket.gethostname(),
                              "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    if contents is not None:
        marker["contents"] = sorted(contents)
    path = Path(folder) / MARKER_NAME
    atomic_write(path, json.dumps(marker, indent=1) + "\n")
    return path


def _is_lance_dataset(folder: Path) -> bool:
    return (folder / "_versions").is_dir()


def _written(folder: Path, prefix: str = "") -> Iterator[str]:
    """What a writer put in ``folder``, for its marker's ``contents``: every file and folder by its path inside
    it (``data/rows.parquet``), so a user's file added to a subfolder is seen too, except inside a Lance dataset
    (the folder itself, when it is one), which is listed whole: a later version of it (an embedding column) adds
    files that are the output's own."""
    if not prefix and _is_lance_dataset(folder):
        yield from (p.name for p in _entries(folder) if p.name != MARKER_NAME)
        return
    for entry in sorted(_entries(folder)):
        if not prefix and entry.name == MARKER_NAME:
            continue
        yield prefix + entry.name
        if entry.is_dir() and not entry.is_symlink() and not _is_lance_dataset(entry):
            yield from _written(entry, f"{prefix}{entry.name}/")


def _not_written_by(folder: Path, marker: Mapping[str, object]) -> list[str]:
    """The paths in ``folder`` its writer did not put there (by the marker's ``contents``: a folder listed without
    anything below it, as a Lance dataset or a marker written before nested paths were listed, vouches for all
    it holds; a marker written before contents were recorded, or by a writer that writes in place, lists none
    and vouches for all)."""
    contents = marker.get("contents")
    if not isinstance(contents, list):
        return []
    own = {*map(str, contents), PREVIOUS_NAME}
    parents = {path[:i] for path in own for i, char in enumerate(path) if char == "/"}
    return sorted(_foreign(folder, own, parents, ""))


def _foreign(folder: Path, own: set[str], parents: set[str], prefix: str) -> list[str]:
    found: list[str] = []
    for entry in _entries(folder):
        path = prefix + entry.name
        if not prefix and entry.name.startswith(TOOL_PREFIX):
            continue
        if path not in own:
            found.append(path)
        elif path in parents and entry.is_dir() and not entry.is_symlink():
            found += _foreign(entry, own, parents, f"{path}/")
    return found


def is_output_of(folder: Path, writer: str, legacy: Callable[[Path], bool] | None = None) -> bool:
    """Whether ``folder`` is a previous output of ``writer`` (its marker names it, or ``legacy`` says so)."""
    marker = read_marker(folder)
    if marker is not None:
        return marker.get("writer") == writer
    return legacy is not None and legacy(Path(folder))


# --- the checks ----------------------------------------------------------------------------------


def _describe_os_error(error: OSError) -> str:
    return error.strerror or str(error)


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError as error:
        raise CladebenchError(f"cannot read {folder}: {_describe_os_error(error)}") from None


def check_replaceable(target: OutputTarget) -> None:
    """Refuse (exit 1) an output that exists and may not be replaced: a file or link, a non-empty folder
    without ``overwrite``, or, with it, anything but a previous output of the same writer."""
    out = Path(target.out)
    try:
        refusal = write_refusal(out, folder=True, overwrite=target.overwrite, link_ok=False,
                                ours=lambda folder: is_output_of(folder, target.writer, target.legacy))
    except OSError as error:
        raise CladebenchError(f"cannot read {out}: {_describe_os_error(error)}") from None
    if refusal == LINK:
        raise CladebenchError(f"{out} is a symbolic link; {target.out_option} must name a folder of its own")
    if refusal == WRONG_KIND:
        raise CladebenchError(f"{out} exists and is not a folder; choose another {target.out_option}")
    if refusal == TAKEN:
        raise CladebenchError(f"{out} already exists and is not empty; choose another {target.out_option} or pass "
                              f"{target.overwrite_option} (which replaces only a previous output of "
                              f"`cladebench {target.writer}`)")
    if not out.is_dir() or not _entries(out):
        return
    if refusal == NOT_OURS:
        marker = read_marker(out)
        whose = (f"its {MARKER_NAME} names `cladebench {marker.get('writer')}`" if marker is not None
                 else f"it has no {MARKER_NAME} naming it")
        raise CladebenchError(f"{out} is not an output of `cladebench {target.writer}` ({whose}); "
                              f"{target.overwrite_option or 'a rerun'} replaces only those, and nothing in it "
                              "was touched: "
                              f"choose another {target.out_option}")
    foreign = _not_written_by(out, read_marker(out) or {})
    if foreign:
        raise CladebenchError(f"{out} holds {', '.join(foreign)}, which `cladebench {target.writer}` did not write; "
                              f"{target.overwrite_option or 'a rerun'} replaces only what it wrote, and nothing in "
                              f"it was touched: move those out of {out}, or choose another {target.out_option}")
    if not os.access(out, os.W_OK | os.X_OK):  # found now, not after the build: moving it needs write access
        raise CladebenchError(f"cannot replace {out}: it is read-only; choose another {target.out_option}")


def check_output(target: OutputTarget) -> None:
    """Every check that needs nothing read: not an input (exit 2), replaceable (exit 1)."""
    check_not_an_input(target.out, target.inputs, target.out_option)
    check_replaceable(target)


# --- leftovers of killed runs --------------------------------------------------------------------


def _owned_by_dead_run(folder: Path, writer: str) -> bool:
    marker = read_marker(folder)
    if marker is None or marker.get("writer") != writer or marker.get("host") != socket.gethostname():
        return False
    pid = marker.get("pid")
    return isinstance(pid, int) and pid != os.getpid() and not process_alive(pid)


def staging_folders(out: Path) -> list[Path]:
    """The staging folders beside ``out`` (of any run, live or dead)."""
    return _staging_folders(out, _TAG)


def clean_leftovers(out: Path, writer: str) -> list[Path]:
    """Remove what killed runs of ``writer`` left beside ``out`` (see the module docstring); returns what was
    removed. A previous output caught mid-commit is moved back to ``out`` first."""
    return remove_dead_staging(out, _TAG, lambda folder: _owned_by_dead_run(folder, writer))


# --- writing -------------------------------------------------------------------------------------


def _make_staging(target: OutputTarget) -> Path:
    out = absolute(target.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = new_staging_folder(out, _TAG)
    except OSError as error:
        raise CladebenchError(f"cannot write {target.out}: {_describe_os_error(error)} ({out.parent})") from None
    try:
        write_marker(staging, target.writer)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def work_dir(staging: Path) -> Path:
    """Scratch space inside ``staging``, removed before the commit (and with the staging folder after a kill)."""
    path = Path(staging) / WORK_NAME
    path.mkdir(exist_ok=True)
    return path


def commit(staging: Path, target: OutputTarget) -> None:
    """Put a finished staging folder in place of ``target.out``; a previous output is removed only after."""
    out = absolute(target.out)
    shutil.rmtree(Path(staging) / WORK_NAME, ignore_errors=True)
    write_marker(staging, target.writer, contents=_written(Path(staging)))
    check_replaceable(target)  # again: the folder may have changed while the build ran
    try:
        put_in_place(staging, out, replace=True)
    except OSError as error:
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST) and out.is_dir():  # filled between the two renames
            raise CladebenchError(f"{target.out} was written while this build was committing (another run into "
                                  f"the same {target.out_option}?): it was left as it is and this build's output "
                                  "was not kept") from None
        raise CladebenchError(f"cannot put the output in place at {target.out}: {_describe_os_error(error)}") from None


@contextlib.contextmanager
def staged_output(target: OutputTarget) -> Iterator[Path]:
    """Check the output, clean a killed run's leftovers, and yield a marked staging folder to write into; on
    leaving the block normally it becomes ``target.out``, on any exception (Ctrl-C included) it is removed
    and ``target.out`` is as it was."""
    check_output(target)
    clean_leftovers(target.out, target.writer)
    staging = _make_staging(target)
    try:
        yield staging
        commit(staging, target)
    except BaseException:
        discard_staging(staging, target.out)
        raise


def prepare_in_place(target: OutputTarget) -> Path:
    """For outputs written in place: check, clean a killed run's leftovers, remove a previous output of the same
    writer (``overwrite``), create the folder and mark it first, so a run killed midway leaves a folder a rerun
    with ``overwrite`` may replace. The previous output is moved into a staging folder in one rename before it
    is removed: an interrupted removal never leaves half of it, marker gone, where the next run would refuse it
    (what it left aside, the next run's :func:`clean_leftovers` removes or, before the new folder exists, puts
    back). Returns the folder."""
    check_output(target)
    clean_leftovers(target.out, target.writer)
    out = Path(target.out)
    aside = None
    try:
        if out.is_dir() and _entries(out):
            aside = _make_staging(target)
            os.rename(out, aside / PREVIOUS_NAME)
        out.mkdir(parents=True, exist_ok=True)
        write_marker(out, target.writer)
    except OSError as error:
        if aside is not None:
            discard_staging(aside, out)
        raise CladebenchError(f"cannot write {target.out}: {_describe_os_error(error)}") from None
    if aside is not None:  # the previous output first, the marked staging folder last
        shutil.rmtree(aside / PREVIOUS_NAME, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)
    return out


# --- journaled in-place changes ------------------------------------------------------------------


@contextlib.contextmanager
def folder_lock(folder: Path, busy: str) -> Iterator[None]:
    """Hold the lock of ``folder`` itself for the block (:func:`~cladebench.paths.held_lock`: no lock file to
    leave behind; a kill releases it); while another holds it, a :class:`CladebenchError` (exit 1) saying
    ``busy``, at once."""
    with held_lock(folder, wait_s=0, busy=busy):
        yield


def pending_journal(folder: Path, name: str) -> dict[str, Any] | None:
    """The record of the change pending in ``folder`` (journal ``name``), its ``files`` entry included, or None.
    A journal folder without its :data:`JOURNAL_FILE` (a kill while it was being written or discarded) is no
    journal: it is removed."""
    journal = Path(folder) / name
    path = journal / JOURNAL_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        shutil.rmtree(journal, ignore_errors=True)
        return None
    except (OSError, ValueError) as error:
        raise CladebenchError(f"cannot read the journal {path} of an interrupted change ({error}); remove {journal} "
                              f"to keep {folder} as it is") from None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise CladebenchError(f"{path} is not a journal (no files entry); remove {journal} to keep {folder} as it is")
    return record


def begin_journal(folder: Path, name: str, record: Mapping[str, object], files: Iterable[Path]) -> Path:
    """Write the journal ``name`` in ``folder`` of a change about to start: a copy of each of ``files`` (inside
    ``folder``) that exists and the note of each that does not, then ``record`` (plus its ``files``) as
    :data:`JOURNAL_FILE`, the commit point. Call it holding :func:`folder_lock`, after any pending journal was
    undone (one still pending is a bug, refused). Returns the journal folder."""
    folder = Path(folder)
    journal = folder / name
    if pending_journal(folder, name) is not None:
        raise RuntimeError(f"{journal}: a journaled change is pending; undo it before beginning another")
    (journal / "files").mkdir(parents=True)
    saved: dict[str, str | None] = {}
    for i, path in enumerate(files):
        relative = str(Path(path).relative_to(folder))
        saved[relative] = None
        if Path(path).is_file():
            shutil.copyfile(path, journal / "files" / str(i))
            saved[relative] = f"files/{i}"
    atomic_write(journal / JOURNAL_FILE, json.dumps({**record, "files": saved}, indent=1))
    return journal


def restore_journaled(folder: Path, name: str, record: Mapping[str, Any]) -> None:
    """Put each file the journal saved back as it was (each whole); one that was absent is removed."""
    journal = Path(folder) / name
    for relative, copy in record["files"].items():
        path = Path(folder) / relative
        if copy is None:
            path.unlink(missing_ok=True)
        else:
            atomic_write(path, (journal / copy).read_bytes())


def discard_journal(folder: Path, name: str) -> None:
    """End the change: its :data:`JOURNAL_FILE` goes first (one unlink; from then on nothing is pending), then the
    copies (a kill between leaves a folder :func:`pending_journal` removes)."""
    journal = Path(folder) / name
    (journal / JOURNAL_FILE).unlink(missing_ok=True)
    shutil.rmtree(journal, ignore_errors=True)


@contextlib.contextmanager
def journaled_change(folder: Path, name: str, record: Mapping[str, object], files: Iterable[Path],
                     undo: Callable[[], object]) -> Iterator[Path]:
    """The block changes ``folder`` in place whole, or is undone: :func:`begin_journal` first; on an exception
    (Ctrl-C included) ``undo()`` at once (it reads the journal and ends it; should it fail, the journal stays for
    the next run's undo); on leaving normally, :func:`discard_journal`. Yields the journal folder. Call it
    holding :func:`folder_lock`."""
    journal = begin_journal(folder, name, record, files)
    try:
        yield journal
    except BaseException:
        with contextlib.suppress(Exception):
            undo()
        raise
    discard_journal(folder, name)


__all__ = [
    "JOURNAL_FILE",
    "MARKER_NAME",
    "PREVIOUS_NAME",
    "STAGING_TAG",
    "TOOL_PREFIX",
    "WORK_NAME",
    "OutputTarget",
    "begin_journal",
    "check_not_an_input",
    "check_output",
    "check_replaceable",
    "clean_leftovers",
    "commit",
    "discard_journal",
    "folder_lock",
    "is_output_of",
    "journaled_change",
    "pending_journal",
    "prepare_in_place",
    "read_marker",
    "restore_journaled",
    "staged_output",
    "staging_folders",
    "work_dir",
    "write_marker",
]
