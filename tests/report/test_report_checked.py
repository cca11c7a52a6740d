"""`report` shows no number a run's predictions do not give: a record whose metric was edited, whose predictions
are gone, or whose predictions' SHA-256 was removed is left out of the report, said on stderr and at the top of the
page, and the report of the other runs is written; when no run is left, nothing is written and the exit is 4."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")
pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.record import PREDICTIONS_FILE, RUN_FILE
from helpers.checkpoint_runs import deep_checkpoint_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real zero-shot runs of one tiny model (name styles sci and taxon), each a folder with its predictions."""
    root = tmp_path_factory.mktemp("checked")
    deep_checkpoint_runs(root, {"sci": ["--name-style", "sci"], "taxon": []})
    return {name: root / name for name in ("sci", "taxon")}


def _copy(runs: dict[str, Path], tmp_path: Path) -> tuple[Path, Path]:
    """Copies of the two runs, one of them to tamper with."""
    return (shutil.copytree(runs["sci"], tmp_path / "sci"), shutil.copytree(runs["taxon"], tmp_path / "taxon"))


def _edit(run: Path, change) -> None:
    record = json.loads((run / RUN_FILE).read_text())
    change(record)
    (run / RUN_FILE).write_text(json.dumps(record))


def _report(paths: list[Path], out: Path, form: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *map(str, paths), "--out-file", str(out), "--format", form, "--max-gallery", "0"])
    err = capsys.readouterr().err
    return code, (out.read_text() if out.exists() else ""), err


@pytest.mark.parametrize("form", ["md", "html"])
def test_an_edited_metric_never_reaches_the_report(runs, tmp_path, capsys, form) -> None:
    good, edited = _copy(runs, tmp_path)
    stored = json.loads((edited / RUN_FILE).read_text())["metrics"]["top1_species"]
    _edit(edited, lambda record: record["metrics"]["top1_species"].update(value=0.987654))
    code, text, err = _report([good, edited], tmp_path / f"report.{form}", form, capsys)
    assert code == 0
    said = [line for line in err.splitlines() if "left out" in line]
    assert len(said) == 1 and f"[2] left out: {edited / RUN_FILE}: its top1_species reads 0.987654 on n = " \
        f"{stored['n']}, but its predictions give {stored['value']:.6g}" in said[0]
    # The edited value is in no table, not even in bold: only the notice at the top says what does not match.
    notice, rest = text.split("Left out: 1 run record", 1)[1].split("0.987654", 1)
    assert "98.77" not in text and "0.987654" not in rest and "reads" in notice
    leaderboard = text.split("Leaderboard", 1)[1]
    assert "[1]" in leaderboard and "[2]" not in leaderboard.split("Provenance", 1)[0]


def test_missing_predictions_leave_the_run_out(runs, tmp_path, capsys) -> None:
    good, gone = _copy(runs, tmp_path)
    (gone / PREDICTIONS_FILE).unlink()
    code, text, err = _report([gone, good], tmp_path / "report.md", "md", capsys)
    assert code == 0
    assert f"[1] left out: {gone / RUN_FILE}: its predictions are missing ({PREDICTIONS_FILE})" in err
    assert "| [2] |" in text and "| [1] |" not in text


def test_predictions_without_their_sha256_leave_the_run_out(runs, tmp_path, capsys) -> None:
    """Without the SHA-256, any predictions file beside the record (another dataset's) would be read as its own."""
    good, unchecked = _copy(runs, tmp_path)
    _edit(unchecked, lambda record: record["provenance"]["predictions"].pop("sha256"))
    code, text, err = _report([good, unchecked], tmp_path / "report.md", "md", capsys)
    assert code == 0 and "gives no SHA-256 for its predictions" in err and "| [2] |" not in text
    # Another run's predictions put in its place are not read as its own either.
    shutil.copy(good / PREDICTIONS_FILE, unchecked / PREDICTIONS_FILE)
    assert main(["compare", str(good), str(unchecked), "--resamples", "200"]) == 4
    assert "gives no SHA-256 for its predictions" in capsys.readouterr().err


def test_no_run_left_is_exit_4_and_no_file(runs, tmp_path, capsys) -> None:
    _, edited = _copy(runs, tmp_path)
    _edit(edited, lambda record: record["metrics"]["top1_species"].update(n=3))
    code, text, err = _report([edited], tmp_path / "report.html", "html", capsys)
    assert code == 4 and text == "" and not (tmp_path / "report.html").exists()
    assert len(err.strip().splitlines()) == 1  # one line: the refusal, naming the run and what does not match
    assert "no run to report" in err and "on n = 3, but its predictions give" in err


