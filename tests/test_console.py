"""The one console and the one progress bar: notes dropped with ``--quiet``, warnings never; a bar with counts and
a rate on a terminal, none on a pipe or with ``--quiet``."""

from __future__ import annotations

import io
import sys

import pytest

from cladebench.cli import main
from cladebench.console import is_quiet, note, quieted, warn
from cladebench.progress import progress_bar, shown


def test_quiet_drops_notes_and_keeps_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    note("a note")
    warn("a warning")
    with quieted():
        assert is_quiet()
        note("a dropped note")
        warn("a kept warning")
    assert not is_quiet()
    assert capsys.readouterr().err.splitlines() == ["a note", "a warning", "a kept warning"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_shows_counts_and_a_rate_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_bar(total=3, desc="photos", unit="img") as bar:
        bar.update(3)
    drawn = terminal.getvalue()
    assert "photos" in drawn and "3/3" in drawn and "img/s" in drawn
    assert not shown(enabled=False)
    with quieted():
        assert not shown()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe or a log file: no bar
    assert not shown()
    assert list(progress_bar(range(4), desc="steps", unit="step")) == [0, 1, 2, 3]


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_is_an_option_of_every_command(where: str, tmp_path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLADEBENCH_MIRROR", str(tmp_path / "no-such-folder"))
    argv = ["--quiet", "benchmarks"] if where == "before" else ["benchmarks", "--quiet"]
    assert main(argv) == 0
    assert "no such folder" in capsys.readouterr().err  # a warning: shown even with --quiet
    assert not is_quiet()  # restored when the command ends
