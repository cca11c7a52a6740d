"""End to end with real signal: the demo model (trained on the synthetic world) through
dataset -> embed -> zero-shot task -> run record, on held-out images and observers.

With random weights every number is chance, so a shuffled label set, a missing normalisation or a
wrong template would go unnoticed. Here the correct pipeline must be far above chance, and each of
those mistakes, made on purpose, must bring it down.

Measured on the 384 held-out images, 128 species (chance 0.78%): correct 36.7%; shuffled labels 0.26%;
no pixel normalisation 1.04%; bare epithets without the template 17.7%; raw (unnormalised) text
vectors scored by dot product 34.6%. The thresholds below leave room around those figures.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cladebench import store
from cladebench.metrics import accuracy

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.demo.model import demo_model_id, demo_world, held_out_table
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.configs import ZeroShotEvalConfig
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import run_eval
from cladebench.models import class_text_embeddings, load_encoder
from cladebench.store.embeddings import valid_embeddings
from cladebench.tasks.common import classify, label_set
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

pytestmark = pytest.mark.slow

HELD_OUT_IMAGES = 384


@pytest.fixture(scope="module")
def held_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    model = demo_model_id(progress=False)
    path = tmp_path_factory.mktemp("e2e") / "held-out.lance"
    store.write_dataset(held_out_table(demo_world(0), HELD_OUT_IMAGES), path)
    embed_dataset(EmbedConfig(dataset=str(path), model=model, column="emb_demo", device="cpu", progress=False))
    return path, model


def _pieces(path: Path, model: str) -> tuple[object, np.ndarray, list[Lineage], object]:
    encoder = load_encoder(model, device="cpu")
    dataset = store.open_dataset(path)
    rows, vectors = valid_embeddings(dataset, "emb_demo", columns=("uuid", *RANK_COLUMNS, "common_name"))
    lineages = [Lineage.from_row(r) for r in rows.to_pylist()]
    return encoder, vectors, lineages, label_set(lineages, Rank.SPECIES)


def _top1(probs: np.ndarray, lineages: list[Lineage], labels: object) -> float:
    index = {key: i for i, key in enumerate(labels.taxa)}
    targets = np.array([index[lin.key(Rank.SPECIES)] for lin in lineages])
    return accuracy(probs.argmax(axis=1) == targets).value


def test_correct_pipeline_is_far_above_chance_and_higher_ranks_are_easier(held_out: tuple[Path, str],
                                                                           tmp_path: Path) -> None:
    path, model = held_out
    _, run_path = run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "run",
                                              device="cpu", group_by="none"))
    loaded = RunRecord.read(run_path)
    chance = 1.0 / loaded.provenance["label_set"]["size"]
    species = loaded.metrics["top1_species"]
    assert species["low"] > 10 * chance, species
    assert loaded.metrics["top1_genus"]["value"] > species["value"]
    assert loaded.metrics["top1_family"]["value"] > species["value"]
    assert loaded.metrics["top1_kingdom"]["value"] > 0.8
    assert loaded.provenance["dataset"]["evaluated_rows"] == HELD_OUT_IMAGES


def test_shuffled_labels_fall_to_chance(held_out: tuple[Path, str]) -> None:
    encoder, vectors, lineages, labels = _pieces(*held_out)
    texts = labels.texts("taxon")
    correct = classify(vectors, class_text_embeddings(encoder, texts, "bioclip"), encoder.logit_scale)
    shuffled_texts = list(np.random.default_rng(0).permutation(texts))
    shuffled = classify(vectors, class_text_embeddings(encoder, shuffled_texts, "bioclip"), encoder.logit_scale)
    chance = 1.0 / len(labels)
    assert _top1(correct, lineages, labels) > 10 * chance
    assert _top1(shuffled, lineages, labels) < 2 * chance


def test_missing_pixel_normalisation_is_caught(held_out: tuple[Path, str], tmp_path: Path) -> None:
    """Embedding without the model's mean/std normalisation (a classic preprocessing slip)."""
    path, model = held_out
    encoder = load_encoder(model, device="cpu")
    broken = replace(encoder.preprocessing, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    encoder.preprocessing = broken
    copy = tmp_path / "copy.lance"
    store.subset(path, copy, columns=["image", *RANK_COLUMNS, "common_name"])
    embed_dataset(EmbedConfig(dataset=str(copy), model=model, column="emb_demo", device="cpu", progress=False,
                              workers=0), encoder=encoder)
    _, good_vectors, lineages, labels = _pieces(path, model)
    _, bad_vectors = valid_embeddings(store.open_dataset(copy), "emb_demo", columns=("uuid",))
    text = class_text_embeddings(encoder, labels.texts("taxon"), "bioclip")
    good = _top1(classify(good_vectors, text, encoder.logit_scale), lineages, labels)
    bad = _top1(classify(bad_vectors, text, encoder.logit_scale), lineages, labels)
    assert bad < 3 / len(labels) < good / 10, (good, bad)  # down to chance


def test_unnormalised_text_vectors_are_caught(held_out: tuple[Path, str]) -> None:
    """Raw text embeddings scored by dot product instead of cosine.

    The image side cannot show this slip (a row's norm does not change its argmax), and the demo
    model's text norms vary little, so the drop is small (36.7% -> 34.6%) but always downwards.
    """
    encoder, vectors, lineages, labels = _pieces(*held_out)
    texts = labels.texts("taxon")
    raw = np.stack([encoder.encode_texts([f"an image of {t}."])[0] for t in texts])
    good = _top1(classify(vectors, class_text_embeddings(encoder, texts, "bioclip"), encoder.logit_scale),
                 lineages, labels)
    logits = vectors @ raw.T  # no normalisation on either side
    bad = _top1(logits, lineages, labels)
    assert bad < good, (good, bad)


def test_mismatched_templates_are_caught(held_out: tuple[Path, str]) -> None:
    """Labels as bare epithets with no template: the genus is lost and the text is out of distribution.

    Accuracy halves rather than falling to chance, because epithets alone still identify most species.
    """
    encoder, vectors, lineages, labels = _pieces(*held_out)
    good = _top1(classify(vectors, class_text_embeddings(encoder, labels.texts("taxon"), "bioclip"),
                          encoder.logit_scale), lineages, labels)
    wrong = [lin.epithet for lin in labels.lineages]  # the bare epithet, no genus, no template
    bad = _top1(classify(vectors, class_text_embeddings(encoder, wrong, "raw"), encoder.logit_scale),
                lineages, labels)
    assert bad < 0.6 * good, (good, bad)
