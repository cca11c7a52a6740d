"""The journaled in-place change of an output folder (cladebench.curate.staging.journaled_change and its parts):
a change is pending exactly while its journal file is there, the saved files come back whole, an exception undoes
at once, a lock refuses a second writer."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cladebench.curate import staging
from cladebench.curate.staging import (
    JOURNAL_FILE,
    begin_journal,
    discard_journal,
    folder_lock,
    journaled_change,
    pending_journal,
    restore_journaled,
)
from cladebench.errors import CladebenchError

NAME = ".pending-change"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    (out / "build.json").write_text('{"rows": 4}')
    (out / "data" / "models.json").write_bytes(b"\x00binary\xff")
    return out


def _files(folder: Path) -> list[Path]:
    return [folder / "build.json", folder / "data" / "models.json", folder / "failures.parquet"]


def test_a_journal_records_each_file_and_the_caller_record(folder: Path) -> None:
    journal = begin_journal(folder, NAME, {"version_before": 3}, _files(folder))
    record = pending_journal(folder, NAME)
    assert record is not None and record["version_before"] == 3
    assert record["files"] == {"build.json": "files/0", "data/models.json": "files/1", "failures.parquet": None}
    assert (journal / "files" / "1").read_bytes() == b"\x00binary\xff"


def test_restore_puts_every_file_back_as_it_was_and_removes_the_new_ones(folder: Path) -> None:
    begin_journal(folder, NAME, {}, _files(folder))
    (folder / "build.json").write_text('{"rows": 8, "appended": ["x"]}')
    (folder / "data" / "models.json").unlink()
    (folder / "failures.parquet").write_bytes(b"new")
    record = pending_journal(folder, NAME)
    assert record is not None
    restore_journaled(folder, NAME, record)
    discard_journal(folder, NAME)
    assert (folder / "build.json").read_text() == '{"rows": 4}'
    assert (folder / "data" / "models.json").read_bytes() == b"\x00binary\xff"
    assert not (folder / "failures.parquet").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["build.json", "data"]


def test_a_journal_killed_while_being_written_is_no_journal(folder: Path, monkeypatch) -> None:
    """The copies come first, the journal file last: a failure (standing for a kill) while copying leaves a folder
    without it, which reads as nothing pending and is removed."""
    real = shutil.copyfile
    calls = []

    def dies_on_second(source: object, target: object) -> object:
        calls.append(source)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(source, target)

    monkeypatch.setattr(shutil, "copyfile", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        begin_journal(folder, NAME, {"version_before": 3}, _files(folder))
    monkeypatch.undo()
    assert (folder / NAME / "files" / "0").is_file() and not (folder / NAME / JOURNAL_FILE).exists()
    assert pending_journal(folder, NAME) is None
    assert not (folder / NAME).exists()


def test_a_discard_killed_after_the_journal_file_went_leaves_nothing_pending(folder: Path, monkeypatch) -> None:
    begin_journal(folder, NAME, {}, _files(folder))

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        discard_journal(folder, NAME)
    monkeypatch.undo()
    assert (folder / NAME / "files").is_dir()  # the copies are still there, the journal file is not
    assert pending_journal(folder, NAME) is None and not (folder / NAME).exists()


def test_a_second_journal_while_one_is_pending_is_refused(folder: Path) -> None:
    begin_journal(folder, NAME, {"n": 1}, _files(folder))
    with pytest.raises(RuntimeError, match="pending"):
        begin_journal(folder, NAME, {"n": 2}, _files(folder))
    assert pending_journal(folder, NAME)["n"] == 1  # type: ignore[index]


def test_an_unreadable_journal_file_is_one_line_exit_1_naming_it(folder: Path) -> None:
    (folder / NAME).mkdir()
    (folder / NAME / JOURNAL_FILE).write_text("{not json")
    with pytest.raises(CladebenchError, match=JOURNAL_FILE) as refused:
        pending_journal(folder, NAME)
    assert refused.value.exit_code == 1 and (folder / NAME / JOURNAL_FILE).exists()


def _undo(folder: Path, log: list[str]):
    def undo() -> None:
        record = pending_journal(folder, NAME)
        assert record is not None
        restore_journaled(folder, NAME, record)
        discard_journal(folder, NAME)
        log.append("undone")
    return undo


def test_a_change_that_finishes_ends_its_journal(folder: Path) -> None:
    log: list[str] = []
    with journaled_change(folder, NAME, {}, _files(folder), _undo(folder, log)) as journal:
        assert (journal / JOURNAL_FILE).is_file()
        (folder / "build.json").write_text("changed")
    assert log == [] and not (folder / NAME).exists()
    assert (folder / "build.json").read_text() == "changed"


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_exception_in_the_change_undoes_it_at_once(folder: Path, error: type[BaseException]) -> None:
    log: list[str] = []
    with pytest.raises(error), journaled_change(folder, NAME, {}, _files(folder), _undo(folder, log)):
        (folder / "build.json").write_text("half")
        (folder / "failures.parquet").write_bytes(b"half")
        raise error
    assert log == ["undone"] and not (folder / NAME).exists()
    assert (folder / "build.json").read_text() == '{"rows": 4}' and not (folder / "failures.parquet").exists()


def test_an_undo_that_fails_leaves_the_journal_for_the_next_run(folder: Path) -> None:
    def broken_undo() -> None:
        raise OSError("disk gone")

    # The change's own exception comes out, not the undo's.
    with pytest.raises(KeyboardInterrupt), journaled_change(folder, NAME, {"version_before": 7}, _files(folder),
                                                            broken_undo):
        (folder / "build.json").write_text("half")
        raise KeyboardInterrupt
    record = pending_journal(folder, NAME)
    assert record is not None and record["version_before"] == 7


def test_the_folder_lock_refuses_a_second_holder_and_is_released_after(folder: Path) -> None:
    with folder_lock(folder, "busy: try again later"):
        with pytest.raises(CladebenchError) as refused, folder_lock(folder, "busy: try again later"):
            pass  # pragma: no cover
        assert refused.value.exit_code == 1 and str(refused.value) == "busy: try again later"
    with folder_lock(folder, "busy"):  # released: taken again at once
        pass
    assert sorted(os.listdir(folder)) == ["build.json", "data"]  # no lock file left


def test_the_journal_helpers_are_the_staging_modules_public_api() -> None:
    assert {"JOURNAL_FILE", "begin_journal", "discard_journal", "folder_lock", "journaled_change",
            "pending_journal", "restore_journaled"} <= set(staging.__all__)
