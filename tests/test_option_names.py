"""A builder's (or any verb's) setting out of range is refused naming the option as the user typed it
(``--per-species``), never the config field behind it (``per_species``): one line, exit 2, before any input is
read (the paths below do not exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main

CASES = [
    (["build", "finegrained", "C", "--provenance", "P", "--per-species", "0"], "--per-species must be at least 1"),
    (["build", "finegrained", "C", "--provenance", "P", "--genus-only-cap", "-1"], "--genus-only-cap"),
    (["build", "finegrained", "C", "--provenance", "P", "--max-side", "0"], "--max-side"),
    (["build", "finegrained", "C", "--provenance", "P", "--seed", "-1"], "--seed must be"),
    (["build", "finegrained", "C", "--provenance", "P", "--workers", "-2"], "--workers must be"),
    (["build", "coobserved", "--export-dir", "E", "--max-per-species", "0"], "--max-per-species must be at least 1"),
    (["build", "coobserved", "--export-dir", "E", "--per-rank", "0"], "--per-rank must be at least 1"),
    (["build", "coobserved", "--export-dir", "E", "--seed", "-3"], "--seed must be"),
]


@pytest.mark.parametrize(("argv", "said"), CASES)
def test_a_setting_out_of_range_names_its_option(argv: list[str], said: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main([*argv, "--out", str(tmp_path / "out")])
    except SystemExit as exited:
        code = int(exited.code or 0)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1, err
    assert said in err[0], err
    field = said.split()[0].removeprefix("--").replace("-", "_")
    assert f" {field} " not in f" {err[0]} ".replace(said.split()[0], ""), err
    assert not (tmp_path / "out").exists()
