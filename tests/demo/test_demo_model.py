"""The demo model: a tiny CLIP trained on the synthetic world.

Fast tests train for a few steps a model far smaller than the real one (the recipe, not the size, is
under test): determinism to the byte, the held-out split, the checkpoint loading in a fresh process,
the record and the card, the cache. One slow test trains (once, into the cache) the full model and
checks that it learned the world: far above chance on photos and observers it never saw.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cladebench.errors import CladebenchError
from cladebench.synthetic import WorldConfig, make_world
from cladebench.taxonomy import RANK_COLUMNS

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.demo import model as dm
from cladebench.demo.model import checkpoint, data, training
from cladebench.store import conform, fingerprint_uuids

# A few steps of a one-layer model: seconds, but every part of the recipe runs (captions, coarse steps,
# permutation batches, clipping, the temperature clamp, saving).
SMALL = dm.DemoModelConfig(steps=4, batch_size=8, training_images=256, vision_width=8, text_width=32, text_layers=1,
                           embed_dim=16, warmup=2, coarse_fraction=0.5, workers=0, eval_images=0)


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory) -> Path:
    return dm.train_demo_model(SMALL, tmp_path_factory.mktemp("demo") / "small", progress=False)


@pytest.fixture(scope="module")
def world():
    return dm.demo_world(0)


# --- config and split ----------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "message"), [
    ({"image_size": 80}, "multiple of 32"),
    ({"vision_tower": "vit", "vision_width": 32, "image_size": 60}, "multiple of patch_size"),
    ({"vision_tower": "vit", "vision_width": 48}, "multiple of 32"),
    ({"text_width": 40}, "multiple of 16"),
    ({"coarse_fraction": 1.5}, "coarse_fraction"),
    ({"templates": ("a photo",), "template_weights": (1.0,)}, "placeholder"),
    ({"template_weights": (1.0,)}, "one non-negative weight per template"),
    ({"name_styles": ("latin",)}, "name style"),
    ({"vision_tower": "cnn"}, "vision tower"),
    ({"seed": dm.HELD_OUT_DRAW_SEED - dm.TRAINING_DRAW_OFFSET}, "held-out draw"),
    ({"steps": 0}, "steps"),
    ({"stop_after": 0}, "stop_after"),
    ({"steps": 10, "stop_after": 11}, "stop_after"),
])
def test_config_is_validated(changes, message):
    with pytest.raises((ValueError, CladebenchError), match=message):
        dataclasses.replace(dm.DemoModelConfig(), **changes)


def test_both_vision_towers_build(world):
    import open_clip

    for tower, width in (("resnet", 8), ("vit", 32)):
        config = dataclasses.replace(SMALL, vision_tower=tower, vision_width=width)
        model_cfg, _ = dm.model_configs(config)
        model = open_clip.CLIP(**model_cfg)
        kind = type(model.visual).__name__
        assert kind == {"resnet": "ModifiedResNet", "vit": "VisionTransformer"}[tower]


def test_a_batch_larger_than_the_species_count_is_refused(tmp_path):
    config = dataclasses.replace(SMALL, batch_size=129)
    with pytest.raises(CladebenchError, match="must not show one species twice"):
        dm.train_demo_model(config, tmp_path / "m", progress=False)
    assert not (tmp_path / "m").exists() and not list(tmp_path.iterdir())  # no staging folder left behind


def test_held_out_split_shares_no_photo_and_no_observer(world):
    held = dm.held_out_observer_ids(world)
    assert held == {world.observers[i].id for i in (3, 7, 11, 15, 19, 23)}
    train = dm.training_observations(world, 1000, seed=0)
    test = dm.held_out_observations(world, 300)
    assert not {o.uuid for o in train} & {o.uuid for o in test}
    assert not {o.image_seed for o in train} & {o.image_seed for o in test}
    assert all(o.observer.id not in held for o in train)
    assert {o.observer.id for o in test} <= held and len({o.observer.id for o in test}) >= 3
    # Per-species quotas: every species is in both, as equally as the counts allow.
    for chosen, n in ((train, 1000), (test, 300)):
        counts = np.bincount([o.species.index for o in chosen], minlength=128)
        assert counts.min() == n // 128 and counts.max() == -(-n // 128)
    # A different training seed is a different draw; the same seed is the same one.
    assert [o.uuid for o in dm.training_observations(world, 1000, seed=0)] == [o.uuid for o in train]
    assert not {o.uuid for o in dm.training_observations(world, 1000, seed=1)} & {o.uuid for o in train}


def test_held_out_table_is_canonical_and_full_size(world):
    table = dm.held_out_table(world, 3, image_format="jpeg")
    conform(table)
    assert table.column("uuid").to_pylist() == [o.uuid for o in dm.held_out_observations(world, 3)]
    assert set(table.column("observer_id").to_pylist()) <= dm.held_out_observer_ids(world)
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(table.column("image")[0].as_py()))
    assert max(image.size) == world.config.image_size


def test_batches_never_repeat_a_taxon_and_are_a_function_of_the_step(world):
    species = np.array([o.species.index for o in dm.training_observations(world, 512, seed=0)])
    config = dataclasses.replace(SMALL, batch_size=128, coarse_fraction=0.5)
    plan = data.BatchPlan(config, world, species)
    ranks = set()
    for step in range(40):
        batch = plan.batch(step)
        ranks.add(batch.rank)
        taxa = [world.species[species[row]].lineage.key(batch.rank) for row in batch.pool_rows]
        assert len(set(taxa)) == len(taxa) == min(128, len(plan.taxa[batch.rank]))
        assert len(set(batch.captions)) == len(batch.captions)
        if batch.rank.column != "species":
            # Coarse captions name the taxon and nothing below it.
            row = batch.pool_rows[0]
            below = world.species[species[row]].lineage.names[batch.rank + 1]
            assert all(below not in text for text in batch.captions[:1])
    assert len(ranks) >= 4  # species steps and several coarse ranks occur
    again = data.BatchPlan(config, world, species).batch(7)
    assert again.captions == plan.batch(7).captions and (again.pool_rows == plan.batch(7).pool_rows).all()


def test_captions_are_the_photo_lineage_in_every_style_and_template(world):
    species = np.array([o.species.index for o in dm.training_observations(world, 256, seed=0)])
    config = dataclasses.replace(SMALL, batch_size=128, coarse_fraction=0.0)
    plan = data.BatchPlan(config, world, species)
    styles, templates = set(), set()
    for step in range(8):
        batch = plan.batch(step)
        for row, text in zip(batch.pool_rows, batch.captions, strict=True):
            lineage = world.species[species[row]].lineage
            matches = [(style, template) for style in config.name_styles for template in config.templates
                       if dm.caption(lineage, style, template) == text]
            assert matches, text  # every caption names its own photo's species
            styles.update(style for style, _ in matches)
            templates.update(template for _, template in matches)
    assert styles == set(config.name_styles) and templates == set(config.templates)


def test_trimmed_text_encoding_equals_open_clip(world):
    import open_clip
    import torch

    model_cfg, _ = dm.model_configs(SMALL)
    torch.manual_seed(0)
    model = open_clip.CLIP(**model_cfg).eval()
    lineage = world.species[3].lineage
    texts = [dm.caption(lineage.truncate(rank) if rank < 6 else lineage, style, template)
             for rank in range(7) for style in dm.DEFAULT_NAME_STYLES for template in dm.DEFAULT_TEMPLATES[:3]]
    tokens = open_clip.tokenize(texts, context_length=SMALL.context_length)
    lengths = (tokens != 0).sum(dim=1)
    assert lengths.max() > 2 * lengths.min()  # the groups really are cut to different lengths
    with torch.no_grad():
        full = model.encode_text(tokens, normalize=True)
        for groups in (1, 2, 3):
            trimmed = training.encode_text_trimmed(model, tokens, groups=groups)
            assert torch.allclose(full, trimmed, atol=1e-5), groups


# --- training ------------------------------------------------------------------------------------


def test_same_seed_gives_identical_weights_and_another_seed_does_not(small_dir, tmp_path):
    weights = "open_clip_model.safetensors"
    same = dm.train_demo_model(SMALL, tmp_path / "same", progress=False)
    other = dm.train_demo_model(dataclasses.replace(SMALL, seed=1), tmp_path / "other", progress=False)
    assert (same / weights).read_bytes() == (small_dir / weights).read_bytes()
    assert (other / weights).read_bytes() != (small_dir / weights).read_bytes()
    assert (same / "open_clip_config.json").read_bytes() == (small_dir / "open_clip_config.json").read_bytes()
    first, again = (json.loads((d / "training.json").read_text()) for d in (small_dir, same))
    assert first["loss"]["curve"] == again["loss"]["curve"]
    assert first["data"]["fingerprint"] == again["data"]["fingerprint"]


def test_an_early_checkpoint_is_the_same_training_stopped_early(small_dir, tmp_path):
    from safetensors.numpy import load_file

    early = dataclasses.replace(SMALL, stop_after=2)
    folder = dm.train_demo_model(early, tmp_path / "early", progress=False)
    full = json.loads((small_dir / "training.json").read_text())
    record = json.loads((folder / "training.json").read_text())
    # The same batches and schedule: its loss curve is the full training's first steps, to the last digit.
    assert record["loss"]["curve"] == full["loss"]["curve"][:2] and len(full["loss"]["curve"]) == SMALL.steps
    assert record["config"]["stop_after"] == 2 and record["config"]["steps"] == SMALL.steps
    weights = load_file(str(folder / "open_clip_model.safetensors"))
    final = load_file(str(small_dir / "open_clip_model.safetensors"))
    assert any(not np.array_equal(weights[name], final[name]) for name in final)
    assert "early checkpoint" in (folder / "README.md").read_text()


def test_the_early_checkpoint_is_cached_beside_the_full_model_under_its_own_key(tmp_path):
    early = dm.early_config(dm.DemoModelConfig())
    assert early.stop_after == round(dm.EARLY_FRACTION * early.steps) and dm.trained_steps(early) == early.stop_after
    assert dm.early_config(SMALL).stop_after == 1  # never zero steps
    assert dm.cache_key(early) != dm.cache_key(dm.DemoModelConfig())
    # A full training's key is computed as before the field existed, so a full model cached then is still found.
    world = dm.demo_world(0)
    fields = {k: v for k, v in SMALL.to_dict().items() if k not in ("workers", "stop_after")}
    before = {"recipe": dm.RECIPE_VERSION, "config": fields, "world": dm.world_identity(world)}
    assert dm.cache_key(SMALL, world) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    full_dir = dm.demo_model_dir(tmp_path)
    early_dir = dm.demo_model_dir(tmp_path, config=early)
    assert early_dir.parent == full_dir.parent and early_dir.name.endswith(f"-step{early.stop_after}")
    assert not full_dir.name.endswith(f"-step{early.stop_after}")


def test_torch_settings_are_restored_after_training(tmp_path):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        dm.train_demo_model(dataclasses.replace(SMALL, steps=1), tmp_path / "m", progress=False)
        assert torch.get_num_threads() == 1
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.set_num_threads(threads)


def test_checkpoint_loads_as_local_dir_in_a_fresh_process(small_dir):
    code = f"""
