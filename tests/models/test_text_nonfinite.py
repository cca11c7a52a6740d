"""A model whose text tower gives NaN (broken weights, a float16 overflow) is refused in one line on either scoring
path: its probabilities are NaN, so its top-1 hits would be whatever label the sort happened to put first, and the
streamed path could not even name a top label."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.errors import CladebenchError

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.evaluate.configs import ZeroShotEvalConfig
from cladebench.evaluate.run import run_eval
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import WorldConfig, make_world
from helpers.embedded import write_embedded


@pytest.fixture(scope="module")
def nan_text_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    import torch
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("nan_text")
    folder = write_tiny_model(root / "tiny", seed=3)
    weights = folder / "open_clip_model.safetensors"
    state = load_file(weights)
    state["text_projection"] = torch.full_like(state["text_projection"], float("nan"))  # the image tower is intact
    save_file(state, weights)
    model = f"local-dir:{folder}"
    world = make_world(WorldConfig(seed=1, names="generated", branching=(1, 1, 1, 1, 1, 2, 2)))
    path = root / "world.lance"
    write_embedded(world.to_table(12, seed=5, image_format="jpeg"), path, model)
    return path, model


@pytest.mark.parametrize("stream", ["never", "always"])
def test_nan_text_embeddings_are_refused(nan_text_model: tuple[Path, str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, stream: str) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    path, model = nan_text_model
    with pytest.raises(CladebenchError, match="non-finite text embeddings"):
        run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "run", device="cpu",
                                    group_by="none", stream=stream))
    assert not (tmp_path / "run" / "predictions.parquet").exists()
    assert not list((tmp_path / "cache").rglob("*.npy")), "no NaN entry is cached for the next run to read"
