"""Hostile option values and inputs to `cladebench eval` found by attacking the evaluation path: each ends with
one line and its documented exit code, before any dataset is opened when the value alone is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [
    ("--prior-cell-km", "1e308"),  # cell_km**2 overflowed: exit 70
    ("--prior-cell-km", "50000"),  # larger than pole to pole: one cell, no prior
    ("--prior-neighbourhood-km", "1e200"),
])
def test_a_grid_cell_larger_than_the_sphere_is_a_usage_error(option: str, value: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["eval", str(tmp_path / "missing.lance"), "--model", "openai-compatible:x@http://127.0.0.1:9/v1",
                     "--task", "geo", "--out", str(tmp_path / "run"), option, value], capsys)
    assert code == 2, err
    assert f"{option} must be at most" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
