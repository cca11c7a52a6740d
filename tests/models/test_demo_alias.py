"""`--model demo`: the demo's cached checkpoint by name, and one clear line (exit 6) before the demo has run."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cache import DEMO_MODEL_RECORD, DEMO_TRAINING_RECORD, record_demo_model, recorded_demo_model
from cladebench.cli import main
from cladebench.models.registry import ModelLoadError, list_models, resolve_model
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(root))
    return root


def _trained(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / DEMO_TRAINING_RECORD).write_text("{}")
    return folder


def test_demo_resolves_to_the_recorded_checkpoint(cache: Path) -> None:
    folder = _trained(cache / "models" / "demo-clip-w0-s0-generated-0123456789ab")
    assert record_demo_model(folder) == cache / "models" / DEMO_MODEL_RECORD
    spec = resolve_model("demo")
    assert (spec.id, spec.source, spec.alias, spec.kind) == (f"local-dir:{folder.resolve()}", "local-dir", "demo",
                                                               "clip")
    assert spec.column == "emb_demo"  # the column `cladebench demo` embeds into
    assert resolve_model("DEMO") == spec
    assert resolve_model(spec.id) == spec.replace(alias=None)  # the same weights named by path
    assert "demo" in list_models()


def test_demo_before_the_demo_has_run_is_one_line_and_exit_6(cache: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ModelLoadError, match=r"run `cladebench demo` \(or `cladebench demo-model train`\) first"):
        resolve_model("demo")
    assert not (cache / "models").exists()  # resolving reads the cache, never creates it
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    code = main(["eval", "zeroshot", str(dataset), "--model", "demo", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 6, err
    assert len(err.strip().splitlines()) == 1 and "cladebench demo" in err, err
    assert not (tmp_path / "run").exists()


def test_a_recorded_checkpoint_that_is_gone_or_unfinished_is_not_trained(cache: Path) -> None:
    folder = _trained(cache / "models" / "demo-clip-a")
    record_demo_model(folder)
    assert recorded_demo_model() == folder.resolve()
    (folder / DEMO_TRAINING_RECORD).unlink()  # a training that never finished leaves no training record
    assert recorded_demo_model() is None
    with pytest.raises(ModelLoadError):
        resolve_model("demo")
    (cache / "models" / DEMO_MODEL_RECORD).write_text("not json")
    assert recorded_demo_model() is None