@pytest.mark.parametrize("change", [
    lambda record: record["metrics"].update(top1_species=0.5),
    lambda record: record.update(metrics=[0.5]),
    lambda record: record.update(provenance=[]),
    lambda record: record.update(config=None),
    lambda record: record["provenance"].update(predictions="predictions.parquet"),
    lambda record: record["provenance"].update(model="tiny-clip"),
], ids=["metric-a-number", "metrics-a-list", "provenance-a-list", "config-null", "predictions-a-string",
        "model-a-string"])
def test_a_record_of_the_wrong_shape_is_left_out_not_a_crash(runs, tmp_path, capsys, change) -> None:
    """A hand-edited run.json whose parts are not the objects a record holds is not a run record: report leaves it
    out and compare refuses it, each in one line, never an internal error."""
    good, edited = _copy(runs, tmp_path)
    _edit(edited, change)
    code, text, err = _report([good, edited], tmp_path / "report.md", "md", capsys)
    assert code == 0 and f"[2] left out: {edited / RUN_FILE} is not a run record:" in err
    assert "| [1] |" in text and "| [2] |" not in text
    assert main(["compare", str(good), str(edited), "--resamples", "200"]) == 4
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is not a run record" in err


def test_a_metric_marked_left_out_by_hand_is_not_trusted(runs, tmp_path, capsys) -> None:
    """Only a left-out group's metric goes unchecked, and it holds no number: an edited value marked left out is
    refused like any edited value, never shown in the leaderboard or compared."""
    good, edited = _copy(runs, tmp_path)
    _edit(edited, lambda record: record["metrics"]["top1_species"].update(value=0.987654, left_out="too few rows"))
    code, text, err = _report([good, edited], tmp_path / "report.md", "md", capsys)
    assert code == 0 and f"[2] left out: {edited / RUN_FILE}: its top1_species is marked left out" in err
    assert "98.77" not in text and "| [2] |" not in text
    assert main(["compare", str(good), str(edited), "--resamples", "200"]) == 4
    assert "98.77" not in capsys.readouterr().out


def test_an_edited_interval_never_reaches_the_report(runs, tmp_path, capsys) -> None:
    """A table shows each value with its interval: the interval the predictions give is checked as the value is."""
    good, edited = _copy(runs, tmp_path)
    _edit(edited, lambda record: record["metrics"]["top1_species"].update(low=0.5, high=0.9))
    code, text, err = _report([good, edited], tmp_path / "report.md", "md", capsys)
    assert code == 0 and f"[2] left out: {edited / RUN_FILE}: its top1_species interval reads [0.5, 0.9]" in err
    assert "50.00, 90.00" not in text and "| [2] |" not in text


@pytest.mark.parametrize("classes", [9999, "many"])
def test_every_part_of_a_stored_metric_is_checked(runs, tmp_path, capsys, classes) -> None:
    """A table says what a number was computed on (``24 images, 12 classes``) from the stored estimate: a part added
    or edited by hand is refused like an edited value, never shown, never a crash."""
    good, edited = _copy(runs, tmp_path)
    _edit(edited, lambda record: record["metrics"]["top1_species"].update(classes=classes))
    code, text, err = _report([good, edited], tmp_path / "report.md", "md", capsys)
    assert code == 0 and f"[2] left out: {edited / RUN_FILE}: its top1_species holds classes = {classes}" in err
    assert "9,999" not in text and "| [2] |" not in text


@pytest.mark.parametrize("form", ["md", "html"])
def test_a_file_of_the_user_s_is_never_replaced_by_a_report(runs, tmp_path, capsys, form) -> None:
    """Only a report cladebench wrote is replaced at --out-file; the user's own file there is refused, untouched."""
    mine = tmp_path / f"notes.{form}"
    mine.write_text("# my notes\n\nnot a report\n")
    code, _, err = _report(list(runs.values()), mine, form, capsys)
    assert code == 2 and "is a file cladebench did not write" in err and str(mine) in err
    assert mine.read_text() == "# my notes\n\nnot a report\n"
    written = tmp_path / f"report.{form}"
    assert _report(list(runs.values()), written, form, capsys)[0] == 0
    assert _report(list(runs.values()), written, form, capsys)[0] == 0  # its own report, written again: replaced
