"""The demo model's held-out evaluation scores as the zero-shot task does: its labels, prompts, scores and top-1.

The evaluation runs inside a training, on photos it renders itself; `cladebench eval` zero-shot runs on an
embedding column. Given the same photos (lossless PNG, so the same pixels and the same vectors) and, at each
rank, the same label set, the two must agree to the image.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench import store
from cladebench.taxonomy import RANK_COLUMNS

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.demo import model as dm
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.models import load_encoder
from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot, zero_shot_metrics

SMALL = dm.DemoModelConfig(steps=12, batch_size=16, training_images=256, vision_width=8, text_width=32, text_layers=1,
                           embed_dim=16, warmup=2, coarse_fraction=0.5, workers=0, eval_images=0)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"local-dir:{dm.train_demo_model(SMALL, tmp_path_factory.mktemp('demo') / 'small', progress=False)}"


@pytest.mark.slow
def test_held_out_evaluation_equals_the_zero_shot_task_at_every_rank(small_model: str, tmp_path: Path) -> None:
    world = dm.demo_world(0)
    n = len(world.species)  # one photo of each species: the task's label set (the rows' taxa) is the world's
    result = dm.evaluate_zero_shot(small_model, n_images=n, name_styles=("taxon",), workers=0,
                                   text_cache_dir=tmp_path / "text-cache")
    path = tmp_path / "held-out.lance"
    store.write_dataset(dm.held_out_table(world, n, image_format="png"), path)
    encoder = load_encoder(small_model, device="cpu")
    embed_dataset(EmbedConfig(dataset=str(path), model=small_model, column="emb_demo", device="cpu"), encoder=encoder)
    dataset = store.open_dataset(path)
    for rank in RANK_COLUMNS:
        predictions = zero_shot(dataset, encoder, ZeroShotConfig(rank=rank, name_style="taxon", column="emb_demo"))
        task = zero_shot_metrics(predictions)[f"top1_{rank}"]
        assert task["n"] == n
        # Rounded to 4 places in the record; one image is 1/128 of the score, so this is the same count.
        assert result["top1"][rank] == pytest.approx(task["value"], abs=1e-4), rank
        assert result["labels"][rank] == predictions.info["label_set"]["size"], rank


def test_the_recorded_numbers_say_how_they_differ_from_the_task(small_model: str) -> None:
    result = dm.evaluate_zero_shot(small_model, n_images=4, name_styles=("taxon",), workers=0)
    assert "cladebench.tasks.zeroshot" in result["definition"] and "not rolled up" in result["definition"]
    assert result["labels"]["species"] == 128  # the world's taxa, though 4 photos show at most 4 species
