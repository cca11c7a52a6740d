"""Two runs of one model with two name styles: different labels in run.json, and `report` (HTML and Markdown) and
`compare` name each run by its label, never by the checkpoint's path; `--model demo` runs end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import store
from cladebench.cache import DEMO_TRAINING_RECORD, record_demo_model
from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.checkpoint_runs import deep_checkpoint_runs


@pytest.fixture(scope="module")
def two_styles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, str]:
    """A small world embedded with a tiny model kept in a deep folder, evaluated with name styles sci and taxon."""
    root = tmp_path_factory.mktemp("labels")
    path, model = deep_checkpoint_runs(root, {style: ["--name-style", style] for style in ("sci", "taxon")})
    return root / "sci", root / "taxon", path, model


def test_two_name_styles_get_two_labels(two_styles: tuple[Path, Path, Path, str]) -> None:
    sci, taxon, _, model = two_styles
    assert RunRecord.read(sci).label == "tiny-clip · sci"
    assert RunRecord.read(taxon).label == "tiny-clip"  # taxon is the task's default name style
    assert RunRecord.read(sci).provenance["model"]["id"] == model  # the full id stays in provenance


@pytest.mark.parametrize("form", ["html", "md"])
def test_report_names_runs_by_label(two_styles: tuple[Path, Path, Path, str], tmp_path: Path, form: str) -> None:
    sci, taxon, _, model = two_styles
    out = tmp_path / f"report.{form}"
    assert main(["report", str(sci), str(taxon), "--out-file", str(out), "--format", form, "--max-gallery", "0"]) == 0
    text = out.read_text()
    # The runs table names each run by its label; the checkpoint's path is only in the provenance.
    assert "| [1] | tiny-clip · sci |" in text if form == "md" else "tiny-clip · sci</td>" in text
    assert "| [2] | tiny-clip |" in text if form == "md" else "tiny-clip</td>" in text
    path = model.removeprefix("local-dir:")
    before, provenance = text.split('<section id="provenance">' if form == "html" else "\n## Provenance\n")
    if form == "html":  # what a reader sees: no tags (a hover title may hold the id), no word-break hints
        before, provenance = (re.sub(r"<[^>]*>", "", part) for part in (before, provenance))
    assert path not in before
    assert path in provenance  # full ids stay in provenance


def test_report_names_two_runs_with_one_label_apart(two_styles: tuple[Path, Path, Path, str],
                                                    tmp_path: Path) -> None:
    import shutil

    from cladebench.report.runs import load_runs

    sci, _, _, _ = two_styles
    again = shutil.copytree(sci, tmp_path / sci.name)  # the same settings written to a folder of the same name
    first, second = load_runs([sci, again / "run.json"])
    assert first.label != second.label and first.name != second.name
    assert first.label.startswith("tiny-clip · sci")


def test_compare_names_runs_by_label(two_styles: tuple[Path, Path, Path, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    sci, taxon, _, model = two_styles
    assert main(["compare", str(sci), str(taxon), "--resamples", "200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  [1] tiny-clip · sci  ") and lines[1].endswith("(reference)")
    assert lines[2].startswith("  [2] tiny-clip  ")
    assert not any(model in line for line in lines)
    assert main(["compare", str(sci), str(taxon), "--resamples", "200", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["label"] for r in runs] == ["tiny-clip · sci", "tiny-clip"]
    assert runs[0]["model_id"] == model


def test_model_demo_end_to_end(two_styles: tuple[Path, Path, Path, str], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint recorded as the demo's is --model demo for embed and eval, and the run's label is 'demo'."""
    _, _, dataset, model = two_styles
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = Path(model.removeprefix("local-dir:"))
    (folder / DEMO_TRAINING_RECORD).write_text("{}")
    record_demo_model(folder)
    copy = tmp_path / "world.lance"
    store.write_dataset(store.read(store.open_dataset(dataset), columns=["uuid", "image", "kingdom", "phylum", "class",
                                                                          "order", "family", "genus", "species",
                                                                          "scientific_name"]), copy)
    assert main(["embed", str(copy), "--model", "demo", "--device", "cpu", "--workers", "0"]) == 0
    assert "emb_demo" in store.open_dataset(copy).schema.names
    assert main(["eval", "zeroshot", str(copy), "--model", "demo", "--out", str(tmp_path / "run"),
                 "--device", "cpu", "--group-by", "none"]) == 0
    record = RunRecord.read(tmp_path / "run")
    assert record.label == "demo" and record.provenance["model"]["id"] == model