import json, numpy as np
from cladebench.models import load_encoder
from cladebench.demo.model import demo_world
encoder = load_encoder("local-dir:{small_dir}", device="cpu")
world = demo_world(0)
images = encoder.encode_pil([world.render(0, seed=1), world.render(5, seed=2)])
texts = encoder.encode_texts(["an image of " + world.species[0].lineage.label("taxon_com") + "."])
print(json.dumps({{"images": list(images.shape), "texts": list(texts.shape), "finite": bool(np.isfinite(images).all()),
                  "size": list(encoder.preprocessing.size), "revision": encoder.revision}}))
"""
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["images"] == [2, SMALL.embed_dim] and loaded["texts"] == [1, SMALL.embed_dim]
    assert loaded["finite"] and loaded["size"] == [SMALL.image_size, SMALL.image_size]
    assert loaded["revision"].startswith("sha256:")


def test_training_record_and_model_card(small_dir, world):
    record = json.loads((small_dir / "training.json").read_text())
    assert record["config"] == SMALL.to_dict() and record["seed"] == SMALL.seed
    assert record["world"]["name_source"] == world.name_source
    assert record["world"]["provenance"]["config"]["seed"] == 0
    assert record["cache_key"] == dm.cache_key(SMALL)
    uuids = [o.uuid for o in dm.training_observations(world, SMALL.training_images, seed=SMALL.seed)]
    assert record["data"]["fingerprint"] == fingerprint_uuids(uuids)
    assert record["data"]["held_out_observer_ids"] == sorted(dm.held_out_observer_ids(world))
    assert len(record["loss"]["curve"]) == SMALL.steps and all(np.isfinite(record["loss"]["curve"]))
    assert record["seconds"]["total"] > 0 and record["seconds"]["train"] > 0
    assert record["software"]["torch"] and record["software"]["open_clip_torch"]
    assert record["evaluation"] is None  # eval_images=0
    card = (small_dir / "README.md").read_text()
    assert "synthetic world" in card and "demos and tests only" in card
    assert "mean nothing about real organisms" in card
    config = json.loads((small_dir / "open_clip_config.json").read_text())
    assert config["preprocess_cfg"]["size"] == SMALL.image_size and config["cladebench"]["demo_model"] is True


def test_evaluation_is_recorded_and_reports_every_rank(tmp_path):
    config = dataclasses.replace(SMALL, eval_images=16)
    folder = dm.train_demo_model(config, tmp_path / "m", progress=False)
    evaluation = json.loads((folder / "training.json").read_text())["evaluation"]
    assert set(evaluation["top1"]) == set(RANK_COLUMNS) and evaluation["n_images"] == 16
    assert evaluation["labels"]["species"] == 128 and evaluation["chance"]["species"] == pytest.approx(1 / 128)
    assert set(evaluation["by_name_style"]) == {"taxon", "sci", "com", "taxon_com"}
    assert all(0.0 <= v <= 1.0 for v in evaluation["top1"].values())
    assert "model_id" not in evaluation  # the staging path is not recorded
    assert "| species |" in (folder / "README.md").read_text()


def test_evaluation_refuses_the_training_draw(small_dir):
    with pytest.raises(CladebenchError, match="training draw"):
        dm.evaluate_zero_shot(f"local-dir:{small_dir}", n_images=4, seed=dm.training_draw_seed(SMALL.seed))


def test_an_existing_output_folder_is_not_overwritten_by_accident(small_dir):
    with pytest.raises(CladebenchError, match="not empty"):
        dm.train_demo_model(SMALL, small_dir, progress=False)


def test_overwrite_replaces_only_a_demo_model(tmp_path):
    precious = tmp_path / "weights"
    precious.mkdir()
    (precious / "open_clip_model.safetensors").write_bytes(b"my own weights")
    with pytest.raises(CladebenchError, match="is not an output of `cladebench demo-model train`") as refused:
        dm.train_demo_model(SMALL, precious, progress=False, overwrite=True)
    assert refused.value.exit_code == 1
    assert [p.name for p in precious.iterdir()] == ["open_clip_model.safetensors"]
    assert (precious / "open_clip_model.safetensors").read_bytes() == b"my own weights"


def test_a_demo_model_from_before_markers_may_be_overwritten(small_dir, tmp_path):
    import shutil

    legacy = tmp_path / "legacy"
    shutil.copytree(small_dir, legacy)
    (legacy / ".cladebench-output.json").unlink()
    dm.train_demo_model(SMALL, legacy, progress=False, overwrite=True)
    assert json.loads((legacy / ".cladebench-output.json").read_text())["writer"] == "demo-model train"


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_killed_trainings_staging_folder_is_removed_by_the_next(tmp_path):
    fields = {f.name: getattr(SMALL, f.name) for f in dataclasses.fields(SMALL)
              if f.name in ("steps", "batch_size", "training_images", "vision_width", "text_width", "text_layers",
                            "embed_dim", "warmup", "coarse_fraction", "workers", "eval_images")}
    script = f"""
