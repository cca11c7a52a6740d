"""The demo's refusal of a folder that is not its own reads as the demo works: it names no option the demo does
not need (a previous demo is replaced unasked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.demo import run as demo_run


def test_a_user_folder_is_refused_without_naming_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(demo_run, "DEMO_STEPS", {})
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    assert main(["demo", "--out", str(out), "--images", "8", "--pairs", "2"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is not an output of `cladebench demo`" in error
    assert "--overwrite" not in error
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]