import os, signal
from pathlib import Path
from cladebench.demo import model as dm
from cladebench.demo.model import checkpoint
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 after the photos are rendered, while training
checkpoint.train_weights = die
dm.train_demo_model(dm.DemoModelConfig(**{fields!r}), Path("model"), progress=False)
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == -9, result.stderr
    [left] = list(tmp_path.iterdir())
    assert left.name.startswith(".model.building-")
    config = dataclasses.replace(SMALL, eval_images=8)  # the evaluation's text cache goes in the staging folder
    dm.train_demo_model(config, tmp_path / "model", progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert not (tmp_path / "model" / ".work").exists() and (tmp_path / "model" / "training.json").is_file()


# --- the cache -----------------------------------------------------------------------------------


def test_demo_model_id_trains_once_into_the_cache(tmp_path, monkeypatch):
    model_id = dm.demo_model_id(tmp_path, config=SMALL, progress=False)
    folder = Path(model_id.removeprefix("local-dir:"))
    assert folder.parent == tmp_path.resolve() and (folder / "training.json").is_file()
    assert dm.cache_key(SMALL)[:12] in folder.name

    def fail(*args, **kwargs):
        raise AssertionError("a cached model must not be trained again")

    monkeypatch.setattr(checkpoint, "train_demo_model", fail)
    assert dm.demo_model_id(tmp_path, config=SMALL, progress=False) == model_id
    assert not [p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith(".")]  # no staging left


@pytest.mark.slow
def test_a_killed_trainings_staging_folder_beside_a_cached_model_is_removed(tmp_path):
    """Once the model is in the cache no call trains it again, so leftovers are cleaned on every call; a
    training killed by its parent and not yet reaped (a zombie) counts as dead."""
    model_id = dm.demo_model_id(tmp_path, config=SMALL, progress=False)
    folder = Path(model_id.removeprefix("local-dir:"))
    fields = {f.name: getattr(SMALL, f.name) for f in dataclasses.fields(SMALL)}
    script = f"""
import os, shutil, signal, sys
from pathlib import Path
from cladebench.demo import model as dm
from cladebench.demo.model import checkpoint
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 while training
checkpoint.train_weights = die
dm.train_demo_model(dm.DemoModelConfig(**{fields!r}), Path(sys.argv[1]), progress=False, overwrite=True)
"""
    child = subprocess.Popen([sys.executable, "-c", script, str(folder)])
    try:
        deadline = time.monotonic() + 120
        while _state(child.pid) != "Z":  # killed, not reaped: its pid still answers a signal probe
            assert time.monotonic() < deadline, "the child never reached its kill"
            time.sleep(0.05)
        [left] = [p for p in tmp_path.iterdir() if ".building-" in p.name]
        assert dm.demo_model_id(tmp_path, config=SMALL, progress=False) == model_id
        assert not left.exists() and (folder / "training.json").is_file()
    finally:
        child.wait()


def _state(pid: int) -> str:
    """A process's state letter from /proc (``Z``: a zombie)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_cache_key_names_the_world_and_the_config():
    inat_world = dm.demo_world(0)
    generated = make_world(WorldConfig(seed=0, names="generated"))
    assert dm.cache_key(SMALL, generated) != dm.cache_key(SMALL, inat_world) or inat_world.name_source == "generated"
    assert dm.cache_key(SMALL) != dm.cache_key(dataclasses.replace(SMALL, seed=1))
    assert dm.cache_key(SMALL) != dm.cache_key(dataclasses.replace(SMALL, world_seed=1))
    assert dm.cache_key(SMALL) == dm.cache_key(dataclasses.replace(SMALL, workers=2))  # speed only
    assert dm.world_identity(generated)["name_source"] == "generated"


def test_the_module_imports_without_torch():
    code = "import sys, cladebench.demo.model; assert 'torch' not in sys.modules and 'open_clip' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the full model ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_full_demo_model_learned_the_world():
    """Trains the full model once into the cache (a few minutes on 2 cores), then evaluates it on a held-out
    draw of its own, not the one recorded in training.json."""
    model_id = dm.demo_model_id(progress=False)
    result = dm.evaluate_zero_shot(model_id, n_images=512, seed=dm.HELD_OUT_DRAW_SEED + 1)
    top1, chance = result["top1"], result["chance"]
    assert top1["species"] > 10 * chance["species"], top1
    assert top1["genus"] > top1["species"] and top1["family"] > top1["species"], top1
    assert top1["kingdom"] > 0.75 and top1["class"] > 3 * chance["class"], top1
    for style in ("sci", "com", "taxon_com"):
        assert result["by_name_style"][style]["species"] > 10 * chance["species"], (style, result["by_name_style"])


def test_the_train_verb_writes_a_checkpoint_where_asked(tmp_path, monkeypatch, capsys):
    """`cladebench demo-model train --out DIR --seed N --steps S` with the small recipe standing in for the full."""
    from cladebench.cli import main

    small = dataclasses.replace(SMALL, eval_images=8)
    monkeypatch.setattr(dm, "DemoModelConfig", lambda **kw: dataclasses.replace(small, **kw))
    out = tmp_path / "verb"
    assert main(["demo-model", "train", "--out", str(out), "--seed", "3", "--steps", "2"]) == 0
    record = json.loads((out / "training.json").read_text())
    assert record["seed"] == 3 and record["config"]["steps"] == 2
    printed = capsys.readouterr().out
    assert f"local-dir:{out}" in printed and "held-out zero-shot top-1: " in printed and "species" in printed
    assert main(["demo-model", "train", "--out", str(out)]) == 1  # refuses to overwrite without --overwrite
